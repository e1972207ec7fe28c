"""Why a project (or a team) gets what it gets: ``planner explain``.

Takes a plan and the scenario it was planned from; no solver is called. Everything is
recomputed with the library's own functions, on the plan's grid:

- the problem arrays (:func:`planner.model.problem.build_problem`): capacity, demand,
  budgets, usage and the lookback;
- what the plan's reservations hold, per cluster and period (GPU-hours) and per project
  and period (NGH), read from the plan itself (so kept reservations count too);
- the elastic capacity A_kt and budget headroom H_p the LP saw, and the fair-share
  targets τ (:func:`planner.fairshare.targets.fair_share_targets`), exactly as
  :func:`planner.model.solve.elastic_inputs` computes them;
- for the explained period t, the targets' steps (1) offset U_pt and (2) cap
  c_pkt = min(d_pkt, B_pt), then the water-filling
  (:func:`planner.fairshare.waterfill.water_fill`) level by level down the path
  root → node, each sibling group with its weights, capped demands, offsets and level λ
  (node i of a group gets min(D_i, max(0, λ·w_i − U_i)), all in NGH).

Which rule binds a project on a cluster in period t (``Binding.kind``), first match:

    demand       granted ≥ demand (it got all it asked for)
    budget       its budget is spent (budget − used − planned ≈ 0) or the budget row's dual
                 (``marginal_value``) is > 0: guaranteed GPU-hours stop at the budget
    reservation  the cluster is full, reservations hold part of it, and without them the
                 cluster would have met every demand in the period
    fair share   the cluster is full and the project got at least its fair-share target
    capacity     the cluster is full and the project got less than its target (the LP
                 traded the target against pacing or churn)
    none         none of these (not expected in a checked plan)

The dual values of the capacity and demand rows are not in ``plan.json``; only the
budget row's (``marginal_value``) is shown.

For each unplaced reservation: the earliest period from which its cluster has enough
nodes not held by the plan's reservations for its rounded length, ignoring its window
(elastic work is preemptible and yields to a reservation), or none this quarter.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from planner.config import ModelConfig, load_model
from planner.contract import overdrawn
from planner.errors import InputError, InputProblem
from planner.fairshare.targets import fair_share_targets_at, usage_ages
from planner.fairshare.waterfill import water_fill
from planner.inputs import Scenario
from planner.inputs.load import unbudgeted_of
from planner.model.problem import Problem, build_problem
from planner.model.result import CellValues
from planner.plan.build import num
from planner.times import iso
from planner.words import (
    NGH_DEFINITION,
    OVERDRAWN_WORDS,
    number,
    percent,
    unbudgeted_words,
    water_level_words,
)

EPS = 1e-6  # GPU-hours / NGH below which two figures are equal
KINDS = ("demand", "budget", "reservation", "fair share", "capacity", "none")


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Sibling:
    """One claimant of a sibling group in the water-filling (NGH)."""

    node: str
    weight: float
    demand: float  # D_i: the subtree's demand capped by budget left
    usage: float  # U_i: the subtree's lookback usage (offset)
    grant: float  # min(D_i, max(0, λ·w_i − U_i))
    on_path: bool  # the node on the way to the explained one
    asked: float = 0.0  # the subtree's demand before the budget cap

    @property
    def waiting(self) -> float:
        """NGH it asked for and does not get in this fill (0 when all of it fits)."""
        return max(self.asked - self.grant, 0.0)


@dataclass(frozen=True)
class Level:
    """One sibling group on the path root → node: what its parent had, and λ."""

    parent: str  # "" for the virtual root (the whole cluster)
    capacity: float  # the parent's grant (root: the cluster's elastic capacity), NGH
    lam: float | None  # the water level; None when every sibling's demand fits
    siblings: tuple[Sibling, ...]

    @property
    def waiting(self) -> float:
        """NGH of demand that waits in this group: asked and not granted."""
        return float(sum(s.waiting for s in self.siblings))

    @property
    def contended(self) -> bool:
        """Whether some demand waits here: the only case the word *contended* is used."""
        return self.waiting > EPS


@dataclass(frozen=True)
class Binding:
    """What limits a project on one cluster in the explained period (GPU-hours)."""

    cluster: str
    kind: str  # one of KINDS
    detail: str
    demand: float
    target: float  # the fair-share target τ
    guaranteed: float
    opportunistic: float
    cluster_capacity: float
    cluster_reserved: float  # held by reservations (all projects)
    cluster_granted: float  # elastic grants of all projects
    levels: tuple[Level, ...]  # the water-filling root → project on this cluster


@dataclass(frozen=True)
class Unplaced:
    """An unplaced reservation request and the earliest start that would fit."""

    request_id: str
    cluster: str
    nodes: int
    periods: int
    reason: str
    earliest_start: str | None  # ISO time, or None: none this quarter


@dataclass(frozen=True)
class ProjectWhy:
    """A project: its budget figures, its bindings per cluster, its unplaced requests."""

    project: str
    path: tuple[str, ...]  # top-level node … project
    weight: float
    budget: float  # NGH
    used: float
    planned: float  # guaranteed elastic + reserved, as_of → quarter end
    planned_reserved: float
    planned_opportunistic: float
    forecast: float  # used + planned
    pace: float  # budget × the share of the quarter elapsed at as_of
    budget_left: float  # budget − used − planned
    marginal_value: float  # the budget row's dual
    usage: float  # U_p: its lookback usage in the explained period, NGH
    bindings: tuple[Binding, ...]  # clusters it wants or holds in the period
    unplaced: tuple[Unplaced, ...]
    overdrawn: bool = False  # a whole budget ahead of its pace (executor contract rule 8)
    unbudgeted: float = 0.0  # NGH it ran charged to no budget up to as_of (not in used)

    @property
    def headline(self) -> str:
        """The binding kinds by cluster, one phrase: ``fair share (h100-a)``."""
        if not self.bindings:
            return "no demand in this period"
        kinds: dict[str, list[str]] = {}
        for b in self.bindings:
            kinds.setdefault(b.kind, []).append(b.cluster)
        return "; ".join(f"{k} ({', '.join(c)})" for k, c in kinds.items())


@dataclass(frozen=True)
class ChildLine:
    """One child of an explained team: its subtree's figures (NGH)."""

    node: str
    is_project: bool
    weight: float
    budget: float
    used: float
    planned: float
    granted_gpu_hours: float  # elastic grants in the explained period
    binding: str  # the project's headline, or the kinds of the projects below


@dataclass(frozen=True)
class TeamWhy:
    """An internal node: subtree totals, one line a child, its water-filling path."""

    node: str
    path: tuple[str, ...]
    weight: float
    budget: float
    used: float
    planned: float
    planned_opportunistic: float
    forecast: float
    pace: float
    children: tuple[ChildLine, ...]
    levels: dict[str, tuple[Level, ...]]  # cluster → water-filling root → node


@dataclass(frozen=True)
class Explanation:
    """What ``planner explain`` prints: the plan's context and one node's explanation."""

    scenario: str
    as_of: str
    period_start: str
    period_end: str
    model: str
    lookback: str
    subject: ProjectWhy | TeamWhy

    def as_json(self) -> dict[str, Any]:
        """The explanation as JSON-ready data (``kind`` = ``project`` or ``team``)."""
        body = asdict(self)
        subject = body.pop("subject")
        if isinstance(self.subject, ProjectWhy):
            subject["headline"] = self.subject.headline
        return {**body, "kind": "project" if isinstance(self.subject, ProjectWhy) else "team",
                "subject": subject}


# --------------------------------------------------------------------------- context


def check_plan_matches(plan: dict[str, Any], scenario: Scenario, label: str) -> None:
    """Refuse a plan made from other inputs than ``scenario`` (its ``input_digest``)."""
    if plan.get("input_digest") != scenario.digest:
        raise InputError([InputProblem(
            label, None, "input_digest",
            f"the plan was made from other inputs ({str(plan.get('input_digest'))[:12]}…) "
            f"than this scenario ({scenario.digest[:12]}…); pass the scenario it was "
            f"planned from")])


@dataclass(frozen=True)
class Context:
    """Everything the explanations share, computed once per plan and period."""

    plan: dict[str, Any]
    problem: Problem
    t: int  # the explained period
    reserved_gpu_h: np.ndarray  # (K, T)
    reserved_nodes: np.ndarray  # (K, T) nodes held in each period (max over the period)
    reserved_ngh: np.ndarray  # (P, T)
    available: np.ndarray  # (K, T) elastic GPU-hours
    targets: CellValues  # (P, K, T) GPU-hours, at the cells with demand
    capped: np.ndarray  # (P, K) NGH in period t: min(d, B_pt)
    offset: np.ndarray  # (P,) NGH in period t: U_pt
    guaranteed: np.ndarray  # (P, K) GPU-hours in period t, from the plan
    opportunistic: np.ndarray  # (P, K) in period t
    budgets: dict[str, dict[str, Any]]
    unbudgeted: dict[str, float]  # project -> NGH it ran charged to no budget by as_of
    overdrawn: frozenset[str]  # rule 8, with what the projects ran on no budget


def _reserved(plan: dict[str, Any], problem: Problem) -> tuple[np.ndarray, ...]:
    """Reserved GPU-hours (K, T), nodes (K, T) and NGH (P, T) from the plan's reservations."""
    n_projects, n_clusters, n_periods = problem.shape
    gpu_h, nodes = np.zeros((n_clusters, n_periods)), np.zeros((n_clusters, n_periods))
    ngh = np.zeros((n_projects, n_periods))
    k_index = {c: k for k, c in enumerate(problem.clusters)}
    p_index = {p: i for i, p in enumerate(problem.projects)}
    for r in plan["reservations"]:
        k, p = k_index[r["cluster"]], p_index[r["project"]]
        start, end = pd.Timestamp(r["start"]), pd.Timestamp(r["end"])
        for t in range(n_periods):
            lo, hi = max(start, problem.period_start[t]), min(end, problem.period_end[t])
            if hi <= lo:
                continue
            block = r["nodes"] * problem.gpus_per_node[k] * (hi - lo).total_seconds() / 3600
            gpu_h[k, t] += block
            nodes[k, t] += r["nodes"]
            ngh[p, t] += block * problem.rate[k]
    return gpu_h, nodes, ngh


def _check_names(plan: dict[str, Any], problem: Problem) -> None:
    """Refuse a plan whose projects, clusters or periods are not the scenario's."""
    problems = []
    if [b["project"] for b in plan["budgets"]] != list(problem.projects):
        problems.append("its projects are not the scenario's")
    if not {c["cluster"] for c in plan["clusters"]} <= set(problem.clusters):
        problems.append("it names clusters the scenario does not have")
    if [p["start"] for p in plan["periods"]] != [iso(s) for s in problem.period_start]:
        problems.append("its periods are not the scenario's grid from its as_of")
    if problems:
        raise InputError([InputProblem("plan", None, None,
                                       f"the plan does not fit the scenario: {m}")
                          for m in problems])


def _period(problem: Problem, when: str | None) -> int:
    if when is None:
        return 0
    try:
        stamp = pd.Timestamp(when)
    except ValueError:
        raise InputError([InputProblem("--period", None, None,
                                       f"{when!r} is not an ISO 8601 date")]) from None
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    for t, (start, end) in enumerate(zip(problem.period_start, problem.period_end,
                                         strict=True)):
        if start <= stamp < end:
            return t
    raise InputError([InputProblem("--period", None, None,
                                   f"{iso(stamp)} is not in the plan's periods "
                                   f"[{iso(problem.period_start[0])}, "
                                   f"{iso(problem.period_end[-1])})")])


def build_context(plan: dict[str, Any], scenario: Scenario, model: ModelConfig,
                  period: str | None = None,
                  unbudgeted: Mapping[str, float] | None = None) -> Context:
    """The shared arrays for ``plan`` (planned from ``scenario`` with ``model``).

    ``period``: a time inside the period to explain (default: the first). ``unbudgeted``:
    project -> NGH it ran charged to no budget by the plan's ``as_of``
    (:func:`~planner.inputs.load.unbudgeted_of`); default: read from the scenario folder.
    """
    scenario = scenario.with_as_of(pd.Timestamp(plan["as_of"]))
    problem = build_problem(scenario, model)
    _check_names(plan, problem)
    t = _period(problem, period)
    reserved_gpu_h, reserved_nodes, reserved_ngh = _reserved(plan, problem)
    off_budget = dict(spent_unbudgeted(plan, scenario) if unbudgeted is None else unbudgeted)
    rate = problem.rate
    # as planner.model.solve.elastic_inputs, with the plan's reservations
    available = np.maximum(problem.cap - reserved_gpu_h, 0.0)
    headroom = np.maximum(problem.budget - problem.used - reserved_ngh.sum(axis=1), 0.0)
    # at the cells with demand only, as the planner computes them (no (P, K, T) array)
    cells = problem.dem.cells()
    targets_ngh = fair_share_targets_at(problem.tree, available * rate[:, None], cells,
                                        problem.dem.values * rate[cells[1]], problem.shape,
                                        headroom, problem.past, reserved_ngh, problem.lookback,
                                        problem.positions)
    # steps (1), (2) and (5) of planner.fairshare.targets replayed up to period t
    spent = np.zeros((problem.shape[0], problem.shape[2]))  # (P, T): Σ_k in cluster order
    np.add.at(spent, (cells[0], cells[2]), targets_ngh)
    remaining = headroom.copy()
    for s in range(t):
        remaining = np.maximum(remaining - spent[:, s], 0.0)
    usage = np.concatenate([problem.past, reserved_ngh + spent], axis=1)
    now = problem.past.shape[1] + t
    omega = problem.lookback.weights(usage_ages(t, problem.past.shape[1], problem.positions))
    offset = usage[:, :now] @ omega
    capped = np.minimum(problem.dem.period(t) * rate[None, :], remaining[:, None])
    n_projects, n_clusters, _ = problem.shape
    guaranteed, opportunistic = np.zeros((n_projects, n_clusters)), np.zeros((n_projects,
                                                                              n_clusters))
    k_index = {c: k for k, c in enumerate(problem.clusters)}
    p_index = {p: i for i, p in enumerate(problem.projects)}
    start = iso(problem.period_start[t])
    for a in plan["allocations"]:
        if a["period_start"] != start:
            continue
        target = guaranteed if a["kind"] == "guaranteed" else opportunistic
        target[p_index[a["project"]], k_index[a["cluster"]]] += a["gpu_hours"]
    return Context(plan, problem, t, reserved_gpu_h, reserved_nodes, reserved_ngh, available,
                   CellValues(problem.shape, problem.dem.codes, targets_ngh / rate[cells[1]]),
                   capped, offset, guaranteed, opportunistic,
                   {b["project"]: b for b in plan["budgets"]}, off_budget,
                   overdrawn(plan, off_budget))


def spent_unbudgeted(plan: dict[str, Any], scenario: Scenario) -> dict[str, float]:
    """Project -> NGH it ran charged to no budget by the plan's ``as_of`` (rule 8).

    Under Slurm that work is not in the plan's ``used``: it is read from the scenario
    folder's ``unbudgeted.csv`` (:func:`unbudgeted_of`), as ``planner tick`` reads it; a
    workbook or a folder without that file adds nothing.
    """
    return unbudgeted_of(scenario.source, plan) if scenario.source else {}


# --------------------------------------------------------------------------- water-filling


def water_level(capacity: float, demand: np.ndarray, weight: np.ndarray, offset: np.ndarray,
                grant: np.ndarray) -> float | None:
    """λ of one sibling group's fill; None when every demand fits (ΣD ≤ C) or C = 0.

    Read back from the grants: a sibling strictly between 0 and its demand has
    x_i = λ·w_i − U_i. When every sibling sits at a bound, λ is the smallest level
    consistent with the capped ones, max (D_i + U_i) / w_i.
    """
    if demand.sum() <= capacity + EPS or capacity <= 0:
        return None
    inner = (grant > EPS) & (grant < demand - EPS)
    if inner.any():
        return float(((grant + offset) / weight)[inner][0])
    full = (demand > 0) & (grant >= demand - EPS)
    if full.any():
        return float(((demand + offset) / weight)[full].max())
    return float((offset / weight)[demand > 0].min())


def fill_path(ctx: Context, node: str, k: int) -> tuple[Level, ...]:
    """The water-filling of cluster ``k`` in the context's period, root → ``node``."""
    tree = ctx.problem.tree
    node_demand = tree.subtree_sum(ctx.capped[:, k])
    everyone = np.arange(ctx.problem.shape[0])
    node_asked = tree.subtree_sum(ctx.problem.dem[everyone, k, ctx.t] * ctx.problem.rate[k])
    node_usage = tree.subtree_sum(ctx.offset)
    capacity = float(ctx.available[k, ctx.t] * ctx.problem.rate[k])
    levels = []
    parent = ""
    for step in tree.path(node):
        group = tree.top if not parent else tree.children(tree.index[parent])
        group = np.array(group, dtype=np.int64)
        demand, usage, asked = node_demand[group], node_usage[group], node_asked[group]
        weight = tree.weight[group]
        grant = water_fill(capacity, demand, weight, usage)
        levels.append(Level(parent, num(capacity),
                            None if (lam := water_level(capacity, demand, weight, usage,
                                                        grant)) is None else num(lam),
                            tuple(Sibling(tree.ids[i], float(w), num(d), num(u), num(x),
                                          tree.ids[i] == step, num(a))
                                  for i, w, d, u, x, a in zip(group, weight, demand, usage,
                                                              grant, asked, strict=True))))
        capacity = float(grant[list(group).index(tree.index[step])])
        parent = step
    return tuple(levels)


# --------------------------------------------------------------------------- a project


def _binding(ctx: Context, p: int, k: int, why: dict[str, Any]) -> Binding:
    problem, t = ctx.problem, ctx.t
    demand = float(problem.dem[p, k, t])
    g, o = float(ctx.guaranteed[p, k]), float(ctx.opportunistic[p, k])
    target = float(ctx.targets[p, k, t])
    cap = float(problem.cap[k, t])
    reserved = float(ctx.reserved_gpu_h[k, t])
    granted_all = float(ctx.guaranteed[:, k].sum() + ctx.opportunistic[:, k].sum())
    full = granted_all + reserved >= cap - problem.hours[t] - EPS  # within one GPU × period
    wanted_all = float(problem.dem[np.arange(problem.shape[0]), k, t].sum())
    cluster = problem.clusters[k]
    left = why["budget"] - why["used"] - why["planned"]
    n = number
    full_text = (f"{cluster} is full ({n(granted_all + reserved, 1)} of {n(cap, 1)} GPU-hours"
                 + (f", {n(reserved, 1)} reserved" if reserved > EPS else "") + ")")
    if g + o >= demand - EPS:
        kind, detail = "demand", (f"granted all it asked for: {n(g + o, 1)} of "
                                  f"{n(demand, 1)} GPU-hours")
    elif left <= max(EPS, 1e-9 * why["budget"]) or why["marginal_value"] > EPS:
        kind = "budget"
        detail = (f"budget binds: {n(max(left, 0.0), 1)} NGH left, marginal value "
                  f"{why['marginal_value']:g}; guaranteed {n(g, 1)} GPU-hours, the rest of "
                  f"its {n(demand, 1)} only as opportunistic ({n(o, 1)}) where nobody within "
                  f"budget wants the GPUs")
    elif full and reserved > EPS and wanted_all <= cap + EPS:
        kind = "reservation"
        detail = (f"{cluster} is full: reservations hold {n(reserved, 1)} of its "
                  f"{n(cap, 1)} GPU-hours; without them every demand ({n(wanted_all, 1)}) "
                  f"would fit")
    elif full and g + o >= target - EPS:
        kind = "fair share"
        detail = (f"{full_text}; it got its fair-share target {n(target, 1)} (granted "
                  f"{n(g + o, 1)} of {n(demand, 1)} asked)")
    elif full:
        kind = "capacity"
        detail = (f"{full_text}; granted {n(g + o, 1)} is below its fair-share target "
                  f"{n(target, 1)}: the plan traded the target against pacing or churn")
    else:
        kind, detail = "none", (f"granted {n(g + o, 1)} of {n(demand, 1)} GPU-hours with "
                                f"{cluster} not full and budget left")
    return Binding(cluster, kind, detail, num(demand), num(target), num(g), num(o), num(cap),
                   num(reserved), num(granted_all), fill_path(ctx, problem.projects[p], k))


def earliest_start(ctx: Context, k: int, nodes: int, length: int) -> int | None:
    """First period s with ``nodes`` nodes free of reservations in s … s + length − 1."""
    problem = ctx.problem
    if nodes > problem.nodes[k]:
        return None
    step = problem.period_start[1] - problem.period_start[0] if len(problem.hours) > 1 \
        else problem.period_end[0] - problem.period_start[0]
    free = problem.nodes[k] - ctx.reserved_nodes[k]
    whole = np.array([e - s == step for s, e in zip(problem.period_start, problem.period_end,
                                                    strict=True)])
    fits = (free >= nodes) & whole
    for s in range(len(fits) - length + 1):
        if fits[s:s + length].all():
            return s
    return None


def _unplaced(ctx: Context, project: str) -> tuple[Unplaced, ...]:
    problem = ctx.problem
    requests = {r.request_id: r for r in problem.requests}
    out = []
    for u in ctx.plan["unplaced"]:
        if u["project"] != project or u["request_id"] not in requests:
            continue
        r = requests[u["request_id"]]
        s = earliest_start(ctx, r.cluster, r.nodes, r.length)
        out.append(Unplaced(r.request_id, problem.clusters[r.cluster], r.nodes, r.length,
                            u["reason"], None if s is None else iso(problem.period_start[s])))
    return tuple(out)


def _pace(ctx: Context, budget: float) -> float:
    plan = ctx.plan
    start, end = pd.Timestamp(plan["quarter_start"]), pd.Timestamp(plan["quarter_end"])
    # the share first: budget × a Timedelta overflows int64 above ~5 M NGH
    return budget * ((pd.Timestamp(plan["as_of"]) - start) / (end - start))


def explain_project(ctx: Context, project: str) -> ProjectWhy:
    """A project's explanation in the context's period."""
    problem = ctx.problem
    p = problem.tree.leaf_index[project]
    why = ctx.budgets[project]
    wants = (problem.dem[p, np.arange(problem.shape[1]), ctx.t] > 0) \
        | (ctx.guaranteed[p] > 0) | (ctx.opportunistic[p] > 0)
    bindings = tuple(_binding(ctx, p, int(k), why) for k in np.flatnonzero(wants))
    forecast = why["used"] + why["planned"]
    return ProjectWhy(project, problem.tree.path(project),
                      float(problem.tree.weight[problem.tree.index[project]]), why["budget"],
                      why["used"], why["planned"], why["planned_reserved"],
                      why["planned_opportunistic"], num(forecast), num(_pace(ctx, why["budget"])),
                      num(why["budget"] - forecast), why["marginal_value"],
                      num(ctx.offset[p]), bindings, _unplaced(ctx, project),
                      project in ctx.overdrawn, num(ctx.unbudgeted.get(project, 0.0)))


# --------------------------------------------------------------------------- a team


def explain_team(ctx: Context, node: str) -> TeamWhy:
    """An internal node: its subtree totals, a line per child, its fill on each cluster."""
    tree = ctx.problem.tree
    totals = np.zeros(4)
    for p in tree.leaves_under(node):
        b = ctx.budgets[p]
        totals += [b["budget"], b["used"], b["planned"], b["planned_opportunistic"]]
    children = []
    for i in tree.children(tree.index[node]):
        child = tree.ids[i]
        leaves = tree.leaves_under(child)
        figures = np.sum([[ctx.budgets[p][f] for f in ("budget", "used", "planned")]
                          for p in leaves], axis=0)
        rows = [tree.leaf_index[p] for p in leaves]
        granted = float(ctx.guaranteed[rows].sum() + ctx.opportunistic[rows].sum())
        if tree.is_leaf[i]:
            binding = explain_project(ctx, child).headline
        else:
            kinds = sorted({b.kind for p in leaves for b in explain_project(ctx, p).bindings},
                           key=KINDS.index)
            binding = ", ".join(kinds) if kinds else "no demand in this period"
        children.append(ChildLine(child, bool(tree.is_leaf[i]), float(tree.weight[i]),
                                  *(num(x) for x in figures), num(granted), binding))
    rows = [tree.leaf_index[p] for p in tree.leaves_under(node)]
    problem = ctx.problem
    wanted = problem.dem.period(ctx.t)[rows].sum(axis=0) > 0
    levels = {problem.clusters[k]: fill_path(ctx, node, int(k)) for k in np.flatnonzero(wanted)}
    budget, used, planned, opportunistic = (num(x) for x in totals)
    return TeamWhy(node, tree.path(node),
                   float(tree.weight[tree.index[node]]), budget, used, planned, opportunistic,
                   num(used + planned), num(_pace(ctx, budget)), tuple(children), levels)


# --------------------------------------------------------------------------- entry points


def resolve_node(ctx: Context, node: str) -> str:
    """``node`` if the org tree has it; else an :class:`InputError` naming the closest ids."""
    ids = ctx.problem.tree.ids
    if node in ctx.problem.tree.index:
        return node
    close = difflib.get_close_matches(node, ids, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    source = ctx.problem.scenario.source  # the org table: a workbook's sheet, or org.csv
    label = f"{Path(source).name}[org]" if source.endswith(".xlsx") else "org.csv"
    raise InputError([InputProblem(label, None, "id", f"no project or team {node!r}{hint}")])


def explain(ctx: Context, node: str) -> Explanation:
    """The explanation of a project or team (by id) in the context's period."""
    node = resolve_node(ctx, node)
    tree = ctx.problem.tree
    leaf = bool(tree.is_leaf[tree.index[node]])
    subject = explain_project(ctx, node) if leaf else explain_team(ctx, node)
    lookback = ctx.problem.lookback
    text = (f"window of {lookback.window_periods} periods" if lookback.window_periods is not None
            else f"half-life of {lookback.half_life_periods:g} periods")
    plan = ctx.plan
    t = ctx.t
    return Explanation(plan["scenario"], plan["as_of"], iso(ctx.problem.period_start[t]),
                       iso(ctx.problem.period_end[t]), plan["model"], text, subject)


# --------------------------------------------------------------------------- text


def level_words(level: Level) -> str:
    """Whether demand waits in a sibling group, and its water level in words.

    *Contended* is said only where some demand waits; λ only with what it means
    (:func:`planner.words.water_level_words`).
    """
    if not level.contended:
        return "not contended: every demand fits, nobody waits"
    waits = f"{number(level.waiting, 1)} NGH of demand waits"
    if level.capacity <= EPS:
        return f"{waits}: nothing to share here (the level above gave it no NGH)"
    if level.lam is None:
        return (f"{waits}, all of it beyond budget (budget spent; it runs only as "
                "opportunistic): every demand within budget fits")
    return f"contended, {waits}; {water_level_words(level.lam)}"


def _level_lines(levels: tuple[Level, ...], indent: str) -> list[str]:
    lines = []
    for level in levels:
        where = level.parent or "the cluster"
        lines.append(f"{indent}{where}: {number(level.capacity, 1)} NGH to share among "
                     f"{len(level.siblings)}; {level_words(level)}")
        for s in level.siblings:
            mark = "→" if s.on_path else " "
            within = (f" ({number(s.demand, 1)} within budget)" if s.asked > s.demand + EPS
                      else "")
            lines.append(f"{indent}  {mark} {s.node}: weight {s.weight:g}, asks "
                         f"{number(s.asked, 1)}{within}, lookback usage {number(s.usage, 1)}, "
                         f"fair share {number(s.grant, 1)}")
    return lines


def _budget_line(budget: float, used: float, planned: float, pace: float,
                 unbudgeted: float = 0.0) -> str:
    share = f" ({percent((used + planned) / budget)} of budget)" if budget else ""
    return (f"budget {number(budget, 1)} NGH; used {number(used, 1)}"
            f"{unbudgeted_words(unbudgeted, 1)} (even pace by now "
            f"{number(pace, 1)}); planned {number(planned, 1)}; forecast "
            f"{number(used + planned, 1)}{share}")


def explanation_lines(ex: Explanation) -> list[str]:
    """The explanation in words and numbers, one line a fact (ids verbatim).

    The last line says what NGH is.
    """
    s = ex.subject
    n = number
    head = [f"{' / '.join(s.path)} in {ex.scenario}, period {ex.period_start} → "
            f"{ex.period_end} (plan as of {ex.as_of}, model {ex.model}, lookback {ex.lookback})"]
    if isinstance(s, TeamWhy):
        lines = head + [_budget_line(s.budget, s.used, s.planned, s.pace)
                        + f"; opportunistic {n(s.planned_opportunistic, 1)}", "", "children:"]
        for c in s.children:
            lines.append(f"  {c.node} ({'project' if c.is_project else 'team'}, weight "
                         f"{c.weight:g}): budget {n(c.budget, 1)}, used {n(c.used, 1)}, "
                         f"planned {n(c.planned, 1)}; granted {n(c.granted_gpu_hours, 1)} "
                         f"GPU-hours this period; binds: {c.binding}")
        for cluster, levels in s.levels.items():
            lines += ["", f"water-filling on {cluster} (NGH; fair shares, which the plan's "
                          "grants may exceed with GPUs nobody else wants):",
                      *_level_lines(levels, "  ")]
        return [*lines, "", NGH_DEFINITION]
    lines = head + [
        _budget_line(s.budget, s.used, s.planned, s.pace, s.unbudgeted)
        + f"; {n(s.budget_left, 1)} left",
        f"reserved {n(s.planned_reserved, 1)} NGH; opportunistic "
        f"{n(s.planned_opportunistic, 1)} NGH beyond budget; budget marginal value "
        f"{s.marginal_value:g} (what one more NGH of budget would be worth to the plan's "
        "objective; 0: the budget does not bind)",
        f"lookback usage this period: {n(s.usage, 1)} NGH", f"binds: {s.headline}"]
    if s.overdrawn:
        lines.append(OVERDRAWN_WORDS)
    for b in s.bindings:
        lines += ["", f"{b.cluster}: demand {n(b.demand, 1)} GPU-hours, target "
                      f"{n(b.target, 1)}, guaranteed {n(b.guaranteed, 1)}, opportunistic "
                      f"{n(b.opportunistic, 1)}",
                  f"  {b.kind}: {b.detail}",
                  "  water-filling (NGH; fair shares, which the plan's grants may exceed with "
                  "GPUs nobody else wants):",
                  *_level_lines(b.levels, "    ")]
    for u in s.unplaced:
        when = u.earliest_start or "none this quarter"
        lines += ["", f"unplaced {u.request_id} ({u.nodes} nodes × {u.periods} periods on "
                      f"{u.cluster}): {u.reason}",
                  f"  earliest start with {u.nodes} nodes free of reservations for "
                  f"{u.periods} periods (window ignored): {when}"]
    return [*lines, "", NGH_DEFINITION]


def explain_all(plan: dict[str, Any], scenario: Scenario, model: ModelConfig | None = None,
                unbudgeted: Mapping[str, float] | None = None
                ) -> tuple[Explanation, ...] | None:
    """Every project's explanation in the plan's first period (for the reports).

    ``model`` gives the lookback; by default the plan's ``model`` by name. None when
    that name is not a known model (a plan made with a model file): the reports then
    say to pass ``--model``. ``unbudgeted``: as :func:`build_context` takes it (default:
    read from the scenario folder).
    """
    if model is None:
        try:
            model = load_model(plan["model"])
        except InputError:
            return None
    ctx = build_context(plan, scenario, model, unbudgeted=unbudgeted)
    return tuple(explain(ctx, p) for p in ctx.problem.projects)
