"""How fast a trace is read: 80,000 synthetic rows, and the converted Philly quarter.

    PYTHONPATH=. .venv/bin/python benchmarks/trace_read.py [--runs 5]

Prints the median wall and CPU seconds of ``read_trace`` (the README quotes them).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from planner.inputs.load import load_scenario
from planner.simulate.philly import PHILLY_CSV, PHILLY_SCENARIO, convert_philly
from planner.simulate.trace import read_trace, write_trace
from tests.test_trace import tiny


def _synthetic(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    return pd.DataFrame({
        "job_id": [f"j{i:05d}" for i in range(n)],
        "project": rng.choice(["p1", "=SUM(A1)"], n),
        "cluster": "c1",
        "submit": pd.Timestamp("2026-10-01", tz="UTC")
        + pd.to_timedelta(rng.integers(0, 91 * 86400, n), unit="s"),
        "gpus": rng.integers(1, 17, n),
        "duration_hours": rng.random(n) * 10 + 0.01,
        "min_runtime_hours": rng.random(n) * 8,
        "resumable": rng.random(n) < 0.5,
    })


def _time(path: Path, scenario, runs: int) -> tuple[float, float]:
    wall, cpu = [], []
    for _ in range(runs):
        w, c = time.perf_counter(), time.process_time()
        read_trace(path, scenario)
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return statistics.median(wall), statistics.median(cpu)


def main() -> None:
    """Time the reads and print the medians."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = write_trace(_synthetic(80_000), Path(tmp) / "big.csv")
        wall, cpu = _time(path, tiny(), args.runs)
        print(f"80,000 synthetic rows: median {wall:.2f} s wall, {cpu:.2f} s CPU "
              f"({args.runs} runs)")
        if PHILLY_CSV.is_file():
            scenario = load_scenario(PHILLY_SCENARIO)
            path = write_trace(convert_philly(PHILLY_CSV, scenario), Path(tmp) / "philly.csv")
            wall, cpu = _time(path, scenario, args.runs)
            print(f"Philly quarter (82,247 rows): median {wall:.2f} s wall, {cpu:.2f} s CPU "
                  f"({args.runs} runs)")


if __name__ == "__main__":
    main()
