"""A chain of daily planning cycles (``planner cycle``) on a generated scenario, timed.

Generates the sample at ``--scale`` (default 10) into ``--work``, then runs ``planner cycle
SCENARIO --state WORK/state --as-of D --export ...`` in a fresh process for ``--cycles``
consecutive days from the scenario's ``as_of``. Between cycles it feeds back, as usage rows
in the scenario's ``usage.csv``, what the previous plan charged to budgets in its first
period, as if the executor had run the plan: every guaranteed grant as one job of
``gpu_hours / period hours`` GPUs over the whole period, and every reservation running in
it as one job of its nodes' GPUs over its overlap with the period. Opportunistic grants
are beyond budget and charged to none (the Slurm export runs them under a QOS with
``UsageFactor=0``); ``usage.csv`` has no column to tell them apart, so they are not fed
back (fed back, they overran budgets: a running reservation then no longer fitted its
project's budget left, and cycle 12 of the first chain failed rule 4).

Every cycle must exit 0: the cycle re-checks each plan against rules 1-6 (with the previous
plan for rule 6) before it keeps it, so an exit 0 is a valid plan. Prints one line per
cycle and the median and maximum seconds, and writes them (wall and CPU seconds of each
cycle's process) to ``benchmarks/results/cycle.json`` (``planner.results``).

Usage: ``python benchmarks/cycle_chain.py [--scale 10] [--cycles 30] [--work DIR]
[--export slurm,kueue,json]``; ``--resume`` continues a chain in ``--work`` after its
current plan (the result file then holds the cycles of this run only).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner.results import load_now, table_markdown, write_result  # noqa: E402

COLUMNS = [
    {"key": "cycle", "label": "cycle"}, {"key": "as_of", "label": "as_of"},
    {"key": "fed", "label": "usage rows fed"}, {"key": "allocations", "label": "allocations"},
    {"key": "reservations", "label": "reservations"}, {"key": "status", "label": "status"},
    {"key": "wall_s", "label": "wall s", "unit": "s", "better": "lower"},
    {"key": "cpu_s", "label": "CPU s", "unit": "s", "better": "lower"},
]


def usage_rows(plan: dict, clusters: pd.DataFrame) -> list[str]:
    """CSV lines of the jobs the plan's first period runs (see the module docstring)."""
    first = plan["periods"][0]
    start, end = pd.Timestamp(first["start"]), pd.Timestamp(first["end"])
    hours = (end - start) / pd.Timedelta(hours=1)
    gpn = dict(zip(clusters["cluster"], clusters["gpus_per_node"], strict=True))
    day = start.strftime("%Y%m%d")
    rows = []
    grants = [a for a in plan["allocations"]
              if a["period_start"] == first["start"] and a["kind"] == "guaranteed"]
    for n, a in enumerate(grants):
        rows.append((f"cycle-{day}-{n:05d}", a["project"], a["cluster"],
                     a["gpu_hours"] / hours, start, end))
    for r in plan["reservations"]:
        lo, hi = max(start, pd.Timestamp(r["start"])), min(end, pd.Timestamp(r["end"]))
        if hi > lo:
            rows.append((f"cycle-{day}-{r['request_id']}", r["project"], r["cluster"],
                         float(r["nodes"] * gpn[r["cluster"]]), lo, hi))
    stamp = lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    # nine decimals: a grant of a micro-GPU-hour still reads as a positive GPU count
    return [f"{j},{p},{c},{g:.9f},{stamp(s)},{stamp(e)}" for j, p, c, g, s, e in rows
            if g >= 1e-9]


def feed_back(scenario: Path, plan: dict) -> int:
    """Write the plan's first period into ``usage.csv`` as jobs; return how many.

    Rows fed before for the same period are replaced (a resumed chain feeds once).
    """
    usage = scenario / "usage.csv"
    text = usage.read_text(encoding="utf-8")
    header = text.split("\n", 1)[0].split(",")
    day = pd.Timestamp(plan["periods"][0]["start"]).strftime("%Y%m%d")
    kept = [line for line in text.splitlines() if not line.startswith(f"cycle-{day}-")]
    lines = usage_rows(plan, pd.read_csv(scenario / "clusters.csv"))
    pad = "," * (len(header) - 6)  # an optional trailing column (state) left empty
    usage.write_text("\n".join(kept + [f"{line}{pad}" for line in lines]) + "\n",
                     encoding="utf-8")
    return len(lines)


def main() -> None:
    """Generate, chain the cycles, report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=int, default=10)
    parser.add_argument("--cycles", type=int, default=30)
    parser.add_argument("--work", type=Path, default=Path("/tmp/gpu-planner-cycle-chain"))
    parser.add_argument("--export", default="slurm,kueue,json")
    parser.add_argument("--model", default="default")
    parser.add_argument("--resume", action="store_true",
                        help="continue the chain in --work after its current plan")
    args = parser.parse_args()
    scenario, state = args.work / "scenario", args.work / "state"
    as_of = pd.Timestamp("2026-11-16", tz="UTC")
    rows: list[dict] = []
    first = 0
    load = load_now()
    if args.resume:
        current = json.loads((state / "current" / "plan.json").read_text())
        first = (pd.Timestamp(current["as_of"]) - as_of).days + 1
    elif args.work.exists():
        raise SystemExit(f"{args.work} exists; give a fresh --work folder (or --resume)")
    else:
        subprocess.run([sys.executable, str(ROOT / "data" / "generate.py"), "--scale",
                        str(args.scale), "--out", str(scenario)], check=True,
                       stdout=subprocess.DEVNULL)
    planner = Path(sys.executable).parent / "planner"
    for i in range(first, args.cycles):
        day = as_of + pd.Timedelta(days=i)
        fed = 0
        if i:
            fed = feed_back(scenario, json.loads((state / "current" / "plan.json").read_text()))
        started = time.perf_counter()
        cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run([str(planner), "cycle", str(scenario), "--state", str(state),
                               "--as-of", day.strftime("%Y-%m-%d"), "--export", args.export,
                               "--model", args.model], capture_output=True, text=True)
        took = time.perf_counter() - started
        cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            print(done.stdout, done.stderr, sep="\n")
            raise SystemExit(f"cycle {i + 1} ({day.date()}) exited {done.returncode}")
        plan = json.loads((state / "current" / "plan.json").read_text())
        rows.append({"cycle": i + 1, "as_of": str(day.date()), "fed": fed,
                     "allocations": len(plan["allocations"]),
                     "reservations": len(plan["reservations"]),
                     "status": plan["solver"]["status"], "wall_s": round(took, 1),
                     "cpu_s": round(cpu_after.ru_utime + cpu_after.ru_stime
                                    - cpu_before.ru_utime - cpu_before.ru_stime, 1)})
        print(rows[-1], flush=True)
    wall = [r["wall_s"] for r in rows]
    cpu = [r["cpu_s"] for r in rows]
    summary = (f"{len(rows)} daily cycles at {args.scale}× (--export {args.export}): every "
               f"plan valid; median {statistics.median(wall):.1f} s wall "
               f"({statistics.median(cpu):.1f} s CPU), max {max(wall):.1f} s wall per cycle")
    path = write_result(
        "cycle", title=f"A month of daily planning cycles at {args.scale}×", columns=COLUMNS,
        rows=rows, load_before=load,
        what=f"`planner cycle … --export {args.export}` on the sample at {args.scale}×, "
             f"{len(rows)} consecutive days from 2026-11-16, each cycle a fresh process "
             "(ingest, plan from the previous plan, check rules 1–6, export, apply.sh). "
             "Between cycles the previous plan's first period is fed back as usage rows, "
             "as if the executor had run it (guaranteed grants and reservations: what the "
             "plan charges to budgets). *CPU* is the cycle process's user + system seconds.",
        notes=[summary, "Every cycle exited 0: the cycle re-checks each plan against rules "
               "1–6 before it keeps it, so each plan in the table is valid."])
    print(table_markdown(COLUMNS, rows), summary, f"wrote {path}", sep="\n")

if __name__ == "__main__":
    main()
