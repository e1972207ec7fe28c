"""One cell of a sweep: its inputs made concrete, its digest, and running it.

:func:`prepare` reads what the spec names once, in the driver (scenario, models,
traces), checks what needs them (org ids of a budget shift, models, policies, traces)
and makes one :class:`CellInput` per cell. A :class:`CellInput` carries everything a
cell needs (scenario, model, trace frame), so a Ray worker on another machine runs it
without the driver's files. :func:`run_cell` is a plain function: Ray calls it in a
task, and the one-by-one path and the tests call it directly.

A cell's **digest** is the sha256 of everything that decides its result: the kind,
the scenario's ``input_digest``, the planning model's options, the axis values, the
trace file's bytes, the policy and the planner's version. A finished cell is keyed by
it (``DIR/cells/<digest[:16]>/``), so a changed spec cell is never reused.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from planner import __version__
from planner.config import ModelConfig, load_model, with_seed
from planner.errors import InputError, InputProblem
from planner.inputs import Scenario
from planner.sweep.spec import BudgetShift, Cell, SweepSpec

#: Bumped when a cell's result changes meaning for the same inputs (old cells are redone).
CELL_FORMAT = 1

#: The plan's figures in the table, in column order.
PLAN_METRICS = ("status", "mip_gap", "elastic_status", "elastic_objective", "elastic_bound",
                "elastic_gap", "reservations_status", "reservations_gap", "planned_ngh",
                "planned_opportunistic_ngh", "reservations_placed", "reservations_unplaced")


@dataclass(frozen=True)
class CellInput:
    """Everything one cell needs, picklable (sent to a Ray worker as is)."""

    kind: str
    cell: Cell
    digest: str
    scenario: Scenario  # the budget shift and lookback applied
    model: ModelConfig  # the lookback window and runtime cap applied
    trace: pd.DataFrame | None = None  # replay: the trace, runtimes capped

    @property
    def cell_id(self) -> str:
        """The folder name under ``DIR/cells/``: the digest's first 16 hex digits."""
        return self.digest[:16]


def shift_budgets(scenario: Scenario, shift: BudgetShift) -> Scenario:
    """``scenario`` with ``shift.percent`` % of the budgets under ``shift.source`` moved.

    Each budget under the source loses the percentage; the sum goes to the budgets under
    the target in proportion to them. The total is unchanged; the scenario's digest
    becomes the sha256 of the old digest and the shift (its provenance).
    """
    if shift.is_none:
        return scenario
    tree, budgets = scenario.tree, scenario.budgets
    donors = budgets["project"].isin(set(tree.leaves_under(shift.source))).to_numpy()
    takers = budgets["project"].isin(set(tree.leaves_under(shift.target))).to_numpy()
    hours = budgets["gpu_hours"].to_numpy(dtype=float).copy()
    moved = hours[donors] * (shift.percent / 100.0)
    hours[donors] -= moved
    receiving = hours[takers]
    hours[takers] += moved.sum() * receiving / receiving.sum()
    text = f"{scenario.digest}|budget_shift|{shift.source}|{shift.target}|{shift.percent!r}"
    return replace(scenario, budgets=budgets.assign(gpu_hours=hours),
                   digest=hashlib.sha256(text.encode()).hexdigest())


def _shift_problems(scenario: Scenario, shift: BudgetShift, where: InputProblem
                    ) -> list[InputProblem]:
    """Why ``shift`` cannot apply to ``scenario`` (ids, nesting, no budget to move to)."""
    if shift.is_none:
        return []
    tree = scenario.tree

    def problem(message: str) -> InputProblem:
        return replace(where, message=f"{shift.label()}: {message}")

    unknown = [n for n in (shift.source, shift.target) if n not in tree]
    if unknown:
        return [problem(f"unknown org node {', '.join(map(repr, unknown))}; use an id of "
                        "the scenario's org.csv")]
    if shift.source == shift.target or shift.source in tree.ancestors(shift.target) or (
            shift.target in tree.ancestors(shift.source)):
        return [problem("from and to must be separate subtrees (neither inside the other)")]
    budgets = scenario.budgets
    hours = budgets.set_index("project")["gpu_hours"]
    if float(hours.reindex(list(tree.leaves_under(shift.target))).fillna(0).sum()) <= 0:
        return [problem(f"no project under {shift.target!r} holds a budget to share the "
                        "moved GPU-hours in proportion to")]
    return []


def cell_digest(kind: str, cell: Cell, scenario_digest: str, model: ModelConfig,
                trace_digest: str | None) -> str:
    """The sha256 of everything that decides the cell's result (see the module's notes)."""
    body = {
        "format": CELL_FORMAT, "planner_version": __version__, "kind": kind,
        "scenario": scenario_digest,
        "model": {k: v for k, v in asdict(model).items() if k != "source"},
        "lookback_days": cell.lookback_days,
        "min_runtime_cap_hours": cell.min_runtime_cap_hours,
        "budget_shift": asdict(cell.budget_shift) if cell.budget_shift else None,
        "trace": trace_digest, "policy": cell.policy,
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def cell_model(model: ModelConfig, cell: Cell) -> ModelConfig:
    """The planning model with the cell's lookback window, runtime cap and HiGHS seed."""
    if cell.seed is not None:
        model = with_seed(model, cell.seed)
    if cell.lookback_days is not None:
        model = replace(model, lookback=replace(model.lookback, window_days=cell.lookback_days))
    if cell.min_runtime_cap_hours is not None:
        model = replace(model, contract=replace(model.contract,
                                                min_runtime_cap_hours=cell.min_runtime_cap_hours))
    return model


def _models(spec: SweepSpec, check: InputProblem) -> tuple[dict[str, ModelConfig],
                                                            list[InputProblem]]:
    models, problems = {}, []
    for written in spec.values["model"]:
        target = spec.resolve(written) if written.endswith(".toml") else written
        try:
            models[written] = load_model(target)
        except InputError as error:
            problems += [replace(check, message=f"model {written!r}: {p}")
                         for p in error.problems]
            continue
        if "lookback_days" in spec.values and models[written].lookback.kind != "window":
            problems.append(replace(check, message=(
                f"model {written!r} has lookback kind {models[written].lookback.kind!r}; "
                "the lookback_days axis sets a window (kind = \"window\")")))
    return models, problems


def _traces(spec: SweepSpec, scenario: Scenario
            ) -> tuple[dict[str, tuple[pd.DataFrame, str]], list[InputProblem]]:
    """Each trace read once, as written (the replay caps it), with the sha256 of its bytes."""
    from planner.inputs.read import read_input
    from planner.simulate.trace import trace_problems

    traces, problems = {}, []
    for written in spec.values.get("trace", ()):
        path = spec.resolve(written)
        data, problem = read_input(path, path.name)
        if problem is not None:
            problems.append(problem)
            continue
        assert data is not None
        frame, found = trace_problems(path, scenario)
        problems += found
        if frame is not None:
            traces[written] = (frame, hashlib.sha256(data).hexdigest())
    return traces, problems


def prepare(spec: SweepSpec, progress=None) -> list[CellInput]:
    """Read the spec's inputs once, check them, and make every cell's input.

    Raises :class:`InputError` with every problem (spec keys at their line; the
    scenario's, a model's or a trace's own problems as their readers name them).
    """
    from planner.inputs.load import load_scenario
    from planner.simulate.run import POLICIES
    from planner.sweep.spec import _line, _read_text

    say = progress or (lambda _text: None)
    label = spec.path.name
    text = _read_text(spec.path)  # the stat-before-open rule, as load_spec read it
    axes_line = _line(text, "[axes]") or 0

    def at(key: str) -> InputProblem:
        line = _line(text, key.rsplit(".", 1)[-1], axes_line if key.startswith("axes.") else 0)
        return InputProblem(label, line, key, "")

    say("loading the scenario")
    scenario = load_scenario(spec.resolve(str(spec.scenario)))
    models, problems = _models(spec, at("axes.model"))
    for shift in spec.values.get("budget_shift", ()):
        problems += _shift_problems(scenario, shift, at("axes.budget_shift"))
    unknown = [p for p in spec.values.get("policy", ()) if p not in POLICIES]
    if unknown:
        problems.append(replace(at("axes.policy"), message=(
            f"unknown policy {', '.join(map(repr, unknown))}; choose from "
            f"{', '.join(POLICIES)}")))
    if spec.values.get("trace"):
        say("reading the traces")
    traces, found = _traces(spec, scenario)
    problems += found
    if problems:
        raise InputError(problems)
    shifted = {shift: shift_budgets(scenario, shift)
               for shift in spec.values.get("budget_shift", (BudgetShift(),))}
    inputs = []
    for cell in spec.cells:
        base = shifted[cell.budget_shift or BudgetShift()]
        if cell.lookback_days is not None:
            base = replace(base, config=replace(base.config, lookback_days=cell.lookback_days))
        model = cell_model(models[cell.model], cell)
        frame, trace_digest = traces.get(cell.trace or "", (None, None))
        digest = cell_digest(spec.kind, cell, base.digest, model, trace_digest)
        inputs.append(CellInput(spec.kind, cell, digest, base, model, frame))
    return inputs


def _num(value: Any) -> float | None:
    """A JSON number as a float, ``None`` as is (NaN never reaches a result)."""
    if value is None:
        return None
    number = float(value)
    return None if not np.isfinite(number) else number


def plan_figures(body: dict) -> dict[str, Any]:
    """The table's figures of a plan: solver status, objective, bound, gap and totals."""
    solver = body["solver"]
    stages = solver["stages"]
    elastic = stages[-1]  # the elastic LP is the last stage
    placement = stages[0] if len(stages) > 1 else None
    return {
        "status": solver["status"], "mip_gap": _num(solver.get("mip_gap")),
        "elastic_status": elastic["status"], "elastic_objective": _num(elastic["objective"]),
        "elastic_bound": _num(elastic["bound"]), "elastic_gap": _num(elastic["gap"]),
        "reservations_status": placement["status"] if placement else None,
        "reservations_gap": _num(placement["gap"]) if placement else None,
        "planned_ngh": round(sum(b["planned"] for b in body["budgets"]), 6),
        "planned_opportunistic_ngh": round(sum(b["planned_opportunistic"]
                                               for b in body["budgets"]), 6),
        "reservations_placed": len(body["reservations"]),
        "reservations_unplaced": len(body["unplaced"]),
    }


def run_cell(item: CellInput) -> dict[str, Any]:
    """Run one cell; its result record (no clock time inside: same inputs, same record).

    A plan the solver cannot make valid is a result too: ``status`` ``failed`` and the
    reason in ``error`` (as ``planner run`` would exit 1 with it).
    """
    if item.kind == "plan":
        from planner.errors import SolverError
        from planner.run import plan_scenario

        try:
            figures = plan_figures(plan_scenario(item.scenario, item.model).plan.body)
        except SolverError as error:
            figures = {"status": "failed", "error": str(error)}
    else:
        from planner.simulate.engine import replay
        from planner.simulate.metrics import compute_metrics
        from planner.simulate.run import make_policy

        assert item.trace is not None and item.cell.policy is not None
        result = replay(item.scenario, item.trace, make_policy(item.cell.policy, item.model),
                        cap_hours=item.model.contract.min_runtime_cap_hours)
        figures = dict(compute_metrics(item.scenario, item.trace, result).summary)
    return {"format": CELL_FORMAT, "digest": item.digest, "kind": item.kind,
            "figures": figures}
