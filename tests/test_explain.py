"""``planner explain`` and ``planner status`` against hand-worked plans."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.cli import main
from planner.config import load_model
from planner.explain import (
    KINDS,
    ProjectWhy,
    TeamWhy,
    build_context,
    explain,
    explanation_lines,
    water_level,
)
from planner.run import plan_scenario
from planner.status import OPPORTUNISTIC, UNUSED, plan_status, running_gpus, status_lines
from planner.words import OVERDRAWN_WORDS
from tests.scenario_factory import write_scenario
from tests.test_properties import scenarios
from tests.tiny import scenario, ts

MODEL = load_model("default")
BIG = 1e6
APPROX = {"abs": 1e-6}

# --------------------------------------------------------------------------- fair share

# Org: area A (weight 2) with a1, a2 (weight 1 each); area B (weight 1) with b1.
# One cluster of 100 H100 GPUs, one 24 h period: C = 2400 GPU-hours = 2400 NGH.
ORG = [("A", "", 2.0), ("B", "", 1.0), ("a1", "A", 1.0), ("a2", "A", 1.0), ("b1", "B", 1.0)]
ONE_BIG_NODE = [("c1", "H100", 1, 100)]
DEMAND = [("a1", "c1", "2026-11-02", "2026-11-03", 10),   # 240 GPU-hours
          ("a2", "c1", "2026-11-02", "2026-11-03", 80),   # 1920
          ("b1", "c1", "2026-11-02", "2026-11-03", 60)]   # 1440
# b1 ran 10 GPUs × 40 h = 400 NGH inside the 7-day window before as_of: U_B = U_b1 = 400.
USAGE = [("j1", "b1", "c1", 10, "2026-10-31T00:00:00", "2026-11-01T16:00:00")]


@pytest.fixture(scope="module")
def fair():
    sc = scenario(clusters=ONE_BIG_NODE, org=ORG, demand=DEMAND, usage=USAGE,
                  budgets=[("a1", BIG), ("a2", BIG), ("b1", BIG)])
    run = plan_scenario(sc, MODEL)
    return run, build_context(run.plan.body, sc, MODEL)


def test_fair_share_with_lookback_shows_lambda_weights_and_usage(fair):
    # Root: A = min(2160, 2λ), B = min(1440, max(0, λ − 400)); 3λ − 400 = 2400,
    # λ = 2800/3 = 933.33: A = 5600/3 = 1866.67, B = 1600/3 = 533.33 (both below demand).
    # Inside B, b1 alone gets B's 533.33; it is below its demand on a full cluster, at its
    # target: fair share binds. Runner-up without lookback: λ = 800, B = 800.
    run, ctx = fair
    why = explain(ctx, "b1").subject
    assert isinstance(why, ProjectWhy)
    assert why.usage == pytest.approx(400.0, **APPROX)
    (b,) = why.bindings
    assert (b.cluster, b.kind) == ("c1", "fair share")
    assert b.target == pytest.approx(1600 / 3, **APPROX)
    assert b.guaranteed == pytest.approx(1600 / 3, **APPROX)
    root, team = b.levels
    assert root.parent == "" and root.capacity == pytest.approx(2400.0)
    assert root.lam == pytest.approx(2800 / 3, **APPROX)
    by_node = {s.node: s for s in root.siblings}
    assert by_node["A"].weight == 2.0 and by_node["B"].weight == 1.0
    assert by_node["A"].demand == pytest.approx(2160.0) and by_node["B"].usage == 400.0
    assert by_node["A"].grant == pytest.approx(5600 / 3, **APPROX)
    assert by_node["B"].grant == pytest.approx(1600 / 3, **APPROX)
    assert by_node["B"].on_path and not by_node["A"].on_path
    # B has one child: the whole 533.33 goes to b1, below its 1440. Its usage offsets it
    # there too: 533.33 = λ·1 − 400, so λ = 933.33 again.
    assert team.parent == "B" and team.lam == pytest.approx(2800 / 3, **APPROX)
    assert run.plan.body["budgets"][2]["marginal_value"] == 0.0


def test_capped_by_demand_and_fair_share_inside_a_team(fair):
    # Inside A (1866.67): a1 = min(240, μ), a2 = min(1920, μ); 240 + μ = 1866.67 →
    # μ = 1626.67: a1 gets its 240 (demand binds), a2 1626.67 (its fair share, λ = μ).
    _, ctx = fair
    a1 = explain(ctx, "a1").subject
    (b,) = a1.bindings
    assert b.kind == "demand" and b.guaranteed == pytest.approx(240.0, **APPROX)
    assert a1.headline == "demand (c1)"
    (b,) = explain(ctx, "a2").subject.bindings
    assert b.kind == "fair share"
    assert b.levels[1].parent == "A"
    assert b.levels[1].lam == pytest.approx(5600 / 3 - 240, **APPROX)
    assert b.guaranteed == pytest.approx(5600 / 3 - 240, **APPROX)


def test_a_team_sums_its_children(fair):
    # A: budgets 2e6, nothing used; granted this period 240 + 1626.67 GPU-hours.
    _, ctx = fair
    why = explain(ctx, "A").subject
    assert isinstance(why, TeamWhy)
    assert why.budget == 2 * BIG and why.used == 0.0
    assert [c.node for c in why.children] == ["a1", "a2"]
    assert sum(c.granted_gpu_hours for c in why.children) == pytest.approx(5600 / 3, **APPROX)
    assert why.planned == pytest.approx(sum(c.planned for c in why.children), **APPROX)
    assert [c.binding for c in why.children] == ["demand (c1)", "fair share (c1)"]
    assert why.levels["c1"][0].lam == pytest.approx(2800 / 3, **APPROX)
    lines = explanation_lines(explain(ctx, "A"))
    # λ in words (933.33 to one decimal), said contended because demand waits there
    assert any("contended, " in line and "water level 933.3 NGH per unit of weight" in line
               for line in lines)
    assert lines[-1].startswith("NGH (normalized GPU-hours) = GPU-hours × ")


def test_even_pace_of_a_team_with_a_budget_of_hundreds_of_millions():
    # budget × (as_of − quarter start) as a Timedelta overflowed int64 above ~5 M NGH
    # (planner explain of a large area crashed): the share first. The tiny quarter runs
    # 10-01 → 11-03 (33 days), as of 11-02: pace = 2e8 × 32 / 33.
    sc = scenario(clusters=ONE_BIG_NODE, org=ORG, demand=DEMAND, usage=USAGE,
                  budgets=[("a1", 1e8), ("a2", 1e8), ("b1", 1e8)])
    ctx = build_context(plan_scenario(sc, MODEL).plan.body, sc, MODEL)
    why = explain(ctx, "A").subject
    assert why.budget == 2e8 and why.pace == pytest.approx(2e8 * 32 / 33, rel=1e-9)


@pytest.mark.parametrize("capacity, demand, weight, offset, expected", [
    (10.0, [4.0, 8.0], [1.0, 1.0], [0.0, 0.0], 6.0),     # 4 capped, 6 to the other
    (12.0, [4.0, 8.0], [1.0, 1.0], [0.0, 0.0], None),    # everything fits
    (6.0, [4.0, 8.0], [1.0, 2.0], [0.0, 0.0], 2.0),      # 2λ + 2·... : λ = 2, x = 2, 4
    (4.0, [4.0, 8.0], [1.0, 1.0], [0.0, 10.0], 4.0),     # the other's usage: all to the first
])
def test_water_level_read_back_from_the_grants(capacity, demand, weight, offset, expected):
    from planner.fairshare.waterfill import water_fill

    d, w, u = (np.array(v) for v in (demand, weight, offset))
    grant = water_fill(capacity, d, w, u)
    lam = water_level(capacity, d, w, u, grant)
    assert lam == (None if expected is None else pytest.approx(expected))
    if lam is not None:  # the contract's rule at that λ gives the grants back
        assert np.minimum(d, np.maximum(0.0, lam * w - u)) == pytest.approx(grant)


# --------------------------------------------------------------------------- budget


def budget_scenario(usage=()):
    # One 10-GPU cluster, one 24 h period: 240 GPU-hours. p1 (budget 72 NGH) wants all
    # 10 GPUs (240); p2 (budget 1000) wants 5 (120) and ran 4 GPUs × 30 h before as_of
    # (until 06:00 on as_of's day: still running at as_of).
    # Targets: caps p1 min(240, 72) = 72, p2 120; 192 ≤ 240, no contention.
    # LP: p1 guaranteed 72 (its budget), p2 120; the 48 left go to p1 as opportunistic
    # (rule 5). p1: 120 of 240, budget binds. One more NGH of budget turns an
    # opportunistic GPU-hour guaranteed: + G − O = 4 − 1 = 3; one NGH less also drops p1
    # below its target 72, − (G − O + F) = −4. The optimum is degenerate (g = τ exactly),
    # so the budget row's dual may be anything in [3, 4]; HiGHS reports one of them.
    usage = list(usage) or [("j1", "p2", "c1", 4, "2026-11-01T00:00:00",
                             "2026-11-02T06:00:00")]
    return scenario(clusters=[("c1", "H100", 1, 10)],
                    org=[("p1", "", 1.0), ("p2", "", 1.0)],
                    budgets=[("p1", 72.0), ("p2", 1000.0)],
                    demand=[("p1", "c1", "2026-11-02", "2026-11-03", 10),
                            ("p2", "c1", "2026-11-02", "2026-11-03", 5)],
                    usage=usage)


def test_capped_by_budget_with_its_dual():
    sc = budget_scenario()
    run = plan_scenario(sc, MODEL)
    why = explain(build_context(run.plan.body, sc, MODEL), "p1").subject
    (b,) = why.bindings
    assert b.kind == "budget"
    assert (b.guaranteed, b.opportunistic) == (pytest.approx(72.0), pytest.approx(48.0))
    assert why.budget_left == pytest.approx(0.0, **APPROX)
    assert 3.0 - 1e-6 <= why.marginal_value <= 4.0 + 1e-6
    assert why.marginal_value == run.plan.body["budgets"][0]["marginal_value"]
    assert why.forecast == pytest.approx(72.0)
    assert f"marginal value {why.marginal_value:g}" in b.detail


# --------------------------------------------------------------------------- status


def test_status_equals_the_plan():
    # p1: granted (72 + 48) / 24 = 5 GPUs, entitled 3, running 0, headroom 3; forecast
    # 72 = 100 % of budget (no overrun), but 48 opportunistic NGH > 25 % of 72:
    # opportunistic-heavy (it was called "will overrun" once, which it is not).
    # p2: granted and entitled 5, running 4 (j1 covers as_of), headroom 1; used 4 × 24 =
    # 96 NGH before as_of + planned 120 = 216, 21.6 % of 1000: unused budget.
    sc = budget_scenario()
    plan = plan_scenario(sc, MODEL).plan.body
    status = plan_status(plan, sc)
    p1, p2 = status.rows
    assert (p1.granted_gpus, p1.entitled_gpus, p1.opportunistic_gpus) == (5.0, 3.0, 2.0)
    assert (p1.running_gpus, p1.headroom_gpus, p1.forecast_share) == (0.0, 3.0, 1.0)
    assert p1.flags == (OPPORTUNISTIC,)
    assert (p2.granted_gpus, p2.entitled_gpus, p2.running_gpus, p2.headroom_gpus) == (
        5.0, 5.0, 4.0, 1.0)
    assert (p2.used, p2.planned, p2.forecast) == (96.0, 120.0, 216.0)
    assert p2.flags == (UNUSED,)
    budgets = {b["project"]: b for b in plan["budgets"]}
    for row in status.rows:  # the NGH columns are the plan's
        for field in ("budget", "used", "planned", "planned_opportunistic"):
            assert getattr(row, field) == budgets[row.project][field]
    text = "\n".join(status_lines(status))
    assert "2 projects: 0 overrun, 1 unused budget, 1 opportunistic-heavy" in text
    # the legend names every flag with its meaning, and NGH is defined
    assert "  opportunistic-heavy: the plan gives it more than 25 % of its budget" in text
    assert "  unused budget: forecast below 80 % of the budget" in text
    assert "NGH (normalized GPU-hours) = GPU-hours × the GPU type's rate" in text


def test_running_reads_the_ingest_state_column():
    # A row ingested while running ends at the ingest time (here as_of itself): its
    # interval no longer covers as_of, but state = running says it still runs.
    sc = budget_scenario(usage=[("j1", "p2", "c1", 4, "2026-11-01", "2026-11-02"),
                                ("j2", "p1", "c1", 2, "2026-11-01", "2026-11-02")])
    assert running_gpus(sc, ts("2026-11-02")) == {}
    usage = sc.usage.copy()
    usage["state"] = ["running", ""]
    from dataclasses import replace

    assert running_gpus(replace(sc, usage=usage), ts("2026-11-02")) == {"p2": 4.0}


# --------------------------------------------------------------------------- reservations


def reservation_scenario():
    # One cluster of 4 nodes × 8 GPUs, four daily periods (11-02 … 11-05).
    # r1 (p1, 3 nodes, 48 h) may only start 11-02: placed in periods 0–1.
    # r2 (p2, 2 nodes, 48 h) must end by 11-03: window too short, unplaced. Free of
    # reservations: 1 node in periods 0–1, 4 in 2–3, so 2 nodes for 2 periods fit first
    # from 11-04. p3 wants 16 GPUs throughout; in periods 0–1 only 8 GPUs are not
    # reserved, so it gets 8 × 24 = 192 of 384 GPU-hours: the reservation binds (without
    # it, 16 ≤ 32 GPUs would fit).
    return scenario(clusters=[("c1", "H100", 4, 8)],
                    org=[("p1", "", 1.0), ("p2", "", 1.0), ("p3", "", 1.0)],
                    budgets=[("p1", BIG), ("p2", BIG), ("p3", BIG)],
                    demand=[("p3", "c1", "2026-11-02", "2026-11-06", 16)],
                    reservations=[("r1", "p1", "c1", 3, 48, "2026-11-02", "2026-11-04"),
                                  ("r2", "p2", "c1", 2, 48, "2026-11-02", "2026-11-03")],
                    quarter_end="2026-11-06")


def test_unplaced_reservation_gets_its_earliest_fitting_window():
    sc = reservation_scenario()
    run = plan_scenario(sc, MODEL)
    assert [r["request_id"] for r in run.plan.reservations] == ["r1"]
    ctx = build_context(run.plan.body, sc, MODEL)
    (u,) = explain(ctx, "p2").subject.unplaced
    assert (u.request_id, u.nodes, u.periods) == ("r2", 2, 2)
    assert u.reason.startswith("window too short")
    assert u.earliest_start == "2026-11-04T00:00:00Z"
    (b,) = explain(ctx, "p3").subject.bindings
    assert b.kind == "reservation"
    assert (b.guaranteed, b.cluster_reserved) == (pytest.approx(192.0), pytest.approx(576.0))
    later = explain(build_context(run.plan.body, sc, MODEL, "2026-11-04T12:00:00"), "p3")
    assert later.period_start == "2026-11-04T00:00:00Z"
    assert later.subject.bindings[0].kind == "demand"


def test_no_window_this_quarter():
    # r2 asks for 5 nodes: more than the cluster has, never fits.
    sc = scenario(clusters=[("c1", "H100", 4, 8)], org=[("p1", "", 1.0)],
                  budgets=[("p1", BIG)],
                  reservations=[("r2", "p1", "c1", 5, 24, "2026-11-02", "2026-11-04")],
                  quarter_end="2026-11-04")
    run = plan_scenario(sc, MODEL)
    (u,) = explain(build_context(run.plan.body, sc, MODEL), "p1").subject.unplaced
    assert u.earliest_start is None
    assert any("none this quarter" in line
               for line in explanation_lines(explain(build_context(run.plan.body, sc, MODEL),
                                                     "p1")))


# --------------------------------------------------------------------------- CLI


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    root = tmp_path_factory.mktemp("explain")
    folder = write_scenario(root / "sc")
    assert main(["run", str(folder), "--out", str(root / "out"), "--quiet"]) == 0
    return folder, root / "out" / "plan.json"


# p2 (budget 3,000 NGH) ran 16 H100s from 10-20 to 10-31: 16 × 264 = 4,224 NGH, plus the
# tiny scenario's j2 (4 × 12 h = 48): 4,272 used. At as_of 11-02, 32 of the quarter's 92
# days are gone: a whole budget ahead of pace is 3,000 × (1 + 32/92) = 4,043.5, so p2 is
# overdrawn (rule 8); p1 (5,000, 8 × 48 = 384 used) is not.
OVERDRAWN_USAGE = ("job_id,project,cluster,gpus,start,end\n"
                   "j1,p1,h100-a,8,2026-10-20,2026-10-22\n"
                   "j2,p2,h100-a,4,2026-10-25T12:00:00Z,2026-10-26T02:00:00+02:00\n"
                   "j3,p3,a100-b,8,2026-10-28,2026-10-30\n"
                   "hog,p2,h100-a,16,2026-10-20,2026-10-31\n")


def unbudgeted_scenario(folder: Path) -> Path:
    """:data:`OVERDRAWN_USAGE` with the hog's row in ``unbudgeted.csv`` (run on no budget)."""
    lines = OVERDRAWN_USAGE.splitlines(keepends=True)
    folder = write_scenario(folder, usage="".join(lines[:-1]))
    (folder / "unbudgeted.csv").write_text(lines[0] + lines[-1])
    return folder


def counted_reads(monkeypatch) -> list[Path]:
    """The folders :func:`planner.inputs.load.read_scenario` reads from now on, in order."""
    import planner.inputs.load as load

    reads: list[Path] = []
    real = load.read_scenario
    monkeypatch.setattr(load, "read_scenario", lambda path: reads.append(path) or real(path))
    return reads


def test_explain_says_a_project_is_overdrawn_and_what_that_means(tmp_path, capsys):
    folder = write_scenario(tmp_path / "sc", usage=OVERDRAWN_USAGE)
    assert main(["run", str(folder), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    plan = str(tmp_path / "out" / "plan.json")
    body = json.loads((tmp_path / "out" / "plan.json").read_text())
    used = {b["project"]: b["used"] for b in body["budgets"]}
    assert used["p2"] == pytest.approx(4272.0) and used["p1"] == pytest.approx(384.0)
    assert main(["explain", "p2", "--scenario", str(folder), "--plan", plan]) == 0
    out = capsys.readouterr().out
    assert OVERDRAWN_WORDS in out.splitlines()
    assert main(["explain", "p2", "--scenario", str(folder), "--plan", plan, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["subject"]["overdrawn"] is True
    assert main(["explain", "p1", "--scenario", str(folder), "--plan", plan]) == 0
    assert "overdrawn" not in capsys.readouterr().out


# Under Slurm the hog ran under gp-opportunistic: planner ingest sacct writes it to
# unbudgeted.csv, not usage.csv, so p2's used is j2's 48 NGH alone. Rule 8 counts what it
# ran: 48 + 4,224 = 4,272 ≥ 4,043.5, overdrawn as above; p1 (384) still is not.
def test_explain_counts_what_ran_on_no_budget_under_slurm(tmp_path, capsys):
    folder = unbudgeted_scenario(tmp_path / "sc")
    assert main(["run", str(folder), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    plan = str(tmp_path / "out" / "plan.json")
    used = {b["project"]: b["used"]
            for b in json.loads((tmp_path / "out" / "plan.json").read_text())["budgets"]}
    assert used["p2"] == pytest.approx(48.0)
    assert main(["explain", "p2", "--scenario", str(folder), "--plan", plan, "--json"]) == 0
    p2 = json.loads(capsys.readouterr().out)["subject"]
    assert p2["overdrawn"] is True
    assert p2["used"] == pytest.approx(48.0) and p2["unbudgeted"] == pytest.approx(4224.0)
    assert main(["explain", "p1", "--scenario", str(folder), "--plan", plan, "--json"]) == 0
    p1 = json.loads(capsys.readouterr().out)["subject"]
    assert p1["overdrawn"] is False and p1["unbudgeted"] == 0.0
    # the text says the 4,224 beside used, and only for the project that ran any
    assert main(["explain", "p2", "--scenario", str(folder), "--plan", plan]) == 0
    budget = capsys.readouterr().out.splitlines()[1]
    assert budget.startswith("budget 3,000.0 NGH; used 48.0 and 4,224.0 NGH run on no budget "
                             "(even pace by now "), budget
    assert main(["explain", "p1", "--scenario", str(folder), "--plan", plan]) == 0
    assert "no budget" not in capsys.readouterr().out
    # a broken unbudgeted.csv is refused by file, row and column, as usage.csv would be
    (folder / "unbudgeted.csv").write_text(OVERDRAWN_USAGE.splitlines(keepends=True)[0]
                                           + "hog,p2,h100-a,many,2026-10-20,2026-10-31\n")
    assert main(["explain", "p2", "--scenario", str(folder), "--plan", plan]) == 2
    err = capsys.readouterr().err
    assert "unbudgeted.csv" in err and "gpus" in err


def test_explain_reads_the_scenario_folder_once_with_its_unbudgeted_csv(tmp_path, capsys,
                                                                        monkeypatch):
    # the scenario and unbudgeted.csv (checked against the scenario's other tables) come
    # from one read of the folder, not a second read for the file; the figures as above
    folder = unbudgeted_scenario(tmp_path / "sc")
    assert main(["run", str(folder), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    capsys.readouterr()
    reads = counted_reads(monkeypatch)
    assert main(["explain", "p2", "--scenario", str(folder), "--plan",
                 str(tmp_path / "out" / "plan.json"), "--json"]) == 0
    assert reads == [folder]
    p2 = json.loads(capsys.readouterr().out)["subject"]
    assert p2["unbudgeted"] == pytest.approx(4224.0) and p2["overdrawn"] is True


def test_explain_json_is_schema_stable(planned, capsys):
    folder, plan = planned
    assert main(["explain", "p1", "--scenario", str(folder), "--plan", str(plan),
                 "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert set(body) == {"scenario", "as_of", "period_start", "period_end", "model",
                         "lookback", "kind", "subject"}
    assert body["kind"] == "project"
    assert set(body["subject"]) == {
        "project", "path", "weight", "budget", "used", "planned", "planned_reserved",
        "planned_opportunistic", "forecast", "pace", "budget_left", "marginal_value", "usage",
        "bindings", "unplaced", "overdrawn", "unbudgeted", "headline"}
    for b in body["subject"]["bindings"]:
        assert b["kind"] in KINDS
        assert set(b) == {"cluster", "kind", "detail", "demand", "target", "guaranteed",
                          "opportunistic", "cluster_capacity", "cluster_reserved",
                          "cluster_granted", "levels"}
        for level in b["levels"]:
            assert set(level) == {"parent", "capacity", "lam", "siblings"}
    assert main(["explain", "research", "--scenario", str(folder), "--plan", str(plan),
                 "--json"]) == 0
    team = json.loads(capsys.readouterr().out)
    assert team["kind"] == "team"
    assert set(team["subject"]) == {"node", "path", "weight", "budget", "used", "planned",
                                    "planned_opportunistic", "forecast", "pace", "children",
                                    "levels"}


def test_status_json_matches_the_plan(planned, capsys):
    folder, plan = planned
    assert main(["status", str(folder), "--plan", str(plan), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert set(body) == {"scenario", "as_of", "period_start", "period_end", "rows", "rates"}
    budgets = {b["project"]: b for b in json.loads(plan.read_text())["budgets"]}
    assert [r["project"] for r in body["rows"]] == list(budgets)
    for row in body["rows"]:
        assert set(row) == {"project", "path", "granted_gpus", "entitled_gpus",
                            "opportunistic_gpus", "running_gpus", "headroom_gpus", "budget",
                            "used", "planned", "planned_opportunistic", "forecast",
                            "forecast_share", "flags"}
        assert row["budget"] == budgets[row["project"]]["budget"]
        assert row["forecast"] == pytest.approx(budgets[row["project"]]["used"]
                                                + budgets[row["project"]]["planned"])


def test_unknown_id_exits_2_with_the_closest_ids(planned, capsys):
    folder, plan = planned
    assert main(["explain", "visoin", "--scenario", str(folder), "--plan", str(plan)]) == 2
    err = capsys.readouterr().err
    assert "no project or team 'visoin'" in err and "'vision'" in err
    assert "org.csv" in err


def test_unknown_id_in_a_workbook_scenario_names_its_org_sheet(planned, tmp_path, capsys):
    from tests.scenario_factory import write_workbook

    folder, plan = planned
    book = write_workbook(tmp_path / "q4.xlsx", folder)
    assert main(["explain", "visoin", "--scenario", str(book), "--plan", str(plan)]) == 2
    err = capsys.readouterr().err
    assert "q4.xlsx[org]" in err and "org.csv" not in err and "'vision'" in err


def test_a_plan_from_other_inputs_is_refused(planned, tmp_path, capsys):
    folder, plan = planned
    other = write_scenario(tmp_path / "other", budgets="project,gpu_hours,clusters\np1,1,\n")
    for argv in (["explain", "p1", "--scenario", str(other), "--plan", str(plan)],
                 ["status", str(other), "--plan", str(plan)]):
        assert main(argv) == 2
        assert "column input_digest" in capsys.readouterr().err


def test_status_is_plain_when_piped_and_coloured_on_a_terminal(planned, monkeypatch, capsys):
    folder, plan = planned
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    piped = subprocess.run([sys.executable, "-m", "planner.cli", "status", str(folder),
                            "--plan", str(plan)], capture_output=True, text=True, env=env,
                           check=True)
    assert "\x1b[" not in piped.stdout
    assert "p1" in piped.stdout and "headroom" in piped.stdout
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert main(["status", str(folder), "--plan", str(plan)]) == 0
    coloured = capsys.readouterr().out
    assert "\x1b[" in coloured


# --------------------------------------------------------------------------- invariants

PROPERTY_MODELS = {name: load_model(name) for name in ("default", "strict-budgets")}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sc=scenarios(), model=st.sampled_from(sorted(PROPERTY_MODELS)))
def test_explanations_replay_the_planners_own_targets(sc, model):
    # On random plans: the replayed targets are the solver's; every level's λ gives its
    # grants back by the contract's rule; the path ends at the project's target (before
    # the budget scaling (4) of the targets, which only lowers it); every binding is named.
    run = plan_scenario(sc, PROPERTY_MODELS[model])
    ctx = build_context(run.plan.body, sc, PROPERTY_MODELS[model])
    assert np.allclose(ctx.targets, run.solution.targets, atol=1e-9)
    for p, project in enumerate(ctx.problem.projects):
        why = explain(ctx, project).subject
        for b in why.bindings:
            assert b.kind in KINDS[:-1], b.detail
            k = ctx.problem.clusters.index(b.cluster)
            for level in b.levels:
                if level.lam is None:
                    continue
                d, w, u, x = (np.array([getattr(s, f) for s in level.siblings])
                              for f in ("demand", "weight", "usage", "grant"))
                assert np.minimum(d, np.maximum(0.0, level.lam * w - u)) == pytest.approx(
                    x, abs=1e-4)
            last = next(s for s in b.levels[-1].siblings if s.on_path)
            assert last.grant >= ctx.targets[p, k, 0] * ctx.problem.rate[k] - 1e-4


# --------------------------------------------------------------------------- reports

FORMULA, SCRIPT = '=HYPERLINK("http://x","y")', "<script>alert(1)</script>"


def hostile_budget_scenario():
    # budget_scenario with hostile ids: FORMULA is p1 (budget binds), SCRIPT is p2.
    return scenario(clusters=[("c1", "H100", 1, 10)],
                    org=[(FORMULA, "", 1.0), (SCRIPT, "", 1.0)],
                    budgets=[(FORMULA, 72.0), (SCRIPT, 1000.0)],
                    demand=[(FORMULA, "c1", "2026-11-02", "2026-11-03", 10),
                            (SCRIPT, "c1", "2026-11-02", "2026-11-03", 5)])


def test_workbook_why_sheet_rows_and_inert_ids(tmp_path):
    import openpyxl

    from planner.reports.workbook import WHY, WHY_COLUMNS, write_workbook

    sc = hostile_budget_scenario()
    plan = plan_scenario(sc, MODEL).plan.body
    ws = openpyxl.load_workbook(write_workbook(plan, sc, tmp_path / "r.xlsx"))[WHY]
    assert [c.value for c in ws[1]] == list(WHY_COLUMNS)
    rows = {r[0].value: r for r in ws.iter_rows(min_row=2, max_row=3)}
    p1, p2 = rows[FORMULA], rows[SCRIPT]
    assert p1[0].data_type == "s"
    # p1: 72 guaranteed + 48 opportunistic of 240 asked, target 72: 120 GPU-hours (rate 1)
    # wait, all beyond its budget (it was called "not contended" once)
    assert [c.value for c in p1[1:7]] == ["c1", "budget", 240.0, 72.0, 120.0, 48.0]
    assert p1[7].value == "demand waits beyond budget"
    assert p1[10].value == plan["budgets"][0]["marginal_value"]
    assert [c.value for c in p2[1:7]] == ["c1", "demand", 120.0, 120.0, 120.0, 0.0]


def test_html_why_sections_are_collapsible_and_escaped():
    from planner.reports.html import render_html

    sc = hostile_budget_scenario()
    html = render_html(plan_scenario(sc, MODEL).plan.body, sc)
    assert html.count('<details class="why">') == 2
    assert "<script" not in html
    assert "<summary>&lt;script&gt;alert(1)&lt;/script&gt;: demand (c1)</summary>" in html
    assert "budget binds" in html


def test_period_option_and_its_bad_values(planned, capsys):
    folder, plan = planned
    base = ["explain", "p1", "--scenario", str(folder), "--plan", str(plan), "--json"]
    assert main([*base, "--period", "2026-11-03T05:00:00"]) == 0
    first = capsys.readouterr().out
    assert json.loads(first)["period_start"] == "2026-11-03T00:00:00Z"
    assert main([*base, "--period", "2026-11-03T05:00:00"]) == 0
    assert capsys.readouterr().out == first  # same inputs, same bytes
    for bad in ("yesterday", "2026-10-01"):
        assert main([*base, "--period", bad]) == 2
        assert "--period" in capsys.readouterr().err


def test_reports_of_a_plan_from_an_unknown_model_say_how_to_explain_it(tmp_path):
    import openpyxl

    from planner.reports.html import render_html
    from planner.reports.workbook import WHY, write_workbook

    sc = hostile_budget_scenario()
    plan = {**plan_scenario(sc, MODEL).plan.body, "model": "my-own"}  # a model file's name
    ws = openpyxl.load_workbook(write_workbook(plan, sc, tmp_path / "r.xlsx"))[WHY]
    assert "--model FILE.toml" in ws["A2"].value
    html = render_html(plan, sc)
    assert "<details" not in html and "--model FILE.toml" in html
    assert "<details" in render_html(plan, sc, MODEL)
