"""What the ingest's guards cost: the rows checked by the scenario's rules, bounded JSON.

    PYTHONPATH=. .venv/bin/python benchmarks/ingest_guard.py [--jobs 50000] [--runs 3]

On a copy of the bundled sample, a sacct file of ``--jobs`` finished one-hour jobs (two
minutes apart, all inside the quarter) and a Workloads JSON of a tenth as many admitted
Workloads are ingested stage by stage; each stage's CPU seconds (median of ``--runs``) go
to ``benchmarks/results/ingest_guard.json``: parsing (for Kueue, also the bounded JSON
loader alone and the plain ``json.loads`` it wraps, both inside parsing), mapping onto the
scenario, the row checks (``row_problems``), and the merge under the ledger's lock with
its atomic write.
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd

from planner.exporters.slurm import account
from planner.ingest.kueue import parse_workloads
from planner.ingest.ledger import COLUMNS, LEDGER_FILE
from planner.ingest.names import kueue_cluster_queue, kueue_flavor, names_for
from planner.ingest.run import FIELDS, merge_into, place
from planner.ingest.sacct import parse_sacct
from planner.inputs.bounded import load_json
from planner.inputs.load import load_scenario
from planner.inputs.rows import row_problems
from planner.paths import SAMPLE
from planner.results import load_now, write_result

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = json.loads((ROOT / "tests" / "fixtures" / "kueue-workloads.json").read_text())[
    "items"][0]
NOW = pd.Timestamp("2026-11-16T00:00:00Z")


def _jobs(scenario, n: int) -> list[tuple[str, str, int, str, str, str]]:
    """(id, project, GPUs, cluster, start, end) for ``n`` one-hour jobs over the sample."""
    projects = list(scenario.tree.leaves)
    clusters = list(scenario.clusters["cluster"])
    out = []
    for i in range(n):
        start = pd.Timestamp("2026-10-02T00:00:00Z") + pd.Timedelta(minutes=2 * i)
        end = start + pd.Timedelta(hours=1)
        out.append((str(100_000 + i), projects[i % len(projects)], 1 + i % 8,
                    clusters[i % len(clusters)], start.strftime("%Y-%m-%dT%H:%M:%S"),
                    end.strftime("%Y-%m-%dT%H:%M:%S")))
    return out


def _sacct(jobs, path: Path) -> None:
    lines = [f"{j}|{account(p)}|{c}|gres/gpu={g}|{s}|{e}|COMPLETED" for j, p, g, c, s, e in jobs]
    path.write_text("\n".join(lines) + "\n")


def _workloads(jobs, path: Path) -> None:
    items = []
    for j, p, g, c, s, e in jobs:
        w = copy.deepcopy(TEMPLATE)
        w["metadata"].update(name=f"job-{j}", namespace=kueue_cluster_queue(p))
        w["spec"]["podSets"][0]["count"] = 1
        w["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"] = {
            "requests": {"nvidia.com/gpu": str(g)}}
        a = w["status"]["admission"]
        a["clusterQueue"] = kueue_cluster_queue(p)
        a["podSetAssignments"][0].update(count=1, flavors={"nvidia.com/gpu": kueue_flavor(c)})
        for cond in w["status"]["conditions"]:
            cond["lastTransitionTime"] = f"{s}Z" if cond["type"] != "Finished" else f"{e}Z"
        items.append(w)
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))


def _cpu(step, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.process_time()
        step()
        times.append(time.process_time() - start)
    return statistics.median(times)


def measure(source: str, path: Path, folder: Path, runs: int) -> list[dict]:
    """Each stage of ingesting ``path`` into ``folder``: its median CPU seconds."""
    scenario = load_scenario(folder)
    names = names_for(scenario, source)
    parse = parse_sacct if source == "sacct" else parse_workloads
    parsed, problems = parse(path)
    assert not problems, problems[:3]
    rows, _, _ = place(parsed.jobs, names, scenario.config, NOW, source)
    cells = [(r.row or 0, dict(zip(COLUMNS, r.cells(), strict=True))) for r in rows]
    assert not row_problems(scenario, "usage", path.name, cells, FIELDS[source])
    ledger = folder / LEDGER_FILE
    original = ledger.read_bytes()

    def merge_fresh():
        ledger.write_bytes(original)
        merge_into(ledger, rows)

    stages = [("parse", lambda: parse(path)),
              ("map onto the scenario", lambda: place(parsed.jobs, names, scenario.config,
                                                      NOW, source)),
              ("check rows (row_problems)",
               lambda: row_problems(scenario, "usage", path.name, cells, FIELDS[source])),
              ("merge under the lock, atomic write", merge_fresh)]
    if source == "kueue":
        text = path.read_text()
        stages[1:1] = [("plain json.loads (inside parse)", lambda: json.loads(text)),
                       ("bounded load_json (inside parse)", lambda: load_json(path.name, text))]
    out = [{"source": source, "stage": name, "rows": len(rows), "cpu_s": round(_cpu(f, runs), 3)}
           for name, f in stages]
    ledger.write_bytes(original)
    return out


def main() -> None:
    """Measure, print, and write ``benchmarks/results/ingest_guard.json``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    load = load_now()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "sc"
        shutil.copytree(SAMPLE, folder)
        scenario = load_scenario(folder)
        sacct, workloads = Path(tmp) / "sacct.txt", Path(tmp) / "wl.json"
        _sacct(_jobs(scenario, args.jobs), sacct)
        _workloads(_jobs(scenario, args.jobs // 10), workloads)
        rows = measure("sacct", sacct, folder, args.runs)
        rows += measure("kueue", workloads, folder, args.runs)
    for r in rows:
        print(f"{r['source']:6} {r['stage']:38} {r['rows']:>7,} rows {r['cpu_s']:8.3f} CPU s")
    checks = {r["source"]: r["cpu_s"] for r in rows if r["stage"].startswith("check")}
    totals = {s: sum(r["cpu_s"] for r in rows if r["source"] == s
                     and "inside parse" not in r["stage"]) for s in checks}
    write_result(
        "ingest_guard", title="What the ingest's guards cost",
        what=(f"planner ingest, stage by stage, on a copy of the bundled sample: {args.jobs:,} "
              f"sacct jobs and {args.jobs // 10:,} Kueue Workloads; CPU seconds, median of "
              f"{args.runs} runs each"),
        columns=[{"key": "source", "label": "source"}, {"key": "stage", "label": "stage"},
                 {"key": "rows", "label": "rows"},
                 {"key": "cpu_s", "label": f"CPU s (median of {args.runs})", "unit": "s",
                  "better": "lower"}],
        rows=rows, load_before=load,
        notes=[f"the row checks are {checks[s] / totals[s]:.0%} of the {s} ingest's CPU "
               f"({checks[s]:.3f} of {totals[s]:.3f} s)" for s in sorted(checks)])


if __name__ == "__main__":
    main()
