"""``planner export``: writes each target; refuses bad plans with exit 2, writing nothing."""

from __future__ import annotations

import copy
import json
import os
import stat
from pathlib import Path

import pytest
import yaml

from planner.cli import main
from planner.exporters.slurm import slurm_state


@pytest.fixture
def plan_file(tmp_path: Path, sample_plan) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(sample_plan[0]))
    return path


@pytest.mark.parametrize(("target", "names"), [
    ("kueue", {"index.yaml", "kueue-2026-11-16T00-00-00Z.yaml",
               "kueue-2026-11-17T00-00-00Z.yaml"}),
    ("slurm", {"slurm-apply.sh"}),
    ("json", {"executor-view.json"}),
])
def test_export_writes_the_target(tmp_path: Path, plan_file: Path, target: str, names: set):
    out = tmp_path / "out"
    assert main(["export", str(plan_file), "--to", target, "--out", str(out),
                 "--periods", "2"]) == 0
    assert {p.name for p in out.iterdir()} == names
    if target == "kueue":
        assert len(yaml.safe_load((out / "index.yaml").read_text())["periods"]) == 2


def test_export_kueue_per_cluster_writes_a_set_per_cluster_and_lists_them(
        tmp_path: Path, plan_file: Path, sample_plan):
    out = tmp_path / "out"
    assert main(["export", str(plan_file), "--to", "kueue", "--out", str(out),
                 "--per-cluster"]) == 0
    start = sample_plan[0]["periods"][0]["start"].replace(":", "-")
    clusters = sorted(c["cluster"] for c in sample_plan[0]["clusters"])
    assert len(clusters) == 8
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["index.yaml", *(f"kueue-{start}-{c}.yaml" for c in clusters)])
    index = yaml.safe_load((out / "index.yaml").read_text())
    assert index["per_cluster"] is True
    assert [e["cluster"] for e in index["periods"]] == clusters
    for entry in index["periods"]:
        docs = list(yaml.safe_load_all((out / entry["file"]).read_text()))
        assert len(docs) == entry["objects"]
        assert [d["metadata"]["name"] for d in docs if d["kind"] == "ResourceFlavor"] == \
            [entry["cluster"]]


def test_export_kueue_gives_flavors_only_where_budgets_csv_lets_a_project_run(
        tmp_path: Path, plan_file: Path, sample_plan):
    # the sample's budgets.csv: data-curation-crawl-index runs on l40s-a alone,
    # biology-enzyme-design on a100-c alone; a project with no restriction (empty
    # clusters) gets a flavor, nominal 0 where the plan grants nothing, on all 8
    out = tmp_path / "out"
    assert main(["export", str(plan_file), "--to", "kueue", "--out", str(out)]) == 0
    index = yaml.safe_load((out / "index.yaml").read_text())
    docs = list(yaml.safe_load_all((out / index["periods"][0]["file"]).read_text()))
    flavors = {d["metadata"]["annotations"]["gpu-planner.io/id"]:
               [f["name"] for g in d["spec"]["resourceGroups"] for f in g["flavors"]]
               for d in docs if d["kind"] == "ClusterQueue"}
    assert flavors["data-curation-crawl-index"] == ["l40s-a"]
    assert flavors["biology-enzyme-design"] == ["a100-c"]
    assert flavors["pretraining-dense-7b"] == sorted(
        c["cluster"] for c in sample_plan[0]["clusters"])


def test_per_cluster_for_another_target_exits_2(tmp_path: Path, plan_file: Path, capsys):
    out = tmp_path / "out"
    assert main(["export", str(plan_file), "--to", "slurm", "--out", str(out),
                 "--per-cluster"]) == 2
    assert "--per-cluster: is for Kueue manifests only" in capsys.readouterr().err
    assert not out.exists()


def test_export_slurm_with_previous_emits_only_changes(tmp_path: Path, plan_file: Path,
                                                      sample_plan):
    out = tmp_path / "out"
    assert main(["export", str(plan_file), "--to", "slurm", "--out", str(out),
                 "--previous", str(plan_file)]) == 0
    script = (out / "slurm-apply.sh").read_text()
    assert "nothing changed" in script
    # but the pace caps of projects behind their pace, read from the queue on every run
    plan, org = sample_plan
    assert script.count("cap=$(wide_cap ") == sum(
        b.widens for b in slurm_state(plan, org).budgets) > 0


def _broken(plan: dict, how: str) -> dict:
    bad = copy.deepcopy(plan)
    if how == "schema":
        del bad["periods"]
    elif how == "version":
        bad["schema_version"] = 2
    elif how == "alloc-cluster":
        bad["allocations"][0]["cluster"] = "nowhere"
    elif how == "reservation-cluster":
        bad["reservations"][0]["cluster"] = "nowhere"
    elif how == "project":
        bad["allocations"][0]["project"] = "ghost"
    return bad


@pytest.mark.parametrize(("how", "needle"), [
    ("schema", "'periods' is a required property"),
    ("version", "schema_version"),
    ("alloc-cluster", "allocations/0/cluster: unknown cluster 'nowhere'"),
    ("reservation-cluster", "reservations/0/cluster: unknown cluster 'nowhere'"),
    ("project", "allocations/0/project: project 'ghost' is not in the scenario's org tree"),
])
@pytest.mark.parametrize("target", ["kueue", "slurm", "json"])
def test_bad_plan_exits_2_and_writes_nothing(tmp_path: Path, sample_plan, capsys, how: str,
                                             needle: str, target: str):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(_broken(sample_plan[0], how)))
    out = tmp_path / "out"
    if how == "project" and target == "json":
        # the executor view reads no org tree: a project id is passed through as it is
        assert main(["export", str(path), "--to", target, "--out", str(out)]) == 0
        assert '"ghost"' in (out / "executor-view.json").read_text()
        return
    assert main(["export", str(path), "--to", target, "--out", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())  # rich wraps long lines
    assert needle in err and "nothing written" in err and "Traceback" not in err
    assert not out.exists()


def test_not_json_and_bad_periods_exit_2(tmp_path: Path, plan_file: Path, capsys):
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    assert main(["export", str(junk), "--to", "kueue", "--out", str(tmp_path / "o")]) == 2
    assert main(["export", str(plan_file), "--to", "kueue", "--out", str(tmp_path / "o"),
                 "--periods", "0"]) == 2
    assert not (tmp_path / "o").exists()
    assert "--periods" in capsys.readouterr().err


def test_run_with_export_writes_each_target_beside_the_plan(tmp_path: Path):
    out = tmp_path / "out"
    assert main(["run", "--out", str(out), "--quiet", "--export", "kueue,slurm,json"]) == 0
    assert (out / "plan.json").exists()
    assert (out / "kueue" / "index.yaml").exists()
    assert (out / "slurm" / "slurm-apply.sh").exists()
    assert (out / "json" / "executor-view.json").exists()
    # modes as an ordinary write under the umask gives them: the executor's user may read
    # the plan, and the Slurm script runs as ./slurm-apply.sh
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((out / "plan.json").stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE((out / "slurm" / "slurm-apply.sh").stat().st_mode) == 0o777 & ~umask
    assert not list(out.glob(".*.tmp"))


def test_run_with_an_unknown_export_target_exits_2_before_planning(tmp_path: Path, capsys):
    out = tmp_path / "out"
    assert main(["run", "--out", str(out), "--quiet", "--export", "kueue,lsf"]) == 2
    assert "unknown target(s) lsf" in capsys.readouterr().err
    assert not out.exists()


def _renamed(plan: dict, old: str, new: str) -> dict:
    """``plan`` with cluster ``old`` called ``new`` everywhere."""
    out = copy.deepcopy(plan)
    for item in out["clusters"] + out["allocations"] + out["reservations"]:
        if item["cluster"] == old:
            item["cluster"] = new
    return out


def test_export_slurm_refuses_a_cluster_that_is_no_partition_name(tmp_path: Path, sample_plan,
                                                                   capsys):
    plan = sample_plan[0]
    old = plan["clusters"][0]["cluster"]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(_renamed(plan, old, "$(touch x) a")))
    out = tmp_path / "out"
    assert main(["export", str(path), "--to", "slurm", "--out", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "plan.json, column clusters/0/cluster: cluster '$(touch x) a' cannot be a Slurm " \
           "partition name" in err and "nothing written" in err
    assert not out.exists()
    # Kueue and the executor view carry the id as data: the same plan exports there
    assert main(["export", str(path), "--to", "kueue", "--out", str(tmp_path / "k")]) == 0
    assert main(["export", str(path), "--to", "json", "--out", str(tmp_path / "j")]) == 0


def test_run_and_validate_for_slurm_refuse_a_cluster_slurm_cannot_name(tmp_path: Path, capsys):
    from tests.scenario_factory import FILES, write_scenario

    # cluster "a100,b" (CSV-quoted): fine for the planner, not for a slurm.conf partition
    folder = write_scenario(tmp_path / "s", **{
        name: FILES[name].replace("a100-b", '"a100,b"')
        for name in ("clusters", "budgets", "demand", "reservations", "usage")})
    assert main(["validate", str(folder)]) == 0
    capsys.readouterr()
    assert main(["validate", str(folder), "--for", "slurm,kueue"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "clusters.csv, row 3, column cluster: for Slurm: cluster 'a100,b' cannot be" in err
    assert main(["validate", str(folder), "--for", "lsf"]) == 2
    assert "--for: unknown target(s) lsf" in capsys.readouterr().err
    out = tmp_path / "out"
    assert main(["run", str(folder), "--out", str(out), "--quiet", "--export", "slurm"]) == 2
    assert "cannot be a Slurm partition name" in " ".join(capsys.readouterr().err.split())
    assert not out.exists()  # refused before planning: nothing written
    assert main(["run", str(folder), "--out", str(out), "--quiet", "--export", "kueue"]) == 0


def test_plan_carries_node_labels_and_kueue_uses_them(tmp_path: Path):
    from planner.run import load_previous
    from tests.scenario_factory import write_scenario

    folder = write_scenario(tmp_path / "s", clusters=(
        "cluster,gpu_type,nodes,gpus_per_node,node_labels\n"
        "h100-a,H100,4,8,nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3;pool=a\n"
        "a100-b,A100,2,8,\n"))
    out = tmp_path / "out"
    assert main(["run", str(folder), "--out", str(out), "--quiet", "--export", "kueue"]) == 0
    plan = load_previous(out / "plan.json")  # schema-checked
    assert {c["cluster"]: c.get("node_labels") for c in plan["clusters"]} == {
        "h100-a": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "pool": "a"},
        "a100-b": None}
    index = yaml.safe_load((out / "kueue" / "index.yaml").read_text())
    docs = list(yaml.safe_load_all((out / "kueue" / index["periods"][0]["file"]).read_text()))
    flavors = {d["metadata"]["name"]: d["spec"]["nodeLabels"] for d in docs
               if d["kind"] == "ResourceFlavor"}
    assert flavors == {"h100-a": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "pool": "a"},
                       "a100-b": {"gpu-planner.io/cluster": "a100-b"}}
