"""The replanner of the three ``planner`` policies: replay state → scenario → plan.

:class:`Replanner` is the engine's policy object for ``planner``, ``planner-slurm`` and
``planner-kueue``. It holds an executor (:class:`~planner.simulate.executor.Executor`:
the ideal one of :mod:`planner.simulate.planner_policy`, Slurm's of
:mod:`planner.simulate.slurm_replay`, Kueue's of :mod:`planner.simulate.kueue_replay`),
composed, not inherited: the replanner builds and solves the replans and hands each plan
to the executor's hooks; the executor alone starts and preempts jobs.

At every period boundary (``period_hours`` of the scenario from quarter start) the
replanner plans with :func:`planner.run.plan_scenario` on the replay's scenario with

- ``as_of`` = the boundary;
- ``usage`` = what ran in the quarter so far, two rows per project and cluster:
  the lookback window (the last ``lookback_days``) and everything before it,
  each as its average GPUs (exact totals, so the budget used and the first
  period's lookback offset are exact; the later periods see the window evenly);
- ``demand`` = built by :mod:`planner.demand`, the code ``planner ingest squeue|kueue
  --demand`` runs (:class:`DemandSource` says what the replan reads): the outstanding
  work of *allocated* jobs (waiting or running) per project and cluster, profiled as if
  each started now: a job of g GPUs with r hours left asks g GPUs from ``as_of`` for r
  rounded up to whole periods (the executor enforces GPUs, so a period's grant is asked
  in GPUs, not averaged), r its work left (``sees="trace"``, the default) or its time
  limit left (``sees="queue"``, what a site reads); plus the arrival forecast, one row
  per project and cluster to quarter end: the GPU-hours of the allocated jobs submitted
  in the lookback window (``"trace"``) or run in it (``"queue"``, the usage ledger) ÷ its
  hours. No future submissions are known (the replay does not peek at the trace);
- **reservation requests for the gang jobs that waited**, when asked for
  (:meth:`Replanner.gang_requests`; off by default, ``gang_wait_hours`` = ∞: measured
  on Philly and two synthetic quarters, the requests and the drains they bring cost more
  delivery and occupancy than they win): every waiting allocated job of
  at least one node's GPUs that has waited ``gang_wait_hours`` (``None``: one period: it
  went through a whole plan without getting in, so the elastic grant alone does not
  seat it) is a request of
  ⌈g / G⌉ nodes for its time limit left (rounded up to whole hours, at most the
  contract's ``max_reservation_hours`` and the quarter left), earliest start
  ``as_of``, deadline ``as_of`` + its length in whole periods + ``gang_slack_periods``
  (default 7: a week to find room), at most quarter end; the job is then left
  out of the elastic demand (it is asked once). Other gang jobs stay elastic demand;
- budgets as in the scenario;
- the previous plan as ``previous`` (churn penalty), without its reservations (a
  gang job is asked afresh while it waits, and once it runs it is elastic demand
  like any running job), with ``frozen_periods`` = 0 so the first period follows
  today's demand rather than yesterday's forecast;
- the independent hard-rule check (``plan_scenario(check=...)``) on the first
  plan and every ``check_every``-th after it (it costs more than the solve).

With ``reservation_requests`` the scenario's own reservation requests
(``reservations.csv``) are kept beside the waiting gang jobs' in every replan (off by
default).

What the replanner calls on its executor: ``begin`` once, before the replay; then, in
order, every whole hour: ``before_replan``;
then, at a period boundary, the replan (``booked`` for its usage, ``read_back`` for its
demand when it is read through text) and ``apply_first_period``, ``reclass``,
``hold_reservations``; then ``after_replan``, whose answer says whether every cluster is
scheduled again. Between those the engine's ``job_key`` and ``schedule`` go to the
executor unchanged.
"""

from __future__ import annotations

import math
import time
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from planner.config import ModelConfig, load_model
from planner.demand import (
    DemandGrid,
    QueuedJob,
    arrival_forecast,
    declared_only,
    demand_frame,
    forecast_from_usage,
    merge_declared,
    queue_cells,
)
from planner.simulate.executor import EngineView, Executor
from planner.times import iso

_HOUR = pd.Timedelta(hours=1)
SEES = ("trace", "queue")


@dataclass(frozen=True)
class DemandSource:
    """Where a replan's demand comes from (:mod:`planner.demand` builds it either way).

    ``sees``: ``"trace"`` (the figures of record): a job asks for the work it really has
    left and the forecast counts the whole work of the jobs submitted in the lookback
    window, both known to the replay only; ``"queue"``: what a site reads, a job's time
    limit less the time it has run (``squeue``, Workloads) and the forecast from the usage
    ledger (what ran in the window). ``forecast``: the arrival forecast rows (False:
    none). ``queue``: the queue's rows (False: ``declared`` alone, what a hand-written
    ``demand.csv`` amounts to). ``declared``: a lead's rows (``declared_demand.csv``),
    merged where the queue asks nothing. ``via_text``: the replay renders its queue as the
    executor prints it (``squeue`` text, Workloads JSON) and reads it back with the
    ingest's parser each replan (``planner-slurm``, ``planner-kueue``; the shipped path).
    """

    sees: str = "trace"
    forecast: bool = True
    queue: bool = True
    declared: pd.DataFrame | None = None
    via_text: bool = False

    def __post_init__(self) -> None:
        """Refuse an unknown ``sees``."""
        if self.sees not in SEES:
            raise ValueError(f"sees must be one of {SEES}, not {self.sees!r}")


class Replanner:
    """The rolling replan (the module docstring), enforced by the executor it holds.

    The engine's policy: ``name``, ``work_conserving`` and ``protects_min_runtime`` are
    the executor's, and so are the engine's ``job_key`` and ``schedule``.
    """

    def __init__(self, executor: Executor, model: ModelConfig | None = None,
                 check_every: int = 30, gang_wait_hours: float | None = math.inf,
                 gang_slack_periods: int = 7, demand: DemandSource | None = None,
                 reservation_requests: bool = False) -> None:
        model = model or load_model("default")
        self.executor = executor
        self.source = demand or DemandSource()
        self.gang_wait_hours = gang_wait_hours  # None: one period
        self.gang_slack_periods = gang_slack_periods
        self.check_every = check_every
        self.reservation_requests = reservation_requests
        self.model = replace(model, contract=replace(model.contract, frozen_periods=0))

    @property
    def name(self) -> str:
        """The policy's name: its executor's (``planner``, ``planner-slurm``, ...)."""
        return self.executor.name

    @property
    def work_conserving(self) -> bool:
        """Whether no GPU idles while a waiting job fits: the executor's."""
        return self.executor.work_conserving

    @property
    def protects_min_runtime(self) -> bool:
        """Whether the engine protects min runtimes: the executor's."""
        return self.executor.protects_min_runtime

    def job_key(self, sim: EngineView, job: int) -> tuple:
        """The executor's order of a job in its queue."""
        return self.executor.job_key(sim, job)

    def schedule(self, sim: EngineView, c: int) -> None:
        """The executor's starts and preemptions on cluster ``c``."""
        self.executor.schedule(sim, c)

    def prepare(self, sim: EngineView) -> None:
        """The scenario without its own demand, reservations and usage; no plan yet."""
        scenario = sim.scenario
        self.own_demand = scenario.demand  # a hand-written demand.csv (DemandSource.queue)
        self.base = replace(scenario, demand=scenario.demand.iloc[0:0],
                            reservations=scenario.reservations.iloc[0:0],
                            usage=scenario.usage.iloc[0:0])
        if self.reservation_requests:
            self.base = replace(self.base, reservations=scenario.reservations)
        self.period = float(scenario.config.period_hours)
        days = self.model.lookback.window_days or scenario.config.lookback_days
        self.window_hours = int(round(days * 24))
        self.grid = DemandGrid.of(scenario, self.model.lookback.window_days)
        self.allowed = scenario.arrays.allowed
        jobs = sim.jobs
        submit = np.array(jobs.submit)
        allocated = np.array(jobs.allocated, dtype=bool)
        project = np.array(jobs.project, dtype=np.int64)
        cluster = np.array(jobs.cluster, dtype=np.int64)
        work = np.array(jobs.gpus, dtype=float) * np.array(jobs.duration)
        # the arrivals the trace forecast counts: allocated jobs, each with its whole work
        self.arrivals = (project[allocated], cluster[allocated], submit[allocated],
                         work[allocated])
        self.previous: dict | None = None
        self.next_plan = 0.0
        self.request_job: dict[str, int] = {}  # request_id → job, at the last replan
        self.executor.begin(sim, self.model)

    def refresh(self, sim: EngineView, now: float) -> bool:
        """Every hour: the executor's hour, at period boundaries a replan put in force."""
        self.executor.before_replan(sim, now)
        replanned = self.replan(sim, now)
        return self.executor.after_replan(sim, now, replanned)

    def replan(self, sim: EngineView, now: float) -> bool:
        """At a period boundary: plan, and hand the plan to the executor; True if it did."""
        if now < self.next_plan - 1e-9:
            return False
        boundary = self.next_plan
        self.next_plan += self.period
        cfg = sim.scenario.config
        # the period boundary itself, not ``now``: the engine's clock may stand a hair
        # before the whole hour (an event within its tolerance of it), which made as_of
        # 11:59:59.999… and a plan grid a second off the demand's (rule 2 then broke)
        as_of = cfg.quarter_start + pd.Timedelta(hours=boundary)
        if as_of >= cfg.quarter_end:
            return False
        from planner.run import plan_scenario

        requests = self.gang_requests(sim, as_of)
        asked = set(self.request_job.values())
        usage = self._usage(sim, now)
        scenario = replace(self.base, config=replace(cfg, as_of=as_of), usage=usage,
                           demand=self._demand(sim, as_of, asked, usage),
                           reservations=requests)
        began = time.perf_counter()
        check = sim.replans % self.check_every == 0
        body = plan_scenario(scenario, self.model, self.previous, check=check).plan.body
        sim.plan_seconds += time.perf_counter() - began
        sim.replans += 1
        self.previous = {**body, "reservations": []}
        executor = self.executor
        executor.apply_first_period(sim, body, iso(as_of))
        executor.reclass(sim)
        executor.hold_reservations(sim, body, self.request_job)
        return True

    # -- wide jobs: reservation requests ---------------------------------------------------

    def gang_requests(self, sim: EngineView, as_of: pd.Timestamp) -> pd.DataFrame:
        """The reservations table of a replan: gang jobs that waited (module docstring).

        Sets ``request_job`` (request_id → job). Request ids are the jobs' ids. With
        ``reservation_requests``, the scenario's own requests too, in request id order.
        """
        requests = self._gang_requests(sim, as_of)
        own = self.base.reservations
        if not self.reservation_requests or own.empty:
            return requests
        frame = pd.concat([own.astype(requests.dtypes.to_dict()), requests], ignore_index=True)
        return frame.sort_values("request_id", kind="stable", ignore_index=True)

    def _gang_requests(self, sim: EngineView, as_of: pd.Timestamp) -> pd.DataFrame:
        """The waiting gang jobs' requests alone."""
        jobs, cfg = sim.jobs, sim.scenario.config
        wait = self.period if self.gang_wait_hours is None else self.gang_wait_hours
        longest = float(self.model.contract.max_reservation_hours)
        left = sim.hours - sim.now
        self.request_job = {}
        rows = []
        for c in range(len(sim.cluster_ids)):
            gpn, n_nodes = sim.gpn[c], sim.nodes[c]
            for queue in sim.queues[c].values():
                for heap in queue.buckets.values():
                    for _, job in heap:
                        g, p = jobs.gpus[job], jobs.project[job]
                        if (g < gpn or not jobs.allocated[job] or not self.allowed[p, c]
                                or sim.now - jobs.submit[job] < wait - 1e-9
                                or -(-g // gpn) > n_nodes):
                            continue
                        hours = min(math.ceil(sim.requested_hours(job) - 1e-9), longest,
                                    math.floor(left + 1e-9))
                        if hours < 1:
                            continue
                        periods = math.ceil(hours / self.period - 1e-9)
                        deadline = min(as_of + (periods + self.gang_slack_periods)
                                       * self.period * _HOUR, cfg.quarter_end)
                        self.request_job[jobs.ids[job]] = job
                        rows.append((jobs.ids[job], sim.projects[p], sim.cluster_ids[c],
                                     -(-g // gpn), float(hours), deadline))
        rows.sort()
        return pd.DataFrame({
            "request_id": [r[0] for r in rows], "project": [r[1] for r in rows],
            "cluster": [r[2] for r in rows],
            "nodes": np.array([r[3] for r in rows], dtype=np.int64),
            "hours": np.array([r[4] for r in rows], dtype=float),
            "earliest_start": pd.Series([as_of] * len(rows), dtype="datetime64[ns, UTC]"),
            "deadline": pd.Series([r[5] for r in rows], dtype="datetime64[ns, UTC]"),
        }).astype({"request_id": object, "project": object, "cluster": object})

    # -- the scenario of a replan ----------------------------------------------------------

    def _usage(self, sim: EngineView, now: float) -> pd.DataFrame:
        hours = int(round(now))
        window = min(hours, self.window_hours)
        cuts = [(0, hours - window), (hours - window, hours)]  # before the window, the window
        rows = []
        for i, (a, b) in enumerate(cuts):
            if b <= a:
                continue
            used = self.executor.booked(sim)[:, :, a:b].sum(axis=2)
            for p, k in zip(*np.nonzero(used > 1e-9), strict=True):
                rows.append((f"sim-{i}-{p}-{k}", sim.projects[p], sim.cluster_ids[k],
                             used[p, k] / (b - a), a, b))
        start = sim.scenario.config.quarter_start
        return pd.DataFrame({
            "job_id": [r[0] for r in rows], "project": [r[1] for r in rows],
            "cluster": [r[2] for r in rows],
            "gpus": np.array([r[3] for r in rows], dtype=float),
            "start": pd.Series([start + r[4] * _HOUR for r in rows],
                               dtype="datetime64[ns, UTC]"),
            "end": pd.Series([start + r[5] * _HOUR for r in rows], dtype="datetime64[ns, UTC]"),
        }).astype({"job_id": object, "project": object, "cluster": object})

    def _demand(self, sim: EngineView, as_of: pd.Timestamp, asked: AbstractSet[int] = frozenset(),
                usage: pd.DataFrame | None = None) -> pd.DataFrame:
        """The replan's demand rows, built by :mod:`planner.demand` (:class:`DemandSource`)."""
        source = self.source
        if not source.queue:  # declared rows only (default: the scenario's demand.csv)
            declared = source.declared if source.declared is not None else self.own_demand
            return declared_only(declared, as_of)
        jobs = (self.executor.read_back(sim, asked, as_of, self.hours_left) if source.via_text
                else self.queued_jobs(sim, asked))
        cells, _ = queue_cells(jobs, self.grid, as_of)
        forecast = None
        if source.forecast and source.sees == "trace":
            forecast = self._forecast(sim)
        elif source.forecast:
            forecast = forecast_from_usage(usage if usage is not None else self._usage(
                sim, sim.now), as_of, self.grid)
        frame = demand_frame(cells, forecast, self.grid, as_of)
        if source.declared is not None:
            frame = merge_declared(frame, source.declared, self.grid, as_of)
        return frame

    def queued_jobs(self, sim: EngineView, asked: AbstractSet[int] = frozenset()
                    ) -> list[QueuedJob]:
        """The allocated jobs waiting or running, as a site's queue shows them.

        Jobs asked as reservation requests this replan (``asked``) are left out (asked
        once). Their time left: :meth:`hours_left`.
        """
        jobs = sim.jobs
        return [QueuedJob(jobs.ids[job], sim.projects[jobs.project[job]],
                          sim.cluster_ids[jobs.cluster[job]], jobs.gpus[job],
                          self.hours_left(sim, job), True, sim.is_running(job))
                for job in sim.outstanding_jobs()
                if jobs.allocated[job] and job not in asked]

    def hours_left(self, sim: EngineView, job: int) -> float:
        """What ``job`` asks for: its work left (``sees="trace"``) or its time limit left."""
        if self.source.sees == "trace":
            return sim.work_left(job)
        if sim.is_running(job):
            return sim.expected_end(job) - sim.now
        return sim.requested_hours(job)

    def _forecast(self, sim: EngineView) -> np.ndarray:
        """(P, K) GPUs: allocated GPU-hours submitted in the lookback window ÷ its hours."""
        return arrival_forecast(*self.arrivals, sim.now, self.grid)
