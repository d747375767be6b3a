"""compare (issue 18): a profile compared with itself, the argument order kept, --profile refused."""

from __future__ import annotations

from costmodel import STRATEGIES, Scenario, load_profile
from costmodel.answers.compare import column_labels, compare_table, compare_wide
from costmodel.cli.main import main


def test_a_profile_compared_with_itself_gets_two_labelled_columns():
    profile = load_profile("h200-sxm-nvlink")
    wide = compare_wide(compare_table(Scenario(vocab=202048, tp=8, batch=16), [profile, profile]))
    a, b = "total_us[h200-sxm-nvlink (#1)]", "total_us[h200-sxm-nvlink (#2)]"
    assert list(wide.columns[1:3]) == [a, b] and (wide[a] == wide[b]).all()
    assert column_labels(["x", "y", "x"]) == ["x (#1)", "y", "x (#3)"]


def test_columns_follow_the_argument_order(capsys):
    assert main(["compare", "h200-sxm-nvlink", "h100-sxm-nvlink", "--tp", "8", "--batch", "16",
                 "--engine", "none"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("[1] h200-sxm-nvlink") and out[2].startswith("[2] h100-sxm-nvlink")
    assert out[3].index("us/call [1]") < out[3].index("us/call [2]")


def test_profile_flag_is_refused_not_ignored(capsys):
    assert main(["compare", "h200-sxm-nvlink", "h100-sxm-nvlink", "--profile", "cpu-gloo"]) == 2
    assert "--profile is not used" in capsys.readouterr().err


def test_compare_text_is_narrow_and_says_the_crossover_in_words(capsys):
    """issue 18: compare printed ~235 columns and NaN for both 'wins everywhere' and 'never wins'."""
    assert main(["compare", "h200-sxm-nvlink", "cpu-gloo", "--tp", "8", "--batch", "16", "--engine", "none"]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = [x for x in lines if "us/call [1]" in x or x.split() and x.split()[0] in STRATEGIES]
    assert max(len(x) for x in table) <= 140 and max(len(x) for x in lines if x not in table) <= 100
    assert any("wins at every batch in range" in x for x in table) and not any(" nan" in x for x in table)
    frame = compare_table(Scenario(vocab=202048, tp=8, batch=16), [load_profile("cpu-gloo")])
    row = frame.set_index("strategy").loc["local_argmax_pairs"]
    assert row["crossover"] == "wins at every batch in range" and row["crossover_batch"] != row["crossover_batch"]
