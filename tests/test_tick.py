"""``planner tick``: the wrapper rule and rule 7 between cycles, by hand and on a real Slurm."""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import yaml

from planner.cli import main
from planner.exporters.slurm import OPPORTUNISTIC_QOS, OVERDRAWN_QOS, SHIPPED, export_slurm
from planner.ingest.squeue import SqueueJob, squeue_text
from planner.locks import hold
from planner.simulate.engine import replay
from planner.simulate.slurm_replay import SlurmReplayPolicy
from planner.tick import (
    BudgetUse,
    budget_admits,
    moved_after,
    parked_after,
    parse_assoc_mgr,
    slurm_moves,
)
from planner.tick_run import ASSOC_MGR, KUBECTL_WORKLOADS, SQUEUE, run_tick
from tests import test_export_slurm
from tests.export_fixtures import ORG, PLAN

# `scontrol show assoc_mgr flags=qos` of Slurm 22.05 (the CI's), trimmed to two QOS
ASSOC_MGR_TEXT = """\
Current Association Manager state

QOS Records

QOS=normal(1)
    UsageRaw=0.000000
    GrpJobs=N(0) GrpJobsAccrue=N(0) GrpSubmitJobs=N(0) GrpWall=N(0.00)
    GrpTRES=cpu=N(0),mem=N(0),energy=N(0),node=N(0),billing=N(0),gres/gpu=N(0)
    GrpTRESMins=cpu=N(0),mem=N(0),energy=N(0),node=N(0),billing=N(0),gres/gpu=N(0)
    GrpTRESRunMins=cpu=N(0),mem=N(0),energy=N(0),node=N(0),billing=N(0),gres/gpu=N(0)
QOS=gp-p1(2)
    UsageRaw=2396.547531
    GrpJobs=N(1) GrpJobsAccrue=N(0) GrpSubmitJobs=N(1) GrpWall=N(29.96)
    GrpTRES=cpu=N(1),mem=N(0),energy=N(0),node=N(1),billing=N(1),gres/gpu=16(2)
    GrpTRESMins=cpu=N(39),mem=N(0),node=N(39),billing=N(39),gres/gpu=100(69)
    GrpTRESRunMins=cpu=N(30),mem=N(0),node=N(30),billing=N(30),gres/gpu=N(60)
    Account Limits
      p1
        MaxTRESPA=cpu=N(1),mem=N(0),node=N(1),billing=N(1),gres/gpu=N(2)
"""


def test_scontrol_assoc_mgr_is_read_per_qos():
    # gp-p1: GrpTRESMins 100 GPU-minutes, 69 used, 60 held by running jobs' limits left:
    # committed (69 + 60) / 60 = 2.15 GPU-hours of a 100 / 60 limit; GrpTRES cap 16, 2 held
    use, problems = parse_assoc_mgr("assoc_mgr", ASSOC_MGR_TEXT)
    assert problems == []
    assert use["gp-p1"] == BudgetUse("gp-p1", 100 / 60, 129 / 60, 16.0, 2.0)
    assert use["normal"] == BudgetUse("normal", None, 0.0, math.inf, 0.0)


def test_a_budget_admits_a_job_while_its_minutes_and_its_cap_hold_it():
    # 10 GPU-hours of budget, 6 committed: a 2-GPU job of 2 h (4) fits exactly, 2 h 1 s
    # does not; under a cap of 8 GPUs with 6 held, 2 GPUs fit and 3 do not
    assert budget_admits(2, 2.0, 10.0, 6.0, math.inf, 0.0)
    assert not budget_admits(2, 2.0 + 1 / 3600, 10.0, 6.0, math.inf, 0.0)
    assert budget_admits(2, 1.0, 10.0, 0.0, 8.0, 6.0)
    assert not budget_admits(3, 1.0, 10.0, 0.0, 8.0, 6.0)


def sq(job_id: str, qos: str, state: str = "PENDING", reason: str = "Priority",
       gpus: int = 1, limit: int | None = 3600, account: str = "p1",
       partition: str = "c1") -> SqueueJob:
    return SqueueJob(job_id, None, account, partition, qos, state, reason, gpus, 1, limit, 0,
                     None)


def test_the_wrapper_rule_by_hand():
    # gp-p1 has 1 GPU-hour left (committed 9 of 10); gp-p2 has none (a spent budget)
    use = {"gp-p1": BudgetUse("gp-p1", 10.0, 9.0, math.inf, 0.0),
           "gp-p2": BudgetUse("gp-p2", 0.0, 0.0, math.inf, 0.0)}
    budget_of = {"p1": "gp-p1", "p2": "gp-p2"}
    jobs = [
        sq("1", "gp-p1"),                                   # 1 GPU-h: fits, stays
        sq("2", "gp-p1", gpus=2),                           # 2 GPU-h > 1 left: out
        sq("3", "gp-p2", reason="QOSGrpGRESMinutes", account="p2"),  # Slurm says so: out
        sq("4", "gp-p1", state="RUNNING", gpus=8),          # running: never touched
        sq("5", OPPORTUNISTIC_QOS),                         # the user's own choice: stays
        sq("6", OPPORTUNISTIC_QOS),                         # moved before, fits now: back
        sq("7", OPPORTUNISTIC_QOS, gpus=4),                 # moved before, 4 > 1: stays
        sq("8", "gp-x", account="x"),                       # no budget QOS in the plan
    ]
    moved = {"6": "gp-p1", "7": "gp-p1", "9": "gp-p1"}  # 9 has left the queue
    moves = slurm_moves(jobs, budget_of, use, moved)
    assert [(m.job_id, m.source, m.target) for m in moves] == [
        ("2", "gp-p1", OPPORTUNISTIC_QOS), ("3", "gp-p2", OPPORTUNISTIC_QOS),
        ("6", OPPORTUNISTIC_QOS, "gp-p1")]
    assert moves[0].command() == "scontrol update JobId=2 QOS=gp-opportunistic"
    assert moved_after(moved, moves, jobs) == {"2": "gp-p1", "3": "gp-p2", "7": "gp-p1"}


def test_rule_8_by_hand_moves_exactly_the_overdrawn_accounts_work_beyond_its_budget():
    # p2 is overdrawn (rule 8), p1 is not; gp-p2 has 1 GPU-hour left (committed 9 of 10),
    # gp-p1 none. Pending jobs, in queue order:
    use = {"gp-p1": BudgetUse("gp-p1", 0.0, 0.0, math.inf, 0.0),
           "gp-p2": BudgetUse("gp-p2", 10.0, 9.0, math.inf, 0.0)}
    budget_of = {"p1": "gp-p1", "p2": "gp-p2"}
    jobs = [
        sq("1", "gp-p2", account="p2"),                    # its budget admits it: stays
        sq("2", "gp-p2", gpus=2, account="p2"),            # beyond its budget: gp-overdrawn
        sq("3", OPPORTUNISTIC_QOS, account="p2"),          # gp-opportunistic: gp-overdrawn
        sq("4", OPPORTUNISTIC_QOS, state="RUNNING", account="p2"),  # running: untouched
        sq("5", OVERDRAWN_QOS, gpus=2, account="p2"),      # there already, 2 > 1: stays
        sq("6", "gp-p1", reason="QOSGrpGRESMinutes"),      # p1 not overdrawn: gp-opportunistic
        sq("7", OVERDRAWN_QOS),                            # p1 no longer overdrawn: back
        sq("8", OVERDRAWN_QOS),                            # ... from gp-p1, still spent: opp.
        sq("9", OVERDRAWN_QOS),                            # the user's own choice: stays
    ]
    parked = {"5": "gp-p2", "7": OPPORTUNISTIC_QOS, "8": "gp-p1"}
    moved = {"7": "gp-p1", "8": "gp-p1"}
    moves = slurm_moves(jobs, budget_of, use, moved, frozenset({"p2"}), parked)
    assert [(m.job_id, m.source, m.target) for m in moves] == [
        ("2", "gp-p2", OVERDRAWN_QOS), ("3", OPPORTUNISTIC_QOS, OVERDRAWN_QOS),
        ("6", "gp-p1", OPPORTUNISTIC_QOS), ("7", OVERDRAWN_QOS, OPPORTUNISTIC_QOS),
        ("8", OVERDRAWN_QOS, OPPORTUNISTIC_QOS)]
    assert moves[0].command() == "scontrol update JobId=2 QOS=gp-overdrawn"
    assert moves[0].why == "its budget does not admit it; its project is overdrawn (rule 8)"
    # the records: where each came from (parked: to return from gp-overdrawn; moved: the
    # budget QOS of allocated work off its budget, which the demand ingest counts)
    assert parked_after(parked, moves, jobs) == {"2": "gp-p2", "3": OPPORTUNISTIC_QOS,
                                                 "5": "gp-p2"}
    assert moved_after(moved, moves, jobs) == {"2": "gp-p2", "6": "gp-p1", "7": "gp-p1",
                                               "8": "gp-p1"}
    # p2's budget admits job 5 once it has 2 GPU-hours more: back to gp-p2
    roomy = {**use, "gp-p2": BudgetUse("gp-p2", 12.0, 9.0, math.inf, 0.0)}
    back = slurm_moves(jobs[4:5], budget_of, roomy, moved, frozenset({"p2"}), parked)
    assert [(m.job_id, m.target, m.why) for m in back] == [
        ("5", "gp-p2", "its budget admits it again")]


def test_rule_8_by_hand_an_overdrawn_account_keeps_its_pace_in_gp_opportunistic():
    # p2 is overdrawn and keeps a pace of 3 NGH per hour; c1's rate is 1, c2's 0.5. Its
    # budget is spent. Running: r (2 GPUs on c2) = 1 NGH per hour. Pending, queue order:
    use = {"gp-p2": BudgetUse("gp-p2", 0.0, 0.0, math.inf, 0.0)}
    budget_of, paces, rates = {"p2": "gp-p2"}, {"p2": 3.0}, {"c1": 1.0, "c2": 0.5}
    jobs = [
        sq("r", OPPORTUNISTIC_QOS, state="RUNNING", gpus=2, account="p2", partition="c2"),
        sq("1", "gp-p2", account="p2"),                     # 1 < 3: gp-opportunistic; 2
        sq("2", OPPORTUNISTIC_QOS, gpus=2, account="p2",    # 2 < 3: stays; counted at the
           partition="c2,c1"),                              # higher of its rates: 4
        sq("3", OPPORTUNISTIC_QOS, account="p2"),           # 4 ≥ 3: gp-overdrawn
        sq("4", OVERDRAWN_QOS, account="p2"),               # parked there: stays
    ]
    parked = {"4": OPPORTUNISTIC_QOS}
    moves = slurm_moves(jobs, budget_of, use, {}, frozenset({"p2"}), parked, paces, rates)
    assert [(m.job_id, m.source, m.target) for m in moves] == [
        ("1", "gp-p2", OPPORTUNISTIC_QOS), ("3", OPPORTUNISTIC_QOS, OVERDRAWN_QOS)]
    assert moves[0].why == ("its budget does not admit it; its overdrawn project runs below "
                            "its pace (rule 8)")
    # the next tick: r ended and 2 runs (on c2: 1 NGH per hour); 1 kept: 2; 3 returns: 3;
    # 4 stays (3 ≥ 3)
    later = [sq("2", OPPORTUNISTIC_QOS, state="RUNNING", gpus=2, account="p2",
                partition="c2"),
             sq("1", OPPORTUNISTIC_QOS, account="p2"), sq("3", OVERDRAWN_QOS, account="p2"),
             sq("4", OVERDRAWN_QOS, account="p2")]
    again = slurm_moves(later, budget_of, use, {"1": "gp-p2"}, frozenset({"p2"}),
                        parked_after(parked, moves, jobs), paces, rates)
    assert [(m.job_id, m.source, m.target, m.why) for m in again] == [
        ("3", OVERDRAWN_QOS, OPPORTUNISTIC_QOS,
         "its overdrawn project runs below its pace (rule 8)")]
    # no pace given: rule 8 as first shipped, everything beyond the budget to gp-overdrawn
    assert [m.target for m in slurm_moves(jobs, budget_of, use, {}, frozenset({"p2"}),
                                          parked)] == [OVERDRAWN_QOS] * 3


def test_a_tick_reads_what_ran_on_no_budget_beside_the_plan_and_moves_the_overdrawn(
        tmp_path):
    # PLAN at as_of 2026-11-16, half the quarter gone: p2 (budget 1500, used 0) is
    # overdrawn from 2250 NGH run. The cycle kept unbudgeted.csv: 16 GPUs on c1 (rate 1)
    # for 150 h = 2400 NGH ≥ 2250. Its pace: 1500 NGH over the quarter's 2208 h, 0.68 NGH
    # per hour. It runs nothing: job 11, beyond its spent budget, keeps its pace in
    # gp-opportunistic (1 GPU on c1: 1 NGH per hour); then 12 goes to gp-overdrawn.
    state = state_with(tmp_path, PLAN, ["slurm"])
    (state / "current" / "inputs" / "unbudgeted.csv").write_text(
        "job_id,project,cluster,gpus,start,end,state\n"
        "slurm:c1:7,p2,c1,16,2026-11-01T00:00:00Z,2026-11-07T06:00:00Z,\n")
    spent = ASSOC_MGR_TEXT + "QOS=gp-p2(3)\n    GrpTRESMins=gres/gpu=0(0)\n"
    fake = Fake([sq("11", "gp-p2", reason="QOSGrpGRESMinutes", account="p2"),
                 sq("12", OPPORTUNISTIC_QOS, account="p2")], spent)
    done = run_tick(state, runner=fake)
    assert [a for a in fake.ran if a[:2] == ["scontrol", "update"]] == [
        ["scontrol", "update", "JobId=11", "QOS=gp-opportunistic"],
        ["scontrol", "update", "JobId=12", "QOS=gp-overdrawn"]]
    record = json.loads((state / "tick.json").read_text())
    assert record["overdrawn"] == {"12": OPPORTUNISTIC_QOS}
    assert record["moved"] == {"11": "gp-p2"}
    assert "  overdrawn (rule 8): p2" in done.lines
    # once 11 runs (p2 at 1 NGH per hour, above its pace), 12 stays where it is
    queue = [replace(fake.queue[0], qos=OPPORTUNISTIC_QOS, state="RUNNING"),
             replace(fake.queue[1], qos=OVERDRAWN_QOS)]
    assert run_tick(state, dry_run=True, runner=Fake(queue, spent)).moves == ()
    # p2 a fifth of its budget past rule 8's line, 1500 × (1 + 0.2 + 0.5) = 2550 NGH: 16
    # GPUs for 160 h = 2560 NGH. Its kept runs overran its pace: it keeps nothing, and 11
    # goes to gp-overdrawn too (running nothing)
    (state / "current" / "inputs" / "unbudgeted.csv").write_text(
        "job_id,project,cluster,gpus,start,end,state\n"
        "slurm:c1:7,p2,c1,16,2026-11-01T00:00:00Z,2026-11-07T16:00:00Z,\n")
    past = run_tick(state, dry_run=True, runner=Fake(fake.queue, spent))
    assert [(m.job_id, m.target) for m in past.moves] == [("11", OVERDRAWN_QOS),
                                                          ("12", OVERDRAWN_QOS)]
    # without the file nobody is overdrawn: the wrapper rule alone
    (state / "current" / "inputs" / "unbudgeted.csv").unlink()
    (state / "tick.json").unlink()
    again = run_tick(state, dry_run=True, runner=Fake(fake.queue, spent))
    assert [(m.job_id, m.target) for m in again.moves] == [("11", OPPORTUNISTIC_QOS)]


def test_the_slurm_replay_decides_with_the_ticks_function(monkeypatch):
    # no second copy: planner-slurm's wrapper rule is planner.tick.budget_admits
    from planner.simulate import slurm_replay
    from tests.test_simulate import trace, two_teams

    calls = []

    def counting(*args):
        calls.append(args)
        return budget_admits(*args)

    monkeypatch.setattr(slurm_replay, "budget_admits", counting)
    sc = two_teams(days=2, budgets=(("a", 40.0), ("b", 0.0)))
    replay(sc, trace([("a1", "a", 0, 4, 8.0, 8.0), ("a2", "a", 0, 1, 8.0, 8.0)]),
           SlurmReplayPolicy(export=replace(SHIPPED, pace="none")))
    assert calls


# -- run_tick on a state folder, with the commands faked -------------------------------------


def _inputs(folder: Path) -> None:
    """The scenario of :data:`ORG` and :data:`PLAN`'s clusters, as a cycle keeps it."""
    from tests.scenario_factory import SCENARIO_TOML, write_scenario

    org = "id,parent,weight\n" + "".join(f"{r.id},{r.parent},{r.weight}\n"
                                         for r in ORG.itertuples())
    write_scenario(folder, scenario=SCENARIO_TOML.replace("A100 = 0.55", "A100 = 0.5"),
                   clusters="cluster,gpu_type,nodes,gpus_per_node\nc1,H100,4,8\nc2,A100,2,8\n",
                   org=org, budgets="project,gpu_hours\np1,2000\np2,1500\n=P 3,500\n",
                   demand="project,cluster,start,end,gpus\n", reservations=None, usage=None)


def state_with(tmp_path: Path, plan: dict, exports: list[str], name: str = "p1") -> Path:
    """A state folder whose current plan is ``plan`` (as planner cycle leaves it)."""
    state = tmp_path / "state"
    folder = state / "plans" / name
    folder.mkdir(parents=True)
    (folder / "plan.json").write_text(json.dumps(plan))
    (folder / "cycle.json").write_text(json.dumps({"as_of": plan["as_of"], "previous": None,
                                                   "exports": exports}))
    _inputs(folder / "inputs")
    link = state / "current"
    if link.is_symlink():
        link.unlink()
    link.symlink_to(f"plans/{name}")
    return state


class Fake:
    """Runs nothing: answers squeue and scontrol show from text, records every command."""

    def __init__(self, queue: list[SqueueJob], assoc: str = ASSOC_MGR_TEXT):
        self.queue, self.assoc, self.ran = queue, assoc, []

    def __call__(self, argv):
        self.ran.append(list(argv))
        out = ""
        if tuple(argv) == SQUEUE:
            out = squeue_text(self.queue)
        elif tuple(argv) == ASSOC_MGR:
            out = self.assoc
        return subprocess.CompletedProcess(argv, 0, out, "")


def test_a_tick_moves_runs_and_records_and_a_dry_run_changes_nothing(tmp_path):
    state = state_with(tmp_path, PLAN, ["slurm"])
    spent = ASSOC_MGR_TEXT + "QOS=gp-p2(3)\n    GrpTRESMins=gres/gpu=0(0)\n"
    fake = Fake([sq("11", "gp-p2", reason="QOSGrpGRESMinutes", account="p2"),
                 sq("12", "gp-p1", state="RUNNING")], spent)
    dry = run_tick(state, dry_run=True, runner=fake)
    assert [m.job_id for m in dry.moves] == ["11"]
    assert [a[0] for a in fake.ran] == ["squeue", "scontrol"]  # reads only
    assert not (state / "tick.json").exists()
    done = run_tick(state, runner=fake)
    assert fake.ran[-1] == ["scontrol", "update", "JobId=11", "QOS=gp-opportunistic"]
    assert json.loads((state / "tick.json").read_text())["moved"] == {"11": "gp-p2"}
    assert "scontrol update JobId=11 QOS=gp-opportunistic  # job of p2: pends on " \
           "QOSGrpGRESMinutes" in "\n".join(done.lines)


def test_a_tick_refuses_a_hostile_queue_and_runs_nothing(tmp_path, capsys):
    state = state_with(tmp_path, PLAN, ["slurm"])
    bad = tmp_path / "squeue.txt"
    bad.write_text(squeue_text([sq("11", "gp-p2", account="p2")]).replace(
        "11|", "$(touch x)|", 1))
    qos = tmp_path / "qos.txt"
    qos.write_text(ASSOC_MGR_TEXT)
    assert main(["tick", "--state", str(state), "--squeue", str(bad), "--qos", str(qos)]) == 2
    err = capsys.readouterr().err
    assert "squeue.txt, row 1, column JobID: '$(touch x)' is not a Slurm job id" in err
    assert not (state / "tick.json").exists() and not (tmp_path / "x").exists()


def test_a_tick_while_a_cycle_holds_the_state_exits_2_naming_it(tmp_path, capsys):
    state = state_with(tmp_path, PLAN, ["slurm"])
    with hold(state, "a planning cycle"):
        assert main(["tick", "--state", str(state), "--dry-run"]) == 2
    assert f"a planning cycle is in progress by pid {os.getpid()}" in capsys.readouterr().err


def workloads_file(path: Path, items: list[dict], cluster: dict[str, str]) -> Path:
    """``kubectl get workloads -o json`` of ``items``, their pods selecting ``cluster``."""
    from planner.exporters.kueue import cluster_selector

    for item in items:
        item["spec"]["podSets"][0]["template"]["spec"]["nodeSelector"] = cluster_selector(
            cluster)
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def test_a_tick_gives_late_kueue_gangs_their_quota_in_the_set_in_force(tmp_path):
    # PLAN with p2 granted 8 GPUs on c1 in the first period: the pool Cohort holds the
    # 32 − 10 (p1) − 8 (p2) = 14 GPUs nobody holds. p1 pends an 8-GPU gang on c1, where the
    # plan gives it quota already; =P 3 one where it has none: rule 7 serves =P 3 only,
    # and a 16-GPU gang would not fit in the pool
    from planner.exporters.files import export_files
    from tests.test_pending import workload

    plan = json.loads(json.dumps(PLAN))
    for a in plan["allocations"]:
        if (a["project"], a["cluster"], a["period_start"]) == ("p2", "c1", PLAN["as_of"]):
            a.update(gpus=8.0, gpu_hours=192.0)
    state = state_with(tmp_path, plan, ["kueue"])
    files = export_files(plan, "kueue", ORG, 1)
    for name, data in files.items():
        (state / "current" / "kueue").mkdir(exist_ok=True)
        (state / "current" / "kueue" / name).write_bytes(data)
    wl = workloads_file(tmp_path / "wl.json", [workload("p1", 1, 8, name="a"),
                                                workload("p-3-8aff7f51", 1, 8, name="b")],
                        {"cluster": "c1", "gpu_type": "H100"})
    fake = Fake([])
    done = run_tick(state, workloads=wl, runner=fake)
    assert done.late == (("=P 3", "c1", 8),)
    (name,) = [n for n in files if n.startswith("kueue-")]
    assert fake.ran == [["kubectl", "apply", "-f", str(state / "tick" / name)]]
    widened = list(yaml.safe_load_all((state / "tick" / name).read_text()))
    again = run_tick(state, workloads=wl, runner=Fake([]))
    assert again.late == ()  # served already: its quota stands in the tick's set
    assert list(yaml.safe_load_all((state / "tick" / name).read_text())) == widened
    assert KUBECTL_WORKLOADS[0] == "kubectl"


def test_a_tick_reads_the_kept_inputs_once_for_kueue_and_rule_8(tmp_path, monkeypatch):
    # a cycle that exported to both: the scenario (the Kueue set in force is checked
    # against it) and unbudgeted.csv (rule 8 under Slurm) come from one read of inputs/
    # (two before: the Kueue step's scenario, and the file checked against a second read);
    # the moves are the Slurm-only tick's above (p2 overdrawn from 2,400 NGH run)
    from planner.exporters.files import export_files
    from tests.test_explain import counted_reads

    state = state_with(tmp_path, PLAN, ["slurm", "kueue"])
    inputs = state / "plans" / "p1" / "inputs"  # current/inputs, as the cycle resolves it
    (inputs / "unbudgeted.csv").write_text(
        "job_id,project,cluster,gpus,start,end,state\n"
        "slurm:c1:7,p2,c1,16,2026-11-01T00:00:00Z,2026-11-07T06:00:00Z,\n")
    (state / "current" / "kueue").mkdir()
    for name, data in export_files(PLAN, "kueue", ORG, 1).items():
        (state / "current" / "kueue" / name).write_bytes(data)
    wl = workloads_file(tmp_path / "wl.json", [], {})
    spent = ASSOC_MGR_TEXT + "QOS=gp-p2(3)\n    GrpTRESMins=gres/gpu=0(0)\n"
    fake = Fake([sq("11", "gp-p2", reason="QOSGrpGRESMinutes", account="p2"),
                 sq("12", OPPORTUNISTIC_QOS, account="p2")], spent)
    reads = counted_reads(monkeypatch)
    done = run_tick(state, workloads=wl, dry_run=True, runner=fake)
    assert reads == [inputs]
    assert [(m.job_id, m.target) for m in done.moves] == [("11", OPPORTUNISTIC_QOS),
                                                          ("12", OVERDRAWN_QOS)]
    assert "  overdrawn (rule 8): p2" in done.lines and done.late == ()
    # Slurm alone reads the file only (as before): no read at all without it
    reads.clear()
    slurm_only = state_with(tmp_path / "s", PLAN, ["slurm"])
    assert run_tick(slurm_only, dry_run=True, runner=Fake(fake.queue, spent)).moves
    assert reads == []


# -- the real Slurm ---------------------------------------------------------------------------


real_slurm = test_export_slurm.real_slurm  # the same fixture: a Slurm 22.05 for this module


def _jobs(slurm, *ids: str) -> dict[str, dict[str, str]]:
    from tests.real_slurm import parse_records

    out = {}
    for job_id in ids:
        out[job_id] = parse_records(slurm.run("scontrol", "show", "job", "-o", job_id).stdout)[0]
    return out


def test_real_slurm_tick_moves_a_job_off_a_spent_budget_and_back_after_a_replan(
        real_slurm, tmp_path):
    """The wrapper rule on Slurm 22.05: ``planner tick`` runs squeue and scontrol itself.

    p2 has spent its budget (``GrpTRESMins=gres/gpu=0``). A p1 budget job holds all of
    c1n4 (8 GPUs, ``sleep 300``). p2 submits ``small`` (1 GPU) and ``wide`` (8 GPUs on
    c1n4) under its budget QOS: both pend on ``QOSGrpGRESMinutes``. The tick moves both to
    ``gp-opportunistic``: ``small`` runs on idle GPUs; ``wide`` still waits for c1n4 (an
    opportunistic job cannot take a budget job's node). A replan gives p2 its budget back
    (used 0): the next tick returns ``wide`` to gp-p2, leaves the running ``small`` and
    p1's job as they were.
    """
    from tests.test_export_slurm import _allow_root, _sbatch, future_plan

    plan = future_plan()
    p2 = next(b for b in plan["budgets"] if b["project"] == "p2")
    p2["used"] = p2["budget"]
    real_slurm.bash(export_slurm(plan, ORG))
    _allow_root(real_slurm, "p1", "p2")
    state = state_with(tmp_path, plan, ["slurm"], "first")
    runner = lambda argv: real_slurm.run(*argv, check=False)  # noqa: E731
    jobs: list[str] = []
    try:
        busy = _sbatch(real_slurm, "-A", "p1", "-w", "c1n4", "--gres=gpu:8", "--wrap",
                       "sleep 300")
        jobs.append(busy)
        until_state(real_slurm, busy, "RUNNING")
        small = _sbatch(real_slurm, "-A", "p2", "--gres=gpu:1", "--wrap", "sleep 300")
        wide = _sbatch(real_slurm, "-A", "p2", "-w", "c1n4", "--gres=gpu:8", "--wrap", "true")
        jobs += [small, wide]
        for job_id in (small, wide):
            until_reason(real_slurm, job_id, "QOSGrpGRESMinutes")
        first = run_tick(state, runner=runner)
        assert sorted((m.job_id, m.target) for m in first.moves) == sorted(
            [(small, OPPORTUNISTIC_QOS), (wide, OPPORTUNISTIC_QOS)])
        until_state(real_slurm, small, "RUNNING")
        now = _jobs(real_slurm, busy, small, wide)
        assert now[small]["QOS"] == OPPORTUNISTIC_QOS and now[wide]["QOS"] == OPPORTUNISTIC_QOS
        assert (now[wide]["JobState"], now[busy]["QOS"]) == ("PENDING", "gp-p1")
        # the replan: p2 has its budget back
        again = json.loads(json.dumps(plan))
        next(b for b in again["budgets"] if b["project"] == "p2")["used"] = 0.0
        real_slurm.bash(export_slurm(again, ORG, previous=plan))
        state_with(tmp_path, again, ["slurm"], "second")
        second = run_tick(state, runner=runner)
        assert [(m.job_id, m.target) for m in second.moves] == [(wide, "gp-p2")]
        after = _jobs(real_slurm, busy, small, wide)
        assert after[wide]["QOS"] == "gp-p2" and after[wide]["JobState"] == "PENDING"
        assert after[small]["QOS"] == OPPORTUNISTIC_QOS  # running: never touched
        assert after[small]["JobState"] == "RUNNING"
        assert after[busy]["QOS"] == "gp-p1" and after[busy]["JobState"] == "RUNNING"
        assert json.loads((state / "tick.json").read_text())["moved"] == {small: "gp-p2"}
        # a third tick has nothing to do
        assert run_tick(state, runner=runner).moves == ()
    finally:
        if jobs:
            real_slurm.run("scancel", *jobs, check=False)


def test_real_slurm_tick_keeps_an_overdrawn_accounts_pace_and_parks_the_rest(
        real_slurm, tmp_path):
    """Rule 8's pace on Slurm 22.05: ``planner tick`` runs squeue and scontrol itself.

    p2 has run 2,300 NGH on its 1,500 half-way through the quarter (2,250 makes it
    overdrawn) and spent its budget (``GrpTRESMins=gres/gpu=0``). Its pace is 1,500 NGH
    over the quarter's 2,208 h: 0.68 NGH per hour; c1's rate is 1, so one 1-GPU job on
    c1 runs 1 NGH per hour. p2 submits ``a`` and ``b`` (1 GPU each) under gp-p2: both
    pend on ``QOSGrpGRESMinutes``. Tick 1: p2 runs nothing (0 < 0.68), so the first in
    squeue's order stays in gp-opportunistic, counted as kept (1 ≥ 0.68), and the other
    goes to gp-overdrawn; both then run on idle GPUs. A user submits ``c`` (held) under
    gp-opportunistic; tick 2: p2 runs 2 NGH per hour, so ``c`` goes to gp-overdrawn.
    Once ``a`` and ``b`` are cancelled p2 runs nothing: tick 3 returns ``c`` to
    gp-opportunistic.
    """
    from tests.test_export_slurm import _allow_root, _sbatch, future_plan

    plan = future_plan()
    next(b for b in plan["budgets"] if b["project"] == "p2")["used"] = 2300.0
    real_slurm.bash(export_slurm(plan, ORG))
    _allow_root(real_slurm, "p1", "p2")
    state = state_with(tmp_path, plan, ["slurm"], "first")
    runner = lambda argv: real_slurm.run(*argv, check=False)  # noqa: E731
    below = "its overdrawn project runs below its pace (rule 8)"
    jobs: list[str] = []
    try:
        a = _sbatch(real_slurm, "-A", "p2", "--gres=gpu:1", "--wrap", "sleep 300")
        b = _sbatch(real_slurm, "-A", "p2", "--gres=gpu:1", "--wrap", "sleep 300")
        jobs += [a, b]
        for job_id in (a, b):
            until_reason(real_slurm, job_id, "QOSGrpGRESMinutes")
        first = run_tick(state, runner=runner)
        assert "  overdrawn (rule 8): p2" in first.lines
        kept, parked = first.moves  # squeue's order decides which one is kept
        assert {kept.job_id, parked.job_id} == {a, b}
        assert (kept.source, kept.target, kept.why) == (
            "gp-p2", OPPORTUNISTIC_QOS, f"pends on QOSGrpGRESMinutes; {below}")
        assert (parked.source, parked.target, parked.why) == (
            "gp-p2", OVERDRAWN_QOS, "pends on QOSGrpGRESMinutes; its project is overdrawn "
            "(rule 8)")
        for job_id in (a, b):
            until_state(real_slurm, job_id, "RUNNING")  # idle GPUs: gp-overdrawn runs too
        now = _jobs(real_slurm, a, b)
        assert now[kept.job_id]["QOS"] == OPPORTUNISTIC_QOS
        assert now[parked.job_id]["QOS"] == OVERDRAWN_QOS
        c = _sbatch(real_slurm, "-A", "p2", f"--qos={OPPORTUNISTIC_QOS}", "--hold",
                    "--gres=gpu:1", "--wrap", "true")
        jobs.append(c)
        second = run_tick(state, runner=runner)
        assert [(m.job_id, m.source, m.target, m.why) for m in second.moves] == [
            (c, OPPORTUNISTIC_QOS, OVERDRAWN_QOS, "its project is overdrawn (rule 8)")]
        assert _jobs(real_slurm, c)[c]["QOS"] == OVERDRAWN_QOS
        real_slurm.run("scancel", a, b)
        for job_id in (a, b):
            until_state(real_slurm, job_id, "CANCELLED")
        third = run_tick(state, runner=runner)
        assert [(m.job_id, m.source, m.target, m.why) for m in third.moves] == [
            (c, OVERDRAWN_QOS, OPPORTUNISTIC_QOS, below)]
        assert _jobs(real_slurm, c)[c]["QOS"] == OPPORTUNISTIC_QOS
        assert run_tick(state, runner=runner).moves == ()  # kept: it counts, nothing to do
    finally:
        if jobs:
            real_slurm.run("scancel", *jobs, check=False)


def until_state(slurm, job_id: str, state: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _jobs(slurm, job_id)[job_id]["JobState"] == state:
            return
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} not {state} within {timeout} s: {_jobs(slurm, job_id)}")


def until_reason(slurm, job_id: str, reason: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _jobs(slurm, job_id)[job_id].get("Reason") == reason:
            return
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} not pending on {reason}: {_jobs(slurm, job_id)}")
