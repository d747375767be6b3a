"""Throughput of the public cost-model API: price N scenarios x every strategy.

    python scripts/bench_costmodel.py [--n 1000000] [--repeats 3] [--workers W]

Prints, for each N in a geometric ladder up to --n, the best wall time and the best CPU time
(time.process_time of this process, all its threads: the fair figure on a machine shared with other
work) over --repeats runs, so the cost's growth with N (linear) is visible, and the threads `predict`
priced the strategies on (costmodel.model.threads: one per CPU from 131,072 scenarios; --workers 1
prices on one thread). Not a test: report the figures.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from costmodel import (
    STRATEGIES,
    Scenario,
    default_profile,
    predict,  # noqa: E402
)
from costmodel.model.threads import worker_count  # noqa: E402


def scenarios(n: int, seed: int = 0) -> Scenario:
    rng = np.random.default_rng(seed)
    vocab = rng.choice([32000, 128256, 151936, 202048, 262208], n)
    return Scenario(vocab=vocab, tp=rng.choice([1, 2, 4, 8], n), batch=rng.integers(1, 4097, n),
                    num_spec_tokens=rng.integers(1, 8, n), dtype=rng.choice(["bf16", "fp16", "fp32"], n),
                    mode=rng.choice(["graph", "eager"], n), drafting=rng.choice(["serial", "parallel"], n))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=None, help="threads for predict (default: one per CPU)")
    args = ap.parse_args()
    profile = default_profile()
    predict(scenarios(1000), profile)  # warm caches
    n = 10_000
    ladder = []
    while n < args.n:
        ladder.append(n)
        n *= 10
    ladder.append(args.n)
    print(f"{'scenarios':>10s} {'strategies':>10s} {'threads':>7s} {'wall s':>8s} {'cpu s':>8s} "
          f"{'ns/scenario (cpu)':>18s}")
    for n in ladder:
        sc = scenarios(n)
        wall = cpu = float("inf")
        for _ in range(args.repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            pred = predict(sc, profile, workers=args.workers)
            pred.best()
            wall = min(wall, time.perf_counter() - t0)
            cpu = min(cpu, time.process_time() - c0)
        used = worker_count(n, len(STRATEGIES), args.workers)
        print(f"{n:>10d} {len(STRATEGIES):>10d} {used:>7d} {wall:8.3f} {cpu:8.3f} {cpu / n * 1e9:18.1f}")


if __name__ == "__main__":
    main()
