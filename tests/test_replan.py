"""Replanning from --previous: conflicts refused (exit 2, named, with the way out), stale usage."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from planner.cli import main
from planner.inputs.load import load_scenario
from planner.replan import previous_conflicts, stale_usage
from tests.scenario_factory import FILES as TINY
from tests.scenario_factory import write_scenario

# the tiny scenario with both requests' windows opening on 11-02, so the runs below fit them
FILES = {**TINY, "reservations": "request_id,project,cluster,nodes,hours,earliest_start,deadline\n"
                                 "r1,p1,h100-a,2,48,2026-11-02,2026-11-10\n"
                                 "r2,p3,a100-b,1,30,2026-11-02,2026-11-08T12:00:00\n"}


@pytest.fixture(scope="module")
def first_plan(tmp_path_factory) -> dict:
    """The tiny scenario planned as of 2026-11-02, with r1 made to run 11-02 to 11-04 on
    h100-a (2 nodes) and r2 11-02 to 11-04 on a100-b (1 node): both running at 11-03."""
    tmp = tmp_path_factory.mktemp("first")
    assert main(["run", str(write_scenario(tmp / "sc")), "--out", str(tmp / "out"),
                 "--quiet"]) == 0
    plan = json.loads((tmp / "out" / "plan.json").read_text())
    plan["reservations"] = [
        {"request_id": rid, "project": project, "cluster": cluster, "nodes": nodes,
         "start": "2026-11-02T00:00:00Z", "end": "2026-11-04T00:00:00Z", "kept": False}
        for rid, project, cluster, nodes in (("r1", "p1", "h100-a", 2), ("r2", "p3", "a100-b", 1))]
    return plan


def replan(tmp_path: Path, previous: dict, as_of: str = "2026-11-03", **files) -> tuple[int, Path]:
    """Run ``planner run --as-of AS_OF --previous`` on the tiny scenario with ``files``."""
    folder = write_scenario(tmp_path / "sc", **{"reservations": FILES["reservations"], **files})
    prev = tmp_path / "previous.json"
    prev.write_text(json.dumps(previous))
    out = tmp_path / "out"
    code = main(["run", str(folder), "--out", str(out), "--quiet", "--as-of", as_of,
                 "--previous", str(prev)])
    return code, out


def flat(text: str) -> str:
    """Terminal output with rich's line wrapping undone (wraps fall on spaces)."""
    return " ".join(text.split())


def without(text: str, *needles: str) -> str:
    """``text`` without the lines containing any of ``needles``."""
    return "".join(line for line in text.splitlines(keepends=True)
                   if not any(n in line for n in needles))


def test_a_replan_without_conflict_keeps_both_running_reservations(tmp_path, first_plan):
    code, out = replan(tmp_path, first_plan)
    assert code == 0
    kept = {r["request_id"]: (r["end"], r["kept"])
            for r in json.loads((out / "plan.json").read_text())["reservations"]}
    assert kept["r1"] == kept["r2"] == ("2026-11-04T00:00:00Z", True)


@pytest.mark.parametrize(("edit", "column", "says"), [
    (lambda p: p.update(scenario="other"), "scenario", "planned scenario 'other'"),
    (lambda p: p.update(quarter_start="2026-07-01T00:00:00Z"), "scenario",
     "for [2026-07-01T00:00:00Z, 2027-01-01T00:00:00Z)"),
    (lambda p: p.update(as_of="2026-11-05T00:00:00Z"), "as_of",
     "planned as of 2026-11-05T00:00:00Z, later than this run's as_of 2026-11-03T00:00:00Z"),
])
def test_a_previous_plan_of_another_scenario_or_from_later_is_refused(
        tmp_path, first_plan, capsys, edit, column, says):
    previous = json.loads(json.dumps(first_plan))
    edit(previous)
    code, out = replan(tmp_path, previous)
    err = flat(capsys.readouterr().err)
    assert code == 2
    assert f"previous.json, column {column}: " in err and says in err
    assert "drop --previous to start afresh" in err
    assert not out.exists()


def test_a_running_reservations_project_gone_is_refused_naming_it(tmp_path, first_plan, capsys):
    # p1 removed from the org (and every file naming it): r1 runs for it until 11-04
    files = {name: without(FILES[name], "p1,") for name in ("org", "budgets", "demand",
                                                              "reservations", "usage")}
    code, out = replan(tmp_path, first_plan, **files)
    err = flat(capsys.readouterr().err)
    assert code == 2 and not out.exists()
    assert "previous.json, column reservations/0/project: reservation 'r1'" in err
    assert "restore project 'p1' (in org.csv and budgets.csv) until 2026-11-04T00:00:00Z" in err


def test_a_running_reservations_cluster_gone_is_refused_naming_it(tmp_path, first_plan, capsys):
    files = {name: without(FILES[name], "a100-b,") for name in ("clusters", "demand",
                                                                "reservations", "usage")}
    files["budgets"] = FILES["budgets"].replace("a100-b;h100-a", "h100-a")
    code, out = replan(tmp_path, first_plan, **files)
    err = flat(capsys.readouterr().err)
    assert code == 2 and not out.exists()
    assert "column reservations/1/cluster: reservation 'r2'" in err
    assert "restore cluster 'a100-b' until 2026-11-04T00:00:00Z" in err


def test_a_cluster_shrunk_below_its_running_reservations_is_refused(tmp_path, first_plan,
                                                                    capsys):
    # h100-a cut from 4 nodes to 1, while r1 holds 2 of them until 11-04 (p1's demand cut to
    # the 8 GPUs left, which validation requires of any demand row)
    code, out = replan(tmp_path, first_plan,
                       clusters=FILES["clusters"].replace("h100-a,H100,4,8", "h100-a,H100,1,8"),
                       demand=FILES["demand"].replace("2026-11-09,16", "2026-11-09,8"))
    err = flat(capsys.readouterr().err)
    assert code == 2 and not out.exists()
    assert ("cluster 'h100-a' has 1 nodes in clusters.csv, but the reservations running on "
            "it at 2026-11-03T00:00:00Z ('r1') hold 2: restore cluster 'h100-a' to at least "
            "2 nodes until 2026-11-04T00:00:00Z") in err


def test_a_reservation_that_has_ended_or_not_started_is_no_conflict(tmp_path, first_plan):
    # the same shrunk cluster, replanned at 11-04 when r1 has ended: nothing is running
    sc = load_scenario(write_scenario(
        tmp_path / "sc", clusters=FILES["clusters"].replace("h100-a,H100,4,8", "h100-a,H100,1,8"),
        demand=FILES["demand"].replace("2026-11-09,16", "2026-11-09,8")))
    for as_of in ("2026-11-04", "2026-11-02"):
        at = sc.with_as_of(pd.Timestamp(as_of, tz="UTC"))
        assert previous_conflicts(first_plan, "p.json", at) == []


def test_stale_usage_warns_when_usage_ends_before_the_previous_as_of(tmp_path, first_plan,
                                                                      capsys):
    # the tiny usage ends on 10-30; the previous plan was made on 11-02: stale, a warning
    code, out = replan(tmp_path, first_plan)
    assert code == 0 and (out / "plan.json").exists()
    err = flat(capsys.readouterr().err)
    assert ("warning: usage.csv looks stale: its latest job ends at 2026-10-30T00:00:00Z, "
            "before the previous plan's as_of 2026-11-02T00:00:00Z") in err


def test_fresh_usage_or_a_first_plan_gives_no_warning(tmp_path, first_plan, capsys):
    fresh = FILES["usage"] + "j4,p1,h100-a,8,2026-11-02T00:00:00,2026-11-02T12:00:00\n"
    code, _ = replan(tmp_path / "a", first_plan, usage=fresh)
    assert code == 0 and "stale" not in flat(capsys.readouterr().err)
    sc = load_scenario(write_scenario(tmp_path / "b", usage=None))
    assert stale_usage({**first_plan, "as_of": "2026-10-01T00:00:00Z"}, sc) is None
    assert "it is empty" in stale_usage(first_plan, sc)


def test_running_reservations_over_the_budget_left_are_refused(tmp_path, first_plan, capsys):
    # p1 used 8 GPUs x 48 h = 384 NGH (usage j1); r1 (2 nodes x 8 GPUs, H100) runs from
    # 11-02 to 11-04, so from as_of 11-03 it needs 2 x 8 x 24 = 384 NGH more. With a
    # budget of 500, 116 NGH are left: rule 6 keeps r1, rule 4 cannot then hold.
    budgets = FILES["budgets"].replace("p1,5000,", "p1,500,")
    code, out = replan(tmp_path, first_plan, budgets=budgets)
    err = flat(capsys.readouterr().err)
    assert code == 2 and not out.exists()
    assert ("column reservations/0/project: the reservations running for project 'p1' at "
            "2026-11-03T00:00:00Z ('r1') need 384.0 NGH to their ends, but its budget 500.0 "
            "has 116.0 NGH left after 384.0 used: raise its budget in budgets.csv to at least "
            "768.0 NGH") in err
    # with 768 NGH it fits exactly: no conflict, and the replan keeps r1 within budget
    code, out = replan(tmp_path / "fits", first_plan,
                       budgets=FILES["budgets"].replace("p1,5000,", "p1,768,"))
    assert code == 0
