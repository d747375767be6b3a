"""`argmax-tp` / `python -m costmodel` - predict, recommend, sweep, predict-points, validate, profiles, presets.

Plus launchers that hand over to the dashboard and the calibration tools (`dashboard`,
`calibrate-collectives`, `calibrate-kernels`, `verify` need torch - the `calibrate` extra -;
`fit`, `import-nccl-tests` do not). Every user error prints one line `error: <message>` on
stderr and exits 2.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import math
import runpy
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .compare import FAMILIES, compare_table, compare_wide, gpu_family
from .engines import ENGINES, PLANS, host_costs
from .errors import InputError, OneLineParser, first_line
from .kernels import kernel_context
from .points import predict_points
from .predict import Prediction, crossover, predict
from .presets import preset, preset_logit_ops, presets
from .profile import DEFAULT_PROFILE, Profile, bundled_profiles, check_tp_placement, load_profile
from .recommend import impact_change
from .safe_io import write_csv
from .scenario import COLLECTIVE_IMPLS, Scenario
from .schema import DTYPES, read_measurements
from .strategies import BASELINE, DESCRIPTIONS

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
                        "launches, syncs; costmodel/engines.py)" + many)
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


def prediction_dict(pred: Prediction, *, max_batch: float = 65536.0, itl_ms: float | None = None,
                    acceptance_length: float | None = None) -> dict[str, Any]:
    """The `predict --json` object for a single scenario."""
    sc, prof = pred.scenario, pred.profile
    strategies = {}
    for name, r in pred.strategies.items():
        entry: dict[str, Any] = {
            "description": DESCRIPTIONS[name],
            "total_us": float(r.total_us),
            "components": {k: float(v) for k, v in r.components_us.items()},
            "wire_bytes_per_rank": float(r.wire_bytes_per_rank),
            "valid": bool(r.valid),
            "extrapolated": bool(r.extrapolated),
            "saving_per_draft_step_us": float(pred.saving_us(name)),
            "saving_per_decode_step_us": float(pred.saving_per_decode_step_us(name)),
            "saving_pct": float(pred.saving_pct(name)),
        }
        if name != BASELINE:
            cross = crossover(sc, name, prof, batch_range=(1.0, max_batch))
            entry["crossover_batch"] = cross.batch
            entry["crossover"] = cross.to_dict()
        else:
            entry["crossover_batch"] = None
        if itl_ms is not None:
            entry["impact"] = impact_change(float(pred.saving_per_decode_step_us(name)), itl_ms,
                                            acceptance_length or 1.0, name).to_dict()
        strategies[name] = entry
    return {
        "profile": {"name": prof.name, "title": prof.title, "kind": prof.provenance.kind,
                    "source": prof.provenance.source, "gpu": prof.provenance.gpu},
        "kernel_context": kernel_context(prof, sc),
        "scenario": sc.describe(),
        "engine": engine_dict(pred),
        "baseline": BASELINE,
        "best": str(pred.best()),
        "crossover_batch": strategies[HEADLINE]["crossover_batch"],
        "strategies": strategies,
        **_collective_provenance(pred),
    }


def _collective_provenance(pred: Prediction) -> dict[str, Any]:
    """{"collective_provenance": {op: "measured" | "derived"}} for a oneshot / multimem scenario: whether the
    profile's measured curve or the derived parameters price it (costmodel.collective_impls.provenance)."""
    from .collective_impls import IMPL_OPS, provenance

    sc = pred.scenario.item(0)
    impl = str(sc.collective)
    if impl == "nccl":
        return {}
    return {"collective_provenance": {op: provenance(pred.profile, impl, op, int(sc.tp), int(sc.nodes))
                                      for op in IMPL_OPS}}


def engine_dict(pred: Prediction) -> dict[str, Any]:
    """How the step was executed: the engine's plan (with its source) or one mode for every component."""
    sc, hc = pred.scenario.item(0), host_costs(pred.profile)
    name = str(sc.engine)
    out: dict[str, Any] = {"name": name, "host_torch_op_us": hc.torch_op_us, "host_c10d_call_us": hc.c10d_call_us,
                           "host_source": hc.source}
    if name == "none":
        out.update(execution=f"--mode {sc.mode} for every component", source="user (--mode)")
    else:
        plan = PLANS[name]
        captured = ("every component in a CUDA graph" if plan.is_captured("*")
                    else "every component launched by the host")
        out.update(execution=f"{captured}; host syncs: {', '.join(sorted(plan.sync_after)) or 'none'}"
                   + ("; head start: the lm_head GEMM" if plan.head_start else ""),
                   source=plan.source, notes=list(plan.notes), engine_default_strategy=plan.default_strategy)
    return out


def _format_table(result: dict[str, Any]) -> str:
    sc = result["scenario"]
    lines = [
        f"profile {result['profile']['name']} ({result['profile']['kind']}: {result['profile']['gpu']})",
        f"vocab {sc['vocab']} draft {sc['draft_vocab']} (V_pad {sc['padded_draft_vocab']}, shard {sc['shard']}) "
        f"d2t {'on' if sc['d2t'] else 'off'}  tp {sc['tp']} nodes {sc['nodes']}  batch {sc['batch']}  "
        f"K {sc['num_spec_tokens']} {sc['drafting']}  {sc['dtype']} impl {sc['impl']}",
        _engine_line(result),
        *_kernel_lines(result),
        "",
        f"{'strategy':30s} {'us/draft step':>13s} {'saving/step':>12s} {'saving/decode':>14s} {'crossover B':>12s}",
    ]
    for name, s in result["strategies"].items():
        cross = s.get("crossover_batch")
        cross_txt = "-" if name == result["baseline"] else ("none" if cross is None else f"{cross:.1f}")
        flag = "" if s["valid"] else ("  (invalid: packed keys are exact at top-k 1 only)"
                                      if name == "packed_allreduce_max" and sc.get("top_k", 1) > 1
                                      else "  (invalid: ids not exact in fp32)")
        lines.append(f"{name:30s} {s['total_us']:13.1f} {s['saving_per_draft_step_us']:12.1f} "
                     f"{s['saving_per_decode_step_us']:14.1f} {cross_txt:>12s}{flag}")
        if "interval" in s:
            iv, cx = s["interval"]["saving_per_draft_step_us"], s["interval"]["crossover_batch"]
            cx_txt = "" if cx is None else f", crossover {cx['low']:.1f}..{cx['high']:.1f}"
            lines.append(f"{'':30s}   90% interval: saving {iv['low']:.1f}..{iv['high']:.1f} us{cx_txt} "
                         f"-> {s['verdict']}")
        parts = ", ".join(f"{k} {v:.1f}" for k, v in s["components"].items() if v)
        lines.append(f"{'':30s}   = {parts}")
        if "impact" in s and name != result["baseline"]:
            im = s["impact"]
            gain_iv = im.get("output_throughput_gain_pct_interval")
            gain_txt = "" if not gain_iv else f" [{gain_iv['low']:+.2f}..{gain_iv['high']:+.2f}%]"
            lines.append(f"{'':30s}   ITL {im['itl_before_ms']:.3f} -> {im['itl_after_ms']:.3f} ms "
                         f"(reduction {im['itl_reduction_pct']:+.2f}%), TPOT {im['tpot_before_ms']:.3f} -> "
                         f"{im['tpot_after_ms']:.3f} ms, output throughput {im['output_throughput_gain_pct']:+.2f}%"
                         f"{gain_txt}")
    lines.append("")
    lines.append(f"fastest: {result['best']}   (savings are versus {result['baseline']}, us; positive = faster)")
    lines.extend(_decode_lines(result))
    return "\n".join(lines)


def _decode_lines(result: dict[str, Any]) -> list[str]:
    """Per decode step: the draft group, the verification group (with --verify) and the best pair."""
    step = result.get("decode_step")
    if not step:
        return [_best_pair_line(result["best_pair"])] if result.get("best_pair") else []
    ver = result.get("verification", {})
    head = "per decode step (us): draft x calls" + (f" + greedy verification of {ver['rows']:.0f} rows over "
                                                   f"vocab {ver['vocab']} at TP {ver['tp']} {ver['dtype']}, "
                                                   f"F = {ver['greedy_fraction']:g}" if ver.get("enabled") else "")
    lines = ["", head, f"{'strategy':30s} {'draft':>10s} {'verify':>10s} {'decode step':>12s} {'saving':>10s}"]
    ivs = step.get("intervals") or {}
    for name, d in step["strategies"].items():
        iv = ivs.get(name)
        iv_txt = "" if iv is None else (
            f"  [saving {iv['decode_step_saving_us']['low']:+.1f}..{iv['decode_step_saving_us']['high']:+.1f}"
            + (f", verify {iv['verify_saving_us']['low']:+.1f}..{iv['verify_saving_us']['high']:+.1f}"
               if ver.get("enabled") else "") + "]")
        lines.append(f"{name:30s} {d['draft_us']:10.1f} {d['verify_us']:10.1f} {d['decode_step_us']:12.1f} "
                     f"{d['saving_us']:10.1f}{'' if d['valid'] else '  (invalid)'}{iv_txt}")
    if ivs:
        level = next(iter(ivs.values()))["decode_step_saving_us"]["level"]
        lines.append(f"  [..]: central {level:.0%} of {next(iter(ivs.values()))['members']} (as the intervals above)")
    lines.append(_best_pair_line(result["best_pair"]))
    return lines


def _best_pair_line(bp: dict[str, Any]) -> str:
    """The verdict's best (strategy, collective) pair, per decode step, with the provenance of the collective."""
    return (f"best (strategy, collective): ({bp['strategy']}, {bp['collective']}) "
            f"{bp['decode_step_us']:.1f} us per decode step, saving {bp['saving_vs_nccl_baseline_us']:.1f} us "
            f"vs (full_all_gather, nccl){'' if bp['native'] else ' [NCCL fallback for some collectives]'}"
            + ("" if bp["collective"] == "nccl" else _impl_provenance_note(bp)))


def _impl_provenance_note(bp: dict[str, Any]) -> str:
    prov = bp.get("collective_provenance") or {}
    measured = sorted(op for op, kind in prov.items() if kind == "measured")
    if not measured:
        return "  (oneshot / multimem parameters are derived from published figures, not measured)"
    derived = sorted(op for op, kind in prov.items() if kind != "measured")
    return (f"  ({bp['collective']} {' / '.join(measured)}: measured curve"
            + (f"; {' / '.join(derived)}: derived from published figures)" if derived else ")"))


def add_decode_step(result: dict[str, Any], pred: Prediction, args: argparse.Namespace) -> None:
    """`decode_step` (draft + verification groups per strategy), `verification`, `best_pair`, `matrix`."""
    from .verification import best_pair, decode_step, matrix, verification_dict

    sc = pred.scenario
    step = decode_step(sc, pred.profile, verify=args.verify, greedy_fraction=args.greedy_fraction,
                       target_dtype=args.target_dtype)
    result["decode_step"] = {"strategies": {
        n: {"draft_us": float(step.draft_us(n)), "verify_us": float(step.verify_us(n)),
            "decode_step_us": float(step.total_us(n)), "saving_us": float(step.saving_us(n)),
            "valid": bool(step.valid(n))} for n in pred.strategies}}
    result["verification"] = verification_dict(step)
    table = matrix(sc, pred.profile, verify=args.verify, greedy_fraction=args.greedy_fraction,
                   target_dtype=args.target_dtype, max_batch=args.max_batch, crossovers=bool(args.matrix_csv))
    result["best_pair"] = best_pair(table)
    bp_impl, bp_sc = str(result["best_pair"]["collective"]), pred.scenario.item(0)
    if bp_impl != "nccl":  # measured where the profile has the implementation's curves (collective_impls.provenance)
        from .collective_impls import IMPL_OPS, provenance

        result["best_pair"]["collective_provenance"] = {
            op: provenance(pred.profile, bp_impl, op, int(bp_sc.tp), int(bp_sc.nodes)) for op in IMPL_OPS}
    result["matrix"] = [{k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in row.items()}
                        for row in table.to_dict(orient="records")]
    if args.matrix_csv:
        write_csv(table.assign(profile=pred.profile.name, top_k=int(sc.top_k), batch=float(sc.batch),
                               verify=bool(args.verify), greedy_fraction=args.greedy_fraction), args.matrix_csv)


def _kernel_lines(result: dict[str, Any]) -> list[str]:
    ctx = result.get("kernel_context") or {}
    if not ctx:
        return []
    lines = [f"kernels: {ctx['kernels']}"]
    if ctx.get("lm_head_us") is not None:
        lines.append(f"lm_head GEMM (context, common to every strategy): {ctx['lm_head_us']:.1f} us per draft step "
                     f"at hidden {result['scenario']['hidden']} ({ctx['lm_head_source']})")
    return lines


def _engine_line(result: dict[str, Any]) -> str:
    eng = result.get("engine") or {}
    if not eng:
        return f"mode {result['scenario']['mode']}"
    who = "engine none" if eng["name"] == "none" else f"engine {eng['name']} ({eng['source']})"
    return (f"{who}: {eng['execution']}; host per torch op {eng['host_torch_op_us']:g} us, "
            f"per c10d call {eng['host_c10d_call_us']:g} us")


def check_impact_args(args: argparse.Namespace) -> None:
    """--itl-ms and --acceptance-length go together (TPOT needs both)."""
    if args.acceptance_length is not None and args.itl_ms is None:
        raise InputError("--acceptance-length: needs --itl-ms too")
    if args.itl_ms is not None and args.acceptance_length is None:
        raise InputError("--itl-ms: needs --acceptance-length too (mean tokens per decode step, 1..K+1)")


def cmd_predict(args: argparse.Namespace) -> int:
    profile = load_profile(args.profile)
    check_impact_args(args)
    scenario = scenario_from_args(args)
    check_tp_placement(profile, int(scenario.tp), int(scenario.nodes))  # TP above GPUs per node needs --nodes
    if args.acceptance_length is not None and args.acceptance_length > int(scenario.num_spec_tokens) + 1:
        raise InputError(f"--acceptance-length: must be in 1..K+1 = 1..{int(scenario.num_spec_tokens) + 1} "
                         f"tokens per decode step, got {args.acceptance_length}")
    pred = predict(scenario, profile)
    result = prediction_dict(pred, max_batch=args.max_batch, itl_ms=args.itl_ms,
                             acceptance_length=args.acceptance_length)
    if args.verify or args.matrix_csv or int(scenario.top_k) > 1 or str(scenario.collective) != "nccl":
        add_decode_step(result, pred, args)
    else:  # the verdict always names the best (strategy, collective) pair (no crossovers: cheap)
        from .verification import best_pair, matrix

        result["best_pair"] = best_pair(matrix(pred.scenario, pred.profile, max_batch=args.max_batch,
                                               crossovers=False))
    if not args.no_intervals:
        add_intervals(result, pred, max_batch=args.max_batch)
        if "decode_step" in result:  # the verification group's intervals, from the same ensemble
            from .verification import decode_step_intervals

            result["decode_step"]["intervals"] = decode_step_intervals(
                pred.scenario, profile, verify=args.verify, greedy_fraction=args.greedy_fraction,
                target_dtype=args.target_dtype)
    if args.explain:
        from .explain import explain

        result["explain"] = [e.__dict__ for e in explain(pred)]
    if args.sensitivity:
        from .sensitivity import elasticities

        result["sensitivity"] = elasticities(pred.scenario, profile).to_dict(orient="records")
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(_format_table(result))
    if args.explain:
        from .explain import format_explanation

        print("\n" + format_explanation(pred))
    if args.sensitivity:
        print("\nsensitivity of the local_argmax_pairs saving (elasticity = % change per 1% change):")
        for row in result["sensitivity"][:12]:
            print(f"  {row['elasticity']:+8.3f}  ({row['saving_change_us_per_10pct']:+.2f} us per +10%)  "
                  f"{row['parameter']}")
    return 0


def add_intervals(result: dict[str, Any], pred: Prediction, *, max_batch: float) -> None:
    """Attach 90% bootstrap intervals (when the profile has replicates) and the verdict per strategy."""
    from .uncertainty import propagate

    unc = propagate(pred.scenario, pred.profile, batch_range=(1.0, max_batch))
    members = (f"{len(pred.profile.bootstrap)} bootstrap replicates" if pred.profile.bootstrap
               else "the point profile (no replicates)")
    result["intervals"] = f"90% prediction interval: {members} x per-op model discrepancy"
    for name, entry in result["strategies"].items():
        if name in unc:
            entry["interval"] = unc[name].to_dict()
            entry["verdict"] = unc[name].verdict
            if "impact" in entry:  # the impact's throughput gain over the same interval
                im, iv = entry["impact"], unc[name].saving_per_decode_step_us
                entry["impact"] = impact_change(entry["saving_per_decode_step_us"], im["itl_before_ms"],
                                                im["itl_before_ms"] / im["tpot_before_ms"], name,
                                                (iv.low, iv.high)).to_dict()
        elif name != BASELINE:
            s = entry["saving_per_draft_step_us"]
            entry["verdict"] = "faster" if s > 0 else "slower" if s < 0 else "equal"
        if name != BASELINE and not entry["valid"]:  # not exact here (fp32 ids, or packed keys at top-k > 1)
            entry["verdict"] = "invalid"


# -- recommend ---------------------------------------------------------------------------
def cmd_recommend(args: argparse.Namespace) -> int:
    from .presets import presets as preset_table
    from .recommend import format_recommendation, recommend
    from .workload import load_workload

    check_impact_args(args)
    profile = load_profile(args.profile)
    workload = load_workload(args.workload, args.workload_kind)
    model = _single(_model_fields(args), "preset/--vocab")
    grid = {k: _single(v, k.replace("_", "-")) for k, v in _grid(args).items() if k != "batch"}
    check_tp_placement(profile, int(grid["tp"]), int(grid["nodes"]))  # TP above GPUs per node needs --nodes
    method = args.method
    if method is None:
        name = (args.preset or ("" if args.vocab or args.draft_vocab else DEFAULT_PRESET)).strip()
        draft = str(preset_table()["draft"].get(name, "")) if name else ""
        method = "mtp" if draft.upper().startswith("MTP") else None
    rec = recommend({**model, **grid}, workload, profile, itl_ms=args.itl_ms,
                    acceptance_length=args.acceptance_length, method=method, verify=args.verify,
                    greedy_fraction=args.greedy_fraction, target_dtype=args.target_dtype)
    if args.csv:
        from .safe_io import write_csv

        table = rec.per_batch.copy()
        for key, value in reversed(list({"profile": profile.name, **rec.scenario}.items())):
            table.insert(0, key, value)
        write_csv(table, args.csv)
        print(f"wrote {len(table)} rows to {args.csv}", file=sys.stderr)
    if args.json:
        print(json.dumps(rec.to_dict(), indent=2))
    else:
        print(format_recommendation(rec))
    return 0


# -- sweep -----------------------------------------------------------------------------
def sweep_frame(models: list[dict[str, Any]], grid: dict[str, list], profile: Profile) -> pd.DataFrame:
    """Cartesian product of models x grid values, priced in one vectorized call, as a tidy frame
    (costmodel.sweep.sweep_table; impossible TP / nodes combinations are rows with valid = False)."""
    from .sweep import sweep_table

    frame = sweep_table(models, grid, profile).to_pandas()
    for column in frame.columns[frame.dtypes == "category"]:  # dictionary-encoded text -> plain text
        frame[column] = frame[column].astype(str)
    return frame


def write_table(frame: pd.DataFrame, out: str | None) -> None:
    """Formula-safe CSV (costmodel.safe_io) to `out`, or to stdout when out is None or "-"."""
    if out in (None, "-"):
        write_csv(frame, sys.stdout)
    else:
        write_csv(frame, out)
        print(f"wrote {len(frame)} rows to {out}", file=sys.stderr)


def cmd_sweep(args: argparse.Namespace) -> int:
    profile = load_profile(args.profile)
    models, grid = _model_fields(args), _grid(args)
    n = len(models) * math.prod(len(v) for v in grid.values())
    if n > MAX_SWEEP_SCENARIOS:
        raise InputError(f"sweep: {n} scenarios, more than the limit of {MAX_SWEEP_SCENARIOS} "
                         "(split the grid into several runs)")
    from .sweep import sweep_table, write_sweep

    table = sweep_table(models, grid, profile)
    write_sweep(table, args.out, args.format)
    if args.out not in (None, "-"):
        print(f"wrote {table.num_rows} rows to {args.out}", file=sys.stderr)
    return 0


# -- predict-points ------------------------------------------------------------------------
def cmd_predict_points(args: argparse.Namespace) -> int:
    profile = load_profile(args.profile)
    frame = read_measurements(args.input, require_times=False)
    if getattr(args, "engine", None):
        from .strategies import engine_points

        out = engine_points(frame, profile, parse_choice_list(args.engine, "engine", ENGINES[1:])[0])
    else:
        out = predict_points(frame, profile)
    bad = ~np.isfinite(out["predicted_us"].to_numpy(float))
    if bad.any():
        raise InputError(f"{args.input}: row {int(np.flatnonzero(bad)[0]) + 2} has no finite prediction")
    if getattr(args, "intervals", False):
        from .uncertainty import point_intervals

        out["predicted_p05_us"], out["predicted_p95_us"] = point_intervals(
            out, profile, predicted_us=out["predicted_us"].to_numpy(float))
    write_table(out, args.out)
    return 0


# -- validate / profiles / presets -------------------------------------------------------------
def cmd_validate(args: argparse.Namespace) -> int:
    from .validate import format_table_errors, format_validation, load_reference, reference_files, summary, validate

    paths = args.reference or reference_files()
    table = validate(load_reference(paths), args.profile)
    summ = summary(table)
    if args.summary_only:
        print(summ.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    else:
        print(format_validation(table, summ))
    print()
    print(format_table_errors(table))
    from .validate import profiles_without_held_out, profiles_without_reference

    if not args.profile:  # say plainly where no held-out data exists
        none = profiles_without_reference(table)
        only_in = profiles_without_held_out(table)
        if none:
            print("no reference table for: " + ", ".join(none) + " (derived, unchecked: no published table matches "
                  "their GPU)")
        if only_in:
            print("in-sample rows only (no held-out check) for: " + ", ".join(only_in))
    if not getattr(args, "no_coverage", False):
        from .validate import coverage_summary, format_coverage, interval_coverage

        table = interval_coverage(table)
        print()
        print(format_coverage(coverage_summary(table)))
    if args.out:
        write_table(table, args.out)
    if args.max_error is not None:
        rows = table if not args.held_out_only else table[~table["used_in_profile"]]
        worst = rows["rel_error"].abs().max()
        if worst > args.max_error:
            print(f"error: max |relative error| {worst:.3f} exceeds --max-error {args.max_error}", file=sys.stderr)
            return 1
    return 0


def profile_rows() -> list[dict[str, Any]]:
    """One row per bundled profile: name, family, kind, GPU, fabric, GPUs / NICs per node, date, source, citations."""
    rows = []
    for name in bundled_profiles():
        p = load_profile(name)
        v = p.provenance
        rows.append({"name": name, "family": gpu_family(v.gpu), "kind": v.kind, "gpu": v.gpu,
                     "fabric": v.interconnect, "gpus_per_node": v.gpus_per_node, "nics_per_node": v.nics_per_node,
                     "nic_gbps": v.nic_gbps, "date": v.date, "default": name == DEFAULT_PROFILE, "source": v.source,
                     "citations": list(v.citations)})
    return sorted(rows, key=lambda r: (FAMILIES.index(r["family"]), r["name"]))


def cmd_profiles(args: argparse.Namespace) -> int:
    rows = profile_rows()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0

    def cell(v: Any) -> str:
        return "-" if v is None else str(v)

    print(f"  {'profile':20s} {'family':9s} {'kind':8s} {'GPU':28s} {'GPUs/node':>9s} {'NICs/node':>9s}  fabric")
    for r in rows:
        star = "*" if r["default"] else " "
        nics = cell(r["nics_per_node"]) + ("" if r["nic_gbps"] is None else f" x {r['nic_gbps'] * 8:g}G")
        print(f"{star} {r['name']:20s} {r['family']:9s} {r['kind']:8s} {r['gpu'][:28]:28s} "
              f"{cell(r['gpus_per_node']):>9s} {nics:>9s}  {r['fabric']}")
        if args.citations:
            print(f"      source: {r['source']}")
            for c in r["citations"]:
                print(f"      - {c}")
    if not args.citations:
        print("\n(--citations: each profile's source and the public figures it was built from; --json: all fields)")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """The same scenario on two profiles: per strategy the time, the saving and the crossover batch, side by side
    (costmodel.compare)."""
    profiles = [load_profile(args.profile_a), load_profile(args.profile_b)]
    scenario = scenario_from_args(args)
    table = compare_table(scenario, profiles, max_batch=args.max_batch)
    if args.csv:
        write_csv(table, args.csv)
        print(f"wrote {len(table)} rows to {args.csv}", file=sys.stderr)
    sc = scenario
    print(f"scenario: tp {int(sc.tp)} nodes {int(sc.nodes)} batch {int(sc.batch)} K {int(sc.num_spec_tokens)} "
          f"vocab {int(sc.vocab)} {sc.dtype}; profiles: " + ", ".join(
              f"{p.name} ({p.provenance.kind}: {p.provenance.gpu})" for p in profiles))
    print(compare_wide(table).to_string(index=False, float_format=lambda x: f"{x:.1f}", na_rep="none"))
    return 0


def cmd_presets(args: argparse.Namespace) -> int:
    print(presets().reset_index().to_string(index=False))
    return 0


ITL_MS = bounded_float(0.0, 1e6, low_open=True)  # ms per decode step: (0, 1000 s]
ACCEPTANCE = bounded_float(1.0, 1025.0)  # tokens per decode step: 1..K+1 (checked against K later)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="argmax-tp", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    p = sub.add_parser("predict", help="price every strategy for one scenario", formatter_class=Formatter)
    _add_scenario_args(p, lists=False)
    p.add_argument("--itl-ms", type=ITL_MS, default=None,
                   help="baseline ITL, ms per decode step, for the impact (needs --acceptance-length)")
    p.add_argument("--acceptance-length", type=ACCEPTANCE, default=None,
                   help="mean tokens emitted per decode step, 1..K+1 (needs --itl-ms)")
    p.add_argument("--max-batch", type=bounded_float(1.0, float(INT_FLAG_MAX["batch"])), default=65536.0,
                   help="upper end of the crossover search, rows")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--explain", action="store_true", help="print every component's formula with numbers")
    p.add_argument("--sensitivity", action="store_true",
                   help="elasticity of the local_argmax_pairs saving to each profile parameter")
    p.add_argument("--no-intervals", action="store_true", help="skip bootstrap intervals (faster)")
    p.add_argument("--verify", action="store_true",
                   help="add target-side greedy verification (B x (K+1) rows over the target vocab) per decode step")
    p.add_argument("--greedy-fraction", type=bounded_float(0.0, 1.0), default=1.0,
                   help="with --verify: share of decode steps whose requests are all greedy (the rest run the "
                        "baseline)")
    p.add_argument("--target-dtype", default=None, choices=tuple(DTYPES),
                   help="with --verify: the target logits' dtype (default: --dtype)")
    p.add_argument("--matrix-csv", default=None,
                   help="write the strategy x collective matrix (with each crossover batch) as CSV")
    p.set_defaults(func=cmd_predict)

    r = sub.add_parser("recommend", formatter_class=Formatter,
                       help="on or off for a workload's batch mix: expected saving, interval, config to paste")
    r.add_argument("--workload", required=True,
                   help="batch distribution: CSV batch,weight | vLLM /metrics scrape(s) | vllm bench serve JSON")
    r.add_argument("--workload-kind", default="auto", choices=("auto", "csv", "vllm-metrics", "vllm-bench"),
                   help="how to read --workload (auto: JSON object = bench, Prometheus text = metrics, else CSV)")
    _add_scenario_args(r, lists=False, batch=False)
    r.add_argument("--itl-ms", type=ITL_MS, default=None,
                   help="baseline ITL at this workload, ms per decode step (needs --acceptance-length)")
    r.add_argument("--acceptance-length", type=ACCEPTANCE, default=None,
                   help="mean tokens emitted per decode step, 1..K+1 (needs --itl-ms)")
    r.add_argument("--method", default=None,
                   help="vLLM speculative method in the pasted config (default: mtp / eagle3 / eagle from the preset)")
    r.add_argument("--verify", action="store_true",
                   help="add target-side greedy verification (B x (K+1) rows over the target vocab) per decode step")
    r.add_argument("--greedy-fraction", type=bounded_float(0.0, 1.0), default=1.0,
                   help="with --verify: share of decode steps whose requests are all greedy")
    r.add_argument("--target-dtype", default=None, choices=tuple(DTYPES),
                   help="with --verify: the target logits' dtype (default: --dtype)")
    r.add_argument("--csv", default=None, help="write the per-batch savings (with the scenario columns) as CSV")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.set_defaults(func=cmd_recommend)

    s = sub.add_parser("sweep", help="price a grid of scenarios to a tidy CSV", formatter_class=Formatter)
    _add_scenario_args(s, lists=True)
    s.add_argument("--out", default=None, help="output path (default stdout)")
    s.add_argument("--format", default="csv", choices=("csv", "parquet"), help="output format")
    s.set_defaults(func=cmd_sweep)

    pp = sub.add_parser("predict-points", help="add predicted_us to measurement rows", formatter_class=Formatter)
    pp.add_argument("--profile", default=DEFAULT_PROFILE, help="bundled profile name or profile JSON path")
    pp.add_argument("--in", dest="input", required=True,
                    help="CSV in the measurement schema (op, mode, world_size, bytes_per_rank, ...)")
    pp.add_argument("--out", required=True, help="CSV to write: the input rows plus predicted_us")
    pp.add_argument("--engine", default=None,
                    help="vllm | sglang | trtllm: price each row as that engine runs the op (captured: graph "
                         "price; vllm: host launches + GPU through the step model); sets the mode column")
    pp.add_argument("--intervals", action="store_true",
                    help="add predicted_p05_us and predicted_p95_us: the 90%% prediction interval (replicates + "
                         "per-op model discrepancy; costmodel/uncertainty.py)")
    pp.set_defaults(func=cmd_predict_points)

    v = sub.add_parser("validate", help="predict published/measured reference points and report the error",
                       formatter_class=Formatter)
    v.add_argument("--profile", default=None, help="price every row with this profile (default: each row's own)")
    v.add_argument("--reference", nargs="*", default=None, help="reference CSVs (default data/reference/*.csv)")
    v.add_argument("--out", default=None, help="write the full table as CSV")
    v.add_argument("--max-error", type=bounded_float(0.0, 1e6), default=None,
                   help="exit 1 if any |relative error| exceeds this")
    v.add_argument("--held-out-only", action="store_true", help="apply --max-error to held-out rows only")
    v.add_argument("--no-coverage", action="store_true", help="skip the 90%% interval coverage (faster)")
    v.add_argument("--summary-only", action="store_true", help="print only the per-source summary")
    v.set_defaults(func=cmd_validate)

    pr = sub.add_parser("profiles", help="list bundled profiles with their provenance")
    pr.add_argument("--json", action="store_true", help="print a JSON list")
    pr.add_argument("--citations", action="store_true", help="print each profile's source and citations")
    pr.set_defaults(func=cmd_profiles)

    cp = sub.add_parser("compare", help="the same scenario on two profiles side by side (savings, crossover)",
                        formatter_class=Formatter)
    cp.add_argument("profile_a", help="bundled profile name or profile JSON path")
    cp.add_argument("profile_b", help="bundled profile name or profile JSON path")
    _add_scenario_args(cp, lists=False)
    cp.add_argument("--max-batch", type=bounded_float(1.0, float(INT_FLAG_MAX["batch"])), default=65536.0,
                    help="upper end of the crossover search, rows")
    cp.add_argument("--csv", default=None, help="write the long table (profile, strategy, times, savings) as CSV")
    cp.set_defaults(func=cmd_compare)

    ps = sub.add_parser("presets", help="list model presets")
    ps.set_defaults(func=cmd_presets)
    for name, (_, _, text) in LAUNCHERS.items():  # dispatched by main() before parsing; listed for --help
        sub.add_parser(name, help=text, add_help=False)
    return parser


# -- launchers: the dashboard and the calibration tools --------------------------------------------------
# command -> (module run as __main__, needs torch, help). Arguments after the command pass through unchanged.
LAUNCHERS: dict[str, tuple[str, bool, str]] = {
    "dashboard": ("streamlit", False, "start the Streamlit dashboard (arguments go to `streamlit run`)"),
    "calibrate-collectives": ("calibration.bench.collectives", True,
                              "benchmark the collectives (run it under torchrun; needs the calibrate extra)"),
    "calibrate-kernels": ("calibration.bench.kernels", True,
                          "benchmark the non-communication kernels (calibrate extra)"),
    "verify": ("calibration.reference.verify", True,
               "check every strategy against torch.argmax (torchrun; calibrate extra)"),
    "fit": ("calibration.fitting.fit", False, "fit a profile from measurement CSVs (no torch)"),
    "import-nccl-tests": ("calibration.logs.import_nccl_tests", False, "convert nccl-tests logs to measurement CSV"),
    "kernel-report": ("calibration.fitting.kernel_report", False,
                      "achieved bandwidth and fused speed-ups of a kernels CSV"),
}
# the repository's .streamlit/config.toml, for an installed package started from any directory
STREAMLIT_FLAGS = ("--server.maxUploadSize", "20", "--browser.gatherUsageStats", "false",
                   "--client.toolbarMode", "viewer",
                   "--client.showErrorDetails", "none", "--theme.base", "light", "--theme.primaryColor", "#4c78a8")


def app_path() -> Path:
    """app.py: next to the `dashboard` package (the repository root, or site-packages when installed)."""
    spec = importlib.util.find_spec("dashboard")
    if spec is None or spec.origin is None:
        raise InputError("dashboard: the dashboard package is not installed")
    path = Path(spec.origin).resolve().parent.parent / "app.py"
    if not path.is_file():
        raise InputError(f"dashboard: {path} is missing")
    return path


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def launch(command: str, argv: Sequence[str]) -> int:
    """Run a launcher's module as `__main__` in this process (so torchrun's environment reaches it)."""
    module, needs_torch, _ = LAUNCHERS[command]
    if needs_torch and not _installed("torch"):
        raise InputError(f"{command}: needs torch - install the calibrate extra: pip install 'argmax-tp[calibrate]'")
    if not _installed(module.split(".")[0]):
        raise InputError(f"{command}: module {module} is not installed")
    if command == "dashboard":
        sys.argv = ["streamlit", "run", str(app_path()), *STREAMLIT_FLAGS, *argv]
    else:
        sys.argv = [f"argmax-tp {command}", *argv]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in LAUNCHERS:
            return launch(argv[0], argv[1:])
        args = build_parser().parse_args(argv)
        return args.func(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except OSError as exc:  # e.g. --out in a folder that does not exist
        print(f"error: {first_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except (MemoryError, RecursionError):
        print("error: out of memory (the input is too large; see README 'Limits and safety')", file=sys.stderr)
        return 2
    except Exception as exc:  # a bug: still one line, never a traceback (tests assert this never happens)
        print(f"error: internal error ({type(exc).__name__}: {first_line(exc)}); please report it", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
