"""Where a calibration ran: hosts, GPUs, driver / CUDA / NCCL / torch versions, NCCL_* env, command line.

`collect_provenance(argv, backend, device)` works for any benchmark (collective
or kernel): under an initialized torch.distributed process group it gathers
every rank's host, device and NCCL_* environment with all_gather_object (a
collective - call it on every rank); without one it describes this process.
`ProvenanceFile` writes the JSON atomically and rewrites `end_time` /
`status` when the run ends, also on failure. `with_previous_runs` keeps what
an earlier run (this tool's or another's, in the same folder) recorded.

torch is imported inside the functions only, so importing this module is cheap.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shlex
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from costmodel.io.safe_io import loads_json, read_bytes

NVIDIA_SMI_TIMEOUT_S = 10
MAX_PROVENANCE_BYTES = 16 * 2**20
EXIT_INTERRUPTED = 130  # SIGINT (Ctrl-C); SIGTERM exits 143 = 128 + 15


def now_iso() -> str:
    """UTC wall-clock time, ISO 8601 with seconds."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def _run(cmd: list[str]) -> str | None:
    """stdout of a command, or None when it is missing or fails (nvidia-smi on a CPU host)."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def nccl_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Every NCCL_* variable (and TORCH_NCCL_*), sorted by name."""
    env = os.environ if environ is None else environ
    return {k: env[k] for k in sorted(env) if k.startswith(("NCCL_", "TORCH_NCCL_"))}


def local_info(device: str) -> dict[str, Any]:
    """This process: host, CPU count, torchrun ranks, GPU count / name / driver."""
    import torch

    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        "rank": int(os.environ.get("RANK", 0)),
        "local_rank": int(os.environ.get("LOCAL_RANK", 0)),
        "local_world_size": int(os.environ.get("LOCAL_WORLD_SIZE", 1)),
        "node_rank": int(os.environ.get("GROUP_RANK", os.environ.get("NODE_RANK", 0))),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "torch_threads": torch.get_num_threads(),
        "nccl_env": nccl_env(),
    }
    if device == "cuda" and torch.cuda.is_available():
        idx = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(idx)
        info.update(cuda_device=idx, gpu=torch.cuda.get_device_name(idx), gpus_on_host=torch.cuda.device_count(),
                    gpu_memory_bytes=int(props.total_memory), sm_count=int(props.multi_processor_count),
                    compute_capability=f"{props.major}.{props.minor}")
        if info["local_rank"] == 0:  # once per node
            info["nvidia_smi_topo"] = _run(["nvidia-smi", "topo", "-m"])
            driver = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
            info["driver"] = driver.splitlines()[0].strip() if driver else None
    else:
        info.update(gpu="cpu", gpus_on_host=0)
    return info


def software_versions(device: str) -> dict[str, Any]:
    """torch, CUDA, NCCL (torch.cuda.nccl.version()), Python (the driver comes from nvidia-smi per node)."""
    import torch

    out: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                           "cuda": torch.version.cuda, "nccl": None, "platform": platform.platform()}
    if device == "cuda" and torch.cuda.is_available():
        try:
            version = torch.cuda.nccl.version()
            out["nccl"] = ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)
        except (AttributeError, RuntimeError):
            out["nccl"] = None
    return out


def parent_command() -> str | None:
    """Command line of the launching process (torchrun / srun), read from /proc where available."""
    try:
        raw = Path(f"/proc/{os.getppid()}/cmdline").read_bytes()
    except OSError:
        return None
    return shlex.join(part.decode(errors="replace") for part in raw.split(b"\0") if part) or None


def launcher_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """torchrun / SLURM variables that describe the launch."""
    env = os.environ if environ is None else environ
    keys = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID",
            "TORCHELASTIC_RESTART_COUNT", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES")
    out = {k: env[k] for k in keys if k in env}
    out.update({k: env[k] for k in sorted(env) if k.startswith("SLURM_") and k in (
        "SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_NNODES", "SLURM_NTASKS", "SLURM_JOB_PARTITION")})
    return out


def _gather(obj: Any) -> list[Any]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        out: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(out, obj)
        return out
    return [obj]


def collect_provenance(argv: list[str], backend: str, device: str, *, start_time: str | None = None,
                       notes: Sequence[str] = ()) -> dict[str, Any]:
    """Provenance of a run (a collective over all ranks when a process group is initialized).

    `notes` are free-text remarks (e.g. "shared machine"); an oversubscribed host
    (more ranks than CPU cores) is noted automatically.
    """
    ranks = _gather(local_info(device))
    hosts: dict[str, dict[str, Any]] = {}
    for info in ranks:
        host = hosts.setdefault(info["hostname"], {"ranks": [], "gpus_on_host": info["gpus_on_host"],
                                                   "cpu_count": info["cpu_count"],
                                                   "local_world_size": info["local_world_size"]})
        host["ranks"].append(info["rank"])
        for key in ("nvidia_smi_topo", "driver"):
            if info.get(key):
                host[key] = info.pop(key)
    gpus = sorted({info["gpu"] for info in ranks})
    envs = {json.dumps(info["nccl_env"], sort_keys=True) for info in ranks}
    notes = list(notes)
    for name, host in hosts.items():
        if host["cpu_count"] and len(host["ranks"]) > host["cpu_count"]:
            notes.append(f"{name}: {len(host['ranks'])} ranks on {host['cpu_count']} CPU cores (oversubscribed)")
    topo = next((host.get("nvidia_smi_topo") for host in hosts.values() if host.get("nvidia_smi_topo")), None)
    return {
        "kind": "calibration-provenance",
        "command": shlex.join([os.path.basename(sys.executable)] + list(argv)),
        "argv": list(argv),
        "launcher_command": parent_command(),
        "launcher_env": launcher_env(),
        "cwd": os.getcwd(),
        "backend": backend,
        "device": device,
        "world_size": len(ranks),
        "nodes": len(hosts),
        "hostnames": [info["hostname"] for info in ranks],
        "hosts": hosts,
        "gpus_per_node": {name: host["gpus_on_host"] for name, host in hosts.items()},
        "gpu": " / ".join(gpus),
        "software": {**software_versions(device),
                     "driver": next((h["driver"] for h in hosts.values() if h.get("driver")), None)},
        "nccl_env": ranks[0]["nccl_env"],
        "nccl_env_differs_across_ranks": len(envs) > 1,
        "nvidia_smi_topo": topo,  # of the first node; every node's is under hosts
        "ranks": ranks,
        "notes": notes,
        "start_time": start_time or now_iso(),
        "end_time": None,
        "status": "running",
    }


def with_previous_runs(path: str | Path, data: dict[str, Any]) -> dict[str, Any]:
    """`data` plus "previous_runs": the earlier records found in `path`, oldest first.

    previous_runs = (old["previous_runs"] of the file at `path`) + [the file without it]. A missing
    file adds nothing; an unreadable one, or JSON that is not an object, is recorded as {"unreadable": path}.
    """
    path = Path(path)
    if not path.exists():
        return dict(data)
    try:
        old: Any = loads_json(read_bytes(path, limit_bytes=MAX_PROVENANCE_BYTES), str(path))
    except (OSError, ValueError):  # InputError and UnicodeDecodeError are ValueErrors
        old = None
    if not isinstance(old, dict):
        return {**data, "previous_runs": [{"unreadable": str(path)}]}
    earlier = old.pop("previous_runs", [])
    earlier = list(earlier) if isinstance(earlier, list) else [earlier]
    return {**data, "previous_runs": earlier + [old]}


class ProvenanceFile:
    """provenance.json kept up to date: written at start, `end_time` rewritten by `finish`."""

    def __init__(self, path: str | Path, data: dict[str, Any]):
        self.path = Path(path)
        self.data = data
        self.write()

    def update(self, **fields: Any) -> None:
        self.data.update(fields)
        self.write()

    def finish(self, status: str) -> None:
        """Record the end time and the outcome ("ok" or "failed: ...")."""
        self.update(end_time=now_iso(), status=status)

    def write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as fh:
            json.dump(self.data, fh, indent=2, sort_keys=False, default=str)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM during a benchmark; `exit_code` is 130 (SIGINT) or 143 (SIGTERM)."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signal.Signals(signum).name)
        self.exit_code = 128 + int(signum)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Turn SIGTERM (and SIGINT) into `Interrupted` inside the block, so a benchmark's `finally` marks its
    provenance "interrupted" and the rows flushed so far stay (results.RowWriter fsyncs each row).
    Outside the main thread (no signal handlers there) the block runs unchanged."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: Any) -> None:
        raise Interrupted(signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def interrupted_exit(exc: BaseException, rows_kept: int) -> int:
    """Print the one-line interruption message and return the exit code (130 Ctrl-C, 143 SIGTERM)."""
    print(f"error: interrupted; {rows_kept} rows kept, resume with --resume", file=sys.stderr)
    return getattr(exc, "exit_code", EXIT_INTERRUPTED)


def count_rows(path: str | Path) -> int:
    """Complete data rows in a measurement CSV (0 when it is missing)."""
    try:
        with open(path, "rb") as fh:
            lines = sum(1 for line in fh if line.endswith(b"\n"))
    except OSError:
        return 0
    return max(lines - 1, 0)
