"""``/metrics``: the plan in force and the cycles, in Prometheus' text format.

Written by ``prometheus_client`` (label values escaped by it). Every family is listed in
:data:`FAMILIES` with its help text; the Grafana dashboard and the alert rules in
``deploy/`` are generated from these names (:mod:`planner.serve.deploy`), and a test
checks that every name they query is one ``/metrics`` exports.

Per project and cluster, GPUs in the plan's first period (as ``planner status``):
granted (guaranteed + opportunistic + reserved), entitled (guaranteed + reserved) and
running at as_of. Per project, NGH over the quarter (NGH = GPU-hours × the GPU type's
rate): budget, used, planned, forecast, opportunistic planned, even pace by now, and one
series per risk flag (1 when it carries the flag). Per cycle: the last run's time,
status, wall and CPU seconds, the last success's time, the count of runs by status, and
the plan's as_of, solver gap and unplaced reservations.

The plan's families are written once per plan in force (:func:`plan_exposition`, kept by
the app); the run log's on every scrape (:func:`cycle_exposition`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from planner.words import PROJECT_RISKS

PREFIX = "gpu_planner_"
PROJECT_CLUSTER = ("project", "cluster", "area")
PROJECT = ("project", "area", "team")

#: name (without the prefix) → (type, labels, help)
FAMILIES: dict[str, tuple[str, tuple[str, ...], str]] = {
    "granted_gpus": ("gauge", PROJECT_CLUSTER, "GPUs the plan grants the project on the "
                     "cluster now: guaranteed + opportunistic + reserved (first period)"),
    "entitled_gpus": ("gauge", PROJECT_CLUSTER, "GPUs the project is entitled to on the "
                      "cluster now: guaranteed + reserved (first period)"),
    "running_gpus": ("gauge", PROJECT_CLUSTER, "GPUs of the project's jobs running on the "
                     "cluster at the plan's as_of (usage ledger)"),
    "budget_ngh": ("gauge", PROJECT, "The project's budget for the quarter, NGH (normalized "
                   "GPU-hours = GPU-hours x the GPU type's rate)"),
    "used_ngh": ("gauge", PROJECT, "NGH the project used this quarter up to as_of"),
    "planned_ngh": ("gauge", PROJECT, "NGH the plan charges the project from as_of to "
                    "quarter end (guaranteed + reserved)"),
    "forecast_ngh": ("gauge", PROJECT, "Forecast NGH at quarter end: used + planned"),
    "opportunistic_planned_ngh": ("gauge", PROJECT, "NGH planned for the project as "
                                  "opportunistic (beyond budget, preemptible)"),
    "even_pace_ngh": ("gauge", PROJECT, "Even pace by now: budget x the share of the "
                      "quarter elapsed at as_of, NGH"),
    "risk": ("gauge", (*PROJECT, "flag"), "1 when the project carries the risk flag "
             "(overrun, unused budget, opportunistic-heavy; see planner status's legend)"),
    "cluster_gpus": ("gauge", ("cluster", "gpu_type"), "GPUs of the cluster"),
    "plan_as_of_timestamp_seconds": ("gauge", (), "as_of of the plan in force, Unix time"),
    "plan_mip_gap": ("gauge", (), "Relative MIP gap of the plan in force, as the solver "
                     "reported it"),
    "plan_unplaced_reservations": ("gauge", (), "Reservation requests the plan in force "
                                   "could not place"),
    "plan_info": ("gauge", ("folder", "model", "solver", "solver_status"), "The plan in "
                  "force (always 1)"),
    "quarter_elapsed_ratio": ("gauge", (), "Share of the quarter elapsed at as_of"),
    "cycle_last_run_timestamp_seconds": ("gauge", (), "When the last planner cycle run "
                                         "ended, Unix time"),
    "cycle_last_success_timestamp_seconds": ("gauge", (), "When the last successful "
                                             "planner cycle run ended (or current last "
                                             "moved), Unix time"),
    "cycle_last_status": ("gauge", ("status",), "1 for the status of the last planner "
                          "cycle run (succeeded or failed), 0 for the other"),
    "cycle_last_duration_seconds": ("gauge", (), "Wall seconds of the last planner cycle "
                                    "run"),
    "cycle_last_cpu_seconds": ("gauge", (), "CPU seconds of the last planner cycle run"),
    "cycle_runs": ("counter", ("status",), "planner cycle runs recorded in cycles.jsonl, "
                   "by status"),
}
STATUSES = ("succeeded", "failed")


def metric_names() -> set[str]:
    """Every sample name ``/metrics`` may export (counters with ``_total``)."""
    return {PREFIX + name + ("_total" if kind == "counter" else "")
            for name, (kind, _, _) in FAMILIES.items()}


def _family(name: str) -> GaugeMetricFamily | CounterMetricFamily:
    kind, labels, text = FAMILIES[name]
    cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
    return cls(PREFIX + name, text, labels=list(labels))


def _unix(text: str) -> float:
    return pd.Timestamp(text).timestamp()


PLAN_FAMILIES = tuple(name for name in FAMILIES if not name.startswith("cycle_"))
CYCLE_FAMILIES = tuple(name for name in FAMILIES if name.startswith("cycle_"))


class _Families(Collector):
    """Yields the families ``fill`` adds samples to (only ``names``)."""

    def __init__(self, names: tuple[str, ...], fill: Any) -> None:
        self.names, self.fill = names, fill

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """The families, filled."""
        fam = {name: _family(name) for name in self.names}
        self.fill(fam)
        yield from fam.values()


def _text(names: tuple[str, ...], fill: Any) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(names, fill))
    return generate_latest(registry)


def plan_exposition(view: Any) -> bytes:
    """The families of the plan in force (the same for as long as it is in force)."""
    return _text(PLAN_FAMILIES, lambda fam: _plan(view, fam) if view is not None
                 and view.usable else None)


def cycle_exposition(records: list[dict[str, Any]], moved: float | None) -> bytes:
    """The families of the run log (``cycles.jsonl``) and of ``current``'s last move."""
    return _text(CYCLE_FAMILIES, lambda fam: _cycles(records, moved, fam))


def _cycles(records: list[dict[str, Any]], moved: float | None, fam: dict[str, Any]) -> None:
    last = records[-1] if records else None
    if last is not None:
        fam["cycle_last_run_timestamp_seconds"].add_metric([], _unix(last["finished"]))
        for status in STATUSES:
            fam["cycle_last_status"].add_metric([status],
                                                1.0 if last["status"] == status else 0.0)
        fam["cycle_last_duration_seconds"].add_metric([], float(last.get("seconds", 0)))
        fam["cycle_last_cpu_seconds"].add_metric([], float(last.get("cpu_seconds", 0)))
    ok = [r for r in records if r.get("status") == "succeeded"]
    success = _unix(ok[-1]["finished"]) if ok else moved
    if success is not None:
        fam["cycle_last_success_timestamp_seconds"].add_metric([], success)
    for status in STATUSES:
        fam["cycle_runs"].add_metric([status], sum(r.get("status") == status for r in records))


def _plan(view: Any, fam: dict[str, Any]) -> None:
    plan, tree = view.plan, view.scenario.tree
    area = {p: tree.path(p)[0] for p in tree.leaves}
    team = {p: tree.path(p)[-2] if len(tree.path(p)) > 1 else "" for p in tree.leaves}
    running = view._running_on
    cells = view.quotas_now()
    on = {(project, cluster) for project, held in running.items() for cluster in held}
    for (p, c) in sorted(set(cells) | on):
        g, o, r = cells.get((p, c), (0.0, 0.0, 0.0))
        labels = [p, c, area.get(p, "")]
        fam["granted_gpus"].add_metric(labels, g + o + r)
        fam["entitled_gpus"].add_metric(labels, g + r)
        fam["running_gpus"].add_metric(labels, running.get(p, {}).get(c, 0.0))
    for row in view.status.rows:
        p = row.project
        labels = [p, area.get(p, ""), team.get(p, "")]
        for name, value in (("budget_ngh", row.budget), ("used_ngh", row.used),
                            ("planned_ngh", row.planned), ("forecast_ngh", row.forecast),
                            ("opportunistic_planned_ngh", row.planned_opportunistic),
                            ("even_pace_ngh", view.line_of[p].pace)):
            fam[name].add_metric(labels, value)
        for flag in PROJECT_RISKS:
            fam["risk"].add_metric([*labels, flag], 1.0 if flag in row.flags else 0.0)
    for c in plan["clusters"]:
        fam["cluster_gpus"].add_metric([c["cluster"], c["gpu_type"]],
                                       c["nodes"] * c["gpus_per_node"])
    solver = plan["solver"]
    fam["plan_as_of_timestamp_seconds"].add_metric([], _unix(plan["as_of"]))
    fam["plan_mip_gap"].add_metric([], float(solver["mip_gap"]))
    fam["plan_unplaced_reservations"].add_metric([], len(plan["unplaced"]))
    fam["plan_info"].add_metric([view.name, plan["model"], solver["name"], solver["status"]],
                                1.0)
    fam["quarter_elapsed_ratio"].add_metric([], view.elapsed)
