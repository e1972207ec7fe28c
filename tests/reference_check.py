"""The loop-based checker as it stood before vectorisation, kept only as a test oracle.

tests/test_check.py runs it and :mod:`planner.check` on the same plans and demands the
same violations, message for message. It is a verbatim copy of ``planner/check.py`` at
commit d61d1e9 (row-by-row ``.loc`` and ``itertuples``), not used by the planner.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from planner.inputs import Scenario

TOL = 1e-6


@dataclass(frozen=True, order=True)
class Violation:
    """One broken rule."""

    rule: int
    message: str

    def __str__(self) -> str:
        return f"rule {self.rule}: {self.message}"


def _ts(value: str) -> pd.Timestamp:
    return pd.Timestamp(value).tz_convert("UTC")


def _ts_column(values: pd.Series) -> pd.Series:
    """UTC timestamps with a datetime dtype even when empty (so merges line up)."""
    return pd.to_datetime(values, utc=True, format="ISO8601").astype("datetime64[us, UTC]")


def _overlap_hours(start: pd.Timestamp, end: pd.Timestamp, lo: pd.Timestamp,
                   hi: pd.Timestamp) -> float:
    return max(0.0, (min(end, hi) - max(start, lo)).total_seconds() / 3600.0)


def _tables(plan: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    periods = pd.DataFrame(plan["periods"])
    periods["start"] = periods["start"].map(_ts)
    periods["end"] = periods["end"].map(_ts)
    periods["hours"] = (periods["end"] - periods["start"]).dt.total_seconds() / 3600
    alloc = pd.DataFrame(plan["allocations"],
                         columns=["project", "cluster", "period_start", "gpu_hours", "kind"])
    alloc["period_start"] = _ts_column(alloc["period_start"])
    res = pd.DataFrame(plan["reservations"],
                       columns=["request_id", "project", "cluster", "nodes", "start", "end"])
    res["start"] = _ts_column(res["start"])
    res["end"] = _ts_column(res["end"])
    return periods, alloc, res


def _spread(rows: pd.DataFrame, periods: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Cross rows with periods: ``keys``, period ``start`` and overlap ``hours`` (> 0)."""
    if rows.empty:
        return pd.DataFrame(columns=[*keys, "period", "hours", "row"])
    cross = rows.reset_index(drop=True).reset_index(names="row").merge(
        periods[["start", "end"]].rename(columns={"start": "p_start", "end": "p_end"}),
        how="cross")
    lo = cross[["start", "p_start"]].max(axis=1)
    hi = cross[["end", "p_end"]].min(axis=1)
    cross["hours"] = (hi - lo).dt.total_seconds().clip(lower=0) / 3600
    cross = cross[cross["hours"] > 0]
    return cross.rename(columns={"p_start": "period"})[[*keys, "period", "hours", "row"]]


def _demand_hours(scenario: Scenario, periods: pd.DataFrame) -> dict[tuple, float]:
    demand = scenario.demand
    cross = _spread(demand, periods, ["project", "cluster"])
    cross["gpu_hours"] = cross["hours"] * demand["gpus"].to_numpy(dtype=float)[
        cross["row"].to_numpy(dtype=int)]
    return cross.groupby(["project", "cluster", "period"])["gpu_hours"].sum().to_dict()


def _reserved_hours(res: pd.DataFrame, clusters: pd.DataFrame,
                    periods: pd.DataFrame) -> dict[tuple, float]:
    gpn = dict(zip(clusters["cluster"], clusters["gpus_per_node"], strict=True))
    cross = _spread(res, periods, ["cluster"])
    rows = cross["row"].to_numpy(dtype=int)
    nodes = res["nodes"].to_numpy(dtype=float)[rows]
    cross["gpu_hours"] = cross["hours"] * nodes * cross["cluster"].map(gpn).to_numpy(dtype=float)
    return cross.groupby(["cluster", "period"])["gpu_hours"].sum().to_dict()


def check_capacity(scenario, periods, alloc, res) -> list[Violation]:
    """Rule 1: granted + reserved ≤ capacity per cluster and period."""
    out = []
    reserved = _reserved_hours(res, scenario.clusters, periods)
    granted = alloc.groupby(["cluster", "period_start"])["gpu_hours"].sum().to_dict()
    for c in scenario.clusters.itertuples(index=False):
        for p in periods.itertuples(index=False):
            cap = c.nodes * c.gpus_per_node * p.hours
            used = granted.get((c.cluster, p.start), 0.0) + reserved.get((c.cluster, p.start), 0)
            if used > cap * (1 + TOL) + TOL:
                out.append(Violation(1, f"{c.cluster} {p.start.isoformat()}: {used:.3f} "
                                        f"GPU-hours planned, capacity {cap:.3f}"))
    return out


def check_demand(scenario, periods, alloc, demand) -> list[Violation]:
    """Rule 2: elastic grants ≤ demand per project, cluster and period."""
    out = []
    allowed = {r.project: set(r.clusters) for r in scenario.budgets.itertuples(index=False)
               if r.clusters}
    grants = alloc.groupby(["project", "cluster", "period_start"])["gpu_hours"].sum()
    for (project, cluster, start), hours in grants.items():
        asked = demand.get((project, cluster, start), 0.0)
        if hours > asked * (1 + TOL) + TOL:
            out.append(Violation(2, f"{project} on {cluster} {start.isoformat()}: granted "
                                    f"{hours:.3f} GPU-hours, demand {asked:.3f}"))
        if project in allowed and cluster not in allowed[project]:
            out.append(Violation(2, f"{project} granted on {cluster}, not an allowed cluster"))
    return out


def check_reservations(scenario, plan, periods, res) -> list[Violation]:
    """Rule 3: whole nodes, contiguous, inside the window, exact rounded length."""
    out = []
    ph = float(plan["period_hours"])
    requests = scenario.reservations.set_index("request_id")
    nodes = dict(zip(scenario.clusters["cluster"], scenario.clusters["nodes"], strict=True))
    starts = set(periods["start"])
    if res["request_id"].duplicated().any():
        out.append(Violation(3, "a request is placed more than once"))
    for r in res.itertuples(index=False):
        held = f"reservation {r.request_id}"
        if r.request_id not in requests.index:
            if r.start >= _ts(plan["as_of"]):
                out.append(Violation(3, f"{held} matches no request"))
            continue
        q = requests.loc[r.request_id]
        length = math.ceil(q["hours"] / ph - 1e-9) * ph
        if int(r.nodes) != r.nodes or r.nodes != q["nodes"]:
            out.append(Violation(3, f"{held}: {r.nodes} nodes, request wants {q['nodes']}"))
        if r.nodes > nodes[r.cluster]:
            out.append(Violation(3, f"{held}: {r.nodes} nodes > {nodes[r.cluster]} on cluster"))
        if r.cluster != q["cluster"] or r.project != q["project"]:
            out.append(Violation(3, f"{held}: cluster/project differ from the request"))
        if abs((r.end - r.start).total_seconds() / 3600 - length) > TOL:
            out.append(Violation(3, f"{held}: lasts {(r.end - r.start)}, must be {length:g} h"))
        if r.start < q["earliest_start"] or r.end > q["deadline"]:
            out.append(Violation(3, f"{held}: [{r.start}, {r.end}) outside its window"))
        if r.start >= _ts(plan["as_of"]) and r.start not in starts:
            out.append(Violation(3, f"{held}: starts off the period grid"))
    return out


def _budget_state(scenario: Scenario, plan: dict, alloc: pd.DataFrame,
                  res: pd.DataFrame) -> pd.DataFrame:
    cfg = scenario.config
    rate = {c.cluster: cfg.rate(c.gpu_type) for c in scenario.clusters.itertuples(index=False)}
    gpn = dict(zip(scenario.clusters["cluster"], scenario.clusters["gpus_per_node"], strict=True))
    leaves = set(scenario.org["id"]) - set(scenario.org["parent"])
    state = pd.DataFrame(index=sorted(leaves), data={"budget": 0.0, "used": 0.0, "planned": 0.0})
    for b in scenario.budgets.itertuples(index=False):
        state.loc[b.project, "budget"] = float(b.gpu_hours)
    for u in scenario.usage.itertuples(index=False):
        h = _overlap_hours(u.start, u.end, cfg.quarter_start, cfg.as_of)
        state.loc[u.project, "used"] += h * float(u.gpus) * rate[u.cluster]
    guaranteed = alloc[alloc["kind"] == "guaranteed"]
    for a in guaranteed.itertuples(index=False):
        state.loc[a.project, "planned"] += a.gpu_hours * rate[a.cluster]
    for r in res.itertuples(index=False):
        h = _overlap_hours(r.start, r.end, cfg.as_of, cfg.quarter_end)
        state.loc[r.project, "planned"] += h * r.nodes * gpn[r.cluster] * rate[r.cluster]
    state["slack"] = state["budget"] - state["used"] - state["planned"]
    return state


def check_budget(scenario, plan, alloc, res, demand) -> list[Violation]:
    """Rule 4: guaranteed within budget; opportunistic only beyond budget, from spare room."""
    out = []
    state = _budget_state(scenario, plan, alloc, res)
    for project, row in state.iterrows():
        if row["planned"] > TOL and row["slack"] < -max(1.0, TOL * row["budget"]):
            out.append(Violation(4, f"{project}: used {row['used']:.1f} + planned "
                                    f"{row['planned']:.1f} NGH > budget {row['budget']:.1f}"))
    within = set(state.index[state["slack"] > 1.0])
    opp = alloc[alloc["kind"] == "opportunistic"]
    total = alloc.groupby(["project", "cluster", "period_start"])["gpu_hours"].sum()
    wants = pd.Series(demand, dtype=float)
    if len(wants):
        wants.index.names = ["project", "cluster", "period_start"]
        unmet = (wants - total.reindex(wants.index, fill_value=0.0)).reset_index(name="unmet")
        unmet = unmet[(unmet["unmet"] > 1.0) & unmet["project"].isin(within)]
        unmet["period_start"] = _ts_column(unmet["period_start"])
        cells = opp[["cluster", "period_start"]].drop_duplicates()
        for r in unmet.merge(cells, on=["cluster", "period_start"]).itertuples(index=False):
            out.append(Violation(4, f"opportunistic work on {r.cluster} {r.period_start} while "
                                    f"{r.project} (within budget) lacks {r.unmet:.1f} "
                                    f"GPU-hours there"))
    for a in opp.itertuples(index=False):
        if a.project in within:
            out.append(Violation(4, f"{a.project} has budget left yet got opportunistic "
                                    f"GPU-hours on {a.cluster} {a.period_start}"))
    return out


def check_full_occupancy(scenario, periods, alloc, res, demand) -> list[Violation]:
    """Rule 5: unmet demand on a cluster-period ⇒ it is full (within one GPU × period)."""
    out = []
    reserved = _reserved_hours(res, scenario.clusters, periods)
    granted = alloc.groupby(["cluster", "period_start"])["gpu_hours"].sum().to_dict()
    by_cell = alloc.groupby(["project", "cluster", "period_start"])["gpu_hours"].sum().to_dict()
    hours = dict(zip(periods["start"], periods["hours"], strict=True))
    cap = {c.cluster: c.nodes * c.gpus_per_node for c in scenario.clusters.itertuples()}
    flagged = set()
    for (project, cluster, start), asked in demand.items():
        if (cluster, start) in flagged or start not in hours:
            continue
        if asked - by_cell.get((project, cluster, start), 0.0) > 1e-6:
            idle = cap[cluster] * hours[start] - granted.get((cluster, start), 0.0) - \
                reserved.get((cluster, start), 0.0)
            if idle > hours[start] + 1e-6:
                flagged.add((cluster, start))
                out.append(Violation(5, f"{cluster} {start.isoformat()}: {idle:.1f} GPU-hours "
                                        f"idle while {project} waits"))
    return out


def check_contract(plan, res, previous: dict | None) -> list[Violation]:
    """Rule 6: a reservation running at ``as_of`` in the previous plan keeps its planned end."""
    if previous is None:
        return []
    out = []
    as_of = _ts(plan["as_of"])
    now = {r.request_id: r for r in res.itertuples(index=False)}
    for r in previous.get("reservations", []):
        start, end = _ts(r["start"]), _ts(r["end"])
        if start < as_of < end:
            kept = now.get(r["request_id"])
            if kept is None or kept.end != end or kept.nodes != r["nodes"]:
                out.append(Violation(6, f"running reservation {r['request_id']} was cut or moved"))
    return out


def check_plan(plan: dict[str, Any], scenario: Scenario,
               previous: dict | None = None) -> list[Violation]:
    """Every violation of the contract's hard rules 1–6 in ``plan``."""
    periods, alloc, res = _tables(plan)
    demand = _demand_hours(scenario, periods)
    violations = (check_capacity(scenario, periods, alloc, res)
                  + check_demand(scenario, periods, alloc, demand)
                  + check_reservations(scenario, plan, periods, res)
                  + check_budget(scenario, plan, alloc, res, demand)
                  + check_full_occupancy(scenario, periods, alloc, res, demand)
                  + check_contract(plan, res, previous))
    return sorted(violations)
