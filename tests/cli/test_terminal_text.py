"""Names reach the terminal without control characters (issue 22): a profile named with ESC / OSC sequences, a
carriage return or a newline is printed by predict, compare and recommend (and named in error lines) as inert
text on its own line - it cannot recolour, retitle or hyperlink the terminal, overwrite a line or forge one."""

from __future__ import annotations

import json
import re

import pytest

from costmodel.cli.main import main
from tests.conftest import ROOT

HOSTILE = "evil\x1b]8;;https://evil.example\x07link\x1b]8;;\x07\x1b[2J\x1b[31m\rgone\nFORGED line\x9b0m\u202eab"
SHOWN = "evil ]8;;https://evil.example link ]8;; [2J [31m gone FORGED line 0m ab"  # terminal_text(HOSTILE)
CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # all but "\n"


@pytest.fixture()
def hostile_profile(tmp_path):
    doc = json.loads((ROOT / "data/profiles/h100-sxm-nvlink.json").read_text())
    doc.update(name=HOSTILE, title=HOSTILE)
    doc["provenance"]["gpu"] = HOSTILE
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(doc))
    return str(path)


def assert_clean(text: str) -> None:
    assert not CONTROL.search(text), repr(text)
    assert not any(line.startswith("FORGED") for line in text.splitlines()), text


def test_predict_prints_a_hostile_name_inert(capsys, hostile_profile):
    assert main(["predict", "--profile", hostile_profile, "--tp", "4", "--batch", "32", "--no-intervals"]) == 0
    out = capsys.readouterr().out
    assert_clean(out)
    assert out.splitlines()[0] == f"profile {SHOWN} (derived: {SHOWN})"


def test_compare_prints_a_hostile_name_inert(capsys, hostile_profile):
    assert main(["compare", hostile_profile, "h100-sxm-nvlink", "--tp", "4", "--batch", "32"]) == 0
    out = capsys.readouterr().out
    assert_clean(out)
    assert out.splitlines()[1] == f"[1] {SHOWN} (derived: {SHOWN})"
    assert out.splitlines()[2].startswith("[2] h100-sxm-nvlink")


def test_recommend_prints_a_hostile_name_inert(capsys, hostile_profile):
    workload = str(ROOT / "data/examples/chat-diurnal.csv")
    assert main(["recommend", "--profile", hostile_profile, "--workload", workload, "--tp", "4"]) == 0
    out = capsys.readouterr().out
    assert_clean(out)
    assert out.splitlines()[0] == f"profile {SHOWN} (derived: {SHOWN})"


def test_an_error_line_naming_a_hostile_path_is_inert(capsys, tmp_path):
    assert main(["predict", "--profile", str(tmp_path / "no\x1b]0;pwned\x07\nFORGED.json")]) == 2
    err = capsys.readouterr().err
    assert_clean(err)
    assert err.count("\n") == 1 and err.startswith("error: ") and "no ]0;pwned FORGED.json" in err


def test_profiles_listing_is_inert(capsys):
    assert main(["profiles", "--citations"]) == 0
    assert_clean(capsys.readouterr().out)
