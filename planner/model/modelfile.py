"""The built LP/MIP as files an operations researcher opens in their own tools.

``model_files(builder, stem)`` returns, as bytes (the caller writes them atomically):

- ``<stem>.mps``: free MPS (names are longer than fixed MPS's 8 characters);
- ``<stem>.lp``: CPLEX LP format, the same model and the same names;
- ``<stem>-names.csv``: one line a column and a row: ``kind, index, name, family``
  and the keys as the planner knows them (``project``, ``cluster``, ``period``,
  ``request``), verbatim, so a name never has to be decoded by hand.

Names come from :func:`planner.model.lp.names` (``capacity(h100~a,20261116)``,
``x_guaranteed(p1,h100~a,20261116)``): safe for both formats, unique, at most 255
characters. Numbers are written with Python's shortest round-trip ``repr``, so the
files hold exactly the model that was solved; same model, same bytes.
"""

from __future__ import annotations

import csv
import io
import math

import numpy as np
import pandas as pd

from planner.model.lp import LpBuilder, MatrixForm
from planner.times import iso

KEY_COLUMNS = ("project", "cluster", "period", "request")


def _num(value: float) -> str:
    text = repr(float(value))
    return "0" if text == "-0.0" else text.removesuffix(".0")


def mps_text(form: MatrixForm, col_names: list[str], row_names: list[str],
             name: str = "planner") -> str:
    """Free MPS: ROWS, COLUMNS (integer columns inside MARKER lines), RHS, RANGES, BOUNDS."""
    lines = [f"NAME {name}", "OBJSENSE", "    MAX" if form.maximize else "    MIN", "ROWS",
             " N  obj"]
    kinds = []
    for lo, up in zip(form.row_lower, form.row_upper, strict=True):
        if math.isfinite(lo) and lo == up:
            kinds.append("E")
        elif math.isfinite(lo):
            kinds.append("G")
        elif math.isfinite(up):
            kinds.append("L")
        else:
            kinds.append("N")  # a free row: readers keep or drop it, it binds nothing
    lines += [f" {kind}  {row}" for kind, row in zip(kinds, row_names, strict=True)]
    lines.append("COLUMNS")
    rows_of = np.repeat(np.arange(form.n_rows), np.diff(form.start))
    order = np.lexsort((rows_of, form.index))  # column-wise
    col_start = np.searchsorted(form.index[order], np.arange(form.n_cols + 1))
    in_integer = False
    for j in range(form.n_cols):
        if form.integer[j] != in_integer:
            marker = "INTORG" if form.integer[j] else "INTEND"
            lines.append(f"    MARKER  'MARKER'  '{marker}'")
            in_integer = bool(form.integer[j])
        column = col_names[j]
        entries = order[col_start[j]:col_start[j + 1]]
        if form.col_cost[j] != 0 or len(entries) == 0:
            lines.append(f"    {column}  obj  {_num(form.col_cost[j])}")
        lines += [f"    {column}  {row_names[rows_of[e]]}  {_num(form.value[e])}"
                  for e in entries]
    if in_integer:
        lines.append("    MARKER  'MARKER'  'INTEND'")
    lines.append("RHS")
    for i, kind in enumerate(kinds):
        rhs = form.row_upper[i] if kind == "L" else form.row_lower[i]
        if kind != "N" and rhs != 0:
            lines.append(f"    rhs  {row_names[i]}  {_num(rhs)}")
    ranged = [i for i, kind in enumerate(kinds)
              if kind == "G" and math.isfinite(form.row_upper[i])]
    if ranged:
        lines.append("RANGES")
        lines += [f"    rng  {row_names[i]}  {_num(form.row_upper[i] - form.row_lower[i])}"
                  for i in ranged]
    lines.append("BOUNDS")
    for j in range(form.n_cols):
        lo, up, column = form.col_lower[j], form.col_upper[j], col_names[j]
        if lo == up:
            lines.append(f" FX bnd  {column}  {_num(lo)}")
            continue
        # integer columns always get both bounds: old readers take a bare one as binary
        if math.isinf(lo):
            lines.append(f" MI bnd  {column}")
        elif lo != 0 or form.integer[j]:
            lines.append(f" LO bnd  {column}  {_num(lo)}")
        if math.isfinite(up):
            lines.append(f" UP bnd  {column}  {_num(up)}")
        elif form.integer[j]:
            lines.append(f" PL bnd  {column}")
    lines.append("ENDATA")
    return "\n".join(lines) + "\n"


def _terms(coefficients, names: list[str]) -> list[str]:
    """``+ 3 x`` terms in lines of at most ~300 characters (CPLEX LP reads 560 a line)."""
    lines: list[str] = []
    line = ""
    for c, n in coefficients:
        term = f"{'-' if c < 0 else '+'} {_num(abs(c))} {n}"
        if line and len(line) + len(term) > 300:
            lines.append(line)
            line = ""
        line = f"{line} {term}" if line else term
    if line:
        lines.append(line)
    return lines or ["0 " + names[0]]


def lp_text(form: MatrixForm, col_names: list[str], row_names: list[str]) -> str:
    """CPLEX LP format; a ranged row ``name`` is written as ``name`` (≥) and ``name$hi`` (≤)."""
    lines = ["\\ gpu-planner model; names: see the -names.csv beside this file",
             "Maximize" if form.maximize else "Minimize"]
    objective = [(form.col_cost[j], col_names[j]) for j in np.nonzero(form.col_cost)[0]]
    body = _terms(objective, col_names) if form.n_cols else ["0"]
    lines.append(" obj: " + body[0])
    lines += ["   " + more for more in body[1:]]
    lines.append("Subject To")
    for i in range(form.n_rows):
        span = slice(form.start[i], form.start[i + 1])
        terms = _terms(zip(form.value[span], (col_names[j] for j in form.index[span]),
                           strict=True), col_names)
        lo, up = form.row_lower[i], form.row_upper[i]
        senses = []
        if math.isfinite(lo) and lo == up:
            senses.append((row_names[i], "=", lo))
        else:
            if math.isfinite(lo):
                senses.append((row_names[i], ">=", lo))
            if math.isfinite(up):
                senses.append((f"{row_names[i]}$hi" if senses else row_names[i], "<=", up))
        for name, sense, rhs in senses:
            lines.append(f" {name}: " + terms[0])
            lines += ["   " + more for more in terms[1:]]
            lines.append(f"   {sense} {_num(rhs)}")
    lines.append("Bounds")
    for j in range(form.n_cols):
        lo, up, column = form.col_lower[j], form.col_upper[j], col_names[j]
        if lo == up:
            lines.append(f" {column} = {_num(lo)}")
        elif math.isinf(lo) and math.isinf(up):
            lines.append(f" {column} free")
        elif lo != 0 or math.isfinite(up):
            low = "-infinity" if math.isinf(lo) else _num(lo)
            high = "+infinity" if math.isinf(up) else _num(up)
            lines.append(f" {low} <= {column} <= {high}")
    integer = [col_names[j] for j in np.nonzero(form.integer)[0]]
    if integer:
        lines.append("General")
        lines += [f" {column}" for column in integer]
    lines.append("End")
    return "\n".join(lines) + "\n"


def _label(value: object) -> str:
    return iso(value) if isinstance(value, pd.Timestamp) else str(value)


def names_csv(builder: LpBuilder, col_names: list[str], row_names: list[str]) -> str:
    """The name index: every column and row with its family and keys, verbatim."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(("kind", "index", "name", "family", *KEY_COLUMNS))
    for kind, blocks, keys, all_names in (("column", builder.columns, builder.column_keys,
                                           col_names),
                                          ("row", builder.rows, builder.row_keys, row_names)):
        for family, span in blocks.items():
            block_keys = keys.get(family)
            tuples = block_keys.tuples() if block_keys is not None else None
            dims = block_keys.dims if block_keys is not None else ()
            for offset, index in enumerate(range(span.start, span.stop)):
                labels = dict(zip(dims, tuples[offset], strict=True)) if tuples else {}
                writer.writerow((kind, index, all_names[index], family,
                                 *(_label(labels.get(c, "")) for c in KEY_COLUMNS)))
    return out.getvalue()


def model_files(builder: LpBuilder, stem: str, maximize: bool = True) -> dict[str, bytes]:
    """``{stem}.mps``, ``{stem}.lp`` and ``{stem}-names.csv`` of a built model, as bytes."""
    form = builder.matrix(maximize)
    col_names, row_names = builder.column_names(), builder.row_names()
    return {f"{stem}.mps": mps_text(form, col_names, row_names, stem).encode(),
            f"{stem}.lp": lp_text(form, col_names, row_names).encode(),
            f"{stem}-names.csv": names_csv(builder, col_names, row_names).encode()}
