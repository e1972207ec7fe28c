"""A small bulk LP builder: column and row blocks from numpy arrays, in one neutral matrix form.

Columns and rows are added in named families (blocks); the builder keeps each
family's index range so that a test can inspect a built model and the extractor
can read values back without parsing names. A block may carry its keys (project,
cluster, period, request: the labels the planner knows it by); names for a whole
block come from one helper, :func:`names`, and are made only when asked for
(``--write-model``). :meth:`LpBuilder.matrix` gives the neutral form every solver
back-end (:mod:`planner.model.backends`) and the model writer
(:mod:`planner.model.modelfile`) take, so there is one formulation however it is
solved or written.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import highspy
import numpy as np

if TYPE_CHECKING:
    import pandas as pd

# pandas is imported only where a name is made (``--write-model``): the LP worker process
# (:mod:`planner.model.lp_worker`) solves a MatrixForm with highspy and numpy alone

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


# Characters kept as they are in a name's keys; '-' is written '~' (CPLEX LP names may not
# hold '-', '[' or ']'), every other byte as '#HH' (so '~' and '#' themselves too).
_KEEP = re.compile(r"[A-Za-z0-9_.]")
MAX_NAME = 255  # the longest name CPLEX's LP format reads; longer ones end in '$<index>'


def safe_key(label: str) -> str:
    """A key made safe for MPS and LP names, reversibly: ``h100-a`` → ``h100~a``.

    Kept: ASCII letters, digits, ``_`` and ``.``; ``-`` becomes ``~``; any other
    character becomes ``#HH`` per UTF-8 byte (a space ``#20``, ``~`` ``#7E``).
    """
    out = []
    for char in label:
        if _KEEP.fullmatch(char):
            out.append(char)
        elif char == "-":
            out.append("~")
        else:
            out.extend(f"#{byte:02X}" for byte in char.encode("utf-8"))
    return "".join(out)


def period_key(start: pd.Timestamp) -> str:
    """A period's start in ISO 8601 basic form: ``20261116``, or ``20261116T0600`` off midnight."""
    if start.hour == start.minute == start.second == 0:
        return start.strftime("%Y%m%d")
    return start.strftime("%Y%m%dT%H%M%S" if start.second else "%Y%m%dT%H%M")


def names(family: str, keys: list[tuple]) -> list[str]:
    """Stable names ``family(k1,k2,...)`` for a block, each key made safe by :func:`safe_key`.

    The one helper that names columns and rows. Parentheses and commas rather than
    brackets because CPLEX's LP format refuses ``[``, ``]`` and ``-``; a name never
    starts with a digit, ``.`` or ``e`` (read as a number in LP files).
    """
    head = family if not re.match(r"[0-9.eE]", family) else f"_{family}"
    return [f"{head}({','.join(name_key(k) for k in key)})" if key else head
            for key in keys]


def name_key(label: object) -> str:
    """One key of a name: a period start by :func:`period_key`, else by :func:`safe_key`."""
    import pandas as pd

    if isinstance(label, pd.Timestamp):
        return period_key(label)
    return safe_key(str(label))


@dataclass(frozen=True)
class Keys:
    """What a block's columns or rows stand for: ``dims`` and one label array per dim."""

    dims: tuple[str, ...]
    labels: tuple[np.ndarray, ...]  # object arrays of str, one per dim, block-long

    @staticmethod
    def of(**dims: np.ndarray) -> Keys:
        """``Keys.of(project=..., cluster=...)`` from label arrays of one length."""
        return Keys(tuple(dims), tuple(np.asarray(v, dtype=object) for v in dims.values()))

    def tuples(self) -> list[tuple]:
        """One key tuple per member of the block."""
        return list(zip(*self.labels, strict=True))


@dataclass(frozen=True)
class MatrixForm:
    """The model in the neutral form every back-end takes: bounds, costs, CSR rows.

    Row i holds ``index[start[i]:start[i+1]]`` with ``value[...]``; columns are
    sorted within a row. ``integer`` marks integer columns; ``maximize`` the sense.
    """

    col_lower: np.ndarray
    col_upper: np.ndarray
    col_cost: np.ndarray
    integer: np.ndarray
    row_lower: np.ndarray
    row_upper: np.ndarray
    start: np.ndarray
    index: np.ndarray
    value: np.ndarray
    maximize: bool

    @property
    def n_cols(self) -> int:
        """Columns."""
        return len(self.col_cost)

    @property
    def n_rows(self) -> int:
        """Rows."""
        return len(self.row_lower)

    @property
    def is_mip(self) -> bool:
        """Whether any column is integer."""
        return bool(self.integer.any())


@dataclass
class LpBuilder:
    """Collects column and row blocks; :meth:`matrix` and :meth:`to_highs` make the model."""

    col_lower: list[np.ndarray] = field(default_factory=list)
    col_upper: list[np.ndarray] = field(default_factory=list)
    col_cost: list[np.ndarray] = field(default_factory=list)
    col_integer: list[np.ndarray] = field(default_factory=list)
    row_lower: list[np.ndarray] = field(default_factory=list)
    row_upper: list[np.ndarray] = field(default_factory=list)
    entries: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)
    columns: dict[str, slice] = field(default_factory=dict)
    rows: dict[str, slice] = field(default_factory=dict)
    column_keys: dict[str, Keys] = field(default_factory=dict)
    row_keys: dict[str, Keys] = field(default_factory=dict)
    n_cols: int = 0
    n_rows: int = 0

    def add_columns(self, family: str, lower, upper, cost, integer: bool = False,
                    keys: Keys | None = None) -> np.ndarray:
        """Add a block of columns; return their global indices."""
        lower = np.asarray(lower, dtype=float)
        n = lower.size
        self.col_integer.append(np.full(n, integer, dtype=bool))
        self.col_lower.append(lower)
        self.col_upper.append(np.broadcast_to(np.asarray(upper, dtype=float), n).copy())
        self.col_cost.append(np.broadcast_to(np.asarray(cost, dtype=float), n).copy())
        self.columns[family] = slice(self.n_cols, self.n_cols + n)
        if keys is not None:
            self.column_keys[family] = keys
        self.n_cols += n
        return np.arange(self.columns[family].start, self.columns[family].stop)

    def add_rows(self, family: str, lower, upper, row, col, value,
                 keys: Keys | None = None) -> slice:
        """Add a block of rows from triplets; ``row`` is local to the block (0..n−1)."""
        lower = np.asarray(lower, dtype=float)
        n = lower.size
        self.row_lower.append(lower)
        self.row_upper.append(np.broadcast_to(np.asarray(upper, dtype=float), n).copy())
        self.entries.append((np.asarray(row, dtype=np.int64) + self.n_rows,
                             np.asarray(col, dtype=np.int64),
                             np.broadcast_to(np.asarray(value, dtype=float), len(row)).copy()))
        self.rows[family] = slice(self.n_rows, self.n_rows + n)
        if keys is not None:
            self.row_keys[family] = keys
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

    def matrix(self, maximize: bool = True) -> MatrixForm:
        """The model in the neutral matrix form (row-wise, built in bulk)."""
        def cat(blocks: list[np.ndarray], dtype=float) -> np.ndarray:
            return np.concatenate(blocks) if blocks else np.zeros(0, dtype=dtype)

        if self.entries:
            row = np.concatenate([r for r, _, _ in self.entries])
            col = np.concatenate([c for _, c, _ in self.entries])
            val = np.concatenate([v for _, _, v in self.entries])
        else:
            row = col = np.zeros(0, dtype=np.int64)
            val = np.zeros(0)
        order = np.lexsort((col, row))
        start = np.searchsorted(row[order], np.arange(self.n_rows + 1)).astype(np.int64)
        return MatrixForm(cat(self.col_lower), cat(self.col_upper), cat(self.col_cost),
                          cat(self.col_integer, bool), cat(self.row_lower), cat(self.row_upper),
                          start, col[order], val[order], maximize)

    def to_highs(self, maximize: bool = True) -> highspy.HighsLp:
        """The model as a HiGHS LP."""
        return highs_lp(self.matrix(maximize))

    def _names(self, blocks: dict[str, slice], keys: dict[str, Keys], count: int,
               prefix: str) -> list[str]:
        out = [""] * count
        for family, span in blocks.items():
            block_keys = keys.get(family)
            tuples = (block_keys.tuples() if block_keys is not None
                      else [(str(i),) for i in range(span.stop - span.start)])
            out[span] = names(prefix + family, tuples)
        for i, name in enumerate(out):  # CPLEX LP reads at most 255 characters
            if len(name) > MAX_NAME:
                tail = f"${i}"
                out[i] = name[:MAX_NAME - len(tail)] + tail
        return out

    def column_names(self) -> list[str]:
        """Every column's name, ``x_<family>(keys)``: ``x_guaranteed(p1,h100~a,20261116)``."""
        return self._names(self.columns, self.column_keys, self.n_cols, "x_")

    def row_names(self) -> list[str]:
        """Every row's name, ``<family>(keys)``: ``capacity(h100~a,20261116)``."""
        return self._names(self.rows, self.row_keys, self.n_rows, "")


def highs_lp(form: MatrixForm) -> highspy.HighsLp:
    """A HiGHS LP from the matrix form."""
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = form.n_cols, form.n_rows
    lp.col_cost_ = form.col_cost
    lp.col_lower_ = form.col_lower
    lp.col_upper_ = form.col_upper
    lp.row_lower_ = form.row_lower
    lp.row_upper_ = form.row_upper
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = form.n_cols, form.n_rows
    lp.a_matrix_.start_ = form.start.astype(np.int32)
    lp.a_matrix_.index_ = form.index.astype(np.int32)
    lp.a_matrix_.value_ = form.value
    if form.is_mip:
        lp.integrality_ = [highspy.HighsVarType.kInteger if i else
                           highspy.HighsVarType.kContinuous for i in form.integer]
    lp.sense_ = highspy.ObjSense.kMaximize if form.maximize else highspy.ObjSense.kMinimize
    return lp
