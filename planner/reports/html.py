"""The quarterly report as one self-contained HTML file (jinja2, autoescaped).

The template is ``planner/templates/report.html.j2``: inline CSS, the headline risks
first, two charts drawn by matplotlib and inlined as SVG (budget, used and planned NGH
per area as bars; cumulative spend per area by week against the even-pace line), the
clusters' weekly utilization as a coloured heat-map table, no network. Every string is
escaped: by jinja2's autoescape in the page, by matplotlib's SVG writer in the charts
(text kept as text, ``$`` not read as mathematics), so a project called
``<script>…</script>`` shows as text. matplotlib is imported when a chart is drawn.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
import pandas as pd
from markupsafe import Markup

from planner.config import ModelConfig
from planner.explain import explain_all, explanation_lines
from planner.inputs import Scenario
from planner.plan.write import write_files
from planner.reports.content import Report, build_report, report_verdict
from planner.words import (
    OPPORTUNISTIC,
    OVERRUN,
    RISKS,
    UNUSED,
    ngh_definition,
    number,
    percent,
    plan_rates,
)

TEMPLATES = ("planner", "templates")  # package data: planner/templates/*.j2, in the wheel
TEMPLATE = "report.html.j2"

SERIES = (("budget", "#8da0cb"), ("used", "#fc8d62"), ("planned", "#66c2a5"))
AREA_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
               "#7f7f7f", "#bcbd22", "#17becf")  # as the workbook's line chart
HEAT_STOPS = ((0.0, (0xF8, 0x69, 0x6B)), (0.8, (0xFF, 0xEB, 0x84)), (1.0, (0x63, 0xBE, 0x7B)))

#: matplotlib settings of the report's charts: text stays text (and is escaped by the SVG
#: writer), ``$`` in an id is not read as mathematics, ids of SVG elements are salted with
#: a constant and no date is written, so the same report gives the same bytes.
STYLE = {"svg.fonttype": "none", "svg.hashsalt": "gpu-planner", "text.parse_math": False,
         "font.size": 9, "font.family": "DejaVu Sans", "axes.spines.top": False,
         "axes.spines.right": False}


@dataclass(frozen=True)
class Series:
    """One line of the pacing chart: NGH at quarter start and at each week's end."""

    label: str  # "<area> cumulative spend" or "<area> even pace"
    times: tuple[pd.Timestamp, ...]
    values: tuple[float, ...]
    color: str
    dashed: bool


def pacing_series(report: Report) -> tuple[Series, ...]:
    """Cumulative spend (solid) and the even-pace line (dashed) per area, by week end."""
    weeks = report.weeks
    times = (weeks[0].start, *(w.end for w in weeks))
    out = []
    for k, a in enumerate(report.pacing):
        color = AREA_COLORS[k % len(AREA_COLORS)]
        for values, dashed, what in ((a.cumulative, False, "cumulative spend"),
                                     (a.pace(weeks), True, "even pace")):
            out.append(Series(f"{a.area} {what}", times, (0.0, *map(float, values)), color,
                              dashed))
    return tuple(out)


def _svg(fig: Any, chart_id: str) -> str:
    """The figure as an inline ``<svg>`` element (no XML prolog), with ``id=chart_id``."""
    import matplotlib.pyplot as plt

    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    plt.close(fig)
    text = buffer.getvalue()
    svg = re.sub(r"\s*<metadata>.*?</metadata>", "", text[text.index("<svg"):], flags=re.S)
    return svg.replace("<svg", f'<svg id="{chart_id}" role="img"', 1)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def area_chart_svg(report: Report) -> str:
    """Budget, used and planned NGH per area as grouped bars (matplotlib, inline SVG)."""
    plt = _pyplot()
    areas = report.areas
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(9.0, 3.6))
        x = np.arange(len(areas))
        width = 0.8 / len(SERIES)
        for j, (name, color) in enumerate(SERIES):
            ax.bar(x + (j - 1) * width, [getattr(a, name) for a in areas], width * 0.95,
                   color=color, label=name)
        ax.set_xticks(x, [a.node for a in areas])
        ax.set_ylabel("NGH")
        ax.yaxis.set_major_formatter(_thousands())
        ax.grid(axis="y", color="#dddddd")
        ax.set_axisbelow(True)
        ax.legend(frameon=False, ncols=len(SERIES))
        fig.tight_layout()
        return _svg(fig, "area-chart")


def _thousands() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _: f"{value:,.0f}")


def pacing_chart_svg(report: Report) -> str:
    """Cumulative spend per area by week against the even-pace line (matplotlib, SVG).

    The weeks after ``as_of`` (planned) are shaded; the x axis is the date.
    """
    plt = _pyplot()
    from matplotlib.dates import DateFormatter

    as_of = pd.Timestamp(report.plan["as_of"]).tz_convert("UTC").tz_localize(None)
    end = report.weeks[-1].end.tz_convert("UTC").tz_localize(None)
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(9.0, 4.2))
        handles = [ax.axvspan(as_of, end, color="#e2efda", alpha=0.6, lw=0)]
        labels = ["planned (after as of)"]
        for line in pacing_series(report):
            times = [t.tz_convert("UTC").tz_localize(None) for t in line.times]
            handles += ax.plot(times, line.values, color=line.color,
                               lw=1.4 if line.dashed else 2.2, ls="--" if line.dashed else "-")
            labels.append(line.label)
        ax.set_ylabel("NGH")
        ax.yaxis.set_major_formatter(_thousands())
        ax.xaxis.set_major_formatter(DateFormatter("%b %d"))
        ax.set_ylim(bottom=0)
        ax.grid(axis="y", color="#dddddd")
        # the labels given to legend() itself: matplotlib drops a plot's label that starts
        # with "_", so an area named "_infra" would be missing from the legend
        ax.legend(handles, labels, frameon=False, fontsize=7, loc="upper left", ncols=2)
        fig.tight_layout()
        return _svg(fig, "pacing-chart")


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
    return jinja2.Environment(loader=jinja2.PackageLoader(*TEMPLATES), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True,
                              lstrip_blocks=True)


RISK_CLASS = {OVERRUN: "over", UNUSED: "under", OPPORTUNISTIC: "opportunistic"}


def risk_class(flag: str) -> str:
    """The CSS class of a risk flag (red overrun, amber unused, purple opportunistic)."""
    return RISK_CLASS.get(flag, "")


def render_html(plan: dict[str, Any], scenario: Scenario,
                model: ModelConfig | None = None,
                unbudgeted: Mapping[str, float] | None = None) -> str:
    """The report as HTML text (``model``: the plan's lookback; default its ``model``).

    ``unbudgeted``: project -> NGH run on no budget, as
    :func:`~planner.explain.build_context` takes it (default: read from the scenario folder).
    """
    report = build_report(plan, scenario)
    whys = explain_all(plan, scenario, model, unbudgeted)
    gpn = {c["cluster"]: c["gpus_per_node"] for c in plan["clusters"]}
    rate = {c["cluster"]: c["rate"] for c in plan["clusters"]}
    reservations = []
    for r in plan["reservations"]:
        hours = (pd.Timestamp(r["end"]) - pd.Timestamp(r["start"])).total_seconds() / 3600
        reservations.append({**r, "ngh": r["nodes"] * gpn[r["cluster"]] * hours *
                             rate[r["cluster"]]})
    return environment().get_template(TEMPLATE).render(
        report=report, plan=plan, area_chart=Markup(area_chart_svg(report)), series=SERIES,
        pacing_chart=Markup(pacing_chart_svg(report)), heat_color=heat_color,
        opportunistic=[sum(a.opportunistic[w.number - 1] for a in report.pacing)
                       for w in report.weeks],
        reservations=reservations, verdict=report_verdict(report),
        ngh=ngh_definition(plan_rates(plan)), legend=RISKS, risk_class=risk_class,
        n=number, pct=percent,
        whys=None if whys is None else [(ex.subject.project, ex.subject.headline,
                                          explanation_lines(ex)) for ex in whys])


def write_html(plan: dict[str, Any], scenario: Scenario, path: str | os.PathLike[str],
               model: ModelConfig | None = None,
               unbudgeted: Mapping[str, float] | None = None) -> Path:
    """Write the HTML report of ``plan`` to ``path`` (:func:`render_html`)."""
    target = Path(path)
    return write_files(target.parent, {
        target.name: render_html(plan, scenario, model, unbudgeted).encode()})[0]
