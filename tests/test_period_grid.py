"""The mixed period grid (``solver.period_grid``): fine periods near ``as_of``, coarser later."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.check import check_plan
from planner.config import load_model, parse_period_grid, with_limits
from planner.errors import InputError
from planner.inputs.load import load_scenario
from planner.model.backends import solve_matrix
from planner.model.elastic import (
    build_elastic_model,
    cluster_groups,
    elastic_triples,
    split_triples,
)
from planner.model.problem import build_problem, period_grid
from planner.model.solve import elastic_inputs
from planner.plan.write import plan_bytes
from planner.run import plan_scenario
from planner.summary import describe_periods
from tests import reference_check
from tests.tiny import scenario, ts

MODEL = load_model("default")
BIG = 1e6
SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample"


def gridded(grid: str, model=MODEL):
    """``model`` with ``solver.period_grid = grid``."""
    return replace(model, solver=replace(model.solver, period_grid=grid))


def hourly_sample(tmp_path: Path) -> Path:
    """The bundled sample with ``period_hours = 1``."""
    folder = tmp_path / "sample-hourly"
    shutil.copytree(SAMPLE, folder)
    toml = folder / "scenario.toml"
    toml.write_text(toml.read_text().replace("period_hours = 24", "period_hours = 1"))
    return folder


@pytest.mark.parametrize(("text", "tiers"), [
    ("", ()),
    ("24h", ((24.0, None),)),
    ("1h*48, 24h*13, 168h", ((1.0, 48), (24.0, 13), (168.0, None))),
    ("1h*2,22h*1", ((1.0, 2), (22.0, 1))),
    (" 0.5h * 4 , 6h ", ((0.5, 4), (6.0, None))),
])
def test_period_grid_text_reads_as_tiers(text, tiers):
    assert parse_period_grid(text) == tiers


@pytest.mark.parametrize(("text", "says"), [
    ("1h, 24h", "only the last tier"),
    ("1 hour*3", "is not HOURSh*COUNT"),
    ("0h*3", "hours must be > 0"),
    ("1h*0", "count must be ≥ 1"),
    ("9999h", "hours must be > 0 and ≤"),
    (",".join(["1h*1"] * 17), "at most 16 tiers"),
])
def test_a_bad_period_grid_in_a_model_file_is_an_input_error(tmp_path, text, says):
    model = tmp_path / "m.toml"
    model.write_text(f'name = "m"\n[solver]\nperiod_grid = "{text}"\n')
    with pytest.raises(InputError) as err:
        load_model(model)
    (problem,) = err.value.problems
    assert (problem.file, problem.column) == ("m.toml", "period_grid")
    assert says in problem.message


def test_a_tier_that_is_not_a_multiple_of_period_hours_is_refused_before_solving():
    sc = scenario(org=[("p", "", 1.0)], period_hours=2.0)
    with pytest.raises(InputError) as err:
        build_problem(sc, gridded("2h*3, 3h"))
    (problem,) = err.value.problems
    assert problem.column == "period_grid"
    assert "3h is not a whole multiple of the scenario's period_hours (2 h)" in problem.message


@settings(max_examples=80, deadline=None)
@given(tiers=st.lists(st.tuples(st.integers(1, 30), st.integers(1, 20)), min_size=1,
                      max_size=4),
       last=st.one_of(st.none(), st.integers(1, 200)),
       as_of_minutes=st.integers(0, 48 * 60))
def test_a_mixed_grid_tiles_the_horizon_tier_by_tier(tiers, last, as_of_minutes):
    as_of = ts("2026-11-20") + pd.Timedelta(minutes=as_of_minutes)
    sc = scenario(org=[("p", "", 1.0)], as_of=as_of.isoformat(), quarter_end="2026-12-01",
                  period_hours=1.0)
    text = ", ".join([f"{h}h*{n}" for h, n in tiers] + ([f"{last}h"] if last else []))
    starts, ends = period_grid(sc, text)
    assert starts[0] == as_of and ends[-1] == sc.config.quarter_end
    assert all(e == s for e, s in zip(ends[:-1], starts[1:], strict=True))  # contiguous
    hours = [(e - s) / pd.Timedelta(hours=1) for s, e in zip(starts, ends, strict=True)]
    assert min(hours) >= 1.0  # never a period under an hour
    wanted = [h for h, n in tiers for _ in range(n)]
    # each period is its tier's length, except the last one, cut or stretched at quarter end
    for i, got in enumerate(hours[:-1]):
        assert got == (wanted[i] if i < len(wanted) else (last or tiers[-1][0]))


# One cluster c1 of 2 nodes × 5 GPUs; a and b top-level, weight 1 each, budgets that do not
# bind; lookback 7 days (168 hourly lookback periods: every earlier period counts whole).
# Grid: period_hours = 1, tiers "1h*2, 22h": t0 = 00-01 h, t1 = 01-02 h, t2 = 02-24 h.
# Capacity: 10, 10 and 220 GPU-hours.
# Demand: a wants 8 GPUs all day (8, 8, 176 GPU-hours); b 6 GPUs for the first 2 hours
# (6, 6, 0) and 2 GPUs after (0, 0, 44). r1: b wants 1 node (5 GPUs) for 2 hours in the day.
TINY = dict(
    clusters=[("c1", "H100", 2, 5)], org=[("a", "", 1.0), ("b", "", 1.0)],
    budgets=[("a", BIG), ("b", BIG)], as_of="2026-11-02", quarter_end="2026-11-03",
    period_hours=1.0,
    demand=[("a", "c1", "2026-11-02T00:00:00", "2026-11-03T00:00:00", 8),
            ("b", "c1", "2026-11-02T00:00:00", "2026-11-02T02:00:00", 6),
            ("b", "c1", "2026-11-02T02:00:00", "2026-11-03T00:00:00", 2)],
    reservations=[("r1", "b", "c1", 1, 2, "2026-11-02", "2026-11-03")])


def test_hand_worked_mixed_grid_two_hours_then_twenty_two():
    # r1's 2 hours fill whole periods only from t0 (t0 + t1 = 2 h; from t1 they would be
    # 1 + 22 h, from t2 22 h), so it starts at 00:00 and ends at 02:00, holding 5 GPU-hours
    # of c1 in t0 and in t1 and 10 NGH of b's usage (the runner-up on a daily grid: one
    # period of 24 h, r1 rounded up to 24 h holds 120 GPU-hours).
    # Fair share, period by period (targets count as usage for the lookback, as does r1):
    #   t0: 5 GPU-hours left, U_a = U_b = 0: a = min(8, λ), b = min(6, λ), λ = 2.5 → 2.5, 2.5
    #   t1: U_a = 2.5, U_b = 2.5 + 5 (r1 in t0) = 7.5: a = min(8, λ − 2.5),
    #       b = min(6, max(0, λ − 7.5)); a + b = 5 → λ = 7.5, a = 5, b = 0
    #       (runner-up without the lookback: 2.5 and 2.5 again)
    #   t2: 220 GPU-hours, demand 176 + 44 = 220: a = 176, b = 44 (8 and 2 GPUs)
    # The targets fill every period exactly, so the LP grants them (any other split leaves a
    # shortfall for no more GPU-hours): all guaranteed, none opportunistic.
    sc = scenario(**TINY)
    run = plan_scenario(sc, gridded("1h*2, 22h"))
    body = run.plan.body
    assert [(p["start"], p["end"]) for p in body["periods"]] == [
        ("2026-11-02T00:00:00Z", "2026-11-02T01:00:00Z"),
        ("2026-11-02T01:00:00Z", "2026-11-02T02:00:00Z"),
        ("2026-11-02T02:00:00Z", "2026-11-03T00:00:00Z")]
    assert [(r["request_id"], r["start"], r["end"], r["nodes"]) for r in body["reservations"]] \
        == [("r1", "2026-11-02T00:00:00Z", "2026-11-02T02:00:00Z", 1)]
    got = {(a["project"], a["period_start"][11:16], a["kind"], a["gpus"]): a["gpu_hours"]
           for a in body["allocations"]}
    assert got == pytest.approx({
        ("a", "00:00", "guaranteed", 2.5): 2.5, ("b", "00:00", "guaranteed", 2.5): 2.5,
        ("a", "01:00", "guaranteed", 5.0): 5.0,
        ("a", "02:00", "guaranteed", 8.0): 176.0, ("b", "02:00", "guaranteed", 2.0): 44.0})
    planned = {b["project"]: b["planned"] for b in body["budgets"]}
    assert planned == pytest.approx({"a": 183.5, "b": 56.5})  # b: 2.5 + 44 + r1's 10
    assert check_plan(body, sc) == []
    assert reference_check.check_plan(body, sc) == []
    assert describe_periods(body) == "3 periods (2 of 1 h, 1 of 22 h)"


def test_on_a_coarse_tier_a_reservation_is_placed_only_where_its_hours_fill_periods():
    # Tiers 1 h × 2 then 22 h: r2's 3 hours cover whole periods from no start (1 + 1 + 22,
    # 1 + 22, 22), so it is unplaced with the reason; on the hourly grid it is placed.
    sc = scenario(**{**TINY, "reservations": [("r2", "b", "c1", 1, 3, "2026-11-02",
                                                "2026-11-03")]})
    body = plan_scenario(sc, gridded("1h*2, 22h")).plan.body
    assert body["reservations"] == []
    (unplaced,) = body["unplaced"]
    assert unplaced["request_id"] == "r2"
    assert "its 3 h fill whole periods of the grid" in unplaced["reason"]
    hourly = plan_scenario(sc, MODEL).plan.body
    assert [r["request_id"] for r in hourly["reservations"]] == ["r2"]


def test_the_uniform_grid_spelled_as_one_tier_gives_the_same_bytes():
    # "24h" on the daily sample goes through the mixed grid's code (exact-cover starts,
    # lookback ages from the period starts) and must agree with the uniform grid to the
    # byte, but for the words of an unplaced request's reason (the mixed grid's wording).
    sc = load_scenario(SAMPLE)
    mixed, uniform = (plan_scenario(sc, model).plan for model in (gridded("24h"), MODEL))
    assert [u["request_id"] for u in mixed.body["unplaced"]] == \
        [u["request_id"] for u in uniform.body["unplaced"]]
    for plan in (mixed, uniform):
        for u in plan.body["unplaced"]:
            u["reason"] = ""
    assert plan_bytes(mixed) == plan_bytes(uniform)


def test_a_plan_on_a_mixed_grid_passes_the_checker_and_the_reference(tmp_path):
    sc = load_scenario(hourly_sample(tmp_path))
    run = plan_scenario(sc, gridded("1h*48, 24h*13, 168h"))  # raises if the checker objects
    body = run.plan.body
    hours = [(pd.Timestamp(p["end"]) - pd.Timestamp(p["start"])) / pd.Timedelta(hours=1)
             for p in body["periods"]]
    assert hours[:48] == [1.0] * 48 and hours[48:61] == [24.0] * 13
    assert set(hours[61:-1]) == {168.0}
    assert body["period_hours"] == 1
    assert body["reservations"]  # some fit whole periods
    assert check_plan(body, sc) == []
    assert reference_check.check_plan(body, sc) == []
    # capacity is GPUs × each period's own hours
    problem = run.problem
    assert np.allclose(problem.cap, problem.cap[:, :1] / problem.hours[0] * problem.hours)
    assert describe_periods(body) == "66 periods (48 of 1 h, 13 of 24 h, 4 of 168 h, 1 of 72 h)"


@pytest.mark.slow
def test_the_sample_by_the_hour_plans_on_the_uniform_grid(tmp_path):
    # The uniform hourly grid at 1x is planned, not refused: 1,104 hourly periods from
    # as_of (46 days x 24). Its elastic LP is solved to its end (work limits), so the test
    # does not hang on the machine's load; benchmarks/scale.py measures it under the
    # default time limit (case x1-hourly), and an LP that runs out of time names the
    # mixed grid (tests/test_work_limits.py).
    sc = load_scenario(hourly_sample(tmp_path))
    run = plan_scenario(sc, with_limits(MODEL, "work"))
    body = run.plan.body
    assert len(body["periods"]) == 1104 and body["period_hours"] == 1
    assert body["solver"]["status"] == "optimal"
    assert body["allocations"] and body["reservations"]
    assert check_plan(body, sc) == []


# Two groups of clusters: a and b share c1 and c2; z alone uses c3. The grid is the uniform one.
GROUPS = dict(
    clusters=[("c1", "H100", 1, 8), ("c2", "A100", 1, 8), ("c3", "H100", 1, 4)],
    org=[("A", "", 2.0), ("a", "A", 1.0), ("b", "A", 1.0), ("z", "", 1.0)],
    budgets=[("a", 300.0), ("b", BIG), ("z", 50.0)], as_of="2026-11-01",
    quarter_end="2026-11-04",
    demand=[("a", "c1", "2026-11-01", "2026-11-04", 8), ("a", "c2", "2026-11-01", "2026-11-04", 4),
            ("b", "c2", "2026-11-01", "2026-11-04", 8), ("z", "c3", "2026-11-01", "2026-11-04", 4)])


def test_clusters_linked_by_a_project_are_one_group_and_the_lp_splits_by_group():
    # c1 and c2 are linked by a (and b); c3 only by z: groups {c1, c2} and {c3}.
    sc = scenario(**GROUPS)
    problem = build_problem(sc, MODEL)
    e = elastic_triples(problem)
    assert cluster_groups(problem, e).tolist() == [0, 0, 1]
    parts = split_triples(problem, e)
    assert [sorted(set(part[1].tolist())) for part in parts] == [[0, 1], [2]]
    assert sum(len(part[0]) for part in parts) == len(e[0])


def test_one_lp_a_group_reaches_the_joint_lps_optimum():
    # The joint LP (one model over all triples, as --write-model writes it) and the sum of
    # the groups' LPs have the same optimum; the plan from the groups passes the checkers.
    sc = scenario(**GROUPS)
    run = plan_scenario(sc, MODEL)
    stage = run.solution.stages[1]
    problem = run.problem
    available, headroom, targets = elastic_inputs(problem, run.solution.reservation_start)
    joint = solve_matrix(build_elastic_model(problem, available, headroom, targets)
                         .lp.matrix(maximize=True))
    assert stage.objective == pytest.approx(joint.objective, rel=1e-9)
    assert stage.bound == pytest.approx(joint.bound, rel=1e-9)
    assert stage.gap == pytest.approx(abs(stage.objective - stage.bound) / abs(stage.objective))
    assert check_plan(run.plan.body, sc) == []
    assert reference_check.check_plan(run.plan.body, sc) == []
    # z (budget 50 NGH on its own cluster) gets 50 guaranteed GPU-hours, the rest of c3's
    # 288 (4 GPUs × 72 h) opportunistic: nobody else may use c3
    z = {a["kind"]: 0.0 for a in run.plan.allocations if a["project"] == "z"}
    for a in run.plan.allocations:
        if a["project"] == "z":
            z[a["kind"]] += a["gpu_hours"]
    assert z == pytest.approx({"guaranteed": 50.0, "opportunistic": 238.0})


def test_a_replan_on_a_mixed_grid_keeps_only_periods_that_are_the_same_here():
    # Planned at 00:00 on "1h*2, 24h": 00-01, 01-02, then days from 02:00. Replanned at
    # 01:00: 01-02 is the same period (kept: frozen, churn); 02-03 is an hour here but
    # the first of the previous day-long periods there, whose grant is not an hour's.
    base = {**TINY, "quarter_end": "2026-11-04", "reservations": [],
            "demand": [("a", "c1", "2026-11-02", "2026-11-04", 8),
                       ("b", "c1", "2026-11-02", "2026-11-04", 6)]}
    model = gridded("1h*2, 24h")
    first = plan_scenario(scenario(**base), model).plan.body
    sc = scenario(**{**base, "as_of": "2026-11-02T01:00:00"})
    problem = build_problem(sc, model, first)
    assert problem.previous.covered.tolist() == [True] + [False] * (len(problem.hours) - 1)
    assert np.asarray(problem.previous.guaranteed)[:, :, 1:].sum() == 0.0
    kept = {a["project"]: a["gpu_hours"] for a in first["allocations"]
            if a["period_start"] == "2026-11-02T01:00:00Z"}
    assert np.asarray(problem.previous.guaranteed)[:, 0, 0].tolist() == [kept.get("a", 0.0),
                                                             kept.get("b", 0.0)]
    replan = plan_scenario(sc, model, first).plan.body
    assert check_plan(replan, sc, first) == []
    assert reference_check.check_plan(replan, sc, first) == []
