"""``planner-slurm``: the rolling replan, run as the exported script makes Slurm 22.05 run it.

The replan is the :class:`~planner.simulate.replanner.Replanner`'s, the same as the
``planner`` policy's: :class:`SlurmReplayPolicy` is the replanner holding a
:class:`SlurmExecutor` (composed: the executor does not inherit the replanner), which
replays what :func:`planner.exporters.slurm.export_slurm` ships: at every replan the
plan's :class:`~planner.exporters.slurm.SlurmState` (the record the script is rendered
from) is applied as the script would apply it, and jobs are scheduled as Slurm schedules
with that state.

**Applying a state** (a replan):

- each budget QOS ``gp-<project>`` gets its ``GrpTRESMins=gres/gpu=`` GPU-minutes; where
  the limit changed, its accrued usage is reset (``RawUsage=0``, as the script does; the
  GPU-minutes still reserved by running jobs are not usage and stay counted); and its
  pace cap ``GrpTRES=gres/gpu=`` (GPUs its running jobs may hold), for a project the
  state marks ``widens`` (behind its pace, budget left) at least the GPUs of its widest
  job waiting at the replan, of any class, as the script's ``wide_cap`` reads every
  pending job of the account (:meth:`SlurmExecutor._pending_widest`);
- the accounts get their integer ``fairshare`` (the budgets), ``gp-opportunistic`` its
  exempt time and ``UsageFactor``;
- reservations are created, moved and deleted: each holds ``NodeCnt`` whole nodes of its
  partition (the cluster) for its account over [start, end). A reservation kept from the
  previous state keeps its nodes; a new or resized one takes the highest-numbered nodes
  no overlapping reservation holds (Slurm picks the nodes; the engine packs gangs onto the
  lowest-numbered ones, so this keeps clear of them where it can). ``Flags=IGNORE_JOBS``:
  jobs running on them keep running.

**Scheduling** (Slurm 22.05, ``priority/multifactor``, ``preempt/qos``, the slurm.conf
lines the script's header asks for):

- *QOS of a job* (the user behaviour assumed, docs/explanation/slurm.md): an allocated job is
  submitted under its account's ``DefaultQOS``, the project's budget QOS. It may start
  there only while the QOS's GPU-minutes — usage accrued plus what
  Slurm reserves for its running jobs (GPUs × time limit left) plus this job's GPUs × its
  time limit — stay within ``GrpTRESMins`` and the GPUs its running jobs hold plus this
  job's stay within ``GrpTRES``; otherwise it would pend with reason
  ``QOSGrpGRESMinutes`` or ``QOSGrpGRES``, and a site wrapper moves it to
  ``--qos=gp-opportunistic`` (and back, while it waits, once a new limit or cap admits
  it). Unallocated jobs, and jobs of projects with no budget QOS, run under
  ``gp-opportunistic``. A job keeps its QOS while
  it runs.
- *priority*: ``PriorityWeightQOS`` × QOS priority ÷ the highest (budget 100, opportunistic
  0) + ``PriorityWeightFairshare`` × the Fair Tree factor, the QOS weight larger than the
  fair-share one, so every budget job comes before every opportunistic one and Fair Tree
  orders within each (``fair_tree_ranks`` with the accounts' integer ``fairshare``);
  ``PriorityWeightAge`` is 0: submit order within an account. Fair-share usage is the NGH
  of budget-QOS jobs plus ``gp-opportunistic``'s ``UsageFactor`` (1 as shipped) × the NGH
  of opportunistic jobs, decayed every hour here with ``PriorityDecayHalfLife``: the
  plan's ``fair_share_half_life_hours``, which the script's header asks slurm.conf for
  (58.2 h for a 7-day lookback window; ``half_life_hours`` replays another; Slurm's own
  7 days for a plan without it); the budget QOS's usage does not decay
  (``Flags=NoDecay``; without the flag it decays the same way).
- *main pass*: jobs in priority order start where they fit; a budget job that does not
  fit requeues ``gp-opportunistic`` jobs (``Preempt=gp-opportunistic``) that have run at
  least ``PreemptExemptTime`` (lowest priority first) and then, for a project not ahead
  of its budget pace at the last replan (the executor contract's rule 5: the budget QOS
  in its ``Preempt`` list, :func:`planner.exporters.slurm.take_back`), budget-QOS jobs of
  the projects ahead that have run their QOS's ``PreemptExemptTime`` (the protected
  runtime); the first job that cannot start ends the pass. ``PreemptExemptTime`` is all
  that protects a running job: Slurm knows no min runtime, so each start tells the engine
  its QOS's exempt time (``protect=``: 0 for ``gp-opportunistic``, whose exemption the
  ``opportunistic-exempt`` tag carries; the budget QOS's for a budget job; a budget job of
  a project nobody takes back from is never a victim whatever its protection).
- ``bf_min_prio_reserve`` (``SchedulerParameters``, the script's header asks for
  ``PRIORITY_WEIGHT_QOS``): a blocked job below that priority, i.e. every
  ``gp-opportunistic`` job, reserves nothing and delays no later job ("jobs with a lower
  priority will not prevent a newly submitted job from starting immediately"), so when
  the first job that cannot start is opportunistic every later job that fits starts
  (``min_prio_reserve=False`` replays a site without the setting).
- *backfill*: with requested time limits, in priority order. The first blocked budget job
  gets a reservation (the nodes that free first by the running jobs' limits); then each
  project's first waiting job is tested as Slurm's backfill tests every job: it starts
  if it can off the nodes reserved for the jobs before it whose planned start its limit
  would reach, a budget job requeueing ``gp-opportunistic`` work past its exempt time
  as in the main pass (Slurm's will-run test counts preemptable jobs' resources as
  available; the real Slurm 22.05 does it in ``tests/test_export_slurm.py``); a budget
  job that cannot start gets a reservation of its own on nodes no earlier reservation
  holds. The project's later jobs then start where they
  fit off the reserved nodes their limits would reach (``bf_max_job_test`` jobs in all).
  As Slurm's backfill with its default ``bf_window`` (1440 minutes;
  ``bf_window_hours``), no reservation is made for a job whose expected start lies
  beyond the window ("starts too far in the future to worry about").
  ``reserve_each=False`` replays the earlier model: one
  reservation, for the first blocked job only (as ``fairtree``), and no preemption in
  backfill.
- *reservations*: a job of the reservation's account runs inside it (the wrapper adds
  ``--reservation``) where its time limit ends before the reservation does; every other
  job stays off reserved nodes while the reservation is active, and off a future one's
  nodes if its time limit would reach the reservation's start.

The exported state is the shipped :class:`~planner.exporters.slurm.SlurmExport`'s
(:data:`~planner.exporters.slurm.SHIPPED`, what ``planner export --to slurm`` ships;
``export=`` another record replays a variant: the variants it was compared with
(CHANGELOG) are named records where they are used, ``BEFORE_RULE8`` beside ``SHIPPED``,
the others in the tests and benchmarks). What only the replay has, the site's
``slurm.conf`` settings and the replay's own model, is one :class:`SlurmReplayOptions`
record, :data:`AS_SHIPPED` by default: ``bf_window_hours`` the site's backfill window
(Slurm's default, a day), ``bf_max_job_test``, ``min_prio_reserve``, ``reserve_each`` and
``half_life_hours``.

**Rule 8** (the executor contract's overdrawn projects, ``export.overdrawn_qos``, on as
shipped; ``export=BEFORE_RULE8`` replays the export before it): the NGH each project ran
under ``gp-opportunistic`` or ``gp-overdrawn`` is accrued undecayed, as ``planner ingest
sacct`` writes it to ``unbudgeted.csv``, and at each replan the state's overdrawn
projects (:func:`planner.contract.overdrawn` with it) are those whose waiting work beyond
their budget runs under ``gp-overdrawn`` once their running jobs (any QOS) run their
pace (``state.overdrawn_pace``, :func:`planner.tick.keeps_pace`; below it, under
``gp-opportunistic``), as ``planner tick`` moves it: last in priority,
``PreemptExemptTime`` 0, requeued at once by a budget job (first, before
``gp-opportunistic`` work) and, in the main pass, by a ``gp-opportunistic`` job. Backfill
lets budget jobs alone requeue, and its reservations count gp-overdrawn work as freeing
its GPUs by its time limit (both as before the rule).

Deviations of the model, each bounded: preemption exemption ends are acted on at the next
event or whole hour; QOS and fair-share usage decay hourly, not every 5 minutes; an
overdrawn project's pace counts its running jobs, where the tick (every minute) also
counts the pending jobs it keeps in ``gp-opportunistic`` (the replay starts a kept job at
once or not at all).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.config import ModelConfig
from planner.demand import QueuedJob
from planner.exporters.slurm import SHIPPED, SlurmExport, SlurmReservation, SlurmState
from planner.ingest.queue import squeue_jobs
from planner.ingest.squeue import parse_squeue_text, squeue_text
from planner.simulate.executor import EngineView
from planner.simulate.planner_policy import allocated_first
from planner.simulate.policies import (
    HOURS_PER_WEEK,
    FairTreePolicy,
    fair_tree_ranks,
    reservation_from_ends,
)
from planner.simulate.queue_render import squeue_rows
from planner.simulate.replanner import DemandSource, Replanner
from planner.tick import budget_admits, keeps_pace

BUDGET, EXEMPT, OPPORTUNISTIC = "budget", "opportunistic-exempt", "opportunistic"
OVERDRAWN = "overdrawn"  # rule 8: gp-overdrawn, below gp-opportunistic, preempted at once
_EPS = 1e-9
#: the main pass's order of QOS (:meth:`SlurmExecutor.priority`)
_QOS_ORDER = {BUDGET: 0, OPPORTUNISTIC: 1, OVERDRAWN: 2}


def _hourly_decay(half_life_hours: float | None) -> float:
    """Usage kept after an hour under ``PriorityDecayHalfLife`` (None: Slurm's 7 days)."""
    return 0.5 ** (1.0 / (HOURS_PER_WEEK if half_life_hours is None else half_life_hours))


@dataclass(frozen=True)
class SlurmReplayOptions:
    """What the Slurm replay runs under that is not in the export (the module docstring).

    The site's ``slurm.conf`` (the settings the script's header asks for, replayed as
    asked) and the replay's own model of Slurm's backfill; the export's options are its
    :class:`~planner.exporters.slurm.SlurmExport` record.
    """

    #: ``PriorityDecayHalfLife``: None, the plan's (the script's header asks for it)
    half_life_hours: float | None = None
    #: ``SchedulerParameters=bf_max_job_test``: jobs backfill tests in a pass
    bf_max_job_test: int = 500
    #: ``SchedulerParameters=bf_window`` in hours (Slurm's default, 1440 minutes)
    bf_window_hours: float = 24.0
    #: ``SchedulerParameters=bf_min_prio_reserve`` (the script's header asks for it): only
    #: budget-QOS jobs get reservations and block later jobs; False replays a site
    #: without it (every blocked head, gp-opportunistic too, gets one)
    min_prio_reserve: bool = True
    #: Slurm's backfill tests each pending job in priority order: one that can start
    #: without delaying a reservation starts (a budget job preempting gp-opportunistic
    #: work, as the main pass), one that cannot gets a reservation of its own; False
    #: replays the earlier model (one reservation, for the first blocked job, and no
    #: preemption in backfill)
    reserve_each: bool = True


#: the replay of the shipped configuration: the site as the script's header asks
AS_SHIPPED = SlurmReplayOptions()


class SlurmReplayPolicy(Replanner):
    """``planner-slurm``: the replanner holding a :class:`SlurmExecutor`."""

    def __init__(self, model: ModelConfig | None = None, check_every: int = 30,
                 gang_wait_hours: float = math.inf, demand: DemandSource | None = None,
                 export: SlurmExport = SHIPPED,
                 options: SlurmReplayOptions = AS_SHIPPED) -> None:
        # No reservation requests for waiting gang jobs by default (``gang_wait_hours``
        # infinite): as exported (``Flags=IGNORE_JOBS``, the window exactly the job's
        # limit), a Slurm reservation's nodes are still busy at its start, the gang job
        # then cannot end inside it and never starts there, while every job whose limit
        # reaches a future reservation stays off its nodes, so requests idle whole nodes.
        super().__init__(SlurmExecutor(export, options), model=model,
                         check_every=check_every, gang_wait_hours=gang_wait_hours,
                         demand=demand)


class SlurmExecutor:
    """``planner-slurm``'s executor: Slurm as the exported script sets it up (module docstring)."""

    name = "planner-slurm"
    work_conserving = False  # backfill leaves GPUs idle ahead of a blocked job
    # Slurm protects a running job only by its QOS's PreemptExemptTime (gp-opportunistic's
    # exempt time, the contract's fill slice; a budget QOS's, the protected runtime), not by
    # the min runtime the trace gives it: every start says how long (``protect=``)
    protects_min_runtime = True

    def __init__(self, export: SlurmExport = SHIPPED,
                 options: SlurmReplayOptions = AS_SHIPPED) -> None:
        self.options = options
        # PriorityDecayHalfLife: the plan's (the script's header asks for it) unless given
        self.half_life = options.half_life_hours
        self.decay = _hourly_decay(options.half_life_hours)
        self.bf_max_job_test = options.bf_max_job_test
        self.bf_window = float(options.bf_window_hours)  # bf_window (1440 min)
        # what the export ships: ``export`` (:class:`~planner.exporters.slurm.SlurmExport`),
        # SHIPPED, the very record `planner export --to slurm` and `planner tick` use, unless
        # a variant is asked for
        self.export = export
        self.pace_cap, self.no_decay = export.pace, export.no_decay
        self.share_source = export.shares
        self.opportunistic_usage = export.opportunistic_usage
        self.pace_floor = export.floor
        self.take_back = export.takes_back
        self.widens = export.widens  # the pace caps widen to the widest pending job
        self.min_prio_reserve = options.min_prio_reserve  # (SlurmReplayOptions)
        self.reserve_each = options.reserve_each

    def job_key(self, sim: EngineView, job: int) -> tuple:
        """Allocated work before unallocated, then submit order (``PriorityWeightAge`` 0)."""
        return allocated_first(sim, job)

    # -- state ---------------------------------------------------------------------------

    def begin(self, sim: EngineView, model: ModelConfig) -> None:
        """An empty Slurm (no limits, reservations or usage)."""
        n_p = len(sim.projects)
        self.state: SlurmState | None = None
        self.limit_hours = np.full(n_p, np.nan)  # GrpTRESMins ÷ 60; NaN: no budget QOS
        self.cap_gpus = np.full(n_p, np.inf)  # GrpTRES=gres/gpu=; inf: no cap
        self.qos_decay = np.ones(n_p)  # hourly decay of QOS usage: 1 under Flags=NoDecay
        self.qos_used = np.zeros(n_p)  # raw GPU-hours accrued in the budget QOS (decayed)
        self.fs_usage = np.zeros(n_p)  # NGH of budget-QOS jobs, decayed (fair share)
        self.run_gpus = np.zeros(n_p)  # GPUs of running budget-QOS jobs
        self.run_ngh = np.zeros(n_p)  # ... and their NGH per hour
        self.run_opp_ngh = np.zeros(n_p)  # NGH per hour of running gp-opportunistic jobs
        self.opp_factor = 0.0  # gp-opportunistic's UsageFactor
        self.run_by_cluster = np.zeros((n_p, len(sim.cluster_ids)))  # ... their GPUs per cluster
        # GPU-hours of budget-QOS jobs per project, cluster and hour: what `planner ingest`
        # reads from sacct (it skips gp-opportunistic jobs), so what the replans see as usage
        self.budget_used = np.zeros_like(sim.used)
        # NGH of gp-opportunistic and gp-overdrawn jobs per project, undecayed: what
        # `planner ingest sacct` writes to unbudgeted.csv, rule 8's usage beside the plan's
        self.unbudgeted = np.zeros(n_p)
        self.overdrawn: frozenset[int] = frozenset()  # projects moved to gp-overdrawn
        # ... and the NGH per hour each keeps in gp-opportunistic (its pace; 0: none)
        self.overdrawn_pace = np.zeros(n_p)
        # Σ GPUs × expected end (start + time limit) of each project's running budget-QOS
        # jobs, and each such job's expected end: Slurm reserves GPUs × limit left, which is
        # ends − now × GPUs (a job never outlives its limit: the trace checks limit ≥ duration)
        self.end_sum = np.zeros(n_p)
        # (job, run start) -> expected end: a budget job taken back may start again before
        # its ended run is accounted, so a run, not a job, is the key
        self.job_end: dict[tuple[int, float], float] = {}
        # per project: the projects whose budget-QOS jobs its budget QOS may requeue (the
        # QOS of its Preempt list besides gp-opportunistic), and that QOS's exempt hours
        self.takes_back: list[tuple[int, ...]] = [() for _ in range(n_p)]
        self.budget_exempt = 0.0
        self.accrued_to = 0.0
        self.seen = 0  # segments already accounted
        self.exempt_hours = 0.0
        self.exempt_ends: list[tuple[float, int, float]] = []  # (end, job, run start)
        self.rank_of = list(range(n_p))
        self.shares = np.array(sim.tree.weight, dtype=float)
        # per cluster: (start, end, project, nodes) of every reservation in force or ahead
        self.reserved: list[list[tuple[float, float, int, frozenset[int]]]] = [
            [] for _ in sim.cluster_ids]
        self.nodes_of: dict[str, tuple[int, int, frozenset[int]]] = {}  # name → (c, n, nodes)
        #: bumped by every change to what :meth:`qos_of` reads but the clock and job (starts,
        #: accruals, a new state); job -> ((now, epoch, its cluster's version), its QOS)
        self._budget_epoch = 0
        #: (the Fair Tree ranks, :meth:`_victims`' gp-opportunistic groups by them)
        self._lowest_first: tuple[list[int] | None, list[tuple[int, str]]] = (None, [])
        self._qos_known: dict[int, tuple[tuple, str]] = {}
        #: per (cluster, asker kind): (version, node versions, :meth:`_node_frees`' table)
        self._frees_of: dict[tuple, tuple[int, list[int], list]] = {}
        #: one backfill pass's reservations by (version, asker kind, GPUs, plans before it)
        self._reserved_for: dict[tuple, tuple[float, frozenset[int]]] = {}

    def before_replan(self, sim: EngineView, now: float) -> None:
        """Usage accrued and decayed (the replan reads it)."""
        self._accrue(sim)
        if now >= 1.0 - _EPS:
            self.qos_used *= self.qos_decay
            self._budget_epoch += 1
            self.fs_usage *= self.decay

    def after_replan(self, sim: EngineView, now: float, replanned: bool) -> bool:
        """Exemptions ended, Fair Tree ranks anew: every cluster is scheduled again."""
        self._end_exemptions(sim)
        self.rank_of = fair_tree_ranks(sim.tree, self.fs_usage, self.shares)
        return True

    def apply_first_period(self, sim: EngineView, body: dict, first: str) -> None:
        """Apply the plan's Slurm state as its script would (the module docstring)."""
        unbudgeted = {sim.projects[p]: float(v) for p, v in enumerate(self.unbudgeted) if v > 0}
        state = self.export.state(body, sim.tree, unbudgeted)
        old = self.state.minutes() if self.state is not None else {}
        widest = self._pending_widest(sim) if any(b.widens for b in state.budgets) else {}
        if self.half_life is None:  # slurm.conf as the header asks (Slurm's 7 days if unsaid)
            self.decay = _hourly_decay(state.decay_half_life_hours)
        index = sim.tree.leaf_index
        for b in state.budgets:
            p = index[b.project]
            if old.get(b.project) != b.minutes:
                self.qos_used[p] = 0.0  # RawUsage=0 with the new limit
            self.limit_hours[p] = b.minutes / 60.0
            self.cap_gpus[p] = math.inf if b.gpus is None else b.gpus
            if b.widens:  # as the script's wide_cap: at least the widest waiting job
                self.cap_gpus[p] = max(self.cap_gpus[p], widest.get(p, 0))
            self.qos_decay[p] = 1.0 if b.no_decay else self.decay
            self.budget_exempt = b.preempt_exempt_hours
        by_qos = {b.name: index[b.project] for b in state.budgets}
        self.takes_back = [() for _ in sim.projects]
        for b in state.budgets:
            self.takes_back[index[b.project]] = tuple(by_qos[q] for q in b.takes_back)
        shares = np.array(sim.tree.weight, dtype=float)
        for a in state.accounts:
            shares[sim.tree.index[a.node]] = a.fairshare
        self.shares = shares
        self.exempt_hours = state.opportunistic.preempt_exempt_hours
        self.opp_factor = state.opportunistic.usage_factor
        self._apply_reservations(sim, state.reservations)
        # rule 8: the tick moves an overdrawn account's pending jobs to gp-overdrawn
        self.overdrawn = frozenset(index[p] for p in state.overdrawn_projects)
        self.overdrawn_pace = np.zeros(len(sim.projects))
        for project, pace in state.overdrawn_pace:
            self.overdrawn_pace[index[project]] = pace
        self.state = state
        self._budget_epoch += 1

    @staticmethod
    def _pending_widest(sim: EngineView) -> dict[int, int]:
        """Project -> the GPUs of its widest waiting job, of any class.

        The script's ``wide_cap``: every pending job of the account, whatever QOS the
        wrapper moved it to.
        """
        widest: dict[int, int] = {}
        jobs = sim.jobs
        for job in sim.waiting_jobs():
            p = jobs.project[job]
            widest[p] = max(widest.get(p, 0), jobs.gpus[job])
        return widest

    def hold_reservations(self, sim: EngineView, body: dict,
                          request_job: Mapping[str, int]) -> None:
        """No engine holds: the plan's reservations are Slurm reservations here.

        :meth:`apply_first_period` applied them (``_apply_reservations``) as the script
        would; the ``planner`` executor's holds and drains are not what Slurm does, and
        this policy's :meth:`schedule` never starts a held job, so a hold would only keep
        its nodes idle.
        """

    def reclass(self, sim: EngineView) -> None:
        """Nothing: a running job keeps the QOS it started under."""

    def _apply_reservations(self, sim: EngineView,
                            reservations: tuple[SlurmReservation, ...]) -> None:
        start = sim.scenario.config.quarter_start
        hour = pd.Timedelta(hours=1)
        kept: dict[str, tuple[int, int, frozenset[int]]] = {}
        self.reserved = [[] for _ in sim.cluster_ids]
        windows = []
        for r in reservations:
            c = sim.cluster_index[r.partition]
            a = (pd.Timestamp(r.start) - start) / hour
            b = (pd.Timestamp(r.end) - start) / hour
            windows.append((r, c, float(a), float(b)))
        # kept ones first (they hold their nodes), then new ones in name order
        windows.sort(key=lambda w: (w[0].name not in self.nodes_of, w[0].name))
        for r, c, a, b in windows:
            if b <= sim.now + _EPS:
                continue
            prior = self.nodes_of.get(r.name)
            if prior is not None and prior[:2] == (c, r.nodes):
                nodes = prior[2]
            else:
                taken = set().union(*(n for s, e, _, n in self.reserved[c] if s < b and a < e))
                free = [n for n in range(sim.nodes[c] - 1, -1, -1) if n not in taken]
                nodes = frozenset(free[:r.nodes])
            kept[r.name] = (c, r.nodes, nodes)
            self.reserved[c].append((a, b, sim.tree.leaf_index[r.project], nodes))
        self.nodes_of = kept

    # -- accounting ----------------------------------------------------------------------

    def _accrue(self, sim: EngineView) -> None:
        """Book budget-QOS usage up to ``sim.now`` (QOS usage and fair-share usage)."""
        since = self.accrued_to  # (since, now] lies in one hour: refresh runs every hour
        hour = min(int(since + _EPS), sim.n_hours - 1)
        segments = sim.segments
        rate = sim.rate
        for seg in segments[self.seen:]:
            if seg.tag != BUDGET:  # gp-opportunistic: fair-share usage × its UsageFactor
                ran = seg.end - max(seg.start, since)
                ngh = seg.gpus * rate[seg.cluster]
                self.fs_usage[seg.project] += self.opp_factor * ngh * max(ran, 0.0)
                self.unbudgeted[seg.project] += ngh * max(ran, 0.0)
                self.run_opp_ngh[seg.project] -= ngh
                continue
            p = seg.project
            ran = seg.end - max(seg.start, since)
            if ran > 0:
                self.qos_used[p] += seg.gpus * ran
                self.fs_usage[p] += seg.gpus * ran * rate[seg.cluster]
                self.budget_used[p, seg.cluster, hour] += seg.gpus * ran
            self.run_gpus[p] -= seg.gpus
            self.run_ngh[p] -= seg.gpus * rate[seg.cluster]
            self.run_by_cluster[p, seg.cluster] -= seg.gpus
            self.end_sum[p] -= seg.gpus * self.job_end.pop((seg.job, seg.start))
        self.seen = len(segments)
        step = sim.now - since
        if step > 0:
            self.qos_used += self.run_gpus * step
            self.fs_usage += (self.run_ngh + self.opp_factor * self.run_opp_ngh) * step
            self.unbudgeted += self.run_opp_ngh * step
            self.budget_used[:, :, hour] += self.run_by_cluster * step
        self.accrued_to = sim.now
        self._budget_epoch += 1

    def booked(self, sim: EngineView) -> np.ndarray:
        """What the replans see as usage: budget-QOS GPU-hours (sacct less gp-opportunistic)."""
        return self.budget_used

    def committed_hours(self, sim: EngineView, p: int) -> float:
        """GPU-hours the budget QOS of ``p`` counts now: usage plus running jobs' limits left."""
        reserved = self.end_sum[p] - sim.now * self.run_gpus[p]
        return float(self.qos_used[p] + reserved)

    def qos_of(self, sim: EngineView, p: int, job: int) -> str:
        """The QOS a waiting job runs under now: its budget QOS if both limits admit it.

        ``GrpTRESMins`` (usage and running jobs' limits left, plus this job's GPUs × time
        limit) and ``GrpTRES`` (the GPUs the QOS's running jobs hold, plus this job's);
        otherwise the wrapper's ``gp-opportunistic``: :func:`planner.tick.budget_admits`,
        the decision ``planner tick`` makes on a real Slurm's pending jobs.
        """
        qos = self._wrapper_qos(sim, p, job)
        # rule 8 (planner tick): what an overdrawn account would run beyond its budget,
        # once its running jobs (any QOS) run its pace
        if qos == OPPORTUNISTIC and p in self.overdrawn and not keeps_pace(
                self.run_ngh[p] + self.run_opp_ngh[p], self.overdrawn_pace[p]):
            return OVERDRAWN
        return qos

    def _wrapper_qos(self, sim: EngineView, p: int, job: int) -> str:
        """:meth:`qos_of` before rule 8: the wrapper rule's budget QOS or gp-opportunistic."""
        limit = self.limit_hours[p]
        if not sim.jobs.allocated[job] or math.isnan(limit):
            return OPPORTUNISTIC
        g = sim.jobs.gpus[job]
        if self.run_gpus[p] + g > self.cap_gpus[p] + 1e-6:  # (the cheap test first)
            return OPPORTUNISTIC
        # the answer stands while the clock, the budget QOS's usage and running jobs
        # (``_budget_epoch``) and the job's cluster (a preempted job's time left) stand
        stamp = (sim.now, self._budget_epoch, sim.version(sim.jobs.cluster[job]))
        known = self._qos_known.get(job)
        if known is not None and known[0] == stamp:
            return known[1]
        admits = budget_admits(g, sim.requested_hours(job), limit, self.committed_hours(sim, p),
                               self.cap_gpus[p], self.run_gpus[p])
        qos = BUDGET if admits else OPPORTUNISTIC
        self._qos_known[job] = (stamp, qos)
        return qos

    def read_back(self, sim: EngineView, asked: AbstractSet[int], as_of: pd.Timestamp,
                  hours_left: Callable[[EngineView, int], float]) -> list[QueuedJob]:
        """The queue as ``squeue`` lines, read back by ``planner ingest squeue``'s code.

        A running job shows the QOS it runs under, a waiting one the QOS the wrapper rule
        gives it now (:meth:`qos_of`); allocated work under ``gp-opportunistic`` is what
        ``planner tick`` recorded as moved (:mod:`planner.simulate.queue_render`).
        """
        rows, moved = squeue_rows(sim, hours_left, self._under_budget, asked,
                                  self._overdrawn_qos)
        parsed, problems = parse_squeue_text("squeue", squeue_text(rows))
        if problems:
            raise RuntimeError(f"the replay's squeue text does not read back: {problems[:3]}")
        return squeue_jobs(parsed, sim.scenario, moved)[0]

    def _under_budget(self, sim: EngineView, job: int) -> bool:
        if sim.is_running(job):
            return sim.tag_of(job) == BUDGET
        return self.qos_of(sim, sim.jobs.project[job], job) == BUDGET

    def _overdrawn_qos(self, sim: EngineView, job: int) -> bool:
        if sim.is_running(job):
            return sim.tag_of(job) == OVERDRAWN
        return self.qos_of(sim, sim.jobs.project[job], job) == OVERDRAWN

    def _end_exemptions(self, sim: EngineView) -> None:
        """Opportunistic jobs past ``PreemptExemptTime`` become preemptable."""
        ends = self.exempt_ends
        while ends and ends[0][0] <= sim.now + _EPS:
            _, job, began = heapq.heappop(ends)
            if sim.is_running(job) and sim.started_at(job) == began and sim.tag_of(job) == EXEMPT:
                sim.retag(job, OPPORTUNISTIC)

    # -- scheduling ----------------------------------------------------------------------

    def priority(self, qos: str, p: int, key: tuple) -> tuple:
        """Multifactor order (smaller first): QOS, then Fair Tree rank, then submit order.

        PriorityWeightQOS > PriorityWeightFairshare: the QOS term decides alone (budget,
        then gp-opportunistic, then gp-overdrawn: rule 8's priorities 100, 11 and 0).
        """
        return (_QOS_ORDER.get(qos, 1), self.rank_of[p], *key)

    def _blocked(self, sim: EngineView, c: int, p: int, job: int, inside: bool
                 ) -> frozenset[int] | None:
        """Nodes ``job`` may not use (inside its account's reservation or outside all).

        None when it cannot run inside one (no active reservation of its account that
        outlasts its time limit).
        """
        if not self.reserved[c]:  # no reservation on c: nothing inside, nothing kept off
            return None if inside else frozenset()
        now = sim.now
        end = now + sim.requested_hours(job)
        if inside:
            mine = [n for s, e, q, n in self.reserved[c] if q == p and s <= now + _EPS
                    and end <= e + _EPS]
            if not mine:
                return None
            allowed = frozenset().union(*mine)
            return frozenset(range(sim.nodes[c])) - allowed
        return frozenset().union(*(n for s, e, _, n in self.reserved[c]
                                   if s < end - _EPS and e > now + _EPS))

    def _try_start(self, sim: EngineView, c: int, p: int, job: int, qos: str, preempt: bool,
                   avoid: frozenset[int] = frozenset()) -> bool:
        """Start ``job`` inside its reservation or outside, off ``avoid``, preempting if allowed.

        ``avoid``: the nodes backfill keeps for higher-priority jobs whose planned start
        comes before this one's time limit would end.
        """
        g = sim.jobs.gpus[job]
        for inside in (True, False):
            blocked = self._blocked(sim, c, p, job, inside)
            if blocked is None:
                continue
            if avoid:
                blocked = blocked | avoid
            if sim.fits(c, g, blocked) or (preempt and sim.preempt_for(
                    job, self._victims(sim, p, qos), blocked)):
                self._start(sim, p, job, qos, blocked)
                return True
        return False

    def _victims(self, sim: EngineView, p: int, qos: str) -> list[tuple[int, str]]:
        """What a ``qos`` job of ``p`` may requeue, lowest priority (worst Fair Tree rank) first.

        ``gp-opportunistic`` jobs past their exempt time, then (a budget job of a project
        not ahead of its pace) budget-QOS jobs of the projects ahead past theirs (the
        engine takes none inside the protection its run started with).
        """
        ranks, opportunistic = self._lowest_first
        if ranks is not self.rank_of:  # new ranks (every hour): sort them again
            order = sorted(range(len(sim.projects)), key=lambda q: -self.rank_of[q])
            opportunistic = [(q, OPPORTUNISTIC) for q in order]
            self._lowest_first = (self.rank_of, opportunistic)
        # rule 8: gp-overdrawn (PreemptExemptTime 0) first, the lowest priority; a
        # gp-opportunistic job requeues it alone (its Preempt list)
        over = [(q, OVERDRAWN) for q in sorted(self.overdrawn, key=lambda q: -self.rank_of[q])]
        if qos != BUDGET:
            return over
        out = over + opportunistic if over else list(opportunistic)
        back = self.takes_back[p] if qos == BUDGET else ()
        if back:
            out += [(q, BUDGET) for q in sorted(back, key=lambda q: -self.rank_of[q])]
        return out

    def _start(self, sim: EngineView, p: int, job: int, qos: str, blocked: frozenset[int]) -> None:
        if qos == BUDGET:
            sim.start(job, BUDGET, blocked, protect=self.budget_exempt)
            c = sim.jobs.cluster[job]
            end = self.job_end[job, sim.now] = sim.expected_end(job)
            self.end_sum[p] += sim.jobs.gpus[job] * end
            self.run_gpus[p] += sim.jobs.gpus[job]
            self.run_ngh[p] += sim.jobs.gpus[job] * sim.rate[c]
            self.run_by_cluster[p, c] += sim.jobs.gpus[job]
            self._budget_epoch += 1
        elif qos == OVERDRAWN:  # PreemptExemptTime=0: any other QOS's job requeues it
            self.run_opp_ngh[p] += sim.jobs.gpus[job] * sim.rate[sim.jobs.cluster[job]]
            sim.start(job, OVERDRAWN, blocked, protect=0.0)
        elif self.exempt_hours > 0:
            self.run_opp_ngh[p] += sim.jobs.gpus[job] * sim.rate[sim.jobs.cluster[job]]
            sim.start(job, EXEMPT, blocked, protect=0.0)
            heapq.heappush(self.exempt_ends, (sim.now + self.exempt_hours, job, sim.now))
        else:
            self.run_opp_ngh[p] += sim.jobs.gpus[job] * sim.rate[sim.jobs.cluster[job]]
            sim.start(job, OPPORTUNISTIC, blocked, protect=0.0)

    def schedule(self, sim: EngineView, c: int) -> None:
        """Slurm's main pass in priority order, then backfill (the module docstring)."""
        self._accrue(sim)
        self._end_exemptions(sim)
        if not sim.any_fits(c) and not sim.preemptible_gpus(c):
            return
        heap = []
        version, epoch = sim.version(c), self._budget_epoch
        for p in sim.waiting_projects(c):
            job = sim.head(c, p)
            qos = self.qos_of(sim, p, job)
            heap.append((self.priority(qos, p, sim.key[job]), p, job, qos))
        heapq.heapify(heap)
        head = None
        while heap:
            key, p, job, qos = heapq.heappop(heap)
            now_qos = self.qos_of(sim, p, job)
            if now_qos != qos:  # a start in this pass used up the budget: requeue it
                heapq.heappush(heap, (self.priority(now_qos, p, sim.key[job]), p, job, now_qos))
                continue
            if self._try_start(sim, c, p, job, qos, preempt=self._preempts(qos)):
                nxt = sim.head(c, p)
                if nxt is not None:
                    q = self.qos_of(sim, p, nxt)
                    heapq.heappush(heap, (self.priority(q, p, sim.key[nxt]), p, nxt, q))
                continue
            head = job
            heapq.heappush(heap, (key, p, job, qos))
            break
        if head is None or not self._room(sim, c):
            return
        # bf_min_prio_reserve: only a budget head (the QOS it was popped under) reserves
        reserve = not self.min_prio_reserve or qos == BUDGET
        # the entries read before any start of this pass hold while nothing started
        read = (version, epoch) if (version, epoch) == (sim.version(c), self._budget_epoch) \
            else None
        self._backfill(sim, c, head, [(p, job, qos) for _, p, job, qos in sorted(heap)],
                       reserve, read)

    def _preempts(self, qos: str) -> bool:
        """Whether a ``qos`` job may requeue others in the main pass.

        A budget job, always; a ``gp-opportunistic`` job only gp-overdrawn work (rule 8),
        so only while a project is overdrawn; a gp-overdrawn job never.
        """
        return qos == BUDGET or (qos == OPPORTUNISTIC and bool(self.overdrawn))

    def _backfill(self, sim: EngineView, c: int, head: int,
                  order: list[tuple[int, int | None, str]], reserve: bool = True,
                  read: tuple[int, int] | None = None) -> None:
        """Later jobs that start without delaying a higher-priority job's reservation.

        ``order``: (project, its first waiting job, that job's QOS) in priority order, as
        read at ``read`` (the cluster's version and the budget epoch; None: read again).
        ``reserve=False``: the head is below ``bf_min_prio_reserve`` (a
        ``gp-opportunistic`` job): nothing is reserved for it. With ``reserve_each`` every
        project's first waiting job is tested as Slurm's backfill tests each job: it
        starts now if it can off the nodes reserved so far (a budget job preempting
        ``gp-opportunistic`` work past its exempt time), otherwise a budget job gets a
        reservation of its own (:meth:`_reserve`) and its project's later jobs start where
        they fit off the reserved nodes their limits would reach.

        The same starts and reservations as asking everything afresh for every project
        (``tests/test_simulate_props.py`` keeps that plain pass): the first job and its QOS
        are those read for the main pass while nothing has started since (``read``: no
        start, stop or budget change, so :meth:`Replay.head` and :meth:`qos_of` give them
        again); the largest job that fits (:meth:`Replay.fit_limit`: a job fits on free
        nodes exactly when it asks at most that) and :meth:`_room` are read once per
        version of the cluster; a ``gp-opportunistic`` first job above the limit is not
        tried (off fewer nodes it fits still less, and it may not preempt); and
        :meth:`_reserve` remembers its answers for the pass.
        """
        plans: list[tuple[float, frozenset[int]]] = []  # (planned start, nodes) per reservation
        self._reserved_for = {}  # this pass's reservations (_reserve)
        if reserve:
            self._reserve(sim, c, head, plans)
        gpus, version = sim.jobs.gpus, sim.version
        # the fit limit (Replay.fit_limit) and _room, for the cluster's version ``seen``: a
        # start, stop, expiry or retag changes them, and only those inside a pass
        seen, limit, room = None, 0, None
        tested = 0
        for p, first, qos in order:
            if version(c) != seen:
                seen, limit, room = version(c), sim.fit_limit(c), None
            if self.reserve_each and tested < self.bf_max_job_test:
                if read is None or read != (seen, self._budget_epoch):
                    read = None  # something started: ask again
                    first = sim.head(c, p)
                    qos = None if first is None else self.qos_of(sim, p, first)
                if first is not None and first != head:
                    tested += 1
                    if qos != BUDGET and gpus[first] > limit:  # it cannot start
                        if not self.min_prio_reserve:
                            self._reserve(sim, c, first, plans)
                    elif not self._try_start(
                            sim, c, p, first, qos, preempt=qos == BUDGET,
                            avoid=self._avoid(plans, sim.now + sim.requested_hours(first))
                    ) and (qos == BUDGET or not self.min_prio_reserve):
                        self._reserve(sim, c, first, plans)
            while tested < self.bf_max_job_test:
                if version(c) != seen:
                    seen, limit, room = version(c), sim.fit_limit(c), None
                if not limit:  # nothing fits (every job asks a GPU at least: the trace's rule)
                    break
                job = sim.head_fit(c, p, fits=limit.__ge__)
                if job is None:
                    break
                tested += 1
                avoid = self._avoid(plans, sim.now + sim.requested_hours(job))
                if avoid and sim.head_fit(c, p, avoid) != job:  # it must stay off nodes
                    everything = self._avoid(plans, math.inf)  # it cannot: the first
                    job = sim.head_fit(c, p, everything)  # that fits off every one
                    if job is None:
                        break
                    avoid = everything
                if not self._try_start(sim, c, p, job, self.qos_of(sim, p, job),
                                       preempt=False, avoid=avoid):
                    break
            if version(c) != seen:
                seen, limit, room = version(c), sim.fit_limit(c), None
            if room is None:
                room = self._room(sim, c)
            if not room or tested >= self.bf_max_job_test:
                return

    def _room(self, sim: EngineView, c: int) -> bool:
        """Whether backfill may still start a job.

        One fits, or (``reserve_each``) a budget job might requeue ``gp-opportunistic``
        work past its exempt time.
        """
        return sim.any_fits(c) or (self.reserve_each and sim.preemptible_gpus(c) > 0)

    @staticmethod
    def _avoid(plans: list[tuple[float, frozenset[int]]], end: float) -> frozenset[int]:
        """Nodes of the reservations planned to start before ``end``."""
        nodes = [held for start, held in plans if start < end - _EPS]
        if len(nodes) < 2:
            return nodes[0] if nodes else frozenset()
        return frozenset().union(*nodes)

    def _reserve(self, sim: EngineView, c: int, job: int, plans: list[tuple[float, frozenset[int]]]
                 ) -> None:
        """Backfill's reservation for a blocked job: when and where it will fit.

        With ``reserve_each`` the nodes already reserved for higher-priority jobs are left
        out, and a budget job counts ``gp-opportunistic`` work past its exempt time as
        freed now and exempt work as freed when its exemption ends (Slurm's will-run test
        counts preemptable jobs' resources as available); otherwise as ``fairtree``
        (:meth:`FairTreePolicy._reservation`). No reservation for a job expected to start
        beyond ``bf_window`` ("starts too far in the future to worry about").
        """
        if self.reserve_each:
            # the same job size, asker kind and reserved nodes at the same version: the same
            # answer (plans only grow in a pass, so their count names the nodes taken)
            read = (sim.version(c), self._kind(sim, job), sim.jobs.gpus[job], len(plans))
            known = self._reserved_for.get(read)
            if known is None:
                known = self._reserved_for[read] = self._reservation(
                    sim, c, job, self._avoid(plans, math.inf))
            shadow, held = known
        else:
            shadow, held = FairTreePolicy._reservation(sim, c, job)
        if shadow <= sim.now + self.bf_window + _EPS:
            plans.append((shadow, held))

    def _reservation(self, sim: EngineView, c: int, job: int, taken: frozenset[int]
                     ) -> tuple[float, frozenset[int]]:
        """``FairTreePolicy._reservation(sim, c, job, taken, self._freed_at(sim, job))``.

        The same nodes and time, from :meth:`_node_frees`' table: a running job frees its
        GPUs at max(its bound, now), so the jobs in (bound, job) order are in the plain
        order but for those whose bound has passed, which all free them now.
        """
        return reservation_from_ends(self._node_frees(sim, c, job), sim.jobs.gpus[job],
                                     sim.gpn[c], sim.now, taken)

    def _node_frees(self, sim: EngineView, c: int, job: int
                    ) -> list[tuple[int, int, list[tuple[float, int]]]]:
        """(node, free GPUs, [(bound, GPUs)]) per node of ``c``, its jobs by (bound, job).

        A running job frees its GPUs for ``job`` at max(bound, now) (:meth:`_freed_by`),
        the bound fixed for its run; the GPUs it frees on the node. Kept per kind of asker
        (a budget job, by the exempt times and the projects it takes back from, or any
        other job), recomputed only for the nodes whose jobs changed (:meth:`Replay.node_version`).
        """
        kind = self._kind(sim, job)
        version = sim.version(c)
        cached = self._frees_of.get((c, kind))
        if cached is not None and cached[0] == version:
            return cached[2]
        bound = self._freed_by(sim, job)
        gpn, gpus = sim.gpn[c], sim.jobs.gpus
        versions = sim.node_version(c)
        seen = cached[1] if cached is not None else [-1] * sim.nodes[c]
        table: list = list(cached[2]) if cached is not None else [None] * sim.nodes[c]
        for node, free, jobs in sim.nodes_on(c):
            if seen[node] != versions[node]:
                table[node] = (node, free, [(t, gpn if gpus[j] >= gpn else gpus[j])
                                            for t, j in sorted((bound(j), j) for j in jobs)])
        self._frees_of[c, kind] = (version, list(versions), table)
        return table

    def _kind(self, sim: EngineView, job: int) -> tuple | None:
        """What the running jobs' bounds depend on for ``job`` (:meth:`_freed_by`).

        A budget job's exempt times and the projects it takes back from; None for any
        other job (the jobs' limits alone).
        """
        p = sim.jobs.project[job]
        if self.qos_of(sim, p, job) != BUDGET:
            return None
        return (self.exempt_hours, self.budget_exempt, self.takes_back[p])

    def _freed_by(self, sim: EngineView, job: int):
        """:meth:`_freed_at` as max(bound(j), now): the bound of each running job ``j``.

        min(max(a, now), max(b, now)) is max(min(a, b), now), exactly (min and max pick).
        """
        p = sim.jobs.project[job]
        if self.qos_of(sim, p, job) != BUDGET:
            return sim.limit_end
        exempt, budget_exempt = self.exempt_hours, self.budget_exempt
        back = frozenset(self.takes_back[p])
        project = sim.jobs.project

        def bound(j: int) -> float:
            tag = sim.tag_of(j)
            if tag == OPPORTUNISTIC:
                return -math.inf
            if tag == EXEMPT:
                return min(sim.limit_end(j), sim.started_at(j) + exempt)
            if tag == BUDGET and project[j] in back:
                return min(sim.limit_end(j), sim.started_at(j) + budget_exempt)
            return sim.limit_end(j)

        return bound

    def _freed_at(self, sim: EngineView, job: int):
        """When a running job frees its GPUs for ``job``, by the jobs' limits.

        For a budget job (which may requeue them) ``gp-opportunistic`` work past its exempt
        time frees them now and exempt work when its exemption ends; so do the budget-QOS
        jobs of the projects it takes back from, past their QOS's exempt time.
        """
        p = sim.jobs.project[job]
        if self.qos_of(sim, p, job) != BUDGET:
            return sim.expected_end
        now, exempt = sim.now, self.exempt_hours
        back, budget_exempt = frozenset(self.takes_back[p]), self.budget_exempt
        project = sim.jobs.project

        def end(j: int) -> float:
            tag = sim.tag_of(j)
            if tag == OPPORTUNISTIC:
                return now
            if tag == EXEMPT:
                return min(sim.expected_end(j), max(sim.started_at(j) + exempt, now))
            if tag == BUDGET and project[j] in back:
                return min(sim.expected_end(j), max(sim.started_at(j) + budget_exempt, now))
            return sim.expected_end(j)

        return end
