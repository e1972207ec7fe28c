"""The typed seams of the replay: the engine view, the executor hooks, the shipped records."""

from __future__ import annotations

import re
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from planner.exporters import kueue, slurm
from planner.simulate import kueue_replay, slurm_replay
from planner.simulate.engine import Replay
from planner.simulate.executor import EngineView, Executor
from planner.simulate.kueue_replay import KueueExecutor, KueueReplayPolicy
from planner.simulate.planner_policy import IdealExecutor, PlannerPolicy
from planner.simulate.replanner import Replanner
from planner.simulate.run import PLANNING_POLICIES, make_policy
from planner.simulate.slurm_replay import SlurmExecutor, SlurmReplayPolicy
from tests.test_simulate import trace, two_teams

SIMULATE = Path(__file__).resolve().parent.parent / "planner" / "simulate"


def test_the_engine_is_an_engine_view():
    sim = Replay(two_teams(), trace([("A", "a", 0, 1, 2.0, 1.0)]), PlannerPolicy())
    assert isinstance(sim, EngineView)


@pytest.mark.parametrize("name", PLANNING_POLICIES)
def test_every_executor_has_the_hooks_the_replanner_calls(name):
    # the ideal executor (planner), Slurm's and Kueue's, as the CLI makes them
    policy = make_policy(name)
    assert isinstance(policy.executor, Executor)
    assert policy.name == policy.executor.name == name


def test_the_replanner_holds_its_executor_rather_than_being_one():
    # composition: each planning policy is the one Replanner holding an executor, and no
    # executor is (or inherits) a replanner, nor the other executors
    executors = {"planner": IdealExecutor, "planner-slurm": SlurmExecutor,
                 "planner-kueue": KueueExecutor}
    for name, cls in executors.items():
        policy = make_policy(name)
        assert isinstance(policy, Replanner) and type(policy.executor) is cls
        assert not issubclass(cls, Replanner)
        assert not any(issubclass(cls, other) for other in executors.values() if other is not cls)
    # one replanner: the policies add a constructor to it and nothing else
    for cls in (PlannerPolicy, SlurmReplayPolicy, KueueReplayPolicy):
        assert [n for n in vars(cls) if not n.startswith("__")] == [] and "__init__" in vars(cls)


def test_the_view_names_everything_the_executors_read_of_the_engine():
    # every ``sim.X`` the policies (the replanner and the executors too) use is a member of
    # EngineView, so an executor typed against the view uses nothing it does not promise
    members = {n for n in dir(EngineView) if not n.startswith("_")}
    members |= set(EngineView.__annotations__)
    used = set()
    for module in ("policies.py", "replanner.py", "planner_policy.py", "slurm_replay.py",
                   "kueue_replay.py"):
        used |= set(re.findall(r"\bsim\.([a-z_]+)\b", (SIMULATE / module).read_text()))
    assert used and used <= members, sorted(used - members)


def test_the_replays_run_the_shipped_export_records_themselves():
    # "the replay runs what ships" by identity: the very record the exporters take
    assert make_policy("planner-slurm").executor.export is slurm.SHIPPED
    assert make_policy("planner-kueue").executor.export is kueue.SHIPPED
    assert SlurmReplayPolicy(export=slurm.BEFORE_RULE8).executor.export is slurm.BEFORE_RULE8
    assert KueueReplayPolicy().executor.export is kueue.SHIPPED
    # and the replay-only options, one frozen record each, as shipped unless a variant
    assert make_policy("planner-slurm").executor.options is slurm_replay.AS_SHIPPED
    assert make_policy("planner-kueue").executor.options is kueue_replay.AS_SHIPPED
    with pytest.raises(FrozenInstanceError):
        slurm_replay.AS_SHIPPED.reserve_each = False  # type: ignore[misc]


def test_the_replay_options_records_reach_their_executors():
    # Kueue's Fair Sharing preemption needs Fair Sharing: a record turning Fair Sharing off
    # turns both off; the strategies are Kueue's, LessThanOrEqualToFinalShare first
    unfair = KueueReplayPolicy(options=kueue_replay.KueueReplayOptions(fair_sharing=False))
    assert (unfair.executor.fair_sharing, unfair.executor.fair_preemption) == (False, False)
    assert kueue_replay.KueueReplayOptions(strategies=kueue_replay.STRATEGIES).strategies == (
        "LessThanOrEqualToFinalShare", "LessThanInitialShare")
    for wrong in ((), ("LessThanInitialShare",), ("LessThanOrEqualToFinalShare", "Other")):
        with pytest.raises(ValueError, match="preemptionStrategies"):
            kueue_replay.KueueReplayOptions(strategies=wrong)
    # Slurm's: a site's bf_window of 12 h, the backfill as first modelled
    site = slurm_replay.SlurmReplayOptions(bf_window_hours=12, reserve_each=False)
    executor = SlurmReplayPolicy(options=site).executor
    assert (executor.bf_window, executor.reserve_each, executor.min_prio_reserve) == (
        12.0, False, True)
    assert executor.options is site and executor.export is slurm.SHIPPED
