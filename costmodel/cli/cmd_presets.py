"""`presets`: the model presets (data/presets/models.csv) as a text table, read with the csv module.

The table is the one pandas prints for `costmodel.profiles.presets.presets()` (`to_string(index=False)`; a test
checks they agree), without importing pandas: every cell right-justified to its column's width, one space between
columns; a numeric or boolean column's header takes one extra leading space, as pandas leaves room for a sign.
"""

from __future__ import annotations

import argparse
import csv

from ..profiles.paths import PRESETS_CSV

# read as `presets()` does: true when the text is "true" (any case)
BOOL_COLUMNS = ("d2t", "softcap", "draft_fc_per_step", "draft_lm_head_shared")


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def preset_table_text() -> str:
    """The presets table as text (module doc)."""
    with open(PRESETS_CSV, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    columns = []
    for j, name in enumerate(header):
        values = [r[j] for r in body]
        if name in BOOL_COLUMNS:
            cells, numeric = [str(v.lower() == "true") for v in values], True
        elif values and all(_is_int(v) for v in values):
            cells, numeric = [str(int(v)) for v in values], True
        else:
            cells, numeric = values, False
        width = max([len(c) for c in cells] + [len(name) + numeric])
        columns.append([name.rjust(width), *(c.rjust(width) for c in cells)])
    return "\n".join(" ".join(line) for line in zip(*columns, strict=True))


def run(args: argparse.Namespace) -> int:
    print(preset_table_text())
    return 0
