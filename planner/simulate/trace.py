"""The job-trace format, written down once, its validated reader and its writer.

A trace is a CSV of jobs to replay on a scenario: who submits what, where and when.
:data:`TRACE_SCHEMA` lists its columns (type, unit, default, rule, meaning);
:func:`read_trace` checks a file against it and against the scenario it is replayed
on, and :func:`trace_markdown` renders it for the docs (the trace-format reference).

Reading follows the scenario files (:mod:`planner.inputs`): cells are split with the
standard :mod:`csv` module and kept as exact text (ids ``007``, ``+1``, ``=SUM(A1)`` are
ids like any other), rows are numbered as a spreadsheet shows them (header = row 1;
a quoted newline does not shift the numbering; blank rows are skipped), numbers and
dates follow the same grammar as scenario cells, and *every* defect becomes an
:class:`~planner.errors.InputProblem` with the file name, row and column, collected
into one :class:`~planner.errors.InputError`. The checks are vectorised (pandas masks);
Python loops run only over the rows that have a problem.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from numpy.dtypes import StringDType

from planner.errors import InputError, InputProblem
from planner.inputs.read import MISSING, decode, probe_file, read_input
from planner.inputs.scenario import Scenario
from planner.inputs.validate import DATE_HINT, ISO_DATE
from planner.plan.write import write_files

TraceKind = Literal["id", "datetime", "int", "float", "bool"]

#: Text read as ``true`` / ``false`` in a bool column (compared ignoring case).
TRUE_TEXT = ("true", "1")
FALSE_TEXT = ("false", "0")


@dataclass(frozen=True)
class TraceColumn:
    """One column of a trace file: how it is read, its default and what it means.

    ``default`` is ``None`` for a required column; an optional column takes it when the
    column is absent or the cell is empty.
    """

    name: str
    kind: TraceKind
    dtype: str  # pandas dtype of the column in the frame :func:`read_trace` returns
    unit: str
    default: object
    rule: str
    meaning: str
    default_text: str = ""  # how the docs state a default that is not a constant

    @property
    def required(self) -> bool:
        """Whether the file must have the column."""
        return self.default is None


#: The trace format, in column order.
TRACE_SCHEMA: tuple[TraceColumn, ...] = (
    TraceColumn("job_id", "id", "str", "", None, "unique",
                "Job id, kept verbatim."),
    TraceColumn("project", "id", "str", "", None, "a project (leaf) of the scenario's org",
                "The project that submits the job and is charged for it."),
    TraceColumn("cluster", "id", "str", "", None,
                "a cluster of the scenario the project may use (budgets' `clusters`)",
                "Where the job runs."),
    TraceColumn("submit", "datetime", "datetime64[ns, UTC]", "UTC", None,
                "in [quarter_start, quarter_end)",
                "Submit time, ISO 8601 (`2026-10-01T06:00:00`, `Z` or `+02:00` allowed; "
                "naive = UTC)."),
    TraceColumn("gpus", "int", "int64", "GPUs", None,
                "whole, ≥ 1, ≤ the cluster's GPUs",
                "GPUs the job holds at once, all or none."),
    TraceColumn("duration_hours", "float", "float64", "h", None, "> 0",
                "Run time if never preempted."),
    TraceColumn("min_runtime_hours", "float", "float64", "h", 0.0,
                "≥ 0; the replay protects min(value, cap)",
                "Protected runtime asked (the replay protects at most the contract's "
                "`min_runtime_cap_hours`, 8 h by default): the job is allocated work, "
                "charged to its project's budget, not preempted before it has run this "
                "long. 0 = unallocated: preemptible by anyone, charged to no budget."),
    TraceColumn("resumable", "bool", "bool", "", True, "`true`/`false` (or `1`/`0`)",
                "Whether a preempted job resumes with its remaining work (else it restarts "
                "from the beginning)."),
    TraceColumn("time_limit_hours", "float", "float64", "h", math.nan,
                "≥ `duration_hours`",
                "The run time the job *requested* (Slurm's `--time`): what a backfilling "
                "scheduler (`fairtree`) plans with, never the true duration. The replay "
                "does not kill a job at its limit, so it may not be below the duration.",
                default_text="the duration rounded up to a power of two hours, at least "
                             "1 h (Philly records no limits: an assumption)"),
)

#: Column names of a trace, in the order of the frame :func:`read_trace` returns.
TRACE_COLUMNS: tuple[str, ...] = tuple(c.name for c in TRACE_SCHEMA)

_BY_NAME = {c.name: c for c in TRACE_SCHEMA}
_REQUIRED = tuple(c.name for c in TRACE_SCHEMA if c.required)


def trace_markdown() -> str:
    """The trace columns as a Markdown table (the docs' trace-format reference)."""
    lines = ["| column | type | unit | required / default | rule | meaning |",
             "|---|---|---|---|---|---|"]
    for c in TRACE_SCHEMA:
        if c.required:
            default = "required"
        elif c.default_text:
            default = c.default_text
        elif isinstance(c.default, bool):
            default = str(c.default).lower()
        else:
            default = f"{c.default:g}" if isinstance(c.default, float) else str(c.default)
        lines.append(f"| `{c.name}` | {c.kind} | {c.unit} | {default} | {c.rule} "
                     f"| {c.meaning} |")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- reading


class Problems:
    """Problems found so far in one file, added in bulk from a mask over its rows."""

    def __init__(self, label: str):
        self.label = label
        self.items: list[InputProblem] = []

    def add(self, row: int | None, column: str | None, message: str) -> None:
        """One problem at ``row`` and ``column`` (``None``: the whole row or file)."""
        self.items.append(InputProblem(self.label, row, column, message))

    def where(self, mask: pd.Series, rows: pd.Series, column: str | None,
              message: Callable[[int], str]) -> None:
        """One problem per row where ``mask`` holds; ``message(i)`` given the position."""
        for i in np.flatnonzero(mask.to_numpy(dtype=bool)):
            self.add(int(rows.iat[i]), column, message(int(i)))


def _split(text: str, problems: Problems, expected: str) -> list[list[str]] | None:
    """CSV records of ``text`` (header first), or ``None`` when it cannot be split."""
    records: list[list[str]] = []
    try:
        records.extend(csv.reader(io.StringIO(text, newline=""), strict=False))
    except csv.Error as err:
        problems.add(len(records) + 1, None,
                     f"cannot split the row into values ({err}); check its quotes")
        return None
    if not records or all(not "".join(r).strip() for r in records):
        problems.add(None, None, f"empty; the first row must be the header {expected}")
        return None
    if not "".join(records[0]).strip():
        problems.add(1, None, f"no header: row 1 is empty; put the header {expected} in row 1")
        return None
    return records


def check_header(table: TextTable, problems: Problems, columns: Mapping[str, str],
                 required: tuple[str, ...], unknown_allowed: bool = False) -> bool:
    """Report unknown, repeated, unnamed and missing columns; whether the file is readable.

    ``columns`` maps each known column to its meaning; ``unknown_allowed`` lets other
    columns pass unread (a foreign format's extras).
    """
    seen: set[str] = set()
    known = ", ".join(columns)
    readable = True
    for position, name in enumerate(table.header):
        if not name:
            if not table.empty[position].all():
                problems.add(1, None, f"column {position + 1} has values but no name; name it "
                                      f"({known}) or delete it")
        elif name in seen:
            problems.add(1, name, "column appears twice; delete one of them")
            readable = readable and name not in columns
        elif name not in columns and not unknown_allowed:
            problems.add(1, name, f"unknown column; the columns are {known}: rename or "
                                  "delete it")
        seen.add(name)
    for name in required:
        if name not in seen:
            problems.add(1, name, f"missing column; add a column {name} "
                                  f"({columns[name].rstrip('.')})")
            readable = False
    return readable


@dataclass(frozen=True)
class TextTable:
    """A CSV file as text: its header and, per column, its non-blank rows' cells.

    ``cells[j]`` holds column j's text (object array of ``str``, ``""`` where a row is
    short) and ``empty[j]`` marks the cells that are empty or white space; there are
    more columns than the header names when a row has extra values.
    """

    header: list[str]  # column names, stripped
    cells: list[np.ndarray]  # per column position: (n,) object array of str
    empty: list[np.ndarray]  # per column position: (n,) bool
    rows: pd.Series  # spreadsheet row number of each body row (header = row 1)

    def position(self, columns: Iterable[str]) -> dict[str, int]:
        """The position of each of ``columns`` in the header (absent ones left out)."""
        return {name: self.header.index(name) for name in columns if name in self.header}

    def check_width(self, problems: Problems) -> None:
        """Report rows with more non-empty values than the header has columns."""
        width = len(self.header)
        extra = np.zeros(len(self.rows), dtype=bool)
        for empty in self.empty[width:]:
            extra |= ~empty
        problems.where(pd.Series(extra), self.rows, None,
                       lambda _i: f"more values than the header's {width} columns; delete the "
                                  "extra values or quote a value that holds a comma")


def read_text_table(path: Path, problems: Problems, expected: str) -> TextTable | None:
    """The text of the CSV at ``path``, or ``None`` when it cannot be split (a problem says why).

    ``expected`` is the header to suggest when the file has none.
    """
    if probe_file(path) == MISSING:
        problems.add(None, None, f"no such file; pass a CSV file with the header {expected}")
        return None
    data, problem = read_input(path, path.name)
    if problem is not None:
        problems.add(None, None, problem.message)
        return None
    assert data is not None
    text, found = decode(path.name, data)
    problems.items += found
    if text is None:
        return None
    records = _split(text, problems, expected)
    if records is None:
        return None
    return _text_table(records)


def _blank(cells: np.ndarray) -> np.ndarray:
    """Which cells are empty or white space (numpy string ufuncs, no Python loop)."""
    text = cells.astype(StringDType())
    return (np.strings.str_len(text) == 0) | np.strings.isspace(text)


def _text_table(records: list[list[str]]) -> TextTable:
    """Header and non-blank body rows, column by column, with their row numbers."""
    header = [h.strip() for h in records[0]]
    lines = records[1:]
    lengths = np.fromiter(map(len, lines), dtype=np.int64, count=len(lines))
    width = int(max(len(header), lengths.max(initial=0)))
    if (lengths != width).any():  # short rows: empty cells; long rows: reported later
        lines = [r if len(r) == width else r + [""] * (width - len(r)) for r in lines]
    if lines:
        cells = [np.array(column, dtype=object) for column in zip(*lines, strict=True)]
    else:
        cells = [np.empty(0, dtype=object) for _ in range(width)]
    empty = [_blank(column) for column in cells]
    keep = ~np.logical_and.reduce(empty) if lines else np.zeros(0, dtype=bool)
    rows = np.arange(2, len(lines) + 2, dtype=np.int64)
    if not keep.all():
        cells = [column[keep] for column in cells]
        empty = [column[keep] for column in empty]
    return TextTable(header, cells, empty, pd.Series(rows[keep]))


def parse_columns(schema: tuple[TraceColumn, ...], table: TextTable,
                  problems: Problems) -> dict[str, pd.Series]:
    """Typed columns of ``schema`` (``NaN``/``NaT``/``None`` where a cell is wrong).

    A cell that cannot be read as its column's kind, or a required cell left empty, is
    a problem; an optional column absent or an optional cell empty takes the default.
    Numbers are read by :func:`pandas.to_numeric` (decimal text, exactly as Python's
    ``float``; ``nan``, ``inf`` and ``1_000`` are not numbers), dates by the scenario
    files' ISO 8601 grammar.
    """
    rows = table.rows
    position = table.position(c.name for c in schema)
    n = len(rows)
    out: dict[str, pd.Series] = {}
    for c in schema:
        if c.name not in position:  # an optional column left out: its default
            out[c.name] = pd.Series([c.default] * n, dtype=c.dtype)
            continue
        text, empty = table.cells[position[c.name]], table.empty[position[c.name]]
        if c.required:
            problems.where(pd.Series(empty), rows, c.name,
                           lambda _i, c=c: f"{c.name} is empty; every row needs one")
        if c.kind == "id":
            out[c.name] = pd.Series(np.where(empty, None, text), dtype="str")
        elif c.kind == "datetime":
            stripped = pd.Series(text, dtype="str").str.strip()
            shaped = stripped.str.fullmatch(ISO_DATE.pattern)
            stamps = pd.to_datetime(stripped.where(shaped), utc=True, format="ISO8601",
                                    errors="coerce").astype("datetime64[ns, UTC]")
            bad = stamps.isna().to_numpy() & ~empty
            problems.where(pd.Series(bad), rows, c.name,
                           lambda i, text=text: f"{text[i]!r} is not an ISO 8601 date; "
                                                f"{DATE_HINT}")
            out[c.name] = stamps
        elif c.kind == "bool":
            lowered = np.strings.lower(np.strings.strip(text.astype(StringDType())))
            true = np.isin(lowered, np.array(TRUE_TEXT, dtype=StringDType()))
            false = np.isin(lowered, np.array(FALSE_TEXT, dtype=StringDType()))
            bad = ~(true | false) & ~empty
            problems.where(pd.Series(bad), rows, c.name,
                           lambda i, text=text: f"{text[i]!r} is not true or false; "
                                                "write true or false")
            values = pd.Series(np.where(empty, bool(c.default), true), dtype=object)
            values[bad] = None
            out[c.name] = values
        else:
            values = np.asarray(pd.to_numeric(text, errors="coerce"), dtype=np.float64)
            bad = ~np.isfinite(values) & ~empty
            problems.where(pd.Series(bad), rows, c.name,
                           lambda i, text=text: f"{text[i]!r} is not a number; write a "
                                                "decimal number such as 12 or 0.5")
            if c.kind == "int":
                with np.errstate(invalid="ignore"):
                    fraction = ~bad & ~empty & ((values % 1 != 0) | (np.abs(values) >= 2**63))
                problems.where(pd.Series(fraction), rows, c.name,
                               lambda i, text=text: f"{text[i]!r} is not a whole number; "
                                                    "write a whole number such as 4")
                bad = bad | fraction
            if not c.required:
                values[empty] = float(c.default)  # type: ignore[arg-type]
            values[bad] = np.nan
            out[c.name] = pd.Series(values)
    return out


def _iso(stamp: pd.Timestamp) -> str:
    return stamp.tz_convert("UTC").isoformat().replace("+00:00", "Z")


def _check_values(values: dict[str, pd.Series], rows: pd.Series, scenario: Scenario,
                  problems: Problems) -> None:
    """The rules between a row's values and the scenario (bounds, references, quarter)."""
    gpus, duration = values["gpus"], values["duration_hours"]
    problems.where(gpus < 1, rows, "gpus",
                   lambda i: f"must be ≥ 1, got {gpus.iat[i]:g}; a job needs at least one GPU")
    problems.where(duration <= 0, rows, "duration_hours",
                   lambda i: f"must be > 0, got {duration.iat[i]:g}; give the job's run time "
                             "in hours")
    limit = values["time_limit_hours"]
    problems.where(limit < duration, rows, "time_limit_hours",
                   lambda i: f"{limit.iat[i]:g} h is below the job's duration_hours "
                             f"{duration.iat[i]:g}; the requested time limit must cover the "
                             "run time (leave it empty for the default)")
    runtime = values["min_runtime_hours"]
    problems.where(runtime < 0, rows, "min_runtime_hours",
                   lambda i: f"must be ≥ 0, got {runtime.iat[i]:g}; write 0 for unallocated "
                             "work")
    job = values["job_id"]
    first_row = pd.Series(rows.to_numpy(), index=job).groupby(level=0, sort=False).first()
    repeated = job.duplicated(keep="first") & job.notna()
    problems.where(repeated, rows, "job_id",
                   lambda i: f"duplicate job_id {job.iat[i]!r} (first in row "
                             f"{first_row[job.iat[i]]}); each job_id must be unique: rename "
                             "or delete the row")
    ids, leaves = set(scenario.tree.ids), set(scenario.tree.leaves)
    project = values["project"]
    unknown = project.notna() & ~project.isin(ids)
    problems.where(unknown, rows, "project",
                   lambda i: f"unknown project {project.iat[i]!r}; use a project of the "
                             "scenario's org.csv")
    inner = project.notna() & project.isin(ids) & ~project.isin(leaves)
    problems.where(inner, rows, "project",
                   lambda i: f"{project.iat[i]!r} is not a project but an inner node of the "
                             "scenario's org.csv (it has children); use one of its projects")
    cluster = values["cluster"]
    arrays = scenario.arrays
    total = pd.Series(arrays.gpus, index=list(arrays.clusters)).astype("float64")
    unknown_cluster = cluster.notna() & ~cluster.isin(set(total.index))
    problems.where(unknown_cluster, rows, "cluster",
                   lambda i: f"unknown cluster {cluster.iat[i]!r}; use a cluster of the "
                             f"scenario's clusters.csv ({', '.join(total.index)})")
    restricted = scenario.budgets[scenario.budgets["clusters"].map(len) > 0]
    allowed = {p: set(c) for p, c in zip(restricted["project"], restricted["clusters"],
                                         strict=True)}
    if allowed:
        pairs = restricted[["project", "clusters"]].explode("clusters")
        allowed_index = pd.MultiIndex.from_arrays([pairs["project"].astype("str"),
                                                   pairs["clusters"].astype("str")])
        asked = pd.MultiIndex.from_arrays([project.fillna(""), cluster.fillna("")])
        barred = (project.isin(set(allowed)) & cluster.isin(set(total.index))
                  & ~pd.Series(asked.isin(allowed_index), index=project.index))
        problems.where(barred, rows, "cluster",
                       lambda i: f"project {project.iat[i]!r} may not use cluster "
                                 f"{cluster.iat[i]!r} (budgets.csv allows "
                                 f"{', '.join(sorted(allowed[project.iat[i]]))}); use an "
                                 "allowed cluster")
    too_big = gpus > cluster.map(total).astype("float64")
    problems.where(too_big, rows, "gpus",
                   lambda i: f"{gpus.iat[i]:g} GPUs but cluster {cluster.iat[i]!r} has "
                             f"{total[cluster.iat[i]]:g}; the job can never run there")
    start, end = scenario.config.quarter_start, scenario.config.quarter_end
    submit = values["submit"]
    outside = submit.notna() & ((submit < start) | (submit >= end))
    problems.where(outside, rows, "submit",
                   lambda i: f"{_iso(submit.iat[i])} is outside the scenario's quarter "
                             f"[{_iso(start)}, {_iso(end)}); submit inside it")


def _frame(values: dict[str, pd.Series]) -> pd.DataFrame:
    """The trace as returned: schema dtypes, sorted; protected runtimes as written.

    The contract's cap on them (``min_runtime_cap_hours``) is the replay's to apply
    (:class:`~planner.simulate.engine.Replay`'s ``cap_hours``), not the file's.
    """
    columns = {c.name: values[c.name].astype(c.dtype) for c in TRACE_SCHEMA}
    columns["time_limit_hours"] = time_limits(pd.DataFrame(columns))
    frame = pd.DataFrame(columns, columns=list(TRACE_COLUMNS))
    frame = frame.sort_values(["submit", "job_id"], kind="mergesort")
    return frame.reset_index(drop=True)


def trace_problems(path: str | os.PathLike[str], scenario: Scenario
                   ) -> tuple[pd.DataFrame | None, list[InputProblem]]:
    """The trace at ``path`` read against ``scenario``, or ``None`` and every problem."""
    path = Path(path)
    problems = Problems(path.name)
    table = read_text_table(path, problems, ",".join(TRACE_COLUMNS))
    if table is None or not check_header(table, problems,
                                         {c.name: c.meaning for c in TRACE_SCHEMA},
                                         _REQUIRED):
        return None, problems.items
    table.check_width(problems)
    values = parse_columns(TRACE_SCHEMA, table, problems)
    _check_values(values, table.rows, scenario, problems)
    if problems.items:
        return None, problems.items
    return _frame(values), []


def read_trace(path: Path, scenario: Scenario) -> pd.DataFrame:
    """The jobs of the trace at ``path``, checked against ``scenario``.

    Columns :data:`TRACE_COLUMNS`: ``job_id:str, project:str, cluster:str,
    submit:datetime64[ns, UTC], gpus:int64, duration_hours:float64,
    min_runtime_hours:float64`` (as written: the replay caps it), ``resumable:bool``,
    ``time_limit_hours:float64`` (the default filled in where absent); sorted by
    ``(submit, job_id)``, index ``0..n-1``. Raises :class:`~planner.errors.InputError`
    with every problem (file name, row, column) when the trace is not valid.
    """
    frame, problems = trace_problems(path, scenario)
    if frame is None:
        raise InputError(problems)
    return frame


def default_time_limit(duration_hours: np.ndarray | pd.Series) -> np.ndarray:
    """The requested time limit assumed for a job that states none, hours.

    The duration rounded up to a power of two hours, at least 1 h: 0.3 h → 1, 3 h → 4,
    16 h → 16, 17 h → 32. Users ask for round, generous limits (Slurm sites see
    requests at 1, 2, 4, 8, 24, 48 h and more, mostly well above the run time); a power
    of two is a simple stand-in that overestimates by a factor between 1 and 2.
    """
    hours = np.maximum(np.asarray(duration_hours, dtype=np.float64), 1.0)
    return np.exp2(np.ceil(np.log2(hours)))


def time_limits(trace: pd.DataFrame) -> pd.Series:
    """Each job's requested time limit: ``time_limit_hours`` where given, else the default.

    A frame without the column (built in code) takes :func:`default_time_limit` for
    every job.
    """
    default = pd.Series(default_time_limit(trace["duration_hours"]), index=trace.index)
    if "time_limit_hours" not in trace.columns:
        return default
    return trace["time_limit_hours"].astype("float64").fillna(default)


def offered_gpu_hours(trace: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp) -> float:
    """GPU-hours the trace's jobs would run inside ``[start, end)`` if each ran at submit.

    ``Σ gpus × |[submit, submit + duration) ∩ [start, end)|``: the offered load, which
    divided by the window's hours is the mean number of GPUs wanted.
    """
    begin = trace["submit"].clip(lower=start)
    finish = (trace["submit"] + pd.to_timedelta(trace["duration_hours"], unit="h")).clip(
        upper=end)
    hours = ((finish - begin).dt.total_seconds() / 3600.0).clip(lower=0.0)
    return float((trace["gpus"] * hours).sum())


# --------------------------------------------------------------------------- writing


def _submit_text(submit: pd.Series) -> pd.Series:
    """UTC ISO 8601 with ``Z``; microseconds only where a time has them."""
    utc = submit.dt.tz_convert("UTC")
    whole = utc.dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    fine = utc.dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return whole.where(utc.dt.microsecond == 0, fine).where(utc.dt.nanosecond == 0, fine)


def _float_text(values: pd.Series) -> list[str]:
    """Python's shortest text that reads back as the same float."""
    return [repr(v) for v in values.to_numpy(dtype=np.float64).tolist()]


def trace_text(frame: pd.DataFrame) -> str:
    """The CSV text of a trace frame: :data:`TRACE_COLUMNS` in order, newline line ends.

    A frame without ``time_limit_hours`` (or with gaps in it) is written with each
    job's default limit (:func:`time_limits`), so the file states every assumption.
    Numbers are written in Python's shortest round-trip form, times as UTC with ``Z``,
    bools as ``true``/``false``; the rows in the frame's order.
    """
    missing = [c for c in TRACE_COLUMNS if c not in frame.columns and c != "time_limit_hours"]
    if missing:
        raise ValueError(f"not a trace frame: missing column(s) {', '.join(missing)}")
    out = pd.DataFrame({
        "job_id": frame["job_id"].astype("str"),
        "project": frame["project"].astype("str"),
        "cluster": frame["cluster"].astype("str"),
        "submit": _submit_text(frame["submit"]),
        "gpus": frame["gpus"].astype("int64"),
        "duration_hours": _float_text(frame["duration_hours"]),
        "min_runtime_hours": _float_text(frame["min_runtime_hours"]),
        "resumable": np.where(frame["resumable"].astype(bool), "true", "false"),
        "time_limit_hours": _float_text(time_limits(frame)),
    }, columns=list(TRACE_COLUMNS))
    return out.to_csv(index=False, lineterminator="\n")


def write_trace(frame: pd.DataFrame, path: Path) -> Path:
    """Write ``frame`` as a trace CSV at ``path`` atomically (complete or absent).

    Same frame, same bytes (see :func:`trace_text`); the folder is created if needed.
    Returns ``path``.
    """
    path = Path(path)
    data = trace_text(frame).encode("utf-8")
    return write_files(path.parent, {path.name: data})[0]
