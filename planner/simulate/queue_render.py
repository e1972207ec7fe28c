"""A replay's queue as the executor prints it: ``squeue`` lines and Kueue Workloads.

The shipped path of the planner replays (``DemandSource(via_text=True)``): at each replan
the replay writes its waiting and running jobs as the site's tools would show them and
reads them back with the ingest's own parser (:mod:`planner.ingest.squeue`,
:mod:`planner.ingest.workloads`) and mapping (:mod:`planner.ingest.queue`), so the demand
it plans from went through exactly what ``planner ingest`` runs. The tests render a
replay's queue with these functions too, and compare the ``demand.csv`` the CLI writes
from it with the replay's.

What a job shows: its id (its index + 1: Slurm ids are digits), its project's account
or LocalQueue, its cluster (partition, flavor), its GPUs, its state, its time limit and
the time it has run, chosen so that the limit less the time run is what the replay's
replanner says the job has left (:meth:`~planner.simulate.replanner.Replanner.
hours_left`, in whole seconds, rounded up). Slurm: its QOS (a running job's by its class,
a waiting one's by the wrapper rule, :meth:`~planner.simulate.slurm_replay.
SlurmExecutor.qos_of`), and the jobs the wrapper moved (allocated work under
``gp-opportunistic``) as ``planner tick`` records them. Kueue: its class (budget work
``gpu-planner-budget`` or ``-gang``, else ``gpu-planner-unallocated``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import Any

import pandas as pd

from planner.exporters.kueue import API, GPU, PRIORITY_CLASSES, cluster_selector, priority_class
from planner.exporters.slurm import OPPORTUNISTIC_QOS, OVERDRAWN_QOS, account, qos_name
from planner.ingest.names import kueue_cluster_queue, kueue_flavor
from planner.ingest.squeue import PENDING, RUNNING, SqueueJob

_HOUR = pd.Timedelta(hours=1)
_SECOND = pd.Timedelta(seconds=1)


def seconds_up(hours: float) -> int:
    """Whole seconds of ``hours``, rounded up (0 for none): the periods asked stay the same."""
    return max(0, math.ceil(hours * 3600.0)) if hours > 0 else 0


def _times(sim, job: int, hours_left: float) -> tuple[int, int]:
    """(limit, used) seconds of ``job``: used is its current run's, limit − used its time left."""
    used = round((sim.now - sim.started_at(job)) * 3600.0) if sim.is_running(job) else 0
    return used + seconds_up(hours_left), max(used, 0)


def _submit(sim, job: int) -> pd.Timestamp:
    start = sim.scenario.config.quarter_start
    return (start + sim.jobs.submit[job] * _HOUR).floor("s")


def squeue_rows(sim, hours_left: Callable[[Any, int], float], budget: Callable[[Any, int], bool],
                skip: AbstractSet[int], overdrawn: Callable[[Any, int], bool] | None = None
                ) -> tuple[list[SqueueJob], dict[str, str]]:
    """Every waiting and running job but ``skip`` as squeue lines; the jobs moved.

    ``budget(sim, job)``: whether the job is (or would start) under its budget QOS;
    ``overdrawn(sim, job)``: whether it is (or would start) under ``gp-overdrawn`` (rule 8;
    ``planner tick`` records allocated work it moved there as moved from its budget QOS).
    """
    jobs = sim.jobs
    rows: list[SqueueJob] = []
    moved: dict[str, str] = {}
    for job in sim.outstanding_jobs():
        if job in skip:
            continue
        project = sim.projects[jobs.project[job]]
        cluster = sim.cluster_ids[jobs.cluster[job]]
        qos = qos_name(project) if budget(sim, job) else OPPORTUNISTIC_QOS
        if overdrawn is not None and qos == OPPORTUNISTIC_QOS and overdrawn(sim, job):
            qos = OVERDRAWN_QOS
        job_id = str(job + 1)
        if jobs.allocated[job] and qos != qos_name(project):
            moved[job_id] = qos_name(project)
        running = sim.is_running(job)
        limit, used = _times(sim, job, hours_left(sim, job))
        gpn = sim.gpn[jobs.cluster[job]]
        rows.append(SqueueJob(job_id, None, account(project), cluster, qos,
                              RUNNING if running else PENDING, "None" if running else "Priority",
                              int(jobs.gpus[job]), max(1, -(-int(jobs.gpus[job]) // gpn)),
                              limit, used, _submit(sim, job)))
    return rows, moved


def _condition(kind: str, at: pd.Timestamp) -> dict[str, Any]:
    return {"type": kind, "status": "True", "lastTransitionTime": _rfc3339(at),
            "reason": kind, "message": f"replayed: {kind}"}


def _rfc3339(at: pd.Timestamp) -> str:
    return at.tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ")


def workload_items(sim, hours_left: Callable[[Any, int], float], as_of: pd.Timestamp,
                   skip: AbstractSet[int]) -> list[dict[str, Any]]:
    """Every waiting and running job but ``skip`` as a Workload (``kueue.x-k8s.io/v1beta2``)."""
    jobs = sim.jobs
    selectors = {str(c["cluster"]): cluster_selector(dict(c))
                 for c in sim.scenario.clusters.to_dict("records")}
    items = []
    for job in sim.outstanding_jobs():
        if job in skip:
            continue
        project = sim.projects[jobs.project[job]]
        cluster = sim.cluster_ids[jobs.cluster[job]]
        gpus, gpn = int(jobs.gpus[job]), sim.gpn[jobs.cluster[job]]
        pods, per_pod = (gpus // gpn, gpn) if gpus > gpn and gpus % gpn == 0 else (1, gpus)
        klass = priority_class(bool(jobs.allocated[job]), gpus >= gpn)
        limit, used = _times(sim, job, hours_left(sim, job))
        queue = kueue_cluster_queue(project)
        item: dict[str, Any] = {
            "apiVersion": API, "kind": "Workload",
            "metadata": {"name": f"job-{job + 1}", "namespace": queue,
                         "creationTimestamp": _rfc3339(_submit(sim, job))},
            "spec": {
                "queueName": queue, "priorityClassName": klass,
                "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass",
                "priority": PRIORITY_CLASSES[klass],
                "maximumExecutionTimeSeconds": max(limit, 1),
                "podSets": [{"name": "main", "count": pods, "template": {"spec": {
                    "nodeSelector": dict(selectors[cluster]),
                    "containers": [{"name": "main", "image": "replay",
                                    "resources": {"requests": {GPU: str(per_pod)}}}]}}}]},
        }
        if sim.is_running(job):
            admitted = as_of - used * _SECOND
            item["status"] = {
                "conditions": [_condition("QuotaReserved", admitted),
                               _condition("Admitted", admitted)],
                "admission": {"clusterQueue": queue, "podSetAssignments": [
                    {"name": "main", "count": pods, "flavors": {GPU: kueue_flavor(cluster)},
                     "resourceUsage": {GPU: str(gpus)}}]}}
        items.append(item)
    return items
