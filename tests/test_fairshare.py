"""The fair share: org tree, water-filling (flat, hierarchical), lookback, per-period targets."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.fairshare import (
    Lookback,
    OrgTree,
    fair_share_targets,
    fair_share_targets_at,
    hierarchical_water_fill,
    water_fill,
)

EXACT = 1e-9
PROPERTY = settings(deadline=None, max_examples=150,
                    suppress_health_check=[HealthCheck.too_slow])


def org(rows: list[tuple[str, str, float]]) -> OrgTree:
    return OrgTree.from_frame(pd.DataFrame(rows, columns=["id", "parent", "weight"]))


def no_usage(tree: OrgTree, n_periods: int) -> tuple[np.ndarray, np.ndarray]:
    n = len(tree.leaves)
    return np.zeros((n, 0)), np.zeros((n, n_periods))


# ---------------------------------------------------------------------------------------
# Flat water-filling, by hand
# ---------------------------------------------------------------------------------------


def test_weighted_max_min_with_demand_caps():
    # C = 100, weights 1, 1, 2, demands 10, 50, 80: x = min(D, λw).
    # λ = 30: 10 (capped) + 30 + 60 = 100, and 60 < 80, 30 < 50, so λ = 30.
    # Runner-up that must NOT come out: the unweighted split 10, 45, 45.
    got = water_fill(100.0, np.array([10.0, 50.0, 80.0]), np.array([1.0, 1.0, 2.0]))
    np.testing.assert_allclose(got, [10.0, 30.0, 60.0], rtol=0, atol=EXACT)


def test_offsets_shift_the_level():
    # Same with U = (0, 20, 0): x = min(D, max(0, λw − U)).
    # Guess p1 capped (λ ≥ 10) and p2, p3 not: 10 + (λ − 20) + 2λ = 100 → λ = 110/3.
    # Check: λ ≥ 20 (p2 receives), 2λ = 73.33 < 80, λ − 20 = 16.67 < 50. So
    # x = (10, 50/3, 220/3); without the offset it was (10, 30, 60).
    got = water_fill(100.0, np.array([10.0, 50.0, 80.0]), np.array([1.0, 1.0, 2.0]),
                     np.array([0.0, 20.0, 0.0]))
    np.testing.assert_allclose(got, [10.0, 50 / 3, 220 / 3], rtol=0, atol=EXACT)


def test_a_hot_claimant_still_gets_the_leftovers():
    # U = (0, 1000, 0): at λ = 45 p1 (10) and p3 (min(80, 90) = 80) are capped and
    # only 90 of 100 are given; p2 receives above λ = 1000: x2 = λ − 1000 = 10 at λ = 1010.
    # Runner-up: (10, 0, 80), which would idle 10 (the fill is work-conserving).
    got = water_fill(100.0, np.array([10.0, 50.0, 80.0]), np.array([1.0, 1.0, 2.0]),
                     np.array([0.0, 1000.0, 0.0]))
    np.testing.assert_allclose(got, [10.0, 10.0, 80.0], rtol=0, atol=EXACT)


@pytest.mark.parametrize(
    ("capacity", "demand", "weight", "offset", "expected"),
    [
        # ΣD = 30 ≤ C: everyone gets the demand
        (100.0, [10.0, 20.0], [1.0, 5.0], [0.0, 0.0], [10.0, 20.0]),
        # C = 0: nothing
        (0.0, [10.0, 20.0], [1.0, 1.0], [0.0, 0.0], [0.0, 0.0]),
        # ties: equal weights and demands split evenly
        (30.0, [50.0, 50.0, 50.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [10.0, 10.0, 10.0]),
        # equal huge offsets cancel: as without offsets (λ = 1e12 + 30)
        (100.0, [10.0, 50.0, 80.0], [1.0, 1.0, 2.0], [1e12, 1e12, 2e12], [10.0, 30.0, 60.0]),
        # a zero demand among others gets nothing, the others split C
        (10.0, [0.0, 50.0, 50.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.0, 5.0, 5.0]),
        # both hot by 40 and 10: level λ with (λ − 40) + (λ − 10) = 50 → λ = 50: 10, 40
        (50.0, [100.0, 100.0], [1.0, 1.0], [40.0, 10.0], [10.0, 40.0]),
        # offsets so large nobody gets anything below λ = 1e9: still all of C is given
        (6.0, [100.0, 100.0], [1.0, 2.0], [1e9, 2e9], [2.0, 4.0]),
    ],
)
def test_degenerate_cases(capacity, demand, weight, offset, expected):
    got = water_fill(capacity, np.array(demand), np.array(weight), np.array(offset))
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)


def test_vectorised_over_clusters_is_column_by_column():
    demand = np.array([[10.0, 0.0, 5.0], [50.0, 7.0, 5.0], [80.0, 9.0, 5.0]])
    weight = np.array([1.0, 1.0, 2.0])
    offset = np.array([[0.0, 1.0, 0.0], [20.0, 0.0, 0.0], [0.0, 3.0, 0.0]])
    capacity = np.array([100.0, 10.0, 20.0])
    got = water_fill(capacity, demand, weight, offset)
    for k in range(3):
        np.testing.assert_allclose(got[:, k],
                                   water_fill(capacity[k], demand[:, k], weight, offset[:, k]),
                                   rtol=0, atol=EXACT)
    # column 1: U = (1, 0, 3), D = (0, 7, 9), C = 10: p1 wants nothing;
    # (λ − 0) + (2λ − 3) = 10 → λ = 13/3: p2 = 13/3, p3 = 17/3 (both under their caps)
    np.testing.assert_allclose(got[:, 1], [0.0, 13 / 3, 17 / 3], rtol=0, atol=EXACT)
    # column 2: ΣD = 15 ≤ 20, demands met
    np.testing.assert_allclose(got[:, 2], [5.0, 5.0, 5.0], rtol=0, atol=EXACT)


@pytest.mark.parametrize(
    ("weight", "demand", "capacity"),
    [([1.0, 0.0], [1.0, 1.0], 1.0), ([1.0, 1.0], [1.0, -1.0], 1.0), ([1.0, 1.0], [1.0, 1.0], -1.0)],
)
def test_bad_input_is_refused(weight, demand, capacity):
    with pytest.raises(ValueError):
        water_fill(capacity, np.array(demand), np.array(weight))


# ---------------------------------------------------------------------------------------
# The org tree, table-driven
# ---------------------------------------------------------------------------------------

# institute (top) → areas A, B → teams → projects; rows deliberately not parents-first
BIG_ORG = [
    ("a1", "team-x", 1.0),
    ("inst", "", 1.0),
    ("A", "inst", 2.0),
    ("team-x", "A", 1.0),
    ("a2", "team-x", 1.0),
    ("a3", "A", 1.0),
    ("B", "inst", 1.0),
    ("b1", "B", 1.0),
    ("solo", "", 1.0),
]

TREE_CASES = [
    pytest.param(
        [("p", "", 1.0)],
        {"leaves": ("p",), "depth": {"p": 0}, "ancestors": {"p": ()}, "top": {"p": "p"},
         "top_down": ()},
        id="single-project"),
    pytest.param(
        [("A", "", 2.0), ("B", "", 1.0), ("a1", "A", 1.0), ("a2", "A", 1.0), ("b1", "B", 1.0)],
        {"leaves": ("a1", "a2", "b1"), "depth": {"A": 0, "a1": 1, "b1": 1},
         "ancestors": {"a1": ("A",), "b1": ("B",), "A": ()},
         "top": {"a1": "A", "a2": "A", "b1": "B"}, "top_down": ("A", "B")},
        id="two-areas"),
    pytest.param(
        BIG_ORG,
        {"leaves": ("a1", "a2", "a3", "b1", "solo"),
         "depth": {"inst": 0, "A": 1, "team-x": 2, "a1": 3, "a3": 2, "b1": 2, "solo": 0},
         "ancestors": {"a1": ("team-x", "A", "inst"), "a3": ("A", "inst"), "solo": ()},
         "top": {"a1": "inst", "b1": "inst", "solo": "solo"},
         "top_down": ("inst", "A", "B", "team-x")},
        id="uneven-depth-children-listed-first"),
]


@pytest.mark.parametrize(("rows", "expected"), TREE_CASES)
def test_org_tree_structure(rows, expected):
    tree = org(rows)
    assert tree.ids == tuple(r[0] for r in rows)
    assert tree.leaves == expected["leaves"]
    assert tree.leaf_index == {p: i for i, p in enumerate(expected["leaves"])}
    for node, d in expected["depth"].items():
        assert tree.depth[tree.index[node]] == d
    for node, up in expected["ancestors"].items():
        assert tree.ancestors(node) == up
    for node, top in expected["top"].items():
        assert tree.top_level(node) == top
    assert tuple(tree.ids[i] for i in tree.top_down) == expected["top_down"]
    for i in range(tree.n_nodes):
        for c in tree.children(i):
            assert tree.parent[c] == i


def test_org_tree_arrays():
    tree = org(BIG_ORG)
    np.testing.assert_array_equal(tree.parent, [3, -1, 1, 2, 3, 2, 1, 6, -1])
    np.testing.assert_array_equal(tree.weight, [1, 1, 2, 1, 1, 1, 1, 1, 1])
    assert tree.children(tree.index["team-x"]) == (0, 4)
    assert tree.children(tree.index["a1"]) == ()
    with pytest.raises(ValueError):
        tree.weight[0] = 5.0  # immutable


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        # leaves a1, a2, a3, b1, solo
        ([1.0, 2.0, 4.0, 8.0, 16.0],
         {"team-x": 3.0, "A": 7.0, "B": 8.0, "inst": 15.0, "solo": 16.0, "a3": 4.0}),
        ([0.0, 0.0, 0.0, 0.0, 0.0], {"inst": 0.0, "team-x": 0.0}),
        ([1, 1, 1, 1, 1], {"inst": 4.0, "A": 3.0, "team-x": 2.0}),
    ],
)
def test_subtree_sums(values, expected):
    tree = org(BIG_ORG)
    got = tree.subtree_sum(np.array(values))
    for node, total in expected.items():
        assert got[tree.index[node]] == total


def test_subtree_sum_keeps_trailing_axes():
    tree = org(BIG_ORG)
    values = np.arange(5 * 2 * 3, dtype=float).reshape(5, 2, 3)
    got = tree.subtree_sum(values)
    assert got.shape == (tree.n_nodes, 2, 3)
    np.testing.assert_array_equal(got[tree.index["A"]], values[:3].sum(axis=0))
    np.testing.assert_array_equal(got[tree.index["inst"]], values[:4].sum(axis=0))
    np.testing.assert_array_equal(got[tree.leaf_nodes], values)
    with pytest.raises(ValueError):
        tree.subtree_sum(np.zeros(4))


@pytest.mark.parametrize(
    "rows",
    [
        pytest.param([("a", "b", 1.0), ("b", "a", 1.0)], id="cycle"),
        pytest.param([("a", "a", 1.0)], id="self-parent"),
        pytest.param([("a", "", 1.0), ("b", "nowhere", 1.0)], id="orphan"),
        pytest.param([("a", "", 1.0), ("a", "", 1.0)], id="duplicate-id"),
        pytest.param([("a", "", 0.0)], id="zero-weight"),
    ],
)
def test_org_tree_refuses_broken_input(rows):
    with pytest.raises(ValueError):
        org(rows)


def test_sibling_batches_cover_every_group_once_top_down():
    tree = org(BIG_ORG)
    seen_parents: list[int] = []
    seen_children: list[int] = []
    for batch in tree.sibling_batches:
        for parent, kids, mask in zip(batch.parents, batch.children, batch.mask, strict=True):
            assert parent < 0 or int(parent) in seen_children  # its own grant is known
            real = [int(c) for c in kids[mask]]
            expected = tree.top if parent < 0 else tree.children(int(parent))
            assert tuple(real) == expected
            seen_parents.append(int(parent))
            seen_children.extend(real)
    assert sorted(seen_children) == list(range(tree.n_nodes))
    assert sorted(p for p in seen_parents if p >= 0) == sorted(tree.top_down)


# ---------------------------------------------------------------------------------------
# Hierarchical water-filling, by hand
# ---------------------------------------------------------------------------------------

# Area A (weight 3): a1, a2; area B (weight 1): b1 (weight 1), b2 (weight 3).
TWO_AREAS = [("A", "", 3.0), ("B", "", 1.0), ("a1", "A", 1.0), ("a2", "A", 1.0),
             ("b1", "B", 1.0), ("b2", "B", 3.0)]


def test_an_areas_unused_share_flows_to_its_sibling_area():
    # C = 100; demands a1 10, a2 20, b1 100, b2 100.
    # Root: A = min(30, 3λ), B = min(200, λ): λ = 25 would give A 75 > 30, so A is capped
    # at 30 and B gets the other 70 (λ = 70).
    # In B: b1 = min(100, μ), b2 = min(100, 3μ): 4μ = 70 → μ = 17.5: b1 17.5, b2 52.5.
    # In A: 30 covers both demands: a1 10, a2 20.
    # Runner-up if A's unused share were lost: B keeps its own 25 → b1 6.25, b2 18.75.
    tree = org(TWO_AREAS)
    got = hierarchical_water_fill(tree, 100.0, np.array([10.0, 20.0, 100.0, 100.0]))
    np.testing.assert_allclose(got, [10.0, 20.0, 17.5, 52.5], rtol=0, atol=EXACT)


def test_hierarchy_is_not_flat_max_min():
    # The contract's simple case (tests/test_model.py): A (2): a1, a2; B (1): b1; C = 2400,
    # demands 240, 1920, 1440. Root: 3λ = 2400, A = 1600, B = 800; inside A a1 = 240,
    # a2 = 1360. Flat max-min over projects would give 240, 1080, 1080.
    tree = org([("A", "", 2.0), ("B", "", 1.0), ("a1", "A", 1.0), ("a2", "A", 1.0),
                ("b1", "B", 1.0)])
    got = hierarchical_water_fill(tree, 2400.0, np.array([240.0, 1920.0, 1440.0]))
    np.testing.assert_allclose(got, [240.0, 1360.0, 800.0], rtol=0, atol=EXACT)


def test_subtree_offsets_are_balanced_at_every_level():
    # Same tree and demands as the flow test, C = 100, usage U: a1 20, b2 10.
    # Root: U_A = 20, U_B = 10. A = min(30, max(0, 3λ − 20)), B = min(200, max(0, λ − 10)):
    # try A capped: 30 + λ − 10 = 100 → λ = 80, 3·80 − 20 = 220 ≥ 30 ✓: A 30, B 70.
    # In B: b1 = μ, b2 = 3μ − 10: 4μ − 10 = 70 → μ = 20: b1 20, b2 50.
    # In A: 30 meets both demands. Runner-up without offsets: b1 17.5, b2 52.5.
    tree = org(TWO_AREAS)
    got = hierarchical_water_fill(tree, 100.0, np.array([10.0, 20.0, 100.0, 100.0]),
                                  np.array([20.0, 0.0, 0.0, 10.0]))
    np.testing.assert_allclose(got, [10.0, 20.0, 20.0, 50.0], rtol=0, atol=EXACT)


def test_hierarchical_vectorised_over_clusters():
    # cluster 0: the flow case; cluster 1: C = 40, only a1 (30) and b1 (30) want it:
    # root A = min(30, 3λ), B = min(30, λ): 3λ + λ = 40 → λ = 10, A = 30 (just at its
    # cap), B = 10: a1 30, b1 10.
    tree = org(TWO_AREAS)
    demand = np.array([[10.0, 30.0], [20.0, 0.0], [100.0, 30.0], [100.0, 0.0]])
    got = hierarchical_water_fill(tree, np.array([100.0, 40.0]), demand)
    np.testing.assert_allclose(got, [[10.0, 30.0], [20.0, 0.0], [17.5, 10.0], [52.5, 0.0]],
                               rtol=0, atol=EXACT)


def test_hierarchical_offsets_per_cluster_are_column_by_column():
    # offsets (P, K): each cluster balanced on its own usage, as K separate calls
    tree = org(TWO_AREAS)
    demand = np.array([[10.0, 30.0], [20.0, 0.0], [100.0, 30.0], [100.0, 0.0]])
    offset = np.array([[20.0, 25.0], [0.0, 0.0], [0.0, 0.0], [10.0, 0.0]])
    capacity = np.array([100.0, 40.0])
    got = hierarchical_water_fill(tree, capacity, demand, offset)
    for k in range(2):
        np.testing.assert_allclose(
            got[:, k], hierarchical_water_fill(tree, capacity[k], demand[:, k], offset[:, k]),
            rtol=0, atol=EXACT)
    # cluster 0 is the hand-computed offset case above
    np.testing.assert_allclose(got[:, 0], [10.0, 20.0, 20.0, 50.0], rtol=0, atol=EXACT)
    # cluster 1: U_A = 25 (a1), U_B = 0: A = min(30, max(0, 3λ − 25)), B = min(30, λ).
    # Neither capped: 3λ − 25 + λ = 40 → λ = 16.25: A 23.75 < 30, B 16.25 < 30 ✓.
    # Runner-up without the offset: a1 30, b1 10.
    np.testing.assert_allclose(got[:, 1], [23.75, 0.0, 16.25, 0.0], rtol=0, atol=EXACT)


# ---------------------------------------------------------------------------------------
# Lookback
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lookback", "ages", "expected"),
    [
        (Lookback(window_periods=3), [0, 1, 2, 3, 4, 10], [0, 1, 1, 1, 0, 0]),
        (Lookback(window_periods=0), [0, 1, 2], [0, 0, 0]),
        (Lookback(half_life_periods=2.0), [0, 1, 3, 5], [0, 1.0, 0.5, 0.25]),
        (Lookback(half_life_periods=0.5), [1, 2, 3], [1.0, 0.25, 0.0625]),
    ],
)
def test_lookback_weights(lookback, ages, expected):
    np.testing.assert_allclose(lookback.weights(np.array(ages)), expected, rtol=0, atol=EXACT)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"window_days": 28}, Lookback(window_periods=28)),
        ({"window_days": 7, "period_hours": 12}, Lookback(window_periods=14)),
        ({"window_days": 1, "period_hours": 48}, Lookback(window_periods=1)),  # 0.5 → 1
        ({"window_days": 2.4, "period_hours": 24}, Lookback(window_periods=2)),
        ({"window_days": 2.6, "period_hours": 24}, Lookback(window_periods=3)),
        ({"window_days": 0.1}, Lookback(window_periods=1)),  # at least one period
        ({"window_days": 0}, Lookback(window_periods=0)),  # no lookback
        ({}, Lookback(window_periods=0)),
        ({"half_life_days": 3, "period_hours": 12}, Lookback(half_life_periods=6.0)),
        ({"half_life_days": 1, "period_hours": 36}, Lookback(half_life_periods=2 / 3)),
        ({"half_life_days": 0}, Lookback(window_periods=0)),
    ],
)
def test_lookback_from_days(kwargs, expected):
    assert Lookback.from_days(**kwargs) == expected


@pytest.mark.parametrize(
    "build",
    [
        lambda: Lookback(),
        lambda: Lookback(window_periods=2, half_life_periods=1.0),
        lambda: Lookback(window_periods=-1),
        lambda: Lookback(window_periods=1.5),
        lambda: Lookback(half_life_periods=0.0),
        lambda: Lookback.from_days(window_days=-1),
        lambda: Lookback.from_days(window_days=1, half_life_days=1),
    ],
)
def test_lookback_refuses_nonsense(build):
    with pytest.raises(ValueError):
        build()


# ---------------------------------------------------------------------------------------
# Targets, by hand
# ---------------------------------------------------------------------------------------

# Area X with teams T1, T2 (weight 1 each), one project each.
TWO_TEAMS = [("X", "", 1.0), ("T1", "X", 1.0), ("T2", "X", 1.0), ("p1", "T1", 1.0),
             ("p2", "T2", 1.0)]
BIG = 1e9


def test_a_team_that_ran_hot_yields_first():
    # C = 100 a period, both want 100. p1 (team T1) used 60 NGH the day before.
    # t0: x1 = λ − 60, x2 = λ → 2λ − 60 = 100 → λ = 80: p1 20, p2 80 (no lookback: 50, 50).
    # t1, 7-period window: U = (60 + 20, 80) = (80, 80) → even again: 50, 50.
    # t1, 1-period window: U = (20, 80) → 2λ − 100 = 100 → λ = 100: p1 80, p2 20.
    tree = org(TWO_TEAMS)
    demand = np.full((2, 1, 2), 100.0)
    past = np.array([[60.0], [0.0]])
    planned = np.zeros((2, 2))
    week = fair_share_targets(tree, np.full((1, 2), 100.0), demand, np.full(2, BIG), past,
                              planned, Lookback(window_periods=7))
    np.testing.assert_allclose(week[:, 0, :], [[20.0, 50.0], [80.0, 50.0]], rtol=0, atol=EXACT)
    day = fair_share_targets(tree, np.full((1, 2), 100.0), demand, np.full(2, BIG), past,
                             planned, Lookback(window_periods=1))
    np.testing.assert_allclose(day[:, 0, :], [[20.0, 80.0], [80.0, 20.0]], rtol=0, atol=EXACT)


def test_decayed_usage_counts_by_its_age():
    # p1 used 60 two periods before (age 2), half-life 1 period: ω = 0.5, U = (30, 0).
    # 2λ − 30 = 100 → λ = 65: p1 35, p2 65. A 1-period window would not see it: 50, 50.
    tree = org(TWO_TEAMS)
    past = np.array([[60.0, 0.0], [0.0, 0.0]])
    args = (tree, np.full((1, 1), 100.0), np.full((2, 1, 1), 100.0), np.full(2, BIG), past,
            np.zeros((2, 1)))
    decay = fair_share_targets(*args, Lookback(half_life_periods=1.0))
    np.testing.assert_allclose(decay[:, 0, 0], [35.0, 65.0], rtol=0, atol=EXACT)
    window = fair_share_targets(*args, Lookback(window_periods=1))
    np.testing.assert_allclose(window[:, 0, 0], [50.0, 50.0], rtol=0, atol=EXACT)


def test_earlier_targets_and_reservations_count_as_usage():
    # 1-period window, C = 100. t0: p2 wants only 20, p1 100; p1 also has a 30 NGH
    # reservation in t0 (which does not count in t0 itself, age 0): p1 80, p2 20.
    # t1: U = (80 + 30, 20) → (λ − 110) + (λ − 20) = 100 → λ = 115: p1 5, p2 95.
    # Runner-up ignoring the reservation: U = (80, 20) → p1 20, p2 80.
    tree = org(TWO_TEAMS)
    demand = np.array([[[100.0, 100.0]], [[20.0, 100.0]]])
    planned = np.array([[30.0, 0.0], [0.0, 0.0]])
    got = fair_share_targets(tree, np.full((1, 2), 100.0), demand, np.full(2, BIG),
                             np.zeros((2, 0)), planned, Lookback(window_periods=1))
    np.testing.assert_allclose(got[:, 0, :], [[80.0, 5.0], [20.0, 95.0]], rtol=0, atol=EXACT)


def test_budget_caps_demand_then_scales_across_clusters():
    # Two clusters of 100, p1 headroom 60, p2 unbounded; no usage.
    # t0: p1's demand is capped per cluster at min(50, 60) = 50. Cluster 0: p1 50, p2 70 →
    # λ = 50: 50, 50; cluster 1: p1 50. p1's 100 > 60 → scaled by 0.6: 30 + 30 (the 20 cut
    # on cluster 0 stays unassigned). t1: p1 has 0 left; p2 gets its 70.
    tree = org(TWO_TEAMS)
    demand = np.zeros((2, 2, 2))
    demand[0] = 50.0
    demand[1, 0] = 70.0
    got = fair_share_targets(tree, np.full((2, 2), 100.0), demand, np.array([60.0, BIG]),
                             *no_usage(tree, 2), Lookback.none())
    np.testing.assert_allclose(got[0], [[30.0, 0.0], [30.0, 0.0]], rtol=0, atol=EXACT)
    np.testing.assert_allclose(got[1], [[50.0, 70.0], [0.0, 0.0]], rtol=0, atol=EXACT)


def test_targets_refuse_wrong_shapes():
    tree = org(TWO_TEAMS)
    with pytest.raises(ValueError):
        fair_share_targets(tree, np.zeros((1, 3)), np.zeros((2, 1, 2)), np.zeros(2),
                           *no_usage(tree, 2), Lookback.none())
    with pytest.raises(ValueError):
        fair_share_targets(tree, np.zeros((1, 2)), np.zeros((2, 1, 2)), -np.ones(2),
                           *no_usage(tree, 2), Lookback.none())


# ---------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------

amounts = st.one_of(st.sampled_from([0.0, 10.0, 50.0]),
                    st.floats(0.0, 1000.0, allow_subnormal=False))
weights = st.one_of(st.sampled_from([1.0, 2.0]), st.floats(0.1, 10.0))


def tolerance(*scales: float) -> float:
    return 1e-6 * max(1.0, *scales)


@st.composite
def flat_instances(draw):
    n = draw(st.integers(1, 8))
    k = draw(st.integers(1, 3))
    demand = np.array([[draw(amounts) for _ in range(k)] for _ in range(n)])
    weight = np.array([draw(weights) for _ in range(n)])
    offset = np.array([draw(amounts) for _ in range(n)]) * draw(st.sampled_from([0.0, 1.0, 1e3]))
    capacity = np.array([draw(st.one_of(st.just(0.0), st.floats(0.0, 5000.0)))
                         for _ in range(k)])
    return capacity, demand, weight, offset


def check_fill(capacity, demand, weight, offset, got):
    """Sum, bounds and the max-min condition for one sibling group, per column."""
    tol = tolerance(capacity.max(initial=0), demand.sum(), offset.max(initial=0))
    np.testing.assert_allclose(got.sum(axis=0), np.minimum(capacity, demand.sum(axis=0)),
                               rtol=1e-6, atol=1e-9)
    assert np.all(got >= 0) and np.all(got <= demand)
    level = (got + offset[:, None]) / weight[:, None]
    for k in range(demand.shape[1]):
        short = got[:, k] < demand[:, k] - tol
        receiving = got[:, k] > tol
        if short.any() and receiving.any():
            # everyone short of its demand is at least at the level of every receiver
            assert level[receiving, k].max() <= level[short, k].min() + tol


@PROPERTY
@given(flat_instances())
def test_water_fill_properties(instance):
    capacity, demand, weight, offset = instance
    got = water_fill(capacity, demand, weight, offset)
    check_fill(capacity, demand, weight, offset, got)
    more = water_fill(capacity * 1.5 + 1.0, demand, weight, offset)
    assert np.all(more >= got - tolerance(capacity.max(), demand.sum()))


@st.composite
def trees(draw, max_nodes: int = 12) -> OrgTree:
    """Random forests: node i's parent is a node before it (no cycles); rows shuffled."""
    n = draw(st.integers(1, max_nodes))
    parents = [draw(st.integers(-1, i - 1)) for i in range(n)]
    rows = [(f"n{i}", "" if up < 0 else f"n{up}", draw(weights)) for i, up in enumerate(parents)]
    return org(draw(st.permutations(rows)))


@st.composite
def hierarchical_instances(draw):
    tree = draw(trees())
    n_leaves = len(tree.leaves)
    k = draw(st.integers(1, 3))
    demand = np.array([[draw(amounts) for _ in range(k)] for _ in range(n_leaves)])
    offset = np.array([draw(amounts) for _ in range(n_leaves)]) * draw(
        st.sampled_from([0.0, 1.0]))
    capacity = np.array([draw(st.floats(0.0, 5000.0)) for _ in range(k)])
    return tree, capacity, demand, offset


def reference_hierarchical(tree, capacity, demand, offset):
    """The contract's rule written recursively, one sibling group at a time."""
    node_demand = tree.subtree_sum(demand)
    node_offset = tree.subtree_sum(offset)
    grant = np.zeros_like(node_demand)

    def split(kids, cap):
        kids = list(kids)
        grant[kids] = water_fill(cap, node_demand[kids], tree.weight[kids], node_offset[kids])
        for c in kids:
            if tree.children(c):
                split(tree.children(c), grant[c])

    split(tree.top, capacity)
    return grant[tree.leaf_nodes]


@PROPERTY
@given(hierarchical_instances())
def test_hierarchical_water_fill_properties(instance):
    tree, capacity, demand, offset = instance
    got = hierarchical_water_fill(tree, capacity, demand, offset)
    tol = tolerance(capacity.max(), demand.sum(), offset.max(initial=0))
    np.testing.assert_allclose(got.sum(axis=0), np.minimum(capacity, demand.sum(axis=0)),
                               rtol=1e-6, atol=1e-9)
    assert np.all(got >= 0) and np.all(got <= demand)
    # every sibling group is itself a weighted max-min of its parent's grant
    node_grant = tree.subtree_sum(got)
    node_demand = tree.subtree_sum(demand)
    node_offset = tree.subtree_sum(offset)
    groups = [(tree.top, capacity)] + [(tree.children(i), node_grant[i]) for i in tree.top_down]
    for kids, cap in groups:
        kids = list(kids)
        check_fill(np.asarray(cap), node_demand[kids], tree.weight[kids], node_offset[kids],
                   node_grant[kids])
    np.testing.assert_allclose(got, reference_hierarchical(tree, capacity, demand, offset),
                               rtol=0, atol=tol)
    more = hierarchical_water_fill(tree, capacity * 1.5 + 1.0, demand, offset)
    assert np.all(more >= got - tol)


@st.composite
def target_instances(draw):
    tree = draw(trees(max_nodes=8))
    n_leaves = len(tree.leaves)
    k = draw(st.integers(1, 3))
    periods = draw(st.integers(1, 4))
    history = draw(st.integers(0, 3))

    def array(shape, values=amounts):
        return np.array([draw(values) for _ in range(int(np.prod(shape)))]).reshape(shape)

    demand = array((n_leaves, k, periods))
    available = array((k, periods), st.floats(0.0, 3000.0))
    headroom = array((n_leaves,), st.one_of(st.just(BIG), st.floats(0.0, 2000.0)))
    past = array((n_leaves, history))
    planned = array((n_leaves, periods)) * draw(st.sampled_from([0.0, 1.0]))
    lookback = draw(st.one_of(st.builds(Lookback, window_periods=st.integers(0, 5)),
                              st.builds(Lookback, half_life_periods=st.floats(0.2, 5.0))))
    return tree, available, demand, headroom, past, planned, lookback


@PROPERTY
@given(target_instances())
def test_targets_respect_capacity_demand_and_budget(instance):
    tree, available, demand, headroom, past, planned, lookback = instance
    got = fair_share_targets(tree, available, demand, headroom, past, planned, lookback)
    tol = tolerance(available.max(), demand.sum())
    assert got.shape == demand.shape
    assert np.all(got >= 0)
    assert np.all(got <= demand + tol)
    assert np.all(got.sum(axis=0) <= available + tol)
    assert np.all(got.sum(axis=(1, 2)) <= headroom + tol)


@PROPERTY
@given(hierarchical_instances())
def test_targets_in_the_simple_case_are_the_hierarchical_water_filling(instance):
    # one period, no usage, budgets that do not bind: the contract's simple case
    tree, capacity, demand, _ = instance
    got = fair_share_targets(tree, capacity[:, None], demand[:, :, None],
                             np.full(len(tree.leaves), BIG), *no_usage(tree, 1),
                             Lookback(window_periods=4))
    np.testing.assert_allclose(got[:, :, 0], hierarchical_water_fill(tree, capacity, demand),
                               rtol=0, atol=EXACT)


# ---------------------------------------------------------------------------------------
# Targets at the cells with demand only (what the planner computes; no (P, K, T) array)
# ---------------------------------------------------------------------------------------

def test_targets_at_cells_by_hand():
    # the budget case above read at its six cells with demand, in (p, k, t) order:
    # p1 c0 t0 = 30, p1 c0 t1 = 0 (p1's budget is spent in t0), p1 c1 t0 = 30,
    # p1 c1 t1 = 0, p2 c0 t0 = 50, p2 c0 t1 = 70
    tree = org(TWO_TEAMS)
    demand = np.zeros((2, 2, 2))
    demand[0] = 50.0
    demand[1, 0] = 70.0
    cells = np.nonzero(demand > 0)
    got = fair_share_targets_at(tree, np.full((2, 2), 100.0), cells, demand[cells],
                                demand.shape, np.array([60.0, BIG]), *no_usage(tree, 2),
                                Lookback.none())
    np.testing.assert_allclose(got, [30.0, 0.0, 30.0, 0.0, 50.0, 70.0], rtol=0, atol=EXACT)
    with pytest.raises(ValueError):
        fair_share_targets_at(tree, np.full((2, 2), 100.0), cells, demand[cells][:-1],
                              demand.shape, np.array([60.0, BIG]), *no_usage(tree, 2),
                              Lookback.none())


@PROPERTY
@given(target_instances(), st.integers(0, 2**32 - 1), st.sampled_from([0.0, 0.5, 0.9]))
def test_targets_at_cells_are_the_dense_targets_bit_for_bit(instance, seed, sparsity):
    # the planner's sparse path must give the LP the very numbers the dense function gives
    tree, available, demand, headroom, past, planned, lookback = instance
    demand = demand * (np.random.default_rng(seed).random(demand.shape) >= sparsity)
    dense = fair_share_targets(tree, available, demand, headroom, past, planned, lookback)
    cells = np.nonzero(demand > 0)
    got = fair_share_targets_at(tree, available, cells, demand[cells], demand.shape, headroom,
                                past, planned, lookback)
    np.testing.assert_array_equal(got, dense[cells])
    assert not dense[demand == 0].any()  # nothing is lost outside the cells


def test_the_half_life_that_stands_for_a_lookback():
    # a decay's own half-life; a window of W periods: the half-life with the window's mean
    # age, ln 2 · W / 2 (a 7-day window on daily periods: ln 2 · 84 h = 58.22 h, the same on
    # 6-hour periods); no lookback: none (no decay expresses "usage never counts")
    assert Lookback.from_days(half_life_days=3, period_hours=24).half_life_hours(24) == 72
    for ph in (24, 6):
        hours = Lookback.from_days(window_days=7, period_hours=ph).half_life_hours(ph)
        assert hours == pytest.approx(math.log(2) * 84)
    assert Lookback.none().half_life_hours(24) is None
    # the mean age of the decay's weights 2^(−a/h) over a ≥ 0 is h / ln 2 = 84 h, the
    # window's mean age, 168 / 2
    h = math.log(2) * 84
    ages = np.arange(0, 20000) * 0.05
    w = 0.5 ** (ages / h)
    assert (ages * w).sum() / w.sum() == pytest.approx(84, rel=1e-3)
