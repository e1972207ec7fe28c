"""Generate the bundled sample scenario: a seeded, deterministic, realistic GPU institute.

The institute at scale 1
------------------------
- 8 clusters, 2952 GPUs, 8 GPUs a node: three H100 clusters (1024, 512, 256 GPUs),
  three A100 clusters (512, 256, 128) and two L40S clusters (176, 88).
- An org tree of 4 research areas (foundation-models, multimodal, science,
  infrastructure; weights 3, 2, 1.5, 1), 12 teams and 3 to 7 projects a team
  (about 60 projects). Project ids are the team id plus a project name.
- Budgets (NGH) skewed lognormally, adding up to about 0.9 of the quarter's capacity;
  about a fifth of the projects may use only some clusters (mostly science and
  infrastructure projects kept off the H100s).
- Usage from quarter start to ``as_of`` (mid-quarter): a few thousand jobs of 1 to 64
  GPUs and 0.5 h to 3 days, scheduled first-come first-served onto each cluster so
  that no cluster is ever over capacity; clusters end up 85-95 % busy. Projects ran
  hot or cold against their budget pace. Three accounting rows are ingested twice.
- Elastic demand from ``as_of`` to quarter end, 2 to 3 times each cluster's capacity,
  as ranges of 1 to 21 days; some projects idle, a few wanting far more than their
  budget.
- About 60 whole-node reservation requests of 1 to 32 nodes and 24 to 168 hours, five
  of them impossible on purpose (window too short, more nodes than the cluster has,
  starting too late to end in the quarter).

Scale
-----
``--scale N`` builds N copies of the institute: clusters and org areas after the
first get a ``-2``, ``-3``... suffix on every id, so counts, capacity, budgets, usage,
demand and reservations all grow N-fold. The time axis (quarter, ``as_of``) is the
same at every scale. Projects of copy k use, demand and reserve on copy k's clusters
(their allowed set, when restricted, lists only those).

The same ``--scale`` and ``--seed`` give byte-identical files.

Reservation-heavy variants
--------------------------
``--reservations-factor F`` draws F times as many placeable requests a copy (still five
impossible ones), on the same clusters, budgets and demand: ``--reservations-factor 10``
gives about 560 requests on the sample's 8 clusters, and with ``--scale 10`` about
6,000 on 80. ``F = 1`` (the default) draws exactly the sample's requests.

Usage: ``python data/generate.py [--scale N] [--seed S] [--reservations-factor F] [--out DIR]``
"""

from __future__ import annotations

import argparse
import heapq
import math
import time
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

QUARTER_START = datetime(2026, 10, 1)
QUARTER_END = datetime(2027, 1, 1)
AS_OF = datetime(2026, 11, 16)
PERIOD_HOURS = 24
LOOKBACK_DAYS = 7
GPU_RATES = {"H100": 1.0, "A100": 0.55, "L40S": 0.35}
GPUS_PER_NODE = 8

QUARTER_H = int((QUARTER_END - QUARTER_START).total_seconds() // 3600)  # 2208
PAST_H = int((AS_OF - QUARTER_START).total_seconds() // 3600)  # 1104, usage so far
FUTURE_H = QUARTER_H - PAST_H  # 1104, the planning horizon

BUDGET_SHARE = 0.9  # sum of budgets / quarter capacity (NGH)
UTILIZATION = (0.86, 0.94)  # busy share of each cluster before as_of
DEMAND_RATIO = (2.2, 2.8)  # elastic demand / capacity after as_of, per cluster
RESERVATIONS_PER_COPY = (55, 65)

# (cluster, GPU type, nodes)
CLUSTERS = [
    ("h100-a", "H100", 128),
    ("h100-b", "H100", 64),
    ("h100-c", "H100", 32),
    ("a100-a", "A100", 64),
    ("a100-b", "A100", 32),
    ("a100-c", "A100", 16),
    ("l40s-a", "L40S", 22),
    ("l40s-b", "L40S", 11),
]

# (area, weight, teams); a team's candidate projects are in PROJECTS.
AREAS = [
    ("foundation-models", 3.0, ["pretraining", "post-training", "reasoning", "data-curation"]),
    ("multimodal", 2.0, ["vision", "speech", "video"]),
    ("science", 1.5, ["biology", "climate", "materials"]),
    ("infrastructure", 1.0, ["evals", "systems"]),
]
PROJECTS = {
    "pretraining": ["dense-7b", "dense-70b", "moe-base", "long-context", "tokenizer",
                    "multilingual", "code-base"],
    "post-training": ["sft", "rlhf", "reward-models", "safety-tuning", "instruction-data",
                      "distillation", "tool-use"],
    "reasoning": ["math", "code-agents", "planning", "theorem-proving", "search", "verifiers",
                  "self-play"],
    "data-curation": ["web-filtering", "dedup", "synthetic-data", "quality-classifiers",
                      "data-mixtures", "crawl-index", "pii-scrub"],
    "vision": ["segmentation", "detection", "vit-pretrain", "image-gen", "ocr", "depth",
               "3d-recon"],
    "speech": ["asr", "tts", "speaker-id", "speech-translation", "audio-lm", "music-gen",
               "diarization"],
    "video": ["video-gen", "video-qa", "action-recognition", "captioning", "world-models",
              "tracking", "compression"],
    "biology": ["protein-folding", "genomics", "single-cell", "drug-screening",
                "enzyme-design", "microscopy", "rna-structure"],
    "climate": ["weather-forecast", "downscaling", "ocean-models", "emissions",
                "satellite-imagery", "wildfire", "hydrology"],
    "materials": ["crystal-gen", "dft-surrogates", "catalysts", "batteries", "polymers",
                  "molecular-dynamics", "alloys"],
    "evals": ["benchmarks", "red-teaming", "leaderboards", "human-preference",
              "regression-suite", "contamination", "robustness"],
    "systems": ["kernels", "compiler", "inference-serving", "checkpointing", "scheduler-sim",
                "networking", "quantization"],
}
# Chance that a project of the area may use only some clusters.
RESTRICTED_SHARE = 0.2  # of the projects (of each copy) that may use only some clusters
RESTRICTED_ODDS = {"science": 4.0, "infrastructure": 3.5}  # relative odds; other areas 1
# Allowed GPU types of a restricted project (None: one single cluster), with odds.
RESTRICTIONS = [(("A100", "L40S"), 0.45), (("A100",), 0.2), (("L40S",), 0.15),
                (("H100",), 0.1), (None, 0.1)]

JOB_GPUS = [1, 2, 4, 8, 16, 32, 64]
JOB_GPUS_ODDS = [0.05, 0.05, 0.10, 0.50, 0.12, 0.10, 0.08]
RESERVATION_NODES = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32]
RESERVATION_NODES_ODDS = [0.10, 0.16, 0.06, 0.18, 0.08, 0.17, 0.07, 0.10, 0.04, 0.04]
RESERVATION_HOURS = [24, 36, 48, 60, 72, 96, 120, 144, 168]


def suffixed(name: str, copy: int) -> str:
    """Return ``name`` for the first copy of the institute, ``name-k`` for copy k > 1."""
    return name if copy == 1 else f"{name}-{copy}"


def iso(hours: float) -> str:
    """Format a time given in hours since quarter start as ISO 8601 (no zone, UTC)."""
    return (QUARTER_START + timedelta(hours=hours)).isoformat()


def write_csv(frame: pd.DataFrame, path: Path) -> None:
    """Write ``frame`` as UTF-8 CSV with newline line endings and no index column."""
    frame.to_csv(path, index=False, lineterminator="\n", encoding="utf-8")


def odds(values: list[float]) -> np.ndarray:
    """Normalize ``values`` to probabilities."""
    array = np.asarray(values, dtype=float)
    return array / array.sum()


def make_scenario_toml(scale: int, factor: int = 1) -> str:
    """Return the text of ``scenario.toml``."""
    name = "sample" if scale == 1 else f"sample-x{scale}"
    name += "" if factor == 1 else f"-r{factor}"
    rates = "".join(f"{gpu} = {rate}\n" for gpu, rate in GPU_RATES.items())
    return (
        f'name = "{name}"\n'
        f"quarter_start = {QUARTER_START.date().isoformat()}\n"
        f"quarter_end = {QUARTER_END.date().isoformat()}\n"
        f"as_of = {AS_OF.date().isoformat()}\n"
        f"period_hours = {PERIOD_HOURS}\n"
        f"lookback_days = {LOOKBACK_DAYS}\n"
        "\n[gpu_rates]\n"
        f"{rates}"
    )


def make_clusters(scale: int) -> pd.DataFrame:
    """Return the clusters, ``scale`` copies of the set, with helper columns.

    Helper columns (not written): ``copy``, ``gpus`` (total) and ``rate`` (NGH per GPU-hour).
    """
    rows = [
        {"cluster": suffixed(name, copy), "gpu_type": gpu, "nodes": nodes,
         "gpus_per_node": GPUS_PER_NODE, "copy": copy}
        for copy in range(1, scale + 1)
        for name, gpu, nodes in CLUSTERS
    ]
    clusters = pd.DataFrame(rows)
    clusters["gpus"] = clusters["nodes"] * clusters["gpus_per_node"]
    clusters["rate"] = clusters["gpu_type"].map(GPU_RATES)
    return clusters


def make_org(rng: np.random.Generator, scale: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return the org tree (``id,parent,weight``) and its projects (leaves).

    The projects frame has ``project, team, area, copy, weight``, in tree order.
    """
    def weight() -> float:
        return float(rng.choice([1.0, 2.0, 0.5], p=[0.76, 0.12, 0.12]))

    org, projects = [], []
    for copy in range(1, scale + 1):
        for area_name, area_weight, teams in AREAS:
            area = suffixed(area_name, copy)
            org.append({"id": area, "parent": "", "weight": area_weight})
            for team_name in teams:
                team = suffixed(team_name, copy)
                org.append({"id": team, "parent": area, "weight": weight()})
                count = int(rng.integers(3, 8))
                picked = np.sort(rng.choice(len(PROJECTS[team_name]), count, replace=False))
                for index in picked:
                    project = suffixed(f"{team_name}-{PROJECTS[team_name][index]}", copy)
                    project_weight = weight()
                    org.append({"id": project, "parent": team, "weight": project_weight})
                    projects.append({"project": project, "team": team, "area": area_name,
                                     "copy": copy, "weight": project_weight})
    return pd.DataFrame(org), pd.DataFrame(projects)


def restricted_projects(rng: np.random.Generator, projects: pd.DataFrame) -> np.ndarray:
    """Draw which projects may use only some clusters: ``RESTRICTED_SHARE`` of each copy."""
    restricted = np.zeros(len(projects), dtype=bool)
    for mine in projects.groupby("copy").indices.values():
        chance = odds(projects["area"].iloc[mine].map(RESTRICTED_ODDS).fillna(1.0))
        count = round(RESTRICTED_SHARE * len(mine))
        restricted[rng.choice(mine, count, replace=False, p=chance)] = True
    return restricted


def allowed_clusters(rng: np.random.Generator, home: pd.DataFrame) -> tuple:
    """Draw a restricted project's allowed clusters among its home clusters."""
    kinds = [kind for kind, _ in RESTRICTIONS]
    kind = kinds[rng.choice(len(kinds), p=odds([p for _, p in RESTRICTIONS]))]
    if kind is None:
        return (str(rng.choice(home["cluster"].to_numpy())),)
    return tuple(home.loc[home["gpu_type"].isin(kind), "cluster"])


def water_fill(weights: np.ndarray, caps: np.ndarray, total: float) -> np.ndarray:
    """Split ``total`` in proportion to ``weights``, no share above its cap (bisection)."""
    low, high = 0.0, total / weights.sum() * 1e3
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if np.minimum(weights * mid, caps).sum() < total else (low, mid)
    return np.minimum(weights * low, caps)


def make_budgets(
    rng: np.random.Generator, projects: pd.DataFrame, clusters: pd.DataFrame
) -> pd.DataFrame:
    """Add ``allowed``, ``home`` (clusters the project actually runs on) and ``budget``.

    Budgets are lognormal, larger in heavier areas, scaled so they add up to
    ``BUDGET_SHARE`` of the quarter's capacity (per copy); a restricted project gets at
    most 5-8 % of its allowed clusters' capacity.
    """
    projects = projects.copy()
    area_weight = {name: weight for name, weight, _ in AREAS}
    capacity = clusters.set_index("cluster")["gpus"] * clusters.set_index("cluster")["rate"]
    capacity *= QUARTER_H
    allowed, home, caps = [], [], []
    for row, restricted in zip(projects.itertuples(), restricted_projects(rng, projects),
                               strict=True):
        home_clusters = clusters[clusters["copy"] == row.copy]
        chosen = allowed_clusters(rng, home_clusters) if restricted else ()
        allowed.append(chosen)
        home.append(chosen or tuple(home_clusters["cluster"]))
        share = rng.uniform(0.05, 0.08)  # a restricted project's most, of its clusters
        caps.append(share * capacity[list(chosen)].sum() if chosen else np.inf)
    projects["allowed"], projects["home"] = allowed, home
    raw = rng.lognormal(0.0, 0.9, len(projects))
    raw *= projects["area"].map(area_weight).to_numpy() ** 0.7
    caps, budgets = np.asarray(caps), np.zeros(len(projects))
    for copy, mine in projects.groupby("copy").indices.items():  # each copy on its own
        total = BUDGET_SHARE * capacity[clusters["copy"].to_numpy() == copy].sum()
        budgets[mine] = water_fill(raw[mine], caps[mine], total)
    projects["budget"] = np.rint(budgets).astype(np.int64)
    return projects


def budgets_table(projects: pd.DataFrame) -> pd.DataFrame:
    """Return ``budgets.csv``: project, gpu_hours, clusters (``;``-separated or empty)."""
    return pd.DataFrame({
        "project": projects["project"],
        "gpu_hours": projects["budget"],
        "clusters": [";".join(chosen) for chosen in projects["allowed"]],
    })


def pick_clusters(
    rng: np.random.Generator, home: tuple, clusters: pd.DataFrame, low: int, high: int
) -> list[str]:
    """Pick ``low``..``high`` of the ``home`` clusters, favouring big ones (by sqrt of GPUs)."""
    gpus = clusters.set_index("cluster").loc[list(home), "gpus"].to_numpy()
    count = min(len(home), int(rng.integers(low, high + 1)))
    picked = rng.choice(len(home), count, replace=False, p=odds(np.sqrt(gpus)))
    return [home[i] for i in sorted(picked)]


def fit_matrix(
    support: np.ndarray, rows: np.ndarray, cols: np.ndarray, caps: np.ndarray
) -> np.ndarray:
    """Scale ``support`` (projects × clusters) to the row and column sums (Sinkhorn).

    Column sums come out (nearly) exact, row sums close to ``rows`` (they carry the
    projects' noise anyway) and never above ``caps``: after the plain fit, rows over
    their cap are cut back and the columns refilled from the others, until it settles.
    """
    matrix = support.astype(float)

    def scale_rows(target: np.ndarray, only_down: bool) -> None:
        sums = matrix.sum(axis=1)
        factor = np.divide(target, sums, out=np.zeros_like(target), where=sums > 0)
        matrix[:] *= (np.minimum(factor, 1.0) if only_down else factor)[:, None]

    def scale_cols() -> None:
        sums = matrix.sum(axis=0)
        matrix[:] *= np.divide(cols, sums, out=np.zeros_like(cols), where=sums > 0)[None, :]

    for _ in range(300):
        scale_rows(rows, only_down=False)
        scale_cols()
    for _ in range(300):
        scale_rows(caps, only_down=True)
        scale_cols()
    scale_rows(caps, only_down=True)
    return matrix


def ensure_every_cluster(
    rng: np.random.Generator, support: np.ndarray, projects: pd.DataFrame,
    clusters: pd.DataFrame, active: np.ndarray, minimum: int,
) -> None:
    """Add projects to clusters with fewer than ``minimum`` of them in ``support`` (in place)."""
    for c, name in enumerate(clusters["cluster"]):
        missing = minimum - int((support[:, c] > 0).sum())
        if missing <= 0:
            continue
        candidates = [p for p, home in enumerate(projects["home"])
                      if active[p] and name in home and support[p, c] == 0]
        for p in rng.choice(candidates, min(missing, len(candidates)), replace=False):
            support[p, c] = rng.uniform(0.5, 1.5)


def sample_job(rng: np.random.Generator, max_gpus: int) -> tuple[int, int]:
    """Draw one job: (GPUs, duration in half-hours), 1..``max_gpus`` GPUs, 0.5 h to 3 days."""
    sizes = [g for g in JOB_GPUS if g <= max_gpus]
    gpus = int(rng.choice(sizes, p=odds(JOB_GPUS_ODDS[: len(sizes)])))
    if gpus >= 16:  # multi-node training: one to three days
        hours = rng.uniform(24, 72)
    elif rng.random() < 0.08:  # debugging, evals
        hours = rng.uniform(0.5, 6)
    else:
        hours = rng.uniform(12, 72)
    return gpus, max(1, round(hours * 2))


def schedule_fifo(jobs: list[tuple[int, int, int, int]], capacity: int) -> list[tuple]:
    """Start ``jobs`` (arrival, tiebreak, gpus, duration; half-hours) first come first served.

    A job starts as soon as it has arrived, every earlier job has started and enough
    GPUs are free, so the cluster is never over ``capacity``. Returns (start, job).
    """
    running: list[tuple[int, int]] = []  # (end, gpus)
    free, now, started = capacity, 0, []
    for job in sorted(jobs):
        arrival, _, gpus, duration = job
        now = max(now, arrival)
        while free < gpus:
            end, released = heapq.heappop(running)
            now, free = max(now, end), free + released
        heapq.heappush(running, (now + duration, gpus))
        free -= gpus
        started.append((now, job))
    return started


def usage_targets(
    rng: np.random.Generator, projects: pd.DataFrame, clusters: pd.DataFrame
) -> tuple[np.ndarray, np.ndarray]:
    """Draw how busy each cluster was before ``as_of`` and who used it.

    Returns the busy share of each cluster (86-94 %) and the GPU-hours each project ran
    on each cluster (projects × clusters). A project's share follows its budget times a
    "heat" (lognormal, plus some clearly hot, cold or not yet started projects), at most
    80 % of its budget.
    """
    n = len(projects)
    heat = rng.lognormal(0.0, 0.3, n)
    kind = rng.choice(4, n, p=[0.78, 0.10, 0.09, 0.03])  # normal, hot, cold, not started
    heat *= np.choose(kind, [1.0, 1.8, 0.35, 0.0])
    rates = clusters["rate"].to_numpy()
    busy = rng.uniform(*UTILIZATION, len(clusters))
    cols = busy * clusters["gpus"].to_numpy() * PAST_H * rates  # NGH
    budget = projects["budget"].to_numpy()
    rows = np.zeros(n)
    for copy, mine in projects.groupby("copy").indices.items():  # no one over budget yet
        total = cols[clusters["copy"].to_numpy() == copy].sum()
        rows[mine] = water_fill(budget[mine] * heat[mine], 0.8 * budget[mine], total)
    support = np.zeros((n, len(clusters)))
    index = {name: c for c, name in enumerate(clusters["cluster"])}
    for p, home in enumerate(projects["home"]):
        for name in pick_clusters(rng, home, clusters, 2, 4):
            support[p, index[name]] = rng.uniform(0.5, 1.5)
    ensure_every_cluster(rng, support, projects, clusters, rows > 0, 3)
    ngh = fit_matrix(support * (rows > 0)[:, None], rows, cols, 0.8 * budget)
    return busy, ngh / rates[None, :]


def cluster_jobs(
    rng: np.random.Generator, cluster: tuple, projects: pd.Series, targets: np.ndarray,
    busy: float,
) -> list[tuple[int, str, str, int, int]]:
    """Run one cluster's jobs before ``as_of``: (start, cluster, project, GPUs, end).

    Each project submits jobs worth its ``targets`` GPU-hours (plus 5 %) at random
    times (some queued at quarter start); they run first come first served, a job
    still running at ``as_of`` is cut there, and random jobs are then dropped until
    the cluster is ``busy`` (times in half-hours from quarter start).
    """
    horizon = PAST_H * 2
    max_gpus = min(64, max(8, cluster.gpus // 8))
    jobs, owner = [], []
    for project, target in zip(projects, targets, strict=True):
        goal, done = target * 2 / 0.95, 0.0  # GPU-half-hours
        while True:
            gpus, duration = sample_job(rng, max_gpus)
            if done + gpus * duration / 2 > goal:  # overshoot no more than undershoot
                break
            arrival = max(0, int(rng.integers(-96, horizon - duration // 2)))
            jobs.append((arrival, len(jobs), gpus, duration))
            owner.append(project)
            done += gpus * duration
    ran = []
    for start, (_, key, gpus, duration) in schedule_fifo(jobs, cluster.gpus):
        end = min(start + duration, horizon)
        if end - start >= 1:
            ran.append((start, cluster.cluster, owner[key], gpus, end))
    excess = sum(r[3] * (r[4] - r[0]) for r in ran) - busy * cluster.gpus * horizon
    dropped = set()
    for k in rng.permutation(len(ran)):
        if excess <= 0:
            break
        dropped.add(int(k))
        excess -= ran[k][3] * (ran[k][4] - ran[k][0])
    return [r for k, r in enumerate(ran) if k not in dropped]


def make_usage(
    rng: np.random.Generator, projects: pd.DataFrame, clusters: pd.DataFrame
) -> pd.DataFrame:
    """Return ``usage.csv``: the jobs that ran from quarter start to ``as_of``.

    Job ids follow start time. Three rows are repeated later in the file
    (re-ingested accounting).
    """
    busy, targets = usage_targets(rng, projects, clusters)
    rows = []
    for c, cluster in enumerate(clusters.itertuples()):
        rows += cluster_jobs(rng, cluster, projects["project"], targets[:, c], busy[c])
    rows.sort()
    width = max(6, len(str(len(rows))))
    usage = pd.DataFrame({
        "job_id": [f"j{i + 1:0{width}d}" for i in range(len(rows))],
        "project": [r[2] for r in rows],
        "cluster": [r[1] for r in rows],
        "gpus": [r[3] for r in rows],
        "start": [iso(r[0] / 2) for r in rows],
        "end": [iso(r[4] / 2) for r in rows],
    })
    return add_reingested(rng, usage, 3)


def add_reingested(rng: np.random.Generator, usage: pd.DataFrame, count: int) -> pd.DataFrame:
    """Repeat ``count`` rows of ``usage`` identically at later places in the file."""
    records = usage.to_dict("records")
    for source in sorted(rng.choice(int(len(records) * 0.8), count, replace=False), reverse=True):
        at = int(rng.integers(source + 1, len(records) + 1))
        records.insert(at, dict(records[source]))
    return pd.DataFrame(records, columns=usage.columns)


def demand_segments(rng: np.random.Generator) -> list[tuple[int, int, float]]:
    """Draw one (project, cluster) demand profile: (start, end, relative level) in hours.

    Hours count from ``as_of``; ranges last 1 to 21 days, start and end on day or hour
    boundaries, with gaps between them, all inside [as_of, quarter end].
    """
    segments = []
    start = 0 if rng.random() < 0.5 else int(rng.integers(1, 11)) * 24
    while FUTURE_H - start >= 24:
        days = int(rng.integers(1, 22))
        length = days * 24 + (int(rng.integers(1, 24)) if days < 21 and rng.random() < 0.2 else 0)
        end = min(start + length, FUTURE_H)
        segments.append((start, end, float(rng.lognormal(0.0, 0.5))))
        start = end
        if rng.random() < 0.5:
            start += int(rng.integers(1, 8)) * 24 + (int(rng.integers(1, 24))
                                                     if rng.random() < 0.2 else 0)
    return segments


def fit_gpus(raw: np.ndarray, hours: np.ndarray, goal: float, cap: int) -> np.ndarray:
    """Scale the rows' ``raw`` levels to GPU counts whose GPU-hours add up to ``goal``.

    A row gets min(``cap``, max(1, round(raw × s))) GPUs, s found by bisection; rows
    cut at ``cap`` leave their excess to the others (water-filling).
    """
    def total(scale: float) -> float:
        return float((np.clip(np.rint(raw * scale), 1, cap) * hours).sum())

    low, high = 0.0, 1.0
    while total(high) < goal and high < 1e15:
        high *= 2
    for _ in range(80):
        mid = (low + high) / 2
        low, high = (mid, high) if total(mid) < goal else (low, mid)
    return np.clip(np.rint(raw * high), 1, cap).astype(np.int64)


def cluster_demand(
    rng: np.random.Generator, cluster: tuple, members: list[int], candidates: list[int],
    want: np.ndarray,
) -> list[tuple[int, int, int, int]]:
    """Draw one cluster's demand rows: (project index, start, end, GPUs), hours from as_of.

    The rows add up to ``DEMAND_RATIO`` times the cluster's capacity over the horizon,
    shared among ``members`` in proportion to ``want``; more ``candidates`` join while
    the members' ranges could not hold 1.5 times that even at the whole cluster.
    """
    goal = rng.uniform(*DEMAND_RATIO) * cluster.gpus * FUTURE_H
    profiles = {p: demand_segments(rng) for p in members}
    spare = [p for p in rng.permutation(candidates) if p not in profiles]

    def room() -> int:
        return sum((e - s) * cluster.gpus for segs in profiles.values() for s, e, _ in segs)

    while room() < 1.5 * goal and spare:
        profiles[int(spare.pop())] = demand_segments(rng)
    keys = [(p, s, e) for p in sorted(profiles) for s, e, _ in profiles[p]]
    raw = np.array([want[p] * level / sum((e - s) * lv for s, e, lv in profiles[p])
                    for p in sorted(profiles) for _, _, level in profiles[p]])
    hours = np.array([e - s for _, s, e in keys], dtype=float)
    gpus = fit_gpus(raw, hours, goal, cluster.gpus)
    return [(p, s, e, int(g)) for (p, s, e), g in zip(keys, gpus, strict=True)]


def make_demand(
    rng: np.random.Generator, projects: pd.DataFrame, clusters: pd.DataFrame
) -> pd.DataFrame:
    """Return ``demand.csv``: elastic demand from ``as_of`` to quarter end.

    About 10 % of the projects are idle; the others want GPUs on 1 to 3 of their
    clusters, in proportion to budget times noise (a few greedy ones times 6). Each
    cluster's total is ``DEMAND_RATIO`` times its capacity over the horizon; no range
    asks for more GPUs than the cluster has.
    """
    n = len(projects)
    active = rng.random(n) >= 0.1
    greedy = np.zeros(n, dtype=bool)
    greedy[rng.choice(np.flatnonzero(active), max(2, round(0.05 * n)), replace=False)] = True
    want = projects["budget"].to_numpy() * rng.lognormal(0.0, 0.5, n) * np.where(greedy, 6, 1)
    support = np.zeros((n, len(clusters)))
    index = {name: c for c, name in enumerate(clusters["cluster"])}
    for p, home in enumerate(projects["home"]):
        if active[p]:
            for name in pick_clusters(rng, home, clusters, 1, 3):
                support[p, index[name]] = 1.0
    rows = []
    for c, cluster in enumerate(clusters.itertuples()):
        candidates = [p for p, home in enumerate(projects["home"])  # at most 3 clusters each
                      if active[p] and cluster.cluster in home and support[p].sum() < 3]
        members = [int(p) for p in np.flatnonzero(support[:, c])]
        for p, start, end, gpus in cluster_demand(rng, cluster, members, candidates, want):
            rows.append((projects["project"].iat[p], cluster.cluster, start, end, gpus))
            support[p, c] = 1.0
    rows.sort(key=lambda r: (r[2], r[1], r[0], r[3]))
    return pd.DataFrame({
        "project": [r[0] for r in rows],
        "cluster": [r[1] for r in rows],
        "start": [iso(PAST_H + r[2]) for r in rows],
        "end": [iso(PAST_H + r[3]) for r in rows],
        "gpus": [r[4] for r in rows],
    })


def reservation_project(
    rng: np.random.Generator, projects: pd.DataFrame, cluster: str, copy: int
) -> str:
    """Pick a project of copy ``copy`` allowed on ``cluster``, favouring big budgets."""
    fits = projects[(projects["copy"] == copy)
                    & projects["home"].map(lambda home: cluster in home)]
    return str(rng.choice(fits["project"].to_numpy(), p=odds(fits["budget"].to_numpy())))


def feasible_request(rng: np.random.Generator, cluster: pd.Series) -> dict:
    """Draw a placeable request on ``cluster``: nodes, hours, window (hours from as_of).

    The window starts on a day boundary and holds the length rounded up to whole
    periods, so it fits on the planning grid; it is at most 3 times the length.
    """
    sizes = [n for n in RESERVATION_NODES if n <= cluster["nodes"]]
    nodes = int(rng.choice(sizes, p=odds(RESERVATION_NODES_ODDS[: len(sizes)])))
    if rng.random() < 0.25:  # window exactly the length
        hours = int(rng.choice([h for h in RESERVATION_HOURS if h % PERIOD_HOURS == 0]))
        window = hours
    else:
        hours = int(rng.choice(RESERVATION_HOURS))
        periods = math.ceil(hours / PERIOD_HOURS) * PERIOD_HOURS
        window = max(periods, math.ceil(hours * rng.uniform(1.0, 3.0)))
    start = int(rng.integers(0, (FUTURE_H - window) // 24 + 1)) * 24
    return {"nodes": nodes, "hours": hours, "earliest": start, "deadline": start + window}


def impossible_requests(rng: np.random.Generator, home: pd.DataFrame) -> list[tuple]:
    """Draw the five deliberately impossible requests of one copy: (cluster row, request)."""
    small = home[home["nodes"] < 40]
    out = []
    for _ in range(2):  # window shorter than the job
        cluster = home.iloc[int(rng.integers(len(home)))]
        request = feasible_request(rng, cluster)
        request["hours"] = int(rng.choice([72, 96, 120, 144]))
        request["earliest"] = min(request["earliest"], FUTURE_H - request["hours"] // 24 * 24)
        request["deadline"] = request["earliest"] + request["hours"] - int(rng.choice([12, 24, 36]))
        out.append((cluster, request))
    for c in rng.choice(len(small), 2, replace=False):  # more nodes than the cluster has
        cluster = small.iloc[int(c)]
        request = feasible_request(rng, cluster)
        request["nodes"] = 40
        out.append((cluster, request))
    cluster = home.iloc[int(rng.integers(len(home)))]  # too late to end in the quarter
    hours = int(rng.choice([96, 120]))
    earliest = FUTURE_H - 48
    out.append((cluster, {"nodes": int(rng.choice([2, 4])), "hours": hours,
                          "earliest": earliest, "deadline": earliest + 2 * hours}))
    return out


def make_reservations(
    rng: np.random.Generator, projects: pd.DataFrame, clusters: pd.DataFrame, factor: int = 1
) -> pd.DataFrame:
    """Return ``reservations.csv``: 55-65 gang requests a copy, five of them impossible.

    ``factor`` multiplies the placeable ones (the draws for ``factor`` 1 are unchanged).

    Clusters are drawn by GPU count (H100s twice as likely); two requests a copy have
    a deadline after quarter end but can still finish in the quarter.
    """
    picked = []
    for copy in range(1, int(clusters["copy"].max()) + 1):
        home = clusters[clusters["copy"] == copy]
        chance = odds(home["gpus"] * np.where(home["gpu_type"] == "H100", 2.0, 1.0))
        count = int(rng.integers(RESERVATIONS_PER_COPY[0], RESERVATIONS_PER_COPY[1] + 1))
        requests = impossible_requests(rng, home)
        for late in range(count * factor - len(requests)):
            cluster = home.iloc[int(rng.choice(len(home), p=chance))]
            request = feasible_request(rng, cluster)
            if late < 2:  # deadline after quarter end, still fits before it
                request["earliest"] = FUTURE_H - math.ceil(request["hours"] / 24) * 24 - 24
                request["deadline"] = request["earliest"] + 3 * request["hours"]
            requests.append((cluster, request))
        for cluster, request in requests:
            project = reservation_project(rng, projects, cluster["cluster"], copy)
            picked.append((project, cluster["cluster"], request))
    order = rng.permutation(len(picked))
    width = max(3, len(str(len(picked))))
    return pd.DataFrame([
        {"request_id": f"r{i + 1:0{width}d}", "project": picked[k][0],
         "cluster": picked[k][1], "nodes": picked[k][2]["nodes"], "hours": picked[k][2]["hours"],
         "earliest_start": iso(PAST_H + picked[k][2]["earliest"]),
         "deadline": iso(PAST_H + picked[k][2]["deadline"])}
        for i, k in enumerate(order)
    ])


def summarize(tables: dict[str, pd.DataFrame], projects: pd.DataFrame) -> str:
    """Return a short text summary of the generated scenario."""
    clusters, demand, usage = tables["clusters"], tables["demand"], tables["usage"]
    reservations = tables["reservations"]
    gpus = clusters.set_index("cluster")["nodes"] * clusters.set_index("cluster")["gpus_per_node"]
    rate = clusters.set_index("cluster")["gpu_type"].map(GPU_RATES)
    as_of, end = pd.Timestamp(AS_OF), pd.Timestamp(QUARTER_END)

    def gpu_hours(frame: pd.DataFrame, low: pd.Timestamp, high: pd.Timestamp) -> pd.Series:
        start = pd.to_datetime(frame["start"]).clip(lower=low)
        stop = pd.to_datetime(frame["end"]).clip(upper=high)
        hours = ((stop - start).dt.total_seconds() / 3600).clip(lower=0)
        return (frame["gpus"] * hours).groupby(frame["cluster"]).sum()

    jobs = usage.drop_duplicates()
    busy = gpu_hours(jobs, pd.Timestamp(QUARTER_START), as_of) / (gpus * PAST_H)
    ratio = gpu_hours(demand, as_of, end) / (gpus * FUTURE_H)
    capacity = float((gpus * rate).sum() * QUARTER_H)
    budget = float(tables["budgets"]["gpu_hours"].sum())
    hours = (pd.to_datetime(demand["end"]) - pd.to_datetime(demand["start"])).dt.total_seconds()
    demand_ngh = demand["gpus"] * hours / 3600 * demand["cluster"].map(rate)
    per_project = demand_ngh.groupby(demand["project"]).sum()
    budgets = projects.set_index("project")["budget"]
    over = int((per_project > 4 * budgets.reindex(per_project.index)).sum())
    idle = len(projects) - demand["project"].nunique()
    restricted = int((tables["budgets"]["clusters"] != "").sum())
    org = tables["org"]
    lines = [
        f"projects {len(projects)} (areas {int((org['parent'] == '').sum())}, teams "
        f"{len(org) - len(projects) - int((org['parent'] == '').sum())}; "
        f"{restricted} restricted to some clusters, {idle} with no demand, "
        f"{over} demanding over 4x their budget)",
        f"clusters {len(clusters)}, GPUs {int(gpus.sum())}, quarter capacity {capacity:,.0f} NGH",
        f"budgets {budget:,.0f} NGH = {budget / capacity:.3f} of capacity",
        f"usage rows {len(usage)} ({len(jobs)} jobs, {len(usage) - len(jobs)} re-ingested)",
        f"demand rows {len(demand)}, reservations {len(reservations)}",
        "cluster      GPUs  busy-before-as_of  demand/supply-after-as_of",
    ]
    lines += [f"{name:<12} {int(gpus[name]):>4}  {busy.get(name, 0.0):>17.3f}  "
              f"{ratio.get(name, 0.0):>25.2f}" for name in clusters["cluster"]]
    return "\n".join(lines)


def generate(scale: int, seed: int, out: Path, reservations_factor: int = 1) -> str:
    """Write the scenario folder ``out`` and return its summary."""
    rng_org, rng_budget, rng_usage, rng_demand, rng_resv = np.random.default_rng(seed).spawn(5)
    clusters = make_clusters(scale)
    org, projects = make_org(rng_org, scale)
    projects = make_budgets(rng_budget, projects, clusters)
    tables = {
        "clusters": clusters[["cluster", "gpu_type", "nodes", "gpus_per_node"]],
        "org": org,
        "budgets": budgets_table(projects),
        "usage": make_usage(rng_usage, projects, clusters),
        "demand": make_demand(rng_demand, projects, clusters),
        "reservations": make_reservations(rng_resv, projects, clusters, reservations_factor),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "scenario.toml").write_bytes(
        make_scenario_toml(scale, reservations_factor).encode("utf-8"))
    for name, table in tables.items():
        write_csv(table, out / f"{name}.csv")
    return summarize(tables, projects)


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and generate the scenario."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=int, default=1, help="copies of the institute (>= 1)")
    parser.add_argument("--seed", type=int, default=2026, help="random seed")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "sample",
                        help="scenario folder to write (default: data/sample)")
    parser.add_argument("--reservations-factor", type=int, default=1,
                        help="placeable reservation requests x F a copy (>= 1)")
    args = parser.parse_args(argv)
    if args.scale < 1:
        parser.error("--scale must be at least 1")
    if args.reservations_factor < 1:
        parser.error("--reservations-factor must be at least 1")
    began = time.perf_counter()
    summary = generate(args.scale, args.seed, args.out, args.reservations_factor)
    print(f"wrote {args.out} (scale {args.scale}, seed {args.seed}) "
          f"in {time.perf_counter() - began:.1f} s")
    print(summary)


if __name__ == "__main__":
    main()
