"""The planning problem as arrays: what the model builders read.

Built once from a validated :class:`~planner.inputs.Scenario`, a
:class:`~planner.config.ModelConfig` and optionally the previous plan. Nothing
downstream reads files or DataFrames of the scenario again.

Indices
    p ∈ P  projects (the org tree's leaves, in id order: loading sorts every table by its key)
    k ∈ K  clusters (in id order, likewise)
    t ∈ T  planning periods from ``as_of`` until ``quarter_end``: ``period_hours`` long, or
           on a mixed grid (``solver.period_grid``) fine near ``as_of`` and coarser later
    h ∈ H  lookback periods before ``as_of`` (oldest first)

Data (GPU-hours unless NGH is said)
    cap[k,t]      nodes_k · gpn_k · hours_t
    dem[p,k,t]    Σ demand rows: gpus × overlap hours with period t (0 where p may not use k),
                  kept at its cells > 0 only (a :class:`~planner.model.result.CellValues`:
                  the dense array was 1.76 GB of a 100× institute's 2.54 GB peak)
    rate[k]       NGH per GPU-hour of k's GPU type
    budget[p]     quarter budget, NGH
    used[p]       usage in [quarter_start, as_of), NGH
    past[p,h]     usage per lookback period, NGH
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from planner.config import ModelConfig, parse_period_grid
from planner.errors import InputError, InputProblem
from planner.fairshare.lookback import Lookback
from planner.inputs import Scenario
from planner.inputs.org import OrgTree
from planner.model.result import CellValues
from planner.times import iso

HOUR = pd.Timedelta(hours=1)


@dataclass(frozen=True)
class Request:
    """A reservation request with its derived placement data."""

    request_id: str
    project: int  # index into projects
    cluster: int  # index into clusters
    nodes: int
    hours: float
    length: int  # periods it spans (hours rounded up to period_hours; fewer on coarse tiers)
    starts: tuple[int, ...]  # allowed start periods (empty: cannot be placed)
    reason: str  # why it cannot be placed, "" when it can
    gpu_hours: float  # nodes · gpn · hours rounded up to whole period_hours
    ngh: float


@dataclass(frozen=True)
class FixedReservation:
    """A reservation kept from the previous plan (rule 6 or frozen periods)."""

    request_id: str
    project: int
    cluster: int
    nodes: int
    start: pd.Timestamp
    end: pd.Timestamp


@dataclass(frozen=True)
class PreviousPlan:
    """What the model needs of ``--previous``: grants on this grid and reservation starts."""

    guaranteed: CellValues  # (P, K, T) GPU-hours, kept where the previous plan granted any
    opportunistic: CellValues  # (P, K, T)
    covered: np.ndarray  # (T,) bool: the previous plan had this period
    starts: dict[str, pd.Timestamp] = field(default_factory=dict)
    ends: dict[str, pd.Timestamp] = field(default_factory=dict)


@dataclass(frozen=True)
class Problem:
    """Everything the builders need, indexed by (project, cluster, period)."""

    scenario: Scenario
    model: ModelConfig
    tree: OrgTree
    projects: tuple[str, ...]
    clusters: tuple[str, ...]
    gpu_type: tuple[str, ...]
    nodes: np.ndarray  # (K,)
    gpus_per_node: np.ndarray  # (K,)
    rate: np.ndarray  # (K,)
    period_start: tuple[pd.Timestamp, ...]
    period_end: tuple[pd.Timestamp, ...]
    hours: np.ndarray  # (T,)
    cap: np.ndarray  # (K, T) GPU-hours
    dem: CellValues  # (P, K, T) GPU-hours, kept at the cells > 0
    allowed: np.ndarray  # (P, K) bool
    budget: np.ndarray  # (P,) NGH
    used: np.ndarray  # (P,) NGH
    past: np.ndarray  # (P, H) NGH
    lookback: Lookback
    requests: tuple[Request, ...]
    fixed: tuple[FixedReservation, ...]
    previous: PreviousPlan | None

    @property
    def demand_cells(self) -> np.ndarray:
        """Flat codes p·K·T + k·T + t of the cells with dem > 0, ascending."""
        return self.dem.codes

    @property
    def shape(self) -> tuple[int, int, int]:
        """(P, K, T)."""
        return len(self.projects), len(self.clusters), len(self.hours)

    @property
    def positions(self) -> np.ndarray | None:
        """Period starts in ``period_hours`` steps from ``as_of`` on a mixed grid; else None."""
        if not self.model.solver.period_grid:
            return None
        return grid_positions(self.scenario, self.period_start)

    def period_of(self, when: pd.Timestamp) -> int:
        """Index of the period that starts at ``when`` (KeyError when none does)."""
        return self.period_start.index(when)


#: The shortest period the grid makes (the schema's least ``period_hours``).
MIN_PERIOD = pd.Timedelta(hours=1)


def period_grid(scenario: Scenario, grid: str = ""
                ) -> tuple[list[pd.Timestamp], list[pd.Timestamp]]:
    """Periods from ``as_of`` to ``quarter_end``; the last one may be short or long.

    ``grid`` (the model's ``solver.period_grid``) makes a mixed grid of tiers, e.g.
    ``"1h*48, 24h*13, 168h"``: fine periods near ``as_of``, coarser later
    (:func:`planner.config.parse_period_grid`); ``""`` the uniform grid of
    ``period_hours``, which stays the finest period a mixed grid may name (every tier is
    a whole multiple of it, :func:`grid_problems`). A tier's last period is cut short
    at quarter end.

    A remainder shorter than an hour is not a period of its own but lengthens the one
    before it: ``--as-of 2026-12-01T23:59:59Z`` left a one-second period at quarter end
    whose capacity (0.0356 GPU-hours on a 128-GPU cluster) was below what grants written
    to the micro-GPU-hour can add up to exactly (eight of them broke rule 1 by 1.4e-6).
    Such a lengthened period is not of full length, so no reservation is placed in it.
    """
    cfg = scenario.config
    tiers = parse_period_grid(grid) or ((cfg.period_hours, None),)
    steps = ((pd.Timedelta(hours=hours), count) for hours, count in tiers)
    step, left = next(steps)
    starts, ends = [], []
    at = cfg.as_of
    while at < cfg.quarter_end:
        if left == 0:
            step, left = next(steps, (step, None))
        end = at + step
        if cfg.quarter_end - end < MIN_PERIOD:
            end = cfg.quarter_end
        starts.append(at)
        ends.append(end)
        at = end
        if left is not None:
            left -= 1
    return starts, ends


def grid_problems(scenario: Scenario, model: ModelConfig) -> list[InputProblem]:
    """A mixed grid's tiers must be whole multiples of the scenario's ``period_hours``."""
    ph = scenario.config.period_hours
    label = Path(model.source).name if model.source else "model"
    return [InputProblem(label, None, "period_grid",
                         f"tier {hours:g}h is not a whole multiple of the scenario's "
                         f"period_hours ({ph:g} h), the finest period")
            for hours, _ in parse_period_grid(model.solver.period_grid)
            if abs(hours / ph - round(hours / ph)) > 1e-9]


def grid_positions(scenario: Scenario, starts: list[pd.Timestamp] | tuple[pd.Timestamp, ...]
                   ) -> np.ndarray:
    """Each period's start in ``period_hours`` steps from ``as_of``: 0, 1, 2, … when uniform.

    The lookback counts ages on this axis (:func:`planner.fairshare.targets.fair_share_targets`),
    so a window of days means the same hours on a mixed grid as on the uniform one.
    """
    cfg = scenario.config
    step = pd.Timedelta(hours=cfg.period_hours)
    return np.array([(s - cfg.as_of) / step for s in starts], dtype=float)


def overlap_hours(
    row_start: pd.Series, row_end: pd.Series, bin_start: np.ndarray, bin_end: np.ndarray
) -> np.ndarray:
    """Hours each row overlaps each bin: (rows, bins)."""
    rs = row_start.to_numpy(dtype="datetime64[s]").astype(np.int64)[:, None]
    re = row_end.to_numpy(dtype="datetime64[s]").astype(np.int64)[:, None]
    bs = bin_start.astype("datetime64[s]").astype(np.int64)[None, :]
    be = bin_end.astype("datetime64[s]").astype(np.int64)[None, :]
    return np.clip(np.minimum(re, be) - np.maximum(rs, bs), 0, None) / 3600.0


def _to_datetime64(stamps: list[pd.Timestamp]) -> np.ndarray:
    return np.array([s.tz_convert(None).to_datetime64() for s in stamps], dtype="datetime64[s]")


def _stamps_to_np(series: pd.Series) -> pd.Series:
    return series.dt.tz_convert(None)


def lookback_of(scenario: Scenario, model: ModelConfig) -> Lookback:
    """The lookback the fair share uses: the model's kind, the scenario's window unless set."""
    opts = model.lookback
    ph = scenario.config.period_hours
    if opts.kind == "decay":
        return Lookback.from_days(half_life_days=opts.half_life_days, period_hours=ph)
    days = opts.window_days if opts.window_days is not None else scenario.config.lookback_days
    return Lookback.from_days(window_days=days, period_hours=ph)


def _lookback_periods(lookback: Lookback, scenario: Scenario) -> int:
    cfg = scenario.config
    quarter_so_far = (cfg.as_of - cfg.quarter_start) / pd.Timedelta(hours=cfg.period_hours)
    if lookback.window_periods is not None:
        return int(lookback.window_periods)
    # decay: enough history that older usage weighs < 0.1 %, but not before the quarter
    return int(min(math.ceil(10 * lookback.half_life_periods), math.ceil(quarter_so_far) + 1))


def _usage_arrays(scenario: Scenario, projects: dict[str, int], clusters: dict[str, int],
                  rate: np.ndarray, n_past: int) -> tuple[np.ndarray, np.ndarray]:
    cfg = scenario.config
    usage = scenario.usage
    n_projects = len(projects)
    used = np.zeros(n_projects)
    past = np.zeros((n_projects, n_past))
    if usage.empty:
        return used, past
    p_idx = usage["project"].map(projects).to_numpy(dtype=np.int64)
    k_idx = usage["cluster"].map(clusters).to_numpy(dtype=np.int64)
    weight = usage["gpus"].to_numpy(dtype=float) * rate[k_idx]
    start, end = _stamps_to_np(usage["start"]), _stamps_to_np(usage["end"])
    quarter = overlap_hours(start, end,
                            _to_datetime64([cfg.quarter_start]), _to_datetime64([cfg.as_of]))
    np.add.at(used, p_idx, quarter[:, 0] * weight)
    if n_past:
        step = pd.Timedelta(hours=cfg.period_hours)
        bins = [cfg.as_of - step * (n_past - h) for h in range(n_past)]
        # only jobs that ran inside the lookback add to it (a row × bin array of the
        # others, 55,000 × 168 on an hourly 10× grid, would be zeros)
        seen = ((usage["end"] > bins[0]) & (usage["start"] < cfg.as_of)).to_numpy()
        hours = overlap_hours(start[seen], end[seen], _to_datetime64(bins),
                              _to_datetime64([b + step for b in bins]))
        np.add.at(past, p_idx[seen], hours * weight[seen][:, None])
    return used, past


def _demand_array(scenario: Scenario, projects: dict[str, int], clusters: dict[str, int],
                  starts: np.ndarray, ends: np.ndarray, allowed: np.ndarray | None = None
                  ) -> CellValues:
    """dem[p,k,t] at its cells > 0 (none where ``allowed`` is False).

    Each cell is Σ over the demand rows in file order (as ``np.add.at`` on a dense
    array would), computed at the cells some row reaches only: no (P, K, T) array is made.
    """
    shape = (len(projects), len(clusters), len(starts))
    demand = scenario.demand
    if demand.empty:
        return CellValues(shape, np.zeros(0, dtype=np.int64), np.zeros(0))
    hours = overlap_hours(_stamps_to_np(demand["start"]), _stamps_to_np(demand["end"]),
                          starts, ends)
    p_idx = demand["project"].map(projects).to_numpy(dtype=np.int64)
    k_idx = demand["cluster"].map(clusters).to_numpy(dtype=np.int64)
    if allowed is not None:  # a row on a cluster its project may not use counts nothing
        keep = allowed[p_idx, k_idx]
        hours, p_idx, k_idx = hours[keep], p_idx[keep], k_idx[keep]
        gpus = demand["gpus"].to_numpy(dtype=float)[keep]
    else:
        gpus = demand["gpus"].to_numpy(dtype=float)
    cell = ((p_idx * shape[1] + k_idx)[:, None] * shape[2]
            + np.arange(shape[2], dtype=np.int64)[None, :]).reshape(-1)
    gpu_hours = (hours * gpus[:, None]).reshape(-1)
    # a term of +0.0 leaves a sum of non-negative terms as it is: only the others count
    reached = np.flatnonzero(gpu_hours != 0.0)
    return CellValues.summed(shape, cell[reached], gpu_hours[reached])


def _requests(scenario: Scenario, model: ModelConfig, projects: dict[str, int],
              clusters: dict[str, int], nodes: np.ndarray, gpn: np.ndarray, rate: np.ndarray,
              starts: list[pd.Timestamp], ends: list[pd.Timestamp],
              fixed_ids: set[str]) -> tuple[Request, ...]:
    cfg = scenario.config
    ph = cfg.period_hours
    step = pd.Timedelta(hours=ph)
    longest = model.contract.max_reservation_hours
    uniform = not model.solver.period_grid
    edges = _Edges.of(starts, ends)
    out = []
    for row in scenario.reservations.itertuples(index=False):
        if row.request_id in fixed_ids:
            continue
        k = clusters[row.cluster]
        length = max(1, math.ceil(row.hours / ph - 1e-9))  # in periods of ph, for now
        gpu_hours = float(row.nodes * gpn[k] * length * ph)
        reason = ""
        allowed_starts: tuple[int, ...] = ()
        if row.nodes > nodes[k]:
            reason = f"needs {row.nodes} nodes, cluster {row.cluster} has {nodes[k]}"
        elif row.hours > longest:
            reason = (f"{row.hours:g} h is longer than the contract's longest reservation "
                      f"({longest:g} h)")
        else:
            allowed_starts, periods = _exact_starts(
                row.earliest_start, row.deadline, length * ph, edges, step, uniform)
            if not allowed_starts and uniform:
                reason = (f"window too short for {length} periods of {ph:g} h between "
                          f"{iso(max(row.earliest_start, cfg.as_of))} and "
                          f"{iso(min(row.deadline, cfg.quarter_end))}")
            elif not allowed_starts:
                reason = (f"no start between {iso(max(row.earliest_start, cfg.as_of))} and "
                          f"{iso(min(row.deadline, cfg.quarter_end))} from which its "
                          f"{length * ph:g} h fill whole periods of the grid")
            length = periods if allowed_starts else length
        out.append(Request(row.request_id, projects[row.project], k, int(row.nodes),
                           float(row.hours), length, allowed_starts, reason, gpu_hours,
                           gpu_hours * float(rate[k])))
    return tuple(out)


@dataclass(frozen=True)
class _Edges:
    """The grid's period starts and ends in ns since the epoch, for placing requests in bulk."""

    start: np.ndarray  # (T,) int64
    end: np.ndarray  # (T,) int64

    @staticmethod
    def of(starts: list[pd.Timestamp], ends: list[pd.Timestamp]) -> _Edges:
        """From the grid's timestamps."""
        return _Edges(np.array([s.value for s in starts], dtype=np.int64),
                      np.array([e.value for e in ends], dtype=np.int64))


def _exact_starts(earliest: pd.Timestamp, deadline: pd.Timestamp, hours: float,
                  edges: _Edges, step: pd.Timedelta, uniform: bool
                  ) -> tuple[tuple[int, ...], int]:
    """Allowed starts of a reservation lasting ``hours`` and its length in periods.

    Uniform grid: every start whose ``hours // period_hours`` periods are all of full
    length and end by the deadline. Mixed grid: the starts from which ``hours`` cover
    whole periods exactly (ends on a period end, so capacity, budget and rule 3 see the
    same hours); their count of periods differs between tiers, and the model gives a
    request one length, so the length with the most such starts is kept (ties: the one
    whose first start is earliest) and starts needing another length are dropped.
    """
    n = len(edges.start)
    if n == 0:
        return (), 0
    span = round(hours * 3600) * 10**9  # ns
    ok = (edges.start >= earliest.value) & (edges.start + span <= deadline.value)
    if uniform:
        length = round(hours / (step / HOUR))
        full = np.concatenate([[0], np.cumsum(edges.end - edges.start == step.value)])
        index = np.arange(n)
        inside = index + length <= n
        ok &= inside
        ok[inside] &= (full[index[inside] + length] - full[index[inside]]) == length
        return tuple(int(s) for s in np.flatnonzero(ok)), length
    bound = np.concatenate([edges.start, edges.end[-1:]])
    stop = np.searchsorted(bound, edges.start + span)  # first boundary ≥ start + hours
    ok &= (stop <= n) & (bound[np.minimum(stop, n)] == edges.start + span)
    found = np.flatnonzero(ok)
    if len(found) == 0:
        return (), 0
    lengths = stop[found] - found
    values, first, counts = np.unique(lengths, return_index=True, return_counts=True)
    best = min(range(len(values)), key=lambda i: (-counts[i], first[i]))
    return tuple(int(s) for s in found[lengths == values[best]]), int(values[best])


def _fixed(scenario: Scenario, model: ModelConfig, previous: dict | None,
           projects: dict[str, int], clusters: dict[str, int], starts: list[pd.Timestamp],
           left: np.ndarray, ngh_per_hour: np.ndarray) -> tuple[FixedReservation, ...]:
    """Rule 6: reservations started by ``as_of`` keep running; frozen periods keep starts.

    A reservation that has not started yet is kept by the frozen periods only while it
    still fits the budget its project has ``left`` (NGH, after usage and the running
    ones), in start order; otherwise its request is placed afresh (or left unplaced).
    ``ngh_per_hour[k]`` is one node-hour of cluster k in NGH.
    """
    if previous is None:
        return ()
    as_of = scenario.config.as_of
    frozen_until = starts[min(model.contract.frozen_periods, len(starts)) - 1] if starts else as_of
    running, frozen = [], []
    for r in previous.get("reservations", []):
        start, end = pd.Timestamp(r["start"]), pd.Timestamp(r["end"])
        if end <= as_of or r["project"] not in projects or r["cluster"] not in clusters:
            continue
        kept = FixedReservation(r["request_id"], projects[r["project"]],
                                clusters[r["cluster"]], int(r["nodes"]), start, end)
        if start < as_of:
            running.append(kept)
        elif model.contract.frozen_periods > 0 and start <= frozen_until:
            frozen.append(kept)
    left = left.astype(float).copy()
    cost = lambda f: (f.nodes * ngh_per_hour[f.cluster]  # noqa: E731
                      * (f.end - max(f.start, as_of)).total_seconds() / 3600)
    for f in running:
        left[f.project] -= cost(f)
    out = list(running)
    for f in sorted(frozen, key=lambda f: (f.start, f.request_id)):
        if cost(f) <= left[f.project] + 1e-6:
            left[f.project] -= cost(f)
            out.append(f)
    return tuple(sorted(out, key=lambda f: f.request_id))


def _previous_arrays(previous: dict | None, shape: tuple[int, int, int],
                     projects: dict[str, int], clusters: dict[str, int],
                     starts: list[pd.Timestamp], ends: list[pd.Timestamp] | None = None
                     ) -> PreviousPlan | None:
    """The previous plan's grants on this grid, period by period where the starts agree.

    ``ends`` (given on a mixed grid): a previous period counts only where it is the same
    period here, start and end; a replan on a mixed grid moves the fine tier with
    ``as_of``, and a previous daily grant is not an hourly one (its frozen lower bound
    and churn row would ask an hour for a day's GPU-hours).
    """
    if previous is None:
        return None
    index = {s: t for t, s in enumerate(starts)}
    grants: dict[bool, tuple[list[int], list[float]]] = {True: ([], []), False: ([], [])}
    covered = np.zeros(shape[2], dtype=bool)
    for period in previous.get("periods", []):
        t = index.get(pd.Timestamp(period["start"]))
        if t is not None and ends is not None and pd.Timestamp(period["end"]) != ends[t]:
            del index[starts[t]]  # another period here: its grants are not this one's
            continue
        if t is not None:
            covered[t] = True
    for a in previous.get("allocations", []):
        t = index.get(pd.Timestamp(a["period_start"]))
        p, k = projects.get(a["project"]), clusters.get(a["cluster"])
        if t is None or p is None or k is None:
            continue
        codes, values = grants[a["kind"] == "guaranteed"]
        codes.append((p * shape[1] + k) * shape[2] + t)
        values.append(float(a["gpu_hours"]))
    guaranteed, opportunistic = (CellValues.summed(shape, *grants[guaranteed])
                                 for guaranteed in (True, False))
    res = previous.get("reservations", [])
    return PreviousPlan(guaranteed, opportunistic, covered,
                        {r["request_id"]: pd.Timestamp(r["start"]) for r in res},
                        {r["request_id"]: pd.Timestamp(r["end"]) for r in res})


def build_problem(scenario: Scenario, model: ModelConfig, previous: dict | None = None) -> Problem:
    """Arrays for the model builders (``previous``: a parsed, checked plan.json)."""
    tree, arrays = scenario.tree, scenario.arrays
    projects, clusters = arrays.projects, arrays.clusters
    p_index, k_index = arrays.project_index, arrays.cluster_index
    nodes, gpn, rate = arrays.nodes, arrays.gpus_per_node, arrays.rate
    problems = grid_problems(scenario, model)
    if problems:
        raise InputError(problems)
    starts, ends = period_grid(scenario, model.solver.period_grid)
    hours = np.array([(e - s) / HOUR for s, e in zip(starts, ends, strict=True)], dtype=float)
    cap = arrays.gpus[:, None] * hours[None, :]
    allowed = arrays.allowed
    dem = _demand_array(scenario, p_index, k_index, _to_datetime64(starts), _to_datetime64(ends),
                        allowed)
    budget = arrays.budget
    lookback = lookback_of(scenario, model)
    used, past = _usage_arrays(scenario, p_index, k_index, rate,
                               _lookback_periods(lookback, scenario))
    fixed = _fixed(scenario, model, previous, p_index, k_index, starts, budget - used,
                   gpn * rate)
    # requests kept from the previous plan, or already run to their end under it, are not
    # placed again
    done = {r["request_id"] for r in (previous or {}).get("reservations", [])
            if pd.Timestamp(r["end"]) <= scenario.config.as_of}
    requests = _requests(scenario, model, p_index, k_index, nodes, gpn, rate, starts, ends,
                         {f.request_id for f in fixed} | done)
    prev = _previous_arrays(previous, dem.shape, p_index, k_index, starts,
                            ends if model.solver.period_grid else None)
    return Problem(scenario, model, tree, projects, clusters, arrays.gpu_type, nodes, gpn,
                   rate, tuple(starts), tuple(ends), hours, cap, dem, allowed, budget, used,
                   past, lookback, requests, fixed, prev)
