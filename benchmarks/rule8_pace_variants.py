"""Three ways to count an overdrawn project's pace under rule 8, measured beside the shipped one.

Replays only (``planner-slurm``), for ``budget_adherence.py --rule8 fit,week,line``; none
is what ``planner tick`` does (``line`` is :class:`LinePace`'s docstring):

- ``fit``: a job beyond the budget stays in ``gp-opportunistic`` only while the account's
  running jobs *plus this job* stay within the pace (the shipped rule,
  :func:`planner.tick.keeps_pace`, keeps any job while the running ones are below it, so
  one large job may run several times the pace). The tick could decide this exactly (it
  knows each pending job's GPUs and partition).
- ``week``: the pace credited per week from quarter start, as the replays' weekly figure
  counts it: a job stays in ``gp-opportunistic`` while what the account ran this week
  (every QOS, preempted runs too) is below its pace × the hours gone in the week. The NGH
  run is sampled at each hourly refresh (running NGH per hour × the hour), an
  approximation. The tick could not decide this from what it reads today (the plan's
  totals and squeue): it would need the week's usage by account.
"""

from __future__ import annotations

import numpy as np

from planner.config import ModelConfig
from planner.simulate.policies import HOURS_PER_WEEK
from planner.simulate.replanner import Replanner
from planner.simulate.slurm_replay import OPPORTUNISTIC, OVERDRAWN, SlurmExecutor

_EPS = 1e-6


class FitPace(SlurmExecutor):
    """``fit`` (module docstring)."""

    def qos_of(self, sim, p: int, job: int) -> str:
        """gp-overdrawn unless the running jobs plus this one stay within the pace."""
        qos = self._wrapper_qos(sim, p, job)
        if qos == OPPORTUNISTIC and p in self.overdrawn:
            ngh = sim.jobs.gpus[job] * sim.rate[sim.jobs.cluster[job]]
            if self.run_ngh[p] + self.run_opp_ngh[p] + ngh > self.overdrawn_pace[p] + _EPS:
                return OVERDRAWN
        return qos


class WeekPace(SlurmExecutor):
    """``week`` (module docstring)."""

    def begin(self, sim, model: ModelConfig) -> None:
        """The shipped set-up, and this week's NGH run per project."""
        super().begin(sim, model)
        self.week_ran = np.zeros(len(sim.projects))  # NGH run this week, sampled hourly
        self.week = 0
        self.sampled = 0.0

    def before_replan(self, sim, now: float) -> None:
        """Sample the NGH run since the last hour (zero at a new week), then accrue."""
        self.week_ran += (self.run_ngh + self.run_opp_ngh) * (now - self.sampled)
        self.sampled = now
        if int(now // HOURS_PER_WEEK) != self.week:
            self.week = int(now // HOURS_PER_WEEK)
            self.week_ran[:] = 0.0
        super().before_replan(sim, now)

    def qos_of(self, sim, p: int, job: int) -> str:
        """gp-overdrawn once the week's NGH run reach the pace line of the week so far."""
        qos = self._wrapper_qos(sim, p, job)
        if qos == OPPORTUNISTIC and p in self.overdrawn:
            line = self.overdrawn_pace[p] * (sim.now - HOURS_PER_WEEK * self.week)
            if self.week_ran[p] >= line - _EPS:
                return OVERDRAWN
        return qos


def fit_pace(**kwargs) -> Replanner:
    """``planner-slurm`` with the ``fit`` pace (the registry's factory)."""
    return Replanner(FitPace(), **kwargs)


def week_pace(**kwargs) -> Replanner:
    """``planner-slurm`` with the ``week`` pace (the registry's factory)."""
    return Replanner(WeekPace(), **kwargs)


class LinePace(SlurmExecutor):
    """``line``: the shipped pace, kept only while the project is behind rule 8's own line.

    Rule 8 finds a project overdrawn once what it ran (``used`` + the NGH run on no budget,
    as of the replan) reaches ``budget`` × (1 + the share of the quarter gone). That line
    rises at the pace every hour; here an overdrawn project keeps a job in
    ``gp-opportunistic`` (at the shipped pace) only once the line, at *this* hour, has
    risen past what it had run at the replan. What it runs beyond that is charged to the
    next replan's figure, so an overrun of kept work waits until the line catches up. The
    tick could decide this from what it reads (the plan's budgets and ``used``, and
    ``unbudgeted.csv``), at the clock of its minute.
    """

    def begin(self, sim, model: ModelConfig) -> None:
        """The shipped set-up, and each project's budget and NGH run at the last replan."""
        super().begin(sim, model)
        self.ran_at_replan = np.zeros(len(sim.projects))
        self.budget_of = np.zeros(len(sim.projects))

    def apply_first_period(self, sim, body: dict, first: str) -> None:
        """The shipped state, and what each project had run by the replan (rule 8's sum)."""
        super().apply_first_period(sim, body, first)
        index = {p: i for i, p in enumerate(sim.projects)}
        for b in body.get("budgets", []):
            i = index[b["project"]]
            self.budget_of[i] = float(b["budget"])
            self.ran_at_replan[i] = float(b["used"]) + float(self.unbudgeted[i])

    #: how far past the line (a share of the budget) the project may have run and still
    #: keep its pace: 0 for ``line``; :class:`LineSlackPace`
    slack = 0.0

    def qos_of(self, sim, p: int, job: int) -> str:
        """gp-overdrawn while the line is still at or below what the project had run."""
        qos = super().qos_of(sim, p, job)
        if qos == OPPORTUNISTIC and p in self.overdrawn:
            line = self.budget_of[p] * (1.0 + self.slack + sim.now / sim.hours)
            if self.ran_at_replan[p] >= line - _EPS:
                return OVERDRAWN
        return qos


def line_pace(**kwargs) -> Replanner:
    """``planner-slurm`` with the ``line`` pace (the registry's factory)."""
    return Replanner(LinePace(), **kwargs)


class LineSlackPace(LinePace):
    """``line-slack``: :class:`LinePace` with the line a fifth of the budget higher.

    The shipped pace while the project has run less than 1.2 budgets past its even spend
    (a fifth of a budget more than rule 8's threshold), the ``line`` rule beyond: the
    bursts of ``line`` only for projects whose kept work has overrun that far.
    """

    slack = 0.2


def line_slack_pace(**kwargs) -> Replanner:
    """``planner-slurm`` with the ``line-slack`` pace (the registry's factory)."""
    return Replanner(LineSlackPace(), **kwargs)
