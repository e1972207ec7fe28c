"""Reading Kueue Workloads: the JSON of ``kubectl get workloads -A -o json``.

The file is a ``List`` (or ``WorkloadList``) of Workloads (``kueue.x-k8s.io/v1beta2``,
or ``v1beta1``: the fields read here are the same in both), or one Workload. Per Workload:

- **id**: ``<namespace>/<name>`` (``metadata``); the ledger writes ``kueue:<namespace>/<name>``.
- **admitted**: the ``Admitted`` condition (``status.conditions[]``) with status ``True``
  and ``status.admission`` set; its ``lastTransitionTime`` is the start. Not admitted
  (pending, or evicted and waiting again): skipped, reported.
- **re-admitted** after an eviction or preemption: the ``Admitted`` condition holds the
  latest admission, and ``status.accumulatedPastExecutionTimeSeconds`` the time admitted
  before; the start is moved back by that much, so the GPU-hours are the whole job's (the
  earlier part is placed just before the latest admission, not when it really ran).
- **finished**: the ``Finished`` condition with status ``True``; its
  ``lastTransitionTime`` is the end. Otherwise the Workload runs: counted up to ``now``.
- **project**: ``status.admission.clusterQueue``; **cluster**: the flavor assigned to
  ``nvidia.com/gpu`` (``status.admission.podSetAssignments[].flavors``).
- **GPUs**: per pod set, the pods admitted (``podSetAssignments[].count``, else
  ``spec.podSets[].count``) × the pod's ``nvidia.com/gpu`` request: the sum over its
  ``containers`` of ``resources.requests`` (else ``limits``, which requests default to),
  or the largest of an ``initContainers``' if that is more (Kubernetes' effective request).
  No GPU: skipped; pod sets on several GPU flavors (clusters): skipped, both reported.

A Workload that is not the shape above is an :class:`~planner.errors.InputProblem`
naming the file, the Workload's position in ``items`` (``row``, 1-based) and the JSON
path of the field (``column``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from planner.errors import InputProblem
from planner.ingest.records import (
    NO_GPU,
    NOT_ADMITTED,
    SEVERAL_FLAVORS,
    ParsedSource,
    Skip,
    SourceJob,
)
from planner.inputs.bounded import load_json
from planner.inputs.read import read_text_file
from planner.inputs.schema import bad_characters
from planner.inputs.validate import parse_datetime

GPU = "nvidia.com/gpu"
INT32 = 2**31 - 1  # accumulatedPastExecutionTimeSeconds is an int32 in the Workload CRD
NAME_LENGTH = 253  # a Kubernetes object name (DNS subdomain) at most
_QUANTITY = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?")
_SCALE = {None: 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
          "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


class _Bad(Exception):
    """A field of one Workload is not what Kueue writes."""

    def __init__(self, path: str, message: str):
        super().__init__(message)
        self.path = path
        self.message = message


def quantity(value: object, path: str) -> float:
    """A Kubernetes quantity (``2``, ``"2"``, ``"500m"``) as a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _Bad(path, f"{value!r} is not a quantity")
    if isinstance(value, (int, float)):
        number = float(value)
    else:
        found = _QUANTITY.fullmatch(value.strip())
        if not found:
            raise _Bad(path, f"{value!r} is not a quantity (such as 1 or 500m)")
        number = float(found.group(1)) * _SCALE[found.group(2)]
    if not math.isfinite(number):
        raise _Bad(path, f"{value!r} is not a finite quantity")
    if number < 0:
        raise _Bad(path, f"{value!r} is negative")
    return number


def _get(obj: dict[str, Any], key: str, path: str, kind: type, required: bool = True) -> Any:
    value = obj.get(key)
    if value is None:
        if required:
            raise _Bad(f"{path}.{key}", "missing")
        return kind()
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _Bad(f"{path}.{key}", f"{type(value).__name__} where Kueue writes "
                                    f"{'an object' if kind is dict else kind.__name__}")
    return value


def _name(meta: dict[str, Any], key: str, path: str) -> str:
    """``metadata.<key>`` (namespace, name): text without control characters, not too long.

    Kubernetes allows neither; a file that holds them was made by hand, and the id would
    reach ``usage.csv``, the report and the terminal.
    """
    value = _get(meta, key, f"{path}.metadata", str)
    if bad := bad_characters(value):
        raise _Bad(f"{path}.metadata.{key}", f"holds control characters ({bad}), which "
                                             "Kubernetes names never do")
    if len(value) > NAME_LENGTH:
        raise _Bad(f"{path}.metadata.{key}", f"is {len(value):,} characters long; a "
                                             f"Kubernetes name is at most {NAME_LENGTH}")
    return value


def _stamp(value: object, path: str) -> pd.Timestamp:
    stamp = parse_datetime(value) if isinstance(value, str) else None
    if stamp is None:
        raise _Bad(path, f"{value!r} is not an RFC 3339 time")
    return pd.Timestamp(stamp)


def _container_gpus(containers: list[Any], path: str) -> list[float]:
    out = []
    for i, container in enumerate(containers):
        where = f"{path}[{i}]"
        if not isinstance(container, dict):
            raise _Bad(where, "not an object")
        resources = _get(container, "resources", where, dict, required=False)
        requests = _get(resources, "requests", f"{where}.resources", dict, required=False)
        limits = _get(resources, "limits", f"{where}.resources", dict, required=False)
        if GPU in requests:
            out.append(quantity(requests[GPU], f"{where}.resources.requests[{GPU}]"))
        elif GPU in limits:
            out.append(quantity(limits[GPU], f"{where}.resources.limits[{GPU}]"))
        else:
            out.append(0.0)
    return out


def pod_gpus(template: dict[str, Any], path: str) -> float:
    """GPUs one pod of a template requests: max(Σ containers, max init container)."""
    spec = _get(template, "spec", path, dict)
    containers = _get(spec, "containers", f"{path}.spec", list)
    init = _get(spec, "initContainers", f"{path}.spec", list, required=False)
    return max([sum(_container_gpus(containers, f"{path}.spec.containers")),
                *_container_gpus(init, f"{path}.spec.initContainers")])


@dataclass(frozen=True)
class PodSet:
    """One of a Workload's ``spec.podSets``: its pods, each one's GPUs, its pod template."""

    name: str
    count: int
    gpus_per_pod: float
    template: dict[str, Any]
    path: str  # the JSON path of the pod set, for problems


def pod_sets_of(spec: dict[str, Any], path: str) -> list[PodSet]:
    """A Workload's pod sets (``path``: the Workload's own JSON path)."""
    out = []
    for i, ps in enumerate(_get(spec, "podSets", f"{path}.spec", list)):
        where = f"{path}.spec.podSets[{i}]"
        if not isinstance(ps, dict):
            raise _Bad(where, "not an object")
        name = _get(ps, "name", where, str, required=False) or "main"
        count = ps.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise _Bad(f"{where}.count", f"{count!r} is not a pod count")
        template = _get(ps, "template", where, dict)
        out.append(PodSet(name, count, pod_gpus(template, f"{where}.template"), template, where))
    return out


def _condition(conditions: list[Any], kind: str, path: str) -> pd.Timestamp | None:
    """The ``lastTransitionTime`` of condition ``kind`` when its status is True."""
    for i, c in enumerate(conditions):
        if not isinstance(c, dict):
            raise _Bad(f"{path}[{i}]", "not an object")
        if c.get("type") == kind and c.get("status") == "True":
            return _stamp(c.get("lastTransitionTime"), f"{path}[{i}].lastTransitionTime")
    return None


def open_workload(item: Any, row: int) -> tuple[str, dict[str, Any]]:
    """Item ``row`` (1-based) of the list, checked to be a Workload: its JSON path, metadata."""
    path = f"items[{row - 1}]"
    if not isinstance(item, dict):
        raise _Bad(path, "not an object")
    if item.get("kind", "Workload") != "Workload":
        raise _Bad(f"{path}.kind", f"{item.get('kind')!r}; a Workload list holds Workloads")
    return path, _get(item, "metadata", path, dict)


def admitted_gpus(spec: dict[str, Any], admission: dict[str, Any], path: str
                  ) -> tuple[float, set[str]]:
    """GPUs a Workload was admitted with, and the GPU flavors they were admitted on.

    Per ``status.admission.podSetAssignments[]``: the pods admitted (its ``count``, else
    the pod set's) × the pod's GPU request (:func:`pod_gpus`).
    """
    pod_sets = {ps.name: (ps.count, ps.gpus_per_pod) for ps in pod_sets_of(spec, path)}
    gpus, flavors = 0.0, set()
    assignments = _get(admission, "podSetAssignments", f"{path}.status.admission", list)
    for i, a in enumerate(assignments):
        where = f"{path}.status.admission.podSetAssignments[{i}]"
        if not isinstance(a, dict):
            raise _Bad(where, "not an object")
        name = _get(a, "name", where, str, required=False) or "main"
        if name not in pod_sets:
            raise _Bad(f"{where}.name", f"{name!r} names no pod set of spec.podSets")
        count, per_pod = pod_sets[name]
        admitted_count = a.get("count", count)
        if not isinstance(admitted_count, int) or isinstance(admitted_count, bool) \
                or admitted_count < 0:
            raise _Bad(f"{where}.count", f"{admitted_count!r} is not a pod count")
        if per_pod * admitted_count <= 0:
            continue
        flavor = _get(a, "flavors", where, dict, required=False).get(GPU)
        if not isinstance(flavor, str) or not flavor:
            raise _Bad(f"{where}.flavors", f"no flavor for {GPU}, which the pod set requests")
        gpus += per_pod * admitted_count
        flavors.add(flavor)
    return gpus, flavors


def workload_job(item: Any, row: int) -> SourceJob | Skip:
    """One Workload as a job, or why it is skipped; raises ``_Bad`` for a malformed one."""
    path, meta = open_workload(item, row)
    job = f"{_name(meta, 'namespace', path)}/{_name(meta, 'name', path)}"
    spec = _get(item, "spec", path, dict)
    status = _get(item, "status", path, dict, required=False)
    conditions = _get(status, "conditions", f"{path}.status", list, required=False)
    admitted = _condition(conditions, "Admitted", f"{path}.status.conditions")
    finished = _condition(conditions, "Finished", f"{path}.status.conditions")
    admission = _get(status, "admission", f"{path}.status", dict, required=False)
    past = _get(status, "accumulatedPastExecutionTimeSeconds", f"{path}.status", int,
                required=False)
    if not 0 <= past <= INT32:
        raise _Bad(f"{path}.status.accumulatedPastExecutionTimeSeconds",
                   f"{past} is not a number of seconds Kueue writes (0 to {INT32:,}, int32)")
    if admitted is None or not admission:  # an evicted one's earlier run has no flavor now
        before = f"ran {past} s before an eviction; counted once admitted again" if past else ""
        return Skip(NOT_ADMITTED, job, row, before)
    queue = _get(admission, "clusterQueue", f"{path}.status.admission", str)
    gpus, flavors = admitted_gpus(spec, admission, path)
    if gpus <= 0:
        return Skip(NO_GPU, job, row, f"ClusterQueue {queue}")
    if len(flavors) > 1:
        return Skip(SEVERAL_FLAVORS, job, row, ", ".join(sorted(flavors)))
    start = admitted - pd.Timedelta(seconds=past)
    return SourceJob(job, row, queue, flavors.pop(), gpus, start, finished)


def read_items(path: Path) -> tuple[list[Any] | None, list[InputProblem]]:
    """The Workloads of a ``kubectl get workloads -A -o json`` file (None: unreadable).

    Read with bounds (:func:`planner.inputs.bounded.load_json`: no NaN, no nesting
    deeper than Kubernetes writes); a problem inside ``items[N]`` names row N + 1.
    """
    label = path.name
    text, problems = read_text_file(path, label)
    if text is None:
        return None, problems
    data, problems = load_json(label, text, "save the output of "
                                            "`kubectl get workloads -A -o json`")
    if problems:
        return None, [_located(p) for p in problems]
    if isinstance(data, dict) and data.get("kind") == "Workload":
        return [data], problems
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        return data["items"], problems
    return None, [InputProblem(
        label, None, "items", "not a list of Workloads (no items array); save the output "
        "of `kubectl get workloads -A -o json`")]


def _located(problem: InputProblem) -> InputProblem:
    """A problem at ``items[N]...`` as row N + 1 (the Workload's place), if it is one."""
    found = re.match(r"items\[(\d+)\]", problem.column or "")
    if found is None:
        return problem
    return InputProblem(problem.file, int(found.group(1)) + 1, problem.column, problem.message)


def parse_workloads(path: Path) -> tuple[ParsedSource, list[InputProblem]]:
    """The jobs of a ``kubectl get workloads -A -o json`` file, the skipped, the problems."""
    label = path.name
    items, problems = read_items(path)
    if items is None:
        return ParsedSource((), ()), problems
    jobs: list[SourceJob] = []
    skipped: list[Skip] = []
    for row, item in enumerate(items, start=1):
        try:
            got = workload_job(item, row)
        except _Bad as bad:
            problems.append(InputProblem(label, row, bad.path, bad.message))
            continue
        (skipped if isinstance(got, Skip) else jobs).append(got)  # type: ignore[arg-type]
    return ParsedSource(tuple(jobs), tuple(skipped)), problems
