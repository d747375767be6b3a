"""Where an edit's time goes, unprofiled: wall time per dashboard function per edit (streamlit AppTest).

    python scripts/bench_dashboard_split.py [--edit tp|preset|batch|k]

cProfile inflates Python-heavy code several times over (scripts/bench_dashboard.py --profile shows the shape,
not the size); here the named dashboard functions are wrapped with `time.perf_counter` timers (their module
attribute replaced before the first run, so app.py's imports pick up the wrappers), the default view is rendered
once, then the edit's values of scripts/bench_dashboard.py are applied one by one. Prints the mean wall time per
edit of the whole rerun and of each wrapped function (nested functions count in their callers too). Not a
test: report the figures with the load average.
"""

from __future__ import annotations

import argparse
import collections
import functools
import importlib
import logging
import os
import sys
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_dashboard import APP, EDITS  # noqa: E402

WRAPPED = {  # module -> functions timed (a name views imports from elsewhere is replaced in views too)
    "dashboard.verdict": ("evaluate", "point_frame", "crossover_frame", "saving_interval", "whole_step_verdict",
                          "answer_of"),
    "dashboard.views": ("verdict", "sweep_tab", "fused_panel", "show_table", "chart", "download",
                        "impl_crossover_frame", "display", "context_caption"),
    "dashboard.topk_panel": ("best_pair_caption",),
    "dashboard.compare_panel": ("compare_panel",),
    "dashboard.sources_panel": ("range_quirks_caption", "sources_caption"),
}


def wrap_all(totals: dict[str, float]) -> None:
    views = importlib.import_module("dashboard.views")
    for modname, names in WRAPPED.items():
        module = importlib.import_module(modname)
        for name in names:
            original = getattr(module, name)
            label = f"{modname.split('.')[-1]}.{name}"

            @functools.wraps(original)
            def timed(*args, _f=original, _label=label, **kwargs):
                start = time.perf_counter()
                try:
                    return _f(*args, **kwargs)
                finally:
                    totals[_label] += time.perf_counter() - start

            setattr(module, name, timed)
            if modname != "dashboard.views" and getattr(views, name, None) is original:
                setattr(views, name, timed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edit", choices=tuple(EDITS), default="tp")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    totals: dict[str, float] = collections.defaultdict(float)
    wrap_all(totals)
    print("load average at start: " + " ".join(f"{v:.2f}" for v in os.getloadavg()))
    at = AppTest.from_file(str(APP), default_timeout=300)
    at.run()
    widget, values = EDITS[args.edit]
    totals.clear()
    whole = 0.0
    for value in values:
        getattr(at, widget)(key=args.edit).set_value(value)
        start = time.perf_counter()
        at.run()
        whole += time.perf_counter() - start
        assert not at.exception, at.exception
    n = len(values)
    print(f"{args.edit} edit: {whole / n * 1e3:.0f} ms wall per edit (mean of {n})")
    for label, seconds in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {label:36s} {seconds / n * 1e3:6.1f} ms")


if __name__ == "__main__":
    main()
