"""Every engine x every bundled profile x freshly fitted profiles: finite numbers and per-component sources through
predict, recommend and their JSON (issue 18 item 3; before, --engine vllm gave NaN without kernels.lm_head)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from calibration.fitting.fit import fit_measurements
from costmodel.cli.main import main
from costmodel.model.engines import ENGINES
from costmodel.profiles.store import DEFAULT_PROFILE, bundled_profiles, load_profile, save_profile
from tests.calibration.test_fit import ONE, collective_rows

WORKLOAD = str(Path(__file__).resolve().parents[2] / "data" / "examples" / "chat-diurnal.csv")
COMPONENTS = ("all_gather", "all_reduce", "gather", "broadcast", "kernels", "lm_head", "host")


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> dict[str, str]:
    """A small synthetic all_gather + all_reduce calibration (p = 2, 4) fitted onto an H100 base and onto no base."""
    out = tmp_path_factory.mktemp("fitted")
    frame = pd.concat([collective_rows(op, p, "eager", ONE, gpu=gpu, seed=p)
                       for op in ("all_gather", "all_reduce") for p in (2, 4)
                       for gpu in ["NVIDIA H100 80GB HBM3"]], ignore_index=True)
    paths = {}
    for label, base in (("onto-h100", "h100-sxm-nvlink"), ("no-base", None)):
        doc = fit_measurements(frame, name=label, bootstrap=20,
                               base_profile=None if base is None else load_profile(base))
        save_profile(doc, out / f"{label}.json")
        paths[label] = str(out / f"{label}.json")
    return paths


def _finite(value, where: str) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _finite(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _finite(v, f"{where}[{i}]")
    elif isinstance(value, float):
        assert math.isfinite(value), where


# one test per profile, every engine inside it: a profile's replicates and member stack are built once per test
# (costmodel.profiles.replicates, costmodel.model.members cache them per profile object), not once per engine
PROFILES = [*bundled_profiles(), "fitted:onto-h100", "fitted:no-base"]
# the text is rendered from the numbers the JSON carries (checked finite under every engine): it is read under
# no engine and under vLLM on every profile, and under every engine on the default profile
TEXT_ENGINES = ("none", "vllm")


def _text_too(profile: str, engine: str) -> bool:
    return engine in TEXT_ENGINES or profile == DEFAULT_PROFILE


def _path(profile: str, request) -> str:
    """A bundled profile's name, or the path of a `fitted` one (the fixture built only where one is asked for)."""
    if profile.startswith("fitted:"):
        return request.getfixturevalue("fitted")[profile.removeprefix("fitted:")]
    return profile


@pytest.mark.parametrize("profile", PROFILES)
def test_predict_is_finite_with_sources_on_every_engine(profile, request, capsys):
    profile = _path(profile, request)
    for engine in ENGINES:
        flags = ["--engine", engine]
        args = ["predict", "--profile", profile, "--tp", "4", "--batch", "16", "--no-intervals", *flags]
        assert main([*args, "--json"]) == 0, profile
        result = json.loads(capsys.readouterr().out)
        for name, s in result["strategies"].items():
            assert math.isfinite(s["total_us"]) and math.isfinite(s["saving_per_decode_step_us"]), (profile, name)
            assert s["total_us"] > 0, (profile, name)
            _finite(s["components"], f"{profile} {name}")
            assert s["recipe"].startswith(f"{engine} recipe: "), (profile, name)  # which recipe priced it
            # the serving term: one per collective call where an engine runs the step (p = 4: every strategy has one)
            assert (s["components"].get("serving", 0.0) > 0) == (engine != "none"), (profile, name)
        assert set(result["component_sources"]) == set(COMPONENTS), profile
        if not _text_too(profile, engine):
            continue
        assert main(args) == 0
        text = capsys.readouterr().out
        assert "nan" not in text.lower().replace("nanoseconds", ""), profile
        assert "sources: " in text


@pytest.mark.parametrize("engine", ENGINES[1:])
def test_host_and_serving_flags_reach_the_prices(engine, capsys):
    args = ["predict", "--tp", "8", "--batch", "1", "--no-intervals", "--engine", engine, "--json"]
    assert main(args) == 0
    base = json.loads(capsys.readouterr().out)
    assert main([*args, "--no-serving-term", "--host-op-us", "0", "--host-collective-us", "0"]) == 0
    off = json.loads(capsys.readouterr().out)
    assert off["engine"]["host_torch_op_us"] == 0.0 and off["engine"]["host_c10d_call_us"] == 0.0
    assert off["engine"]["serving_term_us_per_collective_call"] == 0.0
    for name, s in off["strategies"].items():
        assert "serving" not in s["components"] and s["components"].get("host_exposed", 0.0) < 1e-9, name
        assert s["total_us"] < base["strategies"][name]["total_us"], name


def test_bad_host_flag_is_one_error_line(capsys):
    assert main(["predict", "--engine", "vllm", "--host-op-us", "-3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) <= 2 and "--host-op-us" in err[-1]


def test_fitted_sources_are_measured_or_from_base(fitted, capsys):
    for label, base in (("onto-h100", "h100-sxm-nvlink"), ("no-base", load_profile(fitted["no-base"]).provenance.base)):
        assert main(["predict", "--profile", fitted[label], "--tp", "4", "--batch", "16", "--no-intervals",
                     "--engine", "vllm", "--json"]) == 0
        src = json.loads(capsys.readouterr().out)["component_sources"]
        assert src["all_gather"].startswith("measured (") and src["all_reduce"].startswith("measured (")
        assert src["gather"] == f"from base ({base})" and src["broadcast"] == f"from base ({base})"
        for part in ("kernels", "lm_head", "host"):
            assert src[part] == f"from base ({base})", (label, part)


@pytest.mark.parametrize("profile", PROFILES)
def test_recommend_is_finite_on_every_engine(profile, request, capsys):
    profile = _path(profile, request)
    for engine in ENGINES:
        flags = ["--engine", engine]
        args = ["recommend", "--profile", profile, "--tp", "4", "--workload", WORKLOAD, *flags]
        assert main([*args, "--json"]) == 0, profile
        _finite(json.loads(capsys.readouterr().out), f"recommend {profile} {engine}")
        if _text_too(profile, engine):
            assert main(args) == 0, profile
            assert "nan" not in capsys.readouterr().out.lower(), (profile, engine)
