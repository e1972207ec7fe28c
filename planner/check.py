"""An independent checker: reads a plan and its scenario, reports every hard-rule violation.

It recomputes everything from the scenario tables with plain pandas and numpy and
never uses the model code, so a bug in the model cannot hide itself here. Every rule
is evaluated on whole columns (merges, group sums, masks); Python only formats the
message of a row that breaks a rule. Tolerances: 1e-6 relative for sums, and rule 5's
"within one GPU × period".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from planner.inputs import Scenario

TOL = 1e-6
CELL = ["cluster", "period_start"]
GRANT = ["project", "cluster", "period_start"]


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
    """UTC timestamps with one datetime dtype, even when empty (so merges line up)."""
    return pd.to_datetime(values, utc=True, format="ISO8601").astype("datetime64[us, UTC]")


def _naive(values: pd.Series) -> np.ndarray:
    """UTC timestamps as a plain numpy datetime64[us] array (fast elementwise min/max)."""
    return values.dt.tz_convert(None).to_numpy(dtype="datetime64[us]")


def _overlap_hours(start: pd.Series, end: pd.Series, lo: pd.Timestamp,
                   hi: pd.Timestamp) -> np.ndarray:
    """Hours of each [start, end) inside [lo, hi), elementwise (0 when disjoint)."""
    seconds = (end.clip(upper=hi) - start.clip(lower=lo)).dt.total_seconds()
    return np.maximum(0.0, seconds.to_numpy(dtype=float) / 3600.0)


def _tables(plan: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    periods = pd.DataFrame(plan["periods"], columns=["start", "end"])
    periods["start"] = _ts_column(periods["start"])
    periods["end"] = _ts_column(periods["end"])
    periods["hours"] = (periods["end"] - periods["start"]).dt.total_seconds() / 3600
    alloc = pd.DataFrame(plan["allocations"],
                         columns=["project", "cluster", "period_start", "gpu_hours", "kind"])
    alloc["period_start"] = _ts_column(alloc["period_start"])
    alloc["gpu_hours"] = alloc["gpu_hours"].astype(float)
    res = pd.DataFrame(plan["reservations"],
                       columns=["request_id", "project", "cluster", "nodes", "start", "end"])
    res["start"] = _ts_column(res["start"])
    res["end"] = _ts_column(res["end"])
    return periods, alloc, res


def _spread(rows: pd.DataFrame, periods: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Cross rows with periods: ``keys``, ``period_start``, overlap ``hours`` (> 0), ``row``."""
    if rows.empty:
        return pd.DataFrame({**{k: pd.Series(dtype=object) for k in keys},
                             "period_start": pd.Series(dtype="datetime64[us, UTC]"),
                             "hours": pd.Series(dtype=float), "row": pd.Series(dtype=int)})
    cross = rows[[*keys, "start", "end"]].reset_index(drop=True).reset_index(names="row").merge(
        periods[["start", "end"]].rename(columns={"start": "p_start", "end": "p_end"}),
        how="cross")
    lo = np.maximum(_naive(cross["start"]), _naive(cross["p_start"]))
    hi = np.minimum(_naive(cross["end"]), _naive(cross["p_end"]))
    cross["hours"] = np.maximum((hi - lo) / np.timedelta64(1, "s"), 0.0) / 3600
    cross = cross[cross["hours"] > 0]
    return cross.rename(columns={"p_start": "period_start"})[
        [*keys, "period_start", "hours", "row"]]


def _demand_hours(scenario: Scenario, periods: pd.DataFrame) -> pd.Series:
    """Elastic demand in GPU-hours per (project, cluster, period_start), sorted by key."""
    demand = scenario.demand.assign(start=_ts_column(scenario.demand["start"]),
                                    end=_ts_column(scenario.demand["end"]))
    cross = _spread(demand, periods, ["project", "cluster"])
    cross["gpu_hours"] = cross["hours"] * demand["gpus"].to_numpy(dtype=float)[
        cross["row"].to_numpy(dtype=int)]
    return cross.groupby(GRANT)["gpu_hours"].sum()


def _reserved_hours(res: pd.DataFrame, clusters: pd.DataFrame,
                    periods: pd.DataFrame) -> pd.Series:
    """Reserved GPU-hours per (cluster, period_start)."""
    gpn = dict(zip(clusters["cluster"], clusters["gpus_per_node"], strict=True))
    cross = _spread(res, periods, ["cluster"])
    rows = cross["row"].to_numpy(dtype=int)
    nodes = res["nodes"].to_numpy(dtype=float)[rows]
    cross["gpu_hours"] = cross["hours"] * nodes * cross["cluster"].map(gpn).to_numpy(dtype=float)
    return cross.groupby(CELL)["gpu_hours"].sum()


def _cells(scenario: Scenario, periods: pd.DataFrame, alloc: pd.DataFrame,
           res: pd.DataFrame) -> pd.DataFrame:
    """Every cluster × period: GPUs, ``hours``, ``granted`` and ``reserved`` GPU-hours."""
    arrays = scenario.arrays
    clusters = pd.DataFrame({"cluster": list(arrays.clusters), "gpus": arrays.gpus})
    grid = clusters.merge(periods[["start", "hours"]].rename(columns={"start": "period_start"}),
                          how="cross")
    granted = alloc.groupby(CELL)["gpu_hours"].sum().rename("granted")
    reserved = _reserved_hours(res, scenario.clusters, periods).rename("reserved")
    grid = grid.merge(granted.reset_index(), on=CELL, how="left")
    grid = grid.merge(reserved.reset_index(), on=CELL, how="left")
    grid[["granted", "reserved"]] = grid[["granted", "reserved"]].fillna(0.0)
    return grid


def check_capacity(grid: pd.DataFrame) -> list[Violation]:
    """Rule 1: granted + reserved ≤ capacity per cluster and period (``grid``: :func:`_cells`)."""
    cap = grid["gpus"] * grid["hours"]
    used = grid["granted"] + grid["reserved"]
    over = used > cap * (1 + TOL) + TOL
    return [Violation(1, f"{cluster} {start.isoformat()}: {u:.3f} "
                         f"GPU-hours planned, capacity {c:.3f}")
            for cluster, start, u, c in zip(grid["cluster"][over], grid["period_start"][over],
                                            used[over], cap[over], strict=True)]


def _allowed(scenario: Scenario, frame: pd.DataFrame) -> np.ndarray:
    """Per row of ``frame``: False where its project may use only other clusters.

    Read from ``budgets`` here, not from ``scenario.arrays.allowed`` (the mask the model
    is built on), so that rule 2 is checked independently of that mask.
    """
    budgets = scenario.budgets
    restricted = budgets[budgets["clusters"].map(len) > 0]
    pairs = restricted[["project", "clusters"]].explode("clusters").rename(
        columns={"clusters": "cluster"}).drop_duplicates().assign(listed=True)
    keyed = frame[["project", "cluster"]].merge(pairs, on=["project", "cluster"], how="left")
    listed = keyed["listed"].fillna(False).to_numpy(dtype=bool)
    return listed | ~frame["project"].isin(set(restricted["project"])).to_numpy()


def check_demand(scenario, given: pd.Series, demand) -> list[Violation]:
    """Rule 2: elastic grants ≤ demand per project, cluster and period.

    ``given``: the plan's GPU-hours per (project, cluster, period_start), both kinds.
    """
    grants = given.reset_index()
    grants = grants.merge(demand.rename("asked").reset_index(), on=GRANT, how="left")
    grants["asked"] = grants["asked"].fillna(0.0)
    over = grants[grants["gpu_hours"] > grants["asked"] * (1 + TOL) + TOL]
    out = [Violation(2, f"{r.project} on {r.cluster} {r.period_start.isoformat()}: granted "
                        f"{r.gpu_hours:.3f} GPU-hours, demand {r.asked:.3f}")
           for r in over.itertuples(index=False)]
    elsewhere = grants[~_allowed(scenario, grants)]
    out += [Violation(2, f"{r.project} granted on {r.cluster}, not an allowed cluster")
            for r in elsewhere.itertuples(index=False)]
    return out


def check_reservations(scenario, plan, periods, res) -> list[Violation]:
    """Rule 3: whole nodes, contiguous, inside the window, exact rounded length."""
    out = []
    ph = float(plan["period_hours"])
    as_of = _ts(plan["as_of"])
    nodes = dict(zip(scenario.clusters["cluster"], scenario.clusters["nodes"], strict=True))
    if res["request_id"].duplicated().any():
        out.append(Violation(3, "a request is placed more than once"))
    requests = scenario.reservations.rename(columns={
        "project": "q_project", "cluster": "q_cluster", "nodes": "q_nodes"})
    known = res["request_id"].isin(set(requests["request_id"]))
    out += [Violation(3, f"reservation {rid} matches no request")
            for rid in res["request_id"][~known & (res["start"] >= as_of)]]
    both = res[known].merge(requests, on="request_id", how="left")
    both["earliest_start"] = _ts_column(both["earliest_start"])
    both["deadline"] = _ts_column(both["deadline"])
    # whole periods, at least one (as the model rounds: planner.model.problem)
    length = np.maximum(np.ceil(both["hours"].to_numpy(dtype=float) / ph - 1e-9), 1) * ph
    lasts = (both["end"] - both["start"]).dt.total_seconds().to_numpy(dtype=float) / 3600
    cluster_nodes = both["cluster"].map(nodes).to_numpy(dtype=float)  # NaN: never above
    whole = (both["nodes"] == np.floor(both["nodes"])) & (both["nodes"] == both["q_nodes"])
    rules = (
        (~whole, lambda r, _: f"{r.nodes} nodes, request wants {r.q_nodes}"),
        (both["nodes"].to_numpy(dtype=float) > cluster_nodes,
         lambda r, _: f"{r.nodes} nodes > {nodes[r.cluster]} on cluster"),
        ((both["cluster"] != both["q_cluster"]) | (both["project"] != both["q_project"]),
         lambda r, _: "cluster/project differ from the request"),
        (np.abs(lasts - length) > TOL,
         lambda r, hours: f"lasts {(r.end - r.start)}, must be {hours:g} h"),
        ((both["start"] < both["earliest_start"]) | (both["end"] > both["deadline"]),
         lambda r, _: f"[{r.start}, {r.end}) outside its window"),
        ((both["start"] >= as_of) & ~both["start"].isin(set(periods["start"])),
         lambda r, _: "starts off the period grid"),
    )
    for mask, say in rules:
        mask = np.asarray(mask, dtype=bool)
        out += [Violation(3, f"reservation {r.request_id}: {say(r, hours)}")
                for r, hours in zip(both[mask].itertuples(index=False), length[mask],
                                    strict=True)]
    return out


def _budget_state(scenario: Scenario, alloc: pd.DataFrame, res: pd.DataFrame) -> pd.DataFrame:
    """Per project (NGH): ``budget``, ``used`` (quarter start to as_of), ``planned``, ``slack``.

    ``planned`` is guaranteed elastic GPU-hours plus reservations from ``as_of`` to
    quarter end, each × its cluster's rate.
    """
    cfg, arrays = scenario.config, scenario.arrays
    rate = pd.Series(arrays.rate, index=list(arrays.clusters), dtype=float)
    gpn = pd.Series(arrays.gpus_per_node.astype(float), index=list(arrays.clusters))
    usage, budgets = scenario.usage, scenario.budgets
    used = (_overlap_hours(_ts_column(usage["start"]), _ts_column(usage["end"]),
                           cfg.quarter_start, cfg.as_of)
            * usage["gpus"].to_numpy(dtype=float) * usage["cluster"].map(rate).to_numpy())
    guaranteed = alloc[alloc["kind"] == "guaranteed"]
    elastic = guaranteed["gpu_hours"].to_numpy() * guaranteed["cluster"].map(rate).to_numpy()
    reserved = (_overlap_hours(res["start"], res["end"], cfg.as_of, cfg.quarter_end)
                * res["nodes"].to_numpy(dtype=float) * res["cluster"].map(gpn).to_numpy()
                * res["cluster"].map(rate).to_numpy())
    leaves = set(scenario.tree.leaves)
    # each column's distinct ids (hashed in bulk; iterating a pandas string column is
    # one Python call per row: 155,000 usage rows at 28×)
    named = set().union(*(pd.unique(frame["project"].to_numpy(dtype=object))
                          for frame in (budgets, usage, guaranteed, res)))
    index = pd.Index(sorted(leaves) + sorted(named - leaves, key=str), dtype=object)
    state = pd.DataFrame({
        "budget": budgets.drop_duplicates("project", keep="last").set_index("project")[
            "gpu_hours"].astype(float).reindex(index, fill_value=0.0),
        "used": pd.Series(used, index=usage["project"].to_numpy()).groupby(level=0).sum()
        .reindex(index, fill_value=0.0),
        "planned": pd.concat([
            pd.Series(elastic, index=guaranteed["project"].to_numpy(), dtype=float),
            pd.Series(reserved, index=res["project"].to_numpy(), dtype=float),
        ]).groupby(level=0).sum().reindex(index, fill_value=0.0),
    }, index=index)
    state["slack"] = state["budget"] - state["used"] - state["planned"]
    return state


def check_budget(scenario, alloc, res, given: pd.Series, demand) -> list[Violation]:
    """Rule 4: guaranteed within budget; opportunistic only beyond budget, from spare room."""
    state = _budget_state(scenario, alloc, res)
    over = state[(state["planned"] > TOL)
                 & (state["slack"] < -np.maximum(1.0, TOL * state["budget"]))]
    out = [Violation(4, f"{project}: used {row.used:.1f} + planned "
                        f"{row.planned:.1f} NGH > budget {row.budget:.1f}")
           for project, row in zip(over.index, over.itertuples(index=False), strict=True)]
    within = set(state.index[state["slack"] > 1.0])
    opp = alloc[alloc["kind"] == "opportunistic"]
    if len(demand):
        unmet = (demand - given.reindex(demand.index, fill_value=0.0)).reset_index(name="unmet")
        unmet = unmet[(unmet["unmet"] > 1.0) & unmet["project"].isin(within)]
        cells = opp[CELL].drop_duplicates()
        out += [Violation(4, f"opportunistic work on {r.cluster} {r.period_start} while "
                             f"{r.project} (within budget) lacks {r.unmet:.1f} "
                             f"GPU-hours there")
                for r in unmet.merge(cells, on=CELL).itertuples(index=False)]
    out += [Violation(4, f"{a.project} has budget left yet got opportunistic "
                         f"GPU-hours on {a.cluster} {a.period_start}")
            for a in opp[opp["project"].isin(within)].itertuples(index=False)]
    return out


def check_full_occupancy(grid: pd.DataFrame, given: pd.Series, demand) -> list[Violation]:
    """Rule 5: unmet demand on a cluster-period ⇒ it is full (within one GPU × period).

    One violation a cluster-period, naming the first waiting project in id order.
    """
    grid = grid.assign(idle=grid["gpus"] * grid["hours"] - grid["granted"] - grid["reserved"])
    cells = pd.DataFrame({"asked": demand,
                          "unmet": demand - given.reindex(demand.index, fill_value=0.0)})
    # "waits": unmet by more than the relative tolerance of sums (solvers that report 8
    # significant digits, like CBC through PuLP, leave ~1e-8 relative unmet)
    cells = cells[cells["unmet"] > cells["asked"] * TOL + TOL].reset_index()
    cells = cells.merge(grid[[*CELL, "hours", "idle"]], on=CELL)
    cells = cells[cells["idle"] > cells["hours"] + 1e-6].drop_duplicates(CELL, keep="first")
    return [Violation(5, f"{r.cluster} {r.period_start.isoformat()}: {r.idle:.1f} GPU-hours "
                         f"idle while {r.project} waits")
            for r in cells.itertuples(index=False)]


def check_contract(plan, res, previous: dict | None) -> list[Violation]:
    """Rule 6: a reservation running at ``as_of`` in the previous plan keeps its planned end."""
    if previous is None or not previous.get("reservations"):
        return []
    as_of = _ts(plan["as_of"])
    before = pd.DataFrame(previous["reservations"], columns=["request_id", "nodes", "start",
                                                             "end"])
    before["start"], before["end"] = _ts_column(before["start"]), _ts_column(before["end"])
    running = before[(before["start"] < as_of) & (as_of < before["end"])]
    now = res.drop_duplicates("request_id", keep="last")[["request_id", "nodes", "end"]]
    both = running.merge(now, on="request_id", how="left", suffixes=("", "_now"))
    broken = both["end_now"].isna() | (both["end_now"] != both["end"]) | (
        both["nodes_now"] != both["nodes"])
    return [Violation(6, f"running reservation {rid} was cut or moved")
            for rid in both["request_id"][broken]]


def check_plan(plan: dict[str, Any], scenario: Scenario,
               previous: dict | None = None) -> list[Violation]:
    """Every violation of the contract's hard rules 1–6 in ``plan``."""
    periods, alloc, res = _tables(plan)
    demand = _demand_hours(scenario, periods)
    # computed once, read by several rules: the cluster × period grid and the grants per
    # (project, cluster, period), both kinds
    grid = _cells(scenario, periods, alloc, res)
    given = alloc.groupby(GRANT)["gpu_hours"].sum()
    violations = (check_capacity(grid)
                  + check_demand(scenario, given, demand)
                  + check_reservations(scenario, plan, periods, res)
                  + check_budget(scenario, alloc, res, given, demand)
                  + check_full_occupancy(grid, given, demand)
                  + check_contract(plan, res, previous))
    return sorted(violations)
