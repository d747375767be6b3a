"""`presets`: the model presets (data/presets/models.csv) as a text table, read with the csv module.

The table is the one pandas prints for `costmodel.profiles.presets.presets()` (`to_string(index=False)`; a test
checks they agree), without importing pandas: every cell right-justified to its column's width, one space between
columns; a numeric or boolean column's header takes one extra leading space, as pandas leaves room for a sign.
`presets` prints the main columns (NARROW_COLUMNS) within WIDTH characters; `presets --wide` every column.
"""

from __future__ import annotations

import argparse
import csv
from collections.abc import Sequence

from ..profiles.paths import PRESETS_CSV

# `presets` without --wide: these columns, within WIDTH characters (the full table is 881 wide)
NARROW_COLUMNS = ("preset", "vocab", "hidden", "draft_vocab", "d2t", "draft")
WIDTH = 100
# read as `presets()` does: true when the text is "true" (any case)
BOOL_COLUMNS = ("d2t", "softcap", "draft_fc_per_step", "draft_lm_head_shared")


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _cut(cells: list[str], width: int) -> list[str]:
    """Text cells cut to `width` characters ("..." marks a cut)."""
    return [c if len(c) <= width else c[: max(width - 3, 0)] + "..." for c in cells]


def preset_table_text(columns: Sequence[str] | None = None, width_chars: int | None = None) -> str:
    """The presets table as text (module doc): every column, or `columns` in that order; with `width_chars` the
    last column's text is cut so every line fits."""
    with open(PRESETS_CSV, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    out = []
    for name in columns or header:
        j = header.index(name)
        values = [r[j] for r in body]
        if name in BOOL_COLUMNS:
            cells, numeric = [str(v.lower() == "true") for v in values], True
        elif values and all(_is_int(v) for v in values):
            cells, numeric = [str(int(v)) for v in values], True
        else:
            cells, numeric = values, False
        if width_chars is not None and name == (columns or header)[-1] and not numeric:
            used = sum(len(col[0]) + 1 for col in out)
            cells = _cut(cells, max(width_chars - used, len(name)))
        width = max([len(c) for c in cells] + [len(name) + numeric])
        out.append([name.rjust(width), *(c.rjust(width) for c in cells)])
    return "\n".join(" ".join(line) for line in zip(*out, strict=True))


def run(args: argparse.Namespace) -> int:
    if getattr(args, "wide", False):
        print(preset_table_text())
        return 0
    print(preset_table_text(NARROW_COLUMNS, WIDTH))
    print(f"({len(preset_columns()) - len(NARROW_COLUMNS)} more columns - the model, sources and the draft's "
          "architecture: `argmax-tp presets --wide`)")
    return 0


def preset_columns() -> list[str]:
    """The header of data/presets/models.csv."""
    with open(PRESETS_CSV, newline="", encoding="utf-8") as f:
        return next(csv.reader(f))
