"""Top-k drafting x collective implementation: the strategy x collective matrix, its best pair, and the
local_argmax_pairs crossover batch as a function of k - the tables behind the dashboard's top-k panel, priced here
so the panel only renders them (issue 35).

    matrix           `costmodel.model.verification.matrix` at top-k k (with greedy verification when asked): per
                     (strategy, collective) the us per draft and per decode step, the saving versus
                     (full_all_gather, nccl), validity, whether the implementation ran natively
    best_pair        `verification.best_pair` of (a subset of) that matrix, with "not runnable under <engine>"
                     beside it where the engine cannot run the pair (`point.add_engine_cannot`) - what
                     `predict --json`'s `best_pair` says for the same question
    crossover_by_k   crossover(local_argmax_pairs vs full_all_gather) per k in `ks` and per collective; a k the
                     scenario refuses (k above the draft vocabulary) is left out
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..io.errors import InputError
from ..model.crossover import crossover
from ..model.scenario import Scenario
from ..model.verification import best_pair as _best_pair
from ..model.verification import matrix
from ..profiles.types import Profile
from .point import add_engine_cannot

K_CURVE = (1, 2, 4, 8, 16, 32, 64)
FOCUS = "local_argmax_pairs"


def topk_matrix(scenario: Scenario, profile: Profile, top_k: int, *, verify: bool = False,
                greedy_fraction: float = 1.0, crossovers: bool = True) -> pd.DataFrame:
    """The strategy x collective matrix of `scenario` at top-k `top_k` (module doc)."""
    return matrix(scenario.with_(top_k=int(top_k)), profile, verify=verify, greedy_fraction=greedy_fraction,
                  crossovers=crossovers)


def best_pair(table: pd.DataFrame, engine: str, top_k: int) -> dict[str, Any]:
    """The fastest (strategy, collective) of `table` per decode step, with the engine's refusal beside it."""
    return add_engine_cannot(_best_pair(table), engine, int(top_k))


def crossover_by_k(scenario: Scenario, profile: Profile, collectives: tuple[str, ...],
                   ks: tuple[int, ...] = K_CURVE) -> pd.DataFrame:
    """One row per (k, collective): top_k, collective, crossover_batch (None: no crossover in range)."""
    rows = []
    for impl in collectives:
        for k in ks:
            try:
                sc = scenario.with_(top_k=k, collective=impl)
            except InputError:
                continue
            rows.append({"top_k": k, "collective": impl, "crossover_batch": crossover(sc, FOCUS, profile).batch})
    return pd.DataFrame(rows)
