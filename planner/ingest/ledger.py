"""The usage ledger: merging ingested jobs into a scenario's ``usage.csv``, idempotently.

A row is a job (``job_id`` counts once). Ingested ids carry their source as a prefix
(:data:`OWN_PREFIXES`: ``slurm:<cluster>:<JobIDRaw>``, ``kueue:<namespace>/<name>``), so
ids of two executors cannot collide, and rows that came from elsewhere are told apart.

Merging is a maximum per ``job_id`` under one order (:func:`rank`): a finished record
beats a running one, a later end beats an earlier one, and the row's text breaks ties.
So ingesting the same file twice changes nothing, a job seen running and later finished
is updated (not doubled), an older dump read after a newer one changes nothing, and any
permutation or repetition of a batch gives the same ledger. A finished row already in
the ledger is final: a different finished record of the same id is reported as a
conflict and the row kept. Two records of one job in one file that tell different
stories (:func:`one_record_per_job`) are reported, and neither is written.

Output order is stable: rows from elsewhere first, as they were (in their order, their
cells unchanged), then the ingested rows by start and id. Text: the header
:data:`COLUMNS`, times as ``planner.times.iso``, GPUs as short decimals, LF line ends.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from planner.errors import InputError
from planner.ingest.records import CONFLICT, STALE, TWO_RECORDS, Skip
from planner.inputs.read import MISSING, probe_file, read_input
from planner.inputs.schema import TABLES
from planner.inputs.validate import parse_datetime
from planner.times import iso

COLUMNS = TABLES["usage"].columns  # job_id, project, cluster, gpus, start, end, state
RUNNING = "running"
OWN_PREFIXES = ("slurm:", "kueue:")
LEDGER_FILE = TABLES["usage"].filename


def format_gpus(gpus: float) -> str:
    """``8`` for whole GPUs, else the shortest decimal to 1e-6 (``0.5``)."""
    value = round(float(gpus), 6)
    return str(int(value)) if value.is_integer() else repr(value)


@dataclass(frozen=True)
class UsageRow:
    """One ingested job, mapped onto the scenario: a row of ``usage.csv``."""

    job_id: str
    project: str
    cluster: str
    gpus: float
    start: pd.Timestamp
    end: pd.Timestamp
    running: bool
    row: int | None = None  # where the source file has it (for reports, not written)

    def cells(self) -> tuple[str, ...]:
        """The row's text, in :data:`COLUMNS` order."""
        return (self.job_id, self.project, self.cluster, format_gpus(self.gpus),
                iso(self.start), iso(self.end), RUNNING if self.running else "")


def rank(cells: Sequence[str]) -> tuple[bool, pd.Timestamp, tuple[str, ...]]:
    """The merge order of a row's cells: finished > running, then later end, then text."""
    record = dict(zip(COLUMNS, cells, strict=True))
    end = parse_datetime(record["end"])
    stamp = pd.Timestamp(end) if end is not None else pd.Timestamp.min.tz_localize("UTC")
    return record["state"].strip() != RUNNING, stamp, tuple(cells)


def read_ledger(path: Path) -> list[tuple[str, ...]]:
    """The rows of an existing ``usage.csv`` as cells in :data:`COLUMNS` order (``[]``: none).

    The scenario has been validated before, so the file is readable and has the
    required columns; a missing optional column (``state``) reads as empty.
    """
    if probe_file(path) == MISSING:
        return []
    data, problem = read_input(path, path.name)
    if problem is not None:
        raise InputError([problem])
    assert data is not None
    text = data.decode("utf-8-sig")
    records = [r for r in csv.reader(io.StringIO(text, newline="")) if "".join(r).strip()]
    if not records:
        return []
    header = [h.strip() for h in records[0]]
    where = {name: header.index(name) for name in COLUMNS if name in header}
    return [tuple(r[where[c]] if c in where and where[c] < len(r) else "" for c in COLUMNS)
            for r in records[1:]]


def render(rows: Iterable[Sequence[str]]) -> bytes:
    """``usage.csv`` bytes: the header and the rows."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(rows)
    return out.getvalue().encode("utf-8")


def is_own(job_id: str) -> bool:
    """Whether a row's id is one ``planner ingest`` writes."""
    return job_id.startswith(OWN_PREFIXES)


@dataclass(frozen=True)
class Merge:
    """The ledger after a merge and what happened to each incoming job."""

    rows: tuple[tuple[str, ...], ...]
    added: tuple[str, ...]
    updated: tuple[str, ...]
    unchanged: tuple[str, ...]
    skipped: tuple[Skip, ...]

    @property
    def changed(self) -> bool:
        """Whether any row was added or updated."""
        return bool(self.added or self.updated)


def one_record_per_job(incoming: Iterable[UsageRow]
                       ) -> tuple[dict[str, tuple[str, ...]], list[Skip]]:
    """Each job's record (the maximum under :func:`rank`), and the jobs whose records conflict.

    Records of one job may differ in their end and state (a job seen running, then
    finished); records that differ in anything else (project, cluster, GPUs, start), or
    two finished ones with different ends, are two stories of one job: which one ran
    cannot be told, so neither is written and the job is reported with its rows.
    """
    groups: dict[str, list[UsageRow]] = {}
    for row in incoming:
        groups.setdefault(row.job_id, []).append(row)
    best: dict[str, tuple[str, ...]] = {}
    skipped: list[Skip] = []
    for job_id, rows in groups.items():
        kinds = {r.cells()[1:5] for r in rows}  # project, cluster, gpus, start
        ends = {r.cells()[5] for r in rows if not r.running}
        if len(kinds) > 1 or len(ends) > 1:
            at = sorted({r.row for r in rows if r.row is not None})
            skipped.append(Skip(TWO_RECORDS, job_id, None,
                                "rows " + ", ".join(map(str, at)) if at else ""))
            continue
        best[job_id] = max((r.cells() for r in rows), key=rank)
    return best, skipped


def merge(existing: Sequence[tuple[str, ...]], incoming: Iterable[UsageRow]) -> Merge:
    """Merge ``incoming`` into the ledger rows ``existing`` (see the module docstring)."""
    best, skipped = one_record_per_job(incoming)
    ledger: dict[str, tuple[str, ...]] = {}
    for cells in existing:
        ledger.setdefault(cells[0], cells)  # the scenario's loader kept the first too
    added: list[str] = []
    updated: list[str] = []
    unchanged: list[str] = []
    for job_id in sorted(best):
        cells, held = best[job_id], ledger.get(job_id)
        if held is None:
            added.append(job_id)
        elif tuple(held) == cells:
            unchanged.append(job_id)
            continue
        elif held[COLUMNS.index("state")].strip() != RUNNING:
            why = STALE if cells[-1] == RUNNING else CONFLICT
            skipped.append(Skip(why, job_id, None, f"usage.csv has end {held[5]}"))
            continue
        elif rank(cells) > rank(held):
            updated.append(job_id)
        else:
            skipped.append(Skip(STALE, job_id, None, f"usage.csv has end {held[5]}"))
            continue
        ledger[job_id] = cells
    others = [c for c in existing if not is_own(c[0])]
    seen_others = {c[0] for c in others}
    own = sorted((c for j, c in ledger.items() if j not in seen_others),
                 key=lambda c: (c[4], c[0]))
    rows = []
    emitted: set[str] = set()
    for cells in others:  # rows from elsewhere: kept as they were, in their order
        if cells[0] not in emitted:
            rows.append(ledger[cells[0]])
            emitted.add(cells[0])
    rows += own
    return Merge(tuple(rows), tuple(added), tuple(updated), tuple(unchanged), tuple(skipped))
