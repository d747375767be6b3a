"""The subcommands: predict, recommend, sweep, predict-points, validate, profiles, compare, presets.

Each `cmd_*` takes the parsed arguments, prints its answer and returns the exit code; the model, evidence and
answer modules it needs are imported when the command runs, so `--help` and `profiles` stay fast.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

import numpy as np
import pandas as pd

from ..answers.compare import FAMILIES, compare_table, compare_wide, gpu_family
from ..io.errors import InputError
from ..io.measurements import read_measurements
from ..io.plain import terminal_text
from ..io.safe_io import write_csv
from ..model.engines import ENGINES
from ..model.points import predict_points
from ..model.predict import predict
from ..profiles.presets import presets
from ..profiles.store import DEFAULT_PROFILE, bundled_profiles, check_tp_placement, load_profile
from ..profiles.types import Profile
from .options import (
    DEFAULT_PRESET,
    MAX_SWEEP_SCENARIOS,
    _grid,
    _model_fields,
    _single,
    check_impact_args,
    parse_choice_list,
    scenario_from_args,
)
from .render import _format_table, add_decode_step, add_intervals, prediction_dict


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
        from ..model.verification import best_pair, matrix

        result["best_pair"] = best_pair(matrix(pred.scenario, pred.profile, max_batch=args.max_batch,
                                               crossovers=False))
    if not args.no_intervals:
        add_intervals(result, pred, max_batch=args.max_batch)
        if "decode_step" in result:  # the verification group's intervals, from the same ensemble
            from ..evidence.decode_intervals import decode_step_intervals

            result["decode_step"]["intervals"] = decode_step_intervals(
                pred.scenario, profile, verify=args.verify, greedy_fraction=args.greedy_fraction,
                target_dtype=args.target_dtype)
    if args.explain:
        from ..answers.explain import explain

        result["explain"] = [e.__dict__ for e in explain(pred)]
    if args.sensitivity:
        from ..answers.sensitivity import elasticities

        result["sensitivity"] = elasticities(pred.scenario, profile).to_dict(orient="records")
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(terminal_text(_format_table(result), keep_newlines=True))
    if args.explain:
        from ..answers.explain import format_explanation

        print("\n" + format_explanation(pred))
    if args.sensitivity:
        print("\nsensitivity of the local_argmax_pairs saving (elasticity = % change per 1% change):")
        for row in result["sensitivity"][:12]:
            print(f"  {row['elasticity']:+8.3f}  ({row['saving_change_us_per_10pct']:+.2f} us per +10%)  "
                  f"{row['parameter']}")
    return 0


# -- recommend ---------------------------------------------------------------------------
def cmd_recommend(args: argparse.Namespace) -> int:
    from ..answers.recommend import recommend
    from ..answers.recommend_text import format_recommendation
    from ..answers.workload import load_workload
    from ..profiles.presets import presets as preset_table

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
        from ..io.safe_io import write_csv

        table = rec.per_batch.copy()
        for key, value in reversed(list({"profile": profile.name, **rec.scenario}.items())):
            table.insert(0, key, value)
        write_csv(table, args.csv)
        print(f"wrote {len(table)} rows to {args.csv}", file=sys.stderr)
    if args.json:
        print(json.dumps(rec.to_dict(), indent=2))
    else:
        print(terminal_text(format_recommendation(rec), keep_newlines=True))
    return 0


# -- sweep -----------------------------------------------------------------------------
def sweep_frame(models: list[dict[str, Any]], grid: dict[str, list], profile: Profile) -> pd.DataFrame:
    """Cartesian product of models x grid values, priced in one vectorized call, as a tidy frame
    (costmodel.answers.sweep.sweep_table; impossible TP / nodes combinations are rows with valid = False)."""
    from ..answers.sweep import sweep_table

    frame = sweep_table(models, grid, profile).to_pandas()
    for column in frame.columns[frame.dtypes == "category"]:  # dictionary-encoded text -> plain text
        frame[column] = frame[column].astype(str)
    return frame


def write_table(frame: pd.DataFrame, out: str | None) -> None:
    """Formula-safe CSV (costmodel.io.safe_io) to `out`, or to stdout when out is None or "-"."""
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
    from ..answers.sweep import sweep_table, write_sweep

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
        from ..model.points import engine_points

        out = engine_points(frame, profile, parse_choice_list(args.engine, "engine", ENGINES[1:])[0])
    else:
        out = predict_points(frame, profile)
    bad = ~np.isfinite(out["predicted_us"].to_numpy(float))
    if bad.any():
        raise InputError(f"{args.input}: row {int(np.flatnonzero(bad)[0]) + 2} has no finite prediction")
    if getattr(args, "intervals", False):
        from ..evidence.intervals import point_intervals

        out["predicted_p05_us"], out["predicted_p95_us"] = point_intervals(
            out, profile, predicted_us=out["predicted_us"].to_numpy(float))
    write_table(out, args.out)
    return 0


# -- validate / profiles / presets -------------------------------------------------------------
def cmd_validate(args: argparse.Namespace) -> int:
    from ..evidence.reference import load_reference, reference_files
    from ..evidence.validate import format_table_errors, format_validation, summary, validate

    paths = args.reference or reference_files()
    table = validate(load_reference(paths), args.profile)
    summ = summary(table)
    if args.summary_only:
        print(summ.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    else:
        print(format_validation(table, summ))
    print()
    print(format_table_errors(table))
    from ..evidence.validate import profiles_without_held_out, profiles_without_reference

    if not args.profile:  # say plainly where no held-out data exists
        none = profiles_without_reference(table)
        only_in = profiles_without_held_out(table)
        if none:
            print("no reference table for: " + ", ".join(none) + " (derived, unchecked: no published table matches "
                  "their GPU)")
        if only_in:
            print("in-sample rows only (no held-out check) for: " + ", ".join(only_in))
    if not getattr(args, "no_coverage", False):
        from ..evidence.coverage import coverage_summary, format_coverage, interval_coverage

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
        r = {k: terminal_text(v) if isinstance(v, str) else v for k, v in r.items()}  # names, GPUs, sources
        star = "*" if r["default"] else " "
        nics = cell(r["nics_per_node"]) + ("" if r["nic_gbps"] is None else f" x {r['nic_gbps'] * 8:g}G")
        print(f"{star} {r['name']:20s} {r['family']:9s} {r['kind']:8s} {r['gpu'][:28]:28s} "
              f"{cell(r['gpus_per_node']):>9s} {nics:>9s}  {r['fabric']}")
        if args.citations:
            print(f"      source: {r['source']}")
            for c in r["citations"]:
                print(f"      - {terminal_text(c)}")
    if not args.citations:
        print("\n(--citations: each profile's source and the public figures it was built from; --json: all fields)")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """The same scenario on two profiles: per strategy the time, the saving and the crossover batch, side by side
    (costmodel.answers.compare)."""
    profiles = [load_profile(args.profile_a), load_profile(args.profile_b)]
    scenario = scenario_from_args(args)
    table = compare_table(scenario, profiles, max_batch=args.max_batch)
    if args.csv:
        write_csv(table, args.csv)
        print(f"wrote {len(table)} rows to {args.csv}", file=sys.stderr)
    sc = scenario
    print(f"scenario: tp {int(sc.tp)} nodes {int(sc.nodes)} batch {int(sc.batch)} K {int(sc.num_spec_tokens)} "
          f"vocab {int(sc.vocab)} {sc.dtype}; profiles: " + ", ".join(
              terminal_text(f"{p.name} ({p.provenance.kind}: {p.provenance.gpu})") for p in profiles))
    print(terminal_text(compare_wide(table).to_string(index=False, float_format=lambda x: f"{x:.1f}", na_rep="none"),
                        keep_newlines=True))
    return 0


def cmd_presets(args: argparse.Namespace) -> int:
    print(presets().reset_index().to_string(index=False))
    return 0
