"""A seeded synthetic trace on the bundled sample (a check the Philly tuning did not see).

    python benchmarks/synthetic_trace.py [--jobs N] [--seed S] [--load L] --out TRACE.csv

Jobs spread over the sample's clusters in proportion to their GPUs and, on each, over
the projects allowed there (uniformly); 60 % one-GPU jobs, the rest 2–32 GPUs;
log-normal durations scaled so the offered GPU-hours are ``load`` × the quarter's
capacity; submits uniform over the first 97 % of the quarter; 80 % allocated with a
2-hour min runtime, 70 % resumable.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner.fairshare import OrgTree  # noqa: E402
from planner.inputs.load import load_scenario  # noqa: E402
from planner.simulate.trace import write_trace  # noqa: E402


def synthetic(n: int, seed: int, load: float) -> pd.DataFrame:
    """The trace frame (read_trace's columns) on data/sample."""
    sc = load_scenario(ROOT / "data" / "sample")
    rng = np.random.default_rng(seed)
    projects = np.array(OrgTree.from_frame(sc.org).leaves, dtype=object)
    cl = sc.clusters
    cap = (cl.nodes * cl.gpus_per_node).to_numpy()
    hours = (sc.config.quarter_end - sc.config.quarter_start) / pd.Timedelta(hours=1)
    k = rng.choice(len(cl), size=n, p=cap / cap.sum())
    gpus = rng.choice([1, 1, 1, 1, 1, 1, 2, 4, 8, 16, 32], size=n)
    dur = np.minimum(rng.lognormal(0.0, 1.6, size=n), 200)
    dur = dur * load * cap.sum() * hours / (gpus * dur).sum()
    submit = np.sort(rng.uniform(0, hours * 0.97, size=n))
    allowed = {r.project: r.clusters for r in sc.budgets.itertuples()}
    names = cl.cluster.to_numpy()
    on = {c: np.array([p for p in projects if not allowed.get(p) or c in allowed[p]],
                      dtype=object) for c in names}
    project = np.array([on[names[i]][rng.integers(len(on[names[i]]))] for i in k],
                       dtype=object)
    return pd.DataFrame({
        "job_id": [f"s{i:06d}" for i in range(n)], "project": project,
        "cluster": names[k].astype(object),
        "submit": sc.config.quarter_start + pd.to_timedelta(submit, unit="h"),
        "gpus": gpus.astype("int64"), "duration_hours": dur,
        "min_runtime_hours": np.where(rng.random(n) < 0.8, 2.0, 0.0),
        "resumable": rng.random(n) < 0.7})


def main() -> None:
    """Write the trace."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=40000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--load", type=float, default=1.3)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    write_trace(synthetic(args.jobs, args.seed, args.load), Path(args.out))


if __name__ == "__main__":
    main()
