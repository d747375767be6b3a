"""Server-side interaction latency of the dashboard (streamlit.testing AppTest, default view).

    python scripts/bench_dashboard.py [--repeat N]

Times `at.run()` after each widget change on the default view (Batch sweep tab): batch, K, TP, preset and
engine edits, each to values not seen before in the session (cold caches for that value) and then back to seen
ones (warm). Prints the median and max wall time per kind and the median CPU time of the process (the app runs
in-process, so CPU time is what the edit costs when the machine is shared), with the load average before and
after. Target: <= 150 ms per edit (issue 21). Not a test: report the figures (best of several runs on a shared
machine). --profile N prints the N costliest functions (cumulative) of the first run instead (with
--profile-edit KIND: of every edit of that kind): AppTest runs the
script in its own thread, which cProfile started in the main thread does not see, so a profiler is started
inside that thread (threading.setprofile).
"""

from __future__ import annotations

import argparse
import cProfile
import logging
import os
import pstats
import statistics
import sys
import threading
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parent.parent / "app.py"
EDITS: dict[str, tuple[str, tuple]] = {
    "batch": ("number_input", (8, 16, 32, 128, 256, 512)),
    "k": ("number_input", (2, 4, 5, 6)),
    "tp": ("selectbox", (4, 2, 1, 8)),
    "preset": ("selectbox", ("qwen3-8b-eagle3", "llama3-8b-eagle3", "llama4-maverick")),
    # last, back to "none": an engine makes the whole draft step the verdict (its interval prices every member)
    "engine": ("selectbox", ("vllm", "sglang", "trtllm", "none")),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="passes over the edit list (later passes are warm)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="print the N costliest functions of the first run (its script thread) and stop")
    parser.add_argument("--profile-edit", choices=tuple(EDITS), default=None,
                        help="with --profile N: profile that kind of edit (every value of it, their script threads) "
                             "instead of the first run")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    print("load average at start: " + " ".join(f"{v:.2f}" for v in os.getloadavg()))
    at = AppTest.from_file(str(APP), default_timeout=120)
    profiles: list[cProfile.Profile] = []

    def start_profiler(*_args) -> None:  # runs once, inside the first new thread: the script runner's
        sys.setprofile(None)
        profiles.append(cProfile.Profile())
        profiles[-1].enable()

    if args.profile and not args.profile_edit:
        threading.setprofile(start_profiler)
    t0 = time.perf_counter()
    at.run()
    print(f"first run: {time.perf_counter() - t0:.3f} s")
    if args.profile and args.profile_edit:
        widget, values = EDITS[args.profile_edit]
        for value in values:
            getattr(at, widget)(key=args.profile_edit).set_value(value)
            threading.setprofile(start_profiler)
            at.run()
            assert not at.exception, at.exception
    if args.profile:
        threading.setprofile(None)
        for prof in profiles:
            prof.disable()
        stats = pstats.Stats(*profiles)
        stats.sort_stats("cumulative").print_stats(args.profile)
        return

    def timed(key: str, widget: str, value) -> tuple[float, float]:
        getattr(at, widget)(key=key).set_value(value)
        start, cpu = time.perf_counter(), time.process_time()
        at.run()
        assert not at.exception, at.exception
        return time.perf_counter() - start, time.process_time() - cpu

    results: dict[str, list[tuple[float, float]]] = {key: [] for key in EDITS}
    for _ in range(args.repeat):
        for key, (widget, values) in EDITS.items():
            results[key] += [timed(key, widget, v) for v in values]
            timed(key, widget, values[-1])  # no-op rerun keeps the order of edits independent
    for key, pairs in results.items():
        wall, cpu = [w for w, _ in pairs], [c for _, c in pairs]
        print(f"{key} edit: median {statistics.median(wall) * 1e3:.0f} ms, max {max(wall) * 1e3:.0f} ms wall "
              f"(CPU median {statistics.median(cpu) * 1e3:.0f} ms, max {max(cpu) * 1e3:.0f} ms) over {len(wall)} "
              f"edits ({', '.join(f'{v * 1e3:.0f}' for v in wall)})")
    print("load average at end: " + " ".join(f"{v:.2f}" for v in os.getloadavg()))


if __name__ == "__main__":
    main()
