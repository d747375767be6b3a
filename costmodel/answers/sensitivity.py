"""Sensitivity: which profile parameter moves a strategy's saving most.

For every numeric parameter theta of the profile's collective curves, kernel roofline, host launch costs, GPU
kernel model (`kernels.model`: reduction rates and floors, the relayout copy rate, pair-reduce costs, ...) and
lm_head GEMM model (not the measured tables, nor the SM count and threads per SM - integer hardware facts), the
elasticity of the saving S (us per draft call, strategy vs the baseline) is the central difference

    E = [S(theta (1 + h)) - S(theta (1 - h))] / (2 h S(theta)),   h = 1%

i.e. the % change of the saving per 1% change of the parameter. E = dS / S is also the % change of the saving's
size |S|, so where the saving is negative (the strategy is slower: a loss) E > 0 means the loss widens: the
table's `effect` words follow the sign of the saving (`effect`: "raises the saving" / "lowers the saving", or
"narrows the loss" / "widens the loss"), and `elasticity_meaning` says how to read E (issue 43 item 6: "+1.343"
next to "-3.80 us per +1%" read as a rising saving). Parameters that are 0, or that the scenario never
touches, have E = 0 and are dropped. S is the answer's quantity: per draft call (the logits path alone, `predict`),
or - given a `WholeStep` (where an engine runs the step: `costmodel.answers.whole_step.applies`) - the whole draft
step's saving per decode step, T_step(baseline) - T_step(strategy) at the target placement
(`whole_step.whole_step_totals`; stacked: `costmodel.model.members.draft_step_members`), so the drafter forward,
the lm_head GEMM and the host launches they hide move it too. The table's `quantity` column says which.

Priced as one ensemble: the 2 P perturbed profiles (each the point profile with one part re-parsed - the curve,
kernel op or model object the parameter lives in, checked as a whole document would be: a perturbation the
profile checks refuse, e.g. a breakpoint pushed past its neighbour, drops the parameter) are stacked as (2 P, 1)
parameters and priced in one evaluation (`costmodel.model.members.predict_members`, bit-identical to one
`predict` per profile). Perturbations the stack cannot hold (host costs, a fitted curve's breakpoints) are priced
one by one.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from ..io.errors import InputError
from ..model.components import BASELINE
from ..model.draft_step import parse_placement
from ..model.drafter import DraftArch
from ..model.members import draft_step_members, predict_members
from ..model.predict import predict
from ..model.scenario import Scenario
from ..profiles import kernel_params
from ..profiles.parse import kernel_op_from_dict, profile_from_dict
from ..profiles.parse_curves import curve_from_dict
from ..profiles.schema import profile_json_schema
from ..profiles.schema_check import SchemaViolation, check_schema
from ..profiles.types import Profile
from .whole_step import PER_CALL, QUANTITY, whole_step_totals

_REGIME_KEYS = ("alpha_base_us", "alpha_per_peer_us", "alpha_per_node_us", "busbw_gbps", "s_half_bytes", "max_bytes")
_CURVE_KEYS = ("launch_us", "eager_overhead_us", "inter_node_busbw_gbps")
_OP_KEYS = ("launches", "fixed_us", "bw_gbps")
_LM_HEAD_KEYS = ("floor_us", "weight_gbps", "tflops")


GAINS = ("raises the saving", "narrows the loss")  # a parameter's +1% in the strategy's favour
LOSSES = ("lowers the saving", "widens the loss")  # ... against it


def effect(saving_us: float, change_us: float) -> str:
    """What +1% of a parameter does to a strategy's saving `saving_us` (its change `change_us`), in words that follow
    the saving's sign: a positive saving rises or falls, a negative one (a loss) narrows or widens."""
    if saving_us > 0:
        return GAINS[0] if change_us >= 0 else LOSSES[0]
    return GAINS[1] if change_us >= 0 else LOSSES[1]


def elasticity_meaning(saving_us: float) -> str:
    """How to read the elasticity at this saving: of the saving, or - the saving negative - of the loss's size."""
    if saving_us > 0:
        return "% change of the saving per +1% of the parameter; positive raises it"
    return "% change of the loss per +1% of the parameter; the saving is negative here, so positive widens the loss"


@dataclass(frozen=True)
class WholeStep:
    """The drafter that prices the whole draft step's saving (us per decode step) in place of one call's."""

    arch: DraftArch
    kv_len: int = 2048
    forward_us: float | None = None


@dataclass(frozen=True)
class Parameter:
    label: str
    path: tuple  # keys into the profile JSON


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and bool(value)


def parameters(profile: Profile) -> Iterator[Parameter]:
    """Every numeric, non-zero model parameter of the profile, with a readable label."""
    raw = profile.raw
    for i, c in enumerate(raw["collectives"]):
        scope = f"p={c['world_size']}" if c.get("world_size") else "any p"
        mode = c.get("mode") or "graph+eager"
        for key in _CURVE_KEYS:
            if c.get(key):
                yield Parameter(f"{c['op']} [{scope}, {mode}] {key}", ("collectives", i, key))
        for j, r in enumerate(c["regimes"]):
            for key in _REGIME_KEYS:
                if r.get(key):
                    yield Parameter(f"{c['op']} [{scope}, {mode}] {r.get('name', j)} {key}",
                                    ("collectives", i, "regimes", j, key))
    for key in ("graph_kernel_us", "eager_launch_us"):
        if raw["kernels"].get(key):
            yield Parameter(f"kernels {key}", ("kernels", key))
    host = raw["kernels"].get("host") or {}
    for key in ("torch_op_us", "view_op_us", "c10d_call_us"):  # host launch costs (engines.host_costs)
        if _number(host.get(key)):
            yield Parameter(f"host {key}", ("kernels", "host", key))
    for op, spec in raw["kernels"]["ops"].items():
        for key in _OP_KEYS:
            if spec.get(key):
                yield Parameter(f"{op} {key}", ("kernels", "ops", op, key))
    yield from _model_parameters(raw["kernels"])


def _model_parameters(kernels: dict[str, Any]) -> Iterator[Parameter]:
    """The GPU kernel model's rates, floors and costs (kernel_params.GpuKernelModel) and the lm_head model's."""
    model = kernels.get("model")
    if isinstance(model, dict):
        for key in kernel_params._FLOAT_FIELDS:
            if _number(model.get(key)):
                yield Parameter(f"kernel model {key}", ("kernels", "model", key))
        for name, spec in (model.get("reduce_ops") or {}).items():
            for key in ("floor_us", "elems_per_us"):
                if isinstance(spec, dict) and _number(spec.get(key)):
                    yield Parameter(f"kernel model reduce_ops.{name}.{key}", ("kernels", "model", "reduce_ops", name,
                                                                             key))
        for dtype, value in (model.get("copy_gbps") or {}).items():
            if _number(value):
                yield Parameter(f"kernel model copy_gbps.{dtype}", ("kernels", "model", "copy_gbps", dtype))
    lm_head = kernels.get("lm_head")
    if isinstance(lm_head, dict):
        for key in _LM_HEAD_KEYS:
            if _number(lm_head.get(key)):
                yield Parameter(f"lm_head {key}", ("kernels", "lm_head", key))


@lru_cache(maxsize=1)
def _schema() -> dict:
    return profile_json_schema()


def _leaf_schema(path: tuple) -> dict | None:
    """The JSON schema of the value at `path` (None: not found - the caller then checks the whole document)."""
    root = node = _schema()
    for key in path:
        if "$ref" in node:
            node = root["$defs"][node["$ref"].rsplit("/", 1)[-1]]
        if "anyOf" in node:  # e.g. an object or null: the object
            options = [o for o in node["anyOf"] if o.get("type") != "null"]
            if len(options) != 1:
                return None
            node = options[0]
            if "$ref" in node:
                node = root["$defs"][node["$ref"].rsplit("/", 1)[-1]]
        if isinstance(key, int):
            node = node.get("items")
        else:
            node = (node.get("properties") or {}).get(key) or node.get("additionalProperties")
        if not isinstance(node, dict):
            return None
    return node


def _scaled_document(profile: Profile, path: tuple, factor: float) -> dict[str, Any]:
    """The profile's document (replicates dropped: not needed) with the value at `path` times `factor`; only the
    containers on the path are copied."""
    data = {k: v for k, v in profile.raw.items() if k not in ("bootstrap", "ensemble")}
    node = data
    for key in path[:-1]:
        child = node[key]
        node[key] = child = list(child) if isinstance(child, list) else dict(child)
        node = child
    node[path[-1]] = node[path[-1]] * factor
    return data


def _perturbed(profile: Profile, path: tuple, factor: float) -> Profile:
    """`profile` with the parameter at `path` times `factor`: the same Profile as parsing the whole scaled document
    (InputError where that refuses it), re-parsing only the part that holds the parameter."""
    data = _scaled_document(profile, path, factor)
    node: Any = data
    for key in path:
        node = node[key]
    schema = _leaf_schema(path)
    if schema is None or not math.isfinite(node):
        return profile_from_dict(data, source=profile.name)  # the whole check, as before
    try:
        check_schema(node, schema, _schema(), path)
    except SchemaViolation as exc:
        raise InputError(f"{profile.name}: {exc.message}") from None
    source, kern = profile.name, data["kernels"]
    changes: dict[str, Any]
    if path[0] == "collectives":
        i = path[1]
        field, k = _curve_slot(profile, i)
        curves = list(getattr(profile, field))
        curves[k] = curve_from_dict(data["collectives"][i], f"{source}.collectives[{i}]")
        changes = {field: tuple(curves)}
    elif path[:2] == ("kernels", "ops"):
        op = path[2]
        changes = {"kernel_ops": {**profile.kernel_ops,
                                  op: kernel_op_from_dict(op, kern["ops"][op], f"{source}.kernels.ops.{op}")}}
    elif path[:2] == ("kernels", "model"):
        changes = {"kernel_model": kernel_params.model_from_dict(kern["model"], f"{source}.kernels.model")}
    elif path[:2] == ("kernels", "lm_head"):
        changes = {"lm_head": kernel_params.lm_head_from_dict(kern["lm_head"], f"{source}.kernels.lm_head")}
    elif path[:2] == ("kernels", "host"):
        changes = {"kernel_host": kernel_params.host_from_dict(kern["host"], f"{source}.kernels.host")}
    else:
        return profile_from_dict(data, source=source, document_checked=True)
    return dataclasses.replace(profile, raw=data, bootstrap=(), **changes)


def _curve_slot(profile: Profile, i: int) -> tuple[str, int]:
    """Where the document's collectives[i] lives in the Profile: ("collectives" | "impl_curves", index), as
    `profile_from_dict` splits them (NCCL curves apart from the one-shot / multimem ones)."""
    nccl = [c.get("impl", "nccl") == "nccl" for c in profile.raw["collectives"]]  # parse's default impl
    return ("collectives", sum(nccl[:i])) if nccl[i] else ("impl_curves", i - sum(nccl[:i]))


def _stackable(profile: Profile, path: tuple) -> bool:
    """Whether the perturbation can join the stacked ensemble (costmodel.model.members.stack_profiles needs shared
    host costs and shared breakpoints of fitted curves)."""
    if path[:2] == ("kernels", "host"):
        return False
    if path[0] == "collectives" and path[-1] == "max_bytes":
        field, k = _curve_slot(profile, path[1])
        return getattr(profile, field)[k].select == "min"
    return True


def _point_saving(scenario: Scenario, profile: Profile, strategy: str, whole: WholeStep | None) -> float:
    """S of one profile (module doc): per draft call, or the whole draft step's per decode step."""
    if whole is None:
        return float(predict(scenario, profile, (BASELINE, strategy)).saving_us(strategy))
    totals = whole_step_totals(scenario, profile, whole.arch, kv_len=whole.kv_len, forward_us=whole.forward_us,
                               strategies=tuple(dict.fromkeys((BASELINE, strategy))))[0]  # the two it compares
    return float(totals[BASELINE] - totals[strategy])


def _saving(scenario: Scenario, profile: Profile, strategy: str, whole: WholeStep | None) -> float:
    """`_point_saving`, NaN where pricing refuses the profile."""
    try:
        return _point_saving(scenario, profile, strategy, whole)
    except InputError:
        return math.nan


def _savings(scenario: Scenario, members: list[Profile], strategy: str, whole: WholeStep | None, *,
             stack: bool) -> np.ndarray:
    """Each member's saving: one stacked evaluation (stack=True) where pricing takes it, else one by one."""
    if stack and len(members) > 1:
        sc = scenario.item(0)
        try:
            priced = predict_members(sc, members, (BASELINE, strategy)) if whole is None else draft_step_members(
                sc, members, parse_placement("target", int(sc.tp)), whole.arch, (BASELINE, strategy),
                kv_len=whole.kv_len, forward_us=whole.forward_us)
            return np.asarray(priced.saving_us(strategy), dtype=float).reshape(len(members))
        except InputError:
            pass
    return np.array([_saving(scenario, m, strategy, whole) for m in members], dtype=float)


def elasticities(scenario: Scenario, profile: Profile, strategy: str = "local_argmax_pairs", *,
                 step: float = 0.01, whole_step: WholeStep | None = None) -> pd.DataFrame:
    """Table of parameters sorted by |elasticity| of the saving (see module doc): of one draft call's, or with
    `whole_step` of the whole draft step's per decode step (InputError where that cannot be priced)."""
    if scenario.size != 1:
        raise InputError("sensitivity needs a single scenario")
    base = _point_saving(scenario, profile, strategy, whole_step)
    if base == 0:
        raise InputError("sensitivity: the saving is exactly 0 here, elasticities are undefined")
    kept: list[tuple[Parameter, bool, int]] = []  # (parameter, stacked, index of its +h member in its group)
    groups: dict[bool, list[Profile]] = {True: [], False: []}
    for param in parameters(profile):
        try:
            pair = [_perturbed(profile, param.path, 1 + step), _perturbed(profile, param.path, 1 - step)]
        except InputError:  # e.g. a breakpoint pushed past its neighbour
            continue
        stack = _stackable(profile, param.path)
        kept.append((param, stack, len(groups[stack])))
        groups[stack] += pair
    savings = {stack: _savings(scenario, members, strategy, whole_step, stack=stack)
               for stack, members in groups.items()}
    rows = []
    for param, stack, k in kept:
        up, down = float(savings[stack][k]), float(savings[stack][k + 1])
        if math.isnan(up) or math.isnan(down):  # pricing refused a perturbed profile
            continue
        e = (up - down) / (2 * step * base)
        if abs(e) > 1e-6:
            rows.append({"parameter": param.label, "elasticity": e,
                         "saving_change_us_per_1pct": (up - down) / (2 * step) * 0.01})
    table = pd.DataFrame(rows, columns=["parameter", "elasticity", "saving_change_us_per_1pct"])
    table["effect"] = [effect(base, c) for c in table["saving_change_us_per_1pct"]]
    table.insert(0, "strategy", strategy)
    table["saving_us"] = base
    table["quantity"] = PER_CALL if whole_step is None else QUANTITY
    return table.reindex(table["elasticity"].abs().sort_values(ascending=False).index).reset_index(drop=True)
