"""Reference measurements: the bundled published tables and this project's measured rows (data/reference/).

`load_reference` reads and checks them (the measurement schema plus `source`, `profile` and `used_in_profile`
columns); `reference_set` names the set each row belongs to (a table file, or the published single figures), the
unit `costmodel.evidence.validate` and `costmodel.evidence.coverage` report per.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd

from ..io.errors import InputError, first_line
from ..io.measurements import MAX_MEASUREMENT_BYTES, _bad_row, check_csv_header, validate_measurements
from ..io.safe_io import read_bytes
from ..model.collectives import bus_factor, total_bytes
from ..profiles.paths import REFERENCE_DIR

_NEEDED = ("op", "mode", "world_size", "gpu", "source")


def reference_files(directory: str | Path = REFERENCE_DIR) -> list[Path]:
    return sorted(Path(directory).glob("*.csv"))


def load_reference(paths: list[str | Path]) -> pd.DataFrame:
    """Concatenate reference CSVs; convert busbw figures to times (t = S * f(p) / busbw)."""
    frames = []
    for path in paths:
        path = Path(path)
        data = read_bytes(path, limit_bytes=MAX_MEASUREMENT_BYTES, what="reference")  # stat first, bounded
        check_csv_header(data, str(path))  # column count and header length before pandas sees a field
        try:
            frame = pd.read_csv(io.BytesIO(data), index_col=False)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
            raise InputError(f"{path}: cannot read reference CSV ({first_line(exc)})") from None
        missing = [c for c in _NEEDED if c not in frame.columns]
        if missing:
            raise InputError(f"{path}: missing column(s) {', '.join(missing)}")
        # integer columns checked before the busbw conversion uses them (a text world_size is one error line)
        frame = validate_measurements(frame, source=str(path), require_times=False)
        if "median_us" not in frame.columns:
            frame["median_us"] = np.nan
        if "busbw_gbps" in frame.columns:
            bw = pd.to_numeric(frame["busbw_gbps"], errors="coerce")
            need = frame["median_us"].isna() & bw.notna()
            for op in frame.loc[need, "op"].unique():
                m = need & (frame["op"] == op)
                p = frame.loc[m, "world_size"].to_numpy(float)
                size = total_bytes(op, frame.loc[m, "bytes_per_rank"].to_numpy(float), p)
                frame.loc[m, "median_us"] = size * bus_factor(op, p) / bw[m].to_numpy() * 1e-3
        frame["file"] = path.name
        frame = _flag_columns(frame, str(path))
        frames.append(validate_measurements(frame, source=str(path)))
    if not frames:
        raise InputError("validate: no reference CSV files found")
    out = pd.concat(frames, ignore_index=True)
    if "used_in_profile" not in out.columns:
        out["used_in_profile"] = False
    out["used_in_profile"] = out["used_in_profile"].eq(True)  # bools (`_flag_columns`); a file without: false
    if "profile" not in out.columns:
        out["profile"] = ""
    return out


TRUE_WORDS, FALSE_WORDS = ("true", "1", "yes"), ("false", "0", "no", "")
# nccl_algo: "default" (NCCL chose) or an algorithm the run forced, priced without the regimes it rules out
# (costmodel.evidence.validate FORCED_DROPS has one entry per forced name; a test keeps the two in step)
NCCL_ALGOS = ("default", "ring", "no-nvls")


def _text_cells(frame: pd.DataFrame, column: str) -> pd.Series:
    """A column's cells as stripped text ('' for an empty cell; 1.0 read by pandas as a float is '1')."""
    values = frame[column]
    text = values.astype(object).where(values.notna(), "").astype(str).str.strip()
    return text.str.replace(r"^(\d+)\.0$", r"\1", regex=True)


def _flag_columns(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    """`used_in_profile` as bool (true / false, 1 / 0, yes / no in any case; empty = false) and `nccl_algo` one of
    NCCL_ALGOS or empty; any other value is refused naming its row (it was read as false / the default)."""
    if "used_in_profile" in frame.columns:
        text = _text_cells(frame, "used_in_profile").str.lower()
        bad = ~text.isin(TRUE_WORDS + FALSE_WORDS)
        if bad.any():
            raise _bad_row(source, "used_in_profile", frame, bad.to_numpy(),
                           "expected true or false (or 1 / 0, yes / no; empty = false)")
        frame = frame.assign(used_in_profile=text.isin(TRUE_WORDS))
    if "nccl_algo" in frame.columns:
        text = _text_cells(frame, "nccl_algo")
        bad = ~text.isin(("", *NCCL_ALGOS))
        if bad.any():
            raise _bad_row(source, "nccl_algo", frame, bad.to_numpy(),
                           f"expected one of {', '.join(NCCL_ALGOS)} (or empty)")
        frame = frame.assign(nccl_algo=text.where(text != "", np.nan))
    return frame


def reference_set(table: pd.DataFrame) -> pd.Series:
    """The reference set of every row: its `table` where given (one nccl-tests table), else its file."""
    if "table" not in table.columns:
        return table["file"].astype(str)
    named = table["table"].notna() & (table["table"].astype(str) != "")
    return table["table"].astype(str).where(named, table["file"].astype(str))
