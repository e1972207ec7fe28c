"""Honest gaps: every stage's objective, bound and gap are what the solver reported."""

from __future__ import annotations

from dataclasses import replace

import highspy
import numpy as np
import pytest
from ortools.sat.python import cp_model

from planner.config import load_model
from planner.model.lp import LpBuilder, new_highs
from planner.model.problem import build_problem
from planner.model.reservations import (
    SCALE,
    build_reservation_model,
    solve_reservation_model,
)
from planner.model.result import (
    SolverStatus,
    highs_dual_objective,
    highs_outcome,
    relative_gap,
    status_from_gap,
)
from planner.model.solve import budget_headroom
from planner.run import plan_scenario
from tests.tiny import scenario

MODEL = load_model("default")
DAYS = [f"2026-11-{d:02d}" for d in range(2, 31)]


def crowded_scenario(requests: int = 150, seed: int = 7):
    """One 24-node cluster over 28 days and ``requests`` random gang requests: a packing
    CP-SAT does not close at once (its first solutions sit a few % under the bound)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(requests):
        first = int(rng.integers(0, 20))
        days = int(rng.integers(1, 4))
        last = min(28, first + days + int(rng.integers(0, 4)))
        rows.append((f"r{i:03d}", "p" if i % 2 else "q", "c1", int(rng.choice([1, 2, 3, 5, 7])),
                     24 * days, DAYS[first], DAYS[last]))
    return scenario(clusters=[("c1", "H100", 24, 8)], as_of="2026-11-02",
                    quarter_end="2026-11-30",
                    org=[("t", "", 1.0), ("p", "t", 1.0), ("q", "t", 1.0)],
                    budgets=[("p", 30000.0), ("q", 1e6)],
                    demand=[("p", "c1", "2026-11-02", "2026-11-30", 50)], reservations=rows)


@pytest.fixture
def cp_sat_solvers(monkeypatch):
    """Every CpSolver that solves, with the status code it returned."""
    seen = []
    solve = cp_model.CpSolver.solve

    def spy(self, model, *args, **kwargs):
        code = solve(self, model, *args, **kwargs)
        seen.append((self, code))
        return code

    monkeypatch.setattr(cp_model.CpSolver, "solve", spy)
    return seen


def test_cp_sat_stopped_at_its_gap_tolerance_is_feasible_with_the_gap_it_reports(cp_sat_solvers):
    # With relative_gap_limit 0.5, CP-SAT stopped by its 1 s limit with a placement within
    # 50 % of its bound calls it OPTIMAL; the stage must say "feasible", with
    # (bound − objective) ÷ objective from the solver (150 requests: a few % after 1 s).
    problem = build_problem(crowded_scenario(), MODEL)
    built = build_reservation_model(problem, budget_headroom(problem))
    placed, stage = solve_reservation_model(built, time_limit=1.0, mip_gap=0.5, threads=2,
                                            seed=0)
    solver, code = cp_sat_solvers[-1]  # the last run's placement; the tighter bound of any
    objective = solver.objective_value
    bound = min(s.best_objective_bound for s, _ in cp_sat_solvers)
    assert code == cp_model.OPTIMAL  # CP-SAT's word, under its tolerance
    assert bound > objective > 0
    assert stage.gap == pytest.approx((bound - objective) / objective, rel=1e-12)
    assert stage.gap > 1e-9
    assert (stage.objective, stage.bound) == pytest.approx((objective / SCALE, bound / SCALE))
    assert stage.status is SolverStatus.FEASIBLE
    assert placed


def test_the_plan_carries_the_gap_read_from_the_solver(cp_sat_solvers):
    # build, solve, inspect: plan.json's stage gap and mip_gap are the solver's numbers
    model = replace(MODEL, solver=replace(MODEL.solver, mip_gap=0.5, time_limit_seconds=2.0))
    run = plan_scenario(crowded_scenario(), model)
    objective = cp_sat_solvers[-1][0].objective_value
    bound = min(s.best_objective_bound for s, _ in cp_sat_solvers)
    written = run.plan.body["solver"]
    cp_sat, highs = written["stages"]
    assert cp_sat["name"] == "cp-sat" and cp_sat["status"] == "feasible"
    assert cp_sat["objective"] == pytest.approx(objective / SCALE, abs=1e-6)
    assert cp_sat["bound"] == pytest.approx(bound / SCALE, abs=1e-6)
    assert cp_sat["gap"] == pytest.approx((bound - objective) / objective, rel=1e-5)
    assert cp_sat["gap"] == pytest.approx((cp_sat["bound"] - cp_sat["objective"])
                                          / cp_sat["objective"], rel=1e-5)
    assert written["status"] == "feasible"
    assert written["mip_gap"] == max(cp_sat["gap"], highs["gap"]) > 0
    assert highs["status"] == "optimal" and highs["gap"] <= 1e-9


def test_cp_sat_optimal_under_tolerance_is_not_written_as_gap_zero(monkeypatch):
    # The case: CP-SAT returned OPTIMAL at its 0.5 % tolerance, true gap 0.20 %.
    monkeypatch.setattr(cp_model.CpSolver, "solve", lambda self, model: cp_model.OPTIMAL)
    monkeypatch.setattr(cp_model.CpSolver, "objective_value", property(lambda self: 100_000.0))
    monkeypatch.setattr(cp_model.CpSolver, "best_objective_bound",
                        property(lambda self: 100_200.0))
    monkeypatch.setattr(cp_model.CpSolver, "boolean_value", lambda self, var: False)
    problem = build_problem(crowded_scenario(requests=5), MODEL)
    _, stage = solve_reservation_model(build_reservation_model(problem, budget_headroom(problem)),
                                       1.0, 0.005, 1, 0)
    assert stage.status is SolverStatus.FEASIBLE
    assert stage.gap == pytest.approx(0.002)
    assert (stage.objective, stage.bound) == (1000.0, 1002.0)  # ÷ SCALE


@pytest.mark.parametrize(("objective", "bound", "floor", "gap", "status"), [
    (100.0, 100.0, 1e-9, 0.0, SolverStatus.OPTIMAL),
    (100.0, 100.2, 1e-9, 0.002, SolverStatus.FEASIBLE),
    (-50.0, -49.0, 1e-9, 0.02, SolverStatus.FEASIBLE),      # |−50 − (−49)| ÷ 50
    (1e9, 1e9 + 0.5, 1e-9, 5e-10, SolverStatus.OPTIMAL),     # within 1e-9 relative
    (0.0, 0.5, 1.0, 0.5, SolverStatus.FEASIBLE),             # CP-SAT's floor of 1 unit
])
def test_relative_gap_and_status_by_hand(objective, bound, floor, gap, status):
    assert relative_gap(objective, bound, floor) == pytest.approx(gap, abs=1e-15)
    assert status_from_gap(relative_gap(objective, bound, floor)) is status


def _knapsack(highs: highspy.Highs, integer: bool) -> None:
    # max 5a + 4b + 3c  s.t.  2a + 3b + c ≤ 5,  4a + b + 2c ≤ 11,  3a + 4b + 2c ≤ 8,  0 ≤ · ≤ 3
    lp = LpBuilder()
    cols = lp.add_columns("x", np.zeros(3), 3.0, np.array([5.0, 4.0, 3.0]), integer=integer)
    rows = np.repeat(np.arange(3), 3)
    lp.add_rows("cap", np.full(3, -highspy.kHighsInf), np.array([5.0, 11.0, 8.0]), rows,
                np.tile(cols, 3), np.array([2, 3, 1, 4, 1, 2, 3, 4, 2], dtype=float))
    highs.passModel(lp.to_highs(maximize=True))
    highs.run()


def test_highs_lp_bound_is_its_dual_objective():
    # Chvátal's example: LP optimum 13 at a = 2, b = 0, c = 1; duals (1, 0, 1) on the rows
    # give 5·1 + 8·1 = 13, so the bound equals the objective and the gap is 0.
    highs = new_highs(MODEL.solver.threads)  # one thread count a process (see new_highs)
    _knapsack(highs, integer=False)
    stage = highs_outcome(highs, "highs", 0.0)
    info = highs.getInfo()
    assert stage.objective == pytest.approx(info.objective_function_value) == pytest.approx(13.0)
    assert highs_dual_objective(highs) == pytest.approx(13.0)
    assert stage.bound == pytest.approx(13.0) and stage.gap <= 1e-9
    assert stage.status is SolverStatus.OPTIMAL
    assert info.mip_node_count < 0  # an LP: HiGHS keeps no MIP bound to read


def test_highs_mip_stopped_at_its_gap_tolerance_is_feasible_with_get_info_numbers():
    # 40 binary items, three knapsack rows (seeded): at mip_rel_gap 0.1 HiGHS stops at its
    # first incumbents and says kOptimal; the stage reads objective_function_value and
    # mip_dual_bound, computes the gap (= HiGHS's own mip_gap) and says "feasible".
    rng = np.random.default_rng(3)
    weight = rng.integers(20, 60, 40).astype(float)
    value = weight + rng.integers(0, 10, 40)
    lp = LpBuilder()
    cols = lp.add_columns("x", np.zeros(40), 1.0, value, integer=True)
    lp.add_rows("cap", np.full(3, -highspy.kHighsInf), weight.sum() / np.array([3.0, 2.0, 2.5]),
                np.repeat(np.arange(3), 40), np.tile(cols, 3),
                np.concatenate([weight, rng.permutation(weight), rng.permutation(weight)]))
    highs = new_highs(MODEL.solver.threads)  # one thread count a process (see new_highs)
    highs.setOptionValue("mip_rel_gap", 0.1)
    highs.passModel(lp.to_highs(maximize=True))
    highs.run()
    stage = highs_outcome(highs, "highs", 0.0)
    info = highs.getInfo()
    assert highs.getModelStatus() == highspy.HighsModelStatus.kOptimal  # HiGHS's word
    assert stage.objective == info.objective_function_value
    assert stage.bound == info.mip_dual_bound > stage.objective
    assert stage.gap == pytest.approx((info.mip_dual_bound - info.objective_function_value)
                                      / info.objective_function_value, rel=1e-12)
    assert stage.gap == pytest.approx(info.mip_gap, rel=1e-9) and stage.gap > 1e-3
    assert stage.status is SolverStatus.FEASIBLE


def test_the_warm_start_is_a_valid_placement_and_cp_sat_keeps_at_least_its_value():
    # The LP-rounded hint must obey (R1)–(R3) by itself: starts allowed, at most 24 nodes in
    # any period, p's reservations within its 30,000 NGH; CP-SAT returns a placement worth
    # at least as much, or one it already had within its tolerance unhinted.
    problem = build_problem(crowded_scenario(), MODEL)
    headroom = budget_headroom(problem)
    built = build_reservation_model(problem, headroom)
    requests = {r.request_id: r for r in built.requests}
    nodes = np.zeros(len(problem.hours))
    spent = np.zeros(len(problem.projects))
    for request_id, start in built.hint.items():
        r = requests[request_id]
        assert start in r.starts
        nodes[start:start + r.length] += r.nodes
        spent[r.project] += r.ngh
    assert nodes.max() <= 24
    assert (spent <= headroom + 1e-6).all()
    assert len(built.hint) > 20
    value = sum(int(v[r.starts.index(built.hint[r.request_id])])
                for r, v in zip(built.requests, built.values, strict=True)
                if r.request_id in built.hint)
    _, stage = solve_reservation_model(built, time_limit=1.0, mip_gap=0.005, threads=2, seed=0)
    assert stage.objective >= value / SCALE - 1e-6 or stage.gap <= 0.005
