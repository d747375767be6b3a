"""The drafter forward and the draft step per placement: hand-computed counts, bytes and pipeline bounds."""

from __future__ import annotations

import numpy as np
import pytest

from costmodel.io.errors import InputError
from costmodel.model import collective_impls
from costmodel.model.draft_step import (
    check_fits,
    draft_step,
    draft_steps,
    engine_support,
    parse_placement,
    placements_for,
)
from costmodel.model.drafter import DraftArch, attention_us, forward, gemm_us, kv_bytes_per_sequence, memory
from costmodel.model.engines import ENGINES, host_costs
from costmodel.model.scenario import Scenario
from costmodel.profiles.gpus import gpu_memory, gpu_table
from costmodel.profiles.parse import profile_from_dict
from costmodel.profiles.presets import preset, preset_draft, presets
from costmodel.profiles.store import bundled_profiles, load_profile

H200 = load_profile("h200-sxm-nvlink")
LLAMA8 = DraftArch(layers=1, hidden=4096, heads=32, kv_heads=8, head_dim=128, intermediate=14336, vocab=128256)


@pytest.mark.parametrize("layers,q,expected", [(1, 1, 0), (1, 2, 2), (1, 8, 2), (3, 4, 6), (2, 1, 0)])
def test_all_reduces_per_layer(layers, q, expected):
    arch = DraftArch(layers=layers, hidden=4096, heads=32, kv_heads=8, head_dim=128, intermediate=14336, vocab=1000)
    fwd = forward(H200, arch, 4, q, 1024)
    assert int(fwd.all_reduces) == expected  # 2 per layer (after o_proj, after down_proj) at q > 1, none at q = 1
    one, _ = collective_impls.collective_us(H200, "nccl", "all_reduce", 4 * 4096 * 2, max(q, 2), 1)
    assert float(fwd.all_reduce_us) == pytest.approx(expected * float(one))


def test_layer_gemms_use_the_lm_head_model():
    """q = 2, 3 rows: the four GEMMs' (in, out) by hand, each priced by the lm_head line."""
    fwd = forward(H200, LLAMA8, 3, 2, 1)
    shapes = [(4096, (16 + 2 * 4) * 128), (16 * 128, 4096), (4096, 2 * 7168), (7168, 4096)]
    assert float(fwd.gemm_us) == pytest.approx(sum(float(gemm_us(H200, 3, k, n)) for k, n in shapes))
    m = H200.lm_head
    k, n = shapes[2]
    assert float(gemm_us(H200, 3, k, n)) == pytest.approx(m.floor_us + max(k * n * 2 / m.weight_gbps * 1e-3,
                                                                         2 * 3 * k * n / m.tflops * 1e-6))


def test_attention_reads_the_kv_cache():
    """T = floor + R x L x 2 x kv_q x head_dim x 2 / weight_gbps; kv_q = ceil(8 / 16) = 1 at q = 16."""
    m = H200.lm_head
    assert float(attention_us(H200, LLAMA8, 8, 2, 4096)) == pytest.approx(
        m.floor_us + 8 * 4096 * 2 * 4 * 128 * 2 / m.weight_gbps * 1e-3)
    assert float(attention_us(H200, LLAMA8, 1, 16, 100)) == pytest.approx(
        m.floor_us + 100 * 2 * 1 * 128 * 2 / m.weight_gbps * 1e-3)


def test_memory_arithmetic():
    """Llama 3.1 8B EAGLE-1 draft at q = 1 and q = 8 (target TP 8), bytes by hand."""
    layer = (4096 * (32 + 16) * 128 + 32 * 128 * 4096 + 3 * 4096 * 14336) * 2
    fc = 2 * 4096 * 4096 * 2
    head = 128256 * 4096 * 2  # V_pad = 128256 (a multiple of 64)
    m1 = memory(LLAMA8, 1, target_tp=8, target_vocab=128256, kv_len=2048, sequences_per_rank=4)
    assert m1.weight_bytes == layer + fc + 2 * head  # lm_head + embedding, whole, on every rank
    assert m1.extra_weight_bytes == m1.weight_bytes  # nothing shared with the target's shards
    assert m1.kv_bytes_per_sequence == 1 * 2 * 8 * 128 * 2048 * 2
    assert m1.resident_bytes == m1.weight_bytes + 4 * m1.kv_bytes_per_sequence
    m8 = memory(LLAMA8, 8, target_tp=8, target_vocab=128256, kv_len=2048, sequences_per_rank=4)
    layer8 = (4096 * (4 + 2) * 128 + 4 * 128 * 4096 + 3 * 4096 * 1792) * 2
    assert m8.weight_bytes == layer8 + fc + 2 * head // 8
    assert m8.extra_weight_bytes == layer8 + fc  # the embedding and the shared lm_head are the target's
    assert kv_bytes_per_sequence(LLAMA8, 8, 2048) == 2 * 1 * 128 * 2048 * 2


def test_placements_and_parse():
    assert [p.name for p in placements_for(8)] == ["target", "tp1", "dp", "q=2", "q=4"]
    assert parse_placement("q=4", 8).q == 4
    assert parse_placement("q=8", 8).name == "target"
    for bad in ("q=3", "q=0", "zz"):
        with pytest.raises(InputError):
            parse_placement(bad, 8)


def test_draft_step_bounds_and_dp_gather():
    """max(host, GPU) <= step <= host + GPU per strategy; tp1 has no collective; dp adds one id all-gather."""
    sc = Scenario(**preset("llama3-8b"), tp=8, batch=16, num_spec_tokens=3, engine="vllm")
    steps = {s.placement.name: s for s in draft_steps(sc, H200, LLAMA8)}
    t = steps["target"]
    for name, total in t.total_us.items():
        gpu = float(t.forwards_gpu_us) + 3 * (float(t.lm_head_us) + float(t.logits_gpu_us[name]))
        assert gpu - 1e-6 <= float(total)
    # the first forward runs over the verified tokens: 16 x (3 + 1) rows
    assert float(t.first_forward_gpu_us) == pytest.approx(float(forward(H200, LLAMA8, 64, 8, 2048).gpu_us))
    assert float(t.first_forward_gpu_us) >= float(t.forward_gpu_us)
    tp1, dp = steps["tp1"], steps["dp"]
    assert float(tp1.all_reduce_us) == 0.0 and float(tp1.gather_us) == 0.0
    ids = 2 * 3 * 8  # ceil(16 / 8) rows x K ids x 8 bytes per rank
    g, _ = collective_impls.collective_us(H200, "nccl", "all_gather", ids, 8, 1)
    assert float(dp.gather_us) == pytest.approx(float(g))
    assert dp.memory.sequences_per_rank == 2 and tp1.memory.sequences_per_rank == 16


def test_hidden_launches_move_savings():
    """vLLM (eager logits path behind a captured forward) vs every component captured: the captured chain is
    never slower, and the forward hides host time (the step is below the serial host + GPU sum)."""
    arch = DraftArch.from_fields(preset_draft("llama4-maverick"))
    base = dict(**preset("llama4-maverick"), tp=8, batch=1, num_spec_tokens=5)
    v = draft_step(Scenario(**base, engine="vllm"), H200, parse_placement("target", 8), arch)
    g = draft_step(Scenario(**base, engine="sglang"), H200, parse_placement("target", 8), arch)
    for name in v.total_us:
        assert float(g.total_us[name]) <= float(v.total_us[name]) + 1e-6


def test_refusal_when_the_draft_does_not_fit():
    sc = Scenario(**preset("llama3-8b"), tp=8, batch=64, num_spec_tokens=1)
    step = draft_step(sc, H200, parse_placement("tp1", 8), LLAMA8, kv_len=8192)
    need = step.memory.extra_weight_bytes + 64 * (2 * 8 * 128 * 8192 * 2)  # weights + 64 sequences' KV
    assert step.memory.resident_bytes == need and need < 141e9
    assert check_fits(H200, step) is None  # fits the H200's 141 GB
    assert check_fits(H200, step, free_bytes=need) is None
    assert check_fits(H200, step, free_bytes=need - 1) is not None
    reason = check_fits(H200, step, free_bytes=1e9)
    assert reason is not None and "placement tp1" in reason and "\n" not in reason


def test_every_preset_and_profile_gpu_is_covered():
    for name in presets().index:
        DraftArch.from_fields(preset_draft(name))  # validated on construction
    for name in bundled_profiles():
        gpu = load_profile(name).provenance.gpu
        assert gpu_memory(gpu) is not None, gpu
    for gpu in ("AMD Instinct MI300X", "AMD Instinct MI325X", "AMD Instinct MI355X", "NVIDIA GB300",
                "NVIDIA GeForce RTX 4090"):
        assert gpu in gpu_table()
    assert gpu_table()["AMD Instinct MI300X"].memory_bytes == 192 * 10**9


def test_forward_override_and_no_gemm_model():
    sc = Scenario(**preset("llama3-8b"), tp=2, batch=1, num_spec_tokens=2)
    step = draft_step(sc, H200, parse_placement("target", 2), LLAMA8, forward_us=50.0)
    assert np.all(step.forward_gpu_us == 50.0)
    raw = load_profile("cpu-gloo").raw  # without the lm_head GEMM model it keeps from its base (issue 18)
    cpu = profile_from_dict({**{k: v for k, v in raw.items() if k not in ("ensemble", "bootstrap_method")},
                             "kernels": {k: v for k, v in raw["kernels"].items() if k != "lm_head"}}, source="cpu")
    with pytest.raises(InputError, match="forward-us"):
        draft_step(sc, cpu, parse_placement("target", 2), LLAMA8)


def test_launches_hide_behind_the_forward():
    """vLLM, K 4: the logits path's host launches overlap the captured forwards - the step lies strictly between
    the GPU work and GPU + every host launch in series (engines.step_time_us' bounds), and a longer measured
    forward hides more of them (the step grows by less than the added GPU time)."""
    sc = Scenario(**preset("llama3-8b"), tp=8, batch=1, num_spec_tokens=4, engine="vllm")
    pl = parse_placement("target", 8)
    short = draft_step(sc, H200, pl, LLAMA8, forward_us=20.0)
    long = draft_step(sc, H200, pl, LLAMA8, forward_us=200.0)
    name = "packed_allreduce_max"  # 14 + 2 torch ops of host time per call
    added_gpu = 4 * (200.0 - 20.0)
    assert float(long.total_us[name]) - float(short.total_us[name]) < added_gpu - 1.0
    gpu = float(long.forwards_gpu_us) + 4 * (float(long.lm_head_us) + float(long.logits_gpu_us[name]))
    assert gpu - 1e-6 <= float(long.total_us[name])


def test_every_preset_and_every_profile_prices_every_placement():
    """Every preset on the H200 at TP 4 and one preset on every bundled GPU profile, all engines at once (an
    engine array): every placement the draft's shapes allow is priced, finite and positive."""
    engines = np.asarray(ENGINES)
    for name in presets().index:
        arch = DraftArch.from_fields(preset_draft(name))
        sc = Scenario(**preset(name), tp=4, batch=4, num_spec_tokens=2, engine=engines)  # 4 divides every preset
        for step in draft_steps(sc, H200, arch):
            for total in step.total_us.values():
                assert np.all(np.isfinite(total)) and np.all(total > 0), (name, step.placement)
    arch = DraftArch.from_fields(preset_draft("llama3-8b-eagle3"))
    for prof in bundled_profiles():
        profile = load_profile(prof)
        if profile.lm_head is None:
            continue  # no GEMM model (cpu-gloo): --forward-us only, tested above
        sc = Scenario(**preset("llama3-8b-eagle3"), tp=2, batch=4, num_spec_tokens=2, engine=engines)
        assert {s.placement.name for s in draft_steps(sc, profile, arch)} == {"target", "tp1", "dp"}


def test_the_draft_step_prices_the_users_host_costs():
    """--host-op-us / --host-collective-us reach the whole draft step as they reach the logits path: with vLLM's
    eager logits path and a forward short enough to leave the chain host-bound, a dearer host makes the step slower,
    and giving the profile's own figures equals leaving the fields out."""
    base = dict(**preset("llama3-8b"), tp=8, batch=1, num_spec_tokens=4, engine="vllm")
    pl = parse_placement("target", 8)
    plain = draft_step(Scenario(**base), H200, pl, LLAMA8, forward_us=5.0)
    own = host_costs(H200)
    same = draft_step(Scenario(**base, host_op_us=own.torch_op_us, host_collective_us=own.c10d_call_us), H200, pl,
                      LLAMA8, forward_us=5.0)
    dear = draft_step(Scenario(**base, host_op_us=40.0, host_collective_us=80.0), H200, pl, LLAMA8, forward_us=5.0)
    for name in plain.total_us:
        assert float(same.total_us[name]) == float(plain.total_us[name])
        assert float(dear.total_us[name]) > float(plain.total_us[name]) + 1.0
    # the captured forward's launch (no kernels.host.graph_launch_us in this profile: one torch op) follows the flag
    assert float(plain.forward_host_us) == own.torch_op_us and float(dear.forward_host_us) == 40.0


def test_engine_support_names_every_engine_and_says_what_was_not_read():
    """Every engine gets an answer, never 'unknown engine'; only the default placement is 'supported' outside what
    the sources say; vLLM's config-level refusals hold for Model Runner V2 too."""
    for engine in ENGINES:
        for pl in placements_for(8):
            text = engine_support(engine, pl, 8)
            assert text.split(":")[0] in ("supported", "ignored", "unsupported", "unsupported in a release",
                                          "unchecked"), (engine, pl.name, text)
            assert text.startswith("supported") == (pl.name == "target"), (engine, pl.name, text)
    q2 = parse_placement("q=2", 8)
    assert engine_support("vllm-v2", q2, 8) == engine_support("vllm", q2, 8)
    assert engine_support("tokenspeed", parse_placement("dp", 8), 8).startswith("unchecked: tokenspeed")
