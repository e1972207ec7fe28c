"""Refuse plans an exporter cannot translate faithfully, before anything is written."""

from __future__ import annotations

from typing import Any

import pandas as pd

from planner.errors import InputProblem


def export_problems(plan: dict[str, Any], label: str, org: pd.DataFrame | None = None
                    ) -> list[InputProblem]:
    """Problems of a schema-valid plan: clusters and projects the plan does not define.

    ``label`` names the plan file in each message; with ``org``, every project the plan
    grants anything must be a node of the org tree.
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
    return problems
