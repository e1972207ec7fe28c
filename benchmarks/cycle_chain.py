"""A chain of daily planning cycles (``planner cycle``) on a generated scenario, measured.

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
plan for rule 6) before it keeps it, so an exit 0 is a valid plan. Per cycle it records
the CPU seconds of the ``planner cycle`` process and everything it waited for (user +
system, ``RUSAGE_CHILDREN``: its HiGHS threads, LP helper and part workers included), its
wall seconds, the load average, and the bytes of the cycle's folder. With ``--churn`` it
also compares each cycle's Kueue sets with the previous cycle's, object by object, as
``kubectl diff`` would show applying today's file over yesterday's objects: a unified
diff (3 lines of context) of each object's YAML (keys sorted, as kubectl prints them),
with kubectl's ``diff -u -N`` line per object; objects only in the new set count whole,
objects gone (pruned) are counted apart. *Real* changes are the objects whose content
differs beyond the set's window annotations (:data:`planner.exporters.kueue.WINDOW_ANNOTATIONS`).

Writes ``benchmarks/results/<--name>.json`` (default ``cycle``) with
:func:`planner.results.write_result` (commit, date, machine, load). ``--resume``
continues a chain in ``--work`` after its current plan (the result file then holds the
cycles of this run only). ``--code DIR`` runs the cycles with another checkout's
``planner`` package (``PYTHONPATH=DIR``), e.g. an earlier commit unpacked by ``git
archive``, for a before-and-after figure.

Usage: ``python benchmarks/cycle_chain.py [--scale 10] [--cycles 30] [--work DIR]
[--export slurm,kueue,json] [--churn] [--name cycle] [--resume] [--code DIR]``
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner.results import load_now, write_result  # noqa: E402

#: the annotations a set's window is written in (on the pool alone since the export keeps
#: an object's bytes unless its content changes; on every object before)
WINDOW = {f"gpu-planner.io/{k}" for k in ("valid-from", "valid-until", "plan-as-of",
                                           "input-digest", "cluster")}
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


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

    Rows fed before for the same period are replaced.
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


def folder_bytes(folder: Path) -> int:
    """The bytes of every file under ``folder``."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def kueue_sets(folder: Path) -> dict[str, dict[tuple[str, str, str], dict]]:
    """The first period's Kueue sets of a cycle's folder: set (cluster or "") -> objects.

    Objects by (kind, namespace, name).
    """
    index = yaml.load((folder / "kueue" / "index.yaml").read_text(), Loader=LOADER)
    first = index["periods"][0]["valid_from"]
    out = {}
    for entry in index["periods"]:
        if entry["valid_from"] != first:
            continue
        docs = yaml.load_all((folder / "kueue" / entry["file"]).read_text(), Loader=LOADER)
        out[entry.get("cluster", "")] = {
            (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d
            for d in docs if d}
    return out


def _text(obj: dict) -> list[str]:
    return yaml.dump(obj, Dumper=DUMPER, sort_keys=True, default_flow_style=False,
                     allow_unicode=True, width=1000).splitlines()


def _content(obj: dict) -> dict:
    """``obj`` without the window annotations."""
    meta = dict(obj["metadata"])
    meta["annotations"] = {k: v for k, v in meta.get("annotations", {}).items()
                           if k not in WINDOW}
    return {**obj, "metadata": meta}


def churn(before: Path, after: Path) -> dict[str, int]:
    """What ``kubectl diff`` shows applying ``after``'s first-period sets over ``before``'s.

    ``diff_lines``: the lines of the diff (per changed or new object, kubectl's ``diff -u
    -N`` line and the unified diff with 3 lines of context); ``changed``: objects whose
    YAML differs; ``real``: of those and the new ones, the objects whose content differs
    beyond the window annotations; ``new``, ``gone``: objects only in one of the two.
    """
    old_sets, new_sets = kueue_sets(before), kueue_sets(after)
    lines = changed = real = new = gone = 0
    for key in sorted(set(old_sets) | set(new_sets)):
        old, now = old_sets.get(key, {}), new_sets.get(key, {})
        gone += len(set(old) - set(now))
        for name, obj in now.items():
            if name not in old:
                new += 1
                real += 1
                lines += 1 + 3 + len(_text(obj))  # diff -u -N, ---, +++, @@, the object
                continue
            if obj == old[name]:
                continue
            changed += 1
            real += _content(obj) != _content(old[name])
            lines += 1 + sum(1 for _ in difflib.unified_diff(_text(old[name]), _text(obj),
                                                             lineterm="", n=3))
    return {"diff_lines": lines, "changed": changed, "real": real, "new": new, "gone": gone}


def run_cycle(planner: list[str], scenario: Path, state: Path, day: pd.Timestamp,
              export: str, model: str, env: dict[str, str]) -> tuple[float, float]:
    """One ``planner cycle`` process; its CPU seconds (with what it waited for) and wall."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([*planner, "cycle", str(scenario), "--state", str(state),
                           "--as-of", day.strftime("%Y-%m-%d"), "--export", export,
                           "--model", model], capture_output=True, text=True, env=env,
                          cwd=state.parent)  # not the checkout: -m puts the cwd first
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        print(done.stdout, done.stderr, sep="\n")
        raise SystemExit(f"cycle {day.date()} exited {done.returncode}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


COLUMNS = [
    {"key": "cycle", "label": "cycle"},
    {"key": "as_of", "label": "as_of"},
    {"key": "usage_rows_fed", "label": "usage rows fed"},
    {"key": "allocations", "label": "allocations"},
    {"key": "reservations", "label": "reservations"},
    {"key": "status", "label": "status"},
    {"key": "cpu_s", "label": "CPU s", "unit": "s", "better": "lower"},
    {"key": "wall_s", "label": "wall s", "unit": "s", "better": "lower"},
    {"key": "load", "label": "load (1 min)"},
    {"key": "folder_mb", "label": "folder MB", "unit": "MB", "better": "lower"},
    {"key": "kueue_mb", "label": "Kueue MB", "unit": "MB", "better": "lower"},
]
CHURN_COLUMNS = [
    {"key": "diff_lines", "label": "kubectl diff lines", "better": "lower"},
    {"key": "changed", "label": "objects changed"},
    {"key": "real", "label": "objects really changed or new"},
    {"key": "new", "label": "new objects"},
    {"key": "gone", "label": "objects pruned"},
]


def main() -> None:
    """Generate, chain the cycles, report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=int, default=10)
    parser.add_argument("--cycles", type=int, default=30)
    parser.add_argument("--work", type=Path, default=Path("/tmp/gpu-planner-cycle-chain"))
    parser.add_argument("--export", default="slurm,kueue,json")
    parser.add_argument("--model", default="default")
    parser.add_argument("--churn", action="store_true",
                        help="also compare each cycle's Kueue sets with the previous one's")
    parser.add_argument("--name", default="cycle", help="benchmarks/results/<name>.json")
    parser.add_argument("--resume", action="store_true",
                        help="continue the chain in --work after its current plan")
    parser.add_argument("--code", type=Path,
                        help="run the cycles with the planner package of this checkout")
    args = parser.parse_args()
    load_before = load_now()
    scenario, state = args.work / "scenario", args.work / "state"
    as_of = pd.Timestamp("2026-11-16", tz="UTC")
    first = 0
    previous: Path | None = None
    if args.resume:
        previous = (state / "current").resolve()
        current = json.loads((previous / "plan.json").read_text())
        first = (pd.Timestamp(current["as_of"]) - as_of).days + 1
    elif args.work.exists():
        raise SystemExit(f"{args.work} exists; give a fresh --work folder (or --resume)")
    else:
        subprocess.run([sys.executable, str(ROOT / "data" / "generate.py"), "--scale",
                        str(args.scale), "--out", str(scenario)], check=True,
                       stdout=subprocess.DEVNULL)
    env = dict(os.environ)
    if args.code is not None:
        env["PYTHONPATH"] = str(args.code.resolve())
    planner = [sys.executable, "-m", "planner.cli"]
    rows: list[dict] = []
    for i in range(first, args.cycles):
        day = as_of + pd.Timedelta(days=i)
        fed = 0
        if i:
            fed = feed_back(scenario, json.loads((state / "current" / "plan.json").read_text()))
        cpu, wall = run_cycle(planner, scenario, state, day, args.export, args.model, env)
        folder = (state / "current").resolve()
        plan = json.loads((folder / "plan.json").read_text())
        row = {"cycle": i + 1, "as_of": str(day.date()), "usage_rows_fed": fed,
               "allocations": len(plan["allocations"]),
               "reservations": len(plan["reservations"]),
               "status": plan["solver"]["status"], "cpu_s": round(cpu, 2),
               "wall_s": round(wall, 2), "load": round(os.getloadavg()[0], 2),
               "folder_mb": round(folder_bytes(folder) / 1e6, 2),
               "kueue_mb": (round(folder_bytes(folder / "kueue") / 1e6, 2)
                            if (folder / "kueue").is_dir() else 0.0)}
        if args.churn and "kueue" in args.export:
            row |= (churn(previous, folder) if previous is not None
                    else dict.fromkeys(c["key"] for c in CHURN_COLUMNS))
        previous = folder
        rows.append(row)
        print(json.dumps(row), flush=True)
    cpu = [r["cpu_s"] for r in rows]
    wall = [r["wall_s"] for r in rows]
    summary = (f"{len(rows)} daily cycles at {args.scale}× (--export {args.export}): every "
               f"plan valid; CPU s per cycle median {statistics.median(cpu):.1f}, max "
               f"{max(cpu):.1f}; wall s median {statistics.median(wall):.1f}, max "
               f"{max(wall):.1f}; folder MB median "
               f"{statistics.median(r['folder_mb'] for r in rows):.1f}; the state folder "
               f"after cycle {rows[-1]['cycle']} {folder_bytes(state) / 1e6:.0f} MB")
    notes = [summary]
    if args.churn and len(rows) > 1:
        diffs = [r for r in rows[1:] if r.get("diff_lines") is not None]
        notes.append(
            f"kubectl diff (emulated) from one cycle to the next: median "
            f"{statistics.median(r['diff_lines'] for r in diffs):.0f} lines for a median "
            f"{statistics.median(r['real'] for r in diffs):.0f} objects really changed or new "
            f"(median {statistics.median(r['changed'] for r in diffs):.0f} objects changed)")
    if args.code is not None:
        notes.append(f"run with the planner package of another checkout (--code {args.code})")
    print("\n".join(notes))
    columns = COLUMNS + (CHURN_COLUMNS if args.churn else [])
    write_result(args.name, title=f"Daily planning cycles at {args.scale}×",
                 what=(f"{len(rows)} consecutive daily `planner cycle` processes on the "
                       f"sample generated at {args.scale}× (load, plan, check, export "
                       f"{args.export}, apply.sh), each fed the previous plan's first period "
                       "as usage; CPU seconds of each process and what it waited for"),
                 columns=columns, rows=rows, notes=notes, load_before=load_before)


if __name__ == "__main__":
    main()
