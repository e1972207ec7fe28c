"""The vectorised checker: a hand-worked broken plan, and agreement with the loop oracle."""

from __future__ import annotations

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.check import check_plan
from tests import reference_check
from tests.tiny import scenario

BIG = 1e6
P1, P2 = "2026-11-02T00:00:00Z", "2026-11-03T00:00:00Z"

# c1: 2 nodes × 8 H100 = 16 GPUs = 384 GPU-hours a day; c2: 1 node × 8 A100 (rate 0.5) = 192.
# Quarter 11-01 .. 11-04, as_of 11-02: two daily periods P1 (11-02) and P2 (11-03).
SCENARIO = scenario(
    clusters=[("c1", "H100", 2, 8), ("c2", "A100", 1, 8)], gpu_rates={"A100": 0.5},
    quarter_start="2026-11-01", as_of="2026-11-02", quarter_end="2026-11-04",
    org=[("t", "", 1.0), ("p", "t", 1.0), ("q", "t", 1.0)],
    budgets=[("p", 600.0, ("c1",)), ("q", BIG)],
    demand=[("p", "c1", "2026-11-02", "2026-11-04", 16),   # 384 a period
            ("q", "c1", "2026-11-02", "2026-11-03", 8),    # 192 in P1
            ("q", "c2", "2026-11-02", "2026-11-04", 8)],   # 192 a period
    reservations=[("r1", "q", "c1", 1, 24, "2026-11-03", "2026-11-04"),
                  ("r3", "q", "c2", 1, 24, "2026-11-02", "2026-11-04")],
    usage=[("j1", "p", "c1", 8, "2026-11-01", "2026-11-02"),           # 24 h × 8 = 192 NGH
           ("j2", "p", "c1", 4, "2026-10-31T12:00", "2026-11-01T12:00")])  # 12 h in: 48 NGH


def _alloc(project, cluster, start, gpu_hours, kind="guaranteed"):
    return {"project": project, "cluster": cluster, "period_start": start,
            "gpu_hours": gpu_hours, "kind": kind}


def _res(request_id, project, cluster, nodes, start, end):
    return {"request_id": request_id, "project": project, "cluster": cluster, "nodes": nodes,
            "start": start, "end": end}


def _plan(allocations, reservations):
    return {"as_of": P1, "period_hours": 24.0,
            "periods": [{"start": P1, "end": P2}, {"start": P2, "end": "2026-11-04T00:00:00Z"}],
            "allocations": allocations, "reservations": reservations}


BROKEN = _plan(
    [_alloc("p", "c1", P1, 300.0), _alloc("q", "c1", P1, 100.0),
     _alloc("p", "c2", P1, 10.0),                      # p may not use c2, and asked nothing there
     _alloc("p", "c1", P2, 150.0),                     # p waits for 234 idle GPU-hours on c1
     _alloc("q", "c2", P2, 50.0, "opportunistic")],    # q has budget left
    [_res("r1", "q", "c1", 1, P1, P2),                 # window starts 11-03
     _res("r3", "q", "c2", 2, "2026-11-02T12:00:00Z", "2026-11-04T00:00:00Z")])
PREVIOUS = {"reservations": [_res("r5", "q", "c1", 1, "2026-11-01T00:00:00Z", P2),  # running
                             _res("r1", "q", "c1", 1, "2026-11-01T00:00:00Z", P1)]}  # ended


def test_every_planted_violation_is_found_where_it_was_planted():
    # Worked by hand:
    # rule 1  c1 P1: 300 + 100 granted + r1's 1 × 8 × 24 = 592 > 384.
    #         c2 P1: 10 + r3's 2 × 8 × 12 h (from 12:00) = 202 > 192;  c2 P2: 50 + 2 × 8 × 24 = 434.
    # rule 2  p on c2: 10 granted, 0 asked; and c2 is not in p's list.
    # rule 3  r1 starts 11-02, before its window; r3: 2 nodes (asked 1, c2 has 1), 36 h
    #         (asked 24), starts at 12:00, off the daily grid.
    # rule 4  p: used 192 + 48 = 240 NGH; planned 300 + 10 × 0.5 + 150 = 455; 695 > 600.
    #         q (1e6 left) got opportunistic GPU-hours on c2 P2, where it itself lacks
    #         192 − 50 = 142.
    # rule 5  c1 P2: p lacks 384 − 150, and 384 − 150 = 234 > 24 (one GPU × period) are idle.
    #         (c2 P1 and P2 are over-full; c1 P1 too.)
    # rule 6  r5 ran at as_of in the previous plan and is gone; r1 ended at as_of there.
    expected = [
        (1, "c1 2026-11-02T00:00:00+00:00: 592.000 GPU-hours planned, capacity 384.000"),
        (1, "c2 2026-11-02T00:00:00+00:00: 202.000 GPU-hours planned, capacity 192.000"),
        (1, "c2 2026-11-03T00:00:00+00:00: 434.000 GPU-hours planned, capacity 192.000"),
        (2, "p granted on c2, not an allowed cluster"),
        (2, "p on c2 2026-11-02T00:00:00+00:00: granted 10.000 GPU-hours, demand 0.000"),
        (3, "reservation r1: [2026-11-02 00:00:00+00:00, 2026-11-03 00:00:00+00:00) outside "
            "its window"),
        (3, "reservation r3: 2 nodes > 1 on cluster"),
        (3, "reservation r3: 2 nodes, request wants 1"),
        (3, "reservation r3: lasts 1 days 12:00:00, must be 24 h"),
        (3, "reservation r3: starts off the period grid"),
        (4, "opportunistic work on c2 2026-11-03 00:00:00+00:00 while q (within budget) "
            "lacks 142.0 GPU-hours there"),
        (4, "p: used 240.0 + planned 455.0 NGH > budget 600.0"),
        (4, "q has budget left yet got opportunistic GPU-hours on c2 2026-11-03 00:00:00+00:00"),
        (5, "c1 2026-11-03T00:00:00+00:00: 234.0 GPU-hours idle while p waits"),
        (6, "running reservation r5 was cut or moved"),
    ]
    found = [(v.rule, v.message) for v in check_plan(BROKEN, SCENARIO, PREVIOUS)]
    assert found == expected
    assert found == [(v.rule, v.message)
                     for v in reference_check.check_plan(BROKEN, SCENARIO, PREVIOUS)]


def test_a_repaired_plan_has_no_violation_and_a_double_placement_is_one():
    # The same scenario done right: r1 on 11-03, r3 on 11-02 with one node; p within its
    # 360 NGH left (600 − 240) and only on c1, and c1 full wherever p waits: P1 holds
    # 192 (p) + 192 (q, all it asked); P2 holds r1's 192 and 168 for p, 24 idle (≤ one
    # GPU × period). c2 gives q its 192 wherever r3 leaves room (P2).
    fixed = _plan([_alloc("p", "c1", P1, 192.0), _alloc("q", "c1", P1, 192.0),
                   _alloc("p", "c1", P2, 168.0), _alloc("q", "c2", P2, 192.0)],
                  [_res("r1", "q", "c1", 1, P2, "2026-11-04T00:00:00Z"),
                   _res("r3", "q", "c2", 1, P1, P2)])
    assert check_plan(fixed, SCENARIO) == []
    twice = {**fixed, "reservations": fixed["reservations"] + fixed["reservations"][1:]}
    found = [(v.rule, v.message) for v in check_plan(twice, SCENARIO)]
    assert found == [(1, "c2 2026-11-02T00:00:00+00:00: 384.000 GPU-hours planned, "
                         "capacity 192.000"),
                     (3, "a request is placed more than once")]


STARTS = [P1, "2026-11-02T12:00:00Z", P2, "2026-11-01T00:00:00Z"]


@st.composite
def plans(draw):
    allocations = [_alloc(draw(st.sampled_from("pq")), draw(st.sampled_from(["c1", "c2"])),
                          draw(st.sampled_from([P1, P2])),
                          draw(st.integers(0, 800)) / 2,
                          draw(st.sampled_from(["guaranteed", "opportunistic"])))
                   for _ in range(draw(st.integers(0, 8)))]
    reservations = []
    for _ in range(draw(st.integers(0, 4))):
        start = draw(st.sampled_from(STARTS))
        hours = draw(st.sampled_from([12, 24, 48]))
        end = (pd.Timestamp(start) + pd.Timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")
        reservations.append(_res(draw(st.sampled_from(["r1", "r3", "r9"])),
                                 draw(st.sampled_from("pq")), draw(st.sampled_from(["c1", "c2"])),
                                 draw(st.integers(0, 3)), start, end))
    previous = draw(st.sampled_from([None, PREVIOUS, {"reservations": reservations[:1]}]))
    return _plan(allocations, reservations), previous


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=plans())
def test_vectorised_checker_says_what_the_loop_checker_says(case):
    plan, previous = case
    new = [(v.rule, v.message) for v in check_plan(plan, SCENARIO, previous)]
    old = [(v.rule, v.message) for v in reference_check.check_plan(plan, SCENARIO, previous)]
    assert new == old
