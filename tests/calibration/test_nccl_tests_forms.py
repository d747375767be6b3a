"""Issue 44 item 4: every form of an nccl-tests log users paste imports to the same rows - launcher prefixes
(mpirun --tag-output, torchrun, srun --label, SkyPilot, kubectl --prefix), older and trimmed column layouts,
rccl-tests' variants, CRLF / BOM / trailing blanks. Fixtures: tests/calibration/data/nccl_tests_forms (README.md
there names the bundled log each was built on); the expected rows below were checked by hand against those logs."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calibration.logs import import_nccl_tests
from calibration.logs.import_nccl_tests import Hints, main, parse_nccl_tests_text, read_log, split_prefix
from costmodel.io.errors import InputError
from tests.calibration.test_import_nccl_tests import nccl_log

ROOT = Path(__file__).resolve().parents[2]
FORMS = Path(__file__).resolve().parent / "data" / "nccl_tests_forms"
TAG_LOG = FORMS / "mpirun_tag_output_all_reduce_h100x16.log"
# what the table says about the run, then [(bytes per rank, out-of-place time us)] row by row
EXPECTED = {
    "mpirun_tag_output_all_reduce_h100x16.log": (
        ("all_reduce", "NVIDIA H100 80GB HBM3", 16, 2, "process-per-gpu", 20),
        [(8, 45.72), (1024, 31.36), (65536, 37.85), (1048576, 87.08), (16777216, 210.33), (134217728, 759.58),
         (1073741824, 4511.97)]),
    # all_gather prints the gathered buffer: size / 8 ranks per rank (1024 B -> 128 B)
    "torchrun_rank_prefix_all_gather_h100x8.log": (
        ("all_gather", "NVIDIA H100 80GB HBM3", 8, 1, "single-process", 20),
        [(128, 34.78), (8192, 35.69), (131072, 41.67), (1048576, 47.01), (4194304, 125.45)]),
    "srun_label_all_reduce_b200x16.log": (
        ("all_reduce", "NVIDIA B200", 16, 2, "process-per-gpu", 20),
        [(8, 36.50), (4096, 40.08), (1048576, 115.58), (67108864, 350.41), (2147483648, 5784.75)]),
    "skypilot_over_tag_output_all_reduce_b200x16.log": (
        ("all_reduce", "NVIDIA B200", 16, 2, "process-per-gpu", 20),
        [(8388608, 156.9), (134217728, 638.5), (1073741824, 3229.9), (8589934592, 23563.0)]),
    "old_error_columns_no_root_all_reduce_a100x8.log": (
        ("all_reduce", "A100-SXM4-80GB", 8, 1, "single-process", 20),
        [(8, 34.84), (1024, 36.57), (65536, 37.48), (1048576, 67.31), (16777216, 273.12), (134217728, 1295.41)]),
    "no_wrong_columns_all_reduce_h100x4.log": (
        ("all_reduce", "NVIDIA H100 80GB HBM3", 4, 1, "single-process", 50),
        [(8, 23.30), (4096, 23.17), (1048576, 26.76), (67108864, 329.39), (4294967296, 17744.6)]),
    "rccl_tests_out_of_place_only_mi300x8.log": (
        ("all_reduce", "AMD Instinct MI300X", 8, 1, "process-per-gpu", 20),
        [(8, 19.28), (1024, 13.67), (65536, 14.25), (1048576, 28.39), (16777216, 149.9), (134217728, 800.3)]),
    # Rank lines without a GPU name: "unknown" unless --gpu names it (test below)
    "rccl_tests_banner_extra_columns_mi355x16.log": (
        ("all_reduce", "unknown", 16, 2, "process-per-gpu", 20),
        [(8, 41.16), (65536, 59.17), (1048576, 81.37), (33554432, 391.8), (1073741824, 5525.0)]),
    "crlf_bom_trailing_blanks_all_reduce_a100x8.log": (
        ("all_reduce", "NVIDIA A100-SXM4-80GB", 8, 1, "single-process", 20),
        [(1024, 36.57), (65536, 37.48), (1048576, 67.31), (134217728, 1295.41)]),
}
RUN_COLUMNS = ["op", "gpu", "world_size", "nodes", "launch", "iters"]
VALUE_COLUMNS = [c for c in import_nccl_tests.OUTPUT_COLUMNS if c != "source"]


def parse_fixture(name: str, hints: Hints | None = None) -> pd.DataFrame:
    return parse_nccl_tests_text(read_log(FORMS / name), name, hints or Hints())


def values(frame: pd.DataFrame) -> list[list]:
    """The rows without their `source` (line numbers differ between forms of one table)."""
    return frame[VALUE_COLUMNS].values.tolist()


def one_error_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text and "\r" not in text, text
    return text


def test_every_fixture_is_listed_and_documented():
    names = {p.name for p in FORMS.glob("*.log")}
    assert names == set(EXPECTED)
    readme = (FORMS / "README.md").read_text()
    assert all(f"`{name}`" in readme for name in names)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_form_imports_its_rows(name):
    run, rows = EXPECTED[name]
    frame = parse_fixture(name)
    assert frame[RUN_COLUMNS].drop_duplicates().values.tolist() == [list(run)]
    assert frame["bytes_per_rank"].tolist() == [b for b, _ in rows]
    assert frame["median_us"].tolist() == pytest.approx([t for _, t in rows], abs=1e-9)
    assert set(frame["dtype"]) == {"fp32"} and set(frame["mode"]) == {"eager"}
    assert frame["source"].str.startswith(f"{name}:").all()


def test_crlf_bom_fixture_reads_as_the_bundled_log_it_was_cut_from():
    bundled = parse_nccl_tests_text(read_log(ROOT / "data/reference/nccl-tests/a100x8_all_reduce_dkh-doc.log"))
    cut = parse_fixture("crlf_bom_trailing_blanks_all_reduce_a100x8.log")
    kept = bundled[bundled["bytes_per_rank"].isin(cut["bytes_per_rank"])].reset_index(drop=True)
    assert values(cut) == values(kept)


def test_tag_output_fixture_reads_as_its_lines_without_prefixes():
    text = read_log(TAG_LOG)
    rank0 = "\n".join(line.split(":", 1)[1] for line in text.splitlines() if line.startswith("[1,0]<stdout>:"))
    assert values(parse_nccl_tests_text(text)) == values(parse_nccl_tests_text(rank0))


def test_rccl_tests_gpu_name_comes_from_the_hint():
    frame = parse_fixture("rccl_tests_banner_extra_columns_mi355x16.log", Hints(gpu="AMD Instinct MI355X"))
    assert set(frame["gpu"]) == {"AMD Instinct MI355X"}


# -- prefixes ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("line, key, rest", [
    ("[1,0]<stdout>:# nThread 1", (("mpi", "0"),), "# nThread 1"),
    ("[1,12]<stderr>:warning", (("mpi", "12"),), "warning"),
    ("[prterun-node0-2041@1,3]<stdout>: x", (("mpi", "3"),), " x"),  # Open MPI 5's job id
    ("    [1,0]<stdout>:    8    2", (("mpi", "0"),), "    8    2"),  # indented inside markdown
    ("[rank0]:# Using devices", (("torch", "0"),), "# Using devices"),
    ("[rank7]: text", (("torch", "7"),), " text"),
    ("[default3]:text", (("torch", "3"),), "text"),
    (" 0: # nThread", (("slurm", "0"),), " # nThread"),
    ("12: NCCL INFO", (("slurm", "12"),), " NCCL INFO"),
    ("(head, rank=0, pid=3808) [1,0]<stdout>:#", (("ray", "0"), ("mpi", "0")), "#"),
    ("(pid=1234, ip=10.0.0.1) hello", (("ray", "1234"),), " hello"),
    ("[pod/nccl-launcher-x7k2p/mpi] [1,0]<stdout>:#", (("pod", "nccl-launcher-x7k2p/mpi"), ("mpi", "0")), "#"),
])
def test_launcher_prefixes_are_split_off(line, key, rest):
    got_key, label, got_rest = split_prefix(line)
    assert (got_key, got_rest) == (key, rest)
    assert line.strip().startswith(label) and label == label.strip()


@pytest.mark.parametrize("line", [
    "[1,0]<stdo", "[1,0]<stdout>", "[1,]<stdout>:x", "[rank]:x", "(B)    (elements)", "(base) $ ./all_reduce_perf",
    "12:34:56 started", "           8             2     float     sum      -1    45.72", "[0] NCCL INFO x",
    "#  Rank  0 Group  0 Pid 1 on h device  0 [0000:53:00] GPU", "0:x",
])
def test_text_that_is_not_a_prefix_stays(line):
    assert split_prefix(line) == ((), "", line)


def _rank_copy(text: str, prefix: str) -> str:
    return "".join(prefix + line + "\n" for line in text.splitlines())


def test_the_same_table_from_two_ranks_counts_once():
    log = nccl_log("all_reduce_perf", ["n0", "n1"], 4, [(1024, 20.0), (1 << 20, 80.0)])
    rank0, rank1 = _rank_copy(log, "[1,0]<stdout>:"), _rank_copy(log, "[1,1]<stdout>:")
    interleaved = "".join(a + "\n" + b + "\n" for a, b in zip(rank0.splitlines(), rank1.splitlines(), strict=True))
    once = parse_nccl_tests_text(log)
    for text in (rank0 + rank1, rank1 + rank0, interleaved):
        frame = parse_nccl_tests_text(text, "dup.log")
        assert values(frame) == values(once)
    # the first prefix to print a result row is the one kept: its line numbers are the rows' sources
    first = parse_nccl_tests_text(interleaved, "dup.log")["source"].tolist()
    assert all(int(s.rsplit(":", 1)[1]) % 2 == 1 for s in first)  # rank 0's lines are the odd ones


def test_different_tables_from_two_ranks_are_refused_in_one_line():
    # nccl-tests built without MPI=1 under mpirun: every process runs alone and prints its own table
    a = nccl_log("all_reduce_perf", ["n0"], 1, [(1024, 20.0), (1 << 20, 80.0)])
    b = nccl_log("all_reduce_perf", ["n1"], 1, [(1024, 21.0), (1 << 20, 84.0)])
    text = _rank_copy(a, "[1,0]<stdout>:") + _rank_copy(b, "[1,1]<stdout>:")
    with pytest.raises(InputError, match=r"two.log:\d+: lines prefixed '\[1,1\]<stdout>:' print another result "
                                         r"table than those prefixed '\[1,0\]<stdout>:'") as exc:
        parse_nccl_tests_text(text, "two.log")
    assert "split the log per rank" in one_error_line(exc)


def test_one_rank_over_several_mpirun_jobs_is_one_stream():
    ar = nccl_log("all_reduce_perf", ["n0"], 2, [(1024, 20.0)])
    ag = nccl_log("all_gather_perf", ["n0"], 2, [(1024, 22.0)])
    frame = parse_nccl_tests_text(_rank_copy(ar, "[1,0]<stdout>:") + _rank_copy(ag, "[2,0]<stdout>:"))
    assert frame["op"].tolist() == ["all_reduce", "all_gather"]


def test_more_prefixes_than_the_limit_are_refused(monkeypatch):
    monkeypatch.setattr(import_nccl_tests, "MAX_STREAMS", 3)
    text = "".join(f"{rank}: NCCL INFO init\n" for rank in range(4))
    with pytest.raises(InputError, match=r"many.log:4: more than 3 distinct line prefixes \(ranks\)"):
        parse_nccl_tests_text(text, "many.log")


# -- layouts and rccl-tests: what is read, what is refused -------------------------------------------------------
def _rows_only(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.split()[:1] and line.split()[0].isdigit()]


def test_rccl_tests_g_format_wrong_counts_and_validation_off():
    log = read_log(FORMS / "rccl_tests_out_of_place_only_mi300x8.log")
    first = _rows_only(log)[0]
    assert first.endswith("      0")
    off = log.replace(first, first[:-7] + "    N/A")  # -c 0: no validation
    assert len(parse_nccl_tests_text(off, "off.log")) == 6
    failed = log.replace(first, first[:-7] + "  1e+06")  # rccl-tests prints the count with %g
    with pytest.raises(InputError, match="bad.log:18: nccl-tests reported 1e\\+06 wrong elements") as exc:
        parse_nccl_tests_text(failed, "bad.log")
    one_error_line(exc)


def test_starred_errors_and_failed_out_of_bounds_are_refused():
    log = read_log(FORMS / "old_error_columns_no_root_all_reduce_a100x8.log")
    starred = log.replace("27.26  2e-07", "27.26  1e+00*", 1)
    with pytest.raises(InputError, match=r"starred this row's error value 1e\+00\*") as exc:
        parse_nccl_tests_text(starred, "star.log")
    one_error_line(exc)
    failed = log.replace("Out of bounds values : 0 OK", "Out of bounds values : 2 FAILED")
    with pytest.raises(InputError, match="reports 2 out-of-bounds values") as exc:
        parse_nccl_tests_text(failed, "oob.log")
    one_error_line(exc)


def test_in_place_only_table_is_refused():
    log = read_log(FORMS / "rccl_tests_out_of_place_only_mi300x8.log").replace(
        "out-of-place         ", "    in-place          ")  # rccl-tests -O 0: the in-place block alone
    with pytest.raises(InputError, match=r"in-place times only \(rccl-tests -O 0\)") as exc:
        parse_nccl_tests_text(log, "inplace.log")
    one_error_line(exc)


# -- every entry point takes a tag-output log ---------------------------------------------------------------------
def test_cli_import_then_validate_accept_a_tag_output_log(tmp_path, capsys):
    from costmodel.cli.main import main as costmodel_main

    out = tmp_path / "tag.csv"
    assert main([str(TAG_LOG), "--out", str(out)]) == 0
    assert "wrote 7 rows (all_reduce x7)" in capsys.readouterr().out
    # validate takes reference CSVs, not logs: the importer's CSV is one
    assert costmodel_main(["validate", "--reference", str(out), "--profile", "h100-sxm-nvlink", "--no-coverage"]) == 0
    printed = capsys.readouterr().out
    assert re.search(r"^tag\.csv\s+held-out\s+7\s", printed, re.M), printed
    assert re.search(r"^all_reduce\s+h100-sxm-nvlink\s+eager\s+16\s+1073741824\s+4512\.0\s", printed, re.M), printed


def test_dashboard_uploads_accept_a_tag_output_log():
    from dashboard.multi_upload import read_measurement_file
    from dashboard.uploads import parse_upload

    data = TAG_LOG.read_bytes()
    uploaded = parse_upload(TAG_LOG.name, data)
    assert uploaded.label == "upload: mpirun_tag_output_all_reduce_h100x16"
    assert len(pd.read_csv(io.StringIO(uploaded.measurements_csv))) == 7
    frame = read_measurement_file(TAG_LOG.name, data)
    assert frame["median_us"].tolist() == [t for _, t in EXPECTED[TAG_LOG.name][1]]


# -- fuzz: random prefixes / line ends / layouts read as the plain table; garbage is one InputError line -----------
def _prefix_for(style: str, rank: int) -> str:
    return {"none": "", "tag": f"[1,{rank}]<stdout>:", "tag5": f"[prterun-node0-2041@1,{rank}]<stdout>: ",
            "torch": f"[rank{rank}]:", "torch_space": f"[rank{rank}]: ", "default": f"[default{rank}]:",
            "slurm": f"{rank}: ", "slurm_padded": f"{rank:2d}: ", "sky": f"(head, rank={rank}, pid=38{rank:02d}) ",
            "sky_tag": f"(head, rank=0, pid=3808) [1,{rank}]<stdout>:",
            "kubectl_tag": f"[pod/nccl-launcher-x7k2p/mpi-launcher] [1,{rank}]<stdout>:"}[style]


PREFIX_STYLES = ("none", "tag", "tag5", "torch", "torch_space", "default", "slurm", "slurm_padded", "sky", "sky_tag",
                 "kubectl_tag")


def _relayout(text: str, layout: str) -> str:
    """The table of `text` as another nccl-tests layout prints it (the rows' values unchanged)."""
    out = []
    for line in text.splitlines():
        tokens = line.split()
        if line.startswith("#") and "out-of-place" in line and layout == "out_of_place":
            line = "#" + " " * 62 + "out-of-place"
        elif line.startswith("#") and "size" in tokens and "count" in tokens:
            names = tokens[1:]
            if layout == "out_of_place":
                names = names[:9]
            elif layout == "no_wrong":
                names = [n for n in names if n != "#wrong"]
            elif layout == "old_error":
                names = ["error" if n == "#wrong" else n for n in names if n != "root"]
            line = "#  " + "  ".join(f"{n:>7s}" for n in names)
        elif tokens[:2] and tokens[0].isdigit() and tokens[1].isdigit():
            if layout == "out_of_place":
                tokens = tokens[:9]
            elif layout == "no_wrong":
                tokens = tokens[:8] + tokens[9:12]
            elif layout == "old_error":
                tokens = tokens[:4] + tokens[5:8] + ["0e+00"] + tokens[9:12] + ["2e-07"]
            line = "  ".join(f"{t:>10s}" for t in tokens)
        out.append(line)
    return "\n".join(out) + "\n"


NOISE = ("host-1:41:58 [1] NCCL INFO NET/OFI Using aws-ofi-nccl 1.13.2", "Authorization required, but no "
         "authorization protocol specified", "", "#", "host-1:41:58 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P")


@st.composite
def tables(draw):
    """A plain nccl-tests log: all_reduce or all_gather over 1-3 hosts x 1-4 GPUs (2+ ranks), 1-5 sizes."""
    program = draw(st.sampled_from(["all_reduce_perf", "all_gather_perf"]))
    hosts = [f"node-{i}" for i in range(draw(st.integers(1, 3)))]
    per_host = draw(st.integers(2 if len(hosts) == 1 else 1, 4))
    exps = draw(st.lists(st.integers(3, 30), min_size=1, max_size=5, unique=True).map(sorted))
    times = draw(st.lists(st.integers(100, 4_000_000), min_size=len(exps), max_size=len(exps)))
    points = [(2 ** e, t / 100) for e, t in zip(exps, times, strict=True)]
    return nccl_log(program, hosts, per_host, points)


@st.composite
def variants(draw, plain: str):
    """`plain` relaid out, prefixed, with other ranks' noise, line ends, a BOM and trailing blanks, drawn."""
    text = _relayout(plain, draw(st.sampled_from(["standard", "out_of_place", "no_wrong", "old_error"])))
    style = draw(st.sampled_from(PREFIX_STYLES))
    lines = [_prefix_for(style, 0) + line for line in text.splitlines()]
    if style != "none":
        for _ in range(draw(st.integers(0, 4))):  # other ranks' lines anywhere
            at = draw(st.integers(0, len(lines)))
            lines.insert(at, _prefix_for(style, draw(st.integers(1, 15))) + draw(st.sampled_from(NOISE)))
        if draw(st.booleans()):  # a second rank printing the same table, interleaved line by line
            copy = [_prefix_for(style, 1) + line for line in text.splitlines()]
            lines = [x for pair in zip(lines[:len(copy)], copy) for x in pair] + lines[len(copy):]
    ends = draw(st.sampled_from(["\n", "\r\n", "\r", "mixed"]))
    blanks = draw(st.booleans())
    out = "\ufeff" if draw(st.booleans()) else ""
    for line in lines:
        end = draw(st.sampled_from(["\n", "\r\n"])) if ends == "mixed" else ends
        out += line + (draw(st.sampled_from(["", " ", "\t", "  \t "])) if blanks else "") + end
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_prefix_line_end_and_layout_reads_as_the_plain_table(data):
    plain = data.draw(tables())
    expected = values(parse_nccl_tests_text(plain, "plain.log"))
    variant = data.draw(variants(plain))
    assert values(parse_nccl_tests_text(variant, "variant.log")) == expected


GARBAGE = st.one_of(
    st.text(max_size=120),
    st.sampled_from(["[1,0]<stdout>:", "[rank0]:", "(head, rank=0, pid=3808) ", " 0: ", "[pod/x/y] "]).flatmap(
        lambda p: st.integers(0, len(p)).map(lambda n: p[:n])),  # truncated prefixes
    st.tuples(st.sampled_from(["[1,0]<stdout>:", "[1,5]<stderr>:", "3: ", "[rank2]:"]), st.text(max_size=80)).map(
        "".join),
    st.lists(st.sampled_from(["8", "1024", "-1", "float", "sum", "none", "12.5", "N/A", "1e+06", "0e+00*", "#wrong",
                              "time", "size", "count", "x"]), max_size=14).map(" ".join),
    st.just("# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20"),
    st.just("#  Rank  3 Group  0 Pid 9 on other-host device  3 [0000:53:00] NVIDIA H100 80GB HBM3"),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 10_000), GARBAGE), max_size=8), st.integers(0, 10_000),
       st.sampled_from(["\n", "\r\n", "\r"]))
def test_garbage_lines_and_truncated_prefixes_give_rows_or_one_line(inserts, cut, end):
    lines = read_log(TAG_LOG).splitlines()
    for at, garbage in inserts:
        lines.insert(at % (len(lines) + 1), garbage)
    text = end.join(lines)
    text = text[:len(text) * cut // 10_000] if cut < 10_000 else text  # a log cut anywhere
    start = time.perf_counter()
    try:
        frame = parse_nccl_tests_text(text, "fuzz.log")
    except InputError as exc:
        assert "\n" not in str(exc) and "\r" not in str(exc), str(exc)
    else:
        assert (frame["median_us"] > 0).all() and len(frame) <= 7
    assert time.perf_counter() - start < 5.0


def test_adversarial_prefix_lines_are_read_in_linear_time():
    """~4 MB of near-prefixes (unclosed brackets, 200-character parentheses, 4+ stacked labels): seconds, not more."""
    lines = ["(" * 200 + "pid=1 " * 20, "[1,0]<stdo" * 40, "[" * 400, ("(pid=1" + "a" * 190 + ")") * 5,
             "0: " * 200, "[1,0]<stdout>:" * 50]
    text = "\n".join(lines * 2000)
    assert len(text) > 4_000_000
    start = time.perf_counter()
    with pytest.raises(InputError, match="no nccl-tests result rows"):
        parse_nccl_tests_text(text, "adversarial.log")
    assert time.perf_counter() - start < 30.0
