"""The per-call answer as tables: the logits path alone, per draft call (`predict`), under the answer's names.

Where the per-call answer is the one asked for (engine none, TP 1, a draft the whole step cannot price) the
dashboard's verdict, Breakdown tab, batch sweep and heatmap rows show these tables; under an engine they stand beside
the whole draft step as its logits-path part. Every face reads them from here - the dashboard caches them, it prices
nothing (issue 35) - and they name each quantity as `predict --json` and `sweep` do:

    total_us                   T(B, s), us per draft call (the logits path alone)
    saving_per_draft_call_us   T(B, full_all_gather) - T(B, s)                       (positive = s is faster)
    saving_per_decode_step_us  saving_per_draft_call_us x calls per decode step (K with serial drafting)
    saving_pct                 100 x saving_per_draft_call_us / T(B, full_all_gather)
    fastest                    s == argmin_s T(B, s) (`Prediction.best`; the first in STRATEGIES order on a tie)

`crossover_frame` is `costmodel.model.crossover.crossovers` of the named strategies against the baseline over a
batch range, one row per strategy (batch-independent: the scenario's batch is not read).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..io.errors import InputError
from ..model.crossover import crossover, crossovers
from ..model.predict import Prediction, predict
from ..model.scenario import Scenario
from ..profiles.types import Profile
from .step_sweep_frame import PER_CALL_ANSWER

SAVING = "saving_per_draft_call_us"  # Prediction.to_frame's `saving_us`, under the answer's name


def point_frame(scenario: Scenario, profile: Profile) -> pd.DataFrame:
    """`frame_of` the scenario priced on the profile."""
    return frame_of(predict(scenario, profile))


def frame_of(pred: Prediction) -> pd.DataFrame:
    """`Prediction.to_frame()` of a one-batch prediction (an `Answer.prediction`) with `saving_us` named
    `saving_per_draft_call_us`, plus `fastest` and `saving_pct` (module doc); attrs["component_order"]: each
    strategy's components in the order the step runs them (the CLI's "= all_gather ..., argmax ..." order)."""
    frame = _tidy(pred)
    frame["fastest"] = frame["strategy"] == str(np.asarray(pred.best()).reshape(-1)[0])  # 0-d array or str
    frame.attrs["component_order"] = {name: list(r.components_us) for name, r in pred.strategies.items()}
    return frame


def sweep_frame(scenario: Scenario, profile: Profile, batches) -> pd.DataFrame:
    """Every strategy over `batches` (the scenario's batch replaced), tidy, strategy-major: `point_frame`'s columns
    but `fastest`."""
    return _tidy(predict(scenario.item(0).with_(batch=np.asarray(batches, dtype=float).reshape(-1)), profile))


def _tidy(pred: Prediction) -> pd.DataFrame:
    """`Prediction.to_frame()` (strategy-major) under the answer's names, with each row's `saving_pct`."""
    frame = pred.to_frame().rename(columns={"saving_us": SAVING})
    frame["saving_pct"] = np.concatenate([np.reshape(pred.saving_pct(name), -1) for name in pred.strategies])
    return frame


def sweep_table(frame: pd.DataFrame) -> pd.DataFrame:
    """batch x strategy of a `sweep_frame`: the time per draft call and the savings (the batch-sweep chart's and
    its CSV's columns where the per-call answer stands)."""
    return frame[["batch", "strategy", "total_us", SAVING, "saving_pct", "saving_per_decode_step_us",
                  "valid"]].reset_index(drop=True).assign(answer=PER_CALL_ANSWER)


def focus_rows(scenario: Scenario, profile: Profile, batches, focus: str) -> pd.DataFrame:
    """One row per batch of `focus` against the baseline (a heatmap row where the per-call answer stands):
    `batch`, the three savings of the module doc and `fastest_strategy`."""
    b = np.asarray(batches, dtype=float).reshape(-1)
    pred = predict(scenario.item(0).with_(batch=b), profile)
    return pd.DataFrame({"batch": b.astype(int), SAVING: pred.saving_us(focus),
                         "saving_per_decode_step_us": pred.saving_per_decode_step_us(focus),
                         "saving_pct": pred.saving_pct(focus), "fastest_strategy": pred.best(),
                         "answer": PER_CALL_ANSWER})


def crossover_frame(scenario: Scenario, profile: Profile, names: tuple[str, ...],
                    batch_range: tuple[float, float]) -> pd.DataFrame:
    """`crossovers` of `names` against the baseline in `batch_range` (the grid priced once for all of them): one row
    per strategy - status, crossover_batch, direction, all_roots (space-separated) and text (`Crossover.text`)."""
    found = crossovers(scenario.item(0), names, profile, batch_range=batch_range)
    return pd.DataFrame([{"strategy": name, "status": c.status, "crossover_batch": c.batch, "direction": c.direction,
                          "all_roots": " ".join(f"{r:.4g}" for r in c.roots), "text": c.text}
                         for name, c in found.items()])


def crossover_each(scenario: Scenario, profile: Profile, names: tuple[str, ...],
                   batch_range: tuple[float, float]) -> dict[str, tuple[float | None, str]]:
    """{strategy: (crossover_batch, status)} with each strategy priced alone, so one that cannot be priced here
    (InputError) gets status "error: <why>" instead of failing the others (`crossover_frame` prices them together)."""
    out: dict[str, tuple[float | None, str]] = {}
    for name in names:
        try:
            c = crossover(scenario.item(0), name, profile, batch_range=batch_range)
            out[name] = (c.batch, c.status)
        except InputError as exc:
            out[name] = (None, f"error: {exc}")
    return out
