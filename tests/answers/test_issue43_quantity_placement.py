"""Issue 43, items 1 and 3: the quantity said is the quantity priced, and the placement line follows the headline and
can be run.

1. A TP that does not divide the named preset's attention heads is refused where the question is built (vLLM refuses
   it: ModelConfig.verify_with_parallel_config), on every face; where the whole draft step cannot be priced the
   header (`question.quantity`) names the per-call quantity the answer (`answer.quantity`) prices.
3. `recommend`'s placement line chooses among the (placement, strategy, collective) triples the engine runs, under
   the headline's decision rule (its saving is the headline's); the faster triple it sets aside is said apart.
"""

from __future__ import annotations

import json

import pytest

from costmodel.answers.answer import price
from costmodel.answers.question import build_question
from costmodel.answers.whole_step import PER_CALL, QUANTITY
from costmodel.cli.main import main
from costmodel.io.errors import InputError
from costmodel.profiles.presets import preset, preset_logit_ops
from costmodel.profiles.store import load_profile
from tests.conftest import ROOT

CHAT = str(ROOT / "data/examples/chat-diurnal.csv")
TOUR = ["--workload", CHAT, "--preset", "llama4-maverick", "--tp", "8", "--num-spec-tokens", "5", "--itl-ms", "25",
        "--acceptance-length", "3"]


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- item 1: the quantity said is the quantity priced ------------------------------------------------------------
@pytest.mark.parametrize("command, flags", [
    ("predict", ("--tp", "16", "--nodes", "2")),
    ("predict", ("--tp", "7")),
    ("predict", ("--profile", "gb200-nvl72", "--tp", "32")),
    ("predict", ("--profile", "gb200-nvl72", "--tp", "64")),
    ("recommend", ("--workload", CHAT, "--tp", "16", "--nodes", "2")),
])
def test_a_tp_that_does_not_divide_the_presets_heads_is_refused_in_one_line(capsys, command, flags):
    """Llama 4 Maverick has 40 attention heads: vLLM refuses TP 16 / 7 / 32 / 64 before loading it."""
    code, out, err = cli(capsys, command, "--preset", "llama4-maverick", *flags)
    tp = flags[flags.index("--tp") + 1]
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith(f"error: --tp: {tp} does not divide the 40 attention heads of "
                                                   "Llama 4 Maverick 17B-128E (preset llama4-maverick)"), err
    assert "1, 2, 4, 5, 8, 10, 20, 40" in err


def test_the_dashboard_question_is_refused_the_same_way():
    """The sidebar's question goes through the same check (build_question, preset named)."""
    fields = {**preset("llama4-maverick"), **preset_logit_ops("llama4-maverick"), "tp": 16, "nodes": 2, "batch": 8.0,
              "engine": "vllm"}
    with pytest.raises(InputError, match="--tp: 16 does not divide the 40 attention heads"):
        build_question(fields, load_profile("h200-sxm-nvlink"), preset="llama4-maverick")
    # engine none prices the logits path as a microbenchmark: no model is served, nothing to refuse
    q = build_question({**fields, "engine": "none"}, load_profile("h200-sxm-nvlink"), preset="llama4-maverick")
    assert int(q.scenario.tp) == 16


@pytest.mark.parametrize("flags, why", [
    # the default preset is borrowed, not named: its draft cannot shard at TP 16, the per-call answer stands
    (("--tp", "16", "--nodes", "2"), "the whole draft step cannot be priced: draft TP 16"),
    (("--tp", "1"), "TP 1: nothing to gather"),
])
def test_the_header_names_the_per_call_quantity_where_the_whole_step_is_not_priced(capsys, flags, why):
    code, out, _ = cli(capsys, "predict", *flags, "--no-intervals", "--no-placements", "--json")
    assert code == 0
    result = json.loads(out)
    assert result["answer"]["quantity"] == PER_CALL and why in result["answer"]["why_not_whole_draft_step"]
    said = result["question"]["quantity"]
    assert said.startswith("per draft call under vllm: the logits path alone") and why in said
    assert "whole draft step under" not in said
    code, text, _ = cli(capsys, "predict", *flags, "--no-intervals", "--no-placements")
    header = text[text.index("answer: "):text.index("draft architecture:")]
    assert header.startswith("answer: per draft call under vllm") and "whole draft step under" not in header
    # where the whole draft step is priced (TP 8 divides the 40 heads), the header says so, as the answer does
    code, out, _ = cli(capsys, "predict", "--preset", "llama4-maverick", "--tp", "8", "--no-intervals",
                       "--no-placements", "--json")
    result = json.loads(out)
    assert code == 0 and result["answer"]["quantity"] == QUANTITY
    assert result["question"]["quantity"].startswith("whole draft step under vllm")




# -- item 3: the placement follows the headline and can be run ---------------------------------------------------
def test_the_tour_placement_is_runnable_and_its_saving_is_the_headlines(capsys):
    """README tour step 3: the placement line chose (target, local_argmax_pairs, multimem), which vLLM cannot run,
    and implied a saving of 697.7 us next to the headline's 470.9 us. Now: the runnable triple, the headline's
    saving; the multimem triple set aside, apart, saying why."""
    code, out, _ = cli(capsys, "recommend", *TOUR, "--json")
    assert code == 0
    rec = json.loads(out)
    place = rec["placement"]
    assert (place["placement"], place["strategy"], place["collective"]) == ("target", "local_argmax_pairs", "nccl")
    assert place["engine_cannot"] == ""
    headline = rec["strategies"]["local_argmax_pairs"]["expected_saving_per_decode_step_us"]
    assert place["saving_us"] == pytest.approx(headline, rel=1e-9)
    assert place["baseline_us"] - place["expected_us"] == pytest.approx(headline, rel=1e-9)
    aside = place["set_aside"]
    assert (aside["strategy"], aside["collective"]) == ("local_argmax_pairs", "multimem")
    assert aside["expected_us"] < place["expected_us"] and aside["why"].startswith("not runnable under vllm")
    code, text, _ = cli(capsys, "recommend", *TOUR)
    lines = text.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("placement: "))
    assert lines[at].startswith("placement: run the draft at target with local_argmax_pairs over nccl: ")
    assert f"saving {headline:+.1f} us" in lines[at]
    assert not any("not runnable under this engine" in x for x in lines)
    assert any(x.startswith("  faster, set aside: target with local_argmax_pairs over multimem: ") for x in lines)


def test_an_uncertain_headline_keeps_the_default_on_the_placement_line(tmp_path, capsys):
    """DeepSeek-V3 over 2 nodes at batch 1: the headline is uncertain (keep the default, off); the placement line
    said run local_argmax_pairs. It keeps full_all_gather and sets local_argmax_pairs aside, saying why."""
    workload = tmp_path / "b1.csv"
    workload.write_text("batch,weight\n1,1\n")
    code, out, _ = cli(capsys, "recommend", "--workload", str(workload), "--preset", "deepseek-v3", "--tp", "16",
                       "--nodes", "2", "--json")
    assert code == 0
    rec = json.loads(out)
    assert rec["decision"] == "uncertain" and rec["recommended"] == "full_all_gather"
    place = rec["placement"]
    assert (place["placement"], place["strategy"], place["collective"]) == ("target", "full_all_gather", "nccl")
    assert place["saving_us"] == pytest.approx(0.0, abs=1e-9)
    aside = place["set_aside"]
    assert aside["strategy"] == "local_argmax_pairs" and "keeps use_local_argmax_reduction off" in aside["why"]


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_the_chosen_triple_is_one_the_engine_runs(engine):
    """Whatever the engine, the placement line's (strategy, collective) is one it can run (`engine_cannot` "")."""
    from costmodel.serving.workload import load_workload

    fields = {**preset("llama4-maverick"), **preset_logit_ops("llama4-maverick"), "tp": 8, "engine": engine,
              "num_spec_tokens": 5}
    q = build_question(fields, load_profile("h200-sxm-nvlink"), preset="llama4-maverick",
                       workload=load_workload(CHAT))
    wa = price(q).workload
    assert wa.placement is not None and wa.placement_engine_cannot == ""
    rec = wa.recommendation
    if wa.placement.strategy == "local_argmax_pairs" and engine == "vllm":
        assert rec.decision == "enable"
