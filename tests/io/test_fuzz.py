"""Fuzz suite (issue 13): random and adversarial input to every entry point ends in a result or one line.

Each property feeds hypothesis-generated input to the CLI parser, the profile loader, the measurement CSV
reader, the nccl-tests importer and the dashboard's parse_upload, and asserts: either a result with only
finite numbers, or an InputError / one `error:` line with exit 2 - never another exception, never a
traceback, never "internal error". Example counts are bounded so the file runs in well under a minute.
"""

from __future__ import annotations

import copy
import io
import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calibration.logs.import_nccl_tests import parse_nccl_tests_text
from costmodel import Scenario, predict
from costmodel.cli import main as cli
from costmodel.io.errors import InputError
from costmodel.io.measurements import parse_measurement_csv
from costmodel.io.safe_io import FORMULA_PREFIXES, escape_markdown, loads_json, safe_cell
from costmodel.profiles.compact import expand_document
from costmodel.profiles.parse import parse_profile, profile_from_dict
from costmodel.profiles.schema import profile_json_schema
from costmodel.profiles.schema_check import SchemaViolation, check_schema
from costmodel.profiles.store import PROFILE_DIR
from dashboard.uploads import parse_upload

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                       HealthCheck.function_scoped_fixture])
H200 = expand_document(json.loads((PROFILE_DIR / "h200-sxm-nvlink.json").read_text()))  # verbose bootstrap list
SMALL = {**{k: v for k, v in H200.items() if k != "bootstrap"}, "bootstrap": copy.deepcopy(H200["bootstrap"][:2])}

# adversarial scalars: the audit's cases and their generalisations
NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1, 2**63, 2**63 - 1, -(2**63) - 1, 10**400, 1e308, 1e-300, -0.0, 99999999999999999999]),
)
TEXT = st.one_of(st.text(max_size=20), st.sampled_from(["", "=1+2", "@SUM(1)", "\ud800", "a\x00b", "nan", "inf",
                                                        "[x](https://e.x)", "1,2", "1:4096@64", "-5", " 8 "]))
SCALARS = st.one_of(NUMBERS, TEXT, st.booleans(), st.none())
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=5), inner, max_size=3)),
                      max_leaves=6)


def _finite_numbers(obj) -> bool:
    if isinstance(obj, dict):
        return all(_finite_numbers(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return all(_finite_numbers(v) for v in obj)
    if isinstance(obj, float):
        return math.isfinite(obj)
    return True


def _assert_one_line(err: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err and "internal error" not in err, err


# -- CLI ---------------------------------------------------------------------------------------------------
INT_FLAGS = ("--vocab", "--draft-vocab", "--tp", "--nodes", "--batch", "--num-spec-tokens", "--hidden")
FLOAT_FLAGS = ("--max-batch", "--itl-ms", "--acceptance-length")
CHOICE_FLAGS = {"--dtype": ("bf16", "fp16", "fp32"), "--mode": ("graph", "eager"), "--drafting": ("serial", "parallel"),
                "--impl": ("torch", "fused"), "--d2t": ("on", "off")}
FLAG_VALUE = st.one_of(NUMBERS.map(str), TEXT, st.sampled_from(["1,2", "1:8", "8@2", "1:2:0", "graph,graph", "x,"]))


@st.composite
def predict_argv(draw) -> list[str]:
    argv = ["predict", "--no-intervals", "--json"]
    flags = draw(st.lists(st.sampled_from(INT_FLAGS + FLOAT_FLAGS + tuple(CHOICE_FLAGS)), max_size=4, unique=True))
    for flag in flags:
        if flag in CHOICE_FLAGS and draw(st.booleans()):
            value = ",".join(draw(st.lists(st.sampled_from(CHOICE_FLAGS[flag]), min_size=1, max_size=2)))
        else:
            value = draw(FLAG_VALUE)
        argv += [flag, value]
    return argv


@FAST
@given(predict_argv())
def test_predict_cli_gives_a_finite_result_or_one_line(capsys, argv):
    if any("\x00" in a or re.search(r"[\ud800-\udfff]", a) for a in argv):
        argv = [a.replace("\x00", "0") for a in argv]  # argv cannot carry NUL; surrogates stay (fuzz them)
    code = cli.main(argv)
    out, err = capsys.readouterr()
    if code == 0:
        result = json.loads(out)
        assert _finite_numbers(result) and all(math.isfinite(s["total_us"]) for s in result["strategies"].values())
    else:
        assert code == 2
        _assert_one_line(err)


@FAST
@given(st.sampled_from(INT_FLAGS[:-1]), FLAG_VALUE)
def test_sweep_cli_gives_finite_rows_or_one_line(capsys, flag, value):
    argv = ["sweep", "--batch", "1,64", "--tp", "2", flag, value]
    code = cli.main(argv)
    out, err = capsys.readouterr()
    if code == 0:
        frame = pd.read_csv(io.StringIO(out))
        valid = frame[frame["valid"]] if "valid" in frame else frame  # invalid rows: empty times + a reason
        # draft_forward_us: an input (the measured forward, --forward-us), empty where not given
        times = valid[[c for c in frame.columns if c.endswith("_us") and not c.startswith(("whole_", "draft_"))]
                      ].to_numpy(float)
        whole = valid[valid["answer"] == "whole draft step"] if "answer" in frame else valid.iloc[:0]
        steps = whole[[c for c in frame.columns if c.startswith("whole_")]].to_numpy(float)  # empty: per-call rows
        assert len(frame) and np.isfinite(times).all() and np.isfinite(steps).all()
    else:
        assert code == 2
        _assert_one_line(err)


@FAST
@given(st.sampled_from(["--max-error", "--profile", "--reference"]), FLAG_VALUE)
def test_validate_cli_gives_a_result_or_one_line(capsys, flag, value):
    if "\x00" in value:
        value = value.replace("\x00", "")
    code = cli.main(["validate", "--summary-only", "--no-coverage", flag, value])
    _, err = capsys.readouterr()
    assert code in (0, 1, 2)
    if code == 2:
        _assert_one_line(err)


# -- profile loader ------------------------------------------------------------------------------------------
def _leaf_paths(obj, prefix=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaf_paths(v, prefix + (k,))
    elif isinstance(obj, list) and obj:
        for i, v in enumerate(obj[:2]):
            yield from _leaf_paths(v, prefix + (i,))
    yield prefix


PATHS = [p for p in _leaf_paths(SMALL) if p]


def _set(doc, path, value):
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


@FAST
@given(st.lists(st.tuples(st.sampled_from(PATHS), VALUES), min_size=1, max_size=3))
def test_mutated_profiles_load_and_price_finite_or_raise_one_input_error(mutations):
    doc = copy.deepcopy(SMALL)
    for path, value in mutations:
        try:
            _set(doc, path, value)
        except (KeyError, IndexError, TypeError):  # an earlier mutation replaced a parent
            pass
    try:
        profile = profile_from_dict(doc, source="fuzz")
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    pred = predict(Scenario(vocab=128256, tp=8, batch=64, num_spec_tokens=3), profile)
    assert np.isfinite(pred.to_frame()["total_us"].to_numpy(float)).all()


@FAST
@given(st.lists(st.tuples(st.sampled_from(PATHS), VALUES), min_size=1, max_size=2))
def test_the_fast_schema_checker_agrees_with_jsonschema(mutations):
    jsonschema = pytest.importorskip("jsonschema")
    doc = copy.deepcopy(SMALL)
    for path, value in mutations:
        try:
            _set(doc, path, value)
        except (KeyError, IndexError, TypeError):
            pass
    if not _finite_numbers(doc):
        return  # NaN / inf never reach the schema (safe_io.check_tree refuses them first)
    schema = profile_json_schema()
    try:
        check_schema(doc, schema)
        fast_ok = True
    except SchemaViolation:
        fast_ok = False
    assert fast_ok == jsonschema.Draft202012Validator(schema).is_valid(doc)


@FAST
@given(st.one_of(st.text(max_size=200), st.binary(max_size=200),
                 st.sampled_from(["[" * 3000, '{"a":1,"a":1}', "1" * 5000, '{"schema_version": 1e999}'])))
def test_profile_text_parses_or_raises_one_input_error(text):
    for fn in (lambda: loads_json(text, "t"), lambda: parse_profile(text, source="t")):
        try:
            fn()
        except InputError as exc:
            assert "\n" not in str(exc)


# -- measurement CSV, nccl-tests logs, uploads -------------------------------------------------------------------
HEADERS = ["op,mode,world_size,bytes_per_rank,median_us", "op,mode,world_size,rows,cols,median_us,p90_us",
           "op,mode,world_size", "a,b", ""]
CELLS = st.one_of(NUMBERS.map(str), TEXT.map(lambda t: t.replace("\n", " ")),
                  st.sampled_from(["all_gather", "argmax", "graph", "eager", "", '"', "1e400", "-0"]))
ROWS = st.lists(st.lists(CELLS, min_size=0, max_size=7).map(",".join), max_size=5)


@FAST
@given(st.sampled_from(HEADERS), ROWS)
def test_measurement_csv_is_valid_or_one_input_error(header, rows):
    text = "\n".join([header, *rows]) + "\n"
    try:
        frame = parse_measurement_csv(text, "fuzz.csv")
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    assert np.isfinite(frame["median_us"].to_numpy(float)).all() and (frame["world_size"] >= 1).all()


LOG_LINES = st.one_of(
    st.sampled_from([
        "# Collective test starting: all_gather_perf", "# Collective test starting: alltoall_perf",
        "# nThread 1 nGpus 8 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
        "validation: 1 graph: 1",
        "#  Rank  0 Group  0 Pid 1 on h0 device  0 [0x1b] NVIDIA H100",
        "#  Rank  1 Group  0 Pid 2 on h0 device  1 [0x2b] NVIDIA H100",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw "
        "  busbw #wrong",
        "         128            16     float    none      -1    10.00    0.01    0.00      0    10.00    0.01"
        "    0.00      0",
    ]),
    st.lists(CELLS, max_size=13).map(" ".join),
)


@FAST
@given(st.lists(LOG_LINES, max_size=10))
def test_nccl_tests_text_is_rows_or_one_input_error(lines):
    try:
        frame = parse_nccl_tests_text("\n".join(lines), "fuzz.log")
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    assert len(frame) and np.isfinite(frame["median_us"].to_numpy(float)).all()


NAMES = st.one_of(st.text(max_size=30), st.sampled_from(["=SUM(1+2).csv", "p.json", "a.log", "x\ud800.csv",
                                                         "[x](https://e.x).json", "\x00.csv", "", "a" * 300]))
PAYLOADS = st.one_of(st.binary(max_size=300), st.sampled_from([
    json.dumps(SMALL).encode(), b"op,mode,world_size,bytes_per_rank,median_us\nall_gather,eager,2,64,5\n",
    b"\xff\xfe", b"[" * 5000, b"{}", b"   "]))


@FAST
@given(NAMES, PAYLOADS)
def test_parse_upload_is_a_profile_or_one_input_error(name, payload):
    try:
        up = parse_upload(name, payload)
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    assert up.profile.name and up.label


# -- output safety properties ------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_safe_cell_never_leaves_a_formula(text):
    out = safe_cell(text)
    assert out in (text, "'" + text)
    if out == text and text.startswith(FORMULA_PREFIXES):
        float(text)  # only plain numbers keep their sign


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("[]()!*_`$<>~|:/.wh -+#=1 abc\\\n")), max_size=40))
def test_escape_markdown_leaves_no_active_markup(text):
    out = escape_markdown(text)
    assert "\n" not in out
    for i, ch in enumerate(out):
        if ch in "[]!*_`$<~|":
            run = len(out[:i]) - len(out[:i].rstrip("\\"))
            assert run % 2 == 1, (text, out, i)  # preceded by an odd number of backslashes: escaped


# -- calibration CLIs --------------------------------------------------------------------------------------
COLLECTIVE_FLAGS = ("--min-bytes", "--max-bytes", "--points-per-octave", "--graph-ops", "--warmup", "--rel-tol",
                    "--max-iters", "--point-time-s", "--watchdog-s", "--batches", "--world-sizes", "--modes")


@FAST
@given(st.lists(st.tuples(st.sampled_from(COLLECTIVE_FLAGS), FLAG_VALUE), max_size=3))
def test_collectives_flags_give_a_config_or_one_input_error(tmp_path_factory, flags):
    from calibration.bench import collectives

    argv = ["--backend", "gloo", "--out", str(tmp_path_factory.mktemp("c") / "out")]
    for flag, value in flags:
        argv += [flag, value.replace("\x00", "")]
    try:
        cfg = collectives.parse_config(argv)
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    assert math.isfinite(cfg.point_time_s) and cfg.watchdog_s > cfg.point_time_s * len(cfg.modes)


FIT_FLAGS = ("--bootstrap", "--max-regimes", "--seed", "--name", "--title", "--base-profile")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(FIT_FLAGS), FLAG_VALUE), max_size=2))
def test_fit_cli_writes_a_profile_or_one_line(capsys, tmp_path_factory, flags):
    from calibration.fitting import fit

    folder = tmp_path_factory.mktemp("fit")
    csv = folder / "m.csv"
    csv.write_text("op,mode,world_size,bytes_per_rank,median_us\n" +
                   "".join(f"all_gather,eager,2,{b},{10 + b / 1e3}\n" for b in (64, 256, 1024, 4096)))
    argv = [str(csv), "--out", str(folder / "p.json"), "--bootstrap", "0"]
    for flag, value in flags:
        argv += [flag, value.replace("\x00", "")]
    code = fit.main(argv)
    out, err = capsys.readouterr()
    if code == 0:
        profile_from_dict(json.loads((folder / "p.json").read_text()), source="fitted")
    else:
        assert code == 2
        _assert_one_line(err)
