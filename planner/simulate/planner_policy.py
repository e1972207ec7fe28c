"""``planner``: ours — a rolling-horizon replan every period, an executor enforcing it.

At every period boundary (``period_hours`` of the scenario from quarter start) the
policy plans with :func:`planner.run.plan_scenario` on the replay's scenario with

- ``as_of`` = the boundary;
- ``usage`` = what ran in the quarter so far, two rows per project and cluster:
  the lookback window (the last ``lookback_days``) and everything before it,
  each as its average GPUs (exact totals, so the budget used and the first
  period's lookback offset are exact; the later periods see the window evenly);
- ``demand`` = the outstanding work of *allocated* jobs (waiting or running) per
  project and cluster, profiled as if each started now: a job of g GPUs with r
  hours of work left asks g GPUs from ``as_of`` for r rounded up to whole periods
  (the executor enforces GPUs, so a period's grant is asked in GPUs, not averaged). No future
  submissions are known (the replay does not peek at the trace);
- no reservation requests (gang jobs are elastic demand; whole nodes are the
  executor's placement), budgets as in the scenario;
- the previous plan as ``previous`` (churn penalty), with ``frozen_periods`` = 0
  so the first period follows today's demand rather than yesterday's forecast;
- the independent hard-rule check (``plan_scenario(check=...)``) on the first
  plan and every ``check_every``-th after it (it costs more than the solve).

The executor then enforces the plan's first period on every cluster:

1. an allocated job of project p runs **guaranteed** while p's guaranteed GPUs
   (its running guaranteed jobs plus this one) stay within the plan's
   guaranteed GPUs G_pk; it may preempt (expired) unallocated, fill and
   opportunistic work to start, and is never preempted itself;
2. work the plan did not see — submitted after the replan — must not wait a day
   for the next one: an allocated job runs **paced** while its project's running
   GPUs (all clusters, NGH per hour) stay within its entitlement, and preempts like
   guaranteed work and is protected like it until the next replan re-classes it.
   The entitlement, recomputed every hour, is the budget pace (budget ÷ quarter
   hours: the allocation a project is owed every hour it has work), with the pace
   of projects that have no work redistributed: the clusters' capacity (NGH per
   hour) water-filled over the projects' outstanding allocated work, weighted by
   their pace, and never below min(pace, that work); a project running nothing
   may always start one job of up to a node paced while it has budget left (a
   one-node job of a small project would otherwise wait for a node to empty by
   itself); a project without a budget is
   entitled to nothing. ``share_idle_pace=False``:
   the project's own pace only; ``pace_always=False``: paced only while the
   project is behind its pace over the quarter so far (charged < budget × elapsed
   share).
3. beyond that, up to G_pk + O_pk (the opportunistic grant) it runs
   **opportunistic**, preempting only unallocated and fill work;
4. every GPU still idle goes to any waiting job that fits (**fill**): allocated
   jobs first, of the projects furthest behind their budget pace first (charged ÷
   (budget × elapsed share of the quarter)), then unallocated work
   (``over_budget_last=True``: allocated jobs of projects that spent their budget
   after the unallocated work). Reclaim takes unallocated, then fill, then
   opportunistic work, from the projects furthest ahead of their budget pace first
   (within each project and class, the engine's rule: resumable jobs first, then
   non-resumable ones that ran least).

``replan_hours`` (default: ``period_hours``) replans more often than the period
grid, from any hour. At each replan the running jobs are re-classed against the
new plan, oldest first: guaranteed up to G_pk, opportunistic up to G_pk + O_pk,
fill beyond.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
import pandas as pd

from planner.config import ModelConfig, load_model
from planner.fairshare import water_fill
from planner.simulate.policies import AdmissionPolicy
from planner.times import iso

GUARANTEED, PACED, OPPORTUNISTIC, FILL, UNALLOCATED = (
    "guaranteed", "paced", "opportunistic", "fill", "unallocated")
_HOUR = pd.Timedelta(hours=1)


class PlannerPolicy(AdmissionPolicy):
    """``planner``: see the module docstring."""

    name = "planner"

    def __init__(self, model: ModelConfig | None = None, check_every: int = 30,
                 replan_hours: float | None = None, pace_always: bool = True,
                 over_budget_last: bool = False, share_idle_pace: bool = True) -> None:
        model = model or load_model("default")
        self.replan_hours = replan_hours  # None: every period_hours
        self.pace_always = pace_always  # False: paced only while behind the budget pace
        self.over_budget_last = over_budget_last  # True: over-budget work fills last
        self.share_idle_pace = share_idle_pace  # False: each project's own pace only
        self.check_every = check_every
        self.model = replace(model, contract=replace(model.contract, frozen_periods=0))

    def job_key(self, sim, job: int) -> tuple:
        """Allocated work before unallocated, then submit order."""
        return (0 if sim.jobs.allocated[job] else 1, sim.jobs.submit[job], job)

    def prepare(self, sim) -> None:
        """The scenario without its own demand, reservations and usage; no plan yet."""
        scenario = sim.scenario
        self.base = replace(scenario, demand=scenario.demand.iloc[0:0],
                            reservations=scenario.reservations.iloc[0:0],
                            usage=scenario.usage.iloc[0:0])
        self.period = float(scenario.config.period_hours)
        days = self.model.lookback.window_days or scenario.config.lookback_days
        self.window_hours = int(round(days * 24))
        n_p, n_k = len(sim.projects), len(sim.cluster_ids)
        self.guaranteed = np.zeros((n_p, n_k))
        self.opportunistic = np.zeros((n_p, n_k))
        self.budget = scenario.arrays.budget
        self.allowed = scenario.arrays.allowed
        self.rate = np.array(sim.rate)
        self.pace = self.budget / sim.hours  # NGH per hour
        self.entitlement = self.pace.copy()  # paced work's cap, NGH per hour (2)
        self.capacity_ngh = float(np.array(sim.capacity) @ self.rate)
        jobs = sim.jobs
        self.submit = np.array(jobs.submit)
        self.allocated = np.array(jobs.allocated, dtype=bool)
        self.project = np.array(jobs.project, dtype=np.int64)
        self.cluster = np.array(jobs.cluster, dtype=np.int64)
        self.work = np.array(jobs.gpus, dtype=float) * np.array(jobs.duration)
        self.previous: dict | None = None
        self.next_plan = 0.0

    def refresh(self, sim, now: float) -> bool:
        """Every hour the paced entitlement; at period boundaries a replan, re-classing."""
        if self.share_idle_pace:
            # (2): the whole capacity (NGH per hour) water-filled over the projects'
            # outstanding allocated work, weighted by budget pace; never below
            # min(pace, demand)
            demand = np.where(self.pace > 0, sim.outstanding @ self.rate, 0.0)  # no budget,
            shared = water_fill(self.capacity_ngh, demand, np.maximum(self.pace, 1e-12))  # none
            self.entitlement = np.maximum(shared, np.minimum(self.pace, demand))
        if now < self.next_plan - 1e-9:
            return False
        self.next_plan += self.replan_hours or self.period
        cfg = sim.scenario.config
        as_of = cfg.quarter_start + pd.Timedelta(hours=now)
        if as_of >= cfg.quarter_end:
            return False
        from planner.run import plan_scenario

        scenario = replace(self.base, config=replace(cfg, as_of=as_of),
                           usage=self._usage(sim, now), demand=self._demand(sim, as_of))
        began = time.perf_counter()
        check = sim.replans % self.check_every == 0
        body = plan_scenario(scenario, self.model, self.previous, check=check).plan.body
        sim.plan_seconds += time.perf_counter() - began
        sim.replans += 1
        self.previous = body
        self._read_first_period(sim, body, iso(as_of))
        self._reclass(sim)
        return True

    # -- the scenario of a replan ----------------------------------------------------------

    def _usage(self, sim, now: float) -> pd.DataFrame:
        hours = int(round(now))
        window = min(hours, self.window_hours)
        cuts = [(0, hours - window), (hours - window, hours)]  # before the window, the window
        rows = []
        for i, (a, b) in enumerate(cuts):
            if b <= a:
                continue
            used = self._booked(sim)[:, :, a:b].sum(axis=2)
            for p, k in zip(*np.nonzero(used > 1e-9), strict=True):
                rows.append((f"sim-{i}-{p}-{k}", sim.projects[p], sim.cluster_ids[k],
                             used[p, k] / (b - a), a, b))
        start = sim.scenario.config.quarter_start
        return pd.DataFrame({
            "job_id": [r[0] for r in rows], "project": [r[1] for r in rows],
            "cluster": [r[2] for r in rows],
            "gpus": np.array([r[3] for r in rows], dtype=float),
            "start": pd.Series([start + r[4] * _HOUR for r in rows],
                               dtype="datetime64[ns, UTC]"),
            "end": pd.Series([start + r[5] * _HOUR for r in rows], dtype="datetime64[ns, UTC]"),
        }).astype({"job_id": object, "project": object, "cluster": object})

    def _booked(self, sim) -> np.ndarray:
        """(P, K, H) GPU-hours the executor's accounting reports: everything that ran."""
        return sim.used

    def _demand(self, sim, as_of: pd.Timestamp) -> pd.DataFrame:
        jobs = sim.jobs
        rows: dict[tuple[int, int, float], float] = {}
        for job in _outstanding_jobs(sim):
            if not jobs.allocated[job] or not self.allowed[jobs.project[job], jobs.cluster[job]]:
                continue
            left = sim.remaining[job]
            if sim.state[job] == 2:
                left -= sim.now - sim.run_start[job]
            # whole periods: the executor enforces GPUs, so ask for GPUs over each period
            left = float(np.ceil(max(left, 1e-6) / self.period) * self.period)
            key = (jobs.project[job], jobs.cluster[job], left)
            rows[key] = rows.get(key, 0) + jobs.gpus[job]
        forecast = self._forecast(sim)
        for p, k in zip(*np.nonzero(forecast > 1e-9), strict=True):
            rows[(int(p), int(k), -1.0)] = float(forecast[p, k])
        keys = sorted(rows)
        quarter = sim.hours - sim.now
        return pd.DataFrame({
            "project": [sim.projects[p] for p, _, _ in keys],
            "cluster": [sim.cluster_ids[k] for _, k, _ in keys],
            "start": pd.Series([as_of] * len(keys), dtype="datetime64[ns, UTC]"),
            "end": pd.Series([as_of + (h if h > 0 else quarter) * _HOUR for _, _, h in keys],
                             dtype="datetime64[ns, UTC]"),
            "gpus": np.array([rows[k] for k in keys], dtype=float),
        }).astype({"project": object, "cluster": object})

    def _forecast(self, sim) -> np.ndarray:
        """(P, K) GPUs: allocated GPU-hours submitted in the lookback window ÷ its hours."""
        window = min(sim.now, float(self.window_hours))
        if window <= 0:
            return np.zeros((len(sim.projects), len(sim.cluster_ids)))
        recent = (self.submit >= sim.now - window) & (self.submit < sim.now) & self.allocated
        out = np.zeros((len(sim.projects), len(sim.cluster_ids)))
        np.add.at(out, (self.project[recent], self.cluster[recent]), self.work[recent])
        return out / window * self.allowed

    def _read_first_period(self, sim, body: dict, first: str) -> None:
        self.guaranteed[:] = 0.0
        self.opportunistic[:] = 0.0
        p_index, k_index = sim.tree.leaf_index, sim.cluster_index
        for a in body["allocations"]:
            if a["period_start"] != first:
                continue
            target = self.guaranteed if a["kind"] == GUARANTEED else self.opportunistic
            target[p_index[a["project"]], k_index[a["cluster"]]] += float(a["gpus"])

    def _reclass(self, sim) -> None:
        jobs = sim.jobs
        for c in range(len(sim.cluster_ids)):
            taken: dict[int, int] = {}
            for job in sorted(sim.running[c], key=lambda j: (sim.run_start[j], j)):
                if not jobs.allocated[job]:
                    continue
                p = jobs.project[job]
                held = taken.get(p, 0) + sim.held(job)
                taken[p] = held
                if held <= self.guaranteed[p, c] + 1e-6:
                    sim.retag(job, GUARANTEED)
                elif held <= self.guaranteed[p, c] + self.opportunistic[p, c] + 1e-6:
                    sim.retag(job, OPPORTUNISTIC)
                else:
                    sim.retag(job, FILL)

    # -- the executor ----------------------------------------------------------------------

    def _held(self, sim, c: int, p: int, *tags: str) -> int:
        return sum(sim.held_by[c].get((p, t), 0) for t in tags)

    def candidates(self, sim, c: int) -> np.ndarray:
        """Projects with room for one more GPU of guaranteed, paced or opportunistic work."""
        held_g = sim.held_of(c, GUARANTEED)
        held_go = held_g + sim.held_of(c, OPPORTUNISTIC)
        g, o = self.guaranteed[:, c], self.opportunistic[:, c]
        running = np.array(sim.held_ngh)
        return ((g - held_g >= 1 - 1e-6) | (g + o - held_go >= 1 - 1e-6)
                | (self.entitlement - running >= self.rate[c] - 1e-6)
                | ((running == 0) & (sim.charged < self.budget)))

    def rank(self, sim, c: int, p: int, job: int) -> tuple:
        """Projects furthest below their entitlement (guaranteed GPUs or pace) first."""
        entitled = max(self.guaranteed[p, c] * self.rate[c], self.pace[p])
        held = self._running_ngh(sim, p)
        return (held / entitled if entitled > 1e-9 else np.inf, *sim.key[job])

    def _running_ngh(self, sim, p: int) -> float:
        return sim.held_ngh[p]

    def entitled(self, sim, c: int, p: int, job: int) -> str | None:
        """Guaranteed, paced, then opportunistic (module docstring, 1–3)."""
        if not sim.jobs.allocated[job]:
            return None
        need = sim.held(job)
        g, o = self.guaranteed[p, c], self.opportunistic[p, c]
        if self._held(sim, c, p, GUARANTEED) + need <= g + 1e-6:
            return GUARANTEED
        behind = self.pace_always or sim.charged[p] < self.budget[p] * sim.now / sim.hours
        cap = self.entitlement[p]
        running = self._running_ngh(sim, p)
        # one job of up to a node, always, even above the cap
        first = (running == 0 and need <= sim.gpn[c]
                 and sim.charged[p] < self.budget[p])  # (and budget left)
        if behind and (first or running + need * self.rate[c] <= cap + 1e-6):
            return PACED
        if self._held(sim, c, p, GUARANTEED, OPPORTUNISTIC) + need <= g + o + 1e-6:
            return OPPORTUNISTIC
        return None

    def victims(self, sim, c: int, p: int, job: int) -> list[tuple[int, str]]:
        """Unallocated, then fill, then (for guaranteed work) opportunistic jobs.

        Within each, projects furthest ahead of their budget pace first.
        """
        n_p = len(sim.projects)
        paced = self.budget * max(sim.now, 1.0) / sim.hours
        ahead = np.divide(sim.charged, paced, out=np.full(n_p, np.inf), where=paced > 0)
        order = [int(q) for q in np.lexsort((np.arange(n_p), -ahead))]  # most ahead first
        groups = [(q, UNALLOCATED) for q in order] + [(q, FILL) for q in order]
        if self.entitled(sim, c, p, job) in (GUARANTEED, PACED):
            groups += [(q, OPPORTUNISTIC) for q in order]
        return groups

    def fill_rank(self, sim, c: int, p: int, job: int) -> tuple:
        """Allocated work (furthest behind pace first), then unallocated work.

        With ``over_budget_last``, allocated work of projects over budget comes last.
        """
        if not sim.jobs.allocated[job]:
            return (1, 0.0, *sim.key[job])
        if self.over_budget_last and sim.charged[p] >= self.budget[p]:
            return (2, 0.0, *sim.key[job])
        paced = self.budget[p] * max(sim.now, 1.0) / sim.hours
        return (0, float(sim.charged[p]) / paced if paced > 0 else math.inf, *sim.key[job])

    def fill_tag_of(self, sim, job: int) -> str:
        """Fill for allocated work, unallocated otherwise."""
        return FILL if sim.jobs.allocated[job] else UNALLOCATED


def _outstanding_jobs(sim) -> list[int]:
    """Waiting and running jobs, in job order."""
    out = []
    for c in range(len(sim.cluster_ids)):
        out.extend(sim.running[c])
        for queue in sim.queues[c].values():
            for heap in queue.buckets.values():
                out.extend(job for _, job in heap)
    return sorted(out)
