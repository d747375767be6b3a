"""`calibration.kernels`: the quick CPU run yields a schema-valid CSV with every kernel op; checks and resume work."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from calibration.bench import kernels
from costmodel.io.measurements import FUSED_KERNEL_OPS, KERNEL_OPS, TOPK_KERNEL_OPS, read_measurements

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def keep_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_quick_cpu_run_writes_every_kernel_op(tmp_path):
    out = tmp_path / "k"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "calibration.kernels", "--quick", "--device", "cpu", "--out",
                           str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    frame = read_measurements(out / "kernels.csv")
    assert set(frame["op"]) == set(KERNEL_OPS) | set(TOPK_KERNEL_OPS)
    topk = frame[frame["op"].isin(list(TOPK_KERNEL_OPS))]
    assert set(topk["k"]) == set(kernels.QUICK_TOP_KS) and (frame.loc[~frame.index.isin(topk.index), "k"] == 1).all()
    merge = topk[topk["op"] == "topk_merge"]
    assert (merge["cols"] == merge["world_size"] * merge["k"]).all() and set(merge["dtype"]) == {"fp32"}
    assert set(frame["device"]) == {"cpu"} and set(frame["gpu"]) == {"cpu"} and set(frame["mode"]) == {"eager"}
    assert set(frame["backend"]) == {"none"} and (frame["bytes_per_rank"] == 0).all() and (frame["nodes"] == 1).all()
    assert (frame["median_us"] > 0).all() and (frame["min_us"] <= frame["median_us"]).all()
    assert (frame["median_us"] <= frame["max_us"]).all() and (frame["iters"] >= 5).all()
    per_p = frame[frame["op"].isin(["relayout_copy", "relayout_argmax", "chunked_argmax", "pair_reduce", "topk_merge"])]
    assert set(per_p["world_size"]) == set(kernels.QUICK_WORLD_SIZES)
    assert set(frame.loc[~frame.index.isin(per_p.index), "world_size"]) == {1}
    assert (frame.loc[frame["op"].isin(["pair_reduce", "key_unpack", "d2t_lookup"]), "cols"] == 0).all()
    assert set(frame.loc[frame["op"] == "d2t_scatter", "cols"]) == {c for c in kernels.QUICK_VOCAB_COLS if c > 32000}
    assert set(frame.loc[frame["op"] == "pair_reduce", "dtype"]) == {"fp32"}
    assert set(frame.loc[frame["op"] == "key_unpack", "dtype"]) == {"int64"}
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["tool"] == "calibration.kernels" and prov["status"] == "ok"
    assert prov["points_measured"] == len(frame)


def test_topk_rows_resume_per_k_and_fit_into_per_k_tables(tmp_path, keep_threads):
    from calibration.fitting.fit import fit_measurements
    from costmodel.profiles.parse import profile_from_dict

    argv = ["--device", "cpu", "--out", str(tmp_path), "--ops", "argmax,local_topk,topk_merge", "--rows", "1,4",
            "--cols", "1000,4000", "--world-sizes", "2", "--dtypes", "fp32", "--point-seconds", "0.01"]
    assert kernels.main([*argv, "--top-ks", "2"]) == 0
    first = read_measurements(tmp_path / "kernels.csv")
    assert kernels.main([*argv, "--top-ks", "2,8", "--resume"]) == 0  # k = 8 is new: measured, k = 2 is not again
    frame = read_measurements(tmp_path / "kernels.csv")
    assert len(frame) - len(first) == len(first[first["op"] != "argmax"])
    assert sorted(frame.loc[frame["op"] == "topk_merge", "cols"]) == [4, 4, 16, 16]
    profile = fit_measurements(frame, name="t", bootstrap=0)
    tables = {(t["op"], t.get("k")): t for t in profile["kernels"]["tables"]}
    assert {("local_topk", 2), ("local_topk", 8), ("topk_merge", 2), ("topk_merge", 8), ("argmax", None)} <= set(tables)
    assert tables[("local_topk", 8)]["cols"] == [1000, 4000] and tables[("topk_merge", 8)]["world_size"] == 2
    loaded = profile_from_dict(profile)
    assert {(t.op, t.k) for t in loaded.kernel_tables if t.op == "local_topk"} == {("local_topk", 2), ("local_topk", 8)}


def test_resume_skips_measured_points_and_refuses_to_overwrite(tmp_path, capsys, keep_threads):
    argv = ["--device", "cpu", "--out", str(tmp_path), "--ops", "argmax,key_unpack", "--rows", "1,2",
            "--cols", "1000", "--dtypes", "fp32", "--point-seconds", "0.01"]
    assert kernels.main(argv) == 0
    first = (tmp_path / "kernels.csv").read_text()
    assert len(first.strip().splitlines()) == 1 + 4  # argmax x 2 rows + key_unpack x 2 rows
    assert kernels.main(argv) == 2  # no --resume: refuses to append
    assert "pass --resume" in capsys.readouterr().err
    assert kernels.main([*argv, "--resume"]) == 0
    assert (tmp_path / "kernels.csv").read_text() == first  # nothing re-measured
    wider = [("1,2,4" if a == "1,2" else a) for a in argv]
    assert kernels.main([*wider, "--resume"]) == 0
    frame = read_measurements(tmp_path / "kernels.csv")
    assert sorted(frame.loc[frame["op"] == "argmax", "rows"]) == [1, 2, 4]
    assert len(frame) == 6
    prov = json.loads((tmp_path / "provenance.json").read_text())
    assert len(prov["previous_runs"]) == 2 and prov["points_measured"] == 2


def test_a_wrong_building_block_fails_its_check_and_is_not_timed(tmp_path, monkeypatch, capsys, keep_threads):
    monkeypatch.setattr(kernels.ref, "relayout", lambda g, p: g.reshape(g.shape[0] // p, -1))  # no movedim
    argv = ["--device", "cpu", "--out", str(tmp_path), "--ops", "relayout_copy,argmax", "--rows", "2",
            "--cols", "1000", "--world-sizes", "2", "--dtypes", "fp32", "--point-seconds", "0.01"]
    assert kernels.main(argv) == 1
    assert "relayout_copy fp32: correctness check failed" in capsys.readouterr().err
    frame = read_measurements(tmp_path / "kernels.csv")
    assert set(frame["op"]) == {"argmax"}


@pytest.mark.parametrize("op", sorted(KERNEL_OPS))
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_every_op_passes_its_check(op, dtype):
    grid = kernels.Grid((1,), (1000,), (40000,), (dtype,), ("eager",), (4,), (op,))
    spec = kernels.OPS[op]
    p = 4 if spec.per_p else 1
    kernels.check_op(op, spec.data_dtype or dtype, p, grid.cols_for(op, p)[0], torch.device("cpu"))


def test_grid_keeps_real_vocab_sizes_and_labels_logit_free_ops_once():
    grid = kernels.Grid((1,), kernels.SHARD_COLS, kernels.VOCAB_COLS, ("bf16", "fp32"), ("eager",),
                        (2, 4, 8), tuple(kernels.OPS))
    points = grid.points()
    relayout = {(p.world_size, p.cols) for p in points if p.op == "relayout_copy"}
    assert all(p * s <= kernels.MAX_PADDED_VOCAB for p, s in relayout)
    assert (2, 131104) in relayout and (8, 64128) not in relayout
    assert len([p for p in points if p.op == "key_unpack"]) == 1
    assert {p.dtype for p in points if p.op == "pair_reduce"} == {"fp32"}
    assert {p.dtype for p in points if p.op == "argmax"} == {"bf16", "fp32"}


@pytest.mark.parametrize("flags,message", [(["--modes", "graph"], "needs --device cuda"),
                                           (["--point-seconds", "0"], "--point-seconds"),
                                           (["--threads", "0"], "--threads")])
def test_bad_flags_exit_2_with_one_line(tmp_path, capsys, flags, message, keep_threads):
    assert kernels.main(["--device", "cpu", "--out", str(tmp_path), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err
    assert not (tmp_path / "kernels.csv").exists()


def test_fused_ops_on_cpu_need_allow_interpreter(tmp_path, capsys, keep_threads):
    argv = ["--device", "cpu", "--out", str(tmp_path), "--ops", "argmax,local_argmax_fused", "--quick"]
    assert kernels.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "--allow-interpreter" in err and "\n" not in err
    assert not (tmp_path / "kernels.csv").exists()


def test_default_ops_skip_fused_on_cpu_and_record_triton():
    ops, info = kernels.select_ops(None, "cpu", False)
    assert ops == (*kernels.OPS, *kernels.TOPK_OPS) and not set(ops) & set(FUSED_KERNEL_OPS)
    assert info["fused_ops"].startswith("skipped: CPU")
    assert info["available"] == (importlib.util.find_spec("triton") is not None)
    ops, info = kernels.select_ops(("argmax",), "cpu", False)
    assert ops == ("argmax",) and info["fused_ops"] == "not requested"


def test_fused_ops_share_their_base_op_grid():
    ops = tuple(kernels.OPS) + tuple(kernels.FUSED_OPS)
    assert set(kernels.FUSED_OPS) == set(FUSED_KERNEL_OPS)
    grid = kernels.Grid((1, 8), kernels.SHARD_COLS, kernels.VOCAB_COLS, ("bf16",), ("eager",), (2, 8), ops)
    for op in FUSED_KERNEL_OPS:
        base = op.removesuffix("_fused")
        for p in (1, 2, 8):
            assert grid.cols_for(op, p) == grid.cols_for(base, p)
        pts = {(p.dtype, p.world_size, p.rows, p.cols) for p in grid.points() if p.op == op}
        assert pts == {(p.dtype, p.world_size, p.rows, p.cols) for p in grid.points() if p.op == base}
    assert {p.world_size for p in grid.points() if p.op == "pair_reduce_fused"} == {2, 8}


def test_explicit_fused_ops_without_triton_are_an_input_error():
    code = ("import sys; sys.modules['triton'] = None\n"
            "from calibration.bench import kernels\nfrom costmodel.io.errors import InputError\n"
            "ops, info = kernels.select_ops(None, 'cuda', False)\n"
            "print('default', len(ops) == len(kernels.OPS) + len(kernels.TOPK_OPS), info['available'],\n"
            "      info['fused_ops'][:8])\n"
            "try:\n    kernels.select_ops(('key_pack_fused',), 'cuda', False)\n"
            "except InputError as exc:\n    print('error', exc)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "default True False skipped:"
    assert len(lines) == 2 and lines[1].startswith("error Triton is unavailable")


def test_bad_flag_is_one_error_line_exit_2(tmp_path, capsys):
    assert kernels.main(["--out", str(tmp_path), "--bogus"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "--bogus" in err and "\n" not in err


def test_unwritable_out_is_one_error_line_exit_3(tmp_path, capsys, keep_threads):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    argv = ["--device", "cpu", "--out", str(blocker / "k"), "--ops", "argmax", "--rows", "1", "--cols", "1000",
            "--dtypes", "fp32", "--point-seconds", "0.01"]
    assert kernels.main(argv) == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err


def test_resume_after_a_torn_last_row_remeasures_it(tmp_path, keep_threads):
    argv = ["--device", "cpu", "--out", str(tmp_path), "--ops", "argmax", "--rows", "1,2", "--cols", "1000",
            "--dtypes", "fp32", "--point-seconds", "0.01"]
    assert kernels.main(argv) == 0
    path = tmp_path / "kernels.csv"
    lines = path.read_text().splitlines(keepends=True)
    assert len(lines) == 3
    path.write_text("".join(lines[:2]) + lines[2][:-3])  # the crash tore the last row (median_us survives)
    assert kernels.main([*argv, "--resume"]) == 0
    after = path.read_text().splitlines(keepends=True)
    assert after[:2] == lines[:2] and len(after) == 3
    frame = read_measurements(path)
    assert sorted(frame["rows"]) == [1, 2]
    assert json.loads((tmp_path / "provenance.json").read_text())["points_measured"] == 1


def test_provenance_of_another_tool_in_the_same_folder_is_kept(tmp_path, keep_threads):
    earlier = {"kind": "calibration-provenance", "tool": "calibration.collectives", "status": "ok"}
    (tmp_path / "provenance.json").write_text(json.dumps(earlier))
    argv = ["--device", "cpu", "--out", str(tmp_path), "--ops", "key_unpack", "--rows", "1",
            "--point-seconds", "0.01"]
    assert kernels.main(argv) == 0  # no --resume: kernels.csv is new
    prov = json.loads((tmp_path / "provenance.json").read_text())
    assert prov["tool"] == "calibration.kernels" and prov["previous_runs"] == [earlier]


def test_default_grid_straddles_the_reduction_regime_edges():
    """Widths just below and just above each edge where ATen's reduce launch changes (costmodel.model.gpu_kernels),
    so a measured table never interpolates across a regime change; and the launch really differs across them."""
    from costmodel.model.gpu_kernels import REGIME_EDGES_COLS, reduce_launch

    for edge in REGIME_EDGES_COLS:
        for axis in (kernels.SHARD_COLS, kernels.VOCAB_COLS):
            below = [c for c in axis if 0.9 * edge <= c < edge]
            above = [c for c in axis if edge <= c <= 1.1 * edge]
            assert below and above, (edge, axis)
    lo, hi = reduce_launch(1, 126976, 132), reduce_launch(1, 131104, 132)
    assert float(lo.ctas_per_output) == 1 and float(hi.ctas_per_output) > 1
    lo, hi = reduce_launch(32, 7936, 132), reduce_launch(32, 8448, 132)
    assert float(lo.blocks) == 2 and float(hi.blocks) == 32  # a warp per row vs the row split across warps
    assert {"local_max", "local_pack", "local_argmax", "local_argmax_masked"} <= set(kernels.OPS)  # the variants


@pytest.mark.parametrize("op", sorted(TOPK_KERNEL_OPS))
@pytest.mark.parametrize("k", [1, 3, 8])
def test_topk_ops_pass_their_check_and_a_wrong_tie_order_fails(op, k, monkeypatch):
    cols = 4 * k if op == "topk_merge" else 6  # local_topk at k = 8 > the 6-column shard: (-inf, V) padding
    kernels.check_op(op, "fp32" if op == "topk_merge" else "bf16", 4, cols, torch.device("cpu"), k)
    if k == 1:
        return

    def highest_id_first(x, kk):  # ties broken by the highest index instead of the lowest
        flipped = torch.flip(x, dims=[-1])
        vals, idx = torch.sort(flipped, dim=-1, descending=True, stable=True)
        return vals[..., :kk], x.shape[-1] - 1 - idx[..., :kk]

    def merge_highest_id(vals, ids, kk):
        order = torch.argsort(-ids.double() * 0 + ids.double(), dim=-1, descending=True)
        v = vals.gather(-1, order)
        v, o = torch.sort(v, dim=-1, descending=True, stable=True)
        return v[..., :kk], ids.gather(-1, order).gather(-1, o)[..., :kk]

    if op == "local_topk":
        monkeypatch.setattr(kernels.ref, "stable_topk", highest_id_first)
    else:
        monkeypatch.setattr(kernels.ref, "merge_topk", merge_highest_id)
    with pytest.raises(AssertionError, match=op):
        kernels.check_op(op, "fp32" if op == "topk_merge" else "bf16", 4, cols, torch.device("cpu"), k)


def test_topk_grid_has_one_point_per_k():
    grid = kernels.Grid((1, 16), (1000,), (40000,), ("bf16",), ("eager",), (2, 8), ("local_topk", "topk_merge"),
                        (2, 8))
    points = grid.points()
    assert {(p.k, p.cols) for p in points if p.op == "local_topk"} == {(2, 1000), (8, 1000)}
    assert {(p.world_size, p.k, p.cols) for p in points if p.op == "topk_merge"} == {
        (2, 2, 4), (2, 8, 16), (8, 2, 16), (8, 8, 64)}
    assert {p.dtype for p in points if p.op == "topk_merge"} == {"fp32"}
