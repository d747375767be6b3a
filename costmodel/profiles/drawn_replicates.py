"""A uniform-ranges-v1 profile's replicate Profiles built from its parsed point objects: the fast path of
`costmodel.profiles.replicates`.

The slow path builds every member document (`compact.uniform_ranges_v1_members`), merges each over the point
document, applies `replicates.constrain` and parses the result (`parse.profile_from_dict`): ~1.5 s of CPU for the
1,300 uniform-ranges-v1 replicates of the bundled profiles (garbage collector off), most of it re-checking ~200k
regimes whose only new values are drawn numbers; this path takes ~0.7 s. A uniform-ranges-v1 member changes
nothing but those numbers (compact's module doc), so the point document is parsed once the way a replicate is
(`point_template`: the parent's document without its ensemble) and each replicate is that template with the
member's numbers put in, computed with compact's draws and very expressions (Python's round(), not numpy's), then
`constrain`'s rules, in the same order:

    regime   busbw_gbps = round(busbw * s, 2), then - except in a measured curve - the protocol ceiling, right to
             left: busbw_i = min(busbw_i, min_{j>i} busbw_j); alpha_per_peer_us = round(peer * d_hop_scale, 4),
             0.0 where < 0 (the other latencies are the point's, >= 0 since the template parsed)
    curve    launch_us = round(d_launch_us, 3), eager_overhead_us = round(d_eager_overhead_us, 3)
    kernels  graph_kernel_us / eager_launch_us = round(x * d_x / mid_x, 3); op bw_gbps = round(bw * u_op / mid, 1),
             then min(bw_gbps, kernels.hbm_gbps) when the point states hbm_gbps > 0; the stored member (the
             kernel-model refits) merged in (`compact.merge_member`) and its `model` parsed
             (`kernel_params.model_from_dict`)

Each new number is accepted only as the parser accepts it (busbw_gbps and op bw_gbps finite and > 0, latencies
finite and >= 0): the template's other fields are the same objects the replicate document holds, parsed the same
way. The replicate's `raw` is the document the slow path parses, built with the same dict operations: fresh
containers wherever the slow path makes fresh ones, everything else shared with the parent's raw, never mutated.

`drawn_replicates` returns None - the caller then takes the slow path, which builds the replicates or raises its
one-line InputError - for anything it does not cover: another method (columns-v1, a verbose bootstrap list), a
Profile whose ensemble is not its own raw document's, stored columns that reach beyond `kernels` or into a kernel
part the parser reads or `constrain` uses (ops, tables, host, lm_head, hbm_gbps, the two scalars), a range that is
not two numbers with a non-zero midpoint, a point value that is not a plain number (a float, or an int within
2^53), a regime with ci90, a curve with samples, a template the parser refuses, a drawn value it would refuse (a
busbw_gbps that rounds to 0.0), a member kernel model it refuses.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from ..io.errors import InputError
from .compact import (
    KERNEL_SCALARS,
    UNIFORM_RANGES_V1,
    LazyMembers,
    _draws,
    _is_simple,
    _mid,
    _op_range,
    expand_columns,
    member_curve,
    merge_member,
)
from .fields import EXACT_INT
from .kernel_params import model_from_dict
from .parse import profile_from_dict
from .types import CollectiveCurve, KernelOp, Profile, Regime

_INF = math.inf
# kernel parts a stored member may not replace here: parsed from the point (ops, tables, host, lm_head, the drawn
# scalars) or read by constrain (hbm_gbps); a stored member that does goes the slow path
_POINT_KERNEL_KEYS = ("ops", "tables", "host", "lm_head", "hbm_gbps", *KERNEL_SCALARS)


def _op_mid(ranges: dict[str, Sequence[float]], op: str) -> float:
    """The midpoint compact divides a kernel op's draw by: (lo + hi) / 2 of its (float) range."""
    lo, hi = _op_range(ranges, op)
    return (lo + hi) / 2


def _plain(v: Any) -> bool:
    """A number the drawn formulas take as is: a finite float, or an int within 2^53 (exact as a float)."""
    return (type(v) is float and math.isfinite(v)) or (type(v) is int and -EXACT_INT <= v <= EXACT_INT)


def _stored_ok(stored: Any) -> bool:
    """Whether the stored member columns only add kernel parts that are neither parsed from the point nor used by
    constrain (the bundled ones: kernels.model)."""
    if not stored:
        return True
    if type(stored) is not dict or type(stored.get("template")) is not dict or type(stored.get("columns")) is not list:
        return False
    template = stored["template"]
    if set(template) != {"kernels"} or type(template["kernels"]) is not dict:
        return False
    if any(k in template["kernels"] for k in _POINT_KERNEL_KEYS):
        return False
    return all(type(col) is dict and type(col.get("path")) is list and len(col["path"]) >= 2
               and col["path"][0] == "kernels" and col["path"][1] not in _POINT_KERNEL_KEYS
               for col in stored["columns"])


def _ranges_ok(ranges: Any) -> bool:
    """Every UNIFORM_RANGES_V1 range two plain numbers with a non-zero midpoint (compact's divisors)."""
    if type(ranges) is not dict:
        return False
    for k in UNIFORM_RANGES_V1:
        pair = ranges.get(k)
        if type(pair) not in (list, tuple) or len(pair) != 2 or not all(_plain(v) for v in pair):
            return False
        if _mid(*pair) == 0:  # (for plain numbers, zero exactly when the float midpoint _op_mid takes is)
            return False
    return True


def _point_ok(raw: dict[str, Any]) -> bool:
    """The point values the drawn formulas read are plain numbers; no regime ci90, no curve samples."""
    curves, kern = raw.get("collectives"), raw.get("kernels")
    if type(curves) is not list or type(kern) is not dict or type(kern.get("ops")) is not dict:
        return False
    for c in curves:
        if type(c) is not dict or c.get("samples") is not None or type(c.get("regimes")) is not list:
            return False
        for r in c["regimes"]:
            if type(r) is not dict or not _plain(r.get("busbw_gbps")):
                return False
            if ("alpha_per_peer_us" in r and not _plain(r["alpha_per_peer_us"])) or r.get("ci90") not in (None, {}):
                return False
    if not all(type(spec) is dict and _plain(spec.get("bw_gbps")) for spec in kern["ops"].values()):
        return False
    return all(_plain(kern.get(k)) for k in KERNEL_SCALARS)


def point_template(profile: Profile) -> Profile | None:
    """The point document parsed as a replicate is: the parent's raw without its ensemble, kernels copied (so the
    tables, host and lm_head are the parent's parsed objects, as in every replicate); None where the parser
    refuses it."""
    data = {k: v for k, v in profile.raw.items() if k not in ("bootstrap", "ensemble")}
    data["kernels"] = {**data["kernels"]}
    try:
        return profile_from_dict(data, source=f"{profile.name}.bootstrap", document_checked=True, parent=profile)
    except InputError:
        return None


def _in_raw_order(template: Profile, curves: list[dict[str, Any]]) -> list[CollectiveCurve] | None:
    """The template's parsed curves in the order of the document's curves (the parser splits them into NCCL
    `collectives` and `impl_curves`, each in document order, by impl: missing / null = "nccl")."""
    nccl, other = iter(template.collectives), iter(template.impl_curves)
    out = [next(nccl if c.get("impl") is None or c["impl"] == "nccl" else other, None) for c in curves]
    if any(p is None or len(p.regimes) != len(c["regimes"]) for p, c in zip(out, curves, strict=True)):
        return None
    if next(nccl, None) is not None or next(other, None) is not None:
        return None
    return out


def drawn_replicates(profile: Profile, indices: Sequence[int]) -> tuple[Profile, ...] | None:
    """The replicate Profiles `indices` of a uniform-ranges-v1 profile, equal (raw documents included) to the slow
    path's; None where the fast path does not apply (module doc)."""
    raw, members = profile.raw, profile.bootstrap
    if not isinstance(members, LazyMembers) or members.document is not raw:
        return None
    ens = raw["ensemble"]
    if ens.get("method") != "uniform-ranges-v1" or type(ens.get("n")) is not int or ens["n"] != len(members):
        return None
    ranges, stored = ens.get("ranges"), ens.get("stored")
    if not (_ranges_ok(ranges) and _stored_ok(stored) and _point_ok(raw)):
        return None
    template = point_template(profile)
    parsed = None if template is None else _in_raw_order(template, raw["collectives"])
    if parsed is None:
        return None
    # the draws and stored members exactly as compact.uniform_ranges_v1_members makes them (same calls, same order)
    named, per_op = _draws(raw, ranges, ens["seed"], ens["n"])
    extra = expand_columns(stored, ens["n"]) if stored else [{}] * ens["n"]
    # one column per draw, over the members priced (tolist: the Python floats float(v[i]) gives)
    d = {k: [v[i] for i in indices] for k, v in ((k, v.tolist()) for k, v in named.items())}
    u = {op: [v[i] for i in indices] for op, v in ((op, v.tolist()) for op, v in per_op.items())}
    launch = [round(x, 3) for x in d["launch_us"]]
    overhead = [round(x, 3) for x in d["eager_overhead_us"]]
    if not all(0.0 <= x < _INF for x in (*launch, *overhead)):  # the parser's launch / overhead: finite, >= 0
        return None
    curves = _curve_columns(_regime_plan(raw, parsed), d, launch, overhead)
    if curves is None:
        return None
    kernels = _Kernels(profile, template, ranges)
    out = []
    for m, i in enumerate(indices):
        rep = kernels.replicate(i, {k: d[k][m] for k in KERNEL_SCALARS}, {op: v[m] for op, v in u.items()},
                                extra[i], *curves[m])
        if rep is None:
            return None
        out.append(rep)
    return tuple(out)


def _regime_plan(raw: dict[str, Any], parsed: list[CollectiveCurve]) -> list[tuple]:
    """Per document curve: (curve, parsed curve, protocol ceiling applies, per regime: (regime, parsed regime,
    point busbw_gbps, Simple / NVLS scale, point alpha_per_peer_us or None where the regime has none))."""
    return [(c, p, c.get("provenance") != "measured",
             [(r, pr, r["busbw_gbps"], _is_simple(r.get("name")),
               r["alpha_per_peer_us"] if "alpha_per_peer_us" in r else None)
              for r, pr in zip(c["regimes"], p.regimes, strict=True)])
            for c, p in zip(raw["collectives"], parsed, strict=True)]


def _curve_columns(plan: list[tuple], d: dict[str, list[float]], launch: list[float], overhead: list[float]
                   ) -> list[tuple[list[dict[str, Any]], list[CollectiveCurve]]] | None:
    """Per member: (its curve documents, its parsed curves); each regime's drawn values computed for all members at
    once (module doc); None where the parser would refuse one."""
    simple_scale, ll_scale, hop = d["simple_busbw_scale"], d["ll_busbw_scale"], d["hop_scale"]
    out: list[tuple[list, list]] = [([], []) for _ in launch]
    for c, p, protocols, regimes in plan:
        reg_docs: list[Any] = [None] * len(regimes)
        reg_parsed: list[Any] = [None] * len(regimes)
        ceiling = None
        for j in range(len(regimes) - 1, -1, -1):  # right to left: the ceiling is the min over later regimes
            r, pr, bw0, simple, peer0 = regimes[j]
            bws = [round(bw0 * s, 2) for s in (simple_scale if simple else ll_scale)]
            if protocols and ceiling is not None:  # (constrain: bw = ceiling where bw > ceiling)
                bws = [cap if bw > cap else bw for bw, cap in zip(bws, ceiling, strict=True)]
            if not all(0.0 < bw < _INF for bw in bws):  # the parser's busbw_gbps: finite, > 0
                return None
            if protocols:  # min(ceiling, bw) = bw: bw <= ceiling now (and > 0, so an equal value is the same float)
                ceiling = bws
            if peer0 is None:
                peers = [pr.alpha_per_peer_us] * len(bws)
                reg_docs[j] = [{**r, "busbw_gbps": bw} for bw in bws]
            else:
                peers = [round(peer0 * h, 4) for h in hop]
                peers = [0.0 if x < 0 else x for x in peers]  # constrain: latencies >= 0
                if not all(0.0 <= x < _INF for x in peers):
                    return None
                reg_docs[j] = [{**r, "busbw_gbps": bw, "alpha_per_peer_us": x} for bw, x in zip(bws, peers)]
            reg_parsed[j] = [Regime(pr.name, pr.max_bytes, pr.alpha_base_us, x, pr.alpha_per_node_us, bw, {},
                                    pr.s_half_bytes, pr.inter_node_max_gbps, net_busbw_gbps=pr.net_busbw_gbps)
                            for bw, x in zip(bws, peers)]
        for (docs, curves), lu, eo, member_docs, member_regimes in zip(out, launch, overhead, zip(*reg_docs),
                                                                        zip(*reg_parsed), strict=True):
            docs.append({**member_curve(c), "launch_us": lu, "eager_overhead_us": eo, "regimes": list(member_docs)})
            curves.append(CollectiveCurve(op=p.op, world_size=p.world_size, mode=p.mode, regimes=member_regimes,
                                          launch_us=lu, eager_overhead_us=eo,
                                          inter_node_busbw_gbps=p.inter_node_busbw_gbps, provenance=p.provenance,
                                          nodes=p.nodes, select=p.select, impl=p.impl, samples=None,
                                          from_base=p.from_base))  # no candidates: compact.member_curve
    return out


class _Kernels:
    """One profile's kernel draws and replicate assembly: the point values, parsed ops and divisors, looked up once."""

    def __init__(self, profile: Profile, template: Profile, ranges: dict[str, Sequence[float]]):
        raw = profile.raw
        self.name, self.template = profile.name, template
        self.top = {k: v for k, v in raw.items() if k not in ("bootstrap", "ensemble")}
        self.kern0 = raw["kernels"]
        self.scalar_mids = {k: _mid(*ranges[k]) for k in KERNEL_SCALARS}
        self.ops = [(op, spec, template.kernel_ops[op], _op_mid(ranges, op)) for op, spec in self.kern0["ops"].items()]
        hbm = self.kern0.get("hbm_gbps")
        self.hbm = hbm if (isinstance(hbm, (int, float)) and not isinstance(hbm, bool) and hbm > 0) else None

    def replicate(self, i: int, d: dict[str, float], u_op: dict[str, float], extra: dict[str, Any],
                  docs: list[dict[str, Any]], curves: list[CollectiveCurve]) -> Profile | None:
        """Replicate i from its curves and kernel draws (module doc), or None where the parser would refuse a
        drawn value or the member's kernel model."""
        scalars = {k: round(self.kern0[k] * d[k] / self.scalar_mids[k], 3) for k in KERNEL_SCALARS}
        if not all(0.0 <= v < _INF for v in scalars.values()):  # the parser's kernel scalars: finite, >= 0
            return None
        ops_doc, ops = {}, {}
        for op, spec, point, mid in self.ops:
            bw = round(spec["bw_gbps"] * u_op[op] / mid, 1)
            if self.hbm is not None:  # constrain: kernel bandwidths <= kernels.hbm_gbps
                bw = min(bw, self.hbm)
            if not 0 < bw < _INF:  # the parser's bw_gbps: finite, > 0
                return None
            ops_doc[op] = {**spec, "bw_gbps": bw}
            ops[op] = KernelOp(launches=point.launches, fixed_us=point.fixed_us, bw_gbps=float(bw),
                               provenance=point.provenance)
        kern_member = {**scalars, "ops": ops_doc}
        if "kernels" in extra:  # the stored member (compact.merge_member), then over the point's kernels
            kern_member = merge_member(kern_member, extra["kernels"])
        kern = {**self.kern0, **kern_member}
        model = kern.get("model")
        try:
            kernel_model = None if model is None else model_from_dict(model,
                                                                      f"{self.name}.bootstrap[{i}].kernels.model")
        except InputError:
            return None
        return dataclasses.replace(
            self.template, collectives=tuple(c for c in curves if c.impl == "nccl"),
            impl_curves=tuple(c for c in curves if c.impl != "nccl"), graph_kernel_us=scalars["graph_kernel_us"],
            eager_launch_us=scalars["eager_launch_us"], kernel_ops=ops, kernel_model=kernel_model,
            raw={**self.top, "collectives": docs, "kernels": kern})
