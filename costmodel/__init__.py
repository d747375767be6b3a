"""Cost model: is local argmax reduction faster than a full-vocab all-gather for TP drafting?

numpy / scipy / pandas only - never torch. Public API::

    from costmodel import Scenario, load_profile, predict, crossover, impact
    pred = predict(Scenario(vocab=202048, tp=8, batch=64, num_spec_tokens=5))
    pred.saving_us("local_argmax_pairs")

The names are imported on first use (PEP 562 module `__getattr__`): `import costmodel` itself loads no numpy,
scipy or pandas, so `python -m costmodel --help` and `profiles` start fast.
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> the module that defines it
_API: dict[str, str] = {
    "InputError": "costmodel.io.errors",
    "collective_time_us": "costmodel.model.collectives",
    **dict.fromkeys(("BASELINE", "DESCRIPTIONS", "LOCAL_STRATEGIES", "STRATEGIES"), "costmodel.model.components"),
    "kernel_time_us": "costmodel.model.kernels",
    **dict.fromkeys(("Crossover", "crossover"), "costmodel.model.crossover"),
    **dict.fromkeys(("Impact", "Prediction", "impact", "predict"), "costmodel.model.predict"),
    **dict.fromkeys(("Scenario", "padded_vocab"), "costmodel.model.scenario"),
    "parse_profile": "costmodel.profiles.parse",
    **dict.fromkeys(("DEFAULT_PROFILE", "bundled_profiles", "default_profile", "load_profile"),
                    "costmodel.profiles.store"),
    "Profile": "costmodel.profiles.types",
}

__all__ = [
    "BASELINE", "DEFAULT_PROFILE", "DESCRIPTIONS", "LOCAL_STRATEGIES", "STRATEGIES",
    "Crossover", "Impact", "InputError", "Prediction", "Profile", "Scenario",
    "bundled_profiles", "collective_time_us", "crossover", "default_profile", "impact", "kernel_time_us",
    "load_profile", "padded_vocab", "parse_profile", "predict",
]


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'costmodel' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
