"""Wide jobs get in: engine holds, gang reservations in replans, the fill slice, ageing.

Every case is a tiny trace worked out by hand in its comments (hours from quarter
start; one cluster c1 of 8-GPU nodes; trace time limits are durations rounded up to a
power of two hours).
"""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd

from planner.config import load_model
from planner.simulate.engine import PREEMPTED, replay
from planner.simulate.planner_policy import PlannerPolicy
from planner.simulate.policies import AdmissionPolicy
from tests.test_simulate import Q0, first_starts, runs, trace, two_teams
from tests.tiny import scenario


class Holding(AdmissionPolicy):
    """FIFO fill, plus one hold made at hour ``at``; starts the held job once free."""

    name = "holding"

    def __init__(self, at: float, project: str, nodes: int, start: float, end: float,
                 job_id: str) -> None:
        self.at, self.project, self.n = at, project, nodes
        self.start, self.end, self.job_id = start, end, job_id
        self.chosen: tuple[int, ...] = ()

    def refresh(self, sim, now: float) -> bool:
        """Make the hold at ``at``."""
        if abs(now - self.at) > 1e-9:
            return False
        job = sim.jobs.ids.index(self.job_id)
        hid = sim.hold_nodes(0, sim.tree.leaf_index[self.project], self.n, self.start,
                             self.end, job)
        self.chosen = sim.holds[hid].nodes
        return True

    def schedule(self, sim, c: int) -> None:
        """The held job on its nodes when they are all free, then FIFO fill."""
        for hid in sim.active_holds(c):
            hold = sim.holds[hid]
            if sim.is_waiting(hold.job) and sim.nodes_free(c, hold.nodes):
                sim.start(hold.job, "reserved", nodes=hold.nodes)
        super().schedule(sim, c)


def nodes_of(tr: pd.DataFrame, result, job_id: str) -> list[tuple[float, float, tuple]]:
    """(start, end, nodes) of each run of ``job_id``."""
    j = int(tr.index[tr["job_id"] == job_id][0])
    return sorted((s.start, s.end, s.nodes) for s in result.segments if s.job == j)


def test_held_nodes_stay_idle_only_until_the_held_job_can_start():
    # Three nodes. t=0: j1 (b, 8 GPUs, 6 h, min 6: not preemptible before 6) takes
    # node 0, j2 (b, 8 GPUs, 1 h) node 1, j3 (b, 8 GPUs, 40 h, min 40) node 2.
    # t=1: j2 ends; g (a, 16 GPUs, 4 h) is submitted and does not fit (node 1 alone
    # is free); the policy holds 2 nodes for g over [2, 20): node 1 (free now) and
    # node 0 (j1 expected to end at 0 + its 8 h limit) before node 2 (j3's 64 h).
    # w (b, 8 GPUs, 1 h, submitted at 1) ends at 2, before the hold begins: it may
    # use node 1 over [1, 2). From 2 the held nodes take no other work: v (b, 1 GPU,
    # 1 h, submitted at 2.5) waits, though node 1 is idle. j1 ends at 6: both held
    # nodes are free, g starts there at 6 (node 1 was held idle over [2, 6) only,
    # 32 GPU-hours, the least that seats g). The hold ends with g's start; v starts
    # when g ends at 10, on the lowest best-fit node, 0.
    sc = two_teams(nodes=3, days=2)
    tr = trace([("j1", "b", 0, 8, 6.0, 6.0), ("j2", "b", 0, 8, 1.0, 0.0),
                ("j3", "b", 0, 8, 40.0, 40.0), ("g", "a", 1, 16, 4.0, 0.0),
                ("w", "b", 1, 8, 1.0, 0.0), ("v", "b", 2.5, 1, 1.0, 0.0)])
    policy = Holding(at=1.0, project="a", nodes=2, start=2.0, end=20.0, job_id="g")
    result = replay(sc, tr, policy)
    assert policy.chosen == (0, 1)
    assert nodes_of(tr, result, "w") == [(1.0, 2.0, (1,))]
    assert nodes_of(tr, result, "g") == [(6.0, 10.0, (0, 1))]
    assert nodes_of(tr, result, "v") == [(10.0, 11.0, (0,))]
    on_node_1 = [(s.start, s.end) for s in result.segments if 1 in s.nodes]
    assert all(end <= 2.0 or start >= 6.0 for start, end in on_node_1)


def test_work_that_would_overrun_a_pending_hold_goes_elsewhere():
    # Two nodes; at t=0 the policy holds 1 node for g over [5, 20): both are free, so
    # node 0 (lowest). j1 (b, 8 GPUs, 8 h: limit 8 h, would run past 5) is placed off
    # the held node, on node 1; j2 (b, 8 GPUs, 2 h: ends at 2, before the hold) may
    # use node 0. g (a, 8 GPUs, 3 h) is submitted at 5, when the hold begins, and
    # starts at once on node 0. With no hold (the same policy, never holding) j1 takes
    # the lowest free node, 0, and j2 node 1.
    sc = two_teams(nodes=2, days=1)
    tr = trace([("j1", "b", 0, 8, 8.0, 0.0), ("j2", "b", 0, 8, 2.0, 0.0),
                ("g", "a", 5, 8, 3.0, 0.0)])
    result = replay(sc, tr, Holding(at=0.0, project="a", nodes=1, start=5.0, end=20.0,
                                    job_id="g"))
    assert nodes_of(tr, result, "j1") == [(0.0, 8.0, (1,))]
    assert nodes_of(tr, result, "j2") == [(0.0, 2.0, (0,))]
    assert nodes_of(tr, result, "g") == [(5.0, 8.0, (0,))]
    tags = {s.job: s.tag for s in result.segments}
    assert tags[int(tr.index[tr["job_id"] == "g"][0])] == "reserved"
    plain = replay(sc, tr, Holding(at=-1.0, project="a", nodes=1, start=5.0, end=20.0,
                                   job_id="g"))
    assert nodes_of(tr, plain, "j1") == [(0.0, 8.0, (0,))]
    assert nodes_of(tr, plain, "j2") == [(0.0, 2.0, (1,))]


def weighted_b(nodes: int = 2, days: int = 3):
    """Projects a (team ta, weight 1) and b (team tb, weight 10), budgets 2,000 NGH."""
    end = (Q0 + pd.Timedelta(days=days)).strftime("%Y-%m-%d")
    return scenario(clusters=[("c1", "H100", nodes, 8)],
                    org=[("ta", "", 1.0), ("a", "ta", 1.0), ("tb", "", 10.0), ("b", "tb", 1.0)],
                    budgets=[("a", 2000.0), ("b", 2000.0)], quarter_start="2026-10-01",
                    quarter_end=end, as_of="2026-10-01")


def test_waiting_gang_job_becomes_a_reservation_and_starts_on_drained_nodes():
    # Two nodes (16 GPUs), three days; b's team weighs 10, a's 1. t=0: b submits
    # sixteen one-GPU jobs (60 h, min 8 h); the plan at 0 sees only b's demand and
    # guarantees its 16 GPUs: they start, eight a node. t=1: a submits g, 16 GPUs for
    # 10 h (time limit 16 h). It is paced, but only what b runs beyond its guaranteed
    # GPUs may be preempted, never two whole nodes: it waits. The elastic plans split
    # the nodes by weight (a's fair share ≈ 384 GPU-h × 1/11 a period): g never gets
    # 16 guaranteed GPUs, and without reservation requests (gang_wait_hours = ∞) it
    # starts only when b's jobs end at 60.
    # With gang_wait_hours = 12: at the replan at 24 g has waited 23 h, so it is a
    # reservation request of 2 nodes for 16 h (one period), window [24, 72) (its
    # period + 7, cut at quarter end), left out of the elastic demand. Reservations
    # are placed first: the plan puts it at 24, its earliest start (lateness; 2
    # nodes; budget 2,000 ≥ 384). Period 24-48 then has no GPU for b: b's sixteen jobs
    # are re-classed fill (past their 8 h min runtime), the hold of nodes 0 and 1
    # begins at 24, drains them (sixteen preemptions, resumable) and g starts at 24,
    # tagged reserved, ending at 34. With a threshold of one period (None) g has
    # waited only 23 h at 24; it is a request at 48 and starts then. By default
    # (∞: no requests, the measured best, see the CHANGELOG) it starts at 60.
    sc = weighted_b()
    rows = [(f"b{i:02d}", "b", 0, 1, 60.0, 8.0) for i in range(16)]
    rows += [("g", "a", 1, 16, 10.0, 8.0)]
    tr = trace(rows)
    g = int(tr.index[tr["job_id"] == "g"][0])
    result = replay(sc, tr, PlannerPolicy(gang_wait_hours=12.0))
    assert runs(result, g) == [(24.0, 34.0, "done")]
    assert {s.tag for s in result.segments if s.job == g} == {"reserved"}
    assert {s.nodes for s in result.segments if s.job == g} == {(0, 1)}
    b_first = [s for s in result.segments if s.job != g and s.start == 0.0]
    assert len(b_first) == 16 and all(s.ended == PREEMPTED and s.end == 24.0
                                      for s in b_first)
    assert runs(replay(sc, tr, PlannerPolicy(gang_wait_hours=None)), g) == [
        (48.0, 58.0, "done")]
    never = replay(sc, tr, PlannerPolicy())
    assert runs(never, g) == [(60.0, 70.0, "done")]
    assert never.preemptions.sum() == 0


def test_fill_work_is_reclaimed_after_the_short_slice_not_its_min_runtime():
    # One node; a budget 500, b none. t=0: b's eight allocated one-GPU jobs (30 h,
    # min 8 h); b has no budget, so the plan at 0 guarantees it nothing and its jobs
    # run beyond it (opportunistic or fill): protected for min(8 h, the contract's
    # fill slice, 1 h) only. t=2: a submits four one-GPU jobs (5 h): paced (a's pace,
    # 500 / 72 h, covers them), they reclaim four of b's jobs (expired at 1) at once,
    # at 2. With the slice set to 8 h (the old rule: the min runtime) they wait for
    # b's protection to end, at 8.
    sc = two_teams(days=3, budgets=(("a", 500.0), ("b", 0.0)))
    rows = [(f"b{i}", "b", 0, 1, 30.0, 8.0) for i in range(8)]
    rows += [(f"a{i}", "a", 2, 1, 5.0, 1.0) for i in range(4)]
    tr = trace(rows)
    result = replay(sc, tr, PlannerPolicy())
    starts = first_starts(tr, result)
    assert [starts[f"a{i}"] for i in range(4)] == [2.0] * 4
    b_jobs = set(tr.index[tr["project"] == "b"])
    reclaimed = [s for s in result.segments if s.job in b_jobs and s.ended == PREEMPTED]
    assert len(reclaimed) == 4
    assert all((s.start, s.end, s.protected) == (0.0, 2.0, 1.0) for s in reclaimed)
    assert all(s.tag in ("fill", "opportunistic") for s in reclaimed)
    model = load_model("default")
    eight = replace(model, contract=replace(model.contract, fill_slice_hours=8.0))
    old = first_starts(tr, replay(sc, tr, PlannerPolicy(model=eight)))
    assert [old[f"a{i}"] for i in range(4)] == [8.0] * 4


def test_aged_unallocated_job_gets_in_ahead_of_a_fresh_allocated_one():
    # One node; projects a (budget 1,000), b and c (no budget), five days. t=0: a's
    # eight one-GPU jobs (50 h, min 8) take the node until 50. t=1: b submits u, an
    # unallocated 8-GPU job (5 h, min 0); t=49: c submits f, an allocated 8-GPU job
    # (5 h, min 1) that the plan at 48 did not see. At 50 the node empties; neither is
    # entitled (c has no budget, so no pace; b's work is unallocated), so the fill
    # order decides. f ranks (allocated, c's charged ÷ paced = ∞ without budget);
    # u has waited 49 h and ranks as allocated work at 48 ÷ 49 = 0.98 of its pace:
    # u starts at 50 (protected for the fill slice, having aged), f at 55. With
    # ageing off (age_hours = ∞) unallocated work comes after all allocated work:
    # f at 50, u at 55.
    sc = scenario(clusters=[("c1", "H100", 1, 8)],
                  org=[("ta", "", 1.0), ("a", "ta", 1.0), ("tb", "", 1.0), ("b", "tb", 1.0),
                       ("c", "tb", 1.0)],
                  budgets=[("a", 1000.0)], quarter_start="2026-10-01",
                  quarter_end="2026-10-06", as_of="2026-10-01")
    rows = [(f"a{i}", "a", 0, 1, 50.0, 8.0) for i in range(8)]
    rows += [("u", "b", 1, 8, 5.0, 0.0), ("f", "c", 49, 8, 5.0, 1.0)]
    tr = trace(rows)
    aged = first_starts(tr, replay(sc, tr, PlannerPolicy()))
    assert (aged["u"], aged["f"]) == (50.0, 55.0)
    u = int(tr.index[tr["job_id"] == "u"][0])
    result = replay(sc, tr, PlannerPolicy())
    assert [s.protected for s in result.segments if s.job == u] == [1.0]
    fresh_first = first_starts(tr, replay(sc, tr, PlannerPolicy(age_hours=math.inf)))
    assert (fresh_first["u"], fresh_first["f"]) == (55.0, 50.0)


def test_age_rank_improves_with_the_wait():
    # The rule itself: an unallocated job that waited w hours ranks (0, 48 / w, key).
    policy = PlannerPolicy()

    class Probe:
        """The replay's fields ``age_rank`` reads."""

        now = 0.0
        jobs = type("J", (), {"submit": [0.0]})()
        key = [(1, 0.0, 0)]

    probe = Probe()
    ranks = []
    for now in (0.0, 24.0, 48.0, 96.0):
        probe.now = now
        ranks.append(policy.executor.age_rank(probe, 0)[:2])
    assert ranks == [(0, math.inf), (0, 2.0), (0, 1.0), (0, 0.5)]


class Draining(Holding):
    """``Holding`` that also drains its hold of b's fill work (all or nothing)."""

    def schedule(self, sim, c: int) -> None:
        """Drain the active hold, then as ``Holding``."""
        b = sim.tree.leaf_index["b"]
        for hid in sim.active_holds(c):
            hold = sim.holds[hid]
            if sim.is_waiting(hold.job):
                sim.clear_nodes(c, hold.nodes, [(b, "fill")])
        super().schedule(sim, c)


def test_drain_preempts_nothing_while_a_protected_job_still_holds_a_node():
    # Two nodes. t=0: j1 (b, 8 GPUs, 20 h, min 0: fill work, preemptible at once)
    # takes node 0, j2 (b, 8 GPUs, 6 h, min 6) node 1. At 1 the policy holds both
    # for g (a, 16 GPUs, 3 h, submitted at 1) from 2. At 2 j1 could be preempted but
    # j2 may not: draining node 0 alone would leave it idle for nothing, so j1 runs
    # on. At 6 j2 ends; now all that holds the nodes is j1, preempted at 6, and g
    # starts at 6 on both nodes. j1 resumes when g ends at 9 (14 h left: to 23).
    sc = two_teams(nodes=2, days=2)
    tr = trace([("j1", "b", 0, 8, 20.0, 0.0), ("j2", "b", 0, 8, 6.0, 6.0),
                ("g", "a", 1, 16, 3.0, 0.0)])
    result = replay(sc, tr, Draining(at=1.0, project="a", nodes=2, start=2.0, end=20.0,
                                     job_id="g"))
    j1 = int(tr.index[tr["job_id"] == "j1"][0])
    assert runs(result, j1) == [(0.0, 6.0, "preempted"), (9.0, 23.0, "done")]
    assert nodes_of(tr, result, "g") == [(6.0, 9.0, (0, 1))]
