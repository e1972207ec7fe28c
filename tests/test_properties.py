"""Invariants on random small scenarios: every hard rule re-checked from the plan."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.check import check_plan
from planner.config import load_model
from planner.run import plan_scenario
from tests.tiny import scenario

MODELS = {name: load_model(name) for name in ("default", "strict-budgets")}
PROJECTS = ["p1", "p2", "p3", "p4"]
DAYS = [f"2026-11-{d:02d}" for d in range(1, 6)]  # as_of 11-01, quarter_end 11-05: 4 periods


@st.composite
def scenarios(draw):
    clusters = [("c1", "H100", draw(st.integers(1, 4)), 8),
                ("c2", "A100", draw(st.integers(1, 3)), 4)]
    demand = []
    for _ in range(draw(st.integers(0, 8))):
        a = draw(st.integers(0, 3))
        b = draw(st.integers(a + 1, 4))
        demand.append((draw(st.sampled_from(PROJECTS)), draw(st.sampled_from(["c1", "c2"])),
                       DAYS[a], DAYS[b], draw(st.integers(1, 40))))
    reservations = []
    for i in range(draw(st.integers(0, 4))):
        a = draw(st.integers(0, 3))
        b = draw(st.integers(a + 1, 4))
        cluster = draw(st.sampled_from(["c1", "c2"]))
        reservations.append((f"r{i}", draw(st.sampled_from(PROJECTS)), cluster,
                             draw(st.integers(1, 5)), draw(st.sampled_from([12, 24, 36, 48])),
                             DAYS[a], DAYS[b]))
    usage = []
    for i in range(draw(st.integers(0, 3))):
        day = draw(st.integers(20, 30))
        usage.append((f"j{i}", draw(st.sampled_from(PROJECTS)), "c1", draw(st.integers(1, 8)),
                      f"2026-10-{day}", f"2026-10-{day + 1}"))
    budgets = [(p, float(draw(st.sampled_from([0, 50, 300, 1000, 100000])))) for p in PROJECTS]
    return scenario(
        clusters=clusters, gpu_rates={"A100": 0.5}, as_of="2026-11-01",
        quarter_end="2026-11-05",
        org=[("x", "", draw(st.sampled_from([1.0, 2.0]))), ("y", "", 1.0),
             ("p1", "x", 1.0), ("p2", "x", draw(st.sampled_from([0.5, 1.0, 3.0]))),
             ("p3", "y", 1.0), ("p4", "y", 1.0)],
        budgets=budgets, demand=demand, reservations=reservations, usage=usage)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sc=scenarios(), model=st.sampled_from(sorted(MODELS)))
def test_every_plan_obeys_every_hard_rule(sc, model):
    run = plan_scenario(sc, MODELS[model])  # raises if its own check finds a violation
    assert check_plan(run.plan.body, sc) == []
    # a placed or unplaced verdict for every request, never both
    placed = {r["request_id"] for r in run.plan.reservations}
    unplaced = {u["request_id"] for u in run.plan.body["unplaced"]}
    assert placed.isdisjoint(unplaced)
    assert placed | unplaced == set(sc.reservations["request_id"])
