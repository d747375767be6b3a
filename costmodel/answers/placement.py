"""Where should the draft run? The placement table of one scenario and the (placement, strategy, collective) triple.

`placement_table` prices every placement (`costmodel.model.draft_step.placements_for`) with every strategy: per
placement the whole draft step (us per decode step) of its best valid strategy, the components (drafter forward,
its all-reduces, lm_head, the logits path, dp's token all-gather), the draft's memory per GPU and whether it fits the
GPU (data/presets/gpus.csv), and what the engine does with it (`draft_step.engine_support`: supported, silently
ignored or unsupported - from the engines' current source, docs/placement.md). `recommend_placement` weighs a
workload's batch mix and returns the fastest (placement, strategy, collective) that fits, the engine runs and - as
`Answer.workload` asks - the headline's decision rule adopts, with the config to paste where the engine has one and
the faster triple it set aside, apart. No pricing of its own: it calls `costmodel.model.draft_step`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..io.errors import InputError
from ..model.draft_step import (
    DraftStep,
    check_fits,
    draft_step,
    draft_steps,
    engine_support,
    parse_placement,
    paste_config,
)
from ..model.drafter import DraftArch
from ..model.scenario import COLLECTIVE_IMPLS, Scenario
from ..profiles.types import Profile


def _row(step: DraftStep, profile: Profile, engine: str, p: int, free_bytes: float | None) -> dict[str, Any]:
    best = str(np.asarray(step.best(), dtype=object).flat[0])
    total = float(np.asarray(step.total_us[best]).item(0))
    m = step.memory
    calls = step.calls
    return {
        "placement": step.placement.name, "draft_tp": step.placement.q, "best_strategy": best,
        "whole_draft_step_us": total,
        "per_strategy_us": {k: float(np.asarray(v).item(0)) for k, v in step.total_us.items()},
        "components_us": {"drafter_forward": float(np.asarray(step.forwards_gpu_us).flat[0]),
                          "of_which_all_reduces": calls * float(step.all_reduce_us.item(0)),
                          "lm_head": calls * float(step.lm_head_us.item(0)),
                          "logits_path": calls * float(np.asarray(step.logits_gpu_us[best]).item(0)),
                          "token_all_gather": float(step.gather_us.item(0))},
        "memory": {"weight_bytes_per_gpu": m.weight_bytes, "extra_weight_bytes_per_gpu": m.extra_weight_bytes,
                   "kv_bytes_per_sequence": m.kv_bytes_per_sequence, "sequences_per_rank": m.sequences_per_rank,
                   "resident_bytes_per_gpu": m.resident_bytes},
        "fits": check_fits(profile, step, free_bytes),
        "engine": engine_support(engine, step.placement, p),
        "config": paste_config(engine, step.placement),
        "forward_source": step.forward_source,
    }


def placement_table(scenario: Scenario, profile: Profile, arch: DraftArch, *, kv_len: int = 2048,
                    forward_us: float | None = None, free_bytes: float | None = None,
                    target_savings: bool = True) -> dict[str, Any]:
    """{"rows": [one dict per placement], "drafter_forward_us": the target placement's forward per draft call
    (context, common to every strategy), "arch": the draft's fields} for a scalar scenario; with `target_savings`
    also each strategy's whole-step saving and crossovers at the target placement (context where the answer is
    per call; left out where the whole draft step is the answer, so each strategy has one crossover)."""
    if scenario.size != 1:
        raise InputError("the placement table needs a single scenario")
    p, engine = int(scenario.tp), str(scenario.engine)
    steps = draft_steps(scenario, profile, arch, kv_len=kv_len, forward_us=forward_us)
    rows = [_row(s, profile, engine, p, free_bytes) for s in steps]
    return {"rows": rows, "drafter_forward_us": float(steps[0].forward_gpu_us.item(0)),
            **({"target_savings": draft_step_crossovers(scenario, profile, arch, kv_len=kv_len,
                                                        forward_us=forward_us)} if target_savings else {}),
            "drafter_forward_source": steps[0].forward_source, "kv_len": kv_len,
            "arch": {k: getattr(arch, k) for k in DraftArch.__dataclass_fields__}}


def chosen_placement(scenario: Scenario, profile: Profile, arch: DraftArch, text: str, *, kv_len: int = 2048,
                     forward_us: float | None = None, free_bytes: float | None = None) -> dict[str, Any]:
    """The row of the placement the user asked for (--placement); refuses one that does not fit (one line)."""
    step = draft_step(scenario, profile, parse_placement(text, int(scenario.tp)), arch, kv_len=kv_len,
                      forward_us=forward_us)
    reason = check_fits(profile, step, free_bytes)
    if reason is not None:
        raise InputError(reason)
    return _row(step, profile, str(scenario.engine), int(scenario.tp), free_bytes)


@dataclass(frozen=True)
class SetAside:
    """A (placement, strategy, collective) triple faster over the workload than the chosen one but not chosen, and
    why (the engine cannot run it, or the headline's decision rule keeps its strategy off)."""

    placement: str
    strategy: str
    collective: str
    expected_us: float
    why: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class PlacementChoice:
    """The recommended triple and the expected whole draft step time over the workload (weighted mean, us)."""

    placement: str
    strategy: str
    collective: str
    expected_us: float
    baseline_us: float  # target placement, full_all_gather, NCCL: what engines run today
    engine: str
    config: str
    refused: tuple[str, ...]  # placements left out (memory or engine), with the reason
    set_aside: SetAside | None = None  # the fastest triple overall where it is not the chosen one, and why

    @property
    def saving_us(self) -> float:
        """baseline_us - expected_us: the expected saving per decode step of the chosen triple (us, + = faster)."""
        return self.baseline_us - self.expected_us

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__, refused=list(self.refused), saving_us=self.saving_us,
                    set_aside=None if self.set_aside is None else self.set_aside.to_dict())


def recommend_placement(scenario: Scenario, profile: Profile, arch: DraftArch, batch: np.ndarray,
                        weight: np.ndarray, *, kv_len: int = 2048, forward_us: float | None = None,
                        free_bytes: float | None = None, engine_only: bool = True,
                        why_not: Callable[[str, str], str] | None = None) -> PlacementChoice:
    """Fastest expected (placement, strategy, collective) over the batch mix (weights sum to 1 after
    normalizing), among placements that fit at the largest batch and - with engine_only - that the engine runs
    (`engine_support` starts with "supported"), and - with `why_not(strategy, collective)` - among the pairs it
    returns "" for (`Answer.workload`: those the engine runs and the headline's decision rule adopts); the fastest
    triple it sets aside is kept as `set_aside`, with its reason."""
    w = np.asarray(weight, dtype=float)
    w = w / w.sum()
    b = np.asarray(batch, dtype=float)
    p, engine = int(np.max(scenario.tp)), str(np.asarray(scenario.engine).item(0))
    # every collective implementation in one evaluation: row i of each (impls, batches) total is COLLECTIVE_IMPLS[i]
    shape = (len(COLLECTIVE_IMPLS), b.size)
    nccl = COLLECTIVE_IMPLS.index("nccl")  # the baseline's row
    sc = scenario.with_(batch=b.reshape(1, -1), collective=np.array(COLLECTIVE_IMPLS).reshape(-1, 1))
    baseline = float("nan")
    refused: list[str] = []
    usable = []
    for step in draft_steps(sc, profile, arch, kv_len=kv_len, forward_us=forward_us):
        name = step.placement.name
        support = engine_support(engine, step.placement, p)
        reason = check_fits(profile, step, free_bytes)  # memory: the same for every implementation
        if name == "target":
            baseline = float(w @ np.broadcast_to(step.total_us["full_all_gather"], shape)[nccl])
        if reason or (engine_only and not support.startswith("supported")):
            refused.append(f"{name}: {reason or support}")
        else:
            usable.append(step)
    best: tuple[float, str, str, str] | None = None
    fastest: tuple[float, str, str, str] | None = None  # over every usable triple, whatever `why_not` says
    for i, impl in enumerate(COLLECTIVE_IMPLS):  # ties: the first in (impl, placement, strategy) order
        for step in usable:
            for strat, total in step.total_us.items():
                if not np.all(np.broadcast_to(step.valid.get(strat, True), shape)[i]):
                    continue
                value = float(w @ np.broadcast_to(np.asarray(total, dtype=float), shape)[i])
                if fastest is None or value < fastest[0] - 1e-9:
                    fastest = (value, step.placement.name, strat, impl)
                if why_not is not None and why_not(strat, impl):
                    continue
                if best is None or value < best[0] - 1e-9:
                    best = (value, step.placement.name, strat, impl)
    if best is None:
        raise InputError("no placement fits the GPU and runs on the engine (see the refused list with --json)")
    value, name, strat, impl = best
    aside = None
    if fastest is not None and fastest[0] < value - 1e-9 and why_not is not None:
        aside = SetAside(fastest[1], fastest[2], fastest[3], fastest[0], why_not(fastest[2], fastest[3]))
    pl = parse_placement(name, p)
    return PlacementChoice(name, strat, impl, value, baseline, engine_support(engine, pl, p),
                           paste_config(engine, pl), tuple(refused), aside)


def placement_lines(table: dict[str, Any], chosen: dict[str, Any] | None = None) -> list[str]:
    """The placement table as text lines (predict)."""
    out = ["", f"drafter forward (context, common to every strategy): {table['drafter_forward_us']:.1f} us per draft "
           f"call at the target's TP ({table['drafter_forward_source']}); KV length {table['kv_len']}",
           f"{'placement':10s} {'q':>3s} {'us/decode step':>14s} {'forward':>8s} {'(all-red.)':>10s} {'lm_head':>8s} "
           f"{'logits':>7s} {'gather':>7s} {'extra GB/GPU':>12s} {'KV MB/seq':>9s}  best strategy / engine"]
    for r in table["rows"]:
        c, m = r["components_us"], r["memory"]
        fit = "" if r["fits"] is None else "  DOES NOT FIT"
        out.append(f"{r['placement']:10s} {r['draft_tp']:3d} {r['whole_draft_step_us']:14.1f} "
                   f"{c['drafter_forward']:8.1f} {c['of_which_all_reduces']:10.1f} "
                   f"{c['lm_head']:8.1f} {c['logits_path']:7.1f} {c['token_all_gather']:7.1f} "
                   f"{m['extra_weight_bytes_per_gpu'] / 1e9:12.2f} {m['kv_bytes_per_sequence'] / 1e6:9.2f}  "
                   f"{r['best_strategy']}; {r['engine'].split(':')[0]}{fit}")
    out.append("(us/decode step: the whole draft step, the K draft calls of one decode step, pipelined as the "
               "engine runs them; components are GPU time per decode step; extra GB = draft weights beyond what the "
               "target already holds)")
    savings = table.get("target_savings") or {}
    if savings:
        parts = []
        for name, v in savings.items():
            cross = ", ".join(f"{b:.1f}" for b in v["crossover_batches"]) or "none in 1..4096"
            parts.append(f"{name} {v['saving_us']:+.1f} us (crossover B {cross})"
                         + ("" if v["valid"] else " [invalid]"))
        out.append("savings vs full_all_gather under the whole draft step at the target placement, per decode step "
                   "(host launches hidden behind the forward counted): " + "; ".join(parts))
    if chosen is not None:
        out.append(chosen_line(chosen))
    return out


def chosen_line(chosen: dict[str, Any]) -> str:
    """The --placement row in one line (predict; also where the table itself cannot be priced)."""
    return (f"--placement {chosen['placement']}: {chosen['whole_draft_step_us']:.1f} us per decode step with "
            f"{chosen['best_strategy']}; engine: {chosen['engine']}")


def placement_sweep(scenario: Scenario, profile: Profile, arch: DraftArch, batches, *, kv_len: int = 2048,
                    forward_us: float | None = None) -> list[dict[str, Any]]:
    """Tidy rows (placement, batch, whole_draft_step_us, best_strategy) over `batches` for every placement: the best
    valid strategy's whole draft step, us per decode step (the dashboard's chart)."""
    b = np.asarray(batches, dtype=float)
    rows: list[dict[str, Any]] = []
    for step in draft_steps(scenario.with_(batch=b), profile, arch, kv_len=kv_len, forward_us=forward_us):
        best = np.broadcast_to(step.best(), b.shape)
        for i, batch in enumerate(b):
            name = str(best[i])
            rows.append({"placement": step.placement.name, "batch": float(batch), "best_strategy": name,
                         "whole_draft_step_us": float(np.broadcast_to(step.total_us[name], b.shape)[i])})
    return rows


CROSSOVER_POINTS = 48  # log-spaced batches between 1 and max_batch


def draft_step_crossovers(scenario: Scenario, profile: Profile, arch: DraftArch, *, placement: str = "target",
                          baseline: str = "full_all_gather", max_batch: float = 4096.0, kv_len: int = 2048,
                          forward_us: float | None = None) -> dict[str, dict[str, Any]]:
    """Per strategy, under the whole draft step at one placement: the saving vs `baseline` at the scenario's batch
    (us per decode step) and the batches where it changes sign on a log grid of CROSSOVER_POINTS batches in
    1..max_batch (linear in log batch between the grid points around each sign change) - the crossover with the
    host launches the forward hides counted, unlike `costmodel.model.crossover.crossover` (one call alone)."""
    b0 = float(np.asarray(scenario.batch).item(0))
    grid = np.unique(np.concatenate([np.geomspace(1.0, max_batch, CROSSOVER_POINTS), [b0]]))
    step = draft_step(scenario.with_(batch=grid), profile, parse_placement(placement, int(scenario.tp)), arch,
                      kv_len=kv_len, forward_us=forward_us)
    base = np.asarray(step.total_us[baseline], dtype=float)
    at = int(np.searchsorted(grid, b0))
    out: dict[str, dict[str, Any]] = {}
    for name, total in step.total_us.items():
        if name == baseline:
            continue
        saving = base - np.asarray(total, dtype=float)
        valid = np.broadcast_to(step.valid.get(name, True), grid.shape)
        roots = []
        for i in np.nonzero(np.sign(saving[:-1]) * np.sign(saving[1:]) < 0)[0]:
            la, lb = np.log(grid[i]), np.log(grid[i + 1])
            roots.append(float(np.exp(la + (lb - la) * saving[i] / (saving[i] - saving[i + 1]))))
        out[name] = {"saving_us": float(saving[at]), "valid": bool(valid[at]), "crossover_batches": roots,
                     "wins_at_batch": bool(saving[at] > 0)}
    return out
