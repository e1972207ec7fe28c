"""Benchmark: the planner with each LP solver, on the sample and the sample at 10×.

    python benchmarks/solvers_bench.py [--solvers highs,cbc] [--scales 1,10] [--runs 3]
                                       [--slow-runs 1]

Each run is a fresh process (benchmarks/one_run.py) planning the scenario with the
LP stage on one solver (reservations are HiGHS's either way). Prints one markdown
row per scale and solver: medians of the whole run and of the LP stage (for a PuLP
solver: PuLP writing its MPS, the solver, PuLP reading the solution; building PuLP's
variables and constraints is in the total), the stage's objective, status and gap.
A solver other than the default gets ``--slow-runs`` runs above 1× (CBC takes minutes
there, on a machine shared with others). Writes ``benchmarks/results/solvers.json``.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from bench import fresh_runs, scenario_for  # beside this script, on sys.path when run as one

from planner.results import load_now, table_markdown, write_result  # bench put ROOT on sys.path

ROOT = Path(__file__).resolve().parent.parent


def measure(scenario: Path, solver: str, runs: int) -> list[dict]:
    """``runs`` fresh-process planning runs with ``solver`` for the LP stage."""
    return fresh_runs([str(ROOT / "benchmarks" / "one_run.py"), str(scenario), "default",
                       solver], runs)


COLUMNS = [
    {"key": "scale", "label": "scale"}, {"key": "solver", "label": "LP solver"},
    {"key": "total_s", "label": "total s (median)", "unit": "s", "better": "lower"},
    {"key": "lp_s", "label": "LP stage s (median)", "unit": "s", "better": "lower"},
    {"key": "objective", "label": "LP objective"}, {"key": "status", "label": "status"},
    {"key": "gap_pct", "label": "gap % (max)", "unit": "%", "better": "lower"},
    {"key": "peak_mb", "label": "peak MB", "unit": "MB", "better": "lower"},
    {"key": "runs", "label": "runs"},
]


def row(scale: int, solver: str, results: list[dict]) -> dict:
    """One row of medians."""
    lp = [r["stages"][-1] for r in results]
    return {"scale": f"{scale}×", "solver": solver,
            "total_s": round(statistics.median(r["total_s"] for r in results), 2),
            "lp_s": round(statistics.median(s["seconds"] for s in lp), 2),
            "objective": round(lp[0]["objective"], 1), "status": lp[0]["status"],
            "gap_pct": round(100 * max(s["gap"] for s in lp), 3),
            "peak_mb": round(max(r["peak_mb"] for r in results)), "runs": len(results)}


def main() -> None:
    """Run and write the table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--solvers", default="highs,cbc")
    parser.add_argument("--scales", default="1,10")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--slow-runs", dest="slow_runs", type=int, default=1)
    args = parser.parse_args()
    load = load_now()
    rows = []
    for scale in (int(s) for s in args.scales.split(",")):
        scenario = scenario_for(scale)
        for solver in args.solvers.split(","):
            runs = args.runs if scale == 1 or solver == "highs" else args.slow_runs
            rows.append(row(scale, solver, measure(scenario, solver, runs)))
            print(rows[-1], flush=True)
    path = write_result(
        "solvers", title="The elastic LP on each solver", columns=COLUMNS, rows=rows,
        load_before=load,
        what="The whole planner with the elastic LP stage on each solver (`--solver`), each "
             "run a fresh process; medians of the whole run and of the LP stage (for a PuLP "
             "solver: PuLP writing its MPS, the solver, PuLP reading the solution). "
             "Reservations are placed by HiGHS either way.")
    print(table_markdown(COLUMNS, rows), f"wrote {path}", sep="\n")

if __name__ == "__main__":
    main()
