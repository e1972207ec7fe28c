"""One kept cycle's figures for the dashboard, computed once with the library's functions.

Nothing here is a second implementation: the project rows are :func:`planner.status.
plan_status`'s, the org tree's sums and the weeks are :mod:`planner.reports.content`'s,
the explanations :mod:`planner.explain`'s, the flags and words :mod:`planner.words`'. So
``status``, ``explain``, the workbook, the HTML report and the dashboard agree on every
figure and flag (``tests/test_words.py`` compares them).

The expensive parts (the explain context, the calendar of grants) are built on first use
and kept for the life of the view; a view is replaced when ``current`` moves.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from planner.contract import in_force, unbudgeted_ngh
from planner.cycle import cycle_inputs
from planner.errors import InputError
from planner.inputs import Scenario
from planner.reports.content import (
    Report,
    Week,
    build_report,
    grants,
    project_weeks,
    report_verdict,
    usage_so_far,
)
from planner.serve.state import Kept, read_plan
from planner.status import Status, plan_status
from planner.words import PROJECT_RISKS, ngh_definition, plan_rates

HISTORY_DAYS_AFTER = 14  # the usage chart shows the plan this many days past as_of


@dataclass(frozen=True)
class NodeLine:
    """One org node on the Org page: its NGH figures (subtree sums) and its flags."""

    node: str
    depth: int
    kind: str  # "area", "team" or "project"
    budget: float
    used: float
    planned: float
    forecast: float
    share: float | None  # forecast ÷ budget
    pace: float  # even pace by now: budget × the share of the quarter elapsed at as_of
    flags: tuple[str, ...]  # a project's flags; for areas and teams, none
    flag_counts: dict[str, int]  # projects below carrying each flag (areas and teams)
    granted_gpus: float | None  # a project's GPUs now (guaranteed + opportunistic + reserved)
    running_gpus: float | None


@dataclass(frozen=True)
class StartBy:
    """When an N-GPU job of a project, submitted at as_of, would start under the plan."""

    gpus: int
    cluster: str | None  # the cluster where it starts first; None: not in this plan
    start: str | None  # the period start (ISO)
    entitled: float  # the project's entitled GPUs there in that period
    running: float  # its GPUs running there now (counted against the first period)


@dataclass
class CycleView:
    """A kept cycle's plan, scenario and everything the pages show of them."""

    kept: Kept
    plan: dict[str, Any]
    scenario: Scenario | None
    problem: str | None = None  # why the scenario is missing (old folder, bad inputs)
    #: project -> NGH it ran charged to no budget by as_of (the inputs' ``unbudgeted.csv``)
    unbudgeted: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _explained: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, kept: Kept) -> CycleView:
        """Read the folder's plan and its ``inputs/`` scenario (checked by digest).

        And the ``unbudgeted.csv`` kept with them, from the same read of ``inputs/``.
        """
        plan = read_plan(kept.folder)
        try:
            loaded = cycle_inputs(kept.folder)
        except InputError as error:
            return cls(kept, plan, None, f"its inputs/ do not load: {error.problems[0]}")
        if loaded is None:
            return cls(kept, plan, None, "this cycle was kept before cycles kept their "
                                         "inputs (no inputs/ folder)")
        scenario, unbudgeted = loaded
        if scenario.digest != plan.get("input_digest"):
            return cls(kept, plan, None, "its inputs/ are not the inputs the plan was made "
                                         "from (input_digest differs)")
        return cls(kept, plan, scenario, unbudgeted=unbudgeted_ngh(plan, unbudgeted))

    # ------------------------------------------------------------------ plan-only facts

    @property
    def name(self) -> str:
        """The folder name (``2026-11-16T00-00-00Z``)."""
        return self.kept.name

    @property
    def ngh(self) -> str:
        """What NGH means, with this plan's rates."""
        return ngh_definition(plan_rates(self.plan))

    @property
    def usable(self) -> bool:
        """Whether the scenario is here, so every page can be drawn."""
        return self.scenario is not None

    # ------------------------------------------------------------------ computed once

    @cached_property
    def status(self) -> Status:
        """``planner status`` of this plan."""
        assert self.scenario is not None
        return plan_status(self.plan, self.scenario)

    @cached_property
    def report(self) -> Report:
        """The quarterly report's content (org sums, weeks, pacing, risks)."""
        assert self.scenario is not None
        return build_report(self.plan, self.scenario)

    @cached_property
    def verdict(self) -> str:
        """The quarter's one-sentence verdict."""
        return report_verdict(self.report)

    @cached_property
    def elapsed(self) -> float:
        """The share of the quarter elapsed at as_of."""
        plan = self.plan
        start, end = pd.Timestamp(plan["quarter_start"]), pd.Timestamp(plan["quarter_end"])
        return float((pd.Timestamp(plan["as_of"]) - start) / (end - start))

    @cached_property
    def lines(self) -> tuple[NodeLine, ...]:
        """The org tree, depth first, with figures and flags."""
        rows = {r.project: r for r in self.status.rows}
        tree = self.scenario.tree
        out = []
        for r in self.report.budget_rows:
            flags: tuple[str, ...] = ()
            counts: dict[str, int] = {}
            granted = running = None
            if r.is_project:
                flags = rows[r.node].flags
                granted, running = rows[r.node].granted_gpus, rows[r.node].running_gpus
            else:
                for p in tree.leaves_under(r.node):
                    for flag in rows[p].flags:
                        counts[flag] = counts.get(flag, 0) + 1
            kind = "project" if r.is_project else "area" if r.depth == 0 else "team"
            out.append(NodeLine(r.node, r.depth, kind, r.budget, r.used, r.planned,
                                r.forecast, r.share, r.budget * self.elapsed, flags,
                                {k: counts[k] for k in PROJECT_RISKS if k in counts},
                                granted, running))
        return tuple(out)

    @cached_property
    def line_of(self) -> dict[str, NodeLine]:
        """Node id → its line."""
        return {line.node: line for line in self.lines}

    @cached_property
    def _spend(self) -> tuple[list[str], dict[str, np.ndarray]]:
        """Per node (tree order) and week: actual, planned and opportunistic NGH."""
        plan, tree = self.plan, self.scenario.tree
        granted, ran = grants(plan), usage_so_far(plan, self.scenario)
        by_project = project_weeks(plan, self.report.weeks, granted, ran, list(tree.leaves))
        return list(tree.ids), {k: tree.subtree_sum(v) for k, v in by_project.items()}

    def burn(self, node: str) -> dict[str, Any]:
        """A node's burn-down: budget left after each week against the even pace.

        ``times``: quarter start, then each week's end; ``left``: budget − cumulative spend
        (actual, then planned); ``pace``: budget × (1 − share elapsed); ``as_of``.
        """
        ids, spend = self._spend
        i = ids.index(node)
        charged = spend["actual"][i] + spend["planned"][i]
        budget = self.line_of[node].budget
        weeks = self.report.weeks
        return {"times": [weeks[0].start, *(w.end for w in weeks)],
                "left": [budget, *(budget - float(x) for x in np.cumsum(charged))],
                "pace": [budget, *(budget * (1 - w.elapsed) for w in weeks)],
                "as_of": pd.Timestamp(self.plan["as_of"]), "budget": budget}

    @cached_property
    def _days(self) -> tuple[Week, ...]:
        """Days from quarter start to as_of + :data:`HISTORY_DAYS_AFTER` (quarter end at most)."""
        plan = self.plan
        q0, q1 = pd.Timestamp(plan["quarter_start"]), pd.Timestamp(plan["quarter_end"])
        last = min(q1, pd.Timestamp(plan["as_of"]).ceil("D")
                   + pd.Timedelta(days=HISTORY_DAYS_AFTER))
        out, start = [], q0
        while start < last:
            end = min(start + pd.Timedelta(days=1), last)
            out.append(Week(len(out) + 1, start, end, 0.0, 0.0))
            start = end
        return tuple(out)

    @cached_property
    def _daily(self) -> dict[str, np.ndarray]:
        """Per project (leaf order) and day: actual, planned, opportunistic NGH."""
        plan = self.plan
        granted, ran = grants(plan), usage_so_far(plan, self.scenario)
        return project_weeks(plan, self._days, granted, ran, list(self.scenario.tree.leaves))

    def history(self, project: str) -> dict[str, Any]:
        """A project's NGH per day: what ran (ledger) before as_of, the plan after it."""
        j = self.scenario.tree.leaf_index[project]
        return {"days": [d.start for d in self._days],
                "actual": [float(x) for x in self._daily["actual"][j]],
                "planned": [float(x) for x in self._daily["planned"][j]],
                "opportunistic": [float(x) for x in self._daily["opportunistic"][j]],
                "as_of": pd.Timestamp(self.plan["as_of"])}

    @cached_property
    def metrics_text(self) -> bytes:
        """The plan's families of ``/metrics`` (:func:`planner.serve.metrics.plan_exposition`)."""
        from planner.serve.metrics import plan_exposition

        return plan_exposition(self)

    # ------------------------------------------------------------------ explanations

    @cached_property
    def context(self) -> Any:
        """The explain context of the plan's first period (None: unknown model)."""
        from planner.config import load_model
        from planner.explain import build_context

        try:
            model = load_model(self.plan["model"])
        except InputError:
            return None
        return build_context(self.plan, self.scenario, model, unbudgeted=self.unbudgeted)

    def explain_all(self, stop: threading.Event | None = None) -> None:
        """Explain every area, team and project now: ``stop`` ends it early.

        The app runs it in the background after a load, so that no page waits for it.
        """
        for line in self.lines:
            if stop is not None and stop.is_set():
                return
            self.explanation(line.node)

    @property
    def explained(self) -> int:
        """How many nodes are explained already."""
        return len(self._explained)

    def explanation(self, node: str) -> Any:
        """``planner explain NODE`` for the plan's first period (cached), or None."""
        from planner.explain import explain

        with self._lock:
            if node not in self._explained:
                ctx = self.context
                self._explained[node] = None if ctx is None else explain(ctx, node)
            return self._explained[node]

    # ------------------------------------------------------------------ the calendar

    @cached_property
    def _entitled(self) -> dict[str, np.ndarray]:
        """Per project: entitled GPUs (guaranteed + reserved) per (cluster, period)."""
        plan = self.plan
        clusters = [c["cluster"] for c in plan["clusters"]]
        k_of = {c: k for k, c in enumerate(clusters)}
        t_of = {p["start"]: t for t, p in enumerate(plan["periods"])}
        hours = [(pd.Timestamp(p["end"]) - pd.Timestamp(p["start"])).total_seconds() / 3600
                 for p in plan["periods"]]
        gpn = {c["cluster"]: c["gpus_per_node"] for c in plan["clusters"]}
        out: dict[str, np.ndarray] = {}

        def table(project: str) -> np.ndarray:
            if project not in out:
                out[project] = np.zeros((len(clusters), len(plan["periods"])))
            return out[project]

        for a in plan["allocations"]:
            if a["kind"] == "guaranteed":
                t = t_of[a["period_start"]]
                table(a["project"])[k_of[a["cluster"]], t] += a["gpu_hours"] / hours[t]
        starts = [p["start"] for p in plan["periods"]]
        for r in plan["reservations"]:
            for t, s in enumerate(starts):
                if r["start"] <= s < r["end"]:
                    table(r["project"])[k_of[r["cluster"]], t] += r["nodes"] * gpn[r["cluster"]]
        return out

    def start_by(self, project: str, gpus: int) -> StartBy:
        """When an N-GPU job of ``project`` submitted at as_of would start.

        The first period from which the plan entitles it to ``gpus`` GPUs on one cluster,
        beyond those its jobs running now hold (they count against the first period only).
        """
        plan = self.plan
        clusters = [c["cluster"] for c in plan["clusters"]]
        table = self._entitled.get(project)
        running = self._running_on.get(project, {})
        best: StartBy | None = None
        if table is not None:
            for k, cluster in enumerate(clusters):
                for t, period in enumerate(plan["periods"]):
                    busy = running.get(cluster, 0.0) if t == 0 else 0.0
                    if table[k, t] - busy >= gpus - 1e-6:
                        if best is None or period["start"] < best.start:
                            best = StartBy(gpus, cluster, period["start"], float(table[k, t]),
                                           busy)
                        break
        return best or StartBy(gpus, None, None, 0.0, 0.0)

    @cached_property
    def _running_on(self) -> dict[str, dict[str, float]]:
        """GPUs running at as_of per project and cluster (as ``status`` counts them)."""
        usage = self.scenario.usage
        if usage.empty:
            return {}
        as_of = pd.Timestamp(self.plan["as_of"])
        running = (usage["start"] <= as_of) & (usage["end"] > as_of)
        if "state" in usage.columns:
            running |= (usage["state"].astype(str) == "running") & (usage["start"] <= as_of)
        out: dict[str, dict[str, float]] = {}
        for (p, c), g in usage[running].groupby(["project", "cluster"])["gpus"].sum().items():
            out.setdefault(str(p), {})[str(c)] = float(g)
        return out

    def running_on(self, project: str) -> dict[str, float]:
        """GPUs of ``project`` running at as_of, per cluster."""
        return self._running_on.get(project, {})

    def reservations(self, project: str) -> list[dict[str, Any]]:
        """The project's placed reservations, by start."""
        return sorted((r for r in self.plan["reservations"] if r["project"] == project),
                      key=lambda r: (r["start"], r["request_id"]))

    def unplaced(self, project: str) -> list[dict[str, Any]]:
        """The project's unplaced reservation requests."""
        return [u for u in self.plan["unplaced"] if u["project"] == project]

    def quotas_now(self) -> dict[tuple[str, str], tuple[float, float, float]]:
        """(project, cluster) → (guaranteed, opportunistic, reserved) GPUs at as_of."""
        terms = in_force(self.plan, self.plan["as_of"])
        out: dict[tuple[str, str], list[float]] = {}
        for q in terms.quotas:
            acc = out.setdefault((q.project, q.cluster), [0.0, 0.0, 0.0])
            acc[0] += q.guaranteed_gpus
            acc[1] += q.opportunistic_gpus
        for r in terms.reservations:
            out.setdefault((r.project, r.cluster), [0.0, 0.0, 0.0])[2] += r.gpus
        return {k: (v[0], v[1], v[2]) for k, v in out.items()}


# --------------------------------------------------------------------------- changes


@dataclass(frozen=True)
class Change:
    """What one cycle changed for one project against the plan in force before it."""

    project: str
    what: str  # "GPUs now", "reservation added", "reservation dropped", "reservation moved"
    before: str
    after: str


def changes(plan: dict[str, Any], previous: dict[str, Any] | None) -> tuple[Change, ...]:
    """Per project, what ``plan`` changed against ``previous`` at ``plan``'s as_of.

    GPUs now: the entitled and opportunistic GPUs in force at as_of under each plan;
    reservations: added, dropped, or moved (another cluster, start or node count).
    """
    if previous is None:
        return ()
    at = plan["as_of"]
    try:
        before = in_force(previous, at)
    except (KeyError, ValueError, IndexError):
        before = None
    after = in_force(plan, at)

    def gpus(terms: Any) -> dict[str, tuple[float, float]]:
        out: dict[str, list[float]] = {}
        if terms is None:
            return {}
        for q in terms.quotas:
            acc = out.setdefault(q.project, [0.0, 0.0])
            acc[0] += q.guaranteed_gpus
            acc[1] += q.opportunistic_gpus
        for r in terms.reservations:
            out.setdefault(r.project, [0.0, 0.0])[0] += r.gpus
        return {p: (round(v[0], 1), round(v[1], 1)) for p, v in out.items()}

    old, new = gpus(before), gpus(after)
    found = []
    for p in sorted(set(old) | set(new)):
        a, b = old.get(p, (0.0, 0.0)), new.get(p, (0.0, 0.0))
        if a != b:
            found.append(Change(p, "GPUs now", f"{a[0]:g} entitled + {a[1]:g} opportunistic",
                                f"{b[0]:g} entitled + {b[1]:g} opportunistic"))
    was = {r["request_id"]: r for r in previous["reservations"]}
    now = {r["request_id"]: r for r in plan["reservations"]}

    def where(r: dict[str, Any]) -> str:
        return f"{r['nodes']} nodes on {r['cluster']} from {r['start']}"

    for rid in sorted(set(was) | set(now)):
        a, b = was.get(rid), now.get(rid)
        if a is None:
            found.append(Change(b["project"], f"reservation {rid} added", "", where(b)))
        elif b is None:
            if a["end"] > at:  # one that ended before as_of just ran to its end
                found.append(Change(a["project"], f"reservation {rid} dropped", where(a), ""))
        elif (a["cluster"], a["start"], a["nodes"]) != (b["cluster"], b["start"], b["nodes"]):
            found.append(Change(b["project"], f"reservation {rid} moved", where(a), where(b)))
    return tuple(sorted(found, key=lambda c: (c.project, c.what)))
