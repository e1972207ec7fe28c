"""``planner trace synthetic``: the same bytes per seed, and the shape it promises."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from planner.cli import main
from planner.inputs.load import load_scenario
from planner.simulate.synthetic import SyntheticParams, synthetic_trace
from planner.simulate.trace import read_trace, write_trace
from tests.test_trace import philly_scenario_folder

JOBS = 3000  # on 48 GPUs (c1 16, c2 32, 8 a node): about 50 GPU-hours a job at load 1.45


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    """Five projects on c1 (16 GPUs) and c2 (32); p3 may use c2 only."""
    return philly_scenario_folder(tmp_path_factory.mktemp("sc") / "small")


def test_synthetic_same_seed_same_bytes_other_seed_other_trace(tmp_path, capsys, small):
    paths = []
    for name, seed in (("one", 5), ("two", 5), ("three", 6)):
        path = tmp_path / f"{name}.csv"
        assert main(["trace", "synthetic", str(small), "--seed", str(seed), "--jobs",
                     str(JOBS), "--out", str(path)]) == 0
        paths.append(path)
    assert paths[0].read_bytes() == paths[1].read_bytes()
    assert paths[0].read_bytes() != paths[2].read_bytes()
    assert f"{JOBS:,} jobs on tiny-philly, seed 5" in capsys.readouterr().out


def test_synthetic_trace_is_valid_and_has_the_promised_shape(tmp_path, small):
    sample = load_scenario(small)
    params = SyntheticParams(jobs=JOBS)
    frame = synthetic_trace(sample, seed=1, params=params)
    path = tmp_path / "t.csv"
    write_trace(frame, path)
    tr = read_trace(path, sample)  # every row valid on the sample
    assert len(tr) == JOBS and tr["job_id"].is_unique
    hours = (sample.config.quarter_end - sample.config.quarter_start).total_seconds() / 3600
    capacity = float((sample.clusters["nodes"] * sample.clusters["gpus_per_node"]).sum())
    # offered GPU-hours = load × capacity × quarter hours (durations scaled to it)
    offered = float((tr["gpus"] * tr["duration_hours"]).sum())
    assert offered == pytest.approx(params.load * capacity * hours, rel=1e-6)
    assert 1.3 <= params.load <= 1.6
    # wide gang jobs: whole 8-GPU nodes and 4-node 32-GPU gangs, all allocated
    sizes = tr["gpus"].value_counts()
    assert sizes[8] > 0.1 * JOBS and sizes[32] > 0.03 * JOBS
    gangs = tr[tr["gpus"] >= 8]
    assert (gangs["min_runtime_hours"] > 0).all()
    assert not tr[tr["gpus"] == 32]["resumable"].all()  # half the multi-node gangs restart
    # heavy tail: the longest 5 % of the jobs hold over a third of the GPU-hours
    work = (tr["gpus"] * tr["duration_hours"]).sort_values(ascending=False)
    assert work.iloc[: JOBS // 20].sum() > offered / 3
    assert tr["duration_hours"].max() <= params.max_duration_hours
    # day and week rhythm: the 8 busiest hours (10–18 UTC) get more than their third of
    # the weekday submits; a weekend day gets under half a weekday's
    hour = tr["submit"].dt.hour
    day = tr["submit"].dt.day_of_week
    weekday = day < 5
    assert ((hour >= 10) & (hour < 18))[weekday].mean() > 0.42
    per_weekend_day = (~weekday).sum() / 2
    per_weekday = weekday.sum() / 5
    assert per_weekend_day < 0.5 * per_weekday
    # requested limits: at least the duration, on the ladder of usual requests
    limits = tr["time_limit_hours"]
    assert (limits >= tr["duration_hours"]).all()
    ladder = np.asarray(params.limit_steps, dtype=float)
    on_ladder = np.isin(limits, ladder) | (limits % ladder[-1] == 0)
    assert on_ladder.all()


@pytest.mark.parametrize(("jobs", "words"), [("0", "must be a positive number"),
                                             ("20", "too few jobs for the load")])
def test_synthetic_bad_jobs_exit_2_and_write_nothing(tmp_path, capsys, small, jobs, words):
    # 20 jobs of at most 240 h cannot offer 1.45 × 48 GPUs × 2,208 h.
    out = tmp_path / "t.csv"
    assert main(["trace", "synthetic", str(small), "--jobs", jobs, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--jobs" in err and words in err
    assert not list(tmp_path.iterdir())


def test_trace_synthetic_help_states_the_real_defaults(capsys):
    # the CLI spells the defaults out so `--help` need not import the simulator
    from planner.cli import main
    from planner.simulate.synthetic import SyntheticParams

    with pytest.raises(SystemExit):
        main(["trace", "synthetic", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"(default {SyntheticParams().jobs:,})" in text
    assert f"(default {SyntheticParams().load})" in text
