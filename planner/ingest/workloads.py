"""Reading the Kueue queue: pending and admitted Workloads, for the demand they carry.

The same file as the usage ingest reads, ``kubectl get workloads -A -o json``
(:func:`planner.ingest.kueue.read_items`). Per Workload, in Kueue's own names (the
mapping onto projects and clusters is :mod:`planner.ingest.queue`'s):

- **finished** (the ``Finished`` condition True): skipped, it asks nothing more;
- **admitted** (``Admitted`` True and ``status.admission`` set): it runs, on the flavor
  assigned to ``nvidia.com/gpu`` (``status.admission.podSetAssignments[].flavors``; pod
  sets on several GPU flavors: skipped, reported), its GPUs the pods admitted × each pod's
  request, as the usage ingest counts them; otherwise **pending** (an evicted one waiting
  again too), its GPUs ``spec.podSets[].count`` × each pod's request and the node
  selectors of its GPU pod sets kept, to find its cluster;
- **queue**: ``metadata.namespace`` and ``spec.queueName`` (the project's LocalQueue);
- **class**: ``spec.priorityClassName`` (``gpu-planner-budget`` or ``-budget-gang``:
  allocated work; ``gpu-planner-unallocated`` or none: not);
- **time limit**: ``spec.maximumExecutionTimeSeconds`` (Kueue deactivates a Workload
  admitted longer than that; a Job's label ``kueue.x-k8s.io/max-exec-time-seconds`` sets
  it), else the annotation :data:`LIMIT_ANNOTATION` (whole seconds), else none (it may run
  to the quarter's end). **Time used**: ``status.accumulatedPastExecutionTimeSeconds``
  (the time admitted before an eviction) plus, while admitted, ``now`` − the ``Admitted``
  condition's ``lastTransitionTime``; the time left is the limit less that.

A Workload that is not the shape Kueue writes is an :class:`~planner.errors.InputProblem`
naming the file, the Workload's position in ``items`` (``row``, 1-based) and the JSON path
of the field (``column``), as in the usage ingest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from planner.errors import InputProblem
from planner.ingest.kueue import (
    _Bad,
    _condition,
    _get,
    _stamp,
    admitted_gpus,
    open_workload,
    pod_sets_of,
    read_items,
)
from planner.ingest.records import NO_GPU, SEVERAL_FLAVORS, Skip

#: a Workload's time limit in whole seconds, where ``spec.maximumExecutionTimeSeconds``
#: is not set (an annotation the job's owner may put on it)
LIMIT_ANNOTATION = "gpu-planner.io/time-limit-seconds"
FINISHED = "finished"


@dataclass(frozen=True)
class QueuedWorkload:
    """One pending or admitted Workload, in Kueue's names."""

    job_id: str  # namespace/name
    row: int
    namespace: str
    queue_name: str
    priority_class: str
    admitted: bool
    flavor: str | None  # the GPU flavor it was admitted on
    selectors: tuple[tuple[tuple[str, str], ...], ...]  # GPU pod sets' node selectors
    gpus: float
    limit_seconds: int | None
    used_seconds: int
    submit: pd.Timestamp | None  # metadata.creationTimestamp

    @property
    def seconds_left(self) -> int | None:
        """Its time limit less the time it has been admitted (never below 0)."""
        if self.limit_seconds is None:
            return None
        return max(self.limit_seconds - self.used_seconds, 0)


def _limit(item: dict[str, Any], spec: dict[str, Any], meta: dict[str, Any], path: str
           ) -> int | None:
    value = spec.get("maximumExecutionTimeSeconds")
    where = f"{path}.spec.maximumExecutionTimeSeconds"
    if value is None:
        annotations = _get(meta, "annotations", f"{path}.metadata", dict, required=False)
        value = annotations.get(LIMIT_ANNOTATION)
        where = f"{path}.metadata.annotations[{LIMIT_ANNOTATION}]"
        if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
            value = int(value.strip())
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise _Bad(where, f"{value!r} is not a whole number of seconds ≥ 1")
    return value


def queued_workload(item: Any, row: int, now: pd.Timestamp) -> QueuedWorkload | Skip:
    """One Workload as a queued job, or why it asks nothing; raises ``_Bad`` if malformed."""
    path, meta = open_workload(item, row)
    namespace = _get(meta, "namespace", f"{path}.metadata", str)
    job = f"{namespace}/{_get(meta, 'name', f'{path}.metadata', str)}"
    created = meta.get("creationTimestamp")
    submit = _stamp(created, f"{path}.metadata.creationTimestamp") if created else None
    spec = _get(item, "spec", path, dict)
    status = _get(item, "status", path, dict, required=False)
    conditions = _get(status, "conditions", f"{path}.status", list, required=False)
    if _condition(conditions, "Finished", f"{path}.status.conditions") is not None:
        return Skip(FINISHED, job, row)
    admitted_at = _condition(conditions, "Admitted", f"{path}.status.conditions")
    admission = _get(status, "admission", f"{path}.status", dict, required=False)
    past = _get(status, "accumulatedPastExecutionTimeSeconds", f"{path}.status", int,
                required=False)
    limit = _limit(item, spec, meta, path)
    queue = _get(spec, "queueName", f"{path}.spec", str, required=False)
    klass = _get(spec, "priorityClassName", f"{path}.spec", str, required=False)
    admitted = admitted_at is not None and bool(admission)
    if admitted:
        gpus, flavors = admitted_gpus(spec, admission, path)
        if len(flavors) > 1:
            return Skip(SEVERAL_FLAVORS, job, row, ", ".join(sorted(flavors)))
        flavor = flavors.pop() if flavors else None
        used = past + max(int((now - admitted_at) / pd.Timedelta(seconds=1)), 0)
        selectors: tuple[tuple[tuple[str, str], ...], ...] = ()
    else:
        gpus, flavor, used, chosen = 0.0, None, past, []
        for ps in pod_sets_of(spec, path):
            if ps.gpus_per_pod * ps.count > 0:
                gpus += ps.gpus_per_pod * ps.count
                pod_spec = _get(ps.template, "spec", f"{ps.path}.template", dict)
                picked = _get(pod_spec, "nodeSelector", f"{ps.path}.template.spec", dict,
                              required=False)
                chosen.append(tuple(sorted((str(k), str(v)) for k, v in picked.items())))
        selectors = tuple(chosen)
    if gpus <= 0:
        return Skip(NO_GPU, job, row, f"LocalQueue {queue or '(none)'}")
    return QueuedWorkload(job, row, namespace, queue, klass, admitted, flavor, selectors,
                          gpus, limit, used, submit)


def parse_queue(path: Path, now: pd.Timestamp
                ) -> tuple[list[QueuedWorkload], list[Skip], list[InputProblem]]:
    """The pending and admitted Workloads of a file; the ones skipped; the problems."""
    if not path.is_file():
        return [], [], [InputProblem(str(path), None, None, "no such file")]
    items, problems = read_items(path)
    if items is None:
        return [], [], problems
    jobs, skipped, more = queue_items(path.name, items, now)
    return jobs, skipped, problems + more


def queue_items(label: str, items: list[Any], now: pd.Timestamp
                ) -> tuple[list[QueuedWorkload], list[Skip], list[InputProblem]]:
    """The pending and admitted Workloads among ``items`` (a list's ``items``), as above."""
    problems: list[InputProblem] = []
    jobs: list[QueuedWorkload] = []
    skipped: list[Skip] = []
    for row, item in enumerate(items, start=1):
        try:
            got = queued_workload(item, row, now)
        except _Bad as bad:
            problems.append(InputProblem(label, row, bad.path, bad.message))
            continue
        if isinstance(got, Skip):
            skipped.append(got)
        else:
            jobs.append(got)
    return jobs, skipped, problems


def selector_cluster(selectors: tuple[tuple[tuple[str, str], ...], ...],
                     clusters: Mapping[str, Mapping[str, str]], only: str | None) -> str | None:
    """The one cluster every GPU pod set's node selector picks (None: none, or several).

    ``clusters``: cluster -> the node labels of its ResourceFlavor; ``only``: the project's
    one allowed cluster, taken when the selectors pick none.
    """
    found = set()
    for chosen in selectors:
        picked = dict(chosen)
        hits = [c for c, labels in clusters.items()
                if all(picked.get(k) == v for k, v in labels.items())]
        found.add(hits[0] if len(hits) == 1 else None)
    if found in ({None}, set()) and only is not None:
        return only
    return found.pop() if len(found) == 1 else None
