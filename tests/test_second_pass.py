"""The reservation stage's second pass: the time the elastic LP leaves, for the open parts.

Worked on the coupled case of ``tests/test_reservations.py`` (optimum 2,304 GPU-hours:
r2, r3, r4 on day one). A first pass left "open" is made by hand: part 0 ({c1, c2}:
r1, r2, r4, optimum r2 + r4 = 1,536) is given the poorer placement r4 alone (768) and a
bound above its optimum (1,600), as a first pass stopped by its limit would leave it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from planner.check import check_plan
from planner.model import reservations, solve
from planner.model.problem import build_problem
from planner.model.reservations import (
    SCALE,
    STAGE,
    build_reservation_model,
    improve_reservation_model,
    solve_reservation_model,
)
from planner.model.result import SolverStatus, StageResult
from planner.run import plan_scenario
from tests.test_reservations import MODEL, THREADS, coupled_scenario

OPEN = StageResult(STAGE, SolverStatus.FEASIBLE, 768.0 * SCALE, 1600.0 * SCALE,
                   (1600.0 - 768.0) / 768.0, 1.0)


def left_open(built) -> None:
    """Part 0 as a first pass stopped early would leave it: r4 alone, bound 1,600."""
    built.placements[0] = {"r4": 0}
    built.outcomes[0] = OPEN


def first_pass(sc):
    """The coupled case's reservation stage, solved, then part 0 left open by hand."""
    problem = build_problem(sc, MODEL)
    built = build_reservation_model(problem, solve.budget_headroom(problem))
    solve_reservation_model(built, 10.0, 0.0, THREADS, 0, workers=1)
    closed = built.outcomes[1]
    left_open(built)
    return built, closed


def test_the_second_pass_closes_the_open_part_and_leaves_the_closed_one():
    built, closed = first_pass(coupled_scenario())
    placed, stage = improve_reservation_model(built, 10.0, 0.0, THREADS, 0)
    # part 0 polished from r4 alone (768) to its optimum r2 + r4 (1,536); its bound the
    # lower of the first pass's (1,600) and the LP relaxation's (the polish solves no
    # branch and cut): r2 + r4 + 1/12 of r1 (the 32 NGH p has left after r2's 768),
    # 1,568; part 1 (r3, closed) is not solved again
    assert built.placements[0] == {"r2": 0, "r4": 0}
    assert built.outcomes[0].objective == pytest.approx(1536.0 * SCALE)
    assert built.outcomes[0].bound == pytest.approx(1568.0 * SCALE, abs=5)
    assert built.outcomes[1] is closed
    assert placed == {"r2": 0, "r3": 0, "r4": 0}
    assert stage.objective == pytest.approx(2304.0)
    assert stage.bound == pytest.approx(2336.0, abs=0.05)
    assert stage.status is SolverStatus.FEASIBLE
    assert stage.gap == pytest.approx((stage.bound - 2304.0) / 2304.0)


def test_a_second_pass_that_does_worse_keeps_the_first_placement_and_the_lower_bound(
        monkeypatch):
    built, _ = first_pass(coupled_scenario())
    worse = StageResult(STAGE, SolverStatus.FEASIBLE, 0.0, 2000.0 * SCALE, 1.0, 0.5)
    monkeypatch.setattr(reservations, "solve_part", lambda *args: ({}, worse))
    placed, stage = improve_reservation_model(built, 10.0, 0.0, THREADS, 0)
    assert built.placements[0] == {"r4": 0}
    assert built.outcomes[0].objective == OPEN.objective
    assert built.outcomes[0].bound == OPEN.bound  # 1,600 < 2,000: the first's stands
    assert placed == {"r3": 0, "r4": 0}
    assert stage.objective == pytest.approx(768.0 + 768.0)
    assert stage.bound == pytest.approx(1600.0 + 768.0)
    assert stage.gap == pytest.approx(832.0 / 1536.0)


def open_first_pass(monkeypatch):
    """Make the planning run's first pass leave part 0 open (as :func:`left_open`)."""
    real = solve.solve_reservation_model

    def first(built, *args, **kwargs):
        real(built, *args, **kwargs)
        left_open(built)
        return reservations._stage_outcome(built, 0.1)

    monkeypatch.setattr(solve, "solve_reservation_model", first)


def test_the_planning_run_gives_the_lps_leftover_time_to_the_open_part(monkeypatch):
    sc = coupled_scenario()
    open_first_pass(monkeypatch)
    run = plan_scenario(sc, MODEL)
    stage = run.solution.stages[0]
    assert stage.objective == pytest.approx(2304.0)
    said = run.plan.body["solver"]["stages"][0]
    assert said["bound"] == pytest.approx(2336.0, abs=0.05)
    assert said["gap"] == pytest.approx((said["bound"] - 2304.0) / 2304.0, abs=1e-6)
    assert {r["request_id"] for r in run.plan.reservations} == {"r2", "r3", "r4"}
    assert check_plan(run.plan.body, sc) == []


def test_when_the_second_lp_does_not_finish_the_first_plan_stands_whole(monkeypatch):
    sc = coupled_scenario()
    open_first_pass(monkeypatch)
    real = solve._elastic
    calls = []

    def elastic(*args):
        calls.append(1)
        out = real(*args)
        if len(calls) == 2:  # the re-solve for the second pass's placement
            out.stage = StageResult("highs", SolverStatus.TIME_LIMIT, float("nan"),
                                    float("nan"), float("inf"), 1.0)
        return out

    monkeypatch.setattr(solve, "_elastic", elastic)
    run = plan_scenario(sc, MODEL)
    assert len(calls) == 2
    stage = run.solution.stages[0]
    # the first pass's placement (r3, r4) and outcome, with its own LP's grants
    assert {r["request_id"] for r in run.plan.reservations} == {"r3", "r4"}
    assert stage.objective == pytest.approx(1536.0) and stage.bound == pytest.approx(2368.0)
    assert run.plan.body["solver"]["stages"][1]["status"] == "optimal"
    assert check_plan(run.plan.body, sc) == []


def test_no_second_pass_when_the_first_closes_the_stage(monkeypatch):
    calls = []
    monkeypatch.setattr(solve, "improve_reservation_model",
                        lambda *args: calls.append(1))  # would fail the run if called
    run = plan_scenario(coupled_scenario(), MODEL)
    assert calls == [] and run.solution.stages[0].status is SolverStatus.OPTIMAL


def test_no_second_pass_when_the_lp_leaves_too_little_time(monkeypatch):
    calls = []
    open_first_pass(monkeypatch)
    monkeypatch.setattr(solve, "improve_reservation_model",
                        lambda *args: calls.append(1))
    # a reserve for the re-solve longer than the whole limit: nothing is left for it
    monkeypatch.setattr(solve, "SECOND_PASS_MARGIN", MODEL.solver.time_limit_seconds)
    run = plan_scenario(coupled_scenario(), MODEL)
    assert calls == []
    assert {r["request_id"] for r in run.plan.reservations} == {"r3", "r4"}



def test_write_model_gets_the_lp_of_the_plan_written(monkeypatch):
    # --write-model writes the last model handed on: with the second pass's plan, the
    # LP built for its placement, not the first pass's (r3, r4). q's demand fills c2
    # every day, so r2 there changes that LP's capacity rows.
    from tests.test_reservations import BIG, DAYS, ORG
    from tests.tiny import scenario

    sc = scenario(clusters=[("c1", "H100", 4, 8), ("c2", "H100", 4, 8), ("c3", "H100", 2, 8)],
                  org=ORG, budgets=[("p", 800.0), ("q", BIG)], quarter_end=DAYS[3],
                  demand=[("q", "c2", DAYS[0], DAYS[3], 32)],
                  reservations=[("r1", "p", "c1", 2, 24.0, DAYS[0], DAYS[3]),
                                ("r2", "p", "c2", 4, 24.0, DAYS[0], DAYS[3]),
                                ("r3", "q", "c3", 2, 48.0, DAYS[0], DAYS[3]),
                                ("r4", "q", "c1", 4, 24.0, DAYS[0], DAYS[3])])
    open_first_pass(monkeypatch)
    built = []
    run = plan_scenario(sc, MODEL, on_built=built.append)
    problem = build_problem(sc, MODEL)
    final = {r["request_id"]: problem.period_of(pd.Timestamp(r["start"]))
             for r in run.plan.reservations}
    assert set(final) != {"r3", "r4"} and len(built) == 2

    def rows(placed):
        model = solve.build_elastic_model(problem, *solve.elastic_inputs(problem, placed))
        return model.lp.matrix().row_upper

    assert "r2" in final
    assert np.array_equal(built[-1].lp.matrix().row_upper, rows(final))
    assert np.array_equal(built[0].lp.matrix().row_upper, rows({"r3": 0, "r4": 0}))
    assert not np.array_equal(rows(final), rows({"r3": 0, "r4": 0}))
