"""Solver outcomes as enums and dataclasses (never assumed, always read from the solver)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np

OPTIMAL_GAP = 1e-9  # a stage is "optimal" only when its relative gap is at most this


class SolverStatus(StrEnum):
    """What a solver said of a stage."""

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"  # stopped by a limit with a valid solution and a known gap
    INFEASIBLE = "infeasible"
    TIME_LIMIT = "time_limit"  # stopped by the limit without a usable solution
    ERROR = "error"


@dataclass(frozen=True)
class StageResult:
    """One solver stage: its name, status, objective, bound, relative gap and seconds."""

    solver: str
    status: SolverStatus
    objective: float
    bound: float
    gap: float
    seconds: float


def relative_gap(objective: float, bound: float, floor: float = 1e-9) -> float:
    """|objective − bound| ÷ max(|objective|, floor): the gap as computed here, never assumed.

    ``floor`` keeps an objective of 0 from dividing by zero (CP-SAT's own rule uses 1 in
    its integer units, which :mod:`planner.model.reservations` passes).
    """
    return abs(objective - bound) / max(abs(objective), floor)


def status_from_gap(gap: float) -> SolverStatus:
    """``optimal`` only when the gap is closed (≤ :data:`OPTIMAL_GAP`), else ``feasible``."""
    return SolverStatus.OPTIMAL if gap <= OPTIMAL_GAP else SolverStatus.FEASIBLE


def highs_dual_objective(highs: Any, tolerance: float = 1e-7) -> float:
    """The dual objective of a solved HiGHS LP (its bound), from the duals HiGHS returned.

    Each row and column dual multiplies the bound it prices: in a minimisation a
    positive dual prices the lower bound and a negative one the upper, in a
    maximisation the other way round. A dual within HiGHS's dual feasibility
    ``tolerance`` of 0 on an infinite bound is solver noise and prices nothing; a larger
    one makes the bound infinite, as it then is.
    """
    import highspy

    lp, solution = highs.getLp(), highs.getSolution()
    lower_sign = 1.0 if lp.sense_ == highspy.ObjSense.kMinimize else -1.0
    total = 0.0
    for dual, lower, upper in ((solution.row_dual, lp.row_lower_, lp.row_upper_),
                               (solution.col_dual, lp.col_lower_, lp.col_upper_)):
        dual = np.asarray(dual, dtype=float)
        priced = np.where(lower_sign * dual > 0, np.asarray(lower, dtype=float),
                          np.asarray(upper, dtype=float))
        noise = np.isinf(priced) & (np.abs(dual) <= tolerance)
        keep = (dual != 0) & ~noise
        total += float((dual[keep] * priced[keep]).sum())
    return total + float(lp.offset_)


def highs_outcome(highs: Any, name: str, seconds: float) -> StageResult:
    """A solved HiGHS model's outcome, every number read from the solver.

    Objective: ``getInfo().objective_function_value``. Bound: a MIP's
    ``mip_dual_bound``; an LP's (HiGHS keeps no MIP bound for it, ``mip_gap`` is inf)
    the dual objective of its duals. The gap is computed here from the two, and the
    status is ``optimal`` only when it is closed (:func:`status_from_gap`).
    """
    import highspy

    code = highspy.HighsModelStatus
    status = highs.getModelStatus()
    info = highs.getInfo()
    if status in (code.kInfeasible, code.kUnboundedOrInfeasible):
        return StageResult(name, SolverStatus.INFEASIBLE, float("nan"), float("nan"),
                           float("inf"), seconds)
    mip = info.mip_node_count >= 0
    has_point = info.primal_solution_status == 2  # kSolutionStatusFeasible
    if not has_point or (not mip and status != code.kOptimal):
        # nothing usable, or a simplex stopped early (a point but no valid bound)
        said = SolverStatus.TIME_LIMIT if status == code.kTimeLimit else SolverStatus.ERROR
        return StageResult(name, said, float("nan"), float("nan"), float("inf"), seconds)
    objective = float(info.objective_function_value)
    bound = float(info.mip_dual_bound) if mip else highs_dual_objective(highs)
    gap = relative_gap(objective, bound)
    return StageResult(name, status_from_gap(gap), objective, bound, gap, seconds)


@dataclass(frozen=True)
class CellValues:
    """Values of a (P, K, T) array that is zero outside a few cells, kept as those cells.

    ``codes`` are the cells' flat indices p·K·T + k·T + t, ascending and unique. Read
    like the dense array: ``values[p, k, t]`` with index arrays or integers (a cell not
    kept reads 0), ``np.asarray(values)`` for the whole array.
    """

    shape: tuple[int, int, int]
    codes: np.ndarray
    values: np.ndarray

    @classmethod
    def at(cls, shape: tuple[int, int, int], cells: tuple[np.ndarray, np.ndarray, np.ndarray],
           values: np.ndarray) -> CellValues:
        """From (p, k, t) index arrays in (p, k, t) order (as ``np.nonzero`` gives them)."""
        codes = np.ravel_multi_index(tuple(np.asarray(i, dtype=np.int64) for i in cells), shape)
        if len(codes) > 1 and not np.all(np.diff(codes) > 0):
            raise ValueError("cells must be unique and in (p, k, t) order")
        return cls(shape, codes, np.asarray(values, dtype=np.float64))

    def __getitem__(self, index: tuple) -> np.ndarray | float:
        codes = np.ravel_multi_index(tuple(np.asarray(i, dtype=np.int64) for i in index),
                                     self.shape)
        out = np.zeros(np.shape(codes))
        if len(self.codes):
            slot = np.minimum(np.searchsorted(self.codes, codes), len(self.codes) - 1)
            found = self.codes[slot] == codes
            out[found] = self.values[slot[found]] if out.ndim else self.values[slot]
        return float(out) if out.ndim == 0 else out

    @classmethod
    def summed(cls, shape: tuple[int, int, int], codes: np.ndarray, values: np.ndarray
               ) -> CellValues:
        """Σ of ``values`` per flat cell code, each cell's terms added in the order given.

        As ``np.add.at`` on a zero (P, K, T) array would add them; cells whose sum is not
        positive are not kept (the values here are GPU-hours, never negative).
        """
        cells, slot = np.unique(np.asarray(codes, dtype=np.int64), return_inverse=True)
        sums = np.bincount(slot, np.asarray(values, dtype=np.float64), minlength=len(cells))
        kept = sums > 0
        return cls(shape, cells[kept], sums[kept])

    def cells(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The kept cells' (p, k, t) index arrays, in (p, k, t) order."""
        return np.unravel_index(self.codes, self.shape)

    def sum(self, axis: int | None = None) -> float | np.ndarray:
        """Σ of every value (``axis=None``), or over projects (``axis=0``: a (K, T) array).

        Over projects, each (k, t)'s values are added in project order, as the dense
        array's ``sum(axis=0)`` adds them (its zeros change no sum).
        """
        if axis is None:
            return float(self.values.sum())
        if axis != 0:
            raise ValueError("CellValues sums over every cell or over projects (axis=0)")
        _, n_clusters, n_periods = self.shape
        block = n_clusters * n_periods
        return np.bincount(self.codes % block, self.values,
                           minlength=block).reshape(n_clusters, n_periods)

    def period(self, t: int) -> np.ndarray:
        """The (P, K) block of period ``t``, dense."""
        n_projects, n_clusters, n_periods = self.shape
        at = self.codes % n_periods == t
        out = np.zeros((n_projects, n_clusters))
        out.reshape(-1)[self.codes[at] // n_periods] = self.values[at]
        return out

    def any(self) -> bool:
        """Whether any kept value is not zero."""
        return bool(np.any(self.values != 0))

    def __array__(self, dtype=None, copy=None) -> np.ndarray:  # noqa: ARG002 (numpy's protocol)
        dense = np.zeros(self.shape, dtype=dtype or np.float64)
        dense.reshape(-1)[self.codes] = self.values
        return dense


@dataclass(frozen=True)
class Solution:
    """The solved plan in arrays, before it is written out."""

    reservation_start: dict[str, int]  # request_id → start period of placed requests
    guaranteed: CellValues  # (P, K, T) GPU-hours, kept at the cells with demand
    opportunistic: CellValues  # (P, K, T) GPU-hours, kept at the cells with demand
    targets: CellValues | np.ndarray  # (P, K, T) fair-share targets, GPU-hours
    budget_dual: np.ndarray  # (P,) objective value of one more NGH of budget
    stages: tuple[StageResult, ...]
    build_seconds: float
    solve_seconds: float
    # what stopped the solve (plan.json's solver.limits; planner.model.solve.limits_record)
    limits: dict[str, Any] | None = None

    @property
    def status(self) -> SolverStatus:
        """The worst stage status."""
        order = list(SolverStatus)
        return max((s.status for s in self.stages), key=order.index)

    @property
    def mip_gap(self) -> float:
        """The largest relative gap of any stage (the LP stage's is 0)."""
        return max((s.gap for s in self.stages), default=0.0)
