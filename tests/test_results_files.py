"""Result files carry their provenance, filled in by the writer, never by the caller."""

from __future__ import annotations

import json

import pytest

from planner.results import read_result, write_result

COLUMNS = [{"key": "case", "label": "case"},
           {"key": "cpu_s", "label": "CPU s", "unit": "s", "better": "lower"}]


def test_a_result_file_records_commit_date_machine_and_command(tmp_path):
    path = write_result("demo", title="Demo", what="a test", columns=COLUMNS,
                        rows=[{"case": "a", "cpu_s": 1.5}], notes=["one"],
                        command="python bench.py --runs 3", load_before=0.5, folder=tmp_path)
    body = read_result(path)
    assert body["name"] == "demo" and body["command"] == "python bench.py --runs 3"
    assert body["rows"] == [{"case": "a", "cpu_s": 1.5}]
    assert body["machine"]["cores"] >= 1 and body["machine"]["load_before"] == 0.5
    assert body["date"].endswith("Z") and body["commit"]
    assert json.loads(path.read_text())["notes"] == ["one"]


def test_rows_and_columns_are_checked(tmp_path):
    with pytest.raises(ValueError, match="not among the columns"):
        write_result("x", title="x", what="x", columns=COLUMNS, rows=[{"nope": 1}],
                      folder=tmp_path)
    with pytest.raises(ValueError, match="better"):
        write_result("x", title="x", what="x", rows=[],
                     columns=[{"key": "a", "label": "a", "better": "up"}], folder=tmp_path)
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="bad.json: missing"):
        read_result(tmp_path / "bad.json")
