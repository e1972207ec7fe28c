"""The planning run: reservations (HiGHS MIP), fair-share targets, elastic LP (HiGHS).

Why split: a time-indexed joint MIP with fractional reservation starts has a weak
LP relaxation (1.7 % gap after 120 s on a sample-sized model). Reservations are
placed exactly by a time-indexed MIP without elastic columns, solved by HiGHS per
independent part of the clusters (:mod:`planner.model.reservations`), and the
elastic GPU-hours, continuous given the reservations, by an LP that HiGHS solves to
optimality. :mod:`planner.model.joint` builds the joint model for small instances;
the tests measure what the split loses against it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from planner.errors import SolverError
from planner.fairshare.targets import fair_share_targets_at
from planner.model.elastic import (
    ElasticModel,
    build_elastic_model,
    elastic_triples,
    solve_elastic_model,
    split_triples,
)
from planner.model.problem import Problem
from planner.model.reservations import (
    build_reservation_model,
    fixed_ngh,
    fixed_nodes,
    solve_reservation_model,
)
from planner.model.result import CellValues, Solution, SolverStatus, StageResult, relative_gap


def reserved_load(problem: Problem, placed: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """Reserved GPU-hours per (k, t) and reserved NGH per (p, t), placed and kept."""
    n_projects, n_clusters, n_periods = problem.shape
    gpu_hours = fixed_nodes(problem) * problem.gpus_per_node[:, None] * problem.hours[None, :]
    ngh = np.zeros((n_projects, n_periods))
    for f in problem.fixed:
        for t in range(n_periods):
            lo = max(f.start, problem.period_start[t])
            hi = min(f.end, problem.period_end[t])
            if hi > lo:
                ngh[f.project, t] += (f.nodes * problem.gpus_per_node[f.cluster]
                                      * (hi - lo).total_seconds() / 3600 * problem.rate[f.cluster])
    for r in problem.requests:
        if r.request_id not in placed:
            continue
        span = slice(placed[r.request_id], placed[r.request_id] + r.length)
        block = r.nodes * problem.gpus_per_node[r.cluster] * problem.hours[span]
        gpu_hours[r.cluster, span] += block
        ngh[r.project, span] += block * problem.rate[r.cluster]
    return gpu_hours, ngh


def budget_headroom(problem: Problem) -> np.ndarray:
    """H_p before new reservations: budget − usage − kept reservations (NGH)."""
    return problem.budget - problem.used - fixed_ngh(problem)


def elastic_inputs(problem: Problem, placed: dict[str, int]
                   ) -> tuple[np.ndarray, np.ndarray, CellValues]:
    """What stage 2 needs once reservations are placed: A_kt, H_p and the targets τ.

    A_kt is the capacity reservations (kept and placed) leave, in GPU-hours; H_p what
    usage and all reservations leave of the budget (NGH); τ the fair-share targets in
    GPU-hours (computed in NGH, then divided by the cluster's rate), kept at the cells
    with demand only (zero elsewhere): no (P, K, T) array is made for them.
    """
    reserved_gpu_hours, reserved_ngh = reserved_load(problem, placed)
    available = np.maximum(problem.cap - reserved_gpu_hours, 0.0)
    headroom = np.maximum(problem.budget - problem.used - reserved_ngh.sum(axis=1), 0.0)
    rate = problem.rate
    e = elastic_triples(problem)
    targets_ngh = fair_share_targets_at(problem.tree, available * rate[:, None], e,
                                        problem.dem[e] * rate[e[1]], problem.shape, headroom,
                                        problem.past, reserved_ngh, problem.lookback,
                                        problem.positions)
    return available, headroom, CellValues.at(problem.shape, e, targets_ngh / rate[e[1]])


def solve(problem: Problem, on_built: Callable[[ElasticModel], None] | None = None) -> Solution:
    """Plan: place reservations, compute targets, allocate elastic GPU-hours.

    ``on_built`` is handed the built elastic LP before it is solved (``--write-model``).
    The LP goes to ``problem.model.solver.lp_solver``; reservations are HiGHS's always.
    """
    opts = problem.model.solver
    started = time.perf_counter()
    build = 0.0
    headroom = budget_headroom(problem)
    tick = time.perf_counter()
    reservation_model = build_reservation_model(problem, headroom)
    build += time.perf_counter() - tick
    # the stage's share of the limit covers building its parts and warm starts too, so
    # that the elastic LP keeps the rest (on a loaded machine the build takes seconds)
    share = opts.time_limit_seconds * opts.reservation_time_share
    placed, stage1 = solve_reservation_model(
        reservation_model, max(1.0, share - (time.perf_counter() - started)), opts.mip_gap,
        opts.threads, opts.random_seed)
    if stage1.status not in (SolverStatus.OPTIMAL, SolverStatus.FEASIBLE):
        raise SolverError(f"reservation placement found no valid plan ({stage1.status})")
    tick = time.perf_counter()
    available, elastic_headroom, targets = elastic_inputs(problem, placed)
    groups = split_triples(problem, elastic_triples(problem))
    if len(groups) <= 1:
        elastic_model = build_elastic_model(problem, available, elastic_headroom, targets)
        build += time.perf_counter() - tick
        if on_built is not None:
            on_built(elastic_model)
        remaining = max(1.0, opts.time_limit_seconds - (time.perf_counter() - started))
        guaranteed, opportunistic, duals, stage2 = solve_elastic_model(elastic_model, problem,
                                                                       remaining)
        cells = elastic_model.e
    else:
        build += time.perf_counter() - tick
        if on_built is not None:  # the whole LP, as written by --write-model
            on_built(build_elastic_model(problem, available, elastic_headroom, targets))
        cells, guaranteed, opportunistic, duals, stage2, group_build = _solve_groups(
            problem, groups, available, elastic_headroom, targets,
            started + opts.time_limit_seconds)
        build += group_build
    if stage2.status not in (SolverStatus.OPTIMAL, SolverStatus.FEASIBLE):
        raise SolverError(f"the elastic allocation LP ended {stage2.status}; no plan written")
    total = time.perf_counter() - started
    return Solution(placed, _cell_values(problem, cells, guaranteed),
                    _cell_values(problem, cells, opportunistic), targets, duals,
                    (stage1, stage2), build, total - build)


def _cell_values(problem: Problem, cells: tuple[np.ndarray, np.ndarray, np.ndarray],
                 values: np.ndarray) -> CellValues:
    """The grants at ``cells`` (any order, each once), cleaned, as (P, K, T) cell values."""
    codes = np.ravel_multi_index(cells, problem.shape)
    order = np.argsort(codes, kind="stable")
    return CellValues(problem.shape, codes[order], _clean(values[order]))


def _solve_groups(problem: Problem, groups: list, available: np.ndarray, headroom: np.ndarray,
                  targets: CellValues, deadline: float
                  ) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray, np.ndarray,
                             np.ndarray, StageResult, float]:
    """One LP a group of clusters (they share no row), each built, solved and let go in turn.

    One at a time, on purpose: solving two groups' HiGHS instances on two threads at once
    gave different grants from run to run (a plan must be the same bytes every time). The
    stage's objective and bound are the sums of the groups' as each solver reported them,
    its gap :func:`relative_gap` of those sums, its status the worst group's (the first
    that is not optimal stops the rest: no plan is written then). Returns the triples
    solved (the groups' one after another), g and o at them, the budget duals, the
    outcome and the seconds spent building.
    """
    duals = np.zeros(problem.shape[0])
    cells: list[tuple[np.ndarray, ...]] = []
    grants: list[tuple[np.ndarray, np.ndarray]] = []
    objective = bound = seconds = build = 0.0
    stage = None
    for e in groups:
        tick = time.perf_counter()
        model = build_elastic_model(problem, available, headroom, targets, e)
        build += time.perf_counter() - tick
        # the time left when the solve starts; groups write disjoint projects' duals
        g, o, _, stage = solve_elastic_model(model, problem,
                                             max(1.0, deadline - time.perf_counter()), duals)
        del model
        cells.append(e)
        grants.append((g, o))
        seconds += stage.seconds
        if stage.status is not SolverStatus.OPTIMAL:
            break
        objective += stage.objective
        bound += stage.bound
    assert stage is not None
    solved = tuple(np.concatenate([e[i] for e in cells]) for i in range(3))
    g, o = (np.concatenate([pair[i] for pair in grants]) for i in range(2))
    if stage.status is not SolverStatus.OPTIMAL:
        return solved, g, o, duals, replace(stage, seconds=seconds), build
    gap = relative_gap(objective, bound)
    return solved, g, o, duals, StageResult(stage.solver, SolverStatus.OPTIMAL, objective,
                                            bound, gap, seconds), build


def _clean(values: np.ndarray) -> np.ndarray:
    """Round solver noise to the micro-GPU-hour (not a repair: |noise| ≤ 1e-6).

    In place (``values`` is this stage's own array). Only the entries that are not +0.0
    are touched: on a mostly-zero array, the same numbers as rounding it whole, without
    its dense passes.
    """
    out = values
    flat = out.reshape(-1)
    written = np.flatnonzero((flat != 0.0) | np.signbit(flat))
    kept = np.round(flat[written], 6)
    kept[np.abs(kept) < 1e-6] = 0.0
    flat[written] = kept
    return out
