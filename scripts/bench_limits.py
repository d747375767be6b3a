"""Time and peak memory of the dashboard's upload path (dashboard.uploads.parse_upload) on the largest uploads.

    python scripts/bench_limits.py [--rows 1000000]

Writes two measurement CSVs just under the 20 MiB upload limit into a temporary folder and fits each in a
fresh subprocess (so the peak RSS is the upload's own):

* ``repeated``: 1,000,000 collective rows over 7 repeated sizes (the fitter bins repeats per point);
* ``distinct``: as many rows as fit in 19.75 MiB, every one at a distinct size (refused: the fit's
  distinct-size limit);
* ``at-limit``: one curve at calibration.fitting.fit.MAX_GROUP_SIZES distinct sizes x 16 repeats (the costliest fit
  the limits allow: leave-one-size-out is ~k^3).

Prints, per file: size, rows, outcome (fitted / the one-line refusal), wall time and peak RSS.
Target (issue 13): fitted in < 10 s and < 1 GB, or refused fast.
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
LIMIT_BYTES = int(19.75 * 2**20)

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


def _write(path: Path, sizes: np.ndarray, rng: np.random.Generator) -> int:
    """Rows `gather,eager,2,<size>,<time>` (time ~ 5 us + size / 10 MB/s, 5% noise) up to LIMIT_BYTES."""
    times = np.maximum(1, np.round(5 + sizes / 1e4 * (1 + 0.05 * rng.standard_normal(sizes.size)))).astype(int)
    lines = [f"gather,eager,2,{b},{t}\n" for b, t in zip(sizes.tolist(), times.tolist(), strict=True)]
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
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        sys.path.insert(0, str(ROOT))
        from calibration.fitting.fit import MAX_GROUP_SIZES

        limit_sizes = np.unique(np.round(np.geomspace(64, 2**30, MAX_GROUP_SIZES)).astype(np.int64))
        cases = {
            "repeated": rng.choice(np.array([16, 32, 64, 128, 256, 512, 999]), args.rows),
            "distinct": rng.permutation(np.arange(100, 100 + args.rows)),
            "at-limit": np.repeat(limit_sizes, 16),
        }
        for name, sizes in cases.items():
            path = Path(tmp) / f"{name}.csv"
            n = _write(path, sizes, rng)
            res = subprocess.run([sys.executable, "-c", CHILD, str(path), str(ROOT)], capture_output=True,
                                 text=True, check=False)
            if res.returncode:
                print(f"{name}: child failed: {res.stderr.strip().splitlines()[-1:]}")
                continue
            r = json.loads(res.stdout)
            print(f"{name:9s} {path.stat().st_size / 2**20:6.2f} MiB {n:>9,d} rows  upload {r['upload_s']:6.2f} s  "
                  f"peak RSS {r['peak_rss_mib']:7.1f} MiB  {r['outcome']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
