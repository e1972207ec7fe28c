"""A hand-written plan and org for the exporter tests (schema-valid plan.json body)."""

from __future__ import annotations

import copy

import pandas as pd

ORG = pd.DataFrame({
    "id": ["area", "team-a", "team-b", "p1", "p2", "=P 3"],
    "parent": ["", "area", "area", "team-a", "team-a", "team-b"],
    "weight": [3.0, 2.0, 1.0, 2.0, 1.0, 0.5],
})

D1, D2, D3 = "2026-11-16T00:00:00Z", "2026-11-17T00:00:00Z", "2026-11-18T00:00:00Z"


def _alloc(project: str, cluster: str, start: str, gpus: float, kind: str) -> dict:
    return {"project": project, "cluster": cluster, "period_start": start,
            "gpu_hours": gpus * 24, "kind": kind, "gpus": gpus}


PLAN: dict = {
    "schema_version": 1, "scenario": "hand", "as_of": D1, "period_hours": 24.0,
    "quarter_start": "2026-10-01T00:00:00Z", "quarter_end": "2027-01-01T00:00:00Z",
    "model": "default", "planner_version": "0.1.0", "input_digest": "abc",
    "contract": {"min_runtime_cap_hours": 8.0, "max_reservation_hours": 168.0,
                 "frozen_periods": 1},
    "solver": {"name": "highs-mip+highs", "status": "optimal", "mip_gap": 0.0, "stages": []},
    "periods": [{"start": D1, "end": D2}, {"start": D2, "end": D3}],
    "clusters": [{"cluster": "c1", "gpu_type": "H100", "nodes": 4, "gpus_per_node": 8,
                  "rate": 1.0},
                 {"cluster": "c2", "gpu_type": "A100", "nodes": 2, "gpus_per_node": 8,
                  "rate": 0.5}],
    "allocations": [
        _alloc("p1", "c1", D1, 10.5, "guaranteed"),
        _alloc("p1", "c1", D1, 4.75, "opportunistic"),
        _alloc("p2", "c1", D1, 16.75, "guaranteed"),
        _alloc("=P 3", "c2", D1, 8.0, "guaranteed"),
        _alloc("p1", "c1", D2, 20.0, "guaranteed"),
        _alloc("p2", "c1", D2, 12.0, "guaranteed"),
        _alloc("=P 3", "c2", D2, 8.0, "guaranteed"),
    ],
    "reservations": [
        {"request_id": "r1", "project": "p1", "cluster": "c2", "nodes": 1, "start": D1,
         "end": D2, "kept": False},
        {"request_id": "r2", "project": "p2", "cluster": "c2", "nodes": 1, "start": D2,
         "end": D3, "kept": False},
    ],
    "unplaced": [],
    "budgets": [
        {"project": "p1", "budget": 2000.0, "used": 100.0, "planned": 828.0,
         "planned_reserved": 96.0, "planned_opportunistic": 114.0, "marginal_value": 0.0},
        {"project": "p2", "budget": 1500.0, "used": 0.0, "planned": 786.0,
         "planned_reserved": 96.0, "planned_opportunistic": 0.0, "marginal_value": 0.0},
        {"project": "=P 3", "budget": 500.0, "used": 50.0, "planned": 192.0,
         "planned_reserved": 0.0, "planned_opportunistic": 0.0, "marginal_value": 0.0},
    ],
}


def plan_copy() -> dict:
    """A fresh deep copy of :data:`PLAN`."""
    return copy.deepcopy(PLAN)


def wide_plan(clusters: int = 70) -> tuple[dict, pd.DataFrame]:
    """A plan on ``clusters`` clusters (``w00``, ``w01``, ...; 2 nodes x 8 H100 each) and its org.

    One area, two teams, four projects. ``wide`` has guaranteed and opportunistic GPUs on
    every cluster, so its ClusterQueue needs a flavor per cluster; ``narrow`` has guaranteed
    GPUs on the even clusters; ``=Odd 1`` a reservation of one node on ``w01``; ``idle``
    nothing. Every cluster keeps some GPUs free, so the pool Cohort holds a flavor per cluster.
    """
    names = [f"w{i:02d}" for i in range(clusters)]
    org = pd.DataFrame({"id": ["area", "team-a", "team-b", "wide", "narrow", "=Odd 1", "idle"],
                        "parent": ["", "area", "area", "team-a", "team-a", "team-b", "team-b"],
                        "weight": [1.0, 2.0, 1.0, 1.0, 3.0, 1.0, 0.5]})
    allocations = []
    for i, name in enumerate(names):
        allocations.append(_alloc("wide", name, D1, 2.5 + i % 3, "guaranteed"))
        allocations.append(_alloc("wide", name, D1, 1.75, "opportunistic"))
        if i % 2 == 0:
            allocations.append(_alloc("narrow", name, D1, 4.0, "guaranteed"))
    plan = plan_copy()
    plan["clusters"] = [{"cluster": name, "gpu_type": "H100", "nodes": 2, "gpus_per_node": 8,
                         "rate": 1.0} for name in names]
    plan["allocations"] = allocations
    plan["reservations"] = [{"request_id": "rw", "project": "=Odd 1", "cluster": names[1],
                             "nodes": 1, "start": D1, "end": D2, "kept": False}]
    plan["budgets"] = [{"project": p, "budget": 1e6, "used": 0.0, "planned": 0.0,
                        "planned_reserved": 0.0, "planned_opportunistic": 0.0,
                        "marginal_value": 0.0} for p in ("wide", "narrow", "=Odd 1", "idle")]
    return plan, org
