"""Freeze what every bundled profile predicts: point totals and 90% intervals (tests/profiles/data/frozen_numbers.json).

Issue 21 item 2 (compact profiles) changes how the profiles STORE their ensembles, never what they predict.
This script records, per bundled profile, the numbers a user sees, so tests/profiles/test_compact_profiles.py can
check that a re-encoded profile gives them bit for bit:

* `predict` total_us of every strategy over a grid (vocab x tp x batch x dtype x engine, one node) and at
  tp 16 over 2 nodes;
* `uncertainty.propagate` (saving / decode-step / crossover intervals, found fraction, verdict) on three
  scenarios, one of them also without the discrepancy term (parameter uncertainty only);
* `interval_table` of local_argmax_pairs at a few batches;
* `uncertainty.point_intervals` of synthetic measurement rows (collectives and kernel ops).

Run:  python scripts/freeze_numbers.py [--out tests/profiles/data/frozen_numbers.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from costmodel import STRATEGIES, Scenario, load_profile, predict  # noqa: E402
from costmodel.evidence.interval_table import interval_table  # noqa: E402
from costmodel.evidence.intervals import propagate  # noqa: E402
from costmodel.evidence.point_intervals import point_intervals  # noqa: E402
from costmodel.io.errors import InputError  # noqa: E402
from costmodel.profiles.store import bundled_profiles  # noqa: E402

OUT = ROOT / "tests" / "profiles" / "data" / "frozen_numbers.json"
GRID = {"vocab": (32000, 202048), "tp": (2, 4, 8), "batch": (1, 32, 1024), "dtype": ("bf16", "fp32"),
        "engine": ("none", "vllm")}
PROPAGATE = {  # name: (scenario fields, with_discrepancy)
    "tp8-b16-graph": ({"vocab": 202048, "tp": 8, "batch": 16}, True),
    "tp8-b16-graph-params-only": ({"vocab": 202048, "tp": 8, "batch": 16}, False),
    "tp4-b256-vllm": ({"vocab": 128256, "tp": 4, "batch": 256, "engine": "vllm"}, True),
    "tp16-2nodes-b4-eager": ({"vocab": 202048, "tp": 16, "nodes": 2, "batch": 4, "mode": "eager"}, True),
}
TABLE_BATCHES = (1.0, 4.0, 64.0, 512.0, 4096.0)


def _floats(values: Any) -> list[float]:
    return [float(v) for v in np.asarray(values, dtype=float).reshape(-1)]


def _interval(iv: Any) -> list[float] | None:
    return None if iv is None else [iv.low, iv.high]


def point_rows() -> pd.DataFrame:
    """Synthetic measurement rows: collectives at 3 sizes x TP 2 / 8 x graph / eager, and 4 kernel ops."""
    rows = [{"op": op, "dtype": "bf16", "bytes_per_rank": b, "world_size": p, "nodes": 1, "mode": mode,
             "rows": np.nan, "cols": np.nan}
            for op, b, p, mode in itertools.product(("all_gather", "all_reduce"), (1e3, 1e5, 1e7), (2, 8),
                                                    ("graph", "eager"))]
    rows += [{"op": op, "dtype": "bf16", "bytes_per_rank": np.nan, "world_size": 8, "nodes": 1, "mode": mode,
              "rows": r, "cols": 32000.0}
             for op, r, mode in itertools.product(("argmax", "local_argmax", "relayout_copy", "pair_reduce"),
                                                  (8.0, 256.0), ("graph", "eager"))]
    return pd.DataFrame(rows)


def frozen_numbers(name: str) -> dict[str, Any]:
    """Every number this module freezes for bundled profile `name` (JSON-ready)."""
    prof = load_profile(name)
    combos = list(itertools.product(*GRID.values()))
    cols = {k: np.array([c[i] for c in combos]) for i, k in enumerate(GRID)}
    pred = predict(Scenario(**cols), prof)
    out: dict[str, Any] = {"predict": {s: _floats(pred.total_us(s)) for s in STRATEGIES}}
    try:
        multi = predict(Scenario(vocab=202048, tp=16, nodes=2, batch=np.array([1.0, 64.0])), prof)
        out["predict_tp16_2nodes"] = {s: _floats(multi.total_us(s)) for s in STRATEGIES}
    except InputError as exc:
        out["predict_tp16_2nodes"] = str(exc)
    out["propagate"] = {}
    for key, (fields, with_disc) in PROPAGATE.items():
        try:
            res = propagate(Scenario(**fields), prof, with_discrepancy=with_disc)
        except InputError as exc:
            out["propagate"][key] = str(exc)
            continue
        out["propagate"][key] = {s: {"saving_us": _interval(u.saving_us),
                                     "saving_per_decode_step_us": _interval(u.saving_per_decode_step_us),
                                     "crossover_batch": _interval(u.crossover_batch),
                                     "crossover_found_fraction": u.crossover_found_fraction, "verdict": u.verdict}
                                 for s, u in res.items()}
    table = interval_table(Scenario(vocab=202048, tp=8), prof, "local_argmax_pairs", np.array(TABLE_BATCHES))
    out["interval_table"] = {"crossover_batch": _interval(table.crossover),
                             "crossover_found_fraction": table.crossover_found_fraction,
                             "saving_us": [_interval(table.at(b).saving_us) for b in TABLE_BATCHES],
                             "saving_per_decode_step_us": [_interval(table.at(b).saving_per_decode_step_us)
                                                           for b in TABLE_BATCHES]}
    lo, hi = point_intervals(point_rows(), prof)
    out["point_intervals"] = {"low_us": _floats(lo), "high_us": _floats(hi)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    data = {name: frozen_numbers(name) for name in bundled_profiles()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(data, indent=None, separators=(",", ":")) + "\n")
    print(f"wrote {args.out} ({len(data)} profiles)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
