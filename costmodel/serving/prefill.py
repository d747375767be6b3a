"""Where a run's prompt tokens were prefilled: `prefill_per_step`.

A run shows each request's first token (the step its prefill completed in, `costmodel.serving.steps`), not its
chunks. vLLM's scheduler (vllm/v1/core/sched/scheduler.py `Scheduler.schedule`) gives a step at most
max_num_batched_tokens tokens: (1 + K) per decoding request first, the rest to prefills in order, so a prompt
longer than what is left runs in chunks over several steps. Walking back from each first-token step, in first-token
order, each step's room (the budget less its decode tokens) takes what it can; a chunk never goes before the first
step that ended after the request was sent, nor before the run's first step: that step takes what is left.
"""

from __future__ import annotations

import numpy as np

from .steps import EngineSteps


def prefill_per_step(steps: EngineSteps, input_lens: np.ndarray, budget: int | None, spec_tokens: int = 0,
                     sent_s: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(prompt tokens prefilled in each step, each request's first prefill step) (module doc): whole prompts in
    their first-token step where they fit the step's budget, else chunked backwards from it into the steps with room
    left, FCFS (requests in first-token order). A chunk never goes before the first step that ended after the
    request was sent (`sent_s`, run clock) nor before the run's first step: that step takes what is left.
    O(requests + steps): full steps are skipped by a union-find over the steps (each points to the nearest step at
    or before it with room; path halving)."""
    whole = steps.prefill_tokens.astype(float)
    room = (np.inf if budget is None else np.maximum(budget - steps.n_decode * (1 + spec_tokens), 0)) + 0 * whole
    if (whole <= room).all():
        return whole, steps.first_step.copy()
    rooms = _Rooms(room)
    used, first = np.zeros(steps.count), steps.first_step.copy()
    lowest = (np.zeros(input_lens.size, dtype=np.int64) if sent_s is None else
              np.minimum(np.searchsorted(steps.end_s, sent_s, side="right"), steps.first_step))
    for i in np.argsort(steps.first_step, kind="stable"):  # a Python loop only for runs that chunk
        left, floor = float(input_lens[i]), int(lowest[i])
        k = rooms.at_or_before(int(steps.first_step[i]))
        while left > 0:
            k = max(k, floor)
            take = rooms.take(k, left, everything=k == floor)  # the earliest step it can be in takes what is left
            used[k] += take
            left -= take
            first[i] = k
            if left > 0:
                k = rooms.at_or_before(k - 1)
    return used, first


class _Rooms:
    """Room left per step, and for any step the nearest one at or before it with room: a union-find over the steps
    (a full step points to the one before it; path halving), so a walk back skips full steps in amortized O(1).
    `finds` counts the pointer hops (tests/serving/test_step_fit.py bounds it by the steps and requests)."""

    def __init__(self, room: np.ndarray) -> None:
        self.room = room.astype(float).tolist()
        self.parent = [k if self.room[k] > 0 or k == 0 else k - 1 for k in range(len(self.room))]
        self.finds = 0

    def at_or_before(self, k: int) -> int:
        """The nearest step <= k with room (step 0 if none: the run's first step takes what is left)."""
        parent = self.parent
        while k > 0 and parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
            self.finds += 1
        return max(k, 0)

    def take(self, k: int, want: float, everything: bool = False) -> float:
        """Up to `want` tokens of step k's room (all of `want` at step 0 or where `everything`); a step left full
        points back."""
        got = want if everything or k == 0 else min(want, self.room[k])
        self.room[k] -= got
        if k > 0 and self.room[k] <= 0:
            self.parent[k] = k - 1
        return got
