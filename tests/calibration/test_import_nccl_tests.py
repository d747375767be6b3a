"""nccl-tests log importer: logs built here in nccl-tests' own print format (src/common.cu)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.logs.import_nccl_tests import import_logs, main, parse_nccl_tests_text
from costmodel.io.errors import InputError
from costmodel.io.measurements import read_measurements

ROOT = Path(__file__).resolve().parents[2]
TYPE_BYTES = {"float": 4, "bfloat16": 2, "half": 2, "int64": 8, "int8": 1, "uint8": 1, "int32": 4, "uint32": 4,
              "uint64": 8, "double": 8, "f8e4m3": 1, "f8e5m2": 1}
COLUMN_HEADER = (
    "#                                                              out-of-place                       in-place\n"
    "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  "
    "#wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)\n"
)


def _time_str(t_us: float) -> str:
    """nccl-tests' %7.0f / %7.1f / %7.2f choice."""
    return f"{t_us:7.0f}" if t_us >= 10000 else (f"{t_us:7.1f}" if t_us >= 100 else f"{t_us:7.2f}")


def nccl_log(program: str, hosts: list[str], per_host: int, points: list[tuple[int, float]], *, graph: int = 0,
             iters: int = 20, type_name: str = "float", gpu: str = "NVIDIA H200", marker: bool = True,
             mpi: bool = True, wrong: int = 0, redop: str | None = None) -> str:
    """A realistic nccl-tests stdout. `points` = [(bytes per rank, out-of-place time us)].

    all_gather / gather print size = bytes per rank * nranks and count = elements per rank;
    all_reduce / broadcast print size = count * type size.
    """
    nranks = len(hosts) * per_host
    elem = TYPE_BYTES[type_name]
    n_gpus = 1 if mpi else per_host
    lines = ["# nccl-tests version 2.17.6 nccl-headers=22807 nccl-library=22807"]
    if marker:
        lines.append(f"# Collective test starting: {program}")
    lines.append(f"# nThread 1 nGpus {n_gpus} minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 "
                 f"iters: {iters} agg iters: 1 validation: 1 graph: {graph}")
    lines += ["#", "# Using devices"]
    rank = 0
    for h, host in enumerate(hosts):
        for d in range(per_host):
            lines.append(f"#  Rank {rank:2d} Group  0 Pid {1000 + rank:6d} on {host:>10s} device {d:2d} "
                         f"[0000:{16 * d + h:02x}:00] {gpu}")
            rank += 1
    lines.append("#")
    text = "\n".join(lines) + "\n" + COLUMN_HEADER
    default_redop, root = {"all_gather_perf": ("none", -1), "all_reduce_perf": ("sum", -1),
                           "broadcast_perf": ("none", 0), "gather_perf": ("none", 0),
                           "reduce_scatter_perf": ("sum", -1), "alltoall_perf": ("none", -1)}[program]
    redop = redop or default_redop
    for per_rank, t_us in points:
        gathered = program in ("all_gather_perf", "gather_perf", "reduce_scatter_perf")
        size = per_rank * nranks if gathered else per_rank
        count = per_rank // elem
        algbw = size / t_us / 1e3
        text += (f"{size:12d}  {count:12d}  {type_name:>8s}  {redop:>6s}  {root:6d}  {_time_str(t_us)}  "
                 f"{algbw:6.2f}  {algbw:6.2f}  {wrong:5d}  {_time_str(t_us * 0.97)}  {algbw:6.2f}  {algbw:6.2f}  "
                 f"{0:5d}\n")
    text += "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.5\n#\n"
    text += f"# Collective test concluded: {program}\n"
    return text


AG_POINTS = [(1024, 12.5), (131072, 21.75), (16777216, 250.25), (134217728, 20346.0)]


def test_all_gather_8_ranks_eager_and_graph():
    for graph, mode in ((0, "eager"), (1, "graph")):
        frame = parse_nccl_tests_text(nccl_log("all_gather_perf", ["node-a"], 8, AG_POINTS, graph=graph), "ag.log")
        assert list(frame["op"].unique()) == ["all_gather"]
        # size column = per-rank bytes * 8; the importer divides it back
        assert frame["bytes_per_rank"].tolist() == [b for b, _ in AG_POINTS]
        assert frame["median_us"].tolist() == pytest.approx([12.5, 21.75, 250.2, 20346.0], abs=0.051)
        for col in ("p10_us", "p90_us", "min_us", "max_us"):
            assert (frame[col] == frame["median_us"]).all()
        assert set(frame["mode"]) == {mode}
        assert set(frame["world_size"]) == {8} and set(frame["nodes"]) == {1}
        assert set(frame["gpu"]) == {"NVIDIA H200"} and set(frame["dtype"]) == {"fp32"}
        assert set(frame["iters"]) == {20 * max(graph, 1)}
        assert set(frame["label"]) == {"nccl-tests mean"}
        assert frame["source"].iloc[0].startswith("ag.log:")


def test_all_gather_two_nodes_single_process_per_gpu_counts_hosts():
    frame = parse_nccl_tests_text(nccl_log("all_gather_perf", ["node-a", "node-b"], 8, AG_POINTS[:2]))
    assert set(frame["world_size"]) == {16} and set(frame["nodes"]) == {2}
    assert frame["bytes_per_rank"].tolist() == [1024, 131072]


def test_one_process_many_gpus_header():
    frame = parse_nccl_tests_text(nccl_log("all_gather_perf", ["solo"], 4, AG_POINTS[:1], mpi=False))
    assert frame["world_size"].tolist() == [4] and frame["bytes_per_rank"].tolist() == [1024]


def test_all_reduce_and_broadcast_size_is_per_rank_bytes():
    points = [(8, 10.12), (1048576, 60.8), (16777216, 196.0)]
    ar = parse_nccl_tests_text(nccl_log("all_reduce_perf", ["n"], 4, points, type_name="bfloat16"))
    assert ar["op"].unique().tolist() == ["all_reduce"] and set(ar["dtype"]) == {"bf16"}
    assert ar["bytes_per_rank"].tolist() == [8, 1048576, 16777216]
    assert ar["median_us"].tolist() == pytest.approx([10.12, 60.8, 196.0], abs=0.051)
    assert set(ar["label"]) == {"nccl-tests mean"}
    mx = parse_nccl_tests_text(nccl_log("all_reduce_perf", ["n"], 4, points[:1], type_name="int64", redop="max"))
    assert mx["label"].tolist() == ["nccl-tests mean (redop max)"] and mx["dtype"].tolist() == ["int64"]
    bc = parse_nccl_tests_text(nccl_log("broadcast_perf", ["n"], 2, points[1:], graph=1))
    assert bc["op"].unique().tolist() == ["broadcast"] and set(bc["mode"]) == {"graph"}
    assert bc["bytes_per_rank"].tolist() == [1048576, 16777216] and set(bc["world_size"]) == {2}


def test_gather_size_is_total_gathered_bytes():
    frame = parse_nccl_tests_text(nccl_log("gather_perf", ["n"], 8, [(4096, 30.0), (1048576, 90.5)]))
    assert frame["op"].unique().tolist() == ["gather"]
    assert frame["bytes_per_rank"].tolist() == [4096, 1048576]


def test_several_runs_in_one_log_and_old_logs_without_marker():
    text = (nccl_log("all_reduce_perf", ["n"], 8, [(64, 11.0)])
            + nccl_log("all_gather_perf", ["n"], 8, [(64, 12.0)]))
    frame = parse_nccl_tests_text(text)
    assert frame[["op", "bytes_per_rank", "median_us"]].values.tolist() == [["all_reduce", 64, 11.0],
                                                                          ["all_gather", 64, 12.0]]
    # no "Collective test starting" line: the echoed command line names the program
    old = "$ ./build/gather_perf -b 8 -e 1M -f 2 -g 2\n" + nccl_log("gather_perf", ["n"], 2, [(512, 9.0)],
                                                                    marker=False)
    frame = parse_nccl_tests_text(old)
    assert frame["op"].tolist() == ["gather"] and frame["bytes_per_rank"].tolist() == [512]


def test_legacy_layout_without_root_column_uses_the_header():
    text = (nccl_log("all_reduce_perf", ["n"], 2, [], marker=True).split("#       size")[0]
            + "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  "
              "error\n"
            + "     1048576        262144   float     sum    100.0   10.49   18.35  0e+00    101.0   10.38   18.17  "
              "0e+00\n")
    frame = parse_nccl_tests_text(text)
    assert frame["median_us"].tolist() == [100.0] and frame["bytes_per_rank"].tolist() == [1048576]


def test_cli_concatenates_logs_and_output_validates(tmp_path):
    a = tmp_path / "ag.log"
    a.write_text(nccl_log("all_gather_perf", ["node-a"], 8, AG_POINTS, graph=1))
    b = tmp_path / "run-without-marker_all_reduce_perf.log"  # the file name names the program
    b.write_text(nccl_log("all_reduce_perf", ["node-a"], 8, [(8, 10.0), (64, 10.5)], marker=False))
    out = tmp_path / "out" / "nccl.csv"
    assert main([str(a), str(b), "--out", str(out)]) == 0
    frame = read_measurements(out)
    assert len(frame) == len(AG_POINTS) + 2
    assert frame["op"].tolist() == ["all_gather"] * len(AG_POINTS) + ["all_reduce"] * 2
    assert frame.loc[frame["op"] == "all_gather", "bytes_per_rank"].tolist() == [b for b, _ in AG_POINTS]
    pd.testing.assert_frame_equal(frame[["op", "bytes_per_rank"]],
                                  import_logs([a, b])[["op", "bytes_per_rank"]], check_dtype=False)
    # the real CLI as a subprocess, and no torch import in the importer
    code = ("import sys, calibration.logs.import_nccl_tests as m; assert 'torch' not in sys.modules; "
            f"sys.exit(m.main([{str(a)!r}, '--out', {str(tmp_path / 'c.csv')!r}]))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert read_measurements(tmp_path / "c.csv")["mode"].unique().tolist() == ["graph"]


@pytest.mark.parametrize("text, fragment", [
    (nccl_log("all_gather_perf", ["n"], 8, AG_POINTS[:1]).replace("  12.50  ", "  abc  ", 1),
     "bad.log:18: out-of-place time 'abc'"),
    (nccl_log("all_gather_perf", ["n"], 8, AG_POINTS[:1], wrong=3), "3 wrong elements"),
    (nccl_log("all_gather_perf", ["n"], 8, AG_POINTS[:1]).replace("all_gather_perf", "sendrecv_perf"),
     "not supported"),
    (nccl_log("all_gather_perf", ["n"], 8, AG_POINTS[:1], type_name="half").replace("    half", " complex"),
     "data type 'complex' is not an nccl-tests type"),
    ("hello\nthis is not a log\n", "no nccl-tests result rows"),
    ("", "no nccl-tests result rows"),
])
def test_malformed_logs_fail_with_one_line_naming_the_file(tmp_path, capsys, text, fragment):
    log = tmp_path / "bad.log"
    log.write_text(text)
    with pytest.raises(InputError, match="bad.log"):
        parse_nccl_tests_text(text, source=str(log))
    assert main([str(log), "--out", str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and fragment in err, err
    assert not (tmp_path / "x.csv").exists()


def test_cli_missing_file_and_missing_out_exit_2(tmp_path, capsys):
    assert main([str(tmp_path / "nope.log"), "--out", str(tmp_path / "x.csv")]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'nope.log'}: no such file"
    assert main([str(tmp_path / "nope.log")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out" in err


# -- reference tables from a manifest (data/reference/nccl-tests) -------------------------------------------------
MANIFEST_HEADER = "file,table,profile,nccl_algo,launch,software,source,status\n"


def test_manifest_builds_reference_rows_with_provenance_and_host_floor(tmp_path):
    from calibration.logs.import_nccl_tests import reference_from_manifest

    points = [(8, 30.0), (1024, 32.0), (32768, 34.0), (65536, 40.0), (2**20, 80.0)]
    (tmp_path / "ar.log").write_text(nccl_log("all_reduce_perf", ["h1"], 8, points, marker=True))
    (tmp_path / "rs.log").write_text(nccl_log("reduce_scatter_perf", ["h1"], 8, points[:2]))
    (tmp_path / "m.csv").write_text(
        MANIFEST_HEADER + "ar.log,t-ar,h100-sxm-nvlink,ring,single process -g 8,NCCL 2.26.2,repo @ abc,priced\n"
        + "rs.log,t-rs,,default,x,y,z,not priced: no reduce_scatter model\n")
    rows = reference_from_manifest(tmp_path / "m.csv")
    assert list(rows["id"]) == [f"t-ar-{i}" for i in range(5)]
    assert set(rows["table"]) == {"t-ar"} and set(rows["profile"]) == {"h100-sxm-nvlink"}
    assert set(rows["nccl_algo"]) == {"ring"} and not rows["used_in_profile"].any()
    # host floor = median time of the rows below 64 KiB per rank: 30, 32, 34 -> 32
    assert set(rows["host_floor_us"]) == {32.0}
    assert rows["source"].iloc[0].startswith("repo @ abc, ar.log line ")
    assert list(rows["median_us"]) == [t for _, t in points]
    assert "single process -g 8" in rows["method"].iloc[0]
    # every listed log must import, priced or not: an unreadable one is refused naming it
    (tmp_path / "rs.log").write_text("whatever: not a log")
    with pytest.raises(InputError, match="rs.log: no nccl-tests result rows"):
        reference_from_manifest(tmp_path / "m.csv")


def test_manifest_errors_are_one_line(tmp_path):
    from calibration.logs.import_nccl_tests import reference_from_manifest

    (tmp_path / "m.csv").write_text("file,table\nx.log,t\n")
    with pytest.raises(InputError, match="missing column"):
        reference_from_manifest(tmp_path / "m.csv")
    (tmp_path / "m.csv").write_text(MANIFEST_HEADER + "x.log,t,,default,a,b,c,priced\n")
    with pytest.raises(InputError, match="names no profile"):
        reference_from_manifest(tmp_path / "m.csv")
    (tmp_path / "m.csv").write_text(MANIFEST_HEADER + "x.log,t,p,default,a,b,c,priced\n")
    with pytest.raises(InputError, match="no such file"):
        reference_from_manifest(tmp_path / "m.csv")
    assert main(["--manifest", str(tmp_path / "m.csv"), "x.log", "--out", str(tmp_path / "o.csv")]) == 2


def test_bundled_reference_table_is_the_manifest_output(tmp_path):
    # data/reference/nccl-tests.csv is exactly what the manifest builds from the bundled logs
    out = tmp_path / "ref.csv"
    assert main(["--manifest", str(ROOT / "data/reference/nccl-tests/MANIFEST.csv"), "--out", str(out)]) == 0
    built = pd.read_csv(out)
    bundled = pd.read_csv(ROOT / "data/reference/nccl-tests.csv")
    pd.testing.assert_frame_equal(built, bundled)


# -- issue 10: every data type, -d all, layouts, launch modes, multi-node, refusals -------------------------------
from calibration.logs.import_nccl_tests import TYPE_NAMES, Hints  # noqa: E402

REF_DIR = ROOT / "data/reference/nccl-tests"


@pytest.mark.parametrize("type_name, dtype", [("int8", "int8"), ("uint8", "uint8"), ("int32", "int32"),
                                              ("uint32", "uint32"), ("int64", "int64"), ("uint64", "uint64"),
                                              ("half", "fp16"), ("float", "fp32"), ("double", "fp64"),
                                              ("bfloat16", "bf16"), ("f8e4m3", "fp8_e4m3"), ("f8e5m2", "fp8_e5m2")])
def test_every_nccl_tests_data_type_imports_with_its_dtype(type_name, dtype):
    points = [(64, 11.0), (8192, 12.5)]
    frame = parse_nccl_tests_text(nccl_log("all_reduce_perf", ["n"], 8, points, type_name=type_name))
    assert frame["dtype"].tolist() == [dtype, dtype] and frame["bytes_per_rank"].tolist() == [64, 8192]
    assert TYPE_NAMES[type_name] == dtype


def _rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_d_all_log_keeps_each_type_apart():
    # nccl-tests -d all prints one whole size sweep per type inside one run (one header)
    head = nccl_log("all_gather_perf", ["n"], 4, [], type_name="float").split("# Out of bounds")[0]
    body = "".join("\n".join(_rows(nccl_log("all_gather_perf", ["n"], 4, [(1024, 10.0), (65536, 20.0)],
                                              type_name=t))) + "\n" for t in ("float", "half", "double", "int8"))
    frame = parse_nccl_tests_text(head + body)
    assert frame["dtype"].tolist() == ["fp32", "fp32", "fp16", "fp16", "fp64", "fp64", "int8", "int8"]
    assert frame.groupby("dtype")["bytes_per_rank"].apply(list).to_dict() == {
        d: [1024, 65536] for d in ("fp32", "fp16", "fp64", "int8")}


def test_interleaved_runs_are_refused_naming_the_lines():
    a = _rows(nccl_log("all_reduce_perf", ["n"], 8, [(8, 10.0), (1024, 11.0), (65536, 20.0)]))
    b = _rows(nccl_log("all_reduce_perf", ["n"], 8, [(8, 30.0), (1024, 31.0), (65536, 40.0)]))
    head = nccl_log("all_reduce_perf", ["n"], 8, []).split("# Out of bounds")[0]
    mixed = head + "\n".join(x for pair in zip(a, b, strict=True) for x in pair) + "\n"
    first = head.count("\n") + 1
    with pytest.raises(InputError, match=rf"two runs interleaved in one log \(lines {first} and {first + 1}\)"):
        parse_nccl_tests_text(mixed, "mixed.log")


def test_ranks_on_two_gpu_models_are_refused_as_mixed():
    log = nccl_log("all_gather_perf", ["n"], 2, AG_POINTS[:1]).replace(
        "device  1 [0000:10:00] NVIDIA H200", "device  1 [0000:10:00] NVIDIA A100-SXM4-80GB")
    with pytest.raises(InputError, match="2 GPU models .*mixed GPUs"):
        parse_nccl_tests_text(log, "two.log")


def test_trimmed_table_inside_markdown_yaml_and_shell_text():
    plain = nccl_log("all_reduce_perf", ["node-a", "node-b"], 4, [(8, 20.0), (1048576, 80.0)])
    # the author's trim: out-of-place columns only, no #wrong; then pasted into a markdown page without the '#'
    trimmed = []
    for line in plain.splitlines():
        tokens = line.split()
        if line.startswith("#       size"):
            line = "#       size         count      type   redop    root     time   algbw   busbw"
        elif tokens and tokens[0].isdigit():
            line = "  ".join(tokens[:8])
        trimmed.append("    " + line.lstrip("#"))
    page = ("## Results\n\n```yaml\ntype: task\nnodes: 2\ncommands:\n  - mpirun -n 8 all_reduce_perf -b 8 -e 1M\n"
            "```\n\n```shell\n$ dstack apply -f task.yml\n" + "\n".join(trimmed) + "\n```\nAvg bus bandwidth: 1.0\n")
    frame = parse_nccl_tests_text(page, "page.md")
    ref = parse_nccl_tests_text(plain, "plain.log")
    cols = ["op", "world_size", "nodes", "bytes_per_rank", "median_us", "gpu", "launch"]
    pd.testing.assert_frame_equal(frame[cols], ref[cols])
    assert set(frame["nodes"]) == {2} and set(frame["world_size"]) == {8}


def test_launch_mode_single_process_vs_one_process_per_gpu():
    single = parse_nccl_tests_text(nccl_log("all_reduce_perf", ["n"], 8, [(8, 35.0)], mpi=False))
    per_gpu = parse_nccl_tests_text(nccl_log("all_reduce_perf", ["n"], 8, [(8, 17.0)], mpi=True))
    assert single["launch"].tolist() == ["single-process"] and per_gpu["launch"].tolist() == ["process-per-gpu"]
    threads = nccl_log("all_reduce_perf", ["n"], 8, [(8, 20.0)], mpi=False).replace("nThread 1 nGpus 8",
                                                                                     "nThread 8 nGpus 1")
    assert parse_nccl_tests_text(threads)["launch"].tolist() == ["multi-thread"]


def test_hints_fill_what_the_log_leaves_out_and_must_agree_with_it(tmp_path, capsys):
    rows_only = "\n".join(_rows(nccl_log("all_reduce_perf", ["n"], 8, [(8, 35.0), (1024, 36.0)])))
    mpi_log = "mpirun -np 16 ./all_reduce_perf -b 8 -e 1K -g 1\n" + rows_only + "\n"
    with pytest.raises(InputError, match=r"number of processes \(mpirun -np\) is not in the log; pass --world-size"):
        parse_nccl_tests_text("# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5 "
                              "iters: 20 agg iters: 1 validation: 1 graph: 0\n" + mpi_log, "mpi.log")
    frame = parse_nccl_tests_text(mpi_log, "mpi.log", Hints(world_size=16, nodes=2, gpu="NVIDIA B200"))
    assert set(frame["world_size"]) == {16} and set(frame["nodes"]) == {2} and set(frame["gpu"]) == {"NVIDIA B200"}
    assert set(frame["launch"]) == {"process-per-gpu"}
    with pytest.raises(InputError, match="Rank lines list 8 ranks but --world-size says 16"):
        parse_nccl_tests_text(nccl_log("all_reduce_perf", ["n"], 8, [(8, 35.0)]), "r.log", Hints(world_size=16))
    with pytest.raises(InputError, match="all_reduce run but --op says all_gather"):
        parse_nccl_tests_text(nccl_log("all_reduce_perf", ["n"], 8, [(8, 35.0)]), "r.log", Hints(op="all_gather"))
    log = tmp_path / "rows.log"
    log.write_text(rows_only + "\n")
    assert main([str(log), "--out", str(tmp_path / "o.csv")]) == 2
    assert "pass --op" in capsys.readouterr().err
    assert main([str(log), "--op", "all_reduce", "--world-size", "8", "--out", str(tmp_path / "o.csv")]) == 0
    assert read_measurements(tmp_path / "o.csv")["world_size"].tolist() == [8, 8]
    assert main([str(log), "--op", "all_reduce", "--world-size", "0", "--out", str(tmp_path / "o.csv")]) == 2
    assert "--world-size: expected an integer" in capsys.readouterr().err


def test_reduce_scatter_and_alltoall_import_for_validation_only(tmp_path):
    rs = nccl_log("reduce_scatter_perf", ["n"], 8, [(1024, 15.0)])
    with pytest.raises(InputError, match="reduce_scatter is imported for validation only"):
        parse_nccl_tests_text(rs, "rs.log")
    frame = parse_nccl_tests_text(rs, "rs.log", validation_ops=True)
    assert frame["op"].tolist() == ["reduce_scatter"] and frame["bytes_per_rank"].tolist() == [1024]
    a2a = parse_nccl_tests_text(nccl_log("alltoall_perf", ["n"], 8, [(4096, 25.0)]), "a.log", validation_ops=True)
    assert a2a["op"].tolist() == ["alltoall"]
    # a mixed log keeps the priced op by default
    both = parse_nccl_tests_text(rs + nccl_log("all_gather_perf", ["n"], 8, AG_POINTS[:1]), "both.log")
    assert both["op"].tolist() == ["all_gather"]


# what each published log says without help: rows, or the one-line reason it is refused
PUBLISHED = {
    "a100x8_all_reduce_dkh-doc.log": (25, 8, 1, "single-process"),
    "h100x2_all_reduce_digitalocean-guide.log": (21, 2, 1, "single-process"),
    "h100x4_all_gather_waynehacking8-quiet.log": (28, 4, 1, "single-process"),  # 8-32 B: 0 floats per rank, dropped
    "h100x4_all_reduce_waynehacking8-quiet.log": (31, 4, 1, "single-process"),
    "h100x8_all_gather_together-ring.log": (27, 8, 1, "single-process"),
    "h100x8_all_gather_together-nvls.log": (27, 8, 1, "single-process"),
    "h100x8_all_reduce_together-ring.log": (31, 8, 1, "single-process"),
    "h100x8_all_reduce_together-nvls.log": (31, 8, 1, "single-process"),
    "h100x8_reduce_scatter_together-nvls.log": "reduce_scatter is imported for validation only",
    "b200x8_all_reduce_gke-a4-readme-edited.log": "cannot tell which nccl-tests program",
    "gb200x72_all_reduce_coreweave-pr43.log": "cannot tell which nccl-tests program",
    "multinode/b200x16_all_reduce_dstack-lambda-2node.log": r"number of processes \(mpirun -np\) is not in the log",
    "multinode/b200x16_all_reduce_dstack-gcp-a4-2node.log": "cannot tell which nccl-tests program",
    "multinode/h100x16_all_gather_dstack-gcp-a3high-tcpx-2node.log": "cannot tell which nccl-tests program",
    "multinode/h100x16_all_gather_dstack-gcp-a3mega-tcpxo-2node.log": r"number of processes \(mpirun -np\)",
    "multinode/h100x16_all_reduce_dstack-nebius-2node.log": r"number of processes \(mpirun -np\)",
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_every_published_log_imports_or_is_refused_with_its_reason(name):
    from calibration.logs.import_nccl_tests import read_log

    text = read_log(REF_DIR / name)
    expect = PUBLISHED[name]
    if isinstance(expect, str):
        with pytest.raises(InputError, match=expect) as exc:
            parse_nccl_tests_text(text, name)
        assert "\n" not in str(exc.value) and str(exc.value).startswith(name)
    else:
        n, ws, nodes, launch = expect
        frame = parse_nccl_tests_text(text, name)
        assert (len(frame), set(frame["world_size"]), set(frame["nodes"]), set(frame["launch"])) == (
            n, {ws}, {nodes}, {launch})


def test_manifest_lists_every_bundled_log_and_each_imports_with_its_hints():
    from calibration.logs.import_nccl_tests import _manifest_hints, read_log

    manifest = pd.read_csv(REF_DIR / "MANIFEST.csv", dtype=str, keep_default_na=False)
    bundled = {str(p.relative_to(REF_DIR)) for p in REF_DIR.rglob("*.log")}
    assert set(manifest["file"]) == bundled == set(PUBLISHED)
    for _, entry in manifest.iterrows():
        frame = parse_nccl_tests_text(read_log(REF_DIR / entry["file"]), entry["file"],
                                      _manifest_hints(entry, REF_DIR / "MANIFEST.csv"), validation_ops=True)
        assert len(frame) >= 5
        if entry["file"].startswith("multinode/"):
            assert set(frame["nodes"]) == {2} and set(frame["world_size"]) == {16}
    shared = ROOT.parent / "shared/measurements/published-nccl-tests"
    if shared.is_dir():  # the bundled copies are byte copies of the shared folder's logs
        for p in shared.rglob("*.log"):
            assert (REF_DIR / p.relative_to(shared)).read_bytes() == p.read_bytes()


def test_incomplete_rank_lines_are_refused_unless_the_rank_count_is_given():
    text = (REF_DIR / "gb200x72_all_reduce_coreweave-pr43.log").read_text()
    with pytest.raises(InputError, match=r"Rank lines are incomplete \(ranks 71..71 listed, 1 of them\)"):
        parse_nccl_tests_text(text, "gb.log", Hints(op="all_reduce"))
    frame = parse_nccl_tests_text(text, "gb.log", Hints(op="all_reduce", world_size=72, nodes=1))
    assert set(frame["world_size"]) == {72} and frame["bytes_per_rank"].tolist()[0] == 536870912


def test_nodes_hint_groups_hosts_into_nvlink_domains():
    # a GB200 NVL72 run prints 18 hosts (trays) but is one NVLink domain: --nodes 1 says so
    log = nccl_log("all_reduce_perf", [f"tray{i}" for i in range(18)], 4, [(1 << 20, 50.0)])
    assert parse_nccl_tests_text(log, "nvl72.log")["nodes"].tolist() == [18]
    assert parse_nccl_tests_text(log, "nvl72.log", Hints(nodes=1))["nodes"].tolist() == [1]
    assert parse_nccl_tests_text(log, "nvl72.log", Hints(nodes=2))["world_size"].tolist() == [72]
    with pytest.raises(InputError, match="name 18 host.s. but --nodes says 4"):
        parse_nccl_tests_text(log, "nvl72.log", Hints(nodes=4))
    with pytest.raises(InputError, match="name 18 host.s. but --nodes says 36"):
        parse_nccl_tests_text(log, "nvl72.log", Hints(nodes=36))


# -- number fields of a log: a result or one line, never a traceback (issue 22) --------------------------------
_HEADER = ("# nThread 1 nGpus 8 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
           "validation: 1 graph: 0\n"
           "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
           "busbw #wrong\n")


def _row(size: str, count: str = "2", time_us: str = "10.0", wrong: str = "0") -> str:
    return f"{size} {count} float sum -1 {time_us} 0.00 0.00 {wrong} {time_us} 0.00 0.00 {wrong}\n"


@pytest.mark.parametrize("row, needle", [
    (_row("9" * 5000), r"size has 5000 digits \(at most 18\)"),
    (_row("1024", wrong="9" * 40), "#wrong has 40 digits"),
    (_row("1024", time_us="1e999"), "must be finite and > 0"),
    (_row("1024", time_us="nan"), "must be finite and > 0"),
])
def test_absurd_numbers_in_a_log_are_one_line_errors(row, needle):
    with pytest.raises(InputError, match=needle):
        parse_nccl_tests_text(_HEADER + row, "run.log", Hints(op="all_reduce"))


def test_absurd_numbers_in_the_parameter_line_are_one_line_errors():
    text = _HEADER.replace("iters: 20", "iters: " + "7" * 5000) + _row("1024")
    with pytest.raises(InputError, match="iters has 5000 digits"):
        parse_nccl_tests_text(text, "run.log", Hints(op="all_reduce"))


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(["size", "count", "time", "wrong"]),
       st.one_of(st.integers(-10**30, 10**60).map(str), st.floats(allow_nan=True).map(repr),
                 st.text(alphabet="0123456789.eE+-", min_size=1, max_size=30),
                 st.integers(1, 6000).map(lambda n: "9" * n)))
def test_any_number_token_gives_rows_or_one_line(field, token):
    fields = {"size": "1024", "count": "256", "time_us": "10.0", "wrong": "0"}
    fields["time_us" if field == "time" else field] = token
    try:
        rows = parse_nccl_tests_text(_HEADER + _row(**fields), "run.log", Hints(op="all_reduce"))
    except InputError as exc:
        assert "\n" not in str(exc)
    else:
        assert (rows["median_us"] > 0).all()
