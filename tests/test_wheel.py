"""The built wheel, installed into a fresh virtual environment, plans outside the checkout.

Slow (a wheel build and a dependency install, from pip's cache when warm), but part of
every run: it is the only test that sees the package as a user gets it, without the
checkout's ``models/``, templates or ``data/`` on any path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from planner.paths import SAMPLE
from planner.run import plan_schema

ROOT = Path(__file__).resolve().parent.parent
SKIP = shutil.ignore_patterns(".venv", ".git", "out", "build", "*.egg-info", "__pycache__",
                              ".pytest_cache", ".ruff_cache", ".hypothesis", "docs", "data")


def _run(command: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    return done


@pytest.mark.slow
def test_the_wheel_installs_and_plans_outside_the_checkout(tmp_path):
    source = tmp_path / "src"  # a copy: building writes build/ and *.egg-info
    shutil.copytree(ROOT, source, ignore=SKIP)
    wheels = tmp_path / "wheels"
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels),
                  str(source)], tmp_path)
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("gpu_planner-*.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    installed = _run([str(python), "-m", "pip", "install", "-q", str(wheel)], tmp_path)
    assert installed.returncode == 0, installed.stderr
    planner = env_dir / "bin" / "planner"
    work = tmp_path / "elsewhere"  # neither the checkout nor the source copy
    work.mkdir()
    shutil.copytree(SAMPLE, work / "sample")

    where = _run([str(python), "-c", "import planner; print(planner.__file__)"], work)
    assert where.stdout.startswith(str(env_dir)), where.stdout  # the installed package
    done = _run([str(planner), "run", "sample", "--out", "out", "--quiet"], work)
    assert done.returncode == 0, done.stderr
    plan = json.loads((work / "out" / "plan.json").read_text())
    import jsonschema

    jsonschema.validate(plan, plan_schema())
    assert plan["scenario"] == "sample" and plan["model"] == "default"
    assert plan["solver"]["status"] == "optimal" and plan["allocations"]
    # the other bundled model and the HTML template are package data too
    strict = _run([str(planner), "run", "sample", "--model", "strict-budgets", "--out",
                   "strict", "--quiet"], work)
    assert strict.returncode == 0, strict.stderr
    assert json.loads((work / "strict" / "plan.json").read_text())["model"] == "strict-budgets"
    report = _run([str(planner), "report", "sample", "--plan", "out/plan.json", "--out",
                   "report.html"], work)
    assert report.returncode == 0, report.stderr
    assert "Headline risks" in (work / "report.html").read_text()
    # no SCENARIO and no bundled sample here: a clear error, exit 2
    bare = _run([str(planner), "run", "--out", "bare"], work)
    assert bare.returncode == 2
    assert "bundled sample is not here" in " ".join(bare.stderr.split())
    assert not (work / "bare").exists()
