"""Where each priced component of a scenario comes from: "measured (files)", "from base (name)", "derived" or
"default (...)" - and the warnings a fitted profile owes its user (issue 18).

A fitted profile (calibration.fit; costmodel.profiles.types "Fitted profiles") is its base profile with the
measured parts replaced: curves kept from the base carry `from_base`, `kernels.from_base` lists the kernel parts
kept. `component_sources` labels, for one scalar scenario, the curve that prices each collective (at the
scenario's TP, node count and the mode each engine runs it in), the kernels, the lm_head GEMM and the host
costs; `source_warnings` says where a base curve prices an op this profile measured elsewhere (another
fabric's curve next to this one's) and where the base was measured on another GPU.
"""

from __future__ import annotations

from typing import Any

from ..io.errors import InputError
from ..io.schema_names import COLLECTIVE_OPS
from ..profiles.types import CollectiveCurve, Profile
from .engines import captured_mask
from .fabrics import fabric_line

MAX_FILES_SHOWN = 2


def same_gpu(a: str, b: str) -> bool:
    """Whether two GPU names name one GPU ("NVIDIA H100 80GB HBM3" vs "H100 80GB HBM3": yes)."""
    norm = [" ".join(x.lower().replace("nvidia", "").replace("-", " ").split()) for x in (a, b)]
    return norm[0] == norm[1] or (bool(norm[0]) and bool(norm[1]) and (norm[0] in norm[1] or norm[1] in norm[0]))


def _files(profile: Profile) -> str:
    names = [f.rsplit("/", 1)[-1] for f in profile.provenance.files] or ["uploaded measurements"]
    more = len(names) - MAX_FILES_SHOWN
    return ", ".join(names[:MAX_FILES_SHOWN]) + (f" +{more} more" if more > 0 else "")


def _kept(profile: Profile) -> list[str]:
    return list((profile.raw.get("kernels") or {}).get("from_base") or [])


def curve_label(profile: Profile, curve: CollectiveCurve) -> str:
    if curve.from_base:
        return f"from base ({curve.from_base})"
    return f"measured ({_files(profile)})" if curve.provenance == "measured" else "derived"


def _modes(scenario) -> list[str]:
    """The modes the scenario's collectives run in (engine plans: costmodel.model.engines)."""
    graph = bool(captured_mask("all_gather", scenario.engine, scenario.mode))
    return ["graph" if graph else "eager"]


def _collective_curves(profile: Profile, scenario) -> dict[str, tuple[str, CollectiveCurve | None]]:
    s = scenario.item(0)
    tp, nodes, (mode,) = int(s.tp), int(s.nodes), _modes(s)
    out = {}
    for op in COLLECTIVE_OPS:
        if tp <= 1:
            continue
        try:
            out[op] = (mode, profile.curve(op, tp, mode, nodes))
        except InputError:
            out[op] = (mode, None)
    return out


def _kernel_label(profile: Profile) -> str:
    kept, base = _kept(profile), profile.provenance.base
    model = profile.kernel_model
    if model is not None:
        if "model" in kept:
            return f"from base ({base})"
        return f"measured ({_files(profile)})" if model.provenance == "measured" else str(model.provenance)
    measured = sorted(op for op, spec in profile.kernel_ops.items() if spec.provenance == "measured")
    from_base = [p.removeprefix("ops.") for p in kept if p.startswith("ops.")]
    if measured and from_base:
        return f"measured ({_files(profile)}); from base ({base}): {', '.join(from_base)}"
    if measured:
        return f"measured ({_files(profile)})"
    return f"from base ({base})" if from_base else "derived"


def component_sources(profile: Profile, scenario) -> dict[str, str]:
    """{component: label} for a scalar scenario: each collective at its TP / mode, "kernels", "lm_head", "host"."""
    out = {}
    for op, (_mode, curve) in _collective_curves(profile, scenario).items():
        out[op] = "none (refused)" if curve is None else curve_label(profile, curve)
    kept, base = _kept(profile), profile.provenance.base
    out["kernels"] = _kernel_label(profile)
    if profile.lm_head is None:
        out["lm_head"] = "default (no kernels.lm_head: vLLM head start 0 us)"
    else:
        out["lm_head"] = f"from base ({base})" if "lm_head" in kept else profile.lm_head.provenance
    host = (profile.raw.get("kernels") or {}).get("host")
    if host is None:
        out["host"] = "default (no kernels.host: the H200 figures of costmodel.model.engines.DEFAULT_HOST)"
    else:
        out["host"] = f"from base ({base})" if "host" in kept else "profile kernels.host"
    return out


def source_warnings(profile: Profile, scenario) -> list[str]:
    """One line per mix of fabrics: a base curve pricing an op this profile measured at other p / modes, and a
    base measured on another GPU than the profile's own rows."""
    out = []
    s = scenario.item(0)
    for op, (mode, curve) in _collective_curves(profile, scenario).items():
        own = [c for c in profile.collectives if c.op == op and c.provenance == "measured" and not c.from_base]
        if curve is None or not curve.from_base or not own:
            continue
        where = ", ".join(sorted({"any p" if c.world_size is None else f"p {c.world_size}" for c in own}))
        modes = "/".join(sorted({c.mode or "graph+eager" for c in own}))
        out.append(f"{op} at TP {int(s.tp)} ({mode}): not measured in this profile (measured: {where}, {modes}); "
                   f"priced by base profile {curve.from_base}'s curve, another fabric's numbers next to these")
    base_gpu, gpu = profile.provenance.base_gpu, profile.provenance.gpu
    if profile.provenance.base and base_gpu and gpu and gpu != "unknown" and not same_gpu(gpu, base_gpu):
        labels, kept = component_sources(profile, scenario), _kept(profile)
        parts = [k for k, v in labels.items() if k != "kernels" and v.startswith("from base")]
        if "model" in kept or any(p.startswith("ops.") and not p.endswith("_fused") for p in kept):
            parts.append("kernels")
        if parts:
            out.append(f"measured on {gpu}, but {', '.join(parts)} come from base profile {profile.provenance.base} "
                       f"({base_gpu})")
    fabric = fabric_line(profile, int(s.nodes))  # --fabric on a multi-node scenario: name it, say how to calibrate
    return out + ([fabric] if fabric else [])


def sources_dict(profile: Profile, scenario) -> dict[str, Any]:
    """{"component_sources": {...}, "warnings": [...]} for JSON output."""
    return {"component_sources": component_sources(profile, scenario), "warnings": source_warnings(profile, scenario)}
