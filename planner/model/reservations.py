"""Stage 1: whole-node reservations, placed by CP-SAT.

Indices: r ∈ R requests that can be placed, k ∈ K clusters, p ∈ P projects.

Data: L_r periods (hours rounded up), n_r nodes, S_r allowed start periods
(window ∩ horizon), N_k nodes of cluster k, F_kt nodes held by reservations kept
from the previous plan (rule 6), v_r = reserved GPU-hours, e_r = NGH, H_p budget NGH
left after usage and kept reservations, s⁰_r a reference start (previous plan's
start, else the earliest allowed), λ the lateness share.

Variables: x_r ∈ {0,1} placed; s_r ∈ S_r start; an optional interval
[s_r, s_r + L_r) present iff x_r.

    (R1) cumulative_k:  Σ_{r on k, s_r ≤ t < s_r+L_r} n_r x_r + F_kt ≤ N_k    ∀ k, t
    (R2) budget_p:      Σ_{r of p} e_r x_r ≤ H_p                            ∀ p
    (R3) window:        s_r ∈ S_r  (whole periods, contiguous, exact length, inside window)

    (R4) displaced_r:   δ_r(s_r) = δ × elastic GPU-hours start s_r pushes out of
                        contended periods (see :func:`displacement`)

    max  Σ_r v_r x_r − λ Σ_r v_r |s_r − s⁰_r| − Σ_r δ_r(s_r)

Whole nodes and exact lengths (rule 3) hold by construction: an interval has
exactly L_r periods and n_r integral nodes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from planner.model.problem import Problem, Request
from planner.model.result import SolverStatus, StageResult

SCALE = 100  # CP-SAT works in integers: GPU-hours × SCALE


@dataclass
class ReservationModel:
    """A built, unsolved CP-SAT model with handles to its variables."""

    model: cp_model.CpModel
    requests: list[Request]  # the placeable ones, in model order
    present: list[cp_model.IntVar]
    start: list[cp_model.IntVar]
    budget_rows: dict[int, cp_model.Constraint]


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


def add_window(model: cp_model.CpModel, request: Request, name: str) -> tuple:
    """(R3): the start lies in the allowed set; the interval is optional."""
    present = model.new_bool_var(f"placed[{name}]")
    start = model.new_int_var_from_domain(cp_model.Domain.FromValues(list(request.starts)),
                                          f"start[{name}]")
    interval = model.new_optional_fixed_size_interval_var(start, request.length, present,
                                                          f"interval[{name}]")
    return present, start, interval


def add_cumulative(model: cp_model.CpModel, problem: Problem, intervals: dict[int, list],
                   held: np.ndarray) -> None:
    """(R1): per cluster, reserved nodes (new and kept) never exceed the cluster's nodes."""
    for k, items in sorted(intervals.items()):
        kept = [model.new_fixed_size_interval_var(t, 1, f"kept[{k},{t}]")
                for t in range(held.shape[1]) if held[k, t] > 0]
        demands = [n for _, n in items] + [int(held[k, t]) for t in range(held.shape[1])
                                           if held[k, t] > 0]
        model.add_cumulative([iv for iv, _ in items] + kept, demands, int(problem.nodes[k]))


def add_budget(model: cp_model.CpModel, problem: Problem, requests: list[Request],
               present: list, headroom: np.ndarray) -> dict[int, cp_model.Constraint]:
    """(R2): a project's reservations fit in the budget it has left."""
    rows = {}
    by_project: dict[int, list[int]] = {}
    for i, r in enumerate(requests):
        by_project.setdefault(r.project, []).append(i)
    for p, idx in sorted(by_project.items()):
        cost = [int(np.ceil(requests[i].ngh * SCALE)) for i in idx]
        limit = int(np.floor(max(0.0, headroom[p]) * SCALE))
        if sum(cost) > limit:
            rows[p] = model.add(sum(c * present[i] for c, i in zip(cost, idx, strict=True))
                                <= limit)
    return rows


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


def build_reservation_model(problem: Problem, headroom: np.ndarray) -> ReservationModel:
    """The CP-SAT model (R1)–(R3) and its objective; ``headroom`` is H_p."""
    model = cp_model.CpModel()
    requests = [r for r in problem.requests if r.starts]
    present, start, objective = [], [], []
    intervals: dict[int, list] = {}
    lateness = problem.model.objective.reservation_lateness
    for r in requests:
        x, s, interval = add_window(model, r, r.request_id)
        warm = _previous_start(problem, r)
        if warm is not None:  # warm start from --previous
            model.add_hint(x, True)
            model.add_hint(s, warm)
        present.append(x)
        start.append(s)
        intervals.setdefault(r.cluster, []).append((interval, r.nodes))
        value = int(round(r.gpu_hours * SCALE))
        objective.append(value * x)
        late = int(round(r.gpu_hours * SCALE * lateness))
        if late and len(r.starts) > 1:
            s0 = reference_start(problem, r)
            distance = model.new_int_var(0, r.starts[-1] - r.starts[0], f"moved[{r.request_id}]")
            model.add_abs_equality(distance, s - s0)
            objective.append(-late * distance)
        displaced = displacement(problem, r)
        if len(r.starts) > 1 and displaced.max() > displaced.min():
            # (R4): the elastic GPU-hours this start would push out, as a tie-breaker
            lo, hi = r.starts[0], r.starts[-1]
            table = np.full(hi - lo + 1, int(displaced.max()))
            table[np.array(r.starts) - lo] = displaced
            cost = model.new_int_var(int(table.min()), int(table.max()),
                                     f"displaced[{r.request_id}]")
            offset = model.new_int_var(0, hi - lo, f"offset[{r.request_id}]")
            model.add(offset == s - lo)
            model.add_element(offset, [int(v) for v in table], cost)
            objective.append(-cost)
    add_cumulative(model, problem, intervals, fixed_nodes(problem))
    budget_rows = add_budget(model, problem, requests, present, headroom)
    model.maximize(sum(objective))
    return ReservationModel(model, requests, present, start, budget_rows)


def solve_reservation_model(built: ReservationModel, time_limit: float, mip_gap: float,
                            threads: int, seed: int) -> tuple[dict[str, int], StageResult]:
    """Solve; return {request_id: start period} of placed requests and the outcome."""
    solver = cp_model.CpSolver()
    params = solver.parameters
    params.num_workers = max(1, threads)
    params.interleave_search = True  # deterministic multi-worker search
    params.max_deterministic_time = max(1.0, 4 * time_limit)  # the limit that keeps bytes equal
    params.max_time_in_seconds = max(0.1, time_limit)  # a wall-clock safety net
    params.relative_gap_limit = mip_gap
    params.random_seed = seed
    started = time.perf_counter()
    if not built.requests:
        return {}, StageResult("cp-sat", SolverStatus.OPTIMAL, 0.0, 0.0, 0.0, 0.0)
    code = solver.solve(built.model)
    seconds = time.perf_counter() - started
    if code == cp_model.UNKNOWN:
        # the limit hit before any placement was found: placing none is always valid,
        # and its gap against the bound is said, not hidden
        bound = solver.best_objective_bound
        return {}, StageResult("cp-sat", SolverStatus.FEASIBLE, 0.0, bound / SCALE, 1.0,
                               seconds)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return {}, StageResult("cp-sat", SolverStatus.from_cp_sat(code), float("nan"),
                               float("nan"), float("inf"), seconds)
    objective, bound = solver.objective_value, solver.best_objective_bound
    gap = 0.0 if code == cp_model.OPTIMAL else abs(bound - objective) / max(1.0, abs(objective))
    placed = {r.request_id: int(solver.value(s))
              for r, x, s in zip(built.requests, built.present, built.start, strict=True)
              if solver.boolean_value(x)}
    status = SolverStatus.OPTIMAL if gap <= 1e-9 else SolverStatus.from_cp_sat(code)
    return placed, StageResult("cp-sat", status, objective / SCALE, bound / SCALE, gap, seconds)
