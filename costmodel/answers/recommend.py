"""Turn `use_local_argmax_reduction` on or off for a workload's batch mix: `recommend(...) -> Recommendation`.

For a scenario (model, TP, dtype, K, drafting, mode, ...) and a `Workload` (decode batch B_i with
share of decode steps w_i, `costmodel/answers/workload.py`), per strategy s (us, positive = s is faster
than the baseline `full_all_gather`):

    expected saving per decode step  E[s] = sum_i w_i * saving_per_decode_step_us(s, B_i)
    expected saving per draft call          sum_i w_i * saving_us(s, B_i)
    saving_pct  = 100 * E[s] / sum_i w_i * T_baseline(B_i) * calls_per_decode_step
    win share   = sum_i w_i [s is the fastest valid strategy at B_i]
    90% interval of E[s]: E[s] recomputed under every member of the profile's ensemble - the members
                of the predict intervals (`uncertainty.propagate`): each bootstrap replicate with independent
                per-op model-discrepancy factors - 5th..95th percentile.

Impact, given a baseline ITL (ms per decode step at this workload) and a mean acceptance length
AL in 1..K+1 (tokens emitted per decode step): ITL_after = ITL - E[s] / 1000,
TPOT = ITL / AL, output throughput (tokens/s, at the same batch) scales with 1 / ITL, so
`itl_reduction_pct = 100 * (ITL - ITL_after) / ITL` and
`output_throughput_gain_pct = 100 * (ITL / ITL_after - 1)` (25 -> 22.3 ms: 10.8% lower ITL,
12.1% more output tokens/s). One sign convention everywhere: a positive saving, reduction or gain
means faster.

Decision for the one switch an engine ships (vLLM `SpeculativeConfig.use_local_argmax_reduction`,
`vllm/config/speculative.py`; it selects the `local_argmax_pairs` path in the draft's greedy
sampling): "enable" when the interval of E[local_argmax_pairs] is above 0, "keep off" when it is
below 0, "uncertain" when it spans 0 (then the expected sign is reported and the default, off, is
kept); without replicates the sign of E decides and the verdict says so.

With `verify=True` every per-decode-step saving also carries the target's greedy verification group
(`verification.py`: F * (T_baseline - T_s) over the B x (K + 1) target rows), in E[s], its interval and the
per-batch table. `top_k` / `collective` / `verify` are named in the header and in the pasted config: vLLM's switch
covers greedy (top-k 1) drafting only, no pasted setting selects a collective implementation, and no engine
switch keeps the target's verification logits sharded during speculative decoding (`config_notes`).

Engine equivalents (from each engine's source, see `ENGINE_NOTES`): vLLM has the flag; SGLang has
no switch for draft tokens (`SGLANG_ENABLE_TP_SHARDED_GREEDY`, `sglang/srt/layers/tp_sharded_greedy.py`
`can_use_tp_sharded_greedy`, returns False whenever the batch carries speculative info - it covers the
target's plain greedy sampling only); TensorRT-LLM's MTP Eagle worker always gathers (id, value) pairs
when TP > 1 without attention DP (`tensorrt_llm/_torch/speculative/mtp.py`, `draft_sampler`), so there
is nothing to set - and no way to turn it off.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..evidence.ensemble import ensemble
from ..io.errors import InputError
from ..model.components import BASELINE, STRATEGIES
from ..model.drafter import DraftArch
from ..model.members import predict_members
from ..model.predict import Prediction, predict
from ..model.scenario import Scenario
from ..model.sources import sources_dict
from ..model.verification import check_fraction, verification_scenario
from ..profiles.replicates import replicate_profiles
from ..profiles.store import default_profile
from ..profiles.types import Profile
from .engine_config import EngineConfig, _configs, config_notes
from .impact import ImpactChange, impact_change  # noqa: F401 - re-exported: the impact lives with recommend too
from .provenance import provenance_cell
from .whole_step import PER_CALL, QUANTITY, applies, whole_step_member_savings, whole_step_totals
from .workload import Workload

FLAG_STRATEGY = "local_argmax_pairs"
SHIPPED = {BASELINE: "every engine's default", FLAG_STRATEGY: "vLLM use_local_argmax_reduction"}
DECISIONS = ("enable", "keep off", "uncertain")


@dataclass(frozen=True)
class StrategyOutcome:
    """One strategy over the workload (us; positive saving = faster than the baseline)."""

    strategy: str
    expected_saving_per_decode_step_us: float
    expected_saving_per_draft_call_us: float
    saving_pct: float
    interval_us: tuple[float, float] | None  # 90% interval of the expected saving per decode step
    win_share: float                         # share of decode steps where it is the fastest valid strategy
    beats_baseline_share: float              # share of decode steps where its saving is > 0
    valid_share: float                       # share of decode steps where its ids are exact
    verdict: str                             # faster | slower | uncertain | baseline | invalid
    shipped_as: str | None
    impact: ImpactChange | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k not in ("interval_us", "impact")}
        out["interval_us"] = None if self.interval_us is None else {"low": self.interval_us[0],
                                                                    "high": self.interval_us[1]}
        out["impact"] = None if self.impact is None else self.impact.to_dict()
        return out


@dataclass(frozen=True, eq=False)  # holds a Workload and a DataFrame: compared by identity
class Recommendation:
    """The answer for a workload: decision on the engine switch, every strategy's outcome, configs to paste."""

    decision: str                   # enable | keep off | uncertain
    headline: str                   # one sentence for people
    recommended: str                # the shipped strategy to run: local_argmax_pairs or full_all_gather
    best_modelled: str              # strategy with the largest expected saving (may not ship anywhere)
    strategies: dict[str, StrategyOutcome]
    configs: tuple[EngineConfig, ...]
    workload: Workload
    scenario: dict[str, Any]
    profile: dict[str, Any]
    interval_source: str
    per_batch: pd.DataFrame = field(repr=False, compare=False, default_factory=pd.DataFrame)
    level: float = 0.9
    verification: dict[str, Any] = field(default_factory=lambda: {"enabled": False})
    config_notes: tuple[str, ...] = ()   # what no pasted setting can select (top-k, collective, verification)
    quantity: str = PER_CALL             # what the savings are of (costmodel.answers.whole_step)

    @property
    def flag(self) -> StrategyOutcome:
        return self.strategies[FLAG_STRATEGY]

    def to_frame(self) -> pd.DataFrame:
        """One row per strategy (expected saving, interval, shares, verdict, impact), with the profile, the
        scenario columns and the workload summary on every row, so a CSV of it stands alone."""
        rows = []
        for name, o in self.strategies.items():
            iv = o.interval_us
            row = {"profile": self.profile["name"], "provenance": self.profile.get("provenance", ""),
                   **self.scenario, "workload": self.workload.name,
                   "workload_source": self.workload.source, "mean_batch": self.workload.mean_batch,
                   "strategy": name, "expected_saving_per_decode_step_us": o.expected_saving_per_decode_step_us,
                   "interval_low_us": None if iv is None else iv[0], "interval_high_us": None if iv is None else iv[1],
                   "expected_saving_per_draft_call_us": o.expected_saving_per_draft_call_us,
                   "saving_pct": o.saving_pct, "win_share": o.win_share,
                   "beats_baseline_share": o.beats_baseline_share, "valid_share": o.valid_share,
                   "verdict": o.verdict, "shipped_as": o.shipped_as or "", "decision": self.decision,
                   "quantity": self.quantity}
            if o.impact is not None:
                row.update({k: v for k, v in o.impact.to_dict().items()
                            if k not in ("strategy", "output_throughput_gain_pct_interval")})
            rows.append(row)
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        return {"decision": self.decision, "headline": self.headline, "recommended": self.recommended,
                "best_modelled": self.best_modelled, "baseline": BASELINE, "flag_strategy": FLAG_STRATEGY,
                "interval": f"{int(round(self.level * 100))}% ({self.interval_source})",
                "sign_convention": "positive saving / reduction / gain = faster than full_all_gather",
                "strategies": {k: v.to_dict() for k, v in self.strategies.items()},
                "configs": [c.to_dict() for c in self.configs], "workload": self.workload.to_dict(),
                "scenario": self.scenario, "profile": self.profile, "verification": self.verification,
                "config_notes": list(self.config_notes), "quantity": self.quantity,
                "per_batch": self.per_batch.to_dict(orient="records")}


def _weighted(weight: np.ndarray, values: np.ndarray) -> float:
    return float(np.dot(weight, np.asarray(values, dtype=float).reshape(-1)))


def _verify_saving(ver: Prediction | None, name: str, fraction: float) -> np.ndarray | float:
    """Verification group saving per decode step: F * (T_baseline - T_s) over the B x (K + 1) target rows."""
    if ver is None:
        return 0.0
    return fraction * (np.asarray(ver.total_us(BASELINE), dtype=float) - np.asarray(ver.total_us(name), dtype=float))


def _ensemble_expectations(sc: Scenario, profile: Profile, weight: np.ndarray, with_discrepancy: bool,
                           verify_sc: Scenario | None = None, fraction: float = 1.0
                           ) -> tuple[dict[str, np.ndarray], str]:
    """E[s] under every ensemble member - the same members as `uncertainty.propagate` (the predict
    intervals): each bootstrap replicate (or the point profile PRIOR_MEMBERS times when there are none)
    with independent per-op model-discrepancy factors."""
    reps = replicate_profiles(profile)
    if not reps and not with_discrepancy:
        return {}, "none (the profile carries no replicates)"
    members, factors, disc = ensemble(profile, nodes=int(np.asarray(sc.nodes).flat[0]),
                                          with_discrepancy=with_discrepancy)
    names = STRATEGIES[1:]
    draft = predict_members(sc, members, names, factors)  # row m: predict(sc, members[m], factors=factors[m])
    ver = predict_members(verify_sc, members, names, factors) if verify_sc is not None else None
    out = {}
    for s in names:
        step = draft.saving_per_decode_step_us(s).reshape(len(members), -1)
        if ver is not None:
            step = step + fraction * ver.saving_us(s).reshape(len(members), -1)
        out[s] = np.array([_weighted(weight, row) for row in step])
    source = (f"{len(reps)} bootstrap replicates" if reps else "the point profile") + (
        " x per-op model discrepancy" if disc is not None else "")
    return out, source


def _verify_member_savings(sc: Scenario, profile: Profile, weight: np.ndarray, with_discrepancy: bool,
                           verify_sc: Scenario | None, fraction: float) -> dict[str, np.ndarray]:
    """E_w[F x verification saving] under each ensemble member (the members of `_ensemble_expectations`)."""
    if verify_sc is None:
        return {}
    members, factors, _ = ensemble(profile, nodes=int(np.asarray(sc.nodes).flat[0]), with_discrepancy=with_discrepancy)
    ver = predict_members(verify_sc, members, STRATEGIES[1:], factors)
    return {s: np.array([_weighted(weight, row) for row in fraction * ver.saving_us(s).reshape(len(members), -1)])
            for s in STRATEGIES[1:]}


def recommend(scenario_kwargs: dict[str, Any], workload: Workload, profile: Profile | None = None, *,
              itl_ms: float | None = None, acceptance_length: float | None = None, level: float = 0.9,
              method: str | None = None, with_discrepancy: bool = True, verify: bool = False,
              greedy_fraction: float = 1.0, target_dtype: str | None = None, arch: DraftArch | None = None,
              kv_len: int = 2048, forward_us: float | None = None) -> Recommendation:
    """Price every strategy at each workload batch; weigh by step share; decide the engine switch.

    `scenario_kwargs` are `Scenario` fields (any `batch` is replaced by the workload's batches).
    `itl_ms` and `acceptance_length` go together (both or neither); AL must be in 1..K+1.
    `method` is the vLLM speculative method for the pasted config (default eagle3 with d2t, else eagle).
    `with_discrepancy=False`: parameter uncertainty (the replicates) only.
    `verify`: add the target's greedy verification group (greedy share `greedy_fraction`, `target_dtype`).
    `arch` (the draft's architecture; `kv_len`, `forward_us` as for `draft_step`): where an engine runs the step
    (`whole_step.applies`) every saving is of the WHOLE draft step (`whole_step.whole_step_totals`: the K calls as
    the engine composes them, per decode step) and its interval from the same ensemble members; without `arch`,
    or where it does not apply, the per-call savings x calls (module doc).
    """
    fraction = check_fraction(greedy_fraction)
    profile = profile or default_profile()
    if (itl_ms is None) != (acceptance_length is None):
        missing = "--acceptance-length" if acceptance_length is None else "--itl-ms"
        raise InputError(f"{missing}: the impact needs both --itl-ms and --acceptance-length")
    if not 0 < level < 1:
        raise InputError(f"level: must be in (0, 1), got {level}")
    kwargs = {k: v for k, v in scenario_kwargs.items() if k != "batch"}
    single = Scenario(**kwargs, batch=1.0)
    if single.size != 1:
        raise InputError("recommend: needs one scenario (single values, not lists)")
    k = int(single.num_spec_tokens)
    if acceptance_length is not None and not 1 <= acceptance_length <= k + 1:
        raise InputError(f"acceptance-length: must be in 1..K+1 = 1..{k + 1} tokens per decode step, "
                         f"got {acceptance_length}")
    sc = Scenario(**kwargs, batch=workload.batch.astype(float))
    w = workload.weight
    pred: Prediction = predict(sc, profile)
    verify_sc = verification_scenario(sc, target_dtype) if verify else None
    ver = predict(verify_sc, profile) if verify_sc is not None else None
    base_verify = 0.0 if ver is None else np.asarray(ver.total_us(BASELINE), dtype=float)  # F T_b + (1-F) T_b
    base_decode = _weighted(w, pred.total_us(BASELINE) * sc.calls_per_decode_step + base_verify)
    step_saving = {s: np.asarray(pred.saving_per_decode_step_us(s), dtype=float) + _verify_saving(ver, s, fraction)
                   for s in STRATEGIES}
    step_valid = {s: pred.strategies[s].valid if ver is None else pred.strategies[s].valid & ver.strategies[s].valid
                  for s in STRATEGIES}
    whole = arch is not None and not applies(single, profile, forward_us)
    per_call_saving = {s: np.asarray(pred.saving_us(s), dtype=float) for s in STRATEGIES}
    if whole:  # the whole draft step (module doc of costmodel.answers.whole_step)
        try:
            totals, valid, calls = whole_step_totals(sc, profile, arch, kv_len=kv_len, forward_us=forward_us)
        except InputError:  # a draft that cannot shard at this TP: the per-call answer stands
            whole = False
    if whole:
        step_saving = {s: totals[BASELINE] - totals[s] + _verify_saving(ver, s, fraction) for s in STRATEGIES}
        per_call_saving = {s: (totals[BASELINE] - totals[s]) / calls for s in STRATEGIES}
        step_valid = {s: valid[s] if ver is None else valid[s] & ver.strategies[s].valid for s in STRATEGIES}
        base_decode = _weighted(w, totals[BASELINE] + base_verify)
    if ver is None and not whole:
        best = pred.best()
    else:  # fastest valid strategy per decode step (draft x calls or the whole draft step, + verification)
        names = list(STRATEGIES)
        cost = np.stack([np.where(np.broadcast_to(step_valid[s], step_saving[s].shape), -step_saving[s], np.inf)
                         for s in names])
        best = np.asarray(names, dtype=object)[np.argmin(cost, axis=0)]
    reps, interval_source = _ensemble_expectations(sc, profile, w, with_discrepancy, verify_sc, fraction)
    if whole and (reps or with_discrepancy):  # the same members, pricing the whole draft step
        draft = whole_step_member_savings(sc, profile, arch, w, with_discrepancy=with_discrepancy, kv_len=kv_len,
                                          forward_us=forward_us)
        ver_part = _verify_member_savings(sc, profile, w, with_discrepancy, verify_sc, fraction)
        reps = {s: v + ver_part.get(s, 0.0) for s, v in draft.items()}
    tail = (1 - level) / 2 * 100
    outcomes: dict[str, StrategyOutcome] = {}
    for s in STRATEGIES:
        dec = step_saving[s]
        valid = np.broadcast_to(step_valid[s], dec.shape)
        expected = _weighted(w, dec)
        iv = None
        if s in reps:
            lo, hi = np.percentile(reps[s], [tail, 100 - tail])
            iv = (float(lo), float(hi))
        valid_share = _weighted(w, valid)
        if s == BASELINE:
            verdict = "baseline"
        elif valid_share < 1.0 - 1e-9:
            verdict = "invalid"
        elif iv is not None:
            verdict = "faster" if iv[0] > 0 else "slower" if iv[1] < 0 else "uncertain"
        else:
            verdict = "faster" if expected > 0 else "slower" if expected < 0 else "uncertain"
        imp = None
        if itl_ms is not None and s != BASELINE:
            imp = impact_change(expected, itl_ms, float(acceptance_length), s, iv)
        outcomes[s] = StrategyOutcome(
            s, expected, _weighted(w, per_call_saving[s]), 100.0 * expected / base_decode if base_decode else 0.0,
            iv, _weighted(w, best == s), _weighted(w, (dec > 0) & valid), valid_share, verdict, SHIPPED.get(s), imp)

    flag = outcomes[FLAG_STRATEGY]
    if flag.verdict == "invalid":
        decision = "keep off"
    elif flag.interval_us is not None:
        decision = {"faster": "enable", "slower": "keep off"}.get(flag.verdict, "uncertain")
    else:
        decision = "enable" if flag.expected_saving_per_decode_step_us > 0 else "keep off"
    recommended = FLAG_STRATEGY if decision == "enable" else BASELINE
    candidates = [s for s in STRATEGIES if outcomes[s].valid_share >= 1.0 - 1e-9]
    best_modelled = max(candidates, key=lambda s: outcomes[s].expected_saving_per_decode_step_us)
    top_k, collective = int(single.top_k), str(single.collective)
    engine = str(single.engine)
    headline = _headline(decision, flag, workload, interval_source if not reps else "", level, top_k)
    if method is None:
        method = "eagle3" if bool(single.d2t) else "eagle"
    per_batch = pd.DataFrame({"batch": workload.batch, "weight": w, "best": best,
                              **{f"{s}_saving_per_decode_step_us": np.asarray(step_saving[s] - _verify_saving(
                                  ver, s, fraction), dtype=float) for s in STRATEGIES[1:]}})
    if ver is not None:
        for s in STRATEGIES[1:]:
            per_batch[f"{s}_verify_saving_us"] = np.broadcast_to(_verify_saving(ver, s, fraction),
                                                                  workload.batch.shape).astype(float)
    verification = {"enabled": ver is not None}
    if ver is not None:
        verification.update({"greedy_fraction": fraction, "rows_per_batch_row": int(single.num_spec_tokens) + 1,
                             "vocab": int(single.vocab), "dtype": str(verify_sc.dtype)})
    desc = single.describe()
    desc.pop("batch", None)
    desc.pop("rows_per_call", None)
    prof = {"name": profile.name, "kind": profile.provenance.kind, "gpu": profile.provenance.gpu,
            "source": profile.provenance.source, **sources_dict(profile, single),
            "provenance": provenance_cell(profile, single)}
    return Recommendation(decision, headline, recommended, best_modelled, outcomes,
                          _configs(decision, k, method, bool(single.parallel), top_k, engine),
                          workload, desc, prof, interval_source, per_batch, level, verification,
                          tuple(config_notes(top_k, collective, ver is not None, engine)),
                          QUANTITY if whole else PER_CALL)


def _headline(decision: str, flag: StrategyOutcome, workload: Workload, no_interval: str, level: float,
              top_k: int = 1) -> str:
    e = flag.expected_saving_per_decode_step_us
    iv = flag.interval_us
    iv_txt = (f" ({int(round(level * 100))}% interval {iv[0]:+.1f}..{iv[1]:+.1f} us)" if iv is not None
              else f" (no interval: {no_interval})")
    mix = f"mean batch {workload.mean_batch:.1f}, {flag.beats_baseline_share:.0%} of decode steps faster"
    if top_k > 1:  # the shipped flag is greedy-only: report the modelled answer, name the missing switch
        word = {"enable": "faster", "keep off": "not faster", "uncertain": "uncertain"}[decision]
        if flag.verdict == "invalid":
            word = "not exact (fp32 ids, V_pad > 2^24)"
        return (f"top-k {top_k}: local_argmax_pairs ({top_k} pairs per rank) is {word}: expected saving {e:+.1f} us "
                f"per decode step{iv_txt}; {mix} - no engine ships a switch for top-k pairs (see the configs)")
    if flag.verdict == "invalid":
        return "keep use_local_argmax_reduction off: fp32 ids are not exact for this draft vocab (V_pad > 2^24)"
    if decision == "enable":
        return f"turn use_local_argmax_reduction on: expected saving {e:+.1f} us per decode step{iv_txt}; {mix}"
    if decision == "keep off":
        return f"keep use_local_argmax_reduction off: expected saving {e:+.1f} us per decode step{iv_txt}; {mix}"
    return (f"uncertain - keep the default (off) and calibrate: expected saving {e:+.1f} us per decode step"
            f"{iv_txt} spans 0; {mix}")
