"""Replay a quarter's trace under scheduling policies and write the figures as a result file.

    nice python benchmarks/replay.py --trace synthetic --seed 7 --jobs 8000 [--policy a,b]
    nice python benchmarks/replay.py --trace philly            # on data/philly, ~1 h a policy
    nice python benchmarks/replay.py --trace FILE.csv --scenario DIR --name NAME

The trace is made with the CLI (``planner trace synthetic --seed S --jobs N`` on the
bundled sample, or ``planner trace philly`` on ``data/philly``) or read from a file; each
policy is replayed in this process with ``planner.simulate.run.simulate`` (the same code
as ``planner simulate``) and scored with ``planner.simulate.metrics``. Writes
``benchmarks/results/<name>.json`` (default name ``replay-synthetic-<jobs>`` or
``replay-philly``): one row per policy, one column per figure, each with the direction
that is better, and the seconds (wall and CPU) each replay took. The figures are
deterministic for the same code, trace and HiGHS; the seconds are not.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner.inputs.load import load_scenario  # noqa: E402
from planner.paths import PHILLY_SCENARIO, SAMPLE  # noqa: E402
from planner.results import load_now, table_markdown, write_result  # noqa: E402
from planner.simulate.metrics import trace_figures  # noqa: E402
from planner.simulate.run import POLICY_NAMES, simulate  # noqa: E402
from planner.simulate.trace import read_trace  # noqa: E402

OUT = ROOT / "benchmarks" / "out"

#: (metrics.json key, label, better): the figures of the docs' replay tables.
FIGURES = (
    ("occupancy", "occupancy", "higher"),
    ("occupancy_of_demand", "occupancy of demand", "higher"),
    ("delivered_over_owed_daily", "delivered ÷ owed, daily", "higher"),
    ("delivered_over_owed_weekly", "delivered ÷ owed, weekly", "higher"),
    ("delivered_over_owed_quarter", "delivered ÷ owed, quarter", "higher"),
    ("worst_team_delivered_over_owed", "worst team (weekly)", "higher"),
    ("worst_sizeable_team_delivered_over_owed", "worst team owed ≥ 1 %", "higher"),
    ("budget_error_mean", "budget error mean", "lower"),
    ("budget_error_floor_mean", "budget error floor (demand alone)", None),
    ("budget_error_max", "budget error max", "lower"),
    ("jain", "Jain (teams, weekly)", "higher"),
    ("wait_p50_hours", "wait p50 h", "lower"),
    ("wait_p90_hours", "wait p90 h", "lower"),
    ("small_wait_p90_hours", "small (≤ 1 GPU) wait p90 h", "lower"),
    ("preemptions", "preemptions", "lower"),
    ("gpu_hours_lost_to_preemption", "GPU-h lost to preemption", "lower"),
    ("jobs_never_started", "jobs never started", "lower"),
)


def _rounded(value):
    """Ratios and hours to three decimals (as the terminal table shows them), counts as is."""
    return round(value, 3) if isinstance(value, float) else value


def make_trace(args: argparse.Namespace) -> tuple[Path, Path, str, str]:
    """The trace file, its scenario, the result's name and the trace's description."""
    def planner(*argv: str) -> None:
        done = subprocess.run([str(Path(sys.executable).parent / "planner"), *argv],
                              capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(done.stderr)

    OUT.mkdir(parents=True, exist_ok=True)
    if args.trace == "synthetic":
        scenario = Path(args.scenario or SAMPLE)
        path = OUT / f"synthetic-{args.seed}-{args.jobs}.csv"
        planner("trace", "synthetic", str(scenario), "--seed", str(args.seed),
                "--jobs", str(args.jobs), "--out", str(path))
        return (path, scenario, f"replay-synthetic-{args.jobs}",
                f"the synthetic quarter of {args.jobs:,} jobs, seed {args.seed} (`planner "
                f"trace synthetic --seed {args.seed} --jobs {args.jobs}`)")
    if args.trace == "philly":
        scenario = Path(args.scenario or PHILLY_SCENARIO)
        path = OUT / "philly.csv"
        planner("trace", "philly", str(scenario), "--out", str(path))
        return path, scenario, "replay-philly", "the Philly quarter (`planner trace philly`)"
    scenario = Path(args.scenario or SAMPLE)
    return Path(args.trace), scenario, f"replay-{Path(args.trace).stem}", f"`{args.trace}`"


def main() -> None:
    """Make the trace, replay each policy, write the result file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="synthetic",
                        help="synthetic (default), philly, or a trace CSV")
    parser.add_argument("--scenario", help="default: the sample (synthetic), data/philly")
    parser.add_argument("--seed", type=int, default=7, help="synthetic trace seed (default 7)")
    parser.add_argument("--jobs", type=int, default=8000, help="synthetic jobs (default 8000)")
    parser.add_argument("--policy", default=",".join(POLICY_NAMES))
    parser.add_argument("--name", help="the result file's name (default from the trace)")
    args = parser.parse_args()
    path, scenario_dir, name, described = make_trace(args)
    scenario = load_scenario(scenario_dir)
    trace = read_trace(path, scenario)
    load = load_now()
    rows = []
    for policy in args.policy.split(","):
        began_cpu = time.process_time()
        (run,) = simulate(scenario, trace, [policy])
        row = {"policy": policy}
        row.update({key: _rounded(run.metrics.summary[key]) for key, _, _ in FIGURES})
        row.update({"cpu_s": round(time.process_time() - began_cpu, 1),
                    "wall_s": round(run.seconds, 1)})
        rows.append(row)
        print(row, flush=True)
    columns = [{"key": "policy", "label": "policy"}]
    columns += [{"key": key, "label": label, **({"better": better} if better else {})}
                for key, label, better in FIGURES]
    columns += [{"key": "cpu_s", "label": "CPU s", "unit": "s", "better": "lower"},
                {"key": "wall_s", "label": "wall s", "unit": "s", "better": "lower"}]
    figures = trace_figures(scenario, trace)
    out = write_result(
        args.name or name, title=f"Replay: {described.split(' (')[0]}", columns=columns,
        rows=rows, load_before=load,
        what=f"Each policy replays {described} on `{scenario_dir.name}` "
             f"({len(trace):,} jobs), scored by `planner.simulate.metrics` (the definitions: "
             "the Explanation page on replays). The figures are deterministic for the same "
             "code, trace and HiGHS version; the seconds move with the machine's load.",
        notes=[f"Of the trace alone, the same for every policy: owed {figures['owed_ngh']:,.0f} "
               f"NGH, offered load {figures['offered_load']} × capacity, ideal occupancy "
               f"{figures['ideal_occupancy']}, budget error floor (mean) "
               f"{figures['budget_error_floor_mean']}."])
    print(table_markdown(columns, rows), f"wrote {out}", sep="\n")


if __name__ == "__main__":
    main()
