"""Import nccl-tests logs (all_gather_perf, all_reduce_perf, gather_perf, broadcast_perf; reduce_scatter_perf and
alltoall_perf for validation only - no strategy uses them) as measurement rows.

    python -m calibration.import_nccl_tests LOG... --out CSV

How a log is read (nccl-tests src/common.cu prints it this way):

* Every line first loses the prefixes a launcher puts on it (`split_prefix`, up
  to MAX_PREFIXES stacked): Open MPI `mpirun --tag-output` `[1,0]<stdout>:` /
  `[1,0]<stderr>:` (AWS's EKS EFA guide prints nccl-tests this way), torchrun
  `[rank0]:` / `[default0]:`, Slurm `srun --label` `0: ` / ` 0: ` / `12: `,
  kubectl `--prefix` `[pod/NAME/CONTAINER]` and Ray / SkyPilot
  `(head, rank=0, pid=3808)`. Each prefixed rank is read as its own stream
  (the job id and stdout / stderr aside: one rank over several mpirun jobs is
  one stream), so other ranks' interleaved NCCL INFO / stderr lines do not
  split a run. nccl-tests prints its header, Rank lines and table from rank 0
  alone (PRINT is main-process only; the other ranks' Rank lines are gathered
  to it), so the rows of the stream that prints a result row first are kept;
  another stream's table is dropped when it is the same rows (duplicated
  output: no row counts twice) and refused naming both prefixes when it
  differs (separate runs, e.g. an nccl-tests built without MPI=1 under
  mpirun / srun, where every process runs alone). A command line echoed in any
  stream names the program for all. A UTF-8 byte-order mark, CRLF / CR line
  ends (mixed too) and trailing blanks are ignored.
* `# Collective test starting: all_gather_perf` names the program (newer
  versions). Older logs: the program name in an echoed command line
  (`./build/all_gather_perf -b 8 ...`), else in the file name. The column set
  cannot tell gather from broadcast (both print redop "none" and a root), so
  the name is required.
* `# nThread 1 nGpus 8 minBytes ... warmup iters: 5 iters: 20 agg iters: 1
  validation: 1 graph: 1` gives iters and CUDA-graph mode (`-G N`, N > 0 ->
  mode "graph"; N = 0 or absent -> "eager").
* One `#  Rank  r Group g Pid ... on HOST device d [bus] GPU NAME` line per
  rank gives world_size (ranks per group), gpu and nodes (distinct HOSTs).
  rccl-tests (AMD's fork, same table) may print no GPU NAME: then `Hints.gpu`
  names it, else "unknown"; older nccl-tests print `#   Rank r Pid ...` (no Group).
  Without Rank lines: world_size = nThread * nGpus when that is > 1 (one process
  drives them); nThread 1 nGpus 1 without Rank lines (an mpirun table) or Rank
  lines that skip ranks are refused unless `Hints` (--world-size, --nodes) say
  how many; hints must agree with what the log says (--nodes may group hosts into
  NVLink domains: a GB200 NVL72 rack is one node).
* `launch`: single-process (nGpus > 1), multi-thread (nThread > 1) or
  process-per-gpu - its own launch mode, the small-message floors differ.
* Result rows: `size count type redop root | time algbw busbw #wrong |
  time algbw busbw #wrong`; the out-of-place `time` (us) is used, located from
  the header's first `time` column counted from the row's end, so every layout
  with a header reads: the out-of-place block alone (rccl-tests -O 1, or
  trimmed), no `#wrong` columns, no `root` column and `error` columns (older
  nccl-tests: `size count type redop time algbw busbw error ...`), and
  rccl-tests' `-M 1` columns `algo proto nchannels` after the in-place block
  (ROCm/rccl-tests src/common.cpp @ 233482bd, run() and TimeTest()). A table
  whose block line names `in-place` alone (rccl-tests -O 0) is refused: its
  one time is the in-place one. Every nccl-tests type (TYPE_NAMES; `-d all`
  prints one sweep per type, kept apart by `dtype`). Header lines may lack
  their '#' and sit inside markdown / YAML / shell text. Inside one run each
  (type, redop, root) sweep grows in size; a size that does not is two runs
  interleaved: refused naming both lines.
* A failed validation is refused: a nonzero `#wrong` / `wrong` (nccl-tests
  prints %d, rccl-tests %g as in `1e+06`; `N/A` is a run without validation,
  -c 0), a value starred past its threshold (`1e+00*`: the HIP-era
  rccl-tests print their `error` column with a star) and
  `# Out of bounds values : N FAILED`. An unstarred `error` (older nccl-tests:
  the largest deviation, %5.0le) is kept - `2e-07` is float rounding.
* rccl-tests' own lines are skipped: `rccl-tests: Version ...`, RCCL's banner
  (`RCCL version : ...`, `HIP version  :`, `ROCm version :`, `Hostname     :`,
  `Librccl path :`); its Rank lines may lack `Group` and the GPU name.

`size` is max(send bytes, receive bytes) of one rank. all_gather and gather
(gather.cu: sendcount = count / nranks, recvcount = sendcount * nranks, and
the same print) therefore print the whole gathered buffer, so
    bytes_per_rank = size / nranks          (all_gather, gather, reduce_scatter: the per-rank output)
    bytes_per_rank = size                   (all_reduce, broadcast, alltoall: what one rank sends)
and `count` is per-rank elements for all_gather / gather.

nccl-tests reports the MEAN over `iters * agg iters` back-to-back calls (times
the graph launches with -G), averaged over ranks by default (-a 1), not a
per-call median: median_us = p10_us = p90_us = min_us = max_us = that mean,
iters = the number of calls averaged, label = "nccl-tests mean" (all_reduce
with another reduction than sum, e.g. `-o max`: "nccl-tests mean (redop max)"),
and `source` = "FILE:LINE" of the row.

No torch import here: the dashboard parses uploaded logs with
`parse_nccl_tests_text`.

Reference tables (`--manifest`): a CSV with one row per published log
(file, table, profile, nccl_algo, launch, software, source, status) turns every
log whose status is "priced" into validation rows for data/reference/ - the
measurement columns plus id, table, profile (the bundled profile that should
predict it), nccl_algo ("ring" when the run forced NCCL_ALGO=RING / NVLS off:
validate prices it without NVLS), software, method, source (the manifest's
source and the log line), used_in_profile (false: no derived profile was
built from these tables) and host_floor_us: the median time of the table's rows
below FLOOR_BELOW_BYTES_PER_RANK (64 KiB per rank) - nccl-tests launches back to
back, so an iteration costs max(host launch, device time), and costmodel.evidence.validate
prices these rows that way (the scored rows start at 64 KiB per rank).
"""

from __future__ import annotations

import io
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from costmodel.io.errors import InputError, OneLineParser
from costmodel.io.measurements import (
    ELEM_BYTES,
    MEASUREMENT_COLUMNS,
    VALIDATION_ONLY_OPS,
    check_csv_header,
    validate_measurements,
)
from costmodel.io.outputs import check_output
from costmodel.io.safe_io import read_bytes, write_csv

PROGRAMS: dict[str, str] = {"all_gather": "all_gather", "all_reduce": "all_reduce", "gather": "gather",
                            "broadcast": "broadcast", "reduce_scatter": "reduce_scatter", "alltoall": "alltoall"}
OTHER_PROGRAMS = ("alltoallv", "reduce", "scatter", "sendrecv", "hypercube")
# every nccl-tests type name (src/common.cu test_typenames, and the older aliases) -> schema dtype
TYPE_NAMES: dict[str, str] = {"float": "fp32", "float32": "fp32", "half": "fp16", "float16": "fp16",
                              "bfloat16": "bf16", "int8": "int8", "char": "int8", "uint8": "uint8",
                              "int32": "int32", "int": "int32", "uint32": "uint32", "int64": "int64",
                              "uint64": "uint64", "double": "fp64", "float64": "fp64", "f8e4m3": "fp8_e4m3",
                              "fp8_e4m3": "fp8_e4m3", "f8e5m2": "fp8_e5m2", "fp8_e5m2": "fp8_e5m2"}
LABEL = "nccl-tests mean"
# launch: how the ranks were driven - its small-message floor differs (~35 us for one process driving 8 GPUs vs
# ~17 us with one process per GPU on 8x H100), so it is recorded per row
LAUNCH_MODES = ("single-process", "multi-thread", "process-per-gpu", "unknown")
OUTPUT_COLUMNS: tuple[str, ...] = MEASUREMENT_COLUMNS + ("label", "source", "launch")

_MARKER = re.compile(r"^#?\s*Collective test starting:\s*(\S+)")
_PARAMS = re.compile(r"^#?\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\b(.*)$")
# rccl-tests (ROCm/rccl-tests, the nccl-tests fork) prints the same table; its Rank lines may end after the bus id
# (no GPU name) and it adds "rccl-tests: Version ..." / "RCCL version : ..." lines, which are skipped
_RANK = re.compile(r"^#?\s*Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+(?:on\s+(\S+)\s+)?device\s+\d+\s+"
                   r"\[[^\]]*\](?:\s+(.+?))?\s*$")
NO_GPU_NAME = "(not printed)"  # a Rank line without a GPU name (rccl-tests): the name comes from --gpu, else unknown
_PROGRAM = re.compile(r"(?<![A-Za-z0-9])(all_gather|all_reduce|gather|broadcast|reduce_scatter|alltoallv?|reduce|"
                      r"scatter|sendrecv|hypercube)_perf(?:_mpi)?(?![A-Za-z0-9])")
_FLAG = re.compile(r"(?:^|\s)(-[tg]|--nthreads|--ngpus)[ =](\d+)")
_INT = re.compile(r"^\d+$")
_NUMBER = re.compile(r"^-?\d+(\.\d*)?([eE][-+]?\d+)?$")
MAX_DIGITS = 18  # every integer of a log (sizes, counts, ranks, iterations) fits in int64 with 18 digits
# bounded work (issue 22): counted while the log is scanned, refused before more rows are kept. A full `-d all
# -o all` sweep is ~2,400 result rows and a 1,024-GPU run prints 1,024 Rank lines.
MAX_LOG_ROWS = 100_000  # result rows per log
MAX_RANK_LINES = 65_536  # '#  Rank' lines per log
_LINE_BREAK = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")  # str.splitlines' breaks
# Layouts and validation columns as the sources print them (read in the code corpus, not copied):
# NVIDIA/nccl-tests src/common.cu - older versions: a print_header() per test (src/*.cu) with `error` columns
#   (some without `root`, as the 2019 HIP fork's all_reduce), BenchTime's "%5.0le" of maxDelta; current: "#wrong"
#   (%d), "N/A" with -c 0, Rank lines gathered to rank 0 and every line of the table printed by PRINT (the main
#   process only);
# ROCm/rccl-tests src/common.cu @ c0eac93 - "rccl-tests: Version %s", "#   Rank %2d Pid ..." without Group,
#   "#wrong" as "%5g", -O choosing the blocks; the HIP-era common.cu prints "%5.0le%s" with "*" past the threshold;
# ROCm/rccl-tests src/common.cpp @ 233482bd - "-O 1" out-of-place block alone, "-O 0" in-place alone, "-M 1" adds
#   "algo proto nchannels" to the header and each row.
# the block line above the column header: "out-of-place  in-place", or one of them (rccl-tests -O)
_BLOCKS = re.compile(r"^#?\s*(out-of-place)?\s*(in-place)?\s*$")
_OUT_OF_BOUNDS = re.compile(r"^#?\s*Out of bounds values\s*:\s*(\d+)\s+FAILED")
WRONG_COUNT_COLUMNS = ("#wrong", "wrong")  # a count of wrong elements (%d, or %g in rccl-tests; N/A with -c 0)

# Launcher prefixes, stripped from a line (up to MAX_PREFIXES stacked) before anything else reads it. Each names
# the rank whose output the line is; the group names the launcher:
#   mpi    Open MPI `mpirun --tag-output`: "[1,0]<stdout>:" / "[1,0]<stderr>:" ([jobid,rank]; Open MPI 5 may write
#          the job as "prterun-host-123@1")
#   torch  torchrun --tee / --local-ranks-filter: "[rank0]:" (older torchrun: "[default0]:")
#   pod    kubectl logs --prefix: "[pod/NAME/CONTAINER]"
#   ray    Ray / SkyPilot: "(head, rank=0, pid=3808)" - a rank= or pid= inside is required
#   slurm  srun --label: "0: ", " 0: ", "12: " (the task number, padded to the widest)
_PREFIX = re.compile(r"\s*(?:\[(?:[^\[\]\s,]{1,64},)?(?P<mpi>\d{1,9})\]<(?:stdout|stderr|stddiag)>:"
                     r"|\[(?:rank|default)?(?P<torch>\d{1,9})\]:"
                     r"|\[pod/(?P<pod>[^\[\]\s]{1,253})\]"
                     r"|\((?P<ray>[^()]{1,200})\)(?=\s)"
                     r"|(?P<slurm>\d{1,9}):(?=\s|$))")
_RAY_RANK = re.compile(r"(?:^|[\s,])rank=(\d{1,9})\b")
_RAY_PID = re.compile(r"(?:^|[\s,])pid=(\d{1,9})\b")
MAX_PREFIXES = 4  # kubectl --prefix + SkyPilot + mpirun --tag-output is three
# output streams (distinct prefixes) one log may hold: every rank of the largest run the importer reads
# (MAX_RANK_LINES) may print its own lines; a log with more (e.g. `grep -n` line numbers read as labels) is refused
MAX_STREAMS = MAX_RANK_LINES


def _lines(text: str) -> Iterable[str]:
    """The lines of `text` exactly as str.splitlines() gives them, one at a time (no list of every line)."""
    start = 0
    for match in _LINE_BREAK.finditer(text):
        yield text[start:match.start()]
        start = match.end()
    if start < len(text):
        yield text[start:]


def _prefix_id(kind: str, text: str) -> str | None:
    """The rank a matched prefix names (None: not a prefix - a Ray-style parenthesis without rank= or pid=)."""
    if kind != "ray":
        return text
    found = _RAY_RANK.search(text) or _RAY_PID.search(text)
    return found.group(1) if found else None


def split_prefix(line: str) -> tuple[tuple[tuple[str, str], ...], str, str]:
    """(stream key, prefix text, the rest) of one log line.

    The key is ((launcher, rank), ...) of every stacked launcher prefix (module doc), () for a line without one;
    the job id and stdout / stderr are not part of it, so one rank's lines over several mpirun jobs are one stream.
    A truncated or unknown prefix is left in place (the line is then read as text, usually ignored)."""
    key: list[tuple[str, str]] = []
    end = 0
    for _ in range(MAX_PREFIXES):
        match = _PREFIX.match(line, end)
        if match is None or match.lastgroup is None:
            break
        ident = _prefix_id(match.lastgroup, match.group(match.lastgroup))
        if ident is None:
            break
        key.append((match.lastgroup, ident))
        end = match.end()
    return tuple(key), line[:end].strip(), line[end:]


def _int(text: str, where: str, what: str) -> int:
    """A log's decimal integer, refused (one line) above MAX_DIGITS digits before int() sees it (Python refuses
    strings over 4,300 digits with a ValueError; anything over 18 is not an nccl-tests number anyway)."""
    if len(text) > MAX_DIGITS:
        raise InputError(f"{where}: {what} has {len(text)} digits (at most {MAX_DIGITS})")
    return int(text)


@dataclass(frozen=True)
class Hints:
    """What a log may leave out (a published table without its header), given by the user or a manifest.

    Used only where the log is silent; a log that says otherwise is refused naming both values."""

    op: str | None = None
    world_size: int | None = None
    nodes: int | None = None
    gpu: str | None = None


def _program_op(name: str, where: str) -> str:
    """'all_gather_perf' / 'all_gather_perf_mpi' / path -> schema op; InputError for other programs."""
    match = _PROGRAM.search(name)
    base = match.group(1) if match else Path(name).name
    if base in PROGRAMS:
        return PROGRAMS[base]
    raise InputError(f"{where}: nccl-tests program {name!r} is not supported "
                     f"(supported: {', '.join(p + '_perf' for p in PROGRAMS)})")


def _param(rest: str, name: str, default: int, where: str = "log") -> int:
    """`name: N` from the parameter line ("iters" is not "warmup iters" / "agg iters")."""
    match = re.search(rf"(?<!warmup )(?<!agg )(?<![A-Za-z_]){re.escape(name)}:\s*(\d+)", rest)
    return _int(match.group(1), where, name) if match else default


@dataclass
class _Run:
    """One nccl-tests invocation inside a log."""

    op: str | None = None
    op_line: int = 0
    threads: int | None = None
    gpus: int | None = None
    iters: int = 0
    agg_iters: int = 1
    graph: int = 0
    ranks: dict[int, tuple[str, str, str, str]] = field(default_factory=dict)  # rank -> (group, pid, host, gpu)
    header: list[str] | None = None
    in_place_only: bool = False  # the header's block line names in-place alone (rccl-tests -O 0)
    rows: list[tuple[int, list[str]]] = field(default_factory=list)
    flags: tuple[int, int] | None = None  # (-t, -g) of an echoed command line

    @property
    def started(self) -> bool:
        return self.threads is not None or bool(self.rows) or bool(self.ranks)


def _wrong_column(header: list[str] | None, tail: int) -> str | None:
    """The name of the column after the out-of-place busbw: '#wrong' / 'wrong' (a count), 'error' (older
    nccl-tests: the largest deviation) or None (a table trimmed after busbw). Without a header: '#wrong'."""
    if tail < 4:
        return None
    return header[len(header) - tail + 3] if header is not None else "#wrong"


def _check_wrong(token: str, column: str, at: str) -> None:
    """Refuse a row whose validation failed: a nonzero wrong-element count (nccl-tests prints %d, rccl-tests %g,
    'N/A' without validation), or a value starred past its threshold (the HIP-era rccl-tests' `error`).
    An unstarred `error` is the largest deviation - rounding-sized for float types, as in 2e-07 - and is kept."""
    if token.endswith("*"):
        raise InputError(f"{at}: nccl-tests starred this row's {column} value {token} (past its threshold: a failed "
                         "validation); not imported")
    if column not in WRONG_COUNT_COLUMNS:
        return
    if _INT.match(token):
        wrong: float = _int(token, at, "#wrong")
    elif _NUMBER.match(token):
        wrong = float(token)
    else:
        return  # N/A: run without validation (-c 0)
    if wrong != 0:
        raise InputError(f"{at}: nccl-tests reported {token} wrong elements (a failed validation); not imported")


def _launch(run: _Run, pids: int) -> str:
    threads, gpus = (run.threads, run.gpus) if run.threads is not None else (run.flags or (None, None))
    if threads is None:
        return "process-per-gpu" if pids > 1 else "unknown"
    if threads > 1:
        return "multi-thread"
    return "single-process" if (gpus or 1) > 1 else "process-per-gpu"


def _check_interleaved(run: _Run, source: str, header_tail: int) -> None:
    """Refuse two runs whose rows are mixed: inside one run every (type, redop, root) sweep grows in size
    (`-d all` / `-o all` print one whole sweep after another)."""
    last: dict[tuple, tuple[int, int]] = {}
    for lineno, tokens in run.rows:
        if not _INT.match(tokens[0]):
            continue
        key = tuple(tokens[2:max(3, len(tokens) - header_tail)])  # type [redop root]: the columns before time
        size = _int(tokens[0], f"{source}:{lineno}", "size")
        if size == 0:  # nccl-tests prints size-0 rows while minBytes < nranks x type size
            continue
        if key in last and size <= last[key][0]:
            prev_size, prev_line = last[key]
            raise InputError(f"{source}:{lineno}: size {size} B follows size {prev_size} B of line {prev_line} for "
                             f"the same type / redop ({' '.join(key)}): two runs interleaved in one log (lines "
                             f"{prev_line} and {lineno}); split them into one file per run")
        last[key] = (size, lineno)


def _finish(run: _Run, source: str, fallback_op: str | None, hints: Hints = Hints()) -> list[dict]:
    """Schema rows of one run (see the module doc for every conversion)."""
    if not run.rows:
        return []
    first_line = run.rows[0][0]
    where = f"{source}:{first_line}"
    op = run.op or fallback_op or hints.op
    if op is None:
        raise InputError(f"{where}: cannot tell which nccl-tests program wrote these rows (no 'Collective test "
                         "starting' line, command line or program name in the file name; pass --op)")
    if hints.op is not None and op != hints.op:
        raise InputError(f"{where}: the log is a {op} run but --op says {hints.op}")
    pids = len({pid for _g, pid, _h, _gpu in run.ranks.values()})
    if run.ranks:
        groups: dict[str, int] = {}
        for group, _pid, _host, _gpu in run.ranks.values():
            groups[group] = groups.get(group, 0) + 1
        sizes = set(groups.values())
        if len(sizes) != 1:
            raise InputError(f"{where}: the Rank lines list groups of different sizes {sorted(sizes)}")
        nranks = sizes.pop()
        hosts = {host for _g, _p, host, _gpu in run.ranks.values()}
        gpus = sorted({gpu for _g, _p, _h, gpu in run.ranks.values()} - {NO_GPU_NAME})
        nodes = len(hosts)
        if len(gpus) > 1:
            raise InputError(f"{where}: the Rank lines name {len(gpus)} GPU models ({', '.join(gpus)}); "
                             "a run over mixed GPUs cannot calibrate one profile")
        gpu = gpus[0] if gpus else (hints.gpu or "unknown")
        listed = sorted(run.ranks)
        if listed != list(range(len(listed))) and len(groups) == 1:
            if hints.world_size is None:
                raise InputError(f"{where}: the Rank lines are incomplete (ranks {listed[0]}..{listed[-1]} listed, "
                                 f"{len(listed)} of them): the rank count is unknown; pass --world-size")
            nranks, nodes = hints.world_size, hints.nodes or nodes
        if hints.world_size is not None and hints.world_size != nranks:
            raise InputError(f"{where}: the Rank lines list {nranks} ranks but --world-size says {hints.world_size}")
        if hints.gpu is not None and hints.gpu != gpu:
            raise InputError(f"{where}: the Rank lines name GPU {gpu!r} but --gpu says {hints.gpu!r}")
    elif run.threads is not None and run.threads * (run.gpus or 1) > 1:
        nranks, nodes, gpu = run.threads * (run.gpus or 1), 1, hints.gpu or "unknown"  # one process drives them
        if hints.world_size is not None and hints.world_size != nranks:
            raise InputError(f"{where}: the header gives nThread x nGpus = {nranks} ranks in one process but "
                             f"--world-size says {hints.world_size}")
    elif hints.world_size is not None:
        nranks, nodes, gpu = hints.world_size, hints.nodes or 1, hints.gpu or "unknown"
    elif run.threads is not None or run.flags is not None:
        raise InputError(f"{where}: nThread 1 nGpus 1 and no '#  Rank' lines: one rank per process, and the number "
                         "of processes (mpirun -np) is not in the log; pass --world-size (and --nodes)")
    else:
        raise InputError(f"{where}: no '# nThread ...' header and no '#  Rank' lines: the rank count is unknown; "
                         "pass --world-size (and --nodes)")
    if hints.nodes is not None and hints.nodes != nodes:
        # fewer nodes than hosts: one NVLink domain spans several hosts (GB200 NVL72: 18 trays, one node)
        if not (hints.nodes < nodes and nodes % hints.nodes == 0):
            raise InputError(f"{where}: the Rank lines name {nodes} host(s) but --nodes says {hints.nodes}")
        nodes = hints.nodes
    launch = _launch(run, pids)
    calls = max(run.iters, 1) * max(run.agg_iters, 1) * max(run.graph, 1)
    header = run.header
    if run.in_place_only:
        raise InputError(f"{where}: the table has in-place times only (rccl-tests -O 0); the importer reads the "
                         "out-of-place time: rerun with both blocks (no -O 0)")
    tail = len(header) - header.index("time") if header is not None and "time" in header else 8
    wrong_column = _wrong_column(header, tail)
    _check_interleaved(run, source, tail)
    out = []
    for lineno, tokens in run.rows:
        at = f"{source}:{lineno}"
        if len(tokens) < tail + 3:
            raise InputError(f"{at}: result row has {len(tokens)} columns, expected at least {tail + 3}")
        size, type_name = _int(tokens[0], at, "size"), tokens[2]
        dtype = TYPE_NAMES.get(type_name)
        if dtype is None:
            raise InputError(f"{at}: data type {type_name!r} is not an nccl-tests type "
                             f"(importable: {', '.join(sorted(TYPE_NAMES))})")
        try:
            time_us = float(tokens[-tail])
        except ValueError:
            raise InputError(f"{at}: out-of-place time {tokens[-tail]!r} is not a number") from None
        if not (time_us > 0 and time_us != float("inf")):
            raise InputError(f"{at}: out-of-place time {tokens[-tail]!r} must be finite and > 0")
        if wrong_column is not None:
            _check_wrong(tokens[-tail + 3], wrong_column, at)
        if op in ("all_gather", "gather", "reduce_scatter"):
            if size % nranks:
                raise InputError(f"{at}: size {size} B is not divisible by the {nranks} ranks")
            per_rank = size // nranks
        else:
            per_rank = size
        if per_rank <= 0:
            continue  # nccl-tests prints size 0 rows when minBytes < nranks * type size
        if per_rank % ELEM_BYTES[dtype]:
            raise InputError(f"{at}: {per_rank} B per rank is not a whole number of {type_name} elements")
        redop = tokens[3] if len(tokens) > 3 and not _NUMBER.match(tokens[3]) else ""
        label = LABEL if op not in ("all_reduce", "reduce_scatter") or redop in ("", "sum", "none") \
            else f"{LABEL} (redop {redop})"
        out.append({"op": op, "backend": "nccl", "device": "cuda", "gpu": gpu, "dtype": dtype,
                    "mode": "graph" if run.graph > 0 else "eager", "world_size": nranks, "nodes": nodes,
                    "bytes_per_rank": per_rank, "rows": 0, "cols": 0, "iters": calls, "median_us": time_us,
                    "p10_us": time_us, "p90_us": time_us, "min_us": time_us, "max_us": time_us,
                    "label": label, "source": at, "launch": launch})
    return out


def _header_tokens(stripped: str) -> list[str] | None:
    """The column header ('#  size count type ... time algbw busbw #wrong ...'), with or without its '#'."""
    tokens = stripped.lstrip("#").split()
    if "size" in tokens and "count" in tokens and ("time" in tokens or "cputime" in tokens):
        return tokens
    return None


@dataclass
class _Log:
    """What every stream of one log shares: its name, the user's hints, the program a file name or an echoed
    command line names (a command line is usually typed without the launcher's prefix, so it is shared) and the
    counters of bounded work (MAX_LOG_ROWS, MAX_RANK_LINES over the whole log)."""

    source: str
    hints: Hints
    fallback_op: str | None
    echoed: str | None = None
    echoed_flags: tuple[int, int] | None = None
    results: int = 0
    rank_lines: int = 0


class _Stream:
    """The lines of one rank (one launcher prefix, module doc; the whole log when it has none), read the way
    nccl-tests prints them: one or more runs, each a header then its result rows."""

    __slots__ = ("log", "label", "run", "rows", "blocks", "first_row")

    def __init__(self, log: _Log, label: str) -> None:
        self.log, self.label = log, label
        self.run = _Run()
        self.rows: list[dict] = []
        self.blocks: tuple[bool, bool] | None = None  # (out-of-place, in-place) of the last block line
        self.first_row = 0  # line of this stream's first result row (0: none yet)

    def close(self) -> None:
        """Convert the current run's rows (module doc) and start a fresh run."""
        run, log = self.run, self.log
        if run.flags is None and log.echoed_flags is not None:
            run.flags = log.echoed_flags
        self.rows += _finish(run, log.source, log.fallback_op, log.hints)
        self.run = _Run()

    def _take_echoed(self, at: str) -> None:
        if self.run.op is None and self.log.echoed is not None:
            self.run.op = _program_op(self.log.echoed, at)

    def feed(self, lineno: int, stripped: str) -> None:
        """Read one non-empty line (prefix removed, stripped)."""
        at = f"{self.log.source}:{lineno}"
        marker = _MARKER.match(stripped)
        if marker:
            if self.run.started:
                self.close()
            self.run.op, self.run.op_line = _program_op(marker.group(1), at), lineno
            return
        params = _PARAMS.match(stripped)
        if params:
            self._params(params, at)
            return
        rank = _RANK.match(stripped)
        if rank:
            self._rank(rank, at)
            return
        header = _header_tokens(stripped)
        if header is not None:
            if "cputime" in header:
                raise InputError(f"{at}: this log reports CPU time (-C 1), not the collective's time; "
                                 "rerun nccl-tests without -C")
            self.run.header = header
            self.run.in_place_only = self.blocks == (False, True)
            self.blocks = None
            return
        blocks = _BLOCKS.match(stripped)
        if blocks and (blocks.group(1) or blocks.group(2)):
            self.blocks = (bool(blocks.group(1)), bool(blocks.group(2)))
            return
        failed = _OUT_OF_BOUNDS.match(stripped)
        if failed:
            raise InputError(f"{at}: nccl-tests reports {failed.group(1)} out-of-bounds values (FAILED: the run's "
                             "validation failed); not imported")
        if stripped.startswith("#"):
            return
        tokens = stripped.split()
        if len(tokens) >= 2 and _INT.match(tokens[0]) and _INT.match(tokens[1]):
            self._result(lineno, tokens, at)
            return
        program = _PROGRAM.search(stripped)
        if program and not stripped.startswith(("NCCL", "[")):
            log = self.log
            log.echoed = program.group(0)
            flags = dict((k.lstrip("-")[0], _int(v, at, k)) for k, v in _FLAG.findall(stripped))
            log.echoed_flags = (flags.get("t", 1), flags.get("g", 1))
            if self.run.started and self.run.rows:
                self.close()

    def _params(self, params: re.Match, at: str) -> None:
        """`# nThread N nGpus G ... iters: I agg iters: A ... graph: G` starts a run."""
        if self.run.threads is not None or self.run.rows:
            self.close()
        self._take_echoed(at)
        run, rest = self.run, params.group(3)
        run.threads, run.gpus = _int(params.group(1), at, "nThread"), _int(params.group(2), at, "nGpus")
        run.iters = _param(rest, "iters", 0, at)
        run.agg_iters = _param(rest, "agg iters", 1, at)
        run.graph = _param(rest, "graph", 0, at)

    def _rank(self, rank: re.Match, at: str) -> None:
        """`#  Rank r Group g Pid p on HOST device d [bus] GPU` (counted against MAX_RANK_LINES)."""
        self.log.rank_lines += 1
        if self.log.rank_lines > MAX_RANK_LINES:
            raise InputError(f"{at}: more than {MAX_RANK_LINES:,} '#  Rank' lines in one log (the limit)")
        # a Rank line without "on HOST" (older nccl-tests, or edited): one host
        self.run.ranks[_int(rank.group(1), at, "Rank")] = (rank.group(2) or "0", rank.group(3),
                                                           rank.group(4) or "(host not printed)",
                                                           rank.group(5) or NO_GPU_NAME)

    def _result(self, lineno: int, tokens: list[str], at: str) -> None:
        """A result row (two leading integers), kept for _finish (counted against MAX_LOG_ROWS)."""
        log = self.log
        if not self.run.started and self.run.op is None and log.echoed is None and log.fallback_op is None \
                and log.hints.op is None:
            raise InputError(f"{at}: result row before any nccl-tests header (pass --op if the log names no "
                             "program)")
        self._take_echoed(at)
        log.results += 1
        if log.results > MAX_LOG_ROWS:
            raise InputError(f"{at}: more than {MAX_LOG_ROWS:,} result rows in one log (the limit); split it into "
                             "one file per run")
        self.run.rows.append((lineno, tokens))
        self.first_row = self.first_row or lineno


def _table_values(rows: list[dict]) -> list[tuple]:
    """A stream's rows without their line numbers: what two ranks' copies of one table share."""
    return [tuple(value for key, value in row.items() if key != "source") for row in rows]


def _one_table(streams: Iterable[_Stream], source: str) -> list[dict]:
    """The rows of the stream that printed a result row first (nccl-tests prints its table from rank 0 alone).

    Another stream's table is dropped when it holds the same rows (the output duplicated, e.g. by tee), so no row
    counts twice; a different table is refused in one line: those are separate runs (e.g. an nccl-tests built
    without MPI=1 under mpirun / srun: every process runs alone), not one measurement."""
    printed = sorted((s for s in streams if s.rows), key=lambda s: s.first_row)
    if not printed:
        return []
    first = printed[0]
    for other in printed[1:]:
        if _table_values(other.rows) != _table_values(first.rows):
            raise InputError(f"{source}:{other.first_row}: lines prefixed {other.label or '(none)'!r} print another "
                             f"result table than those prefixed {first.label or '(none)'!r} (line "
                             f"{first.first_row}): separate runs (an nccl-tests without MPI=1 runs one job per "
                             "process); split the log per rank")
    return first.rows


def parse_nccl_tests_text(text: str, source: str = "log", hints: Hints = Hints(), *,
                          validation_ops: bool = False) -> pd.DataFrame:
    """Rows (OUTPUT_COLUMNS) of every supported nccl-tests run in `text`.

    `source` names the text in errors and in the `source` column; a file name
    containing e.g. "all_gather_perf" also serves as the program name of old logs.
    The table may sit inside other text (markdown, YAML, shell; header lines with or without '#'), its lines may
    carry launcher prefixes (mpirun --tag-output, torchrun, srun --label, ...: one stream per rank, module doc),
    CRLF / CR line ends, a UTF-8 byte-order mark and trailing blanks.
    `hints` fill in what the log leaves out (module doc). reduce_scatter / alltoall runs are kept only with
    validation_ops=True (no strategy uses them: schema.VALIDATION_ONLY_OPS); otherwise a log of nothing else is
    refused saying so.
    """
    try:
        fallback_op = _program_op(source, source) if _PROGRAM.search(Path(source).name) else None
    except InputError:
        fallback_op = None
    log = _Log(source, hints, fallback_op)
    streams: dict[tuple, _Stream] = {}
    for lineno, raw in enumerate(_lines(text), start=1):
        key, label, body = split_prefix(raw.lstrip("\ufeff"))
        stripped = body.strip()
        if not stripped:
            continue
        stream = streams.get(key)
        if stream is None:
            if len(streams) >= MAX_STREAMS:
                raise InputError(f"{source}:{lineno}: more than {MAX_STREAMS:,} distinct line prefixes (ranks) in "
                                 "one log (the limit)")
            stream = streams[key] = _Stream(log, label)
        stream.feed(lineno, stripped)
    for stream in streams.values():
        stream.close()
    rows = _one_table(streams.values(), source)
    if not rows:
        raise InputError(f"{source}: no nccl-tests result rows found (is this an nccl-tests *_perf log?)")
    frame = pd.DataFrame(rows, columns=list(OUTPUT_COLUMNS))
    if not validation_ops:
        keep = ~frame["op"].isin(VALIDATION_ONLY_OPS)
        if not keep.any():
            ops = ", ".join(sorted(set(frame["op"])))
            raise InputError(f"{source}: {ops} is imported for validation only (no strategy uses it, the cost model "
                             "does not price it): python -m calibration.import_nccl_tests keeps it in its CSV")
        frame = frame[keep].reset_index(drop=True)
    out = validate_measurements(frame, source=source, extra_collectives=VALIDATION_ONLY_OPS)
    return out[list(OUTPUT_COLUMNS)]


MAX_LOG_BYTES = 64 * 2**20  # an nccl-tests log (a full -b 8 -e 16G sweep is ~10 kB)


def read_log(path: str | Path) -> str:
    """The log's text: stat first, FIFOs / devices / directories and files over MAX_LOG_BYTES refused
    (costmodel.io.safe_io.read_bytes), undecodable bytes replaced."""
    return read_bytes(path, limit_bytes=MAX_LOG_BYTES).decode("utf-8", errors="replace")


def import_logs(paths: Iterable[str | Path], hints: Hints = Hints(), *, validation_ops: bool = True) -> pd.DataFrame:
    """All rows of several logs, concatenated in the given order (reduce_scatter / alltoall kept: validation)."""
    frames = [parse_nccl_tests_text(read_log(p), source=str(p), hints=hints, validation_ops=validation_ops)
              for p in paths]
    if not frames:
        raise InputError("no log files given")
    return pd.concat(frames, ignore_index=True)


MANIFEST_COLUMNS = ("file", "table", "profile", "nccl_algo", "launch", "software", "source", "status")
REFERENCE_COLUMNS = ("id", "table", "gpu", "profile", "op", "backend", "device", "dtype", "mode", "world_size",
                     "nodes", "bytes_per_rank", "iters", "median_us", "host_floor_us", "label", "nccl_algo",
                     "used_in_profile", "software", "method", "source", "launch")
FLOOR_BELOW_BYTES_PER_RANK = 64 * 1024  # host floor = median time of the table's rows below this size


def read_manifest_table(manifest: Path, columns: Sequence[str]) -> pd.DataFrame:
    """A manifest CSV as strings: read bounded (stat first), its header checked (column count and length) before
    pandas parses it, every one of `columns` present; one-line InputError otherwise."""
    try:
        data = read_bytes(manifest, limit_bytes=MAX_LOG_BYTES)
        check_csv_header(data, str(manifest))
        table = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(f"{manifest}: cannot read the manifest ({str(exc).splitlines()[0]})") from None
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise InputError(f"{manifest}: missing column(s) {', '.join(missing)}")
    return table


def reference_from_manifest(manifest: str | Path) -> pd.DataFrame:
    """Validation rows (REFERENCE_COLUMNS) of every "priced" log listed in `manifest` (see the module doc)."""
    manifest = Path(manifest)
    table = read_manifest_table(manifest, MANIFEST_COLUMNS)
    frames = []
    for _, entry in table.iterrows():  # every listed log must import; only "priced" ones become rows
        priced = entry["status"] == "priced"
        if priced and not entry["profile"]:
            raise InputError(f"{manifest}: table {entry['table']} is priced but names no profile")
        log = manifest.parent / entry["file"]
        rows = parse_nccl_tests_text(read_log(log), source=entry["file"], hints=_manifest_hints(entry, manifest),
                                     validation_ops=True)
        if not priced:
            continue
        line = rows["source"].str.rsplit(":", n=1).str[-1]
        small = rows["bytes_per_rank"] < FLOOR_BELOW_BYTES_PER_RANK
        floor = float(rows.loc[small, "median_us"].median()) if small.any() else float("nan")
        used = {int(x) for x in str(entry.get("in_sample_bytes", "") or "").split(";") if x.strip()}
        rows = rows.assign(
            id=[f"{entry['table']}-{i}" for i in range(len(rows))], table=entry["table"], profile=entry["profile"],
            host_floor_us=round(floor, 3), nccl_algo=entry["nccl_algo"] or "default",
            used_in_profile=rows["bytes_per_rank"].isin(used), software=entry["software"],
            method=f"nccl-tests out-of-place time (mean over iters, no Python launch); {entry['launch']}",
            source=entry["source"] + ", " + entry["file"] + " line " + line)
        frames.append(rows[list(REFERENCE_COLUMNS)])
    if not frames:
        raise InputError(f"{manifest}: no table has status 'priced'")
    return pd.concat(frames, ignore_index=True)


def _manifest_hints(entry: pd.Series, manifest: Path) -> Hints:
    """Hints from the manifest's optional columns op, world_size, nodes, gpu (what a published table left out)."""
    def number(name: str) -> int | None:
        text = str(entry.get(name, "") or "").strip()
        if not text:
            return None
        if not _INT.match(text) or not 1 <= int(text) <= 2**20:
            raise InputError(f"{manifest}: table {entry['table']}: {name} {text!r} is not an integer in 1..{2**20}")
        return int(text)

    op = str(entry.get("op", "") or "").strip() or None
    if op is not None and op not in PROGRAMS:
        raise InputError(f"{manifest}: table {entry['table']}: op {op!r} is not one of {', '.join(PROGRAMS)}")
    return Hints(op=op, world_size=number("world_size"), nodes=number("nodes"),
                 gpu=str(entry.get("gpu", "") or "").strip() or None)


def cli_error(exc: BaseException, out: Path | None) -> int:
    """An importer CLI's one error line on stderr and its exit status (both importers): an InputError -> its text,
    2; an OSError while writing `out` -> "cannot write PATH: reason", 2; an interrupt -> "interrupted", 130."""
    if isinstance(exc, KeyboardInterrupt):
        print("error: interrupted", file=sys.stderr)
        return 130
    if isinstance(exc, OSError):
        print(f"error: cannot write {exc.filename or out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"error: {exc}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: 0 ok, 2 bad input (one line on stderr)."""
    parser = OneLineParser(prog="python -m calibration.import_nccl_tests",
                           description="Convert nccl-tests *_perf logs into measurement CSV rows.")
    parser.add_argument("logs", nargs="*", metavar="LOG", help="nccl-tests stdout files")
    parser.add_argument("--manifest", type=Path, help="reference manifest CSV (instead of LOGs): write "
                        "data/reference rows with provenance (module doc)")
    parser.add_argument("--out", required=True, type=Path,
                        help="CSV to write (replaced atomically; never one of the inputs)")
    parser.add_argument("--op", choices=tuple(PROGRAMS), default=None,
                        help="the collective, for a log that names no program (checked against one that does)")
    parser.add_argument("--world-size", type=int, default=None,
                        help="ranks, for a log without (complete) '#  Rank' lines, e.g. an mpirun table")
    parser.add_argument("--nodes", type=int, default=None,
                        help="nodes of such a run (default 1); fewer than the hosts the Rank lines name: NVLink "
                             "domains spanning hosts (a GB200 NVL72 rack: --nodes 1)")
    parser.add_argument("--gpu", default=None, help="GPU name of such a run (default 'unknown')")
    out: Path | None = None  # known once the flags are parsed (cli_error names it)
    try:
        args = parser.parse_args(argv)
        out = args.out
        if bool(args.logs) == (args.manifest is not None):
            raise InputError("give either LOG files or --manifest")
        for flag in ("world_size", "nodes"):
            value = getattr(args, flag)
            if value is not None and not 1 <= value <= 2**20:
                raise InputError(f"--{flag.replace('_', '-')}: expected an integer in 1..{2**20}, got {value}")
        hints = Hints(op=args.op, world_size=args.world_size, nodes=args.nodes, gpu=args.gpu)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        inputs = [*args.logs, args.manifest]
        check_output(args.out, inputs, what="--out")  # before reading: never over a log, never a FIFO
        frame = reference_from_manifest(args.manifest) if args.manifest else import_logs(args.logs, hints)
        write_csv(frame, args.out, inputs=inputs)  # formula-safe and atomic; InputError naming the path
    except (InputError, OSError, KeyboardInterrupt) as exc:
        return cli_error(exc, out)
    ops = ", ".join(f"{op} x{n}" for op, n in frame["op"].value_counts(sort=False).items())
    print(f"wrote {len(frame)} rows ({ops}) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
