"""Import a folder of published collective tables - nccl-tests / rccl-tests logs and markdown summary tables - into
one reference CSV with provenance (data/reference/).

    python -m calibration.logs.import_published --manifest data/reference/published-collectives-2026/MANIFEST.csv \
        --out data/reference/published-collectives-2026.csv

The manifest has one row per table (a file may hold several):

* `format` "nccl-tests": the log is read by calibration.logs.import_nccl_tests (rccl-tests' output included) with
  the manifest's hints (op, world_size, nodes, gpu); optional `lines` "A-B" keeps only lines A..B of the file
  (one run of a file that prints several, e.g. 1 / 2 / 4 / 8 node sections) - the other lines are blanked, so the
  line numbers in `source` are the file's own.
* `format` "markdown": the `md_table`-th pipe table of the file (1-based, counted over the whole file) is read by
  `parse_markdown_tables`; `size_col` names the column of message sizes ("4M", "128K", "1 MB", "8B": binary
  units, as data/reference/README.md takes "1 MB" = 2^20 B), `value_col` the column priced and `value_kind`
  what it holds: "busbw_gbps" (nccl-tests bus bandwidth; validate turns it into a time with t = S f(p) / busbw)
  or "time_us". `size` is the nccl-tests `size` of the row (all_gather: the whole gathered buffer, so
  bytes_per_rank = size / world_size); a table of repeats of one size (no size column) gives it in `size`
  instead of `size_col`. Rows whose size cell is listed in `skip` (`;`-separated, e.g. "**Avg**")
  are left out; any other cell that is not a size or a number is refused naming its line and column.
* `format` "none": a file that holds no table either importer reads (a figure, prose, a table of another
  shape): `import_table` refuses it with its `status` as the reason; `import_manifest` lists it and moves on.

Every table must parse; those with `status` "priced" become rows (REFERENCE_COLUMNS + busbw_gbps), with
`used_in_profile` true for the sizes (bytes per rank) listed in `in_sample_bytes`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from calibration.logs.import_nccl_tests import (
    FLOOR_BELOW_BYTES_PER_RANK,
    PROGRAMS,
    REFERENCE_COLUMNS,
    Hints,
    cli_error,
    parse_nccl_tests_text,
    read_log,
    read_manifest_table,
)
from costmodel.io.errors import InputError, OneLineParser
from costmodel.io.outputs import check_output
from costmodel.io.safe_io import write_csv

FORMATS = ("nccl-tests", "markdown", "none")
VALUE_KINDS = ("busbw_gbps", "time_us")
MANIFEST_COLUMNS = ("file", "table", "format", "profile", "nccl_algo", "launch", "software", "source", "status")
OUT_COLUMNS = REFERENCE_COLUMNS + ("busbw_gbps",)
MAX_TABLES = 1_000  # pipe tables per file
MAX_CELLS = 64  # cells per table row
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*([KMGT]?)(i?B)?$", re.IGNORECASE)
_UNIT = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_VALUE = re.compile(r"^~?(\d+(?:\.\d+)?)\s*(GB/s|µs|us|μs)?$")
_SEPARATOR = re.compile(r"^:?-{1,}:?$")


@dataclass(frozen=True)
class MarkdownTable:
    """One pipe table: the line of its header, the header cells and (line, cells) per body row."""

    line: int
    header: tuple[str, ...]
    rows: tuple[tuple[int, tuple[str, ...]], ...]


def _cells(line: str) -> list[str]:
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [c.strip() for c in body.split("|")]


def parse_markdown_tables(text: str, source: str = "markdown") -> list[MarkdownTable]:
    """Every pipe table of `text` (a header row, a `|---|` separator row of as many cells, body rows).

    A body row with another cell count than its header is refused (one line naming it); a table ends at the first
    line that does not start with '|'."""
    tables: list[MarkdownTable] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if line.startswith("|") and nxt.startswith("|"):
            header, sep = _cells(line), _cells(nxt)
            if all(_SEPARATOR.match(c) for c in sep):
                if len(sep) != len(header):
                    raise InputError(f"{source}:{i + 2}: separator row has {len(sep)} cells, the header {len(header)}")
                if len(header) > MAX_CELLS:
                    raise InputError(f"{source}:{i + 1}: {len(header)} columns (at most {MAX_CELLS})")
                rows = []
                j = i + 2
                while j < len(lines) and lines[j].strip().startswith("|"):
                    cells = _cells(lines[j])
                    if len(cells) != len(header):
                        raise InputError(f"{source}:{j + 1}: row has {len(cells)} cells, its table's header "
                                         f"(line {i + 1}) {len(header)}")
                    rows.append((j + 1, tuple(cells)))
                    j += 1
                tables.append(MarkdownTable(i + 1, tuple(header), tuple(rows)))
                if len(tables) > MAX_TABLES:
                    raise InputError(f"{source}: more than {MAX_TABLES} tables")
                i = j
                continue
        i += 1
    return tables


def _plain(cell: str) -> str:
    """A cell without markdown emphasis (** / *_ around it) and surrounding space."""
    return cell.strip().strip("*_").strip()


def parse_size_bytes(cell: str, where: str) -> int:
    """'4M' / '128K' / '1 MB' / '1024 MB' / '8B' / '1G' -> bytes (binary units); InputError otherwise."""
    match = _SIZE.match(_plain(cell))
    if not match or (not match.group(2) and not match.group(3)):
        raise InputError(f"{where}: {cell!r} is not a message size (e.g. 8B, 4K, 16M, 1 MB)")
    value = float(match.group(1)) * _UNIT[match.group(2).upper()]
    if value != int(value) or not 1 <= value <= 2**44:
        raise InputError(f"{where}: size {cell!r} is not a whole number of bytes in 1 B..16 TiB")
    return int(value)


def parse_value(cell: str, kind: str, where: str) -> float:
    """A busbw (GB/s) or time (us) cell -> float; the unit, when printed, must match `kind`."""
    match = _VALUE.match(_plain(cell))
    if not match:
        raise InputError(f"{where}: {cell!r} is not a number")
    unit = match.group(2) or ""
    if unit and (unit == "GB/s") != (kind == "busbw_gbps"):
        raise InputError(f"{where}: {cell!r} is in {unit}, but the column is read as {kind}")
    value = float(match.group(1))
    if not 0 < value < 1e9:
        raise InputError(f"{where}: {cell!r} must be > 0")
    return value


def _column(table: MarkdownTable, name: str, source: str) -> int:
    names = [_plain(h) for h in table.header]
    if name not in names:
        raise InputError(f"{source}:{table.line}: no column {name!r} (columns: {', '.join(names)})")
    return names.index(name)


def _number(entry: pd.Series, name: str, where: str) -> int | None:
    text = str(entry.get(name, "") or "").strip()
    if not text:
        return None
    if not text.isdigit() or not 1 <= int(text) <= 2**20:
        raise InputError(f"{where}: {name} {text!r} is not an integer in 1..{2**20}")
    return int(text)


def _markdown_rows(entry: pd.Series, text: str, where: str) -> pd.DataFrame:
    """bytes_per_rank and the priced value of one markdown table named by the manifest entry."""
    source = str(entry["file"])
    index = _number(entry, "md_table", where)
    tables = parse_markdown_tables(text, source)
    if index is None or index > len(tables):
        raise InputError(f"{where}: md_table {entry.get('md_table', '')!r}: the file has {len(tables)} pipe table(s)")
    table = tables[index - 1]
    kind = str(entry.get("value_kind", "")).strip()
    if kind not in VALUE_KINDS:
        raise InputError(f"{where}: value_kind {kind!r} is not one of {', '.join(VALUE_KINDS)}")
    op, p = str(entry.get("op", "")).strip(), _number(entry, "world_size", where)
    if op not in PROGRAMS or p is None:
        raise InputError(f"{where}: a markdown table needs op (one of {', '.join(PROGRAMS)}) and world_size")
    fixed = str(entry.get("size", "") or "").strip()  # one size for every row (repeats of one run)
    size_at = None if fixed else _column(table, str(entry.get("size_col", "")), source)
    value_at = _column(table, str(entry.get("value_col", "")), source)
    skip = {s.strip() for s in str(entry.get("skip", "") or "").split(";") if s.strip()}
    out = []
    for line, cells in table.rows:
        if size_at is None:
            size = parse_size_bytes(fixed, f"{where}: size")
        elif cells[size_at] in skip or _plain(cells[size_at]) in skip:
            continue
        else:
            size = parse_size_bytes(cells[size_at], f"{source}:{line} column {table.header[size_at]!r}")
        value = parse_value(cells[value_at], kind, f"{source}:{line} column {table.header[value_at]!r}")
        if op in ("all_gather", "gather", "reduce_scatter"):
            if size % p:
                raise InputError(f"{source}:{line}: size {size} B is not divisible by the {p} ranks")
            size //= p
        out.append({"bytes_per_rank": size, "median_us": value if kind == "time_us" else np.nan,
                    "busbw_gbps": value if kind == "busbw_gbps" else np.nan, "line": line})
    if not out:
        raise InputError(f"{where}: the table at line {table.line} has no row to import")
    nodes = _number(entry, "nodes", where) or 1
    return pd.DataFrame(out).assign(op=op, world_size=p, nodes=nodes, gpu=str(entry.get("gpu", "") or "unknown"),
                                    dtype="fp32", mode="eager", iters=0, launch=str(entry["launch"]))


def _lines_only(text: str, spec: str, where: str) -> str:
    """`text` with every line outside `spec` ("A-B", 1-based, inclusive) blanked (line numbers kept)."""
    match = re.fullmatch(r"(\d{1,7})-(\d{1,7})", spec.strip())
    if not match or not 1 <= int(match.group(1)) <= int(match.group(2)):
        raise InputError(f"{where}: lines {spec!r} is not a range A-B with 1 <= A <= B")
    lo, hi = int(match.group(1)), int(match.group(2))
    lines = text.splitlines()
    if hi > len(lines):
        raise InputError(f"{where}: lines {spec!r} ends past the file's {len(lines)} lines")
    return "\n".join(line if lo <= n <= hi else "" for n, line in enumerate(lines, start=1))


def import_table(entry: pd.Series, folder: Path) -> pd.DataFrame:
    """Rows (OUT_COLUMNS) of one manifest entry (module doc); InputError for a file that is not a table."""
    where = f"table {entry['table']}"
    fmt = str(entry["format"]).strip()
    if fmt not in FORMATS:
        raise InputError(f"{where}: format {fmt!r} is not one of {', '.join(FORMATS)}")
    if fmt == "none":
        raise InputError(f"{entry['file']}: not a table this importer reads: {entry['status']}")
    text = read_log(folder / str(entry["file"]))
    if fmt == "nccl-tests":
        if str(entry.get("lines", "") or "").strip():
            text = _lines_only(text, str(entry["lines"]), where)
        hints = Hints(op=str(entry.get("op", "") or "").strip() or None, world_size=_number(entry, "world_size", where),
                      nodes=_number(entry, "nodes", where), gpu=str(entry.get("gpu", "") or "").strip() or None)
        rows = parse_nccl_tests_text(text, source=str(entry["file"]), hints=hints, validation_ops=True)
        rows = rows.assign(line=rows["source"].str.rsplit(":", n=1).str[-1], busbw_gbps=np.nan)
        small = rows["bytes_per_rank"] < FLOOR_BELOW_BYTES_PER_RANK
        floor = round(float(rows.loc[small, "median_us"].median()), 3) if small.any() else np.nan
        method = f"nccl-tests out-of-place time (mean over iters, no Python launch); {entry['launch']}"
    else:
        rows = _markdown_rows(entry, text, where)
        floor = np.nan
        method = (f"published summary table, column {entry['value_col']!r} ({entry['value_kind']}); "
                  f"{entry['launch']}")
    used = {int(x) for x in str(entry.get("in_sample_bytes", "") or "").split(";") if x.strip()}
    rows = rows.assign(
        id=[f"{entry['table']}-{i}" for i in range(len(rows))], table=entry["table"], profile=entry["profile"],
        backend="nccl", device="cuda", host_floor_us=floor, label="published",
        nccl_algo=entry["nccl_algo"] or "default",
        used_in_profile=rows["bytes_per_rank"].isin(used), software=entry["software"], method=method,
        source=entry["source"] + ", " + str(entry["file"]) + " line " + rows["line"].astype(str))
    return rows[list(OUT_COLUMNS)]


def read_manifest(manifest: Path) -> pd.DataFrame:
    return read_manifest_table(manifest, MANIFEST_COLUMNS)


def import_manifest(manifest: str | Path) -> pd.DataFrame:
    """Rows of every "priced" table of `manifest`; every other table must parse too (format "none": listed only)."""
    manifest = Path(manifest)
    frames = []
    for _, entry in read_manifest(manifest).iterrows():
        if str(entry["format"]).strip() == "none":
            continue
        priced = entry["status"] == "priced"
        if priced and not entry["profile"]:
            raise InputError(f"{manifest}: table {entry['table']} is priced but names no profile")
        rows = import_table(entry, manifest.parent)
        if priced:
            frames.append(rows)
    if not frames:
        raise InputError(f"{manifest}: no table has status 'priced'")
    return pd.concat(frames, ignore_index=True)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: 0 ok, 2 bad input (one line on stderr), 130 interrupted (`cli_error`)."""
    parser = OneLineParser(prog="python -m calibration.logs.import_published",
                           description="Convert a folder of published collective tables into reference rows.")
    parser.add_argument("--manifest", required=True, type=Path, help="the folder's MANIFEST.csv (module doc)")
    parser.add_argument("--out", required=True, type=Path, help="CSV to write (replaced atomically)")
    out: Path | None = None  # known once the flags are parsed (cli_error names it)
    try:
        args = parser.parse_args(argv)
        out = args.out
        check_output(args.out, [args.manifest], what="--out")
        frame = import_manifest(args.manifest)
        write_csv(frame, args.out, inputs=[args.manifest])
    except (InputError, OSError, KeyboardInterrupt) as exc:
        return cli_error(exc, out)
    print(f"wrote {len(frame)} rows of {frame['table'].nunique()} tables to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
