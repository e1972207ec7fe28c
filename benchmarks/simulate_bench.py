"""Benchmark: replay the Philly quarter under each policy; median seconds of a few runs.

    python benchmarks/simulate_bench.py [--runs N] [--policy a,b] [--trace TRACE.csv]

Converts the Philly extract onto data/philly first (``planner trace philly``) unless
``--trace`` is given; each replay is timed in this process (the replay, the metrics
not included), one policy after another. Writes benchmarks/simulate_results.md.
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
    rows = []
    for name in args.policy.split(","):
        seconds, plan = [], []
        for _ in range(args.runs):
            began = time.perf_counter()
            result = replay(scenario, trace, POLICIES[name]())
            seconds.append(time.perf_counter() - began)
            plan.append(result.plan_seconds)
        rows.append((name, statistics.median(seconds), min(seconds), max(seconds),
                     statistics.median(plan), result.replans, len(result.segments)))
        print(name, f"{statistics.median(seconds):.1f} s", flush=True)
    lines = [
        "# Replay benchmark (`benchmarks/simulate_bench.py`)", "",
        f"{len(trace):,} jobs of the Philly-derived quarter on `data/philly` "
        f"({int((scenario.clusters.nodes * scenario.clusters.gpus_per_node).sum())} GPUs); "
        f"{args.runs} runs per policy, 2-core shared machine.", "",
        "| policy | median s | min s | max s | of which planning s | replans | run segments |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, med, low, high, plan, replans, segments in rows:
        lines.append(f"| {name} | {med:.1f} | {low:.1f} | {high:.1f} | {plan:.1f} | {replans} "
                     f"| {segments:,} |")
    (ROOT / "benchmarks" / "simulate_results.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
