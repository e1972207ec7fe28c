"""What an accounting source says ran, in the executor's own names, before any mapping.

The parsers (:mod:`planner.ingest.sacct`, :mod:`planner.ingest.kueue`) turn a file into
:class:`SourceJob` records and :class:`Skip` notes; they know nothing of the scenario.
:mod:`planner.ingest.names` maps the executor's names back onto projects and clusters and
:mod:`planner.ingest.ledger` merges the result into ``usage.csv``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from planner.inputs.schema import printable

# Reasons a job is reported and not written (keys of IngestReport.skipped), in report order.
PENDING = "never started (pending)"
NOT_ADMITTED = "not admitted"
STEP = "a job step, not an allocation (run sacct with --allocations)"
NO_GPU = "no GPU"
OPPORTUNISTIC = ("charged to no budget (QOS gp-opportunistic or gp-overdrawn; written to "
                 "unbudgeted.csv)")
SEVERAL_FLAVORS = "pod sets on several GPU flavors"
UNKNOWN_PROJECT = "unknown project"
UNKNOWN_CLUSTER = "unknown cluster"
NO_TIME = "ran no time"
OUTSIDE = "outside the quarter"
STALE = "older than its row in usage.csv"
CONFLICT = "differs from its finished row in usage.csv"
TWO_RECORDS = "two different records in the file (which one ran cannot be told)"
REASONS = (PENDING, NOT_ADMITTED, STEP, NO_GPU, OPPORTUNISTIC, SEVERAL_FLAVORS, UNKNOWN_PROJECT,
           UNKNOWN_CLUSTER, NO_TIME, OUTSIDE, TWO_RECORDS, STALE, CONFLICT)


@dataclass(frozen=True)
class SourceJob:
    """One job as the executor's accounting reports it.

    ``owner`` is the Slurm account or the Kueue ClusterQueue, ``place`` the Slurm partition
    or the Kueue flavor of its GPUs; ``end`` is ``None`` while the job still runs.
    """

    job: str  # the executor's id: JobIDRaw, or namespace/name
    row: int | None  # where in the file: the line (sacct) or the item's position (Kueue)
    owner: str
    place: str
    gpus: float
    start: pd.Timestamp
    end: pd.Timestamp | None


@dataclass(frozen=True, order=True)
class Skip:
    """A job of the file that is reported and not written, with why."""

    reason: str
    job: str
    row: int | None = None
    detail: str = ""

    def __str__(self) -> str:
        """``job (row N, detail)``, the file's text with its control characters escaped."""
        where = f"row {self.row}" if self.row is not None else ""
        extra = ", ".join(x for x in (where, printable(self.detail)) if x)
        return f"{printable(self.job)} ({extra})" if extra else printable(self.job)


@dataclass(frozen=True)
class ParsedSource:
    """Everything a parser read from one file."""

    jobs: tuple[SourceJob, ...]
    skipped: tuple[Skip, ...]
    #: jobs that ran charged to no budget (Slurm's gp-opportunistic and gp-overdrawn):
    #: not usage.csv's, but unbudgeted.csv's (the executor contract's rule 8)
    unbudgeted: tuple[SourceJob, ...] = ()
