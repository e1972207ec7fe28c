"""The Kueue manifest set in force, read back for ``planner export --late`` and checked.

``--late`` (the executor contract's rule 7, :func:`planner.exporters.kueue.widen_late`)
changes the set the cycle applied and writes it back, and the hourly cron line applies it
with ``kubectl apply --prune``: whatever object of the scenario is missing from the file
is then *deleted* from the cluster. So the set is used only if it is, object for object,
what this plan's export wrote for that period, up to the GPUs rules 6 and 7 move:

- read with the stat-before-open rule and bounded YAML
  (:func:`planner.inputs.read.read_text_file`, :func:`planner.inputs.bounded.load_yaml_all`:
  no FIFO or device, no alias, no nesting deeper than Kueue's);
- every document a Kueue object (``kueue.x-k8s.io/v1beta2``) of a kind the exporter
  writes, labelled ``app.kubernetes.io/managed-by: gpu-planner`` and with *this plan's*
  scenario label (a set of another scenario would prune this one's objects);
- its window (``gpu-planner.io/valid-from``, ``valid-until``, ``plan-as-of``,
  ``input-digest``, ``cluster``, on the pool Cohort) one period of this plan;
- exactly the objects the plan's export holds for that period (none missing: a truncated
  file; none extra), each equal to the exported one in every field except the GPU
  quantities (``nominalQuota``, ``lendingLimit``, ``borrowingLimit`` of ``nvidia.com/gpu``,
  and which flavors the pool Cohort holds), which must be whole, non-negative GPU counts;
- the GPUs conserved: per cluster, the queues' and the pool's nominal quotas add up to
  what the export's do (rules 6 and 7 move GPUs between them, never make any), and every
  queue keeps its reserved GPUs out of lending (``nominalQuota − lendingLimit``).

A set that fails is refused (exit 2) naming the file, the document (``row``) and the path
in it (``column``); nothing is written. The CRD schemas' own rules are met by construction:
the set is the export's, whose manifests the test suite validates against the Kueue CRDs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from planner.errors import InputProblem
from planner.exporters.common import period_bounds
from planner.exporters.kueue import (
    ANN,
    API,
    GPU,
    KINDS,
    MANAGED_BY,
    SHIPPED,
    object_labels,
)
from planner.inputs.bounded import json_path, load_yaml_all
from planner.inputs.org import OrgTree
from planner.inputs.read import read_text_file

#: The GPU quantities of a resource that rules 6 and 7 move (whole GPUs, never negative).
MOVED = ("nominalQuota", "lendingLimit", "borrowingLimit")
WINDOW = ("valid-from", "valid-until", "plan-as-of", "input-digest", "cluster")


def read_set(path: Path, plan: dict[str, Any], org: pd.DataFrame,
             allowed: Mapping[str, tuple[str, ...]] | None = None
             ) -> tuple[list[dict[str, Any]], list[InputProblem]]:
    """The manifest set in force at ``path``, checked against ``plan``'s own export.

    ``org`` and ``allowed`` (``budgets.csv``'s clusters per project) are the scenario's,
    as ``planner export`` and ``planner cycle`` export with them. Returns the objects, or
    ``[]`` and the problems (see the module docstring).
    """
    label = path.name
    text, problems = read_text_file(path, label)
    if text is None:
        return [], problems
    docs, problems = load_yaml_all(label, text)
    if docs is None:
        return [], problems
    problems = _ours(label, docs, plan)
    if problems:
        return [], problems
    window, problems = _window(label, docs, plan)
    if window is None:
        return [], problems
    start, end, cluster = window
    expected = SHIPPED.period_objects(plan, OrgTree.from_frame(org), start, end, cluster,
                                      allowed=dict(allowed or {}))
    problems = _same_objects(label, docs, expected)
    if not problems:
        problems = _conserved(label, docs, expected)
    return ([], problems) if problems else (docs, [])


def _identity(doc: dict[str, Any]) -> tuple[str, str, str]:
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    return (str(doc.get("kind")), str(meta.get("namespace", "")), str(meta.get("name")))


def _shown(doc: dict[str, Any]) -> str:
    kind, namespace, name = _identity(doc)
    return f"{kind} {namespace + '/' if namespace else ''}{name}"


def _ours(label: str, docs: list[Any], plan: dict[str, Any]) -> list[InputProblem]:
    """Every document a Kueue object the exporter writes, for this plan's scenario."""
    wanted = object_labels(plan)
    if not docs:
        return [InputProblem(label, None, None, "holds no objects; pass the set the cycle "
                                                "applied (kueue/kueue-<period>.yaml)")]
    for n, doc in enumerate(docs, start=1):
        meta = doc.get("metadata") if isinstance(doc, dict) else None
        labels = meta.get("labels") if isinstance(meta, dict) else None
        labels = labels if isinstance(labels, dict) else {}
        if (not isinstance(doc, dict) or doc.get("apiVersion") != API
                or doc.get("kind") not in KINDS or labels.get(MANAGED_BY[0]) != MANAGED_BY[1]):
            return [InputProblem(label, n, "document",
                                 "not a Kueue object written by gpu-planner")]
        if labels != wanted:
            return [InputProblem(
                label, n, "metadata.labels",
                f"labelled {labels!r}, but this plan's objects carry {wanted!r}: a set of "
                f"another scenario (applied with --prune, it would delete this one's "
                f"objects); pass the set the cycle applied for this plan")]
    return []


def _window(label: str, docs: list[dict[str, Any]], plan: dict[str, Any]
            ) -> tuple[tuple[str, str, str | None] | None, list[InputProblem]]:
    """The period (start, end, cluster) the set's annotations name: one of the plan's.

    The export writes the window on the set's pool Cohort alone (every other object keeps
    its bytes from one period's set to the next); every object that names a window must
    name the same one, and some object must name it.
    """
    seen = set()
    for doc in docs:
        notes = doc["metadata"].get("annotations")
        notes = notes if isinstance(notes, dict) else {}
        window = tuple(notes.get(f"{ANN}/{key}") for key in WINDOW)
        if any(value is not None for value in window):
            seen.add(window)
    if len(seen) != 1:
        said = "name different windows" if seen else "name no window"
        return None, [InputProblem(label, None, "metadata.annotations",
                                   f"its objects {said} (gpu-planner.io/valid-from … on the "
                                   "pool Cohort): not one set the exporter wrote")]
    start, end, as_of, digest, cluster = seen.pop()
    periods = period_bounds(plan, len(plan["periods"]))
    if as_of != plan["as_of"] or digest != plan.get("input_digest", ""):
        return None, [InputProblem(
            label, 1, "metadata.annotations",
            f"exported from the plan as of {as_of} (input digest {str(digest)[:12]}…), not "
            f"from this plan as of {plan['as_of']} ({plan.get('input_digest', '')[:12]}…): "
            "pass the set exported with this plan (current/kueue/) and this plan")]
    if (start, end) not in periods:
        return None, [InputProblem(label, 1, "metadata.annotations",
                                   f"valid from {start} to {end}, which is no period of "
                                   "this plan")]
    known = {c["cluster"] for c in plan["clusters"]}
    if cluster is not None and cluster not in known:
        return None, [InputProblem(label, 1, "metadata.annotations",
                                   f"for cluster {cluster!r}, which is not in this plan")]
    return (start, end, cluster), []


def _same_objects(label: str, docs: list[dict[str, Any]],
                  expected: list[dict[str, Any]]) -> list[InputProblem]:
    """The set holds exactly the exported objects, equal up to the GPUs rules 6 and 7 move."""
    found = {_identity(d): (n, d) for n, d in enumerate(docs, start=1)}
    wanted = {_identity(d): d for d in expected}
    problems = []
    missing = [_shown(d) for key, d in wanted.items() if key not in found]
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        problems.append(InputProblem(
            label, None, None,
            f"lacks {len(missing)} object(s) this plan exports for the period: "
            f"{', '.join(missing[:5])}{more} (a truncated file? applied with --prune, they "
            "would be deleted); pass the whole set the cycle applied"))
    if len(found) != len(docs):
        problems.append(InputProblem(label, None, None, "holds an object twice"))
    for key, (n, doc) in found.items():
        if key not in wanted:
            problems.append(InputProblem(label, n, "document",
                                         f"{_shown(doc)} is no object this plan exports "
                                         "for the period"))
            continue
        pool = doc.get("kind") == "Cohort" and "parentName" not in (wanted[key].get("spec")
                                                                     or {})
        wrong = _difference(doc, wanted[key], (), pool)
        if wrong is not None:
            where, message = wrong
            problems.append(InputProblem(label, n, json_path(where),
                                         f"{_shown(doc)}: {message}"))
    return problems


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _difference(found: Any, wanted: Any, where: tuple[object, ...], pool: bool
                ) -> tuple[tuple[object, ...], str] | None:
    """The first place ``found`` differs from ``wanted`` beyond the moved GPUs, and how."""
    if pool and where == ("spec",):
        return _pool_spec(found, where)
    if isinstance(wanted, dict):
        if not isinstance(found, dict):
            return where, f"{found!r} where the export writes an object"
        if set(found) != set(wanted):
            extra, lost = sorted(set(found) - set(wanted)), sorted(set(wanted) - set(found))
            return where, (f"fields {extra or lost} {'added' if extra else 'missing'}: "
                           "not as the export wrote it")
        moved = wanted.get("name") == GPU and "resources" in where
        for key in wanted:
            if moved and key in MOVED:
                if not _whole(found[key]):
                    return (*where, key), (f"{found[key]!r} is not a whole number of GPUs "
                                           "(at least 0)")
                continue
            wrong = _difference(found[key], wanted[key], (*where, key), pool)
            if wrong is not None:
                return wrong
        return None
    if isinstance(wanted, list):
        if not isinstance(found, list) or len(found) != len(wanted):
            return where, "not the list the export wrote (items added or missing)"
        for i, (f, w) in enumerate(zip(found, wanted, strict=True)):
            wrong = _difference(f, w, (*where, i), pool)
            if wrong is not None:
                return wrong
        return None
    if found != wanted or type(found) is not type(wanted):
        return where, f"{found!r}, but the export wrote {wanted!r}"
    return None


def _pool_spec(spec: Any, where: tuple[object, ...]) -> tuple[tuple[object, ...], str] | None:
    """The pool Cohort's spec: a GPU resource group whose flavors rules 6 and 7 drain."""
    if not isinstance(spec, dict) or set(spec) - {"resourceGroups"}:
        return where, "the pool Cohort holds its GPUs' resource group and nothing else"
    groups = spec.get("resourceGroups", [])
    if not isinstance(groups, list) or len(groups) > 1:
        return (*where, "resourceGroups"), "the pool holds one resource group at most"
    for g, group in enumerate(groups):
        at = (*where, "resourceGroups", g)
        if (not isinstance(group, dict) or group.get("coveredResources") != [GPU]
                or not isinstance(group.get("flavors"), list)):
            return at, f"a resource group of {GPU} flavors is what the pool holds"
        for f, flavor in enumerate(group["flavors"]):
            resources = flavor.get("resources") if isinstance(flavor, dict) else None
            if (not isinstance(resources, list) or len(resources) != 1
                    or not isinstance(resources[0], dict)
                    or set(resources[0]) != {"name", "nominalQuota"}
                    or resources[0]["name"] != GPU or not isinstance(flavor.get("name"), str)):
                return (*at, "flavors", f), f"a flavor with one {GPU} nominalQuota"
            if not _whole(resources[0]["nominalQuota"]):
                return ((*at, "flavors", f, "resources", 0, "nominalQuota"),
                        f"{resources[0]['nominalQuota']!r} is not a whole number of GPUs "
                        "(at least 0)")
    return None


def _gpu_quotas(objects: list[dict[str, Any]]) -> tuple[dict[str, int], dict[tuple, int]]:
    """Per flavor, the nominal GPUs of the queues and the pool, and the GPUs kept unlent.

    Kept: per (queue, flavor) with a lending limit, nominal − lendingLimit (its reserved).
    """
    total: dict[str, int] = defaultdict(int)
    kept: dict[tuple, int] = {}
    for doc in objects:
        if doc["kind"] not in ("ClusterQueue", "Cohort"):
            continue
        for group in (doc.get("spec") or {}).get("resourceGroups", []):
            for flavor in group["flavors"]:
                for r in flavor["resources"]:
                    if r["name"] != GPU:
                        continue
                    total[flavor["name"]] += int(r["nominalQuota"])
                    if "lendingLimit" in r:
                        kept[_identity(doc), flavor["name"]] = (int(r["nominalQuota"])
                                                                - int(r["lendingLimit"]))
    return dict(total), kept


def _conserved(label: str, docs: list[dict[str, Any]],
               expected: list[dict[str, Any]]) -> list[InputProblem]:
    """GPUs moved between queues and the pool, none made or lost; reservations unlent."""
    found_total, found_kept = _gpu_quotas(docs)
    wanted_total, wanted_kept = _gpu_quotas(expected)
    problems = []
    for flavor in sorted(set(found_total) | set(wanted_total)):
        has, should = found_total.get(flavor, 0), wanted_total.get(flavor, 0)
        if has != should:
            problems.append(InputProblem(
                label, None, f"nominalQuota ({flavor})",
                f"the queues and the pool hold {has} GPUs of flavor {flavor!r} as nominal "
                f"quota, the export {should}: rules 6 and 7 move GPUs between them, never "
                "make or lose any; pass the set the cycle applied"))
    for key, reserved in sorted(wanted_kept.items()):
        if found_kept.get(key) != reserved:
            (kind, namespace, name), flavor = key
            problems.append(InputProblem(
                label, None, f"lendingLimit ({name}, {flavor})",
                f"{kind} {name} keeps {found_kept.get(key)} GPUs of {flavor!r} from lending, "
                f"its reservations hold {reserved}: they would be lent out"))
    return problems
