"""Sensitivity (costmodel.answers.sensitivity): the stacked ensemble gives today's elasticities exactly.

Reference: the original method - per parameter and sign, the whole scaled document parsed and checked
(`profile_from_dict`) and one `predict` - on a sample of every kind of parameter.
"""

from __future__ import annotations

import copy

import pytest

from costmodel import Scenario, load_profile, predict
from costmodel.answers.sensitivity import WholeStep, _perturbed, _stackable, elasticities, parameters
from costmodel.answers.whole_step import PER_CALL, QUANTITY
from costmodel.io.errors import InputError
from costmodel.model.components import BASELINE
from costmodel.model.draft_step import draft_step, parse_placement
from costmodel.model.drafter import DraftArch
from costmodel.profiles.parse import profile_from_dict
from costmodel.profiles.presets import preset_draft

STRATEGY = "local_argmax_pairs"


def reference_saving(scenario, profile, path, factor, whole=None):
    """The original `_scaled` + `predict` (with `whole`, a WholeStep: + the whole draft step at the target placement,
    one draft_step of the parsed document): None where the scaled document is refused."""
    data = copy.deepcopy({k: v for k, v in profile.raw.items() if k not in ("bootstrap", "ensemble")})
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = node[path[-1]] * factor
    try:
        scaled = profile_from_dict(data, source=profile.name)
    except InputError:
        return None
    if whole is not None:
        step = draft_step(scenario, scaled, parse_placement("target", int(scenario.tp)), whole.arch,
                          kv_len=whole.kv_len, forward_us=whole.forward_us)
        return float(step.total_us[BASELINE] - step.total_us[STRATEGY])
    return float(predict(scenario, scaled, (BASELINE, STRATEGY)).saving_us(STRATEGY))


def sample(params, every):
    """Every `every`-th parameter plus the first of each kind (path head), so each code path is covered."""
    seen, out = set(), []
    for i, p in enumerate(params):
        kind = p.path[:2] if p.path[0] == "kernels" else (p.path[0], p.path[-1])
        if i % every == 0 or kind not in seen:
            out.append(p)
        seen.add(kind)
    return out


@pytest.mark.parametrize("name, scenario, every", [
    ("h200-sxm-nvlink", Scenario(vocab=202048, tp=8, batch=64, num_spec_tokens=3), 12),
    ("h200-sxm-nvlink", Scenario(vocab=202048, tp=8, batch=8, engine="vllm"), 25),
    ("cpu-gloo", Scenario(vocab=202048, tp=4, batch=32), 4),
])
def test_elasticities_equal_the_original_method(name, scenario, every):
    profile = load_profile(name)
    table = elasticities(scenario, profile, STRATEGY).set_index("parameter")
    base = float(predict(scenario, profile, (BASELINE, STRATEGY)).saving_us(STRATEGY))
    for param in sample(list(parameters(profile)), every):
        up = reference_saving(scenario, profile, param.path, 1.01)
        down = reference_saving(scenario, profile, param.path, 0.99)
        if up is None or down is None:  # refused: never in the table
            assert param.label not in table.index
            continue
        e = (up - down) / (2 * 0.01 * base)
        if abs(e) > 1e-6:
            assert table.loc[param.label, "elasticity"] == e, param.label  # exactly: same numbers
        else:
            assert param.label not in table.index


@pytest.mark.parametrize("name, engine, batch, every", [
    ("h200-sxm-nvlink", "vllm", 64, 9),
    ("b200-hgx-nvlink", "sglang", 8, 5),
])
def test_whole_step_elasticities_equal_the_parsed_documents_draft_step(name, engine, batch, every):
    """Under an engine the elasticities are of the whole draft step's saving per decode step: each one the central
    difference of two draft_steps of the whole scaled document (stacked or one by one, the same numbers)."""
    profile = load_profile(name)
    whole = WholeStep(DraftArch.from_fields({**preset_draft("llama4-maverick"), "vocab": 202048}))
    scenario = Scenario(vocab=202048, tp=8, batch=batch, num_spec_tokens=3, engine=engine, hidden=5120)
    table = elasticities(scenario, profile, STRATEGY, whole_step=whole)
    assert set(table["quantity"]) == {QUANTITY}
    step = draft_step(scenario, profile, parse_placement("target", 8), whole.arch)
    base = float(step.total_us[BASELINE] - step.total_us[STRATEGY])
    assert set(table["saving_us"]) == {base}
    table = table.set_index("parameter")
    checked = 0
    for param in sample(list(parameters(profile)), every):
        up = reference_saving(scenario, profile, param.path, 1.01, whole)
        down = reference_saving(scenario, profile, param.path, 0.99, whole)
        if up is None or down is None:
            assert param.label not in table.index
            continue
        e = (up - down) / (2 * 0.01 * base)
        if abs(e) > 1e-6:
            assert table.loc[param.label, "elasticity"] == pytest.approx(e, rel=1e-9, abs=1e-12), param.label
            checked += 1
        else:
            assert param.label not in table.index
    assert checked >= 3
    # not the per-call table: the drafter forward hides the host launches the per-call answer pays
    per_call = elasticities(scenario, profile, STRATEGY)
    assert set(per_call["quantity"]) == {PER_CALL}
    assert not per_call.set_index("parameter")["elasticity"].equals(table["elasticity"])


def test_perturbed_profile_prices_like_the_parsed_document():
    profile = load_profile("h200-sxm-nvlink")
    scenario = Scenario(vocab=202048, tp=8, batch=64)
    for param in sample(list(parameters(profile)), 40):
        expected = reference_saving(scenario, profile, param.path, 1.01)
        got = float(predict(scenario, _perturbed(profile, param.path, 1.01), (BASELINE, STRATEGY)).saving_us(STRATEGY))
        assert got == expected, param.label


def test_every_kernel_model_parameter_and_host_cost_is_perturbed():
    profile = load_profile("h200-sxm-nvlink")
    labels = {p.label for p in parameters(profile)}
    assert {"kernel model copy_gbps.bf16", "kernel model reduce_ops.argmax.elems_per_us", "kernel model wave_us",
            "kernel model pair_base_us", "host torch_op_us", "host c10d_call_us", "lm_head weight_gbps"} <= labels
    assert not any("sm_count" in label or "max_threads_per_sm" in label for label in labels)
    table = elasticities(Scenario(vocab=202048, tp=8, batch=64), profile, STRATEGY)
    assert "kernel model copy_gbps.bf16" in set(table["parameter"])  # the relayout copy rate moves this saving
    assert not _stackable(profile, ("kernels", "host", "torch_op_us"))


@pytest.mark.parametrize("args, words", [
    (["--preset", "qwen3-8b-eagle3", "--tp", "4", "--batch", "1"], ("narrows the loss", "widens the loss")),
    (["--preset", "llama3-8b", "--tp", "2", "--batch", "8"], ("raises the saving", "lowers the saving"))])
def test_predict_sensitivity_words_follow_the_sign_of_the_saving(capsys, args, words):
    """Issue 43 item 6: with a negative saving, "+1.343 (-3.80 us per +1%) host torch_op_us" read as if more host
    cost raised the saving; E = dS/S is the % change of the loss's size there. Every row now says what +1% does
    in words that follow the saving's sign, and the header says how to read E."""
    import json
    import re

    from costmodel.cli.main import main

    argv = ["predict", *args, "--no-placements", "--no-intervals", "--sensitivity"]
    assert main([*argv, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["sensitivity"]
    negative = rows[0]["saving_us"] < 0
    assert negative is (words[1] == "widens the loss")
    assert all(r["effect"] == (words[0] if r["saving_change_us_per_1pct"] >= 0 else words[1]) for r in rows)
    assert main(argv) == 0
    text = capsys.readouterr().out.split("sensitivity of the local_argmax_pairs saving", 1)[1].splitlines()
    assert f"({rows[0]['saving_us']:+.1f} us here)" in text[0]
    assert ("the saving is negative here, so positive widens the loss" in text[1]) is negative
    printed = [re.match(r"\s+([+-][\d.]+)\s+\(([+-][\d.]+) us per \+1%: ([a-z ]+)\)", line) for line in text[2:]]
    printed = [m for m in printed if m]
    assert len(printed) == min(12, len(rows))
    for m in (m for m in printed if float(m.group(1))):  # "+0.000": too small to read a sign from
        gain = (float(m.group(1)) > 0) is not negative  # E = dS / S: the change's sign is E's times S's
        assert m.group(3) == (words[0] if gain else words[1]), m.group(0)
    if negative:  # the case the issue reports: a positive elasticity that widens the loss
        assert any(float(m.group(1)) > 0 and m.group(3) == "widens the loss" for m in printed)
