"""calibration.bench.collectives.Sampler on a real gloo group of one: samples are taken in rounds that end where
the stopping rule is due, with one all_reduce per round, and it stops at --max-iters, on convergence or on the
time limit exactly as the per-sample rule would."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from calibration.bench import collectives as bench  # noqa: E402
from calibration.bench.timing import check_due, next_check_due  # noqa: E402


def _sampler(tmp_path, *flags: str) -> bench.Sampler:
    cfg = bench.parse_config(["--backend", "gloo", "--out", str(tmp_path), "--warmup", "0", *flags])
    return bench.Sampler(cfg, None, 0, torch.device("cpu"))


def _run(sampler: bench.Sampler, times_us, monkeypatch, sample_wall_s: float = 0.0
         ) -> tuple[list[float], list[int], float]:
    """Samples from `times_us` (cycled) instead of timed calls, each taking `sample_wall_s` of a virtual clock the
    sampler reads (so the time limit is tested without sleeping); returns (samples, round sizes seen by
    all_reduce, virtual seconds elapsed)."""
    rounds, it = [], iter(times_us)
    real_all_reduce = dist.all_reduce
    clock = [0.0]

    def counted(tensor, *args, **kwargs):
        rounds.append(tensor.numel() - 1)  # (the last element is the elapsed time)
        return real_all_reduce(tensor, *args, **kwargs)

    def fake_time(launch, calls):
        clock[0] += sample_wall_s
        return next(it)
    monkeypatch.setattr(dist, "all_reduce", counted)
    monkeypatch.setattr(sampler, "_time_once_us", fake_time)
    monkeypatch.setattr(bench, "time", SimpleNamespace(monotonic=lambda: clock[0],
                                                       perf_counter_ns=time.perf_counter_ns))
    return sampler.samples(lambda: None), rounds, clock[0]


def _spread(n: int) -> list[float]:
    return [100.0 * (1 + (i % 7)) for i in range(n)]  # never within 2% of its median


def test_next_check_is_the_next_count_where_the_rule_is_due():
    for n in range(0, 300):
        m = next_check_due(n, bench.MIN_ITERS)
        assert m > n and check_due(m, bench.MIN_ITERS)
        assert not any(check_due(k, bench.MIN_ITERS) for k in range(n + 1, m))


def test_rounds_end_where_the_rule_is_due_and_at_max_iters(gloo_group_of_one, tmp_path, monkeypatch):
    sampler = _sampler(tmp_path, "--max-iters", "37", "--point-time-s", "60")
    samples, rounds, _ = _run(sampler, _spread(100), monkeypatch)
    assert samples == _spread(37)  # in order, each sample once
    assert rounds == [1, 9, 8, 8, 8, 3]


def test_constant_samples_stop_at_the_first_check(gloo_group_of_one, tmp_path, monkeypatch):
    sampler = _sampler(tmp_path, "--max-iters", "1000", "--point-time-s", "60")
    samples, rounds, _ = _run(sampler, [250.0] * 100, monkeypatch)
    assert samples == [250.0] * bench.MIN_ITERS and rounds == [1, bench.MIN_ITERS - 1]


def test_samples_converging_later_stop_at_a_check_count(gloo_group_of_one, tmp_path, monkeypatch):
    sampler = _sampler(tmp_path, "--max-iters", "1000", "--point-time-s", "60")
    samples, _, _ = _run(sampler, _spread(12) + [100.0] * 500, monkeypatch)
    assert check_due(len(samples), bench.MIN_ITERS) and bench.MIN_ITERS < len(samples) < 100


def test_the_time_limit_is_overshot_by_about_one_sample_not_one_round(gloo_group_of_one, tmp_path, monkeypatch):
    # samples of 1/64 s against a 5/64 s limit (exact in binary): the first round of one sample gives the sample
    # wall, the second takes the 4 that fit the time left - not a 9-sample round to the next check count
    sampler = _sampler(tmp_path, "--max-iters", "1000", "--point-time-s", str(5 / 64))
    samples, rounds, elapsed_s = _run(sampler, _spread(1000), monkeypatch, sample_wall_s=1 / 64)
    assert len(samples) == 5 < bench.MIN_ITERS and rounds == [1, 4]
    assert elapsed_s == 5 / 64
    # a sample wall that does not divide the limit: one sample over it at most
    sampler = _sampler(tmp_path, "--max-iters", "1000", "--point-time-s", str(5 / 64))
    samples, rounds, elapsed_s = _run(sampler, _spread(1000), monkeypatch, sample_wall_s=3 / 64)
    assert rounds == [1, 1] and 5 / 64 <= elapsed_s < 5 / 64 + 3 / 64
