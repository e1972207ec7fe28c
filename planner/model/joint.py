"""The joint MIP, for small instances: reservations and elastic grants in one model.

It exists to measure what the two-stage split (:mod:`planner.model.solve`) loses.
Same variables and rows as stage 2 (:mod:`planner.model.elastic`), plus binary
y_rs (request r starts in period s ∈ S_r) with

    (J1) one_start_r:  Σ_s y_rs ≤ 1
    (J2) nodes_kt:     Σ_{r on k, s ≤ t < s+L_r} n_r y_rs ≤ N_k − F_kt
    (1') capacity_kt:  Σ_p (g + o) + Σ gpn_k h_t n_r y_rs ≤ cap_kt − kept_kt
    (4') budget_p:     Σ r_k g + Σ_{r of p} e_r y_rs ≤ B_p − U_p − kept NGH

and objective  stage-2 objective + W Σ v_r y_rs − W λ Σ v_r |s − s⁰_r| y_rs,
with W the worth of a reserved GPU-hour. The split maximises reserved GPU-hours
first, so comparing at a W large enough to make that lexicographic
(``weight=10·G``) isolates what the split loses by choosing starts blind to the
elastic terms. Targets and the pace line are the split's, so both optimise the
same function.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.model.backends import DEFAULT_SOLVER, MatrixResult, solve_matrix
from planner.model.elastic import (
    add_budget,
    add_capacity,
    add_churn,
    add_demand,
    add_fair_share,
    add_grant_columns,
    add_pacing,
    elastic_triples,
    keys,
)
from planner.model.lp import INF, Keys, LpBuilder
from planner.model.problem import Problem
from planner.model.reservations import fixed_nodes, reference_start
from planner.model.result import CellValues
from planner.model.solve import budget_headroom


@dataclass
class JointModel:
    """The built joint MIP."""

    lp: LpBuilder
    starts: list[tuple[str, int]]  # (request_id, start) of each y column
    y: np.ndarray


def build_joint_model(problem: Problem, targets: CellValues | np.ndarray, pace_headroom: np.ndarray,
                      weight: float) -> JointModel:
    """The joint MIP; ``targets`` and ``pace_headroom`` come from the split's run."""
    n_projects, n_clusters, n_periods = problem.shape
    held = fixed_nodes(problem)
    kept_gpu_hours = held * problem.gpus_per_node[:, None] * problem.hours[None, :]
    available = np.maximum(problem.cap - kept_gpu_hours, 0.0)
    headroom = budget_headroom(problem)
    e = elastic_triples(problem)
    lp = LpBuilder()
    zeros = np.zeros(len(e[0]))
    g, o = add_grant_columns(lp, problem, e, (zeros, zeros))
    cells = add_capacity(lp, problem, e, g, o, available)
    add_demand(lp, problem, e, g, o)
    budget_projects = add_budget(lp, problem, e, g, headroom)
    add_fair_share(lp, problem, e, g, targets)
    add_pacing(lp, problem, e, g, pace_headroom)
    add_churn(lp, problem, e, g, o)

    starts, cost = [], []
    lateness = problem.model.objective.reservation_lateness
    requests = [r for r in problem.requests if r.starts]
    for r in requests:
        s0 = reference_start(problem, r)
        for s in r.starts:
            starts.append((r.request_id, s))
            cost.append(weight * r.gpu_hours * (1 - lateness * abs(s - s0)))
    y = lp.add_columns("start", np.zeros(len(starts)), 1.0, np.array(cost), integer=True,
                       keys=Keys.of(request=[rid for rid, _ in starts],
                                    period=[problem.period_start[s] for _, s in starts]))
    # (J1)
    owner = np.repeat(np.arange(len(requests)), [len(r.starts) for r in requests])
    lp.add_rows("one_start", np.full(len(requests), -INF), 1.0, owner, y, 1.0,
                keys=Keys.of(request=[r.request_id for r in requests]))
    # (J2), (1'), (4'): coefficients of each y over the periods it covers
    node_row, node_col, node_val = [], [], []
    cap_row, cap_col, cap_val = [], [], []
    cell_row = {int(c): i for i, c in enumerate(cells)}
    by_request = {r.request_id: r for r in requests}
    for col, (rid, s) in zip(y, starts, strict=True):
        r = by_request[rid]
        for t in range(s, s + r.length):
            node_row.append(r.cluster * n_periods + t)
            node_col.append(col)
            node_val.append(r.nodes)
            code = r.cluster * n_periods + t
            if code in cell_row:
                cap_row.append(cell_row[code])
                cap_col.append(col)
                cap_val.append(r.nodes * problem.gpus_per_node[r.cluster] * problem.hours[t])
    node_limit = (problem.nodes[:, None] - held).reshape(-1).astype(float)
    lp.add_rows("nodes", np.full(n_clusters * n_periods, -INF), node_limit,
                node_row, node_col, node_val,
                keys=keys(problem, cluster=np.repeat(np.arange(n_clusters), n_periods),
                          period=np.tile(np.arange(n_periods), n_clusters)))
    lp.add_entries("capacity", cap_row, cap_col, cap_val)
    budget_row = {int(p): i for i, p in enumerate(budget_projects)}
    own_row, own_col, own_val, extra = [], [], [], {}
    for col, (rid, _) in zip(y, starts, strict=True):
        r = by_request[rid]
        if r.project in budget_row:
            own_row.append(budget_row[r.project])
            own_col.append(col)
            own_val.append(r.ngh)
        else:
            extra.setdefault(r.project, []).append((col, r.ngh))
    lp.add_entries("budget", own_row, own_col, own_val)
    if extra:
        projects = sorted(extra)
        rows = [i for i, p in enumerate(projects) for _ in extra[p]]
        lp.add_rows("reservation_budget", np.full(len(projects), -INF),
                    np.maximum(headroom[projects], 0.0), rows,
                    [c for p in projects for c, _ in extra[p]],
                    [v for p in projects for _, v in extra[p]], keys=keys(problem, projects))
    return JointModel(lp, starts, y)


def solve_joint_model(built: JointModel, time_limit: float, threads: int, mip_gap: float = 1e-6,
                      solver: str = DEFAULT_SOLVER) -> MatrixResult:
    """The joint MIP's outcome (status, objective, best bound, gap) as ``solver`` reports it."""
    return solve_matrix(built.lp.matrix(maximize=True), solver, time_limit=time_limit,
                        threads=threads, mip_gap=mip_gap)


@dataclass(frozen=True)
class SplitLoss:
    """The split's objective against the joint MIP's, both in the joint objective's terms."""

    split: float
    joint: float
    joint_bound: float
    status: str

    @property
    def loss(self) -> float:
        """Relative loss of the split against the joint optimum (≥ 0 up to solver tolerance)."""
        return (self.joint - self.split) / max(1.0, abs(self.joint))


def compare_with_joint(problem: Problem, time_limit: float = 60.0,
                       solver: str = DEFAULT_SOLVER) -> SplitLoss:
    """Solve ``problem`` by the split and by the joint MIP (with ``solver``); value both alike."""
    from planner.model.solve import elastic_inputs, solve

    split = solve(problem)
    weight = 10 * problem.model.objective.guaranteed
    _, pace_headroom, _ = elastic_inputs(problem, split.reservation_start)
    lateness = problem.model.objective.reservation_lateness
    reservation_value = sum(
        weight * r.gpu_hours * (1 - lateness * abs(split.reservation_start[r.request_id]
                                                   - reference_start(problem, r)))
        for r in problem.requests if r.request_id in split.reservation_start)
    split_value = split.stages[1].objective + reservation_value
    joint = build_joint_model(problem, split.targets, pace_headroom, weight)
    result = solve_joint_model(joint, time_limit, problem.model.solver.threads, solver=solver)
    return SplitLoss(split_value, result.objective, result.bound, str(result.status))
