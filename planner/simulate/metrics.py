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
    got_ph       Σ_k alloc_busy_pkh · rate_k: what p's allocated jobs ran in hour h

*Owed*, the fixed denominator — the same number for every policy, from the trace alone:

    offered_ph   Σ over p's allocated jobs j of gpus_j · rate_k(j) · |[s_j, s_j + d_j) ∩
                 [h, h+1)|, s_j its submit, d_j its duration, clipped to quarter end: the
                 allocated work the trace offers in hour h if every job ran at once on
                 submit (no queue, no preemption — no policy)
    owed_ph      min(pace_p, offered_ph)  — the allocation, capped at the work offered

*Delivered ÷ owed* at a granularity of B hours (a day, B = 24; a week, B = 168; the
quarter, B = all hours; the last bin may be short), per project p and bin b:

    owed_pb      Σ_{h ∈ b} owed_ph,  got_pb = Σ_{h ∈ b} got_ph
    delivered_pb min(got_pb, owed_pb) — summed before the min, so a project that got
                 its day's share in a burst is not penalised hour by hour, and work
                 beyond what was owed in the bin earns nothing
    delivered_over_owed_{daily,weekly,quarter} = Σ_pb delivered_pb / Σ_pb owed_pb
                 (daily ≤ weekly ≤ quarter: a min of sums is at least the sum of mins)
    team ratio   the weekly sums over the team's projects
    worst_team_delivered_over_owed  the lowest weekly team ratio (teams owed anything)
    worst_sizeable_team_delivered_over_owed  the same over teams owed ≥ 1 % of all that
                 was owed (a team with a handful of jobs swings the plain minimum)
    jain         Jain's index (Σx)² / (n·Σx²) over the weekly team ratios x
    owed_ngh, delivered_ngh  Σ owed_ph and the weekly Σ delivered_pb (the teams' too)

The old hourly figure, stricter (and policy-dependent), kept as a secondary:

    want_owed_ph min(pace_p, Σ_k alloc_want_pkh · rate_k): the pace capped at the
                 policy's own outstanding allocated work (its queue, which differs
                 between policies)
    delivered_over_owed_hourly   Σ_ph min(got_ph, want_owed_ph) / Σ_ph want_owed_ph
    delivered_over_owed_within_budget  the same over the hours before the project's
                 charged NGH reached its budget
    owed_hourly_ngh, delivered_hourly_ngh  its two sums

Everything else:

    occupancy    Σ busy_pkh / Σ capacity_k, over the cluster-hours (k, h) in which k had
                 any outstanding job (GPU-hours, not NGH)
    occupancy_of_demand  Σ busy_pkh / Σ_kh min(capacity_k, Σ_p want_pkh): busy over what
                 could have been busy given the outstanding work (1 = never idle while
                 work waited, whole-node and packing losses aside)
    charged_p    NGH of p's allocated jobs' run segments (including work later lost)
    budget_error |charged_p − budget_p| / budget_p at quarter end, over projects with a
                 budget; mean and max
    charged_over_budget  charged_p / budget_p per project with a budget (``projects`` in
                 metrics.json, with budget_p, charged_p and submitted_p); its max and
                 the project it belongs to (the first by the scenario's project order
                 on a tie): how far past its budget the policy let one project run
    budget_error_floor  max(0, budget_p − submitted_p) / budget_p, submitted_p the NGH of
                 all allocated work p submitted (Σ gpus · duration · rate): the error that
                 demand alone forces on a project wanting less than its budget, whatever
                 the policy; mean and max over the same projects
    wait         first start − submit, per job; a job never started counts its wait to
                 the end of the replay (quarter end), and ``jobs_never_started`` says how
                 many did; p50/p90 over all jobs and over small jobs (≤ 1 GPU)
    preemptions  count; gpu_hours_lost_to_preemption = GPU-hours of non-resumable runs
                 thrown away by a preemption
    reserved_idle_gpu_hours  GPU-hours held but unused: the idle GPUs of whole nodes given
                 to gang jobs whose GPU count is not a multiple of the node size

Of the trace alone (:func:`trace_figures`, ``metrics.json``'s ``trace``): the owed NGH,
the offered load per week (GPU-hours offered as if run at once ÷ the capacity's
GPU-hours that week) and the *ideal occupancy*: per cluster, a fluid scheduler that
runs the offered work (as if run at once) up to capacity every hour and carries the
rest to the next hour, its busy GPU-hours ÷ all capacity GPU-hours of the quarter.
No schedule runs more *useful* work by any hour (a job cannot run before its submit nor
faster than its GPUs, a cluster not beyond its capacity); a policy's busy GPU-hours can
exceed it only by redoing work lost to restarts.
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


@dataclass(frozen=True)
class Axes:
    """The indices every figure shares: projects, clusters, hours, rates, budgets."""

    projects: tuple[str, ...]
    clusters: tuple[str, ...]
    rate: np.ndarray  # (K,) NGH per GPU-hour
    capacity: np.ndarray  # (K,) GPUs
    budget: np.ndarray  # (P,) NGH
    hours: float  # quarter length
    n_hours: int

    @classmethod
    def of(cls, scenario: Scenario) -> Axes:
        """The axes of ``scenario``'s quarter."""
        cfg, arrays = scenario.config, scenario.arrays
        hours = (cfg.quarter_end - cfg.quarter_start) / pd.Timedelta(hours=1)
        return cls(arrays.projects, arrays.clusters, arrays.rate, arrays.gpus.astype(float),
                   arrays.budget, hours, max(1, int(math.ceil(hours - 1e-9))))


@dataclass(frozen=True)
class Offered:
    """The trace's offered work (as if every job ran at once on submit), per hour."""

    gpu_hours_kh: np.ndarray  # (K, H) all jobs, GPU-hours
    alloc_ngh_ph: np.ndarray  # (P, H) allocated jobs, NGH
    owed_ph: np.ndarray  # (P, H) min(pace, offered allocated NGH): the fixed denominator
    submitted_alloc_ngh: np.ndarray  # (P,) NGH of all allocated work submitted


def _job_arrays(scenario: Scenario, trace: pd.DataFrame, axes: Axes) -> dict[str, np.ndarray]:
    p_index = {p: i for i, p in enumerate(axes.projects)}
    k_index = {c: k for k, c in enumerate(axes.clusters)}
    submit = ((trace["submit"] - scenario.config.quarter_start) / pd.Timedelta(hours=1))
    return {
        "project": trace["project"].map(p_index).to_numpy(dtype=np.int64),
        "cluster": trace["cluster"].map(k_index).to_numpy(dtype=np.int64),
        "gpus": trace["gpus"].to_numpy(dtype=float),
        "submit": np.maximum(submit.to_numpy(dtype=float), 0.0),
        "duration": trace["duration_hours"].to_numpy(dtype=float),
        "allocated": trace["min_runtime_hours"].to_numpy(dtype=float) > 0,
    }


def offered_work(scenario: Scenario, trace: pd.DataFrame, axes: Axes | None = None
                 ) -> Offered:
    """The offered work and the owed NGH of the trace (see the module docstring).

    Depends on the scenario and the trace only: every policy's figures divide by it.
    """
    axes = axes or Axes.of(scenario)
    jobs = _job_arrays(scenario, trace, axes)
    n_p, n_k, n_h = len(axes.projects), len(axes.clusters), axes.n_hours
    end = np.minimum(jobs["submit"] + jobs["duration"], axes.hours)
    gpu_hours = spread(jobs["submit"], end, jobs["gpus"], jobs["cluster"], n_k, n_h)
    alloc = jobs["allocated"]
    ngh = jobs["gpus"] * axes.rate[jobs["cluster"]]
    alloc_ngh = spread(jobs["submit"][alloc], end[alloc], ngh[alloc], jobs["project"][alloc],
                       n_p, n_h)
    pace = axes.budget / axes.hours
    owed = np.minimum(pace[:, None], alloc_ngh)
    submitted = np.zeros(n_p)
    np.add.at(submitted, jobs["project"][alloc], (ngh * jobs["duration"])[alloc])
    return Offered(gpu_hours, alloc_ngh, owed, submitted)


def binned(values: np.ndarray, width: int) -> np.ndarray:
    """(rows, ⌈H / width⌉): sums over consecutive bins of ``width`` hours (last one short)."""
    n_h = values.shape[1]
    starts = np.arange(0, n_h, width)
    return np.add.reduceat(values, starts, axis=1)


def delivered_owed(got_ph: np.ndarray, owed_ph: np.ndarray, width: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Per project: Σ_b min(got_pb, owed_pb) and Σ_b owed_pb over bins of ``width`` hours."""
    got_b, owed_b = binned(got_ph, width), binned(owed_ph, width)
    return np.minimum(got_b, owed_b).sum(axis=1), owed_b.sum(axis=1)


def ideal_occupancy(capacity: np.ndarray, offered_kh: np.ndarray) -> float:
    """Busy ÷ capacity GPU-hours of the fluid scheduler (module docstring), all hours."""
    backlog = np.zeros(len(capacity))
    busy = 0.0
    for h in range(offered_kh.shape[1]):  # H steps of K-vectors: a few thousand, cheap
        backlog += offered_kh[:, h]
        run = np.minimum(capacity, backlog)
        busy += float(run.sum())
        backlog -= run
    total = float(capacity.sum()) * offered_kh.shape[1]
    return busy / total if total > 0 else 1.0


HOURS_PER_DAY, HOURS_PER_WEEK = 24, 168


def trace_figures(scenario: Scenario, trace: pd.DataFrame) -> dict:
    """The figures of the trace alone, the same for every policy (``metrics.json``'s ``trace``).

    ``owed_ngh`` (the fixed denominator), ``submitted_allocated_ngh``, the budget-error
    floor, ``ideal_occupancy`` and ``offered_load_by_week`` (offered GPU-hours ÷ the
    capacity's GPU-hours, per week from quarter start; the last week may be short).
    """
    axes = Axes.of(scenario)
    offered = offered_work(scenario, trace, axes)
    per_week = binned(offered.gpu_hours_kh.sum(axis=0, keepdims=True), HOURS_PER_WEEK)[0]
    hours_in_week = binned(np.ones((1, axes.n_hours)), HOURS_PER_WEEK)[0]
    load = per_week / (axes.capacity.sum() * hours_in_week)
    floor = _floor(axes.budget, offered.submitted_alloc_ngh)
    return {
        "jobs": int(len(trace)),
        "owed_ngh": _r(offered.owed_ph.sum()),
        "submitted_allocated_ngh": _r(offered.submitted_alloc_ngh.sum()),
        "budget_ngh": _r(axes.budget.sum()),
        "budget_error_floor_mean": _r(floor.mean()) if len(floor) else None,
        "budget_error_floor_max": _r(floor.max()) if len(floor) else None,
        "offered_load": _r(offered.gpu_hours_kh.sum() / (axes.capacity.sum() * axes.hours)),
        "ideal_occupancy": _r(ideal_occupancy(axes.capacity, offered.gpu_hours_kh)),
        "offered_load_by_week": [_r(x) for x in load],
    }


def _floor(budget: np.ndarray, submitted: np.ndarray) -> np.ndarray:
    has = budget > 0
    return np.maximum(0.0, budget[has] - submitted[has]) / budget[has]


def compute_metrics(scenario: Scenario, trace: pd.DataFrame, result: ReplayResult
                    ) -> PolicyMetrics:
    """All figures of one replay (see the module docstring)."""
    tree = scenario.tree
    axes = Axes.of(scenario)
    rate, capacity, budget = axes.rate, axes.capacity, axes.budget
    n_p, n_k, n_h = len(axes.projects), len(axes.clusters), axes.n_hours
    jobs = _job_arrays(scenario, trace, axes)
    job_p, job_k, gpus, submit = jobs["project"], jobs["cluster"], jobs["gpus"], jobs["submit"]
    allocated = jobs["allocated"]
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
    got = (alloc_busy * rate_rows).reshape(n_p, n_k, n_h).sum(axis=1)
    # the fixed denominator, from the trace alone
    offered = offered_work(scenario, trace, axes)
    owed = offered.owed_ph
    by_width = {name: delivered_owed(got, owed, width) for name, width in
                (("daily", HOURS_PER_DAY), ("weekly", HOURS_PER_WEEK), ("quarter", n_h))}
    # the old hourly figure, owed capped at the policy's own queue
    want_owed = np.minimum(pace[:, None],
                           (alloc_want * rate_rows).reshape(n_p, n_k, n_h).sum(axis=1))
    hourly_delivered = np.minimum(got, want_owed)
    team_of, team_names = _teams(tree)
    n_t = len(team_names)
    weekly_delivered_p, weekly_owed_p = by_width["weekly"]
    owed_t = np.zeros(n_t)
    delivered_t = np.zeros(n_t)
    np.add.at(owed_t, team_of, weekly_owed_p)
    np.add.at(delivered_t, team_of, weekly_delivered_p)
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
    owed_within = want_owed[within].sum()
    has_budget = budget > 0
    error = np.abs(charged - budget)[has_budget] / budget[has_budget]
    floor = _floor(budget, offered.submitted_alloc_ngh)
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
            "delivered_over_owed_weekly": _r(ratio_t[t]) if owed_some[t] else None,
            "budget_ngh": _r(budget[members].sum()), "charged_ngh": _r(charged[members].sum()),
        }
    over = np.divide(charged, budget, out=np.zeros(n_p), where=has_budget)
    worst = int(np.argmax(np.where(has_budget, over, -np.inf))) if has_budget.any() else None
    projects = {
        name: {"budget_ngh": _r(budget[p]), "charged_ngh": _r(charged[p]),
               "submitted_ngh": _r(offered.submitted_alloc_ngh[p]),
               "charged_over_budget": _r(over[p]) if has_budget[p] else None}
        for p, name in enumerate(axes.projects)}
    summary = {
        "occupancy": _r(occupancy), "occupancy_of_demand": _r(of_demand),
        **{f"delivered_over_owed_{name}": _ratio(*sums) for name, sums in by_width.items()},
        "delivered_over_owed_hourly": _r(hourly_delivered.sum() / want_owed.sum())
        if want_owed.sum() > 0 else None,
        "delivered_over_owed_within_budget": _r(hourly_delivered[within].sum() / owed_within)
        if owed_within > 0 else None,
        "worst_team_delivered_over_owed": _r(x.min()) if len(x) else None,
        "worst_sizeable_team_delivered_over_owed": _r(sizeable.min()) if len(sizeable) else None,
        "budget_error_mean": _r(error.mean()) if len(error) else None,
        "budget_error_max": _r(error.max()) if len(error) else None,
        "budget_error_floor_mean": _r(floor.mean()) if len(floor) else None,
        "budget_error_floor_max": _r(floor.max()) if len(floor) else None,
        "charged_over_budget_max": _r(over[worst]) if worst is not None else None,
        "charged_over_budget_max_project": axes.projects[worst] if worst is not None else None,
        "jain": _r(jain),
        "wait_p50_hours": _pct(wait, 50), "wait_p90_hours": _pct(wait, 90),
        "small_wait_p50_hours": _pct(wait[small], 50),
        "small_wait_p90_hours": _pct(wait[small], 90),
        "preemptions": int(result.preemptions.sum()),
        "gpu_hours_lost_to_preemption": _r(result.lost_gpu_hours.sum()),
        "reserved_idle_gpu_hours": _r(held_idle),
        "jobs": int(len(trace)), "jobs_started": int(started.sum()),
        "jobs_never_started": int((~started).sum()),
        "jobs_finished": int((~np.isnan(result.finish)).sum()),
        "busy_gpu_hours": _r(busy.sum()), "charged_ngh": _r(charged.sum()),
        "budget_ngh": _r(budget.sum()), "owed_ngh": _r(owed.sum()),
        "delivered_ngh": _r(by_width["weekly"][0].sum()),
        "owed_hourly_ngh": _r(want_owed.sum()), "delivered_hourly_ngh": _r(hourly_delivered.sum()),
        "replans": result.replans,
        "teams": teams,
        "projects": projects,
    }
    occupancy_h = busy_kh.sum(axis=0) / capacity.sum()
    hourly = Hourly(occupancy_h, np.cumsum(charged_t, axis=1), pace_t, team_names)
    return PolicyMetrics(summary, hourly)


def _ratio(delivered: np.ndarray, owed: np.ndarray) -> float | None:
    return _r(delivered.sum() / owed.sum()) if owed.sum() > 0 else None


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
    order, team = np.unique(tree.team, return_inverse=True)
    return team.astype(np.int64), tuple(tree.ids[n] for n in order)


def _r(value: float) -> float:
    return round(float(value), 6)


def _pct(values: np.ndarray, q: float) -> float | None:
    return _r(np.percentile(values, q)) if len(values) else None
