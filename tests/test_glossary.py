"""One word per quantity (issue 43, item 2): the faces say "draft call" for one call of the draft (drafter forward
+ lm_head + logits path, or the logits path alone) and "decode step" for the K draft calls of one decode step - the
"whole draft step", the per-decode-step composition that is the answer under an engine. A bare "draft step" (one
call in some places, the K calls in others) is used for nothing, nor `per_draft_step` in a name.

The faces' strings: every string constant (f-string parts included) of the CLI, the dashboard and the answers'
text renderers, the text, JSON keys and values and CSV columns of predict (engine vllm and none), sweep, compare
and recommend, and the docs. Internal names that mean the whole composition (the module
`costmodel.model.draft_step` and its functions) may appear in code spans and docstrings: INTERNAL, nothing else.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from costmodel.cli.main import main
from tests.conftest import ROOT

# "draft step", "draft_step", "draft-step", across a line break, plurals; not after "whole"
BARE = re.compile(r"(?i)(?<!whole[\s_-])draft[\s_-]steps?\b")
BANNED = (BARE, re.compile(r"(?i)per[\s_-]draft[\s_-]step"), re.compile(r"(?i)\b(?:us|saving|time)\s?/\s?step\b"))
# the internal names of the whole draft step's composition (costmodel/model/draft_step.py), as code identifiers
INTERNAL = {"draft_step", "draft_steps", "draft_step_members", "propagate_draft_step", "draft_step_crossovers"}
IDENT = re.compile(r"[\w.:/]*draft_step[\w.:/]*")

FACE_CODE = [*sorted((ROOT / "costmodel" / "cli").glob("*.py")), *sorted((ROOT / "dashboard").glob("*.py")),
             ROOT / "app.py", ROOT / "costmodel" / "answers" / "recommend_text.py",
             ROOT / "costmodel" / "answers" / "explain.py"]
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]


def offences(text: str, *, internal_ok: bool) -> list[str]:
    """The banned phrases of `text` (with 40 characters either side); `internal_ok`: an identifier whose
    `draft_step` part is one of INTERNAL (`costmodel.model.draft_step.parse_placement`, `draft_step(...)`,
    `test_draft_step_stacked.py` is not: a file name is not the module) is a code name, not a word."""
    allowed: list[tuple[int, int]] = []
    if internal_ok:
        for m in IDENT.finditer(text):
            parts = [p for p in re.split(r"[.:/]", m.group()) if "draft_step" in p]
            if parts and all(p in INTERNAL for p in parts):
                allowed.append(m.span())
    found = []
    for pattern in BANNED:
        for m in pattern.finditer(text):
            if not any(a <= m.start() and m.end() <= b for a, b in allowed):
                found.append(text[max(0, m.start() - 40):m.end() + 40].replace("\n", " "))
    return found


def strings_of(path: Path) -> list[str]:
    """Every str constant of a module (docstrings, f-string parts, dict keys)."""
    return [n.value for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def keys_and_strings(obj) -> tuple[list[str], list[str]]:
    """(every dict key, every string value) of a JSON document."""
    keys: list[str] = []
    values: list[str] = []
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, dict):
            keys.extend(str(k) for k in o)
            stack.extend(o.values())
        elif isinstance(o, list):
            stack.extend(o)
        elif isinstance(o, str):
            values.append(o)
    return keys, values


@pytest.mark.parametrize("path", FACE_CODE, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_faces_code_says_draft_call_or_decode_step(path):
    bad = [hit for s in strings_of(path) for hit in offences(s, internal_ok=True)]
    assert not bad, f"{path.relative_to(ROOT)}: a bare 'draft step' / per_draft_step: {bad}"


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_docs_say_draft_call_or_decode_step(path):
    bad = offences(path.read_text(encoding="utf-8"), internal_ok=True)
    assert not bad, f"{path.relative_to(ROOT)}: a bare 'draft step' / per_draft_step: {bad}"


def _run(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


SCENARIO = ("--preset", "llama4-maverick", "--tp", "8", "--batch", "64")


@pytest.mark.parametrize("engine", ["vllm", "none"])
def test_predict_and_compare_say_draft_call_or_decode_step(capsys, tmp_path, engine):
    """Text, JSON keys and values, the compare and sweep CSVs' columns and text cells: no banned word; only a text
    or value citing the code (`costmodel.evidence.intervals.propagate_draft_step`) may name INTERNAL, never a key."""
    texts = [_run(capsys, "predict", *SCENARIO, "--engine", engine)]
    keys, values = keys_and_strings(json.loads(_run(capsys, "predict", *SCENARIO, "--engine", engine, "--json")))
    csv = tmp_path / "compare.csv"
    texts.append(_run(capsys, "compare", "h200-sxm-nvlink", "b200-hgx-nvlink", *SCENARIO, "--engine", engine,
                      "--csv", str(csv)))
    frame = pd.read_csv(csv)
    keys += list(frame.columns)
    values += [str(v) for c in frame.columns if frame[c].dtype == object for v in frame[c].dropna().unique()]
    sweep = tmp_path / "sweep.csv"
    _run(capsys, "sweep", "--preset", "llama4-maverick", "--tp", "8", "--batch", "1,64", "--engine", engine,
         "--out", str(sweep))
    frame = pd.read_csv(sweep)
    keys += list(frame.columns)
    values += [str(v) for c in frame.columns if frame[c].dtype == object for v in frame[c].dropna().unique()]
    bad = [hit for t in texts + values for hit in offences(t, internal_ok=True)]  # a value may cite the code
    bad += [hit for k in keys for hit in offences(k, internal_ok=False)]  # a key is a name: no exception
    assert not bad, bad
    assert "saving_per_draft_call_us" in keys  # the per-call saving under its glossary name


def test_recommend_says_draft_call_or_decode_step(capsys):
    workload = str(ROOT / "data" / "examples" / "chat-diurnal.csv")
    text = _run(capsys, "recommend", "--workload", workload, "--tp", "8")
    keys, values = keys_and_strings(json.loads(_run(capsys, "recommend", "--workload", workload, "--tp", "8",
                                                    "--json")))
    bad = [hit for t in [text, *values] for hit in offences(t, internal_ok=True)]
    bad += [hit for k in keys for hit in offences(k, internal_ok=False)]
    assert not bad, bad


@pytest.mark.parametrize("whole", [True, False])
def test_the_sensitivity_axis_names_the_datas_own_quantity(whole):
    """Before: "change of the saving per draft step" over per-decode-step values (the whole draft step's, under an
    engine). Now the axis reads the table's `quantity` (costmodel.answers.sensitivity.elasticities)."""
    from costmodel.answers.sensitivity import PER_CALL, QUANTITY
    from dashboard.charts import sensitivity_chart

    table = pd.DataFrame({"parameter": ["a", "b"], "elasticity": [0.5, -0.2],
                          "saving_change_us_per_1pct": [1.0, -0.4], "saving_us": 200.0,
                          "quantity": QUANTITY if whole else PER_CALL})
    title = json.dumps(sensitivity_chart(table).to_dict(), ensure_ascii=False)
    want, other = ("per decode step", "per draft call") if whole else ("per draft call", "per decode step")
    assert f"change of the saving {want} for +1% (µs)" in title and f"saving {other}" not in title
