"""What a fitted profile keeps from its base profile (calibration.fit's semantics, issue 18).

A fitted or uploaded profile is the base profile with the measured parts replaced:

* collectives: a measured (op, world size) curve prices the modes it measured; an (op, world size) measured
  only eagerly (nccl-tests' default `graph: 0`) also prices graph mode (mode null: an upper bound on a CUDA-graph
  replay, whose floor is lower; costmodel.profiles.types), so a base curve never prices it. Every other query
  goes to the profile's own any-p curve first (Profile.curve ranks own curves above kept ones), then to the base
  curves that are still reachable, which are tagged `from_base` (costmodel.model.sources warns where one
  prices an op this profile measured elsewhere).
* kernels: the base's GPU kernel model and its anchor tables when this fit measured no kernel rows; measured
  kernel rows replace the model (this machine's roofline / tables price them); ops not measured keep the
  base's roofline parameters.
* kernels.lm_head and kernels.host: the base's (no calibration measures them yet); none in the base: the
  documented defaults (costmodel.model.kernels.LM_HEAD_DEFAULT, costmodel.model.engines.DEFAULT_HOST).

`kernels.from_base` lists the kernel parts kept ("model", "tables", "lm_head", "host", "ops.<op>");
`provenance.base` / `base_gpu` name the base. A base measured on another GPU than the fit's rows gets a
warning row in the fit report.

Uncertainty of the kept parts (issue 18): a part kept from the base keeps the base's spread. The fitted
ensemble gets N = max(n, nb) members (n: the fit's own bootstrap members, nb: the base's, at most
MAX_BASE_MEMBERS of them, evenly spaced as costmodel.profiles.replicates.member_indices prices them): member j
is the fit's member j mod n (a fit with fewer members than its base repeats them, so both sets keep their own
range: the profile loader refuses a point value outside its members' range) with, for every kept part, the
value of the base's member floor(j nb / N) - the kernel model, lm_head, host, every kernel op not measured, the
launch costs when no kernel was measured, and every collective curve kept from the base (`keep_base_members`).
Without it every member priced the kept parts at the base's point value, so a fitted profile's intervals had no
width on them (a collectives-only fit onto the H200 base: 0 spread on every kernel term, against the base's
own; tests/calibration/test_fit_base_spread.py).
"""

from __future__ import annotations

from typing import Any

from costmodel.model.sources import same_gpu
from costmodel.profiles.consistency import curve_key as _curve_key
from costmodel.profiles.replicates import MAX_INTERVAL_MEMBERS, member_indices
from costmodel.profiles.types import Profile

KEPT_PARTS = ("model", "model_cv", "lm_head", "host")
MAX_BASE_MEMBERS = MAX_INTERVAL_MEMBERS  # base members carried over (the most an interval prices)


def eager_prices_graph(curves: list[dict], reps: list[list[dict]], reports: list[dict]) -> None:
    """Every measured (op, world size) curve with no graph-mode curve beside it prices graph mode too (mode null,
    eager_overhead_us 0), in place; its report row says so."""
    graph = {(c["op"], c["world_size"]) for c in curves if c["mode"] == "graph"}
    for curve in curves + [c for group in reps for c in group]:
        if curve["mode"] == "eager" and (curve["op"], curve["world_size"]) not in graph:
            curve["mode"] = None
    for row in reports:
        if (row.get("kind") == "collective" and row.get("mode") == "eager" and str(row.get("status")) == "fitted"
                and (row["op"], row["world_size"]) not in graph):
            row["note"] = ((row.get("note") or "") + "; no graph-mode rows for this op and p: this eager curve also "
                           "prices graph mode (an upper bound on a CUDA-graph replay)").lstrip("; ")


def keep_base_kernels(kernels: dict[str, Any], base: Profile, *, measured_kernels: bool,
                      measured_ops: set[str]) -> list[str]:
    """Put the base's kernel model (+ its tables) - only when no kernel rows were measured -, lm_head and host
    into `kernels` (in place) where the fit did not produce them; returns kernels["from_base"]."""
    raw = base.raw.get("kernels") or {}
    kept: list[str] = []
    if "model" not in kernels and not measured_kernels and raw.get("model") is not None:
        kernels["model"] = raw["model"]
        kept.append("model")
        if raw.get("model_cv"):
            kernels["model_cv"] = raw["model_cv"]
        own = {(t["op"], t["dtype"], t["mode"], t["world_size"]) for t in kernels.get("tables", [])}
        tables = [t for t in raw.get("tables", []) if (t["op"], t["dtype"], t["mode"], t["world_size"]) not in own]
        if tables:
            kernels["tables"] = list(kernels.get("tables", [])) + tables
            kept.append("tables")
    for part in ("lm_head", "host"):
        if part not in kernels and raw.get(part) is not None:
            kernels[part] = raw[part]
            kept.append(part)
    kept += [f"ops.{op}" for op in sorted(kernels.get("ops", {})) if op not in measured_ops]
    if kept:
        kernels["from_base"] = kept
    return kept


def keep_base_members(profile: dict[str, Any], base: Profile, kept: list[str], *, kernels_measured: bool) -> int:
    """Give every member of `profile["bootstrap"]` (in place) the base member's value of each part kept from the
    base (module doc, "Uncertainty of the kept parts"); returns the number of members changed (0: the fit has no
    members, or the base has none)."""
    reps = profile.get("bootstrap") or []
    if not reps or not len(base.bootstrap):
        return 0
    members = [base.bootstrap[i] for i in member_indices(len(base.bootstrap), MAX_BASE_MEMBERS)]
    n, nb = len(reps), len(members)
    reps.extend({**reps[j % n]} for j in range(n, max(n, nb)))  # shallow: each member's own top-level keys
    point_kernels = profile["kernels"]
    kept_ops = [part[4:] for part in kept if part.startswith("ops.")]
    kept_kernel_parts = [part for part in ("model", "lm_head", "host") if part in kept]
    base_keys = {_curve_key(c) for c in profile.get("collectives", []) if c.get("from_base")}
    tags = {_curve_key(c): {"provenance": c.get("provenance"), "from_base": c["from_base"]}
            for c in profile.get("collectives", []) if c.get("from_base")}
    total = len(reps)
    for j, rep in enumerate(reps):
        theirs = members[j * nb // total]
        bk = theirs.get("kernels") or {}
        kern = dict(rep.get("kernels") or {})
        for part in kept_kernel_parts:
            if part in bk:
                kern[part] = bk[part]
        if kept_ops and isinstance(bk.get("ops"), dict):
            ops = dict(kern.get("ops") or point_kernels["ops"])  # a member's ops replace the point's whole
            ops.update({op: bk["ops"][op] for op in kept_ops if op in bk["ops"]})
            kern["ops"] = ops
        if not kernels_measured:  # the launch costs are the base's too
            kern.update({k: bk[k] for k in ("graph_kernel_us", "eager_launch_us") if k in bk})
        if kern:
            rep["kernels"] = kern
        if base_keys and theirs.get("collectives"):
            swap = {_curve_key(c): {**c, **tags[_curve_key(c)]} for c in theirs["collectives"]
                    if _curve_key(c) in base_keys}
            own = [c for c in rep.get("collectives", []) if _curve_key(c) not in swap]
            rep["collectives"] = own + list(swap.values())
    return total


def base_rows(base: Profile, kept: list[str], gpu: str, columns: tuple[str, ...]) -> list[dict]:
    """Fit report rows for the kernel parts kept from the base, and a warning row when the base's GPU differs."""
    rows = []
    names = {"model": "GPU kernel model (kernels.model)", "tables": "the kernel model's measured anchor tables",
             "lm_head": "lm_head GEMM model (kernels.lm_head)", "host": "host launch costs (kernels.host)"}
    for part in kept:
        if part in names:
            rows.append({**{c: None for c in columns}, "kind": "base", "op": names[part],
                         "status": f"from base profile {base.name}", "breakpoints_bytes": [], "note": ""})
    warning = gpu_warning(base, gpu)
    if warning:
        rows.append({**{c: None for c in columns}, "kind": "warning", "op": "base profile", "status": warning,
                     "breakpoints_bytes": [], "note": ""})
    return rows


def gpu_warning(base: Profile, gpu: str) -> str:
    """'measured on H100 ..., but the base profile h200 is H200 ...: ...' when the fit's GPU differs, else ''."""
    base_gpu = base.provenance.gpu or ""
    if not gpu or gpu == "unknown" or not base_gpu or same_gpu(gpu, base_gpu):
        return ""
    return (f"rows measured on {gpu}, but the base profile {base.name} is {base_gpu}: every part not measured here "
            f"(the fit report's 'from base' rows) is {base_gpu}'s; pass --base-profile for this GPU")
