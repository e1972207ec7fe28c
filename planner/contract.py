"""The executor contract: what a ``plan.json`` puts in force for an executor, written once.

Every executor of a plan reads it here — the Kueue exporter
(:func:`planner.exporters.kueue.project_quotas`), the Slurm exporter (budgets and
reservations), the executor view (:mod:`planner.exporters.executor_json`), ``planner
status`` and the simulator's ``planner`` executor
(:mod:`planner.simulate.planner_policy`) — so that none of them restates it.

At a moment ``t`` (or over a window ``[t, u)``, e.g. a period) a plan puts in force
(:func:`in_force`, an :class:`InForce`):

1. **Grants of the period holding t**, per (project, cluster) (:class:`Quota`): the plan's
   guaranteed and opportunistic GPUs (``allocations[].gpus`` of that period, as written)
   and, in whole GPUs — the executor enforces GPUs, and a fraction of one cannot be
   handed out — ``guaranteed`` = ⌊g⌋ and the opportunistic *headroom* ``opportunistic`` =
   ⌊g + o⌋ − ⌊g⌋ (so guaranteed + headroom = ⌊g + o⌋); ⌊·⌋ is :func:`floor_gpus`,
   tolerant of the plan's 1e-6 rounding. Guaranteed work runs within ⌊g⌋, charged to the
   budget, and is never preempted; opportunistic work runs beyond it up to ⌊g + o⌋,
   preemptible, reclaimed first.
2. **Reservations running at t** (or at some time in ``[t, u)``) (:class:`Reserved`):
   whole nodes of a cluster for one project from ``start`` to ``end``; their GPUs
   (nodes × GPUs a node) are the project's alone, lent to no one, never preempted.
3. **The protected minimum runtime**: a job of allocated work, once started, is not
   preempted before it has run min(its own min runtime, the plan's
   ``contract.min_runtime_cap_hours``) hours (:meth:`InForce.protected_hours`;
   ``--model default`` says 8 h, ``strict-budgets`` 4 h).
4. **What may preempt what** (:data:`PREEMPTS`, one table for every executor) among the
   job classes (:class:`JobClass`): reserved work is never preempted, guaranteed work
   only as rule 5 allows; guaranteed work (and the replay's paced work, which stands in
   for it until the next plan) takes GPUs back from unallocated, then fill, then
   opportunistic work (:data:`VICTIM_ORDER`); opportunistic work from unallocated and fill
   work only; fill and unallocated work preempt no one. Victims are taken class by class
   in that order; within a class, from the projects furthest ahead of their budget pace
   first; within a project, jobs that lose nothing (resumable) first, then those that
   have run least. A victim inside its protected runtime is never taken.
5. **Taking back from projects ahead of their pace** (:func:`ahead_of_pace`): a project
   is *ahead* when its usage at the plan's ``as_of`` exceeds its budget × the share of
   the quarter gone. Its guaranteed work is protected for the protected runtime (3), not
   for ever: once a job of it has run that long, guaranteed work of a project that is not
   ahead may take its GPUs back, after every class of rule 4 (the lookback fair share's
   "projects below their share preempt expired work of projects above it", in the
   plan's own terms). Reserved work is never taken. An executor may use the permission or
   not: the Slurm export does (each budget QOS of a project not ahead lists the budget
   QOS of the projects ahead in its ``Preempt``, every budget QOS has
   ``PreemptExemptTime`` = the protected runtime), and so does the Kueue export, in the
   one form Kueue has (a project ahead holds only its reserved GPUs as nominal quota, so
   its guaranteed work borrows and lenders reclaim it, at once: Kueue has no exempt
   time); the ``planner`` executor does not.
6. **Widening to the widest pending job** (:func:`widens`): a project that is not ahead
   of its pace and has budget left may hold, beyond its grant, the GPUs of its widest
   pending job, so that a job wider than the plan's pace for it (a gang of whole nodes
   in a project paced at less than a node) waits on its budget and gets its nodes,
   instead of never starting. Its budget still bounds what it spends. The Slurm export
   widens the budget QOS's pace cap (``GrpTRES``) to the account's widest pending job
   when its script runs; the Kueue export raises the project's nominal quota on a
   cluster to its widest pending gang there (from the Workloads ``planner cycle``
   ingests), out of the GPUs no project holds.
7. **Late arrivals** (the Kueue export; :func:`planner.exporters.kueue.keep_reserve` and
   :func:`planner.exporters.kueue.widen_late`): work that arrives after the plan finds no
   grant of its own. So the Kueue export keeps a node of each cluster of ten nodes or
   more out of every nominal quota (the pool Cohort holds it: lendable, never idle for
   it), cut from the largest guarantee without a reservation — the one exception to
   rule 1, by at most a node — and between cycles (hourly, ``planner export --late``) a
   project that may widen (rule 6) whose queue holds no nominal quota on a cluster gets
   its pending gang's GPUs there out of the pool, until the next cycle's set replaces
   them. Slurm needs no such rule: a budget QOS holds the quarter's GPU-minutes, not a
   day's GPUs.
8. **Lending to projects far past their pace** (:func:`overdrawn`): a project whose usage
   at the plan's ``as_of`` exceeds its budget × the share of the quarter gone by a whole
   budget more (twice its budget at the quarter's end) is *overdrawn*. It may still use
   GPUs nobody else can use (idle GPUs are better used), but only those, and only until
   someone else can: its work then yields at once, whatever its class or size. (A project
   merely past its budget keeps rule 5's treatment: the replays' weekly delivered ÷ owed
   still owes it its pace each week, and cutting it off at its budget measurably lost
   that.) The Kueue export puts its ClusterQueue directly in the pool Cohort with
   ``fairSharing.weight`` 0 (an infinite share at the root, so it loses every tournament
   and any other queue's pending workload preempts its borrowed work by Fair Sharing while
   it borrows anything more). Usage here is what the project *ran*: under Slurm the plan's
   ``used`` counts only what its budget QOS was charged, so what ran charged to no budget
   (``gp-opportunistic``, ``unbudgeted.csv``) is counted beside it
   (:func:`unbudgeted_ngh`). The Slurm export has a QOS below ``gp-opportunistic``,
   ``gp-overdrawn`` (priority 0, ``PreemptExemptTime`` 0, in every other ``Preempt``
   list), and ``planner tick`` moves an overdrawn account's pending work beyond its budget
   there (work its budget still admits stays: under Slurm an overdrawn project may have
   budget left, and that is its pace). Under Slurm the tick keeps its **pace**
   (:func:`pace_ngh`: budget ÷ the quarter's hours, NGH per hour) in ``gp-opportunistic``:
   while the account's running jobs run less than its pace, its pending work beyond its
   budget goes to ``gp-opportunistic`` (queue order, each job counted as it is kept) and
   only the rest to ``gp-overdrawn``. The replays owe every project its pace each week;
   Slurm's budget QOS holds a quarter's GPU-minutes, which an overdrawn project may have
   spent early, so without this its pace would run only on idle GPUs, and a project
   running at its pace stays about as far ahead of the line as it was. Kueue's
   usage counts every run, so there an overdrawn project has no budget left to pace.

Moments and period starts are ISO 8601 UTC strings as the plan writes them
(``2026-11-16T00:00:00Z``; they sort as times) or ``pandas.Timestamp``. A moment outside
the plan's periods raises ``ValueError``: the plan says nothing there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import pandas as pd

from planner.times import iso

EPS = 1e-6  # the plan writes GPUs rounded to 1e-6


class JobClass(StrEnum):
    """The class a running job holds its GPUs under (the simulator's tags are these)."""

    __hash__ = str.__hash__  # hashed as its value, at C speed (engine dict keys)

    RESERVED = "reserved"  # on a reservation's nodes: never preempted
    GUARANTEED = "guaranteed"  # within ⌊guaranteed⌋: charged, never preempted
    PACED = "paced"  # the replay's stand-in for guaranteed work the plan has not seen yet
    OPPORTUNISTIC = "opportunistic"  # within ⌊guaranteed + opportunistic⌋: preemptible
    FILL = "fill"  # allocated work in GPUs nobody is granted: preemptible
    UNALLOCATED = "unallocated"  # no protected runtime, no budget: preemptible at once


#: The order victims are taken in, by class: unallocated first, opportunistic last.
VICTIM_ORDER: tuple[JobClass, ...] = (JobClass.UNALLOCATED, JobClass.FILL,
                                      JobClass.OPPORTUNISTIC)

#: What each class may preempt, in the order victims are taken (module docstring, 4).
PREEMPTS: dict[JobClass, tuple[JobClass, ...]] = {
    JobClass.RESERVED: (),  # its nodes are its own: there is nothing on them to take
    JobClass.GUARANTEED: VICTIM_ORDER,
    JobClass.PACED: VICTIM_ORDER,
    JobClass.OPPORTUNISTIC: (JobClass.UNALLOCATED, JobClass.FILL),
    JobClass.FILL: (),
    JobClass.UNALLOCATED: (),
}

#: Classes never preempted once running (guaranteed work: but see rule 5, :func:`ahead_of_pace`).
NEVER_PREEMPTED: frozenset[JobClass] = frozenset(
    {JobClass.RESERVED, JobClass.GUARANTEED})


def may_preempt(attacker: JobClass, victim: JobClass) -> bool:
    """Whether work of class ``attacker`` may take GPUs from running ``victim`` work."""
    return victim in PREEMPTS[attacker]


def floor_gpus(gpus: float) -> int:
    """Whole GPUs, rounded down (tolerant of the plan's 1e-6 rounding)."""
    return max(0, math.floor(gpus + EPS))


@dataclass(frozen=True)
class Quota:
    """One (project, cluster)'s grants in force: the plan's GPUs and the whole ones."""

    project: str
    cluster: str
    guaranteed_gpus: float  # the plan's guaranteed GPUs of the period, as written
    opportunistic_gpus: float  # the plan's opportunistic GPUs of the period, as written

    @property
    def guaranteed(self) -> int:
        """Whole guaranteed GPUs: ⌊g⌋."""
        return floor_gpus(self.guaranteed_gpus)

    @property
    def total(self) -> int:
        """Whole GPUs guaranteed and opportunistic together: ⌊g + o⌋."""
        return floor_gpus(self.guaranteed_gpus + self.opportunistic_gpus)

    @property
    def opportunistic(self) -> int:
        """The opportunistic headroom in whole GPUs: ⌊g + o⌋ − ⌊g⌋."""
        return self.total - self.guaranteed


@dataclass(frozen=True)
class Reserved:
    """A reservation of the plan: whole nodes of a cluster for one project."""

    request_id: str
    project: str
    cluster: str
    nodes: int
    gpus: int  # nodes × the cluster's GPUs a node
    start: str  # ISO UTC
    end: str

    def running_at(self, moment: str) -> bool:
        """Whether it holds its nodes at ``moment`` (start ≤ moment < end)."""
        return self.start <= moment < self.end

    def overlaps(self, start: str, end: str) -> bool:
        """Whether it holds its nodes at some time in [start, end)."""
        return self.start < end and self.end > start


@dataclass(frozen=True)
class InForce:
    """What a plan puts in force over ``[start, end)`` (``start == end``: one moment)."""

    start: str  # ISO UTC
    end: str
    period_start: str  # the plan period whose grants are in force
    period_end: str
    min_runtime_cap_hours: float  # the plan's contract: the most protected runtime
    quotas: tuple[Quota, ...]  # sorted by (project, cluster); only cells the plan grants
    reservations: tuple[Reserved, ...]  # sorted by request_id

    def quota(self, project: str, cluster: str) -> Quota:
        """The (project, cluster) grants; all zero where the plan grants nothing."""
        for q in self.quotas:
            if q.project == project and q.cluster == cluster:
                return q
        return Quota(project, cluster, 0.0, 0.0)

    def reserved_gpus(self, project: str, cluster: str) -> int:
        """GPUs of the project's reservations in force on the cluster."""
        return sum(r.gpus for r in self.reservations
                   if r.project == project and r.cluster == cluster)

    def on(self, cluster: str) -> InForce:
        """The same, restricted to one cluster."""
        return InForce(self.start, self.end, self.period_start, self.period_end,
                       self.min_runtime_cap_hours,
                       tuple(q for q in self.quotas if q.cluster == cluster),
                       tuple(r for r in self.reservations if r.cluster == cluster))

    def terms(self, cluster: str | None = None) -> tuple[tuple[Quota, ...], tuple[Reserved, ...]]:
        """What an executor enforces (grants and reservations), for comparing moments."""
        view = self if cluster is None else self.on(cluster)
        return view.quotas, view.reservations

    def protected_hours(self, own: float) -> float:
        """A job's protected runtime: min(its own min runtime, the plan's cap)."""
        return min(own, self.min_runtime_cap_hours)


def _moment(at: str | pd.Timestamp) -> str:
    return iso(pd.Timestamp(at)) if isinstance(at, pd.Timestamp) else str(at)


def min_runtime_cap(plan: dict[str, Any]) -> float:
    """The plan's ``contract.min_runtime_cap_hours``."""
    return float(plan["contract"]["min_runtime_cap_hours"])


def preemptible_protection(plan: dict[str, Any]) -> float:
    """Hours opportunistic and fill work is protected once started.

    min(``min_runtime_cap_hours``, ``fill_slice_hours``) of the plan's contract (a plan
    written before the fill slice existed: the cap). The ``planner`` executor protects
    such a job for min(its own min runtime, this); Slurm's ``gp-opportunistic`` QOS
    carries it as ``PreemptExemptTime``; Kueue has no such protection.
    """
    terms = plan["contract"]
    cap = float(terms["min_runtime_cap_hours"])
    return min(cap, float(terms.get("fill_slice_hours", cap)))


def ahead_of_pace(plan: dict[str, Any]) -> frozenset[str]:
    """Projects ahead of their budget pace at the plan's ``as_of`` (rule 5).

    ``used`` > ``budget`` × (``as_of`` − ``quarter_start``) ÷ (``quarter_end`` −
    ``quarter_start``), the share clipped to [0, 1]: usage beyond what an even spend of
    the budget over the quarter would have used by now. (A project with no budget that
    used anything is ahead; one that used nothing never is.)
    """
    share = _quarter_gone(plan)
    return frozenset(b["project"] for b in plan["budgets"]
                     if float(b["used"]) > float(b["budget"]) * share + EPS)


def _quarter_gone(plan: dict[str, Any]) -> float:
    """The share of the quarter gone at the plan's ``as_of``, clipped to [0, 1]."""
    start, end, now = (pd.Timestamp(plan[k]) for k in ("quarter_start", "quarter_end", "as_of"))
    return min(1.0, max(0.0, (now - start) / (end - start))) if end > start else 1.0


def overdrawn(plan: dict[str, Any], unbudgeted: Mapping[str, float] | None = None,
              margin: float = 0.0) -> frozenset[str]:
    """Projects a whole budget ahead of their pace at the plan's ``as_of`` (rule 8).

    ``margin``: that much of the budget further ahead still (the line the Slurm export's
    pace stops at, :attr:`planner.exporters.slurm.SlurmExport.pace_margin`).

    What the project *ran* ≥ ``budget`` × (1 + the share of the quarter gone), the share
    as in :func:`ahead_of_pace`: usage beyond an even spend of the budget by now plus the
    whole budget again (at the quarter's end, twice the budget). What it ran is ``used``
    (charged to its budget) plus ``unbudgeted``'s NGH for it: what it ran in the quarter
    up to ``as_of`` charged to no budget, where the executor's accounting keeps that
    apart (Slurm's ``gp-opportunistic`` and ``gp-overdrawn`` jobs,
    :func:`unbudgeted_ngh`; Kueue's usage counts every run in ``used``). A project with no
    budget is overdrawn (what it ran, even nothing, is twice nothing); none for a plan
    without budgets (a hand-written one).
    """
    if not plan.get("budgets"):
        return frozenset()
    share = _quarter_gone(plan)
    extra = unbudgeted or {}
    return frozenset(b["project"] for b in plan["budgets"]
                     if float(b["used"]) + float(extra.get(b["project"], 0.0))
                     >= float(b["budget"]) * (1.0 + margin + share) - EPS)


def pace_ngh(plan: dict[str, Any]) -> dict[str, float]:
    """Project -> its budget pace, NGH per hour: ``budget`` ÷ the quarter's hours.

    What an even spend of the budget runs every hour of the quarter (rule 8 under Slurm:
    what an overdrawn project keeps in ``gp-opportunistic``); none for a plan without
    budgets or with an empty quarter.
    """
    start, end = (pd.Timestamp(plan[k]) for k in ("quarter_start", "quarter_end"))
    hours = (end - start) / pd.Timedelta(hours=1)
    if hours <= 0:
        return {}
    return {b["project"]: float(b["budget"]) / hours for b in plan.get("budgets", [])}


def cluster_rates(plan: dict[str, Any]) -> dict[str, float]:
    """Cluster (a Slurm partition) -> its NGH per GPU-hour, as the plan gives it."""
    return {c["cluster"]: float(c["rate"]) for c in plan.get("clusters", [])}


def unbudgeted_ngh(plan: dict[str, Any], usage: pd.DataFrame) -> dict[str, float]:
    """Project -> NGH its ``usage`` rows ran in the quarter up to the plan's ``as_of``.

    ``usage``: rows in ``usage.csv``'s columns (``project``, ``cluster``, ``gpus``,
    ``start``, ``end``), e.g. a scenario's ``unbudgeted.csv``
    (:func:`planner.inputs.load.load_unbudgeted`); each row's GPUs × its hours inside
    [``quarter_start``, ``as_of``) × its cluster's NGH rate. Rows of clusters the plan
    does not know add nothing.
    """
    rate = cluster_rates(plan)
    lo, hi = pd.Timestamp(plan["quarter_start"]), pd.Timestamp(plan["as_of"])
    out: dict[str, float] = {}
    for row in usage.itertuples(index=False):
        if row.cluster not in rate:
            continue
        start, end = max(pd.Timestamp(row.start), lo), min(pd.Timestamp(row.end), hi)
        hours = (end - start) / pd.Timedelta(hours=1)
        if hours > 0:
            out[row.project] = out.get(row.project, 0.0) + float(row.gpus) * hours * rate[
                row.cluster]
    return out


def widens(plan: dict[str, Any]) -> frozenset[str]:
    """Projects that may hold their widest pending job beyond their grant (rule 6).

    Those with budget left at the plan's ``as_of`` (``used`` < ``budget``) and not
    :func:`ahead_of_pace`; none for a plan without budgets (a hand-written one).
    """
    if not plan.get("budgets"):
        return frozenset()
    ahead = ahead_of_pace(plan)
    return frozenset(b["project"] for b in plan["budgets"]
                     if float(b["budget"]) - float(b["used"]) > EPS
                     and b["project"] not in ahead)


def fair_share_half_life(plan: dict[str, Any]) -> float | None:
    """The plan's ``contract.fair_share_half_life_hours``, or None.

    None: no lookback, or a plan written before the field existed. An executor whose
    fair share decays past usage (Slurm's ``PriorityDecayHalfLife``) decays it with this
    half-life, so that it forgets usage as the plan's lookback does.
    """
    half = plan.get("contract", {}).get("fair_share_half_life_hours")
    return None if half is None else float(half)


def reservations(plan: dict[str, Any]) -> tuple[Reserved, ...]:
    """Every reservation of the plan, typed, in the plan's order."""
    gpn = {c["cluster"]: int(c["gpus_per_node"]) for c in plan.get("clusters", [])}
    return tuple(Reserved(str(r["request_id"]), r["project"], r["cluster"], int(r["nodes"]),
                          int(r["nodes"]) * gpn[r["cluster"]], r["start"], r["end"])
                 for r in plan["reservations"])


def period_index(plan: dict[str, Any], at: str | pd.Timestamp) -> int:
    """The index of the plan period holding ``at``; ``ValueError`` outside the plan."""
    moment = _moment(at)
    for t, p in enumerate(plan["periods"]):
        if p["start"] <= moment < p["end"]:
            return t
    raise ValueError(f"{moment} is outside the plan's periods")


def _quotas(plan: dict[str, Any], period_start: str) -> tuple[Quota, ...]:
    cells: dict[tuple[str, str], list[float]] = {}
    for a in plan["allocations"]:
        if a["period_start"] == period_start:
            cell = cells.setdefault((a["project"], a["cluster"]), [0.0, 0.0])
            cell[0 if a["kind"] == JobClass.GUARANTEED else 1] += float(a["gpus"])
    return tuple(Quota(p, c, g, o) for (p, c), (g, o) in sorted(cells.items()))


def in_force(plan: dict[str, Any], at: str | pd.Timestamp,
             until: str | pd.Timestamp | None = None,
             _all: tuple[Reserved, ...] | None = None) -> InForce:
    """What ``plan`` puts in force at ``at`` (over ``[at, until)`` with ``until``).

    The grants are those of the period holding ``at``; the reservations those running at
    ``at`` (at some time in ``[at, until)`` with ``until``). For a whole period give its
    start and end.
    """
    t = period_index(plan, at)
    period = plan["periods"][t]
    start = _moment(at)
    end = start if until is None else _moment(until)
    every = reservations(plan) if _all is None else _all
    held = (r for r in every if (r.running_at(start) if until is None
                                 else r.overlaps(start, end)))
    return InForce(start, end, period["start"], period["end"], min_runtime_cap(plan),
                   _quotas(plan, period["start"]),
                   tuple(sorted(held, key=lambda r: r.request_id)))


def timeline(plan: dict[str, Any], periods: int | None = None) -> list[InForce]:
    """:func:`in_force` over each of the plan's periods (the first ``periods``)."""
    every = reservations(plan)
    chosen = plan["periods"] if periods is None else plan["periods"][:max(1, periods)]
    return [in_force(plan, p["start"], p["end"], every) for p in chosen]


def next_change(views: Sequence[InForce], index: int, cluster: str | None = None
                ) -> str | None:
    """The start of the first view after ``views[index]`` whose terms differ (on ``cluster``).

    ``views`` is a :func:`timeline`; None when nothing changes until its end.
    """
    now = views[index].terms(cluster)
    return next((v.start for v in views[index + 1:] if v.terms(cluster) != now), None)


def planned_guaranteed(plan: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """Project -> (GPU-hours, NGH) of guaranteed work the plan charges from its ``as_of``.

    Guaranteed grants of every period plus the reservations from max(start, as_of) to
    their end: what counts against the budget left (the Slurm budget QOS is this).
    """
    rate = {c["cluster"]: c["rate"] for c in plan.get("clusters", [])}
    gpn = {c["cluster"]: c["gpus_per_node"] for c in plan.get("clusters", [])}
    raw: dict[str, float] = {}
    ngh: dict[str, float] = {}
    for a in plan["allocations"]:
        if a["kind"] == JobClass.GUARANTEED:
            raw[a["project"]] = raw.get(a["project"], 0.0) + a["gpu_hours"]
            ngh[a["project"]] = ngh.get(a["project"], 0.0) + a["gpu_hours"] * rate[a["cluster"]]
    as_of = pd.Timestamp(plan["as_of"])
    for r in plan["reservations"]:
        start = max(pd.Timestamp(r["start"]), as_of)
        hours = (pd.Timestamp(r["end"]) - start).total_seconds() / 3600
        gpu_hours = r["nodes"] * gpn[r["cluster"]] * hours
        raw[r["project"]] = raw.get(r["project"], 0.0) + gpu_hours
        ngh[r["project"]] = ngh.get(r["project"], 0.0) + gpu_hours * rate[r["cluster"]]
    return {p: (raw[p], ngh[p]) for p in raw}
