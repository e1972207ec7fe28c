"""Hand-computed planning instances, structure of built models, and a broken plan caught."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from planner.check import check_plan
from planner.config import load_model
from planner.model.elastic import build_elastic_model
from planner.model.problem import build_problem
from planner.plan.write import plan_bytes
from planner.run import plan_scenario
from tests.tiny import scenario

MODEL = load_model("default")
BIG = 1e6


def grants(run, kind="guaranteed"):
    out = {}
    for a in run.plan.allocations:
        if a["kind"] == kind:
            out[(a["project"], a["period_start"][:10])] = out.get(
                (a["project"], a["period_start"][:10]), 0.0) + a["gpu_hours"]
    return out


# Org: area A (weight 2) with projects a1, a2 (weight 1 each); area B (weight 1) with b1.
ORG = [("A", "", 2.0), ("B", "", 1.0), ("a1", "A", 1.0), ("a2", "A", 1.0), ("b1", "B", 1.0)]
# One cluster of 100 GPUs, one 24 h period: C = 2400 GPU-hours.
ONE_BIG_NODE = [("c1", "H100", 1, 100)]
DEMAND = [("a1", "c1", "2026-11-02", "2026-11-03", 10),   # 240 GPU-hours
          ("a2", "c1", "2026-11-02", "2026-11-03", 80),   # 1920
          ("b1", "c1", "2026-11-02", "2026-11-03", 60)]   # 1440


def test_simple_case_is_the_hierarchical_water_filling():
    # Root: D_A = 2160, D_B = 1440, weights 2:1. A = min(2160, 2λ), B = min(1440, λ),
    # 3λ = 2400 → λ = 800: A = 1600, B = 800 (neither capped).
    # Inside A: a1 = min(240, μ), a2 = min(1920, μ), sum 1600 → a1 = 240 (capped), a2 = 1360.
    # Runner-up that must NOT come out: flat max-min over projects (a1 240, a2 = b1 = 1080).
    sc = scenario(clusters=ONE_BIG_NODE, org=ORG, demand=DEMAND,
                  budgets=[("a1", BIG), ("a2", BIG), ("b1", BIG)])
    run = plan_scenario(sc, MODEL)
    got = grants(run)
    assert got == pytest.approx({("a1", "2026-11-02"): 240.0, ("a2", "2026-11-02"): 1360.0,
                                 ("b1", "2026-11-02"): 800.0}, abs=1e-6)
    assert grants(run, "opportunistic") == {}
    assert run.plan.body["solver"]["status"] == "optimal"


def test_simple_case_with_lookback_offsets():
    # b1 ran 10 GPUs × 40 h = 400 NGH inside the 7-day window before as_of: U_B = 400.
    # Root: A = min(2160, 2λ), B = min(1440, max(0, λ − 400)); 3λ − 400 = 2400 → λ = 2800/3:
    # A = 5600/3 = 1866.67, B = 1600/3 = 533.33. Inside A: a1 = 240, a2 = 1626.67.
    usage = [("j1", "b1", "c1", 10, "2026-10-31T00:00:00", "2026-11-01T16:00:00")]
    sc = scenario(clusters=ONE_BIG_NODE, org=ORG, demand=DEMAND, usage=usage,
                  budgets=[("a1", BIG), ("a2", BIG), ("b1", BIG)])
    got = grants(plan_scenario(sc, MODEL))
    assert got[("a1", "2026-11-02")] == pytest.approx(240.0, abs=1e-6)
    assert got[("a2", "2026-11-02")] == pytest.approx(5600 / 3 - 240, abs=1e-6)
    assert got[("b1", "2026-11-02")] == pytest.approx(1600 / 3, abs=1e-6)


def test_usage_outside_the_window_does_not_count():
    # The same 400 NGH three weeks ago fall outside the 7-day window: plain water-filling.
    usage = [("j1", "b1", "c1", 10, "2026-10-08T00:00:00", "2026-10-09T16:00:00")]
    sc = scenario(clusters=ONE_BIG_NODE, org=ORG, demand=DEMAND, usage=usage,
                  budgets=[("a1", BIG), ("a2", BIG), ("b1", BIG)])
    assert grants(plan_scenario(sc, MODEL))[("b1", "2026-11-02")] == pytest.approx(800.0)


def test_budget_binds_then_opportunistic_fills():
    # One 10-GPU cluster, two 24 h periods (240 GPU-hours each), equal weights.
    # p1 budget 240 NGH, wants 10 GPUs throughout (480); p2 unbounded, wants 2 GPUs (96).
    # Targets: t0 capped demand p1 240, p2 48 > 240 → p2 48, p1 192; t1 p1 has 48 left:
    # p1 48, p2 48. Guaranteed total is max at 240 + 96; the pace line (120 at t0) costs
    # 0.25/NGH ahead vs 1/GPU-hour of shortfall, so p1 keeps 192 at t0 and 48 at t1.
    # Opportunistic fills t1: 240 − 48 − 48 = 144 for p1 (only p1 is beyond budget).
    sc = scenario(clusters=[("c1", "H100", 1, 10)], quarter_end="2026-11-04",
                  org=[("t", "", 1.0), ("p1", "t", 1.0), ("p2", "t", 1.0)],
                  budgets=[("p1", 240.0), ("p2", BIG)],
                  demand=[("p1", "c1", "2026-11-02", "2026-11-04", 10),
                          ("p2", "c1", "2026-11-02", "2026-11-04", 2)])
    run = plan_scenario(sc, MODEL)
    assert grants(run) == pytest.approx({("p1", "2026-11-02"): 192.0, ("p1", "2026-11-03"): 48.0,
                                         ("p2", "2026-11-02"): 48.0, ("p2", "2026-11-03"): 48.0})
    assert grants(run, "opportunistic") == pytest.approx({("p1", "2026-11-03"): 144.0})
    budgets = {b["project"]: b for b in run.plan.body["budgets"]}
    assert budgets["p1"]["planned"] == pytest.approx(240.0)
    assert budgets["p1"]["marginal_value"] > 0  # one more NGH of budget would buy something


def test_reservations_whole_nodes_in_window_and_reasons():
    # 4 nodes × 8 GPUs, periods 11-01, 11-02, 11-03. r2 (2 nodes, 1 period) can only start
    # 11-01; r1 (3 nodes, 2 periods) cannot overlap it (3 + 2 > 4) → r1 starts 11-02.
    # r3 wants 5 nodes of 4; r4's 36 h round up to 2 periods in a 1.5-day window.
    sc = scenario(
        clusters=[("c1", "H100", 4, 8)], as_of="2026-11-01", quarter_end="2026-11-04",
        org=[("t", "", 1.0), ("p", "t", 1.0)], budgets=[("p", BIG)],
        demand=[("p", "c1", "2026-11-01", "2026-11-04", 32)],
        reservations=[
            ("r1", "p", "c1", 3, 48, "2026-11-01", "2026-11-04"),
            ("r2", "p", "c1", 2, 24, "2026-11-01", "2026-11-02"),
            ("r3", "p", "c1", 5, 24, "2026-11-01", "2026-11-04"),
            ("r4", "p", "c1", 1, 36, "2026-11-01T00:00:00", "2026-11-02T12:00:00"),
        ])
    run = plan_scenario(sc, MODEL)
    placed = {r["request_id"]: (r["start"], r["end"], r["nodes"]) for r in run.plan.reservations}
    assert placed == {"r2": ("2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z", 2),
                      "r1": ("2026-11-02T00:00:00Z", "2026-11-04T00:00:00Z", 3)}
    reasons = {u["request_id"]: u["reason"] for u in run.plan.body["unplaced"]}
    assert reasons["r3"].startswith("needs 5 nodes, cluster c1 has 4")
    assert reasons["r4"].startswith("window too short for 2 periods")
    # the elastic project gets exactly what the reservations leave: 2, 1, 1 nodes
    assert grants(run) == pytest.approx({("p", "2026-11-01"): 384.0, ("p", "2026-11-02"): 192.0,
                                         ("p", "2026-11-03"): 192.0})


def test_reservation_refused_for_budget_gets_the_budget_reason():
    sc = scenario(clusters=[("c1", "H100", 4, 8)], as_of="2026-11-01", quarter_end="2026-11-04",
                  org=[("t", "", 1.0), ("p", "t", 1.0)], budgets=[("p", 100.0)],
                  reservations=[("r1", "p", "c1", 1, 24, "2026-11-01", "2026-11-04")])
    run = plan_scenario(sc, MODEL)
    assert run.plan.reservations == []
    assert run.plan.body["unplaced"][0]["reason"].startswith("budget: needs 192 NGH")


def test_gpu_rates_scale_budget_charges():
    # A100 at 0.5 NGH per GPU-hour: a 120 NGH budget buys 240 GPU-hours.
    sc = scenario(clusters=[("a", "A100", 1, 20)], gpu_rates={"A100": 0.5},
                  org=[("t", "", 1.0), ("p", "t", 1.0), ("q", "t", 1.0)],
                  budgets=[("p", 120.0), ("q", 0.0)],
                  demand=[("p", "a", "2026-11-02", "2026-11-03", 20)])
    run = plan_scenario(sc, MODEL)
    assert grants(run) == pytest.approx({("p", "2026-11-02"): 240.0})
    assert grants(run, "opportunistic") == pytest.approx({("p", "2026-11-02"): 240.0})


def test_built_model_has_one_named_row_block_per_rule():
    sc = scenario(clusters=ONE_BIG_NODE, org=ORG, demand=DEMAND,
                  budgets=[("a1", BIG), ("a2", BIG), ("b1", BIG)])
    problem = build_problem(sc, MODEL)
    targets = np.zeros(problem.shape)
    built = build_elastic_model(problem, problem.cap, problem.budget, targets)
    assert list(built.lp.rows) == ["capacity", "demand", "budget", "fair_share", "spend", "pace"]
    assert built.lp.rows["capacity"].stop - built.lp.rows["capacity"].start == 1
    assert built.lp.rows["demand"].stop - built.lp.rows["demand"].start == 3
    assert built.lp.rows["budget"].stop - built.lp.rows["budget"].start == 3
    assert built.lp.rows["fair_share"].stop == built.lp.rows["fair_share"].start  # τ = 0


def test_same_inputs_same_bytes():
    sc = scenario(clusters=ONE_BIG_NODE, org=ORG, demand=DEMAND,
                  budgets=[("a1", 500.0), ("a2", BIG), ("b1", BIG)])
    assert plan_bytes(plan_scenario(sc, MODEL).plan) == plan_bytes(plan_scenario(sc, MODEL).plan)


def test_checker_catches_a_deliberately_broken_plan():
    sc = scenario(
        clusters=[("c1", "H100", 4, 8)], as_of="2026-11-01", quarter_end="2026-11-04",
        org=[("t", "", 1.0), ("p", "t", 1.0), ("q", "t", 1.0)],
        budgets=[("p", 500.0), ("q", BIG)],
        demand=[("p", "c1", "2026-11-01", "2026-11-04", 32),
                ("q", "c1", "2026-11-01", "2026-11-04", 8)],
        reservations=[("r1", "q", "c1", 2, 24, "2026-11-02", "2026-11-04")])
    run = plan_scenario(sc, MODEL)
    assert check_plan(run.plan.body, sc) == []
    broken = copy.deepcopy(run.plan.body)
    first = broken["allocations"][0]
    first["gpu_hours"] += 10_000                      # rules 1 and 2
    broken["reservations"][0]["nodes"] = 3            # rule 3: not what was asked
    broken["reservations"][0]["start"] = "2026-11-01T00:00:00Z"  # rule 3: before the window
    broken["allocations"] = [a for a in broken["allocations"]
                             if not (a["project"] == "q" and a["period_start"].startswith(
                                 "2026-11-03"))]      # rule 5: idle GPUs while q waits
    broken["allocations"].append({"project": "p", "cluster": "c1", "gpu_hours": 500.0,
                                  "period_start": "2026-11-01T00:00:00Z",
                                  "kind": "guaranteed"})  # rule 4: p beyond budget
    rules = {v.rule for v in check_plan(broken, sc)}
    assert {1, 2, 3, 4, 5} <= rules
    previous = copy.deepcopy(run.plan.body)
    previous["reservations"][0]["start"] = "2026-10-31T00:00:00Z"
    previous["reservations"][0]["end"] = "2026-11-02T00:00:00Z"
    assert {v.rule for v in check_plan(run.plan.body, sc, previous)} == {6}


def test_formula_like_ids_survive_verbatim_into_the_plan():
    odd = "=HYPERLINK(\"x\")"
    sc = scenario(clusters=ONE_BIG_NODE, org=[("A", "", 1.0), (odd, "A", 1.0), ("+1", "A", 1.0)],
                  budgets=[(odd, BIG), ("+1", BIG)],
                  demand=[(odd, "c1", "2026-11-02", "2026-11-03", 30),
                          ("+1", "c1", "2026-11-02", "2026-11-03", 30)])
    run = plan_scenario(sc, MODEL)
    assert grants(run) == pytest.approx({(odd, "2026-11-02"): 720.0, ("+1", "2026-11-02"): 720.0})
    assert odd in plan_bytes(run.plan).decode().replace('\\"', '"')


def test_a_limit_hit_before_any_placement_still_gives_a_valid_plan(monkeypatch):
    # The reservation MIP stopped by its limit with no solution: placing nothing is valid,
    # the plan says "feasible" with the gap against the bound, and the LP still fills GPUs.
    # (The second pass, given the time the LP leaves, is kept off here: it would polish the
    # empty placement, as the next test shows.)
    from planner.model import reservations, solve
    from planner.model.result import SolverStatus, StageResult

    monkeypatch.setattr(reservations, "highs_outcome", lambda highs, name, seconds: StageResult(
        name, SolverStatus.TIME_LIMIT, float("nan"), float("nan"), float("inf"), seconds))
    monkeypatch.setattr(solve, "SECOND_PASS_MARGIN", 10 * MODEL.solver.time_limit_seconds)
    sc = limit_hit_scenario()
    run = plan_scenario(sc, MODEL)
    solver = run.plan.body["solver"]
    assert solver["status"] == "feasible" and solver["mip_gap"] == 1.0
    assert run.plan.reservations == []
    assert run.plan.body["unplaced"][0]["reason"].startswith("not placed before the reservation")
    assert sum(a["gpu_hours"] for a in run.plan.allocations) == pytest.approx(3 * 768.0)
    assert check_plan(run.plan.body, sc) == []


def limit_hit_scenario():
    """One 4-node cluster, three days, p's demand fills it; r1: 2 nodes for 24 h."""
    return scenario(clusters=[("c1", "H100", 4, 8)], as_of="2026-11-01",
                    quarter_end="2026-11-04", org=[("t", "", 1.0), ("p", "t", 1.0)],
                    budgets=[("p", BIG)], demand=[("p", "c1", "2026-11-01", "2026-11-04", 32)],
                    reservations=[("r1", "p", "c1", 2, 24, "2026-11-01", "2026-11-04")])


def test_the_second_pass_places_what_a_first_pass_stopped_early_did_not(monkeypatch):
    # The same limit hit: the first pass places nothing (gap 1.0); the LP leaves most of
    # the limit, so the second pass polishes the empty placement (a sub-MIP of c1's one
    # request) and r1 is placed, the LP solved again for it: still every GPU-hour granted.
    from planner.model import reservations
    from planner.model.result import SolverStatus, StageResult

    monkeypatch.setattr(reservations, "highs_outcome", lambda highs, name, seconds: StageResult(
        name, SolverStatus.TIME_LIMIT, float("nan"), float("nan"), float("inf"), seconds))
    sc = limit_hit_scenario()
    run = plan_scenario(sc, MODEL)
    assert [r["request_id"] for r in run.plan.reservations] == ["r1"]
    assert run.plan.body["unplaced"] == []
    stage = run.plan.body["solver"]["stages"][0]
    assert stage["status"] == "optimal" and stage["objective"] == stage["bound"]
    assert sum(a["gpu_hours"] for a in run.plan.allocations) == pytest.approx(3 * 768.0 - 384.0)
    assert check_plan(run.plan.body, sc) == []


def test_replan_keeps_the_frozen_period_and_moves_the_rest():
    # Two periods; first plan with A weighted 2:1, then leadership flips to 1:2 and we replan
    # from the same as_of with --previous: period 1 is frozen (contract.frozen_periods = 1),
    # period 2 follows the new weights (B gets more than before).
    demand = [(p, "c1", "2026-11-02", "2026-11-04", g) for p, g in
              (("a1", 10), ("a2", 80), ("b1", 60))]
    budgets = [("a1", BIG), ("a2", BIG), ("b1", BIG)]
    first = plan_scenario(scenario(clusters=ONE_BIG_NODE, org=ORG, demand=demand,
                                   budgets=budgets, quarter_end="2026-11-04"), MODEL)
    flipped = [("A", "", 1.0), ("B", "", 2.0)] + ORG[2:]
    sc = scenario(clusters=ONE_BIG_NODE, org=flipped, demand=demand, budgets=budgets,
                  quarter_end="2026-11-04")
    fresh = plan_scenario(sc, MODEL)
    replanned = plan_scenario(sc, MODEL, previous=first.plan.body)
    before, fresh_g, after = grants(first), grants(fresh), grants(replanned)
    for p in ("a1", "a2", "b1"):
        assert after[(p, "2026-11-02")] == pytest.approx(before[(p, "2026-11-02")], abs=1e-6)
    assert fresh_g[("b1", "2026-11-02")] > before[("b1", "2026-11-02")]  # weights matter
    assert after[("b1", "2026-11-03")] > before[("b1", "2026-11-03")]
    assert check_plan(replanned.plan.body, sc, first.plan.body) == []


def test_a_frozen_opportunistic_grant_yields_to_a_project_that_has_budget_again():
    # One node of 8 GPUs, daily periods; replan at as_of 11-03 of a plan made at 11-02.
    # a (no budget) wants 8 GPUs, b (budget 144 NGH) 4 GPUs, every day. The previous plan
    # spent b's budget as 96 GPU-hours on 11-02 and 48 on 11-03, and filled 11-03 with
    # 144 opportunistic GPU-hours of a. But b ran nothing on 11-02 (no usage), so at 11-03
    # b has all 144 NGH left and wants 96 GPU-hours there.
    # Frozen period 11-03: b's 48 guaranteed stay (≥ 48); a's opportunistic grant is kept
    # only in the room beyond what b may still take, 192 − max(48, min(96, 144)) = 96.
    # So b gets 96 guaranteed and a 96 opportunistic. Runner-up (the old rule: both grants
    # kept as bounds): b 48, a 144, capacity full while b has budget and lacks 48 —
    # a rule-4 violation, and the replan failed with exit 1.
    org = [("t", "", 1.0), ("a", "t", 1.0), ("b", "t", 1.0)]
    demand = [("a", "c1", "2026-11-02", "2026-11-04", 8),
              ("b", "c1", "2026-11-02", "2026-11-04", 4)]
    sc = scenario(org=org, budgets=[("b", 144.0)], demand=demand, as_of="2026-11-03",
                  quarter_end="2026-11-04")
    day = {"2026-11-02": "2026-11-03T00:00:00Z", "2026-11-03": "2026-11-04T00:00:00Z"}
    previous = {
        "as_of": "2026-11-02T00:00:00Z",
        "periods": [{"start": f"{d}T00:00:00Z", "end": end} for d, end in day.items()],
        "allocations": [
            {"project": "b", "cluster": "c1", "period_start": "2026-11-02T00:00:00Z",
             "gpu_hours": 96.0, "kind": "guaranteed"},
            {"project": "a", "cluster": "c1", "period_start": "2026-11-02T00:00:00Z",
             "gpu_hours": 96.0, "kind": "opportunistic"},
            {"project": "b", "cluster": "c1", "period_start": "2026-11-03T00:00:00Z",
             "gpu_hours": 48.0, "kind": "guaranteed"},
            {"project": "a", "cluster": "c1", "period_start": "2026-11-03T00:00:00Z",
             "gpu_hours": 144.0, "kind": "opportunistic"}],
        "reservations": []}
    run = plan_scenario(sc, MODEL, previous=previous)
    assert grants(run) == pytest.approx({("b", "2026-11-03"): 96.0})
    assert grants(run, "opportunistic") == pytest.approx({("a", "2026-11-03"): 96.0})
    assert check_plan(run.plan.body, sc, previous) == []


def test_a_frozen_opportunistic_grant_turns_guaranteed_when_its_project_has_budget():
    # Same cell, one project a, budget 100 NGH, 8 GPUs wanted. The previous plan gave a
    # 192 opportunistic GPU-hours on 11-03 (its budget was spent then); with no usage, a
    # now has 100 NGH left. The kept total (192) stays, re-decided: 100 guaranteed (all
    # the budget) and 92 opportunistic. Runner-up (opportunistic kept as a bound on o):
    # 192 opportunistic while a has budget left — a rule-4 violation.
    org = [("t", "", 1.0), ("a", "t", 1.0)]
    sc = scenario(org=org, budgets=[("a", 100.0)], as_of="2026-11-03",
                  quarter_end="2026-11-04",
                  demand=[("a", "c1", "2026-11-02", "2026-11-04", 8)])
    previous = {
        "as_of": "2026-11-02T00:00:00Z",
        "periods": [{"start": "2026-11-03T00:00:00Z", "end": "2026-11-04T00:00:00Z"}],
        "allocations": [{"project": "a", "cluster": "c1", "period_start": "2026-11-03T00:00:00Z",
                         "gpu_hours": 192.0, "kind": "opportunistic"}],
        "reservations": []}
    run = plan_scenario(sc, MODEL, previous=previous)
    assert grants(run) == pytest.approx({("a", "2026-11-03"): 100.0})
    assert grants(run, "opportunistic") == pytest.approx({("a", "2026-11-03"): 92.0})


def test_a_frozen_reservation_that_no_longer_fits_the_budget_is_placed_afresh():
    # r1: 1 node of 8 GPUs for 24 h = 192 NGH, planned on 11-03 by a plan made on 11-02
    # (the replan's frozen first period). p's budget has since been cut to 100 NGH: kept,
    # r1 would break rule 4 (192 > 100). Not yet running, it is not held by rule 6, so
    # the replan places its request afresh: no budget for it, so unplaced ("budget"), and
    # p's 100 NGH go to its elastic demand (4 GPUs x 24 h = 96 GPU-hours, guaranteed).
    # Runner-up (the old rule, keep every frozen start): r1 kept, rule 4 broken, exit 1.
    org = [("t", "", 1.0), ("p", "t", 1.0)]
    sc = scenario(org=org, budgets=[("p", 100.0)], as_of="2026-11-03", quarter_end="2026-11-04",
                  demand=[("p", "c1", "2026-11-03", "2026-11-04", 4)],
                  reservations=[("r1", "p", "c1", 1, 24, "2026-11-02", "2026-11-04")])
    previous = {
        "as_of": "2026-11-02T00:00:00Z",
        "periods": [{"start": "2026-11-03T00:00:00Z", "end": "2026-11-04T00:00:00Z"}],
        "allocations": [],
        "reservations": [{"request_id": "r1", "project": "p", "cluster": "c1", "nodes": 1,
                          "start": "2026-11-03T00:00:00Z", "end": "2026-11-04T00:00:00Z"}]}
    run = plan_scenario(sc, MODEL, previous=previous)
    assert run.plan.reservations == []
    assert [u["request_id"] for u in run.plan.body["unplaced"]] == ["r1"]
    assert grants(run) == pytest.approx({("p", "2026-11-03"): 96.0})
    assert check_plan(run.plan.body, sc, previous) == []
