"""Inputs: the schema, loading and validation of a scenario (folder of CSVs or one workbook)."""

from planner.inputs.load import load_scenario, validate_scenario
from planner.inputs.scenario import Scenario, ScenarioConfig
from planner.inputs.schema import schema_markdown

__all__ = ["Scenario", "ScenarioConfig", "load_scenario", "schema_markdown", "validate_scenario"]
