"""A seeded synthetic quarter of jobs on a scenario: ``planner trace synthetic``.

A second trace beside Philly, with what Philly lacks: wide gang jobs (whole 8-GPU
nodes and multi-node 16- and 32-GPU gangs), a diurnal and weekly submit rhythm, heavy-
tailed durations, requested time limits, and an offered load chosen in advance. Every
number comes from one ``numpy.random.default_rng(seed)``: the same scenario, parameters
and seed give the same trace, byte for byte (:func:`~planner.simulate.trace.write_trace`).

The draws, in this order (:class:`SyntheticParams` holds every parameter):

1. **Submits.** Hours of the quarter are weighted by a day curve and a week curve:
   weight(h) = (1 + ``diurnal`` · cos(2π (hour of day − ``peak_hour``) / 24)) ×
   (``weekend`` on Saturdays and Sundays, 1 otherwise); each job draws an hour in
   proportion to its weight and a uniform instant inside it. Jobs are numbered in
   submit order.
2. **Clusters.** In proportion to their GPUs, so every cluster sees about the same
   load.
3. **Size.** ``gpus`` from ``sizes`` with ``size_weights``; a size bigger than the
   cluster is redrawn as the largest size that fits.
4. **Project.** Among the projects that may use the cluster (budgets' ``clusters``),
   in proportion to budget × a log-normal activity (σ = ``activity_sigma``, one draw
   per project): some projects use far more than their budget, some far less.
5. **Durations.** Log-normal (σ = ``duration_sigma``; heavy-tailed: a few jobs
   hold most of the GPU-hours), then scaled by one factor so that the offered GPU-hours
   Σ gpus × duration equal ``load`` × the scenario's capacity × quarter hours, each
   capped at ``max_duration_hours`` (the factor is found by bisection with the cap
   applied; too few jobs to carry the load even at the cap is a ``ValueError``).
6. **Allocated work.** Jobs of a whole node or more are allocated (a gang loses every
   node's progress when preempted: teams budget for it); smaller ones with chance
   ``allocated_share``. Allocated jobs are protected for min(duration,
   ``min_runtime_hours``); the rest are unallocated (0).
7. **Resumable.** Jobs within one node resume with chance ``resumable_small``,
   multi-node gangs with chance ``resumable_gang``.
8. **Time limits.** Users ask for more than they need: duration × a factor uniform in
   [1, ``limit_overestimate``], rounded up to the next of ``limit_steps`` hours (beyond
   the last, to a whole multiple of it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.inputs import Scenario
from planner.simulate.trace import TRACE_COLUMNS, TRACE_SCHEMA


@dataclass(frozen=True)
class SyntheticParams:
    """The knobs of :func:`synthetic_trace` (see the module docstring for each draw)."""

    jobs: int = 40_000
    load: float = 1.45  # offered GPU-hours ÷ capacity GPU-hours over the quarter
    sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    size_weights: tuple[float, ...] = (0.52, 0.09, 0.11, 0.17, 0.05, 0.06)
    diurnal: float = 0.6  # day-curve amplitude: peak 1.6 × the mean, trough 0.4 ×
    peak_hour: float = 14.0  # UTC hour of the busiest submits
    weekend: float = 0.4  # weekend submit rate ÷ weekday rate
    activity_sigma: float = 1.0  # spread of the projects' activity around their budgets
    duration_sigma: float = 1.9  # log-normal σ of the durations
    max_duration_hours: float = 240.0  # no job runs longer than 10 days
    allocated_share: float = 0.75  # of the jobs smaller than a node
    min_runtime_hours: float = 4.0  # protection asked by allocated jobs
    resumable_small: float = 0.85
    resumable_gang: float = 0.5
    limit_overestimate: float = 2.0
    limit_steps: tuple[float, ...] = (1, 2, 4, 8, 12, 24, 48, 72, 120, 168)

    def __post_init__(self) -> None:
        if self.jobs < 1 or not self.load > 0:
            raise ValueError("jobs must be ≥ 1 and load > 0")
        if len(self.sizes) != len(self.size_weights):
            raise ValueError("sizes and size_weights differ in length")


def _submit_hours(rng: np.random.Generator, start: pd.Timestamp, hours: int,
                  params: SyntheticParams, n: int) -> np.ndarray:
    stamps = start + pd.to_timedelta(np.arange(hours), unit="h")
    hour_of_day = stamps.hour.to_numpy() + stamps.minute.to_numpy() / 60.0
    day = 1.0 + params.diurnal * np.cos(2 * np.pi * (hour_of_day - params.peak_hour) / 24.0)
    week = np.where(stamps.day_of_week.to_numpy() >= 5, params.weekend, 1.0)
    weight = day * week
    hour = rng.choice(hours, size=n, p=weight / weight.sum())
    return np.sort(hour + rng.random(n))


def _scale(raw: np.ndarray, gpus: np.ndarray, target: float, cap: float) -> np.ndarray:
    """Durations ``min(f · raw, cap)`` with Σ gpus × duration = target (bisection on f).

    Raises ValueError when even every job at the cap falls short of the target.
    """
    most = float((gpus * cap).sum())
    if target >= 0.999 * most:
        raise ValueError(f"too few jobs for the load: {len(raw):,} jobs at most "
                         f"{cap:g} h each offer {most:,.0f} GPU-hours, the load asks "
                         f"{target:,.0f}; ask for more jobs or a lower load")
    low, high = 0.0, 1.0
    while (gpus * np.minimum(high * raw, cap)).sum() < target:
        high *= 2.0
    for _ in range(100):
        mid = (low + high) / 2.0
        if (gpus * np.minimum(mid * raw, cap)).sum() < target:
            low = mid
        else:
            high = mid
    return np.minimum(high * raw, cap)


def _limits(duration: np.ndarray, factor: np.ndarray, steps: tuple[float, ...]) -> np.ndarray:
    wanted = duration * factor
    ladder = np.asarray(steps, dtype=float)
    i = np.searchsorted(ladder, wanted, side="left")
    beyond = np.ceil(wanted / ladder[-1]) * ladder[-1]
    return np.maximum(np.where(i < len(ladder), ladder[np.minimum(i, len(ladder) - 1)],
                               beyond), duration)


def synthetic_trace(scenario: Scenario, seed: int = 0,
                    params: SyntheticParams = SyntheticParams()) -> pd.DataFrame:
    """The synthetic trace on ``scenario`` (``read_trace``'s columns and order)."""
    rng = np.random.default_rng(seed)
    cfg = scenario.config
    n = params.jobs
    hours_f = (cfg.quarter_end - cfg.quarter_start) / pd.Timedelta(hours=1)
    hours = int(np.floor(hours_f))
    # 1. submits
    submit = np.minimum(_submit_hours(rng, cfg.quarter_start, hours, params, n), hours_f - 1e-3)
    # 2. clusters
    arrays = scenario.arrays
    names = np.array(arrays.clusters, dtype=object).astype(str)
    gpn = arrays.gpus_per_node
    capacity = arrays.gpus
    k = rng.choice(len(names), size=n, p=capacity / capacity.sum())
    # 3. sizes (the largest that fits where the drawn one does not)
    sizes = np.asarray(params.sizes, dtype=np.int64)
    weights = np.asarray(params.size_weights, dtype=float)
    gpus = sizes[rng.choice(len(sizes), size=n, p=weights / weights.sum())]
    fits_max = np.array([sizes[sizes <= c].max(initial=1) for c in capacity])
    gpus = np.minimum(gpus, fits_max[k])
    # 4. projects
    projects = np.array(arrays.projects, dtype=object)
    activity = arrays.budget * rng.lognormal(
        0.0, params.activity_sigma, size=len(projects))
    activity = np.where(activity > 0, activity, activity[activity > 0].min(initial=1.0) * 0.01)
    project = np.empty(n, dtype=object)
    draw = rng.random(n)
    for c, name in enumerate(names):
        may = arrays.allowed[:, c]
        if not may.any():
            raise ValueError(f"no project may use cluster {name!r}")
        w = np.cumsum(np.where(may, activity, 0.0))
        on = k == c
        project[on] = projects[np.searchsorted(w / w[-1], draw[on], side="right")
                               .clip(max=len(projects) - 1)]
    # 5. durations
    raw = rng.lognormal(0.0, params.duration_sigma, size=n)
    target = params.load * float(capacity.sum()) * hours_f
    duration = _scale(raw, gpus.astype(float), target, params.max_duration_hours)
    # 6. allocated; 7. resumable; 8. time limits
    node = gpn[k]
    allocated = (gpus >= node) | (rng.random(n) < params.allocated_share)
    gang = gpus > node
    resumable = rng.random(n) < np.where(gang, params.resumable_gang, params.resumable_small)
    factor = 1.0 + rng.random(n) * (params.limit_overestimate - 1.0)
    limit = _limits(duration, factor, params.limit_steps)
    frame = pd.DataFrame({
        "job_id": [f"syn-{i:06d}" for i in range(n)],
        "project": project.astype(str),
        "cluster": names[k],
        "submit": cfg.quarter_start + pd.to_timedelta(np.round(submit * 3600.0), unit="s"),
        "gpus": gpus,
        "duration_hours": duration,
        "min_runtime_hours": np.where(allocated, np.minimum(duration, params.min_runtime_hours),
                                      0.0),
        "resumable": resumable,
        "time_limit_hours": limit,
    }, columns=list(TRACE_COLUMNS))
    frame = frame.astype({c.name: c.dtype for c in TRACE_SCHEMA})
    return frame.sort_values(["submit", "job_id"], kind="mergesort").reset_index(drop=True)
