"""A discrete-event model of vLLM's scheduler replaying a serving run: `simulate_runs`.

Why a vectorized loop and not SimPy: the engine is one clocked loop - every event happens at a step boundary
(admission, prefill chunks, token emission, completion) - so an "event" is one engine step, and `simulate` needs
R = strategies x seeds replicas of the same run. Here the R replicas advance together, one engine step each per
iteration, as numpy operations over an (R, slots) state: the Python overhead is paid once per step for all
replicas (1000 requests x 5 strategies x 32 seeds: ~1 s on 2 cores, scripts/bench_cli.py), where SimPy would pay a
generator switch per request and step per replica (~100x more interpreter work). Each replica keeps its own clock.

Per replica and engine step starting at time t (vLLM v1 `Scheduler.schedule`, FCFS, chunked prefill):

* the client (vllm/benchmarks/serve.py `benchmark`: an asyncio semaphore of `--max-concurrency` C around each
  request) sends request i at sent_i = max(a_i, F_{i-C}), a_i its arrival (the run's own send times, or drawn),
  F_j the j-th completion (0-based, in completion order; no cap: sent_i = a_i). TTFT and E2EL count from sent_i.
* admission (vllm/v1/core/sched/scheduler.py `Scheduler.schedule`, FCFS): while a server slot is free (slots =
  max_num_seqs, at most C), the next sent request whose ready_i <= t takes it; the rest wait in the server's
  queue (their wait is inside TTFT). ready_i is when the engine sees it: the front end (the API server's HTTP,
  tokenization and hand-over; vllm/entrypoints/openai and vllm/v1/engine/async_llm.py `AsyncLLM.add_request`)
  takes lag_i after the send, in order: ready_i = max(sent_i + lag_i, ready_{i-1}); where the run shows when the
  engine saw each request and the client did not cap (`seen_s`), ready_i = seen_i. Both are measured on the run
  (`costmodel.serving.step_fit`): a burst reaches the engine spread out, so its first steps prefill a few each.
* token budget max_num_batched_tokens: each decoding request schedules 1 + K tokens; what is left goes to ready
  prefills, slot by slot, chunk = min(left, remaining prompt) (slot order approximates FCFS).
* step time, us:  T = alpha + beta * n_decode + gamma * prefill_tokens + delta[r, n_draft]
  (alpha, beta, gamma: the target step calibrated from the baseline run; delta: the strategy's whole draft step
  minus the baseline's at n_draft = requests drafting this step, decode + prefills completing).
* a prefill that completes emits the first token at the step's end (TTFT = end - start); a decoding request emits
  min(1 + a, remaining) tokens as one streamed chunk, a = accepted drafts ~ min(K, Geometric) with
  P(a >= j) = p^j (`acceptance_rate` inverts the mean acceptance length L = sum_{j=0..K} p^j; one L for all, or
  one per request: a prompt's drafts are accepted more or less often than another's); ITL = the gap
  between its chunks. a is drawn per (seed, request, decode step), so every strategy of a seed sees the same
  acceptances and arrivals (common random numbers: the A/B's difference is the step time's alone).

ITL percentiles (`median_itl_ms`, `p99_itl_ms`, only when asked: `itl_hist`) come from a per-replica histogram of
every gap in ITL_BINS log-spaced bins (within 0.4%), not from a list of the gaps, so memory stays O(R x bins).

Bounds: at most MAX_STEPS engine steps per call (InputError beyond: the run is too long to replay); memory is
O(R x requests) plus the acceptance table (MAX_TABLE entries, beyond it one shared stream per replica).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..io.errors import InputError

MAX_STEPS = 400_000
NOISE_DRAWS = 4096  # step-jitter draws per seed, reused cyclically
MAX_TABLE = 40_000_000  # uint8 acceptance draws, seeds x requests x max output
ITL_BINS = 2000  # log-spaced 1 us .. 10 s: each bin spans 0.8%, so an ITL percentile is within 0.4%
ITL_EDGES_US = np.logspace(0, 7, ITL_BINS + 1)


@dataclass(frozen=True)
class StepModel:
    """Target step time, us = (alpha_us + beta_us * n_decode + gamma_us * prefill_tokens) x (1 + e), e drawn per
    step from the fit's relative residuals on decode-only steps (`noise_rel`) or on steps with prefill tokens
    (`noise_prefill_rel`) - a real engine's steps jitter (step_fit) -, 0 without."""

    alpha_us: float
    beta_us: float = 0.0
    gamma_us: float = 0.0
    noise_rel: tuple[float, ...] = ()
    noise_prefill_rel: tuple[float, ...] = ()


@dataclass(frozen=True, eq=False)
class SimResult:
    """Per replica r and request i: ttft_s, e2el_s, itl_sum_s, itl_count (R, N); duration_s (R,)."""

    ttft_s: np.ndarray
    e2el_s: np.ndarray
    itl_sum_s: np.ndarray
    itl_count: np.ndarray
    duration_s: np.ndarray
    itl_hist: np.ndarray | None = None  # (R, ITL_BINS) counts of inter-chunk gaps per ITL_EDGES_US bin, when asked


def acceptance_rate(length: float | np.ndarray, k: int) -> float | np.ndarray:
    """p with sum_{j=0..k} p^j = length (1 <= length <= k + 1), by bisection (the mean is increasing in p); one
    length or an array of them (one per request)."""
    lengths = np.asarray(length, dtype=float)
    if k == 0:
        p = np.zeros_like(lengths)
    else:
        lo, hi = np.zeros_like(lengths), np.ones_like(lengths)
        for _ in range(60):
            mid = (lo + hi) / 2
            below = sum(mid ** j for j in range(k + 1)) < lengths
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        p = np.where(lengths <= 1.0, 0.0, np.where(lengths >= k + 1, 1.0, (lo + hi) / 2))
    return float(p) if p.ndim == 0 else p


def arrivals(n: int, rate: float, seeds: int, rng: np.random.Generator) -> np.ndarray:
    """(seeds, n) send times, s: all 0 for rate inf, else a Poisson process (exponential gaps of mean 1/rate)."""
    if math.isinf(rate):
        return np.zeros((seeds, n))
    gaps = rng.exponential(1.0 / rate, size=(seeds, n))
    gaps[:, 0] = 0.0  # the first request is sent at once (vllm bench serve's get_request)
    return np.cumsum(gaps, axis=1)


def _draws(rng: np.random.Generator, shape: tuple[int, ...], p: float | np.ndarray, k: int) -> np.ndarray:
    """Accepted drafts min(k, floor(log u / log p)), P(a >= j) = p^j; p one rate or an array broadcast to shape."""
    if np.ndim(p) == 0:
        if k == 0 or p <= 0:
            return np.zeros(shape, dtype=np.uint8)
        if p >= 1:
            return np.full(shape, k, dtype=np.uint8)
        u = rng.random(shape)
        return np.minimum(k, np.floor(np.log(u) / math.log(p))).astype(np.uint8)
    if k == 0:
        return np.zeros(shape, dtype=np.uint8)
    u = rng.random(shape)
    rate = np.clip(np.broadcast_to(p, shape), 1e-300, 1.0 - 1e-16)
    a = np.where(np.broadcast_to(p, shape) >= 1.0, k, np.floor(np.log(u) / np.log(rate)))
    return np.minimum(k, np.where(np.broadcast_to(p, shape) <= 0.0, 0, a)).astype(np.uint8)


def simulate_runs(input_lens: np.ndarray, output_lens: np.ndarray, send_s: np.ndarray, seed_of: np.ndarray,
                  step: StepModel, delta_us: np.ndarray, *, k: int, acceptance_length: float | np.ndarray, slots: int,
                  client_cap: int | None, max_batched_tokens: int, front_end_s: float | np.ndarray = 0.0,
                  seen_s: np.ndarray | None = None, rng_seed: int = 0, itl_hist: bool = False) -> SimResult:
    """Replay the requests (input_lens, output_lens: (N,)) in R replicas (module doc). send_s: (S, N) arrival
    times a_i per seed, ascending; seed_of: (R,) each replica's seed; slots: the server's max_num_seqs; client_cap:
    the client's max_concurrency C (None: none); delta_us: (R, slots + 1) the draft difference per decode step at
    n_draft = 0..slots; acceptance_length: one for all, or (N,) per request; front_end_s: the front end's lag, one
    for all or (N,) per request; seen_s: (N,) when the engine saw each request, ascending, where the run shows it
    (no client cap: it replaces the lag)."""
    inp = np.maximum(np.asarray(input_lens, dtype=np.int64), 1)  # every request prefills at least one token
    out = np.asarray(output_lens, dtype=np.int64)
    n, r_count = out.size, seed_of.size
    seeds = send_s.shape[0]
    rng = np.random.default_rng(rng_seed)
    p = acceptance_rate(acceptance_length, k)
    jmax = int(out.max())
    per_request = np.ndim(p) == 1  # one acceptance rate per request (its prompt's), else one for all
    table = (_draws(rng, (seeds, n, jmax), p[None, :, None] if per_request else p, k).reshape(-1)
             if seeds * n * jmax <= MAX_TABLE else None)
    seed_base = (seed_of * n * jmax)[:, None]  # flat index of (seed, request, decode step) in the table
    send = send_s[seed_of]  # (R, N)
    slot_req = np.full((r_count, slots), -1, dtype=np.int64)
    start = np.zeros((r_count, slots))
    ready = np.zeros((r_count, slots))
    completed = np.zeros((r_count, n))  # F: completion times in completion order, per replica
    cap = n if client_cap is None else max(1, int(client_cap))
    fe = (np.broadcast_to(np.asarray(front_end_s, dtype=float), (n,)),
          None if seen_s is None else np.asarray(seen_s, dtype=float))
    # step jitter: per seed, NOISE_DRAWS draws of the fit's relative residuals, taken in step order (the same for
    # every strategy of a seed: common random numbers); a generator of its own, so the acceptance draws stay put
    jitter_rng = np.random.default_rng(rng_seed + 1)
    noise, noise_pre = (jitter_rng.choice(np.asarray(pool), size=(seeds, NOISE_DRAWS)) if pool else None
                        for pool in (step.noise_rel, step.noise_prefill_rel))
    steps_run = np.zeros(r_count, dtype=np.int64)
    last_ready = np.full(r_count, -np.inf)  # ready time of the last request admitted
    ar = np.arange(r_count)
    pre_left = np.zeros((r_count, slots), dtype=np.int64)
    out_left = np.zeros((r_count, slots), dtype=np.int64)
    last_tok = np.zeros((r_count, slots))
    dsteps = np.zeros((r_count, slots), dtype=np.int64)
    slot_isum = np.zeros((r_count, slots))
    slot_icnt = np.zeros((r_count, slots), dtype=np.int64)
    ttft = np.zeros((r_count, n))
    e2el = np.zeros((r_count, n))
    itl_sum = np.zeros((r_count, n))
    itl_cnt = np.zeros((r_count, n), dtype=np.int64)
    t = send.min(axis=1)
    nxt = np.zeros(r_count, dtype=np.int64)
    done = np.zeros(r_count, dtype=np.int64)
    finish = np.zeros(r_count)
    budget_dec = 1 + k
    zeros_slots, zeros_r = np.zeros((r_count, slots), dtype=np.int64), np.zeros(r_count, dtype=np.int64)
    hist = np.zeros(r_count * ITL_BINS, dtype=np.int64) if itl_hist else None
    pending_bins: list[np.ndarray] = []
    for _ in range(MAX_STEPS):
        live = done < n
        if not live.any():
            break
        # admission: the next arrived requests into free slots, in order
        free = slot_req < 0
        nfree = free.sum(axis=1)
        open_ = (nfree > 0) & (nxt < n)
        width = int(nfree[open_].max()) if open_.any() else 0
        if width:  # one window of the next `width` requests per replica: who is sent, and seen, by now
            j = np.arange(width)
            idx = nxt[:, None] + j
            sent, when = _ready(send, completed, done, idx, cap, last_ready, fe)
            arrived = (idx < n) & (when <= t[:, None]) & (j < nfree[:, None])
            take = arrived.sum(axis=1)  # a prefix: ready times are ascending in i
            rank = np.cumsum(free, axis=1) - 1
            admit = free & (rank < take[:, None]) & live[:, None]
            req = nxt[:, None] + rank
            if admit.any():
                pick = (ar[:, None], np.minimum(np.maximum(rank, 0), width - 1))
                s0, r0 = sent[pick], when[pick]
                slot_req = np.where(admit, req, slot_req)
                start = np.where(admit, s0, start)
                ready = np.where(admit, r0, ready)
                last_ready = np.where(take > 0, when[ar, np.maximum(take - 1, 0)], last_ready)
                pre_left = np.where(admit, inp[np.minimum(req, n - 1)], pre_left)
                out_left = np.where(admit, out[np.minimum(req, n - 1)], out_left)
                dsteps = np.where(admit, 0, dsteps)
                slot_isum = np.where(admit, 0.0, slot_isum)
                slot_icnt = np.where(admit, 0, slot_icnt)
                nxt = nxt + np.where(live, take, 0)
        busy = slot_req >= 0
        pending = pre_left > 0  # only a busy slot has prompt tokens left
        dec = busy & ~pending
        n_dec = dec.sum(axis=1)
        cand = pending & (ready <= t[:, None]) if pending.any() else pending
        if cand.any():
            left = np.maximum(max_batched_tokens - n_dec * budget_dec, 0)
            need = np.where(cand, pre_left, 0)
            before = np.cumsum(need, axis=1) - need
            chunk = np.clip(left[:, None] - before, 0, need)
            completes = cand & (chunk == pre_left)
            prefill_tokens = chunk.sum(axis=1)
        else:
            chunk, completes, prefill_tokens = zeros_slots, cand, zeros_r
        work = live & ((n_dec > 0) | (prefill_tokens > 0))
        # replicas with nothing to run jump to their next event (a ready prefill or an arrival into a free slot)
        idle = live & ~work
        if idle.any():
            waiting = np.where(busy & (pre_left > 0), ready, np.inf).min(axis=1)
            has_free = (~busy).any(axis=1) & (nxt < n)
            arrival = np.where(has_free, _ready(send, completed, done, nxt[:, None], cap, last_ready, fe)[1][:, 0],
                               np.inf)
            t = np.where(idle, np.maximum(t, np.minimum(waiting, arrival)), t)
        if not work.any():
            continue
        n_draft = n_dec + completes.sum(axis=1)
        jitter = 1.0
        if noise is not None or noise_pre is not None:
            draw = steps_run % NOISE_DRAWS
            jitter = 1.0 + np.where(prefill_tokens > 0, 0.0 if noise_pre is None else noise_pre[seed_of, draw],
                                    0.0 if noise is None else noise[seed_of, draw])
            steps_run += work
        dt_us = ((step.alpha_us + step.beta_us * n_dec + step.gamma_us * prefill_tokens) * jitter
                 + delta_us[np.arange(r_count), n_draft])
        end = t + np.maximum(dt_us, 0.0) * 1e-6
        act = work[:, None]
        endc = end[:, None]
        # decode: one chunk of min(1 + accepted, remaining) tokens
        step_dec = dec & act
        reqc = np.minimum(slot_req, n - 1)
        # dsteps < output_len <= jmax for every busy slot (a request decodes at most output_len - 1 times)
        acc = (np.take(table, seed_base + reqc * jmax + dsteps) if table is not None
               else _draws(rng, slot_req.shape, p[reqc] if per_request else p, k))
        emitted = np.where(step_dec, np.minimum(1 + acc.astype(np.int64), out_left), 0)
        slot_isum += np.where(step_dec, endc - last_tok, 0.0)  # per slot; written per request when it finishes
        slot_icnt += step_dec
        if hist is not None:  # every gap's bin, counted in batches (bounded memory)
            rr, cc = np.nonzero(step_dec)
            gap_us = (end[rr] - last_tok[rr, cc]) * 1e6
            pending_bins.append(rr * ITL_BINS + np.clip(np.searchsorted(ITL_EDGES_US, gap_us) - 1, 0, ITL_BINS - 1))
            if len(pending_bins) >= 256:
                hist += np.bincount(np.concatenate(pending_bins), minlength=hist.size)
                pending_bins.clear()
        out_left = out_left - emitted
        dsteps = dsteps + step_dec
        last_tok = np.where(step_dec, endc, last_tok)
        # prefill chunks; a completed prefill emits the first token
        first = completes & act
        if first.any() or prefill_tokens.any():
            pre_left = pre_left - np.where(act, chunk, 0)
            rr, cc = np.nonzero(first)
            ttft[rr, reqc[rr, cc]] = end[rr] - start[rr, cc]
            out_left = out_left - first
            last_tok = np.where(first, endc, last_tok)
        fin = busy & act & (pre_left == 0) & (out_left <= 0)
        if fin.any():
            rr, cc = np.nonzero(fin)  # a request holds one slot: no (replica, request) pair twice
            e2el[rr, reqc[rr, cc]] = end[rr] - start[rr, cc]
            itl_sum[rr, reqc[rr, cc]] = slot_isum[rr, cc]
            itl_cnt[rr, reqc[rr, cc]] = slot_icnt[rr, cc]
            order = np.arange(rr.size) - np.searchsorted(rr, rr)  # rank among the replica's finishers (rr sorted)
            completed[rr, done[rr] + order] = end[rr]
            done = done + fin.sum(axis=1)
            finish = np.where(fin.any(axis=1), end, finish)
            slot_req = np.where(fin, -1, slot_req)
        t = np.where(work, end, t)
    else:
        raise InputError(f"simulate: the run needs more than {MAX_STEPS} engine steps to replay (fewer requests "
                         "or shorter outputs)")
    if hist is not None and pending_bins:
        hist += np.bincount(np.concatenate(pending_bins), minlength=hist.size)
    return SimResult(ttft, e2el, itl_sum, itl_cnt, finish - send.min(axis=1),
                     None if hist is None else hist.reshape(r_count, ITL_BINS))


def _ready(send: np.ndarray, completed: np.ndarray, done: np.ndarray, idx: np.ndarray, cap: int,
           last_ready: np.ndarray, fe: tuple[np.ndarray, np.ndarray | None]) -> tuple[np.ndarray, np.ndarray]:
    """(sent, ready) of the consecutive requests idx (R, W) after the last admitted one (module doc):
    sent_i = max(a_i, F_{i-C}), inf while fewer than i - C + 1 have completed or past the last request;
    ready_i = seen_i where given, else max(sent_i + lag_i, ready_{i-1}), unrolled over the window as
    ready_{nxt+j} = max(last_ready, max_{j' <= j} (sent_{nxt+j'} + lag_{nxt+j'}))."""
    n = send.shape[1]
    rows = np.arange(send.shape[0])[:, None]
    i = np.minimum(idx, n - 1)
    prior = idx - cap  # the completion that frees request idx's client slot
    freed = np.where(prior >= 0, completed[rows, np.minimum(np.maximum(prior, 0), n - 1)], -np.inf)
    sent = np.where((idx < n) & (prior < done[:, None]), np.maximum(send[rows, i], freed), np.inf)
    lag, seen = fe
    if seen is not None:
        return sent, np.where(np.isfinite(sent), seen[i], np.inf)
    return sent, np.maximum(last_ready[:, None], np.maximum.accumulate(sent + lag[i], axis=1))


def metrics(res: SimResult, input_lens: np.ndarray, output_lens: np.ndarray) -> dict[str, np.ndarray]:
    """vllm bench serve's metrics per replica (R,), as `vllm/benchmarks/serve.py calculate_metrics` defines them:
    throughputs over the run's duration; TPOT = (e2el - ttft) / (output_len - 1) over requests with output > 1;
    mean ITL = the mean of every inter-chunk gap."""
    out = np.asarray(output_lens, dtype=float)
    inp = np.asarray(input_lens, dtype=float)
    dur = res.duration_s
    multi = out > 1
    tpot = (res.e2el_s[:, multi] - res.ttft_s[:, multi]) / (out[multi] - 1) if multi.any() else np.zeros((dur.size, 1))
    cnt = res.itl_count.sum(axis=1)
    m = {"output_throughput": out.sum() / dur, "total_token_throughput": (inp.sum() + out.sum()) / dur,
         "request_throughput": out.size / dur, "mean_tpot_ms": tpot.mean(axis=1) * 1e3,
         "mean_itl_ms": np.where(cnt > 0, res.itl_sum_s.sum(axis=1) / np.maximum(cnt, 1), 0.0) * 1e3,
         "mean_ttft_ms": res.ttft_s.mean(axis=1) * 1e3, "mean_e2el_ms": res.e2el_s.mean(axis=1) * 1e3}
    for key, arr in (("ttft", res.ttft_s), ("tpot", tpot), ("e2el", res.e2el_s)):
        m[f"median_{key}_ms"] = np.percentile(arr, 50, axis=1) * 1e3
        m[f"p99_{key}_ms"] = np.percentile(arr, 99, axis=1) * 1e3
    if res.itl_hist is not None:
        m["median_itl_ms"], m["p99_itl_ms"] = (hist_percentile(res.itl_hist, q) / 1e3 for q in (50, 99))
    return m


def hist_percentile(hist: np.ndarray, q: float) -> np.ndarray:
    """Per row of an (R, ITL_BINS) histogram, the q-th percentile (us): the geometric centre of the first bin
    whose cumulative count reaches q% of the row's (0 for an empty row)."""
    cum = np.cumsum(hist, axis=1)
    target = cum[:, -1:] * q / 100.0
    idx = np.minimum((cum < target).sum(axis=1), ITL_BINS - 1)
    centre = np.sqrt(ITL_EDGES_US[:-1] * ITL_EDGES_US[1:])
    return np.where(cum[:, -1] > 0, centre[idx], 0.0)
