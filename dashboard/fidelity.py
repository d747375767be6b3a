"""How far to trust a prediction: validation against reference points, sensitivity, explanation.

Thin cached wrappers over costmodel.evidence.validate, costmodel.answers.sensitivity and costmodel.answers.explain;
cache keys are plain values (profile names, the profile's JSON text, a ScenarioSpec, numbers). Callable outside
Streamlit.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from costmodel.answers.explain import explanation
from costmodel.answers.sensitivity import WholeStep, elasticities
from costmodel.evidence.reference import REFERENCE_DIR, load_reference, reference_files
from costmodel.evidence.validate import summary, validate
from costmodel.model.drafter import DraftArch

from .data import FOCUS, profile_from_text
from .state import ScenarioSpec

_CACHE = {"show_spinner": False, "max_entries": 64}
SENSITIVITY_TOP = 12
VALIDATION_COLUMNS = ("profile", "id", "op", "mode", "world_size", "nodes", "bytes_per_rank", "measured_us",
                      "predicted_us", "rel_error_pct", "check", "source", "file", "dtype", "rows", "cols",
                      "predicted_extrapolated")


# -- validation against data/reference ------------------------------------------------------------------
def reference_stamp(directory: str = str(REFERENCE_DIR)) -> tuple[tuple[str, int], ...]:
    """(file name, mtime) of every reference CSV: part of the cache key, so an edited file is re-read."""
    return tuple((p.name, p.stat().st_mtime_ns) for p in reference_files(directory))


def reference_profiles(directory: str = str(REFERENCE_DIR)) -> dict[str, int]:
    """{profile name: number of reference rows naming it}."""
    ref = _reference(directory, reference_stamp(directory))
    counts = ref["profile"].fillna("").value_counts()
    return {str(k): int(v) for k, v in counts.items() if k}


@st.cache_data(**_CACHE)
def _reference(directory: str, stamp: tuple[tuple[str, int], ...]) -> pd.DataFrame:
    return load_reference(reference_files(directory))


@st.cache_data(**_CACHE)
def _validation(profile: str | None, directory: str, stamp: tuple[tuple[str, int], ...]
                ) -> tuple[pd.DataFrame, pd.DataFrame]:
    ref = _reference(directory, stamp)
    if profile is not None:
        ref = ref[ref["profile"] == profile]
    table = validate(ref.reset_index(drop=True), None)  # every row with the bundled profile it names
    return validation_table(table), summary_table(summary(table))


def validation(profile: str | None, directory: str = str(REFERENCE_DIR)) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rows, per-source summary) of costmodel.evidence.validate for the reference rows naming `profile` (None: all).

    rel_error = (predicted - measured) / measured; the summary has n, median and p90 |rel_error| per
    source file and check (in-sample: the profile was built from that figure; held-out: it was not).
    Raises costmodel.InputError when no reference row names `profile`.
    """
    return _validation(profile, directory, reference_stamp(directory))


def validation_table(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of costmodel.evidence.validate.validate as shown: measured, predicted, relative error (%), check."""
    out = table.rename(columns={"median_us": "measured_us"})
    out["rel_error_pct"] = 100.0 * out["rel_error"]
    out["check"] = out["used_in_profile"].map({True: "in-sample", False: "held-out"})
    return out[[c for c in VALIDATION_COLUMNS if c in out.columns]].reset_index(drop=True)


def summary_table(summ: pd.DataFrame) -> pd.DataFrame:
    """costmodel.evidence.validate.summary with the |relative error| quantiles also in %."""
    return summ.assign(median_abs_rel_error_pct=100.0 * summ["median_abs_rel_error"],
                       p90_abs_rel_error_pct=100.0 * summ["p90_abs_rel_error"])


# -- sensitivity and explanation of the current scenario ---------------------------------------------------
@st.cache_data(**_CACHE)
def sensitivity_frame(profile_text: str, spec: ScenarioSpec, batch: float, strategy: str = FOCUS,
                      arch: DraftArch | None = None) -> pd.DataFrame:
    """costmodel.answers.sensitivity.elasticities of `strategy`'s saving at `batch` (sorted by |elasticity|): of the
    whole draft step's saving per decode step with `arch` (the verdict's draft, where the whole step is the
    verdict), else of one draft call's.

    E = [S(theta (1 + h)) - S(theta (1 - h))] / (2 h S(theta)), h = 1%, for every numeric profile parameter.
    """
    return elasticities(spec.scenario(float(batch)), profile_from_text(profile_text), strategy,
                        whole_step=None if arch is None else WholeStep(arch))


@st.cache_data(**_CACHE)
def explanation_text(profile_text: str, spec: ScenarioSpec, batch: float) -> str:
    """costmodel.answers.explain.explanation: every priced call with its numbers substituted."""
    return explanation(spec.scenario(float(batch)), profile_from_text(profile_text))

