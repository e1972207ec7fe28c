"""The quarterly report as one self-contained HTML file (jinja2, autoescaped).

The template is ``reports/report.html.j2``: inline CSS, an inline SVG bar chart of
budget, used and planned NGH per area, no network. Every string is escaped by
jinja2's autoescape, so a project called ``<script>…</script>`` shows as text.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from planner.inputs import Scenario
from planner.reports.content import OVER, UNDER, Report, build_report

TEMPLATES = Path(__file__).resolve().parent.parent.parent / "reports"
TEMPLATE = "report.html.j2"

SERIES = (("budget", "#8da0cb"), ("used", "#fc8d62"), ("planned", "#66c2a5"))


@dataclass(frozen=True)
class Bar:
    """One bar of the SVG chart, in pixels."""

    x: float
    y: float
    width: float
    height: float
    color: str
    label: str  # tooltip


@dataclass(frozen=True)
class Chart:
    """The SVG bar chart: bars, category labels, y ticks."""

    width: int
    height: int
    bars: tuple[Bar, ...]
    labels: tuple[tuple[float, str], ...]  # (x centre, area)
    ticks: tuple[tuple[float, str], ...]  # (y, value)


def area_chart(report: Report, width: int = 720, height: int = 300) -> Chart:
    """Budget, used and planned per area as grouped bars."""
    left, bottom, top = 70.0, 40.0, 10.0
    areas = report.areas
    peak = max([max(a.budget, a.used, a.planned) for a in areas] + [1.0])
    plot_h = height - bottom - top
    group = (width - left) / max(len(areas), 1)
    bar_w = group * 0.8 / len(SERIES)
    bars, labels = [], []
    for i, a in enumerate(areas):
        x0 = left + i * group + group * 0.1
        for j, (name, color) in enumerate(SERIES):
            value = getattr(a, name)
            h = plot_h * value / peak
            bars.append(Bar(round(x0 + j * bar_w, 1), round(top + plot_h - h, 1),
                            round(bar_w - 2, 1), round(h, 1), color,
                            f"{a.node} {name}: {value:,.0f} NGH"))
        labels.append((round(left + (i + 0.5) * group, 1), a.node))
    ticks = tuple((round(top + plot_h - plot_h * k / 4, 1), f"{peak * k / 4:,.0f}")
                  for k in range(5))
    return Chart(width, height, tuple(bars), tuple(labels), ticks)


def environment() -> jinja2.Environment:
    """The template environment: autoescape on for everything."""
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True,
                              lstrip_blocks=True)


def render_html(plan: dict[str, Any], scenario: Scenario) -> str:
    """The report as HTML text."""
    report = build_report(plan, scenario)
    gpn = {c["cluster"]: c["gpus_per_node"] for c in plan["clusters"]}
    rate = {c["cluster"]: c["rate"] for c in plan["clusters"]}
    reservations = []
    for r in plan["reservations"]:
        hours = (pd.Timestamp(r["end"]) - pd.Timestamp(r["start"])).total_seconds() / 3600
        reservations.append({**r, "ngh": r["nodes"] * gpn[r["cluster"]] * hours *
                             rate[r["cluster"]]})
    return environment().get_template(TEMPLATE).render(
        report=report, plan=plan, chart=area_chart(report), series=SERIES,
        reservations=reservations, over=OVER, under=UNDER)


def write_html(plan: dict[str, Any], scenario: Scenario, path: str | os.PathLike[str]) -> Path:
    """Write the HTML report of ``plan`` to ``path``."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(render_html(plan, scenario), encoding="utf-8")
    os.replace(tmp, target)
    return target
