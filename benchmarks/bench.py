"""Benchmark: plan the sample and the sample at 10×; medians of wall time, memory, gap.

    python benchmarks/bench.py [--runs N] [--scales 1,10]

Each run is a fresh process (benchmarks/one_run.py). Writes benchmarks/results.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "out"


def scenario_for(scale: int) -> Path:
    """The bundled sample, or a generated copy at ``scale``."""
    if scale == 1:
        return ROOT / "data" / "sample"
    target = OUT / f"sample-x{scale}"
    subprocess.run([sys.executable, str(ROOT / "data" / "generate.py"), "--scale", str(scale),
                    "--out", str(target)], check=True, capture_output=True)
    return target


def fresh_runs(argv: list[str], runs: int, echo: bool = False) -> list[dict]:
    """The figures of ``runs`` fresh Python processes of ``argv``, run from the project root.

    Each prints its figures as JSON on its last line; ``echo`` also writes each to stderr
    as it comes.
    """
    out = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, *argv], check=True, capture_output=True,
                              text=True, cwd=ROOT)
        out.append(json.loads(done.stdout.strip().splitlines()[-1]))
        if echo:
            print(json.dumps(out[-1]), file=sys.stderr)
    return out


def measure(scenario: Path, runs: int) -> list[dict]:
    """``runs`` fresh-process planning runs."""
    return fresh_runs([str(ROOT / "benchmarks" / "one_run.py"), str(scenario)], runs)


def row(scale: int, results: list[dict]) -> str:
    """One markdown table row of medians."""
    def med(key: str) -> float:
        return statistics.median(r[key] for r in results)

    first = results[0]
    return (f"| {scale}× | {first['projects']} | {first['clusters']} | {first['periods']} | "
            f"{first['requests']} | {med('total_s'):.2f} | {med('load_s'):.2f} | "
            f"{med('build_s'):.2f} | {med('solve_s'):.2f} | {med('check_s'):.2f} | "
            f"{100 * max(r['gap'] for r in results):.3f} % | {first['status']} | "
            f"{max(r['peak_mb'] for r in results):.0f} | {len(results)} |")


def main() -> None:
    """Run and write the table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--scales", default="1,10")
    args = parser.parse_args()
    lines = ["| scale | projects | clusters | periods | requests | total s | load s | build s "
             "| solve s | check s | gap (max) | status | peak MB | runs |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for scale in (int(s) for s in args.scales.split(",")):
        runs = args.runs if scale == 1 else max(1, min(args.runs, 3))
        lines.append(row(scale, measure(scenario_for(scale), runs)))
        print(lines[-1], flush=True)
    (ROOT / "benchmarks" / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
