"""A profile's ensemble members, stored compactly (issue 21 item 2): regenerated from a seed, or stored as columns.

A profile's parameter ensemble (the members `costmodel.evidence.discrepancy` turns into replicate profiles) used to be
stored member by member: `"bootstrap": [{"collectives": [...], "kernels": {...}}, ...]`, 100 full documents,
~3-4 MB per derived profile. That verbose list still loads (users have such files). A profile may instead
carry ONE of the two compact forms below in `"ensemble"` (never both `ensemble` and `bootstrap`):

    "ensemble": {"method": "uniform-ranges-v1", "n": 100, "seed": 0,
                 "ranges": {name: [low, high], ...},          # the cited ranges, UNIFORM_RANGES_V1 names
                 "stored": COLUMNS?}                          # what cannot be redrawn (the kernel-model refits)
    "ensemble": {"method": "columns-v1", "n": 50, "stored": COLUMNS}     # members that must be stored (a fit's
                                                                          # bootstrap replicates)
    COLUMNS = {"template": MEMBER, "columns": [{"path": [key | index, ...], "values": [n numbers]}, ...]}

Member i of COLUMNS is `template` with the leaf at each column's path replaced by values[i]: only the numbers
that differ between members are stored, once per member, as JSON numbers (exact: JSON round-trips every float
by its shortest repr). `compact_members` encodes a list and refuses (ValueError) any list it would not decode
to, bit for bit (json.dumps-equal), so nothing about a member can change.

uniform-ranges-v1 is the derived ensemble of scripts/derive_profiles.py (moved here so loading can rerun it;
the scripts call `uniform_ranges_v1_members` and store only the seed, the ranges and the stored columns).
With u_i the uniform draws of numpy's Generator(PCG64(seed)) in this order, per member i = 0..n-1: one draw
d_k ~ U(low_k, high_k) per name of UNIFORM_RANGES_V1 (in that order), then one draw per kernel op of the
point profile (in its `kernels.ops` order), U over copy_eff for COPY_OPS, else over reduce_eff:

    every curve     launch_us = round(d_launch_us, 3), eager_overhead_us = round(d_eager_overhead_us, 3)
    every regime    busbw_gbps = round(busbw * s, 2), s = d_simple_busbw_scale for Simple / NVLS regimes
                    (names ending in "Simple" or starting with "NVLS"), else d_ll_busbw_scale;
                    alpha_per_peer_us = round(alpha_per_peer_us * d_hop_scale, 4)
    kernel op       bw_gbps = round(bw_gbps * u_op / mid, 1)           (mid = (low + high) / 2 of its range)
    kernels         graph_kernel_us / eager_launch_us = round(x * d_x / mid_x, 3)

then the stored member i (the GPU kernel model's refits: 0.05 s each, so stored, not rerun) merged in
(objects key by key, anything else replaced). The draws are one `rng.random((n, 9 + ops))` matrix, which is
the same stream as scalar `rng.uniform` calls (low + (high - low) u, one double each).

The load-time checks of a compact ensemble: costmodel.profiles.ensemble_checks. The replicate Profiles of a
uniform-ranges-v1 ensemble are built without these member documents (costmodel.profiles.drawn_replicates: the same
draws and formulas applied to the parsed point, equal to parsing each member); it leaves anything else - a
columns-v1 ensemble, stored columns beyond kernel parts it does not parse from the point, a value the parser would
refuse - to the slow path (costmodel.profiles.replicates), which reads the members through `LazyMembers`.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

UNIFORM_RANGES_V1 = ("launch_us", "eager_overhead_us", "simple_busbw_scale", "ll_busbw_scale", "hop_scale",
                     "copy_eff", "reduce_eff", "graph_kernel_us", "eager_launch_us")
COPY_OPS = ("relayout_copy", "d2t_scatter")  # kernel ops drawn over copy_eff (the rest over reduce_eff)
KERNEL_SCALARS = ("graph_kernel_us", "eager_launch_us")
MAX_MEMBERS = 10_000  # as the verbose list's maxItems


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, allow_nan=False, separators=(",", ":"))


def copy_json(obj: Any) -> Any:
    """A deep copy of a JSON tree (dicts, lists, scalars): ~5x faster than copy.deepcopy."""
    if isinstance(obj, dict):
        return {k: copy_json(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [copy_json(v) for v in obj]
    return obj


# -- columns: template + the leaves that vary --------------------------------------------------------------------
def json_leaves(obj: Any, path: tuple = (), out: list | None = None) -> list[tuple[tuple, Any]]:
    """(path, value) of every leaf of a JSON tree, in document order; an empty container is a leaf (its structure
    is fixed). A direct recursion appending to one list (`out`, new when None): a fit's 100 members hold ~10^5
    leaves, and a generator per level cost ~2x."""
    out = [] if out is None else out
    if isinstance(obj, dict) and obj:
        for k, v in obj.items():
            json_leaves(v, (*path, k), out)
    elif isinstance(obj, list) and obj:
        for i, v in enumerate(obj):
            json_leaves(v, (*path, i), out)
    else:
        out.append((path, obj))
    return out


def _shape(obj: Any) -> Any:
    """The container structure of a JSON tree (key order and list lengths), leaves replaced by None."""
    if isinstance(obj, dict):
        return [(k, _shape(v)) for k, v in obj.items()]
    if isinstance(obj, list):
        return [_shape(v) for v in obj]
    return None


def _text_key(v: Any) -> Any:
    """A key equal for two leaves exactly when their `_dumps` texts are equal (and raising where `_dumps` raises),
    without encoding the common ones: a finite float's text is its repr (the same float, -0.0 apart from 0.0), an
    int's, a str's and a bool's are their values' (the type keeps 1, 1.0 and true apart); anything else: its text."""
    t = type(v)
    if t is float:
        return (t, v, math.copysign(1.0, v)) if math.isfinite(v) else _dumps(v)
    if t is int or t is str or t is bool or v is None:
        return (t, v)
    return _dumps(v)


def compact_members(members: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """COLUMNS (module doc) of `members`: template = members[0], one column per numeric leaf that differs.

    ValueError when the members differ in structure or in a non-numeric leaf, or when decoding would not give
    every member back json.dumps-equal (int and float kept apart); callers then keep the verbose list."""
    if not members:
        raise ValueError("no members")
    first = members[0]
    shape = _shape(first)
    leaves = json_leaves(first)
    paths = [path for path, _ in leaves]
    cols: list[list] = [[v] for _, v in leaves]
    for m in members[1:]:
        if _shape(m) != shape:
            raise ValueError("members differ in structure")
        # the same shape: the same paths, in the same order
        for col, (_, v) in zip(cols, json_leaves(m), strict=True):
            col.append(v)
    columns = []
    for path, values in zip(paths, cols, strict=True):
        if len({_text_key(v) for v in values}) == 1:
            continue
        if not all(is_number(v) for v in values):
            raise ValueError(f"members differ in a non-numeric leaf {list(path)}")
        columns.append({"path": list(path), "values": list(values)})
    out = {"template": copy_json(first), "columns": columns}
    if [_dumps(m) for m in expand_columns(out, len(members))] != [_dumps(m) for m in members]:
        raise ValueError("the columns do not decode to the members")
    return out


def set_leaf(doc: Any, path: Sequence, value: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


def expand_columns(stored: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """The n member documents of COLUMNS `stored` (fresh objects each)."""
    out = []
    for i in range(n):
        doc = copy_json(stored["template"])
        for col in stored["columns"]:
            set_leaf(doc, col["path"], col["values"][i])
        out.append(doc)
    return out


def merge_member(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """`base` with `extra` merged in: objects key by key (recursively), anything else replaced."""
    out = dict(base)
    for k, v in extra.items():
        out[k] = merge_member(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


# -- uniform-ranges-v1: the derived ensemble ---------------------------------------------------------------------
def _is_simple(regime_name: Any) -> bool:
    name = str(regime_name)
    return name.endswith("Simple") or name.startswith("NVLS")  # (Tree-Simple, NVLSTree too)


def _op_range(ranges: dict[str, Sequence[float]], op: str) -> tuple[float, float]:
    lo, hi = ranges["copy_eff" if op in COPY_OPS else "reduce_eff"]
    return float(lo), float(hi)


def _draws(point: dict[str, Any], ranges: dict[str, Sequence[float]], seed: int, n: int
           ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """({name: (n,) draws d_name}, {op: (n,) draws u_op}) of uniform-ranges-v1 (module doc)."""
    ops = list(point["kernels"]["ops"])
    u = np.random.Generator(np.random.PCG64(seed)).random((n, len(UNIFORM_RANGES_V1) + len(ops)))
    named = {}
    for j, k in enumerate(UNIFORM_RANGES_V1):
        lo, hi = float(ranges[k][0]), float(ranges[k][1])
        named[k] = lo + (hi - lo) * u[:, j]
    per_op = {}
    for j, op in enumerate(ops, start=len(UNIFORM_RANGES_V1)):
        lo, hi = _op_range(ranges, op)
        per_op[op] = lo + (hi - lo) * u[:, j]
    return named, per_op


def _mid(lo: Any, hi: Any) -> float:
    return sum((lo, hi)) / 2  # as scripts/derive_profiles.py computed it: sum(RANGES[k]) / 2


def uniform_ranges_v1_members(point: dict[str, Any], ranges: dict[str, Sequence[float]], seed: int, n: int,
                              stored: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The n members of a uniform-ranges-v1 ensemble of profile document `point` (formulas in the module doc)."""
    named, per_op = _draws(point, ranges, seed, n)
    extra = expand_columns(stored, n) if stored else [{}] * n
    kern0 = point["kernels"]
    out = []
    for i in range(n):
        d = {k: float(v[i]) for k, v in named.items()}
        # new dicts for the curves and regimes (their drawn fields), the rest shared with `point` (never mutated):
        # equal to a deep copy with those fields set, key order included, without copying every nested leaf
        curves = []
        for c in point["collectives"]:
            regimes = []
            for r in c["regimes"]:
                scale = d["simple_busbw_scale"] if _is_simple(r.get("name")) else d["ll_busbw_scale"]
                r = {**r, "busbw_gbps": round(r["busbw_gbps"] * scale, 2)}
                if "alpha_per_peer_us" in r:  # (every derived regime states it; the schema does not require it)
                    r["alpha_per_peer_us"] = round(r["alpha_per_peer_us"] * d["hop_scale"], 4)
                regimes.append(r)
            curves.append({**member_curve(c), "launch_us": round(d["launch_us"], 3),
                           "eager_overhead_us": round(d["eager_overhead_us"], 3), "regimes": regimes})
        ops = {}
        for op, spec in kern0["ops"].items():
            lo, hi = _op_range(ranges, op)
            ops[op] = {**spec, "bw_gbps": round(spec["bw_gbps"] * float(per_op[op][i]) / ((lo + hi) / 2), 1)}
        kern: dict[str, Any] = {k: round(kern0[k] * d[k] / _mid(*ranges[k]), 3) for k in KERNEL_SCALARS}
        kern["ops"] = ops
        out.append(merge_member({"collectives": curves, "kernels": kern}, extra[i]))
    return out


def drawn_extremes(point: dict[str, Any], ranges: dict[str, Sequence[float]], seed: int, n: int
                    ) -> dict[tuple, tuple[float, float]]:
    """{member path: (min, max) over the members} of every drawn leaf, without building the members.

    Each drawn leaf is f(d) = round(x * d / c, k) with x >= 0, c > 0 (schema-checked point values, ranges > 0):
    non-decreasing in the draw d, so its extremes are f(min d) and f(max d)."""
    named, per_op = _draws(point, ranges, seed, n)
    lo = {k: float(v.min()) for k, v in named.items()}
    hi = {k: float(v.max()) for k, v in named.items()}
    out: dict[tuple, tuple[float, float]] = {}

    def put(path: tuple, f, key: str | None = None, lo_d: float | None = None, hi_d: float | None = None) -> None:
        a, b = f(lo[key] if key else lo_d), f(hi[key] if key else hi_d)
        out[path] = (min(a, b), max(a, b))

    for ci, c in enumerate(point["collectives"]):
        put(("collectives", ci, "launch_us"), lambda d: round(d, 3), "launch_us")
        put(("collectives", ci, "eager_overhead_us"), lambda d: round(d, 3), "eager_overhead_us")
        for ri, r in enumerate(c["regimes"]):
            scale = "simple_busbw_scale" if _is_simple(r.get("name")) else "ll_busbw_scale"
            put(("collectives", ci, "regimes", ri, "busbw_gbps"), lambda d, bw=r["busbw_gbps"]: round(bw * d, 2),
                scale)
            if "alpha_per_peer_us" in r:
                put(("collectives", ci, "regimes", ri, "alpha_per_peer_us"),
                    lambda d, p=r["alpha_per_peer_us"]: round(p * d, 4), "hop_scale")
    kern = point["kernels"]
    for k in KERNEL_SCALARS:
        mid = _mid(*ranges[k])
        put(("kernels", k), lambda d, x=kern[k], m=mid: round(x * d / m, 3), k)
    for op, spec in kern["ops"].items():
        a, b = _op_range(ranges, op)
        put(("kernels", "ops", op, "bw_gbps"), lambda d, bw=spec["bw_gbps"], m=(a + b) / 2: round(bw * d / m, 1),
            lo_d=float(per_op[op].min()), hi_d=float(per_op[op].max()))
    return out


# -- the document's ensemble --------------------------------------------------------------------------------------
def has_ensemble(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("ensemble"), dict)


def member_curve(curve: dict[str, Any]) -> dict[str, Any]:
    """A curve document as a member carries it: without `candidates` (a member prices the profile's own network;
    --fabric drops the members, costmodel.model.fabrics), so they are neither stored nor parsed per member."""
    return {k: v for k, v in curve.items() if k != "candidates"} if "candidates" in curve else curve


def members(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The member documents of profile document `data`'s ensemble: its compact `ensemble` expanded, else its
    verbose `bootstrap` list (as stored)."""
    ens = data.get("ensemble")
    if not isinstance(ens, dict):
        return list(data.get("bootstrap") or [])
    if ens["method"] == "uniform-ranges-v1":
        return uniform_ranges_v1_members(data, ens["ranges"], ens["seed"], ens["n"], ens.get("stored"))
    return expand_columns(ens["stored"], ens["n"])


def expand_document(data: dict[str, Any]) -> dict[str, Any]:
    """`data` in the verbose form: `ensemble` replaced by the `bootstrap` list it stands for (same place)."""
    if not has_ensemble(data):
        return data
    reps = members(data)
    return {("bootstrap" if k == "ensemble" else k): (reps if k == "ensemble" else v) for k, v in data.items()}


def compact_document(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with a verbose `bootstrap` list stored as a columns-v1 `ensemble` (same place); unchanged when it
    has none or its members do not share one structure (`compact_members` refuses them)."""
    reps = data.get("bootstrap")
    if not isinstance(reps, list) or not reps or "ensemble" in data:
        return data
    try:
        ens = {"method": "columns-v1", "n": len(reps), "stored": compact_members(reps)}
    except ValueError:
        return data
    return {("ensemble" if k == "bootstrap" else k): (ens if k == "bootstrap" else v) for k, v in data.items()}


class LazyMembers(Sequence):
    """Profile.bootstrap of a compact profile: its n member documents, built on first access (len() is free)."""

    def __init__(self, data: dict[str, Any]):
        self._data, self._n = data, int(data["ensemble"]["n"])
        self._items: tuple[dict[str, Any], ...] | None = None
        self._lock = threading.Lock()

    def _expanded(self) -> tuple[dict[str, Any], ...]:
        if self._items is None:
            with self._lock:
                if self._items is None:
                    self._items = tuple(members(self._data))
        return self._items

    @property
    def document(self) -> dict[str, Any]:
        """The profile document whose ensemble these are (the members are not built)."""
        return self._data

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):  # type: ignore[override]
        return self._expanded()[i]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self._expanded())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and not isinstance(other, str) and tuple(self) == tuple(other)

    def __repr__(self) -> str:
        return f"LazyMembers({self._data['ensemble']['method']}, n={self._n})"
