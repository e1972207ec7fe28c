"""Reading ``sacct`` output: one line per job allocation, fields separated by ``|``.

The admin runs (``TZ=UTC``, so that times are UTC; a time without an offset is read as
UTC)::

    TZ=UTC sacct --parsable2 --noheader --allocations
          --format=JobIDRaw,Account,Partition,AllocTRES,Start,End,State,QOS   (one line)

``QOS`` is optional (the seven fields without it are read too), and worth adding: a job
that ran under the exporter's ``gp-opportunistic`` (or, rule 8, ``gp-overdrawn``) QOS is
work beyond its project's budget, charged to none (neither QOS has ``GrpTRESMins``), so
it is reported and not written to ``usage.csv``, but to ``unbudgeted.csv`` beside it:
what the project ran, which the executor contract's rule 8 reads
(:func:`planner.contract.unbudgeted_ngh`). Without the field such jobs cannot be told
apart and are charged to their project's budget like any other.

What a line means here:

- ``JobIDRaw``: the job's id (digits). A step (``1234.batch``, ``1234.0``) appears only
  without ``--allocations``; it is skipped and reported, as counting it would double the job.
- ``AllocTRES``: ``key=value`` pairs, ``,``-separated. GPUs: where accounting tracks GPU
  types (``AccountingStorageTRES=gres/gpu,gres/gpu:h100``) Slurm 22.05 prints the typed
  and the untyped count together (``gres/gpu:h100=2,gres/gpu=2``), else only
  ``gres/gpu=2``; so the untyped count is the job's total when present, else the sum of
  the typed ones (never both: that would count every GPU twice). No GPU: skipped, reported.
- ``Start``: ``Unknown`` or ``None`` for a job that never started (pending; also a job
  cancelled while pending): skipped, reported.
- ``End``: ``Unknown`` while the job runs: it is then counted up to the ingest's ``now``
  and marked running, so that a later ingest replaces it.
- ``State``: a job that ran and was then cancelled, failed, timed out or was preempted
  still counts the time it ran (its ``Start``/``End``). ``PENDING`` is never counted.

A line that cannot be read is an :class:`~planner.errors.InputProblem` naming the file,
the line (``row``) and the field (``column``); a header line (the field names, as printed
without ``--noheader``) is allowed as line 1.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from planner.errors import InputProblem
from planner.exporters.slurm import OPPORTUNISTIC_QOS, OVERDRAWN_QOS
from planner.ingest.records import (
    NO_GPU,
    OPPORTUNISTIC,
    PENDING,
    STEP,
    ParsedSource,
    Skip,
    SourceJob,
)
from planner.inputs.read import read_text_file
from planner.inputs.validate import DATE_HINT, parse_datetime

FIELDS = ("JobIDRaw", "Account", "Partition", "AllocTRES", "Start", "End", "State")
WITH_QOS = (*FIELDS, "QOS")  # the optional eighth field
COMMAND = ("sacct --parsable2 --noheader --allocations "
           f"--format={','.join(WITH_QOS)}")
_JOB = re.compile(r"[0-9]+")
_STEP = re.compile(r"[0-9]+\.[A-Za-z0-9_+-]+")
_COUNT = re.compile(r"[0-9]+")
_DIGITS = 15  # a GPU count longer than this is no cluster's (and is not read as a number)
NOT_STARTED = ("unknown", "none", "")
RUNNING_END = ("unknown", "none")


def parse_tres(text: str) -> tuple[int | None, str | None]:
    """GPUs of an ``AllocTRES`` value, or ``None`` and what is wrong with it.

    ``billing=1,cpu=1,gres/gpu=8,node=1`` → 8; ``gres/gpu=8,gres/gpu:h100=8`` → 8 (the
    untyped total); ``gres/gpu:h100=2,gres/gpu:a100=1`` → 3 (no untyped total: the sum).
    """
    untyped: int | None = None
    typed = 0
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key:
            return None, f"{item!r} is not key=value"
        if key != "gres/gpu" and not key.startswith("gres/gpu:"):
            continue
        if not _COUNT.fullmatch(value.strip()):
            return None, f"{item!r}: the GPU count is not a whole number"
        if len(value.strip()) > _DIGITS:
            return None, (f"{item[:40]!r}…: a GPU count of {len(value.strip()):,} digits, "
                          "more GPUs than any cluster holds")
        if key == "gres/gpu":
            untyped = int(value)
        else:
            typed += int(value)
    return (untyped if untyped is not None else typed), None


def _time(text: str) -> pd.Timestamp | None:
    stamp = parse_datetime(text)
    return None if stamp is None else pd.Timestamp(stamp)


def parse_sacct(path: Path) -> tuple[ParsedSource, list[InputProblem]]:
    """The jobs of a ``sacct`` output file, the lines skipped, and every problem found."""
    label = path.name
    text, problems = read_text_file(path, label)
    if text is None:
        return ParsedSource((), ()), problems
    jobs: list[SourceJob] = []
    skipped: list[Skip] = []
    unbudgeted: list[SourceJob] = []
    for row, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split("|")]
        names = tuple(c.lower() for c in cells)
        if row == 1 and names in (tuple(f.lower() for f in FIELDS),
                                  tuple(f.lower() for f in WITH_QOS)):
            continue  # the header sacct prints without --noheader
        if len(cells) not in (len(FIELDS), len(WITH_QOS)):
            problems.append(InputProblem(
                label, row, None,
                f"{len(cells)} fields but sacct's output has {len(FIELDS)} or {len(WITH_QOS)} "
                f"({'|'.join(WITH_QOS)}); make it with `{COMMAND}`"))
            continue
        found = dict(zip(WITH_QOS[:len(cells)], cells, strict=True))
        job, problem_count = found["JobIDRaw"], len(problems)
        if not (_JOB.fullmatch(job) or _STEP.fullmatch(job)):
            problems.append(InputProblem(label, row, "JobIDRaw",
                                         f"{job!r} is not a Slurm job id (digits)"))
        gpus, error = parse_tres(found["AllocTRES"])
        if error is not None:
            problems.append(InputProblem(label, row, "AllocTRES", error))
        start = end = None
        if found["Start"].lower() not in NOT_STARTED:
            start = _time(found["Start"])
            if start is None:
                problems.append(InputProblem(
                    label, row, "Start",
                    f"{found['Start']!r} is not a time nor Unknown; {DATE_HINT}"))
        if found["End"].lower() not in RUNNING_END:
            end = _time(found["End"])
            if end is None:
                problems.append(InputProblem(
                    label, row, "End", f"{found['End']!r} is not a time nor Unknown; {DATE_HINT}"))
        if start is not None and end is not None and end < start:
            problems.append(InputProblem(label, row, "End",
                                         f"{found['End']} is before Start {found['Start']}"))
        if len(problems) > problem_count:
            continue
        if _STEP.fullmatch(job):
            skipped.append(Skip(STEP, job, row))
        elif start is None or found["State"].upper().startswith("PENDING"):
            skipped.append(Skip(PENDING, job, row, found["State"]))
        elif not gpus:
            skipped.append(Skip(NO_GPU, job, row, found["AllocTRES"] or "no AllocTRES"))
        else:
            ran = SourceJob(job, row, found["Account"], found["Partition"], float(gpus),
                            start, end)
            if found.get("QOS") in (OPPORTUNISTIC_QOS, OVERDRAWN_QOS):
                skipped.append(Skip(OPPORTUNISTIC, job, row, found["Account"]))
                unbudgeted.append(ran)
            else:
                jobs.append(ran)
    return ParsedSource(tuple(jobs), tuple(skipped), tuple(unbudgeted)), problems
