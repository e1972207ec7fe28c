"""Benchmark: replay the Philly quarter under each policy; median CPU seconds of a few runs.

    nice python benchmarks/simulate_bench.py [--runs N] [--once a,b] [--policy a,b]
                                             [--trace TRACE.csv] [--scenario DIR]

Converts the Philly extract onto data/philly first (``planner trace philly``) unless
``--trace`` is given; each replay is timed in this process (the replay alone: the metrics
and pictures not included), one policy after another, in CPU seconds
(``time.process_time``: this process, HiGHS's threads included) and wall seconds, with
the load average before each policy's runs. ``--once`` names policies replayed once
whatever ``--runs`` says (the slow ones); the row says how many runs its median is
of, and a few figures of the last replay (they do not move with the machine: a faster
replay must keep them).
Writes ``benchmarks/results/replay-speed.json`` (``planner.results``; ``--name``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner.inputs.load import load_scenario  # noqa: E402
from planner.results import load_now, write_result  # noqa: E402
from planner.simulate.engine import replay  # noqa: E402
from planner.simulate.metrics import compute_metrics  # noqa: E402
from planner.simulate.run import POLICIES, POLICY_NAMES  # noqa: E402
from planner.simulate.trace import read_trace  # noqa: E402

#: issue 32's targets, CPU seconds of one replay of the Philly quarter
TARGETS = {"planner-kueue": 120.0, "planner-slurm": 60.0, "planner": None}
BASELINE_TARGET = 15.0


def main() -> None:
    """Convert, replay each policy ``--runs`` times (``--once``: once), write the result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--once", default="", help="policies replayed once (comma-separated)")
    parser.add_argument("--policy", default=",".join(POLICY_NAMES))
    parser.add_argument("--trace", help="trace CSV (default: convert the Philly extract)")
    parser.add_argument("--scenario", default=str(ROOT / "data" / "philly"))
    parser.add_argument("--name", default="replay-speed")
    args = parser.parse_args()
    scenario_dir = Path(args.scenario)
    trace_path = Path(args.trace) if args.trace else ROOT / "benchmarks" / "out" / "philly.csv"
    if not args.trace:
        trace_path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([str(Path(sys.executable).parent / "planner"), "trace", "philly",
                        str(scenario_dir), "--out", str(trace_path)],
                       check=True, capture_output=True)
    scenario = load_scenario(scenario_dir)
    trace = read_trace(trace_path, scenario)
    once = set(filter(None, args.once.split(",")))
    load = load_now()
    rows = []
    for name in args.policy.split(","):
        load_before = load_now()
        seconds, cpu, plan = [], [], []
        for _ in range(1 if name in once else args.runs):
            began, began_cpu = time.perf_counter(), time.process_time()
            result = replay(scenario, trace, POLICIES[name]())
            seconds.append(time.perf_counter() - began)
            cpu.append(time.process_time() - began_cpu)
            plan.append(result.plan_seconds)
        target = TARGETS.get(name, BASELINE_TARGET)
        figures = compute_metrics(scenario, trace, result).summary  # the last run's
        rows.append({"policy": name, "runs": len(cpu),
                     "cpu_s": round(statistics.median(cpu), 1),
                     "cpu_min_s": round(min(cpu), 1), "cpu_max_s": round(max(cpu), 1),
                     "target_cpu_s": target,
                     "wall_s": round(statistics.median(seconds), 1),
                     "plan_s": round(statistics.median(plan), 1), "replans": result.replans,
                     "segments": len(result.segments),
                     "load_before": None if load_before is None else round(load_before, 2),
                     **{key: figures[key] for key in FIGURES}})
        print(rows[-1], flush=True)
    gpus = int((scenario.clusters.nodes * scenario.clusters.gpus_per_node).sum())
    path = write_result(
        args.name, title="Replay speed: a quarter's trace under each policy",
        columns=COLUMNS, rows=rows, load_before=load,
        what=f"The replay alone (`planner.simulate.engine.replay`, metrics and pictures not "
             f"included) of {len(trace):,} jobs on `{scenario_dir.name}` ({gpus:,} GPUs), "
             "one policy after another in one process; the median of *runs* replays (CPU "
             "seconds of this process, HiGHS's threads included). *planning* is the part of "
             "the wall time the planning policies spend in their replans. The last columns are "
             "figures of the last replay (`planner.simulate.metrics`), there to show that a "
             "faster replay replays the same.",
        notes=["Targets (issue 32), CPU seconds on the Philly quarter: every baseline "
               f"≤ {BASELINE_TARGET:g}, planner-slurm ≤ {TARGETS['planner-slurm']:g}, "
               f"planner-kueue ≤ {TARGETS['planner-kueue']:g} (none set for planner).",
               "The machine is shared (2 cores): load_before is the 1-minute load average "
               "before each policy's runs; wall seconds move with it, CPU seconds less."])
    print(f"wrote {path}")


COLUMNS = [
    {"key": "policy", "label": "policy"},
    {"key": "runs", "label": "runs"},
    {"key": "cpu_s", "label": "CPU s (median)", "unit": "s", "better": "lower"},
    {"key": "cpu_min_s", "label": "CPU s (min)", "unit": "s"},
    {"key": "cpu_max_s", "label": "CPU s (max)", "unit": "s"},
    {"key": "target_cpu_s", "label": "target CPU s", "unit": "s"},
    {"key": "wall_s", "label": "wall s (median)", "unit": "s"},
    {"key": "plan_s", "label": "of which planning s", "unit": "s"},
    {"key": "replans", "label": "replans"}, {"key": "segments", "label": "run segments"},
    {"key": "load_before", "label": "load before"},
    {"key": "delivered_over_owed_weekly", "label": "delivered ÷ owed weekly", "better": "higher"},
    {"key": "budget_error_max", "label": "budget error max", "better": "lower"},
    {"key": "charged_over_budget_max", "label": "charged ÷ budget max", "better": "lower"},
    {"key": "charged_over_budget_max_project", "label": "… of project"},
    {"key": "preemptions", "label": "preemptions", "better": "lower"},
]
FIGURES = [c["key"] for c in COLUMNS[-5:]]

if __name__ == "__main__":
    main()
