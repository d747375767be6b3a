"""Tiny collectives inside one large NVLink domain: NVLS where NCCL's tuner prefers it to a (p-1)-step ring."""

from __future__ import annotations

import numpy as np
import pytest

from costmodel import load_profile
from costmodel.model.collectives import collective_time_us, regime_name, without_regimes

NVLS_US, LAUNCH_US, LL_BASE_US, LL_HOP_US = 25.0, 4.0, 6.6, 0.6  # NCCL tuning.cc hwLat / baseLat (2.23+)


def test_tp64_pair_all_gather_on_nvl72_is_priced_as_nvls_not_a_63_step_ring():
    g = load_profile("gb200-nvl72")
    bus = 8 * 64 * 63 / 64  # 8-byte pair per rank
    t = float(collective_time_us(g, "all_gather", 8.0, 64, 1, "graph"))
    assert regime_name(g, "all_gather", 8.0, 64) == "NVLS"
    assert t == pytest.approx(LAUNCH_US + NVLS_US + bus / 282.0e3, abs=1e-6)  # was 4 + 6.6 + 63 x 0.6 = 48.4 us
    # below p = 32 the ring LL latency 6.6 + 0.6 (p-1) is still under NVLS's 25 us: unchanged
    for p in (8, 16, 24):
        assert regime_name(g, "all_gather", 8.0, p) == "LL"
        assert float(collective_time_us(g, "all_gather", 8.0, p)) == pytest.approx(
            LAUNCH_US + LL_BASE_US + LL_HOP_US * (p - 1) + 8 * (p - 1) / 282.0e3, abs=1e-6)
    # all-reduce: 2 (p-1) ring steps, NVLS from p = 17
    assert regime_name(g, "all_reduce", 8.0, 16) == "LL" and regime_name(g, "all_reduce", 8.0, 24) == "NVLS"
    big = collective_time_us(g, "all_reduce", 2.0**29, np.array([64, 72]))
    assert all(regime_name(g, "all_reduce", 2.0**29, p) == "NVLS" for p in (64, 72))
    # with NVLS off the ring prices 512 MiB at 72 as the published NCCL_NVLS_ENABLE=0 run (1806.7 us) within 2%
    ring = float(collective_time_us(without_regimes(g, {"NVLS"}), "all_reduce", 2.0**29, 72))
    assert ring == pytest.approx(1806.7, rel=0.02) and np.all(big < ring)


def test_eight_gpu_nodes_keep_the_ring_for_tiny_messages():
    for name in ("h100-sxm-nvlink", "b200-hgx-nvlink", "b300-hgx-nvlink"):
        prof = load_profile(name)
        for op in ("all_gather", "all_reduce"):
            assert regime_name(prof, op, 8.0, 8) == "LL", (name, op)
