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
