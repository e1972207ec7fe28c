"""``run_tick``: one ``planner tick`` on a state folder — read, decide (:mod:`planner.tick`), act.

Reading: the plan in force (``DIR/current``: ``plan.json`` and ``cycle.json``, whose
``exports`` say which executors the cycle applied) and the queue, by running the
executor's commands (:data:`SQUEUE`, :data:`ASSOC_MGR`, :data:`KUBECTL_WORKLOADS`) or
from saved files. Deciding: :func:`planner.tick.slurm_moves`,
:func:`planner.tick.late_step`. Acting (not with ``dry_run``): ``scontrol update`` per
move, ``kubectl apply`` of the widened manifest set (kept as ``DIR/tick/<set>.yaml``, so
the next tick widens on top of it until the next cycle's set replaces it); the record
``DIR/tick.json`` (jobs moved, the set in force) written atomically. The whole tick holds
the state folder's lock (:func:`planner.locks.hold`), as ``planner cycle`` does: a tick
while a cycle runs exits 2 naming it.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from planner.contract import cluster_rates
from planner.errors import InputError, InputProblem
from planner.exporters.slurm import SHIPPED as SLURM_SHIPPED
from planner.exporters.slurm import account, budget_minutes, qos_name
from planner.ingest.squeue import COMMAND as SQUEUE_COMMAND
from planner.ingest.squeue import parse_squeue_text
from planner.inputs import Scenario
from planner.inputs.load import unbudgeted_of
from planner.locks import hold
from planner.plan.write import write_files
from planner.tick import (
    TICK_FILE,
    Move,
    late_step,
    moved_after,
    parked_after,
    parse_assoc_mgr,
    read_tick_record,
    slurm_moves,
)

SQUEUE = tuple(shlex.split(SQUEUE_COMMAND))
ASSOC_MGR = ("scontrol", "show", "assoc_mgr", "flags=qos")
KUBECTL_WORKLOADS = ("kubectl", "get", "workloads", "-A", "-o", "json")
TICK_DIR = "tick"

Runner = Callable[[Sequence[str]], subprocess.CompletedProcess]


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=120)


@dataclass(frozen=True)
class TickResult:
    """What one tick saw and did."""

    lines: tuple[str, ...]
    moves: tuple[Move, ...] = ()
    late: tuple[tuple[str, str, int], ...] = ()
    failed: tuple[str, ...] = ()  # moves or applies the executor refused
    dry_run: bool = False


def _read(file: Path | None, argv: Sequence[str], runner: Runner, what: str) -> tuple[str, str]:
    """The text of a saved file, or of a command's output; and its label for problems."""
    if file is not None:
        if not file.is_file():
            raise InputError([InputProblem(str(file), None, None, f"no such file ({what})")])
        return file.read_text(encoding="utf-8", errors="replace"), file.name
    try:
        done = runner(argv)
    except (OSError, subprocess.SubprocessError) as error:
        raise InputError([InputProblem(argv[0], None, None, f"cannot run "
                                       f"`{shlex.join(argv)}` ({what}): {error}")]) from None
    if done.returncode != 0:
        raise InputError([InputProblem(argv[0], None, None, f"`{shlex.join(argv)}` exited "
                                       f"{done.returncode}: {(done.stderr or '').strip()[:300]}")])
    return done.stdout, argv[0]


@dataclass
class _SlurmStep:
    """What the tick read from Slurm and decided."""

    queue: list
    moves: list[Move]
    moved: dict[str, str]
    parked: dict[str, str]
    overdrawn: frozenset[str]


def _slurm(plan: dict[str, Any], record: dict[str, Any], squeue: Path | None,
           qos: Path | None, runner: Runner, spent: Mapping[str, float]) -> _SlurmStep:
    """Read the queue and the budget QOS's use; decide the moves (nothing run yet).

    ``spent``: project -> NGH it ran on no budget by the plan's ``as_of`` (:func:`_kept`).
    """
    text, label = _read(squeue, SQUEUE, runner, "the Slurm queue")
    jobs, problems = parse_squeue_text(label, text)
    usage_text, usage_label = _read(qos, ASSOC_MGR, runner, "the budget QOS's usage")
    use, more = parse_assoc_mgr(usage_label, usage_text)
    if problems or more:
        raise InputError(problems + more)
    budget_of = {account(p): qos_name(p) for p in budget_minutes(plan)}
    moved = {str(k): str(v) for k, v in record.get("moved", {}).items()}
    parked = {str(k): str(v) for k, v in record.get("overdrawn", {}).items()}
    paces = SLURM_SHIPPED.overdrawn_paces(plan, spent)  # every overdrawn account, its pace
    over = frozenset(paces)  # SLURM_SHIPPED.overdrawn_accounts, without a second reading
    return _SlurmStep(jobs, slurm_moves(jobs, budget_of, use, moved, over, parked, paces,
                                        cluster_rates(plan)), moved, parked, over)


def _kueue_sets(state: Path, current: Path, record: dict[str, Any]
                ) -> list[tuple[Path, str, str | None]]:
    """The manifest sets in force: (path, name, cluster of a per-cluster set or None).

    Each is the tick's widened copy where it made one for this cycle, else the cycle's.
    """
    index = yaml.safe_load((current / "kueue" / "index.yaml").read_text(encoding="utf-8"))
    kept = record.get("kueue", {})
    mine = set(kept.get("files", [])) if kept.get("cycle") == current.name else set()
    out = []
    for entry in index["periods"]:
        name = entry["file"]
        widened = state / TICK_DIR / name
        path = widened if name in mine and widened.is_file() else current / "kueue" / name
        out.append((path, name, entry.get("cluster")))
    return out


@dataclass
class _KueueStep:
    """What the tick read from Kueue and decided: per set in force, the gangs it served."""

    widest: dict
    sets: list[tuple[Path, str, str | None, list, list[tuple[str, str, int]]]]

    @property
    def served(self) -> list[tuple[str, str, int]]:
        """Every gang served, in every set."""
        return [g for *_, served in self.sets for g in served]


def _kept(current: Path, plan: dict[str, Any], exports: Sequence[str]
          ) -> tuple[Scenario | None, dict[str, float]]:
    """What the tick reads of the inputs the cycle kept (``inputs/``), at most one read.

    The scenario the plan was made from, at its ``as_of`` (for Kueue: the tick checks the
    set in force against the plan's export of it; else None, and not read), and project ->
    NGH it ran on no budget by then (``unbudgeted.csv``, rule 8 under Slurm): with the
    scenario (:func:`~planner.cycle.cycle_inputs`), or alone when only Slurm needs it
    (:func:`~planner.inputs.load.unbudgeted_of`: no read without the file). None and
    nothing: a cycle kept before cycles kept their inputs.
    """
    from planner.contract import unbudgeted_ngh
    from planner.cycle import cycle_inputs

    if "kueue" in exports:
        kept = cycle_inputs(current)
        return (None, {}) if kept is None else (kept[0], unbudgeted_ngh(plan, kept[1]))
    return None, unbudgeted_of(current / "inputs", plan) if "slurm" in exports else {}


def _kueue(state: Path, current: Path, plan: dict[str, Any], record: dict[str, Any],
           workloads: Path | None, runner: Runner, scenario: Scenario | None) -> _KueueStep:
    """Read the Workloads and the set in force; rule 7 on a copy of it (nothing applied).

    ``scenario``: the one the plan was made from (:func:`_kept`; None: none kept).
    """
    import tempfile

    from planner.exporters.kueue import allowed_clusters
    from planner.exporters.set_in_force import read_set
    from planner.ingest.pending import pending_gangs

    # the set in force is checked against the plan's own export (object for object), made
    # from the scenario the plan was made from: the one the cycle kept in inputs/
    if scenario is None:
        raise InputError([InputProblem(
            str(current / "inputs"), None, None,
            "no such folder: this plan was kept before cycles kept their inputs, and the "
            "tick checks the Kueue set in force against the plan's export, made from them; "
            "run planner cycle again")])
    allowed, projects = allowed_clusters(scenario.budgets), list(scenario.tree.leaves)
    with tempfile.TemporaryDirectory(prefix="planner-tick-") as tmp:
        source = workloads
        if source is None:
            text, _ = _read(None, KUBECTL_WORKLOADS, runner, "the Kueue Workloads")
            source = Path(tmp) / "workloads.json"
            source.write_text(text, encoding="utf-8")
        gangs, problems = pending_gangs(source, plan["clusters"], projects, allowed)
    sets = []
    for path, name, cluster in _kueue_sets(state, current, record):
        objects, more = read_set(path, plan, scenario.org, allowed)
        problems += more
        if not more:
            sets.append((path, name, cluster, objects, late_step(plan, objects, gangs.widest)))
    if problems:
        raise InputError(problems)
    return _KueueStep(gangs.widest, sets)


def run_tick(state: Path, *, squeue: Path | None = None, qos: Path | None = None,
             workloads: Path | None = None, dry_run: bool = False,
             runner: Runner = _run) -> TickResult:
    """One tick on the state folder ``state`` (see the module docstring).

    ``squeue``, ``qos``, ``workloads``: saved outputs of :data:`SQUEUE`, :data:`ASSOC_MGR`
    and :data:`KUBECTL_WORKLOADS` to read instead of running them. ``runner`` runs the
    commands (argv, no shell). Raises :class:`~planner.errors.InputError` (bad input, the
    lock held, a command that cannot run); nothing is changed then.
    """
    from planner.cycle import current_folder, manifest

    state = Path(state)
    if not state.is_dir():
        raise InputError([InputProblem(str(state), None, None,
                                       "no such state folder; run planner cycle first")])
    with hold(state, "a planning cycle"):
        current = current_folder(state)
        if current is None:
            return TickResult(("no plan in force (no planner cycle has run): nothing to do",),
                              dry_run=dry_run)
        cycle = manifest(current)
        plan = json.loads((current / "plan.json").read_text(encoding="utf-8"))
        record = read_tick_record(state)
        lines = [f"plan in force: {current.name} (as of {plan['as_of']})"]
        exports = cycle.get("exports", [])
        # read everything and decide first: a file or command that fails changes nothing
        scenario, spent = _kept(current, plan, exports)
        slurm = (_slurm(plan, record, squeue, qos, runner, spent) if "slurm" in exports
                 else None)
        kueue = (_kueue(state, current, plan, record, workloads, runner, scenario)
                 if "kueue" in exports else None)
        moves: list[Move] = []
        failed: list[str] = []
        if slurm is not None:
            lines.append(f"slurm: {len(slurm.queue)} jobs queued, {len(slurm.moves)} to move")
            if slurm.overdrawn:
                lines.append("  overdrawn (rule 8): " + ", ".join(
                    shlex.quote(a) for a in sorted(slurm.overdrawn)))
            for move in slurm.moves:
                lines.append(f"  {move.command()}  # job of {move.account}: {move.why}")
                if dry_run:
                    continue
                result = runner(move.argv())
                if result.returncode == 0:
                    moves.append(move)
                else:
                    failed.append(f"{move.command()}: {(result.stderr or '').strip()[:200]}")
            done = slurm.moves if dry_run else moves
            record["moved"] = moved_after(slurm.moved, done, slurm.queue)
            parked = parked_after(slurm.parked, done, slurm.queue)
            if parked or "overdrawn" in record:
                record["overdrawn"] = parked
            if dry_run:
                moves = list(slurm.moves)
        late: list[tuple[str, str, int]] = []
        if kueue is not None:
            late = kueue.served
            lines.append(f"kueue: {len(kueue.widest)} (project, cluster) with a gang "
                         f"pending, {len(late)} served late (rule 7)")
            lines += [f"  late: {p!r} on {c!r}, nominal quota {g} GPUs" for p, c, g in late]
            applied = set(record.get("kueue", {}).get("files", [])) if record.get(
                "kueue", {}).get("cycle") == current.name else set()
            for _path, name, cluster, objects, served in kueue.sets:
                if not served or dry_run:
                    continue
                from planner.exporters.kueue import set_text

                write_files(state / TICK_DIR, {name: set_text(objects).encode()})
                context = ["--context", cluster] if cluster is not None else []
                argv = ["kubectl", *context, "apply", "-f", str(state / TICK_DIR / name)]
                lines.append(f"  {shlex.join(argv)}")
                result = runner(argv)
                if result.returncode != 0:  # the next tick starts from the cycle's set again
                    failed.append(f"{shlex.join(argv)}: {(result.stderr or '').strip()[:200]}")
                    applied.discard(name)
                else:
                    applied.add(name)
            record["kueue"] = {"cycle": current.name, "files": sorted(applied)}
        if slurm is None and kueue is None:
            lines.append("the plan in force exports to neither Slurm nor Kueue: nothing to do")
        if not dry_run:
            write_files(state, {TICK_FILE: (json.dumps(record, indent=1, sort_keys=True)
                                            + "\n").encode("utf-8")})
        else:
            lines.append("dry run: nothing changed")
    return TickResult(tuple(lines), tuple(moves), tuple(late), tuple(failed), dry_run)
