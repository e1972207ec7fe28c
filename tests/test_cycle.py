"""planner cycle: a chain of daily cycles on the tiny scenario, history, idempotence, failures."""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
from pathlib import Path

import pandas as pd
import pytest

from planner import cycle as cycle_module
from planner.check import check_plan
from planner.cli import main
from planner.config import load_model
from planner.cycle import apply_script, cycle_inputs, floor_to_grid, read_log, run_cycle
from planner.errors import SolverError
from planner.exporters.files import export_files
from planner.inputs.load import load_scenario
from tests.scenario_factory import FILES, write_scenario

SACCT = Path(__file__).parent / "fixtures" / "sacct-allocations.txt"
DAYS = ("2026-11-02", "2026-11-03", "2026-11-04")


def flat(text: str) -> str:
    """Terminal output with rich's line wrapping undone."""
    return " ".join(text.split())


def cycle(folder: Path, state: Path, as_of: str, *extra: str) -> int:
    return main(["cycle", str(folder), "--state", str(state), "--as-of", as_of, *extra])


def snapshot(state: Path) -> dict[str, bytes]:
    """Every file under ``state`` (hidden ones too) and where ``current`` points.

    Not the lock file (``.lock``): it records the last cycle that held it, not the state.
    Not ``cycles.jsonl``: the log of runs grows with every run, the plans do not.
    """
    files = {str(p.relative_to(state)): p.read_bytes()
             for p in sorted(state.rglob("*"))
             if p.is_file() and not p.is_symlink() and p.name not in (".lock", "cycles.jsonl")}
    link = state / "current"
    files["current ->"] = os.readlink(link).encode() if link.is_symlink() else b""
    return files


@pytest.fixture()
def chain(tmp_path: Path) -> tuple[Path, Path]:
    """The tiny scenario after three daily cycles, exporting to every target."""
    folder = write_scenario(tmp_path / "sc")
    state = tmp_path / "state"
    for day in DAYS:
        assert cycle(folder, state, day, "--export", "slurm,kueue,json") == 0
    return folder, state


def test_three_cycles_keep_the_history_and_each_plan_is_valid(chain):
    folder, state = chain
    names = [f"{d}T00-00-00Z" for d in DAYS]
    assert sorted(p.name for p in (state / "plans").iterdir()) == names
    assert os.readlink(state / "current") == f"plans/{names[-1]}"
    previous = None
    for name, day in zip(names, DAYS, strict=True):
        kept = state / "plans" / name
        plan = json.loads((kept / "plan.json").read_text())
        record = json.loads((kept / "cycle.json").read_text())
        assert plan["as_of"] == record["as_of"] == f"{day}T00:00:00Z"
        assert record["previous"] == (previous.name if previous else None)
        scenario = load_scenario(folder).with_as_of(pd.Timestamp(day, tz="UTC"))
        before = json.loads((previous / "plan.json").read_text()) if previous else None
        assert check_plan(plan, scenario, before) == []
        # Slurm: with a previous plan only the changes; Kueue: the first period's manifests
        org = scenario.org
        assert (kept / "slurm" / "slurm-apply.sh").read_bytes() == export_files(
            plan, "slurm", org, 1, before)["slurm-apply.sh"]
        assert (kept / "kueue" / f"kueue-{name}.yaml").is_file()
        assert (kept / "json" / "executor-view.json").is_file()
        assert os.stat(kept / "apply.sh").st_mode & stat.S_IXUSR
        previous = kept


# kubectl prunes custom resources only when told their kinds: every kind the export writes
ALLOW = [f"--prune-allowlist=kueue.x-k8s.io/v1beta2/{kind}"
         for kind in ("Topology", "WorkloadPriorityClass", "ResourceFlavor", "Cohort",
                      "ClusterQueue", "LocalQueue")]


def test_apply_sh_runs_slurm_then_prunes_the_kueue_set(chain):
    _, state = chain
    script = (state / "current" / "apply.sh").read_text()
    commands = [shlex.split(line) for line in script.splitlines()
                if line and not line.startswith("#")]
    assert commands == [
        ["set", "-euo", "pipefail"], ["cd", "$(dirname $0)"], ["./slurm/slurm-apply.sh"],
        ["kubectl", "apply", "--prune", "-l",
         "app.kubernetes.io/managed-by=gpu-planner,gpu-planner.io/scenario=tiny", *ALLOW,
         "-f", "kueue/kueue-2026-11-04T00-00-00Z.yaml"]]


def test_hostile_names_stay_inert_in_apply_sh():
    # a scenario name and a cluster id that would run commands if pasted unquoted
    plan = {"scenario": "x\n$(touch pwned)'; rm -rf / #", "as_of": "2026-11-02T00:00:00Z"}
    index = b'periods:\n- {file: "kueue-a b.yaml", cluster: "c1; touch pwned"}\n'
    script = apply_script(plan, {"kueue": {"index.yaml": index}})
    lines = script.splitlines()
    assert lines[1].startswith("# gpu-planner cycle") and len(lines) == 5  # no line injected
    argv = shlex.split(lines[-1])
    assert argv[:3] == ["kubectl", "--context", "c1; touch pwned"]
    assert argv[-2:] == ["-f", "kueue/kueue-a b.yaml"]
    key, _, value = argv[6].partition(",gpu-planner.io/scenario=")
    assert key == "app.kubernetes.io/managed-by=gpu-planner"
    assert re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?", value)  # a label


def test_a_second_run_with_the_same_as_of_changes_nothing(chain):
    folder, state = chain
    before = snapshot(state)
    assert cycle(folder, state, DAYS[-1], "--export", "slurm,kueue,json") == 0
    assert snapshot(state) == before


def test_a_rerun_on_new_inputs_keeps_the_old_folder_and_adds_one(chain):
    folder, state = chain
    (folder / "budgets.csv").write_text(FILES["budgets"].replace("p1,5000", "p1,6000"))
    assert cycle(folder, state, DAYS[-1], "--export", "slurm,kueue,json") == 0
    assert os.readlink(state / "current") == "plans/2026-11-04T00-00-00Z-2"
    record = json.loads((state / "current" / "cycle.json").read_text())
    assert record["previous"] == "2026-11-03T00-00-00Z"  # not the plan it re-ran
    assert (state / "plans" / "2026-11-04T00-00-00Z" / "plan.json").is_file()


@pytest.mark.parametrize(("edit", "code", "says"), [
    # a conflict (current is later than this as_of), a bad accounting file, a solver failure
    ({"as_of": "2026-11-03"}, 2, "planned as of 2026-11-04T00:00:00Z, later than this run's"),
    ({"sacct": "1|p1|h100-a|gres/gpu=x|2026-11-03T00:00:00|2026-11-03T01:00:00|COMPLETED\n"},
     2, "gres/gpu"),
    # unbudgeted.csv is checked as usage.csv is (GPUs a whole number), named with its column
    ({"unbudgeted": "job_id,project,cluster,gpus,start,end\n"
                    "u1,p1,h100-a,many,2026-10-20,2026-10-21\n"}, 2, "unbudgeted.csv"),
    ({"solver": True}, 1, "no valid plan"),
])
def test_a_failed_cycle_leaves_the_previous_current(chain, monkeypatch, capsys, edit, code, says):
    folder, state = chain
    before = snapshot(state)
    args = ["--export", "slurm,kueue,json"]
    if "sacct" in edit:
        bad = folder.parent / "sacct.txt"
        bad.write_text(edit["sacct"])
        args += ["--sacct", str(bad)]
    if "unbudgeted" in edit:
        (folder / "unbudgeted.csv").write_text(edit["unbudgeted"])
    if "solver" in edit:
        def fail(*_args, **_kwargs):
            raise SolverError("no valid plan: the elastic allocation LP ended infeasible")
        monkeypatch.setattr(cycle_module, "plan_scenario", fail)
    capsys.readouterr()
    assert cycle(folder, state, edit.get("as_of", "2026-11-05"), *args) == code
    err = flat(capsys.readouterr().err)
    assert says in err
    assert "cycle failed, " in err and "still points at 2026-11-04T00-00-00Z" in err
    assert snapshot(state) == before  # nothing half-written, no staging folder left
    last = read_log(state)[-1]  # the failed run is recorded, with what failed
    assert last["status"] == "failed" and says.split(" ")[0] in last["error"]
    assert "folder" not in last


def test_each_kept_plan_keeps_its_inputs_and_each_run_is_logged(chain):
    # The three folders hold the scenario's files byte for byte; loaded back they give
    # the digest each plan was made from. The log has one line a run, succeeded.
    folder, state = chain
    for kept in sorted((state / "plans").iterdir()):
        plan = json.loads((kept / "plan.json").read_text())
        assert {p.name for p in (kept / "inputs").iterdir()} == {
            p.name for p in folder.iterdir()}
        for p in folder.iterdir():
            assert (kept / "inputs" / p.name).read_bytes() == p.read_bytes()
        scenario = cycle_inputs(kept)[0]
        assert scenario.digest == plan["input_digest"]
        assert scenario.config.as_of == pd.Timestamp(plan["as_of"])
    log = read_log(state)
    assert [r["status"] for r in log] == ["succeeded"] * 3
    assert [r["folder"] for r in log] == [f"{d}T00-00-00Z" for d in DAYS]
    for r in log:
        assert pd.Timestamp(r["started"]) <= pd.Timestamp(r["finished"])
        assert r["seconds"] >= 0 and r["cpu_seconds"] >= 0
    # every run warns that demand.csv is hand-written (no --squeue/--kueue); the tiny
    # scenario's usage ends 10-30: the 2nd and 3rd runs also warn that it is stale
    assert [len(r["warnings"]) for r in log] == [1, 2, 2]
    assert all("hand-written" in r["warnings"][0] for r in log)
    assert log[1]["warnings"][1].startswith("usage.csv looks stale")
    # a re-run that keeps the same bytes is a run too: logged, marked unchanged
    assert cycle(folder, state, DAYS[-1], "--export", "slurm,kueue,json") == 0
    assert read_log(state)[-1]["unchanged"] is True
    assert cycle_inputs(folder) is None  # a folder without inputs/ (before they were kept)


def test_the_cycle_keeps_unbudgeted_csv_with_the_plan(chain):
    # what ran on no budget (Slurm's gp-opportunistic) is no table of the plan: the plan's
    # input digest does not change, but the tick reads the kept copy for rule 8
    folder, state = chain
    text = "job_id,project,cluster,gpus,start,end\nu1,p2,h100-a,16,2026-10-20,2026-10-31\n"
    (folder / "unbudgeted.csv").write_text(text)
    digest = json.loads((state / "current" / "plan.json").read_text())["input_digest"]
    assert cycle(folder, state, "2026-11-05", "--export", "slurm") == 0
    kept = state / "current"
    assert (kept / "inputs" / "unbudgeted.csv").read_text() == text
    assert json.loads((kept / "plan.json").read_text())["input_digest"] == digest


def test_conflicting_current_is_named_with_the_way_to_start_afresh(chain, capsys):
    # the 11-04 plan runs r2 on a100-b from 11-04 to 11-06; a100-b is then taken away
    folder, state = chain
    plan = json.loads((state / "current" / "plan.json").read_text())
    r2 = {r["request_id"]: r for r in plan["reservations"]}["r2"]
    assert (r2["cluster"], r2["start"], r2["end"]) == (
        "a100-b", "2026-11-04T00:00:00Z", "2026-11-06T00:00:00Z")
    for name in ("clusters", "demand", "reservations", "usage"):
        text = "".join(line for line in FILES[name].splitlines(keepends=True)
                       if "a100-b," not in line)
        (folder / f"{name}.csv").write_text(text)
    (folder / "budgets.csv").write_text(FILES["budgets"].replace("a100-b;h100-a", "h100-a"))
    before = snapshot(state)
    capsys.readouterr()
    assert cycle(folder, state, "2026-11-05") == 2
    err = flat(capsys.readouterr().err)
    assert "reservation 'r2' runs from 2026-11-04T00:00:00Z to 2026-11-06T00:00:00Z" in err
    assert "restore cluster 'a100-b' until 2026-11-06T00:00:00Z" in err
    assert f"or move {state / 'current'} aside to start afresh" in err
    assert snapshot(state) == before


def test_the_cycle_ingests_sacct_first_counting_running_jobs_to_as_of(tmp_path, capsys):
    folder = write_scenario(tmp_path / "sc")
    state = tmp_path / "state"
    assert cycle(folder, state, "2026-11-02", "--sacct", str(SACCT)) == 0
    out = flat(capsys.readouterr().out)
    assert "sacct-allocations.txt (sacct, now 2026-11-02T00:00:00Z)" in out
    usage = (folder / "usage.csv").read_text()
    # job 1002 still running: counted up to as_of (2026-11-02), the ingest's now
    assert "slurm:h100-a:1002,p2,h100-a,4,2026-11-01T10:00:00Z,2026-11-02T00:00:00Z" in usage
    plan = json.loads((state / "current" / "plan.json").read_text())
    assert json.loads((state / "current" / "cycle.json").read_text())["exports"] == []
    scenario = load_scenario(folder).with_as_of(pd.Timestamp("2026-11-02", tz="UTC"))
    assert check_plan(plan, scenario) == []
    p2 = {b["project"]: b["used"] for b in plan["budgets"]}["p2"]
    assert p2 > 4 * 14  # the 14 h of job 1002 before as_of are counted


def test_the_stale_usage_warning_goes_to_stderr_and_the_cycle_succeeds(chain, capsys):
    folder, state = chain
    capsys.readouterr()
    assert cycle(folder, state, "2026-11-05") == 0
    err = flat(capsys.readouterr().err)
    assert "warning: usage.csv looks stale" in err and "2026-11-04T00:00:00Z" in err


def test_as_of_defaults_to_now_floored_to_the_period_grid(tmp_path):
    folder = write_scenario(tmp_path / "sc")
    scenario = load_scenario(folder)
    now = pd.Timestamp("2026-11-03T17:45:12Z")
    assert floor_to_grid(now, scenario) == pd.Timestamp("2026-11-03", tz="UTC")
    result = run_cycle(folder, tmp_path / "state", load_model("default"), now=lambda: now)
    assert result.as_of == pd.Timestamp("2026-11-03", tz="UTC")
    assert result.folder.name == "2026-11-03T00-00-00Z"


def fake_kubectl(tmp_path: Path, code: int, monkeypatch) -> Path:
    """A ``kubectl`` on PATH that logs its argv (one JSON list a line) and exits ``code``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "kubectl.log"
    exe = bin_dir / "kubectl"
    exe.write_text("#!/usr/bin/env python3\nimport json, sys\n"
                   f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
                   f"sys.exit({code})\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


def test_apply_runs_apply_sh_and_then_makes_the_plan_current(tmp_path, monkeypatch):
    log = fake_kubectl(tmp_path, 0, monkeypatch)
    folder = write_scenario(tmp_path / "sc")
    state = tmp_path / "state"
    assert cycle(folder, state, "2026-11-02", "--export", "kueue", "--apply") == 0
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert calls == [["apply", "--prune", "-l",
                      "app.kubernetes.io/managed-by=gpu-planner,gpu-planner.io/scenario=tiny",
                      *ALLOW, "-f", "kueue/kueue-2026-11-02T00-00-00Z.yaml"]]
    assert os.readlink(state / "current") == "plans/2026-11-02T00-00-00Z"


def test_a_failed_apply_keeps_the_plan_in_history_but_not_current(tmp_path, monkeypatch,
                                                                  capsys):
    folder = write_scenario(tmp_path / "sc")
    state = tmp_path / "state"
    assert cycle(folder, state, "2026-11-02", "--export", "kueue") == 0
    fake_kubectl(tmp_path, 3, monkeypatch)
    assert cycle(folder, state, "2026-11-03", "--export", "kueue", "--apply") == 1
    err = flat(capsys.readouterr().err)
    assert "apply.sh exited 3" in err and "still points at 2026-11-02T00-00-00Z" in err
    assert os.readlink(state / "current") == "plans/2026-11-02T00-00-00Z"
    assert (state / "plans" / "2026-11-03T00-00-00Z" / "plan.json").is_file()
