"""One array view of a scenario's budgets, rates, capacities and allowed clusters.

Indices
    p ∈ P  projects, the org tree's leaves in org order (:attr:`OrgTree.leaves`)
    k ∈ K  clusters, in ``clusters.csv`` (sorted) order

Data
    budget[p]        quarter budget, NGH (0 for a project without a budgets row)
    nodes[k], gpus_per_node[k], gpus[k] = nodes[k] · gpus_per_node[k]   (GPUs)
    rate[k]          NGH per GPU-hour of k's GPU type (``scenario.toml``; 1.0 if unlisted)
    allowed[p, k]    whether p may run on k (``budgets.csv``'s ``clusters``; empty = all)

Built once per scenario (:attr:`planner.inputs.scenario.Scenario.arrays`); every array is
read-only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from planner.inputs.scenario import Scenario


def _frozen(values: np.ndarray) -> np.ndarray:
    values.setflags(write=False)
    return values


@dataclass(frozen=True, eq=False)
class ScenarioArrays:
    """The (P,) and (K,) arrays of a scenario; build it with :meth:`from_scenario`."""

    projects: tuple[str, ...]
    clusters: tuple[str, ...]
    gpu_type: tuple[str, ...]
    budget: np.ndarray  # (P,) NGH
    nodes: np.ndarray  # (K,) int64
    gpus_per_node: np.ndarray  # (K,) int64
    gpus: np.ndarray  # (K,) int64
    rate: np.ndarray  # (K,) NGH per GPU-hour
    allowed: np.ndarray  # (P, K) bool
    project_index: dict[str, int]
    cluster_index: dict[str, int]

    @classmethod
    def from_scenario(cls, scenario: Scenario) -> ScenarioArrays:
        """The arrays of a validated scenario (every budget row names a project of the tree)."""
        projects = scenario.tree.leaves
        p_index = scenario.tree.leaf_index
        table = scenario.clusters
        clusters = tuple(str(c) for c in table["cluster"])
        k_index = {c: k for k, c in enumerate(clusters)}
        gpu_type = tuple(str(g) for g in table["gpu_type"])
        nodes = table["nodes"].to_numpy(dtype=np.int64).copy()
        gpn = table["gpus_per_node"].to_numpy(dtype=np.int64).copy()
        rate = np.array([scenario.config.rate(g) for g in gpu_type], dtype=float)
        budget = np.zeros(len(projects))
        allowed = np.ones((len(projects), len(clusters)), dtype=bool)
        for project, gpu_hours, subset in zip(scenario.budgets["project"],
                                              scenario.budgets["gpu_hours"],
                                              scenario.budgets["clusters"], strict=True):
            p = p_index[project]
            budget[p] = float(gpu_hours)
            if subset:
                allowed[p] = False
                allowed[p, [k_index[name] for name in subset]] = True
        return cls(projects, clusters, gpu_type, _frozen(budget), _frozen(nodes), _frozen(gpn),
                   _frozen(nodes * gpn), _frozen(rate), _frozen(allowed), p_index, k_index)
