"""`simulate`'s answer: a serving run's A/B table per strategy, with 90% intervals and detectability.

1. Calibrate on the run itself (`costmodel.serving.step_fit.fit_step`; nothing fitted to a reported metric): the
   baseline step (target + the baseline's draft) on the run's engine steps, recovered from its chunks' arrival
   times (or on its gaps without start_times), its step jitter, token budget and front-end lag per request; the
   server's max_num_seqs (`costmodel.serving.server`); the arrivals (`inputs.send_times`): the run's own send times, or
   all at once at rate inf. Without a timeline (a run described by flags): a constant step of `--itl-ms`.
2. The draft per decode step of each strategy s at decode batch n = 1..slots: `whole_step_totals` (the one-answer
   pipeline's whole draft step, engine-composed; `draft_step_members` for the ensemble members), or where the whole
   step does not apply (`whole_step.applies`: engine none, TP 1) the per-call logits path `predict(...).total_us(s)`
   x calls per decode step (point only). delta_s(n) = T_s(n) - T_full_all_gather(n), delta(0) = 0.
3. Replay (`costmodel.serving.replay.simulate_runs`) every strategy under seeds // 2 point seeds (delta from
   the point model) and `seeds` member seeds (delta of one ensemble member drawn per seed): value = the median over
   point seeds (a replay can settle into one of two schedules - requests finishing together, or staggered - and a
   p99 differs by 2x between them: the median is the typical replay, the mean a blend no seed shows); 90% interval
   = the 5th..95th percentile over member seeds (the saving's uncertainty and the simulation's randomness
   together). The same seeds for every strategy (common random numbers), so the change against the baseline
   (`changes_pct`) is also given seed by seed, with its own 90% interval. Seeds are lowered for a large run so
   replicas x requests <= MAX_CELLS (the per-request arrays stay under ~32 MB each) and replicas x slots x
   estimated steps <= MAX_WORK (steps ~ sum(output) / (L x slots) + sum(input) / token budget); a run that exceeds
   them with 2 seeds is refused.
4. The baseline replay's error against the run (`baseline_reproduction_error_pct`), every metric the run reports.
5. Detectability (`detectability`), for an A/B of two runs paired as vLLM's bench pairs them (the same --seed and
   dataset send the same prompts in the same order at the same arrivals, and greedy decoding accepts the same drafts,
   data/serving-runs/README.md): request sampling cancels, and what differs between the two runs is the machine. Per
   metric one run's relative noise sigma = hypot(sigma_replay, sigma_speed, sigma_accept): sigma_replay = the
   baseline replay's seed-to-seed relative SD (step jitter, acceptance draws, the schedule they shift), sigma_speed =
   the machine's speed drift measured on the run (`StepFit.speed_sd_rel`; DEFAULT_SPEED_DRIFT for a run without
   engine steps, e.g. one from flags) - the floor every metric gets, with the ITL histogram's bin (HIST_FLOOR) for
   ITL percentiles -, sigma_accept = `acceptance_drift` (default 0.7%) for the metrics proportional to 1 / acceptance
   length (throughputs, TPOT, E2EL; across reruns of the bundled runs it is 0: greedy decoding). A one-run-each A/B
   resolves |change| > X = 1.96 * sqrt(2) * sigma; repeats needed = max(1, ceil((X / |Y|)^2)) for a predicted change
   Y; requests needed in one run = N * sigma_replay^2 / ((Y / (1.96 sqrt 2))^2 - sigma_speed^2 - sigma_accept^2) when
   positive (only the replay's part shrinks with more requests). A metric the baseline replay misses by more than
   REPRODUCE_PCT (issue 42's bounds: 10% for p99s, else 5%) gets no verdict (`visible` None): its change is not
   trusted at the level the noise resolves. docs/accuracy.md checks sigma against the spread of repeated real runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..answers.engine_config import engine_cannot
from ..answers.question import Question
from ..answers.whole_step import applies, whole_step_totals
from ..evidence.ensemble import ensemble
from ..io.errors import InputError
from ..model.components import BASELINE, STRATEGIES
from ..model.draft_step import parse_placement
from ..model.engines import PLANS
from ..model.fabrics import fabric_line
from ..model.members import draft_step_members
from ..model.predict import predict
from ..profiles.gpus import gpu_memory
from ..profiles.types import Profile
from .inputs import replay_inputs, request_acceptance
from .replay import MAX_STEPS, StepModel, metrics, simulate_runs
from .run import METRICS, BenchRun, check_bench_acceptance
from .server import infer_server
from .step_fit import StepFit, fit_step, timeline

Z = 1.96 * math.sqrt(2.0)
HIST_FLOOR = 0.004  # an ITL percentile comes from a histogram bin: within 0.4% (replay.ITL_BINS)
REPRODUCE_PCT = 5.0  # |baseline replay error| above it (P99_REPRODUCE_PCT for p99s): no verdict on the change
P99_REPRODUCE_PCT = 10.0
# the machine's run-to-run speed drift where a run shows no engine steps to measure it on: the median over the 23
# bundled real vLLM runs of their own measured drift (StepFit.speed_sd_rel: 0.30-10.9%, median 1.64%; 2026-12-06)
DEFAULT_SPEED_DRIFT = 0.0164
MAX_CELLS = 4_000_000  # replicas x requests: seeds are lowered (to 2 at least) to stay under it
MAX_WORK = 400_000_000  # replicas x slots x estimated engine steps (~30 s on 2 cores): seeds lowered, else refused
ACCEPT_SCALED = ("output_throughput", "total_token_throughput", "request_throughput", "mean_tpot_ms",
                 "mean_e2el_ms", "median_tpot_ms", "p99_tpot_ms", "median_e2el_ms", "p99_e2el_ms")


GIB = 1 << 30


def vllm_batch_defaults(profile: Profile) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) vLLM's API server picks for the profile's GPU (vllm/engine/arg_utils.py
    `EngineArgs.get_batch_defaults`, UsageContext.OPENAI_API_SERVER): 1024 / 8192 on a GPU of >= 70 GiB that is not
    an A100, else 256 / 2048 (the GPU's memory from data/presets/gpus.csv; unknown: the smaller pair)."""
    gpu = str(profile.provenance.gpu)
    mem = gpu_memory(gpu)
    big = mem is not None and mem.memory_bytes is not None and mem.memory_bytes >= 70 * GIB
    return (1024, 8192) if big and "a100" not in gpu.lower() else (256, 2048)


@dataclass(frozen=True)
class SimConfig:
    """Engine and simulation settings: vLLM's max_num_seqs / max_num_batched_tokens (None: the engine's default
    for the profile's GPU, `vllm_batch_defaults`), seeds per strategy, RNG seed, acceptance drift."""

    max_num_seqs: int | None = None
    max_batched_tokens: int | None = None
    seeds: int = 12
    rng_seed: int = 0
    acceptance_drift: float = 0.007
    fit_part: str = "all"  # the run's busy steps the step model is fitted on: "all" or "first-half" (step_fit.PARTS)


def reference_strategy(q: Question) -> str:
    """The strategy the baseline run ran: the engine's default (`engines.PLANS[engine].default_strategy`: vLLM's
    full_all_gather, TensorRT-LLM's local_argmax_pairs, tokenspeed's packed_allreduce_max); full_all_gather under
    engine none."""
    return BASELINE if q.engine == "none" else PLANS[q.engine].default_strategy


def runnable_strategies(q: Question) -> list[str]:
    """The reference and every strategy the engine can run (`engine_config.engine_cannot`: vLLM's switch, greedy
    top-k 1 only; under engine none, every one), in STRATEGIES order with the reference first."""
    ref = reference_strategy(q)
    top_k = int(np.asarray(q.scenario.top_k).item())
    others = [s for s in STRATEGIES if s != ref and not engine_cannot(q.engine, s, str(q.scenario.collective), top_k)]
    return [ref, *others]


def draft_deltas(q: Question, n_max: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], str, np.ndarray]:
    """({s: delta_s(n), n = 0..n_max}, {s: (M, n_max + 1) per member}, how, the reference's own draft per decode
    step at n = 1..n_max): step 2 of the module doc, for the strategies the engine can run
    (`runnable_strategies`), each against the strategy the run ran."""
    ref, wanted = reference_strategy(q), runnable_strategies(q)
    batch = np.arange(1, n_max + 1, dtype=float)
    sc = q.scenario.with_(batch=batch)
    why = applies(q.scenario, q.profile, q.forward_us)
    pad = lambda a: np.concatenate([np.zeros(a.shape[:-1] + (1,)), a], axis=-1)  # noqa: E731 - delta(0) = 0
    if why:
        pred = predict(sc, q.profile)
        calls = np.asarray(sc.calls_per_decode_step, dtype=float)
        tot = {s: np.asarray(pred.total_us(s), dtype=float) * calls for s in wanted}
        point = {s: pad(tot[s] - tot[ref]) for s in tot}
        return (point, {s: v[None] for s, v in point.items()}, f"per-call logits path x calls ({why}); no members",
                tot[ref])
    tot, valid, _ = whole_step_totals(sc, q.profile, q.arch, kv_len=q.kv_len, forward_us=q.forward_us,
                                      strategies=tuple(s for s in STRATEGIES if s in wanted))
    names = [s for s in wanted if s == ref or bool(np.all(valid[s]))]
    point = {s: pad(tot[s] - tot[ref]) for s in names}
    reps, factors, _ = ensemble(q.profile, nodes=int(np.asarray(sc.nodes).flat[0]))
    priced = draft_step_members(sc, reps, parse_placement("target", int(np.max(sc.tp))), q.arch, tuple(names),
                                factors, kv_len=q.kv_len, forward_us=q.forward_us)
    members = {s: pad(priced.total_us[s] - priced.total_us[ref]) for s in names}
    return (point, members, f"whole draft step under {q.engine} (engine-composed), {len(reps)} ensemble members",
            np.asarray(tot[ref], dtype=float))


def check_fits_the_run(base_us: np.ndarray, step: StepModel, engine: str) -> None:
    """The modelled baseline's draft per decode step must fit inside the run's whole measured step (the fitted
    alpha + beta n, or --itl-ms) at every decode batch n = 1..slots the replay runs: InputError, one line, where it
    does not - the scenario (nodes, fabric, TP, profile) contradicts the run, and subtracting it would leave a
    step of zero time."""
    n = np.arange(1, base_us.size + 1)
    whole = step.alpha_us + step.beta_us * n
    over = np.flatnonzero(base_us > whole)
    if over.size:
        i = int(over[0])
        raise InputError(f"simulate: the scenario contradicts the run: its modelled draft per decode step under "
                         f"{engine} at decode batch {i + 1} is {base_us[i]:.0f} us, more than the run's whole "
                         f"measured step there ({whole[i]:.0f} us) - check --nodes, --fabric / --nic-gbps, --tp and "
                         "the profile against the run's deployment")


def measured(run: BenchRun) -> dict[str, float]:
    """The run's own metrics: the file's reported values, else computed from its per-request arrays."""
    got = dict(run.reported)
    if run.has_timeline:
        e2el = run.ttfts_s + run.itl_sum_s
        multi = run.output_lens > 1
        comp = {"mean_ttft_ms": run.ttfts_s.mean() * 1e3, "mean_e2el_ms": e2el.mean() * 1e3,
                "mean_itl_ms": run.itl_sum_s.sum() / max(run.itl_count.sum(), 1) * 1e3,
                "mean_tpot_ms": (run.itl_sum_s[multi] / (run.output_lens[multi] - 1)).mean() * 1e3,
                "output_throughput": run.output_lens.sum() / run.duration_s,
                "total_token_throughput": (run.output_lens.sum() + run.input_lens.sum()) / run.duration_s,
                "request_throughput": run.n / run.duration_s}
        got = {**comp, **got}
    return {k: float(got[k]) for k in METRICS if k in got} | {k: v for k, v in got.items() if k not in METRICS}


def _rel_sd(v: np.ndarray) -> float:
    """SD / |mean| over the finite entries (0 when there are none or the mean is 0)."""
    v = v[np.isfinite(v)]
    return float(np.std(v) / abs(np.mean(v))) if v.size and np.mean(v) else 0.0


def _change(member: np.ndarray, base: np.ndarray, point: np.ndarray, base_point: np.ndarray) -> dict[str, float]:
    """The change in %, seed by seed against the baseline's same seed: value from the point seeds' medians, 90%
    interval (5th..95th percentile) from the member seeds."""
    rel = 100 * (member - base) / np.where(base != 0, base, 1.0)
    value = _pct(float(np.median(point)), float(np.median(base_point)))
    return {"value": float(value), "low": float(np.percentile(rel, 5)), "high": float(np.percentile(rel, 95))}


def _pct(value: float, base: float) -> float:
    """100 (value - base) / base; 0 where the base is 0 (a step of zero time replays zero latencies)."""
    return 100 * (value - base) / base if base else 0.0


def _count(x: float) -> int | None:
    """ceil(x) runs / requests, at least 1, or None where no finite count resolves the change (a change ~0 or
    below the drift)."""
    return max(1, math.ceil(x)) if math.isfinite(x) else None


def _speed_drift(fit: StepFit | None) -> tuple[float, str]:
    """The machine's speed drift and where it comes from: measured on the run's engine steps, else DEFAULT_SPEED_DRIFT
    (a run from flags, or a file without start_times, shows no steps to measure it on)."""
    if fit is not None and fit.unit == "engine steps":
        return fit.speed_sd_rel, "measured on the run"
    return DEFAULT_SPEED_DRIFT, "assumed: the median of the bundled real vLLM runs' (data/serving-runs/)"


def detectability(sigma_replay: dict[str, float], changes: dict[str, dict[str, float]], n: int, drift: float,
                  speed: float = 0.0, speed_source: str = "measured on the run",
                  reproduced_pct: dict[str, float] | None = None) -> dict[str, Any]:
    """Per metric the resolvable change X% and, per strategy, visible / repeats / requests (module doc, step 5).
    sigma_replay: per metric, the replay's relative SD; speed: the machine's speed drift (relative SD);
    reproduced_pct: the baseline replay's error per metric (a miss above REPRODUCE_PCT: no verdict)."""
    out: dict[str, Any] = {"requests": n, "acceptance_drift_pct": 100 * drift, "speed_drift_pct": 100 * speed,
                           "speed_drift_source": speed_source,
                           "noise": {}, "strategies": {}}
    floor = {m: math.hypot(speed, HIST_FLOOR if m.endswith("_itl_ms") and not m.startswith("mean") else 0.0)
             for m in sigma_replay}
    fixed = {m: math.hypot(floor[m], drift if m in ACCEPT_SCALED else 0.0) for m in sigma_replay}
    for m, sr in sigma_replay.items():
        sigma = math.hypot(sr, fixed[m])
        bound = P99_REPRODUCE_PCT if m.startswith("p99") else REPRODUCE_PCT
        miss = (reproduced_pct or {}).get(m)
        out["noise"][m] = {"sd_pct": 100 * sigma, "replay_sd_pct": 100 * sr, "floor_pct": 100 * floor[m],
                           "resolves_above_pct": 100 * Z * sigma,
                           "reproduced": miss is None or abs(miss) <= bound}
    for name, ch in changes.items():
        rows = {}
        for m, y_pct in ch.items():
            if m not in out["noise"]:
                continue
            x_pct, y = out["noise"][m]["resolves_above_pct"], abs(y_pct) / 100
            room = (y / Z) ** 2 - fixed[m] ** 2
            ratio = x_pct / abs(y_pct) if y_pct else math.inf
            repeats = ratio * ratio  # float * overflows to inf where ** raises
            requests = n * sigma_replay[m] ** 2 / room if room > 0 else math.inf
            trusted = out["noise"][m]["reproduced"]
            rows[m] = {"change_pct": y_pct, "resolves_above_pct": x_pct,
                       "visible": (abs(y_pct) > x_pct) if trusted else None,
                       "repeats_needed": _count(repeats) if trusted else None,
                       "requests_needed": _count(requests) if trusted else None}
        out["strategies"][name] = rows
    return out


def replay_means(run: BenchRun, fit: StepFit, step: StepModel, *, k: int,
                 acceptance_length: float | np.ndarray, slots: int,
                 budget: int, seeds: int = 8, rng_seed: int = 0) -> dict[str, float]:
    """vllm bench serve's metrics of `run` replayed with `step` (K, acceptance length, server slots and token
    budget given), the mean over `seeds` seeds: the run's arrivals and front end (`fit`), no draft difference."""
    r = replay_inputs(run, fit, seeds, np.random.default_rng(rng_seed))
    res = simulate_runs(r.input_lens, r.output_lens, r.send_s, np.arange(seeds), step, np.zeros((seeds, slots + 1)),
                        k=k, acceptance_length=r.per_request(acceptance_length), slots=slots,
                        client_cap=run.max_concurrency, max_batched_tokens=budget, front_end_s=r.lag_s,
                        seen_s=r.seen_s, rng_seed=rng_seed, itl_hist=True)
    return {key: float(v.mean()) for key, v in metrics(res, r.input_lens, r.output_lens).items()}


def simulate_ab(run: BenchRun, q: Question, cfg: SimConfig = SimConfig()) -> dict[str, Any]:
    """The A/B table (module doc) as one JSON-ready dict."""
    k = int(np.asarray(q.scenario.num_spec_tokens).item())
    check_bench_acceptance(run, k)  # a stated value outside 1..K+1 is refused, as the flag is
    acc = run.acceptance_length if run.acceptance_length is not None else q.acceptance_length
    source = run.acceptance_source if run.acceptance_length is not None else "--acceptance-length"
    if acc is None:
        raise InputError("simulate: no acceptance length in the bench file: give --acceptance-length")
    acc = float(min(max(acc, 1.0), k + 1.0))  # tokens per streamed chunk only: several steps may share a chunk
    fit: StepFit | None = (fit_step(run, budget=cfg.max_batched_tokens, spec_tokens=k, part=cfg.fit_part)
                           if run.has_timeline else None)
    if fit is None:
        if q.itl_ms is None:
            raise InputError("simulate: a run without per-request timelines needs --itl-ms (the baseline ITL)")
        step = StepModel(q.itl_ms * 1e3)
    else:
        step = fit.step
    seqs, tokens = vllm_batch_defaults(q.profile)
    seen = infer_server(run)  # the run's own server, where it shows its cap; --max-num-seqs overrides it
    if cfg.max_num_seqs is not None:
        server = f"max_num_seqs {cfg.max_num_seqs} (--max-num-seqs)" + (f"; the run: {seen.describe()}" if seen else "")
    elif seen is not None and seen.binds:
        server, seqs = seen.describe(), seen.max_num_seqs
    else:
        server = (f"max_num_seqs {seqs}: vLLM's default for the profile's GPU" +
                  (f" ({seen.describe()})" if seen else " (the run has no per-request start_times to infer it)"))
    if cfg.max_batched_tokens is None and fit is not None and fit.budget is not None:
        tokens = fit.budget  # inferred from the run's step times
    budget = (fit.budget_source if fit is not None and fit.budget_source else
              f"max_num_batched_tokens {cfg.max_batched_tokens or tokens}" +
              (" (--max-num-batched-tokens)" if cfg.max_batched_tokens else ": vLLM's default for the profile's GPU"))
    if fit is not None and fit.budget is None and cfg.max_batched_tokens is None:
        budget += f"; replayed with vLLM's default for the profile's GPU, {tokens}"
    cfg = replace(cfg, max_num_seqs=cfg.max_num_seqs or seqs, max_batched_tokens=cfg.max_batched_tokens or tokens)
    slots = int(min(cfg.max_num_seqs, run.max_concurrency or run.n, run.n))
    if max(run.output_lens.sum() / ((k + 1) * slots), run.output_lens.max() / (k + 1)) > MAX_STEPS:
        raise InputError(f"simulate: the run needs more than {MAX_STEPS} engine steps to replay (fewer requests "
                         "or shorter outputs)")
    point, members, how, base_us = draft_deltas(q, slots)
    check_fits_the_run(base_us, step, q.engine)
    ref = reference_strategy(q)
    names = list(point)
    steps = run.output_lens.sum() / (acc * slots) + run.input_lens.sum() / cfg.max_batched_tokens
    seeds = int(min(cfg.seeds, MAX_CELLS // (2 * len(names) * run.n), MAX_WORK // (2 * len(names) * slots * steps)))
    if seeds < 2:
        raise InputError(f"simulate: {run.n} requests over {slots} slots (~{steps:.0f} engine steps) is more work than "
                         "the replay's bound (docs/limits.md): fewer requests or shorter outputs")
    cfg = replace(cfg, seeds=seeds)
    rng = np.random.default_rng(cfg.rng_seed)
    r = replay_inputs(run, fit, cfg.seeds, rng)
    inp, out = r.input_lens, r.output_lens
    seed_ids = np.arange(cfg.seeds)
    pick = rng.integers(0, next(iter(members.values())).shape[0], size=cfg.seeds)
    ps, ms, n_s = max(2, cfg.seeds // 2), cfg.seeds, len(names)  # point seeds (a mean) and member seeds (the interval)
    deltas = [np.broadcast_to(point[s], (ps, slots + 1)) for s in names] + [members[s][pick] for s in names]
    seed_of = np.concatenate([np.arange(ps)] * n_s + [seed_ids] * n_s)
    want_itl = any(x in run.reported for x in ("median_itl_ms", "p99_itl_ms"))
    res = simulate_runs(inp, out, r.send_s, seed_of, step, np.concatenate(deltas), k=k,
                        acceptance_length=r.per_request(request_acceptance(run, acc, k)), slots=slots,
                        client_cap=run.max_concurrency, max_batched_tokens=cfg.max_batched_tokens,
                        front_end_s=r.lag_s, seen_s=r.seen_s, rng_seed=cfg.rng_seed, itl_hist=want_itl)
    m = metrics(res, inp, out)
    shown = [x for x in METRICS] + [x for x in m if x not in METRICS and x in run.reported]
    pt = {s: slice(i * ps, (i + 1) * ps) for i, s in enumerate(names)}
    mb = {s: slice(n_s * ps + i * ms, n_s * ps + (i + 1) * ms) for i, s in enumerate(names)}
    strategies: dict[str, Any] = {
        s: {x: {"value": float(np.median(m[x][pt[s]])), "low": float(np.percentile(m[x][mb[s]], 5)),
                "high": float(np.percentile(m[x][mb[s]], 95))} for x in shown} for s in names}
    base_sim = strategies[ref]
    # the baseline's member replicas have delta 0: they are the baseline at every member seed (CRN pairs)
    change_ci = {s: {x: _change(m[x][mb[s]], m[x][mb[ref]], m[x][pt[s]], m[x][pt[ref]]) for x in shown}
                 for s in names if s != ref}
    meas = measured(run)
    repro = {x: 100 * (base_sim[x]["value"] - meas[x]) / meas[x] for x in shown if meas.get(x)}
    changes = {s: {x: _pct(v[x]["value"], base_sim[x]["value"]) for x in shown} for s, v in strategies.items()
               if s != ref}
    sig_replay = {x: _rel_sd(m[x][mb[ref]]) for x in shown}  # the baseline's seed-to-seed spread: a rerun's own
    return {"bench": run.name, "requests": run.n,
            "request_rate": "inf" if math.isinf(run.request_rate) else run.request_rate, "max_concurrency":
            run.max_concurrency, "slots": slots, "server": server, "acceptance_length": acc,
            "acceptance_source": source,
            "num_spec_tokens": k,
            "step_fit": fit.describe() if fit else f"constant step {step.alpha_us:.1f} us (--itl-ms)",
            "token_budget": budget, "arrivals": r.arrivals,
            "front_end_ms": 1e3 * (fit.front_end_s if fit is not None else 0.0), "draft_per_decode_step": how,
            "reference": ref, "seeds": cfg.seeds,
            "point_seeds": ps,
            "metrics": shown,
            "baseline": {x: meas[x] for x in shown if x in meas}, "baseline_reproduction_error_pct": repro,
            "strategies": strategies, "changes_pct": change_ci,
            "detectable": detectability(sig_replay, changes, run.n, cfg.acceptance_drift,
                                        *_speed_drift(fit), repro),
            "timeline_end_s": float(timeline(run)[1].max()) if run.has_timeline else None,
            "fabric": fabric_line(q.profile, int(q.scenario.nodes))}  # None on one node / the profile's own
