"""The replay's pictures (matplotlib, Agg, PNG bytes without metadata: same data, same bytes).

Per policy: delivered vs owed per team (bars), cumulative spend vs budget pace per
team (lines), and occupancy over time (hourly, all clusters).
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from planner.simulate.metrics import PolicyMetrics  # noqa: E402

#: ``text.parse_math`` off: a team's id is text, never mathtext (``a$^$`` would stop the
#: replay's pictures with a parse error; ``$x$`` would be typeset)
_STYLE = {"svg.hashsalt": "gpu-planner", "figure.dpi": 100, "font.size": 8,
          "text.parse_math": False}
#: A team's name longer than this is cut (with "…") on a chart; the report's table has it whole.
LABEL_CHARS = 40


def _label(team: str) -> str:
    return team if len(team) <= LABEL_CHARS else team[:LABEL_CHARS - 1] + "…"


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


def delivered_vs_owed(name: str, metrics: PolicyMetrics) -> bytes:
    """Bars per team: NGH owed and delivered."""
    teams = metrics.summary["teams"]
    labels = list(teams)
    owed = np.array([teams[t]["owed_ngh"] for t in labels])
    delivered = np.array([teams[t]["delivered_ngh"] for t in labels])
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(max(6.0, 0.5 * len(labels)), 4.0))
        x = np.arange(len(labels))
        ax.bar(x - 0.2, owed, 0.4, label="owed")
        ax.bar(x + 0.2, delivered, 0.4, label="delivered")
        ax.set_xticks(x, [_label(t) for t in labels], rotation=60, ha="right")
        ax.set_ylabel("NGH")
        ax.set_title(f"{name}: delivered vs owed per team")
        ax.legend()
        fig.tight_layout()
        return _png(fig)


def spend_vs_pace(name: str, metrics: PolicyMetrics) -> bytes:
    """Lines per team: cumulative NGH charged (solid) against budget pace (dashed)."""
    hourly = metrics.hourly
    hours = np.arange(1, hourly.charged_team.shape[1] + 1)
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(8.0, 4.5))
        colours = plt.get_cmap("tab20").colors  # one colour a team up to 20 teams
        lines = []
        for t in range(len(hourly.teams)):
            colour = colours[t % len(colours)]
            lines += ax.plot(hours / 24, hourly.charged_team[t], lw=1, color=colour)
            ax.plot(hours / 24, hourly.pace_team[t] * hours, lw=0.8, ls="--", color=colour)
        ax.set_xlabel("day of the quarter")
        ax.set_ylabel("NGH charged (dashed: budget pace)")
        ax.set_title(f"{name}: cumulative spend vs budget pace")
        # the labels given to legend() itself: matplotlib drops a plot's label that starts
        # with "_", so a team named "_infra" would be missing from the legend
        ax.legend(lines, [_label(team) for team in hourly.teams], fontsize=6, ncol=2)
        fig.tight_layout()
        return _png(fig)


def occupancy_over_time(name: str, metrics: PolicyMetrics) -> bytes:
    """Hourly occupancy of all clusters, with a daily mean."""
    occ = metrics.hourly.occupancy
    days = np.arange(len(occ)) / 24
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(8.0, 3.0))
        ax.plot(days, occ, lw=0.4, alpha=0.5, label="hourly")
        n = len(occ) // 24
        if n:
            ax.plot(np.arange(n) + 0.5, occ[: n * 24].reshape(n, 24).mean(axis=1), lw=1.2,
                    label="daily mean")
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("day of the quarter")
        ax.set_ylabel("busy ÷ capacity")
        ax.set_title(f"{name}: occupancy over time")
        ax.legend()
        fig.tight_layout()
        return _png(fig)


CHARTS = (("delivered-vs-owed", "delivered vs owed per team"),
          ("spend-vs-pace", "cumulative spend vs budget pace"),
          ("occupancy", "occupancy over time"))
_DRAW = {"delivered-vs-owed": delivered_vs_owed, "spend-vs-pace": spend_vs_pace,
         "occupancy": occupancy_over_time}


def pictures(name: str, metrics: PolicyMetrics) -> dict[str, bytes]:
    """The three PNGs of one policy, by file name (``<policy>-<chart>.png``)."""
    return {f"{name}-{chart}.png": _DRAW[chart](name, metrics) for chart, _ in CHARTS}
