"""Measured kernel tables (profile `kernels.tables`): time interpolated linearly in (log rows, log cols, log time)
between the measured nodes, numpy only.

`table_us` gives the numbers scipy.interpolate.RegularGridInterpolator(method="linear", bounds_error=False,
fill_value=None) gave on the same log axes and grid, bit for bit (tests/model/test_kernel_tables.py compares them
on every bundled table): importing scipy.interpolate cost ~0.5 s of every `predict`.
"""

from __future__ import annotations

import numpy as np

from ..profiles.types import KernelTable
from . import dedup

_TABLE_GRIDS_SIZE = 4096  # tables: 16 ensembles of 100 members x a few tables each


def _table_grid(table: KernelTable) -> tuple[list[np.ndarray], np.ndarray]:
    """(log axes, log median grid) of a measured table: one axis (rows) when it has a single column; a single row
    is widened to two identical nodes 2e-9 apart in log rows (constant in rows)."""
    grid = np.log(np.asarray(table.median_us, dtype=float))
    axes = [np.log(np.asarray(table.rows))]
    if len(table.cols) > 1:
        axes.append(np.log(np.asarray(table.cols)))
    else:
        grid = grid[:, 0]
    if len(axes[0]) == 1:  # a single row: constant in rows
        axes[0] = np.array([axes[0][0] - 1e-9, axes[0][0] + 1e-9])
        grid = np.stack([grid[0], grid[0]])
    return axes, grid


def _grid_interval(axis: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(interval index i, (x - axis[i]) / (axis[i + 1] - axis[i])) of x on an ascending axis of >= 2 nodes: the
    interval holding x (the last one for x == axis[-1]), the first / last one outside the axis (extrapolated)."""
    i = np.clip(np.searchsorted(axis, x, side="right") - 1, 0, len(axis) - 2)
    return i, (x - axis[i]) / (axis[i + 1] - axis[i])


def _interpolate_log_grid(axes: list[np.ndarray], grid: np.ndarray, points: list[np.ndarray]) -> np.ndarray:
    """Piecewise-linear interpolation of `grid` on `axes` (one or two) at `points`, linear extrapolation outside:
    the numbers of scipy.interpolate.RegularGridInterpolator(axes, grid, method="linear", bounds_error=False,
    fill_value=None), in its order of operations (tests/model/test_kernel_tables.py compares them bit for bit):
    1-D  g[i] (1 - y) + g[i + 1] y;
    2-D  g[i, j] (1 - y0) (1 - y1) + g[i, j + 1] (1 - y0) y1 + g[i + 1, j] y0 (1 - y1) + g[i + 1, j + 1] y0 y1."""
    i, y0 = _grid_interval(axes[0], points[0])
    if len(axes) == 1:
        return grid[i] * (1 - y0) + grid[i + 1] * y0
    j, y1 = _grid_interval(axes[1], points[1])
    return (grid[i, j] * (1 - y0) * (1 - y1) + grid[i, j + 1] * (1 - y0) * y1 + grid[i + 1, j] * y0 * (1 - y1)
            + grid[i + 1, j + 1] * y0 * y1)


_TABLE_GRIDS = dedup.ContentCache(_TABLE_GRIDS_SIZE)  # (a bounded, thread-safe {id(table): (table, grid)})


def _cached_table_grid(table: KernelTable) -> tuple[list[np.ndarray], np.ndarray]:
    """`_table_grid`, cached per table object (kept alive with its entry, so its id stays its own)."""
    hit = _TABLE_GRIDS.get(id(table))
    if hit is not None and hit[0] is table:
        return hit[1]
    out = _table_grid(table)
    _TABLE_GRIDS.put(id(table), (table, out))
    return out


def table_us(table: KernelTable, rows, cols) -> tuple[np.ndarray, np.ndarray]:
    """(interpolated time, outside-the-table flag) for points (rows, cols): linear in (log rows, log cols, log
    time) between the measured nodes (`_interpolate_log_grid`)."""
    r, c = np.broadcast_arrays(np.asarray(rows, dtype=float), np.asarray(cols, dtype=float))
    inside = (r >= table.rows[0]) & (r <= table.rows[-1])
    points = [np.log(np.maximum(r, 1e-12)).reshape(-1)]
    if len(table.cols) > 1:
        inside &= (c >= table.cols[0]) & (c <= table.cols[-1])
        points.append(np.log(np.maximum(c, 1e-12)).reshape(-1))
    axes, grid = _cached_table_grid(table)
    values = np.exp(_interpolate_log_grid(axes, grid, points))
    return values.reshape(r.shape), ~inside
