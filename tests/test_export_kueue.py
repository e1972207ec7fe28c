"""Kueue manifests: every object valid against the real v0.19.2 CRDs, quotas = the plan's."""

from __future__ import annotations

import functools
import json
import math
import os
from pathlib import Path

import jsonschema
import pytest
import yaml

from planner.exporters.common import safe_name
from planner.exporters.kueue import export_kueue, file_name
from tests.export_fixtures import ORG, PLAN

KUEUE_DIR = Path(os.environ.get(
    "GPU_PLANNER_KUEUE_CRDS",
    Path(__file__).resolve().parents[2] / "shared" / "schemas" / "kueue"))
CRDS = {"ClusterQueue": "clusterqueues", "Cohort": "cohorts",
        "ResourceFlavor": "resourceflavors", "LocalQueue": "localqueues"}

needs_crds = pytest.mark.skipif(
    not (KUEUE_DIR / "kueue.x-k8s.io_clusterqueues.yaml").exists(),
    reason=f"Kueue CRDs not found in {KUEUE_DIR} (set GPU_PLANNER_KUEUE_CRDS)")


@functools.cache
def schema(kind: str) -> dict:
    crd = yaml.safe_load((KUEUE_DIR / f"kueue.x-k8s.io_{CRDS[kind]}.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta2"]
    return version["schema"]["openAPIV3Schema"]


def validate(obj: dict) -> None:
    """The CRD's openAPIV3Schema, and by hand its x-kubernetes-validations (CEL) rules."""
    jsonschema.Draft7Validator(schema(obj["kind"])).validate(obj)
    spec = obj["spec"]
    if obj["kind"] in ("ClusterQueue", "Cohort"):
        for group in spec.get("resourceGroups", []):
            assert all(len(f["resources"]) == len(group["coveredResources"])
                       for f in group["flavors"])
    if obj["kind"] == "ClusterQueue":
        limits = [key for g in spec["resourceGroups"] for f in g["flavors"]
                  for r in f["resources"] for key in r if key.endswith("Limit")]
        assert "cohortName" in spec or not limits, "borrowing/lending limits need a cohort"
        for r in (r for g in spec["resourceGroups"] for f in g["flavors"]
                  for r in f["resources"]):
            assert 0 <= r.get("lendingLimit", 0) <= r["nominalQuota"]


def objects(files: dict[str, str], name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(files[name]) if d is not None]


@needs_crds
def test_every_object_validates_against_its_crd_in_the_sample(sample_plan):
    plan, org = sample_plan
    files = export_kueue(plan, org, periods=3)
    assert len(files) == 4 and "index.yaml" in files
    seen = set()
    for name in files:
        if name == "index.yaml":
            continue
        for obj in objects(files, name):
            assert obj["apiVersion"] == "kueue.x-k8s.io/v1beta2"
            validate(obj)
            seen.add(obj["kind"])
            assert len(obj["metadata"]["name"]) <= 63
    assert seen == set(CRDS)


@needs_crds
def test_hand_plan_quotas_equal_the_plan():
    files = export_kueue(PLAN, ORG, periods=2)
    first = {(o["kind"], o["metadata"]["name"]): o
             for o in objects(files, file_name("2026-11-16T00:00:00Z"))}
    for obj in first.values():
        validate(obj)
    # Cohorts: the area and both teams, the tree by parentName, weights from the org
    assert first[("Cohort", "area")]["spec"] == {"parentName": "gpu-planner-pool",
                                                 "fairSharing": {"weight": "3"}}
    # the pool owns what no project holds: c1 32 - 10 - 16 = 6; c2 16 - 8 (r1) - 8 = 0
    assert first[("Cohort", "gpu-planner-pool")]["spec"] == {"resourceGroups": [
        {"coveredResources": ["nvidia.com/gpu"],
         "flavors": [{"name": "c1", "resources": [{"name": "nvidia.com/gpu",
                                                   "nominalQuota": 6}]}]}]}
    assert first[("Cohort", "team-a")]["spec"]["parentName"] == "area"
    assert first[("Cohort", "team-a")]["spec"]["fairSharing"]["weight"] == "2"
    # p1: 10.5 guaranteed GPUs on c1 -> 10 nominal; 10.5 + 4.75 = 15.25 -> borrow 15 - 10 = 5;
    # on c2 its reservation r1 (1 node x 8 GPUs) runs in period 1: nominal 8, all of it reserved
    p1 = first[("ClusterQueue", "p1")]["spec"]
    assert p1["cohortName"] == "team-a"
    (group,) = p1["resourceGroups"]
    assert group["coveredResources"] == ["nvidia.com/gpu"]
    quota = {f["name"]: f["resources"][0] for f in group["flavors"]}
    assert quota["c1"] == {"name": "nvidia.com/gpu", "nominalQuota": 10, "borrowingLimit": 5}
    assert quota["c2"] == {"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": 0,
                           "lendingLimit": 0}
    assert p1["preemption"]["reclaimWithinCohort"] == "Any"
    assert p1["preemption"]["borrowWithinCohort"] == {"policy": "Never"}
    # the odd id "=P 3" is a valid DNS label once sanitized, its id kept in an annotation
    odd = safe_name("=P 3")
    cq = first[("ClusterQueue", odd)]
    assert cq["metadata"]["annotations"]["gpu-planner.io/id"] == "=P 3"
    lq = first[("LocalQueue", odd)]
    assert lq["metadata"]["namespace"] == odd and lq["spec"]["clusterQueue"] == odd
    # period 2: r1 has ended, p1 keeps only its elastic grant
    second = {(o["kind"], o["metadata"]["name"]): o
              for o in objects(files, file_name("2026-11-17T00:00:00Z"))}
    flavors = second[("ClusterQueue", "p1")]["spec"]["resourceGroups"][0]["flavors"]
    assert [f["name"] for f in flavors] == ["c1"]
    assert flavors[0]["resources"][0]["nominalQuota"] == math.floor(20.0)
    assert second[("ClusterQueue", "p1")]["metadata"]["annotations"][
        "gpu-planner.io/valid-from"] == "2026-11-17T00:00:00Z"


def test_output_is_deterministic_and_indexed():
    a = export_kueue(PLAN, ORG, periods=2)
    b = export_kueue(json.loads(json.dumps(PLAN)), ORG.iloc[::-1].reset_index(drop=True), 2)
    assert a == b
    index = yaml.safe_load(a["index.yaml"])
    assert [p["valid_from"] for p in index["periods"]] == ["2026-11-16T00:00:00Z",
                                                          "2026-11-17T00:00:00Z"]


def test_safe_names_are_dns_labels_and_distinct():
    import re

    ids = ["Team_A", "team-a", "=SUM(A1)", "007", "-x-", "a" * 80, "ÄÖ"]
    names = [safe_name(i) for i in ids]
    assert len(set(names)) == len(ids)
    for n in names:
        assert re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", n) and len(n) <= 63
    assert safe_name("007") == "007" and safe_name("team-a") == "team-a"


@needs_crds
def test_a_top_level_project_sits_under_the_pool():
    import pandas as pd

    org = pd.concat([ORG, pd.DataFrame({"id": ["solo"], "parent": [""], "weight": [1.0]})])
    plan = json.loads(json.dumps(PLAN))
    plan["allocations"].append({"project": "solo", "cluster": "c1",
                                "period_start": "2026-11-16T00:00:00Z", "gpu_hours": 48.0,
                                "kind": "opportunistic", "gpus": 2.0})
    docs = objects(export_kueue(plan, org), file_name("2026-11-16T00:00:00Z"))
    (solo,) = [d for d in docs if d["kind"] == "ClusterQueue" and d["metadata"]["name"] == "solo"]
    validate(solo)
    assert solo["spec"]["cohortName"] == "gpu-planner-pool"
    assert solo["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "nvidia.com/gpu", "nominalQuota": 0, "borrowingLimit": 2}]


def test_sample_quotas_match_the_plan_and_fit_each_cluster(sample_plan):
    import pandas as pd

    plan, org = sample_plan
    start, end = plan["periods"][0]["start"], plan["periods"][0]["end"]
    docs = objects(export_kueue(plan, org), file_name(start))
    got = {}
    for d in docs:
        if d["kind"] == "ClusterQueue":
            for g in d["spec"]["resourceGroups"]:
                for f in g["flavors"]:
                    got[(d["metadata"]["annotations"]["gpu-planner.io/id"], f["name"])] = \
                        f["resources"][0]
    # expected, recomputed with pandas from the plan: floor of the period's GPUs
    alloc = pd.DataFrame(plan["allocations"])
    alloc = alloc[alloc["period_start"] == start]
    wide = alloc.pivot_table(index=["project", "cluster"], columns="kind", values="gpus",
                             aggfunc="sum", fill_value=0.0)
    res = pd.DataFrame(plan["reservations"])
    res = res[(res["start"] < end) & (res["end"] > start)]
    gpn = {c["cluster"]: c["gpus_per_node"] for c in plan["clusters"]}
    reserved = {(r.project, r.cluster): 0 for r in res.itertuples()}
    for r in res.itertuples():
        reserved[(r.project, r.cluster)] += r.nodes * gpn[r.cluster]
    assert len(res) > 0 and (wide.get("opportunistic", 0) > 0).any()
    keys = set(wide.index) | set(reserved)
    assert set(got) == keys
    for key in keys:
        g = wide["guaranteed"].get(key, 0.0) if "guaranteed" in wide else 0.0
        o = wide["opportunistic"].get(key, 0.0) if "opportunistic" in wide else 0.0
        q = got[key]
        assert q["nominalQuota"] == math.floor(g + 1e-6) + reserved.get(key, 0)
        assert q["borrowingLimit"] == math.floor(g + o + 1e-6) - math.floor(g + 1e-6)
        assert q.get("lendingLimit") == (q["nominalQuota"] - reserved[key]
                                         if key in reserved else None)
    # rule 1 carries over: per flavor, quota + borrowing never exceeds the cluster, and the
    # pool holds the rest of it
    (pool,) = [d for d in docs if d["metadata"]["name"] == "gpu-planner-pool"]
    free = {f["name"]: f["resources"][0]["nominalQuota"]
            for g in pool["spec"].get("resourceGroups", []) for f in g["flavors"]}
    for c in plan["clusters"]:
        mine = [q for (_, k), q in got.items() if k == c["cluster"]]
        capacity = c["nodes"] * c["gpus_per_node"]
        assert sum(q["nominalQuota"] + q["borrowingLimit"] for q in mine) <= capacity
        assert sum(q["nominalQuota"] for q in mine) + free.get(c["cluster"], 0) == capacity
