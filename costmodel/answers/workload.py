"""A serving workload as a distribution of decode batch sizes: `Workload(batch, weight)`.

A deployment does not run at one batch size: continuous batching changes the number of running
requests - the rows B every draft call processes - from step to step. `weight[i]` is the share of
decode steps run at `batch[i]` (weights are normalised to sum to 1). Three inputs:

* **CSV** with columns `batch,weight` (any non-negative weights; duplicate batches are summed;
  extra columns are ignored). `data/examples/chat-diurnal.csv` is an example.
* **vLLM Prometheus `/metrics` text** (one scrape, or many concatenated:
  `for i in $(seq 600); do curl -s host:8000/metrics; sleep 1; done > scrapes.txt`), parsed with
  `prometheus_client.parser.text_string_to_metric_families`. The series used is the gauge
  **`vllm:num_requests_running`** ("number of requests in model execution batches", vLLM
  `vllm/v1/metrics/loggers.py`, `PrometheusStatLogger`): every running request contributes one row
  to every draft call of the step, so the gauge *is* the draft batch B. Each sample (one per scrape
  and per engine label set - data-parallel engines run separate TP groups) is one observation;
  samples of 0 are idle time with no decode step and are dropped. The weights are shares of
  scrape time, which equal shares of decode steps when the step time varies little with B.
  Why not `vllm:iteration_tokens_total` (the tokens-per-engine-step histogram)? It counts
  *scheduled tokens*, mixing prefill chunks with decode rows, a decode row with speculation is
  1 + K tokens, and its buckets are the CUDA-graph capture sizes (`build_cudagraph_buckets`), so B
  can only be recovered as a coarse, prefill-contaminated bucket range.
* **`vllm bench serve --save-result` JSON**: read by the serving replay's one reader
  (`costmodel.serving.run`) and turned into a batch distribution by `costmodel.serving.workload` (the entry
  points `parse_workload` / `load_workload` live there, above this layer).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..io.errors import InputError, first_line
from ..profiles.store import DATA_DIR

MAX_WORKLOAD_BYTES = 20 * 1024 * 1024
MAX_BATCH = 1 << 20
MAX_DISTINCT_BATCHES = 16384  # each is priced under every replicate of the profile
RUNNING_GAUGE = "vllm:num_requests_running"
KINDS = ("auto", "csv", "vllm-metrics", "vllm-bench")
EXAMPLES_DIR = DATA_DIR / "examples"


@dataclass(frozen=True, eq=False)  # arrays inside: compared by identity
class Workload:
    """Decode batch sizes and the share of decode steps at each (ascending, unique; weights sum to 1).

    source: "csv" | "vllm-metrics" | "vllm-bench"; name: the file; method: how B was obtained;
    observations: samples behind it; hints: measured values from the file (itl_ms,
    acceptance_length) that the caller may use as the impact baseline.
    """

    batch: np.ndarray
    weight: np.ndarray
    source: str
    name: str = ""
    method: str = ""
    observations: int = 0
    hints: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        raw = np.asarray(self.batch, dtype=float).reshape(-1)
        w = np.asarray(self.weight, dtype=float).reshape(-1)
        if raw.size == 0 or raw.size != w.size:
            raise InputError(f"workload {self.name}: needs one weight per batch and at least one batch")
        if not np.isfinite(raw).all() or (raw != np.round(raw)).any() or (raw < 1).any() or (raw > MAX_BATCH).any():
            raise InputError(f"workload {self.name}: batch must be an integer in 1..{MAX_BATCH}")
        b = raw.astype(np.int64)
        if not np.isfinite(w).all() or (w < 0).any() or not (w > 0).any():
            raise InputError(f"workload {self.name}: weights must be finite, >= 0 and not all 0")
        uniq, inverse = np.unique(b, return_inverse=True)
        if uniq.size > MAX_DISTINCT_BATCHES:
            raise InputError(f"workload {self.name}: {uniq.size} distinct batch sizes, more than "
                             f"{MAX_DISTINCT_BATCHES} (bin them)")
        with np.errstate(over="ignore"):
            overflow = not np.isfinite(w.sum())
        if overflow:  # huge but finite weights (1e308): rescale before summing, the same shares
            w = w / w.max()
        summed = np.bincount(inverse, weights=w, minlength=uniq.size)
        keep = summed > 0
        object.__setattr__(self, "batch", uniq[keep])
        object.__setattr__(self, "weight", summed[keep] / summed[keep].sum())

    @property
    def mean_batch(self) -> float:
        """Step-weighted mean decode batch, sum_i w_i B_i."""
        return float(np.dot(self.weight, self.batch))

    def quantile(self, q: float) -> int:
        """Smallest batch whose cumulative step share reaches q."""
        return int(self.batch[np.searchsorted(np.cumsum(self.weight), q - 1e-12)])

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "name": self.name, "method": self.method,
                "observations": self.observations, "mean_batch": self.mean_batch,
                "p50_batch": self.quantile(0.5), "p90_batch": self.quantile(0.9),
                "min_batch": int(self.batch[0]), "max_batch": int(self.batch[-1]),
                "distinct_batches": int(self.batch.size), "hints": dict(self.hints),
                "batch": self.batch.tolist(), "weight": self.weight.tolist()}


# -- CSV ---------------------------------------------------------------------------------------------
MAX_CSV_COLUMNS = 64  # a workload table has two; the header is checked before any row is parsed
MAX_LINE_CHARS = 4096


def _csv_lines(text: str) -> list[str]:
    """The non-blank lines of `text` with `#` comments (to the end of the line) removed."""
    return [line for line in (raw.split("#", 1)[0].strip() for raw in text.splitlines()) if line]


def parse_csv(text: str, name: str = "workload.csv") -> Workload:
    """`batch,weight` rows (header required; other columns ignored; `#` starts a comment).

    The header is checked before any row is read (at most MAX_CSV_COLUMNS columns, MAX_LINE_CHARS characters a
    line, no column named twice ignoring case); every row must have as many fields as the header (a longer row
    is refused, not shifted: `8,1,3,4` under `batch,weight` is an error, not batch 3)."""
    lines = _csv_lines(text)
    if not lines:
        raise InputError(f"workload {name}: not a CSV (no header)")
    long = next((i for i, line in enumerate(lines) if len(line) > MAX_LINE_CHARS), None)
    if long is not None:
        raise InputError(f"workload {name}: a line longer than {MAX_LINE_CHARS} characters")
    header = [c.strip().lower() for c in next(csv.reader([lines[0]]))]
    if len(header) > MAX_CSV_COLUMNS:
        raise InputError(f"workload {name}: {len(header)} columns, more than {MAX_CSV_COLUMNS}")
    twice = sorted({c for c in header if header.count(c) > 1})
    if twice:
        raise InputError(f"workload {name}: column {twice[0]!r} given twice (column names ignore case)")
    missing = [c for c in ("batch", "weight") if c not in header]
    if missing:
        raise InputError(f"workload {name}: needs columns batch,weight (missing {', '.join(missing)})")
    ib, iw = header.index("batch"), header.index("weight")
    batch, weight = [], []
    for number, fields in enumerate(csv.reader(lines[1:]), start=2):
        if len(fields) != len(header):
            raise InputError(f"workload {name}: row {number}: {len(fields)} fields, the header has {len(header)}")
        b, w = fields[ib].strip(), fields[iw].strip()
        try:
            bv, wv = float(b), float(w)
        except ValueError:
            bv = wv = math.nan
        if not (math.isfinite(bv) and bv == round(bv) and math.isfinite(wv)):
            raise InputError(f"workload {name}: row {number}: batch must be an integer and weight a number, "
                             f"got {b[:40]!r},{w[:40]!r}")
        batch.append(bv)
        weight.append(wv)
    if not batch:
        raise InputError(f"workload {name}: no rows under the header")
    return Workload(np.asarray(batch).astype(np.int64), np.asarray(weight), "csv", name, "batch,weight table",
                    len(batch))


# -- vLLM /metrics -------------------------------------------------------------------------------------
def parse_metrics(text: str, name: str = "metrics.txt") -> Workload:
    """Samples of the `vllm:num_requests_running` gauge (see the module docstring for why this series)."""
    from prometheus_client.parser import text_string_to_metric_families

    values: list[float] = []
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == RUNNING_GAUGE:
                    values.append(float(sample.value))
    except Exception as exc:  # noqa: BLE001 - any parser failure on untrusted text is the file's problem
        raise InputError(f"workload {name}: not Prometheus text format ({_metrics_problem(text, exc)})") from None
    if not values:
        raise InputError(f"workload {name}: no {RUNNING_GAUGE} samples (is this a vLLM /metrics scrape?)")
    arr = np.asarray(values)
    if not np.isfinite(arr).all() or (arr < 0).any() or (arr != np.round(arr)).any():
        raise InputError(f"workload {name}: {RUNNING_GAUGE} must be a non-negative integer in every sample")
    busy = arr[arr >= 1]
    if busy.size == 0:
        raise InputError(f"workload {name}: every {RUNNING_GAUGE} sample is 0 (an idle server has no decode steps)")
    method = f"{RUNNING_GAUGE} gauge, {busy.size} busy samples ({arr.size - busy.size} idle dropped)"
    if busy.size == 1:  # one scrape is one moment: a single batch size, not a distribution of them
        method = (f"{RUNNING_GAUGE} gauge, ONE sample (batch {int(busy[0])}): a single scrape is one moment, not "
                  "a distribution of decode batches - concatenate many scrapes (e.g. one a second for 10 minutes)")
    return Workload(busy.astype(np.int64), np.ones(busy.size), "vllm-metrics", name, method, int(arr.size))


def _metrics_problem(text: str, exc: Exception) -> str:
    """What the Prometheus parser refused, in words: the first line it refuses alone (its number, and its
    message or the line itself) - the parser names neither, and some of its errors have no message at all
    ('{a="b"} 1', a sample without a metric name, read "(ValueError)")."""
    from prometheus_client.parser import text_string_to_metric_families

    for number, line in enumerate(text.splitlines(), start=1):
        try:
            for _ in text_string_to_metric_families(line + "\n"):
                pass
        except Exception as line_exc:  # noqa: BLE001 - the same untrusted text, one line of it
            message = first_line(line_exc, 100) if str(line_exc).strip() else "cannot read this sample line"
            return f"line {number}: {message}: {line.strip()[:60]!r}"
    return first_line(exc, 120) if str(exc).strip() else "the parser refused it without saying why"


# -- vllm bench serve JSON ----------------------------------------------------------------------------
MAX_TOKENS = 1e9  # per request; output lengths and token totals above it are refused as implausible
MAX_SECONDS = 1e7  # a gap or a run longer than ~4 months


def _number(data: dict[str, Any], key: str, name: str, *, positive: bool = False) -> float | None:
    """data[key] as a finite float >= 0 (> 0 when `positive`), None when absent; InputError otherwise."""
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0 \
            or (positive and value == 0):
        raise InputError(f"bench {name}: {key} must be a finite number {'> 0' if positive else '>= 0'}")
    return float(value)


def _numbers(values: Any, key: str, name: str, limit: float) -> np.ndarray:
    """A JSON list of finite numbers in [0, limit] as an array; InputError naming `key` otherwise."""
    if not isinstance(values, list) or not all(isinstance(v, int | float) and not isinstance(v, bool)
                                               for v in values):
        raise InputError(f"bench {name}: {key} must be a list of numbers")
    arr = np.asarray(values, dtype=float)
    if not np.isfinite(arr).all() or (arr < 0).any() or (arr > limit).any():
        raise InputError(f"bench {name}: {key} must hold finite numbers in 0..{limit:g}")
    return arr


# every top-level field of a `vllm bench serve` result that a reader here uses (this one and
# costmodel.serving.run): the rest of a file (generated_texts, errors, anything a newer vLLM adds) is dropped
# unchecked, so it can never make a reader refuse the file
BENCH_FIELDS = frozenset({
    "input_lens", "output_lens", "ttfts", "itls", "start_times", "queue_times", "duration", "request_rate",
    "max_concurrency", "completed", "total_output_tokens", "spec_decode_acceptance_length", "acceptance_length",
    "mean_acceptance_length", "note",
    "output_throughput", "total_token_throughput", "request_throughput", "mean_tpot_ms", "mean_itl_ms",
    "mean_ttft_ms", "mean_e2el_ms", "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms",
    "median_e2el_ms", "p99_e2el_ms", "median_itl_ms", "p99_itl_ms"})


# -- entry points --------------------------------------------------------------------------------------
def detect_kind(text: str, name: str = "") -> str:
    """'vllm-bench' for a JSON object, 'vllm-metrics' for Prometheus text, else 'csv'."""
    head = text.lstrip()[:4096]
    if head.startswith("{") or name.lower().endswith(".json"):
        return "vllm-bench"
    if "# TYPE " in head or "# HELP " in head or "vllm:" in head:
        return "vllm-metrics"
    return "csv"


def workload_text(text: str | bytes, name: str, kind: str) -> tuple[str, str]:
    """(text, kind) of a workload file's contents: UTF-8 (a byte order mark dropped), within MAX_WORKLOAD_BYTES,
    not empty, `kind` one of KINDS ("auto": detected). The entry point that parses it is
    `costmodel.serving.workload.parse_workload` (a bench JSON goes through the serving replay's one reader)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(f"workload {name}: not UTF-8 text") from None
    text = text.removeprefix("\ufeff")  # a UTF-8 byte order mark, as Excel saves a CSV: not part of the header
    if len(text.encode("utf-8", "ignore")) > MAX_WORKLOAD_BYTES:
        raise InputError(f"workload {name}: larger than the {MAX_WORKLOAD_BYTES // 2**20} MiB limit")
    if kind not in KINDS:
        raise InputError(f"workload kind {kind!r}: not one of {', '.join(KINDS)}")
    if not text.strip():
        raise InputError(f"workload {name}: empty")
    return text, detect_kind(text, name) if kind == "auto" else kind


def example_path(path: str | Path) -> Path:
    """`path` itself, or - when no such file exists and `path` is a bare name or data/examples/NAME - the
    bundled example of that name (data/examples/, also inside an installed package), so `--workload
    data/examples/chat-diurnal.csv` works from any directory; any other missing path stays missing."""
    p = Path(path)
    if not p.exists() and p.parent in (Path("."), Path("data") / "examples", Path("examples")):
        bundled = EXAMPLES_DIR / p.name
        if p.name and bundled.is_file():
            return bundled
    return p
