"""The event-driven replay: clusters of nodes, queues, starts, preemptions, run segments.

Time is in hours from the scenario's ``quarter_start``; the replay ends at
``quarter_end`` (running jobs are cut there, waiting ones stay unstarted).

Events, taken from one heap (completions and min-runtime expiries), the trace
(submits, already sorted) and the hourly clock, all at one instant batched:

1. completions and expiries at ``now`` (a stale event, whose job was preempted
   since, is skipped by its ``epoch``);
2. submits at ``now`` join their cluster's queues;
3. on a whole hour, running work is booked into the hourly usage table and the
   policy's :meth:`~planner.simulate.policies.Policy.refresh` runs (shares,
   Fair Tree ranks, the planner's replan at period boundaries);
4. every cluster touched by 1–3 that has waiting work is handed to the policy's
   :meth:`~planner.simulate.policies.Policy.schedule`, which starts and preempts
   jobs through :meth:`Replay.start` and :meth:`Replay.preempt_for`.

Placement, per cluster of ``nodes`` × ``gpus_per_node`` (G) GPUs:

- a job of g ≥ G GPUs is a gang: it takes ⌈g / G⌉ whole free nodes (lowest
  numbered first) and holds every GPU on them;
- a smaller job goes best-fit onto one node: the node with the fewest free GPUs
  that still has g (lowest numbered among equals).

Nodes are kept in buckets by free GPUs, so "does a job of g fit?" costs O(G).

Preemption: a running job may be preempted only from ``protected_until`` =
start + its protected runtime: min(its min runtime, the contract's
``min_runtime_cap_hours``), or less where the policy says so at the start (a fill
slice). The cap enters here and nowhere else: ``Replay(..., cap_hours=)``, by default the
contract of the policy's model (:func:`contract_cap`: the plans of a ``planner`` policy
carry that contract), else the default contract's 8 h; the trace keeps what each job
asks; unallocated work, min runtime 0, at any time; under a policy whose
``protects_min_runtime`` is False (``planner-kueue``: Kueue has no such protection)
every job may be preempted at any time. A
resumable job is re-queued with its remaining work; a non-resumable one
restarts from zero, and the GPU-hours it had run are counted as lost. Every run
segment (job, start, end, GPUs, how it ended, the policy's tag) is recorded.

Policies read the replay through its methods (:meth:`Replay.is_waiting`,
:meth:`Replay.work_left`, :meth:`Replay.running_jobs`, :meth:`Replay.outstanding_jobs`,
…), not its per-job lists; a job's state is a :class:`JobState`, the ``planner``
executor's tags are :class:`planner.contract.JobClass` members (text, as every tag).
Holds (:meth:`Replay.hold_nodes`): a policy may hold whole nodes of a cluster for
one project's gang job over [start, end), e.g. a reservation its plan placed. From
``start`` the held nodes take no new work but that job (:meth:`Replay.fits` and
placement skip them); before ``start`` a job whose requested time would overrun the
hold goes elsewhere when it can (a preference, not a block: nothing waits for a hold
that has not begun). The policy drains the nodes (:meth:`Replay.clear_nodes`
preempts the expired jobs of the groups it names, only when that empties them) and
starts the job on them
(``start(job, tag, nodes=hold.nodes)``); a hold ends when its job starts (anywhere),
or at ``end``, or when the policy releases it. Holds never change capacity: a held
node is only kept free, so no node is ever over capacity and no work is lost by it.

Victim order (the engine's rule, the same for every policy): the policy names
victim groups (project, tag) in its order of preference; within a group
resumable jobs go first (they lose nothing; most recently expired first), then
non-resumable ones with the least run time (most recently started) first. Each
group keeps the two kinds in separate containers (:class:`VictimGroup`), so a
reclaim scans them in this order without sorting anything.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Final, Literal

import numpy as np
import pandas as pd

from planner.config import ContractTerms
from planner.fairshare import OrgTree
from planner.inputs import Scenario
from planner.simulate.trace import time_limits

DONE, PREEMPTED, CUT = "done", "preempted", "cut"
_EPS = 1e-9
class _Stale(Enum):
    """The one value of :data:`_STALE` (a sentinel a type checker can narrow)."""

    STALE = 0


_STALE: Final = _Stale.STALE  # a ProjectQueue's first job is not known (one left): look again


class JobState(IntEnum):
    """Where a job of the trace is in the replay."""

    FUTURE = 0  # not submitted yet
    WAITING = 1  # in its cluster's queue
    RUNNING = 2  # holding GPUs
    DONE = 3  # finished


# module-level aliases: the event loop compares states millions of times
_FUTURE, _WAITING, _RUNNING, _DONE = (JobState.FUTURE, JobState.WAITING, JobState.RUNNING,
                                      JobState.DONE)


@dataclass(frozen=True)
class Segment:
    """One stretch a job ran without interruption."""

    job: int  # row of the trace
    cluster: int
    project: int
    start: float  # hours from quarter start
    end: float
    gpus: int  # GPUs the job uses
    held: int  # GPUs it holds (whole nodes for a gang)
    ended: str  # DONE, PREEMPTED or CUT (quarter end)
    tag: str  # the policy's class of the run (e.g. "guaranteed", "borrowed")
    nodes: tuple[int, ...] = ()  # nodes held (whole for a gang)
    protected: float = 0.0  # hours from start inside which it could not be preempted


@dataclass
class Hold:
    """Whole nodes of one cluster held for one project's gang job over [start, end)."""

    cluster: int
    project: int
    nodes: tuple[int, ...]
    start: float  # hours from quarter start
    end: float
    job: int  # the gang job the nodes are held for
    active: bool = False  # start has passed: the nodes take no other new work


@dataclass(frozen=True)
class ReplayResult:
    """What a replay produced: the jobs' fates and every run segment."""

    policy: str
    hours: float  # quarter length
    segments: tuple[Segment, ...]
    first_start: np.ndarray  # (J,) hours, NaN if never started
    finish: np.ndarray  # (J,) hours, NaN if not finished by quarter end
    preemptions: np.ndarray  # (J,) times each job was preempted
    lost_gpu_hours: np.ndarray  # (J,) GPU-hours thrown away by non-resumable restarts
    protected_violations: int  # preemptions inside a min runtime (always 0; checked)
    replans: int  # planner policy: plans made
    plan_seconds: float  # planner policy: time spent planning


class Jobs:
    """The trace as plain Python lists (fast scalar access in the event loop)."""

    def __init__(self, trace: pd.DataFrame, scenario: Scenario, tree: OrgTree,
                 cluster_index: dict[str, int]):
        start = scenario.config.quarter_start
        projects = tree.leaf_index
        unknown = sorted(set(trace["project"]) - set(projects))
        if unknown:
            raise ValueError(f"trace projects not in the org tree: {unknown[:5]}")
        bad = sorted(set(trace["cluster"]) - set(cluster_index))
        if bad:
            raise ValueError(f"trace clusters not in the scenario: {bad[:5]}")
        submit = ((trace["submit"] - start) / pd.Timedelta(hours=1)).to_numpy(dtype=float)
        self.n = len(trace)
        self.ids: list[str] = [str(x) for x in trace["job_id"]]
        self.project: list[int] = [projects[p] for p in trace["project"]]
        self.cluster: list[int] = [cluster_index[c] for c in trace["cluster"]]
        self.submit: list[float] = np.maximum(submit, 0.0).tolist()
        self.gpus: list[int] = trace["gpus"].astype(int).tolist()
        self.duration: list[float] = trace["duration_hours"].astype(float).tolist()
        self.min_runtime: list[float] = trace["min_runtime_hours"].astype(float).tolist()
        self.resumable: list[bool] = trace["resumable"].astype(bool).tolist()
        #: requested time limits (what a backfilling scheduler plans with), hours
        self.time_limit: list[float] = time_limits(trace).tolist()
        self.allocated: list[bool] = [m > 0 for m in self.min_runtime]


class ProjectQueue:
    """One project's waiting jobs on one cluster, in buckets by GPU count.

    Each bucket is a heap of (key, job); the key is the policy's order within
    the project (submit order by default), so the earliest job of any size that
    fits is found in O(number of sizes).
    """

    __slots__ = ("_head", "buckets", "count")

    def __init__(self) -> None:
        self.buckets: dict[int, list[tuple]] = {}
        self.count = 0
        #: (first entry, its size) while known; _STALE after a removal (found again on demand)
        self._head: tuple[tuple[tuple, int], int] | None | Literal[_Stale.STALE] = None

    def push(self, key: tuple, job: int, gpus: int) -> bool:
        """Add a waiting job; False when the queue's first job stays the same."""
        entry = (key, job)
        heapq.heappush(self.buckets.setdefault(gpus, []), entry)
        self.count += 1
        head = self._head
        if head is _STALE:
            return True  # not known: it may have changed
        if head is None or entry < head[0]:
            self._head = (entry, gpus)
            return True
        return False

    def _first(self) -> tuple[tuple[tuple, int], int] | None:
        """(first entry by key, its size), remembered until a job leaves the queue."""
        head = self._head
        if head is _STALE:
            head = None
            for size, heap in self.buckets.items():
                if heap and (head is None or heap[0] < head[0]):
                    head = (heap[0], size)
            self._head = head
        return head

    def head(self) -> tuple[tuple, int] | None:
        """The first waiting job by key, whatever its size."""
        head = self._first()
        return None if head is None else head[0]

    def head_fit(self, fits) -> tuple[tuple, int] | None:
        """The first waiting job by key among the sizes for which ``fits(size)``."""
        head = self._first()
        if head is None:
            return None
        if fits(head[1]):  # the first of all fits: it is the first that fits
            return head[0]
        best = None
        for size, heap in self.buckets.items():
            if heap and (best is None or heap[0] < best) and fits(size):
                best = heap[0]
        return best

    def head_in(self, sizes: set[int] | dict[int, object]) -> int | None:
        """The first waiting job by key among the sizes in ``sizes`` (:meth:`head_fit`)."""
        head = self._head
        if head is _STALE:
            head = self._first()
        if head is None:
            return None
        if head[1] in sizes:
            return head[0][1]
        best = None
        for size, heap in self.buckets.items():
            if heap and size in sizes and (best is None or heap[0] < best):
                best = heap[0]
        return None if best is None else best[1]

    def jobs(self) -> Iterable[int]:
        """Every waiting job of the queue (no order)."""
        for heap in self.buckets.values():
            for _, job in heap:
                yield job

    def remove_head(self, gpus: int) -> None:
        """Drop the first job of the ``gpus`` bucket (it was just started)."""
        heapq.heappop(self.buckets[gpus])
        self.count -= 1
        self._head = _STALE

    def remove(self, key: tuple, job: int, gpus: int) -> None:
        """Drop a job that is not the first of its bucket (a policy picked a later one)."""
        self.buckets[gpus].remove((key, job))
        heapq.heapify(self.buckets[gpus])
        self.count -= 1
        self._head = _STALE


class VictimGroup:
    """One (project, tag) group's running jobs past their min runtime, on one cluster.

    Resumable jobs (they lose nothing if preempted) in expiry order; non-resumable
    ones sorted by (run start, job), so the one that has run least is last. Victims
    are offered resumable first, most recently expired first, then non-resumable,
    most recently started first.
    """

    __slots__ = ("held", "resumable", "restart", "total")

    def __init__(self) -> None:
        self.held: dict[int, int] = {}  # job → GPUs it holds (every member)
        self.resumable: dict[int, None] = {}  # in expiry order
        self.restart: list[tuple[float, int]] = []  # (run start, job), sorted
        self.total = 0  # GPUs the group holds

    def __bool__(self) -> bool:
        return bool(self.held)

    def __contains__(self, job: int) -> bool:
        return job in self.held

    def add(self, job: int, held: int, resumable: bool, started: float) -> None:
        """Add a job that just passed its min runtime (or was retagged into the group)."""
        self.held[job] = held
        self.total += held
        if resumable:
            self.resumable[job] = None
        else:
            bisect.insort(self.restart, (started, job))

    def remove(self, job: int, resumable: bool, started: float) -> int:
        """Drop a member; returns the GPUs it held."""
        held = self.held.pop(job)
        self.total -= held
        if resumable:
            del self.resumable[job]
        else:
            i = bisect.bisect_left(self.restart, (started, job))
            del self.restart[i]
        return held

    def order(self) -> Iterable[int]:
        """Members in the order victims are taken (see the class docstring)."""
        yield from reversed(self.resumable)
        for _, job in reversed(self.restart):
            yield job


#: The default contract's cap on a job's protected runtime (``min_runtime_cap_hours``), h.
DEFAULT_CAP_HOURS = ContractTerms().min_runtime_cap_hours


def contract_cap(policy, cap_hours: float | None = None) -> float:
    """The protected-runtime cap a replay of ``policy`` runs under, given once.

    ``cap_hours`` when given, else the contract of the policy's planning model (a
    ``planner`` policy: its plans carry that contract), else the default contract's.
    Raises ValueError for a cap ≤ 0 or one that disagrees with the policy's model (its
    plans would protect by another contract than the replay).
    """
    model = getattr(policy, "model", None)
    own = None if model is None else float(model.contract.min_runtime_cap_hours)
    cap = cap_hours if cap_hours is not None else own if own is not None else DEFAULT_CAP_HOURS
    if not cap > 0:
        raise ValueError(f"cap_hours must be > 0, got {cap}")
    if own is not None and cap != own:
        raise ValueError(f"cap_hours {cap:g} disagrees with the policy's model, whose "
                         f"contract caps protected runtime at {own:g} h")
    return float(cap)


class Replay:
    """The mutable state of one replay; policies act through its methods.

    ``cap_hours``: the contract's ``min_runtime_cap_hours`` (:func:`contract_cap`).
    """

    def __init__(self, scenario: Scenario, trace: pd.DataFrame, policy,
                 cap_hours: float | None = None) -> None:
        cfg = scenario.config
        self.scenario = scenario
        self.policy = policy
        #: whether min runtimes protect running jobs (False: a scheduler that cannot express
        #: them, e.g. Kueue, may preempt any job it is allowed to at once)
        self.protects = getattr(policy, "protects_min_runtime", True)
        self.tree = scenario.tree
        arrays = scenario.arrays
        self.cluster_ids: list[str] = list(arrays.clusters)
        self.cluster_index = dict(arrays.cluster_index)
        # lists, not arrays: the event loop reads them one element at a time
        self.gpn: list[int] = arrays.gpus_per_node.tolist()
        self.nodes: list[int] = arrays.nodes.tolist()
        self.capacity: list[int] = arrays.gpus.tolist()
        self.rate: list[float] = arrays.rate.tolist()
        self.hours = (cfg.quarter_end - cfg.quarter_start) / pd.Timedelta(hours=1)
        self.n_hours = int(math.ceil(self.hours - _EPS))
        self.projects = self.tree.leaves
        n_p, n_k = len(self.projects), len(self.cluster_ids)
        self.jobs = Jobs(trace, scenario, self.tree, self.cluster_index)
        jobs = self.jobs
        # per-job state
        self.remaining: list[float] = list(jobs.duration)
        self.state: list[JobState] = [_FUTURE] * jobs.n
        #: protected runtime each job gets when it starts: min(its own min runtime, the
        #: contract's cap), unless its policy says less (:meth:`protection`)
        self.protect_cap = contract_cap(policy, cap_hours)
        self.protect: list[float] = [min(m, self.protect_cap) for m in jobs.min_runtime]
        self.first_start = [math.nan] * jobs.n
        self.finish = [math.nan] * jobs.n
        self.run_start = [0.0] * jobs.n
        self.protected_until = [0.0] * jobs.n
        self.booked_to = [0.0] * jobs.n  # usage booked into the hourly table up to here
        self.epoch = [0] * jobs.n
        self.placed: list[tuple[int, ...]] = [()] * jobs.n  # nodes held
        self.tag: list[str] = [""] * jobs.n
        self.key: list[tuple] = [()] * jobs.n
        self.preemptions = [0] * jobs.n
        self.lost = [0.0] * jobs.n
        self.segments: list[Segment] = []
        self.protected_violations = 0
        # per-cluster state
        self.free = [[g] * n for n, g in zip(self.nodes, self.gpn, strict=True)]
        self.node_jobs: list[list[dict[int, None]]] = [[{} for _ in range(n)]
                                                        for n in self.nodes]
        self.buckets: list[list[set[int]]] = [
            [set() for _ in range(g)] + [set(range(n))] for n, g in zip(self.nodes, self.gpn,
                                                                      strict=True)]
        self.free_total = list(self.capacity)
        #: per cluster, the most free GPUs on any one node (a job of fewer than a node's
        #: GPUs fits, holds aside, iff it needs no more): kept by :meth:`_take` and :meth:`_give`
        self.top_free: list[int] = list(self.gpn)
        #: per cluster and node, bumped by every start, stop and retag of a job on it
        self.node_versions = [[0] * n for n in self.nodes]
        self.queues: list[dict[int, ProjectQueue]] = [{} for _ in range(n_k)]
        self.waiting_sizes: list[dict[int, int]] = [{} for _ in range(n_k)]
        #: per cluster, size → {project: its queue's bucket of that size} for the buckets
        #: with waiting jobs (:meth:`heads_in` walks only the projects with a size asked)
        self.size_queues: list[dict[int, dict[int, list[tuple]]]] = [{} for _ in range(n_k)]
        #: per cluster, project → its first waiting job by key, for :meth:`heads`; the
        #: projects a job left the queue of since are looked up again on the next ask
        self.first_jobs: list[dict[int, int]] = [{} for _ in range(n_k)]
        self._first_stale: list[set[int]] = [set() for _ in range(n_k)]
        self.n_waiting = [0] * n_k
        self.running: list[dict[int, None]] = [{} for _ in range(n_k)]
        # GPUs held per (project, tag) on each cluster, and per project
        self.held_by: list[dict[tuple[int, str], int]] = [{} for _ in range(n_k)]
        self.held_project = np.zeros((n_p, n_k), dtype=np.int64)
        self.held_ngh = [0.0] * n_p  # NGH per hour of everything p runs, all clusters
        # GPUs held per tag on each cluster, as (P,) arrays (for vectorised policy checks)
        self.held_tag: list[dict[str, np.ndarray]] = [{} for _ in range(n_k)]
        # running jobs past their min runtime, per cluster → (project, tag) → victim group
        self.expired: list[dict[tuple[int, str], VictimGroup]] = [{} for _ in range(n_k)]
        self.expired_held = [0] * n_k
        #: per cluster, the (project, tag) keys of the groups that have members now
        self.expired_live: list[set[tuple[int, str]]] = [set() for _ in range(n_k)]
        #: per cluster, bumped by every start, stop, expiry and retag on it: equal versions
        #: mean the same running jobs, tags, victim groups and free GPUs (:meth:`version`)
        self.versions = [0] * n_k
        #: per cluster, bumped whenever a project's first waiting job on it may change (a
        #: job joins a queue ahead of the first, or leaves one): :meth:`queue_version`
        self.queue_versions = [0] * n_k
        #: per cluster, (version, the preempt_for asks that found no room at that version)
        self._no_room: list[tuple[int, set]] = [(-1, set())] * n_k
        #: the same per (cluster, project): bumped by the changes to that project's jobs
        self.project_versions = [[0] * n_p for _ in range(n_k)]
        #: per cluster, (version, its running jobs in :meth:`running_jobs`' order)
        self._running_order: list[tuple[int, list[int]]] = [(-1, [])] * n_k
        # outstanding (waiting or running) GPUs per project and cluster, allocated jobs only
        self.outstanding = np.zeros((n_p, n_k), dtype=np.int64)
        self.outstanding_all = np.zeros((n_p, n_k), dtype=np.int64)
        # GPU-hours used per project, cluster and hour (booked at segment ends and hours)
        self.used = np.zeros((n_p, n_k, max(self.n_hours, 1)))
        self.charged = np.zeros(n_p)  # NGH of allocated jobs so far
        self.protected_hours = [0.0] * jobs.n  # protection of the current run
        # holds: id → hold; per cluster the nodes of its active holds; per job its hold
        self.holds: dict[int, Hold] = {}
        self.held_nodes: list[set[int]] = [set() for _ in range(n_k)]
        self.hold_of: dict[int, int] = {}
        self._next_hold = 0
        self.events: list[tuple[float, int, int, int]] = []
        self.now = 0.0
        self.replans = 0
        self.plan_seconds = 0.0

    # -- placement -----------------------------------------------------------------------

    def fits(self, c: int, gpus: int, blocked: frozenset[int] = frozenset()) -> bool:
        """Whether a job of ``gpus`` GPUs can start on cluster ``c`` now, off ``blocked``."""
        gpn = self.gpn[c]
        buckets = self.buckets[c]
        held = self.held_nodes[c]
        if blocked:  # as ``_place(c, gpus, blocked) is not None``, by set operations
            if held:
                blocked = blocked | held
            if gpus >= gpn:
                return len(buckets[gpn] - blocked) >= -(-gpus // gpn)
            return any(not buckets[f] <= blocked for f in range(gpus, gpn + 1))
        if held:  # nodes of active holds take no new work (their own job: nodes=)
            if gpus >= gpn:
                return len(buckets[gpn] - held) >= -(-gpus // gpn)
            return any(len(buckets[f]) > len(buckets[f] & held) for f in range(gpus, gpn + 1))
        if gpus >= gpn:
            return len(buckets[gpn]) >= -(-gpus // gpn)
        return self.top_free[c] >= gpus

    def fit_limit(self, c: int) -> int:
        """The most GPUs a job may ask and start on ``c`` now: ``fits(c, g)`` ⟺ g ≤ this.

        Whole free nodes × GPUs per node when a node is wholly free (a gang of that many
        nodes fits, and any smaller job), else the most free GPUs on one node (0: none).
        Nodes of active holds do not count.
        """
        gpn = self.gpn[c]
        buckets = self.buckets[c]
        held = self.held_nodes[c]
        whole = len(buckets[gpn] - held) if held else len(buckets[gpn])
        if whole:
            return whole * gpn
        if not held:  # no node wholly free: the most free on one node (top_free)
            return self.top_free[c]
        for f in range(gpn - 1, 0, -1):
            if buckets[f] and not buckets[f] <= held:
                return f
        return 0

    def any_fits(self, c: int) -> bool:
        """Whether any waiting job on ``c`` fits now (cheap: one check per waiting size)."""
        if self.free_total[c] == 0:
            return False
        if self.held_nodes[c]:
            return any(n and self.fits(c, g) for g, n in self.waiting_sizes[c].items())
        gpn, top = self.gpn[c], self.top_free[c]
        whole = len(self.buckets[c][gpn])
        return any(n and (g <= top if g < gpn else -(-g // gpn) <= whole)
                   for g, n in self.waiting_sizes[c].items())

    def _place(self, c: int, gpus: int, blocked: frozenset[int] = frozenset()
               ) -> tuple[int, ...] | None:
        if self.held_nodes[c]:
            blocked = frozenset(blocked | self.held_nodes[c])
        gpn = self.gpn[c]
        buckets = self.buckets[c]
        if gpus >= gpn:
            need = -(-gpus // gpn)
            whole = sorted(n for n in buckets[gpn] if n not in blocked)
            return tuple(whole[:need]) if len(whole) >= need else None
        for f in range(gpus, gpn + 1):
            nodes = [n for n in buckets[f] if n not in blocked] if blocked else buckets[f]
            if nodes:
                return (min(nodes),)
        return None

    def _take(self, c: int, node: int, gpus: int, job: int) -> None:
        self.node_versions[c][node] += 1
        free = self.free[c]
        buckets = self.buckets[c]
        had = free[node]
        buckets[had].discard(node)
        free[node] = had - gpus
        buckets[had - gpus].add(node)
        self.node_jobs[c][node][job] = None
        self.free_total[c] -= gpus
        if had == self.top_free[c] and not buckets[had]:  # it was the last with the most
            top = had - 1  # the next with any node (this one's bucket, at worst)
            while not buckets[top]:
                top -= 1
            self.top_free[c] = top

    def _give(self, c: int, node: int, gpus: int, job: int) -> None:
        self.node_versions[c][node] += 1
        free = self.free[c]
        buckets = self.buckets[c]
        had = free[node]
        buckets[had].discard(node)
        free[node] = had + gpus
        buckets[had + gpus].add(node)
        del self.node_jobs[c][node][job]
        self.free_total[c] += gpus
        if had + gpus > self.top_free[c]:
            self.top_free[c] = had + gpus

    def expected_end(self, job: int) -> float:
        """When a scheduler that knows only time limits expects a running job to end.

        ``run_start`` + the limit left: the requested limit less the work already done
        before this run (a resumed job carries its remaining work; a restarted one the
        whole limit). Never before ``now`` (a job past its estimate is expected to end
        at any moment).
        """
        return max(self.limit_end(job), self.now)

    def limit_end(self, job: int) -> float:
        """``run_start`` + the limit left of a running job: :meth:`expected_end` before ``now``.

        Fixed for the whole run (it does not move with the clock).
        """
        done_before = self.jobs.duration[job] - self.remaining[job]
        left = max(self.jobs.time_limit[job] - done_before, 0.0)
        return self.run_start[job] + left

    def requested_hours(self, job: int) -> float:
        """The time limit left of a waiting job: what it asks the scheduler for."""
        done_before = self.jobs.duration[job] - self.remaining[job]
        return max(self.jobs.time_limit[job] - done_before, self.remaining[job])

    def held(self, job: int) -> int:
        """GPUs a job holds: whole nodes for a gang, its GPUs otherwise."""
        c = self.jobs.cluster[job]
        gpus = self.jobs.gpus[job]
        gpn = self.gpn[c]
        return -(-gpus // gpn) * gpn if gpus >= gpn else gpus

    # -- what policies read (never the raw per-job lists) --------------------------------

    def is_waiting(self, job: int) -> bool:
        """Whether ``job`` is in its cluster's queue."""
        return self.state[job] == _WAITING

    def is_running(self, job: int) -> bool:
        """Whether ``job`` holds GPUs now."""
        return self.state[job] == _RUNNING

    def tag_of(self, job: int) -> str:
        """The class (tag) a running job runs under; its last run's for one not running."""
        return self.tag[job]

    def started_at(self, job: int) -> float:
        """When ``job``'s current (or last) run started, hours."""
        return self.run_start[job]

    def work_left(self, job: int) -> float:
        """Hours of work ``job`` has left now (what it still needs if never preempted)."""
        left = self.remaining[job]
        if self.state[job] == _RUNNING:
            left -= self.now - self.run_start[job]
        return left

    def running_jobs(self, c: int) -> list[int]:
        """Jobs running on cluster ``c``, oldest run first (run start, then job): a new list."""
        version, order = self._running_order[c]
        if version != self.versions[c]:
            run_start = self.run_start
            order = sorted(self.running[c], key=lambda j: (run_start[j], j))
            self._running_order[c] = (self.versions[c], order)
        return list(order)

    def outstanding_jobs(self) -> list[int]:
        """Waiting and running jobs of every cluster, in job order."""
        out: list[int] = []
        for c in range(len(self.cluster_ids)):
            out.extend(self.running[c])
            for queue in self.queues[c].values():
                out.extend(queue.jobs())
        return sorted(out)

    def waiting_jobs(self) -> list[int]:
        """Jobs waiting in every cluster's queue, in job order."""
        return sorted(job for c in range(len(self.cluster_ids))
                      for queue in self.queues[c].values() for job in queue.jobs())

    def held_under(self, c: int, p: int, tag: str) -> int:
        """GPUs project ``p`` holds on cluster ``c`` under ``tag``."""
        return self.held_by[c].get((p, tag), 0)

    def preemptible_gpus(self, c: int) -> int:
        """GPUs on ``c`` held by running jobs past their protected runtime."""
        return self.expired_held[c]

    def victim_jobs(self, c: int, victims: Iterable[tuple[int, str]]) -> list[int]:
        """Running jobs of the ``victims`` groups on ``c`` past their protected runtime.

        In the order :meth:`preempt_for` takes them (groups as listed; within a group the
        engine's rule), without preempting anything.
        """
        out: list[int] = []
        for v in victims:
            group = self.expired[c].get(v)
            if group:
                out.extend(group.order())
        return out

    def victim_groups(self, c: int) -> set[tuple[int, str]]:
        """(project, tag) groups on ``c`` with running jobs past their protected runtime.

        The groups :meth:`preempt_for` can take victims from (read-only use).
        """
        return self.expired_live[c]

    def version(self, c: int) -> int:
        """A counter of changes to cluster ``c``'s running work (starts, stops, expiries, tags).

        Two reads that give the same number saw the same running jobs, tags, victim
        groups (and their order) and free GPUs on ``c``: a policy may reuse what it
        computed from them.
        """
        return self.versions[c]

    def queue_version(self, c: int) -> int:
        """A counter of changes to the first waiting job of any project on ``c``.

        With :meth:`version`: two reads that give the same numbers saw the same running
        work and the same first job (:meth:`head`) of every project waiting on ``c``.
        """
        return self.queue_versions[c]

    def project_version(self, c: int, p: int) -> int:
        """:meth:`version` of project ``p``'s running work on ``c`` alone."""
        return self.project_versions[c][p]

    def nodes_of(self, job: int) -> tuple[int, ...]:
        """The nodes a running job holds (whole ones for a gang)."""
        return self.placed[job]

    def free_gpus(self, c: int) -> list[int]:
        """Free GPUs of each node of cluster ``c`` (a copy)."""
        return list(self.free[c])

    def node_version(self, c: int) -> list[int]:
        """Per node of ``c``, a counter of changes to its jobs (starts, stops, retags).

        Equal numbers: the same jobs on the node, with the same tags and free GPUs (read-only).
        """
        return self.node_versions[c]

    def nodes_on(self, c: int) -> Iterable[tuple[int, int, dict[int, None]]]:
        """(node, free GPUs, the jobs on it) for every node of cluster ``c``."""
        return zip(range(self.nodes[c]), self.free[c], self.node_jobs[c], strict=True)

    def protection(self, job: int) -> float:
        """Hours job ``job`` is protected for when it starts, unless its policy says less."""
        return self.protect[job]

    # -- queues --------------------------------------------------------------------------

    def _enqueue(self, job: int) -> None:
        c, p, g = self.jobs.cluster[job], self.jobs.project[job], self.jobs.gpus[job]
        queue = self.queues[c].get(p)
        if queue is None:
            queue = self.queues[c][p] = ProjectQueue()
        if queue.push(self.key[job], job, g):
            self.queue_versions[c] += 1
            head = queue._head
            if head is _STALE:
                self._first_stale[c].add(p)
            else:
                self.first_jobs[c][p] = head[0][1]
        bucket = queue.buckets[g]
        if len(bucket) == 1:  # the bucket was empty
            self.size_queues[c].setdefault(g, {})[p] = bucket
        sizes = self.waiting_sizes[c]
        sizes[g] = sizes.get(g, 0) + 1
        self.n_waiting[c] += 1
        self.state[job] = _WAITING

    def heads(self, c: int) -> list[tuple[int, int]]:
        """(project, its first waiting job by key) of every project waiting on ``c``.

        In no particular order (what a heap of them pops does not depend on it):
        :meth:`waiting_projects` with :meth:`head` of each, kept (``first_jobs``) as jobs
        join the queues; only the queues a job left since the last ask are looked at.
        """
        first, stale = self.first_jobs[c], self._first_stale[c]
        if stale:
            queues = self.queues[c]
            for p in stale:
                head = queues[p]._first()
                if head is None:
                    first.pop(p, None)
                else:
                    first[p] = head[0][1]
            stale.clear()
        return list(first.items())

    def fitting_sizes(self, c: int) -> set[int]:
        """The sizes (GPUs) of the jobs waiting on ``c`` that fit now (:meth:`fits`).

        Empty exactly when :meth:`any_fits` is False; it changes only when a job starts
        or stops on ``c``.
        """
        if self.free_total[c] == 0:
            return set()
        fits = self.fits
        return {g for g, n in self.waiting_sizes[c].items() if n and fits(c, g)}

    def heads_in(self, c: int, sizes: set[int]) -> list[tuple[int, int]]:
        """(project, its first waiting job by key among ``sizes``) wherever there is one.

        With ``sizes`` = :meth:`fitting_sizes`: :meth:`head_fit` of every waiting project
        in one walk (no particular order), over the projects with waiting jobs of those
        sizes only (``size_queues``): the first of each size's bucket, the least of them.
        """
        index = self.size_queues[c]
        if len(sizes) == 1:  # the common case: one size fits (say, one GPU free)
            (g,) = sizes
            return [(p, bucket[0][1]) for p, bucket in index.get(g, {}).items()]
        first: dict[int, tuple] = {}
        for g in sizes:
            for p, bucket in index.get(g, {}).items():
                top = bucket[0]
                have = first.get(p)
                if have is None or top < have:
                    first[p] = top
        return [(p, top[1]) for p, top in first.items()]

    def head_in(self, c: int, p: int, sizes: set[int]) -> int | None:
        """Project ``p``'s first waiting job on ``c`` (by key) among ``sizes``, or None."""
        queue = self.queues[c].get(p)
        if not queue or not queue.count:
            return None
        return queue.head_in(sizes)

    def waiting_projects(self, c: int) -> list[int]:
        """Projects with waiting jobs on ``c``, in project order."""
        return sorted(p for p, q in self.queues[c].items() if q.count)

    def head(self, c: int, p: int) -> int | None:
        """Project ``p``'s first waiting job on ``c`` by key, or None."""
        queue = self.queues[c].get(p)
        top = queue.head() if queue else None
        return None if top is None else top[1]

    def head_fit(self, c: int, p: int, blocked: frozenset[int] = frozenset(),
                 fits: Callable[[int], bool] | None = None) -> int | None:
        """Project ``p``'s first waiting job on ``c`` (by key) that fits now, or None.

        ``fits``: the caller's ``fits(c, size)`` for these nodes (say, remembered per size
        between starts); the engine's own otherwise.
        """
        queue = self.queues[c].get(p)
        if not queue or not queue.count:
            return None
        if blocked:
            top = queue.head_fit(lambda g: self.fits(c, g, blocked))
        else:
            top = queue.head_fit(fits or (lambda g: self.fits(c, g)))
        return None if top is None else top[1]

    # -- starting and stopping -----------------------------------------------------------

    def start(self, job: int, tag: str, blocked: frozenset[int] = frozenset(),
              nodes: tuple[int, ...] | None = None, protect: float | None = None) -> None:
        """Start a waiting job that fits now (raises if it does not): the policy's choice.

        ``nodes``: exactly these (free, whole) nodes, e.g. its hold's; otherwise the
        engine places it, off the nodes of holds it would overrun where it can.
        ``protect``: hours it may not be preempted (default: its min runtime).
        """
        jobs = self.jobs
        c, p, g = jobs.cluster[job], jobs.project[job], jobs.gpus[job]
        if self.state[job] != _WAITING:
            raise RuntimeError(f"job {jobs.ids[job]} is not waiting")
        if nodes is not None:
            if not self._whole_free(c, nodes, g):
                raise RuntimeError(f"job {jobs.ids[job]} does not fit on nodes {nodes}")
        else:
            nodes = self._place_avoiding(c, job, blocked)
        if nodes is None:
            raise RuntimeError(f"job {jobs.ids[job]} does not fit")
        hid = self.hold_of.get(job)
        if hid is not None:  # started (on its nodes or elsewhere): the hold is done
            self.release_hold(hid)
        queue = self.queues[c][p]
        top = queue.buckets[g][0]
        if top[1] != job:  # not the head of its bucket: rare (policy picked a later one)
            queue.remove(self.key[job], job, g)
        else:
            queue.remove_head(g)
        if not queue.buckets[g]:
            del self.size_queues[c][g][p]
        self._first_stale[c].add(p)
        self.queue_versions[c] += 1
        self.waiting_sizes[c][g] -= 1
        self.n_waiting[c] -= 1
        per_node = self.gpn[c] if g >= self.gpn[c] else g
        for node in nodes:
            self._take(c, node, per_node, job)
        now = self.now
        self.placed[job] = nodes
        self.state[job] = _RUNNING
        self.tag[job] = tag
        self.run_start[job] = now
        self.booked_to[job] = now
        if math.isnan(self.first_start[job]):
            self.first_start[job] = now
        self.running[c][job] = None
        self.versions[c] += 1
        self.project_versions[c][p] += 1
        held = per_node * len(nodes)
        self.held_by[c][(p, tag)] = self.held_by[c].get((p, tag), 0) + held
        self.held_project[p, c] += held
        self.held_ngh[p] += held * self.rate[c]
        self._held_tag(c, tag)[p] += held
        self.epoch[job] += 1
        heapq.heappush(self.events, (now + self.remaining[job], 0, job, self.epoch[job]))
        protect = self.protect[job] if protect is None else max(float(protect), 0.0)
        if not self.protects:
            protect = 0.0
        self.protected_hours[job] = protect
        self.protected_until[job] = now + protect
        if protect > 0:
            heapq.heappush(self.events, (now + protect, 1, job, self.epoch[job]))
        else:
            self._expire(job)

    def _expire(self, job: int) -> None:
        c, p = self.jobs.cluster[job], self.jobs.project[job]
        self.versions[c] += 1
        self.project_versions[c][p] += 1
        group = self.expired[c].get((p, self.tag[job]))
        if group is None:
            group = self.expired[c][(p, self.tag[job])] = VictimGroup()
        held = self.held(job)
        group.add(job, held, self.jobs.resumable[job], self.run_start[job])
        self.expired_live[c].add((p, self.tag[job]))
        self.expired_held[c] += held

    def retag(self, job: int, tag: str) -> None:
        """Change a running job's class (the planner's executor at a replan)."""
        old = self.tag[job]
        if old == tag:
            return
        c, p = self.jobs.cluster[job], self.jobs.project[job]
        self.versions[c] += 1
        self.project_versions[c][p] += 1
        for node in self.placed[job]:
            self.node_versions[c][node] += 1
        held = self.held(job)
        self.held_by[c][(p, old)] -= held
        self.held_by[c][(p, tag)] = self.held_by[c].get((p, tag), 0) + held
        self._held_tag(c, old)[p] -= held
        self._held_tag(c, tag)[p] += held
        group = self.expired[c].get((p, old))
        if group is not None and job in group:
            resumable, started = self.jobs.resumable[job], self.run_start[job]
            group.remove(job, resumable, started)
            if not group:
                self.expired_live[c].discard((p, old))
            into = self.expired[c].get((p, tag))
            if into is None:
                into = self.expired[c][(p, tag)] = VictimGroup()
            into.add(job, held, resumable, started)
            self.expired_live[c].add((p, tag))
        self.tag[job] = tag

    def _held_tag(self, c: int, tag: str) -> np.ndarray:
        array = self.held_tag[c].get(tag)
        if array is None:
            array = self.held_tag[c][tag] = np.zeros(len(self.projects), dtype=np.int64)
        return array

    def held_of(self, c: int, tag: str) -> np.ndarray:
        """(P,) GPUs each project holds on cluster ``c`` under ``tag`` (read-only use)."""
        return self._held_tag(c, tag)

    def _book(self, job: int, upto: float) -> None:
        """Book a running job's GPU-hours from ``booked_to`` to ``upto`` (one hour bucket)."""
        since = self.booked_to[job]
        if upto <= since:
            return
        c, p, g = self.jobs.cluster[job], self.jobs.project[job], self.jobs.gpus[job]
        hour = min(int(since + _EPS), self.n_hours - 1)
        self.used[p, c, hour] += g * (upto - since)
        if self.jobs.allocated[job]:
            self.charged[p] += g * (upto - since) * self.rate[c]
        self.booked_to[job] = upto

    def _stop(self, job: int, ended: str) -> None:
        jobs = self.jobs
        c, p, g = jobs.cluster[job], jobs.project[job], jobs.gpus[job]
        now = self.now
        self._book(job, now)
        held = self.held(job)
        self.segments.append(Segment(job, c, p, self.run_start[job], now, g, held, ended,
                                     self.tag[job], self.placed[job],
                                     self.protected_hours[job]))
        per_node = self.gpn[c] if g >= self.gpn[c] else g
        for node in self.placed[job]:
            self._give(c, node, per_node, job)
        self.placed[job] = ()
        del self.running[c][job]
        self.versions[c] += 1
        self.project_versions[c][p] += 1
        tag = self.tag[job]
        self.held_by[c][(p, tag)] -= held
        self.held_project[p, c] -= held
        self.held_ngh[p] -= held * self.rate[c]
        self._held_tag(c, tag)[p] -= held
        group = self.expired[c].get((p, tag))
        if group is not None and job in group:
            group.remove(job, self.jobs.resumable[job], self.run_start[job])
            if not group:
                self.expired_live[c].discard((p, tag))
            self.expired_held[c] -= held
        self.epoch[job] += 1

    def preempt(self, job: int) -> None:
        """Preempt a running job past its min runtime; re-queue it (see module docstring)."""
        now = self.now
        if now < self.protected_until[job] - _EPS:
            self.protected_violations += 1
            raise RuntimeError(f"job {self.jobs.ids[job]} is inside its min runtime")
        ran = now - self.run_start[job]
        self._stop(job, PREEMPTED)
        self.preemptions[job] += 1
        if self.jobs.resumable[job]:
            self.remaining[job] -= ran
        else:
            self.lost[job] += ran * self.jobs.gpus[job]
            self.remaining[job] = self.jobs.duration[job]
        self._enqueue(job)

    def preempt_for(self, job: int, victims: Iterable[tuple[int, str]],
                    blocked: frozenset[int] = frozenset(), scan_limit: int = 512) -> bool:
        """Make room for ``job`` by preempting expired jobs of the ``victims`` groups.

        ``victims`` lists (project, tag) groups in the policy's order of preference;
        within a group resumable jobs go first (they lose nothing; most recently expired
        first), then non-resumable ones, least run time (most recently started) first —
        the engine's rule, the same for every policy. Only as many victims as
        needed are preempted, on the node(s) where they make room first; nothing is
        preempted when no room can be made (after at most ``scan_limit`` candidates).
        Returns whether ``job`` now fits.
        """
        c, g = self.jobs.cluster[job], self.jobs.gpus[job]
        if self.held_nodes[c]:  # nodes of active holds are not made room on
            blocked = frozenset(blocked | self.held_nodes[c])
        gpn = self.gpn[c]
        gang = g >= gpn
        need_nodes = -(-g // gpn)
        if gang and need_nodes > self.nodes[c]:
            return False
        expired = self.expired[c]
        named = list(filter(self.expired_live[c].__contains__, victims))  # groups with members
        # nothing changed on c since the same ask found no room: none now (the scan below
        # reads only what a start, stop, expiry or retag on c changes: ``versions``)
        ask = (g, blocked, scan_limit, tuple(named))
        version, failed = self._no_room[c]
        if version != self.versions[c]:
            failed = set()
            self._no_room[c] = (self.versions[c], failed)
        elif ask in failed:
            return False
        if not self._room_for(job, c, g, gpn, gang, need_nodes, [expired[v] for v in named],
                              blocked, scan_limit):
            failed.add(ask)
            return False
        return True

    def _room_for(self, job: int, c: int, g: int, gpn: int, gang: bool, need_nodes: int,
                  groups: list[VictimGroup], blocked: frozenset[int], scan_limit: int
                  ) -> bool:
        """:meth:`preempt_for`'s scan: False when no room can be made (nothing preempted)."""
        reclaim = sum(grp.total for grp in groups)
        short = need_nodes * gpn - len(self.buckets[c][gpn]) * gpn if gang else \
            g - self.free_total[c]
        if reclaim < short or not groups:
            return False
        freed: dict[int, int] = {}  # node → GPUs the chosen victims free on it
        blocking: dict[int, int] = {}  # node → jobs on it not chosen yet (gangs)
        chosen: dict[int, list[int]] = {}  # node → chosen victims on it
        clear: list[int] = []
        free = self.free[c]
        scanned = 0
        for grp in groups:
            for victim in grp.order():
                scanned += 1
                if scanned > scan_limit:
                    return False
                per_node = gpn if self.jobs.gpus[victim] >= gpn else self.jobs.gpus[victim]
                for node in self.placed[victim]:
                    if node in blocked:
                        continue
                    chosen.setdefault(node, []).append(victim)
                    if gang:
                        left = blocking.get(node, len(self.node_jobs[c][node])) - 1
                        blocking[node] = left
                        if left == 0:
                            clear.append(node)
                            whole = len(self.buckets[c][gpn] - blocked) if blocked else \
                                len(self.buckets[c][gpn])
                            if whole + len(clear) >= need_nodes:
                                return self._evict(job, chosen, clear, blocked)
                    else:
                        freed[node] = freed.get(node, 0) + per_node
                        if free[node] + freed[node] >= g:
                            return self._evict(job, chosen, [node], blocked)
        return False

    def _evict(self, job: int, chosen: dict[int, list[int]], nodes: list[int],
               blocked: frozenset[int]) -> bool:
        for node in nodes:
            for victim in chosen[node]:
                if self.state[victim] == _RUNNING:
                    self.preempt(victim)
        c, g = self.jobs.cluster[job], self.jobs.gpus[job]
        return self._place(c, g, blocked) is not None

    # -- holds -------------------------------------------------------------------------

    def hold_nodes(self, c: int, project: int, nodes: int, start: float, end: float,
                   job: int, prefer: Iterable[int] = ()) -> int | None:
        """Hold ``nodes`` whole nodes of cluster ``c`` for ``project``'s job over [start, end).

        The nodes are chosen now, among those no overlapping hold has: ``prefer`` first
        (e.g. the nodes an earlier hold of the job was draining), then the nodes whose
        running jobs are expected to end first (by their requested time limits: the
        executor does not know true durations), lowest numbered among equals. Returns the
        hold's id, or None when the cluster has not that many nodes free of other holds.
        A job has at most one hold (a new one replaces its old one).
        """
        if job in self.hold_of:
            self.release_hold(self.hold_of[job])
        taken: set[int] = set()
        for other in self.holds.values():
            if other.cluster == c and other.start < end and start < other.end:
                taken.update(other.nodes)
        free_at = {n: max((self.expected_end(j) for j in self.node_jobs[c][n]),
                          default=self.now) for n in range(self.nodes[c]) if n not in taken}
        if nodes <= 0 or len(free_at) < nodes:
            return None
        first = [n for n in dict.fromkeys(prefer) if n in free_at]
        rest = sorted((n for n in free_at if n not in set(first)),
                      key=lambda n: (free_at[n], n))
        chosen = tuple(sorted((first + rest)[:nodes]))
        hid = self._next_hold
        self._next_hold += 1
        self.holds[hid] = Hold(c, project, chosen, float(start), float(end), job)
        self.hold_of[job] = hid
        if start <= self.now + _EPS:
            self._activate(hid)
        return hid

    def release_hold(self, hid: int) -> None:
        """End a hold now: its nodes take any work again."""
        hold = self.holds.pop(hid)
        if self.hold_of.get(hold.job) == hid:
            del self.hold_of[hold.job]
        if hold.active:
            self.held_nodes[hold.cluster].difference_update(hold.nodes)

    def active_holds(self, c: int) -> list[int]:
        """Ids of the holds on cluster ``c`` whose start has passed, oldest first."""
        return [h for h, hold in self.holds.items() if hold.cluster == c and hold.active]

    def clear_nodes(self, c: int, nodes: Iterable[int], victims: Iterable[tuple[int, str]]
                    ) -> bool:
        """Drain ``nodes`` when it empties them: all or nothing.

        If every job running on ``nodes`` is an expired member of a ``victims`` group,
        preempt them all and return True; otherwise preempt none (a job that may not be
        preempted yet would keep the others' nodes idle for nothing) and return False.
        """
        groups = [grp for grp in (self.expired[c].get(v) for v in victims) if grp]
        running = {job for node in nodes for job in self.node_jobs[c][node]}
        if not all(any(job in grp for grp in groups) for job in running):
            return False
        for job in sorted(running):
            if self.state[job] == 2:
                self.preempt(job)
        return True

    def nodes_free(self, c: int, nodes: Iterable[int]) -> bool:
        """Whether every one of ``nodes`` is wholly free."""
        gpn = self.gpn[c]
        return all(self.free[c][n] == gpn for n in nodes)

    def _whole_free(self, c: int, nodes: tuple[int, ...], gpus: int) -> bool:
        gpn = self.gpn[c]
        return (gpus >= gpn and len(set(nodes)) == -(-gpus // gpn)
                and self.nodes_free(c, nodes))

    def _activate(self, hid: int) -> None:
        hold = self.holds[hid]
        hold.active = True
        self.held_nodes[hold.cluster].update(hold.nodes)

    def _advance_holds(self) -> set[int]:
        """At a whole hour: holds whose start came become active, ended ones go."""
        touched: set[int] = set()
        for hid, hold in list(self.holds.items()):
            if hold.end <= self.now + _EPS:
                self.release_hold(hid)
                touched.add(hold.cluster)
            elif not hold.active and hold.start <= self.now + _EPS:
                self._activate(hid)
                touched.add(hold.cluster)
        return touched

    def _place_avoiding(self, c: int, job: int, blocked: frozenset[int]
                        ) -> tuple[int, ...] | None:
        """Placement that keeps off the nodes of pending holds the job would overrun."""
        pending = [h for h in self.holds.values()
                   if h.cluster == c and not h.active and h.job != job]
        g = self.jobs.gpus[job]
        if pending:
            ends = self.now + self.requested_hours(job)
            avoid = {n for h in pending if h.start < ends for n in h.nodes}
            if avoid:
                nodes = self._place(c, g, frozenset(blocked | avoid))
                if nodes is not None:
                    return nodes
        return self._place(c, g, blocked)

    # -- the event loop ------------------------------------------------------------------

    def run(self, on_hour: Callable[[float, float], None] | None = None) -> ReplayResult:
        """Replay the whole trace under the policy, to quarter end.

        ``on_hour(now, hours)``: called at every whole hour once the policy's refresh ran
        (progress reports; it must not touch the replay).
        """
        jobs = self.jobs
        policy = self.policy
        order = sorted(range(jobs.n), key=lambda j: (jobs.submit[j], j))
        for j in range(jobs.n):
            self.key[j] = policy.job_key(self, j)
        policy.prepare(self)
        end = self.hours
        nxt = 0
        tick = 0.0
        events = self.events
        while True:
            t_submit = jobs.submit[order[nxt]] if nxt < jobs.n else math.inf
            t_event = events[0][0] if events else math.inf
            now = min(t_submit, t_event, tick)
            if now >= end - _EPS:
                break
            self.now = now
            dirty: set[int] = set()
            while events and events[0][0] <= now + _EPS:
                _, kind, job, epoch = heapq.heappop(events)
                if epoch != self.epoch[job] or self.state[job] != _RUNNING:
                    continue
                c = jobs.cluster[job]
                if kind == 0:
                    self._stop(job, DONE)
                    self.remaining[job] = 0.0
                    self.state[job] = _DONE
                    self.finish[job] = now
                    self._outstanding(job, -1)
                else:
                    self._expire(job)
                dirty.add(c)
            while nxt < jobs.n and jobs.submit[order[nxt]] <= now + _EPS:
                job = order[nxt]
                nxt += 1
                self._enqueue(job)
                self._outstanding(job, +1)
                dirty.add(jobs.cluster[job])
            if now >= tick - _EPS:
                for c in range(len(self.cluster_ids)):
                    for job in self.running[c]:
                        self._book(job, now)
                dirty.update(self._advance_holds())
                if policy.refresh(self, now):
                    dirty.update(range(len(self.cluster_ids)))
                tick += 1.0
                if on_hour is not None:
                    on_hour(now, end)
            for c in sorted(dirty):
                if self.n_waiting[c]:
                    policy.schedule(self, c)
        self.now = end
        for c in range(len(self.cluster_ids)):
            for job in list(self.running[c]):
                self._stop(job, CUT)
        return ReplayResult(
            policy=policy.name, hours=self.hours, segments=tuple(self.segments),
            first_start=np.array(self.first_start), finish=np.array(self.finish),
            preemptions=np.array(self.preemptions, dtype=np.int64),
            lost_gpu_hours=np.array(self.lost), protected_violations=self.protected_violations,
            replans=self.replans, plan_seconds=self.plan_seconds)

    def _outstanding(self, job: int, sign: int) -> None:
        c, p, g = self.jobs.cluster[job], self.jobs.project[job], self.jobs.gpus[job]
        self.outstanding_all[p, c] += sign * g
        if self.jobs.allocated[job]:
            self.outstanding[p, c] += sign * g


def replay(scenario: Scenario, trace: pd.DataFrame, policy,
           on_hour: Callable[[float, float], None] | None = None,
           cap_hours: float | None = None) -> ReplayResult:
    """Replay ``trace`` (the frame :func:`planner.simulate.trace.read_trace` returns).

    ``on_hour(now, hours)``: progress, at every whole hour of the replay. ``cap_hours``:
    the contract's protected-runtime cap (:func:`contract_cap`; default: the policy's
    model's, else 8 h).
    """
    return Replay(scenario, trace, policy, cap_hours).run(on_hour)
