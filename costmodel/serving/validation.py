"""`validate --serving`: the simulator's calibration error on serving runs - each bench run's own metrics against
the baseline strategy's replay (`ab.simulate_ab`, the `simulate` command's), one row per run and metric.

    error_pct = 100 * (replayed - measured) / measured

for the run's mean metrics (`vllm bench serve`'s names: output / total-token / request throughput, mean TPOT, ITL,
TTFT, E2EL). The default runs are the bundled bench files (data/examples/*.json with per-request arrays); a run
whose file carries a `note` (the bundled example says "synthetic example ... (not a measurement)") is labelled
`synthetic` - its error checks the replay's arithmetic, not the model against a GPU. No published A/B of
`use_local_argmax_reduction` with per-request data was found to add (docs/accuracy.md says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..answers.question import Question
from ..answers.workload import EXAMPLES_DIR
from .ab import SimConfig, simulate_ab
from .run import load_bench_run
from .table import CLI_CONFIG

COLUMNS = ("run", "kind", "metric", "measured", "replayed", "error_pct", "note")


def bundled_runs(directory: Path = EXAMPLES_DIR) -> list[Path]:
    """The bundled bench runs: data/examples/*.json (sorted)."""
    return sorted(directory.glob("*.json")) if directory.is_dir() else []


def serving_rows(paths: Sequence[str | Path], question: Question, config: SimConfig = CLI_CONFIG
                 ) -> list[dict[str, Any]]:
    """One row per run and metric (COLUMNS): the run's measured mean and the baseline strategy's replay."""
    rows = []
    for path in paths:
        run = load_bench_run(path, question.acceptance_length)
        ab = simulate_ab(run, question, config)
        replay = ab["strategies"][ab["reference"]]
        for metric, err in ab["baseline_reproduction_error_pct"].items():
            if err is None:
                continue
            rows.append({"run": run.name, "kind": "synthetic" if run.note else "measured", "metric": metric,
                         "measured": ab["baseline"][metric], "replayed": replay[metric]["value"],
                         "error_pct": float(err), "note": run.note})
    return rows


def format_serving(rows: list[dict[str, Any]]) -> str:
    """The rows as a text table, runs separated by their kind and note."""
    lines = ["serving: each run's own metrics vs the baseline strategy's replay (simulate's calibration error)",
             f"{'run':32s} {'kind':9s} {'metric':24s} {'measured':>12s} {'replayed':>12s} {'error':>8s}"]
    for r in rows:
        lines.append(f"{r['run'][:32]:32s} {r['kind']:9s} {r['metric']:24s} {r['measured']:12.3f} "
                     f"{r['replayed']:12.3f} {r['error_pct']:+7.1f}%")
    notes = dict.fromkeys(f"  {r['run']}: {r['note']}" for r in rows if r["note"])
    return "\n".join(lines + list(notes))
