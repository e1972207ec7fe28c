"""``ingest_demand``: the queue (``squeue`` or Workloads) → the scenario's ``demand.csv``.

The steps, each in its own module: parse the file in the executor's names
(:mod:`~planner.ingest.squeue`, :mod:`~planner.ingest.workloads`); map them onto projects
and clusters with the exporters' naming (:mod:`~planner.ingest.names`), into
:class:`~planner.demand.QueuedJob` records (:func:`squeue_jobs`, :func:`workload_jobs`);
build the rows with :func:`planner.demand.queue_demand` (the queue, the forecast from
``usage.csv``, the declared rows of ``declared_demand.csv``); write ``demand.csv``
atomically. Malformed input raises :class:`~planner.errors.InputError` before anything is
written.

``demand.csv`` becomes the queue's: it is rewritten whole at each ingest. A
``demand.csv`` the ingest did not write (a hand-written one: its bytes are not those the
last ingest recorded in :data:`SOURCE_FILE`) is refused, never overwritten: its rows
belong in ``declared_demand.csv``, where they are kept for the periods the queue says
nothing about.

Which jobs are *allocated* (ask demand): Slurm, a job under its project's budget QOS
(``gp-<account>``), or one ``planner tick`` moved to ``gp-opportunistic`` (``moved``);
Kueue, a Workload of class ``gpu-planner-budget`` or ``gpu-planner-budget-gang``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import pandas as pd

from planner.demand import (
    DemandGrid,
    QueuedJob,
    demand_csv,
    queue_demand,
    summarize,
)
from planner.errors import InputError, InputProblem
from planner.exporters.kueue import PRIORITY_CLASSES, cluster_selector, priority_class
from planner.exporters.slurm import qos_name
from planner.ingest.names import invert, kueue_cluster_queue, names_for
from planner.ingest.records import UNKNOWN_CLUSTER, UNKNOWN_PROJECT, Skip
from planner.ingest.squeue import RUNNING, SqueueJob, parse_squeue
from planner.ingest.workloads import QueuedWorkload, parse_queue, selector_cluster
from planner.inputs import Scenario
from planner.inputs.load import load_declared, load_scenario
from planner.inputs.schema import DECLARED_DEMAND_FILE as DECLARED_FILE
from planner.inputs.schema import TABLES
from planner.plan.write import write_files
from planner.times import iso

QUEUE_SOURCES = ("squeue", "kueue")
DEMAND_FILE = TABLES["demand"].filename
#: what the last ingest wrote demand.csv from (source, file, now, the bytes' SHA-256)
SOURCE_FILE = ".demand-source.json"
UNALLOCATED = "unallocated (asks nothing: opportunistic work)"
NOT_ALLOWED = "on a cluster its project may not use (budgets.csv)"
_BUDGET_CLASSES = frozenset(c for c in PRIORITY_CLASSES if c != priority_class(False))
_SHOWN = 50
_PROJECTS = 20  # projects listed with the GPUs they ask, most first


def squeue_jobs(rows: Iterable[SqueueJob], scenario: Scenario,
                moved: Mapping[str, str] | None = None) -> tuple[list[QueuedJob], list[Skip]]:
    """``squeue`` lines as the allocated jobs of the scenario's projects; the lines left out.

    Allocated: under the project's budget QOS, or moved by ``planner tick`` (``moved``:
    job id -> the budget QOS it came from); any other is unallocated and asks nothing.
    """
    names = names_for(scenario, "sacct")
    moved = moved or {}
    jobs, skipped = [], []
    for row in rows:
        project = names.owners.get(row.account)
        cluster = names.places.get(row.partition)
        job_id = f"slurm:{cluster or row.partition}:{row.job_id}"
        if project is None:
            skipped.append(Skip(UNKNOWN_PROJECT, job_id, row.row, f"account {row.account!r}"))
            continue
        if cluster is None:
            skipped.append(Skip(UNKNOWN_CLUSTER, job_id, row.row,
                                f"partition {row.partition!r}"))
            continue
        budget = qos_name(project)
        if row.qos != budget and moved.get(row.job_id) != budget:
            skipped.append(Skip(UNALLOCATED, job_id, row.row, f"QOS {row.qos}"))
            continue
        left = row.seconds_left
        jobs.append(QueuedJob(job_id, project, cluster, float(row.gpus),
                              None if left is None else left / 3600.0, True,
                              row.state == RUNNING))
    return jobs, skipped


def workload_jobs(rows: Iterable[QueuedWorkload], scenario: Scenario
                  ) -> tuple[list[QueuedJob], list[Skip]]:
    """Workloads as the allocated jobs of the scenario's projects; the ones left out.

    The project: the one whose LocalQueue (``spec.queueName``, in the project's namespace)
    the Workload was submitted to. The cluster: the flavor it was admitted on, or (pending)
    the one cluster its GPU pod sets' node selectors pick, or the project's only cluster.
    """
    names = names_for(scenario, "kueue")
    queues, _ = invert(kueue_cluster_queue, scenario.tree.leaves)
    labels = {c["cluster"]: cluster_selector(dict(c))
              for c in scenario.clusters.to_dict("records")}
    budgets = scenario.budgets
    only = {p: subset[0] for p, subset in zip(budgets["project"], budgets["clusters"],
                                              strict=True) if len(subset) == 1}
    jobs, skipped = [], []
    for row in rows:
        project = queues.get(row.queue_name)
        if project is None or kueue_cluster_queue(project) != row.namespace:
            skipped.append(Skip(UNKNOWN_PROJECT, row.job_id, row.row,
                                f"LocalQueue {row.namespace}/{row.queue_name}"))
            continue
        if row.priority_class not in _BUDGET_CLASSES:
            skipped.append(Skip(UNALLOCATED, f"kueue:{row.job_id}", row.row,
                                f"class {row.priority_class or '(none)'}"))
            continue
        if row.admitted:
            cluster = names.places.get(row.flavor) if row.flavor is not None else None
            detail = f"flavor {row.flavor!r}"
        else:
            cluster = selector_cluster(row.selectors, labels, only.get(project))
            detail = "its pods' node selectors pick no single cluster"
        if cluster is None:
            skipped.append(Skip(UNKNOWN_CLUSTER, row.job_id, row.row, detail))
            continue
        left = row.seconds_left
        jobs.append(QueuedJob(f"kueue:{row.job_id}", project, cluster, float(row.gpus),
                              None if left is None else left / 3600.0, True, row.admitted))
    return jobs, skipped


@dataclass(frozen=True)
class DemandReport:
    """What a demand ingest did."""

    source: str
    file: str
    target: str  # the demand.csv written (or that would be)
    now: pd.Timestamp
    rows: int
    allocated: int  # allocated jobs that ask demand
    asked: Mapping[str, float]  # project -> GPUs asked in the first period
    skipped: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    declared: int = 0  # declared rows read
    forecast: bool = True
    written: bool = False
    dry_run: bool = False

    def lines(self) -> list[str]:
        """The report as the CLI prints it."""
        what = ("dry run: nothing written" if self.dry_run
                else "written" if self.written else "unchanged, not rewritten")
        head = (f"{self.file} ({self.source}, now {iso(self.now)}) -> {self.target}: "
                f"{self.rows} demand rows from {self.allocated} allocated jobs"
                f"{', the arrival forecast' if self.forecast else ''}"
                f"{f', {self.declared} declared rows' if self.declared else ''} ({what})")
        out = [head]
        asked = sorted(self.asked.items(), key=lambda kv: (-kv[1], kv[0]))
        for project, gpus in asked[:_PROJECTS]:
            out.append(f"  {project}: {gpus:g} GPUs asked in the first period")
        if len(asked) > _PROJECTS:
            out.append(f"  … and {len(asked) - _PROJECTS} more projects (all in {self.target})")
        for reason, ids in self.skipped.items():
            more = f" … and {len(ids) - _SHOWN} more" if len(ids) > _SHOWN else ""
            out.append(f"  not counted, {reason} ({len(ids)}): {', '.join(ids[:_SHOWN])}{more}")
        return out


def _now(now: pd.Timestamp | None) -> pd.Timestamp:
    stamp = pd.Timestamp.now(tz="UTC") if now is None else pd.Timestamp(now)
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return stamp.floor("s")


def _source_record(folder: Path) -> dict:
    try:
        return json.loads((folder / SOURCE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def demand_is_ours(folder: Path) -> bool:
    """Whether ``folder``'s demand.csv is absent or exactly what the last ingest wrote."""
    path = folder / DEMAND_FILE
    if not path.is_file():
        return True
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return _source_record(folder).get("sha256") == digest


def demand_origin(folder: Path, now: pd.Timestamp) -> str | None:
    """A warning about where ``demand.csv`` came from and how old it is (None: absent)."""
    path = folder / DEMAND_FILE
    if not path.is_file():
        return None
    if demand_is_ours(folder):
        record = _source_record(folder)
        return (f"{path} was derived from the queue ({record.get('source')}, "
                f"{record.get('file')}) as of {record.get('now')}, not this cycle: give "
                "--squeue or --kueue to plan from the queue as it is now")
    changed = pd.Timestamp(os.stat(path).st_mtime, unit="s", tz="UTC").floor("s")
    age = now - changed
    days = age / pd.Timedelta(days=1)
    return (f"{path} is hand-written (last changed {iso(changed)}, {days:.1f} days before "
            f"{iso(now)}): the plan asks for what it says, not for what is queued; give "
            "--squeue or --kueue to plan from the queue")


def ingest_demand(scenario_dir: Path, source: str, path: Path, *,
                  now: pd.Timestamp | None = None, dry_run: bool = False,
                  moved: Mapping[str, str] | None = None, forecast: bool = True,
                  window_days: float | None = None) -> DemandReport:
    """Write the scenario folder's ``demand.csv`` from a queue file.

    ``source``: ``"squeue"`` (:data:`planner.ingest.squeue.COMMAND`'s output) or
    ``"kueue"`` (``kubectl get workloads -A -o json``). ``now`` (default: the current UTC
    time, the only wall-clock input) is when the queue was read: the rows start there.
    ``moved``: Slurm jobs ``planner tick`` moved to ``gp-opportunistic`` (job id -> their
    budget QOS). ``forecast``: add the arrival forecast from ``usage.csv``;
    ``window_days``: its window (default: the scenario's ``lookback_days``). Raises
    :class:`~planner.errors.InputError` for a bad scenario or file, or a hand-written
    ``demand.csv``; then nothing is written. ``dry_run`` never writes.
    """
    scenario_dir, path = Path(scenario_dir), Path(path)
    if source not in QUEUE_SOURCES:
        raise InputError([InputProblem("source", None, None,
                                       f"{source!r}; choose from {', '.join(QUEUE_SOURCES)}")])
    if not scenario_dir.is_dir():
        raise InputError([InputProblem(str(scenario_dir), None, None,
                                       "no such scenario folder (a workbook scenario takes "
                                       "its demand sheet by hand)")])
    scenario = load_scenario(scenario_dir)
    stamp = _now(now)
    if source == "squeue":
        rows, problems = parse_squeue(path)
        if problems:
            raise InputError(problems)
        jobs, skipped = squeue_jobs(rows, scenario, moved)
    else:
        queued, skipped, problems = parse_queue(path, stamp)
        if problems:
            raise InputError(problems)
        jobs, more = workload_jobs(queued, scenario)
        skipped += more
    if not demand_is_ours(scenario_dir):
        raise InputError([InputProblem(
            str(scenario_dir / DEMAND_FILE), None, None,
            "was written by hand, and the ingest rewrites it whole from the queue: rename it "
            f"{DECLARED_FILE} (its rows are kept for the periods the queue asks nothing "
            "for) or remove it, then ingest again")])
    declared = load_declared(scenario_dir)
    grid = DemandGrid.of(scenario, window_days)
    frame, left_out = queue_demand(jobs, grid, stamp,
                                   usage=scenario.usage if forecast else None,
                                   declared=declared)
    data = demand_csv(frame)
    target = scenario_dir / DEMAND_FILE
    written = False
    if not dry_run and not (target.is_file() and target.read_bytes() == data):
        record = {"source": source, "file": os.fspath(path), "now": iso(stamp),
                  "sha256": hashlib.sha256(data).hexdigest()}
        write_files(scenario_dir, {DEMAND_FILE: data,
                                   SOURCE_FILE: (json.dumps(record, indent=1) + "\n").encode()})
        written = True
    by_reason: dict[str, list[str]] = {}
    for skip in skipped:
        by_reason.setdefault(skip.reason, []).append(str(skip))
    for job in left_out:
        by_reason.setdefault(NOT_ALLOWED, []).append(f"{job.job_id} ({job.project} on "
                                                     f"{job.cluster})")
    counted = len(jobs) - len(left_out)
    return DemandReport(
        source=source, file=os.fspath(path), target=os.fspath(target), now=stamp,
        rows=len(frame), allocated=counted, asked=MappingProxyType(summarize(frame, stamp, grid)),
        skipped=MappingProxyType({k: tuple(v) for k, v in by_reason.items()}),
        declared=len(declared), forecast=forecast, written=written, dry_run=dry_run)
