"""``planner sweep``'s library side: run the cells (on Ray or one by one), resume, tabulate.

Each finished cell is written at once, atomically, as ``DIR/cells/<cell-id>/result.json``
(and ``cell.json``, its axis values); a later run of the same or a changed spec reads
back every cell whose digest it finds there and runs only the others. When all cells
are in, ``DIR/sweep.csv`` (one row per cell, in the spec's order: the axes, then the
plan's or the replay's figures) and ``DIR/sweep.html`` are written, same inputs, same
bytes; the seconds each cell took go to ``DIR/timings.csv`` alone.

Ray: :func:`run_on_ray` starts a local Ray (``ray.init``, ``num_cpus`` as asked) or,
when ``RAY_ADDRESS`` is set, joins that cluster, and runs one task per cell
(:func:`planner.sweep.cells.run_cell`, one CPU each). Every task gets its
:class:`~planner.sweep.cells.CellInput` whole, so workers need the planner installed
but none of the driver's files.
"""

from __future__ import annotations

import csv
import io
import json
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planner.exporters.common import spreadsheet_text
from planner.inputs.bounded import load_json
from planner.inputs.read import probe_file, read_text_file
from planner.plan.write import write_files
from planner.sweep.cells import PLAN_METRICS, CellInput, run_cell
from planner.sweep.spec import SweepSpec

ENGINES = ("ray", "serial")
RESULT = "result.json"


@dataclass(frozen=True)
class CellOutcome:
    """A cell's result record, and how it was had (``seconds`` None: read back)."""

    item: CellInput
    record: dict[str, Any]
    seconds: float | None

    @property
    def reused(self) -> bool:
        """Whether the cell was finished before this run (not run again)."""
        return self.seconds is None


#: Called after each cell: (cells done, cells in all, the outcome).
Progress = Callable[[int, int, CellOutcome], None]


def _record_bytes(record: dict[str, Any]) -> bytes:
    return (json.dumps(record, indent=1, ensure_ascii=False, allow_nan=False)
            + "\n").encode()


def cell_folder(out: Path, item: CellInput) -> Path:
    """``DIR/cells/<cell-id>``."""
    return out / "cells" / item.cell_id


def finished_record(out: Path, item: CellInput) -> dict[str, Any] | None:
    """The cell's record from an earlier run, if complete and of these very inputs."""
    path = cell_folder(out, item) / RESULT
    if probe_file(path) is not None:  # missing, or no regular file (never opened): run it
        return None
    text, problems = read_text_file(path, path.name)
    record, problems = load_json(path.name, text) if text is not None else (None, problems)
    if problems:
        return None
    if not isinstance(record, dict) or record.get("digest") != item.digest:
        return None
    return record


def save_cell(out: Path, spec: SweepSpec, item: CellInput, record: dict[str, Any]) -> None:
    """Write the cell's ``result.json`` and ``cell.json`` (its axes), atomically."""
    axes = {axis: item.cell.axis_text(axis) for axis in spec.axes}
    write_files(cell_folder(out, item), {
        "cell.json": _record_bytes({"kind": item.kind, "axes": axes, "digest": item.digest}),
        RESULT: _record_bytes(record)})


def timed_run(item: CellInput) -> tuple[dict[str, Any], float]:
    """:func:`run_cell` and the seconds it took (the seconds stay out of the record)."""
    began = time.perf_counter()
    record = run_cell(item)
    return record, time.perf_counter() - began


def run_serial(todo: list[CellInput], done: Callable[[CellInput, dict, float], None]) -> None:
    """Run the cells one after another in this process."""
    for item in todo:
        record, seconds = timed_run(item)
        done(item, record, seconds)


def ray_init_kwargs(num_cpus: int | None) -> dict[str, Any]:
    """``ray.init``'s arguments: an existing cluster when ``RAY_ADDRESS`` is set, else local."""
    import logging

    quiet = {"logging_level": logging.WARNING, "log_to_driver": False}
    if os.environ.get("RAY_ADDRESS"):
        return quiet  # ray.init reads RAY_ADDRESS itself; CPUs are the cluster's
    return {**quiet, "num_cpus": num_cpus or os.cpu_count() or 1, "include_dashboard": False}


def run_on_ray(todo: list[CellInput], done: Callable[[CellInput, dict, float], None],
               num_cpus: int | None = None) -> None:
    """Run the cells as Ray tasks (one CPU each); ``done`` is called as each finishes.

    Joins a Ray already initialised in this process as it is; otherwise starts one
    (:func:`ray_init_kwargs`) and shuts it down at the end.
    """
    from planner.extras import require

    require("ray", "planner sweep", instead="or run the cells one by one (engine 'serial')")
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(**ray_init_kwargs(num_cpus))
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(timed_run)
        pending = {task.remote(item): item for item in todo}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                item = pending.pop(ref)
                record, seconds = ray.get(ref)
                done(item, record, seconds)
    finally:
        if started:
            ray.shutdown()


def run_sweep(spec: SweepSpec, inputs: list[CellInput], out: Path, engine: str = "ray",
              progress: Progress | None = None, num_cpus: int | None = None
              ) -> list[CellOutcome]:
    """Run every cell not finished under ``out`` yet, save each, and write the table.

    Returns the outcomes in the spec's order. Cells sharing a digest (the same inputs
    twice) are run once.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    outcomes: dict[str, CellOutcome] = {}
    total = len({item.digest for item in inputs})

    def finish(item: CellInput, record: dict, seconds: float | None) -> None:
        if seconds is not None:
            save_cell(out, spec, item, record)
        outcomes[item.digest] = CellOutcome(item, record, seconds)
        if progress:
            progress(len(outcomes), total, outcomes[item.digest])

    todo: dict[str, CellInput] = {}
    for item in inputs:
        if item.digest in outcomes or item.digest in todo:
            continue
        record = finished_record(out, item)
        if record is not None:
            finish(item, record, None)
        else:
            todo[item.digest] = item
    if todo:
        if engine == "ray":
            run_on_ray(list(todo.values()), finish, num_cpus)
        else:
            run_serial(list(todo.values()), finish)
    ordered = [CellOutcome(item, outcomes[item.digest].record, outcomes[item.digest].seconds)
               for item in inputs]
    write_files(out, sweep_files(spec, ordered))
    return ordered


def figure_columns(kind: str, records: Iterable[dict[str, Any]]) -> list[str]:
    """The figures' columns: the plan's fixed list, or a replay's scalar metrics in order."""
    if kind == "plan":
        return [*PLAN_METRICS, "error"]
    columns: dict[str, None] = {}
    for record in records:
        for key, value in record["figures"].items():
            if not isinstance(value, dict | list):
                columns.setdefault(key)
    return list(columns)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return format(value, ".10g")
    return str(value)


def table(spec: SweepSpec, outcomes: list[CellOutcome]) -> tuple[list[str], list[list[str]]]:
    """``sweep.csv``'s header and rows: cell id, the axes, the figures."""
    columns = figure_columns(spec.kind, (o.record for o in outcomes))
    header = ["cell", *spec.axes, *columns]
    rows = [[o.item.cell_id, *(o.item.cell.axis_text(a) for a in spec.axes),
             *(_text(o.record["figures"].get(c)) for c in columns)] for o in outcomes]
    return header, rows


def inert(text: str) -> str:
    """A text cell of ``sweep.csv`` as a spreadsheet should show it.

    A number as it is; any other text through
    :func:`~planner.exporters.common.spreadsheet_text` (a model file or trace named
    ``=HYPERLINK(…)`` stays text).
    """
    try:
        float(text)
    except ValueError:
        return spreadsheet_text(text)
    return text


def table_csv(spec: SweepSpec, outcomes: list[CellOutcome]) -> bytes:
    """``sweep.csv`` as bytes (no clock time: same results, same bytes).

    The cell id and the axes are text a user wrote (model files, traces, org ids of a
    budget shift): :func:`inert`. The figures are the planner's numbers and statuses.
    """
    header, rows = table(spec, outcomes)
    ids = 1 + len(spec.axes)
    rows = [[*(inert(t) for t in row[:ids]), *row[ids:]] for row in rows]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue().encode()


def timings_csv(outcomes: list[CellOutcome]) -> bytes:
    """``timings.csv``: seconds per cell run now, ``reused`` for cells read back."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["cell", "seconds"])
    for o in outcomes:
        writer.writerow([o.item.cell_id, "reused" if o.reused else f"{o.seconds:.2f}"])
    return buffer.getvalue().encode()


def sweep_files(spec: SweepSpec, outcomes: list[CellOutcome]) -> dict[str, bytes]:
    """``sweep.csv``, ``sweep.html`` and ``timings.csv``."""
    from planner.sweep.html import render_sweep_html

    return {"sweep.csv": table_csv(spec, outcomes),
            "sweep.html": render_sweep_html(spec, *table(spec, outcomes)).encode(),
            "timings.csv": timings_csv(outcomes)}
