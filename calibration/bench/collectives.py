"""torch.distributed collective benchmark: all_gather, all_reduce, gather, broadcast.

Launch under torchrun (one process per GPU, or per CPU "rank" with gloo)::

    torchrun --standalone --nproc-per-node 8 -m calibration.collectives --backend nccl --out DIR
    torchrun --standalone --nproc-per-node 2 -m calibration.collectives --backend gloo --out DIR

What is measured (`calibration.bench.payloads` builds the point list): for every
power-of-two TP sub-group p = 2, 4, ... <= world size (ranks [0, p), made with
dist.new_group; the other ranks wait at a world barrier after every point),
a geometric byte sweep (fp32 buffers; all_reduce SUM) plus the exact payloads
of the argmax strategies (bf16 logits, fp32 pairs, int64 ids / keys with
all_reduce MAX). `bytes_per_rank` is what each rank contributes (all_gather,
gather: its chunk; all_reduce, broadcast: the whole buffer). gather and
broadcast use group rank 0 as root. all_gather calls
dist.all_gather_into_tensor (what vLLM calls); where a backend lacks it, it
falls back to dist.all_gather into a list + torch.cat and provenance.json
records `all_gather_impl`.

Timing of one sample: every rank of the group times one call on its own (CUDA
events on the current stream, then a synchronize, on GPU; perf_counter_ns around
the blocking call on CPU), and the sample is the maximum of that time over the
group - the collective is as slow as its slowest rank. In CUDA-graph mode (NCCL
only) `--graph-ops` calls are captured in one torch.cuda.CUDAGraph and a sample is
replay time / graph-ops. Samples repeat until the median's 95% CI is within
`--rel-tol` (calibration.bench.timing.converged, checked at 10 samples and every 8
after), `--max-iters` samples, or `--point-time-s` seconds. They are taken in
rounds (`Sampler.samples`): one all_reduce(MAX) per round, of the round's times and
the elapsed time, gives every rank the same samples and the same stop decision, so
every rank stops together - one small collective per round of up to 10 samples
instead of two (and two host syncs) per sample, which had made the bookkeeping cost
more than a small gloo call itself. Every point's result is checked once against
the known per-rank pattern before timing.

Rows go to DIR/collectives.csv (costmodel.profiles.schema columns + `label`), one
fsynced row per measured (point, mode), so a crash keeps what was measured;
`--resume` skips rows already there. DIR/provenance.json records hosts, GPUs,
versions, NCCL_* variables, the command line and start / end time; an earlier
record there (a previous run, or calibration.kernels' into the same DIR) is kept
under "previous_runs".

`--impl oneshot|multimem|nccl-symm` times the symmetric-memory variants of all_gather / all_reduce instead
(`SymmMemRunner`: torch.ops.symm_mem one_shot_all_reduce, multimem_all_reduce_, multimem_all_gather_out,
a peer-read all-gather, and NCCL's own symmetric kernels on buffers registered as NCCL windows) into
DIR/<impl>/collectives.csv - their own curves, fitted on their own with `calibration.fit DIR/<impl>`; without
CUDA + torch symmetric memory (or, for nccl-symm, NCCL >= 2.27) it prints one `note:` line, measures
nothing and exits 0.

Failures: bad flags or an unusable backend -> one line, exit 2. A rank that
dies makes the survivors' next collective raise (gloo) -> one line, exit 3;
a hang -> the watchdog prints one line after `--watchdog-s` and exits 3.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from calibration.logs.provenance import ProvenanceFile, collect_provenance, now_iso, with_previous_runs
from calibration.logs.results import RowWriter, existing_keys, point_key
from costmodel.io.errors import InputError, OneLineParser, first_line
from costmodel.io.measurements import COLLECTIVE_OPS, MEASUREMENT_COLUMNS

from .payloads import DEFAULT_BATCHES, DEFAULT_PRESETS, Point, plan_points, tp_sizes
from .timing import Stats, check_due, converged, next_check_due

EXIT_INPUT = 2
EXIT_RUNTIME = 3
EXIT_INTERRUPTED = 130  # Ctrl-C: "interrupted; N rows kept, resume with --resume"
MAX_FLAG_BYTES = 1 << 40  # --min-bytes / --max-bytes per rank
CSV_NAME = "collectives.csv"
PROVENANCE_NAME = "provenance.json"
MIN_ITERS = 10  # samples before the stopping rule is first evaluated (calibration.bench.timing.converged)
EXTRA_COLUMNS = ("label",)
DIE_ENV = "CALIB_TEST_DIE_AFTER_POINTS"  # test hook: rank 1 os._exit()s after this many points
MIB = 1024 * 1024
TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "int64": "int64",
                "uint8": "uint8", "int8": "int8"}
LAUNCH_HINT = ("launch it with torchrun, e.g. `torchrun --standalone --nproc-per-node 2 -m calibration.collectives "
               "--backend gloo --out DIR`")


class BenchError(RuntimeError):
    """A measurement failed at run time (wrong collective result, graph capture failure, ...)."""


class Terminated(BaseException):
    """SIGTERM while measuring (torchrun stops every rank when one fails): a failed run (`end_status`)."""


# --------------------------------------------------------------------------- flags
def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None
    if not values:
        raise argparse.ArgumentTypeError("empty list")
    if any(not 1 <= v <= 2**31 - 1 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: need integers in 1..{2**31 - 1}")
    return list(dict.fromkeys(values))


def _str_list(text: str) -> list[str]:
    return list(dict.fromkeys(v.strip() for v in text.split(",") if v.strip()))


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="torchrun ... -m calibration.collectives",
                description="Time all_gather / all_reduce / gather / broadcast over TP sub-groups.")
    p.add_argument("--backend", required=True, choices=("nccl", "gloo"))
    p.add_argument("--out", required=True, type=Path, help="output directory (collectives.csv, provenance.json)")
    p.add_argument("--resume", action="store_true", help="skip points already in DIR/collectives.csv")
    p.add_argument("--min-bytes", type=int, default=8, help="smallest bytes per rank of the sweep (default 8)")
    p.add_argument("--max-bytes", type=int, default=None,
                   help="largest bytes per rank (default 256 MiB on GPU, 16 MiB on CPU); payloads above are skipped")
    p.add_argument("--points-per-octave", type=int, default=2)
    p.add_argument("--presets", type=_str_list, default=list(DEFAULT_PRESETS),
                   help="comma-separated presets whose strategy payloads are measured ('none' for sweep only)")
    p.add_argument("--batches", type=_int_list, default=list(DEFAULT_BATCHES))
    p.add_argument("--payload-dtype", default="bf16", help="logits dtype of the payloads (default bf16)")
    p.add_argument("--world-sizes", type=_int_list, default=None,
                   help="TP sub-group sizes to measure (default every power of two from 2 to the world size)")
    p.add_argument("--ops", type=_str_list, default=list(COLLECTIVE_OPS))
    p.add_argument("--modes", type=_str_list, default=None,
                   help="eager and/or graph (default eager,graph on nccl; eager on gloo)")
    p.add_argument("--graph-ops", type=int, default=10, help="collective calls captured per CUDA graph")
    p.add_argument("--warmup", type=int, default=5, help="warm-up calls per point and mode")
    p.add_argument("--rel-tol", type=float, default=0.02, help="stop when the median's 95%% CI is within this")
    p.add_argument("--max-iters", type=int, default=1000)
    p.add_argument("--point-time-s", type=float, default=None, help="time limit per point (default 2 GPU / 1 CPU)")
    p.add_argument("--watchdog-s", type=float, default=None,
                   help="abort when no point completes for this long (default 300 GPU / 120 CPU)")
    p.add_argument("--impl", default="nccl", choices=IMPLS,
                   help="oneshot | multimem | nccl-symm: time the symmetric-memory variants of all_gather / all_reduce "
                        "(CUDA + torch symmetric memory only; a clear note and nothing measured elsewhere) into "
                        "DIR/<impl>/collectives.csv, their own curves")
    p.add_argument("--note", action="append", default=[], help="free-text remark for provenance.json (repeatable)")
    p.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
    return p


@dataclass(frozen=True)
class Config:
    backend: str
    device: str
    out: Path
    resume: bool
    min_bytes: int
    max_bytes: int
    points_per_octave: int
    presets: tuple[str, ...]
    batches: tuple[int, ...]
    payload_dtype: str
    world_sizes: tuple[int, ...] | None
    ops: tuple[str, ...]
    modes: tuple[str, ...]
    graph_ops: int
    warmup: int
    rel_tol: float
    max_iters: int
    point_time_s: float
    watchdog_s: float
    progress: bool
    notes: tuple[str, ...] = ()
    start_time: str = ""
    impl: str = "nccl"


def parse_config(argv: Sequence[str]) -> Config:
    """Flags -> Config with the device-dependent defaults filled in; InputError on bad values."""
    a = build_parser().parse_args(list(argv))
    device = "cuda" if a.backend == "nccl" else "cpu"
    gpu = device == "cuda"
    modes = tuple(a.modes) if a.modes else (("eager", "graph") if gpu else ("eager",))
    for mode in modes:
        if mode not in ("eager", "graph"):
            raise InputError(f"--modes {mode!r}: expected eager and/or graph")
        if mode == "graph" and not gpu:
            raise InputError("--modes graph needs --backend nccl (CUDA graphs); gloo runs eager only")
    presets = () if [p.lower() for p in a.presets] == ["none"] else tuple(a.presets)
    cfg = Config(
        backend=a.backend, device=device, out=a.out, resume=a.resume, min_bytes=a.min_bytes,
        max_bytes=a.max_bytes if a.max_bytes is not None else (256 * MIB if gpu else 16 * MIB),
        points_per_octave=a.points_per_octave, presets=presets, batches=tuple(a.batches),
        payload_dtype=a.payload_dtype, world_sizes=tuple(a.world_sizes) if a.world_sizes else None,
        ops=tuple(a.ops), modes=modes, graph_ops=a.graph_ops, warmup=a.warmup, rel_tol=a.rel_tol,
        max_iters=a.max_iters, point_time_s=a.point_time_s if a.point_time_s is not None else (2.0 if gpu else 1.0),
        watchdog_s=a.watchdog_s if a.watchdog_s is not None else (300.0 if gpu else 120.0),
        progress=not a.no_progress, notes=tuple(a.note), start_time=now_iso(), impl=a.impl,
    )
    if cfg.impl != "nccl":  # symmetric-memory variants exist for all_gather / all_reduce only
        ops = tuple(o for o in cfg.ops if o in SYMM_OPS)
        if not ops:
            raise InputError(f"--impl {cfg.impl}: times {' / '.join(SYMM_OPS)} only, --ops has neither")
        # their own curves: DIR/<impl>/collectives.csv, never globbed with DIR/*.csv (calibration.fit DIR keeps
        # fitting NCCL; calibration.fit DIR/<impl> fits the variant's curves as a profile of their own)
        cfg = dataclasses.replace(cfg, ops=ops, out=cfg.out / cfg.impl)
    finite = math.isfinite
    checks = [(finite(cfg.rel_tol) and 0 < cfg.rel_tol < 1, "--rel-tol must be a finite number in (0, 1)"),
              (1 <= cfg.max_iters <= 10**7, "--max-iters must be in 1..10000000"),
              (finite(cfg.point_time_s) and 0 < cfg.point_time_s <= 86400,
               "--point-time-s must be a finite number in (0, 86400]"),
              (finite(cfg.watchdog_s) and 0 < cfg.watchdog_s <= 7 * 86400,
               "--watchdog-s must be a finite number in (0, 604800]"),
              (0 <= cfg.warmup <= 10**6, "--warmup must be in 0..1000000"),
              (1 <= cfg.graph_ops <= 10**4, "--graph-ops must be in 1..10000"),
              (1 <= cfg.min_bytes <= MAX_FLAG_BYTES, f"--min-bytes must be in 1..{MAX_FLAG_BYTES}"),
              (1 <= cfg.max_bytes <= MAX_FLAG_BYTES, f"--max-bytes must be in 1..{MAX_FLAG_BYTES}"),
              (1 <= cfg.points_per_octave <= 64, "--points-per-octave must be in 1..64")]
    for ok, message in checks:
        if not ok:
            raise InputError(message)
    # a point runs every mode for up to --point-time-s each: a shorter watchdog would kill a healthy run
    longest_point_s = cfg.point_time_s * len(cfg.modes)
    if cfg.watchdog_s <= longest_point_s:
        raise InputError(f"--watchdog-s {cfg.watchdog_s:g} must exceed the longest point: --point-time-s "
                         f"{cfg.point_time_s:g} x {len(cfg.modes)} mode(s) = {longest_point_s:g} s")
    if cfg.out.exists() and not cfg.out.is_dir():  # checked on every rank, before the rendezvous
        raise InputError(f"--out {cfg.out}: exists and is not a directory (collectives.csv and provenance.json "
                         "go into a directory)")
    writable_dir(cfg.out)  # every rank, before the rendezvous: no rank waits for the watchdog over a bad --out
    return cfg


def writable_dir(path: Path) -> None:
    """Refuse (InputError, one line) an output directory that cannot be created or written: the nearest existing
    ancestor must be a writable directory (nothing is created here; rank 0 creates it after the rendezvous)."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise InputError(f"--out {path}: {probe} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise InputError(f"--out {path}: {probe} is not writable")


# --------------------------------------------------------------------------- launch environment
@dataclass(frozen=True)
class Launch:
    """What torchrun put in the environment."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int


def launch_from_env(environ: dict[str, str] | None = None) -> Launch:
    env = os.environ if environ is None else environ
    missing = [k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k not in env]
    if missing:
        raise InputError(f"not launched under torchrun (no {'/'.join(missing)} in the environment); {LAUNCH_HINT}")
    try:
        rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
        local_rank = int(env.get("LOCAL_RANK", rank))
        local_world = int(env.get("LOCAL_WORLD_SIZE", world))
    except ValueError:
        raise InputError("RANK / WORLD_SIZE / LOCAL_RANK in the environment are not integers") from None
    return Launch(rank, world, local_rank, local_world)


def check_backend(cfg: Config, launch: Launch) -> None:
    """Refuse an unusable backend before any rendezvous (InputError, one line)."""
    import torch
    import torch.distributed as dist

    if not dist.is_available():
        raise InputError("this torch build has no torch.distributed support")
    if cfg.backend == "gloo" and not dist.is_gloo_available():
        raise InputError("--backend gloo: this torch build has no gloo support")
    if cfg.backend == "nccl":
        if not torch.cuda.is_available():
            raise InputError("--backend nccl needs CUDA GPUs, but torch.cuda.is_available() is False on this host "
                             "(use --backend gloo for a CPU run)")
        if not dist.is_nccl_available():
            raise InputError("--backend nccl: this torch build has no NCCL support")
        visible = torch.cuda.device_count()
        if visible < launch.local_world_size:
            raise InputError(f"--backend nccl: {launch.local_world_size} ranks on this node but only {visible} "
                             "GPU(s) visible (one GPU per rank)")


# --------------------------------------------------------------------------- watchdog
class Watchdog(threading.Thread):
    """Kills the process (exit 3) when no point completes within `timeout_s`."""

    def __init__(self, timeout_s: float, out_dir: Path, on_fire: Callable[[str], None]):
        super().__init__(name="collectives-watchdog", daemon=True)
        self.timeout_s = timeout_s
        self.out_dir = out_dir
        self.on_fire = on_fire
        self.current = "setup"
        self._last = time.monotonic()
        self._stop = threading.Event()

    def beat(self, current: str | None = None) -> None:
        self._last = time.monotonic()
        if current is not None:
            self.current = current

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        while not self._stop.wait(min(1.0, self.timeout_s / 10)):
            idle = time.monotonic() - self._last
            if idle > self.timeout_s:
                message = (f"error: collective {self.current} stuck for {idle:.0f} s (a rank died or hung); "
                           f"partial results kept in {self.out_dir}")
                try:
                    self.on_fire(message)
                finally:
                    print(message, file=sys.stderr, flush=True)
                    os._exit(EXIT_RUNTIME)


# --------------------------------------------------------------------------- one point
def _pattern_value(group_rank: int) -> int:
    """The value rank r contributes in the correctness check (exact in bf16/fp16/fp32/int64)."""
    return group_rank % 64 + 1


class PointRunner:
    """Buffers and the collective call of one point on one rank of its group."""

    def __init__(self, point: Point, group: Any, group_rank: int, device: Any, use_into_tensor: bool):
        import torch

        self.torch = torch
        self.point, self.group, self.grank, self.device = point, group, group_rank, device
        self.use_into_tensor = use_into_tensor
        dtype = getattr(torch, TORCH_DTYPES[point.dtype])
        n, p = point.numel, point.world_size
        self.inp = torch.zeros(n, dtype=dtype, device=device)
        self.out = None
        self.chunks: list[Any] | None = None
        if point.op == "all_gather" or (point.op == "gather" and group_rank == 0):
            self.out = torch.zeros(p * n, dtype=dtype, device=device)
            self.chunks = list(self.out.view(p, n).unbind(0))

    def call(self) -> None:
        import torch.distributed as dist

        op, g = self.point.op, self.group
        if op == "all_gather":
            if self.use_into_tensor:
                dist.all_gather_into_tensor(self.out, self.inp, group=g)
            else:  # fallback: what an engine without all_gather_into_tensor does
                parts = [self.torch.empty_like(self.inp) for _ in range(self.point.world_size)]
                dist.all_gather(parts, self.inp, group=g)
                self.out = self.torch.cat(parts)
        elif op == "all_reduce":
            reduce = dist.ReduceOp.MAX if self.point.reduce_op == "max" else dist.ReduceOp.SUM
            dist.all_reduce(self.inp, op=reduce, group=g)
        elif op == "gather":
            dist.gather(self.inp, self.chunks if self.grank == 0 else None, dst=0, group=g)
        elif op == "broadcast":
            dist.broadcast(self.inp, src=0, group=g)
        else:
            raise BenchError(f"unknown collective {op!r}")

    def check(self) -> None:
        """Run once on the known per-rank pattern and compare exactly; then reset the buffers for timing.

        Rank r sends v_r = r % 64 + 1 (int64 keys: v_r << 40, exercising the high word). Expected:
        all_gather / gather (root) chunk r == v_r; all_reduce == sum v_r (SUM) or max v_r (MAX);
        broadcast == v_0 everywhere.
        """
        torch, point, p = self.torch, self.point, self.point.world_size
        shift = 40 if point.dtype == "int64" and point.op == "all_reduce" else 0
        values = [_pattern_value(r) << shift for r in range(p)]
        self.inp.fill_(values[self.grank])
        self.call()
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        if point.op in ("all_gather", "gather"):
            if self.out is None:  # gather: only the root receives
                return
            got = self.out
            expect = torch.tensor(values, dtype=got.dtype, device=got.device).repeat_interleave(point.numel)
        elif point.op == "all_reduce":
            got = self.inp
            expect = torch.full_like(got, max(values) if point.reduce_op == "max" else sum(values))
        else:
            got = self.inp
            expect = torch.full_like(got, values[0])
        if not torch.equal(got, expect):
            raise BenchError(f"{point.describe()} returned wrong data on group rank {self.grank} "
                             "(correctness check failed)")
        self.inp.zero_()  # all_reduce SUM on zeros stays finite however many times it runs


# --------------------------------------------------------------------------- symmetric-memory variants
IMPLS = ("nccl", "oneshot", "multimem", "nccl-symm")
SYMM_OPS = ("all_gather", "all_reduce")
_SYMM_NEEDS = {"oneshot": ("one_shot_all_reduce",), "multimem": ("multimem_all_reduce_", "multimem_all_gather_out"),
               "nccl-symm": ()}
NCCL_SYMM_MIN = (2, 27, 0)  # ncclCommWindowRegister / symmetric kernels: NCCL 2.27 (NVIDIA/nccl release notes)


def _nccl_version() -> tuple[int, ...] | None:
    """NCCL's (major, minor, patch) as torch was built / loaded with it, or None where torch cannot say."""
    import torch

    try:
        v = torch.cuda.nccl.version()
    except (AttributeError, RuntimeError):
        return None
    return tuple(v) if isinstance(v, tuple) else (v // 10000, v // 100 % 100, v % 100)


def symm_mem_support(impl: str, backend: str) -> str | None:
    """None when `impl` can be timed here, else the reason (one line) it is skipped.

    Needs the nccl backend (CUDA), torch.distributed._symmetric_memory and the torch.ops.symm_mem operators the
    variant calls; multimem also needs Hopper or newer (NVLS multicast, sm_90+); nccl-symm needs torch's NCCL
    symmetric-memory backend (`_symmetric_memory.set_backend("NCCL")`) and NCCL >= 2.27.
    """
    if impl == "nccl":
        return None
    if backend != "nccl":
        return f"--impl {impl} needs CUDA GPUs and --backend nccl (symmetric memory); gloo / CPU has none"
    import torch

    try:
        import torch.distributed._symmetric_memory  # noqa: F401
    except ImportError as exc:
        return f"--impl {impl}: this torch has no torch.distributed._symmetric_memory ({first_line(exc)})"
    if impl == "nccl-symm":
        symm = torch.distributed._symmetric_memory
        if not hasattr(symm, "set_backend"):
            return f"--impl nccl-symm: this torch has no NCCL symmetric-memory backend (torch {torch.__version__})"
        version = _nccl_version()
        if version is None or version < NCCL_SYMM_MIN:
            found = "unknown" if version is None else ".".join(map(str, version))
            return f"--impl nccl-symm needs NCCL >= 2.27 (window registration); this torch has NCCL {found}"
        return None
    missing = [op for op in _SYMM_NEEDS[impl] if not hasattr(torch.ops.symm_mem, op)]
    if missing:
        return f"--impl {impl}: this torch lacks torch.ops.symm_mem.{missing[0]} (torch {torch.__version__})"
    if impl == "multimem" and torch.cuda.is_available() and torch.cuda.get_device_capability() < (9, 0):
        return "--impl multimem needs NVLS multicast (Hopper sm_90 or newer on NVSwitch)"
    return None


class SymmMemRunner:
    """One point of a symmetric-memory variant (CUDA only; same interface as `PointRunner`).

    oneshot   all_reduce: torch.ops.symm_mem.one_shot_all_reduce(buf, "sum", group) (each rank reads every peer's
              buffer and reduces locally); all_gather: barrier, copy every peer's buffer (handle.get_buffer) into
              the output, barrier - p - 1 peer reads.
    multimem  all_reduce: torch.ops.symm_mem.multimem_all_reduce_(buf, "sum", group); all_gather:
              torch.ops.symm_mem.multimem_all_gather_out(buf, group, out) (NVLS multicast stores).
    nccl-symm dist.all_reduce / dist.all_gather_into_tensor on buffers from symm_mem.empty with the NCCL backend
              (set_backend("NCCL") before the first allocation; rendezvous registers them as NCCL windows,
              ncclCommWindowRegister), so NCCL >= 2.27 runs its symmetric kernels (nccl-tests `-R 2`).
    Points with an all_reduce MAX (the int64 key payloads) are timed as SUM of the same bytes (the symmetric
    kernels reduce floating-point sums); the correctness check then expects the SUM.
    """

    def __init__(self, point: Point, group: Any, group_rank: int, device: Any, impl: str):
        import torch
        import torch.distributed._symmetric_memory as symm_mem

        self.torch, self.point, self.grank, self.impl = torch, point, group_rank, impl
        self.group, self.group_name = group, group.group_name
        if impl == "nccl-symm" and symm_mem.get_backend(device) != "NCCL":
            symm_mem.set_backend("NCCL")  # before the first symmetric allocation (a global setting)
        dtype = getattr(torch, TORCH_DTYPES[point.dtype])
        if point.dtype == "int64":
            dtype = torch.float32  # symmetric all-reduce kernels take floating point; same bytes at 2x numel
        n, p = point.numel * (2 if point.dtype == "int64" else 1), point.world_size
        self.n, self.dtype = n, dtype
        self.inp = symm_mem.empty(n, dtype=dtype, device=device)
        self.inp.zero_()
        self.handle = symm_mem.rendezvous(self.inp, self.group_name)
        self.out = torch.zeros(p * n, dtype=dtype, device=device) if point.op == "all_gather" else None
        if impl == "nccl-symm" and self.out is not None:  # NCCL's symmetric kernels need both buffers registered
            self.out = symm_mem.empty(p * n, dtype=dtype, device=device)
            self.out.zero_()
            symm_mem.rendezvous(self.out, self.group_name)
        self.result = self.inp

    def call(self) -> None:
        ops, p = self.torch.ops.symm_mem, self.point.world_size
        if self.impl == "nccl-symm":
            dist = self.torch.distributed
            if self.point.op == "all_reduce":
                dist.all_reduce(self.inp, group=self.group)
            else:
                dist.all_gather_into_tensor(self.out, self.inp, group=self.group)
            return
        if self.point.op == "all_reduce":
            if self.impl == "oneshot":
                self.result = ops.one_shot_all_reduce(self.inp, "sum", self.group_name)
            else:
                ops.multimem_all_reduce_(self.inp, "sum", self.group_name)
        elif self.impl == "multimem":
            ops.multimem_all_gather_out(self.inp, self.group_name, self.out)
        else:
            self.handle.barrier(channel=0)
            chunks = self.out.view(p, self.n)
            for r in range(p):
                chunks[r].copy_(self.handle.get_buffer(r, (self.n,), self.dtype))
            self.handle.barrier(channel=0)

    def check(self) -> None:
        torch, p = self.torch, self.point.world_size
        values = [_pattern_value(r) for r in range(p)]
        self.inp.fill_(values[self.grank])
        self.torch.cuda.synchronize()
        self.call()
        torch.cuda.synchronize()
        if self.point.op == "all_gather":
            got = self.out
            expect = torch.tensor(values, dtype=self.dtype, device=got.device).repeat_interleave(self.n)
        else:
            got = self.result
            expect = torch.full_like(got, sum(values))
        if not torch.equal(got, expect):
            raise BenchError(f"{self.point.describe()} [{self.impl}] returned wrong data on group rank {self.grank} "
                             "(correctness check failed)")
        self.inp.zero_()


# --------------------------------------------------------------------------- timing
class Sampler:
    """Timed samples of one callable on every group rank, max-reduced over the group."""

    def __init__(self, cfg: Config, group: Any, group_rank: int, device: Any):
        import torch

        self.torch, self.cfg, self.group, self.grank, self.device = torch, cfg, group, group_rank, device
        self.gpu = cfg.device == "cuda"

    def _time_once_us(self, launch: Callable[[], None], calls: int) -> float:
        torch = self.torch
        if self.gpu:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            launch()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1e3 / calls
        t0 = time.perf_counter_ns()
        launch()
        return (time.perf_counter_ns() - t0) / 1e3 / calls

    def samples(self, launch: Callable[[], None], calls: int = 1) -> list[float]:
        """Warm up, barrier, then sample in rounds until converged / --max-iters / --point-time-s (module doc).

        A round times n calls back to back, each on its own (`_time_once_us`), then one all_reduce(MAX) of
        [t_1 .. t_n, elapsed_s] gives every rank the same samples and the slowest rank's elapsed time, so every
        rank takes the same stop decision and the same next n, with no broadcast:

            n = min(to the next check_due count, --max-iters left, max(1, floor(time left / mean sample wall)))

        with a first round of one sample (it gives the first sample wall). Rounds end where check_due is true, so
        the stopping rule is evaluated at the same sample counts as after every sample; the time limit is
        overshot by at most about one sample.
        """
        import torch.distributed as dist

        cfg, torch = self.cfg, self.torch
        for _ in range(cfg.warmup):
            launch()
        if self.gpu:
            torch.cuda.synchronize()
        dist.barrier(group=self.group)
        out: list[float] = []
        t0, n = time.monotonic(), 1
        while True:
            times = [self._time_once_us(launch, calls) for _ in range(n)]
            round_ = torch.tensor([*times, time.monotonic() - t0], dtype=torch.float64, device=self.device)
            dist.all_reduce(round_, op=dist.ReduceOp.MAX, group=self.group)
            *maxima, elapsed_s = round_.tolist()
            out.extend(maxima)
            if (len(out) >= cfg.max_iters or elapsed_s >= cfg.point_time_s
                    or (check_due(len(out), MIN_ITERS) and converged(out, cfg.rel_tol, MIN_ITERS))):
                return out
            n = min(next_check_due(len(out), MIN_ITERS) - len(out), cfg.max_iters - len(out),
                    max(1, math.floor((cfg.point_time_s - elapsed_s) * len(out) / elapsed_s)) if elapsed_s > 0
                    else cfg.max_iters)


def _graph_launcher(runner: PointRunner, calls: int) -> Callable[[], None]:
    """Capture `calls` collective calls in one CUDA graph; returns its replay."""
    import torch

    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                runner.call()
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                runner.call()
        torch.cuda.synchronize()
    except RuntimeError as exc:
        raise BenchError(f"CUDA-graph capture of {runner.point.describe()} failed ({first_line(exc)}); "
                         "rerun with --modes eager") from None
    return graph.replay


# --------------------------------------------------------------------------- output files
def prepare_csv(path: Path, resume: bool) -> set[tuple[str, ...]]:
    """Keys already measured (resume), after checking the header (`existing_keys` drops a torn last line)."""
    if not path.exists() or path.stat().st_size == 0:
        return set()
    if not resume:
        raise InputError(f"{path} already holds results; pass --resume to continue it or choose another --out")
    expected = list(MEASUREMENT_COLUMNS) + list(EXTRA_COLUMNS)
    with open(path, newline="") as fh:
        header = fh.readline().strip().split(",")
    if header != expected:
        raise InputError(f"{path}: header does not match this benchmark's columns; cannot --resume it")
    return existing_keys(path)  # drops a torn last line first


def _row(cfg: Config, gpu: str, point: Point, mode: str, nodes: int, stats: Stats | None = None) -> dict[str, Any]:
    label = point.label if cfg.impl == "nccl" else f"{cfg.impl}:{point.label}"
    row: dict[str, Any] = {"op": point.op, "backend": cfg.backend, "device": cfg.device, "gpu": gpu,
                           "dtype": point.dtype, "mode": mode, "world_size": point.world_size, "nodes": nodes,
                           "bytes_per_rank": point.bytes_per_rank, "rows": 0, "cols": 0, "label": label}
    if stats is not None:
        row.update({k: (round(v, 3) if isinstance(v, float) else v) for k, v in stats.as_row().items()})
    return row


# --------------------------------------------------------------------------- the run
class PointFailed(RuntimeError):
    """A collective raised while measuring `where` (typically: a peer rank died)."""

    def __init__(self, where: str, cause: BaseException):
        super().__init__(f"collective {where} failed: {first_line(cause)}")
        self.where, self.cause = where, cause


SILENT_RANKS_WAIT_S = 3.0  # how long a failed rank waits for the other survivors to report
# an input error: how long the ranks that do not print it wait before exiting (torchrun stops every rank when the
# first one exits, which could kill the reporting rank before it prints)
QUIET_RANK_LINGER_S = 3.0


def silent_ranks(rank: int, world_size: int, wait_s: float = SILENT_RANKS_WAIT_S) -> list[int] | None:
    """After a failed collective: the ranks that did not report within `wait_s` - the dead or hung ones.

    Every rank that catches the failure sets the key `argmax-tp/failed/<rank>` in the process group's store (the
    TCP store of torchrun's agent or of rank 0, which outlives a crashed peer) and waits for the others' keys; a rank
    that died never sets one. None when the store cannot answer (its host is the rank that died)."""
    import torch.distributed as dist

    try:
        store = dist.distributed_c10d._get_default_store()
        store.set_timeout(timedelta(seconds=wait_s))
        store.set(f"argmax-tp/failed/{rank}", "1")
        deadline = time.monotonic() + wait_s
        missing = [r for r in range(world_size) if r != rank]
        while missing and time.monotonic() < deadline:
            missing = [r for r in missing if not store.check([f"argmax-tp/failed/{r}"])]
            if missing:
                time.sleep(0.1)
        return missing
    except Exception:  # noqa: BLE001 - the store's host is gone too: nothing more to learn
        return None


def _nodes_spanned(ranks_info: list[dict[str, Any]], p: int) -> int:
    """Nodes that ranks [0, p) live on (torchrun's GROUP_RANK plus the host name)."""
    return len({(info["hostname"], info["node_rank"]) for info in ranks_info[:p]})


def _measure_point(cfg: Config, point: Point, modes: list[str], group: Any, rank: int, device: Any, gpu: str,
                   nodes: int, use_into_tensor: bool, writer: RowWriter | None) -> bool:
    """Check, then time `point` in each mode on this group member; rank 0 writes the rows.

    Returns whether all_gather_into_tensor is usable (False once it raised "not supported").
    """
    if cfg.impl != "nccl":
        runner = SymmMemRunner(point, group, rank, device, cfg.impl)
        runner.check()
        sampler = Sampler(cfg, group, rank, device)
        for mode in modes:
            samples = (sampler.samples(_graph_launcher(runner, cfg.graph_ops), calls=cfg.graph_ops)
                       if mode == "graph" else sampler.samples(runner.call))
            if writer is not None:
                writer.write(_row(cfg, gpu, point, mode, nodes, Stats.from_samples(samples)))
        return use_into_tensor
    runner = PointRunner(point, group, rank, device, use_into_tensor)
    try:
        runner.check()
    except (NotImplementedError, AttributeError, RuntimeError) as exc:
        unsupported = isinstance(exc, NotImplementedError | AttributeError) or "support" in str(exc).lower()
        if not (point.op == "all_gather" and use_into_tensor and unsupported):
            raise
        use_into_tensor = False
        runner = PointRunner(point, group, rank, device, use_into_tensor)
        runner.check()
    sampler = Sampler(cfg, group, rank, device)
    for mode in modes:
        if mode == "graph":
            samples = sampler.samples(_graph_launcher(runner, cfg.graph_ops), calls=cfg.graph_ops)
        else:
            samples = sampler.samples(runner.call)
        if writer is not None:
            writer.write(_row(cfg, gpu, point, mode, nodes, Stats.from_samples(samples)))
    return use_into_tensor


def _provenance(cfg: Config, info: dict[str, Any], world_sizes: list[int], planned: int, dropped: int,
                path: Path) -> ProvenanceFile:
    info["config"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in cfg.__dict__.items()}
    info["world_sizes"] = world_sizes
    info["points_planned"] = planned
    info["payload_points_dropped_above_max_bytes"] = dropped
    info["timing"] = ("one sample = max over the group's ranks of one call's time (CUDA events / "
                      "perf_counter_ns; graph mode: replay time / graph_ops); median / p10 / p90 over samples")
    info["dtype_convention"] = ("fp32: sweep buffers (all_reduce SUM) and (value, id) pairs; bf16: logits "
                                "payloads; int64: broadcast ids and all_reduce MAX keys")
    return ProvenanceFile(path, with_previous_runs(path, info))


def run(cfg: Config, launch: Launch, argv: Sequence[str]) -> int:
    """Rendezvous, measure every planned point, write rows and provenance (see module doc)."""
    import torch
    import torch.distributed as dist
    from tqdm import tqdm

    warnings.filterwarnings("ignore", message=".*all_gather_into_tensor.*", category=FutureWarning)
    # every rank computes the same plan before the rendezvous, so bad flags fail fast everywhere
    world_sizes = tp_sizes(launch.world_size, cfg.world_sizes)
    points, dropped = plan_points(world_sizes, min_bytes=cfg.min_bytes, max_bytes=cfg.max_bytes,
                                  points_per_octave=cfg.points_per_octave, preset_names=cfg.presets,
                                  batches=cfg.batches, payload_dtype=cfg.payload_dtype, ops=cfg.ops)
    if cfg.device == "cuda":
        torch.cuda.set_device(launch.local_rank)
        device = torch.device("cuda", launch.local_rank)
        dist.init_process_group("nccl", timeout=timedelta(seconds=max(60.0, 2 * cfg.watchdog_s)), device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", timeout=timedelta(seconds=max(60.0, 2 * cfg.watchdog_s)))
    rank = dist.get_rank()
    csv_path, prov_path = cfg.out / CSV_NAME, cfg.out / PROVENANCE_NAME

    # rank 0 owns the output directory and tells every rank what is already measured
    status: list[Any] = [None, set()]
    if rank == 0:
        try:
            status[1] = prepare_csv(csv_path, cfg.resume)
        except InputError as exc:
            status[0] = str(exc)
    dist.broadcast_object_list(status, src=0)
    if status[0]:
        if rank != 0:  # rank 0 reports it and exits first; torchrun's SIGTERM then ends this rank quietly, exit 2
            signal.signal(signal.SIGTERM, _exit_input)
        dist.destroy_process_group()
        raise InputError(status[0])
    done: set[tuple[str, ...]] = status[1]
    info = collect_provenance(["-m", "calibration.collectives", *argv], cfg.backend, cfg.device,
                              start_time=cfg.start_time, notes=cfg.notes)
    gpu = torch.cuda.get_device_name(device) if cfg.device == "cuda" else "cpu"
    prov = _provenance(cfg, info, world_sizes, len(points), dropped, prov_path) if rank == 0 else None
    try:
        todo = []
        for point in points:
            nodes = _nodes_spanned(info["ranks"], point.world_size)
            modes = [m for m in cfg.modes if point_key(_row(cfg, gpu, point, m, nodes)) not in done]
            if modes:
                todo.append((point, modes, nodes))

        def on_fire(message: str) -> None:
            if prov is not None:
                prov.finish("failed: " + message.removeprefix("error: "))

        watchdog = Watchdog(cfg.watchdog_s, cfg.out, on_fire)
        watchdog.start()
        die_after = int(os.environ.get(DIE_ENV, "0") or 0)
        writer = RowWriter(csv_path, extra_columns=EXTRA_COLUMNS) if rank == 0 else None
        bar = tqdm(total=len(todo), disable=(rank != 0 or not cfg.progress), file=sys.stderr,
                   desc="collectives", unit="point", dynamic_ncols=True)
        use_into_tensor = hasattr(dist, "all_gather_into_tensor")
        groups: dict[int, Any] = {}
        for count, (point, modes, nodes) in enumerate(todo, start=1):
            where = point.describe()
            watchdog.beat(where)
            bar.set_postfix_str(where, refresh=False)
            try:
                if point.world_size not in groups:
                    groups[point.world_size] = dist.new_group(ranks=list(range(point.world_size)))
                if rank < point.world_size:
                    use_into_tensor = _measure_point(cfg, point, modes, groups[point.world_size], rank, device, gpu,
                                                     nodes, use_into_tensor, writer)
                dist.barrier()  # ranks outside the sub-group wait here
            except (BenchError, Terminated, KeyboardInterrupt):
                raise
            except Exception as exc:
                raise PointFailed(where, exc) from exc
            watchdog.beat()
            bar.update(1)
            if rank == 1 and die_after and count >= die_after:
                os._exit(137)  # test hook: a crashed rank
        bar.close()
        watchdog.stop()
        if writer is not None:
            writer.close()
        if prov is not None:
            prov.update(all_gather_impl="all_gather_into_tensor" if use_into_tensor else "all_gather(list)+cat",
                        points_measured=len(todo))
            prov.finish("ok")
        dist.barrier()
        dist.destroy_process_group()
        if rank == 0:  # one summary line: what was measured, what was already there, where it went
            print(f"done: {len(todo)} point(s) measured x {len(cfg.modes)} mode(s), {len(points) - len(todo)} already "
                  f"in the file (--resume); world sizes {', '.join(map(str, world_sizes))}; rows in {csv_path}",
                  file=sys.stderr, flush=True)
        return 0
    except BaseException as exc:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # already failing: finish the record, then exit
        if prov is not None:
            prov.finish(end_status(exc))
        raise


def end_status(exc: BaseException) -> str:
    """The provenance status of a run that `exc` ended: "interrupted" for the user's Ctrl-C (SIGINT reaches every
    rank of the foreground job), else "failed: ...". SIGTERM is a failure: torchrun sends it to the surviving
    ranks when one dies (on NCCL they hang in the collective the dead rank never joins, so it reaches them before
    any error), and a scheduler cancelling the job sends it too; the rows measured so far stay either way."""
    if isinstance(exc, Terminated):
        name = str(exc) or "SIGTERM"
        return f"failed: stopped by {name} (torchrun stops every rank when one fails; a cancelled job too)"
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    return f"failed: {first_line(exc)}"


def _on_signal(signum: int, _frame: Any) -> None:
    raise Terminated(signal.Signals(signum).name)


def _exit_input(_signum: int, _frame: Any) -> None:
    """SIGTERM to a rank that is exiting on an input error another rank reported: exit 2 at once, no traceback
    (`Terminated` raised there escaped `main` as the project's own traceback, exit 1: issue 43)."""
    os._exit(EXIT_INPUT)


TORCHRUN_NOTE = ("note: torchrun's ChildFailedError report that follows only restates the exit code {code} "
                 "(2: bad input, 3: failed run) of the line above; the error: line is the cause")


def _torchrun_note(code: int) -> None:
    """One line explaining torchrun's own ChildFailedError traceback (printed by torchrun after every non-zero rank
    exit, outside this process: it cannot be suppressed from here); only when torchrun launched this rank."""
    if os.environ.get("TORCHELASTIC_RUN_ID"):
        print(TORCHRUN_NOTE.format(code=code), file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the exit code (0 ok, 2 bad input, 3 failed run)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    launch: Launch | None = None
    out = "the output directory"
    rendezvous = False
    try:
        cfg = parse_config(argv)
        out = str(cfg.out)
        skip = symm_mem_support(cfg.impl, cfg.backend)
        if skip is not None:  # the same on every rank, before any rendezvous
            if os.environ.get("LOCAL_RANK", "0") == "0":
                print(f"note: {skip}; nothing measured (the model keeps the derived {cfg.impl} parameters, "
                      "costmodel/model/collective_impls.py)", file=sys.stderr, flush=True)
            return 0
        launch = launch_from_env()
        tp_sizes(launch.world_size, cfg.world_sizes)
        check_backend(cfg, launch)
        signal.signal(signal.SIGTERM, _on_signal)
        rendezvous = True
        return run(cfg, launch, argv)
    except InputError as exc:
        # the same on every rank: printed once per node before the rendezvous, by rank 0 after it
        first = os.environ.get("LOCAL_RANK", "0") == "0" if launch is None else \
            (launch.rank == 0 if rendezvous else launch.local_rank == 0)
        if first:
            print(f"error: {exc}", file=sys.stderr, flush=True)
            _torchrun_note(EXIT_INPUT)
        else:  # torchrun SIGTERMs every rank once one exits non-zero: let the reporting rank exit first
            signal.signal(signal.SIGTERM, _exit_input)  # that SIGTERM: exit 2 quietly, not a Terminated traceback
            time.sleep(QUIET_RANK_LINGER_S)
        return EXIT_INPUT
    except PointFailed as exc:
        silent = silent_ranks(launch.rank, launch.world_size)
        who = (f"rank(s) {', '.join(map(str, silent))} died or hung (no report after {SILENT_RANKS_WAIT_S:g} s)"
               if silent else "a peer rank died or hung?")
        print(f"error: {exc} on rank {launch.rank} ({who}); partial results kept in {out}",
              file=sys.stderr, flush=True)
    except BenchError as exc:
        print(f"error: {exc}; partial results kept in {out}", file=sys.stderr, flush=True)
    except KeyboardInterrupt:  # Ctrl-C: every rank gets SIGINT; rank 0 (or each node's first) says it once
        if launch is None or launch.rank == 0:
            from calibration.logs.provenance import count_rows

            rows = count_rows(Path(out) / CSV_NAME) if out != "the output directory" else 0
            print(f"error: interrupted; {rows} rows kept, resume with --resume", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except Terminated as exc:
        name = str(exc) or "SIGTERM"
        print(f"error: rank {launch.rank if launch else '?'} stopped by {name} (torchrun stops every rank when one "
              f"fails); partial results kept in {out}", file=sys.stderr, flush=True)
    except Exception as exc:  # rendezvous failures and the like
        print(f"error: {type(exc).__name__}: {first_line(exc)}; partial results kept in {out}",
              file=sys.stderr, flush=True)
    if launch is None or launch.rank == 0:
        _torchrun_note(EXIT_RUNTIME)
    return EXIT_RUNTIME


def cli() -> None:
    """Run `main` and exit with its code; a runtime failure or interrupt exits hard (`os._exit`)."""
    code = main()
    if code in (EXIT_RUNTIME, EXIT_INTERRUPTED):
        os._exit(code)  # a broken process group can block interpreter shutdown
    sys.exit(code)


if __name__ == "__main__":
    cli()
