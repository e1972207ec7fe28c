"""Demand from the queue: the one code that turns queue state into ``demand.csv`` rows.

Researchers' future demand cannot be predicted; what they have queued can be read, every
period. ``planner ingest squeue`` (:mod:`planner.ingest.squeue`), ``planner ingest kueue
--demand`` (:mod:`planner.ingest.workloads`), ``planner cycle --squeue/--kueue`` and the
replays' replanner (:mod:`planner.simulate.replanner`) all build a replan's
demand with the functions below, from plain records; none of them has its own copy.

The rows, as of a replan at ``as_of`` with periods of P hours:

1. **The queue** (:func:`queue_cells`): every *allocated* job (work its project runs on
   its budget: a Slurm job under its budget QOS, or one ``planner tick`` moved to
   ``gp-opportunistic`` while its budget was spent; a Kueue Workload of a budget priority
   class), pending or running, on a cluster its project may use, asks its GPUs from
   ``as_of`` for the time it has left — its time limit less the time it has run (the
   replay: the work it has left) — rounded up to whole periods (at least one): the
   executor enforces GPUs, so a period's grant is asked in GPUs, not averaged. Gangs ask
   their whole GPUs as one job. Jobs with the same project, cluster and length add up
   into one row. Unallocated work (the opportunistic QOS or class) asks nothing.
2. **The arrival forecast** (:func:`forecast_from_usage`, or in the replay with
   ``sees="trace"`` :func:`arrival_forecast`): for each project and cluster, the GPUs
   recent work arrived at, as one row from ``as_of`` to the quarter's end; off with
   ``forecast=False``.
3. **Declared demand** (:func:`merge_declared`): rows a project lead writes
   (``declared_demand.csv``, columns as ``demand.csv``) are kept, per project, cluster
   and period, only where rows 1–2 ask nothing: the queue speaks for the periods it
   covers, the lead for the rest.

:func:`demand_frame` assembles rows 1–2 in one fixed order (the replay has always planned
from this order); :func:`demand_csv` writes a frame as ``demand.csv`` text, in the order
the scenario loader sorts rows into, every number exact (Python's shortest ``repr``).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.inputs import Scenario
from planner.inputs.schema import TABLES
from planner.times import iso

_HOUR = pd.Timedelta(hours=1)
DEMAND_COLUMNS = TABLES["demand"].columns  # project, cluster, start, end, gpus


@dataclass(frozen=True)
class QueuedJob:
    """One job in an executor's queue, pending or running, in the scenario's ids.

    ``hours_left``: what it may still run, in hours (time limit − time used; ``None``: no
    limit, it may run to the quarter's end). ``allocated``: work on its project's budget.
    """

    job_id: str
    project: str
    cluster: str
    gpus: float
    hours_left: float | None
    allocated: bool
    running: bool


@dataclass(frozen=True)
class DemandGrid:
    """What the demand rows are laid on: the scenario's projects, clusters and quarter.

    ``allowed[p, k]``: project ``p`` may run on cluster ``k`` (``budgets.csv``'s
    ``clusters``). ``window_hours``: the lookback window the forecast averages over.
    """

    projects: tuple[str, ...]
    clusters: tuple[str, ...]
    allowed: np.ndarray  # (P, K) bool
    quarter_start: pd.Timestamp
    quarter_end: pd.Timestamp
    period_hours: float
    window_hours: float

    @classmethod
    def of(cls, scenario: Scenario, window_days: float | None = None) -> DemandGrid:
        """The grid of a scenario; ``window_days`` overrides its ``lookback_days``."""
        cfg = scenario.config
        arrays = scenario.arrays
        days = window_days or cfg.lookback_days
        return cls(tuple(arrays.projects), tuple(arrays.clusters), np.array(arrays.allowed),
                   cfg.quarter_start, cfg.quarter_end, float(cfg.period_hours),
                   float(int(round(days * 24))))

    def index(self) -> tuple[dict[str, int], dict[str, int]]:
        """Project -> row and cluster -> column of :attr:`allowed`."""
        return ({p: i for i, p in enumerate(self.projects)},
                {c: k for k, c in enumerate(self.clusters)})


#: (project index, cluster index, hours from as_of; -1.0 for the forecast row) -> GPUs
Cells = dict[tuple[int, int, float], float]


def periods_hours(hours_left: float, period_hours: float) -> float:
    """The hours a job with ``hours_left`` asks for: whole periods, at least one."""
    return float(np.ceil(max(hours_left, 1e-6) / period_hours) * period_hours)


def queue_cells(jobs: Iterable[QueuedJob], grid: DemandGrid, as_of: pd.Timestamp
                ) -> tuple[Cells, list[QueuedJob]]:
    """Rule 1 of the module docstring: the queue's cells, and the allocated jobs left out.

    Left out (returned): jobs of a project or cluster the grid does not have, or on a
    cluster their project may not use. Unallocated jobs are not cells and not left out:
    they ask nothing by the rule. A job without a time limit asks to the quarter's end
    exactly.
    """
    p_index, k_index = grid.index()
    left_out: list[QueuedJob] = []
    cells: Cells = {}
    to_end = (grid.quarter_end - as_of) / _HOUR
    for job in jobs:
        if not job.allocated:
            continue
        p, k = p_index.get(job.project), k_index.get(job.cluster)
        if p is None or k is None or not grid.allowed[p, k]:
            left_out.append(job)
            continue
        hours = to_end if job.hours_left is None else periods_hours(job.hours_left,
                                                                    grid.period_hours)
        key = (p, k, hours)
        cells[key] = cells.get(key, 0) + job.gpus
    return cells, left_out


def arrival_forecast(project: np.ndarray, cluster: np.ndarray, submit: np.ndarray,
                     gpu_hours: np.ndarray, now: float, grid: DemandGrid) -> np.ndarray:
    """(P, K) GPUs: GPU-hours of the arrivals in the lookback window ÷ its hours.

    Arrivals are given as arrays (project and cluster indices, submit time in hours from
    quarter start, GPU-hours); the window is the last ``window_hours`` before ``now``
    (hours from quarter start), shorter early in the quarter. What the replay forecasts
    from when it sees the trace (each job's whole work, known at submit).
    """
    out = np.zeros((len(grid.projects), len(grid.clusters)))
    window = min(now, grid.window_hours)
    if window <= 0:
        return out
    recent = (submit >= now - window) & (submit < now)
    np.add.at(out, (project[recent], cluster[recent]), gpu_hours[recent])
    return out / window * grid.allowed


def forecast_from_usage(usage: pd.DataFrame, as_of: pd.Timestamp, grid: DemandGrid
                        ) -> np.ndarray:
    """(P, K) GPUs: the GPU-hours ``usage`` ran in the lookback window ÷ its hours.

    ``usage``: the ledger (``usage.csv``: project, cluster, gpus, start, end), whose rows
    are budget work only (``planner ingest`` leaves opportunistic jobs out). The window
    is the last ``window_hours`` before ``as_of``, shorter early in the quarter. What a
    site can know of the work arriving: what ran, not what is still to run.
    """
    out = np.zeros((len(grid.projects), len(grid.clusters)))
    window = min((as_of - grid.quarter_start) / _HOUR, grid.window_hours)
    if window <= 0 or usage.empty:
        return out
    since = as_of - window * _HOUR
    p_index, k_index = grid.index()
    for project, cluster, gpus, start, end in zip(
            usage["project"], usage["cluster"], usage["gpus"], usage["start"], usage["end"],
            strict=True):
        p, k = p_index.get(project), k_index.get(cluster)
        if p is None or k is None:
            continue
        hours = (min(end, as_of) - max(start, since)) / _HOUR
        if hours > 0:
            out[p, k] += float(gpus) * hours
    return out / window * grid.allowed


def demand_frame(cells: Cells, forecast: np.ndarray | None, grid: DemandGrid,
                 as_of: pd.Timestamp) -> pd.DataFrame:
    """Rows 1–2: the queue's cells and the forecast's, as a ``demand`` table.

    In (project, cluster) order of the grid, the forecast row (to quarter end) first, then
    the queue's by length. ``forecast``: (P, K) GPUs, or ``None`` for none.
    """
    rows = dict(cells)
    if forecast is not None:
        for p, k in zip(*np.nonzero(forecast > 1e-9), strict=True):
            rows[(int(p), int(k), -1.0)] = float(forecast[p, k])
    keys = sorted(rows)
    return pd.DataFrame({
        "project": [grid.projects[p] for p, _, _ in keys],
        "cluster": [grid.clusters[k] for _, k, _ in keys],
        "start": pd.Series([as_of] * len(keys), dtype="datetime64[ns, UTC]"),
        "end": pd.Series([as_of + h * _HOUR if h > 0 else grid.quarter_end for _, _, h in keys],
                         dtype="datetime64[ns, UTC]"),
        "gpus": np.array([rows[k] for k in keys], dtype=float),
    }).astype({"project": object, "cluster": object})


def merge_declared(frame: pd.DataFrame, declared: pd.DataFrame, grid: DemandGrid,
                   as_of: pd.Timestamp) -> pd.DataFrame:
    """Rule 3: ``frame`` plus the declared rows where ``frame`` asks nothing.

    Per project, cluster and period of the grid from ``as_of`` (``period_hours`` each, the
    last one ending at the quarter's end): where no row of ``frame`` reaches into the
    period for that project and cluster, the declared rows covering it stand, clipped to
    the run of such periods (and to ``as_of``); where one does, they are dropped for that
    period. The declared rows come after ``frame``'s, in their own order.
    """
    if declared.empty:
        return frame
    edges = _period_edges(as_of, grid)
    asked: dict[tuple[str, str], np.ndarray] = {}
    for project, cluster, start, end, gpus in _rows(frame):
        if gpus > 0:
            mask = asked.setdefault((project, cluster), np.zeros(len(edges) - 1, dtype=bool))
            mask |= (_as_ns(start) < edges[1:]) & (_as_ns(end) > edges[:-1])
    kept = []
    for project, cluster, start, end, gpus in _rows(declared):
        mask = asked.get((project, cluster))
        free = np.ones(len(edges) - 1, dtype=bool) if mask is None else ~mask
        lo, hi = max(_as_ns(start), edges[0]), _as_ns(end)
        for a, b in _runs(free):
            begin, stop = max(lo, edges[a]), min(hi, edges[b])
            if stop > begin:
                kept.append((project, cluster, begin, stop, gpus))
    if not kept:
        return frame
    extra = pd.DataFrame({
        "project": [r[0] for r in kept], "cluster": [r[1] for r in kept],
        "start": pd.Series(pd.to_datetime([r[2] for r in kept], utc=True),
                           dtype="datetime64[ns, UTC]"),
        "end": pd.Series(pd.to_datetime([r[3] for r in kept], utc=True),
                         dtype="datetime64[ns, UTC]"),
        "gpus": np.array([r[4] for r in kept], dtype=float),
    }).astype({"project": object, "cluster": object})
    return pd.concat([frame.astype(extra.dtypes.to_dict()), extra], ignore_index=True)


def _rows(frame: pd.DataFrame) -> Iterable[tuple[str, str, pd.Timestamp, pd.Timestamp, float]]:
    return zip(frame["project"], frame["cluster"], frame["start"], frame["end"],
               frame["gpus"].astype(float), strict=True)


def _as_ns(stamp: pd.Timestamp) -> int:
    return int(pd.Timestamp(stamp).value)


def _period_edges(as_of: pd.Timestamp, grid: DemandGrid) -> np.ndarray:
    """Nanosecond edges of the periods from ``as_of`` to the quarter's end (the last short)."""
    step = grid.period_hours * _HOUR
    count = max(1, math.ceil((grid.quarter_end - as_of) / step - 1e-9))
    edges = [as_of + i * step for i in range(count)] + [grid.quarter_end]
    return np.array([_as_ns(e) for e in edges], dtype=np.int64)


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[a, b) index runs where ``mask`` is True."""
    out, start = [], None
    for i, on in enumerate(mask.tolist()):
        if on and start is None:
            start = i
        elif not on and start is not None:
            out.append((start, i))
            start = None
    if start is not None:
        out.append((start, len(mask)))
    return out


def queue_demand(jobs: Iterable[QueuedJob], grid: DemandGrid, as_of: pd.Timestamp, *,
                 usage: pd.DataFrame | None = None, declared: pd.DataFrame | None = None
                 ) -> tuple[pd.DataFrame, list[QueuedJob]]:
    """A site's demand as of ``as_of``: the queue, the forecast from ``usage``, the declared.

    ``usage``: the ledger to forecast from (``None``: no forecast); ``declared``: a
    lead's rows (``None`` or empty: none). Returns the table and the allocated jobs left
    out (:func:`queue_cells`).
    """
    cells, left_out = queue_cells(jobs, grid, as_of)
    forecast = forecast_from_usage(usage, as_of, grid) if usage is not None else None
    frame = demand_frame(cells, forecast, grid, as_of)
    if declared is not None:
        frame = merge_declared(frame, declared, grid, as_of)
    return frame, left_out


def format_number(value: float) -> str:
    """A number as written in ``demand.csv``: ``8`` when whole, else its exact ``repr``."""
    value = float(value)
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


def demand_csv(frame: pd.DataFrame) -> bytes:
    """``demand.csv`` text: the header, then the rows sorted as the loader sorts them."""
    rows = sorted((str(p), str(c), iso(pd.Timestamp(s)), iso(pd.Timestamp(e)), float(g))
                  for p, c, s, e, g in _rows(frame))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(DEMAND_COLUMNS)
    writer.writerows((p, c, s, e, format_number(g)) for p, c, s, e, g in rows)
    return out.getvalue().encode("utf-8")


def summarize(frame: pd.DataFrame, as_of: pd.Timestamp, grid: DemandGrid
              ) -> Mapping[str, float]:
    """Project -> GPUs it asks for in the first period (for the report lines)."""
    first_end = as_of + grid.period_hours * _HOUR
    out: dict[str, float] = {}
    for project, _cluster, start, end, gpus in _rows(frame):
        if start < first_end and end > as_of:
            out[project] = out.get(project, 0.0) + gpus
    return dict(sorted(out.items()))


def declared_only(declared: pd.DataFrame, as_of: pd.Timestamp) -> pd.DataFrame:
    """The declared rows from ``as_of`` on (clipped to it): what a hand-written file says."""
    if declared.empty:
        return declared
    kept = declared[declared["end"] > as_of].copy()
    kept["start"] = kept["start"].where(kept["start"] > as_of, as_of)
    return kept.reset_index(drop=True)
