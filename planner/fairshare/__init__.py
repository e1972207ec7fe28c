"""The fair share: org tree, hierarchical water-filling, lookback and per-period targets."""

from planner.fairshare.lookback import Lookback
from planner.fairshare.targets import fair_share_targets
from planner.fairshare.tree import OrgTree, SiblingBatch
from planner.fairshare.waterfill import hierarchical_water_fill, water_fill

__all__ = [
    "Lookback",
    "OrgTree",
    "SiblingBatch",
    "fair_share_targets",
    "hierarchical_water_fill",
    "water_fill",
]
