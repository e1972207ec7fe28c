"""``planner simulate`` in-process: outputs, same bytes twice, exit 2 on bad input."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

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
