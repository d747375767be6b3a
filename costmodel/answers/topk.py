"""Top-k drafting x collective implementation: the strategy x collective matrix, its best pair, and the
local_argmax_pairs crossover batch as a function of k - the tables behind the dashboard's top-k panel, priced here
so the panel only renders them (issue 35).

    matrix           `costmodel.model.verification.matrix` at top-k k (with greedy verification when asked): per
                     (strategy, collective) the us per draft and per decode step, the saving versus
                     (full_all_gather, nccl), validity, whether the implementation ran natively
    (its best pair: `point.engine_best_pair`, what `predict --json`'s `best_pair` says for the same question)
    crossover_by_k   crossover(local_argmax_pairs vs full_all_gather) per k in `ks` and per collective; a k the
                     scenario refuses (k above the draft vocabulary) is left out
"""

from __future__ import annotations

import pandas as pd

from ..io.errors import InputError
from ..model.crossover import crossover
from ..model.scenario import Scenario
from ..model.verification import matrix
from ..profiles.types import Profile

K_CURVE = (1, 2, 4, 8, 16, 32, 64)
FOCUS = "local_argmax_pairs"


def topk_matrix(scenario: Scenario, profile: Profile, top_k: int, *, verify: bool = False,
                greedy_fraction: float = 1.0, crossovers: bool = True) -> pd.DataFrame:
    """The strategy x collective matrix of `scenario` at top-k `top_k` (module doc)."""
    return matrix(scenario.with_(top_k=int(top_k)), profile, verify=verify, greedy_fraction=greedy_fraction,
                  crossovers=crossovers)


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
