"""Replanning from ``--previous``: what refuses a previous plan, and stale usage.

A replan keeps the previous plan's running reservations (rule 6) and its frozen
periods. That only makes sense when the previous plan is one of this scenario's
earlier plans and what it started can still run, so :func:`previous_conflicts`
names each conflict, and how to proceed, before anything is solved:

- another scenario: a different ``name``, ``quarter_start`` or ``quarter_end``;
- a previous plan made *later* than this run (its ``as_of`` after this one's);
- a reservation running at ``as_of`` (started before, ending after) whose project is
  no longer a project of the org tree, or whose cluster is gone;
- a cluster shrunk below the nodes its running reservations hold;
- a project whose running reservations cost more, from ``as_of`` to their ends, than
  its budget has left after its usage (rules 4 and 6 cannot both hold: usage ran over
  what the previous plan charged, or the budget was cut);
- grants no plan could hold (:func:`beyond_capacity`: more GPU-hours in a period than
  the plan's own cluster has), a damaged file.

Each is an :class:`~planner.errors.InputProblem` on the previous plan's file, the
column a JSON path into it (``reservations/3/project``), so the CLI exits 2 and
writes nothing.

:func:`stale_usage` is the staleness warning: the scenario's ``usage.csv`` looks
older than the previous plan when the latest end it records is before the previous
plan's ``as_of`` (no usage at all counts as the quarter's start). A content test,
so the same files always give the same answer: whatever ran between the two plans
should have been ingested first, or budgets count it as unspent.
"""

from __future__ import annotations

from collections import defaultdict

import pandas as pd

from planner.errors import InputError, InputProblem
from planner.inputs import Scenario
from planner.times import iso

AFRESH = "drop --previous to start afresh (its running reservations are then not kept)"


def _ts(text: str) -> pd.Timestamp:
    return pd.Timestamp(text).tz_convert("UTC")


def _leaves(scenario: Scenario) -> set[str]:
    org = scenario.org
    return set(org["id"]) - set(org["parent"])


def running_reservations(previous: dict, as_of: pd.Timestamp) -> list[tuple[int, dict]]:
    """(index, reservation) of the previous plan's reservations running at ``as_of``."""
    return [(i, r) for i, r in enumerate(previous.get("reservations", []))
            if _ts(r["start"]) < as_of < _ts(r["end"])]


def previous_conflicts(previous: dict, label: str, scenario: Scenario,
                       afresh: str = AFRESH) -> list[InputProblem]:
    """Every reason ``previous`` (read from ``label``) cannot be replanned from here.

    Each message ends with how to proceed, the last resort being ``afresh`` (for
    ``planner run``: drop ``--previous``).
    """
    cfg = scenario.config
    out: list[InputProblem] = []

    def problem(column: str, message: str) -> None:
        out.append(InputProblem(label, None, column, message))

    quarter = (previous.get("quarter_start", iso(cfg.quarter_start)),
               previous.get("quarter_end", iso(cfg.quarter_end)))
    same = (previous["scenario"] == cfg.name and _ts(quarter[0]) == cfg.quarter_start
            and _ts(quarter[1]) == cfg.quarter_end)
    if not same:
        problem("scenario", f"planned scenario {previous['scenario']!r} for "
                            f"[{quarter[0]}, {quarter[1]}), "
                            f"this run plans {cfg.name!r} for [{iso(cfg.quarter_start)}, "
                            f"{iso(cfg.quarter_end)}): replan from this scenario's own last "
                            f"plan, or {afresh}")
        return out  # nothing else of it applies here
    prev_as_of = _ts(previous["as_of"])
    if prev_as_of > cfg.as_of:
        problem("as_of", f"planned as of {iso(prev_as_of)}, later than this run's as_of "
                         f"{iso(cfg.as_of)}: plan as of {iso(prev_as_of)} or later "
                         f"(--as-of), replan from the plan made before {iso(cfg.as_of)}, or "
                         f"{afresh}")
        return out
    out += beyond_capacity(previous, label, afresh)
    leaves = _leaves(scenario)
    nodes = dict(zip(scenario.clusters["cluster"], scenario.clusters["nodes"], strict=True))
    held: dict[str, list[tuple[int, dict]]] = defaultdict(list)
    for i, r in running_reservations(previous, cfg.as_of):
        what = (f"reservation {r['request_id']!r} runs from {r['start']} to {r['end']} "
                f"(rule 6: it keeps running)")
        if r["project"] not in leaves:
            problem(f"reservations/{i}/project",
                    f"{what} for project {r['project']!r}, which is no longer a project in "
                    f"org.csv: restore project {r['project']!r} (in org.csv and budgets.csv) "
                    f"until {r['end']}, or {afresh}")
        if r["cluster"] not in nodes:
            problem(f"reservations/{i}/cluster",
                    f"{what} on cluster {r['cluster']!r}, which is no longer in clusters.csv: "
                    f"restore cluster {r['cluster']!r} until {r['end']}, or {afresh}")
        elif r["project"] in leaves:
            held[r["cluster"]].append((i, r))
    out += _over_budget(scenario, [r for rs in held.values() for r in rs], label, afresh)
    for cluster, running in sorted(held.items()):
        total = sum(int(r["nodes"]) for _, r in running)
        if total > nodes[cluster]:
            ids = ", ".join(repr(r["request_id"]) for _, r in running)
            until = max(r["end"] for _, r in running)
            problem(f"reservations/{running[0][0]}/nodes",
                    f"cluster {cluster!r} has {nodes[cluster]} nodes in clusters.csv, but the "
                    f"reservations running on it at {iso(cfg.as_of)} ({ids}) hold {total}: "
                    f"restore cluster {cluster!r} to at least {total} nodes until {until}, "
                    f"or {afresh}")
    return out


def beyond_capacity(previous: dict, label: str, afresh: str = AFRESH) -> list[InputProblem]:
    """Grants of ``previous`` no plan could hold: above its own cluster's GPUs × the period.

    The previous plan's grants bound the frozen periods and the churn of a replan, so a
    damaged one (``gpu_hours`` of ``1e308``) would move the new plan by as much. Checked
    against the previous plan's own clusters and periods (a cluster may have shrunk since,
    which is no reason to refuse it); a number no plan holds is reported at its first
    allocation of that cluster and period.
    """
    size = {c["cluster"]: (int(c["nodes"]), int(c["gpus_per_node"]))
            for c in previous.get("clusters", [])}
    hours = {_ts(p["start"]): (_ts(p["end"]) - _ts(p["start"])).total_seconds() / 3600
             for p in previous.get("periods", [])}
    granted: dict[tuple[str, pd.Timestamp], list[tuple[int, float]]] = defaultdict(list)
    for i, a in enumerate(previous.get("allocations", [])):
        granted[a["cluster"], _ts(a["period_start"])].append((i, float(a["gpu_hours"])))
    out = []
    for (cluster, start), rows in granted.items():
        if cluster not in size:
            continue
        nodes, gpn = size[cluster]
        period = hours.get(start, float(previous["period_hours"]))
        cap = nodes * gpn * period
        total = sum(g for _, g in rows)
        if total > cap * (1 + 1e-6) + 1e-6:
            out.append(InputProblem(
                label, None, f"allocations/{rows[0][0]}/gpu_hours",
                f"grants {total:,.6g} GPU-hours on cluster {cluster!r} in the period from "
                f"{iso(start)}, more than it holds ({nodes * gpn:,} GPUs × {period:g} h = "
                f"{cap:,.6g}): this plan is damaged; replan from the plan it was made from "
                f"(or restore this one), or {afresh}"))
    return out


def used_ngh(scenario: Scenario) -> dict[str, float]:
    """NGH each project used in ``[quarter_start, as_of)`` (its usage rows, clipped)."""
    cfg = scenario.config
    usage = scenario.usage
    if usage.empty:
        return {}
    rate = {c: cfg.rate(g) for c, g in zip(scenario.clusters["cluster"],
                                            scenario.clusters["gpu_type"], strict=True)}
    lo = usage["start"].clip(lower=cfg.quarter_start)
    hi = usage["end"].clip(upper=cfg.as_of)
    hours = ((hi - lo).dt.total_seconds() / 3600).clip(lower=0)
    ngh = hours * usage["gpus"].astype(float) * usage["cluster"].map(rate).fillna(1.0)
    return ngh.groupby(usage["project"]).sum().to_dict()


def _over_budget(scenario: Scenario, running: list[tuple[int, dict]], label: str,
                 afresh: str) -> list[InputProblem]:
    """Projects whose running reservations no longer fit the budget they have left."""
    cfg = scenario.config
    budget = dict(zip(scenario.budgets["project"], scenario.budgets["gpu_hours"].astype(float),
                      strict=True))
    clusters = scenario.clusters.set_index("cluster")
    used = used_ngh(scenario)
    need: dict[str, list[tuple[int, dict, float]]] = defaultdict(list)
    for i, r in running:
        c = clusters.loc[r["cluster"]]
        hours = (_ts(r["end"]) - cfg.as_of).total_seconds() / 3600
        ngh = hours * int(r["nodes"]) * int(c["gpus_per_node"]) * cfg.rate(c["gpu_type"])
        need[r["project"]].append((i, r, ngh))
    out = []
    for project, rows in sorted(need.items()):
        cost = sum(ngh for _, _, ngh in rows)
        has, spent = budget.get(project, 0.0), used.get(project, 0.0)
        if spent + cost > has + max(1.0, 1e-6 * has):  # the checker's rule-4 tolerance
            ids = ", ".join(repr(r["request_id"]) for _, r, _ in rows)
            out.append(InputProblem(
                label, None, f"reservations/{rows[0][0]}/project",
                f"the reservations running for project {project!r} at {iso(cfg.as_of)} "
                f"({ids}) need {cost:.1f} NGH to their ends, but its budget {has:.1f} has "
                f"{has - spent:.1f} NGH left after {spent:.1f} used: raise its budget in "
                f"budgets.csv to at least {spent + cost:.1f} NGH (check usage.csv for work "
                f"charged to it that should not be), or {afresh}"))
    return out


def stale_usage(previous: dict, scenario: Scenario) -> str | None:
    """A warning when ``usage.csv`` records nothing up to the previous plan's ``as_of``."""
    cfg = scenario.config
    prev_as_of = _ts(previous["as_of"])
    if prev_as_of <= cfg.quarter_start:
        return None
    usage = scenario.usage
    latest = usage["end"].max() if len(usage) else None
    if latest is not None and latest >= prev_as_of:
        return None
    recorded = f"its latest job ends at {iso(latest)}" if latest is not None else "it is empty"
    return (f"usage.csv looks stale: {recorded}, before the previous plan's as_of "
            f"{iso(prev_as_of)}; what ran since is not counted against budgets. Ingest the "
            f"accounting first (planner ingest sacct|kueue FILE SCENARIO, or planner cycle "
            f"--sacct/--kueue FILE), then plan again.")


def replan_from(previous: dict, label: str, scenario: Scenario) -> list[str]:
    """Refuse a conflicting previous plan (:class:`InputError`); return the warnings."""
    problems = previous_conflicts(previous, label, scenario)
    if problems:
        raise InputError(problems)
    stale = stale_usage(previous, scenario)
    return [stale] if stale else []
