"""The placement flags as values: the draft architecture (preset + --draft-* overrides) and the memory budget."""

from __future__ import annotations

import argparse
from dataclasses import replace

from ..model.drafter import DraftArch
from ..profiles.presets import preset_draft
from .options import DEFAULT_PRESET

_OVERRIDES = {"draft_layers": "layers", "draft_hidden": "hidden", "draft_heads": "heads",
              "draft_kv_heads": "kv_heads", "draft_head_dim": "head_dim", "draft_intermediate": "intermediate"}


def arch_from_args(args: argparse.Namespace, draft_vocab: int) -> DraftArch:
    """The preset's draft architecture (the first --preset, else the default preset) with --draft-* overrides;
    the lm_head vocabulary is the scenario's draft vocab."""
    return preset_arch(args, (args.preset or DEFAULT_PRESET).split(",")[0].strip(), draft_vocab)


def preset_arch(args: argparse.Namespace, name: str, draft_vocab: int) -> DraftArch:
    """Preset `name`'s draft architecture with the --draft-* / --hidden overrides, lm_head vocabulary `draft_vocab`
    (`arch_from_args` for one preset; `sweep` prices each of its --preset list with its own)."""
    arch = DraftArch.from_fields({**preset_draft(name), "vocab": int(draft_vocab)})
    changes = {field: getattr(args, flag) for flag, field in _OVERRIDES.items() if getattr(args, flag, None)}
    if getattr(args, "hidden", None) and "hidden" not in changes:
        changes["hidden"] = int(str(args.hidden).split(",")[0])
    return replace(arch, **changes) if changes else arch  # re-validated by __post_init__


def free_bytes(args: argparse.Namespace) -> float | None:
    gb = getattr(args, "gpu_free_gb", None)
    return None if gb is None else float(gb) * 1e9
