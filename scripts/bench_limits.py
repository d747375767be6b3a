"""Time and peak memory of the dashboard's upload path (dashboard.uploads.parse_upload) on the largest uploads.

    python scripts/bench_limits.py [--rows 1000000]

Writes two measurement CSVs just under the 20 MB upload limit into a temporary folder and fits each in a
fresh subprocess (so the peak RSS is the upload's own):

* ``repeated``: 1,000,000 collective rows over 7 repeated sizes (the fitter bins repeats per point);
* ``distinct``: as many rows as fit in 19.75 MB, every one at a distinct size (refused: the fit's
  distinct-size limit);
* ``at-limit``: one curve at calibration.fitting.fit.MAX_GROUP_SIZES distinct sizes x 16 repeats (the costliest
  single curve: leave-one-size-out is ~k^2 n);
* ``max-points``: the worst plan the per-fit limits allow (issue 22): curves at the 192-size limit x 16 repeats
  up to MAX_FIT_POINTS points (10 at 192 sizes + 1 at 128; fit time is ~k^2 n per curve, so this is the
  costliest plan);
* ``max-curves``: MAX_FIT_CURVES curves (60 per-p + 4 generic) of MAX_FIT_POINTS / MAX_FIT_CURVES sizes x 16;
* ``over-points`` / ``over-curves``: one point / one curve more (refused before any fitting);
* ``nccl-log-max``: an nccl-tests log of whole runs (data/reference/nccl-tests, h100x8 all_gather ring, repeated)
  with import_nccl_tests.MAX_LOG_ROWS result rows (imported: the worst accepted log), and ``nccl-log-63mib``: the
  same runs repeated up to 63.5 MiB (under the 64 MiB file limit; refused while it is scanned); rows are
  written in their densest form (`_write_log`). Both are read as
  the importer does (read_log, parse_nccl_tests_text); ``--root`` runs them against another checkout (before /
  after).

Prints, per file: size, rows, outcome (fitted / the one-line refusal), wall time and peak RSS.
Target (issue 13): fitted in < 10 s and < 1 GB, or refused fast; issue 22: the worst allowed plan finishes
inside the default time budget (calibration.fitting.fit.DEFAULT_TIME_BUDGET_S) under 1 GB.

    python scripts/bench_limits.py --cases max-points,max-curves   (a subset)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
LIMIT_BYTES = 19_750_000  # just under the upload limit (dashboard.uploads.MAX_UPLOAD_BYTES = 20 MB)
LOG = ROOT / "data/reference/nccl-tests/h100x8_all_gather_together-ring.log"

LOG_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[2])
from calibration.logs.import_nccl_tests import parse_nccl_tests_text, read_log
from costmodel.io.errors import InputError
t1 = time.perf_counter()
try:
    rows = parse_nccl_tests_text(read_log(sys.argv[1]), sys.argv[1])
    outcome = f"imported: {len(rows):,} rows"
except InputError as exc:
    outcome = f"refused: {exc}"
t2 = time.perf_counter()
print(json.dumps({"outcome": outcome, "import_s": 0.0, "upload_s": t2 - t1,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _write_log(path: Path, *, rows: int | None = None, size: int | None = None) -> int:
    """Whole runs of LOG repeated until `rows` result rows (cut at a run) or `size` bytes; returns the row count.
    Result rows are cut to their out-of-place columns with single spaces (the densest log the importer reads:
    ~40 bytes a row, so a 63.5 MiB log holds ~1.5M rows)."""
    lines = []
    for line in LOG.read_text().splitlines():
        tokens = line.lstrip("#").split()
        if line.strip()[:1].isdigit() or ("size" in tokens and "count" in tokens):
            line = ("" if line.strip()[:1].isdigit() else "# ") + " ".join(tokens[:9])
        lines.append(line)
    block = "\n".join(lines) + "\n"
    per_block = sum(1 for line in block.splitlines() if line.strip()[:1].isdigit())
    n = rows // per_block if rows is not None else size // len(block)
    path.write_text(block * n)
    return per_block * n

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[2])
t0 = time.perf_counter()
from dashboard.uploads import parse_upload
from costmodel.io.errors import InputError
data = open(sys.argv[1], "rb").read()
t1 = time.perf_counter()
try:
    up = parse_upload("bench.csv", data)
    outcome = f"fitted: {len(up.profile.collectives)} curves, {len(up.profile.bootstrap)} replicates"
except InputError as exc:
    outcome = f"refused: {exc}"
t2 = time.perf_counter()
print(json.dumps({"outcome": outcome, "import_s": t1 - t0, "upload_s": t2 - t1,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _write(path: Path, sizes: np.ndarray | list, rng: np.random.Generator) -> int:
    """Rows `op,mode,p,<size>,<time>` (time ~ 5 us + size / 10 MB/s, 5% noise) up to LIMIT_BYTES; `sizes` is an
    array (op gather, eager, p 2) or a list of ((op, mode, p), sizes) curves."""
    curves = [(("gather", "eager", 2), sizes)] if isinstance(sizes, np.ndarray) else sizes
    lines = []
    for (op, mode, p), b in curves:
        times = np.maximum(1, np.round(5 + b / 1e4 * (1 + 0.05 * rng.standard_normal(b.size)))).astype(int)
        lines += [f"{op},{mode},{p},{x},{t}\n" for x, t in zip(b.tolist(), times.tolist(), strict=True)]
    header = "op,mode,world_size,bytes_per_rank,median_us\n"
    out, total = [header], len(header)
    for line in lines:
        if total + len(line) > LIMIT_BYTES:
            break
        out.append(line)
        total += len(line)
    path.write_text("".join(out))
    return len(out) - 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--cases", default="", help="comma-separated subset of the cases (default: all)")
    ap.add_argument("--root", type=Path, default=ROOT, help="checkout whose code is measured (default: this one)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        sys.path.insert(0, str(ROOT))
        from calibration.fitting.fit import MAX_FIT_CURVES, MAX_FIT_POINTS, MAX_GROUP_SIZES
        from calibration.logs.import_nccl_tests import MAX_LOG_ROWS

        def grid(k: int) -> np.ndarray:  # k distinct sizes (multiples of 64 B: whole elements, any p divides)
            return np.repeat(64 * (np.arange(k) + np.round(np.geomspace(1, 2**24, k)).astype(np.int64)), 16)

        limit_sizes = grid(MAX_GROUP_SIZES)
        # all_gather / gather at p = 2, 3 (their generic curve has 2 x 192 total sizes: skipped, not fitted)
        wide = [((op, mode, p), limit_sizes) for op in ("all_gather", "gather") for mode in ("eager", "graph")
                for p in (2, 3)] + [(("broadcast", mode, 2), limit_sizes) for mode in ("eager", "graph")]
        rest = MAX_FIT_POINTS - MAX_GROUP_SIZES * len(wide)
        wide.append((("all_reduce", "eager", 2), grid(rest)))
        per_p = MAX_FIT_CURVES // 16 * 15  # (all_reduce, broadcast) x 2 modes x 15 p + 4 generic curves
        k_each = MAX_FIT_POINTS // MAX_FIT_CURVES
        many = [((op, mode, p), grid(k_each)) for op in ("all_reduce", "broadcast") for mode in ("eager", "graph")
                for p in range(2, 2 + per_p // 4)]
        cases = {
            "repeated": rng.choice(np.array([16, 32, 64, 128, 256, 512, 999]), args.rows),
            "distinct": rng.permutation(np.arange(100, 100 + args.rows)),
            "at-limit": limit_sizes,
            "max-points": wide,
            "over-points": wide[:-1] + [(("all_reduce", "eager", 2), grid(rest + 1))],
            "max-curves": many,
            "over-curves": many + [(("gather", "eager", 2), grid(4))],
            "nccl-log-max": {"rows": MAX_LOG_ROWS},
            "nccl-log-63mib": {"size": int(63.5 * 2**20)},
        }
        wanted = [c.strip() for c in args.cases.split(",") if c.strip()] or list(cases)
        for name in wanted:
            sizes = cases[name]
            if isinstance(sizes, dict):
                path = Path(tmp) / f"{name}.log"
                n, child = _write_log(path, **sizes), LOG_CHILD
            else:
                path = Path(tmp) / f"{name}.csv"
                n, child = _write(path, sizes, rng), CHILD
            res = subprocess.run([sys.executable, "-c", child, str(path), str(args.root)], capture_output=True,
                                 text=True, check=False)
            if res.returncode:
                print(f"{name}: child failed: {res.stderr.strip().splitlines()[-1:]}")
                continue
            r = json.loads(res.stdout)
            print(f"{name:11s} {path.stat().st_size / 2**20:6.2f} MiB {n:>9,d} rows  upload {r['upload_s']:6.2f} s  "
                  f"peak RSS {r['peak_rss_mib']:7.1f} MiB  {r['outcome']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
