"""The reservation stage: independent parts, warm starts, hand-worked optima, invariants."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.check import check_plan
from planner.config import load_model
from planner.model import reservations
from planner.model.problem import build_problem
from planner.model.reservations import (
    SCALE,
    STAGE,
    ReservationModel,
    _costs,
    build_reservation_model,
    fixed_nodes,
    free_worker_seconds,
    greedy_placement,
    improve_placement,
    neighbourhoods,
    part_time_limit,
    placement_value,
    previous_placement,
    solve_reservation_model,
)
from planner.model.result import SolverStatus, StageResult
from planner.model.solve import budget_headroom
from planner.model.swap_search import SwapSearch, swap_search
from planner.run import plan_scenario
from tests.tiny import scenario

MODEL = load_model("default")  # reservation_lateness 0.001 a period; no demand: no δ
BIG = 1e9
THREADS = MODEL.solver.threads  # HiGHS keeps one thread count a process (see new_highs)
ORG = [("t", "", 1.0), ("p", "t", 1.0), ("q", "t", 1.0)]
DAYS = ["2026-11-02", "2026-11-03", "2026-11-04", "2026-11-05", "2026-11-06"]


def solved(sc, time_limit: float = 10.0, mip_gap: float = 0.0):
    """Build and solve the reservation stage of ``sc``: (problem, model, placement, stage)."""
    problem = build_problem(sc, MODEL)
    built = build_reservation_model(problem, budget_headroom(problem))
    placed, stage = solve_reservation_model(built, time_limit, mip_gap, THREADS, 0)
    return problem, built, placed, stage


def coupled_scenario():
    """Three 8-GPU-node H100 clusters, three daily periods (2–4 Nov), no demand.

    p has 800 NGH and asks for r1 (c1, 2 nodes, 24 h: 384 NGH) and r2 (c2, 4 nodes,
    24 h: 768 NGH): both cost 1,152 > 800, so p's budget row binds and joins c1 and c2.
    q (budget never binding) asks for r4 (c1, 4 nodes, 24 h) and r3 (c3, 2 nodes, 48 h).
    """
    return scenario(clusters=[("c1", "H100", 4, 8), ("c2", "H100", 4, 8), ("c3", "H100", 2, 8)],
                    org=ORG, budgets=[("p", 800.0), ("q", BIG)], quarter_end=DAYS[3],
                    reservations=[("r1", "p", "c1", 2, 24.0, DAYS[0], DAYS[3]),
                                  ("r2", "p", "c2", 4, 24.0, DAYS[0], DAYS[3]),
                                  ("r3", "q", "c3", 2, 48.0, DAYS[0], DAYS[3]),
                                  ("r4", "q", "c1", 4, 24.0, DAYS[0], DAYS[3])])


def test_binding_budgets_join_clusters_and_the_parts_give_the_known_optimum():
    # Parts: {c1, c2} (p's binding budget row) with r1, r2, r4; {c3} with r3 alone.
    # Optimum by hand: p can afford one of r1 (384) and r2 (768): r2. r4 (768) and r3
    # (2 × 8 × 48 = 768) start on day one, nothing is late: 768 + 768 + 768 = 2,304.
    # Runner-up: r1 instead of r2 (384 less); r1 and r4 both on c1 would also need a
    # later start for one of them (6 nodes > 4 on the same day).
    problem, built, placed, stage = solved(coupled_scenario())
    assert [[r.request_id for r in part.requests] for part in built.parts] == [
        ["r1", "r2", "r4"], ["r3"]]
    assert [part.clusters for part in built.parts] == [(0, 1), (2,)]
    assert placed == {"r2": 0, "r3": 0, "r4": 0}
    assert stage.objective == pytest.approx(2304.0) and stage.bound == pytest.approx(2304.0)
    assert stage.gap == 0.0 and stage.status is SolverStatus.OPTIMAL


def test_the_whole_plan_of_the_coupled_case_passes_the_checker():
    run = plan_scenario(coupled_scenario(), MODEL)
    assert {(r["request_id"], r["start"]) for r in run.plan.reservations} == {
        ("r2", "2026-11-02T00:00:00Z"), ("r3", "2026-11-02T00:00:00Z"),
        ("r4", "2026-11-02T00:00:00Z")}
    assert [u["request_id"] for u in run.plan.body["unplaced"]] == ["r1"]
    assert check_plan(run.plan.body, coupled_scenario()) == []


def packing_scenario():
    """One 4-node cluster, three daily periods, q's budget never binds.

    A: 4 nodes, 48 h, anywhere (starts 0, 1); B: 2 nodes, day 0 only; C: 2 nodes, day 2
    only; D: 3 nodes, 24 h, anywhere (starts 0, 1, 2).
    """
    return scenario(clusters=[("c1", "H100", 4, 8)], org=ORG, budgets=[("q", BIG)],
                    quarter_end=DAYS[3],
                    reservations=[("A", "q", "c1", 4, 48.0, DAYS[0], DAYS[3]),
                                  ("B", "q", "c1", 2, 24.0, DAYS[0], DAYS[1]),
                                  ("C", "q", "c1", 2, 24.0, DAYS[2], DAYS[3]),
                                  ("D", "q", "c1", 3, 24.0, DAYS[0], DAYS[3])])


def test_packing_one_cluster_over_time_by_hand():
    # Values (GPU-hours, less 0.1 % a period late, × SCALE rounded): A 1,536 (1,534.46 a
    # day late), B 384, C 384, D 576 (575.42, 574.84). A fills all 4 nodes on its two days,
    # so one day is left: A@0 + D@2 = 1,536 + 574.84 = 2,110.84 (best); runner-up A@1 +
    # D@0 = 1,534.46 + 576 = 2,110.46; A@0 + C@2 = 1,920; without A at most 1,343.42.
    _, _, placed, stage = solved(packing_scenario())
    assert placed == {"A": 0, "D": 2}
    assert stage.objective == pytest.approx(2110.84)
    assert stage.bound == pytest.approx(2110.84) and stage.status is SolverStatus.OPTIMAL


def test_warm_starts_are_valid_and_the_previous_plans_starts_are_kept_where_they_fit():
    sc = packing_scenario()
    first = plan_scenario(sc, MODEL)
    problem = build_problem(sc, MODEL, previous=first.plan.body)
    headroom = budget_headroom(problem)
    requests = [r for r in problem.requests if r.starts]
    # A@0 is in the frozen first period: kept as a fixed reservation, not a request
    assert [f.request_id for f in problem.fixed] == ["A"]
    assert [r.request_id for r in requests] == ["B", "C", "D"]
    built = build_reservation_model(problem, headroom)
    (part,) = built.parts
    assert part.warm_source == "previous" and part.warm == {"D": 2}
    values = part.values
    assert previous_placement(problem, requests, values, headroom) == {"D": 2}
    # greedy: largest first (D: 3 nodes), its best start that fits (2: A holds 0 and 1)
    assert greedy_placement(problem, requests, values, headroom) == {"D": 2}
    # with --previous, D's reference start is its previous one (day 2): not late, 576
    _, stage = solve_reservation_model(built, 5.0, 0.0, THREADS, 0)
    assert stage.objective == pytest.approx(576.0) and stage.status is SolverStatus.OPTIMAL


def brute_force(problem, requests, values, headroom) -> int:
    """The optimum (× SCALE) by enumerating every placement (unplaced or a start each)."""
    _, cost, limit = _costs(requests, headroom)
    room = problem.nodes[:, None] - fixed_nodes(problem)
    best = 0
    for choice in itertools.product(*[[None, *range(len(r.starts))] for r in requests]):
        used = np.zeros_like(room)
        spent = np.zeros(len(limit), dtype=np.int64)
        value = 0
        for r, v, c, j in zip(requests, values, cost, choice, strict=True):
            if j is None:
                continue
            used[r.cluster, r.starts[j]:r.starts[j] + r.length] += r.nodes
            spent[r.project] += c
            value += int(v[j])
        if (used <= room).all() and (spent <= limit).all():
            best = max(best, value)
    return best


request_rows = st.lists(st.tuples(
    st.sampled_from(["p", "q"]), st.sampled_from(["c1", "c2", "c3"]), st.integers(1, 3),
    st.sampled_from([24.0, 48.0]), st.integers(0, 2), st.integers(0, 2)), min_size=1, max_size=5)


def tiny_instance(rows, nodes, budgets):
    """The random tiny scenario of the property tests: 3 clusters, 4 daily periods."""
    reservations = [(f"r{i}", project, cluster, n, hours, DAYS[first],
                     DAYS[min(4, first + int(hours // 24) + slack)])
                    for i, (project, cluster, n, hours, first, slack) in enumerate(rows)]
    return scenario(clusters=[(f"c{k + 1}", "H100", nodes[k], 8) for k in range(3)],
                    org=ORG, budgets=[("p", budgets[0]), ("q", budgets[1])],
                    quarter_end=DAYS[4], reservations=reservations)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=request_rows, nodes=st.tuples(*[st.integers(1, 4)] * 3),
       budgets=st.tuples(st.sampled_from([300.0, 700.0, 1500.0, BIG]),
                         st.sampled_from([500.0, BIG])))
def test_placements_stay_whole_inside_their_window_within_capacity_and_budget(rows, nodes,
                                                                               budgets):
    # Random tiny instances (3 clusters, 4 daily periods, up to 5 requests, budgets that
    # bind or not): every placed request starts at an allowed start (its window, exact
    # length), whole nodes never exceed any cluster in any period, no project's budget is
    # overdrawn; the parts' summed bound is at least the brute-force optimum, the
    # objective at most it and equal to the placement's value, and equal when optimal.
    sc = tiny_instance(rows, nodes, budgets)
    problem, built, placed, stage = solved(sc, time_limit=5.0)
    requests = {r.request_id: r for r in problem.requests}
    used = np.zeros((3, len(problem.hours)), dtype=np.int64)
    spent = np.zeros(2)
    for request_id, start in placed.items():
        r = requests[request_id]
        assert start in r.starts  # inside the window, whole periods, exact length
        assert start + r.length <= len(problem.hours)
        assert isinstance(r.nodes, int)
        used[r.cluster, start:start + r.length] += r.nodes
        spent[r.project] += r.ngh
    assert (used <= problem.nodes[:, None]).all()
    assert (spent <= budget_headroom(problem) + 1e-6).all()
    optimum = brute_force(problem, built.requests, built.values, budget_headroom(problem))
    value = placement_value(built.requests, built.values, placed)
    assert stage.objective == pytest.approx(value / SCALE, abs=1e-6)
    assert stage.bound >= optimum / SCALE - 1e-6 >= stage.objective - 2e-6
    if stage.status is SolverStatus.OPTIMAL:
        assert value == optimum


def blocking_scenario():
    """One 4-node 8-GPU cluster, two daily periods (2–3 Nov); q's budget never binds.

    A: 3 nodes, 48 h (3 × 8 × 48 = 1,152 GPU-hours); B and C: 2 nodes, 48 h (768 each).
    Each fills the whole horizon, so each has one start (day 0) and no lateness.
    """
    return scenario(clusters=[("c1", "H100", 4, 8)], org=ORG, budgets=[("q", BIG)],
                    quarter_end=DAYS[2],
                    reservations=[("A", "q", "c1", 3, 48.0, DAYS[0], DAYS[2]),
                                  ("B", "q", "c1", 2, 48.0, DAYS[0], DAYS[2]),
                                  ("C", "q", "c1", 2, 48.0, DAYS[0], DAYS[2])])


def test_local_search_repairs_a_greedy_placement_that_blocks_two_for_one():
    # Greedy, largest first: A (3 nodes) takes day 0–1; B and C (2 nodes each) no longer
    # fit (3 + 2 > 4): 1,152. Best: B and C side by side, 2 + 2 = 4 nodes: 1,536; A with
    # either is 5 nodes (runner-up: A alone, 1,152). The local search re-solves the
    # cluster's three requests (one neighbourhood) from the greedy placement and finds it.
    problem = build_problem(blocking_scenario(), MODEL)
    headroom = budget_headroom(problem)
    built = build_reservation_model(problem, headroom)
    (part,) = built.parts
    greedy = greedy_placement(problem, part.requests, part.values, headroom)
    assert greedy == {"A": 0}
    part.warm = greedy
    improved, value = improve_placement(part, float("inf"), THREADS, 0)
    assert improved == {"B": 0, "C": 0} and value == 1536 * SCALE
    assert value == placement_value(part.requests, part.values, improved)
    assert value > placement_value(part.requests, part.values, greedy)


def test_neighbourhoods_are_runs_of_a_clusters_requests_by_first_start_overlapping_by_half():
    # Cluster 7: 25 requests, first starts 24, 23, …, 0 (index i starts at 24 − i); cluster 3:
    # 5 requests. Runs of 20 overlapping by 10: cluster 7 (the part's first) gives the 20
    # earliest (indices 24 down to 5) and the last 15 (14 down to 0); cluster 3 one run.
    requests = [SimpleNamespace(cluster=7, starts=(24 - i,)) for i in range(25)]
    requests += [SimpleNamespace(cluster=3, starts=(0,)) for _ in range(5)]
    part = SimpleNamespace(clusters=(7, 3), requests=requests)
    hoods = neighbourhoods(part)
    assert [list(h) for h in hoods] == [list(range(24, 4, -1)), list(range(14, -1, -1)),
                                        [25, 26, 27, 28, 29]]


def test_part_time_limit_by_hand():
    # 30 s left, a part of 100 of the 400 columns still queued: 7.5 s; the last part gets
    # all that is left; never under MIN_PART_SECONDS (0.5 s)
    assert part_time_limit(30.0, 100, 400) == pytest.approx(7.5)
    assert part_time_limit(19.0, 200, 200) == pytest.approx(19.0)
    assert part_time_limit(0.2, 100, 400) == reservations.MIN_PART_SECONDS


def test_free_worker_seconds_by_hand():
    # two workers, 30 s to the deadline: the one taking a part is free now, the other's
    # part is due to end in 12 s, so 30 + 18 = 48 worker-seconds are free for the parts
    # not started yet (not 2 × 30: the other's next 12 s are its running part's)
    assert free_worker_seconds(100.0, 130.0, 2, [112.0]) == pytest.approx(48.0)
    # no other part running: every worker's whole time
    assert free_worker_seconds(100.0, 130.0, 2, []) == pytest.approx(60.0)
    # a part due past the deadline, or one overdue, gives nothing / all of its worker
    assert free_worker_seconds(100.0, 130.0, 3, [140.0, 90.0]) == pytest.approx(60.0)
    assert free_worker_seconds(131.0, 130.0, 2, [112.0]) == 0.0


def test_a_part_that_reaches_its_gap_early_leaves_its_time_to_the_next(monkeypatch):
    # Parts a, big, b of 100, 200 and 100 columns, run smallest first (a, b, big); 30 s for
    # the stage, on a fake clock. a gets 30 × 100 ÷ 400 = 7.5 s and stops at its gap after
    # 1.5 s; b gets the 28.5 s left × 100 ÷ 300 = 9.5 s and uses all of it; big gets the
    # 19 s left (× 200 ÷ 200), against 15 s had every part kept its first share. The
    # stage sums the parts: 3 × 100 against 3 × 101.
    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(reservations, "time", SimpleNamespace(perf_counter=lambda: clock.now))
    took = {"a": 1.5, "b": 9.5, "big": 19.0}
    limits = []

    def fake_solve(part, time_limit, mip_gap, threads, seed, polish_only=False, work=None):
        limits.append((part.name, time_limit))
        clock.now += took[part.name]
        return {part.name: 0}, StageResult(STAGE, SolverStatus.FEASIBLE, 100.0 * SCALE,
                                           101.0 * SCALE, 0.01, took[part.name])

    monkeypatch.setattr(reservations, "solve_part", fake_solve)
    parts = [SimpleNamespace(name=name, start=np.zeros(columns))
             for name, columns in [("a", 100), ("big", 200), ("b", 100)]]
    placed, stage = solve_reservation_model(ReservationModel(parts), 30.0, 0.005, THREADS, 0,
                                            workers=1)
    assert limits == [("a", pytest.approx(7.5)), ("b", pytest.approx(9.5)),
                      ("big", pytest.approx(19.0))]
    assert placed == {"a": 0, "b": 0, "big": 0}
    assert stage.objective == pytest.approx(300.0) and stage.bound == pytest.approx(303.0)
    assert stage.gap == pytest.approx(0.01)


def assert_placements_valid(problem, headroom, placements) -> None:
    """Every (part, placement): starts inside the windows; all of them within nodes and budgets.

    Checked from the requests themselves, not from any search's own arrays.
    """
    used = np.zeros((len(problem.nodes), len(problem.hours)), dtype=np.int64)
    spent = np.zeros(len(headroom))
    for part, placement in placements:
        by_id = {r.request_id: r for r in part.requests}
        for request_id, start in placement.items():
            r = by_id[request_id]
            assert start in r.starts
            used[r.cluster, start:start + r.length] += r.nodes
            spent[r.project] += r.ngh
    assert (used <= problem.nodes[:, None]).all()
    assert (spent <= headroom + 1e-6).all()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=request_rows, nodes=st.tuples(*[st.integers(1, 4)] * 3),
       budgets=st.tuples(st.sampled_from([300.0, 700.0, 1500.0, BIG]),
                         st.sampled_from([500.0, BIG])))
def test_local_search_from_the_greedy_placement_stays_valid_and_never_loses(rows, nodes,
                                                                            budgets):
    # Random tiny instances as above: from the greedy placement, each part's local search
    # returns starts inside the windows, within nodes and budgets, worth at least the
    # greedy placement and at most the brute-force optimum.
    sc = tiny_instance(rows, nodes, budgets)
    problem = build_problem(sc, MODEL)
    headroom = budget_headroom(problem)
    built = build_reservation_model(problem, headroom)
    placements = []
    for part in built.parts:
        part.warm = greedy_placement(problem, part.requests, part.values, headroom)
        greedy = placement_value(part.requests, part.values, part.warm)
        improved, value = improve_placement(part, float("inf"), THREADS, 0)
        assert value == placement_value(part.requests, part.values, improved) >= greedy
        assert value <= brute_force(problem, part.requests, part.values, headroom)
        placements.append((part, improved))
    assert_placements_valid(problem, headroom, placements)


def test_swap_search_repairs_the_blocking_greedy_placement_by_ejecting_one_for_two():
    # The blocking case: greedy places A alone (3 of 4 nodes, 1,152 GPU-hours); B and C do
    # not fit beside it. The swap search tries B (the first unplaced, 768) at its one start:
    # short of nodes (1 left, 2 needed), it ejects the one blocker A (1,152 > 768, a loss
    # alone), places B, then puts back what fits: A no longer (2 + 3 > 4), C does (2 + 2):
    # B + C = 1,536 > 1,152, kept. The next round tries A again: ejecting B, C, or both
    # (three more moves); only both make room, and A alone (1,152) is worth less: undone.
    problem = build_problem(blocking_scenario(), MODEL)
    headroom = budget_headroom(problem)
    (part,) = build_reservation_model(problem, headroom).parts
    greedy = greedy_placement(problem, part.requests, part.values, headroom)
    assert greedy == {"A": 0}
    search = SwapSearch(part, greedy)
    assert search.value == 1152 * SCALE
    assert search.room.tolist() == [[1, 1]] and search.moves == 0
    search.search(float("inf"))
    assert search.placement() == {"B": 0, "C": 0} and search.value == 1536 * SCALE
    assert search.room.tolist() == [[0, 0]]
    assert search.moves == 4  # A for B (kept), then B, C, B + C for A (undone)


def test_swap_search_ejects_within_the_budget_row_too():
    # One 8-node cluster (never short of nodes), three daily periods; p has 800 NGH.
    # r1: 4 nodes 24 h = 768 GPU-hours (768 NGH at H100's rate 1.0), r2 and r3: 2 nodes
    # 24 h = 384 each, every one with the one start day 0 (window of one day). Greedy
    # (largest first) takes r1: 768 of 800 NGH, r2 and r3 do not fit the budget (32 left).
    # The swap search ejects r1 for r2 (384 < 768: a loss alone) and puts back r3
    # (384 + 384 = 768 ≤ 800): worth the same 768, so not kept. The optimum is 768 either
    # way (r1 + r2 = 1,152 > 800); the search keeps the greedy placement, never worse.
    sc = scenario(clusters=[("c1", "H100", 8, 8)], org=ORG, budgets=[("p", 800.0)],
                  quarter_end=DAYS[3],
                  reservations=[("r1", "p", "c1", 4, 24.0, DAYS[0], DAYS[1]),
                                ("r2", "p", "c1", 2, 24.0, DAYS[0], DAYS[1]),
                                ("r3", "p", "c1", 2, 24.0, DAYS[0], DAYS[1])])
    problem = build_problem(sc, MODEL)
    headroom = budget_headroom(problem)
    (part,) = build_reservation_model(problem, headroom).parts
    greedy = greedy_placement(problem, part.requests, part.values, headroom)
    assert greedy == {"r1": 0}
    placed, value = swap_search(part, greedy, float("inf"))
    assert placed == {"r1": 0} and value == 768 * SCALE
    assert value == brute_force(problem, part.requests, part.values, headroom)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=request_rows, nodes=st.tuples(*[st.integers(1, 4)] * 3),
       budgets=st.tuples(st.sampled_from([300.0, 700.0, 1500.0, BIG]),
                         st.sampled_from([500.0, BIG])), moves=st.integers(0, 50))
def test_swap_search_from_the_greedy_placement_stays_valid_and_never_loses(rows, nodes,
                                                                           budgets, moves):
    # Random tiny instances: from the greedy placement, with any work limit, each part's
    # swap search returns starts inside the windows, within nodes and budgets (checked
    # here from the requests, not from the search's own arrays), worth what the model
    # counts, at least the greedy placement and at most the brute-force optimum; run
    # twice, it gives the same placement (the work limit binds, not the clock).
    sc = tiny_instance(rows, nodes, budgets)
    problem = build_problem(sc, MODEL)
    headroom = budget_headroom(problem)
    built = build_reservation_model(problem, headroom)
    placements = []
    for part in built.parts:
        greedy = greedy_placement(problem, part.requests, part.values, headroom)
        placed, value = swap_search(part, greedy, float("inf"), moves)
        assert (placed, value) == swap_search(part, greedy, float("inf"), moves)
        assert value == placement_value(part.requests, part.values, placed)
        assert placement_value(part.requests, part.values, greedy) <= value
        assert value <= brute_force(problem, part.requests, part.values, headroom)
        placements.append((part, placed))
    assert_placements_valid(problem, headroom, placements)


def two_packings():
    """The packing case twice, on c1 and c2: two independent parts (q's budget never binds)."""
    rows = [("A", 4, 48.0, 0, 3), ("B", 2, 24.0, 0, 1), ("C", 2, 24.0, 2, 3),
            ("D", 3, 24.0, 0, 3)]
    return scenario(clusters=[("c1", "H100", 4, 8), ("c2", "H100", 4, 8)], org=ORG,
                    budgets=[("q", BIG)], quarter_end=DAYS[3],
                    reservations=[(f"{r}{c}", "q", f"c{c}", n, h, DAYS[a], DAYS[b])
                                  for c in (1, 2) for r, n, h, a, b in rows])


@pytest.mark.parametrize("broken", [False, True])
def test_parts_solved_in_worker_processes_give_what_solving_them_in_turn_gives(
        monkeypatch, broken):
    # Two parts, each closed by HiGHS: in two worker processes (python -m
    # planner.model.part_worker, the largest part first) the placement, the stage's
    # objective, bound and status and each part's outcome are those of solving them one
    # after another here. broken: no worker can start, so each part is solved here
    # afterwards, with the same result.
    problem = build_problem(two_packings(), MODEL)
    alone = build_reservation_model(problem, budget_headroom(problem))
    placed, stage = solve_reservation_model(alone, 20.0, 0.0, THREADS, 0, workers=1)
    assert placed == {"A1": 0, "D1": 2, "A2": 0, "D2": 2}
    if broken:
        def no_process(*args, **kwargs):
            raise OSError("no processes here")
        monkeypatch.setattr(reservations.subprocess, "Popen", no_process)
    both = build_reservation_model(problem, budget_headroom(problem))
    placed2, stage2 = solve_reservation_model(both, 20.0, 0.0, THREADS, 0, workers=2)
    assert placed2 == placed
    assert (stage2.status, stage2.objective, stage2.bound, stage2.gap) == (
        stage.status, stage.objective, stage.bound, stage.gap) == (
        SolverStatus.OPTIMAL, pytest.approx(2 * 2110.84), pytest.approx(2 * 2110.84), 0.0)
    assert [(o.objective, o.bound, o.status) for o in both.outcomes] == [
        (o.objective, o.bound, o.status) for o in alone.outcomes]


def test_how_many_parts_are_solved_at_once(monkeypatch):
    # The setting when it is a whole number >= 1; else: 1 unless two parts need a search
    # and have WORKER_MIN_COLUMNS columns, then the cores other processes leave free, this
    # process's own counted free (it waits); the load average where that is not known.
    problem = build_problem(two_packings(), MODEL)
    built = build_reservation_model(problem, budget_headroom(problem))
    big = np.zeros(reservations.WORKER_MIN_COLUMNS)
    hard = SimpleNamespace(relaxed=10.0, requests=[], values=[], warm={}, start=big)
    easy = SimpleNamespace(relaxed=reservations.INF, requests=[], values=[], warm={}, start=big)
    small = SimpleNamespace(relaxed=10.0, requests=[], values=[], warm={}, start=big[1:])
    monkeypatch.setattr(reservations.os, "cpu_count", lambda: 2)
    monkeypatch.delenv(reservations.WORKERS_ENV, raising=False)
    cases = [(0.2, [hard, hard], 2), (1.4, [hard, hard], 2), (1.6, [hard, hard], 1),
             (0.2, [hard, easy], 1), (0.2, [hard, hard, hard], 2), (0.2, [hard, small], 1)]
    monkeypatch.setattr(reservations, "busy_elsewhere", lambda: None)
    for load, parts, want in cases:
        monkeypatch.setattr(reservations.os, "getloadavg", lambda load=load: (load, 0, 0))
        built.parts = parts
        assert reservations.part_workers(built, 0.005) == want, (load, len(parts))
    # the cores busy elsewhere now, read first: a load of 9 left by runs that ended does
    # not count (busy 0.0); another process on one core (busy 1.0) leaves one
    monkeypatch.setattr(reservations.os, "getloadavg", lambda: (9.0, 0, 0))
    for busy, parts, want in [(0.0, [hard, hard], 2), (0.4, [hard, hard], 2),
                              (0.6, [hard, hard], 1), (1.0, [hard, hard], 1),
                              (0.0, [hard, easy], 1), (0.0, [hard, hard, hard], 2)]:
        monkeypatch.setattr(reservations, "busy_elsewhere", lambda busy=busy: busy)
        built.parts = parts
        assert reservations.part_workers(built, 0.005) == want, (busy, len(parts))
    for setting, want in [("3", 3), ("1", 1), ("0", 2), ("two", 2), (" ", 2)]:
        monkeypatch.setenv(reservations.WORKERS_ENV, setting)
        monkeypatch.setattr(reservations.os, "getloadavg", lambda: (0.2, 0, 0))
        built.parts = [hard, hard]
        assert reservations.part_workers(built, 0.005) == want, setting
