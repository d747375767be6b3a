"""The flags of `predict` and `recommend` as one `Question` (`costmodel.answers.question.build_question`, where every
input is validated once, as the dashboard's are)."""

from __future__ import annotations

import argparse

from ..answers.question import Question, build_question
from ..answers.workload import Workload
from ..profiles.store import load_profile
from .placement_args import arch_overrides, effective_preset, free_bytes
from .scenario_args import _grid, _model_fields, _single


def question_from_args(args: argparse.Namespace, workload: Workload | None = None) -> Question:
    """The question the flags ask: one scenario (one value per flag), the profile, the draft, the impact and
    verification inputs and, for `recommend`, the workload."""
    profile = load_profile(args.profile)
    model = _single(_model_fields(args), "preset/--vocab")
    grid = {k: _single(v, k.replace("_", "-")) for k, v in _grid(args).items()
            if not (workload is not None and k == "batch")}
    return build_question({**model, **grid}, profile, preset=effective_preset(args),
                          arch_overrides=arch_overrides(args), workload=workload, kv_len=args.kv_len,
                          forward_us=args.forward_us, free_bytes=free_bytes(args),
                          placement=getattr(args, "placement", None), itl_ms=args.itl_ms,
                          acceptance_length=args.acceptance_length, method=getattr(args, "method", None),
                          verify=args.verify, greedy_fraction=args.greedy_fraction, target_dtype=args.target_dtype,
                          max_batch=getattr(args, "max_batch", 65536.0), **fabric_kwargs(args),
                          preset_named=bool((getattr(args, "preset", None) or "").strip()))


def fabric_kwargs(args: argparse.Namespace) -> dict:
    """--fabric / --nics-per-node / --nic-gbps as `build_question` / `profile_on_fabric` keywords."""
    return {"fabric": getattr(args, "fabric", None), "nics_per_node": getattr(args, "nics_per_node", None),
            "nic_gbit": getattr(args, "nic_gbps", None)}
