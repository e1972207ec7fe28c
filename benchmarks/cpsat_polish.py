"""Benchmark: CP-SAT against HiGHS as the reservation stage's cluster-polish sub-solver.

    nice python benchmarks/cpsat_polish.py [--parts 1,4,6,8] [--det-times 0.5,2,5]
                                           [--highs-nodes 300,100]

The cluster polish (:func:`planner.model.reservations.cluster_polish`) re-places all of
one cluster's requests by a sub-MIP, the part's other requests fixed. Here, on x10r10's
parts (the 10× sample with ten times the reservation requests), each part's placement
after the first steps of the work-limited mode (local search, then HiGHS's branch and cut
with :class:`~planner.model.reservations.WorkLimits`' node count) is polished one round,
cluster by cluster, two ways from the same placement:

- ``highs``: HiGHS sub-MIPs of ``WorkLimits().cluster_nodes`` nodes (what the planner
  does), and of each of ``--highs-nodes``;
- ``cp-sat``: the same sub-problem as a CP-SAT model (OR-Tools; one boolean a start, the
  part's rows with the fixed requests' share moved to the right-hand side, the
  placement as a hint), one worker, stopped at ``max_deterministic_time`` (a work limit:
  deterministic), for each of ``--det-times``.

Reports, per part and sub-solver, the objective gained (GPU-hours, the model's units ÷
SCALE) and the CPU seconds taken, and writes ``benchmarks/results/cpsat-polish.json``.
``ortools`` is not a dependency of the planner; this benchmark needs it installed.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
from pathlib import Path

import highspy
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner.config import load_model  # noqa: E402
from planner.inputs.load import load_scenario  # noqa: E402
from planner.model import reservations as R  # noqa: E402
from planner.model.lp import new_highs  # noqa: E402
from planner.model.problem import build_problem  # noqa: E402
from planner.model.solve import budget_headroom  # noqa: E402
from planner.results import load_now, write_result  # noqa: E402

OUT = ROOT / "benchmarks" / "out"
THREADS = 2


def cpu() -> float:
    """User + system CPU seconds of this process."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def scenario() -> Path:
    """x10r10, generated once (as benchmarks/reservations_gap.py makes it)."""
    target = OUT / "reservations-x10r10"
    if not (target / "scenario.toml").exists():
        subprocess.run([sys.executable, str(ROOT / "data" / "generate.py"), "--scale", "10",
                        "--reservations-factor", "10", "--out", str(target)], check=True,
                       capture_output=True)
    return target


def start_placement(part: R.ReservationPart, work: R.WorkLimits) -> dict[str, int]:
    """The part's placement after the local search and HiGHS's branch and cut (work limits)."""
    improved, value = R.improve_placement(part, float("inf"), THREADS, 0, rounds=work.lns_rounds,
                                          nodes=work.sub_mip_nodes, seconds=work.guard_seconds)
    warm = improved if value > R.placement_value(part.requests, part.values, part.warm) \
        else part.warm
    highs = new_highs(THREADS, 0, work.guard_seconds)
    highs.setOptionValue("mip_rel_gap", 0.005)
    highs.setOptionValue("mip_max_nodes", work.nodes)
    highs.passModel(part.lp.to_highs(maximize=True))
    hint = highspy.HighsSolution()
    hint.col_value = R._warm_vector(part, warm).tolist()
    hint.value_valid = True
    highs.setSolution(hint)
    highs.run()
    placed = R._placement(part, np.asarray(highs.getSolution().col_value))
    if R.placement_value(part.requests, part.values, placed) < \
            R.placement_value(part.requests, part.values, warm):
        return dict(warm)
    return placed


def cpsat_polish(part: R.ReservationPart, placement: dict[str, int], det_time: float
                 ) -> tuple[dict[str, int], int]:
    """One round over the part's clusters, each re-placed by CP-SAT, the rest fixed."""
    from ortools.sat.python import cp_model

    form = part.lp.matrix(maximize=True)
    columns = np.concatenate([[0], np.cumsum([len(r.starts) for r in part.requests])])
    cost = np.round(form.col_cost).astype(np.int64)
    x = R._warm_vector(part, placement)
    for hood in R.cluster_neighbourhoods(part):
        free = np.zeros(x.size, dtype=bool)
        for i in hood:
            free[columns[i]:columns[i + 1]] = True
        model = cp_model.CpModel()
        chosen = np.flatnonzero(free)
        y = {int(c): model.NewBoolVar(f"y{c}") for c in chosen}
        for row in range(form.n_rows):
            span = slice(form.start[row], form.start[row + 1])
            cols, vals = form.index[span], form.value[span]
            mine = free[cols]
            if not mine.any():
                continue
            fixed = float((vals[~mine] * x[cols[~mine]]).sum())
            upper = form.row_upper[row] - fixed
            if upper < 1e20:
                model.Add(sum(int(round(v)) * y[int(c)] for c, v in
                              zip(cols[mine], vals[mine], strict=True))
                          <= int(np.floor(upper + 1e-9)))
        model.Maximize(sum(int(cost[c]) * y[int(c)] for c in chosen))
        for c in chosen:
            model.AddHint(y[int(c)], int(x[c] > 0.5))
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.random_seed = 0
        solver.parameters.max_deterministic_time = det_time
        status = solver.Solve(model)
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            trial = x.copy()
            for c in chosen:
                trial[c] = float(solver.Value(y[int(c)]))
            if int(cost @ trial) > int(cost @ x) and R._fits(form, trial):
                x = trial
    return R._placement(part, x), int(cost @ x)


def main() -> None:
    """Polish the chosen parts both ways and write the result file."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--parts", default="1,4,6,8")
    parser.add_argument("--det-times", default="0.5,2,5")
    parser.add_argument("--highs-nodes", default="300,100")
    args = parser.parse_args()
    load_before = load_now()
    work = R.WorkLimits()
    problem = build_problem(load_scenario(scenario()), load_model("default"))
    built = R.build_reservation_model(problem, budget_headroom(problem))
    rows = []
    for j in (int(x) for x in args.parts.split(",")):
        part = built.parts[j]
        start = start_placement(part, work)
        before = R.placement_value(part.requests, part.values, start)
        name = problem.clusters[part.clusters[0]]
        for nodes in (int(x) for x in args.highs_nodes.split(",")):
            tick = cpu()
            _, value = R.improve_placement(part, float("inf"), THREADS, 0,
                                           R.cluster_neighbourhoods(part), start, 1, nodes,
                                           work.guard_seconds)
            rows.append({"part": name, "requests": len(part.requests), "solver": "highs",
                         "limit": f"{nodes} nodes a cluster",
                         "gain": round((value - before) / R.SCALE, 2),
                         "cpu_s": round(cpu() - tick, 2)})
            print(rows[-1], flush=True)
        for det in (float(x) for x in args.det_times.split(",")):
            tick = cpu()
            _, value = cpsat_polish(part, start, det)
            rows.append({"part": name, "requests": len(part.requests), "solver": "cp-sat",
                         "limit": f"deterministic time {det:g} a cluster",
                         "gain": round((value - before) / R.SCALE, 2),
                         "cpu_s": round(cpu() - tick, 2)})
            print(rows[-1], flush=True)
    columns = [{"key": "part", "label": "part (first cluster)"},
               {"key": "requests", "label": "requests"}, {"key": "solver", "label": "sub-solver"},
               {"key": "limit", "label": "limit"},
               {"key": "gain", "label": "objective gained (GPU-hours)", "better": "higher"},
               {"key": "cpu_s", "label": "CPU s", "unit": "s", "better": "lower"}]
    totals = {}
    for r in rows:
        key = (r["solver"], r["limit"])
        gain, seconds = totals.get(key, (0.0, 0.0))
        totals[key] = (gain + r["gain"], seconds + r["cpu_s"])
    notes = [f"{solver} ({limit}): {gain:,.1f} GPU-hours gained in {seconds:.1f} CPU s "
             f"over the parts" for (solver, limit), (gain, seconds) in totals.items()]
    print("\n".join(notes))
    write_result("cpsat-polish", title="CP-SAT against HiGHS as the cluster-polish sub-solver",
                 what=("x10r10's parts, each from its placement after the local search and "
                       "HiGHS's branch and cut (work limits), polished one round cluster by "
                       "cluster by HiGHS sub-MIPs or by CP-SAT (one worker, deterministic "
                       "time); objective gained and CPU seconds"),
                 columns=columns, rows=rows, notes=notes, load_before=load_before)


if __name__ == "__main__":
    main()
