"""The executor view: per period and cluster, what is in force and when it next changes.

For an executor of any other kind (docs/reference: plan.json and the executor contract): each
period lists, per cluster, the projects' ``guaranteed_gpus`` and ``opportunistic_gpus`` (as
in ``allocations``), the reservations that run at some time in the period, and
``next_change``: the start of the first later period whose quotas or reservations on that
cluster differ (``null`` when nothing changes until the plan's end). ``ahead_of_pace``: the
projects ahead of their budget pace at ``as_of``, whose guaranteed work others may take back
once it has run the protected runtime (the executor contract's rule 5).
"""

from __future__ import annotations

from typing import Any

from planner.contract import InForce, ahead_of_pace, next_change, timeline
from planner.exporters.common import cluster_info

VIEW_VERSION = 1


def _cluster_state(terms: InForce, cluster: str) -> dict[str, Any]:
    quotas, reserved = terms.terms(cluster)
    return {"quotas": [{"project": q.project, "guaranteed_gpus": q.guaranteed_gpus,
                        "opportunistic_gpus": q.opportunistic_gpus} for q in quotas],
            "reservations": [{"request_id": r.request_id, "project": r.project,
                              "nodes": r.nodes, "gpus": r.gpus, "start": r.start,
                              "end": r.end} for r in reserved]}


def executor_view(plan: dict[str, Any]) -> dict[str, Any]:
    """Per period, per cluster: quotas and reservations in force, and the next change.

    Read from the executor contract (:func:`planner.contract.timeline`, one
    :class:`~planner.contract.InForce` per period; :func:`planner.contract.next_change`).
    """
    info = cluster_info(plan)
    clusters = sorted(info)
    views = timeline(plan)
    periods = []
    for t, p in enumerate(plan["periods"]):
        per_cluster = []
        for c in clusters:
            per_cluster.append({"cluster": c, "gpu_type": info[c]["gpu_type"],
                                "gpus": int(info[c]["nodes"]) * int(info[c]["gpus_per_node"]),
                                **_cluster_state(views[t], c),
                                "next_change": next_change(views, t, c)})
        periods.append({"start": p["start"], "end": p["end"], "clusters": per_cluster})
    return {"view_version": VIEW_VERSION, "scenario": plan["scenario"], "as_of": plan["as_of"],
            "input_digest": plan.get("input_digest", ""), "contract": plan.get("contract"),
            "ahead_of_pace": sorted(ahead_of_pace(plan)), "periods": periods}
