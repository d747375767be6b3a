"""Command-line arguments: bounded numbers, integer lists and ranges, the scenario flags and the Scenario they build.

Every parser here raises `InputError` with one line naming the flag; list values are capped (MAX_LIST_VALUES) and so
is a sweep's cartesian product (MAX_SWEEP_SCENARIOS), so a typo cannot allocate gigabytes.
"""

from __future__ import annotations

import argparse
import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..io.errors import InputError
from ..io.measurements import DTYPES
from ..model.engines import ENGINES
from ..model.scenario import COLLECTIVE_IMPLS, Scenario
from ..profiles.presets import preset, preset_logit_ops
from ..profiles.store import DEFAULT_PROFILE

HEADLINE = "local_argmax_pairs"
# the dashboard's default scenario (dashboard/state.py Inputs), so both answer the same question by default
DEFAULT_PRESET = "llama4-maverick"
DEFAULT_BATCH = "64"
DEFAULT_K = "3"


class Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """--help shows every real default ("(default: 64)"); flags and unset options show none."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


# -- value parsing ---------------------------------------------------------------
# Largest value each integer flag takes (the smallest is 1): beyond these the model's int64 arithmetic
# would overflow (--vocab 2^63 gave negative times); MAX_LIST_VALUES bounds one flag's list or range.
INT_FLAG_MAX: dict[str, int] = {"vocab": 2**31 - 1, "draft-vocab": 2**31 - 1, "hidden": 2**20, "tp": 2**16,
                                "nodes": 2**16, "batch": 2**24, "num-spec-tokens": 1024, "top-k": 4096}
MAX_LIST_VALUES = 100_000
MAX_SWEEP_SCENARIOS = 2_000_000  # sweep refuses a larger grid (~1 KB of memory per scenario)


def parse_int_list(text: str, name: str) -> list[int]:
    """'8' | '1,2,4' | 'a:b' (every integer) | 'a:b:s' (step s) | 'a:b@n' (n log-spaced integers).

    Every value must lie in 1..INT_FLAG_MAX[name]; at most MAX_LIST_VALUES values; duplicates are dropped
    (first occurrence kept)."""
    hi_limit = INT_FLAG_MAX.get(name, 2**62)
    usage = f"--{name}: cannot parse {text!r} (use 8, 1,2,4, 1:4096, 1:4096:8 or 1:4096@64)"
    out: list[int] = []

    def bounded(values: Sequence[int]) -> None:
        for v in values:
            if not 1 <= v <= hi_limit:
                raise InputError(f"--{name}: {v} is outside 1..{hi_limit}")

    try:
        for part in str(text).split(","):
            part = part.strip()
            if "@" in part:
                span, n = part.split("@")
                lo, hi = (int(x) for x in span.split(":"))
                bounded((lo, hi))
                if hi < lo or not 1 <= int(n) <= MAX_LIST_VALUES:
                    raise ValueError
                out += sorted(set(np.unique(np.round(np.geomspace(lo, hi, int(n))).astype(np.int64)).tolist()))
            elif ":" in part:
                pieces = [int(x) for x in part.split(":")]
                if len(pieces) not in (2, 3):
                    raise ValueError
                step = pieces[2] if len(pieces) == 3 else 1
                bounded(pieces[:2])
                if pieces[1] < pieces[0] or step < 1:
                    raise ValueError
                if (pieces[1] - pieces[0]) // step + 1 + len(out) > MAX_LIST_VALUES:
                    raise InputError(f"--{name}: {text!r} has more than {MAX_LIST_VALUES} values "
                                     "(use a step a:b:s or log spacing a:b@n)")
                out += list(range(pieces[0], pieces[1] + 1, step))
            else:
                value = int(part)
                bounded((value,))
                out.append(value)
            if len(out) > MAX_LIST_VALUES:
                raise InputError(f"--{name}: more than {MAX_LIST_VALUES} values")
    except InputError:
        raise
    except ValueError:
        raise InputError(usage) from None
    if not out:
        raise InputError(f"--{name}: empty")
    return list(dict.fromkeys(out))


def parse_choice_list(text: str, name: str, allowed: Sequence[str]) -> list[str]:
    """A comma list of `allowed` values, duplicates dropped (first occurrence kept)."""
    values = [v.strip() for v in str(text).split(",") if v.strip()]
    bad = [v for v in values if v not in allowed]
    if bad or not values:
        raise InputError(f"--{name}: {bad[0] if bad else text!r} is not one of {', '.join(allowed)}")
    return list(dict.fromkeys(values))


def bounded_float(lo: float, hi: float, *, low_open: bool = False) -> Any:
    """argparse `type=` for a finite float in [lo, hi] ((lo, hi] with low_open): nan / inf are refused."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value > hi or value < lo or (low_open and value == lo):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number in {'(' if low_open else '['}"
                                             f"{lo:g}, {hi:g}]")
        return value

    return parse


def bounded_int(lo: int, hi: int = 2**63 - 1) -> Any:
    """argparse `type=` for an integer in [lo, hi] (one value: '1,2' is refused)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not one integer") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is outside {lo}..{hi}")
        return value

    return parse


def _bool_list(text: str, name: str) -> list[bool]:
    mapping = {"on": True, "true": True, "1": True, "yes": True, "off": False, "false": False, "0": False, "no": False}
    return [mapping[v] for v in parse_choice_list(text.lower(), name, list(mapping))]


# -- shared arguments --------------------------------------------------------------
def _add_scenario_args(p: argparse.ArgumentParser, *, lists: bool, batch: bool = True) -> None:
    many = " (comma list or range)" if lists else ""
    p.add_argument("--profile", default=DEFAULT_PROFILE, help="bundled profile name or profile JSON path")
    p.add_argument("--preset", default=None,
                   help=f"model preset id(s) from `presets` (default {DEFAULT_PRESET} unless --vocab is given)" + many)
    p.add_argument("--vocab", default=None, help="target vocabulary, tokens (overrides the preset's)" + many)
    p.add_argument("--draft-vocab", default=None, help="draft lm_head vocabulary, tokens (default: the target's)"
                   + many)
    p.add_argument("--d2t", default=None, help="EAGLE-3 draft-to-target map: on|off (default: the preset's)" + many)
    p.add_argument("--hidden", default=None, help="draft hidden size (informational; cancels out of savings)")
    p.add_argument("--tp", default="8", help="TP size p (ranks sharing the vocab)" + many)
    p.add_argument("--nodes", default="1", help="nodes the TP group spans" + many)
    if batch:
        p.add_argument("--batch", default=DEFAULT_BATCH, help="decode batch B: rows (running requests) per draft call"
                       + many)
    p.add_argument("--num-spec-tokens", default=DEFAULT_K, help="K, draft tokens per decode step" + many)
    p.add_argument("--drafting", default="serial", help="serial (K calls of B rows) | parallel (1 call of B*K rows)"
                   + many)
    p.add_argument("--dtype", default="bf16", help="logits dtype: bf16 | fp16 | fp32" + many)
    p.add_argument("--engine", default=None,
                   help="vllm | sglang | trtllm: price each component as that engine runs it (CUDA graph or host "
                        "launches, syncs; costmodel/model/engines.py)" + many)
    p.add_argument("--mode", default=None,
                   help="graph (CUDA-graph replay) | eager (host launches every op), for every component; "
                        "default graph; not with --engine" + many)
    p.add_argument("--impl", default="torch", help="torch | fused (local strategies' kernels)" + many)
    p.add_argument("--top-k", default="1",
                   help="candidates per row: 1 = greedy argmax; k > 1 = tree / multi-candidate drafting" + many)
    p.add_argument("--collective", default="nccl",
                   help="nccl | oneshot | multimem: the all-gather / all-reduce implementation (derived; "
                        "unavailable ones fall back to NCCL)" + many)


def _model_fields(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Vocab / draft vocab / d2t / hidden combinations: --preset rows, overridden by explicit flags.

    An explicit --draft-vocab smaller than the vocab turns d2t on unless --d2t says otherwise;
    with d2t off the draft shares the target head (draft vocab = vocab).
    """
    if args.preset:
        seeds = [{**preset(n.strip()), **preset_logit_ops(n.strip())} for n in args.preset.split(",")]
    elif args.vocab or args.draft_vocab:
        seeds = [{"vocab": 202048, "draft_vocab": None, "d2t": False, "hidden": None}]
    else:
        seeds = [{**preset(DEFAULT_PRESET), **preset_logit_ops(DEFAULT_PRESET)}]
    vocabs = parse_int_list(args.vocab, "vocab") if args.vocab else [None]
    drafts = parse_int_list(args.draft_vocab, "draft-vocab") if args.draft_vocab else [None]
    d2ts = _bool_list(args.d2t, "d2t") if args.d2t else [None]
    hidden = _single(parse_int_list(args.hidden, "hidden"), "hidden", "takes one value") if args.hidden else None
    out = []
    for seed, v, dv, d in itertools.product(seeds, vocabs, drafts, d2ts):
        m = dict(seed)
        if v is not None:
            m["vocab"] = v
        if dv is not None:
            m["draft_vocab"] = dv
        if d is not None:
            m["d2t"] = d
        elif dv is not None:
            m["d2t"] = dv < m["vocab"]
        if m["draft_vocab"] is None or (not m["d2t"] and dv is None):
            m["draft_vocab"] = m["vocab"]
        if hidden is not None:
            m["hidden"] = hidden
        out.append(m)
    return out


def _grid(args: argparse.Namespace) -> dict[str, list]:
    return {
        "tp": parse_int_list(args.tp, "tp"),
        "nodes": parse_int_list(args.nodes, "nodes"),
        "batch": parse_int_list(getattr(args, "batch", "1"), "batch"),
        "num_spec_tokens": parse_int_list(args.num_spec_tokens, "num-spec-tokens"),
        "drafting": parse_choice_list(args.drafting, "drafting", ("serial", "parallel")),
        "dtype": parse_choice_list(args.dtype, "dtype", tuple(DTYPES)),
        **_execution(args),
        "impl": parse_choice_list(args.impl, "impl", ("torch", "fused")),
        "top_k": parse_int_list(getattr(args, "top_k", "1"), "top-k"),
        "collective": parse_choice_list(getattr(args, "collective", "nccl"), "collective", COLLECTIVE_IMPLS),
    }


def _execution(args: argparse.Namespace) -> dict[str, list]:
    """--engine (an engine's per-component plan) or --mode (one mode for every component), not both."""
    engine, mode = getattr(args, "engine", None), getattr(args, "mode", None)
    if engine is not None and mode is not None:
        raise InputError("--engine: give --engine or --mode, not both (--mode sets every component's execution)")
    if engine is not None:
        return {"engine": parse_choice_list(engine, "engine", ENGINES[1:]), "mode": ["graph"]}
    return {"engine": ["none"], "mode": parse_choice_list(mode or "graph", "mode", ("graph", "eager"))}


def _single(values: list, flag: str, why: str = "predict takes one value (use sweep for lists)") -> Any:
    if len(values) != 1:
        raise InputError(f"--{flag}: {why}")
    return values[0]


# -- predict -------------------------------------------------------------------------
def scenario_from_args(args: argparse.Namespace) -> Scenario:
    models = _model_fields(args)
    model = _single(models, "preset/--vocab")
    grid = {k: _single(v, k.replace("_", "-")) for k, v in _grid(args).items()}
    return Scenario(**model, **grid)


def check_impact_args(args: argparse.Namespace) -> None:
    """--itl-ms and --acceptance-length go together (TPOT needs both)."""
    if args.acceptance_length is not None and args.itl_ms is None:
        raise InputError("--acceptance-length: needs --itl-ms too")
    if args.itl_ms is not None and args.acceptance_length is None:
        raise InputError("--itl-ms: needs --acceptance-length too (mean tokens per decode step, 1..K+1)")


ITL_MS = bounded_float(0.0, 1e6, low_open=True)  # ms per decode step: (0, 1000 s]
ACCEPTANCE = bounded_float(1.0, 1025.0)  # tokens per decode step: 1..K+1 (checked against K later)
