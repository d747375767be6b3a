"""compare (issue 18): a profile compared with itself, the argument order kept, --profile refused."""

from __future__ import annotations

from costmodel import Scenario, load_profile
from costmodel.answers.compare import column_labels, compare_table, compare_wide
from costmodel.cli.main import main


def test_a_profile_compared_with_itself_gets_two_labelled_columns():
    profile = load_profile("h200-sxm-nvlink")
    wide = compare_wide(compare_table(Scenario(vocab=202048, tp=8, batch=16), [profile, profile]))
    a, b = "total_us[h200-sxm-nvlink (#1)]", "total_us[h200-sxm-nvlink (#2)]"
    assert list(wide.columns[1:3]) == [a, b] and (wide[a] == wide[b]).all()
    assert column_labels(["x", "y", "x"]) == ["x (#1)", "y", "x (#3)"]


def test_columns_follow_the_argument_order(capsys):
    assert main(["compare", "h200-sxm-nvlink", "h100-sxm-nvlink", "--tp", "8", "--batch", "16"]) == 0
    header = capsys.readouterr().out.splitlines()[1]
    assert header.index("total_us[h200-sxm-nvlink]") < header.index("total_us[h100-sxm-nvlink]")


def test_profile_flag_is_refused_not_ignored(capsys):
    assert main(["compare", "h200-sxm-nvlink", "h100-sxm-nvlink", "--profile", "cpu-gloo"]) == 2
    assert "--profile is not used" in capsys.readouterr().err
