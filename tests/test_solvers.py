"""Issue 13: the LP/MIP stages through PuLP's solvers, honest solver status, the model as MPS/LP."""

from __future__ import annotations

import csv
import io
import json
import re
import warnings
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.cli import main
from planner.config import load_model
from planner.errors import SolverError
from planner.extras import installed
from planner.model import elastic
from planner.model.backends import (
    MatrixResult,
    available_solvers,
    pulp_problem,
    read_cbc_log,
    solve_matrix,
)
from planner.model.joint import build_joint_model, solve_joint_model
from planner.model.lp import INF, LpBuilder, new_highs, safe_key
from planner.model.modelfile import model_files
from planner.model.problem import build_problem
from planner.model.result import SolverStatus
from planner.model.solve import elastic_inputs, solve
from planner.plan.write import write_files
from planner.run import SAMPLE, plan_scenario
from tests.system import REQUIRED
from tests.test_joint import random_instance
from tests.tiny import scenario

MODEL = load_model("default")
HAS_CBC = "cbc" in available_solvers()
#: PuLP (gpu-planner[solvers]) bundles CBC: where PuLP is installed, CBC must be reached
needs_cbc = pytest.mark.skipif(not HAS_CBC and not (REQUIRED or installed("pulp")),
                               reason="PuLP (pip install 'gpu-planner[solvers]') is not here")


def with_solver(name: str):
    return replace(MODEL, solver=replace(MODEL.solver, lp_solver=name))


def highs_read(path) -> tuple[str, float, dict[str, float]]:
    """Re-solve a model file with HiGHS's own reader: status, objective, values by name."""
    highs = new_highs(MODEL.solver.threads)  # one HiGHS thread pool a process: same count
    assert str(highs.readModel(str(path))) == "HighsStatus.kOk"
    highs.run()
    values = highs.getSolution().col_value
    return (highs.modelStatusToString(highs.getModelStatus()),
            highs.getInfo().objective_function_value,
            dict(zip(highs.getLp().col_names_, values, strict=True)))


# --- the model written out -------------------------------------------------------------

def two_projects(ids=("a", "b")):
    """One cluster of 10 GPUs, one daily period (240 GPU-hours), two equal-weight projects
    each asking for 10 GPUs (240 GPU-hours), budgets far from binding, no usage.

    By hand: the water-filling target is 120 GPU-hours each; guaranteed GPU-hours are worth
    G = 4 and beat opportunistic ones (O = 1), so g = 120 + 120 fills the cluster and o = 0;
    no shortfall below target, no spend ahead of pace (budgets 1e6), so the objective is
    4 × 240 = 960. Runner-up: 240 to one project and 0 to the other, also 960 in G but
    with a shortfall of 120 below the other's target (− F × 120 = − 120): 840.
    """
    a, b = ids
    return scenario(clusters=[("c1", "H100", 1, 10)],
                    org=[(a, "", 1.0), (b, "", 1.0)],
                    budgets=[(a, 1e6), (b, 1e6)],
                    demand=[(a, "c1", "2026-11-02", "2026-11-03", 10),
                            (b, "c1", "2026-11-02", "2026-11-03", 10)])


def built_and_planned(sc, model=MODEL):
    built = []
    run = plan_scenario(sc, model, on_built=built.append)
    return built[-1], run


def test_mps_and_lp_of_a_hand_worked_instance_resolve_in_highs_to_the_same_optimum(tmp_path):
    built, run = built_and_planned(two_projects())
    assert run.solution.stages[1].objective == pytest.approx(960.0, abs=1e-9)
    written = write_files(tmp_path, model_files(built.lp, "elastic"))
    assert sorted(p.name for p in written) == ["elastic-names.csv", "elastic.lp", "elastic.mps"]
    for name in ("elastic.mps", "elastic.lp"):
        status, objective, values = highs_read(tmp_path / name)
        assert status == "Optimal"
        assert objective == pytest.approx(960.0, abs=1e-9)
        assert values["x_guaranteed(a,c1,20261102)"] == pytest.approx(120.0, abs=1e-9)
        assert values["x_guaranteed(b,c1,20261102)"] == pytest.approx(120.0, abs=1e-9)
        assert values["x_opportunistic(a,c1,20261102)"] == pytest.approx(0.0, abs=1e-9)
    mps = (tmp_path / "elastic.mps").read_text()
    assert " L  capacity(c1,20261102)" in mps and " L  budget(a)" in mps
    assert "OBJSENSE\n    MAX" in mps


def test_names_index_maps_every_column_and_row_to_its_keys_verbatim(tmp_path):
    ids = ("=SUM(A1) x", "team-a~ü")
    built, _ = built_and_planned(two_projects(ids))
    files = model_files(built.lp, "elastic")
    rows = list(csv.DictReader(io.StringIO(files["elastic-names.csv"].decode())))
    assert len(rows) == built.lp.n_cols + built.lp.n_rows
    by_name = {r["name"]: r for r in rows}
    assert len(by_name) == len(rows)  # unique
    guaranteed = by_name["x_guaranteed(#3DSUM#28A1#29#20x,c1,20261102)"]
    assert (guaranteed["kind"], guaranteed["family"], guaranteed["project"],
            guaranteed["cluster"], guaranteed["period"]) == \
        ("column", "guaranteed", "=SUM(A1) x", "c1", "2026-11-02T00:00:00Z")
    assert by_name["budget(team~a#7E#C3#BC)"]["project"] == "team-a~ü"
    # and the files with these names still re-solve to the hand optimum
    write_files(tmp_path, files)
    for name in ("elastic.mps", "elastic.lp"):
        assert highs_read(tmp_path / name)[1] == pytest.approx(960.0, abs=1e-9)


def test_names_are_safe_for_mps_and_lp_and_short_enough(tmp_path):
    long_id = "p" * 300
    built, _ = built_and_planned(two_projects((long_id, "b c")))
    names = built.lp.column_names() + built.lp.row_names()
    assert len(set(built.lp.column_names())) == built.lp.n_cols
    assert len(set(built.lp.row_names())) == built.lp.n_rows
    lp_safe = re.compile(r"[A-Za-z_][A-Za-z0-9_.(),~#$]*")
    for name in names:
        assert len(name) <= 255 and lp_safe.fullmatch(name), name
    assert any(name.endswith("$0") for name in names)  # the long one, cut and numbered
    write_files(tmp_path, model_files(built.lp, "elastic"))
    assert highs_read(tmp_path / "elastic.mps")[1] == pytest.approx(960.0, abs=1e-9)


def unsafe_key(text: str) -> str:
    """The documented inverse of safe_key (docs/explanation/model.md): '~' → '-', '#HH' → byte."""
    out, i = bytearray(), 0
    while i < len(text):
        if text[i] == "~":
            out += b"-"
            i += 1
        elif text[i] == "#":
            out.append(int(text[i + 1:i + 3], 16))
            i += 3
        else:
            out += text[i].encode()
            i += 1
    return out.decode("utf-8")


@given(st.text(max_size=30))
def test_safe_key_is_reversible_and_uses_only_the_safe_alphabet(label):
    key = safe_key(label)
    assert re.fullmatch(r"[A-Za-z0-9_.~#]*", key)
    assert unsafe_key(key) == label


def test_mps_writer_handles_every_bound_and_row_kind(tmp_path):
    """Ranged, equality, ≥ rows; free, fixed, negative-bounded and integer columns.

    max x + y + 2z − w  s.t.  1 ≤ x + y ≤ 3 (ranged), z − w = 0.5, x − y ≥ −1;
    x free ≤ 2, y ∈ [−1, 5], z integer ∈ [0, 4], w fixed at 0.5.
    By hand: w = 0.5 ⇒ z = 1 (integer, fine); x + y ≤ 3 with x ≤ 2: 3; objective 3 + 2 − 0.5 = 4.5.
    """
    lp = LpBuilder()
    x = lp.add_columns("x", [-INF], 2.0, 1.0)
    y = lp.add_columns("y", [-1.0], 5.0, 1.0)
    z = lp.add_columns("z", [0.0], 4.0, 2.0, integer=True)
    w = lp.add_columns("w", [0.5], 0.5, -1.0)
    lp.add_rows("ranged", [1.0], 3.0, [0, 0], [x[0], y[0]], 1.0)
    lp.add_rows("equal", [0.5], 0.5, [0, 0], [z[0], w[0]], [1.0, -1.0])
    lp.add_rows("atleast", [-1.0], INF, [0, 0], [x[0], y[0]], [1.0, -1.0])
    write_files(tmp_path, model_files(lp, "m"))
    for name in ("m.mps", "m.lp"):
        status, objective, _ = highs_read(tmp_path / name)
        assert (status, objective) == ("Optimal", pytest.approx(4.5, abs=1e-9))
    assert solve_matrix(lp.matrix()).objective == pytest.approx(4.5, abs=1e-9)


def test_same_model_same_bytes():
    first = model_files(built_and_planned(two_projects())[0].lp, "elastic")
    second = model_files(built_and_planned(two_projects())[0].lp, "elastic")
    assert first == second


# --- solving through PuLP -----------------------------------------------------------------

@needs_cbc
def test_hand_worked_instance_through_cbc_gives_the_hand_optimum():
    _, run = built_and_planned(two_projects(), with_solver("cbc"))
    stage = run.solution.stages[1]
    assert (stage.solver, stage.status, stage.gap) == ("cbc", SolverStatus.OPTIMAL, 0.0)
    assert stage.objective == pytest.approx(960.0, abs=1e-6)
    assert run.plan.body["solver"]["name"] == "highs-mip+cbc"
    assert run.solution.guaranteed.sum() == pytest.approx(240.0, abs=1e-6)


@needs_cbc
def test_joint_mip_through_cbc_and_its_mps_reach_the_highs_optimum(tmp_path):
    problem = build_problem(random_instance(1), MODEL)
    split = solve(problem)
    _, pace_headroom, _ = elastic_inputs(problem, split.reservation_start)
    joint = build_joint_model(problem, split.targets, pace_headroom, 40.0)
    by_highs = solve_joint_model(joint, 30, MODEL.solver.threads)
    by_cbc = solve_joint_model(joint, 30, MODEL.solver.threads, solver="cbc")
    assert by_highs.status is by_cbc.status is SolverStatus.OPTIMAL
    assert by_cbc.objective == pytest.approx(by_highs.objective, rel=1e-6)
    files = model_files(joint.lp, "joint")
    assert b"'INTORG'" in files["joint.mps"] and b"\nGeneral\n" in files["joint.lp"]
    assert b" x_start(r0," in files["joint.mps"]
    write_files(tmp_path, files)
    for name in ("joint.mps", "joint.lp"):
        status, objective, _ = highs_read(tmp_path / name)
        assert status == "Optimal"
        assert objective == pytest.approx(by_highs.objective, rel=1e-6)


def market_split(seed: int, rows: int, columns: int, slack: bool) -> LpBuilder:
    """A market-split MIP (Cornuéjols & Dawande): hard to prove, so a limit stops it.

    With ``slack``: max 100 − Σ|slack| s.t. a·x + s⁺ − s⁻ = b, x binary — any x is an
    incumbent (CBC finds one at once), the bound stays at 100. Without: a·x = b, where
    even one feasible x is hard to find.
    """
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 100, size=(rows, columns)).astype(float)
    b = np.floor(a.sum(axis=1) / 2)
    lp = LpBuilder()
    x = lp.add_columns("x", np.zeros(columns), 1.0, 1.0 if not slack else 0.0, integer=True)
    row = np.repeat(np.arange(rows), columns)
    cols, vals = np.tile(x, rows), a.ravel()
    if slack:
        plus = lp.add_columns("plus", np.zeros(rows), INF, -1.0)
        minus = lp.add_columns("minus", np.zeros(rows), INF, -1.0)
        constant = lp.add_columns("constant", [1.0], 1.0, 100.0)
        lp.add_rows("split", b, b, np.concatenate([row, np.arange(rows), np.arange(rows)]),
                    np.concatenate([cols, plus, minus]),
                    np.concatenate([vals, np.ones(rows), -np.ones(rows)]))
        assert len(constant) == 1
    else:
        lp.add_rows("split", b, b, row, cols, vals)
    return lp


@needs_cbc
def test_time_limited_cbc_run_is_feasible_with_its_gap_not_optimal():
    form = market_split(1, 4, 40, slack=True).matrix(maximize=True)
    result = solve_matrix(form, "cbc", time_limit=1.0)
    assert result.status is SolverStatus.FEASIBLE  # not "optimal", whatever PuLP says
    assert result.bound >= result.objective  # maximising: CBC's "Upper bound"
    assert 0 < result.gap == pytest.approx((result.bound - result.objective) / result.objective)
    assert result.x is not None and result.row_dual is None
    # what PuLP itself says of such a run: "Optimal" (why the status is read from CBC's log)
    import pulp

    problem, _, _ = pulp_problem(form)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        problem.solve(pulp.PULP_CBC_CMD(msg=False, timeLimit=1))
    assert pulp.LpStatus[problem.status] == "Optimal"


@needs_cbc
def test_time_limited_cbc_run_without_an_incumbent_gives_no_values():
    result = solve_matrix(market_split(3, 5, 50, slack=False).matrix(), "cbc", time_limit=1.0)
    assert result.status in (SolverStatus.TIME_LIMIT, SolverStatus.INFEASIBLE)
    assert result.x is None and np.isnan(result.objective)


CBC_ENDINGS = {
    "lp optimal": ("Optimal - objective value 14\nOptimal objective 14 - 1 iterations\n",
                   False, (SolverStatus.OPTIMAL, 14.0, 14.0)),
    "mip optimal": ("Result - Optimal solution found\n\nObjective value:                "
                    "20.00000000\nEnumerated nodes:               0\n",
                    True, (SolverStatus.OPTIMAL, 20.0, 20.0)),
    "stopped, max": ("Result - Stopped on time limit\n\nObjective value:                "
                     "97.00000000\nUpper bound:                    100.000\n"
                     "Gap:                            -0.03\n", True,
                     (SolverStatus.FEASIBLE, 97.0, 100.0)),
    "stopped, min": ("Result - Stopped on time limit\n\nObjective value:                "
                     "4.00000000\nLower bound:                    0.000\nGap:        inf\n",
                     True, (SolverStatus.FEASIBLE, 4.0, 0.0)),
    "no incumbent": ("Result - Stopped on time limit\n\nNo feasible solution found\n"
                     "Upper bound:                    29.152\n", True,
                     (SolverStatus.TIME_LIMIT, None, None)),
    "infeasible": ("Result - Problem proven infeasible\n\nNo feasible solution found\n", True,
                   (SolverStatus.INFEASIBLE, None, None)),
    "lp infeasible": ("Primal infeasible - objective value 3\n", False,
                      (SolverStatus.INFEASIBLE, None, None)),
    "lp stopped": ("Stopped on time - objective value 3\n", False,
                   (SolverStatus.TIME_LIMIT, None, None)),
    "garbled": ("Welcome to the CBC MILP Solver\n", True, (SolverStatus.ERROR, None, None)),
}


@pytest.mark.parametrize("case", sorted(CBC_ENDINGS))
def test_cbc_log_is_read_for_status_objective_and_bound(case):
    """The endings of real CBC 2.10 logs (this machine's runs above and earlier)."""
    log, is_mip, (status, objective, bound) = CBC_ENDINGS[case]
    got = read_cbc_log("Welcome to the CBC MILP Solver\n" + log, is_mip)
    assert got[0] is status
    if objective is None:
        assert np.isnan(got[1]) and np.isnan(got[2])
    else:
        assert got[1:] == (objective, bound)


def test_an_lp_stage_that_is_not_optimal_gives_no_plan(monkeypatch):
    def stopped(*_args, **_kwargs):
        return MatrixResult("cbc", SolverStatus.TIME_LIMIT, float("nan"), float("nan"),
                            float("nan"), 1.0, None, None)

    monkeypatch.setattr(elastic, "solve_matrix", stopped)
    with pytest.raises(SolverError, match="time_limit"):
        plan_scenario(two_projects(), with_solver("cbc"))


# --- the command line -----------------------------------------------------------------------

def test_unavailable_solver_exits_2_naming_the_available_ones(tmp_path, capsys):
    assert main(["run", str(SAMPLE), "--quiet", "--out", str(tmp_path / "out"),
                 "--solver", "gurobi"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--solver: 'gurobi' is not available on this machine" in err
    assert "available here: highs" in err
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def sample_runs(tmp_path_factory):
    """The sample planned by the CLI twice: the default (HiGHS) and PuLP + CBC."""
    root = tmp_path_factory.mktemp("sample")
    code = {}
    for solver in ("highs", "cbc") if HAS_CBC else ("highs",):
        code[solver] = main(["run", str(SAMPLE), "--quiet", "--out", str(root / solver),
                             "--solver", solver, "--write-model", str(root / f"{solver}-model")])
    return root, code


def stage(root, solver) -> dict:
    plan = json.loads((root / solver / "plan.json").read_text())
    return plan["solver"]


def test_sample_model_written_by_the_cli_resolves_in_highs_to_the_plans_objective(sample_runs):
    root, code = sample_runs
    assert code["highs"] == 0
    solver = stage(root, "highs")
    status, objective, _ = highs_read(root / "highs-model" / "elastic.mps")
    assert status == "Optimal"
    assert objective == pytest.approx(solver["stages"][1]["objective"], rel=1e-9)


@needs_cbc
def test_sample_through_pulp_cbc_gives_the_default_objective(sample_runs):
    root, code = sample_runs
    assert code["cbc"] == 0  # planned, checked against every hard rule, written
    default, cbc = stage(root, "highs"), stage(root, "cbc")
    assert (cbc["name"], cbc["status"]) == ("highs-mip+cbc", "optimal")
    assert default["stages"][0] == cbc["stages"][0]  # same reservations (HiGHS MIP either way)
    assert cbc["stages"][1]["objective"] == pytest.approx(default["stages"][1]["objective"],
                                                          rel=1e-6)
    # the same model was built for both: the written files are identical
    assert (root / "cbc-model" / "elastic.mps").read_bytes() == \
        (root / "highs-model" / "elastic.mps").read_bytes()
