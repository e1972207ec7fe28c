"""The work-limited mode (``solver.limits = "work"``): counts stop the solve, not the clock.

On a reservation-heavy case whose parts do not close, each part's steps stop at counts
(HiGHS nodes, local-search and polish rounds, swap moves): the placement and the stage's
objective and bound are then the same on a machine whose clock runs ten times as fast
(as a loaded machine's does, beside the work done), with another time limit, and with
the parts in worker processes. ``planner cycle`` plans so by default and ``plan.json``
says how (``solver.limits``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from planner.cli import main
from planner.config import load_model, with_limits
from planner.inputs.load import load_scenario
from planner.model import reservations
from planner.model.problem import build_problem
from planner.model.reservations import (
    WorkLimits,
    build_reservation_model,
    improve_reservation_model,
    solve_reservation_model,
)
from planner.model.solve import budget_headroom
from planner.run import SAMPLE, plan_scenario

ROOT = Path(__file__).resolve().parents[1]
MODEL = load_model("default")
THREADS = MODEL.solver.threads
#: small counts, so that the test takes seconds; the parts stay open with them. The guard
#: is far beyond them even under the test's clock ten times as fast on a loaded machine
#: (600 s there is 60 real seconds a part, within a loaded machine's reach); the guard has
#: its own test below
SMALL = WorkLimits(nodes=30, lns_rounds=1, sub_mip_nodes=30, cluster_rounds=1,
                   cluster_nodes=60, swap_moves=3000, guard_seconds=36_000.0)


@pytest.fixture(scope="module")
def heavy(tmp_path_factory) -> Path:
    """The sample twice over (two independent parts), ten times the reservation requests."""
    out = tmp_path_factory.mktemp("heavy") / "x2r10"
    subprocess.run([sys.executable, str(ROOT / "data" / "generate.py"), "--scale", "2",
                    "--reservations-factor", "10", "--out", str(out)], check=True,
                   capture_output=True)
    return out


def stage_of(problem, time_limit: float, workers: int):
    """Both passes of the reservation stage with :data:`SMALL`: placement, figures, model."""
    built = build_reservation_model(problem, budget_headroom(problem))
    solve_reservation_model(built, time_limit, 0.0, THREADS, 0, workers=workers, work=SMALL)
    placed, stage = improve_reservation_model(built, time_limit, 0.0, THREADS, 0)
    return placed, (stage.objective, stage.bound, stage.status), built


def test_the_same_placement_whatever_the_clock_the_limit_and_the_workers(heavy, monkeypatch):
    problem = build_problem(load_scenario(heavy), MODEL)
    placed, figures, built = stage_of(problem, 1.0, workers=1)
    assert len(built.parts) == 2 and built.guarded == 0
    assert figures[2].value == "feasible"  # open: the counts, not the gap, stopped it
    assert placed and figures[0] < figures[1]
    # the parts in two worker processes, with another time limit: the same
    assert stage_of(problem, 500.0, workers=2)[:2] == (placed, figures)
    # a clock running ten times as fast as the work done (a machine loaded ten times over)
    real = time.perf_counter
    start = real()
    readings = []

    def loaded() -> float:
        readings.append(1)
        return start + 10 * (real() - start)

    monkeypatch.setattr(reservations.time, "perf_counter", loaded)
    slow = stage_of(problem, 1.0, workers=1)
    monkeypatch.undo()
    assert readings, "the stage reads the clock (the test would prove nothing otherwise)"
    assert slow[2].guarded == 0  # the counts stopped it, not the guard
    assert slow[:2] == (placed, figures)


def test_a_part_stopped_by_its_guard_is_counted(heavy):
    problem = build_problem(load_scenario(heavy), MODEL)
    built = build_reservation_model(problem, budget_headroom(problem))
    tight = WorkLimits(guard_seconds=0.2)  # far less than the default counts take
    _, stage = solve_reservation_model(built, 1.0, 0.0, THREADS, 0, workers=1, work=tight)
    assert stage.status.value == "feasible"  # a valid placement still
    assert built.guarded >= 1


def test_plan_json_records_the_limits(tmp_path, capsys):
    # planner run: time limits, and a closed stage records nothing (the sample's plan keeps
    # its bytes); --limits work records the mode, the workers, the parts and the counts
    assert main(["run", str(SAMPLE), "--quiet", "--out", str(tmp_path / "time")]) == 0
    assert "limits" not in json.loads((tmp_path / "time" / "plan.json").read_text())["solver"]
    assert main(["run", str(SAMPLE), "--quiet", "--out", str(tmp_path / "work"),
                 "--limits", "work"]) == 0
    solver = json.loads((tmp_path / "work" / "plan.json").read_text())["solver"]
    assert solver["limits"] == {"mode": "work", "workers": 1, "parts": 7,
                                "part": WorkLimits().record(), "guarded": 0}
    time_plan = json.loads((tmp_path / "time" / "plan.json").read_text())
    work_plan = json.loads((tmp_path / "work" / "plan.json").read_text())
    del work_plan["solver"]["limits"]
    assert work_plan == time_plan  # the sample's parts close either way: the same plan


def test_planner_cycle_is_work_limited_by_default(tmp_path, capsys):
    state = tmp_path / "state"
    assert main(["cycle", str(SAMPLE), "--state", str(state), "--as-of", "2026-11-16"]) == 0
    plan = json.loads((state / "current" / "plan.json").read_text())
    assert plan["solver"]["limits"]["mode"] == "work"
    # --limits time: the model's time limit, as planner run plans
    assert main(["cycle", str(SAMPLE), "--state", str(tmp_path / "other"), "--as-of",
                 "2026-11-16", "--limits", "time"]) == 0
    other = json.loads((tmp_path / "other" / "current" / "plan.json").read_text())
    assert "limits" not in other["solver"]


def test_a_model_may_choose_and_a_bad_choice_exits_2(tmp_path, capsys):
    model = tmp_path / "work.toml"
    model.write_text('[solver]\nlimits = "work"\n')
    assert load_model(model).solver.limits == "work"
    run = plan_scenario(load_scenario(SAMPLE), with_limits(MODEL, "work"))
    assert run.plan.body["solver"]["limits"]["mode"] == "work"
    model.write_text('[solver]\nlimits = "wall"\n')
    assert main(["run", str(SAMPLE), "--quiet", "--out", str(tmp_path / "out"),
                 "--model", str(model)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "work.toml, column limits: must be \"time\" or \"work\", got 'wall'" in err
    assert not (tmp_path / "out").exists()


def test_an_lp_out_of_time_on_a_long_uniform_grid_names_the_ways_out(tmp_path, monkeypatch):
    # the sample by the hour (1,104 periods from as_of): an LP stopped by its time limit
    # gives no plan, and the message names --time-limit, --limits work and a mixed grid
    from planner.errors import SolverError
    from planner.model import elastic
    from planner.model.backends import MatrixResult
    from planner.model.result import SolverStatus

    hourly = tmp_path / "hourly"
    hourly.mkdir()
    for item in SAMPLE.iterdir():
        text = item.read_text()
        if item.name == "scenario.toml":
            text = text.replace("period_hours = 24", "period_hours = 1")
        (hourly / item.name).write_text(text)
    sc = load_scenario(hourly)
    assert sc.config.period_hours == 1

    def stopped(*_args, **_kwargs):
        return MatrixResult("highs", SolverStatus.TIME_LIMIT, float("nan"), float("nan"),
                            float("nan"), 1.0, None, None)

    monkeypatch.setattr(elastic, "solve_matrix", stopped)
    with pytest.raises(SolverError) as error:
        plan_scenario(sc, MODEL)
    said = str(error.value)
    assert said.startswith("the elastic allocation LP ended time_limit; no plan written")
    assert "raise --time-limit, or plan with --limits work" in said
    assert ("the uniform grid of 1 h gives 1104 periods: a mixed grid keeps that resolution "
            "near as_of only, e.g. solver.period_grid = \"1h*48, 24h\" in the model") in said
