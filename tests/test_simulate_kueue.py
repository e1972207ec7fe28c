"""``planner-kueue``: the plan replayed through its Kueue export, on tiny traces by hand.

The hand tests fix the plan (:class:`FixedPlan` applies one hand-written plan body at
the start and never replans), so the quotas are known: the Kueue objects are still
built by the exporter's ``period_objects`` and read back by ``quota_trees``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, replace

import pandas as pd
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.config import ContractTerms
from planner.exporters.common import safe_name
from planner.exporters.kueue import (
    POOL,
    RESERVE_NODES,
    SHIPPED,
    KueueExport,
    export_kueue,
    file_name,
    period_objects,
    project_quotas,
)
from planner.simulate.engine import DONE, PREEMPTED, Replay, replay
from planner.simulate.kueue_replay import (
    AS_SHIPPED,
    BORROWED,
    BORROWED_GANG,
    BORROWED_LOW,
    NOMINAL,
    NOMINAL_GANG,
    NOMINAL_LOW,
    STRATEGIES,
    FlavorTree,
    KueueExecutor,
    KueueReplayOptions,
    KueueReplayPolicy,
    QuotaNode,
    quota_trees,
)
from planner.simulate.replanner import Replanner
from planner.simulate.run import make_policy, parse_policies
from tests.test_simulate import Q0, runs, trace
from tests.tiny import scenario

START, END = "2026-10-01T00:00:00Z", "2026-10-05T00:00:00Z"


def hand_plan(nodes: int, grants: dict[str, tuple[float, float]],
              reservations: tuple[tuple[str, int], ...] = ()) -> dict:
    """A plan body on c1 (``nodes`` × 8 GPUs), one 4-day period.

    ``grants``: project → (guaranteed GPUs, opportunistic GPUs); ``reservations``:
    (project, nodes) running through the period.
    """
    allocations = []
    for project, (guaranteed, opportunistic) in sorted(grants.items()):
        for kind, gpus in (("guaranteed", guaranteed), ("opportunistic", opportunistic)):
            if gpus:
                allocations.append({"project": project, "cluster": "c1", "period_start": START,
                                    "gpu_hours": gpus * 96, "kind": kind, "gpus": gpus})
    return {"scenario": "tiny", "as_of": START, "input_digest": "tiny",
            "contract": asdict(ContractTerms()),
            "periods": [{"start": START, "end": END}],
            "clusters": [{"cluster": "c1", "gpu_type": "H100", "nodes": nodes,
                          "gpus_per_node": 8, "rate": 1.0}],
            "allocations": allocations,
            "reservations": [{"request_id": f"r{i}", "project": p, "cluster": "c1",
                              "nodes": n, "start": START, "end": END}
                             for i, (p, n) in enumerate(reservations)]}


#: the replays of a plan by hand: without rule 7's reserve and hourly widening (their
#: own tests replay them), and the variants compared with it
BY_HAND = KueueReplayOptions(late=False)
UNPRIORITISED = replace(BY_HAND, priorities=False)  # every Workload at priority 0
NO_WIDENING = replace(BY_HAND, widens=False)  # the export before rule 6
NO_FAIR_SHARING = replace(BY_HAND, fair_sharing=False)
NO_FAIR_PREEMPTION = replace(BY_HAND, fair_preemption=False)  # the lender's reclaim alone
BOTH_STRATEGIES = replace(BY_HAND, strategies=STRATEGIES)  # Kueue's default strategies


class FixedPlan(Replanner):
    """The Kueue replay of one fixed plan, applied at hour 0 (no solver)."""

    def __init__(self, plan: dict, export: KueueExport = SHIPPED,
                 options: KueueReplayOptions = BY_HAND,
                 executor: type[KueueExecutor] = KueueExecutor) -> None:
        super().__init__(executor(export, options))
        self.plan = plan

    def refresh(self, sim, now: float) -> bool:
        executor = self.executor
        if now > 0:
            return executor._widen_late(sim)  # rule 7, hourly (with late=True)
        executor.apply_first_period(sim, self.plan, START)
        executor.reclass(sim)
        return True


def tiny(org: list[tuple], nodes: int = 1):
    budgets = [(i, 100.0) for i, parent, _ in org if parent]
    return scenario(clusters=[("c1", "H100", nodes, 8)], org=org, budgets=budgets,
                    quarter_start="2026-10-01", quarter_end="2026-10-05", as_of="2026-10-01")


TWO_TEAMS = [("ta", "", 1.0), ("a", "ta", 1.0), ("tb", "", 1.0), ("b", "tb", 1.0)]


def tags(result) -> dict[tuple[int, float], str]:
    return {(s.job, s.start): s.tag for s in result.segments}


# -- a queue within its nominal quota ------------------------------------------------------


def test_grant_capped_export_admits_nothing_beyond_the_quota():
    # The export without fill (fill=False, as shipped before): borrowing capped at the
    # opportunistic grant, flavors only where the plan grants something.
    # One node of 8 GPUs. a: nominal 4, borrowingLimit 0 (guaranteed 4, no
    # opportunistic grant); b: nothing. The pool Cohort holds 8 − 4 = 4.
    # t=0  A1 (a, 4 GPUs, 5 h) fits a's nominal 4: admitted at once, "nominal".
    # t=0  A2 (a, 4 GPUs, 2 h): a's usage 4 + 4 > nominal 4 and it may borrow 0: it
    #      waits, though 4 GPUs are idle (Kueue is not work-conserving past quotas).
    # t=0  B (b, 1 GPU): b's ClusterQueue has no flavor for c1: inadmissible, never runs.
    # t=5  A1 ends; A2 is admitted 5 → 7.
    sc = tiny(TWO_TEAMS)
    tr = trace([("A1", "a", 0, 4, 5.0, 2.0), ("A2", "a", 0, 4, 2.0, 2.0),
                ("B", "b", 0, 1, 1.0, 0.0)])
    result = replay(sc, tr, FixedPlan(hand_plan(1, {"a": (4.0, 0.0)}),
                                      export=KueueExport(fill=False)))
    assert runs(result, 0) == [(0.0, 5.0, DONE)]
    assert runs(result, 1) == [(5.0, 7.0, DONE)]
    assert runs(result, 2) == []
    assert set(tags(result).values()) == {NOMINAL}


def test_fill_lets_a_project_beyond_its_grant_and_one_without_grant_borrow_idle_gpus():
    # The same case with the export's fill (the default): every queue has a flavor on
    # c1 and no borrowingLimit. One node of 8 GPUs. a: nominal 4 (its subtree 4); b:
    # nominal 0; the pool Cohort holds 8 − 4 = 4, the root's subtree quota 8.
    # t=0  A1 (a, 4 GPUs, 5 h) within a's nominal: admitted first ("nominal").
    #      Then A2 (a, 4 GPUs) and B (b, 1 GPU) both need to borrow from the pool's 4.
    #      Tournament at the root: team ta with A2 would borrow 8 − 4 = 4 (share 4 ÷ 8),
    #      tb with B 1 − 0 = 1 (share 1 ÷ 8): B goes first, 0 → 1, borrowed (tagged
    #      "borrowed-unallocated": B is unallocated work); A2 then needs 4 with 3 left: waits.
    # t=1  B ends; A2 borrows the pool's 4: 1 → 3, "borrowed" (beyond a's grant of 4).
    sc = tiny(TWO_TEAMS)
    tr = trace([("A1", "a", 0, 4, 5.0, 2.0), ("A2", "a", 0, 4, 2.0, 2.0),
                ("B", "b", 0, 1, 1.0, 0.0)])
    result = replay(sc, tr, FixedPlan(hand_plan(1, {"a": (4.0, 0.0)})))
    assert runs(result, 0) == [(0.0, 5.0, DONE)]
    assert runs(result, 1) == [(1.0, 3.0, DONE)]
    assert runs(result, 2) == [(0.0, 1.0, DONE)]
    assert tags(result) == {(0, 0.0): NOMINAL, (2, 0.0): BORROWED_LOW, (1, 1.0): BORROWED}


def test_fill_borrowing_beyond_the_grant_is_reclaimed_at_once_by_the_lender():
    # One node of 8. a: nominal 4, no opportunistic grant; b: nominal 4, idle. Pool 0.
    # Fill: a may borrow b's idle 4 though its plan grant is 4 (the capped export: 0).
    # t=0  A1 (a, 4 GPUs, 10 h) nominal; A2 (a, 4 GPUs, 10 h, min runtime 3 h) borrows
    #      b's 4: a's usage 8 > nominal 4, "borrowed".
    # t=2  B (b, 4 GPUs, 2 h) is within b's nominal 4 and the root has 8 − 8 = 0 free:
    #      reclaimWithinCohort Any takes a's excess, A2, at once (hour 2, inside its 3 h
    #      min runtime: Kueue protects none). B 2 → 4 "nominal".
    # t=4  B ends; A2 (resumable, 8 h left) borrows again 4 → 12.
    sc = tiny(TWO_TEAMS)
    tr = trace([("A1", "a", 0, 4, 10.0, 1.0), ("A2", "a", 0, 4, 10.0, 3.0),
                ("B", "b", 2, 4, 2.0, 1.0)])
    plan = hand_plan(1, {"a": (4.0, 0.0), "b": (4.0, 0.0)})
    result = replay(sc, tr, FixedPlan(plan))
    assert runs(result, 0) == [(0.0, 10.0, DONE)]
    assert runs(result, 1) == [(0.0, 2.0, PREEMPTED), (4.0, 12.0, DONE)]
    assert runs(result, 2) == [(2.0, 4.0, DONE)]
    assert tags(result) == {(0, 0.0): NOMINAL, (1, 0.0): BORROWED, (2, 2.0): NOMINAL,
                            (1, 4.0): BORROWED}
    # the grant-capped export: A2 waits for A1 (10 → 20) and B starts at 2 untouched
    capped = replay(sc, tr, FixedPlan(plan, export=KueueExport(fill=False)))
    assert runs(capped, 1) == [(10.0, 20.0, DONE)]
    assert runs(capped, 2) == [(2.0, 4.0, DONE)]
    assert capped.preemptions.sum() == 0


# -- a borrower admitted into idle quota, then reclaimed by the lender -----------------------


def test_a_borrower_is_reclaimed_by_the_lender_at_once():
    # One node of 8 GPUs. a: nominal 0, borrowingLimit 8 (opportunistic 8); b: nominal 8
    # (guaranteed 8), so the pool holds 0 and the root's subtree quota is b's 8.
    # t=0  A (a, 8 GPUs, 10 h, min runtime 3 h): available(a) = root 8 − 0, within its
    #      borrowingLimit 8: admitted, "borrowed-gang" (a's usage 8 > nominal 0; a
    #      whole node of allocated work: gpu-planner-budget-gang).
    # t=1  B (b, 4 GPUs, 2 h): b's usage 0 + 4 ≤ nominal 8, but the root has 8 − 8 = 0
    #      free: reclaimWithinCohort Any preempts the borrower. Kueue has no min
    #      runtime, so A goes at 1, not at 3 (the `quota` policy would wait for 3).
    #      B runs 1 → 3 "nominal".
    # t=1  A (resumable, 9 h left) needs 8; available(a) = 8 − 4 = 4: waits.
    # t=3  B ends; A is re-admitted 3 → 12.
    sc = tiny(TWO_TEAMS)
    tr = trace([("A", "a", 0, 8, 10.0, 3.0), ("B", "b", 1, 4, 2.0, 1.0)])
    result = replay(sc, tr, FixedPlan(hand_plan(1, {"a": (0.0, 8.0), "b": (8.0, 0.0)})))
    assert runs(result, 0) == [(0.0, 1.0, PREEMPTED), (3.0, 12.0, DONE)]
    assert runs(result, 1) == [(1.0, 3.0, DONE)]
    assert tags(result) == {(0, 0.0): BORROWED_GANG, (1, 1.0): NOMINAL, (0, 3.0): BORROWED_GANG}
    assert result.protected_violations == 0


def test_reclaim_takes_only_the_borrowed_excess():
    # One node of 8. a: nominal 4, borrowingLimit 4; b: nominal 4. Pool 0.
    # t=0  A1 (a, 4 GPUs, 10 h) nominal; A2 (a, 4 GPUs, 10 h, admitted after A1)
    #      borrows b's idle 4: a's usage 8 > nominal 4.
    # t=1  B (b, 4 GPUs, 2 h) reclaims: only a's excess (4 GPUs, the most recently
    #      admitted: A2) is borrowed; A1 within a's nominal is never taken.
    #      B 1 → 3; A2 back 3 → 12 (resumable, 9 h left).
    sc = tiny(TWO_TEAMS)
    tr = trace([("A1", "a", 0, 4, 10.0, 1.0), ("A2", "a", 0, 4, 10.0, 1.0),
                ("B", "b", 1, 4, 2.0, 1.0)])
    result = replay(sc, tr, FixedPlan(hand_plan(1, {"a": (4.0, 4.0), "b": (4.0, 0.0)})))
    assert runs(result, 0) == [(0.0, 10.0, DONE)]
    assert runs(result, 1) == [(0.0, 1.0, PREEMPTED), (3.0, 12.0, DONE)]
    assert runs(result, 2) == [(1.0, 3.0, DONE)]


# -- WorkloadPriorityClasses: budget work above unallocated work ------------------------------


def test_budget_work_preempts_its_own_queues_unallocated_work():
    # One node of 8. a: nominal 8 (guaranteed 8); b: nothing. Pool 0.
    # t=0  U (a, 8 GPUs, 6 h, min runtime 0: unallocated, class gpu-planner-unallocated,
    #      priority 0) fits a's nominal: admitted "nominal".
    # t=1  A (a, 8 GPUs, 3 h, allocated, a whole node: gpu-planner-budget-gang, 1100) fits
    #      neither the quota nor the node. withinClusterQueue: LowerPriority: its queue's
    #      own U (priority 0 < 1100) is the candidate; preempting it makes A fit: U
    #      preempted at 1, A 1 → 4.
    # t=4  U (resumable, 5 h left) back 4 → 9.
    # Without the classes (every workload priority 0) A waits for U: 6 → 9, U 0 → 6.
    sc = tiny(TWO_TEAMS)
    tr = trace([("U", "a", 0, 8, 6.0, 0.0), ("A", "a", 1, 8, 3.0, 2.0)])
    plan = hand_plan(1, {"a": (8.0, 0.0)})
    result = replay(sc, tr, FixedPlan(plan))
    assert runs(result, 0) == [(0.0, 1.0, PREEMPTED), (4.0, 9.0, DONE)]  # U
    assert runs(result, 1) == [(1.0, 4.0, DONE)]  # A
    assert tags(result) == {(0, 0.0): NOMINAL_LOW, (1, 1.0): NOMINAL_GANG,
                            (0, 4.0): NOMINAL_LOW}
    equal = replay(sc, tr, FixedPlan(plan, options=UNPRIORITISED))
    assert runs(equal, 0) == [(0.0, 6.0, DONE)]
    assert runs(equal, 1) == [(6.0, 9.0, DONE)]
    assert set(tags(equal).values()) == {NOMINAL}


def test_a_queue_admits_its_budget_work_before_earlier_unallocated_work():
    # One node of 8. a: nominal 8. X (allocated, 8 GPUs, 2 h) runs 0 → 2.
    # t=0.5 U (unallocated, 8 GPUs, 1 h) and t=1 A (allocated, 8 GPUs, 1 h) wait: U cannot
    #      preempt X (priority 0 < 1000), nor A (equal priority).
    # t=2  X ends: BestEffortFIFO takes the higher priority first: A 2 → 3, then U 3 → 4.
    # Without the classes, submit order: U 2 → 3, A 3 → 4.
    sc = tiny(TWO_TEAMS)
    tr = trace([("X", "a", 0, 8, 2.0, 1.0), ("U", "a", 0.5, 8, 1.0, 0.0),
                ("A", "a", 1, 8, 1.0, 1.0)])
    plan = hand_plan(1, {"a": (8.0, 0.0)})
    result = replay(sc, tr, FixedPlan(plan))
    assert runs(result, 0) == [(0.0, 2.0, DONE)]
    assert runs(result, 1) == [(3.0, 4.0, DONE)]  # U
    assert runs(result, 2) == [(2.0, 3.0, DONE)]  # A
    assert result.preemptions.sum() == 0
    equal = replay(sc, tr, FixedPlan(plan, options=UNPRIORITISED))
    assert runs(equal, 1) == [(2.0, 3.0, DONE)]
    assert runs(equal, 2) == [(3.0, 4.0, DONE)]


def test_a_lender_reclaims_a_borrowers_unallocated_work_before_its_budget_work():
    # One node of 8. a: nominal 8 (guaranteed 8); b: nominal 0 (a fill flavor). Pool 0.
    # t=0   BU (b, 4 GPUs, 10 h, unallocated) borrows a's idle GPUs: "borrowed-unallocated".
    # t=0.5 BA (b, 4 GPUs, 10 h, allocated) borrows too: "borrowed" (b's usage 8 > 0).
    # t=1   A (a, 4 GPUs, 2 h) is within a's nominal 8 and the root has 8 − 8 = 0 free:
    #       reclaimWithinCohort Any, candidates of the borrowing queue b lowest priority
    #       first: BU is preempted, not BA (which, admitted last, would go first among
    #       equal priorities). A 1 → 3; BU (resumable, 9 h left) back 3 → 12.
    # Without the classes the most recently admitted goes: BA.
    sc = tiny(TWO_TEAMS)
    tr = trace([("BU", "b", 0, 4, 10.0, 0.0), ("BA", "b", 0.5, 4, 10.0, 1.0),
                ("A", "a", 1, 4, 2.0, 1.0)])
    plan = hand_plan(1, {"a": (8.0, 0.0)})
    result = replay(sc, tr, FixedPlan(plan))
    assert runs(result, 0) == [(0.0, 1.0, PREEMPTED), (3.0, 12.0, DONE)]  # BU
    assert runs(result, 1) == [(0.5, 10.5, DONE)]  # BA
    assert runs(result, 2) == [(1.0, 3.0, DONE)]  # A
    assert tags(result)[(0, 0.0)] == BORROWED_LOW and tags(result)[(1, 0.5)] == BORROWED
    equal = replay(sc, tr, FixedPlan(plan, options=UNPRIORITISED))
    assert runs(equal, 0) == [(0.0, 10.0, DONE)]
    assert runs(equal, 1) == [(0.5, 1.0, PREEMPTED), (3.0, 12.5, DONE)]


def test_a_lender_reclaims_a_borrowers_smaller_budget_work_before_its_gang():
    # Two nodes of 8. a: nominal 16 (guaranteed 16); b: nominal 0 (a fill flavor). Pool 0.
    # t=0   BS (b, 4 GPUs, 10 h, allocated: gpu-planner-budget, 1000) borrows a's idle
    #       GPUs on node 0: "borrowed".
    # t=0.5 BG (b, 8 GPUs, 10 h, allocated, a whole node: gpu-planner-budget-gang, 1100)
    #       borrows node 1: "borrowed-gang" (b's usage 12 > 0).
    # t=1   A (a, 8 GPUs, 2 h) is within a's nominal 16, and the root has 16 − 12 = 4
    #       free: reclaimWithinCohort Any takes the borrowing queue b's candidates lowest
    #       priority first: BS, though BG was admitted later (and, among equal
    #       priorities, would go first). Preempting BS leaves 8 of quota and empties
    #       node 0: A 1 → 3 there. BS (resumable, 9 h left) back 3 → 12; BG runs on.
    # Without the classes the most recently admitted goes: BG (its 8 GPUs restart), and
    # A runs on node 1.
    sc = tiny(TWO_TEAMS, nodes=2)
    tr = trace([("BS", "b", 0, 4, 10.0, 1.0), ("BG", "b", 0.5, 8, 10.0, 1.0),
                ("A", "a", 1, 8, 2.0, 1.0)])
    plan = hand_plan(2, {"a": (16.0, 0.0)})
    result = replay(sc, tr, FixedPlan(plan))
    assert runs(result, 0) == [(0.0, 1.0, PREEMPTED), (3.0, 12.0, DONE)]  # BS
    assert runs(result, 1) == [(0.5, 10.5, DONE)]  # BG
    assert runs(result, 2) == [(1.0, 3.0, DONE)]  # A
    assert tags(result) == {(0, 0.0): BORROWED, (1, 0.5): BORROWED_GANG,
                            (2, 1.0): NOMINAL_GANG, (0, 3.0): BORROWED}
    equal = replay(sc, tr, FixedPlan(plan, options=UNPRIORITISED))
    assert runs(equal, 0) == [(0.0, 10.0, DONE)]
    assert runs(equal, 1) == [(0.5, 1.0, PREEMPTED), (3.0, 12.5, DONE)]


def test_a_gang_preempts_its_own_queues_smaller_budget_work():
    # One node of 8. a: nominal 8 (guaranteed 8); b: nothing. Pool 0.
    # t=0  S (a, 4 GPUs, 10 h, allocated: gpu-planner-budget, 1000) within a's nominal:
    #      "nominal".
    # t=1  G (a, 8 GPUs, 3 h, allocated, a whole node: gpu-planner-budget-gang, 1100)
    #      fits neither a's quota (8 − 4) nor the node. withinClusterQueue: LowerPriority:
    #      its queue's own S (1000 < 1100) is the candidate, and preempting it makes G fit:
    #      S preempted at 1, G 1 → 4; S (resumable, 9 h left) back 4 → 13.
    # Without the classes G waits for S: 10 → 13.
    sc = tiny(TWO_TEAMS)
    tr = trace([("S", "a", 0, 4, 10.0, 1.0), ("G", "a", 1, 8, 3.0, 1.0)])
    plan = hand_plan(1, {"a": (8.0, 0.0)})
    result = replay(sc, tr, FixedPlan(plan))
    assert runs(result, 0) == [(0.0, 1.0, PREEMPTED), (4.0, 13.0, DONE)]  # S
    assert runs(result, 1) == [(1.0, 4.0, DONE)]  # G
    assert tags(result) == {(0, 0.0): NOMINAL, (1, 1.0): NOMINAL_GANG, (0, 4.0): NOMINAL}
    equal = replay(sc, tr, FixedPlan(plan, options=UNPRIORITISED))
    assert runs(equal, 0) == [(0.0, 10.0, DONE)]
    assert runs(equal, 1) == [(10.0, 13.0, DONE)]


def test_a_head_that_cannot_preempt_its_own_queue_lets_the_next_workload_in():
    # One node of 8. a: nominal 4, b: nominal 4. Pool 0.
    # t=0  U (a, 2 GPUs, 10 h, unallocated: priority 0) and B (b, 4 GPUs, 5 h, allocated)
    #      within their nominal quotas; 2 GPUs idle.
    # t=1  G (a, 8 GPUs, 2 h, a gang: 1100) heads a's queue and fits neither quota nor
    #      node. withinClusterQueue: LowerPriority: its queue's U is the only candidate,
    #      and even without U the node holds B's 4: G cannot be admitted. Kueue sets an
    #      inadmissible head aside and tries the queue's next workload: S (a, 2 GPUs, 3 h,
    #      1000) fits a's quota (2 + 2 of 4) and the idle GPUs: S 1 → 4.
    # t=5  B ends; G preempts U (its own queue's, lower priority): G 5 → 7, U (5 h left)
    #      7 → 12.
    # Before this was replayed, S waited behind G until 7, its 2 GPUs idle 1 → 4.
    sc = tiny(TWO_TEAMS)
    tr = trace([("U", "a", 0, 2, 10.0, 0.0), ("B", "b", 0, 4, 5.0, 1.0),
                ("G", "a", 1, 8, 2.0, 1.0), ("S", "a", 1, 2, 3.0, 1.0)])
    result = replay(sc, tr, FixedPlan(hand_plan(1, {"a": (4.0, 0.0), "b": (4.0, 0.0)})))
    assert runs(result, 0) == [(0.0, 5.0, DONE)]  # B (jobs by submit, then id)
    assert runs(result, 1) == [(0.0, 5.0, PREEMPTED), (7.0, 12.0, DONE)]  # U
    assert runs(result, 2) == [(5.0, 7.0, DONE)]  # G
    assert runs(result, 3) == [(1.0, 4.0, DONE)]  # S
    assert tags(result)[(3, 1.0)] == NOMINAL


def test_rule_5_a_lender_reclaims_the_guaranteed_work_of_a_project_ahead_of_its_pace():
    # Two nodes of 8. Team t1 holds a and c, team tb holds b. The plan guarantees a 8 and
    # b 8 GPUs; c nothing. At as_of (= quarter start: no share of the quarter gone) a has
    # used 50 of its 100: ahead of its pace (rule 5), so the export gives a's queue no
    # nominal quota (its 8 GPUs go to the pool) and a's work borrows. Pace weights: a
    # 50 ÷ 96 h, b and c 100 ÷ 96 h.
    # t=0  A1 (a, 8 GPUs, 10 h) and C1 (c, 8 GPUs, 10 h) both borrow (the pool's 8 and
    #      b's idle 8).
    # t=1  B (b, 8 GPUs, 2 h) is within b's nominal 8 and nothing is free: reclaim takes
    #      the borrowing queue with the highest share first. In t1, a's share (8 ÷ 50)
    #      is above c's (8 ÷ 100): A1 is preempted, B 1 → 3, A1 (resumable, 9 h left)
    #      back 3 → 12; C1 runs 0 → 10.
    # Without rule 5 (takes_back=False) A1 sits within a's nominal 8 and is never
    # reclaimed: the borrower C1 goes instead (back 3 → 12).
    org = [("t1", "", 1.0), ("a", "t1", 1.0), ("c", "t1", 1.0), ("tb", "", 1.0),
           ("b", "tb", 1.0)]
    sc = tiny(org, nodes=2)
    plan = hand_plan(2, {"a": (8.0, 0.0), "b": (8.0, 0.0)}) | {
        "quarter_start": START, "quarter_end": END,
        "budgets": [{"project": "a", "budget": 100.0, "used": 50.0},
                    {"project": "b", "budget": 100.0, "used": 0.0},
                    {"project": "c", "budget": 100.0, "used": 0.0}]}
    tr = trace([("A1", "a", 0, 8, 10.0, 1.0), ("C1", "c", 0, 8, 10.0, 1.0),
                ("B", "b", 1, 8, 2.0, 1.0)])
    rows = {j: i for i, j in enumerate(tr["job_id"])}
    nominal = {o["metadata"]["name"]: o["spec"]["resourceGroups"][0]["flavors"][0]
               ["resources"][0]["nominalQuota"]
               for o in period_objects(plan, sc.tree, START, END) if o["kind"] == "ClusterQueue"}
    assert nominal == {"a": 0, "b": 8, "c": 0}
    result = replay(sc, tr, FixedPlan(plan))
    assert runs(result, rows["A1"]) == [(0.0, 1.0, PREEMPTED), (3.0, 12.0, DONE)]
    assert runs(result, rows["C1"]) == [(0.0, 10.0, DONE)]
    assert runs(result, rows["B"]) == [(1.0, 3.0, DONE)]
    kept = replay(sc, tr, FixedPlan(plan, export=KueueExport(takes_back=False)))
    assert runs(kept, rows["A1"]) == [(0.0, 10.0, DONE)]
    assert runs(kept, rows["C1"]) == [(0.0, 1.0, PREEMPTED), (3.0, 12.0, DONE)]
    assert runs(kept, rows["B"]) == [(1.0, 3.0, DONE)]


class ReappliedPlan(FixedPlan):
    """:class:`FixedPlan`, applied again at each hour of ``hours`` (a cycle re-run on it)."""

    def __init__(self, plan: dict, hours: tuple[float, ...],
                 options: KueueReplayOptions = BY_HAND) -> None:
        super().__init__(plan, options=options)
        self.hours = hours

    def refresh(self, sim, now: float) -> bool:
        if not any(abs(now - h) < 1e-9 for h in self.hours):
            return False
        self.executor.apply_first_period(sim, self.plan, START)
        self.executor.reclass(sim)
        return True


def test_rule_6_a_pending_gang_widens_its_queues_nominal_quota_and_reclaims_a_node():
    # Two nodes of 8, one team t holding a and b. The plan guarantees a 2 GPUs, b
    # nothing: the pool holds 14. Both are behind their pace with budget left (nothing
    # used at the quarter's start); pace weights a 100 ÷ 96 h, b 1,000 ÷ 96 h.
    # t=0    B1, B2 (b, unallocated, 8 GPUs, 10 h) borrow both nodes (the pool's 14 and a's
    #        idle 2).
    # t=0.5  G (a, allocated, 8 GPUs: a gang of one node, 3 h) is beyond a's nominal 2 and
    #        nothing is free. It may not reclaim (it is not within its nominal quota), and
    #        Fair Sharing's preemption does not pass: a's share with G, 6 ÷ 16 ÷ 1.04 =
    #        0.36, is above b's without a B job, 8 ÷ 16 ÷ 10.4 = 0.048. G waits.
    # t=1    the plan is applied again (as the next cycle would) with G pending: rule 6
    #        widens a's nominal quota to 8 (6 more, out of the pool's 14). G is now within
    #        its nominal quota and reclaims a node from the borrower b: G 1 → 4; the B job
    #        taken (resumable, 9 h left) is back 4 → 13.
    # Without the widening (widens=False) G waits for a B job to end: 10 → 13.
    org = [("t", "", 1.0), ("a", "t", 1.0), ("b", "t", 1.0)]
    sc = tiny(org, nodes=2)
    plan = hand_plan(2, {"a": (2.0, 0.0)}) | {
        "quarter_start": START, "quarter_end": END,
        "budgets": [{"project": "a", "budget": 100.0, "used": 0.0},
                    {"project": "b", "budget": 1000.0, "used": 0.0}]}
    tr = trace([("B1", "b", 0, 8, 10.0, 0.0), ("B2", "b", 0, 8, 10.0, 0.0),
                ("G", "a", 0.5, 8, 3.0, 1.0)])
    rows = {j: i for i, j in enumerate(tr["job_id"])}
    wide = replay(sc, tr, ReappliedPlan(plan, (0.0, 1.0)))
    assert runs(wide, rows["G"]) == [(1.0, 4.0, DONE)]
    taken = [runs(wide, rows[b]) for b in ("B1", "B2")]
    assert sorted(taken) == [[(0.0, 1.0, PREEMPTED), (4.0, 13.0, DONE)], [(0.0, 10.0, DONE)]]
    assert tags(wide)[(rows["G"], 1.0)] == NOMINAL_GANG
    plain = replay(sc, tr, ReappliedPlan(plan, (0.0, 1.0), NO_WIDENING))
    assert runs(plain, rows["G"]) == [(10.0, 13.0, DONE)]
    assert [runs(plain, rows[b]) for b in ("B1", "B2")] == [[(0.0, 10.0, DONE)]] * 2


# -- a reservation: nominal quota with a lendingLimit -----------------------------------------


def test_rule_7_a_late_gang_gets_the_reserve_and_reclaims_a_node_within_the_hour():
    # Ten nodes of 8 (80 GPUs). The plan grants a all 80 as guaranteed; b nothing (its
    # work arrives after the plan). Rule 7 (late=True): the pool keeps one node of the
    # ten (at most one in ten), cut from the largest nominal quota: a 72, the pool 8.
    # t=0   A1..A10 (a, 8 GPUs each, 10 h, resumable; rows in job-id order A1, A10, A2,
    #       ..., A9): nine within a's 72, the last admitted, A9, borrows the pool's 8
    #       ("borrowed-gang").
    # t=1.5 B (b, an 8-GPU gang, 2 h) arrives: b has no nominal quota, the cluster is
    #       full, and b's share with B (8 ÷ 80 ÷ b's pace weight 1000/96) is above a's
    #       without its borrowed job (0): Fair Sharing takes nothing.
    # t=2   the hourly step: b's queue holds no nominal quota and B pends, so the pool's
    #       8 GPUs become b's nominal quota; B is within it and reclaims a's borrowed A9
    #       (preempted at 2): B runs 2 → 4, "nominal-gang". b keeps the quota until the
    #       next replan, lent: A9 borrows it again at 4 and resumes its 8 h left: 4 → 12.
    # Without rule 7 (late=False) the pool keeps nothing, a holds all 80, and B waits
    # for a node: 10 → 12.
    sc = tiny(TWO_TEAMS, nodes=10)
    plan = hand_plan(10, {"a": (80.0, 0.0)}) | {  # budgets: both may widen (rule 6's test)
        "quarter_start": START, "quarter_end": END,
        "budgets": [{"project": "a", "budget": 10000.0, "used": 0.0},
                    {"project": "b", "budget": 1000.0, "used": 0.0}]}
    rows = [(f"A{i}", "a", 0, 8, 10.0, 1.0) for i in range(1, 11)]
    tr = trace(rows + [("B", "b", 1.5, 8, 2.0, 1.0)])
    at = {j: i for i, j in enumerate(tr["job_id"])}
    late = replay(sc, tr, FixedPlan(plan, options=AS_SHIPPED))
    assert runs(late, at["B"]) == [(2.0, 4.0, DONE)]
    assert tags(late)[(at["B"], 2.0)] == NOMINAL_GANG
    assert late.preemptions.sum() == 1
    assert runs(late, at["A9"]) == [(0.0, 2.0, PREEMPTED), (4.0, 12.0, DONE)]
    assert all(runs(late, at[f"A{i}"]) == [(0.0, 10.0, DONE)] for i in range(1, 9))
    before = replay(sc, tr, FixedPlan(plan))
    assert runs(before, at["B"]) == [(10.0, 12.0, DONE)]
    assert before.preemptions.sum() == 0


def test_lending_limit_keeps_the_reserved_gpus():
    # Two nodes, 16 GPUs. The plan reserves one node (8 GPUs) for b through the period:
    # b's queue gets nominal 8, lendingLimit 0 (guaranteed 8, lent to nobody). a has an
    # opportunistic grant of 16 (borrowingLimit 16, nominal 0). The pool holds 16 − 8.
    # t=0  A1 (a, 8 GPUs, 10 h): the root's subtree quota is the pool's 8 + b's lendable
    #      0 = 8: admitted, borrowed. A2 (a, 8 GPUs, 2 h): root 8 − 8 = 0: waits,
    #      though a whole node is idle (the reserved one).
    # t=5  Bj (b, 8 GPUs, 3 h) starts at once on the kept node, preempting nobody.
    # t=8  Bj ends. t=10  A1 ends; A2 10 → 12.
    sc = tiny(TWO_TEAMS, nodes=2)
    plan = hand_plan(2, {"a": (0.0, 16.0)}, reservations=(("b", 1),))
    objects = period_objects(plan, sc.tree, START, END)
    (queue_b,) = [o for o in objects if o["kind"] == "ClusterQueue"
                  and o["metadata"]["name"] == "b"]
    assert queue_b["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0] == {
        "name": "nvidia.com/gpu", "nominalQuota": 8, "lendingLimit": 0}
    tr = trace([("A1", "a", 0, 8, 10.0, 1.0), ("A2", "a", 0, 8, 2.0, 1.0),
                ("Bj", "b", 5, 8, 3.0, 1.0)])
    result = replay(sc, tr, FixedPlan(plan))
    assert runs(result, 0) == [(0.0, 10.0, DONE)]
    assert runs(result, 1) == [(10.0, 12.0, DONE)]
    assert runs(result, 2) == [(5.0, 8.0, DONE)]
    assert result.preemptions.sum() == 0


def test_a_planned_reservation_reaches_the_replay_through_the_solver():
    # The scenario asks for one node for b for 48 h in the 4 days; with
    # reservation_requests=True the replans keep the request, the plan places it (days
    # 3–4) and the export turns it into b's quota with lendingLimit = nominal − 8 on the
    # cluster: the replay's tree keeps those 8 GPUs for b (guaranteed, never lent).
    sc = scenario(clusters=[("c1", "H100", 2, 8)], org=TWO_TEAMS,
                  budgets=[("a", 500.0), ("b", 2000.0)],
                  reservations=[("r1", "b", "c1", 1, 48.0, "2026-10-01", "2026-10-05")],
                  quarter_start="2026-10-01", quarter_end="2026-10-05", as_of="2026-10-01")
    tr = trace([("A", "a", 0, 8, 30.0, 1.0), ("B", "b", 0, 8, 30.0, 1.0)])
    seen = []

    class Recording(KueueExecutor):
        def apply_first_period(self, sim, body, first):
            super().apply_first_period(sim, body, first)
            seen.append((first, body["reservations"], self.objects,
                         self.trees[0].nodes["b"].guaranteed))

    replay(sc, tr, Replanner(Recording(), reservation_requests=True))
    assert [(r["request_id"], r["nodes"]) for r in seen[0][1]] == [("r1", 1)]
    # the replans whose first period the reservation runs in (days 3 and 4 here)
    running = [s for s in seen if any(r["start"] <= s[0] < r["end"] for r in s[1])]
    assert len(running) == 2
    first, reservations, objects, kept = running[0]
    (queue_b,) = [o for o in objects if o["kind"] == "ClusterQueue"
                  and o["metadata"]["name"] == "b"]
    resource = queue_b["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert resource["lendingLimit"] == resource["nominalQuota"] - 8
    assert kept == 8


# -- the cohort hierarchy decides who borrows first ---------------------------------------


def test_fair_sharing_tournament_goes_down_the_cohort_tree():
    # One node of 8, nobody holds nominal quota: the pool owns all 8 and every queue may
    # borrow 8. Areas X (queues x1, x2) and Y (queue y1), weights 1.
    # t=0  X1 (x1, 3 GPUs) and Y1 (y1, 2 GPUs) are admitted (long jobs): 3 GPUs free.
    # t=1  X2 (x2, 2 GPUs) and Y2 (y1, 2 GPUs) arrive together; one fits.
    #      Tournament at the root: X with X2 would borrow 3 + 2 = 5, Y with Y2 2 + 2 = 4
    #      (÷ the root's 8, weights 1): Y wins, Y2 runs 1 → 3. A flat order by the
    #      queues' own shares would pick x2 (2 borrowed against y1's 4).
    # t=3  Y2 ends; X2 runs 3 → 5.
    org = [("X", "", 1.0), ("x1", "X", 1.0), ("x2", "X", 1.0), ("Y", "", 1.0),
           ("y1", "Y", 1.0)]
    sc = tiny(org)
    plan = hand_plan(1, {"x1": (0.0, 8.0), "x2": (0.0, 8.0), "y1": (0.0, 8.0)})
    tr = trace([("X1", "x1", 0, 3, 20.0, 1.0), ("Y1", "y1", 0, 2, 20.0, 1.0),
                ("X2", "x2", 1, 2, 2.0, 1.0), ("Y2", "y1", 1, 2, 2.0, 1.0)])
    rows = {j: i for i, j in enumerate(tr["job_id"])}
    # X2 preempts nobody under LessThanOrEqualToFinalShare (the exported configuration):
    # inside X, x2's share with X2 would be 2 ÷ 8 (what X could lend: the root's 8), x1's
    # without X1 0. Kueue's default strategies add LessThanInitialShare, under which x2's
    # 2 ÷ 8 < x1's 3 ÷ 8 lets X2 take X1's GPUs at 1 (X1 restarts when X2 ends).
    result = replay(sc, tr, FixedPlan(plan))
    assert runs(result, rows["Y2"]) == [(1.0, 3.0, DONE)]
    assert runs(result, rows["X2"]) == [(3.0, 5.0, DONE)]
    both = replay(sc, tr, FixedPlan(plan, options=BOTH_STRATEGIES))
    assert runs(both, rows["X2"]) == [(1.0, 3.0, DONE)]
    assert runs(both, rows["X1"])[0] == (0.0, 1.0, PREEMPTED)
    # without fair sharing Kueue orders by submit time alone: X2 (earlier row) first
    flat = replay(sc, tr, FixedPlan(plan, options=NO_FAIR_SHARING))
    assert runs(flat, rows["X2"]) == [(1.0, 3.0, DONE)]


def test_a_share_sums_the_borrowing_over_every_flavor():
    # Kueue computes a queue's (and a Cohort's) dominant resource share over every flavor
    # of the resource: what it borrows on all of them ÷ what its parent could lend on all
    # of them (calculateLendable) ÷ weight. Two clusters c1 and c2, one node of 8 each;
    # nobody holds nominal quota (the pool owns 8 + 8 = 16); teams ta (a) and tb (b).
    # t=0  A1 (a, 8 GPUs on c2, 20 h) borrows c2's node; B1 (b, 4 GPUs on c1, 20 h)
    #      borrows half of c1's.
    # t=1  A2 (a, 4 on c1) and B2 (b, 4 on c1) arrive together; one fits. Tournament at
    #      the root: ta with A2 would borrow 8 (c2) + 4 (c1) = 12 ÷ 16 = 0.75, tb with B2
    #      4 + 4 = 8 ÷ 16 = 0.5: B2 runs 1 → 3. (Counting c1 alone, as the replay did
    #      before, ta's 4 against tb's 8: A2 would have gone first.) A2 preempts nobody:
    #      a's 0.75 with it is above b's 0.25 without either of b's jobs.
    # t=3  B2 ends; A2 runs 3 → 5.
    clusters = [{"cluster": c, "gpu_type": "H100", "nodes": 1, "gpus_per_node": 8,
                 "rate": 1.0} for c in ("c1", "c2")]
    plan = hand_plan(1, {}) | {"clusters": clusters}
    sc = scenario(clusters=[("c1", "H100", 1, 8), ("c2", "H100", 1, 8)], org=TWO_TEAMS,
                  budgets=[("a", 100.0), ("b", 100.0)], quarter_start="2026-10-01",
                  quarter_end="2026-10-05", as_of="2026-10-01")
    tr = trace([("A1", "a", 0, 8, 20.0, 1.0), ("B1", "b", 0, 4, 20.0, 1.0),
                ("A2", "a", 1, 4, 2.0, 1.0), ("B2", "b", 1, 4, 2.0, 1.0)])
    tr.loc[tr["job_id"] == "A1", "cluster"] = "c2"
    rows = {j: i for i, j in enumerate(tr["job_id"])}
    result = replay(sc, tr, FixedPlan(plan))
    assert runs(result, rows["A1"]) == [(0.0, 20.0, DONE)]
    assert runs(result, rows["B1"]) == [(0.0, 20.0, DONE)]
    assert runs(result, rows["B2"]) == [(1.0, 3.0, DONE)]
    assert runs(result, rows["A2"]) == [(3.0, 5.0, DONE)]
    objects = period_objects(plan, sc.tree, START, END)
    trees, _, _ = quota_trees(objects)
    assert {c: t.lendable[POOL] for c, t in trees.items()} == {"c1": 16, "c2": 16}
    # a Kueue per cluster (the per-cluster export, above 64 clusters): each its own
    trees, _, _ = quota_trees(objects, one_kueue=False)
    assert {c: t.lendable[POOL] for c, t in trees.items()} == {"c1": 8, "c2": 8}


def test_fair_sharing_preemption_lets_a_lower_share_gang_take_a_node_from_a_borrower():
    # Two nodes of 8, nobody holds nominal quota (the pool owns 16); teams ta (a) and tb
    # (b), org weights 1, so shares are borrowed GPUs ÷ 16 at the root.
    # t=0  B1, B2, B3 (b, 4 GPUs each, 20 h, not resumable) are admitted: best fit puts
    #      B1 and B2 on node 0, B3 on node 1; 4 GPUs idle on node 1.
    # t=1  A (a, an 8-GPU gang, 2 h) needs a whole node: none is free. a borrows (nominal
    #      0), so the lender's reclaim does not apply; Fair Sharing's preemption does.
    #      a's share with A: 8 ÷ 16 = 0.5; b's: 12 ÷ 16 = 0.75, and 8 ÷ 16 = 0.5 without
    #      one 4-GPU job: LessThanOrEqualToFinalShare (0.5 ≤ 0.5) makes b's most recently
    #      started job a target. The engine's order offers B3 first (same start, last
    #      row); without it node 1 is whole: A runs 1 → 3 on it, B3 is preempted at 1.
    #      B3 cannot take it back: b's share with B3 would be 0.75, a's 0.5.
    # t=3  A ends; B3 restarts 3 → 23 (20 h from scratch).
    # Without the preemption (the replay before, fair_preemption=False) A waits for a
    # node to empty: 20 → 22. The runner-up case: with a's own 4-GPU job A0 on node 1
    # instead of B3, a's share with the gang would be 12 ÷ 16 = 0.75 against b's 0.5:
    # no strategy passes, and A waits to 20 under both.
    sc = tiny(TWO_TEAMS, nodes=2)
    plan = hand_plan(2, {})
    tr = trace([("B1", "b", 0, 4, 20.0, 1.0, False), ("B2", "b", 0, 4, 20.0, 1.0, False),
                ("B3", "b", 0, 4, 20.0, 1.0, False), ("A", "a", 1, 8, 2.0, 1.0)])
    rows = {j: i for i, j in enumerate(tr["job_id"])}
    fair = replay(sc, tr, FixedPlan(plan))
    assert runs(fair, rows["A"]) == [(1.0, 3.0, DONE)]
    assert runs(fair, rows["B3"]) == [(0.0, 1.0, PREEMPTED), (3.0, 23.0, DONE)]
    assert runs(fair, rows["B1"]) == [(0.0, 20.0, DONE)]
    assert runs(fair, rows["B2"]) == [(0.0, 20.0, DONE)]
    assert fair.lost_gpu_hours[rows["B3"]] == 4.0
    before = replay(sc, tr, FixedPlan(plan, options=NO_FAIR_PREEMPTION))
    assert runs(before, rows["A"]) == [(20.0, 22.0, DONE)]
    own = trace([("B1", "b", 0, 4, 20.0, 1.0, False), ("B2", "b", 0, 4, 20.0, 1.0, False),
                 ("A0", "a", 0, 4, 20.0, 1.0, False), ("A", "a", 1, 8, 2.0, 1.0)])
    rows = {j: i for i, j in enumerate(own["job_id"])}
    kept = replay(sc, own, FixedPlan(plan))
    assert runs(kept, rows["A"]) == [(20.0, 22.0, DONE)]
    assert kept.preemptions.sum() == 0


def test_within_one_team_the_tournament_compares_the_queues_and_pace_weights_decide():
    # One node of 8, nobody holds nominal quota (the pool owns 8). Team t holds a (org
    # weight 2) and b (weight 1). t=0  A1 (a, 4 GPUs, 20 h) borrows 4.
    # t=1  A2 (a, 1 GPU, 2 h) and B (b, 4 GPUs, 2 h) arrive together; 4 GPUs are free,
    #      so whichever goes first leaves the other waiting. Both are in t: t's own
    #      share is not compared (it is one subtree); inside t, a with A2 would borrow 5
    #      ÷ 8 (what t could lend: the root's 8) ÷ 2, b with B 4 ÷ 8 ÷ 1: a wins,
    #      A2 1 → 3, then B 3 → 5.
    # With weights="pace" from the plan's budgets (a: 100 − 100 spent → weight 0, an
    # infinite share; b: 100 ÷ 96 h left), b wins: B 1 → 3, A2 3 → 5. (a, 100 used of
    # 100 at the quarter's start, is overdrawn, so rule 8 puts its queue in the pool with
    # weight 0 whatever the weights: the org-weight order is the export's before the rule.)
    org = [("t", "", 1.0), ("a", "t", 2.0), ("b", "t", 1.0)]
    sc = tiny(org)
    plan = hand_plan(1, {"a": (0.0, 0.0)}) | {
        "quarter_start": START, "quarter_end": END,
        "budgets": [{"project": "a", "budget": 100.0, "used": 100.0},
                    {"project": "b", "budget": 100.0, "used": 0.0}]}
    tr = trace([("A1", "a", 0, 4, 20.0, 1.0), ("A2", "a", 1, 1, 2.0, 1.0),
                ("B", "b", 1, 4, 2.0, 1.0)])
    rows = {j: i for i, j in enumerate(tr["job_id"])}
    before_rule_8 = KueueExport(weights="org", overdrawn_at_pool=False)
    by_org = replay(sc, tr, FixedPlan(plan, export=before_rule_8))
    assert runs(by_org, rows["A2"]) == [(1.0, 3.0, DONE)]
    assert runs(by_org, rows["B"]) == [(3.0, 5.0, DONE)]
    by_pace = replay(sc, tr, FixedPlan(plan))  # the default
    assert runs(by_pace, rows["B"]) == [(1.0, 3.0, DONE)]
    assert runs(by_pace, rows["A2"]) == [(3.0, 5.0, DONE)]
    (queue_a,) = [o for o in period_objects(plan, sc.tree, START, END, weights="pace",
                                            overdrawn_at_pool=False)
                  if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "a"]
    assert queue_a["spec"]["fairSharing"] == {"weight": "0"}


def test_flavor_tree_arithmetic_by_hand():
    # root (nominal 2) ← cohort T ← queues q1 (nominal 6, lendingLimit 2) and q2
    # (nominal 0, borrowingLimit 5). q1 keeps 6 − 2 = 4 for itself; T's subtree quota is
    # 2 (q1's lendable) + 0; the root's 2 + 2 = 4.
    nodes = {"root": QuotaNode("root", None, 1.0, False, nominal=2),
             "T": QuotaNode("T", "root", 1.0, False),
             "q1": QuotaNode("q1", "T", 1.0, True, True, nominal=6, lending_limit=2),
             "q2": QuotaNode("q2", "T", 1.0, True, True, nominal=0, borrowing_limit=5)}
    tree = FlavorTree(nodes)
    assert [tree.nodes[n].subtree for n in ("q1", "q2", "T", "root")] == [6, 0, 2, 4]
    assert tree.available("q1") == 4 + 4 and tree.available("q2") == 4
    tree.add_usage("q2", 3)  # borrowed: T's usage 3, root's 3
    assert (tree.nodes["T"].usage, tree.nodes["root"].usage) == (3, 3)
    assert tree.available("q2") == 1 and tree.available("q1") == 4 + 1
    tree.add_usage("q1", 5)  # 4 from its own guaranteed, 1 up the tree
    assert tree.nodes["root"].usage == 4 and tree.available("q1") == 0
    tree.set_usage({"q1": 5, "q2": 3})  # recomputed from scratch: the same
    assert (tree.nodes["T"].usage, tree.nodes["root"].usage) == (4, 4)


# -- the replay's quotas are the exported YAML's -------------------------------------------


def test_replay_quotas_equal_the_exported_yaml_for_the_sample_plan(sample_plan):
    plan, org = sample_plan
    start, end = plan["periods"][0]["start"], plan["periods"][0]["end"]
    files = export_kueue(plan, org, reserve_nodes=RESERVE_NODES)
    docs = [d for d in yaml.safe_load_all(files[file_name(start)]) if d is not None]
    from planner.inputs.org import OrgTree

    tree = OrgTree.from_frame(org)
    # the export keeps rule 7's reserve (RESERVE_NODES), as the replay does
    memory, queues, _ = quota_trees(period_objects(plan, tree, start, end,
                                                   reserve_nodes=RESERVE_NODES))
    written, _, _ = quota_trees(docs)
    expected = project_quotas(plan, start, end, projects=list(tree.leaves),
                              reserve_nodes=RESERVE_NODES)
    # fill: every project holds a flavor on every cluster (nominal 0 where not granted)
    assert all(set(cells) == set(memory) for cells in expected.values())
    assert any(q["reserved"] for cells in expected.values() for q in cells.values())
    for cluster, flavor_tree in memory.items():
        other = written[cluster]
        assert set(flavor_tree.nodes) == set(other.nodes)
        for name, node in flavor_tree.nodes.items():
            twin = other.nodes[name]
            assert (node.nominal, node.borrowing_limit, node.lending_limit, node.covers,
                    node.parent, node.weight, node.subtree) == (
                twin.nominal, twin.borrowing_limit, twin.lending_limit, twin.covers,
                twin.parent, twin.weight, twin.subtree)
        # and every queue's numbers are the plan's (floor of GPUs, reserved nodes)
        for project, cells in expected.items():
            node = flavor_tree.nodes[queues[project]]
            q = cells.get(cluster)
            if q is None:
                assert not node.covers
                continue
            assert node.nominal == q["nominal"]
            assert node.borrowing_limit == q["borrowing"]
            assert node.lending_limit == (q["nominal"] - q["reserved"] if q["reserved"]
                                          else None)
            assert node.guaranteed == q["reserved"]
        capacity = {c["cluster"]: c["nodes"] * c["gpus_per_node"] for c in plan["clusters"]}
        pool = [n for n in flavor_tree.nodes.values() if n.parent is None]
        assert len(pool) == 1
        held = sum(flavor_tree.nodes[queues[p]].nominal for p in expected
                   if cluster in expected[p])
        assert pool[0].nominal + held == capacity[cluster]
        assert pool[0].subtree == capacity[cluster] - sum(
            q["reserved"] for cells in expected.values() for c, q in cells.items()
            if c == cluster)
        assert safe_name(cluster) in {f["name"] for d in docs if d["kind"] == "ClusterQueue"
                                      for g in d["spec"]["resourceGroups"]
                                      for f in g["flavors"]}


# -- a reclaim that frees node room but too little quota ----------------------------------


THREE_TEAMS = TWO_TEAMS + [("tc", "", 1.0), ("c", "tc", 1.0)]


def test_a_reclaim_takes_enough_borrowed_work_for_the_quota_not_only_for_the_nodes():
    # Two nodes (16 GPUs). a: nominal 8, lendable; b: a reserved node (nominal 8,
    # lendingLimit 0: never lent); c: nothing. The pool holds 16 − 8 − 8 = 0; the root's
    # quota for borrowers is a's 8 (b's 8 is not lent).
    # t=0  B (b, 4 GPUs) within b's nominal: first, node 0 (4 left). Then c borrows a's
    #      idle 8: C1 (4) best-fit on node 0 (full), C2 (2) and C3 (2) on node 1 (4 left:
    #      b's unused reserved GPUs). c uses 8 = all a lends: a may admit 0.
    # t=1  A (a, 4 GPUs) is within a's nominal: reclaim. On the nodes it fits already
    #      (node 1's 4 free); preempt_for takes the most recently admitted victim, C3,
    #      which frees 2 GPUs of quota, not 4. Kueue preempts until the workload fits
    #      its quota: C2 too (quota 4). A is admitted at 1 on node 1, "nominal".
    #      (Before the fix the replay preempted C3 alone, failed the quota check and
    #      left A waiting until 10, C3 preempted for nothing; on the 8,000-job quarter,
    #      where the victim's queue came before the lender in the next pass, the victim
    #      was re-admitted and preempted again, for ever at one instant.)
    #      C2 and C3 wait: a uses 4, c's C1 4 = a's 8.
    # t=3  A ends; C2 and C3 (resumable, 9 h left each) are re-admitted 3 → 12.
    sc = tiny(THREE_TEAMS, nodes=2)
    tr = trace([("A", "a", 1, 4, 2.0, 1.0), ("B", "b", 0, 4, 10.0, 1.0),
                ("C1", "c", 0, 4, 10.0, 0.0), ("C2", "c", 0, 2, 10.0, 0.0),
                ("C3", "c", 0, 2, 10.0, 0.0)])
    policy = FixedPlan(hand_plan(2, {"a": (8.0, 0.0)}, reservations=(("b", 1),)))
    result = replay(sc, tr, policy)
    ids = list(tr["job_id"])
    a, b, c1, c2, c3 = (ids.index(j) for j in ("A", "B", "C1", "C2", "C3"))
    tree = policy.executor.trees[0]
    assert (tree.nodes["b"].nominal, tree.nodes["b"].lending_limit) == (8, 0)
    assert runs(result, a) == [(1.0, 3.0, DONE)]
    assert runs(result, b) == [(0.0, 10.0, DONE)]
    assert runs(result, c1) == [(0.0, 10.0, DONE)]
    assert runs(result, c2) == [(0.0, 1.0, PREEMPTED), (3.0, 12.0, DONE)]
    assert runs(result, c3) == [(0.0, 1.0, PREEMPTED), (3.0, 12.0, DONE)]
    assert tags(result)[(a, 1.0)] == NOMINAL
    assert [result.preemptions[j] for j in (a, b, c1, c2, c3)] == [0, 0, 0, 1, 1]


def test_planner_kueue_asks_no_gang_reservations_by_default():
    # G (a, 8 GPUs = the node) has waited 30 h at a replan at 30: planner-kueue asks no
    # reservation for it by default (gang_wait_hours = ∞: reserved quota is never lent
    # and idled, the CHANGELOG records it), one with a threshold of one period (None,
    # 24 h, the earlier default) or 12 h.
    sc = tiny(TWO_TEAMS)
    tr = trace([("G", "a", 0, 8, 5.0, 1.0)])
    as_of = sc.config.quarter_start + pd.Timedelta(hours=30)
    asked = {}
    for name, policy in (("default", KueueReplayPolicy()),
                         ("1p", KueueReplayPolicy(gang_wait_hours=None)),
                         ("12h", KueueReplayPolicy(gang_wait_hours=12.0))):
        sim = Replay(sc, tr, policy)
        policy.prepare(sim)
        sim._enqueue(0)
        sim.now = 30.0
        asked[name] = list(policy.gang_requests(sim, as_of)["request_id"])
    assert asked == {"default": [], "1p": ["G"], "12h": ["G"]}
    assert KueueReplayPolicy().gang_wait_hours == math.inf


# -- the solver in the loop, the CLI name ------------------------------------------------


def test_planner_kueue_replans_and_runs_through_the_solver():
    # Equal budgets, one node: the first replan sees A's 8-GPU job and grants a its
    # budget pace as guaranteed (100 NGH ÷ 24 h → 4 GPUs nominal) and the rest of the
    # node as opportunistic: A runs at once. B (b, submitted at 1 h) was not in the
    # plan: b's queue has nominal 0 on c1. With fill (the export's default) it has a
    # flavor there and no borrowingLimit: it cannot reclaim (nothing nominal to take
    # back) but borrows the node when A ends at 10, "borrowed", 10 → 12.
    sc = tiny(TWO_TEAMS)
    tr = trace([("A", "a", 0, 8, 10.0, 3.0), ("B", "b", 1, 4, 2.0, 1.0)])
    policy = make_policy("planner-kueue")
    result = replay(sc, tr, policy)
    assert result.replans == 4
    assert runs(result, 0) == [(0.0, 10.0, DONE)]
    assert runs(result, 1) == [(10.0, 12.0, DONE)]
    assert tags(result)[(1, 10.0)] == BORROWED
    # the grant-capped export (fill=False): b has no flavor until the replan at 24 h,
    # where it is admitted within its new nominal quota (no paced class in Kueue)
    capped = replay(sc, tr, KueueReplayPolicy(export=KueueExport(fill=False)))
    assert runs(capped, 0) == [(0.0, 10.0, DONE)]
    assert runs(capped, 1) == [(24.0, 26.0, DONE)]
    assert tags(capped)[(1, 24.0)] == NOMINAL
    assert parse_policies("planner,planner-kueue") == ["planner", "planner-kueue"]
    assert pd.Timestamp(START) == Q0


# -- invariants over random traces and plans (hypothesis) ----------------------------------


GRANT = st.tuples(st.integers(0, 16), st.integers(0, 16))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=st.lists(st.tuples(st.sampled_from(["a", "b"]), st.floats(0, 30),
                               st.sampled_from([1, 2, 4, 8, 16]), st.floats(0.25, 10),
                               st.booleans(), st.sampled_from([0.0, 1.0])),
                     min_size=1, max_size=14),
       grants=st.tuples(GRANT, GRANT), reserved=st.sampled_from([(), (("b", 1),)]))
def test_quota_invariants_hold_after_every_pass(jobs, grants, reserved):
    # Two nodes (16 GPUs), a fixed plan whose guaranteed GPUs (plus b's reserved node)
    # fit the cluster. After every scheduling pass: no queue above nominal +
    # borrowingLimit, the pool not overdrawn, reserved GPUs never used by another queue;
    # only borrowed work, or a queue's own lower-priority work (its unallocated work,
    # min runtime 0, which its budget work may preempt; its smaller budget work, which
    # its gangs may preempt) is ever preempted: a gang within its queue's nominal quota
    # never is, and budget work within nominal only when a gang of its own queue starts
    # in its place.
    (ga, oa), (gb, ob) = grants
    held = 8 * len(reserved)
    ga = min(ga, 16 - held)
    gb = min(gb, 16 - held - ga)
    oa, ob = min(oa, 16 - ga - gb - held), min(ob, 16 - ga - gb - held)
    plan = hand_plan(2, {"a": (float(ga), float(oa)), "b": (float(gb), float(ob))},
                     reservations=reserved)
    rows = [(f"j{i:02d}", p, round(t, 2), g, round(d, 2), m, r)
            for i, (p, t, g, d, r, m) in enumerate(jobs)]
    tr = trace(rows)
    checks = []

    class Checked(FixedPlan):
        def schedule(self, sim, c):
            super().schedule(sim, c)
            tree = self.executor.trees[c]
            self.executor._sync(sim, c, tree)
            for q in ("a", "b"):
                node = tree.nodes[q]
                limit = (16 if node.borrowing_limit is None
                         else node.nominal + node.borrowing_limit) if node.covers else 0
                assert node.usage <= limit, (sim.now, q, node.usage, limit)
            root = [n for n in tree.nodes.values() if n.parent is None][0]
            assert root.usage <= root.subtree
            if reserved:  # a may use at most what b does not keep
                assert tree.nodes["a"].usage <= 16 - 8
            checks.append(sim.now)

    result = replay(tiny(TWO_TEAMS, nodes=2), tr, Checked(plan))
    preempted = [s for s in result.segments if s.ended == PREEMPTED]
    assert all(s.tag in (BORROWED, BORROWED_GANG, BORROWED_LOW, NOMINAL_LOW, NOMINAL)
               for s in preempted)
    gang_starts = {(s.project, s.start) for s in result.segments
                   if s.tag in (NOMINAL_GANG, BORROWED_GANG)}
    assert all((s.project, s.end) in gang_starts for s in preempted if s.tag == NOMINAL)
    allocated = set(tr.index[tr["min_runtime_hours"] > 0])  # trace rows (sorted by submit)
    assert all((s.job in allocated) == (s.tag in (NOMINAL, BORROWED, NOMINAL_GANG,
                                                  BORROWED_GANG))
               for s in result.segments)
    assert all((s.tag in (NOMINAL_GANG, BORROWED_GANG)) == (s.job in allocated and s.gpus >= 8)
               for s in result.segments)
    assert checks or not len(tr)


def test_rule_8_an_overdrawn_project_yields_to_budget_work_and_still_fills_idle_gpus():
    # One node of 8 GPUs; nobody holds nominal quota (the pool owns 8). a (team ta, org
    # weight 2) is overdrawn (used 100 of 100 at the quarter's start: a whole budget ahead
    # of its pace, 0); b (team tb, weight 1) has all of its budget left.
    # t=0    A1 (a, 4 GPUs, 20 h) starts, t=0.5 A2 (a, 4 GPUs, 20 h) too: nobody else has
    #        work, so the overdrawn project borrows the whole node (no GPU idles while it waits).
    # t=1    B (b, 4 GPUs, 2 h) arrives; the node is full.
    # Before rule 8 (a's queue in ta, weight 0 there): Fair Sharing compares the teams at
    #        the root. tb with B borrows 4 of the 8 lendable at weight 1: 0.5; ta without
    #        A2 (the latest admitted) borrows 4 ÷ 8 ÷ 2 = 0.25. 0.5 ≤ 0.25 fails, so B waits
    #        behind the overdrawn project until A1 ends at 20.
    # Rule 8 (a's queue in the pool, weight 0): a without A2 still borrows 4 at weight 0,
    #        an infinite share, and 0.5 ≤ ∞: A2 is preempted at 1, B runs 1 → 3, and A2
    #        (resumable) takes the idle GPUs back at 3.
    org = [("ta", "", 2.0), ("a", "ta", 1.0), ("tb", "", 1.0), ("b", "tb", 1.0)]
    sc = tiny(org)
    plan = hand_plan(1, {}) | {
        "quarter_start": START, "quarter_end": END,
        "budgets": [{"project": "a", "budget": 100.0, "used": 100.0},
                    {"project": "b", "budget": 100.0, "used": 0.0}]}
    tr = trace([("A1", "a", 0, 4, 20.0, 1.0), ("A2", "a", 0.5, 4, 20.0, 1.0),
                ("B", "b", 1, 4, 2.0, 1.0)])
    rows = {j: i for i, j in enumerate(tr["job_id"])}
    before = replay(sc, tr, FixedPlan(plan, export=KueueExport(overdrawn_at_pool=False)))
    assert runs(before, rows["A2"]) == [(0.5, 20.5, DONE)]
    assert runs(before, rows["B"]) == [(20.0, 22.0, DONE)]
    now = replay(sc, tr, FixedPlan(plan))  # the default: rule 8
    assert runs(now, rows["A1"]) == [(0.0, 20.0, DONE)]
    assert runs(now, rows["A2"])[0] == (0.5, 1.0, PREEMPTED)
    assert runs(now, rows["A2"])[1][0] == 3.0
    assert runs(now, rows["B"]) == [(1.0, 3.0, DONE)]
    # the exported object: a's ClusterQueue in the pool Cohort, weight 0
    (queue_a,) = [o for o in period_objects(plan, sc.tree, START, END)
                  if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "a"]
    assert queue_a["spec"]["cohortName"] == POOL
    assert queue_a["spec"]["fairSharing"] == {"weight": "0"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=st.lists(st.tuples(st.sampled_from(["a", "b"]), st.floats(0, 30),
                               st.sampled_from([1, 2, 4, 8, 16]), st.floats(0.25, 10),
                               st.booleans()),
                     min_size=1, max_size=14))
def test_rule_8_an_overdrawn_project_fills_idle_gpus_and_takes_none_from_others(jobs):
    # Two nodes (16 GPUs), nobody holds nominal quota, a overdrawn, b with its budget left,
    # every job allocated and b's smaller than a node (so b's work never preempts b's).
    # After every scheduling pass no waiting job fits on the free GPUs (lending fills every
    # idle GPU it can: no GPU idles while work that fits waits), and no job of b is ever
    # preempted: a, at an infinite share and no nominal quota, can neither win a Fair
    # Sharing comparison nor reclaim, so it takes GPUs from nobody. (Invariants, not the
    # rule's difference: the hand-computed test above shows what the rule changes.)
    plan = hand_plan(2, {}) | {
        "quarter_start": START, "quarter_end": END,
        "budgets": [{"project": "a", "budget": 100.0, "used": 100.0},
                    {"project": "b", "budget": 100.0, "used": 0.0}]}
    rows = [(f"j{i:02d}", p, round(t, 2), g if p == "a" else min(g, 4), round(d, 2), 1.0, r)
            for i, (p, t, g, d, r) in enumerate(jobs)]
    tr = trace(rows)
    passes = []

    class Checked(FixedPlan):
        def schedule(self, sim, c):
            super().schedule(sim, c)
            waiting = [j for j in sim.waiting_jobs() if sim.jobs.cluster[j] == c]
            assert not any(sim.fits(c, sim.jobs.gpus[j]) for j in waiting), sim.now
            passes.append(sim.now)

    result = replay(tiny(TWO_TEAMS, nodes=2), tr, Checked(plan))
    b = tr.index[tr["project"] == "b"]
    assert not [s for s in result.segments if s.job in set(b) and s.ended == PREEMPTED]
    assert passes
