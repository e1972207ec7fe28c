"""What the exporters share: safe names, the org tree's order, the plan's cells per period."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable
from typing import Any

from planner.inputs.org import OrgTree

_UNSAFE = re.compile(r"[^a-z0-9]+")
EPS = 1e-6


def safe_name(original: str, limit: int = 63) -> str:
    """A DNS-1123 label for ``original``, deterministic and collision-resistant.

    Ids that already are valid labels are kept as they are; any other id is lower-cased,
    runs of other characters become ``-``, and an 8-hex-digit digest of the original is
    appended so that ``A_b`` and ``a-b`` stay apart.
    """
    if re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", original) and len(original) <= limit:
        return original
    digest = hashlib.sha256(original.encode()).hexdigest()[:8]
    base = _UNSAFE.sub("-", original.lower()).strip("-")[: limit - 9].strip("-")
    return f"{base}-{digest}" if base else f"x-{digest}"


def quantity(value: float) -> str:
    """A Kubernetes quantity string for a weight (``2``, ``0.5``)."""
    return format(round(float(value), 6), "f").rstrip("0").rstrip(".") or "0"


def floor_gpus(gpus: float) -> int:
    """Whole GPUs, rounded down (tolerant of the plan's 1e-6 rounding)."""
    return max(0, math.floor(gpus + EPS))


def by_depth(tree: OrgTree, nodes: Iterable[str]) -> list[str]:
    """``nodes`` parents first, then by id: the order the exporters write the tree in.

    By id, not org order, so that the files do not depend on how ``org`` is sorted.
    """
    return sorted(nodes, key=lambda n: (tree.depth_of(n), n))


def period_bounds(plan: dict[str, Any], periods: int) -> list[tuple[str, str]]:
    """The first ``periods`` periods' (start, end), as written in the plan."""
    return [(p["start"], p["end"]) for p in plan["periods"][:max(1, periods)]]


def overlaps(item: dict[str, Any], start: str, end: str) -> bool:
    """Whether a reservation runs at some time in [start, end) (ISO UTC strings sort)."""
    return item["start"] < end and item["end"] > start


def cells(plan: dict[str, Any], start: str) -> dict[tuple[str, str], dict[str, float]]:
    """(project, cluster) -> {"guaranteed": gpus, "opportunistic": gpus} in one period."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    for a in plan["allocations"]:
        if a["period_start"] == start:
            cell = out.setdefault((a["project"], a["cluster"]),
                                  {"guaranteed": 0.0, "opportunistic": 0.0})
            cell[a["kind"]] += float(a["gpus"])
    return out


def cluster_info(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Cluster name -> its row in the plan."""
    return {c["cluster"]: c for c in plan.get("clusters", [])}
