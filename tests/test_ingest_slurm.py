"""planner ingest sacct against a real Slurm 22.05: run jobs, sacct, ingest, plan from it.

The Slurm is tests/real_slurm.py's (munge, MariaDB, slurmdbd, slurmctld, one slurmd per
node, in a network namespace of its own), started here for this module's small scenario:
c1 (H100, 2 nodes x 4 GPUs) and c2 (A100, 1 node x 4 GPUs), each node 1 CPU, so a node
runs one job at a time, with GPU types and typed accounting (:func:`typed_gpus`).
Skipped with the reason where Slurm is missing; failing instead under
PLANNER_SYSTEM_TESTS=required (as .ci/run sets it).
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from planner.cli import main
from planner.ingest import ingest_usage
from planner.ingest.records import OPPORTUNISTIC
from planner.ingest.sacct import COMMAND
from planner.times import iso
from tests.real_slurm import until
from tests.system import REQUIRED, need

ORG = """\
id,parent,weight
area,,1
team-a,area,2
team-b,area,1
p1,team-a,2
p2,team-a,1
=P 3,team-b,1
"""
ACCOUNT = {"p1": "p1", "p2": "p2", "=P 3": "p-3-8aff7f51"}  # safe_name, as exported


def _scenario(folder: Path, today: pd.Timestamp) -> Path:
    """A small scenario whose quarter holds today; as_of = tomorrow, so today's jobs are used."""
    folder.mkdir(parents=True)
    day = pd.Timedelta(days=1)
    (folder / "scenario.toml").write_text(
        f'name = "ingest-slurm"\nquarter_start = {(today - 10 * day).date()}\n'
        f"quarter_end = {(today + 20 * day).date()}\nas_of = {(today + day).date()}\n"
        "period_hours = 24\nlookback_days = 7\n\n[gpu_rates]\nH100 = 1.0\nA100 = 0.55\n")
    (folder / "clusters.csv").write_text(
        "cluster,gpu_type,nodes,gpus_per_node\nc1,H100,2,4\nc2,A100,1,4\n")
    (folder / "org.csv").write_text(ORG)
    (folder / "budgets.csv").write_text("project,gpu_hours\np1,2000\np2,1500\n=P 3,500\n")
    start, end = (today + day).date(), (today + 20 * day).date()
    (folder / "demand.csv").write_text(
        f"project,cluster,start,end,gpus\np1,c1,{start},{end},4\n=P 3,c2,{start},{end},2\n")
    return folder


def _sacct_rows(slurm) -> dict[str, dict[str, str]]:
    """The exact command of the issue (as root: every job is root's), by JobIDRaw."""
    out = slurm.run(*COMMAND.split()).stdout
    fields = ("JobIDRaw", "Account", "Partition", "AllocTRES", "Start", "End", "State", "QOS")
    return {line.split("|")[0]: dict(zip(fields, line.split("|"), strict=True))
            for line in out.splitlines() if line}


def _stamp(text: str) -> pd.Timestamp:
    return pd.Timestamp(text, tz="UTC")


def _usage(folder: Path) -> dict[str, dict[str, str]]:
    with open(folder / "usage.csv", encoding="utf-8", newline="") as handle:
        return {r["job_id"]: r for r in csv.DictReader(handle)}


def _hours(row: dict[str, str]) -> float:
    return (_stamp(row["end"]) - _stamp(row["start"])).total_seconds() / 3600


GPU_TYPES = {"c1": "h100", "c2": "a100"}


def typed_gpus(monkeypatch) -> None:
    """The test Slurm with GPU types (``gres.conf`` ``Type=``, ``Gres=gpu:<type>:N``) and
    typed accounting (``AccountingStorageTRES=gres/gpu,gres/gpu:<type>...``), as sites with
    several GPU models run it.

    Slurm 22.05 then prints both counts in AllocTRES, ``gres/gpu:h100=2,gres/gpu=2`` for a
    ``--gres=gpu:2`` job (seen here; with untyped accounting only ``gres/gpu=2``).
    """
    import tests.real_slurm as real

    conf, gres = real._slurm_conf, real._gres_conf

    def slurm_conf(root, clusters):
        lines = []
        for line in conf(root, clusters).splitlines():
            for cluster, kind in GPU_TYPES.items():
                if line.startswith(f"NodeName={cluster}n"):
                    line = line.replace("Gres=gpu:", f"Gres=gpu:{kind}:")
            if line == "AccountingStorageTRES=gres/gpu":
                line += "".join(f",gres/gpu:{kind}" for kind in GPU_TYPES.values())
            lines.append(line)
        return "\n".join(lines) + "\n"

    def gres_conf(root, clusters):
        return "".join(
            line.replace(" Name=gpu ", f" Name=gpu Type={GPU_TYPES[line[9:11]]} ") + "\n"
            for line in gres(root, clusters).splitlines())

    monkeypatch.setattr(real, "_slurm_conf", slurm_conf)
    monkeypatch.setattr(real, "_gres_conf", gres_conf)


def test_real_slurm_jobs_are_ingested_from_sacct_and_planned_from(tmp_path: Path, monkeypatch):
    from tests.real_slurm import TOOLS, running_slurm

    why = "a real Slurm 22.05 with slurmdbd (Debian packages in .ci/apt-packages)"
    need(*TOOLS, why=why)
    if os.geteuid() != 0:
        (pytest.fail if REQUIRED else pytest.skip)(f"not root: {why} runs its daemons as root")
    assert COMMAND == ("sacct --parsable2 --noheader --allocations "
                       "--format=JobIDRaw,Account,Partition,AllocTRES,Start,End,State,QOS")
    today = pd.Timestamp.now(tz="UTC").floor("D")
    folder = _scenario(tmp_path / "scenario", today)
    # the plan and its Slurm script, as an admin makes them
    assert main(["run", str(folder), "--out", str(tmp_path / "out"), "--quiet",
                 "--export", "slurm"]) == 0
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    typed_gpus(monkeypatch)
    with running_slurm(plan["clusters"]) as slurm:
        assert "Type=h100" in (slurm.root / "etc" / "gres.conf").read_text()
        slurm.run("bash", str(tmp_path / "out" / "slurm" / "slurm-apply.sh"), timeout=120)
        for acct in ACCOUNT.values():  # users are the site's business: root may charge them
            slurm.run("sacctmgr", "-i", "add", "user", "root", f"account={acct}")
            # this test is about ingest: the budget QOS's pace cap (the plan's first-period
            # grants, 0 GPUs where the plan has no demand) is lifted so the jobs run under it
            slurm.run("sacctmgr", "-i", "modify", "qos", f"gp-{acct}", "set",
                      "GrpTRES=gres/gpu=-1")
        before = pd.Timestamp.now(tz="UTC").floor("s")

        def sbatch(account: str, partition: str, *args: str) -> str:
            return slurm.run("sbatch", "--parsable", "-A", account, "-p", partition, "-t", "10",
                             "-o", f"{slurm.root}/jobs/%j.out", *args).stdout.strip()

        done = sbatch("p1", "c1", "--gres=gpu:2", "--wrap", "sleep 2")
        odd = sbatch(ACCOUNT["=P 3"], "c2", "--gres=gpu:3", "--wrap", "sleep 1")
        running = sbatch("p2", "c1", "--gres=gpu:1", "--wrap", "sleep 300")
        cpu_only = sbatch("p1", "c2", "--wrap", "true")
        # beyond budget: the exporter's opportunistic QOS, charged to no budget
        opportunistic = sbatch("p1", "c2", "--qos=gp-opportunistic", "--gres=gpu:1",
                               "--wrap", "sleep 1")
        finished = (done, odd, cpu_only, opportunistic)

        def settled():
            rows = _sacct_rows(slurm)
            states = {j: rows.get(j, {}).get("State") for j in (*finished, running)}
            return rows if (all(states[j] == "COMPLETED" for j in finished)
                            and states[running] == "RUNNING") else None

        until("four jobs complete and one runs", settled)
        # both c1 nodes, one of which the running job holds: pending (Resources), and listed
        # by sacct (a job held by --begin in the future is not: not yet eligible)
        pending = sbatch("p2", "c1", "-N2", "--gres=gpu:4", "--wrap", "true")
        rows = until("the pending job is listed", lambda: (
            r if (r := _sacct_rows(slurm)).get(pending, {}).get("State") == "PENDING" else None))
        after = pd.Timestamp.now(tz="UTC").ceil("s")
        # what Slurm 22.05 prints with typed accounting: the total and the typed count
        # (the ingested row must say 2 GPUs, not 4)
        tres = rows[done]["AllocTRES"].split(",")
        assert {"gres/gpu=2", "gres/gpu:h100=2"} <= set(tres)
        assert {"gres/gpu=3", "gres/gpu:a100=3"} <= set(rows[odd]["AllocTRES"].split(","))
        assert (rows[running]["End"], rows[pending]["Start"]) == ("Unknown", "Unknown")
        dump = tmp_path / "sacct.txt"
        dump.write_text("\n".join("|".join(r.values()) for r in rows.values()) + "\n")

        now = pd.Timestamp.now(tz="UTC").floor("s")
        report = ingest_usage(folder, "sacct", dump, now=now)
        usage = _usage(folder)
        ids = {j: f"slurm:{c}:{j}" for j, c in ((done, "c1"), (odd, "c2"), (running, "c1"))}
        assert set(report.added) == set(usage) == set(ids.values())
        skipped = {k: v for k, v in report.skipped.items()}
        assert skipped["no GPU"] == (f"{cpu_only} (row "
                                     f"{list(rows).index(cpu_only) + 1}, "
                                     f"{rows[cpu_only]['AllocTRES']})",)
        assert [s.split()[0] for s in skipped["never started (pending)"]] == [pending]
        assert rows[opportunistic]["QOS"] == "gp-opportunistic"
        assert skipped[OPPORTUNISTIC] == (
            f"{opportunistic} (row {list(rows).index(opportunistic) + 1}, p1)",)
        for job, (project, cluster, gpus) in {done: ("p1", "c1", "2"), odd: ("=P 3", "c2", "3"),
                                              running: ("p2", "c1", "1")}.items():
            row = usage[ids[job]]
            assert (row["project"], row["cluster"], row["gpus"]) == (project, cluster, gpus)
            assert row["start"] == iso(_stamp(rows[job]["Start"]))
            assert before - pd.Timedelta(seconds=1) <= _stamp(row["start"]) <= after
        assert usage[ids[done]]["end"] == iso(_stamp(rows[done]["End"]))
        assert 2 <= _hours(usage[ids[done]]) * 3600 <= 30  # sleep 2, whole seconds
        assert (usage[ids[running]]["end"], usage[ids[running]]["state"]) == (iso(now),
                                                                             "running")
        # plan from the ledger: used = GPUs x hours x rate of what ran before as_of
        assert main(["run", str(folder), "--out", str(tmp_path / "out2"), "--quiet"]) == 0
        replanned = json.loads((tmp_path / "out2" / "plan.json").read_text())
        used = {b["project"]: b["used"] for b in replanned["budgets"]}
        assert used["p1"] == pytest.approx(2 * _hours(usage[ids[done]]), abs=1e-5)
        assert used["=P 3"] == pytest.approx(3 * 0.55 * _hours(usage[ids[odd]]), abs=1e-5)
        assert used["p2"] == pytest.approx(_hours(usage[ids[running]]), abs=1e-5)
        assert used["p1"] > 0 and used["=P 3"] > 0 and used["p2"] > 0

        # the running job is cancelled: a second ingest updates its row, doubles nothing.
        # The pending job is held first: the cancel frees its nodes, and it (`true`) could
        # otherwise start and finish before the dump, a row of its own (a CI run saw that)
        slurm.run("scontrol", "hold", pending)
        slurm.run("scancel", running)
        rows = until("the running job is cancelled", lambda: (
            r if (r := _sacct_rows(slurm)).get(running, {}).get("End", "Unknown") != "Unknown"
            else None))
        assert rows[running]["State"].startswith("CANCELLED")
        dump.write_text("\n".join("|".join(r.values()) for r in rows.values()) + "\n")
        again = ingest_usage(folder, "sacct", dump, now=now + pd.Timedelta(minutes=5))
        assert again.updated == (ids[running],) and not again.added
        row = _usage(folder)[ids[running]]
        assert (row["end"], row["state"]) == (iso(_stamp(rows[running]["End"])), "")
        slurm.run("scancel", pending)
