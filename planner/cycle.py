"""The planning cycle (``planner cycle``): ingest → plan from the last plan → export → apply.sh.

One call per planning period (a cron job or systemd timer runs it), keeping the plan
history in a state folder ``DIR``::

    DIR/plans/<as_of>/plan.json       the plan, checked (rules 1-6) before it is kept
                     /summary.txt
                     /slurm/slurm-apply.sh       with a previous plan: only the changes
                     /kueue/kueue-<period>.yaml  (and index.yaml)
                     /json/executor-view.json
                     /apply.sh         applies the exports (kubectl apply --prune ...)
                     /cycle.json       what the cycle was: as_of, previous, model, exports
                     /changes.json     per project, what changed since the plan in force
                     /inputs/          the scenario the plan was made from, byte for byte
                                       (scenario.toml and the CSVs, or the .xlsx workbook)
    DIR/current -> plans/<as_of>      the plan in force (a symlink, swapped atomically)
    DIR/cycles.jsonl                  one line per cycle run: when it started and ended
                                      (wall clock), its status, as_of, folder, warnings
    DIR/tick.json, DIR/tick/          what ``planner tick`` did between cycles

With ``inputs/`` a kept folder explains itself: ``planner status``, ``explain``, the
reports, ``planner serve`` and ``planner tick`` recompute every figure of any past plan
from the state folder alone (:func:`cycle_inputs`). ``cycles.jsonl`` is the only file a
re-run with the same inputs adds to (it records runs, not plans), and the only place the
wall clock is written.

Demand: with a queue file (``queue``: ``squeue`` output, or Workloads JSON, the same file
as the usage ingest's) the scenario's ``demand.csv`` is derived from the queue first
(:func:`planner.ingest.queue.ingest_demand`: the queue, the arrival forecast from the
usage just ingested, the declared rows); without one the cycle plans on ``demand.csv`` as
it is and warns how old it is (:func:`planner.ingest.queue.demand_origin`). A cycle holds
the state folder's lock throughout (:func:`planner.locks.hold`): a second cycle or a
``planner tick`` on the same folder meanwhile exits 2 naming it.

``<as_of>`` is the time with ``:`` as ``-`` (``2026-11-25T00-00-00Z``); a re-run for the same
``as_of`` whose outputs differ gets ``<as_of>-2``, ``-3``… so no kept folder is ever
rewritten. The cycle's folder is written complete under a hidden name and renamed into
``plans/``; only then does ``current`` move to it (with ``apply``: once ``apply.sh``
succeeded). A cycle that fails at any step leaves ``current`` where it was.

The previous plan is ``current``'s when it is older than this ``as_of``; when it has the
same ``as_of`` (a re-run) it is the plan ``current`` was itself made from, so a second run
with the same inputs gives the same bytes and keeps the folder (idempotent). A ``current``
planned later than this ``as_of`` is a conflict (:mod:`planner.replan`), like every other.

One cycle at a time: a cycle holds the state folder's lock (``DIR/.lock``,
:func:`planner.locks.hold`) from start to end, and a second one on the same ``DIR`` is
refused at once (exit 2, naming the one running); a killed cycle's lock is released by
the kernel, and what it left half-way (``plans/.<as_of>.<pid>.tmp/``) is removed by the
next. ``current`` never moves to a plan made as of a time earlier than the one in force.
A damaged state (``current`` a loop of links or pointing at nothing, a ``cycle.json``
that is not one, ``--state`` a file) is bad input, exit 2, naming what is damaged.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from planner.changes import CHANGES_FILE, change_lines, changes_bytes, plan_changes
from planner.config import ModelConfig, with_limits
from planner.errors import InputError, InputProblem, SolverError
from planner.exporters.files import export_files
from planner.exporters.kueue import allowed_clusters, prune_allowlist, prune_selector
from planner.exporters.validate import export_problems
from planner.ingest.pending import PendingGangs, pending_gangs
from planner.ingest.queue import demand_origin, ingest_demand
from planner.inputs import Scenario
from planner.inputs.bounded import load_json
from planner.inputs.load import (
    load_scenario_and_files,
    load_scenario_and_unbudgeted,
)
from planner.inputs.read import read_text_file
from planner.inputs.schema import UNBUDGETED_FILE
from planner.inputs.validate import parse_datetime
from planner.locks import hold
from planner.plan.write import plan_bytes, write_files
from planner.replan import previous_conflicts, stale_usage
from planner.run import PlanRun, demand_by_cell, load_previous, parse_as_of, plan_scenario
from planner.summary import summary_text
from planner.tick import moved_jobs
from planner.times import iso

PLANS = "plans"
CURRENT = "current"
MANIFEST = "cycle.json"
APPLY = "apply.sh"
INPUTS = "inputs"
LOG = "cycles.jsonl"
AFRESH = ("move {current} aside to start afresh (the history in plans/ stays; the next cycle "
          "plans without a previous plan, and its running reservations are not kept)")


@dataclass(frozen=True)
class CycleResult:
    """What one cycle did."""

    as_of: pd.Timestamp
    folder: Path  # DIR/plans/<as_of>, the plan now current
    previous: Path | None  # the folder of the plan it replanned
    unchanged: bool  # a re-run that gave the same bytes as the kept folder
    ingest_lines: tuple[str, ...]
    warnings: tuple[str, ...]
    applied: bool
    change_lines: tuple[str, ...] = ()


def stamp(as_of: pd.Timestamp) -> str:
    """``2026-11-25T00-00-00Z``: the folder name of a plan as of that time."""
    return iso(as_of).replace(":", "-")


def floor_to_grid(now: pd.Timestamp, scenario: Scenario) -> pd.Timestamp:
    """``now`` floored to the scenario's period grid (anchored at ``quarter_start``)."""
    cfg = scenario.config
    step = pd.Timedelta(hours=cfg.period_hours)
    return cfg.quarter_start + step * ((now - cfg.quarter_start) // step)


def current_folder(state: Path) -> Path | None:
    """The folder ``DIR/current`` points at, or ``None`` before the first cycle.

    A ``current`` that cannot be followed (a loop of links, a link to nothing) or points
    at no finished cycle is an :class:`InputError` naming it: the state is damaged, and
    what to do is said (point it at a kept folder, or move it aside).
    """
    link = state / CURRENT
    if not os.path.lexists(link):
        return None
    aside = f"point it at a folder in {state / PLANS} or move it aside"
    try:
        target = link.resolve(strict=True)
    except (OSError, RuntimeError) as error:  # RuntimeError: a loop of links (Python 3.11)
        why = getattr(error, "strerror", None) or "a loop of symbolic links"
        raise InputError([InputProblem(str(link), None, None,
                                       f"cannot be followed ({why}); {aside}")]) from None
    if not (target / "plan.json").is_file() or not (target / MANIFEST).is_file():
        raise InputError([InputProblem(str(link), None, None,
                                       f"points at {str(target)!r}, which holds no finished "
                                       f"cycle (plan.json and cycle.json); {aside}")])
    return target


def manifest(folder: Path) -> dict:
    """A kept cycle's ``cycle.json``, checked: its ``as_of`` a time, ``previous`` a name.

    A damaged one (not JSON, not this shape) is an :class:`InputError` naming the file
    and the field.
    """
    path = folder / MANIFEST
    text, problems = read_text_file(path, str(path))
    record = None
    if text is not None:
        record, problems = load_json(str(path), text)
    if not problems and not isinstance(record, dict):
        problems = [InputProblem(str(path), None, None, "not a JSON object")]
    if not problems:
        assert isinstance(record, dict)
        stamp = record.get("as_of")
        previous = record.get("previous")
        if not isinstance(stamp, str) or parse_datetime(stamp) is None:
            problems.append(InputProblem(str(path), None, "as_of",
                                         f"{stamp!r} is not an ISO 8601 time"))
        if previous is not None and (not isinstance(previous, str) or not previous
                                     or previous != Path(previous).name
                                     or previous.startswith(".")):
            problems.append(InputProblem(str(path), None, "previous",
                                         f"{previous!r} is not the name of a folder in "
                                         f"{PLANS}/"))
    if problems:
        raise InputError([InputProblem(p.file, p.row, p.column,
                                       f"{p.message}; the state is damaged: restore the file, "
                                       f"or move {CURRENT} aside to start afresh")
                          for p in problems])
    assert isinstance(record, dict)
    return record


def as_of_of(folder: Path) -> pd.Timestamp:
    """The ``as_of`` a kept cycle planned from (its ``cycle.json``)."""
    return pd.Timestamp(manifest(folder)["as_of"]).tz_convert("UTC")


def _previous_folder(state: Path, as_of: pd.Timestamp) -> Path | None:
    """The folder of the plan to replan from (see the module docstring)."""
    current = current_folder(state)
    if current is None:
        return None
    record = manifest(current)
    if as_of_of(current) == as_of:  # a re-run: plan from what current came from
        if not record["previous"]:
            return None
        folder = state / PLANS / record["previous"]
        if not (folder / "plan.json").is_file():
            raise InputError([InputProblem(
                str(current / MANIFEST), None, "previous",
                f"names {record['previous']!r}, but {folder} holds no plan.json; restore it, "
                f"or move {CURRENT} aside to start afresh")])
        return folder
    return current


def apply_script(plan: dict, exports: dict[str, dict[str, bytes]]) -> str:
    """``apply.sh``: run the Slurm script, ``kubectl apply --prune`` each Kueue file.

    Every value is shell-quoted; the header names the plan with JSON escapes, so no id can
    end the comment. Per-cluster Kueue sets (``index.yaml`` lists a ``cluster`` per file)
    go to the kubeconfig context named after their cluster.
    """
    lines = ["#!/usr/bin/env bash",
             f"# gpu-planner cycle: apply the plan {json.dumps(plan['scenario'])} as of "
             f"{plan['as_of']} (written by planner cycle; re-running converges)",
             "set -euo pipefail",
             'cd "$(dirname "$0")"']
    if "slurm" in exports:
        lines.append("./slurm/slurm-apply.sh")
    if "kueue" in exports:
        index = yaml.safe_load(exports["kueue"]["index.yaml"])
        selector = shlex.quote(prune_selector(plan))  # the labels the exporter wrote
        kinds = " ".join(f"--prune-allowlist={shlex.quote(kind)}" for kind in prune_allowlist())
        for entry in index["periods"]:
            context = (f"--context {shlex.quote(entry['cluster'])} " if "cluster" in entry
                       else "")
            lines.append(f"kubectl {context}apply --prune -l {selector} {kinds} "
                         f"-f {shlex.quote('kueue/' + entry['file'])}")
    if "json" in exports:
        lines.append("# json/executor-view.json is read by the executor; nothing to apply")
    if len(lines) == 4:
        lines.append("# no exports (planner cycle --export slurm,kueue,json): nothing to apply")
    return "\n".join(lines) + "\n"


def cycle_files(run: PlanRun, previous: dict | None, previous_name: str | None,
                targets: list[str], model: ModelConfig,
                demand: dict[tuple[str, str], float],
                pending: dict[tuple[str, str], int] | None = None,
                inputs: dict[str, bytes] | None = None
                ) -> dict[str, dict[str, bytes]]:
    """Subfolder ('' for the top) → file name → bytes of one cycle's folder.

    ``pending``: the gangs waiting in Kueue (:func:`pending_gangs`), which the Kueue
    export's nominal quotas widen to. ``inputs``: the scenario's files as read (kept in
    ``inputs/``).
    """
    plan = run.plan.body
    org = run.problem.scenario.org
    budgets = run.problem.scenario.budgets
    exports = {t: export_files(plan, t, org, 1, previous if t == "slurm" else None,
                               budgets=budgets, pending=pending if t == "kueue" else None)
               for t in targets}
    record = {"scenario": plan["scenario"], "as_of": plan["as_of"],
              "previous": previous_name, "model": model.name, "exports": targets}
    changes = plan_changes(previous, plan, org, previous_name)
    top = {"plan.json": plan_bytes(run.plan), CHANGES_FILE: changes_bytes(changes),
           "summary.txt": summary_text(plan, org, demand).encode(),
           APPLY: apply_script(plan, exports).encode(),
           MANIFEST: (json.dumps(record, indent=1, ensure_ascii=False) + "\n").encode()}
    return {"": top, **exports, **({INPUTS: dict(inputs)} if inputs else {})}


def _same(folder: Path, files: dict[str, dict[str, bytes]]) -> bool:
    """Whether ``folder`` holds exactly ``files``."""
    wanted = {os.path.join(sub, name): data for sub, named in files.items()
              for name, data in named.items()}
    held = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
    return held == set(wanted) and all((folder / k).read_bytes() == v for k, v in wanted.items())


STATE_REMEDY = "fix the permissions of the state folder (--state) or free some space"


def _keep(state: Path, as_of: pd.Timestamp, files: dict[str, dict[str, bytes]]
          ) -> tuple[Path, bool]:
    """Write the cycle's folder completely, then rename it into ``plans/``.

    Returns the folder and whether an identical one was already kept (nothing written).
    """
    plans = state / PLANS
    plans.mkdir(parents=True, exist_ok=True)
    base = stamp(as_of)
    candidates = [plans / base, *sorted(plans.glob(f"{base}-*"),
                                        key=lambda p: int(p.name.rsplit("-", 1)[1])
                                        if p.name.rsplit("-", 1)[1].isdigit() else 0)]
    for folder in candidates:
        if folder.is_dir() and _same(folder, files):
            return folder, True
    staging = plans / f".{base}.{os.getpid()}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        for sub, named in files.items():
            write_files(staging / sub if sub else staging, named, STATE_REMEDY)
        n = 1
        while True:
            target = plans / (base if n == 1 else f"{base}-{n}")
            if not os.path.lexists(target):
                break
            n += 1
        _system(lambda: os.rename(staging, target), target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target, False


def _system(call: Callable[[], None], where: Path) -> None:
    """Run a rename or link of the state; a refusal by the system is an :class:`InputError`."""
    try:
        call()
    except OSError as error:
        raise InputError([InputProblem(str(where), None, None,
                                       f"cannot write ({error.strerror or error}); "
                                       f"{STATE_REMEDY}")]) from None


def make_current(state: Path, folder: Path, as_of: pd.Timestamp) -> None:
    """Point ``DIR/current`` at ``folder`` (relative link, swapped in one rename).

    Never backwards: a plan in force made as of a later time than ``as_of`` stays, and
    this is an :class:`InputError` (the cycle's folder is kept in ``plans/``).
    """
    held = current_folder(state)
    if held is not None and as_of_of(held) > as_of:
        raise InputError([InputProblem(
            str(state / CURRENT), None, None,
            f"the plan in force ({held.name}) was made as of {iso(as_of_of(held))}, later than "
            f"this cycle's {iso(as_of)}: current never moves back; {folder} is kept in "
            f"{PLANS}/ (plan as of {iso(as_of_of(held))} or later)")])
    tmp = state / f".{CURRENT}.{os.getpid()}.tmp"
    _system(lambda: tmp.unlink(missing_ok=True), tmp)
    _system(lambda: os.symlink(os.path.relpath(folder, state), tmp), tmp)
    _system(lambda: os.replace(tmp, state / CURRENT), state / CURRENT)


def state_folder(state: Path) -> None:
    """Make sure ``state`` is a folder this process may write (made if missing).

    ``--state`` naming a file, or a folder that cannot be written (read-only, no
    permission), is an :class:`InputError` before anything is read or written.
    """
    if os.path.lexists(state) and not state.is_dir():
        raise InputError([InputProblem(str(state), None, None,
                                       "is not a folder; --state names the folder of the plan "
                                       "history (made if missing)")])
    try:
        (state / PLANS).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError([InputProblem(str(state), None, None,
                                       f"cannot be made ({error.strerror}); {STATE_REMEDY}")]
                         ) from None
    for folder in (state, state / PLANS):
        if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
            raise InputError([InputProblem(str(folder), None, None,
                                           f"cannot be written; {STATE_REMEDY}")])


def _clean_stale(state: Path) -> None:
    """Remove what a killed cycle left half-way: ``plans/.<as_of>.<pid>.tmp/``, links.

    Called under the state's lock: no other cycle is writing, so every such name is stale.
    """
    for tmp in (state / PLANS).glob(".*.tmp"):
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)
    for tmp in state.glob(f".{CURRENT}.*.tmp"):
        tmp.unlink(missing_ok=True)


def run_cycle(scenario_dir: Path, state: Path, model: ModelConfig, *,
              as_of: str | None = None, source: tuple[str, Path] | None = None,
              targets: list[str] | tuple[str, ...] = (), apply: bool = False,
              now: Callable[[], pd.Timestamp] = lambda: pd.Timestamp.now(tz="UTC"),
              progress: Callable[[str], None] | None = None,
              queue: tuple[str, Path] | None = None) -> CycleResult:
    """One planning cycle into ``state`` (:func:`plan_cycle`), recorded in ``cycles.jsonl``.

    The record (:func:`log_run`) is written whether the cycle succeeded or failed, once the
    state folder exists; the error is raised on.
    """
    started = time.time()
    cpu = time.process_time()
    try:
        result = plan_cycle(scenario_dir, state, model, as_of=as_of, source=source,
                            targets=targets, apply=apply, now=now, progress=progress,
                            queue=queue)
    except (InputError, ApplyError, SolverError) as error:
        log_run(Path(state), started, cpu, None, error)
        raise
    log_run(Path(state), started, cpu, result, None)
    return result


def log_run(state: Path, started: float, cpu: float, result: CycleResult | None,
            error: Exception | None) -> None:
    """Append one line to ``DIR/cycles.jsonl`` (nothing when ``state`` does not exist).

    Fields: ``started`` and ``finished`` (UTC, ISO 8601), ``seconds`` (wall) and
    ``cpu_seconds`` of the run, ``status`` (``succeeded`` or ``failed``), ``as_of``,
    ``folder`` (the plan's folder name), ``unchanged``, ``applied``, ``warnings``,
    ``error`` (the first lines of what failed).
    """
    if not state.is_dir():
        return
    finished = time.time()
    record: dict[str, Any] = {
        "started": iso(pd.Timestamp(started, unit="s", tz="UTC").floor("s")),
        "finished": iso(pd.Timestamp(finished, unit="s", tz="UTC").floor("s")),
        "seconds": round(finished - started, 3),
        "cpu_seconds": round(time.process_time() - cpu, 3),
        "status": "succeeded" if error is None else "failed"}
    if result is not None:
        record.update(as_of=iso(result.as_of), folder=result.folder.name,
                      unchanged=result.unchanged, applied=result.applied,
                      warnings=list(result.warnings))
    else:
        text = "; ".join(str(p) for p in error.problems) if isinstance(error, InputError) \
            else str(error)
        record["error"] = text[:2000]
    line = (json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n").encode()
    fd = os.open(state / LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)  # one write of one line: appends do not interleave
    finally:
        os.close(fd)


def read_log(state: Path) -> list[dict[str, Any]]:
    """The records of ``DIR/cycles.jsonl``, oldest first (lines that do not parse skipped)."""
    path = state / LOG
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


def cycle_inputs(folder: Path) -> tuple[Scenario, pd.DataFrame] | None:
    """A kept cycle's scenario and ``unbudgeted.csv`` (its ``inputs/``), from one read.

    ``None`` for a folder kept before cycles kept their inputs. The scenario is the one
    the plan was made from, at the plan's ``as_of``; the rows as
    :func:`~planner.inputs.load.load_unbudgeted` gives them (none: the cycle kept no such
    file); raises :class:`InputError` when either does not load.
    """
    source = _kept_source(folder)
    if source is None:
        return None
    scenario, unbudgeted = load_scenario_and_unbudgeted(source)
    return _at_plan_as_of(folder, scenario), unbudgeted


def _kept_source(folder: Path) -> Path | None:
    """The kept cycle's ``inputs/`` folder, or the workbook in it; None: none kept."""
    inputs = folder / INPUTS
    if not inputs.is_dir():
        return None
    books = sorted(inputs.glob("*.xlsx"))
    return books[0] if books and not (inputs / "scenario.toml").exists() else inputs


def _at_plan_as_of(folder: Path, scenario: Scenario) -> Scenario:
    plan = json.loads((folder / "plan.json").read_text(encoding="utf-8"))
    return scenario.with_as_of(pd.Timestamp(plan["as_of"]))


def plan_cycle(scenario_dir: Path, state: Path, model: ModelConfig, *,
               as_of: str | None = None, source: tuple[str, Path] | None = None,
               targets: list[str] | tuple[str, ...] = (), apply: bool = False,
               now: Callable[[], pd.Timestamp] = lambda: pd.Timestamp.now(tz="UTC"),
               progress: Callable[[str], None] | None = None,
               queue: tuple[str, Path] | None = None) -> CycleResult:
    """One planning cycle into ``state``; ``current`` moves only when every step succeeded.

    Raises :class:`InputError` (bad input, a conflict with the previous plan, another
    cycle running on ``state``), :class:`SolverError` (no valid plan) or
    :class:`ApplyError`. ``as_of`` defaults to ``now()`` floored to the period grid (the
    only clock read). ``source``: ("sacct" | "kueue", accounting file) ingested into the
    scenario's ``usage.csv`` first, its running jobs counted up to ``as_of``; a Kueue
    file's pending gangs also widen the Kueue export's nominal quotas (rule 6 of the
    executor contract, :func:`planner.ingest.pending.pending_gangs`). ``queue``:
    ("squeue" | "kueue", file) whose jobs become ``demand.csv``
    (:func:`planner.ingest.queue.ingest_demand`), after the usage ingest, the jobs
    ``planner tick`` moved counted as their projects'. The solve is work-limited
    (``solver.limits = "work"``) unless ``model`` says ``"time"``: the same inputs give
    the same plan whatever the machine's load.

    The whole cycle holds the state's lock (:func:`planner.locks.hold`): a second cycle on
    the same ``state`` is refused at once, naming the one running; what a killed cycle
    left half-way is cleaned up first.
    """
    if not model.solver.limits:  # a cycle's plan must not depend on the machine's load
        model = with_limits(model, "work")
    state = Path(state)
    state_folder(state)
    with hold(state, "a planning cycle"):
        _clean_stale(state)
        return _cycle(Path(scenario_dir), state, model, as_of, source, list(targets), apply,
                      now, progress or (lambda _msg: None), queue)


def _cycle(scenario_dir: Path, state: Path, model: ModelConfig, as_of: str | None,
           source: tuple[str, Path] | None, targets: list[str], apply: bool,
           now: Callable[[], pd.Timestamp], step: Callable[[str], None],
           queue: tuple[str, Path] | None) -> CycleResult:
    """The cycle's steps (:func:`plan_cycle`, which holds the state's lock around them)."""
    scenario, inputs = load_scenario_and_files(scenario_dir, unbudgeted=True)
    stamp_at = (parse_as_of(as_of, scenario) if as_of is not None
                else parse_as_of(iso(floor_to_grid(now(), scenario)), scenario))
    ingest_lines: tuple[str, ...] = ()
    gangs = None
    if source is not None and source[0] == "kueue" and "kueue" in targets:
        # read before the ingest writes anything: a file it refuses stops the cycle whole
        gangs, problems = pending_gangs(Path(source[1]), scenario.clusters.to_dict("records"),
                                        scenario.tree.leaves, allowed_clusters(scenario.budgets))
        if problems:
            raise InputError(problems)
    written: tuple[str, ...] = ()
    warnings: list[str] = []
    moved = moved_jobs(state)
    window = model.lookback.window_days
    if queue is not None:  # read (and refused) before any ingest writes anything
        ingest_demand(scenario_dir, queue[0], queue[1], now=stamp_at, dry_run=True,
                      moved=moved, window_days=window)
    if source is not None:
        from planner.ingest import ingest_usage

        step(f"ingesting {source[1]}")
        report = ingest_usage(scenario_dir, source[0], source[1], now=stamp_at)
        ingest_lines = tuple(report.lines()) + tuple(gangs.lines() if gangs is not None else ())
        written = (report.ledger,) if report.written else ()
        if report.unbudgeted_written:
            written += (str(Path(scenario_dir) / UNBUDGETED_FILE),)
    if queue is not None:
        step(f"deriving demand from {queue[1]}")
        demand = ingest_demand(scenario_dir, queue[0], queue[1], now=stamp_at, moved=moved,
                               window_days=window)
        ingest_lines += tuple(demand.lines())
        written += (demand.target,) if demand.written else ()
    elif (origin := demand_origin(scenario_dir, now())) is not None:
        warnings.append(origin)
    if source is not None or queue is not None:  # the ingests wrote: plan from what they wrote
        scenario, inputs = load_scenario_and_files(scenario_dir, unbudgeted=True)
    try:
        return _plan_and_keep(scenario.with_as_of(stamp_at), state, model, targets, apply, step,
                              gangs, ingest_lines, inputs, warnings)
    except (InputError, SolverError, ApplyError) as error:
        error.written = written  # the ingest stays: said, not "nothing written"
        raise


def _plan_and_keep(scenario: Scenario, state: Path, model: ModelConfig, targets: list[str],
                   apply: bool, step: Callable[[str], None], gangs: PendingGangs | None,
                   ingest_lines: tuple[str, ...], inputs: dict[str, bytes],
                   warnings: list[str]) -> CycleResult:
    """Plan from the previous plan, keep the folder, apply, move ``current``."""
    stamp_at = scenario.config.as_of
    previous_dir = _previous_folder(state, stamp_at)
    previous = None
    if previous_dir is not None:
        label = str(previous_dir / "plan.json")
        previous = load_previous(previous_dir / "plan.json")
        afresh = AFRESH.format(current=state / CURRENT)
        problems = previous_conflicts(previous, label, scenario, afresh=afresh)
        if "slurm" in targets:
            problems += export_problems(previous, label, scenario.org)
        if problems:
            raise InputError(problems)
        stale = stale_usage(previous, scenario)
        if stale:
            warnings.append(stale)
    step("planning")
    run = plan_scenario(scenario, model, previous, step)
    files = cycle_files(run, previous, previous_dir.name if previous_dir else None, targets,
                        model, demand_by_cell(run), gangs.widest if gangs is not None else None,
                        inputs)
    step("writing the cycle")
    folder, unchanged = _keep(state, stamp_at, files)
    applied = False
    if apply:
        step(f"running {folder / APPLY}")
        done = subprocess.run([str(folder / APPLY)], check=False)
        if done.returncode != 0:
            raise ApplyError(folder, done.returncode)
        applied = True
    make_current(state, folder, stamp_at)
    changes = json.loads(files[""][CHANGES_FILE])
    return CycleResult(stamp_at, folder, previous_dir, unchanged, ingest_lines,
                       tuple(warnings), applied, tuple(change_lines(changes)))


class ApplyError(Exception):
    """``apply.sh`` failed: the plan is kept in the history but is not made current."""

    written: tuple[str, ...] = ()  # files the cycle changed before failing (its ingest)

    def __init__(self, folder: Path, code: int):
        self.folder, self.code = folder, code
        super().__init__(f"{folder / APPLY} exited {code}: the plan is kept in {folder} but "
                         "not made current; fix the executor, then run the cycle again (or "
                         f"run {folder / APPLY} by hand and point current at it)")
