"""On-load check that a profile's bootstrap replicates bracket its own point parameters.

For every point parameter (a curve regime's alpha / busbw, a kernel scalar, a kernel op's launches / fixed_us /
bw_gbps) that at least 2 replicates also carry, the point value must lie inside the replicates' [min, max], give or
take EDGE_TOLERANCE of the range: a profile whose intervals could not contain its own point prediction is refused
with one line. Pure functions of the JSON document (no Profile), so `costmodel.profiles.parse` can run it.
"""

from __future__ import annotations

import math
from typing import Any

from ..io.errors import InputError

# -- point vs replicate consistency (run on load by profile.profile_from_dict) ------------------------------------
EDGE_TOLERANCE = 0.05  # of the replicates' range: N = 100 uniform draws up to the point leave a gap > 5% with p = 0.6%
_REGIME_PARAMS = ("alpha_base_us", "alpha_per_peer_us", "alpha_per_node_us", "busbw_gbps")
_OP_PARAMS = ("launches", "fixed_us", "bw_gbps")
_KERNEL_SCALARS = ("graph_kernel_us", "eager_launch_us")


def _curve_key(c: Any) -> tuple:
    if not isinstance(c, dict):
        return ()
    return (*(c.get(k) for k in ("op", "world_size", "mode", "nodes")), c.get("impl") or "nccl")


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _point_params(data: dict[str, Any]) -> dict[tuple, float]:
    """{(path...): value} of every point parameter a replicate may also carry."""
    out: dict[tuple, float] = {}
    for c in data.get("collectives") or []:
        key = _curve_key(c)
        for j, r in enumerate(c.get("regimes") or [] if isinstance(c, dict) else []):
            for p in _REGIME_PARAMS:
                if isinstance(r, dict) and _is_num(r.get(p)):
                    out[("collectives", key, len(c["regimes"]), j, p)] = float(r[p])
    kern = data.get("kernels") if isinstance(data.get("kernels"), dict) else {}
    for p in _KERNEL_SCALARS:
        if _is_num(kern.get(p)):
            out[("kernels", p)] = float(kern[p])
    for op, spec in (kern.get("ops") or {}).items() if isinstance(kern.get("ops"), dict) else ():
        for p in _OP_PARAMS:
            if isinstance(spec, dict) and _is_num(spec.get(p)):
                out[("ops", op, p)] = float(spec[p])
    return out


def _label(path: tuple) -> str:
    if path[0] == "collectives":
        (op, ws, mode, nodes), _, j, p = path[1][:4], path[2], path[3], path[4]
        scope = f"p={ws}" if ws is not None else "any p"
        return f"{op} [{scope}, {mode or 'graph+eager'}{'' if nodes is None else f', {nodes} node(s)'}] regime {j} {p}"
    if path[0] == "kernels":
        return f"kernels.{path[1]}"
    return f"kernels.ops.{path[1]}.{path[2]}"


def check_replicates(data: dict[str, Any], source: str = "profile", *, rel_tol: float = 1e-6) -> None:
    """Refuse (InputError, one line) a profile whose bootstrap replicates contradict its point parameters.

    For every point parameter that at least 2 replicates also carry (curves matched by (op,
    world_size, mode, nodes) and the same number of regimes), the point value must lie inside the
    replicates' [min, max], give or take EDGE_TOLERANCE of the range (a derived ensemble drawn
    uniformly up to its point value touches the edge) or `rel_tol` of the value.
    """
    reps = data.get("bootstrap") or []
    if len(reps) < 2:
        return
    point = _point_params(data)
    values: dict[tuple, list[float]] = {}
    for rep in reps:
        if not isinstance(rep, dict):
            continue
        sub = {"collectives": rep.get("collectives") or [], "kernels": rep.get("kernels") or {}}
        for path, v in _point_params(sub).items():
            values.setdefault(path, []).append(v)
    for path, v in point.items():
        got = values.get(path)
        if not got or len(got) < 2:
            continue
        lo, hi = min(got), max(got)
        tol = max(rel_tol * max(abs(lo), abs(hi), 1e-12), EDGE_TOLERANCE * (hi - lo))
        if not lo - tol <= v <= hi + tol:
            raise InputError(f"{source}: bootstrap replicates contradict the point estimate: {_label(path)} = {v:g} "
                             f"lies outside the replicates' range [{lo:g}, {hi:g}]")
