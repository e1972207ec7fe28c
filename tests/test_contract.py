"""The executor contract (planner/contract.py): hand-worked cases, and every reader agreeing.

The agreement test plans the bundled sample and reads its first period three ways — the
Kueue manifests (parsed back from the YAML), the Slurm script (its reservations) and the
simulator's ``planner`` executor (its guaranteed, opportunistic and reserved arrays) —
and compares every (project, cluster) number.
"""

from __future__ import annotations

import copy
import re
from dataclasses import replace

import pandas as pd
import pytest
import yaml

from planner.config import load_model
from planner.contract import (
    NEVER_PREEMPTED,
    PREEMPTS,
    VICTIM_ORDER,
    InForce,
    JobClass,
    Quota,
    ahead_of_pace,
    floor_gpus,
    in_force,
    may_preempt,
    next_change,
    planned_guaranteed,
    timeline,
)
from planner.exporters.kueue import export_kueue
from planner.exporters.slurm import account, budget_minutes, export_slurm, qos_name
from planner.inputs.load import load_scenario
from planner.run import SAMPLE
from planner.simulate.engine import JobState, Replay, replay
from planner.simulate.planner_policy import PlannerPolicy
from planner.simulate.slurm_replay import SlurmReplayPolicy
from tests.export_fixtures import D1, D2, D3, PLAN
from tests.test_simulate import first_starts, trace, two_teams

# -- hand-worked cases on the exporters' hand plan (tests/export_fixtures.py) ---------------


def test_whole_gpus_are_the_floor_of_guaranteed_and_of_the_sum():
    # p1 on c1 in D1: guaranteed 10.5, opportunistic 4.75 → ⌊10.5⌋ = 10 guaranteed,
    # ⌊15.25⌋ = 15 in all, so a headroom of 5 (not ⌊4.75⌋ = 4: the halves add up).
    # p2 on c1: 16.75 guaranteed, none opportunistic → 16 and 0.
    # =P 3 on c2: 8 → 8 and 0.
    terms = in_force(PLAN, D1)
    p1 = terms.quota("p1", "c1")
    assert (p1.guaranteed_gpus, p1.opportunistic_gpus) == (10.5, 4.75)
    assert (p1.guaranteed, p1.opportunistic, p1.total) == (10, 5, 15)
    p2 = terms.quota("p2", "c1")
    assert (p2.guaranteed, p2.opportunistic) == (16, 0)
    assert (terms.quota("=P 3", "c2").guaranteed, terms.quota("=P 3", "c2").opportunistic) \
        == (8, 0)
    # a cell the plan grants nothing reads as zero
    assert terms.quota("p2", "c2") == Quota("p2", "c2", 0.0, 0.0)
    assert [(q.project, q.cluster) for q in terms.quotas] == [
        ("=P 3", "c2"), ("p1", "c1"), ("p2", "c1")]


@pytest.mark.parametrize(("g", "o", "whole"), [
    (3.9999995, 0.0, (4, 0)),  # within the plan's 1e-6 rounding of 4: 4
    (3.99999, 0.0, (3, 0)),  # not within it: 3
    (0.6, 0.6, (0, 1)),  # no whole guaranteed GPU, one in all: 1 opportunistic
    (2.5, 1.2, (2, 1)),  # ⌊3.7⌋ − ⌊2.5⌋
    (1.0, 0.0, (1, 0)),
    (0.0, 0.4, (0, 0)),
])
def test_rounding_of_a_quota(g, o, whole):
    q = Quota("p", "c", g, o)
    assert (q.guaranteed, q.opportunistic) == whole
    assert q.total == q.guaranteed + q.opportunistic == floor_gpus(g + o)


def test_reservations_in_force_at_a_moment_and_over_a_window():
    # r1 (p1, c2, 1 node of 8) runs [D1, D2), r2 (p2, c2, 1 node) [D2, D3).
    at_d1 = in_force(PLAN, D1)
    assert [r.request_id for r in at_d1.reservations] == ["r1"]
    assert at_d1.reserved_gpus("p1", "c2") == 8 and at_d1.reserved_gpus("p2", "c2") == 0
    # 23:59 of the first day: still r1, and the first period's grants
    late = in_force(PLAN, "2026-11-16T23:59:00Z")
    assert [r.request_id for r in late.reservations] == ["r1"]
    assert late.period_start == D1 and late.quotas == at_d1.quotas
    # at D2 exactly r1 has ended (ends are exclusive) and r2 runs; D2's grants
    at_d2 = in_force(PLAN, pd.Timestamp(D2))
    assert [r.request_id for r in at_d2.reservations] == ["r2"]
    assert at_d2.quota("p1", "c1").guaranteed == 20
    # over a window that straddles D2 both are in force
    both = in_force(PLAN, "2026-11-16T12:00:00Z", "2026-11-17T12:00:00Z")
    assert [r.request_id for r in both.reservations] == ["r1", "r2"]
    # the first period as a window: r1 only (r2 starts at its end)
    assert [r.request_id for r in in_force(PLAN, D1, D2).reservations] == ["r1"]


def test_a_moment_outside_the_plan_says_nothing():
    with pytest.raises(ValueError, match="outside the plan's periods"):
        in_force(PLAN, D3)  # the plan's last period ends at D3
    with pytest.raises(ValueError, match="outside"):
        in_force(PLAN, "2026-11-15T00:00:00Z")


def test_protected_runtime_is_capped_by_the_plans_contract():
    terms = in_force(PLAN, D1)
    assert terms.min_runtime_cap_hours == 8.0
    assert terms.protected_hours(12.0) == 8.0
    assert terms.protected_hours(3.0) == 3.0
    assert terms.protected_hours(0.0) == 0.0  # unallocated work: none
    strict = copy.deepcopy(PLAN)
    strict["contract"]["min_runtime_cap_hours"] = 4.0
    assert in_force(strict, D1).protected_hours(8.0) == 4.0


def test_the_preemption_table():
    # Guaranteed (and the replay's paced) work takes unallocated, then fill, then
    # opportunistic work; opportunistic work only unallocated and fill work; the rest
    # nobody; reserved and guaranteed work is never anyone's victim.
    assert VICTIM_ORDER == (JobClass.UNALLOCATED, JobClass.FILL, JobClass.OPPORTUNISTIC)
    assert PREEMPTS[JobClass.GUARANTEED] == VICTIM_ORDER == PREEMPTS[JobClass.PACED]
    assert PREEMPTS[JobClass.OPPORTUNISTIC] == (JobClass.UNALLOCATED, JobClass.FILL)
    for quiet in (JobClass.RESERVED, JobClass.FILL, JobClass.UNALLOCATED):
        assert PREEMPTS[quiet] == ()
    assert set(PREEMPTS) == set(JobClass)
    for attacker in JobClass:
        for victim in NEVER_PREEMPTED:
            assert not may_preempt(attacker, victim)
        # victims are always taken in the one order
        order = PREEMPTS[attacker]
        assert list(order) == [c for c in VICTIM_ORDER if c in order]
    assert may_preempt(JobClass.PACED, JobClass.OPPORTUNISTIC)
    assert not may_preempt(JobClass.OPPORTUNISTIC, JobClass.OPPORTUNISTIC)
    # the classes are their names as text (tags in segments, CSVs and dict keys)
    assert JobClass.GUARANTEED == "guaranteed" and {"fill": 1}[JobClass.FILL] == 1


def test_next_change_per_cluster():
    # c1's grants change from D1 to D2 (p1 10.5 + 4.75 → 20); c2's: =P 3 keeps 8, but
    # the reservation changes (r1 → r2). With one more identical period nothing changes
    # after D2.
    views = timeline(PLAN)
    assert [v.start for v in views] == [D1, D2]
    assert next_change(views, 0, "c1") == D2 and next_change(views, 0, "c2") == D2
    assert next_change(views, 1, "c1") is None
    same = copy.deepcopy(PLAN)
    same["allocations"] = [a for a in same["allocations"] if a["cluster"] == "c2"]
    same["reservations"] = []
    views = timeline(same)
    assert next_change(views, 0, "c2") is None and next_change(views, 0) is None
    assert isinstance(views[0], InForce)


def test_planned_guaranteed_counts_grants_and_reservations_from_as_of():
    # p1: guaranteed 10.5 + 20 GPUs × 24 h on c1 (rate 1) = 732 GPU-h and NGH, plus r1,
    # one node of 8 on c2 (rate 0.5) for 24 h: 192 GPU-h, 96 NGH.
    assert planned_guaranteed(PLAN)["p1"] == pytest.approx((732 + 192, 732 + 96))
    assert planned_guaranteed(PLAN)["=P 3"] == pytest.approx((384, 192))


# -- the exporters and the simulator agree on the sample plan --------------------------------


def _kueue_first_period(plan, org, fill: bool = False):
    """(project, cluster) -> (nominal, borrowing, lending or None); cluster -> pool GPUs.

    Borrowing is None where the queue has no ``borrowingLimit`` (the export's fill).
    """
    files = export_kueue(plan, org, fill=fill)
    name = yaml.safe_load(files["index.yaml"])["periods"][0]["file"]
    objects = list(yaml.safe_load_all(files[name]))
    ids = {o["metadata"]["name"]: o["metadata"]["annotations"]["gpu-planner.io/id"]
           for o in objects}
    flavor = {o["metadata"]["name"]: ids[o["metadata"]["name"]]
              for o in objects if o["kind"] == "ResourceFlavor"}
    quotas = {}
    pool = {}
    for o in objects:
        for group in o.get("spec", {}).get("resourceGroups", []):
            for f in group["flavors"]:
                res = f["resources"][0]
                if o["kind"] == "ClusterQueue":
                    quotas[(ids[o["metadata"]["name"]], flavor[f["name"]])] = (
                        res["nominalQuota"], res.get("borrowingLimit"), res.get("lendingLimit"))
                else:
                    pool[flavor[f["name"]]] = res["nominalQuota"]
    return quotas, pool


_CREATE = re.compile(r"scontrol create reservation ReservationName=(\S+) StartTime=(\S+) "
                     r"(Duration|EndTime)=(\S+) Accounts=(\S+) NodeCnt=(\d+) PartitionName=(\S+)")


def _slurm_reserved(plan, org, start: str, end: str) -> dict[tuple[str, str], int]:
    """(account, partition) -> GPUs of the script's reservations running in [start, end)."""
    script = export_slurm(plan, org)
    gpn = {c["cluster"]: c["gpus_per_node"] for c in plan["clusters"]}
    out: dict[tuple[str, str], int] = {}
    for line in script.splitlines():
        match = _CREATE.search(line)  # the first create of a line: the plan's own window
        if match is None:
            continue
        _, begin, kind, value, acct, nodes, partition = match.groups()
        begin = pd.Timestamp(plan["as_of"] if begin == "now" else begin, tz="UTC")
        if kind == "EndTime":
            finish = pd.Timestamp(value, tz="UTC")
        else:
            days, clock = value.split("-")
            h, m, s = (int(x) for x in clock.split(":"))
            finish = begin + pd.Timedelta(days=int(days), hours=h, minutes=m, seconds=s)
        if begin < pd.Timestamp(end) and finish > pd.Timestamp(start):
            key = (acct, partition)
            out[key] = out.get(key, 0) + int(nodes) * gpn[partition]
    return out


def test_exporters_and_simulator_agree_on_every_quota_of_the_sample_plan(sample_plan):
    plan, org = sample_plan
    first = plan["periods"][0]
    scenario = load_scenario(SAMPLE)
    # the simulator's planner executor, reading the same plan's first period
    project, cluster = scenario.tree.leaves[0], scenario.arrays.clusters[0]
    one = pd.DataFrame({"job_id": ["j"], "project": [project], "cluster": [cluster],
                        "submit": pd.to_datetime([scenario.config.quarter_start], utc=True),
                        "gpus": [1], "duration_hours": [1.0], "min_runtime_hours": [1.0],
                        "resumable": [True]})
    policy = PlannerPolicy(load_model("default"))
    sim = Replay(scenario, one, policy)
    policy.prepare(sim)
    policy.executor.apply_first_period(sim, plan, first["start"])
    assert sim.protect_cap == plan["contract"]["min_runtime_cap_hours"] == 8.0

    kueue, pool = _kueue_first_period(plan, org)
    filled, filled_pool = _kueue_first_period(plan, org, fill=True)
    slurm = _slurm_reserved(plan, org, first["start"], first["end"])
    terms = in_force(plan, first["start"], first["end"])
    assert terms.reservations, "the sample's first period holds reservations"
    assert any(q.opportunistic for q in terms.quotas), "and opportunistic headroom"
    checked = 0
    ahead = ahead_of_pace(plan)
    assert ahead, "the sample's plan has projects ahead of their pace"
    for p, name in enumerate(sim.projects):
        for k, c in enumerate(sim.cluster_ids):
            g = int(policy.executor.guaranteed[p, k])
            o = int(policy.executor.opportunistic[p, k])
            reserved = int(policy.executor.reserved[p, k])
            assert (g, o) == (terms.quota(name, c).guaranteed, terms.quota(name, c).opportunistic)
            assert reserved == terms.reserved_gpus(name, c)
            nominal, borrowing, lending = kueue.get((name, c), (0, 0, None))
            # rule 5: a project ahead of its pace lends its guaranteed GPUs (borrows them)
            kept = 0 if name in ahead else g
            assert nominal == kept + reserved, (name, c)
            assert borrowing == o + g - kept, (name, c)
            assert lending == (nominal - reserved if reserved else None), (name, c)
            # the default export (fill): the same nominal and lending, no borrowing limit,
            # and a cell for every (project, cluster)
            assert filled[(name, c)] == (nominal, None, lending), (name, c)
            assert slurm.get((account(name), c), 0) == reserved, (name, c)
            checked += 1
    assert checked == len(sim.projects) * len(sim.cluster_ids)
    # the pool lends what no project holds as nominal quota
    for k, c in enumerate(sim.cluster_ids):
        held = int(sum(policy.executor.guaranteed[p, k] for p, name in enumerate(sim.projects)
                       if name not in ahead) + policy.executor.reserved[:, k].sum())
        assert pool.get(c, 0) == filled_pool.get(c, 0) == sim.capacity[k] - held
    # and no cell of the Kueue export is one the simulator does not know
    assert set(kueue) <= {(p, c) for p in sim.projects for c in sim.cluster_ids}
    assert set(filled) == {(p, c) for p in sim.projects for c in sim.cluster_ids}

    # Slurm's pace cap (GrpTRES of each budget QOS, as the script sets it) is the project's
    # cells summed: guaranteed + headroom on every cluster, plus its reservations in force
    # in the first period, at least one node's GPUs while its budget has minutes left (the
    # floor); the planner-slurm replay applies the same number
    # (a project behind its pace with budget left gets it through wide_cap, which raises it
    # to the widest pending job when the script runs: nothing pends here, so the same)
    script = export_slurm(plan, org)
    caps = {m.group(1): int(m.group(2)) for m in re.finditer(
        r"modify qos (\S+) set GrpTRES=gres/gpu=(\d+)", script)}
    caps |= {m.group(2): int(m.group(1)) for m in re.finditer(
        r"cap=\$\(wide_cap \S+ (\d+)\) && \{ sacctmgr -n -P show qos (\S+) ", script)}
    replayed = SlurmReplayPolicy(load_model("default"))
    sim2 = Replay(scenario, one, replayed)
    replayed.prepare(sim2)
    sim2.now = (pd.Timestamp(first["start"]) - scenario.config.quarter_start) / pd.Timedelta(
        hours=1)
    replayed.executor.apply_first_period(sim2, plan, first["start"])
    budgeted = {b["project"] for b in plan["budgets"]}
    minutes = budget_minutes(plan)
    assert budgeted and len(caps) == len(budgeted)
    for p, name in enumerate(sim.projects):
        if name not in budgeted:
            continue
        cells = sum(int(policy.executor.guaranteed[p, k] + policy.executor.opportunistic[p, k])
                    + terms.reserved_gpus(name, c) for k, c in enumerate(sim.cluster_ids))
        if minutes[name] > 0:
            cells = max(cells, max(sim.gpn))
        assert caps[qos_name(name)] == cells == replayed.executor.cap_gpus[p], name
    assert sum(caps.values()) > 0


# -- the simulator's planner executor protects by the plan's contract --------------------


@pytest.mark.parametrize(("model", "fill_slice", "reclaim"), [
    ("default", 24.0, 8.0), ("strict-budgets", 24.0, 4.0),  # the cap binds
    ("default", None, 1.0), ("strict-budgets", None, 1.0)])  # the fill slice (1 h) binds
def test_planner_executor_protects_by_the_plans_min_runtime_cap(model, fill_slice, reclaim):
    # One node of 8. t=0: b (no budget) submits B, 8 GPUs for 20 h, asking 8 h protected
    # (the trace is not capped here: read by hand, not by read_trace). The plan at 0
    # grants b nothing guaranteed, so B runs beyond budget (opportunistic or fill).
    # t=1: a (budget 500 over 72 h; the only project with allocated work's pace share,
    # so entitled to the whole node) submits A, 8 GPUs for 5 h: paced, it may preempt B
    # once B's protection ends: min(8, the plan's cap) after 0 — 8 h under the default
    # model, 4 h under strict-budgets (min_runtime_cap_hours = 4), as long as the
    # contract's fill slice is longer; with the models' own slice (1 h), work beyond the
    # grant is protected for 1 h only, so A starts at 1.
    sc = two_teams(days=3, budgets=(("a", 500.0), ("b", 0.0)))
    tr = trace([("B", "b", 0, 8, 20.0, 8.0), ("A", "a", 1, 8, 5.0, 8.0)])
    config = load_model(model)
    if fill_slice is not None:
        config = replace(config, contract=replace(config.contract, fill_slice_hours=fill_slice))
    result = replay(sc, tr, PlannerPolicy(config))
    assert first_starts(tr, result)["A"] == reclaim
    b_row = int(tr.index[tr["job_id"] == "B"][0])
    assert result.preemptions[b_row] == 1
    assert result.protected_violations == 0
    preempted = [s for s in result.segments if s.job == b_row and s.ended == "preempted"]
    assert [(s.start, s.end) for s in preempted] == [(0.0, reclaim)]


def test_job_states_are_an_enum():
    # One job of 1 GPU for 2 h: waiting → running → done, read through the engine's methods.
    sc = two_teams(days=1)
    tr = trace([("j", "a", 0, 1, 2.0, 1.0)])
    sim = Replay(sc, tr, PlannerPolicy())
    assert sim.state[0] is JobState.FUTURE
    result = sim.run()
    assert sim.state[0] is JobState.DONE and result.finish[0] == 2.0
    assert sim.outstanding_jobs() == [] and sim.work_left(0) == 0.0


@pytest.mark.parametrize(("as_of", "used", "ahead"), [
    ("2026-10-01T00:00:00Z", 1.0, True),      # quarter start: any usage is ahead
    ("2026-10-01T00:00:00Z", 0.0, False),
    ("2026-11-15T12:00:00Z", 450.0, False),   # 45.5 of 91 days gone (half): pace 450
    ("2026-11-15T12:00:00Z", 450.5, True),
    ("2027-02-01T00:00:00Z", 900.0, False),   # after the quarter: the share stays 1
    ("2027-02-01T00:00:00Z", 900.5, True),
])
def test_ahead_of_pace_by_hand(as_of, used, ahead):
    # a 91-day quarter, a budget of 900 NGH: ahead = used > 900 x the share gone
    plan = {"as_of": as_of, "quarter_start": "2026-10-01T00:00:00Z",
            "quarter_end": "2026-12-31T00:00:00Z",
            "budgets": [{"project": "p", "budget": 900.0, "used": used},
                        {"project": "none", "budget": 0.0, "used": 0.0}]}
    assert ahead_of_pace(plan) == ({"p"} if ahead else set())


def test_rule_8_counts_what_a_project_ran_on_no_budget_beside_what_its_budget_was_charged():
    # PLAN: quarter 2026-10-01 to 2027-01-01 (92 days), as_of 2026-11-16 (46 days gone):
    # share 0.5, so a project is overdrawn once what it ran reaches budget × 1.5.
    #   p2: budget 1500, used 0: threshold 2250 NGH. unbudgeted.csv: 8 GPUs on c1 (rate 1)
    #       for 281.25 h = 2250 NGH: exactly the threshold, overdrawn.
    #   p1: budget 2000, used 100: threshold 3000, so 2900 NGH beyond its budget would do.
    #       16 GPUs on c2 (rate 0.5) from 2026-11-01 to 2026-11-20, clipped at as_of to
    #       360 h: 16 × 360 × 0.5 = 2880 NGH; 100 + 2880 = 2980 < 3000: not overdrawn.
    #       (Unclipped it would be 16 × 456 × 0.5 = 3648: overdrawn.) A row of the
    #       quarter before counts nothing.
    #   =P 3: budget 500, used 50, nothing else: 50 < 750.
    from planner.contract import overdrawn, unbudgeted_ngh

    t = pd.Timestamp
    rows = pd.DataFrame({
        "project": ["p2", "p1", "p1"], "cluster": ["c1", "c2", "c1"],
        "gpus": [8.0, 16.0, 64.0],
        "start": [t("2026-10-01T00:00Z"), t("2026-11-01T00:00Z"), t("2026-09-01T00:00Z")],
        "end": [t("2026-10-12T17:15Z"), t("2026-11-20T00:00Z"), t("2026-09-30T00:00Z")]})
    ran = unbudgeted_ngh(PLAN, rows)
    assert ran == {"p2": pytest.approx(2250.0), "p1": pytest.approx(2880.0)}
    assert overdrawn(PLAN, ran) == {"p2"}
    assert overdrawn(PLAN) == frozenset()  # the plan's used alone: nobody
    assert overdrawn(PLAN, {**ran, "p2": 2249.9}) == frozenset()  # just below: not
    assert overdrawn(PLAN, {**ran, "p1": 2900.0}) == {"p1", "p2"}
