"""The planning run: reservations (HiGHS MIP), fair-share targets, elastic LP (HiGHS).

Why split: a time-indexed joint MIP with fractional reservation starts has a weak
LP relaxation (1.7 % gap after 120 s on a sample-sized model). Reservations are
placed exactly by a time-indexed MIP without elastic columns, solved by HiGHS per
independent part of the clusters (:mod:`planner.model.reservations`), and the
elastic GPU-hours, continuous given the reservations, by an LP that HiGHS solves to
optimality. :mod:`planner.model.joint` builds the joint model for small instances;
the tests measure what the split loses against it.
"""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from planner.errors import SolverError
from planner.fairshare.targets import fair_share_targets_at
from planner.model.backends import DEFAULT_SOLVER, MatrixResult
from planner.model.elastic import (
    ElasticModel,
    Readback,
    build_elastic_model,
    elastic_triples,
    read_result,
    solve_elastic_model,
    split_triples,
)
from planner.model.lp_worker import start_worker
from planner.model.problem import Problem
from planner.model.reservations import (
    ReservationModel,
    WorkLimits,
    build_reservation_model,
    fixed_ngh,
    fixed_nodes,
    improve_reservation_model,
    solve_reservation_model,
)
from planner.model.result import CellValues, Solution, SolverStatus, StageResult, relative_gap


def reserved_load(problem: Problem, placed: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """Reserved GPU-hours per (k, t) and reserved NGH per (p, t), placed and kept."""
    n_projects, n_clusters, n_periods = problem.shape
    gpu_hours = fixed_nodes(problem) * problem.gpus_per_node[:, None] * problem.hours[None, :]
    ngh = np.zeros((n_projects, n_periods))
    for f in problem.fixed:
        for t in range(n_periods):
            lo = max(f.start, problem.period_start[t])
            hi = min(f.end, problem.period_end[t])
            if hi > lo:
                ngh[f.project, t] += (f.nodes * problem.gpus_per_node[f.cluster]
                                      * (hi - lo).total_seconds() / 3600 * problem.rate[f.cluster])
    for r in problem.requests:
        if r.request_id not in placed:
            continue
        span = slice(placed[r.request_id], placed[r.request_id] + r.length)
        block = r.nodes * problem.gpus_per_node[r.cluster] * problem.hours[span]
        gpu_hours[r.cluster, span] += block
        ngh[r.project, span] += block * problem.rate[r.cluster]
    return gpu_hours, ngh


def budget_headroom(problem: Problem) -> np.ndarray:
    """H_p before new reservations: budget − usage − kept reservations (NGH)."""
    return problem.budget - problem.used - fixed_ngh(problem)


def elastic_inputs(problem: Problem, placed: dict[str, int]
                   ) -> tuple[np.ndarray, np.ndarray, CellValues]:
    """What stage 2 needs once reservations are placed: A_kt, H_p and the targets τ.

    A_kt is the capacity reservations (kept and placed) leave, in GPU-hours; H_p what
    usage and all reservations leave of the budget (NGH); τ the fair-share targets in
    GPU-hours (computed in NGH, then divided by the cluster's rate), kept at the cells
    with demand only (zero elsewhere): no (P, K, T) array is made for them.
    """
    reserved_gpu_hours, reserved_ngh = reserved_load(problem, placed)
    available = np.maximum(problem.cap - reserved_gpu_hours, 0.0)
    headroom = np.maximum(problem.budget - problem.used - reserved_ngh.sum(axis=1), 0.0)
    rate = problem.rate
    e = elastic_triples(problem)
    targets_ngh = fair_share_targets_at(problem.tree, available * rate[:, None], e,
                                        problem.dem[e] * rate[e[1]], problem.shape, headroom,
                                        problem.past, reserved_ngh, problem.lookback,
                                        problem.positions)
    return available, headroom, CellValues.at(problem.shape, e, targets_ngh / rate[e[1]])


def solve(problem: Problem, on_built: Callable[[ElasticModel], None] | None = None) -> Solution:
    """Plan: place reservations, compute targets, allocate elastic GPU-hours.

    ``on_built`` is handed the built elastic LP before it is solved (``--write-model``).
    The LP goes to ``problem.model.solver.lp_solver``; reservations are HiGHS's always.
    """
    started = time.perf_counter()
    groups = split_triples(problem, elastic_triples(problem))
    # started now, so that its start-up overlaps the reservation stage
    helper = LpHelper.start() if wants_helper(problem, groups) else None
    try:
        return _solve(problem, groups, helper, started, on_built)
    finally:
        if helper is not None:
            helper.close()


#: The work limits of ``solver.limits = "work"`` (the default of ``planner cycle``).
WORK_LIMITS = WorkLimits()


def _solve(problem: Problem, groups: list, helper: LpHelper | None, started: float,
           on_built: Callable[[ElasticModel], None] | None) -> Solution:
    opts = problem.model.solver
    work = WORK_LIMITS if opts.limits == "work" else None
    deadline = started + opts.time_limit_seconds
    tick = time.perf_counter()
    reservation_model = build_reservation_model(problem, budget_headroom(problem))
    build = time.perf_counter() - tick
    # the stage's share of the limit covers building its parts and warm starts too, so
    # that the elastic LP keeps the rest (on a loaded machine the build takes seconds)
    share = opts.time_limit_seconds * opts.reservation_time_share
    placed, stage1 = solve_reservation_model(
        reservation_model, max(1.0, share - (time.perf_counter() - started)), opts.mip_gap,
        opts.threads, opts.random_seed, work=work)
    if stage1.status not in (SolverStatus.OPTIMAL, SolverStatus.FEASIBLE):
        raise SolverError(f"reservation placement found no valid plan ({stage1.status})")
    tick = time.perf_counter()
    if work is not None:  # the LP solves to its end: its limit is a guard from its start
        deadline = tick + work.guard_seconds
    elastic = _elastic(problem, groups, placed, helper, deadline, on_built)
    lp_seconds = time.perf_counter() - tick
    build += elastic.build
    if elastic.stage.status not in (SolverStatus.OPTIMAL, SolverStatus.FEASIBLE):
        raise SolverError(f"the elastic allocation LP ended {elastic.stage.status}; "
                          f"no plan written{_time_hint(problem, elastic.stage.status)}")
    second = _second_pass(problem, groups, reservation_model, stage1, lp_seconds, deadline,
                          on_built)
    if second is not None:
        placed, stage1, elastic, second_build = second
        build += second_build
    total = time.perf_counter() - started
    return Solution(placed, _cell_values(problem, elastic.cells, elastic.guaranteed),
                    _cell_values(problem, elastic.cells, elastic.opportunistic), elastic.targets,
                    elastic.duals, (stage1, elastic.stage), build, total - build,
                    limits_record(problem, reservation_model, stage1))


#: From how many periods a uniform grid is named as the likely cause of a run out of time.
MANY_PERIODS = 24 * 14


def _time_hint(problem: Problem, status: SolverStatus) -> str:
    """What to do when the LP ran out of time: a mixed grid, more time, work limits."""
    if status is not SolverStatus.TIME_LIMIT:
        return ""
    opts = problem.model.solver
    hint = (f" (its limit is {opts.time_limit_seconds:g} s of wall-clock time, which a "
            "loaded machine shortens: raise --time-limit, or plan with --limits work, "
            "which solves the LP to its end")
    periods = problem.shape[2]
    if not opts.period_grid and periods > MANY_PERIODS:
        ph = problem.scenario.config.period_hours
        coarse = ph * math.ceil(24.0 / ph - 1e-9)  # a day, or the next multiple of ph
        hint += (f"; the uniform grid of {ph:g} h gives {periods} periods: a mixed grid "
                 f"keeps that resolution near as_of only, e.g. solver.period_grid = "
                 f"\"{ph:g}h*48, {coarse:g}h\" in the model")
    return hint + ")"


def limits_record(problem: Problem, built: ReservationModel, stage: StageResult
                  ) -> dict | None:
    """What stopped the solve, for ``plan.json`` (``solver.limits``), or ``None``.

    Work limits: ``{"mode": "work", "workers": …, "parts": …, "part": {the counts},
    "guarded": parts stopped by their wall-clock guard}``, always. Time limits: ``{"mode":
    "time", "workers": …, "parts": …, "time_limit_seconds": …, "reservation_time_share":
    …}`` only when the reservation stage ended above ``mip_gap`` (a part stopped by its
    time: the plan may then depend on the machine's load); a closed stage is the same
    whatever the load, and its plan carries no record (as before there was one).
    """
    opts = problem.model.solver
    common = {"workers": built.workers, "parts": len(built.parts)}
    if built.work is not None:
        return {"mode": "work", **common, "part": built.work.record(),
                "guarded": built.guarded}
    if stage.gap <= opts.mip_gap:
        return None
    return {"mode": "time", **common, "time_limit_seconds": opts.time_limit_seconds,
            "reservation_time_share": opts.reservation_time_share}


#: The second pass of the reservation stage (:func:`_second_pass`) runs only when the
#: time the elastic LP leaves is at least this many seconds after the re-solve's reserve.
SECOND_PASS_MIN_SECONDS = 2.0
#: The re-solve's reserve: this many times what the first elastic LP took (building and
#: solving), plus :data:`SECOND_PASS_MARGIN` seconds.
SECOND_PASS_LP_FACTOR = 2.0
SECOND_PASS_MARGIN = 1.0


def _second_pass(problem: Problem, groups: list, reservation_model: ReservationModel,
                 stage1: StageResult, lp_seconds: float, deadline: float,
                 on_built: Callable[[ElasticModel], None] | None
                 ) -> tuple[dict[str, int], StageResult, Elastic, float] | None:
    """The time the elastic LP leaves, given back to the reservation parts left open.

    The reservation stage gets ``reservation_time_share`` of the limit up front, since
    the elastic LP's time is not known before it runs (under load it has needed 17 s at
    10× daily). Once a plan stands, when the stage is not closed (gap above ``mip_gap``)
    and the limit leaves more than :data:`SECOND_PASS_MIN_SECONDS` beyond a reserve for
    solving the LP again (:data:`SECOND_PASS_LP_FACTOR` × ``lp_seconds`` +
    :data:`SECOND_PASS_MARGIN`), the open parts go on from their placements in that time
    (:func:`improve_reservation_model`) and, if the placement gained, the elastic LP is
    solved again for it. The new plan replaces the first only when that LP ends optimal
    or feasible; otherwise (it ran out of time) the first plan stands, whole. Returns
    the new placement, stage outcomes and build seconds, or ``None`` (the first stands).
    With work limits (``solver.limits = "work"``) there is no second pass.
    """
    opts = problem.model.solver
    reserve = SECOND_PASS_LP_FACTOR * lp_seconds + SECOND_PASS_MARGIN
    time_left = deadline - time.perf_counter() - reserve
    if reservation_model.work is not None:
        # work limits: no time is left over to give back; the first pass's counts (its
        # cluster polish and swap search included) are the stage's whole work
        return None
    if stage1.gap <= opts.mip_gap or time_left < SECOND_PASS_MIN_SECONDS:
        return None
    placed, improved = improve_reservation_model(reservation_model, time_left, opts.mip_gap,
                                                 opts.threads, opts.random_seed)
    if improved.status not in (SolverStatus.OPTIMAL, SolverStatus.FEASIBLE) or not (
            improved.objective > stage1.objective):
        return None
    helper = LpHelper.start() if wants_helper(problem, groups) else None
    built: list[ElasticModel] = []  # handed on only if this plan replaces the first
    try:
        elastic = _elastic(problem, groups, placed, helper, deadline,
                           built.append if on_built is not None else None)
    finally:
        if helper is not None:
            helper.close()
    if elastic.stage.status not in (SolverStatus.OPTIMAL, SolverStatus.FEASIBLE):
        return None
    for model in built:  # the LP of the plan written (--write-model)
        on_built(model)
    return placed, improved, elastic, elastic.build


@dataclass
class Elastic:
    """Stage 2 for one placement: the cells solved, their grants, τ, duals and outcome."""

    cells: tuple[np.ndarray, np.ndarray, np.ndarray]
    guaranteed: np.ndarray
    opportunistic: np.ndarray
    targets: CellValues
    duals: np.ndarray
    stage: StageResult
    build: float  # seconds spent building


def _elastic(problem: Problem, groups: list, placed: dict[str, int],
             helper: LpHelper | None, deadline: float,
             on_built: Callable[[ElasticModel], None] | None) -> Elastic:
    """Stage 2 for a placement: A_kt, H_p and τ, then the elastic LP (whole or by group)."""
    tick = time.perf_counter()
    available, elastic_headroom, targets = elastic_inputs(problem, placed)
    if len(groups) <= 1:
        elastic_model = build_elastic_model(problem, available, elastic_headroom, targets)
        build = time.perf_counter() - tick
        if on_built is not None:
            on_built(elastic_model)
        remaining = max(1.0, deadline - time.perf_counter())
        guaranteed, opportunistic, duals, stage2 = solve_elastic_model(elastic_model, problem,
                                                                       remaining)
        return Elastic(elastic_model.e, guaranteed, opportunistic, targets, duals, stage2, build)
    build = time.perf_counter() - tick
    if on_built is not None:  # the whole LP, as written by --write-model
        on_built(build_elastic_model(problem, available, elastic_headroom, targets))
    cells, guaranteed, opportunistic, duals, stage2, group_build = _solve_groups(
        problem, groups, available, elastic_headroom, targets, deadline, helper)
    return Elastic(cells, guaranteed, opportunistic, targets, duals, stage2,
                   build + group_build)


def _cell_values(problem: Problem, cells: tuple[np.ndarray, np.ndarray, np.ndarray],
                 values: np.ndarray) -> CellValues:
    """The grants at ``cells`` (any order, each once), cleaned, as (P, K, T) cell values."""
    codes = np.ravel_multi_index(cells, problem.shape)
    order = np.argsort(codes, kind="stable")
    return CellValues(problem.shape, codes[order], _clean(values[order]))


#: From how many elastic triples on the LP's groups are shared with a second process
#: (:class:`LpHelper`): below it, starting the process costs more than it saves. The
#: sample has 4,600 (solved here alone), its 10× copy 50,000.
HELPER_MIN_TRIPLES = 20_000

#: Each helper's peak resident memory (MB, its ``VmHWM``), appended as helpers finish: for
#: benchmarks/one_run.py, which adds it to this process's peak.
HELPER_PEAKS_MB: list[float] = []


#: The environment variable that chooses: ``1`` always, ``0`` never; unset: only while a
#: core is free: a second process saves wall time only where a core is idle for it, and
#: on a busy machine pays its start-up for nothing (`benchmarks/bench.py` measures both).
#: Either way the plan is the same bytes.
HELPER_ENV = "PLANNER_LP_HELPER"


def core_is_free() -> bool:
    """Whether the 1-minute load average leaves about a core idle beside this process.

    Below ``cores - 0.5``: a machine that runs nothing but one planning process after
    another shows a load of about 1, which still leaves a core for the helper.
    """
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this platform: assume busy
        return False
    return cores >= 2 and load < cores - 0.5


def wants_helper(problem: Problem, groups: list) -> bool:
    """Whether to solve some groups in a second process.

    For a large LP of several groups solved by HiGHS with ``solver.threads`` ≥ 2, when
    ``PLANNER_LP_HELPER=1``, or when it is unset and a core is free (:func:`core_is_free`);
    ``PLANNER_LP_HELPER=0`` never. Which process solves a group changes no byte of the plan.
    """
    opts = problem.model.solver
    setting = os.environ.get(HELPER_ENV)
    wanted = setting == "1" or (setting is None and core_is_free())
    return (wanted and opts.lp_solver == DEFAULT_SOLVER
            and opts.threads >= 2 and len(groups) >= 2
            and sum(len(e[0]) for e in groups) >= HELPER_MIN_TRIPLES)


class LpHelper:
    """A second process (:mod:`planner.model.lp_worker`) that solves some LP groups.

    :meth:`start` launches it; :meth:`send` hands it matrix forms (written to its stdin
    by a thread, so the caller goes on at once); :meth:`results` reads its outcomes, or
    ``None`` if it failed in any way (the caller then solves those groups itself: the
    same solves, so the same plan); :meth:`close` ends it if it still runs.
    """

    def __init__(self, process: subprocess.Popen | None) -> None:
        """Wrap a started worker process (``None``: it could not be started)."""
        self.process = process
        self.writer: threading.Thread | None = None
        self.failed = process is None

    @staticmethod
    def start() -> LpHelper:
        """Launch the worker (``python -m planner.model.lp_worker``)."""
        return LpHelper(start_worker("planner.model.lp_worker"))

    def send(self, forms: list, seconds_left: float, threads: int, seed: int) -> None:
        """The forms to solve, within ``seconds_left``, with HiGHS's ``threads`` and seed."""
        if self.failed or self.process is None:
            return
        data = pickle.dumps((forms, seconds_left, threads, seed),
                            protocol=pickle.HIGHEST_PROTOCOL)
        stdin = self.process.stdin

        def write() -> None:
            try:
                stdin.write(data)
                stdin.close()
            except OSError:
                self.failed = True

        self.writer = threading.Thread(target=write, daemon=True)
        self.writer.start()

    def results(self) -> list[MatrixResult] | None:
        """The outcomes, in the order sent; ``None`` when the worker failed."""
        if self.failed or self.process is None or self.writer is None:
            return None
        try:
            reply = self.process.stdout.read()
            self.writer.join()
            if self.process.wait() != 0 or self.failed:
                return None
            outcomes, peak = pickle.loads(reply)
            HELPER_PEAKS_MB.append(peak)
            return [MatrixResult.of(stage, x, duals) for stage, x, duals in outcomes]
        except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError):
            return None

    def close(self) -> None:
        """End the worker if it still runs."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(OSError):
                self.process.kill()
            self.process.wait()
        for stream in (self.process.stdin, self.process.stdout) if self.process else ():
            with contextlib.suppress(OSError):
                stream.close()


def share_groups(groups: list) -> list[int]:
    """The groups a helper takes: about half the triples, the largest groups first.

    Each group, largest first (ties: lower index), goes to whichever side has fewer
    triples so far (ties: this process). Returns the helper's groups in index order.
    """
    sizes = [len(e[0]) for e in groups]
    load = [0, 0]  # this process, the helper
    helper = []
    for i in sorted(range(len(groups)), key=lambda i: (-sizes[i], i)):
        side = 0 if load[0] <= load[1] else 1
        load[side] += sizes[i]
        if side:
            helper.append(i)
    return sorted(helper)


def _solve_groups(problem: Problem, groups: list, available: np.ndarray, headroom: np.ndarray,
                  targets: CellValues, deadline: float, helper: LpHelper | None = None
                  ) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray, np.ndarray,
                             np.ndarray, StageResult, float]:
    """One LP a group of clusters (they share no row), each built, solved and let go in turn.

    With a ``helper`` (a second process, :class:`LpHelper`), it solves the groups of
    :func:`share_groups` while this process solves the others; each group is the same
    LP solved by its own HiGHS either way, so the grants are the same bytes. (Solving
    two groups' HiGHS instances on two threads of one process gave different grants from
    run to run: they share its scheduler.) The stage's objective and bound are the sums
    of the groups' as each solver reported them, its gap :func:`relative_gap` of those
    sums, its status the first group's (in group order) that is not optimal, else
    optimal: no plan is written then. Returns the triples solved (the groups' one after
    another, up to that group), g and o at them, the budget duals, the outcome and the
    seconds spent building.
    """
    opts = problem.model.solver
    n_projects = problem.shape[0]
    # each group's g, o, outcome and budget duals (a (P,) array of its own), written into
    # the plan's duals in group order below, as solving them in turn would
    outcomes: dict[int, tuple[np.ndarray, np.ndarray, StageResult, np.ndarray]] = {}
    build = 0.0
    remote = share_groups(groups) if helper is not None else []
    readbacks: dict[int, Readback] = {}
    if remote:
        assert helper is not None
        tick = time.perf_counter()
        forms = []
        for i in remote:
            model = build_elastic_model(problem, available, headroom, targets, groups[i])
            readbacks[i] = Readback.of(model)
            forms.append(model.lp.matrix(maximize=True))
            del model
        build += time.perf_counter() - tick
        helper.send(forms, max(1.0, deadline - time.perf_counter()), opts.threads,
                    opts.random_seed)
        del forms

    def solve_here(i: int) -> float:
        """Build group i's LP, solve it in this process (into ``outcomes``); build seconds."""
        tick = time.perf_counter()
        model = build_elastic_model(problem, available, headroom, targets, groups[i])
        built = time.perf_counter() - tick
        # the time left when the solve starts
        outcomes[i] = solve_elastic_model(model, problem,
                                          max(1.0, deadline - time.perf_counter()),
                                          np.full(n_projects, np.nan))
        return built

    for i in range(len(groups)):
        if i in readbacks:
            continue
        build += solve_here(i)
        if outcomes[i][3].status is not SolverStatus.OPTIMAL:
            break
    if remote:
        assert helper is not None
        results = helper.results()
        for n, i in enumerate(remote):
            if results is not None:
                outcomes[i] = read_result(readbacks[i], results[n],
                                          np.full(n_projects, np.nan))
            else:  # the helper failed: the same groups, solved here
                build += solve_here(i)
    duals = np.zeros(n_projects)
    cells: list[tuple[np.ndarray, ...]] = []
    grants: list[tuple[np.ndarray, np.ndarray]] = []
    objective = bound = seconds = 0.0
    stage = None
    for i, e in enumerate(groups):
        if i not in outcomes:
            break  # after a group that is not optimal: not solved
        g, o, written, stage = outcomes[i]
        written_here = ~np.isnan(written)  # the duals this group's solve wrote
        duals[written_here] = written[written_here]
        cells.append(e)
        grants.append((g, o))
        seconds += stage.seconds
        if stage.status is not SolverStatus.OPTIMAL:
            break
        objective += stage.objective
        bound += stage.bound
    assert stage is not None
    solved = tuple(np.concatenate([e[i] for e in cells]) for i in range(3))
    g, o = (np.concatenate([pair[i] for pair in grants]) for i in range(2))
    if stage.status is not SolverStatus.OPTIMAL:
        return solved, g, o, duals, replace(stage, seconds=seconds), build
    gap = relative_gap(objective, bound)
    return solved, g, o, duals, StageResult(stage.solver, SolverStatus.OPTIMAL, objective,
                                            bound, gap, seconds), build


def _clean(values: np.ndarray) -> np.ndarray:
    """Round solver noise to the micro-GPU-hour (not a repair: |noise| ≤ 1e-6).

    In place (``values`` is this stage's own array). Only the entries that are not +0.0
    are touched: on a mostly-zero array, the same numbers as rounding it whole, without
    its dense passes.
    """
    out = values
    flat = out.reshape(-1)
    written = np.flatnonzero((flat != 0.0) | np.signbit(flat))
    kept = np.round(flat[written], 6)
    kept[np.abs(kept) < 1e-6] = 0.0
    flat[written] = kept
    return out
