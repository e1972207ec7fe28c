"""Benchmark: the planner replays driven through the shipped demand and tick paths.

    python benchmarks/queue_demand.py run --trace synth8k|philly
        --policy planner-slurm|planner-kueue --config CONFIG [--cache DIR]
    python benchmarks/queue_demand.py write [--cache DIR] [--baseline DIR ...]

``run`` replays one trace under one policy and one demand configuration and caches its
figures (``metrics.json``'s entry), CPU seconds and the load average in ``--cache``
(default ``benchmarks/out/queue_demand``). One run at a time: the Philly replays of
``planner-kueue`` take about 40 CPU minutes each. The configurations
(:class:`planner.simulate.planner_policy.DemandSource`):

- ``record``: what the figures of record replay, the replay's own view (each job's true
  work left; the forecast from the whole work of the jobs submitted in the lookback
  window), through the shared functions (:mod:`planner.demand`, :mod:`planner.tick`);
- ``record-text``: the same, the queue rendered each replan as ``squeue`` text or
  Workloads JSON and read back by ``planner ingest``'s parser (the shipped path; the
  time left rendered as the time limit left, i.e. users whose limits are exact);
- ``shipped``: what a site's queue and ledger say, through the rendered text: a job asks
  for its time limit less the time it ran; the forecast is the GPU-hours the usage
  ledger ran in the window ÷ its hours;
- ``no-forecast``: ``shipped`` without the arrival forecast;
- ``declared``: no queue, no forecast: each project's rows as a lead would declare them
  by hand, flat over the quarter: its allocated GPU-hours on each cluster in the trace
  ÷ the quarter's hours (the totals known exactly, their timing not at all).

``write`` turns the cached runs into ``benchmarks/results/queue_demand_shipped.json``
(the runs through the shipped paths against the replays before this change, whose
``metrics.json`` folders ``--baseline trace:policy=DIR`` name; ``trace:policy:order=DIR``
names the replay before this change with its one changed line applied, rule 7's order,
to attribute a difference) and
``benchmarks/results/queue_demand_future.json`` (the cost of not knowing the future).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

from planner.inputs.load import load_scenario  # noqa: E402
from planner.results import load_now, write_result  # noqa: E402

TRACES = {"synth8k": ("data/sample", ["synthetic", "--seed", "7", "--jobs", "8000"]),
          "philly": ("data/philly", ["philly"])}
CONFIGS = ("record", "record-text", "shipped", "no-forecast", "declared")
POLICIES = ("planner-slurm", "planner-kueue")
TITLES = {"record": "the replay's view (figures of record)",
          "record-text": "the replay's view, queue rendered and read back",
          "shipped": "what squeue / Workloads and the ledger say (shipped)",
          "no-forecast": "shipped, no arrival forecast",
          "declared": "declared rows only (a hand-written demand.csv)"}


def _cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def _trace_file(name: str, cache: Path) -> Path:
    path = cache / f"{name}.csv"
    if not path.is_file():
        scenario, argv = TRACES[name]
        cache.mkdir(parents=True, exist_ok=True)
        extra = [str(ROOT / scenario)] if name == "synth8k" else []
        subprocess.run([sys.executable, "-c", "import sys; from planner.cli import main; "
                        "sys.exit(main(sys.argv[1:]))", "trace", argv[0], *extra, *argv[1:],
                        "--out", str(path)], check=True, capture_output=True, cwd=ROOT)
    return path


def declared_rows(scenario, trace: pd.DataFrame) -> pd.DataFrame:
    """Each project's allocated GPU-hours per cluster in the trace, flat over the quarter."""
    cfg = scenario.config
    hours = (cfg.quarter_end - cfg.quarter_start) / pd.Timedelta(hours=1)
    allocated = trace[trace["min_runtime_hours"] > 0]
    work = (allocated["gpus"] * allocated["duration_hours"]).groupby(
        [allocated["project"], allocated["cluster"]]).sum()
    rows = [(p, c, g / hours) for (p, c), g in sorted(work.items()) if g > 0]
    return pd.DataFrame({
        "project": [r[0] for r in rows], "cluster": [r[1] for r in rows],
        "start": pd.Series([cfg.quarter_start] * len(rows), dtype="datetime64[ns, UTC]"),
        "end": pd.Series([cfg.quarter_end] * len(rows), dtype="datetime64[ns, UTC]"),
        "gpus": [float(r[2]) for r in rows]}).astype({"project": object, "cluster": object})


def source(config: str, scenario, trace: pd.DataFrame):
    """The :class:`DemandSource` of a configuration."""
    from planner.simulate.planner_policy import DemandSource

    return {"record": DemandSource(),
            "record-text": DemandSource(via_text=True),
            "shipped": DemandSource(sees="queue", via_text=True),
            "no-forecast": DemandSource(sees="queue", forecast=False),
            "declared": DemandSource(queue=False, declared=declared_rows(scenario, trace)),
            }[config]


def run(args: argparse.Namespace) -> None:
    """One replay; its figures cached as ``<trace>-<policy>-<config>.json``."""
    from planner.simulate.engine import replay
    from planner.simulate.metrics import compute_metrics
    from planner.simulate.run import POLICIES as CLASSES
    from planner.simulate.trace import read_trace

    cache = Path(args.cache)
    scenario = load_scenario(ROOT / TRACES[args.trace][0])
    trace = read_trace(_trace_file(args.trace, cache), scenario)
    policy = CLASSES[args.policy](demand=source(args.config, scenario, trace))
    load = load_now()
    began = _cpu()
    result = replay(scenario, trace, policy)
    seconds = _cpu() - began
    metrics = compute_metrics(scenario, trace, result).summary
    record = {"trace": args.trace, "policy": args.policy, "config": args.config,
              "cpu_s": round(seconds, 1), "load_before": load,
              "load_after": load_now(), "code": os.environ.get("QUEUE_DEMAND_CODE", "?"),
              "metrics": metrics}
    out = cache / f"{args.trace}-{args.policy}-{args.config}.json"
    out.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"{out}: weekly {metrics['delivered_over_owed_weekly']}, worst team "
          f"{metrics['worst_team_delivered_over_owed']}, {seconds:.0f} CPU s")


def _runs(cache: Path) -> dict[tuple[str, str, str], dict]:
    out = {}
    for path in sorted(cache.glob("*-planner-*.json")):
        record = json.loads(path.read_text())
        out[(record["trace"], record["policy"], record["config"])] = record
    return out


def _differences(a: dict, b: dict, prefix: str = "") -> list[str]:
    """Keys whose values differ between two metrics entries (nested: ``teams.x.y``)."""
    out = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if isinstance(x, dict) and isinstance(y, dict):
            out += _differences(x, y, f"{prefix}{key}.")
        elif x != y:
            out.append(f"{prefix}{key}: {x} -> {y}")
    return out


def write(args: argparse.Namespace) -> None:
    """The two result files from the cached runs."""
    runs = _runs(Path(args.cache))
    baselines, patched = {}, {}
    for item in args.baseline or []:
        key, folder = item.split("=", 1)
        trace, policy, *kind = key.split(":")
        body = json.loads((Path(folder) / "metrics.json").read_text())
        (patched if kind == ["order"] else baselines)[(trace, policy)] = \
            body["policies"][policy]
    load = load_now()
    columns = [{"key": "trace", "label": "trace"}, {"key": "policy", "label": "policy"},
               {"key": "run", "label": "run"},
               {"key": "weekly", "label": "delivered ÷ owed, weekly", "better": "higher"},
               {"key": "worst_team", "label": "worst team (weekly)", "better": "higher"},
               {"key": "quarter", "label": "delivered ÷ owed, quarter", "better": "higher"},
               {"key": "occupancy", "label": "occupancy", "better": "higher"},
               {"key": "preemptions", "label": "preemptions", "better": "lower"},
               {"key": "same", "label": "every figure the same as the reference"},
               {"key": "reference", "label": "reference"},
               {"key": "cpu_s", "label": "CPU s", "unit": "s", "better": "lower"}]
    rows, notes = [], []
    for trace in TRACES:
        for policy in POLICIES:
            before = baselines.get((trace, policy))
            if before is not None:
                rows.append(_row(trace, policy, "before this change", before, None, None))
            for config in ("record", "record-text"):
                record = runs.get((trace, policy, config))
                if record is None:
                    continue
                diff = _differences(before, record["metrics"]) if before else None
                rows.append(_row(trace, policy, TITLES[config], record["metrics"],
                                 record["cpu_s"], None if diff is None else not diff,
                                 "before this change" if before else ""))
            order, text = patched.get((trace, policy)), runs.get((trace, policy, "record-text"))
            if order is not None and text is not None:
                same = not _differences(order, text["metrics"])
                rows.append(_row(trace, policy, "before this change, rule 7 served as "
                                 "late_step serves it (the one line that changed)", order, None,
                                 same, TITLES["record-text"]))
                notes.append(_provenance(record))
                if diff:
                    notes.append(f"{trace} {policy} {config} differs from before in "
                                 f"{len(diff)} figures, first: {'; '.join(diff[:6])}")
    if baselines or patched:
        notes.insert(0, f"before this change: planner simulate ... --policy NAME at code "
                        f"{args.baseline_code} (CPU s not measured here); rule 7's order alone: "
                        "that code with KueueReplayPolicy._widen_late serving "
                        "most_owed_first(plan, widest) as planner.tick.late_step does")
    if rows:
        write_result("queue_demand_shipped", title="The planner replays through the shipped "
                     "demand and tick paths", what=(
                         "planner-slurm and planner-kueue replayed with demand built by "
                         "planner/demand.py (the function planner ingest squeue|kueue "
                         "--demand runs) and queue moves by planner/tick.py (the functions "
                         "planner tick runs), directly and with the queue rendered as squeue "
                         "text or Workloads JSON and read back by the ingest's parser each "
                         "replan; against the replays before this change"),
                     columns=columns, rows=rows, notes=notes, load_before=load,
                     folder=Path(args.results))
    rows, notes = [], []
    for trace in TRACES:
        for policy in POLICIES:
            for config in ("record", "shipped", "no-forecast", "declared"):
                record = runs.get((trace, policy, config))
                if record is None:
                    continue
                rows.append(_row(trace, policy, TITLES[config], record["metrics"],
                                 record["cpu_s"], None))
                notes.append(_provenance(record))
    if rows:
        write_result("queue_demand_future", title="The cost of not knowing the future",
                     what=("planner-slurm and planner-kueue replayed with the demand a replan "
                           "can know: the replay's own view (true work left, whole work of "
                           "recent arrivals), what squeue / Workloads and the usage ledger "
                           "say (time limits, GPU-hours run), the same without the arrival "
                           "forecast, and declared rows only (a lead's flat quarter totals)"),
                     columns=[c for c in columns if c["key"] not in ("same", "reference")],
                     rows=[{k: v for k, v in r.items() if k not in ("same", "reference")}
                           for r in rows],
                     notes=notes, load_before=load, folder=Path(args.results))


def _provenance(record: dict) -> str:
    load = "–".join(f"{x:.2f}" for x in (record["load_before"], record["load_after"])
                    if x is not None)
    return (f"{record['trace']} {record['policy']} {record['config']}: code "
            f"{record['code']}, {record['cpu_s']} CPU s, load average {load}")


def _row(trace: str, policy: str, run_name: str, m: dict, cpu: float | None,
         same: bool | None, reference: str = "") -> dict:
    return {"trace": trace, "policy": policy, "run": run_name, "reference": reference,
            "weekly": m["delivered_over_owed_weekly"],
            "worst_team": m["worst_team_delivered_over_owed"],
            "quarter": m["delivered_over_owed_quarter"], "occupancy": m["occupancy"],
            "preemptions": m["preemptions"],
            "same": "" if same is None else ("yes" if same else "no"), "cpu_s": cpu}


def main() -> None:
    """``run`` one replay, or ``write`` the result files."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("run")
    one.add_argument("--trace", choices=tuple(TRACES), required=True)
    one.add_argument("--policy", choices=POLICIES, required=True)
    one.add_argument("--config", choices=CONFIGS, required=True)
    one.add_argument("--cache", default=str(ROOT / "benchmarks" / "out" / "queue_demand"))
    both = sub.add_parser("write")
    both.add_argument("--cache", default=str(ROOT / "benchmarks" / "out" / "queue_demand"))
    both.add_argument("--baseline", action="append",
                      help="trace:policy=DIR: the metrics.json of that replay before; "
                           "trace:policy:order=DIR: before, with rule 7's new order alone")
    both.add_argument("--baseline-code", default="?",
                      help="the commit the --baseline replays ran at")
    both.add_argument("--results", default=str(ROOT / "benchmarks" / "results"))
    args = parser.parse_args()
    (run if args.command == "run" else write)(args)


if __name__ == "__main__":
    main()
