"""The cell-by-cell loading steps as they stood before vectorisation, kept as test oracles.

tests/test_inputs_columns.py runs them and :mod:`planner.inputs` on the same random
tables and demands the same values, order, digests and problems, message for message.
Verbatim copies of ``planner/inputs/validate.py`` and ``planner/inputs/load.py`` at commit
421de68 (one ``parse_cell`` call per cell, a Python sort key per row), not used by the
planner.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd

from planner.errors import InputProblem
from planner.inputs.load import _cell_text
from planner.inputs.read import RawTable
from planner.inputs.schema import Bound, Ref, TableSchema
from planner.inputs.validate import (
    OrgIndex,
    Parsed,
    _suggest,
    check_columns,
    check_row_width,
    parse_cell,
)


def parse_table(schema: TableSchema, raw: RawTable) -> tuple[Parsed | None, list[InputProblem]]:
    """Type every cell (a wrong cell is a problem and ``None``); ``None`` if columns are wrong."""
    problems = check_columns(schema, raw)
    named = [h for h in raw.header if h in schema.columns]
    if len(named) != len(set(named)) or not set(schema.required_columns) <= set(named):
        return None, problems  # which cell is which is unclear: leave the table out
    problems += check_row_width(raw)
    position = {name: raw.header.index(name) for name in schema.columns if name in raw.header}
    parsed = Parsed(schema, raw.label, [row for row, _ in raw.rows], {})
    for f in schema.fields:
        column: list[object] = []
        where = position.get(f.name)
        for i, (row, cells) in enumerate(raw.rows):
            if where is None:  # an optional column left out
                column.append(f.default)
                continue
            value, error = parse_cell(f, cells[where] if where < len(cells) else "")
            if error is not None:
                problems.append(InputProblem(raw.label, row, f.name, error))
                parsed.bad.add(i)
            column.append(value)
        parsed.values[f.name] = column
    return parsed, problems


def check_bounds(table: Parsed) -> list[InputProblem]:
    """Numbers lie in their column's range (``> 0``, ``≥ 0``, and below its upper bound)."""
    problems = []
    for f in table.schema.fields:
        if f.kind not in ("int", "float") or (
                f.bound is Bound.ANY and f.minimum is None and f.maximum is None):
            continue
        for row, value in zip(table.rows, table.values[f.name], strict=True):
            if isinstance(value, (int, float)) and (error := f.range_problem(value)):
                problems.append(InputProblem(table.label, row, f.name, error))
    return problems


def check_references(table: Parsed, clusters: frozenset[str] | None,
                     org: OrgIndex | None, clusters_label: str) -> list[InputProblem]:
    """Ids name what they refer to: a cluster, an org node (parents), a project (a leaf)."""
    problems = []
    for f in table.schema.fields:
        if f.ref is Ref.NONE:
            continue
        for row, value in zip(table.rows, table.values[f.name], strict=True):
            if value is None or value == "" or value == ():
                continue
            if f.ref is Ref.CLUSTER and clusters is not None:
                names = value if isinstance(value, tuple) else (value,)
                problems += [InputProblem(
                    table.label, row, f.name,
                    f"unknown cluster {name!r}{_suggest(str(name), sorted(clusters))}; use a "
                    f"cluster of {clusters_label} or add it there")
                    for name in names if name not in clusters]
            elif f.ref is Ref.ORG_NODE and org is not None and value not in org.ids:
                problems.append(InputProblem(
                    table.label, row, f.name,
                    f"unknown parent {value!r}{_suggest(str(value), sorted(org.ids))}; use an "
                    "id of this file, or leave parent empty for a top-level node"))
            elif f.ref is Ref.PROJECT and org is not None:
                if value not in org.ids:
                    problems.append(InputProblem(
                        table.label, row, f.name,
                        f"unknown project {value!r}{_suggest(str(value), sorted(org.leaves))}; "
                        f"use a project of {org.label} or add it there"))
                elif value not in org.leaves:
                    problems.append(InputProblem(
                        table.label, row, f.name,
                        f"{value!r} is not a project but an inner node of {org.label} (it has "
                        "children); only leaves hold budgets, demand, reservations and usage: "
                        "use one of its projects"))
    return problems


def check_usage_repeats(usage: Parsed) -> list[InputProblem]:
    """A repeated ``job_id`` must repeat the same job; the later, different row is reported.

    Identical repeats are fine (a job counts once however often it is ingested) and are
    collapsed by :func:`collapse_usage`.
    """
    first: dict[object, tuple[int, dict[str, object]]] = {}
    problems = []
    for i, (row, record) in enumerate(usage.records()):
        job = record["job_id"]
        if job is None or i in usage.bad:
            continue
        if job not in first:
            first[job] = (row, record)
            continue
        first_row, first_record = first[job]
        differ = [c for c in record if record[c] != first_record[c]]
        if differ:
            problems.append(InputProblem(
                usage.label, row, "job_id",
                f"job_id {job!r} repeats row {first_row} with a different "
                f"{', '.join(differ)}; a job counts once: give this job its own job_id or "
                "delete the stale row"))
    return problems


def canonical(table: Parsed) -> Parsed:
    """The table sorted by its schema's ``order`` columns, then by every other column.

    The order of rows in a file never reaches the model: shuffled files plan the same.
    """
    keys = [*table.schema.order, *(c for c in table.values if c not in table.schema.order)]

    def key(i: int) -> tuple:
        return tuple(_sort_key(table.values[c][i]) for c in keys)

    positions = sorted(range(len(table.rows)), key=key)
    return Parsed(table.schema, table.label, [table.rows[i] for i in positions],
                  {c: [v[i] for i in positions] for c, v in table.values.items()})


def _sort_key(value: object) -> tuple:
    """A total order over cell values: strings by code point, numbers, dates, lists."""
    if isinstance(value, tuple):
        return (3, value)
    if isinstance(value, dt.datetime):
        return (2, value)
    if isinstance(value, (int, float)):
        return (1, value)
    return (0, str(value))


def _rows_text(frame: pd.DataFrame) -> list[list[object]]:
    """Every row's cells as :func:`_cell_text` gives them, converted a column at a time."""
    columns = []
    for name in frame.columns:
        values = frame[name].tolist()
        kind = frame[name].dtype.kind
        if kind == "M":  # datetimes: Timestamps
            columns.append([v.isoformat() for v in values])
        elif kind == "f":
            columns.append([repr(v) for v in values])
        elif kind in "iub":
            columns.append(values)
        else:
            columns.append([_cell_text(v) for v in values])
    return [list(row) for row in zip(*columns, strict=True)] if columns else []
