"""Leadership's quarterly report: the plan and the usage as a workbook and as HTML.

Reports take a finished plan (``plan.json`` as a dict) and the scenario it was planned
from; they never call a solver.
"""
