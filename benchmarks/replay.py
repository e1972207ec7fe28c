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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner.inputs.load import load_scenario  # noqa: E402
from planner.paths import PHILLY_SCENARIO, SAMPLE  # noqa: E402
from planner.results import RESULTS_DIR, load_now, read_result, table_markdown  # noqa: E402
from planner.simulate.run import POLICY_NAMES, simulate, write_replay_result  # noqa: E402
from planner.simulate.trace import read_trace  # noqa: E402

OUT = ROOT / "benchmarks" / "out"

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
    runs = []
    for policy in args.policy.split(","):
        runs += simulate(scenario, trace, [policy])
        print(policy, f"{runs[-1].seconds:.1f} s", flush=True)
    out = write_replay_result(RESULTS_DIR / f"{args.name or name}.json", runs, scenario, trace,
                              described, load_before=load)
    body = read_result(out)
    print(table_markdown(body["columns"], body["rows"]), f"wrote {out}", sep="\n")


if __name__ == "__main__":
    main()
