"""Benchmark: the reservation stage's gap on reservation-heavy scenarios, in the default limit.

    nice python benchmarks/reservations_gap.py [--runs N] [--cases r10,x10r10,x10]
        [--limits time|work] [--workers N] [--name NAME]

Cases (generated once into benchmarks/out/): ``r10`` = the sample with ten times the
reservation requests (560 on 8 clusters), ``x10r10`` = the 10× sample with ten times
the requests (6,060 on 80), ``x10`` = the 10× sample itself (the daily run's stage
time). Each run is a fresh process planning the whole scenario with the default model
(60 s limit, half of it for the reservation stage); it reports the stage's objective,
bound and gap as the plan carries them, the stage's seconds (building the parts and
their warm starts, and solving), the number of independent parts, the worker processes
that solved them at once (``part_workers``: 1 = in turn; ``PLANNER_RESERVATION_WORKERS``
fixes it) and the load average (1 min) at the run's end. Prints a markdown table of
medians (gap: median and worst).

``--limits work`` plans with the work-limited mode (``solver.limits = "work"``, the
default of ``planner cycle``): the same inputs must give the same plan whatever the load,
so each run also reports the SHA-256 of its ``plan.json`` bytes. ``--workers N`` sets
``PLANNER_RESERVATION_WORKERS`` (1: the parts in turn, on one core). Each run reports its
CPU seconds (the process and its part workers, user + system). ``--name`` writes the
rows to ``benchmarks/results/<NAME>.json`` (:func:`planner.results.write_result`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

from bench import fresh_runs  # beside this script, on sys.path when run as one

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner.results import load_now, write_result  # noqa: E402

OUT = ROOT / "benchmarks" / "out"
CASES = {"r10": (1, 10), "x10r10": (10, 10), "x10": (10, 1)}  # name: (scale, reservations factor)

ONE_RUN = """
import hashlib, json, os, resource, sys, time
import planner.model.reservations as stage1
from planner.config import load_model, with_limits
from planner.inputs.load import load_scenario
from planner.plan.write import plan_bytes
from planner.run import plan_scenario
built = {}
build = stage1.build_reservation_model
def timed_build(*args):
    tick = time.perf_counter()
    built["model"] = build(*args)
    built["s"] = time.perf_counter() - tick
    return built["model"]
stage1.build_reservation_model = timed_build
decide = stage1.part_workers
def counted_workers(*args):
    built["workers"] = decide(*args)
    return built["workers"]
stage1.part_workers = counted_workers
import planner.model.solve
planner.model.solve.build_reservation_model = timed_build
started = time.perf_counter()
model = load_model("default")
if sys.argv[2] != "time":
    model = with_limits(model, sys.argv[2])
run = plan_scenario(load_scenario(sys.argv[1]), model)
stage = run.solution.stages[0]
cpu = sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF,
          resource.RUSAGE_CHILDREN) for f in ("ru_utime", "ru_stime"))
print(json.dumps({"requests": len(run.problem.requests), "clusters": len(run.problem.clusters),
                  "cpu_s": cpu, "sha256": hashlib.sha256(plan_bytes(run.plan)).hexdigest(),
                  "limits": run.plan.body["solver"].get("limits"),
                  "parts": len(built["model"].parts), "workers": built.get("workers", 1),
                  "placed": sum(not r["kept"] for r in run.plan.reservations),
                  "status": str(stage.status), "objective": stage.objective,
                  "bound": stage.bound, "gap": stage.gap,
                  "plan_gap": run.plan.body["solver"]["mip_gap"],
                  "stage_s": built["s"] + stage.seconds, "solve_s": stage.seconds,
                  "total_s": time.perf_counter() - started, "load": os.getloadavg()[0],
                  "by_part": [{"clusters": [run.problem.clusters[k] for k in part.clusters],
                               "requests": len(part.requests), "objective": o.objective / 100,
                               "bound": o.bound / 100, "gap": o.gap, "seconds": o.seconds}
                              for part, o in zip(built["model"].parts,
                                                 built["model"].outcomes)]}))
"""


def scenario_for(name: str) -> Path:
    """Generate (once) and return the case's scenario folder."""
    scale, factor = CASES[name]
    target = OUT / f"reservations-{name}"
    if not (target / "scenario.toml").exists():
        subprocess.run([sys.executable, str(ROOT / "data" / "generate.py"), "--scale", str(scale),
                        "--reservations-factor", str(factor), "--out", str(target)],
                       check=True, capture_output=True)
    return target


def measure(scenario: Path, runs: int, limits: str = "time") -> list[dict]:
    """``runs`` fresh-process planning runs of ``scenario``."""
    return fresh_runs(["-c", ONE_RUN, str(scenario), limits], runs, echo=True)


def row(name: str, results: list[dict]) -> str:
    """One markdown row of medians."""
    def med(key: str) -> float:
        return statistics.median(r[key] for r in results)

    first = results[0]
    loads = [r["load"] for r in results]
    return (f"| {name} | {first['requests']} | {first['clusters']} | {first['parts']} | "
            f"{med('placed'):.0f} | {med('objective'):,.0f} | {med('bound'):,.0f} | "
            f"{100 * med('gap'):.2f} % | {100 * max(r['gap'] for r in results):.2f} % | "
            f"{', '.join(sorted({r['status'] for r in results}))} | {med('stage_s'):.2f} | "
            f"{med('total_s'):.1f} | {min(loads):.1f}–{max(loads):.1f} | "
            f"{'/'.join(str(r['workers']) for r in results)} | {len(results)} |")


COLUMNS = [
    {"key": "case", "label": "case"}, {"key": "limits", "label": "limits"},
    {"key": "run", "label": "run"}, {"key": "requests", "label": "requests"},
    {"key": "parts", "label": "parts"}, {"key": "workers", "label": "workers"},
    {"key": "placed", "label": "placed"},
    {"key": "objective", "label": "objective (GPU-hours)", "better": "higher"},
    {"key": "bound", "label": "bound"},
    {"key": "gap_pct", "label": "stage gap %", "unit": "%", "better": "lower"},
    {"key": "status", "label": "status"},
    {"key": "cpu_s", "label": "CPU s", "unit": "s", "better": "lower"},
    {"key": "total_s", "label": "wall s", "unit": "s", "better": "lower"},
    {"key": "load", "label": "load (1 min, at the end)"},
    {"key": "sha256", "label": "plan.json SHA-256 (first 12)"},
]


def result_rows(name: str, limits: str, results: list[dict]) -> list[dict]:
    """One result-file row a run."""
    return [{"case": name, "limits": limits, "run": n, "requests": r["requests"],
             "parts": r["parts"], "workers": r["workers"], "placed": r["placed"],
             "objective": r["objective"], "bound": r["bound"],
             "gap_pct": round(100 * r["gap"], 3), "status": r["status"],
             "cpu_s": round(r["cpu_s"], 1), "total_s": round(r["total_s"], 1),
             "load": round(r["load"], 2), "sha256": r["sha256"][:12]}
            for n, r in enumerate(results, start=1)]


def main() -> None:
    """Run the cases and print the table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cases", default="r10,x10r10")
    parser.add_argument("--limits", choices=("time", "work"), default="time")
    parser.add_argument("--workers", type=int,
                        help="PLANNER_RESERVATION_WORKERS (1: the parts in turn, one core)")
    parser.add_argument("--name", help="write benchmarks/results/<NAME>.json")
    args = parser.parse_args()
    if args.workers is not None:
        os.environ["PLANNER_RESERVATION_WORKERS"] = str(args.workers)
    load_before = load_now()
    lines = ["| case | requests | clusters | parts | placed | objective | bound | gap (median) | "
             "gap (worst) | status | stage s | total s | load avg | workers | runs |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    rows, notes = [], []
    for name in args.cases.split(","):
        results = measure(scenario_for(name), args.runs, args.limits)
        lines.append(row(name, results))
        rows += result_rows(name, args.limits, results)
        shas = {r["sha256"] for r in results}
        gap = statistics.median(r["gap"] for r in results)
        notes.append(f"{name}: stage gap median {100 * gap:.2f} %, "
                     f"worst {100 * max(r['gap'] for r in results):.2f} %; CPU s median "
                     f"{statistics.median(r['cpu_s'] for r in results):.1f}; "
                     f"{len(shas)} distinct plan.json over {len(results)} runs")
    print("\n".join(lines))
    print("\n".join(notes))
    if args.name:
        workers = os.environ.get("PLANNER_RESERVATION_WORKERS", "by the machine")
        write_result(args.name, title=f"Reservation-heavy plans, {args.limits} limits",
                     what=(f"Fresh planning runs of reservation-heavy generated scenarios "
                           f"(default model, solver.limits = {args.limits}, reservation "
                           f"workers: {workers}); the reservation stage's objective, bound "
                           "and gap as plan.json carries them, CPU seconds of the process "
                           "and its part workers, and the plan's bytes (SHA-256)"),
                     columns=COLUMNS, rows=rows, notes=notes, load_before=load_before)


if __name__ == "__main__":
    main()
