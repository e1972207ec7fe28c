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

FIXTURES = Path(__file__).resolve().parent / "fixtures"
QUEUE = FIXTURES / "kueue-queue.json"
WORKLOAD_CRD = Path(__file__).resolve().parents[2] / "shared" / "schemas" / "kueue" / \
    "kueue.x-k8s.io_workloads.yaml"
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
                    rows, moved = squeue_rows(sim, self.hours_left,
                                              self.executor._under_budget, asked)
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
    if WORKLOAD_CRD.is_file():  # what the replay renders is what Kueue v0.19.2 would hold
        check = crd_validator()
        for item in json.loads(seen["text"])["items"]:
            check.validate(item)
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


# -- the recorded Workloads and squeue output, by hand ---------------------------------------



def _tiny(tmp_path: Path) -> Path:
    from tests.scenario_factory import ORG_CSV

    return write_scenario(tmp_path / "scenario", org=ORG_CSV + "P_5,language,1\n",
                          demand=None)


def crd_validator():
    """The v1beta2 schema of Kueue v0.19.2's Workload CRD (``../shared/schemas/kueue``)."""
    import jsonschema
    import yaml

    crd = yaml.safe_load(WORKLOAD_CRD.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta2"]
    return jsonschema.Draft7Validator(version["schema"]["openAPIV3Schema"])


@pytest.mark.skipif(not WORKLOAD_CRD.is_file(), reason=f"no {WORKLOAD_CRD}")
def test_the_recorded_queue_validates_against_kueues_v0_19_2_workload_crd():
    import jsonschema

    check = crd_validator()
    items = json.loads(QUEUE.read_text())["items"]
    for item in items:
        check.validate(item)
    bad = json.loads(json.dumps(items[0]))
    bad["spec"]["maximumExecutionTimeSeconds"] = 0  # the CRD's minimum is 1
    with pytest.raises(jsonschema.ValidationError):
        check.validate(bad)


def test_ingest_kueue_demand_reads_the_recorded_queue_by_hand(tmp_path, capsys):
    # now Nov 2 06:00, periods of a day (the tiny scenario, with P_5; no forecast):
    #  1 p2 eval, pending, 4 GPUs, limit 10 h; p2 runs on h100-a alone -> 1 day
    #  2 P_5 sweep, admitted 00:00 on a100-b, 8 GPUs, limit 48 h, ran 6 h -> 42 h: 2 days
    #  3 p3 gang, pending, 2 x 8 GPUs selecting h100-a, annotation 72 h -> 3 days
    #  4 p1 train, admitted again 04:00 on h100-a after 2 h: limit 4 h, used 4 -> 1 day
    #  5 p1 notebook, class gpu-planner-unallocated: nothing
    #  6 p1 ablation, pending, 2 GPUs selecting a100-b, no limit -> to the quarter's end
    #  7 p1's finished train: nothing
    folder = _tiny(tmp_path)
    assert main(["ingest", "kueue", str(QUEUE), str(folder), "--demand", "--no-forecast",
                 "--now", "2026-11-02T06:00:00Z"]) == 0
    assert (folder / "demand.csv").read_text().splitlines() == [
        "project,cluster,start,end,gpus",
        "P_5,a100-b,2026-11-02T06:00:00Z,2026-11-04T06:00:00Z,8",
        "p1,a100-b,2026-11-02T06:00:00Z,2027-01-01T00:00:00Z,2",
        "p1,h100-a,2026-11-02T06:00:00Z,2026-11-03T06:00:00Z,8",
        "p2,h100-a,2026-11-02T06:00:00Z,2026-11-03T06:00:00Z,4",
        "p3,h100-a,2026-11-02T06:00:00Z,2026-11-05T06:00:00Z,16"]
    out = capsys.readouterr().out
    assert "5 demand rows from 5 allocated jobs" in out
    assert "not counted, finished (1): p1/job-train-7f3c1-5a1e2 (row 7)" in out
    assert "not counted, unallocated (asks nothing: opportunistic work) (1): " \
           "kueue:p1/job-notebook-2c3d4-5e6f7" in out
    # the usage step ran too: the two admitted Workloads are in usage.csv up to now
    usage = (folder / "usage.csv").read_text()
    assert "kueue:p1/job-train-1b2c3-4d5e6,p1,h100-a,8,2026-11-02T02:00:00Z," \
           "2026-11-02T06:00:00Z,running" in usage


def test_ingest_squeue_reads_every_gpu_form_by_hand(tmp_path):
    # now Nov 2 00:00. GPUs from tres-alloc (typed and untyped: the untyped total), else
    # per job, else per node x nodes, else per task x tasks; time left = limit - used
    folder = _tiny(tmp_path)
    text = "\n".join([
        # 16 GPUs (2 nodes), 2 days limit, 10 h run -> 38 h left: 2 days
        "1|p1|h100-a|gp-p1|RUNNING|None|cpu=2,node=2,billing=2,gres/gpu=16,gres/gpu:h100=16"
        "|N/A|gres:gpu:h100:8|N/A|2|2|2-00:00:00|10:00:00|2026-11-01T12:00:00|",
        # no tres-alloc GPUs: per job gres/gpu:3 -> 3, 30 min -> 1 day
        "2|p1|h100-a|gp-p1|PENDING|Priority|cpu=1,node=1,billing=1|gres/gpu:3|N/A|N/A|1|1"
        "|30:00|0:00|2026-11-01T23:00:00|",
        # per node gpu:a100:4 x 2 nodes -> 8 on a100-b, UNLIMITED -> the quarter's end
        "3|p3|a100-b|gp-p3|PENDING|QOSGrpGRES|cpu=1,node=2,billing=1|N/A|gpu:a100:4|N/A|2|1"
        "|UNLIMITED|0:00|2026-11-01T23:00:00|",
        # per task gres:gpu:1 x 3 tasks, moved to gp-opportunistic by the tick: still p2's
        "4|p2|h100-a|gp-opportunistic|PENDING|Resources|cpu=3,node=1,billing=3|N/A|N/A"
        "|gres:gpu:1(IDX:0)|1|3|1-00:00:00|0:00|2026-11-01T23:00:00|",
        # the user's own opportunistic job: nothing
        "5|p2|h100-a|gp-opportunistic|PENDING|Priority|cpu=1,node=1,billing=1,gres/gpu=8"
        "|N/A|N/A|N/A|1|1|1:00:00|0:00|2026-11-01T23:00:00|",
        # a CPU job: no GPU, nothing
        "6|p2|h100-a|gp-p2|PENDING|Priority|cpu=1,node=1,billing=1|N/A|N/A|N/A|1|1|1:00:00"
        "|0:00|2026-11-01T23:00:00|"]) + "\n"
    (tmp_path / "squeue.txt").write_text(text)
    state = tmp_path / "state"
    state.mkdir()
    (state / "tick.json").write_text(json.dumps({"moved": {"4": "gp-p2"}}))
    assert main(["ingest", "squeue", str(tmp_path / "squeue.txt"), str(folder), "--now",
                 "2026-11-02", "--state", str(state), "--no-forecast"]) == 0
    assert (folder / "demand.csv").read_text().splitlines()[1:] == [
        "p1,h100-a,2026-11-02T00:00:00Z,2026-11-03T00:00:00Z,3",
        "p1,h100-a,2026-11-02T00:00:00Z,2026-11-04T00:00:00Z,16",
        "p2,h100-a,2026-11-02T00:00:00Z,2026-11-03T00:00:00Z,3",
        "p3,a100-b,2026-11-02T00:00:00Z,2027-01-01T00:00:00Z,8"]


@pytest.mark.parametrize(("line", "field", "says"), [
    ("x1|p1|h100-a|gp-p1|PENDING|Priority|gres/gpu=1|N/A|N/A|N/A|1|1|1:00|0:00|N/A|",
     "JobID", "'x1' is not a Slurm job id"),
    ("7_[1-3]|p1|h100-a|gp-p1|PENDING|Priority|gres/gpu=1|N/A|N/A|N/A|1|1|1:00|0:00|N/A|",
     "JobID", "run squeue with --array"),
    ("1|p1|h100-a|gp-p1|COMPLETED|None|gres/gpu=1|N/A|N/A|N/A|1|1|1:00|0:00|N/A|",
     "State", "PENDING and RUNNING"),
    ("1|p1|h100-a|gp-p1|PENDING|Priority|gres/gpu=x|N/A|N/A|N/A|1|1|1:00|0:00|N/A|",
     "tres-alloc", "not a whole number"),
    ("1|p1|h100-a|gp-p1|PENDING|Priority|N/A|gres:gpu:a100:two|N/A|N/A|1|1|1:00|0:00|N/A|",
     "tres-per-job", "not a whole number"),
    ("1|p1|h100-a|gp-p1|PENDING|Priority|gres/gpu=1|N/A|N/A|N/A|1|1|soon|0:00|N/A|",
     "TimeLimit", "'soon' is not a Slurm time"),
    ("1|p1|h100-a|gp-p1|PENDING|Priority|gres/gpu=1|N/A|N/A|N/A|one|1|1:00|0:00|N/A|",
     "NumNodes", "'one' is not a whole number"),
    ("1|p1|h100-a|gp-p1|PENDING|Priority|gres/gpu=1|N/A|N/A|N/A|1|1|1:00|0:00|yesterday|",
     "SubmitTime", "'yesterday' is not a time"),
    ("1|p1|h100-a|PENDING|Priority|gres/gpu=1|N/A|N/A|N/A|1|1|1:00|0:00|N/A|",
     None, "14 fields but the squeue output read here has 15"),
])
def test_a_bad_squeue_line_exits_2_naming_file_line_and_field_and_writes_nothing(
        tmp_path, capsys, line, field, says):
    folder = _tiny(tmp_path)
    good = "9|p1|h100-a|gp-p1|PENDING|Priority|gres/gpu=1|N/A|N/A|N/A|1|1|1:00|0:00|N/A|"
    (tmp_path / "squeue.txt").write_text(good + "\n" + line + "\n")
    assert main(["ingest", "squeue", str(tmp_path / "squeue.txt"), str(folder)]) == 2
    err = capsys.readouterr().err
    where = f"squeue.txt, row 2, column {field}" if field else "squeue.txt, row 2"
    assert where in err and says in err and "nothing written" in err
    assert not (folder / "demand.csv").exists() and not (folder / ".demand-source.json").exists()


def test_a_bad_workload_exits_2_and_a_hand_written_demand_csv_is_never_overwritten(
        tmp_path, capsys):
    folder = _tiny(tmp_path)
    items = json.loads(QUEUE.read_text())["items"]
    items[2]["metadata"]["annotations"]["gpu-planner.io/time-limit-seconds"] = "a week"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    usage = (folder / "usage.csv").read_bytes()
    assert main(["ingest", "kueue", str(bad), str(folder), "--demand"]) == 2
    assert "bad.json, row 3, column items[2].metadata.annotations[gpu-planner.io/time-limit-" \
           "seconds]: 'a week' is not a whole number of seconds" in capsys.readouterr().err
    assert (folder / "usage.csv").read_bytes() == usage  # the usage step did not run
    # a demand.csv a person wrote: refused, kept, and so is usage.csv
    (folder / "demand.csv").write_text("project,cluster,start,end,gpus\n"
                                       "p1,h100-a,2026-11-02,2026-11-09,8\n")
    assert main(["ingest", "kueue", str(QUEUE), str(folder), "--demand"]) == 2
    assert "demand.csv: was written by hand" in capsys.readouterr().err
    assert (folder / "usage.csv").read_bytes() == usage
    # renamed declared_demand.csv, it stands where the queue asks nothing (p1 asks on
    # h100-a only until Nov 3 06:00: the declaration holds from then, to Nov 9)
    (folder / "demand.csv").rename(folder / "declared_demand.csv")
    assert main(["ingest", "kueue", str(QUEUE), str(folder), "--demand", "--no-forecast",
                 "--now", "2026-11-02T06:00:00Z"]) == 0
    rows = (folder / "demand.csv").read_text().splitlines()
    assert "p1,h100-a,2026-11-03T06:00:00Z,2026-11-09T00:00:00Z,8" in rows
    assert "p1,h100-a,2026-11-02T06:00:00Z,2026-11-03T06:00:00Z,8" in rows
    # a second ingest of the same queue rewrites nothing
    again = (folder / "demand.csv").read_bytes()
    assert main(["ingest", "kueue", str(QUEUE), str(folder), "--demand", "--no-forecast",
                 "--now", "2026-11-02T06:00:00Z"]) == 0
    assert "unchanged, not rewritten" in capsys.readouterr().out
    assert (folder / "demand.csv").read_bytes() == again


def test_a_replay_on_declared_rows_only_plans_from_the_scenarios_demand_from_each_as_of(
        tmp_path):
    # DemandSource(queue=False): no queue, no forecast; the scenario's own demand.csv (what a
    # hand-written file amounts to), clipped to each replan's as_of
    demand = "project,cluster,start,end,gpus\np1,h100-a,2026-10-01,2026-10-04,8\n" \
             "p3,a100-b,2026-10-03,2026-10-06,4\n"
    scenario = load_scenario(write_scenario(tmp_path / "s", scenario=SCENARIO,
                                            budgets=BUDGETS, demand=demand,
                                            reservations=None, usage=None))
    policy = capturing(SlurmReplayPolicy)(demand=DemandSource(queue=False))
    replay(scenario, queue_trace(), policy)
    assert demand_csv(policy.captured["demand"]).decode().splitlines()[1:] == [
        "p1,h100-a,2026-10-03T00:00:00Z,2026-10-04T00:00:00Z,8",
        "p3,a100-b,2026-10-03T00:00:00Z,2026-10-06T00:00:00Z,4"]
