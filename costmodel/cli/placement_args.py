"""The placement flags as values: the draft architecture (preset + --draft-* overrides) and the memory budget."""

from __future__ import annotations

import argparse

from ..answers.question import draft_arch
from ..model.drafter import DraftArch
from .options import DEFAULT_PRESET

_OVERRIDES = {"draft_layers": "layers", "draft_hidden": "hidden", "draft_heads": "heads",
              "draft_kv_heads": "kv_heads", "draft_head_dim": "head_dim", "draft_intermediate": "intermediate"}


def arch_overrides(args: argparse.Namespace) -> dict[str, int]:
    """The --draft-* flags (and --hidden, the draft's hidden size unless --draft-hidden says otherwise) as DraftArch
    field overrides."""
    changes = {field: getattr(args, flag) for flag, field in _OVERRIDES.items() if getattr(args, flag, None)}
    if getattr(args, "hidden", None) and "hidden" not in changes:
        changes["hidden"] = int(str(args.hidden).split(",")[0])
    return changes


def arch_from_args(args: argparse.Namespace, draft_vocab: int) -> DraftArch:
    """The preset's draft architecture (the first --preset, else the default preset) with --draft-* overrides;
    the lm_head vocabulary is the scenario's draft vocab."""
    return preset_arch(args, effective_preset(args), draft_vocab)


def effective_preset(args: argparse.Namespace) -> str | None:
    """The first --preset; the default preset where neither --preset nor --vocab / --draft-vocab is given; None for
    a custom vocabulary (its draft is then the default preset's, and the answer says so)."""
    first = (getattr(args, "preset", None) or "").split(",")[0].strip()
    if first:
        return first
    return None if getattr(args, "vocab", None) or getattr(args, "draft_vocab", None) else DEFAULT_PRESET


def preset_arch(args: argparse.Namespace, name: str | None, draft_vocab: int) -> DraftArch:
    """Preset `name`'s draft architecture (the default preset's for a custom model) with the --draft-* / --hidden
    overrides, lm_head vocabulary `draft_vocab` (`costmodel.answers.question.draft_arch`; `sweep` prices each of its
    --preset list with its own)."""
    return draft_arch(name, draft_vocab, arch_overrides(args))[0]


def free_bytes(args: argparse.Namespace) -> float | None:
    gb = getattr(args, "gpu_free_gb", None)
    return None if gb is None else float(gb) * 1e9
