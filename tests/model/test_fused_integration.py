"""Fused Triton variants wired into verify and the kernel benchmark (CPU: Triton's interpreter).

verify --fused under torchrun must PASS every chosen case for "local_argmax_pairs[fused]" and
"packed_allreduce_max[fused]"; the same strategies on simulated ranks (p = 1, 4) must equal torch.argmax,
call the Triton kernels (not the torch building blocks) with the head's soft-cap / scale, read the
all_gather_into_tensor buffer in place, and map all -inf rows to target id 0 under a d2t map. A quick
kernel benchmark of fused ops writes schema-valid rows and records Triton in its provenance.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if importlib.util.find_spec("triton") is None:
    pytest.skip("Triton is not installed (pip install triton==3.9.0)", allow_module_level=True)

from calibration.reference import strategies as ref  # noqa: E402
from calibration.reference import verify  # noqa: E402
from costmodel.io.errors import InputError  # noqa: E402
from costmodel.io.measurements import read_measurements  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
PAIRS_F, KEYS_F = ref.fused_name("local_argmax_pairs"), ref.fused_name("packed_allreduce_max")
NEG_INF = float("-inf")
# small V = 1000 cases (one kernel program per row under the interpreter) covering the brief's edge cases
TORCHRUN_CASES = ("ties-across-shards-fp32", "max-in-padding-fp32", "nan-bf16", "eagle3-d2t-edge", "softcap30")
SIMULATED_CASES = ("all-neg-inf-fp32", "signed-zero-fp32", "nan-fp16", "negative-extremes-fp32",
                   "eagle3-d2t-softcap-fp16", "ties-across-shards-fp32")


@pytest.fixture(scope="module")
def tk():
    """calibration.reference.triton_kernels in the mode DEVICE needs (CPU: the interpreter, switched on here)."""
    try:
        return ref.import_triton_kernels(DEVICE.type)
    except InputError as exc:  # e.g. triton imported earlier in this process without the interpreter
        pytest.skip(f"cannot load the Triton kernels in this process: {exc}")


@pytest.fixture(scope="module")
def fused(tk):
    return ref.fused_strategy_funcs(DEVICE.type)


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


# -- verify under torchrun ------------------------------------------------------------------------------------------
@pytest.mark.torchrun
def test_verify_fused_passes_every_chosen_case_on_two_gloo_ranks():
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
           "-m", "calibration.verify", "--backend", "gloo", "--fused", "--cases", ",".join(TORCHRUN_CASES),
           "--time", "--time-points", "1x1000", "--repeats", "2", "--allow-interpreter"]
    proc = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    header = next(line.split() for line in lines if line.startswith("case "))
    assert header[-2:] == ["PAIRS-F", "KEYS-F"] and len(header) == 1 + len(ref.STRATEGY_FUNCS) + 2
    rows = {line.split()[0]: line.split()[1:] for line in lines
            if line.split() and any(word in line.split()[0] for word in TORCHRUN_CASES)}
    assert len(rows) == len(TORCHRUN_CASES)
    assert {"nan-bf16-V1000-B6", "eagle3-d2t-edge-fp32-V1000-T4096-B6"} <= set(rows)
    assert all(cells == ["PASS"] * (len(ref.STRATEGY_FUNCS) + 2) for cells in rows.values()), proc.stdout
    assert "world size 2" in proc.stdout and "fused: Triton" in proc.stdout and "result: PASS" in proc.stdout
    timed = {line.split()[2] for line in lines if line.strip().startswith("1 ") and "1000" in line}
    assert {PAIRS_F, KEYS_F, "local_argmax_pairs"} <= timed
    assert "note: the [fused] rows ran under Triton's interpreter" in proc.stdout


def test_verify_fused_on_one_rank_leaves_interpreted_variants_out_of_the_timing():
    cmd = [sys.executable, "-m", "calibration.verify", "--backend", "gloo", "--fused", "--cases", "random-fp32-V1000",
           "--time", "--time-points", "2x1000", "--repeats", "1"]
    proc = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    row = next(line.split() for line in proc.stdout.splitlines() if line.startswith("random-fp32-V1000-B1"))
    assert row[1:] == ["PASS"] * (len(ref.STRATEGY_FUNCS) + 2) and "world size 1" in proc.stdout
    timed = [line.split()[2] for line in proc.stdout.splitlines() if line.split()[:2] == ["2", "1000"]]
    assert sorted(timed) == sorted(ref.STRATEGY_FUNCS)
    assert "[fused] variants were not timed" in proc.stdout


# -- the same strategies on simulated ranks ---------------------------------------------------------------------------
@pytest.mark.parametrize("p", [1, 4])
def test_fused_strategies_equal_torch_argmax_on_simulated_ranks(fused, p):
    cases = [c for c in verify.default_cases() if any(w in c.name for w in SIMULATED_CASES)]
    assert len(cases) == len(SIMULATED_CASES)
    outcomes = ref.run_threads(p, lambda comm: verify.run_cases(cases, fused, comm, DEVICE, 3))
    for rank_outcomes in outcomes:
        assert [(o.case, o.strategy, o.status) for o in rank_outcomes if o.status != "PASS"] == []
        assert len(rank_outcomes) == 2 * len(cases)


def test_fused_path_uses_the_triton_kernels_and_the_concat_buffer(fused, tk, monkeypatch):
    calls: list[tuple] = []
    originals = {name: getattr(tk, name) for name in
                 ("fused_local_argmax_pairs", "fused_key_pack", "fused_pair_reduce", "fused_key_unpack")}

    def spy(name):
        def wrapped(*args, **kwargs):
            calls.append((name, tuple(args[0].shape), kwargs))
            return originals[name](*args, **kwargs)
        return wrapped

    for name in originals:
        monkeypatch.setattr(tk, name, spy(name))

    def no_torch(*args, **kwargs):
        raise AssertionError("the fused path called a torch building block")

    for name in ("local_argmax", "pair_reduce", "key_pack", "key_unpack", "apply_softcap_scale"):
        monkeypatch.setattr(ref, name, no_torch)
    gen = torch.Generator().manual_seed(5)
    full = torch.randn(3, 1000, generator=gen) * 3  # tanh(x / 8) far from saturation: no near-ties
    head = ref.draft_head(1000, 2, softcap=8.0, scale=2.0)
    padded = ref.pad_logits(full, head.layout.padded_vocab, float("inf")).to(DEVICE)
    want = (torch.tanh(full / 8.0) * 8.0 * 2.0).argmax(dim=-1)
    for name in (PAIRS_F, KEYS_F):
        calls.clear()
        results = ref.simulate(fused[name], padded, head)
        assert all(torch.equal(r.cpu(), want) for r in results)
        local = [c for c in calls if c[0] in ("fused_local_argmax_pairs", "fused_key_pack")]
        assert len(local) == 2 and all(c[1] == (3, 512) and c[2] == {"softcap": 8.0, "scale": 2.0} for c in local)
        if name == PAIRS_F:
            reduce = [c for c in calls if c[0] == "fused_pair_reduce"]
            assert len(reduce) == 2 and all(c[1] == (6, 2) and c[2] == {"concat": True} for c in reduce)
        else:
            assert [c[0] for c in calls].count("fused_key_unpack") == 2


def test_d2t_rows_of_all_neg_inf_map_to_target_zero(fused):
    # V = 200 over p = 2 (shard 128, ids 200..255 are padding holding +inf); d2t: target = 3 * draft + 1
    d2t = torch.arange(200) * 2 + 1
    head = ref.draft_head(200, 2, d2t=d2t, target_vocab=700)
    full = torch.full((3, 200), -1.0)
    full[0] = NEG_INF  # all -inf: target 0, as the scatter baseline returns (not d2t[0] + 0 = 1)
    full[1, 150] = 4.0  # rank 1 wins: draft 150 -> target 451
    full[2, 30], full[2, 170] = 4.0, 4.0  # tie across ranks: draft 30 -> target 91
    padded = ref.pad_logits(full, head.layout.padded_vocab, float("inf")).to(DEVICE)
    head = ref.DraftHead(head.layout, d2t.to(DEVICE), 700)
    assert ref.expected_ids(padded, head).tolist() == [0, 451, 91]
    for name in (PAIRS_F, KEYS_F):
        for got in ref.simulate(fused[name], padded, head):
            assert got.tolist() == [0, 451, 91], name


def test_bf16_subnormal_maxima(fused):
    """Triton 3.9.0's interpreter casts bf16 subnormals to -0.0; the kernel widens bf16 bits itself."""
    sn = torch.finfo(torch.bfloat16).smallest_normal
    full = torch.full((2, 200), -1.0)
    full[0] = -sn / 4
    full[0, 150] = -sn / 8  # the negative subnormal closest to zero wins (rank 1)
    full[1, 20], full[1, 30] = sn / 8, sn / 4  # two positive subnormals: the larger one wins
    full = full.to(torch.bfloat16)
    head = ref.draft_head(200, 2)
    padded = ref.pad_logits(full, head.layout.padded_vocab, float("inf")).to(DEVICE)
    assert ref.expected_ids(padded, head).tolist() == [150, 30]
    for name in (PAIRS_F, KEYS_F):
        for got in ref.simulate(fused[name], padded, head):
            assert got.tolist() == [150, 30], name


@pytest.mark.parametrize("scale", [0.0, -1.0])
def test_fused_strategies_reject_a_non_positive_scale(fused, scale):
    head = ref.DraftHead(ref.vocab_layout(64, 1), scale=scale)  # bypass draft_head's validation
    for name in (PAIRS_F, KEYS_F):
        with pytest.raises(InputError, match="scale"):
            ref.simulate(fused[name], torch.zeros(2, 64, device=DEVICE), head)


# -- kernel benchmark -------------------------------------------------------------------------------------------------
def test_quick_kernel_benchmark_of_fused_ops_on_the_interpreter(tmp_path):
    out = tmp_path / "k"
    cmd = [sys.executable, "-m", "calibration.kernels", "--ops", "local_argmax_fused,pair_reduce_fused",
           "--allow-interpreter", "--quick", "--device", "cpu", "--rows", "1,2", "--cols", "4000", "--out", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    frame = read_measurements(out / "kernels.csv")
    assert set(frame["op"]) == {"local_argmax_fused", "pair_reduce_fused"}
    local = frame[frame["op"] == "local_argmax_fused"]
    pair = frame[frame["op"] == "pair_reduce_fused"]
    assert sorted(local["rows"]) == [1, 2] and set(local["cols"]) == {4000} and set(local["world_size"]) == {1}
    assert set(local["dtype"]) == {"bf16"}
    assert sorted(zip(pair["rows"], pair["world_size"])) == [(1, 2), (1, 8), (2, 2), (2, 8)]
    assert set(pair["cols"]) == {0} and set(pair["dtype"]) == {"fp32"}
    assert (frame["median_us"] > 0).all() and (frame["iters"] >= 5).all()
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["status"] == "ok" and prov["points_measured"] == len(frame) == 6
    assert prov["triton"]["available"] is True and prov["triton"]["interpreted"] is True
    assert prov["triton"]["version"] == importlib.metadata.version("triton")


@pytest.mark.parametrize("op,cols", [("local_argmax_fused", 1000), ("local_argmax_fused", 5000),
                                     ("key_pack_fused", 5000), ("pair_reduce_fused", 0), ("key_unpack_fused", 0)])
def test_benchmark_check_compares_fused_ops_with_the_torch_building_block(tk, op, cols):
    from calibration.bench import kernels

    spec = kernels.SPECS[op]
    kernels.check_op(op, spec.data_dtype or "bf16", 4 if spec.per_p else 1, cols, DEVICE)


def test_benchmark_check_catches_a_fused_kernel_that_disagrees(tk, monkeypatch):
    from calibration.bench import kernels

    real = tk.fused_pair_reduce
    monkeypatch.setattr(tk, "fused_pair_reduce", lambda g, p, concat=False: real(g, p, concat=concat) + 1)
    with pytest.raises(AssertionError, match="pair_reduce_fused .* differs from the torch building block"):
        kernels.check_op("pair_reduce_fused", "fp32", 2, 0, DEVICE)
