"""Generate ``data/philly``: the scenario the Philly trace is replayed on (seeded, deterministic).

The quarter is Q4 2026 (2026-10-01 to 2027-01-01), planned from its first day
(``as_of`` = quarter start): no usage, no demand, no reservation requests — the
trace (``planner trace philly``) brings the work.

- **Org**: the sample's four areas (foundation-models 3, multimodal 2, science 1.5,
  infrastructure 1) with 15 teams, one per Philly virtual cluster, and 3 to 5
  projects a team; team and project weights mostly 1, some 2 or 0.5.
- **Clusters**: two H100 clusters of 8-GPU nodes. Their size comes from the trace:
  the offered load of the converted Philly trace over the quarter (GPU-hours each job
  would run inside the quarter if started at submit, ÷ the quarter's hours) divided
  by :data:`LOAD_RATIO`, rounded to whole nodes; the larger cluster gets one node
  more than half. Each is far above Philly's largest job (128 GPUs = 16 nodes). One
  GPU type, so an NGH is a GPU-hour and a job's work does not depend on where it runs.
- **Budgets** (NGH): leadership's strategic split, not the trace's demand: each
  project's share of the whole (the product of normalised weights from its area
  down) times the quarter's capacity (:data:`BUDGET_SHARE` = 1: budgets add up to
  what the clusters deliver at full occupancy), rounded to whole NGH. Every project
  may use both clusters: with one GPU type there is no reason to keep it off one, and
  each cluster then gets the same share of the load (the converter draws a job's
  cluster in proportion to GPUs).

Usage: ``python data/philly_scenario.py [--philly PHILLY.csv] [--seed S] [--out DIR]``
(the Philly extract is read only for its load; without it the script stops).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from planner.inputs.org import OrgTree
from planner.simulate.philly import PHILLY_CSV, quarter_submits, read_philly, strategic_shares
from planner.simulate.trace import offered_gpu_hours

QUARTER_START = pd.Timestamp("2026-10-01", tz="UTC")
QUARTER_END = pd.Timestamp("2027-01-01", tz="UTC")
QUARTER_H = (QUARTER_END - QUARTER_START).total_seconds() / 3600  # 2208
GPUS_PER_NODE = 8
GPU_TYPE = "H100"
LOAD_RATIO = 1.45  # mean offered load ÷ capacity
BUDGET_SHARE = 1.0  # sum of budgets ÷ the quarter's capacity (NGH)
CLUSTER_NAMES = ("h100-a", "h100-b")

# (area, weight, teams)
AREAS = [
    ("foundation-models", 3.0, ["pretraining", "post-training", "reasoning", "data-curation",
                                "multilingual"]),
    ("multimodal", 2.0, ["vision", "speech", "video", "robotics"]),
    ("science", 1.5, ["biology", "climate", "materials", "physics"]),
    ("infrastructure", 1.0, ["evals", "systems"]),
]
PROJECTS = {
    "pretraining": ["dense-7b", "dense-70b", "moe-base", "long-context", "code-base"],
    "post-training": ["sft", "rlhf", "reward-models", "safety-tuning", "distillation"],
    "reasoning": ["math", "code-agents", "planning", "theorem-proving", "verifiers"],
    "data-curation": ["web-filtering", "dedup", "synthetic-data", "quality-classifiers",
                      "data-mixtures"],
    "multilingual": ["translation", "low-resource", "cross-lingual-eval", "dialects",
                     "speech-text"],
    "vision": ["segmentation", "detection", "vit-pretrain", "image-gen", "ocr"],
    "speech": ["asr", "tts", "speaker-id", "audio-lm", "diarization"],
    "video": ["video-gen", "video-qa", "captioning", "world-models", "tracking"],
    "robotics": ["manipulation", "navigation", "sim2real", "policy-learning", "grasping"],
    "biology": ["protein-folding", "genomics", "single-cell", "drug-screening",
                "enzyme-design"],
    "climate": ["weather-forecast", "downscaling", "ocean-models", "satellite-imagery",
                "hydrology"],
    "materials": ["crystal-gen", "dft-surrogates", "catalysts", "batteries", "alloys"],
    "physics": ["plasma", "particle-physics", "cosmology", "fluid-dynamics", "optics"],
    "evals": ["benchmarks", "red-teaming", "leaderboards", "human-preference", "robustness"],
    "systems": ["kernels", "compiler", "inference-serving", "checkpointing", "quantization"],
}


def mean_load(jobs: pd.DataFrame) -> float:
    """Mean GPUs the converted Philly trace offers over the quarter (time mapping only)."""
    submit, _ = quarter_submits(jobs["submit"], QUARTER_START, QUARTER_END)
    trace = pd.DataFrame({"submit": submit, "gpus": jobs["gpus"],
                          "duration_hours": jobs["duration_seconds"] / 3600.0})
    return offered_gpu_hours(trace, QUARTER_START, QUARTER_END) / QUARTER_H


def make_clusters(load: float) -> pd.DataFrame:
    """Two H100 clusters with ``load / LOAD_RATIO`` GPUs between them, in whole nodes."""
    nodes = round(load / LOAD_RATIO / GPUS_PER_NODE)
    first = nodes // 2 + 1
    return pd.DataFrame({"cluster": list(CLUSTER_NAMES), "gpu_type": GPU_TYPE,
                         "nodes": [first, nodes - first], "gpus_per_node": GPUS_PER_NODE})


def make_org(rng: np.random.Generator) -> pd.DataFrame:
    """Areas → teams → 3 to 5 projects a team; weights mostly 1, some 2 or 0.5."""
    def weight() -> float:
        return float(rng.choice([1.0, 2.0, 0.5], p=[0.76, 0.12, 0.12]))

    rows = []
    for area, area_weight, team_names in AREAS:
        rows.append((area, "", area_weight))
        for team in team_names:
            rows.append((team, area, weight()))
            count = int(rng.integers(3, 6))
            for index in np.sort(rng.choice(len(PROJECTS[team]), count, replace=False)):
                rows.append((f"{team}-{PROJECTS[team][index]}", team, weight()))
    return pd.DataFrame(rows, columns=["id", "parent", "weight"])


def make_budgets(org: pd.DataFrame, capacity_ngh: float) -> pd.DataFrame:
    """Each project's strategic share of the quarter's capacity, on every cluster."""
    tree = OrgTree.from_frame(org)
    share = strategic_shares(tree)[tree.leaf_nodes]
    budget = np.round(share * capacity_ngh * BUDGET_SHARE)
    return pd.DataFrame({"project": list(tree.leaves), "gpu_hours": budget.astype(np.int64),
                         "clusters": ""})


def scenario_toml() -> str:
    """The text of ``scenario.toml``."""
    return ('name = "philly"\n'
            f"quarter_start = {QUARTER_START.date().isoformat()}\n"
            f"quarter_end = {QUARTER_END.date().isoformat()}\n"
            f"as_of = {QUARTER_START.date().isoformat()}\n"
            "period_hours = 24\n"
            "lookback_days = 7\n"
            "\n[gpu_rates]\n"
            f"{GPU_TYPE} = 1.0\n")


def generate(philly_csv: Path, seed: int, out: Path) -> str:
    """Write the scenario folder ``out``; return a summary of its figures."""
    rng = np.random.default_rng(seed)
    jobs = read_philly(philly_csv)
    load = mean_load(jobs)
    clusters = make_clusters(load)
    sizes = clusters["nodes"] * clusters["gpus_per_node"]
    if int(sizes.min()) < int(jobs["gpus"].max()):
        raise SystemExit(f"a cluster of {int(sizes.min())} GPUs cannot hold Philly's largest "
                         f"job ({int(jobs['gpus'].max())} GPUs)")
    gpus = int(sizes.sum())
    capacity = gpus * QUARTER_H  # NGH: one GPU type at rate 1.0
    org = make_org(rng)
    budgets = make_budgets(org, capacity)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scenario.toml").write_bytes(scenario_toml().encode("utf-8"))
    for name, table in (("clusters", clusters), ("org", org), ("budgets", budgets)):
        table.to_csv(out / f"{name}.csv", index=False, lineterminator="\n", encoding="utf-8")
    teams = org[org["parent"].isin([a for a, _, _ in AREAS])]
    return "\n".join([
        f"offered load {load:,.1f} GPUs on average over the quarter "
        f"({load * QUARTER_H:,.0f} GPU-hours)",
        "clusters " + ", ".join(f"{c} {n} nodes" for c, n in
                                zip(clusters["cluster"], clusters["nodes"], strict=True))
        + f" = {gpus} GPUs; load ÷ capacity = {load / gpus:.3f}",
        f"quarter capacity {capacity:,.0f} NGH; budgets {int(budgets['gpu_hours'].sum()):,} NGH"
        f" = {budgets['gpu_hours'].sum() / capacity:.4f} of it, from "
        f"{int(budgets['gpu_hours'].min()):,} to {int(budgets['gpu_hours'].max()):,}",
        f"org: {len(AREAS)} areas, {len(teams)} teams, {len(budgets)} projects; largest Philly job "
        f"{int(jobs['gpus'].max())} GPUs, smallest cluster {int(sizes.min())}",
    ])


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and generate the scenario."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--philly", type=Path, default=PHILLY_CSV,
                        help=f"the Philly extract (default: {PHILLY_CSV})")
    parser.add_argument("--seed", type=int, default=2026, help="random seed")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "philly",
                        help="scenario folder to write (default: data/philly)")
    args = parser.parse_args(argv)
    if not args.philly.is_file():
        parser.error(f"no Philly extract at {args.philly}; pass --philly PATH")
    summary = generate(args.philly, args.seed, args.out)
    print(f"wrote {args.out} (seed {args.seed})")
    print(summary)


if __name__ == "__main__":
    main()
