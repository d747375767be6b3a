"""predict's prose lines wrap at ~100 columns (issue 18: they ran to 200-250); the strategy table keeps its columns."""

from __future__ import annotations

from costmodel.cli.main import main
from costmodel.cli.render import TEXT_WIDTH, wrap_lines


def test_wrap_lines_keeps_words_and_indents_continuations():
    line = "sources: " + "; ".join(f"part{i} measured (a/very/long/path{i}.csv)" for i in range(8))
    out = wrap_lines([line, "short"])
    assert out[-1] == "short" and len(out) > 2
    assert all(len(x) <= TEXT_WIDTH for x in out) and all(x.startswith("    ") for x in out[1:-1])
    assert " ".join(x.strip() for x in out[:-1]) == line  # nothing lost, no word split


def test_predict_header_lines_fit_in_the_width(capsys):
    assert main(["predict", "--profile", "cpu-gloo", "--tp", "4", "--batch", "16", "--no-intervals",
                 "--engine", "vllm"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[2:lines.index("")]  # after the profile and scenario lines, up to the table
    assert any(x.startswith("sources: ") for x in header)
    assert all(len(x) <= TEXT_WIDTH for x in header), max(header, key=len)


def test_sweep_names_the_saving_as_every_other_table_does(tmp_path):
    """issue 18: `saving_us` in the sweep vs `saving_per_draft_call_us` in compare / recommend / the dashboard."""
    import csv

    out = tmp_path / "s.csv"
    assert main(["sweep", "--tp", "8", "--batch", "1,64", "--out", str(out)]) == 0
    header = next(csv.reader(out.open()))
    assert "saving_per_draft_call_us" in header and "saving_us" not in header
