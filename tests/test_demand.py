"""Demand from the queue (:mod:`planner.demand`): by hand, then the replays against the CLI.

The proof that there is one implementation: a replay's queue at some hour is rendered as
``squeue`` text and as Workloads JSON, ingested by ``planner ingest``, and the
``demand.csv`` written is, byte for byte, the demand the replay's policy planned from.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.cli import main
from planner.demand import (
    DemandGrid,
    QueuedJob,
    demand_csv,
    demand_frame,
    forecast_from_usage,
    merge_declared,
    periods_hours,
    queue_cells,
)
from planner.ingest.queue import ingest_demand
from planner.ingest.squeue import squeue_text
from planner.inputs.load import load_scenario
from planner.simulate.engine import replay
from planner.simulate.kueue_replay import KueueReplayPolicy
from planner.simulate.planner_policy import DemandSource
from planner.simulate.queue_render import squeue_rows, workload_items
from planner.simulate.slurm_replay import SlurmReplayPolicy
from planner.times import iso
from tests.scenario_factory import write_scenario

T0 = pd.Timestamp("2026-10-01", tz="UTC")
H = pd.Timedelta(hours=1)


def grid(**kw) -> DemandGrid:
    base = dict(projects=("p1", "p2"), clusters=("c1", "c2"),
                allowed=np.array([[True, True], [True, False]]), quarter_start=T0,
                quarter_end=T0 + 10 * 24 * H, period_hours=24.0, window_hours=48.0)
    return DemandGrid(**{**base, **kw})


def job(project: str, cluster: str, gpus: float, hours: float | None,
        allocated: bool = True) -> QueuedJob:
    return QueuedJob("j", project, cluster, gpus, hours, allocated, False)


def test_each_allocated_job_asks_its_gpus_for_its_time_left_in_whole_periods():
    # as of day 2, periods of 24 h:
    #   p1 c1: 8 GPUs with 30 h left -> 2 periods (48 h); 4 GPUs with 0.5 h -> 1 period;
    #          2 GPUs with 48 h -> 2 periods: adds to the first row (same length): 10 GPUs
    #   p1 c2: 16 GPUs (a gang) with no time limit -> to the quarter's end (8 days)
    #   p2 c2: not allowed (budgets.csv): left out, reported
    #   p2 c1: unallocated (opportunistic): asks nothing, not left out
    #   p2 c1: 1 GPU with 0 s left (at its limit) -> still one period
    as_of = T0 + 48 * H
    jobs = [job("p1", "c1", 8, 30.0), job("p1", "c1", 4, 0.5), job("p1", "c1", 2, 48.0),
            job("p1", "c2", 16, None), job("p2", "c2", 4, 10.0), job("p2", "c1", 8, 5.0, False),
            job("p2", "c1", 1, 0.0)]
    cells, left_out = queue_cells(jobs, grid(), as_of)
    assert cells == {(0, 0, 48.0): 10, (0, 0, 24.0): 4, (0, 1, 192.0): 16, (1, 0, 24.0): 1}
    assert [(j.project, j.cluster) for j in left_out] == [("p2", "c2")]
    frame = demand_frame(cells, None, grid(), as_of)
    assert demand_csv(frame).decode().splitlines() == [
        "project,cluster,start,end,gpus",
        "p1,c1,2026-10-03T00:00:00Z,2026-10-04T00:00:00Z,4",
        "p1,c1,2026-10-03T00:00:00Z,2026-10-05T00:00:00Z,10",
        "p1,c2,2026-10-03T00:00:00Z,2026-10-11T00:00:00Z,16",
        "p2,c1,2026-10-03T00:00:00Z,2026-10-04T00:00:00Z,1"]


def test_the_forecast_is_what_ran_in_the_window_over_its_hours():
    # as of day 3 the window is the last 48 h: [day 1, day 3). p1 on c1 ran 4 GPUs from
    # day 0 12:00 to day 1 12:00 (12 h inside the window) and 2 GPUs over day 2 (24 h):
    # (48 + 48) / 48 = 2 GPUs. p2 ran on c2, which it may not use: 0. Early in the quarter
    # (as of day 1) the window is the 24 h so far: 4 GPUs × 12 h / 24 = 2.
    usage = pd.DataFrame({
        "project": ["p1", "p1", "p2"], "cluster": ["c1", "c1", "c2"], "gpus": [4.0, 2.0, 8.0],
        "start": [T0 + 12 * H, T0 + 48 * H, T0], "end": [T0 + 36 * H, T0 + 72 * H, T0 + 72 * H]})
    got = forecast_from_usage(usage, T0 + 72 * H, grid())
    assert got.tolist() == [[2.0, 0.0], [0.0, 0.0]]
    assert forecast_from_usage(usage, T0 + 24 * H, grid()).tolist() == [[2.0, 0.0], [0.0, 0.0]]
    frame = demand_frame({}, got, grid(), T0 + 72 * H)
    assert demand_csv(frame).decode().splitlines()[1] == \
        "p1,c1,2026-10-04T00:00:00Z,2026-10-11T00:00:00Z,2"


def test_declared_rows_stand_only_for_the_periods_the_queue_asks_nothing_for():
    # as of day 2. The queue asks p1 on c1 for days 2-3 (8 GPUs, 2 periods). The lead
    # declared p1 c1 12 GPUs for days 1-6 and p2 c1 3 GPUs for days 4-5:
    #   p1 c1: days 2-3 are the queue's; the declaration stands for days 4-6 (day 1 is past)
    #   p2 c1: the queue says nothing there: the declaration stands whole
    as_of = T0 + 48 * H
    cells, _ = queue_cells([job("p1", "c1", 8, 40.0)], grid(), as_of)
    frame = demand_frame(cells, None, grid(), as_of)
    declared = pd.DataFrame({"project": ["p1", "p2"], "cluster": ["c1", "c1"],
                             "start": [T0 + 24 * H, T0 + 96 * H],
                             "end": [T0 + 168 * H, T0 + 144 * H], "gpus": [12.0, 3.0]})
    merged = merge_declared(frame, declared, grid(), as_of)
    assert demand_csv(merged).decode().splitlines()[1:] == [
        "p1,c1,2026-10-03T00:00:00Z,2026-10-05T00:00:00Z,8",
        "p1,c1,2026-10-05T00:00:00Z,2026-10-08T00:00:00Z,12",
        "p2,c1,2026-10-05T00:00:00Z,2026-10-07T00:00:00Z,3"]
    # a queue row in the middle of the declaration splits it around it
    cells, _ = queue_cells([job("p1", "c1", 1, 1.0)], grid(), T0 + 96 * H)
    split = merge_declared(demand_frame(cells, None, grid(), T0 + 96 * H),
                           declared[:1], grid(), T0 + 72 * H)
    assert demand_csv(split).decode().splitlines()[1:] == [
        "p1,c1,2026-10-04T00:00:00Z,2026-10-05T00:00:00Z,12",
        "p1,c1,2026-10-05T00:00:00Z,2026-10-06T00:00:00Z,1",
        "p1,c1,2026-10-06T00:00:00Z,2026-10-08T00:00:00Z,12"]


@settings(max_examples=60, deadline=None)
@given(st.floats(min_value=-5, max_value=500, allow_nan=False),
       st.sampled_from([1.0, 6.0, 24.0, 168.0]))
def test_a_job_asks_whole_periods_covering_its_time_left_and_seconds_do_not_change_it(
        hours: float, period: float):
    asked = periods_hours(hours, period)
    assert asked >= max(hours, 0) and asked >= period and asked % period == 0
    assert asked - max(hours, 0) < period + 1e-9
    # the replays render the time left in whole seconds, rounded up: the same periods
    from planner.simulate.queue_render import seconds_up

    assert periods_hours(seconds_up(hours) / 3600.0, period) == asked


# -- the replays' queue, rendered and ingested ----------------------------------------------

AT = T0 + 48 * H  # the replan whose demand is compared
SCENARIO = """\
name = "queue"
quarter_start = 2026-10-01
quarter_end = 2026-10-06
as_of = 2026-10-01
period_hours = 24
lookback_days = 2
"""
BUDGETS = "project,gpu_hours,clusters\np1,300,\np2,40,h100-a\np3,2000,a100-b;h100-a\n"


def queue_trace() -> pd.DataFrame:
    """30 jobs on the factory's two clusters: small, gangs, unallocated, long limits."""
    rows = []
    rng = np.random.default_rng(7)
    for i in range(30):
        project = ("p1", "p2", "p3", "p4")[i % 4]
        cluster = "h100-a" if project == "p2" or i % 3 else "a100-b"
        gpus = int(rng.choice([1, 2, 4, 8, 16]))
        hours = float(rng.uniform(0.5, 40.0))
        rows.append((f"j{i:02d}", project, cluster, T0 + float(rng.uniform(0, 60)) * H, gpus,
                     hours, 0.0 if i % 5 == 4 else 2.0, bool(i % 2),
                     float(np.ceil(hours * rng.uniform(1.0, 2.0)))))
    frame = pd.DataFrame(rows, columns=["job_id", "project", "cluster", "submit", "gpus",
                                        "duration_hours", "min_runtime_hours", "resumable",
                                        "time_limit_hours"])
    return frame.sort_values(["submit", "job_id"], kind="stable").reset_index(drop=True)


def capturing(policy_class):
    """The policy, recording at :data:`AT` its demand, usage and queue as rendered."""

    class Capturing(policy_class):
        captured: dict = {}

        def _demand(self, sim, as_of, asked=frozenset(), usage=None):
            frame = super()._demand(sim, as_of, asked, usage)
            if as_of == AT:
                if isinstance(self, SlurmReplayPolicy):
                    rows, moved = squeue_rows(sim, self.hours_left, self._under_budget, asked)
                    text = squeue_text(rows)
                else:
                    moved = {}
                    text = json.dumps({"apiVersion": "v1", "kind": "List", "items":
                                       workload_items(sim, self.hours_left, as_of, asked)})
                self.captured = {"demand": frame, "usage": usage, "text": text, "moved": moved}
            return frame

    return Capturing


def _folder(tmp_path: Path) -> Path:
    return write_scenario(tmp_path / "scenario", scenario=SCENARIO, budgets=BUDGETS,
                          demand=None, reservations=None, usage=None)


def _ledger(folder: Path, usage: pd.DataFrame) -> None:
    """The replay's usage as the scenario's usage.csv (the ledger the forecast reads)."""
    lines = ["job_id,project,cluster,gpus,start,end,state"]
    lines += [f"{j},{p},{c},{g!r},{iso(s)},{iso(e)}," for j, p, c, g, s, e in zip(
        usage["job_id"], usage["project"], usage["cluster"], usage["gpus"], usage["start"],
        usage["end"], strict=True)]
    (folder / "usage.csv").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("sees", ["queue", "trace"])
def test_planner_slurm_plans_from_exactly_what_ingest_squeue_writes(tmp_path, sees):
    folder = _folder(tmp_path)
    scenario = load_scenario(folder)
    # "trace": the replay knows each job's work left (rendered as its time limit left);
    # its forecast counts work not yet run, which no ledger holds: compared without it
    source = DemandSource(sees=sees, forecast=sees == "queue")
    policy = capturing(SlurmReplayPolicy)(demand=source)
    replay(scenario, queue_trace(), policy)
    seen = policy.captured
    assert len(seen["demand"]) > 3 and seen["moved"]  # a queue worth comparing, moves too
    (tmp_path / "squeue.txt").write_text(seen["text"])
    state = tmp_path / "state"
    state.mkdir()
    (state / "tick.json").write_text(json.dumps({"moved": seen["moved"]}))
    _ledger(folder, seen["usage"])
    argv = ["ingest", "squeue", str(tmp_path / "squeue.txt"), str(folder), "--now", iso(AT),
            "--state", str(state)]
    assert main(argv + ([] if source.forecast else ["--no-forecast"])) == 0
    assert (folder / "demand.csv").read_bytes() == demand_csv(seen["demand"])


@pytest.mark.parametrize("sees", ["queue", "trace"])
def test_planner_kueue_plans_from_exactly_what_ingest_kueue_demand_writes(tmp_path, sees):
    folder = _folder(tmp_path)
    scenario = load_scenario(folder)
    source = DemandSource(sees=sees, forecast=sees == "queue")
    policy = capturing(KueueReplayPolicy)(demand=source)
    replay(scenario, queue_trace(), policy)
    seen = policy.captured
    assert len(seen["demand"]) > 3
    (tmp_path / "workloads.json").write_text(seen["text"])
    _ledger(folder, seen["usage"])
    # the demand step of `planner ingest kueue --demand` (after its usage step, which would
    # add the admitted Workloads to a ledger that holds them already)
    report = ingest_demand(folder, "kueue", tmp_path / "workloads.json", now=AT,
                           forecast=source.forecast)
    assert report.written
    assert (folder / "demand.csv").read_bytes() == demand_csv(seen["demand"])
    if not source.forecast:  # and the whole command, usage step and all
        (folder / "demand.csv").unlink()
        assert main(["ingest", "kueue", str(tmp_path / "workloads.json"), str(folder),
                     "--demand", "--no-forecast", "--now", iso(AT)]) == 0
        assert (folder / "demand.csv").read_bytes() == demand_csv(seen["demand"])


@pytest.mark.parametrize("policy_class", [SlurmReplayPolicy, KueueReplayPolicy])
def test_a_replay_through_the_rendered_queue_gives_the_same_figures(tmp_path, policy_class):
    # via_text renders the queue every replan and plans from what the parser reads back
    scenario = load_scenario(_folder(tmp_path))
    runs = [replay(scenario, queue_trace(), policy_class(demand=DemandSource(
        sees="queue", via_text=via))) for via in (False, True)]
    assert [s for s in runs[0].segments] == [s for s in runs[1].segments]
    assert np.array_equal(runs[0].first_start, runs[1].first_start, equal_nan=True)
