"""Price a large scenario array's strategies on worker threads (standard library only).

Each strategy is a sum of numpy array expressions; numpy releases the GIL inside its array loops, so on a machine
with two cores two strategies price at once. The parts several strategies share (the logits all-gather, the
factorized scenario points, a kernel estimate: `_Ctx.shared`, the `kernel_memo` store) sit in one store every
thread reads: a part is a pure function of its key, so whichever thread builds it first, each strategy gets the
same numbers bit for bit as on one thread (tests/model/test_threads.py); a part two threads build at once is
built twice, which costs time, not correctness. Every thread runs in a copy of the caller's context (contextvars),
so it sees the caller's memo store.

    workers = min(requested or the CPUs this process may use, MAX_WORKERS, strategies)
              and 1 below MIN_SCENARIOS scenarios (a thread pool costs ~0.1 ms; small arrays price in less)
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np

from ..io.errors import InputError

MIN_SCENARIOS = 1 << 17  # 131,072: below this, one thread (scripts/bench_costmodel.py: 1e5 scenarios take ~60 ms)
MAX_WORKERS = 8

T = TypeVar("T")


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # (no affinity API: macOS, Windows)
        return os.cpu_count() or 1


def check_workers(workers) -> int | None:
    """`workers` as an int >= 1, or None (automatic); anything else is a one-line InputError."""
    if workers is None:
        return None
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
        raise InputError(f"workers: must be an integer >= 1 (1 = this thread only), got {workers!r}")
    return int(workers)


def worker_count(scenarios: int, tasks: int, workers: int | None = None) -> int:
    """Threads for `tasks` strategies over `scenarios` scenarios (module doc)."""
    wanted = check_workers(workers)
    if scenarios < MIN_SCENARIOS:
        return 1
    return max(1, min(available_cpus() if wanted is None else wanted, MAX_WORKERS, tasks))


def run(fn: Callable[[str], T], names: Sequence[str], workers: int, order: Sequence[str] = ()) -> dict[str, T]:
    """{name: fn(name)} in `names` order, computed on `workers` threads, started in `order` (names not in it
    last, in their own order); workers == 1: on this thread, in `names` order."""
    if workers <= 1:
        return {n: fn(n) for n in names}
    rank = {n: i for i, n in enumerate(order)}
    start = sorted(names, key=lambda n: rank.get(n, len(rank)))  # (stable: the rest keep their order)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {n: pool.submit(contextvars.copy_context().run, fn, n) for n in start}
        return {n: futures[n].result() for n in names}
