"""Extract the frozen plan record from a solved problem (no solver calls, no I/O)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from planner import __version__
from planner.model.problem import Problem
from planner.model.result import CellValues, Solution, SolverStatus
from planner.model.solve import budget_headroom, reserved_load
from planner.times import iso

SCHEMA_VERSION = 1


def num(value: float) -> float:
    """A float as written: rounded to 1e-6, negative zero folded."""
    out = round(float(value), 6)
    return 0.0 if out == 0 else out


def gap_num(value: float) -> float:
    """A relative gap as written: 6 significant digits, so a small gap never reads as 0."""
    return float(f"{float(value):.6g}")


@dataclass(frozen=True)
class Plan:
    """What ``plan.json`` holds, as plain data (see planner/schemas/plan.schema.json)."""

    body: dict[str, Any]

    @property
    def allocations(self) -> list[dict[str, Any]]:
        """Elastic grants."""
        return self.body["allocations"]

    @property
    def reservations(self) -> list[dict[str, Any]]:
        """Placed and kept reservations."""
        return self.body["reservations"]


def _ranks(labels: list[str]) -> np.ndarray:
    """Each label's rank in Python's string order (the order ``sorted`` gives them)."""
    order = sorted(range(len(labels)), key=labels.__getitem__)
    rank = np.empty(len(labels), dtype=np.int64)
    rank[order] = np.arange(len(labels))
    return rank


def _allocations(problem: Problem, solution: Solution) -> list[dict[str, Any]]:
    """The grants > 0, sorted by (period_start, cluster, project, kind) as text.

    The order comes from one ``np.lexsort`` over each key's rank in string order (each
    label ranked once; the keys are unique, so it is the order ``sorted`` gives the
    records), and each record is made once, in that order.
    """
    starts = [iso(stamp) for stamp in problem.period_start]  # each period's text once
    parts = []
    for kind_rank, values in enumerate((solution.guaranteed, solution.opportunistic)):
        positive = values.values > 0  # codes ascend: (p, k, t) order, as np.nonzero's
        ps, ks, ts = np.unravel_index(values.codes[positive], values.shape)
        gpu_hours = values.values[positive]
        gpus = gpu_hours / np.asarray(problem.hours, dtype=np.float64)[ts]
        parts.append((ps, ks, ts, gpu_hours, gpus, np.full(len(ps), kind_rank)))
    ps, ks, ts, gpu_hours, gpus, kinds = (np.concatenate(column) for column in zip(*parts,
                                                                                   strict=True))
    # "guaranteed" < "opportunistic": the kind's rank is its index
    order = np.lexsort((kinds, _ranks(list(problem.projects))[ps],
                        _ranks(list(problem.clusters))[ks], _ranks(starts)[ts]))
    names = ("guaranteed", "opportunistic")
    projects, clusters = problem.projects, problem.clusters
    return [{"project": projects[p], "cluster": clusters[k], "period_start": starts[t],
             "gpu_hours": num(h), "kind": names[kind], "gpus": num(g)}
            for p, k, t, h, g, kind in zip(ps[order].tolist(), ks[order].tolist(),
                                           ts[order].tolist(), gpu_hours[order].tolist(),
                                           gpus[order].tolist(), kinds[order].tolist(),
                                           strict=True)]


def _reservations(problem: Problem, solution: Solution) -> list[dict[str, Any]]:
    out = []
    for f in problem.fixed:
        out.append({"request_id": f.request_id, "project": problem.projects[f.project],
                    "cluster": problem.clusters[f.cluster], "nodes": f.nodes,
                    "start": iso(f.start), "end": iso(f.end), "kept": True})
    for r in problem.requests:
        if r.request_id in solution.reservation_start:
            s = solution.reservation_start[r.request_id]
            start = problem.period_start[s]
            out.append({"request_id": r.request_id, "project": problem.projects[r.project],
                        "cluster": problem.clusters[r.cluster], "nodes": r.nodes,
                        "start": iso(start), "end": iso(problem.period_end[s + r.length - 1]),
                        "kept": False})
    out.sort(key=lambda r: (r["start"], r["cluster"], r["request_id"]))
    return out


def _unplaced(problem: Problem, solution: Solution) -> list[dict[str, Any]]:
    left = budget_headroom(problem)
    for r in problem.requests:
        if r.request_id in solution.reservation_start:
            left[r.project] -= r.ngh
    out = []
    for r in problem.requests:
        if r.request_id in solution.reservation_start:
            continue
        reason = r.reason
        if not reason and r.ngh > left[r.project] + 1e-6:
            reason = (f"budget: needs {r.ngh:.0f} NGH, project has "
                      f"{max(0.0, left[r.project]):.0f} NGH left after usage and its "
                      f"other reservations")
        elif not reason and solution.stages[0].status is not SolverStatus.OPTIMAL:
            reason = (f"not placed before the reservation search stopped at its limit "
                      f"(gap {100 * solution.stages[0].gap:.2f} % against its bound)")
        elif not reason:
            reason = (f"no room: {problem.clusters[r.cluster]} has no {r.nodes} free nodes "
                      f"for {r.length} periods inside the window (other reservations hold them)")
        out.append({"request_id": r.request_id, "project": problem.projects[r.project],
                    "reason": reason})
    out.sort(key=lambda u: u["request_id"])
    return out


def _ngh_by_project(values: CellValues, rate: np.ndarray, chunk: int = 64) -> np.ndarray:
    """Σ_{k,t} values[p, k, t] · r_k per project, ``chunk`` projects at a time.

    Each project's sum is the one ``(dense * rate).sum(axis=(1, 2))`` gives on the dense
    (P, K, T) array, bit for bit: its (K, T) block is laid out densely again (zeros
    included, so numpy's pairwise summation adds in the same order); only a chunk's
    blocks exist at once.
    """
    n_projects, n_clusters, n_periods = values.shape
    block = n_clusters * n_periods
    out = np.empty(n_projects)
    buffer = np.zeros(min(chunk, n_projects) * block)
    for lo in range(0, n_projects, chunk):
        hi = min(lo + chunk, n_projects)
        first, last = np.searchsorted(values.codes, [lo * block, hi * block])
        dense = buffer[:(hi - lo) * block]
        dense.fill(0.0)
        dense[values.codes[first:last] - lo * block] = values.values[first:last]
        out[lo:hi] = (dense.reshape(hi - lo, n_clusters, n_periods)
                      * rate[None, :, None]).sum(axis=(1, 2))
    return out


def _budgets(problem: Problem, solution: Solution) -> list[dict]:
    elastic = _ngh_by_project(solution.guaranteed, problem.rate)
    opportunistic = _ngh_by_project(solution.opportunistic, problem.rate)
    reserved = reserved_load(problem, solution.reservation_start)[1].sum(axis=1)
    return [{"project": name, "budget": num(problem.budget[p]), "used": num(problem.used[p]),
             "planned": num(elastic[p] + reserved[p]), "planned_reserved": num(reserved[p]),
             "planned_opportunistic": num(opportunistic[p]),
             "marginal_value": num(solution.budget_dual[p])}
            for p, name in enumerate(problem.projects)]


def _clusters(problem: Problem) -> list[dict[str, Any]]:
    """The clusters as planned.

    With ``node_labels`` (for the Kueue flavors) where the scenario gives them, so that the
    plan alone tells an executor which nodes make a cluster.
    """
    frame = problem.scenario.clusters
    labels = (dict(zip(frame["cluster"], frame["node_labels"], strict=True))
              if "node_labels" in frame else {})
    out = []
    for c, g, n, m, r in zip(problem.clusters, problem.gpu_type, problem.nodes,
                             problem.gpus_per_node, problem.rate, strict=True):
        row = {"cluster": c, "gpu_type": g, "nodes": int(n), "gpus_per_node": int(m),
               "rate": num(r)}
        if labels.get(c):
            row["node_labels"] = dict(labels[c])
        out.append(row)
    return out


def contract_terms(problem: Problem) -> dict[str, Any]:
    """The plan's ``contract``: the model's terms, plus ``fair_share_half_life_hours``.

    The half-life (hours) of the decay that stands for the fair share's lookback
    (:meth:`~planner.fairshare.lookback.Lookback.half_life_hours`), for an executor whose
    fair share can only decay usage (the Slurm export's ``PriorityDecayHalfLife``); absent
    without a lookback.
    """
    terms: dict[str, Any] = asdict(problem.model.contract)
    half = problem.lookback.half_life_hours(problem.scenario.config.period_hours)
    if half is not None:
        terms["fair_share_half_life_hours"] = num(half)
    return terms


def extract_plan(problem: Problem, solution: Solution) -> Plan:
    """The plan record; everything in it is determined by the inputs and options."""
    cfg = problem.scenario.config
    reservations = _reservations(problem, solution)
    body = {
        "schema_version": SCHEMA_VERSION,
        "scenario": cfg.name,
        "as_of": iso(cfg.as_of),
        "period_hours": cfg.period_hours,
        "quarter_start": iso(cfg.quarter_start),
        "quarter_end": iso(cfg.quarter_end),
        "model": problem.model.name,
        "planner_version": __version__,
        "input_digest": problem.scenario.digest,
        "contract": contract_terms(problem),
        "solver": {
            "name": "+".join(s.solver for s in solution.stages),
            "status": str(solution.status),
            "mip_gap": gap_num(solution.mip_gap),
            "stages": [{"name": s.solver, "status": str(s.status), "objective": num(s.objective),
                        "bound": num(s.bound), "gap": gap_num(s.gap)} for s in solution.stages],
            **({"limits": solution.limits} if solution.limits is not None else {}),
        },
        "periods": [{"start": iso(s), "end": iso(e)}
                    for s, e in zip(problem.period_start, problem.period_end, strict=True)],
        "clusters": _clusters(problem),
        "allocations": _allocations(problem, solution),
        "reservations": reservations,
        "unplaced": _unplaced(problem, solution),
        "budgets": _budgets(problem, solution),
    }
    return Plan(body)
