"""A worker process that solves reservation parts, several of them at once beside this one.

Run as ``python -m planner.model.part_worker`` by
:func:`planner.model.reservations.solve_reservation_model` when it solves parts in
worker processes (:func:`~planner.model.reservations.part_workers`): it reads pickled
requests from stdin, one after another — a part, its time limit, the wall-clock deadline,
``mip_gap``, HiGHS's threads and seed, and whether to polish only — solves each with
:func:`~planner.model.reservations.solve_remote` and writes each pickled result to stdout
at once, until stdin closes. A process of its own, not a thread: two HiGHS instances on
two threads of one process share its scheduler (:mod:`planner.model.lp_worker`).
"""

from __future__ import annotations

import pickle
import sys

from planner.model.lp_worker import reply_stream
from planner.model.reservations import solve_remote


def main() -> None:
    """Answer every request on stdin, in order, until it closes."""
    out = reply_stream()
    while True:
        try:
            args = pickle.load(sys.stdin.buffer)
        except EOFError:
            break
        pickle.dump(solve_remote(*args), out, protocol=pickle.HIGHEST_PROTOCOL)
        out.flush()
    out.close()


if __name__ == "__main__":
    main()
