"""``planner sweep``: the grid, budget shifts, digests, resume, Ray against one by one, bad specs.

Ray runs in one local instance for the module (``num_cpus=2``, no dashboard); the
grids are small (a three-day quarter, five jobs; the sample's plans) so the module
stays well under a minute on the 2-core machine.
"""

from __future__ import annotations

import csv
import functools
import io
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.cli import main
from planner.config import load_model
from planner.inputs.load import load_scenario
from planner.sweep.cells import prepare, run_cell, shift_budgets
from planner.sweep.run import CellOutcome, run_sweep, table_csv
from planner.sweep.spec import BudgetShift, load_spec
from tests.system import need_module
from tests.test_simulate_cli import JOBS, short_quarter, write_trace

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "sample"


@functools.cache
def sample():
    """The sample scenario, loaded once for the module (it is immutable)."""
    return load_scenario(SAMPLE)


def replay_spec(tmp_path: Path, caps: str = "2, 8") -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    scenario = tmp_path / "philly3"
    if not scenario.exists():
        short_quarter(tmp_path)
        write_trace(tmp_path, JOBS)
    spec = tmp_path / "replay.toml"
    spec.write_text(f'''kind = "replay"
scenario = "{scenario.name}"

[axes]
min_runtime_cap_hours = [{caps}]
budget_shift = [{{}}, {{from = "multimodal", to = "science", percent = 50}}]
trace = ["trace.csv"]
policy = ["priority", "lookback"]
''')
    return spec


def plan_spec(tmp_path: Path) -> Path:
    spec = tmp_path / "plan.toml"
    spec.write_text(f'''kind = "plan"
scenario = "{SAMPLE}"

[axes]
model = ["default", "strict-budgets"]
budget_shift = [{{}}, {{from = "foundation-models", to = "science", percent = 10}}]
''')
    return spec


@pytest.fixture(scope="module")
def local_ray():
    need_module("ray", "sweep")
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


# -- the grid and its inputs ---------------------------------------------------------------

def test_cells_are_the_product_of_the_axes_last_axis_fastest(tmp_path):
    spec = load_spec(replay_spec(tmp_path))
    assert len(spec.cells) == 2 * 2 * 1 * 2
    assert spec.axes == ("model", "min_runtime_cap_hours", "budget_shift", "trace", "policy")
    first, second, third = spec.cells[:3]
    assert (first.min_runtime_cap_hours, first.budget_shift.label(), first.policy) == (
        2.0, "none", "priority")
    assert second.policy == "lookback" and second.min_runtime_cap_hours == 2.0
    assert third.budget_shift.label() == "multimodal->science 50%"
    assert spec.cells[-1].min_runtime_cap_hours == 8.0 and spec.cells[-1].model == "default"


def test_budget_shift_moves_the_percentage_in_proportion_by_hand():
    scenario = sample()
    shifted = shift_budgets(scenario, BudgetShift("multimodal", "science", 10))
    before = scenario.budgets.set_index("project")["gpu_hours"]
    after = shifted.budgets.set_index("project")["gpu_hours"]
    donors = list(scenario.tree.leaves_under("multimodal"))
    takers = list(scenario.tree.leaves_under("science"))
    moved = 0.1 * before.reindex(donors).dropna().sum()
    # every donor keeps 90 %; every taker gets moved × its share of the takers' budgets
    pd.testing.assert_series_equal(after.reindex(donors).dropna(),
                                   0.9 * before.reindex(donors).dropna())
    share = before.reindex(takers).dropna() / before.reindex(takers).dropna().sum()
    pd.testing.assert_series_equal(after.reindex(takers).dropna(),
                                   before.reindex(takers).dropna() + moved * share)
    others = ~before.index.isin(donors + takers)
    pd.testing.assert_series_equal(after[others], before[others])
    assert after.sum() == pytest.approx(before.sum(), rel=1e-12)
    assert shifted.digest != scenario.digest
    assert shift_budgets(scenario, BudgetShift()) is scenario


@settings(max_examples=25, deadline=None)
@given(percent=st.floats(min_value=1e-6, max_value=100))
def test_budget_shift_keeps_the_total_and_no_budget_goes_negative(percent):
    scenario = sample()
    shifted = shift_budgets(scenario, BudgetShift("foundation-models", "infrastructure",
                                                  percent))
    assert shifted.budgets["gpu_hours"].sum() == pytest.approx(
        scenario.budgets["gpu_hours"].sum(), rel=1e-9)
    assert (shifted.budgets["gpu_hours"] >= 0).all()


def test_digest_keys_every_input_and_only_them(tmp_path):
    spec = load_spec(replay_spec(tmp_path))
    inputs = prepare(spec)
    assert len({i.digest for i in inputs}) == len(inputs)
    again = prepare(load_spec(replay_spec(tmp_path / "copy")))  # same inputs elsewhere
    assert [i.digest for i in again] == [i.digest for i in inputs]
    (tmp_path / "trace.csv").write_text((tmp_path / "trace.csv").read_text()
                                        .replace("j5,vision-ocr,h100-b", "j5,vision-ocr,h100-a"))
    changed = prepare(spec)
    assert not {i.digest for i in changed} & {i.digest for i in inputs}


# -- running: Ray against one by one, resume ----------------------------------------------

def test_ray_sweep_table_equals_the_cells_run_one_by_one(tmp_path, local_ray):
    for spec_path in (replay_spec(tmp_path), plan_spec(tmp_path)):
        spec = load_spec(spec_path)
        inputs = prepare(spec)
        out = tmp_path / f"ray-{spec.kind}"
        outcomes = run_sweep(spec, inputs, out, engine="ray")
        assert not any(o.reused for o in outcomes)
        # the same cells, one by one in this process, without Ray or the sweep runner
        by_hand = [CellOutcome(item, run_cell(item), 0.0) for item in inputs]
        assert (out / "sweep.csv").read_bytes() == table_csv(spec, by_hand)
        serial = tmp_path / f"serial-{spec.kind}"
        run_sweep(spec, inputs, serial, engine="serial")
        for name in ("sweep.csv", "sweep.html"):
            assert (out / name).read_bytes() == (serial / name).read_bytes()
    rows = (tmp_path / "ray-replay" / "sweep.csv").read_text().splitlines()
    assert len(rows) == 1 + 8
    assert rows[0].startswith("cell,model,min_runtime_cap_hours,budget_shift,trace,policy,"
                              "occupancy,")
    plan_rows = (tmp_path / "ray-plan" / "sweep.csv").read_text().splitlines()
    status, gap, lp_status = plan_rows[1].split(",")[3:6]
    # the gap as HiGHS reports it: 0 up to rounding (2.0e-16 under HiGHS 1.16.0), not forced
    assert (status, lp_status) == ("optimal", "optimal") and 0 <= float(gap) < 1e-9
    html = (tmp_path / "ray-replay" / "sweep.html").read_text()
    assert html.count("<svg") >= 3 and "multimodal-&gt;science 50%" in html


def test_resume_skips_finished_cells_and_recomputes_a_deleted_or_changed_one(tmp_path):
    spec_path = replay_spec(tmp_path)
    out = tmp_path / "out"
    ran: list[tuple[str, bool]] = []

    def sweep(path: Path):
        spec = load_spec(path)
        return run_sweep(spec, prepare(spec), out, "serial",
                         lambda _d, _t, o: ran.append((o.item.cell_id, o.reused)))

    first = sweep(spec_path)
    table = (out / "sweep.csv").read_bytes()
    assert [r for _, r in ran] == [False] * 8
    ran.clear()
    sweep(spec_path)
    assert [r for _, r in ran] == [True] * 8
    assert (out / "sweep.csv").read_bytes() == table
    gone = first[3].item.cell_id
    for path in (out / "cells" / gone).iterdir():
        path.unlink()
    (out / "cells" / gone).rmdir()
    ran.clear()
    sweep(spec_path)
    assert [cid for cid, r in ran if not r] == [gone]
    assert (out / "sweep.csv").read_bytes() == table
    # a torn or foreign result.json is not trusted
    (out / "cells" / gone / "result.json").write_text('{"digest": "other"}')
    ran.clear()
    sweep(spec_path)
    assert [cid for cid, r in ran if not r] == [gone]
    # another cap: its four cells are new, the other four reused
    ran.clear()
    sweep(replay_spec(tmp_path, caps="2, 4"))
    assert sum(not r for _, r in ran) == 4 and sum(r for _, r in ran) == 4


def test_cli_sweep_serial_writes_table_html_timings_and_cells(tmp_path, capsys):
    spec = plan_spec(tmp_path)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "o"), "--serial"]) == 0
    out = capsys.readouterr().out
    assert "4 plan cells one by one" in out and "[4/4]" in out
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == [
        "cells", "sweep.csv", "sweep.html", "timings.csv"]
    assert len(list((tmp_path / "o" / "cells").iterdir())) == 4
    assert main(["sweep", str(spec), "--out", str(tmp_path / "o"), "--serial"]) == 0
    assert "4 reused" in capsys.readouterr().out


# -- bad specs: exit 2, file, line and key named, nothing written ---------------------------

BAD = [
    ('kind = "plan"\nscenario = "S"\n[axes\n', "line 3", "not valid TOML"),
    ('kind = "plan"\nscenario = "S"\ncolour = 1\n', "row 3, column colour", "unknown key"),
    ('scenario = "S"\n', "column kind", "missing"),
    ('kind = "replays"\nscenario = "S"\n', "row 1, column kind", "\"plan\" or \"replay\""),
    ('kind = "plan"\n', "column scenario", "scenario folder"),
    ('kind = "plan"\nscenario = "S"\n[axes]\nmodels = ["default"]\n',
     "row 4, column axes.models", "unknown axis"),
    ('kind = "plan"\nscenario = "S"\n[axes]\nmodel = []\n', "row 4, column axes.model",
     "non-empty array"),
    ('kind = "plan"\nscenario = "S"\n[axes]\nlookback_days = [7, -1, "x"]\n',
     "row 4, column axes.lookback_days", "in [0, 366]"),
    ('kind = "plan"\nscenario = "S"\n[axes]\nmin_runtime_cap_hours = [0]\n',
     "row 4, column axes.min_runtime_cap_hours", "(0, 8784]"),
    ('kind = "plan"\nscenario = "S"\n[axes]\nlookback_days = [7, 7.0]\n',
     "row 4, column axes.lookback_days", "repeats 7.0"),
    ('kind = "plan"\nscenario = "S"\n[axes]\nbudget_shift = [{from = "a", to = "b"}]\n',
     "row 4, column axes.budget_shift", "missing: percent"),
    ('kind = "plan"\nscenario = "S"\n[axes]\n'
     'budget_shift = [{from = "a", to = "b", percent = 120}]\n',
     "row 4, column axes.budget_shift", "(0, 100]"),
    ('kind = "plan"\nscenario = "S"\n[axes]\ntrace = ["t.csv"]\n',
     "row 4, column axes.trace", "replays only"),
    ('kind = "replay"\nscenario = "S"\n[axes]\npolicy = ["priority"]\n',
     "row 3, column axes", "needs the axis trace"),
    ('kind = "plan"\nscenario = "S"\n[axes]\n'
     'budget_shift = [{from = "nowhere", to = "science", percent = 5}]\n',
     "row 4, column axes.budget_shift", "unknown org node 'nowhere'"),
    ('kind = "plan"\nscenario = "S"\n[axes]\n'
     'budget_shift = [{from = "foundation-models", to = "pretraining", percent = 5}]\n',
     "row 4, column axes.budget_shift", "separate subtrees"),
    ('kind = "plan"\nscenario = "S"\n[axes]\nmodel = ["nosuch"]\n',
     "row 4, column axes.model", "no such planning model"),
    ('kind = "plan"\nscenario = "S"\n[axes]\nmodel = ["strict-budgets"]\nlookback_days = [3]\n',
     "row 4, column axes.model", "lookback kind 'decay'"),
    ('kind = "replay"\nscenario = "S"\n[axes]\ntrace = ["none.csv"]\npolicy = ["fifo"]\n',
     "row 5, column axes.policy", "unknown policy 'fifo'"),
    ('kind = "replay"\nscenario = "S"\n[axes]\ntrace = ["bad.csv"]\npolicy = ["priority"]\n',
     "bad.csv, row 2, column gpus", "must be ≥ 1"),
    ('kind = "plan"\nscenario = "nothing-here"\n', "nothing-here", ""),
]


@pytest.mark.parametrize(("text", "where", "message"), BAD)
def test_bad_spec_exits_2_naming_file_line_and_key_with_nothing_written(
        tmp_path, capsys, text, where, message):
    (tmp_path / "bad.csv").write_text(
        "job_id,project,cluster,submit,gpus,duration_hours,min_runtime_hours,resumable\n"
        "j1,vision-ocr,h100-a,2026-10-01T00:00:00Z,0,3,0,true\n")
    spec = tmp_path / "spec.toml"
    spec.write_text(text.replace('"S"', f'"{SAMPLE if "bad.csv" not in text else "philly"}"'))
    if "bad.csv" in text:
        short_quarter(tmp_path).rename(tmp_path / "philly")
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert where in err and message in err, err
    assert "nothing written" in err
    assert not out.exists()


def test_missing_spec_and_bad_cpus_exit_2(tmp_path, capsys):
    assert main(["sweep", str(tmp_path / "none.toml"), "--out", str(tmp_path / "o")]) == 2
    assert "none.toml: no such sweep spec" in capsys.readouterr().err
    assert main(["sweep", str(plan_spec(tmp_path)), "--out", str(tmp_path / "o"),
                 "--cpus", "0"]) == 2
    assert "--cpus" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    (tmp_path / "o").write_text("in the way")
    assert main(["sweep", str(plan_spec(tmp_path)), "--out", str(tmp_path / "o")]) == 2
    assert "is a file; give a folder" in capsys.readouterr().err


def test_sweep_html_keeps_hostile_text_inert_and_is_the_same_bytes_twice(tmp_path):
    from dataclasses import replace

    from planner.sweep.html import render_sweep_html

    spec = replace(load_spec(plan_spec(tmp_path)), name="<script>alert(1)</script>")
    header = ["cell", "model", "budget_shift", "elastic_objective"]
    rows = [["c1", "<img src=x onerror=alert(1)>.toml", "none", "1.5"],
            ["c2", "default", "a&b->c 10%", "2"]]
    html = render_sweep_html(spec, header, rows)
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;" in html and "&lt;img src=x onerror=alert(1)&gt;.toml" in html
    assert "a&amp;b-&gt;c 10%" in html
    assert html == render_sweep_html(spec, header, rows)


def test_sweep_csv_keeps_user_text_inert_and_numbers_as_numbers(tmp_path):
    # a model file named as a formula, a trace path with a DDE command: a spreadsheet opening
    # sweep.csv shows them as text ('=…); the figures, negative ones too, stay numbers
    from types import SimpleNamespace

    from planner.sweep.spec import Cell

    spec = load_spec(plan_spec(tmp_path))
    hostile = ['=HYPERLINK("http://x","y").toml', "+cmd|' /C calc'!A0", "@SUM(A1)", "-2"]
    outcomes = [CellOutcome(SimpleNamespace(cell_id=f"c{i}", cell=Cell(i, model)),
                            {"figures": {"status": "optimal", "elastic_objective": -1.5}}, 1.0)
                for i, model in enumerate(hostile)]
    rows = list(csv.reader(io.StringIO(table_csv(spec, outcomes).decode())))
    model = rows[0].index("model")
    assert [r[model] for r in rows[1:]] == ["'" + h for h in hostile[:3]] + ["-2"]
    assert {r[rows[0].index("elastic_objective")] for r in rows[1:]} == {"-1.5"}


def test_ray_joins_the_cluster_at_ray_address_else_starts_a_local_one(monkeypatch):
    from planner.sweep.run import ray_init_kwargs

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    local = ray_init_kwargs(2)
    assert local["num_cpus"] == 2 and local["include_dashboard"] is False
    monkeypatch.setenv("RAY_ADDRESS", "head:6379")
    joined = ray_init_kwargs(2)  # ray.init reads RAY_ADDRESS; a cluster's CPUs are its own
    assert not {"num_cpus", "include_dashboard", "address"} & set(joined)


def test_a_seed_axis_sets_highs_random_seed_per_cell_and_is_checked(tmp_path, capsys):
    # seed = [0, 5]: two cells whose models differ only in solver.random_seed (so their
    # digests differ), a seed column in the table; a seed that is not a whole number in
    # [0, 2**31 - 1] is refused with the file, line and key, nothing written
    from planner.sweep.cells import cell_model

    spec_path = tmp_path / "seeds.toml"
    spec_path.write_text(f'kind = "plan"\nscenario = "{SAMPLE}"\n\n[axes]\nseed = [0, 5]\n')
    spec = load_spec(spec_path)
    assert spec.axes == ("model", "seed") and [c.seed for c in spec.cells] == [0, 5]
    inputs = prepare(spec)
    assert [i.model.solver.random_seed for i in inputs] == [0, 5]
    assert inputs[0].digest != inputs[1].digest
    base = load_model("default")
    assert cell_model(base, spec.cells[1]) == replace(
        base, solver=replace(base.solver, random_seed=5))
    out = tmp_path / "out"
    assert main(["sweep", str(spec_path), "--out", str(out), "--serial"]) == 0
    rows = (out / "sweep.csv").read_text().splitlines()
    assert rows[0].startswith("cell,model,seed,") and rows[2].split(",")[1:3] == ["default", "5"]
    for bad in ("-1", "1.5", '"a"', "true", "2147483648"):
        spec_path.write_text(f'kind = "plan"\nscenario = "{SAMPLE}"\n\n[axes]\nseed = [{bad}]\n')
        out = tmp_path / f"bad{len(bad)}"
        assert main(["sweep", str(spec_path), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert "seeds.toml" in err and "axes.seed" in err and "whole number" in err, err
        assert not out.exists()
