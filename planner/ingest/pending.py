"""The gangs waiting in a Kueue: what the Kueue export widens nominal quotas to (rule 6).

Read from the file ``planner ingest kueue`` and ``planner cycle --kueue`` read, the JSON
of ``kubectl get workloads -A -o json`` (:func:`planner.ingest.kueue.read_items`).
A Workload counts when it is:

- **pending**: none of its ``QuotaReserved``, ``Admitted`` or ``Finished`` conditions is
  True (an evicted workload waiting again counts);
- **a gang on a budget**: ``spec.priorityClassName`` is the export's
  ``gpu-planner-budget-gang`` (allocated work of at least one node's GPUs, the class its
  job's ``kueue.x-k8s.io/priority-class`` label names), and its GPUs (per pod set, pods ×
  the pod's ``nvidia.com/gpu`` request, as the ingest counts them) are at least one node's
  of its cluster;
- **a project's**: ``spec.queueName`` is the LocalQueue the exporter made for a project
  (:func:`planner.ingest.names.kueue_cluster_queue`), in that project's namespace;
- **on one cluster**: every pod set asking for GPUs selects one cluster's nodes (its
  ``nodeSelector`` holds all the labels of that cluster's ResourceFlavor), or the project
  may run on one cluster only. A gang Kueue may place on several flavors widens nothing:
  which flavor it would be admitted on is Kueue's choice, not the planner's.

The result is, per (project, cluster), the GPUs of the widest such gang. Workloads that
are not the shape Kueue writes are problems (:class:`~planner.errors.InputProblem`) naming
the file, the Workload's position in ``items`` (``row``) and the field (``column``), as in
the ingest.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planner.errors import InputProblem
from planner.exporters.kueue import cluster_selector, priority_class
from planner.ingest.kueue import (
    _Bad,
    _condition,
    _get,
    open_workload,
    pod_sets_of,
    read_items,
)
from planner.ingest.names import invert, kueue_cluster_queue
from planner.ingest.workloads import selector_cluster

GANG = priority_class(allocated=True, whole_nodes=True)
HELD = ("QuotaReserved", "Admitted", "Finished")

# why a Workload in the file widens nothing (reported as counts)
NOT_PENDING = "admitted or finished"
NOT_GANG = "not a budget gang (spec.priorityClassName is not gpu-planner-budget-gang)"
NO_PROJECT = "its LocalQueue is none the export made"
NO_CLUSTER = "its pods select no single cluster"
NARROW = "narrower than a node of its cluster"


@dataclass(frozen=True)
class PendingGangs:
    """(project, cluster) -> GPUs of the widest pending gang; what was passed over, why."""

    widest: dict[tuple[str, str], int] = field(default_factory=dict)
    passed_over: Counter = field(default_factory=Counter)

    def lines(self) -> list[str]:
        """What a person reads: the gangs counted, and the Workloads passed over by reason."""
        out = [f"pending gangs: {len(self.widest)} (project, cluster) widest"]
        out += [f"  passed over, {why}: {n}" for why, n in sorted(self.passed_over.items())]
        return out


def _held(status: dict[str, Any], path: str) -> bool:
    """Whether one of the :data:`HELD` conditions is True (the ingest's reading of them)."""
    conditions = _get(status, "conditions", f"{path}.status", list, required=False)
    return any(_condition(conditions, kind, f"{path}.status.conditions") is not None
               for kind in HELD)


def _gang(item: Any, row: int, queues: Mapping[str, str],
          clusters: Mapping[str, dict[str, str]], allowed: Mapping[str, tuple[str, ...]],
          gpn: Mapping[str, int]) -> tuple[str, str, int] | str:
    """One Workload as (project, cluster, GPUs), or why it widens nothing."""
    path, meta = open_workload(item, row)
    namespace = _get(meta, "namespace", f"{path}.metadata", str)
    spec = _get(item, "spec", path, dict)
    if _held(_get(item, "status", path, dict, required=False), path):
        return NOT_PENDING
    if _get(spec, "priorityClassName", f"{path}.spec", str, required=False) != GANG:
        return NOT_GANG
    project = queues.get(_get(spec, "queueName", f"{path}.spec", str, required=False))
    if project is None or kueue_cluster_queue(project) != namespace:
        return NO_PROJECT
    gpus, selectors = 0.0, []
    for ps in pod_sets_of(spec, path):
        if ps.gpus_per_pod * ps.count > 0:
            gpus += ps.gpus_per_pod * ps.count
            pod_spec = _get(ps.template, "spec", f"{ps.path}.template", dict)
            selectors.append(_get(pod_spec, "nodeSelector", f"{ps.path}.template.spec", dict,
                                  required=False))
    mine = allowed.get(project, tuple(clusters))
    picked = tuple(tuple(sorted((str(k), str(v)) for k, v in chosen.items()))
                   for chosen in selectors)
    cluster = selector_cluster(picked, clusters, mine[0] if len(mine) == 1 else None)
    if cluster is None or cluster not in mine:
        return NO_CLUSTER
    if gpus < gpn[cluster]:
        return NARROW
    return project, cluster, int(gpus)


def pending_gangs(path: Path, clusters: Iterable[Mapping[str, Any]], projects: Iterable[str],
                  allowed: Mapping[str, tuple[str, ...]] | None = None
                  ) -> tuple[PendingGangs, list[InputProblem]]:
    """The widest pending gang per (project, cluster) in a Workloads file; the problems.

    ``clusters``: a plan's ``clusters`` (or the rows of a scenario's clusters table: id,
    GPU type, GPUs a node, node labels), whose node selectors the flavors carry;
    ``projects``: the scenario's; ``allowed``: project -> the clusters it may run on
    (budgets.csv; missing: every cluster).
    """
    items, problems = read_items(path)
    if items is None:
        return PendingGangs(), problems
    queues, _ = invert(kueue_cluster_queue, projects)  # a name two ids share: nobody's
    rows = list(clusters)
    selectors = {c["cluster"]: cluster_selector(dict(c)) for c in rows}
    gpn = {c["cluster"]: int(c["gpus_per_node"]) for c in rows}
    widest: dict[tuple[str, str], int] = {}
    passed: Counter = Counter()
    for row, item in enumerate(items, start=1):
        try:
            got = _gang(item, row, queues, selectors, allowed or {}, gpn)
        except _Bad as bad:
            problems.append(InputProblem(path.name, row, bad.path, bad.message))
            continue
        if isinstance(got, str):
            passed[got] += 1
            continue
        project, cluster, gpus = got
        widest[project, cluster] = max(widest.get((project, cluster), 0), gpus)
    return PendingGangs(dict(sorted(widest.items())), passed), problems
