"""Optional dependencies: what needs them, and the message when one is not installed.

Planning, checking, exporting, reports and replays need only the core dependencies.
Two features need a package of their own, installed as an extra of ``gpu-planner``:

- ``planner sweep`` runs its cells as Ray tasks: ``pip install 'gpu-planner[sweep]'``
  (``--serial`` runs them one by one without Ray);
- the LP/MIP stages through any solver but HiGHS (``--solver cbc``, ``gurobi``, ...,
  ``solver.lp_solver`` in a model file) go through PuLP: ``pip install
  'gpu-planner[solvers]'``.

Without the package the command exits 2 before it reads or writes anything, naming the
option and what to install (:func:`require`).
"""

from __future__ import annotations

import importlib.util

from planner.errors import InputError, InputProblem

#: module -> (the extra that installs it, what needs it)
EXTRAS = {"ray": ("sweep", "runs its cells on Ray"),
          "pulp": ("solvers", "reaches solvers other than HiGHS through PuLP")}


def installed(module: str) -> bool:
    """Whether ``module`` can be imported here (found, not imported: Ray takes seconds)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_problem(module: str, where: str, column: str | None = None,
                    instead: str = "") -> InputProblem:
    """The problem saying that ``where`` needs ``module``, and how to install it."""
    extra, why = EXTRAS[module]
    text = (f"{why}, an optional dependency that is not installed: pip install "
            f"'gpu-planner[{extra}]' (the package {module})")
    return InputProblem(where, None, column, text + (f"; {instead}" if instead else ""))


def require(module: str, where: str, column: str | None = None, instead: str = "") -> None:
    """Raise :class:`InputError` (exit 2) when ``module`` is not installed."""
    if not installed(module):
        raise InputError([missing_problem(module, where, column, instead)])
