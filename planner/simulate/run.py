"""``planner simulate``'s library side: replay a trace under policies, measure, write.

:func:`simulate` replays one trace frame (``read_trace``'s columns) under each named
policy; :func:`output_files` turns the results into ``metrics.json`` (same inputs,
same bytes: no clock time inside), the PNGs and a jobs CSV per policy, and
``report.html`` with the table and every chart in one file.
"""

from __future__ import annotations

import io
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from planner.config import MAX_RANDOM_SEED, ModelConfig, is_seed, load_model, with_seed
from planner.errors import InputError, InputProblem
from planner.exporters.common import spreadsheet_text
from planner.inputs import Scenario
from planner.simulate.engine import ReplayResult, replay
from planner.simulate.kueue_replay import KueueReplayPolicy
from planner.simulate.metrics import PolicyMetrics, compute_metrics, trace_figures
from planner.simulate.planner_policy import PlannerPolicy
from planner.simulate.policies import POLICIES as _BASELINES
from planner.simulate.slurm_replay import SlurmReplayPolicy
from planner.times import iso

POLICIES = {**_BASELINES, "planner": PlannerPolicy, "planner-kueue": KueueReplayPolicy,
            "planner-slurm": SlurmReplayPolicy}
POLICY_NAMES = ("priority", "fairtree", "quota", "lookback", "planner", "planner-kueue",
                "planner-slurm")
#: every policy ``--policy`` takes (all run by default)
KNOWN_POLICIES = POLICY_NAMES


@dataclass(frozen=True)
class Progress:
    """How far one policy's replay has come: for a progress line on stderr."""

    policy: str
    hours_done: float  # hours of the quarter replayed
    hours: float  # the quarter's hours
    cpu_seconds: float  # CPU seconds this policy's replay has used so far

    @property
    def done(self) -> bool:
        """Whether the replay reached quarter end."""
        return self.hours_done >= self.hours - 1e-9

    def line(self) -> str:
        """``planner-kueue: day 12 of 92 (13 %), 45 CPU s``."""
        days = max(1, math.ceil(self.hours / 24 - 1e-9))
        if self.done:
            return f"{self.policy}: replayed {days} days in {self.cpu_seconds:,.0f} CPU s"
        share = self.hours_done / self.hours if self.hours > 0 else 1.0
        return (f"{self.policy}: day {int(self.hours_done // 24) + 1} of {days} "
                f"({share:.0%}), {self.cpu_seconds:,.0f} CPU s")


@dataclass(frozen=True)
class PolicyRun:
    """One policy's replay, its figures and how long it took."""

    name: str
    result: ReplayResult
    metrics: PolicyMetrics
    seconds: float
    cpu_seconds: float = 0.0  # this process's CPU time over the replay (HiGHS's threads too)


def parse_policies(text: str) -> list[str]:
    """``--policy a,b``: known names, in the order given, each once; InputError otherwise."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in POLICIES]
    if unknown or not names:
        raise InputError([InputProblem("--policy", None, None,
                                       f"unknown policy {', '.join(unknown) or '(none)'}; "
                                       f"choose from {', '.join(KNOWN_POLICIES)}")])
    return list(dict.fromkeys(names))


#: the policies that plan (their replans solve LPs, so HiGHS's seed can move them)
PLANNING_POLICIES = ("planner", "planner-kueue", "planner-slurm")
#: a column of a policy replayed under another HiGHS seed: ``planner-slurm@seed1``
SEED_MARK = "@seed"


def parse_seeds(text: str) -> list[int]:
    """``--seeds 0,1,2``: whole numbers ≥ 0, in the order given, each once; InputError else."""
    parts = [t.strip() for t in text.split(",") if t.strip()]
    # ASCII digits only: str.isdigit() also takes "²", which int() then refuses
    bad = [t for t in parts if not (t.isascii() and t.isdigit()) or not is_seed(int(t))]
    if bad or not parts:
        raise InputError([InputProblem("--seeds", None, None,
                                       f"not a seed: {', '.join(bad) or '(none)'}; give "
                                       f"whole numbers from 0 to {MAX_RANDOM_SEED}, "
                                       "comma-separated")])
    return list(dict.fromkeys(int(t) for t in parts))


def parse_window(start: str | None, end: str | None, scenario: Scenario
                 ) -> tuple[pd.Timestamp, pd.Timestamp] | None:
    """``--start``/``--end``: a window of whole hours inside the quarter; InputError else.

    Either may be left out (the quarter's start, its end); both left out: None (the
    whole quarter).
    """
    if start is None and end is None:
        return None
    from planner.inputs.validate import DATE_HINT, parse_datetime

    cfg = scenario.config
    bounds, problems = [], []
    for flag, text, default in (("--start", start, cfg.quarter_start),
                                ("--end", end, cfg.quarter_end)):
        if text is None:
            bounds.append(default)
            continue
        stamp = parse_datetime(text)
        if stamp is None:
            problems.append(InputProblem(flag, None, None, f"{text!r} is not a time; "
                                         f"{DATE_HINT}"))
            continue
        stamp = pd.Timestamp(stamp)
        if stamp != stamp.floor("h"):
            problems.append(InputProblem(flag, None, None, f"{text} is not a whole hour"))
        elif not cfg.quarter_start <= stamp <= cfg.quarter_end:
            problems.append(InputProblem(flag, None, None, f"{text} is outside the quarter "
                                         f"{iso(cfg.quarter_start)} – {iso(cfg.quarter_end)}"))
        bounds.append(stamp)
    if not problems and bounds[0] >= bounds[1]:
        problems.append(InputProblem("--end", None, None, "must be after --start"))
    if problems:
        raise InputError(problems)
    return bounds[0], bounds[1]


def windowed(scenario: Scenario, trace: pd.DataFrame, start: pd.Timestamp,
             end: pd.Timestamp) -> tuple[Scenario, pd.DataFrame]:
    """The window [start, end) replayed as a quarter of its own.

    The scenario's quarter becomes the window (planned from its start), each budget its
    share of the window's hours (the pace, NGH per hour, stays the project's), and nothing
    ran before it (no usage); the trace keeps the jobs submitted inside the window.
    Declared demand and the usage ledger are dropped (the replays plan from their own
    queue); the reservation requests inside the window are kept.
    """
    from dataclasses import replace

    cfg = scenario.config
    share = (end - start) / (cfg.quarter_end - cfg.quarter_start)
    budgets = scenario.budgets.assign(gpu_hours=scenario.budgets["gpu_hours"] * share)
    reservations = scenario.reservations
    inside = (reservations["earliest_start"] >= start) & (reservations["deadline"] <= end)
    moved = replace(scenario, config=replace(cfg, quarter_start=start, quarter_end=end,
                                             as_of=start),
                    budgets=budgets, demand=scenario.demand.iloc[0:0],
                    usage=scenario.usage.iloc[0:0],
                    reservations=reservations[inside].reset_index(drop=True))
    if "tree" in scenario.__dict__:
        moved.__dict__["tree"] = scenario.tree
    kept = (trace["submit"] >= start) & (trace["submit"] < end)
    return moved, trace[kept].reset_index(drop=True)


def make_policy(name: str, model: ModelConfig | None = None):
    """A fresh policy ``name``; the three ``planner`` ones plan with ``model``.

    (``model`` default: ``default``.)
    """
    if name in PLANNING_POLICIES:
        return POLICIES[name](model=model)
    return POLICIES[name]()


def simulate(scenario: Scenario, trace: pd.DataFrame, names: list[str],
             progress: Callable[[Progress], None] | None = None,
             model: ModelConfig | None = None,
             seeds: list[int] | None = None) -> list[PolicyRun]:
    """Replay ``trace`` under each policy in ``names`` and measure it.

    ``model`` is the planning model of the ``planner`` policies; its contract's
    ``min_runtime_cap_hours`` caps every policy's protected runtimes (the replay applies
    it: :func:`~planner.simulate.engine.contract_cap`; default: the default model's).
    ``progress``: called with a :class:`Progress` at every whole hour of each replay and
    once when it is done.
    ``seeds``: each planning policy (:data:`PLANNING_POLICIES`) is replayed once per seed,
    its model's ``solver.random_seed`` set to it, as a run named ``NAME@seedK``: the
    replans' LPs have many optimal vertices and the seed picks among them, so the spread
    over seeds is how firm a figure is. The baselines solve no LP and run once.
    """
    if seeds and model is None:
        model = load_model("default")
    jobs: list[tuple[str, str, ModelConfig | None]] = []
    for name in names:
        if seeds and name in PLANNING_POLICIES:
            jobs += [(f"{name}{SEED_MARK}{k}", name, with_seed(model, k)) for k in seeds]
        else:
            jobs.append((name, name, model))
    cap = (model or load_model("default")).contract.min_runtime_cap_hours
    runs = []
    for label, name, planning in jobs:
        began, began_cpu = time.perf_counter(), time.process_time()

        def hour(now: float, hours: float, label: str = label, cpu: float = began_cpu) -> None:
            progress(Progress(label, now, hours, time.process_time() - cpu))

        result = replay(scenario, trace, make_policy(name, planning),
                        hour if progress else None, cap)
        seconds, cpu = time.perf_counter() - began, time.process_time() - began_cpu
        if progress:
            progress(Progress(label, result.hours, result.hours, cpu))
        runs.append(PolicyRun(label, result, compute_metrics(scenario, trace, result), seconds,
                              cpu))
    return runs


def metrics_json(runs: list[PolicyRun], figures: dict | None = None,
                 model: str | None = None) -> bytes:
    """``metrics.json``: {"policies": {name: figures}}, keys sorted, no timings.

    ``"better"``: metric → ``"higher"`` or ``"lower"`` (:data:`BETTER`). With ``figures``
    (:func:`~planner.simulate.metrics.trace_figures`) also ``"trace"``, the figures of the
    trace alone; with ``model`` the ``planner`` policy's model name.
    """
    body: dict = {"policies": {r.name: r.metrics.summary for r in runs}, "better": BETTER}
    if figures is not None:
        body["trace"] = figures
    if model is not None:
        body["model"] = model
    return (json.dumps(body, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()


def jobs_csv(scenario: Scenario, trace: pd.DataFrame, result: ReplayResult) -> bytes:
    """Per job: first start, finish, wait, preemptions, lost GPU-hours (hours from start).

    A job that never started has an empty ``first_start``, ``never_started`` true and
    its wait counted to the end of the replay (as the metrics count it). The file is for
    people and their spreadsheets: an id that a spreadsheet would run as a formula is
    written as text (:func:`planner.exporters.common.spreadsheet_text`).
    """
    start = scenario.config.quarter_start
    hour = pd.Timedelta(hours=1)
    submit = np.maximum(((trace["submit"] - start) / hour).to_numpy(dtype=float), 0.0)

    def stamp(values: np.ndarray) -> list[str]:
        return ["" if np.isnan(v) else iso(start + v * hour) for v in values]

    def text(column: str) -> list[str]:  # ids stay text in a spreadsheet (=HYPERLINK, @SUM)
        return [spreadsheet_text(str(v)) for v in trace[column].tolist()]

    first = result.first_start
    frame = pd.DataFrame({
        "job_id": text("job_id"), "project": text("project"),
        "cluster": text("cluster"), "gpus": trace["gpus"].to_numpy(),
        "submit": stamp(submit), "first_start": stamp(first), "finish": stamp(result.finish),
        "wait_hours": np.round(np.where(np.isnan(first), result.hours, first) - submit, 6),
        "never_started": np.where(np.isnan(first), "true", "false"),
        "preemptions": result.preemptions, "lost_gpu_hours": np.round(result.lost_gpu_hours,
                                                                     6)})
    buffer = io.StringIO()
    frame.to_csv(buffer, index=False, lineterminator="\n")
    return buffer.getvalue().encode()


def output_files(scenario: Scenario, trace: pd.DataFrame, runs: list[PolicyRun],
                 model: str | None = None) -> dict[str, bytes]:
    """Every file ``planner simulate`` writes, by name (``model``: the planner's model)."""
    from planner.simulate.html import render_simulation_html
    from planner.simulate.pictures import pictures

    figures = trace_figures(scenario, trace)
    files = {"metrics.json": metrics_json(runs, figures, model)}
    drawn: dict[str, bytes] = {}
    for r in runs:
        files[f"{r.name}-jobs.csv"] = jobs_csv(scenario, trace, r.result)
        drawn.update(pictures(r.name, r.metrics))
    files.update(drawn)
    files["report.html"] = render_simulation_html(scenario, len(trace), runs,
                                                  drawn, figures).encode()
    return files


#: (metric key, its label, which direction is better): "higher", "lower", or None for a
#: figure of the trace alone (the budget-error floor: what demand forces on every policy)
COLUMNS: tuple[tuple[str, str, str | None], ...] = (
    ("occupancy", "occupancy", "higher"),
    ("occupancy_of_demand", "occupancy of demand", "higher"),
    ("delivered_over_owed_daily", "delivered ÷ owed daily", "higher"),
    ("delivered_over_owed_weekly", "delivered ÷ owed weekly", "higher"),
    ("delivered_over_owed_quarter", "delivered ÷ owed quarter", "higher"),
    ("delivered_over_owed_hourly", "delivered ÷ owed hourly (own queue)", "higher"),
    ("delivered_over_owed_within_budget", "… hourly within budget", "higher"),
    ("worst_team_delivered_over_owed", "worst team", "higher"),
    ("worst_sizeable_team_delivered_over_owed", "worst team owed ≥ 1 %", "higher"),
    ("budget_error_mean", "budget error mean", "lower"),
    ("budget_error_max", "budget error max", "lower"),
    ("budget_error_floor_mean", "budget error floor mean", None),
    ("budget_error_floor_max", "budget error floor max", None),
    ("charged_over_budget_max", "charged ÷ budget max", "lower"),
    ("jain", "Jain", "higher"), ("wait_p50_hours", "wait p50 h", "lower"),
    ("wait_p90_hours", "wait p90 h", "lower"),
    ("small_wait_p50_hours", "small wait p50 h", "lower"),
    ("small_wait_p90_hours", "small wait p90 h", "lower"),
    ("preemptions", "preemptions", "lower"),
    ("gpu_hours_lost_to_preemption", "GPU-h lost to preemption", "lower"),
    ("reserved_idle_gpu_hours", "held idle GPU-h", "lower"),
    ("jobs_never_started", "jobs never started", "lower"))
#: metric key → which direction is better (``metrics.json``'s ``better``)
BETTER = {key: better for key, _, better in COLUMNS if better is not None}
ARROWS = {"higher": " ↑", "lower": " ↓", None: ""}


def table_rows(runs: list[PolicyRun], seconds: bool = True) -> tuple[list[str], list[list[str]]]:
    """The terminal table: a header and one row per policy.

    Each metric's label ends in ↑ (higher is better) or ↓ (lower is better); a figure of
    the trace alone (the budget-error floor) has neither.
    """
    header = (["policy"] + [label + ARROWS[better] for _, label, better in COLUMNS]
              + (["seconds"] if seconds else []))
    rows = []
    for r in runs:
        row = [r.name]
        for key, _, _ in COLUMNS:
            value = r.metrics.summary[key]
            row.append("–" if value is None else f"{value:,}" if isinstance(value, int)
                       else f"{value:.3f}")
        if seconds:
            row.append(f"{r.seconds:.1f}")
        rows.append(row)
    return header, rows


#: (metrics key, label, better): the figures of a replay's result file (``planner.results``).
RESULT_FIGURES = (
    ("occupancy", "occupancy", "higher"),
    ("occupancy_of_demand", "occupancy of demand", "higher"),
    ("delivered_over_owed_daily", "delivered ÷ owed, daily", "higher"),
    ("delivered_over_owed_weekly", "delivered ÷ owed, weekly", "higher"),
    ("delivered_over_owed_quarter", "delivered ÷ owed, quarter", "higher"),
    ("worst_team_delivered_over_owed", "worst team (weekly)", "higher"),
    ("worst_sizeable_team_delivered_over_owed", "worst team owed ≥ 1 %", "higher"),
    ("budget_error_mean", "budget error mean", "lower"),
    ("budget_error_floor_mean", "budget error floor (demand alone)", None),
    ("budget_error_max", "budget error max", "lower"),
    ("charged_over_budget_max", "charged ÷ budget max", "lower"),
    ("charged_over_budget_max_project", "… of project", None),
    ("jain", "Jain (teams, weekly)", "higher"),
    ("wait_p50_hours", "wait p50 h", "lower"),
    ("wait_p90_hours", "wait p90 h", "lower"),
    ("small_wait_p90_hours", "small (≤ 1 GPU) wait p90 h", "lower"),
    ("preemptions", "preemptions", "lower"),
    ("gpu_hours_lost_to_preemption", "GPU-h lost to preemption", "lower"),
    ("jobs_never_started", "jobs never started", "lower"),
)


def write_replay_result(path: Path, runs: list[PolicyRun], scenario: Scenario,
                        trace: pd.DataFrame, described: str, command: str | None = None,
                        load_before: float | None = None) -> Path:
    """The replays as a result file ``path`` (``<folder>/<name>.json``), with provenance.

    One row per policy (column ``NAME@seedK`` per seed), one column per figure of
    :data:`RESULT_FIGURES` with the direction that is better, and the wall and CPU
    seconds of each replay; the notes hold the figures of the trace alone.
    """
    from planner.results import write_result

    def rounded(value):  # ratios and hours to three decimals, as the terminal shows them
        return round(value, 3) if isinstance(value, float) else value

    rows = [{"policy": r.name,
             **{key: rounded(r.metrics.summary[key]) for key, _, _ in RESULT_FIGURES},
             "cpu_s": round(r.cpu_seconds, 1), "wall_s": round(r.seconds, 1)} for r in runs]
    columns = [{"key": "policy", "label": "policy"}]
    columns += [{"key": key, "label": label, **({"better": better} if better else {})}
                for key, label, better in RESULT_FIGURES]
    columns += [{"key": "cpu_s", "label": "CPU s", "unit": "s", "better": "lower"},
                {"key": "wall_s", "label": "wall s", "unit": "s", "better": "lower"}]
    figures = trace_figures(scenario, trace)
    return write_result(
        path.stem, title=f"Replay: {described.split(' (')[0]}", columns=columns, rows=rows,
        command=command, load_before=load_before, folder=path.parent,
        what=f"Each policy replays {described} on `{scenario.config.name}` "
             f"({len(trace):,} jobs), scored by `planner.simulate.metrics` (the definitions: "
             "the Explanation page on replays). The figures are deterministic for the same "
             "code, trace and HiGHS version; the seconds move with the machine's load.",
        notes=[f"Of the trace alone, the same for every policy: owed {figures['owed_ngh']:,.0f} "
               f"NGH, offered load {figures['offered_load']} × capacity, ideal occupancy "
               f"{figures['ideal_occupancy']}, budget error floor (mean) "
               f"{figures['budget_error_floor_mean']}."])
