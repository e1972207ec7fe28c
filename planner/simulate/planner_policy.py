"""``planner``: ours — a rolling-horizon replan every period, an executor enforcing it.

At every period boundary (``period_hours`` of the scenario from quarter start) the
policy plans with :func:`planner.run.plan_scenario` on the replay's scenario with

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
  (:meth:`PlannerPolicy.gang_requests`; off by default, ``gang_wait_hours`` = ∞: measured
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

The executor then enforces the plan's first period on every cluster:

1. an allocated job of project p runs **guaranteed** while p's guaranteed GPUs
   (its running guaranteed jobs plus this one) stay within the plan's
   guaranteed GPUs G_pk; it may preempt (expired) unallocated, fill and
   opportunistic work to start, and is never preempted itself;
2. work the plan did not see — submitted after the replan — must not wait a day
   for the next one: an allocated job runs **paced** while its project's running
   GPUs (all clusters, NGH per hour) stay within its entitlement, and preempts like
   guaranteed work and is protected like it until the next replan re-classes it.
   The entitlement, recomputed every hour, is the budget pace (budget ÷ quarter
   hours: the allocation a project is owed every hour it has work), with the pace
   of projects that have no work redistributed: the clusters' capacity (NGH per
   hour) water-filled over the projects' outstanding allocated work, weighted by
   their pace, and never below min(pace, that work); a project running nothing
   may always start one job of up to a node paced while it has budget left (a
   one-node job of a small project would otherwise wait for a node to empty by
   itself); a project without a budget is
   entitled to nothing.
3. beyond that, up to G_pk + O_pk (the opportunistic grant) it runs
   **opportunistic**, preempting only unallocated and fill work;
4. every GPU still idle goes to any waiting job that fits (**fill**): allocated
   jobs first, of the projects furthest behind their budget pace first (charged ÷
   (budget × elapsed share of the quarter)), then unallocated work. Reclaim takes
   the classes the contract's table lets the job's class preempt
   (:data:`planner.contract.PREEMPTS`: unallocated, then fill, then, for guaranteed
   and paced work, opportunistic work), from the projects furthest ahead of their
   budget pace first (within each project and class, the engine's rule: resumable
   jobs first, then non-resumable ones that ran least).

What is in force is read from the plan through the executor contract
(:func:`planner.contract.in_force` at the period start): G_pk and G_pk + O_pk are its
whole GPUs, ⌊guaranteed⌋ and ⌊guaranteed + opportunistic⌋ (the Kueue export's nominal
quota less reserved GPUs, and that plus its borrowing limit); the reservations in force
are read too (``reserved``, GPUs per project and cluster: the holds of 5 below); and a
job's protected runtime is min(its own min runtime, the plan's
``contract.min_runtime_cap_hours``): the replay applies it, the cap of the policy's model
(:func:`~planner.simulate.engine.contract_cap`), which every plan's contract carries,
so ``--model strict-budgets`` protects for 4 h, the default model for 8 h. At each
replan the running jobs are re-classed against the new plan, oldest first: guaranteed
up to G_pk, opportunistic up to G_pk + O_pk, fill beyond.

5. **reserved**: each reservation the plan placed becomes an engine hold
   (:meth:`~planner.simulate.engine.Replay.hold_nodes`) of its nodes over its planned
   [start, end) for its job. Before the start, work that would overrun the hold is
   placed off its nodes where it can; from the start the nodes take no other new
   work; once everything running on them is expired unallocated, fill or
   opportunistic work it is preempted (drained, all at once: guaranteed and paced
   work runs out first, and nothing is preempted while something else still holds a
   node), and the job starts on them, tagged ``reserved`` (never preempted, kept at a replan's
   re-classing). A hold ends when its job starts (there or anywhere) or at its end;
   at each replan the holds of jobs still waiting are replaced by the new plan's
   (keeping the nodes already drained where the new one starts at once).

Fill work gets a short slice, not the job's min runtime: a job started as
opportunistic or fill is protected for min(its min runtime, the contract's
``fill_slice_hours``, default 1 h), so a reclaim or a drain waits at most that long
for it; guaranteed, paced and reserved work keeps its whole min runtime.

**Ageing** of unallocated work (``age_hours``, default 48): in the fill order an
unallocated job that has waited w hours since its submit ranks as allocated work of
a project at ``age_hours`` ÷ w of its budget pace (charged ÷ paced): a fresh one
comes after all allocated work, one that waited 48 h ranks with projects exactly on
pace, one that waited 96 h with projects at half their pace. An unallocated job
that waited at least ``age_hours`` is protected for the fill slice once started
(a fresh one, as before, may be preempted at once).

The executor's other rules are the measured best of the variants tried (paced
up to the pace every hour, not only while behind it; over-budget work filling by pace
with the rest, not last; the pace of idle projects shared; a replan every
``period_hours``, not more often): the others are gone. Its three parameters are the
wide-job and ageing rules above (``gang_wait_hours``, ``gang_slack_periods``,
``age_hours``), each tested.
"""

from __future__ import annotations

import math
import time
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from planner.config import ModelConfig, load_model
from planner.contract import PREEMPTS, JobClass, in_force, preemptible_protection
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
from planner.fairshare import water_fill
from planner.simulate.executor import EngineView
from planner.simulate.policies import AdmissionPolicy
from planner.times import iso

GUARANTEED, PACED, OPPORTUNISTIC, FILL, UNALLOCATED, RESERVED = (
    JobClass.GUARANTEED, JobClass.PACED, JobClass.OPPORTUNISTIC, JobClass.FILL,
    JobClass.UNALLOCATED, JobClass.RESERVED)
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


class PlannerPolicy(AdmissionPolicy):
    """``planner``: see the module docstring."""

    name = "planner"

    def __init__(self, model: ModelConfig | None = None, check_every: int = 30,
                 gang_wait_hours: float | None = math.inf, gang_slack_periods: int = 7,
                 age_hours: float = 48.0, demand: DemandSource | None = None) -> None:
        model = model or load_model("default")
        self.source = demand or DemandSource()
        self.gang_wait_hours = gang_wait_hours  # None: one period
        self.gang_slack_periods = gang_slack_periods
        self.age_hours = age_hours
        self.check_every = check_every
        self.model = replace(model, contract=replace(model.contract, frozen_periods=0))

    def job_key(self, sim: EngineView, job: int) -> tuple:
        """Allocated work before unallocated, then submit order."""
        return (0 if sim.jobs.allocated[job] else 1, sim.jobs.submit[job], job)

    def prepare(self, sim: EngineView) -> None:
        """The scenario without its own demand, reservations and usage; no plan yet."""
        scenario = sim.scenario
        self.own_demand = scenario.demand  # a hand-written demand.csv (DemandSource.queue)
        self.base = replace(scenario, demand=scenario.demand.iloc[0:0],
                            reservations=scenario.reservations.iloc[0:0],
                            usage=scenario.usage.iloc[0:0])
        self.period = float(scenario.config.period_hours)
        days = self.model.lookback.window_days or scenario.config.lookback_days
        self.window_hours = int(round(days * 24))
        self.grid = DemandGrid.of(scenario, self.model.lookback.window_days)
        n_p, n_k = len(sim.projects), len(sim.cluster_ids)
        self.guaranteed = np.zeros((n_p, n_k))  # whole GPUs in force: ⌊g⌋
        self.opportunistic = np.zeros((n_p, n_k))  # whole headroom: ⌊g + o⌋ − ⌊g⌋
        self.planned = np.zeros((n_p, n_k))  # the plan's guaranteed GPUs as written (rank)
        self.reserved = np.zeros((n_p, n_k))  # GPUs of reservations in force
        self.budget = scenario.arrays.budget
        self.allowed = scenario.arrays.allowed
        self.rate = np.array(sim.rate)
        self.pace = self.budget / sim.hours  # NGH per hour
        self.entitlement = self.pace.copy()  # paced work's cap, NGH per hour (2)
        self.capacity_ngh = float(np.array(sim.capacity) @ self.rate)
        jobs = sim.jobs
        self.submit = np.array(jobs.submit)
        self.allocated = np.array(jobs.allocated, dtype=bool)
        self.project = np.array(jobs.project, dtype=np.int64)
        self.cluster = np.array(jobs.cluster, dtype=np.int64)
        self.work = np.array(jobs.gpus, dtype=float) * np.array(jobs.duration)
        # the arrivals the trace forecast counts: allocated jobs, each with its whole work
        alloc = self.allocated
        self.arrivals = (self.project[alloc], self.cluster[alloc], self.submit[alloc],
                         self.work[alloc])
        self.previous: dict | None = None
        self.next_plan = 0.0
        self.fill_slice = float(self.model.contract.fill_slice_hours)
        self.request_job: dict[str, int] = {}  # request_id → job, at the last replan

    def refresh(self, sim: EngineView, now: float) -> bool:
        """Every hour the paced entitlement; at period boundaries a replan, re-classing."""
        # (2): the whole capacity (NGH per hour) water-filled over the projects'
        # outstanding allocated work, weighted by budget pace; never below min(pace, demand)
        demand = np.where(self.pace > 0, sim.outstanding @ self.rate, 0.0)  # no budget, none
        shared = water_fill(self.capacity_ngh, demand, np.maximum(self.pace, 1e-12))
        self.entitlement = np.maximum(shared, np.minimum(self.pace, demand))
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
        self.fill_slice = preemptible_protection(body)
        self.apply_first_period(sim, body, iso(as_of))
        self.reclass(sim)
        self.hold_reservations(sim, body)
        return True

    # -- wide jobs: reservation requests, holds, drains ------------------------------------

    def gang_requests(self, sim: EngineView, as_of: pd.Timestamp) -> pd.DataFrame:
        """The reservations table of a replan: gang jobs that waited (module docstring).

        Sets ``request_job`` (request_id → job). Request ids are the jobs' ids.
        """
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

    def hold_reservations(self, sim: EngineView, body: dict) -> None:
        """The plan's reservations become engine holds of their jobs' nodes."""
        start0 = sim.scenario.config.quarter_start
        drained: dict[int, tuple[int, ...]] = {}
        for hid in list(sim.holds):
            hold = sim.holds[hid]
            if sim.is_waiting(hold.job):  # still waiting: replaced by the new plan's
                drained[hold.job] = hold.nodes if hold.active else ()
                sim.release_hold(hid)
        for r in sorted(body["reservations"], key=lambda r: (r["start"], r["request_id"])):
            job = self.request_job.get(r["request_id"])
            if job is None or not sim.is_waiting(job):
                continue
            start = (pd.Timestamp(r["start"]) - start0) / _HOUR
            end = (pd.Timestamp(r["end"]) - start0) / _HOUR
            sim.hold_nodes(sim.cluster_index[r["cluster"]], sim.jobs.project[job],
                           int(r["nodes"]), max(start, sim.now), end, job,
                           prefer=drained.get(job, ()))

    def schedule(self, sim: EngineView, c: int) -> None:
        """Reserved jobs onto their drained holds first, then the two-phase pass."""
        self.start_held(sim, c)
        super().schedule(sim, c)

    def start_held(self, sim: EngineView, c: int) -> None:
        """Drain each active hold on ``c`` and start its job once its nodes are free."""
        for hid in sim.active_holds(c):
            hold = sim.holds[hid]
            if not sim.is_waiting(hold.job):
                continue
            if sim.nodes_free(c, hold.nodes) or sim.clear_nodes(c, hold.nodes,
                                                                self._drain_victims(sim)):
                sim.start(hold.job, RESERVED, nodes=hold.nodes)

    def _drain_victims(self, sim: EngineView) -> list[tuple[int, JobClass]]:
        """Unallocated, fill and opportunistic work of every project (never guaranteed)."""
        n_p = len(sim.projects)
        return ([(q, UNALLOCATED) for q in range(n_p)] + [(q, FILL) for q in range(n_p)]
                + [(q, OPPORTUNISTIC) for q in range(n_p)])

    def protect_hours(self, sim: EngineView, job: int, tag: str) -> float | None:
        """Fill and opportunistic work: the contract's fill slice; aged unallocated too."""
        jobs = sim.jobs
        if tag in (FILL, OPPORTUNISTIC):
            return min(sim.protection(job), self.fill_slice)
        if tag == UNALLOCATED and sim.now - jobs.submit[job] >= self.age_hours - 1e-9:
            return self.fill_slice
        return None

    # -- the scenario of a replan ----------------------------------------------------------

    def _usage(self, sim: EngineView, now: float) -> pd.DataFrame:
        hours = int(round(now))
        window = min(hours, self.window_hours)
        cuts = [(0, hours - window), (hours - window, hours)]  # before the window, the window
        rows = []
        for i, (a, b) in enumerate(cuts):
            if b <= a:
                continue
            used = self.booked(sim)[:, :, a:b].sum(axis=2)
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

    def booked(self, sim: EngineView) -> np.ndarray:
        """(P, K, H) GPU-hours the executor's accounting reports: everything that ran."""
        return sim.used

    def _demand(self, sim: EngineView, as_of: pd.Timestamp, asked: AbstractSet[int] = frozenset(),
                usage: pd.DataFrame | None = None) -> pd.DataFrame:
        """The replan's demand rows, built by :mod:`planner.demand` (:class:`DemandSource`)."""
        source = self.source
        if not source.queue:  # declared rows only (default: the scenario's demand.csv)
            declared = source.declared if source.declared is not None else self.own_demand
            return declared_only(declared, as_of)
        jobs = self.read_back(sim, asked, as_of) if source.via_text else self.queued_jobs(
            sim, asked)
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

    def read_back(self, sim: EngineView, asked: AbstractSet[int],
                  as_of: pd.Timestamp) -> list[QueuedJob]:
        """The queue rendered as an executor prints it and read back (``via_text``).

        The ``planner`` policy has no executor: the replays of one override it.
        """
        raise ValueError(f"{self.name}: via_text needs an executor's replay "
                         "(planner-slurm or planner-kueue)")

    def _forecast(self, sim: EngineView) -> np.ndarray:
        """(P, K) GPUs: allocated GPU-hours submitted in the lookback window ÷ its hours."""
        return arrival_forecast(*self.arrivals, sim.now, self.grid)

    def apply_first_period(self, sim: EngineView, body: dict, first: str) -> None:
        """What the plan puts in force at ``first``, read through the executor contract."""
        terms = in_force(body, first)
        for array in (self.guaranteed, self.opportunistic, self.planned, self.reserved):
            array[:] = 0.0
        p_index, k_index = sim.tree.leaf_index, sim.cluster_index
        for q in terms.quotas:
            p, k = p_index[q.project], k_index[q.cluster]
            self.guaranteed[p, k] = q.guaranteed
            self.opportunistic[p, k] = q.opportunistic
            self.planned[p, k] = q.guaranteed_gpus
        for r in terms.reservations:
            self.reserved[p_index[r.project], k_index[r.cluster]] += r.gpus

    def reclass(self, sim: EngineView) -> None:
        """Running allocated jobs, oldest first: guaranteed, opportunistic, then fill."""
        jobs = sim.jobs
        for c in range(len(sim.cluster_ids)):
            taken: dict[int, int] = {}
            for job in sim.running_jobs(c):
                if not jobs.allocated[job]:
                    continue
                p = jobs.project[job]
                held = taken.get(p, 0) + sim.held(job)
                taken[p] = held
                if sim.tag_of(job) == RESERVED:  # keeps its class: it started on its reservation
                    continue
                if held <= self.guaranteed[p, c] + 1e-6:
                    sim.retag(job, GUARANTEED)
                elif held <= self.guaranteed[p, c] + self.opportunistic[p, c] + 1e-6:
                    sim.retag(job, OPPORTUNISTIC)
                else:
                    sim.retag(job, FILL)

    # -- the executor ----------------------------------------------------------------------

    def _held(self, sim: EngineView, c: int, p: int, *tags: str) -> int:
        return sum(sim.held_under(c, p, t) for t in tags)

    def candidates(self, sim: EngineView, c: int) -> np.ndarray:
        """Projects with room for one more GPU of guaranteed, paced or opportunistic work."""
        held_g = sim.held_of(c, GUARANTEED)
        held_go = held_g + sim.held_of(c, OPPORTUNISTIC)
        g, o = self.guaranteed[:, c], self.opportunistic[:, c]
        running = np.array(sim.held_ngh)
        return ((g - held_g >= 1 - 1e-6) | (g + o - held_go >= 1 - 1e-6)
                | (self.entitlement - running >= self.rate[c] - 1e-6)
                | ((running == 0) & (sim.charged < self.budget)))

    def rank(self, sim: EngineView, c: int, p: int, job: int) -> tuple:
        """Projects furthest below their entitlement (guaranteed GPUs or pace) first."""
        entitled = max(self.planned[p, c] * self.rate[c], self.pace[p])
        held = self._running_ngh(sim, p)
        return (held / entitled if entitled > 1e-9 else np.inf, *sim.key[job])

    def _running_ngh(self, sim: EngineView, p: int) -> float:
        return sim.held_ngh[p]

    def entitled(self, sim: EngineView, c: int, p: int, job: int) -> JobClass | None:
        """Guaranteed, paced, then opportunistic (module docstring, 1–3)."""
        if not sim.jobs.allocated[job]:
            return None
        need = sim.held(job)
        g, o = self.guaranteed[p, c], self.opportunistic[p, c]
        if self._held(sim, c, p, GUARANTEED) + need <= g + 1e-6:
            return GUARANTEED
        cap = self.entitlement[p]
        running = self._running_ngh(sim, p)
        # one job of up to a node, always, even above the cap
        first = (running == 0 and need <= sim.gpn[c]
                 and sim.charged[p] < self.budget[p])  # (and budget left)
        if first or running + need * self.rate[c] <= cap + 1e-6:
            return PACED
        if self._held(sim, c, p, GUARANTEED, OPPORTUNISTIC) + need <= g + o + 1e-6:
            return OPPORTUNISTIC
        return None

    def victims(self, sim: EngineView, c: int, p: int, job: int) -> list[tuple[int, str]]:
        """The classes the job's class may preempt (:data:`planner.contract.PREEMPTS`).

        Unallocated, then fill, then (for guaranteed and paced work) opportunistic jobs;
        within each, projects furthest ahead of their budget pace first.
        """
        n_p = len(sim.projects)
        paced = self.budget * max(sim.now, 1.0) / sim.hours
        ahead = np.divide(sim.charged, paced, out=np.full(n_p, np.inf), where=paced > 0)
        order = [int(q) for q in np.lexsort((np.arange(n_p), -ahead))]  # most ahead first
        tag = self.entitled(sim, c, p, job)
        return [(q, victim) for victim in (PREEMPTS[tag] if tag else ()) for q in order]

    def fill_rank(self, sim: EngineView, c: int, p: int, job: int) -> tuple:
        """Allocated work (furthest behind pace first), then unallocated work."""
        if not sim.jobs.allocated[job]:
            return self.age_rank(sim, job)
        paced = self.budget[p] * max(sim.now, 1.0) / sim.hours
        return (0, float(sim.charged[p]) / paced if paced > 0 else math.inf, *sim.key[job])

    def age_rank(self, sim: EngineView, job: int) -> tuple:
        """Unallocated work ranks as a project at ``age_hours`` ÷ its wait of its pace."""
        waited = sim.now - sim.jobs.submit[job]
        ratio = self.age_hours / waited if waited > 1e-9 else math.inf
        return (0, ratio, *sim.key[job])

    def fill_tag_of(self, sim: EngineView, job: int) -> str:
        """Fill for allocated work, unallocated otherwise."""
        return FILL if sim.jobs.allocated[job] else UNALLOCATED
