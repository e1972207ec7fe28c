"""The quarterly report: the workbook read back, its scenario sheets re-planned, the HTML."""

from __future__ import annotations

import shutil
import time

import openpyxl
import pandas as pd
import pytest

from planner.config import load_model
from planner.inputs.load import load_scenario
from planner.inputs.schema import TABLES
from planner.reports.workbook import BUDGETS, RESERVATIONS, SUMMARY, write_workbook
from planner.run import SAMPLE, plan_scenario
from tests.scenario_factory import write_scenario


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    scenario = load_scenario(SAMPLE)
    plan = plan_scenario(scenario, load_model("default")).plan.body
    book = tmp_path_factory.mktemp("report") / "report.xlsx"
    started = time.perf_counter()
    write_workbook(plan, scenario, book)
    seconds = time.perf_counter() - started
    return scenario, plan, book, seconds


def _strip(plan: dict) -> dict:
    return {k: v for k, v in plan.items() if k != "input_digest"}


def test_sample_report_is_made_quickly(sample, tmp_path):
    *_, seconds = sample
    print(f"sample workbook written in {seconds:.2f} s")
    assert seconds < 30
    started = time.perf_counter()  # the whole of `planner report`: load, plan, write
    scenario = load_scenario(SAMPLE)
    write_workbook(plan_scenario(scenario, load_model("default")).plan.body, scenario,
                   tmp_path / "r.xlsx")
    total = time.perf_counter() - started
    print(f"sample report (load + plan + workbook) in {total:.2f} s")
    assert total < 30


def test_budget_tree_numbers_equal_the_plan_and_subtotals_sum_children(sample):
    scenario, plan, book, _ = sample
    ws = openpyxl.load_workbook(book)[BUDGETS]
    frame = pd.read_excel(book, sheet_name=BUDGETS)
    projects = frame[frame["level"] == "project"].set_index("node")
    for b in plan["budgets"]:
        row = projects.loc[b["project"]]
        assert row["budget NGH"] == pytest.approx(b["budget"], abs=1e-6)
        assert row["used NGH"] == pytest.approx(b["used"], abs=1e-6)
        assert row["planned NGH"] == pytest.approx(b["planned"], abs=1e-6)
        assert row["forecast NGH"] == pytest.approx(b["used"] + b["planned"], abs=1e-6)
    assert len(projects) == len(plan["budgets"])
    # evaluate each SUM formula bottom-up from the project values; compare with the plan
    parent = dict(zip(scenario.org["id"], scenario.org["parent"], strict=True))
    rows = {ws.cell(r, 1).value: r for r in range(2, ws.max_row + 1)}
    node_of = {r: n for n, r in rows.items()}
    expected: dict[str, list[float]] = {}
    for b in plan["budgets"]:
        node = parent[b["project"]]
        while node:
            acc = expected.setdefault(node, [0.0, 0.0, 0.0])
            acc[0] += b["budget"]
            acc[1] += b["used"]
            acc[2] += b["planned"]
            node = parent[node]

    def value(r: int, col: int) -> float:
        cell = ws.cell(r, col).value
        if isinstance(cell, str) and cell.startswith("=SUM("):
            total = 0.0
            for part in cell[5:-1].split(","):
                first, _, last = part.partition(":")
                lo, hi = int(first[1:]), int((last or first)[1:])
                total += sum(value(x, col) for x in range(lo, hi + 1))
            return total
        return float(cell)

    sums = 0
    for node, (budget, used, planned) in expected.items():
        r = rows[node]
        formula = ws.cell(r, 3).value
        assert formula.startswith("=SUM(")
        refs = {x for part in formula[5:-1].split(",")
                for x in range(int(part.partition(":")[0][1:]),
                               int((part.partition(":")[2] or part)[1:]) + 1)}
        assert {node_of[x] for x in refs} == {c for c, p in parent.items() if p == node}
        assert value(r, 3) == pytest.approx(budget, abs=1e-4)
        assert value(r, 4) == pytest.approx(used, abs=1e-4)
        assert value(r, 5) == pytest.approx(planned, abs=1e-4)
        assert value(r, 6) == pytest.approx(used + planned, abs=1e-4)
        sums += 1
    assert sums == 16  # 4 areas + 12 teams
    depth = {n: 0 for n in rows}
    for n in rows:
        up = parent[n]
        while up:
            depth[n] += 1
            up = parent[up]
    assert all((ws.row_dimensions[r].outline_level or 0) == depth[n] for n, r in rows.items())
    assert ws.freeze_panes == "B2" and ws.auto_filter.ref


def test_summary_and_reservations_sheets(sample):
    scenario, plan, book, _ = sample
    wb = openpyxl.load_workbook(book)
    summary = wb[SUMMARY]
    assert summary._charts, "the Summary sheet has a native chart"
    texts = [c.value for row in summary.iter_rows() for c in row if isinstance(c.value, str)]
    assert "2026 Q4" in texts
    for u in plan["unplaced"]:
        assert u["request_id"] in texts
    # capacity: planned GPU-hours per cluster equal the plan's allocations + reservations
    frame = pd.read_excel(book, sheet_name=SUMMARY, header=None)
    start = frame.index[frame[0] == "cluster"][0]
    clusters = frame.iloc[start + 1:start + 1 + len(plan["clusters"])]
    gpn = {c["cluster"]: c["gpus_per_node"] for c in plan["clusters"]}
    for _, row in clusters.iterrows():
        granted = sum(a["gpu_hours"] for a in plan["allocations"] if a["cluster"] == row[0])
        granted += sum(r["nodes"] * gpn[r["cluster"]] *
                       (pd.Timestamp(r["end"]) - max(pd.Timestamp(r["start"]),
                                                     pd.Timestamp(plan["as_of"])))
                       .total_seconds() / 3600
                       for r in plan["reservations"] if r["cluster"] == row[0])
        assert row[5] == pytest.approx(granted, abs=1e-3)
        assert row[6] <= 1 + 1e-9
    # per area: budget, used, planned equal the plan's projects summed under each area
    parent = dict(zip(scenario.org["id"], scenario.org["parent"], strict=True))

    def area(node: str) -> str:
        while parent[node]:
            node = parent[node]
        return node

    head = frame.index[frame[0] == "area"][0]
    areas = frame.iloc[head + 1:head + 5]
    for _, row in areas.iterrows():
        mine = [b for b in plan["budgets"] if area(b["project"]) == row[0]]
        for col, key in ((1, "budget"), (2, "used"), (3, "planned")):
            assert row[col] == pytest.approx(sum(b[key] for b in mine), abs=1e-4)
    res = pd.read_excel(book, sheet_name=RESERVATIONS, nrows=len(plan["reservations"]))
    assert list(res["request"]) == [r["request_id"] for r in plan["reservations"]]
    assert list(res["nodes"]) == [r["nodes"] for r in plan["reservations"]]


def test_used_per_cluster_adds_up_to_the_plans_used_budget(sample):
    from planner.reports.content import build_report

    scenario, plan, _, _ = sample
    report = build_report(plan, scenario)
    used_ngh = sum(c.used_gpu_h * c.rate for c in report.clusters)
    assert used_ngh == pytest.approx(sum(b["used"] for b in plan["budgets"]), rel=1e-9)
    assert all(0 <= c.used_share <= 1 + 1e-9 for c in report.clusters)


def test_workbook_scenario_sheets_plan_the_same_as_the_csv_scenario(sample):
    _, plan, book, _ = sample
    again = load_scenario(book)
    replanned = plan_scenario(again, load_model("default")).plan.body
    assert _strip(replanned) == _strip(plan)


def test_same_inputs_give_the_same_bytes(sample, tmp_path):
    scenario, plan, book, _ = sample
    write_workbook(plan, scenario, tmp_path / "again.xlsx")
    assert (tmp_path / "again.xlsx").read_bytes() == book.read_bytes()


NASTY = ['=HYPERLINK("http://x","y")', "+1", "-2", "@SUM(A1)", "=1+1"]


def test_injected_formula_ids_stay_text(tmp_path):
    org = ("id,parent,weight\nresearch,,1\n" +
           "".join(f'"{n.replace(chr(34), chr(34) * 2)}",research,1\n' for n in NASTY))
    budgets = "project,gpu_hours,clusters\n" + "".join(
        f'"{n.replace(chr(34), chr(34) * 2)}",100,\n' for n in NASTY)
    folder = write_scenario(tmp_path / "sc", org=org, budgets=budgets, demand=None,
                            reservations=None, usage=None)
    scenario = load_scenario(folder)
    plan = plan_scenario(scenario, load_model("default")).plan.body
    book = write_workbook(plan, scenario, tmp_path / "r.xlsx")
    wb = openpyxl.load_workbook(book)
    seen = {name: 0 for name in NASTY}
    for ws in wb.worksheets:
        for row in ws.iter_rows():
            for cell in row:
                if cell.value in seen:
                    assert cell.data_type == "s", (ws.title, cell.coordinate)
                    seen[cell.value] += 1
    assert all(n >= 3 for n in seen.values()), seen  # Budget tree, Next quarter, org, budgets
    assert _strip(plan_scenario(load_scenario(book), load_model("default")).plan.body) == \
        _strip(plan)


@pytest.mark.skipif(shutil.which("soffice") is None,
                    reason="LibreOffice (soffice) is not on PATH: recalculation and PDF "
                           "conversion not tested here")
def test_libreoffice_recalculates_and_converts(sample, tmp_path):  # pragma: no cover
    import subprocess

    _, plan, book, _ = sample
    subprocess.run(["soffice", "--headless", "--convert-to", "pdf", "--outdir", str(tmp_path),
                    str(book)], check=True, timeout=180)
    assert (tmp_path / "report.pdf").stat().st_size > 0
    subprocess.run(["soffice", "--headless", "--convert-to", "xlsx", "--outdir",
                    str(tmp_path / "calc"), str(book)], check=True, timeout=180)
    ws = openpyxl.load_workbook(tmp_path / "calc" / "report.xlsx", data_only=True)[BUDGETS]
    total = sum(ws.cell(r, 3).value for r in range(2, ws.max_row + 1)
                if ws.cell(r, 2).value == "area")
    assert total == pytest.approx(sum(b["budget"] for b in plan["budgets"]), abs=1e-3)


def test_tables_are_written_in_schema_order(sample):
    _, _, book, _ = sample
    wb = openpyxl.load_workbook(book, read_only=True)
    for name, table in TABLES.items():
        first = next(wb[name].iter_rows(max_row=1, values_only=True))
        assert tuple(first) == table.columns


# --------------------------------------------------------------------------- HTML and CLI


def test_html_escapes_a_script_project_name(tmp_path):
    from planner.reports.html import render_html

    nasty = "<script>alert(1)</script>"
    folder = write_scenario(tmp_path / "sc",
                            org=f"id,parent,weight\nresearch,,1\n{nasty},research,1\np2,research,1\n",
                            budgets=f"project,gpu_hours,clusters\n{nasty},100,\np2,50,\n",
                            demand=None, reservations=None, usage=None)
    scenario = load_scenario(folder)
    plan = plan_scenario(scenario, load_model("default")).plan.body
    html = render_html(plan, scenario)
    assert "<script" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_html_report_of_the_sample(sample):
    from planner.reports.html import render_html

    scenario, plan, _, _ = sample
    started = time.perf_counter()
    html = render_html(plan, scenario)
    print(f"sample HTML rendered in {time.perf_counter() - started:.3f} s")
    area_chart = html.split("</svg>")[0]
    assert area_chart.count("<rect ") == 3 * 4  # budget, used, planned for 4 areas
    for b in plan["budgets"]:
        assert f">{b['project']}</td>" in html
    for u in plan["unplaced"]:
        assert u["request_id"] in html
    assert "<link" not in html and "src=" not in html  # self-contained


def test_cli_report_writes_xlsx_and_html_and_bad_input_exits_2(tmp_path, capsys):
    from planner.cli import main

    folder = write_scenario(tmp_path / "sc")
    assert main(["run", str(folder), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    plan = tmp_path / "out" / "plan.json"
    assert main(["report", str(folder), "--plan", str(plan), "--out",
                 str(tmp_path / "r.xlsx")]) == 0
    assert main(["report", str(folder), "--out", str(tmp_path / "r.html")]) == 0
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert load_scenario(tmp_path / "r.xlsx").config.name == "tiny"
    assert main(["report", str(folder), "--out", str(tmp_path / "r.pdf")]) == 2
    assert main(["report", str(folder), "--plan", str(tmp_path / "none.json"),
                 "--out", str(tmp_path / "x.xlsx")]) == 2
    bad = write_scenario(tmp_path / "bad", budgets="project,gpu_hours,clusters\np1,lots,\n")
    assert main(["report", str(bad), "--out", str(tmp_path / "y.xlsx")]) == 2
    assert not (tmp_path / "x.xlsx").exists() and not (tmp_path / "y.xlsx").exists()
    assert "budgets.csv, row 2, column gpu_hours" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("chromium") is None,
                    reason="headless Chromium (chromium) is not on PATH: no screenshot taken")
def test_chromium_renders_a_screenshot(sample, tmp_path):  # pragma: no cover
    import subprocess

    from planner.reports.html import write_html

    scenario, plan, _, _ = sample
    page = write_html(plan, scenario, tmp_path / "report.html")
    shot = tmp_path / "report.png"
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                    f"--screenshot={shot}", "--window-size=1200,1600", page.as_uri()],
                   check=True, timeout=120)
    assert shot.stat().st_size > 0
