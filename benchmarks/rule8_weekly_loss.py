"""Whose weekly delivered ÷ owed rule 8 costs under ``planner-slurm``, and whose it keeps.

    nice python benchmarks/rule8_weekly_loss.py [--trace synthetic|philly|FILE.csv]
        [--seed 7] [--jobs 40000] [--name NAME]

Replays the trace under ``planner-slurm`` with rule 8 as first shipped (``unpaced``:
every job of an overdrawn project beyond its budget to ``gp-overdrawn``), as shipped
(``on``: an overdrawn project keeps its pace in ``gp-opportunistic``) and without it
(``off``), and splits the weekly delivered ÷ owed (``planner.simulate.metrics``: per
project and week, min(delivered, owed), summed) between the projects the first rule found
overdrawn at any replan and all the others, so that a loss can be told apart: the
overdrawn projects' own pace, or other projects' work (preemption churn, reservations).
Writes ``benchmarks/results/<name>.json`` (default ``rule8-weekly-loss-<trace>``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from budget_adherence import VARIANTS, make_trace, worst_team  # noqa: E402

from planner.inputs.load import load_scenario  # noqa: E402
from planner.results import load_now, write_result  # noqa: E402
from planner.simulate import run as replays  # noqa: E402
from planner.simulate.metrics import (  # noqa: E402
    HOURS_PER_WEEK,
    Axes,
    _job_arrays,
    delivered_owed,
    offered_work,
    spread,
)
from planner.simulate.run import simulate  # noqa: E402
from planner.simulate.trace import read_trace  # noqa: E402

POLICY = "planner-slurm"


def replay(scenario, trace, variant: str):
    """(the run, [(replan hour, the projects rule 8 finds overdrawn)], CPU seconds)."""
    shipped = replays.POLICIES[POLICY]
    factory = VARIANTS[variant][POLICY] if variant in VARIANTS else shipped
    timeline: list[tuple[float, frozenset[str]]] = []

    def recording(**kwargs):
        policy = factory(**kwargs)
        executor = policy.executor
        read = executor.apply_first_period

        def reading(sim, body, first):
            read(sim, body, first)
            timeline.append((sim.now, frozenset(executor.state.overdrawn_projects)))
        executor.apply_first_period = reading
        return policy

    replays.POLICIES[POLICY] = recording
    try:
        began = time.process_time()
        (run,) = simulate(scenario, trace, [POLICY])
        return run, timeline, time.process_time() - began
    finally:
        replays.POLICIES[POLICY] = shipped


def ever(timeline: list[tuple[float, frozenset[str]]]) -> frozenset[str]:
    """The projects overdrawn at any replan."""
    return frozenset().union(*(projects for _, projects in timeline))


def weekly(scenario, trace, run) -> tuple[np.ndarray, np.ndarray]:
    """Per project: the weekly Σ min(delivered, owed) and Σ owed (the metrics' own sums)."""
    axes = Axes.of(scenario)
    n_p, n_h = len(axes.projects), axes.n_hours
    allocated = _job_arrays(scenario, trace, axes)["allocated"]
    segs = run.result.segments
    seg = {k: np.array([getattr(s, k) for s in segs]) for k in
           ("job", "cluster", "project", "start", "end", "gpus")}
    mine = allocated[seg["job"]]
    got = spread(seg["start"][mine], seg["end"][mine],
                 (seg["gpus"] * axes.rate[seg["cluster"]])[mine], seg["project"][mine], n_p, n_h)
    return delivered_owed(got, offered_work(scenario, trace, axes).owed_ph, HOURS_PER_WEEK)


def _ratio(delivered: np.ndarray, owed: np.ndarray) -> float | None:
    return round(float(delivered.sum() / owed.sum()), 6) if owed.sum() > 0 else None


def main() -> None:
    """Replay the three variants, split the weekly figure, write the result file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="synthetic")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--jobs", type=int, default=40000)
    parser.add_argument("--name")
    args = parser.parse_args()
    path, scenario_dir, default = make_trace(args)
    scenario = load_scenario(scenario_dir)
    trace = read_trace(path, scenario)
    load = load_now()
    runs = {v: replay(scenario, trace, v) for v in ("unpaced", "on", "off")}
    projects = Axes.of(scenario).projects
    flagged = ever(runs["unpaced"][1])
    group = np.array([p in flagged for p in projects])
    rows = []
    for variant, (run, timeline, cpu) in runs.items():
        got, owed = weekly(scenario, trace, run)
        figures = run.metrics.summary
        rows.append({
            "rule8": variant,
            "weekly": figures["delivered_over_owed_weekly"],
            "overdrawn_delivered_ngh": round(float(got[group].sum()), 1),
            "overdrawn_weekly": _ratio(got[group], owed[group]),
            "others_delivered_ngh": round(float(got[~group].sum()), 1),
            "others_weekly": _ratio(got[~group], owed[~group]),
            "overdrawn_here": ", ".join(sorted(ever(timeline))),
            "budget_error_max": figures["budget_error_max"],
            "preemptions": figures["preemptions"],
            "gpu_hours_lost": figures["gpu_hours_lost_to_preemption"],
            "worst_team": worst_team(figures), "cpu_s": round(cpu, 1)})
        print(rows[-1], flush=True)
    owed_over = owed[group].sum()
    out = write_result(
        args.name or default.replace("budget-adherence", "rule8-weekly-loss"),
        title="Rule 8 under Slurm: whose weekly delivered ÷ owed it costs",
        columns=COLUMNS, rows=rows, load_before=load,
        what=f"`planner-slurm` replays {len(trace):,} jobs (`{path.name}`) on "
             f"`{scenario_dir.name}` with rule 8 as first shipped (unpaced), as shipped (on: "
             "an overdrawn project keeps its pace in gp-opportunistic) and without it (off). "
             "Weekly delivered NGH (per project and week, min(delivered, owed)) split between "
             f"the projects the first rule found overdrawn ({', '.join(sorted(flagged))}; "
             f"owed {owed_over:,.0f} NGH) and the others (owed "
             f"{owed[~group].sum():,.0f} NGH).")
    print(f"wrote {out}")


COLUMNS = [
    {"key": "rule8", "label": "rule 8"},
    {"key": "weekly", "label": "delivered ÷ owed weekly", "better": "higher"},
    {"key": "overdrawn_delivered_ngh", "label": "overdrawn projects: delivered NGH",
     "better": "higher"},
    {"key": "overdrawn_weekly", "label": "… ÷ owed", "better": "higher"},
    {"key": "others_delivered_ngh", "label": "others: delivered NGH", "better": "higher"},
    {"key": "others_weekly", "label": "… ÷ owed", "better": "higher"},
    {"key": "overdrawn_here", "label": "overdrawn in this replay"},
    {"key": "budget_error_max", "label": "budget error max", "better": "lower"},
    {"key": "preemptions", "label": "preemptions"},
    {"key": "gpu_hours_lost", "label": "GPU-hours lost to preemption", "better": "lower"},
    {"key": "worst_team", "label": "worst team (weekly)"},
    {"key": "cpu_s", "label": "CPU s", "better": "lower"},
]

if __name__ == "__main__":
    main()
