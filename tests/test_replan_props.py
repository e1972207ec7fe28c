"""Invariants of a replan on random small scenarios: every hard rule holds a day later.

The executor runs only part of what the first plan granted on its first day (usage fed
back at a random share of each grant, reservations in full); the replan a day later, with
the first plan as ``--previous``, must still obey rules 1-6 under both models (the
default freezes one period, strict-budgets two): usage below the plan gives projects
budget back, which the frozen period's kept grants must not crowd out (rule 4; the
hand-worked cases are in tests/test_model.py).
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.check import check_plan
from planner.run import plan_scenario
from tests.test_properties import MODELS, scenarios


def ran_on_first_day(plan: dict, share: float) -> list[tuple]:
    """Usage rows: ``share`` of each first-day grant, every reservation running then."""
    day = plan["periods"][0]
    start, end = pd.Timestamp(day["start"]), pd.Timestamp(day["end"])
    hours = (end - start) / pd.Timedelta(hours=1)
    gpn = {c["cluster"]: c["gpus_per_node"] for c in plan["clusters"]}
    rows = []
    for n, a in enumerate(plan["allocations"]):
        if a["period_start"] == day["start"] and a["gpu_hours"] * share > 1e-3:
            rows.append((f"ran{n}", a["project"], a["cluster"], a["gpu_hours"] * share / hours,
                         day["start"], day["end"]))
    for r in plan["reservations"]:
        lo, hi = max(start, pd.Timestamp(r["start"])), min(end, pd.Timestamp(r["end"]))
        if hi > lo:
            rows.append((f"res-{r['request_id']}", r["project"], r["cluster"],
                         r["nodes"] * gpn[r["cluster"]], lo.isoformat(), hi.isoformat()))
    return rows


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sc=scenarios(), model=st.sampled_from(sorted(MODELS)),
       share=st.sampled_from([0.0, 0.3, 1.0]))
def test_a_replan_a_day_later_obeys_every_hard_rule(sc, model, share):
    first = plan_scenario(sc, MODELS[model]).plan.body
    usage = [(*row[:4], row[4].isoformat(), row[5].isoformat())
             for row in sc.usage.itertuples(index=False)]
    rows = usage + ran_on_first_day(first, share)
    fed = pd.DataFrame(rows, columns=list(sc.usage.columns[:6]))
    for column in sc.usage.columns[6:]:  # optional columns (the ledger's state): empty
        fed[column] = ""
    for column in ("start", "end"):
        fed[column] = pd.to_datetime(fed[column], utc=True, format="ISO8601")
    fed["gpus"] = fed["gpus"].astype(float)
    later = replace(sc, usage=fed).with_as_of(pd.Timestamp("2026-11-02", tz="UTC"))
    run = plan_scenario(later, MODELS[model], previous=first)  # raises on a violation
    assert check_plan(run.plan.body, later, first) == []
