"""The human summary of a plan: per area and team, budget, used, planned, contended share.

Takes only the plan and the org tree; returns text (the CLI prints it).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pandas as pd

from planner.inputs.org import OrgTree


def contended_share(plan: dict[str, Any], demand_total: dict[tuple[str, str], float]
                    ) -> dict[str, float]:
    """Each project's share of GPU-hours granted in contended cluster-periods.

    ``demand_total`` maps (cluster, period_start) to total demand; a cell is contended
    when its demand exceeds what was granted there.
    """
    granted = defaultdict(float)
    by_project = defaultdict(float)
    for a in plan["allocations"]:
        granted[(a["cluster"], a["period_start"])] += a["gpu_hours"]
    contended = {cell for cell, g in granted.items() if demand_total.get(cell, 0.0) > g + 1e-6}
    total = 0.0
    for a in plan["allocations"]:
        if (a["cluster"], a["period_start"]) in contended:
            by_project[a["project"]] += a["gpu_hours"]
            total += a["gpu_hours"]
    return {p: v / total for p, v in by_project.items()} if total else {}


def summary_text(plan: dict[str, Any], org: OrgTree | pd.DataFrame,
                 demand_total: dict[tuple[str, str], float], timings: str = "") -> str:
    """A fixed-width table by area and team, then unplaced reservations.

    ``org``: the scenario's tree (``scenario.tree``), or its ``org`` table, built into one.
    """
    tree = org if isinstance(org, OrgTree) else OrgTree.from_frame(org)
    share = contended_share(plan, demand_total)
    rows = tree.sum_up((b["project"], (b["budget"], b["used"], b["planned"],
                                       share.get(b["project"], 0.0)))
                       for b in plan["budgets"])
    # internal nodes only (areas and teams), depth first, children in org order
    order = [(depth, node) for depth, node in tree.preorder() if not tree.is_project(node)]
    solver = plan["solver"]
    lines = [
        f"plan for {plan['scenario']} from {plan['as_of']} ({len(plan['periods'])} periods of "
        f"{plan['period_hours']:g} h), model {plan['model']}",
        f"solver {solver['name']}: {solver['status']}, gap {100 * solver['mip_gap']:.3f} %"
        + (f"; {timings}" if timings else ""),
        "",
        f"{'area / team':<36}{'budget NGH':>14}{'used':>12}{'planned':>12}{'forecast %':>11}"
        f"{'contended':>11}",
    ]
    for depth, node in order:
        budget, used, planned, contended = rows.get(node, (0.0, 0.0, 0.0, 0.0))
        key = "  " * depth + node
        pct = 100 * (used + planned) / budget if budget else 0.0
        lines.append(f"{key:<36}{budget:>14,.0f}{used:>12,.0f}{planned:>12,.0f}{pct:>10.1f}%"
                     f"{100 * contended:>10.1f}%")
    placed, unplaced = plan["reservations"], plan["unplaced"]
    lines += ["", f"reservations: {len(placed)} placed, {len(unplaced)} unplaced"]
    lines += [f"  {u['request_id']} ({u['project']}): {u['reason']}" for u in unplaced]
    return "\n".join(lines) + "\n"

