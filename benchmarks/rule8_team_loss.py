"""Which jobs cost a team its weekly delivered ÷ owed under rule 8, and who held their GPUs.

    nice python benchmarks/rule8_team_loss.py [--trace synthetic|philly|FILE.csv]
        [--seed 7] [--jobs 40000] [--team TEAM] [--top 6] [--name NAME]

Replays the trace under ``planner-slurm`` as shipped (``on``) and with rule 8 off
(``off``, the export before it), takes the team ``--team`` (default: the worst team with
the rule, the lowest weekly delivered ÷ owed), and per project of it and week the
delivered NGH that counts (min(delivered, owed), ``planner.simulate.metrics``) with the
rule and without. For the weeks it lost, the jobs of the team whose delivered NGH in them
moved most (a job started later, ran in more pieces, or not at all) each get a row: its
size, cluster and QOS, its runs and first start both ways, and, on its cluster at its first
start without the rule, the GPUs held with the rule by the projects overdrawn at that hour
(under gp-opportunistic, kept at their pace; gp-overdrawn; budget QOS), by the projects
the rule finds overdrawn only later in the quarter, and by all others (budget QOS or
gp-opportunistic): what held the GPUs the job got without the rule. Writes
``benchmarks/results/<name>.json`` (default ``rule8-team-loss-<trace>``).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from budget_adherence import make_trace  # noqa: E402
from rule8_weekly_loss import ever, replay  # noqa: E402

from planner.inputs.load import load_scenario  # noqa: E402
from planner.results import load_now, write_result  # noqa: E402
from planner.simulate.metrics import (  # noqa: E402
    HOURS_PER_WEEK,
    Axes,
    _job_arrays,
    _teams,
    binned,
    offered_work,
    spread,
)
from planner.simulate.trace import read_trace  # noqa: E402


def overdrawn_at(timeline: list[tuple[float, frozenset[str]]], hour: float) -> frozenset[str]:
    """The projects overdrawn by the last replan at or before ``hour``."""
    now: frozenset[str] = frozenset()
    for at, projects in timeline:
        if at > hour:
            break
        now = projects
    return now


def delivered_by_job(axes: Axes, segments, allocated: np.ndarray, jobs: list[int]
                     ) -> dict[int, np.ndarray]:
    """Job -> its allocated NGH per week (every run counts, as the metrics count it)."""
    out = {}
    for j in jobs:
        runs = [s for s in segments if s.job == j]
        if not allocated[j] or not runs:
            out[j] = np.zeros(int(np.ceil(axes.n_hours / HOURS_PER_WEEK)))
            continue
        got = spread(np.array([s.start for s in runs]), np.array([s.end for s in runs]),
                     np.array([s.gpus * axes.rate[s.cluster] for s in runs]),
                     np.zeros(len(runs), dtype=int), 1, axes.n_hours)
        out[j] = binned(got, HOURS_PER_WEEK)[0]
    return out


def held_at(axes: Axes, segments, cluster: int, hour: float, now: frozenset[str],
            later: frozenset[str]) -> dict[str, int]:
    """GPUs held on ``cluster`` at ``hour`` by group (the module docstring)."""
    held: dict[str, int] = defaultdict(int)
    for s in segments:
        if s.cluster == cluster and s.start <= hour < s.end:
            name = axes.projects[s.project]
            if name in now:
                group = "overdrawn_kept" if s.tag != "overdrawn" else "overdrawn_parked"
                group = "overdrawn_budget" if s.tag == "budget" else group
            elif name in later:
                group = "later_budget" if s.tag == "budget" else "later_opportunistic"
            else:
                group = "others_budget" if s.tag == "budget" else "others_opportunistic"
            held[group] += s.held
    return held


def main() -> None:
    """Replay with rule 8 and without, find the losing jobs, write the result file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="synthetic")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--jobs", type=int, default=40000)
    parser.add_argument("--team", help="the team to look at (default: the worst with the rule)")
    parser.add_argument("--top", type=int, default=6, help="jobs to show")
    parser.add_argument("--name")
    args = parser.parse_args()
    path, scenario_dir, default = make_trace(args)
    scenario = load_scenario(scenario_dir)
    trace = read_trace(path, scenario)
    load = load_now()
    axes = Axes.of(scenario)
    runs = {v: replay(scenario, trace, v) for v in ("on", "off")}
    teams = {t: (runs["on"][0].metrics.summary["teams"][t],
                 runs["off"][0].metrics.summary["teams"][t])
             for t in runs["on"][0].metrics.summary["teams"]}

    def lost(t: str) -> float:
        on, off = teams[t]
        return (off["delivered_over_owed_weekly"] - on["delivered_over_owed_weekly"]) \
            * on["owed_ngh"] if on.get("owed_ngh") else 0.0

    worst = runs["on"][0].metrics.summary["teams"]
    team = args.team or min((t for t in worst if worst[t].get("owed_ngh")),
                            key=lambda t: (worst[t]["delivered_over_owed_weekly"], t))
    team_of, team_names = _teams(scenario.tree)
    members = [int(i) for i in np.flatnonzero(team_of == team_names.index(team))]
    jobs = _job_arrays(scenario, trace, axes)
    owed_w = binned(offered_work(scenario, trace, axes).owed_ph, HOURS_PER_WEEK)
    mine = [int(j) for j in np.flatnonzero(np.isin(jobs["project"], members))]
    by_job = {v: delivered_by_job(axes, runs[v][0].result.segments, jobs["allocated"], mine)
              for v in runs}
    # per project and week: what counts (min(delivered, owed)) with and without the rule
    weeks_lost = []
    for p in members:
        got = {v: sum((by_job[v][j] for j in mine if jobs["project"][j] == p),
                      np.zeros(owed_w.shape[1])) for v in runs}
        counts = {v: np.minimum(got[v], owed_w[p]) for v in runs}
        for w in np.flatnonzero(counts["on"] < counts["off"] - 1e-6):
            weeks_lost.append((p, int(w), float(counts["off"][w] - counts["on"][w])))
    lost_weeks = {(p, w) for p, w, _ in weeks_lost}
    moved = sorted(((float(by_job["off"][j][w] - by_job["on"][j][w]), j, w)
                    for j in mine for p, w in lost_weeks if jobs["project"][j] == p),
                   reverse=True)
    on_segments, off_segments = runs["on"][0].result.segments, runs["off"][0].result.segments
    timeline = runs["on"][1]
    overdrawn_ever = ever(timeline)
    rows = []
    for ngh, j, w in moved[:args.top]:
        if ngh <= 0:
            break
        starts = {v: min((s.start for s in segs if s.job == j), default=None)
                  for v, segs in (("on", on_segments), ("off", off_segments))}
        tags = {v: next((s.tag for s in segs if s.job == j), "") for v, segs in
                (("on", on_segments), ("off", off_segments))}
        row = {"job": str(trace["job_id"].iat[j]),
               "project": axes.projects[jobs["project"][j]],
               "gpus": int(jobs["gpus"][j]), "cluster": axes.clusters[jobs["cluster"][j]],
               "allocated": bool(jobs["allocated"][j]),
               "submit_h": round(float(jobs["submit"][j]), 1), "week": w + 1,
               "ngh_lost_in_week": round(ngh, 1),
               "runs_on": sum(s.job == j for s in on_segments),
               "runs_off": sum(s.job == j for s in off_segments),
               "start_on_h": None if starts["on"] is None else round(starts["on"], 1),
               "start_off_h": None if starts["off"] is None else round(starts["off"], 1),
               "qos_on": tags["on"], "qos_off": tags["off"]}
        if starts["off"] is not None:
            now = overdrawn_at(timeline, starts["off"])
            held = held_at(axes, on_segments, int(jobs["cluster"][j]), starts["off"], now,
                           overdrawn_ever - now)
            off_held = held_at(axes, off_segments, int(jobs["cluster"][j]), starts["off"],
                               now, overdrawn_ever - now)
            row |= {k: held.get(k, 0) for k in HELD}
            row["overdrawn_then"] = ", ".join(sorted(now))
            row["held_off"] = ", ".join(f"{k} {v}" for k, v in sorted(off_held.items()))
        rows.append(row)
        print(row, flush=True)
    on_team, off_team = teams[team]
    out = write_result(
        args.name or default.replace("budget-adherence", "rule8-team-loss"),
        title=f"Rule 8 under Slurm: the jobs that cost {team} its weekly delivered ÷ owed",
        columns=COLUMNS, rows=rows, load_before=load,
        what=f"`planner-slurm` replays {len(trace):,} jobs (`{path.name}`) on "
             f"`{scenario_dir.name}` with rule 8 as shipped (on) and without it (off). Team "
             f"{team}: owed {on_team['owed_ngh']:,.0f} NGH, weekly delivered ÷ owed "
             f"{on_team['delivered_over_owed_weekly']} on, "
             f"{off_team['delivered_over_owed_weekly']} off ({lost(team):,.0f} NGH less "
             f"with the rule, in {len(weeks_lost)} (project, week) pairs). Each row is a job "
             "of the team whose allocated NGH in a week the team lost fell most; the GPU "
             "columns are what held the job's cluster, with the rule, at the hour the job "
             "started without it (overdrawn then: the projects overdrawn at that hour; "
             "overdrawn later: projects the rule finds overdrawn later in the quarter). "
             "CPU s of the replays: " + ", ".join(f"{v} {r[2]:.1f}" for v, r in runs.items()),
        notes=["Every team's NGH gained or lost with the rule: " + ", ".join(
            f"{t} {-lost(t):+,.0f}" for t in sorted(teams, key=lost, reverse=True)),
            "Worst team and worst sizeable team (owed ≥ 1 % of all owed; "
            "planner.simulate.metrics), weekly delivered ÷ owed: " + "; ".join(
                f"{v} {r[0].metrics.summary['worst_team_delivered_over_owed']} and "
                f"{r[0].metrics.summary['worst_sizeable_team_delivered_over_owed']}"
                for v, r in runs.items())])
    print(f"wrote {out}")


HELD = ("overdrawn_kept", "overdrawn_parked", "overdrawn_budget", "later_opportunistic",
        "later_budget", "others_budget", "others_opportunistic")
COLUMNS = [
    {"key": "job", "label": "job"},
    {"key": "project", "label": "project"},
    {"key": "gpus", "label": "GPUs"},
    {"key": "cluster", "label": "cluster"},
    {"key": "allocated", "label": "allocated"},
    {"key": "submit_h", "label": "submitted (h)"},
    {"key": "week", "label": "week"},
    {"key": "ngh_lost_in_week", "label": "NGH lost in the week"},
    {"key": "runs_on", "label": "runs with the rule"},
    {"key": "runs_off", "label": "runs without"},
    {"key": "start_on_h", "label": "first start with the rule (h)"},
    {"key": "start_off_h", "label": "first start without (h)"},
    {"key": "qos_on", "label": "QOS with the rule"},
    {"key": "qos_off", "label": "QOS without"},
    {"key": "overdrawn_then", "label": "overdrawn then"},
    {"key": "overdrawn_kept", "label": "GPUs: overdrawn then, gp-opportunistic"},
    {"key": "overdrawn_parked", "label": "… gp-overdrawn"},
    {"key": "overdrawn_budget", "label": "… budget QOS"},
    {"key": "later_opportunistic", "label": "overdrawn later, gp-opportunistic"},
    {"key": "later_budget", "label": "… budget QOS"},
    {"key": "others_budget", "label": "others, budget QOS"},
    {"key": "others_opportunistic", "label": "… gp-opportunistic"},
    {"key": "held_off", "label": "the same groups without the rule"},
]

if __name__ == "__main__":
    main()
