"""Benchmark: hourly plans over a full quarter on a mixed grid, and the daily elastic stage.

    python benchmarks/hourly.py [--runs N] [--hourly 10] [--daily 10,28] [--grid "1h*48, 24h"]

Hourly rows: the generated sample at each ``--hourly`` scale with ``period_hours = 1`` and
``as_of`` at the quarter's start (92 days: 2,208 hourly periods on the uniform grid),
planned with the default model plus ``solver.period_grid = GRID`` (default: 48 hourly
periods, then daily ones to quarter end). Daily rows: the generated sample at each
``--daily`` scale as it is (46 daily periods from 2026-11-16), default model. Each run
is a fresh process (benchmarks/one_run.py: peak RSS is the run's own); the table gives
medians, the worst peak RSS and gap, and the 1-minute load average seen before each run
(median and highest). Writes benchmarks/hourly_results.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path

from bench import OUT, ROOT, fresh_runs, scenario_for  # beside this script, on sys.path

DEFAULT_GRID = "1h*48, 24h"


def hourly_scenario(scale: int) -> Path:
    """The generated sample at ``scale``, hourly, planned from the quarter's start."""
    source = scenario_for(scale)
    target = OUT / f"sample-x{scale}-hourly"
    target.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        if item.is_file() and item.name != "scenario.toml":
            (target / item.name).write_bytes(item.read_bytes())
    lines = []
    for line in (source / "scenario.toml").read_text().splitlines():
        if line.startswith("period_hours"):
            line = "period_hours = 1"
        elif line.startswith("as_of"):
            line = "as_of = 2026-10-01"
        lines.append(line)
    (target / "scenario.toml").write_text("\n".join(lines) + "\n")
    return target


def grid_model(grid: str) -> Path:
    """The default model with ``solver.period_grid = grid``, written beside the scenarios."""
    default = (ROOT / "planner" / "models" / "default.toml").read_text()
    path = OUT / "hourly-model.toml"
    OUT.mkdir(parents=True, exist_ok=True)
    path.write_text(default.replace('name = "default"', 'name = "hourly-mixed"')
                    + f'period_grid = "{grid}"\n')
    return path


def measure(scenario: Path, model: str, runs: int) -> list[dict]:
    """``runs`` fresh-process plans, each with the load average seen just before it."""
    out = []
    for _ in range(runs):
        load = os.getloadavg()[0]
        result = fresh_runs([str(ROOT / "benchmarks" / "one_run.py"), str(scenario), model], 1)[0]
        result["load"] = load
        out.append(result)
    return out


def row(label: str, grid: str, results: list[dict]) -> str:
    """One markdown row: medians, worst gap and peak."""
    def med(value) -> float:
        return statistics.median(value(r) for r in results)

    first = results[0]
    lp = lambda r: r["stages"][1]["seconds"]  # noqa: E731
    return (f"| {label} | {grid} | {first['projects']} | {first['clusters']} | "
            f"{first['periods']} | {med(lambda r: r['total_s']):.2f} | "
            f"{med(lambda r: r['load_s']):.2f} | {med(lambda r: r['build_s']):.2f} | "
            f"{med(lp):.2f} | {med(lambda r: r['solve_s']):.2f} | "
            f"{med(lambda r: r['check_s']):.2f} | "
            f"{100 * max(r['stages'][1]['gap'] for r in results):.2g} % | {first['status']} | "
            f"{max(r['peak_mb'] for r in results):.0f} | {len(results)} | "
            f"{med(lambda r: r['load']):.1f} (≤ {max(r['load'] for r in results):.1f}) |")


def main() -> None:
    """Run and write the table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hourly", default="10")
    parser.add_argument("--daily", default="10,28")
    parser.add_argument("--grid", default=DEFAULT_GRID)
    args = parser.parse_args()
    lines = ["| case | grid | projects | clusters | periods | total s | load s | build s "
             "| LP s | solve s | check s | LP gap (max) | status | peak MB | runs | load avg |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    model = str(grid_model(args.grid))
    for scale in (int(s) for s in args.hourly.split(",") if s):
        lines.append(row(f"{scale}× hourly, full quarter", f"`{args.grid}`",
                         measure(hourly_scenario(scale), model, args.runs)))
        print(lines[-1], flush=True)
    for scale in (int(s) for s in args.daily.split(",") if s):
        lines.append(row(f"{scale}× daily", "uniform 24 h",
                         measure(scenario_for(scale), "default", args.runs)))
        print(lines[-1], flush=True)
    (ROOT / "benchmarks" / "hourly_results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
