"""A sweep's whole-draft-step columns (issue 17): where an engine runs the step, the answer of each sweep row is
the whole draft step as `predict` prices it (`costmodel.answers.whole_step`).

Per valid row, per strategy s: step_us = `whole_step_totals(...)[0][s]` (us per decode step, target placement)
and its saving step_us(full_all_gather) - step_us(s) (`StepColumns.saving_us`; the sweep's `saving_per_decode_step_us`
on those rows) - the numbers `predict --engine E --json` gives as
`whole_draft_step_us` and `saving_per_decode_step_us` at the same batch. `whole_step_totals` is vectorized over
the batch only (one --num-spec-tokens, one TP, one engine per call), so the rows are grouped by every other field
(the model and each swept value but the batch) and each group is priced in one call: len(batches) rows per call.

Where the whole step does not apply (`whole_step.applies`: engine none, TP 1, no drafter forward to price) or
cannot be priced (a draft whose heads the TP does not divide), the step columns are empty, `answer` says
"per draft call" and `why_not_whole_draft_step` says why (empty under engine none, where the per-call answer is
the one asked for).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from ..model.components import BASELINE
from ..model.drafter import DraftArch
from ..model.scenario import Scenario
from ..profiles.types import Profile
from .whole_step import PER_CALL, QUANTITY, priced_or_why, whole_step_totals

# the `answer` column's two values: the leading words of predict's JSON `quantity` (whole_step.PER_CALL / QUANTITY)
ANSWERS = (PER_CALL.split(":")[0], QUANTITY.split(":")[0])  # ("per draft call", "whole draft step")


@dataclass(frozen=True)
class StepColumns:
    """The whole-step columns of a sweep's valid rows (module doc)."""

    step_us: dict[str, np.ndarray]     # strategy -> us per decode step (NaN where the per-call answer stands)
    answer: np.ndarray                 # codes into ANSWERS
    why: tuple[np.ndarray, list[str]]  # (codes, texts): why the per-call answer stands ("" where it need not say)

    def saving_us(self, name: str) -> np.ndarray:
        """step_us(full_all_gather) - step_us(name), us per decode step (positive = name is faster)."""
        return self.step_us[BASELINE] - self.step_us[name]


def step_columns(scenario: Scenario, group: np.ndarray, model: np.ndarray, profile: Profile,
                 archs: list[DraftArch | None] | None, names: list[str], *, kv_len: int = 2048,
                 forward_us: float | None = None) -> StepColumns:
    """`StepColumns` of `scenario` (the sweep's valid rows, flat), `group`: one integer per row, equal where every
    field but the batch is; `model`: each row's index into `archs` (the sweep's models' draft architectures;
    None, or a None entry: no draft to price, the per-call answer stands); `kv_len`, `forward_us`: the drafter's
    KV length and measured forward (`predict --kv-len / --forward-us`), the same for every row."""
    n = int(np.size(group))
    step = {s: np.full(n, np.nan) for s in dict.fromkeys([BASELINE, *names])}
    answer = np.zeros(n, dtype=np.int32)
    why_codes, whys = np.zeros(n, dtype=np.int32), [""]
    if n == 0:
        return StepColumns(step, answer, (why_codes, whys))
    _, inverse, counts = np.unique(np.asarray(group).reshape(-1), return_inverse=True, return_counts=True)
    order = np.argsort(inverse.reshape(-1), kind="stable")
    batch = np.broadcast_to(scenario.batch, (n,))
    for rows in np.split(order, np.cumsum(counts)[:-1]):
        sc = scenario.item(int(rows[0]))
        arch = None if archs is None else archs[int(model[rows[0]])]
        if str(sc.engine) == "none":  # the per-call answer is the one asked for: nothing to say
            continue
        priced, why = priced_or_why(sc, profile, arch, forward_us, partial(
            whole_step_totals, sc.with_(batch=batch[rows]), profile, arch, kv_len=kv_len, forward_us=forward_us))
        if not why:
            for s, values in step.items():
                values[rows] = priced[0][s]
            answer[rows] = 1
            continue
        if why not in whys:
            whys.append(why)
        why_codes[rows] = whys.index(why)
    return StepColumns(step, answer, (why_codes, whys))
