"""``planner-slurm``: the replay of what the exported Slurm script makes Slurm do, by hand.

Every case is one node of 8 GPUs (or two) over three days; the replans at 0, 24 and 48 h
plan with the bundled default model with a fill slice of 8 h (``EIGHT``: the cap on
protected runtime is 8 h, and opportunistic work is protected for min(cap, fill slice),
so ``PreemptExemptTime=08:00:00`` on ``gp-opportunistic``; the bundled 1 h slice is
tested on the command line below). Jobs without a
``time_limit_hours`` ask for their duration rounded up to a power of two hours.

The first cases switch the budget QOS's pace cap (``GrpTRES``) off (``pace="none"``) to
test the GPU-minutes, the exempt time and Fair Tree alone; the cap has cases of its own,
which test its mechanics below one node's GPUs with its floor off (``floor="none"``);
the floor (one node's GPUs for a project with budget left, shipped) has its own case.
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import planner
from planner.config import load_model
from planner.exporters.slurm import (
    BEFORE_RULE8,
    SHIPPED,
    account,
    export_slurm,
    qos_name,
    slurm_state,
)
from planner.inputs import load_scenario
from planner.run import plan_scenario
from planner.simulate.engine import PREEMPTED, Replay, replay
from planner.simulate.planner_policy import PlannerPolicy
from planner.simulate.replanner import Replanner
from planner.simulate.slurm_replay import (
    AS_SHIPPED,
    BUDGET,
    EXEMPT,
    OPPORTUNISTIC,
    SlurmExecutor,
    SlurmReplayOptions,
    SlurmReplayPolicy,
)
from tests.test_simulate import Q0, first_starts, trace, two_teams
from tests.tiny import scenario

_DEFAULT = load_model("default")
EIGHT = replace(_DEFAULT, contract=replace(_DEFAULT.contract, fill_slice_hours=8.0))
# the export variants these tests compare with what ships (SHIPPED, BEFORE_RULE8)
UNPACED = replace(SHIPPED, pace="none")  # no GrpTRES pace cap
UNPACED_BEFORE_RULE8 = replace(BEFORE_RULE8, pace="none")
# ... and the replay's: Slurm's backfill as first modelled (one reservation, for the
# first blocked job, no preemption), a site without bf_min_prio_reserve, an unbounded
# bf_window
FIRST_ONLY = SlurmReplayOptions(reserve_each=False)
EVERY_HEAD_RESERVES = SlurmReplayOptions(min_prio_reserve=False)
UNBOUNDED_WINDOW = SlurmReplayOptions(bf_window_hours=math.inf)


def tags(tr: pd.DataFrame, result) -> dict[str, set[str]]:
    """The QOS (tag) of each job's runs, by job id."""
    out: dict[str, set[str]] = {}
    for s in result.segments:
        out.setdefault(tr["job_id"].iat[s.job], set()).add(s.tag)
    return out


def test_a_spent_budget_qos_sends_the_next_job_to_gp_opportunistic():
    # a's budget is 40 NGH on H100 (rate 1): the plan at t=0 has used 0, so gp-a gets
    # GrpTRESMins=gres/gpu=2400 (40 GPU-hours). At t=0, in submit order:
    #   a1: 4 GPUs × limit 8 h = 32 GPU-h; 0 + 32 ≤ 40: runs under gp-a;
    #   a2: 1 GPU × 8 h = 8; Slurm counts a1's limit left (32) + 8 = 40 ≤ 40: gp-a;
    #   a3: 1 GPU × 8 h; 32 + 8 + 8 = 48 > 40: it would pend on QOSGrpGRESMinutes, so the
    #       wrapper sends it to gp-opportunistic, where it runs at once (6 of 8 GPUs used),
    #       exempt from preemption for its first 8 h.
    # (the `planner` executor runs all three at once too, but charges a3 to the budget.)
    sc = two_teams(days=3, budgets=(("a", 40.0), ("b", 0.0)))
    tr = trace([("a1", "a", 0, 4, 8.0, 8.0), ("a2", "a", 0, 1, 8.0, 8.0),
                ("a3", "a", 0, 1, 8.0, 8.0)])
    policy = SlurmReplayPolicy(EIGHT, export=UNPACED)
    result = replay(sc, tr, policy)
    assert first_starts(tr, result) == {"a1": 0.0, "a2": 0.0, "a3": 0.0}
    assert tags(tr, result) == {"a1": {BUDGET}, "a2": {BUDGET}, "a3": {EXEMPT}}
    # the replan at 24 h sees only the budget QOS's 40 GPU-hours as used (sacct less
    # gp-opportunistic, as `planner ingest` reads it): 40 − 40 = 0 minutes left
    assert policy.executor.state.minutes() == {"a": 0, "b": 0}
    assert policy.executor.budget_used.sum() == pytest.approx(40.0)


def test_with_the_budget_spent_a_job_pends_behind_budget_work_then_runs_opportunistic():
    # a's budget 40 NGH (2400 GPU-minutes), b's 400. t=0: a1 (8 GPUs × 4 h = 32 GPU-h)
    # runs under gp-a and fills the node. t=1: a2 (1 GPU, 4 h: 32 + 4 = 36 ≤ 40) and b1
    # (1 GPU, 4 h, under gp-b) queue; t=2: a3 (2 GPUs × 4 h: 32 + 4 + 8 = 44 > 40) goes
    # opportunistic. At t=4 a1 ends: the budget jobs come first (QOS priority 100 over 0),
    # a2 and b1 start under their budget QOS; a3 follows under gp-opportunistic in the GPUs
    # left.
    sc = two_teams(days=3, budgets=(("a", 40.0), ("b", 400.0)))
    tr = trace([("a1", "a", 0, 8, 4.0, 4.0), ("a2", "a", 1, 1, 4.0, 4.0),
                ("b1", "b", 1, 1, 4.0, 4.0), ("a3", "a", 2, 2, 4.0, 4.0)])
    result = replay(sc, tr, SlurmReplayPolicy(EIGHT, export=UNPACED))
    assert first_starts(tr, result) == {"a1": 0.0, "a2": 4.0, "b1": 4.0, "a3": 4.0}
    assert tags(tr, result) == {"a1": {BUDGET}, "a2": {BUDGET}, "b1": {BUDGET},
                                "a3": {EXEMPT}}


def test_an_opportunistic_job_is_requeued_by_a_budget_job_only_after_its_exempt_time():
    # t=0: b's eight unallocated one-GPU jobs (30 h, resumable) fill the node under
    # gp-opportunistic. t=1: a submits four allocated one-GPU jobs (20 h, limit 32 h, min
    # runtime 8 h); the plan at 0 saw no demand of a, so gp-a's limit is a's whole budget,
    # 500 GPU-hours ≥ 4 × 32: they are budget-QOS jobs, Preempt=gp-opportunistic. But b's
    # jobs are exempt (PreemptExemptTime 8 h) until t=8: a's jobs wait, and at t=8 each
    # requeues one of b's (4 preemptions; b's jobs resume later with their work left).
    # The `planner` executor, whose unallocated work has no protected runtime, starts a's
    # four at t=1 (its test_planner_work_the_plan_did_not_see_runs_paced_at_once).
    sc = two_teams(days=3, budgets=(("a", 500.0), ("b", 0.0)))
    rows = [(f"b{i}", "b", 0, 1, 30.0, 0.0) for i in range(8)]
    rows += [(f"a{i}", "a", 1, 1, 20.0, 8.0) for i in range(4)]
    # (rule 8 off: b, with no budget, is overdrawn from the start, and its jobs would yield
    # at once: test_rule_8_an_overdrawn_projects_jobs_yield_at_once_and_still_fill_idle_gpus)
    tr = trace(rows)
    result = replay(sc, tr, SlurmReplayPolicy(EIGHT, export=UNPACED_BEFORE_RULE8))
    starts = first_starts(tr, result)
    assert [starts[f"a{i}"] for i in range(4)] == [8.0] * 4
    assert result.preemptions.sum() == 4
    cut = [s for s in result.segments if s.ended == PREEMPTED]
    assert {(s.start, s.end, s.tag) for s in cut} == {(0.0, 8.0, OPPORTUNISTIC)}
    assert {tr["project"].iat[s.job] for s in cut} == {"b"}
    assert replay(sc, tr, PlannerPolicy()).first_start[8:].tolist() == [1.0] * 4


def test_fair_tree_puts_the_account_that_used_less_first():
    # a and b are siblings of equal fairshare (100), each with a budget QOS. t=0: b1 takes
    # the node (8 GPUs, 10 h). t=1: b2 (8 GPUs) queues; t=2: a1 (8 GPUs) queues. At t=10 b1
    # ends: both waiting jobs are budget-QOS jobs (same QOS priority), so Fair Tree
    # decides: b has used 80 GPU-hours (decayed), a none, so a's level fairshare is
    # infinite and a1 goes first though b2 was submitted earlier; b2 follows at 20.
    sc = two_teams(days=3, budgets=(("a", 1000.0), ("b", 1000.0)), same_team=True)
    tr = trace([("b1", "b", 0, 8, 10.0, 8.0), ("b2", "b", 1, 8, 10.0, 8.0),
                ("a1", "a", 2, 8, 10.0, 8.0)])
    result = replay(sc, tr, SlurmReplayPolicy(export=UNPACED))
    assert first_starts(tr, result) == {"b1": 0.0, "a1": 10.0, "b2": 20.0}
    # FIFO (the order without fair share) would have started b2 at 10
    assert tags(tr, result) == {"b1": {BUDGET}, "b2": {BUDGET}, "a1": {BUDGET}}


class _OneReservation(SlurmExecutor):
    """Every plan holds one node of c1 for a over its first period (request r1).

    Stands in for the reservation requests the replans will carry (gang jobs waiting);
    the replay applies whatever reservations the plan has.
    """

    def apply_first_period(self, sim, body: dict, first: str) -> None:
        end = (pd.Timestamp(first) + pd.Timedelta(hours=24)).strftime("%Y-%m-%dT%H:%M:%SZ")
        held = {"request_id": "r1", "project": "a", "cluster": "c1", "nodes": 1,
                "start": first, "end": end}
        super().apply_first_period(sim, {**body, "reservations": [held]}, first)


def test_a_reservations_nodes_run_only_its_accounts_jobs():
    # Two nodes; gp-r1 holds one (the highest numbered, node 1) for account a from 0 to
    # 24 h. t=0: b's sixteen one-GPU jobs (4 h) can use node 0 only: eight start, eight
    # wait although node 1 is idle. t=1: a's 8-GPU job (2 h) runs inside the reservation,
    # on node 1, at once. At 4 b's first eight end and the other eight start on node 0.
    sc = two_teams(nodes=2, days=3, budgets=(("a", 500.0), ("b", 500.0)))
    rows = [(f"b{i:02d}", "b", 0, 1, 4.0, 0.0) for i in range(16)]
    rows += [("a1", "a", 1, 8, 2.0, 2.0)]
    tr = trace(rows)
    result = replay(sc, tr, Replanner(_OneReservation()))
    starts = first_starts(tr, result)
    assert sorted(starts[f"b{i:02d}"] for i in range(16)) == [0.0] * 8 + [4.0] * 8
    assert starts["a1"] == 1.0
    nodes = {tr["job_id"].iat[s.job]: s.nodes for s in result.segments}
    assert nodes["a1"] == (1,)
    assert {nodes[f"b{i:02d}"] for i in range(16)} == {(0,)}
    # without the reservation all sixteen start at once
    free = replay(sc, tr, SlurmReplayPolicy())
    assert sorted(first_starts(tr, free)[f"b{i:02d}"] for i in range(16)) == [0.0] * 16


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_the_replay_holds_the_values_the_exported_script_sets_on_the_sample(tmp_path):
    # The sample's plan, exported and applied to the fake Slurm: every budget QOS limit,
    # account share, the exempt time and every reservation (account, node count, window)
    # the script sets is what the replay applied from the same plan.
    from tests.test_export_slurm import FakeSlurm

    scenario = load_scenario("data/sample")
    plan = plan_scenario(scenario, EIGHT).plan.body
    first = plan["periods"][0]["start"]
    clusters = [c["cluster"] for c in plan["clusters"]]
    slurm = FakeSlurm(tmp_path, partitions=clusters)
    held = slurm.apply(export_slurm(plan, scenario.org), now=first.rstrip("Z"))

    trace_one = pd.DataFrame({
        "job_id": ["j"], "project": [scenario.tree.leaves[0]], "cluster": [clusters[0]],
        "submit": pd.Series([Q0], dtype="datetime64[ns, UTC]"), "gpus": [1],
        "duration_hours": [1.0], "min_runtime_hours": [0.0], "resumable": [True]})
    policy = SlurmReplayPolicy(EIGHT)
    sim = Replay(scenario, trace_one, policy)
    policy.prepare(sim)
    sim.now = (pd.Timestamp(first) - scenario.config.quarter_start) / pd.Timedelta(hours=1)
    policy.executor.apply_first_period(sim, plan, first)

    state = slurm_state(plan, scenario.org)
    assert len(state.budgets) == len(plan["budgets"]) > 0
    for b in state.budgets:
        minutes = int(held["qos"][qos_name(b.project)]["grptresmins"].split("=")[1])
        p = sim.tree.leaf_index[b.project]
        assert policy.executor.limit_hours[p] * 60 == pytest.approx(minutes)
        assert held["account"][account(b.project)]["defaultqos"] == qos_name(b.project)
    for node in scenario.tree.ids:
        share = int(held["account"][account(node)]["fairshare"])
        assert policy.executor.shares[scenario.tree.index[node]] == share
    h, m, s = held["qos"]["gp-opportunistic"]["preemptexempttime"].split(":")
    assert policy.executor.exempt_hours * 3600 == int(h) * 3600 + int(m) * 60 + int(s) == 8 * 3600
    assert held["qos"]["gp-opportunistic"]["priority"] == "11"  # above gp-overdrawn (rule 8)
    # reservations: the same ones, each on as many nodes, for the same account and window
    assert state.reservations and set(held["reservation"]) == set(policy.executor.nodes_of)
    q0 = scenario.config.quarter_start
    for r in state.reservations:
        row = held["reservation"][r.name]
        c, count, nodes = policy.executor.nodes_of[r.name]
        assert sim.cluster_ids[c] == row["PartitionName"]
        assert count == len(nodes) == int(row["NodeCnt"])
        assert row["Accounts"] == account(r.project)
        start = (pd.Timestamp(r.start) - q0) / pd.Timedelta(hours=1)
        end = (pd.Timestamp(r.end) - q0) / pd.Timedelta(hours=1)
        assert (start, end, sim.tree.leaf_index[r.project], nodes) in policy.executor.reserved[c]
    # reservations overlapping in time never share a node
    for held_c in policy.executor.reserved:
        for i, (a0, a1, _, na) in enumerate(held_c):
            for b0, b1, _, nb in held_c[i + 1:]:
                assert not (a0 < b1 and b0 < a1 and na & nb)
    assert np.all(np.isnan(policy.executor.limit_hours) == [p not in state.minutes()
                                                   for p in sim.tree.leaves])
    json.dumps(held)  # the fake's state is plain data


def test_planner_slurm_on_the_command_line_protects_for_the_models_cap(tmp_path):
    # `planner simulate --policy planner-slurm --model M`: U (b, unallocated, 8 GPUs, 30 h)
    # takes the node at 23 under gp-opportunistic; A (a, allocated, 4 GPUs, limit 2 h:
    # 8 GPU-hours of a's 100) queues at 23.5. The plan of 0 saw no work of a, so gp-a's
    # pace cap is 0 GPUs and A cannot start under gp-a; the replan at 24 sees A and caps gp-a
    # at its 4 GPUs, and A requeues U once U's exempt time, the contract's protection of
    # opportunistic work, min(min_runtime_cap_hours, fill_slice_hours), has passed: at 24
    # with the bundled models (their 1 h fill slice binds); with the slice widened to 24 h,
    # the cap: at 31 from the default model (8 h), 27 from strict-budgets (4 h).
    from planner.cli import main
    from tests.test_simulate_cli import HEADER, two_team_folder

    folder = two_team_folder(tmp_path / "sc")
    trace = tmp_path / "trace.csv"
    trace.write_text(HEADER + "U,b,c1,2026-10-01T23:00:00Z,8,30,0,true\n"
                              "A,a,c1,2026-10-01T23:30:00Z,4,2,1,true\n")
    models = {"default": "default"}
    for name in ("default", "strict-budgets"):
        bundled = (Path(planner.__file__).parent / "models" / f"{name}.toml").read_text()
        assert bundled.count("fill_slice_hours = 1.0") == 1
        wide = tmp_path / f"{name}-wide-slice.toml"
        wide.write_text(bundled.replace("fill_slice_hours = 1.0", "fill_slice_hours = 24.0"))
        models[f"{name}-wide-slice"] = str(wide)
    starts = {}
    for label, model in models.items():
        out = tmp_path / label
        assert main(["simulate", str(folder), "--trace", str(trace), "--policy",
                     "planner-slurm", "--model", model, "--out", str(out)]) == 0
        jobs = (out / "planner-slurm-jobs.csv").read_text().splitlines()
        starts[label] = next(line.split(",")[5] for line in jobs if line.startswith("A,"))
    assert starts == {"default": "2026-10-02T00:00:00Z",
                      "default-wide-slice": "2026-10-02T07:00:00Z",
                      "strict-budgets-wide-slice": "2026-10-02T03:00:00Z"}


def test_planned_reservations_become_slurm_reservations_not_engine_holds():
    # A plan placing a reservation for a's waiting 8-GPU job G: the Slurm replay holds the
    # node as a Slurm reservation for a's account (its own bookkeeping), and makes no
    # engine hold (the planner executor's drain is not what Slurm does; an engine hold
    # that nothing starts would keep the node idle until its end).
    sc = two_teams(days=3, budgets=(("a", 500.0), ("b", 0.0)))
    tr = trace([("G", "a", 0, 8, 5.0, 1.0)])
    policy = SlurmReplayPolicy(EIGHT)
    sim = Replay(sc, tr, policy)
    policy.prepare(sim)
    body = {"reservations": [{"request_id": "G", "project": "a", "cluster": "c1", "nodes": 1,
                              "start": "2026-10-01T00:00:00Z",
                              "end": "2026-10-01T08:00:00Z"}]}
    policy.executor.hold_reservations(sim, body, {"G": 0})
    assert sim.holds == {}
    # the same call on the planner executor holds the node for G
    planner = PlannerPolicy(EIGHT)
    sim2 = Replay(sc, tr, planner)
    planner.prepare(sim2)
    sim2._enqueue(0)  # G submitted: waiting at 0
    assert sim2.is_waiting(0)
    planner.executor.hold_reservations(sim2, body, {"G": 0})
    assert [h.job for h in sim2.holds.values()] == [0]


def test_planner_slurm_asks_no_reservations_for_waiting_gang_jobs_by_default():
    # G (a, 8 GPUs = the node) has waited 30 h at a replan at 30: with a threshold of one
    # period (24 h; `None`) the `planner` executor asks a reservation for it, by default
    # (∞) it asks none, nor does planner-slurm (docs/explanation/slurm.md says why), unless told a
    # threshold.
    sc = two_teams(days=3, budgets=(("a", 500.0), ("b", 0.0)))
    tr = trace([("G", "a", 0, 8, 5.0, 1.0)])
    as_of = sc.config.quarter_start + pd.Timedelta(hours=30)
    asked = {}
    for name, policy in (("planner", PlannerPolicy(EIGHT)),
                         ("planner-1p", PlannerPolicy(EIGHT, gang_wait_hours=None)),
                         ("slurm", SlurmReplayPolicy(EIGHT)),
                         ("slurm-12h", SlurmReplayPolicy(EIGHT, gang_wait_hours=12.0))):
        sim = Replay(sc, tr, policy)
        policy.prepare(sim)
        sim._enqueue(0)
        sim.now = 30.0
        asked[name] = list(policy.gang_requests(sim, as_of)["request_id"])
    assert asked == {"planner": [], "planner-1p": ["G"], "slurm": [], "slurm-12h": ["G"]}


class _FixedGrants(SlurmExecutor):
    """Every plan grants fixed GPUs on c1 over its first period (``grants``: project -> (g, o)).

    Stands in for what the replans would grant; the replay applies the exporter's state of
    that plan (the pace cap ⌊g + o⌋ included) as the script would.
    """

    def __init__(self, grants: dict[str, tuple[float, float]], export=SHIPPED,
                 options=AS_SHIPPED) -> None:
        super().__init__(export, options)
        self.grants = grants

    def apply_first_period(self, sim, body: dict, first: str) -> None:
        allocations = [{"project": p, "cluster": "c1", "period_start": first, "kind": kind,
                        "gpus": gpus, "gpu_hours": 24 * gpus}
                       for p, (g, o) in self.grants.items()
                       for kind, gpus in (("guaranteed", g), ("opportunistic", o)) if gpus]
        super().apply_first_period(sim, {**body, "allocations": allocations}, first)


def fixed_grants(grants: dict[str, tuple[float, float]], export=SHIPPED,
                 options=AS_SHIPPED) -> Replanner:
    """``planner-slurm`` (model ``EIGHT``) whose every plan grants ``grants`` (``_FixedGrants``)."""
    return Replanner(_FixedGrants(grants, export, options), EIGHT)


def job_runs(tr: pd.DataFrame, result, job_id: str) -> list[tuple[float, float, str]]:
    """(start, end, how it ended) of each run of job ``job_id``, the runs merged across QOS
    re-tags (an exempt job that becomes preemptable continues the same run)."""
    row = int(np.flatnonzero(tr["job_id"].to_numpy() == job_id)[0])
    merged: list[list] = []
    for s in sorted(result.segments, key=lambda s: s.start):
        if s.job != row:
            continue
        if merged and merged[-1][1] == s.start and merged[-1][2] != PREEMPTED:
            merged[-1][1:] = [s.end, s.ended]
        else:
            merged.append([s.start, s.end, s.ended])
    return [tuple(m) for m in merged]


def _budget_gpus_at(tr: pd.DataFrame, result, project: str, t: float) -> int:
    """GPUs ``project``'s budget-QOS jobs hold at ``t``."""
    return sum(s.gpus for s in result.segments if s.tag == BUDGET and s.start <= t < s.end
               and tr["project"].iat[s.job] == project)


def test_a_project_capped_at_its_pace_runs_the_rest_opportunistic_and_reclaimable():
    # (every job here is allocated work: min runtime 1 h, resumable.) One node of 8 GPUs.
    # Every plan grants a 1.5 guaranteed + 0.75 opportunistic GPUs (gp-a:
    # GrpTRES=gres/gpu=⌊2.25⌋ = 2) and b 6 (gp-b: 6); budgets are ample.
    # t=0: a's four one-GPU jobs (10 h): a1, a2 run under gp-a (2 GPUs = the cap); a3, a4
    #      would pend on QOSGrpGRES, so the wrapper sends them to gp-opportunistic, where
    #      they run at once in the idle GPUs, exempt from preemption for 8 h.
    # t=1: b's six one-GPU jobs (20 h) under gp-b: b1..b4 take the 4 idle GPUs; b5, b6
    #      need a3's and a4's GPUs, which are exempt until 8: at 8 they requeue them.
    # t=10: a1, a2 end; gp-a holds nothing, so a3 and a4 (requeued, waiting) now fit the
    #      cap and restart under gp-a in the GPUs a1 and a2 left, each with the 2 h of work
    #      it had left (resumable).
    sc = two_teams(days=3, budgets=(("a", 1000.0), ("b", 1000.0)))
    rows = [(f"a{i}", "a", 0, 1, 10.0, 1.0) for i in range(1, 5)]
    rows += [(f"b{i}", "b", 1, 1, 20.0, 1.0) for i in range(1, 7)]
    tr = trace(rows)
    policy = fixed_grants({"a": (1.5, 0.75), "b": (6.0, 0.0)}, replace(SHIPPED, floor="none"))
    result = replay(sc, tr, policy)
    assert policy.executor.state.limits()["a"][1:] == (2, True)  # GrpTRES 2 GPUs, Flags=NoDecay
    starts = first_starts(tr, result)
    assert [starts[f"a{i}"] for i in range(1, 5)] == [0.0] * 4
    assert [starts[f"b{i}"] for i in range(1, 7)] == [1.0] * 4 + [8.0] * 2
    cut = [s for s in result.segments if s.ended == PREEMPTED]
    assert sorted((tr["job_id"].iat[s.job], s.start, s.end) for s in cut) == [
        ("a3", 0.0, 8.0), ("a4", 0.0, 8.0)]
    assert {s.tag for s in cut} <= {EXEMPT, OPPORTUNISTIC}
    assert job_runs(tr, result, "a3")[-1][:2] == (10.0, 12.0)  # its 2 h left, under gp-a
    # (a run's tag is the one it ends under: exempt until 8, then preemptable)
    assert tags(tr, result)["a3"] == {OPPORTUNISTIC, BUDGET} and tags(tr, result)["a1"] == {BUDGET}
    # gp-a never holds more than its cap, gp-b never more than its 6
    for t in np.arange(0.0, 72.0, 0.5):
        assert _budget_gpus_at(tr, result, "a", t) <= 2
        assert _budget_gpus_at(tr, result, "b", t) <= 6
    # without the cap, all four of a's jobs are budget jobs and nothing is preempted
    free = replay(sc, tr, fixed_grants({"a": (1.5, 0.75), "b": (6.0, 0.0)},
                                       replace(UNPACED, floor="none")))
    assert tags(tr, free)["a3"] == {BUDGET} and free.preemptions.sum() == 0


def test_a_job_wider_than_its_projects_cap_runs_only_opportunistic_unless_the_cap_widens():
    # gp-a is capped at 2 GPUs (guaranteed 2, headroom 0; no floor).
    # Without the widening (widens=False, the export before it): a's 8-GPU job never fits
    # under gp-a, so it runs under gp-opportunistic at once on the idle node; b's 8-GPU
    # budget job at 2 requeues it once its 8 h exemption has passed (at 8), and it
    # restarts, again opportunistic, when b's job ends at 13, with its 12 h of work left
    # (resumable). (With the shipped floor gp-a's cap is a node, 8, and A runs on its
    # budget: test_a_project_the_replan_granted_nothing_runs_a_node_on_its_budget.)
    sc = two_teams(days=3, budgets=(("a", 1000.0), ("b", 1000.0)))
    tr = trace([("A", "a", 0, 8, 20.0, 1.0), ("B", "b", 2, 8, 5.0, 1.0)])
    grants = {"a": (2.0, 0.0), "b": (8.0, 0.0)}
    result = replay(sc, tr, fixed_grants(grants, replace(SHIPPED, floor="none", widens=False)))
    assert first_starts(tr, result) == {"A": 0.0, "B": 8.0}
    assert [r[:2] for r in job_runs(tr, result, "A")] == [(0.0, 8.0), (13.0, 25.0)]
    assert BUDGET not in tags(tr, result)["A"] and tags(tr, result)["B"] == {BUDGET}
    # Shipped: a has budget left and is not ahead of its pace (nothing spent), so the
    # replan at 0, which finds A pending, widens gp-a's cap to A's 8 GPUs (the script's
    # wide_cap): A runs on its budget from 0, uninterrupted (b is not ahead of its pace
    # either, so b's budget job may not take it back), and B waits for the node until A
    # ends at 20.
    result = replay(sc, tr, fixed_grants(grants, replace(SHIPPED, floor="none")))
    assert first_starts(tr, result) == {"A": 0.0, "B": 20.0}
    assert [r[:2] for r in job_runs(tr, result, "A")] == [(0.0, 20.0)]
    assert tags(tr, result) == {"A": {BUDGET}, "B": {BUDGET}} and result.preemptions.sum() == 0


def test_a_project_the_replan_granted_nothing_runs_a_node_on_its_budget():
    # Philly's `systems` team, by hand: its projects had no work at the replan, so the plan
    # grants them nothing; their 8-GPU jobs came a couple of hours later. One node of 8.
    # t=0: b (no budget) fills the node with eight unallocated one-GPU jobs (30 h) under
    #      gp-opportunistic, exempt from preemption for 8 h. The replan at 0 sees no work
    #      of a (budget 500 NGH): no allocation.
    # t=1: a submits A, 8 GPUs for 3 h (allocated work, limit 4 h: 32 GPU-h ≤ 500).
    # Shipped (floor="node"): gp-a's GrpTRES is one node's GPUs, 8, although the plan grants
    #      a nothing: A is a budget-QOS job (Priority=100, Preempt=gp-opportunistic) and
    #      requeues b's eight jobs when their exemption ends, at 8.
    # Without the floor gp-a's cap is 0 (GrpTRES=gres/gpu=0): A pends on QOSGrpGRES, the
    #      wrapper moves it to gp-opportunistic, where it cannot preempt b's jobs, and it
    #      waits for the replan at 24, which sees its demand and raises the cap: it then
    #      requeues b's jobs (exempt only until 8) and starts at 24, on its budget.
    sc = two_teams(days=3, budgets=(("a", 500.0), ("b", 0.0)))
    rows = [(f"b{i}", "b", 0, 1, 30.0, 0.0) for i in range(8)]
    # (rule 8 off: b, with no budget, is overdrawn from the start, and its jobs would yield
    # at once: test_rule_8_an_overdrawn_projects_jobs_yield_at_once_and_still_fill_idle_gpus)
    tr = trace(rows + [("A", "a", 1, 8, 3.0, 3.0)])
    shipped = SlurmReplayPolicy(EIGHT, export=BEFORE_RULE8)
    result = replay(sc, tr, shipped)
    assert first_starts(tr, result)["A"] == 8.0
    assert tags(tr, result)["A"] == {BUDGET}
    assert result.preemptions.sum() == 8
    # the last replan (48): a has budget left and nothing granted, cap a node; b no budget
    limits = shipped.executor.state.limits()
    assert limits["a"][1] == 8 and limits["b"][1] == 0
    unfloored = replay(sc, tr, SlurmReplayPolicy(EIGHT, export=replace(BEFORE_RULE8,
                                                                       floor="none")))
    assert first_starts(tr, unfloored)["A"] == 24.0
    assert tags(tr, unfloored)["A"] == {BUDGET}


def test_backfill_reserves_nothing_for_a_head_that_cannot_start_within_bf_window():
    # One node of 8; budgets ample. t=0: X (a, 4 GPUs, 40 h, limit 64 h) runs. t=1: H (b,
    # 8 GPUs, 2 h) cannot fit: b has used nothing, so Fair Tree puts it first, and it is
    # the blocked head; by the running jobs' limits it starts at 64 (X's limit), 63 h
    # ahead. t=2: S (a, 2 GPUs, 50 h, limit 64 h) fits in the 4 idle GPUs but would end
    # at 66, past H's expected start, on H's only node.
    # Slurm's default bf_window (1440 min, 24 h): H's start is beyond it, so backfill
    # reserves nothing for it and S starts at 2; H gets the node when X (40) and S (52)
    # have ended: 52. With an unbounded window (the replay before) S must stay off H's
    # node: the 4 GPUs stay idle from 2 to 40, H starts at 40 and S after it, at 42.
    sc = two_teams(days=3, budgets=(("a", 1000.0), ("b", 1000.0)))
    tr = trace([("X", "a", 0, 4, 40.0, 1.0), ("H", "b", 1, 8, 2.0, 1.0),
                ("S", "a", 2, 2, 50.0, 1.0)])
    shipped = replay(sc, tr, SlurmReplayPolicy(EIGHT))
    assert first_starts(tr, shipped) == {"X": 0.0, "H": 52.0, "S": 2.0}
    unbounded = replay(sc, tr, SlurmReplayPolicy(EIGHT, options=UNBOUNDED_WINDOW))
    assert first_starts(tr, unbounded) == {"X": 0.0, "H": 40.0, "S": 42.0}
    for result in (shipped, unbounded):
        assert set().union(*tags(tr, result).values()) == {BUDGET}
        assert result.preemptions.sum() == 0


def test_backfill_reserves_for_every_blocked_budget_job_not_only_the_first():
    # Two nodes of 8; budgets ample, no pace cap. t=0: a1 and a2 (a, 6 GPUs, 10 h, limit
    # 16 h) run, one on each node (2 GPUs idle on each). t=1: b1 (b, 8 GPUs, 2 h) and a3
    # (a, 8 GPUs, 2 h) arrive; b has used nothing, so Fair Tree puts b first: b1 is the
    # first job that cannot start and its reservation takes node 0 at 16 (the limits).
    # t=2: s (a, 2 GPUs, 20 h, limit 32 h), after a3 in a's order, fits in the idle GPUs
    # of either node, but would run past 16.
    # Slurm's backfill tests a3 as well and, as it cannot start either, reserves node 1
    # for it at 16: s must stay off both nodes. At 10 a1 and a2 end: b1 and a3 start
    # (10 → 12), then s at 12. The earlier replay reserved for the first blocked job only
    # (``reserve_each=False``): s took node 1's idle GPUs at 2, and a3 waited until b1
    # left node 0: 12.
    sc = two_teams(days=3, budgets=(("a", 1000.0), ("b", 1000.0)), nodes=2)
    tr = trace([("a1", "a", 0, 6, 10.0, 1.0), ("a2", "a", 0, 6, 10.0, 1.0),
                ("b1", "b", 1, 8, 2.0, 1.0), ("a3", "a", 1, 8, 2.0, 1.0),
                ("s", "a", 2, 2, 20.0, 1.0)])
    each = replay(sc, tr, SlurmReplayPolicy(EIGHT, export=UNPACED))
    assert first_starts(tr, each) == {"a1": 0.0, "a2": 0.0, "b1": 10.0, "a3": 10.0,
                                      "s": 12.0}
    first_only = replay(sc, tr, SlurmReplayPolicy(EIGHT, export=UNPACED, options=FIRST_ONLY))
    assert first_starts(tr, first_only) == {"a1": 0.0, "a2": 0.0, "b1": 10.0, "a3": 12.0,
                                            "s": 2.0}
    for result in (each, first_only):
        assert set().union(*tags(tr, result).values()) == {BUDGET}
        assert result.preemptions.sum() == 0


def test_a_second_reservation_of_the_same_size_leaves_the_first_ones_nodes():
    # Four nodes of 8; budgets ample, no pace cap; limits = durations. t=0: a's w (8 GPUs,
    # 6 h), x0 (8, 2 h), x1 (8, 3 h), y (7, 5 h) start, in that order, on nodes 0, 1, 2, 3:
    # node 1 frees at 2, node 2 at 3, node 3 (1 GPU idle now) at 5, node 0 at 6. t=1: b1
    # (b, 16 GPUs = 2 nodes, 1 h), h (a, 16 GPUs, 1 h), l (a, 1 GPU, 8 h) arrive. b has
    # used nothing, so Fair Tree puts b first: b1 cannot start, and its reservation takes
    # nodes 1 and 2 at 3. Backfill then tests h, a's first waiting job: it cannot start
    # either, and its reservation, the same size at the same cluster state, must leave
    # nodes 1 and 2 to b1: nodes 3 and 0, at 6. l fits now on node 3's idle GPU, but its
    # 8 h would reach both reservations: it must stay off all four nodes. At 3 b1 starts
    # (3 → 4); h's reservation is then nodes 1 and 2 at 4, and l starts on node 3 at 3.
    # The backfill remembers each reservation for the pass keyed on the reservations
    # before it: without that part of the key h's is b1's answer again (nodes 1 and 2 at
    # 3), and l starts at 1 on node 3, delaying h (a case too rare for the property tests
    # in tests/test_simulate_props.py, which compare with the plain pass).
    sc = two_teams(days=3, budgets=(("a", 1000.0), ("b", 1000.0)), nodes=4)
    tr = trace([("w", "a", 0, 8, 6.0, 1.0), ("x0", "a", 0, 8, 2.0, 1.0),
                ("x1", "a", 0, 8, 3.0, 1.0), ("y", "a", 0, 7, 5.0, 1.0),
                ("b1", "b", 1, 16, 1.0, 1.0), ("h", "a", 1, 16, 1.0, 1.0),
                ("l", "a", 1, 1, 8.0, 1.0)])
    tr["time_limit_hours"] = tr["duration_hours"]
    made: list[tuple[float, str, tuple[float, frozenset[int]]]] = []

    class Watched(SlurmExecutor):
        def _reserve(self, sim, c, job, plans):
            before = len(plans)
            super()._reserve(sim, c, job, plans)
            made.extend((sim.now, tr["job_id"].iat[job], r) for r in plans[before:])

    result = replay(sc, tr, Replanner(Watched(UNPACED), EIGHT))
    assert first_starts(tr, result) == {"w": 0.0, "x0": 0.0, "x1": 0.0, "y": 0.0,
                                        "b1": 3.0, "h": 4.0, "l": 3.0}
    assert made[:2] == [(1.0, "b1", (3.0, frozenset({1, 2}))),
                        (1.0, "h", (6.0, frozenset({0, 3})))]
    assert set().union(*tags(tr, result).values()) == {BUDGET}
    assert result.preemptions.sum() == 0


def test_backfill_starts_a_later_budget_job_by_requeueing_opportunistic_work():
    # Two nodes of 8; no pace cap; a and b have budgets, o none (its jobs run under
    # gp-opportunistic, exempt for their first 8 h, the fill slice here).
    # t=0: O (o, 8 GPUs, 30 h, limit 32 h) takes node 0, X (b, 4 GPUs, 20 h, limit 32 h)
    # node 1. t=1: H (a, 16 GPUs, 2 h) needs both nodes; a has used nothing, so it comes
    # first, and X, budget work, cannot be requeued: H is the first job that cannot start,
    # its reservation both nodes at 32 (X's limit). t=2: A (b, 8 GPUs, 4 h, limit 4 h).
    # At 8 O's exemption ends. Slurm's backfill tests A after H: it ends at 12, before H's
    # planned start, so it may use H's nodes, and as a budget job it requeues O: A runs
    # 8 → 12. H starts when X ends, 20. Without preemption in backfill (the earlier
    # replay, ``reserve_each=False``) A waits behind H until 22, and H requeues O at 20.
    sc = scenario(clusters=[("c1", "H100", 2, 8)],
                  org=[("t", "", 1.0), ("a", "t", 1.0), ("b", "t", 1.0), ("o", "t", 1.0)],
                  budgets=[("a", 1000.0), ("b", 1000.0), ("o", 0.0)],
                  quarter_start="2026-10-01", quarter_end="2026-10-04", as_of="2026-10-01")
    tr = trace([("O", "o", 0, 8, 30.0, 1.0), ("X", "b", 0, 4, 20.0, 1.0),
                ("H", "a", 1, 16, 2.0, 1.0), ("A", "b", 2, 8, 4.0, 1.0)])
    # (rule 8 off: o, with no budget, would be overdrawn and requeued at once)
    each = replay(sc, tr, SlurmReplayPolicy(EIGHT, export=UNPACED_BEFORE_RULE8))
    assert {k: v for k, v in first_starts(tr, each).items() if k in "HA"} == {
        "H": 20.0, "A": 8.0}
    assert job_runs(tr, each, "O")[0] == (0.0, 8.0, PREEMPTED)
    first_only = replay(sc, tr, SlurmReplayPolicy(EIGHT, export=UNPACED_BEFORE_RULE8,
                                                  options=FIRST_ONLY))
    assert {k: v for k, v in first_starts(tr, first_only).items() if k in "HA"} == {
        "H": 20.0, "A": 22.0}
    assert job_runs(tr, first_only, "O")[0] == (0.0, 20.0, PREEMPTED)
    for result in (each, first_only):
        assert tags(tr, result)["A"] == tags(tr, result)["H"] == {BUDGET}
        assert result.preemptions.sum() == 1


def test_slurm_protects_opportunistic_work_for_its_exempt_time_not_its_min_runtime():
    # The bundled model: gp-opportunistic's PreemptExemptTime is min(cap 8 h, fill slice
    # 1 h) = 1 h. One node of 8. t=0: B (b, which has no budget: gp-opportunistic; 8 GPUs,
    # 20 h, min runtime 8 h in the trace, resumable) takes the node. t=2: A (a, 8 GPUs,
    # 3 h) runs on a's budget (the node floor: the plan at 0 saw no work of a) and may
    # preempt gp-opportunistic. Slurm knows nothing of B's min runtime: B has been exempt
    # only until 1, so A requeues it at 2 and B resumes at 5 with its 18 h left. (The
    # replay before protected B for its trace min runtime, as the `planner` executor
    # protects allocated work, and A started only at 8.)
    sc = two_teams(days=3, budgets=(("a", 500.0), ("b", 0.0)))
    # (rule 8 off: b, with no budget, is overdrawn from the start, and its jobs would yield
    # at once: test_rule_8_an_overdrawn_projects_jobs_yield_at_once_and_still_fill_idle_gpus)
    tr = trace([("B", "b", 0, 8, 20.0, 8.0), ("A", "a", 2, 8, 3.0, 3.0)])
    result = replay(sc, tr, SlurmReplayPolicy(_DEFAULT, export=BEFORE_RULE8))
    assert first_starts(tr, result) == {"B": 0.0, "A": 2.0}
    assert job_runs(tr, result, "B") == [(0.0, 2.0, PREEMPTED), (5.0, 23.0, "done")]
    # (a run's tag is the one it ends under: both of B's runs outlived their exemption)
    assert tags(tr, result) == {"B": {OPPORTUNISTIC}, "A": {BUDGET}}


def test_a_waiting_opportunistic_job_reserves_no_nodes_bf_min_prio_reserve():
    # One node of 8; b has no budget, so its jobs run under gp-opportunistic. t=0: X (a's
    # budget, 4 GPUs, 10 h, limit 16 h) runs. t=1: W (b, 8 GPUs, 2 h) cannot fit: the
    # first job that cannot start; by X's limit it could start at 16, within bf_window.
    # t=2: S (b, 2 GPUs, 20 h, limit 32 h) fits in the idle GPUs but would end after 16
    # on W's only node.
    # Shipped (bf_min_prio_reserve = the QOS weight): W, a gp-opportunistic job, is below
    # it and reserves nothing, so S starts at 2; W gets the node when X (10) and S (22)
    # have ended: 22. Without the setting (min_prio_reserve=False) W's reservation keeps
    # S off the node: 4 GPUs idle from 2 to 10, W runs from 10 to 12, then S.
    sc = two_teams(days=3, budgets=(("a", 1000.0), ("b", 0.0)))
    tr = trace([("X", "a", 0, 4, 10.0, 1.0), ("W", "b", 1, 8, 2.0, 1.0),
                ("S", "b", 2, 2, 20.0, 1.0)])
    shipped = replay(sc, tr, SlurmReplayPolicy(EIGHT))
    assert first_starts(tr, shipped) == {"X": 0.0, "W": 22.0, "S": 2.0}
    reserving = replay(sc, tr, SlurmReplayPolicy(EIGHT, options=EVERY_HEAD_RESERVES))
    assert first_starts(tr, reserving) == {"X": 0.0, "W": 10.0, "S": 12.0}
    for result in (shipped, reserving):
        assert tags(tr, result)["X"] == {BUDGET}
        assert BUDGET not in tags(tr, result)["W"] | tags(tr, result)["S"]
        assert result.preemptions.sum() == 0


def test_no_decay_keeps_the_budget_qos_usage_undecayed():
    # Flags=NoDecay (shipped): the GPU-minutes gp-a counts are the GPU-hours its jobs ran,
    # undecayed. a1 (2 GPUs, 10 h) runs from 50 to 60, after the last replan (48), which
    # resets nothing after it: at the end (72) gp-a has counted 20 GPU-hours. Without the
    # flag Slurm decays them with PriorityDecayHalfLife, hourly here (the last decay at
    # 71): the 2 GPU-hours of hour 50 + i are decayed 21 − i times (i = 0..9). The plans
    # of this 7-day lookback ask for a half-life of ln 2 · 7 · 24 / 2 = 58.2 h.
    sc = two_teams(days=3, budgets=(("a", 1000.0), ("b", 0.0)))
    tr = trace([("a1", "a", 50, 2, 10.0, 1.0)])
    kept = fixed_grants({"a": (4.0, 0.0)})
    replay(sc, tr, kept)
    a = 0  # a's position among the leaves
    assert kept.executor.qos_used[a] == pytest.approx(20.0)
    decayed = fixed_grants({"a": (4.0, 0.0)}, replace(SHIPPED, no_decay=False))
    replay(sc, tr, decayed)
    assert decayed.executor.state.decay_half_life_hours == pytest.approx(math.log(2) * 84, abs=1e-6)
    half = 0.5 ** (1 / (math.log(2) * 84))
    assert decayed.executor.qos_used[a] == pytest.approx(sum(2 * half ** k for k in range(12, 22)),
                                                rel=1e-6)
    # a site that keeps Slurm's default (7 days; ``half_life_hours`` replays it)
    week = fixed_grants({"a": (4.0, 0.0)}, replace(SHIPPED, no_decay=False),
                        SlurmReplayOptions(half_life_hours=168.0))
    replay(sc, tr, week)
    half = 0.5 ** (1 / 168)
    assert week.executor.qos_used[a] == pytest.approx(sum(2 * half ** k for k in range(12, 22)),
                                             rel=1e-6)


def test_a_project_behind_its_pace_takes_back_a_node_from_one_ahead_after_the_exempt_time():
    # The executor contract's rule 5, as the export sets it: one node of 8 over three days
    # (a quarter of 72 h); no pace cap. a's budget is 1000 NGH, b's 500. t=0: B (b, 8 GPUs,
    # 30 h, limit 32 h: 256 GPU-h within b's budget) takes the node under gp-b. t=2: A (a,
    # 8 GPUs, 4 h) waits: the plan of 0 has nobody ahead of pace, so gp-a may requeue only
    # gp-opportunistic work. The replan at 24 reads b's usage, 24 h × 8 = 192 NGH, above
    # 500 × 24 / 72 = 166.7: b is ahead, a (nothing used) is not, so gp-a's Preempt lists
    # gp-b. B has run 24 h, past gp-b's PreemptExemptTime (the protected runtime, 8 h):
    # A requeues it at 24 and runs to 28; B resumes with its 6 h left, 28 → 34. Without
    # taking back (``takes_back=False``, the export before) A waits for B's end, 30.
    sc = scenario(clusters=[("c1", "H100", 1, 8)],
                  org=[("t", "", 1.0), ("a", "t", 1.0), ("b", "t", 1.0)],
                  budgets=[("a", 1000.0), ("b", 500.0)],
                  quarter_start="2026-10-01", quarter_end="2026-10-04", as_of="2026-10-01")
    tr = trace([("B", "b", 0, 8, 30.0, 1.0), ("A", "a", 2, 8, 4.0, 1.0)])
    policy = SlurmReplayPolicy(EIGHT, export=UNPACED)
    taken = replay(sc, tr, policy)
    assert first_starts(tr, taken) == {"B": 0.0, "A": 24.0}
    assert job_runs(tr, taken, "B") == [(0.0, 24.0, PREEMPTED), (28.0, 34.0, "done")]
    assert job_runs(tr, taken, "A") == [(24.0, 28.0, "done")]
    assert tags(tr, taken) == {"A": {BUDGET}, "B": {BUDGET}}
    # the last plan (48): b has used 192 + 6 × 8 = 240 NGH, below 500 × 48 / 72 = 333.3, so
    # nobody is ahead any more and gp-a preempts gp-opportunistic alone; both QOS are
    # exempt for the protected runtime
    budgets = {b.project: b for b in policy.executor.state.budgets}
    assert (budgets["a"].takes_back, budgets["b"].takes_back) == ((), ())
    assert budgets["a"].preempt_list == "gp-opportunistic,gp-overdrawn"
    assert budgets["a"].preempt_exempt_hours == budgets["b"].preempt_exempt_hours == 8.0
    kept = replay(sc, tr, SlurmReplayPolicy(EIGHT, export=replace(UNPACED, takes_back=False)))
    assert first_starts(tr, kept) == {"B": 0.0, "A": 30.0}
    assert kept.preemptions.sum() == 0


def test_budget_work_is_not_taken_back_inside_its_exempt_time():
    # As above, but b's node work is two jobs: C (8 GPUs, 0 → 20) and B (8 GPUs, submitted
    # at 19, 26 h, limit 32 h), which starts at 20 under gp-b (160 NGH used + 256 asked
    # ≤ 500). A (a, 8 GPUs, 4 h) comes at 22. At the replan of 24 b has used 160 + 4 × 8 =
    # 192 NGH, ahead of 166.7, but B has run 4 h of gp-b's 8 h exempt time: A waits until
    # 28, then requeues B and runs to 32; B resumes with its 18 h left, 32 → 50.
    sc = scenario(clusters=[("c1", "H100", 1, 8)],
                  org=[("t", "", 1.0), ("a", "t", 1.0), ("b", "t", 1.0)],
                  budgets=[("a", 1000.0), ("b", 500.0)],
                  quarter_start="2026-10-01", quarter_end="2026-10-04", as_of="2026-10-01")
    tr = trace([("C", "b", 0, 8, 20.0, 1.0), ("B", "b", 19, 8, 26.0, 1.0),
                ("A", "a", 22, 8, 4.0, 1.0)])
    result = replay(sc, tr, SlurmReplayPolicy(EIGHT, export=UNPACED))
    assert first_starts(tr, result) == {"C": 0.0, "B": 20.0, "A": 28.0}
    assert job_runs(tr, result, "B") == [(20.0, 28.0, PREEMPTED), (32.0, 50.0, "done")]
    assert result.preemptions.sum() == 1


def job_tags(tr: pd.DataFrame, result, name: str) -> list[tuple[float, float, str]]:
    return [(s.start, s.end, s.tag) for s in result.segments if tr["job_id"].iat[s.job] == name]


def test_rule_8_an_overdrawn_projects_jobs_yield_at_once_and_still_fill_idle_gpus():
    # One node of 8 GPUs. b has no budget: overdrawn from the first plan (rule 8: what it
    # ran, 0, ≥ its budget × (1 + share), 0), so the tick moves its pending jobs to
    # gp-overdrawn (PreemptExemptTime 0, below gp-opportunistic); c has 1 NGH, a 500.
    # t=0: B (b, 8 GPUs, 30 h) fills the idle node under gp-overdrawn.
    # t=1: A (a, 8 GPUs, 3 h, a budget job) requeues B at once and runs 1 → 4; B is back
    #      on the idle node at 4.
    # t=5: C (c, 8 GPUs, 2 h: 16 GPU-h beyond c's 1 NGH, so gp-opportunistic) requeues B
    #      at once too (gp-opportunistic's Preempt=gp-overdrawn) and runs 5 → 7; B then
    #      runs again from 7.
    # Before the rule (BEFORE_RULE8) B runs under gp-opportunistic, exempt for 8 h: A waits
    # until 8, and C, which preempts no gp-opportunistic job, until A ends at 11.
    sc = scenario(clusters=[("c1", "H100", 1, 8)],
                  org=[("t", "", 1.0), ("a", "t", 1.0), ("b", "t", 1.0), ("c", "t", 1.0)],
                  budgets=[("a", 500.0), ("b", 0.0), ("c", 1.0)],
                  quarter_start="2026-10-01", quarter_end="2026-10-04", as_of="2026-10-01")
    tr = trace([("B", "b", 0, 8, 30.0, 1.0), ("A", "a", 1, 8, 3.0, 1.0),
                ("C", "c", 5, 8, 2.0, 1.0)])
    policy = SlurmReplayPolicy(EIGHT, export=UNPACED)
    assert policy.executor.export == replace(SHIPPED, pace="none")  # rule 8 on: what ships
    ruled = replay(sc, tr, policy)
    assert first_starts(tr, ruled) == {"B": 0.0, "A": 1.0, "C": 5.0}
    assert job_tags(tr, ruled, "B")[:2] == [(0.0, 1.0, "overdrawn"), (4.0, 5.0, "overdrawn")]
    assert job_tags(tr, ruled, "B")[2][:1] == (7.0,)
    assert tags(tr, ruled)["A"] == {BUDGET} and tags(tr, ruled)["C"] == {EXEMPT}
    # the last plan (48 h, two thirds of the quarter gone): c ran 8 × 2 = 16 NGH on no
    # budget, ≥ 1 × (1 + 2/3): overdrawn too; a (nothing beyond its budget) is not
    assert policy.executor.state.overdrawn_projects == {"b", "c"}
    before = replay(sc, tr, SlurmReplayPolicy(EIGHT, export=UNPACED_BEFORE_RULE8))
    assert first_starts(tr, before) == {"B": 0.0, "A": 8.0, "C": 11.0}
    assert tags(tr, before)["B"] <= {OPPORTUNISTIC, EXEMPT}


def test_the_replay_the_cli_export_and_the_tick_take_the_one_shipped_record():
    from planner.exporters.files import export_files
    from planner.exporters.slurm import SlurmExport
    from tests.export_fixtures import ORG, PLAN

    assert SlurmReplayPolicy().executor.export is SHIPPED
    assert SlurmExport() == SHIPPED and SHIPPED.overdrawn_qos  # frozen: what ships
    assert export_files(PLAN, "slurm", ORG) == {
        "slurm-apply.sh": SHIPPED.export(PLAN, ORG).encode()}
    assert export_slurm(PLAN, ORG) == SHIPPED.export(PLAN, ORG)
    # the historical variant: no gp-overdrawn anywhere, nobody moved there
    assert "gp-overdrawn" not in BEFORE_RULE8.export(PLAN, ORG)
    assert BEFORE_RULE8.overdrawn_accounts(PLAN, {"p2": 1e9}) == frozenset()
    assert SHIPPED.overdrawn_accounts(PLAN, {"p2": 1e9}) == {"p2"}


def test_rule_8_an_overdrawn_project_keeps_its_pace_in_gp_opportunistic():
    # One node of 8 GPUs over three days (72 h, rate 1). b's budget is 36 NGH: its pace is
    # 36 / 72 = 0.5 NGH per hour. t=0: B1 (8 GPUs, 10 h; 8 × its 16 h limit > 36 GPU-h left)
    # runs under gp-opportunistic, 80 NGH on no budget. The replan at 24 h (a third gone)
    # finds b overdrawn: 80 ≥ 36 × (1 + 1/3) = 48. t=24: B2 and B3 (4 GPUs, 30 h each, 4 ×
    # 32 > 36: beyond its budget). B2 comes first: b runs nothing, 0 < 0.5, so it keeps its
    # pace under gp-opportunistic (exempt); then b runs 4 NGH per hour ≥ 0.5, so B3 goes to
    # gp-overdrawn. Rule 8 as first shipped (RULE8_WITHOUT_PACE) sends both there. So
    # does the shipped margin: b ran 80 ≥ 36 × (1 + 0.2 + 1/3) = 55.2, a fifth of its
    # budget past rule 8's line, so it keeps no pace (the pace without the margin above).
    from planner.exporters.slurm import RULE8_WITHOUT_PACE

    sc = scenario(clusters=[("c1", "H100", 1, 8)],
                  org=[("t", "", 1.0), ("a", "t", 1.0), ("b", "t", 1.0)],
                  budgets=[("a", 500.0), ("b", 36.0)],
                  quarter_start="2026-10-01", quarter_end="2026-10-04", as_of="2026-10-01")
    tr = trace([("B1", "b", 0, 8, 10.0, 1.0), ("B2", "b", 24, 4, 30.0, 1.0),
                ("B3", "b", 24, 4, 30.0, 1.0)])
    policy = SlurmReplayPolicy(EIGHT, export=replace(UNPACED, pace_margin=math.inf))
    paced = replay(sc, tr, policy)
    assert first_starts(tr, paced) == {"B1": 0.0, "B2": 24.0, "B3": 24.0}
    ran = tags(tr, paced)
    assert ran["B1"] <= {EXEMPT, OPPORTUNISTIC} and ran["B2"] <= {EXEMPT, OPPORTUNISTIC}
    assert ran["B3"] == {"overdrawn"}
    assert policy.executor.state.overdrawn_projects == {"b"}
    assert dict(policy.executor.state.overdrawn_pace) == {"b": pytest.approx(0.5)}
    unpaced = replay(sc, tr, SlurmReplayPolicy(EIGHT, export=replace(
        RULE8_WITHOUT_PACE, pace="none")))
    assert tags(tr, unpaced)["B2"] == tags(tr, unpaced)["B3"] == {"overdrawn"}
    margin = SlurmReplayPolicy(EIGHT, export=UNPACED)  # the shipped margin, 0.2
    stopped = replay(sc, tr, margin)
    assert tags(tr, stopped)["B2"] == tags(tr, stopped)["B3"] == {"overdrawn"}
    assert dict(margin.executor.state.overdrawn_pace) == {"b": 0.0}


def test_the_slurm_replay_keeps_an_overdrawn_pace_with_the_ticks_function(monkeypatch):
    # no second copy: planner-slurm asks planner.tick.keeps_pace, as the tick does
    from planner.simulate import slurm_replay
    from planner.tick import keeps_pace

    calls = []

    def counting(*args):
        calls.append(args)
        return keeps_pace(*args)

    monkeypatch.setattr(slurm_replay, "keeps_pace", counting)
    sc = two_teams(days=2, budgets=(("a", 40.0), ("b", 0.0)))
    replay(sc, trace([("b1", "b", 0, 8, 8.0, 8.0)]), SlurmReplayPolicy(export=UNPACED))
    assert calls and all(pace == 0.0 for _, pace in calls)  # b: no budget, no pace
