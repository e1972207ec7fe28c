"""The plan in force, ``sshare``-like: ``planner status``.

Per project (org order), from the plan and the scenario's usage, no solver:

- *granted now*: GPUs in the plan's first period, guaranteed + opportunistic elastic
  (GPU-hours ÷ period hours) + GPUs of its reservations running at ``as_of``;
- *entitled*: the guaranteed part of that (guaranteed elastic + reserved GPUs);
- *running*: GPUs of the usage rows running at ``as_of`` — those whose ``[start, end)``
  covers it, or, when ``usage.csv`` has a ``state`` column (``planner ingest``), rows
  marked ``running`` that started by then;
- *headroom* = entitled − running (negative: running beyond its guarantee);
- *forecast* = used + planned (NGH) against the budget, and its share;
- risk flags: :func:`planner.words.risk_flags`, the one vocabulary every output uses
  (``overrun``, ``unused budget``, ``opportunistic-heavy``), explained by a legend under
  the table; figures rounded as :func:`planner.words.number` rounds them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from planner.contract import in_force
from planner.inputs import Scenario
from planner.plan.build import num
from planner.words import (
    OPPORTUNISTIC,
    OVERRUN,
    PROJECT_RISKS,
    UNUSED,
    legend_lines,
    ngh_definition,
    number,
    percent,
    plan_rates,
    risk_flags,
)

__all__ = ["OPPORTUNISTIC", "OVERRUN", "UNUSED", "Status", "StatusRow", "plan_status",
           "running_gpus", "status_lines"]


@dataclass(frozen=True)
class StatusRow:
    """One project's line (GPUs now; NGH over the quarter)."""

    project: str
    path: tuple[str, ...]  # top-level node … project
    granted_gpus: float
    entitled_gpus: float
    opportunistic_gpus: float
    running_gpus: float
    headroom_gpus: float
    budget: float
    used: float
    planned: float
    planned_opportunistic: float
    forecast: float
    forecast_share: float | None  # forecast ÷ budget; None without a budget
    flags: tuple[str, ...]


@dataclass(frozen=True)
class Status:
    """The status table of a plan."""

    scenario: str
    as_of: str
    period_start: str
    period_end: str
    rows: tuple[StatusRow, ...]
    rates: dict[str, float]  # GPU type → NGH rate

    def as_json(self) -> dict[str, Any]:
        """JSON-ready data."""
        return asdict(self)


def running_gpus(scenario: Scenario, as_of: pd.Timestamp) -> dict[str, float]:
    """GPUs running at ``as_of`` per project, from the scenario's usage."""
    usage = scenario.usage
    if usage.empty:
        return {}
    running = (usage["start"] <= as_of) & (usage["end"] > as_of)
    if "state" in usage.columns:
        running |= (usage["state"].astype(str) == "running") & (usage["start"] <= as_of)
    return {str(p): float(g) for p, g in
            usage[running].groupby("project")["gpus"].sum().items()}


def plan_status(plan: dict[str, Any], scenario: Scenario) -> Status:
    """The status of ``plan`` (planned from ``scenario``) at its ``as_of``."""
    as_of = pd.Timestamp(plan["as_of"])
    first = plan["periods"][0]
    terms = in_force(plan, plan["as_of"])  # the executor contract at as_of
    guaranteed: dict[str, float] = {}
    opportunistic: dict[str, float] = {}
    for q in terms.quotas:
        guaranteed[q.project] = guaranteed.get(q.project, 0.0) + q.guaranteed_gpus
        opportunistic[q.project] = opportunistic.get(q.project, 0.0) + q.opportunistic_gpus
    reserved: dict[str, float] = {}
    for r in terms.reservations:
        reserved[r.project] = reserved.get(r.project, 0.0) + r.gpus
    running = running_gpus(scenario, as_of)
    tree = scenario.tree
    rows = []
    for b in plan["budgets"]:
        p = b["project"]
        path = tree.path(p) if p in tree else (p,)
        entitled = guaranteed.get(p, 0.0) + reserved.get(p, 0.0)
        opp = opportunistic.get(p, 0.0)
        forecast = b["used"] + b["planned"]
        rows.append(StatusRow(
            p, path, num(entitled + opp), num(entitled), num(opp),
            num(running.get(p, 0.0)), num(entitled - running.get(p, 0.0)), b["budget"],
            b["used"], b["planned"], b["planned_opportunistic"], num(forecast),
            num(forecast / b["budget"]) if b["budget"] else None,
            risk_flags(b["budget"], forecast, b["planned_opportunistic"])))
    return Status(plan["scenario"], plan["as_of"], first["start"], first["end"], tuple(rows),
                  plan_rates(plan))


def status_lines(status: Status) -> list[str]:
    """The table as fixed-width text lines (GPUs now, NGH for the quarter).

    Then the flags' counts, the legend of the flags and what NGH is.
    """
    width = max([len("project"), *(len(r.project) for r in status.rows)]) + 2
    lines = [f"plan for {status.scenario} as of {status.as_of}: GPUs in "
             f"{status.period_start} → {status.period_end}; NGH to quarter end", "",
             f"{'project':<{width}}{'granted':>9}{'entitled':>9}{'running':>9}{'headroom':>9}"
             f"{'budget NGH':>12}{'used':>10}{'planned':>10}{'forecast':>10}{'%':>9}  flags"]
    for r in status.rows:
        share = percent(r.forecast_share) if r.forecast_share is not None else ""
        lines.append(f"{r.project:<{width}}{number(r.granted_gpus, 1):>9}"
                     f"{number(r.entitled_gpus, 1):>9}{number(r.running_gpus, 1):>9}"
                     f"{number(r.headroom_gpus, 1):>9}{number(r.budget):>12}"
                     f"{number(r.used):>10}{number(r.planned):>10}{number(r.forecast):>10}"
                     f"{share:>9}  {', '.join(r.flags)}".rstrip())
    counts = ", ".join(f"{sum(name in r.flags for r in status.rows)} {name}"
                       for name in PROJECT_RISKS)
    lines += ["", f"{len(status.rows)} projects: {counts}", "",
              "flags:", *(f"  {line}" for line in legend_lines(PROJECT_RISKS)),
              "GPUs: granted = entitled (guaranteed + reserved) + opportunistic, in the first "
              "period; headroom = entitled − running",
              ngh_definition(status.rates)]
    return lines
