"""The executor view: what is in force per period and cluster, and when it changes next."""

from __future__ import annotations

from planner.exporters.executor_json import executor_view
from tests.export_fixtures import D1, D2, PLAN


def test_view_lists_quotas_reservations_and_next_change():
    view = executor_view(PLAN)
    assert [p["start"] for p in view["periods"]] == [D1, D2]
    first = {c["cluster"]: c for c in view["periods"][0]["clusters"]}
    assert first["c1"]["quotas"] == [
        {"project": "p1", "guaranteed_gpus": 10.5, "opportunistic_gpus": 4.75},
        {"project": "p2", "guaranteed_gpus": 16.75, "opportunistic_gpus": 0.0}]
    assert first["c1"]["next_change"] == D2  # p1 gets 20, p2 12 the next day
    assert [r["request_id"] for r in first["c2"]["reservations"]] == ["r1"]
    assert first["c2"]["reservations"][0]["gpus"] == 8
    assert first["c2"]["next_change"] == D2  # r1 ends, r2 starts
    last = {c["cluster"]: c for c in view["periods"][1]["clusters"]}
    assert last["c1"]["next_change"] is None and last["c2"]["next_change"] is None


def test_unchanged_cluster_has_no_next_change():
    plan = {**PLAN, "reservations": [], "allocations": [
        a for a in PLAN["allocations"] if a["cluster"] == "c2"]}
    first = {c["cluster"]: c for c in executor_view(plan)["periods"][0]["clusters"]}
    assert first["c2"]["next_change"] is None and first["c1"]["quotas"] == []


def test_view_names_the_projects_ahead_of_their_pace():
    # PLAN's as_of is half-way through the quarter: ahead = used > half the budget
    assert executor_view(PLAN)["ahead_of_pace"] == []
    budgets = [{**b, "used": b["budget"] * 0.6} if b["project"] in ("p2", "=P 3") else b
               for b in PLAN["budgets"]]
    assert executor_view({**PLAN, "budgets": budgets})["ahead_of_pace"] == ["=P 3", "p2"]
