"""A profile's bootstrap replicates as complete Profiles, with the physical constraints applied.

Parameter uncertainty. A profile may carry `bootstrap`: a list of replicate parameter sets, each
an object with `collectives` (a full curve list) and/or `kernels` (a partial kernels object
merged over the profile's). Each replicate becomes a complete profile after the physical
constraints (`constrain`): within a derived curve a later (larger-message) protocol is never slower in
bandwidth (busbw_i <= min_{j>i} busbw_j, e.g. LL <= LL128 <= Simple), latencies >= 0, and kernel
bandwidths <= the profile's `kernels.hbm_gbps` where it states one. The bandwidth ceiling is NCCL's
protocol order, so it is not applied to a measured curve (`provenance: measured`, calibration.fit): its
regimes are segments of a fit to measured medians, whose bandwidth may fall with size (the bundled cpu-gloo
all_gather p=2: 0.73 > 0.46 > 0.24 > 0.11 GB/s, a gloo buffer / cache effect, and its tail ramps); clipping
them to the last segment's would price every replicate at its slowest segment (issue 18: the cpu-gloo
intervals then sat above their own point prediction and covered 173 / 224). On load
(`consistency.check_replicates`) a profile whose replicates contradict its own point parameters - a point
value outside the [min, max] of its replicates - is refused with one line.

Work is bounded by MAX_INTERVAL_MEMBERS: a profile with more replicates is priced from that many, evenly spaced
over its list (`member_indices`: round(i (n - 1) / (N - 1)), i = 0..N-1, the first and last included), so a
20 MiB profile of thousands of small replicates costs what 200 do at every prediction. The bundled and fitted
profiles carry at most 100 (calibration.fit MAX_STORED_REPLICATES) and are priced from all of them.

Two ways to build them, the same Profiles (`==`, and equal `raw` documents): a uniform-ranges-v1 ensemble (every
bundled GPU profile) takes `drawn_replicates.drawn_replicates` - its point document parsed once, each replicate
that with the member's drawn numbers put in, computed as compact.py draws them and `constrain` bounds them, each
checked as the parser checks it (~2x less CPU than the slow path, 0.7 s against 1.5 s for the 1,300 bundled
replicates with the garbage collector off, and no member documents built). Anything
else - a verbose `bootstrap` list, a columns-v1 ensemble, stored columns beyond the kernel model, a drawn value the
parser would refuse - takes the slow path below: each member document merged over the point document, constrained
and parsed (`profile_from_dict`), which gives the replicates or the one-line InputError.

Memory: a replicate set is ~30k small acyclic objects per profile (~400k for the 1,400 replicates `validate`
prices). They are built with the cyclic garbage collector paused and then moved to its oldest generation
(`_gc_paused`), so the collections their allocation would trigger do not traverse them again and again (~1 s of
`validate`); the cache is emptied at exit, so reference counting frees them before the interpreter's final
collections, which would otherwise traverse them (~0.8 s). Neither changes a value.
"""

from __future__ import annotations

import atexit
import gc
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..io.errors import InputError
from .compact import member_curve
from .consistency import _curve_key
from .drawn_replicates import drawn_replicates
from .parse import profile_from_dict
from .types import Profile

_CACHE: dict[int, tuple[Profile, tuple[Profile, ...]]] = {}
atexit.register(_CACHE.clear)  # freed by reference counting before the final collections (module doc)
MAX_INTERVAL_MEMBERS = 200


@contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while the block builds a replicate set (acyclic objects: nothing for it to
    free), then every object it tracks moved to its oldest generation (gc.freeze + gc.unfreeze: a list splice,
    skipped when something else holds objects frozen), so the young collections do not traverse the new set; the
    collector is switched back on only when it was on."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        if enabled:
            gc.enable()


def member_indices(n: int, limit: int = MAX_INTERVAL_MEMBERS) -> list[int]:
    """The replicates an interval prices: all n, or `limit` of them evenly spaced (module doc)."""
    if n <= limit:
        return list(range(n))
    return sorted({round(i * (n - 1) / (limit - 1)) for i in range(limit)})


def replicate_profiles(profile: Profile) -> list[Profile]:
    """One Profile per bootstrap replicate priced (`member_indices`; empty when the profile has none); cached per
    profile object."""
    hit = _CACHE.get(id(profile))
    if hit is None or hit[0] is not profile:
        if len(_CACHE) >= 16:
            _CACHE.pop(next(iter(_CACHE)))
        with _gc_paused():
            hit = _CACHE[id(profile)] = (profile, _replicates(profile))
    return list(hit[1])


def _replicates(profile: Profile) -> tuple[Profile, ...]:
    """The replicates priced: `drawn_replicates` where it applies, else `parsed_replicates` (module doc)."""
    indices = member_indices(len(profile.bootstrap))
    fast = drawn_replicates(profile, indices)
    return fast if fast is not None else parsed_replicates(profile, indices)


def parsed_replicates(profile: Profile, indices: Sequence[int]) -> tuple[Profile, ...]:
    """Replicates `indices` the slow way, for any ensemble: each member document merged over the point document,
    constrained (`constrain`) and parsed (`profile_from_dict`); InputError (one line) where one is refused."""
    out = []
    for i in indices:
        rep = profile.bootstrap[i]
        if not isinstance(rep, dict):
            raise InputError(f"profile {profile.name}: bootstrap[{i}] must be an object")
        # profile_from_dict never mutates; "ensemble": the compact form of the bootstrap list (compact.py)
        data = {k: v for k, v in profile.raw.items() if k not in ("bootstrap", "ensemble")}
        if "collectives" in rep:  # replicate curves replace the point curves with the same key; others stay
            theirs = {_curve_key(c) for c in rep["collectives"]}
            data["collectives"] = [*rep["collectives"],
                                   *(c for c in data.get("collectives", []) if _curve_key(c) not in theirs)]
        if "kernels" in rep:
            data["kernels"] = {**data["kernels"], **rep["kernels"]}
        data["collectives"] = [member_curve(c) for c in data.get("collectives", [])]  # no candidates per member
        # the parent document passed check_document with its replicates; constrain only moves values inward
        out.append(profile_from_dict(constrain(data), source=f"{profile.name}.bootstrap[{i}]",
                                     document_checked=True, parent=profile))
    return tuple(out)


def constrain(data: dict[str, Any]) -> dict[str, Any]:
    """A copy of a profile document with the physical constraints of the module doc applied.

    Per derived curve busbw_i <= min over later regimes (a larger-message protocol is never slower in
    bandwidth: LL <= LL128 <= Simple; not for a measured curve, module doc); latencies clipped at 0; kernel op
    bandwidths <= kernels.hbm_gbps when the profile states it. Only the parts that change are copied.
    """
    curves = []
    for c in data.get("collectives", []):
        regimes = list(c.get("regimes", []))
        ceiling = math.inf
        protocols = c.get("provenance") != "measured"  # measured segments keep their own bandwidths
        for i in range(len(regimes) - 1, -1, -1):
            r = regimes[i]
            changed: dict[str, float] = {}
            bw = r.get("busbw_gbps")
            if protocols and isinstance(bw, (int, float)) and not isinstance(bw, bool):
                if bw > ceiling:
                    changed["busbw_gbps"] = bw = ceiling
                ceiling = min(ceiling, bw)
            for key in ("alpha_base_us", "alpha_per_peer_us", "alpha_per_node_us"):
                v = r.get(key)
                if isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0:
                    changed[key] = 0.0
            if changed:  # a copy of the regimes that change (same keys, same order); the others are shared
                regimes[i] = {**r, **changed}
        curves.append({**c, "regimes": regimes})
    out = {**data, "collectives": curves}
    kern = data.get("kernels")
    hbm = kern.get("hbm_gbps") if isinstance(kern, dict) else None
    if isinstance(hbm, (int, float)) and not isinstance(hbm, bool) and hbm > 0 and isinstance(kern.get("ops"), dict):
        ops = {op: ({**spec, "bw_gbps": min(spec["bw_gbps"], hbm)}
                    if isinstance(spec, dict) and isinstance(spec.get("bw_gbps"), (int, float)) else spec)
               for op, spec in kern["ops"].items()}
        out["kernels"] = {**kern, "ops": ops}
    return out
