"""Benchmark: the planner with each LP solver, on the sample and the sample at 10×.

    python benchmarks/solvers_bench.py [--solvers highs,cbc] [--scales 1,10] [--runs 3]
                                       [--slow-runs 1]

Each run is a fresh process (benchmarks/one_run.py) planning the scenario with the
LP stage on one solver (reservations are HiGHS's either way). Prints one markdown
row per scale and solver: medians of the whole run and of the LP stage (for a PuLP
solver: PuLP writing its MPS, the solver, PuLP reading the solution; building PuLP's
variables and constraints is in the total), the stage's objective, status and gap.
A solver other than the default gets ``--slow-runs`` runs above 1× (CBC takes minutes
there, on a machine shared with others).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from bench import fresh_runs, scenario_for  # beside this script, on sys.path when run as one

ROOT = Path(__file__).resolve().parent.parent


def measure(scenario: Path, solver: str, runs: int) -> list[dict]:
    """``runs`` fresh-process planning runs with ``solver`` for the LP stage."""
    return fresh_runs([str(ROOT / "benchmarks" / "one_run.py"), str(scenario), "default",
                       solver], runs)


def row(scale: int, solver: str, results: list[dict]) -> str:
    """One markdown table row of medians."""
    lp = [r["stages"][-1] for r in results]
    return (f"| {scale}× | {solver} | {statistics.median(r['total_s'] for r in results):.2f} | "
            f"{statistics.median(s['seconds'] for s in lp):.2f} | "
            f"{lp[0]['objective']:,.1f} | {lp[0]['status']} | "
            f"{100 * max(s['gap'] for s in lp):.3f} % | "
            f"{max(r['peak_mb'] for r in results):.0f} | {len(results)} |")


def main() -> None:
    """Run and print the table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--solvers", default="highs,cbc")
    parser.add_argument("--scales", default="1,10")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--slow-runs", dest="slow_runs", type=int, default=1)
    args = parser.parse_args()
    print("| scale | LP solver | total s | LP stage s | LP objective | status | gap | peak MB "
          "| runs |\n|---|---|---|---|---|---|---|---|---|", flush=True)
    for scale in (int(s) for s in args.scales.split(",")):
        scenario = scenario_for(scale)
        for solver in args.solvers.split(","):
            runs = args.runs if scale == 1 or solver == "highs" else args.slow_runs
            print(row(scale, solver, measure(scenario, solver, runs)), flush=True)


if __name__ == "__main__":
    main()
