"""Where a scenario's numbers come from, as text: the `sources:` line and its warnings, one CSV cell, the GPU badge.

`costmodel.model.sources` labels each priced component ("measured (file)", "from base (name)", "derived",
"default (...)") and lists the warnings a fitted profile owes its user. This module words them once for every
surface - CLI predict / recommend / compare, the dashboard, the CSV exports:

* `source_lines(sources)`: "sources: all_gather, all_reduce measured (collectives.csv); kernels from base (h200)"
  (components grouped by label, in the order they are priced), then one "warning: ..." line per warning;
* `provenance_cell(profile, scenario)`: the same as one CSV cell ("NAME (kind, GPU); sources: ...; warning: ...").
  A CSV comment line is not safe (a reader takes it for a row); the cell goes through
  `costmodel.io.safe_io.safe_cell` when written, so text starting with = + - @ is never a formula;
* `with_provenance(frame, profile, scenario)`: a table with that cell as a `provenance` column (the dashboard's CSV
  downloads);
* `gpu_mismatch(profile)`: one line when a profile measured on one GPU keeps parts of a base profile measured on
  another (an H100 calibration fitted onto the H200 profile), else None - the dashboard's warning badge.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ..model.sources import same_gpu, sources_dict
from ..profiles.types import Profile

if TYPE_CHECKING:  # predict imports this module and loads no pandas (tests/cli/test_lazy_imports.py)
    import pandas as pd


def source_lines(sources: dict[str, Any]) -> list[str]:
    """`sources_dict` output as lines: one "sources: ..." line (components sharing a label joined), then the
    warnings, each "warning: ..."."""
    src = sources.get("component_sources") or {}
    by_label: dict[str, list[str]] = {}
    for component, label in src.items():
        by_label.setdefault(label, []).append(component)
    lines = ["sources: " + "; ".join(f"{', '.join(c)} {label}" for label, c in by_label.items())] if src else []
    return lines + [f"warning: {w}" for w in sources.get("warnings") or []]


def scenario_source_lines(profile: Profile, scenario) -> list[str]:
    """`source_lines` of one scalar scenario on `profile`."""
    return source_lines(sources_dict(profile, scenario))


def provenance_cell(profile: Profile, scenario) -> str:
    """One CSV cell: the profile, its kind and GPU, then `source_lines` joined by "; " (one line, no newline)."""
    prov = profile.provenance
    head = f"{profile.name} ({prov.kind}, {prov.gpu})"
    return "; ".join([head, *scenario_source_lines(profile, scenario)]).replace("\n", " ")


def gpu_mismatch(profile: Profile) -> str | None:
    """"measured on GPU A, parts from base profile B (GPU C): another GPU's numbers" when the fitted profile's own
    GPU and its base's differ (`model.sources.same_gpu`), else None."""
    prov = profile.provenance
    if not (prov.base and prov.base_gpu and prov.gpu and prov.gpu != "unknown") or same_gpu(prov.gpu, prov.base_gpu):
        return None
    return (f"measured on {prov.gpu}, but what was not measured is priced by base profile {prov.base} "
            f"({prov.base_gpu}): another GPU's numbers")


def with_provenance(frame: pd.DataFrame, profile: Profile, scenario) -> pd.DataFrame:
    """A copy of `frame` with a `provenance` column (`provenance_cell`): per row at the row's own TP where the
    frame has a `tp` column (a TP heatmap prices several), else the one scalar `scenario`'s for every row."""
    out = frame.copy()
    if "tp" not in out.columns:
        out["provenance"] = provenance_cell(profile, scenario)
        return out
    cells = {tp: provenance_cell(profile, dataclasses.replace(scenario, tp=int(tp)))
             for tp in out["tp"].unique()}
    out["provenance"] = out["tp"].map(cells)
    return out
