"""The org tree: institute → areas → teams → projects, any depth; the one tree of the package.

Built once per scenario (:attr:`planner.inputs.scenario.Scenario.tree`) and used by the
fair share, the model, the simulator, the reports, ``explain``, ``status`` and the
exporters. Nodes are addressed by position (arrays) or by id (the ``*_of`` / ``*_ids``
helpers); every walk up or down the tree is iterative, so any depth works.

Indices
    i ∈ N  nodes, in ``org.csv`` row order (positions into :attr:`OrgTree.ids`)
    p ∈ P  projects, the leaves, in ``org.csv`` row order — the project axis used
           everywhere (:attr:`OrgTree.leaves`)

Data
    parent[i]   parent node of i, −1 for a top-level node (a child of the virtual root)
    weight[i]   i's share among its siblings (> 0)
    depth[i]    0 for top-level nodes, depth[parent] + 1 below
    area[i]     the top-level node above i (i itself at top level)
    team[p]     a project's parent (the project itself at top level)

Subtree sums (:meth:`OrgTree.subtree_sum`): for values v_p on the leaves,

    V_i = Σ_{p ∈ leaves under i} v_p     (V_p = v_p for a leaf)

computed bottom-up one depth at a time, each depth a single segmented sum.

The tree is immutable: its arrays are read-only and derived structures are
computed once, on first use.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd


@dataclass(frozen=True, eq=False)
class SiblingBatch:
    """Sibling groups filled together: one row per parent, children padded to a width.

    ``parents[g]`` is the parent node of group g (−1: the virtual root);
    ``children[g, j]`` its j-th child in org order, or ``n_nodes`` (a pad) where
    ``mask[g, j]`` is False.
    """

    parents: np.ndarray  # (G,) int
    children: np.ndarray  # (G, M) int, padded with n_nodes
    mask: np.ndarray  # (G, M) bool, True for a real child


@dataclass(frozen=True, eq=False)
class OrgTree:
    """An immutable org tree; build it with :meth:`OrgTree.from_frame`."""

    ids: tuple[str, ...]
    parent: np.ndarray  # (N,) int64, −1 for top level
    weight: np.ndarray  # (N,) float64, > 0

    @classmethod
    def from_frame(cls, org: pd.DataFrame) -> OrgTree:
        """The tree of a validated ``org`` frame: columns id, parent ("" = top level), weight.

        Raises ``ValueError`` for duplicate ids, unknown parents and cycles (the input
        should be validated before; this only refuses to build a wrong tree).
        """
        ids = tuple(str(i) for i in org["id"])
        index = {node: i for i, node in enumerate(ids)}
        if len(index) != len(ids):
            raise ValueError("org: ids are not unique")
        parent = np.full(len(ids), -1, dtype=np.int64)
        for i, name in enumerate(org["parent"]):
            if pd.isna(name) or str(name) == "":
                continue
            if str(name) not in index:
                raise ValueError(f"org: parent {name!r} of {ids[i]!r} is not an id")
            parent[i] = index[str(name)]
        weight = org["weight"].to_numpy(dtype=np.float64).copy()
        if not np.all(weight > 0):
            raise ValueError("org: every weight must be > 0")
        parent.setflags(write=False)
        weight.setflags(write=False)
        tree = cls(ids, parent, weight)
        _ = tree.depth  # raises on a cycle
        return tree

    # -- structure ---------------------------------------------------------------------

    @property
    def n_nodes(self) -> int:
        """Number of nodes N."""
        return len(self.ids)

    @cached_property
    def index(self) -> dict[str, int]:
        """Node id → position in :attr:`ids`."""
        return {node: i for i, node in enumerate(self.ids)}

    @cached_property
    def _children(self) -> tuple[tuple[int, ...], ...]:
        kids: list[list[int]] = [[] for _ in self.ids]
        for i, up in enumerate(self.parent):
            if up >= 0:
                kids[up].append(i)
        return tuple(tuple(k) for k in kids)

    @cached_property
    def top(self) -> tuple[int, ...]:
        """The top-level nodes (children of the virtual root), in org order."""
        return tuple(int(i) for i in np.flatnonzero(self.parent < 0))

    def children(self, i: int) -> tuple[int, ...]:
        """Positions of node ``i``'s children, in org order (``()`` for a leaf)."""
        return self._children[i]

    @cached_property
    def depth(self) -> np.ndarray:
        """(N,) depth of each node: 0 at top level."""
        depth = np.full(self.n_nodes, -1, dtype=np.int64)
        for start in range(self.n_nodes):
            path = []
            i = start
            while i >= 0 and depth[i] < 0:
                path.append(i)
                if len(path) > self.n_nodes:
                    raise ValueError(f"org: {self.ids[start]!r} is on a cycle")
                i = int(self.parent[i])
            below = -1 if i < 0 else int(depth[i])
            for step, node in enumerate(reversed(path), start=1):
                depth[node] = below + step
        depth.setflags(write=False)
        return depth

    @cached_property
    def is_leaf(self) -> np.ndarray:
        """(N,) True for nodes without children (projects)."""
        leaf = np.ones(self.n_nodes, dtype=bool)
        leaf[self.parent[self.parent >= 0]] = False
        leaf.setflags(write=False)
        return leaf

    @cached_property
    def leaf_nodes(self) -> np.ndarray:
        """(P,) node position of each leaf, in org order."""
        nodes = np.flatnonzero(self.is_leaf)
        nodes.setflags(write=False)
        return nodes

    @cached_property
    def leaves(self) -> tuple[str, ...]:
        """Leaf (project) ids in org row order: the project axis P."""
        return tuple(self.ids[i] for i in self.leaf_nodes)

    @cached_property
    def leaf_index(self) -> dict[str, int]:
        """Project id → position in :attr:`leaves`."""
        return {p: j for j, p in enumerate(self.leaves)}

    def ancestors(self, node: str) -> tuple[str, ...]:
        """The path up from ``node``: its parent, grandparent, … the top-level node.

        Empty for a top-level node; ``node`` itself is not included.
        """
        path = []
        i = int(self.parent[self.index[node]])
        while i >= 0:
            path.append(self.ids[i])
            i = int(self.parent[i])
        return tuple(path)

    def top_level(self, node: str) -> str:
        """The top-level node (area) above ``node`` (``node`` itself if top level)."""
        up = self.ancestors(node)
        return up[-1] if up else node

    @cached_property
    def top_down(self) -> tuple[int, ...]:
        """Internal nodes, parents before children: by depth, then org order."""
        internal = np.flatnonzero(~self.is_leaf)
        order = np.lexsort((internal, self.depth[internal]))
        return tuple(int(i) for i in internal[order])

    # -- by id ---------------------------------------------------------------------------

    def __contains__(self, node: object) -> bool:
        """Whether ``node`` is an id of the tree."""
        return node in self.index

    def parent_of(self, node: str) -> str:
        """The parent id of ``node``, ``""`` for a top-level node."""
        up = int(self.parent[self.index[node]])
        return self.ids[up] if up >= 0 else ""

    def weight_of(self, node: str) -> float:
        """``node``'s weight among its siblings."""
        return float(self.weight[self.index[node]])

    def depth_of(self, node: str) -> int:
        """``node``'s depth: 0 at top level."""
        return int(self.depth[self.index[node]])

    def children_of(self, node: str) -> tuple[str, ...]:
        """Ids of ``node``'s children in org order; ``""`` (the virtual root): the top level."""
        kids = self.top if node == "" else self.children(self.index[node])
        return tuple(self.ids[i] for i in kids)

    def path(self, node: str) -> tuple[str, ...]:
        """The path down to ``node``: its top-level node, …, its parent, ``node``."""
        return (*reversed(self.ancestors(node)), node)

    def is_project(self, node: str) -> bool:
        """Whether ``node`` is a leaf (a project)."""
        return bool(self.is_leaf[self.index[node]])

    @cached_property
    def internal(self) -> tuple[str, ...]:
        """Ids of the internal nodes (areas, teams), parents first (:attr:`top_down`)."""
        return tuple(self.ids[i] for i in self.top_down)

    @cached_property
    def area(self) -> np.ndarray:
        """(N,) position of the top-level node above each node (itself at top level)."""
        area = np.arange(self.n_nodes, dtype=np.int64)
        for i in np.argsort(self.depth, kind="stable"):  # parents before children
            if self.parent[i] >= 0:
                area[i] = area[self.parent[i]]
        area.setflags(write=False)
        return area

    @cached_property
    def team(self) -> np.ndarray:
        """(P,) node position of each project's team: its parent, itself at top level."""
        up = self.parent[self.leaf_nodes]
        team = np.where(up >= 0, up, self.leaf_nodes)
        team.setflags(write=False)
        return team

    def team_of(self, project: str) -> str:
        """The team (parent) of ``project``; the project itself at top level."""
        return self.parent_of(project) or project

    def leaves_under(self, node: str) -> tuple[str, ...]:
        """The projects in ``node``'s subtree (``node`` itself for a project), in org order."""
        i = self.index[node]
        inside = np.zeros(self.n_nodes, dtype=bool)
        inside[i] = True
        for j in np.argsort(self.depth, kind="stable"):  # parents before children
            if self.parent[j] >= 0 and inside[self.parent[j]]:
                inside[j] = True
        return tuple(self.ids[j] for j in self.leaf_nodes if inside[j])

    def preorder(self) -> tuple[tuple[int, str], ...]:
        """(depth, id) of every node, depth first, children in org order (a stack, no recursion)."""
        out: list[tuple[int, str]] = []
        stack = [(0, i) for i in reversed(self.top)]
        while stack:
            depth, i = stack.pop()
            out.append((depth, self.ids[i]))
            stack += [(depth + 1, kid) for kid in reversed(self.children(i))]
        return tuple(out)

    def sum_up(self, items: Iterable[tuple[str, Sequence[float]]]) -> dict[str, list[float]]:
        """Per node, the sum of the ``(node, values)`` items at it or below it.

        Each item's values are added to its node and to every ancestor, item by item in
        the order given (so the floating-point sums do not depend on the tree's shape);
        items whose node is not in the tree are skipped. Nodes no item reaches are absent.
        For whole arrays over the leaves, :meth:`subtree_sum` is the vectorised form.
        """
        out: dict[str, list[float]] = {}
        for node, values in items:
            if node not in self.index:
                continue
            for at in (node, *self.ancestors(node)):
                acc = out.setdefault(at, [0.0] * len(values))
                for j, value in enumerate(values):
                    acc[j] += value
        return out

    # -- sums over subtrees --------------------------------------------------------------

    @cached_property
    def _bottom_up(self) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]:
        """Per depth, deepest first: (children sorted by parent, their parents, segment starts)."""
        steps = []
        for d in range(int(self.depth.max(initial=0)), 0, -1):
            nodes = np.flatnonzero(self.depth == d)
            nodes = nodes[np.argsort(self.parent[nodes], kind="stable")]
            ups, starts = np.unique(self.parent[nodes], return_index=True)
            steps.append((nodes, ups, starts))
        return tuple(steps)

    def subtree_sum(self, values_by_leaf: np.ndarray) -> np.ndarray:
        """V_i = Σ of ``values_by_leaf`` over the leaves under i, for every node.

        ``values_by_leaf`` has the leaf axis P first and any trailing shape; the
        result has the node axis N first and the same trailing shape.
        """
        values = np.asarray(values_by_leaf)
        if values.shape[:1] != (len(self.leaf_nodes),):
            raise ValueError(f"expected a leading leaf axis of {len(self.leaf_nodes)}, "
                             f"got shape {values.shape}")
        out = np.zeros((self.n_nodes, *values.shape[1:]),
                       dtype=np.result_type(values.dtype, np.float64))
        out[self.leaf_nodes] = values
        for nodes, ups, starts in self._bottom_up:
            out[ups] += np.add.reduceat(out[nodes], starts, axis=0)
        return out

    # -- the order of the water-filling --------------------------------------------------

    @cached_property
    def sibling_batches(self) -> tuple[SiblingBatch, ...]:
        """Sibling groups in top-down order, batched for vectorised water-filling.

        First the virtual root's group (the top-level nodes), then, depth by depth,
        the children of every internal node. Groups of one depth are independent;
        they are batched by child count (rounded up to a power of two, to keep the
        padding small). Every parent's batch comes after its own parent's.
        """
        n = self.n_nodes
        if not self.top:
            return ()
        batches = [_batch(np.array([-1]), [self.top], n)]
        internal = list(self.top_down)
        for d in sorted({int(self.depth[i]) for i in internal}):
            at_depth = [i for i in internal if self.depth[i] == d]
            width = {i: 1 << (len(self.children(i)) - 1).bit_length() for i in at_depth}
            for w in sorted(set(width.values())):
                parents = [i for i in at_depth if width[i] == w]
                batches.append(_batch(np.array(parents), [self.children(i) for i in parents], n))
        return tuple(batches)


def _batch(parents: np.ndarray, kids: list[tuple[int, ...]], pad: int) -> SiblingBatch:
    width = max(len(k) for k in kids)
    children = np.full((len(kids), width), pad, dtype=np.int64)
    for g, k in enumerate(kids):
        children[g, : len(k)] = k
    return SiblingBatch(parents.astype(np.int64), children, children != pad)
