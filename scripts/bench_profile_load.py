"""Cold load + validation time of every bundled profile: `load_profile(name)` in a fresh process (imports not
counted), median of 5 runs per profile (issue 21 item 2 target: <= 50 ms). Run:

    python scripts/bench_profile_load.py [NAME ...]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN = """
import sys, time
sys.path.insert(0, sys.argv[2])
from costmodel.profiles.store import load_profile
t = time.perf_counter()
load_profile(sys.argv[1])
print(time.perf_counter() - t)
"""


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT))
    from costmodel.profiles.store import PROFILE_DIR, bundled_profiles

    names = (argv if argv is not None else sys.argv[1:]) or bundled_profiles()
    for name in names:
        runs = [float(subprocess.check_output([sys.executable, "-c", RUN, name, str(ROOT)])) for _ in range(5)]
        size = (PROFILE_DIR / f"{name}.json").stat().st_size
        print(f"{name:20s} {size / 1e3:7.1f} KB  median {1e3 * statistics.median(runs):6.1f} ms  "
              f"(runs {', '.join(f'{1e3 * t:.0f}' for t in runs)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
