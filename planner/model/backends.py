"""Solver back-ends for the LP/MIP stages: one matrix form in, one outcome out.

The elastic LP (:mod:`planner.model.elastic`) and the joint MIP
(:mod:`planner.model.joint`) are built once, by :class:`~planner.model.lp.LpBuilder`,
into a :class:`~planner.model.lp.MatrixForm`. :func:`solve_matrix` hands that form
to a solver:

- ``highs`` (the default, measured fastest): HiGHS through ``highspy``, directly;
- any other name: the solver PuLP reaches on this machine (``cbc``, ``gurobi``,
  ``cplex``, ``glpk``, ``scip``, … or a PuLP class name such as ``HiGHS_CMD``).
  PuLP's variables and constraints are made from the same arrays, column by column
  and row by row, so there is no second formulation to keep in step.

Solver outcomes are read honestly. PuLP reports a CBC run stopped by its time limit
as "Optimal" (``LpStatusOptimal``); for CBC we read CBC's own log instead: its
``Result -`` line, ``Objective value``, ``Lower bound`` and ``Gap``. A run stopped
by a limit with an incumbent is ``feasible`` with its gap; without one it is
``time_limit`` (no usable solution). For other PuLP solvers the status is PuLP's
``sol_status`` (optimal, integer-feasible, infeasible, …); their bound is not
passed through PuLP, so a non-optimal run says gap ``nan`` (unknown), never 0.
An outcome that cannot be read is ``error``. Callers decide what a status allows:
the planner's LP stage accepts only ``optimal``.
"""

from __future__ import annotations

import contextlib
import math
import re
import tempfile
import time
import warnings
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from planner.config import SolverOptions
from planner.errors import InputError, InputProblem
from planner.extras import installed, require
from planner.model.lp import MatrixForm
from planner.model.lp_worker import run_highs
from planner.model.result import (
    SolverStatus,
    StageResult,
    relative_gap,
    status_from_gap,
)

DEFAULT_SOLVER = "highs"

# Friendly names → PuLP solver classes, tried in order (the first available one is used).
PULP_NAMES: dict[str, tuple[str, ...]] = {
    "cbc": ("COIN_CMD", "PULP_CBC_CMD"),
    "gurobi": ("GUROBI", "GUROBI_CMD"),
    "cplex": ("CPLEX_PY", "CPLEX_CMD"),
    "xpress": ("XPRESS_PY", "XPRESS"),
    "mosek": ("MOSEK",),
    "copt": ("COPT", "COPT_CMD"),
    "scip": ("SCIP_PY", "SCIP_CMD"),
    "glpk": ("GLPK_CMD",),
}
_CBC_CLASSES = ("COIN_CMD", "PULP_CBC_CMD")


@dataclass(frozen=True)
class MatrixResult(StageResult):
    """A stage's outcome (:class:`~planner.model.result.StageResult`) and its values.

    ``x`` and ``row_dual`` are ``None`` when the solver returned no usable values
    (duals also for MIPs). ``gap`` is :func:`~planner.model.result.relative_gap` of the
    solver's objective and bound; ``nan`` when the solver's bound is unknown.
    """

    x: np.ndarray | None
    row_dual: np.ndarray | None

    @staticmethod
    def of(stage: StageResult, x: np.ndarray | None, row_dual: np.ndarray | None
           ) -> MatrixResult:
        """An outcome and its values (nan figures when the status gives no usable values)."""
        if stage.status not in (SolverStatus.OPTIMAL, SolverStatus.FEASIBLE):
            return MatrixResult(stage.solver, stage.status, float("nan"), float("nan"),
                                float("nan"), stage.seconds, None, None)
        return MatrixResult(stage.solver, stage.status, stage.objective, stage.bound,
                            stage.gap, stage.seconds, x, row_dual)

    def stage(self) -> StageResult:
        """The outcome alone, without the values (what a plan records)."""
        return StageResult(self.solver, self.status, self.objective, self.bound, self.gap,
                           self.seconds)


@contextlib.contextmanager
def _quiet_pulp():
    """PuLP 3 warns that its bundled CBC class goes in PuLP 4; we still use it where present."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import pulp

        yield pulp


@cache
def _pulp_available() -> tuple[str, ...]:
    """PuLP's solver classes that run on this machine (asked once a process).

    None without PuLP (an optional dependency, :mod:`planner.extras`).
    """
    if not installed("pulp"):
        return ()
    with _quiet_pulp() as pulp:
        return tuple(pulp.listSolvers(onlyAvailable=True))


def available_solvers() -> list[str]:
    """Names ``--solver`` accepts here: ``highs``, then friendly names, then PuLP classes."""
    reachable = _pulp_available()
    friendly = [name for name, classes in PULP_NAMES.items()
                if any(c in reachable for c in classes)]
    return [DEFAULT_SOLVER, *friendly, *(c for c in reachable if c not in friendly)]


def check_solver(name: str, where: str = "--solver", column: str | None = None) -> str:
    """``name`` if it runs here; else :class:`InputError` listing the ones that do.

    A name other than ``highs`` needs PuLP: without it, the error says what to install.
    """
    if name == DEFAULT_SOLVER:
        return name
    require("pulp", where, column, instead=f"{name!r} is reached through it; highs needs "
                                           "nothing more")
    if _pulp_class(name) is not None:
        return name
    known = name in PULP_NAMES or name in _all_pulp_solvers()
    why = "is not available on this machine" if known else "is not a solver PuLP knows"
    raise InputError([InputProblem(where, None, column,
                                   f"{name!r} {why}; available here: "
                                   f"{', '.join(available_solvers())}")])


@cache
def _all_pulp_solvers() -> tuple[str, ...]:
    with _quiet_pulp() as pulp:
        return tuple(pulp.listSolvers())


def _pulp_class(name: str) -> str | None:
    """The PuLP class that runs ``name`` here, or ``None``."""
    reachable = _pulp_available()
    for candidate in PULP_NAMES.get(name, (name,)):
        if candidate in reachable:
            return candidate
    return None


def solve_matrix(form: MatrixForm, solver: str = DEFAULT_SOLVER, *, time_limit: float = 60.0,
                 threads: int = SolverOptions.threads, seed: int = 0, mip_gap: float = 1e-6
                 ) -> MatrixResult:
    """Solve ``form`` with ``solver`` (see the module docstring); never raises on a bad outcome.

    HiGHS keeps one thread pool a process: pass the same ``threads`` everywhere.
    """
    if solver == DEFAULT_SOLVER:
        return _solve_highs(form, time_limit, threads, seed, mip_gap)
    cls = _pulp_class(solver)
    if cls is None:
        check_solver(solver)  # raises with the list of what is available
    return _solve_pulp(form, solver, cls, time_limit, threads, mip_gap)


def known_gap(objective: float, bound: float) -> float:
    """:func:`planner.model.result.relative_gap`, ``nan`` when either number is unknown."""
    if not (math.isfinite(objective) and math.isfinite(bound)):
        return float("nan")
    return relative_gap(objective, bound)


def _solve_highs(form: MatrixForm, time_limit: float, threads: int, seed: int,
                 mip_gap: float) -> MatrixResult:
    stage, x, duals = run_highs(form, time_limit, threads, seed, mip_gap)
    return MatrixResult.of(stage, x, duals)


def _bound(value: float) -> float | None:
    return None if math.isinf(value) else float(value)


def pulp_problem(form: MatrixForm):
    """The PuLP problem of ``form``, its variables and each row's constraints.

    Columns are ``c<i>``, rows ``r<i>`` (a ranged row i as ``r<i>`` ≥ and ``r<i>_hi`` ≤).
    """
    with _quiet_pulp() as pulp:
        problem = pulp.LpProblem("planner", pulp.LpMaximize if form.maximize
                                 else pulp.LpMinimize)
        cat = np.where(form.integer, pulp.LpInteger, pulp.LpContinuous)
        variables = [pulp.LpVariable(f"c{i}", _bound(lo), _bound(up), str(kind))
                     for i, (lo, up, kind) in enumerate(zip(form.col_lower, form.col_upper, cat,
                                                            strict=True))]
        nonzero = np.nonzero(form.col_cost)[0]
        problem.setObjective(pulp.LpAffineExpression(
            [(variables[i], float(form.col_cost[i])) for i in nonzero]))
        row_constraints: list[tuple] = []
        for i in range(form.n_rows):
            span = slice(form.start[i], form.start[i + 1])
            terms = [(variables[j], float(v)) for j, v in zip(form.index[span],
                                                               form.value[span], strict=True)]
            lo, up = float(form.row_lower[i]), float(form.row_upper[i])
            made = []
            if math.isfinite(lo) and lo == up:
                made.append((f"r{i}", pulp.LpConstraintEQ, lo))
            else:
                if math.isfinite(lo):
                    made.append((f"r{i}", pulp.LpConstraintGE, lo))
                if math.isfinite(up):
                    made.append((f"r{i}_hi" if made else f"r{i}", pulp.LpConstraintLE, up))
            constraints = tuple(pulp.LpConstraint(pulp.LpAffineExpression(terms), sense, name,
                                                  rhs) for name, sense, rhs in made)
            for constraint in constraints:
                problem.addConstraint(constraint)
            row_constraints.append(constraints)
    return problem, variables, row_constraints


def _solve_pulp(form: MatrixForm, name: str, cls: str, time_limit: float, threads: int,
                mip_gap: float) -> MatrixResult:
    problem, variables, row_constraints = pulp_problem(form)
    with tempfile.TemporaryDirectory(prefix="planner-pulp-") as tmp, _quiet_pulp() as pulp:
        log_path = Path(tmp) / "solver.log"
        options = {"msg": False, "timeLimit": max(1.0, float(time_limit)),
                   "threads": int(threads), "gapRel": float(mip_gap)}
        if cls in _CBC_CLASSES:
            options["logPath"] = str(log_path)
            options["timeMode"] = "elapsed"
        solver = pulp.getSolver(cls, **options)
        solver.tmpDir = tmp
        started = time.perf_counter()
        try:
            problem.solve(solver)
        except pulp.PulpSolverError:  # the solver crashed or wrote no solution
            return MatrixResult(name, SolverStatus.ERROR, float("nan"), float("nan"),
                                float("nan"), time.perf_counter() - started, None, None)
        seconds = time.perf_counter() - started
        if cls in _CBC_CLASSES:
            status, objective, bound = read_cbc_log(
                log_path.read_text(encoding="utf-8", errors="replace"), form.is_mip)
        else:
            status, objective, bound = _pulp_outcome(problem, form.is_mip)
    if status not in (SolverStatus.OPTIMAL, SolverStatus.FEASIBLE):
        return MatrixResult(name, status, float("nan"), float("nan"), float("nan"), seconds,
                            None, None)
    x = np.array([np.nan if v.varValue is None else v.varValue for v in variables])
    if np.isnan(x).any():
        return MatrixResult(name, SolverStatus.ERROR, objective, bound, float("nan"), seconds,
                            None, None)
    duals = None
    if not form.is_mip:
        duals = np.array([sum(c.pi or 0.0 for c in row) for row in row_constraints])
    gap = known_gap(objective, bound)
    if math.isnan(gap) and status is SolverStatus.OPTIMAL:
        gap = 0.0  # a solver that reports no bound (PuLP passes none on) and proved optimality
    elif status is SolverStatus.OPTIMAL:
        status = status_from_gap(gap)  # 'optimal' under a tolerance is feasible with its gap
    return MatrixResult(name, status, objective, bound, gap, seconds, x, duals)


def _pulp_outcome(problem, is_mip: bool) -> tuple[SolverStatus, float, float]:
    """Status from PuLP's ``sol_status`` (not ``status``, which says Optimal too readily)."""
    with _quiet_pulp() as pulp:
        code = problem.sol_status
        objective = pulp.value(problem.objective)
        objective = float("nan") if objective is None else float(objective)
        if code == pulp.LpSolutionOptimal:
            return SolverStatus.OPTIMAL, objective, objective
        if code == pulp.LpSolutionIntegerFeasible and is_mip:
            return SolverStatus.FEASIBLE, objective, float("nan")
        if code == pulp.LpSolutionInfeasible:
            return SolverStatus.INFEASIBLE, float("nan"), float("nan")
        if code == pulp.LpSolutionNoSolutionFound:
            return SolverStatus.TIME_LIMIT, float("nan"), float("nan")
        return SolverStatus.ERROR, float("nan"), float("nan")


_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf)"


def read_cbc_log(log: str, is_mip: bool) -> tuple[SolverStatus, float, float]:
    """Status, objective and best bound as CBC's own log states them.

    A MIP run ends with ``Result - Optimal solution found`` or ``Result - Stopped on
    time limit`` (or ``… on iterations``, ``… on nodes``, …), then ``Objective value:``
    and, when stopped, ``Lower bound:`` (``Upper bound:`` when maximising) and ``Gap:``;
    a stopped run that found no integer solution says ``No feasible solution found``.
    A pure LP says ``Optimal - objective value X`` (or ``Infeasible …``, ``Stopped on
    …``). Bounds are printed in the model's own sense. Anything else is ``error``.
    """
    result = re.search(r"^Result - (.+)$", log, re.MULTILINE)
    if result:
        said = result.group(1).strip().lower()
        value = re.search(r"^Objective value:\s+" + _NUMBER, log, re.MULTILINE)
        objective = float(value.group(1)) if value else float("nan")
        if said.startswith("optimal solution found"):
            return SolverStatus.OPTIMAL, objective, objective
        if "infeasible" in said:
            return SolverStatus.INFEASIBLE, float("nan"), float("nan")
        if said.startswith("stopped"):
            if not value or "no feasible solution" in log.lower():
                return SolverStatus.TIME_LIMIT, float("nan"), float("nan")
            bound = re.search(r"^(?:Lower|Upper) bound:\s+" + _NUMBER, log, re.MULTILINE)
            return (SolverStatus.FEASIBLE, objective,
                    float(bound.group(1)) if bound else float("nan"))
        return SolverStatus.ERROR, float("nan"), float("nan")
    if not is_mip:
        lp = re.search(r"^(Optimal|Infeasible|Primal infeasible|Dual infeasible|Unbounded|"
                       r"Stopped[^-]*?) - objective value " + _NUMBER, log, re.MULTILINE)
        if lp and lp.group(1) == "Optimal":
            objective = float(lp.group(2))
            return SolverStatus.OPTIMAL, objective, objective
        if lp and "nfeasible" in lp.group(1):
            return SolverStatus.INFEASIBLE, float("nan"), float("nan")
        if lp and lp.group(1).startswith("Stopped"):
            return SolverStatus.TIME_LIMIT, float("nan"), float("nan")
    return SolverStatus.ERROR, float("nan"), float("nan")
