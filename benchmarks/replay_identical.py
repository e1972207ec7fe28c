"""Benchmark: one replay under an earlier commit's code and this one's; CPU s and SHA-256.

    nice python benchmarks/replay_identical.py --before REF --trace synthetic --seed 7
        --jobs 8000 [--policy planner-kueue] [--start HOUR --end HOUR] [--name NAME]
    nice python benchmarks/replay_identical.py --before REF --trace philly --start ... --end ...

A faster replay must replay the same: this runs ``planner simulate`` (the CLI, the same
trace, scenario and window) once with the ``planner`` package of commit ``REF`` (exported
with ``git archive``, nothing in the repository changed) and once with this checkout's,
one after the other, each in a process of its own, and records each run's CPU seconds
(the child's user + system, ``resource.getrusage``) and the SHA-256 of the
``metrics.json`` and ``<policy>-jobs.csv`` it wrote. Writes
``benchmarks/results/<name>.json`` (default ``replay-identical-<trace>``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner.results import load_now, write_result  # noqa: E402

#: runs the CLI of whichever ``planner`` package PYTHONPATH names first
CLI = "import sys; from planner.cli import main; sys.argv[0] = 'planner'; sys.exit(main())"


def git(*argv: str) -> str:
    """``git`` in this checkout (reads only): its output."""
    return subprocess.run(["git", *argv], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout.strip()


def make_trace(args: argparse.Namespace, out: Path) -> tuple[Path, Path]:
    """(trace CSV, scenario folder) made with this checkout's CLI."""
    planner = str(Path(sys.executable).parent / "planner")
    if args.trace == "synthetic":
        scenario, path = ROOT / "data" / "sample", out / "trace.csv"
        subprocess.run([planner, "trace", "synthetic", str(scenario), "--seed", str(args.seed),
                        "--jobs", str(args.jobs), "--out", str(path)], check=True,
                       capture_output=True)
    elif args.trace == "philly":
        scenario, path = ROOT / "data" / "philly", out / "trace.csv"
        subprocess.run([planner, "trace", "philly", str(scenario), "--out", str(path)],
                       check=True, capture_output=True)
    else:
        scenario, path = Path(args.scenario), Path(args.trace)
    return path, scenario


def run(package: Path, trace: Path, scenario: Path, out: Path,
        args: argparse.Namespace) -> dict[str, object]:
    """One ``planner simulate`` with ``package`` first on the path: CPU s and hashes."""
    argv = [sys.executable, "-c", CLI, "simulate", str(scenario), "--trace", str(trace),
            "--policy", args.policy, "--out", str(out)]
    if args.start:
        argv += ["--start", args.start]
    if args.end:
        argv += ["--end", args.end]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, cwd=package,
                   env={**os.environ, "PYTHONPATH": str(package)})
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    def sha(name: str) -> str:
        return hashlib.sha256((out / name).read_bytes()).hexdigest()

    return {"cpu_s": round(cpu, 1), "wall_s": round(wall, 1),
            "metrics_sha256": sha("metrics.json"), "jobs_sha256": sha(f"{args.policy}-jobs.csv")}


def main() -> None:
    """Make the trace, replay it under both commits' code, write the result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the earlier commit (any git ref)")
    parser.add_argument("--trace", default="synthetic", help="synthetic, philly or a CSV")
    parser.add_argument("--scenario", help="scenario of a trace CSV")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--jobs", type=int, default=8000)
    parser.add_argument("--policy", default="planner-kueue")
    parser.add_argument("--start", help="replay from this whole hour (planner simulate --start)")
    parser.add_argument("--end", help="replay to this whole hour (planner simulate --end)")
    parser.add_argument("--name", help="result name (default replay-identical-<trace>)")
    args = parser.parse_args()
    name = args.name or f"replay-identical-{Path(args.trace).stem}"
    before = git("rev-parse", "--short", args.before)
    after = git("rev-parse", "--short", "HEAD")
    load = load_now()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        trace, scenario = make_trace(args, work)
        old = work / "before"
        old.mkdir()
        archive = subprocess.run(["git", "archive", before, "planner"], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        for side, commit, package in (("before", before, old), ("after", after, ROOT)):
            load_before = load_now()
            row = run(package, trace, scenario, work / f"out-{side}", args)
            rows.append({"code": side, "commit": commit, **row,
                         "load_before": None if load_before is None else round(load_before, 2)})
            print(rows[-1], flush=True)
    same = all(rows[0][k] == rows[1][k] for k in ("metrics_sha256", "jobs_sha256"))
    window = f" from {args.start or 'quarter start'} to {args.end or 'quarter end'}"
    trace_text = (f"synthetic --seed {args.seed} --jobs {args.jobs} on data/sample"
                  if args.trace == "synthetic" else args.trace)
    path = write_result(
        name, title=f"The same replay, faster: {args.policy} before and after",
        what=f"`planner simulate --policy {args.policy}` on the trace `{trace_text}`{window}, "
             f"once with the `planner` package of commit {before} and once with {after}, each "
             "in a process of its own: CPU seconds of the whole command (user + system), and "
             "the SHA-256 of the metrics.json and jobs CSV each wrote. "
             f"Byte-identical: {'yes' if same else 'NO'}.",
        columns=COLUMNS, rows=rows, load_before=load,
        notes=["The machine is shared (2 cores): CPU seconds move with the load too "
               "(load_before is the 1-minute load average before each run)."])
    print(f"identical: {same}; wrote {path}")


COLUMNS = [
    {"key": "code", "label": "code"}, {"key": "commit", "label": "commit"},
    {"key": "cpu_s", "label": "CPU s", "unit": "s", "better": "lower"},
    {"key": "wall_s", "label": "wall s", "unit": "s"},
    {"key": "load_before", "label": "load before"},
    {"key": "metrics_sha256", "label": "metrics.json SHA-256"},
    {"key": "jobs_sha256", "label": "jobs CSV SHA-256"},
]

if __name__ == "__main__":
    main()
