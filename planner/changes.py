"""What a replan changes, per project: what ``planner cycle`` writes to ``changes.json``.

Compared between the plan in force before the cycle (the one it replanned from) and the
new plan, as the executors see them at the new plan's ``as_of``:

- **quotas** per cluster (:func:`planner.contract.in_force`): whole guaranteed GPUs
  (⌊g⌋, a Kueue ``nominalQuota`` less reserved GPUs) and the opportunistic headroom above
  them (⌊g + o⌋ − ⌊g⌋, its ``borrowingLimit``);
- **QOS limits** (:func:`planner.exporters.slurm.slurm_state`): the budget QOS's
  ``GrpTRESMins`` GPU-minutes and its ``GrpTRES`` GPU cap;
- **reservations** by request id: added, moved (another cluster, node count, start or
  end) and dropped.

Only what changed is listed; a first plan (nothing in force) lists every quota, limit and
reservation as new. Deterministic: the same two plans give the same bytes.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from planner.contract import in_force, reservations
from planner.exporters.slurm import slurm_state

CHANGES_FILE = "changes.json"


def _quotas(plan: dict[str, Any] | None, at: str) -> dict[tuple[str, str], tuple[int, int]]:
    if plan is None:
        return {}
    try:
        terms = in_force(plan, at)
    except ValueError:  # the old plan ends before the new as_of
        return {}
    return {(q.project, q.cluster): (q.guaranteed, q.opportunistic) for q in terms.quotas}


def _limits(plan: dict[str, Any] | None, org: pd.DataFrame) -> dict[str, tuple[int, int | None]]:
    if plan is None:
        return {}
    return {b.project: (b.minutes, b.gpus) for b in slurm_state(plan, org).budgets}


def _window(r: Any) -> dict[str, Any]:
    return {"cluster": r.cluster, "nodes": r.nodes, "start": r.start, "end": r.end}


def plan_changes(before: dict[str, Any] | None, after: dict[str, Any], org: pd.DataFrame,
                 since: str | None = None) -> dict[str, Any]:
    """The changes from ``before`` (``None``: nothing in force) to ``after``.

    ``since``: the name of the plan in force (its folder), recorded as is.
    """
    at = after["as_of"]
    old_q, new_q = _quotas(before, at), _quotas(after, at)
    old_l, new_l = _limits(before, org), _limits(after, org)
    projects: dict[str, dict[str, Any]] = {}
    for project, cluster in sorted(set(old_q) | set(new_q)):
        was, now = old_q.get((project, cluster), (0, 0)), new_q.get((project, cluster), (0, 0))
        if was != now:
            projects.setdefault(project, {}).setdefault("quotas", []).append(
                {"cluster": cluster, "guaranteed_gpus": [was[0], now[0]],
                 "opportunistic_gpus": [was[1], now[1]]})
    for project in sorted(set(old_l) | set(new_l)):
        was, now = old_l.get(project), new_l.get(project)
        if was != now:
            projects.setdefault(project, {})["qos"] = {
                "GrpTRESMins_gpu_minutes": [None if was is None else was[0],
                                            None if now is None else now[0]],
                "GrpTRES_gpus": [None if was is None else was[1],
                                 None if now is None else now[1]]}
    old_r = {r.request_id: r for r in reservations(before)} if before is not None else {}
    new_r = {r.request_id: r for r in reservations(after)}
    held: dict[str, list[dict[str, Any]]] = {"added": [], "moved": [], "dropped": []}
    for rid in sorted(set(old_r) | set(new_r)):
        was, now = old_r.get(rid), new_r.get(rid)
        if was is None:
            kind, entry = "added", {"request_id": rid, **_window(now)}
        elif now is None:
            kind, entry = "dropped", {"request_id": rid, **_window(was)}
        elif _window(was) != _window(now):
            kind, entry = "moved", {"request_id": rid, "from": _window(was),
                                    "to": _window(now)}
        else:
            continue
        project = (now or was).project
        held[kind].append({"project": project, **entry})
        projects.setdefault(project, {}).setdefault("reservations", []).append(
            {"change": kind, **entry})
    return {"as_of": at, "since": since, "projects": projects, "reservations": held}


def changes_bytes(changes: dict[str, Any]) -> bytes:
    """``changes.json``'s text."""
    return (json.dumps(changes, indent=1, ensure_ascii=False, sort_keys=True) + "\n").encode()


def change_lines(changes: dict[str, Any]) -> list[str]:
    """What a person reads: per project, what changed since the plan in force."""
    projects = changes["projects"]
    if changes["since"] is None:  # a first plan: everything is new, changes.json lists it
        held = changes["reservations"]["added"]
        return [f"changes since nothing in force: a first plan, {len(projects)} projects "
                f"with quotas or QOS limits, {len(held)} reservations (changes.json)"]
    since = changes["since"]
    if not projects:
        return [f"changes since {since}: none"]
    out = [f"changes since {since} ({len(projects)} projects):"]
    for project, what in projects.items():
        parts = []
        for q in what.get("quotas", []):
            g, o = q["guaranteed_gpus"], q["opportunistic_gpus"]
            said = [f"guaranteed {g[0]}→{g[1]} GPUs" if g[0] != g[1] else "",
                    f"opportunistic {o[0]}→{o[1]}" if o[0] != o[1] else ""]
            parts.append(f"{q['cluster']} " + ", ".join(x for x in said if x))
        if "qos" in what:
            m, c = what["qos"]["GrpTRESMins_gpu_minutes"], what["qos"]["GrpTRES_gpus"]
            said = [f"GrpTRESMins {m[0]}→{m[1]} GPU-minutes" if m[0] != m[1] else "",
                    f"GrpTRES {c[0]}→{c[1]} GPUs" if c[0] != c[1] else ""]
            parts.append("QOS " + ", ".join(x for x in said if x))
        for r in what.get("reservations", []):
            if r["change"] == "moved":
                a, b = r["from"], r["to"]
                parts.append(f"reservation {r['request_id']!r} moved {a['start']}–{a['end']} "
                             f"→ {b['start']}–{b['end']} ({b['nodes']} nodes of {b['cluster']})")
            else:
                parts.append(f"reservation {r['request_id']!r} {r['change']} ({r['nodes']} "
                             f"nodes of {r['cluster']}, {r['start']}–{r['end']})")
        out.append(f"  {project!r}: " + "; ".join(parts))
    return out
