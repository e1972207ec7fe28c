"""Benchmark: a 16-cell sweep of Philly replays on a local Ray against the cells one by one.

    nice python benchmarks/sweep_bench.py [--runs 3] [--cpus 2] [--fraction 4]

The grid: the Philly quarter (``planner trace philly``, on ``data/philly``) split into
``--fraction`` interleaved sub-traces (every 4th job from offsets 0–3: four traces of
about 20,560 jobs each, the whole quarter's rhythm at a quarter of the load) × the four
baseline policies (``priority``, ``fairtree``, ``quota``, ``lookback``) = 16 cells. The
full trace takes about 150 s a replay under load here, 16 of them twice is more than
this shared machine can give a benchmark; the ``planner`` policy is slower still.

Each measurement is the wall time of one fresh ``planner sweep`` process into an empty
folder: ``--serial`` (one by one, in the process) and on a local Ray (``--cpus``; Ray's
start-up and shut-down included). Serial and Ray alternate; the two tables must be the
same bytes. Prints the medians and the load average before each run (``uptime``), and
writes them to ``benchmarks/results/sweep.json`` (``planner.results``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner.results import load_now, table_markdown, write_result  # noqa: E402

WORK = ROOT / "benchmarks" / "out" / "sweep"
PLANNER = Path(sys.executable).with_name("planner")
POLICIES = ("priority", "fairtree", "quota", "lookback")


def philly_trace(work: Path) -> Path:
    """The Philly quarter as a trace on ``data/philly`` (converted once)."""
    path = work / "philly.csv"
    if not path.is_file():
        subprocess.run([str(PLANNER), "trace", "philly", "--out", str(path)], check=True,
                       capture_output=True)
    return path


def sub_traces(trace: Path, fraction: int) -> list[Path]:
    """Every ``fraction``-th job from each offset: ``fraction`` interleaved traces."""
    header, *lines = trace.read_text(encoding="utf-8").splitlines(keepends=True)
    out = []
    for k in range(fraction):
        path = trace.with_name(f"philly-{fraction}-{k}.csv")
        path.write_text(header + "".join(lines[k::fraction]), encoding="utf-8")
        out.append(path)
    return out


def write_spec(work: Path, traces: list[Path]) -> Path:
    """The 16-cell spec (traces × policies)."""
    spec = work / "philly-sweep.toml"
    names = ", ".join(f'"{t.name}"' for t in traces)
    policies = ", ".join(f'"{p}"' for p in POLICIES)
    spec.write_text(f'kind = "replay"\nscenario = "{ROOT / "data" / "philly"}"\n\n[axes]\n'
                    f"trace = [{names}]\npolicy = [{policies}]\n", encoding="utf-8")
    return spec


def load() -> str:
    """The 1-, 5- and 15-minute load averages."""
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def one_sweep(spec: Path, out: Path, serial: bool, cpus: int) -> float:
    """Wall seconds of one fresh ``planner sweep`` process into an empty ``out``."""
    shutil.rmtree(out, ignore_errors=True)
    argv = [str(PLANNER), "sweep", str(spec), "--out", str(out)]
    argv += ["--serial"] if serial else ["--cpus", str(cpus)]
    began = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, env={**os.environ,
                                                               "RAY_ADDRESS": ""})
    return time.perf_counter() - began


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--fraction", type=int, default=4)
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    spec = write_spec(WORK, sub_traces(philly_trace(WORK), args.fraction))
    times: dict[str, list[float]] = {"serial": [], "ray": []}
    first_load, loads = load_now(), []
    for run in range(args.runs):
        for engine in ("serial", "ray"):
            before = load()
            if engine == "serial":
                loads.append(before)
            seconds = one_sweep(spec, WORK / engine, engine == "serial", args.cpus)
            times[engine].append(seconds)
            print(f"run {run + 1} {engine}: {seconds:.1f} s (load average before: {before})",
                  flush=True)
        same = (WORK / "serial" / "sweep.csv").read_bytes() == (
            WORK / "ray" / "sweep.csv").read_bytes()
        print(f"run {run + 1}: sweep.csv the same bytes serial and on Ray: {same}", flush=True)
        if not same:
            raise SystemExit("the tables differ")
    cells = len((WORK / "ray" / "sweep.csv").read_text().splitlines()) - 1
    serial, ray = (statistics.median(times[e]) for e in ("serial", "ray"))
    print(f"{cells} cells: one by one median {serial:.1f} s, on Ray ({args.cpus} CPUs) "
          f"median {ray:.1f} s, speed-up {serial / ray:.2f}x; load average now {load()}")
    columns = [{"key": "run", "label": "run"},
               {"key": "serial_s", "label": "one by one (--serial) s", "unit": "s",
                "better": "lower"},
               {"key": "ray_s", "label": f"local Ray, --cpus {args.cpus}, s", "unit": "s",
                "better": "lower"},
               {"key": "load", "label": "load average before (1, 5, 15 min)"}]
    rows = [{"run": str(i + 1), "serial_s": round(times["serial"][i], 1),
             "ray_s": round(times["ray"][i], 1), "load": loads[i]} for i in range(args.runs)]
    rows.append({"run": "median", "serial_s": round(serial, 1), "ray_s": round(ray, 1),
                 "load": f"speed-up {serial / ray:.2f}×"})
    path = write_result(
        "sweep", title=f"{cells} replays: one by one against a local Ray", columns=columns,
        rows=rows, load_before=first_load,
        what=f"Wall seconds of one fresh `planner sweep` process into an empty folder: the "
             f"Philly quarter split into {args.fraction} interleaved sub-traces × the four "
             "baseline policies (priority, fairtree, quota, lookback). Serial and Ray runs "
             "alternate; the two `sweep.csv` were the same bytes in every run.",
        notes=["Ray's start-up and shut-down are in the Ray figures; on a machine whose "
               "cores are busy with other work two workers get little more than one."])
    print(table_markdown(columns, rows), f"wrote {path}", sep="\n")

if __name__ == "__main__":
    main()
