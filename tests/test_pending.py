"""Rule 6 in Kueue: the gangs pending in a Workloads file widen the export's nominal quotas."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import yaml

from planner.cli import main
from planner.exporters.common import safe_name
from planner.exporters.kueue import (
    cluster_selector,
    file_name,
    most_owed_first,
    project_quotas,
    set_text,
    widen_late,
    widen_to_pending,
)
from planner.ingest.pending import (
    NARROW,
    NO_CLUSTER,
    NO_PROJECT,
    NOT_GANG,
    NOT_PENDING,
    pending_gangs,
)
from planner.inputs.load import load_scenario
from tests.scenario_factory import ORG_CSV, write_scenario

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# the recorded pending Workload (p2/job-eval, QuotaReserved False), the template below
TEMPLATE = json.loads((FIXTURES / "kueue-workloads.json").read_text())["items"][2]
P5 = "p-5-116310a4"  # safe_name("P_5"): its namespace, LocalQueue and ClusterQueue


def scenario(tmp_path: Path) -> Path:
    """The tiny scenario (h100-a 4 x 8 GPUs, a100-b 2 x 8; p2 only on h100-a) plus P_5."""
    return write_scenario(tmp_path / "scenario", org=ORG_CSV + "P_5,language,1\n")


def workload(namespace: str, pods: int, gpus: int, cluster: str | None = None,
             cls: str = "gpu-planner-budget-gang", admitted: bool = False,
             queue: str | None = None, name: str = "job") -> dict:
    """A pending Workload of ``pods`` x ``gpus`` GPUs, its pods selecting ``cluster``."""
    w = copy.deepcopy(TEMPLATE)
    w["metadata"].update(namespace=namespace, name=name)
    w["spec"]["queueName"] = queue or namespace
    w["spec"]["priorityClassName"] = cls
    (pod_set,) = w["spec"]["podSets"]
    pod_set["count"] = pods
    pod_set["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"nvidia.com/gpu": str(gpus)}}
    if cluster is not None:
        rows = SELECTORS[cluster]
        pod_set["template"]["spec"]["nodeSelector"] = dict(rows)
    if admitted:
        w["status"]["conditions"][0].update(status="True", reason="QuotaReserved")
    return w


SELECTORS = {"h100-a": cluster_selector({"cluster": "h100-a", "gpu_type": "H100"}),
             "a100-b": cluster_selector({"cluster": "a100-b", "gpu_type": "A100"})}

# what each Workload is, worked out from the scenario:
ITEMS = [
    workload("p1", 2, 8, "h100-a", name="a"),  # p1's 16-GPU gang on h100-a: counted
    workload("p1", 1, 8, "h100-a", name="b"),  # narrower than p1's widest there
    workload("p2", 3, 8, None, name="c"),  # no selector, but p2 runs on h100-a alone: 24
    workload("p1", 1, 8, None, name="d"),  # no selector, p1 may run on both: which is Kueue's
    workload("p3", 1, 8, "a100-b", name="e"),  # p3's 8 on a100-b
    workload("p3", 2, 8, "a100-b", cls="gpu-planner-budget", name="f"),  # not the gang class
    workload("p3", 1, 4, "a100-b", name="g"),  # the gang class, but half a node
    workload("p1", 4, 8, "h100-a", admitted=True, name="h"),  # holds its quota already
    workload("shared", 4, 8, "h100-a", queue="p1", name="i"),  # p1's queue name, not its
    workload(P5, 2, 4, "a100-b", name="j"),  # a hostile id's gang, in its safe namespace
]


def write(tmp_path: Path, items: list[dict], name: str = "wl.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def test_pending_gangs_are_read_workload_by_workload(tmp_path: Path):
    folder = scenario(tmp_path)
    sc = load_scenario(folder)
    allowed = {"p2": ("h100-a",), "p3": ("a100-b", "h100-a")}
    gangs, problems = pending_gangs(write(tmp_path, ITEMS), sc.clusters.to_dict("records"),
                                    sc.tree.leaves, allowed)
    assert problems == []
    assert gangs.widest == {("P_5", "a100-b"): 8, ("p1", "h100-a"): 16, ("p2", "h100-a"): 24,
                            ("p3", "a100-b"): 8}
    assert dict(gangs.passed_over) == {NO_CLUSTER: 1, NOT_GANG: 1, NARROW: 1, NOT_PENDING: 1,
                                       NO_PROJECT: 1}
    assert gangs.lines()[0] == "pending gangs: 4 (project, cluster) widest"


def test_a_malformed_workload_is_named_by_file_row_and_field(tmp_path: Path):
    sc = load_scenario(scenario(tmp_path))
    bad = copy.deepcopy(ITEMS)
    bad[4]["spec"]["podSets"][0]["count"] = "two"
    bad[6]["spec"]["podSets"][0]["template"]["spec"]["nodeSelector"] = ["h100-a"]
    _, problems = pending_gangs(write(tmp_path, bad), sc.clusters.to_dict("records"),
                                sc.tree.leaves)
    assert [(p.file, p.row, p.column) for p in problems] == [
        ("wl.json", 5, "items[4].spec.podSets[0].count"),
        ("wl.json", 7, "items[6].spec.podSets[0].template.spec.nodeSelector")]
    _, problems = pending_gangs(tmp_path / "none.json", [], [])
    assert [(p.file, p.row, p.message) for p in problems] == [
        ("none.json", None, f"no such file ({tmp_path / 'none.json'})")]


def _plan(tmp_path: Path, folder: Path) -> Path:
    out = tmp_path / "planned"
    assert main(["run", str(folder), "--out", str(out)]) == 0
    return out / "plan.json"


def _quotas(out: Path, plan: dict) -> dict[tuple[str, str], int]:
    text = (out / file_name(plan["periods"][0]["start"])).read_text()
    return {(d["metadata"]["annotations"]["gpu-planner.io/id"], f["name"]):
            f["resources"][0]["nominalQuota"]
            for d in yaml.safe_load_all(text) if d["kind"] == "ClusterQueue"
            for g in d["spec"]["resourceGroups"] for f in g["flavors"]}


def _exported(tmp_path: Path) -> tuple[Path, dict, Path, list[str]]:
    """The tiny scenario planned, its plan, ITEMS' Workloads file and `planner export`'s args."""
    folder = scenario(tmp_path)
    plan_file = _plan(tmp_path, folder)
    args = ["export", str(plan_file), "--to", "kueue", "--scenario", str(folder)]
    return folder, json.loads(plan_file.read_text()), write(tmp_path, ITEMS), args


def _taken(plan: dict, folder: Path) -> list[tuple[str, str, int]]:
    """What the first period's widening takes for ITEMS' four gangs, from the plan's quotas."""
    sc = load_scenario(folder)
    quotas = project_quotas(plan, plan["periods"][0]["start"], plan["periods"][0]["end"],
                            projects=list(sc.tree.leaves),
                            allowed={"p2": ("h100-a",), "p3": ("a100-b", "h100-a")})
    return widen_to_pending(plan, quotas, {("P_5", "a100-b"): 8, ("p1", "h100-a"): 16,
                                           ("p2", "h100-a"): 24, ("p3", "a100-b"): 8})


def test_export_with_workloads_widens_what_rule_6_allows(tmp_path: Path, capsys):
    folder, plan, wl, args = _exported(tmp_path)
    plain, wide = tmp_path / "plain", tmp_path / "wide"
    assert main([*args, "--out", str(plain)]) == 0
    assert main([*args, "--out", str(wide), "--workloads", str(wl)]) == 0
    said = capsys.readouterr().out
    assert "pending gangs: 4 (project, cluster) widest" in said
    before, after = _quotas(plain, plan), _quotas(wide, plan)
    # what changed is exactly what widen_to_pending takes, recomputed from the plan
    taken = _taken(plan, folder)
    changed = {k: v for k, v in after.items() if before.get(k) != v}
    assert changed == {(p, c): g for p, c, g in taken}
    for (project, cluster), gpus in changed.items():
        assert gpus > before[(project, cluster)]
    assert taken, "the tiny plan leaves GPUs in the pool for some pending gang"
    assert [line.strip() for line in said.splitlines() if "widened:" in line] == [
        f"widened: {p!r} on {c!r}, nominal quota {g} GPUs" for p, c, g in taken]


def test_bad_workloads_exit_2_and_write_nothing(tmp_path: Path, capsys):
    folder = scenario(tmp_path)
    plan_file = _plan(tmp_path, folder)
    bad = copy.deepcopy(ITEMS)
    bad[0]["spec"]["podSets"][0]["count"] = -1
    out = tmp_path / "out"
    args = ["export", str(plan_file), "--to", "kueue", "--scenario", str(folder),
            "--out", str(out)]
    assert main([*args, "--workloads", str(write(tmp_path, bad))]) == 2
    err = capsys.readouterr().err.replace("\n", "")
    assert "error: wl.json, row 1, column items[0].spec.podSets[0].count: -1 is not a pod" in err
    assert not out.exists()
    assert main([*args, "--workloads", str(tmp_path / "missing.json")]) == 2
    assert "missing.json: no such file" in capsys.readouterr().err.replace("\n", "")
    assert not out.exists()
    assert main(["export", str(plan_file), "--to", "slurm", "--scenario", str(folder),
                 "--out", str(out), "--workloads", str(write(tmp_path, ITEMS))]) == 2
    assert "--workloads: is for Kueue manifests only" in capsys.readouterr().err
    assert not out.exists()


def test_cycle_widens_the_kueue_export_from_the_file_it_ingests(tmp_path: Path, capsys):
    folder = scenario(tmp_path)
    # --kueue derives demand.csv from the Workloads too: the hand-written rows are declared
    (folder / "demand.csv").rename(folder / "declared_demand.csv")
    state = tmp_path / "state"
    wl = write(tmp_path, ITEMS)
    usage = (folder / "usage.csv").read_bytes()
    bad = copy.deepcopy(ITEMS)
    bad[2]["spec"]["podSets"][0]["template"]["spec"]["nodeSelector"] = "h100-a"
    # a file the pending reader refuses stops the cycle before the ingest writes anything
    assert main(["cycle", str(folder), "--state", str(state), "--as-of", "2026-11-02",
                 "--kueue", str(write(tmp_path, bad, "bad.json")), "--export", "kueue"]) == 2
    assert (folder / "usage.csv").read_bytes() == usage
    # the state folder is made first (its lock), but no plan is kept and none is current
    assert list((state / "plans").iterdir()) == [] and not (state / "current").exists()
    capsys.readouterr()
    assert main(["cycle", str(folder), "--state", str(state), "--as-of", "2026-11-02",
                 "--kueue", str(wl), "--export", "kueue"]) == 0
    assert "pending gangs: 4 (project, cluster) widest" in capsys.readouterr().out
    kept = state / "current"
    plan = json.loads((kept / "plan.json").read_text())
    taken = _taken(plan, folder)
    got = _quotas(kept / "kueue", plan)
    for project, cluster, gpus in taken:
        assert got[(project, cluster)] == gpus


def test_export_late_gives_late_queues_their_gangs_in_the_set_in_force(tmp_path: Path, capsys):
    # Rule 7, the hourly step: the set the cycle applied (here `planner export` without
    # Workloads) is read back, the late queues (no nominal quota on the cluster) get
    # their pending gangs' GPUs from the pool, the most owed first, and the set is
    # written under its own name. What changed is widen_late's, recomputed here.
    folder, plan, wl, args = _exported(tmp_path)
    applied, late = tmp_path / "applied", tmp_path / "late"
    assert main([*args, "--out", str(applied)]) == 0
    name = file_name(plan["periods"][0]["start"])
    capsys.readouterr()
    assert main([*args, "--out", str(late), "--late", str(applied / name),
                 "--workloads", str(wl)]) == 0
    said = capsys.readouterr().out
    objects = [d for d in yaml.safe_load_all((applied / name).read_text()) if d]
    sc = load_scenario(folder)
    gangs, _ = pending_gangs(wl, plan["clusters"], sc.tree.leaves,
                             {"p2": ("h100-a",), "p3": ("a100-b", "h100-a")})
    done = widen_late(plan, objects, most_owed_first(plan, gangs.widest))
    assert done, "the tiny plan leaves GPUs in the pool for some late queue"
    assert (late / name).read_text() == set_text(objects)
    before, after = _quotas(applied, plan), _quotas(late, plan)
    changed = {k: v for k, v in after.items() if before.get(k) != v}
    assert changed == {(p, safe_name(c)): g for p, c, g in done}
    assert all(before[key] == 0 for key in changed)
    assert [line.strip() for line in said.splitlines() if "late:" in line] == [
        f"late: {p!r} on {c!r}, nominal quota {g} GPUs" for p, c, g in done]
    assert sorted(p.name for p in late.iterdir()) == [name]


def test_export_late_refuses_what_it_cannot_read(tmp_path: Path, capsys):
    folder = scenario(tmp_path)
    plan_file = _plan(tmp_path, folder)
    wl = write(tmp_path, ITEMS)
    out = tmp_path / "out"
    args = ["export", str(plan_file), "--to", "kueue", "--scenario", str(folder),
            "--out", str(out)]
    foreign = tmp_path / "foreign.yaml"
    foreign.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    assert main([*args, "--late", str(foreign), "--workloads", str(wl)]) == 2
    assert ("foreign.yaml, row 1, column document: not a Kueue object written by gpu-planner"
            in capsys.readouterr().err.replace("\n", ""))
    assert main([*args, "--late", str(tmp_path / "gone.yaml"), "--workloads", str(wl)]) == 2
    assert "gone.yaml: no such file" in capsys.readouterr().err.replace("\n", "")
    assert main([*args, "--late", str(foreign)]) == 2
    assert "--late: needs --workloads" in capsys.readouterr().err
    assert not out.exists()
