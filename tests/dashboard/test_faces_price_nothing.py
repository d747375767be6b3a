"""Issue 35: faces render the answer, they do not price it. No dashboard module and no CLI command imports the
model's pricing entry points; they read `costmodel.answers` (per_call, topk, whole_step, step_sweep_frame,
answer, ...). A face that called `predict` itself could disagree with the CLI without a parity test noticing."""

from __future__ import annotations

import ast

import pytest

from tests.conftest import ROOT

# the model's pricing entry points: what `costmodel.answers` calls on the faces' behalf
PRICING = {"predict", "crossover", "crossovers", "matrix", "matrix_rows", "best_pair", "draft_step",
           "draft_step_members", "whole_step_totals", "step_time_us"}
FACES = sorted([*ROOT.glob("dashboard/*.py"), ROOT / "app.py", *ROOT.glob("costmodel/cli/*.py")])


def _pricing_imports(path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            from_model = module.startswith(("costmodel.model", "model")) or module == "costmodel"
            if from_model or (node.level and module.startswith("model")):
                names |= {a.name for a in node.names if a.name in PRICING}
    return names


@pytest.mark.parametrize("path", FACES, ids=lambda p: str(p.relative_to(ROOT)))
def test_face_imports_no_pricing_entry_point(path):
    assert _pricing_imports(path) == set()


def test_the_rule_sees_a_pricing_import(tmp_path):
    """The check itself can fail: both import spellings of predict are caught."""
    face = tmp_path / "face.py"
    face.write_text("from costmodel import predict\nfrom ..model.crossover import crossover\n", encoding="utf-8")
    assert _pricing_imports(face) == {"predict", "crossover"}
