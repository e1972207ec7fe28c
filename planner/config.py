"""Planning models: the user-chosen options in ``planner/models/*.toml``.

The bundled models are package data, read with :mod:`importlib.resources`, so a wheel
installed anywhere finds them; ``--model FILE.toml`` reads a file of your own.

A planning model holds the objective weights, the lookback kind, the time-slicing
contract terms the executor must honour, and solver options. Unknown keys are an
error, as are weights that would let a soft goal override a hard rule (see
``docs/explanation/model.md``, "Why the weights are ordered").
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, fields, replace
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from planner.errors import InputError, InputProblem
from planner.inputs.read import MISSING, probe_file, read_input

MODELS_PACKAGE = ("planner", "models")  # planner/models/*.toml, shipped in the wheel


def bundled_models() -> dict[str, Traversable]:
    """The bundled planning models by name (``default``, ``strict-budgets``)."""
    folder = resources.files(MODELS_PACKAGE[0]).joinpath(MODELS_PACKAGE[1])
    return {entry.name.removesuffix(".toml"): entry for entry in folder.iterdir()
            if entry.name.endswith(".toml") and entry.is_file()}


@dataclass(frozen=True)
class ObjectiveWeights:
    """Objective coefficients, per GPU-hour unless said otherwise."""

    guaranteed: float = 4.0  # reward per guaranteed GPU-hour granted
    opportunistic: float = 1.0  # reward per opportunistic GPU-hour granted
    fair_share: float = 1.0  # penalty per GPU-hour short of the fair-share target
    pacing: float = 0.5  # penalty per NGH ahead of even budget pace, averaged over periods
    churn: float = 0.25  # penalty per GPU-hour taken away from the previous plan
    reservation_lateness: float = 0.001  # share of a reservation's value lost per period of delay
    reservation_displacement: float = 0.1  # weight of elastic GPU-hours a start pushes out


@dataclass(frozen=True)
class LookbackOptions:
    """How past usage offsets the fair share."""

    kind: str = "window"  # "window": scenario lookback_days; "decay": exponential half-life
    window_days: float | None = None  # overrides the scenario's lookback_days when set
    half_life_days: float = 7.0  # for kind = "decay"


@dataclass(frozen=True)
class ContractTerms:
    """The time-slicing contract the executor enforces; copied into ``plan.json``."""

    min_runtime_cap_hours: float = 8.0  # the most protected runtime a job may claim
    max_reservation_hours: float = 168.0  # the longest reservation accepted
    frozen_periods: int = 1  # leading periods kept from ``--previous`` on replan
    fill_slice_hours: float = 1.0  # protection of fill/opportunistic work (≤ its min runtime)


@dataclass(frozen=True)
class SolverOptions:
    """Time limit, gap and threads for the solvers."""

    time_limit_seconds: float = 60.0  # wall-clock seconds for the whole solve (--time-limit)
    mip_gap: float = 0.005  # relative gap at which reservation placement stops (--mip-gap)
    threads: int = 2  # solver threads
    reservation_time_share: float = 0.5  # part of the time limit given to reservation placement
    random_seed: int = 0  # HiGHS's random_seed: picks among equally optimal LP vertices
    lp_solver: str = "highs"  # the LP/MIP stages' solver: highs, or any PuLP reaches (cbc, …)
    # the planning grid: "" the uniform grid of the scenario's period_hours; else tiers of
    # "HOURSh*COUNT", the last one "HOURSh" repeated to quarter end (parse_period_grid)
    period_grid: str = ""
    # what stops the reservation stage and the LP: "time" (time_limit_seconds, shared as
    # the machine's load allows), "work" (counts of nodes, rounds and moves: the same
    # inputs give the same plan whatever the load; planner.model.reservations.WorkLimits),
    # or "" for the command's default (planner run: time, planner cycle: work)
    limits: str = ""


#: ``solver.limits``: what stops the solve (see :class:`SolverOptions`).
LIMITS = ("time", "work")


@dataclass(frozen=True)
class ModelConfig:
    """A whole planning model."""

    name: str = "default"  # the model's name, written into plan.json's model
    description: str = ""  # one line, for people
    objective: ObjectiveWeights = ObjectiveWeights()
    lookback: LookbackOptions = LookbackOptions()
    contract: ContractTerms = ContractTerms()
    solver: SolverOptions = SolverOptions()
    source: str = ""


_SECTIONS = {
    "objective": ObjectiveWeights,
    "lookback": LookbackOptions,
    "contract": ContractTerms,
    "solver": SolverOptions,
}


def resolve_model_path(name_or_path: str | Path) -> Path | Traversable:
    """A model given by name (``default``: bundled) or by path (``my.toml``)."""
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        return path
    bundled = bundled_models()
    return bundled.get(str(name_or_path), path.with_name(f"{path.name}.toml"))


def toml_error_line(err: tomllib.TOMLDecodeError) -> int | None:
    """The line a TOML error is on (Python 3.11's error carries it only in its text)."""
    found = re.search(r"at line (\d+)", str(err))
    return int(found.group(1)) if found else None


def _line_of(text: str, key: str) -> int | None:
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip().startswith(f"{key} ") or line.strip().startswith(f"{key}="):
            return number
    return None


def _check_value(
    cls: type, key: str, value: Any, label: str, line: int | None
) -> tuple[Any, list[InputProblem]]:
    default = {f.name: f.default for f in fields(cls)}[key]
    want = type(default) if default is not None else float
    if want is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, want) or isinstance(value, bool) != isinstance(default, bool):
        message = f"must be a {want.__name__}, got {value!r}"
        return default, [InputProblem(label, line, key, message)]
    if isinstance(value, float) and not math.isfinite(value):
        return default, [InputProblem(label, line, key, f"must be a finite number, got {value!r}")]
    if isinstance(value, int | float) and value < 0:
        return default, [InputProblem(label, line, key, f"must be ≥ 0, got {value!r}")]
    return value, []


#: Upper bounds of model numbers (each a sane limit): the solver's time limit a day, the
#: lookback at most a year like the scenario's, contract hours at most a year.
MAX_TIME_LIMIT_SECONDS = 86_400.0
MAX_DAYS = 366.0
MAX_WEIGHT = 1e6
MAX_RANDOM_SEED = 2**31 - 1  # HiGHS's random_seed is an int32


def is_seed(value: object) -> bool:
    """Whether ``value`` is a HiGHS ``random_seed``: a whole number in [0, MAX_RANDOM_SEED]."""
    return isinstance(value, int) and not isinstance(value, bool) and \
        0 <= value <= MAX_RANDOM_SEED


def with_limits(model: ModelConfig, limits: str) -> ModelConfig:
    """``model`` with ``solver.limits`` set to ``limits`` ("time" or "work")."""
    return replace(model, solver=replace(model.solver, limits=limits))


def with_seed(model: ModelConfig, seed: int) -> ModelConfig:
    """``model`` with HiGHS's ``solver.random_seed`` set to ``seed``."""
    return replace(model, solver=replace(model.solver, random_seed=seed))


def _check_ordering(config: ModelConfig, label: str) -> list[InputProblem]:
    """Soft goals must never outweigh a hard rule (docs/explanation/model.md, ordering)."""
    w = config.objective
    problems = []
    if w.opportunistic <= w.churn:
        problems.append(InputProblem(label, None, "opportunistic",
                                     "must exceed churn, or idle GPUs could stay idle (rule 5)"))
    if w.guaranteed - w.opportunistic <= w.pacing + w.churn:
        problems.append(InputProblem(
            label, None, "guaranteed",
            "guaranteed − opportunistic must exceed pacing + churn, or opportunistic work "
            "could take capacity a project within budget wants (rule 4)"))
    if config.lookback.kind not in ("window", "decay"):
        problems.append(InputProblem(label, None, "kind", "must be \"window\" or \"decay\""))
    if not 0 < config.solver.reservation_time_share < 1:
        problems.append(InputProblem(label, None, "reservation_time_share", "must be in (0, 1)"))
    if config.solver.threads < 1:
        problems.append(InputProblem(label, None, "threads", "must be ≥ 1"))
    if not is_seed(config.solver.random_seed):
        problems.append(InputProblem(label, None, "random_seed",
                                     f"must be a whole number in [0, {MAX_RANDOM_SEED}]"))
    if config.solver.limits not in ("", *LIMITS):
        problems.append(InputProblem(label, None, "limits",
                                     f"must be \"time\" or \"work\", got "
                                     f"{config.solver.limits!r}"))
    if config.solver.period_grid:
        try:
            parse_period_grid(config.solver.period_grid)
        except ValueError as err:
            problems.append(InputProblem(label, None, "period_grid", str(err)))
    problems += [InputProblem(label, None, key, message) for key, message in
                 solver_option_problems(config.solver.time_limit_seconds,
                                        config.solver.mip_gap)]
    lookback, contract = config.lookback, config.contract
    if not 0 < lookback.half_life_days <= MAX_DAYS:
        problems.append(InputProblem(label, None, "half_life_days",
                                     f"must be > 0 and ≤ {MAX_DAYS:g} days"))
    if lookback.window_days is not None and lookback.window_days > MAX_DAYS:
        problems.append(InputProblem(label, None, "window_days",
                                     f"must be ≤ {MAX_DAYS:g} days"))
    for key in ("min_runtime_cap_hours", "max_reservation_hours"):
        if getattr(contract, key) > MAX_DAYS * 24:
            problems.append(InputProblem(label, None, key, f"must be ≤ {MAX_DAYS * 24:g} h"))
    if contract.frozen_periods > 10_000:
        problems.append(InputProblem(label, None, "frozen_periods", "must be ≤ 10000"))
    problems += [InputProblem(label, None, f.name, f"must be ≤ {MAX_WEIGHT:g}")
                 for f in fields(w) if getattr(w, f.name) > MAX_WEIGHT]
    return problems


_TIER = re.compile(r"(\d+(?:\.\d+)?)\s*h(?:\s*\*\s*(\d+))?")
#: The most tiers and the longest period a mixed grid may name (a sane limit: a quarter).
MAX_TIERS = 16
MAX_PERIOD_HOURS = 24.0 * 92


def parse_period_grid(text: str) -> tuple[tuple[float, int | None], ...]:
    """Tiers ``(hours, count)`` of a mixed period grid; ``count`` None: to quarter end.

    ``"1h*48, 24h*13, 168h"``: 48 periods of 1 h from ``as_of``, then 13 of 24 h, then
    periods of 168 h until ``quarter_end``. Only the last tier may omit its count; when
    every tier has one and the grid ends before quarter end, the last tier repeats.
    ``""`` is the uniform grid (no tiers). Raises ValueError saying what is wrong.
    """
    if not text.strip():
        return ()
    tiers: list[tuple[float, int | None]] = []
    parts = [part.strip() for part in text.split(",")]
    if len(parts) > MAX_TIERS:
        raise ValueError(f"at most {MAX_TIERS} tiers, got {len(parts)}")
    for i, part in enumerate(parts):
        found = _TIER.fullmatch(part)
        if found is None:
            raise ValueError(f"tier {part!r} is not HOURSh*COUNT (e.g. \"1h*48, 24h*13, 168h\")")
        hours = float(found.group(1))
        count = int(found.group(2)) if found.group(2) is not None else None
        if not 0 < hours <= MAX_PERIOD_HOURS:
            raise ValueError(f"tier {part!r}: hours must be > 0 and ≤ {MAX_PERIOD_HOURS:g}")
        if count is not None and not 0 < count <= 100_000:
            raise ValueError(f"tier {part!r}: count must be ≥ 1 and ≤ 100000")
        if count is None and i != len(parts) - 1:
            raise ValueError(f"tier {part!r}: only the last tier may omit its *COUNT")
        tiers.append((hours, count))
    return tuple(tiers)


def solver_option_problems(time_limit: float | None,
                           mip_gap: float | None) -> list[tuple[str, str]]:
    """What is wrong with a time limit (finite, > 0, ≤ a day) and a MIP gap (in [0, 1)).

    Shared by the model file's ``[solver]`` and the ``--time-limit`` / ``--mip-gap`` options.
    """
    problems = []
    if time_limit is not None and not (
            math.isfinite(time_limit) and 0 < time_limit <= MAX_TIME_LIMIT_SECONDS):
        problems.append(("time_limit_seconds",
                         f"must be a number of seconds > 0 and ≤ {MAX_TIME_LIMIT_SECONDS:g}, "
                         f"got {time_limit!r}"))
    if mip_gap is not None and not (math.isfinite(mip_gap) and 0 <= mip_gap < 1):
        problems.append(("mip_gap", f"must be a relative gap in [0, 1), got {mip_gap!r}"))
    return problems


def load_model(name_or_path: str | Path = "default") -> ModelConfig:
    """Read and check a planning model; raise :class:`InputError` listing every problem."""
    path = resolve_model_path(name_or_path)
    label = path.name
    if probe_file(path) == MISSING:
        known = ", ".join(sorted(bundled_models()))
        raise InputError([InputProblem(label, None, None,
                                       f"no such planning model (known: {known})")])
    data, problem = read_input(path, label)
    if problem is not None:
        raise InputError([problem])
    assert data is not None
    try:
        text = data.decode("utf-8")
        raw = tomllib.loads(text)
    except UnicodeDecodeError as err:
        raise InputError([InputProblem(label, None, None,
                                       f"not UTF-8 text ({err.reason})")]) from None
    except tomllib.TOMLDecodeError as err:
        raise InputError([InputProblem(label, toml_error_line(err), None,
                                       f"not valid TOML: {err}")]) from None
    except RecursionError:
        raise InputError([InputProblem(label, None, None, "not valid TOML: nested deeper "
                                                          "than a model holds")]) from None
    problems: list[InputProblem] = []
    top: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _SECTIONS:
            if not isinstance(value, dict):
                problems.append(InputProblem(label, _line_of(text, key), key, "must be a table"))
                continue
            section_cls = _SECTIONS[key]
            known = {f.name for f in fields(section_cls)}
            kwargs = {}
            for sub, subvalue in value.items():
                line = _line_of(text, sub)
                if sub not in known:
                    problems.append(InputProblem(
                        label, line, f"{key}.{sub}",
                        f"unknown key (known: {', '.join(sorted(known))})"))
                    continue
                kwargs[sub], found = _check_value(section_cls, sub, subvalue, label, line)
                problems += found
            top[key] = section_cls(**kwargs)
        elif key in ("name", "description"):
            if not isinstance(value, str):
                problems.append(InputProblem(label, _line_of(text, key), key, "must be a string"))
            else:
                top[key] = value
        else:
            problems.append(InputProblem(
                label, _line_of(text, key), key,
                "unknown key (known: name, description, " + ", ".join(_SECTIONS) + ")"))
    config = ModelConfig(**top, source=str(path))
    problems += _check_ordering(config, label)
    if problems:
        raise InputError(problems)
    return config
