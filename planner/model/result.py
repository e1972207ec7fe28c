"""Solver outcomes as enums and dataclasses (never assumed, always read from the solver)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np


class SolverStatus(StrEnum):
    """What a solver said of a stage."""

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"  # stopped by a limit with a valid solution and a known gap
    INFEASIBLE = "infeasible"
    TIME_LIMIT = "time_limit"  # stopped by the limit without a usable solution
    ERROR = "error"

    @classmethod
    def from_cp_sat(cls, code: int) -> SolverStatus:
        """Map a CP-SAT status code."""
        from ortools.sat.python import cp_model

        return {
            cp_model.OPTIMAL: cls.OPTIMAL,
            cp_model.FEASIBLE: cls.FEASIBLE,
            cp_model.INFEASIBLE: cls.INFEASIBLE,
            cp_model.UNKNOWN: cls.TIME_LIMIT,
        }.get(code, cls.ERROR)


@dataclass(frozen=True)
class StageResult:
    """One solver stage: its name, status, objective, bound, relative gap and seconds."""

    solver: str
    status: SolverStatus
    objective: float
    bound: float
    gap: float
    seconds: float


@dataclass(frozen=True)
class Solution:
    """The solved plan in arrays, before it is written out."""

    reservation_start: dict[str, int]  # request_id → start period of placed requests
    guaranteed: np.ndarray  # (P, K, T) GPU-hours
    opportunistic: np.ndarray  # (P, K, T) GPU-hours
    targets: np.ndarray  # (P, K, T) fair-share targets, GPU-hours
    budget_dual: np.ndarray  # (P,) objective value of one more NGH of budget
    stages: tuple[StageResult, ...]
    build_seconds: float
    solve_seconds: float

    @property
    def status(self) -> SolverStatus:
        """The worst stage status."""
        order = list(SolverStatus)
        return max((s.status for s in self.stages), key=order.index)

    @property
    def mip_gap(self) -> float:
        """The largest relative gap of any stage (the LP stage's is 0)."""
        return max((s.gap for s in self.stages), default=0.0)
