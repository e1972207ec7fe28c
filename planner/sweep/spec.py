"""``SPEC.toml`` of ``planner sweep``: a grid of plans or replays, read and checked once.

A spec names a base scenario, the kind of run (``plan`` or ``replay``) and its axes; the
cells are the product of the axes, in the order written (the last axis varies fastest)::

    kind = "replay"                     # or "plan"
    scenario = "../data/philly"         # paths are relative to the spec's folder

    [axes]
    model = ["default", "strict-budgets"]           # names in models/ or .toml paths
    lookback_days = [7, 14]                          # the model's window (kind = "window")
    min_runtime_cap_hours = [4, 8]                   # the contract's cap
    budget_shift = [{}, {from = "multimodal", to = "science", percent = 10}]
    seed = [0, 1, 2]                                 # HiGHS's random_seed (solver.random_seed)
    trace = ["philly.csv"]                           # replay only: trace CSVs
    policy = ["priority", "lookback"]                # replay only

``budget_shift`` ``{}`` is "no shift"; ``{from = A, to = B, percent = X}`` takes X % of
every budget under org node A and gives the sum to the budgets under B, in proportion
to them. Every problem is an :class:`~planner.errors.InputError` naming the spec file,
the line and the key; the scenario, models and traces are checked by their own readers.
"""

from __future__ import annotations

import itertools
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planner.config import MAX_RANDOM_SEED, is_seed
from planner.errors import InputError, InputProblem
from planner.inputs.read import MISSING, probe_file, read_input

KINDS = ("plan", "replay")
#: The axes in the table's column order; which kinds take each.
AXES = ("model", "lookback_days", "min_runtime_cap_hours", "budget_shift", "seed", "trace",
        "policy")
REPLAY_ONLY = ("trace", "policy")
TOP_KEYS = ("kind", "scenario", "name", "axes")
#: The most cells one spec may ask for (a typo such as 1,000 values on an axis is refused).
MAX_CELLS = 10_000
MAX_LOOKBACK_DAYS = 366.0
MAX_CAP_HOURS = 8_784.0


@dataclass(frozen=True, order=True)
class BudgetShift:
    """Move ``percent`` % of the budgets under ``source`` to those under ``target``."""

    source: str = ""
    target: str = ""
    percent: float = 0.0

    @property
    def is_none(self) -> bool:
        """Whether this is the "no shift" value (``{}``)."""
        return not self.source

    def label(self) -> str:
        """``none`` or ``A->B 10%`` (the table's cell text)."""
        return "none" if self.is_none else f"{self.source}->{self.target} {self.percent:g}%"


@dataclass(frozen=True)
class Cell:
    """One point of the grid: each axis' value (``None``: the axis is not swept)."""

    index: int
    model: str
    lookback_days: float | None = None
    min_runtime_cap_hours: float | None = None
    budget_shift: BudgetShift | None = None
    seed: int | None = None  # HiGHS's random_seed: which of the LPs' optimal vertices
    trace: str | None = None  # the path as written in the spec
    policy: str | None = None

    def axis_text(self, axis: str) -> str:
        """The value of ``axis`` as the table shows it."""
        value = getattr(self, axis)
        if value is None:
            return ""
        if isinstance(value, BudgetShift):
            return value.label()
        if isinstance(value, float):
            return f"{value:g}"
        return str(value)


@dataclass(frozen=True)
class SweepSpec:
    """A checked spec: where it came from, the kind, the scenario and the cells."""

    path: Path
    name: str
    kind: str
    scenario: Path
    axes: tuple[str, ...]  # the axes the spec names, in AXES order
    values: dict[str, tuple[Any, ...]]
    cells: tuple[Cell, ...]

    def resolve(self, written: str) -> Path:
        """A path written in the spec, relative to the spec's folder."""
        path = Path(written)
        return path if path.is_absolute() else self.path.parent / path


def _line(text: str, key: str, after: int = 0) -> int | None:
    """The first line (1-based) at or after ``after`` that sets ``key``."""
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if number >= after and (stripped == key or stripped.startswith((f"{key} ", f"{key}="))):
            return number
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


class _Checker:
    """Collects the spec's problems, each located at its key's line."""

    def __init__(self, label: str, text: str):
        self.label = label
        self.text = text
        self.axes_line = _line(text, "[axes]") or 0
        self.problems: list[InputProblem] = []

    def add(self, key: str, message: str) -> None:
        short = key.rsplit(".", 1)[-1]
        after = self.axes_line if key.startswith("axes.") else 0
        line = _line(self.text, short, after) or (
            self.axes_line or None if key.startswith("axes") else None)
        self.problems.append(InputProblem(self.label, line, key, message))

    def values(self, raw: dict, axis: str) -> list[Any] | None:
        value = raw[axis]
        if not isinstance(value, list) or not value:
            self.add(f"axes.{axis}", "must be a non-empty array of values, e.g. "
                                     f"{axis} = [{_EXAMPLES[axis]}]")
            return None
        return value


_EXAMPLES = {"model": '"default", "strict-budgets"', "lookback_days": "7, 14",
             "min_runtime_cap_hours": "4, 8",
             "budget_shift": '{}, {from = "area-a", to = "area-b", percent = 10}',
             "seed": "0, 1, 2", "trace": '"philly.csv"', "policy": '"priority", "lookback"'}


def _check_axis(check: _Checker, axis: str, values: list[Any]) -> tuple[Any, ...]:
    """The typed values of one axis; a problem per wrong value."""
    key = f"axes.{axis}"
    out: list[Any] = []
    for value in values:
        if axis in ("model", "trace", "policy"):
            if not isinstance(value, str) or not value.strip():
                check.add(key, f"each value must be a non-empty string, got {value!r}")
                continue
            out.append(value)
        elif axis == "seed":
            if not is_seed(value):
                check.add(key, f"each value must be a whole number in [0, {MAX_RANDOM_SEED}], "
                               f"got {value!r}")
                continue
            out.append(value)
        elif axis in ("lookback_days", "min_runtime_cap_hours"):
            number = _number(value)
            low, high = ((0.0, MAX_LOOKBACK_DAYS) if axis == "lookback_days"
                         else (0.0, MAX_CAP_HOURS))
            if number is None or not low <= number <= high or (
                    axis == "min_runtime_cap_hours" and number == 0):
                bounds = ("in [0, 366] days" if axis == "lookback_days"
                          else "in (0, 8784] hours")
                check.add(key, f"each value must be a number {bounds}, got {value!r}")
                continue
            out.append(number)
        else:
            shift = _check_shift(check, key, value)
            if shift is not None:
                out.append(shift)
    texts = [v.label() if isinstance(v, BudgetShift) else repr(v) for v in out]
    repeated = sorted({t for t in texts if texts.count(t) > 1})
    if repeated:
        check.add(key, f"repeats {', '.join(repeated)}: each value once")
    return tuple(out)


def _check_shift(check: _Checker, key: str, value: Any) -> BudgetShift | None:
    if not isinstance(value, dict):
        check.add(key, f"each value must be a table, {{}} or {{from = \"A\", to = \"B\", "
                       f"percent = 10}}, got {value!r}")
        return None
    if not value:
        return BudgetShift()
    unknown = sorted(set(value) - {"from", "to", "percent"})
    missing = sorted({"from", "to", "percent"} - set(value))
    if unknown or missing:
        check.add(key, "a shift has exactly the keys from, to and percent"
                       + (f"; unknown: {', '.join(unknown)}" if unknown else "")
                       + (f"; missing: {', '.join(missing)}" if missing else ""))
        return None
    source, target, percent = value["from"], value["to"], _number(value["percent"])
    if not isinstance(source, str) or not isinstance(target, str) or not source or not target:
        check.add(key, "from and to must be org node ids (areas, teams or projects)")
        return None
    if percent is None or not 0 < percent <= 100:
        check.add(key, f"percent must be a number in (0, 100], got {value['percent']!r}")
        return None
    return BudgetShift(source, target, percent)


def _read_text(path: Path) -> str:
    label = path.name
    if probe_file(path) == MISSING:
        raise InputError([InputProblem(label, None, None, "no such sweep spec")])
    data, problem = read_input(path, label)
    if problem is not None:
        raise InputError([problem])
    assert data is not None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError([InputProblem(label, None, None,
                                       f"not UTF-8 text ({err.reason})")]) from None


def load_spec(path: str | Path) -> SweepSpec:
    """Read and check ``SPEC.toml``'s shape; raise :class:`InputError` listing every problem.

    What needs the inputs (org ids of a shift, models, traces, policies) is checked by
    :func:`planner.sweep.cells.prepare`.
    """
    from planner.config import toml_error_line

    path = Path(path)
    label = path.name
    text = _read_text(path)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise InputError([InputProblem(label, toml_error_line(err), None,
                                       f"not valid TOML: {err}")]) from None
    except RecursionError:
        raise InputError([InputProblem(label, None, None, "not valid TOML: nested deeper "
                                                          "than a sweep spec holds")]) from None
    check = _Checker(label, text)
    for key in sorted(set(raw) - set(TOP_KEYS)):
        check.add(key, f"unknown key (known: {', '.join(TOP_KEYS)})")
    kind = raw.get("kind")
    if kind not in KINDS:
        check.add("kind", f"must be \"plan\" or \"replay\", got {kind!r}" if "kind" in raw
                  else "missing: kind = \"plan\" or kind = \"replay\"")
    scenario = raw.get("scenario")
    if not isinstance(scenario, str) or not scenario.strip():
        check.add("scenario", "must be the scenario folder or .xlsx workbook, as a string "
                              "(relative to the spec's folder)")
    name = raw.get("name", path.stem)
    if not isinstance(name, str):
        check.add("name", "must be a string")
        name = path.stem
    axes_raw = raw.get("axes", {})
    if not isinstance(axes_raw, dict):
        check.add("axes", "must be a table: [axes]")
        axes_raw = {}
    for key in sorted(set(axes_raw) - set(AXES)):
        check.add(f"axes.{key}", f"unknown axis (known: {', '.join(AXES)})")
    values: dict[str, tuple[Any, ...]] = {}
    for axis in AXES:
        if axis in axes_raw:
            listed = check.values(axes_raw, axis)
            if listed is not None:
                values[axis] = _check_axis(check, axis, listed)
    if kind == "plan":
        for axis in REPLAY_ONLY:
            if axis in axes_raw:
                check.add(f"axes.{axis}", "replays only (kind = \"replay\"); a plan has "
                                          "no trace or policy")
    if kind == "replay":
        for axis in REPLAY_ONLY:
            if axis not in axes_raw:
                check.add("axes", f"a replay needs the axis {axis} (e.g. {axis} = "
                                  f"[{_EXAMPLES[axis]}])")
    count = math.prod(len(v) for v in values.values()) if values else 1
    if count > MAX_CELLS:
        check.add("axes", f"{count:,} cells; at most {MAX_CELLS:,}")
    if check.problems:
        raise InputError(check.problems)
    values.setdefault("model", ("default",))
    axes = tuple(a for a in AXES if a in values)
    cells = tuple(
        Cell(index=i, **dict(zip(axes, combo, strict=True)))
        for i, combo in enumerate(itertools.product(*(values[a] for a in axes))))
    return SweepSpec(path=path, name=name, kind=str(kind), scenario=Path(str(scenario)),
                     axes=axes, values=values, cells=cells)
