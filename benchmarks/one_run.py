"""One planning run in its own process, timed by phase; prints a JSON line.

    python benchmarks/one_run.py SCENARIO [MODEL] [LP_SOLVER]

Used by bench.py and solvers_bench.py so that each run's peak memory is its own
(ru_maxrss of this process).
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from planner.config import load_model
from planner.inputs.load import load_scenario
from planner.run import plan_scenario, write_outputs


def main(scenario: str, model: str, lp_solver: str | None = None) -> None:
    """Plan ``scenario`` and report phase times, gap and peak memory."""
    config = load_model(model)
    if lp_solver:
        config = replace(config, solver=replace(config.solver, lp_solver=lp_solver))
    started = time.perf_counter()
    sc = load_scenario(scenario)
    loaded = time.perf_counter()
    run = plan_scenario(sc, config)
    planned = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        write_outputs(run, Path(out))
    done = time.perf_counter()
    s = run.solution
    print(json.dumps({
        "load_s": loaded - started, "build_s": s.build_seconds, "solve_s": s.solve_seconds,
        "check_s": planned - loaded - s.build_seconds - s.solve_seconds,
        "write_s": done - planned, "total_s": done - started,
        "status": str(s.status), "gap": s.mip_gap,
        "stages": [{"name": x.solver, "seconds": x.seconds, "gap": x.gap, "status": str(x.status),
                    "objective": x.objective} for x in s.stages],
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "projects": len(run.problem.projects), "clusters": len(run.problem.clusters),
        "periods": len(run.problem.hours), "requests": len(run.problem.requests),
        "allocations": len(run.plan.allocations),
        "reservations": len(run.plan.reservations),
    }))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "default",
         sys.argv[3] if len(sys.argv) > 3 else None)
