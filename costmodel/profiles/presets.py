"""Model presets (data/presets/models.csv): target vocab, hidden size and a typical draft set-up.

`preset` / `preset_logit_ops` (what the CLI's scenario needs) read the file with the csv module; `presets()`, the
whole table as a frame, is the only function that imports pandas.
"""

from __future__ import annotations

import csv
from functools import lru_cache
from typing import TYPE_CHECKING

from ..io.errors import InputError
from .paths import PRESETS_CSV

if TYPE_CHECKING:
    import pandas as pd

DRAFT_INT_FIELDS = ("draft_layers", "draft_hidden", "draft_heads", "draft_kv_heads", "draft_head_dim",
                    "draft_intermediate", "draft_qkv_in_mult", "draft_fc_in_mult", "draft_experts_resident",
                    "draft_experts_active")
DRAFT_BOOL_FIELDS = ("draft_fc_per_step", "draft_lm_head_shared")


@lru_cache(maxsize=1)
def presets() -> pd.DataFrame:
    """All presets, indexed by `preset` id."""
    import pandas as pd  # only for the frame (module doc)

    frame = pd.read_csv(PRESETS_CSV, dtype={"d2t": str})
    frame["d2t"] = frame["d2t"].str.lower().eq("true")
    for col in ("softcap", *DRAFT_BOOL_FIELDS):
        if col in frame.columns:
            frame[col] = frame[col].astype(str).str.lower().eq("true")
    return frame.set_index("preset")


@lru_cache(maxsize=1)
def _preset_rows() -> dict[str, dict[str, str]]:
    """preset id -> its CSV row (text cells), in file order (the first of a repeated id, as `presets().loc`
    would refuse it anyway)."""
    with open(PRESETS_CSV, newline="", encoding="utf-8") as f:
        rows: dict[str, dict[str, str]] = {}
        for row in csv.DictReader(f):
            rows.setdefault(row["preset"], row)
    return rows


def _true(text: str | None) -> bool:
    """A boolean cell as `presets()` reads it: true when the text is "true" (any case); empty / missing false."""
    return (text or "").lower() == "true"


def preset(name: str) -> dict:
    """Scenario fields of one preset: vocab, draft_vocab, d2t, hidden."""
    table = _preset_rows()
    if name not in table:
        raise InputError(f"preset {name!r}: unknown (known: {', '.join(table)})")
    row = table[name]
    return {"vocab": int(row["vocab"]), "draft_vocab": int(row["draft_vocab"]), "d2t": _true(row["d2t"]),
            "hidden": int(row["hidden"])}


def preset_logit_ops(name: str) -> dict:
    """Element-wise logit ops of a preset's model: {"softcap": bool} (the final logit soft-cap)."""
    preset(name)  # validates the name
    return {"softcap": _true(_preset_rows()[name].get("softcap"))}




def preset_draft(name: str) -> dict:
    """The preset's draft architecture as plain values (costmodel.model.drafter.DraftArch's fields, without the
    `draft_` prefix) and its citation: layers, hidden, heads, kv_heads, head_dim, intermediate, qkv_in_mult,
    fc_in_mult, fc_per_step, lm_head_shared, mlp_weight_mult (resident / active experts: 1 for a dense draft), vocab
    (the draft lm_head's), source."""
    fields = preset(name)
    row = _preset_rows()[name]
    try:
        out: dict = {k.removeprefix("draft_"): int(row[k]) for k in DRAFT_INT_FIELDS}
        out["mlp_weight_mult"] = out.pop("experts_resident") / max(out.pop("experts_active"), 1)
    except (KeyError, TypeError, ValueError):
        raise InputError(f"preset {name!r}: its draft architecture columns in models.csv are missing or not numbers") \
            from None
    out.update(fc_per_step=_true(row.get("draft_fc_per_step")), lm_head_shared=_true(row.get("draft_lm_head_shared")),
               vocab=fields["draft_vocab"], source=row.get("draft_source", ""))
    return out


def preset_attention_heads(name: str) -> tuple[int, str] | None:
    """(the target's total attention heads, its model name) for a known preset, else None. Every preset's draft is
    one decoder layer of the target's shapes (models.csv `draft_source` cites the target config's
    num_attention_heads), so its `draft_heads` column is the target's head count."""
    row = _preset_rows().get(name)
    try:
        return (int(row["draft_heads"]), str(row.get("model") or name)) if row else None
    except (KeyError, TypeError, ValueError):
        return None


def preset_names() -> tuple[str, ...]:
    """Every preset id, in file order (no pandas: `presets()` is the frame)."""
    return tuple(_preset_rows())


def preset_draft_kind(name: str | None) -> str:
    """The preset's `draft` column ("EAGLE-1 ...", "MTP ...", ...); "" for an unknown or no preset."""
    return str(_preset_rows().get(name or "", {}).get("draft", "") or "")
