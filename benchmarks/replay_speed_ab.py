"""Benchmark: the Philly quarter's replay alone, an earlier commit's code and this one's in turns.

    nice python benchmarks/replay_speed_ab.py --before REF [--policy lookback] [--runs 3]
                                              [--name NAME]

On a shared machine the load moves CPU seconds too; replaying the old and the new code in
turns (old, new, old, new, …), each run in a process of its own, puts both under the same
load. Each run times ``planner.simulate.engine.replay`` alone (``time.process_time``, as
``simulate_bench.py`` does: the trace read, metrics and pictures not included) with the
``planner`` package of commit ``REF`` (exported with ``git archive``) or of this checkout.
Writes ``benchmarks/results/<name>.json`` (default ``replay-speed-ab-<policy>``): per side
the median, min and max CPU seconds, and the run segments and preemptions of its last run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.replay_identical import git  # noqa: E402
from planner.results import load_now, write_result  # noqa: E402

#: one replay with whichever ``planner`` package PYTHONPATH names first: its CPU s and figures
RUN = """
import json, sys, time
from pathlib import Path
from planner.inputs.load import load_scenario
from planner.simulate.engine import replay
from planner.simulate.run import POLICIES
from planner.simulate.trace import read_trace
scenario = load_scenario(Path(sys.argv[1]))
trace = read_trace(Path(sys.argv[2]), scenario)
began = time.process_time()
result = replay(scenario, trace, POLICIES[sys.argv[3]]())
cpu = time.process_time() - began
print(json.dumps({"cpu_s": cpu, "segments": len(result.segments),
                  "preemptions": int(result.preemptions.sum())}))
"""


def main() -> None:
    """Export the old package, convert the trace, replay in turns, write the result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the earlier commit (any git ref)")
    parser.add_argument("--policy", default="lookback")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--name", help="result name (default replay-speed-ab-<policy>)")
    args = parser.parse_args()
    before, after = git("rev-parse", "--short", args.before), git("rev-parse", "--short", "HEAD")
    scenario = ROOT / "data" / "philly"
    load = load_now()
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    loads: dict[str, list[float]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        trace = work / "philly.csv"
        subprocess.run([str(Path(sys.executable).parent / "planner"), "trace", "philly",
                        str(scenario), "--out", str(trace)], check=True, capture_output=True)
        old = work / "before"
        old.mkdir()
        archive = subprocess.run(["git", "archive", before, "planner"], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        for _ in range(args.runs):
            for side, package in (("before", old), ("after", ROOT)):
                now = load_now()
                if now is not None:
                    loads[side].append(now)
                out = subprocess.run(
                    [sys.executable, "-c", RUN, str(scenario), str(trace), args.policy],
                    check=True, capture_output=True, text=True, cwd=package,
                    env={**os.environ, "PYTHONPATH": str(package)}).stdout
                runs[side].append(json.loads(out))
                print(side, runs[side][-1], flush=True)
    rows = []
    for side, commit in (("before", before), ("after", after)):
        cpu = [r["cpu_s"] for r in runs[side]]
        rows.append({"code": side, "commit": commit, "runs": len(cpu),
                     "cpu_s": round(statistics.median(cpu), 1), "cpu_min_s": round(min(cpu), 1),
                     "cpu_max_s": round(max(cpu), 1),
                     "load_mean": round(statistics.mean(loads[side]), 2) if loads[side] else None,
                     "segments": runs[side][-1]["segments"],
                     "preemptions": runs[side][-1]["preemptions"]})
    path = write_result(
        args.name or f"replay-speed-ab-{args.policy}",
        title=f"Replay speed, old and new code in turns: {args.policy}",
        what=f"The replay alone (`planner.simulate.engine.replay`) of the Philly quarter under "
             f"`{args.policy}`, with the `planner` package of commit {before} and of {after} in "
             f"turns, {args.runs} runs each, each in a process of its own: CPU seconds of the "
             "replay (median, min, max), and the run segments and preemptions of the last run.",
        columns=COLUMNS, rows=rows, load_before=load,
        notes=["The machine is shared (2 cores): the runs alternate so both sides see the same "
               "load; load_mean is the 1-minute load average before each side's runs, "
               "averaged."])
    print(f"wrote {path}")


COLUMNS = [
    {"key": "code", "label": "code"}, {"key": "commit", "label": "commit"},
    {"key": "runs", "label": "runs"},
    {"key": "cpu_s", "label": "CPU s (median)", "unit": "s", "better": "lower"},
    {"key": "cpu_min_s", "label": "CPU s (min)", "unit": "s"},
    {"key": "cpu_max_s", "label": "CPU s (max)", "unit": "s"},
    {"key": "load_mean", "label": "load (mean)"},
    {"key": "segments", "label": "run segments"},
    {"key": "preemptions", "label": "preemptions"},
]

if __name__ == "__main__":
    main()
