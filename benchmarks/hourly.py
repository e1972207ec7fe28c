"""Benchmark: hourly plans over a full quarter on a mixed grid, and the daily elastic stage.

    python benchmarks/hourly.py [--runs N] [--hourly 10] [--daily 10,28] [--grid "1h*48, 24h"]

Hourly rows: the generated sample at each ``--hourly`` scale with ``period_hours = 1`` and
``as_of`` at the quarter's start (92 days: 2,208 hourly periods on the uniform grid),
planned with the default model plus ``solver.period_grid = GRID`` (default: 48 hourly
periods, then daily ones to quarter end). Daily rows: the generated sample at each
``--daily`` scale as it is (46 daily periods from 2026-11-16), default model. Each run
is a fresh process (benchmarks/one_run.py: peak RSS is the run's own); the table gives
medians, the worst peak RSS and gap, and the 1-minute load average seen before each run
(median and highest). Writes ``benchmarks/results/hourly.json`` (``planner.results``).
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path

from bench import OUT, ROOT, fresh_runs, scenario_for  # beside this script, on sys.path

from planner.results import load_now, table_markdown, write_result  # bench put ROOT on sys.path

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


COLUMNS = [
    {"key": "case", "label": "case"}, {"key": "grid", "label": "grid"},
    {"key": "projects", "label": "projects"}, {"key": "clusters", "label": "clusters"},
    {"key": "periods", "label": "periods"},
    {"key": "total_s", "label": "total s", "unit": "s", "better": "lower"},
    {"key": "load_s", "label": "load s", "unit": "s", "better": "lower"},
    {"key": "build_s", "label": "build s", "unit": "s", "better": "lower"},
    {"key": "lp_s", "label": "LP s", "unit": "s", "better": "lower"},
    {"key": "solve_s", "label": "solve s", "unit": "s", "better": "lower"},
    {"key": "check_s", "label": "check s", "unit": "s", "better": "lower"},
    {"key": "cpu_s", "label": "CPU s", "unit": "s", "better": "lower"},
    {"key": "lp_gap", "label": "LP gap (max)", "better": "lower"},
    {"key": "status", "label": "status"},
    {"key": "peak_mb", "label": "peak MB", "unit": "MB", "better": "lower"},
    {"key": "runs", "label": "runs"},
    {"key": "load_avg", "label": "load avg before (median, highest)"},
]


def row(label: str, grid: str, results: list[dict]) -> dict:
    """One row: medians, worst gap and peak."""
    def med(value) -> float:
        return round(statistics.median(value(r) for r in results), 2)

    first = results[0]
    loads = [r["load"] for r in results]
    return {"case": label, "grid": grid, "projects": first["projects"],
            "clusters": first["clusters"], "periods": first["periods"],
            "total_s": med(lambda r: r["total_s"]), "load_s": med(lambda r: r["load_s"]),
            "build_s": med(lambda r: r["build_s"]),
            "lp_s": med(lambda r: r["stages"][1]["seconds"]),
            "solve_s": med(lambda r: r["solve_s"]), "check_s": med(lambda r: r["check_s"]),
            "cpu_s": med(lambda r: r["cpu_s"]),
            "lp_gap": float(f"{max(r['stages'][1]['gap'] for r in results):.2g}"),
            "status": first["status"], "peak_mb": round(max(r["peak_mb"] for r in results)),
            "runs": len(results),
            "load_avg": f"{statistics.median(loads):.1f} (≤ {max(loads):.1f})"}


def main() -> None:
    """Run and write the table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hourly", default="10")
    parser.add_argument("--daily", default="10,28")
    parser.add_argument("--grid", default=DEFAULT_GRID)
    args = parser.parse_args()
    load = load_now()
    rows = []
    model = str(grid_model(args.grid))
    for scale in (int(s) for s in args.hourly.split(",") if s):
        rows.append(row(f"{scale}× hourly, full quarter", args.grid,
                        measure(hourly_scenario(scale), model, args.runs)))
        print(rows[-1], flush=True)
    for scale in (int(s) for s in args.daily.split(",") if s):
        rows.append(row(f"{scale}× daily", "uniform 24 h",
                        measure(scenario_for(scale), "default", args.runs)))
        print(rows[-1], flush=True)
    path = write_result(
        "hourly", title="Hourly plans over a full quarter, on the mixed grid", columns=COLUMNS,
        rows=rows, load_before=load,
        what="The generated sample with `period_hours = 1` and `as_of` at the quarter's start "
             "(2,208 hourly periods on a uniform grid), planned on the mixed grid "
             f"`period_grid = \"{args.grid}\"`; daily rows: the generated sample as it is. "
             "Each run a fresh process; medians, the worst peak RSS and LP gap. *LP* is the "
             "elastic LP as HiGHS reported it (all groups); *build* the reservation model, "
             "the fair-share targets and the LP build; *check* also holds building the "
             "problem arrays and extracting the plan.",
        notes=["Target (issue 9): the hourly 10× full quarter in ≤ 60 s and ≤ 2 GB.",
               "A mixed grid places fewer reservations: a request is placed only where its "
               "hours fill whole periods (docs/explanation/model.md)."])
    print(table_markdown(COLUMNS, rows), f"wrote {path}", sep="\n")

if __name__ == "__main__":
    main()
