"""Benchmark: plan the sample and the sample at 10×; medians of wall time, memory, gap.

    python benchmarks/bench.py [--runs N] [--scales 1,10] [--full-quarter 28]
                               [--time-limit SECONDS] [--work DIR]

Each run is a fresh process (benchmarks/one_run.py). ``--full-quarter`` adds a row a
scale planned from the quarter's start (``as_of`` = ``quarter_start``: every period of
the quarter, 92 daily ones instead of the 46 from the sample's ``as_of``). Beside the
wall-time medians each row gives the median CPU seconds (user + system, of the whole
process) and the 1-minute load average at the runs' ends: on a shared machine CPU time
is the steadier figure. Writes benchmarks/results.md.
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


def row(scale: int, results: list[dict], full_quarter: bool = False) -> str:
    """One markdown table row of medians."""
    def med(key: str) -> float:
        return statistics.median(r[key] for r in results)

    first = results[0]
    loads = [r["load_avg"] for r in results]
    label = f"{scale}× full quarter" if full_quarter else f"{scale}×"
    return (f"| {label} | {first['projects']} | {first['clusters']} | {first['periods']} | "
            f"{first['requests']} | {med('total_s'):.2f} | {med('load_s'):.2f} | "
            f"{med('build_s'):.2f} | {med('solve_s'):.2f} | {med('check_s'):.2f} | "
            f"{100 * max(r['gap'] for r in results):.3f} % | {first['status']} | "
            f"{max(r['peak_mb'] for r in results):.0f} | {len(results)} | "
            f"{med('cpu_s'):.2f} | {min(loads):.1f}–{max(loads):.1f} |")


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
    lines = ["| scale | projects | clusters | periods | requests | total s | load s | build s "
             "| solve s | check s | gap (max) | status | peak MB | runs | CPU s | load avg |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    cases = [(int(s), False) for s in args.scales.split(",") if s]
    cases += [(int(s), True) for s in args.full_quarter.split(",") if s]
    for scale, full_quarter in cases:
        runs = args.runs if scale == 1 else max(1, min(args.runs, 3))
        lines.append(row(scale, measure(scenario_for(scale, args.work), runs, full_quarter,
                                        args.time_limit), full_quarter))
        print(lines[-1], flush=True)
    (ROOT / "benchmarks" / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
