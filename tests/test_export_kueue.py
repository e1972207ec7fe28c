"""Kueue manifests: every object valid against the real v0.19.2 CRDs, quotas = the plan's."""

from __future__ import annotations

import copy
import functools
import json
import math
import os
import re
from pathlib import Path

import jsonschema
import pandas as pd
import pytest
import yaml

from planner.contract import ahead_of_pace, widens
from planner.exporters.common import OrgTree, safe_name
from planner.exporters.kueue import (
    MAX_FLAVORS,
    POOL,
    SHIPPED,
    KueueExport,
    export_kueue,
    file_name,
    keep_reserve,
    period_objects,
    project_quotas,
    widen_late,
    widen_to_pending,
)
from tests.export_fixtures import ORG, PLAN, wide_plan

KUEUE_DIR = Path(os.environ.get(
    "GPU_PLANNER_KUEUE_CRDS",
    Path(__file__).resolve().parents[2] / "shared" / "schemas" / "kueue"))
CRDS = {"ClusterQueue": "clusterqueues", "Cohort": "cohorts",
        "ResourceFlavor": "resourceflavors", "LocalQueue": "localqueues",
        "WorkloadPriorityClass": "workloadpriorityclasses"}

DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")

needs_crds = pytest.mark.skipif(
    not (KUEUE_DIR / "kueue.x-k8s.io_clusterqueues.yaml").exists(),
    reason=f"Kueue CRDs not found in {KUEUE_DIR} (set GPU_PLANNER_KUEUE_CRDS)")


@functools.cache
def schema(kind: str) -> dict:
    crd = yaml.safe_load((KUEUE_DIR / f"kueue.x-k8s.io_{CRDS[kind]}.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta2"]
    return version["schema"]["openAPIV3Schema"]


def validate_topology(obj: dict) -> None:
    """Topology: its CRD is not among ../shared's, so the rules of Kueue's API docs by hand.

    ``levels``: 1-16 items, each a unique ``nodeLabel``, ``kubernetes.io/hostname`` only as
    the last (lowest) level; cluster-scoped; a DNS-1123 subdomain name.
    """
    assert set(obj) == {"apiVersion", "kind", "metadata", "spec"}
    assert "namespace" not in obj["metadata"]
    assert DNS_SUBDOMAIN.fullmatch(obj["metadata"]["name"])
    levels = [level["nodeLabel"] for level in obj["spec"]["levels"]]
    assert 1 <= len(levels) <= 16 and len(set(levels)) == len(levels)
    assert "kubernetes.io/hostname" not in levels[:-1]
    assert all(set(level) == {"nodeLabel"} for level in obj["spec"]["levels"])


def validate(obj: dict) -> None:
    """The CRD's openAPIV3Schema, and by hand its x-kubernetes-validations (CEL) rules."""
    if obj["kind"] == "Topology":
        validate_topology(obj)
        return
    jsonschema.Draft7Validator(schema(obj["kind"])).validate(obj)
    if obj["kind"] == "ResourceFlavor" and "topologyName" in obj["spec"]:
        # "at least one nodeLabel is required when topology is set"
        assert len(obj["spec"].get("nodeLabels", {})) >= 1
    if obj["kind"] == "WorkloadPriorityClass":
        assert "spec" not in obj and len(obj["description"]) <= 2048
        return
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
    assert seen == set(CRDS) | {"Topology"}


@needs_crds
def test_hand_plan_quotas_equal_the_plan():
    # the grant-capped export (fill=False): borrowingLimit = the opportunistic headroom
    files = export_kueue(PLAN, ORG, periods=2, fill=False)
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
    # the window is annotated on the pool Cohort alone; every other object carries its id
    # only, so it keeps its bytes from one day's set to the next unless its content changes
    assert second[("Cohort", "gpu-planner-pool")]["metadata"]["annotations"] == {
        "gpu-planner.io/id": "gpu-planner-pool",
        "gpu-planner.io/valid-from": "2026-11-17T00:00:00Z",
        "gpu-planner.io/valid-until": PLAN["periods"][1]["end"],
        "gpu-planner.io/plan-as-of": PLAN["as_of"],
        "gpu-planner.io/input-digest": PLAN.get("input_digest", "")}
    assert second[("ClusterQueue", "p1")]["metadata"]["annotations"] == {
        "gpu-planner.io/id": "p1"}


@needs_crds
def test_fill_export_gives_every_queue_every_flavor_without_borrowing_limit():
    # the default export (fill): the same nominal quotas and pool, no borrowingLimit (any
    # idle GPU of the cohort tree may be borrowed, reclaimed at once by its lender), and a
    # flavor with nominal 0 on each cluster where the plan grants a project nothing
    files = export_kueue(PLAN, ORG, periods=2)
    capped = export_kueue(PLAN, ORG, periods=2, fill=False)
    for period in PLAN["periods"]:
        docs = objects(files, file_name(period["start"]))
        for obj in docs:
            validate(obj)
        got, was = queue_quotas(docs), queue_quotas(objects(capped, file_name(period["start"])))
        assert pool_free(docs) == pool_free(objects(capped, file_name(period["start"])))
        leaves = OrgTree.from_frame(ORG).leaves
        assert set(got) == {(p, safe_name(c["cluster"])) for p in leaves
                            for c in PLAN["clusters"]}
        for key, res in got.items():
            assert "borrowingLimit" not in res
            old = was.get(key, {"name": "nvidia.com/gpu", "nominalQuota": 0})
            assert res == {k: v for k, v in old.items() if k != "borrowingLimit"}, key
    first = queue_quotas(objects(files, file_name("2026-11-16T00:00:00Z")))
    assert first[("p1", "c1")] == {"name": "nvidia.com/gpu", "nominalQuota": 10}
    assert first[("p1", "c2")] == {"name": "nvidia.com/gpu", "nominalQuota": 8,
                                   "lendingLimit": 0}  # r1's node: never lent
    assert first[("p2", "c2")] == {"name": "nvidia.com/gpu", "nominalQuota": 0}
    # a project restricted to some clusters (budgets.csv) gets flavors there alone
    only = export_kueue(PLAN, ORG, allowed={"p2": ("c1",), "p1": ("c1",)})
    got = queue_quotas(objects(only, file_name("2026-11-16T00:00:00Z")))
    assert ("p2", "c2") not in got and ("p2", "c1") in got
    # p1's reservation on c2 is the plan's: kept, whatever the restriction says
    assert got[("p1", "c2")]["nominalQuota"] == 8


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
    org = pd.concat([ORG, pd.DataFrame({"id": ["solo"], "parent": [""], "weight": [1.0]})])
    plan = json.loads(json.dumps(PLAN))
    plan["allocations"].append({"project": "solo", "cluster": "c1",
                                "period_start": "2026-11-16T00:00:00Z", "gpu_hours": 48.0,
                                "kind": "opportunistic", "gpus": 2.0})
    for fill, flavors in ((False, [("c1", [{"name": "nvidia.com/gpu", "nominalQuota": 0,
                                            "borrowingLimit": 2}])]),
                          (True, [(c, [{"name": "nvidia.com/gpu", "nominalQuota": 0}])
                                  for c in ("c1", "c2")])):
        docs = objects(export_kueue(plan, org, fill=fill), file_name("2026-11-16T00:00:00Z"))
        (solo,) = [d for d in docs
                   if d["kind"] == "ClusterQueue" and d["metadata"]["name"] == "solo"]
        validate(solo)
        assert solo["spec"]["cohortName"] == "gpu-planner-pool"
        assert [(f["name"], f["resources"]) for f in
                solo["spec"]["resourceGroups"][0]["flavors"]] == flavors


def queue_quotas(docs: list[dict]) -> dict[tuple[str, str], dict]:
    """(project id, flavor) -> the ClusterQueue's nvidia.com/gpu resource entry."""
    got = {}
    for d in docs:
        if d["kind"] == "ClusterQueue":
            for g in d["spec"]["resourceGroups"]:
                for f in g["flavors"]:
                    got[(d["metadata"]["annotations"]["gpu-planner.io/id"], f["name"])] = \
                        f["resources"][0]
    return got


def pool_free(docs: list[dict]) -> dict[str, int]:
    """Flavor -> the pool Cohort's nominal quota."""
    (pool,) = [d for d in docs if d["metadata"]["name"] == "gpu-planner-pool"]
    return {f["name"]: f["resources"][0]["nominalQuota"]
            for g in pool["spec"].get("resourceGroups", []) for f in g["flavors"]}


def assert_quotas_are_the_plans(plan: dict, start: str, end: str,
                                got: dict[tuple[str, str], dict], free: dict[str, int],
                                fill: list[str] | None = None) -> None:
    """Recomputed from the plan with pandas: floor of the period's GPUs, reserved nodes.

    ``got``: (project id, flavor) -> its queue's resource entry, from every queue of the
    period; ``free``: flavor -> the pool's nominal quota. ``fill``: the export's fill,
    for these projects (every one on every cluster, no ``borrowingLimit``). A project
    ahead of its budget pace (rule 5) holds only its reserved GPUs as nominal quota and
    borrows its guaranteed ones.
    """
    ahead = ahead_of_pace(plan)
    alloc = pd.DataFrame(plan["allocations"])
    alloc = alloc[alloc["period_start"] == start].assign(
        flavor=lambda f: f["cluster"].map(safe_name))
    grants = alloc.pivot_table(index=["project", "flavor"], columns="kind", values="gpus",
                               aggfunc="sum", fill_value=0.0)
    res = pd.DataFrame(plan["reservations"])
    res = res[(res["start"] < end) & (res["end"] > start)]
    gpn = {c["cluster"]: c["gpus_per_node"] for c in plan["clusters"]}
    reserved: dict[tuple[str, str], int] = {}
    for r in res.itertuples():
        key = (r.project, safe_name(r.cluster))
        reserved[key] = reserved.get(key, 0) + r.nodes * gpn[r.cluster]
    assert len(res) > 0 and (grants.get("opportunistic", 0) > 0).any()
    keys = set(grants.index) | set(reserved)
    if fill is not None:
        keys |= {(p, safe_name(c["cluster"])) for p in fill for c in plan["clusters"]}
    assert set(got) == keys
    for key in keys:
        g = grants["guaranteed"].get(key, 0.0) if "guaranteed" in grants else 0.0
        o = grants["opportunistic"].get(key, 0.0) if "opportunistic" in grants else 0.0
        q = got[key]
        kept = 0 if key[0] in ahead else math.floor(g + 1e-6)
        assert q["nominalQuota"] == kept + reserved.get(key, 0)
        if fill is not None:
            assert "borrowingLimit" not in q
        else:
            assert q["borrowingLimit"] == math.floor(g + o + 1e-6) - kept
        assert q.get("lendingLimit") == (q["nominalQuota"] - reserved[key]
                                         if key in reserved else None)
    # rule 1 carries over: per flavor, quota + borrowing never exceeds the cluster, and the
    # pool holds the rest of it
    for c in plan["clusters"]:
        flavor = safe_name(c["cluster"])
        mine = [q for (_, k), q in got.items() if k == flavor]
        capacity = c["nodes"] * c["gpus_per_node"]
        assert sum(q["nominalQuota"] + q.get("borrowingLimit", 0) for q in mine) <= capacity
        assert sum(q["nominalQuota"] for q in mine) + free.get(flavor, 0) == capacity


def test_sample_quotas_match_the_plan_and_fit_each_cluster(sample_plan):
    plan, org = sample_plan
    start, end = plan["periods"][0]["start"], plan["periods"][0]["end"]
    docs = objects(export_kueue(plan, org, fill=False), file_name(start))
    assert_quotas_are_the_plans(plan, start, end, queue_quotas(docs), pool_free(docs))
    docs = objects(export_kueue(plan, org), file_name(start))
    assert_quotas_are_the_plans(plan, start, end, queue_quotas(docs), pool_free(docs),
                                fill=list(OrgTree.from_frame(org).leaves))


def test_rule_5_projects_ahead_of_pace_lend_their_guaranteed_quota(sample_plan):
    # The executor contract's rule 5 in Kueue's terms: a project ahead of its budget pace
    # keeps only its reserved GPUs as nominal quota; its guaranteed GPUs go to the pool,
    # so its work there borrows and lenders reclaim it. takes_back=False: the export
    # before the rule, every project's guaranteed GPUs its nominal quota.
    plan, org = sample_plan
    start = plan["periods"][0]["start"]
    ahead = ahead_of_pace(plan)
    docs_now = objects(export_kueue(plan, org), file_name(start))
    docs_before = objects(export_kueue(plan, org, takes_back=False), file_name(start))
    now, before = queue_quotas(docs_now), queue_quotas(docs_before)
    pool_now, pool_before = pool_free(docs_now), pool_free(docs_before)
    lent: dict[str, int] = {}
    for (project, flavor), q in before.items():
        reserved = q["nominalQuota"] - q.get("lendingLimit", q["nominalQuota"])
        if project in ahead:
            assert now[(project, flavor)]["nominalQuota"] == reserved
            lent[flavor] = lent.get(flavor, 0) + q["nominalQuota"] - reserved
        else:
            assert now[(project, flavor)] == q
    assert sum(lent.values()) > 0, "the sample's plan has guaranteed GPUs of projects ahead"
    for flavor in set(pool_now) | set(pool_before):
        assert pool_now.get(flavor, 0) == pool_before.get(flavor, 0) + lent.get(flavor, 0)


def _by_cluster(files: dict[str, str], start: str) -> dict[str, list[dict]]:
    """Cluster (from the pool's annotation) -> its set for the period starting at ``start``."""
    out = {}
    for name in files:
        if name.startswith(file_name(start)[:-len(".yaml")] + "-"):
            docs = objects(files, name)
            (pool,) = [d for d in docs if d["kind"] == "Cohort" and "parentName" not in d["spec"]]
            cluster = pool["metadata"]["annotations"]["gpu-planner.io/cluster"]
            assert all("gpu-planner.io/cluster" not in d["metadata"]["annotations"]
                       for d in docs if d is not pool)
            assert name == file_name(start, cluster)
            out[cluster] = docs
    return out


@needs_crds
def test_more_than_64_clusters_split_per_cluster_into_valid_manifests():
    plan, org = wide_plan(70)
    start, end = plan["periods"][0]["start"], plan["periods"][0]["end"]
    # as one set, the pool Cohort and the queue of `wide` (work on every cluster) would hold
    # 70 flavors in their resource group: the CRDs refuse both
    single = period_objects(plan, OrgTree.from_frame(org), start, end, fill=False)
    refused = []
    for obj in single:
        try:
            validate(obj)
        except jsonschema.ValidationError as error:
            assert error.validator == "maxItems" and error.validator_value == MAX_FLAVORS
            assert list(error.absolute_path) == ["spec", "resourceGroups", 0, "flavors"]
            refused.append((obj["kind"], obj["metadata"]["name"]))
    assert refused == [("Cohort", "gpu-planner-pool"), ("ClusterQueue", "wide")]
    with pytest.raises(ValueError, match="would hold 70 flavors"):
        export_kueue(plan, org, per_cluster=False, fill=False)

    # so the export splits by itself: a manifest set per cluster, each object valid
    files = export_kueue(plan, org, periods=2, fill=False)
    assert files == export_kueue(plan, org, periods=2, per_cluster=True, fill=False)
    shuffled = json.loads(json.dumps(plan))  # same plan, lists in another order: same bytes
    for key in ("clusters", "allocations"):
        shuffled[key].reverse()
    assert export_kueue(shuffled, org.iloc[::-1].reset_index(drop=True), periods=2,
                        fill=False) == files
    assert len(files) == 2 * 70 + 1
    sets = _by_cluster(files, start)
    assert sorted(sets) == [c["cluster"] for c in plan["clusters"]]
    for docs in sets.values():
        for obj in docs:
            validate(obj)
        (pool,) = [d for d in docs if d["kind"] == "Cohort" and "parentName" not in d["spec"]]
        assert pool["metadata"]["annotations"]["gpu-planner.io/valid-from"] == start
    # the index lists every file with its cluster; version 2, so that a version-1 reader
    # (one Kueue, every file applied to it) refuses it rather than mixing the clusters' sets
    index = yaml.safe_load(files["index.yaml"])
    assert index["format"] == "gpu-planner kueue index, version 2"
    assert index["per_cluster"] is True
    assert [(e["file"], e["cluster"], e["valid_from"]) for e in index["periods"][:2]] == [
        (file_name(start, "w00"), "w00", start), (file_name(start, "w01"), "w01", start)]
    assert {e["file"] for e in index["periods"]} == set(files) - {"index.yaml"}
    assert all(e["objects"] == len(objects(files, e["file"])) for e in index["periods"])

    # the quotas, over all the sets, are the plan's (recomputed from it with pandas)
    got, free = {}, {}
    for docs in sets.values():
        mine = queue_quotas(docs)
        assert not set(mine) & set(got)
        got |= mine
        free |= pool_free(docs)
    assert_quotas_are_the_plans(plan, start, end, got, free)

    # each set holds its cluster's flavor, the queues of the projects with something on it,
    # and the org tree above them: w00 has wide and narrow (team-a), w01 wide and =Odd 1's
    # reservation (team-a and team-b), w03 wide alone; idle has nothing anywhere
    def names(docs: list[dict], kind: str) -> list[str]:
        return [d["metadata"]["annotations"]["gpu-planner.io/id"] for d in docs
                if d["kind"] == kind]

    assert names(sets["w00"], "ResourceFlavor") == ["w00"]
    assert names(sets["w00"], "ClusterQueue") == names(sets["w00"], "LocalQueue") == \
        ["narrow", "wide"]
    assert names(sets["w00"], "Cohort") == ["gpu-planner-pool", "area", "team-a"]
    assert names(sets["w01"], "ClusterQueue") == ["=Odd 1", "wide"]
    assert names(sets["w01"], "Cohort") == ["gpu-planner-pool", "area", "team-a", "team-b"]
    assert names(sets["w03"], "ClusterQueue") == ["wide"]
    assert all("idle" not in names(docs, "ClusterQueue") for docs in sets.values())
    # w01: =Odd 1 reserves one node (8 GPUs); wide holds floor(3.5) = 3 and may borrow
    # floor(3.5 + 1.75) - 3 = 2; the pool keeps 16 - 8 - 3 = 5
    w01 = queue_quotas(sets["w01"])
    assert w01[("=Odd 1", "w01")] == {"name": "nvidia.com/gpu", "nominalQuota": 8,
                                      "borrowingLimit": 0, "lendingLimit": 0}
    assert w01[("wide", "w01")] == {"name": "nvidia.com/gpu", "nominalQuota": 3,
                                    "borrowingLimit": 2}
    assert pool_free(sets["w01"]) == {"w01": 5}
    # the cohorts keep the org's weights and parents, pruned or not
    cohorts = {d["metadata"]["name"]: d["spec"] for d in sets["w01"] if d["kind"] == "Cohort"}
    assert cohorts["team-b"] == {"parentName": "area", "fairSharing": {"weight": "1"}}
    assert cohorts["area"]["parentName"] == "gpu-planner-pool"

    # with fill (the default) every set holds every project's queue (nominal 0 where the
    # plan grants nothing), each object valid; the nominal quotas over the sets are the plan's
    filled = export_kueue(plan, org)
    leaves = list(OrgTree.from_frame(org).leaves)
    got, free = {}, {}
    for docs in _by_cluster(filled, start).values():
        for obj in docs:
            validate(obj)
        assert sorted(names(docs, "ClusterQueue")) == sorted(leaves)
        got |= queue_quotas(docs)
        free |= pool_free(docs)
    assert_quotas_are_the_plans(plan, start, end, got, free, fill=leaves)


@needs_crds
@pytest.mark.parametrize("fill", [True, False])
def test_per_cluster_sets_hold_the_single_sets_numbers(fill):
    # the hand plan, forced per cluster: for both periods, every queue's flavor and the
    # pool's quota on each cluster are the single set's, and nothing else differs in kind
    single = export_kueue(PLAN, ORG, periods=2, fill=fill)
    split = export_kueue(PLAN, ORG, periods=2, per_cluster=True, fill=fill)
    assert sorted(split) == ["index.yaml"] + sorted(
        file_name(p["start"], c) for p in PLAN["periods"] for c in ("c1", "c2"))
    assert yaml.safe_load(single["index.yaml"])["format"] == \
        "gpu-planner kueue index, version 1"
    for period in PLAN["periods"]:
        whole = objects(single, file_name(period["start"]))
        sets = _by_cluster(split, period["start"])
        assert sorted(sets) == ["c1", "c2"]
        got, free = {}, {}
        for docs in sets.values():
            for obj in docs:
                validate(obj)
            got |= queue_quotas(docs)
            free |= pool_free(docs)
        assert got == queue_quotas(whole)
        assert free == pool_free(whole)
        # queues and their settings, flavors aside, are the single set's
        queues = {d["metadata"]["name"]: d for d in whole if d["kind"] == "ClusterQueue"}
        for docs in sets.values():
            for d in (d for d in docs if d["kind"] == "ClusterQueue"):
                mine, theirs = dict(d["spec"]), dict(queues[d["metadata"]["name"]]["spec"])
                mine.pop("resourceGroups")
                theirs.pop("resourceGroups")
                assert mine == theirs
    # period 1 on c2: r1 (p1) and =P 3's 8 GPUs fill it, so the pool holds nothing there
    # (with fill every project has a queue there too, nominal 0)
    c2 = _by_cluster(split, PLAN["periods"][0]["start"])["c2"]
    holding = sorted(k for k, q in queue_quotas(c2).items() if q["nominalQuota"])
    assert pool_free(c2) == {} and holding == [("=P 3", "c2"), ("p1", "c2")]
    assert len(queue_quotas(c2)) == (len(OrgTree.from_frame(ORG).leaves) if fill else 2)


# --- node selectors and object labels ------------------------------------------------------


@needs_crds
def test_flavors_select_nodes_by_node_labels_or_by_the_default():
    plan = json.loads(json.dumps(PLAN))
    plan["clusters"][0]["node_labels"] = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                                          "topology.kubernetes.io/zone": "b"}
    plan["clusters"][1]["gpu_type"] = "NVIDIA-A100-SXM4-80GB"
    docs = objects(export_kueue(plan, ORG), file_name(plan["periods"][0]["start"]))
    flavors = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ResourceFlavor"}
    for flavor in flavors.values():
        validate(flavor)
    # c1: the site's labels as they are; c2: none given, so the cluster label, and its GPU
    # type since it is written as GPU feature discovery labels nodes
    assert flavors["c1"]["spec"]["nodeLabels"] == plan["clusters"][0]["node_labels"]
    assert flavors["c2"]["spec"]["nodeLabels"] == {
        "gpu-planner.io/cluster": "c2", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    # the hand plan's bare types ("H100", "A100") match no real node: the cluster label only
    docs = objects(export_kueue(PLAN, ORG), file_name(PLAN["periods"][0]["start"]))
    assert [d["spec"]["nodeLabels"] for d in docs if d["kind"] == "ResourceFlavor"] == [
        {"gpu-planner.io/cluster": "c1"}, {"gpu-planner.io/cluster": "c2"}]


@needs_crds
def test_every_object_carries_the_labels_a_prune_selects_by():
    from planner.exporters.kueue import prune_selector

    plan = json.loads(json.dumps(PLAN))
    plan["scenario"] = "Hand plan: Q4/2026\n"  # not a label value: its safe form
    selector = prune_selector(plan)
    key, value = selector.split(",")[1].split("=")
    assert selector.startswith("app.kubernetes.io/managed-by=gpu-planner,")
    assert key == "gpu-planner.io/scenario" and value.startswith("hand-plan-q4-2026-")
    for per_cluster in (False, True):
        files = export_kueue(plan, ORG, periods=2, per_cluster=per_cluster)
        for name in set(files) - {"index.yaml"}:
            for obj in objects(files, name):
                validate(obj)
                assert obj["metadata"]["labels"] == {"app.kubernetes.io/managed-by":
                                                     "gpu-planner",
                                                     "gpu-planner.io/scenario": value}
    assert prune_selector(PLAN) == \
        "app.kubernetes.io/managed-by=gpu-planner,gpu-planner.io/scenario=hand"
    # the index says it too, for whoever applies the files (kubectl apply --prune -l ...)
    index = yaml.safe_load(export_kueue(plan, ORG)["index.yaml"])
    assert index["prune_selector"] == selector
    # and the kinds kubectl must be told to prune (custom resources are not by default):
    # exactly those the export writes, as group/version/Kind
    from planner.exporters.kueue import prune_allowlist

    written = {f"{d['apiVersion']}/{d['kind']}" for name, data in export_kueue(plan, ORG).items()
               if name != "index.yaml" for d in yaml.safe_load_all(data) if d}
    assert set(prune_allowlist()) == written == set(index["prune_allowlist"])


@pytest.mark.parametrize(("labels", "needle"), [
    ([{"zone": "a"}, {"zone": "a"}], "equal to or overlapping"),  # the same selector
    ([{"zone": "a"}, {"zone": "a", "rack": "1"}], "equal to or overlapping"),  # one inside
    ([{"gpu-planner.io/cluster": "c2"}, None], "equal to or overlapping"),  # c2's default
    ([{"zone a": "x"}, None], "label key name 'zone a'"),
])
def test_clusters_that_would_share_nodes_are_refused(labels, needle):
    from planner.exporters.validate import export_problems

    plan = json.loads(json.dumps(PLAN))
    for cluster, given in zip(plan["clusters"], labels, strict=True):
        if given is not None:
            cluster["node_labels"] = given
    problems = export_problems(plan, "plan.json", ORG, "kueue")
    assert len(problems) == 1 and needle in problems[0].message
    assert problems[0].column in ("clusters/0/node_labels", "clusters/1/node_labels")
    assert export_problems(PLAN, "plan.json", ORG, "kueue") == []


@needs_crds
def test_pace_weights_are_what_each_budget_still_owes_per_hour():
    # as_of 2026-11-16 to quarter_end 2027-01-01: 46 days, 1,104 h left. p1: (2000 − 100)
    # ÷ 1104 = 1.721014 NGH/h; p2: 1500 ÷ 1104 = 1.358696; =P 3: (500 − 50) ÷ 1104 =
    # 0.407609 (the default). The Cohorts keep the org's weights; "org" keeps the
    # queues' too (p1 2, p2 1, =P 3 0.5).
    def weights(files: dict[str, str]) -> dict[str, str]:
        docs = objects(files, file_name("2026-11-16T00:00:00Z"))
        for obj in docs:
            validate(obj)
        return {d["metadata"]["annotations"]["gpu-planner.io/id"]:
                d["spec"]["fairSharing"]["weight"] for d in docs
                if d["kind"] in ("ClusterQueue", "Cohort") and "fairSharing" in d["spec"]}

    paced = weights(export_kueue(PLAN, ORG, weights="pace"))
    assert paced == {"area": "3", "team-a": "2", "team-b": "1", "p1": "1.721014",
                     "p2": "1.358696", "=P 3": "0.407609"}
    assert weights(export_kueue(PLAN, ORG, weights="org")) == {
        "area": "3", "team-a": "2", "team-b": "1", "p1": "2", "p2": "1", "=P 3": "0.5"}
    assert weights(export_kueue(PLAN, ORG)) == paced  # the default
    # a spent budget: weight 0 (Kueue: an infinite share, it borrows only what nobody
    # else wants)
    spent = json.loads(json.dumps(PLAN))
    spent["budgets"][2]["used"] = 600.0
    assert weights(export_kueue(spent, ORG, weights="pace"))["=P 3"] == "0"
    with pytest.raises(ValueError, match="weights must be one of"):
        export_kueue(PLAN, ORG, weights="budget")


@needs_crds
@pytest.mark.parametrize("per_cluster", [False, True])
def test_every_set_carries_the_priority_classes_first(per_cluster):
    # Budget work above unallocated work: the contract's "guaranteed work takes GPUs back
    # from unallocated work first" in Kueue's terms. The classes come first in each set
    # (a Job naming a class that does not exist yet is not admitted), in every
    # per-cluster set too (each is applied to its own Kueue), and the queues let a
    # higher priority preempt within them.
    from planner.exporters.kueue import PRIORITY_CLASSES, PRIORITY_LABEL, priority_class

    assert PRIORITY_LABEL == "kueue.x-k8s.io/priority-class"
    assert priority_class(True) == "gpu-planner-budget"
    assert priority_class(True, whole_nodes=True) == "gpu-planner-budget-gang"
    assert priority_class(False) == priority_class(False, whole_nodes=True) \
        == "gpu-planner-unallocated"
    assert (PRIORITY_CLASSES[priority_class(True, True)] > PRIORITY_CLASSES[priority_class(True)]
            > PRIORITY_CLASSES[priority_class(False)] == 0)
    files = export_kueue(PLAN, ORG, periods=2, per_cluster=per_cluster)
    sets = sorted(set(files) - {"index.yaml"})
    assert len(sets) == (2 * len(PLAN["clusters"]) if per_cluster else 2)
    for name in sets:
        docs = objects(files, name)[1:]  # after the Topology (the test below)
        head = docs[:3]
        assert [d["kind"] for d in head] == ["WorkloadPriorityClass"] * 3
        assert {d["metadata"]["name"]: d["value"] for d in head} == PRIORITY_CLASSES
        assert all(d["kind"] != "WorkloadPriorityClass" for d in docs[3:])
        for d in head:
            validate(d)
        queues = [d for d in docs if d["kind"] == "ClusterQueue"]
        assert queues and all(q["spec"]["preemption"]["withinClusterQueue"] == "LowerPriority"
                              for q in queues)


@pytest.mark.parametrize("per_cluster", [False, True])
def test_every_set_turns_on_topology_aware_scheduling_first(per_cluster):
    # Kueue admits on quota alone unless a flavor names a Topology: a gang would then be
    # admitted on fragmented nodes and idle its quota while its pods pend. The export makes
    # every flavor topology-aware (one level, the node), so Kueue admits a workload only
    # where its pods fit, as planner-kueue replays it. The Topology comes first in each set
    # (each per-cluster set is applied to its own Kueue), and kubectl prunes it like the rest.
    from planner.exporters.kueue import TOPOLOGY, prune_allowlist

    files = export_kueue(PLAN, ORG, periods=2, per_cluster=per_cluster)
    for name in sorted(set(files) - {"index.yaml"}):
        docs = objects(files, name)
        assert docs[0] == {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
            "metadata": {"name": "gpu-planner-nodes", "labels": docs[1]["metadata"]["labels"],
                         "annotations": {"gpu-planner.io/id": "gpu-planner-nodes",
                                         **{k: v for k, v in
                                            docs[1]["metadata"]["annotations"].items()
                                            if k != "gpu-planner.io/id"}}},
            "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}}
        validate_topology(docs[0])
        assert sum(d["kind"] == "Topology" for d in docs) == 1
        flavors = [d for d in docs if d["kind"] == "ResourceFlavor"]
        assert len(flavors) == (1 if per_cluster else len(PLAN["clusters"]))
        assert all(f["spec"]["topologyName"] == TOPOLOGY and f["spec"]["nodeLabels"]
                   for f in flavors)
    assert prune_allowlist()[0] == "kueue.x-k8s.io/v1beta2/Topology"
    assert yaml.safe_load(files["index.yaml"])["prune_allowlist"] == list(prune_allowlist())


def test_topology_rules_refuse_what_kueue_refuses():
    # the hand-written Topology check is not vacuous: Kueue's documented rules, broken
    levels = [{"nodeLabel": "rack"}, {"nodeLabel": "kubernetes.io/hostname"}]
    good = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
            "metadata": {"name": "t"}, "spec": {"levels": levels}}
    validate_topology(good)
    for levels in ([], [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "rack"}],
                   [{"nodeLabel": "rack"}, {"nodeLabel": "rack"}],
                   [{"nodeLabel": f"l{i}"} for i in range(17)]):
        with pytest.raises(AssertionError):
            validate_topology(good | {"spec": {"levels": levels}})
    with pytest.raises(AssertionError):
        validate_topology(good | {"metadata": {"name": "T", "namespace": "x"}})


def _ahead(plan: dict, project: str) -> dict:
    """``plan`` with ``project`` ahead of its pace (used beyond half its budget at as_of)."""
    for b in plan["budgets"]:
        if b["project"] == project:
            b["used"] = b["budget"] * 0.75
    return plan


def test_rule_6_nominal_quota_widens_to_the_widest_pending_gang():
    # The hand plan at as_of 2026-11-16, half of the quarter gone; every project is behind
    # its pace with budget left. Owed per hour (budget - used) / 1,104 h left: p1 1.72,
    # p2 1.36, "=P 3" 0.41. Period 1: c1 (32 GPUs) p1 10 + p2 16 nominal, the pool 6;
    # c2 (16 GPUs) p1 8 (r1, reserved) + "=P 3" 8, the pool 0.
    pending = {("p1", "c1"): 16, ("p2", "c1"): 20, ("p2", "c2"): 8, ("=P 3", "c1"): 8,
               ("p1", "c2"): 8}
    files = export_kueue(PLAN, ORG, periods=2, pending=pending)
    docs = objects(files, file_name(PLAN["periods"][0]["start"]))
    got, free = queue_quotas(docs), pool_free(docs)
    # p1, the most owed, goes first: 16 - 10 = 6 GPUs, all the pool has on c1. p2 would
    # need 20 - 16 = 4 more and "=P 3" 8: the pool has none left (had p2 gone first,
    # p1's gang would not fit). On c2 the pool has nothing; p1's gang there fits its
    # reserved 8 already (nothing to widen; still lent to nobody)
    assert got[("p1", "c1")] == {"name": "nvidia.com/gpu", "nominalQuota": 16}
    assert got[("p2", "c1")]["nominalQuota"] == 16
    assert got[("=P 3", "c1")]["nominalQuota"] == 0
    assert got[("p2", "c2")]["nominalQuota"] == 0
    assert got[("p1", "c2")] == {"name": "nvidia.com/gpu", "nominalQuota": 8, "lendingLimit": 0}
    assert free.get("c1", 0) == 0 and free.get("c2", 0) == 0
    # only the first period widens: the second is applied after its own cycle reads the queue
    second = objects(files, file_name(PLAN["periods"][1]["start"]))
    plain = objects(export_kueue(PLAN, ORG, periods=2), file_name(PLAN["periods"][1]["start"]))
    assert second == plain
    # the same quotas from project_quotas, which also says what it took
    quotas = project_quotas(PLAN, PLAN["periods"][0]["start"], PLAN["periods"][0]["end"],
                            projects=list(OrgTree.from_frame(ORG).leaves))
    assert widen_to_pending(PLAN, quotas, pending) == [("p1", "c1", 16)]
    # with p1 ahead of its pace (rule 5: its 10 guaranteed GPUs go to the pool, 16 free)
    # it widens nothing; p2 (4 more) then "=P 3" (8) are widened, 4 GPUs left in the pool
    ahead = _ahead(copy.deepcopy(PLAN), "p1")
    got = queue_quotas(objects(export_kueue(ahead, ORG, pending=pending),
                               file_name(PLAN["periods"][0]["start"])))
    assert got[("p1", "c1")]["nominalQuota"] == 0
    assert got[("p2", "c1")]["nominalQuota"] == 20
    assert got[("=P 3", "c1")]["nominalQuota"] == 8
    # a spent budget widens nothing either
    spent = copy.deepcopy(PLAN)
    spent["budgets"][0]["used"] = spent["budgets"][0]["budget"]
    assert widens(spent) == frozenset({"p2", "=P 3"})
    assert widens({**PLAN, "budgets": []}) == frozenset()


def test_rule_7_the_reserve_is_cut_from_the_largest_unreserved_quota():
    # "big": 10 nodes of 8 (80 GPUs), nominal x 36, y 36, z 8 (all reserved): the pool
    # would hold 0; one node (at most one in ten: 10 // 10 = 1) is kept, cut from the
    # largest unreserved quota, x and y tied at 36, so by name: x 28. "small": 9 nodes,
    # 9 // 10 = 0: nothing kept. "two": 20 nodes (160 GPUs), w holds 156: one node asked
    # keeps 8, 4 of them unheld already, so 4 cut from w; two nodes asked (at most
    # 20 // 10 = 2) keep 16: 12 cut from w, while "big" still keeps one (10 // 10).
    plan = {"clusters": [{"cluster": "big", "nodes": 10, "gpus_per_node": 8},
                         {"cluster": "small", "nodes": 9, "gpus_per_node": 8},
                         {"cluster": "two", "nodes": 20, "gpus_per_node": 8}]}

    def cell(nominal, reserved=0):
        return {"nominal": nominal, "borrowing": None, "reserved": reserved}

    quotas = {"x": {"big": cell(36)}, "y": {"big": cell(36)}, "z": {"big": cell(8, 8)},
              "v": {"small": cell(72)}, "w": {"two": cell(156)}}
    assert keep_reserve(plan, copy.deepcopy(quotas), 1) == [("x", "big", 8), ("w", "two", 4)]
    taken = keep_reserve(plan, quotas, 2)
    assert taken == [("x", "big", 8), ("w", "two", 12)]
    assert quotas["x"]["big"]["nominal"] == 28 and quotas["z"]["big"]["nominal"] == 8
    assert quotas["v"]["small"]["nominal"] == 72 and quotas["w"]["two"]["nominal"] == 144


def test_rule_7_a_late_gang_takes_its_gpus_from_the_pool_in_the_applied_set():
    # The hand plan's first period: on c1 p1 holds 10, p2 16, "=P 3" 0 and the pool 6.
    # widen_late serves gangs in the order given: p1's (it holds nominal quota: not late),
    # "=P 3"'s 8 (the pool has 6: not served), "=P 3"'s 4 (served: nominal 4, the pool 2),
    # "=P 3"'s 2 (its queue now holds quota: not again); p2 on c2 holds 0 there but the
    # pool has none. A project that may not widen (budget spent) is never served.
    start, end = PLAN["periods"][0]["start"], PLAN["periods"][0]["end"]
    objs = period_objects(PLAN, OrgTree.from_frame(ORG), start, end)
    gangs = [("p1", "c1", 8), ("=P 3", "c1", 8), ("=P 3", "c1", 4), ("=P 3", "c1", 2),
             ("p2", "c2", 8)]
    assert widen_late(PLAN, objs, gangs) == [("=P 3", "c1", 4)]
    assert queue_quotas(objs)[("=P 3", "c1")]["nominalQuota"] == 4
    assert pool_free(objs)["c1"] == 2
    spent = copy.deepcopy(PLAN)
    spent["budgets"][2]["used"] = spent["budgets"][2]["budget"]
    objs = period_objects(spent, OrgTree.from_frame(ORG), start, end)
    assert widen_late(spent, objs, [("=P 3", "c1", 4)]) == []


@needs_crds
@pytest.mark.parametrize("per_cluster", [False, True])
def test_widened_sets_validate_and_split_per_cluster_alike(per_cluster):
    pending = {("p1", "c1"): 16}
    files = export_kueue(PLAN, ORG, per_cluster=per_cluster, pending=pending)
    start = PLAN["periods"][0]["start"]
    docs = (objects(files, file_name(start, "c1")) if per_cluster
            else objects(files, file_name(start)))
    for obj in docs:
        if obj["kind"] != "Topology":
            validate(obj)
    assert queue_quotas(docs)[("p1", "c1")]["nominalQuota"] == 16
    assert pool_free(docs).get("c1", 0) == 0


def reference_export(monkeypatch, *args, **kwargs) -> dict[str, str]:
    """:func:`export_kueue` as it wrote before: each whole set by PyYAML's ``safe_dump_all``."""
    import planner.exporters.kueue as kueue

    with monkeypatch.context() as patched:
        patched.setattr(kueue, "_dump", lambda objects: yaml.safe_dump_all(
            objects, sort_keys=False, default_flow_style=False, explicit_start=True,
            allow_unicode=True, width=100))
        patched.setattr(kueue._SetWriter, "text", lambda self, objects: kueue._dump(objects))
        return export_kueue(*args, **kwargs)


def test_the_export_is_the_bytes_pyyaml_writes_per_set(monkeypatch):
    # libyaml where it writes what PyYAML's Python emitter writes, and the objects a
    # period's per-cluster sets share written once: the same bytes as each whole set
    # dumped by yaml.safe_dump_all (two periods, so each period's shared objects are its own)
    plan, org = wide_plan(12)
    for per_cluster in (False, True):
        for fill in (False, True):
            got = export_kueue(plan, org, periods=2, per_cluster=per_cluster, fill=fill)
            assert got == reference_export(monkeypatch, plan, org, periods=2,
                                           per_cluster=per_cluster, fill=fill)
    assert export_kueue(PLAN, ORG, periods=2) == reference_export(monkeypatch, PLAN, ORG,
                                                                  periods=2)


@needs_crds
def test_rule_8_an_overdrawn_projects_queue_sits_in_the_pool_with_weight_0():
    # "=P 3" used three times its budget: whatever share of the quarter is gone, that is
    # more than a whole budget ahead of its pace (rule 8). Its ClusterQueue leaves its team
    # for the pool Cohort, weight 0; the others stay where they were. Before the rule
    # (overdrawn_at_pool=False) it stays in its team, at weight 0 all the same.
    over = json.loads(json.dumps(PLAN))
    over["budgets"][2]["used"] = 3 * float(over["budgets"][2]["budget"])
    start = PLAN["periods"][0]["start"]
    queues = {d["metadata"]["annotations"]["gpu-planner.io/id"]: d
              for d in objects(export_kueue(over, ORG), file_name(start))
              if d["kind"] == "ClusterQueue"}
    before = {d["metadata"]["annotations"]["gpu-planner.io/id"]: d
              for d in objects(export_kueue(over, ORG, overdrawn_at_pool=False),
                               file_name(start)) if d["kind"] == "ClusterQueue"}
    for queue in queues.values():
        validate(queue)
    assert queues["=P 3"]["spec"]["cohortName"] == POOL
    assert before["=P 3"]["spec"]["cohortName"] != POOL
    assert queues["=P 3"]["spec"]["fairSharing"] == {"weight": "0"}
    assert {p: q for p, q in queues.items() if p != "=P 3"} == {
        p: q for p, q in before.items() if p != "=P 3"}


@pytest.mark.parametrize("weights", ["pace", "org"])
@pytest.mark.parametrize("at_pool", [True, False])
def test_an_exports_sets_share_one_reading_of_the_weights_and_the_overdrawn(weights, at_pool):
    # export_kueue reads the pace weights and the overdrawn projects once (queue_weights)
    # and gives them to every period and cluster set: each file is, byte for byte, the set
    # period_objects builds reading them itself. "=P 3" is overdrawn, as above.
    from planner.exporters import yamltext
    from planner.exporters.common import period_bounds

    over = json.loads(json.dumps(PLAN))
    over["budgets"][2]["used"] = 3 * float(over["budgets"][2]["budget"])
    tree = OrgTree.from_frame(ORG)
    for split in (False, True):
        files = export_kueue(over, ORG, periods=3, per_cluster=split, weights=weights,
                             overdrawn_at_pool=at_pool)
        clusters = sorted(c["cluster"] for c in over["clusters"]) if split else [None]
        for start, end in period_bounds(over, 3):
            quotas = project_quotas(over, start, end, True, list(tree.leaves))
            for cluster in clusters:
                alone = period_objects(over, tree, start, end, cluster, quotas,
                                       weights=weights, overdrawn_at_pool=at_pool)
                assert files[file_name(start, cluster)] == yamltext.dump_all(alone)


def test_the_cli_export_and_the_replay_take_the_one_shipped_record():
    from planner.exporters.files import export_files
    from planner.simulate.kueue_replay import KueueReplayPolicy

    assert KueueReplayPolicy().executor.export is SHIPPED
    assert KueueExport() == SHIPPED  # frozen: nobody can change what ships in place
    files = export_files(PLAN, "kueue", ORG, periods=2)
    assert files == {k: v.encode() for k, v in SHIPPED.export(PLAN, ORG, 2).items()}
