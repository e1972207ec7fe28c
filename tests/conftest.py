from __future__ import annotations

import pytest

from planner.config import load_model
from planner.inputs.load import load_scenario
from planner.run import SAMPLE, plan_scenario


@pytest.fixture(scope="session")
def sample_plan():
    """The bundled sample's plan body and org (planned once per session)."""
    scenario = load_scenario(SAMPLE)
    run = plan_scenario(scenario, load_model("default"))
    return run.plan.body, scenario.org


@pytest.fixture
def no_hang():
    """Fail, rather than hang, a test whose code opens a FIFO (open() blocks)."""
    import signal

    def hung(_signum, _frame):
        raise TimeoutError("blocked: a FIFO was opened")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(30)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)
