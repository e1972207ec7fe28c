"""One planning run in its own process, timed by phase; prints a JSON line.

    python benchmarks/one_run.py SCENARIO [MODEL] [LP_SOLVER] [--as-of DATE]
                                 [--time-limit SECONDS] [--limits time|work]

Used by bench.py and solvers_bench.py so that each run's peak memory is its own
(ru_maxrss of this process, plus the LP helper process's own peak, its VmHWM, when the
elastic LP is shared with one: an upper bound of the two at once). ``cpu_s`` is the user + system
CPU seconds of this process and its helper (HiGHS's threads included), which a loaded
machine inflates less than wall time.
``--as-of`` plans from another date (``--as-of`` of ``planner run``; the quarter's
start plans the full quarter), ``--time-limit`` overrides the model's, ``--limits`` its
``solver.limits`` (``work``: counts stop the reservation parts and the elastic LP is
solved to its end, as ``planner cycle`` plans).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from planner.config import load_model, with_limits
from planner.inputs.load import load_scenario
from planner.model.solve import HELPER_PEAKS_MB
from planner.plan.write import plan_bytes
from planner.run import parse_as_of, plan_scenario, write_outputs


def main(scenario: str, model: str, lp_solver: str | None = None, as_of: str | None = None,
         time_limit: float | None = None, limits: str | None = None) -> None:
    """Plan ``scenario`` and report phase times, CPU seconds, gap and peak memory."""
    config = load_model(model)
    if lp_solver:
        config = replace(config, solver=replace(config.solver, lp_solver=lp_solver))
    if time_limit:
        config = replace(config, solver=replace(config.solver, time_limit_seconds=time_limit))
    if limits:
        config = with_limits(config, limits)
    started = time.perf_counter()
    sc = load_scenario(scenario)
    if as_of:
        sc = sc.with_as_of(parse_as_of(as_of, sc))
    loaded = time.perf_counter()
    run = plan_scenario(sc, config)
    planned = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        write_outputs(run, Path(out))
    done = time.perf_counter()
    s = run.solution
    usage = resource.getrusage(resource.RUSAGE_SELF)
    # the LP helper process (planner.model.solve.LpHelper) counts too: its CPU seconds,
    # and its peak (its own VmHWM: the children's ru_maxrss would count this process's
    # pages at the fork) added to this process's, an upper bound of the two at once
    helper = resource.getrusage(resource.RUSAGE_CHILDREN)
    helper_peak = max(HELPER_PEAKS_MB, default=0.0)
    print(json.dumps({
        "load_s": loaded - started, "build_s": s.build_seconds, "solve_s": s.solve_seconds,
        "check_s": planned - loaded - s.build_seconds - s.solve_seconds,
        "write_s": done - planned, "total_s": done - started,
        "status": str(s.status), "gap": s.mip_gap,
        "stages": [{"name": x.solver, "seconds": x.seconds, "gap": x.gap, "status": str(x.status),
                    "objective": x.objective} for x in s.stages],
        "cpu_s": usage.ru_utime + usage.ru_stime + helper.ru_utime + helper.ru_stime,
        "user_s": usage.ru_utime + helper.ru_utime, "sys_s": usage.ru_stime + helper.ru_stime,
        "helper_cpu_s": helper.ru_utime + helper.ru_stime,
        "as_of": str(sc.config.as_of.date()),
        "peak_mb": usage.ru_maxrss / 1024 + helper_peak, "helper_peak_mb": helper_peak,
        "projects": len(run.problem.projects), "clusters": len(run.problem.clusters),
        "periods": len(run.problem.hours), "requests": len(run.problem.requests),
        "allocations": len(run.plan.allocations),
        "reservations": len(run.plan.reservations),
        "limits": config.solver.limits or "time",
        "sha256": hashlib.sha256(plan_bytes(run.plan)).hexdigest(),
    }))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario")
    parser.add_argument("model", nargs="?", default="default")
    parser.add_argument("lp_solver", nargs="?", default=None)
    parser.add_argument("--as-of", dest="as_of", default=None)
    parser.add_argument("--time-limit", dest="time_limit", type=float, default=None)
    parser.add_argument("--limits", choices=("time", "work"), default=None)
    args = parser.parse_args(sys.argv[1:])
    main(args.scenario, args.model, args.lp_solver, args.as_of, args.time_limit, args.limits)
