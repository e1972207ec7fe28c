"""The replay's HTML report: the metrics table and every policy's charts in one file.

``planner simulate`` writes it beside ``metrics.json`` as ``report.html``: the table
of figures per policy (as on the terminal, without the seconds, so the same inputs
give the same bytes), each policy's per-team owed/delivered/charged figures, and the
three PNGs per policy embedded as ``data:`` URIs — self-contained, no network, every
string autoescaped (the template is ``planner/templates/simulation.html.j2``).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping

from planner.inputs import Scenario
from planner.reports.html import environment
from planner.simulate.pictures import CHARTS

TEMPLATE = "simulation.html.j2"


def render_simulation_html(scenario: Scenario, jobs: int, runs: list,
                           pictures: Mapping[str, bytes], figures: dict | None = None) -> str:
    """The report of ``runs`` (``planner.simulate.run.PolicyRun``s) replaying ``jobs`` jobs.

    ``pictures`` holds the PNGs by file name, as :func:`planner.simulate.pictures.pictures`
    names them; ``figures`` the trace's own (:func:`planner.simulate.metrics.trace_figures`).
    """
    from planner.simulate.run import table_rows

    header, rows = table_rows(runs, seconds=False)
    charts = {r.name: [(title, "data:image/png;base64," + base64.b64encode(
        pictures[f"{r.name}-{suffix}.png"]).decode("ascii")) for suffix, title in CHARTS]
        for r in runs}
    return environment().get_template(TEMPLATE).render(
        scenario=scenario.config, jobs=jobs, metrics=header[1:],
        columns=[row[0] for row in rows], rows=rows, runs=runs, charts=charts,
        figures=figures)
