"""The library's end-to-end calls, which the CLI wraps: load → build → solve → extract → write."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from planner.check import check_plan
from planner.config import ModelConfig
from planner.errors import InputError, InputProblem, SolverError
from planner.inputs import Scenario
from planner.inputs.bounded import load_json
from planner.inputs.read import read_text_file
from planner.inputs.validate import DATE_HINT, as_of_problem, parse_datetime, to_timestamp
from planner.model.problem import Problem, build_problem
from planner.model.result import Solution
from planner.model.solve import solve
from planner.paths import SAMPLE as SAMPLE  # re-exported: the bundled sample
from planner.plan.build import Plan, extract_plan
from planner.plan.write import plan_bytes, write_files
from planner.summary import summary_text
from planner.times import iso

PLAN_SCHEMA = Path(__file__).resolve().parent / "schemas" / "plan.schema.json"


@dataclass(frozen=True)
class PlanRun:
    """A finished planning run."""

    problem: Problem
    solution: Solution
    plan: Plan  # checked: a plan with a violation raises instead of being returned


def plan_schema() -> dict:
    """The JSON Schema of plan.json."""
    return json.loads(PLAN_SCHEMA.read_text(encoding="utf-8"))


def load_previous(path: Path) -> dict:
    """Read a previous plan; refuse one that does not match the schema.

    Read with bounds (:func:`planner.inputs.bounded.load_json`): ``NaN``, ``Infinity``
    and a number too large to hold are refused with the path of the value, as is nesting
    no plan has.
    """
    label = path.name
    text, problems = read_text_file(path, label)
    if text is not None:
        body, problems = load_json(label, text, "pass a plan.json that planner run wrote")
    if problems:  # not JSON, NaN or Infinity, too deep: no plan of ours
        raise InputError(problems)
    import jsonschema  # only a replan reads a plan back (0.1 s of imports otherwise)

    errors = sorted(jsonschema.Draft202012Validator(plan_schema()).iter_errors(body),
                    key=lambda e: list(e.path))
    if errors:
        raise InputError([InputProblem(label, None, "/".join(str(p) for p in e.path) or None,
                                       e.message) for e in errors[:20]])
    return body


def parse_as_of(text: str, scenario: Scenario) -> pd.Timestamp:
    """``--as-of``: an ISO date inside the scenario's quarter.

    As strict as the inputs' dates: ``now``, ``""`` and ``11/16/2026`` are refused.
    """
    parsed = parse_datetime(text)
    if parsed is None:
        raise InputError([InputProblem("--as-of", None, None,
                                       f"{text!r} is not an ISO 8601 date; {DATE_HINT}")])
    stamp = to_timestamp(parsed)
    cfg = scenario.config
    problem = as_of_problem(parsed, cfg.quarter_start.to_pydatetime(),
                            cfg.quarter_end.to_pydatetime())
    if problem is not None:
        raise InputError([InputProblem("--as-of", None, None, problem)])
    return stamp


def plan_scenario(scenario: Scenario, model: ModelConfig, previous: dict | None = None,
                  progress=None, check: bool = True, on_built=None) -> PlanRun:
    """Plan a validated scenario; raise :class:`SolverError` rather than return a bad plan.

    ``check=False`` skips the independent re-check (for callers that plan many times
    and re-check a sample themselves, like the replay simulator). ``on_built`` is
    handed the built elastic LP (:func:`planner.model.solve.solve`).
    """
    step = progress or (lambda _msg: None)
    step("building the problem")
    problem = build_problem(scenario, model, previous)
    lp_solver = "HiGHS" if model.solver.lp_solver == "highs" else model.solver.lp_solver
    step(f"solving: reservations (HiGHS MIP), then elastic GPU-hours ({lp_solver})")
    solution = solve(problem, on_built)
    step("checking the plan against the hard rules")
    plan = extract_plan(problem, solution)
    violations = tuple(check_plan(plan.body, scenario, previous)) if check else ()
    if violations:
        shown = "\n".join(str(v) for v in violations[:20])
        raise SolverError(f"the plan breaks {len(violations)} hard rule(s); nothing written:\n"
                          f"{shown}")
    return PlanRun(problem, solution, plan)


def demand_by_cell(run: PlanRun) -> dict[tuple[str, str], float]:
    """Total elastic demand per (cluster, period_start), for the summary."""
    problem = run.problem
    totals = problem.dem.sum(axis=0)
    starts = [iso(problem.period_start[t]) for t in range(totals.shape[1])]  # each once
    return {(c, starts[t]): float(totals[k, t])
            for k, c in enumerate(problem.clusters) for t in range(totals.shape[1])}


def run_summary(run: PlanRun) -> str:
    """The terminal summary."""
    s = run.solution
    timings = f"build {s.build_seconds:.2f} s, solve {s.solve_seconds:.2f} s"
    return summary_text(run.plan.body, run.problem.tree, demand_by_cell(run), timings)


def output_files(run: PlanRun) -> dict[str, bytes]:
    """plan.json and summary.txt as bytes (summary without timings: same bytes)."""
    summary = summary_text(run.plan.body, run.problem.tree, demand_by_cell(run))
    return {"plan.json": plan_bytes(run.plan), "summary.txt": summary.encode()}


def write_outputs(run: PlanRun, out_dir: Path,
                  extra: dict[str, bytes] | None = None) -> list[Path]:
    """plan.json, summary.txt and ``extra`` files (``kueue/…``), in one atomic write."""
    return write_files(out_dir, {**output_files(run), **(extra or {})})
