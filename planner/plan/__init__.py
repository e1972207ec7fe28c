"""The plan: extracted from a solution, frozen, written as ``plan.json``."""
