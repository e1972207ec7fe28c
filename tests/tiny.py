"""Tiny scenarios built in memory (no files), for hand-computed model tests."""

from __future__ import annotations

import pandas as pd

from planner.inputs import Scenario, ScenarioConfig

UTC = "UTC"


def ts(text: str) -> pd.Timestamp:
    return pd.Timestamp(text, tz=UTC)


def frame(rows: list[tuple], columns: list[str], dates: tuple[str, ...] = ()) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=columns)
    for column in dates:
        if len(df):
            df[column] = pd.to_datetime(df[column], utc=True, format="ISO8601")
        else:
            df[column] = pd.Series([], dtype="datetime64[ns, UTC]")
    for column in df.columns:
        if column in ("nodes", "gpus_per_node"):
            df[column] = df[column].astype("int64")
        elif column in ("weight", "gpu_hours", "gpus", "hours"):
            df[column] = df[column].astype("float64")
        elif column not in dates and column != "clusters":
            df[column] = df[column].astype(object)
    return df


def scenario(
    *,
    clusters: list[tuple] = (("c1", "H100", 1, 8),),
    org: list[tuple],
    budgets: list[tuple] = (),
    demand: list[tuple] = (),
    reservations: list[tuple] = (),
    usage: list[tuple] = (),
    as_of: str = "2026-11-02",
    quarter_start: str = "2026-10-01",
    quarter_end: str = "2026-11-03",
    period_hours: float = 24.0,
    lookback_days: float = 7.0,
    gpu_rates: dict[str, float] | None = None,
) -> Scenario:
    """A scenario: budgets rows (project, gpu_hours[, clusters tuple]); leaves w/o row: 0."""
    budget_rows = [(b[0], b[1], tuple(b[2]) if len(b) > 2 else ()) for b in budgets]
    config = ScenarioConfig("tiny", ts(quarter_start), ts(quarter_end), ts(as_of),
                            period_hours, lookback_days, gpu_rates or {})
    return Scenario(
        config=config,
        clusters=frame(list(clusters), ["cluster", "gpu_type", "nodes", "gpus_per_node"]),
        org=frame(list(org), ["id", "parent", "weight"]),
        budgets=frame(budget_rows, ["project", "gpu_hours", "clusters"]),
        demand=frame(list(demand), ["project", "cluster", "start", "end", "gpus"],
                     ("start", "end")),
        reservations=frame(list(reservations), ["request_id", "project", "cluster", "nodes",
                                                "hours", "earliest_start", "deadline"],
                           ("earliest_start", "deadline")),
        usage=frame([(*u, "") for u in usage],
                    ["job_id", "project", "cluster", "gpus", "start", "end", "state"],
                    ("start", "end")),
        source="memory",
        digest="tiny",
    )
