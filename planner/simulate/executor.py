"""The typed seams of the replay: what a policy sees of the engine, what a replanner asks.

Three layers run a replay of the ``planner`` policies:

- the **engine** (:class:`~planner.simulate.engine.Replay`): nodes, queues, starts,
  preemptions, the clock, the protected-runtime cap; policies see it through
  :class:`EngineView`, the reads and actions they may use, not the engine's internals;
- the **replanner** (:class:`~planner.simulate.replanner.Replanner`): at every period
  boundary it builds the scenario of the replan from the replay's state (usage,
  demand through :mod:`planner.demand`, gang requests) and plans it;
- an **executor**, which the replanner holds (composed, not inherited) and which turns
  each plan into starts and preemptions: the plan enforced directly (``planner``,
  :class:`~planner.simulate.planner_policy.IdealExecutor`), Slurm as the Slurm export
  configures it (``planner-slurm``, :class:`~planner.simulate.slurm_replay.SlurmExecutor`,
  taking :data:`planner.exporters.slurm.SHIPPED`), Kueue as the Kueue export configures
  it (``planner-kueue``, :class:`~planner.simulate.kueue_replay.KueueExecutor`, taking
  :data:`planner.exporters.kueue.SHIPPED`). :class:`Executor` is the set of hooks the
  replanner calls on it.

Both are :func:`typing.runtime_checkable` protocols: ``isinstance(x, Executor)`` checks that
every hook is there (``tests/test_simulate_executor.py`` checks the engine and the three
executors), and the annotations let a type checker check the calls.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from planner.config import ModelConfig
    from planner.demand import QueuedJob
    from planner.inputs import Scenario
    from planner.inputs.org import OrgTree
    from planner.simulate.engine import Hold, Jobs, ProjectQueue, Segment


@runtime_checkable
class EngineView(Protocol):
    """The engine as a policy sees it: state to read, and the actions it may take.

    Clusters, projects and jobs are indices (``c``, ``p``, ``job``); times are hours from
    the quarter's start. :class:`~planner.simulate.engine.Replay` is the one engine.
    """

    # -- what the replay is of -----------------------------------------------------------
    scenario: Scenario
    tree: OrgTree
    jobs: Jobs
    projects: tuple[str, ...]
    cluster_ids: list[str]
    cluster_index: dict[str, int]
    gpn: list[int]  # GPUs a node, by cluster
    nodes: list[int]  # nodes, by cluster
    capacity: list[int]  # GPUs, by cluster
    rate: list[float]  # NGH per GPU-hour, by cluster
    hours: float  # the quarter's hours
    n_hours: int
    protect_cap: float  # the contract's protected-runtime cap (given once, to the engine)

    # -- the state the policies read -----------------------------------------------------
    now: float
    key: list[tuple]  # each job's policy key (job_key)
    queues: list[dict[int, ProjectQueue]]
    holds: dict[int, Hold]
    segments: list[Segment]
    used: np.ndarray  # (P, K, H) GPU-hours run
    charged: np.ndarray  # (P,) NGH of allocated work so far
    held_ngh: list[float]  # NGH per hour each project runs now
    held_project: np.ndarray  # (P, K) GPUs each project holds
    outstanding: np.ndarray  # (P, K) GPUs of allocated work waiting or running
    outstanding_all: np.ndarray
    replans: int
    plan_seconds: float

    def is_waiting(self, job: int) -> bool:
        """Whether ``job`` is in its cluster's queue."""

    def is_running(self, job: int) -> bool:
        """Whether ``job`` holds GPUs now."""

    def tag_of(self, job: int) -> str:
        """The class (tag) a running job runs under; its last run's for one not running."""

    def started_at(self, job: int) -> float:
        """When ``job``'s current (or last) run started, hours."""

    def held(self, job: int) -> int:
        """GPUs a job holds: whole nodes for a gang, its GPUs otherwise."""

    def work_left(self, job: int) -> float:
        """Hours of work ``job`` has left now (what it still needs if never preempted)."""

    def requested_hours(self, job: int) -> float:
        """The time limit left of a waiting job: what it asks the scheduler for."""

    def expected_end(self, job: int) -> float:
        """When a scheduler that knows only time limits expects a running job to end."""

    def limit_end(self, job: int) -> float:
        """``run_start`` + the limit left of a running job: :meth:`expected_end` before ``now``."""

    def protection(self, job: int) -> float:
        """Hours job ``job`` is protected for when it starts, unless its policy says less."""

    def nodes_of(self, job: int) -> tuple[int, ...]:
        """The nodes a running job holds (whole ones for a gang)."""

    def running_jobs(self, c: int) -> list[int]:
        """Jobs running on cluster ``c``, oldest run first (run start, then job): a new list."""

    def outstanding_jobs(self) -> list[int]:
        """Waiting and running jobs of every cluster, in job order."""

    def waiting_jobs(self) -> list[int]:
        """Jobs waiting in every cluster's queue, in job order."""

    def waiting_projects(self, c: int) -> list[int]:
        """Projects with waiting jobs on ``c``, in project order."""

    def head(self, c: int, p: int) -> int | None:
        """Project ``p``'s first waiting job on ``c`` by key, or None."""

    def head_fit(self, c: int, p: int, blocked: frozenset[int] = ...,
                 fits: Callable[[int], bool] | None = ...) -> int | None:
        """Project ``p``'s first waiting job on ``c`` (by key) that fits now, or None."""

    def head_in(self, c: int, p: int, sizes: set[int]) -> int | None:
        """Project ``p``'s first waiting job on ``c`` (by key) among ``sizes``, or None."""

    def heads(self, c: int) -> list[tuple[int, int]]:
        """(project, its first waiting job by key) of every project waiting on ``c``."""

    def heads_in(self, c: int, sizes: set[int]) -> list[tuple[int, int]]:
        """(project, its first waiting job by key among ``sizes``) wherever there is one."""

    def held_under(self, c: int, p: int, tag: str) -> int:
        """GPUs project ``p`` holds on cluster ``c`` under ``tag``."""

    def held_of(self, c: int, tag: str) -> np.ndarray:
        """(P,) GPUs each project holds on cluster ``c`` under ``tag`` (read-only use)."""

    def preemptible_gpus(self, c: int) -> int:
        """GPUs on ``c`` held by running jobs past their protected runtime."""

    def victim_jobs(self, c: int, victims: Iterable[tuple[int, str]]) -> list[int]:
        """Running jobs of the ``victims`` groups on ``c`` past their protected runtime."""

    def victim_groups(self, c: int) -> set[tuple[int, str]]:
        """(project, tag) groups on ``c`` with running jobs past their protected runtime."""

    def version(self, c: int) -> int:
        """A counter of changes to cluster ``c``'s running work (starts, stops, expiries, tags)."""

    def queue_version(self, c: int) -> int:
        """A counter of changes to the first waiting job of any project on ``c``."""

    def project_version(self, c: int, p: int) -> int:
        """:meth:`version` of project ``p``'s running work on ``c`` alone."""

    def node_version(self, c: int) -> list[int]:
        """Per node of ``c``, a counter of changes to its jobs (starts, stops, retags)."""

    def free_gpus(self, c: int) -> list[int]:
        """Free GPUs of each node of cluster ``c`` (a copy)."""

    def nodes_on(self, c: int) -> Iterable[tuple[int, int, dict[int, None]]]:
        """(node, free GPUs, the jobs on it) for every node of cluster ``c``."""

    def fits(self, c: int, gpus: int, blocked: frozenset[int] = ...) -> bool:
        """Whether a job of ``gpus`` GPUs can start on cluster ``c`` now, off ``blocked``."""

    def any_fits(self, c: int) -> bool:
        """Whether any waiting job on ``c`` fits now (cheap: one check per waiting size)."""

    def fit_limit(self, c: int) -> int:
        """The most GPUs a job may ask and start on ``c`` now: ``fits(c, g)`` ⟺ g ≤ this."""

    def fitting_sizes(self, c: int) -> set[int]:
        """The sizes (GPUs) of the jobs waiting on ``c`` that fit now (:meth:`fits`)."""

    def active_holds(self, c: int) -> list[int]:
        """Ids of the holds on cluster ``c`` whose start has passed, oldest first."""

    def nodes_free(self, c: int, nodes: Iterable[int]) -> bool:
        """Whether every one of ``nodes`` is wholly free."""

    # -- the actions -----------------------------------------------------------------------
    def start(self, job: int, tag: str, blocked: frozenset[int] = ...,
              nodes: tuple[int, ...] | None = ..., protect: float | None = ...) -> None:
        """Start a waiting job that fits now (raises if it does not): the policy's choice."""

    def preempt(self, job: int) -> None:
        """Preempt a running job past its min runtime; re-queue it (see module docstring)."""

    def preempt_for(self, job: int, victims: Iterable[tuple[int, str]],
                    blocked: frozenset[int] = ..., scan_limit: int = ...) -> bool:
        """Make room for ``job`` by preempting expired jobs of the ``victims`` groups."""

    def retag(self, job: int, tag: str) -> None:
        """Change a running job's class (the planner's executor at a replan)."""

    def hold_nodes(self, c: int, project: int, nodes: int, start: float, end: float,
                   job: int, prefer: Iterable[int] = ...) -> int | None:
        """Hold ``nodes`` whole nodes of cluster ``c`` for ``project``'s job over [start, end)."""

    def release_hold(self, hid: int) -> None:
        """End a hold now: its nodes take any work again."""

    def clear_nodes(self, c: int, nodes: Iterable[int],
                    victims: Iterable[tuple[int, str]]) -> bool:
        """Drain ``nodes`` when it empties them: all or nothing."""


@runtime_checkable
class Executor(Protocol):
    """The hooks the replanner calls on the executor that enforces its plans.

    Once, before the replay: :meth:`begin`. Every whole hour: :meth:`before_replan`; at a
    period boundary the replan, which reads :meth:`booked` (the usage ledger) and
    :meth:`read_back` (the queue as the executor prints it, when the demand is read
    through text), then :meth:`apply_first_period` (the plan's first period put in
    force: quotas, limits, reservations), :meth:`reclass` (running jobs re-classed
    against it) and :meth:`hold_reservations` (the plan's reservations held); then
    :meth:`after_replan`. The engine's :meth:`job_key` and :meth:`schedule` go to the
    executor unchanged.
    """

    name: str
    work_conserving: bool  # no idle GPU while a waiting job fits
    protects_min_runtime: bool  # False: the executor cannot protect a min runtime

    def job_key(self, sim: EngineView, job: int) -> tuple:
        """The job's order key in its queue (computed once, at the start)."""

    def begin(self, sim: EngineView, model: ModelConfig) -> None:
        """Once, before the replay (``model``: the replanner's): nothing in force yet."""

    def before_replan(self, sim: EngineView, now: float) -> None:
        """Every whole hour, before the replanner's (accruals, entitlements)."""

    def after_replan(self, sim: EngineView, now: float, replanned: bool) -> bool:
        """Every whole hour, after it (``replanned``: a plan was put in force).

        True: every cluster is scheduled again.
        """

    def booked(self, sim: EngineView) -> np.ndarray:
        """(P, K, H) GPU-hours the executor's accounting reports (the replan's usage)."""

    def read_back(self, sim: EngineView, asked: AbstractSet[int], as_of: pd.Timestamp,
                  hours_left: Callable[[EngineView, int], float]) -> list[QueuedJob]:
        """The queue as the executor prints it, read back with the ingest's parser.

        ``hours_left``: the replanner's time left of a job (what its demand source sees).
        """

    def apply_first_period(self, sim: EngineView, body: dict, first: str) -> None:
        """Put the plan's first period in force (quotas, limits, reservations)."""

    def reclass(self, sim: EngineView) -> None:
        """Re-class the running jobs against the plan just put in force."""

    def hold_reservations(self, sim: EngineView, body: dict,
                          request_job: Mapping[str, int]) -> None:
        """The plan's reservations become holds (``request_job``: request id → job)."""

    def schedule(self, sim: EngineView, c: int) -> None:
        """Start (and preempt) what the executor would on cluster ``c`` now."""
