"""The Kueue replay's fast fair-sharing search gives what the plain walk gave, to the job.

``KueueExecutor._fair_targets`` skips a search that failed before while nothing it
reads changed (the engine's per-cluster version, the trees, the other flavors'
borrowing), keeps the nodes' room as a running what-if (:class:`NodeRoom`) and reads a
target's share without a candidate without shifting the tree; a project is retagged
only when its running work changed, a job that found no room in its own queue does not
look again until the cluster changed, and the engine keeps each cluster's running order.
The search also keeps the borrowed work's lines per version, picks the next queue from
heaps (:class:`Highest`), ends once no candidate left would be taken, and gives the tree
back by undoing its shifts.
:class:`Walked` on :class:`Plain` below is the replay as it was written first: every
attempt walks the tree and the nodes afresh. Replays of random traces under both must
agree on every run segment.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.simulate.engine import Replay
from planner.simulate.kueue_replay import (
    STRATEGIES,
    FlavorTree,
    Highest,
    KueueExecutor,
    NodeRoom,
    QuotaNode,
)
from tests.test_simulate import trace
from tests.test_simulate_kueue import BY_HAND, FixedPlan, hand_plan, tiny


class Plain(Replay):
    """The engine without its memo of each cluster's running order."""

    def running_jobs(self, c):
        return sorted(self.running[c], key=lambda j: (self.run_start[j], j))


class Walked(KueueExecutor):
    """The plain search: no memory of failed searches, every check walks the nodes.

    Nor the other memos: every project is retagged when asked, and a job that found no
    room among its own queue's lower-priority work looks again.
    """

    def _retag(self, sim, c, projects):
        self._tagged[c].clear()
        super()._retag(sim, c, projects)

    def _within_queue(self, sim, c, p, job, tree):
        self._no_room[c] = (None, set())
        return super()._within_queue(sim, c, p, job, tree)

    def _fair_targets(self, sim, c, tree, q, job):
        need, gpus = sim.held(job), sim.jobs.gpus[job]
        tree.shift(q, need)
        hope = False
        for y, node in tree.nodes.items():
            if node.queue and y != q and node.usage > node.nominal and y in self.project_of:
                ax, ay = self._split(tree, q, y)
                if tree.share(ax) < tree.share(ay):
                    hope = True
                    break
        tree.shift(q, -need)
        if not hope:
            return None
        victims = self._victims(sim, c, tree)
        me = self.project_of[q]
        cands: dict[str, list[int]] = {}
        for v in sim.victim_jobs(c, [(p, t) for p, t in victims if p != me]):
            cands.setdefault(self.queue[sim.jobs.project[v]], []).append(v)
        if not cands:
            return None
        held_of = {v: sim.held(v) for vs in cands.values() for v in vs}
        if not fits_without(sim, c, gpus, list(held_of)):
            return None
        targets: list[int] = []

        def pair(y):
            ax, ay = self._split(tree, q, y)
            return tree.share(ax), tree.share(ay)

        def without(y, v):
            tree.shift(y, -held_of[v])
            share = pair(y)[1]
            tree.shift(y, held_of[v])
            return share

        def fits():
            tree.shift(q, -need)
            ok = tree.available(q) >= need
            tree.shift(q, need)
            return ok and fits_without(sim, c, gpus, targets)

        def take(v):
            targets.append(v)
            tree.shift(self.queue[sim.jobs.project[v]], -held_of[v])

        tree.shift(q, need)
        try:
            retry: dict[str, list[int]] = {}
            while cands and not fits():
                y = highest(tree, set(cands))
                mine = pair(y)[0]
                while cands[y]:
                    v = cands[y].pop(0)
                    if mine <= without(y, v):
                        take(v)
                        break
                    retry.setdefault(y, []).append(v)
                if not cands[y]:
                    del cands[y]
            second = self.strategies[1:] == STRATEGIES[1:]
            for y in sorted(retry, key=lambda name: -pair(name)[1]) if second else ():
                if fits():
                    break
                mine, old = pair(y)
                if mine < old:
                    take(retry[y][0])
            if not fits():
                return None
            for v in reversed(list(targets)):  # drop what is spare, in reverse
                y = self.queue[sim.jobs.project[v]]
                targets.remove(v)
                tree.shift(y, sim.held(v))
                if not fits():
                    targets.append(v)
                    tree.shift(y, -sim.held(v))
            return targets
        finally:
            self._sync(sim, c, tree)


def fits_without(sim, c: int, gpus: int, targets: list[int]) -> bool:
    """Whether ``gpus`` would fit on ``c``'s nodes were ``targets`` gone: node by node."""
    gpn = sim.gpn[c]
    gone = set(targets)
    free = []
    for _, left, jobs in sim.nodes_on(c):
        for j in jobs:
            if j in gone:
                left += gpn if sim.jobs.gpus[j] >= gpn else sim.jobs.gpus[j]
        free.append(left)
    if gpus >= gpn:
        return sum(1 for f in free if f == gpn) >= -(-gpus // gpn)
    return any(f >= gpus for f in free)


def highest(tree: FlavorTree, queues: set[str]) -> str:
    """From the root, the highest-share child holding one of ``queues``, down to a queue."""
    holds: dict[str, set[str]] = {}
    for y in queues:
        node: str | None = y
        while node is not None:
            holds.setdefault(node, set()).add(y)
            node = tree.nodes[node].parent
    top = next(n for n in holds if tree.nodes[n].parent is None)
    while top not in queues:
        kids = [k for k in tree.nodes[top].children if k in holds]
        top = max(kids, key=lambda k: (tree.share(k), k))
    return top


# two teams of two projects and a project of its own: the tournament goes down two levels
ORG = [("ta", "", 1.0), ("a1", "ta", 1.0), ("a2", "ta", 2.0), ("tb", "", 1.0),
       ("b1", "tb", 1.0), ("b2", "tb", 1.0), ("c", "", 1.0)]
PROJECTS = ("a1", "a2", "b1", "b2", "c")
# crowded: most jobs come in the first hours and run long, so queues borrow and preempt
JOB = st.tuples(st.sampled_from(PROJECTS), st.floats(0, 12), st.sampled_from([1, 2, 3, 4, 8, 16]),
                st.floats(1, 30), st.booleans(), st.sampled_from([0.0, 1.0, 1.0]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=st.lists(JOB, min_size=2, max_size=30),
       grants=st.lists(st.integers(0, 6), min_size=len(PROJECTS), max_size=len(PROJECTS)),
       second=st.booleans())
def test_the_fast_search_replays_as_the_plain_walk(jobs, grants, second):
    # Three nodes of 8 GPUs; guaranteed GPUs drawn per project and scaled into the 24,
    # the rest borrowed under Fair Sharing (both preemption strategies, or the first).
    total = sum(grants)
    scaled = [g * 24 // total if total > 24 else g for g in grants]
    plan = hand_plan(3, {p: (float(g), 0.0) for p, g in zip(PROJECTS, scaled, strict=True)})
    rows = [(f"j{i:02d}", p, round(t, 2), g, round(d, 2), m, r)
            for i, (p, t, g, d, r, m) in enumerate(jobs)]
    tr = trace(rows)
    sc = tiny(ORG, nodes=3)
    strategies = STRATEGIES if second else STRATEGIES[:1]
    options = replace(BY_HAND, strategies=strategies)
    fast = Replay(sc, tr, FixedPlan(plan, options=options)).run()
    walked = Plain(sc, tr, FixedPlan(plan, options=options, executor=Walked)).run()
    assert fast.segments == walked.segments
    assert np.array_equal(fast.first_start, walked.first_start, equal_nan=True)
    assert np.array_equal(fast.finish, walked.finish, equal_nan=True)
    assert np.array_equal(fast.preemptions, walked.preemptions)


def cohort_tree(usage: dict[str, int]) -> FlavorTree:
    # root (nominal 4) ← T ← q1 (nominal 6, lendingLimit 2), q2 (nominal 0, borrowingLimit 5);
    # root ← q3 (nominal 2): shares at T and at the queues
    nodes = {"root": QuotaNode("root", None, 1.0, False, nominal=4),
             "T": QuotaNode("T", "root", 1.0, False),
             "q1": QuotaNode("q1", "T", 1.0, True, True, nominal=6, lending_limit=2),
             "q2": QuotaNode("q2", "T", 2.0, True, True, nominal=0, borrowing_limit=5),
             "q3": QuotaNode("q3", "root", 1.0, True, True, nominal=2)}
    tree = FlavorTree(nodes)
    tree.set_usage(usage)
    return tree


@given(usage=st.fixed_dictionaries({q: st.integers(0, 12) for q in ("q1", "q2", "q3")}),
       name=st.sampled_from(["q1", "q2", "q3"]), gpus=st.integers(0, 12))
def test_share_without_reads_what_a_shift_then_share_would(usage, name, gpus):
    tree = cohort_tree(usage)
    gpus = min(gpus, usage[name])
    for at in tree.path(name)[:-1]:  # the queue and its Cohorts below the root
        got = tree.share_without(name, gpus, at)
        tree.shift(name, -gpus)
        assert got == tree.share(at)
        tree.shift(name, gpus)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=st.lists(JOB, min_size=1, max_size=16), every=st.integers(1, 3))
def test_node_room_answers_as_a_walk_over_the_nodes(jobs, every):
    # After every scheduling pass of a replay: every ``every``-th running job taken, in
    # the order they run, then given back one by one; after each step the room answers
    # as the node-by-node walk for every size of workload.
    rows = [(f"j{i:02d}", p, round(t, 2), g, round(d, 2), m, r)
            for i, (p, t, g, d, r, m) in enumerate(jobs)]
    checked = []

    class Checked(FixedPlan):
        def schedule(self, sim, c):
            super().schedule(sim, c)
            taken = sim.running_jobs(c)[::every]
            room = NodeRoom(sim, c)
            for n in range(len(taken) + 1):
                for gpus in (1, 3, 4, 8, 16, 24):
                    assert room.fits(gpus) == fits_without(sim, c, gpus, taken[:n])
                if n < len(taken):
                    room.take(taken[n])
            for n in range(len(taken), 0, -1):
                room.give_back(taken[n - 1])
                assert room.fits(8) == fits_without(sim, c, 8, taken[:n - 1])
            checked.append(len(taken))

    Replay(tiny(ORG, nodes=3), trace(rows), Checked(hand_plan(3, {}))).run()
    assert checked


def fresh_share(tree: FlavorTree, name: str) -> float:
    # the share read from the node's fields alone, as FlavorTree.share computed it before
    # it kept shares: borrowed ÷ the parent's lendable ÷ weight
    node = tree.nodes[name]
    borrowed = max(0, node.usage - node.subtree) + tree.elsewhere.get(name, 0)
    if borrowed <= 0 or node.parent is None:
        return 0.0
    if node.weight <= 0:
        return float("inf")
    return borrowed / max(tree.lendable[node.parent], 1) / node.weight


STEP = st.tuples(st.sampled_from(["shift", "add", "set", "elsewhere", "read"]),
                 st.sampled_from(["q1", "q2", "q3"]), st.integers(-6, 6))


@given(usage=st.fixed_dictionaries({q: st.integers(0, 12) for q in ("q1", "q2", "q3")}),
       steps=st.lists(STEP, max_size=25))
def test_kept_shares_are_the_shares_of_the_usage_as_it_stands(usage, steps):
    # The tree keeps each node's share until that node's usage changes (a shift or an
    # admission up its path, a new usage, new borrowing elsewhere): after any sequence
    # of changes and reads every share it gives is the one computed afresh, and every
    # Cohort's usage is what set_usage would compute from the queues'.
    tree = cohort_tree(usage)
    for kind, name, gpus in steps:
        if kind == "shift":
            tree.shift(name, max(gpus, -tree.nodes[name].usage))
        elif kind == "add":
            tree.add_usage(name, abs(gpus))
        elif kind == "set":
            tree.set_usage({q: tree.nodes[q].usage for q in ("q1", "q2", "q3")} | {name: abs(gpus)})
        elif kind == "elsewhere":
            tree.elsewhere = {name: abs(gpus)} if gpus else {}
        for n in tree.nodes:
            assert tree.share(n) == fresh_share(tree, n)
    again = cohort_tree({q: tree.nodes[q].usage for q in ("q1", "q2", "q3")})
    assert {n: node.usage for n, node in again.nodes.items()} == \
        {n: node.usage for n, node in tree.nodes.items()}


@given(usage=st.fixed_dictionaries({q: st.integers(0, 12) for q in ("q1", "q2", "q3")}),
       name=st.sampled_from(["q1", "q2", "q3"]), gpus=st.integers(0, 12))
def test_available_less_reads_what_a_shift_then_available_would(usage, name, gpus):
    # The search asks whether its workload fits with its own GPUs taken back out of its
    # queue: read down the path without shifting, it must be what shifting gives.
    tree = cohort_tree(usage)
    gpus = min(gpus, usage[name])
    got = tree.available_less(name, gpus)
    tree.shift(name, -gpus)
    assert got == tree.available(name)


@given(usage=st.fixed_dictionaries({q: st.integers(0, 12) for q in ("q1", "q2", "q3")}),
       queues=st.sets(st.sampled_from(["q1", "q2", "q3"]), min_size=1),
       steps=st.lists(st.tuples(st.integers(0, 4), st.booleans()), max_size=12))
def test_highest_keeps_its_pick_only_while_the_walk_would(usage, queues, steps):
    # As a search does: take GPUs from the queue picked (its path's shares fall; now and
    # then from another candidate queue, as the second strategy's takes do), now and then
    # drop a queue (forget); after each step the heaps' pick is the fresh walk's.
    tree = cohort_tree(usage)
    cands = {y: None for y in sorted(queues)}
    holds: dict[str, int] = {}
    for y in cands:
        for n in tree.path(y):
            holds[n] = holds.get(n, 0) + 1
    pick = Highest(tree, holds, cands)
    for gpus, other in steps:
        y = pick()
        assert y == highest(tree, set(cands))
        if other:
            y = sorted(cands)[gpus % len(cands)]
        if gpus and tree.nodes[y].usage:
            tree.shift(y, -min(gpus, tree.nodes[y].usage))
            pick.taken(y)
        elif len(cands) > 1:
            del cands[y]
            pick.forget()
            for n in tree.path(y):
                holds[n] -= 1
                if not holds[n]:
                    del holds[n]
    assert pick() == highest(tree, set(cands))


class Checked(KueueExecutor):
    """The replay with every search ``_could_fit`` rules out run in full all the same.

    The check is told to let each search through; a search it would have stopped must
    find no targets, and the check must leave the tree's usage and kept shares as it
    found them. ``ruled_out``: the jobs whose searches it would have stopped.
    """

    said: bool | None = None

    def begin(self, sim, model):
        super().begin(sim, model)
        self.ruled_out: list[int] = []

    def _could_fit(self, sim, c, tree, q, job, cands, held_of, reach):
        usage = {n: node.usage for n, node in tree.nodes.items()}
        shares = {n: tree.share(n) for n in tree.nodes}
        self.said = super()._could_fit(sim, c, tree, q, job, cands, held_of, reach)
        assert {n: node.usage for n, node in tree.nodes.items()} == usage
        assert {n: tree.share(n) for n in tree.nodes} == shares
        return True

    def _search_targets(self, sim, c, tree, q, job):
        self.said = None
        found = super()._search_targets(sim, c, tree, q, job)
        if self.said is False:
            assert found is None
            self.ruled_out.append(job)
        return found


def test_a_gang_whose_share_test_would_turn_down_is_no_target_before_the_search():
    # Three nodes of 8 GPUs, nobody granted anything: all work borrows. At hour 0 a1 runs
    # three 1-GPU jobs and a 16-GPU gang (two whole nodes), a2 a 1-GPU job on the third. At hour 1
    # a1's small jobs end and a2's 8-GPU job (job 5) asks for a whole node. Every node
    # holds a1's gang or a2's own job, so only the gang can make room: with it gone every
    # candidate would be gone and the nodes would hold job 5. But a2 (its 9 GPUs ÷ weight 2)
    # may take a1's work only while a1's share without it stays at least a2's, and a1
    # without its gang borrows nothing (share 0): the gang is never a target, the nodes
    # cannot make room, and the check says so before the search takes anything.
    rows = [("j00", "a1", 0.0, 1, 1.0, 0.0, False), ("j01", "a1", 0.0, 1, 1.0, 0.0, False),
            ("j02", "a1", 0.0, 1, 1.0, 0.0, False), ("j03", "a1", 0.0, 16, 2.0, 0.0, False),
            ("j04", "a2", 0.0, 1, 2.0, 0.0, False), ("j05", "a2", 1.0, 8, 1.0, 0.0, False)]
    plan = hand_plan(3, {p: (0.0, 0.0) for p in PROJECTS})
    policy = FixedPlan(plan, executor=Checked)
    checked = Replay(tiny(ORG, nodes=3), trace(rows), policy).run()
    assert 5 in policy.executor.ruled_out
    assert checked.first_start[5] == 2.0  # once the gang ends, not by preempting it
    assert checked.preemptions[3] == 0
    plain = Replay(tiny(ORG, nodes=3), trace(rows), FixedPlan(plan)).run()
    assert checked.segments == plain.segments


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=st.lists(JOB, min_size=2, max_size=30),
       grants=st.lists(st.integers(0, 6), min_size=len(PROJECTS), max_size=len(PROJECTS)),
       reserved=st.sampled_from([(), (("a1", 1),), (("b2", 1),)]))
def test_a_search_ruled_out_before_it_starts_would_have_found_nothing(jobs, grants, reserved):
    # Under the first strategy alone, replays of random crowded traces under
    # :class:`Checked` replay as the plain one (every search a check would have stopped
    # found nothing, and the check changed nothing in the tree). A reservation
    # (nominal quota never lent: a lendingLimit) now and then, so guaranteed quota holds
    # back part of a queue's usage from its Cohort's.
    total = sum(grants)
    scaled = [g * 16 // total if total > 16 else g for g in grants]
    plan = hand_plan(3, {p: (float(g), 0.0) for p, g in zip(PROJECTS, scaled, strict=True)},
                     reservations=reserved)
    rows = [(f"j{i:02d}", p, round(t, 2), g, round(d, 2), m, r)
            for i, (p, t, g, d, r, m) in enumerate(jobs)]
    checked = Replay(tiny(ORG, nodes=3), trace(rows), FixedPlan(plan, executor=Checked)).run()
    plain = Replay(tiny(ORG, nodes=3), trace(rows), FixedPlan(plan)).run()
    assert checked.segments == plain.segments


class Synced(KueueExecutor):
    """The executor checking two of the search's shortcuts against the plain reads.

    The borrowing queues kept per version (:meth:`_borrowers`) must be the walk over every
    queue of the tree as it stands; after a ``withinClusterQueue`` attempt that shifted its
    targets back instead of re-syncing, every usage must be what a sync gives, and every
    kept share the one computed afresh.
    """

    def begin(self, sim, model):
        super().begin(sim, model)
        self.within_checked = 0

    def _borrowers(self, sim, c):
        got = super()._borrowers(sim, c)
        assert got == [(y, node) for y, node in self._queue_nodes[c] if node.usage > node.nominal]
        return got

    def _within_queue(self, sim, c, p, job, tree):
        got = super()._within_queue(sim, c, p, job, tree)
        usage = {n: node.usage for n, node in tree.nodes.items()}
        shares = {n: tree.share(n) for n in tree.nodes}
        assert shares == {n: fresh_share(tree, n) for n in tree.nodes}
        self._sync(sim, c, tree)
        assert {n: node.usage for n, node in tree.nodes.items()} == usage
        self.within_checked += 1
        return got


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=st.lists(JOB, min_size=2, max_size=30),
       grants=st.lists(st.integers(0, 6), min_size=len(PROJECTS), max_size=len(PROJECTS)))
def test_the_kept_borrowers_and_the_shifted_back_tree_are_what_plain_reads_give(jobs, grants):
    # Random crowded traces (budget and unallocated work, so queues preempt their own
    # lower-priority work); the replay under Synced replays as the plain one.
    total = sum(grants)
    scaled = [g * 24 // total if total > 24 else g for g in grants]
    plan = hand_plan(3, {p: (float(g), 0.0) for p, g in zip(PROJECTS, scaled, strict=True)})
    rows = [(f"j{i:02d}", p, round(t, 2), g, round(d, 2), m, r)
            for i, (p, t, g, d, r, m) in enumerate(jobs)]
    checked = Replay(tiny(ORG, nodes=3), trace(rows), FixedPlan(plan, executor=Synced)).run()
    plain = Replay(tiny(ORG, nodes=3), trace(rows), FixedPlan(plan, executor=Walked)).run()
    assert checked.segments == plain.segments
