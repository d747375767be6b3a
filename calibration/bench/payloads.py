"""The points the collective benchmark measures: a byte sweep plus the strategies' exact payloads.

Sweep: bytes per rank on a geometric grid
    b_k = round_e(min_bytes * 2 ** (k / points_per_octave)),  b_k <= max_bytes,
rounded to a multiple of the element size e (fp32 buffers, e = 4), with
max_bytes itself always included.

Strategy payloads, per preset, batch B (rows R = B) and TP size p, with
shard s = V_pad / p (vLLM padding, `costmodel.model.scenario.Scenario.shard`) and
e the payload dtype's bytes (bf16 -> 2):
    full_all_gather       all_gather  R * s * e per rank        (dtype of the logits)
    gather_to_rank0       gather      R * s * e per rank        (dtype of the logits)
                          broadcast   R * 8  (int64 ids)        (int64)
    local_argmax_pairs    all_gather  R * 8  ((fp32 value, fp32 id) pairs)   (fp32)
    packed_allreduce_max  all_reduce  R * 8  (int64 keys, MAX)  (int64)
(full_all_gather_no_relayout moves the same bytes as full_all_gather.)

The dtype column says which buffer is timed and, for all_reduce, which
reduction: fp32 -> SUM (the sweep), int64 -> MAX (the packed-key payload).
Identical points (same op, dtype, p, bytes) are measured once; their labels
are merged ("sweep;payload:llama3-8b+llama3-70b:B64:full_all_gather").
Payload points above `max_bytes` are dropped (the sweep bounds the run).

Pure Python + numpy: no torch import here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from costmodel.io.errors import InputError
from costmodel.io.measurements import COLLECTIVE_OPS, DTYPES, ELEM_BYTES
from costmodel.model.scenario import Scenario
from costmodel.profiles.presets import preset, presets

SWEEP_DTYPE = "fp32"
ID_DTYPE = "int64"
PAIR_DTYPE = "fp32"
REDUCE_OP: dict[str, str] = {"fp32": "sum", "int64": "max"}  # all_reduce: dtype -> reduction

DEFAULT_PRESETS: tuple[str, ...] = (
    "llama4-maverick", "llama4-maverick-eagle3", "llama3-70b", "qwen3-8b", "gpt-oss-120b",
)
DEFAULT_BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
ID_BYTES = 8  # one int64 id / one packed 64-bit key / one (fp32, fp32) pair per row


@dataclass(frozen=True)
class Point:
    """One measured point: `op` over `world_size` ranks, `bytes_per_rank` of `dtype`."""

    op: str
    dtype: str
    world_size: int
    bytes_per_rank: int
    label: str

    @property
    def elem_bytes(self) -> int:
        return ELEM_BYTES[self.dtype]

    @property
    def numel(self) -> int:
        """Elements each rank contributes (all_gather, gather) or holds (all_reduce, broadcast)."""
        return self.bytes_per_rank // self.elem_bytes

    @property
    def reduce_op(self) -> str:
        """all_reduce reduction for this dtype ("" for the other ops)."""
        return REDUCE_OP[self.dtype] if self.op == "all_reduce" else ""

    def identity(self) -> tuple[str, str, int, int]:
        return (self.op, self.dtype, self.world_size, self.bytes_per_rank)

    def describe(self) -> str:
        return f"{self.op} p={self.world_size} {self.bytes_per_rank} B"


def sweep_sizes(min_bytes: int, max_bytes: int, points_per_octave: int, elem_bytes: int = 4) -> list[int]:
    """Geometric grid of bytes per rank, multiples of `elem_bytes` (see module doc)."""
    if points_per_octave < 1:
        raise InputError("--points-per-octave must be >= 1")
    if min_bytes < 1 or max_bytes < min_bytes:
        raise InputError(f"byte range {min_bytes}..{max_bytes}: need 1 <= --min-bytes <= --max-bytes")
    lo = max(elem_bytes, -(-min_bytes // elem_bytes) * elem_bytes)
    hi = max_bytes // elem_bytes * elem_bytes
    if hi < lo:
        raise InputError(f"byte range {min_bytes}..{max_bytes} holds no multiple of {elem_bytes} B")
    steps = int(math.floor(points_per_octave * math.log2(hi / lo) + 1e-9))
    sizes = {lo, hi}
    for k in range(steps + 1):
        raw = lo * 2.0 ** (k / points_per_octave)
        sizes.add(min(hi, max(lo, int(round(raw / elem_bytes)) * elem_bytes)))
    return sorted(sizes)


def tp_sizes(world_size: int, requested: Sequence[int] | None = None) -> list[int]:
    """Power-of-two sub-group sizes 2, 4, ... <= world_size, or the validated `requested` ones."""
    if world_size < 2:
        raise InputError(f"world size {world_size}: collectives need at least 2 ranks")
    if not requested:
        return [1 << k for k in range(1, world_size.bit_length()) if (1 << k) <= world_size]
    out = []
    for p in requested:
        if p < 2:
            raise InputError(f"--world-sizes {p}: a sub-group needs at least 2 ranks")
        if p > world_size:
            raise InputError(f"--world-sizes {p} exceeds the world size {world_size}")
        if world_size % p:
            raise InputError(f"--world-sizes {p} does not divide the world size {world_size}")
        out.append(int(p))
    return sorted(set(out))


def strategy_payloads(preset_name: str, batch: int, p: int, dtype: str = "bf16") -> list[tuple[str, str, int, str]]:
    """[(op, dtype, bytes_per_rank, strategy)] the strategies put on the wire for one scenario."""
    fields = preset(preset_name)
    fields.pop("hidden", None)
    sc = Scenario(**fields, tp=p, batch=batch, dtype=dtype, num_spec_tokens=1)
    logits_bytes = int(batch) * int(sc.shard) * int(sc.elem_bytes)
    ids = int(batch) * ID_BYTES
    return [
        ("all_gather", dtype, logits_bytes, "full_all_gather"),
        ("gather", dtype, logits_bytes, "gather_to_rank0"),
        ("broadcast", ID_DTYPE, ids, "gather_to_rank0"),
        ("all_gather", PAIR_DTYPE, ids, "local_argmax_pairs"),
        ("all_reduce", ID_DTYPE, ids, "packed_allreduce_max"),
    ]


def _payload_label(sources: list[tuple[str, int, str]]) -> str:
    """payload:<presets joined by +>:B<batch>:<strategy>, ';'-joined over (batch, strategy)."""
    by_key: dict[tuple[int, str], list[str]] = {}
    for name, batch, strategy in sources:
        names = by_key.setdefault((batch, strategy), [])
        if name not in names:
            names.append(name)
    return ";".join(f"payload:{'+'.join(names)}:B{batch}:{strategy}" for (batch, strategy), names in by_key.items())


def plan_points(
    world_sizes: Sequence[int],
    *,
    min_bytes: int,
    max_bytes: int,
    points_per_octave: int = 2,
    preset_names: Iterable[str] = DEFAULT_PRESETS,
    batches: Iterable[int] = DEFAULT_BATCHES,
    payload_dtype: str = "bf16",
    ops: Sequence[str] = COLLECTIVE_OPS,
) -> tuple[list[Point], int]:
    """Every point to measure, grouped by world size then op, and the number of payloads dropped.

    Deterministic: every rank computes the same list.
    """
    preset_names = list(preset_names)
    batches = [int(b) for b in batches]
    unknown = [o for o in ops if o not in COLLECTIVE_OPS]
    if unknown:
        raise InputError(f"--ops {unknown[0]!r}: unknown (known: {', '.join(COLLECTIVE_OPS)})")
    if payload_dtype not in DTYPES:
        raise InputError(f"--payload-dtype {payload_dtype!r}: expected one of {', '.join(DTYPES)}")
    if any(b < 1 for b in batches):
        raise InputError("--batches must be positive integers")
    known = set(presets().index)
    for name in preset_names:
        if name not in known:
            raise InputError(f"--presets {name!r}: unknown preset (known: {', '.join(sorted(known))})")
    sizes = sweep_sizes(min_bytes, max_bytes, points_per_octave, ELEM_BYTES[SWEEP_DTYPE])
    points: list[Point] = []
    dropped = 0
    for p in world_sizes:
        labels: dict[tuple[str, str, int], list[str]] = {}
        payload_sources: dict[tuple[str, str, int], list[tuple[str, int, str]]] = {}
        for op in ops:
            for size in sizes:
                labels.setdefault((op, SWEEP_DTYPE, size), []).append("sweep")
        for name in preset_names:
            for batch in batches:
                for op, dtype, nbytes, strategy in strategy_payloads(name, batch, p, payload_dtype):
                    if op not in ops:
                        continue
                    if nbytes > max_bytes:
                        dropped += 1
                        continue
                    key = (op, dtype, nbytes)
                    labels.setdefault(key, [])
                    payload_sources.setdefault(key, []).append((name, batch, strategy))
        for key, sources in payload_sources.items():
            labels[key].append(_payload_label(sources))
        order = {op: i for i, op in enumerate(ops)}
        for (op, dtype, nbytes) in sorted(labels, key=lambda k: (order[k[0]], k[1] != SWEEP_DTYPE, k[1], k[2])):
            points.append(Point(op, dtype, int(p), int(nbytes), ";".join(labels[(op, dtype, nbytes)])))
    return points, dropped
