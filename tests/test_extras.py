"""Optional dependencies (Ray for the sweep, PuLP for other solvers): a clear exit 2 without.

Without the package, the command that needs it exits 2 before reading or writing
anything, naming the option and what to pip install; what does not need it (HiGHS, the
serial sweep) runs as ever.
"""

from __future__ import annotations

import pytest

import planner.extras as extras
from planner.cli import main
from planner.model import backends
from tests.test_sweep import plan_spec


@pytest.fixture
def without(monkeypatch):
    """Make the named modules look uninstalled (as find_spec would say)."""
    def hide(*modules: str) -> None:
        real = extras.installed
        monkeypatch.setattr(extras, "installed", lambda m: m not in modules and real(m))
        monkeypatch.setattr(backends, "installed", extras.installed)
        backends._pulp_available.cache_clear()

    yield hide
    backends._pulp_available.cache_clear()


def test_the_extras_are_installed_here():
    # make test installs .[test,sweep,solvers]: the sweep and solver tests run in CI
    assert extras.installed("ray") and extras.installed("pulp")
    assert not extras.installed("no-such-module-gpu-planner")


def test_sweep_without_ray_exits_2_saying_what_to_install(tmp_path, capsys, without):
    without("ray")
    out = tmp_path / "out"
    assert main(["sweep", str(plan_spec(tmp_path)), "--out", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "planner sweep: runs its cells on Ray, an optional dependency that is not " \
           "installed: pip install 'gpu-planner[sweep]' (the package ray); or run the cells " \
           "one by one with --serial" in err
    assert "Traceback" not in err
    assert not out.exists()


def test_a_pulp_solver_without_pulp_exits_2_saying_what_to_install(tmp_path, capsys, without):
    without("pulp")
    assert main(["run", "--quiet", "--out", str(tmp_path / "out"), "--solver", "cbc"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--solver: reaches solvers other than HiGHS through PuLP, an optional dependency " \
           "that is not installed: pip install 'gpu-planner[solvers]' (the package pulp); " \
           "'cbc' is reached through it; highs needs nothing more" in err
    assert not (tmp_path / "out").exists()
    # a model file naming one: the file and its key
    model = tmp_path / "cbc.toml"
    model.write_text('[solver]\nlp_solver = "cbc"\n')
    assert main(["run", "--quiet", "--out", str(tmp_path / "out"), "--model", str(model)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "cbc.toml, column solver.lp_solver: reaches solvers other than HiGHS" in err
    assert not (tmp_path / "out").exists()


def test_highs_needs_no_pulp(tmp_path, without):
    without("pulp", "ray")
    assert backends.available_solvers() == ["highs"]
    assert backends.check_solver("highs") == "highs"
    assert main(["run", "--quiet", "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "plan.json").is_file()
