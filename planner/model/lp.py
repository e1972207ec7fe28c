"""A small bulk LP builder: column and row blocks from numpy arrays, loaded into HiGHS.

Columns and rows are added in named families (blocks); the builder keeps each
family's index range so that a test can inspect a built model and the extractor
can read values back without parsing names. Names for a whole family come from
one helper, :func:`names`, and are made only when asked for (``debug_names``).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

import highspy
import numpy as np

INF = highspy.kHighsInf


def new_highs(threads: int = 1, seed: int = 0, time_limit: float | None = None) -> highspy.Highs:
    """A silent HiGHS instance (its banner goes to the C-level stdout, so park fd 1)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            highs = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    highs.setOptionValue("output_flag", False)
    # HiGHS keeps one thread scheduler per process: every caller passes the model's count
    highs.setOptionValue("threads", int(threads))
    highs.setOptionValue("random_seed", int(seed))
    if time_limit is not None:
        highs.setOptionValue("time_limit", float(time_limit))
    return highs


def names(family: str, keys: list[tuple]) -> list[str]:
    """Stable names ``family[k1,k2,...]`` for a block."""
    return [f"{family}[{','.join(str(k) for k in key)}]" for key in keys]


@dataclass
class LpBuilder:
    """Collects column and row blocks; :meth:`to_highs` makes the HiGHS model."""

    col_lower: list[np.ndarray] = field(default_factory=list)
    col_upper: list[np.ndarray] = field(default_factory=list)
    col_cost: list[np.ndarray] = field(default_factory=list)
    col_integer: list[np.ndarray] = field(default_factory=list)
    row_lower: list[np.ndarray] = field(default_factory=list)
    row_upper: list[np.ndarray] = field(default_factory=list)
    entries: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)
    columns: dict[str, slice] = field(default_factory=dict)
    rows: dict[str, slice] = field(default_factory=dict)
    n_cols: int = 0
    n_rows: int = 0

    def add_columns(self, family: str, lower, upper, cost, integer: bool = False) -> np.ndarray:
        """Add a block of columns; return their global indices."""
        lower = np.asarray(lower, dtype=float)
        n = lower.size
        self.col_integer.append(np.full(n, integer, dtype=bool))
        self.col_lower.append(lower)
        self.col_upper.append(np.broadcast_to(np.asarray(upper, dtype=float), n).copy())
        self.col_cost.append(np.broadcast_to(np.asarray(cost, dtype=float), n).copy())
        self.columns[family] = slice(self.n_cols, self.n_cols + n)
        self.n_cols += n
        return np.arange(self.columns[family].start, self.columns[family].stop)

    def add_rows(self, family: str, lower, upper, row, col, value) -> slice:
        """Add a block of rows from triplets; ``row`` is local to the block (0..n−1)."""
        lower = np.asarray(lower, dtype=float)
        n = lower.size
        self.row_lower.append(lower)
        self.row_upper.append(np.broadcast_to(np.asarray(upper, dtype=float), n).copy())
        self.entries.append((np.asarray(row, dtype=np.int64) + self.n_rows,
                             np.asarray(col, dtype=np.int64),
                             np.broadcast_to(np.asarray(value, dtype=float), len(row)).copy()))
        self.rows[family] = slice(self.n_rows, self.n_rows + n)
        self.n_rows += n
        return self.rows[family]

    def add_entries(self, family: str, row, col, value) -> None:
        """More coefficients in existing rows of ``family`` (``row`` local to the block)."""
        base = self.rows[family].start
        self.entries.append((np.asarray(row, dtype=np.int64) + base,
                             np.asarray(col, dtype=np.int64),
                             np.broadcast_to(np.asarray(value, dtype=float), len(row)).copy()))

    @property
    def nonzeros(self) -> int:
        """Entries in the constraint matrix."""
        return int(sum(len(r) for r, _, _ in self.entries))

    def to_highs(self, maximize: bool = True) -> highspy.HighsLp:
        """The model as a HiGHS LP (row-wise matrix, built in bulk)."""
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = self.n_cols, self.n_rows
        lp.col_cost_ = np.concatenate(self.col_cost) if self.col_cost else np.zeros(0)
        lp.col_lower_ = np.concatenate(self.col_lower) if self.col_lower else np.zeros(0)
        lp.col_upper_ = np.concatenate(self.col_upper) if self.col_upper else np.zeros(0)
        lp.row_lower_ = np.concatenate(self.row_lower) if self.row_lower else np.zeros(0)
        lp.row_upper_ = np.concatenate(self.row_upper) if self.row_upper else np.zeros(0)
        if self.entries:
            row = np.concatenate([r for r, _, _ in self.entries])
            col = np.concatenate([c for _, c, _ in self.entries])
            val = np.concatenate([v for _, _, v in self.entries])
        else:
            row = col = np.zeros(0, dtype=np.int64)
            val = np.zeros(0)
        order = np.lexsort((col, row))
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = self.n_cols, self.n_rows
        lp.a_matrix_.start_ = np.searchsorted(row[order], np.arange(self.n_rows + 1)).astype(
            np.int32)
        lp.a_matrix_.index_ = col[order].astype(np.int32)
        lp.a_matrix_.value_ = val[order]
        integer = np.concatenate(self.col_integer) if self.col_integer else np.zeros(0, bool)
        if integer.any():
            lp.integrality_ = [highspy.HighsVarType.kInteger if i else
                               highspy.HighsVarType.kContinuous for i in integer]
        lp.sense_ = highspy.ObjSense.kMaximize if maximize else highspy.ObjSense.kMinimize
        return lp
