"""Issue 13 regressions: bounded reads and fits, formula-safe CSV, plain-text Markdown, a complete profile
validator and one-line errors from every entry point. Each test names the audit case it pins."""

from __future__ import annotations

import copy
import io
import json
import os
import signal
import sys
import threading
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from calibration.fitting.fit import MAX_GROUP_SIZES, MAX_REPEATS_PER_POINT, bin_repeats, fit_measurements
from calibration.logs import import_nccl_tests
from calibration.logs.provenance import Interrupted, count_rows, interrupted_exit, interruptible
from costmodel.cli import cmd_presets, options
from costmodel.cli import main as cli
from costmodel.io.errors import InputError
from costmodel.io.measurements import MAX_TIME_US, parse_measurement_csv, read_measurements
from costmodel.io.safe_io import (
    MAX_JSON_DEPTH,
    csv_text,
    escape_markdown,
    loads_json,
    read_bytes,
    safe_cell,
    safe_frame,
    write_csv,
)
from costmodel.profiles.compact import expand_document
from costmodel.profiles.parse import parse_profile, profile_from_dict
from costmodel.profiles.schema import profile_schema_text
from costmodel.profiles.store import PROFILE_DIR, load_profile
from dashboard import tables, uploads

ROOT = Path(__file__).resolve().parents[2]
H200 = PROFILE_DIR / "h200-sxm-nvlink.json"
EVIL_NAME = "=cmd|' /C calc'!A0"


@pytest.fixture(scope="module")
def h200() -> dict:
    return expand_document(json.loads(H200.read_text()))  # the verbose bootstrap list: its replicates mutated below


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    """The single `error: ...` line (and nothing else: no traceback)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err and "internal error" not in err, err
    return lines[0]


def measurement_csv(rows: list[dict]) -> str:
    return pd.DataFrame(rows).to_csv(index=False)


def collective_rows(sizes, repeats: int = 1, op: str = "all_gather", time=lambda b: 10 + b / 1e3) -> list[dict]:
    return [{"op": op, "mode": "eager", "world_size": 2, "bytes_per_rank": int(b),
             "median_us": time(b) * (1 + 0.01 * (i % 5))} for b in sizes for i in range(repeats)]


# -- bounded resources -------------------------------------------------------------------------------------------
def test_devices_fifos_directories_and_oversize_files_are_refused_before_reading(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 101)
    cases = {"/dev/zero": "not a regular file", str(fifo): "not a regular file", str(tmp_path): "is a directory",
             str(big): "larger than the", str(tmp_path / "missing"): "no such file"}
    for path, message in cases.items():
        done: list[str] = []
        worker = threading.Thread(target=lambda p=path, d=done: d.append(_error(read_bytes, p, limit_bytes=100)))
        worker.start()
        worker.join(5)  # a FIFO must not block: nothing is opened before the stat
        assert done and message in done[0], (path, done)
    assert read_bytes(big, limit_bytes=101) == b" " * 101


def _error(fn, *args, **kwargs) -> str:
    try:
        fn(*args, **kwargs)
    except InputError as exc:
        return str(exc)
    return "no error"


def test_profile_and_log_from_dev_zero_or_a_fifo_are_one_line(tmp_path, capsys):
    fifo = tmp_path / "p.json"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo)):
        code, _, err = run_cli(capsys, "predict", "--profile", path, "--no-intervals")
        assert code == 2 and "not a regular file" in one_error_line(err)
        assert import_nccl_tests.main([path, "--out", str(tmp_path / "x.csv")]) == 2
        assert "not a regular file" in one_error_line(capsys.readouterr().err)


def test_bin_repeats_keeps_evenly_spaced_order_statistics_of_each_point():
    times = np.arange(1.0, 1001.0)  # one point measured 1000 times, shuffled
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"op": "all_gather", "mode": "eager", "world_size": 2, "bytes_per_rank": 64,
                          "median_us": rng.permutation(times)})
    other = pd.DataFrame({"op": "all_gather", "mode": "eager", "world_size": 2, "bytes_per_rank": 128,
                          "median_us": [5.0, 6.0]})
    binned = bin_repeats(pd.concat([frame, other], ignore_index=True))
    kept = np.sort(binned.loc[binned.bytes_per_rank == 64, "median_us"].to_numpy())
    r = MAX_REPEATS_PER_POINT
    # ranks floor((j + 1/2) * 1000 / R): hand-computed order statistics of 1..1000
    assert kept.tolist() == [float(((2 * j + 1) * 1000) // (2 * r) + 1) for j in range(r)]
    assert abs(np.median(kept) - np.median(times)) <= 1000 / r
    assert sorted(binned.loc[binned.bytes_per_rank == 128, "median_us"]) == [5.0, 6.0]  # few repeats: untouched


def test_a_large_repeated_upload_is_fitted_on_binned_points():
    sizes = [2 ** k for k in range(4, 14)]
    text = measurement_csv(collective_rows(sizes, repeats=2000))  # 20k rows of 10 points
    up = uploads.parse_upload("big.csv", text.encode())
    measured = pd.read_csv(io.StringIO(up.measurements_csv))
    assert len(measured) == len(sizes) * MAX_REPEATS_PER_POINT
    assert any(c.op == "all_gather" and c.world_size == 2 for c in up.profile.collectives)


def test_too_many_distinct_sizes_are_refused_with_the_limit():
    text = measurement_csv(collective_rows(range(100, 100 + MAX_GROUP_SIZES + 1)))
    with pytest.raises(InputError, match=f"more than the limit of {MAX_GROUP_SIZES}"):
        uploads.parse_upload("many.csv", text.encode())


def test_upload_row_limit_names_the_limit(monkeypatch):
    monkeypatch.setattr(uploads, "MAX_UPLOAD_ROWS", 10)
    text = measurement_csv(collective_rows([64, 128, 256, 512], repeats=3))
    with pytest.raises(InputError, match="more than the limit of 10 rows"):
        uploads.parse_upload("rows.csv", text.encode())


def test_sweep_scenario_and_range_limits(capsys):
    code, _, err = run_cli(capsys, "sweep", "--batch", "1:1000000000")
    assert code == 2 and "outside 1..16777216" in one_error_line(err)
    code, _, err = run_cli(capsys, "sweep", "--batch", "1:16777216")
    assert code == 2 and f"more than {options.MAX_LIST_VALUES} values" in one_error_line(err)
    code, _, err = run_cli(capsys, "sweep", "--batch", "1:65536", "--vocab", "1000:1040", "--tp", "1,2,4,8,16",
                           "--num-spec-tokens", "1:8")  # 65536 * 41 * 5 * 8 = 107M scenarios
    assert code == 2 and f"more than the limit of {options.MAX_SWEEP_SCENARIOS}" in one_error_line(err)


def test_kernel_correctness_check_respects_the_memory_cap():
    torch = pytest.importorskip("torch")
    from calibration.bench import kernels

    with pytest.raises(MemoryError, match="memory cap"):
        kernels.check_op("argmax", "bf16", 1, 2_000_000_000, torch.device("cpu"))


# -- safe outputs ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cell", [EVIL_NAME, "=1+2", "@SUM(A1:A2)", "+evil", "-2+3", "\tx", "\rx"])
def test_formula_cells_are_neutralised(cell):
    assert safe_cell(cell) == "'" + cell
    frame = pd.DataFrame({"name": [cell], "value": [-1.5]})
    text = csv_text(frame)
    back = pd.read_csv(io.StringIO(text), keep_default_na=False)
    assert back["name"].tolist() == ["'" + cell] and back["value"].tolist() == [-1.5]  # numbers stay numbers
    assert tables.csv_bytes(frame).decode() == text


@pytest.mark.parametrize("cell", ["-3.5", "+2", "-1e5", "plain", "a=b", ""])
def test_plain_numbers_and_text_stay(cell):
    assert safe_cell(cell) == cell


def test_cli_exports_neutralise_a_hostile_profile_name(tmp_path, capsys, h200):
    data = {k: v for k, v in h200.items() if k != "bootstrap"}
    data["name"] = EVIL_NAME
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(data))
    code, out, _ = run_cli(capsys, "sweep", "--profile", str(path), "--batch", "1", "--tp", "2")
    assert code == 0
    frame = pd.read_csv(io.StringIO(out))
    assert set(frame["profile"]) == {"'" + EVIL_NAME}
    points = tmp_path / "points.csv"
    points.write_text("op,mode,world_size,bytes_per_rank,gpu\nall_gather,graph,8,1024,=SUM(1+2)\n")
    code, out, _ = run_cli(capsys, "predict-points", "--profile", str(path), "--in", str(points), "--out", "-")
    assert code == 0 and pd.read_csv(io.StringIO(out))["gpu"].tolist() == ["'=SUM(1+2)"]


def test_write_csv_names_an_unwritable_path(tmp_path):
    frame = pd.DataFrame({"a": [1]})
    with pytest.raises(InputError, match=str(tmp_path)):
        write_csv(frame, tmp_path)  # a directory
    with pytest.raises(InputError, match="nope/x.csv: directory .*nope does not exist"):
        write_csv(frame, tmp_path / "nope" / "x.csv")
    assert safe_frame(frame).equals(frame)


def test_markdown_is_escaped_so_no_link_or_image_forms():
    text = "[click](https://evil.example) ![x](https://evil.example/a.png) :red[big] $x$ <https://e.x> **b**"
    shown = escape_markdown(text)
    for construct in ("[click](", "![x](", ":red[", "$x$", "**b**", "https://"):
        assert construct not in shown, construct
    wj = "\u2060"  # word joiner: after ':' and '@', so no GFM autolink literal forms from the shown text
    assert shown == (rf"\[click\]\(https\:{wj}\/\/evil\.example\) \!\[x\]\(https\:{wj}\/\/evil\.example\/a\.png\) "
                     rf"\:{wj}red\[big\] \$x\$ \<https\:{wj}\/\/e\.x\> \*\*b\*\*")
    assert escape_markdown("- item") == "\\- item" and escape_markdown("1. x") == "1\\. x"
    assert escape_markdown("derived from public figures, not measured: NCCL 2.27") == \
        f"derived from public figures\\, not measured\\:{wj} NCCL 2\\.27"


def test_streamlit_hides_error_details():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["client"]["showErrorDetails"] == "none"
    flags = dict(zip(cli.STREAMLIT_FLAGS[::2], cli.STREAMLIT_FLAGS[1::2], strict=True))
    assert flags["--client.showErrorDetails"] == "none"


def test_the_launcher_passes_the_repository_config():
    """`argmax-tp dashboard` from any directory runs Streamlit as the repository's .streamlit/config.toml does
    (every option but headless: the launcher may open a browser) - e.g. no file watcher (issue 43 item 4)."""
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    wanted = {f"--{section}.{key}": str(value).lower() if isinstance(value, bool) else str(value)
              for section, options in config.items() for key, value in options.items() if key != "headless"}
    flags = dict(zip(cli.STREAMLIT_FLAGS[::2], cli.STREAMLIT_FLAGS[1::2], strict=True))
    assert flags == wanted
    assert flags["--server.fileWatcherType"] == "none"


def test_dashboard_shows_a_hostile_query_parameter_as_text():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["tab"] = "[click](https://evil.example)"
    at.query_params["![i](https://evil.example/x.png)"] = "1"
    at.run()
    assert not at.exception
    shown = " ".join(w.value for w in at.warning)
    assert "evil" in shown and "](https://" not in shown and "![" not in shown


# -- one schema validator ------------------------------------------------------------------------------------------
def _mutated(h200: dict, mutate) -> dict:
    data = copy.deepcopy(h200)
    mutate(data)
    return data


PROFILE_CASES = {
    "schema_version true": (lambda d: d.update(schema_version=True), "schema_version must be 1"),
    "gpus_per_node -5": (lambda d: d["provenance"].update(gpus_per_node=-5), "provenance.gpus_per_node"),
    "table world_size -3": (lambda d: d["kernels"]["tables"][0].update(world_size=-3), "tables[0].world_size"),
    "replicate kernels list": (lambda d: d["bootstrap"][0].update(kernels=[1, 2]), "bootstrap[0].kernels"),
    "alpha 1e308": (lambda d: d["collectives"][0]["regimes"][0].update(alpha_base_us=1e308), "alpha_base_us"),
    "busbw 1e-300": (lambda d: d["collectives"][0]["regimes"][0].update(busbw_gbps=1e-300), "busbw_gbps"),
    "NUL in files": (lambda d: d["provenance"].update(files=["a\x00b"]), "NUL"),
    "lone surrogate": (lambda d: d.update(name="\ud800"), "UTF-8"),
    "400-digit integer": (lambda d: d["collectives"][0].update(world_size=10 ** 400), "int64"),
    "TP 99999999999999999999": (lambda d: d["collectives"][0].update(world_size=99999999999999999999),
                                "int64"),
    "replicate busbw 0": (lambda d: d["bootstrap"][3]["collectives"][0]["regimes"][0].update(busbw_gbps=0),
                          "bootstrap[3]"),
    "citation not text": (lambda d: d["provenance"].update(citations=[{"a": 1}]), "citations[0]"),
}


@pytest.mark.parametrize("case", sorted(PROFILE_CASES))
def test_profile_validator_refuses(case, h200):
    mutate, where = PROFILE_CASES[case]
    with pytest.raises(InputError, match=where.replace("[", r"\[").replace("]", r"\]")):
        profile_from_dict(_mutated(h200, mutate), source="p")


def test_profile_json_text_is_strict():
    cases = {'{"a": 1, "a": 2}': "duplicate key 'a'", "[" * 5000 + "]" * 5000: "nested deeper than",
             "[NaN]": "NaN is not a JSON number", "[" + "9" * 400 + "]": "int64",
             '["\\ud800"]': "UTF-8", "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1): "nested deeper"}
    for text, message in cases.items():
        with pytest.raises(InputError, match=message):
            loads_json(text, "t")
        with pytest.raises(InputError):
            parse_profile(text, source="t")


def test_deep_json_is_one_line_in_the_cli_and_the_upload(tmp_path, capsys):
    path = tmp_path / "deep.json"
    path.write_text("[" * 5000 + "]" * 5000)
    code, _, err = run_cli(capsys, "predict", "--profile", str(path))
    assert code == 2 and "nested deeper" in one_error_line(err)
    with pytest.raises(InputError, match="nested deeper"):
        uploads.parse_upload("deep.json", path.read_bytes())


def test_published_schema_is_current_and_accepts_the_bundled_profiles():
    jsonschema = pytest.importorskip("jsonschema")
    schema_path = PROFILE_DIR / "schema.json"
    assert schema_path.read_text() == profile_schema_text(), "regenerate: python -m costmodel.profiles.schema"
    validator = jsonschema.Draft202012Validator(json.loads(schema_path.read_text()))
    for path in sorted(PROFILE_DIR.glob("*.json")):
        if path.name != "schema.json":
            assert not list(validator.iter_errors(json.loads(path.read_text()))), path.name
            load_profile(path.stem)


# -- measurement CSVs ------------------------------------------------------------------------------------------
CSV_CASES = {
    "op,mode,world_size,median_us\nall_gather,graph,2,5,1\n": "more fields than the header",
    "op,mode,world_size,bytes_per_rank,median_us\nall_gather,graph,2,99999999999999999999,1\n":
        "expected an integer in 0..9007199254740992",
    "op,mode,world_size,bytes_per_rank,median_us\nall_gather,graph,2,9223372036854775807,1\n":
        "expected an integer in 0..9007199254740992",  # 2^63 - 1: refused, not wrapped to -2^63
    "op,mode,world_size,nodes,bytes_per_rank,median_us\nall_gather,graph,8,0,64,1\n": "nodes must be >= 1",
    "op,mode,world_size,nodes,bytes_per_rank,median_us\nall_gather,graph,8,3,64,1\n": "nodes must divide world_size",
    ",".join(f"c{i}" for i in range(300)) + "\n": "300 columns in the header, more than 256",
    "op,mode,world_size,bytes_per_rank,median_us\nall_gather,graph,2,inf,1\n": "expected an integer",
    "op,mode,world_size,bytes_per_rank,median_us\nall_gather,graph,eight,64,1\n": "column world_size",
    f"op,mode,world_size,bytes_per_rank,median_us\nall_gather,graph,2,64,{MAX_TIME_US * 10:g}\n": "times must be",
    "op,mode,world_size,bytes_per_rank,median_us,p90_us\nall_gather,graph,2,64,1,inf\n": "column p90_us",
}


@pytest.mark.parametrize("text", sorted(CSV_CASES))
def test_measurement_csv_refusals(text, tmp_path):
    with pytest.raises(InputError, match=CSV_CASES[text]):
        parse_measurement_csv(text, "m.csv")
    path = tmp_path / "m.csv"
    path.write_text(text)
    with pytest.raises(InputError, match=CSV_CASES[text]):
        read_measurements(path)


def test_times_scaled_by_1e295_are_refused_not_fitted():
    rows = collective_rows([64, 256, 1024, 4096], time=lambda b: (10 + b / 1e3) * 1e295)
    with pytest.raises(InputError, match="times must be finite"):
        fit_measurements(pd.DataFrame(rows), name="x", bootstrap=0)


# -- CLI totality ----------------------------------------------------------------------------------------------
BAD_CLI = {
    ("predict", "--vocab", "9223372036854775800"): "--vocab: 9223372036854775800 is outside",
    ("predict", "--tp", "99999999999999999999"): "--tp",
    ("predict", "--nodes", "99999999999999999999"): "--nodes",
    ("predict", "--num-spec-tokens", "99999999999999999999"): "--num-spec-tokens",
    ("predict", "--hidden", "1,2"): "--hidden: takes one value",
    ("predict", "--max-batch", "inf"): "--max-batch",
    ("predict", "--max-batch", "nan"): "--max-batch",
    ("predict", "--itl-ms", "nan", "--acceptance-length", "2"): "--itl-ms",
    ("validate", "--max-error", "nan"): "--max-error",
    ("sweep", "--batch", "1:4096@0"): "--batch",
}


@pytest.mark.parametrize("argv", sorted(BAD_CLI))
def test_bad_cli_values_are_one_line(argv, capsys):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and BAD_CLI[argv] in one_error_line(err) and not out


def test_duplicate_list_values_are_dropped(capsys):
    code, out, _ = run_cli(capsys, "sweep", "--batch", "1,1,2", "--mode", "graph,graph,eager", "--tp", "2")
    frame = pd.read_csv(io.StringIO(out))
    assert code == 0 and len(frame) == len(frame.drop_duplicates())
    assert sorted(set(frame["batch"])) == [1, 2] and sorted(set(frame["mode"])) == ["eager", "graph"]


def test_predict_points_edge_cases(tmp_path, capsys):
    inf_rows = tmp_path / "inf.csv"
    inf_rows.write_text("op,mode,world_size,bytes_per_rank\nall_gather,graph,8,inf\n")
    code, _, err = run_cli(capsys, "predict-points", "--in", str(inf_rows), "--out", str(tmp_path / "o.csv"))
    assert code == 2 and "bytes_per_rank" in one_error_line(err)
    good = tmp_path / "good.csv"
    good.write_text("op,mode,world_size,bytes_per_rank\nall_gather,graph,8,1024\n")
    code, out, _ = run_cli(capsys, "predict-points", "--in", str(good), "--out", "-")
    assert code == 0 and not (tmp_path / "-").exists() and Path("-").exists() is False
    assert np.isfinite(pd.read_csv(io.StringIO(out))["predicted_us"]).all()
    code, _, err = run_cli(capsys, "predict-points", "--in", str(good), "--out", str(tmp_path / "no" / "o.csv"))
    assert code == 2 and str(tmp_path / "no" / "o.csv") in one_error_line(err)


@pytest.mark.parametrize("body,message", [
    ("a,all_gather,graph,eight,1024,100,h200-sxm-nvlink,H200,x", "column world_size"),
    ("a,all_gather,graph,8,,100,h200-sxm-nvlink,H200,x", "bytes_per_rank"),
])
def test_validate_reference_with_text_or_missing_columns_is_one_line(body, message, tmp_path, capsys):
    ref = tmp_path / "ref.csv"
    ref.write_text("id,op,mode,world_size,bytes_per_rank,busbw_gbps,profile,gpu,source\n" + body + "\n")
    code, _, err = run_cli(capsys, "validate", "--reference", str(ref))
    assert code == 2 and message in one_error_line(err)


def test_fit_cli_bounds(tmp_path, capsys):
    from calibration.fitting import fit

    csv = tmp_path / "m.csv"
    csv.write_text(measurement_csv(collective_rows([64, 256, 1024, 4096])))
    for flag, value in (("--seed", "-1"), ("--bootstrap", "-1"), ("--max-regimes", "0")):
        assert fit.main([str(csv), "--out", str(tmp_path / "p.json"), flag, value]) == 2
        assert flag in one_error_line(capsys.readouterr().err)


# -- nccl-tests ------------------------------------------------------------------------------------------------
def test_nccl_tests_log_naming_two_gpu_models_is_refused():
    log = "\n".join([
        "# Collective test starting: all_gather_perf",
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 64 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
        "validation: 1 graph: 0",
        "#  Rank  0 Group  0 Pid 1 on host0 device  0 [0x1b] NVIDIA H100 80GB HBM3",
        "#  Rank  1 Group  0 Pid 2 on host0 device  1 [0x2b] NVIDIA A100-SXM4-80GB",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw "
        "  busbw #wrong",
        "          64             8     float    none      -1    10.00    0.01    0.00      0    10.00    0.01 "
        "   0.00      0",
    ])
    with pytest.raises(InputError, match="2 GPU models"):
        import_nccl_tests.parse_nccl_tests_text(log, "mixed.log")


# -- calibration: flags checked against each other, interruption ----------------------------------------------
def test_collectives_flags_are_checked_against_each_other(tmp_path):
    from calibration.bench import collectives

    base = ["--backend", "gloo", "--out", str(tmp_path / "out")]
    with pytest.raises(InputError, match="must exceed the longest point"):
        collectives.parse_config(base + ["--watchdog-s", "2", "--point-time-s", "3"])
    existing = tmp_path / "file"
    existing.write_text("x")
    with pytest.raises(InputError, match="exists and is not a directory"):
        collectives.parse_config(["--backend", "gloo", "--out", str(existing)])
    for flag in ("--watchdog-s", "--point-time-s", "--rel-tol"):
        for value in ("nan", "inf"):
            with pytest.raises(InputError, match=flag):
                collectives.parse_config(base + [flag, value])


def test_interruptible_turns_sigterm_into_an_interrupt_with_exit_143(tmp_path, capsys):
    with pytest.raises(Interrupted) as info:
        with interruptible():
            os.kill(os.getpid(), signal.SIGTERM)
            signal.sigtimedwait([], 0) if hasattr(signal, "sigtimedwait") else None
            for _ in range(1000):  # the handler runs between bytecodes
                pass
    assert info.value.exit_code == 143
    assert signal.getsignal(signal.SIGTERM) is not None
    csv = tmp_path / "k.csv"
    csv.write_text("a,b\n1,2\n3,4\n5,")
    assert count_rows(csv) == 2
    assert interrupted_exit(KeyboardInterrupt(), 2) == 130
    assert capsys.readouterr().err == "error: interrupted; 2 rows kept, resume with --resume\n"


def test_kernels_ctrl_c_keeps_rows_marks_provenance_and_exits_130(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    from calibration.bench import kernels
    from calibration.bench.timing import Stats

    calls = {"n": 0}

    def fake_measure(point, device, policy):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return Stats(5, 1.0, 1.0, 1.0, 1.0, 1.0)

    monkeypatch.setattr(kernels, "measure", fake_measure)
    out = tmp_path / "k"
    code = kernels.main(["--device", "cpu", "--ops", "argmax", "--out", str(out), "--quick"])
    err = capsys.readouterr().err
    assert code == 130 and err.strip().splitlines()[-1] == "error: interrupted; 2 rows kept, resume with --resume"
    assert json.loads((out / "provenance.json").read_text())["status"] == "interrupted"
    assert len(pd.read_csv(out / "kernels.csv")) == 2


def test_no_traceback_for_a_bug_either(monkeypatch, capsys):
    monkeypatch.setattr(cmd_presets, "run", lambda args: 1 / 0)
    code, _, err = run_cli(capsys, "presets")
    assert code == 2 and "internal error (ZeroDivisionError" in err and "Traceback" not in err
    assert sys.exc_info() == (None, None, None)


def test_dashboard_tp_typed_as_a_huge_integer_is_one_error():
    from dashboard import state

    values = state.session_values(state.Inputs())
    for key, value in (("tp", 99999999999999999999), ("batch", float("inf")), ("vocab", "1e400")):
        with pytest.raises(InputError, match=key):
            state.inputs_from_session({**values, key: value})


def test_exactly_three_sizes_are_fitted_as_the_readme_says():
    text = measurement_csv(collective_rows([1024, 4096, 16384]))
    up = uploads.parse_upload("three.csv", text.encode())
    statuses = [r["status"] for r in up.profile.fit_report if r["kind"] == "collective"]
    assert statuses == ["fitted"]


def test_a_fifo_results_file_is_refused_by_the_row_writer(tmp_path):
    from calibration.logs.results import RowWriter

    fifo = tmp_path / "kernels.csv"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        RowWriter(fifo)


@pytest.mark.parametrize("where", ["regime", "curve", "kernels", "model", "top"])
def test_a_misspelled_profile_key_is_refused_naming_it(where):
    doc = json.loads((PROFILE_DIR / "h200-sxm-nvlink.json").read_text())
    node = {"regime": doc["collectives"][0]["regimes"][0], "curve": doc["collectives"][0],
            "kernels": doc["kernels"], "model": doc["kernels"]["model"], "top": doc}[where]
    node["busbw_gpbs"] = 5.0
    with pytest.raises(InputError, match=r"busbw_gpbs: is not a known field \(misspelled\?\)"):
        profile_from_dict(doc, source="p.json")
