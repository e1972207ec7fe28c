"""Each export target's files, as bytes ready for :func:`planner.plan.write.write_files`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from planner.exporters.executor_json import executor_view
from planner.exporters.kueue import SHIPPED, allowed_clusters
from planner.exporters.slurm import SHIPPED as SLURM_SHIPPED

TARGETS = ("kueue", "slurm", "json")


def export_files(plan: dict[str, Any], target: str, org: pd.DataFrame | None, periods: int = 1,
                 previous: dict[str, Any] | None = None, per_cluster: bool | None = None,
                 budgets: pd.DataFrame | None = None,
                 pending: Mapping[tuple[str, str], int] | None = None) -> dict[str, bytes]:
    """File name -> bytes for one target (``org`` is needed for kueue and slurm).

    ``per_cluster`` (kueue): a manifest set per cluster; ``None`` splits only where one set
    could not hold every cluster (see :func:`planner.exporters.kueue.needs_per_cluster`).
    ``budgets`` (kueue): the scenario's budgets table, whose ``clusters`` column restricts
    the clusters where a project's queue gets a flavor (None: every cluster).
    ``pending`` (kueue): the widest pending gang per (project, cluster)
    (:func:`planner.ingest.pending.pending_gangs`), to which the first period's nominal
    quotas widen (the executor contract's rule 6).
    """
    if target == "kueue":
        allowed = allowed_clusters(budgets) if budgets is not None else None
        files = SHIPPED.export(plan, org, periods, per_cluster, allowed=allowed,
                               pending=pending)
        return {k: v.encode() for k, v in files.items()}
    if target == "slurm":
        return {"slurm-apply.sh": SLURM_SHIPPED.export(plan, org, previous).encode()}
    if target == "json":
        text = json.dumps(executor_view(plan), indent=1, ensure_ascii=False) + "\n"
        return {"executor-view.json": text.encode()}
    raise ValueError(f"unknown export target {target!r}")
