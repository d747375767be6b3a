"""Safe outputs (costmodel/io/outputs.py): whole or nothing, never over an input, never a FIFO or device."""

from __future__ import annotations

import json
import os
import threading

import pandas as pd
import pytest

from calibration.fitting.fit import main as fit_main
from calibration.logs.import_nccl_tests import main as import_main
from costmodel.io.errors import InputError
from costmodel.io.outputs import atomic_path, check_output, write_text
from costmodel.io.safe_io import write_csv
from costmodel.profiles.store import PROFILE_DIR, save_profile
from tests.conftest import ROOT


def test_output_that_is_an_input_is_refused_by_path_link_and_relative_name(tmp_path, monkeypatch):
    src = tmp_path / "in.csv"
    src.write_text("a\n1\n")
    (tmp_path / "link.csv").symlink_to(src)
    monkeypatch.chdir(tmp_path)
    for out in (src, tmp_path / "link.csv", "in.csv", tmp_path / "sub" / ".." / "in.csv"):
        (tmp_path / "sub").mkdir(exist_ok=True)
        with pytest.raises(InputError, match="is also an input of this command"):
            check_output(out, [src])
    assert check_output(tmp_path / "other.csv", [src, None, "-"]) == tmp_path / "other.csv"


@pytest.mark.parametrize("kind", ["fifo", "dir", "missing-dir"])
def test_non_regular_outputs_are_refused(tmp_path, kind):
    target = tmp_path / "x"
    if kind == "fifo":
        os.mkfifo(target)
        match = "FIFO"
    elif kind == "dir":
        target.mkdir()
        match = "is a directory"
    else:
        target = tmp_path / "nope" / "x.csv"
        match = "does not exist"
    with pytest.raises(InputError, match=match):
        write_text(target, "data")


def test_a_failed_write_keeps_the_earlier_file_and_leaves_no_temporary(tmp_path):
    out = tmp_path / "out.csv"
    out.write_text("earlier\n")
    with pytest.raises(RuntimeError), atomic_path(out) as tmp:
        tmp.write_text("half a fi")
        raise RuntimeError("disk full")
    assert out.read_text() == "earlier\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]


def test_replacing_keeps_the_permissions_of_the_replaced_file(tmp_path):
    out = tmp_path / "out.txt"
    out.write_text("old")
    os.chmod(out, 0o640)
    write_text(out, "new")
    assert out.read_text() == "new" and (os.stat(out).st_mode & 0o777) == 0o640


def test_concurrent_writers_leave_one_complete_output(tmp_path):
    out = tmp_path / "sweep.csv"
    bodies = {name: (name * 200_000) + "\n" for name in "ab"}
    errors: list[BaseException] = []

    def writer(name: str) -> None:
        try:
            for _ in range(5):
                write_text(out, bodies[name])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and out.read_text() in bodies.values()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep.csv"]


def test_write_csv_refuses_its_input_and_writes_atomically(tmp_path):
    src = tmp_path / "w.csv"
    src.write_text("batch,weight\n1,1\n")
    with pytest.raises(InputError, match="is also an input"):
        write_csv(pd.DataFrame({"x": [1]}), src, inputs=[src])
    assert src.read_text() == "batch,weight\n1,1\n"
    write_csv(pd.DataFrame({"x": ["=1+1"]}), tmp_path / "o.csv", inputs=[src])
    assert (tmp_path / "o.csv").read_text() == "x\n'=1+1\n"


def test_save_profile_never_over_an_input(tmp_path):
    doc = (PROFILE_DIR / "cpu-gloo.json").read_text()
    path = tmp_path / "p.json"
    path.write_text(doc)
    with pytest.raises(InputError, match="profile .*is also an input"):
        save_profile(json.loads(doc), path, [path])
    assert path.read_text() == doc


def test_fit_refuses_to_overwrite_its_input_before_fitting(tmp_path, capsys):
    src = tmp_path / "m.csv"
    text = (ROOT / "data" / "calibration" / "cpu-gloo" / "collectives.csv").read_text()
    src.write_text(text)
    assert fit_main([str(src), "--out", str(src)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is also an input" in err[0]
    assert src.read_text() == text


def test_import_nccl_tests_refuses_to_overwrite_its_log(tmp_path, capsys):
    logs = sorted((ROOT / "data" / "reference" / "nccl-tests").glob("*.log"))
    log = tmp_path / "run.log"
    text = logs[0].read_text()
    log.write_text(text)
    assert import_main([str(log), "--out", str(log)]) == 2
    assert "is also an input" in capsys.readouterr().err
    assert log.read_text() == text
