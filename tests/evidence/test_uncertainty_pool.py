"""The pooled discrepancy of derived collectives: conformal quantile sigma, what the pool holds, leave-one-set-out
(and leave-one-run-out) cannot leak, and the binomial check of the coverage table."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import load_profile
from costmodel.evidence.coverage import binomial_range, coverage_summary, interval_coverage
from costmodel.evidence.discrepancy import (
    CONFORMAL_MIN_ROWS,
    Z90,
    ResidualPool,
    bundled_pool,
    conformal_sigma,
    discrepancy,
    machine_key,
    pooled_sigmas,
)
from costmodel.evidence.reference import load_reference, reference_files
from costmodel.evidence.residuals import replicate_us, residual_pool
from costmodel.evidence.validate import validate
from costmodel.model.points import predict_points
from costmodel.profiles.replicates import replicate_profiles

H100 = load_profile("h100-sxm-nvlink")  # derived: its collectives have no fit report


# -- the conformal quantile, by hand -------------------------------------------------------------------------------
def test_conformal_sigma_hand_computed():
    # n = 10: k = ceil(11 * 0.9) = 10 -> the largest |log r|
    assert math.isclose(conformal_sigma(np.array([0.01, -0.02, 0.03, 0.04, -0.05, 0.06, 0.07, 0.08, 0.09, -0.10])),
                        0.10 / Z90)
    # n = 19: k = ceil(20 * 0.9) = 18 exactly (no float round-up to 19): the 18th smallest, 0.18
    x = np.arange(1, 20) * 0.01
    assert math.isclose(conformal_sigma(-x), 0.18 / Z90)
    # n = 20: k = ceil(18.9) = 19; outliers beyond the quantile do not move it (an RMS would)
    y = np.append(np.arange(1, 20) * 0.01, 5.0)
    assert math.isclose(conformal_sigma(y), 0.19 / Z90)
    assert math.isclose(conformal_sigma(np.append(np.arange(1, 20) * 0.01, 50.0)), 0.19 / Z90)
    # n = 8 < 9 rows: the 90% quantile does not exist
    assert math.isnan(conformal_sigma(np.full(8, 0.1)))
    assert CONFORMAL_MIN_ROWS == 9 and not math.isnan(conformal_sigma(np.full(9, 0.1)))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-3, 3, allow_nan=False), min_size=9, max_size=60))
def test_conformal_quantile_covers_at_least_90_percent_of_its_own_sample(values):
    x = np.asarray(values)
    q = conformal_sigma(x) * Z90
    assert np.isclose(np.abs(x), q).any() or np.isclose(q, 0.0)  # an order statistic of the sample
    assert np.mean(np.abs(x) <= q * (1 + 1e-12)) >= math.ceil(0.9 * (len(x) + 1) - 1e-9) / len(x) - 1e-12


def test_machine_key_groups_one_results_directory():
    a = "org/nccl-tests bench/H100/results/run1/all_gather_ring.out @ abc (ring), x.log line 3"
    b = "org/nccl-tests bench/H100/results/run1/all_reduce_nvls.out @ def, y.log line 9"
    c = "org/docs mkdocs/clusters/lambda.md @ abc (InfiniBand)"
    assert machine_key(a, "t1") == machine_key(b, "t2") == "org/nccl-tests bench/H100/results/run1"
    assert machine_key(c, "t3") == "set:t3"  # a document page: its own set
    assert machine_key("published 8x H200 benchmark", "published.csv") == "set:published.csv"


# -- synthetic reference tables priced with the derived H100 profile ---------------------------------------------
def _set(name, spread, seed, *, source="synthetic", nodes=1, used=False, floor=None, op="all_gather"):
    sizes = 2.0 ** np.arange(16, 28)
    rows = pd.DataFrame({"op": op, "mode": "graph", "world_size": 8 * nodes, "nodes": nodes,
                         "bytes_per_rank": sizes, "gpu": "H100", "source": source, "table": name, "dtype": "fp32",
                         "rows": 0, "cols": 0, "file": "syn.csv", "used_in_profile": used, "profile": H100.name})
    pred = predict_points(rows, H100)["predicted_us"].to_numpy(float)
    rng = np.random.default_rng(seed)
    rows["median_us"] = pred * np.exp(spread * rng.standard_normal(len(rows)))
    rows["predicted_us"] = pred if floor is None else np.fmax(pred, floor)
    rows["host_floor_us"] = np.nan if floor is None else floor
    return rows.assign(profile_used=H100.name)


def test_pool_holds_held_out_model_priced_rows_of_derived_ops_only():
    table = pd.concat([_set("a", 0.1, 0), _set("in", 0.1, 1, used=True), _set("fl", 0.1, 2, floor=1e9),
                       _set("x", 0.1, 3, nodes=2, op="all_reduce")], ignore_index=True)
    pool = residual_pool(table)
    assert sorted(set(pool.ref_set)) == ["a", "x"]  # in-sample rows and floor-priced rows are no evidence
    assert set(pool.key) == {"all_gather", "all_reduce@inter"}
    a = table[table["table"] == "a"]
    assert np.allclose(pool.log_res[pool.ref_set == "a"], np.log(a["predicted_us"] / a["median_us"]))
    assert (pool.param_var >= 0).all() and (pool.param_var > 0).any()  # H100's replicate spread
    # a fitted profile's ops keep their fit report: cpu-gloo's rows never enter the pool
    gloo = load_profile("cpu-gloo")
    rows = _set("g", 0.1, 4).assign(profile=gloo.name, profile_used=gloo.name)
    assert len(residual_pool(rows).key) == 0


def test_pooled_sigma_is_the_conformal_quantile_of_the_other_sets_minus_the_replicate_variance():
    key = np.array(["all_gather"] * 30, dtype=object)
    sets = np.array(["a"] * 10 + ["b"] * 10 + ["c"] * 10, dtype=object)
    log_res = np.concatenate([np.full(10, 2.0), np.arange(1, 11) * 0.01, np.arange(11, 21) * 0.01])
    pv = np.concatenate([np.zeros(10), np.full(20, 0.01 ** 2)])
    pool = ResidualPool(key, sets, sets.copy(), log_res, pv)
    sigma, n, scope = pooled_sigmas(pool, ("a",))["all_gather"]
    # b and c: 20 rows 0.01..0.20, k = ceil(21 * 0.9) = 19 -> q = 0.19
    assert (n, scope) == (20, "all_gather")
    assert math.isclose(sigma, math.sqrt((0.19 / Z90) ** 2 - 0.01 ** 2))
    # same run as 'b' (one machine): leaving 'b' out leaves 'a' out too -> only c's 10 rows: q = 0.20
    pool2 = ResidualPool(key, sets, np.array(["m"] * 20 + ["c"] * 10, dtype=object), log_res, pv)
    sigma2, n2, _ = pooled_sigmas(pool2, ("b",))["all_gather"]
    assert n2 == 10 and math.isclose(sigma2, math.sqrt((0.20 / Z90) ** 2 - 0.01 ** 2))
    # under 9 rows of the op: every collective of the scope; none at all: no entry
    few = ResidualPool(np.array(["all_gather"] * 5 + ["all_reduce"] * 10, dtype=object),
                       np.array(["a"] * 5 + ["b"] * 10, dtype=object), np.array(["a"] * 5 + ["b"] * 10, dtype=object),
                       np.arange(1, 16) * 0.01, np.zeros(15))
    got = pooled_sigmas(few)
    assert got["all_gather"][1:] == (15, "every collective, intra-node") and got["all_reduce"][1] == 10
    assert "all_gather" not in pooled_sigmas(few, ("b",))


def test_leave_one_set_out_cannot_leak_the_scored_sets_rows():
    """The intervals of set 'a' do not move when a's own measurements change; those of 'b' (whose pool holds a)
    do - so the pool is used and the scored set is out of its own pool."""
    base = pd.concat([_set("a", 0.05, 0), _set("b", 0.05, 1), _set("c", 0.3, 2)], ignore_index=True)
    moved = base.copy()
    a = (moved["table"] == "a").to_numpy()
    moved.loc[a, "median_us"] *= np.exp(np.linspace(-1.5, 1.5, a.sum()))  # a's residuals now huge
    one, two = interval_coverage(base), interval_coverage(moved)
    assert np.array_equal(one.loc[a, "predicted_p05_us"], two.loc[a, "predicted_p05_us"])
    assert np.array_equal(one.loc[a, "predicted_p95_us"], two.loc[a, "predicted_p95_us"])
    b = (base["table"] == "b").to_numpy()
    assert (two.loc[b, "predicted_p95_us"] > one.loc[b, "predicted_p95_us"] * 1.05).all()
    # the sigma behind a's intervals is the pool of b and c alone
    want = pooled_sigmas(residual_pool(base[~a]))["all_gather"][0]
    assert math.isclose(discrepancy(H100, exclude_files=("a",), pool=residual_pool(moved)).sigma("all_gather"), want)
    # by default the pool also holds the bundled reference rows of every set the table does not name
    bundled = bundled_pool()
    assert len(bundled.key) > 100
    want = pooled_sigmas(residual_pool(base[~a]) + bundled.without_sets({"a", "b", "c"}))["all_gather"][0]
    assert np.allclose(two.loc[a, "discrepancy_sigma"], want)
    alone = interval_coverage(moved, pool=residual_pool(moved))  # the table's own rows only
    assert np.allclose(alone.loc[a, "discrepancy_sigma"], pooled_sigmas(residual_pool(base[~a]))["all_gather"][0])


def test_leave_one_run_out_drops_sibling_tables_of_the_same_results_directory():
    run = "org/nccl-tests bench/results/run1/{}.out @ abc"
    table = pd.concat([_set("r1", 0.02, 0, source=run.format("x")), _set("r2", 0.6, 1, source=run.format("y")),
                       _set("other", 0.02, 2)], ignore_index=True)
    pool = residual_pool(table)
    assert pooled_sigmas(pool, ("r1",))["all_gather"][1] == 12  # 'other' only: r2 shares r1's run
    assert pooled_sigmas(pool, ("other",))["all_gather"][1] == 24


# -- the binomial check ------------------------------------------------------------------------------------------------
def _binom_cdf(k, n, p=0.9):
    return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k + 1))


def test_binomial_range_is_the_5th_to_95th_percentile_of_the_covered_count():
    for n in (1, 3, 8, 11, 25, 31, 256):
        lo, hi = binomial_range(n)
        assert _binom_cdf(lo, n) >= 0.05 and (lo == 0 or _binom_cdf(lo - 1, n) < 0.05)
        assert _binom_cdf(hi, n) >= 0.95 and (hi == 0 or _binom_cdf(hi - 1, n) < 0.95)
    assert binomial_range(3) == (2, 3) and binomial_range(8) == (6, 8) and binomial_range(31) == (25, 30)


def test_binomial_range_is_scipys_interval_without_importing_scipy_stats():
    binom = pytest.importorskip("scipy.stats").binom
    for level, coverage in ((0.9, 0.9), (0.8, 0.95), (0.95, 0.5)):
        for n in range(0, 401):
            lo, hi = binom.interval(level, n, coverage)
            assert binomial_range(n, level, coverage) == (int(lo), int(hi)), (n, level, coverage)


def test_coverage_summary_says_which_sets_are_consistent_and_pools_the_held_out_rows():
    def rows(name, n, k):
        return pd.DataFrame({"ref_set": name, "profile_used": "p", "used_in_profile": False,
                             "covered": [True] * k + [False] * (n - k), "predicted_p05_us": 1.0,
                             "predicted_p95_us": 2.0, "floor_priced": False})

    summ = coverage_summary(pd.concat([rows("small", 3, 3), rows("wide", 31, 31), rows("narrow", 31, 24),
                                       rows("ok", 31, 28)], ignore_index=True)).set_index("reference_set")
    assert summ.loc["small", "consistent_with_90"] == "yes"  # 3 of 3 is what 90% gives 73% of the time
    assert summ.loc["wide", "consistent_with_90"] == "no: too wide"
    assert summ.loc["narrow", "consistent_with_90"] == "no: too narrow"
    assert summ.loc["ok", "consistent_with_90"] == "yes" and summ.loc["ok", "binomial_90_range"] == "25-30"
    pooled = summ.loc["all held-out"]
    assert (pooled["n"], pooled["covered"]) == (96, 86) and math.isclose(pooled["coverage_90"], 86 / 96)
    assert summ.loc["all held-out, priced by the model", "n"] == 96
    assert "all held-out, priced at the table's host floor" not in summ.index


def test_bundled_pool_is_cached_on_disk_under_its_inputs_hash(tmp_path, monkeypatch):
    import costmodel.evidence.discrepancy as unc
    from costmodel.evidence import residuals

    small = ResidualPool(np.array(["all_gather"] * 9, dtype=object), np.array(["s"] * 9, dtype=object),
                         np.array(["set:s"] * 9, dtype=object), np.arange(1, 10) * 0.01, np.zeros(9))
    calls = []
    monkeypatch.setenv("COSTMODEL_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(unc, "_POOL", [])
    monkeypatch.setattr(unc, "_pool_fingerprint", lambda: "a" * 64)
    monkeypatch.setattr(residuals, "reference_pool", lambda: calls.append(1) or small)  # a miss prices the pool
    first = unc.bundled_pool()
    assert calls == [1] and len(list(tmp_path.glob("discrepancy-pool-*.json"))) == 1
    monkeypatch.setattr(unc, "_POOL", [])  # a new process: read from disk, not priced again
    again = unc.bundled_pool()
    assert calls == [1] and np.array_equal(again.log_res, first.log_res) and list(again.key) == list(first.key)
    monkeypatch.setattr(unc, "_POOL", [])
    monkeypatch.setattr(unc, "_pool_fingerprint", lambda: "b" * 64)  # an input changed: priced again
    unc.bundled_pool()
    assert calls == [1, 1]
    (path,) = tmp_path.glob("discrepancy-pool-bbbb*.json")
    path.write_text("{not json")  # a broken cache file is recomputed, never an error
    monkeypatch.setattr(unc, "_POOL", [])
    unc.bundled_pool()
    assert calls == [1, 1, 1]


def test_a_pool_priced_while_an_input_changed_is_not_stored(tmp_path, monkeypatch):
    import costmodel.evidence.discrepancy as unc
    from costmodel.evidence import residuals

    small = ResidualPool(np.array(["all_gather"] * 9, dtype=object), np.array(["s"] * 9, dtype=object),
                         np.array(["set:s"] * 9, dtype=object), np.arange(1, 10) * 0.01, np.zeros(9))
    prints = iter(["a" * 64, "b" * 64, "b" * 64, "b" * 64])  # a profile rewritten while the pool was priced
    monkeypatch.setenv("COSTMODEL_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(unc, "_POOL", [])
    monkeypatch.setattr(unc, "_pool_fingerprint", lambda: next(prints))
    monkeypatch.setattr(residuals, "reference_pool", lambda: small)
    assert unc.bundled_pool() is small
    assert not list(tmp_path.glob("discrepancy-pool-*.json"))  # neither under the old inputs' key nor the new
    monkeypatch.setattr(unc, "_POOL", [])
    unc.bundled_pool()  # the inputs stay put now: stored under their fingerprint
    assert [p.name[:20] for p in tmp_path.glob("discrepancy-pool-*.json")] == ["discrepancy-pool-bbb"]


def test_replicate_us_prices_each_replicate_as_predict_points_does():
    # replicate_us extracts the rows' arrays once for all replicates (model.points.point_groups); each row must be,
    # bit for bit, what predict_points gives under that replicate - over collectives and kernel ops, mixed modes
    table = validate(load_reference(reference_files()))
    for name in ("h100-sxm-nvlink", "cpu-gloo"):
        prof = load_profile(name)
        rows = table[table["profile_used"] == name]
        reps = replicate_profiles(prof)
        got = replicate_us(rows, prof)
        want = np.stack([predict_points(rows, rep)["predicted_us"].to_numpy(float) for rep in reps])
        assert got.shape == (len(reps), len(rows)) and len(rows) > 0
        np.testing.assert_array_equal(got, want)
