"""The verdict: which strategy wins at the chosen batch, by how much, and where the answer flips.

`evaluate(inputs, uploaded)` is the one computation every rerun needs (prediction at the chosen batch +
crossovers); it raises costmodel.InputError for an impossible scenario so the app can fall back to the
last good inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from costmodel import BASELINE, Profile

from .data import FOCUS, crossover_frame, point_frame, profile_from_text, profile_text, saving_interval
from .state import Inputs


@dataclass(frozen=True)
class Verdict:
    """What the verdict tiles say, for one scenario at one batch."""

    batch: float
    fastest: str
    focus_faster: bool
    focus_valid: bool
    focus_saving_us: float
    focus_saving_pct: float
    focus_saving_decode_us: float
    best_saving_us: float
    best_saving_pct: float
    best_saving_decode_us: float
    crossover_batch: float | None
    crossover_status: str
    crossover_direction: str | None

    def headline(self) -> str:
        return f"Fastest at batch {self.batch:g}: {self.fastest}"

    def comparison(self) -> str:
        """One sentence: FOCUS against the baseline at this batch."""
        word = "faster" if self.focus_faster else "slower"
        return (f"{FOCUS} is {word} than {BASELINE} by {abs(self.focus_saving_us):.2f} µs per draft step "
                f"({abs(self.focus_saving_pct):.1f}%) and {abs(self.focus_saving_decode_us):.2f} µs per decode step.")

    def crossover_text(self) -> str:
        if self.crossover_batch is None:
            where = "wins at every batch" if self.crossover_status == "wins_everywhere" else "loses at every batch"
            return f"no crossover in batch 1-65536: {FOCUS} {where}"
        side = "above" if self.crossover_direction == "wins_above" else "below"
        return f"{FOCUS} wins {side} batch {self.crossover_batch:.1f}"


def verdict_from(point: pd.DataFrame, crossovers: pd.DataFrame) -> Verdict:
    """Verdict from a `data.point_frame` and a `data.crossover_frame`."""
    by = point.set_index("strategy")
    fastest = str(point.loc[point["fastest"], "strategy"].iloc[0])
    focus, best = by.loc[FOCUS], by.loc[fastest]
    cross = crossovers.set_index("strategy").loc[FOCUS]
    batch = cross["crossover_batch"]
    return Verdict(
        batch=float(focus["batch"]), fastest=fastest,
        focus_faster=bool(focus["saving_us"] > 0), focus_valid=bool(focus["valid"]),
        focus_saving_us=float(focus["saving_us"]), focus_saving_pct=float(focus["saving_pct"]),
        focus_saving_decode_us=float(focus["saving_per_decode_step_us"]),
        best_saving_us=float(best["saving_us"]), best_saving_pct=float(best["saving_pct"]),
        best_saving_decode_us=float(best["saving_per_decode_step_us"]),
        crossover_batch=None if batch is None or (isinstance(batch, float) and math.isnan(batch)) else float(batch),
        crossover_status=str(cross["status"]),
        crossover_direction=None if not isinstance(cross["direction"], str) else cross["direction"],
    )


def provenance_line(profile: Profile) -> tuple[str, str]:
    """(badge colour, plain sentence) saying whether the numbers were measured or derived."""
    prov = profile.provenance
    if prov.kind == "measured":
        return "green", f"measured on {prov.gpu}"
    if prov.kind == "mixed":
        return "violet", f"partly measured on {prov.gpu}, partly derived from public figures"
    return "orange", "derived from public figures, not measured"


@dataclass(frozen=True)
class Evaluation:
    """Everything the header and the tabs share for one set of inputs."""

    inputs: Inputs
    profile: Profile
    profile_text: str
    point: pd.DataFrame
    crossovers: pd.DataFrame
    verdict: Verdict
    interval_us: tuple[float, float] | None


def evaluate(inputs: Inputs, uploaded: dict[str, str]) -> Evaluation:
    """Predict every strategy at the chosen batch and find the crossovers (cached underneath)."""
    text = profile_text(inputs.profile, uploaded)
    point = point_frame(text, inputs.spec, float(inputs.batch))
    crossovers = crossover_frame(text, inputs.spec)
    return Evaluation(inputs, profile_from_text(text), text, point, crossovers, verdict_from(point, crossovers),
                      saving_interval(text, inputs.spec, float(inputs.batch)))
