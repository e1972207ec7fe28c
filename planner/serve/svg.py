"""The dashboard's charts as inline SVG, drawn here (no library, no script, no network).

Three kinds: a burn-down (budget left against the even pace), daily usage bars (what ran,
then what the plan grants), and a reservation calendar. Every text is escaped with
:func:`markupsafe.escape`; every number is written by this module. The result is
:class:`~markupsafe.Markup`, safe to place in an autoescaped template.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
from markupsafe import Markup, escape

from planner.words import number

WIDTH, HEIGHT = 760, 260
LEFT, RIGHT, TOP, BOTTOM = 72, 40, 26, 38
COLORS = {"left": "#1f77b4", "pace": "#7f7f7f", "actual": "#fc8d62", "planned": "#66c2a5",
          "opportunistic": "#c5b0d5", "as_of": "#444444", "grid": "#e4e4e4"}


def _ticks(top: float, count: int = 4) -> list[float]:
    """Round tick values from 0 to at least ``top`` (1, 2 or 5 × a power of ten apart)."""
    if top <= 0:
        return [0.0]
    raw = top / count
    power = 10 ** len(str(int(raw))) / 10 if raw >= 1 else 1.0
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [step * i for i in range(int(top / step) + 2) if step * (i - 1) < top]


class _Frame:
    """A plot area: time on x (``t0`` … ``t1``), NGH on y (0 … ``top``)."""

    def __init__(self, t0: pd.Timestamp, t1: pd.Timestamp, top: float,
                 height: int = HEIGHT) -> None:
        self.t0, self.t1 = t0, t1
        self.ticks = _ticks(top)
        self.top = max(self.ticks[-1], 1e-9)
        self.height = height

    def x(self, t: pd.Timestamp) -> float:
        span = (self.t1 - self.t0).total_seconds() or 1.0
        return LEFT + (WIDTH - LEFT - RIGHT) * (t - self.t0).total_seconds() / span

    def y(self, v: float) -> float:
        return self.height - BOTTOM - (self.height - TOP - BOTTOM) * max(v, 0.0) / self.top

    def axes(self, unit: str, values: bool = True) -> list[str]:
        out = []
        for v in self.ticks if values else ():
            y = self.y(v)
            out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
                       f'stroke="{COLORS["grid"]}"/>')
            out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
                       f'{escape(number(v))}</text>')
        out.append(f'<text x="12" y="{TOP - 10}" class="unit">{escape(unit)}</text>')
        month = self.t0.normalize().replace(day=1)
        while month <= self.t1:
            if month >= self.t0:
                x = self.x(month)
                out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{self.height - BOTTOM}" '
                           f'y2="{self.height - BOTTOM + 5}" stroke="#999"/>')
                out.append(f'<text x="{x + 3:.1f}" y="{self.height - BOTTOM + 16}">'
                           f'{escape(month.strftime("%b %d"))}</text>')
            month = (month + pd.Timedelta(days=32)).replace(day=1)
        return out

    def as_of(self, t: pd.Timestamp) -> list[str]:
        x = self.x(t)
        return [f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{self.height - BOTTOM}" '
                f'stroke="{COLORS["as_of"]}" stroke-dasharray="2 3"/>',
                f'<text x="{x + 4:.1f}" y="{TOP + 10}">as of {escape(t.strftime("%b %d"))}'
                '</text>']


def _svg(chart_id: str, title: str, body: list[str], height: int = HEIGHT) -> Markup:
    head = (f'<svg id="{escape(chart_id)}" class="chart" role="img" viewBox="0 0 {WIDTH} '
            f'{height}" width="{WIDTH}" height="{height}" xmlns="http://www.w3.org/2000/svg">'
            f'<title>{escape(title)}</title>')
    return Markup(head + "".join(body) + "</svg>")


def _legend(items: Sequence[tuple[str, str, bool]], height: int = HEIGHT) -> list[str]:
    out, x = [], LEFT
    y = height - 8
    for label, color, dashed in items:
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        out.append(f'<line x1="{x}" x2="{x + 18}" y1="{y - 4}" y2="{y - 4}" stroke="{color}" '
                   f'stroke-width="3"{dash}/>')
        out.append(f'<text x="{x + 22}" y="{y}">{escape(label)}</text>')
        x += 30 + 7 * len(label)
    return out


def _path(frame: _Frame, times: Sequence[pd.Timestamp], values: Sequence[float]) -> str:
    return " ".join(f"{'M' if i == 0 else 'L'}{frame.x(t):.1f},{frame.y(v):.1f}"
                    for i, (t, v) in enumerate(zip(times, values, strict=True)))


def burn_down(burn: dict[str, Any], chart_id: str, title: str) -> Markup:
    """Budget left (budget − cumulative spend, actual then planned) against the even pace."""
    times, left, pace = burn["times"], burn["left"], burn["pace"]
    frame = _Frame(times[0], times[-1], max([*left, *pace, 0.0]))
    body = frame.axes("NGH left")
    body.append(f'<rect x="{frame.x(burn["as_of"]):.1f}" y="{TOP}" '
                f'width="{max(frame.x(times[-1]) - frame.x(burn["as_of"]), 0):.1f}" '
                f'height="{HEIGHT - TOP - BOTTOM}" fill="#eef6ea"/>')
    body.append(f'<path d="{_path(frame, times, pace)}" fill="none" stroke="{COLORS["pace"]}" '
                'stroke-width="1.6" stroke-dasharray="6 4"/>')
    body.append(f'<path d="{_path(frame, times, left)}" fill="none" stroke="{COLORS["left"]}" '
                'stroke-width="2.4"/>')
    body += frame.as_of(burn["as_of"])
    body += _legend([("budget left (actual, then planned: shaded)", COLORS["left"], False),
                     ("even pace", COLORS["pace"], True)])
    return _svg(chart_id, title, body)


def usage_bars(history: dict[str, Any], chart_id: str, title: str) -> Markup:
    """NGH per day, stacked: what ran (the ledger), then guaranteed and opportunistic grants."""
    days = history["days"]
    if not days:
        return _svg(chart_id, title, ['<text x="20" y="40">no days to show</text>'])
    end = days[-1] + pd.Timedelta(days=1)
    series = [("actual", history["actual"]), ("planned", history["planned"]),
              ("opportunistic", history["opportunistic"])]
    totals = [sum(v[i] for _, v in series) for i in range(len(days))]
    frame = _Frame(days[0], end, max([*totals, 0.0]))
    body = frame.axes("NGH a day")
    width = max(frame.x(days[0] + pd.Timedelta(days=1)) - frame.x(days[0]) - 1, 1)
    for i, day in enumerate(days):
        base = 0.0
        for name, values in series:
            v = values[i]
            if v <= 0:
                continue
            y0, y1 = frame.y(base), frame.y(base + v)
            body.append(f'<rect x="{frame.x(day):.1f}" y="{y1:.1f}" width="{width:.1f}" '
                        f'height="{max(y0 - y1, 0.5):.1f}" fill="{COLORS[name]}">'
                        f'<title>{escape(day.strftime("%Y-%m-%d"))} {escape(name)}: '
                        f'{escape(number(v))} NGH</title></rect>')
            base += v
    body += frame.as_of(history["as_of"])
    body += _legend([("ran (ledger)", COLORS["actual"], False),
                     ("planned within budget", COLORS["planned"], False),
                     ("opportunistic (beyond budget)", COLORS["opportunistic"], False)])
    return _svg(chart_id, title, body)


def calendar(rows: Sequence[dict[str, Any]], start: pd.Timestamp, end: pd.Timestamp,
             as_of: pd.Timestamp, chart_id: str, title: str) -> Markup:
    """One bar a reservation over the quarter: ``request_id`` on ``cluster``, its nodes."""
    height = TOP + BOTTOM + 26 * max(len(rows), 1)
    frame = _Frame(start, end, 1.0, height)
    body = frame.axes("", values=False)  # the time axis only
    if not rows:
        body.append(f'<text x="{LEFT}" y="{TOP + 18}">no reservations in this plan</text>')
    for i, r in enumerate(rows):
        y = TOP + 26 * i
        x0, x1 = frame.x(pd.Timestamp(r["start"])), frame.x(pd.Timestamp(r["end"]))
        label = f"{r['request_id']}: {r['nodes']} nodes on {r['cluster']}"
        body.append(f'<rect x="{x0:.1f}" y="{y + 3}" width="{max(x1 - x0, 2):.1f}" height="18" '
                    f'fill="{COLORS["left"]}" opacity="0.75"><title>{escape(label)}, '
                    f'{escape(r["start"])} → {escape(r["end"])}</title></rect>')
        anchor, tx = ("end", x0 - 4) if x0 > LEFT + 260 else ("start", x1 + 4)
        body.append(f'<text x="{tx:.1f}" y="{y + 16}" text-anchor="{anchor}">'
                    f'{escape(label)}</text>')
    body += frame.as_of(as_of)
    return _svg(chart_id, title, body, height)
