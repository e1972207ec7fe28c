"""A Slurm apply script (``sacctmgr`` / ``scontrol``) from a plan, idempotent by construction.

What it sets:

- **accounts**: the org tree, one account per node (parent = its org parent, ``root`` at
  the top), ``fairshare`` = the quarter budgets (NGH) of the projects under it, rounded,
  at least 1 (:func:`budget_shares`; Slurm shares are integers): Fair Tree balances
  siblings' usage in proportion to their budgets (measured better than org weights);
- **opportunistic work**: one shared QOS ``gp-opportunistic`` for GPU-hours beyond a budget
  (the plan's ``opportunistic`` grants: preemptible, reclaimed first), with no
  ``GrpTRESMins`` (bound by no budget), ``UsageFactor=1`` (its jobs add no usage to any
  budget QOS, whose usage is per QOS, but to the account's fair-share usage, so Fair Tree
  puts the projects furthest behind their budget share first in this tier; ``sacct``
  records each job with its QOS), ``Priority=0`` (below the budget QOS),
  ``PreemptMode=requeue`` (a preempted job goes back to the queue) and
  ``PreemptExemptTime`` = the plan contract's protection of such work, min(
  ``min_runtime_cap_hours``, ``fill_slice_hours``) (:func:`exempt_hours`: a job runs that
  long before a budget job may requeue it, and nothing else protects it, as Slurm knows no
  min runtime; Slurm 22.05 honours a QOS's exempt time for ``PreemptMode=REQUEUE``). Every
  project account may use it (``--qos=gp-opportunistic``);
- **overdrawn work** (the executor contract's rule 8, :class:`SlurmExport`'s
  ``overdrawn_qos``, on as shipped): a QOS ``gp-overdrawn`` below it, ``Priority=0``
  (``gp-opportunistic`` then has :data:`OPPORTUNISTIC_PRIORITY`, 11: its QOS term
  exceeds the whole fair-share term, so its jobs come before every gp-overdrawn one), no
  ``GrpTRESMins``, ``PreemptExemptTime=0``, named in the ``Preempt`` list of
  ``gp-opportunistic`` and of every budget QOS, and attached to every project account.
  ``planner tick`` moves the pending work of an overdrawn project
  (:meth:`SlurmExport.overdrawn_accounts`) beyond its budget there, but what keeps the
  project at its pace (:meth:`SlurmExport.overdrawn_paces`: while its running jobs run
  less than budget ÷ quarter hours NGH per hour) in ``gp-opportunistic``;
- **budgets**: a QOS ``gp-<account>`` per project, ``GrpTRESMins=gres/gpu=<minutes>``, the
  quarter's remaining budget (budget − used, NGH) in raw GPU-minutes at the GPU rates of
  the project's planned guaranteed work (exact for a project on one GPU type; rate 1 when
  nothing is planned), ``Flags=NoDecay`` (the GPU-minutes count undecayed), and the pace
  cap ``GrpTRES=gres/gpu=`` :func:`pace_gpus` (GPUs its jobs hold at once: the first
  period's ⌊g + o⌋ summed over clusters, plus reservations in force, at least one node's
  GPUs while the budget has minutes left; for a project not ahead of its budget pace with
  minutes left, :func:`widening`, at least the GPUs of the account's widest pending job,
  read from ``scontrol -o show job`` when the script runs: the ``wide_cap`` function,
  :data:`WIDE_CAP`, in every script, ``--previous`` or not), made the account's
  ``DefaultQOS`` so that it binds jobs that name
  no ``--qos``. When the limit changes its ``RawUsage`` is reset, because the limit already
  nets out the usage so far; re-applying the same limit keeps the usage accrued since.
  The cap changes at each replan without a reset.
  ``Priority=100`` and ``Preempt=gp-opportunistic``: guaranteed work takes GPUs back from
  opportunistic jobs first; and, for a project that is not ahead of its budget pace at the
  plan's ``as_of`` (the executor contract's rule 5, :func:`planner.contract.ahead_of_pace`:
  used > budget × the share of the quarter gone), the budget QOS of every project that is,
  in the same ``Preempt`` list (:func:`take_back`), so its jobs requeue theirs; every
  budget QOS has ``PreemptMode=requeue`` and ``PreemptExemptTime`` = the contract's
  protected runtime (``min_runtime_cap_hours``), so a job is taken back only once it has
  run that long. Slurm's ``preempt/qos`` follows the lists alone, and a replan rewrites
  them, so a project leaves the list when it falls back to its pace. Every budget QOS is
  added before any is set (a ``Preempt`` list may name a QOS added in the same run).
  Once a budget is spent, the project's jobs that name no QOS
  pend (``QOSGrpGRESMinutes``), and beyond the cap (``QOSGrpGRES``), while its
  ``--qos=gp-opportunistic`` jobs still run (the site's wrapper moves such pending jobs
  there: docs/explanation/slurm.md, "The wrapper rule");
- **reservations**: every planned reservation, ``ReservationName=gp-<request id>`` (the id
  where Slurm takes it verbatim, else its safe form; the ``gp-`` prefix keeps a site's own
  reservations out of reach: the script creates, updates and deletes only ``gp-`` names of
  the plans it is given), whole nodes (``NodeCnt`` in ``PartitionName=<cluster>``),
  ``Accounts=<project account>``, ``Flags=IGNORE_JOBS`` (created even while jobs still run
  on the nodes it will take).

**Data first.** :func:`slurm_state` turns the plan into a :class:`SlurmState` (accounts,
budget QOS, ``gp-opportunistic``, ``gp-overdrawn``, reservations), which
:func:`export_slurm` renders and :mod:`planner.simulate.slurm_replay` replays: the script
and the simulator read one record, made with the options of one :class:`SlurmExport`
(:data:`SHIPPED` for ``planner export``, ``planner cycle``, ``planner tick`` and the
replay).

**Every id is hostile.** Every value interpolated into the script goes through
:func:`shlex.quote` (names, descriptions, times, the guards' ``grep`` patterns), and the
header comment escapes control characters in the scenario name and input digest, so no id
can run a command or end the comment. Accounts and QOS are derived names (:func:`account`:
lower case, as sacctmgr stores them, with a digest where the id is not a DNS label; never
``root``), so any org id is carried; a cluster id is a partition name the site's slurm.conf
defines and cannot be renamed, so one Slurm cannot carry
(:func:`planner.inputs.targets.partition_problem`) is
refused before export. Descriptions keep printable ASCII only (:func:`description`).

**Dry run.** ``./slurm-apply.sh --dry-run`` (or ``DRY_RUN=1``) runs the read-only guards and
prints each mutating command they let through, quoted, instead of running it: what the
script would change. (On a Slurm that lacks an account or QOS, the guarded settings after
its ``add`` are listed too, as the add did not happen.)

What slurm.conf must say (a script of ``sacctmgr``/``scontrol`` commands cannot set it; the
script's header repeats it): ``GresTypes=gpu`` (GPUs as generic resources),
``AccountingStorageType=accounting_storage/slurmdbd`` with ``AccountingStorageTRES=gres/gpu``
(GPU-minutes are counted, so ``GrpTRESMins=gres/gpu=`` can bind),
``AccountingStorageEnforce=associations,limits,qos`` for the budgets to bind,
``PreemptType=preempt/qos`` and ``PreemptMode=REQUEUE`` for the preemption, and
``PriorityType=priority/multifactor`` with ``PriorityWeightQOS`` > 0 for the QOS priorities
to order pending jobs and a smaller ``PriorityWeightFairshare`` for Fair Tree to order jobs
within a QOS, and ``SchedulerParameters=bf_min_prio_reserve=`` the QOS weight, the lowest
priority of a budget job (added to a site's own ``SchedulerParameters`` list), so that the
main and backfill schedulers reserve nodes for waiting budget jobs only: a waiting
``gp-opportunistic`` job, wide or not, keeps no idle GPU from later work
(:data:`SLURM_CONF_LINES`); and a partition per cluster of the plan, named as the cluster
(the header lists them).

Every command is guarded so that re-running converges and never duplicates: an account or
QOS is added only when ``sacctmgr -n show`` finds none, then modified to the plan's values
only where ``sacctmgr show`` reads other values (``modify account ... set parent=`` that
changes nothing exits 1, "Nothing modified"; ``modify qos`` says "Modified qos" even then,
and its guard keeps a second run from writing anything); the QOS attach runs only where
the account's association lacks one of its QOS or the default; a reservation is updated
in place when ``scontrol show reservation`` finds it with another window, node count or
account, created when it finds none, deleted only if it exists. So a run on a Slurm that
holds the plan changes nothing. Slurm keeps a reservation's nodes when it moves one and
refuses the move when another reservation holds one of them in the new window (a replan
that shifts a cluster's reservations a day later meets this, as Slurm gives each the
lowest-numbered free nodes); the script's ``resv_update`` (:data:`RESV_UPDATE`) then names
nodes of the partition that no other reservation holds in the new window, the
reservation's own first, and stops with a message naming the reservation, the partition
and the window where there are too few. A reservation whose start has passed when the
script runs (``$now``, or the plan's ``as_of``) is running: only its end is updated (not
rerouted to other nodes: jobs may run on its own), or it is created from ``StartTime=now``
(Slurm refuses starts in the past and start changes of a begun reservation). Times are
UTC (``TZ=UTC`` for scontrol's parser).

With ``previous`` (the plan this one replans), only what changed is emitted: dropped
reservations (first: the nodes they free may be where the others move), created and
moved/resized ones, QOS whose limit, cap or ``Preempt`` list changed
(preceded by the guarded ``gp-opportunistic`` lines, as their ``Preempt`` names it), and
accounts whose
parent (the org: ``previous_org``) or share (the budgets) changed (accounts are never
deleted: they hold usage history).
"""

from __future__ import annotations

import hashlib
import math
import re
import shlex
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from planner.contract import (
    ahead_of_pace,
    fair_share_half_life,
    in_force,
    min_runtime_cap,
    overdrawn,
    pace_ngh,
    planned_guaranteed,
    preemptible_protection,
    reservations,
    widens,
)
from planner.exporters.common import by_depth, safe_name
from planner.inputs.org import OrgTree

FLAGS = "IGNORE_JOBS"
RESERVATION_PREFIX = "gp-"
_SLURM_SAFE = re.compile(r"[A-Za-z0-9_.-]+")
RUN = "run "  # the script's function that runs a mutating command, or prints it (dry run)
OPPORTUNISTIC_QOS = "gp-opportunistic"
OVERDRAWN_QOS = "gp-overdrawn"  # rule 8: the work of overdrawn projects, below everything
GUARANTEED_PRIORITY = 100  # a budget QOS's priority; gp-opportunistic has 0 (11 with rule 8)
PRIORITY_WEIGHT_QOS = 100000  # the QOS term decides before fair share ...
PRIORITY_WEIGHT_FAIRSHARE = 10000  # ... which orders jobs within a QOS (Fair Tree)
#: gp-opportunistic's priority beside gp-overdrawn (0): its QOS term, 100000 × 11 / 100 =
#: 11000, exceeds the whole fair-share term (10000), so every gp-opportunistic job comes
#: before every gp-overdrawn one, and stays far below a budget job's 100000
OPPORTUNISTIC_PRIORITY = GUARANTEED_PRIORITY * PRIORITY_WEIGHT_FAIRSHARE // PRIORITY_WEIGHT_QOS + 1
SLURM_CONF_LINES = (
    "GresTypes=gpu                # GPUs are generic resources (gres.conf lists them)",
    "AccountingStorageType=accounting_storage/slurmdbd   # accounts and QOS live in slurmdbd",
    "AccountingStorageTRES=gres/gpu   # GPU-minutes are counted: GrpTRESMins=gres/gpu binds",
    "PreemptType=preempt/qos      # a budget QOS preempts gp-opportunistic jobs",
    "PreemptMode=REQUEUE          # preempted jobs go back to the queue",
    "AccountingStorageEnforce=associations,limits,qos   # the budgets bind",
    "PriorityType=priority/multifactor",
    f"PriorityWeightQOS={PRIORITY_WEIGHT_QOS}     # any weight > 0: QOS priority orders "
    "pending jobs",
    f"PriorityWeightFairshare={PRIORITY_WEIGHT_FAIRSHARE}   # below the QOS weight: Fair Tree "
    "orders jobs within a QOS",
    f"SchedulerParameters=bf_min_prio_reserve={PRIORITY_WEIGHT_QOS}   # reservations for "
    "budget jobs only: a waiting gp-opportunistic job delays no other",
)


def decay_line(half_life_hours: float) -> str:
    """slurm.conf's ``PriorityDecayHalfLife`` for a half-life in hours (whole minutes)."""
    minutes = max(1, round(half_life_hours * 60))
    return (f"PriorityDecayHalfLife={_clock(minutes * 60)}   # fair share forgets usage as "
            "the plan's lookback does")


def slurm_conf_lines(plan: dict[str, Any]) -> tuple[str, ...]:
    """What slurm.conf must hold for ``plan``: :data:`SLURM_CONF_LINES`, and the decay.

    ``PriorityDecayHalfLife`` is the plan's ``contract.fair_share_half_life_hours``
    (:func:`planner.contract.fair_share_half_life`: a 7-day lookback window decays with a
    58.2 h half-life, ``2-10:13:00``), so Fair Tree forgets usage about as the plan's fair
    share does; a plan without it leaves Slurm's own (7 days).
    """
    half = fair_share_half_life(plan)
    return SLURM_CONF_LINES if half is None else (*SLURM_CONF_LINES, decay_line(half))


def fairshare(weight: float) -> int:
    """Slurm's integer share for an org weight."""
    return max(1, round(100 * float(weight)))


def account(node: str) -> str:
    """The Slurm account of an org node (lower case, as sacctmgr stores it).

    Never ``root``, Slurm's own top account: an org node called so gets a digest too.
    """
    name = safe_name(node)
    if name == "root":
        name = f"root-{hashlib.sha256(node.encode()).hexdigest()[:8]}"
    return name


def qos_name(project: str) -> str:
    """The QOS holding a project's budget: ``gp-<account>``, never a shared one's name."""
    name = f"gp-{account(project)}"
    if name in (OPPORTUNISTIC_QOS, OVERDRAWN_QOS):  # a project "opportunistic", "overdrawn"
        digest = hashlib.sha256(project.encode()).hexdigest()[:8]
        name = f"{name}-{digest}"
    return name


def reservation_name(request_id: str) -> str:
    """``ReservationName``: ``gp-`` and the request id where Slurm takes it verbatim."""
    safe = request_id if _SLURM_SAFE.fullmatch(request_id) else safe_name(request_id)
    return f"{RESERVATION_PREFIX}{safe}"


def description(node: str) -> str:
    r"""An account's ``Description``: ``org:<id>`` in printable ASCII, ``?`` for the rest.

    What Slurm 22.05's sacctmgr does with a description: it lower-cases it, turns quotes into
    backticks, and stores a newline or ``|`` as it is, which then splits or shifts the
    ``sacctmgr -P`` lines readers parse. So quotes, ``\``, ``|`` and anything outside printable
    ASCII become ``?`` (the account name, with its digest, identifies the node).
    """
    return "".join(ch if " " <= ch <= "~" and ch not in "'\"\\|" else "?"
                   for ch in f"org:{node}")


def comment(text: str) -> str:
    """``text`` safe inside a ``#`` comment line.

    Control and other unprintable characters (newlines, carriage returns, U+2028, ...) are
    written as escapes, so nothing ends the comment.
    """
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
                   for ch in text)


@dataclass(frozen=True)
class SlurmAccount:
    """One account of the org tree: ``sacctmgr add account NAME parent= fairshare=``."""

    node: str  # the org id
    name: str  # account(node)
    parent: str  # the parent's account, ``root`` at the top
    fairshare: int  # fairshare(weight)
    description: str  # description(node)


@dataclass(frozen=True)
class OpportunisticQos:
    """A shared QOS charged to no budget: work beyond a budget (and work with none).

    ``gp-opportunistic``, and with rule 8 ``gp-overdrawn`` (the same kind of record: no
    ``GrpTRESMins``, its own priority, exempt time and ``Preempt`` list).
    """

    name: str = OPPORTUNISTIC_QOS
    priority: int = 0
    preempt_mode: str = "requeue"
    usage_factor: float = 1.0  # its jobs' usage counts in fair share (no budget: no limit)
    #: PreemptExemptTime: the contract's protected minimum runtime (min_runtime_cap_hours)
    preempt_exempt_hours: float = 0.0
    #: Preempt=: the QOS whose jobs it may requeue (gp-overdrawn, with rule 8; else none)
    preempt: str = ""


@dataclass(frozen=True)
class BudgetQos:
    """A project's budget QOS, its account's ``DefaultQOS``."""

    project: str  # the org id
    name: str  # qos_name(project)
    account: str  # account(project)
    minutes: int  # GrpTRESMins=gres/gpu=<minutes>: remaining budget, raw GPU-minutes
    #: GrpTRES=gres/gpu=<gpus>: the pace cap, GPUs its jobs may hold at once (None: no cap)
    gpus: int | None = None
    #: the cap is at least the GPUs of the account's widest pending job, read from the queue
    #: when the script runs (:func:`widening`: a project with budget left, not ahead of pace)
    widens: bool = False
    no_decay: bool = True  # Flags=NoDecay: GrpTRESMins counts undecayed GPU-minutes
    priority: int = GUARANTEED_PRIORITY
    preempt: str = OPPORTUNISTIC_QOS  # the QOS whose jobs it may requeue (first) ...
    #: ... and the budget QOS of the projects ahead of their pace, for a project that is not
    #: (the executor contract's rule 5, :func:`planner.contract.ahead_of_pace`), sorted
    takes_back: tuple[str, ...] = ()
    #: PreemptExemptTime: how long its jobs run before a QOS that takes back may requeue
    #: them (the contract's protected runtime, ``min_runtime_cap_hours``)
    preempt_exempt_hours: float = 0.0
    preempt_mode: str = "requeue"  # PreemptMode: a preempted job goes back to the queue
    #: rule 8: ``gp-overdrawn``, which it preempts and its account may use ("": no rule 8)
    overdrawn: str = ""

    @property
    def preempt_list(self) -> str:
        """``Preempt=`` as set and as ``sacctmgr show qos`` prints it (names sorted)."""
        return ",".join(sorted((self.preempt, *self.takes_back,
                                *((self.overdrawn,) if self.overdrawn else ()))))

    @property
    def allowed(self) -> tuple[str, ...]:
        """The QOS its account may use: its own, ``gp-opportunistic`` (and ``gp-overdrawn``)."""
        return (self.name, self.preempt, *((self.overdrawn,) if self.overdrawn else ()))

    @property
    def exempt(self) -> str:
        """``PreemptExemptTime=`` as set and as ``sacctmgr show qos`` prints it."""
        return exempt_clock(self.preempt_exempt_hours)

    @property
    def flags(self) -> str:
        """``Flags=``: ``NoDecay`` or nothing."""
        return "NoDecay" if self.no_decay else ""

    @property
    def grptres(self) -> str:
        """``GrpTRES=`` as set and as ``sacctmgr show qos format=grptres`` prints it."""
        return "" if self.gpus is None else f"gres/gpu={self.gpus}"


@dataclass(frozen=True)
class SlurmReservation:
    """A plan reservation as ``scontrol create reservation`` holds it."""

    request_id: str
    name: str  # reservation_name(request_id)
    project: str
    account: str  # Accounts=
    partition: str  # PartitionName= (the cluster id)
    nodes: int  # NodeCnt=
    start: str  # ISO, UTC, with ``Z`` (the plan's)
    end: str
    flags: str = FLAGS

    def key(self) -> tuple:
        """What makes a replan touch it: project, cluster, node count, window."""
        return (self.project, self.partition, self.nodes, self.start, self.end)


@dataclass(frozen=True)
class SlurmState:
    """What a plan makes Slurm hold: the data :func:`export_slurm` renders into its script.

    The replay of what ships (:mod:`planner.simulate.slurm_replay`) reads the same
    record, so the script and the simulator cannot disagree on a value.
    """

    as_of: str
    accounts: tuple[SlurmAccount, ...]  # parents before children
    opportunistic: OpportunisticQos
    budgets: tuple[BudgetQos, ...]  # by project id
    reservations: tuple[SlurmReservation, ...]  # by request id
    #: slurm.conf's PriorityDecayHalfLife the plan asks for (hours; None: Slurm's own)
    decay_half_life_hours: float | None = None
    #: rule 8: ``gp-overdrawn`` (None: the export before the rule) ...
    overdrawn: OpportunisticQos | None = None
    #: ... and the projects overdrawn at the plan's ``as_of`` (:func:`planner.contract.overdrawn`
    #: with the unbudgeted usage given), whose pending jobs ``planner tick`` moves there
    overdrawn_projects: frozenset[str] = frozenset()
    #: ... each with the NGH per hour its running jobs may run before its work beyond its
    #: budget goes there rather than to ``gp-opportunistic`` (its pace; 0: none kept)
    overdrawn_pace: tuple[tuple[str, float], ...] = ()

    def minutes(self) -> dict[str, int]:
        """Project -> its budget QOS's ``GrpTRESMins`` GPU-minutes."""
        return {b.project: b.minutes for b in self.budgets}

    def limits(self) -> dict[str, tuple[int, int | None, bool]]:
        """Project -> its budget QOS's (GPU-minutes, GPU cap, NoDecay): what a replan sets."""
        return {b.project: (b.minutes, b.gpus, b.no_decay) for b in self.budgets}

    def settings(self) -> dict[str, tuple]:
        """Project -> every setting of its budget QOS a replan may change.

        :meth:`limits` and the preemption: the QOS it takes back from and its exempt time.
        """
        limits = self.limits()
        return {b.project: (*limits[b.project], b.widens, b.preempt_list, b.exempt)
                for b in self.budgets}


def slurm_accounts(tree: OrgTree, nodes: list[str],
                   shares: dict[str, int] | None = None) -> tuple[SlurmAccount, ...]:
    """The accounts of ``nodes`` (in that order).

    ``fairshare`` from the org weights (:func:`fairshare`), or from ``shares`` (node ->
    integer share) where given (:func:`budget_shares`).
    """
    out = []
    for node in nodes:
        up = tree.parent_of(node)
        share = fairshare(tree.weight_of(node)) if shares is None else shares[node]
        out.append(SlurmAccount(node=node, name=account(node),
                                parent=account(up) if up else "root",
                                fairshare=share, description=description(node)))
    return tuple(out)


#: Where the accounts' ``fairshare`` comes from: the budgets (shipped) or the org weights
SHARES = ("budget", "org")


def budget_shares(plan: dict[str, Any], tree: OrgTree) -> dict[str, int]:
    """Node -> its quarter budget (NGH) summed over the projects below it, at least 1.

    As Fair Tree shares, siblings balance their usage in proportion to their budgets.
    """
    by_leaf = np.zeros(len(tree.leaves))
    index = tree.leaf_index
    for b in plan["budgets"]:
        if b["project"] in index:
            by_leaf[index[b["project"]]] += float(b["budget"])
    sums = tree.subtree_sum(by_leaf)
    return {node: max(1, round(float(sums[tree.index[node]]))) for node in tree.ids}


def exempt_hours(plan: dict[str, Any]) -> float:
    """``PreemptExemptTime`` of gp-opportunistic: the contract's protection of such work.

    :func:`planner.contract.preemptible_protection` (0 for a plan without a contract).
    """
    return preemptible_protection(plan) if "contract" in plan else 0.0


def budget_exempt_hours(plan: dict[str, Any]) -> float:
    """``PreemptExemptTime`` of every budget QOS: the contract's protected runtime (rule 5).

    :func:`planner.contract.min_runtime_cap` (0 for a plan without a contract).
    """
    return min_runtime_cap(plan) if "contract" in plan else 0.0


#: What the budget QOS's ``GrpTRES`` pace cap counts (:func:`pace_gpus`): the guaranteed
#: GPUs, guaranteed and opportunistic headroom together (shipped: measured best), or no cap
PACES = ("guaranteed", "total", "none")


#: The floor of the pace cap (:func:`pace_gpus`): one node's GPUs for a project with
#: budget left (shipped), or none (the cap is the plan's grant alone, 0 where it grants none)
FLOORS = ("node", "none")


def node_gpus(plan: dict[str, Any]) -> int:
    """The GPUs of the plan's widest node (0 for a plan without clusters)."""
    return max((int(c["gpus_per_node"]) for c in plan.get("clusters", [])), default=0)


def pace_gpus(plan: dict[str, Any], pace: str = "total", floor: str = "node"
              ) -> dict[str, int]:
    """Project -> GPUs its budget QOS may hold at once (``GrpTRES=gres/gpu=``).

    Read through the executor contract (:func:`planner.contract.in_force`) over the
    plan's first period: the sum over the project's clusters of ⌊g + o⌋ (guaranteed GPUs
    and opportunistic headroom; ``pace="guaranteed"``: ⌊g⌋) plus the GPUs of its
    reservations in force at some time in that period (their jobs run under the budget
    QOS too). Slurm's clusters of the plan are partitions
    of one Slurm cluster and a QOS limit counts every partition, so the cap is the
    project's total: Slurm cannot cap a (project, partition) pair without a QOS per pair.

    ``floor="node"`` (shipped): a project with budget left (``GrpTRESMins`` > 0) may hold
    at least one node's GPUs (:func:`node_gpus`) whatever the period grants, so work it
    submits after the replan runs on its budget (QOS priority, preempting opportunistic
    work) up to a node at once instead of waiting a whole period under
    ``gp-opportunistic``: the ``planner`` executor's "a project running nothing may start
    one job of up to a node", in the one form a static QOS limit can hold; its
    ``GrpTRESMins`` still bounds what it spends. ``floor="none"``: 0 where the period grants
    nothing (the cap measured before: a project whose work all arrived after a replan
    waited up to a day).
    """
    if pace not in PACES:
        raise ValueError(f"pace must be one of {PACES}, not {pace!r}")
    if floor not in FLOORS:
        raise ValueError(f"floor must be one of {FLOORS}, not {floor!r}")
    first = plan["periods"][0]
    terms = in_force(plan, first["start"], first["end"])
    out = {b["project"]: 0 for b in plan["budgets"]}
    for q in terms.quotas:
        if q.project in out:
            out[q.project] += q.total if pace == "total" else q.guaranteed
    for r in terms.reservations:
        if r.project in out:
            out[r.project] += r.gpus
    if floor == "node":
        least, left = node_gpus(plan), budget_minutes(plan)
        out = {p: max(gpus, least) if left[p] > 0 else gpus for p, gpus in out.items()}
    return out


def take_back(plan: dict[str, Any], projects: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Project -> the budget QOS its budget QOS may requeue jobs of (the contract's rule 5).

    A project ahead of its budget pace (:func:`planner.contract.ahead_of_pace`) takes back
    from no one; every other takes back from the budget QOS of every project ahead.
    """
    chosen = sorted(projects)
    ahead = ahead_of_pace(plan)
    names = tuple(sorted(qos_name(p) for p in chosen if p in ahead))
    return {p: () if p in ahead else names for p in chosen}


def widening(plan: dict[str, Any], minutes: dict[str, int], caps: dict[str, int]
              ) -> frozenset[str]:
    """The projects whose pace cap widens to their widest pending job when the script runs.

    Those with a cap, budget minutes left and not ahead of their budget pace (the executor
    contract's rule 5, :func:`planner.contract.ahead_of_pace`). A job wider than its
    project's cap could never start under the budget QOS: it would run only under
    ``gp-opportunistic``, where it rarely finds its whole nodes free and is requeued
    after an hour, so a project the plan paces at a node's GPUs never ran its 32-GPU
    jobs. With the cap at least that job's GPUs it waits under its budget, with the budget
    QOS's priority, and Slurm reserves nodes for it; ``GrpTRESMins`` still bounds what the
    project spends, and a project ahead of its pace gets no such widening (the executor
    contract's rule 6, :func:`planner.contract.widens`).
    """
    may = widens(plan)
    return frozenset(p for p in caps if minutes.get(p, 0) > 0 and p in may)


#: how far past rule 8's line (a share of its budget) an overdrawn project keeps its pace
PACE_MARGIN = 0.2


def slurm_state(plan: dict[str, Any], org: pd.DataFrame | OrgTree,
                pace: str = "total", no_decay: bool = True,
                shares: str = "budget", opportunistic_usage: float = 1.0,
                floor: str = "node", takes_back: bool = True,
                widens: bool = True, overdrawn_qos: bool = True,
                unbudgeted: Mapping[str, float] | None = None,
                overdrawn_keeps_pace: bool = True,
                pace_margin: float = PACE_MARGIN) -> SlurmState:
    """The Slurm state a plan asks for (see the module docstring).

    ``pace`` chooses the budget QOS's ``GrpTRES`` cap (:data:`PACES`, :func:`pace_gpus`;
    ``"none"``: no cap) and ``floor`` its floor, ``no_decay`` its ``Flags=NoDecay``,
    ``takes_back`` whether budget QOS take back from the projects ahead of their pace
    (:func:`take_back`; False: each preempts ``gp-opportunistic`` only, the export measured
    before), ``widens`` whether the caps of :func:`widening` projects widen to their
    widest pending job (False: the caps as the plan computes them, the export before),
    ``overdrawn_qos`` the executor contract's rule 8 (``gp-overdrawn``, below
    ``gp-opportunistic``, named in every other ``Preempt`` list; the projects overdrawn by
    :func:`planner.contract.overdrawn` with ``unbudgeted``, project -> NGH run charged to
    no budget: False, the export before the rule), ``overdrawn_keeps_pace`` whether an
    overdrawn project keeps its pace in ``gp-opportunistic`` (:func:`overdrawn_pace`;
    False: rule 8 as first shipped, every job beyond its budget to ``gp-overdrawn``) and
    ``pace_margin`` how far past rule 8's line it keeps it (:func:`overdrawn_pace`); the
    defaults are what ``planner export --to slurm`` ships (the other values are for
    measuring them).
    """
    tree = org if isinstance(org, OrgTree) else OrgTree.from_frame(org)
    minutes = budget_minutes(plan)
    caps = pace_gpus(plan, pace, floor) if pace != "none" else {}
    back = take_back(plan, minutes) if takes_back else {}
    wide = widening(plan, minutes, caps) if widens else frozenset()
    exempt = budget_exempt_hours(plan)
    over = OVERDRAWN_QOS if overdrawn_qos else ""
    gone = overdrawn(plan, unbudgeted) if over else frozenset()  # rule 8's projects
    budgets = tuple(BudgetQos(project=p, name=qos_name(p), account=account(p),
                              minutes=minutes[p], gpus=caps.get(p), widens=p in wide,
                              no_decay=no_decay, takes_back=back.get(p, ()),
                              preempt_exempt_hours=exempt, overdrawn=over)
                    for p in sorted(minutes))
    held = tuple(
        SlurmReservation(request_id=r.request_id, name=reservation_name(r.request_id),
                         project=r.project, account=account(r.project),
                         partition=r.cluster, nodes=r.nodes, start=r.start, end=r.end)
        for r in sorted(reservations(plan), key=lambda r: r.request_id))
    if shares not in SHARES:
        raise ValueError(f"shares must be one of {SHARES}, not {shares!r}")
    chosen = budget_shares(plan, tree) if shares == "budget" else None
    return SlurmState(as_of=plan["as_of"],
                      accounts=slurm_accounts(tree, by_depth(tree, tree.ids), chosen),
                      opportunistic=OpportunisticQos(
                          preempt_exempt_hours=exempt_hours(plan), usage_factor=opportunistic_usage,
                          priority=OPPORTUNISTIC_PRIORITY if over else 0, preempt=over),
                      budgets=budgets, reservations=held,
                      decay_half_life_hours=fair_share_half_life(plan),
                      overdrawn=OpportunisticQos(name=OVERDRAWN_QOS,
                                                 usage_factor=opportunistic_usage)
                      if over else None,
                      overdrawn_projects=gone,
                      overdrawn_pace=tuple(overdrawn_pace(
                          plan, gone, overdrawn_keeps_pace, unbudgeted, pace_margin).items()))


def overdrawn_pace(plan: dict[str, Any], projects: AbstractSet[str],
                   keeps_pace: bool = True, unbudgeted: Mapping[str, float] | None = None,
                   margin: float = PACE_MARGIN) -> dict[str, float]:
    """Overdrawn project -> NGH per hour it keeps in ``gp-opportunistic`` (rule 8).

    ``projects``: the plan's overdrawn projects (:func:`planner.contract.overdrawn`), in
    name order here. Its budget pace (:func:`planner.contract.pace_ngh`) with
    ``keeps_pace``, else 0: while
    the project's running jobs run less than this, ``planner tick`` leaves its work beyond
    its budget in ``gp-opportunistic`` (queue order, each job counted as it is kept;
    :func:`planner.tick.slurm_moves`); the rest goes to ``gp-overdrawn``. Also 0 for a
    project that has run ``margin`` × its budget past rule 8's line (what it ran, with
    ``unbudgeted``, ≥ budget × (1 + ``margin`` + the share of the quarter gone)): its
    kept runs, preempted ones included, have overrun the pace, and it keeps nothing until
    the line, rising at its pace, catches up (``math.inf``: no such stop, the pace
    measured before).
    """
    pace = pace_ngh(plan) if keeps_pace else {}
    past = overdrawn(plan, unbudgeted, margin) if math.isfinite(margin) else frozenset()
    return {p: 0.0 if p in past else pace.get(p, 0.0) for p in sorted(projects)}


def opportunistic_settings(qos: OpportunisticQos) -> tuple[str, str]:
    """``sacctmgr modify qos`` settings, and how ``sacctmgr -n -P show qos`` prints them.

    The show reads ``format=priority,preemptmode,usagefactor,preemptexempttime,preempt``
    (the exempt time as ``[D-]HH:MM:SS``); ``Preempt=`` is set only where the QOS
    preempts one (``gp-opportunistic`` preempts ``gp-overdrawn``, rule 8).
    """
    factor = f"{qos.usage_factor:g}"
    exempt = exempt_clock(qos.preempt_exempt_hours)
    preempt = f"Preempt={qos.preempt} " if qos.preempt else ""
    return (f"{preempt}Priority={qos.priority} PreemptMode={qos.preempt_mode} "
            f"UsageFactor={factor} PreemptExemptTime={exempt}",
            f"{qos.priority}|{qos.preempt_mode}|{qos.usage_factor:.6f}|{exempt}|{qos.preempt}")


def exempt_clock(hours: float) -> str:
    """A QOS's ``PreemptExemptTime`` for ``hours``, whole seconds, as set and as shown."""
    return _clock(round(hours * 3600))


def _clock(seconds: int) -> str:
    """Slurm's time string: ``HH:MM:SS``, with ``D-`` from a day on."""
    days, rest = divmod(seconds, 86400)
    clock = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{clock}" if days else clock


def _slurm_time(stamp: str) -> str:
    return stamp.rstrip("Z")


def _duration(start: str, end: str) -> str:
    seconds = int((pd.Timestamp(end) - pd.Timestamp(start)).total_seconds())
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    return f"{days}-{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"


def budget_minutes(plan: dict[str, Any]) -> dict[str, int]:
    """Project -> GrpTRESMins gres/gpu: remaining budget in raw GPU-minutes.

    The guaranteed work the plan charges (:func:`planner.contract.planned_guaranteed`) sets
    the GPU-hours per NGH of each project's minutes.
    """
    planned = planned_guaranteed(plan)
    out = {}
    for b in plan["budgets"]:
        p = b["project"]
        raw, ngh = planned.get(p, (0.0, 0.0))
        per_ngh = raw / ngh if ngh > 0 else 1.0
        out[p] = max(0, math.floor(60 * max(0.0, b["budget"] - b["used"]) * per_ngh + 1e-6))
    return out


def _q(*words: str) -> str:
    """Words quoted for the shell and joined (every interpolated value goes through here)."""
    return " ".join(shlex.quote(w) for w in words)


def _account_lines(accounts: Iterable[SlurmAccount]) -> list[str]:
    # `sacctmgr modify` that changes nothing exits 1 ("Nothing modified"), which would stop
    # the script under `set -e`: modify only when the account's association differs
    lines = []
    for a in accounts:
        name, parent, share = a.name, a.parent, a.fairshare
        lines.append(f"sacctmgr -n show account {_q(name)} | grep -q . || "
                     f"{RUN}sacctmgr -i add account "
                     + _q(name, f"parent={parent}", f"fairshare={share}",
                          f"Description={a.description}"))
        # parent and share apart: a modify whose parent= changes nothing exits 1 ("Nothing
        # modified", the real 22.05) even when its fairshare= would change the share
        lines.append(f"sacctmgr -n -P show assoc {_q(f'account={name}')} "
                     f"format=user,parentname | grep -qx {_q(f'|{parent}')} || "
                     f"{RUN}sacctmgr -i modify account " + _q(name, "set", f"parent={parent}"))
        lines.append(f"sacctmgr -n -P show assoc {_q(f'account={name}')} "
                     f"format=user,share | grep -qx {_q(f'|{share}')} || "
                     f"{RUN}sacctmgr -i modify account " + _q(name, "set", f"fairshare={share}"))
    return lines


def _opportunistic_lines(qos: OpportunisticQos) -> list[str]:
    # no GrpTRESMins: beyond-budget work is bound by no budget; UsageFactor=0: its jobs add
    # no usage anywhere (QOS or fair share); requeued when a budget QOS needs the GPUs
    q, (settings, shown) = qos.name, opportunistic_settings(qos)
    return [f"sacctmgr -n show qos {_q(q)} | grep -q . || {RUN}sacctmgr -i add qos {_q(q)}",
            f"sacctmgr -n -P show qos {_q(q)} "
            "format=priority,preemptmode,usagefactor,preemptexempttime,preempt | "
            f"grep -qx {_q(shown)} || {RUN}sacctmgr -i modify qos {_q(q)} set "
            + _q(*settings.split())]


def _qos_add(budget: BudgetQos) -> str:
    q = budget.name
    return f"sacctmgr -n show qos {_q(q)} | grep -q . || {RUN}sacctmgr -i add qos {_q(q)}"


def _qos_lines(budget: BudgetQos) -> list[str]:
    # a new limit starts from zero usage (the limit nets out the usage so far); re-applying the
    # same limit keeps the usage accrued since. RawUsage=0 gets a command of its own: given
    # together with GrpTRESMins, sacctmgr 22.05 resets the usage and drops the limit.
    # Preempt: guaranteed work reclaims GPUs from opportunistic jobs first, and a project not
    # ahead of its pace from the budget QOS of those ahead (every QOS it names must exist:
    # sacctmgr refuses a Preempt naming an unknown QOS, so every budget QOS is added before
    # any is set, :func:`_qos_add`); sacctmgr prints the list sorted. PreemptExemptTime: a
    # job of this QOS runs that long before a QOS that takes back may requeue it
    # (PreemptMode=requeue). Flags=NoDecay: the GPU-minutes count undecayed. GrpTRES: the
    # pace cap, GPUs the QOS's jobs hold at once (changed without a usage reset).
    # DefaultQOS makes the budget bind the account's jobs that name no --qos; the account
    # may also use gp-opportunistic for work beyond its budget or its pace.
    q, acct, tres = budget.name, budget.account, f"gres/gpu={budget.minutes}"
    priority, preempt = budget.priority, budget.preempt_list
    flags = budget.flags or "-1"  # -1: no flags
    cap = budget.grptres or "gres/gpu=-1"  # -1: no cap
    shown = f"{priority}|{preempt}|{budget.flags}|{budget.preempt_mode}|{budget.exempt}"
    return [f"sacctmgr -n -P show qos {_q(q)} "
            "format=priority,preempt,flags,preemptmode,preemptexempttime | grep -qx "
            f"{_q(shown)} || {RUN}sacctmgr -i modify qos "
            + _q(q, "set", f"Priority={priority}", f"Preempt={preempt}", f"Flags={flags}",
                 f"PreemptMode={budget.preempt_mode}", f"PreemptExemptTime={budget.exempt}"),
            f"sacctmgr -n -P show qos {_q(q)} format=grptresmins | grep -qx {_q(tres)} || "
            f"{{ {RUN}sacctmgr -i modify qos {_q(q, 'set', f'GrpTRESMins={tres}')} && "
            f"{RUN}sacctmgr -i modify qos {_q(q, 'set', 'RawUsage=0')}; }}",
            # a widening cap is set by _wide_cap_line instead, on every run
            *([] if budget.widens else [_cap_guard(q, _q(budget.grptres), _q(f"GrpTRES={cap}"))]),
            f"{_holds_qos(acct, q, budget.allowed)} || {RUN}sacctmgr -i modify account "
            + _q(acct, "set", f"qos+={','.join(budget.allowed)}", f"DefaultQOS={q}")]


def _cap_guard(q: str, shown: str, setting: str) -> str:
    """QOS ``q``'s ``GrpTRES`` set to ``setting`` unless it shows ``shown`` (shell words)."""
    return (f"sacctmgr -n -P show qos {_q(q)} format=grptres | grep -qx {shown} || "
            f"{RUN}sacctmgr -i modify qos {_q(q, 'set')} {setting}")


def _wide_cap_line(budget: BudgetQos) -> str:
    """A widening budget's ``GrpTRES``: its cap or its account's widest pending job."""
    guard = _cap_guard(budget.name, '"gres/gpu=$cap"', '"GrpTRES=gres/gpu=$cap"')
    return f"cap=$(wide_cap {_q(budget.account, str(budget.gpus))}) && {{ {guard}; }}"


def _holds_qos(acct: str, default: str, allowed: tuple[str, ...]) -> str:
    """A guard: the account's own association has ``default`` and lists every ``allowed``.

    ``sacctmgr -P`` prints the QOS list comma-separated (the site's own QOS, ``normal``, may
    be in it too), so each name is looked for as a whole list item, in any order.
    """
    for name in (acct, default, *allowed):  # derived names: nothing a regex would read
        assert re.fullmatch(r"[a-z0-9-]+", name), name
    show = (f"sacctmgr -n -P show assoc {_q(f'account={acct}')} format=user,defaultqos,qos")
    return " && ".join(f"{show} | grep -Eqx {_q(f'[|]{default}[|](.*,)?{name}(,.*)?')}"
                       for name in allowed)


def _has(name: str, *fields: str) -> str:
    """A guard: reservation ``name`` exists and ``scontrol -o show`` lists every field."""
    return f"resv_has {_q(name, f'ReservationName={name}', *fields)}"


def _reservation_line(r: SlurmReservation, as_of: str) -> str:
    name = r.name
    acct, nodes = f"Accounts={r.account}", f"NodeCnt={r.nodes}"
    common = _q(acct, nodes)
    start, end = _slurm_time(r.start), _slurm_time(r.end)
    create = f"{RUN}scontrol create reservation {_q(f'ReservationName={name}')}"
    update = f"{RUN}scontrol update {_q(f'ReservationName={name}')}"
    partition = f"PartitionName={r.partition}"
    tail = f"{common} {_q(partition, f'Flags={r.flags}')}"
    # an existing reservation is updated only where it differs, so that a converged Slurm
    # sees no change (and a dry run prints none).
    # running: its start cannot move any more (Slurm: "Reservation already started"), only
    # its end; created now, as Slurm refuses a start more than a few minutes in the past
    running = (f"if {_has(name)}; then {_has(name, f'EndTime={end}', nodes, acct)} || "
               f"{update} {_q(f'EndTime={end}')} {common}; "
               f"else {create} StartTime=now {_q(f'EndTime={end}')} {tail}; fi")
    if r.start < as_of:
        return running
    window = _q(f"StartTime={start}", f"Duration={_duration(r.start, r.end)}")
    same = _has(name, f"StartTime={start}", f"EndTime={end}", nodes, acct)
    # a move goes through resv_update: where the reservation's own nodes are taken in the
    # new window, it names nodes that are free then (the header's comment says how)
    move = f"resv_update {_q(name, r.partition, str(r.nodes), start, end)} {window} {common}"
    ahead = (f"if {_has(name)}; then {same} || {move}; "
             f"else {create} {window} {tail}; fi")
    # the plan's future may have begun by the time the script runs: decided then, by $now
    return f"if [[ $now < {_q(start)} ]]; then {ahead}; else {running}; fi"


def _delete_line(r: SlurmReservation) -> str:
    name = r.name
    return (f"if {_has(name)}; then {RUN}scontrol delete "
            f"{_q(f'ReservationName={name}')}; fi")


#: The script's ``wide_cap`` function: the pace cap of a :func:`widening` project, read from
#: the queue when the script runs. ``scontrol -o show job`` prints a pending job's request
#: as ``TRES=cpu=..,node=..,gres/gpu=N``: N is its GPUs in all, however it asked for them
#: (``--gres=gpu:8 -N 4``, ``--gpus=32``, ``--gpus-per-node``; read on the real Slurm 22.05).
WIDE_CAP = tuple(r"""
# wide_cap ACCOUNT CAP: CAP, or the GPUs of ACCOUNT's widest pending job where more
wide_cap() {
  local acct=$1 cap=$2 line re=' TRES=([^ ]*,)?gres/gpu=([0-9]+)[, ]'
  while IFS= read -r line; do
    line=" $line "
    [[ $line == *" Account=$acct "* && $line == *" JobState=PENDING "* ]] || continue
    [[ $line =~ $re ]] && (( BASH_REMATCH[2] > cap )) && cap=${BASH_REMATCH[2]}
  done < <(scontrol -o show job 2>/dev/null || true)
  echo "$cap"
}""".strip("\n").splitlines())


#: The script's ``resv_update`` function (see its comment and the module docstring).
RESV_UPDATE = tuple(r"""
# resv_update NAME PARTITION COUNT START END SETTING...: scontrol update NAME with the
#   SETTINGs (its new window START to END). Slurm keeps a reservation's nodes when it
#   moves it, and refuses when another reservation holds one of them in the new window;
#   then the same update names COUNT nodes of PARTITION that no other reservation holds
#   in the window, its own nodes first
resv_update() {
  local name=$1 part=$2 count=$3 start=$4 end=$5 out line nodes own='' busy=' ' n free=()
  local re='^ReservationName=(.*) StartTime=([^ ]+) EndTime=([^ ]+) Duration=[^ ]+ '
  re+='Nodes=([^ ]+) '
  shift 5
  if out=$(run scontrol update "ReservationName=$name" "$@" 2>&1); then
    [ -z "$out" ] || printf '%s\n' "$out"; return 0
  fi
  if [[ $out != *overlaps* ]]; then printf '%s\n' "$out" >&2; return 1; fi
  while IFS= read -r line; do
    [[ $line =~ $re && ${BASH_REMATCH[4]} != "(null)" ]] || continue
    if [[ ${BASH_REMATCH[1]} == "$name" ]]; then own=${BASH_REMATCH[4]}
    elif [[ ${BASH_REMATCH[2]} < $end && $start < ${BASH_REMATCH[3]} ]]; then
      busy+="$(scontrol show hostnames "${BASH_REMATCH[4]}" | tr '\n' ' ')"
    fi
  done < <(scontrol -o show reservation 2>/dev/null || true)
  line=" $(scontrol -o show partition "$part") "  # its Nodes=, not AllocNodes=
  [[ $line =~ \ Nodes=([^ ]+)\  ]] || { printf '%s\n' "$out" >&2; return 1; }
  nodes=${BASH_REMATCH[1]}
  for n in ${own:+$(scontrol show hostnames "$own")} $(scontrol show hostnames "$nodes"); do
    [[ $busy == *" $n "* || " ${free[*]-} " == *" $n "* ]] || free+=("$n")
  done
  if (( ${#free[@]} < count )); then
    printf 'gpu-planner: %s: %s; fewer than %s nodes of %s are free of %s from %s to %s\n' \
      "$name" "$out" "$count" "$part" 'other reservations' "$start" "$end" >&2
    return 1
  fi
  nodes=$(IFS=,; printf '%s' "${free[*]:0:count}")
  run scontrol update "ReservationName=$name" "$@" "Nodes=$nodes"
}
""".strip("\n").splitlines())


def _changed_accounts(state: SlurmState, before: SlurmState | None) -> list[SlurmAccount]:
    """The accounts of ``state`` that ``before`` lacks or holds with another parent or share."""
    if before is None:
        return list(state.accounts)
    old = {a.node: a for a in before.accounts}
    return [a for a in state.accounts if old.get(a.node) != a]


def _header(plan: dict[str, Any]) -> list[str]:
    """The comment block and the preamble (strict mode, UTC, the dry-run switch, the clock).

    Every text the plan gives is escaped (:func:`comment`): nothing ends a comment line.
    """
    valid = f"# valid from {plan['periods'][0]['start']}"
    if "quarter_end" in plan:
        valid += f" until {plan['quarter_end']}"
    partitions = [f"#   partition {comment(c['cluster'])}: {c['nodes']} nodes, "
                  f"Gres=gpu:{c['gpus_per_node']} each"
                  for c in sorted(plan.get("clusters", []), key=lambda c: c["cluster"])]
    return [
        f"# gpu-planner: Slurm state for plan {comment(plan['scenario'])} as of "
        f"{comment(plan['as_of'])} (input {comment(plan.get('input_digest', ''))})",
        comment(valid),
        "# idempotent: every command is guarded; re-running converges",
        "# usage: slurm-apply.sh [--dry-run]   (or DRY_RUN=1): print each change, quoted,",
        "#   instead of making it (the read-only guards still run)",
        "# slurm.conf must have (this script cannot set it):",
        *(f"#   {line}" for line in slurm_conf_lines(plan)),
        "# and a partition per cluster of the plan, named as the cluster "
        "(PartitionName=<cluster> Nodes=<its nodes>):",
        *partitions,
        "# no pipefail: `show | grep -q` must not fail on SIGPIPE once grep has its match",
        "set -eu", "export TZ=UTC",
        'dry_run="${DRY_RUN:-0}"',
        'case "${1-}" in --dry-run) dry_run=1 ;; "") ;; '
        '*) echo "usage: $0 [--dry-run]" >&2; exit 2 ;; esac',
        "# every command that changes Slurm goes through run: in a dry run it is printed",
        "run() { if [ \"$dry_run\" = 1 ]; then printf 'would run:'; printf ' %q' \"$@\"; "
        "printf '\\n'; else \"$@\"; fi; }",
        "# resv_has NAME FIELD...: the reservation exists and shows every FIELD (key=value)",
        'resv_has() { local line; line=" $(scontrol -o show reservation "$1" 2>/dev/null '
        '|| true) "; shift; for f in "$@"; do [[ $line == *" $f "* ]] || return 1; done; }',
        *RESV_UPDATE, *WIDE_CAP,
        "now=$(date -u +%Y-%m-%dT%H:%M:%S)  # a reservation whose start has passed by now "
        "is running"]


def export_slurm(plan: dict[str, Any], org: pd.DataFrame, previous: dict[str, Any] | None = None,
                 previous_org: pd.DataFrame | None = None, options: SlurmExport | None = None
                 ) -> str:
    """The bash script that makes Slurm hold what the plan says (see the module docstring).

    It renders the state of the plan (:meth:`SlurmExport.state`; ``options`` default
    :data:`SHIPPED`), and with ``previous`` only what differs from the previous plan's.
    """
    chosen = SHIPPED if options is None else options
    tree = OrgTree.from_frame(org)
    state = chosen.state(plan, tree)
    head = ["#!/usr/bin/env bash", *_header(plan), ""]
    lines: list[str] = []
    before = OrgTree.from_frame(previous_org) if previous_org is not None else tree
    old = chosen.state(previous, before) if previous is not None else None
    accounts = _account_lines(_changed_accounts(state, old))
    if accounts:
        lines += ["# accounts: the org tree, fairshare from the budgets", *accounts, ""]
    old_settings = old.settings() if old is not None else {}
    now_settings = state.settings()
    changed = [b for b in state.budgets if old_settings.get(b.project) != now_settings[b.project]]
    # every QOS added before any is set: a Preempt list names other budget QOS
    qos = [_qos_add(b) for b in changed] + [line for b in changed for line in _qos_lines(b)]
    if qos and state.overdrawn is not None:  # gp-opportunistic's Preempt names it: first
        lines += ["# overdrawn work (rule 8): projects a whole budget ahead of their pace; "
                  "lowest priority, preempted by every other QOS at once",
                  *_opportunistic_lines(state.overdrawn), ""]
    if qos:  # the budget QOS name gp-opportunistic: it comes first
        lines += ["# opportunistic work: beyond budget, preemptible, charged to no budget",
                  *_opportunistic_lines(state.opportunistic), ""]
        lines += ["# budgets: remaining GPU-minutes (undecayed) and the pace cap (GPUs at "
                  "once) per project; they preempt opportunistic work", *qos, ""]
    gone = {r.request_id: r for r in old.reservations} if old is not None else {}
    new_ids = {r.request_id for r in state.reservations}
    # the dropped ones first: the nodes they free may be where the others move
    changes = [_delete_line(gone[i]) for i in sorted(set(gone) - new_ids)]
    changes += [_reservation_line(r, state.as_of) for r in state.reservations
                if r.request_id not in gone or gone[r.request_id].key() != r.key()]
    if changes:
        lines += ["# reservations: whole nodes for their accounts", *changes, ""]
    if not lines:
        lines = ["# nothing changed since the previous plan", ""]
    wide = [_wide_cap_line(b) for b in state.budgets if b.widens]
    if wide:  # every run, with or without a previous plan: the queue is read now
        lines += ["# pace caps read from the queue now: a project behind its pace with budget "
                  "left holds at least its widest pending job's GPUs", *wide, ""]
    return "\n".join(head + lines)


@dataclass(frozen=True)
class SlurmExport:
    """The Slurm export's options (:func:`slurm_state` says what each does).

    :data:`SHIPPED` is what ``planner export --to slurm``, ``planner cycle`` and
    ``planner tick`` use, and what ``planner-slurm`` replays
    (:class:`~planner.simulate.slurm_replay.SlurmExecutor`'s ``export``): one object,
    so the replay runs what ships by construction. Other values are the variants the
    export was measured against (:data:`BEFORE_RULE8`: the export before rule 8).
    """

    pace: str = "total"
    no_decay: bool = True
    shares: str = "budget"
    opportunistic_usage: float = 1.0
    floor: str = "node"
    takes_back: bool = True
    widens: bool = True
    #: the executor contract's rule 8: ``gp-overdrawn`` and the overdrawn projects
    overdrawn_qos: bool = True
    #: ... which keep their pace in ``gp-opportunistic`` (False: rule 8 as first shipped)
    overdrawn_keeps_pace: bool = True
    #: ... until they have run this share of their budget past rule 8's line
    #: (:func:`overdrawn_pace`; ``math.inf``: however far, the pace before the margin)
    pace_margin: float = PACE_MARGIN

    def state(self, plan: dict[str, Any], org: pd.DataFrame | OrgTree,
              unbudgeted: Mapping[str, float] | None = None) -> SlurmState:
        """:func:`slurm_state` with these options."""
        return slurm_state(plan, org, self.pace, self.no_decay, self.shares,
                           self.opportunistic_usage, self.floor, self.takes_back,
                           self.widens, self.overdrawn_qos, unbudgeted,
                           self.overdrawn_keeps_pace, self.pace_margin)

    def export(self, plan: dict[str, Any], org: pd.DataFrame,
               previous: dict[str, Any] | None = None,
               previous_org: pd.DataFrame | None = None) -> str:
        """:func:`export_slurm` with these options."""
        return export_slurm(plan, org, previous, previous_org, options=self)

    def overdrawn_accounts(self, plan: dict[str, Any],
                           unbudgeted: Mapping[str, float] | None = None) -> frozenset[str]:
        """The Slurm accounts ``planner tick`` moves to ``gp-overdrawn`` (rule 8).

        The accounts of the plan's projects :func:`planner.contract.overdrawn` with
        ``unbudgeted`` (project -> NGH run charged to no budget); none without the rule.
        """
        if not self.overdrawn_qos:
            return frozenset()
        return frozenset(account(p) for p in overdrawn(plan, unbudgeted))

    def overdrawn_paces(self, plan: dict[str, Any],
                        unbudgeted: Mapping[str, float] | None = None) -> dict[str, float]:
        """Overdrawn account -> the NGH per hour ``planner tick`` keeps in gp-opportunistic.

        :func:`overdrawn_pace` by account (its pace; 0 without ``overdrawn_keeps_pace``);
        none without the rule.
        """
        if not self.overdrawn_qos:
            return {}
        return {account(p): v for p, v in overdrawn_pace(
            plan, overdrawn(plan, unbudgeted), self.overdrawn_keeps_pace, unbudgeted,
            self.pace_margin).items()}


#: the export that ships (see :class:`SlurmExport`)
SHIPPED = SlurmExport()
#: the export before rule 8: no ``gp-overdrawn``, no project moved there
BEFORE_RULE8 = SlurmExport(overdrawn_qos=False)
#: rule 8 as first shipped: every job of an overdrawn project beyond its budget to
#: ``gp-overdrawn``, none kept at its pace
RULE8_WITHOUT_PACE = SlurmExport(overdrawn_keeps_pace=False)
#: rule 8 with the pace kept however far a project's kept runs overrun it (the pace
#: before :attr:`SlurmExport.pace_margin`)
PACE_WITHOUT_MARGIN = SlurmExport(pace_margin=math.inf)
