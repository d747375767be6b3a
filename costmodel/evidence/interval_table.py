"""The 90% intervals of one strategy's saving at MANY batches from one pass over the ensemble.

`costmodel.evidence.intervals.propagate` prices every ensemble member (bootstrap replicate x per-op discrepancy
factors) over a log batch grid plus ONE batch, and its cost is almost all per member, not per batch (a
member priced at 1 or at 4,096 batches costs about the same). `interval_table` prices the same members,
with the same factors, over propagate's crossover grid plus a whole array of batches, so an interactive
batch edit afterwards is a table lookup. For every batch b of the array it returns exactly what
`propagate(scenario.with_(batch=b), ...)` returns for the strategy (the tests check equality):

    saving interval at b     = central `level` of {saving_m(b)} over members m (5th..95th percentile)
    decode-step interval     = the same of {saving_per_decode_step_m(b)}
    crossover interval       = the same of the members' first grid root (`crossover.grid_roots`)
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..io.errors import InputError
from ..model.components import BASELINE
from ..model.members import predict_members
from ..model.scenario import Scenario
from ..profiles.types import Profile
from .discrepancy import _cache_dir, bundled_pool_fingerprint
from .ensemble import ensemble
from .intervals import Interval, StrategyUncertainty, _interval, first_roots, saving_verdict


@dataclass(frozen=True)
class IntervalTable:
    """Per-batch saving intervals of one strategy and its (batch-independent) crossover interval."""

    strategy: str
    batches: np.ndarray          # ascending, unique
    members_saving_us: np.ndarray        # (members, batches): saving per draft call of each member
    members_decode_us: np.ndarray        # (members, batches): saving per decode step of each member
    crossover: Interval | None
    crossover_found_fraction: float
    level: float

    def at(self, batch: float) -> StrategyUncertainty | None:
        """What propagate gives at `batch` (None when `batch` is not in the table)."""
        i = int(np.searchsorted(self.batches, batch))
        if i >= self.batches.size or self.batches[i] != batch:
            return None
        saving = _interval(self.members_saving_us[:, i], self.level)
        verdict = saving_verdict(self.members_saving_us[:, i], saving)
        return StrategyUncertainty(self.strategy, saving, _interval(self.members_decode_us[:, i], self.level),
                                   self.crossover, self.crossover_found_fraction, verdict)


def interval_table(scenario: Scenario, profile: Profile, strategy: str, batches: np.ndarray, *,
                   level: float = 0.9, batch_range: tuple[float, float] = (1.0, 65536.0),
                   grid_points: int = 257) -> IntervalTable:
    """One pass over propagate's ensemble (its members and discrepancy factors) at `batches` and its grid."""
    if scenario.size != 1:
        raise InputError("interval_table needs a single scenario (its batch is replaced by `batches`)")
    reps, factors, _ = ensemble(profile, nodes=int(scenario.nodes))  # propagate's members and factors
    grid = np.geomspace(batch_range[0], batch_range[1], grid_points)
    batches = np.unique(np.asarray(batches, dtype=float))
    swept = scenario.item(0).with_(batch=np.concatenate([grid, batches]))
    priced = predict_members(swept, reps, (BASELINE, strategy), factors)  # row m = predict(swept, reps[m], ...)
    values = np.asarray(priced.saving_us(strategy), dtype=float)
    savings, decode = values[:, grid.size:], np.asarray(priced.saving_per_decode_step_us(strategy))[:, grid.size:]
    roots = first_roots(grid, values[:, :grid.size])
    cross = _interval(np.asarray(roots), level) if roots else None
    return IntervalTable(strategy, batches, np.asarray(savings), np.asarray(decode), cross,
                         len(roots) / len(reps), level)


CACHE_VERSION = 1  # bump when IntervalTable or the file layout changes


def _fingerprint() -> str | None:
    """The fingerprint (reference CSVs, bundled profiles, the package's code) of the inputs the process's residual
    pool was priced from (`discrepancy.bundled_pool_fingerprint`; None: an input changed meanwhile, no caching)."""
    return bundled_pool_fingerprint()


def table_cache_key(scenario: Scenario, profile_key: str, strategy: str, batches: np.ndarray, level: float,
                    batch_range: tuple[float, float], grid_points: int) -> str:
    """sha256 of everything an interval table depends on: the code / data fingerprint, the profile's text
    (`profile_key`), every field of the (single) scenario, the strategy, the batches and the grid."""
    h = hashlib.sha256(f"interval-table v{CACHE_VERSION}\0{_fingerprint()}\0".encode())
    h.update(profile_key.encode() + b"\0")
    one = scenario.item(0)
    for f in dataclasses.fields(one):
        value = getattr(one, f.name)
        cell = None if value is None else (np.asarray(value).dtype.str, np.asarray(value).tolist())
        h.update(f"{f.name}={cell!r}\0".encode())
    h.update(f"{strategy}\0{float(level)!r}\0{tuple(map(float, batch_range))!r}\0{int(grid_points)}\0".encode())
    h.update(np.ascontiguousarray(np.asarray(batches, dtype=float)).tobytes())
    return h.hexdigest()


def _read_table(path: Path, strategy: str, level: float) -> IntervalTable | None:
    try:
        with np.load(path, allow_pickle=False) as f:
            cross = f["crossover"]
            table = IntervalTable(strategy, f["batches"], f["members_saving_us"], f["members_decode_us"],
                                  Interval(float(cross[0]), float(cross[1]), float(cross[2])) if cross.size else None,
                                  float(f["crossover_found_fraction"]), level)
    except (OSError, ValueError, KeyError, EOFError, IndexError, zipfile.BadZipFile):
        return None
    shape = (table.members_saving_us.shape[0], table.batches.size)
    return table if table.members_saving_us.shape == shape == table.members_decode_us.shape else None


def _write_table(path: Path, table: IntervalTable) -> None:
    c = table.crossover
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
        np.savez(tmp, batches=table.batches, members_saving_us=table.members_saving_us,
                 members_decode_us=table.members_decode_us,
                 crossover=np.array([] if c is None else [c.low, c.high, c.level], dtype=float),
                 crossover_found_fraction=np.array(table.crossover_found_fraction, dtype=float))
        os.replace(tmp, path)
    except OSError:
        pass


def cached_interval_table(scenario: Scenario, profile: Profile, strategy: str, batches: np.ndarray, *,
                          profile_key: str, level: float = 0.9, batch_range: tuple[float, float] = (1.0, 65536.0),
                          grid_points: int = 257) -> IntervalTable:
    """`interval_table`, kept on disk next to the residual pool (COSTMODEL_CACHE_DIR, else ~/.cache/costmodel;
    `discrepancy.bundled_pool`) under `table_cache_key`: profile_key must identify the profile's content (the
    dashboard passes the profile's JSON text). A hit returns the stored arrays (float64, the same bits); a miss,
    an unreadable or an unwritable cache prices the ensemble as `interval_table` does."""
    if _fingerprint() is None:  # the pool was priced while an input changed: nothing to key a stored table by
        return interval_table(scenario, profile, strategy, batches, level=level, batch_range=batch_range,
                              grid_points=grid_points)
    key = table_cache_key(scenario, profile_key, strategy, batches, level, batch_range, grid_points)
    path = _cache_dir() / f"interval-table-{key[:40]}.npz"
    table = _read_table(path, strategy, level)
    if table is None:
        table = interval_table(scenario, profile, strategy, batches, level=level, batch_range=batch_range,
                               grid_points=grid_points)
        _write_table(path, table)
    return table
