"""The replay's metrics on hand-made replays: every figure worked out in the comments."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from planner.simulate.engine import DONE, ReplayResult, Segment, replay
from planner.simulate.metrics import (
    binned,
    compute_metrics,
    ideal_occupancy,
    offered_work,
    trace_figures,
)
from planner.simulate.run import KNOWN_POLICIES, POLICIES, POLICY_NAMES, make_policy
from tests.test_simulate import trace, two_teams


def hand_result(hours: float, segments: list[Segment], first: list[float],
                finish: list[float]) -> ReplayResult:
    """A replay written by hand (no policy): its segments and each job's fate."""
    n = len(first)
    return ReplayResult(policy="hand", hours=hours, segments=tuple(segments),
                        first_start=np.array(first, dtype=float),
                        finish=np.array(finish, dtype=float),
                        preemptions=np.zeros(n, dtype=np.int64), lost_gpu_hours=np.zeros(n),
                        protected_violations=0, replans=0, plan_seconds=0.0)


def seg(job: int, project: int, start: float, end: float, gpus: int) -> Segment:
    return Segment(job, 0, project, start, end, gpus, gpus, DONE, "run")


def two_week_case():
    """Two weeks (336 h), one node of 8 H100s; a budget 336 (pace 1 NGH/h), b 672 (pace 2).

    Trace rows (sorted by submit, job_id): 0 A (a, 1 GPU, 48 h, allocated, t 0),
    1 B (b, 2 GPUs, 12 h, allocated, t 0), 2 U (b, 4 GPUs, 5 h, unallocated, t 0),
    3 N (a, 1 GPU, 10 h, allocated, t 300). The hand replay: A runs 150 → 198 (it
    waited), B 0 → 12, U 0 → 5, N never starts.
    """
    sc = two_teams(days=14, budgets=(("a", 336.0), ("b", 672.0)))
    tr = trace([("A", "a", 0, 1, 48.0, 1.0), ("B", "b", 0, 2, 12.0, 1.0),
                ("U", "b", 0, 4, 5.0, 0.0), ("N", "a", 300, 1, 10.0, 1.0)])
    result = hand_result(336.0, [seg(0, 0, 150.0, 198.0, 1), seg(1, 1, 0.0, 12.0, 2),
                                 seg(2, 1, 0.0, 5.0, 4)],
                         [150.0, 0.0, 0.0, np.nan], [198.0, 12.0, 5.0, np.nan])
    return sc, tr, result


def test_delivered_over_owed_daily_weekly_quarter_by_hand():
    # Owed, fixed from the trace (allocated work as if run at once, capped at the pace):
    #   a: A offers 1 NGH/h over [0, 48), N over [300, 310): owed 1 in each of those
    #      58 hours (pace 1): day 0 24, day 1 24, day 12 10; week 0 48, week 1 10.
    #   b: B offers 2 NGH/h over [0, 12) (pace 2): owed 24, day 0; U is unallocated.
    #   Total owed 82.
    # Got (allocated NGH run): a 1/h over [150, 198): day 6 18, day 7 24, day 8 6;
    #   week 0 18, week 1 30. b 2/h over [0, 12): 24 on day 0.
    # Daily: a gets nothing on a day it was owed anything (its days 6–8 owed 0): 0;
    #   b min(24, 24) = 24 → 24 / 82.
    # Weekly: a min(18, 48) + min(30, 10) = 28; b 24 → 52 / 82.
    # Quarter: a min(48, 58) = 48; b 24 → 72 / 82.
    sc, tr, result = two_week_case()
    m = compute_metrics(sc, tr, result).summary
    assert m["owed_ngh"] == pytest.approx(82.0)
    assert m["delivered_over_owed_daily"] == pytest.approx(24 / 82, abs=1e-6)
    assert m["delivered_over_owed_weekly"] == pytest.approx(52 / 82, abs=1e-6)
    assert m["delivered_over_owed_quarter"] == pytest.approx(72 / 82, abs=1e-6)
    # Teams (weekly sums): ta 28 / 58, tb 24 / 24; Jain over (28/58, 1).
    x = np.array([28 / 58, 1.0])
    assert m["teams"]["ta"]["delivered_over_owed_weekly"] == pytest.approx(28 / 58, abs=1e-6)
    assert m["teams"]["tb"]["delivered_over_owed_weekly"] == pytest.approx(1.0)
    assert m["worst_team_delivered_over_owed"] == pytest.approx(28 / 58, abs=1e-6)
    assert m["jain"] == pytest.approx(x.sum() ** 2 / (2 * (x ** 2).sum()), abs=1e-6)
    # The old hourly figure, owed capped at the replay's own queue: a's A is outstanding
    # over [0, 198) and N over [300, 336): owed 198 + 36 = 234, delivered 48 (hours
    # 150–197); b owed and delivered 24 → 72 / 258.
    assert m["delivered_over_owed_hourly"] == pytest.approx(72 / 258, abs=1e-6)
    assert m["owed_hourly_ngh"] == pytest.approx(258.0)


def test_budget_error_floor_and_never_started_waits_by_hand():
    # Floor: a submitted allocated 48 + 10 = 58 NGH of its 336: (336 − 58) / 336;
    # b 24 (U is unallocated) of 672: (672 − 24) / 672. The error itself: a charged 48,
    # |48 − 336| / 336; b charged 24, the same as its floor.
    sc, tr, result = two_week_case()
    m = compute_metrics(sc, tr, result).summary
    floor = [278 / 336, 648 / 672]
    assert m["budget_error_floor_mean"] == pytest.approx(np.mean(floor), abs=1e-6)
    assert m["budget_error_floor_max"] == pytest.approx(max(floor), abs=1e-6)
    assert m["budget_error_mean"] == pytest.approx((288 / 336 + 648 / 672) / 2, abs=1e-6)
    assert m["budget_error_mean"] >= m["budget_error_floor_mean"]
    # N never started: its wait runs to the end of the replay, 336 − 300 = 36 h, and it
    # is counted. Waits A 150, B 0, U 0, N 36: p50 18; small (≤ 1 GPU): A, N → p50 93.
    assert m["jobs_never_started"] == 1 and m["jobs_started"] == 3
    assert m["wait_p50_hours"] == pytest.approx(18.0)
    assert m["small_wait_p50_hours"] == pytest.approx(93.0)
    figures = trace_figures(sc, tr)
    assert figures["budget_error_floor_mean"] == m["budget_error_floor_mean"]
    assert figures["owed_ngh"] == m["owed_ngh"]


def test_charged_over_budget_per_project_and_its_max_by_hand():
    # a charged A's 48 NGH of its 336 (48 / 336 = 1/7), b B's 24 of its 672 (U is
    # unallocated: charged to no budget): 24 / 672 = 1/28. The max is a's.
    sc, tr, result = two_week_case()
    m = compute_metrics(sc, tr, result).summary
    assert m["projects"]["a"] == {"budget_ngh": 336.0, "charged_ngh": 48.0,
                                  "submitted_ngh": 58.0,
                                  "charged_over_budget": pytest.approx(1 / 7, abs=1e-6)}
    assert m["projects"]["b"]["charged_over_budget"] == pytest.approx(1 / 28, abs=1e-6)
    assert m["charged_over_budget_max"] == pytest.approx(1 / 7, abs=1e-6)
    assert m["charged_over_budget_max_project"] == "a"
    # A on 8 GPUs for 48 h: a charged 384 NGH of its 336, b nothing. Over budget the
    # error is the ratio less one: errors a 48 / 336, b 1
    over = hand_result(336.0, [seg(0, 0, 0.0, 48.0, 8)], [0.0, np.nan, np.nan, np.nan],
                       [48.0, np.nan, np.nan, np.nan])
    m = compute_metrics(sc, tr, over).summary
    assert m["charged_over_budget_max"] == pytest.approx(384 / 336, abs=1e-6)
    assert m["charged_over_budget_max_project"] == "a"
    assert m["budget_error_mean"] == pytest.approx((48 / 336 + 1) / 2, abs=1e-6)


def test_never_started_jobs_are_reported_in_the_jobs_csv():
    from planner.simulate.run import jobs_csv

    sc, tr, result = two_week_case()
    rows = pd.read_csv(pd.io.common.BytesIO(jobs_csv(sc, tr, result)))
    n = rows.set_index("job_id").loc["N"]
    assert bool(n["never_started"]) and n["wait_hours"] == 36.0 and pd.isna(n["first_start"])
    assert not rows.set_index("job_id").loc["A", "never_started"]


def test_ideal_occupancy_and_weekly_offered_load_by_hand():
    # One node of 8 GPUs, 4 days (96 h). Two 8-GPU jobs of 1 h at t 0: 16 GPU-hours
    # offered in hour 0. The fluid ideal runs 8 in hour 0, carries 8, runs them in hour
    # 1: 16 busy of 8 × 96 = 1/48. One (short) week: offered load 16 / 768 = 1/48.
    sc = two_teams()
    tr = trace([("x", "a", 0, 8, 1.0, 1.0), ("y", "b", 0, 8, 1.0, 1.0)])
    figures = trace_figures(sc, tr)
    assert figures["ideal_occupancy"] == pytest.approx(1 / 48, abs=1e-6)
    assert figures["offered_load_by_week"] == [pytest.approx(1 / 48, abs=1e-6)]
    # Carrying matters: 20 GPU-hours offered in one hour on 8 GPUs → 8, 8, 4.
    assert ideal_occupancy(np.array([8.0]), np.array([[20.0, 0, 0, 0]])) == \
        pytest.approx(20 / 32)


def test_binned_sums_whole_bins_and_a_short_last_one():
    values = np.arange(10, dtype=float)[None, :]  # hours 0..9
    assert binned(values, 4).tolist() == [[6.0, 22.0, 17.0]]


def test_owed_is_the_same_for_every_policy_on_the_same_trace():
    # Two teams on two nodes; allocated and unallocated jobs, gangs, contention. Each
    # policy queues differently (the hourly owed differs), the fixed owed may not.
    sc = two_teams(nodes=2, days=3)
    rng = np.random.default_rng(3)
    rows = [(f"j{i}", "ab"[i % 2], float(rng.uniform(0, 40)), int(rng.choice([1, 4, 8, 16])),
             float(rng.uniform(0.5, 12)), float(rng.choice([0.0, 2.0])),
             bool(rng.random() < 0.7)) for i in range(40)]
    tr = trace(rows)
    expected = offered_work(sc, tr).owed_ph.sum()
    owed, hourly, ratios = set(), set(), []
    for name in POLICY_NAMES:
        m = compute_metrics(sc, tr, replay(sc, tr, make_policy(name))).summary
        owed.add(m["owed_ngh"])
        hourly.add(m["owed_hourly_ngh"])
        ratios.append((m["delivered_over_owed_daily"], m["delivered_over_owed_weekly"],
                       m["delivered_over_owed_quarter"]))
    assert owed == {round(float(expected), 6)}
    assert len(hourly) > 1  # the old denominator moved with the policy's queue
    for daily, weekly, quarter in ratios:  # a min of sums ≥ the sum of mins
        assert 0.0 <= daily <= weekly + 1e-9 <= quarter + 2e-9 <= 1.0 + 2e-9
    assert set(POLICY_NAMES) <= set(POLICIES) == set(KNOWN_POLICIES)
