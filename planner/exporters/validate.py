"""Refuse plans an exporter cannot translate faithfully, before anything is written."""

from __future__ import annotations

from typing import Any

import pandas as pd

from planner.errors import InputProblem
from planner.inputs.labels import key_problem, node_selector, selector_overlaps, value_problem
from planner.inputs.targets import partition_problem


def export_problems(plan: dict[str, Any], label: str, org: pd.DataFrame | None = None,
                    target: str | None = None) -> list[InputProblem]:
    """Problems of a schema-valid plan: clusters and projects the plan does not define.

    ``label`` names the plan file in each message; with ``org``, every project the plan
    grants anything must be a node of the org tree. With ``target``, what that executor
    cannot carry: for ``slurm`` cluster ids that are not partition names, for ``kueue``
    node labels that are not Kubernetes labels and clusters whose node selectors are equal
    or one inside another (their flavors would select the same nodes).
    """
    problems: list[InputProblem] = []
    if "clusters" not in plan:
        return [InputProblem(label, None, "clusters",
                             "the plan lists no clusters; exporters need their GPU types and "
                             "node sizes (re-run `planner run`)")]
    known = {c["cluster"] for c in plan["clusters"]}
    for field in ("allocations", "reservations"):
        for i, item in enumerate(plan[field]):
            if item["cluster"] not in known:
                problems.append(InputProblem(
                    label, None, f"{field}/{i}/cluster",
                    f"unknown cluster {item['cluster']!r} (the plan's clusters: "
                    f"{', '.join(sorted(known))})"))
    if org is not None:
        ids = {str(i) for i in org["id"]}
        for field in ("allocations", "reservations", "budgets"):
            for i, item in enumerate(plan[field]):
                if item["project"] not in ids:
                    problems.append(InputProblem(
                        label, None, f"{field}/{i}/project",
                        f"project {item['project']!r} is not in the scenario's org tree"))
    if target == "slurm":
        problems += slurm_problems(plan, label)
    elif target == "kueue":
        problems += kueue_problems(plan, label)
    return problems


def slurm_problems(plan: dict[str, Any], label: str) -> list[InputProblem]:
    """Cluster ids Slurm cannot take as partition names (the script names them verbatim)."""
    problems = []
    for i, c in enumerate(plan["clusters"]):
        problem = partition_problem(c["cluster"])
        if problem is not None:
            problems.append(InputProblem(label, None, f"clusters/{i}/cluster", problem))
    return problems


def kueue_problems(plan: dict[str, Any], label: str) -> list[InputProblem]:
    """Node labels that are not Kubernetes labels; clusters selecting the same nodes."""
    problems = []
    selectors, position = {}, {}
    for i, c in enumerate(plan["clusters"]):
        bad = [p for k, v in (c.get("node_labels") or {}).items()
               if (p := key_problem(k) or value_problem(v)) is not None]
        problems += [InputProblem(label, None, f"clusters/{i}/node_labels", p) for p in bad]
        if not bad:
            selectors[c["cluster"]] = node_selector(c["cluster"], c["gpu_type"],
                                                    c.get("node_labels"))
            position[c["cluster"]] = i
    for a, b in selector_overlaps(selectors):
        shown = ", ".join(f"{k}={v}" for k, v in selectors[b])
        problems.append(InputProblem(
            label, None, f"clusters/{position[b]}/node_labels",
            f"cluster {b!r} selects nodes by labels equal to or overlapping those of cluster "
            f"{a!r} ({shown}): their Kueue flavors would share nodes; give each cluster "
            "node_labels in clusters.csv that no other cluster's nodes carry, and re-plan"))
    return problems
