"""planner ingest loses nothing and writes nothing the scenario would refuse.

Two ingests at once both land (the ledger's lock); a record ``usage.csv`` would refuse
(GPUs beyond any cluster or beyond its own, a non-finite quantity, a name with control
characters, a time Kueue cannot write) stops the ingest with exit 2 naming the file, the
line and the field, and the ledger stays as it was; so does a file too deeply nested,
a FIFO or a folder. Two different records of one job are reported, not resolved.
"""

from __future__ import annotations

import copy
import json
import os
import threading
import time
from pathlib import Path

import pytest

from planner.cli import main
from planner.ingest import ingest_usage
from planner.ingest import run as ingest_run
from planner.inputs.load import load_scenario, validate_scenario
from tests.scenario_factory import USAGE_CSV, write_scenario

FIXTURES = Path(__file__).resolve().parent / "fixtures"
WORKLOADS = FIXTURES / "kueue-workloads.json"
NOW = "2026-11-02T10:00:00"


def sacct_lines(first: int, n: int, gres: str = "gres/gpu=1") -> str:
    """``n`` finished one-hour jobs on h100-a (the tiny scenario: 4 nodes × 8 = 32 GPUs)."""
    return "".join(f"{first + i}|p1|h100-a|{gres}|2026-10-05T00:00:00|2026-10-05T01:00:00|"
                   "COMPLETED\n" for i in range(n))


def flat(text: str) -> str:
    return " ".join(text.split())


def ingest(kind: str, path: Path, folder: Path) -> int:
    return main(["ingest", kind, str(path), str(folder), "--now", NOW])


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    return write_scenario(tmp_path / "sc")


# --- H1: two ingests at once -----------------------------------------------------------------


def test_two_ingests_at_once_keep_every_row(folder: Path, tmp_path: Path, monkeypatch):
    """Both read the ledger before either writes (the read is slowed): both batches land.

    Without the ledger's lock the second write replaces the first: 100 of 200 rows lost,
    though both ingests reported "100 added".
    """
    files = []
    for k in range(2):
        files.append(tmp_path / f"s{k}.txt")
        files[-1].write_text(sacct_lines(5000 + 1000 * k, 100))
    real = ingest_run.read_ledger

    def slow(path):
        rows = real(path)
        time.sleep(0.5)  # the other ingest reads meanwhile, unless it waits on the lock
        return rows

    monkeypatch.setattr(ingest_run, "read_ledger", slow)
    reports, errors = [], []

    def one(path: Path) -> None:
        try:
            reports.append(ingest_usage(folder, "sacct", path, now=None))
        except Exception as error:  # noqa: BLE001 (reported below)
            errors.append(error)

    threads = [threading.Thread(target=one, args=(f,)) for f in files]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(r.counts["added"] for r in reports) == [100, 100]
    rows = (folder / "usage.csv").read_text().splitlines()[1:]
    assert len(rows) == 3 + 200  # the three rows of the tiny scenario and both batches
    assert validate_scenario(folder) == []


def test_the_lock_file_is_hidden_beside_the_ledger_and_no_input(folder: Path, tmp_path: Path):
    (tmp_path / "s.txt").write_text(sacct_lines(7000, 3))
    assert ingest("sacct", tmp_path / "s.txt", folder) == 0
    assert (folder / ".usage.csv.lock").is_file()
    assert validate_scenario(folder) == []  # not read as a table


# --- M1, M2: rows the scenario would refuse are never written --------------------------------


@pytest.mark.parametrize(("gres", "message"), [
    ("gres/gpu=" + "9" * 40, "40 digits, more GPUs than any cluster holds"),
    ("gres/gpu=5000000000", "must be > 0, ≤ 1e+09"),
    # M2: a 100,000-GPU job on a 32-GPU cluster is no job that ran
    ("gres/gpu=100000", "100,000 GPUs, but cluster 'h100-a' has 32 (4 nodes × 8)"),
    ("gres/gpu=33", "33 GPUs, but cluster 'h100-a' has 32"),
])
def test_a_sacct_gpu_count_the_scenario_refuses_exits_2_naming_line_and_field(
        folder: Path, tmp_path: Path, capsys, gres: str, message: str):
    before = (folder / "usage.csv").read_bytes()
    bad = tmp_path / "s.txt"
    bad.write_text(sacct_lines(7000, 2) + sacct_lines(8000, 1, gres))
    assert ingest("sacct", bad, folder) == 2
    err = flat(capsys.readouterr().err)
    assert "s.txt, row 3, column AllocTRES: " in err
    assert message in err
    assert "Traceback" not in err
    assert (folder / "usage.csv").read_bytes() == before
    assert validate_scenario(folder) == []


def test_a_whole_cluster_job_is_charged(folder: Path, tmp_path: Path):
    """Exactly the cluster's GPUs is what a whole-cluster job holds: not refused."""
    ok = tmp_path / "s.txt"
    ok.write_text(sacct_lines(8000, 1, "gres/gpu=32"))
    assert ingest("sacct", ok, folder) == 0
    assert "slurm:h100-a:8000,p1,h100-a,32," in (folder / "usage.csv").read_text()


def _workloads(tmp_path: Path, edit) -> Path:
    listed = json.loads(WORKLOADS.read_text())
    item = copy.deepcopy(listed["items"][0])
    edit(item)
    listed["items"].append(item)
    path = tmp_path / "wl.json"
    path.write_text(json.dumps(listed, allow_nan=True))
    return path


def _gpus(value):
    def edit(item):
        item["metadata"]["name"] = "other"
        for where in ("requests", "limits"):
            item["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"][
                where]["nvidia.com/gpu"] = value
    return edit


def _named(name):
    def edit(item):
        item["metadata"]["name"] = name
    return edit


def _past(seconds):
    def edit(item):
        item["metadata"]["name"] = "other"
        item["status"]["accumulatedPastExecutionTimeSeconds"] = seconds
    return edit


@pytest.mark.parametrize(("edit", "column", "message"), [
    (_gpus("1E"), "spec.podSets", "must be > 0, ≤ 1e+09"),
    (_gpus("1Ei"), "spec.podSets", "must be > 0, ≤ 1e+09"),
    (_gpus("9" * 400), None, "'999"),  # read as infinity
    (_gpus(float("nan")), "items[7].spec", "NaN is not a number"),
    (_gpus(float("inf")), "items[7].spec", "Infinity is not a number"),
    (_gpus(20), "spec.podSets", "40 GPUs, but cluster 'h100-a' has 32"),  # 2 pods × 20
    (_named("evil\nname"), "items[7].metadata.name", "control characters (\\n)"),
    (_named("evil\x1b[31mred"), "items[7].metadata.name", "control characters (\\x1b)"),
    (_named("evil\u2028line"), "items[7].metadata.name", "control characters (\\u2028)"),
    (_named("x" * 300), "items[7].metadata.name", "a Kubernetes name is at most 253"),
    (_past(10**15), "items[7].status.accumulatedPastExecutionTimeSeconds",
     "is not a number of seconds Kueue writes"),
    (_past(-5), "items[7].status.accumulatedPastExecutionTimeSeconds",
     "is not a number of seconds Kueue writes"),
])
def test_a_workload_the_scenario_refuses_exits_2_naming_item_and_field(
        folder: Path, tmp_path: Path, capsys, edit, column, message):
    before = (folder / "usage.csv").read_bytes()
    bad = _workloads(tmp_path, edit)
    assert ingest("kueue", bad, folder) == 2
    err = flat(capsys.readouterr().err)
    assert "Traceback" not in err
    assert "wl.json, row 8" in err  # the appended item is the eighth
    if column is not None:
        assert f"column {column}" in err
    assert message in err
    assert (folder / "usage.csv").read_bytes() == before
    assert validate_scenario(folder) == []


# --- M3: nesting no file of ours holds ------------------------------------------------------


@pytest.mark.parametrize("depth", [100, 100_000])
def test_deeply_nested_workloads_exit_2_without_a_traceback(folder: Path, tmp_path: Path,
                                                            capsys, depth: int):
    bad = tmp_path / "wl.json"
    bad.write_text('{"items": [' + "[" * depth + "]" * depth + "]}")
    before = (folder / "usage.csv").read_bytes()
    assert ingest("kueue", bad, folder) == 2
    err = flat(capsys.readouterr().err)
    assert "wl.json" in err and "nested deeper than 64 levels" in err
    assert (folder / "usage.csv").read_bytes() == before


# --- Low: what is not a file, and two stories of one job -------------------------------------


def test_a_fifo_or_a_folder_is_named_for_what_it_is(folder: Path, tmp_path: Path, capsys):
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)  # opened for reading, it would block until a writer came
    assert ingest("sacct", fifo, folder) == 2
    assert "is a named pipe (FIFO)" in flat(capsys.readouterr().err)
    assert ingest("kueue", tmp_path, folder) == 2
    assert "is a folder" in flat(capsys.readouterr().err)


def test_two_different_records_of_one_job_are_reported_and_not_written(
        folder: Path, tmp_path: Path, capsys):
    lines = (sacct_lines(9000, 1) + sacct_lines(9001, 1)
             + sacct_lines(9000, 1, "gres/gpu=4"))  # 9000 again, on 4 GPUs
    path = tmp_path / "s.txt"
    path.write_text(lines)
    assert ingest("sacct", path, folder) == 0
    out = flat(capsys.readouterr().out)
    assert ("skipped, two different records in the file (which one ran cannot be told) (1): "
            "slurm:h100-a:9000 (rows 1, 3)") in out
    text = (folder / "usage.csv").read_text()
    assert "slurm:h100-a:9000" not in text and "slurm:h100-a:9001" in text


def test_a_job_seen_running_then_finished_in_one_file_is_one_row(folder: Path, tmp_path: Path):
    path = tmp_path / "s.txt"
    path.write_text("9000|p1|h100-a|gres/gpu=1|2026-10-05T00:00:00|Unknown|RUNNING\n"
                    + sacct_lines(9000, 1))
    assert ingest("sacct", path, folder) == 0
    text = (folder / "usage.csv").read_text()
    assert "slurm:h100-a:9000,p1,h100-a,1,2026-10-05T00:00:00Z,2026-10-05T01:00:00Z,\n" in text


def test_a_refused_write_names_the_ledger_and_no_out_option(folder: Path, tmp_path: Path,
                                                            capsys, monkeypatch):
    path = tmp_path / "s.txt"
    path.write_text(sacct_lines(9000, 2))
    before = (folder / "usage.csv").read_bytes()

    def refuse(src, dst):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(os, "replace", refuse)
    assert ingest("sacct", path, folder) == 2
    err = flat(capsys.readouterr().err)
    assert "cannot write (Read-only file system)" in err
    assert "--out" not in err
    assert "fix the permissions of the scenario folder" in err
    assert (folder / "usage.csv").read_bytes() == before


# --- the same rules at validation: a hand-written usage row ----------------------------------


def test_validation_refuses_usage_beyond_its_cluster(tmp_path: Path):
    folder = write_scenario(tmp_path / "sc",
                            usage=USAGE_CSV + "j9,p1,h100-a,100000,2026-10-20,2026-10-21\n")
    problems = validate_scenario(folder)
    assert [(p.file, p.row, p.column) for p in problems] == [("usage.csv", 5, "gpus")]
    assert "100,000 GPUs, but cluster 'h100-a' has 32 (4 nodes × 8)" in problems[0].message
    load_scenario(write_scenario(tmp_path / "ok", usage=USAGE_CSV
                                 + "j9,p1,h100-a,32,2026-10-20,2026-10-21\n"))
