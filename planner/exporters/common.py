"""What the exporters share: safe names, the org tree's order, the plan's clusters.

What a plan puts in force (grants, reservations, rounding) is :mod:`planner.contract`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from planner.contract import EPS, floor_gpus  # noqa: F401  (the contract's rounding)
from planner.inputs.org import OrgTree

_UNSAFE = re.compile(r"[^a-z0-9]+")
_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")


@lru_cache(maxsize=1 << 16)  # a pure function the exporters call for every id of every object
def safe_name(original: str, limit: int = 63) -> str:
    """A DNS-1123 label for ``original``, deterministic and collision-resistant.

    Ids that already are valid labels are kept as they are; any other id is lower-cased,
    runs of other characters become ``-``, and an 8-hex-digit digest of the original is
    appended so that ``A_b`` and ``a-b`` stay apart.
    """
    if _LABEL.fullmatch(original) and len(original) <= limit:
        return original
    digest = hashlib.sha256(original.encode()).hexdigest()[:8]
    base = _UNSAFE.sub("-", original.lower()).strip("-")[: limit - 9].strip("-")
    return f"{base}-{digest}" if base else f"x-{digest}"


#: What a spreadsheet reads as the start of a formula (or a command, by DDE) in a CSV cell.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_text(text: str) -> str:
    """A CSV cell a spreadsheet opens as text: ``'=HYPERLINK(…)`` for ``=HYPERLINK(…)``.

    A cell beginning with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is a
    formula to Excel and LibreOffice (``=HYPERLINK``, ``+cmd|' /C calc'!A0``, ``@SUM``);
    a leading ``'`` makes them show it as the text it is. Other cells are unchanged. For
    text columns of CSV files meant for people (ids), never for numbers or for files the
    planner reads back.
    """
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def quantity(value: float) -> str:
    """A Kubernetes quantity string for a weight (``2``, ``0.5``)."""
    return format(round(float(value), 6), "f").rstrip("0").rstrip(".") or "0"


def by_depth(tree: OrgTree, nodes: Iterable[str]) -> list[str]:
    """``nodes`` parents first, then by id: the order the exporters write the tree in.

    By id, not org order, so that the files do not depend on how ``org`` is sorted.
    """
    return sorted(nodes, key=lambda n: (tree.depth_of(n), n))


def period_bounds(plan: dict[str, Any], periods: int) -> list[tuple[str, str]]:
    """The first ``periods`` periods' (start, end), as written in the plan."""
    return [(p["start"], p["end"]) for p in plan["periods"][:max(1, periods)]]


def cluster_info(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Cluster name -> its row in the plan."""
    return {c["cluster"]: c for c in plan.get("clusters", [])}
