"""``planner-kueue``: the rolling plan replayed through the Kueue objects we export.

The replanning is the ``planner`` policy's, unchanged: :class:`KueueReplayPolicy` is the
:class:`~planner.simulate.replanner.Replanner` holding a :class:`KueueExecutor`
(composed: the executor does not inherit the replanner). At each replan the executor builds
the first period's Kueue objects **with the exporter's own function**
(:meth:`planner.exporters.kueue.KueueExport.period_objects` of the policy's ``export``,
by default :data:`planner.exporters.kueue.SHIPPED`, the very record ``planner export
--to kueue`` writes with; the options named below are that record's fields) and reads
its quotas back from those objects alone (:func:`quota_trees`): per ResourceFlavor
(cluster) a tree of the root Cohort (the GPUs no project holds), a Cohort per org node
(``parentName``, ``fairSharing.weight``) and a ClusterQueue per project
(``nominalQuota``, ``borrowingLimit``, ``lendingLimit``, ``preemption``,
``queueingStrategy``, ``fairSharing.weight``).

Admission, as Kueue v0.19 does it (``pkg/cache`` resource nodes; one flavor, one
resource, ``nvidia.com/gpu``, so the dominant resource is the only one):

- **quota** (:class:`FlavorTree`): a node's *subtree quota* is its own nominal quota
  plus, per child, the child's subtree quota less what the child keeps for itself
  (its *guaranteed* quota, subtree − ``lendingLimit``; 0 without one). A Cohort's
  usage is, per child, the child's usage beyond its guaranteed quota. What a
  ClusterQueue may still admit (:meth:`FlavorTree.available`) is its unused
  guaranteed quota plus what its parent has available, the latter capped by
  ``borrowingLimit`` (what it stores in the parent − what it uses there + the limit);
  at the root, subtree quota − usage. A workload is admitted when its GPUs fit there
  and on the nodes (the engine places it at once), as Kueue does with the Topology Aware
  Scheduling the export turns on (every flavor names the ``Topology``
  :data:`planner.exporters.kueue.TOPOLOGY`; without it Kueue would admit on quota and
  leave pods pending where nodes are fragmented);
- **priorities**: the export's WorkloadPriorityClasses, each job carrying its class's
  label (:func:`planner.exporters.kueue.priority_class`): allocated work
  ``gpu-planner-budget`` (1000), allocated jobs of at least one whole node
  ``gpu-planner-budget-gang`` (1100), unallocated work ``gpu-planner-unallocated`` (0);
  ``priorities=False`` replays every workload at priority 0 (the export before the
  classes, or a site whose jobs carry no label);
- **order**: ``BestEffortFIFO`` within a ClusterQueue (the first waiting workload, by
  priority and then submit order, that fits; a higher-priority head that does not fit
  first tries to preempt its own queue's lower-priority work, below; ``StrictFIFO``: only
  the first); between queues, with fair
  sharing on (the export needs it, docs/explanation/kueue.md), the tournament of hierarchical
  fair sharing: from the root down, the child subtree with the lowest dominant
  resource share wins, share = what the node borrows ÷ what its parent could lend ÷
  weight (weight 0: infinite), computed with the workload admitted, both summed over
  every flavor, as Kueue sums a resource over the flavors of one manifest set
  (``dominantResourceShare``, ``calculateLendable``): borrowed = Σ max(0, usage −
  subtree quota), lendable = Σ the parent's ``potentialAvailable`` (its guaranteed quota
  plus its own parent's, up to the root's subtree quota, capped by a
  ``borrowingLimit``); a project borrowing on one cluster so ranks lower on every
  other (:class:`FlavorTree`'s ``elsewhere`` and ``lendable``); two
  candidates are compared at the Cohort where their paths part
  (:func:`tournament_order`), ties by priority, then submit order. Without fair sharing,
  priority and submit order alone;
- **reclaim** (``reclaimWithinCohort: Any``): a workload that would stay within its
  queue's nominal quota but finds no quota free preempts workloads of queues that
  borrow (usage above nominal), the queue with the highest share first, at most each
  queue's excess over its nominal quota (its most recently admitted workloads are
  the borrowed ones, the lowest priority first: :data:`BORROWED_LOW`, then
  :data:`BORROWED`, then :data:`BORROWED_GANG`); only when preempting that borrowed work
  leaves the workload its quota (Kueue's check), and then as much of it as the quota
  needs, beyond what makes room on the nodes;
- **within a queue** (``withinClusterQueue: LowerPriority``,
  :meth:`KueueExecutor._within_queue`): a workload that does not fit preempts its own
  queue's running workloads of a lower priority (budget work takes the queue's
  unallocated work, a gang its smaller budget work too), the lowest priority and most
  recently admitted first, as many as it needs to fit, tried before the cohort's
  candidates (Kueue pools both kinds; the replay takes its own queue's alone when they
  suffice, else the cohort's alone);
- **fair-sharing preemption** (:meth:`KueueExecutor._fair_targets`): with Fair
  Sharing on, ``reclaimWithinCohort: Any`` lets a pending workload *beyond* its queue's
  nominal quota preempt too, under the Configuration's ``preemptionStrategies`` (Kueue's
  docs, "Preemption", "Fair Sharing"; ``pkg/scheduler/preemption/fair_strategy.go``):
  candidates are the borrowed workloads of the other borrowing queues; the queue with
  the highest share (down the cohort tree from the root) goes first; a candidate is taken
  under ``LessThanOrEqualToFinalShare`` when the preemptor's share with its workload is at
  most the target's share without the candidate, the two compared at the children of
  their lowest common Cohort; ``LessThanInitialShare`` (Kueue's default second strategy,
  ``strategies=STRATEGIES``) takes one more candidate per queue whose share is strictly
  above the preemptor's new one. Targets stop once the workload fits (quota and nodes)
  and are minimised in reverse. The configuration the docs ask for, replayed by default, names
  the first strategy alone. (``borrowWithinCohort`` belongs to classic preemption; Kueue
  ignores it under Fair Sharing.) A job preempted in a scheduling pass preempts nobody
  in that pass, and one whose attempt failed is not retried in it;
- **no protected min runtime**: Kueue v0.19's ClusterQueue has no minimum runtime
  before preemption (its ``preemption`` block is the three settings above), so a
  borrowed workload is reclaimed the moment a lender needs its quota
  (``protects_min_runtime = False``: the engine protects nothing). Work within its
  queue's nominal quota is never reclaimed, and reserved quota
  (nominal − ``lendingLimit``) is never lent, so a reservation's GPUs are never
  borrowed and never reclaimed;
- **no paced class**: quotas change only when a new period's objects are applied.
  Work the plan did not see borrows idle GPUs (the export's fill) or waits for the
  next replan;
- **fill** (the export's default, ``fill=True``): every project's ClusterQueue has a
  flavor on every cluster it may run on (nominal 0 where the plan grants nothing, so
  ``allowed`` from the scenario's ``budgets.csv``) and no ``borrowingLimit``: idle
  GPUs of the cohort tree go to whoever has work, the tournament deciding (weights
  from the budget pace, ``weights="pace"``), and lenders reclaim them at once. With
  ``fill=False`` (the earlier, grant-capped export) a project the plan grants nothing
  on a cluster has no flavor there, so its work there is inadmissible until a replan
  grants it some, and borrowing stops at the opportunistic grant;
- **rule 5** (the executor contract's taking back, the export's ``takes_back``, on by
  default): at each replan a project ahead of its budget pace gets no nominal quota but
  its reservations' (the exporter's quotas, read back like the rest), so its running
  work counts as borrowed and a lender within its nominal quota reclaims it, the
  highest share first (a project ahead has spent more of its budget: a lower pace
  weight, a higher share); ``takes_back=False`` replays the export before the rule;
- **rule 6** (the executor contract's widening, the export's ``pending``, on by
  default): at each replan a project with budget left, not ahead of its pace, whose
  widest waiting gang (allocated, at least a node's GPUs) on a cluster is wider than its
  nominal quota there gets nominal quota for it, out of the pool's unheld GPUs
  (:func:`planner.exporters.kueue.widen_to_pending`, given the queue as ``planner cycle``
  gives it the pending Workloads); the gang then reclaims borrowed work to fit;
  ``widens=False`` replays the export before the rule;
- **rule 8** (the executor contract's lending to overdrawn projects, the export's
  ``overdrawn_at_pool``, on by default): at each replan a project a whole budget ahead of
  its pace has its ClusterQueue in the pool Cohort with weight 0, read back like the
  rest: its share is infinite in every comparison, so it is admitted last and any other
  queue's workload preempts its borrowed work by Fair Sharing while it still borrows
  beyond that workload (its last borrowed workload has share 0 without it, as Kueue
  computes a weight-0 share, and only a lender's reclaim takes that one);
- **unallocated work** goes to its project's LocalQueue like allocated work and shares
  its quota, at the lower priority: admitted after the queue's waiting budget work,
  preempted by it, and taken first when its queue borrows.

What only the replay has (Kueue's Configuration and the cycle's feeds: ``fair_sharing``,
``fair_preemption``, ``strategies``, ``priorities``, ``widens``, ``late``) is one
:class:`KueueReplayOptions` record, :data:`AS_SHIPPED` by default; the variants compared
are named records in the tests and benchmarks.

Quotas are in whole GPUs of the engine's accounting (a gang holds whole nodes).
"""

from __future__ import annotations

import heapq
import json
import math
from collections import deque
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from functools import cmp_to_key
from typing import Any

import numpy as np
import pandas as pd

from planner.config import ModelConfig
from planner.demand import QueuedJob
from planner.exporters.kueue import (
    GPU,
    PRIORITY_CLASSES,
    SHIPPED,
    KueueExport,
    allowed_clusters,
    needs_per_cluster,
    object_id,
    priority_class,
)
from planner.ingest.queue import workload_jobs
from planner.ingest.workloads import queue_items
from planner.simulate.executor import EngineView
from planner.simulate.queue_render import workload_items
from planner.simulate.replanner import DemandSource, Replanner
from planner.tick import late_step

NOMINAL, BORROWED = "nominal", "borrowed"
#: the same below the top priority class (unallocated work, with the export's classes):
#: a borrowing queue's first preemption candidates, before its borrowed budget work, and
#: what a queue's budget work may preempt within it (``withinClusterQueue``)
NOMINAL_LOW, BORROWED_LOW = "nominal-unallocated", "borrowed-unallocated"
#: the same above it: allocated jobs of whole nodes (``gpu-planner-budget-gang``), a
#: borrowing queue's last candidates
NOMINAL_GANG, BORROWED_GANG = "nominal-gang", "borrowed-gang"
WITHIN = "within"  # a candidate that may preempt only its own queue's lower-priority work
TOP, BOTTOM = max(PRIORITY_CLASSES.values()), min(PRIORITY_CLASSES.values())
#: priority → (its tag within nominal quota, its tag borrowed), lowest priority first
TAGS = {PRIORITY_CLASSES[priority_class(False)]: (NOMINAL_LOW, BORROWED_LOW),
        PRIORITY_CLASSES[priority_class(True)]: (NOMINAL, BORROWED),
        PRIORITY_CLASSES[priority_class(True, True)]: (NOMINAL_GANG, BORROWED_GANG)}
#: a borrowing queue's candidate groups, in Kueue's order: lowest priority first
BORROWED_ORDER = tuple(pair[1] for _, pair in sorted(TAGS.items()))
#: priority → the tags of every lower priority (what ``withinClusterQueue`` may take)
TAGS_BELOW = {priority: tuple(t for lower, pair in TAGS.items() if lower < priority
                              for t in pair) for priority in TAGS}
#: Kueue's fair-sharing preemption strategies, in its default order
STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


@dataclass(slots=True)
class QuotaNode:
    """A Cohort or ClusterQueue on one flavor: its quotas and Kueue's accounting."""

    name: str
    parent: str | None
    weight: float
    queue: bool  # a ClusterQueue (else a Cohort)
    covers: bool = False  # a queue with this flavor in its resource group
    nominal: int = 0
    borrowing_limit: int | None = None  # None: unlimited (Kueue's default)
    lending_limit: int | None = None  # None: everything lendable
    children: list[str] = field(default_factory=list)
    subtree: int = 0  # SubtreeQuota
    usage: int = 0  # a queue's usage; a Cohort's: its children's beyond their guaranteed
    kept: int = 0  # :attr:`guaranteed`, fixed once the tree has set :attr:`subtree`

    @property
    def guaranteed(self) -> int:
        """Quota not lent to the parent: subtree − lendingLimit (0 without one)."""
        if self.lending_limit is None:
            return 0
        return max(0, self.subtree - self.lending_limit)


class FlavorTree:
    """One flavor's Cohorts and ClusterQueues with Kueue's quota arithmetic."""

    def __init__(self, nodes: dict[str, QuotaNode]) -> None:
        self.nodes = nodes
        for node in nodes.values():
            node.children = []
        for name in sorted(nodes):
            parent = nodes[name].parent
            if parent is not None:
                nodes[parent].children.append(name)
        self.order: list[str] = []  # children before parents
        for root in sorted(n for n, node in nodes.items() if node.parent is None):
            self._post(root)
        for name in self.order:
            node = nodes[name]
            node.subtree = node.nominal + sum(
                nodes[k].subtree - nodes[k].guaranteed for k in node.children)
            node.kept = node.guaranteed
        # bottom-up, with the objects at hand (set_usage runs at every scheduling pass)
        self._queues = [nodes[n] for n in self.order if nodes[n].queue]
        self._cohorts = [(nodes[n], [nodes[k] for k in nodes[n].children])
                         for n in self.order if not nodes[n].queue]
        self._memo: dict[str, int] = {}
        #: node → :meth:`share` as usage stands: a node's entry goes when its usage changes
        self._shares: dict[str, float] = {}
        self._paths: dict[str, tuple[str, ...]] = {}
        self._elsewhere: dict[str, int] = {}
        #: node → its place among the names: Kueue's tie between equal shares
        self.rank = {n: i for i, n in enumerate(sorted(nodes))}
        self.lendable = {n: self.potential(n) for n in nodes if not nodes[n].queue}

    @property
    def elsewhere(self) -> dict[str, int]:
        """Node → GPUs it borrows on the other flavors of its resource group.

        Kueue sums a resource's borrowing over flavors; set by the policy before shares
        are read (setting it forgets the shares read before).
        """
        return self._elsewhere

    @elsewhere.setter
    def elsewhere(self, value: dict[str, int]) -> None:
        self._elsewhere = value
        self._shares.clear()

    @property
    def lendable(self) -> dict[str, int]:
        """Cohort → its lendable GPUs (Kueue's potentialAvailable).

        The denominator of its children's shares: this flavor's alone, summed over
        flavors by :func:`quota_trees` (setting it forgets the shares read before).
        """
        return self._lendable

    @lendable.setter
    def lendable(self, value: dict[str, int]) -> None:
        self._lendable = value
        self._shares.clear()

    def _post(self, name: str) -> None:
        for kid in self.nodes[name].children:
            self._post(kid)
        self.order.append(name)

    def set_usage(self, queue_usage: dict[str, int]) -> None:
        """Queues' usage as given; Cohorts' recomputed bottom-up."""
        self.set_queue_usage([queue_usage.get(node.name, 0) for node in self._queues])

    @property
    def queue_names(self) -> list[str]:
        """The ClusterQueues, in the order :meth:`set_queue_usage` reads its list."""
        return [node.name for node in self._queues]

    def set_queue_usage(self, usage: list[int]) -> None:
        """:meth:`set_usage` given each queue's usage in :attr:`queue_names`' order."""
        self._memo.clear()
        self._shares.clear()
        for node, used in zip(self._queues, usage, strict=True):
            node.usage = used
        for node, children in self._cohorts:
            used = 0
            for kid in children:
                over = kid.usage - kid.kept
                if over > 0:
                    used += over
            node.usage = used

    def borrowing(self) -> bool:
        """Whether some queue uses more than its nominal quota (a reclaim could find one)."""
        return any(node.usage > node.nominal for node in self._queues)

    def add_usage(self, name: str, gpus: int) -> None:
        """Admit ``gpus`` to queue ``name``: what exceeds its unused guaranteed goes up."""
        self._memo.clear()
        shares = self._shares
        node = self.nodes[name]
        while True:
            local = max(0, node.kept - node.usage)
            node.usage += gpus
            shares.pop(node.name, None)
            if node.parent is None or gpus <= local:
                return
            gpus -= local
            node = self.nodes[node.parent]

    def shift(self, name: str, gpus: int) -> None:
        """Change queue ``name``'s usage by ``gpus`` (either sign); Cohorts' follow.

        A Cohort's usage is its children's usage beyond their guaranteed quota, so only the
        change in that excess goes up a level (what :meth:`set_usage` would recompute).
        """
        self._memo.clear()
        shares, nodes = self._shares, self.nodes
        node = nodes[name]
        while gpus:
            kept = node.kept
            before = node.usage - kept
            node.usage += gpus
            after = node.usage - kept
            shares.pop(node.name, None)
            gpus = (after if after > 0 else 0) - (before if before > 0 else 0)
            if node.parent is None:
                return
            node = nodes[node.parent]

    def available(self, name: str) -> int:
        """GPUs ``name`` may still take: unused guaranteed + the parent's, within limits."""
        memo = self._memo.get(name)
        if memo is not None:
            return memo
        node = self.nodes[name]
        if node.parent is None:
            out = node.subtree - node.usage
        else:
            local = max(0, node.kept - node.usage)
            parent = self.available(node.parent)
            if node.borrowing_limit is not None:
                stored = node.subtree - node.kept
                used = max(0, node.usage - node.kept)
                parent = min(parent, stored - used + node.borrowing_limit)
            out = local + parent
        self._memo[name] = out
        return out

    def available_less(self, name: str, gpus: int) -> int:
        """:meth:`available` of queue ``name`` were it using ``gpus`` GPUs fewer.

        What :meth:`shift` by ``-gpus``, :meth:`available`, then :meth:`shift` back would
        read, without changing anything: the change in each node's usage up the path,
        then the path's availability from the root down.
        """
        nodes = self.nodes
        path = self.path(name)
        usage: list[int] = []
        delta = -gpus
        for n in path:
            node = nodes[n]
            usage.append(node.usage + delta)
            if delta:
                kept = node.kept
                delta = max(0, node.usage + delta - kept) - max(0, node.usage - kept)
        out = 0
        for n, used in zip(reversed(path), reversed(usage), strict=True):
            node = nodes[n]
            if node.parent is None:
                out = node.subtree - used
                continue
            kept = node.kept
            local = max(0, kept - used)
            if node.borrowing_limit is not None:
                out = min(out, node.subtree - kept - max(0, used - kept) + node.borrowing_limit)
            out = local + out
        return out

    def potential(self, name: str) -> int:
        """Kueue's ``potentialAvailable``: what ``name`` could take with nothing in use.

        The root's subtree quota; below it, the node's guaranteed quota plus its parent's
        potential, capped by ``borrowingLimit`` (subtree quota + the limit).
        """
        node = self.nodes[name]
        if node.parent is None:
            return node.subtree
        out = node.guaranteed + self.potential(node.parent)
        if node.borrowing_limit is not None:
            out = min(out, node.subtree + node.borrowing_limit)
        return out

    def excess(self, name: str) -> int:
        """GPUs ``name`` uses beyond its subtree quota on this flavor (what it borrows)."""
        node = self.nodes[name]
        return max(0, node.usage - node.subtree)

    def share(self, name: str, extra: int = 0) -> float:
        """Kueue's dominant resource share, with ``extra`` GPUs more in use on this flavor.

        What ``name`` borrows (usage beyond subtree quota, summed over the flavors of its
        resource group: this one's plus :attr:`elsewhere`) ÷ the parent's lendable GPUs
        over every flavor (:attr:`lendable`) ÷ weight; 0 when it borrows nothing or is the
        root, infinite for a borrower of weight 0.
        """
        if not extra:
            found = self._shares.get(name)
            if found is not None:
                return found
        node = self.nodes[name]
        borrowed = max(0, node.usage + extra - node.subtree) + self._elsewhere.get(name, 0)
        if borrowed <= 0 or node.parent is None:
            out = 0.0
        elif node.weight <= 0:
            out = math.inf
        else:
            out = borrowed / max(self._lendable[node.parent], 1) / node.weight
        if not extra:
            self._shares[name] = out
        return out

    def path(self, name: str) -> tuple[str, ...]:
        """``name`` and its ancestors, up to the root (the tree's shape: cached)."""
        found = self._paths.get(name)
        if found is None:
            up = self.nodes[name].parent
            found = self._paths[name] = (name, *(self.path(up) if up is not None else ()))
        return found

    def share_without(self, name: str, gpus: int, at: str) -> float:
        """:meth:`share` of ``at`` were queue ``name`` using ``gpus`` GPUs fewer.

        ``at`` is ``name`` or one of its ancestors. What :meth:`shift` by ``-gpus`` then
        :meth:`share` would read, without changing anything.
        """
        node = self.nodes[name]
        delta = -gpus
        while node.name != at:
            before = max(0, node.usage - node.kept)
            delta = max(0, node.usage + delta - node.kept) - before
            if not delta or node.parent is None:
                return self.share(at)  # the change does not reach ``at``
            node = self.nodes[node.parent]
        return self.share(at, delta)

    def path_shares(self, name: str, extra: int) -> tuple[tuple[str, float], ...]:
        """(node, share) from the root's children down to the queue, ``extra`` GPUs admitted.

        Two candidates are compared (:func:`tournament_order`) at the first level where
        their paths part: the hierarchical tournament, where at each Cohort the child
        subtree whose candidate gives it the lowest share goes first.
        """
        path = []
        node = name
        while self.nodes[node].parent is not None:
            path.append(node)
            node = self.nodes[node].parent
        return tuple((n, self.share(n, extra)) for n in reversed(path))


class NodeRoom:
    """Free GPUs per node of one cluster were some running jobs gone: a what-if, kept current.

    Preemption searches ask "would the workload fit on the nodes were these targets
    preempted?" after every target they add or drop; the room moves each target's GPUs
    back onto its nodes as it is taken (and off as it is given back), so each question
    costs O(GPUs per node), not a walk over the cluster's nodes and jobs.
    """

    __slots__ = ("count", "free", "gpn", "gpus_of", "nodes_of")

    def __init__(self, sim: EngineView, c: int) -> None:
        self.gpn = sim.gpn[c]
        self.free = sim.free_gpus(c)
        self.count = [0] * (self.gpn + 1)  # nodes by free GPUs
        for f in self.free:
            self.count[f] += 1
        self.gpus_of, self.nodes_of = sim.jobs.gpus, sim.nodes_of

    def _move(self, job: int, sign: int) -> None:
        g = self.gpus_of[job]
        per = sign * (self.gpn if g >= self.gpn else g)
        free, count = self.free, self.count
        for node in self.nodes_of(job):
            count[free[node]] -= 1
            free[node] += per
            count[free[node]] += 1

    def copy(self) -> NodeRoom:
        """Another room, the same what-if, moved on its own from here."""
        other = NodeRoom.__new__(NodeRoom)
        other.gpn, other.gpus_of, other.nodes_of = self.gpn, self.gpus_of, self.nodes_of
        other.free, other.count = list(self.free), list(self.count)
        return other

    def take(self, job: int) -> None:
        """Count running ``job``'s GPUs as free (it would be preempted)."""
        self._move(job, 1)

    def give_back(self, job: int) -> None:
        """Undo :meth:`take`."""
        self._move(job, -1)

    def fits(self, gpus: int) -> bool:
        """Whether a job of ``gpus`` GPUs would fit: whole free nodes for a gang, else a node."""
        gpn = self.gpn
        if gpus >= gpn:
            return self.count[gpn] >= -(-gpus // gpn)
        return any(self.count[f] for f in range(gpus, gpn + 1))


class Highest:
    """A fair-sharing search's next queue: from the root, the highest-share children down.

    ``holds``: node → how many of ``queues`` lie at or below it (the root among them).
    Each Cohort on the candidates' paths keeps a heap of its children that hold a
    candidate, by (share, name), the highest first. A search changes the shares on one
    queue's path at a time (it takes from that queue: :meth:`taken` pushes each node's
    new share into its parent's heap) and shares only fall, so an entry whose share is
    no longer the node's is an old, higher one: dropped when it comes to the top, as is
    an entry of a node that no longer holds a candidate. The next question costs a look
    at the top of a heap per level, not a walk over every child.
    """

    __slots__ = ("heaps", "holds", "queues", "root", "tree")

    def __init__(self, tree: FlavorTree, holds: dict[str, int], queues: dict[str, Any]) -> None:
        self.tree, self.holds, self.queues = tree, holds, queues
        self.heaps: dict[str, list[tuple[float, int, str]]] | None = None
        self.root = ""

    def _build(self) -> None:
        tree, holds = self.tree, self.holds
        nodes, share, rank = tree.nodes, tree.share, tree.rank
        heaps = {}
        for n in holds:
            node = nodes[n]
            if node.parent is None:
                self.root = n
            if n not in self.queues:
                heap = [(-share(k), -rank[k], k) for k in node.children if k in holds]
                heapq.heapify(heap)
                heaps[n] = heap
        self.heaps = heaps

    def forget(self) -> None:
        """``holds`` changed (a queue ran out of candidates): its entries go when met."""

    def taken(self, name: str) -> None:
        """Queue ``name``'s usage fell: the new shares on its path go into the heaps."""
        heaps = self.heaps
        if heaps is None:
            return  # built at the first question, from the shares then
        share, rank = self.tree.share, self.tree.rank
        path = self.tree.path(name)
        for k, parent in zip(path, path[1:], strict=False):
            if parent in heaps:
                heapq.heappush(heaps[parent], (-share(k), -rank[k], k))

    def __call__(self) -> str:
        """The queue among ``queues`` reached by the highest (share, name) children."""
        if self.heaps is None:
            self._build()
        heaps, holds, queues = self.heaps, self.holds, self.queues
        share, known = self.tree.share, self.tree._shares
        top = self.root
        while top not in queues:
            heap = heaps[top]
            while True:
                negative, _, k = heap[0]
                if k in holds:
                    now = known.get(k)
                    if now is None:
                        now = share(k)
                    if -negative == now:
                        break
                heapq.heappop(heap)
            top = k  # a candidate lies below ``top``: some child is on its path
        return top


def tournament_order(a: tuple, b: tuple) -> int:
    """Compare two candidates ``(path_shares, key, ...)``: Kueue's fair-sharing tournament.

    At the first Cohort where their paths part, the child with the lower share (with
    its candidate admitted) wins; a tie, or the same path, goes to the earlier key
    (submit order). Shares above the parting level are the same subtree's and are not
    compared: two workloads of one team are decided inside the team, not by how much
    each would add to the team's share.
    """
    for (na, sa), (nb, sb) in zip(a[0], b[0], strict=False):
        if na != nb:
            if sa != sb:
                return -1 if sa < sb else 1
            break
    return -1 if a[1] < b[1] else (1 if a[1] > b[1] else 0)


@dataclass(frozen=True)
class QueueSettings:
    """What a ClusterQueue says about order and preemption."""

    strict_fifo: bool
    reclaim: bool  # reclaimWithinCohort is Any (equal priorities: LowerPriority never does)
    lower_priority: bool = False  # withinClusterQueue is LowerPriority


def quota_trees(objects: list[dict[str, Any]], one_kueue: bool = True
                ) -> tuple[dict[str, FlavorTree], dict[str, str], dict[str, QueueSettings]]:
    """Read the quota trees back from Kueue objects, as Kueue would.

    Returns (cluster id → its flavor's tree, project id → its ClusterQueue's name,
    queue name → settings). Nodes are named by their Kubernetes names; the ids come
    from the ``gpu-planner.io/id`` annotations. ``one_kueue``: the flavors are one
    manifest set in one Kueue, so shares are summed over them; False: a Kueue per
    cluster (the per-cluster export), each flavor's shares its own.
    """
    flavors = {o["metadata"]["name"]: object_id(o) for o in objects
               if o["kind"] == "ResourceFlavor"}
    cohorts = [o for o in objects if o["kind"] == "Cohort"]
    queues = [o for o in objects if o["kind"] == "ClusterQueue"]
    trees: dict[str, FlavorTree] = {}
    for flavor, cluster in sorted(flavors.items()):
        nodes: dict[str, QuotaNode] = {}
        for o in cohorts + queues:
            spec = o["spec"]
            parent = spec.get("parentName") if o["kind"] == "Cohort" else spec.get("cohortName")
            weight = float(spec.get("fairSharing", {}).get("weight", 1))
            node = QuotaNode(o["metadata"]["name"], parent, weight, o["kind"] == "ClusterQueue")
            for group in spec.get("resourceGroups", []):
                for f in group["flavors"]:
                    if f["name"] != flavor:
                        continue
                    for r in f["resources"]:
                        if r["name"] != GPU:
                            continue
                        node.covers = node.queue
                        node.nominal = int(r["nominalQuota"])
                        node.borrowing_limit = (int(r["borrowingLimit"])
                                                if "borrowingLimit" in r else None)
                        node.lending_limit = (int(r["lendingLimit"])
                                              if "lendingLimit" in r else None)
            nodes[node.name] = node
        trees[cluster] = FlavorTree(nodes)
    # one Kueue holds every flavor: a Cohort's lendable GPUs are summed over them (Kueue's
    # calculateLendable), as a node's borrowing is (FlavorTree.elsewhere)
    if one_kueue:
        lendable: dict[str, int] = {}
        for tree in trees.values():
            for name, gpus in tree.lendable.items():
                lendable[name] = lendable.get(name, 0) + gpus
        for tree in trees.values():
            tree.lendable = lendable
    project_queue = {object_id(o): o["metadata"]["name"] for o in queues}
    settings = {o["metadata"]["name"]: QueueSettings(
        o["spec"].get("queueingStrategy", "BestEffortFIFO") == "StrictFIFO",
        o["spec"].get("preemption", {}).get("reclaimWithinCohort", "Never") == "Any",
        o["spec"].get("preemption", {}).get("withinClusterQueue", "Never") == "LowerPriority")
        for o in queues}
    return trees, project_queue, settings


TOURNAMENT = cmp_to_key(tournament_order)


@dataclass(frozen=True)
class KueueReplayOptions:
    """What the Kueue replay runs under that is not in the export (the module docstring).

    Kueue's Configuration and what the cycle feeds the export; the export's options are
    its :class:`~planner.exporters.kueue.KueueExport` record.
    """

    #: False: Kueue without its fairSharing section
    fair_sharing: bool = True
    #: Fair Sharing's own preemption (``preemptionStrategies``
    #: [LessThanOrEqualToFinalShare, LessThanInitialShare]): a pending workload beyond
    #: its nominal quota preempts borrowed work of queues with a higher share. Part of
    #: what Kueue does with the export's ``reclaimWithinCohort: Any`` once Fair Sharing
    #: is on; False replays only the lender's reclaim (the replay before)
    fair_preemption: bool = True
    #: the Kueue Configuration's ``fairSharing.preemptionStrategies`` replayed: the
    #: configuration the docs ask for, [LessThanOrEqualToFinalShare] alone (Kueue's
    #: default adds LessThanInitialShare, which preempts more for no gain)
    strategies: tuple[str, ...] = (STRATEGIES[0],)
    #: the export's WorkloadPriorityClasses, each job carrying its class's label
    #: (allocated work ``gpu-planner-budget``, unallocated ``gpu-planner-unallocated``):
    #: a queue admits higher priorities first and ``withinClusterQueue: LowerPriority``
    #: preempts its own lower-priority work; False: every workload at priority 0 (the
    #: export before the classes, or a site whose jobs carry no class)
    priorities: bool = True
    #: the export's widening (the executor contract's rule 6): at each replan a
    #: project with budget left, not ahead of its pace, holds nominal quota for its
    #: widest waiting gang on each cluster, out of the GPUs no project holds
    #: (:func:`planner.exporters.kueue.widen_to_pending`, fed the queue as ``planner
    #: cycle`` feeds it the Workloads); False: the export before
    widens: bool = True
    #: the export's rule 7 (late arrivals): at each replan the pool keeps a node of
    #: each cluster unheld (:data:`RESERVE_NODES`, :func:`keep_reserve`), and every
    #: hour between replans a gang waiting in a queue the plan gave no nominal quota
    #: there gets its GPUs out of the pool (:func:`widen_late`, what the hourly
    #: ``planner export --late`` does to the applied set); False: the export before
    late: bool = True

    def __post_init__(self) -> None:
        """Refuse strategies Kueue does not have or orders it does not take."""
        strategies = self.strategies
        unknown = set(strategies) - set(STRATEGIES)
        if unknown or not strategies or strategies[0] != STRATEGIES[0]:
            raise ValueError(f"preemptionStrategies {strategies!r}: [{STRATEGIES[0]}] or "
                             f"{list(STRATEGIES)} (Kueue's default)")


#: the replay of the shipped configuration: Kueue configured as the docs ask
AS_SHIPPED = KueueReplayOptions()


class KueueReplayPolicy(Replanner):
    """``planner-kueue``: the replanner holding a :class:`KueueExecutor`."""

    def __init__(self, model: ModelConfig | None = None, check_every: int = 30,
                 reservation_requests: bool = False, export: KueueExport = SHIPPED,
                 gang_wait_hours: float | None = math.inf,
                 demand: DemandSource | None = None,
                 options: KueueReplayOptions = AS_SHIPPED) -> None:
        # No reservation requests for waiting gang jobs by default (``math.inf``, as the
        # ``planner`` and ``planner-slurm`` defaults): a request becomes reserved quota,
        # which the export never lends (``lendingLimit``), so it idles until the gang job
        # fits on the nodes: requests cost occupancy, so they are off unless asked.
        # ``reservation_requests``: replans keep the scenario's own reservation requests
        # beside the waiting gang jobs' (:meth:`Replanner.gang_requests`)
        super().__init__(KueueExecutor(export, options), model=model,
                         check_every=check_every, gang_wait_hours=gang_wait_hours,
                         demand=demand, reservation_requests=reservation_requests)


class KueueExecutor:
    """``planner-kueue``'s executor: Kueue as the exported objects set it up (module docstring)."""

    name = "planner-kueue"
    work_conserving = False  # idle GPUs stay idle where no queue's quota reaches them
    protects_min_runtime = False  # Kueue cannot protect a min runtime

    def __init__(self, export: KueueExport = SHIPPED,
                 options: KueueReplayOptions = AS_SHIPPED) -> None:
        self.options = options
        self.fair_sharing = options.fair_sharing  # (KueueReplayOptions)
        self.fair_preemption = options.fair_preemption and options.fair_sharing
        self.strategies = tuple(options.strategies)
        #: the export's options (:class:`~planner.exporters.kueue.KueueExport`): ``SHIPPED``,
        #: the very record ``planner export --to kueue`` writes with, unless a variant is
        #: asked for. ``fill`` (False: borrowing capped at the opportunistic grant, and
        #: flavors only where the plan grants something); ``weights``, the ClusterQueue
        #: weights ("org" or "pace"); ``takes_back``, the executor contract's rule 5 (a
        #: project ahead of its budget pace at a replan gets no nominal quota beyond its
        #: reservations, so its work borrows and the others reclaim it; False: the export
        #: before the rule); ``overdrawn_at_pool``, rule 8 (a project a whole budget ahead
        #: of its pace has its ClusterQueue in the pool Cohort with weight 0: it borrows
        #: only what no other queue can use, and loses it to any other queue's pending
        #: workload; False: in its team, as before the rule); ``reserve_nodes``, rule 7's
        #: reserve (applied with ``late`` and ``fill``)
        self.export = export
        self.fill = export.fill
        self.priorities = options.priorities
        self.widens = options.widens
        self.late = options.late
        #: (the replay's jobs, each one's priority): :meth:`_priority`'s table
        self._priorities: tuple[Any, list[int]] = (None, [])

    def _priority(self, sim: EngineView, job: int) -> int:
        """The Workload's priority: its WorkloadPriorityClass's value (0 without classes)."""
        if not self.priorities:
            return 0
        jobs, table = self._priorities
        if jobs is not sim.jobs:  # a job's class is fixed: every job's, once per trace
            jobs = sim.jobs
            table = [PRIORITY_CLASSES[priority_class(jobs.allocated[j],
                                                     jobs.gpus[j] >= sim.gpn[jobs.cluster[j]])]
                     for j in range(jobs.n)]
            self._priorities = (jobs, table)
        return table[job]

    def job_key(self, sim: EngineView, job: int) -> tuple:
        """``BestEffortFIFO``'s order: higher priority first, then submit order."""
        return (-self._priority(sim, job), sim.jobs.submit[job], job)

    def begin(self, sim: EngineView, model: ModelConfig) -> None:
        """No Kueue objects before the first replan."""
        self.objects: list[dict[str, Any]] = []
        self.trees: list[FlavorTree | None] = [None] * len(sim.cluster_ids)
        self.one_kueue = True
        self.body: dict[str, Any] | None = None  # the plan in force
        self.queue: list[str | None] = [None] * len(sim.projects)
        self.project_of: dict[str, int] = {}
        self.settings: dict[str, QueueSettings] = {}
        self.kueue_allowed = allowed_clusters(sim.scenario.budgets)
        self._failed: set[int] = set()
        self._no_within: set[int] = set()
        self._preempted: set[int] = set()
        self._splits: dict[int, dict[tuple[str, str], tuple[str, str]]] = {}
        #: per cluster, the fair-sharing searches that found nothing since what they read
        #: last changed: ((trees' generation, the flavor's version, the other flavors'
        #: borrowing), {(queue, GPUs held, GPUs)}); the same again finds nothing again
        #: (:meth:`_fair_targets`)
        self._hopeless: dict[int, tuple[tuple, set[tuple[str, int, int]]]] = {}
        self._generation = 0
        #: per cluster, project → (generation, its project version) when last retagged
        self._tagged: list[dict[int, tuple[int, int]]] = []
        #: per cluster, ((generation, version), the jobs :meth:`_within_queue` found
        #: no room for then): the same again finds none again
        self._no_room: list[tuple[tuple[int, int] | None, set[int]]] = []
        self._elsewhere: frozenset = frozenset()
        self._slots: list[list[int | None]] = []
        self._queue_nodes: list[list[tuple[str, QuotaNode]]] = []
        #: per flavor, ((generation, its version), node → GPUs it borrows there)
        self._excesses: dict[int, tuple[tuple[int, int], dict[str, int]]] = {}
        #: per cluster, ((generation, version), the room with all borrowed work gone)
        self._every_gone: dict[int, tuple[tuple[int, int], NodeRoom]] = {}
        #: per cluster, ((generation, version, the other flavors' borrowing), what
        #: :meth:`_lines` read then)
        self._kept_lines: dict[int, tuple[tuple, tuple]] = {}
        #: per cluster, ((generation, version), :meth:`_borrowers` then)
        self._borrowing: dict[int, tuple[tuple[int, int], list[tuple[str, QuotaNode]]]] = {}

    def hold_reservations(self, sim: EngineView, body: dict,
                          request_job: Mapping[str, int]) -> None:
        """No node holds: Kueue keeps a reservation as quota (nominal with a lendingLimit).

        The exported ClusterQueue gives the project the reserved GPUs as nominal quota it
        never lends; the gang job is admitted when its queue's quota and the cluster's
        free GPUs allow it (reclaiming borrowed GPUs), as Kueue would; no node is drained.
        """

    def apply_first_period(self, sim: EngineView, body: dict, first: str) -> None:
        """The first period's Kueue objects, built by the exporter; the quotas from them."""
        period = body["periods"][0]
        pending = self._pending_gangs(sim) if self.widens else None
        export = self.export if self.late and self.fill else replace(self.export,
                                                                     reserve_nodes=0)
        self.objects = export.period_objects(body, sim.tree, period["start"], period["end"],
                                             allowed=self.kueue_allowed, pending=pending)
        self.body = body
        #: one Kueue for every cluster, as the single manifest set is applied (above
        #: MAX_FLAVORS clusters the export writes a set per cluster, for a Kueue each)
        self.one_kueue = not needs_per_cluster(body)
        self._read_objects(sim)

    def _read_objects(self, sim: EngineView) -> None:
        """The quota trees, queues and settings from :attr:`objects`, as Kueue reads them."""
        trees, project_queue, self.settings = quota_trees(self.objects, self.one_kueue)
        self._splits = {}
        self._generation += 1  # new trees: what was computed from the old ones is stale
        self._hopeless.clear()
        self._excesses.clear()
        self._every_gone.clear()
        self._kept_lines.clear()
        self._tagged = [{} for _ in sim.cluster_ids]
        self._no_room = [(None, set()) for _ in sim.cluster_ids]
        self.trees = [trees.get(c) for c in sim.cluster_ids]
        self.queue = [project_queue.get(p) for p in sim.projects]
        self.project_of = {q: p for p, q in enumerate(self.queue) if q is not None}
        #: per cluster, the project of each of its tree's queues (FlavorTree.queue_names)
        self._slots = [[self.project_of.get(q) for q in tree.queue_names] if tree else []
                       for tree in self.trees]
        #: per cluster, its tree's (queue, node) of every project's ClusterQueue
        self._queue_nodes = [[(q, tree.nodes[q]) for q in self.project_of
                              if q in tree.nodes and tree.nodes[q].queue] if tree else []
                             for tree in self.trees]

    def before_replan(self, sim: EngineView, now: float) -> None:
        """Nothing: Kueue's objects change only with a plan (or rule 7, after)."""

    def after_replan(self, sim: EngineView, now: float, replanned: bool) -> bool:
        """Every hour without a replan, rule 7's widening.

        Between replans the widest waiting gang (allocated, at least a node's GPUs) of each
        project and cluster goes to :func:`planner.tick.late_step` on the objects in force,
        the projects most owed first, as ``planner tick`` applies it each minute; True when
        it served one (quotas changed), as after a replan.
        """
        if replanned:
            return True
        return self._widen_late(sim)

    def _widen_late(self, sim: EngineView) -> bool:
        """Rule 7 on the objects in force: True when a waiting gang was given quota."""
        if not self.late or self.body is None:
            return False
        widest = self._pending_gangs(sim)
        if not widest or not late_step(self.body, self.objects, widest):
            return False
        self._read_objects(sim)
        self.reclass(sim)
        return True

    def booked(self, sim: EngineView) -> np.ndarray:
        """(P, K, H) GPU-hours the replans see as usage: every admitted Workload's."""
        return sim.used

    def read_back(self, sim: EngineView, asked: AbstractSet[int], as_of: pd.Timestamp,
                  hours_left: Callable[[EngineView, int], float]) -> list[QueuedJob]:
        """The queue as Workloads JSON, read back by ``planner ingest kueue --demand``'s code."""
        items = workload_items(sim, hours_left, as_of, asked)
        text = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
        queued, _, problems = queue_items("workloads.json", json.loads(text)["items"], as_of)
        if problems:
            raise RuntimeError(f"the replay's Workloads do not read back: {problems[:3]}")
        return workload_jobs(queued, sim.scenario)[0]

    def _pending_gangs(self, sim: EngineView) -> dict[tuple[str, str], int]:
        """(project, cluster) -> GPUs of the widest waiting gang (allocated, ≥ a node).

        What :func:`planner.ingest.pending.pending_gangs` reads from the Workloads: the
        pending workloads of class ``gpu-planner-budget-gang``, each on its job's cluster.
        """
        widest: dict[tuple[str, str], int] = {}
        for project, cluster, gpus in self._waiting_gangs(sim):
            widest[(project, cluster)] = max(widest.get((project, cluster), 0), gpus)
        return widest

    def _waiting_gangs(self, sim: EngineView) -> list[tuple[str, str, int]]:
        """(project, cluster, GPUs) of each waiting gang (allocated, ≥ a node), engine order."""
        jobs = sim.jobs
        return [(sim.projects[jobs.project[job]], sim.cluster_ids[jobs.cluster[job]],
                 int(jobs.gpus[job])) for job in sim.waiting_jobs()
                if jobs.allocated[job] and jobs.gpus[job] >= sim.gpn[jobs.cluster[job]]]

    def reclass(self, sim: EngineView) -> None:
        """Running jobs, oldest first: nominal within the queue's nominal quota, else borrowed."""
        for c in range(len(sim.cluster_ids)):
            self._retag(sim, c, set(range(len(sim.projects))))

    def _retag(self, sim: EngineView, c: int, projects: set[int]) -> None:
        """Each queue's work within its nominal quota, higher priority and oldest first.

        What is left is borrowed: the candidates Kueue preempts from a borrowing queue,
        lowest priority first (:data:`BORROWED_LOW`, :data:`BORROWED`, then
        :data:`BORROWED_GANG`), then most recently admitted.
        """
        tree = self.trees[c]
        # a project's tags follow from its own running work on ``c`` and the trees alone:
        # one retagged since neither changed keeps them
        done = self._tagged[c]
        projects = {p for p in projects
                    if done.get(p) != (self._generation, sim.project_version(c, p))}
        if not projects:
            return
        taken: dict[int, int] = {}
        running = sim.running_jobs(c)  # oldest run first
        if self.priorities:
            running.sort(key=lambda j: -self._priority(sim, j))  # stable: oldest first
        for job in running:
            p = sim.jobs.project[job]
            if p not in projects:
                continue
            taken[p] = taken.get(p, 0) + sim.held(job)
            q = self.queue[p]
            nominal = tree.nodes[q].nominal if tree is not None and q is not None else 0
            sim.retag(job, self._tag(sim, job, taken[p] <= nominal))
        for p in projects:
            done[p] = (self._generation, sim.project_version(c, p))

    def _tag(self, sim: EngineView, job: int, within: bool) -> str:
        """``job``'s tag: within its queue's nominal quota or borrowed, by its priority."""
        pair = TAGS[self._priority(sim, job)] if self.priorities else (NOMINAL, BORROWED)
        return pair[0] if within else pair[1]

    def _low_held(self, sim: EngineView, c: int, p: int | None = None, below: int = TOP) -> bool:
        """Whether work of a priority under ``below`` runs on ``c`` (of ``p``'s, when given)."""
        if not self.priorities:
            return False
        tags = TAGS_BELOW[below]
        if p is None:
            return any(sim.held_of(c, t).any() for t in tags)
        return any(sim.held_under(c, p, t) > 0 for t in tags)

    # -- admission ---------------------------------------------------------------------------

    def _sync(self, sim: EngineView, c: int, tree: FlavorTree) -> None:
        """``tree``'s usage (cluster ``c``'s flavor) as the engine holds it."""
        held = sim.held_project[:, c].tolist()
        tree.set_queue_usage([0 if p is None else held[p] for p in self._slots[c]])

    def _borrowed_elsewhere(self, sim: EngineView, c: int, tree: FlavorTree) -> None:
        """Set what each node borrows on the other flavors, for ``c``'s shares.

        Kueue computes a ClusterQueue's or Cohort's share over every flavor of the
        resource (one Kueue, one manifest set). Only ``c``'s usage changes while ``c`` is
        scheduled, so the other flavors' borrowing is read once, synced from the engine.
        """
        elsewhere: dict[str, int] = {}
        for f, other in enumerate(self.trees if self.one_kueue else ()):
            if f == c or other is None:
                continue
            for name, gpus in self._excess(sim, f, other).items():
                elsewhere[name] = elsewhere.get(name, 0) + gpus
        tree.elsewhere = elsewhere
        self._elsewhere = frozenset(elsewhere.items())

    def _excess(self, sim: EngineView, f: int, tree: FlavorTree) -> dict[str, int]:
        """Node → GPUs it borrows on flavor ``f`` (only those borrowing), synced from the engine.

        Follows from ``f``'s running work and the trees alone: kept while neither changed
        (the engine's version of ``f``, the policy's generation).
        """
        now = (self._generation, sim.version(f))
        seen, excess = self._excesses.get(f, (None, None))
        if seen != now or excess is None:
            self._sync(sim, f, tree)
            excess = {name: gpus for name in tree.nodes if (gpus := tree.excess(name))}
            self._excesses[f] = (now, excess)
        return excess

    def _size_held(self, sim: EngineView, c: int, gpus: int) -> int:
        gpn = sim.gpn[c]
        return -(-gpus // gpn) * gpn if gpus >= gpn else gpus

    def _candidate(self, sim: EngineView, c: int, p: int, tree: FlavorTree
                   ) -> tuple[int, bool | str] | None:
        """The queue's next workload to try, and whether it must preempt to start.

        ``True``: by reclaim or Fair Sharing; ``WITHIN``: only its own queue's
        lower-priority work (``withinClusterQueue``), before anything else of the queue.
        """
        q = self.queue[p]
        node = tree.nodes[q]
        queue = sim.queues[c].get(p)
        if queue is None or not queue.count:
            return None
        settings = self.settings[q]
        room = tree.available(q)
        within = node.nominal - node.usage

        def fits(size: int) -> bool:
            return self._size_held(sim, c, size) <= room and sim.fits(c, size)

        def reclaimable(size: int) -> bool:
            return self._size_held(sim, c, size) <= within

        if settings.strict_fifo:
            top = queue.head()
            if top is None:
                return None
            size = sim.jobs.gpus[top[1]]
            if fits(size):
                return top[1], False
            return (top[1], True) if settings.reclaim and reclaimable(size) else None
        if self.priorities and settings.lower_priority:
            # the head, by priority: one that does not fit may preempt the queue's own
            # lower-priority work before a lower-priority workload that fits is admitted
            top = queue.head()
            if (top is not None and top[1] not in self._no_within
                    and self._priority(sim, top[1]) > BOTTOM
                    and self._low_held(sim, c, p, self._priority(sim, top[1]))
                    and not fits(sim.jobs.gpus[top[1]])):
                return top[1], WITHIN
        top = queue.head_fit(fits)
        if top is not None:
            return top[1], False
        if settings.reclaim and within > 0:
            top = queue.head_fit(reclaimable)
            if top is not None:
                return top[1], True
        if settings.reclaim and self.fair_preemption:
            top = queue.head()  # the oldest workload: the one Kueue tries first
            if top is not None and top[1] not in self._failed:
                return top[1], True
        return None

    def _victims(self, sim: EngineView, c: int, tree: FlavorTree) -> list[tuple[int, str]]:
        """Borrowing queues' borrowed work, the highest share first, lowest priority first."""
        borrowing = [(-tree.share(q), q) for q, node in self._queue_nodes[c]
                     if node.usage > node.nominal]
        if not borrowing:
            return []
        projects = [self.project_of[q] for _, q in sorted(borrowing)]
        self._retag(sim, c, set(projects))
        return [(p, tag) for p in projects for tag in BORROWED_ORDER]

    def schedule(self, sim: EngineView, c: int) -> None:
        """Kueue's scheduling cycles on one flavor until nothing more is admitted."""
        tree = self.trees[c]
        if tree is None:
            return
        self._sync(sim, c, tree)
        self._borrowed_elsewhere(sim, c, tree)
        self._failed = set()  # jobs whose reclaim failed in this call
        self._no_within = set()  # jobs that cannot preempt their own queue's work in it
        self._preempted = set()  # jobs preempted in this call: they preempt nobody in it
        if not sim.any_fits(c) and not tree.borrowing() and not self._low_held(sim, c):
            return  # nothing fits on the nodes, nobody borrows, nothing to preempt within
        while True:
            entries = []
            for p in sim.waiting_projects(c):
                q = self.queue[p]
                if q is None or not tree.nodes[q].covers:
                    continue  # no flavor for this cluster: inadmissible
                found = self._candidate(sim, c, p, tree)
                if found is None:
                    continue
                job, reclaim = found
                need = sim.held(job)
                order = tree.path_shares(q, need) if self.fair_sharing else ()
                entries.append((order, sim.key[job], p, job, reclaim))
            if not entries:
                return
            entries.sort(key=TOURNAMENT)
            admitted = False
            # a head that could not preempt its own queue's work is set aside, and its
            # queue's next workload is tried (Kueue requeues an inadmissible head and takes
            # the next in the following cycle): another pass, even if nothing was admitted
            set_aside = len(self._no_within)
            for _, _, p, job, how in entries:
                if not sim.is_waiting(job):
                    continue
                if self._admit(sim, c, p, job, tree, within_only=how == WITHIN):
                    admitted = True
            if not admitted and len(self._no_within) == set_aside:
                return

    def _quota_without(self, sim: EngineView, c: int, tree: FlavorTree, q: str,
                       removed: dict[str, int]) -> int:
        """What queue ``q`` could admit were ``removed`` GPUs (queue → GPUs) preempted.

        Leaves the tree's usage as it found it (synced with the engine).
        """
        held = sim.held_project[:, c].tolist()
        tree.set_usage({name: held[p] - removed.get(name, 0)
                        for name, p in self.project_of.items()})
        out = tree.available(q)
        self._sync(sim, c, tree)
        return out

    def _reclaim_quota(self, sim: EngineView, c: int, tree: FlavorTree, q: str, need: int,
                       victims: list[tuple[int, str]]) -> list[int] | None:
        """The fewest borrowed workloads whose preemption leaves ``need`` GPUs for ``q``.

        Taken in the engine's victim order (Kueue preempts only when that makes the
        workload fit in quota); None when even all of them would not.
        """
        jobs = sim.victim_jobs(c, victims)
        everything: dict[str, int] = {}
        for v in jobs:
            name = self.queue[sim.jobs.project[v]]
            everything[name] = everything.get(name, 0) + sim.held(v)
        if self._quota_without(sim, c, tree, q, everything) < need:
            return None
        removed: dict[str, int] = {}
        for i, v in enumerate(jobs):
            name = self.queue[sim.jobs.project[v]]
            removed[name] = removed.get(name, 0) + sim.held(v)
            if self._quota_without(sim, c, tree, q, removed) >= need:
                return jobs[:i + 1]
        return None  # pragma: no cover - everything was enough above

    def _admit(self, sim: EngineView, c: int, p: int, job: int, tree: FlavorTree,
               within_only: bool = False) -> bool:
        q = self.queue[p]
        node = tree.nodes[q]
        need = sim.held(job)
        gpus = sim.jobs.gpus[job]
        if need > tree.available(q) or not sim.fits(c, gpus):
            if self._within_queue(sim, c, p, job, tree):
                pass  # its own queue's lower-priority work preempted: checked below
            elif within_only:
                return False  # the queue's other workloads come next, as before
            elif not (self.settings[q].reclaim and node.usage + need <= node.nominal):
                if not self._fair_preempt(sim, c, p, job, tree):
                    return False
            elif job in self._failed:
                return False  # a reclaim of it already failed at this instant
            elif not self._reclaim(sim, c, q, job, tree):
                return False
            if need > tree.available(q) or not sim.fits(c, gpus):
                self._failed.add(job)  # preempted for nothing: not again at this instant
                return False
        sim.start(job, self._tag(sim, job, node.usage + need <= node.nominal))
        tree.add_usage(q, need)
        return True

    def _within_queue(self, sim: EngineView, c: int, p: int, job: int, tree: FlavorTree) -> bool:
        """``withinClusterQueue: LowerPriority``: preempt the queue's own lower-priority work.

        Candidates: the queue's running workloads on this flavor with a lower priority than
        ``job``'s, lowest priority and most recently admitted first (Kueue's candidate
        order); taken until ``job`` fits (quota and, in the replay, nodes), then minimised
        in reverse. False, with nothing preempted, when even all of them would not make it
        fit: the replay then tries the cohort's candidates (reclaim, Fair Sharing) on their
        own, where Kueue would pool both kinds.
        """
        q = self.queue[p]
        mine = self._priority(sim, job)
        if (not self.priorities or not self.settings[q].lower_priority
                or job in self._no_within or job in self._preempted
                or not self._low_held(sim, c, p, mine)):
            return False
        now = (self._generation, sim.version(c))
        seen, no_room = self._no_room[c]
        if seen == now and job in no_room:
            self._no_within.add(job)
            return False
        cands = [v for v in sim.running_jobs(c)
                 if sim.jobs.project[v] == p and self._priority(sim, v) < mine]
        need, gpus = sim.held(job), sim.jobs.gpus[job]
        targets: list[int] = []
        room = NodeRoom(sim, c)

        def fits() -> bool:
            return tree.available(q) >= need and room.fits(gpus)

        cands.sort(key=lambda v: (self._priority(sim, v), -sim.started_at(v), -v))
        try:
            for v in cands:
                if fits():
                    break
                targets.append(v)
                room.take(v)
                tree.shift(q, -sim.held(v))
            if not targets or not fits():
                self._no_within.add(job)
                if seen != now:  # what the memo knew is stale
                    no_room = set()
                    self._no_room[c] = (now, no_room)
                no_room.add(job)
                return False
            self._drop_spare(sim, tree, targets, fits, room)
        finally:
            # back as the engine holds it (what a sync would set): the targets' GPUs
            # shifted back into q, so the shares off its path stay known
            tree.shift(q, sum(sim.held(v) for v in targets))
        self._preempt(sim, c, tree, targets)
        return True

    def _reclaim(self, sim: EngineView, c: int, q: str, job: int, tree: FlavorTree) -> bool:
        """A lender's reclaim of borrowed work for ``job``; False when it preempted nothing.

        Whether ``job`` then fits (quota and nodes) is :meth:`_admit`'s check.
        """
        need = sim.held(job)
        gpus = sim.jobs.gpus[job]
        victims = self._victims(sim, c, tree)
        # Kueue reclaims only when preempting borrowed work makes the workload fit in
        # quota: without this check the node-based preempt_for below could free node
        # room but too little quota, fail, and the victims be re-admitted, over and
        # over at one instant (the fill export's livelock)
        if need > tree.available(q) and (
                not victims
                or self._reclaim_quota(sim, c, tree, q, need, victims) is None):
            return False
        before = sim.victim_jobs(c, victims)
        if not victims or not sim.preempt_for(job, victims):
            self._sync(sim, c, tree)
            return False
        self._preempted.update(v for v in before if sim.is_waiting(v))
        self._sync(sim, c, tree)
        if need > tree.available(q) and sim.fits(c, gpus):
            # nodes made, quota still short: the rest of the borrowed work Kueue
            # would have preempted for the quota
            victims = self._victims(sim, c, tree)
            more = self._reclaim_quota(sim, c, tree, q, need, victims) if victims else None
            self._preempt(sim, c, tree, more or ())
        return True

    def _preempt(self, sim: EngineView, c: int, tree: FlavorTree, jobs) -> None:
        """Preempt those of ``jobs`` still running (they preempt nobody in this pass)."""
        for v in jobs:
            if sim.is_running(v):
                sim.preempt(v)
                self._preempted.add(v)
        self._sync(sim, c, tree)

    # -- Fair Sharing's preemption --------------------------------------------------------

    def _split(self, tree: FlavorTree, a: str, b: str) -> tuple[str, str]:
        """The children of the lowest common Cohort of ``a`` and ``b`` on their two paths.

        Kueue compares two queues' shares there (hierarchical fair sharing): the queues
        themselves when they share a Cohort, else the subtrees holding them.
        """
        cache = self._splits.setdefault(id(tree), {})
        found = cache.get((a, b))
        if found is not None:
            return found
        pa = [n for n, _ in tree.path_shares(a, 0)]
        pb = [n for n, _ in tree.path_shares(b, 0)]
        found = (pa[-1], pb[-1])  # (two queues never lie on one path)
        for x, y in zip(pa, pb, strict=False):
            if x != y:
                found = (x, y)
                break
        cache[(a, b)] = found
        return found

    def _fair_targets(self, sim: EngineView, c: int, tree: FlavorTree, q: str, job: int
                      ) -> list[int] | None:
        """:meth:`_search_targets`, skipped where the same search found nothing before.

        The search reads the trees (their generation), ``c``'s running work (the engine's
        :meth:`~planner.simulate.engine.Replay.version`, read after the search, whose
        retagging is then a no-op), the other flavors' borrowing, the queue and the
        workload's GPUs; most attempts repeat one that failed at an earlier event while
        nothing they read changed (a submit queues a job and changes none of it).
        """
        asked = (q, sim.held(job), sim.jobs.gpus[job])
        seen, hopeless = self._hopeless.get(c, (None, set()))
        if seen == (self._generation, sim.version(c), self._elsewhere) and asked in hopeless:
            return None
        found = self._search_targets(sim, c, tree, q, job)
        if found is None:
            now = (self._generation, sim.version(c), self._elsewhere)
            if now != seen:  # what was read changed: the old failures say nothing now
                hopeless = set()
                self._hopeless[c] = (now, hopeless)
            hopeless.add(asked)
        return found

    def _search_targets(self, sim: EngineView, c: int, tree: FlavorTree, q: str, job: int
                        ) -> list[int] | None:
        """Kueue's fair-sharing preemption targets for ``job`` of queue ``q``, or None.

        Candidates: the borrowed workloads of the other queues that borrow (usage above
        nominal; their most recently admitted work, in the engine's victim order). With
        the preemptor's workload counted in its queue, the queue (subtree) with the
        highest share is taken first, going down the cohort tree from the root; a
        candidate is a target under ``LessThanOrEqualToFinalShare`` when the preemptor's
        share with its workload is at most the target's share without the candidate
        (shares compared at the children of the two queues' lowest common Cohort), after
        which the queue is picked afresh; candidates that fail are tried once more under
        ``LessThanInitialShare`` (the preemptor's new share strictly below the target's
        share; the first candidate of each queue, highest share first). It stops once the
        workload fits (quota and, in the replay, nodes); then, in reverse, drops every
        target without which it still fits. None when it cannot be made to fit.
        """
        need = sim.held(job)
        gpus = sim.jobs.gpus[job]
        # quick exit (most attempts): no other borrowing queue's share exceeds the
        # preemptor's new share at their split, so neither strategy can pass
        borrowers = self._borrowers(sim, c)
        tree.shift(q, need)
        try:
            if not self._hope(tree, q, borrowers):
                return None
        finally:
            tree.shift(q, -need)
        victims, lines, held_of, least = self._lines(sim, c, tree)
        me = self.project_of[q]
        cands = {self.queue[p]: deque(vs) for p, vs in lines.items() if p != me}
        if not cands:
            return None
        queue_of = {v: y for y, line in cands.items() for v in line}
        second = self.strategies[1:] == STRATEGIES[1:]
        # the nodes were every candidate not yet turned down gone: under the first strategy
        # a candidate turned down is never taken, so once this room cannot hold the
        # workload no search can end with it fitting (the nodes' room only shrinks)
        reach = self._reach(sim, c, me, victims)
        if not reach.fits(gpus):
            return None  # not even every candidate gone would make room on the nodes
        if not second and not self._could_fit(sim, c, tree, q, job, cands, held_of, reach):
            return None  # not even every candidate the shares could let go would do
        room = NodeRoom(sim, c)
        targets: list[int] = []

        def pair(y: str) -> tuple[float, float]:
            """(the preemptor's new share, the target's share) at their split."""
            ax, ay = self._split(tree, q, y)
            return tree.share(ax), tree.share(ay)

        def fits() -> bool:  # q's usage holds the workload: without it, is there room?
            return room.fits(gpus) and tree.available_less(q, need) >= need

        def doomed() -> bool:
            """Whether every candidate left would be turned down, the tree as it stands.

            Under the first strategy alone. A candidate's share without it is at most its
            queue's share without the smallest of its line (``least``, read before the
            search: shares rise with usage); while nothing is
            taken nothing moves, so were each of those below the preemptor's share at
            their split, the search would turn every one down and end without fitting
            (the room only grows by a take): no need to walk them.
            """
            for z, left in cands.items():
                if left:
                    az, bz = self._split(tree, q, z)
                    if tree.share(az) <= tree.share_without(z, least[z], bz):
                        return False
            return True

        def take(v: int) -> None:
            targets.append(v)
            room.take(v)
            y = queue_of[v]
            tree.shift(y, -held_of[v])
            highest.taken(y)

        # node → how many candidate queues lie at or below it (the tournament's paths)
        holds: dict[str, int] = {}
        for y in cands:
            for n in tree.path(y):
                holds[n] = holds.get(n, 0) + 1
        highest = Highest(tree, holds, cands)
        tree.shift(q, need)  # the preemptor's workload counted, as Kueue simulates it
        try:
            retry: dict[str, list[int]] = {}
            while cands and not fits():
                y = highest()
                ax, ay = self._split(tree, q, y)
                mine = tree.share(ax)
                line = cands[y]
                # the target's share without a candidate depends on its GPUs alone (one
                # queue, the tree unchanged until a take): once per size
                without: dict[int, float] = {}
                first = True  # no candidate of this pick turned down yet
                while line:
                    v = line.popleft()
                    share = without.get(held_of[v])
                    if share is None:
                        share = without[held_of[v]] = tree.share_without(y, held_of[v], ay)
                    if mine <= share:
                        take(v)
                        break
                    retry.setdefault(y, []).append(v)
                    if not second:
                        reach.give_back(v)
                        if not reach.fits(gpus):
                            return None  # what is left can no longer make room
                        if first and doomed():
                            return None  # no candidate left will be taken
                        first = False
                if not line:
                    del cands[y]
                    highest.forget()
                    for n in tree.path(y):
                        holds[n] -= 1
                        if not holds[n]:
                            del holds[n]
            for y in sorted(retry, key=lambda name: -pair(name)[1]) if second else ():
                if fits():
                    break
                mine, old = pair(y)
                if mine < old:
                    take(retry[y][0])
            if not fits():
                return None
            self._drop_spare(sim, tree, targets, fits, room)
            return targets
        finally:
            # back as the engine holds it (what a sync would set), by the same shifts
            # undone, each queue's at once (a Cohort's usage follows from its queues'),
            # so the shares off these paths stay known
            back: dict[str, int] = {}
            for v in targets:
                y = queue_of[v]
                back[y] = back.get(y, 0) + held_of[v]
            for y, gpus in back.items():
                tree.shift(y, gpus)
            tree.shift(q, -need)

    def _lines(self, sim: EngineView, c: int, tree: FlavorTree
               ) -> tuple[list[tuple[int, str]], dict[int, list[int]], dict[int, int],
                          dict[str, int]]:
        """:meth:`_victims`, and each borrowing project's borrowed work in victim order.

        With each such job's GPUs held, and each project's queue's smallest. They follow
        from ``c``'s running work, tags and the trees alone (the engine's version, read
        after :meth:`_victims` retagged, whose retagging at that version is a no-op), and
        from the other flavors' borrowing (the shares' order): kept while none changed.
        """
        now = (self._generation, sim.version(c), self._elsewhere)
        kept = self._kept_lines.get(c)
        if kept is not None and kept[0] == now:
            return kept[1]
        victims = self._victims(sim, c, tree)  # retags each borrower's excess as BORROWED
        lines: dict[int, list[int]] = {}
        project = sim.jobs.project
        for v in sim.victim_jobs(c, victims):
            lines.setdefault(project[v], []).append(v)
        held_of = {v: sim.held(v) for vs in lines.values() for v in vs}
        least = {self.queue[p]: min([held_of[v] for v in vs]) for p, vs in lines.items()}
        found = (victims, lines, held_of, least)
        self._kept_lines[c] = ((self._generation, sim.version(c), self._elsewhere), found)
        return found

    def _reach(self, sim: EngineView, c: int, me: int, victims: list[tuple[int, str]]) -> NodeRoom:
        """The nodes of ``c`` were every borrowed workload of ``victims`` but ``me``'s gone.

        The room with every borrowing queue's borrowed work gone follows from ``c``'s
        running work, tags and the trees alone (the engine's version, read after
        :meth:`_victims` retagged): built once per version, then ``me``'s given back.
        """
        now = (self._generation, sim.version(c))
        seen, every = self._every_gone.get(c, (None, None))
        if seen != now or every is None:
            every = NodeRoom(sim, c)
            for v in sim.victim_jobs(c, victims):
                every.take(v)
            self._every_gone[c] = (now, every)
        reach = every.copy()
        for v in sim.victim_jobs(c, [(p, t) for p, t in victims if p == me]):
            reach.give_back(v)
        return reach

    def _could_fit(self, sim: EngineView, c: int, tree: FlavorTree, q: str, job: int,
                   cands: dict[str, deque], held_of: dict[int, int], reach: NodeRoom) -> bool:
        """Whether a search under the first strategy alone could end with ``job`` fitting.

        A necessary condition, read before the search takes anything. Shares rise with
        usage and the search only lowers the candidates' queues' usage; with the workload
        counted in ``q``:

        - a target v of queue y is taken only when the preemptor's share at their split
          (its ancestor ax's) is at most ay's share without v and the targets taken before
          it; ay's share were y's targets alone gone from the tree as it stands is at least
          that (the other takes only lower it), so at least ``floor[ax]``, the lowest ax's
          share can fall to: y's targets hold at most ``cap[y]`` GPUs in all, the most y
          can lose with ay's share still ``floor[ax]`` or more;
        - ``floor[q]`` is q's share (nothing under q is taken); up q's path, ``floor[a]`` is
          a's share with each queue below it lighter by its ``cap`` (queues whose split
          with q lies below a), read after their caps.

        So a search takes only candidates of at most ``cap`` GPUs each, at most ``cap`` of a
        queue's in all; it ends fitting only if the workload fits in quota with each queue
        that much lighter and on the nodes with such candidates gone: a whole node only
        where each queue's candidates on it hold at most its ``cap``, and the GPUs those
        nodes (or the node) still hold at most what the queues can lose.
        """
        need, gpus, gpn = sim.held(job), sim.jobs.gpus[job], sim.gpn[c]
        splits = self._splits.setdefault(id(tree), {})
        by_split: dict[str, list[tuple[str, str]]] = {}
        for y in cands:
            ax, ay = splits.get((q, y)) or self._split(tree, q, y)
            by_split.setdefault(ax, []).append((y, ay))
        caps: dict[str, int] = {}
        freed: dict[str, int] = {}
        shifted: list[str] = []
        nodes, share = tree.nodes, tree.share
        tree.shift(q, need)
        try:
            left = len(by_split)
            for a in tree.path(q):  # q first, then up: each floor after the caps below it
                group = by_split.get(a)
                if not group:
                    continue
                least = tree.share(a)
                for y, ay in group:
                    line = cands[y]
                    total = 0
                    for v in line:
                        total += held_of[v]
                    # r GPUs gone from y lower ay's usage by min(r, most): each level
                    # below ay passes up at most its usage beyond its guaranteed quota
                    # (what FlavorTree.share_without walks)
                    node, most = nodes[y], total
                    while node.name != ay:
                        most = min(most, max(0, node.usage - node.kept))
                        node = nodes[node.parent]
                    if share(ay, -most) >= least:
                        cap = total
                    elif share(ay) < least:
                        cap = 0
                    else:  # the share falls with the GPUs gone: the last count still ≥ least
                        low, high = 0, most
                        while high - low > 1:
                            mid = (low + high) // 2
                            if share(ay, -mid) >= least:
                                low = mid
                            else:
                                high = mid
                        cap = low
                    could = 0
                    for v in line:
                        if held_of[v] <= cap:
                            could += held_of[v]
                    caps[y] = cap
                    freed[y] = min(cap, could)
                left -= 1
                if left:  # lighter, for the floors above
                    for y, _ in group:
                        tree.shift(y, -freed[y])
                        shifted.append(y)
            # the nodes: a whole node only where every job is a candidate and each queue's
            # there within its cap; a part of one from candidates within their caps
            queue, project = self.queue, sim.jobs.project
            reached = reach.free
            costs = []
            whole = gpn if gpus >= gpn else gpus  # what a node must hold free
            for n, free, on in sim.nodes_on(c):
                if reached[n] < whole:
                    continue  # not even every candidate gone frees it
                if free >= gpus and gpus < gpn:
                    costs.append(0)
                    continue
                if gpus >= gpn:
                    lose: dict[str, int] = {}
                    for v in on:
                        y = queue[project[v]]
                        lose[y] = lose.get(y, 0) + held_of[v]
                    if all(gone <= caps[y] for y, gone in lose.items()):
                        costs.append(gpn - free)
                else:
                    room = free
                    for v in on:
                        held = held_of.get(v)
                        if held is not None and held <= caps.get(queue[project[v]], -1):
                            room += held if held < gpn else gpn
                    if room >= gpus:
                        costs.append(gpus - free)
            nodes = -(-gpus // gpn) if gpus >= gpn else 1
            if len(costs) < nodes or sum(sorted(costs)[:nodes]) > sum(freed.values()):
                return False
            for y in caps:
                if y not in shifted:
                    tree.shift(y, -freed[y])
                    shifted.append(y)
            return tree.available_less(q, need) >= need
        finally:
            for y in shifted:
                tree.shift(y, freed[y])
            tree.shift(q, -need)

    def _borrowers(self, sim, c: int) -> list[tuple[str, QuotaNode]]:
        """``c``'s queues that use more than their nominal quota (tree synced with the engine).

        Follows from ``c``'s running work and the trees alone: kept while neither changed.
        """
        now = (self._generation, sim.version(c))
        seen, found = self._borrowing.get(c, (None, []))
        if seen != now:
            found = [(y, node) for y, node in self._queue_nodes[c] if node.usage > node.nominal]
            self._borrowing[c] = (now, found)
        return found

    def _hope(self, tree: FlavorTree, q: str, borrowers: list[tuple[str, QuotaNode]]) -> bool:
        """Whether some other borrowing queue's share exceeds ``q``'s at their split.

        ``borrowers``: :meth:`_borrowers`, read before the preemptor's workload is counted
        in ``q``; the shares are read with it counted (the tree keeps each share).
        """
        share, known = tree.share, tree._shares  # the tree's memo read directly: hot
        splits = self._splits.get(id(tree), {})
        for y, _ in borrowers:
            if y == q:
                continue
            ax, ay = splits.get((q, y)) or self._split(tree, q, y)
            a = known.get(ax)
            if a is None:
                a = share(ax)
            b = known.get(ay)
            if b is None:
                b = share(ay)
            if a < b:
                return True
        return False

    def _drop_spare(self, sim: EngineView, tree: FlavorTree, targets: list[int], fits,
                    room: NodeRoom) -> None:
        """Kueue's last step: in reverse, drop each target without which ``fits()`` holds.

        ``targets``' GPUs are shifted out of their queues' usage (and into ``room``) on
        entry and the dropped ones back, as ``fits`` reads the tree and the room.
        """
        for v in reversed(list(targets)):
            y = self.queue[sim.jobs.project[v]]
            targets.remove(v)
            room.give_back(v)
            tree.shift(y, sim.held(v))
            if not fits():
                targets.append(v)
                room.take(v)
                tree.shift(y, -sim.held(v))

    def _fair_preempt(self, sim: EngineView, c: int, p: int, job: int, tree: FlavorTree) -> bool:
        """Preempt for ``job`` by Fair Sharing, when its strategies allow it.

        False when they do not (nothing preempted); whether ``job`` then fits is
        :meth:`_admit`'s check.
        """
        q = self.queue[p]
        if (not self.fair_preemption or not self.settings[q].reclaim
                or job in self._failed or job in self._preempted):
            return False
        targets = self._fair_targets(sim, c, tree, q, job)
        if not targets:
            self._failed.add(job)
            return False
        self._preempt(sim, c, tree, targets)
        return True

