"""Loading a scenario: files → checked → an immutable :class:`~planner.inputs.Scenario`.

:func:`load_scenario` is the only way the rest of the planner gets a scenario; it
raises :class:`~planner.errors.InputError` carrying *every* problem found.
:func:`validate_scenario` runs the same reading and checks and returns the problems
(``[]`` when the scenario is valid). Neither prints nor exits.

The pipeline: :func:`planner.inputs.read.read_scenario` (files → text cells) →
:mod:`planner.inputs.validate` (types and rules) → :func:`build_tables` (typed
DataFrames per :mod:`planner.inputs.schema`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from planner.errors import InputError, InputProblem
from planner.inputs.read import read_scenario
from planner.inputs.scenario import Scenario
from planner.inputs.schema import DTYPES, TABLES, TableSchema
from planner.inputs.validate import (
    Parsed,
    check_config,
    check_tables,
    collapse_usage,
    org_index,
)


def digest(files: Mapping[str, bytes]) -> str:
    """sha256 over the input files' names and bytes, in name order."""
    h = hashlib.sha256()
    for name in sorted(files):
        data = files[name]
        h.update(name.encode("utf-8") + b"\0" + len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()


def _frame(schema: TableSchema, parsed: Parsed) -> pd.DataFrame:
    """A typed table: columns in schema order with the schema's dtypes, index 0..n-1."""
    columns = {}
    for f in schema.fields:
        columns[f.name] = pd.Series(parsed.values[f.name], dtype=DTYPES[f.kind])
    return pd.DataFrame(columns, columns=list(schema.columns))


def build_tables(tables: Mapping[str, Parsed]) -> dict[str, pd.DataFrame]:
    """The Scenario's tables from checked ones.

    Usage is collapsed to one row per ``job_id``; every project without a budget row
    gets one with budget 0 and all clusters allowed (appended in org order).
    """
    out = {}
    for name, schema in TABLES.items():
        parsed = tables[name]
        if name == "usage":
            parsed = collapse_usage(parsed)
        out[name] = _frame(schema, parsed)
    budgeted = set(out["budgets"]["project"])
    leaves = org_index(tables["org"]).leaves
    missing = [p for p in out["org"]["id"] if p in leaves and p not in budgeted]
    if missing:
        filler = pd.DataFrame({
            "project": pd.Series(missing, dtype=DTYPES["id"]),
            "gpu_hours": pd.Series([0.0] * len(missing), dtype=DTYPES["float"]),
            "clusters": pd.Series([()] * len(missing), dtype=DTYPES["list"]),
        })
        out["budgets"] = pd.concat([out["budgets"], filler], ignore_index=True)
    return out


def _read_and_check(path: Path, targets: tuple[str, ...] = ()
                    ) -> tuple[Scenario | None, list[InputProblem]]:
    raw = read_scenario(path)
    problems = list(raw.problems)
    config = None
    if raw.config is not None:
        config, found = check_config(raw.config)
        problems += found
    checked = check_tables(raw.tables, targets)
    problems += checked.problems
    if problems or config is None:
        return None, InputError(problems).problems  # InputError's order: file, row, column
    tables = {name: t for name, t in checked.tables.items() if t is not None}
    return Scenario(config=config, **build_tables(tables), source=str(path),
                    digest=digest(raw.files)), []


def validate_scenario(path: str | os.PathLike[str],
                      targets: tuple[str, ...] = ()) -> list[InputProblem]:
    """Every problem of the scenario folder or workbook at ``path`` (``[]``: valid).

    ``targets``: executors the scenario is meant for (``slurm``, ...); ids they cannot carry
    are problems too (:mod:`planner.inputs.targets`).
    """
    return _read_and_check(Path(path), tuple(targets))[1]


def load_scenario(path: str | os.PathLike[str], targets: tuple[str, ...] = ()) -> Scenario:
    """The scenario at ``path`` (a folder or an ``.xlsx`` workbook).

    Raises :class:`~planner.errors.InputError` with every problem found (with ``targets``,
    also ids those executors cannot carry).
    """
    scenario, problems = _read_and_check(Path(path), tuple(targets))
    if scenario is None:
        raise InputError(problems)
    return scenario
