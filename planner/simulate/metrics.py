"""What a replay delivered, from its run segments, hour by hour (numpy, no per-hour loops).

Indices: p projects, k clusters, h hours of the quarter ([h, h+1) from quarter start),
teams = the parent of each project in the org tree (a top-level project is its own team).

Hourly aggregates (GPU-hours in hour h, spread exactly over the hours a stretch covers):

    busy_pkh     GPUs jobs of p ran on k (run segments; a gang's idle rest of a node is
                 not busy); alloc_busy_pkh the same for allocated jobs only
    want_pkh     GPUs of p's outstanding jobs on k — submitted, not finished (waiting or
                 running); alloc_want_pkh the same for allocated jobs only: the
                 project's *demand* on its budget in this run (unallocated work is
                 charged to no budget, so nobody owes it)
    rate_k       NGH per GPU-hour of k's GPU type

Definitions (NGH unless said otherwise):

    pace_p       budget_p / quarter hours: the project's allocation per hour
    owed_ph      min(pace_p, Σ_k alloc_want_pkh · rate_k) — its allocation capped at its
                 demand
    got_ph       Σ_k alloc_busy_pkh · rate_k
    delivered_ph min(got_ph, owed_ph)                 — what it got within what it was owed
    delivered_over_owed          Σ delivered / Σ owed over all projects and hours
    delivered_over_owed_within_budget  the same over the hours before the project's
                 charged NGH reached its budget (owed keeps counting the pace after a
                 project has spent its budget; this separates the two)
    team ratio                   the same sums over the team's projects
    worst_team_delivered_over_owed  the lowest team ratio (teams owed anything)
    worst_sizeable_team_delivered_over_owed  the same over teams owed ≥ 1 % of all that
                 was owed (a team with a handful of jobs swings the plain minimum)
    jain         Jain's index (Σx)² / (n·Σx²) over the team ratios x
    occupancy    Σ busy_pkh / Σ capacity_k, over the cluster-hours (k, h) in which k had
                 any outstanding job (GPU-hours, not NGH)
    occupancy_of_demand  Σ busy_pkh / Σ_kh min(capacity_k, Σ_p want_pkh): busy over what
                 could have been busy given the outstanding work (1 = never idle while
                 work waited, whole-node and packing losses aside)
    charged_p    NGH of p's allocated jobs' run segments (including work later lost)
    budget_error |charged_p − budget_p| / budget_p at quarter end, over projects with a
                 budget; mean and max
    wait         first start − submit, per job; a job never started counts its wait to
                 quarter end; p50/p90 over all jobs and over small jobs (≤ 1 GPU)
    preemptions  count; gpu_hours_lost_to_preemption = GPU-hours of non-resumable runs
                 thrown away by a preemption
    reserved_idle_gpu_hours  GPU-hours held but unused: the idle GPUs of whole nodes given
                 to gang jobs whose GPU count is not a multiple of the node size
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.fairshare import OrgTree
from planner.inputs import Scenario
from planner.simulate.engine import ReplayResult


@dataclass(frozen=True)
class Hourly:
    """Per-hour series kept for the pictures."""

    occupancy: np.ndarray  # (H,) busy ÷ capacity over all clusters, GPU-hours
    charged_team: np.ndarray  # (T, H) cumulative NGH charged per team
    pace_team: np.ndarray  # (T,) NGH per hour of budget pace per team
    teams: tuple[str, ...]


@dataclass(frozen=True)
class PolicyMetrics:
    """The figures of one policy's replay."""

    summary: dict  # the metrics.json entry (floats rounded)
    hourly: Hourly


def spread(start: np.ndarray, end: np.ndarray, weight: np.ndarray, row: np.ndarray,
           n_rows: int, n_hours: int) -> np.ndarray:
    """(n_rows, n_hours): Σ weight × overlap of [start, end) with each hour, per row."""
    start = np.clip(np.asarray(start, dtype=float), 0.0, n_hours)
    end = np.clip(np.asarray(end, dtype=float), 0.0, n_hours)
    keep = end > start
    start, end, weight, row = start[keep], end[keep], np.asarray(weight, float)[keep], \
        np.asarray(row, dtype=np.int64)[keep]
    out = np.zeros((n_rows, n_hours + 2))
    h0 = np.floor(start).astype(np.int64)
    h1 = np.floor(end).astype(np.int64)
    same = h0 == h1
    flat = out.reshape(-1)
    width = n_hours + 2
    np.add.at(flat, row[same] * width + h0[same], weight[same] * (end[same] - start[same]))
    apart = ~same
    r, a, b = row[apart], h0[apart], h1[apart]
    w, s, e = weight[apart], start[apart], end[apart]
    np.add.at(flat, r * width + a, w * (a + 1 - s))
    np.add.at(flat, r * width + b, w * (e - b))
    # whole hours a+1 .. b−1 through a difference array
    diff = np.zeros_like(out)
    dflat = diff.reshape(-1)
    np.add.at(dflat, r * width + a + 1, w)
    np.add.at(dflat, r * width + b, -w)
    out += np.cumsum(diff, axis=1)
    return out[:, :n_hours]


def compute_metrics(scenario: Scenario, trace: pd.DataFrame, result: ReplayResult
                    ) -> PolicyMetrics:
    """All figures of one replay (see the module docstring)."""
    tree = OrgTree.from_frame(scenario.org)
    cfg = scenario.config
    projects = tree.leaves
    p_index = tree.leaf_index
    clusters = [str(c) for c in scenario.clusters["cluster"]]
    k_index = {c: k for k, c in enumerate(clusters)}
    rate = np.array([cfg.rate(t) for t in scenario.clusters["gpu_type"]])
    capacity = (scenario.clusters["nodes"] * scenario.clusters["gpus_per_node"]).to_numpy(float)
    n_p, n_k = len(projects), len(clusters)
    n_h = max(1, int(math.ceil(result.hours - 1e-9)))
    budget = np.zeros(n_p)
    for p, b in zip(scenario.budgets["project"], scenario.budgets["gpu_hours"], strict=True):
        budget[p_index[p]] = float(b)
    job_p = trace["project"].map(p_index).to_numpy(dtype=np.int64)
    job_k = trace["cluster"].map(k_index).to_numpy(dtype=np.int64)
    gpus = trace["gpus"].to_numpy(dtype=float)
    submit = np.maximum(((trace["submit"] - cfg.quarter_start) / pd.Timedelta(hours=1))
                        .to_numpy(dtype=float), 0.0)
    allocated = trace["min_runtime_hours"].to_numpy(dtype=float) > 0
    seg = _segments(result)
    # hourly GPU-hours per (p, k)
    busy = spread(seg["start"], seg["end"], seg["gpus"], seg["project"] * n_k + seg["cluster"],
                  n_p * n_k, n_h).reshape(n_p, n_k, n_h)
    until = np.where(np.isnan(result.finish), result.hours, result.finish)
    want = spread(submit, until, gpus, job_p * n_k + job_k, n_p * n_k, n_h).reshape(n_p, n_k,
                                                                                   n_h)
    alloc_want = spread(submit[allocated], until[allocated], gpus[allocated],
                        (job_p * n_k + job_k)[allocated], n_p * n_k, n_h)
    seg_alloc = allocated[seg["job"]]
    alloc_busy = spread(seg["start"][seg_alloc], seg["end"][seg_alloc], seg["gpus"][seg_alloc],
                        (seg["project"] * n_k + seg["cluster"])[seg_alloc], n_p * n_k, n_h)
    pace = budget / result.hours
    rate_rows = np.tile(rate, n_p)[:, None]  # rate of each (p, k) row
    owed = np.minimum(pace[:, None], (alloc_want * rate_rows).reshape(n_p, n_k, n_h).sum(axis=1))
    got = (alloc_busy * rate_rows).reshape(n_p, n_k, n_h).sum(axis=1)
    delivered = np.minimum(got, owed)
    team_of, team_names = _teams(tree)
    n_t = len(team_names)
    owed_t = np.zeros(n_t)
    delivered_t = np.zeros(n_t)
    np.add.at(owed_t, team_of, owed.sum(axis=1))
    np.add.at(delivered_t, team_of, delivered.sum(axis=1))
    owed_some = owed_t > 1e-9
    ratio_t = np.divide(delivered_t, owed_t, out=np.ones(n_t), where=owed_some)
    x = ratio_t[owed_some]
    sizeable = ratio_t[owed_t >= 0.01 * owed_t.sum()] if owed_t.sum() > 0 else x
    jain = float(x.sum() ** 2 / (len(x) * (x ** 2).sum())) if len(x) and (x ** 2).sum() > 0 \
        else 1.0
    # occupancy over cluster-hours with outstanding work
    busy_kh = busy.sum(axis=0)
    active = want.sum(axis=0) > 1e-9
    cap_kh = np.broadcast_to(capacity[:, None], busy_kh.shape)
    occupancy = float(busy_kh[active].sum() / cap_kh[active].sum()) if active.any() else 1.0
    could = np.minimum(cap_kh, want.sum(axis=0)).sum()
    of_demand = float(busy_kh.sum() / could) if could > 0 else 1.0
    # charged, per project (allocated jobs only)
    charged_h = spread(seg["start"], seg["end"],
                       seg["gpus"] * rate[seg["cluster"]] * allocated[seg["job"]],
                       seg["project"], n_p, n_h)
    charged = charged_h.sum(axis=1)
    before = np.concatenate([np.zeros((n_p, 1)), np.cumsum(charged_h, axis=1)[:, :-1]], axis=1)
    within = before < budget[:, None]  # hours that begin with budget left
    owed_within = owed[within].sum()
    has_budget = budget > 0
    error = np.abs(charged - budget)[has_budget] / budget[has_budget]
    # waits
    started = ~np.isnan(result.first_start)
    wait = np.where(started, result.first_start, result.hours) - submit
    small = gpus <= 1
    held_idle = float(((seg["held"] - seg["gpus"]) * (seg["end"] - seg["start"])).sum())
    charged_t = np.zeros((n_t, n_h))
    np.add.at(charged_t, team_of, charged_h)
    pace_t = np.zeros(n_t)
    np.add.at(pace_t, team_of, pace)
    teams = {}
    for t, name in enumerate(team_names):
        members = team_of == t
        teams[name] = {
            "owed_ngh": _r(owed_t[t]), "delivered_ngh": _r(delivered_t[t]),
            "delivered_over_owed": _r(ratio_t[t]) if owed_some[t] else None,
            "budget_ngh": _r(budget[members].sum()), "charged_ngh": _r(charged[members].sum()),
        }
    summary = {
        "occupancy": _r(occupancy), "occupancy_of_demand": _r(of_demand),
        "delivered_over_owed": _r(delivered.sum() / owed.sum()) if owed.sum() > 0 else None,
        "delivered_over_owed_within_budget": _r(delivered[within].sum() / owed_within)
        if owed_within > 0 else None,
        "worst_team_delivered_over_owed": _r(x.min()) if len(x) else None,
        "worst_sizeable_team_delivered_over_owed": _r(sizeable.min()) if len(sizeable) else None,
        "budget_error_mean": _r(error.mean()) if len(error) else None,
        "budget_error_max": _r(error.max()) if len(error) else None,
        "jain": _r(jain),
        "wait_p50_hours": _pct(wait, 50), "wait_p90_hours": _pct(wait, 90),
        "small_wait_p50_hours": _pct(wait[small], 50),
        "small_wait_p90_hours": _pct(wait[small], 90),
        "preemptions": int(result.preemptions.sum()),
        "gpu_hours_lost_to_preemption": _r(result.lost_gpu_hours.sum()),
        "reserved_idle_gpu_hours": _r(held_idle),
        "jobs": int(len(trace)), "jobs_started": int(started.sum()),
        "jobs_finished": int((~np.isnan(result.finish)).sum()),
        "busy_gpu_hours": _r(busy.sum()), "charged_ngh": _r(charged.sum()),
        "budget_ngh": _r(budget.sum()), "owed_ngh": _r(owed.sum()),
        "delivered_ngh": _r(delivered.sum()),
        "replans": result.replans,
        "teams": teams,
    }
    occupancy_h = busy_kh.sum(axis=0) / capacity.sum()
    hourly = Hourly(occupancy_h, np.cumsum(charged_t, axis=1), pace_t, team_names)
    return PolicyMetrics(summary, hourly)


def _segments(result: ReplayResult) -> dict[str, np.ndarray]:
    segs = result.segments
    return {
        "job": np.array([s.job for s in segs], dtype=np.int64),
        "project": np.array([s.project for s in segs], dtype=np.int64),
        "cluster": np.array([s.cluster for s in segs], dtype=np.int64),
        "start": np.array([s.start for s in segs], dtype=float),
        "end": np.array([s.end for s in segs], dtype=float),
        "gpus": np.array([s.gpus for s in segs], dtype=float),
        "held": np.array([s.held for s in segs], dtype=float),
    }


def _teams(tree: OrgTree) -> tuple[np.ndarray, tuple[str, ...]]:
    nodes = []
    for leaf in tree.leaf_nodes:
        up = int(tree.parent[leaf])
        nodes.append(up if up >= 0 else int(leaf))
    order = sorted(set(nodes))
    pos = {n: i for i, n in enumerate(order)}
    return np.array([pos[n] for n in nodes], dtype=np.int64), tuple(tree.ids[n] for n in order)


def _r(value: float) -> float:
    return round(float(value), 6)


def _pct(values: np.ndarray, q: float) -> float | None:
    return _r(np.percentile(values, q)) if len(values) else None
