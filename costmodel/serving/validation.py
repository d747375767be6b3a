"""`validate --serving`: the replay's error against real serving runs, and the A/B mechanism against real A/Bs.

1. Each run's own metrics against the baseline strategy's replay (`ab.simulate_ab`, the `simulate` command's,
   with the server and the step model inferred from the run itself - nothing given):

       error_pct = 100 * (replayed - measured) / measured

   for every metric the run reports (`vllm bench serve`'s names: throughputs, mean / median / p99 TTFT, TPOT,
   ITL, E2EL). The step model is fitted on the run's busy engine steps (`step_fit`, `fit_part="all"`), or with
   `--serving-fit first-half` only on those of the run's first half, the second half held out. The fit spans one
   run, so there is no leave-one-run-out to do: every run is its own calibration, and nothing is fitted to a
   reported metric. The default runs are the bundled real vLLM runs (data/serving-runs/, their README). A run
   whose file carries a `note` is labelled `synthetic`.
2. `ab_pair_rows`: the A/B mechanism on real pairs (issue 42 item 5). Runs A and B of a pair differ only in the
   draft step (same prompts, arrivals and server; B adds a draft model, or a costlier one). Given run A and the
   per-step difference, the replay predicts B: A's arrivals and front end, the step model

       step_B = step_A + (step_B' - step_A')   (alpha, beta, gamma each, kept >= 0)

   with the difference measured on another pair A', B' of the same settings (a repeat: B is never seen), or on
   B itself where no repeat exists (`difference` says which), and B's K and acceptance length (a property of
   the draft: identical across repeats under greedy decoding). error_pct = 100 (predicted - measured B) / B.
3. `noise_rows`: for each setting the bundle repeats (cap8-inf-r1..3, spec1l-k3-r1..3), the run-to-run SD one
   run predicts (`ab.detectability`) against the SD the repeats measure, per metric (issue 42 item 6).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..answers.question import Question
from ..answers.workload import DATA_DIR
from ..io.safe_io import loads_json, read_text
from .ab import SimConfig, replay_means, simulate_ab
from .inputs import request_acceptance
from .replay import StepModel
from .run import BenchRun, load_bench_run
from .server import infer_server
from .step_fit import fit_step
from .table import CLI_CONFIG

SERVING_RUNS_DIR = DATA_DIR / "serving-runs"
COLUMNS = ("run", "kind", "metric", "measured", "replayed", "error_pct", "note")
PAIR_COLUMNS = ("pair", "a", "b", "difference", "metric", "measured", "predicted", "error_pct")
# issue 42's bounds per metric: |error| <= 5% (throughput, median TTFT, mean E2EL), 10% (p99 TTFT, p99 ITL)
TARGET_PCT = {"output_throughput": 5.0, "median_ttft_ms": 5.0, "mean_e2el_ms": 5.0, "p99_ttft_ms": 10.0,
              "p99_itl_ms": 10.0}
PAIR_TARGET_PCT = {"output_throughput": 5.0, "mean_itl_ms": 5.0}
SUMMARY = ("output_throughput", "median_ttft_ms", "mean_e2el_ms", "p99_ttft_ms", "p99_itl_ms", "mean_ttft_ms",
           "mean_itl_ms", "median_itl_ms")
# (name, A, B, A', B'): the real pairs in data/serving-runs/ (README "What each run is for"): a draft model
# against none, and a 2-layer draft against a 1-layer one, at cap 8, rate inf, the same 128 prompts
AB_PAIRS = (
    *((f"no draft -> 1-layer draft K 3 (repeat {r})", f"cap8-inf-r{r}", f"spec1l-k3-r{r}",
       f"cap8-inf-r{r % 3 + 1}", f"spec1l-k3-r{r % 3 + 1}") for r in (1, 2, 3)),
    ("no draft -> 1-layer draft K 1", "cap8-inf-r1", "spec1l-k1", "cap8-inf-r1", "spec1l-k1"),
    ("no draft -> 1-layer draft K 5", "cap8-inf-r1", "spec1l-k5", "cap8-inf-r1", "spec1l-k5"),
    ("1-layer -> 2-layer draft K 3", "spec1l-k3-r2", "spec2l-k3", "spec1l-k3-r1", "spec2l-k3"),
)


def bundled_runs(directory: Path = SERVING_RUNS_DIR) -> list[Path]:
    """The bundled real vLLM runs: data/serving-runs/*.json without their *.provenance.json (sorted)."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob("*.json") if not p.name.endswith(".provenance.json"))


def serving_answers(paths: Sequence[str | Path], question: Question, config: SimConfig = CLI_CONFIG
                    ) -> list[tuple[BenchRun, dict[str, Any]]]:
    """Each run with its `simulate_ab` answer (the replay `simulate` shows)."""
    out = []
    for path in paths:
        run = load_bench_run(path, question.acceptance_length)
        out.append((run, simulate_ab(run, question, config)))
    return out


def serving_rows(answers: list[tuple[BenchRun, dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per run and metric (COLUMNS): the run's measured metric and the baseline strategy's replay."""
    rows = []
    for run, ab in answers:
        replay = ab["strategies"][ab["reference"]]
        for metric, err in ab["baseline_reproduction_error_pct"].items():
            if err is None:
                continue
            rows.append({"run": run.name, "kind": "synthetic" if run.note else "measured", "metric": metric,
                         "measured": ab["baseline"][metric], "replayed": replay[metric]["value"],
                         "error_pct": float(err), "note": run.note})
    return rows


def noise_rows(answers: list[tuple[BenchRun, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per setting repeated in `answers` (runs named SETTING-rN, N = 1, 2, ...) and metric: the noise SD one run
    predicts (`ab.detectability`, the mean over the repeats) against the measured SD of the repeats' values (sample
    SD over their mean), both in %; module doc, 3."""
    groups: dict[str, list[tuple[BenchRun, dict[str, Any]]]] = {}
    for run, ab in answers:
        stem, _, rep = run.name.removesuffix(".json").rpartition("-r")
        if stem and rep.isdigit():
            groups.setdefault(stem, []).append((run, ab))
    rows = []
    for stem, group in groups.items():
        if len(group) < 2:
            continue
        for metric in group[0][1]["metrics"]:
            got = np.array([run.reported.get(metric, np.nan) for run, _ in group])
            if not np.isfinite(got).all() or not got.mean():
                continue
            predicted = float(np.mean([ab["detectable"]["noise"][metric]["sd_pct"] for _, ab in group]))
            measured = float(100 * np.std(got, ddof=1) / abs(got.mean()))
            rows.append({"setting": stem, "runs": len(group), "metric": metric, "predicted_sd_pct": predicted,
                         "measured_sd_pct": measured, "ratio": predicted / measured if measured else np.inf})
    return rows


def bundled_k(path: Path) -> int:
    """K of a bundled run: its provenance file's speculative config (0 without one)."""
    prov = path.with_name(path.name.removesuffix(".json") + ".provenance.json")
    if not prov.is_file():
        return 0
    spec = loads_json(read_text(prov, limit_bytes=1 << 20, what="provenance"), prov.name).get("speculative")
    return int((spec or {}).get("num_speculative_tokens") or 0)


def ab_pair_rows(directory: Path = SERVING_RUNS_DIR, config: SimConfig = CLI_CONFIG, seeds: int = 8
                 ) -> list[dict[str, Any]]:
    """One row per real A/B pair and metric (PAIR_COLUMNS; module doc, 2)."""
    runs: dict[str, tuple[BenchRun, Any, int]] = {}

    def get(name: str) -> tuple[BenchRun, Any, int]:
        if name not in runs:
            run = load_bench_run(directory / f"{name}.json")
            k = bundled_k(directory / f"{name}.json")
            runs[name] = (run, fit_step(run, spec_tokens=k, part=config.fit_part), k)
        return runs[name]

    rows = []
    for label, a, b, a_ref, b_ref in AB_PAIRS:
        if not all((directory / f"{x}.json").is_file() for x in (a, b, a_ref, b_ref)):
            continue
        (run_a, fit_a, _), (run_b, _, _) = get(a), get(b)
        (_, fit_ar, _), (run_br, fit_br, k) = get(a_ref), get(b_ref)
        coef = np.maximum(np.array(_coef(fit_a.step)) + np.array(_coef(fit_br.step)) - np.array(_coef(fit_ar.step)),
                          0.0)
        server = infer_server(run_a)
        slots = server.max_num_seqs if server is not None and server.binds else run_a.n
        budget = fit_a.budget or config.max_batched_tokens or 8192
        step = replace(fit_a.step, alpha_us=coef[0], beta_us=coef[1], gamma_us=coef[2])  # A's jitter
        acc = request_acceptance(run_br, run_br.acceptance_length, k)  # B's draft on the same prompts (a repeat's)
        got = replay_means(run_a, fit_a, step, k=k, acceptance_length=acc,
                           slots=int(min(slots, run_a.n)), budget=budget, seeds=seeds, rng_seed=config.rng_seed)
        held = "a repeat (B not seen)" if b_ref != b else "B itself (no repeat)"
        for metric in (m for m in SUMMARY if m in run_b.reported and m in got):
            want = run_b.reported[metric]
            rows.append({"pair": label, "a": a, "b": b, "difference": f"{a_ref} -> {b_ref}, {held}",
                         "metric": metric, "measured": want, "predicted": got[metric],
                         "error_pct": 100 * (got[metric] - want) / want})
    return rows


def _coef(step: StepModel) -> tuple[float, float, float]:
    return step.alpha_us, step.beta_us, step.gamma_us


def format_serving(rows: list[dict[str, Any]], pairs: list[dict[str, Any]] | None = None, part: str = "all",
                   noise: list[dict[str, Any]] | None = None) -> str:
    """The rows as text: one line per run with the SUMMARY metrics' errors, the count within TARGET_PCT per
    metric, then the A/B pairs and the noise check; every row (all metrics) is in --out's CSV."""
    fit = "all its busy engine steps" if part == "all" else "its first half's busy steps (second half held out)"
    head = f"{'run':26s} " + " ".join(f"{m.removesuffix('_ms'):>16s}" for m in SUMMARY)
    lines = [f"serving: each run's own metrics vs the baseline strategy's replay, error % (step model fitted on "
             f"{fit}; the server inferred from the run)", head]
    by_run: dict[str, dict[str, float]] = {}
    for r in rows:
        by_run.setdefault(r["run"], {})[r["metric"]] = r["error_pct"]
    for name, errs in by_run.items():
        lines.append(f"{name.removesuffix('.json')[:26]:26s} " +
                     " ".join(f"{errs[m]:+15.1f}%" if m in errs else f"{'-':>16s}" for m in SUMMARY))
    met = [f"{m} {sum(abs(e.get(m, np.inf)) <= t for e in by_run.values())}/{len(by_run)} (<= {t:g}%)"
           for m, t in TARGET_PCT.items()]
    lines.append("within issue 42's bounds: " + ", ".join(met))
    notes = dict.fromkeys(f"  {r['run']}: {r['note']}" for r in rows if r["note"])
    lines += list(notes)
    if pairs:
        lines += ["", "A/B pairs: run A and the per-step difference predict run B (docs/accuracy.md)",
                  f"{'pair':44s} {'metric':18s} {'measured B':>12s} {'predicted':>12s} {'error':>8s}  difference from"]
        for r in pairs:
            lines.append(f"{r['pair'][:44]:44s} {r['metric'][:18]:18s} {r['measured']:12.3f} {r['predicted']:12.3f} "
                         f"{r['error_pct']:+7.1f}%  {r['difference']}")
    if noise:
        lines += ["", "noise: one run's predicted SD (simulate's detectability) vs the measured SD of repeated runs",
                  f"{'setting':14s} {'metric':24s} {'predicted SD':>13s} {'measured SD':>12s} {'ratio':>7s}"]
        for r in noise:
            lines.append(f"{r['setting'][:14]:14s} {r['metric'][:24]:24s} {r['predicted_sd_pct']:12.2f}% "
                         f"{r['measured_sd_pct']:11.2f}% {r['ratio']:7.2f}  ({r['runs']} runs)")
    return "\n".join(lines)

