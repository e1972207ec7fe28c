"""The quarterly report as one self-contained HTML file (jinja2, autoescaped).

The template is ``reports/report.html.j2``: inline CSS, inline SVG charts (budget, used
and planned NGH per area as bars; cumulative spend per area by week against the
even-pace line), the clusters' weekly utilization as a coloured heat-map table, no
network. Every string is escaped by jinja2's autoescape, so a project called
``<script>…</script>`` shows as text.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
import pandas as pd

from planner.config import ModelConfig
from planner.explain import explain_all, explanation_lines
from planner.inputs import Scenario
from planner.plan.write import write_files
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


AREA_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
               "#7f7f7f", "#bcbd22", "#17becf")  # as the workbook's line chart
HEAT_STOPS = ((0.0, (0xF8, 0x69, 0x6B)), (0.8, (0xFF, 0xEB, 0x84)), (1.0, (0x63, 0xBE, 0x7B)))


@dataclass(frozen=True)
class Line:
    """One polyline of the pacing chart."""

    points: str  # "x,y x,y ..."
    color: str
    dashed: bool
    label: str


@dataclass(frozen=True)
class LineChart:
    """The SVG pacing chart: lines, x labels (week ends), y ticks, the as-of marker."""

    width: int
    height: int
    left: float
    top: float
    bottom: float  # y of the x axis
    lines: tuple[Line, ...]
    x_labels: tuple[tuple[float, str], ...]  # (x, "W3")
    ticks: tuple[tuple[float, str], ...]  # (y, value)
    as_of_x: float
    legend: tuple[tuple[str, str], ...]  # (colour, area)


def nice_step(raw: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × 10^k at or above ``raw`` (axis tick spacing)."""
    scale = 10.0 ** math.floor(math.log10(raw))
    return next(m * scale for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * scale >= raw * (1 - 1e-12))


def pacing_chart(report: Report, width: int = 720, height: int = 320) -> LineChart:
    """Cumulative spend (solid) and the even-pace line (dashed) per area, by week end."""
    left, right, top, bottom = 80.0, 10.0, 10.0, 40.0
    weeks = report.weeks
    high = max([max(a.cumulative + a.pace(weeks), default=0.0) for a in report.pacing]
               + [1.0])
    step = nice_step(high / 4)
    peak = step * math.ceil(high / step)
    plot_w, plot_h = width - left - right, height - top - bottom
    q_start, q_end = weeks[0].start, weeks[-1].end
    span = (q_end - q_start).total_seconds()

    def x_of(stamp: pd.Timestamp) -> float:
        return round(left + plot_w * (stamp - q_start).total_seconds() / span, 1)

    def y_of(value: float) -> float:
        return round(top + plot_h * (1 - value / peak), 1)

    lines = []
    for k, a in enumerate(report.pacing):
        color = AREA_COLORS[k % len(AREA_COLORS)]
        for values, dashed, what in ((a.cumulative, False, "cumulative spend"),
                                     (a.pace(weeks), True, "even pace")):
            points = [(x_of(q_start), y_of(0.0))] + [(x_of(w.end), y_of(v))
                                                     for w, v in zip(weeks, values,
                                                                     strict=True)]
            lines.append(Line(" ".join(f"{x},{y}" for x, y in points), color, dashed,
                              f"{a.area} {what}"))
    labels, last_x = [], -1e9
    for w in weeks:  # a short last week's label would overprint its neighbour's
        if x_of(w.end) - last_x >= 24:
            labels.append((x_of(w.end), f"W{w.number}"))
            last_x = x_of(w.end)
    ticks = tuple((y_of(v), f"{v:,.0f}") for v in np.arange(0, peak * (1 + 1e-9), step))
    return LineChart(width, height, left, top, top + plot_h, tuple(lines), tuple(labels), ticks,
                     x_of(pd.Timestamp(report.plan["as_of"])),
                     tuple((AREA_COLORS[k % len(AREA_COLORS)], a.area)
                           for k, a in enumerate(report.pacing)))


def heat_color(share: float) -> str:
    """The heat map's background for a utilization share (the workbook's colour scale)."""
    share = min(max(share, 0.0), 1.0)
    for (lo, c0), (hi, c1) in pairwise(HEAT_STOPS):
        if share <= hi:
            t = (share - lo) / (hi - lo)
            mixed = (round(a + (b - a) * t) for a, b in zip(c0, c1, strict=True))
            return "#" + "".join(f"{v:02x}" for v in mixed)
    return "#" + "".join(f"{v:02x}" for v in HEAT_STOPS[-1][1])


def environment() -> jinja2.Environment:
    """The template environment: autoescape on for everything."""
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True,
                              lstrip_blocks=True)


def render_html(plan: dict[str, Any], scenario: Scenario,
                model: ModelConfig | None = None) -> str:
    """The report as HTML text (``model``: the plan's lookback; default its ``model``)."""
    report = build_report(plan, scenario)
    whys = explain_all(plan, scenario, model)
    gpn = {c["cluster"]: c["gpus_per_node"] for c in plan["clusters"]}
    rate = {c["cluster"]: c["rate"] for c in plan["clusters"]}
    reservations = []
    for r in plan["reservations"]:
        hours = (pd.Timestamp(r["end"]) - pd.Timestamp(r["start"])).total_seconds() / 3600
        reservations.append({**r, "ngh": r["nodes"] * gpn[r["cluster"]] * hours *
                             rate[r["cluster"]]})
    return environment().get_template(TEMPLATE).render(
        report=report, plan=plan, chart=area_chart(report), series=SERIES,
        pacing=pacing_chart(report), heat_color=heat_color,
        opportunistic=[sum(a.opportunistic[w.number - 1] for a in report.pacing)
                       for w in report.weeks],
        reservations=reservations, over=OVER, under=UNDER,
        whys=None if whys is None else [(ex.subject.project, ex.subject.headline,
                                          explanation_lines(ex)) for ex in whys])


def write_html(plan: dict[str, Any], scenario: Scenario, path: str | os.PathLike[str],
               model: ModelConfig | None = None) -> Path:
    """Write the HTML report of ``plan`` to ``path``."""
    target = Path(path)
    return write_files(target.parent,
                       {target.name: render_html(plan, scenario, model).encode()})[0]
