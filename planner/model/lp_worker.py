"""HiGHS on a matrix form, here or in a second process that solves some of the LP's groups.

:func:`run_highs` is the one place a :class:`~planner.model.lp.MatrixForm` meets HiGHS
(:func:`planner.model.backends.solve_matrix` calls it for ``highs``). Run as
``python -m planner.model.lp_worker``, this module reads one pickled request from
stdin — a list of matrix forms, the seconds left, HiGHS's threads and seed — solves the
forms one after another with :func:`run_highs` and writes the pickled outcomes and its
peak memory to stdout. :mod:`planner.model.solve` starts it to solve some of the elastic LP's
independent groups of clusters while it solves the others itself: two processes, each
with its own HiGHS, so that each group's solve is the one it would be alone (two HiGHS
instances on two threads of one process share its scheduler and gave different grants
from run to run). It imports highspy and numpy only (no pandas), so it starts in a
fraction of a second.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from typing import BinaryIO

import numpy as np

from planner.model.lp import MatrixForm, highs_lp, new_highs
from planner.model.result import SolverStatus, StageResult, highs_outcome


def run_highs(form: MatrixForm, time_limit: float, threads: int, seed: int, mip_gap: float
              ) -> tuple[StageResult, np.ndarray | None, np.ndarray | None]:
    """Solve ``form`` with HiGHS: the outcome as HiGHS reports it, x and row duals.

    x is ``None`` unless the outcome is optimal or feasible; duals are ``None`` for a MIP.
    """
    highs = new_highs(threads, seed, max(1.0, time_limit))
    if form.is_mip:
        highs.setOptionValue("mip_rel_gap", float(mip_gap))
    started = time.perf_counter()
    highs.passModel(highs_lp(form))
    highs.run()
    seconds = time.perf_counter() - started
    stage = highs_outcome(highs, "highs", seconds)  # objective, bound and gap as HiGHS says
    if stage.status not in (SolverStatus.OPTIMAL, SolverStatus.FEASIBLE):
        return stage, None, None
    solution = highs.getSolution()
    duals = None if form.is_mip else np.asarray(solution.row_dual)
    return stage, np.asarray(solution.col_value), duals


def solve_forms(forms: list[MatrixForm], seconds_left: float, threads: int, seed: int
                ) -> list[tuple[StageResult, np.ndarray | None, np.ndarray | None]]:
    """Each LP of ``forms`` in turn (MIP gap unused), within ``seconds_left`` in all.

    Every form is solved even after one that is not optimal: the caller reads the
    outcomes in group order and stops at the first that is not.
    """
    deadline = time.perf_counter() + seconds_left
    return [run_highs(form, max(1.0, deadline - time.perf_counter()), threads, seed, 0.0)
            for form in forms]


def peak_mb() -> float:
    """Peak resident memory of this process since it started this program (MB), or nan.

    ``VmHWM`` of /proc/self/status: ``getrusage``'s ``ru_maxrss`` would also count the
    parent's pages this process held between fork and exec.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return float("nan")


def start_worker(module: str) -> subprocess.Popen | None:
    """``python -m <module>`` with pipes on stdin and stdout, or None if it cannot start.

    How the planning process launches its workers (this module's :func:`main`, and
    :mod:`planner.model.part_worker`); stderr is discarded.
    """
    try:
        return subprocess.Popen([sys.executable, "-m", module], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except OSError:
        return None


def reply_stream() -> BinaryIO:
    """A worker's own stdout for its replies; fd 1 itself goes to /dev/null.

    Whatever HiGHS might print to the C-level stdout then stays off the replies.
    """
    out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    return out


def main() -> None:
    """Read a request from stdin, write the outcomes and this process's peak MB to stdout."""
    out = reply_stream()
    forms, seconds_left, threads, seed = pickle.load(sys.stdin.buffer)
    outcomes = solve_forms(forms, seconds_left, threads, seed)
    pickle.dump((outcomes, peak_mb()), out, protocol=pickle.HIGHEST_PROTOCOL)
    out.close()


if __name__ == "__main__":
    main()
