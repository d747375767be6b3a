"""Sensitivity: which profile parameter moves a strategy's saving most.

For every numeric parameter theta of the profile's collective curves and kernel
roofline (not the measured tables), the elasticity of the saving S (us per
draft step, strategy vs the baseline) is the central difference

    E = [S(theta (1 + h)) - S(theta (1 - h))] / (2 h S(theta)),   h = 1%

i.e. the % change of the saving per 1% change of the parameter. Parameters
that are 0, or that the scenario never touches, have E = 0 and are dropped.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass

import pandas as pd

from ..io.errors import InputError
from ..model.components import BASELINE
from ..model.predict import predict
from ..model.scenario import Scenario
from ..profiles.parse import profile_from_dict
from ..profiles.types import Profile

_REGIME_KEYS = ("alpha_base_us", "alpha_per_peer_us", "alpha_per_node_us", "busbw_gbps", "s_half_bytes", "max_bytes")
_CURVE_KEYS = ("launch_us", "eager_overhead_us", "inter_node_busbw_gbps")
_OP_KEYS = ("launches", "fixed_us", "bw_gbps")


@dataclass(frozen=True)
class Parameter:
    label: str
    path: tuple  # keys into the profile JSON


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
        if isinstance(host.get(key), (int, float)) and not isinstance(host.get(key), bool) and host[key]:
            yield Parameter(f"host {key}", ("kernels", "host", key))
    for op, spec in raw["kernels"]["ops"].items():
        for key in _OP_KEYS:
            if spec.get(key):
                yield Parameter(f"{op} {key}", ("kernels", "ops", op, key))


def _scaled(profile: Profile, path: tuple, factor: float) -> Profile:
    data = copy.deepcopy({k: v for k, v in profile.raw.items()
                          if k not in ("bootstrap", "ensemble")})  # replicates: not needed
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = node[path[-1]] * factor
    return profile_from_dict(data, source=profile.name)


def elasticities(scenario: Scenario, profile: Profile, strategy: str = "local_argmax_pairs", *,
                 step: float = 0.01) -> pd.DataFrame:
    """Table of parameters sorted by |elasticity| of the saving (see module doc)."""
    if scenario.size != 1:
        raise InputError("sensitivity needs a single scenario")
    strategies = (BASELINE, strategy)
    base = float(predict(scenario, profile, strategies).saving_us(strategy))
    if base == 0:
        raise InputError("sensitivity: the saving is exactly 0 here, elasticities are undefined")
    rows = []
    for param in parameters(profile):
        try:
            up = float(predict(scenario, _scaled(profile, param.path, 1 + step), strategies).saving_us(strategy))
            down = float(predict(scenario, _scaled(profile, param.path, 1 - step), strategies).saving_us(strategy))
        except InputError:  # e.g. a breakpoint pushed past its neighbour
            continue
        e = (up - down) / (2 * step * base)
        if abs(e) > 1e-6:
            rows.append({"parameter": param.label, "elasticity": e,
                         "saving_change_us_per_10pct": (up - down) / (2 * step) * 0.1})
    table = pd.DataFrame(rows, columns=["parameter", "elasticity", "saving_change_us_per_10pct"])
    table.insert(0, "strategy", strategy)
    table["saving_us"] = base
    return table.reindex(table["elasticity"].abs().sort_values(ascending=False).index).reset_index(drop=True)
