"""Slurm apply script: guarded commands, counts on a replan, the plan's numbers."""

from __future__ import annotations

import copy
import json
import math
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from planner.cli import main
from planner.contract import ahead_of_pace
from planner.exporters.slurm import (
    OPPORTUNISTIC_QOS,
    OVERDRAWN_QOS,
    RESV_UPDATE,
    SLURM_CONF_LINES,
    WIDE_CAP,
    account,
    budget_minutes,
    budget_shares,
    description,
    export_slurm,
    opportunistic_settings,
    pace_gpus,
    qos_name,
    reservation_name,
    slurm_state,
    take_back,
)
from planner.inputs.org import OrgTree
from tests.export_fixtures import D2, D3, ORG, PLAN, plan_copy
from tests.real_slurm import until
from tests.scenario_factory import write_scenario
from tests.system import REQUIRED, need

PREAMBLE = ("set -eu", "export TZ=UTC", "dry_run=", "case ", "run() ", "resv_has() ", "now=")


def commands(script: str) -> list[str]:
    """The script's commands: its lines but comments, the preamble and its functions' bodies."""
    return [line for line in script.splitlines() if line and not line.startswith("#")
            and not line.startswith(PREAMBLE) and line not in RESV_UPDATE
            and line not in WIDE_CAP]


WIDE = "cap=$(wide_cap "  # a widening pace cap: in every script, read from the queue


def changes(script: str) -> list[str]:
    """:func:`commands` but the widening caps, which every script carries (its changes)."""
    return [line for line in commands(script) if not line.startswith(WIDE)]


def wide_line(project: str, cap: int) -> str:
    """The script's line that sets a widening budget QOS's ``GrpTRES`` when it runs."""
    acct, q = account(project), f"gp-{account(project)}"
    return (f"cap=$(wide_cap {acct} {cap}) && {{ sacctmgr -n -P show qos {q} format=grptres "
            f"| grep -qx \"gres/gpu=$cap\" || run sacctmgr -i modify qos {q} set "
            f"\"GrpTRES=gres/gpu=$cap\"; }}")


def test_full_script_sets_accounts_budgets_and_reservations():
    script = export_slurm(PLAN, ORG)
    lines = commands(script)
    # 6 org nodes x (guarded add, parent, share); the overdrawn and the opportunistic QOS
    # (add, settings, each); 3 projects x (qos add, priority preempt and flags, limit,
    # attach, the pace cap read from the queue: every project widens, nobody being ahead
    # of pace in PLAN); 2 reservations
    assert len(lines) == 6 * 3 + 2 + 2 + 3 * 5 + 2
    assert "sacctmgr -n show account team-a | grep -q . || run sacctmgr -i add account team-a " \
           "parent=area fairshare=3500" in script
    # fairshare: the budgets (NGH) summed under each account: p1 2000, team-a 2000 + 1500
    assert budget_shares(PLAN, OrgTree.from_frame(ORG)) == {
        "area": 4000, "team-a": 3500, "team-b": 500, "p1": 2000, "p2": 1500, "=P 3": 500}
    # parent and share are guarded and set apart (sacctmgr 22.05 exits 1, "Nothing
    # modified", on a parent= that changes nothing even if fairshare= would change)
    assert "sacctmgr -n -P show assoc account=p1 format=user,parentname | grep -qx " \
           "'|team-a' || run sacctmgr -i modify account p1 set parent=team-a" in script
    assert "sacctmgr -n -P show assoc account=p1 format=user,share | grep -qx " \
           "'|2000' || run sacctmgr -i modify account p1 set fairshare=2000" in script
    # p1: 1900 NGH left; planned raw 732 (c1, rate 1) + 192 (r1 on c2, rate .5) GPU-h for
    # 732 + 96 NGH -> 1900 * 924 / 828 * 60 = 127217.39 GPU-minutes
    assert budget_minutes(PLAN)["p1"] == 127217
    assert "sacctmgr -n -P show qos gp-p1 format=grptresmins | grep -qx gres/gpu=127217 " \
           "|| { run sacctmgr -i modify qos gp-p1 set GrpTRESMins=gres/gpu=127217 && " \
           "run sacctmgr -i modify qos gp-p1 set RawUsage=0; }" in script
    assert "run sacctmgr -i modify account p1 set qos+=gp-p1,gp-opportunistic,gp-overdrawn " \
           "DefaultQOS=gp-p1" in script
    # guaranteed work preempts opportunistic work and goes first; the shared QOS is bound by no
    # budget (no GrpTRESMins), adds no usage and is requeued when preempted
    # and their GPU-minutes count undecayed (Flags=NoDecay)
    # (nobody is ahead of pace in PLAN, so no budget QOS takes back from another: below);
    # its jobs are protected for the contract's 8 h before a QOS that takes back may requeue
    assert "sacctmgr -n -P show qos gp-p1 format=priority,preempt,flags,preemptmode," \
           "preemptexempttime | grep -qx '100|gp-opportunistic,gp-overdrawn|NoDecay|requeue|" \
           "08:00:00' || run sacctmgr -i modify qos gp-p1 set Priority=100 " \
           "Preempt=gp-opportunistic,gp-overdrawn Flags=NoDecay PreemptMode=requeue " \
           "PreemptExemptTime=08:00:00" in lines
    # every budget QOS is added before any is set (a Preempt list names other budget QOS)
    adds = [i for i, line in enumerate(lines) if " add qos gp-p" in line]
    sets = [i for i, line in enumerate(lines) if " modify qos gp-p" in line]
    assert len(adds) == 3 and max(adds) < min(sets)
    # the pace cap: GPUs the budget QOS's jobs hold at once, the first period's ⌊g + o⌋
    # summed over clusters plus the reservations in force in it. p1: ⌊10.5 + 4.75⌋ on c1 +
    # r1's node of 8 on c2 = 23; p2: ⌊16.75⌋ = 16 (r2 starts after the first period); =P 3: 8
    assert pace_gpus(PLAN) == {"p1": 23, "p2": 16, "=P 3": 8}
    assert pace_gpus(PLAN, "guaranteed") == {"p1": 18, "p2": 16, "=P 3": 8}  # ⌊10.5⌋ + 8
    # set when the script runs: 23, or the GPUs of p1's widest pending job where more
    assert wide_line("p1", 23) in lines
    assert not any("GrpTRES=gres/gpu=23" in line for line in lines)
    # rule 8: gp-overdrawn first (gp-opportunistic's Preempt names it), priority 0, no
    # exempt time; gp-opportunistic's priority 11 puts its jobs above every gp-overdrawn
    # one whatever their fair share (100000 x 11 / 100 = 11000 > PriorityWeightFairshare)
    assert lines[18:22] == [
        "sacctmgr -n show qos gp-overdrawn | grep -q . || run sacctmgr -i add qos gp-overdrawn",
        "sacctmgr -n -P show qos gp-overdrawn "
        "format=priority,preemptmode,usagefactor,preemptexempttime,preempt | "
        "grep -qx '0|requeue|1.000000|00:00:00|' || run sacctmgr -i modify qos gp-overdrawn "
        "set Priority=0 PreemptMode=requeue UsageFactor=1 PreemptExemptTime=00:00:00",
        "sacctmgr -n show qos gp-opportunistic | grep -q . || "
        "run sacctmgr -i add qos gp-opportunistic",
        "sacctmgr -n -P show qos gp-opportunistic "
        "format=priority,preemptmode,usagefactor,preemptexempttime,preempt | "
        "grep -qx '11|requeue|1.000000|08:00:00|gp-overdrawn' || run sacctmgr -i modify qos "
        "gp-opportunistic set Preempt=gp-overdrawn Priority=11 PreemptMode=requeue "
        "UsageFactor=1 PreemptExemptTime=08:00:00"]
    # an opportunistic job runs at least the contract's protected minimum runtime
    # (min_runtime_cap_hours, 8 h in PLAN) before a budget job may requeue it
    assert "GrpTRESMins" not in " ".join(lines[18:22])
    # what slurm.conf must hold is in the header, as comments
    header = script[:script.index("set -eu")]
    assert "# slurm.conf must have" in header
    for conf in ("PreemptType=preempt/qos", "PreemptMode=REQUEUE", "PriorityWeightQOS=",
                 "AccountingStorageEnforce=associations,limits,qos", "GresTypes=gpu",
                 "AccountingStorageTRES=gres/gpu",
                 "AccountingStorageType=accounting_storage/slurmdbd"):
        assert f"#   {conf}" in header and any(c.startswith(conf) for c in SLURM_CONF_LINES)
    assert budget_minutes(PLAN)["=P 3"] == 450 * 2 * 60
    assert "#   partition c1: 4 nodes, Gres=gpu:8 each" in header
    r1 = next(line for line in lines if "ReservationName=gp-r1 " in line and "create" in line)
    assert "StartTime=2026-11-16T00:00:00 Duration=1-00:00:00 Accounts=p1 NodeCnt=1 " \
           "PartitionName=c2 Flags=IGNORE_JOBS" in r1


def test_the_pace_cap_is_at_least_a_node_while_a_budget_has_minutes_left():
    # PLAN's first period, with p2 granted 1.5 guaranteed GPUs and =P 3 nothing: ⌊1.5⌋ = 1
    # and 0 without the floor; with it (shipped) each may hold one node's GPUs (8: both
    # clusters have 8 per node), as both have budget left. p1 (23) is above the floor.
    plan = plan_copy()
    first = plan["periods"][0]["start"]
    for a in plan["allocations"]:
        if a["period_start"] == first and a["project"] == "p2":
            a.update(gpus=1.5 if a["kind"] == "guaranteed" else 0.0, gpu_hours=36.0)
    plan["allocations"] = [a for a in plan["allocations"]
                           if not (a["period_start"] == first and a["project"] == "=P 3")]
    assert pace_gpus(plan, floor="none") == {"p1": 23, "p2": 1, "=P 3": 0}
    assert pace_gpus(plan) == {"p1": 23, "p2": 8, "=P 3": 8}
    assert wide_line("=P 3", 8) in commands(export_slurm(plan, ORG))
    # a spent budget (GrpTRESMins 0) gets no floor: its cap is the grant alone
    for b in plan["budgets"]:
        if b["project"] == "=P 3":
            b["used"] = b["budget"]
    assert budget_minutes(plan)["=P 3"] == 0
    assert pace_gpus(plan)["=P 3"] == 0
    with pytest.raises(ValueError, match="floor"):
        pace_gpus(plan, floor="half")


def test_every_create_is_guarded_so_rerunning_converges():
    for line in commands(export_slurm(PLAN, ORG)):
        if " add " in line:
            assert re.match(r"sacctmgr -n show (account|qos) (\S+) \| grep -q \. \|\| "
                            r"run sacctmgr -i add \1 \2( |$)", line), line
        elif any(f"set {key}=" in line
                 for key in ("parent", "fairshare", "GrpTRESMins", "GrpTRES", "Priority",
                             "Preempt")):
            # a modify that changes nothing exits 1 under set -e: only where values differ
            assert re.match(r"sacctmgr -n -P show (assoc account=|qos )(\S+) format=\S+ \| "
                            r"grep -qx ('[^']+'|\S+) \|\| \{? ?run sacctmgr -i modify "
                            r"(account|qos) \2 ", line), line
        elif line.startswith(WIDE):  # a widening cap, also set only where it differs
            assert re.fullmatch(r"cap=\$\(wide_cap (\S+) \d+\) && \{ sacctmgr -n -P show qos "
                                r"gp-\1 format=grptres \| grep -qx \"gres/gpu=\$cap\" \|\| run "
                                r"sacctmgr -i modify qos gp-\1 set \"GrpTRES=gres/gpu=\$cap\"; \}",
                                line), line
        elif "scontrol create" in line:
            name = re.search(r"create reservation ReservationName=(\S+)", line).group(1)
            assert name.startswith("gp-")  # never a site's own reservation
            # both branches ($now before its start or not) look before they create
            assert line.startswith("if [[ $now < ")
            assert line.count(f"if resv_has {name} ReservationName={name}; then ") == 2
            # and update only where it differs: a move through resv_update (which finds
            # free nodes where its own are taken), a running one's end in place
            assert line.count(f" || resv_update {name} ") == 1
            assert line.count(f" || run scontrol update ReservationName={name} ") == 1
        else:  # the QOS attach: only where the account lacks a QOS or its default differs
            acct = re.search(r"run sacctmgr -i modify account (\S+) set qos\+=", line).group(1)
            assert line.startswith(f"sacctmgr -n -P show assoc account={acct} "
                                   "format=user,defaultqos,qos | grep -Eqx "), line
            assert line.count("grep -Eqx") == 3 and line.count(" || run ") == 1


def test_replan_with_one_moved_reservation_updates_only_that_one():
    moved = plan_copy()
    moved["reservations"][1].update(start=D3, end="2026-11-19T00:00:00Z")
    script = export_slurm(moved, ORG, previous=PLAN)
    lines = changes(script)
    assert len(lines) == 1
    assert "ReservationName=gp-r2 StartTime=2026-11-18T00:00:00 Duration=1-00:00:00" in lines[0]
    # no account or QOS line but the caps read from the queue, which every script carries
    assert [line for line in commands(script) if "sacctmgr" in line] == [
        wide_line(p, cap) for p, cap in (("=P 3", 8), ("p1", 23), ("p2", 16))]


def test_replan_deletes_dropped_creates_new_and_reports_changed_limits():
    after = plan_copy()
    after["reservations"] = [after["reservations"][0] | {"request_id": "r9"},
                             after["reservations"][1]]
    after["budgets"][0]["used"] = 200.0
    lines = changes(export_slurm(after, ORG, previous=PLAN))
    assert [line for line in lines if "scontrol delete" in line] == [
        "if resv_has gp-r1 ReservationName=gp-r1; then "
        "run scontrol delete ReservationName=gp-r1; fi"]
    assert sum("ReservationName=gp-r9" in line for line in lines) == 1
    # the reservations, the guarded opportunistic QOS (p1's Preempt names it), p1's QOS block
    # (add, priority and preemption, limit, attach; its cap is among the widening lines)
    assert sum("qos gp-p1" in line for line in lines) == 3
    assert sum(OPPORTUNISTIC_QOS in line for line in lines) == 2 + 2
    assert len(lines) == 2 + 2 + 2 + 4  # and gp-overdrawn's two lines (rule 8)
    assert changes(export_slurm(PLAN, ORG, previous=PLAN)) == []


def test_projects_behind_their_pace_take_back_from_those_ahead():
    # The executor contract's rule 5. PLAN's as_of (16 Nov) is 46 of the quarter's 92 days:
    # a project is ahead when it has used more than half its budget. p1 at 1200 of 2000 is;
    # p2 (0 of 1500) and =P 3 (50 of 500) are not, so their budget QOS list gp-p1 in Preempt
    # (after gp-opportunistic, sorted as sacctmgr prints it) and p1's lists
    # gp-opportunistic alone; every budget QOS has the protected runtime (8 h) as exempt time.
    ahead = plan_copy()
    ahead["budgets"][0]["used"] = 1200.0
    assert ahead_of_pace(ahead) == {"p1"} and ahead_of_pace(PLAN) == frozenset()
    assert take_back(ahead, ["p1", "p2", "=P 3"]) == {
        "p1": (), "p2": ("gp-p1",), "=P 3": ("gp-p1",)}
    lines = commands(export_slurm(ahead, ORG))
    assert "sacctmgr -n -P show qos gp-p2 format=priority,preempt,flags,preemptmode," \
           "preemptexempttime | grep -qx '100|gp-opportunistic,gp-overdrawn,gp-p1|NoDecay|" \
           "requeue|08:00:00' || run sacctmgr -i modify qos gp-p2 set Priority=100 " \
           "Preempt=gp-opportunistic,gp-overdrawn,gp-p1 Flags=NoDecay PreemptMode=requeue " \
           "PreemptExemptTime=08:00:00" in lines
    assert any("modify qos gp-p-3-8aff7f51 set Priority=100 "
               "Preempt=gp-opportunistic,gp-overdrawn,gp-p1 " in line for line in lines)
    assert any("modify qos gp-p1 set Priority=100 Preempt=gp-opportunistic,gp-overdrawn Flags"
               in line for line in lines)
    # exactly at pace is not ahead: 1000 of 2000 at half the quarter
    even = plan_copy()
    even["budgets"][0]["used"] = 1000.0
    assert ahead_of_pace(even) == frozenset()
    # a replan in which p1 falls ahead touches the QOS whose Preempt changes, p2's and =P 3's
    # (their limits are the same), and p1's (its limit changed with its usage): every one
    # added before any is set
    changed = commands(export_slurm(ahead, ORG, previous=PLAN))
    added = [line.split()[-1] for line in changed if " add qos gp-" in line]
    assert added == [OVERDRAWN_QOS, OPPORTUNISTIC_QOS, "gp-p-3-8aff7f51", "gp-p1", "gp-p2"]
    first_set = min(i for i, line in enumerate(changed) if " modify qos gp-p" in line)
    assert max(i for i, line in enumerate(changed) if " add qos gp-p" in line) < first_set
    # without taking back (the export measured before), every budget QOS preempts
    # gp-opportunistic (and gp-overdrawn, rule 8) alone
    assert {b.preempt_list for b in slurm_state(ahead, ORG, takes_back=False).budgets} == {
        "gp-opportunistic,gp-overdrawn"}


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_take_back_lists_apply_and_converge_with_a_hashed_qos_name(tmp_path):
    # =P 3 (an id that is no DNS label: its QOS name carries a digest) at 400 of 500 NGH
    # half-way through the quarter is ahead; p1 and p2 list its QOS. The script applies on
    # the fake Slurm (which refuses a Preempt naming a QOS it lacks and prints lists
    # sorted), and a second apply changes nothing.
    ahead = plan_copy()
    ahead["budgets"][2]["used"] = 400.0
    assert ahead_of_pace(ahead) == {"=P 3"}
    slurm = FakeSlurm(tmp_path / "a")
    once = slurm.apply(export_slurm(ahead, ORG))
    assert once["qos"]["gp-p1"]["preempt"] == "gp-opportunistic,gp-overdrawn,gp-p-3-8aff7f51"
    assert once["qos"]["gp-p2"]["preempt"] == "gp-opportunistic,gp-overdrawn,gp-p-3-8aff7f51"
    assert once["qos"]["gp-p-3-8aff7f51"]["preempt"] == "gp-opportunistic,gp-overdrawn"
    assert slurm.apply(export_slurm(ahead, ORG)) == once
    # the replan that follows from PLAN's state lands where a fresh apply does
    fresh = FakeSlurm(tmp_path / "b")
    fresh.apply(export_slurm(PLAN, ORG))
    assert fresh.apply(export_slurm(ahead, ORG, previous=PLAN))["qos"] == once["qos"]


def test_replan_with_a_changed_org_or_budget_touches_only_changed_accounts():
    # shares come from the budgets: a new org weight changes no account, a moved project
    # changes its own parent and the shares of the subtrees it left and joined
    org = ORG.copy()
    org.loc[org["id"] == "p2", "weight"] = 4.0
    assert changes(export_slurm(PLAN, org, previous=PLAN, previous_org=ORG)) == []
    org.loc[org["id"] == "p2", "parent"] = "team-b"
    lines = changes(export_slurm(PLAN, org, previous=PLAN, previous_org=ORG))
    # each changed account: its guarded add, then parent and share, each guarded apart
    assert [line.split()[4] for line in lines if line.startswith("sacctmgr -n show account")] \
        == ["team-a", "team-b", "p2"]
    assert len(lines) == 3 * 3
    assert "sacctmgr -n -P show assoc account=p2 format=user,parentname | grep -qx " \
           "'|team-b' || run sacctmgr -i modify account p2 set parent=team-b" in lines
    assert "sacctmgr -n -P show assoc account=team-b format=user,share | grep -qx " \
           "'|2000' || run sacctmgr -i modify account team-b set fairshare=2000" in lines
    # a budget that grows (a new quarter's budgets, say) reshares p1's line up to the top
    bigger = plan_copy()
    bigger["budgets"][0]["budget"] = 3000.0
    changed = [line.split()[4] for line in commands(export_slurm(bigger, ORG, previous=PLAN))
               if line.startswith("sacctmgr -n show account ")]
    assert changed == ["area", "team-a", "p1"]


def test_running_reservation_only_moves_its_end():
    running = plan_copy()
    running["as_of"] = "2026-11-16T12:00:00Z"
    line = next(line for line in commands(export_slurm(running, ORG)) if "gp-r1 " in line)
    assert line.startswith("if resv_has gp-r1 ")  # no $now test: it runs
    assert "scontrol update ReservationName=gp-r1 EndTime=2026-11-17T00:00:00 " in line
    assert "StartTime=now EndTime=2026-11-17T00:00:00" in line
    assert D2 == "2026-11-17T00:00:00Z"
    # a future one is decided when the script runs: its start may have passed by then
    line = next(line for line in commands(export_slurm(running, ORG)) if "gp-r2 " in line)
    assert line.startswith("if [[ $now < 2026-11-17T00:00:00 ]]; then if resv_has gp-r2 ")
    assert "else if resv_has gp-r2 " in line


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_script_is_valid_bash():
    script = export_slurm(PLAN, ORG)
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)


class FakeSlurm:
    """Runs apply scripts against tests/fake_slurm.py put first on PATH."""

    def __init__(self, root, partitions: list[str] | None = None):
        import os
        import sys
        from pathlib import Path

        self.bin = root / "bin"
        self.bin.mkdir(parents=True)
        fake = Path(__file__).with_name("fake_slurm.py")
        for tool in ("sacctmgr", "scontrol"):
            wrapper = self.bin / tool
            wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{fake}" {tool} "$@"\n')
            wrapper.chmod(0o755)
        # the script's clock ($now), before the fixture plan's first reservation by default
        (self.bin / "date").write_text('#!/bin/sh\necho "$FAKE_SLURM_NOW"\n')
        (self.bin / "date").chmod(0o755)
        self.state, self.log = root / "state.json", root / "calls.log"
        self.env = {**os.environ, "PATH": f"{self.bin}:{os.environ['PATH']}",
                    "FAKE_SLURM_STATE": str(self.state), "FAKE_SLURM_LOG": str(self.log),
                    "FAKE_SLURM_NOW": "2026-11-15T12:00:00",
                    # the partitions slurm.conf defines: PLAN's clusters
                    "FAKE_SLURM_PARTITIONS": json.dumps(
                        partitions or [c["cluster"] for c in PLAN["clusters"]])}

    def apply(self, script: str, now: str | None = None, *args: str) -> dict:
        """Run ``script`` with bash (``args`` its arguments); the fake's state afterwards."""
        import json

        self.output = self.run(script, now, *args).stdout
        return json.loads(self.state.read_text()) if self.state.exists() else {}

    def run(self, script: str, now: str | None = None, *args: str
            ) -> subprocess.CompletedProcess:
        """Run ``script`` with bash and ``args``; it must succeed."""
        env = self.env if now is None else {**self.env, "FAKE_SLURM_NOW": now}
        done = subprocess.run(["bash", "-s", "--", *args], input=script, text=True, env=env,
                              capture_output=True)
        assert done.returncode == 0, done.stderr
        return done

    def argvs(self) -> list[list[str]]:
        """Every call the fake got, as its argument list (tool first)."""
        import json

        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def calls(self, prefix: str) -> int:
        return sum(" ".join(argv).startswith(prefix) for argv in self.argvs())


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_applying_twice_converges_and_a_replan_lands_where_a_fresh_apply_does(tmp_path):
    slurm = FakeSlurm(tmp_path / "a")
    once = slurm.apply(export_slurm(PLAN, ORG))
    assert set(once["account"]) == {"area", "team-a", "team-b", "p1", "p2",
                                    "p-3-8aff7f51"}
    assert once["account"]["p1"] == {"parent": "team-a", "fairshare": "2000",
                                     "description": "org:p1",
                                     "qos": "gp-opportunistic,gp-overdrawn,gp-p1",
                                     "defaultqos": "gp-p1"}
    assert once["qos"]["gp-p1"] == {"grptresmins": "gres/gpu=127217", "rawusage": "0",
                                    "priority": "100",
                                    "preempt": "gp-opportunistic,gp-overdrawn",
                                    "preemptmode": "requeue", "usagefactor": "1.000000",
                                    "preemptexempttime": "08:00:00", "flags": "NoDecay",
                                    "grptres": "gres/gpu=23"}
    assert once["qos"]["gp-opportunistic"] == {"priority": "11", "preempt": "gp-overdrawn",
                                               "preemptmode": "requeue",
                                               "usagefactor": "1.000000",
                                               "preemptexempttime": "08:00:00",
                                               "flags": "", "grptres": ""}
    assert once["reservation"]["gp-r2"] == {
        "StartTime": "2026-11-17T00:00:00", "Duration": "1-00:00:00", "Accounts": "p2",
        "NodeCnt": "1", "PartitionName": "c2", "Flags": "IGNORE_JOBS"}
    twice = slurm.apply(export_slurm(PLAN, ORG))
    assert twice == once
    assert slurm.calls("sacctmgr -i add") == 6 + 2 + 3  # each added once, never again
    assert slurm.calls("scontrol create") == 2 and slurm.calls("scontrol update") == 0
    # QOS settings, limits (and usage reset) and the QOS attach set once, in the first apply;
    # accounts added with the plan's parent and share are never modified; the second apply
    # changes nothing at all
    assert slurm.calls("sacctmgr -i modify qos") == 2 + 3 * (1 + 2 + 1)
    assert slurm.calls("sacctmgr -i modify account") == 3
    assert slurm.calls("sacctmgr -i modify account p1 set qos+=") == 1
    # replan: r2 moves a day, r1 is dropped, p1 has used more
    moved = plan_copy()
    moved["reservations"] = [moved["reservations"][1] | {"start": D3,
                                                         "end": "2026-11-19T00:00:00Z"}]
    moved["budgets"][0]["used"] = 300.0
    replanned = slurm.apply(export_slurm(moved, ORG, previous=PLAN))
    fresh = FakeSlurm(tmp_path / "b").apply(export_slurm(moved, ORG))
    assert replanned == fresh
    assert set(replanned["reservation"]) == {"gp-r2"}



@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_a_project_called_opportunistic_gets_a_budget_qos_of_its_own(tmp_path):
    # its account is "opportunistic", so gp-<account> would be the shared QOS: the project's
    # budget QOS takes a hashed name instead, and the shared one keeps its name and settings
    org = pd.concat([ORG, pd.DataFrame({"id": ["opportunistic"], "parent": ["team-b"],
                                        "weight": [1.0]})], ignore_index=True)
    plan = plan_copy()
    plan["budgets"].append({"project": "opportunistic", "budget": 60.0, "used": 0.0,
                            "planned": 0.0, "planned_reserved": 0.0,
                            "planned_opportunistic": 0.0, "marginal_value": 0.0})
    own = qos_name("opportunistic")
    assert re.fullmatch(r"gp-opportunistic-[0-9a-f]{8}", own) and qos_name("p1") == "gp-p1"
    state = FakeSlurm(tmp_path).apply(export_slurm(plan, org))
    assert state["qos"][own]["grptresmins"] == "gres/gpu=3600"  # 60 NGH at rate 1
    assert state["qos"][own]["preempt"] == f"{OPPORTUNISTIC_QOS},{OVERDRAWN_QOS}"
    assert state["qos"][OPPORTUNISTIC_QOS] == {"priority": "11", "preempt": OVERDRAWN_QOS,
                                               "preemptmode": "requeue",
                                               "usagefactor": "1.000000",
                                               "preemptexempttime": "08:00:00",
                                               "flags": "", "grptres": ""}
    assert state["account"]["opportunistic"]["qos"] == \
        f"{OPPORTUNISTIC_QOS},{own},{OVERDRAWN_QOS}"
    assert state["account"]["opportunistic"]["defaultqos"] == own


def test_the_header_asks_for_the_plans_fair_share_half_life():
    # a plan of a 7-day lookback window carries ln 2 · 168 / 2 = 58.2244 h: whole minutes,
    # 3493 = 2 days 10 h 13 min; a plan without the field leaves Slurm's own decay alone
    plan = json.loads(json.dumps(PLAN))
    plan["contract"]["fair_share_half_life_hours"] = math.log(2) * 84
    script = export_slurm(plan, ORG)
    header = script[:script.index("set -eu")]
    line = "#   PriorityDecayHalfLife=2-10:13:00   # fair share forgets usage as the plan's " \
           "lookback does"
    assert line in header.splitlines()
    assert slurm_state(plan, ORG).decay_half_life_hours == pytest.approx(58.2244, abs=1e-4)
    assert "PriorityDecayHalfLife" not in export_slurm(PLAN, ORG)
    assert slurm_state(PLAN, ORG).decay_half_life_hours is None
    # the test Slurm runs the default model's value (the sample plans of the docs)
    from tests.real_slurm import _slurm_conf
    assert "PriorityDecayHalfLife=2-10:13:00" in _slurm_conf(Path("/nonexistent"),
                                                             PLAN["clusters"]).splitlines()


def test_the_slurm_conf_lines_are_in_the_docs_and_the_test_slurm():
    # one list (SLURM_CONF_LINES) in the script header; the docs' reference (rendered from
    # it) and the real Slurm the tests start must say the same settings
    from planner.reference import SLURM_PAGE, pages
    from tests.real_slurm import _slurm_conf

    readme = pages()[SLURM_PAGE]
    conf = _slurm_conf(Path("/nonexistent"), PLAN["clusters"]).splitlines()
    settings = [line.split()[0] for line in SLURM_CONF_LINES]
    assert [s.split("=")[0] for s in settings] == [
        "GresTypes", "AccountingStorageType", "AccountingStorageTRES", "PreemptType",
        "PreemptMode", "AccountingStorageEnforce", "PriorityType", "PriorityWeightQOS",
        "PriorityWeightFairshare", "SchedulerParameters"]
    # the docs' block and the script's header hold the very lines, comments included
    readme_lines = [line.strip() for line in readme.splitlines()]
    start = readme_lines.index(SLURM_CONF_LINES[0])
    assert readme_lines[start:start + len(SLURM_CONF_LINES)] == list(SLURM_CONF_LINES)
    assert readme_lines[start + len(SLURM_CONF_LINES)] == "```"
    header = export_slurm(PLAN, ORG).splitlines()
    for line in SLURM_CONF_LINES:
        assert f"#   {line}" in header
    for setting in settings:
        assert setting in conf, setting
    for c in PLAN["clusters"]:  # and the partitions the header asks for are the test Slurm's
        assert any(line.startswith(f"PartitionName={c['cluster']} ") for line in conf)


def test_gp_opportunistic_is_ensured_before_any_command_names_it():
    # sacctmgr refuses Preempt= or qos+= naming a QOS that does not exist; a replan that
    # changes a limit re-sets the project's Preempt, so it carries the guarded lines too
    changed = plan_copy()
    changed["budgets"][2]["used"] = 80.0
    for script in (export_slurm(PLAN, ORG), export_slurm(changed, ORG, previous=PLAN)):
        naming = [line for line in commands(script) if OPPORTUNISTIC_QOS in line]
        assert naming[0] == (f"sacctmgr -n show qos {OPPORTUNISTIC_QOS} | grep -q . || "
                             f"run sacctmgr -i add qos {OPPORTUNISTIC_QOS}")
    # no change, no lines but the caps read from the queue
    assert changes(export_slurm(PLAN, ORG, previous=PLAN)) == []


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_a_script_run_after_a_reservation_began_keeps_its_start_and_moves_only_its_end(
        tmp_path):
    script = export_slurm(PLAN, ORG)  # as of D1: r1 starts at D1, r2 at D2
    slurm = FakeSlurm(tmp_path / "a")
    ahead = slurm.apply(script)  # the day before
    begun = slurm.apply(script, now="2026-11-16T06:00:00")  # r1 has begun, as planned
    assert begun == ahead and slurm.calls("scontrol update") == 0  # nothing to change
    # a replan (as of 06:00) that keeps r1 a day longer: only its end moves
    longer = plan_copy()
    longer["as_of"] = "2026-11-16T06:00:00Z"
    longer["reservations"][0]["end"] = D3
    begun = slurm.apply(export_slurm(longer, ORG, previous=PLAN), now="2026-11-16T06:00:00")
    assert begun["reservation"]["gp-r1"] == {
        "StartTime": "2026-11-16T00:00:00", "EndTime": "2026-11-18T00:00:00",
        "Accounts": "p1", "NodeCnt": "1", "PartitionName": "c2", "Flags": "IGNORE_JOBS"}
    assert begun["reservation"]["gp-r2"] == ahead["reservation"]["gp-r2"]
    # run late on an empty Slurm: r1 is created from now on (not from 6 hours ago)
    late = FakeSlurm(tmp_path / "b").apply(script, now="2026-11-16T06:00:00")
    assert late["reservation"]["gp-r1"]["StartTime"] == "2026-11-16T06:00:00"
    assert late["reservation"]["gp-r1"]["EndTime"] == "2026-11-17T00:00:00"
    assert late["reservation"]["gp-r2"] == ahead["reservation"]["gp-r2"]

# --- the real Slurm ----------------------------------------------------------------------
# Debian's slurm-wlm 22.05 with slurmdbd on MariaDB, started by tests/real_slurm.py in a
# network namespace of its own (loopback only), once for the tests below, one slurmd per
# node of PLAN's clusters (c1: 4 nodes, c2: 2; partitions c1 and c2).

# what the plan's org and budgets say, by hand: account -> (parent, fairshare = the budgets
# (NGH) summed under it)
ACCOUNTS = {"area": ("root", "4000"), "team-a": ("area", "3500"), "team-b": ("area", "500"),
            "p1": ("team-a", "2000"), "p2": ("team-a", "1500"),
            "p-3-8aff7f51": ("team-b", "500")}


def _stamp(ts: pd.Timestamp) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%SZ")


def shifted(plan: dict, first_period: pd.Timestamp) -> dict:
    """``plan`` with every time moved so that its first period starts at ``first_period``."""
    out = copy.deepcopy(plan)
    delta = first_period - pd.Timestamp(plan["periods"][0]["start"])

    def move(stamp: str) -> str:
        return _stamp(pd.Timestamp(stamp) + delta)

    for key in ("as_of", "quarter_start", "quarter_end"):
        out[key] = move(out[key])
    for item in out["periods"] + out["reservations"]:
        item["start"], item["end"] = move(item["start"]), move(item["end"])
    for a in out["allocations"]:
        a["period_start"] = move(a["period_start"])
    return out


#: Where future_plan starts: two days ahead at midnight UTC, fixed when the module loads, so
#: that the real Slurm tests, which converge one Slurm from plan to plan, all see the same
#: plan even when they run across midnight.
FUTURE = pd.Timestamp.now(tz="UTC").floor("D") + pd.Timedelta(days=2)


def future_plan(days: int = 0) -> dict:
    """PLAN starting at FUTURE (and ``days`` later), its reservations all in the future."""
    return shifted(PLAN, FUTURE + pd.Timedelta(days=days))


def replanned(plan: dict) -> dict:
    """A replan of ``plan``: r1 dropped, r2 moved a day later, p1 has used 300 NGH."""
    moved = copy.deepcopy(plan)
    r2 = moved["reservations"][1]
    moved["reservations"] = [r2 | {"start": r2["end"], "end": _stamp(
        pd.Timestamp(r2["end"]) + pd.Timedelta(days=1))}]
    moved["budgets"][0]["used"] = 300.0
    return moved


def slurm_time(stamp: str) -> str:
    """How scontrol prints a plan time (UTC, as the test runs with TZ=UTC)."""
    return stamp.rstrip("Z")


@pytest.fixture(scope="module")
def real_slurm():
    from tests.real_slurm import TOOLS, running_slurm

    why = "a real Slurm 22.05 with slurmdbd (Debian packages in .ci/apt-packages)"
    need(*TOOLS, why=why)
    if os.geteuid() != 0:
        (pytest.fail if REQUIRED else pytest.skip)(f"not root: {why} runs its daemons as root")
    with running_slurm(PLAN["clusters"]) as slurm:
        yield slurm


def assert_slurm_holds(slurm, plan: dict, state: dict) -> None:
    """The accounts, budgets and reservations Slurm reads back are the plan's, once each."""
    accounts = [a["account"] for a in state["accounts"]]
    assert sorted(accounts) == sorted([*ACCOUNTS, "root"])  # no duplicates, nothing else
    own = {a["account"]: a for a in state["assocs"] if a["user"] == ""}
    assert {name: (own[name]["parentname"], own[name]["share"]) for name in ACCOUNTS} \
        == ACCOUNTS
    described = {a["account"]: a["descr"] for a in state["accounts"]}
    assert described["p-3-8aff7f51"] == "org:=p 3"  # sacctmgr lower-cases descriptions
    # sshare shows the same tree: indentation = depth below root, raw shares = fairshare
    shares = {r["Account"]: r for r in state["sshare"] if r["User"] == ""}
    depth = {"area": "1", "team-a": "2", "team-b": "2", "p1": "3", "p2": "3",
             "p-3-8aff7f51": "3"}
    assert {a: (shares[a]["depth"], shares[a]["RawShares"]) for a in ACCOUNTS} \
        == {a: (depth[a], ACCOUNTS[a][1]) for a in ACCOUNTS}
    # budgets: one QOS per project, the limit, attached to the account and its default, above
    # and preempting the shared opportunistic QOS, which every project account may use
    minutes = budget_minutes(plan)
    # PreemptExemptTime: the plan's protected minimum runtime, as sacctmgr prints it
    exempt = opportunistic_settings(slurm_state(plan, ORG).opportunistic)[1].split("|")[3]
    settings = {q["name"]: q for q in state["qos"]}
    qos = {name: q["grptresmins"] for name, q in settings.items()}
    # normal, opportunistic, overdrawn (rule 8), one per project
    assert len(qos) == len(state["qos"]) == 1 + 1 + 1 + 3
    assert settings[OPPORTUNISTIC_QOS] == {
        "name": OPPORTUNISTIC_QOS, "grptresmins": "", "priority": "11",
        "preempt": OVERDRAWN_QOS, "preemptmode": "requeue", "usagefactor": "1.000000",
        "preemptexempttime": exempt, "grptres": "", "flags": ""}
    # rule 8: below gp-opportunistic, preempted at once, charged to no budget
    assert settings[OVERDRAWN_QOS] == {
        "name": OVERDRAWN_QOS, "grptresmins": "", "priority": "0", "preempt": "",
        "preemptmode": "requeue", "usagefactor": "1.000000",
        "preemptexempttime": "00:00:00", "grptres": "", "flags": ""}
    projects = {"p1": "p1", "p2": "p2", "=P 3": "p-3-8aff7f51"}
    caps = pace_gpus(plan)
    budgets = {b.project: b for b in slurm_state(plan, ORG).budgets}
    for project, acct in projects.items():
        assert qos[f"gp-{acct}"] == f"gres/gpu={minutes[project]}"
        # the pace cap and undecayed GPU-minutes, as sacctmgr prints them
        assert (settings[f"gp-{acct}"]["grptres"], settings[f"gp-{acct}"]["flags"]) == \
            (f"gres/gpu={caps[project]}", "NoDecay")
        # above gp-opportunistic and preempting it, and (rule 5) the budget QOS of the
        # projects ahead of their pace, each exempt for the protected runtime
        shipped = budgets[project]
        assert OPPORTUNISTIC_QOS in shipped.preempt_list.split(",")
        assert tuple(settings[f"gp-{acct}"][k] for k in (
            "priority", "preempt", "preemptmode", "preemptexempttime")) == (
            "100", shipped.preempt_list, "requeue", shipped.exempt)
        assert {f"gp-{acct}", OPPORTUNISTIC_QOS, OVERDRAWN_QOS} <= set(
            own[acct]["qos"].split(","))
        assert own[acct]["defaultqos"] == f"gp-{acct}"
    # reservations: exactly the plan's, whole nodes of their cluster, for their account
    reservations = state["reservations"]
    assert set(reservations) == {reservation_name(r["request_id"])
                                 for r in plan["reservations"]}
    for r in plan["reservations"]:
        got = reservations[reservation_name(r["request_id"])]
        assert (got["StartTime"], got["EndTime"], got["NodeCnt"], got["PartitionName"],
                got["Accounts"]) == (slurm_time(r["start"]), slurm_time(r["end"]),
                                     str(r["nodes"]), r["cluster"], projects[r["project"]])
        assert "IGNORE_JOBS" in got["Flags"].split(",")
        assert got["Nodes"].startswith(f"{r['cluster']}n")


def apply_traced(slurm, script: Path) -> list[str]:
    """Apply an exported script file (bash -x): the commands that ran, as bash traced them."""
    done = slurm.run("bash", "-x", str(script), timeout=120)
    return [line[2:] for line in done.stderr.splitlines() if line.startswith("+ ")]


def hand_scenario(folder: Path) -> Path:
    """A scenario folder with PLAN's clusters and budgets and ORG, for ``--scenario``."""
    clusters = "cluster,gpu_type,nodes,gpus_per_node\n" + "".join(
        f"{c['cluster']},{c['gpu_type']},{c['nodes']},{c['gpus_per_node']}\n"
        for c in PLAN["clusters"])
    budgets = "project,gpu_hours\n" + "".join(f"{b['project']},{b['budget']}\n"
                                              for b in PLAN["budgets"])
    return write_scenario(folder, clusters=clusters, org=ORG.to_csv(index=False),
                          budgets=budgets, demand=None, reservations=None, usage=None)


def test_real_slurm_holds_the_plan_the_cli_wrote_and_a_second_apply_changes_nothing(
        real_slurm, tmp_path):
    # end to end: `planner export PLAN --to slurm --out DIR` writes the script, and Slurm runs
    # that file (twice), not a string made in the test
    plan = future_plan()
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan, indent=1))
    out = tmp_path / "slurm"
    assert main(["export", str(plan_file), "--to", "slurm", "--out", str(out),
                 "--scenario", str(hand_scenario(tmp_path / "scenario"))]) == 0
    script = out / "slurm-apply.sh"
    assert [p.name for p in out.iterdir()] == ["slurm-apply.sh"]
    assert script.read_text() == export_slurm(plan, ORG)  # the org read from the scenario
    real_slurm.run("bash", str(script), timeout=120)
    once = real_slurm.state()
    assert_slurm_holds(real_slurm, plan, once)
    # the numbers by hand (see test_full_script_sets_accounts_budgets_and_reservations):
    # p1 127217, p2 1500 NGH x 882 raw / 786 NGH x 60 = 100992, =P 3 450 x 2 x 60 = 54000
    assert {q["name"]: q["grptresmins"] for q in once["qos"] if q["name"] != "normal"} == {
        "gp-p1": "gres/gpu=127217", "gp-p2": "gres/gpu=100992",
        "gp-p-3-8aff7f51": "gres/gpu=54000", "gp-opportunistic": "", "gp-overdrawn": ""}
    assert once["reservations"]["gp-r1"]["Duration"] == "1-00:00:00"

    second = apply_traced(real_slurm, script)
    assert real_slurm.state() == once
    # nothing was added, created, updated, re-limited or re-set
    assert any(c.startswith("resv_has gp-r1 ") for c in second)  # the guards did run
    changing = [c for c in second if c.startswith(("run ", "sacctmgr -i", "scontrol create",
                                                   "scontrol update", "scontrol delete"))]
    assert changing == []  # every guard held: not even an idempotent command ran


def test_real_slurm_follows_a_replan(real_slurm):
    plan = future_plan()
    real_slurm.bash(export_slurm(plan, ORG))  # converges whatever ran before
    before = real_slurm.state()
    # replan: r1 dropped, r2 moved a day later, p1 has used 300 NGH
    moved = replanned(plan)
    script = export_slurm(moved, ORG, previous=plan)
    assert "sacctmgr -n show account" not in script  # accounts untouched by a replan
    real_slurm.bash(script)
    after = real_slurm.state()
    assert_slurm_holds(real_slurm, moved, after)
    assert set(after["reservations"]) == {"gp-r2"}
    moved_start = slurm_time(moved["reservations"][0]["start"])  # r2's old end
    assert after["reservations"]["gp-r2"]["StartTime"] == moved_start
    # p1 without r1: 1700 NGH left, all planned on c1 at rate 1 -> 102000 GPU-minutes
    assert {q["name"]: q["grptresmins"] for q in after["qos"]}["gp-p1"] == "gres/gpu=102000"
    assert (after["accounts"], after["assocs"], after["sshare"]) == \
        (before["accounts"], before["assocs"], before["sshare"])


def _job(slurm, job_id: str) -> dict[str, str]:
    from tests.real_slurm import parse_records

    return parse_records(slurm.run("scontrol", "show", "job", "-o", job_id).stdout)[0]


def test_real_slurm_runs_a_job_inside_its_reservation(real_slurm):
    # a plan made as of the last full hour and applied only now: Slurm refuses a start more
    # than a few minutes in the past, so the script creates the reservation from now on,
    # and a second run (the reservation has begun) moves only its end
    start = pd.Timestamp.now(tz="UTC").floor("h") - pd.Timedelta(hours=1)
    plan = shifted(PLAN, start)
    assert plan["as_of"] == _stamp(start)
    plan["reservations"] = [plan["reservations"][0] | {"request_id": "now-r1"}]
    script = export_slurm(plan, ORG)
    assert f"if [[ $now < {slurm_time(_stamp(start))} ]]; then " in script
    real_slurm.bash(script)
    created = real_slurm.reservations()["gp-now-r1"]
    real_slurm.bash(script)
    resv = real_slurm.reservations()["gp-now-r1"]
    assert resv == created
    assert (resv["State"], resv["Accounts"], resv["EndTime"]) == \
        ("ACTIVE", "p1", slurm_time(plan["reservations"][0]["end"]))
    assert resv["StartTime"] > slurm_time(_stamp(start + pd.Timedelta(minutes=59)))
    # users are the site's business, not the plan's: root may charge p1 and p2
    for acct in ("p1", "p2"):
        if not real_slurm.run("sacctmgr", "-n", "show", "assoc", f"account={acct}",
                              "user=root").stdout.strip():
            real_slurm.run("sacctmgr", "-i", "add", "user", "root", f"account={acct}")
    try:
        _run_job_in(real_slurm, resv)
    finally:  # leave Slurm holding only what the other tests' plans say
        real_slurm.run("scontrol", "delete", "ReservationName=gp-now-r1", check=False)


def _run_job_in(real_slurm, resv: dict[str, str]) -> None:
    from tests.real_slurm import node_names

    out = real_slurm.root / "jobs"
    job_id = real_slurm.run(
        "sbatch", "--parsable", "-A", "p1", "--reservation=gp-now-r1", "-p", "c2", "-N1",
        "--gres=gpu:1", "-t", "5", "-o", f"{out}/%j.out",
        "--wrap", 'echo "$SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES"').stdout.strip()
    deadline = time.monotonic() + 60
    job = _job(real_slurm, job_id)
    # a one-line job may be seen first while COMPLETING (a loaded machine polls slowly)
    started = ("RUNNING", "COMPLETING", "COMPLETED")
    while job["JobState"] not in started and time.monotonic() < deadline:
        assert job["JobState"] == "PENDING", job
        time.sleep(0.5)
        job = _job(real_slurm, job_id)
    assert job["JobState"] in started, job
    # under its account, in its reservation, on a node of it, bound by its budget QOS
    assert (job["Account"], job["Reservation"], job["QOS"]) == ("p1", "gp-now-r1", "gp-p1")
    assert job["NodeList"] == resv["Nodes"] and job["NodeList"] in node_names(
        {"cluster": "c2", "nodes": 2})
    # it ran there with one (fake) GPU, and accounting has it under p1 (not its reservation:
    # sacct names that only once slurmctld has sent the reservation record to slurmdbd)
    deadline, log = time.monotonic() + 30, out / f"{job_id}.out"
    while time.monotonic() < deadline and not (log.exists() and log.read_text().strip()):
        time.sleep(0.5)
    assert log.read_text().split() == [resv["Nodes"], "gpus=0"]
    fields = "state,account,nodelist,alloctres"
    deadline, row = time.monotonic() + 30, {}
    while time.monotonic() < deadline and row.get("state") != "COMPLETED":
        time.sleep(0.5)
        lines = real_slurm.run("sacct", "-n", "-P", "-X", "-j", job_id,
                               f"--format={fields}").stdout.splitlines()
        row = dict(zip(fields.split(","), lines[0].split("|"), strict=True)) if lines else {}
    assert (row["state"], row["account"], row["nodelist"]) == ("COMPLETED", "p1", resv["Nodes"])
    assert "gres/gpu=1" in row["alloctres"].split(",")
    # the reservation is kept for its account: p2 may not use it
    refused = real_slurm.run("sbatch", "--parsable", "-A", "p2", "--reservation=gp-now-r1",
                             "-p", "c2", "-t", "5", "-o", f"{out}/refused.out",
                             "--wrap", "true", check=False)
    assert refused.returncode != 0 and "reservation" in refused.stderr.lower()


def _allow_root(slurm, *accounts: str) -> None:
    """Users are the site's business, not the plan's: let root charge ``accounts``."""
    for acct in accounts:
        if not slurm.run("sacctmgr", "-n", "show", "assoc", f"account={acct}",
                         "user=root").stdout.strip():
            slurm.run("sacctmgr", "-i", "add", "user", "root", f"account={acct}")


def _sbatch(slurm, *args: str) -> str:
    return slurm.run("sbatch", "--parsable", "-p", "c1", "-t", "5",
                     "-o", f"{slurm.root}/jobs/%j.out", *args).stdout.strip()


def _sacct_states(slurm, job_id: str) -> list[str]:
    """Every record sacct holds of the job (-D: a requeued job's earlier runs too)."""
    return slurm.run("sacct", "-n", "-P", "-X", "-D", "-j", job_id,
                     "--format=state").stdout.split()


def test_real_slurm_runs_opportunistic_work_beyond_a_spent_budget_and_preempts_it(
        real_slurm):
    """Beyond its budget a project gets only opportunistic, preemptible GPU-hours.

    p2 has spent its budget (``GrpTRESMins=gres/gpu=0``): its job under its default QOS pends
    with reason ``QOSGrpGRESMinutes``, while its ``--qos=gp-opportunistic`` job, queued behind
    it in the same partition, runs, though the blocked job has the higher priority (its QOS
    Priority and ``PriorityWeightQOS``). Then an opportunistic job holding all of node c1n4
    (its one CPU and 8 GPUs) is requeued when p1's guaranteed job needs that node
    (``Preempt=gp-opportunistic``; slurm.conf has ``PreemptType=preempt/qos``): sacct records
    the first run as PREEMPTED, scontrol counts a restart, and the job is queued again.
    The opportunistic jobs add to no budget QOS (gp-p2's usage stays 0), while the
    guaranteed job's budget QOS accrues usage.

    What the real Slurm taught: ``sacctmgr modify qos`` reports "Modified qos" (exit 0) even
    when nothing changes, unlike ``modify account ... set parent=`` (exit 1); a ``Preempt=``
    naming a QOS that does not exist is refused, so gp-opportunistic is made first; the
    opportunistic job behind the blocked one first pends with reason ``Priority`` and starts
    within seconds (about 5 s here); QOS usage is applied when a job
    ends (``scontrol show assoc_mgr`` has it seconds later, not after PriorityCalcPeriod's
    5 minutes); a requeued job pends with reason ``BeginTime`` before it may start again.
    """
    plan = future_plan()
    plan["contract"]["min_runtime_cap_hours"] = 0.0  # no exempt time: preempted at once
    p2 = next(b for b in plan["budgets"] if b["project"] == "p2")
    p2["used"] = p2["budget"]
    assert budget_minutes(plan)["p2"] == 0
    real_slurm.bash(export_slurm(plan, ORG))
    assert_slurm_holds(real_slurm, plan, real_slurm.state())
    _allow_root(real_slurm, "p1", "p2")
    jobs: list[str] = []
    try:
        held = _sbatch(real_slurm, "-A", "p2", "--gres=gpu:1", "--wrap", "true")
        jobs.append(held)
        until("p2's job pends on its spent budget", lambda: real_slurm.job(held)[
            "Reason"] == "QOSGrpGRESMinutes")
        opportunistic = _sbatch(real_slurm, "-A", "p2", "--qos=gp-opportunistic",
                                "--gres=gpu:1", "--wrap", "sleep 1")
        jobs.append(opportunistic)
        until("p2's opportunistic job completes",
               lambda: _sacct_states(real_slurm, opportunistic) == ["COMPLETED"])
        job = real_slurm.job(held)
        assert (job["JobState"], job["Reason"], job["QOS"]) == \
            ("PENDING", "QOSGrpGRESMinutes", "gp-p2")
        assert real_slurm.job(opportunistic)["QOS"] == OPPORTUNISTIC_QOS
        # same account, user and partition, so the QOS makes the difference: with
        # PriorityWeightQOS, guaranteed work (Priority=100) is ordered before opportunistic (0)
        assert int(job["Priority"]) > int(real_slurm.job(opportunistic)["Priority"])

        # preemption: opportunistic work holds the whole node, guaranteed work takes it back
        preempted = _sbatch(real_slurm, "-A", "p2", "--qos=gp-opportunistic", "-w", "c1n4",
                            "--gres=gpu:8", "--wrap", "sleep 300")
        jobs.append(preempted)
        until("the opportunistic job runs on c1n4",
               lambda: real_slurm.job(preempted)["JobState"] == "RUNNING")
        guaranteed = _sbatch(real_slurm, "-A", "p1", "-w", "c1n4", "--gres=gpu:1",
                             "--wrap", "sleep 1")
        jobs.append(guaranteed)
        until("p1's guaranteed job completes on c1n4",
               lambda: _sacct_states(real_slurm, guaranteed) == ["COMPLETED"])
        assert real_slurm.job(guaranteed)["QOS"] == "gp-p1"
        assert real_slurm.job(guaranteed)["NodeList"] == "c1n4"
        requeued = real_slurm.job(preempted)
        assert int(requeued["Restarts"]) >= 1 and requeued["JobState"] in ("PENDING",
                                                                          "RUNNING")
        assert _sacct_states(real_slurm, preempted)[0] == "PREEMPTED"
        log = (real_slurm.root / "log" / "slurmctld.log").read_text()
        assert f"preempted JobId={preempted} has been requeued to reclaim resources for " \
               f"JobId={guaranteed}" in log
        # gp-opportunistic has no GrpTRESMins: its work is charged to no budget QOS (its
        # UsageFactor=1, read back above, counts it in fair share only; when slurmctld
        # books that usage is its own timing, so it is not waited for here); guaranteed
        # work accrues usage on its own budget QOS
        assert until("gp-p1 accrues usage", lambda: real_slurm.qos_usage("gp-p1") > 0)
        assert real_slurm.qos_usage("gp-p2") == 0.0
    finally:  # leave no job behind for the other tests
        if jobs:
            real_slurm.run("scancel", *jobs, check=False)


def test_real_slurm_requeues_gp_overdrawn_work_at_once_for_opportunistic_work(real_slurm):
    """Rule 8 on the real Slurm: gp-overdrawn is below everything and preempted at once.

    The tick's move (``scontrol update JobId=<id> QOS=gp-overdrawn``) is accepted for a
    pending job of a project account (the script attaches gp-overdrawn to it). A gp-p2
    job under gp-overdrawn holding all of c1n4 is requeued as soon as p1's
    gp-opportunistic job needs that node (``PreemptExemptTime=0``; gp-opportunistic's
    ``Preempt=gp-overdrawn``), though gp-opportunistic's own work is exempt for the
    protected runtime. (Its priority below gp-opportunistic's is the QOS's: a held job's
    priority is 0 whatever its QOS, so it is read from sacctmgr, in assert_slurm_holds.)
    """
    plan = future_plan()
    real_slurm.bash(export_slurm(plan, ORG))
    assert_slurm_holds(real_slurm, plan, real_slurm.state())
    _allow_root(real_slurm, "p1", "p2")
    jobs: list[str] = []
    try:
        held = _sbatch(real_slurm, "-A", "p2", "--hold", "--gres=gpu:1", "--wrap", "true")
        jobs.append(held)
        assert real_slurm.job(held)["QOS"] == "gp-p2"
        real_slurm.run("scontrol", "update", f"JobId={held}", f"QOS={OVERDRAWN_QOS}")
        assert real_slurm.job(held)["QOS"] == OVERDRAWN_QOS
        overdrawn = _sbatch(real_slurm, "-A", "p2", f"--qos={OVERDRAWN_QOS}", "-w", "c1n4",
                            "--gres=gpu:8", "--wrap", "sleep 300")
        jobs.append(overdrawn)
        until("the gp-overdrawn job runs on c1n4",
              lambda: real_slurm.job(overdrawn)["JobState"] == "RUNNING")
        taker = _sbatch(real_slurm, "-A", "p1", f"--qos={OPPORTUNISTIC_QOS}", "-w", "c1n4",
                        "--gres=gpu:1", "--wrap", "sleep 1")
        jobs.append(taker)
        until("p1's gp-opportunistic job completes on c1n4",
              lambda: _sacct_states(real_slurm, taker) == ["COMPLETED"])
        assert _sacct_states(real_slurm, overdrawn)[0] == "PREEMPTED"
        log = (real_slurm.root / "log" / "slurmctld.log").read_text()
        assert f"preempted JobId={overdrawn} has been requeued to reclaim resources for " \
               f"JobId={taker}" in log
    finally:  # leave no job behind for the other tests
        if jobs:
            real_slurm.run("scancel", *jobs, check=False)


def test_real_slurm_takes_back_from_a_project_ahead_of_its_pace_after_its_exempt_time(
        real_slurm):
    """The executor contract's rule 5 on the real Slurm: gp-p1 lists gp-p2 in ``Preempt``.

    p2 has used 1,000 of its 1,500 NGH half-way through the quarter: ahead of its pace
    (750), with budget left. p1 (100 of 2,000) is not. The protected runtime is 36 s
    (``min_runtime_cap_hours`` 0.01), every budget QOS's ``PreemptExemptTime``. A gp-p2 job
    holds all of c1n4; p1's budget job for that node pends while the gp-p2 job is inside
    its exempt time, and once it is past it Slurm requeues the gp-p2 job and runs p1's.
    """
    plan = future_plan()
    plan["contract"]["min_runtime_cap_hours"] = 0.01
    p2 = next(b for b in plan["budgets"] if b["project"] == "p2")
    p2["used"] = 1000.0
    budgets = {b.project: b for b in slurm_state(plan, ORG).budgets}
    assert budgets["p1"].takes_back == ("gp-p2",) and budgets["p2"].takes_back == ()
    assert budgets["p2"].exempt == "00:00:36"
    real_slurm.bash(export_slurm(plan, ORG))
    assert_slurm_holds(real_slurm, plan, real_slurm.state())
    _allow_root(real_slurm, "p1", "p2")
    jobs: list[str] = []
    try:
        ahead = _sbatch(real_slurm, "-A", "p2", "-w", "c1n4", "--gres=gpu:8",
                        "--wrap", "sleep 300")
        jobs.append(ahead)
        until("p2's budget job runs on c1n4",
              lambda: real_slurm.job(ahead)["JobState"] == "RUNNING")
        started = time.monotonic()
        assert real_slurm.job(ahead)["QOS"] == "gp-p2"
        behind = _sbatch(real_slurm, "-A", "p1", "-w", "c1n4", "--gres=gpu:1",
                         "--wrap", "sleep 1")
        jobs.append(behind)
        until("p1's budget job completes on c1n4",
              lambda: _sacct_states(real_slurm, behind) == ["COMPLETED"], timeout=240)
        assert real_slurm.job(behind)["QOS"] == "gp-p1"
        assert _sacct_states(real_slurm, ahead)[0] == "PREEMPTED"
        log = (real_slurm.root / "log" / "slurmctld.log").read_text()
        assert f"preempted JobId={ahead} has been requeued to reclaim resources for " \
               f"JobId={behind}" in log
        # not inside the exempt time: the gp-p2 run lasted at least its 36 s
        record = real_slurm.run("sacct", "-n", "-P", "-X", "-D", "-j", ahead,
                                "--format=state,elapsedraw").stdout.split()
        assert record[0].startswith("PREEMPTED|") and int(record[0].split("|")[1]) >= 36
        assert time.monotonic() - started >= 36
    finally:  # leave no job behind for the other tests
        if jobs:
            real_slurm.run("scancel", *jobs, check=False)


def capped_plan() -> dict:
    """:func:`future_plan` whose first period grants p2 9.5 guaranteed GPUs, =P 3 nothing.

    The pace caps: p1 23, p2 ⌊9.5⌋ = 9, =P 3 one node's GPUs, 8 (the floor).
    """
    plan = future_plan()
    first = plan["periods"][0]["start"]
    for a in plan["allocations"]:
        if a["period_start"] == first and a["project"] == "p2":
            a.update(gpus=9.5, gpu_hours=228.0)
    plan["allocations"] = [a for a in plan["allocations"]
                           if not (a["period_start"] == first and a["project"] == "=P 3")]
    return plan


def test_real_slurm_caps_a_budget_qos_at_its_pace(real_slurm):
    """The budget QOS holds at most its pace cap at once; the rest runs opportunistic.

    p2's first period grants 9.5 guaranteed GPUs (cap ⌊9.5⌋ = 9), =P 3's nothing (cap
    one node's GPUs, 8: the floor for a project with budget left). p2's first default-QOS
    job (8 GPUs) runs under gp-p2; its second (2 GPUs: 8 + 2 > 9) pends with reason
    ``QOSGrpGRES`` (the budget has minutes left: only the cap stops it), while its
    ``--qos=gp-opportunistic`` job runs: the wrapper rule (docs, Slurm) moves a job pending
    on either budget limit there.
    """
    plan = capped_plan()
    assert pace_gpus(plan) == {"p1": 23, "p2": 9, "=P 3": 8}
    assert pace_gpus(plan, floor="none") == {"p1": 23, "p2": 9, "=P 3": 0}
    real_slurm.bash(export_slurm(plan, ORG))
    state = real_slurm.state()
    assert_slurm_holds(real_slurm, plan, state)
    caps = {q["name"]: (q["grptres"], q["flags"]) for q in state["qos"]}
    assert caps["gp-p2"] == ("gres/gpu=9", "NoDecay")
    assert caps["gp-p-3-8aff7f51"] == ("gres/gpu=8", "NoDecay")
    _allow_root(real_slurm, "p2")
    jobs: list[str] = []
    try:
        first_job = _sbatch(real_slurm, "-A", "p2", "--gres=gpu:8", "--wrap", "sleep 300")
        jobs.append(first_job)
        until("p2's first job runs under gp-p2",
              lambda: real_slurm.job(first_job)["JobState"] == "RUNNING")
        assert real_slurm.job(first_job)["QOS"] == "gp-p2"
        second = _sbatch(real_slurm, "-A", "p2", "--gres=gpu:2", "--wrap", "true")
        jobs.append(second)
        until("p2's second job pends on the cap",
              lambda: real_slurm.job(second)["Reason"] == "QOSGrpGRES")
        beyond = _sbatch(real_slurm, "-A", "p2", "--qos=gp-opportunistic", "--gres=gpu:1",
                         "--wrap", "sleep 1")
        jobs.append(beyond)
        until("p2's opportunistic job completes",
              lambda: _sacct_states(real_slurm, beyond) == ["COMPLETED"])
        job = real_slurm.job(second)
        assert (job["JobState"], job["Reason"], job["QOS"]) == ("PENDING", "QOSGrpGRES",
                                                                "gp-p2")
    finally:  # leave no job behind for the other tests
        if jobs:
            real_slurm.run("scancel", *jobs, check=False)


def test_real_slurm_widens_a_pace_cap_to_the_widest_pending_job(real_slurm):
    """A project behind its pace with budget left holds at least its widest pending job.

    p2's cap is 9 (⌊9.5⌋, as above). A held job of p2 on three whole nodes (``-N 3
    --gres=gpu:8``: 24 GPUs) could never start under gp-p2 (24 > 9). With p2 ahead of its
    pace (1,000 of 1,500 NGH used half-way through the quarter) the script leaves the cap
    at 9 although the job pends. Behind its pace (as planned), the script, run while the
    job pends, reads its request from ``scontrol -o show job`` (``TRES=...,gres/gpu=24``)
    and sets gp-p2's ``GrpTRES`` to 24; p1 (no pending job) keeps 23 and =P 3 its node,
    8. A second run changes nothing (a dry run prints nothing), and the job, released,
    runs under gp-p2 on its budget.
    """
    plan = capped_plan()
    ahead = copy.deepcopy(plan)
    next(b for b in ahead["budgets"] if b["project"] == "p2")["used"] = 1000.0
    assert {b.project: b.widens for b in slurm_state(ahead, ORG).budgets} == {
        "p1": True, "p2": False, "=P 3": True}
    assert all(b.widens for b in slurm_state(plan, ORG).budgets)

    def caps() -> dict[str, str]:
        return {q["name"]: q["grptres"] for q in real_slurm.state()["qos"]}

    real_slurm.bash(export_slurm(ahead, ORG))  # the accounts exist, p2's cap is 9
    _allow_root(real_slurm, "p2")
    jobs: list[str] = []
    try:
        wide = _sbatch(real_slurm, "-A", "p2", "-H", "-N", "3", "--gres=gpu:8",
                       "--wrap", "sleep 1")
        jobs.append(wide)
        job = real_slurm.job(wide)
        assert job["JobState"] == "PENDING" and "gres/gpu=24" in job["TRES"].split(",")
        real_slurm.bash(export_slurm(ahead, ORG))
        assert caps()["gp-p2"] == "gres/gpu=9"  # ahead of its pace: no widening
        real_slurm.bash(export_slurm(plan, ORG))
        assert {q: caps()[q] for q in ("gp-p1", "gp-p2", "gp-p-3-8aff7f51")} == {
            "gp-p1": "gres/gpu=23", "gp-p2": "gres/gpu=24", "gp-p-3-8aff7f51": "gres/gpu=8"}
        assert real_slurm.run("bash", "-s", "--", "--dry-run", stdin=export_slurm(plan, ORG),
                              timeout=120).stdout == ""
        real_slurm.run("scontrol", "release", wide)
        until("p2's 24-GPU job completes",
              lambda: _sacct_states(real_slurm, wide) == ["COMPLETED"], timeout=120)
        assert real_slurm.job(wide)["QOS"] == "gp-p2"
    finally:  # leave no job behind for the other tests
        if jobs:
            real_slurm.run("scancel", *jobs, check=False)


def test_real_slurm_reserves_nothing_for_a_waiting_opportunistic_job(real_slurm):
    """``bf_min_prio_reserve`` (the header's ``SchedulerParameters``): a waiting
    gp-opportunistic job keeps no GPU idle for itself.

    c1 has 4 nodes of 8 GPUs (one CPU each). A p2 opportunistic job holds a GPU on c1n1
    (time limit 5 min); W, an opportunistic job for all four nodes, cannot start until it
    ends; S, a later opportunistic 1-GPU job whose time limit (60 min) outlasts it, fits
    on another node. Without the setting, W (same priority, earlier) would block S: Slurm
    reserves the four nodes for W from the first job's end, and S's limit reaches past it.
    With it, W is below ``bf_min_prio_reserve`` (gp-opportunistic's priority is at most the
    fair-share weight, 10000): S starts at once and completes while W still waits.
    """
    plan = future_plan()
    real_slurm.bash(export_slurm(plan, ORG))
    _allow_root(real_slurm, "p2")
    config = real_slurm.run("scontrol", "show", "config").stdout
    assert "bf_min_prio_reserve=100000" in config
    # the decay of a 7-day lookback, as the header of such a plan asks (Slurm reads it)
    assert re.search(r"PriorityDecayHalfLife\s*=\s*2-10:13:00", config)
    opportunistic = ("-A", "p2", f"--qos={OPPORTUNISTIC_QOS}")
    jobs: list[str] = []
    try:
        first = _sbatch(real_slurm, *opportunistic, "-w", "c1n1", "--gres=gpu:1",
                        "--wrap", "sleep 300")
        jobs.append(first)
        until("the first job runs on c1n1",
              lambda: real_slurm.job(first)["JobState"] == "RUNNING")
        wide = _sbatch(real_slurm, *opportunistic, "-N4", "--gres=gpu:8", "--wrap", "true")
        jobs.append(wide)
        until("W pends for resources", lambda: real_slurm.job(wide)["Reason"] == "Resources")
        small = _sbatch(real_slurm, *opportunistic, "--time=60", "--gres=gpu:1",
                        "--wrap", "sleep 1")
        jobs.append(small)
        assert int(real_slurm.job(small)["Priority"]) <= int(real_slurm.job(wide)["Priority"])
        until("S completes", lambda: _sacct_states(real_slurm, small) == ["COMPLETED"])
        assert real_slurm.job(wide)["JobState"] == "PENDING"
        assert real_slurm.job(first)["JobState"] == "RUNNING"
    finally:  # leave no job behind for the other tests
        if jobs:
            real_slurm.run("scancel", *jobs, check=False)


def test_real_slurm_backfill_starts_a_later_budget_job_by_requeueing_opportunistic_work(
        real_slurm):
    """What ``planner-slurm``'s replay of backfill rests on (``reserve_each``).

    c1 has 4 nodes of 8 GPUs and one CPU each. O, p2's gp-opportunistic job, holds c1n1
    (exempt time 0 here); p1's budget jobs hold c1n2-c1n4 for 5 minutes. W, p1's budget job
    for all four nodes, cannot start: the budget jobs cannot be requeued. A, p1's later
    budget job for c1n1 (time limit 1 minute, ending before W can start), has the same
    priority as W but comes after it. Slurm starts A at once, requeueing O, while W
    still waits: a job after the first one that cannot start may still start by
    preemption when it delays no reservation, as the replay's backfill does.
    """
    plan = future_plan()
    plan["contract"]["min_runtime_cap_hours"] = 0.0  # no exempt time: preemptable at once
    real_slurm.bash(export_slurm(plan, ORG))
    _allow_root(real_slurm, "p1", "p2")
    jobs: list[str] = []
    try:
        opportunistic = _sbatch(real_slurm, "-A", "p2", f"--qos={OPPORTUNISTIC_QOS}",
                                "-w", "c1n1", "--gres=gpu:8", "--wrap", "sleep 300")
        jobs.append(opportunistic)
        until("O runs on c1n1",
              lambda: real_slurm.job(opportunistic)["JobState"] == "RUNNING")
        busy = [_sbatch(real_slurm, "-A", "p1", "-w", f"c1n{n}", "--gres=gpu:1",
                        "--wrap", "sleep 300") for n in (2, 3, 4)]
        jobs.extend(busy)
        until("p1's budget jobs run on c1n2-c1n4",
              lambda: all(real_slurm.job(j)["JobState"] == "RUNNING" for j in busy))
        wide = _sbatch(real_slurm, "-A", "p1", "-N4", "--gres=gpu:1", "--wrap", "true")
        jobs.append(wide)
        until("W pends for resources", lambda: real_slurm.job(wide)["Reason"] == "Resources")
        later = _sbatch(real_slurm, "-A", "p1", "-w", "c1n1", "--time=1", "--gres=gpu:1",
                        "--wrap", "sleep 1")
        jobs.append(later)
        assert int(real_slurm.job(later)["Priority"]) <= int(real_slurm.job(wide)["Priority"])
        until("A completes", lambda: _sacct_states(real_slurm, later) == ["COMPLETED"],
              timeout=120)
        assert real_slurm.job(later)["QOS"] == "gp-p1"
        assert real_slurm.job(wide)["JobState"] == "PENDING"
        assert _sacct_states(real_slurm, opportunistic)[0] == "PREEMPTED"
    finally:  # leave no job behind for the other tests
        if jobs:
            real_slurm.run("scancel", *jobs, check=False)


def test_real_slurm_moves_a_reservation_onto_free_nodes_where_its_own_are_taken(real_slurm):
    # Slurm gives gp-r1 (day 0) and gp-r2 (day 1) the same c2 node, and keeps a reservation's
    # nodes when it moves one. The replan a day later (the sessions' test plans crossing
    # midnight) moves gp-r1 into day 1, where gp-r2 still holds that node: the script's
    # resv_update moves gp-r1 onto c2's other node, and gp-r2 then moves on to day 2.
    plan = future_plan()
    real_slurm.bash(export_slurm(plan, ORG))
    held = real_slurm.reservations()
    assert held["gp-r1"]["Nodes"] == held["gp-r2"]["Nodes"] == "c2n1"
    later = future_plan(days=1)
    script = export_slurm(later, ORG, previous=plan)
    assert [line.split(" || ")[1].split(";")[0] for line in changes(script)] == [
        f"resv_update gp-{r} c2 1 {slurm_time(new['start'])} {slurm_time(new['end'])} "
        f"StartTime={slurm_time(new['start'])} Duration=1-00:00:00 Accounts={p} NodeCnt=1"
        for r, p, new in zip(("r1", "r2"), ("p1", "p2"), later["reservations"], strict=True)]
    done = real_slurm.bash(script)
    assert_slurm_holds(real_slurm, later, real_slurm.state())
    moved = real_slurm.reservations()
    assert (moved["gp-r1"]["Nodes"], moved["gp-r2"]["Nodes"]) == ("c2n2", "c2n1")
    assert done.stdout.count("Reservation updated") == 2  # gp-r1 once refused, then moved
    # a site's own reservation holds all of c2 on day 3: the move there is refused, named
    site = ["scontrol", "create", "reservation", "ReservationName=site-maint",
            f"StartTime={slurm_time(_stamp(FUTURE + pd.Timedelta(days=3)))}",
            "Duration=1-00:00:00", "Users=root", "NodeCnt=2", "PartitionName=c2"]
    real_slurm.run(*site)
    try:
        blocked = copy.deepcopy(later)
        r2 = blocked["reservations"][1]
        r2["start"], r2["end"] = _stamp(FUTURE + pd.Timedelta(days=3)), _stamp(
            FUTURE + pd.Timedelta(days=4))
        refused = real_slurm.run("bash", "-s", stdin=export_slurm(blocked, ORG, previous=later),
                                 check=False, timeout=120)
        assert refused.returncode == 1
        assert refused.stderr.startswith("gpu-planner: gp-r2: Error updating the reservation: "
                                         "Requested reservation overlaps with another")
        assert refused.stderr.endswith("; fewer than 1 nodes of c2 are free of other "
                                       f"reservations from {slurm_time(r2['start'])} to "
                                       f"{slurm_time(r2['end'])}\n")
        assert real_slurm.reservations()["gp-r2"] == moved["gp-r2"]  # left as it was
    finally:
        real_slurm.run("scontrol", "delete", "ReservationName=site-maint", check=False)


def test_real_slurm_dry_run_lists_the_changes_and_makes_none(real_slurm):
    plan = future_plan()
    real_slurm.bash(export_slurm(plan, ORG))  # converge to the plan whatever ran before
    before = real_slurm.state()
    # on a Slurm that holds the plan, the plan's own script would change nothing
    assert real_slurm.run("bash", "-s", "--", "--dry-run", stdin=export_slurm(plan, ORG),
                          timeout=120).stdout == ""
    # a replan: r2 a day later, r1 dropped, p1 has used 300 NGH
    moved = replanned(plan)
    script = export_slurm(moved, ORG, previous=plan)
    done = real_slurm.run("bash", "-s", "--", "--dry-run", stdin=script, timeout=120)
    assert real_slurm.state() == before  # nothing changed
    printed = done.stdout.splitlines()
    assert all(line.startswith("would run: ") for line in printed), printed
    start = slurm_time(moved["reservations"][0]["start"])
    assert f"would run: scontrol update ReservationName=gp-r2 StartTime={start} " \
           "Duration=1-00:00:00 Accounts=p2 NodeCnt=1" in printed
    assert "would run: scontrol delete ReservationName=gp-r1" in printed
    assert "would run: sacctmgr -i modify qos gp-p1 set GrpTRESMins=gres/gpu=102000" in printed
    # gp-opportunistic and gp-p1's priority are as the plan says: their guards hold
    assert not any("Priority=" in line for line in printed)
    # the same script, run for real, makes exactly those changes
    real_slurm.bash(script)
    assert_slurm_holds(real_slurm, moved, real_slurm.state())


def test_real_slurm_carries_hostile_ids_inert(real_slurm, tmp_path):
    # last of the real Slurm tests: it adds accounts the others' plans do not have
    marker = tmp_path / "mark"
    evil = f"$(touch {marker})"
    odd = 'it\'s "odd" | `touch ' + str(marker) + '`\nline two; touch ' + str(marker)
    org = pd.concat([ORG, pd.DataFrame({"id": [evil, odd], "parent": ["team-b", "team-b"],
                                        "weight": [1.0, 1.0]})], ignore_index=True)
    plan = future_plan()
    plan["scenario"] = f"hand\n{evil}"
    plan["input_digest"] = f"abc\r\n{evil}"
    for project in (evil, odd):
        plan["budgets"].append({"project": project, "budget": 10.0, "used": 0.0,
                                "planned": 0.0, "planned_reserved": 0.0,
                                "planned_opportunistic": 0.0, "marginal_value": 0.0})
    plan["reservations"].append(plan["reservations"][0] | {
        "request_id": f"r3 {evil}\n'x", "project": odd, "cluster": "c1"})
    script = export_slurm(plan, org)
    name = reservation_name(f"r3 {evil}\n'x")
    real_slurm.bash(script)
    try:
        assert not marker.exists()
        accounts = {a["account"]: a["descr"] for a in real_slurm.state()["accounts"]}
        for project in (evil, odd):  # lower-cased by sacctmgr, and one line each
            assert accounts[account(project)] == description(project).lower()
        resv = real_slurm.reservations()[name]
        assert name.startswith("gp-r3-") and resv["Accounts"] == account(odd)
        assert (resv["PartitionName"], resv["NodeCnt"]) == ("c1", "1")
        qos = {q["name"]: q["grptresmins"] for q in real_slurm.state()["qos"]}
        assert qos[qos_name(evil)] == qos[qos_name(odd)] == "gres/gpu=600"
        real_slurm.bash(script)  # converges: nothing added twice
        assert not marker.exists()
    finally:
        real_slurm.run("scontrol", "delete", f"ReservationName={name}", check=False)


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_a_sites_own_reservation_named_like_a_request_is_never_touched(tmp_path):
    # the site has reservations "r1" and "maint" of its own; the plan's r1 is gp-r1
    slurm = FakeSlurm(tmp_path)
    site = "scontrol create reservation ReservationName={} StartTime=2026-11-20T00:00:00 " \
           "Duration=1-00:00:00 Accounts=ops NodeCnt=2 PartitionName=c1 Flags=MAINT\n"
    own = slurm.apply(site.format("r1") + site.format("maint"))["reservation"]
    applied = slurm.apply(export_slurm(PLAN, ORG))
    assert set(applied["reservation"]) == {"r1", "maint", "gp-r1", "gp-r2"}
    # a replan that drops both of the plan's reservations deletes gp-r1 and gp-r2 only
    dropped = plan_copy()
    dropped["reservations"] = []
    after = slurm.apply(export_slurm(dropped, ORG, previous=PLAN))
    assert after["reservation"] == own


@pytest.mark.parametrize(("cap", "shown"), [(8.0, "08:00:00"), (4.0, "04:00:00"),
                                             (0.5, "00:30:00"), (36.0, "1-12:00:00"),
                                             (0.0, "00:00:00")])
def test_gp_opportunistic_is_exempt_for_the_contracts_protected_runtime(cap, shown):
    # PreemptExemptTime (Slurm's [D-]HH:MM:SS) is the plan's min_runtime_cap_hours when its
    # contract has no fill slice (a plan written before it); the guard reads it back in the
    # same form
    plan = plan_copy()
    plan["contract"]["min_runtime_cap_hours"] = cap
    line = next(line for line in commands(export_slurm(plan, ORG))
                if "modify qos gp-opportunistic" in line)
    assert line.endswith(f"UsageFactor=1 PreemptExemptTime={shown}")
    assert f"grep -qx '11|requeue|1.000000|{shown}|gp-overdrawn'" in line
    assert slurm_state(plan, ORG).opportunistic.preempt_exempt_hours == cap


@pytest.mark.parametrize(("cap", "fill_slice", "shown"), [
    (8.0, 1.0, "01:00:00"), (4.0, 1.0, "01:00:00"), (4.0, 12.0, "04:00:00"),
    (8.0, 0.25, "00:15:00")])
def test_gp_opportunistic_is_exempt_for_the_contracts_fill_slice_under_its_cap(
        cap, fill_slice, shown):
    # with a fill slice, work beyond its grant is protected for min(cap, slice) (the
    # contract's preemptible_protection): the bundled models' 1 h under an 8 h or 4 h cap;
    # a slice longer than the cap gives the cap
    plan = plan_copy()
    plan["contract"]["min_runtime_cap_hours"] = cap
    plan["contract"]["fill_slice_hours"] = fill_slice
    line = next(line for line in commands(export_slurm(plan, ORG))
                if "modify qos gp-opportunistic" in line)
    assert line.endswith(f"UsageFactor=1 PreemptExemptTime={shown}")
    assert slurm_state(plan, ORG).opportunistic.preempt_exempt_hours == min(cap, fill_slice)


def test_rule_8_by_hand_an_overdrawn_project_keeps_its_pace_up_to_the_margin():
    # PLAN: as_of half the quarter gone (2026-11-16 of 2026-10-01..2027-01-01, 2208 h); p2's
    # budget 1500, used 0, pace 1500 / 2208 NGH per hour. Rule 8's line: 1500 × 1.5 = 2250
    # NGH run; the margin's (0.2): 1500 × 1.7 = 2550. p2 overdrawn from 2250; it keeps its
    # pace below 2550 and nothing from 2550 on; p1 (used 100 of 2000) is not overdrawn.
    from planner.exporters.slurm import PACE_WITHOUT_MARGIN, SHIPPED, SlurmExport

    pace = 1500 / 2208
    assert SHIPPED.pace_margin == 0.2
    assert SHIPPED.overdrawn_paces(PLAN, {"p2": 2249.0}) == {}
    assert SHIPPED.overdrawn_paces(PLAN, {"p2": 2250.0}) == {"p2": pytest.approx(pace)}
    assert SHIPPED.overdrawn_paces(PLAN, {"p2": 2549.0}) == {"p2": pytest.approx(pace)}
    assert SHIPPED.overdrawn_paces(PLAN, {"p2": 2550.0}) == {"p2": 0.0}
    # the pace before the margin: kept however far past the line
    assert PACE_WITHOUT_MARGIN.overdrawn_paces(PLAN, {"p2": 1e9}) == {"p2": pytest.approx(pace)}
    # the state carries the same figure (what the replay reads), with a margin of 0.5
    wide = SlurmExport(pace_margin=0.5)
    assert dict(wide.state(PLAN, ORG, {"p2": 2550.0}).overdrawn_pace) == {
        "p2": pytest.approx(pace)}
    assert dict(SHIPPED.state(PLAN, ORG, {"p2": 2550.0}).overdrawn_pace) == {"p2": 0.0}
