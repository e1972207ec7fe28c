"""What the quarterly report says, computed once from the plan and the scenario.

Both renderers (:mod:`planner.reports.workbook`, :mod:`planner.reports.html`) take a
:class:`Report`; nothing here reads or writes files. Units: GPU-hours (``gpu_h``) and
normalized GPU-hours (``ngh`` = GPU-hours × the GPU type's rate).

- capacity per cluster over the plan's horizon (``as_of`` → quarter end) and what the
  plan grants there (guaranteed + opportunistic elastic GPU-hours + reserved nodes);
- usage per cluster in the quarter so far (``quarter_start`` → ``as_of``) against the
  capacity of that stretch;
- per org node (areas, teams, projects): budget, used, planned, forecast = used +
  planned, all NGH, from the plan's ``budgets`` rows summed up the org tree;
- risks: projects forecast over :data:`OVER` or under :data:`UNDER` of their budget,
  and the unplaced reservations.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import pandas as pd

from planner.inputs import Scenario

OVER = 1.0  # forecast above this share of the budget: overrun risk
UNDER = 0.8  # forecast below this share of the budget: budget left unused


@dataclass(frozen=True)
class ClusterRow:
    """Capacity and utilization of one cluster (GPU-hours; NGH = × rate)."""

    cluster: str
    gpu_type: str
    gpus: int
    rate: float
    capacity_gpu_h: float  # as_of → quarter end
    planned_gpu_h: float  # granted over the same horizon (elastic + reserved)
    elapsed_capacity_gpu_h: float  # quarter_start → as_of
    used_gpu_h: float  # usage over the same stretch

    @property
    def planned_share(self) -> float:
        """Planned utilization of the horizon's capacity."""
        return self.planned_gpu_h / self.capacity_gpu_h if self.capacity_gpu_h else 0.0

    @property
    def used_share(self) -> float:
        """Utilization of the quarter so far."""
        return self.used_gpu_h / self.elapsed_capacity_gpu_h if self.elapsed_capacity_gpu_h \
            else 0.0


@dataclass(frozen=True)
class BudgetRow:
    """One org node: its place in the tree and its NGH figures (subtree sums)."""

    node: str
    depth: int  # 0 = area
    is_project: bool
    weight: float
    budget: float
    used: float
    planned: float
    children: tuple[str, ...]  # child node ids, in org order

    @property
    def forecast(self) -> float:
        """Forecast end-of-quarter spend: used + planned."""
        return self.used + self.planned

    @property
    def share(self) -> float | None:
        """Forecast ÷ budget (``None`` without a budget)."""
        return self.forecast / self.budget if self.budget else None


@dataclass(frozen=True)
class Risk:
    """A headline risk: a project's forecast out of bounds, or an unplaced reservation."""

    kind: str  # "overrun", "unused budget", "unplaced"
    subject: str  # project or request id
    detail: str


@dataclass(frozen=True)
class Report:
    """Everything the report shows."""

    plan: dict[str, Any]
    quarter: str  # "2026 Q4"
    clusters: tuple[ClusterRow, ...]
    budget_rows: tuple[BudgetRow, ...]  # org tree, depth first, parents before children
    risks: tuple[Risk, ...]

    @property
    def areas(self) -> tuple[BudgetRow, ...]:
        """The top-level rows."""
        return tuple(r for r in self.budget_rows if r.depth == 0)

    @property
    def projects(self) -> tuple[BudgetRow, ...]:
        """The project (leaf) rows."""
        return tuple(r for r in self.budget_rows if r.is_project)

    def total(self, attr: str) -> float:
        """A column summed over the projects."""
        return float(sum(getattr(r, attr) for r in self.projects))


def quarter_label(start: pd.Timestamp) -> str:
    """``2026 Q4`` for a quarter starting in October 2026."""
    return f"{start.year} Q{(start.month - 1) // 3 + 1}"


def _hours(a: pd.Timestamp, b: pd.Timestamp) -> float:
    return max(0.0, (b - a).total_seconds() / 3600)


def cluster_rows(plan: dict[str, Any], scenario: Scenario) -> tuple[ClusterRow, ...]:
    """Capacity, planned and used GPU-hours per cluster."""
    as_of, q_start, q_end = (pd.Timestamp(plan[k]) for k in ("as_of", "quarter_start",
                                                               "quarter_end"))
    horizon = sum(_hours(pd.Timestamp(p["start"]), pd.Timestamp(p["end"]))
                  for p in plan["periods"])
    planned: dict[str, float] = defaultdict(float)
    for a in plan["allocations"]:
        planned[a["cluster"]] += a["gpu_hours"]
    gpn = {c["cluster"]: c["gpus_per_node"] for c in plan["clusters"]}
    for r in plan["reservations"]:
        hours = _hours(max(pd.Timestamp(r["start"]), as_of), pd.Timestamp(r["end"]))
        planned[r["cluster"]] += r["nodes"] * gpn[r["cluster"]] * hours
    used: dict[str, float] = defaultdict(float)
    usage = scenario.usage
    if not usage.empty:
        start = usage["start"].clip(lower=q_start)
        end = usage["end"].clip(upper=min(as_of, q_end))
        hours = ((end - start).dt.total_seconds() / 3600).clip(lower=0)
        for cluster, value in (usage["gpus"] * hours).groupby(usage["cluster"]).sum().items():
            used[str(cluster)] = float(value)
    elapsed = _hours(q_start, as_of)
    return tuple(ClusterRow(c["cluster"], c["gpu_type"], c["nodes"] * c["gpus_per_node"],
                            c["rate"], c["nodes"] * c["gpus_per_node"] * horizon,
                            planned[c["cluster"]], c["nodes"] * c["gpus_per_node"] * elapsed,
                            used[c["cluster"]])
                 for c in plan["clusters"])


def budget_rows(plan: dict[str, Any], scenario: Scenario) -> tuple[BudgetRow, ...]:
    """The org tree as rows, depth first, with NGH summed up from the plan's projects."""
    org = scenario.org
    children: dict[str, list[str]] = defaultdict(list)
    parent = {}
    weight = {}
    for node, up, w in zip(org["id"], org["parent"], org["weight"], strict=True):
        children[up].append(node)
        parent[node] = up
        weight[node] = float(w)
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for b in plan["budgets"]:
        node = b["project"]
        while True:
            acc = sums[node]
            acc[0] += b["budget"]
            acc[1] += b["used"]
            acc[2] += b["planned"]
            node = parent.get(node, "")
            if not node:
                break
    rows: list[BudgetRow] = []

    def walk(up: str, depth: int) -> None:
        for node in children.get(up, []):
            budget, used_, planned = sums[node]
            kids = tuple(children.get(node, ()))
            rows.append(BudgetRow(node, depth, not kids, weight[node], budget, used_, planned,
                                  kids))
            walk(node, depth + 1)

    walk("", 0)
    return tuple(rows)


def risks(plan: dict[str, Any], rows: tuple[BudgetRow, ...]) -> tuple[Risk, ...]:
    """Projects forecast over or under budget, then the unplaced reservations."""
    out = []
    for r in rows:
        if not r.is_project or r.share is None:
            continue
        if r.share > OVER + 1e-9:
            out.append(Risk("overrun", r.node, f"forecast {r.forecast:,.0f} NGH is "
                                               f"{100 * r.share:.0f} % of {r.budget:,.0f}"))
        elif r.share < UNDER:
            out.append(Risk("unused budget", r.node, f"forecast {r.forecast:,.0f} NGH is "
                                                     f"{100 * r.share:.0f} % of {r.budget:,.0f}"))
    out += [Risk("unplaced", u["request_id"], f"{u['project']}: {u['reason']}")
            for u in plan["unplaced"]]
    return tuple(out)


def build_report(plan: dict[str, Any], scenario: Scenario) -> Report:
    """The report's content from a plan and the scenario it was planned from."""
    rows = budget_rows(plan, scenario)
    return Report(plan, quarter_label(pd.Timestamp(plan["quarter_start"])),
                  cluster_rows(plan, scenario), rows, risks(plan, rows))
