"""The Grafana dashboard and the Prometheus alert rules in ``deploy/``, generated here.

``python -m planner.serve.deploy`` (re)writes ``deploy/grafana/gpu-planner.json`` and
``deploy/prometheus/gpu-planner-alerts.yml``; a test checks the files equal what this
module generates and that every metric they query is one ``/metrics`` exports
(:data:`planner.serve.metrics.FAMILIES`). Each panel is one small function of metric
names, so a renamed metric fails here, not in a site's Grafana.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml

from planner.serve.metrics import PREFIX
from planner.words import UNDER

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
DASHBOARD = Path("grafana") / "gpu-planner.json"
ALERTS = Path("prometheus") / "gpu-planner-alerts.yml"
STALE_HOURS = 26  # a daily cycle that has not succeeded in this long
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def m(name: str) -> str:
    """A metric's full name."""
    return PREFIX + name


def _target(expr: str, legend: str = "", instant: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"datasource": DATASOURCE, "expr": expr, "refId": "A",
                           "legendFormat": legend}
    if instant:
        out.update(instant=True, format="table")
    return out


def _panel(pid: int, kind: str, title: str, description: str, grid: tuple[int, int, int, int],
           targets: list[dict[str, Any]], unit: str = "short",
           extra: dict[str, Any] | None = None) -> dict[str, Any]:
    x, y, w, h = grid
    for i, t in enumerate(targets):
        t["refId"] = chr(ord("A") + i)
    panel = {"id": pid, "type": kind, "title": title, "description": description,
             "datasource": DATASOURCE, "gridPos": {"x": x, "y": y, "w": w, "h": h},
             "targets": targets,
             "fieldConfig": {"defaults": {"unit": unit}, "overrides": []}, "options": {}}
    if extra:
        panel.update(extra)
    return panel


AREA = 'area=~"$area"'


def dashboard() -> dict[str, Any]:
    """The Grafana dashboard model (schema of Grafana 10/11; import it, pick the datasource)."""
    panels = [
        _panel(1, "stat", "Hours since the last successful cycle",
               f"planner cycle should succeed daily; the alert fires after {STALE_HOURS} h.",
               (0, 0, 6, 4),
               [_target(f"(time() - {m('cycle_last_success_timestamp_seconds')}) / 3600")],
               "h"),
        _panel(2, "stat", "Last cycle failed", "1 when the last planner cycle run failed.",
               (6, 0, 6, 4), [_target(f'{m("cycle_last_status")}{{status="failed"}}')]),
        _panel(3, "stat", "MIP gap of the plan in force", "As the solver reported it.",
               (12, 0, 6, 4), [_target(m("plan_mip_gap"))], "percentunit"),
        _panel(4, "stat", "Unplaced reservations", "Requests the plan could not place.",
               (18, 0, 6, 4), [_target(m("plan_unplaced_reservations"))]),
        _panel(5, "bargauge", "Forecast % of budget by area",
               "Forecast (used + planned) ÷ budget; NGH = GPU-hours × the GPU type's rate.",
               (0, 4, 12, 8),
               [_target(f"sum by (area) ({m('forecast_ngh')}{{{AREA}}}) / "
                        f"sum by (area) ({m('budget_ngh')}{{{AREA}}})", "{{area}}")],
               "percentunit"),
        _panel(6, "table", "Projects with a risk flag",
               "overrun: forecast above budget; unused budget: forecast below 80 %; "
               "opportunistic-heavy: opportunistic NGH above 25 % of budget.",
               (12, 4, 12, 8),
               [_target(f"{m('risk')}{{{AREA}}} == 1", instant=True)]),
        _panel(7, "timeseries", "Used against the even pace by area (NGH)",
               "Used so far and budget × the share of the quarter elapsed, as each plan "
               "saw them.", (0, 12, 12, 8),
               [_target(f"sum by (area) ({m('used_ngh')}{{{AREA}}})", "{{area}} used"),
                _target(f"sum by (area) ({m('even_pace_ngh')}{{{AREA}}})",
                        "{{area}} even pace")]),
        _panel(8, "timeseries", "GPUs by cluster: granted, entitled, running",
               "The plan's first period: granted = entitled + opportunistic.", (12, 12, 12, 8),
               [_target(f"sum by (cluster) ({m('granted_gpus')}{{{AREA}}})",
                        "{{cluster}} granted"),
                _target(f"sum by (cluster) ({m('entitled_gpus')}{{{AREA}}})",
                        "{{cluster}} entitled"),
                _target(f"sum by (cluster) ({m('running_gpus')}{{{AREA}}})",
                        "{{cluster}} running"),
                _target(f"sum by (cluster) ({m('cluster_gpus')})", "{{cluster}} GPUs")]),
        _panel(9, "table", "Budget, used, planned and forecast per project (NGH)",
               "As planner status prints them.", (0, 20, 24, 10),
               [_target(f"{m(name)}{{{AREA}}}", name, instant=True)
                for name in ("budget_ngh", "used_ngh", "planned_ngh", "forecast_ngh",
                             "opportunistic_planned_ngh")]),
        _panel(10, "timeseries", "Cycle seconds (wall and CPU)",
               "The last planner cycle run, from cycles.jsonl.", (0, 30, 12, 7),
               [_target(m("cycle_last_duration_seconds"), "wall"),
                _target(m("cycle_last_cpu_seconds"), "CPU")], "s"),
        _panel(11, "timeseries", "Cycle runs by status", "Runs recorded in cycles.jsonl.",
               (12, 30, 12, 7), [_target(f"{m('cycle_runs_total')}", "{{status}}")]),
    ]
    return {
        "uid": "gpu-planner", "title": "gpu-planner: GPU budgets and planning cycles",
        "description": "Generated by python -m planner.serve.deploy; every panel queries a "
                       "metric planner serve exports at /metrics.",
        "tags": ["gpu-planner"], "timezone": "utc", "schemaVersion": 39, "version": 1,
        "editable": True, "refresh": "5m", "time": {"from": "now-7d", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus",
             "label": "Prometheus"},
            {"name": "area", "type": "query", "datasource": DATASOURCE, "label": "area",
             "query": f"label_values({m('budget_ngh')}, area)", "includeAll": True,
             "multi": True, "allValue": ".*", "refresh": 2,
             "current": {"text": "All", "value": "$__all"}},
        ]},
        "panels": panels,
    }


def alert_rules() -> dict[str, Any]:
    """The Prometheus rule file: a stale cycle, a dashboard gone, budget left unused."""
    share = f"{UNDER:g}"
    return {"groups": [{"name": "gpu-planner", "rules": [
        {"alert": "GpuPlannerCycleStale",
         "expr": f"time() - {m('cycle_last_success_timestamp_seconds')} > "
                 f"{STALE_HOURS} * 3600",
         "for": "10m", "labels": {"severity": "warning"},
         "annotations": {
             "summary": f"planner cycle has not succeeded in {STALE_HOURS} h",
             "description": "The last successful planning cycle ended {{ $value | "
                            "humanizeDuration }} ago; the plan in force is getting old. "
                            "See the Cycles page of planner serve and cycles.jsonl."}},
        {"alert": "GpuPlannerMetricsAbsent",
         "expr": f"absent({m('plan_info')})", "for": "30m",
         "labels": {"severity": "warning"},
         "annotations": {
             "summary": "planner serve exports no plan",
             "description": "No plan_info series for 30 minutes: planner serve is down, "
                            "not scraped, or no plan is current."}},
        {"alert": "GpuPlannerBudgetLeftUnused",
         "expr": f"{m('forecast_ngh')} / {m('budget_ngh')} < {share}",
         "for": "1h", "labels": {"severity": "info"},
         "annotations": {
             "summary": "{{ $labels.project }} is forecast to leave more than "
                        f"{100 * (1 - UNDER):.0f} % of its budget unused",
             "description": "Forecast (used + planned) is {{ $value | humanizePercentage }} "
                            "of the budget of {{ $labels.project }} ({{ $labels.area }} / "
                            "{{ $labels.team }})."}},
    ]}]}


def files() -> dict[Path, bytes]:
    """Relative path under ``deploy/`` → bytes."""
    return {DASHBOARD: (json.dumps(dashboard(), indent=1, ensure_ascii=False) + "\n").encode(),
            ALERTS: ("# Generated by python -m planner.serve.deploy; do not edit by hand.\n"
                     + yaml.safe_dump(alert_rules(), sort_keys=False, width=100,
                                      allow_unicode=True)).encode()}


def main(argv: list[str] | None = None) -> int:
    """Write the files under ``--out`` (default: the checkout's ``deploy/``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(DEPLOY), help="folder to write (default deploy/)")
    args = parser.parse_args(argv)
    for rel, data in files().items():
        target = Path(args.out) / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        print(f"wrote {target}")  # noqa: T201
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
