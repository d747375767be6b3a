"""A workload file as a decode batch distribution, for `recommend --workload` and the dashboard's upload:
`parse_workload` / `load_workload` (CSV and /metrics by `costmodel.answers.workload`; a bench JSON here).

A `vllm bench serve --save-result` JSON is read by the serving replay's one reader (`costmodel.serving.run`), so
recommend and simulate read one file alike (its unused fields dropped, the same bounds and errors), and its
batch distribution comes from the same server the replay infers (`costmodel.serving.server`):

* with a per-request timeline (`start_times`, `ttfts`, `latencies`: `--save-detailed`): the decode concurrency
  c(t) over the run's decode window; the share of decode steps at batch b is the time at b divided by the step
  time at b, T(b) = alpha + beta b of the step model `simulate` fits on the same run (`step_fit.fit_step`; time
  shares where no step can be fitted);
* otherwise Little's law: B_mean = (sum over requests of decode time) / duration, decode time = the sum of the
  request's inter-token gaps (or (output_len - 1) x mean_tpot_ms), at most the client's max_concurrency, spread
  over floor(B_mean) and ceil(B_mean) with the weights that keep the mean.

Hints for the impact, labelled as the run's: its mean ITL (`mean_itl_ms`) and mean acceptance length (the run's
own, `run.acceptance_length`).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..answers.workload import (
    MAX_WORKLOAD_BYTES,
    Workload,
    example_path,
    parse_csv,
    parse_metrics,
    workload_text,
)
from ..io.errors import InputError
from ..io.safe_io import read_text
from .run import BenchRun, parse_bench_text
from .server import decode_concurrency, server_from
from .step_fit import fit_step


def _step_us(run: BenchRun, batch: np.ndarray) -> tuple[np.ndarray, str]:
    """The fitted step time at each batch, and how it was found (1 us each - time shares - without a fit)."""
    try:
        step = fit_step(run).step if run.has_timeline else None
    except InputError:
        step = None
    if step is None or not (step.alpha_us > 0 or step.beta_us > 0):
        return np.ones_like(batch, dtype=float), "time shares (no step time fitted)"
    return np.maximum(step.alpha_us + step.beta_us * batch, 1e-9), (
        f"time at each batch / the step time fitted on the run ({step.alpha_us:.1f} + {step.beta_us:.2f} x B us)")


def _from_timeline(run: BenchRun) -> tuple[np.ndarray, np.ndarray, str] | None:
    seen = decode_concurrency(run)
    if seen is None:
        return None
    decoding, _waiting, dt = seen
    keep = (decoding >= 1) & (dt > 0)
    if not keep.any():
        return None
    batch, where = np.unique(decoding[keep], return_inverse=True)
    time_s = np.bincount(where, weights=dt[keep])
    step_us, how = _step_us(run, batch.astype(float))
    server = server_from(seen)
    return batch, time_s / step_us, (f"decode concurrency over the run's timeline (start_times, ttfts, latencies): "
                                     f"{how}; {server.describe()}")


def _littles_law(run: BenchRun) -> tuple[np.ndarray, np.ndarray, str]:
    if run.duration_s is None:
        raise InputError(f"bench {run.name}: needs a positive duration (s) - is this a vllm bench serve result?")
    tpot = run.reported.get("mean_tpot_ms")
    if run.itl_sum_s is not None and run.itl_count is not None and run.itl_count.sum() > 0:
        decode_s, how = float(run.itl_sum_s.sum()), "sum of itls"
    elif tpot is not None and tpot > 0:
        decode_s, how = float(np.clip(run.output_lens - 1, 0, None).sum() * tpot / 1000.0), \
            "(output_len - 1) x mean_tpot_ms"
    else:
        raise InputError(f"bench {run.name}: needs itls, or output_lens + mean_tpot_ms")
    mean_b = decode_s / run.duration_s
    if not math.isfinite(mean_b):
        raise InputError(f"bench {run.name}: the decode time {how} is not a finite number")
    cap = run.max_concurrency
    capped = cap is not None and mean_b > cap
    mean_b = min(mean_b, cap) if capped else mean_b
    if mean_b <= 1.0:
        batch, weight = np.array([1]), np.array([1.0])
    else:
        lo = math.floor(mean_b)
        batch, weight = np.array([lo, lo + 1]), np.array([1.0 - (mean_b - lo), mean_b - lo])
    return batch, weight, (f"Little's law: decode time ({how}) / duration {run.duration_s:.1f} s = mean batch "
                           f"{decode_s / run.duration_s:.2f}" + (f", capped at max_concurrency {cap:g}" if capped
                                                                 else ""))


def bench_workload(run: BenchRun) -> Workload:
    """The run's decode batch distribution (module doc)."""
    batch, weight, method = _from_timeline(run) or _littles_law(run)
    hints: dict[str, float] = {}
    if (itl := run.reported.get("mean_itl_ms")) is not None and itl > 0:
        hints["itl_ms"] = itl
    if run.acceptance_length is not None:
        hints["acceptance_length"] = float(run.acceptance_length)
    return Workload(batch, weight, "vllm-bench", run.name, method, run.n, hints)


def parse_workload(text: str | bytes, name: str = "workload", kind: str = "auto") -> Workload:
    """A Workload from the contents of a CSV, a /metrics scrape or a bench JSON (`kind`, or detected)."""
    text, kind = workload_text(text, name, kind)
    if kind == "csv":
        return parse_csv(text, name)
    if kind == "vllm-metrics":
        return parse_metrics(text, name)
    return bench_workload(parse_bench_text(text, Path(name).name))


def load_workload(path: str | Path, kind: str = "auto") -> Workload:
    """Read (bounded: MAX_WORKLOAD_BYTES) and parse a workload file; a missing path that names a bundled example
    reads the example."""
    path = example_path(path)
    return parse_workload(read_text(path, limit_bytes=MAX_WORKLOAD_BYTES, what="workload"), Path(path).name, kind)
