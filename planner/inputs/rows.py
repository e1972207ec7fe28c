"""Rows about to be written into a scenario's table, checked by the scenario's own rules.

Whatever writes rows into an input file (``planner ingest`` into ``usage.csv``, and any
later ingest path) checks them here first, with the very functions that validate the file
when it is read (:mod:`planner.inputs.validate`): the cells' types, bounds and lengths,
control characters, intervals, references to the scenario's clusters and projects, the
clusters a project may use, and what ran within its cluster's GPUs. A row refused here
would make every later run refuse the file, until someone edited it by hand: so it is
reported instead (naming the source file, its line and the field), and never written.

::

    row_problems(scenario, "usage", "sacct.txt", [(12, {"job_id": ..., "gpus": "8", ...})],
                 fields={"gpus": "AllocTRES"})  -> [InputProblem, ...]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from planner.errors import InputProblem
from planner.inputs.read import RawTable
from planner.inputs.scenario import Scenario
from planner.inputs.schema import TABLES
from planner.inputs.validate import (
    OrgIndex,
    check_allowed_clusters,
    check_bounds,
    check_capacity,
    check_intervals,
    check_references,
    parse_table,
)


def scenario_sizes(scenario: Scenario) -> dict[str, tuple[int, int]]:
    """Each cluster's (nodes, GPUs a node) in a loaded scenario."""
    c = scenario.clusters
    return {str(k): (int(n), int(g)) for k, n, g in zip(c["cluster"], c["nodes"],
                                                        c["gpus_per_node"], strict=True)}


def row_problems(scenario: Scenario, table: str, label: str,
                 rows: Sequence[tuple[int, Mapping[str, str]]],
                 fields: Mapping[str, str] | None = None) -> list[InputProblem]:
    """Every problem the scenario's validation finds in ``rows`` of ``table``.

    ``rows``: (row of the source file, the row's cells as text by column); ``label``: the
    source file as problems name it; ``fields``: a column → the source's name for it
    (``{"gpus": "AllocTRES"}``), so a problem names the field of the file the user has.
    Rows are checked on their own and against the scenario (its clusters, projects and
    budgets' allowed clusters), not against the rows already in the table.
    """
    schema = TABLES[table]
    raw = RawTable(label, schema.columns,
                   tuple((row, tuple(cells.get(c, "") for c in schema.columns))
                         for row, cells in rows))
    parsed, problems = parse_table(schema, raw)
    assert parsed is not None  # the header is the schema's own
    problems += check_bounds(parsed) + check_intervals(parsed)
    clusters = frozenset(str(c) for c in scenario.clusters["cluster"])
    org = scenario.org
    index = OrgIndex("org.csv", frozenset(map(str, org["id"])),
                     frozenset(map(str, scenario.tree.leaves)))
    problems += check_references(parsed, clusters, index, "clusters.csv")
    problems += check_capacity(parsed, scenario_sizes(scenario), "clusters.csv")
    allowed = {str(p): tuple(c) for p, c in zip(scenario.budgets["project"],
                                                scenario.budgets["clusters"], strict=True)}
    problems += check_allowed_clusters(parsed, allowed, clusters, "budgets.csv")
    names = fields or {}
    return [InputProblem(p.file, p.row, names.get(p.column, p.column) if p.column else None,
                         p.message) for p in problems]
