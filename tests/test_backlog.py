"""A backlog larger than a cluster is legitimate input: it plans, capped by capacity.

The contract's ``demand.csv`` says ``gpus`` is what a project *wants*; with demand 2–3×
supply, rows (and sums of rows) above a cluster's GPUs are the normal, contended case.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pandas as pd
import pytest

from planner.check import check_plan
from planner.cli import main
from planner.config import load_model
from planner.inputs import load_scenario, validate_scenario
from planner.run import plan_scenario
from tests.tiny import scenario

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
MODEL = load_model("default")
BIG = 1e6

# Area A (weight 2) with a1, a2; area B (weight 1) with b1. One cluster of 100 GPUs, one
# 24 h period: C = 2,400 GPU-hours.
ORG = [("A", "", 2.0), ("B", "", 1.0), ("a1", "A", 1.0), ("a2", "A", 1.0), ("b1", "B", 1.0)]
ONE_BIG_NODE = [("c1", "H100", 1, 100)]


def test_rows_above_the_cluster_split_as_the_water_filling():
    # a1 asks 300 GPUs in two rows of 150 (each above the 100-GPU cluster, 7,200 GPU-h in
    # all), a2 asks 10 (240), b1 asks 500 in one row (12,000).
    # Root: D_A = 7,440, D_B = 12,000, weights 2:1: A = min(7,440, 2λ), B = min(12,000, λ);
    # neither capped, 3λ = 2,400 → λ = 800: A = 1,600, B = 800.
    # Inside A: a1 = min(7,200, μ), a2 = min(240, μ), sum 1,600 → a2 = 240 (capped),
    # a1 = 1,360. The cluster is full: 1,360 + 240 + 800 = 2,400.
    # Runner-up that must not come out: flat max-min over the three projects (a2 240,
    # a1 = b1 = 1,080), which ignores the areas' weights.
    demand = [("a1", "c1", "2026-11-02", "2026-11-03", 150),
              ("a1", "c1", "2026-11-02", "2026-11-03", 150),
              ("a2", "c1", "2026-11-02", "2026-11-03", 10),
              ("b1", "c1", "2026-11-02", "2026-11-03", 500)]
    sc = scenario(clusters=ONE_BIG_NODE, org=ORG, demand=demand,
                  budgets=[("a1", BIG), ("a2", BIG), ("b1", BIG)])
    run = plan_scenario(sc, MODEL)
    got: dict[str, float] = {}
    for a in run.plan.allocations:
        assert a["kind"] == "guaranteed"
        got[a["project"]] = got.get(a["project"], 0.0) + a["gpu_hours"]
    assert got == pytest.approx({"a1": 1360.0, "a2": 240.0, "b1": 800.0}, abs=1e-6)
    assert check_plan(run.plan.body, sc) == []


def _with_backlog(folder: Path) -> Path:
    """The sample with, on every cluster, one row asking 3× the cluster's GPUs to the end."""
    shutil.copytree(SAMPLE, folder)
    clusters = pd.read_csv(folder / "clusters.csv")
    budgets = pd.read_csv(folder / "budgets.csv")
    demand = pd.read_csv(folder / "demand.csv", dtype=str)
    rows = []
    for i, c in enumerate(clusters.itertuples()):
        # a project allowed on the cluster (an empty `clusters` cell allows all)
        allowed = budgets[budgets["clusters"].isna()
                          | budgets["clusters"].fillna("").str.split(";").map(
                              lambda cs, name=c.cluster: name in cs)]
        project = allowed["project"].iloc[i % len(allowed)]
        rows.append({"project": project, "cluster": c.cluster,
                     "start": "2026-11-16T00:00:00", "end": "2027-01-01T00:00:00",
                     "gpus": str(3 * c.nodes * c.gpus_per_node)})
    pd.concat([demand, pd.DataFrame(rows)]).to_csv(folder / "demand.csv", index=False)
    return folder


def test_a_backlog_three_times_every_cluster_plans_a_full_valid_plan(tmp_path):
    folder = _with_backlog(tmp_path / "backlog")
    assert validate_scenario(folder) == []
    sc = load_scenario(folder)
    run = plan_scenario(sc, MODEL)
    assert run.plan.body["solver"]["status"] == "optimal"
    assert check_plan(run.plan.body, sc) == []
    # every cluster is full in every period: demand waits everywhere (rule 5), and nothing
    # above capacity is granted (rule 1)
    size = {c.cluster: c.nodes * c.gpus_per_node for c in sc.clusters.itertuples()}
    hours = {p["start"]: (dt.datetime.fromisoformat(p["end"])
                          - dt.datetime.fromisoformat(p["start"])).total_seconds() / 3600
             for p in run.plan.body["periods"]}
    used = {(c, p): 0.0 for c in size for p in hours}
    for a in run.plan.allocations:
        used[a["cluster"], a["period_start"]] += a["gpu_hours"]
    for r in run.plan.body["reservations"]:
        gpn = size[r["cluster"]] // int(sc.clusters.set_index("cluster").loc[
            r["cluster"], "nodes"])
        for p in hours:
            if r["start"] <= p < r["end"]:
                used[r["cluster"], p] += r["nodes"] * gpn * hours[p]
    for (c, p), gpu_hours in used.items():
        capacity = size[c] * hours[p]
        assert capacity - 1 * hours[p] - 1e-6 <= gpu_hours <= capacity + 1e-6, (c, p)


def test_the_cli_plans_a_backlog_and_validate_accepts_it(tmp_path, capsys):
    folder = _with_backlog(tmp_path / "backlog")
    assert main(["validate", str(folder)]) == 0
    assert main(["run", str(folder), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "plan.json").is_file()
    assert "ask for at most" not in capsys.readouterr().err


def test_a_number_no_cluster_could_hold_is_still_refused(tmp_path):
    folder = tmp_path / "absurd"
    shutil.copytree(SAMPLE, folder)
    text = (folder / "demand.csv").read_text()
    lines = text.splitlines()
    head, first = lines[0], lines[1].split(",")
    first[-1] = "1e12"
    (folder / "demand.csv").write_text("\n".join([head, ",".join(first), *lines[2:]]) + "\n")
    problems = validate_scenario(folder)
    assert [(p.row, p.column) for p in problems] == [(2, "gpus")]
    assert "1e+12" in problems[0].message
