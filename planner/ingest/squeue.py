"""Reading (and writing) ``squeue`` output: the jobs pending and running in Slurm now.

The site runs (``TZ=UTC``, so that submit times are UTC; a time without an offset is read
as UTC)::

    TZ=UTC squeue --noheader --array --states=PD,R --Format=JobID:|,Account:|,Partition:|,
        QOS:|,State:|,Reason:|,tres-alloc:|,tres-per-job:|,tres-per-node:|,tres-per-task:|,
        NumNodes:|,NumTasks:|,TimeLimit:|,TimeUsed:|,SubmitTime:|          (one line)

(:data:`COMMAND`). ``--Format`` (``-O``), not ``--format`` (``-o``): Slurm 22.05's
``--format`` prints a job's GPUs only through ``%b``, its GPUs *per node*, which reads
``N/A`` for a job submitted with ``--gpus=N`` or ``--gpus-per-task=N``; ``--Format`` has
``tres-alloc`` (the TRES a running job holds, or a pending job asks for, ``gres/gpu=N`` its
GPUs in all however they were asked) and the three request forms. ``:|`` after a field
name ends it with ``|`` and no padding. ``--array`` prints every pending element of a job
array on its own line, which ``scontrol update`` can then address.

What a line means here:

- ``JobID``: digits, an array element ``123_4`` or a heterogeneous component ``123+1``.
- ``State``: ``PENDING`` or ``RUNNING`` (``--states=PD,R``); anything else is a problem.
- ``Reason``: why a pending job waits (``QOSGrpGRESMinutes``, ``QOSGrpGRES``: its budget
  QOS's limits; what ``planner tick`` acts on).
- **GPUs**: ``tres-alloc``'s ``gres/gpu=N`` (where accounting tracks GPU types, Slurm
  prints the typed and the untyped count together, ``gres/gpu:h100=2,gres/gpu=2``: the
  untyped count is the total; typed counts alone are summed); without it, the request:
  ``tres-per-job`` (``gres:gpu:16``, ``gres/gpu:a100:16``, ``gpu:16``), else
  ``tres-per-node`` × ``NumNodes`` (``gres:gpu:8``, ``gpu:a100:8``), else
  ``tres-per-task`` × ``NumTasks``. ``N/A`` and ``(null)`` mean none. A job with no GPU
  is skipped and reported.
- ``TimeLimit``, ``TimeUsed``: Slurm's clock, ``[days-]hours:minutes:seconds`` or
  ``minutes:seconds`` (``1-00:00:00``, ``1:00:00``, ``30:00``); ``UNLIMITED`` (no limit).
  The time a job has left is the limit less the time used.
- ``SubmitTime``: ISO 8601 (``2026-12-07T03:26:32``), UTC.

A line that cannot be read is an :class:`~planner.errors.InputProblem` naming the file,
the line (``row``) and the field (``column``). :func:`squeue_text` writes the same format
(the replays render their queue with it, and the tests a real Slurm's).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from planner.errors import InputProblem
from planner.ingest.sacct import parse_tres
from planner.inputs.read import decode
from planner.inputs.validate import DATE_HINT, parse_datetime

FIELDS = ("JobID", "Account", "Partition", "QOS", "State", "Reason", "tres-alloc",
          "tres-per-job", "tres-per-node", "tres-per-task", "NumNodes", "NumTasks",
          "TimeLimit", "TimeUsed", "SubmitTime")
COMMAND = ("squeue --noheader --array --states=PD,R --Format="
           + ",".join(f"{name}:|" for name in FIELDS))
PENDING, RUNNING = "PENDING", "RUNNING"
NO_LIMIT = ("unlimited", "infinite", "not_set", "n/a", "none")
EMPTY = ("", "n/a", "(null)", "none")
_JOB = re.compile(r"[0-9]+(?:_[0-9]+|\+[0-9]+)?")
_ARRAY = re.compile(r"[0-9]+_\[.*\]")
_CLOCK = re.compile(r"(?:([0-9]+)-)?([0-9]+)(?::([0-9]+))?(?::([0-9]+))?")
_COUNT = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class SqueueJob:
    """One line of the ``squeue`` output, in Slurm's own names."""

    job_id: str
    row: int | None  # the line in the file
    account: str
    partition: str
    qos: str
    state: str  # PENDING or RUNNING
    reason: str
    gpus: int
    nodes: int
    limit_seconds: int | None  # None: no limit (UNLIMITED)
    used_seconds: int
    submit: pd.Timestamp | None

    @property
    def seconds_left(self) -> int | None:
        """Its time limit less the time it has run (never below 0); None without a limit."""
        if self.limit_seconds is None:
            return None
        return max(self.limit_seconds - self.used_seconds, 0)


def slurm_seconds(text: str) -> int | None:
    """Seconds of Slurm's clock text: ``1-02:03:04``, ``2:03:04``, ``3:04``, ``5``.

    As Slurm reads times: ``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S``.
    ``None`` when it is none of these.
    """
    found = _CLOCK.fullmatch(text.strip())
    if not found:
        return None
    days, a, b, c = found.groups()
    if days is not None:  # D-H, D-H:M, D-H:M:S
        hours, minutes, seconds = int(a), int(b or 0), int(c or 0)
        return ((int(days) * 24 + hours) * 60 + minutes) * 60 + seconds
    if c is not None:  # H:M:S
        return (int(a) * 60 + int(b)) * 60 + int(c)
    if b is not None:  # M:S
        return int(a) * 60 + int(b)
    return int(a) * 60  # M


def slurm_clock(seconds: int) -> str:
    """Slurm's clock text of ``seconds`` as squeue prints it (``1-00:00:00``, ``30:00``)."""
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def gres_gpus(text: str) -> tuple[int | None, str | None]:
    """GPUs in a GRES request list (``gres:gpu:a100:2,gres:nvme:1``), or what is wrong.

    ``None`` GPUs when the list names none (``N/A``); a GPU entry without a count is one
    GPU (Slurm's default); ``(IDX:0-1)`` and similar suffixes are ignored.
    """
    if text.strip().lower() in EMPTY:
        return None, None
    total: int | None = None
    for item in (t.strip() for t in text.split(",")):
        item = re.sub(r"\(.*\)$", "", item)
        parts = re.split(r"[:/=]", item)
        if parts and parts[0] == "gres":
            parts = parts[1:]
        if not parts or parts[0] != "gpu":
            continue
        count = parts[-1] if len(parts) > 1 else "1"
        if not _COUNT.fullmatch(count):
            if len(parts) == 2:  # gpu:<type>, no count
                count = "1"
            else:
                return None, f"{item!r}: the GPU count is not a whole number"
        total = (total or 0) + int(count)
    return total, None


def _gpus(found: dict[str, str], nodes: int, tasks: int) -> tuple[int, str | None, str]:
    """GPUs of a line (the module docstring's order) and which field gave them."""
    alloc = found["tres-alloc"]
    if alloc.lower() not in EMPTY:
        count, error = parse_tres(alloc)
        if error is not None:
            return 0, error, "tres-alloc"
        if count:
            return count, None, "tres-alloc"
    for name, times in (("tres-per-job", 1), ("tres-per-node", nodes), ("tres-per-task", tasks)):
        count, error = gres_gpus(found[name])
        if error is not None:
            return 0, error, name
        if count is not None:
            return count * times, None, name
    return 0, None, ""


def _whole(text: str) -> int | None:
    text = text.strip()
    return int(text) if _COUNT.fullmatch(text) else None


def parse_squeue_text(label: str, text: str) -> tuple[list[SqueueJob], list[InputProblem]]:
    """The jobs of ``squeue`` output text (see the module docstring), and every problem."""
    jobs: list[SqueueJob] = []
    problems: list[InputProblem] = []
    for row, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split("|")]
        if line.rstrip().endswith("|"):
            cells = cells[:-1]  # the last field's own "|" (":|" ends every field)
        if row == 1 and tuple(c.upper() for c in cells) == _HEADER:
            continue  # the header squeue prints without --noheader
        if len(cells) != len(FIELDS):
            problems.append(InputProblem(
                label, row, None, f"{len(cells)} fields but the squeue output read here has "
                f"{len(FIELDS)} ({'|'.join(FIELDS)}); make it with `{COMMAND}`"))
            continue
        found = dict(zip(FIELDS, cells, strict=True))
        before = len(problems)

        def bad(field: str, message: str, row: int = row) -> None:
            problems.append(InputProblem(label, row, field, message))

        job = found["JobID"]
        if _ARRAY.fullmatch(job):
            bad("JobID", f"{job!r} is a job array's pending elements on one line; run squeue "
                         "with --array (one line each)")
        elif not _JOB.fullmatch(job):
            bad("JobID", f"{job!r} is not a Slurm job id (digits)")
        state = found["State"].upper()
        if state not in (PENDING, RUNNING):
            bad("State", f"{found['State']!r}; the file lists PENDING and RUNNING jobs "
                         "(squeue --states=PD,R)")
        nodes, tasks = _whole(found["NumNodes"]), _whole(found["NumTasks"])
        if nodes is None:
            bad("NumNodes", f"{found['NumNodes']!r} is not a whole number")
        if tasks is None:
            bad("NumTasks", f"{found['NumTasks']!r} is not a whole number")
        gpus, error, where = _gpus(found, nodes or 0, tasks or 0)
        if error is not None:
            bad(where, error)
        limit: int | None = None
        if found["TimeLimit"].lower() not in NO_LIMIT:
            limit = slurm_seconds(found["TimeLimit"])
            if limit is None:
                bad("TimeLimit", f"{found['TimeLimit']!r} is not a Slurm time "
                                 "([days-]hours:minutes:seconds) nor UNLIMITED")
        used = slurm_seconds(found["TimeUsed"])
        if used is None:
            bad("TimeUsed", f"{found['TimeUsed']!r} is not a Slurm time "
                            "([days-]hours:minutes:seconds)")
        submit = None
        if found["SubmitTime"].lower() not in EMPTY + ("unknown",):
            stamp = parse_datetime(found["SubmitTime"])
            if stamp is None:
                bad("SubmitTime", f"{found['SubmitTime']!r} is not a time; {DATE_HINT}")
            else:
                submit = pd.Timestamp(stamp)
        for field in ("Account", "Partition", "QOS"):
            if not found[field]:
                bad(field, "empty")
        if len(problems) > before:
            continue
        jobs.append(SqueueJob(job, row, found["Account"], found["Partition"], found["QOS"],
                              state, found["Reason"], gpus, nodes or 0, limit, used or 0,
                              submit))
    return jobs, problems


#: the header squeue prints without --noheader (field names upper-cased, "-" as "_")
_HEADER = ("JOBID", "ACCOUNT", "PARTITION", "QOS", "STATE", "REASON", "TRES_ALLOC",
           "TRES_PER_JOB", "TRES_PER_NODE", "TRES_PER_TASK", "NODES", "TASKS", "TIME_LIMIT",
           "TIME", "SUBMIT_TIME")


def parse_squeue(path: Path) -> tuple[list[SqueueJob], list[InputProblem]]:
    """The jobs of a saved ``squeue`` output file (:data:`COMMAND`), and every problem."""
    label = path.name
    if not path.is_file():
        return [], [InputProblem(str(path), None, None, "no such file")]
    text, problems = decode(label, path.read_bytes())
    if text is None:
        return [], problems
    jobs, more = parse_squeue_text(label, text)
    return jobs, problems + more


def squeue_line(job: SqueueJob) -> str:
    """One line of :data:`COMMAND`'s output for ``job`` (GPUs as ``tres-alloc`` and per job)."""
    limit = "UNLIMITED" if job.limit_seconds is None else slurm_clock(job.limit_seconds)
    submit = "N/A" if job.submit is None else job.submit.tz_convert("UTC").strftime(
        "%Y-%m-%dT%H:%M:%S")
    cells = (job.job_id, job.account, job.partition, job.qos, job.state, job.reason,
             f"cpu={max(job.nodes, 1)},node={max(job.nodes, 1)},billing=1,gres/gpu={job.gpus}",
             f"gres:gpu:{job.gpus}", "N/A", "N/A", str(job.nodes), "1", limit,
             slurm_clock(job.used_seconds), submit)
    return "|".join(cells) + "|"


def squeue_text(jobs: Iterable[SqueueJob]) -> str:
    """:data:`COMMAND`'s output for ``jobs``, one line each."""
    return "".join(squeue_line(job) + "\n" for job in jobs)
