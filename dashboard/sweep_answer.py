"""Which quantity the batch-sweep charts and their CSV show (issue 17): the whole draft step per decode step where
an engine runs it, else per draft call with the reason - priced by `costmodel.answers.step_sweep_frame` through
`data.sweep_answer`, with the verdict's draft architecture (`question.sidebar_arch`). Shared by the sweep tab and the
HTML report; no modelling here."""

from __future__ import annotations

import pandas as pd

from costmodel.answers.step_sweep_frame import StepSweep
from costmodel.answers.whole_step import PER_CALL, QUANTITY

from .data import sweep_answer
from .question import sidebar_arch
from .tables import micro
from .verdict import Evaluation

BREAKDOWN_ONE_CALL = "one draft call's logits path (µs)"  # the breakdown's x axis where the verdict is the whole step


def sweep_answer_of(ev: Evaluation) -> tuple[pd.DataFrame, StepSweep, tuple]:
    """(table, step, key) of the batch-sweep charts (`data.sweep_answer` with the verdict's draft, `draft_arch`);
    key: what `table` is priced from (the charts' spec cache key)."""
    inputs = ev.inputs
    arch = sidebar_arch(inputs.preset, int(inputs.draft_vocab), inputs.hidden)
    table, step = sweep_answer(ev.profile_text, inputs.spec, inputs.batch_min, inputs.batch_max, arch)
    return table, step, (ev.profile_text, inputs.spec, inputs.batch_min, inputs.batch_max, arch)


def sweep_quantity(step: StepSweep) -> tuple[str, str]:
    """(chart title, caption) saying which quantity the sweep charts show (predict's JSON `quantity` texts,
    `whole_step.QUANTITY` / `PER_CALL`) and, per draft call, why (`step.why`: the `whole_step.applies_with` texts)."""
    if step.whole_step:
        return ("Time per decode step (whole draft step) vs batch",
                micro(f"Shown: the {QUANTITY} - the verdict's quantity; the crossover and its interval are the whole "
                      "step's."))
    return "Time per draft call vs batch", micro(f"Shown: {PER_CALL}. Not the whole draft step: {step.why}.")


def crossover_band(ev: Evaluation) -> tuple[float, float] | None:
    """(low, high) of the FOCUS crossover interval, or None (also where the point answer has no crossover: the
    crossing replicates' range is then no interval of it)."""
    u = ev.verdict.interval
    if u is None or u.crossover_batch is None or ev.verdict.crossover_batch is None:
        return None
    return float(u.crossover_batch.low), float(u.crossover_batch.high)


def sweep_marks(ev: Evaluation, step: StepSweep) -> tuple[bool, float | None, tuple[float, float] | None]:
    """(same, crossover batch, band) the sweep charts mark: the verdict's FOCUS crossover and its interval - the
    whole draft step's (`whole_step_answer`'s crossover, `propagate_draft_step`'s interval) where the verdict is the
    whole step - drawn only where the verdict answers with the chart's quantity (`same`)."""
    same = step.whole_step == ev.whole_step
    return (same, ev.verdict.crossover_batch, crossover_band(ev)) if same else (False, None, None)
