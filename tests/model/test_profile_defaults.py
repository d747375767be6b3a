"""A profile without kernels.lm_head / kernels.host is priced with the documented defaults, and says so."""

from __future__ import annotations

import numpy as np

from costmodel.model.engines import DEFAULT_HOST, HOST_SOURCE, host_costs
from costmodel.model.kernels import LM_HEAD_DEFAULT, kernel_context
from costmodel.model.predict import predict
from costmodel.model.scenario import Scenario
from costmodel.model.strategies import build_components, lm_head_us
from costmodel.profiles.parse import profile_from_dict
from costmodel.profiles.store import load_profile


def _without_head_and_host():
    """cpu-gloo without kernels.lm_head / kernels.host (the bundled refit copies them from its base, issue 18)."""
    raw = load_profile("cpu-gloo").raw
    kernels = {k: v for k, v in raw["kernels"].items() if k not in ("lm_head", "host", "from_base")}
    return profile_from_dict({**{k: v for k, v in raw.items() if k not in ("ensemble", "bootstrap",
                                                                           "bootstrap_method")},
                              "kernels": kernels}, source="cpu-gloo without lm_head and host")


def test_no_lm_head_means_no_head_start_not_nan():
    profile = _without_head_and_host()
    assert profile.lm_head is None
    sc = Scenario(tp=4, batch=16, engine="vllm", num_spec_tokens=3, hidden=5120)
    assert lm_head_us(profile, sc) == 0.0
    for name, comps in build_components(sc, profile).items():
        exposed = np.asarray(comps["host_exposed"].time_us)
        assert np.all(np.isfinite(exposed)), name
    result = predict(sc, profile)
    assert all(np.isfinite(np.asarray(r.total_us)).all() for r in result.strategies.values())
    assert kernel_context(profile, sc)["lm_head_source"] == LM_HEAD_DEFAULT


def test_with_no_head_start_vllm_step_is_host_plus_nothing_queued():
    """Hand check: with head start 0 the first component's host launch is fully exposed, so the exposed host
    time of the vLLM step is at least the first launch (8 us per torch op, 44.4 us per c10d call)."""
    profile = _without_head_and_host()
    sc = Scenario(tp=4, batch=16, engine="vllm", num_spec_tokens=3, hidden=5120)
    comps = build_components(sc, profile)["full_all_gather"]
    assert float(comps["all_gather"].host_us) == DEFAULT_HOST["c10d_call_us"]
    assert float(comps["host_exposed"].time_us) >= DEFAULT_HOST["c10d_call_us"] - 1e-9


def test_host_defaults_are_labelled():
    assert host_costs(_without_head_and_host()).source == HOST_SOURCE
    assert host_costs(load_profile("cpu-gloo")) == host_costs(load_profile("h200-sxm-nvlink"))  # kept from its base
    assert host_costs(load_profile("h200-sxm-nvlink")).source != HOST_SOURCE
