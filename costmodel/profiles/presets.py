"""Model presets (data/presets/models.csv): target vocab, hidden size and a typical draft set-up."""

from __future__ import annotations

from functools import lru_cache

import pandas as pd

from ..io.errors import InputError
from .paths import PRESETS_CSV


@lru_cache(maxsize=1)
def presets() -> pd.DataFrame:
    """All presets, indexed by `preset` id."""
    frame = pd.read_csv(PRESETS_CSV, dtype={"d2t": str})
    frame["d2t"] = frame["d2t"].str.lower().eq("true")
    if "softcap" in frame.columns:
        frame["softcap"] = frame["softcap"].astype(str).str.lower().eq("true")
    return frame.set_index("preset")


def preset(name: str) -> dict:
    """Scenario fields of one preset: vocab, draft_vocab, d2t, hidden."""
    table = presets()
    if name not in table.index:
        raise InputError(f"preset {name!r}: unknown (known: {', '.join(table.index)})")
    row = table.loc[name]
    return {"vocab": int(row["vocab"]), "draft_vocab": int(row["draft_vocab"]), "d2t": bool(row["d2t"]),
            "hidden": int(row["hidden"])}


def preset_logit_ops(name: str) -> dict:
    """Element-wise logit ops of a preset's model: {"softcap": bool} (the final logit soft-cap)."""
    preset(name)  # validates the name
    row = presets().loc[name]
    return {"softcap": bool(row["softcap"]) if "softcap" in row.index else False}
