"""The whole draft step over a batch range (issue 17): what the dashboard's batch-sweep chart and its CSV show
where an engine runs the step (`costmodel.answers.whole_step`).

Per batch B of `batches` and strategy s, at the target placement (`whole_step_totals`, one `draft_step` over the
whole batch vector):

    whole_draft_step_us(B, s)   = T_step(B, s)                                  (us per decode step)
    saving_per_decode_step_us(B, s) = T_step(B, full_all_gather) - T_step(B, s)     (positive = s is faster)
    saving_pct(B, s)                = 100 * saving_per_decode_step_us / T_step(B, full_all_gather)

- the numbers `predict --engine E --json` gives as `whole_draft_step_us` and `saving_per_decode_step_us` at the
same batch, and the CLI sweep's `step_us` / `saving_per_decode_step_us` (`costmodel.answers.sweep_step`).

`step_sweep` says which quantity is the answer: where the whole step does not apply (`whole_step.applies_with`:
engine none, TP 1, no drafter forward or draft architecture to price) or cannot be priced (a TP that does not
divide the draft's heads: `whole_step.UNPRICEABLE` + the error), the per-call answer stands and `why` says so in
the CLI's words; `answer` is one of `sweep_step.ANSWERS` ("per draft call" / "whole draft step"), as the CLI
sweep's `answer` column.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..model.components import BASELINE
from ..model.drafter import DraftArch
from ..model.scenario import Scenario
from ..profiles.types import Profile
from .sweep_step import ANSWERS
from .whole_step import priced_or_why, whole_step_totals

PER_CALL_ANSWER, WHOLE_STEP_ANSWER = ANSWERS  # ("per draft call", "whole draft step")
COLUMNS = ("batch", "strategy", "whole_draft_step_us", "saving_per_decode_step_us", "saving_pct", "valid",
           "calls_per_decode_step", "answer")


def step_sweep_frame(scenario: Scenario, profile: Profile, arch: DraftArch, batches, *, kv_len: int = 2048,
                     forward_us: float | None = None) -> pd.DataFrame:
    """Tidy frame, one row per strategy x batch (strategy-major, as `Prediction.to_frame`), of the whole draft
    step (module doc): COLUMNS, `answer` = "whole draft step". `scenario`: one scenario (its batch is replaced by
    `batches`). Raises InputError where the draft cannot be priced at this TP."""
    b = np.asarray(batches, dtype=float).reshape(-1)
    totals, valid, calls = whole_step_totals(scenario.item(0).with_(batch=b), profile, arch, kv_len=kv_len,
                                             forward_us=forward_us)
    names = list(totals)
    t = np.concatenate([np.asarray(totals[n], dtype=float) for n in names])  # strategy-major
    base = np.tile(np.asarray(totals[BASELINE], dtype=float), len(names))
    saving = base - t
    return pd.DataFrame({"batch": np.tile(b, len(names)), "strategy": np.repeat(np.asarray(names, dtype=object),
                                                                                b.size),
                         "whole_draft_step_us": t, "saving_per_decode_step_us": saving,
                         "saving_pct": 100.0 * saving / base,
                         "valid": np.concatenate([np.asarray(valid[n], dtype=bool) for n in names]),
                         "calls_per_decode_step": np.full(t.size, int(calls)),
                         "answer": np.full(t.size, WHOLE_STEP_ANSWER, dtype=object)}, columns=list(COLUMNS))


@dataclass(frozen=True)
class StepSweep:
    """Which quantity a batch sweep answers with (module doc): the whole step's frame, or why the per-call one."""

    frame: pd.DataFrame | None  # `step_sweep_frame`; None where the per-call answer stands
    answer: str                 # PER_CALL_ANSWER or WHOLE_STEP_ANSWER (sweep_step.ANSWERS)
    why: str                    # "" where the whole step is the answer, else the one-line reason it is not

    @property
    def whole_step(self) -> bool:
        return self.frame is not None


def step_sweep(scenario: Scenario, profile: Profile, arch: DraftArch | None, batches, *, kv_len: int = 2048,
               forward_us: float | None = None) -> StepSweep:
    """The whole draft step over `batches` where it is the answer (`applies_with` returns ""), else the reason the
    per-call answer stands (the `applies_with` texts, or UNPRICEABLE + the error)."""
    sc = scenario.item(0)
    frame, why = priced_or_why(sc, profile, arch, forward_us,
                               lambda: step_sweep_frame(sc, profile, arch, batches, kv_len=kv_len,
                                                        forward_us=forward_us))
    return StepSweep(frame, PER_CALL_ANSWER if why else WHOLE_STEP_ANSWER, why)


def focus_saving_rows(frame: pd.DataFrame, focus: str) -> pd.DataFrame:
    """One row per batch of a `step_sweep_frame`: the whole-step saving of `focus` and the fastest strategy (the
    dashboard's heatmap cells under an engine):

        saving_per_decode_step_us = T_step(full_all_gather) - T_step(focus)
        saving_per_draft_call_us  = saving_per_decode_step_us / calls_per_decode_step     (the mean per call)
        saving_pct                = 100 * saving_per_decode_step_us / T_step(full_all_gather)
        fastest_strategy          = argmin over strategies of T_step (the first in STRATEGIES order on a tie)
    """
    names = list(dict.fromkeys(frame["strategy"]))
    n = len(frame) // len(names)  # strategy-major: each strategy's rows in the same batch order
    times = frame["whole_draft_step_us"].to_numpy(float).reshape(len(names), n)
    mine = frame[frame["strategy"] == focus]
    saving = mine["saving_per_decode_step_us"].to_numpy(float)
    return pd.DataFrame({"batch": mine["batch"].to_numpy(),
                         "saving_per_draft_call_us": saving / mine["calls_per_decode_step"].to_numpy(float),
                         "saving_per_decode_step_us": saving, "saving_pct": mine["saving_pct"].to_numpy(float),
                         "fastest_strategy": np.asarray(names, dtype=object)[np.argmin(times, axis=0)]})
