"""A fast local search for the reservation stage: insertions with ejections, in plain Python.

The part's MIP (R1)–(R3) of :mod:`planner.model.reservations`, read from its own rows:
a placement is one start (or none) per request; ``room[k, t]`` the nodes left on the
part's cluster k in period t (R1), ``left[p]`` the budget left to project p (R2), both in
the model's integer units. The moves:

- **fill**: every unplaced request, largest value first, at its best start that fits;
- **shift**: a placed request to a start worth more that fits once it has left its own;
- **insert with ejection**: an unplaced request r at start s, after taking out one or two
  placed requests that stand in its way (on its cluster and overlapping [s, s + L_r) when
  nodes are short, of its project when budget is short); then the requests taken out and
  the cluster's other unplaced ones are put back greedily wherever they fit. The move is
  kept when the placement is then worth more, else undone exactly.

A move is checked in O(L_r) on small arrays, so the search tries tens of thousands of
moves a second where a HiGHS sub-MIP (:func:`planner.model.reservations.improve_placement`)
takes some 30 ms. It stops after :data:`MAX_MOVES` tried ejections (a work limit: the
same inputs give the same placement) or at its deadline (a guard, wall clock), whichever
comes first, or when a round finds nothing better. Every move keeps (R1)–(R3), so the
placement is valid throughout; its value never goes down.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from planner.model.reservations import ReservationPart

MAX_MOVES = 40_000  # ejection moves tried at most (a deterministic work limit)
PAIR_BLOCKERS = 12  # the cheapest blockers among which pairs are ejected together
REPAIR_OTHERS = 30  # unplaced requests of the cluster tried after an ejection
UNLIMITED = np.iinfo(np.int64).max // 4  # budget left of a project whose row cannot bind


class SwapSearch:
    """The placement of one part, its room and budget left, and the moves on them."""

    def __init__(self, part: ReservationPart, placement: dict[str, int]) -> None:
        form = part.lp.matrix(maximize=True)
        requests = part.requests
        self.ids = [r.request_id for r in requests]
        self.count = len(requests)
        self.values = [np.asarray(v, dtype=np.int64) for v in part.values]
        self.starts = [np.asarray(r.starts, dtype=np.int64) for r in requests]
        self.order = [np.argsort(-v, kind="stable") for v in self.values]
        self.best = np.array([int(v.max()) for v in self.values], dtype=np.int64)
        self.nodes = np.array([r.nodes for r in requests], dtype=np.int64)
        self.length = np.array([r.length for r in requests], dtype=np.int64)
        clusters = np.unique([r.cluster for r in requests])
        self.cluster = np.searchsorted(clusters, [r.cluster for r in requests])
        nodes_rows = part.lp.rows["nodes"]  # (R1), cluster by cluster of the part, then period
        self.room = np.floor(form.row_upper[nodes_rows] + 1e-9).astype(np.int64).reshape(
            clusters.size, -1)
        budget_rows = part.lp.rows["budget"]  # (R2), one a project of the part, sorted
        owners = np.unique([r.project for r in requests])
        self.project = np.searchsorted(owners, [r.project for r in requests])
        upper = form.row_upper[budget_rows]
        self.left = np.where(upper >= 1e20, UNLIMITED,
                             np.floor(np.minimum(upper, 1e18) + 1e-9)).astype(np.int64)
        self.cost = np.zeros(self.count, dtype=np.int64)
        for row in range(budget_rows.start, budget_rows.stop):
            span = slice(form.start[row], form.start[row + 1])
            self.cost[part.request_of[form.index[span]]] = np.round(form.value[span])
        self.by_cluster = [np.flatnonzero(self.cluster == k) for k in range(clusters.size)]
        self.by_project = [np.flatnonzero(self.project == p) for p in range(owners.size)]
        self.at = np.full(self.count, -1, dtype=np.int64)  # index into starts[i], −1: unplaced
        self.value = 0
        self.moves = 0
        for i, request_id in enumerate(self.ids):
            if request_id in placement:
                self._put(i, int(np.flatnonzero(self.starts[i] == placement[request_id])[0]))

    def _put(self, i: int, j: int) -> None:
        s = self.starts[i][j]
        self.room[self.cluster[i], s:s + self.length[i]] -= self.nodes[i]
        self.left[self.project[i]] -= self.cost[i]
        self.at[i] = j
        self.value += int(self.values[i][j])

    def _drop(self, i: int) -> None:
        j = self.at[i]
        s = self.starts[i][j]
        self.room[self.cluster[i], s:s + self.length[i]] += self.nodes[i]
        self.left[self.project[i]] += self.cost[i]
        self.at[i] = -1
        self.value -= int(self.values[i][j])

    def _fits(self, i: int, j: int) -> bool:
        """Whether unplaced request ``i`` fits at its ``j``-th start: nodes (R1), budget (R2)."""
        s = self.starts[i][j]
        return bool(self.cost[i] <= self.left[self.project[i]] and self.room[
            self.cluster[i], s:s + self.length[i]].min() >= self.nodes[i])

    def _best_fit(self, i: int) -> int:
        """The best start of unplaced ``i`` that fits and is worth something, else −1."""
        for j in self.order[i]:
            if self.values[i][j] <= 0:
                return -1
            if self._fits(i, j):
                return int(j)
        return -1

    def _repair(self, candidates: list[int]) -> list[int]:
        """Put each unplaced candidate (best value first) at its best start that fits."""
        put = []
        for i in sorted(candidates, key=lambda i: (-int(self.best[i]), i)):
            if self.at[i] < 0:
                j = self._best_fit(i)
                if j >= 0:
                    self._put(i, j)
                    put.append(i)
        return put

    def _blockers(self, i: int, j: int) -> list[int]:
        """Placed requests in the way of ``i`` at its ``j``-th start, cheapest first."""
        s, end, k = self.starts[i][j], self.starts[i][j] + self.length[i], self.cluster[i]
        out = []
        if self.room[k, s:end].min() < self.nodes[i]:
            for b in self.by_cluster[k]:
                if self.at[b] >= 0:
                    start = self.starts[b][self.at[b]]
                    if start < end and s < start + self.length[b]:
                        out.append(int(b))
        if self.cost[i] > self.left[self.project[i]]:
            out += [int(b) for b in self.by_project[self.project[i]]
                    if self.at[b] >= 0 and b not in out]
        return sorted(out, key=lambda b: (int(self.values[b][self.at[b]]), b))

    def try_insert(self, i: int, j: int) -> bool:
        """Insert unplaced ``i`` at its ``j``-th start, ejecting one or two blockers.

        The move is kept when the placement is worth more once the ejected requests and
        the cluster's unplaced ones are put back where they fit; else it is undone.
        """
        blockers = self._blockers(i, j)
        near = blockers[:PAIR_BLOCKERS]
        sets = [(b,) for b in blockers] + [(a, b) for n, a in enumerate(near)
                                           for b in near[n + 1:]]
        before = self.value
        others = [int(u) for u in self.by_cluster[self.cluster[i]] if self.at[u] < 0 and u != i]
        for ejected in sets:
            self.moves += 1
            was = [(b, int(self.at[b])) for b in ejected]
            for b in ejected:
                self._drop(b)
            if self._fits(i, j):
                self._put(i, j)
                put = self._repair(list(ejected) + others[:REPAIR_OTHERS])
                if self.value > before:
                    return True
                for u in put:
                    self._drop(u)
                self._drop(i)
            for b, jb in was:
                self._put(b, jb)
        return False

    def _shift(self) -> bool:
        """Every placed request to its best start that fits once it has left its own."""
        better = False
        for i in range(self.count):
            j0 = int(self.at[i])
            if j0 < 0 or self.values[i][j0] == self.best[i]:
                continue
            self._drop(i)
            j = self._best_fit(i)
            self._put(i, j if j >= 0 and self.values[i][j] > self.values[i][j0] else j0)
            better |= bool(self.at[i] != j0)
        return better

    def search(self, deadline: float, max_moves: int = MAX_MOVES) -> None:
        """Rounds of fill, shift and insertions with ejection, until a round gains nothing.

        Or until the work limit (``max_moves`` ejections tried) or ``deadline``
        (``time.perf_counter()``), whichever comes first.
        """
        while self.moves < max_moves and time.perf_counter() < deadline:
            better = bool(self._repair([i for i in range(self.count) if self.at[i] < 0]))
            better |= self._shift()
            waiting = sorted((i for i in range(self.count) if self.at[i] < 0),
                             key=lambda i: (-int(self.best[i]), i))
            for i in waiting:
                if self.moves >= max_moves or time.perf_counter() >= deadline:
                    return
                if self.at[i] >= 0:
                    continue
                for j in self.order[i]:
                    if self.values[i][j] <= 0:
                        break
                    if self.try_insert(i, int(j)):
                        better = True
                        break
            if not better:
                return

    def placement(self) -> dict[str, int]:
        """{request_id: start period} of the placed requests."""
        return {self.ids[i]: int(self.starts[i][self.at[i]]) for i in range(self.count)
                if self.at[i] >= 0}


def swap_search(part: ReservationPart, placement: dict[str, int], deadline: float,
                max_moves: int = MAX_MOVES) -> tuple[dict[str, int], int]:
    """From a valid ``placement`` of ``part``: the search's placement and its value (× SCALE)."""
    search = SwapSearch(part, placement)
    search.search(deadline, max_moves)
    return search.placement(), search.value
