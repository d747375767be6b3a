"""The measurement schema shared by every calibration tool and `predict-points`.

One row per measured point. Collective rows fill `bytes_per_rank`; kernel rows
fill `rows` and `cols`. What `cols` means for each kernel op is in
`KERNEL_OPS` (and the README). Times are microseconds per call.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .errors import InputError, first_line

MEASUREMENT_COLUMNS: tuple[str, ...] = (
    "op",
    "backend",
    "device",
    "gpu",
    "dtype",
    "mode",
    "world_size",
    "nodes",
    "bytes_per_rank",
    "rows",
    "cols",
    "iters",
    "median_us",
    "p10_us",
    "p90_us",
    "min_us",
    "max_us",
)

COLLECTIVE_OPS: tuple[str, ...] = ("all_gather", "all_reduce", "gather", "broadcast")

# op -> what `cols` is (rows is always the number of sampled rows B).
KERNEL_OPS: dict[str, str] = {
    "local_argmax": "vocab shard s: mask padding, max over [rows, s], pack (fp32 value, fp32 global id)",
    "relayout_copy": "vocab shard s: copy the gathered [p*rows, s] into [rows, p*s] (world_size = p)",
    "argmax": "argmaxed width (V, or V_target after a d2t scatter): torch.argmax over [rows, cols]",
    "relayout_argmax": "vocab shard s: relayout_copy followed by argmax over [rows, p*s] (world_size = p)",
    "chunked_argmax": "vocab shard s: argmax of each rank chunk of the gathered [p*rows, s] buffer + reduce over p",
    "pair_reduce": "unused (0): reduce p gathered (value, id) pairs per row (world_size = p)",
    "key_pack": "vocab shard s: mask padding, max over [rows, s], build one 64-bit order key per row",
    "key_unpack": "unused (0): decode the reduced 64-bit key into an int64 id",
    "d2t_scatter": "target vocab V_target: fill [rows, V_target] with -inf and scatter [rows, 32000] draft logits",
    "d2t_lookup": "unused (0): target = draft + d2t[draft] for rows ids",
}

# Fused Triton variants of the local path (calibration/triton_kernels.py); `cols` as for the base op.
FUSED_KERNEL_OPS: dict[str, str] = {
    f"{op}_fused": f"fused Triton variant of {op}; cols as for {op}"
    for op in ("local_argmax", "key_pack", "pair_reduce", "key_unpack")
}

ALL_OPS: tuple[str, ...] = COLLECTIVE_OPS + tuple(KERNEL_OPS) + tuple(FUSED_KERNEL_OPS)
# bytes per element of every dtype a measurement row may carry: logits, ids / keys (int64) and raw bytes
ELEM_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp32": 4, "int64": 8, "uint8": 1, "int8": 1}
DTYPES: dict[str, int] = {k: ELEM_BYTES[k] for k in ("bf16", "fp16", "fp32")}  # the logits dtypes
D2T_DRAFT_COLS = 32000  # the kernel benchmark's d2t_scatter draft width: [rows, 32000] logits (KERNEL_OPS)
MODES: tuple[str, ...] = ("graph", "eager")

_INT_COLUMNS = ("world_size", "nodes", "bytes_per_rank", "rows", "cols", "iters")
_TIME_COLUMNS = ("median_us", "p10_us", "p90_us", "min_us", "max_us")
_REQUIRED = ("op", "mode", "world_size", "median_us")


def read_measurements(path: str | Path, *, require_times: bool = True) -> pd.DataFrame:
    """Read and validate a measurement CSV; raise `InputError` naming the problem.

    Missing optional columns are filled with defaults (nodes=1, bytes_per_rank=0,
    rows=0, cols=0, dtype="fp32", backend/device/gpu="unknown"). With
    `require_times=False` (predict-points input) the time columns may be absent.
    """
    path = Path(path)
    try:
        frame = pd.read_csv(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a readable CSV ({first_line(exc)})") from None
    return validate_measurements(frame, source=str(path), require_times=require_times)


def validate_measurements(
    frame: pd.DataFrame, *, source: str = "measurements", require_times: bool = True
) -> pd.DataFrame:
    """Validate an in-memory measurement table (see `read_measurements`)."""
    required = _REQUIRED if require_times else _REQUIRED[:-1]
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise InputError(f"{source}: missing column(s) {', '.join(missing)}")
    frame = frame.copy()
    defaults = {"backend": "unknown", "device": "unknown", "gpu": "unknown", "dtype": "fp32",
                "nodes": 1, "bytes_per_rank": 0, "rows": 0, "cols": 0, "iters": 0}
    for column, value in defaults.items():
        if column not in frame.columns:
            frame[column] = value
    frame["op"] = frame["op"].astype(str).str.strip()
    bad_ops = sorted(set(frame["op"]) - set(ALL_OPS))
    if bad_ops:
        raise InputError(f"{source}: unknown op {bad_ops[0]!r} (known: {', '.join(ALL_OPS)})")
    frame["mode"] = frame["mode"].astype(str).str.strip()
    bad_modes = sorted(set(frame["mode"]) - set(MODES))
    if bad_modes:
        raise InputError(f"{source}: column mode has {bad_modes[0]!r}; expected graph or eager")
    frame["dtype"] = frame["dtype"].fillna("fp32").astype(str).str.strip()
    bad_dtypes = sorted(set(frame["dtype"]) - set(ELEM_BYTES))
    if bad_dtypes:
        raise InputError(f"{source}: column dtype has {bad_dtypes[0]!r}; expected one of {', '.join(ELEM_BYTES)}")
    for column in _INT_COLUMNS:
        values = pd.to_numeric(frame[column], errors="coerce")
        if values.isna().any() or (values < 0).any() or (values != np.floor(values)).any():
            row = int(np.flatnonzero(values.isna() | (values < 0) | (values != np.floor(values)))[0])
            raise InputError(f"{source}: column {column} row {row + 2} is not a non-negative integer")
        frame[column] = values.astype(np.int64)
    if (frame["world_size"] < 1).any():
        raise InputError(f"{source}: column world_size must be >= 1")
    is_coll = frame["op"].isin(COLLECTIVE_OPS)
    if (is_coll & (frame["bytes_per_rank"] <= 0)).any():
        raise InputError(f"{source}: column bytes_per_rank must be > 0 for collective ops")
    if (~is_coll & (frame["rows"] <= 0)).any():
        raise InputError(f"{source}: column rows must be > 0 for kernel ops")
    for column in _TIME_COLUMNS:
        if column not in frame.columns:
            if column == "median_us" and require_times:
                raise InputError(f"{source}: missing column median_us")
            continue
        values = pd.to_numeric(frame[column], errors="coerce")
        if require_times and column == "median_us":
            bad = values.isna() | ~np.isfinite(values) | (values <= 0)
            if bad.any():
                row = int(np.flatnonzero(bad.to_numpy())[0])
                raise InputError(
                    f"{source}: column median_us row {row + 2} is {frame[column].iloc[row]!r}; "
                    "times must be finite and > 0"
                )
        frame[column] = values
    return frame
