"""One `vllm bench serve --save-result` run, per request, for `simulate`: `BenchRun` and `parse_bench_run`.

`costmodel.serving.workload` turns such a file into a decode batch distribution; `simulate` replays the run, so it
keeps every request: `input_lens[i]`, `output_lens[i]` (tokens), `ttfts[i]` (s) and `itls[i]` (the list of
inter-chunk gaps of request i, s; vLLM `vllm/benchmarks/serve.py` `calculate_metrics`), and the run's
`duration` (s), `start_times[i]` (when the client sent it, one clock) and `latencies[i]` (sent to last token,
s) where the file has them (`--save-detailed`), `request_rate` (requests/s, `inf` = all at once; JSON has no
`inf`, so the string "inf" or a missing key), `max_concurrency` (client-side cap, or absent), `completed`, and
the aggregate metrics under vLLM's names (`output_throughput`, `mean_ttft_ms`, `median_ttft_ms`, `p99_ttft_ms`,
...) where present.

Mean acceptance length (tokens per decode step per request): the file's `spec_decode_acceptance_length` (what
vLLM's bench writes) / `acceptance_length` / `mean_acceptance_length` where present, else tokens per streamed
chunk, `sum(output_len - 1) / sum(len(itls))` (one chunk per decode step), else the caller's `--acceptance-length`:
the file wins over the flag, and `acceptance_source` says which one it was. A stated value outside 1..K+1 is
refused (`check_bench_acceptance`).

Fields the reader does not use (`generated_texts`, `errors`, anything a newer vLLM adds) are dropped before the
strict JSON checks (`BENCH_FIELDS`): a NUL character or a lone surrogate in a random model's generated text never
makes it refuse a file; what it uses keeps its bounds and one-line errors.

Bounds (docs/limits.md, tests/serving/test_run.py): the file is read only up to MAX_BENCH_BYTES (20 MiB,
so a 50 MB file is refused before parsing), at most MAX_VALUES commas (counted before parsing), MAX_REQUESTS
requests and MAX_GAPS inter-token gaps in all;
every array must have one entry per completed request; times finite and >= 0, lengths whole numbers >= 0 (output
>= 1). Nothing is executed or unpickled: strict JSON only (`costmodel.io.safe_io.loads_json`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..answers.workload import BENCH_FIELDS, MAX_SECONDS, MAX_TOKENS, _number, _numbers, example_path
from ..io.errors import InputError
from ..io.safe_io import loads_json, read_text

MAX_BENCH_BYTES = 20 * 1024 * 1024
# a file's own acceptance length: vLLM's bench writes spec_decode_acceptance_length (vllm/benchmarks/serve.py, the
# speculative stats' to_result_dict); the other two are older / hand-made files' names
STATED_ACCEPTANCE_KEYS = ("spec_decode_acceptance_length", "acceptance_length", "mean_acceptance_length")
FILE_SOURCE = "the file's "  # acceptance_source: FILE_SOURCE + the key (or its tokens per chunk), else the flag
MAX_CLOCK_SECONDS = 1e10  # start_times are a client clock (time.perf_counter: seconds since some boot), not durations
MAX_REQUESTS = 100_000
MAX_GAPS = 2_000_000  # inter-token gaps over all requests (16 MB as float64)
MAX_VALUES = MAX_GAPS + 8 * MAX_REQUESTS  # commas in the text, counted before parsing (JSON values, roughly)
METRICS = ("output_throughput", "total_token_throughput", "request_throughput", "mean_tpot_ms", "mean_itl_ms",
           "mean_ttft_ms", "mean_e2el_ms")
PERCENTILE_METRICS = tuple(f"{stat}_{m}_ms" for m in ("ttft", "tpot", "e2el") for stat in ("median", "p99"))


@dataclass(frozen=True, eq=False)  # arrays inside: compared by identity
class BenchRun:
    """A serving run's requests (module doc). itl_sum_s / itl_count: per request, the sum and number of its
    inter-chunk gaps (None when the file has no itls); reported: the file's own aggregate metrics."""

    input_lens: np.ndarray
    output_lens: np.ndarray
    ttfts_s: np.ndarray | None
    itl_sum_s: np.ndarray | None
    itl_count: np.ndarray | None
    duration_s: float | None
    request_rate: float  # requests/s; math.inf = all at once
    max_concurrency: int | None
    acceptance_length: float | None
    name: str = ""
    reported: dict[str, float] = field(default_factory=dict)
    gaps_s: np.ndarray | None = None  # every inter-chunk gap, request by request (for the calibration)
    note: str = ""  # the file's own `note` (e.g. "synthetic example ... (not a measurement)"), plain text, <= 200 chars
    acceptance_source: str = ""  # where acceptance_length came from (the file's key, its chunks, or the flag)
    start_times_s: np.ndarray | None = None  # per request: when the client sent it (one clock, s; --save-detailed)
    latencies_s: np.ndarray | None = None  # per request: sent to last token (s)

    @property
    def n(self) -> int:
        return int(self.output_lens.size)

    @property
    def has_timeline(self) -> bool:
        """Whether the run has per-request TTFTs and ITLs (needed to calibrate the step time)."""
        return self.ttfts_s is not None and self.itl_sum_s is not None and self.duration_s is not None


def _rate(data: dict[str, Any], name: str) -> float:
    value = data.get("request_rate", "inf")
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
        return math.inf
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise InputError(f"bench {name}: request_rate must be a number > 0 or \"inf\"")
    return float(value)


def _lens(data: dict[str, Any], key: str, name: str) -> np.ndarray | None:
    if data.get(key) is None:
        return None
    arr = _numbers(data[key], key, name, MAX_TOKENS)
    if (arr != np.round(arr)).any():
        raise InputError(f"bench {name}: {key} must hold whole numbers of tokens")
    return arr


def parse_bench_run(data: Any, name: str = "bench.json", acceptance_length: float | None = None) -> BenchRun:
    """A `BenchRun` from a parsed bench JSON (module doc); InputError with one line on anything else."""
    name = Path(name).name
    if not isinstance(data, dict):
        raise InputError(f"bench {name}: a vllm bench serve result is a JSON object")
    for key in ("input_lens", "output_lens", "ttfts", "itls"):
        if isinstance(data.get(key), list) and len(data[key]) > MAX_REQUESTS:
            raise InputError(f"bench {name}: {len(data[key])} requests in {key}, more than {MAX_REQUESTS}")
    out = _lens(data, "output_lens", name)
    inp = _lens(data, "input_lens", name)
    if out is None or inp is None:
        raise InputError(f"bench {name}: needs per-request input_lens and output_lens - is this a "
                         "`vllm bench serve --save-result` file?")
    if out.size == 0:
        raise InputError(f"bench {name}: no requests")
    if (out < 1).any():
        raise InputError(f"bench {name}: output_lens must be >= 1 (a failed request has no output)")
    n = out.size
    completed = _number(data, "completed", name)
    sizes = {"input_lens": inp.size, **({"completed": int(completed)} if completed is not None else {})}
    ttfts = None
    if data.get("ttfts") is not None:
        ttfts = _numbers(data["ttfts"], "ttfts", name, MAX_SECONDS)
        sizes["ttfts"] = ttfts.size
    itls = data.get("itls")
    itl_sum = itl_count = gaps = None
    if itls is not None:
        if not (isinstance(itls, list) and all(isinstance(x, list) for x in itls)):
            raise InputError(f"bench {name}: itls must be a list of per-request lists of numbers (seconds)")
        sizes["itls"] = len(itls)
        total = sum(len(x) for x in itls)
        if total > MAX_GAPS:
            raise InputError(f"bench {name}: {total} inter-token gaps, more than {MAX_GAPS}")
        count = np.fromiter((len(x) for x in itls), dtype=np.int64, count=len(itls))
        gaps = _numbers([g for req in itls for g in req], "itls", name, MAX_SECONDS)
        itl_count = count
        itl_sum = np.bincount(np.repeat(np.arange(count.size), count), weights=gaps, minlength=count.size)
    timeline_arrays = {}
    for key, limit in (("start_times", MAX_CLOCK_SECONDS), ("latencies", MAX_SECONDS)):
        if data.get(key) is not None:
            timeline_arrays[key] = _numbers(data[key], key, name, limit)
            sizes[key] = timeline_arrays[key].size
    wrong = {k: v for k, v in sizes.items() if v != n}
    if wrong:
        key, size = next(iter(wrong.items()))
        raise InputError(f"bench {name}: {key} has {size} entries but output_lens has {n} (lengths must agree)")
    if itl_count is not None and (itl_count > out).any():
        raise InputError(f"bench {name}: a request has more inter-token gaps than output tokens")
    duration = _number(data, "duration", name, positive=True)
    cap = _number(data, "max_concurrency", name)
    if cap is not None and (cap != round(cap) or cap < 1):
        raise InputError(f"bench {name}: max_concurrency must be a whole number >= 1")
    acc, source = None, ""
    for key in STATED_ACCEPTANCE_KEYS:
        if acc is None and (acc := _number(data, key, name, positive=True)) is not None:
            source = FILE_SOURCE + key
    if acc is None and itl_count is not None and itl_count.sum() > 0:
        acc, source = float((out - 1).sum() / itl_count.sum()), FILE_SOURCE + "tokens per streamed chunk"
    if acc is None and acceptance_length is not None:
        acc, source = acceptance_length, "--acceptance-length"
    reported = {k: float(v) for k in (*METRICS, *PERCENTILE_METRICS, "median_itl_ms", "p99_itl_ms")
                if (v := _number(data, k, name)) is not None}
    note = data.get("note")
    return BenchRun(inp, out, ttfts, itl_sum, itl_count, duration, _rate(data, name),
                    None if cap is None else int(cap), acc, name, reported, gaps,
                    note[:200] if isinstance(note, str) else "", source, timeline_arrays.get("start_times"),
                    timeline_arrays.get("latencies"))


def check_bench_acceptance(run: BenchRun, k: int) -> None:
    """A file's stated acceptance length (mean tokens per decode step) must lie in 1..K+1, as the flag must
    (`costmodel.answers.question.check_acceptance`): InputError naming the file and the key. Tokens per streamed
    chunk are not checked here: a server that streams several steps per chunk (a stream interval) shows more."""
    acc = run.acceptance_length
    key = run.acceptance_source.removeprefix(FILE_SOURCE)
    if acc is not None and key in STATED_ACCEPTANCE_KEYS and not 1.0 <= acc <= k + 1:
        raise InputError(f"bench {run.name}: {key} {acc:g} is outside 1..K+1 = 1..{k + 1} tokens per decode step "
                         f"with K = {k} (the file's value wins over --acceptance-length; give the K the run used)")


def load_bench_run(path: str | Path, acceptance_length: float | None = None) -> BenchRun:
    """Read (bounded: MAX_BENCH_BYTES) and parse a bench JSON; a bare name of a bundled example reads it."""
    path = example_path(path)
    text = read_text(path, limit_bytes=MAX_BENCH_BYTES, what="bench")
    return parse_bench_text(text, Path(path).name, acceptance_length)


def parse_bench_text(text: str, name: str = "bench.json", acceptance_length: float | None = None) -> BenchRun:
    """`parse_bench_run` of a JSON text, refused before parsing when it holds more than MAX_VALUES values
    (a comma count: a 10^7-request file is refused in milliseconds, not parsed into 10^7 Python objects)."""
    if text.count(",") > MAX_VALUES:
        raise InputError(f"bench {name}: more than {MAX_VALUES} values (at most {MAX_REQUESTS} requests and "
                         f"{MAX_GAPS} inter-token gaps)")
    return parse_bench_run(loads_json(text, f"bench {name}", keys=BENCH_FIELDS), name, acceptance_length)


def synthetic_run(num_prompts: int, input_len: int, output_len: int, request_rate: float,
                  max_concurrency: int | None, acceptance_length: float | None, name: str = "flags",
                  lengths: tuple[np.ndarray, np.ndarray] | None = None) -> BenchRun:
    """A run from the flags a user knows (`vllm bench serve --num-prompts --random-input-len ...`), or from a
    prompt file's (input, output) `lengths` (its first num_prompts): no timeline."""
    if not 1 <= num_prompts <= MAX_REQUESTS:
        raise InputError(f"--num-prompts must be in 1..{MAX_REQUESTS}")
    if lengths is not None:
        inp, out = lengths[0][:num_prompts], lengths[1][:num_prompts]
    else:
        inp, out = np.full(num_prompts, float(input_len)), np.full(num_prompts, float(output_len))
    return BenchRun(inp, out, None, None, None, None, request_rate, max_concurrency, acceptance_length, name)


def sharegpt_lengths(text: str, name: str = "prompts.json") -> tuple[np.ndarray, np.ndarray]:
    """(input, output) lengths of a ShareGPT-format file's two-turn conversations (`[{"conversations": [{"value":
    prompt}, {"value": reply}, ...]}, ...]`, as `vllm bench serve --dataset-name sharegpt` reads it), in tokens
    estimated as ceil(characters / 4) - no tokenizer here, so lengths are approximate; at most MAX_REQUESTS."""
    if text.count(",") > MAX_VALUES:
        raise InputError(f"prompts {name}: more than {MAX_VALUES} values")
    data = loads_json(text, f"prompts {name}")
    if not isinstance(data, list):
        raise InputError(f"prompts {name}: a ShareGPT file is a JSON list of conversations")
    inp: list[float] = []
    out: list[float] = []
    for item in data:
        turns = item.get("conversations") if isinstance(item, dict) else None
        if (isinstance(turns, list) and len(turns) >= 2
                and all(isinstance(t, dict) and isinstance(t.get("value"), str) for t in turns[:2])):
            inp.append(max(1, -(-len(turns[0]["value"]) // 4)))
            out.append(max(1, -(-len(turns[1]["value"]) // 4)))
        if len(out) >= MAX_REQUESTS:
            break
    if not out:
        raise InputError(f"prompts {name}: no two-turn conversations (a ShareGPT file: [{{\"conversations\": "
                         "[{\"value\": ...}, {\"value\": ...}]}, ...])")
    return np.asarray(inp, dtype=float), np.asarray(out, dtype=float)


def load_sharegpt(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """`sharegpt_lengths` of a file (bounded read: MAX_BENCH_BYTES)."""
    return sharegpt_lengths(read_text(path, limit_bytes=MAX_BENCH_BYTES, what="prompts"), Path(path).name)

