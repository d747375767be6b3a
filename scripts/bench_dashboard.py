"""Server-side interaction latency of the dashboard (streamlit.testing AppTest, default view).

    python scripts/bench_dashboard.py [--repeat N]

Times `at.run()` after each widget change on the default view (Batch sweep tab): batch, K, TP and preset
edits, each to values not seen before in the session (cold caches for that value) and then back to seen
ones (warm). Prints the median and max per kind. Target: <= 200 ms per edit. Not a test: report the figures.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parent.parent / "app.py"
EDITS: dict[str, tuple[str, tuple]] = {
    "batch": ("number_input", (8, 16, 32, 128, 256, 512)),
    "k": ("number_input", (2, 4, 5, 6)),
    "tp": ("selectbox", (4, 2, 1, 8)),
    "preset": ("selectbox", ("qwen3-8b-eagle3", "llama3-8b-eagle3", "llama4-maverick")),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="passes over the edit list (later passes are warm)")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    at = AppTest.from_file(str(APP), default_timeout=120)
    t0 = time.perf_counter()
    at.run()
    print(f"first run: {time.perf_counter() - t0:.3f} s")

    def timed(key: str, widget: str, value) -> float:
        getattr(at, widget)(key=key).set_value(value)
        start = time.perf_counter()
        at.run()
        assert not at.exception, at.exception
        return time.perf_counter() - start

    results: dict[str, list[float]] = {key: [] for key in EDITS}
    for _ in range(args.repeat):
        for key, (widget, values) in EDITS.items():
            results[key] += [timed(key, widget, v) for v in values]
            timed(key, widget, values[-1])  # no-op rerun keeps the order of edits independent
    for key, values in results.items():
        print(f"{key} edit: median {statistics.median(values) * 1e3:.0f} ms, max {max(values) * 1e3:.0f} ms "
              f"over {len(values)} edits ({', '.join(f'{v * 1e3:.0f}' for v in values)})")


if __name__ == "__main__":
    main()
