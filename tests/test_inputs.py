"""Loading and validating scenarios: the tiny valid scenario, its workbook twin, and defects.

Every defect case names the exact file, row (header = row 1) and column the problem
must point at, and checks that it is the *only* problem (no cascades).
"""

from __future__ import annotations

import csv
import io
import tempfile
import unicodedata
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.errors import InputError, InputProblem
from planner.inputs import Scenario, load_scenario, schema_markdown, validate_scenario
from planner.inputs.schema import CONFIG, DTYPES, TABLES, bad_characters
from tests.scenario_factory import FILES, write_scenario, write_workbook

TABLE_NAMES = list(TABLES)


def ts(text: str) -> pd.Timestamp:
    return pd.Timestamp(text, tz="UTC")


def edit(name: str, old: str, new: str) -> dict[str, str]:
    """An override of file ``name``: the tiny text with ``old`` replaced once by ``new``."""
    assert FILES[name].count(old) == 1, f"{old!r} must occur exactly once in {name}"
    return {name: FILES[name].replace(old, new)}


def append(name: str, text: str) -> dict[str, str]:
    """An override of file ``name``: the tiny text plus one more line."""
    return {name: FILES[name] + text + "\n"}


def where(problems: list[InputProblem]) -> list[tuple[str, int | None, str | None]]:
    return [(p.file, p.row, p.column) for p in problems]


def assert_same_tables(a: Scenario, b: Scenario) -> None:
    assert a.config == b.config
    for name in TABLE_NAMES:
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name))


# --------------------------------------------------------------------------- valid


def test_tiny_scenario_loads_with_schema_dtypes_and_values(tmp_path: Path) -> None:
    folder = write_scenario(tmp_path / "tiny")
    scenario = load_scenario(folder)
    assert validate_scenario(folder) == []

    cfg = scenario.config
    assert cfg.name == "tiny"
    assert cfg.quarter_start == ts("2026-10-01")
    assert cfg.quarter_end == ts("2027-01-01")
    assert cfg.as_of == ts("2026-11-02")
    assert str(cfg.as_of.tz) == "UTC"
    assert (cfg.period_hours, cfg.lookback_days) == (24.0, 28.0)
    assert cfg.gpu_rates == {"A100": 0.55, "H100": 1.0}
    assert cfg.rate("A100") == 0.55 and cfg.rate("V100") == 1.0

    for name, schema in TABLES.items():
        frame = getattr(scenario, name)
        assert list(frame.columns) == list(schema.columns), name
        for f in schema.fields:
            assert str(frame[f.name].dtype) == DTYPES[f.kind], (name, f.name)
        assert list(frame.index) == list(range(len(frame)))

    # every table sorted by its natural key (clusters by cluster, org by id, ...)
    assert scenario.clusters.to_dict("list") == {
        "cluster": ["a100-b", "h100-a"], "gpu_type": ["A100", "H100"],
        "nodes": [2, 4], "gpus_per_node": [8, 8], "node_labels": [(), ()]}
    assert list(scenario.org["id"]) == [
        "language", "p1", "p2", "p3", "p4", "research", "vision"]
    assert list(scenario.org["parent"]) == [
        "research", "vision", "vision", "language", "language", "", "research"]
    assert list(scenario.org["weight"]) == [1.0, 1.0, 1.0, 1.0, 0.5, 1.0, 2.0]
    # p4 has no budget row: it gets budget 0 and all clusters
    assert scenario.budgets.to_dict("list") == {
        "project": ["p1", "p2", "p3", "p4"], "gpu_hours": [5000.0, 3000.0, 2000.0, 0.0],
        "clusters": [(), ("h100-a",), ("a100-b", "h100-a"), ()]}
    assert type(scenario.budgets["project"].iloc[0]) is str
    assert scenario.demand["start"].iloc[1] == ts("2026-11-02T06:00:00")
    assert list(scenario.demand["gpus"]) == [16.0, 8.0, 8.0, 4.0]
    assert scenario.reservations.iloc[1].to_dict() == {
        "request_id": "r2", "project": "p3", "cluster": "a100-b", "nodes": 1, "hours": 30.0,
        "earliest_start": ts("2026-11-04"), "deadline": ts("2026-11-08T12:00:00")}
    # Z and +02:00 both end up in UTC
    assert scenario.usage["start"].iloc[1] == ts("2026-10-25T12:00:00")
    assert scenario.usage["end"].iloc[1] == ts("2026-10-26T00:00:00")
    assert isinstance(scenario.usage["end"].iloc[1], pd.Timestamp)
    assert scenario.source == str(folder)
    assert len(scenario.digest) == 64


def test_workbook_loads_to_the_same_tables(tmp_path: Path) -> None:
    folder = write_scenario(tmp_path / "tiny")
    book = write_workbook(tmp_path / "book.xlsx", folder)
    from_folder, from_book = load_scenario(folder), load_scenario(book)
    assert_same_tables(from_folder, from_book)
    assert from_book.source == str(book)
    # the digest is over what the inputs say, not how the files spell it
    assert from_book.digest == from_folder.digest


def test_optional_files_absent_give_empty_tables(tmp_path: Path) -> None:
    folder = write_scenario(tmp_path / "s", demand=None, reservations=None, usage=None)
    scenario = load_scenario(folder)
    for name in ("demand", "reservations", "usage"):
        frame = getattr(scenario, name)
        assert frame.empty
        assert list(frame.columns) == list(TABLES[name].columns)
        assert [str(d) for d in frame.dtypes] == [DTYPES[f.kind] for f in TABLES[name].fields]


def test_optional_columns_take_their_defaults(tmp_path: Path) -> None:
    folder = write_scenario(tmp_path / "s",
                            org=FILES["org"].replace(",1\n", "\n").replace(",2\n", "\n")
                            .replace(",0.5\n", "\n").replace("id,parent,weight", "id,parent"),
                            budgets="project,gpu_hours\np1,10\n")
    scenario = load_scenario(folder)
    assert set(scenario.org["weight"]) == {1.0}
    assert list(scenario.budgets["clusters"]) == [(), (), (), ()]


def test_toml_dates_as_strings_offsets_and_datetimes(tmp_path: Path) -> None:
    text = (FILES["scenario"]
            .replace("quarter_start = 2026-10-01", 'quarter_start = "2026-10-01"')
            .replace("as_of = 2026-11-02", "as_of = 2026-11-02T06:00:00+02:00")
            .replace("quarter_end = 2027-01-01", "quarter_end = 2027-01-01T00:00:00"))
    cfg = load_scenario(write_scenario(tmp_path / "s", scenario=text)).config
    assert cfg.quarter_start == ts("2026-10-01")
    assert cfg.as_of == ts("2026-11-02T04:00:00")
    assert cfg.quarter_end == ts("2027-01-01")


def test_bom_and_blank_rows_are_fine_and_rows_keep_their_numbers(tmp_path: Path) -> None:
    folder = write_scenario(
        tmp_path / "s", clusters=b"\xef\xbb\xbf" + FILES["clusters"].encode(),
        demand=FILES["demand"].replace("\np3", "\n\n,,,,\np3").replace("p4,h100-a", "p4,h100-z"))
    # header 1, p1 2, p2 3, blank 4, empty cells 5, p3 6, p4 7
    assert where(validate_scenario(folder)) == [("demand.csv", 7, "cluster")]


def test_digest_is_stable_and_sees_every_byte(tmp_path: Path) -> None:
    a = load_scenario(write_scenario(tmp_path / "a")).digest
    b = load_scenario(write_scenario(tmp_path / "b")).digest
    c = load_scenario(write_scenario(tmp_path / "c", **edit("usage", "j3,", "j4,"))).digest
    assert a == b != c


def test_schema_is_written_once_and_rendered() -> None:
    text = schema_markdown()
    for schema in TABLES.values():
        assert f"`{schema.filename}`" in text
        for f in schema.fields:
            assert f"`{f.name}`" in text
    for f in CONFIG:
        assert f"`{f.name}`" in text
    assert "NGH" in text


# --------------------------------------------------------------------------- defects


def labelled(h100: str, a100: str) -> str:
    """The tiny clusters.csv with a node_labels column (quoted: labels hold ``;``)."""
    return ("cluster,gpu_type,nodes,gpus_per_node,node_labels\n"
            f'h100-a,H100,4,8,"{h100}"\na100-b,A100,2,8,"{a100}"\n')

TOML = "scenario.toml"

# (case id, overrides, expected (file, row, column))
DEFECTS: list[tuple[str, dict[str, str | bytes | None], tuple[str, int | None, str | None]]] = [
    # files
    ("missing org", {"org": None}, ("org.csv", None, None)),
    ("missing scenario.toml", {"scenario": None}, (TOML, None, None)),
    ("empty file", {"budgets": ""}, ("budgets.csv", None, None)),
    ("no header", {"budgets": "\n" + FILES["budgets"]}, ("budgets.csv", 1, None)),
    ("missing column", edit("clusters", ",gpus_per_node", ""), ("clusters.csv", 1,
                                                                   "gpus_per_node")),
    ("unknown column", edit("budgets", "gpu_hours,clusters", "gpu_hours,cluster"),
     ("budgets.csv", 1, "cluster")),
    ("column twice", edit("demand", "end,gpus", "end,gpus,gpus"), ("demand.csv", 1, "gpus")),
    ("too many values", edit("demand", "2026-11-05,8", "2026-11-05,8,9"), ("demand.csv", 3, None)),
    ("not utf-8", {"budgets": FILES["budgets"].replace("p2,3000", "p2,3000é").encode("latin-1")},
     ("budgets.csv", 3, None)),
    ("clusters has no rows", {"clusters": "cluster,gpu_type,nodes,gpus_per_node\n",
                              "budgets": "project,gpu_hours\n", "demand": None,
                              "reservations": None, "usage": None},
     ("clusters.csv", None, None)),
    # scenario.toml
    ("toml syntax", edit("scenario", "as_of = 2026-11-02", "as_of = "), (TOML, 4, None)),
    ("toml missing key", edit("scenario", "as_of = 2026-11-02\n", ""), (TOML, None, "as_of")),
    ("toml unknown key", edit("scenario", "lookback_days", "lookback_dayz"),
     (TOML, 6, "lookback_dayz")),
    ("toml wrong type", edit("scenario", "period_hours = 24", 'period_hours = "24"'),
     (TOML, 5, "period_hours")),
    ("toml bad date", edit("scenario", "as_of = 2026-11-02", 'as_of = "02/11/2026"'),
     (TOML, 4, "as_of")),
    ("quarter_end before start", edit("scenario", "quarter_end = 2027-01-01",
                                      "quarter_end = 2026-10-01"), (TOML, 3, "quarter_end")),
    ("as_of after quarter", edit("scenario", "as_of = 2026-11-02", "as_of = 2027-01-01"),
     (TOML, 4, "as_of")),
    ("as_of before quarter", edit("scenario", "as_of = 2026-11-02", "as_of = 2026-09-30"),
     (TOML, 4, "as_of")),
    ("as_of in the quarter's last hour", edit("scenario", "as_of = 2026-11-02",
                                             "as_of = 2026-12-31T23:30:00Z"), (TOML, 4, "as_of")),
    ("period_hours zero", edit("scenario", "period_hours = 24", "period_hours = 0"),
     (TOML, 5, "period_hours")),
    ("period longer than quarter", edit("scenario", "period_hours = 24", "period_hours = 3000"),
     (TOML, 5, "period_hours")),
    ("lookback negative", edit("scenario", "lookback_days = 28", "lookback_days = -1"),
     (TOML, 6, "lookback_days")),
    ("gpu rate zero", edit("scenario", "A100 = 0.55", "A100 = 0"), (TOML, 10, "gpu_rates.A100")),
    ("gpu_rates not a table", {"scenario": FILES["scenario"].split("[gpu_rates]")[0]
                               + "gpu_rates = 1\n"}, (TOML, 8, "gpu_rates")),
    # clusters
    ("nodes not whole", edit("clusters", "h100-a,H100,4,8", "h100-a,H100,4.5,8"),
     ("clusters.csv", 2, "nodes")),
    ("nodes zero", edit("clusters", "a100-b,A100,2,8", "a100-b,A100,0,8"),
     ("clusters.csv", 3, "nodes")),
    ("gpus_per_node text", edit("clusters", "a100-b,A100,2,8", "a100-b,A100,2,eight"),
     ("clusters.csv", 3, "gpus_per_node")),
    ("gpus_per_node nan", edit("clusters", "a100-b,A100,2,8", "a100-b,A100,2,nan"),
     ("clusters.csv", 3, "gpus_per_node")),
    ("duplicate cluster", append("clusters", "h100-a,H100,1,8"), ("clusters.csv", 4, "cluster")),
    ("empty gpu_type", edit("clusters", "a100-b,A100,", "a100-b,,"),
     ("clusters.csv", 3, "gpu_type")),
    # org
    ("empty org id", append("org", ",research,1"), ("org.csv", 9, "id")),
    ("duplicate org id", append("org", "p4,language,1"), ("org.csv", 9, "id")),
    ("unknown parent", append("org", "p5,nobody,1"), ("org.csv", 9, "parent")),
    ("self parent", append("org", "p5,p5,1"), ("org.csv", 9, "parent")),
    ("weight zero", edit("org", "p4,language,0.5", "p4,language,0"), ("org.csv", 8, "weight")),
    ("weight negative", edit("org", "vision,research,2", "vision,research,-2"),
     ("org.csv", 3, "weight")),
    # budgets
    ("budget unknown project", append("budgets", "p9,10,"), ("budgets.csv", 5, "project")),
    ("budget on inner node", append("budgets", "vision,10,"), ("budgets.csv", 5, "project")),
    ("duplicate budget", append("budgets", "p1,10,"), ("budgets.csv", 5, "project")),
    ("negative budget", edit("budgets", "p2,3000", "p2,-1"), ("budgets.csv", 3, "gpu_hours")),
    ("budget unknown cluster", edit("budgets", "a100-b;h100-a", "a100-b;h100-x"),
     ("budgets.csv", 4, "clusters")),
    # demand
    ("demand unknown project", append("demand", "p9,h100-a,2026-11-02,2026-11-03,1"),
     ("demand.csv", 6, "project")),
    ("demand on inner node", append("demand", "language,h100-a,2026-11-02,2026-11-03,1"),
     ("demand.csv", 6, "project")),
    ("demand unknown cluster", append("demand", "p1,h100-x,2026-11-02,2026-11-03,1"),
     ("demand.csv", 6, "cluster")),
    ("demand cluster not allowed", append("demand", "p2,a100-b,2026-11-02,2026-11-03,1"),
     ("demand.csv", 6, "cluster")),
    ("demand end before start", append("demand", "p1,h100-a,2026-11-03,2026-11-02,1"),
     ("demand.csv", 6, "end")),
    ("demand empty interval", append("demand", "p1,h100-a,2026-11-03,2026-11-03T00:00:00Z,1"),
     ("demand.csv", 6, "end")),
    ("demand gpus zero", append("demand", "p1,h100-a,2026-11-02,2026-11-03,0"),
     ("demand.csv", 6, "gpus")),
    ("demand impossible date", append("demand", "p1,h100-a,2026-13-02,2026-11-03,1"),
     ("demand.csv", 6, "start")),
    ("demand non-ISO date", append("demand", "p1,h100-a,2026-11-02,11/03/2026,1"),
     ("demand.csv", 6, "end")),
    # reservations
    ("duplicate request_id", append("reservations", "r1,p1,h100-a,1,24,2026-11-03,2026-11-10"),
     ("reservations.csv", 4, "request_id")),
    ("reservation unknown project",
     append("reservations", "r3,p9,h100-a,1,24,2026-11-03,2026-11-10"),
     ("reservations.csv", 4, "project")),
    ("reservation unknown cluster",
     append("reservations", "r3,p1,b200,1,24,2026-11-03,2026-11-10"),
     ("reservations.csv", 4, "cluster")),
    ("reservation cluster not allowed",
     append("reservations", "r3,p2,a100-b,1,24,2026-11-03,2026-11-10"),
     ("reservations.csv", 4, "cluster")),
    ("reservation nodes fractional",
     append("reservations", "r3,p1,h100-a,1.5,24,2026-11-03,2026-11-10"),
     ("reservations.csv", 4, "nodes")),
    ("reservation hours zero", append("reservations", "r3,p1,h100-a,1,0,2026-11-03,2026-11-10"),
     ("reservations.csv", 4, "hours")),
    ("reservation deadline before start",
     append("reservations", "r3,p1,h100-a,1,24,2026-11-10,2026-11-03"),
     ("reservations.csv", 4, "deadline")),
    ("reservation empty request_id", append("reservations", " ,p1,h100-a,1,24,2026-11-03,"
                                                            "2026-11-10"),
     ("reservations.csv", 4, "request_id")),
    # usage
    ("usage unknown cluster", append("usage", "j4,p1,h100-x,8,2026-10-20,2026-10-22"),
     ("usage.csv", 5, "cluster")),
    ("usage unknown project", append("usage", "j4,research,h100-a,8,2026-10-20,2026-10-22"),
     ("usage.csv", 5, "project")),
    ("usage end before start", append("usage", "j4,p1,h100-a,8,2026-10-22,2026-10-20"),
     ("usage.csv", 5, "end")),
    ("usage gpus negative", append("usage", "j4,p1,h100-a,-8,2026-10-20,2026-10-22"),
     ("usage.csv", 5, "gpus")),
    ("usage job repeated differently", append("usage", "j1,p1,h100-a,4,2026-10-20,2026-10-22"),
     ("usage.csv", 5, "job_id")),
    # node_labels (Kubernetes labels for the Kueue flavors)
    ("node_labels not key=value", {"clusters": labelled("gpu", "")},
     ("clusters.csv", 2, "node_labels")),
    ("node_labels key with a space", {"clusters": labelled("nvidia.com/gpu product=x", "")},
     ("clusters.csv", 2, "node_labels")),
    ("node_labels value with a space", {"clusters": labelled("nvidia.com/gpu.product=H 1", "")},
     ("clusters.csv", 2, "node_labels")),
    ("node_labels key twice", {"clusters": labelled("zone=a;zone=b", "")},
     ("clusters.csv", 2, "node_labels")),
    ("two clusters with the same node_labels", {"clusters": labelled("zone=a", "zone=a")},
     ("clusters.csv", 3, "node_labels")),
    ("node_labels inside the default of another cluster",
     {"clusters": labelled("gpu-planner.io/cluster=a100-b", "")},
     ("clusters.csv", 3, "node_labels")),
    # numbers without an upper bound used to end in tracebacks or runs of minutes
    ("period_hours 1e-9", edit("scenario", "period_hours = 24", "period_hours = 1e-9"),
     (TOML, 5, "period_hours")),
    ("period_hours above a week", edit("scenario", "period_hours = 24", "period_hours = 169"),
     (TOML, 5, "period_hours")),
    ("period_hours not whole minutes", edit("scenario", "period_hours = 24",
                                            "period_hours = 1.001"), (TOML, 5, "period_hours")),
    ("a 1000-year quarter", edit("scenario", "quarter_end = 2027-01-01",
                                 "quarter_end = 3027-01-01"), (TOML, 3, "quarter_end")),
    ("lookback 1e300", edit("scenario", "lookback_days = 28", "lookback_days = 1e300"),
     (TOML, 6, "lookback_days")),
    ("gpu rate 1e300", edit("scenario", "A100 = 0.55", "A100 = 1e300"),
     (TOML, 10, "gpu_rates.A100")),
    ("gpu rate 1e-300", edit("scenario", "A100 = 0.55", "A100 = 1e-300"),
     (TOML, 10, "gpu_rates.A100")),
    ("nodes 1e9", edit("clusters", "h100-a,H100,4,8", "h100-a,H100,1e9,8"),
     ("clusters.csv", 2, "nodes")),
    ("gpus_per_node 1e6", edit("clusters", "a100-b,A100,2,8", "a100-b,A100,2,1000000"),
     ("clusters.csv", 3, "gpus_per_node")),
    ("weight 1e300", edit("org", "p4,language,0.5", "p4,language,1e300"),
     ("org.csv", 8, "weight")),
    ("weight 1e-300", edit("org", "p4,language,0.5", "p4,language,1e-300"),
     ("org.csv", 8, "weight")),
    ("budget 1e300", edit("budgets", "p2,3000", "p2,1e300"), ("budgets.csv", 3, "gpu_hours")),
    ("demand no cluster could hold", append("demand", "p1,h100-a,2026-11-02,2026-11-03,2e9"),
     ("demand.csv", 6, "gpus")),
    # demand above a cluster's GPUs is a backlog, planned (tests/test_backlog.py); usage
    # above them is no job that ran
    ("usage above the cluster's GPUs", append("usage", "j9,p1,h100-a,33,2026-10-20,2026-10-21"),
     ("usage.csv", 5, "gpus")),
    ("demand gpus 1e300", append("demand", "p1,h100-a,2026-11-02,2026-11-03,1e300"),
     ("demand.csv", 6, "gpus")),
    ("reservation hours 1e300",
     append("reservations", "r3,p1,h100-a,1,1e300,2026-11-03,2026-11-10"),
     ("reservations.csv", 4, "hours")),
    ("reservation nodes 1e9",
     append("reservations", "r3,p1,h100-a,1000000000,24,2026-11-03,2026-11-10"),
     ("reservations.csv", 4, "nodes")),
    ("usage gpus 1e300", append("usage", "j4,p1,h100-a,1e300,2026-10-20,2026-10-22"),
     ("usage.csv", 5, "gpus")),
    # control characters in ids and text: refused (they reach shells, YAML, workbooks)
    ("escape in an org id", append("org", "p\x1b[31m5,language,1"), ("org.csv", 9, "id")),
    ("newline in a quoted id", append("org", '"p\n5",language,1'), ("org.csv", 9, "id")),
    ("NUL in a job_id", append("usage", "j\x004,p1,h100-a,8,2026-10-20,2026-10-22"),
     ("usage.csv", 5, "job_id")),
    ("bell in a gpu_type", edit("clusters", "a100-b,A100,", "a100-b,A1\x0700,"),
     ("clusters.csv", 3, "gpu_type")),
    ("tab in a cluster list", edit("budgets", "a100-b;h100-a", "a100-b;\th100-a"),
     ("budgets.csv", 4, "clusters")),
    ("line separator in a request_id",
     append("reservations", "r\u20283,p1,h100-a,1,24,2026-11-03,2026-11-10"),
     ("reservations.csv", 4, "request_id")),
    ("escape in the scenario name", edit("scenario", 'name = "tiny"', 'name = "ti\\u001bny"'),
     (TOML, 1, "name")),
]


@pytest.mark.parametrize(("overrides", "expected"), [(o, e) for _, o, e in DEFECTS],
                         ids=[case for case, _, _ in DEFECTS])
def test_defect_is_reported_at_its_file_row_and_column(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        overrides: dict[str, str | bytes | None],
        expected: tuple[str, int | None, str | None]) -> None:
    folder = write_scenario(tmp_path / "s", **overrides)
    problems = validate_scenario(folder)
    assert where(problems) == [expected], [str(p) for p in problems]
    message = problems[0].message
    assert message and "\n" not in message and "Traceback" not in message
    assert ";" in message  # says what is wrong; how to fix it
    with pytest.raises(InputError) as raised:
        load_scenario(folder)
    assert raised.value.problems == problems
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""  # the library never prints


def test_defect_cases_are_many_and_distinct() -> None:
    assert len(DEFECTS) >= 20
    assert len({case for case, _, _ in DEFECTS}) == len(DEFECTS)


def test_all_problems_are_reported_at_once(tmp_path: Path) -> None:
    folder = write_scenario(
        tmp_path / "s",
        **edit("clusters", "a100-b,A100,2,8", "a100-b,A100,0,8"),
        **edit("budgets", "p2,3000", "p2,-1"),
        **append("usage", "j4,p1,h100-a,0,2026-10-20,2026-10-22"))
    assert where(validate_scenario(folder)) == [
        ("budgets.csv", 3, "gpu_hours"), ("clusters.csv", 3, "nodes"), ("usage.csv", 5, "gpus")]


def test_many_problems_in_one_file_all_reported(tmp_path: Path) -> None:
    folder = write_scenario(tmp_path / "s", demand=(
        "project,cluster,start,end,gpus\n"
        "p9,h100-a,2026-11-02,2026-11-03,1\n"
        "p1,h100-x,2026-11-02,2026-11-03,1\n"
        "p1,h100-a,soon,2026-11-03,-1\n"))
    assert where(validate_scenario(folder)) == [
        ("demand.csv", 2, "project"), ("demand.csv", 3, "cluster"),
        ("demand.csv", 4, "gpus"), ("demand.csv", 4, "start")]


def test_missing_folder_and_non_scenario_path(tmp_path: Path) -> None:
    assert where(validate_scenario(tmp_path / "nope")) == [(str(tmp_path / "nope"), None, None)]
    note = tmp_path / "notes.txt"
    note.write_text("hello")
    assert where(validate_scenario(note)) == [(str(note), None, None)]


def test_unknown_csv_in_folder_is_a_typo(tmp_path: Path) -> None:
    folder = write_scenario(tmp_path / "s", demand=None)
    (folder / "demnd.csv").write_text(FILES["demand"])
    problems = validate_scenario(folder)
    assert where(problems) == [("demnd.csv", None, None)]
    assert "demand.csv" in problems[0].message


def test_unknown_column_suggests_the_right_name(tmp_path: Path) -> None:
    folder = write_scenario(tmp_path / "s", **edit("budgets", "gpu_hours,", "gpu_hour,"))
    problems = validate_scenario(folder)
    assert where(problems) == [("budgets.csv", 1, "gpu_hour"), ("budgets.csv", 1, "gpu_hours")]
    assert "did you mean 'gpu_hours'" in problems[0].message


def test_non_utf8_reports_the_row_of_the_first_bad_byte(tmp_path: Path) -> None:
    text = FILES["org"].replace("p3,language", "p3é,language").replace("p4,", "p4ü,")
    folder = write_scenario(tmp_path / "s", org=text.encode("cp1252"))
    problems = validate_scenario(folder)
    assert where(problems) == [("org.csv", 7, None)]
    assert "UTF-8" in problems[0].message and "0xe9" in problems[0].message


def test_non_utf8_toml(tmp_path: Path) -> None:
    text = FILES["scenario"].replace('"tiny"', '"tinyé"').encode("latin-1")
    assert where(validate_scenario(write_scenario(tmp_path / "s", scenario=text))) == [
        (TOML, 1, None)]


# --------------------------------------------------------------------------- workbook


def test_workbook_problems_name_the_sheet_row_and_column(tmp_path: Path) -> None:
    folder = write_scenario(tmp_path / "s", **edit("budgets", "p2,3000", "p2,-1"),
                            **edit("scenario", "lookback_days = 28", "lookback_days = -2"))
    book = write_workbook(tmp_path / "book.xlsx", folder)
    # scenario sheet rows: key,value header then name, quarter_start, quarter_end, as_of,
    # period_hours, lookback_days (row 7)
    assert where(validate_scenario(book)) == [
        ("book.xlsx[budgets]", 3, "gpu_hours"), ("book.xlsx[scenario]", 7, "lookback_days")]


def test_workbook_missing_and_unknown_sheets(tmp_path: Path) -> None:
    import openpyxl

    book = write_workbook(tmp_path / "book.xlsx", write_scenario(tmp_path / "s"))
    wb = openpyxl.load_workbook(book)
    del wb["org"]
    wb.create_sheet("Reservation")
    wb.save(book)
    assert where(validate_scenario(book)) == [
        ("book.xlsx[Reservation]", None, None), ("book.xlsx[org]", None, None)]


def test_workbook_scenario_sheet_values(tmp_path: Path) -> None:
    import openpyxl

    book = write_workbook(tmp_path / "book.xlsx", write_scenario(tmp_path / "s"))
    wb = openpyxl.load_workbook(book)
    sheet = wb["scenario"]
    sheet["B6"] = "12"  # period_hours as text: fine in a sheet
    sheet["B4"] = "2027-01-01T00:00:00Z"  # quarter_end as ISO text
    sheet.append(["gpu_rates.B200", "fast"])  # row 10 (after the two rates)
    sheet.append(["gpu_rates", 1])  # row 11
    sheet.append(["name", "again"])  # row 12
    wb.save(book)
    problems = validate_scenario(book)
    assert where(problems) == [("book.xlsx[scenario]", 10, "gpu_rates.B200"),
                               ("book.xlsx[scenario]", 11, "gpu_rates"),
                               ("book.xlsx[scenario]", 12, "name")]


def test_corrupt_workbook(tmp_path: Path) -> None:
    book = tmp_path / "book.xlsx"
    book.write_bytes(b"not a zip")
    assert where(validate_scenario(book)) == [("book.xlsx", None, None)]


# --------------------------------------------------------------------------- ids verbatim

ODD_IDS = {"p1": "=SUM(A1)", "p2": "+1", "p3": "NA", "p4": "007"}


def odd_id_overrides() -> dict[str, str]:
    out = {}
    for name in ("org", "budgets", "demand", "reservations", "usage"):
        text = FILES[name]
        for old, new in ODD_IDS.items():
            text = text.replace(f"{old},", f"{new},")
        out[name] = text
    out["reservations"] = out["reservations"].replace("r1,", "0001,").replace("r2,", "null,")
    return out


@pytest.mark.parametrize("form", ["folder", "workbook"])
def test_odd_ids_survive_verbatim(tmp_path: Path, form: str) -> None:
    path = write_scenario(tmp_path / "s", **odd_id_overrides())
    if form == "workbook":
        path = write_workbook(tmp_path / "book.xlsx", path)
    scenario = load_scenario(path)
    odd = list(ODD_IDS.values())
    # tables come sorted by their key, ids compared as text (code points)
    assert list(scenario.org["id"]) == sorted([*odd, "research", "vision", "language"])
    assert list(scenario.budgets["project"]) == sorted(odd)
    assert list(scenario.demand["project"]) == sorted(odd)
    assert list(scenario.reservations["request_id"]) == ["0001", "null"]
    assert list(scenario.usage["project"]) == odd[:3]
    assert all(type(v) is str for v in scenario.org["id"])


def test_formula_cell_in_workbook_gives_its_text(tmp_path: Path) -> None:
    import openpyxl

    book = write_workbook(tmp_path / "book.xlsx", write_scenario(tmp_path / "s",
                                                                 **odd_id_overrides()))
    cell = openpyxl.load_workbook(book)["org"]["A5"]
    assert cell.data_type == "f"  # stored as a formula, read back as its text
    assert "=SUM(A1)" in list(load_scenario(book).org["id"])


# --------------------------------------------------------------------------- org tree

ORG_HEAD = FILES["org"]  # rows 1..8 valid; extra rows start at row 9

ORG_CASES = [
    ("valid deep chain", "d1,research,1\nd2,d1,1\nd3,d2,1\nd4,d3,1\nd5,d4,1", []),
    ("second root", "other,,1\np5,other,1", []),
    ("orphan", "p5,ghost,1", [(9, "parent", "unknown parent")]),
    ("orphans", "p5,ghost,1\np6,gohst,1", [(9, "parent", "unknown parent"),
                                            (10, "parent", "unknown parent")]),
    ("self parent", "x,x,1", [(9, "parent", "own parent")]),
    ("two-cycle", "x,y,1\ny,x,1", [(9, "parent", "cycle"), (10, "parent", "cycle")]),
    ("three-cycle", "x,y,1\ny,z,1\nz,x,1",
     [(9, "parent", "cycle"), (10, "parent", "cycle"), (11, "parent", "cycle")]),
    ("tail into cycle", "t,x,1\nx,y,1\ny,x,1", [(10, "parent", "cycle"), (11, "parent", "cycle")]),
    ("two cycles", "a,b,1\nb,a,1\nc,d,1\nd,c,1",
     [(9, "parent", "cycle"), (10, "parent", "cycle"), (11, "parent", "cycle"),
      (12, "parent", "cycle")]),
    ("cycle through the tree", "", None),  # built below: research's parent made p1
]


@pytest.mark.parametrize(("extra", "expected"), [(e, x) for _, e, x in ORG_CASES[:-1]],
                         ids=[c for c, _, _ in ORG_CASES[:-1]])
def test_org_tree_cycles_and_orphans(tmp_path: Path, extra: str,
                                     expected: list[tuple[int, str, str]]) -> None:
    folder = write_scenario(tmp_path / "s", org=ORG_HEAD + extra + "\n")
    problems = validate_scenario(folder)
    assert [(p.file, p.row, p.column) for p in problems] == [
        ("org.csv", row, column) for row, column, _ in expected]
    for problem, (_, _, words) in zip(problems, expected, strict=True):
        assert words in problem.message


def test_cycle_through_the_tree_reports_each_node_once(tmp_path: Path) -> None:
    org = "id,parent,weight\nresearch,p1,1\nvision,research,1\np1,vision,1\np2,vision,1\n" \
          "p3,research,1\np4,research,1\n"
    folder = write_scenario(tmp_path / "s", org=org,
                            budgets="project,gpu_hours\np2,1\n", demand=None,
                            reservations=None, usage=None)
    problems = validate_scenario(folder)
    assert where(problems) == [("org.csv", 2, "parent"), ("org.csv", 3, "parent"),
                               ("org.csv", 4, "parent")]
    assert "research → p1 → vision → research" in problems[0].message


# --------------------------------------------------------------------------- usage


def test_identical_repeated_usage_rows_collapse(tmp_path: Path) -> None:
    folder = write_scenario(tmp_path / "s", usage=FILES["usage"]
                            + "j1,p1,h100-a,8,2026-10-20,2026-10-22\n"
                            + "j1,p1,h100-a,8.0,2026-10-20T00:00:00Z,2026-10-22\n")
    usage = load_scenario(folder).usage
    assert list(usage["job_id"]) == ["j1", "j2", "j3"]
    assert list(usage.index) == [0, 1, 2]


# --------------------------------------------------------------------------- hypothesis


TAKEN_IDS = {"research", "vision", "language", "p1", "p2", "p3", "p4"}


def _org_and_budget_with(project: str) -> dict[str, str]:
    org, budgets = io.StringIO(), io.StringIO()
    # quote every field, as a spreadsheet does for text with line breaks or commas
    csv.writer(org, lineterminator="\n", quoting=csv.QUOTE_ALL).writerow(
        [project, "language", "1"])
    csv.writer(budgets, lineterminator="\n", quoting=csv.QUOTE_ALL).writerow([project, "10", ""])
    return {"org": FILES["org"] + org.getvalue(), "budgets": FILES["budgets"] + budgets.getvalue()}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=20))
def test_any_text_as_an_id_loads_verbatim_or_is_an_input_error(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = write_scenario(Path(tmp) / "s", **_org_and_budget_with(text))
        try:
            scenario = load_scenario(folder)
        except InputError as err:
            assert err.problems
            assert all(p.file in ("org.csv", "budgets.csv") for p in err.problems)
            # only a blank id, one that is already taken or one holding a control
            # character is wrong
            assert not text.strip() or text in TAKEN_IDS or bad_characters(text)
            if bad_characters(text) and text.strip():
                assert any("control characters" in p.message for p in err.problems)
            return
        assert not bad_characters(text)
        assert text in list(scenario.org["id"])
        assert text in list(scenario.budgets["project"])


def test_what_the_planner_reports_as_unplaced_is_not_an_input_error(tmp_path: Path) -> None:
    # 99 nodes on a 4-node cluster; 300 h in a 24 h window; demand after the quarter
    folder = write_scenario(
        tmp_path / "s",
        **append("reservations", "r3,p1,h100-a,99,24,2026-11-03,2026-11-10\n"
                                 "r4,p1,h100-a,1,300,2026-11-03,2026-11-04"),
        **append("demand", "p1,h100-a,2027-02-01,2027-02-03,1"))
    scenario = load_scenario(folder)
    assert list(scenario.reservations["nodes"]) == [2, 1, 99, 1]


def test_missing_config_key_says_what_to_write(tmp_path: Path) -> None:
    folder = write_scenario(tmp_path / "s", **edit("scenario", 'name = "tiny"\n', ""))
    [problem] = validate_scenario(folder)
    assert (problem.file, problem.row, problem.column) == (TOML, None, "name")
    assert 'name = "sample"' in problem.message


def test_node_labels_load_sorted_and_the_default_selector_is_the_cluster_label(
        tmp_path: Path) -> None:
    from planner.inputs.labels import node_selector

    folder = write_scenario(tmp_path / "s", clusters=labelled(
        "topology.kubernetes.io/zone=b; nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3", ""))
    clusters = load_scenario(folder).clusters
    assert clusters["cluster"].tolist() == ["a100-b", "h100-a"]  # read sorted by cluster
    assert clusters["node_labels"].tolist() == [(), (
        ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
        ("topology.kubernetes.io/zone", "b"))]
    # a bare GPU type matches no node GPU feature discovery labels: only the cluster label;
    # a type written as GFD writes it is pinned too; an id that is no label value is hashed
    assert node_selector("a100-b", "A100") == (("gpu-planner.io/cluster", "a100-b"),)
    assert node_selector("h", "NVIDIA-H100-80GB-HBM3") == (
        ("gpu-planner.io/cluster", "h"), ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"))
    (key, value), = node_selector("H100 pool", "H100")
    assert key == "gpu-planner.io/cluster" and value.startswith("h100-pool-")
    assert node_selector("H100 pool", "H100") != node_selector("h100-pool", "H100")


def test_validate_for_slurm_refuses_clusters_that_are_no_partition_name(
        tmp_path: Path) -> None:
    # "h100 a" is a fine id for the planner and for Kueue (its flavor name is hashed), but
    # the Slurm script names the partition as the cluster, and Slurm refuses spaces there
    folder = write_scenario(tmp_path / "s", **{
        name: FILES[name].replace("h100-a", "h100 a")
        for name in ("clusters", "budgets", "demand", "reservations", "usage")})
    assert validate_scenario(folder) == []
    problems = validate_scenario(folder, ("slurm",))
    assert where(problems) == [("clusters.csv", 2, "cluster")]
    assert "Slurm partition name" in problems[0].message
    with pytest.raises(InputError):
        load_scenario(folder, ("slurm",))
# --------------------------------------------------------------------------- special files


def make_special(path: Path, kind: str) -> None:
    """Put a folder, FIFO, dangling link or a link to /dev/null where a file would be."""
    import os

    path.unlink(missing_ok=True)
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dangling link":
        path.symlink_to(path.parent / "gone.csv")
    else:
        path.symlink_to("/dev/null")


SPECIAL = ["folder", "fifo", "dangling link", "/dev/null"]


@pytest.mark.parametrize("kind", SPECIAL)
@pytest.mark.parametrize("name", ["usage", "demand", "budgets", "scenario"])
def test_a_special_file_is_a_problem_not_an_absent_file(tmp_path: Path, name: str, kind: str,
                                                         no_hang) -> None:
    folder = write_scenario(tmp_path / "s")
    file = folder / ("scenario.toml" if name == "scenario" else f"{name}.csv")
    make_special(file, kind)
    problems = validate_scenario(folder)
    assert where(problems) == [(file.name, None, None)], problems
    assert "not a regular file" in problems[0].message and str(file) in problems[0].message


def test_a_missing_optional_file_is_still_none(tmp_path: Path) -> None:
    assert validate_scenario(write_scenario(tmp_path / "s", usage=None, demand=None)) == []


@pytest.mark.parametrize("kind", SPECIAL[1:])  # a folder named book.xlsx is a scenario folder
def test_a_special_workbook_path_is_a_problem(tmp_path: Path, kind: str, no_hang) -> None:
    book = tmp_path / "book.xlsx"
    make_special(book, kind)
    problems = validate_scenario(book)
    assert where(problems) == [(str(book), None, None)]


# --------------------------------------------------------------------------- org depth


def chain(depth: int, top: str = "research") -> str:
    """Org rows hanging a chain of ``depth`` nodes under ``top``, p1 moved to its end."""
    rows = [f"d1,{top},1"] + [f"d{i},d{i - 1},1" for i in range(2, depth + 1)]
    return "\n".join(rows)


@pytest.mark.parametrize(("extra", "problem_row"), [
    (63, None),  # research (0) → d1 (1) … d63 (63) → p1 (64): the deepest allowed
    (64, 72),  # p1 at depth 65, in row 72 (d1 … d64 in rows 8 … 71)
    (1000, 72),  # d65 (row 72) is the first node too deep: one problem for the chain
])
def test_org_depth_is_bounded_with_one_problem_per_branch(tmp_path: Path, extra: int,
                                                          problem_row: int | None) -> None:
    org = ORG_HEAD.replace("p1,vision,1\n", "") + chain(extra) + f"\np1,d{extra},1\n"
    problems = validate_scenario(write_scenario(tmp_path / "s", org=org))
    if problem_row is None:
        assert problems == []
        return
    # rows: header 1, the 6 kept rows 2..7, d_i in row 7 + i, p1 after them
    assert where(problems) == [("org.csv", problem_row, "parent")]
    assert "at most 64 deep" in problems[0].message


# --------------------------------------------------------------------------- row order


def shuffled(text: str, rng) -> str:
    """A CSV with its data rows in another order (the header stays first)."""
    lines = text.splitlines(keepends=True)
    body = lines[1:]
    rng.shuffle(body)
    return lines[0] + "".join(body)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_shuffled_rows_load_to_the_same_tables_and_digest(rng) -> None:
    # identical usage repeats spelled differently: which one is kept must not matter
    usage = FILES["usage"] + "j1,p1,h100-a,8.0,2026-10-20T00:00:00Z,2026-10-22\n"
    with tempfile.TemporaryDirectory() as tmp:
        a = load_scenario(write_scenario(Path(tmp) / "a", usage=usage))
        b = load_scenario(write_scenario(
            Path(tmp) / "b", usage=shuffled(usage, rng),
            **{name: shuffled(FILES[name], rng)
               for name in ("clusters", "org", "budgets", "demand", "reservations")}))
    assert_same_tables(a, b)
    assert a.digest == b.digest


def test_bad_characters_are_exactly_the_refused_unicode_categories():
    from planner.inputs.schema import bad_characters

    for code in range(0x110000):
        ch = chr(code)
        refused = (unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp")
                   or ch in "\ufffe\uffff")
        assert bool(bad_characters(ch)) == refused, hex(code)
    assert bad_characters("a\x01b\x01\n") == "\\x01 \\n"
