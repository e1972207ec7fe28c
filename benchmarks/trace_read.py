"""How fast a trace is read: 80,000 synthetic rows, and the converted Philly quarter.

    PYTHONPATH=. .venv/bin/python benchmarks/trace_read.py [--runs 5]

Prints the median wall and CPU seconds of ``read_trace`` and writes them to
``benchmarks/results/trace-read.json`` (``planner.results``).
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
from planner.results import load_now, table_markdown, write_result
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
    load = load_now()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = write_trace(_synthetic(80_000), Path(tmp) / "big.csv")
        wall, cpu = _time(path, tiny(), args.runs)
        rows.append({"trace": "80,000 synthetic rows", "cpu_s": round(cpu, 2),
                     "wall_s": round(wall, 2), "runs": args.runs})
        if PHILLY_CSV.is_file():
            scenario = load_scenario(PHILLY_SCENARIO)
            frame = convert_philly(PHILLY_CSV, scenario)
            path = write_trace(frame, Path(tmp) / "philly.csv")
            wall, cpu = _time(path, scenario, args.runs)
            rows.append({"trace": f"the Philly quarter ({len(frame):,} rows)",
                         "cpu_s": round(cpu, 2), "wall_s": round(wall, 2), "runs": args.runs})
    columns = [{"key": "trace", "label": "trace"},
               {"key": "cpu_s", "label": "CPU s (median)", "unit": "s", "better": "lower"},
               {"key": "wall_s", "label": "wall s (median)", "unit": "s", "better": "lower"},
               {"key": "runs", "label": "runs"}]
    out = write_result("trace-read", title="Reading a trace", columns=columns, rows=rows,
                       load_before=load,
                       what="`planner.simulate.trace.read_trace` on a trace file: parsing, "
                            "checking every row against the scenario, sorting. Medians of "
                            "the runs in one process.")
    print(table_markdown(columns, rows), f"wrote {out}", sep="\n")

if __name__ == "__main__":
    main()
