"""`simulate`'s A/B table for the dashboard's Serving A/B tab: the same reader, bounds and `simulate_ab` call as
`python -m costmodel simulate --bench RUN.json --json` (costmodel/cli/cmd_simulate.py), and the answer as rows.

* `bench_text(data, name)`: an uploaded file's bytes as text, refused beyond run.MAX_BENCH_BYTES (the size
  the CLI reads at most) or when it is not UTF-8; `parse_bench_text` then applies the reader's count bounds.
* `simulate_bench(text, name, question)`: the A/B dict of `simulate_ab` with the CLI's default SimConfig (its
  flags' defaults: vLLM's max_num_seqs / max_num_batched_tokens for the profile's GPU, 12 seeds, RNG seed 0, drift
  0.7%), the
  acceptance length from the run or else the question's (as `--acceptance-length`).
* `ab_rows(ab)`: one row per metric and strategy (measured, value, 90% interval, change and its interval,
  detectability); `change_rows(ab)`: per metric and non-baseline strategy the change with its interval and the
  run's noise band (the change one A/B of this size resolves).
"""

from __future__ import annotations

import math
from typing import Any

from ..answers.question import Question, check_acceptance
from ..io.errors import InputError
from ..io.safe_io import check_size
from .ab import SimConfig, simulate_ab
from .run import MAX_BENCH_BYTES, parse_bench_text

CLI_CONFIG = SimConfig()  # simulate's flag defaults (costmodel/cli/simulate_args.py)


def setup_lines(ab: dict[str, Any]) -> list[str]:
    """What the replay ran and what it read from the run, one line each (the CLI's header, the tab's caption)."""
    rate = ab["request_rate"] if isinstance(ab["request_rate"], str) else f"{ab['request_rate']:g}/s"
    return [f"bench {ab['bench']}: {ab['requests']} requests, request_rate {rate}, max_concurrency "
            f"{ab['max_concurrency']}, {ab['slots']} slots, acceptance length {ab['acceptance_length']:.3f} "
            f"({ab['acceptance_source']}), K {ab['num_spec_tokens']}",
            f"server: {ab['server']}; {ab['token_budget']}",
            f"arrivals: {ab['arrivals']}",
            f"step fit: {ab['step_fit']}",
            f"front end: {ab['front_end_ms']:.1f} ms from send to the engine (median; per request as the run's "
            "steps show it)",
            f"draft per decode step: {ab['draft_per_decode_step']}; {ab['point_seeds']} seeds per strategy "
            f"(point) + {ab['seeds']} (members)",
            *([f"fabric: {ab['fabric']}"] if ab.get("fabric") else [])]


def bench_text(data: bytes, name: str) -> str:
    """An uploaded bench file as text: at most MAX_BENCH_BYTES, UTF-8 (InputError, one line, otherwise)."""
    check_size(len(data), limit_bytes=MAX_BENCH_BYTES, source=f"bench {name}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"bench {name}: not UTF-8 text") from None


def simulate_bench(text: str, name: str, question: Question, config: SimConfig = CLI_CONFIG) -> dict[str, Any]:
    """`simulate --bench` of a bench file's text for `question` (module doc); InputError, one line, on a bad file."""
    acc = question.acceptance_length
    check_acceptance(acc, int(question.scenario.num_spec_tokens))
    run = parse_bench_text(text, name, acc)
    return simulate_ab(run, question, config)


def _verdict(ab: dict[str, Any], strategy: str, metric: str) -> str:
    if strategy == ab["reference"]:
        err = ab["baseline_reproduction_error_pct"].get(metric)
        return "baseline replay" + (f", error {err:+.1f}%" if err is not None else "")
    cell = ab["detectable"]["strategies"].get(strategy, {}).get(metric)
    if not cell:
        return ""
    if cell["visible"] is None:
        err = ab["baseline_reproduction_error_pct"].get(metric)
        return f"no verdict (the baseline replay misses the run by {err:+.1f}%)"
    repeats = cell["repeats_needed"]
    return (f"{'visible' if cell['visible'] else 'not visible'} (resolves > {cell['resolves_above_pct']:.2f}%"
            + (f", repeats {repeats}" if repeats is not None else "") + ")")


def noise_line(ab: dict[str, Any]) -> str:
    """How the noise behind the verdicts was found, in one line (the CLI's footer, the tab's caption)."""
    det = ab["detectable"]
    return (f"noise: one run of {det['requests']} requests paired with its A/B twin (the same prompts and arrivals: "
            f"vllm bench serve --seed), so the machine is what differs: the replay's seed-to-seed spread, the "
            f"machine's speed drift {det['speed_drift_pct']:.2f}% ({det['speed_drift_source']}), acceptance-length "
            f"drift {det['acceptance_drift_pct']:.1f}%; a change is visible when above 1.96 x sqrt(2) x SD")


def ab_rows(ab: dict[str, Any]) -> list[dict[str, Any]]:
    """The A/B table, one row per metric and strategy (changes in % of the baseline replay - the strategy the run
    ran, `ab["reference"]` - seed by seed); what `simulate`'s text, CSV and the dashboard's tab show."""
    rows = []
    nan = math.nan
    for m in ab["metrics"]:
        base = ab["strategies"][ab["reference"]][m]["value"]
        for s, table in ab["strategies"].items():
            c = table[m]
            ci = ab["changes_pct"].get(s, {}).get(m)
            cell = ab["detectable"]["strategies"].get(s, {}).get(m)
            rows.append({"metric": m, "strategy": s, "measured": ab["baseline"].get(m, nan), "value": c["value"],
                         "low_90": c["low"], "high_90": c["high"],
                         "change_pct": 100 * (c["value"] - base) / base if base else 0.0,
                         # the baseline against itself: 0 at every seed (the same seeds for every strategy)
                         "change_low_pct": ci["low"] if ci else 0.0, "change_high_pct": ci["high"] if ci else 0.0,
                         "noise_pct": ab["detectable"]["noise"].get(m, {}).get("resolves_above_pct", nan),
                         "visible": None if cell is None else bool(cell["visible"]),
                         "repeats_needed": None if cell is None else cell["repeats_needed"],
                         "verdict": _verdict(ab, s, m)})
    return rows


def change_rows(ab: dict[str, Any]) -> list[dict[str, Any]]:
    """Per metric and non-baseline strategy: change_pct [change_low_pct, change_high_pct] and noise_pct, the
    |change| one A/B of the run's size resolves (1.96 x sqrt(2) x the run's noise SD)."""
    return [{k: r[k] for k in ("metric", "strategy", "change_pct", "change_low_pct", "change_high_pct", "noise_pct")}
            for r in ab_rows(ab) if r["strategy"] != ab["reference"]]
