"""Gate for tests that need a system tool (LibreOffice, Chromium, Slurm, ...).

Where the tool is missing such a test is skipped with its reason; under
``PLANNER_SYSTEM_TESTS=required`` (set by ``.ci/run``, which installs the tools) it fails
instead, so a green CI never hides a system test that did not run.
"""

from __future__ import annotations

import os
import shutil

import pytest

REQUIRED = os.environ.get("PLANNER_SYSTEM_TESTS") == "required"


def need(*tools: str, why: str) -> None:
    """Skip (or, in CI, fail) the calling test unless every one of ``tools`` is on PATH."""
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if not missing:
        return
    message = f"{', '.join(missing)} not on PATH: {why}"
    if REQUIRED:
        pytest.fail(f"{message} (PLANNER_SYSTEM_TESTS=required)")
    pytest.skip(message)


def need_font(family: str, *, why: str) -> None:
    """Skip (or, in CI, fail) unless fontconfig knows ``family`` (``fc-list``)."""
    import subprocess

    need("fc-list", why=why)
    found = subprocess.run(["fc-list", family], capture_output=True, text=True,
                           check=False).stdout.strip()
    if found:
        return
    message = f"font {family} not installed: {why}"
    if REQUIRED:
        pytest.fail(f"{message} (PLANNER_SYSTEM_TESTS=required)")
    pytest.skip(message)


def need_module(module: str, extra: str) -> None:
    """Skip (or, in CI, fail) unless the optional ``module`` (``gpu-planner[extra]``) is here.

    ``make test`` installs the extras the tests need, so in CI a test of the sweep on Ray
    or of a PuLP solver always runs.
    """
    from planner.extras import installed

    if installed(module):
        return
    message = f"{module} is not installed (pip install 'gpu-planner[{extra}]')"
    if REQUIRED:
        pytest.fail(f"{message} (PLANNER_SYSTEM_TESTS=required)")
    pytest.skip(message)
