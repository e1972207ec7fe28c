"""The typed seams of the replay: the engine view, the executor hooks, the shipped records."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from planner.exporters import kueue, slurm
from planner.simulate.engine import Replay
from planner.simulate.executor import EngineView, Executor
from planner.simulate.kueue_replay import KueueReplayPolicy
from planner.simulate.planner_policy import PlannerPolicy
from planner.simulate.run import PLANNING_POLICIES, make_policy
from planner.simulate.slurm_replay import SlurmReplayPolicy
from tests.test_simulate import trace, two_teams

SIMULATE = Path(__file__).resolve().parent.parent / "planner" / "simulate"


def test_the_engine_is_an_engine_view():
    sim = Replay(two_teams(), trace([("A", "a", 0, 1, 2.0, 1.0)]), PlannerPolicy())
    assert isinstance(sim, EngineView)


@pytest.mark.parametrize("name", PLANNING_POLICIES)
def test_every_executor_has_the_hooks_the_replanner_calls(name):
    # the ideal executor (planner), Slurm's and Kueue's, as the CLI makes them
    assert isinstance(make_policy(name), Executor)


def test_the_view_names_everything_the_executors_read_of_the_engine():
    # every ``sim.X`` the policies (the replanner and the executors too) use is a member of
    # EngineView, so an executor typed against the view uses nothing it does not promise
    members = {n for n in dir(EngineView) if not n.startswith("_")}
    members |= set(EngineView.__annotations__)
    used = set()
    for module in ("policies.py", "planner_policy.py", "slurm_replay.py", "kueue_replay.py"):
        used |= set(re.findall(r"\bsim\.([a-z_]+)\b", (SIMULATE / module).read_text()))
    assert used and used <= members, sorted(used - members)


def test_the_replays_run_the_shipped_export_records_themselves():
    # "the replay runs what ships" by identity: the very record the exporters take
    assert make_policy("planner-slurm").export is slurm.SHIPPED
    assert make_policy("planner-kueue").export is kueue.SHIPPED
    assert SlurmReplayPolicy(export=slurm.BEFORE_RULE8).export is slurm.BEFORE_RULE8
    assert KueueReplayPolicy().export is kueue.SHIPPED
