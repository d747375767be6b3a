"""The verdict: which strategy wins at the chosen batch, by how much, and where the answer flips.

`evaluate(inputs, uploaded)` is the one computation every rerun needs (prediction at the chosen batch +
crossovers); it raises costmodel.InputError for an impossible scenario so the app can fall back to the
last good inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import pandas as pd

from costmodel import BASELINE, InputError, Profile
from costmodel.answers import per_call
from costmodel.answers.whole_step import verdict_rows
from costmodel.evidence.intervals import StrategyUncertainty
from costmodel.io.formatting import format_batch, format_interval_us, format_pct, format_us
from costmodel.model.crossover import crossover_words

from .data import FOCUS, crossover_frame, fabric_text, profile_from_text, profile_text, saving_interval
from .question import answer_of
from .state import Inputs
from .tables import step_verdict_table, verdict_table

NO_CROSSOVER = "none"  # the crossover tile's value where no batch in range flips the answer (its delta says why)
FITTED_BOOTSTRAP = "statistical bootstrap: the measurements were resampled and refitted (calibration.fit)"


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
    interval: StrategyUncertainty | None = None  # FOCUS saving / crossover intervals (profile bootstrap)
    crossover_words: str = ""  # costmodel.model.crossover.crossover_words: the CLI's and JSON's words
    quantity: str = "per draft call"  # "whole draft step" where an engine runs it (costmodel.answers.whole_step)
    # the whole draft step's point and crossover rows of every strategy (whole_step.verdict_rows), where it is the
    # verdict; None for the per-call verdict (its rows are Evaluation.point / .crossovers)
    step_rows: pd.DataFrame | None = field(default=None, compare=False)
    step_crossovers: pd.DataFrame | None = field(default=None, compare=False)

    @property
    def uncertain(self) -> bool:
        """True when the interval of the FOCUS saving at this batch contains 0."""
        return self.interval is not None and self.interval.verdict == "uncertain"

    def headline(self) -> str:
        text = f"Fastest at batch {self.batch:g}: {self.fastest}"
        if self.quantity == "whole draft step":
            text += " (the whole draft step, as the engine composes its K calls)"
        if self.uncertain:
            level = self.interval.saving_us.level
            text += f" - uncertain: the {level:.0%} interval of the {FOCUS} saving spans 0"
        return text

    def comparison(self) -> str:
        """One sentence: FOCUS against the baseline at this batch (savings: baseline time - strategy time)."""
        word = "faster" if self.focus_faster else "slower"
        text = (f"{FOCUS} is {word} than {BASELINE} by {format_us(abs(self.focus_saving_us))} per draft call "
                f"({format_pct(abs(self.focus_saving_pct), sign=False)}) and "
                f"{format_us(abs(self.focus_saving_decode_us))} per decode step.")
        if self.uncertain:
            text += " That is the point estimate; within the profile's uncertainty either side may win."
        return text

    def interval_texts(self) -> tuple[str, str, str] | None:
        """Interval captions of the saving per draft call, per decode step and the crossover batch tiles."""
        u = self.interval
        if u is None:
            return None
        pct = f"{u.saving_us.level:.0%}"
        draft = f"{pct} interval: {format_interval_us(u.saving_us.low, u.saving_us.high)}"
        per_decode = u.saving_per_decode_step_us
        decode = f"{pct} interval: {format_interval_us(per_decode.low, per_decode.high)}"
        if u.crossover_batch is None:
            cross = "no replicate crosses in batch 1-65,536"
        elif self.crossover_batch is None:  # the point has none: the crossing members' range is no interval of it
            cross = (f"no crossover at the point estimate ({u.crossover_found_fraction:.0%} of replicates cross in "
                     "batch 1-65,536)")
        else:
            cross = f"{pct} interval: {format_batch(u.crossover_batch.low)} to {format_batch(u.crossover_batch.high)}"
            if u.crossover_found_fraction < 1:
                cross += f" ({u.crossover_found_fraction:.0%} of replicates cross)"
        return draft, decode, cross

    def crossover_value(self) -> str:
        """The crossover tile's value: the batch, or NO_CROSSOVER where there is none in range - the tile's delta
        (`crossover_text`) then says why in the CLI's words ("wins at every batch in range", "never wins in range",
        "identical at TP 1 (nothing to gather)"): those words in the tile's large value font ran past the tile."""
        if self.crossover_batch is None:
            return NO_CROSSOVER
        return format_batch(self.crossover_batch)

    def crossover_text(self) -> str:
        """Short enough for a tile: where FOCUS wins (several sign changes: every one, as the CLI lists them)."""
        if self.crossover_batch is None:
            return self.crossover_words or crossover_words(self.crossover_status)
        if self.crossover_words.startswith("sign changes"):
            return self.crossover_words
        side = "above" if self.crossover_direction == "wins_above" else "below"
        return f"wins {side} batch {format_batch(self.crossover_batch)}"


def verdict_from(point: pd.DataFrame, crossovers: pd.DataFrame, interval: StrategyUncertainty | None = None
                 ) -> Verdict:
    """Verdict from a `per_call.frame_of` (the Answer's prediction), a `data.crossover_frame` and (optionally)
    `data.saving_interval`."""
    by = point.set_index("strategy")
    fastest = str(point.loc[point["fastest"], "strategy"].iloc[0])
    focus, best = by.loc[FOCUS], by.loc[fastest]
    cross = crossovers.set_index("strategy").loc[FOCUS]
    batch = cross["crossover_batch"]
    return Verdict(
        batch=float(focus["batch"]), fastest=fastest,
        focus_faster=bool(focus["saving_per_draft_call_us"] > 0), focus_valid=bool(focus["valid"]),
        focus_saving_us=float(focus["saving_per_draft_call_us"]), focus_saving_pct=float(focus["saving_pct"]),
        focus_saving_decode_us=float(focus["saving_per_decode_step_us"]),
        best_saving_us=float(best["saving_per_draft_call_us"]), best_saving_pct=float(best["saving_pct"]),
        best_saving_decode_us=float(best["saving_per_decode_step_us"]),
        crossover_batch=None if batch is None or (isinstance(batch, float) and math.isnan(batch)) else float(batch),
        crossover_status=str(cross["status"]),
        crossover_direction=None if not isinstance(cross["direction"], str) else cross["direction"],
        interval=interval, crossover_words=str(cross.get("text", "")),
    )


def bootstrap_method(profile: Profile) -> str:
    """What the profile's replicates are: the top-level `bootstrap_method` text (the bundled derived profiles
    say "derived ensemble, not a statistical bootstrap ..."), else the fitted profiles' statistical bootstrap."""
    method = profile.raw.get("bootstrap_method")
    return str(method) if method else FITTED_BOOTSTRAP


def fused_provenance(profile: Profile) -> str:
    """Plain sentence: are the profile's fused-kernel parameters measured or derived?"""
    spec = profile.kernel_ops.get("local_argmax_fused")
    if spec is None:
        return "this profile has no fused-kernel parameters (local_argmax_fused)"
    tables = sorted({t.op for t in profile.kernel_tables if t.op.endswith("_fused")})
    text = f"fused-kernel parameters (local_argmax_fused) are {spec.provenance}"
    if spec.provenance != "measured":
        text += " - not measured on a GPU, so the fused crossover is an estimate"
    if tables:
        text += f"; measured tables: {', '.join(tables)}"
    return text


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
    interval_note: str | None = None  # why no interval is shown (no replicates, or unusable ones)

    @property
    def whole_step(self) -> bool:
        """True where the verdict is the whole draft step (an engine runs it), not one draft call."""
        return self.verdict.step_rows is not None

    def verdict_table(self) -> pd.DataFrame:
        """Every strategy at the chosen batch in the verdict's quantity: the whole draft step per decode step
        (`tables.step_verdict_table`) where an engine runs it, else per draft call (`tables.verdict_table`)."""
        if self.whole_step:
            return step_verdict_table(self.point, self.verdict.step_rows, self.verdict.step_crossovers)
        return verdict_table(self.point, self.crossovers)

    def crossover_table(self) -> pd.DataFrame:
        """Every strategy's crossover batch vs the baseline in the verdict's quantity (whole draft step or per call)."""
        if not self.whole_step:
            return self.crossovers
        rows = self.verdict.step_crossovers
        return rows[rows["strategy"] != BASELINE].reset_index(drop=True)


def evaluate(inputs: Inputs, uploaded: dict[str, str]) -> Evaluation:
    """Predict every strategy at the chosen batch and find the crossovers (cached underneath). Where the whole draft
    step is the verdict (`whole_step_verdict`, with its own interval), the per-call interval is not priced: the
    page shows only the verdict's interval (`interval_note` is shown only where the verdict has none). The question
    is validated first, where the CLI's is (`question.question_of`: InputError, one line, for an impossible one)."""
    text = fabric_text(profile_text(inputs.profile, uploaded), inputs.fabric)
    point = per_call.frame_of(answer_of(text, inputs).prediction)  # the Answer's own prediction (predict's)
    crossovers = crossover_frame(text, inputs.spec)
    profile = profile_from_text(text)
    whole = whole_step_verdict(text, inputs)
    if whole is not None and whole.interval is not None:  # the per-call interval would be neither shown nor used
        return Evaluation(inputs, profile, text, point, crossovers, whole)
    interval, note = None, None
    try:
        interval = saving_interval(text, inputs.spec, float(inputs.batch))
    except InputError as exc:  # an uploaded profile's replicates may not price this scenario
        note = f"no interval: {exc}"
    if interval is None and note is None:
        note = "no interval: this profile carries no bootstrap replicates"
    verdict = whole or verdict_from(point, crossovers, interval)
    return Evaluation(inputs, profile, text, point, crossovers, verdict, note)


def whole_step_verdict(text: str, inputs: Inputs) -> Verdict | None:
    """Where an engine runs the step (costmodel.answers.whole_step.applies), the verdict of the WHOLE draft step
    (the decode step's K draft calls as the engine composes them, with its interval): the question's Answer
    (`question.answer_of`, the object `predict` renders; kept per question, so a tab, range or ITL edit under an
    engine reuses it) shown as tiles - priced by the answers layer, shown here; None where the per-call verdict
    stands (engine none, TP 1, no drafter forward to price, a draft that cannot shard at this TP)."""
    ws, _ = answer_of(text, inputs).whole_step
    return None if ws is None else verdict_of_whole_step(ws)


def verdict_of_whole_step(ws: dict) -> Verdict:
    """`verdict_from` of a `whole_step_answer` (`whole_step.verdict_rows`) with its FOCUS interval."""
    point, cross = verdict_rows(ws)
    iv = ws["strategies"][FOCUS].get("interval")
    interval = None if iv is None else StrategyUncertainty.from_dict(FOCUS, iv)
    point_rows, cross_rows = pd.DataFrame(point), pd.DataFrame(cross)
    return replace(verdict_from(point_rows, cross_rows, interval), quantity="whole draft step", step_rows=point_rows,
                   step_crossovers=cross_rows)
