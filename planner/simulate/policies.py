"""The scheduling policies a trace is replayed under, behind one small interface.

A :class:`Policy` has four hooks the replay (:mod:`planner.simulate.engine`) calls:

- ``job_key(sim, job)``: the job's order within its project's queue (a tuple);
- ``prepare(sim)``: once, before the first event (quotas, caps, shares);
- ``refresh(sim, now)``: at every whole hour; returns True to have every cluster
  rescheduled (new shares, ranks or plan);
- ``schedule(sim, cluster)``: at a scheduling moment, start and preempt jobs on
  one cluster through ``sim.start(job, tag)`` and ``sim.preempt_for(job, groups)``.

Most policies share one two-phase pass (:class:`AdmissionPolicy`):

1. **entitled** — projects in the policy's order (``rank``); a project's first
   waiting job starts if the policy entitles it (``entitled`` returns its tag),
   preempting expired jobs of the ``victims`` groups if it does not fit (within a
   group the engine takes resumable jobs first, then non-resumable ones that ran
   least: :meth:`~planner.simulate.engine.Replay.preempt_for`);
2. **fill** — every idle GPU goes to waiting work that fits, in ``fill_rank``
   order, without preemption (work-conserving).

The policies (``POLICIES``):

``priority``  The system Ai2 replaced. Each team has a cap on non-preemptible GPUs per
              cluster (its budget share of the cluster). A job is *high* priority when
              crc32(job_id)/2³² < 0.10 + 0.50·(submit / quarter length): the share of
              jobs marked high inflates from 10 % to 60 % over the quarter. High before
              normal, FIFO within. An allocated high job within its team's cap runs
              non-preemptible and may preempt preemptible jobs; everything else runs
              preemptible in idle GPUs. Non-preemptible work never yields.
``fairtree``  Slurm's multifactor priority with Fair Tree: projects ranked depth-first
              down the org tree by level fairshare S/U (shares over usage among
              siblings), usage decayed with a 7-day half-life and booked hourly;
              PriorityWeightAge = 0, FIFO within a project; EASY backfill (the
              highest-priority job that does not fit reserves the nodes that free first;
              a later job starts only if it ends before that or stays off those nodes),
              planned with the jobs' requested time limits (``time_limit_hours``), never
              their true durations: running jobs are expected to end at start + limit,
              a candidate to end at now + its limit; no budgets, no preemption.
``quota``     Kueue-like. Each project has a nominal quota per cluster (its budget share
              of the cluster, integer by largest remainder). A job within its
              project's nominal quota is admitted first (FIFO) and reclaims borrowed
              GPUs (preempting expired jobs of projects above their nominal quota);
              other jobs borrow idle quota, from their team's cohort first, then the
              area's, then the root's.
``lookback``  Ai2's online hierarchical fair share: every hour the cluster's GPUs are
              water-filled down the org tree by weight, capped by outstanding demand,
              offset by the last 7 days' usage (NGH, as the planner's lookback).
              Projects furthest below their share go first; an allocated job of a
              project below its share may preempt expired jobs of projects above theirs
              (unallocated ones first); idle GPUs go to any waiting work.
``planner``   Ours (:mod:`planner.simulate.planner_policy`).

Budget shares of a cluster (``priority`` caps, ``quota`` nominal quotas): each
project's budget is split over clusters in proportion to its trace GPU-hours on
them (how an administrator sets quotas where teams work); a cluster's GPUs are
then divided in proportion to the budget shares on it.
"""

from __future__ import annotations

import bisect
import heapq
import math
import operator
import zlib
from collections.abc import Iterable
from itertools import compress

import numpy as np

from planner.contract import JobClass
from planner.fairshare import hierarchical_water_fill
from planner.inputs.org import OrgTree

HOURS_PER_WEEK = 168.0


class Policy:
    """The interface; see the module docstring."""

    name = "policy"
    work_conserving = True  # no idle GPU while a waiting job fits (checked in tests)
    protects_min_runtime = True  # False: jobs may be preempted before their min runtime

    def job_key(self, sim, job: int) -> tuple:
        """Order within a project's queue: submit order."""
        return (sim.jobs.submit[job], job)

    def prepare(self, sim) -> None:
        """Once, before the replay."""

    def refresh(self, sim, now: float) -> bool:
        """At every whole hour; True reschedules every cluster."""
        return False

    def schedule(self, sim, c: int) -> None:
        """Start (and preempt) jobs on cluster ``c`` at ``sim.now``."""
        raise NotImplementedError


class AdmissionPolicy(Policy):
    """The two-phase pass of the module docstring; subclasses give the hooks."""

    fill_tag: str = JobClass.FILL

    def candidates(self, sim, c: int) -> np.ndarray | None:
        """(P,) mask of projects that may be entitled on ``c``, or None for all.

        Taken once at the start of a pass: a project whose work is preempted during
        the pass does not claim it back in the same pass.
        """
        return None

    def rank(self, sim, c: int, p: int, job: int) -> tuple:
        """Order of projects in the entitled phase (smaller first)."""
        return sim.key[job]

    def entitled(self, sim, c: int, p: int, job: int) -> str | None:
        """The tag job ``job`` runs under if entitled, else None."""
        return None

    def victims(self, sim, c: int, p: int, job: int) -> list[tuple[int, str]]:
        """(project, tag) groups ``job`` may preempt, preferred first."""
        return []

    def fill_rank(self, sim, c: int, p: int, job: int) -> tuple:
        """Order of jobs in the fill phase (smaller first)."""
        return sim.key[job]

    def fill_tag_of(self, sim, job: int) -> str:
        """The tag of a job started by the fill phase (when not entitled)."""
        return self.fill_tag

    def protect_hours(self, sim, job: int, tag: str) -> float | None:
        """Hours a job started under ``tag`` may not be preempted (None: its min runtime)."""
        return None

    #: whether a preemption can make a project entitled that was not in the same pass
    #: (its GPUs held drop): then those not entitled at the start are asked again after it
    entitles_after_preemption = True

    def quiet_key(self, sim, c: int):
        """What a pass on ``c`` reads besides ``c``'s running work and first waiting jobs.

        None (the default): the pass is always run. Otherwise a value that changes
        whenever anything else the pass reads does (shares, caps, the clock if read): a
        pass that started nothing and preempted nothing is then known to do nothing again
        while the key, :meth:`Replay.version` and :meth:`Replay.queue_version` stay the
        same (a submit behind a project's first job changes neither), and is skipped.
        """
        return None

    def schedule(self, sim, c: int) -> None:
        """Entitled phase with preemption, then fill.

        The plain pass heaps every waiting project's first job and asks :meth:`entitled`
        of each as it pops. Here the heap holds the projects entitled at the start; a
        project not entitled then can become so in the pass only by a preemption (its
        own starts aside, the policies' :meth:`entitled` reads only the project's and its
        team's GPUs held, and a start only adds to them), so the others wait aside and
        join after each preemption as :meth:`_entitled_now` says (not at all when
        ``entitles_after_preemption`` is False). The same jobs start in the same order
        (a property test replays both).
        """
        fits = sim.any_fits(c)
        if not fits and not sim.preemptible_gpus(c):
            return  # nothing fits and nothing may be preempted: no start is possible
        quiet = self._quiet_since(sim, c, fits)
        if quiet is None:
            return
        heap, later = self._entitled_heads(sim, c)
        heapq.heapify(heap)
        rank, entitled = self.rank, self.entitled
        gpus = sim.jobs.gpus
        popped = None  # the largest entry popped so far
        while heap:
            entry = heapq.heappop(heap)
            if popped is None or entry > popped:
                popped = entry
            _, p, job = entry
            tag = entitled(sim, c, p, job)
            if tag is None:
                continue
            if not sim.fits(c, gpus[job]):
                version = sim.version(c)
                room = sim.preempt_for(job, self._pass_victims(sim, c, p, job))
                if later and sim.version(c) != version:  # work was preempted: held dropped
                    later = self._entitled_now(sim, c, heap, later, popped)
                if not room:
                    continue
            sim.start(job, tag, protect=self.protect_hours(sim, job, tag))
            nxt = sim.head(c, p)
            if nxt is not None:
                heapq.heappush(heap, (rank(sim, c, p, nxt), p, nxt))
        self.fill(sim, c)
        self._quiet_after(sim, c, quiet)

    def _entitled_heads(self, sim, c: int) -> tuple[list[tuple], list[tuple]]:
        """The entitled pass's start: (rank, project, first job) of each waiting project.

        Of the projects entitled now (to heap), and of those that may become so after a
        preemption (aside; none when ``entitles_after_preemption`` is False).
        """
        heap, later = [], []
        maybe = self.candidates(sim, c)
        rank, entitled = self.rank, self.entitled
        again = self.entitles_after_preemption
        for p, job in sim.heads(c):
            if maybe is not None and not maybe[p]:
                continue
            if entitled(sim, c, p, job) is not None:
                heap.append((rank(sim, c, p, job), p, job))
            elif again:
                later.append((rank(sim, c, p, job), p, job))
        return heap, later

    def _pass_victims(self, sim, c: int, p: int, job: int) -> list[tuple[int, str]]:
        """The groups the entitled pass asks :meth:`Replay.preempt_for` to take from."""
        return self.victims(sim, c, p, job)

    def _quiet_since(self, sim, c: int, fits: bool) -> tuple | None:
        """None when the last pass on ``c`` did nothing and nothing it read changed since.

        Nothing fits now (``fits`` is :meth:`Replay.any_fits`: a job queued behind a
        project's first may fit, and the fill would start it), so the pass could only
        start what it entitles after a preemption: of the queues it reads only each
        project's first job. Otherwise what :meth:`_quiet_after` keeps should this pass do
        nothing (``()``: nothing, the policy has no :meth:`quiet_key`).
        """
        key = self.quiet_key(sim, c)
        if key is None:
            return ()
        now = (sim.version(c), sim.queue_version(c), key)
        memo = self.__dict__.setdefault("_quiet", {})  # per cluster, a pass that did nothing
        return None if not fits and memo.get(c) == now else now

    def _quiet_after(self, sim, c: int, before: tuple) -> None:
        """Remember what a pass that did nothing read (no start, no preemption), or forget."""
        if before:
            memo = self.__dict__.setdefault("_quiet", {})
            if sim.version(c) == before[0]:
                memo[c] = before
            else:
                memo.pop(c, None)

    def _fill_entries(self, sim, c: int, heads: list[tuple[int, int]]) -> list[tuple]:
        """(:meth:`fill_rank`, project, job) of each (project, job) in ``heads``."""
        fill_rank = self.fill_rank
        return [(fill_rank(sim, c, p, job), p, job) for p, job in heads]

    def _entitled_now(self, sim, c: int, heap: list, later: list, popped: tuple) -> list:
        """After a preemption: push the entries of ``later`` entitled now; the rest.

        An entry below ``popped`` (the largest popped so far) was popped by the plain pass
        already, while not entitled: it is dropped. The others join the heap under the
        rank they had at the start, as the plain pass would pop them.
        """
        waiting = []
        for entry in later:
            if entry < popped:
                continue
            if self.entitled(sim, c, entry[1], entry[2]) is None:
                waiting.append(entry)
            else:
                heapq.heappush(heap, entry)
        return waiting

    def fill(self, sim, c: int) -> None:
        """Start waiting jobs that fit, in ``fill_rank`` order, until nothing fits.

        Whether a size fits changes only when a job starts: the sizes that fit
        (:meth:`Replay.fitting_sizes`) are read once between starts.
        """
        sizes = sim.fitting_sizes(c)
        if not sizes:
            return
        fill_rank = self.fill_rank
        heap = self._fill_entries(sim, c, sim.heads_in(c, sizes))
        heapq.heapify(heap)
        gpus = sim.jobs.gpus
        while heap:
            _, p, job = heapq.heappop(heap)
            if not sim.is_waiting(job) or gpus[job] not in sizes:
                job = sim.head_in(c, p, sizes)
                if job is not None:
                    heapq.heappush(heap, (fill_rank(sim, c, p, job), p, job))
                continue
            tag = self.entitled(sim, c, p, job) or self.fill_tag_of(sim, job)
            sim.start(job, tag, protect=self.protect_hours(sim, job, tag))
            sizes = sim.fitting_sizes(c)
            if not sizes:
                return
            job = sim.head_in(c, p, sizes)
            if job is not None:
                heapq.heappush(heap, (fill_rank(sim, c, p, job), p, job))


# -- shares of the clusters by budget ---------------------------------------------------


def project_teams(tree: OrgTree) -> tuple[list[int], list[int]]:
    """Per project: its team (parent node, or itself at top level) and area (top node)."""
    return tree.team.tolist(), tree.area[tree.leaf_nodes].tolist()


def budget_shares(sim) -> np.ndarray:
    """(P, K) GPUs of each cluster by budget share (see the module docstring), floats."""
    n_p, n_k = len(sim.projects), len(sim.cluster_ids)
    budget = sim.scenario.arrays.budget
    work = np.zeros((n_p, n_k))
    jobs = sim.jobs
    np.add.at(work, (np.array(jobs.project, dtype=np.int64),
                     np.array(jobs.cluster, dtype=np.int64)),
              np.array(jobs.gpus, dtype=float) * np.array(jobs.duration, dtype=float))
    total = work.sum(axis=1, keepdims=True)
    split = np.divide(work, total, out=np.zeros_like(work), where=total > 0) * budget[:, None]
    on_cluster = split.sum(axis=0, keepdims=True)
    share = np.divide(split, on_cluster, out=np.zeros_like(split), where=on_cluster > 0)
    return share * np.array(sim.capacity, dtype=float)[None, :]


def largest_remainder(values: np.ndarray, total: int) -> np.ndarray:
    """Integers summing to ``total`` (when values sum to it) by largest remainder."""
    floor = np.floor(values + 1e-9).astype(np.int64)
    left = total - int(floor.sum())
    if left > 0:
        order = np.lexsort((np.arange(len(values)), -(values - floor)))
        floor[order[:left]] += 1
    return floor


# -- priority -------------------------------------------------------------------------------


def high_priority(job_id: str, submit_hours: float, quarter_hours: float,
                  first: float = 0.10, last: float = 0.60) -> bool:
    """Whether the job is marked high: its hash below the inflating share."""
    share = first + (last - first) * min(max(submit_hours / quarter_hours, 0.0), 1.0)
    return zlib.crc32(job_id.encode()) / 2 ** 32 < share


class PriorityPolicy(AdmissionPolicy):
    """``priority``: caps on non-preemptible GPUs per team, inflating priorities."""

    name = "priority"
    fill_tag = "preemptible"

    def job_key(self, sim, job: int) -> tuple:
        """High before normal, then submit order."""
        jobs = sim.jobs
        high = high_priority(jobs.ids[job], jobs.submit[job], sim.hours)
        return (0 if high else 1, jobs.submit[job], job)

    def prepare(self, sim) -> None:
        """Team caps: the team's budget share of each cluster, whole GPUs."""
        self.team, _ = project_teams(sim.tree)
        self._used_at: tuple[int, int] | None = None  # (cluster, version) of ``_used``
        self._used: dict[int, int] = {}  # team → non-preemptible GPUs held
        shares = budget_shares(sim)
        teams = sorted(set(self.team))
        self.members = {t: [p for p, tp in enumerate(self.team) if tp == t] for t in teams}
        self.cap = {}
        for c, total in enumerate(sim.capacity):
            per_team = np.array([shares[self.members[t], c].sum() for t in teams])
            for t, cap in zip(teams, largest_remainder(per_team, total), strict=True):
                self.cap[(t, c)] = int(cap)

    #: a pass preempts only preemptible work: no team's non-preemptible GPUs drop in it
    entitles_after_preemption = False

    def quiet_key(self, sim, c: int) -> tuple:
        """Nothing: the caps are fixed and the pass reads only the cluster's work and queues."""
        return ()

    def entitled(self, sim, c: int, p: int, job: int) -> str | None:
        """High, allocated and within the team's cap: non-preemptible."""
        if sim.key[job][0] != 0 or not sim.jobs.allocated[job]:
            return None
        team = self.team[p]
        return ("nonpreemptible" if self._team_used(sim, c, team) + sim.held(job)
                <= self.cap[(team, c)] else None)

    def _team_used(self, sim, c: int, team: int) -> int:
        """Non-preemptible GPUs the team holds on ``c``; kept until ``c``'s work changes."""
        version = (c, sim.version(c))
        if self._used_at != version:
            self._used_at, self._used = version, {}
        used = self._used.get(team)
        if used is None:
            used = self._used[team] = sum(sim.held_under(c, q, "nonpreemptible")
                                          for q in self.members[team])
        return used

    def victims(self, sim, c: int, p: int, job: int) -> list[tuple[int, str]]:
        """Any team's preemptible work."""
        return [(q, "preemptible") for q in range(len(sim.projects))]


# -- quota (Kueue) --------------------------------------------------------------------------


class QuotaPolicy(AdmissionPolicy):
    """``quota``: nominal quotas, borrowing in cohorts, reclaim."""

    name = "quota"
    fill_tag = "borrowed"

    def prepare(self, sim) -> None:
        """Nominal quotas by budget share, integer per cluster."""
        self.team, self.area = project_teams(sim.tree)
        self._n_nodes = max(self.team + self.area) + 1  # team and area ids: tree nodes
        shares = budget_shares(sim)
        self.nominal = np.zeros(shares.shape, dtype=np.int64)
        for c, total in enumerate(sim.capacity):
            self.nominal[:, c] = largest_remainder(shares[:, c], total)
        self._nominal = [self.nominal[:, c].tolist() for c in range(len(sim.capacity))]
        self._held_at: tuple[int, int] | None = None  # (cluster, version) of ``_held_now``
        self._held_now: list[int] = []
        self._unused: tuple[list[int], list[int]] | None = None

    def quiet_key(self, sim, c: int) -> tuple:
        """Nothing: the quotas are fixed and the pass reads only the cluster's work and queues."""
        return ()

    def entitled(self, sim, c: int, p: int, job: int) -> str | None:
        """Within the project's nominal quota."""
        within = self._held(sim, c)[p] + sim.held(job) <= self._nominal[c][p]
        return "nominal" if within else None

    def _held(self, sim, c: int) -> list[int]:
        """GPUs each project holds on ``c`` (``held_project``), kept until ``c``'s work changes.

        With the team and area sums of the unused nominal quota (:meth:`fill_rank`), worked
        out on the first ask.
        """
        version = (c, sim.version(c))
        if self._held_at != version:
            self._held_at, self._held_now = version, sim.held_project[:, c].tolist()
            self._unused = None
        return self._held_now

    def _unused_sums(self, sim, c: int) -> tuple[list[int], list[int]]:
        """Per team and per area (tree node), the nominal quota its projects leave unused."""
        held = self._held(sim, c)
        if self._unused is None:
            team, area = [0] * self._n_nodes, [0] * self._n_nodes
            for q, (nominal, used) in enumerate(zip(self._nominal[c], held, strict=True)):
                team[self.team[q]] += nominal - used
                area[self.area[q]] += nominal - used
            self._unused = (team, area)
        return self._unused

    def victims(self, sim, c: int, p: int, job: int) -> list[tuple[int, str]]:
        """Borrowed work of projects above their nominal quota, most over first."""
        over = sim.held_project[:, c] - self.nominal[:, c]
        order = [int(q) for q in np.lexsort((np.arange(len(over)), -over)) if over[q] > 0]
        return [(q, "borrowed") for q in order]

    def fill_rank(self, sim, c: int, p: int, job: int) -> tuple:
        """Borrow from the team's cohort first, then the area's, then the root's; FIFO."""
        team, area = self._unused_sums(sim, c)
        need = sim.held(job)
        level = 0 if team[self.team[p]] >= need else 1 if area[self.area[p]] >= need else 2
        return (level, *sim.key[job])


# -- lookback -------------------------------------------------------------------------------


class LookbackPolicy(AdmissionPolicy):
    """``lookback``: hourly hierarchical fair share with a 7-day sliding window."""

    name = "lookback"
    fill_tag: str = JobClass.FILL

    def __init__(self, window_hours: float = HOURS_PER_WEEK) -> None:
        self.window = int(round(window_hours))
        #: per cluster, (version, shares, :meth:`_over`'s list) of the last ask
        self._over_of: dict[int, tuple[int, np.ndarray, list[tuple[float, int]]]] = {}
        self._unallocated: list[tuple[int, str]] = []  # every project's unallocated group
        self._groups: list[tuple[tuple[int, str], tuple[int, str]]] = []  # _project_groups
        #: per cluster, (version, shares, the groups with expired jobs): the victims' memo
        self._live_of: dict[int, tuple] = {}
        #: per cluster, :meth:`_read`'s answer
        self._read_of: dict[int, tuple] = {}
        #: the ratios and below flags the current entitled pass started from
        self._pass_start: tuple[list[float], list[bool]] = ([], [])

    def job_key(self, sim, job: int) -> tuple:
        """Allocated work before unallocated, then submit order."""
        return (0 if sim.jobs.allocated[job] else 1, sim.jobs.submit[job], job)

    def prepare(self, sim) -> None:
        """No shares before the first hour's refresh."""
        self.share = np.zeros((len(sim.projects), len(sim.cluster_ids)))
        self._shares_set = 0  # how many times the shares were set (:meth:`quiet_key`)
        self.rate = np.array(sim.rate)
        self.period = float(sim.scenario.config.period_hours)

    def refresh(self, sim, now: float) -> bool:
        """Water-fill each cluster's GPUs down the tree, offset by the window's usage."""
        hour = int(round(now))
        used = sim.used[:, :, max(0, hour - self.window):hour]
        offset = (used.sum(axis=2) * self.rate[None, :]).sum(axis=1)  # NGH per project
        scale = self.rate * self.period  # GPUs → NGH over a period
        demand = sim.outstanding_all * scale[None, :]
        capacity = np.array(sim.capacity, dtype=float) * scale
        grant = hierarchical_water_fill(sim.tree, capacity, demand, offset)
        self.share = grant / scale[None, :]
        self._shares_set += 1
        return True

    def quiet_key(self, sim, c: int) -> int:
        """The shares read (a pass reads nothing else but the cluster's work and queues)."""
        return self._shares_set

    def _ratio(self, sim, c: int, p: int, extra: int = 0) -> float:
        share = self.share[p, c]
        held = sim.held_project[p, c] + extra
        return held / share if share > 1e-9 else math.inf if held else 0.0

    def _ratios(self, sim, c: int) -> np.ndarray:
        """:meth:`_ratio` of every project on ``c`` at once (the same float64 divisions)."""
        share, held = self.share[:, c], sim.held_project[:, c]
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(share > 1e-9, held / share, np.where(held != 0, np.inf, 0.0))

    def _read(self, sim, c: int) -> tuple[int, np.ndarray, list[float], list[bool], list[int],
                                          list[float], list[bool]]:
        """Every project's :meth:`_ratio` on ``c``, and whether it is below its share.

        (version, shares, the ratios and the below flags, the GPUs held and the shares of
        ``c`` they were read from, whether it is over its share, as lists), kept until the
        shares or ``c``'s running work change (:meth:`Replay.version`). When only the work
        changed, the ratios and flags
        of the projects whose GPUs held did not change are kept (a ratio and a flag are
        functions of the project's GPUs held and share alone: :meth:`_read_plain`'s
        float64 divisions and comparisons, done one at a time). The lists handed out are
        never changed afterwards.
        """
        version = sim.version(c)
        cached = self._read_of.get(c)
        if cached is not None and cached[0] == version and cached[1] is self.share:
            return cached
        if cached is None or cached[1] is not self.share:
            cached = self._read_of[c] = self._read_plain(sim, c)
            return cached
        held = sim.held_project[:, c].tolist()
        _, share_all, ratio, below, before, share, above = cached
        if held != before:
            changed = list(compress(range(len(held)), map(operator.ne, held, before)))
            ratio, below, above = ratio.copy(), below.copy(), above.copy()
            for p in changed:
                h, s = held[p], share[p]
                ratio[p] = h / s if s > 1e-9 else math.inf if h else 0.0
                below[p] = h < s - 1e-9
                above[p] = h > s + 1e-9
        cached = self._read_of[c] = (version, share_all, ratio, below, held, share, above)
        return cached

    def _read_plain(self, sim, c: int) -> tuple:
        """:meth:`_read` worked out afresh for every project (numpy, :meth:`_ratios`)."""
        held, share = sim.held_project[:, c], self.share[:, c]
        return (sim.version(c), self.share, self._ratios(sim, c).tolist(),
                (held < share - 1e-9).tolist(), held.tolist(), share.tolist(),
                (held > share + 1e-9).tolist())

    def _entitled_heads(self, sim, c: int) -> tuple[list[tuple], list[tuple[int, int]]]:
        """:meth:`AdmissionPolicy._entitled_heads` from the kept ratios (:meth:`_read`).

        Only allocated jobs of projects below their share are entitled, and a project's
        GPUs held drop during a pass only when its work is preempted: the projects below
        their share are heaped, the others with allocated work wait aside and join after
        a preemption (:meth:`_entitled_now`) once below their share, under the rank they
        had at the start. The same jobs start in the same order as in the plain pass (a
        property test replays both).

        Most passes preempt nothing, so those aside are not ranked here: ``later`` is
        every (project, first job) of the start, and :meth:`_entitled_now` picks and
        ranks the ones aside from the start's ratios and flags (kept in ``_pass_start``;
        :meth:`_read` never changes a list it handed out).
        """
        _, _, ratio, below, *_ = self._read(sim, c)
        allocated, key = sim.jobs.allocated, sim.key
        heads = sim.heads(c)
        self._pass_start = (ratio, below)
        # a project whose first job is unallocated is never entitled
        heap = [((ratio[p], *key[job]), p, job) for p, job in heads if below[p] and allocated[job]]
        return heap, heads

    def _entitled_now(self, sim, c: int, heap: list, later: list, popped: tuple) -> list:
        """:meth:`AdmissionPolicy._entitled_now` of the pass start's (project, first job) pairs.

        The entries aside are those of allocated first jobs of projects not below their
        share at the start, ranked by the start's ratios (:meth:`_entitled_heads`); the
        pairs still aside are returned.
        """
        ratio, below = self._pass_start
        allocated, key = sim.jobs.allocated, sim.key
        aside = [((ratio[p], *key[job]), p, job) for p, job in later
                 if allocated[job] and not below[p]]
        return [(p, job) for _, p, job in super()._entitled_now(sim, c, heap, aside, popped)]

    def _pass_victims(self, sim, c: int, p: int, job: int) -> list[tuple[int, str]]:
        """:meth:`victims` with members on ``c`` (:meth:`_victims_with_members`)."""
        return self._victims_with_members(sim, c, p, job)

    def rank(self, sim, c: int, p: int, job: int) -> tuple:
        """Furthest below its share first."""
        return (self._read(sim, c)[2][p], *sim.key[job])

    def entitled(self, sim, c: int, p: int, job: int) -> str | None:
        """Allocated work of a project below its share."""
        if not sim.jobs.allocated[job]:
            return None
        return "share" if sim.held_project[p, c] < self.share[p, c] - 1e-9 else None

    def victims(self, sim, c: int, p: int, job: int) -> list[tuple[int, str]]:
        """Unallocated work anywhere, then projects more over their share than p would be."""
        return self._unallocated_groups(sim) + self._over_groups(sim, c, p, job)

    def _unallocated_groups(self, sim) -> list[tuple[int, str]]:
        """Every project's unallocated group, in project order (one list, kept)."""
        if len(self._unallocated) != len(sim.projects):
            self._unallocated = [(q, JobClass.UNALLOCATED) for q in range(len(sim.projects))]
        return self._unallocated

    def _over_groups(self, sim, c: int, p: int, job: int) -> list[tuple[int, str]]:
        """The groups of the projects over their share (p aside) whose ratio beats p's.

        Highest ratio first (:meth:`_over`); what p's would be with ``job``.
        """
        after = self._ratio(sim, c, p, sim.held(job))
        groups = []
        for ratio, q in self._over(sim, c):
            if ratio <= after:
                break
            if q != p:
                groups += [(q, JobClass.FILL), (q, "share")]
        return groups

    def _victims_with_members(self, sim, c: int, p: int, job: int) -> list[tuple[int, str]]:
        """:meth:`victims` less the groups with no expired job (``preempt_for`` skips them).

        Kept until the shares or ``c``'s running work change: the unallocated groups with
        members, and the groups with members of the projects over their share one after
        another in :meth:`_over`'s order, with where each project's end; those whose ratio
        beats p's with ``job`` are a prefix (found by bisection). p's own groups are left
        out (they are never in the prefix: more GPUs never lower a ratio).
        """
        version = sim.version(c)
        cached = self._live_of.get(c)
        if cached is None or cached[0] != version or cached[1] is not self.share:
            live = sim.victim_groups(c)
            over = self._over(sim, c)
            groups = self._project_groups(sim)
            flat: list[tuple[int, str]] = []
            ends = [0]
            for _, q in over:
                flat += [g for g in groups[q] if g in live]
                ends.append(len(flat))
            cached = self._live_of[c] = (
                version, self.share,
                [g for g in self._unallocated_groups(sim) if g in live],
                [-ratio for ratio, _ in over], flat, ends)
        _, _, unallocated, minus, flat, ends = cached
        read = self._read(sim, c)
        h, s = read[4][p] + sim.held(job), read[5][p]  # :meth:`_ratio`, from the lists
        after = h / s if s > 1e-9 else math.inf if h else 0.0
        beats = flat[:ends[bisect.bisect_left(minus, -after)]]  # ratio > after
        if read[6][p]:  # p is over its share
            beats = [g for g in beats if g[0] != p]
        return unallocated + beats

    def _project_groups(self, sim) -> list[tuple[tuple[int, str], tuple[int, str]]]:
        """Per project, its groups :meth:`victims` names when it is over its share (kept)."""
        if len(self._groups) != len(sim.projects):
            self._groups = [((q, JobClass.FILL), (q, "share")) for q in range(len(sim.projects))]
        return self._groups

    def _over(self, sim, c: int) -> list[tuple[float, int]]:
        """(_ratio, q) of the projects over their share on ``c``, highest first, then by id.

        From :meth:`_read`'s ratios and over flags; kept until the shares or ``c``'s
        running work change (:meth:`Replay.version`).
        """
        version = sim.version(c)
        cached = self._over_of.get(c)
        if cached is not None and cached[0] == version and cached[1] is self.share:
            return cached[2]
        ratio, above = (read := self._read(sim, c))[2], read[6]
        over = [(-minus, q) for minus, q in
                sorted((-ratio[q], q) for q in compress(range(len(ratio)), above))]
        self._over_of[c] = (version, self.share, over)
        return over

    def fill_tag_of(self, sim, job: int) -> str:
        """Unallocated work apart from allocated work beyond the share."""
        return JobClass.FILL if sim.jobs.allocated[job] else JobClass.UNALLOCATED

    def fill_rank(self, sim, c: int, p: int, job: int) -> tuple:
        """Allocated before unallocated, furthest below share first."""
        key = sim.key[job]
        return (key[0], self._read(sim, c)[2][p], *key[1:])

    def _fill_entries(self, sim, c: int, heads: list[tuple[int, int]]) -> list[tuple]:
        """:meth:`AdmissionPolicy._fill_entries`, the ratios read once."""
        ratio, keys = self._read(sim, c)[2], sim.key
        return [(((key := keys[job])[0], ratio[p], *key[1:]), p, job) for p, job in heads]


# -- fairtree (Slurm) ----------------------------------------------------------------------


class FairTreePolicy(Policy):
    """``fairtree``: Fair Tree ranks, 7-day half-life decay, EASY backfill."""

    name = "fairtree"
    work_conserving = False

    def __init__(self, half_life_hours: float = HOURS_PER_WEEK, bf_max_job_test: int = 500):
        self.decay = 0.5 ** (1.0 / half_life_hours)
        self.bf_max_job_test = bf_max_job_test

    def prepare(self, sim) -> None:
        """Zero usage, ranks in org order."""
        self.usage = np.zeros(len(sim.projects))
        self.rate = np.array(sim.rate)
        self.rank_of = list(range(len(sim.projects)))
        #: per cluster, (each node's version read, its (limit end, GPUs freed) table)
        self._tables: dict[int, tuple[list[int], list]] = {}

    def refresh(self, sim, now: float) -> bool:
        """Decay the usage, add the last hour's (NGH), re-rank the tree."""
        hour = int(round(now))
        if hour >= 1:
            last = (sim.used[:, :, hour - 1] * self.rate[None, :]).sum(axis=1)
            self.usage = self.usage * self.decay + last
        self.rank_of = fair_tree_ranks(sim.tree, self.usage)
        return True

    def schedule(self, sim, c: int) -> None:
        """Strict priority order until the first job that does not fit; then backfill."""
        order = sorted(sim.waiting_projects(c), key=lambda p: self.rank_of[p])
        gpus = sim.jobs.gpus
        head = None
        for i, p in enumerate(order):
            while True:
                job = sim.head(c, p)
                if job is None:
                    break
                if not sim.fits(c, gpus[job]):
                    head = job
                    break
                sim.start(job, "run")
            if head is not None:
                order = order[i:]
                break
        sizes = sim.fitting_sizes(c)  # read again after each start
        if head is None or not sizes:
            return
        shadow, reserved = self._head_reservation(sim, c, head)
        tested = 0
        for p in order:
            while tested < self.bf_max_job_test:
                job = sim.head_in(c, p, sizes)
                if job is None:
                    break
                tested += 1
                if sim.now + sim.requested_hours(job) <= shadow + 1e-9:
                    sim.start(job, "backfill")
                    sizes = sim.fitting_sizes(c)
                    continue
                job = sim.head_fit(c, p, reserved)
                if job is None or sim.now + sim.requested_hours(job) <= shadow + 1e-9:
                    break
                sim.start(job, "backfill", reserved)
                sizes = sim.fitting_sizes(c)
            if not sizes:
                return

    def _head_reservation(self, sim, c: int, head: int) -> tuple[float, frozenset[int]]:
        """:meth:`_reservation` of the blocked head (running jobs' limits), from a table.

        Per node its free GPUs and its jobs' (:meth:`Replay.limit_end`, GPUs freed) in
        limit order, kept until the node's jobs change (:meth:`Replay.node_version`; a
        run's limit end is fixed). A job frees its GPUs at max(limit end, now): the limit
        order is the plain (expected end, job) order but for ties, which free at one time.
        """
        versions = sim.node_version(c)
        seen, table = self._tables.setdefault(c, ([-1] * sim.nodes[c], [None] * sim.nodes[c]))
        gpus, limit_end, gpn = sim.jobs.gpus, sim.limit_end, sim.gpn[c]

        def rows():
            for node, free, jobs in sim.nodes_on(c):
                if seen[node] != versions[node]:
                    seen[node] = versions[node]
                    table[node] = [(t, gpn if gpus[j] >= gpn else gpus[j])
                                   for t, j in sorted((limit_end(j), j) for j in jobs)]
                yield node, free, table[node]

        return reservation_from_ends(rows(), gpus[head], gpn, sim.now)

    @staticmethod
    def _reservation(sim, c: int, head: int, taken: frozenset[int] = frozenset(),
                     end=None) -> tuple[float, frozenset[int]]:
        """When and on which nodes the blocked head job will fit (running jobs' limits).

        Nodes in ``taken`` (another job's reservation) are left out; ``end(job)`` is when a
        running job frees its GPUs (default :meth:`Replay.expected_end`, its time limit).
        A node that already has room for the head (one it may not use now) frees now.
        """
        end = end or sim.expected_end
        g, gpn = sim.jobs.gpus[head], sim.gpn[c]
        frees: list[tuple[float, int]] = []
        for node, free, jobs in sim.nodes_on(c):
            if node in taken:
                continue
            if g >= gpn:
                frees.append((max((end(j) for j in jobs), default=sim.now), node))
                continue
            if free >= g:
                frees.append((sim.now, node))
                continue
            have = free
            for t, j in sorted((end(j), j) for j in jobs):
                have += gpn if sim.jobs.gpus[j] >= gpn else sim.jobs.gpus[j]
                if have >= g:
                    frees.append((t, node))
                    break
        return earliest_nodes(frees, g, gpn)


def reservation_from_ends(rows: Iterable[tuple[int, int, list[tuple[float, int]]]], g: int,
                          gpn: int, now: float, taken: frozenset[int] = frozenset()
                          ) -> tuple[float, frozenset[int]]:
    """When and on which nodes a job of ``g`` GPUs fits, from per-node tables.

    ``rows``: (node, free GPUs, [(time, GPUs it frees)] in time order) per node; a running
    job frees its GPUs at max(time, now). Nodes in ``taken`` are left out. A job of a whole
    node or more waits for the node's last job; a smaller one for enough GPUs on one node
    (:func:`earliest_nodes` picks the nodes).
    """
    frees: list[tuple[float, int]] = []
    for node, free, ends in rows:
        if node in taken:
            continue
        if g >= gpn:  # the last to end
            frees.append((max(ends[-1][0], now) if ends else now, node))
            continue
        if free >= g:
            frees.append((now, node))
            continue
        have = free
        for t, gives in ends:
            have += gives
            if have >= g:
                frees.append((max(t, now), node))
                break
    return earliest_nodes(frees, g, gpn)


def earliest_nodes(frees: list[tuple[float, int]], g: int, gpn: int
                   ) -> tuple[float, frozenset[int]]:
    """When a job of ``g`` GPUs could start, and on which nodes.

    ``frees``: each node's (time it frees room for the job, node). A job of a whole node or
    more needs ``ceil(g / gpn)`` nodes, a smaller one one node; ``inf`` and no nodes when too
    few nodes ever free room.
    """
    need = -(-g // gpn) if g >= gpn else 1
    if len(frees) < need:
        return math.inf, frozenset()
    first = sorted(frees)[:need]
    return first[-1][0], frozenset(n for _, n in first)


def fair_tree_ranks(tree, usage: np.ndarray, shares: np.ndarray | None = None) -> list[int]:
    """Fair Tree: rank of each project (0 = first) by depth-first level fairshare.

    Among siblings, level fairshare = (w_i / Σ w) / (U_i / Σ U), U the subtree's
    decayed usage (∞ when the siblings have used nothing, ties in org order); the
    siblings are visited in decreasing level fairshare, each subtree whole. ``shares``
    ((N,) by tree node) replaces the org weights as w (Slurm's integer fairshare).
    """
    weight = tree.weight if shares is None else shares
    node_usage = tree.subtree_sum(usage)
    ranks = [0] * len(tree.leaves)
    leaf_pos = {int(n): i for i, n in enumerate(tree.leaf_nodes)}
    counter = 0

    def visit(siblings: tuple[int, ...]) -> None:
        nonlocal counter
        weights = np.array([weight[s] for s in siblings], dtype=float)
        used = np.array([node_usage[s] for s in siblings])
        total_u = used.sum()
        share = weights / weights.sum()
        level = np.where(used > 0, share / np.where(used > 0, used / max(total_u, 1e-300), 1.0),
                         math.inf)
        for _, s in sorted((-level[i], i) for i in range(len(siblings))):
            node = siblings[s]
            kids = tree.children(node)
            if kids:
                visit(kids)
            else:
                ranks[leaf_pos[node]] = counter
                counter += 1

    visit(tree.top)
    return ranks


POLICIES = {
    "priority": PriorityPolicy,
    "fairtree": FairTreePolicy,
    "quota": QuotaPolicy,
    "lookback": LookbackPolicy,
}
