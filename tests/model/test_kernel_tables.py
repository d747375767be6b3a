"""The measured-table interpolation (`kernels.table_us`) is numpy only and gives scipy's numbers bit for bit:
`RegularGridInterpolator(method="linear", bounds_error=False, fill_value=None)` on the same log axes and log grid,
on every table of every bundled profile, at the nodes, between them and outside them (extrapolated)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.interpolate import RegularGridInterpolator

from costmodel.model import kernel_tables, kernels
from costmodel.profiles.paths import PROFILE_DIR
from costmodel.profiles.store import load_profile

NAMES = sorted(p.stem for p in PROFILE_DIR.glob("*.json") if p.stem != "schema")


def scipy_table_us(table, rows, cols) -> np.ndarray:
    """The former implementation: scipy's interpolator on the table's log grid."""
    axes, grid = kernel_tables._table_grid(table)
    r, c = np.broadcast_arrays(np.asarray(rows, dtype=float), np.asarray(cols, dtype=float))
    points = [np.log(np.maximum(r, 1e-12))]
    if len(table.cols) > 1:
        points.append(np.log(np.maximum(c, 1e-12)))
    interp = RegularGridInterpolator(axes, grid, method="linear", bounds_error=False, fill_value=None)
    return np.exp(interp(np.stack(points, axis=-1))).reshape(r.shape)


def probe_points(table, rng) -> tuple[np.ndarray, np.ndarray]:
    """Every node, random points inside, and points outside on either side of each axis."""
    rows, cols = np.asarray(table.rows), np.asarray(table.cols)
    nr, nc = np.meshgrid(rows, cols, indexing="ij")
    lo_r, hi_r, lo_c, hi_c = np.log(rows[0]), np.log(rows[-1]), np.log(cols[0]), np.log(cols[-1])
    rr = np.exp(rng.uniform(lo_r - 1, hi_r + 1, 400))
    cc = np.exp(rng.uniform(lo_c - 1, hi_c + 1, 400))
    inside_r = np.exp(rng.uniform(lo_r, hi_r, 400))
    inside_c = np.exp(rng.uniform(lo_c, hi_c, 400))
    return (np.concatenate([nr.ravel(), rr, inside_r, [rows[0] / 3, rows[-1] * 3]]),
            np.concatenate([nc.ravel(), cc, inside_c, [cols[0] / 3, cols[-1] * 3]]))


@pytest.mark.parametrize("name", NAMES)
def test_table_us_is_scipy_bit_for_bit(name):
    profile = load_profile(name)
    rng = np.random.default_rng(0)
    for table in profile.kernel_tables:
        rows, cols = probe_points(table, rng)
        ours, outside = kernels.table_us(table, rows, cols)
        np.testing.assert_array_equal(ours, scipy_table_us(table, rows, cols), err_msg=f"{name} {table.op}")
        assert outside.shape == rows.shape


def test_single_row_and_single_column_tables():
    """The degenerate shapes: one row (constant in rows), one column (1-D in rows), one node."""
    rng = np.random.default_rng(1)
    base = load_profile("cpu-gloo").kernel_tables[0]
    shapes = [((8.0,), (1000.0, 4000.0, 16000.0)), ((1.0, 8.0, 64.0), (1.0,)), ((8.0,), (1.0,)),
              ((1.0, 2.0, 8.0, 64.0), (100.0, 1e5))]
    for rows, cols in shapes:
        median = tuple(tuple(float(v) for v in rng.uniform(1, 100, len(cols))) for _ in rows)
        table = type(base)(op=base.op, dtype=base.dtype, mode=base.mode, world_size=base.world_size, rows=rows,
                           cols=cols, median_us=median)
        r, c = probe_points(table, rng)
        np.testing.assert_array_equal(kernels.table_us(table, r, c)[0], scipy_table_us(table, r, c))
