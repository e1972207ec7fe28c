"""``ingest_usage``: an accounting file → the scenario's ``usage.csv``, and a report.

The steps, each its own module: parse the file in the executor's names
(:mod:`~planner.ingest.sacct`, :mod:`~planner.ingest.kueue`); map the names back onto
projects and clusters through the exporters' naming (:mod:`~planner.ingest.names`);
clip to the quarter (:func:`place`); merge into the ledger
(:mod:`~planner.ingest.ledger`) under the ledger's lock; write atomically. Malformed
input raises :class:`~planner.errors.InputError` before anything is written, and so does
a row ``usage.csv`` would refuse (checked by the scenario's own rules,
:func:`planner.inputs.rows.row_problems`: GPUs beyond the cluster, an id with control
characters, a time out of range …), naming the file, the line and the field.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal

import pandas as pd

from planner.errors import InputError, InputProblem
from planner.ingest.kueue import parse_workloads
from planner.ingest.ledger import (
    COLUMNS,
    LEDGER_FILE,
    Merge,
    UsageRow,
    merge,
    read_ledger,
    render,
)
from planner.ingest.names import Names, names_for
from planner.ingest.records import (
    NO_TIME,
    OPPORTUNISTIC,
    OUTSIDE,
    REASONS,
    UNKNOWN_CLUSTER,
    UNKNOWN_PROJECT,
    ParsedSource,
    Skip,
    SourceJob,
)
from planner.ingest.sacct import parse_sacct
from planner.inputs import ScenarioConfig
from planner.inputs.load import load_scenario
from planner.inputs.rows import row_problems
from planner.inputs.schema import UNBUDGETED_FILE
from planner.locks import hold
from planner.plan.write import write_files
from planner.times import iso

Source = Literal["sacct", "kueue"]
SOURCES: tuple[str, ...] = ("sacct", "kueue")
#: Seconds an ingest waits for another one writing the same ``usage.csv`` (then exit 2).
LEDGER_WAIT = 600.0
#: Per source, the field of its file each ``usage.csv`` column comes from (for problems).
FIELDS: Mapping[str, Mapping[str, str]] = MappingProxyType({
    "sacct": MappingProxyType({"job_id": "JobIDRaw", "project": "Account",
                               "cluster": "Partition", "gpus": "AllocTRES", "start": "Start",
                               "end": "End"}),
    "kueue": MappingProxyType({"job_id": "metadata.name",
                               "project": "status.admission.clusterQueue",
                               "cluster": "status.admission.podSetAssignments",
                               "gpus": "spec.podSets", "start": "status.conditions",
                               "end": "status.conditions"}),
})
_SHOWN = 20  # ids listed in the report for added and updated
_SHOWN_SKIPPED = 50  # jobs named per reason skipped (all are in IngestReport.skipped)


def ledger_id(source: str, cluster: str, job: str) -> str:
    """The ``job_id`` in ``usage.csv``: ``slurm:<cluster>:<JobIDRaw>``, ``kueue:<ns>/<name>``.

    Slurm numbers jobs per Slurm cluster, so the planner cluster (the partition) keeps two
    Slurm installations apart; a Workload's namespace/name is unique in its Kubernetes.
    """
    return f"slurm:{cluster}:{job}" if source == "sacct" else f"kueue:{job}"


@dataclass(frozen=True)
class IngestReport:
    """What an ingest did, job by job.

    ``added``, ``updated``, ``unchanged``: ledger ``job_id`` s; ``skipped``: reason → the
    jobs not written for it (``<job> (row N, detail)``); ``clipped``: jobs written with only
    their part inside the quarter. ``written`` is False for a dry run or when the ledger
    did not change.
    """

    source: str
    file: str
    ledger: str
    now: pd.Timestamp
    added: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    skipped: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    clipped: tuple[str, ...] = ()
    written: bool = False
    dry_run: bool = False
    #: ledger ``job_id`` s of the jobs charged to no budget, merged into ``unbudgeted.csv``
    #: (:data:`~planner.inputs.schema.UNBUDGETED_FILE`; rule 8), and whether it changed
    unbudgeted: tuple[str, ...] = ()
    unbudgeted_written: bool = False

    @property
    def counts(self) -> dict[str, int]:
        """How many jobs were added, updated, unchanged and skipped (all reasons)."""
        return {"added": len(self.added), "updated": len(self.updated),
                "unchanged": len(self.unchanged),
                "skipped": sum(len(v) for v in self.skipped.values())}

    def lines(self) -> list[str]:
        """The report as the CLI prints it: counts, then ids, every skipped job named."""
        c = self.counts
        what = ("dry run: nothing written" if self.dry_run
                else "written" if self.written else "unchanged, not rewritten")
        out = [f"{self.file} ({self.source}, now {iso(self.now)}) -> {self.ledger}: "
               f"{c['added']} added, {c['updated']} updated, {c['unchanged']} unchanged, "
               f"{c['skipped']} skipped ({what})"]
        for name, ids in (("added", self.added), ("updated", self.updated)):
            if ids:
                out.append(f"  {name}: {_listed(ids, _SHOWN)}")
        if self.clipped:
            out.append(f"  clipped to the quarter ({len(self.clipped)}): "
                       f"{_listed(self.clipped, _SHOWN_SKIPPED)}")
        for reason, ids in self.skipped.items():
            out.append(f"  skipped, {reason} ({len(ids)}): {_listed(ids, _SHOWN_SKIPPED)}")
        if self.unbudgeted:
            what = ("dry run: nothing written" if self.dry_run else "written"
                    if self.unbudgeted_written else "unchanged, not rewritten")
            out.append(f"  charged to no budget, to {Path(self.ledger).parent / UNBUDGETED_FILE} "
                       f"({len(self.unbudgeted)}, {what}): "
                       f"{_listed(self.unbudgeted, _SHOWN_SKIPPED)}")
        return out


def _listed(ids: tuple[str, ...], most: int) -> str:
    more = f" … and {len(ids) - most} more" if len(ids) > most else ""
    return ", ".join(ids[:most]) + more


def place(jobs: tuple[SourceJob, ...], names: Names, config: ScenarioConfig,
          now: pd.Timestamp, source: str) -> tuple[list[UsageRow], list[Skip], list[str]]:
    """Map jobs onto projects and clusters and clip them to the quarter.

    Returns the rows, the jobs skipped (unknown names, outside the quarter, no time) and
    the ids of rows clipped to the quarter. A running job ends at ``now``.
    """
    rows: list[UsageRow] = []
    skipped: list[Skip] = []
    clipped: list[str] = []
    for job in jobs:
        project = names.owners.get(job.owner)
        cluster = names.places.get(job.place)
        if project is None:
            several = " names several projects" if job.owner in names.ambiguous_owners else ""
            skipped.append(Skip(UNKNOWN_PROJECT, job.job, job.row,
                                f"{names.owner_kind} {job.owner!r}{several}"))
            continue
        if cluster is None:
            several = " names several clusters" if job.place in names.ambiguous_places else ""
            skipped.append(Skip(UNKNOWN_CLUSTER, job.job, job.row,
                                f"{names.place_kind} {job.place!r}{several}"))
            continue
        job_id = ledger_id(source, cluster, job.job)
        # whole seconds, as written: a row never reads start = end
        begin = job.start.floor("s")
        end = (now if job.end is None else job.end).floor("s")
        if end <= begin:
            skipped.append(Skip(NO_TIME, job_id, job.row, f"start {iso(begin)}, end {iso(end)}"))
            continue
        start, stop = max(begin, config.quarter_start), min(end, config.quarter_end)
        if stop <= start:
            skipped.append(Skip(OUTSIDE, job_id, job.row, f"{iso(begin)} to {iso(end)}"))
            continue
        if (start, stop) != (begin, end):
            clipped.append(f"{job_id} ({iso(begin)} to {iso(end)})")
        rows.append(UsageRow(job_id, project, cluster, job.gpus, start, stop, job.end is None,
                             job.row))
    return rows, skipped, clipped


def _now(now: pd.Timestamp | None) -> pd.Timestamp:
    stamp = pd.Timestamp.now(tz="UTC") if now is None else pd.Timestamp(now)
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return stamp.floor("s")


def _scenario_folder(scenario_dir: Path) -> None:
    if scenario_dir.suffix.lower() == ".xlsx":
        raise InputError([InputProblem(
            str(scenario_dir), None, None,
            "a workbook scenario has no usage ledger to append to: ingest into a scenario "
            f"folder (its {LEDGER_FILE}), or paste the rows into the workbook's usage sheet")])
    if not scenario_dir.is_dir():
        raise InputError([InputProblem(str(scenario_dir), None, None,
                                       "no such scenario folder")])


def merge_into(ledger: Path, rows: list[UsageRow]) -> tuple[Merge, bool]:
    """Merge ``rows`` into the ``usage.csv`` at ``ledger``; whether it was rewritten.

    The read-modify-write holds the ledger's lock (:func:`planner.locks.hold`), queueing
    up to :data:`LEDGER_WAIT` seconds behind another ingest of the same ledger (two at once
    both land, one after the other: no row is lost), and the file is replaced in one
    rename (:func:`~planner.plan.write.write_files`): a reader sees the old or the new
    ledger, never half of one.
    """
    with hold(ledger, "an ingest into this usage.csv", wait=LEDGER_WAIT):
        result = merge(read_ledger(ledger), rows)
        if not result.changed:
            return result, False
        write_files(ledger.parent, {ledger.name: render(result.rows)},
                    remedy="fix the permissions of the scenario folder or free some space")
    return result, True


def ingest_usage(scenario_dir: Path, source: Source, path: Path,
                 now: pd.Timestamp | None = None, dry_run: bool = False) -> IngestReport:
    """Append the jobs of an accounting file to the scenario folder's ``usage.csv``.

    ``source``: ``"sacct"`` (:mod:`planner.ingest.sacct`) or ``"kueue"``
    (:mod:`planner.ingest.kueue`). ``now`` (default: the current UTC time, the only
    wall-clock input) ends the jobs still running. Idempotent (see
    :mod:`planner.ingest.ledger`). Raises :class:`~planner.errors.InputError` for a bad
    scenario, source or file, and then writes nothing; ``dry_run`` never writes.
    """
    scenario_dir, path = Path(scenario_dir), Path(path)
    if source not in SOURCES:
        raise InputError([InputProblem("source", None, None,
                                       f"{source!r}; choose from {', '.join(SOURCES)}")])
    _scenario_folder(scenario_dir)
    scenario = load_scenario(scenario_dir)
    stamp = _now(now)
    parsed: ParsedSource
    parsed, problems = parse_sacct(path) if source == "sacct" else parse_workloads(path)
    if problems:
        raise InputError(problems)
    rows, skipped, clipped = place(parsed.jobs, names_for(scenario, source), scenario.config,
                                   stamp, source)
    problems = row_problems(scenario, "usage", path.name,
                            [(r.row or 0, dict(zip(COLUMNS, r.cells(), strict=True)))
                             for r in rows], FIELDS[source])
    if problems:  # a row usage.csv would refuse is never written (every later run would stop)
        raise InputError(problems)
    # rule 8: what ran charged to no budget, beside usage.csv, checked as its rows are
    beside, unplaced, beside_clipped = place(parsed.unbudgeted, names_for(scenario, source),
                                             scenario.config, stamp, source)
    problems = row_problems(scenario, "usage", path.name,
                            [(r.row or 0, dict(zip(COLUMNS, r.cells(), strict=True)))
                             for r in beside], FIELDS[source])
    if problems:
        raise InputError(problems)
    ledger = scenario_dir / LEDGER_FILE
    if dry_run:
        result, written = merge(read_ledger(ledger), rows), False
    else:
        result, written = merge_into(ledger, rows)
    spare_written = False
    if beside and not dry_run:
        _, spare_written = merge_into(scenario_dir / UNBUDGETED_FILE, beside)
    # a job charged to no budget that cannot be placed (unknown project or cluster, no
    # time, outside the quarter) is not written to unbudgeted.csv either: reported under
    # that reason, not as written there
    gone = {s.row for s in unplaced}
    written_apart = [s for s in parsed.skipped if s.reason != OPPORTUNISTIC or s.row not in gone]
    by_reason: dict[str, list[str]] = {}
    for skip in sorted([*written_apart, *unplaced, *skipped, *result.skipped],
                       key=lambda s: (REASONS.index(s.reason), s.row or 0, s.job)):
        by_reason.setdefault(skip.reason, []).append(str(skip))
    return IngestReport(
        source=source, file=os.fspath(path), ledger=os.fspath(ledger), now=stamp,
        added=result.added, updated=result.updated, unchanged=result.unchanged,
        skipped=MappingProxyType({k: tuple(v) for k, v in by_reason.items()}),
        clipped=(*clipped, *beside_clipped), written=written, dry_run=dry_run,
        unbudgeted=tuple(r.job_id for r in beside), unbudgeted_written=spare_written)
