"""Measured-table quirks: where a profile's measured kernel table gets much faster as the work grows.

A kernel reading more elements (more rows, or more columns at the same rows) should not take less time. A
measured table (`kernels.tables`, priced by `costmodel.model.kernel_tables.table_us`) can still hold such a pair
of neighbouring nodes - the bundled H200 local_max bf16 CUDA-graph table has 32 x 8,000 = 28.0 us next to
32 x 16,000 = 6.5 us (a probe artefact or a kernel switch; data/calibration/h200-2026-11-30) - and every price
interpolated from that cell moves with it (a saving that jumps between two neighbouring batches). Nothing is
corrected; the quirk is named where it prices a scenario:

* `table_quirks(profile)`: every pair of adjacent nodes (along cols at one row, or along rows at one col) whose
  larger node takes less than (1 - QUIRK_DROP) = half the smaller's time. Half, because single eager runs differ
  by that much (docs/accuracy.md: 7 of 16 eager pair_reduce sets hold one run 75-109% slower than its repeats;
  CUDA-graph repeats agree within 2%), so a smaller drop may be noise;
* `scenario_quirks(profile, scenario)`: the quirks whose nodes are corners of the cell a scenario's kernel look-up
  interpolates from: rows = rows per call; cols = the padded draft vocab (and the draft vocab) for the
  full-vocab ops at world size 1 (FULL_VOCAB_OPS), else the shard; tables of the scenario's logits dtype (any
  dtype for the ops that read no logits), at world size 1 or its TP, in its mode (engine none; an engine runs
  some parts eagerly, so both modes), over every batch of the scenario (an array: the union), one sentence each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.kernel_ratios import DTYPE_FREE_OPS
from ..profiles.types import KernelTable, Profile

QUIRK_DROP = 0.5  # a larger node this much faster than its smaller neighbour is flagged
FULL_VOCAB_OPS = ("argmax", "relayout_argmax", "relayout_copy")  # at world size 1 their cols are the whole vocab


@dataclass(frozen=True)
class TableQuirk:
    """Two adjacent nodes of one measured table: `small` (rows, cols) takes `small_us`, the larger `large` node
    takes `large_us` < (1 - QUIRK_DROP) small_us."""

    table: KernelTable
    small: tuple[float, float]
    large: tuple[float, float]
    small_us: float
    large_us: float

    def text(self) -> str:
        t = self.table
        where = f"{t.op} {t.dtype} {t.mode}" + ("" if t.world_size == 1 else f" TP {t.world_size}")
        (r0, c0), (r1, c1) = self.small, self.large
        return (f"measured table {where} is non-monotone: {r0:g} x {c0:,.0f} = {self.small_us:.1f} us but the larger "
                f"{r1:g} x {c1:,.0f} = {self.large_us:.1f} us ({self.small_us / self.large_us:.1f}x faster with more "
                "work); prices interpolated next to it move with it")


def _quirks(table: KernelTable) -> list[TableQuirk]:
    t = np.asarray(table.median_us, dtype=float)
    out = []
    for i, r in enumerate(table.rows):
        for j in range(len(table.cols) - 1):
            if t[i, j + 1] < (1 - QUIRK_DROP) * t[i, j]:
                out.append(TableQuirk(table, (r, table.cols[j]), (r, table.cols[j + 1]), t[i, j], t[i, j + 1]))
    for j, c in enumerate(table.cols):
        for i in range(len(table.rows) - 1):
            if t[i + 1, j] < (1 - QUIRK_DROP) * t[i, j]:
                out.append(TableQuirk(table, (table.rows[i], c), (table.rows[i + 1], c), t[i, j], t[i + 1, j]))
    return out


def table_quirks(profile: Profile) -> list[TableQuirk]:
    """Every quirk of every measured table of `profile` (module doc)."""
    return [q for table in profile.kernel_tables for q in _quirks(table)]


def _bracket(axis: tuple[float, ...], x: np.ndarray) -> set[float]:
    """The nodes of `axis` an interpolation at each x inside it weighs (both ends of its interval, only the node
    itself when x is one; x outside: none - the roofline prices it)."""
    a = np.asarray(axis, dtype=float)
    x = np.asarray(x, dtype=float).reshape(-1)
    x = x[(x >= a[0]) & (x <= a[-1])]
    if len(a) == 1:
        return {float(a[0])} if len(x) else set()
    i = np.clip(np.searchsorted(a, x, side="right") - 1, 0, len(a) - 2)
    lo, hi = a[i], a[i + 1]
    return {float(v) for v in np.concatenate([lo[x < hi], hi[x > lo]])}


def _first(value) -> object:
    return np.asarray(value).reshape(-1)[0]


def scenario_quirks(profile: Profile, scenario) -> list[str]:
    """One sentence per quirk a kernel look-up of `scenario` interpolates from (module doc); [] for none."""
    dtype, tp, engine = str(_first(scenario.dtype)), int(_first(scenario.tp)), str(_first(scenario.engine))
    modes = {str(_first(scenario.mode))} if engine == "none" else {"graph", "eager"}
    rows = np.unique(np.asarray(scenario.rows, dtype=float))
    full = np.unique(np.concatenate([np.asarray(scenario.padded_draft_vocab, dtype=float).reshape(-1),
                                     np.asarray(scenario.draft_vocab, dtype=float).reshape(-1)]))
    shard = np.unique(np.asarray(scenario.shard, dtype=float))
    out = []
    for q in table_quirks(profile):
        t = q.table
        if t.world_size not in (1, tp) or t.mode not in modes:
            continue
        if t.op.removesuffix("_fused") not in DTYPE_FREE_OPS and t.dtype != dtype:
            continue
        cols = full if t.world_size == 1 and t.op in FULL_VOCAB_OPS else shard
        near_rows = _bracket(t.rows, rows)
        near_cols = _bracket(t.cols, cols) if len(t.cols) > 1 else set(t.cols)
        if any(r in near_rows and c in near_cols for r, c in (q.small, q.large)):
            out.append(q.text())
    return out
