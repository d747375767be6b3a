"""The GPU kernel model's parameter sets, as a profile stores them (`kernels.model`, `kernels.host`,
`kernels.lm_head`).

`GpuKernelModel` holds the hardware (SM count, HBM bandwidth, threads per SM) and the fitted rates and floors
that `costmodel.model.gpu_kernels` prices ATen's reductions with; `ReduceOp` one reduction's per-element costs;
`LmHeadModel` the lm_head GEMM line. The `*_from_dict` functions check and convert the JSON (one-line errors).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..io.errors import InputError


@dataclass(frozen=True)
class ReduceOp:
    """Per-op parameters of a reduction kernel: launch floor and element rate."""

    floor_us: float
    elems_per_us: float


@dataclass(frozen=True)
class GpuKernelModel:
    """Per-GPU parameters of the kernel model (module doc has every formula)."""

    gpu: str
    sm_count: int
    hbm_gbps: float
    max_threads_per_sm: int = 2048
    warp_size: int = 32  # threads per warp (NVIDIA) / wavefront (AMD CDNA: 64); ATen's block width cap
    reduce_gbps: float = 3600.0  # achieved read bandwidth of a reduction kernel
    value_us: float = 0.1  # one thread's serial time per reduced value
    wave_us: float = 2.0  # fixed cost per wave of blocks
    global_reduce_us: float = 4.0  # extra for the cross-block (global memory) reduce
    reduce_ops: dict[str, ReduceOp] = field(default_factory=lambda: {
        "max": ReduceOp(3.3, 1.1e6), "argmax": ReduceOp(3.2, 0.9e6)})
    small_us: float = 1.2
    small_row_us: float = 0.002
    copy_floor_us: float = 2.0
    copy_gbps: dict[str, float] = field(default_factory=lambda: {"bf16": 1650.0, "fp16": 1650.0, "fp32": 2700.0})
    pair_base_us: float = 5.0
    pair_row_us: float = 0.1
    pair_peer_us: float = 0.3
    torch_op_us: float = 11.0
    view_op_us: float = 4.0
    eager_gap_us: float = 5.0
    provenance: str = "derived"
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.warp_size == 32:  # the default: not written, so profiles without the field round-trip unchanged
            del out["warp_size"]
        out["reduce_ops"] = {k: asdict(v) for k, v in self.reduce_ops.items()}
        return out


_FLOAT_FIELDS = ("hbm_gbps", "reduce_gbps", "value_us", "wave_us", "global_reduce_us", "small_us", "small_row_us",
                 "copy_floor_us", "pair_base_us", "pair_row_us", "pair_peer_us", "torch_op_us", "view_op_us",
                 "eager_gap_us")


def model_from_dict(obj: Any, where: str = "kernels.model") -> GpuKernelModel:
    """Validate a profile's `kernels.model` object (one-line InputError naming the field)."""
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected an object")

    def num(key: str, value: Any, positive: bool = False) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value < 0 \
                or (positive and value == 0):
            raise InputError(f"{where}.{key}: expected a finite number {'> 0' if positive else '>= 0'}, "
                             f"got {value!r}")
        return float(value)

    kw: dict[str, Any] = {}
    for key in ("gpu", "provenance", "source"):
        if key in obj:
            if not isinstance(obj[key], str):
                raise InputError(f"{where}.{key}: expected a string")
            kw[key] = obj[key]
    for key in ("sm_count", "max_threads_per_sm", "warp_size"):
        value = obj.get(key)
        if key == "sm_count" or value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100_000:
                raise InputError(f"{where}.{key}: expected an integer in 1..100000, got {value!r}")
            kw[key] = value
    for key in _FLOAT_FIELDS:
        if key in obj:
            kw[key] = num(key, obj[key], positive=key in ("hbm_gbps", "reduce_gbps"))
        elif key == "hbm_gbps":
            raise InputError(f"{where}.hbm_gbps: missing")
    if "reduce_ops" in obj:
        ops = obj["reduce_ops"]
        if not isinstance(ops, dict) or set(ops) != {"max", "argmax"}:
            raise InputError(f"{where}.reduce_ops: expected an object with 'max' and 'argmax'")
        kw["reduce_ops"] = {k: ReduceOp(num(f"reduce_ops.{k}.floor_us", v.get("floor_us") if isinstance(v, dict)
                                            else None),
                                        num(f"reduce_ops.{k}.elems_per_us", v.get("elems_per_us"), positive=True))
                            for k, v in ops.items()}
    if "copy_gbps" in obj:
        copy = obj["copy_gbps"]
        if not isinstance(copy, dict) or not copy:
            raise InputError(f"{where}.copy_gbps: expected an object dtype -> GB/s")
        kw["copy_gbps"] = {k: num(f"copy_gbps.{k}", v, positive=True) for k, v in copy.items()}
    kw.setdefault("gpu", "")
    return GpuKernelModel(**kw)


# -- host-side costs and the lm_head GEMM (profile kernels.host / kernels.lm_head) ------------------------------
def host_from_dict(obj: Any, where: str = "kernels.host") -> dict[str, Any]:
    """Validate `kernels.host`: {"torch_op_us", "c10d_call_us", "source", "c10d_table"?}; {} when absent.

    torch_op_us: host time of one eager kernel-launching torch op; c10d_call_us: GPU-side cost of one eager
    c10d collective call with nothing to communicate (world size 1); c10d_table: {"bytes": [..],
    "median_us": [..]} behind it.
    """
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected an object")
    out = dict(obj)
    for key in ("torch_op_us", "view_op_us", "c10d_call_us"):
        if key in obj:
            v = obj[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or not 0 <= v <= 1e6:
                raise InputError(f"{where}.{key}: expected a number in 0..1e6 us, got {v!r}")
    table = obj.get("c10d_table")
    if table is not None:
        if not isinstance(table, dict) or not isinstance(table.get("bytes"), list) \
                or not isinstance(table.get("median_us"), list) or len(table["bytes"]) != len(table["median_us"]):
            raise InputError(f"{where}.c10d_table: expected {{'bytes': [..], 'median_us': [..]}} of equal length")
    return out


@dataclass(frozen=True)
class LmHeadModel:
    """The draft lm_head GEMM [R, hidden] x [hidden, s] (bf16):

        T = floor_us + max(hidden * s * 2 / weight_gbps * 1e-3, 2 * R * hidden * s / tflops * 1e-6)   (us)

    (weight read bound at small R, tensor-core bound at large R)."""

    floor_us: float
    weight_gbps: float
    tflops: float
    provenance: str = "derived"
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def lm_head_from_dict(obj: Any, where: str = "kernels.lm_head") -> LmHeadModel:
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected an object")
    vals = {}
    for key in ("floor_us", "weight_gbps", "tflops"):
        v = obj.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v < 0 \
                or (key != "floor_us" and v == 0):
            raise InputError(f"{where}.{key}: expected a finite positive number, got {v!r}")
        vals[key] = float(v)
    return LmHeadModel(**vals, provenance=str(obj.get("provenance", "derived")), source=str(obj.get("source", "")))
