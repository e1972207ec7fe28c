"""What the exporters share: safe names, the org tree, the plan's cells per period."""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Any

import pandas as pd

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


@dataclass(frozen=True)
class OrgTree:
    """The org tree as parent and weight maps; projects are its leaves."""

    parent: dict[str, str]
    weight: dict[str, float]

    @classmethod
    def from_frame(cls, org: pd.DataFrame) -> OrgTree:
        """From the scenario's ``org`` table (id, parent, weight)."""
        parent = {str(i): ("" if pd.isna(p) else str(p))
                  for i, p in zip(org["id"], org["parent"], strict=True)}
        weight = {str(i): float(w) for i, w in zip(org["id"], org["weight"], strict=True)}
        return cls(parent, weight)

    @property
    def internal(self) -> list[str]:
        """Nodes with children (areas, teams), in a parent-first, then sorted, order."""
        has_child = {p for p in self.parent.values() if p}
        return sorted(has_child, key=lambda n: (self.depth(n), n))

    def depth(self, node: str) -> int:
        """0 for a top-level node."""
        d = 0
        while self.parent.get(node):
            node = self.parent[node]
            d += 1
        return d


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
