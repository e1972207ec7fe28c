"""``planner tick``: between planning cycles, act on the queue as the plan in force says.

Run every minute (a systemd timer or cron; ``deploy/systemd/``). Two steps, each one
decision function that the replays of what ships call too, so the tick does what the
replays measure:

- **Slurm, the wrapper rule** (:func:`slurm_moves`, called per job by ``planner-slurm``'s
  scheduler through :func:`budget_admits`): a pending job under its project's budget QOS
  that the budget does not admit — Slurm says it pends on ``QOSGrpGRESMinutes`` or
  ``QOSGrpGRES``, or its GPUs × time limit do not fit in what is left of ``GrpTRESMins``
  once the running jobs' limits are counted, or its GPUs do not fit under ``GrpTRES`` —
  moves to ``gp-opportunistic`` (preemptible, it may run on idle GPUs at once); a job the
  tick moved there goes back to its budget QOS while it still waits, once the budget
  admits it (after a replan gave budget or cap back). A running job is never touched.
  The moves are ``scontrol update JobId=<id> QOS=<qos>``, run without a shell (argv) and
  printed with every value quoted; the jobs moved are recorded in ``DIR/tick.json`` (so
  that they can return, and so that the demand ingest counts them as their project's).
- **Slurm, rule 8** (the executor contract's overdrawn projects, in the same
  :func:`slurm_moves`): every pending job of an account whose project is overdrawn at the
  plan in force (:meth:`planner.exporters.slurm.SlurmExport.overdrawn_accounts`: the
  plan's ``used`` plus what ``unbudgeted.csv`` says the project ran charged to no budget)
  that its budget does not admit moves to ``gp-overdrawn`` instead of
  ``gp-opportunistic``, and so does its ``gp-opportunistic`` work; there it runs only on
  GPUs no other job wants, and any other job requeues it at once. But the project keeps
  its pace (:meth:`planner.exporters.slurm.SlurmExport.overdrawn_paces`: budget ÷ the
  quarter's hours, NGH per hour): while its account's running jobs (any QOS, each at its
  partition's NGH rate) run less than that, its pending work beyond its budget goes to
  (or stays in, or returns to) ``gp-opportunistic`` in queue order, each job kept counted
  as if it ran (:func:`keeps_pace`, which ``planner-slurm`` calls too). Work its budget QOS
  admits stays there: it is charged to the budget, within the pace cap (the plan's
  ``used`` under Slurm leaves out what ran on no budget, so an overdrawn project may
  still have budget left; under Kueue, whose usage counts every run, it cannot). The
  tick records where each job came from; while it waits it goes back to its budget QOS
  once the budget admits it, and to ``gp-opportunistic`` once a new plan no longer finds
  its project overdrawn (a user expects a job to regain its standing when its project
  does).
- **Kueue, rule 7's late arrivals** (:func:`late_step`, called hourly by
  ``planner-kueue``): the gangs pending in a ClusterQueue the plan gave no nominal quota on
  a cluster get their GPUs from the pool Cohort's unheld quota
  (:func:`planner.exporters.kueue.widen_late`), the projects most owed per hour first and
  each (project, cluster)'s widest gang (:func:`planner.exporters.kueue.most_owed_first`),
  in the manifest set in force, which is then applied (``kubectl apply``).

What the tick reads: the plan in force (``DIR/current``, written by ``planner cycle``) and
the queue now (``squeue``, ``scontrol show assoc_mgr flags=qos``, ``kubectl get workloads
-A -o json``), run by the tick itself or given as saved files.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planner.errors import InputProblem
from planner.exporters.kueue import most_owed_first, widen_late
from planner.exporters.slurm import OPPORTUNISTIC_QOS, OVERDRAWN_QOS
from planner.ingest.squeue import PENDING, SqueueJob

#: Slurm's reasons for a job pending on its QOS's budget limits (GrpTRESMins, GrpTRES)
BUDGET_REASONS = ("QOSGrpGRESMinutes", "QOSGrpGRES")
TICK_FILE = "tick.json"
_EPS = 1e-6


def keeps_pace(running_ngh: float, pace: float) -> bool:
    """Whether an overdrawn project running ``running_ngh`` NGH per hour is below ``pace``.

    Rule 8 under Slurm: such a project's work beyond its budget stays in
    ``gp-opportunistic`` while this holds, and goes to ``gp-overdrawn`` once it does not.
    """
    return running_ngh < pace - _EPS


def budget_admits(gpus: float, hours: float, limit_gpu_hours: float,
                  committed_gpu_hours: float, cap_gpus: float, running_gpus: float) -> bool:
    """Whether a budget QOS admits a job of ``gpus`` GPUs and a time limit of ``hours``.

    ``GrpTRES=gres/gpu=`` (``cap_gpus``; ``inf``: none): the GPUs its running jobs hold
    plus the job's stay within it. ``GrpTRESMins=gres/gpu=`` (``limit_gpu_hours``, ÷ 60):
    what is committed (usage accrued plus the running jobs' GPUs × time limit left: what
    Slurm counts for a job that must finish within the limit) plus the job's GPUs × its
    time limit stay within it.
    """
    if running_gpus + gpus > cap_gpus + _EPS:
        return False
    return committed_gpu_hours + gpus * hours <= limit_gpu_hours + _EPS


@dataclass(frozen=True)
class BudgetUse:
    """A budget QOS as slurmctld holds it now (``scontrol show assoc_mgr flags=qos``)."""

    qos: str
    limit_gpu_hours: float | None  # GrpTRESMins gres/gpu ÷ 60; None: no limit set
    committed_gpu_hours: float  # usage accrued + running jobs' GPUs × time limit left
    cap_gpus: float  # GrpTRES gres/gpu; inf: none
    running_gpus: float  # GPUs its running jobs hold

    def admits(self, gpus: float, hours: float) -> bool:
        """:func:`budget_admits` for this QOS (never, without a ``GrpTRESMins`` limit)."""
        if self.limit_gpu_hours is None:
            return False
        return budget_admits(gpus, hours, self.limit_gpu_hours, self.committed_gpu_hours,
                             self.cap_gpus, self.running_gpus)


@dataclass(frozen=True)
class Move:
    """One ``scontrol update``: a pending job to another QOS, and why."""

    job_id: str
    account: str
    source: str  # the QOS it pends under
    target: str
    why: str

    def argv(self) -> list[str]:
        """The command, as run (no shell)."""
        return ["scontrol", "update", f"JobId={self.job_id}", f"QOS={self.target}"]

    def command(self) -> str:
        """The command as a shell line, every value quoted."""
        return " ".join(shlex.quote(word) for word in self.argv())


def slurm_moves(jobs: Iterable[SqueueJob], budget_of: Mapping[str, str],
                use: Mapping[str, BudgetUse], moved: Mapping[str, str],
                overdrawn: frozenset[str] = frozenset(),
                parked: Mapping[str, str] | None = None,
                paces: Mapping[str, float] | None = None,
                rates: Mapping[str, float] | None = None) -> list[Move]:
    """Rule 8 and the wrapper rule (module docstring) over the queue: the moves to make now.

    ``budget_of``: Slurm account -> its project's budget QOS (the plan's); ``use``: budget
    QOS -> how much of it is used; ``moved``: job id -> the budget QOS a job the tick moved
    to ``gp-opportunistic`` came from; ``overdrawn``: the accounts of the projects
    overdrawn at the plan in force (rule 8); ``parked``: job id -> the QOS a job the tick
    moved to ``gp-overdrawn`` came from; ``paces``: overdrawn account -> the NGH per hour
    it keeps in ``gp-opportunistic`` (none given: 0, every job beyond its budget to
    ``gp-overdrawn``); ``rates``: partition -> NGH per GPU-hour (a partition not in it
    counts nothing). Jobs in queue order.
    """
    out = []
    jobs = list(jobs)
    parked = parked or {}
    paces = paces or {}
    rate = _partition_rate(rates or {})
    held: dict[str, float] = {}  # overdrawn account -> NGH per hour running or kept
    for job in jobs:
        if job.state != PENDING and job.account in overdrawn:
            held[job.account] = held.get(job.account, 0.0) + job.gpus * rate(job.partition)
    for job in jobs:
        if job.state != PENDING:
            continue  # a running job keeps its QOS
        budget = budget_of.get(job.account)
        if budget is None:
            continue
        # rule 8, for an account whose project is overdrawn: below its pace (paced) its work
        # beyond its budget goes to (or stays in) gp-opportunistic, each such job counted as
        # kept; at its pace or above (over) that work goes to gp-overdrawn
        is_overdrawn = job.account in overdrawn
        paced = is_overdrawn and keeps_pace(held.get(job.account, 0.0),
                                            paces.get(job.account, 0.0))
        over = is_overdrawn and not paced
        hours = math.inf if job.limit_seconds is None else job.limit_seconds / 3600.0
        state = use.get(budget)
        admits = state is not None and state.admits(job.gpus, hours)
        came = budget in (moved.get(job.job_id), parked.get(job.job_id))  # the tick moved it
        kept = False  # left in (or moved to) gp-opportunistic below its pace
        if job.qos == budget:
            if job.reason in BUDGET_REASONS or not admits:
                why = (f"pends on {job.reason}" if job.reason in BUDGET_REASONS
                       else "its budget does not admit it")
                if over:
                    why += "; its project is overdrawn (rule 8)"
                elif paced:
                    why += "; its overdrawn project runs below its pace (rule 8)"
                target = OVERDRAWN_QOS if over else OPPORTUNISTIC_QOS
                out.append(Move(job.job_id, job.account, budget, target, why))
                kept = paced
        elif came and admits and job.qos in (OPPORTUNISTIC_QOS, OVERDRAWN_QOS):
            out.append(Move(job.job_id, job.account, job.qos, budget,
                            "its budget admits it again"))
        elif over and job.qos == OPPORTUNISTIC_QOS:
            out.append(Move(job.job_id, job.account, job.qos, OVERDRAWN_QOS,
                            "its project is overdrawn (rule 8)"))
        elif paced and job.qos == OPPORTUNISTIC_QOS:
            kept = True
        elif not over and job.qos == OVERDRAWN_QOS and job.job_id in parked:
            back = parked[job.job_id]  # its budget QOS does not admit it: gp-opportunistic
            out.append(Move(job.job_id, job.account, job.qos,
                            OPPORTUNISTIC_QOS if back == budget else back,
                            "its overdrawn project runs below its pace (rule 8)" if paced
                            else "its project is no longer overdrawn"))
            kept = paced
        if kept:
            held[job.account] = held.get(job.account, 0.0) + job.gpus * rate(job.partition)
    return out


def _partition_rate(rates: Mapping[str, float]) -> Callable[[str], float]:
    """Partition text -> NGH per GPU-hour.

    The highest of its partitions' rates (a pending job may name several); 0 for a
    partition the plan does not know.
    """

    def rate(partition: str) -> float:
        return max((rates[p] for p in partition.split(",") if p in rates), default=0.0)
    return rate


def moved_after(moved: Mapping[str, str], moves: Iterable[Move], queue: Iterable[SqueueJob]
                ) -> dict[str, str]:
    """The record of jobs moved off their budget QOS after ``moves``, for jobs still queued.

    Job id -> the budget QOS it came from: a job moved to ``gp-opportunistic`` or
    ``gp-overdrawn`` from its budget QOS (one moved on between the two keeps its entry),
    dropped when it goes back to its budget QOS. The demand ingest counts these as their
    project's allocated work.
    """
    shared = (OPPORTUNISTIC_QOS, OVERDRAWN_QOS)
    out = dict(moved)
    for move in moves:
        if move.target not in shared:
            out.pop(move.job_id, None)
        elif move.source not in shared:
            out[move.job_id] = move.source
    return _queued(out, queue)


def parked_after(parked: Mapping[str, str], moves: Iterable[Move], queue: Iterable[SqueueJob]
                 ) -> dict[str, str]:
    """Job id -> the QOS a job the tick moved to ``gp-overdrawn`` came from, after ``moves``."""
    out = dict(parked)
    for move in moves:
        if move.target == OVERDRAWN_QOS:
            out[move.job_id] = move.source
        elif move.source == OVERDRAWN_QOS:
            out.pop(move.job_id, None)
    return _queued(out, queue)


def _queued(record: Mapping[str, str], queue: Iterable[SqueueJob]) -> dict[str, str]:
    queued = {job.job_id for job in queue}
    return {job: qos for job, qos in sorted(record.items()) if job in queued}


def read_tick_record(state: Path) -> dict[str, Any]:
    """``DIR/tick.json`` (``{}`` before the first tick, or when it is unreadable)."""
    try:
        record = json.loads((Path(state) / TICK_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def moved_jobs(state: Path) -> dict[str, str]:
    """Job id -> budget QOS of the Slurm jobs the tick moved to ``gp-opportunistic``."""
    moved = read_tick_record(state).get("moved", {})
    return {str(k): str(v) for k, v in moved.items()} if isinstance(moved, dict) else {}


# -- scontrol show assoc_mgr ----------------------------------------------------------------

_QOS_HEAD = re.compile(r"^QOS=(.+)\(\d+\)\s*$")
_GPU_ENTRY = re.compile(r"(?:^|,)gres/gpu=([0-9]+|N)\(([0-9.]+)\)")


def parse_assoc_mgr(label: str, text: str) -> tuple[dict[str, BudgetUse], list[InputProblem]]:
    """QOS -> :class:`BudgetUse` from ``scontrol show assoc_mgr flags=qos`` output.

    Per QOS record (``QOS=<name>(<id>)``): ``GrpTRESMins=...,gres/gpu=<limit>(<used>)``
    (minutes; ``N``: no limit), ``GrpTRESRunMins=...,gres/gpu=N(<minutes>)`` (the running
    jobs' GPUs × time limit left) and ``GrpTRES=...,gres/gpu=<cap>(<held>)``.
    """
    out: dict[str, BudgetUse] = {}
    problems: list[InputProblem] = []
    name: str | None = None
    fields: dict[str, tuple[str, float]] = {}

    def close() -> None:
        if name is None:
            return
        mins, run, cap = (fields.get(k) for k in ("GrpTRESMins", "GrpTRESRunMins", "GrpTRES"))
        limit = None if mins is None or mins[0] == "N" else float(mins[0]) / 60.0
        committed = ((mins[1] if mins else 0.0) + (run[1] if run else 0.0)) / 60.0
        out[name] = BudgetUse(name, limit, committed,
                              math.inf if cap is None or cap[0] == "N" else float(cap[0]),
                              cap[1] if cap else 0.0)

    for row, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        head = _QOS_HEAD.match(stripped)
        if head:
            close()
            name, fields = head.group(1), {}
            continue
        if name is None:
            continue
        for key in ("GrpTRESMins", "GrpTRESRunMins", "GrpTRES"):
            if stripped.startswith(f"{key}="):
                found = _GPU_ENTRY.search(stripped[len(key) + 1:])
                if found is None:
                    if "gres/gpu" in stripped:
                        problems.append(InputProblem(label, row, key, f"{stripped!r}: no "
                                                     "gres/gpu=<limit>(<used>) entry"))
                    continue
                fields[key] = (found.group(1), float(found.group(2)))
    close()
    return out, problems


# -- Kueue ----------------------------------------------------------------------------------


def late_step(plan: dict[str, Any], objects: list[dict[str, Any]],
              widest: Mapping[tuple[str, str], int]) -> list[tuple[str, str, int]]:
    """Rule 7 on the manifest set in force (changed in place): the gangs served.

    ``widest``: (project, cluster) -> GPUs of its widest pending gang; served the projects
    most owed per hour first (:func:`~planner.exporters.kueue.most_owed_first`).
    """
    return widen_late(plan, objects, most_owed_first(plan, widest))
