"""Stage 1: whole-node reservations, placed by CP-SAT.

Indices: r ∈ R requests that can be placed, s ∈ S_r its allowed start periods
(window ∩ horizon), k ∈ K clusters, t ∈ T periods, p ∈ P projects.

Data: L_r periods (hours rounded up), n_r nodes, N_k nodes of cluster k, F_kt nodes
held by reservations kept from the previous plan (rule 6), v_r = reserved GPU-hours,
e_r = NGH, H_p budget NGH left after usage and kept reservations, s⁰_r a reference
start (previous plan's start, else the earliest allowed), λ the lateness share.

Variables: y_rs ∈ {0,1}, request r starts in period s (time-indexed: one boolean per
allowed start); r is placed iff Σ_s y_rs = 1.

    (R1) nodes_kt:      Σ_{r on k} Σ_{s ≤ t < s+L_r} n_r y_rs + F_kt ≤ N_k    ∀ k, t
    (R2) budget_p:      Σ_{r of p} e_r Σ_s y_rs ≤ H_p                        ∀ p
    (R3) one_start_r:   Σ_s y_rs ≤ 1  (s ∈ S_r: whole periods, contiguous, exact
                        length, inside the window)

    (R4) displaced_rs:  δ_r(s) = δ × elastic GPU-hours start s pushes out of
                        contended periods (see :func:`displacement`)

    max  Σ_r Σ_s (v_r − λ v_r |s − s⁰_r| − δ_r(s)) y_rs

Whole nodes and exact lengths (rule 3) hold by construction: a start covers exactly
L_r periods with n_r integral nodes. The time-indexed form has a linear objective (no
abs or element constraints). It replaced optional intervals with one cumulative per
cluster: on 560 requests over 8 clusters CP-SAT's bound is about the same in both
(2.06 M), but it finds better placements here (gap 3.1-3.3 % after 20 s over three
seeds, against 5.1 % in 30 s for intervals; ``benchmarks/reservations_gap.py``).

Warm start (CP-SAT hints): with ``--previous``, the previous plan's start of each
request it placed. Otherwise CP-SAT first runs unhinted on half the limit (the 10×
sample closes there in 0.1 s), then, if not within its tolerance, on the rest hinted
in full with the better of its placement and the LP relaxation's starts rounded
greedily (:func:`rounded_placement`). Measured in the default 30 s
(``benchmarks/reservations_gap.py``, medians of 3): 560 requests over 8 clusters
3.34 % (unhinted throughout 3.12 %, hinted throughout 4.55 %); 6,060 over 80
clusters 8.14 % (unhinted 14.53 %, hinted 8.14 %). Hinted throughout, the 10× sample
stopped at its 0.5 % tolerance (0.13 %) instead of proving optimality. A plain
greedy hint (largest first, best start that fits) was worse on the 560 requests
(4.5 %, 13.1 % and 13.4 % over three seeds, CP-SAT staying at the hint).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from planner.model.lp import INF, LpBuilder, new_highs
from planner.model.problem import Problem, Request
from planner.model.result import SolverStatus, StageResult, relative_gap, status_from_gap

SCALE = 100  # CP-SAT works in integers: GPU-hours × SCALE


@dataclass
class ReservationModel:
    """A built, unsolved CP-SAT model with handles to its variables and rows."""

    model: cp_model.CpModel
    requests: list[Request]  # the placeable ones, in model order
    choices: list[list[cp_model.IntVar]]  # y_rs, aligned with request.starts
    values: list[np.ndarray]  # objective coefficient of each y_rs (× SCALE)
    budget_rows: dict[int, cp_model.Constraint]
    node_rows: dict[tuple[int, int], cp_model.Constraint]
    hint: dict[str, int]  # request_id → the warm start's start period
    rounded: bool  # the hint is the LP-rounded placement, given in the second phase


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


def displacement(problem: Problem, request: Request) -> np.ndarray:
    """δ × elastic GPU-hours (× SCALE) each allowed start would push out of contended periods.

    In period t the request holds h = n_r · gpn · hours_t GPU-hours; where total elastic
    demand D exceeds what is left (cap − h), min(h, D − (cap − h)) GPU-hours of elastic
    work lose their place. Other reservations are ignored: it is a tie-breaker.
    """
    k = request.cluster
    demand = problem.dem[:, k, :].sum(axis=0)
    held = request.nodes * problem.gpus_per_node[k] * problem.hours
    lost = np.minimum(held, np.maximum(0.0, demand - (problem.cap[k] - held)))
    window = np.cumsum(np.concatenate([[0.0], lost]))
    starts = np.array(request.starts)
    per_start = window[starts + request.length] - window[starts]
    weight = problem.model.objective.reservation_displacement
    return np.round(per_start * weight * SCALE).astype(np.int64)


def start_values(problem: Problem, request: Request) -> np.ndarray:
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
    displaced = displacement(problem, request)
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


def add_starts(model: cp_model.CpModel, request: Request) -> list[cp_model.IntVar]:
    """(R3): one boolean per allowed start, at most one of them true."""
    name = request.request_id
    choices = [model.new_bool_var(f"start[{name},{s}]") for s in request.starts]
    model.add_at_most_one(choices)
    return choices


def add_nodes(model: cp_model.CpModel, problem: Problem, requests: list[Request],
              choices: list[list], held: np.ndarray) -> dict[tuple[int, int], cp_model.Constraint]:
    """(R1): per cluster and period, reserved nodes (new and kept) never exceed the cluster's.

    A row is written only where the requests that could cover (k, t) might not all fit.
    """
    cover: dict[tuple[int, int], list[tuple[int, cp_model.IntVar]]] = {}
    for r, ys in zip(requests, choices, strict=True):
        for s, y in zip(r.starts, ys, strict=True):
            for t in range(s, s + r.length):
                cover.setdefault((r.cluster, t), []).append((r.nodes, y))
    rows = {}
    for (k, t), items in sorted(cover.items()):
        room = int(problem.nodes[k] - held[k, t])
        if sum(n for n, _ in items) > room:
            rows[(k, t)] = model.add(sum(n * y for n, y in items) <= room)
    return rows


def add_budget(model: cp_model.CpModel, requests: list[Request], choices: list[list],
               headroom: np.ndarray) -> dict[int, cp_model.Constraint]:
    """(R2): a project's reservations fit in the budget it has left."""
    by_project, cost, limit = _costs(requests, headroom)
    rows = {}
    for p, idx in sorted(by_project.items()):
        if sum(cost[i] for i in idx) > limit[p]:
            rows[p] = model.add(sum(cost[i] * y for i in idx for y in choices[i]) <= int(limit[p]))
    return rows


def add_hints(model: cp_model.CpModel, requests: list[Request], choices: list[list],
              warm: dict[str, int], complete: bool) -> None:
    """Warm start: y_rs = 1 at a request's hinted start; ``complete`` also hints every other 0."""
    for r, ys in zip(requests, choices, strict=True):
        for s, y in zip(r.starts, ys, strict=True):
            if warm.get(r.request_id) == s:
                model.add_hint(y, True)
            elif complete:
                model.add_hint(y, False)


def relaxation(problem: Problem, requests: list[Request], values: list[np.ndarray],
               headroom: np.ndarray) -> tuple[LpBuilder, np.ndarray, np.ndarray]:
    """The LP relaxation of (R1)–(R3), 0 ≤ y_rs ≤ 1; also each column's request and start."""
    request_of = np.repeat(np.arange(len(requests)), [len(r.starts) for r in requests])
    start = np.concatenate([np.asarray(r.starts, dtype=np.int64) for r in requests])
    length = np.array([r.length for r in requests], dtype=np.int64)[request_of]
    cluster = np.array([r.cluster for r in requests], dtype=np.int64)[request_of]
    nodes = np.array([r.nodes for r in requests], dtype=float)[request_of]
    lp = LpBuilder()
    y = lp.add_columns("y", np.zeros(len(start)), 1.0, np.concatenate(values).astype(float))
    lp.add_rows("one_start", np.full(len(requests), -INF), 1.0, request_of, y, 1.0)
    held = fixed_nodes(problem)
    n_periods = held.shape[1]
    col = np.repeat(y, length)  # a column covers L_r periods from its start
    period = np.repeat(start, length) + (np.arange(col.size) - np.repeat(np.cumsum(length)
                                                                         - length, length))
    lp.add_rows("nodes", np.full(held.size, -INF),
                (problem.nodes[:, None] - held).ravel().astype(float),
                np.repeat(cluster, length) * n_periods + period, col, np.repeat(nodes, length))
    _, cost, limit = _costs(requests, headroom)
    project = np.array([r.project for r in requests], dtype=np.int64)
    lp.add_rows("budget", np.full(len(headroom), -INF), limit.astype(float), project[request_of],
                y, np.asarray(cost, dtype=float)[request_of])
    return lp, request_of, start


def rounded_placement(problem: Problem, requests: list[Request], values: list[np.ndarray],
                      headroom: np.ndarray) -> dict[str, int]:
    """A valid placement to warm-start from: the LP relaxation's starts, rounded greedily.

    Starts go in decreasing LP value (ties: higher objective coefficient), each taken when
    its request is not yet placed and its nodes (R1) and its project's budget (R2) still
    fit; requests left over then take their best start that fits, largest first.
    (Diving — fixing the starts taken and re-solving, 8 times — gained 0.5 % on the
    560-request case and lost 0.05 % on the 6,060-request one, at 6 s: left out.)
    """
    opts = problem.model.solver
    lp, request_of, start = relaxation(problem, requests, values, headroom)
    highs = new_highs(opts.threads, opts.random_seed)
    highs.passModel(lp.to_highs(maximize=True))
    coefficient = np.concatenate(values)
    _, cost, limit = _costs(requests, headroom)
    left, free = limit.copy(), problem.nodes[:, None] - fixed_nodes(problem)
    placed: dict[str, int] = {}

    def take(i: int, s: int) -> bool:
        r = requests[i]
        if r.request_id in placed or cost[i] > left[r.project] or (
                free[r.cluster, s:s + r.length] < r.nodes).any():
            return False
        free[r.cluster, s:s + r.length] -= r.nodes
        left[r.project] -= cost[i]
        placed[r.request_id] = s
        return True

    highs.run()
    relaxed = np.asarray(highs.getSolution().col_value)
    if relaxed.size != start.size:  # no LP solution: round nothing, fill greedily
        relaxed = np.zeros(start.size)
    for c in np.lexsort((np.arange(start.size), -coefficient, -relaxed)):
        if relaxed[c] > 1e-6:
            take(int(request_of[c]), int(start[c]))
    for i in sorted(range(len(requests)), key=lambda i: (-requests[i].gpu_hours, i)):
        for j in np.argsort(-values[i], kind="stable"):
            if values[i][j] > 0 and take(i, requests[i].starts[j]):
                break
    return placed


def build_reservation_model(problem: Problem, headroom: np.ndarray) -> ReservationModel:
    """The CP-SAT model (R1)–(R4) and its warm start; ``headroom`` is H_p."""
    model = cp_model.CpModel()
    requests = [r for r in problem.requests if r.starts]
    values = [start_values(problem, r) for r in requests]
    choices = [add_starts(model, r) for r in requests]
    node_rows = add_nodes(model, problem, requests, choices, fixed_nodes(problem))
    budget_rows = add_budget(model, requests, choices, headroom)
    model.maximize(sum(int(v) * y for vs, ys in zip(values, choices, strict=True)
                       for v, y in zip(vs, ys, strict=True)))
    if problem.previous is not None:  # the previous plan's starts, where still allowed
        hint = {r.request_id: s for r in requests
                if (s := _previous_start(problem, r)) is not None}
        add_hints(model, requests, choices, hint, complete=False)
    elif requests:  # a valid placement, hinted in full in the second phase
        hint = rounded_placement(problem, requests, values, headroom)
    else:
        hint = {}
    return ReservationModel(model, requests, choices, values, budget_rows, node_rows, hint,
                            rounded=problem.previous is None and bool(requests))


def _run(model: cp_model.CpModel, time_limit: float, deterministic_limit: float,
         mip_gap: float, threads: int, seed: int) -> tuple[cp_model.CpSolver, int]:
    solver = cp_model.CpSolver()
    params = solver.parameters
    params.num_workers = max(1, threads)
    params.interleave_search = True  # deterministic multi-worker search
    params.max_deterministic_time = max(0.1, deterministic_limit)  # keeps bytes equal
    params.max_time_in_seconds = max(0.1, time_limit)  # a wall-clock safety net
    params.relative_gap_limit = mip_gap
    params.random_seed = seed
    return solver, solver.solve(model)


def _placement(built: ReservationModel, solver: cp_model.CpSolver) -> dict[str, int]:
    return {r.request_id: s for r, ys in zip(built.requests, built.choices, strict=True)
            for s, y in zip(r.starts, ys, strict=True) if solver.boolean_value(y)}


def _value(built: ReservationModel, placed: dict[str, int]) -> int:
    """The objective (× SCALE) of a placement, as the model counts it."""
    return sum(int(v[r.starts.index(placed[r.request_id])])
               for r, v in zip(built.requests, built.values, strict=True)
               if r.request_id in placed)


def solve_reservation_model(built: ReservationModel, time_limit: float, mip_gap: float,
                            threads: int, seed: int) -> tuple[dict[str, int], StageResult]:
    """Solve; return {request_id: start period} of placed requests and the outcome.

    The limit is wall clock (a safety net) and 4 deterministic units a second (the one
    that keeps runs byte-identical). With the LP-rounded warm start, CP-SAT first runs
    unhinted on half of it (most models close there); if it has not stopped within its
    gap tolerance, it runs again on what is left, hinted in full with the better of its
    own placement and the rounded one. The objective is the last run's, the bound the
    tighter of the two runs', both as CP-SAT reported them; the gap is computed from them.
    """
    started = time.perf_counter()
    if not built.requests:
        return {}, StageResult("cp-sat", SolverStatus.OPTIMAL, 0.0, 0.0, 0.0, 0.0)
    deterministic = max(1.0, 4 * time_limit)
    bound = float("inf")
    if built.rounded:
        solver, code = _run(built.model, time_limit / 2, deterministic / 2, mip_gap, threads,
                            seed)
        if code != cp_model.OPTIMAL:  # not closed to the tolerance: the hinted second phase
            bound = solver.best_objective_bound
            warm = built.hint
            if code == cp_model.FEASIBLE and _value(built, mine := _placement(built, solver)
                                                    ) > _value(built, warm):
                warm = mine
            used = (deterministic / 2 if code == cp_model.UNKNOWN
                    else solver.deterministic_time)
            add_hints(built.model, built.requests, built.choices, warm, complete=True)
            solver, code = _run(built.model, time_limit - (time.perf_counter() - started),
                                deterministic - used, mip_gap, threads, seed)
            built.model.clear_hints()
    else:
        solver, code = _run(built.model, time_limit, deterministic, mip_gap, threads, seed)
    seconds = time.perf_counter() - started
    if code == cp_model.UNKNOWN:
        # the limit hit before any placement was found: placing none is always valid,
        # and its gap against the bound is said, not hidden
        bound = min(bound, solver.best_objective_bound)
        return {}, StageResult("cp-sat", SolverStatus.FEASIBLE, 0.0, bound / SCALE, 1.0,
                               seconds)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return {}, StageResult("cp-sat", SolverStatus.from_cp_sat(code), float("nan"),
                               float("nan"), float("inf"), seconds)
    # CP-SAT says OPTIMAL also when it stopped at relative_gap_limit: the gap is computed
    # from what it reports, with its own floor of 1 (integer units), never taken as 0
    objective, bound = solver.objective_value, min(bound, solver.best_objective_bound)
    gap = relative_gap(objective, bound, floor=1.0)
    return _placement(built, solver), StageResult("cp-sat", status_from_gap(gap),
                                                  objective / SCALE, bound / SCALE, gap,
                                                  seconds)
