"""Cost model: is local argmax reduction faster than a full-vocab all-gather for TP drafting?

numpy / scipy / pandas only - never torch. Public API::

    from costmodel import Scenario, load_profile, predict, crossover, impact
    pred = predict(Scenario(vocab=202048, tp=8, batch=64, num_spec_tokens=5))
    pred.saving_us("local_argmax_pairs")
"""

from .io.errors import InputError
from .model.collectives import collective_time_us
from .model.components import BASELINE, DESCRIPTIONS, LOCAL_STRATEGIES, STRATEGIES
from .model.kernels import kernel_time_us
from .model.predict import Crossover, Impact, Prediction, crossover, impact, predict
from .model.scenario import Scenario, padded_vocab
from .profiles.parse import parse_profile
from .profiles.store import DEFAULT_PROFILE, bundled_profiles, default_profile, load_profile
from .profiles.types import Profile

__all__ = [
    "BASELINE", "DEFAULT_PROFILE", "DESCRIPTIONS", "LOCAL_STRATEGIES", "STRATEGIES",
    "Crossover", "Impact", "InputError", "Prediction", "Profile", "Scenario",
    "bundled_profiles", "collective_time_us", "crossover", "default_profile", "impact", "kernel_time_us",
    "load_profile", "padded_vocab", "parse_profile", "predict",
]
