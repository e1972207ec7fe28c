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
- risks: each project's flags (:func:`planner.words.risk_flags`: overrun, unused budget,
  opportunistic-heavy), then the unplaced reservations;
- by week of the quarter (7-day weeks from ``quarter_start``, the last one short): spend
  per area (NGH), and per cluster the busy GPU-hours against capacity.

Two sources, used the same way everywhere: :func:`usage_so_far` (what ran, each job
clipped to ``[quarter_start, as_of)``) and :func:`grants` (what the plan grants from
``as_of``: elastic allocations spread evenly over their period, reservations clipped to
``as_of``). Spend charged to a budget is usage plus guaranteed and reserved grants, so a
project's weeks add up to its ``used + planned`` (the forecast); opportunistic grants are
beyond budget and shown apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from planner.inputs import Scenario
from planner.model.problem import overlap_hours
from planner.words import (
    OPPORTUNISTIC,
    OVER,
    UNDER,
    UNPLACED,
    number,
    percent,
    risk_flags,
    verdict,
)

__all__ = ["OVER", "UNDER", "Report", "build_report"]


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
    planned_opportunistic: float = 0.0  # beyond budget

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

    kind: str  # a flag of planner.words.RISKS: overrun, unused budget, …, unplaced
    subject: str  # project or request id
    detail: str


@dataclass(frozen=True)
class Week:
    """One week of the quarter: ``[start, end)``, 7 days from ``quarter_start`` (last short)."""

    number: int  # 1-based
    start: pd.Timestamp
    end: pd.Timestamp
    actual_share: float  # share of the week before as_of: 1 actual, 0 planned
    elapsed: float  # share of the quarter elapsed at the week's end

    @property
    def basis(self) -> str:
        """Where the week's figures come from: usage, the plan, or both around as_of."""
        if self.actual_share >= 1.0:
            return "actual"
        return "planned" if self.actual_share <= 0.0 else "actual, then planned"

    @property
    def label(self) -> str:
        """``W7 11-12``: number and start date."""
        return f"W{self.number} {self.start:%m-%d}"


@dataclass(frozen=True)
class AreaPace:
    """One area's spend by week (NGH): actual from usage, planned from the plan."""

    area: str
    budget: float
    actual: tuple[float, ...]  # usage in the week (before as_of)
    planned: tuple[float, ...]  # guaranteed + reserved grants in the week (after as_of)
    opportunistic: tuple[float, ...]  # opportunistic grants: beyond budget, not spend

    @property
    def spend(self) -> tuple[float, ...]:
        """Spend charged to the budget per week: actual + planned."""
        return tuple(a + p for a, p in zip(self.actual, self.planned, strict=True))

    @property
    def cumulative(self) -> tuple[float, ...]:
        """Spend to the end of each week; the last one is the area's forecast."""
        return tuple(float(x) for x in np.cumsum(self.spend))

    def pace(self, weeks: tuple[Week, ...]) -> tuple[float, ...]:
        """The even-pace budget line at each week's end: budget × elapsed share."""
        return tuple(self.budget * w.elapsed for w in weeks)


@dataclass(frozen=True)
class ClusterWeeks:
    """One cluster by week (GPU-hours), and its grants from as_of by kind."""

    cluster: str
    gpus: int
    capacity: tuple[float, ...]  # GPUs × hours of the week
    busy: tuple[float, ...]  # usage before as_of + all grants after
    guaranteed: float  # elastic, within budget, as_of → quarter end
    opportunistic: float  # elastic, beyond budget
    reserved: float  # whole-node reservations

    @property
    def utilization(self) -> tuple[float, ...]:
        """Busy ÷ capacity per week."""
        return tuple(b / c if c else 0.0 for b, c in zip(self.busy, self.capacity, strict=True))


@dataclass(frozen=True)
class Report:
    """Everything the report shows."""

    plan: dict[str, Any]
    quarter: str  # "2026 Q4"
    clusters: tuple[ClusterRow, ...]
    budget_rows: tuple[BudgetRow, ...]  # org tree, depth first, parents before children
    risks: tuple[Risk, ...]
    weeks: tuple[Week, ...]
    pacing: tuple[AreaPace, ...]  # areas in org order
    cluster_weeks: tuple[ClusterWeeks, ...]  # clusters in plan order

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


def _stamps(plan: dict[str, Any]) -> tuple[pd.Timestamp, pd.Timestamp, pd.Timestamp]:
    return tuple(pd.Timestamp(plan[k]) for k in ("as_of", "quarter_start", "quarter_end"))


GRANT_KINDS = ("guaranteed", "opportunistic", "reserved")


def grants(plan: dict[str, Any]) -> pd.DataFrame:
    """What the plan grants from as_of: project, cluster, kind, start, end, gpu_hours.

    Elastic allocations hold their period; reservations are clipped to ``[as_of, end of
    the last period)``, the stretch the plan's budgets count.
    """
    as_of = pd.Timestamp(plan["as_of"])
    period = {p["start"]: (pd.Timestamp(p["start"]), pd.Timestamp(p["end"]))
              for p in plan["periods"]}
    horizon_end = max((end for _, end in period.values()), default=as_of)
    gpn = {c["cluster"]: c["gpus_per_node"] for c in plan["clusters"]}
    rows = [(a["project"], a["cluster"], a["kind"], *period[a["period_start"]],
             float(a["gpu_hours"])) for a in plan["allocations"]]
    for r in plan["reservations"]:
        start = max(pd.Timestamp(r["start"]), as_of)
        end = min(pd.Timestamp(r["end"]), horizon_end)
        rows.append((r["project"], r["cluster"], "reserved", start, end,
                     r["nodes"] * gpn[r["cluster"]] * _hours(start, end)))
    frame = pd.DataFrame(rows, columns=["project", "cluster", "kind", "start", "end",
                                        "gpu_hours"])
    return frame[frame["end"] > frame["start"]].reset_index(drop=True)


def usage_so_far(plan: dict[str, Any], scenario: Scenario) -> pd.DataFrame:
    """What ran in the quarter so far: project, cluster, start, end, gpu_hours.

    Each usage job is clipped to ``[quarter_start, as_of)``; gpu_hours = GPUs × the
    clipped hours (the plan's ``used`` counts the same stretch).
    """
    as_of, q_start, q_end = _stamps(plan)
    usage = scenario.usage
    start = usage["start"].clip(lower=q_start)
    end = usage["end"].clip(upper=min(as_of, q_end))
    hours = ((end - start).dt.total_seconds() / 3600).clip(lower=0)
    frame = pd.DataFrame({"project": usage["project"], "cluster": usage["cluster"],
                          "start": start, "end": end,
                          "gpu_hours": usage["gpus"].astype(float) * hours})
    return frame[frame["gpu_hours"] > 0].reset_index(drop=True)


def cluster_rows(plan: dict[str, Any], granted: pd.DataFrame,
                 ran: pd.DataFrame) -> tuple[ClusterRow, ...]:
    """Capacity, planned and used GPU-hours per cluster (from grants and usage_so_far)."""
    as_of, q_start, _ = _stamps(plan)
    horizon = sum(_hours(pd.Timestamp(p["start"]), pd.Timestamp(p["end"]))
                  for p in plan["periods"])
    planned = granted.groupby("cluster")["gpu_hours"].sum()
    used = ran.groupby("cluster")["gpu_hours"].sum()
    elapsed = _hours(q_start, as_of)
    return tuple(ClusterRow(c["cluster"], c["gpu_type"], c["nodes"] * c["gpus_per_node"],
                            c["rate"], c["nodes"] * c["gpus_per_node"] * horizon,
                            float(planned.get(c["cluster"], 0.0)),
                            c["nodes"] * c["gpus_per_node"] * elapsed,
                            float(used.get(c["cluster"], 0.0)))
                 for c in plan["clusters"])


def weeks(plan: dict[str, Any]) -> tuple[Week, ...]:
    """The quarter's weeks: 7 days from ``quarter_start``, the last one ending at quarter end."""
    as_of, q_start, q_end = _stamps(plan)
    quarter = _hours(q_start, q_end)
    out = []
    start = q_start
    while start < q_end:
        end = min(start + pd.Timedelta(days=7), q_end)
        out.append(Week(len(out) + 1, start, end,
                        min(1.0, _hours(start, as_of) / _hours(start, end)),
                        _hours(q_start, end) / quarter))
        start = end
    return tuple(out)


def by_week(frame: pd.DataFrame, weeks_: tuple[Week, ...]) -> np.ndarray:
    """Each row's ``gpu_hours`` spread evenly over its ``[start, end)``: (rows, weeks)."""
    if frame.empty:
        return np.zeros((0, len(weeks_)))
    naive = [np.array([getattr(w, k).tz_convert(None).to_datetime64() for w in weeks_],
                      dtype="datetime64[s]") for k in ("start", "end")]
    hours = overlap_hours(frame["start"].dt.tz_convert(None), frame["end"].dt.tz_convert(None),
                          *naive)
    length = ((frame["end"] - frame["start"]).dt.total_seconds() / 3600).to_numpy()
    return hours * (frame["gpu_hours"].to_numpy() / length)[:, None]


def _per_key(keys: pd.Series, values: np.ndarray, order: list[str]) -> np.ndarray:
    """Rows of ``values`` summed by ``keys``, in ``order`` (missing keys: zeros)."""
    summed = pd.DataFrame(values).groupby(keys.to_numpy()).sum()
    return summed.reindex(order, fill_value=0.0).to_numpy(dtype=float)


def project_weeks(plan: dict[str, Any], bins: tuple[Week, ...], granted: pd.DataFrame,
                  ran: pd.DataFrame, projects: list[str]) -> dict[str, np.ndarray]:
    """NGH per project and bin: ``actual``, ``planned`` and ``opportunistic``.

    ``actual`` is usage, ``planned`` guaranteed + reserved grants, each (projects, bins)
    in ``projects`` order. ``bins``: the quarter's weeks (:func:`weeks`) or any other
    ``[start, end)`` runs.
    """
    rate = {c["cluster"]: c["rate"] for c in plan["clusters"]}
    charged = granted["kind"] != "opportunistic"
    out = {}
    for name, frame in (("actual", ran), ("planned", granted[charged]),
                        ("opportunistic", granted[~charged])):
        ngh = by_week(frame, bins) * frame["cluster"].map(rate).to_numpy(dtype=float)[:, None]
        out[name] = _per_key(frame["project"], ngh, projects)
    return out


def pacing(plan: dict[str, Any], scenario: Scenario, rows: tuple[BudgetRow, ...],
           weeks_: tuple[Week, ...], granted: pd.DataFrame,
           ran: pd.DataFrame) -> tuple[AreaPace, ...]:
    """Spend per area by week in NGH: usage, then guaranteed + reserved, and opportunistic."""
    tree = scenario.tree
    area_of = {node: tree.ids[a] for node, a in zip(tree.ids, tree.area, strict=True)}
    areas = [r.node for r in rows if r.depth == 0]
    projects = [b["project"] for b in plan["budgets"]]
    by_project = project_weeks(plan, weeks_, granted, ran, projects)
    keys = pd.Series([area_of.get(p, p) for p in projects])
    out = {k: _per_key(keys, v, areas) for k, v in by_project.items()}
    budget = {r.node: r.budget for r in rows if r.depth == 0}
    return tuple(AreaPace(a, budget[a], *(tuple(float(x) for x in out[k][i])
                                         for k in ("actual", "planned", "opportunistic")))
                 for i, a in enumerate(areas))


def cluster_weeks(plan: dict[str, Any], weeks_: tuple[Week, ...], granted: pd.DataFrame,
                  ran: pd.DataFrame) -> tuple[ClusterWeeks, ...]:
    """Busy GPU-hours and capacity per cluster and week; grants from as_of by kind."""
    names = [c["cluster"] for c in plan["clusters"]]
    busy = sum(_per_key(f["cluster"], by_week(f, weeks_), names) for f in (ran, granted))
    kinds = granted.pivot_table(index="cluster", columns="kind", values="gpu_hours",
                                aggfunc="sum").reindex(index=names, columns=list(GRANT_KINDS))
    kinds = kinds.fillna(0.0)
    out = []
    for i, c in enumerate(plan["clusters"]):
        gpus = c["nodes"] * c["gpus_per_node"]
        out.append(ClusterWeeks(c["cluster"], gpus,
                                tuple(gpus * _hours(w.start, w.end) for w in weeks_),
                                tuple(float(x) for x in busy[i]),
                                *(float(kinds.at[c["cluster"], k]) for k in GRANT_KINDS)))
    return tuple(out)


def budget_rows(plan: dict[str, Any], scenario: Scenario) -> tuple[BudgetRow, ...]:
    """The org tree as rows, depth first, with NGH summed up from the plan's projects."""
    tree = scenario.tree
    sums = tree.sum_up((b["project"], (b["budget"], b["used"], b["planned"],
                                       b["planned_opportunistic"]))
                       for b in plan["budgets"])
    rows: list[BudgetRow] = []
    for depth, node in tree.preorder():  # depth first, children in org order; any depth
        budget, used_, planned, opportunistic = sums.get(node, (0.0, 0.0, 0.0, 0.0))
        kids = tree.children_of(node)
        rows.append(BudgetRow(node, depth, not kids, tree.weight_of(node), budget, used_,
                              planned, kids, opportunistic))
    return tuple(rows)


def risks(plan: dict[str, Any], rows: tuple[BudgetRow, ...]) -> tuple[Risk, ...]:
    """Each project's flags (:func:`planner.words.risk_flags`), then unplaced reservations."""
    out = []
    for r in rows:
        if not r.is_project:
            continue
        for flag in risk_flags(r.budget, r.forecast, r.planned_opportunistic):
            if flag == OPPORTUNISTIC:
                detail = (f"plans {number(r.planned_opportunistic)} NGH opportunistic, "
                          f"{percent(r.planned_opportunistic / r.budget)} of its budget "
                          f"{number(r.budget)}")
            elif r.budget:
                detail = (f"forecast {number(r.forecast)} NGH is {percent(r.share)} of "
                          f"{number(r.budget)}")
            else:
                detail = f"forecast {number(r.forecast)} NGH without a budget"
            out.append(Risk(flag, r.node, detail))
    out += [Risk(UNPLACED, u["request_id"], f"{u['project']}: {u['reason']}")
            for u in plan["unplaced"]]
    return tuple(out)


def build_report(plan: dict[str, Any], scenario: Scenario) -> Report:
    """The report's content from a plan and the scenario it was planned from."""
    rows = budget_rows(plan, scenario)
    weeks_ = weeks(plan)
    granted, ran = grants(plan), usage_so_far(plan, scenario)
    return Report(plan, quarter_label(pd.Timestamp(plan["quarter_start"])),
                  cluster_rows(plan, granted, ran), rows, risks(plan, rows), weeks_,
                  pacing(plan, scenario, rows, weeks_, granted, ran),
                  cluster_weeks(plan, weeks_, granted, ran))


def report_verdict(report: Report) -> str:
    """The report's one-sentence verdict (:func:`planner.words.verdict`)."""
    flags: dict[str, int] = {}
    for risk in report.risks:
        flags[risk.kind] = flags.get(risk.kind, 0) + 1
    return verdict(report.quarter, report.plan["as_of"], report.total("budget"),
                   report.total("forecast"), flags, len(report.projects),
                   len(report.plan["unplaced"]))
