"""Two ways to count an overdrawn project's pace under rule 8, measured beside the shipped one.

Replays only (``planner-slurm``), for ``budget_adherence.py --rule8 fit,week``; neither is
what ``planner tick`` does:

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

from planner.simulate.policies import HOURS_PER_WEEK
from planner.simulate.slurm_replay import OPPORTUNISTIC, OVERDRAWN, SlurmReplayPolicy

_EPS = 1e-6


class FitPace(SlurmReplayPolicy):
    """``fit`` (module docstring)."""

    def qos_of(self, sim, p: int, job: int) -> str:
        """gp-overdrawn unless the running jobs plus this one stay within the pace."""
        qos = self._wrapper_qos(sim, p, job)
        if qos == OPPORTUNISTIC and p in self.overdrawn:
            ngh = sim.jobs.gpus[job] * sim.rate[sim.jobs.cluster[job]]
            if self.run_ngh[p] + self.run_opp_ngh[p] + ngh > self.overdrawn_pace[p] + _EPS:
                return OVERDRAWN
        return qos


class WeekPace(SlurmReplayPolicy):
    """``week`` (module docstring)."""

    def prepare(self, sim) -> None:
        """The shipped set-up, and this week's NGH run per project."""
        super().prepare(sim)
        self.week_ran = np.zeros(len(sim.projects))  # NGH run this week, sampled hourly
        self.week = 0
        self.sampled = 0.0

    def refresh(self, sim, now: float) -> bool:
        """Sample the NGH run since the last refresh (zero at a new week), then refresh."""
        self.week_ran += (self.run_ngh + self.run_opp_ngh) * (now - self.sampled)
        self.sampled = now
        if int(now // HOURS_PER_WEEK) != self.week:
            self.week = int(now // HOURS_PER_WEEK)
            self.week_ran[:] = 0.0
        return super().refresh(sim, now)

    def qos_of(self, sim, p: int, job: int) -> str:
        """gp-overdrawn once the week's NGH run reach the pace line of the week so far."""
        qos = self._wrapper_qos(sim, p, job)
        if qos == OPPORTUNISTIC and p in self.overdrawn:
            line = self.overdrawn_pace[p] * (sim.now - HOURS_PER_WEEK * self.week)
            if self.week_ran[p] >= line - _EPS:
                return OVERDRAWN
        return qos
