"""The validated scenario: an immutable record handed from loading to everything else.

Every table is a pandas DataFrame whose columns and dtypes are fixed by
:mod:`planner.inputs.schema`. Timestamps are tz-aware UTC ``pd.Timestamp``s.
Loading (``planner.inputs.load``) is the only code that builds one from files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

import pandas as pd

from planner.inputs.arrays import ScenarioArrays
from planner.inputs.org import OrgTree


@dataclass(frozen=True)
class ScenarioConfig:
    """``scenario.toml``."""

    name: str
    quarter_start: pd.Timestamp  # inclusive, UTC
    quarter_end: pd.Timestamp  # exclusive, UTC
    as_of: pd.Timestamp  # plan from here, UTC
    period_hours: float = 24.0
    lookback_days: float = 28.0
    gpu_rates: Mapping[str, float] = field(default_factory=dict)  # NGH per GPU-hour; missing = 1.0

    def rate(self, gpu_type: str) -> float:
        """NGH per GPU-hour of ``gpu_type`` (1.0 when not listed)."""
        return float(self.gpu_rates.get(gpu_type, 1.0))


@dataclass(frozen=True)
class Scenario:
    """A whole, validated scenario.

    Tables (columns in this order; ``str`` columns hold Python ``str``):

    - ``clusters``: cluster:str, gpu_type:str, nodes:int64, gpus_per_node:int64
    - ``org``: id:str, parent:str ("" for top level), weight:float64
    - ``budgets``: project:str, gpu_hours:float64 (NGH), clusters:object (tuple[str, ...],
      empty tuple = all clusters)
    - ``demand``: project:str, cluster:str, start:Timestamp, end:Timestamp, gpus:float64
    - ``reservations``: request_id:str, project:str, cluster:str, nodes:int64, hours:float64,
      earliest_start:Timestamp, deadline:Timestamp
    - ``usage``: job_id:str, project:str, cluster:str, gpus:float64, start:Timestamp,
      end:Timestamp, state:str ("running" or ""; one row per job_id; repeated ingestion
      collapsed)

    Absent optional files give empty tables with the same columns.

    Built once, on first use: :attr:`tree` (the org tree) and :attr:`arrays` (budgets,
    rates, capacities and allowed clusters as arrays over its projects and clusters).
    """

    config: ScenarioConfig
    clusters: pd.DataFrame
    org: pd.DataFrame
    budgets: pd.DataFrame
    demand: pd.DataFrame
    reservations: pd.DataFrame
    usage: pd.DataFrame
    source: str = ""
    digest: str = ""  # sha256 over the loaded settings and sorted tables (provenance)

    @cached_property
    def tree(self) -> OrgTree:
        """The org tree of ``org``, built once."""
        return OrgTree.from_frame(self.org)

    @cached_property
    def arrays(self) -> ScenarioArrays:
        """Budgets (P,), rates, nodes and GPUs (K,) and the allowed mask (P, K), built once."""
        return ScenarioArrays.from_scenario(self)

    def with_as_of(self, as_of: pd.Timestamp) -> Scenario:
        """The same scenario planned from another date (``--as-of``).

        The tree and the arrays do not depend on ``as_of``: the ones built already are kept.
        """
        from dataclasses import replace

        moved = replace(self, config=replace(self.config, as_of=as_of))
        for name in ("tree", "arrays"):
            if name in self.__dict__:
                moved.__dict__[name] = self.__dict__[name]
        return moved
