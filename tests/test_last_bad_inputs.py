"""The last bad inputs: each is exit 2 naming file, row and field, or handled correctly.

A previous plan whose numbers no plan holds (NaN, Infinity, 1e308 GPU-hours); a
reservation of 1e-300 hours; a cluster id holding ``;``; an id of 40,000 characters; ids a
spreadsheet would run as formulas in simulate's jobs CSV; a suggestion that suggested the
option typed.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from planner.cli import main, suggestion
from planner.inputs.load import validate_scenario
from planner.simulate.run import jobs_csv
from tests.scenario_factory import CLUSTERS_CSV, ORG_CSV, RESERVATIONS_CSV, write_scenario
from tests.test_simulate_metrics import two_week_case


def flat(text: str) -> str:
    return " ".join(text.split())


# --- M5: a previous plan's numbers -----------------------------------------------------------


@pytest.fixture(scope="module")
def planned(tmp_path_factory) -> tuple[Path, Path]:
    """The tiny scenario and its plan as of 2026-11-02."""
    tmp = tmp_path_factory.mktemp("prev")
    folder = write_scenario(tmp / "sc")
    assert main(["run", str(folder), "--out", str(tmp / "out"), "--quiet"]) == 0
    return folder, tmp / "out" / "plan.json"


def _with_gpu_hours(plan: Path, text: str, out: Path) -> Path:
    body = json.loads(plan.read_text())
    body["allocations"][0]["gpu_hours"] = "__HERE__"
    out.write_text(json.dumps(body, indent=1).replace('"__HERE__"', text))
    return out


@pytest.mark.parametrize(("number", "says"), [
    ("NaN", "column allocations[0].gpu_hours: NaN is not a number"),
    ("Infinity", "column allocations[0].gpu_hours: Infinity is not a number"),
    ("-Infinity", "column allocations[0].gpu_hours: -Infinity is not a number"),
    ("1e400", "column allocations[0].gpu_hours: a number too large to hold"),
    ("1e308", "column allocations/0/gpu_hours: grants 1e+308 GPU-hours on cluster"),
])
def test_a_previous_plan_with_numbers_no_plan_holds_is_refused(planned, tmp_path, capsys,
                                                               number, says):
    folder, plan = planned
    bad = _with_gpu_hours(plan, number, tmp_path / "prev.json")
    out = tmp_path / "out"
    assert main(["run", str(folder), "--as-of", "2026-11-03", "--previous", str(bad),
                 "--out", str(out), "--quiet"]) == 2
    err = flat(capsys.readouterr().err)
    assert f"prev.json, {says}" in err, err
    assert not out.exists()


def test_a_previous_plan_as_the_planner_wrote_it_is_taken(planned, tmp_path):
    folder, plan = planned
    assert main(["run", str(folder), "--as-of", "2026-11-03", "--previous", str(plan),
                 "--out", str(tmp_path / "out"), "--quiet"]) == 0


# --- M6: a reservation's length --------------------------------------------------------------


def test_a_reservation_of_1e_300_hours_is_refused_at_validation(tmp_path, capsys):
    folder = write_scenario(tmp_path / "sc", reservations=RESERVATIONS_CSV.replace(
        "r1,p1,h100-a,2,48,", "r1,p1,h100-a,2,1e-300,"))
    assert main(["validate", str(folder)]) == 2
    err = flat(capsys.readouterr().err)
    assert "reservations.csv, row 2, column hours: must be ≥ 0.01, ≤ 8,784, got 1e-300" in err


def test_the_shortest_reservation_plans_and_checks(tmp_path):
    """0.01 h rounds up to one whole period in the model and in the checker alike."""
    folder = write_scenario(tmp_path / "sc", reservations=RESERVATIONS_CSV.replace(
        "r1,p1,h100-a,2,48,", "r1,p1,h100-a,2,0.01,"))
    out = tmp_path / "out"
    assert main(["run", str(folder), "--out", str(out), "--quiet"]) == 0
    assert main(["check", str(out / "plan.json"), str(folder)]) == 0
    placed = {r["request_id"]: r for r in json.loads((out / "plan.json").read_text())[
        "reservations"]}
    assert placed["r1"]["end"] > placed["r1"]["start"]


# --- Low: ids a list cannot name, ids too long -------------------------------------------------


def test_a_cluster_id_holding_the_list_separator_is_refused(tmp_path, capsys):
    folder = write_scenario(tmp_path / "sc",
                            clusters=CLUSTERS_CSV + "l40s;x,L40S,1,8\n")
    assert main(["validate", str(folder)]) == 2
    err = flat(capsys.readouterr().err)
    assert ("clusters.csv, row 4, column cluster: 'l40s;x' holds ';', which separates the "
            "clusters a project may use in budgets.csv") in err


@pytest.mark.parametrize("length", [1025, 40_000])
def test_an_id_longer_than_any_executor_takes_is_refused(tmp_path, length):
    long = "p" * length
    folder = write_scenario(tmp_path / "sc", org=ORG_CSV + f"{long},language,1\n")
    problems = validate_scenario(folder)
    assert [(p.file, p.row, p.column) for p in problems] == [("org.csv", 9, "id")]
    assert f"is {length:,} characters long; ids and names are at most 1,024" in \
        problems[0].message


def test_an_id_of_the_longest_length_is_taken(tmp_path):
    folder = write_scenario(tmp_path / "sc", org=ORG_CSV + f"{'p' * 1024},language,1\n")
    assert validate_scenario(folder) == []


def test_a_scenario_name_too_long_is_refused(tmp_path):
    from tests.scenario_factory import SCENARIO_TOML

    folder = write_scenario(tmp_path / "sc", scenario=SCENARIO_TOML.replace(
        'name = "tiny"', f'name = "{"n" * 2000}"'))
    problems = validate_scenario(folder)
    assert [(p.file, p.column) for p in problems] == [("scenario.toml", "name")]


# --- Low: simulate's jobs CSV stays inert in a spreadsheet -------------------------------------

HOSTILE = ['=HYPERLINK("http://evil.example/","click")', "+cmd|' /C calc'!A0", "@SUM(1+1)",
           "-2+3"]


def test_jobs_csv_writes_formula_like_ids_as_text():
    scenario, trace, result = two_week_case()
    trace = trace.copy()
    trace["job_id"] = HOSTILE
    rows = list(csv.DictReader(io.StringIO(jobs_csv(scenario, trace, result).decode())))
    assert [r["job_id"] for r in rows] == ["'" + h for h in HOSTILE]
    for row in rows:  # nothing a spreadsheet evaluates: every text cell starts inertly
        assert not any(v.startswith(("=", "+", "-", "@")) for k, v in row.items()
                       if k in ("job_id", "project", "cluster"))
    plain = two_week_case()
    assert [r["job_id"] for r in csv.DictReader(io.StringIO(
        jobs_csv(*plain).decode()))] == ["A", "B", "U", "N"]  # ordinary ids unchanged


# --- Low: the suggestion for an option after -- ----------------------------------------------


def test_an_option_after_double_dash_gets_no_did_you_mean_itself(capsys):
    with pytest.raises(SystemExit) as done:
        main(["explain", "p1", "--", "--help"])
    assert done.value.code == 2
    err = flat(capsys.readouterr().err)
    assert "did you mean --help (not --help)" not in err
    assert "'--help' follows --, so it is an argument, not an option" in err


def test_a_mistyped_option_still_gets_its_suggestion():
    from planner.cli import _parser

    parser = _parser()
    assert suggestion(parser, "unrecognized arguments: --ot", ["run", "--ot", "x"]) == \
        "; did you mean --out (not --ot)?"


# --- M3: TOML nested deeper than any file of ours ---------------------------------------------

DEEP_TOML = "x = " + "[" * 5000 + "]" * 5000 + "\n"


@pytest.mark.parametrize("what", ["scenario", "model", "sweep"])
def test_deeply_nested_toml_exits_2_without_a_traceback(tmp_path, capsys, what):
    from tests.scenario_factory import SCENARIO_TOML

    if what == "scenario":
        folder = write_scenario(tmp_path / "sc", scenario=SCENARIO_TOML + DEEP_TOML)
        args = ["validate", str(folder)]
    else:
        deep = tmp_path / "deep.toml"
        deep.write_text(DEEP_TOML)
        args = (["run", str(write_scenario(tmp_path / "sc")), "--model", str(deep), "--out",
                 str(tmp_path / "out")] if what == "model"
                else ["sweep", str(deep), "--out", str(tmp_path / "out")])
    assert main(args) == 2
    err = flat(capsys.readouterr().err)
    assert "nested deeper than" in err and "Traceback" not in err


def test_a_refused_write_model_folder_names_its_option_and_what_was_written(tmp_path, capsys):
    folder = write_scenario(tmp_path / "sc")
    (tmp_path / "taken").write_text("a file where the folder would be")
    assert main(["run", str(folder), "--out", str(tmp_path / "out"), "--quiet",
                 "--write-model", str(tmp_path / "taken")]) == 2
    err = flat(capsys.readouterr().err)
    assert "choose another --write-model folder" in err and "another --out" not in err
    assert f"nothing else written (written before it: {tmp_path / 'out' / 'plan.json'}" in err
