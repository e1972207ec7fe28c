"""``planner simulate`` in-process: outputs, same bytes twice, exit 2 on bad input."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest

from planner.cli import main

PHILLY = Path(__file__).resolve().parent.parent / "data" / "philly"
HEADER = "job_id,project,cluster,submit,gpus,duration_hours,min_runtime_hours,resumable\n"
JOBS = [
    "j1,pretraining-moe-base,h100-a,2026-10-01T00:00:00Z,8,30,8,true",
    "j2,pretraining-moe-base,h100-a,2026-10-01T01:00:00Z,16,12,8,false",
    "j3,vision-ocr,h100-a,2026-10-01T02:00:00Z,1,3,0,true",
    "j4,evals-benchmarks,h100-b,2026-10-01T03:30:00Z,4,20,2,true",
    "j5,vision-ocr,h100-b,2026-10-02T00:00:00Z,64,10,8,true",
]


def short_quarter(tmp_path: Path) -> Path:
    """data/philly with a three-day quarter (fast replays)."""
    folder = tmp_path / "philly3"
    shutil.copytree(PHILLY, folder)
    toml = folder / "scenario.toml"
    toml.write_text(toml.read_text().replace("quarter_end = 2027-01-01",
                                             "quarter_end = 2026-10-04"))
    return folder


def write_trace(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(HEADER + "".join(line + "\n" for line in lines))
    return path


def test_simulate_writes_metrics_pictures_and_jobs_the_same_bytes_twice(tmp_path, capsys):
    scenario = short_quarter(tmp_path)
    trace = write_trace(tmp_path, JOBS)
    args = [str(scenario), "--trace", str(trace), "--policy", "priority,fairtree,quota,"
            "lookback,planner"]
    assert main(["simulate", *args, "--out", str(tmp_path / "one")]) == 0
    assert main(["simulate", *args, "--out", str(tmp_path / "two")]) == 0
    names = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert names == sorted(["metrics.json", "report.html"] + [
        f"{n}-{what}" for n in ("priority", "fairtree", "quota", "lookback", "planner")
        for what in ("jobs.csv", "delivered-vs-owed.png", "spend-vs-pace.png",
                     "occupancy.png")])
    for name in names:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    body = json.loads((tmp_path / "one" / "metrics.json").read_text())
    for figures in body["policies"].values():
        for key in ("occupancy", "delivered_over_owed_daily", "delivered_over_owed_weekly",
                    "delivered_over_owed_quarter", "delivered_over_owed_hourly",
                    "budget_error_floor_mean", "budget_error_floor_max", "jobs_never_started",
                    "worst_team_delivered_over_owed",
                    "budget_error_mean", "budget_error_max", "jain", "wait_p50_hours",
                    "wait_p90_hours", "preemptions", "small_wait_p50_hours",
                    "small_wait_p90_hours", "gpu_hours_lost_to_preemption",
                    "reserved_idle_gpu_hours", "teams"):
            assert key in figures
        assert figures["jobs"] == 5 and figures["jobs_started"] == 5
    assert (tmp_path / "one" / "quota-occupancy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = capsys.readouterr().out
    assert "delivered ÷ owed weekly" in out and "planner" in out
    # report.html: every PNG embedded as it was written, the figures as in metrics.json,
    # per team owed and delivered; self-contained (no link, script or remote source)
    html = (tmp_path / "one" / "report.html").read_text()
    for name in names:
        if name.endswith(".png"):
            data = base64.b64encode((tmp_path / "one" / name).read_bytes()).decode()
            assert f'src="data:image/png;base64,{data}"' in html
    for figures in body["policies"].values():
        assert f'<td class="n">{figures["occupancy"]:.3f}</td>' in html
        assert f'<td class="n">{figures["delivered_over_owed_weekly"]:.3f}</td>' in html
        for team, t in figures["teams"].items():
            assert f"<td>{team}</td><td class=\"n\">{t['owed_ngh']:,.0f}</td>" in html
    assert "<script" not in html and "<link" not in html and "http" not in html


def test_simulate_bad_trace_row_exits_2_and_writes_nothing(tmp_path, capsys):
    scenario = short_quarter(tmp_path)
    trace = write_trace(tmp_path, [*JOBS[:2], "j9,vision-ocr,h100-a,2026-10-01T00:00:00Z,"
                                              "two,3,0,true"])
    out = tmp_path / "out"
    assert main(["simulate", str(scenario), "--trace", str(trace), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "trace.csv, row 4, column gpus" in err
    assert not out.exists()


def test_simulate_unknown_policy_exits_2_and_writes_nothing(tmp_path, capsys):
    trace = write_trace(tmp_path, JOBS)
    out = tmp_path / "out"
    assert main(["simulate", str(short_quarter(tmp_path)), "--trace", str(trace),
                 "--policy", "quota,fifo", "--out", str(out)]) == 2
    assert "unknown policy fifo" in capsys.readouterr().err
    assert not out.exists()


def two_team_folder(folder: Path) -> Path:
    """One node of 8 H100s, four days; teams ta (a) and tb (b), budgets 100 and 100."""
    folder.mkdir(parents=True)
    (folder / "scenario.toml").write_text(
        'name = "two-teams"\nquarter_start = 2026-10-01\nquarter_end = 2026-10-05\n'
        "as_of = 2026-10-01\n")
    (folder / "clusters.csv").write_text("cluster,gpu_type,nodes,gpus_per_node\nc1,H100,1,8\n")
    (folder / "org.csv").write_text("id,parent,weight\nta,,1\na,ta,1\ntb,,1\nb,tb,1\n")
    (folder / "budgets.csv").write_text("project,gpu_hours\na,100\nb,100\n")
    return folder


def test_simulate_model_caps_protected_runtimes_and_is_recorded(tmp_path):
    # Quota, nominal 4 and 4. A (a, 8 GPUs, 10 h, asks 8 h protected) borrows the node
    # at 0; B (b, 4 GPUs, 2 h) is within b's quota from t=1 and reclaims when A's
    # protection ends: at 8 under the default model (cap 8 h), at 4 under
    # strict-budgets (min_runtime_cap_hours = 4), whose cap read_trace applies.
    folder = two_team_folder(tmp_path / "sc")
    trace = tmp_path / "trace.csv"
    trace.write_text(HEADER + "A,a,c1,2026-10-01T00:00:00Z,8,10,8,true\n"
                              "B,b,c1,2026-10-01T01:00:00Z,4,2,1,true\n")
    starts = {}
    for model in ("default", "strict-budgets"):
        out = tmp_path / model
        assert main(["simulate", str(folder), "--trace", str(trace), "--policy", "quota",
                     "--model", model, "--out", str(out)]) == 0
        jobs = (out / "quota-jobs.csv").read_text().splitlines()
        starts[model] = next(line.split(",")[5] for line in jobs if line.startswith("B,"))
        assert json.loads((out / "metrics.json").read_text())["model"] == model
    assert starts == {"default": "2026-10-01T08:00:00Z",
                      "strict-budgets": "2026-10-01T04:00:00Z"}


def test_simulate_model_reaches_the_planner_policy(tmp_path, monkeypatch):
    # Every replan of the planner policy plans with the model given (its contract's
    # frozen periods set to 0 by the policy), not the default.
    import planner.run
    from planner.config import load_model
    from planner.inputs.load import load_scenario
    from planner.simulate.run import simulate
    from planner.simulate.trace import read_trace

    seen = []
    real = planner.run.plan_scenario

    def spy(scenario, model, *args, **kwargs):
        seen.append((model.name, model.contract.min_runtime_cap_hours,
                     model.contract.frozen_periods))
        return real(scenario, model, *args, **kwargs)

    monkeypatch.setattr(planner.run, "plan_scenario", spy)  # the policy imports it per replan
    folder = two_team_folder(tmp_path / "sc")
    trace = tmp_path / "trace.csv"
    trace.write_text(HEADER + "A,a,c1,2026-10-01T00:00:00Z,8,10,8,true\n")
    scenario = load_scenario(folder)
    model = load_model("strict-budgets")
    runs = simulate(scenario, read_trace(trace, scenario), ["planner", "planner-kueue"],
                    model=model)
    # one a day of the four, for each policy
    assert runs[0].result.replans == runs[1].result.replans == len(seen) / 2 == 4
    assert set(seen) == {("strict-budgets", 4.0, 0)}


def test_simulate_unknown_model_exits_2_and_writes_nothing(tmp_path, capsys):
    trace = write_trace(tmp_path, JOBS)
    out = tmp_path / "out"
    assert main(["simulate", str(short_quarter(tmp_path)), "--trace", str(trace),
                 "--model", "no-such-model", "--out", str(out)]) == 2
    assert "no such planning model" in capsys.readouterr().err
    assert not out.exists()


def test_simulate_without_policy_replays_all_seven_and_the_help_names_them(tmp_path, capsys,
                                                                          monkeypatch):
    from planner.simulate.run import POLICY_NAMES

    scenario = short_quarter(tmp_path)
    trace = write_trace(tmp_path, JOBS)
    assert main(["simulate", str(scenario), "--trace", str(trace),
                 "--out", str(tmp_path / "all")]) == 0
    body = json.loads((tmp_path / "all" / "metrics.json").read_text())
    assert sorted(body["policies"]) == sorted(POLICY_NAMES) and len(POLICY_NAMES) == 7
    for figures in body["policies"].values():
        assert figures["jobs"] == 5
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", "400")  # argparse would break a name at its hyphen
    with pytest.raises(SystemExit) as stop:
        main(["simulate", "--help"])
    assert stop.value.code == 0
    helptext = " ".join(capsys.readouterr().out.split())
    for name in POLICY_NAMES:
        assert name in helptext


def test_seeds_replay_each_planning_policy_once_per_seed(tmp_path, capsys, monkeypatch):
    # --seeds 0,3: planner-slurm twice (columns planner-slurm@seed0 and @seed3, each
    # with its own files), fairtree once (it solves no LP); the seed reaches the replans'
    # model (solver.random_seed), and seed 0, the default model's, gives the plain run's
    # figures exactly
    from planner.simulate.run import simulate

    scenario = short_quarter(tmp_path)
    trace = write_trace(tmp_path, JOBS)
    out = tmp_path / "seeds"
    assert main(["simulate", str(scenario), "--trace", str(trace), "--policy",
                 "fairtree,planner-slurm", "--seeds", "0,3", "--out", str(out)]) == 0
    body = json.loads((out / "metrics.json").read_text())
    assert list(body["policies"]) == ["fairtree", "planner-slurm@seed0", "planner-slurm@seed3"]
    assert (out / "planner-slurm@seed3-jobs.csv").is_file()
    assert "planner-slurm@seed3" in (out / "report.html").read_text()
    plain = tmp_path / "plain"
    assert main(["simulate", str(scenario), "--trace", str(trace), "--policy",
                 "planner-slurm", "--out", str(plain)]) == 0
    assert (json.loads((plain / "metrics.json").read_text())["policies"]["planner-slurm"]
            == body["policies"]["planner-slurm@seed0"])
    import planner.run
    from planner.inputs.load import load_scenario
    from planner.simulate.trace import read_trace

    seen = []
    real = planner.run.plan_scenario

    def spy(scenario, model, *args, **kwargs):
        seen.append(model.solver.random_seed)
        return real(scenario, model, *args, **kwargs)

    monkeypatch.setattr(planner.run, "plan_scenario", spy)
    loaded = load_scenario(str(scenario))
    runs = simulate(loaded, read_trace(trace, loaded), ["planner"], seeds=[7])
    assert [r.name for r in runs] == ["planner@seed7"] and seen and set(seen) == {7}


@pytest.mark.parametrize("seeds", ["", "x", "-1", "1.5", "0,,a", "99999999999", "²", "1,٣"])
def test_bad_seeds_exit_2_and_write_nothing(tmp_path, capsys, seeds):
    trace = write_trace(tmp_path, JOBS)
    out = tmp_path / "out"
    assert main(["simulate", str(short_quarter(tmp_path)), "--trace", str(trace),
                 "--seeds", seeds, "--out", str(out)]) == 2
    assert "--seeds" in capsys.readouterr().err
    assert not out.exists()
