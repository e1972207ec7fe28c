"""The one org tree's API by id (``Scenario.tree``) and the scenario's array view."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.inputs import load_scenario
from planner.inputs.arrays import ScenarioArrays
from planner.inputs.org import OrgTree
from planner.paths import SAMPLE
from tests.scenario_factory import write_scenario


def org(rows: list[tuple[str, str, float]]) -> OrgTree:
    return OrgTree.from_frame(pd.DataFrame(rows, columns=["id", "parent", "weight"]))


CHAIN = [("c0", "", 1.0), ("c1", "c0", 2.0), ("c2", "c1", 3.0), ("p", "c2", 4.0)]
# siblings listed out of id order: org order (the rows) is kept, never re-sorted
SIBLINGS = [("t", "", 1.0), ("z", "t", 1.0), ("a", "t", 2.0), ("m", "t", 3.0)]
# a project at the top level, beside an area with a team
MIXED = [("solo", "", 5.0), ("A", "", 1.0), ("team", "A", 1.0), ("p1", "team", 1.0),
         ("p2", "A", 2.0)]

# Each case: the rows, then by node what each by-id method answers.
API_CASES = [
    pytest.param(
        [("only", "", 1.0)],
        {"leaves": ("only",), "internal": (), "preorder": ((0, "only"),),
         "nodes": {"only": {"parent": "", "children": (), "depth": 0, "weight": 1.0,
                            "path": ("only",), "leaves_under": ("only",), "project": True}},
         "teams": {"only": "only"}, "top_level": ("only",)},
        id="a-root-project"),
    pytest.param(
        CHAIN,
        {"leaves": ("p",), "internal": ("c0", "c1", "c2"),
         "preorder": ((0, "c0"), (1, "c1"), (2, "c2"), (3, "p")),
         "nodes": {"c0": {"parent": "", "children": ("c1",), "depth": 0, "weight": 1.0,
                          "path": ("c0",), "leaves_under": ("p",), "project": False},
                   "c2": {"parent": "c1", "children": ("p",), "depth": 2, "weight": 3.0,
                          "path": ("c0", "c1", "c2"), "leaves_under": ("p",),
                          "project": False},
                   "p": {"parent": "c2", "children": (), "depth": 3, "weight": 4.0,
                         "path": ("c0", "c1", "c2", "p"), "leaves_under": ("p",),
                         "project": True}},
         "teams": {"p": "c2"}, "top_level": ("c0",)},
        id="deep-chain"),
    pytest.param(
        SIBLINGS,
        {"leaves": ("z", "a", "m"), "internal": ("t",),
         "preorder": ((0, "t"), (1, "z"), (1, "a"), (1, "m")),
         "nodes": {"t": {"parent": "", "children": ("z", "a", "m"), "depth": 0, "weight": 1.0,
                         "path": ("t",), "leaves_under": ("z", "a", "m"), "project": False},
                   "a": {"parent": "t", "children": (), "depth": 1, "weight": 2.0,
                         "path": ("t", "a"), "leaves_under": ("a",), "project": True}},
         "teams": {"z": "t", "a": "t", "m": "t"}, "top_level": ("t",)},
        id="siblings-in-org-order"),
    pytest.param(
        MIXED,
        {"leaves": ("solo", "p1", "p2"), "internal": ("A", "team"),
         "preorder": ((0, "solo"), (0, "A"), (1, "team"), (2, "p1"), (1, "p2")),
         "nodes": {"A": {"parent": "", "children": ("team", "p2"), "depth": 0, "weight": 1.0,
                         "path": ("A",), "leaves_under": ("p1", "p2"), "project": False},
                   "team": {"parent": "A", "children": ("p1",), "depth": 1, "weight": 1.0,
                            "path": ("A", "team"), "leaves_under": ("p1",),
                            "project": False},
                   "solo": {"parent": "", "children": (), "depth": 0, "weight": 5.0,
                            "path": ("solo",), "leaves_under": ("solo",), "project": True}},
         "teams": {"solo": "solo", "p1": "team", "p2": "A"}, "top_level": ("solo", "A")},
        id="a-top-level-project-beside-an-area"),
]


@pytest.mark.parametrize(("rows", "expected"), API_CASES)
def test_org_tree_by_id(rows, expected):
    tree = org(rows)
    assert tree.leaves == expected["leaves"]
    assert tree.internal == expected["internal"]
    assert tree.preorder() == expected["preorder"]
    assert tree.children_of("") == expected["top_level"]
    for node, want in expected["nodes"].items():
        assert node in tree
        assert tree.parent_of(node) == want["parent"]
        assert tree.children_of(node) == want["children"]
        assert tree.depth_of(node) == want["depth"]
        assert tree.weight_of(node) == want["weight"]
        assert tree.path(node) == want["path"]
        assert tree.leaves_under(node) == want["leaves_under"]
        assert tree.is_project(node) is want["project"]
        assert tree.top_level(node) == want["path"][0]
        assert tree.ids[tree.area[tree.index[node]]] == want["path"][0]
    for project, team in expected["teams"].items():
        assert tree.team_of(project) == team
        assert tree.ids[tree.team[tree.leaf_index[project]]] == team
    assert "no-such-node" not in tree


def test_a_1000_deep_chain_is_walked_without_recursion():
    # validation refuses more than 64 levels; the tree itself must not recurse at any depth
    depth = 1000
    rows = [(f"c{i}", f"c{i - 1}" if i else "", 1.0) for i in range(depth)]
    tree = org(rows)
    last = f"c{depth - 1}"
    assert tree.depth_of(last) == depth - 1
    assert tree.path(last) == tuple(f"c{i}" for i in range(depth))
    assert tree.leaves_under("c0") == (last,)
    assert tree.preorder()[-1] == (depth - 1, last)
    assert tree.internal == tuple(f"c{i}" for i in range(depth - 1))
    assert int(tree.area[tree.index[last]]) == 0


def test_sum_up_adds_each_item_to_its_node_and_ancestors():
    # MIXED: solo | A → team → p1, A → p2. p1 reaches team and A; p2 reaches A;
    # "ghost" is no node (skipped); "team" is reached only through p1.
    tree = org(MIXED)
    got = tree.sum_up([("p1", (1.0, 10.0)), ("p2", (2.0, 20.0)), ("solo", (4.0, 40.0)),
                       ("ghost", (8.0, 80.0))])
    assert got == {"p1": [1.0, 10.0], "team": [1.0, 10.0], "A": [3.0, 30.0],
                   "p2": [2.0, 20.0], "solo": [4.0, 40.0]}
    assert tree.sum_up([]) == {}


@st.composite
def trees(draw) -> list[tuple[str, str, float]]:
    """A random forest: node i's parent is an earlier node or none; rows then shuffled."""
    n = draw(st.integers(1, 25))
    parents = [draw(st.integers(-1, i - 1)) for i in range(n)]
    rows = [(f"n{i}", f"n{p}" if p >= 0 else "", float(draw(st.integers(1, 9))))
            for i, p in enumerate(parents)]
    return draw(st.permutations(rows))


@settings(deadline=None, max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(trees())
def test_org_tree_invariants(rows):
    tree = org(rows)
    parent = {node: up for node, up, _ in rows}
    # preorder: every node once, each right after an ancestor chain, depth = path length − 1
    order = tree.preorder()
    assert sorted(node for _, node in order) == sorted(parent)
    seen: set[str] = set()
    for depth, node in order:
        assert parent[node] == "" or parent[node] in seen
        assert depth == len(tree.path(node)) - 1 == tree.depth_of(node)
        seen.add(node)
    for node in parent:
        path = tree.path(node)
        assert path[-1] == node and tree.parent_of(path[0]) == ""
        assert all(tree.parent_of(b) == a for a, b in zip(path, path[1:], strict=False))
        # the projects under a node are the leaves whose path passes through it
        assert tree.leaves_under(node) == tuple(p for p in tree.leaves if node in tree.path(p))
    # internal nodes, parents first; leaves are exactly the childless nodes
    assert set(tree.internal) == {up for up in parent.values() if up}
    position = {node: i for i, node in enumerate(tree.internal)}
    assert all(position[tree.parent_of(n)] < position[n] for n in tree.internal
               if tree.parent_of(n))
    assert set(tree.leaves) == set(parent) - set(tree.internal)
    # sum_up item by item agrees with the vectorised subtree sum
    values = np.arange(1.0, len(tree.leaves) + 1.0)
    by_item = tree.sum_up((p, (v,)) for p, v in zip(tree.leaves, values, strict=True))
    by_array = tree.subtree_sum(values)
    assert all(by_item[n][0] == by_array[tree.index[n]] for n in parent)
    # the top-level children partition the leaves
    assert sorted(p for top in tree.children_of("") for p in tree.leaves_under(top)) == sorted(
        tree.leaves)


# --------------------------------------------------------------------------- the array view


def pandas_arrays(scenario) -> dict[str, np.ndarray]:
    """The same arrays recomputed with pandas, from the tables alone."""
    projects = list(scenario.tree.leaves)
    clusters = scenario.clusters.set_index("cluster")
    budgets = scenario.budgets.set_index("project")
    budget = budgets["gpu_hours"].reindex(projects, fill_value=0.0).to_numpy(dtype=float)
    rates = pd.Series(dict(scenario.config.gpu_rates), dtype=float)
    rate = clusters["gpu_type"].map(rates).fillna(1.0).to_numpy(dtype=float)
    pairs = budgets["clusters"].explode().dropna()
    listed = pd.crosstab(pairs.index, pairs.to_numpy()).reindex(
        index=projects, columns=clusters.index, fill_value=0) > 0
    restricted = budgets["clusters"].map(len).reindex(projects, fill_value=0) > 0
    allowed = listed.to_numpy() | ~restricted.to_numpy()[:, None]
    return {"budget": budget, "rate": rate, "allowed": allowed,
            "gpus": (clusters["nodes"] * clusters["gpus_per_node"]).to_numpy(),
            "nodes": clusters["nodes"].to_numpy(),
            "gpus_per_node": clusters["gpus_per_node"].to_numpy()}


def test_the_sample_arrays_match_pandas():
    scenario = load_scenario(SAMPLE)
    arrays = scenario.arrays
    assert arrays.projects == scenario.tree.leaves
    assert arrays.clusters == tuple(scenario.clusters["cluster"])
    want = pandas_arrays(scenario)
    for name, values in want.items():
        np.testing.assert_array_equal(getattr(arrays, name), values, err_msg=name)
    assert arrays.allowed.sum() < arrays.allowed.size  # the sample restricts some projects
    assert scenario.arrays is arrays and scenario.tree is scenario.tree  # built once
    later = scenario.with_as_of(scenario.config.as_of + pd.Timedelta(days=1))
    assert later.tree is scenario.tree and later.arrays is arrays  # as_of changes neither
    with pytest.raises(ValueError):
        arrays.budget[0] = 1.0  # read-only


def test_arrays_by_hand(tmp_path: Path):
    # two clusters, an unlisted GPU type (rate 1.0), one project restricted to the second
    # cluster and one without a budget row (budget 0, every cluster allowed)
    folder = write_scenario(
        tmp_path,
        clusters="cluster,gpu_type,nodes,gpus_per_node\nh,H100,2,8\nx,X9,3,4\n",
        org="id,parent,weight\nT,,1\np1,T,1\np2,T,1\n",
        budgets="project,gpu_hours,clusters\np1,100,x\n",
        demand=None, reservations=None, usage=None)
    scenario = load_scenario(folder)
    arrays = ScenarioArrays.from_scenario(scenario)
    assert arrays.projects == ("p1", "p2") and arrays.clusters == ("h", "x")
    np.testing.assert_array_equal(arrays.budget, [100.0, 0.0])
    np.testing.assert_array_equal(arrays.gpus, [16, 12])
    np.testing.assert_array_equal(arrays.rate, [1.0, 1.0])
    np.testing.assert_array_equal(arrays.allowed, [[False, True], [True, True]])
    for name, values in pandas_arrays(scenario).items():
        np.testing.assert_array_equal(getattr(arrays, name), values, err_msg=name)
