"""The human summary of a plan: per area and team, budget, used, planned, contended share.

Takes only the plan and the org tree; returns text (the CLI prints it).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pandas as pd

from planner.inputs.org import OrgTree
from planner.words import ngh_definition, number, percent, plan_rates


def period_tiers(plan: dict[str, Any]) -> list[tuple[int, float]]:
    """The plan's periods as runs of equal length: [(count, hours), …] in grid order."""
    tiers: list[tuple[int, float]] = []
    for period in plan["periods"]:
        hours = (pd.Timestamp(period["end"]) - pd.Timestamp(period["start"])) / pd.Timedelta(
            hours=1)
        if tiers and tiers[-1][1] == hours:
            tiers[-1] = (tiers[-1][0] + 1, hours)
        else:
            tiers.append((1, hours))
    return tiers


def describe_periods(plan: dict[str, Any]) -> str:
    """``46 periods of 24 h``; on a mixed grid ``92 periods (48 of 1 h, 44 of 24 h)``.

    A grid is described as uniform when every period but the last is ``period_hours``
    long (the last may be cut short, or lengthened by under an hour, at quarter end).
    """
    count = len(plan["periods"])
    tiers = period_tiers(plan)
    step = float(plan["period_hours"])
    if len(tiers) <= 1 or (len(tiers) == 2 and tiers[1][0] == 1 and tiers[0][1] == step
                           and tiers[1][1] < step + 1):
        return f"{count} periods of {plan['period_hours']:g} h"
    return f"{count} periods ({', '.join(f'{n} of {h:g} h' for n, h in tiers)})"


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
        f"plan for {plan['scenario']} from {plan['as_of']} ({describe_periods(plan)}), "
        f"model {plan['model']}",
        f"solver {solver['name']}: {solver['status']}, gap {100 * solver['mip_gap']:.3f} %"
        + (f"; {timings}" if timings else ""),
        "",
        f"{'area / team':<36}{'budget NGH':>14}{'used':>12}{'planned':>12}{'forecast %':>11}"
        f"{'contended':>11}",
    ]
    for depth, node in order:
        budget, used, planned, contended = rows.get(node, (0.0, 0.0, 0.0, 0.0))
        key = "  " * depth + node
        pct = percent((used + planned) / budget if budget else 0.0)
        lines.append(f"{key:<36}{number(budget):>14}{number(used):>12}{number(planned):>12}"
                     f"{pct:>11}{percent(contended):>11}")
    placed, unplaced = plan["reservations"], plan["unplaced"]
    lines += ["", f"reservations: {len(placed)} placed, {len(unplaced)} unplaced"]
    lines += [f"  {u['request_id']} ({u['project']}): {u['reason']}" for u in unplaced]
    lines += ["", "forecast % = (used + planned) ÷ budget; contended = the share of the "
              "GPU-hours granted where some demand waits (cluster-periods whose demand "
              "exceeds what was granted)", ngh_definition(plan_rates(plan))]
    return "\n".join(lines) + "\n"

