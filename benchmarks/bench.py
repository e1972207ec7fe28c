"""Benchmark: plan the sample and the sample at 10×; medians of wall time, memory, gap.

    python benchmarks/bench.py [--runs N] [--scales 1,10] [--full-quarter 28]
                               [--time-limit SECONDS] [--work DIR]

Each run is a fresh process (benchmarks/one_run.py). ``--full-quarter`` adds a row a
scale planned from the quarter's start (``as_of`` = ``quarter_start``: every period of
the quarter, 92 daily ones instead of the 46 from the sample's ``as_of``). Beside the
wall-time medians each row gives the median CPU seconds (user + system, of the whole
process) and the 1-minute load average at the runs' ends: on a shared machine CPU time
is the steadier figure. Writes ``benchmarks/results/planning.json`` (``planner.results``),
which the docs' Results pages render.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner.results import load_now, table_markdown, write_result  # noqa: E402

OUT = ROOT / "benchmarks" / "out"


def scenario_for(scale: int, work: Path = OUT) -> Path:
    """The bundled sample, or a copy at ``scale`` generated into ``work``."""
    if scale == 1:
        return ROOT / "data" / "sample"
    target = work / f"sample-x{scale}"
    subprocess.run([sys.executable, str(ROOT / "data" / "generate.py"), "--scale", str(scale),
                    "--out", str(target)], check=True, capture_output=True)
    return target


def fresh_runs(argv: list[str], runs: int, echo: bool = False) -> list[dict]:
    """The figures of ``runs`` fresh Python processes of ``argv``, run from the project root.

    Each prints its figures as JSON on its last line; ``echo`` also writes each to stderr
    as it comes. Each gets ``load_avg``: the 1-minute load average when it ended.
    """
    out = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, *argv], check=True, capture_output=True,
                              text=True, cwd=ROOT)
        out.append({**json.loads(done.stdout.strip().splitlines()[-1]),
                    "load_avg": os.getloadavg()[0]})
        if echo:
            print(json.dumps(out[-1]), file=sys.stderr)
    return out


def quarter_start(scenario: Path) -> str:
    """The scenario's ``quarter_start`` (scenario.toml), as ISO text."""
    with (scenario / "scenario.toml").open("rb") as handle:
        return str(tomllib.load(handle)["quarter_start"])


def measure(scenario: Path, runs: int, full_quarter: bool = False,
            time_limit: float | None = None) -> list[dict]:
    """``runs`` fresh-process planning runs (``full_quarter``: from the quarter's start)."""
    argv = [str(ROOT / "benchmarks" / "one_run.py"), str(scenario)]
    if full_quarter:
        argv += ["--as-of", quarter_start(scenario)]
    if time_limit:
        argv += ["--time-limit", str(time_limit)]
    return fresh_runs(argv, runs, echo=True)


#: The table's columns (``planner.results``: each a key, a label and a better direction).
COLUMNS = [
    {"key": "case", "label": "case"}, {"key": "projects", "label": "projects"},
    {"key": "clusters", "label": "clusters"}, {"key": "periods", "label": "periods"},
    {"key": "requests", "label": "reservation requests"},
    {"key": "total_s", "label": "total s", "unit": "s", "better": "lower"},
    {"key": "load_s", "label": "load s", "unit": "s", "better": "lower"},
    {"key": "build_s", "label": "build s", "unit": "s", "better": "lower"},
    {"key": "solve_s", "label": "solve s", "unit": "s", "better": "lower"},
    {"key": "check_s", "label": "check s", "unit": "s", "better": "lower"},
    {"key": "cpu_s", "label": "CPU s", "unit": "s", "better": "lower"},
    {"key": "gap_pct", "label": "gap (max) %", "unit": "%", "better": "lower"},
    {"key": "status", "label": "status"},
    {"key": "peak_mb", "label": "peak MB", "unit": "MB", "better": "lower"},
    {"key": "runs", "label": "runs"}, {"key": "load_avg", "label": "load avg at the ends"},
]


def row(scale: int, results: list[dict], full_quarter: bool = False) -> dict:
    """One row of medians (peak memory and gap: the worst run)."""
    def med(key: str) -> float:
        return round(statistics.median(r[key] for r in results), 2)

    first = results[0]
    loads = [r["load_avg"] for r in results]
    return {"case": f"{scale}× full quarter" if full_quarter else f"{scale}×",
            "projects": first["projects"], "clusters": first["clusters"],
            "periods": first["periods"], "requests": first["requests"],
            "total_s": med("total_s"), "load_s": med("load_s"), "build_s": med("build_s"),
            "solve_s": med("solve_s"), "check_s": med("check_s"), "cpu_s": med("cpu_s"),
            "gap_pct": round(100 * max(r["gap"] for r in results), 3),
            "status": first["status"], "peak_mb": round(max(r["peak_mb"] for r in results)),
            "runs": len(results), "load_avg": f"{min(loads):.1f}–{max(loads):.1f}"}


def main() -> None:
    """Run and write the table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--scales", default="1,10")
    parser.add_argument("--full-quarter", dest="full_quarter", default="",
                        help="scales to plan from the quarter's start too, e.g. 28")
    parser.add_argument("--time-limit", dest="time_limit", type=float, default=None,
                        help="seconds for each run's solve (overrides the model's 60)")
    parser.add_argument("--work", type=Path, default=OUT,
                        help="where the scaled scenarios are generated (default benchmarks/out)")
    args = parser.parse_args()
    load = load_now()
    rows = []
    cases = [(int(s), False) for s in args.scales.split(",") if s]
    cases += [(int(s), True) for s in args.full_quarter.split(",") if s]
    for scale, full_quarter in cases:
        runs = args.runs if scale == 1 else max(1, min(args.runs, 3))
        rows.append(row(scale, measure(scenario_for(scale, args.work), runs, full_quarter,
                                       args.time_limit), full_quarter))
        print(rows[-1], flush=True)
    path = write_result(
        "planning", title="Planning speed: the sample at 1×, 10× and 28×", columns=COLUMNS,
        rows=rows, load_before=load,
        what="`planner run` on the bundled sample and generated copies of it (`--scale N`: "
             "N copies of the institute), each run a fresh process (benchmarks/one_run.py), "
             "default model. Medians over the runs; peak RSS and gap the worst run. *total* "
             "is loading to the written plan; *check* is building the problem arrays, "
             "extracting the plan and the independent re-check of every hard rule; *CPU* is "
             "user + system seconds of the planning process and its LP helper. Horizon: "
             "`as_of` 2026-11-16 to quarter end (46 daily periods); *full quarter*: from "
             "`quarter_start` (92 periods).",
        notes=["On a shared machine CPU seconds are the steadier figure; wall seconds move "
               "with the load average shown.",
               "Targets (issue 11): 10× ≤ 3 s, 28× ≤ 14 s, 28× full quarter ≤ 1.5 GB."])
    print(table_markdown(COLUMNS, rows), f"wrote {path}", sep="\n")

if __name__ == "__main__":
    main()
