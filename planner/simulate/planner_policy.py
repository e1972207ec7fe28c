"""``planner``: ours — the rolling replan, enforced by an ideal executor of our own.

The replan is the :class:`~planner.simulate.replanner.Replanner`'s (its module docstring
says what each replan sees); :class:`PlannerPolicy` is that replanner holding an
:class:`IdealExecutor`, which enforces each plan directly, as no real scheduler does.

It enforces the plan's first period on every cluster:

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
from collections.abc import Mapping
from collections.abc import Set as AbstractSet

import numpy as np
import pandas as pd

from planner.config import ModelConfig
from planner.contract import PREEMPTS, JobClass, in_force, preemptible_protection
from planner.demand import QueuedJob
from planner.fairshare import water_fill
from planner.simulate.executor import EngineView
from planner.simulate.policies import AdmissionPolicy
from planner.simulate.replanner import SEES, DemandSource, Replanner

__all__ = ["SEES", "DemandSource", "IdealExecutor", "PlannerPolicy", "allocated_first"]

GUARANTEED, PACED, OPPORTUNISTIC, FILL, UNALLOCATED, RESERVED = (
    JobClass.GUARANTEED, JobClass.PACED, JobClass.OPPORTUNISTIC, JobClass.FILL,
    JobClass.UNALLOCATED, JobClass.RESERVED)
_HOUR = pd.Timedelta(hours=1)


def allocated_first(sim: EngineView, job: int) -> tuple:
    """Allocated work before unallocated, then submit order: a job's key in its queue."""
    return (0 if sim.jobs.allocated[job] else 1, sim.jobs.submit[job], job)


class PlannerPolicy(Replanner):
    """``planner``: the replanner holding an :class:`IdealExecutor`."""

    def __init__(self, model: ModelConfig | None = None, check_every: int = 30,
                 gang_wait_hours: float | None = math.inf, gang_slack_periods: int = 7,
                 age_hours: float = 48.0, demand: DemandSource | None = None) -> None:
        super().__init__(IdealExecutor(age_hours), model=model, check_every=check_every,
                         gang_wait_hours=gang_wait_hours,
                         gang_slack_periods=gang_slack_periods, demand=demand)


class IdealExecutor(AdmissionPolicy):
    """The ``planner`` policy's executor: the plan enforced directly (module docstring)."""

    name = "planner"

    def __init__(self, age_hours: float = 48.0) -> None:
        self.age_hours = age_hours

    def job_key(self, sim: EngineView, job: int) -> tuple:
        """Allocated work before unallocated, then submit order."""
        return allocated_first(sim, job)

    def begin(self, sim: EngineView, model: ModelConfig) -> None:
        """Once, before the replay: nothing in force before the first plan; the budget paces."""
        scenario = sim.scenario
        n_p, n_k = len(sim.projects), len(sim.cluster_ids)
        self.guaranteed = np.zeros((n_p, n_k))  # whole GPUs in force: ⌊g⌋
        self.opportunistic = np.zeros((n_p, n_k))  # whole headroom: ⌊g + o⌋ − ⌊g⌋
        self.planned = np.zeros((n_p, n_k))  # the plan's guaranteed GPUs as written (rank)
        self.reserved = np.zeros((n_p, n_k))  # GPUs of reservations in force
        self.budget = scenario.arrays.budget
        self.rate = np.array(sim.rate)
        self.pace = self.budget / sim.hours  # NGH per hour
        self.entitlement = self.pace.copy()  # paced work's cap, NGH per hour (2)
        self.capacity_ngh = float(np.array(sim.capacity) @ self.rate)
        self.fill_slice = float(model.contract.fill_slice_hours)

    def before_replan(self, sim: EngineView, now: float) -> None:
        """Every hour the paced entitlement (2)."""
        # (2): the whole capacity (NGH per hour) water-filled over the projects'
        # outstanding allocated work, weighted by budget pace; never below min(pace, demand)
        demand = np.where(self.pace > 0, sim.outstanding @ self.rate, 0.0)  # no budget, none
        shared = water_fill(self.capacity_ngh, demand, np.maximum(self.pace, 1e-12))
        self.entitlement = np.maximum(shared, np.minimum(self.pace, demand))

    def after_replan(self, sim: EngineView, now: float, replanned: bool) -> bool:
        """Every cluster scheduled again after a replan (its re-classing), only then."""
        return replanned

    def booked(self, sim: EngineView) -> np.ndarray:
        """(P, K, H) GPU-hours the executor's accounting reports: everything that ran."""
        return sim.used

    def read_back(self, sim: EngineView, asked: AbstractSet[int], as_of: pd.Timestamp,
                  hours_left) -> list[QueuedJob]:
        """The queue rendered as an executor prints it and read back (``via_text``).

        The ideal executor prints nothing: the replays of a real one render their queues.
        """
        raise ValueError(f"{self.name}: via_text needs an executor's replay "
                         "(planner-slurm or planner-kueue)")

    # -- wide jobs: holds, drains ------------------------------------------------------------

    def hold_reservations(self, sim: EngineView, body: dict,
                          request_job: Mapping[str, int]) -> None:
        """The plan's reservations become engine holds of their jobs' nodes.

        ``request_job``: the job each request of the replan was asked for.
        """
        start0 = sim.scenario.config.quarter_start
        drained: dict[int, tuple[int, ...]] = {}
        for hid in list(sim.holds):
            hold = sim.holds[hid]
            if sim.is_waiting(hold.job):  # still waiting: replaced by the new plan's
                drained[hold.job] = hold.nodes if hold.active else ()
                sim.release_hold(hid)
        for r in sorted(body["reservations"], key=lambda r: (r["start"], r["request_id"])):
            job = request_job.get(r["request_id"])
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

    def apply_first_period(self, sim: EngineView, body: dict, first: str) -> None:
        """What the plan puts in force at ``first``, read through the executor contract."""
        self.fill_slice = preemptible_protection(body)
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
