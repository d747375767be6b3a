"""Real `vllm bench serve` files in, whole (issue 42 item 7): fields the readers do not use never refuse a file; a
stated acceptance length outside 1..K+1 is refused as the flag is and wins over the flag; the flags that --bench
makes meaningless are refused with it; bench refusals say "bench"."""

from __future__ import annotations

import json

import pytest

from costmodel.cli.main import main
from costmodel.io.errors import InputError
from costmodel.serving.run import parse_bench_text
from costmodel.serving.workload import parse_workload
from tests.conftest import ROOT

EXAMPLE = ROOT / "data" / "examples" / "vllm-cpu-spec-k3.json"
SCENARIO = ["--preset", "llama4-maverick", "--tp", "8", "--num-spec-tokens", "3"]


def with_fields(tmp_path, **extra) -> str:
    data = json.loads(EXAMPLE.read_text())
    data.update(extra)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))  # json.dumps writes a NUL as \u0000, as vLLM's json.dump does
    return str(path)


def test_unused_fields_never_refuse_a_file(tmp_path):
    """A random model's generated text with a NUL and a lone surrogate, an errors list, a field a newer vLLM adds:
    both readers (simulate's and recommend's) read the file as they read it without them."""
    data = json.loads(EXAMPLE.read_text())
    n = len(data["output_lens"])
    text = json.dumps({**data, "generated_texts": ["a\x00b", "\ud800"] + [""] * (n - 2), "errors": [""] * n,
                       "spec_decode_new_field": {"x": [1.0]}})
    assert "\\u0000" in text and "\\ud800" in text
    plain, full = parse_bench_text(EXAMPLE.read_text(), "run.json"), parse_bench_text(text, "run.json")
    assert (full.output_lens == plain.output_lens).all() and full.reported == plain.reported
    assert parse_workload(text, "run.json").batch.tolist() == parse_workload(EXAMPLE.read_text()).batch.tolist()


def test_a_used_field_keeps_its_checks(tmp_path):
    data = json.loads(EXAMPLE.read_text())
    data["note"] = "a\x00b"
    with pytest.raises(InputError, match=r"^bench run.json.note: contains a NUL character$"):
        parse_bench_text(json.dumps(data), "run.json")
    data = json.loads(EXAMPLE.read_text())
    data["itls"] = "fast"
    for reader in (lambda t: parse_bench_text(t, "run.json"), lambda t: parse_workload(t, "run.json")):
        with pytest.raises(InputError, match=r"^bench run.json: itls must be") as err:
            reader(json.dumps(data))
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("value", [0.5, 4.5, 9.0])
def test_file_acceptance_outside_1_to_k_plus_1_is_refused(tmp_path, capsys, value):
    path = with_fields(tmp_path, spec_decode_acceptance_length=value)
    assert main(["simulate", *SCENARIO, "--bench", path]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"error: bench run.json: spec_decode_acceptance_length {value:g} is outside 1..K+1 = 1..4 tokens "
                   "per decode step with K = 3 (the file's value wins over --acceptance-length; give the K the run "
                   "used)")


def test_the_file_acceptance_wins_over_the_flag_and_says_so(tmp_path, capsys):
    path = with_fields(tmp_path, spec_decode_acceptance_length=2.5)
    assert main(["simulate", *SCENARIO, "--bench", path, "--acceptance-length", "3.5", "--seeds", "4"]) == 0
    out = capsys.readouterr().out
    assert "acceptance length 2.500 (the file's spec_decode_acceptance_length)" in " ".join(out.split())


@pytest.mark.parametrize("flag, value", [("--request-rate", "4"), ("--num-prompts", "10"), ("--input-len", "64"),
                                         ("--output-len", "32"), ("--max-concurrency", "8")])
def test_flags_bench_makes_meaningless_are_refused(capsys, flag, value):
    assert main(["simulate", *SCENARIO, "--bench", str(EXAMPLE), flag, value]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {flag}: the bench file says the run's requests, rate and concurrency already")
    assert "\n" not in err


def test_vllms_own_acceptance_key_is_read_and_checked(tmp_path, capsys):
    """vLLM 0.32's bench writes spec_decode_acceptance_length: a real spec run's 2.37 is read from it (not its
    tokens per streamed chunk, 2.33), and a value outside 1..K+1 under that key is refused."""
    run = parse_bench_text((ROOT / "data" / "serving-runs" / "spec1l-k3-r1.json").read_text(), "spec1l-k3-r1.json")
    assert run.acceptance_length == pytest.approx(2.3697600462561432)
    assert run.acceptance_source == "the file's spec_decode_acceptance_length"
    path = with_fields(tmp_path, spec_decode_acceptance_length=6.0)
    assert main(["simulate", *SCENARIO, "--bench", path]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: bench run.json: spec_decode_acceptance_length 6 is outside")
