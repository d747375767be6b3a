"""Server-side interaction latency of the dashboard (streamlit.testing AppTest, default view).

    python scripts/bench_dashboard.py

Times `at.run()` after each widget change: six batch edits and four K edits; prints the medians.
Not a test: report the figures.
"""

from __future__ import annotations

import logging
import statistics
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parent.parent / "app.py"


def main() -> None:
    logging.disable(logging.WARNING)
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()

    def timed(key: str, value: int) -> float:
        at.number_input(key=key).set_value(value)
        t0 = time.perf_counter()
        at.run()
        return time.perf_counter() - t0

    batch = [timed("batch", b) for b in (8, 16, 32, 128, 256, 512)]
    k = [timed("k", v) for v in (2, 4, 5, 6)]
    for name, values in (("batch edit", batch), ("K edit", k)):
        print(f"{name}: median {statistics.median(values):.3f} s over {len(values)} edits "
              f"({', '.join(f'{v:.3f}' for v in values)})")


if __name__ == "__main__":
    main()
