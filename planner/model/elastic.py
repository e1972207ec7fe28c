"""Stage 2: elastic GPU-hours by linear programming, around the placed reservations.

Indices: e = (p, k, t) ∈ E, the triples with elastic demand dem[p,k,t] > 0 on a
cluster the project may use; P, K, T as in :mod:`planner.model.problem`.

Data: d_e demand (GPU-hours); A_kt = cap_kt − reserved_kt; r_k NGH rate;
H_p budget NGH left after usage and reservations; τ_e fair-share target
(GPU-hours, :mod:`planner.fairshare.targets`); π_pt = H_p · (hours up to the end
of t) ÷ (hours in the horizon), the even-pace line; q_e the previous plan's grant.

Variables (all ≥ 0): g_e guaranteed, o_e opportunistic GPU-hours; s_e shortfall
below target; c_pt cumulative guaranteed NGH; a_pt NGH ahead of pace; m_e
GPU-hours taken away from the previous plan.

    (1) capacity_kt:    Σ_p (g_pkt + o_pkt) ≤ A_kt                        ∀ k, t
    (2) demand_e:       g_e + o_e ≤ d_e                                   ∀ e
    (4) budget_p:       Σ_{k,t} r_k g_pkt ≤ H_p                           ∀ p
    (F) fair_share_e:   g_e + s_e ≥ τ_e                                   ∀ e with τ_e > 0
    (P) spend_pt:       c_pt − c_p,t−1 − Σ_k r_k g_pkt = 0;   pace_pt: a_pt − c_pt ≥ −π_pt
    (C) churn_e:        g_e + o_e + m_e ≥ min(q_e, d_e)                    ∀ e with q_e > 0
    (6) frozen:         g_e ≥ ℓ^g_e (bound); frozen_e: g_e + o_e ≥ ℓ^g_e + ℓ^o_e (row)
                        in the frozen leading periods, ℓ from the previous plan (below)

    max  G Σ g + O Σ o − F Σ s − P/(|T| r_max) Σ a − C Σ m

Why the weights are ordered G − O > P + C and O > C: one more GPU-hour of g
where capacity is free changes the objective by at least G − P − C > 0, so no
GPU idles while a project within budget wants it (rules 4 and 5); moving a
GPU-hour from opportunistic to a project within budget gains ≥ G − O − P − C > 0,
so opportunistic work only takes capacity nobody within budget wants (rule 4);
and O − C > 0 fills the rest (rule 5). Hence the fair-share and pacing terms only
choose among plans that already keep every GPU busy.

Frozen periods (6) keep the previous plan's grants only as far as they stay valid
today: ℓ^g_e = the previous guaranteed grant (capped by demand), scaled down where
today's capacity or budget left no longer holds it; ℓ^o_e = the previous
opportunistic grant, but only inside the room a cell has beyond what every project
within budget could still take there (min(d_e, H_p / r_k) each): opportunistic work
is preemptible, and a frozen grant that crowded out a project with budget left
would break rule 4 (usage below the plan, or a reservation placed in the frozen
period, gives a project budget or takes capacity the previous plan did not know of).
The kept total is a row, not a bound on o, so a project that has budget again
turns its kept opportunistic hours into guaranteed ones.

Separable by groups of clusters (:func:`cluster_groups`: the components of the
project–cluster demand graph), it is solved as one LP a group when there are several
(:func:`planner.model.solve.solve`); the outcome adds their objectives and bounds.

Solved by HiGHS by default, or by any solver PuLP reaches (``solver.lp_solver``,
``planner run --solver``): the same built matrix either way (:mod:`planner.model.backends`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.model.backends import MatrixResult, solve_matrix
from planner.model.lp import INF, Keys, LpBuilder
from planner.model.problem import Problem
from planner.model.result import CellValues, SolverStatus, StageResult


@dataclass
class ElasticModel:
    """A built, unsolved LP and the index sets to read it back."""

    lp: LpBuilder
    e: tuple[np.ndarray, np.ndarray, np.ndarray]  # (p, k, t) of each elastic triple
    g: np.ndarray  # column of g_e
    o: np.ndarray  # column of o_e
    budget_projects: np.ndarray  # project of each budget row


def keys(problem: Problem, project=None, cluster=None, period=None) -> Keys:
    """The keys of a block from index arrays: project, cluster and period labels."""
    dims = {}
    for dim, labels, index in (("project", problem.projects, project),
                               ("cluster", problem.clusters, cluster),
                               ("period", problem.period_start, period)):
        if index is not None:
            dims[dim] = np.asarray(labels, dtype=object)[np.asarray(index, dtype=np.int64)]
    return Keys.of(**dims)


def elastic_triples(problem: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """E: (p, k, t) with demand, in (p, k, t) order: the cells ``problem.dem`` keeps."""
    p, k, t = problem.dem.cells()
    return p, k, t


def cluster_groups(problem: Problem, e) -> np.ndarray:
    """Each cluster's group: connected components of the project–cluster demand graph.

    Two clusters are in one group when a chain of projects with demand links them. Every
    row of (1)–(6) lies inside one group: capacity is a cluster's, a budget or pacing row
    a project's (over the clusters it wants, all in its group), demand, fair-share, churn
    and frozen rows a triple's; reservations are fixed before this stage. So the LP is
    separable: its optimum is the sum of one LP per group's. Groups are numbered by
    their first cluster (clusters without demand each form their own).
    """
    p, k, _ = e
    n_projects, n_clusters = problem.shape[0], problem.shape[1]
    pairs = np.unique(p * n_clusters + k)
    parent = np.arange(n_projects + n_clusters)

    def root(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for project, cluster in zip(pairs // n_clusters, pairs % n_clusters, strict=True):
        a, b = root(int(project)), root(n_projects + int(cluster))
        if a != b:
            parent[max(a, b)] = min(a, b)
    roots = np.array([root(n_projects + c) for c in range(n_clusters)], dtype=np.int64)
    _, group = np.unique(roots, return_inverse=True)
    first = {}
    for g in group:
        first.setdefault(int(g), len(first))
    return np.array([first[int(g)] for g in group], dtype=np.int64)


def split_triples(problem: Problem, e) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """E cut into one block of triples per group of :func:`cluster_groups` that has any."""
    group = cluster_groups(problem, e)[e[1]]
    return [tuple(index[group == g] for index in e) for g in np.unique(group)]


def frozen_lower_bounds(problem: Problem, e, available: np.ndarray,
                        headroom: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(6) ℓ^g, ℓ^o: the previous plan's grants in its frozen periods that stay valid today.

    Guaranteed grants are capped by demand, then scaled down per cell where they no
    longer fit the capacity reservations leave, and per project where they no longer
    fit the budget left. Opportunistic grants are kept only in the room a cell has
    once every project within budget (``headroom`` > 0) could take all it may there,
    min(d_e, H_p / r_k), beside the kept guaranteed grants: they can then never stand
    where a project with budget left lacks GPU-hours (rule 4).
    """
    p, k, t = e
    zeros = np.zeros(len(p))
    prev = problem.previous
    frozen = problem.model.contract.frozen_periods
    if prev is None or frozen == 0:
        return zeros, zeros
    keep = (t < frozen) & prev.covered[t]
    dem = problem.dem[p, k, t]
    lo_g = np.where(keep, np.minimum(prev.guaranteed[p, k, t], dem), 0.0)
    load = np.zeros_like(available)
    np.add.at(load, (k, t), lo_g)
    factor = np.where(load > available, available / np.maximum(load, 1e-12), 1.0)[k, t]
    lo_g = lo_g * factor
    spend = np.zeros(len(headroom))
    np.add.at(spend, p, lo_g * problem.rate[k])
    room = np.maximum(headroom, 0.0)
    lo_g = lo_g * np.where(spend > room, room / np.maximum(spend, 1e-12), 1.0)[p]
    # what each project within budget could still claim in the cell, at most its demand
    rate = np.maximum(problem.rate[k], 1e-12)
    within = np.where(room[p] > 0.0, np.minimum(dem, room[p] / rate), 0.0)
    claimed = np.zeros_like(available)
    np.add.at(claimed, (k, t), np.maximum(lo_g, within))
    spare = np.maximum(available - claimed, 0.0)
    lo_o = np.where(keep, np.minimum(prev.opportunistic[p, k, t], dem - lo_g), 0.0)
    wanted = np.zeros_like(available)
    np.add.at(wanted, (k, t), lo_o)
    lo_o = lo_o * np.where(wanted > spare, spare / np.maximum(wanted, 1e-12), 1.0)[k, t]
    return lo_g, lo_o


def add_grant_columns(lp: LpBuilder, problem: Problem, e, lower: tuple) -> tuple:
    """g_e, o_e with (2)'s per-column part as bounds: ℓ^g_e ≤ g_e ≤ d_e, 0 ≤ o_e ≤ d_e."""
    w = problem.model.objective
    d = problem.dem[e]
    g = lp.add_columns("guaranteed", lower[0], d, w.guaranteed, keys=keys(problem, *e))
    o = lp.add_columns("opportunistic", np.zeros(len(d)), d, w.opportunistic,
                       keys=keys(problem, *e))
    return g, o


def add_frozen(lp: LpBuilder, problem: Problem, e, g, o, lower: tuple) -> None:
    """(6) The grants kept in frozen periods, guaranteed or opportunistic as budgets now say."""
    total = lower[0] + lower[1]
    has = np.nonzero(lower[1] > 1e-9)[0]  # where ℓ^o = 0, g's bound already holds the total
    if len(has) == 0:
        return
    row = np.arange(len(has))
    lp.add_rows("frozen", total[has], np.full(len(has), INF), np.concatenate([row, row]),
                np.concatenate([g[has], o[has]]), 1.0,
                keys=keys(problem, *(index[has] for index in e)))


def add_capacity(lp: LpBuilder, problem: Problem, e, g, o, available: np.ndarray
                 ) -> np.ndarray:
    """(1) Elastic grants fit in what reservations leave of each cluster and period.

    Returns the row's cells as codes k·|T| + t.
    """
    _, k, t = e
    n_periods = available.shape[1]
    cells, row = np.unique(k * n_periods + t, return_inverse=True)
    upper = available.reshape(-1)[cells]
    lp.add_rows("capacity", np.full(len(cells), -INF), upper,
                np.concatenate([row, row]), np.concatenate([g, o]), 1.0,
                keys=keys(problem, cluster=cells // n_periods, period=cells % n_periods))
    return cells


def add_demand(lp: LpBuilder, problem: Problem, e, g, o) -> None:
    """(2) Nobody is granted more than it asked for."""
    n = len(g)
    row = np.arange(n)
    lp.add_rows("demand", np.full(n, -INF), problem.dem[e],
                np.concatenate([row, row]), np.concatenate([g, o]), 1.0, keys=keys(problem, *e))


def add_budget(lp: LpBuilder, problem: Problem, e, g, headroom: np.ndarray) -> np.ndarray:
    """(4) Guaranteed NGH over the horizon stay within the budget left. One row a project."""
    p, k, _ = e
    projects, row = np.unique(p, return_inverse=True)
    lp.add_rows("budget", np.full(len(projects), -INF), np.maximum(headroom[projects], 0.0),
                row, g, problem.rate[k], keys=keys(problem, projects))
    return projects


def add_fair_share(lp: LpBuilder, problem: Problem, e, g,
                   targets: CellValues | np.ndarray) -> None:
    """(F) Shortfall below the hierarchical fair-share target is penalised."""
    tau = targets[e]
    has = np.nonzero(tau > 1e-9)[0]
    at = tuple(index[has] for index in e)
    s = lp.add_columns("shortfall", np.zeros(len(has)), INF, -problem.model.objective.fair_share,
                       keys=keys(problem, *at))
    row = np.arange(len(has))
    lp.add_rows("fair_share", tau[has], INF, np.concatenate([row, row]),
                np.concatenate([g[has], s]), 1.0, keys=keys(problem, *at))


def add_pacing(lp: LpBuilder, problem: Problem, e, g, headroom: np.ndarray) -> None:
    """(P) Cumulative guaranteed spend ahead of the even-pace line is penalised."""
    p, k, t = e
    n_periods = len(problem.hours)
    projects = np.unique(p)
    if len(projects) == 0:
        return
    slot = {q: i for i, q in enumerate(projects)}
    pos = np.fromiter((slot[q] for q in p), dtype=np.int64, count=len(p))
    n = len(projects) * n_periods
    share = np.cumsum(problem.hours) / problem.hours.sum()
    pace = (np.maximum(headroom[projects], 0.0)[:, None] * share[None, :]).reshape(-1)
    weight = problem.model.objective.pacing / (n_periods * max(1.0, problem.rate.max()))
    cell_keys = keys(problem, np.repeat(projects, n_periods),
                     period=np.tile(np.arange(n_periods), len(projects)))
    cum = lp.add_columns("spend", np.zeros(n), INF, 0.0, keys=cell_keys)
    ahead = lp.add_columns("ahead_of_pace", np.zeros(n), INF, -weight, keys=cell_keys)
    cells = np.arange(n)
    previous_cell = cells[(cells % n_periods) > 0]
    # spend_pt: c_pt − c_p,t−1 − Σ_k r_k g_pkt = 0
    lp.add_rows("spend", np.zeros(n), np.zeros(n),
                np.concatenate([cells, previous_cell, pos * n_periods + t]),
                np.concatenate([cum, cum[previous_cell - 1], g]),
                np.concatenate([np.ones(n), -np.ones(len(previous_cell)), -problem.rate[k]]),
                keys=cell_keys)
    # pace_pt: a_pt − c_pt ≥ −π_pt
    lp.add_rows("pace", -pace, np.full(n, INF), np.concatenate([cells, cells]),
                np.concatenate([ahead, cum]), np.concatenate([np.ones(n), -np.ones(n)]),
                keys=cell_keys)


def add_churn(lp: LpBuilder, problem: Problem, e, g, o) -> None:
    """(C) GPU-hours taken away from the previous plan (preemptions) are penalised."""
    prev = problem.previous
    if prev is None:
        return
    q = np.minimum(prev.guaranteed[e] + prev.opportunistic[e], problem.dem[e])
    has = np.nonzero(q > 1e-9)[0]
    at = tuple(index[has] for index in e)
    m = lp.add_columns("churn", np.zeros(len(has)), INF, -problem.model.objective.churn,
                       keys=keys(problem, *at))
    row = np.arange(len(has))
    lp.add_rows("churn", q[has], INF, np.concatenate([row, row, row]),
                np.concatenate([g[has], o[has], m]), 1.0, keys=keys(problem, *at))


def build_elastic_model(problem: Problem, available: np.ndarray, headroom: np.ndarray,
                        targets: CellValues | np.ndarray, e=None) -> ElasticModel:
    """The LP (1)–(6): ``available`` A_kt, ``headroom`` H_p, ``targets`` τ (GPU-hours).

    ``e``: the triples to model (one group of :func:`split_triples`); default all of E.
    """
    e = elastic_triples(problem) if e is None else e
    lp = LpBuilder()
    frozen = frozen_lower_bounds(problem, e, available, headroom)
    g, o = add_grant_columns(lp, problem, e, frozen)
    add_frozen(lp, problem, e, g, o, frozen)
    add_capacity(lp, problem, e, g, o, available)
    add_demand(lp, problem, e, g, o)
    budget_projects = add_budget(lp, problem, e, g, headroom)
    add_fair_share(lp, problem, e, g, targets)
    add_pacing(lp, problem, e, g, headroom)
    add_churn(lp, problem, e, g, o)
    return ElasticModel(lp, e, g, o, budget_projects)


@dataclass(frozen=True)
class Readback:
    """What reading a solved elastic LP's values needs of the built model (not its blocks)."""

    n_triples: int
    g: np.ndarray  # column of g_e
    o: np.ndarray  # column of o_e
    budget_projects: np.ndarray  # project of each budget row
    budget_rows: slice

    @staticmethod
    def of(built: ElasticModel) -> Readback:
        """The columns and budget rows of ``built``."""
        return Readback(len(built.e[0]), built.g, built.o, built.budget_projects,
                        built.lp.rows["budget"])


def read_result(readback: Readback, result: MatrixResult, duals: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, StageResult]:
    """The grants g and o at its triples, its budget duals (into ``duals``), the outcome.

    Values are read only from an optimal solve (zeros otherwise).
    """
    guaranteed, opportunistic = np.zeros(readback.n_triples), np.zeros(readback.n_triples)
    stage = result.stage()
    if result.status is not SolverStatus.OPTIMAL or result.x is None:
        return guaranteed, opportunistic, duals, stage
    guaranteed = result.x[readback.g]
    opportunistic = result.x[readback.o]
    if result.row_dual is not None:
        duals[readback.budget_projects] = np.abs(result.row_dual[readback.budget_rows])
    return guaranteed, opportunistic, duals, stage


def solve_elastic_model(built: ElasticModel, problem: Problem, time_limit: float,
                        duals: np.ndarray | None = None
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, StageResult]:
    """Solve with the model's LP solver (HiGHS by default, or any PuLP reaches).

    Returns g and o at the triples ``built.e`` (one value a triple: no (P, K, T) array),
    the budget duals (P,) and the outcome as the solver reported it; values are read
    only from an optimal solve (zeros otherwise). ``duals``: a (P,) array to write this
    model's duals into (one group's LP of several).
    """
    opts = problem.model.solver
    n_triples = len(built.e[0])
    duals = np.zeros(problem.shape[0]) if duals is None else duals
    if built.lp.n_cols == 0:
        return (np.zeros(n_triples), np.zeros(n_triples), duals,
                StageResult(opts.lp_solver, SolverStatus.OPTIMAL, 0.0, 0.0, 0.0, 0.0))
    result = solve_matrix(built.lp.matrix(maximize=True), opts.lp_solver,
                          time_limit=max(1.0, time_limit), threads=opts.threads,
                          seed=opts.random_seed)
    return read_result(Readback.of(built), result, duals)
