"""calibration.logs.import_published (issue 19 item 6): the published-collectives-2026 folder imports table by table -
rccl-tests logs through the nccl-tests importer, markdown summary tables through a checked parser - and what is not
a table is refused in one line naming why."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calibration.logs.import_nccl_tests import Hints, cli_error, parse_nccl_tests_text
from calibration.logs.import_published import (
    import_manifest,
    import_table,
    main,
    parse_markdown_tables,
    parse_size_bytes,
    parse_value,
    read_manifest,
)
from costmodel.io.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "data" / "reference" / "published-collectives-2026"
MANIFEST = FOLDER / "MANIFEST.csv"
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_markdown_tables_are_found_with_their_lines_and_cells():
    text = "# t\n\n| Size | busbw |\n|---|--:|\n| 4M | 63.18 GB/s |\n| **Avg** | 1 |\nafter\n| a |\n|-|\n| b |\n"
    first, second = parse_markdown_tables(text, "t.md")
    assert first.line == 3 and first.header == ("Size", "busbw")
    assert first.rows == ((5, ("4M", "63.18 GB/s")), (6, ("**Avg**", "1")))
    assert second.line == 8 and second.rows == ((10, ("b",)),)


def test_a_row_with_another_cell_count_is_refused_naming_its_line():
    with pytest.raises(InputError, match=r"t.md:4: row has 3 cells, its table's header \(line 1\) 2"):
        parse_markdown_tables("| a | b |\n|---|---|\n| 1 | 2 |\n| 1 | 2 | 3 |\n", "t.md")


@pytest.mark.parametrize(("cell", "nbytes"), [("4M", 4 * 2**20), ("128K", 131072), ("1 MB", 2**20), ("8B", 8),
                                              ("1024 MB", 2**30), ("**8G**", 8 * 2**30), ("4 KB", 4096)])
def test_sizes_use_binary_units(cell, nbytes):
    assert parse_size_bytes(cell, "x") == nbytes


@pytest.mark.parametrize("cell", ["Avg", "4", "1.5B", "-4M", "4Q", ""])
def test_what_is_not_a_size_is_refused(cell):
    with pytest.raises(InputError, match="not a message size|whole number of bytes"):
        parse_size_bytes(cell, "x")


def test_values_check_their_unit_against_the_column_kind():
    assert parse_value("**132.09**", "busbw_gbps", "x") == 132.09
    assert parse_value("23.93 µs", "time_us", "x") == 23.93 and parse_value("~39.4", "busbw_gbps", "x") == 39.4
    with pytest.raises(InputError, match="in GB/s, but the column is read as time_us"):
        parse_value("1.2 GB/s", "time_us", "x")
    with pytest.raises(InputError, match="must be > 0"):
        parse_value("0.00", "busbw_gbps", "x")
    with pytest.raises(InputError, match="is not a number"):
        parse_value("---", "busbw_gbps", "x")


@FAST
@given(st.text(alphabet="|-: ab1\n*#", max_size=200))
def test_fuzz_any_text_gives_tables_or_one_line(text):
    try:
        tables = parse_markdown_tables(text, "fuzz.md")
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    for t in tables:
        assert all(len(cells) == len(t.header) for _line, cells in t.rows)


CELL = st.text(alphabet="abc 0123456789.*", min_size=1, max_size=8).map(str.strip).filter(bool)


@FAST
@given(st.integers(1, 5).flatmap(lambda n: st.lists(st.lists(CELL, min_size=n, max_size=n), min_size=1,
                                                     max_size=6)))
def test_fuzz_generated_tables_round_trip(rows):
    header, body = rows[0], rows[1:]
    text = "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                     + ["| " + " | ".join(r) + " |" for r in body]) + "\n"
    (table,) = parse_markdown_tables(text)
    assert table.header == tuple(header) and [cells for _line, cells in table.rows] == [tuple(r) for r in body]


def test_rccl_tests_rank_lines_without_a_gpu_name_import():
    log = (FOLDER / "multinode" / "mi355xx16_all_reduce_hisohara-aac14-pollara400-2node-rccl.log").read_text()
    rows = parse_nccl_tests_text(log, "mi355x.log", Hints(op="all_reduce"))
    assert set(rows["world_size"]) == {16} and set(rows["nodes"]) == {2} and set(rows["gpu"]) == {"unknown"}
    named = parse_nccl_tests_text(log, "mi355x.log", Hints(op="all_reduce", gpu="AMD Instinct MI355X"))
    assert set(named["gpu"]) == {"AMD Instinct MI355X"}
    assert named.iloc[-1]["bytes_per_rank"] == 8589934592 and named.iloc[-1]["median_us"] == 43643.0


def test_every_table_of_the_folder_imports_and_the_committed_csv_is_its_output():
    manifest = read_manifest(MANIFEST)
    listed = set(manifest["file"])
    on_disk = {str(p.relative_to(FOLDER)) for p in FOLDER.rglob("*") if p.is_file()} - {"MANIFEST.csv", "SOURCES.md"}
    assert on_disk == listed  # every published file has a manifest entry
    for _, entry in manifest.iterrows():
        if entry["format"] == "none":
            with pytest.raises(InputError, match="not a table this importer reads: "):
                import_table(entry, FOLDER)
        else:
            assert len(import_table(entry, FOLDER)) > 0, entry["table"]
    out = import_manifest(MANIFEST)
    committed = pd.read_csv(ROOT / "data" / "reference" / "published-collectives-2026.csv", dtype=str,
                            keep_default_na=False)
    fresh = pd.read_csv(io.StringIO(out.to_csv(index=False)), dtype=str, keep_default_na=False)
    pd.testing.assert_frame_equal(committed, fresh)
    # the 1-node MI325X section (lines 62-65 of a file of four runs): 8 ranks, its own three rows
    one = out[out["table"] == "mi325xx8-all_reduce-1node"]
    assert list(one["world_size"]) == [8] * 3 and list(one["median_us"]) == [23719.0, 47217.0, 94222.0]
    # a busbw summary row keeps the busbw (validate turns it into a time); all_gather sizes are the gathered buffer
    ag = out[out["table"] == "b300x8-all_gather-128m-repeats"]
    assert set(ag["bytes_per_rank"]) == {16 * 2**20} and ag["busbw_gbps"].iloc[0] == 565.34


def test_cli_refuses_a_manifest_without_its_columns(tmp_path):
    bad = tmp_path / "m.csv"
    bad.write_text("file,table\nx.log,t\n")
    assert main(["--manifest", str(bad), "--out", str(tmp_path / "o.csv")]) == 2


def test_both_importers_word_their_errors_alike(capsys, tmp_path):
    """cli_error: the one error line and exit status the two importer CLIs share."""
    assert cli_error(InputError("x.csv: bad row 3"), None) == 2
    assert capsys.readouterr().err == "error: x.csv: bad row 3\n"
    assert cli_error(PermissionError(13, "Permission denied", str(tmp_path / "o.csv")), tmp_path / "o.csv") == 2
    assert capsys.readouterr().err == f"error: cannot write {tmp_path / 'o.csv'}: Permission denied\n"
    assert cli_error(KeyboardInterrupt(), tmp_path / "o.csv") == 130
    assert capsys.readouterr().err == "error: interrupted\n"
