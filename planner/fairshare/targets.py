"""Per-period fair-share targets: what the elastic LP aims at, in NGH.

Indices
    p ∈ P  projects (``tree.leaves``);  k ∈ K  clusters;  t ∈ 0..T−1  planning periods;
    h ∈ 0..H−1  periods before the first planning period (oldest first)

Data (NGH)
    A_kt      elastic capacity after reservations (``available``)
    d_pkt     elastic demand, 0 where p may not use k (``demand``)
    B_p ≥ 0   budget left for guaranteed elastic grants over the horizon (``headroom``)
    u_ph      past usage (``past_usage``);  r_pt  usage planned besides the targets,
              i.e. reservations (``planned_usage``)
    ω(a)      the lookback weight of usage a periods back (:mod:`planner.fairshare.lookback`)

Period by period, t = 0, 1, …:

    (1) offset     U_pt = Σ_{s < t} ω(t − s) · (Σ_k τ_pks + r_ps)  +  Σ_h ω(t + H − h) · u_ph
                   (on a mixed grid the ages t − s count lookback periods between the
                   periods' starts, :func:`usage_ages`)
    (2) cap        c_pkt = min(d_pkt, B_pt),   B_p0 = B_p
    (3) fill       τ_·,·,t = hierarchical_water_fill(tree, A_·t, c_··t, U_·t)
    (4) budget     if Σ_k τ_pkt > B_pt, scale τ_p·t by B_pt / Σ_k τ_pkt
    (5) headroom   B_p,t+1 = B_pt − Σ_k τ_pkt

(3) is the contract's hierarchical weighted max-min with demand caps; (1) its
lookback, with the targets of earlier planning periods counting as usage, so a
team that ran hot (or is planned to) yields first later on. (4) leaves the cut
share unassigned in t; the LP, not the targets, decides who uses it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from planner.fairshare.lookback import Lookback
from planner.fairshare.waterfill import hierarchical_water_fill
from planner.inputs.org import OrgTree


def fair_share_targets(tree: OrgTree, available: np.ndarray, demand: np.ndarray,
                       headroom: np.ndarray, past_usage: np.ndarray,
                       planned_usage: np.ndarray, lookback: Lookback,
                       positions: np.ndarray | None = None) -> np.ndarray:
    """Targets τ (P, K, T) in NGH, by (1)–(5) of the module docstring.

    Shapes: ``available`` (K, T), ``demand`` (P, K, T), ``headroom`` (P,),
    ``past_usage`` (P, H) with H ≥ 0, ``planned_usage`` (P, T). ``positions`` (T,): on a
    mixed grid, each planning period's start in lookback periods after the first one
    (:func:`usage_ages`); ``None``: 0, 1, 2, … (the uniform grid).
    """
    demand = np.asarray(demand, dtype=np.float64)
    if demand.ndim != 3 or demand.shape[0] != len(tree.leaves):
        raise ValueError(f"demand must be ({len(tree.leaves)}, K, T), got shape {demand.shape}")
    # one (P, K) block a period, contiguous: slicing [:, :, t] of a (P, K, T) array would
    # gather with a stride of T over the whole array each period
    by_period = np.ascontiguousarray(np.moveaxis(demand, 2, 0))
    targets = np.zeros(by_period.shape)
    for t, grant in _period_grants(tree, available, by_period.__getitem__, demand.shape,
                                   headroom, past_usage, planned_usage, lookback, positions):
        targets[t] = grant
    return np.moveaxis(targets, 0, 2)


def fair_share_targets_at(tree: OrgTree, available: np.ndarray,
                          cells: tuple[np.ndarray, np.ndarray, np.ndarray],
                          demand: np.ndarray, shape: tuple[int, int, int],
                          headroom: np.ndarray, past_usage: np.ndarray,
                          planned_usage: np.ndarray, lookback: Lookback,
                          positions: np.ndarray | None = None) -> np.ndarray:
    """:func:`fair_share_targets` read at ``cells`` only, without a (P, K, T) array.

    ``cells`` (p, k, t) index arrays hold every cell with demand > 0 of the (P, K, T)
    ``shape``, ``demand`` (NGH) theirs; the demand elsewhere is 0, so are the targets
    there (a grant never exceeds its demand). Each period's (P, K) block is filled from
    the cells and water-filled exactly as the dense function does it, so the targets
    at ``cells`` are the same numbers, bit for bit.
    """
    p, k, t = (np.asarray(index, dtype=np.int64) for index in cells)
    demand = np.asarray(demand, dtype=np.float64)
    if len(shape) != 3 or shape[0] != len(tree.leaves):
        raise ValueError(f"shape must be ({len(tree.leaves)}, K, T), got {shape}")
    if not (len(p) == len(k) == len(t) == len(demand)):
        raise ValueError("cells and demand must have one length")
    order = np.argsort(t, kind="stable")
    bounds = np.searchsorted(t[order], np.arange(shape[2] + 1))
    block = np.zeros(shape[:2])
    out = np.zeros(len(demand))

    def period_block(period: int) -> np.ndarray:
        block.fill(0.0)
        at = order[bounds[period]:bounds[period + 1]]
        block[p[at], k[at]] = demand[at]
        return block

    for period, grant in _period_grants(tree, available, period_block, shape, headroom,
                                        past_usage, planned_usage, lookback, positions):
        at = order[bounds[period]:bounds[period + 1]]
        out[at] = grant[p[at], k[at]]
    return out


def _period_grants(tree: OrgTree, available: np.ndarray,
                   period_demand: Callable[[int], np.ndarray], shape: tuple[int, int, int],
                   headroom: np.ndarray, past_usage: np.ndarray, planned_usage: np.ndarray,
                   lookback: Lookback, positions: np.ndarray | None
                   ) -> Iterator[tuple[int, np.ndarray]]:
    """(t, τ_··t) for t = 0, 1, …: steps (1)–(5); ``period_demand(t)`` is d_··t (P, K)."""
    n_projects, n_clusters, n_periods = shape
    available = _shaped(available, (n_clusters, n_periods), "available")
    remaining = _shaped(headroom, (n_projects,), "headroom").copy()
    planned_usage = _shaped(planned_usage, (n_projects, n_periods), "planned_usage")
    past_usage = np.asarray(past_usage, dtype=np.float64)
    if past_usage.ndim != 2 or past_usage.shape[0] != n_projects:
        raise ValueError(f"past_usage must be ({n_projects}, H), got shape {past_usage.shape}")
    if np.any(remaining < 0):
        raise ValueError("headroom must be ≥ 0")
    n_past = past_usage.shape[1]
    # usage by period on one axis: the H past periods, then the T planning periods
    usage = np.concatenate([past_usage, planned_usage], axis=1)
    for t in range(n_periods):
        now = n_past + t
        omega = lookback.weights(usage_ages(t, n_past, positions))
        seen = np.flatnonzero(omega)
        offset = usage[:, seen] @ omega[seen]  # (1)
        capped = np.minimum(period_demand(t), remaining[:, None])  # (2)
        grant = hierarchical_water_fill(tree, available[:, t], capped, offset)  # (3)
        spent = grant.sum(axis=1)
        over = np.flatnonzero(spent > remaining)
        if over.size:  # (4)
            grant[over] *= (remaining[over] / spent[over])[:, None]
            spent[over] = grant[over].sum(axis=1)
        yield t, grant
        usage[:, now] += spent
        # (5); the floor only absorbs rounding of (4): spent ≤ remaining up to an ulp
        remaining = np.maximum(remaining - spent, 0.0)


def usage_ages(t: int, n_past: int, positions: np.ndarray | None) -> np.ndarray:
    """Ages, in lookback periods, of the usage columns before planning period t.

    The columns are the H past periods, then the planning periods before t. Uniform
    grid (``positions`` None): now, now − 1, …, 1 with now = H + t. Mixed grid: a column's
    age is how many lookback periods (``period_hours``) its start lies before t's, so a
    coarse period counts whole at the age of its start (its usage is not split).
    """
    now = n_past + t
    if positions is None:
        return now - np.arange(now)
    axis = np.concatenate([np.arange(n_past, dtype=float), n_past + positions[:t]])
    return (n_past + positions[t]) - axis


def _shaped(values: np.ndarray, shape: tuple[int, ...], name: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite")
    return array
