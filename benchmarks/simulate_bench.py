"""Benchmark: replay the Philly quarter under each policy; median seconds of a few runs.

    python benchmarks/simulate_bench.py [--runs N] [--policy a,b] [--trace TRACE.csv]

Converts the Philly extract onto data/philly first (``planner trace philly``) unless
``--trace`` is given; each replay is timed in this process (the replay, the metrics
not included), one policy after another, in wall and CPU seconds (``time.process_time``:
this process, HiGHS's threads included). Writes ``benchmarks/results/replay-speed.json``
(``planner.results``).
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
from planner.results import load_now, table_markdown, write_result  # noqa: E402
from planner.simulate.engine import replay  # noqa: E402
from planner.simulate.run import POLICIES, POLICY_NAMES  # noqa: E402
from planner.simulate.trace import read_trace  # noqa: E402


def main() -> None:
    """Convert, replay each policy ``--runs`` times, write the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--policy", default=",".join(POLICY_NAMES))
    parser.add_argument("--trace", help="trace CSV (default: convert the Philly extract)")
    args = parser.parse_args()
    scenario_dir = ROOT / "data" / "philly"
    trace_path = Path(args.trace) if args.trace else ROOT / "benchmarks" / "out" / "philly.csv"
    if not args.trace:
        subprocess.run([str(Path(sys.executable).parent / "planner"), "trace", "philly",
                        "--out", str(trace_path)], check=True, capture_output=True)
    scenario = load_scenario(scenario_dir)
    trace = read_trace(trace_path, scenario)
    load = load_now()
    rows = []
    for name in args.policy.split(","):
        seconds, cpu, plan = [], [], []
        for _ in range(args.runs):
            began, began_cpu = time.perf_counter(), time.process_time()
            result = replay(scenario, trace, POLICIES[name]())
            seconds.append(time.perf_counter() - began)
            cpu.append(time.process_time() - began_cpu)
            plan.append(result.plan_seconds)
        rows.append({"policy": name, "cpu_s": round(statistics.median(cpu), 1),
                     "wall_s": round(statistics.median(seconds), 1),
                     "wall_min_s": round(min(seconds), 1), "wall_max_s": round(max(seconds), 1),
                     "plan_s": round(statistics.median(plan), 1), "replans": result.replans,
                     "segments": len(result.segments)})
        print(rows[-1], flush=True)
    gpus = int((scenario.clusters.nodes * scenario.clusters.gpus_per_node).sum())
    path = write_result(
        "replay-speed", title="Replay speed: a quarter's trace under each policy",
        columns=COLUMNS, rows=rows, load_before=load,
        what=f"The replay alone (`planner.simulate.engine.replay`, metrics and pictures not "
             f"included) of {len(trace):,} jobs on `{scenario_dir.name}` ({gpus:,} GPUs), "
             f"{args.runs} runs per policy in one process; medians. *planning* is the part "
             "of the wall time the `planner` policies spend in their replans.",
        notes=["Target (issue 5): every policy's replay of the Philly quarter under 60 s."])
    print(table_markdown(COLUMNS, rows), f"wrote {path}", sep="\n")


COLUMNS = [
    {"key": "policy", "label": "policy"},
    {"key": "cpu_s", "label": "CPU s (median)", "unit": "s", "better": "lower"},
    {"key": "wall_s", "label": "wall s (median)", "unit": "s", "better": "lower"},
    {"key": "wall_min_s", "label": "wall s (min)", "unit": "s"},
    {"key": "wall_max_s", "label": "wall s (max)", "unit": "s"},
    {"key": "plan_s", "label": "of which planning s", "unit": "s"},
    {"key": "replans", "label": "replans"}, {"key": "segments", "label": "run segments"},
]

if __name__ == "__main__":
    main()
