"""Ids an executor cannot carry: checked at input validation when a scenario is meant for it.

Most ids reach an executor through a derived, safe name (Slurm accounts and QOS, Kubernetes
object names: :func:`planner.exporters.common.safe_name`). A cluster id cannot be renamed for
Slurm: the apply script names the partition the site's ``slurm.conf`` defines
(``PartitionName=<cluster>``), so an id Slurm cannot take as a partition name is refused
(``planner validate SCENARIO --for slurm``, ``planner run --export slurm``, and
``planner export --to slurm`` on the plan).
"""

from __future__ import annotations

import re

_PARTITION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def partition_problem(cluster: str) -> str | None:
    """Why a cluster id cannot be a Slurm partition name, or ``None``.

    slurm.conf and ``scontrol`` split on spaces, ``,`` and ``=``, take ``#`` for a comment and
    cut at quotes; the rule kept here is the plain one: letters, digits, ``_``, ``.``, ``-``.
    """
    if _PARTITION.fullmatch(cluster):
        return None
    return (f"cluster {cluster!r} cannot be a Slurm partition name (letters, digits, '_', '.' "
            "and '-', starting with a letter or digit), and the Slurm script names the "
            "partition as the cluster: rename the cluster to its partition's name")
