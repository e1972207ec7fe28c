"""A name that starts with "_" keeps its place in a chart's legend.

matplotlib leaves out of a legend every plotted label that starts with "_" (it reads them
as private); an area or team a director named ``_infra`` would silently vanish from the
report's pacing chart and the replay's spend chart. Both charts give legend() their labels.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from planner.config import load_model
from planner.inputs.load import load_scenario
from planner.reports.content import build_report
from planner.reports.html import pacing_chart_svg
from planner.run import SAMPLE, plan_scenario
from planner.simulate import pictures
from planner.simulate.metrics import Hourly, PolicyMetrics


def test_the_pacing_chart_names_an_area_that_starts_with_an_underscore():
    scenario = load_scenario(SAMPLE)
    report = build_report(plan_scenario(scenario, load_model("default")).plan.body, scenario)
    first = report.pacing[0]
    report = replace(report, pacing=(replace(first, area="_" + first.area),
                                     *report.pacing[1:]))
    svg = pacing_chart_svg(report)
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    # every area's two lines and the shaded span: 2 × areas + 1 legend entries
    assert f"_{first.area} cumulative spend" in texts
    assert f"_{first.area} even pace" in texts
    assert "planned (after as of)" in texts
    legend = [t for t in texts if t.endswith((" cumulative spend", " even pace"))]
    assert len(legend) == 2 * len(report.pacing)


def test_the_replay_spend_chart_names_a_team_that_starts_with_an_underscore(monkeypatch):
    seen = []
    monkeypatch.setattr(pictures, "_png", lambda fig: seen.append(fig) or b"")
    hours = 48
    hourly = Hourly(occupancy=np.ones(hours), charged_team=np.ones((2, hours)),
                    pace_team=np.ones(2), teams=("_infra", "vision"))
    pictures.spend_vs_pace("planner", PolicyMetrics(summary={}, hourly=hourly))
    (fig,) = seen
    legend = fig.axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["_infra", "vision"]
    pictures.plt.close(fig)
