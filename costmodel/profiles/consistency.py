"""On-load check that a profile's bootstrap replicates agree with its own point parameters, every one the model prices.

Replicates replace parts of the point document (a curve with the same (op, world_size, mode, nodes, impl) key; a
`kernels` section such as `model`, `lm_head` or `host`, merged shallowly over the point's). For every priced
number of the point document that at least 2 replicates also carry - each regime's latencies, bandwidth,
`s_half_bytes`, inter-node terms and breakpoint, each curve's launch / eager / inter-node terms, the kernel
scalars, every kernel op's launches / fixed_us / bw_gbps, every number of the GPU kernel model, the lm_head
model and the host costs (the c10d table included) - the point value must lie inside the replicates' [min, max],
give or take EDGE_TOLERANCE of the range or `rel_tol` of the value; and every replicate curve must have the
point curve's shape (the same regime count, protocol names and breakpoints). A profile with exactly one
replicate is refused (an interval needs at least 2). Otherwise a profile could print a saving far outside its
own 90% interval. Evidence that is not priced (`ci90`, `samples`, `model_cv`, measured `tables`, text) is not
compared. Pure functions of the JSON document (no Profile), so `costmodel.profiles.parse` can run it.
"""

from __future__ import annotations

import math
from typing import Any

from ..io.errors import InputError

EDGE_TOLERANCE = 0.05  # of the replicates' range: N = 100 uniform draws up to the point leave a gap > 5% with p = 0.6%
_CURVE_UNPRICED = ("samples", "ci90", "regimes", "world_size", "nodes")  # keys, shape or evidence, not parameters
_KERNEL_UNPRICED = ("tables", "model_cv")  # measured tables are the point's own evidence; model_cv is evidence


def curve_key(c: Any) -> tuple:
    """(op, world_size, mode, nodes, impl) of a curve document: the key a replicate's curve replaces the point's by."""
    if not isinstance(c, dict):
        return ()
    return (*(c.get(k) for k in ("op", "world_size", "mode", "nodes")), c.get("impl") or "nccl")


_curve_key = curve_key


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _numbers(node: Any, path: tuple, out: dict[tuple, float], skip: tuple[str, ...] = ()) -> None:
    """Put (path, value) of every finite number below `node` (dict keys and list indices) into `out`, `skip` keys
    of `node` left out (a direct recursion: a fitted profile's 100 replicates hold ~10^5 numbers). The exact
    types json.loads makes are tested first (`type(x) is float`: no bool can pass), anything else by `_is_num`."""
    kind = type(node)
    if kind is float:
        if math.isfinite(node):
            out[path] = node
    elif kind is int:
        out[path] = float(node)
    elif kind is dict or isinstance(node, dict):
        for k, v in node.items():
            if k not in skip:
                _numbers(v, (*path, k), out)
    elif kind is list or isinstance(node, list):
        for i, v in enumerate(node):
            _numbers(v, (*path, i), out)
    elif _is_num(node):
        out[path] = float(node)


def _shape(curve: dict) -> tuple:
    """A curve's shape: its regimes' protocol names and breakpoints, in order."""
    regimes = curve.get("regimes") if isinstance(curve.get("regimes"), list) else []
    return tuple((r.get("name"), r.get("max_bytes")) if isinstance(r, dict) else None for r in regimes)


def _point_params(data: dict[str, Any]) -> dict[tuple, float]:
    """{(path...): value} of every priced point parameter a replicate may also carry."""
    out: dict[tuple, float] = {}
    for c in data.get("collectives") or []:
        if not isinstance(c, dict):
            continue
        key = ("collectives", _curve_key(c))
        _numbers(c, key, out, _CURVE_UNPRICED)
        for j, r in enumerate(c.get("regimes") if isinstance(c.get("regimes"), list) else []):
            _numbers(r, (*key, "regimes", j), out, ("ci90",))
    kern = data.get("kernels") if isinstance(data.get("kernels"), dict) else {}
    _numbers(kern, ("kernels",), out, _KERNEL_UNPRICED)
    return out


def _label(path: tuple) -> str:
    if path[0] == "collectives":
        (op, ws, mode, nodes, impl), rest = path[1], path[2:]
        scope = f"p={ws}" if ws is not None else "any p"
        where = f"{op}{'' if impl == 'nccl' else f' ({impl})'} [{scope}, {mode or 'graph+eager'}" + \
            f"{'' if nodes is None else f', {nodes} node(s)'}]"
        tail = f"regime {rest[1]} {'.'.join(map(str, rest[2:]))}" if rest[:1] == ("regimes",) else \
            ".".join(map(str, rest))
        return f"{where} {tail}"
    return ".".join(map(str, path))


def _check_shapes(data: dict[str, Any], reps: list, source: str) -> None:
    point = {_curve_key(c): _shape(c) for c in data.get("collectives") or [] if isinstance(c, dict)}
    for i, rep in enumerate(reps):
        for c in rep.get("collectives") or [] if isinstance(rep, dict) else []:
            key = _curve_key(c) if isinstance(c, dict) else ()
            if key in point and _shape(c) != point[key]:
                raise InputError(f"{source}: bootstrap[{i}] curve {_label(('collectives', key))} has regimes "
                                 f"{[n for n, _ in _shape(c)]} with breakpoints {[b for _, b in _shape(c)]}, "
                                 f"the point curve {[n for n, _ in point[key]]} / {[b for _, b in point[key]]}")


def check_replicates(data: dict[str, Any], source: str = "profile", *, rel_tol: float = 1e-6) -> None:
    """Refuse (InputError, one line) a profile whose bootstrap replicates contradict its point parameters
    (the module doc: every priced number, every curve's shape, at least 2 replicates)."""
    reps = data.get("bootstrap") or []
    ensemble = data.get("ensemble")
    n = ensemble.get("n") if isinstance(ensemble, dict) else len(reps)
    if len(reps) == 1 or n == 1:
        raise InputError(f"{source}: 1 bootstrap replicate; an interval needs at least 2 (or drop the replicate)")
    if len(reps) < 2:
        return
    _check_shapes(data, reps, source)
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
