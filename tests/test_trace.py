"""The trace format: its reader (exact values, every defect located) and writer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from data.philly_scenario import generate
from planner.cli import main
from planner.errors import InputError
from planner.inputs.load import load_scenario
from planner.simulate.philly import (
    ALLOCATED_SHARE,
    PHILLY_SCENARIO,
    convert_philly,
    philly_conversion,
    read_philly,
    teams,
)
from planner.simulate.trace import (
    TRACE_COLUMNS,
    offered_gpu_hours,
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
    # cell (default), a protected runtime over the 8 h cap (kept: the replay caps it), a
    # tie on submit broken by job_id; one stated time limit (12 h), the others by default (the
    # duration rounded up to a power of two hours, at least 1: 0.5 → 1, 2.25 → 4,
    # 10 → 16; short rows leave the last column empty).
    path = write(tmp_path, "\n".join([
        HEADER,
        "007,p1,c1,2026-10-02T06:00:00+02:00,8,10,12,false,12",
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
        "min_runtime_hours": [0.0, 12.0, 1.5, 0.0],
        "resumable": [True, False, False, True],
        "time_limit_hours": [1.0, 12.0, 4.0, 16.0],
    })
    assert tuple(got.columns) == TRACE_COLUMNS
    assert list(got.index) == [0, 1, 2, 3]
    pd.testing.assert_frame_equal(got, want)


def test_trace_optional_columns_absent_take_defaults_and_keep_the_asked_protection(tmp_path):
    path = write(tmp_path, "submit,job_id,gpus,cluster,project,duration_hours\n"
                           "2026-12-31T23:59:59,x,4,c1,p1,3\n")
    got = read_trace(path, tiny())
    assert got["min_runtime_hours"].tolist() == [0.0]
    assert got["resumable"].tolist() == [True]
    assert got["resumable"].dtype == bool
    path = write(tmp_path, HEADER + "\nx,p1,c1,2026-10-01,4,3,12,\n")
    # over the contract's 8 h cap, kept as written: the replay caps it (engine.contract_cap)
    assert read_trace(path, tiny())["min_runtime_hours"].tolist() == [12.0]


GOOD = "ok,p1,c1,2026-10-02,1,1,0,true,1"

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
    ("too many values", "j,p1,c1,2026-10-02,1,1,0,true,2,extra", 3, None, "more values"),
    ("time limit below the duration", "j,p1,c1,2026-10-02,1,3,0,true,2", 3,
     "time_limit_hours", "below the job's duration_hours 3"),
    ("time limit not a number", "j,p1,c1,2026-10-02,1,3,0,true,long", 3,
     "time_limit_hours", "not a number"),
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
     [(1, None, "column 10 has values but no name")]),
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
    with pytest.raises(InputError, match="no such file"):
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
    # besides its own defect, every later row with job_id "j" repeats the one in row 5
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
        "+1,=SUM(A1),c2,2026-10-01T00:00:00Z,1,0.3333333333333333,0.0,true,1.0",
        "007,p1,c1,2026-10-02T04:00:00.250000Z,8,0.1,12.0,false,1.0",
    ]
    pd.testing.assert_frame_equal(read_trace(out, tiny()), first)
    write_trace(read_trace(out, tiny()), tmp_path / "third.csv")
    assert (tmp_path / "third.csv").read_bytes() == out.read_bytes()
    assert not [p for p in (tmp_path / "out").iterdir() if p.name != "again.csv"]


def test_trace_80k_rows_read_sorted(tmp_path):
    # how fast: benchmarks/trace_read.py (speed targets live in benchmarks, not unit tests)
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
    got = read_trace(path, tiny())
    assert len(got) == n and got["submit"].is_monotonic_increasing
    assert list(got["job_id"]) == list(frame.sort_values(["submit", "job_id"])["job_id"])


def test_trace_columns_table_is_the_docs_reference():
    from planner.reference import TRACE_PAGE, pages

    assert trace_markdown() in pages()[TRACE_PAGE]


def test_trace_header_only_is_an_empty_trace_with_the_schema_dtypes(tmp_path):
    got = read_trace(write(tmp_path, HEADER + "\n"), tiny())
    assert tuple(got.columns) == TRACE_COLUMNS and len(got) == 0
    assert [str(t) for t in got.dtypes] == ["str", "str", "str", "datetime64[ns, UTC]",
                                            "int64", "float64", "float64", "bool",
                                            "float64"]


# --------------------------------------------------------------------------- Philly

PHILLY = ROOT.parent / "shared" / "data" / "traces" / "philly-vc" / "philly.csv"
PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster"


def philly_scenario_folder(folder: Path) -> Path:
    """Areas a (2) → t1 (2: p1, p2), t2 (1: p3, p4); b (1) → t3 (p5); c1 16, c2 32 GPUs.

    Strategic shares: t1 = 2/3 · 2/3 = 4/9, t3 = 1/3, t2 = 2/3 · 1/3 = 2/9, so the
    teams rank t1, t3, t2. p3 may use only c2.
    """
    folder.mkdir(parents=True)
    (folder / "scenario.toml").write_text(
        'name = "tiny-philly"\nquarter_start = 2026-10-01\nquarter_end = 2027-01-01\n'
        "as_of = 2026-10-01\n")
    (folder / "clusters.csv").write_text(
        "cluster,gpu_type,nodes,gpus_per_node\nc1,H100,2,8\nc2,H100,4,8\n")
    (folder / "org.csv").write_text(
        "id,parent,weight\na,,2\nt1,a,2\np1,t1,1\np2,t1,1\nt2,a,1\np3,t2,1\np4,t2,1\n"
        "b,,1\nt3,b,1\np5,t3,1\n")
    (folder / "budgets.csv").write_text(
        "project,gpu_hours,clusters\np1,100,\np2,100,\np3,100,c2\np4,100,\np5,100,\n")
    return folder


def synthetic_philly(path: Path) -> tuple[Path, dict[str, str]]:
    """Five VCs over 109 days (longer than the quarter: compressed); VC GPU-hours
    v1 > v2 > v3 > v4 > v5, so v1 → t1, v2 → t3, v3 → t2, v4 → t1, v5 → t3 (wrapping).
    One 64-GPU job fits no cluster and is dropped; 24-GPU jobs fit only c2."""
    rows = [PHILLY_HEADER]
    rng = np.random.default_rng(7)
    start = pd.Timestamp("2017-09-04 10:30:41")
    for vc, jobs, gpus in (("v1", 60, 8), ("v2", 50, 4), ("v3", 40, 2), ("v4", 30, 1),
                           ("v5", 8, 1)):
        for _ in range(jobs):
            stamp = start + pd.Timedelta(seconds=int(rng.integers(1, 108 * 86400)))
            duration = float(rng.integers(60, 40_000))
            size = int(rng.choice([1, gpus, 24 if vc == "v1" else gpus]))
            rows.append(f"{stamp:%Y-%m-%d %H:%M:%S},{duration},{size},{duration * size},{vc}")
    rows.append(f"{start:%Y-%m-%d %H:%M:%S},100.0,1,100.0,v5")  # the first submit
    rows.append(f"{start + pd.Timedelta(days=109):%Y-%m-%d %H:%M:%S},5.0,1,5.0,v4")  # the last
    rows.append(f"{start + pd.Timedelta(days=3):%Y-%m-%d %H:%M:%S},10.0,64,640.0,v2")
    path.write_text("\n".join(rows) + "\n")
    return path, {"v1": "t1", "v2": "t3", "v3": "t2", "v4": "t1", "v5": "t3"}


def philly_jobs(path: Path) -> pd.DataFrame:
    jobs = pd.read_csv(path, dtype={"cluster": str}).rename(columns={"cluster": "vc"})
    jobs["job_id"] = [f"philly-{row:06d}" for row in range(2, len(jobs) + 2)]
    return jobs.set_index("job_id")


def test_trace_philly_cli_on_a_synthetic_trace(tmp_path, capsys):

    folder = philly_scenario_folder(tmp_path / "sc")
    source, expected_teams = synthetic_philly(tmp_path / "philly.csv")
    out = tmp_path / "trace.csv"
    assert main(["trace", "philly", str(folder), "--in", str(source), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "190 of 191 Philly jobs kept, 1 dropped (1 more GPUs than any cluster" in printed
    assert main(["trace", "philly", str(folder), "--in", str(source),
                 "--out", str(tmp_path / "again.csv")]) == 0
    assert (tmp_path / "again.csv").read_bytes() == out.read_bytes()

    scenario = load_scenario(folder)
    trace = read_trace(out, scenario)  # valid: projects, allowed clusters, sizes, quarter
    conversion = philly_conversion(source, scenario)
    assert dict(conversion.teams) == expected_teams
    pd.testing.assert_frame_equal(conversion.trace, trace)

    source_jobs = philly_jobs(source)
    jobs = trace.set_index("job_id").join(source_jobs, how="left")
    parent = dict(zip(scenario.org["id"], scenario.org["parent"], strict=True))
    assert (jobs["project"].map(parent) == jobs["vc"].map(expected_teams)).all()
    assert set(jobs.loc[jobs["gpus"] == 24, "cluster"]) == {"c2"}
    assert set(jobs.loc[jobs["project"] == "p3", "cluster"]) <= {"c2"}
    assert set(trace["project"]) == {"p1", "p2", "p3", "p4", "p5"}
    # durations kept; GPU-hours of the kept jobs preserved
    assert np.allclose(jobs["duration_hours"] * 3600, jobs["duration"])
    kept = source_jobs.loc[source_jobs["num_gpus"] <= 32]
    assert (trace["gpus"] * trace["duration_hours"]).sum() == pytest.approx(
        (kept["num_gpus"] * kept["duration"]).sum() / 3600, rel=1e-12)
    # time: the first submit at quarter start, the last just inside, compressed linearly
    quarter = 92 * 86400
    factor = (quarter - 1) / (109 * 86400)
    assert conversion.factor == pytest.approx(factor)
    assert trace["submit"].min() == scenario.config.quarter_start
    assert trace["submit"].max() == scenario.config.quarter_start + pd.Timedelta(
        seconds=quarter - 1)
    offsets = (pd.to_datetime(jobs["timestamp"]) - pd.Timestamp("2017-09-04 10:30:41"))
    want = np.floor(offsets.dt.total_seconds() * factor)
    assert ((jobs["submit"] - scenario.config.quarter_start).dt.total_seconds()
            == want).all()
    # protected time: whole-node jobs always, smaller ones by hash (about 3 in 4)
    whole = jobs["gpus"] >= 8
    assert (jobs.loc[whole, "min_runtime_hours"] == jobs.loc[whole, "duration_hours"]).all()
    small = jobs.loc[~whole]
    allocated = small["min_runtime_hours"] > 0
    assert (small.loc[allocated, "min_runtime_hours"]
            == small.loc[allocated, "duration_hours"]).all()
    assert 0.6 < allocated.mean() < 0.9 and ALLOCATED_SHARE == 0.75
    # only multi-node jobs (24 GPUs on 8-GPU nodes) may be non-resumable
    assert trace.loc[~trace["resumable"], "gpus"].gt(8).all()
    assert (~trace.loc[trace["gpus"] > 8, "resumable"]).any()


def test_trace_philly_draws_do_not_depend_on_the_file_order(tmp_path):

    scenario = load_scenario(philly_scenario_folder(tmp_path / "sc"))
    source, _ = synthetic_philly(tmp_path / "philly.csv")
    lines = source.read_text().splitlines()
    shuffled = tmp_path / "shuffled.csv"
    order = np.random.default_rng(3).permutation(len(lines) - 1) + 1
    shuffled.write_text("\n".join([lines[0], *(lines[i] for i in order)]) + "\n")
    columns = ["project", "cluster", "submit", "gpus", "duration_hours", "min_runtime_hours",
               "resumable"]
    a = convert_philly(source, scenario)[columns]
    b = convert_philly(shuffled, scenario)[columns]
    key = ["submit", "gpus", "duration_hours"]
    pd.testing.assert_frame_equal(a.sort_values(key + ["project"]).reset_index(drop=True),
                                  b.sort_values(key + ["project"]).reset_index(drop=True))


BAD_PHILLY = [
    ("timestamp", "2017-13-01 00:00:00,10.0,1,10.0,v1", "not an ISO 8601 date"),
    ("timestamp", "yesterday,10.0,1,10.0,v1", "not an ISO 8601 date"),
    ("duration", "2017-10-01 00:00:00,ten,1,10.0,v1", "not a number"),
    ("duration", "2017-10-01 00:00:00,-5,1,10.0,v1", "> 0"),
    ("num_gpus", "2017-10-01 00:00:00,10.0,1.5,10.0,v1", "not a whole number"),
    ("num_gpus", "2017-10-01 00:00:00,10.0,0,0.0,v1", "≥ 1"),
    ("cluster", "2017-10-01 00:00:00,10.0,1,10.0,", "empty"),
]


def test_trace_philly_bad_rows_exit_2_and_write_nothing(tmp_path, capsys):

    folder = philly_scenario_folder(tmp_path / "sc")
    source = tmp_path / "philly.csv"
    good = "2017-10-01 00:00:00,10.0,1,10.0,v1"
    source.write_text("\n".join([PHILLY_HEADER, good, *(line for _, line, _ in BAD_PHILLY)])
                      + "\n")
    out = tmp_path / "out" / "trace.csv"
    assert main(["trace", "philly", str(folder), "--in", str(source), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    for row, (column, _, _) in enumerate(BAD_PHILLY, start=3):
        assert f"philly.csv, row {row}, column {column}:" in err
    assert f"{len(BAD_PHILLY)} problem(s); nothing written" in err
    with pytest.raises(InputError) as caught:
        read_philly(source)
    assert [(p.file, p.row, p.column) for p in caught.value.problems] == [
        ("philly.csv", row, column) for row, (column, _, _) in enumerate(BAD_PHILLY, start=3)]
    for problem, (_, _, words) in zip(caught.value.problems, BAD_PHILLY, strict=True):
        assert words in problem.message
    assert not out.exists() and not out.parent.exists()
    source.write_text("timestamp,duration,cluster\n2017-10-01 00:00:00,10.0,v1\n")
    assert main(["trace", "philly", str(folder), "--in", str(source), "--out", str(out)]) == 2
    assert "philly.csv, row 1, column num_gpus: missing" in capsys.readouterr().err
    assert not out.exists()


def test_data_philly_validates_and_plans(tmp_path):

    scenario = load_scenario(PHILLY_SCENARIO)
    config = scenario.config
    assert (config.quarter_start, config.quarter_end, config.as_of) == (
        ts("2026-10-01"), ts("2027-01-01"), ts("2026-10-01"))
    assert len(scenario.usage) == len(scenario.demand) == len(scenario.reservations) == 0
    sizes = scenario.clusters["nodes"] * scenario.clusters["gpus_per_node"]
    assert len(scenario.clusters) <= 3 and sizes.min() >= 128
    assert (scenario.clusters["gpus_per_node"] == 8).all()
    capacity = float(sizes.sum()) * 2208  # one GPU type at 1.0 NGH per GPU-hour
    assert scenario.budgets["gpu_hours"].sum() == pytest.approx(capacity, rel=1e-3)
    assert len(teams(scenario)) >= 15
    assert main(["validate", str(PHILLY_SCENARIO)]) == 0
    assert main(["run", str(PHILLY_SCENARIO), "--out", str(tmp_path / "plan"), "--quiet"]) == 0
    assert (tmp_path / "plan" / "plan.json").is_file()


@pytest.mark.skipif(not PHILLY.is_file(), reason=f"the Philly extract is not at {PHILLY}")
def test_trace_philly_real_trace(tmp_path, capsys):

    out = tmp_path / "philly-trace.csv"
    assert main(["trace", "philly", "--out", str(out)]) == 0  # defaults: data/philly, PHILLY
    printed = capsys.readouterr().out
    assert "82247 of 82247 Philly jobs kept, 0 dropped" in printed
    scenario = load_scenario(PHILLY_SCENARIO)
    trace = read_trace(out, scenario)
    assert len(trace) == 82_247
    start, end = scenario.config.quarter_start, scenario.config.quarter_end
    assert trace["submit"].min() == start and trace["submit"].max() < end
    source = pd.read_csv(PHILLY, dtype={"cluster": str})
    assert (trace["gpus"] * trace["duration_hours"]).sum() == pytest.approx(
        (source["num_gpus"] * source["duration"]).sum() / 3600, rel=1e-12)
    # 15 VCs onto 15 teams, one each; every job's project in its VC's team
    team_projects = teams(scenario)
    jobs = trace.set_index("job_id")
    vc = pd.Series(source["cluster"].to_numpy(),
                   index=[f"philly-{row:06d}" for row in range(2, len(source) + 2)])
    vc_of_job = jobs.index.map(vc)
    mapping = dict(zip(vc_of_job, jobs["project"].map(
        {p: t for t, ps in team_projects.items() for p in ps}), strict=True))
    assert len(mapping) == 15 and len(set(mapping.values())) == 15
    # the scenario is contended: mean offered load ÷ capacity in [1.3, 1.6]
    gpus = float((scenario.clusters["nodes"] * scenario.clusters["gpus_per_node"]).sum())
    ratio = offered_gpu_hours(trace, start, end) / ((end - start).total_seconds() / 3600) / gpus
    assert 1.3 <= ratio <= 1.6
    # regenerating data/philly from the same extract gives the same bytes
    generate(PHILLY, 2026, tmp_path / "again")
    for name in ("scenario.toml", "clusters.csv", "org.csv", "budgets.csv"):
        assert (tmp_path / "again" / name).read_bytes() == (PHILLY_SCENARIO / name).read_bytes()


def test_default_time_limit_is_the_duration_rounded_up_to_a_power_of_two_hours():
    # Philly states no limits; the default request: at least 1 h, else the next power
    # of two hours at or above the duration.
    from planner.simulate.trace import default_time_limit, time_limits

    durations = [0.01, 0.3, 1.0, 1.5, 3.0, 16.0, 17.0, 200.0]
    assert default_time_limit(durations).tolist() == [1, 1, 1, 2, 4, 16, 32, 256]
    frame = pd.DataFrame({"duration_hours": [3.0, 3.0], "time_limit_hours": [5.0, np.nan]})
    assert time_limits(frame).tolist() == [5.0, 4.0]  # a gap takes the default
    assert time_limits(frame.drop(columns="time_limit_hours")).tolist() == [4.0, 4.0]
