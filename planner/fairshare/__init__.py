"""The fair share: org tree, hierarchical water-filling, lookback and per-period targets."""

from planner.fairshare.lookback import Lookback
from planner.fairshare.targets import fair_share_targets, fair_share_targets_at
from planner.fairshare.waterfill import hierarchical_water_fill, water_fill
from planner.inputs.org import OrgTree, SiblingBatch

__all__ = [
    "Lookback",
    "OrgTree",
    "SiblingBatch",
    "fair_share_targets",
    "fair_share_targets_at",
    "hierarchical_water_fill",
    "water_fill",
]
