"""A `Question` priced once: `price(question, ...) -> Answer`, the one object every face renders.

    Answer.point     the scenario at its batch (`predict --json`): every strategy per draft call and, where an
                     engine runs the step (`whole_step.applies`), the whole draft step as the answer - saving per
                     decode step, one crossover per strategy, 90% intervals, verdict, impact on ITL / TPOT /
                     output throughput -, the best (strategy, collective) pair, the placement table, provenance
    Answer.workload  with a workload: `recommend` over its batch mix (decision, expected saving and interval, win
                     shares, impact, configs to paste) and the (placement, strategy, collective) triple, chosen
                     among the triples the engine runs under the headline's decision rule (`placement_rule`)

Both are priced on first use and kept (an Answer is immutable). `predict` and `recommend` (text, JSON, CSV) render
them, and so do the dashboard's verdict under an engine (`Answer.whole_step`), its Impact and Recommendation tabs;
the dashboard's batch-range views (sweep, heatmaps) call the same answers-layer functions over many batches, and
tests/dashboard/test_parity.py checks that every face gives the same decision, saving and crossover. The parts that
need pandas / scipy (the workload, the elasticities, the verification intervals) import them when first priced, so
`predict --no-intervals` starts on numpy alone (tests/cli/test_lazy_imports.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ..io.errors import InputError
from ..model.components import BASELINE
from ..model.engines import PLANS
from ..model.predict import Prediction, predict
from ..model.verification import matrix_rows
from .engine_config import engine_cannot
from .explain import explain
from .placement import PlacementChoice, chosen_placement, placement_table, recommend_placement
from .point import add_decode_step, add_impact, add_intervals, apply_whole_step, engine_best_pair, prediction_dict
from .question import Question
from .whole_step import PER_CALL, applies, whole_step_answer

if TYPE_CHECKING:
    from .recommend import Recommendation

LOGITS_PATH_PAIR = "the logits path alone x calls per decode step"


@dataclass(frozen=True)
class Options:
    """What to price beyond the answer itself (each costs time): intervals, the formulas, the elasticities, the
    placement table, the matrix's crossovers (`predict --matrix-csv`)."""

    intervals: bool = True
    explain: bool = False
    sensitivity: bool = False
    placements: bool = True
    matrix_crossovers: bool = False


@dataclass(frozen=True)
class WorkloadAnswer:
    """The workload half of an Answer: `recommend`'s Recommendation and the placement triple (or why not)."""

    recommendation: Recommendation
    placement: PlacementChoice | None
    placement_unavailable: str = ""
    placement_engine_cannot: str = ""  # where the engine cannot run the chosen (strategy, collective)

    def to_dict(self) -> dict[str, Any]:
        extra = ({"placement": {**self.placement.to_dict(), "engine_cannot": self.placement_engine_cannot}}
                 if self.placement is not None
                 else {"placement": {"unavailable": self.placement_unavailable}} if self.placement_unavailable
                 else {})
        return {**self.recommendation.to_dict(), **extra}


@dataclass(frozen=True, eq=False)
class Answer:
    """One question's answer (module doc); `price` builds it."""

    question: Question
    options: Options = field(default_factory=Options)

    @cached_property
    def prediction(self) -> Prediction:
        """Every strategy per draft call at the question's batch (`costmodel.model.predict`)."""
        return predict(self.question.scenario, self.question.profile)

    @cached_property
    def whole_step(self) -> tuple[dict[str, Any] | None, str]:
        """(`whole_step.whole_step_answer`, "") where an engine runs the step and it prices, else (None, why the
        per-call answer stands)."""
        q = self.question
        why = applies(q.scenario, q.profile, q.forward_us)
        if why:
            return None, why
        try:
            return whole_step_answer(q.scenario, q.profile, q.arch, kv_len=q.kv_len, forward_us=q.forward_us,
                                     max_batch=q.max_batch, intervals=self.options.intervals), ""
        except InputError as exc:  # e.g. a TP that does not divide the draft's heads
            return None, f"the whole draft step cannot be priced: {exc}"

    @cached_property
    def point(self) -> dict[str, Any]:
        """The point answer as one JSON-ready dict (module doc). One crossover and one interval per strategy: the
        per-call ones are priced only where the per-call answer stands (under an engine the logits path per call
        is context: its times, components and saving)."""
        q, o, pred = self.question, self.options, self.prediction
        sc = pred.scenario
        ws, why = self.whole_step
        result = prediction_dict(pred, max_batch=q.max_batch, crossovers=ws is None)
        if q.verify or o.matrix_crossovers or int(sc.top_k) > 1 or str(sc.collective) != "nccl":
            add_decode_step(
                result, pred, verify=q.verify, greedy_fraction=q.greedy_fraction, target_dtype=q.target_dtype,
                max_batch=q.max_batch, crossovers=o.matrix_crossovers)
        else:  # the verdict always names the best (strategy, collective) pair (no crossovers: cheap)
            result["best_pair"] = engine_best_pair(matrix_rows(sc, pred.profile, max_batch=q.max_batch,
                                                               crossovers=False), q.engine)
        if o.intervals:
            if ws is None:
                add_intervals(result, pred, max_batch=q.max_batch)
            if "decode_step" in result:  # the verification group's intervals, from the same ensemble
                from ..evidence.decode_intervals import decode_step_intervals  # pandas: only here (module doc)

                result["decode_step"]["intervals"] = decode_step_intervals(
                    sc, q.profile, verify=q.verify, greedy_fraction=q.greedy_fraction, target_dtype=q.target_dtype)
        if o.explain:
            result["explain"] = [e.__dict__ for e in explain(pred)]
        if ws is not None:  # the whole draft step is the answer (`point.apply_whole_step`)
            apply_whole_step(result, ws)
            if "best_pair" in result:  # priced per call (verification.matrix_rows), not as the headline
                result["best_pair"]["quantity"] = LOGITS_PATH_PAIR
        else:
            result["answer"] = {"quantity": PER_CALL, "why_not_whole_draft_step": why}
        if q.itl_ms is not None:  # the question checked it comes with the acceptance length
            add_impact(result, q.itl_ms, q.acceptance_length)
        if o.placements or q.placement:
            self._add_placements(result, ws is not None)
        if o.sensitivity:
            result["sensitivity"] = self._sensitivity(ws is not None)
        result["question"] = {"quantity": q.quantity_line(why), "draft_arch": q.arch_source,
                              "engine": q.engine, "method": q.method}
        return result

    def _add_placements(self, result: dict[str, Any], whole: bool) -> None:
        """result["placement"]: the placement table and the asked-for placement's row; skipped (without an
        asked-for placement) where the profile cannot price the drafter forward. Where the whole draft step is the
        answer its savings and crossovers are the answer's, not repeated here."""
        q = self.question
        if q.profile.lm_head is None and q.forward_us is None and not q.placement:
            return  # no GEMM model (e.g. cpu-gloo): no drafter forward to show
        kw = {"kv_len": q.kv_len, "forward_us": q.forward_us, "free_bytes": q.free_bytes}
        try:
            table = placement_table(q.scenario, q.profile, q.arch, target_savings=not whole, **kw)
        except InputError as exc:  # e.g. a TP that does not divide the draft's heads: the strategy table stands
            result["placement"] = {"unavailable": str(exc)}
            if q.placement:  # tp1 / dp run the draft at TP 1 and may still be priced; the others are refused here
                result["placement"]["chosen"] = chosen_placement(q.scenario, q.profile, q.arch, q.placement, **kw)
            return
        if q.placement:
            table["chosen"] = chosen_placement(q.scenario, q.profile, q.arch, q.placement, **kw)
        result["placement"] = table

    def _sensitivity(self, whole: bool) -> list[dict[str, Any]]:
        """The elasticities of the answer's saving (`sensitivity.elasticities`): the whole draft step's per decode
        step where it is the answer, else one draft call's."""
        from .sensitivity import WholeStep, elasticities  # pandas: only with --sensitivity (module doc)

        q = self.question
        if whole:
            try:
                return elasticities(q.scenario, q.profile, whole_step=WholeStep(q.arch, q.kv_len, q.forward_us)
                                    ).to_dict(orient="records")
            except InputError:  # the whole step's saving is exactly 0 here: the per-call elasticities
                pass
        return elasticities(q.scenario, q.profile).to_dict(orient="records")

    @cached_property
    def workload(self) -> WorkloadAnswer:
        """The workload answer (module doc); InputError when the question has no workload."""
        from .recommend import recommend  # pandas: only for a workload (module doc)

        q = self.question
        if q.workload is None:
            raise InputError("no workload: give --workload (a batch,weight CSV, a /metrics scrape or a bench JSON)")
        rec = recommend(q.fields, q.workload, q.profile, itl_ms=q.itl_ms, acceptance_length=q.acceptance_length,
                        method=q.method, verify=q.verify, greedy_fraction=q.greedy_fraction,
                        target_dtype=q.target_dtype, arch=q.arch, kv_len=q.kv_len, forward_us=q.forward_us)
        if q.profile.lm_head is None and q.forward_us is None:  # no GEMM model (cpu-gloo): no placement
            return WorkloadAnswer(rec, None)
        try:
            choice = recommend_placement(q.scenario, q.profile, q.arch, q.workload.batch, q.workload.weight,
                                         kv_len=q.kv_len, forward_us=q.forward_us, free_bytes=q.free_bytes,
                                         why_not=placement_rule(rec, q.engine, int(q.scenario.top_k)))
        except InputError as exc:  # a draft that cannot shard at the TP: the logits answer still stands
            return WorkloadAnswer(rec, None, str(exc))
        return WorkloadAnswer(rec, choice, placement_engine_cannot=engine_cannot(
            q.engine, choice.strategy, choice.collective, int(q.scenario.top_k)))


def placement_rule(rec: Recommendation, engine: str, top_k: int = 1) -> Callable[[str, str], str]:
    """why_not(strategy, collective) for `recommend_placement`: "" where the placement line may choose the pair,
    else why not (issue 43: the line chooses among runnable triples and follows the headline):

    * the engine must run it (`engine_config.engine_cannot`: vLLM runs full_all_gather, or local_argmax_pairs with
      use_local_argmax_reduction, over NCCL);
    * the baseline and the engine's own default always may; local_argmax_pairs only where the headline turns the
      switch on (`rec.decision == "enable"`); any other strategy only where its verdict over the workload is
      "faster" (its interval above 0: the headline's rule, applied to it)."""
    from .recommend import FLAG_STRATEGY  # pandas: only for a workload (module doc)

    default = PLANS[engine].default_strategy if engine in PLANS else BASELINE

    def why_not(strategy: str, collective: str) -> str:
        cannot = engine_cannot(engine, strategy, collective, top_k)
        if cannot:
            return f"not runnable under {engine}: {cannot}"
        if strategy in (BASELINE, default):
            return ""
        verdict = rec.strategies[strategy].verdict
        if strategy == FLAG_STRATEGY:
            return "" if rec.decision == "enable" else (
                f"the headline keeps use_local_argmax_reduction off ({rec.decision}: {strategy} is {verdict} over "
                "this workload)")
        return "" if verdict == "faster" else f"the headline's rule: {strategy} is {verdict} over this workload"

    return why_not


def price(question: Question, options: Options | None = None) -> Answer:
    """The question's Answer (priced lazily, each part once)."""
    return Answer(question, options or Options())

