"""The replay simulator on tiny traces worked out by hand, one or more per policy."""

from __future__ import annotations

import math
import zlib

import pandas as pd
import pytest

from planner.simulate.engine import DONE, PREEMPTED, replay
from planner.simulate.metrics import compute_metrics, spread
from planner.simulate.planner_policy import IdealExecutor, PlannerPolicy
from planner.simulate.policies import (
    FairTreePolicy,
    LookbackPolicy,
    PriorityPolicy,
    QuotaPolicy,
    fair_tree_ranks,
    high_priority,
)
from planner.simulate.replanner import Replanner
from tests.tiny import scenario

Q0 = pd.Timestamp("2026-10-01", tz="UTC")
COLUMNS = ["job_id", "project", "cluster", "submit", "gpus", "duration_hours",
           "min_runtime_hours", "resumable"]


def trace(rows: list[tuple]) -> pd.DataFrame:
    """Rows (job_id, project, submit hour, gpus, duration, min runtime[, resumable]) on c1."""
    full = [(j, p, "c1", Q0 + pd.Timedelta(hours=t), g, d, m, *(rest or (True,)))
            for j, p, t, g, d, m, *rest in rows]
    df = pd.DataFrame(full, columns=COLUMNS)
    df["submit"] = pd.to_datetime(df["submit"], utc=True)
    df = df.astype({"gpus": "int64", "duration_hours": "float64",
                    "min_runtime_hours": "float64", "resumable": bool})
    return df.sort_values(["submit", "job_id"], kind="stable").reset_index(drop=True)


def two_teams(nodes: int = 1, days: int = 4, budgets=(("a", 100.0), ("b", 100.0)),
              same_team: bool = False):
    """Projects a and b, in teams ta and tb (or one team t), on c1 of ``nodes`` × 8 GPUs."""
    org = ([("t", "", 1.0), ("a", "t", 1.0), ("b", "t", 1.0)] if same_team else
           [("ta", "", 1.0), ("a", "ta", 1.0), ("tb", "", 1.0), ("b", "tb", 1.0)])
    end = (Q0 + pd.Timedelta(days=days)).strftime("%Y-%m-%d")
    return scenario(clusters=[("c1", "H100", nodes, 8)], org=org, budgets=list(budgets),
                    quarter_start="2026-10-01", quarter_end=end, as_of="2026-10-01")


def first_starts(tr: pd.DataFrame, result) -> dict[str, float]:
    """Each job's first start (hours), by job id."""
    return dict(zip(tr["job_id"], result.first_start, strict=True))


def runs(result, job: int) -> list[tuple[float, float, str]]:
    """(start, end, how it ended) of each run segment of trace row ``job``."""
    return sorted((s.start, s.end, s.ended) for s in result.segments if s.job == job)


def ids_with(predicate, prefix: str, count: int) -> list[str]:
    """The first ``count`` ids prefix0, prefix1, … whose crc32 share satisfies predicate."""
    out, i = [], 0
    while len(out) < count:
        name = f"{prefix}{i}"
        if predicate(zlib.crc32(name.encode()) / 2 ** 32):
            out.append(name)
        i += 1
    return out


# -- preemption exactly at the end of the min runtime (quota reclaim) ---------------------


@pytest.mark.parametrize("resumable", [True, False])
def test_quota_reclaims_borrowed_gpus_exactly_after_min_runtime(resumable):
    # One node of 8 GPUs; a and b have equal budgets, so nominal quotas 4 and 4.
    # t=0  A (a, 8 GPUs, 10 h, min 3 h) is over a's nominal 4: it borrows all 8.
    # t=1  B (b, 4 GPUs, 2 h, min 1 h) is within b's nominal: it may reclaim, but A is
    #      protected until t=3, so B waits.
    # t=3  A's min runtime ends: B preempts it at exactly 3.0 and runs 3 → 5.
    # t=5  A restarts: resumable, 7 h left → 5 → 12; non-resumable, 10 h → 5 → 15 and
    #      the 3 h × 8 GPUs it had run are lost.
    sc = two_teams()
    tr = trace([("A", "a", 0, 8, 10.0, 3.0, resumable), ("B", "b", 1, 4, 2.0, 1.0)])
    result = replay(sc, tr, QuotaPolicy())
    end = 12.0 if resumable else 15.0
    assert runs(result, 0) == [(0.0, 3.0, PREEMPTED), (5.0, end, DONE)]
    assert runs(result, 1) == [(3.0, 5.0, DONE)]
    assert result.preemptions.tolist() == [1, 0]
    assert result.lost_gpu_hours.tolist() == [0.0 if resumable else 24.0, 0.0]
    tags = {(s.job, s.start): s.tag for s in result.segments}
    assert tags[(0, 0.0)] == "borrowed" and tags[(1, 3.0)] == "nominal"


# -- which expired job a reclaim takes: the one that loses least -----------------------------


def test_reclaim_takes_the_resumable_victim_before_the_non_resumable_one():
    # One node of 8 GPUs; budgets a 1, b 199, so nominal quotas a 0, b 8 (largest
    # remainder of 0.04 / 7.96): everything a runs is borrowed, one victim group.
    # t=0  R (a, 4 GPUs, 10 h, min 1 h, resumable) and N (a, 4 GPUs, 10 h, min 2 h, not
    #      resumable) borrow the whole node; R's protection ends at 1, N's at 2.
    # t=3  B (b, 4 GPUs, 2 h) is within b's quota and must reclaim 4 GPUs: one of R, N.
    #      N expired more recently (the old rule would take it and throw away 3 h × 4 =
    #      12 GPU-hours); R loses nothing, so R goes. B runs 3 → 5, R resumes at 5 with
    #      10 − 3 = 7 h left → 12; N runs undisturbed 0 → 10; nothing is lost.
    sc = two_teams(budgets=(("a", 1.0), ("b", 199.0)))
    tr = trace([("R", "a", 0, 4, 10.0, 1.0, True), ("N", "a", 0, 4, 10.0, 2.0, False),
                ("B", "b", 3, 4, 2.0, 1.0)])
    rows = {job_id: i for i, job_id in enumerate(tr["job_id"])}
    result = replay(sc, tr, QuotaPolicy())
    assert runs(result, rows["R"]) == [(0.0, 3.0, PREEMPTED), (5.0, 12.0, DONE)]
    assert runs(result, rows["N"]) == [(0.0, 10.0, DONE)]
    assert runs(result, rows["B"]) == [(3.0, 5.0, DONE)]
    assert result.lost_gpu_hours.sum() == 0.0


def test_reclaim_takes_the_non_resumable_victim_that_ran_least():
    # As above, both of a's jobs not resumable. N1 (4 GPUs, 10 h, min 3 h) starts at 0,
    # N2 (4 GPUs, 10 h, min 1 h) at 1; N2's protection ends at 2, N1's at 3.
    # t=4  B (b, 4 GPUs, 2 h) reclaims 4 GPUs. N1 expired more recently (the old rule
    #      would take it: 4 h × 4 = 16 GPU-hours lost); N2 started later and has run
    #      only 3 h, so N2 goes: 12 GPU-hours lost. B runs 4 → 6; N2 restarts from
    #      zero at 6 → 16; N1 runs 0 → 10.
    sc = two_teams(budgets=(("a", 1.0), ("b", 199.0)))
    tr = trace([("N1", "a", 0, 4, 10.0, 3.0, False), ("N2", "a", 1, 4, 10.0, 1.0, False),
                ("B", "b", 4, 4, 2.0, 1.0)])
    rows = {job_id: i for i, job_id in enumerate(tr["job_id"])}
    result = replay(sc, tr, QuotaPolicy())
    assert runs(result, rows["N1"]) == [(0.0, 10.0, DONE)]
    assert runs(result, rows["N2"]) == [(1.0, 4.0, PREEMPTED), (6.0, 16.0, DONE)]
    assert runs(result, rows["B"]) == [(4.0, 6.0, DONE)]
    assert result.lost_gpu_hours[rows["N2"]] == 12.0
    assert result.lost_gpu_hours.sum() == 12.0


# -- a gang job waits for whole nodes --------------------------------------------------------


def test_gang_job_waits_for_a_whole_free_node():
    # Two nodes of 8. Best fit: s1 (4 GPUs, 5 h) and s2 (4 GPUs, 1 h) share node 0, s3
    # (4 GPUs, 3 h) goes to node 1. At t=1 s2 ends: 4 + 4 GPUs are free, but no whole
    # node, so the gang G (8 GPUs) submitted at 0.5 waits until s3 frees node 1 at 3.
    # Min runtimes of 8 h keep lookback from preempting anything.
    sc = two_teams(nodes=2)
    tr = trace([("s1", "a", 0, 4, 5.0, 8.0), ("s2", "a", 0, 4, 1.0, 8.0),
                ("s3", "a", 0, 4, 3.0, 8.0), ("x", "a", 0.5, 8, 2.0, 8.0)])
    result = replay(sc, tr, LookbackPolicy())
    assert runs(result, 3) == [(3.0, 5.0, DONE)]
    gang = [s for s in result.segments if s.job == 3][0]
    assert gang.held == 8


def test_gang_of_two_nodes_holds_whole_nodes():
    # 12 GPUs on 8-GPU nodes: two whole nodes held, 4 GPUs of them idle for 2 h.
    sc = two_teams(nodes=2)
    result = replay(sc, trace([("g", "a", 0, 12, 2.0, 1.0)]), LookbackPolicy())
    (seg,) = result.segments
    assert (seg.gpus, seg.held) == (12, 16)
    metrics = compute_metrics(sc, trace([("g", "a", 0, 12, 2.0, 1.0)]), result).summary
    assert metrics["reserved_idle_gpu_hours"] == pytest.approx(8.0)


# -- priority starves a team that does not inflate ------------------------------------------


def test_priority_starves_the_team_with_normal_jobs_quota_does_not():
    # One node; teams ta (a) and tb (b), equal budgets: caps / nominal quotas 4 and 4.
    # b's jobs are all marked high (crc32 share < 10 %), a's all normal (≥ 60 %).
    # t=0   b submits 8 one-GPU jobs of 10 h (min 2 h): 4 non-preemptible (b's cap),
    #       4 preemptible in the idle GPUs. Every 10 h b submits 8 more.
    # t=0.5 a submits 4 normal one-GPU jobs. Normal jobs never preempt and queue behind
    #       b's high ones, which take every GPU freed at each 10 h boundary: a never runs.
    # Under quota, a's jobs are within its nominal 4: at t=2 (b's borrowed jobs' min
    # runtime over) they reclaim the 4 borrowed GPUs.
    sc = two_teams(days=2)
    high = ids_with(lambda h: h < 0.10, "b", 40)
    normal = ids_with(lambda h: h >= 0.60, "a", 4)
    rows = [(high[8 * w + i], "b", 10 * w, 1, 10.0, 2.0) for w in range(5) for i in range(8)]
    rows += [(n, "a", 0.5, 1, 10.0, 2.0) for n in normal]
    tr = trace(rows)
    assert all(high_priority(j, 0.0, 48.0) for j in high)
    assert not any(high_priority(j, 48.0, 48.0) for j in normal)
    a_jobs = tr.index[tr["project"] == "a"]
    prio = replay(sc, tr, PriorityPolicy())
    assert all(math.isnan(prio.first_start[j]) for j in a_jobs)
    metrics = compute_metrics(sc, tr, prio).summary
    assert metrics["teams"]["ta"]["delivered_over_owed_weekly"] == 0.0
    assert metrics["worst_team_delivered_over_owed"] == 0.0
    quota = replay(sc, tr, QuotaPolicy())
    assert [quota.first_start[j] for j in a_jobs] == [2.0] * 4
    # a's pace is 100/48 NGH/h. Owed (fixed, from the trace: a's 4 GPUs offered over
    # [0.5, 10.5)): hour 0 min(pace, 2) = 2, hours 1–9 the pace, hour 10 min(pace, 2) = 2:
    # 4 + 9 × pace = 22.75. Quota runs a's jobs 2 → 12, 40 NGH, all in the one (short)
    # week: delivered min(40, 22.75) = 22.75, ratio 1 — late by two hours, but within the
    # week. The hourly figure (owed capped at a's own queue, 4 GPUs over [0.5, 12)) is
    # stricter: owed 2 + 11 × pace, delivered 10 × pace (hours 2–11).
    pace = 100 / 48
    m = compute_metrics(sc, tr, quota).summary
    assert m["teams"]["ta"]["owed_ngh"] == pytest.approx(4 + 9 * pace, abs=1e-6)
    assert m["teams"]["ta"]["delivered_over_owed_weekly"] == pytest.approx(1.0)
    hourly_a = compute_metrics(sc, tr[tr["project"] == "a"].reset_index(drop=True),
                               replay(sc, tr[tr["project"] == "a"].reset_index(drop=True),
                                      QuotaPolicy())).summary
    assert hourly_a["delivered_over_owed_hourly"] == 1.0  # alone, a runs at once


# -- fairtree: EASY backfill ----------------------------------------------------------------


def test_fairtree_backfills_only_what_does_not_delay_the_head():
    # Two nodes of 8, one project, FIFO: j1 (8 GPUs, 5 h) takes node 0; j2 (16 GPUs, 2 h)
    # needs both nodes: blocked, it reserves them from t=5 (node 0 frees then, node 1 is
    # free now). j3 (8 GPUs, 4 h) ends at 4 ≤ 5: it backfills on node 1 at once. j4
    # (4 GPUs, 6 h) would end at 6 > 5 and every free GPU is on a reserved node: it
    # waits (at t=4 too, when node 1 frees) until j2 has run 5 → 7; then 7 → 13.
    # Time limits equal to the durations here (exact requests).
    sc = two_teams(nodes=2)
    tr = trace([("j1", "a", 0, 8, 5.0, 1.0), ("j2", "a", 0, 16, 2.0, 1.0),
                ("j3", "a", 0, 8, 4.0, 1.0), ("j4", "a", 0, 4, 6.0, 1.0)])
    tr["time_limit_hours"] = tr["duration_hours"]
    result = replay(sc, tr, FairTreePolicy())
    assert [runs(result, j) for j in range(4)] == [
        [(0.0, 5.0, DONE)], [(5.0, 7.0, DONE)], [(0.0, 4.0, DONE)], [(7.0, 13.0, DONE)]]
    assert result.preemptions.sum() == 0


def test_fairtree_backfill_plans_with_time_limits_not_durations():
    # Two nodes of 8, one project, FIFO. j1 (8 GPUs, runs 3 h, limit 5 h) takes node 0;
    # j2 (16 GPUs) is blocked: Slurm expects node 0 back at j1's limit, t=5, so the
    # shadow is 5 on nodes {0, 1}. j3 (8 GPUs) truly runs 4 h (it would end at 4 ≤ 5)
    # but asked for 6 h: 0 + 6 > 5 and the only free node is reserved, so it is NOT
    # backfilled. j1 really ends at 3: node 0 frees, j2 starts 3 → 5, j3 runs 5 → 9.
    # With j3's limit 4 h (0 + 4 ≤ 5) it backfills on node 1 at once, 0 → 4, and j2
    # waits for both nodes: 4 → 6.
    sc = two_teams(nodes=2)
    tr = trace([("j1", "a", 0, 8, 3.0, 1.0), ("j2", "a", 0, 16, 2.0, 1.0),
                ("j3", "a", 0, 8, 4.0, 1.0)])
    tr["time_limit_hours"] = [5.0, 2.0, 6.0]
    result = replay(sc, tr, FairTreePolicy())
    assert [runs(result, j) for j in range(3)] == [
        [(0.0, 3.0, DONE)], [(3.0, 5.0, DONE)], [(5.0, 9.0, DONE)]]
    tr["time_limit_hours"] = [5.0, 2.0, 4.0]
    result = replay(sc, tr, FairTreePolicy())
    assert [runs(result, j) for j in range(3)] == [
        [(0.0, 3.0, DONE)], [(4.0, 6.0, DONE)], [(0.0, 4.0, DONE)]]
    # Without the column every job asks for its duration rounded up to a power of two:
    # j1 4 h, j3 4 h: the shadow is 4 and j3 (0 + 4 ≤ 4) backfills as just above.
    assert [runs(replay(sc, tr.drop(columns="time_limit_hours"), FairTreePolicy()), j)
            for j in range(3)] == [[(0.0, 3.0, DONE)], [(4.0, 6.0, DONE)], [(0.0, 4.0, DONE)]]


def test_fair_tree_ranks_by_level_fairshare():
    # Areas x (weight 1) and y (weight 1); x has projects p1, p2; y has p3.
    # Usage: p1 30, p2 10, p3 20. Level of x: 0.5/(40/60) = 0.75, y: 0.5/(20/60) = 1.5,
    # so y first: p3 rank 0. Inside x: p1 0.5/0.75, p2 0.5/0.25 → p2 then p1.
    from planner.fairshare import OrgTree

    org = pd.DataFrame({"id": ["x", "p1", "p2", "y", "p3"], "parent": ["", "x", "x", "", "y"],
                        "weight": [1.0] * 5})
    tree = OrgTree.from_frame(org)
    assert fair_tree_ranks(tree, [30.0, 10.0, 20.0]) == [2, 1, 0]


# -- lookback: the team that ran less last week goes first ----------------------------------


def test_lookback_prefers_the_team_that_ran_less_last_week():
    # One node; teams ta (a) and tb (b), equal weights. a ran the whole node for the
    # first week (t 0 → 168). At t=200 both submit eight one-GPU jobs of 10 h. The
    # window (t 32 → 200) holds 136 h × 8 GPUs of a's usage, none of b's: the day's
    # 192 GPU-hours all go to b (λ·w − U ≤ 0 for a), so b's eight start at 200 and a's
    # at 210, when b's end.
    sc = two_teams(days=14)
    rows = [("a-old", "a", 0, 8, 168.0, 8.0)]
    rows += [(f"a{i}", "a", 200, 1, 10.0, 2.0) for i in range(8)]
    rows += [(f"b{i}", "b", 200, 1, 10.0, 2.0) for i in range(8)]
    tr = trace(rows)
    result = replay(sc, tr, LookbackPolicy())
    starts = first_starts(tr, result)
    assert [starts[f"b{i}"] for i in range(8)] == [200.0] * 8
    assert [starts[f"a{i}"] for i in range(8)] == [210.0] * 8
    # Fair Tree with its 7-day half-life decay agrees: b's decayed usage is 0.
    fair = replay(sc, tr, FairTreePolicy())
    assert first_starts(tr, fair)["b0"] == 200.0


# -- planner: a guaranteed quota is honoured -----------------------------------------------


def test_planner_guarantees_the_planned_quota_and_fills_the_rest():
    # One node; a has a budget, b none. t=0: a's four allocated one-GPU jobs (30 h) and
    # b's eight unallocated ones (30 h). The plan made at 0 sees a's demand (4 GPUs for
    # two periods, 192 NGH ≤ 500): 4 guaranteed GPUs. a's four start guaranteed, b's
    # first four fill the idle GPUs as unallocated work, the other four wait until a's
    # end at 30. The replan at 24 keeps a's 4 GPUs guaranteed.
    sc = two_teams(days=3, budgets=(("a", 500.0), ("b", 0.0)))
    rows = [(f"a{i}", "a", 0, 1, 30.0, 8.0) for i in range(4)]
    rows += [(f"b{i}", "b", 0, 1, 30.0, 0.0) for i in range(8)]
    tr = trace(rows)
    result = replay(sc, tr, PlannerPolicy())
    starts = first_starts(tr, result)
    assert [starts[f"a{i}"] for i in range(4)] == [0.0] * 4
    assert sorted(starts[f"b{i}"] for i in range(8)) == [0.0] * 4 + [30.0] * 4
    a_jobs = set(tr.index[tr["project"] == "a"])
    assert {s.tag for s in result.segments if s.job in a_jobs} == {"guaranteed"}
    assert {s.tag for s in result.segments if s.job not in a_jobs} == {"unallocated"}
    assert result.preemptions.sum() == 0
    assert result.replans == 3


def test_planner_work_the_plan_did_not_see_runs_paced_at_once():
    # One node; t=0: b's eight unallocated one-GPU jobs (30 h) fill it; the plan made at
    # 0 has no allocated demand, so a has no guaranteed GPUs. t=1: a submits four
    # allocated one-GPU jobs (20 h, min 8 h). a's pace, 500 NGH / 72 h = 6.9 GPUs,
    # covers 4 (and, the only project with allocated work, it may have the whole
    # node): they run *paced*,
    # preempting four of b's unallocated jobs (min runtime 0) at once, at t=1.
    sc = two_teams(days=3, budgets=(("a", 500.0), ("b", 0.0)))
    rows = [(f"b{i}", "b", 0, 1, 30.0, 0.0) for i in range(8)]
    rows += [(f"a{i}", "a", 1, 1, 20.0, 8.0) for i in range(4)]
    tr = trace(rows)
    result = replay(sc, tr, PlannerPolicy())
    a_jobs = list(tr.index[tr["project"] == "a"])
    assert [result.first_start[j] for j in a_jobs] == [1.0] * 4
    assert {s.tag for s in result.segments if s.job in a_jobs} == {"paced"}
    assert result.preemptions.sum() == 4
    # A budget whose pace is under one GPU (50 / 72 NGH/h): on its own pace only the one
    # job a project running nothing may always start would be paced; but the pace of
    # projects without work is shared over those with work: a is the only project with
    # allocated work, so its entitlement is the whole node and its four jobs start at t=1.
    small = two_teams(days=3, budgets=(("a", 50.0), ("b", 0.0)))
    shared = replay(small, tr, PlannerPolicy())
    assert [shared.first_start[j] for j in a_jobs] == [1.0] * 4


# -- metrics ----------------------------------------------------------------------------------


def test_spread_splits_stretches_over_hours():
    # [0.5, 2.25) × 2 GPUs: 1.0 in hour 0, 2.0 in hour 1, 0.5 in hour 2; [3, 3.5) × 4 on row 1.
    out = spread([0.5, 3.0], [2.25, 3.5], [2.0, 4.0], [0, 1], 2, 4)
    assert out.tolist() == [[1.0, 2.0, 0.5, 0.0], [0.0, 0.0, 0.0, 2.0]]


def test_metrics_owed_is_pace_capped_at_demand():
    # One project a with budget 96 NGH over 4 days (96 h): pace 1 NGH/h. One job of 1 GPU
    # submitted at 0 runs 0 → 10: owed 10 (demand 1 GPU for 10 h), delivered 10; it is
    # charged 10 NGH: budget error |10 − 96| / 96. Occupancy: busy 10 GPU-h over the 10
    # cluster-hours with outstanding work × 8 GPUs = 0.125.
    sc = two_teams(budgets=(("a", 96.0), ("b", 96.0)))
    tr = trace([("j", "a", 0, 1, 10.0, 1.0)])
    m = compute_metrics(sc, tr, replay(sc, tr, QuotaPolicy())).summary
    assert m["owed_ngh"] == pytest.approx(10.0)
    assert m["delivered_over_owed_hourly"] == 1.0
    assert m["delivered_over_owed_daily"] == m["delivered_over_owed_quarter"] == 1.0
    assert m["budget_error_max"] == pytest.approx(1.0)  # b spent nothing
    assert m["budget_error_mean"] == pytest.approx((86 / 96 + 1.0) / 2)
    assert m["occupancy"] == pytest.approx(0.125)
    assert m["wait_p50_hours"] == 0.0 and m["small_wait_p90_hours"] == 0.0


def test_planner_fills_projects_without_budget_after_those_with_one():
    # One node of 8; a (budget 500) and b (budget 0) each submit eight allocated one-GPU
    # jobs (5 h) at t=0, b's first in the queue. The plan at 0 guarantees a's demand
    # (8 GPUs for a period, 192 NGH ≤ 500) and nothing to b (no budget): a's eight start
    # guaranteed, b's wait until they end at 5 and then run as fill (no budget: its
    # pace is 0, so nothing of b's is ever paced).
    sc = two_teams(days=2, budgets=(("a", 500.0), ("b", 0.0)))
    rows = [(f"b{i}", "b", 0, 1, 5.0, 1.0) for i in range(8)]
    rows += [(f"a{i}", "a", 0, 1, 5.0, 1.0) for i in range(8)]
    tr = trace(rows)
    result = replay(sc, tr, PlannerPolicy())
    starts = first_starts(tr, result)
    assert [starts[f"a{i}"] for i in range(8)] == [0.0] * 8
    assert [starts[f"b{i}"] for i in range(8)] == [5.0] * 8
    tags = {s.job: s.tag for s in result.segments}
    assert {tags[j] for j in tr.index[tr["project"] == "b"]} == {"fill"}


def test_a_replan_plans_from_its_period_boundary_even_when_an_event_stands_a_hair_before():
    # J ends at 24 − 1e-10 h, within the engine's tolerance of the 24 h tick, so the clock
    # reads 23.9999999999 when the hourly refresh (and the day's replan) runs. The replan
    # plans from the boundary, 2026-10-02T00:00:00Z, whatever the clock: before, as_of was
    # 23:59:59.99…, a grid a hair off the demand's, and a 6-hour-period replay of Philly
    # then broke rule 2 (granted 10.253 GPU-hours against a demand of 10.252).
    as_ofs = []

    class Recording(IdealExecutor):
        def apply_first_period(self, sim, body: dict, first: str) -> None:
            as_ofs.append((sim.now, body["as_of"], first))
            super().apply_first_period(sim, body, first)

    sc = two_teams(days=3)
    tr = trace([("J", "a", 0, 1, 24.0 - 1e-10, 1.0)])
    replay(sc, tr, Replanner(Recording()))
    nows = [now for now, _, _ in as_ofs]
    assert nows[1] == pytest.approx(24.0) and nows[1] < 24.0  # the case this is about
    assert [(as_of, first) for _, as_of, first in as_ofs] == [
        (f"2026-10-0{d}T00:00:00Z", f"2026-10-0{d}T00:00:00Z") for d in (1, 2, 3)]


def test_policies_read_no_raw_per_job_list_of_the_engine():
    # the engine's per-job state (job states, classes, run starts, ...) is read through its
    # typed methods (is_running, tag_of, started_at, work_left, ...), never indexed raw
    import re
    from pathlib import Path

    import planner.simulate as package

    raw = ("state", "tag", "run_start", "remaining", "protected_until", "placed", "epoch",
           "first_start", "finish", "lost", "preemptions", "booked_to", "protect")
    pattern = re.compile(r"\bsim\.(" + "|".join(raw) + r")\[")
    folder = Path(package.__file__).parent
    for name in ("policies.py", "replanner.py", "planner_policy.py", "slurm_replay.py",
                 "kueue_replay.py"):
        found = pattern.findall((folder / name).read_text(encoding="utf-8"))
        assert not found, (name, found)


def test_the_protected_runtime_cap_enters_once_at_the_replay():
    # The trace keeps what each job asks (A: 12 h, B: 3 h, C: unallocated 0); the replay
    # protects min(that, the contract's cap), given once: the default contract's 8 h for
    # a baseline, the cap given, or the policy's model's (strict-budgets: 4 h), and a cap
    # that disagrees with the planning model is refused (its plans would say another).
    from planner.config import load_model
    from planner.simulate.engine import Replay

    sc = two_teams()
    tr = trace([("A", "a", 0, 1, 20.0, 12.0), ("B", "a", 0, 1, 5.0, 3.0),
                ("C", "b", 0, 1, 5.0, 0.0)])
    assert Replay(sc, tr, QuotaPolicy()).protect == [8.0, 3.0, 0.0]
    assert Replay(sc, tr, QuotaPolicy(), cap_hours=2.0).protect == [2.0, 2.0, 0.0]
    strict = PlannerPolicy(load_model("strict-budgets"))
    assert Replay(sc, tr, strict).protect == [4.0, 3.0, 0.0]
    assert Replay(sc, tr, strict, cap_hours=4.0).protect_cap == 4.0
    with pytest.raises(ValueError, match="disagrees with the policy's model"):
        Replay(sc, tr, strict, cap_hours=8.0)
    with pytest.raises(ValueError, match="must be > 0"):
        Replay(sc, tr, QuotaPolicy(), cap_hours=0.0)
