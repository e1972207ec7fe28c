"""Kueue manifests (v0.19.2, stored version ``kueue.x-k8s.io/v1beta2``) from a plan.

One multi-document YAML file per exported period, ``kueue-<period start>.yaml``, and an
``index.yaml`` listing them with their validity windows. Per period:

- three ``WorkloadPriorityClass`` objects (:data:`PRIORITY_CLASSES`):
  ``gpu-planner-budget-gang`` (1100) for allocated jobs of whole nodes (at least one
  node's GPUs), ``gpu-planner-budget`` (1000) for the other allocated jobs and
  ``gpu-planner-unallocated`` (0, the priority of a workload with no class) for
  unallocated work, named by each job's ``kueue.x-k8s.io/priority-class`` label
  (:func:`priority_class`), so that a queue admits its budget work first, budget work
  preempts the queue's own unallocated work (``withinClusterQueue: LowerPriority``), and a
  borrowing queue's smaller work is preempted before its gangs;
- a ``Topology`` ``gpu-planner-nodes`` (:data:`TOPOLOGY`) of one level, the node
  (``kubernetes.io/hostname``), which every flavor names (``spec.topologyName``): Kueue's
  Topology Aware Scheduling (beta, on by default since v0.14) then admits a workload only
  where its pods fit on the flavor's nodes beside the admitted workloads, places them
  there (a workload that names no topology is scheduled as ``unconstrained``, the fewest
  free GPUs first, so best fit) and preempts to free nodes, not only quota. Without it
  Kueue admits on quota alone: a gang whose GPUs are free only in fragments is admitted,
  holds its quota and idles while its pods pend. ``planner-kueue`` replays the former;
- a ``ResourceFlavor`` per cluster, ``spec.nodeLabels`` = the cluster's node selector: the
  plan's ``node_labels`` for it (from ``clusters.csv``), else the default
  ``gpu-planner.io/cluster: <cluster>`` (plus ``nvidia.com/gpu.product`` where the GPU type is
  written as GPU feature discovery labels nodes; :func:`planner.inputs.labels.node_selector`),
  and ``spec.topologyName`` (above; Kueue then keeps ``nodeLabels`` immutable). No two
  clusters may select the same nodes (refused before export);
- a root ``Cohort`` ``gpu-planner-pool`` owning, per cluster, the GPUs no project holds as
  nominal quota (what every queue may borrow, with idle nominal quota);
- a ``Cohort`` per internal node of the org tree (area, team), ``spec.parentName`` for the
  tree (top-level nodes under the pool), ``spec.fairSharing.weight`` = the org weight, so
  idle quota is borrowed inside the tree first;
- a ``ClusterQueue`` per project, ``spec.cohortName`` = its team (the pool for a top-level
  project), one resource group over ``nvidia.com/gpu`` with a flavor per cluster the project
  may run on (``allowed``: ``budgets.csv``'s ``clusters``; every cluster when it names none)
  — the export's **fill**, its default — or, with ``fill=False``, per cluster it holds
  anything on in the period:

  - ``nominalQuota`` = floor(guaranteed GPU-hours ÷ period hours) + the GPUs of its
    reservations that run during the period (dedicated quota for their window); 0 where
    the plan grants nothing; and, for a project ahead of its budget pace at the plan's
    ``as_of`` (the executor contract's rule 5, :func:`planner.contract.ahead_of_pace`;
    ``takes_back=True``, the default), its reservations' GPUs alone: its guaranteed grant
    becomes borrowing (with ``fill=False`` added to its ``borrowingLimit``), so the
    projects behind their pace reclaim those GPUs from it as lenders (Kueue has no
    exempt time, so at once);
  - no ``borrowingLimit`` (fill): the queue may borrow any GPU idle in the cohort tree (its
    team's, its area's, the pool's), so idle GPUs are used by whoever has work, beyond the
    plan's grants and by projects the plan granted nothing; the lender takes them back at
    once (below). With ``fill=False``: ``borrowingLimit`` = floor(guaranteed +
    opportunistic GPUs) − floor(guaranteed GPUs), the plan's opportunistic headroom (0: no
    borrowing), and no flavor where the plan grants nothing (such work is inadmissible);
  - ``lendingLimit`` = the unreserved part of its quota, where a reservation runs, so the
    reserved GPUs are never lent out and so never reclaimed from a borrower;
  - preemption: ``reclaimWithinCohort: Any`` (a queue inside its nominal quota takes back
    what borrowers hold: borrowed work — opportunistic and fill — is reclaimed first, at
    once: Kueue has no protected runtime); with Fair Sharing on (the export needs it) it
    also lets a queue beyond its nominal quota preempt the borrowed work of queues whose
    share is higher, under the Configuration's ``preemptionStrategies`` (the docs ask for
    ``[LessThanOrEqualToFinalShare]``; ``planner-kueue`` replays it);
    ``borrowWithinCohort: Never`` (classic preemption's setting, which Kueue ignores under
    Fair Sharing), ``withinClusterQueue: LowerPriority``. Reserved quota is not lendable,
    so no other queue ever runs on it and nothing within a queue's nominal quota is
    preempted: reservations are not preempted.
  - ``fairSharing.weight`` (``weights="pace"``, the default) = the NGH per hour the
    project's budget still owes it, (budget − used) ÷ hours left in the quarter, from the
    plan's ``budgets`` (:func:`pace_weights`): idle GPUs are borrowed in proportion to
    what each project is still owed, and a project whose budget is spent (weight 0, an
    infinite share) borrows only what nobody else wants; ``weights="org"``: the org
    weight;
  - a project *overdrawn* at the plan's ``as_of`` (a whole budget ahead of its pace: the
    executor contract's rule 8, :func:`planner.contract.overdrawn`;
    ``overdrawn_at_pool=True``, the default): its ClusterQueue's ``cohortName`` is the
    pool and its weight 0, whatever ``weights``. Weight 0 inside its team ranks it last
    only against its own team: at the Cohorts above, its borrowed work counts toward the
    team's share, so another team's waiting workload can lose to it and cannot preempt
    it. Directly under the pool its share is infinite wherever it is compared, so it is
    admitted only when no other queue's workload can be, and any other queue's pending
    workload preempts its borrowed work by Fair Sharing (``LessThanOrEqualToFinalShare``:
    a finite share is at most an infinite one) while it borrows anything beyond it.
- a ``LocalQueue`` per project in the project's namespace.

**Per cluster.** A resource group holds at most 64 flavors (:data:`MAX_FLAVORS`, the CRDs'
``maxItems``), and one resource (``nvidia.com/gpu``) may sit in only one resource group of a
queue, so one manifest set cannot cover more than 64 clusters: the pool Cohort and a queue
with work on every cluster would need a flavor each. With ``per_cluster`` (automatic when
the plan has more than 64 clusters) each cluster gets a manifest set of its own,
``kueue-<period start>-<cluster>.yaml``, for the Kubernetes + Kueue that runs it (a GPU
cluster usually runs its own): the ``Topology``; its ``ResourceFlavor``; the pool Cohort
with that cluster's unheld GPUs; a ``ClusterQueue`` and ``LocalQueue`` for each project
that may run on it (fill; with ``fill=False``, that holds anything on it in the period),
with that one flavor and the same numbers as in the single set; the Cohorts above those
projects (the org tree pruned to them). The set's pool Cohort carries a
``gpu-planner.io/cluster`` annotation. Quotas are the plan's either way: the single set's
flavor for cluster c of a project's queue is the per-cluster set c's flavor of that queue.

Names are DNS-1123 labels (:func:`planner.exporters.common.safe_name`); the original id is
kept in the ``gpu-planner.io/id`` annotation. What a set was made from and for (the plan's
``as_of`` and input digest, the period's window, the cluster of a per-cluster set) is
annotated on its pool Cohort alone (:data:`WINDOW_ANNOTATIONS`), the one object whose
quota moves with nearly every plan anyway: on every object, as before, they changed every
object every cycle, and ``kubectl diff`` between two days' sets showed every object
however little had changed; now an object's bytes change only when its content does.
Every object carries the labels
``app.kubernetes.io/managed-by: gpu-planner`` and ``gpu-planner.io/scenario: <scenario>``
(:func:`prune_selector`), so that a day's set replaces yesterday's with ``kubectl apply
--prune -l <that selector> -f kueue-<period>.yaml``: objects of the scenario missing from the
new set are deleted, and nothing the planner did not make is touched. Output is a pure
function of the inputs.

The YAML is written by :mod:`planner.exporters.yamltext` (libyaml's emitter where PyYAML
has it, the same bytes from its Python emitter otherwise). A per-cluster export repeats
most objects in every cluster's set (the Cohorts, LocalQueues, priority classes and
Topology do not depend on the cluster): each is written once a period and its text
reused (:class:`_SetWriter`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pandas as pd
import yaml

from planner.contract import ahead_of_pace, in_force, overdrawn, widens
from planner.exporters import yamltext
from planner.exporters.common import by_depth, period_bounds, quantity, safe_name
from planner.inputs.labels import label_value, node_selector
from planner.inputs.org import OrgTree

API = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
ANN = "gpu-planner.io"
MANAGED_BY = ("app.kubernetes.io/managed-by", "gpu-planner")
SCENARIO_LABEL = f"{ANN}/scenario"
POOL = "gpu-planner-pool"
#: the Topology every flavor names: one level, the node (Kueue's Topology Aware Scheduling)
TOPOLOGY = "gpu-planner-nodes"
HOSTNAME = "kubernetes.io/hostname"  # every Kubernetes node carries it
MAX_FLAVORS = 64  # per resource group, in the ClusterQueue and Cohort CRDs (maxItems)
WEIGHTS = ("org", "pace")  # what a ClusterQueue's fairSharing.weight is
#: nodes of each cluster the pool keeps unheld for late arrivals (rule 7, :func:`keep_reserve`)
RESERVE_NODES = 1
#: ... but at most one node in this many of the cluster (a cluster of fewer keeps none)
RESERVE_SHARE = 10


def object_labels(plan: dict[str, Any]) -> dict[str, str]:
    """The labels every exported object carries: who manages it, and which scenario."""
    return {MANAGED_BY[0]: MANAGED_BY[1], SCENARIO_LABEL: label_value(plan["scenario"])}


def prune_selector(plan: dict[str, Any]) -> str:
    """``kubectl apply --prune -l`` selector for the plan's objects (its scenario's alone).

    ``app.kubernetes.io/managed-by=gpu-planner,gpu-planner.io/scenario=<scenario>``, the
    scenario name as a label value (:func:`planner.inputs.labels.label_value`).
    """
    return ",".join(f"{k}={v}" for k, v in object_labels(plan).items())


#: The kinds the exporter writes, in the order they are applied.
KINDS = ("Topology", "WorkloadPriorityClass", "ResourceFlavor", "Cohort", "ClusterQueue",
         "LocalQueue")

#: The label a job carries to name its WorkloadPriorityClass (Kueue's
#: ``WorkloadPriorityClassLabel``); Kueue copies the class's value into the Workload.
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
#: The WorkloadPriorityClasses every set carries, name: value. Allocated work (charged to
#: the project's budget: what the plan's demand counts) runs at ``gpu-planner-budget``,
#: or ``gpu-planner-budget-gang`` for a job of whole nodes (it asks at least one node's
#: GPUs); unallocated work (exploratory, charged to no budget) at
#: ``gpu-planner-unallocated``, the priority (0) of a workload with no class. The executor
#: contract's ``PREEMPTS`` (guaranteed work takes GPUs back from unallocated work first) in
#: Kueue's terms: within a ClusterQueue, ``BestEffortFIFO`` admits higher priorities first
#: and ``withinClusterQueue: LowerPriority`` lets a budget workload preempt the queue's own
#: unallocated workloads (and a gang its queue's smaller budget work); across queues,
#: preemption candidates are taken lowest priority first, so a borrowing queue loses its
#: small jobs before a gang that has run for hours on several nodes is restarted.
PRIORITY_CLASSES = {"gpu-planner-budget-gang": 1100, "gpu-planner-budget": 1000,
                    "gpu-planner-unallocated": 0}


def priority_class(allocated: bool, whole_nodes: bool = False) -> str:
    """The WorkloadPriorityClass a job carries.

    ``allocated``: work on the project's budget; ``whole_nodes``: the job asks at least
    one node's GPUs of its cluster (a gang of whole nodes).
    """
    if not allocated:
        return "gpu-planner-unallocated"
    return "gpu-planner-budget-gang" if whole_nodes else "gpu-planner-budget"


def prune_allowlist() -> tuple[str, ...]:
    """``kubectl apply --prune-allowlist`` values (``group/version/Kind``) for our kinds.

    kubectl prunes only the kinds of its default allowlist (core and apps kinds) unless
    told others: without these, yesterday's ClusterQueues and Cohorts would never be
    deleted. Naming them replaces the default list, so nothing else is pruned either.
    """
    return tuple(f"{API}/{kind}" for kind in KINDS)


def cluster_selector(cluster: dict[str, Any]) -> dict[str, str]:
    """A plan cluster's node selector: its ``node_labels``, else the default."""
    return dict(node_selector(cluster["cluster"], cluster["gpu_type"],
                              cluster.get("node_labels")))


@dataclass(frozen=True)
class Stamp:
    """What every object of one manifest set carries: labels, and annotations (its window)."""

    labels: dict[str, str]
    annotations: dict[str, str]


def _meta(name: str, original: str, window: Stamp, namespace: str | None = None
          ) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = dict(window.labels)
    meta["annotations"] = {f"{ANN}/id": original, **window.annotations}
    return meta


def _priority_classes(window: Stamp) -> list[dict[str, Any]]:
    """The WorkloadPriorityClasses (:data:`PRIORITY_CLASSES`): cluster-scoped, no spec."""
    what = {priority_class(True, True): "allocated jobs of whole nodes, charged to the "
                                        "project's budget (gpu-planner)",
            priority_class(True): "allocated work, charged to the project's budget (gpu-planner)",
            priority_class(False): "unallocated work, charged to no budget (gpu-planner)"}
    return [{"apiVersion": API, "kind": "WorkloadPriorityClass",
             "metadata": _meta(name, name, window), "value": value, "description": what[name]}
            for name, value in PRIORITY_CLASSES.items()]


def _topology(window: Stamp) -> dict[str, Any]:
    """The :data:`TOPOLOGY` object: cluster-scoped, one level, the node's hostname."""
    return {"apiVersion": API, "kind": "Topology", "metadata": _meta(TOPOLOGY, TOPOLOGY, window),
            "spec": {"levels": [{"nodeLabel": HOSTNAME}]}}


def _flavors(clusters: list[dict[str, Any]], window: Stamp) -> list[dict[str, Any]]:
    out = []
    for c in clusters:
        out.append({"apiVersion": API, "kind": "ResourceFlavor",
                    "metadata": _meta(safe_name(c["cluster"]), c["cluster"], window),
                    "spec": {"nodeLabels": cluster_selector(c), "topologyName": TOPOLOGY}})
    return out


def pool_name(tree: OrgTree) -> str:
    """The root Cohort's name, distinct from every org node's."""
    return _pool_name(tree.ids)


@lru_cache(maxsize=8)
def _pool_name(ids: tuple[str, ...]) -> str:
    names = {safe_name(n) for n in ids}
    name = POOL
    while name in names:
        name += "-root"
    return name


def _pool(clusters: list[dict[str, Any]], tree: OrgTree,
          quotas: Quotas, window: Stamp) -> dict[str, Any]:
    """The root Cohort: per cluster, the GPUs no project holds as nominal quota."""
    flavors = []
    unheld = unheld_gpus(clusters, quotas)
    for c in clusters:
        free = unheld[c["cluster"]]
        if free > 0:
            flavors.append({"name": safe_name(c["cluster"]),
                            "resources": [{"name": GPU, "nominalQuota": free}]})
    spec: dict[str, Any] = {}
    if flavors:
        spec["resourceGroups"] = [{"coveredResources": [GPU], "flavors": flavors}]
    name = pool_name(tree)
    return {"apiVersion": API, "kind": "Cohort", "metadata": _meta(name, name, window),
            "spec": spec}


def _cohorts(tree: OrgTree, nodes: set[str] | None, window: Stamp
             ) -> list[dict[str, Any]]:
    """A Cohort per internal org node (only those in ``nodes``, when given)."""
    out = []
    for node in by_depth(tree, tree.internal):
        if nodes is not None and node not in nodes:
            continue
        up = tree.parent_of(node)
        spec: dict[str, Any] = {"parentName": safe_name(up) if up else pool_name(tree)}
        spec["fairSharing"] = {"weight": quantity(tree.weight_of(node))}
        out.append({"apiVersion": API, "kind": "Cohort",
                    "metadata": _meta(safe_name(node), node, window), "spec": spec})
    return out


#: A (project, cluster) cell of the export: nominal, borrowing (None: no
#: ``borrowingLimit``, i.e. any idle GPU of the cohort tree) and reserved GPUs.
Cell = dict[str, int | None]
Quotas = dict[str, dict[str, Cell]]


def allowed_clusters(budgets: pd.DataFrame) -> dict[str, tuple[str, ...]]:
    """Project -> the clusters ``budgets.csv`` restricts it to (projects not listed: any).

    ``budgets``: a scenario's budgets table (its ``clusters`` column, a tuple of cluster
    ids, empty for every cluster).
    """
    return {str(p): tuple(c) for p, c in zip(budgets["project"], budgets["clusters"],
                                              strict=True) if len(c)}


def project_quotas(plan: dict[str, Any], start: str, end: str, fill: bool = True,
                   projects: list[str] | None = None,
                   allowed: dict[str, tuple[str, ...]] | None = None,
                   takes_back: bool = True,
                   pending: Mapping[tuple[str, str], int] | None = None,
                   reserve_nodes: int = 0) -> Quotas:
    """Whole GPUs per project and cluster in a period: nominal, borrowing, reserved.

    Read from the executor contract (:func:`planner.contract.in_force` over the period):
    nominal = guaranteed whole GPUs + reserved GPUs; with ``takes_back`` (the default,
    the contract's rule 5), a project ahead of its budget pace
    (:func:`planner.contract.ahead_of_pace`) keeps its reserved GPUs alone as nominal
    quota and borrows its guaranteed GPUs, which the others may then reclaim. ``fill``
    (the default): borrowing is None (no ``borrowingLimit``: idle quota anywhere in the
    cohort tree may be borrowed, and lenders reclaim it at once) and every project in
    ``projects`` gets a cell (nominal 0 where the plan grants nothing) on every cluster of
    the plan it may run on (``allowed``: project -> clusters; a project missing from it may
    run anywhere). Without ``fill``: borrowing = the opportunistic headroom, and only the
    cells the plan grants. ``pending``: (project, cluster) -> GPUs of the project's widest
    pending gang there (:func:`planner.ingest.pending.pending_gangs`), to which its
    nominal quota widens (:func:`widen_to_pending`); None or empty: the plan's alone.
    ``reserve_nodes``: the pool keeps that many nodes' GPUs of each cluster unheld, for
    late arrivals (:func:`keep_reserve`, the contract's rule 7); 0: none kept.
    """
    terms = in_force(plan, start, end)
    # a plan without budgets (a hand-written one) has nobody ahead of a pace
    ahead = ahead_of_pace(plan) if takes_back and plan.get("budgets") else frozenset()
    out: Quotas = {}
    for q in terms.quotas:
        lent = q.project in ahead
        out.setdefault(q.project, {})[q.cluster] = {
            "nominal": 0 if lent else q.guaranteed,
            "borrowing": None if fill else q.opportunistic + (q.guaranteed if lent else 0),
            "reserved": 0}
    for r in terms.reservations:
        cell = out.setdefault(r.project, {}).setdefault(
            r.cluster, {"nominal": 0, "borrowing": None if fill else 0, "reserved": 0})
        cell["nominal"] = int(cell["nominal"] or 0) + r.gpus
        cell["reserved"] = int(cell["reserved"] or 0) + r.gpus
    if fill:
        every = [c["cluster"] for c in plan["clusters"]]
        for project in projects or ():
            mine = out.setdefault(project, {})
            for cluster in (allowed or {}).get(project, every):
                if cluster in every:
                    mine.setdefault(cluster, {"nominal": 0, "borrowing": None, "reserved": 0})
    if pending:
        widen_to_pending(plan, out, pending)
    if reserve_nodes:
        keep_reserve(plan, out, reserve_nodes)
    return out


def keep_reserve(plan: dict[str, Any], quotas: Quotas, nodes: int = 1
                 ) -> list[tuple[str, str, int]]:
    """Keep ``nodes`` nodes' GPUs of each cluster unheld: the reserve for late arrivals.

    At most one node in :data:`RESERVE_SHARE` of the cluster's (a cluster of fewer keeps
    none: its only nodes would otherwise all be reserve).

    The executor contract's rule 7 (:func:`widen_late`): where the pool Cohort would hold
    fewer GPUs than that, the shortfall is taken from the largest nominal quotas without a
    reservation on the cluster (ties by queue name), so a project whose work arrives after
    the plan can be given a gang's GPUs within the period. What is taken stays lendable in
    the pool (no GPU idles for it); the queues it came from can be reclaimed down to the
    cut. Changes ``quotas`` in place; returns the (project, cluster, GPUs) taken.
    """
    free = unheld_gpus(plan["clusters"], quotas)
    taken = []
    for c in _sorted_clusters(plan):
        cluster = c["cluster"]
        kept = min(nodes, int(c["nodes"]) // RESERVE_SHARE)  # none on a small cluster
        short = kept * int(c["gpus_per_node"]) - free[cluster]
        cells = sorted(((int(q[cluster]["nominal"] or 0), safe_name(p), p)
                        for p, q in quotas.items()
                        if cluster in q and not q[cluster]["reserved"]
                        and int(q[cluster]["nominal"] or 0) > 0),
                       key=lambda t: (-t[0], t[1]))
        for nominal, _, project in cells:
            if short <= 0:
                break
            take = min(short, nominal)
            quotas[project][cluster]["nominal"] = nominal - take
            short -= take
            taken.append((project, cluster, take))
    return taken


def widen_late(plan: dict[str, Any], objects: list[dict[str, Any]],
               gangs: Iterable[tuple[str, str, int]]) -> list[tuple[str, str, int]]:
    """Give late arrivals their gangs' GPUs, in a period's applied objects (rule 7).

    ``gangs``: (project, cluster, GPUs) of gangs pending now, in the order to serve them.
    A gang is served when its project may widen (:func:`planner.contract.widens`), its
    ClusterQueue holds no nominal quota on the cluster (the plan, made before its work
    arrived, granted it nothing there) and the pool Cohort still holds the gang's GPUs
    there (the reserve :func:`keep_reserve` kept, and any GPUs nobody held): they move
    from the pool's ``nominalQuota`` to the queue's, until the next period's set replaces
    them. The gang is then within its queue's nominal quota and reclaims borrowed work to
    fit. Meant to run between cycles (hourly) on the set the cycle applied. Changes
    ``objects`` in place; returns the (project, cluster, GPUs) served.
    """
    may = widens(plan)
    queues = {object_id(o): o for o in objects if o["kind"] == "ClusterQueue"}
    pool = next(o for o in objects if _is_pool(o))
    done = []
    for project, cluster, gpus in gangs:
        queue = queues.get(project)
        mine = _gpu_entry(queue, cluster) if queue is not None else None
        if project not in may or mine is None or int(mine["nominalQuota"]) != 0:
            continue
        spare = _gpu_entry(pool, cluster)
        if spare is None or int(spare["nominalQuota"]) < gpus:
            continue
        spare["nominalQuota"] = int(spare["nominalQuota"]) - int(gpus)
        mine["nominalQuota"] = int(gpus)
        done.append((project, cluster, int(gpus)))
    return done


def most_owed_first(plan: dict[str, Any], widest: Mapping[tuple[str, str], int]
                    ) -> list[tuple[str, str, int]]:
    """(project, cluster, GPUs) of pending gangs, the projects most owed per hour first.

    The order rules 6 and 7 serve them in (:func:`pace_weights`; ties by project, cluster).
    """
    owed = pace_weights(plan)
    return [(p, c, int(g)) for (p, c), g in sorted(widest.items(),
                                                   key=lambda kv: (-owed.get(kv[0][0], 0.0),
                                                                   kv[0]))]


def set_text(objects: list[dict[str, Any]]) -> str:
    """A manifest set as the exporter writes it (multi-document YAML)."""
    return _dump(objects)


def object_id(obj: dict[str, Any]) -> str:
    """The id an object was written for (its ``gpu-planner.io/id`` annotation)."""
    return obj["metadata"]["annotations"][f"{ANN}/id"]


def _gpu_entry(obj: dict[str, Any], cluster: str) -> dict[str, Any] | None:
    """The ``nvidia.com/gpu`` resource of ``obj``'s flavor for ``cluster``, if it has one."""
    for group in obj.get("spec", {}).get("resourceGroups", []):
        for flavor in group["flavors"]:
            if flavor["name"] == safe_name(cluster):
                for resource in flavor["resources"]:
                    if resource["name"] == GPU:
                        return resource
    return None


def first_period_widening(plan: dict[str, Any], projects: list[str],
                          allowed: dict[str, tuple[str, ...]] | None,
                          pending: Mapping[tuple[str, str], int]) -> list[tuple[str, str, int]]:
    """What :func:`export_kueue` widens in the first period (fill export), for a report."""
    start, end = plan["periods"][0]["start"], plan["periods"][0]["end"]
    quotas = project_quotas(plan, start, end, projects=projects, allowed=allowed)
    return widen_to_pending(plan, quotas, pending)


def unheld_gpus(clusters: list[dict[str, Any]], quotas: Quotas) -> dict[str, int]:
    """Cluster -> its GPUs no project holds as nominal quota (the pool Cohort's quota)."""
    out = {}
    for c in clusters:
        held = sum(int(q[c["cluster"]]["nominal"] or 0) for q in quotas.values()
                   if c["cluster"] in q)
        out[c["cluster"]] = int(c["nodes"]) * int(c["gpus_per_node"]) - held
    return out


def widen_to_pending(plan: dict[str, Any], quotas: Quotas,
                     pending: Mapping[tuple[str, str], int]) -> list[tuple[str, str, int]]:
    """Raise nominal quotas to the widest pending gangs (the executor contract's rule 6).

    For each (project, cluster) of ``pending`` whose project may widen
    (:func:`planner.contract.widens`: budget left, not ahead of its pace) and whose queue has
    a flavor on the cluster, a gang wider than its nominal quota there gets nominal = the
    gang's GPUs, out of the GPUs no project holds (:func:`unheld_gpus`, the pool Cohort's
    quota), whole or not at all, the projects most owed per hour (:func:`pace_weights`)
    first. The gang is then within its queue's nominal quota: Kueue admits it by reclaiming
    borrowed GPUs (with Topology Aware Scheduling, until its pods fit on whole nodes),
    where before it could only borrow and waited for whole nodes to fall idle. The other
    projects' nominal quotas are untouched, so nobody's guarantee shrinks; what shrinks is
    the GPUs everyone borrows from. Changes ``quotas`` in place; returns the (project,
    cluster, GPUs) widened, in the order taken.
    """
    may = widens(plan)
    free = unheld_gpus(plan["clusters"], quotas)
    done = []
    for project, cluster, gpus in most_owed_first(plan, pending):
        cell = quotas.get(project, {}).get(cluster)
        if project not in may or cell is None or cluster not in free:
            continue
        extra = int(gpus) - int(cell["nominal"] or 0)
        if 0 < extra <= free[cluster]:
            cell["nominal"] = int(gpus)
            free[cluster] -= extra
            done.append((project, cluster, int(gpus)))
    return done


def pace_weights(plan: dict[str, Any]) -> dict[str, float]:
    """Project -> the NGH per hour its budget still owes it: (budget − used) ÷ hours left.

    From the plan's ``budgets`` (budget and used at ``as_of``) and the hours from ``as_of``
    to ``quarter_end``; 0 for a project whose budget is spent. The fair-sharing weight of
    its ClusterQueue with ``weights="pace"``: idle GPUs are then borrowed in proportion to
    what each project is still owed, and spent projects borrow only what nobody else wants.
    """
    if not plan.get("budgets"):
        return {}  # nothing to weigh by: the org's weights stay
    hours = max((pd.Timestamp(plan["quarter_end"]) - pd.Timestamp(plan["as_of"]))
                / pd.Timedelta(hours=1), 1.0)
    return {b["project"]: max(0.0, float(b["budget"]) - float(b["used"])) / hours
            for b in plan.get("budgets", [])}


def _cluster_queue(project: str, tree: OrgTree, quotas: dict[str, Cell],
                   window: Stamp, pace: dict[str, float] | None = None,
                   overdrawn: bool = False) -> dict[str, Any]:
    """A project's ClusterQueue; ``overdrawn`` (rule 8): in the pool Cohort, of weight 0."""
    known = project in tree
    team = (tree.parent_of(project) if known and not overdrawn else "") or pool_name(tree)
    flavors = []
    for cluster in sorted(quotas):
        q = quotas[cluster]
        resource: dict[str, Any] = {"name": GPU, "nominalQuota": q["nominal"]}
        if q["borrowing"] is not None:
            resource["borrowingLimit"] = q["borrowing"]
        if q["reserved"]:
            resource["lendingLimit"] = int(q["nominal"] or 0) - q["reserved"]
        flavors.append({"name": safe_name(cluster), "resources": [resource]})
    namespace = safe_name(project)
    spec: dict[str, Any] = {"cohortName": safe_name(team)}
    spec["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    spec["queueingStrategy"] = "BestEffortFIFO"
    spec["resourceGroups"] = ([{"coveredResources": [GPU], "flavors": flavors}]
                              if flavors else [])
    spec["preemption"] = {"reclaimWithinCohort": "Any",
                          "borrowWithinCohort": {"policy": "Never"},
                          "withinClusterQueue": "LowerPriority"}
    weight = tree.weight_of(project) if known else 1.0
    if pace is not None and project in pace:
        weight = pace[project]
    if overdrawn:
        weight = 0.0
    spec["fairSharing"] = {"weight": quantity(weight)}
    return {"apiVersion": API, "kind": "ClusterQueue",
            "metadata": _meta(safe_name(project), project, window), "spec": spec}


def _local_queue(project: str, window: Stamp) -> dict[str, Any]:
    name = safe_name(project)
    return {"apiVersion": API, "kind": "LocalQueue",
            "metadata": _meta(name, project, window, namespace=name),
            "spec": {"clusterQueue": name}}


def _ancestors(tree: OrgTree, projects: list[str]) -> set[str]:
    return {up for p in projects if p in tree for up in tree.ancestors(p)}


def _sorted_clusters(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted(plan["clusters"], key=lambda c: c["cluster"])


def period_objects(plan: dict[str, Any], tree: OrgTree, start: str, end: str,
                   cluster: str | None = None, quotas: Quotas | None = None,
                   fill: bool = True, allowed: dict[str, tuple[str, ...]] | None = None,
                   weights: str = "pace", takes_back: bool = True,
                   pending: Mapping[tuple[str, str], int] | None = None,
                   reserve_nodes: int = 0, overdrawn_at_pool: bool = True,
                   weighed: Weighed | None = None) -> list[dict[str, Any]]:
    """Every Kueue object in force during [start, end); with ``cluster``, its set alone.

    ``quotas``: :func:`project_quotas` of the period, when the caller has them already;
    else built with ``fill``, ``allowed``, ``takes_back``, ``pending`` and
    ``reserve_nodes`` (see there) for
    the org tree's projects.
    ``weights``: the ClusterQueues' ``fairSharing.weight``, ``"pace"`` (the default,
    :func:`pace_weights`; a project missing from the plan's budgets keeps its org
    weight) or ``"org"`` (the org tree's weight); Cohorts keep the org's either way.
    ``overdrawn_at_pool`` (the executor contract's rule 8, the default): the ClusterQueue of
    an overdrawn project (:func:`planner.contract.overdrawn`) sits in the pool Cohort
    with weight 0; False: in its team, as before the rule. ``weighed``:
    :func:`queue_weights` of the plan with these ``weights`` and ``overdrawn_at_pool``,
    when the caller has it already (every set of an export shares it).
    """
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, not {weights!r}")
    annotations = window_annotations(plan, start, end, cluster)
    if quotas is None:
        quotas = project_quotas(plan, start, end, fill, list(tree.leaves), allowed, takes_back,
                                pending, reserve_nodes)
    clusters = _sorted_clusters(plan)
    if cluster is None:
        projects = sorted(set(tree.leaves) | set(quotas))
        nodes = None
    else:  # the projects holding anything on the cluster, and the org tree above them
        clusters = [c for c in clusters if c["cluster"] == cluster]
        quotas = {p: {cluster: q[cluster]} for p, q in quotas.items() if cluster in q}
        projects = sorted(quotas)
        nodes = _ancestors(tree, projects)
    labels = object_labels(plan)
    plain = Stamp(labels, {})
    objects = [_topology(plain), *_priority_classes(plain), *_flavors(clusters, plain)]
    objects += [_pool(clusters, tree, quotas, Stamp(labels, annotations))]
    objects += _cohorts(tree, nodes, plain)
    pace, gone = queue_weights(plan, weights, overdrawn_at_pool) if weighed is None else weighed
    objects += [_cluster_queue(p, tree, quotas.get(p, {}), plain, pace, p in gone)
                for p in projects]
    objects += [_local_queue(p, plain) for p in projects]
    return objects


#: The ClusterQueues' pace weights (None: the org's) and the overdrawn projects (rule 8)
Weighed = tuple[dict[str, float] | None, frozenset[str]]


def queue_weights(plan: dict[str, Any], weights: str = "pace",
                  overdrawn_at_pool: bool = True) -> Weighed:
    """What every set of ``plan`` weighs its ClusterQueues with (:func:`period_objects`).

    :func:`pace_weights` with ``weights="pace"`` (None: the org tree's), and the projects
    :func:`planner.contract.overdrawn` names with ``overdrawn_at_pool`` (none without):
    of the plan alone, so the same for each of its periods and clusters.
    """
    return (pace_weights(plan) if weights == "pace" else None,
            overdrawn(plan) if overdrawn_at_pool else frozenset())


#: The annotations of a set's pool Cohort: what the set was made from and for.
WINDOW_ANNOTATIONS = tuple(f"{ANN}/{key}" for key in ("valid-from", "valid-until", "plan-as-of",
                                                       "input-digest", "cluster"))


def window_annotations(plan: dict[str, Any], start: str, end: str,
                       cluster: str | None = None) -> dict[str, str]:
    """The pool Cohort's :data:`WINDOW_ANNOTATIONS`: the period, the plan, the cluster.

    The period's window (``valid-from``, ``valid-until``), the plan's ``as_of`` and input
    digest, and (a per-cluster set) the cluster.
    """
    out = dict(zip(WINDOW_ANNOTATIONS, (start, end, plan["as_of"],
                                        plan.get("input_digest", "")), strict=False))
    if cluster is not None:
        out[WINDOW_ANNOTATIONS[-1]] = cluster
    return out


def most_flavors(objects: list[dict[str, Any]]) -> int:
    """The most flavors in any resource group of these objects."""
    return max((len(g["flavors"]) for o in objects
                for g in o.get("spec", {}).get("resourceGroups", [])), default=0)


def _dump(objects: list[dict[str, Any]]) -> str:
    return yamltext.dump_all(objects)


#: The kinds whose objects are the same in every cluster's set of a period (the pool
#: Cohort, whose quota and annotations are the cluster's, excepted): written once a period.
SHARED_KINDS = frozenset({"Topology", "WorkloadPriorityClass", "Cohort", "LocalQueue"})


def _is_pool(obj: dict[str, Any]) -> bool:
    """Whether ``obj`` is a set's root Cohort (the pool)."""
    return obj["kind"] == "Cohort" and "parentName" not in obj["spec"]


class _SetWriter:
    """The YAML of a period's manifest sets, each object shared between sets written once.

    A set's objects go out in runs: a run of objects of :data:`SHARED_KINDS` (but the pool)
    is the concatenation of each object's own text, written the first time it is met
    (keyed by kind, name and id: within one period an object of these kinds is the same in
    every set); a run of the others is written in one call. YAML documents written one
    after another are the documents written together (each starts with ``---`` and none
    leaves its stream open-ended: such a text, ending in ``...``, is refused here and the
    set is written whole instead), which the tests check against :func:`_dump` of the
    whole set.
    """

    def __init__(self) -> None:
        self.texts: dict[tuple[str, str], str] = {}

    def text(self, objects: list[dict[str, Any]]) -> str:
        """The set's YAML: :func:`_dump` of ``objects``, the same bytes."""
        parts: list[str] = []
        run: list[dict[str, Any]] = []
        for obj in objects:
            if obj["kind"] in SHARED_KINDS and not _is_pool(obj):
                if run:
                    parts.append(_dump(run))
                    run = []
                key = (obj["kind"], obj["metadata"]["name"], object_id(obj))
                text = self.texts.get(key)
                if text is None:
                    text = self.texts[key] = _dump([obj])
                parts.append(text)
            else:
                run.append(obj)
        if run:
            parts.append(_dump(run))
        if any(part.endswith("...\n") for part in parts):
            return _dump(objects)
        return "".join(parts)


def file_name(start: str, cluster: str | None = None) -> str:
    """``kueue-2026-11-16T00-00-00Z.yaml`` for a period start (``...Z-<cluster>.yaml``)."""
    stem = f"kueue-{start.replace(':', '-')}"
    return f"{stem}-{safe_name(cluster)}.yaml" if cluster is not None else f"{stem}.yaml"


def needs_per_cluster(plan: dict[str, Any]) -> bool:
    """Whether one manifest set could need more than :data:`MAX_FLAVORS` flavors in a group.

    Decided by the cluster count alone, so that a scenario's plans split the same way every
    time (the pool's flavors depend on the GPUs left free).
    """
    return len(plan["clusters"]) > MAX_FLAVORS


def export_kueue(plan: dict[str, Any], org: pd.DataFrame, periods: int = 1,
                 per_cluster: bool | None = None, fill: bool = True,
                 allowed: dict[str, tuple[str, ...]] | None = None,
                 weights: str = "pace", takes_back: bool = True,
                 pending: Mapping[tuple[str, str], int] | None = None,
                 reserve_nodes: int = 0, overdrawn_at_pool: bool = True) -> dict[str, str]:
    """File name -> YAML text: a file per period and cluster set, and an index.

    Per period (the first ``periods``) one file, or one per cluster with ``per_cluster``
    (``None``: when :func:`needs_per_cluster`). ``fill``, ``allowed`` and ``takes_back``:
    see :func:`project_quotas` (the module docstring); ``pending`` (the gangs waiting
    now) widens the first period's quotas only: a later period's set is applied when
    its own cycle has read the queue again. Raises ``ValueError`` when ``per_cluster`` is
    False and a resource group would need more than :data:`MAX_FLAVORS` flavors (the CRDs
    would refuse the manifest).
    """
    tree = OrgTree.from_frame(org)
    split = needs_per_cluster(plan) if per_cluster is None else per_cluster
    targets: list[str | None] = ([c["cluster"] for c in _sorted_clusters(plan)] if split
                                 else [None])
    files: dict[str, str] = {}
    index = []
    weighed = queue_weights(plan, weights, overdrawn_at_pool)  # the same for every set
    for n, (start, end) in enumerate(period_bounds(plan, periods)):
        quotas = project_quotas(plan, start, end, fill, list(tree.leaves), allowed, takes_back,
                                pending if n == 0 else None, reserve_nodes)
        writer = _SetWriter()
        for cluster in targets:
            objects = period_objects(plan, tree, start, end, cluster, quotas,
                                     weights=weights, overdrawn_at_pool=overdrawn_at_pool,
                                     weighed=weighed)
            if most_flavors(objects) > MAX_FLAVORS:
                raise ValueError(f"a Kueue resource group for {start} would hold "
                                 f"{most_flavors(objects)} flavors (at most {MAX_FLAVORS}): "
                                 "export per cluster")
            name = file_name(start, cluster)
            files[name] = writer.text(objects)
            entry = {"file": name, "valid_from": start, "valid_until": end}
            if cluster is not None:
                entry["cluster"] = cluster
            index.append(entry | {"objects": len(objects)})
    head: dict[str, Any] = {"format": f"gpu-planner kueue index, version {2 if split else 1}",
                            "kueue_api": API}
    if split:  # a version-1 reader would apply every file to one Kueue: refuse it instead
        head["per_cluster"] = True
    files["index.yaml"] = yaml.safe_dump(
        head | {"scenario": plan["scenario"], "as_of": plan["as_of"],
                "input_digest": plan.get("input_digest", ""),
                "prune_selector": prune_selector(plan),
                "prune_allowlist": list(prune_allowlist()), "periods": index},
        sort_keys=False)
    return files


@dataclass(frozen=True)
class KueueExport:
    """The Kueue export's options (the module docstring says what each does).

    :data:`SHIPPED` is what ``planner export --to kueue``, ``planner cycle`` and the
    set-in-force check write, and what ``planner-kueue`` replays: both take this one
    object, so the replay runs what ships by construction, not by keeping two call sites
    equal. Other values are the variants the export was measured against.
    """

    fill: bool = True
    weights: str = "pace"
    takes_back: bool = True
    reserve_nodes: int = RESERVE_NODES
    overdrawn_at_pool: bool = True

    def period_objects(self, plan: dict[str, Any], tree: OrgTree, start: str, end: str,
                       cluster: str | None = None,
                       allowed: dict[str, tuple[str, ...]] | None = None,
                       pending: Mapping[tuple[str, str], int] | None = None
                       ) -> list[dict[str, Any]]:
        """:func:`period_objects` with these options."""
        return period_objects(plan, tree, start, end, cluster, fill=self.fill,
                              allowed=allowed, weights=self.weights,
                              takes_back=self.takes_back, pending=pending,
                              reserve_nodes=self.reserve_nodes,
                              overdrawn_at_pool=self.overdrawn_at_pool)

    def export(self, plan: dict[str, Any], org: pd.DataFrame, periods: int = 1,
               per_cluster: bool | None = None,
               allowed: dict[str, tuple[str, ...]] | None = None,
               pending: Mapping[tuple[str, str], int] | None = None) -> dict[str, str]:
        """:func:`export_kueue` with these options."""
        return export_kueue(plan, org, periods, per_cluster, fill=self.fill, allowed=allowed,
                            weights=self.weights, takes_back=self.takes_back,
                            pending=pending, reserve_nodes=self.reserve_nodes,
                            overdrawn_at_pool=self.overdrawn_at_pool)


#: the export that ships (see :class:`KueueExport`)
SHIPPED = KueueExport()
