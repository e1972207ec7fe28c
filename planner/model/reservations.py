"""Stage 1: whole-node reservations, placed by a time-indexed MIP (HiGHS), part by part.

Indices: r ∈ R requests that can be placed, s ∈ S_r its allowed start periods
(window ∩ horizon), k ∈ K clusters, t ∈ T periods, p ∈ P projects.

Data: L_r periods (hours rounded up), n_r nodes, N_k nodes of cluster k, F_kt nodes
held by reservations kept from the previous plan (rule 6), v_r = reserved GPU-hours,
c_r = NGH, H_p budget NGH left after usage and kept reservations, s⁰_r a reference
start (previous plan's start, else the earliest allowed), λ the lateness share.

Variables: y_rs ∈ {0,1}, request r starts in period s (time-indexed: one binary per
allowed start); r is placed iff Σ_s y_rs = 1.

    (R1) nodes_kt:      Σ_{r on k} Σ_{s ≤ t < s+L_r} n_r y_rs + F_kt ≤ N_k    ∀ k, t
    (R2) budget_p:      Σ_{r of p} c_r Σ_s y_rs ≤ H_p                        ∀ p
    (R3) one_start_r:   Σ_s y_rs ≤ 1  (s ∈ S_r: whole periods, contiguous, exact
                        length, inside the window)

    (R4) displaced_rs:  δ_r(s) = δ × elastic GPU-hours start s pushes out of
                        contended periods (see :func:`displacement`)

    max  Σ_r Σ_s (v_r − λ v_r |s − s⁰_r| − δ_r(s)) y_rs

Whole nodes and exact lengths (rule 3) hold by construction: a start covers exactly
L_r periods with n_r integral nodes.

Decomposition (:func:`independent_parts`). A reservation uses one cluster, so (R1)
couples only requests on the same cluster; across clusters, only a project's budget
row (R2) couples them, and only when it can bind (Σ c_r > H_p; a row that cannot bind
is left free). Clusters joined by binding budget rows form one part; parts share no row
and the objective is a sum over requests, so the parts are solved one after the other
as separate MIPs and nothing is lost: the whole problem's optimum is the sum of the
parts' optima, the sum of their objectives is a placement's value, and the sum of
their bounds (each HiGHS's ``mip_dual_bound``) is a true bound of the whole problem.
(R4) is a fixed coefficient of each start (computed from demand alone), so the
elastic displacement couples nothing here; the elastic LP of stage 2 sees the placed
reservations. Splitting further, one cluster at a time, would have to relax the
binding budget rows: per-cluster bounds with the rows dropped, or with the LP's budget
duals as Lagrange multipliers (Σ_k bound_k(μ) + Σ_p μ_p H_p), are true bounds but looser
than the part's own, so they are not used.

Warm start (:func:`warm_start`): every part starts from the best valid placement of
a greedy one (largest first, best start that fits), the LP relaxation's starts
rounded greedily (:func:`rounded_placement`) and, with ``--previous``, the previous
plan's starts that still fit (nodes and budget), topped up greedily. It is handed to
HiGHS as its first incumbent (``setSolution``); HiGHS's presolve can lose some of its
value (dual fixings in the reduced space), so a part whose HiGHS ends below the warm
start's value keeps the warm start (:func:`solve_part`).

Local search (:func:`improve_placement`): when the warm start is further than the gap
tolerance from the LP relaxation's value, the first :data:`LNS_SHARE` of the part's
time re-places runs of :data:`NEIGHBOURHOOD` requests of one cluster (by first allowed
start, overlapping by half) by a sub-MIP with every other request fixed, keeping what
is worth more, the runs furthest from the LP relaxation's values first; HiGHS's branch
and cut starts from the result. The part's bound is the lower of HiGHS's
``mip_dual_bound`` and the LP relaxation's value (both true bounds; HiGHS stopped before
its root has only a loose one). It improves a poor warm start quickly, where HiGHS
alone can spend a part's whole time before its first heuristic solution.

Swap search (:mod:`planner.model.swap_search`): the last :data:`POLISH_SHARE` of a
part's time takes the placement HiGHS returns, when it is not proven within the gap
tolerance, through single insertions with one or two ejections (plain Python, tens of
thousands of moves a second, a work limit). HiGHS's placements are local optima of its
sub-MIPs, not of these moves, so a fraction of a second of them can still gain. Where the
local search's placement is the result (a part given a few seconds) they find next to
nothing.

Cluster polish (:func:`cluster_polish`): HiGHS's placement, when not proven within the
gap tolerance, is polished cluster by cluster: all of one cluster's requests re-placed by
a sub-MIP, the other clusters' fixed (:data:`CLUSTER_SHARE` of a part's time given at
least :data:`CLUSTER_MIN_PART_SECONDS`, before the swap search). The runs above improve a
poor start quickly and then stall whatever the time; a whole cluster's sub-MIP moves all
its requests against budgets fixed elsewhere, and from HiGHS's placement it gains where
HiGHS's own branch and cut has stalled. Second pass (:func:`improve_reservation_model`, run by
``planner.model.solve`` in the time the elastic LP leaves): the open parts are polished
again from their placements, by what each lacks of its bound.

Tighter rows were tried and not kept (a budget row cut to its largest subset sum, the
projects' knapsacks convexified, each cluster's value capped by its own optimum, node
rows rounded per period): each is a true bound, and none is below what HiGHS's presolve
and root cuts reach by themselves, so a remaining gap is the incumbent's, not the
bound's. The stage is HiGHS's MIP rather than CP-SAT's because HiGHS's branch and cut
finds better incumbents against equally tight bounds on these time-indexed models
(``docs/explanation/model.md``). ``benchmarks/reservations_gap.py`` measures the gap
(``benchmarks/results/reservations.json``). Nor is CP-SAT the cluster polish's
sub-solver: from the same placements on x10r10's hardest parts, HiGHS's sub-MIPs gained
more at every limit tried (``benchmarks/cpsat_polish.py``,
``benchmarks/results/cpsat-polish.json``); OR-Tools is no longer a dependency.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import highspy
import numpy as np

from planner.model.lp import INF, LpBuilder, MatrixForm, new_highs
from planner.model.lp_worker import start_worker
from planner.model.machine import busy_elsewhere
from planner.model.problem import Problem, Request
from planner.model.result import (
    SolverStatus,
    StageResult,
    highs_outcome,
    relative_gap,
    status_from_gap,
)
from planner.model.swap_search import swap_search

SCALE = 100  # the objective in integer units: GPU-hours × SCALE
MIN_PART_SECONDS = 0.5  # the least time a part gets (HiGHS needs its presolve and root)
STAGE = "highs-mip"  # the stage's solver name in plan.json
LNS_SHARE = 0.5  # of a part's time: local search before branch and cut (improve_placement)
POLISH_SHARE = 0.05  # of a part's time, the last: the swap search after branch and cut
#: ``PLANNER_RESERVATION_WORKERS``: how many parts are solved at once, each in a worker
#: process (1: one after another, in this process); unset: :func:`part_workers` decides
WORKERS_ENV = "PLANNER_RESERVATION_WORKERS"
#: the fewest columns (candidate starts) of a part worth a worker process: the 10× daily
#: sample's parts that need a search have at most 107 and close in well under a second,
#: less than a worker's start-up; a reservation-heavy part has thousands (r10: 1,819)
WORKER_MIN_COLUMNS = 500
LNS_ROUNDS = 3  # local search rounds at most over every neighbourhood
NEIGHBOURHOOD = 20  # requests a local search sub-MIP re-places together
SUB_MIP_NODES = 200  # branch-and-bound nodes a sub-MIP may take (a deterministic work limit)
SUB_MIP_SECONDS = 0.5  # and its time (a guard)
#: of a part's time, before the swap search's: whole clusters re-placed (cluster_polish),
#: in the first pass only for a part given at least CLUSTER_MIN_PART_SECONDS: polishing
#: pays from a good placement, and HiGHS needs seconds to make one (x10r10, first pass
#: alone, two workers, about 6 s a part: 1.25 % without, 0.97 % with; in turn, about
#: 3 s a part, with the second pass: 0.80 % without, 1.22 % with)
CLUSTER_SHARE = 0.25
CLUSTER_MIN_PART_SECONDS = 5.0
CLUSTER_ROUNDS = 10  # rounds at most of the cluster polish
CLUSTER_NODES = 2000  # branch-and-bound nodes a whole cluster's sub-MIP may take
CLUSTER_SECONDS = 3.0  # and its time (a guard)


@dataclass(frozen=True)
class WorkLimits:
    """What a part may do in the work-limited mode (``solver.limits = "work"``): counts.

    Every step of :func:`solve_part` stops at a count instead of a share of the time
    left: the local search after ``lns_rounds`` rounds of sub-MIPs of ``sub_mip_nodes``
    nodes, HiGHS's branch and cut after ``nodes`` nodes (``mip_max_nodes``), the cluster
    polish after ``cluster_rounds`` rounds of sub-MIPs of ``cluster_nodes`` nodes, the
    swap search after ``swap_moves`` moves (planning runs no second pass with them:
    :func:`improve_reservation_model` keeps them when called). HiGHS with a fixed seed and
    counts is deterministic, and a part's outcome does
    not depend on the other parts, so the same inputs give the same placement whatever
    the machine's load, whichever process solves a part and however many at once.
    ``guard_seconds`` is a wall-clock guard per part, far beyond what the counts take: a
    part stopped by it (counted in :attr:`ReservationModel.guarded`, and in ``plan.json``)
    may depend on the load after all.

    The defaults, measured on x10r10 (10 parts of 545-645 requests) one part after
    another at load 7-9: the stage's gap 0.70 % in 195 CPU-s; with 500 nodes and a
    cluster polish of 2,000 nodes a sub-MIP, 0.55 % in 308 CPU-s; with 100 nodes and two
    polish rounds of 150, 0.64 % in 258 CPU-s. HiGHS's root (presolve and cuts, which the
    node count does not bound) is most of a part's branch and cut, and its bound is what
    brings the gap below the LP relaxation's.
    """

    nodes: int = 200
    lns_rounds: int = 1
    sub_mip_nodes: int = SUB_MIP_NODES
    cluster_rounds: int = 1
    cluster_nodes: int = 300
    swap_moves: int = 40_000
    guard_seconds: float = 600.0

    def record(self) -> dict[str, int | float]:
        """The limits as ``plan.json`` records them (``solver.limits.part``)."""
        return {"nodes": self.nodes, "lns_rounds": self.lns_rounds,
                "sub_mip_nodes": self.sub_mip_nodes, "cluster_rounds": self.cluster_rounds,
                "cluster_nodes": self.cluster_nodes, "swap_moves": self.swap_moves,
                "guard_seconds": self.guard_seconds}

def fixed_nodes(problem: Problem) -> np.ndarray:
    """F_kt: nodes held by reservations kept from the previous plan, (K, T)."""
    _, n_clusters, n_periods = problem.shape
    held = np.zeros((n_clusters, n_periods), dtype=np.int64)
    for f in problem.fixed:
        for t in range(n_periods):
            if f.start < problem.period_end[t] and f.end > problem.period_start[t]:
                held[f.cluster, t] += f.nodes
    return held


def fixed_ngh(problem: Problem) -> np.ndarray:
    """NGH per project still to be charged for kept reservations (from ``as_of``), (P,)."""
    out = np.zeros(len(problem.projects))
    as_of = problem.scenario.config.as_of
    for f in problem.fixed:
        hours = (f.end - max(f.start, as_of)).total_seconds() / 3600.0
        out[f.project] += f.nodes * problem.gpus_per_node[f.cluster] * hours * problem.rate[
            f.cluster]
    return out


def _previous_start(problem: Problem, request: Request) -> int | None:
    """The previous plan's start period of ``request`` when it is still allowed."""
    prev = problem.previous
    if prev is not None and request.request_id in prev.starts:
        when = prev.starts[request.request_id]
        if when in problem.period_start and problem.period_of(when) in request.starts:
            return problem.period_of(when)
    return None


def reference_start(problem: Problem, request: Request) -> int:
    """s⁰_r: the previous plan's start when it is allowed, else the earliest allowed start."""
    warm = _previous_start(problem, request)
    return request.starts[0] if warm is None else warm


def displacement(problem: Problem, request: Request,
                 demand: np.ndarray | None = None) -> np.ndarray:
    """δ × elastic GPU-hours (× SCALE) each allowed start would push out of contended periods.

    In period t the request holds h = n_r · gpn · hours_t GPU-hours; where total elastic
    demand D exceeds what is left (cap − h), min(h, D − (cap − h)) GPU-hours of elastic
    work lose their place. Other reservations are ignored: it is a tie-breaker.
    ``demand``: the elastic demand per cluster and period, Σ_p dem (computed when not given).
    """
    k = request.cluster
    demand = (problem.dem.sum(axis=0) if demand is None else demand)[k]
    held = request.nodes * problem.gpus_per_node[k] * problem.hours
    lost = np.minimum(held, np.maximum(0.0, demand - (problem.cap[k] - held)))
    window = np.cumsum(np.concatenate([[0.0], lost]))
    starts = np.array(request.starts)
    per_start = window[starts + request.length] - window[starts]
    weight = problem.model.objective.reservation_displacement
    return np.round(per_start * weight * SCALE).astype(np.int64)


def start_values(problem: Problem, request: Request,
                 demand: np.ndarray | None = None) -> np.ndarray:
    """The objective coefficient (× SCALE, integer) of each allowed start of ``request``.

    v_r, less λ v_r |s − s⁰_r| and the displacement δ_r(s) (R4) where the request has a
    choice of start (with one start, both are the same for every plan: left out).
    """
    values = np.full(len(request.starts), int(round(request.gpu_hours * SCALE)), dtype=np.int64)
    if len(request.starts) < 2:
        return values
    late = int(round(request.gpu_hours * SCALE * problem.model.objective.reservation_lateness))
    if late:
        values -= late * np.abs(np.array(request.starts) - reference_start(problem, request))
    displaced = displacement(problem, request, demand)
    if displaced.max() > displaced.min():
        values -= displaced
    return values


def _costs(requests: list[Request], headroom: np.ndarray
           ) -> tuple[dict[int, list[int]], list[int], np.ndarray]:
    """Requests by project, each request's NGH and each project's limit, in integer units."""
    by_project: dict[int, list[int]] = {}
    for i, r in enumerate(requests):
        by_project.setdefault(r.project, []).append(i)
    cost = [int(np.ceil(r.ngh * SCALE)) for r in requests]
    limit = np.floor(np.maximum(0.0, headroom) * SCALE).astype(np.int64)
    return by_project, cost, limit


@dataclass
class ReservationPart:
    """One independent part: the clusters binding budget rows tie together, and their requests.

    ``lp`` is the part's MIP (R1)–(R3) with the objective (R4); column c is the start
    ``start[c]`` of request ``requests[request_of[c]]``. ``warm`` is the warm start, a valid
    placement of the part's requests ({request_id: start period}), from ``warm_source``
    (``+local-search`` once :func:`solve_part` improved it); ``relaxed`` the value of the
    LP relaxation the warm start rounded (a bound of the part).
    """

    clusters: tuple[int, ...]
    requests: list[Request]
    values: list[np.ndarray]  # objective coefficient of each y_rs (× SCALE), per request
    lp: LpBuilder
    request_of: np.ndarray
    start: np.ndarray
    warm: dict[str, int]
    warm_source: str
    relaxed: float = INF  # the LP relaxation's value (× SCALE), a bound; INF: not solved
    relaxed_values: np.ndarray | None = None  # its column values, when solved
    guarded: bool = False  # a work-limited solve of it was stopped by its wall-clock guard


@dataclass
class ReservationModel:
    """The reservation stage: its independent parts, each a MIP.

    ``outcomes`` is filled by :func:`solve_reservation_model`: each part's own outcome
    (objective and bound × SCALE, as its HiGHS reported them), aligned with ``parts``,
    so that a gap can be traced to the part (and clusters) that leaves it; ``placements``
    each part's placement ({request_id: start}), from which :func:`improve_reservation_model`
    goes on.
    """

    parts: list[ReservationPart]
    outcomes: list[StageResult | None] = field(default_factory=list)
    placements: list[dict[str, int] | None] = field(default_factory=list)
    workers: int = 1  # how many parts the first pass solved at once
    seconds: float = 0.0  # the passes' wall-clock seconds so far
    work: WorkLimits | None = None  # the passes' work limits (None: time limits)

    @property
    def guarded(self) -> int:
        """Parts a work-limited pass stopped at their wall-clock guard (0 normally)."""
        return sum(part.guarded for part in self.parts)

    @property
    def requests(self) -> list[Request]:
        """Every placeable request, part by part."""
        return [r for part in self.parts for r in part.requests]

    @property
    def values(self) -> list[np.ndarray]:
        """Each placeable request's start coefficients, aligned with :attr:`requests`."""
        return [v for part in self.parts for v in part.values]

    @property
    def hint(self) -> dict[str, int]:
        """The whole warm start: every part's."""
        return {k: s for part in self.parts for k, s in part.warm.items()}


def independent_parts(requests: list[Request], headroom: np.ndarray) -> list[list[int]]:
    """Request indices grouped by the clusters that binding budget rows (R2) join.

    A budget row can bind only when the project's requests cost more than it has left;
    such a row joins every cluster its project requests. Parts come in the order of
    their lowest cluster index, requests in input order within a part.
    """
    by_project, cost, limit = _costs(requests, headroom)
    root: dict[int, int] = {r.cluster: r.cluster for r in requests}

    def find(k: int) -> int:
        while root[k] != k:
            root[k] = root[root[k]]
            k = root[k]
        return k

    for p, idx in sorted(by_project.items()):
        if sum(cost[i] for i in idx) > limit[p]:
            first = find(requests[idx[0]].cluster)
            for i in idx[1:]:
                other = find(requests[i].cluster)
                if other != first:
                    root[max(first, other)] = min(first, other)
                    first = min(first, other)
    parts: dict[int, list[int]] = {}
    for i, r in enumerate(requests):
        parts.setdefault(find(r.cluster), []).append(i)
    return [parts[k] for k in sorted(parts)]


def free_nodes(problem: Problem) -> np.ndarray:
    """N_k − F_kt: nodes left for new reservations per cluster and period, (K, T)."""
    return problem.nodes[:, None] - fixed_nodes(problem)


def relaxation(problem: Problem, requests: list[Request], values: list[np.ndarray],
               headroom: np.ndarray, integer: bool = False, room: np.ndarray | None = None
               ) -> tuple[LpBuilder, np.ndarray, np.ndarray]:
    """(R1)–(R3) with y_rs ∈ [0, 1] (or binary with ``integer``); each column's request, start.

    Rows: one ``one_start`` a request, one ``nodes`` row per period of each cluster the
    requests use, one ``budget`` row per project they belong to, free where the project's
    requests all fit its budget (HiGHS's presolve drops free and empty rows). ``room``:
    :func:`free_nodes`, computed when not given.
    """
    room = free_nodes(problem) if room is None else room
    request_of = np.repeat(np.arange(len(requests)), [len(r.starts) for r in requests])
    start = np.concatenate([np.asarray(r.starts, dtype=np.int64) for r in requests])
    length = np.array([r.length for r in requests], dtype=np.int64)[request_of]
    used, cluster = np.unique(np.array([r.cluster for r in requests], dtype=np.int64),
                              return_inverse=True)
    cluster = cluster[request_of]  # the part's own cluster index of each column
    nodes = np.array([r.nodes for r in requests], dtype=float)[request_of]
    lp = LpBuilder()
    y = lp.add_columns("y", np.zeros(len(start)), 1.0, np.concatenate(values).astype(float),
                       integer=integer)
    lp.add_rows("one_start", np.full(len(requests), -INF), 1.0, request_of, y, 1.0)
    n_periods = room.shape[1]
    col = np.repeat(y, length)  # a column covers L_r periods from its start
    period = np.repeat(start, length) + (np.arange(col.size) - np.repeat(np.cumsum(length)
                                                                         - length, length))
    lp.add_rows("nodes", np.full(used.size * n_periods, -INF),
                room[used].ravel().astype(float),
                np.repeat(cluster, length) * n_periods + period, col, np.repeat(nodes, length))
    _, cost, limit = _costs(requests, headroom)
    owners, project = np.unique(np.array([r.project for r in requests], dtype=np.int64),
                                return_inverse=True)
    asked = np.bincount(project, weights=np.asarray(cost, dtype=float), minlength=owners.size)
    upper = np.where(asked > limit[owners], limit[owners].astype(float), INF)  # cannot bind: free
    lp.add_rows("budget", np.full(owners.size, -INF), upper, project[request_of],
                y, np.asarray(cost, dtype=float)[request_of])
    return lp, request_of, start


class _Packer:
    """Places requests one by one while their nodes (R1) and budget (R2) still fit."""

    def __init__(self, problem: Problem, requests: list[Request], headroom: np.ndarray,
                 room: np.ndarray | None = None) -> None:
        _, self.cost, limit = _costs(requests, headroom)
        self.requests = requests
        self.left = limit.copy()
        self.free = (free_nodes(problem) if room is None else room).copy()
        self.placed: dict[str, int] = {}

    def take(self, i: int, s: int) -> bool:
        """Place request ``i`` at start ``s`` when it is not placed yet and still fits."""
        r = self.requests[i]
        if r.request_id in self.placed or self.cost[i] > self.left[r.project] or (
                self.free[r.cluster, s:s + r.length] < r.nodes).any():
            return False
        self.free[r.cluster, s:s + r.length] -= r.nodes
        self.left[r.project] -= self.cost[i]
        self.placed[r.request_id] = s
        return True

    def fill(self, values: list[np.ndarray]) -> dict[str, int]:
        """Greedy: the rest, largest first, each at its best start that fits; the placement."""
        for i in sorted(range(len(self.requests)), key=lambda i: (-self.requests[i].gpu_hours, i)):
            for j in np.argsort(-values[i], kind="stable"):
                if values[i][j] > 0 and self.take(i, self.requests[i].starts[j]):
                    break
        return self.placed


def greedy_placement(problem: Problem, requests: list[Request], values: list[np.ndarray],
                     headroom: np.ndarray, room: np.ndarray | None = None) -> dict[str, int]:
    """A valid placement: largest request first, each at its best start that still fits."""
    return _Packer(problem, requests, headroom, room).fill(values)


def previous_placement(problem: Problem, requests: list[Request], values: list[np.ndarray],
                       headroom: np.ndarray, room: np.ndarray | None = None) -> dict[str, int]:
    """The previous plan's starts that still fit (largest first), the rest filled greedily."""
    packer = _Packer(problem, requests, headroom, room)
    for i in sorted(range(len(requests)), key=lambda i: (-requests[i].gpu_hours, i)):
        warm = _previous_start(problem, requests[i])
        if warm is not None:
            packer.take(i, warm)
    return packer.fill(values)


def relaxed_solution(problem: Problem, requests: list[Request], values: list[np.ndarray],
                     headroom: np.ndarray, room: np.ndarray | None = None
                     ) -> tuple[np.ndarray, float]:
    """The LP relaxation of (R1)–(R3): its column values and its value (× SCALE), a bound.

    With no optimal LP solution: zeros and ``INF`` (no bound).
    """
    opts = problem.model.solver
    lp, _, start = relaxation(problem, requests, values, headroom, room=room)
    highs = new_highs(opts.threads, opts.random_seed)
    highs.passModel(lp.to_highs(maximize=True))
    highs.run()
    relaxed = np.asarray(highs.getSolution().col_value)
    if highs.getModelStatus() != highspy.HighsModelStatus.kOptimal or relaxed.size != start.size:
        return np.zeros(start.size), INF
    return relaxed, float(highs.getInfo().objective_function_value)


def rounded_placement(problem: Problem, requests: list[Request], values: list[np.ndarray],
                      headroom: np.ndarray, room: np.ndarray | None = None,
                      relaxed: np.ndarray | None = None) -> dict[str, int]:
    """A valid placement: the LP relaxation's starts, rounded greedily.

    Starts go in decreasing LP value (ties: higher objective coefficient), each taken when
    its request is not yet placed and its nodes (R1) and its project's budget (R2) still
    fit; requests left over then take their best start that fits, largest first.
    ``relaxed``: the LP's column values (:func:`relaxed_solution`, solved when not given).
    """
    if relaxed is None:
        relaxed, _ = relaxed_solution(problem, requests, values, headroom, room)
    request_of = np.repeat(np.arange(len(requests)), [len(r.starts) for r in requests])
    start = np.concatenate([np.asarray(r.starts, dtype=np.int64) for r in requests])
    coefficient = np.concatenate(values)
    packer = _Packer(problem, requests, headroom, room)
    for c in np.lexsort((np.arange(start.size), -coefficient, -relaxed)):
        if relaxed[c] > 1e-6:
            packer.take(int(request_of[c]), int(start[c]))
    return packer.fill(values)


def placement_value(requests: list[Request], values: list[np.ndarray],
                    placed: dict[str, int]) -> int:
    """The objective (× SCALE) of a placement, as the model counts it."""
    return sum(int(v[r.starts.index(placed[r.request_id])])
               for r, v in zip(requests, values, strict=True) if r.request_id in placed)


def warm_start(problem: Problem, requests: list[Request], values: list[np.ndarray],
               headroom: np.ndarray, room: np.ndarray | None = None
               ) -> tuple[dict[str, int], str, float, np.ndarray | None]:
    """The best valid placement among greedy, LP-rounded and (with ``--previous``) previous.

    Ties go to the first in that order: previous, LP-rounded, greedy. When the previous
    or the greedy placement already puts every request at its best start (nothing can be
    worth more), the LP is not solved. Returns the placement, its source, the LP
    relaxation's value (× SCALE; ``INF`` when not solved) and its column values (``None``).
    """
    best_possible = sum(max(0, int(v.max())) for v in values)
    candidates = []
    if problem.previous is not None:
        candidates.append(("previous", previous_placement(problem, requests, values, headroom,
                                                              room)))
    greedy = greedy_placement(problem, requests, values, headroom, room)
    bound, relaxed = INF, None
    if all(placement_value(requests, values, c) < best_possible for _, c in candidates) and (
            placement_value(requests, values, greedy) < best_possible):
        relaxed, bound = relaxed_solution(problem, requests, values, headroom, room)
        candidates.append(("lp-rounded", rounded_placement(problem, requests, values, headroom,
                                                            room, relaxed)))
    candidates.append(("greedy", greedy))
    source, best = max(candidates, key=lambda c: placement_value(requests, values, c[1]))
    return best, source, bound, relaxed


def build_reservation_model(problem: Problem, headroom: np.ndarray) -> ReservationModel:
    """The independent parts, each its MIP (R1)–(R4) and warm start; ``headroom`` is H_p."""
    requests = [r for r in problem.requests if r.starts]
    room = free_nodes(problem)  # once: kept reservations are walked period by period
    demand = problem.dem.sum(axis=0)  # once, for every request's displacement (R4)
    parts = []
    for idx in independent_parts(requests, headroom):
        mine = [requests[i] for i in idx]
        values = [start_values(problem, r, demand) for r in mine]
        lp, request_of, start = relaxation(problem, mine, values, headroom, True, room)
        warm, source, relaxed, relaxed_values = warm_start(problem, mine, values, headroom,
                                                           room)
        parts.append(ReservationPart(tuple(sorted({r.cluster for r in mine})), mine, values, lp,
                                     request_of, start, warm, source, relaxed,
                                     relaxed_values))
    return ReservationModel(parts)


def _warm_vector(part: ReservationPart, placement: dict[str, int] | None = None
                 ) -> np.ndarray:
    """A placement (the warm start when not given) as the part's column values."""
    placement = part.warm if placement is None else placement
    x = np.zeros(part.start.size)
    column = 0
    for r in part.requests:
        if r.request_id in placement:
            x[column + r.starts.index(placement[r.request_id])] = 1.0
        column += len(r.starts)
    return x


def _fits(form: MatrixForm, x: np.ndarray) -> bool:
    """Whether column values ``x`` (0/1) keep every row of ``form`` within its bounds."""
    if not np.all((x == 0) | (x == 1)):
        return False
    rows = np.repeat(np.arange(form.n_rows), np.diff(form.start))
    activity = np.bincount(rows, weights=form.value * x[form.index], minlength=form.n_rows)
    return bool(np.all(activity <= form.row_upper + 1e-6)
                and np.all(activity >= form.row_lower - 1e-6))


def neighbourhoods(part: ReservationPart) -> list[np.ndarray]:
    """The request sets local search re-solves (:func:`improve_placement`), in order.

    Cluster by cluster (the part's order), the cluster's requests sorted by first
    allowed start (then input order), in runs of :data:`NEIGHBOURHOOD` that overlap by
    half: requests that compete for the same nodes at the same time are re-placed
    together, a few at a time, while the others stay where they are.
    """
    step = max(1, NEIGHBOURHOOD // 2)
    out = []
    for k in part.clusters:
        mine = sorted((r.starts[0], i) for i, r in enumerate(part.requests) if r.cluster == k)
        order = np.array([i for _, i in mine], dtype=np.int64)
        for first in range(0, max(1, order.size - step), step):
            out.append(order[first:first + NEIGHBOURHOOD])
    return out


def cluster_neighbourhoods(part: ReservationPart) -> list[np.ndarray]:
    """Every request of one cluster, cluster by cluster (the part's order).

    The cluster polish's request sets (:func:`cluster_polish`): one cluster's requests
    re-placed at once, the other clusters' fixed, so that what binds them across
    clusters (budget rows) is what the others leave.
    """
    out = []
    for k in part.clusters:
        mine = np.array([i for i, r in enumerate(part.requests) if r.cluster == k],
                        dtype=np.int64)
        if mine.size:
            out.append(mine)
    return out


def cluster_polish(part: ReservationPart, placement: dict[str, int], deadline: float,
                   threads: int, seed: int) -> tuple[dict[str, int], int]:
    """From a placement, each cluster's requests re-placed by a sub-MIP, the others fixed.

    :func:`improve_placement` over :func:`cluster_neighbourhoods`, up to
    :data:`CLUSTER_ROUNDS` rounds, each sub-MIP at most :data:`CLUSTER_NODES` nodes and
    :data:`CLUSTER_SECONDS`. Where the runs of :func:`neighbourhoods` improve a poor start
    quickly, a whole cluster's sub-MIP improves a good one: it moves every request of a
    cluster at once, against budgets fixed elsewhere, and from a good placement gains
    more than the same time spent on the first pass's pipeline again.
    """
    return improve_placement(part, deadline, threads, seed, cluster_neighbourhoods(part),
                             placement, CLUSTER_ROUNDS, CLUSTER_NODES, CLUSTER_SECONDS)


def improve_placement(part: ReservationPart, deadline: float, threads: int, seed: int,
                      hoods: list[np.ndarray] | None = None,
                      placement: dict[str, int] | None = None, rounds: int = LNS_ROUNDS,
                      nodes: int = SUB_MIP_NODES, seconds: float = SUB_MIP_SECONDS
                      ) -> tuple[dict[str, int], int]:
    """Local search from the warm start: each neighbourhood re-solved, the rest fixed.

    For each request set of ``hoods`` (:func:`neighbourhoods` when not given), from
    ``placement`` (the part's warm start when not given), HiGHS solves the part's MIP with every
    other request's columns fixed at the incumbent (a MIP of some twenty requests, their
    nodes and budget what the others leave), from the incumbent; a placement worth more
    that keeps every row (:func:`_fits`) becomes the incumbent; a run whose requests all
    sit at their best start already is skipped (the others' room is theirs to keep, so
    nothing can gain). Each round takes the runs in decreasing shortfall (what their
    requests lack of their value in the LP relaxation, or of their best start values
    when the LP was not solved, at the round's start; ties: in order), so
    a search cut short by its deadline has tried the likeliest first. Rounds repeat until one
    finds nothing better, ``rounds`` are done, or ``deadline``
    (``time.perf_counter()``) passes. Each sub-MIP stops at ``nodes`` nodes (a
    work limit: the same inputs give the same result) and, as a guard, at
    ``seconds``. Returns the placement ({request_id: start}) and its value.
    """
    form = part.lp.matrix(maximize=True)
    lp = part.lp.to_highs(maximize=True)
    coefficient = np.concatenate(part.values)
    x = _warm_vector(part, placement)
    value = int(coefficient @ x)
    columns = np.concatenate([[0], np.cumsum([len(r.starts) for r in part.requests])])
    best = np.array([max(0, int(v.max())) for v in part.values])
    # what each request may still gain: its LP relaxation value (else its best start) less
    # its value now
    target = best if part.relaxed_values is None else np.bincount(
        part.request_of, weights=coefficient * part.relaxed_values, minlength=len(part.requests))
    hoods = neighbourhoods(part) if hoods is None else hoods
    for _ in range(rounds):
        better = False
        now = np.bincount(part.request_of, weights=coefficient * x, minlength=len(part.requests))
        short = [float(np.maximum(0.0, target[hood] - now[hood]).sum()) for hood in hoods]
        for h in sorted(range(len(hoods)), key=lambda h: (-short[h], h)):
            hood = hoods[h]
            left = deadline - time.perf_counter()
            if left <= 0:
                return _placement(part, x), value
            now = np.bincount(part.request_of, weights=coefficient * x,
                              minlength=len(part.requests))
            if (now[hood] >= best[hood]).all():
                continue  # every request of the run at its best start: nothing to gain
            free = np.zeros(x.size, dtype=bool)
            for i in hood:
                free[columns[i]:columns[i + 1]] = True
            lp.col_lower_ = np.where(free, 0.0, x)
            lp.col_upper_ = np.where(free, 1.0, x)
            highs = new_highs(threads, seed, min(seconds, left))
            highs.setOptionValue("mip_rel_gap", 0.0)
            highs.setOptionValue("mip_max_nodes", nodes)
            highs.passModel(lp)
            start = highspy.HighsSolution()
            start.col_value = x.tolist()
            start.value_valid = True
            highs.setSolution(start)
            highs.run()
            solution = highs.getSolution()
            if not solution.value_valid:
                continue
            y = np.round(np.asarray(solution.col_value))
            if y.size == x.size and int(coefficient @ y) > value and _fits(form, y):
                x, value, better = y, int(coefficient @ y), True
        if not better:
            break
    return _placement(part, x), value


def _placement(part: ReservationPart, x: np.ndarray) -> dict[str, int]:
    """Column values as a placement: {request_id: start period} of the chosen starts."""
    chosen = x > 0.5
    return {part.requests[int(i)].request_id: int(s)
            for i, s in zip(part.request_of[chosen], part.start[chosen], strict=True)}


def relaxation_bound(part: ReservationPart, threads: int, seed: int) -> float:
    """The part's LP relaxation value (× SCALE), a bound of its MIP; inf when not solved."""
    lp = part.lp.to_highs(maximize=True)
    lp.integrality_ = []  # no integrality: the LP relaxation
    highs = new_highs(threads, seed)
    highs.passModel(lp)
    highs.run()
    if highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return INF
    return float(highs.getInfo().objective_function_value)


def solve_part(part: ReservationPart, time_limit: float, mip_gap: float, threads: int,
               seed: int, polish_only: bool = False, work: WorkLimits | None = None
               ) -> tuple[dict[str, int], StageResult]:
    """One part: local search from its warm start, HiGHS, then polished.

    When the warm start is further than ``mip_gap`` from the part's LP relaxation value,
    :func:`improve_placement` gets :data:`LNS_SHARE` of ``time_limit`` and its placement
    becomes the warm start; HiGHS's branch and cut then gets the rest (at least
    :data:`MIN_PART_SECONDS`) but the last :data:`CLUSTER_SHARE` (when ``time_limit`` is
    at least :data:`CLUSTER_MIN_PART_SECONDS`) and :data:`POLISH_SHARE`, for a better
    placement and the bound. When HiGHS's placement
    (or the warm start, where HiGHS returns less) is not proven within ``mip_gap``, the
    cluster polish (:func:`cluster_polish`) takes it up in its share, then the swap search
    (:func:`swap_search`) for the time left: HiGHS's placements are local optima of its
    sub-MIPs, not of single insertions with ejections, which it finds in a fraction of a
    second. ``polish_only`` (the second pass, :func:`improve_reservation_model`): the
    warm start is polished in the whole time, the cluster polish then the swap search, with
    no local search by runs and no HiGHS (restarted from a placement it has just made,
    HiGHS's branch and cut added nothing to it in 10 s on x10r10's hardest parts). The
    bound is the lower of HiGHS's ``mip_dual_bound`` and the LP relaxation's value (both
    true bounds: a HiGHS stopped before its root has only a loose one; with
    ``polish_only``, the LP relaxation's alone); the objective the value of the placement
    returned, counted with the model's own integer coefficients. Outcome in × SCALE units.

    ``work`` (the work-limited mode): the same steps, each stopped by its count in
    :class:`WorkLimits` instead of its share of ``time_limit`` (which is then ignored:
    every step's deadline is the part's guard, ``work.guard_seconds`` from its start);
    the cluster polish runs whatever the part's size. ``part.guarded`` says whether the
    guard was reached.
    """
    started = time.perf_counter()
    if work is not None:
        time_limit = work.guard_seconds
    warm_value = placement_value(part.requests, part.values, part.warm)
    relaxed = part.relaxed
    if relaxed == INF and warm_value < sum(max(0, int(v.max())) for v in part.values):
        relaxed = relaxation_bound(part, threads, seed)
    outcome = None
    cluster_share = (CLUSTER_SHARE if work is not None or time_limit >= CLUSTER_MIN_PART_SECONDS
                     else 0.0)
    # each step's end, from the part's start: its share of the time, or (work) the guard
    lns_until, highs_until, cluster_until = (
        (time_limit,) * 3 if work is not None else
        (LNS_SHARE * time_limit, (1 - cluster_share - POLISH_SHARE) * time_limit,
         (1 - POLISH_SHARE) * time_limit))
    if polish_only:
        placed, objective, bound = dict(part.warm), float(warm_value), relaxed
    else:
        if _short_of(relaxed, warm_value, mip_gap) and LNS_SHARE > 0:
            improved, value = (
                improve_placement(part, started + lns_until, threads, seed) if work is None
                else improve_placement(part, started + lns_until, threads, seed,
                                       rounds=work.lns_rounds, nodes=work.sub_mip_nodes,
                                       seconds=time_limit))
            if value > warm_value:
                part.warm, part.warm_source = improved, f"{part.warm_source}+local-search"
        left = highs_until - (time.perf_counter() - started)
        highs = new_highs(threads, seed, max(MIN_PART_SECONDS, left))
        highs.setOptionValue("mip_rel_gap", float(mip_gap))
        if work is not None:
            highs.setOptionValue("mip_max_nodes", int(work.nodes))
        highs.passModel(part.lp.to_highs(maximize=True))
        warm = highspy.HighsSolution()
        warm.col_value = _warm_vector(part).tolist()
        warm.value_valid = True
        highs.setSolution(warm)
        highs.run()
        outcome = highs_outcome(highs, STAGE, time.perf_counter() - started)
        warm_value = placement_value(part.requests, part.values, part.warm)
        if outcome.status is SolverStatus.TIME_LIMIT:
            # stopped before it took even the warm start: placing none of the part is
            # valid; its bound is then each request's best start value, summed (said, not
            # hidden)
            trivial = float(sum(max(0, int(v.max())) for v in part.values))
            _mark_guard(part, work, started)
            return {}, StageResult(STAGE, SolverStatus.FEASIBLE, 0.0, trivial, 1.0,
                                   outcome.seconds)
        if outcome.status not in (SolverStatus.OPTIMAL, SolverStatus.FEASIBLE):
            return {}, outcome
        placed = _placement(part, np.asarray(highs.getSolution().col_value))
        bound = min(outcome.bound, relaxed)
        objective = outcome.objective
        if warm_value > objective:
            # HiGHS maps the warm start into its presolved space, where dual fixings can
            # cost it value ("MIP start solution is feasible in the reduced space" at less
            # than it was), and may stop before it finds better: the warm start is then
            # the placement, its value the objective (the same integer coefficients)
            placed, objective = dict(part.warm), float(warm_value)
    if relative_gap(objective, bound, floor=1.0) > mip_gap:
        form = part.lp.matrix(maximize=True)
        polishers = [(_cluster_polish, cluster_until, cluster_share > 0 or polish_only),
                     (_swap_polish, time_limit, POLISH_SHARE > 0)]
        for polish, until, wanted in polishers:
            if not wanted:
                continue
            polished, value = polish(part, placed, started + until, threads, seed, work)
            if value > objective and _fits(form, _warm_vector(part, polished)):
                placed, objective = polished, float(value)
    _mark_guard(part, work, started)
    if outcome is not None and objective == outcome.objective and bound == outcome.bound:
        return placed, outcome
    gap = relative_gap(objective, bound, floor=1.0)
    return placed, StageResult(STAGE, status_from_gap(gap), objective, bound, gap,
                               time.perf_counter() - started)


def _mark_guard(part: ReservationPart, work: WorkLimits | None, started: float) -> None:
    """Note on ``part`` that a work-limited solve ran into its wall-clock guard."""
    if work is not None and time.perf_counter() - started >= work.guard_seconds:
        part.guarded = True


def _cluster_polish(part: ReservationPart, placement: dict[str, int], deadline: float,
                    threads: int, seed: int, work: WorkLimits | None
                    ) -> tuple[dict[str, int], int]:
    """:func:`cluster_polish`, with the work limits' rounds and nodes when given."""
    if work is None:
        return cluster_polish(part, placement, deadline, threads, seed)
    return improve_placement(part, deadline, threads, seed, cluster_neighbourhoods(part),
                             placement, work.cluster_rounds, work.cluster_nodes,
                             work.guard_seconds)


def _swap_polish(part: ReservationPart, placement: dict[str, int], deadline: float,
                 threads: int, seed: int, work: WorkLimits | None
                 ) -> tuple[dict[str, int], int]:
    """:func:`swap_search` in the polishers' signature (it needs no HiGHS)."""
    if work is None:
        return swap_search(part, placement, deadline)
    return swap_search(part, placement, deadline, work.swap_moves)


def _solve_in_turn(built: ReservationModel, order: list[int], weight: dict[int, float],
                   time_limit: float, mip_gap: float, threads: int, seed: int, started: float,
                   polish_only: bool = False) -> dict[int, tuple[dict[str, int], StageResult]]:
    """Parts of ``order`` one after another in this process, until one fails.

    Each gets its share by ``weight`` of the time left when it starts (:func:`part_time_limit`);
    with work limits (``built.work``), its counts alone.
    """
    queued = sum(weight[j] for j in order)
    done: dict[int, tuple[dict[str, int], StageResult]] = {}
    for j in order:
        limit = part_time_limit(time_limit - (time.perf_counter() - started), weight[j], queued)
        queued -= weight[j]
        done[j] = solve_part(built.parts[j], limit, mip_gap, threads, seed, polish_only,
                             built.work)
        if done[j][1].status not in (SolverStatus.OPTIMAL, SolverStatus.FEASIBLE):
            break
    return done


def part_time_limit(left: float, weight: float, queued_weight: float) -> float:
    """The time limit of the next part: its share of the time left, by weight.

    ``left``: seconds to the stage's deadline; ``weight``: the part's (its columns in the
    first pass, what it lacks of its bound in the second), ``queued_weight``: that of
    every part not started yet, this one included. The share is
    ``left × weight ÷ queued_weight``, at least :data:`MIN_PART_SECONDS`; as it is taken
    when the part starts, what a part leaves (stopping at its gap, or after its local
    search found everything at its best) goes to the parts after it.
    """
    return max(MIN_PART_SECONDS, left * weight / max(1, queued_weight))


def free_worker_seconds(now: float, deadline: float, workers: int,
                        busy_until: Iterable[float]) -> float:
    """Worker-seconds free for the parts not started yet, from ``now`` to ``deadline``.

    ``workers`` workers, one of them (the one taking a part) free now, the others busy
    until the times in ``busy_until`` (their parts' due ends): each gives the time from
    when it is free to the deadline. Without the others' commitments, a part taken late
    would be given time the others' parts already hold, and the last part what is left.
    """
    left = max(0.0, deadline - now)
    busy = list(busy_until)
    idle = workers - len(busy)
    return idle * left + sum(max(0.0, deadline - max(now, end)) for end in busy)


def _short_of(relaxed: float, warm: float, mip_gap: float) -> bool:
    """Whether a warm start's value is further than ``mip_gap`` below a known LP relaxation."""
    return relaxed < INF and relaxed > warm * (1 + mip_gap)


def needs_search(part: ReservationPart, mip_gap: float) -> bool:
    """Whether the part's warm start is further than ``mip_gap`` from its LP relaxation."""
    return _short_of(part.relaxed, placement_value(part.requests, part.values, part.warm),
                     mip_gap)


def part_workers(built: ReservationModel, mip_gap: float) -> int:
    """How many parts to solve at once, each in a worker process of its own.

    With work limits (``built.work``), the machine's cores rather than the cores free
    now: how many run at once changes no placement then, and the load should not
    change what the plan records either.

    :data:`WORKERS_ENV` when set to a whole number ≥ 1 (anything else counts as unset); else
    the cores other processes leave free, this process's own included (it waits while
    its workers solve): cores − the cores busy elsewhere right now
    (:func:`~planner.model.machine.busy_elsewhere`; where that cannot be read, the
    1-minute load average less this process's one), rounded, at most the parts
    whose warm start needs a search (:func:`needs_search`) and which have at least
    :data:`WORKER_MIN_COLUMNS` columns, and 1 unless at least two do: parts that close at
    once are not worth a process's start-up (the 10× daily sample's 70 parts close in
    under a second). Which process solves a part changes nothing else: the same HiGHS
    options, seed and time share, so a part that closes within ``mip_gap`` gives the same
    placement either way.
    """
    setting = os.environ.get(WORKERS_ENV, "").strip()
    if setting.isdigit() and int(setting) >= 1:
        return int(setting)  # anything else: decided as if unset
    hard = sum(needs_search(part, mip_gap) and part.start.size >= WORKER_MIN_COLUMNS
               for part in built.parts)
    if hard < 2:
        return 1
    if built.work is not None:
        return max(1, min(hard, os.cpu_count() or 1))
    others = busy_elsewhere()
    if others is None:
        try:
            # this process counts in the load but waits while its workers solve
            others = max(0.0, os.getloadavg()[0] - 1.0)
        except OSError:  # no load average on this platform either: assume busy
            return 1
    free = (os.cpu_count() or 1) - others
    return max(1, min(hard, int(free + 0.5)))


def solve_remote(part: ReservationPart, limit: float, deadline: float, mip_gap: float,
                  threads: int, seed: int, polish_only: bool = False,
                  work: WorkLimits | None = None
                  ) -> tuple[dict[str, int], StageResult, dict[str, int], str, bool]:
    """:func:`solve_part` in a worker: the limit cut to the wall-clock ``deadline``.

    Returns the placement and outcome, and the part's warm start and its source, which
    the local search may have changed in the worker's copy, and whether a work-limited
    solve reached its guard (``work``: the limit and deadline are not used).
    """
    limit = max(MIN_PART_SECONDS, min(limit, deadline - time.time()))
    placed, outcome = solve_part(part, limit, mip_gap, threads, seed, polish_only, work)
    return placed, outcome, part.warm, part.warm_source, part.guarded


def _solve_at_once(built: ReservationModel, order: list[int], weight: dict[int, float],
                   time_limit: float, mip_gap: float, threads: int, seed: int, workers: int,
                   polish_only: bool = False) -> dict[int, tuple[dict[str, int], StageResult]]:
    """Parts in ``workers`` worker processes, each started with its share of the time left.

    Each worker (``python -m planner.model.part_worker``) takes the next part of ``order``
    when it is free; the part gets its share by ``weight`` (:func:`part_time_limit`) of the
    worker-time still free (:func:`free_worker_seconds`: the other workers' time after the
    parts they are solving end counts, theirs until then does not), at most the seconds
    left. A part whose worker failed (it could not start, or died) is solved here
    afterwards, in the time left.
    """
    deadline = time.time() + time_limit
    lock = threading.Lock()
    pending = list(order)
    queued = [sum(weight[j] for j in order)]
    busy_until: dict[int, float] = {}  # server: when the part it solves is due to end
    done: dict[int, tuple[dict[str, int], StageResult]] = {}
    failed: list[int] = []

    def take(server: int) -> tuple[int, float] | None:
        with lock:
            busy_until.pop(server, None)
            if not pending:
                return None
            j = pending.pop(0)
            now = time.time()
            free = free_worker_seconds(now, deadline, workers, busy_until.values())
            limit = min(max(deadline - now, MIN_PART_SECONDS),
                        part_time_limit(free, weight[j], queued[0]))
            queued[0] -= weight[j]
            busy_until[server] = now + limit
            return j, limit

    def serve(server: int) -> None:
        process = start_worker("planner.model.part_worker")
        try:
            while (got := take(server)) is not None:
                j, limit = got
                if process is None:
                    failed.append(j)
                    continue
                try:
                    pickle.dump((built.parts[j], limit, deadline, mip_gap, threads, seed,
                                 polish_only, built.work),
                                process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
                    process.stdin.flush()
                    placed, outcome, warm, source, guarded = pickle.load(process.stdout)
                except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError):
                    failed.append(j)
                    process = _end(process)
                    continue
                built.parts[j].warm, built.parts[j].warm_source = warm, source
                built.parts[j].guarded |= guarded
                done[j] = (placed, outcome)
        finally:
            _end(process)

    servers = [threading.Thread(target=serve, args=(server,), daemon=True)
               for server in range(workers)]
    for server in servers:
        server.start()
    for server in servers:
        server.join()
    for j in sorted(failed):
        left = max(MIN_PART_SECONDS, deadline - time.time())
        done[j] = solve_part(built.parts[j], left, mip_gap, threads, seed, polish_only,
                             built.work)
    return done


def _end(process: subprocess.Popen | None) -> None:
    """Close a worker's stdin (it then exits) and wait for it; kill it if it hangs."""
    if process is None:
        return None
    with contextlib.suppress(OSError):
        process.stdin.close()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    with contextlib.suppress(OSError):
        process.stdout.close()
    return None


def solve_reservation_model(built: ReservationModel, time_limit: float, mip_gap: float,
                            threads: int, seed: int, workers: int | None = None,
                            work: WorkLimits | None = None
                            ) -> tuple[dict[str, int], StageResult]:
    """Solve part by part; return {request_id: start period} of placed requests, the outcome.

    Parts go smallest first; each gets, when it starts, its share (by columns) of the
    time left (:func:`part_time_limit`, at least :data:`MIN_PART_SECONDS`), so what a
    part that stops early leaves goes to the larger ones. Each part runs a local search
    from its warm start, then HiGHS (:func:`solve_part`); each stops at ``mip_gap``
    (HiGHS's ``mip_rel_gap``) or its limit. The stage's objective and bound are the sums
    of the parts' (each HiGHS's ``objective_function_value`` and ``mip_dual_bound``, or
    the LP relaxation's value where that is lower), ÷ SCALE, summed in part order; the
    gap is computed from those sums, and the stage is ``optimal`` only when it is closed.

    ``workers`` (``None``: :func:`part_workers`) > 1 solves that many parts at once, each
    in a worker process, the largest first, each with its share of the worker-time left
    (:func:`_solve_at_once`); the sums are the same, in part order.

    ``work`` (the work-limited mode): each part stops at the counts of :class:`WorkLimits`
    instead of its share of ``time_limit`` (:func:`solve_part`), and the second pass
    (:func:`improve_reservation_model`) keeps them.
    """
    started = time.perf_counter()
    built.work = work
    workers = part_workers(built, mip_gap) if workers is None else workers
    built.workers = max(1, min(workers, len(built.parts)))
    columns = {j: float(part.start.size) for j, part in enumerate(built.parts)}
    done = _solve_parts(built, list(range(len(built.parts))), columns, time_limit, mip_gap,
                        threads, seed, built.workers)
    built.outcomes = [done[j][1] if j in done else None for j in range(len(built.parts))]
    built.placements = [done[j][0] if j in done else None for j in range(len(built.parts))]
    built.seconds = time.perf_counter() - started
    return _stage_outcome(built, built.seconds)


def improve_reservation_model(built: ReservationModel, time_limit: float, mip_gap: float,
                              threads: int, seed: int) -> tuple[dict[str, int], StageResult]:
    """A second pass: the parts the first left open, polished from their placements.

    For the time the elastic LP leaves (``planner.model.solve``). Every part whose gap is
    above ``mip_gap`` is polished (:func:`solve_part` with ``polish_only``: whole clusters
    re-placed by sub-MIPs, then the swap search) from its first-pass placement, each
    getting its share of ``time_limit`` by what it lacks of its bound (bound − objective):
    the time goes where the gap is, not by size as in the first pass, as many at once as
    the first pass solved. A part keeps the better placement of its two passes (the
    second starts from the first's, so it is never worse) and the lower of its two bounds
    (both true). Returns the whole placement and the stage's outcome as
    :func:`solve_reservation_model` does, its seconds both passes'.
    """
    started = time.perf_counter()
    before = {j: outcome for j, outcome in enumerate(built.outcomes)
              if outcome is not None and built.placements[j] is not None}
    open_parts = [j for j, outcome in before.items()
                  if relative_gap(outcome.objective, outcome.bound, floor=1.0) > mip_gap]
    lack = {j: max(1.0, before[j].bound - before[j].objective) for j in open_parts}
    for j in open_parts:
        built.parts[j].warm = dict(built.placements[j])
    done = _solve_parts(built, open_parts, lack, time_limit, mip_gap, threads, seed,
                        built.workers, polish_only=True)
    for j, (placed, outcome) in done.items():
        old = before[j]
        if outcome.status not in (SolverStatus.OPTIMAL, SolverStatus.FEASIBLE):
            continue  # the first pass's placement and outcome stand
        if outcome.objective < old.objective:
            placed, objective = built.placements[j], old.objective
        else:
            objective = outcome.objective
        bound = min(old.bound, outcome.bound)
        gap = relative_gap(objective, bound, floor=1.0)
        built.placements[j] = placed
        built.outcomes[j] = StageResult(STAGE, status_from_gap(gap), objective, bound, gap,
                                        old.seconds + outcome.seconds)
    built.seconds += time.perf_counter() - started
    return _stage_outcome(built, built.seconds)


def _solve_parts(built: ReservationModel, parts: list[int], weight: dict[int, float],
                 time_limit: float, mip_gap: float, threads: int, seed: int, workers: int,
                 polish_only: bool = False) -> dict[int, tuple[dict[str, int], StageResult]]:
    """Solve ``parts`` in ``time_limit``, shared by ``weight``.

    In turn in this process (lightest first), or ``workers`` at once (heaviest first).
    """
    started = time.perf_counter()
    workers = min(workers, len(parts))
    if workers > 1:
        order = sorted(parts, key=lambda j: (-weight[j], j))
        return _solve_at_once(built, order, weight, time_limit, mip_gap, threads, seed,
                              workers, polish_only)
    order = sorted(parts, key=lambda j: (weight[j], j))
    return _solve_in_turn(built, order, weight, time_limit, mip_gap, threads, seed, started,
                          polish_only)


def _stage_outcome(built: ReservationModel, seconds: float
                   ) -> tuple[dict[str, int], StageResult]:
    """The whole placement and the stage's outcome from the parts' (``built.outcomes``).

    The objective and bound are the parts' sums ÷ SCALE, in part order; a part that ended
    without a placement (neither optimal nor feasible) ends the stage with its status.
    """
    placed: dict[str, int] = {}
    objective = bound = 0.0
    for mine, outcome in zip(built.placements, built.outcomes, strict=True):
        if outcome is None or mine is None:
            continue
        if outcome.status not in (SolverStatus.OPTIMAL, SolverStatus.FEASIBLE):
            return {}, StageResult(STAGE, outcome.status, float("nan"), float("nan"),
                                   float("inf"), seconds)
        placed |= mine
        objective += outcome.objective
        bound += outcome.bound
    if not built.parts:
        return {}, StageResult(STAGE, SolverStatus.OPTIMAL, 0.0, 0.0, 0.0, seconds)
    # an empty placement against a positive bound is 100 % off (the formula has no
    # denominator there); otherwise (bound − objective) ÷ objective of the sums
    gap = 1.0 if objective == 0 < bound else relative_gap(objective, bound, floor=1.0)
    return placed, StageResult(STAGE, status_from_gap(gap), objective / SCALE, bound / SCALE,
                               gap, seconds)
