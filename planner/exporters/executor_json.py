"""The executor view: per period and cluster, what is in force and when it next changes.

For an executor of any other kind (see README, "plan.json for executor authors"): each
period lists, per cluster, the projects' ``guaranteed_gpus`` and ``opportunistic_gpus`` (as
in ``allocations``), the reservations that run at some time in the period, and
``next_change``: the start of the first later period whose quotas or reservations on that
cluster differ (``null`` when nothing changes until the plan's end).
"""

from __future__ import annotations

from typing import Any

from planner.exporters.common import cells, cluster_info, overlaps

VIEW_VERSION = 1


def _cluster_state(plan: dict[str, Any], grants: dict[tuple[str, str], dict[str, float]],
                   cluster: str, start: str, end: str, gpus_per_node: int) -> dict[str, Any]:
    quotas = [{"project": p, "guaranteed_gpus": g["guaranteed"],
               "opportunistic_gpus": g["opportunistic"]}
              for (p, c), g in sorted(grants.items()) if c == cluster]
    reservations = [{"request_id": r["request_id"], "project": r["project"], "nodes": r["nodes"],
                     "gpus": r["nodes"] * gpus_per_node, "start": r["start"], "end": r["end"]}
                    for r in sorted(plan["reservations"], key=lambda r: r["request_id"])
                    if r["cluster"] == cluster and overlaps(r, start, end)]
    return {"quotas": quotas, "reservations": reservations}


def executor_view(plan: dict[str, Any]) -> dict[str, Any]:
    """Per period, per cluster: quotas and reservations in force, and the next change."""
    info = cluster_info(plan)
    clusters = sorted(info)
    states = []
    for p in plan["periods"]:
        grants = cells(plan, p["start"])
        states.append({c: _cluster_state(plan, grants, c, p["start"], p["end"],
                                         int(info[c]["gpus_per_node"])) for c in clusters})
    periods = []
    for t, p in enumerate(plan["periods"]):
        per_cluster = []
        for c in clusters:
            later = (plan["periods"][u]["start"] for u in range(t + 1, len(states))
                     if states[u][c] != states[t][c])
            per_cluster.append({"cluster": c, "gpu_type": info[c]["gpu_type"],
                                "gpus": int(info[c]["nodes"]) * int(info[c]["gpus_per_node"]),
                                **states[t][c], "next_change": next(later, None)})
        periods.append({"start": p["start"], "end": p["end"], "clusters": per_cluster})
    return {"view_version": VIEW_VERSION, "scenario": plan["scenario"], "as_of": plan["as_of"],
            "input_digest": plan.get("input_digest", ""), "contract": plan.get("contract"),
            "periods": periods}
