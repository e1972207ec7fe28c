"""Ingests and cycles hammered 8 at once, round after round: nothing lost, nothing backwards.

Each round starts 8 processes at once on one scenario and one state folder, each an
ingest of its own batch of jobs (some running, finished in a later batch) or a cycle (with
or without a batch of its own to ingest first, as of a day drawn at random, so that some
plan as of a time earlier than the plan in force). Processes come from a fork server that
has imported the planner once (no import per process). Properties:

- no row lost: after every round, ``usage.csv`` holds exactly the jobs of every batch an
  ingest or a cycle reported written (each once, finished where a finished record came),
  and the scenario still validates;
- ``current`` never moves backwards: a watcher reads the link every few milliseconds
  through the whole run, and the ``as_of`` it points at never decreases; it always points
  at a complete folder;
- a refused run is a refusal (bad input, exit 2: another cycle holds the state, or the
  plan in force is later), never a crash; nothing half-written is left in ``plans/``.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import resource
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.scenario_factory import write_scenario

ROUNDS = 20
AT_ONCE = 8
DAYS = ("2026-11-02", "2026-11-03", "2026-11-04", "2026-11-05", "2026-11-06")
PROJECTS = ("p1", "p2", "p3")  # each on a cluster it may use (p2: h100-a only)
CLUSTER = {"p1": "h100-a", "p2": "h100-a", "p3": "a100-b"}


def batch_text(first: int, n: int, running: bool) -> str:
    """``n`` one-GPU jobs from ``first`` of an hour or so, before every as_of drawn.

    Running: started 2026-10-31T23:00, counted up to the ingest's now (2026-11-01);
    finished: ended 2026-11-01T00:30, later than a running record's end.
    """
    lines = []
    for i in range(n):
        job, project = first + i, PROJECTS[(first + i) % 3]
        end = "Unknown|RUNNING" if running else "2026-11-01T00:30:00|COMPLETED"
        lines.append(f"{job}|{project}|{CLUSTER[project]}|gres/gpu=1|2026-10-31T23:00:00|{end}")
    return "\n".join(lines) + "\n"


def act(action: dict, folder: str, state: str, out: str) -> None:
    """One process of a round: an ingest or a cycle, its outcome written to ``out``."""
    from planner.config import load_model
    from planner.cycle import run_cycle
    from planner.errors import InputError, SolverError
    from planner.ingest import ingest_usage

    outcome: dict = {"action": action}
    source = Path(action["file"]) if action.get("file") else None
    try:
        if action["kind"] == "ingest":
            ingest_usage(Path(folder), "sacct", source, now=pd.Timestamp("2026-11-01T00:00:00Z"))
            outcome.update(code=0, written=True)  # in the ledger now (written, or already)
        else:
            run_cycle(Path(folder), Path(state), load_model(),
                      as_of=action["as_of"], source=("sacct", source) if source else None)
            outcome.update(code=0, written=source is not None)
    except InputError as error:
        outcome.update(code=2, written=bool(getattr(error, "written", ())),
                       message=str(error)[:300])
    except SolverError as error:
        outcome.update(code=1, written=bool(getattr(error, "written", ())),
                       message=str(error)[:300])
    except BaseException as error:  # noqa: BLE001 (a crash is what the test looks for)
        outcome.update(code=-1, message=f"{type(error).__name__}: {error}"[:300])
    used = resource.getrusage(resource.RUSAGE_SELF)
    outcome["cpu_seconds"] = used.ru_utime + used.ru_stime
    Path(out).write_text(json.dumps(outcome))


def ledger(folder: Path) -> dict[str, str]:
    """job_id -> state ("" finished, "running") of the rows ingested (not the fixture's)."""
    rows = (folder / "usage.csv").read_text().splitlines()[1:]
    cells = [r.split(",") for r in rows]
    ids = [c[0] for c in cells]
    assert len(ids) == len(set(ids)), "a job twice"
    return {c[0]: c[6] for c in cells if c[0].startswith("slurm:")}


class Watcher(threading.Thread):
    """Reads ``current`` every few milliseconds: the as_of of each folder it saw, in order."""

    def __init__(self, state: Path):
        super().__init__(daemon=True)
        self.state, self.seen, self.stop, self.bad = state, [], threading.Event(), []

    def run(self) -> None:
        link = self.state / "current"
        while not self.stop.is_set():
            try:
                target = os.readlink(link)
            except OSError:
                target = None
            if target is not None and (not self.seen or self.seen[-1][0] != target):
                folder = self.state / target
                if not (folder / "plan.json").is_file() or not (folder / "cycle.json").is_file():
                    self.bad.append(target)
                as_of = json.loads((folder / "cycle.json").read_text())["as_of"]
                self.seen.append((target, pd.Timestamp(as_of)))
            time.sleep(0.003)


INGEST = st.fixed_dictionaries({"kind": st.just("ingest"), "jobs": st.integers(1, 12),
                                "running": st.booleans()})
CYCLE = st.fixed_dictionaries({"kind": st.just("cycle"), "as_of": st.sampled_from(DAYS),
                               "jobs": st.integers(0, 6), "running": st.just(False)})
#: a round: half ingests, half cycles (each with or without its own batch), in any order
ROUND = st.tuples(st.lists(INGEST, min_size=AT_ONCE // 2, max_size=AT_ONCE // 2),
                  st.lists(CYCLE, min_size=AT_ONCE // 2, max_size=AT_ONCE // 2)).flatmap(
    lambda both: st.permutations(both[0] + both[1]))


@pytest.mark.slow
@settings(max_examples=1, deadline=None, suppress_health_check=list(HealthCheck))
@given(schedule=st.lists(ROUND, min_size=ROUNDS, max_size=ROUNDS))
def test_concurrent_ingests_and_cycles_lose_nothing_and_never_go_back(tmp_path_factory,
                                                                      schedule):
    from planner.inputs.load import validate_scenario

    tmp = tmp_path_factory.mktemp("hammer")
    folder, state = write_scenario(tmp / "sc"), tmp / "state"
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["planner.cycle", "planner.ingest", "tests.test_concurrency"])
    watcher = Watcher(state)
    watcher.start()
    expected: dict[str, str] = {}  # job -> state, from the batches reported written
    next_job, codes, cpu = 10_000, [], []
    running_jobs: list[int] = []  # written running: a later batch finishes them
    try:
        for r, round_actions in enumerate(schedule):
            procs, plans = [], []
            for k, action in enumerate(round_actions):
                action = dict(action)
                jobs = list(range(next_job, next_job + action["jobs"]))
                next_job += action["jobs"]
                text = batch_text(jobs[0], len(jobs), action["running"]) if jobs else ""
                if action["kind"] == "ingest" and running_jobs and not action["running"]:
                    finished = running_jobs[:3]  # their finished records come now
                    text += "".join(batch_text(j, 1, False) for j in finished)
                    jobs += finished
                if jobs:
                    action["file"] = str(tmp / f"r{r}-{k}.txt")
                    Path(action["file"]).write_text(text)
                action["jobs"] = jobs
                out = tmp / f"r{r}-{k}.json"
                plans.append((action, out))
                procs.append(context.Process(target=act,
                                             args=(action, str(folder), str(state), str(out))))
            for p in procs:
                p.start()
            for p in procs:
                p.join(300)
                assert p.exitcode == 0, "a worker process died"
            for action, out in plans:
                outcome = json.loads(out.read_text())
                codes.append(outcome["code"])
                cpu.append(outcome.get("cpu_seconds", 0.0))
                assert outcome["code"] in (0, 2), outcome  # done, or refused: never a crash
                if outcome["code"] == 2:
                    message = outcome["message"]
                    assert ("a planning cycle is in progress" in message
                            or "later than" in message), message
                if outcome.get("written") and action["jobs"]:
                    for job in action["jobs"]:
                        if expected.get(f"slurm:{CLUSTER[PROJECTS[job % 3]]}:{job}") == "" \
                                and action["running"]:
                            continue  # a finished row is final
                        expected[f"slurm:{CLUSTER[PROJECTS[job % 3]]}:{job}"] = (
                            "running" if action["running"] else "")
                    if action["running"]:
                        running_jobs += action["jobs"]
                    else:
                        running_jobs = [j for j in running_jobs if j not in action["jobs"]]
            assert ledger(folder) == expected, f"round {r}: rows lost or wrong"
            assert validate_scenario(folder) == []
            assert not list(state.glob("plans/.*.tmp")), "a half-written folder left"
    finally:
        watcher.stop.set()
        watcher.join(5)
    assert watcher.bad == [], "current pointed at an incomplete folder"
    stamps = [as_of for _, as_of in watcher.seen]
    assert stamps == sorted(stamps), f"current moved backwards: {watcher.seen}"
    print(f"{len(codes)} runs, {codes.count(0)} done, {codes.count(2)} refused; workers' CPU "
          f"{sum(cpu):.1f} s (fork server: the planner imported once)")
