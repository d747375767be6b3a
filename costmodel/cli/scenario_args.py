"""The scenario flags as values: integer lists and ranges, the model fields and grid, and the Scenario they build.

Used when a pricing command runs (the parser itself is `costmodel.cli.options`). Every parser here raises
`InputError` with one line naming the flag; a list holds at most MAX_LIST_VALUES values.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..answers.question import DEFAULT_ENGINE
from ..io.errors import InputError
from ..io.schema_names import DTYPES
from ..model.engines import ENGINES
from ..model.scenario import COLLECTIVE_IMPLS, Scenario
from ..profiles.presets import preset, preset_logit_ops
from .options import DEFAULT_PRESET, INT_FLAG_MAX, MAX_LIST_VALUES, parse_choice_list


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


def _bool_list(text: str, name: str) -> list[bool]:
    mapping = {"on": True, "true": True, "1": True, "yes": True, "off": False, "false": False, "0": False, "no": False}
    return [mapping[v] for v in parse_choice_list(text.lower(), name, list(mapping))]


# -- the scenario ---------------------------------------------------------------------
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
        **_host_and_serving(args),
    }


def _host_and_serving(args: argparse.Namespace) -> dict[str, list]:
    """--host-op-us / --host-collective-us / --no-serving-term, only where given (the defaults add no column)."""
    out: dict[str, list] = {}
    if not getattr(args, "serving_term", True):
        out["serving_term"] = [False]
    for flag in ("host_op_us", "host_collective_us"):
        if getattr(args, flag, None) is not None:
            out[flag] = [float(getattr(args, flag))]
    return out


def _execution(args: argparse.Namespace) -> dict[str, list]:
    """--engine (an engine's per-component plan; vLLM's by default, `costmodel.answers.question.DEFAULT_ENGINE`) or
    --mode (one mode for every component: engine none), not both (`--engine none --mode eager` is the same as
    `--mode eager`)."""
    engine, mode = getattr(args, "engine", None), getattr(args, "mode", None)
    engines = parse_choice_list(engine, "engine", ENGINES) if engine is not None else None
    if mode is not None and engines is not None and engines != ["none"]:
        raise InputError("--engine: give --engine or --mode, not both (--mode sets every component's execution "
                         "and prices the logits path alone, as under --engine none)")
    if engines is None:
        engines = ["none"] if mode is not None else [DEFAULT_ENGINE]
    if engines == ["none"]:
        return {"engine": engines, "mode": parse_choice_list(mode or "graph", "mode", ("graph", "eager"))}
    if "none" in engines and mode is not None:
        raise InputError("--engine: give --engine or --mode, not both")
    return {"engine": engines, "mode": ["graph"]}


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

