#!/usr/bin/env bash
# Fused Triton kernels (calibration/triton_kernels.py) on one CUDA GPU: native tests, then fused vs torch timings.
#
#   OUT=/some/dir bash scripts/gpu_triton.sh
#
# Environment: PYTHON (default python3; needs a CUDA torch, triton, pytest, numpy, pandas), TEST_TIMEOUT_S (300),
# BENCH_BUDGET_S (300: no new point starts after it), DTYPES (bf16,fp32: bf16 measured first), QUICK=1 (a small
# grid: rows 1,64,2048 x vocab 32000,262208 x TP 2,8). Installs nothing.
#
# Writes to $OUT:
#   triton_tests.log       pytest -q tests/test_triton_kernels.py run natively on the GPU
#   triton_kernels.csv     measurement schema (costmodel/schema.py), one row per (op, dtype, mode, rows, cols, p),
#                          flushed as measured: local_argmax, key_pack (cols = vocab shard s, world_size 1),
#                          pair_reduce (cols 0, world_size p, fp32 pairs), key_unpack (cols 0, int64 keys),
#                          each as the torch ops of calibration.reference and as <op>_fused (Triton)
#   triton_bandwidth.csv   large shapes (>= 32 MiB of logits): bytes / time of the local ops next to a torch copy
#                          of the same bytes (copy GB/s counts read + write), and their ratio
#   triton_batch1.csv      per-call time at rows = 1: fused vs torch, per op / dtype / mode / cols / p
#   triton_env.json, nvidia-smi.txt, triton_errors.txt (only when a point failed)
# Grid: rows 1..2048 (powers of 2) x vocab 32000, 128256, 151936, 202048, 262208 (padded to 64) x TP 2, 4, 8
# (shard s = V_pad / p) x graph (N calls captured in one CUDA graph, CUDA events around replays) and eager
# (CUDA events around N back-to-back calls); inputs rotate over buffers of >= 128 MiB in all so the 50 MB L2
# does not flatter. Every point is checked against the torch op before it is timed.
# Expected duration on an H200: tests ~2-4 min (Triton compiles), benchmark <= BENCH_BUDGET_S + ~30 s.
# Exit status: 0 all good; 1 a test failed, a fused result differed from torch, or a point errored; 2 unusable setup.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:?set OUT to the output folder}"
PY="${PYTHON:-python3}"
mkdir -p "$OUT"

if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "error: $PY has no CUDA-enabled torch (torch.cuda.is_available() is False)" >&2
    exit 2
fi
if ! "$PY" -c 'import triton' 2>/dev/null; then
    echo "error: $PY cannot import triton (pip install triton==3.9.0)" >&2
    exit 2
fi
if [ "${TRITON_INTERPRET:-0}" = "1" ]; then
    echo "error: TRITON_INTERPRET=1 is set; unset it to run the kernels natively" >&2
    exit 2
fi
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true

status=0
echo "== tests (native) =="
if "$PY" -m pytest --version > /dev/null 2>&1; then
    timeout "${TEST_TIMEOUT_S:-300}" "$PY" -m pytest -q -p no:cacheprovider tests/test_triton_kernels.py 2>&1 \
        | tee "$OUT/triton_tests.log"
    test_rc=${PIPESTATUS[0]}
    if [ "$test_rc" -ne 0 ]; then
        echo "error: tests/test_triton_kernels.py failed natively (exit $test_rc); see $OUT/triton_tests.log" >&2
        status=1
    fi
else
    echo "warning: pytest is missing in $PY; skipping the tests (the benchmark still checks every point)" \
        | tee "$OUT/triton_tests.log" >&2
fi

echo "== benchmark =="
"$PY" - "$OUT" <<'PY'
"""Fused Triton kernels vs the torch ops of calibration.reference (see scripts/gpu_triton.sh)."""
import csv
import json
import math
import os
import sys
import time
from pathlib import Path

import torch
import triton

sys.path.insert(0, os.getcwd())
import calibration.triton_kernels as tk  # noqa: E402
from calibration import reference as ref  # noqa: E402
from calibration.results import RowWriter  # noqa: E402
from calibration.timing import Stats, converged  # noqa: E402
from costmodel.kernels import kernel_bytes  # noqa: E402

OUT = Path(sys.argv[1])
BUDGET_S = float(os.environ.get("BENCH_BUDGET_S", "300"))
QUICK = os.environ.get("QUICK", "0") == "1"
DTYPES = tuple(d.strip() for d in os.environ.get("DTYPES", "bf16,fp32").split(",") if d.strip())
ROWS = (1, 64, 2048) if QUICK else tuple(2**k for k in range(12))
VOCABS = (32000, 262208) if QUICK else (32000, 128256, 151936, 202048, 262208)
TPS = (2, 8) if QUICK else (2, 4, 8)
MODES = ("graph", "eager")
ROTATE_BYTES = 128 << 20
MAX_BUFFERS = 32
BW_MIN_BYTES = 32 << 20
POINT_SECONDS = 0.25
TORCH_DT = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
ELEM = {"bf16": 2, "fp16": 2, "fp32": 4}

bad = [d for d in DTYPES if d not in TORCH_DT]
if bad or tk.INTERPRETED:
    print(f"error: DTYPES must be a subset of bf16,fp16,fp32 (got {bad})" if bad
          else "error: the kernels were built for the interpreter; unset TRITON_INTERPRET", file=sys.stderr)
    sys.exit(2)

dev = torch.device("cuda")
GPU = torch.cuda.get_device_name(dev)
props = torch.cuda.get_device_properties(dev)
(OUT / "triton_env.json").write_text(json.dumps({
    "gpu": GPU, "sm_count": props.multi_processor_count, "total_memory_bytes": props.total_memory,
    "torch": torch.__version__, "cuda": torch.version.cuda, "triton": triton.__version__,
    "budget_s": BUDGET_S, "quick": QUICK, "dtypes": DTYPES, "rows": ROWS, "vocabs": VOCABS, "tp": TPS,
    "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
}, indent=2) + "\n")

START = time.perf_counter()
errors: list[str] = []
mismatches: list[str] = []
results: dict[tuple, float] = {}  # (op, dtype, mode, rows, cols, p) -> median_us


def out_of_time() -> bool:
    return time.perf_counter() - START > BUDGET_S


def note_error(what: str, exc: BaseException) -> None:
    line = f"{what}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    errors.append(line)
    print("error:", line, file=sys.stderr)
    with open(OUT / "triton_errors.txt", "a") as fh:
        fh.write(line + "\n")


def n_buffers(nbytes: int) -> int:
    return int(min(MAX_BUFFERS, max(2, math.ceil(ROTATE_BYTES / max(nbytes, 1)))))


def time_op(call, inputs: list, mode: str) -> Stats:
    """Per-call us: CUDA events around one graph replay of n calls (graph) or n eager calls, inputs rotated."""
    k = len(inputs)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up (and Triton compile) off the default stream, required before capture
        for i in range(3):
            call(inputs[i % k])
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(3):
        call(inputs[i % k])
    torch.cuda.synchronize()
    est_us = max((time.perf_counter() - t0) / 3 * 1e6, 1.0)
    n = int(min(64, max(2, math.ceil(1000.0 / est_us))))
    n = max(n, k) if k * est_us < 20000 else n
    graph = None
    if mode == "graph":
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for i in range(n):
                call(inputs[i % k])
        run = graph.replay
    else:
        def run():
            for i in range(n):
                call(inputs[i % k])
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    run()
    torch.cuda.synchronize()
    samples: list[float] = []
    began = time.perf_counter()
    while len(samples) < 200:
        start.record()
        run()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / n)
        if len(samples) >= 10 and converged(samples, 0.02, 10):
            break
        if len(samples) >= 5 and time.perf_counter() - began > POINT_SECONDS:
            break
    del graph
    return Stats.from_samples(samples)


writer = RowWriter(OUT / "triton_kernels.csv")


def record(op: str, dtype: str, mode: str, rows: int, cols: int, p: int, stats: Stats) -> None:
    writer.write({"op": op, "backend": "none", "device": "cuda", "gpu": GPU, "dtype": dtype, "mode": mode,
                  "world_size": p, "nodes": 1, "bytes_per_rank": 0, "rows": rows, "cols": cols, **stats.as_row()})
    results[(op, dtype, mode, rows, cols, p)] = stats.median_us


def measure(ops: dict, inputs: list, dtype: str, rows: int, cols: int, p: int, skip: set) -> None:
    for mode in MODES:
        for op, call in ops.items():
            if op in skip:
                continue
            try:
                record(op, dtype, mode, rows, cols, p, time_op(call, inputs, mode))
            except Exception as exc:  # noqa: BLE001 - keep measuring the other points
                note_error(f"{op} {dtype} {mode} rows={rows} cols={cols} p={p}", exc)
                torch.cuda.synchronize()


def shards() -> list[tuple[int, int]]:
    """(shard s, vocab V) for every V and p, de-duplicated by s, ascending."""
    out = {}
    for v in VOCABS:
        v_pad = -(-v // 64) * 64
        for p in TPS:
            out.setdefault(v_pad // p, v)
    return sorted(out.items())


bw_rows: list[dict] = []


def local_point(dtype: str, rows: int, shard: int, vocab: int) -> None:
    tdt, e = TORCH_DT[dtype], ELEM[dtype]
    nbytes = rows * shard * e
    k = n_buffers(nbytes)
    gen = torch.Generator(device=dev).manual_seed(rows * 7919 + shard)
    inputs = [torch.randn(rows, shard, generator=gen, device=dev).to(tdt) for _ in range(k)]
    ops = {
        "local_argmax": lambda x: ref.local_argmax_pack(x, 0, shard, vocab),
        "local_argmax_fused": lambda x: tk.fused_local_argmax_pairs(x, 0, shard, vocab),
        "key_pack": lambda x: ref.key_pack(x, 0, shard, vocab),
        "key_pack_fused": lambda x: tk.fused_key_pack(x, 0, shard, vocab),
    }
    skip = set()
    x = inputs[0]
    try:
        want, got = ops["local_argmax"](x), ops["local_argmax_fused"](x)
        if not (torch.equal(want[:, 1], got[:, 1]) and torch.equal(want[:, 0], got[:, 0])):
            skip.add("local_argmax_fused")
        if not torch.equal(ops["key_pack"](x), ops["key_pack_fused"](x)):
            skip.add("key_pack_fused")
    except Exception as exc:  # noqa: BLE001
        note_error(f"check local ops {dtype} rows={rows} cols={shard}", exc)
        skip |= {"local_argmax_fused", "key_pack_fused"}
    for op in sorted(skip):
        mismatches.append(f"{op} {dtype} rows={rows} cols={shard}")
        print(f"MISMATCH: {op} {dtype} rows={rows} cols={shard} differs from torch; not timed", file=sys.stderr)
    measure(ops, inputs, dtype, rows, shard, 1, skip)
    if nbytes >= BW_MIN_BYTES:
        dst = torch.empty_like(inputs[0])
        try:
            copy = time_op(lambda x: dst.copy_(x), inputs, "graph")
            copy_gbps = 2 * nbytes / copy.median_us * 1e-3
            for op in ops:
                t = results.get((op, dtype, "graph", rows, shard, 1))
                if t is None:
                    continue
                moved = float(kernel_bytes(op, rows, shard, 1, e))
                gbps = moved / t * 1e-3
                bw_rows.append({"op": op, "dtype": dtype, "rows": rows, "cols": shard, "bytes": int(moved),
                                "median_us": round(t, 3), "achieved_gbps": round(gbps, 1),
                                "copy_bytes": 2 * nbytes, "copy_median_us": round(copy.median_us, 3),
                                "copy_gbps": round(copy_gbps, 1), "fraction_of_copy": round(gbps / copy_gbps, 3)})
        except Exception as exc:  # noqa: BLE001
            note_error(f"copy {dtype} rows={rows} cols={shard}", exc)
        del dst
    del inputs
    torch.cuda.empty_cache()


def pair_point(rows: int, p: int) -> None:
    k = n_buffers(p * rows * 8)
    gen = torch.Generator(device=dev).manual_seed(rows * 31 + p)
    inputs = []
    for _ in range(k):
        vals = torch.randn(p * rows, generator=gen, device=dev)
        ids = torch.randint(0, 1 << 24, (p * rows,), generator=gen, device=dev).float()
        inputs.append(torch.stack([vals, ids], dim=-1))  # all_gather_into_tensor's [p*rows, 2]
    ops = {"pair_reduce": lambda g: ref.pair_reduce(g, p)[0],
           "pair_reduce_fused": lambda g: tk.fused_pair_reduce(g, p, concat=True)}
    skip = set()
    if not torch.equal(ops["pair_reduce"](inputs[0]), ops["pair_reduce_fused"](inputs[0])):
        skip.add("pair_reduce_fused")
        mismatches.append(f"pair_reduce_fused rows={rows} p={p}")
        print(f"MISMATCH: pair_reduce_fused rows={rows} p={p} differs from torch; not timed", file=sys.stderr)
    measure(ops, inputs, "fp32", rows, 0, p, skip)


def unpack_point(rows: int) -> None:
    k = n_buffers(rows * 8)
    gen = torch.Generator(device=dev).manual_seed(rows)
    inputs = [ref.make_keys(torch.randn(rows, generator=gen, device=dev),
                            torch.randint(0, 1 << 31, (rows,), generator=gen, device=dev)) for _ in range(k)]
    ops = {"key_unpack": ref.key_unpack, "key_unpack_fused": tk.fused_key_unpack}
    skip = set()
    if not torch.equal(ops["key_unpack"](inputs[0]), ops["key_unpack_fused"](inputs[0])):
        skip.add("key_unpack_fused")
        mismatches.append(f"key_unpack_fused rows={rows}")
        print(f"MISMATCH: key_unpack_fused rows={rows} differs from torch; not timed", file=sys.stderr)
    measure(ops, inputs, "int64", rows, 0, 1, skip)


# logits-free ops first (cheap), then the local ops per dtype with rows ascending (crossover region first)
stopped = False
for rows in ROWS:
    for p in TPS:
        try:
            pair_point(rows, p)
        except Exception as exc:  # noqa: BLE001
            note_error(f"pair_reduce rows={rows} p={p}", exc)
    try:
        unpack_point(rows)
    except Exception as exc:  # noqa: BLE001
        note_error(f"key_unpack rows={rows}", exc)
for dtype in DTYPES:
    for rows in ROWS:
        for shard, vocab in shards():
            if out_of_time():
                stopped = True
                break
            try:
                local_point(dtype, rows, shard, vocab)
            except Exception as exc:  # noqa: BLE001
                note_error(f"local ops {dtype} rows={rows} cols={shard}", exc)
                torch.cuda.empty_cache()
        if stopped:
            break
    if stopped:
        print(f"warning: BENCH_BUDGET_S={BUDGET_S:g} spent; stopped at {dtype} rows={rows}", file=sys.stderr)
        break
writer.close()

if bw_rows:
    with open(OUT / "triton_bandwidth.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(bw_rows[0]))
        w.writeheader()
        w.writerows(bw_rows)

batch1 = []
for (op, dtype, mode, rows, cols, p), t in sorted(results.items()):
    if rows != 1 or not op.endswith("_fused"):
        continue
    base = results.get((op.removesuffix("_fused"), dtype, mode, rows, cols, p))
    batch1.append({"op": op, "dtype": dtype, "mode": mode, "world_size": p, "cols": cols,
                   "fused_us": round(t, 3), "torch_us": None if base is None else round(base, 3),
                   "speedup": None if base is None else round(base / t, 2)})
if batch1:
    with open(OUT / "triton_batch1.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(batch1[0]))
        w.writeheader()
        w.writerows(batch1)
    print("\nper-call time at rows = 1 (us): op dtype mode p cols fused torch speedup")
    for r in batch1:
        print(f"  {r['op']:20s} {r['dtype']:5s} {r['mode']:5s} {r['world_size']} {r['cols']:6d} "
              f"{r['fused_us']:8.2f} {r['torch_us']} {r['speedup']}")
if bw_rows:
    print("\nbandwidth at large shapes (graph mode): op dtype rows cols GB/s copy-GB/s fraction")
    for r in bw_rows:
        print(f"  {r['op']:20s} {r['dtype']:5s} {r['rows']:5d} {r['cols']:6d} {r['achieved_gbps']:8.1f} "
              f"{r['copy_gbps']:8.1f} {r['fraction_of_copy']:.3f}")
print(f"\n{len(results)} points in {time.perf_counter() - START:.0f} s; {len(mismatches)} mismatches, "
      f"{len(errors)} errors -> {OUT}")
sys.exit(1 if (mismatches or errors) else 0)
PY
bench_rc=$?
if [ "$bench_rc" -ne 0 ]; then
    echo "error: the benchmark exited $bench_rc (mismatches or errors above; rows measured so far are kept)" >&2
    [ "$bench_rc" -eq 2 ] && exit 2
    status=1
fi
exit "$status"
