"""Which HiGHS LP algorithm for the elastic stage: the measurement behind the default.

    python benchmarks/lp_solvers.py SCENARIO [--repeat 3]

Builds the elastic LP of SCENARIO once and solves it with each HiGHS algorithm,
printing median seconds and the objective (they must agree).
"""

from __future__ import annotations

import argparse
import statistics
import time

from planner.config import load_model
from planner.inputs.load import load_scenario
from planner.model.elastic import build_elastic_model
from planner.model.lp import new_highs
from planner.model.problem import build_problem
from planner.model.reservations import build_reservation_model, solve_reservation_model
from planner.model.solve import budget_headroom, elastic_inputs


def main() -> None:
    """Build once, solve with each algorithm."""
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    model = load_model("default")
    problem = build_problem(load_scenario(args.scenario), model)
    placed, _ = solve_reservation_model(build_reservation_model(problem, budget_headroom(problem)),
                                        30, 0.005, 2, 0)
    available, headroom, targets = elastic_inputs(problem, placed)
    lp = build_elastic_model(problem, available, headroom, targets).lp.to_highs()
    print(f"LP: {lp.num_row_} rows, {lp.num_col_} columns")
    for algorithm in ("simplex", "ipm", "pdlp", "choose"):
        seconds, objective = [], None
        for _ in range(args.repeat):
            highs = new_highs(2, 0)
            highs.setOptionValue("solver", algorithm)
            highs.passModel(lp)
            started = time.perf_counter()
            highs.run()
            seconds.append(time.perf_counter() - started)
            objective = highs.getInfo().objective_function_value
            status = highs.modelStatusToString(highs.getModelStatus())
        print(f"{algorithm:8s} median {statistics.median(seconds):7.2f} s  objective "
              f"{objective:,.1f}  {status}")


if __name__ == "__main__":
    main()
