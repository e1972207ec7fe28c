"""The executor's names mapped back onto the scenario's projects and clusters.

The exporters name things; this module inverts their naming over the scenario's ids,
through the exporters' own functions, so that an ingest reads back exactly what an
export wrote (never by parsing a name back by hand):

- Slurm (:mod:`planner.exporters.slurm`): a project's jobs run under the account
  :func:`~planner.exporters.slurm.account` ``(project)``; a cluster is the partition of the
  same name (the exporter writes ``PartitionName=<cluster>``, :func:`slurm_partition`).
- Kueue (:mod:`planner.exporters.kueue`): a project's ClusterQueue and a cluster's
  ResourceFlavor are named by :func:`kueue_cluster_queue` and :func:`kueue_flavor`, the
  exporter's ``safe_name`` of the id.

A name that two ids map to (a collision) is treated as unknown: which project ran the
job cannot be told, so it is reported rather than charged to either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from planner.exporters import kueue as kueue_exporter
from planner.exporters import slurm as slurm_exporter
from planner.inputs import Scenario


def slurm_partition(cluster: str) -> str:
    """The Slurm partition of a cluster: its id (``PartitionName=<cluster>`` in the export)."""
    return cluster


def kueue_cluster_queue(project: str) -> str:
    """The ClusterQueue the Kueue exporter makes for a project."""
    return kueue_exporter.safe_name(project)


def kueue_flavor(cluster: str) -> str:
    """The ResourceFlavor the Kueue exporter makes for a cluster."""
    return kueue_exporter.safe_name(cluster)


@dataclass(frozen=True)
class Names:
    """Executor name → scenario id, for owners (account/queue) and places (partition/flavor).

    ``owner_kind`` and ``place_kind`` say what the names are, for the report.
    """

    owner_kind: str
    place_kind: str
    owners: Mapping[str, str]
    places: Mapping[str, str]
    ambiguous_owners: frozenset[str]  # names more than one id maps to (reported, not guessed)
    ambiguous_places: frozenset[str]


def invert(name_of: Callable[[str], str], ids: Iterable[str]) -> tuple[dict[str, str], set[str]]:
    """``{name_of(i): i}`` over ``ids``, and the names that more than one id maps to."""
    seen: dict[str, set[str]] = {}
    for i in ids:
        seen.setdefault(name_of(i), set()).add(i)
    unique = {name: next(iter(found)) for name, found in seen.items() if len(found) == 1}
    return unique, {name for name, found in seen.items() if len(found) > 1}


def projects(scenario: Scenario) -> list[str]:
    """The scenario's projects: the leaves of its org tree, in org order."""
    return list(scenario.tree.leaves)


def names_for(scenario: Scenario, source: str) -> Names:
    """The inverse maps for ``source`` (``"sacct"`` or ``"kueue"``) over ``scenario``."""
    clusters = [str(c) for c in scenario.clusters["cluster"]]
    if source == "sacct":
        owners, bad_owners = invert(slurm_exporter.account, projects(scenario))
        places, bad_places = invert(slurm_partition, clusters)
        kinds = ("account", "partition")
    else:
        owners, bad_owners = invert(kueue_cluster_queue, projects(scenario))
        places, bad_places = invert(kueue_flavor, clusters)
        kinds = ("ClusterQueue", "flavor")
    return Names(kinds[0], kinds[1], MappingProxyType(owners), MappingProxyType(places),
                 frozenset(bad_owners), frozenset(bad_places))
