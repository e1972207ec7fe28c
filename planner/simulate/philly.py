"""The Philly converter: Microsoft's Philly GPU-cluster jobs → a trace on a scenario.

Input: Sia's per-job extract of the Philly trace (Jeon et al., USENIX ATC'19; CC BY
4.0), ``timestamp,duration,num_gpus,gpu_time,cluster`` — submit time, run time in
seconds, GPUs, GPU-seconds (redundant, not read) and the *virtual cluster* (VC), a
tenant of the shared cluster. Other columns pass unread.

The rule (deterministic: no random state, every draw is a hash of the job's own
fields, so the same file and scenario give the same trace, byte for byte, and a job
keeps its draws when the file is reordered):

1. **VCs → teams.** A team is a parent of projects (leaves) in the scenario's org.
   Teams are ranked by strategic share (the product of normalised weights from the
   top of the tree down), ties in org order; VCs by their GPU-hours, ties by VC id.
   The i-th VC goes to the i-th team; with fewer teams than VCs it wraps round
   (VC i → team i mod T), so the smallest VCs share the largest teams.
2. **Jobs → projects.** A job goes to one of its team's projects, each equally
   likely, by a hash of (VC, submit, duration, GPUs).
3. **Time.** Submits are shifted so the first Philly job is submitted at
   ``quarter_start``, and, when Philly's span (109 days) is longer than the quarter,
   compressed linearly by ``(quarter − 1 s) / span`` so every job is submitted inside
   it; floored to whole seconds. Durations are kept (seconds → hours), so
   compression raises the offered load by ``1 / factor``.
4. **Clusters.** Among the clusters the project may use (budgets' ``clusters``) that
   are big enough for the job, one is drawn with chances proportional to their GPUs,
   so load lands where capacity is. A job bigger than every such cluster is dropped
   and counted.
5. **Protected time.** Philly records no priorities; we assume a job holding whole
   nodes (``gpus`` ≥ the cluster's GPUs a node) is allocated work — a gang job loses
   every node's progress when preempted, so it is what a team budgets for — and that
   :data:`ALLOCATED_SHARE` of the smaller jobs are too, drawn by hash; the rest are
   sweeps and debugging run as unallocated work (``min_runtime_hours`` 0). Allocated
   jobs ask to be protected for their whole run (``min_runtime_hours`` = duration); the
   replay protects min(that, the contract's ``min_runtime_cap_hours``), the whole
   allowance.
6. **Resumable.** Single-node jobs resume from a checkpoint; of the multi-node jobs
   (more GPUs than a node) :data:`NOT_RESUMABLE_SHARE`, drawn by hash, restart from the
   beginning — we assume half of the large distributed jobs do not checkpoint.
7. **Ids.** ``job_id`` is ``philly-<row>``, the job's row in the Philly file (header =
   row 1), zero-padded, so every trace job points back at its source.
8. **Time limits.** Philly records no requested limits; every job gets
   :func:`~planner.simulate.trace.default_time_limit` (its duration rounded up to a
   power of two hours, at least 1 h), which ``fairtree``'s backfill plans with.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from planner.errors import InputError
from planner.inputs.org import OrgTree
from planner.inputs.scenario import Scenario
from planner.paths import PHILLY_CSV as PHILLY_CSV  # re-exported: where the data sit
from planner.paths import PHILLY_SCENARIO as PHILLY_SCENARIO
from planner.simulate.trace import (
    TRACE_COLUMNS,
    TRACE_SCHEMA,
    Problems,
    TraceColumn,
    check_header,
    default_time_limit,
    parse_columns,
    read_text_table,
)

#: The Philly columns read (``gpu_time`` and any other column pass unread).
PHILLY_SCHEMA: tuple[TraceColumn, ...] = (
    TraceColumn("timestamp", "datetime", "datetime64[ns, UTC]", "", None, "",
                "Submit time, `YYYY-MM-DD HH:MM:SS` (Philly's 2017 wall clock)."),
    TraceColumn("duration", "float", "float64", "s", None, "> 0", "Run time in seconds."),
    TraceColumn("num_gpus", "int", "int64", "GPUs", None, "≥ 1", "GPUs the job held."),
    TraceColumn("cluster", "id", "str", "", None, "", "Philly's virtual cluster (VC) id."),
)
PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster"


#: Share of the jobs below one node that are allocated (protected, budgeted) work.
ALLOCATED_SHARE = 0.75
#: Share of the multi-node jobs that cannot resume after a preemption.
NOT_RESUMABLE_SHARE = 0.5

DROP_TOO_BIG = "more GPUs than any cluster its project may use"

# splitmix64 (Steele, Lea & Flood 2014): a fixed, well-mixed 64-bit hash.
_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
# A salt per independent draw.
_PROJECT, _CLUSTER, _ALLOCATED, _RESUMABLE = (np.uint64(s) for s in (1, 2, 3, 4))


def _mix(x: np.ndarray) -> np.ndarray:
    x = x + _GAMMA
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def _uniform(key: np.ndarray, salt: np.uint64) -> np.ndarray:
    """A number in [0, 1) per key, independent for each salt."""
    return (_mix(key ^ _mix(np.full_like(key, salt))) >> np.uint64(11)) * (2.0 ** -53)


def _text_key(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


def job_keys(jobs: pd.DataFrame) -> np.ndarray:
    """A 64-bit hash of each Philly job's (VC, submit, duration, GPUs)."""
    vc_key = jobs["vc"].map({vc: _text_key(vc) for vc in jobs["vc"].unique()})
    key = _mix(vc_key.to_numpy(dtype=np.uint64))
    stamps = jobs["submit"].dt.tz_convert(None).to_numpy(dtype="datetime64[ns]")
    key = _mix(key ^ stamps.view(np.int64).astype(np.uint64))
    key = _mix(key ^ jobs["duration_seconds"].to_numpy(dtype=np.float64).view(np.uint64))
    return _mix(key ^ jobs["gpus"].to_numpy(dtype=np.int64).astype(np.uint64))


# --------------------------------------------------------------------------- reading


def read_philly(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The jobs of a Philly CSV: ``row, submit, duration_seconds, gpus, vc``, file order.

    ``row`` is the job's row in the file (header = row 1). Raises
    :class:`~planner.errors.InputError` with every problem (file, row, column): a
    missing column, a cell that is not a date or number, ``duration`` ≤ 0, ``num_gpus``
    not whole or < 1, an empty VC.
    """
    path = Path(path)
    problems = Problems(path.name)
    table = read_text_table(path, problems, PHILLY_HEADER)
    if table is None or not check_header(
            table, problems, {c.name: c.meaning for c in PHILLY_SCHEMA}
            | {"gpu_time": "GPU-seconds, not read"},
            tuple(c.name for c in PHILLY_SCHEMA), unknown_allowed=True):
        raise InputError(problems.items)
    table.check_width(problems)
    values = parse_columns(PHILLY_SCHEMA, table, problems)
    duration, gpus = values["duration"], values["num_gpus"]
    problems.where(duration <= 0, table.rows, "duration",
                   lambda i: f"must be > 0, got {duration.iat[i]:g}; a job runs for some time")
    problems.where(gpus < 1, table.rows, "num_gpus",
                   lambda i: f"must be ≥ 1, got {gpus.iat[i]:g}; a job holds at least one GPU")
    if problems.items:
        raise InputError(problems.items)
    return pd.DataFrame({
        "row": table.rows.astype("int64"),
        "submit": values["timestamp"].astype("datetime64[ns, UTC]"),
        "duration_seconds": duration.astype("float64"),
        "gpus": gpus.astype("int64"),
        "vc": values["cluster"].astype("str"),
    })


# --------------------------------------------------------------------------- the rule


def strategic_shares(tree: OrgTree) -> np.ndarray:
    """(N,) each node's share of the whole: the product of normalised weights down to it."""
    share = np.zeros(tree.n_nodes)
    top = np.array(tree.top, dtype=np.int64)
    share[top] = tree.weight[top] / tree.weight[top].sum()
    for i in tree.top_down:
        kids = np.array(tree.children(i), dtype=np.int64)
        share[kids] = share[i] * tree.weight[kids] / tree.weight[kids].sum()
    return share


def teams(scenario: Scenario) -> dict[str, tuple[str, ...]]:
    """Each team (a parent of projects) and its projects, by strategic share, then org order.

    A project at the top of the tree is a team of its own.
    """
    tree = scenario.tree
    share = np.round(strategic_shares(tree), 12)  # equal shares tie exactly: org order
    members: dict[int, list[str]] = {}
    for leaf, team in zip(tree.leaf_nodes, tree.team, strict=True):
        members.setdefault(int(team), []).append(tree.ids[leaf])
    order = sorted(members, key=lambda i: (-share[i], i))
    return {tree.ids[i]: tuple(members[i]) for i in order}


def vc_teams(jobs: pd.DataFrame, team_ids: list[str]) -> dict[str, str]:
    """VC → team: VCs by GPU-hours (ties by id) onto ``team_ids`` in order, wrapping round."""
    gpu_hours = (jobs["gpus"] * jobs["duration_seconds"] / 3600.0).groupby(jobs["vc"]).sum()
    ranked = sorted(gpu_hours.items(), key=lambda item: (-item[1], item[0]))
    return {str(vc): team_ids[i % len(team_ids)] for i, (vc, _) in enumerate(ranked)}


def quarter_submits(submit: pd.Series, start: pd.Timestamp,
                    end: pd.Timestamp) -> tuple[pd.Series, float]:
    """Submits moved into ``[start, end)``: the first at ``start``, compressed if needed.

    Returns the new submits (whole seconds) and the compression factor (1: shifted only).
    """
    offset = (submit - submit.min()).dt.total_seconds().to_numpy()
    span = float(offset.max()) if len(offset) else 0.0
    quarter = (end - start).total_seconds()
    factor = min(1.0, (quarter - 1.0) / span) if span > 0 else 1.0
    seconds = np.floor(offset * factor).astype(np.int64)
    moved = start.as_unit("ns") + pd.to_timedelta(seconds, unit="s")
    return pd.Series(moved, index=submit.index).astype("datetime64[ns, UTC]"), factor


@dataclass(frozen=True)
class Conversion:
    """A converted trace and what the conversion did."""

    trace: pd.DataFrame  # the trace format (TRACE_COLUMNS), sorted by submit, job_id
    jobs: int  # Philly jobs read
    dropped: Mapping[str, int]  # reason → jobs dropped
    teams: Mapping[str, str]  # VC → team, VCs by GPU-hours
    vc_gpu_hours: Mapping[str, float]  # VC → GPU-hours in the Philly file
    factor: float  # time compression (1 = shifted only)
    philly_start: pd.Timestamp  # the first Philly submit, mapped to quarter_start

    def lines(self) -> list[str]:
        """A short account for the terminal."""
        dropped = sum(self.dropped.values())
        reasons = "; ".join(f"{n} {why}" for why, n in self.dropped.items() if n)
        kept_hours = float((self.trace["gpus"] * self.trace["duration_hours"]).sum())
        lines = [f"{len(self.trace)} of {self.jobs} Philly jobs kept, {dropped} dropped"
                 + (f" ({reasons})" if reasons else ""),
                 f"{kept_hours:,.0f} GPU-hours; submits from {self.philly_start:%Y-%m-%d %H:%M:%S}"
                 f" shifted to quarter start, time × {self.factor:.4f}",
                 "VC → team (VC GPU-hours):"]
        lines += [f"  {vc} → {team} ({self.vc_gpu_hours[vc]:,.0f})"
                  for vc, team in self.teams.items()]
        return lines


def philly_conversion(philly_csv: str | os.PathLike[str], scenario: Scenario) -> Conversion:
    """Convert the Philly CSV at ``philly_csv`` into a trace on ``scenario`` (the rule above).

    Raises :class:`~planner.errors.InputError` for a bad Philly file.
    """
    jobs = read_philly(philly_csv)
    team_projects = teams(scenario)
    mapping = vc_teams(jobs, list(team_projects))
    key = job_keys(jobs)

    # 2. project: uniform among the team's projects
    team_ids = list(team_projects)
    team_of_job = jobs["vc"].map({vc: team_ids.index(t) for vc, t in mapping.items()})
    team_of_job = team_of_job.to_numpy(dtype=np.int64)
    counts = np.array([len(team_projects[t]) for t in team_ids], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
    flat = np.array([p for t in team_ids for p in team_projects[t]], dtype=object)
    pick = np.minimum((_uniform(key, _PROJECT) * counts[team_of_job]).astype(np.int64),
                      counts[team_of_job] - 1)
    project_index = offsets[team_of_job] + pick

    # 4. cluster: among the allowed ones big enough, by GPU count
    arrays = scenario.arrays
    names = np.array(arrays.clusters, dtype=object).astype("str")
    size = arrays.gpus
    per_node = arrays.gpus_per_node
    allowed = arrays.allowed[[arrays.project_index[p] for p in flat]].reshape(len(flat),
                                                                             len(names))
    gpus = jobs["gpus"].to_numpy(dtype=np.int64)
    weight = (allowed[project_index] & (gpus[:, None] <= size[None, :])) * size[None, :]
    total = weight.sum(axis=1)
    kept = total > 0
    draw = _uniform(key, _CLUSTER) * total
    cluster_index = np.argmax(np.cumsum(weight, axis=1) > draw[:, None], axis=1)

    # 3. time; 5. protected time; 6. resumable
    submits, factor = quarter_submits(jobs["submit"], scenario.config.quarter_start,
                                      scenario.config.quarter_end)
    hours = jobs["duration_seconds"].to_numpy(dtype=np.float64) / 3600.0
    node = per_node[cluster_index]
    allocated = (gpus >= node) | (_uniform(key, _ALLOCATED) < ALLOCATED_SHARE)
    resumable = ~((gpus > node) & (_uniform(key, _RESUMABLE) < NOT_RESUMABLE_SHARE))
    rows = jobs["row"].to_numpy(dtype=np.int64)
    width = max(6, len(str(int(rows.max())))) if len(rows) else 6

    trace = pd.DataFrame({
        "job_id": pd.Series([f"philly-{r:0{width}d}" for r in rows], dtype="str"),
        "project": pd.Series(flat[project_index], dtype="str"),
        "cluster": pd.Series(names[cluster_index], dtype="str"),
        "submit": submits,
        "gpus": gpus,
        "duration_hours": hours,
        "min_runtime_hours": np.where(allocated, hours, 0.0),
        "resumable": resumable,
        "time_limit_hours": default_time_limit(hours),
    }, columns=list(TRACE_COLUMNS))[kept]
    trace = trace.astype({c.name: c.dtype for c in TRACE_SCHEMA})
    trace = trace.sort_values(["submit", "job_id"], kind="mergesort").reset_index(drop=True)
    vc_hours = (jobs["gpus"] * jobs["duration_seconds"] / 3600.0).groupby(jobs["vc"]).sum()
    return Conversion(
        trace=trace, jobs=len(jobs), dropped={DROP_TOO_BIG: int((~kept).sum())},
        teams=mapping, vc_gpu_hours={vc: float(vc_hours[vc]) for vc in mapping},
        factor=factor, philly_start=jobs["submit"].min() if len(jobs) else
        scenario.config.quarter_start)


def convert_philly(philly_csv: str | os.PathLike[str], scenario: Scenario,
) -> pd.DataFrame:
    """The Philly CSV at ``philly_csv`` as a trace on ``scenario`` (see the module's rule).

    Columns :data:`~planner.simulate.trace.TRACE_COLUMNS`, as
    :func:`~planner.simulate.trace.read_trace` returns them. Jobs bigger than every
    cluster their project may use are dropped (:func:`philly_conversion` counts them).
    """
    return philly_conversion(philly_csv, scenario).trace
