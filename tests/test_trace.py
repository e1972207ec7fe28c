"""The trace format: its reader (exact values, every defect located) and writer."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from planner.errors import InputError
from planner.simulate.trace import (
    TRACE_COLUMNS,
    read_trace,
    trace_markdown,
    write_trace,
)
from tests.tiny import scenario, ts

HEADER = ",".join(TRACE_COLUMNS)
ROOT = Path(__file__).resolve().parent.parent


def tiny():
    """Area a → teams t1 (p1, =SUM(A1)), t2 (p3); c1 16 H100s, c2 32 A100s; p3 on c2 only."""
    return scenario(
        clusters=[("c1", "H100", 2, 8), ("c2", "A100", 4, 8)],
        org=[("a", "", 1.0), ("t1", "a", 1.0), ("t2", "a", 1.0), ("p1", "t1", 1.0),
             ("=SUM(A1)", "t1", 1.0), ("p3", "t2", 1.0)],
        budgets=[("p1", 100.0), ("=SUM(A1)", 50.0), ("p3", 10.0, ("c2",))],
        quarter_start="2026-10-01", quarter_end="2027-01-01", as_of="2026-10-01",
    )


def write(tmp_path: Path, text: str, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def test_trace_read_back_exactly(tmp_path):
    # Rows out of order, one job_id that looks like a number (kept verbatim), one
    # formula-looking project id, an offset time converted to UTC, an empty optional
    # cell (default), a protected runtime over the 8 h cap (clipped), a tie on submit
    # broken by job_id.
    path = write(tmp_path, "\n".join([
        HEADER,
        "007,p1,c1,2026-10-02T06:00:00+02:00,8,10,12,false",
        "+1,=SUM(A1),c2,2026-10-01,1,0.5,,",
        "b,p3,c2,2026-10-02 04:00:00Z,32,1e1,0,TRUE",
        "a,p1,c1,2026-10-02T04:00:00,2,2.25,1.5,0",
        "",
    ]))
    got = read_trace(path, tiny())
    want = pd.DataFrame({
        "job_id": pd.Series(["+1", "007", "a", "b"], dtype="str"),
        "project": pd.Series(["=SUM(A1)", "p1", "p1", "p3"], dtype="str"),
        "cluster": pd.Series(["c2", "c1", "c1", "c2"], dtype="str"),
        "submit": pd.Series([ts("2026-10-01"), ts("2026-10-02T04:00"),
                             ts("2026-10-02T04:00"), ts("2026-10-02T04:00")],
                            dtype="datetime64[ns, UTC]"),
        "gpus": pd.Series([1, 8, 2, 32], dtype="int64"),
        "duration_hours": [0.5, 10.0, 2.25, 10.0],
        "min_runtime_hours": [0.0, 8.0, 1.5, 0.0],
        "resumable": [True, False, False, True],
    })
    assert tuple(got.columns) == TRACE_COLUMNS
    assert list(got.index) == [0, 1, 2, 3]
    pd.testing.assert_frame_equal(got, want)


def test_trace_optional_columns_absent_take_defaults_and_cap_is_a_parameter(tmp_path):
    path = write(tmp_path, "submit,job_id,gpus,cluster,project,duration_hours\n"
                           "2026-12-31T23:59:59,x,4,c1,p1,3\n")
    got = read_trace(path, tiny())
    assert got["min_runtime_hours"].tolist() == [0.0]
    assert got["resumable"].tolist() == [True]
    assert got["resumable"].dtype == bool
    path = write(tmp_path, HEADER + "\nx,p1,c1,2026-10-01,4,3,5,\n")
    assert read_trace(path, tiny(), cap_hours=2.0)["min_runtime_hours"].tolist() == [2.0]
    assert read_trace(path, tiny())["min_runtime_hours"].tolist() == [5.0]


GOOD = "ok,p1,c1,2026-10-02,1,1,0,true"

# (what, data row or whole file, row, column, words the message holds)
BAD_ROWS = [
    ("gpus not a number", "j,p1,c1,2026-10-02,x,1,0,true", 3, "gpus", "not a number"),
    ("gpus not whole", "j,p1,c1,2026-10-02,2.5,1,0,true", 3, "gpus", "not a whole number"),
    ("gpus zero", "j,p1,c1,2026-10-02,0,1,0,true", 3, "gpus", "≥ 1"),
    ("gpus over the cluster", "j,p1,c1,2026-10-02,17,1,0,true", 3, "gpus", "has 16"),
    ("duration zero", "j,p1,c1,2026-10-02,1,0,0,true", 3, "duration_hours", "> 0"),
    ("duration negative", "j,p1,c1,2026-10-02,1,-2,0,true", 3, "duration_hours", "> 0"),
    ("duration infinite", "j,p1,c1,2026-10-02,1,inf,0,true", 3, "duration_hours",
     "not a number"),
    ("duration overflows", "j,p1,c1,2026-10-02,1,1e400,0,true", 3, "duration_hours",
     "not a number"),
    ("min runtime negative", "j,p1,c1,2026-10-02,1,1,-1,true", 3, "min_runtime_hours", "≥ 0"),
    ("min runtime text", "j,p1,c1,2026-10-02,1,1,soon,true", 3, "min_runtime_hours",
     "not a number"),
    ("resumable not a bool", "j,p1,c1,2026-10-02,1,1,0,maybe", 3, "resumable",
     "not true or false"),
    ("submit not a date", "j,p1,c1,yesterday,1,1,0,true", 3, "submit", "not an ISO 8601"),
    ("submit impossible date", "j,p1,c1,2026-13-45,1,1,0,true", 3, "submit",
     "not an ISO 8601"),
    ("submit before the quarter", "j,p1,c1,2026-09-30T23:59:59,1,1,0,true", 3, "submit",
     "outside the scenario's quarter"),
    ("submit at quarter end", "j,p1,c1,2027-01-01,1,1,0,true", 3, "submit",
     "outside the scenario's quarter"),
    ("duplicate job_id", "ok,p1,c1,2026-10-02,1,1,0,true", 3, "job_id",
     "duplicate job_id 'ok' (first in row 2)"),
    ("empty job_id", ",p1,c1,2026-10-02,1,1,0,true", 3, "job_id", "empty"),
    ("unknown project", "j,p9,c1,2026-10-02,1,1,0,true", 3, "project", "unknown project"),
    ("team, not a project", "j,t1,c1,2026-10-02,1,1,0,true", 3, "project", "inner node"),
    ("unknown cluster", "j,p1,c9,2026-10-02,1,1,0,true", 3, "cluster", "unknown cluster"),
    ("cluster not allowed", "j,p3,c1,2026-10-02,1,1,0,true", 3, "cluster",
     "may not use cluster 'c1'"),
    ("too many values", "j,p1,c1,2026-10-02,1,1,0,true,extra", 3, None, "more values"),
]


@pytest.mark.parametrize(("what", "line", "row", "column", "words"), BAD_ROWS,
                         ids=[case[0] for case in BAD_ROWS])
def test_trace_bad_row_is_located(tmp_path, what, line, row, column, words):
    path = write(tmp_path, f"{HEADER}\n{GOOD}\n{line}\n", name="jobs.csv")
    with pytest.raises(InputError) as caught:
        read_trace(path, tiny())
    problems = caught.value.problems
    assert [(p.file, p.row, p.column) for p in problems] == [("jobs.csv", row, column)], what
    assert words in problems[0].message


BAD_FILES = [
    ("missing column", "job_id,project,cluster,submit,gpus\nj,p1,c1,2026-10-02,1\n",
     [(1, "duration_hours", "missing column")]),
    ("unknown column", HEADER + ",colour\n" + GOOD + ",red\n", [(1, "colour", "unknown column")]),
    ("column twice", HEADER + ",gpus\n" + GOOD + ",1\n", [(1, "gpus", "appears twice")]),
    ("empty file", "", [(None, None, "empty")]),
    ("no header", "\n" + GOOD + "\n", [(1, None, "no header")]),
    ("unnamed column with values", HEADER + ",\n" + GOOD + ",5\n",
     [(1, None, "column 9 has values but no name")]),
]


@pytest.mark.parametrize(("what", "text", "expected"), BAD_FILES,
                         ids=[case[0] for case in BAD_FILES])
def test_trace_bad_file_is_located(tmp_path, what, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(InputError) as caught:
        read_trace(path, tiny())
    got = [(p.row, p.column) for p in caught.value.problems]
    assert got == [(row, column) for row, column, _ in expected], what
    for problem, (_, _, words) in zip(caught.value.problems, expected, strict=True):
        assert problem.file == "trace.csv" and words in problem.message


def test_trace_not_utf8_and_missing_file(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_bytes((HEADER + "\n").encode() + b"j,p\xff1,c1,2026-10-02,1,1,0,true\n")
    with pytest.raises(InputError) as caught:
        read_trace(path, tiny())
    assert [(p.file, p.row) for p in caught.value.problems] == [("trace.csv", 2)]
    assert "UTF-8" in caught.value.problems[0].message
    with pytest.raises(InputError, match="no such trace file"):
        read_trace(tmp_path / "absent.csv", tiny())


def test_trace_every_problem_is_collected_at_once(tmp_path):
    # Every bad row of the table in one file: each keeps its own row; a blank line
    # and a quoted newline in an id do not shift the numbering.
    lines = [HEADER, GOOD, '"two\nlines",p1,c1,2026-10-02,1,1,0,true', ",,,,,,,"]
    lines += [case[1] for case in BAD_ROWS]
    path = write(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(InputError) as caught:
        read_trace(path, tiny())
    got = sorted((p.row, p.column or "") for p in caught.value.problems)
    want = sorted((5 + i, case[3] or "") for i, case in enumerate(BAD_ROWS))
    # the duplicate of "ok" and the empty job_id are one row each; "j" repeats from row 5
    repeats = [(5 + i, "job_id") for i in range(1, len(BAD_ROWS))
               if BAD_ROWS[i][1].startswith("j,")]
    assert got == sorted(want + repeats)
    assert len({case[0] for case in BAD_ROWS}) >= 12


def test_trace_writer_round_trips_with_the_same_bytes(tmp_path):
    path = write(tmp_path, "\n".join([
        HEADER,
        "007,p1,c1,2026-10-02T06:00:00.25+02:00,8,0.1,12,false",
        "+1,=SUM(A1),c2,2026-10-01,1,0.3333333333333333,,",
    ]) + "\n")
    first = read_trace(path, tiny())
    out = write_trace(first, tmp_path / "out" / "again.csv")
    text = out.read_text(encoding="utf-8")
    assert text.splitlines() == [
        HEADER,
        "+1,=SUM(A1),c2,2026-10-01T00:00:00Z,1,0.3333333333333333,0.0,true",
        "007,p1,c1,2026-10-02T04:00:00.250000Z,8,0.1,8.0,false",
    ]
    pd.testing.assert_frame_equal(read_trace(out, tiny()), first)
    write_trace(read_trace(out, tiny()), tmp_path / "third.csv")
    assert (tmp_path / "third.csv").read_bytes() == out.read_bytes()
    assert not [p for p in (tmp_path / "out").iterdir() if p.name != "again.csv"]


def test_trace_80k_rows_read_well_under_two_seconds(tmp_path):
    n = 80_000
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({
        "job_id": [f"j{i:05d}" for i in range(n)],
        "project": rng.choice(["p1", "=SUM(A1)"], n),
        "cluster": "c1",
        "submit": ts("2026-10-01") + pd.to_timedelta(rng.integers(0, 91 * 86400, n), unit="s"),
        "gpus": rng.integers(1, 17, n),
        "duration_hours": rng.random(n) * 10 + 0.01,
        "min_runtime_hours": rng.random(n) * 8,
        "resumable": rng.random(n) < 0.5,
    })
    path = write_trace(frame, tmp_path / "big.csv")
    best = float("inf")
    for _ in range(2):
        began = time.perf_counter()
        got = read_trace(path, tiny())
        best = min(best, time.perf_counter() - began)
    assert len(got) == n and got["submit"].is_monotonic_increasing
    assert best < 2.0, f"80k rows read in {best:.2f} s"


def test_trace_columns_table_is_in_the_readme():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert trace_markdown() in readme


def test_trace_header_only_is_an_empty_trace_with_the_schema_dtypes(tmp_path):
    got = read_trace(write(tmp_path, HEADER + "\n"), tiny())
    assert tuple(got.columns) == TRACE_COLUMNS and len(got) == 0
    assert [str(t) for t in got.dtypes] == ["str", "str", "str", "datetime64[ns, UTC]",
                                            "int64", "float64", "float64", "bool"]
