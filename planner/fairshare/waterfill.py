"""Weighted max-min water-filling with demand caps and offsets, flat and hierarchical.

Flat (:func:`water_fill`), for each resource k independently

    Indices  i ∈ 1..n  claimants (siblings);  k ∈ K  resources (clusters)
    Data     C_k ≥ 0 capacity;  D_ik ≥ 0 demand;  w_i > 0 weight;  U_ik offset (usage)

    x_ik = min(D_ik, max(0, λ_k·w_i − U_ik)),   λ_k such that  Σ_i x_ik = min(C_k, Σ_i D_ik)

The contract's fair share: the quantity balanced among siblings is offset plus
grant, (U_i + x_i)/w_i, raised to a common level λ for everyone not capped by
their demand; a claimant whose offset is already above the level gets nothing.

Exact solution: S_k(λ) = Σ_i x_ik(λ) is continuous, non-decreasing and piecewise
linear, with breakpoints a_i = U_i/w_i (i starts receiving) and b_i = a_i + D_i/w_i
(i is capped). Between consecutive sorted breakpoints, with A the claimants
receiving and Z those capped,

    S(λ) = Σ_{i∈Z} D_i + Σ_{i∈A} (λ·w_i − U_i),

so λ solves that linear equation on the segment where S crosses min(C, ΣD).
Levels are shifted by min_i a_i first (x is unchanged), so large common offsets
cost no precision. If ΣD ≤ C every claimant gets its demand; if C = 0, nothing.

Hierarchical (:func:`hierarchical_water_fill`), the contract's rule: at the
virtual root C_k is water-filled among the top-level nodes with D_i = the
subtree's demand Σ_{p under i} D_pk and U_i = the subtree's offset; each node's
grant is then water-filled among its children the same way, down to the
projects. Sibling groups at one depth are solved together, vectorised over the
clusters (:attr:`~planner.inputs.org.OrgTree.sibling_batches`).
"""

from __future__ import annotations

import numpy as np

from planner.inputs.org import OrgTree


def water_fill(capacity: float | np.ndarray, demand: np.ndarray, weight: np.ndarray,
               offset: np.ndarray | None = None) -> np.ndarray:
    """Weighted max-min grants x with demand caps and offsets (see the module docstring).

    ``demand`` is (n,) or (n, K) for K independent resources; ``capacity`` a scalar
    or (K,); ``weight`` (n,), all > 0; ``offset`` None, (n,) or (n, K). The result
    has the shape of ``demand``.
    """
    demand = np.asarray(demand, dtype=np.float64)
    flat = demand.ndim == 1
    if flat:
        demand = demand[:, None]
    if demand.ndim != 2:
        raise ValueError(f"demand must be (n,) or (n, K), got shape {demand.shape}")
    n, k = demand.shape
    capacity = _capacity(capacity, k)
    weight = np.asarray(weight, dtype=np.float64)
    if weight.shape != (n,):
        raise ValueError(f"weight must be ({n},), got shape {weight.shape}")
    _check(demand, weight, offset)
    offset_rows = _offset_rows(offset, n, k)
    x = _fill_rows(capacity, demand.T, np.broadcast_to(weight, (k, n)), offset_rows).T
    return x[:, 0] if flat else x


def hierarchical_water_fill(tree: OrgTree, capacity: float | np.ndarray, demand: np.ndarray,
                            offset: np.ndarray | None = None) -> np.ndarray:
    """The contract's hierarchical water-filling of ``capacity`` down ``tree``.

    ``demand`` is (P,) or (P, K) over ``tree.leaves``; ``capacity`` a scalar or (K,);
    ``offset`` None, (P,) or (P, K) usage per leaf (summed up the tree). Returns the
    grants per leaf, shaped like ``demand``.
    """
    demand = np.asarray(demand, dtype=np.float64)
    flat = demand.ndim == 1
    if flat:
        demand = demand[:, None]
    n_leaves = len(tree.leaves)
    if demand.ndim != 2 or demand.shape[0] != n_leaves:
        raise ValueError(f"demand must be ({n_leaves},) or ({n_leaves}, K), "
                         f"got shape {demand.shape}")
    k = demand.shape[1]
    capacity = _capacity(capacity, k)
    _check(demand, tree.weight, offset)
    n = tree.n_nodes
    # row n of the extended arrays is the pad of SiblingBatch.children
    node_demand = np.zeros((n + 1, k))
    node_demand[:n] = tree.subtree_sum(demand)
    weight = np.append(tree.weight, 1.0)
    if offset is None:
        node_offset = np.zeros((n + 1, 1))
    else:
        offset = np.asarray(offset, dtype=np.float64)
        if offset.shape not in ((n_leaves,), (n_leaves, k)):
            raise ValueError(f"offset must be ({n_leaves},) or ({n_leaves}, {k}), "
                             f"got shape {offset.shape}")
        node_offset = np.zeros((n + 1, 1 if offset.ndim == 1 else k))
        node_offset[:n] = tree.subtree_sum(offset.reshape(n_leaves, -1))
    grant = np.zeros((n, k))
    for batch in tree.sibling_batches:
        groups, width = batch.children.shape
        parent_grant = capacity[None, :] if batch.parents[0] < 0 else grant[batch.parents]
        rows = (groups, k, width)  # one row per (group, cluster): the siblings of the group
        d = node_demand[batch.children].transpose(0, 2, 1).reshape(-1, width)
        w = np.broadcast_to(weight[batch.children][:, None, :], rows).reshape(-1, width)
        u = np.broadcast_to(node_offset[batch.children].transpose(0, 2, 1), rows)
        x = _fill_rows(parent_grant.reshape(-1), d, w, u.reshape(-1, width))
        grant[batch.children[batch.mask]] = x.reshape(rows).transpose(0, 2, 1)[batch.mask]
    leaf_grant = grant[tree.leaf_nodes]
    return leaf_grant[:, 0] if flat else leaf_grant


def _capacity(capacity: float | np.ndarray, k: int) -> np.ndarray:
    capacity = np.asarray(capacity, dtype=np.float64)
    if capacity.ndim == 0:
        capacity = np.full(k, float(capacity))
    if capacity.shape != (k,):
        raise ValueError(f"capacity must be a scalar or ({k},), got shape {capacity.shape}")
    if not np.all(np.isfinite(capacity) & (capacity >= 0)):
        raise ValueError("capacity must be finite and ≥ 0")
    return capacity


def _check(demand: np.ndarray, weight: np.ndarray, offset: np.ndarray | None) -> None:
    if not np.all(np.isfinite(demand) & (demand >= 0)):
        raise ValueError("demand must be finite and ≥ 0")
    if not np.all(np.isfinite(weight) & (weight > 0)):
        raise ValueError("weights must be finite and > 0")
    if offset is not None and not np.all(np.isfinite(offset)):
        raise ValueError("offsets must be finite")


def _offset_rows(offset: np.ndarray | None, n: int, k: int) -> np.ndarray:
    """The offsets as (K, n) rows."""
    if offset is None:
        return np.zeros((k, n))
    offset = np.asarray(offset, dtype=np.float64)
    if offset.shape == (n,):
        return np.broadcast_to(offset, (k, n))
    if offset.shape == (n, k):
        return offset.T
    raise ValueError(f"offset must be ({n},) or ({n}, {k}), got shape {offset.shape}")


def _fill_rows(capacity: np.ndarray, demand: np.ndarray, weight: np.ndarray,
               offset: np.ndarray) -> np.ndarray:
    """Water-fill each row independently: capacity (L,), the rest (L, n) → grants (L, n)."""
    total = demand.sum(axis=1)
    x = np.array(demand, dtype=np.float64)  # rows with ΣD ≤ C: x = D
    x[capacity <= 0] = 0.0
    rows = np.flatnonzero((capacity < total) & (capacity > 0))
    if rows.size:
        x[rows] = _solve_level(capacity[rows], demand[rows], weight[rows], offset[rows])
    return x


def _solve_level(target: np.ndarray, demand: np.ndarray, weight: np.ndarray,
                 offset: np.ndarray) -> np.ndarray:
    """Rows with 0 < target < ΣD: find λ on its segment of S(λ), return the grants."""
    n_rows, n = demand.shape
    wanting = demand > 0  # claimants with D = 0 never receive; parked at the lowest level
    start = np.where(wanting, offset / weight, np.inf)
    start = np.where(wanting, start - start.min(axis=1, keepdims=True), 0.0)  # a_i, min 0
    stop = start + demand / weight  # b_i
    # events at the sorted breakpoints: a_i adds i to the receiving set A, b_i moves it to Z
    level = np.concatenate([start, stop], axis=1)
    d_w = np.concatenate([weight, -weight], axis=1)
    d_wa = np.concatenate([weight * start, -(weight * start)], axis=1)
    d_cap = np.concatenate([np.zeros_like(demand), demand], axis=1)
    order = np.argsort(level, axis=1, kind="stable")
    level = np.take_along_axis(level, order, axis=1)
    w_active = np.cumsum(np.take_along_axis(d_w, order, axis=1), axis=1)  # Σ_A w_i
    wa_active = np.cumsum(np.take_along_axis(d_wa, order, axis=1), axis=1)  # Σ_A w_i a_i
    capped = np.cumsum(np.take_along_axis(d_cap, order, axis=1), axis=1)  # Σ_Z D_i
    filled = capped + w_active * level - wa_active  # S at each breakpoint
    reached = filled >= target[:, None]
    # first breakpoint where S reaches the target; λ lies on the segment just before it
    upper = np.where(reached.any(axis=1), reached.argmax(axis=1), 2 * n - 1)
    upper = np.maximum(upper, 1)
    lower = upper - 1
    r = np.arange(n_rows)
    slope = w_active[r, lower]
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = (target - capped[r, lower] + wa_active[r, lower]) / slope
    lam = np.where(slope > 0, lam, level[r, upper])
    lam = np.clip(lam, level[r, lower], level[r, upper])
    return np.clip(weight * (lam[:, None] - start), 0.0, demand)
