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
import json
import os
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from planner.errors import InputError, InputProblem
from planner.inputs.read import RawScenario, RawTable, read_scenario
from planner.inputs.scenario import Scenario, ScenarioConfig
from planner.inputs.schema import DTYPES, TABLES, TableSchema
from planner.inputs.validate import (
    Parsed,
    canonical,
    check_config,
    check_tables,
    collapse_usage,
    org_index,
)


def _cell_text(value: object) -> object:
    """A loaded cell as JSON: text, a number (exact ``repr``), an ISO time or a list."""
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, float):
        return repr(value)
    if hasattr(value, "item"):  # numpy scalars
        return _cell_text(value.item())
    return value


def _datetimes_text(column: pd.Series) -> list[str]:
    """A UTC datetime column as ``Timestamp.isoformat`` writes each cell, all at once.

    ``2026-11-02T06:00:00+00:00``; with its microseconds (six digits) when they are not 0.
    """
    naive = column.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy("datetime64[us]")
    codes, distinct = pd.factorize(naive)  # each distinct time is written once
    whole = distinct.astype("datetime64[s]") == distinct
    text = np.where(whole, np.datetime_as_string(distinct, unit="s"),
                    np.datetime_as_string(distinct, unit="us"))
    written = [t + "+00:00" for t in text.tolist()]
    return [written[c] for c in codes.tolist()]


def _rows_text(frame: pd.DataFrame) -> list[tuple[object, ...]]:
    """Every row's cells as :func:`_cell_text` gives them, converted a column at a time.

    Rows are tuples and lists of ids stay tuples: JSON writes both as arrays.
    """
    columns = []
    for name in frame.columns:
        kind = frame[name].dtype.kind
        if kind == "M":  # datetimes
            columns.append(_datetimes_text(frame[name]))
            continue
        values = frame[name].tolist()
        if kind == "f":
            columns.append(list(map(repr, values)))
        elif kind in "iub":
            columns.append(values)
        else:
            columns.append([v if type(v) in (str, tuple) else _cell_text(v) for v in values])
    return list(zip(*columns, strict=True)) if columns else []


_JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode
_TEXT = json.encoder.encode_basestring  # the C function ``_JSON`` writes a str with


def _column_json(column: pd.Series) -> list[str]:
    """Each cell of ``column`` as ``_JSON`` writes the value :func:`_rows_text` gives it.

    In bulk where the column's kind allows: datetimes and text through
    :func:`_datetimes_text` and ``_TEXT``, floats as their quoted ``repr``, integers as
    ``int``'s; any other cell (a tuple of ids, labels, a missing value, text in an
    ``object`` column) through ``_JSON``.
    """
    kind = column.dtype.kind
    if kind == "M":
        return list(map(_TEXT, _datetimes_text(column)))
    values = column.tolist()
    if kind == "f":
        return ['"' + text + '"' for text in map(repr, values)]  # repr: no quote, no escape
    if kind in "iu":
        return list(map(int.__repr__, values))
    if isinstance(column.dtype, pd.StringDtype) and not column.hasnans:  # every cell a str
        return list(map(_TEXT, values))
    return [_JSON(v if type(v) in (str, tuple) else _cell_text(v)) for v in values]


def _table_json(frame: pd.DataFrame) -> str:
    """``_JSON([tuple(frame.columns), *_rows_text(frame)])``, the same text, a column at a time."""
    head = _JSON(tuple(frame.columns))
    if len(frame) == 0 or len(frame.columns) == 0:
        return _JSON([tuple(frame.columns), *_rows_text(frame)])
    rows = map(",".join, zip(*(_column_json(frame[name]) for name in frame.columns),
                             strict=True))
    return "[" + head + ",[" + "],[".join(rows) + "]]"


def digest(config: ScenarioConfig, tables: Mapping[str, pd.DataFrame]) -> str:
    """sha256 over the scenario as loaded: its settings and its sorted, typed tables.

    What the inputs *say*, not how the files spell it: row order, the folder or workbook
    form, a BOM, ``8`` or ``8.0`` do not change it; any value that reaches the plan does.
    The text hashed is ``_JSON(body)`` of ``body = {"config": …, "gpu_rates": …,
    "tables": {name: [columns, *rows]}}`` (keys sorted); each table's part is written
    by :func:`_table_json`, a column at a time, into the same text.
    """
    head = {"config": {f.name: _cell_text(getattr(config, f.name)) for f in fields(config)
                       if f.name != "gpu_rates"},
            "gpu_rates": {k: repr(float(v)) for k, v in sorted(config.gpu_rates.items())}}
    parts = [_TEXT(name) + ":" + _table_json(frame) for name, frame in sorted(tables.items())]
    text = _JSON(head)[:-1] + ',"tables":{' + ",".join(parts) + "}}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _frame(schema: TableSchema, parsed: Parsed) -> pd.DataFrame:
    """A typed table: columns in schema order with the schema's dtypes, index 0..n-1."""
    columns = {}
    for f in schema.fields:
        values = parsed.values[f.name]
        if f.kind == "datetime" and values:  # each distinct time converted once
            index: dict[object, int] = {}
            codes = [index.setdefault(v, len(index)) for v in values]
            distinct = pd.Series(list(index), dtype=DTYPES[f.kind])
            columns[f.name] = distinct.take(codes).reset_index(drop=True)
        else:
            columns[f.name] = pd.Series(values, dtype=DTYPES[f.kind])
    return pd.DataFrame(columns, columns=list(schema.columns))


def build_tables(tables: Mapping[str, Parsed]) -> dict[str, pd.DataFrame]:
    """The Scenario's tables from checked ones.

    Usage is collapsed to one row per ``job_id``; every project without a budget row
    gets one with budget 0 and all clusters allowed. Every table is sorted by its
    schema's ``order`` (:func:`~planner.inputs.validate.canonical`): the rows' order in
    the files never reaches the model, so shuffled files give the same plan, byte for byte.
    """
    out = {}
    for name, schema in TABLES.items():
        parsed = tables[name]
        if name == "usage":
            parsed = collapse_usage(parsed)
        out[name] = _frame(schema, canonical(parsed))
    budgeted = set(out["budgets"]["project"])
    leaves = org_index(tables["org"]).leaves
    missing = [p for p in out["org"]["id"] if p in leaves and p not in budgeted]
    if missing:
        filler = pd.DataFrame({
            "project": pd.Series(missing, dtype=DTYPES["id"]),
            "gpu_hours": pd.Series([0.0] * len(missing), dtype=DTYPES["float"]),
            "clusters": pd.Series([()] * len(missing), dtype=DTYPES["list"]),
        })
        budgets = pd.concat([out["budgets"], filler], ignore_index=True)
        order = sorted(range(len(budgets)), key=lambda i: budgets["project"].iloc[i])
        out["budgets"] = budgets.iloc[order].reset_index(drop=True)
    return out


def _read_and_check(path: Path, targets: tuple[str, ...] = ()
                    ) -> tuple[Scenario | None, list[InputProblem]]:
    return _check(read_scenario(path), path, targets)


def _check(raw: RawScenario, path: Path, targets: tuple[str, ...]
           ) -> tuple[Scenario | None, list[InputProblem]]:
    problems = list(raw.problems)
    config = None
    if raw.config is not None:
        config, found = check_config(raw.config)
        problems += found
    checked = check_tables(raw.tables, targets)
    problems += checked.problems
    if problems or config is None:
        return None, InputError(problems).problems  # InputError's order: file, row, column
    tables = build_tables({name: t for name, t in checked.tables.items() if t is not None})
    return Scenario(config=config, **tables, source=str(path),
                    digest=digest(config, tables)), []


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


def load_scenario_and_files(path: str | os.PathLike[str], unbudgeted: bool = False
                            ) -> tuple[Scenario, dict[str, bytes]]:
    """:func:`load_scenario`, and the bytes of every file it parsed (name → bytes).

    One read of the folder: what a planning cycle keeps beside its plan is exactly what it
    planned from. ``unbudgeted``: also the folder's ``unbudgeted.csv`` if it has one,
    checked against the same read as :func:`load_unbudgeted` checks it (not a table of
    the plan, but what ``planner tick`` reads beside the plan in force for the executor
    contract's rule 8).
    """
    from planner.inputs.schema import UNBUDGETED_FILE

    scenario, raw, beside = _with_unbudgeted(path, unbudgeted)
    files = dict(raw.files)
    if beside[1] is not None:
        files[UNBUDGETED_FILE] = beside[1]
    return scenario, files


def load_scenario_and_unbudgeted(path: str | os.PathLike[str]
                                 ) -> tuple[Scenario, pd.DataFrame]:
    """:func:`load_scenario`, and :func:`load_unbudgeted` checked against the same read.

    One read of the folder for a caller that needs both (``planner explain``, the
    dashboard); a workbook or a folder without ``unbudgeted.csv`` gives an empty table.
    """
    scenario, _, beside = _with_unbudgeted(path, True)
    return scenario, beside[0]


def _with_unbudgeted(path: str | os.PathLike[str], unbudgeted: bool
                     ) -> tuple[Scenario, RawScenario, tuple[pd.DataFrame, bytes | None]]:
    """The scenario, its read, and (``unbudgeted``) the folder's ``unbudgeted.csv`` from it.

    The file as :func:`_load_beside` gives it (an empty table and None: not asked, or no
    such file).
    """
    from planner.inputs.schema import UNBUDGETED_FILE

    raw = read_scenario(Path(path))
    scenario, problems = _check(raw, Path(path), ())
    if scenario is None:
        raise InputError(problems)
    if unbudgeted and (Path(path) / UNBUDGETED_FILE).is_file():
        return scenario, raw, _load_beside(path, UNBUDGETED_FILE, "usage", raw.tables)
    return scenario, raw, (scenario.usage.iloc[:0], None)  # usage.csv's columns, no row


def load_declared(path: str | os.PathLike[str]) -> pd.DataFrame:
    """``declared_demand.csv`` of the scenario folder ``path``, checked as ``demand.csv`` is.

    The rows a project lead declares (:data:`~planner.inputs.schema.DECLARED_DEMAND_FILE`,
    the columns of ``demand.csv``): every rule of ``demand.csv`` applies, against the
    folder's other tables, and problems name the file. An absent file gives an empty
    ``demand`` table. Raises :class:`~planner.errors.InputError`.
    """
    from planner.inputs.schema import DECLARED_DEMAND_FILE

    return _load_beside(path, DECLARED_DEMAND_FILE, "demand")[0]


def load_unbudgeted(path: str | os.PathLike[str]) -> pd.DataFrame:
    """``unbudgeted.csv`` of the scenario folder ``path``, checked as ``usage.csv`` is.

    What ran charged to no budget (:data:`~planner.inputs.schema.UNBUDGETED_FILE`, the
    columns of ``usage.csv``: ``planner ingest sacct`` writes Slurm's ``gp-opportunistic``
    and ``gp-overdrawn`` jobs there), read beside the budgets for the executor contract's
    rule 8 (:func:`planner.contract.unbudgeted_ngh`), never by the planner. An absent file
    gives an empty ``usage`` table. Raises :class:`~planner.errors.InputError`.
    """
    from planner.inputs.schema import UNBUDGETED_FILE

    return _load_beside(path, UNBUDGETED_FILE, "usage")[0]


def unbudgeted_of(folder: str | os.PathLike[str], plan: dict[str, Any]) -> dict[str, float]:
    """Project -> NGH it ran charged to no budget by the plan's ``as_of`` (rule 8).

    From ``unbudgeted.csv`` of the scenario folder ``folder`` (:func:`load_unbudgeted`,
    :func:`planner.contract.unbudgeted_ngh`); nothing when ``folder`` is not a folder (a
    workbook) or holds no such file (an executor whose usage counts every run, Kueue's).
    Raises :class:`~planner.errors.InputError` for a file that breaks ``usage.csv``'s rules.
    """
    from planner.contract import unbudgeted_ngh
    from planner.inputs.schema import UNBUDGETED_FILE

    if not (Path(folder) / UNBUDGETED_FILE).is_file():
        return {}
    return unbudgeted_ngh(plan, load_unbudgeted(folder))


def _load_beside(path: str | os.PathLike[str], name: str, table: str,
                 tables: Mapping[str, RawTable | None] | None = None
                 ) -> tuple[pd.DataFrame, bytes | None]:
    """The file ``name`` of the scenario folder ``path``, in the columns of ``table``.

    Every rule of ``table`` applies, against the folder's other tables (``tables``: as
    already read by :func:`read_scenario`; default: read them); problems name the file.
    An absent file gives an empty table. Also the file's bytes (None: absent).
    """
    from planner.inputs.read import decode, read_input, split_csv

    folder = Path(path)
    file = folder / name
    schema = TABLES[table]
    tables = dict(read_scenario(folder).tables if tables is None else tables)
    data = None
    if not file.exists():
        tables[table] = RawTable(name, schema.columns, ())
    else:
        data, problem = read_input(file, name)
        if problem is not None:
            raise InputError([problem])
        text, problems = decode(name, data or b"")
        if text is None:
            raise InputError(problems)
        tables[table], more = split_csv(name, schema, text)
        if more or tables[table] is None:
            raise InputError(problems + more)
    checked = check_tables(tables)
    mine = [p for p in checked.problems if p.file == name]
    if mine:
        raise InputError(mine)
    parsed = checked.tables[table]
    assert parsed is not None
    if table == "usage":
        parsed = collapse_usage(parsed)
    return _frame(schema, canonical(parsed)), data
