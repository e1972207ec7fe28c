"""Inputs: the schema, loading and validation of a scenario (folder of CSVs or one workbook)."""

from planner.inputs.scenario import Scenario, ScenarioConfig

__all__ = ["Scenario", "ScenarioConfig"]
