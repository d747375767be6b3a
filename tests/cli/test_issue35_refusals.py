"""Issue 35 section 6: input that was accepted and silently ignored (or crashed) is refused with one `error:` line
and exit 2; inputs that were refused without cause are accepted."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from calibration.fitting import kernel_report
from costmodel.cli.cmd_presets import preset_table_text
from costmodel.cli.main import build_parser, main
from costmodel.evidence.reference import load_reference
from costmodel.io.errors import InputError
from costmodel.io.measurements import MAX_INT, parse_measurement_csv
from costmodel.serving.workload import load_workload, parse_workload
from tests.conftest import ROOT

PLACEMENT_ERROR = ("error: argument --placement: expected target, tp1, dp or q=N (N a positive integer dividing "
                   "the TP), ")
REFERENCE_HEADER = "op,mode,world_size,bytes_per_rank,gpu,source,profile,median_us"


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def reference_csv(tmp_path: Path, extra_column: str, value: str) -> Path:
    """Two cpu-gloo reference rows with one more column holding `value` in its second row."""
    path = tmp_path / "ref.csv"
    path.write_text(f"{REFERENCE_HEADER},{extra_column}\n"
                    f"all_gather,eager,2,8,cpu,test,cpu-gloo,650.0,\n"
                    f"all_gather,eager,2,16,cpu,test,cpu-gloo,652.0,{value}\n")
    return path


# -- item 1: accepted and silently ignored --------------------------------------------------------------------
@pytest.mark.parametrize("command, flag", [("predict", "--vocab"), ("predict", "--preset"), ("predict", "--mode"),
                                           ("predict", "--draft-vocab"), ("sweep", "--vocab"), ("compare", "--tp")])
def test_an_empty_scenario_flag_is_refused(capsys, command, flag):
    extra = ["h100-sxm-nvlink", "h200-sxm-nvlink"] if command == "compare" else []
    code, out, err = cli(capsys, command, *extra, flag, "")
    assert (code, out) == (2, "")
    assert err == f"error: argument {flag}: empty value (leave the flag out for its default)\n"


@pytest.mark.parametrize("flags", [["--greedy-fraction", "0.5"], ["--target-dtype", "fp32"],
                                   ["--greedy-fraction", "1"]])
def test_verification_flags_without_verify_are_refused(capsys, flags):
    code, out, err = cli(capsys, "predict", *flags, "--no-intervals")
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {flags[0]}: ") and "needs --verify" in err and err.count("\n") == 1


@pytest.mark.parametrize("spec", ["", "Q=2", "TP1", "q=", "q=0", "q=2x", " dp"])
def test_a_malformed_placement_is_refused(capsys, spec):
    code, out, err = cli(capsys, "predict", "--placement", spec, "--no-intervals")
    assert (code, out, err) == (2, "", PLACEMENT_ERROR + f"got {spec!r}\n")


def measurement_file(tmp_path: Path) -> Path:
    path = tmp_path / "points.csv"
    path.write_text("op,mode,world_size,bytes_per_rank,median_us\nall_reduce,graph,8,4096,20.0\n")
    return path


def test_predict_points_refuses_a_list_of_engines(tmp_path, capsys):
    code, out, err = cli(capsys, "predict-points", "--in", str(measurement_file(tmp_path)), "--out",
                         str(tmp_path / "out.csv"), "--engine", "vllm,sglang")
    assert (code, out, err) == (2, "", "error: --engine: predict-points takes one value, got 'vllm,sglang'\n")
    assert not (tmp_path / "out.csv").exists()


def test_predict_points_takes_one_engine(tmp_path, capsys):
    code, _, err = cli(capsys, "predict-points", "--in", str(measurement_file(tmp_path)), "--out",
                       str(tmp_path / "out.csv"), "--engine", "sglang")
    assert code == 0, err
    assert "predicted_us" in (tmp_path / "out.csv").read_text().splitlines()[0]


def test_a_text_k_is_refused_and_an_empty_k_is_one():
    head = "op,mode,world_size,rows,cols,k,median_us\n"
    with pytest.raises(InputError) as exc:
        parse_measurement_csv(head + "local_topk,graph,1,4,100,8,5\nlocal_topk,graph,1,4,100,abc,5\n", "t.csv")
    assert str(exc.value) == "t.csv: column k row 3 is 'abc'; expected an integer in 1..4096"
    frame = parse_measurement_csv(head + "local_topk,graph,1,4,100,,5\nlocal_topk,graph,1,4,100,8,5\n", "t.csv")
    assert frame["k"].tolist() == [1, 8]


@pytest.mark.parametrize("column, value, expected", [
    ("used_in_profile", "maybe", "expected true or false (or 1 / 0, yes / no; empty = false)"),
    ("nccl_algo", "warp", "expected one of default, ring, no-nvls (or empty)"),
])
def test_a_reference_flag_column_takes_only_its_values(tmp_path, capsys, column, value, expected):
    path = reference_csv(tmp_path, column, value)
    with pytest.raises(InputError) as exc:
        load_reference([path])
    assert str(exc.value) == f"{path}: column {column} row 3 is {value!r}; {expected}"
    code, out, err = cli(capsys, "validate", "--reference", str(path), "--no-coverage", "--summary-only")
    assert (code, out, err) == (2, "", f"error: {exc.value}\n")


def test_used_in_profile_reads_every_boolean_spelling(tmp_path):
    path = tmp_path / "ref.csv"
    rows = "".join(f"all_gather,eager,2,{8 * (i + 1)},cpu,test,cpu-gloo,650.0,{v}\n"
                   for i, v in enumerate(["True", "false", "1", "0", "YES", "no", ""]))
    path.write_text(f"{REFERENCE_HEADER},used_in_profile\n" + rows)
    assert load_reference([path])["used_in_profile"].tolist() == [True, False, True, False, True, False, False]


def test_the_accepted_nccl_algos_are_read(tmp_path):
    for algo in ("ring", "no-nvls", "default"):
        assert load_reference([reference_csv(tmp_path, "nccl_algo", algo)])["nccl_algo"].iloc[1] == algo


def test_reference_needs_at_least_one_file(capsys):
    code, out, err = cli(capsys, "validate", "--reference")
    assert (code, out, err) == (2, "", "error: argument --reference: expected at least one argument\n")


def test_held_out_only_needs_max_error(tmp_path, capsys):
    path = reference_csv(tmp_path, "used_in_profile", "false")
    code, out, err = cli(capsys, "validate", "--held-out-only", "--reference", str(path), "--no-coverage",
                         "--summary-only")
    assert (code, out) == (2, "")
    assert err == "error: --held-out-only: limits which rows --max-error checks, so it needs --max-error\n"
    code, _, err = cli(capsys, "validate", "--held-out-only", "--max-error", "100", "--reference", str(path),
                       "--no-coverage", "--summary-only")
    assert code == 0, err


def kernels_csv(tmp_path: Path) -> Path:
    path = tmp_path / "kernels.csv"
    path.write_text("op,dtype,mode,world_size,rows,cols,median_us\n"
                    "relayout_copy,bf16,graph,8,1024,25256,100.0\nlocal_argmax,bf16,graph,1,2048,25256,50.0\n")
    return path


@pytest.mark.parametrize("value", ["nan", "-1", "inf", "abc"])
def test_kernel_report_min_mib_must_be_a_finite_size(tmp_path, capsys, value):
    assert kernel_report.main([str(kernels_csv(tmp_path)), "--min-mib", value]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"error: argument --min-mib: {value!r} is not a finite number of MiB in 0..1048576\n")


def test_kernel_report_min_mib_zero_is_every_row(tmp_path, capsys):
    assert kernel_report.main([str(kernels_csv(tmp_path)), "--min-mib", "0"]) == 0
    assert ">= 0 MiB" in capsys.readouterr().out


BENCH = {"duration": 10.0, "input_lens": [8, 8], "output_lens": [5, 6], "mean_tpot_ms": 10.0}


@pytest.mark.parametrize("itls", [[{"a": 1}], [[0.1], 0.2], [0.1, 0.2], [[0.1], "x"], {"0": [0.1]}, "0.1"])
def test_bench_itls_of_the_wrong_shape_are_refused(itls):
    with pytest.raises(InputError) as exc:
        parse_workload(json.dumps({**BENCH, "itls": itls}), "bench.json")
    assert str(exc.value) == "bench bench.json: itls must be a list of per-request lists of numbers (seconds)"


def test_bench_itls_lists_are_read():
    got = parse_workload(json.dumps({**BENCH, "itls": [[0.1, 0.1], [0.2]]}), "bench.json")
    assert got.method.startswith("Little's law: decode time (sum of")


# -- item 2: placements that do not run the draft at the target's TP ---------------------------------------------
# --vocab 128000: TP 5 divides the vocab (the target's lm_head shards), not the default draft's 40 heads
@pytest.mark.parametrize("placement", ["tp1", "dp"])
def test_tp1_and_dp_are_priced_where_the_draft_cannot_shard_at_the_target_tp(capsys, placement):
    code, out, err = cli(capsys, "predict", "--vocab", "128000", "--tp", "5", "--placement", placement,
                         "--no-intervals", "--json")
    assert code == 0, err
    table = json.loads(out)["placement"]
    assert table["unavailable"] == "draft TP 5: must divide the draft's 40 heads and its intermediate size 16384"
    assert (table["chosen"]["placement"], table["chosen"]["draft_tp"]) == (placement, 1)
    assert table["chosen"]["whole_draft_step_us"] > 0
    code, out, err = cli(capsys, "predict", "--vocab", "128000", "--tp", "5", "--placement", placement,
                         "--no-intervals")
    assert code == 0, err
    assert f"\n--placement {placement}: " in out


@pytest.mark.parametrize("placement", ["target", "q=5"])
def test_placements_that_run_the_draft_at_tp5_are_still_refused(capsys, placement):
    code, out, err = cli(capsys, "predict", "--vocab", "128000", "--tp", "5", "--placement", placement,
                         "--no-intervals")
    assert (code, out) == (2, "")
    assert err == "error: draft TP 5: must divide the draft's 40 heads and its intermediate size 16384\n"


def test_a_vocab_tp5_cannot_split_stays_refused_whatever_the_placement(capsys):
    """202048 / 64 = 3157 rows of 64 do not split over 5 ranks: the target's own lm_head cannot run at TP 5."""
    code, out, err = cli(capsys, "predict", "--tp", "5", "--placement", "tp1", "--no-intervals")
    assert (code, out) == (2, "")
    assert err == "error: tp: TP size 5 does not divide the padded draft vocab 202048 (vLLM rejects this)\n"


# -- item 3: a symlink loop -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["a.json", "a"])
def test_a_profile_symlink_loop_is_one_line_naming_the_file(tmp_path, capsys, name):
    (tmp_path / name).symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / name)
    path = str(tmp_path / name)
    code, out, err = cli(capsys, "predict", "--profile", path, "--no-intervals")
    assert (code, out, err) == (2, "", f"error: profile {path}: symlink loop\n")


def test_an_output_symlink_loop_is_one_line_naming_the_file(tmp_path, capsys):
    (tmp_path / "a.csv").symlink_to(tmp_path / "b.csv")
    (tmp_path / "b.csv").symlink_to(tmp_path / "a.csv")
    path = str(tmp_path / "a.csv")
    code, out, err = cli(capsys, "sweep", "--batch", "1", "--out", path)
    assert (code, out, err) == (2, "", f"error: --out {path}: symlink loop\n")


# -- item 4: the dashboard's pass-through options ---------------------------------------------------------------
@pytest.mark.parametrize("argv, message", [
    (["--server.port", "abc"], "--server.port 'abc' is not a port number (an integer in 1..65535)"),
    (["--server.port=70000"], "--server.port '70000' is not a port number (an integer in 1..65535)"),
    (["--browser.serverPort", "-1"], "--browser.serverPort '-1' is not a port number (an integer in 1..65535)"),
    (["--server.headless", "maybe"], "--server.headless 'maybe' is not true or false"),
    (["--server.maxUploadSize", "lots"], "--server.maxUploadSize 'lots' is not an integer"),
    (["--server.port"], "--server.port needs a value"),
    (["--server.prot", "8600"], "--server.prot is not a Streamlit option (`streamlit run --help` lists them)"),
    (["-x"], "-x is not a Streamlit option (`streamlit run --help` lists them)"),
])
def test_dashboard_options_are_checked_before_streamlit_starts(argv, message):
    from costmodel.cli.streamlit_args import check_streamlit_args

    with pytest.raises(InputError) as exc:
        check_streamlit_args(argv)
    assert str(exc.value) == f"dashboard: {message}"


def test_dashboard_accepts_good_options():
    from costmodel.cli.streamlit_args import check_streamlit_args

    check_streamlit_args(["--server.port", "8600", "--server.headless=true", "--theme.base", "dark",
                          "--server.maxUploadSize", "5"])


def test_dashboard_bad_port_is_one_error_line_and_exit_2():
    proc = subprocess.run([sys.executable, "-m", "costmodel", "dashboard", "--server.port", "abc"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == "error: dashboard: --server.port 'abc' is not a port number (an integer in 1..65535)\n"


# -- item 5: a workload CSV with a UTF-8 BOM ---------------------------------------------------------------------
def test_a_workload_csv_with_a_utf8_bom_is_read(tmp_path):
    path = tmp_path / "excel.csv"
    path.write_bytes(b"\xef\xbb\xbfbatch,weight\r\n8,1\r\n16,3\r\n")
    workload = load_workload(path)
    assert workload.batch.tolist() == [8, 16]
    assert workload.weight.tolist() == [0.25, 0.75]


# -- item 6: docs/limits.md states the bound the code enforces ----------------------------------------------------
def test_limits_doc_states_the_measurement_integer_bound_the_code_enforces():
    row = next(line for line in (ROOT / "docs" / "limits.md").read_text().splitlines()
               if line.startswith("| measurement CSV |"))
    exponent = int(re.search(r"integers 0\.\.2\^(\d+)(?![\d-])", row).group(1))
    assert MAX_INT == 2**exponent
    head = "op,mode,world_size,bytes_per_rank,median_us\n"
    frame = parse_measurement_csv(head + f"all_reduce,graph,8,{2**exponent},20\n", "t.csv")
    assert int(frame["bytes_per_rank"].iloc[0]) == 2**exponent
    for value in (2**exponent + 1, 2**63 - 1):
        with pytest.raises(InputError) as exc:
            parse_measurement_csv(head + f"all_reduce,graph,8,{value},20\n", "t.csv")
        assert str(exc.value) == f"t.csv: column bytes_per_rank row 2 is {value}; expected an integer in 0..{2**53}"


# -- item 7: flags show no "(default: True)" -------------------------------------------------------------------
def test_no_serving_term_help_states_what_the_flag_does(capsys):
    with pytest.raises(SystemExit):
        main(["predict", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    start = text.index("--no-serving-term drop")
    entry = text[start:text.index(" --", start + 2)]
    assert entry.endswith("without the flag the term is priced")
    assert "(default: True)" not in text and "(default: False)" not in text


def test_no_flag_of_any_command_shows_a_default():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in sub.choices.items():
        text = " ".join(parser.format_help().split())
        assert "(default: True)" not in text and "(default: False)" not in text, name


# -- item 8: presets fits 100 columns ---------------------------------------------------------------------------
def test_presets_fits_100_columns_and_wide_prints_every_column(capsys):
    code, out, _ = cli(capsys, "presets")
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 100
    header = out.splitlines()[0].split()
    assert header[:3] == ["preset", "vocab", "hidden"] and "draft_vocab" in header and "d2t" in header
    assert "llama4-maverick" in out and out.splitlines()[-1].startswith("(")
    code, out, _ = cli(capsys, "presets", "--wide")
    assert (code, out) == (0, preset_table_text() + "\n")
    assert max(len(line) for line in out.splitlines()) > 100


# -- item 9: no command ------------------------------------------------------------------------------------------
def test_no_command_is_one_error_line_and_exit_2(capsys):
    code, out, err = cli(capsys)
    assert (code, out) == (2, "")
    assert err == ("error: no command given (try `argmax-tp --help`; commands: predict, recommend, sweep, "
                   "predict-points, validate, simulate, profiles, compare, presets, dashboard, calibrate-collectives, "
                   "calibrate-kernels, verify, fit, import-nccl-tests, kernel-report)\n")
    proc = subprocess.run([sys.executable, "-m", "costmodel"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", err)


def test_the_accepted_nccl_algos_are_default_and_the_forced_ones_validate_prices():
    from costmodel.evidence.reference import NCCL_ALGOS
    from costmodel.evidence.validate import FORCED_DROPS

    assert set(NCCL_ALGOS) == {"default", *FORCED_DROPS}
