"""--explain for kernels the GPU kernel model prices (issue 18): the printed terms compute to the printed total."""

from __future__ import annotations

import re

import pytest

from costmodel import Scenario, load_profile, predict
from costmodel.answers.explain import explain

TERMS = re.compile(r"GPU kernel model \[[^\]]+\]: (?P<anchor>\w+) (?P<part>[\d.]+) us"
                   r"(?: \(ATen reduce launch: [^)]+\))?"
                   r"(?: x measured/model (?P<ratio>[\d.]+) \([^)]*\))?(?: \+ rest of \w+ (?P<rest>[\d.]+) us)?"
                   r" = (?P<value>[\d.]+) us$")


@pytest.mark.parametrize("profile", ["h200-sxm-nvlink", "h100-sxm-nvlink", "b200-hgx-nvlink"])
@pytest.mark.parametrize("batch", [1, 4, 64, 512])
def test_model_priced_kernels_explain_with_terms_that_add_up(profile, batch):
    prof = load_profile(profile)
    rows = explain(predict(Scenario(vocab=202048, tp=8, batch=batch), prof))
    model_rows = [r for r in rows if "GPU kernel model" in r.text]
    assert model_rows, "the GPU profiles price their kernels with the model"
    for row in model_rows:
        m = TERMS.search(row.text)
        assert m, row.text
        part, ratio = float(m["part"]), float(m["ratio"] or 1.0)
        total = part * ratio + float(m["rest"] or 0.0)
        assert total == pytest.approx(float(m["value"]), abs=2e-3 * (1 + ratio)), row.text
        assert float(m["value"]) == pytest.approx(row.time_us, abs=5e-4)
    gpus = {re.search(r"GPU kernel model \[([^\]]+)\]", r.text)[1] for r in model_rows}
    assert gpus == {prof.kernel_model.gpu}  # each GPU's own model, not one figure on every GPU
