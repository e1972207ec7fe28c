"""``sweep.html``: a chart per headline figure and the whole table, in one file.

The charts are matplotlib SVG inline (text kept as text and escaped by the SVG
writer, ids salted with a constant, no date: same table, same bytes), one horizontal
bar per cell labelled by the values of the axes that vary; the page is the autoescaped
template ``planner/templates/sweep.html.j2``.
"""

from __future__ import annotations

import math
from typing import Any

from markupsafe import Markup

from planner.reports.html import STYLE, _pyplot, _svg, environment
from planner.sweep.spec import SweepSpec

TEMPLATE = "sweep.html.j2"
#: The figures charted, by kind, with their titles (those absent from the table are skipped).
HEADLINES = {
    "plan": (("elastic_objective", "Elastic LP objective"),
             ("elastic_gap", "Elastic LP gap as the solver reports it"),
             ("planned_ngh", "Planned NGH"),
             ("reservations_unplaced", "Reservation requests not placed")),
    "replay": (("delivered_over_owed_weekly", "Delivered ÷ owed, weekly"),
               ("delivered_over_owed_daily", "Delivered ÷ owed, daily"),
               ("occupancy", "Occupancy"),
               ("budget_error_mean", "Budget error, mean"),
               ("wait_p90_hours", "Wait p90, hours")),
}
#: Cells charted at most (the table has them all).
MAX_BARS = 200


def _float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def bar_chart_svg(labels: list[str], values: list[float | None], title: str,
                  chart_id: str) -> str:
    """Horizontal bars, one per cell, top to bottom in the table's order; blank: no value."""
    plt = _pyplot()
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(8, 0.8 + 0.28 * len(labels)))
        positions = list(range(len(labels)))
        ax.barh(positions, [v if v is not None else 0.0 for v in values], color="#66c2a5")
        ax.set_yticks(positions, labels)
        ax.invert_yaxis()
        ax.set_xlabel(title)
        for y, v in zip(positions, values, strict=True):
            if v is not None:
                ax.annotate(format(v, ".4g"), (v, y), xytext=(3, 0), textcoords="offset points",
                            va="center", fontsize=7)
        fig.tight_layout()
        return _svg(fig, chart_id)


def render_sweep_html(spec: SweepSpec, header: list[str], rows: list[list[str]]) -> str:
    """The page for ``sweep.csv``'s ``header`` and ``rows``."""
    varying = [a for a in spec.axes if len(spec.values[a]) > 1] or list(spec.axes)
    where = {column: i for i, column in enumerate(header)}
    shown = rows[:MAX_BARS]
    labels = [" · ".join(row[where[a]] or "–" for a in varying) for row in shown]
    charts: list[tuple[str, Any]] = []
    for k, (column, title) in enumerate(HEADLINES[spec.kind]):
        if column not in where:
            continue
        values = [_float(row[where[column]]) for row in shown]
        if all(v is None for v in values):
            continue
        charts.append((title, Markup(bar_chart_svg(labels, values, title, f"chart-{k}"))))
    return environment().get_template(TEMPLATE).render(
        name=spec.name, kind=spec.kind, scenario=str(spec.scenario), axes=list(spec.axes),
        header=header, rows=rows, charts=charts, first_figure=1 + len(spec.axes))
