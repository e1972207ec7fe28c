"""planner cycle --squeue / --kueue: demand from the queue, the lock, changes.json."""

from __future__ import annotations

import json
import os
from pathlib import Path

from planner.cli import main
from planner.cycle import cycle_inputs
from planner.ingest.squeue import SqueueJob, squeue_text
from planner.locks import hold
from tests.scenario_factory import write_scenario

SACCT = Path(__file__).parent / "fixtures" / "sacct-allocations.txt"
QUEUE = Path(__file__).parent / "fixtures" / "kueue-queue.json"


def flat(text: str) -> str:
    return " ".join(text.split())


def squeue(tmp_path: Path, jobs: list[SqueueJob]) -> Path:
    path = tmp_path / "squeue.txt"
    path.write_text(squeue_text(jobs))
    return path


def job(job_id: str, project: str, cluster: str, gpus: int, hours: int,
        state: str = "PENDING") -> SqueueJob:
    return SqueueJob(job_id, None, project, cluster, f"gp-{project}", state, "Priority", gpus,
                     max(1, gpus // 8), hours * 3600, 0, None)


def test_a_cycle_with_squeue_plans_from_the_queue_and_says_what_changed(tmp_path, capsys):
    folder = write_scenario(tmp_path / "sc", demand=None)
    state = tmp_path / "state"
    first = squeue(tmp_path, [job("1", "p1", "h100-a", 16, 30), job("2", "p3", "a100-b", 8, 5)])
    assert main(["cycle", str(folder), "--state", str(state), "--as-of", "2026-11-02",
                 "--sacct", str(SACCT), "--squeue", str(first), "--export", "slurm"]) == 0
    out = flat(capsys.readouterr().out)
    # the usage ingest, then the demand: p1 16 GPUs for two days, p3 8 for one, and the
    # forecast from usage.csv (what ran in the 28-day window)
    assert "squeue.txt (squeue, now 2026-11-02T00:00:00Z)" in out
    rows = (folder / "demand.csv").read_text().splitlines()
    assert "p1,h100-a,2026-11-02T00:00:00Z,2026-11-04T00:00:00Z,16" in rows
    assert "p3,a100-b,2026-11-02T00:00:00Z,2026-11-03T00:00:00Z,8" in rows
    plan = json.loads((state / "current" / "plan.json").read_text())
    granted = {(a["project"], a["cluster"]) for a in plan["allocations"]
               if a["period_start"] == "2026-11-02T00:00:00Z"}
    assert ("p1", "h100-a") in granted and ("p3", "a100-b") in granted
    # what the cycle keeps beside the plan is what the ingests wrote and the plan came from
    kept = state / "current"
    for name in ("demand.csv", "usage.csv"):
        assert (kept / "inputs" / name).read_bytes() == (folder / name).read_bytes()
    assert cycle_inputs(kept)[0].digest == plan["input_digest"]
    changes = json.loads((state / "current" / "changes.json").read_text())
    assert changes["since"] is None and "p1" in changes["projects"]
    assert "changes since nothing in force: a first plan" in out
    # the next day p1's job has gone and p2 queues: the changes name both
    second = squeue(tmp_path, [job("3", "p2", "h100-a", 8, 10)])
    assert main(["cycle", str(folder), "--state", str(state), "--as-of", "2026-11-03",
                 "--sacct", str(SACCT), "--squeue", str(second), "--export", "slurm"]) == 0
    out = flat(capsys.readouterr().out)
    changes = json.loads((state / "current" / "changes.json").read_text())
    assert changes["since"] == "2026-11-02T00-00-00Z"
    quotas = {p: {q["cluster"]: q["guaranteed_gpus"] for q in v.get("quotas", [])}
              for p, v in changes["projects"].items()}
    assert quotas["p2"]["h100-a"][1] > quotas["p2"]["h100-a"][0]
    assert "changes since 2026-11-02T00-00-00Z" in out and "'p2': h100-a guaranteed" in out
    assert "demand.csv" not in json.dumps(changes)


def test_a_cycle_without_a_queue_warns_how_old_the_hand_written_demand_is(tmp_path, capsys):
    folder = write_scenario(tmp_path / "sc")
    old = 1_700_000_000  # 2023-11-14T22:13:20Z
    os.utime(folder / "demand.csv", (old, old))
    assert main(["cycle", str(folder), "--state", str(tmp_path / "state"), "--as-of",
                 "2026-11-02"]) == 0
    err = flat(capsys.readouterr().err)
    assert "demand.csv is hand-written (last changed 2023-11-14T22:13:20Z" in err
    assert "give --squeue or --kueue to plan from the queue" in err


def test_a_cycle_with_kueue_ingests_usage_and_demand_from_one_file(tmp_path, capsys):
    folder = write_scenario(tmp_path / "sc", demand=None)
    (folder / "org.csv").write_text((folder / "org.csv").read_text() + "P_5,language,1\n")
    assert main(["cycle", str(folder), "--state", str(tmp_path / "state"), "--as-of",
                 "2026-11-02", "--kueue", str(QUEUE)]) == 0
    out = flat(capsys.readouterr().out)
    assert "kueue-queue.json (kueue, now 2026-11-02T00:00:00Z) -> " in out
    assert "demand rows from" in out and "usage.csv" in out
    assert "P_5,a100-b,2026-11-02T00:00:00Z" in (folder / "demand.csv").read_text()


def test_a_second_cycle_or_a_tick_while_one_runs_exits_2_naming_the_holder(tmp_path, capsys):
    folder = write_scenario(tmp_path / "sc")
    state = tmp_path / "state"
    state.mkdir()
    with hold(state, "a planning cycle"):
        assert main(["cycle", str(folder), "--state", str(state), "--as-of",
                     "2026-11-02"]) == 2
        err = flat(capsys.readouterr().err)
        assert f"a planning cycle is in progress by pid {os.getpid()}" in err
        assert main(["tick", "--state", str(state)]) == 2
    assert not any((state / "plans").iterdir())  # no plan kept, nothing half-written
    assert not (state / "current").exists()
    # released (as by a holder that died): the next cycle runs
    assert main(["cycle", str(folder), "--state", str(state), "--as-of", "2026-11-02"]) == 0
    assert main(["tick", "--state", str(state)]) == 0
    assert "exports to neither Slurm nor Kueue" in capsys.readouterr().out


def test_a_bad_queue_file_stops_the_cycle_before_any_ingest_writes(tmp_path, capsys):
    folder = write_scenario(tmp_path / "sc", demand=None)
    usage = (folder / "usage.csv").read_bytes()
    bad = tmp_path / "squeue.txt"
    bad.write_text("1|p1|h100-a|gp-p1|PENDING|Priority|gres/gpu=1|N/A|N/A|N/A|1|1|soon|0:00|"
                   "N/A|\n")
    assert main(["cycle", str(folder), "--state", str(tmp_path / "state"), "--as-of",
                 "2026-11-02", "--sacct", str(SACCT), "--squeue", str(bad)]) == 2
    assert "squeue.txt, row 1, column TimeLimit" in capsys.readouterr().err
    assert (folder / "usage.csv").read_bytes() == usage
    assert not (folder / "demand.csv").exists()
