"""The quarterly report: the workbook read back, its scenario sheets re-planned, the HTML."""

from __future__ import annotations

import json
import re
import time

import openpyxl
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openpyxl.chart import LineChart
from openpyxl.utils import column_index_from_string, get_column_letter

from planner.config import load_model
from planner.inputs.load import load_scenario
from planner.inputs.schema import (
    CONFIG_SHEET,
    NEXT_QUARTER_COLUMNS,
    NEXT_QUARTER_SHEET,
    REPORT_SHEETS,
    TABLES,
)
from planner.reports.content import build_report
from planner.reports.workbook import (
    BUDGETS,
    CLUSTER_USE,
    PACING,
    RESERVATIONS,
    SUMMARY,
    cluster_use_rows,
    write_workbook,
)
from planner.run import SAMPLE, plan_scenario
from planner.words import number, percent
from tests.scenario_factory import write_scenario
from tests.system import need, need_font


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


# ------------------------------------------------- independent figures (plain pandas)


def _weeks(plan: dict) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """7-day weeks from quarter start, the last one cut at quarter end."""
    q0, q1 = pd.Timestamp(plan["quarter_start"]), pd.Timestamp(plan["quarter_end"])
    starts = list(pd.date_range(q0, q1, freq="7D", inclusive="left"))
    return list(zip(starts, starts[1:] + [q1], strict=True))


def _overlap(start: pd.Series, end: pd.Series, lo: pd.Timestamp, hi: pd.Timestamp) -> pd.Series:
    return ((end.clip(upper=hi) - start.clip(lower=lo)).dt.total_seconds() / 3600).clip(lower=0)


def _weekly(plan: dict, scenario) -> pd.DataFrame:
    """GPU-hours and NGH per (project, cluster, source, week): usage before as_of
    (``actual``), the plan's grants after it (``guaranteed``, ``opportunistic``,
    ``reserved``)."""
    as_of = pd.Timestamp(plan["as_of"])
    q0 = pd.Timestamp(plan["quarter_start"])
    usage = scenario.usage
    alloc = pd.DataFrame(plan["allocations"])
    periods = pd.DataFrame(plan["periods"])
    alloc = alloc.merge(periods, left_on="period_start", right_on="start")
    a_start, a_end = pd.to_datetime(alloc["start"]), pd.to_datetime(alloc["end"])
    a_hours = (a_end - a_start).dt.total_seconds() / 3600
    res = pd.DataFrame(plan["reservations"])
    gpn = {c["cluster"]: c["gpus_per_node"] for c in plan["clusters"]}
    r_start = pd.to_datetime(res["start"]).clip(lower=as_of)
    r_end = pd.to_datetime(res["end"])
    frames = []
    for w, (lo, hi) in enumerate(_weeks(plan), start=1):
        frames.append(pd.DataFrame({
            "project": usage["project"], "cluster": usage["cluster"], "source": "actual",
            "week": w, "gpu_h": usage["gpus"] * _overlap(usage["start"], usage["end"],
                                                          max(lo, q0), min(hi, as_of))}))
        frames.append(pd.DataFrame({
            "project": alloc["project"], "cluster": alloc["cluster"], "source": alloc["kind"],
            "week": w, "gpu_h": alloc["gpu_hours"] * _overlap(a_start, a_end, lo, hi) / a_hours}))
        frames.append(pd.DataFrame({
            "project": res["project"], "cluster": res["cluster"], "source": "reserved",
            "week": w, "gpu_h": res["nodes"] * res["cluster"].map(gpn)
            * _overlap(r_start, r_end, lo, hi)}))
    out = pd.concat(frames, ignore_index=True)
    rate = {c["cluster"]: c["rate"] for c in plan["clusters"]}
    out["ngh"] = out["gpu_h"] * out["cluster"].map(rate)
    return out


def _area_of(scenario):
    parent = dict(zip(scenario.org["id"], scenario.org["parent"], strict=True))

    def area(node: str) -> str:
        while parent[node]:
            node = parent[node]
        return node

    return area


def _subtree_sums(plan: dict, scenario) -> dict[str, list[float]]:
    """Budget, used and planned NGH summed over each org node's projects."""
    parent = dict(zip(scenario.org["id"], scenario.org["parent"], strict=True))
    sums: dict[str, list[float]] = {}
    for b in plan["budgets"]:
        node = parent[b["project"]]
        while node:
            acc = sums.setdefault(node, [0.0, 0.0, 0.0])
            acc[0] += b["budget"]
            acc[1] += b["used"]
            acc[2] += b["planned"]
            node = parent[node]
    return sums


def _expected_pacing(plan: dict, scenario) -> pd.DataFrame:
    """The Pacing sheet's figures by week, columns named as its header."""
    weekly = _weekly(plan, scenario)
    weekly["area"] = weekly["project"].map(_area_of(scenario))
    charged = weekly[weekly["source"] != "opportunistic"]
    spend = charged.pivot_table(index="week", columns="area", values="ngh", aggfunc="sum")
    weeks = _weeks(plan)
    q0, q1 = pd.Timestamp(plan["quarter_start"]), pd.Timestamp(plan["quarter_end"])
    elapsed = pd.Series([(hi - q0) / (q1 - q0) for _, hi in weeks], index=spend.index)
    areas = [n for n, up in zip(scenario.org["id"], scenario.org["parent"], strict=True) if not up]
    budgets = _subtree_sums(plan, scenario)
    out = {"quarter elapsed": elapsed}
    for a in areas:
        out[f"{a} spend NGH"] = spend[a]
        out[f"{a} cumulative NGH"] = spend[a].cumsum()
        out[f"{a} even pace NGH"] = budgets[a][0] * elapsed
    total = spend[areas].sum(axis=1)
    out["institute spend NGH"] = total
    out["institute cumulative NGH"] = total.cumsum()
    out["institute even pace NGH"] = sum(budgets[a][0] for a in areas) * elapsed
    by_source = weekly.pivot_table(index="week", columns="source", values="ngh", aggfunc="sum")
    out["of which actual NGH"] = by_source["actual"]
    out["opportunistic NGH (beyond budget)"] = by_source["opportunistic"]
    return pd.DataFrame(out)


def _sheet_frame(ws, rows: int) -> pd.DataFrame:
    """A sheet's table under its header row 1 (values as stored or as recalculated)."""
    data = list(ws.iter_rows(min_row=1, max_row=rows + 1, values_only=True))
    return pd.DataFrame(data[1:], columns=data[0], index=range(1, rows + 1))


def _pacing_cells(ws, plan: dict, scenario) -> dict[str, int]:
    """The Pacing sheet's row of each figure, by the names of _expected_pacing's columns.

    The sheet runs weeks across (column B is week 1), one figure a row under a title row
    per area and one for the institute; column A holds the figure's short name.
    """
    from planner.reports.workbook import PACING_LABEL, pacing_rows

    rows = pacing_rows(build_report(plan, scenario))
    out = {}
    for (area, name), r in rows.items():
        if not name:
            assert ws.cell(r, 1).value == area and ws.cell(r, 1).font.b  # the title row
            continue
        assert ws.cell(r, 1).value == PACING_LABEL.get(name, name)
        out[f"{area} {name}" if area else name] = r
    return out


def _pacing_frame(ws, plan: dict, scenario) -> pd.DataFrame:
    """The Pacing sheet as a table by week (index 1..weeks), a column per figure."""
    weeks = len(_weeks(plan))
    return pd.DataFrame({label: [ws.cell(r, 1 + w).value for w in range(1, weeks + 1)]
                         for label, r in _pacing_cells(ws, plan, scenario).items()},
                        index=range(1, weeks + 1))


REF = re.compile(r"(?:'([^']+)'!)?\$?([A-Z]{1,3})\$?(\d+)(?::\$?([A-Z]{1,3})\$?(\d+))?")


def _evaluate(wb, sheet: str, coordinate: str) -> float:
    """A cell's value, evaluating the report's own formulas (refs, ranges, SUM, + and *)."""
    value = wb[sheet][coordinate].value
    if not (isinstance(value, str) and value.startswith("=")):
        return float(value)

    def ref(m: re.Match) -> str:
        where = m.group(1) or sheet
        first_col, first_row = column_index_from_string(m.group(2)), int(m.group(3))
        last_col = column_index_from_string(m.group(4)) if m.group(4) else first_col
        last_row = int(m.group(5)) if m.group(5) else first_row
        return repr(sum(_evaluate(wb, where, f"{get_column_letter(c)}{r}")
                        for c in range(first_col, last_col + 1)
                        for r in range(first_row, last_row + 1)))

    expression = REF.sub(ref, value[1:])
    assert re.fullmatch(r"[0-9eE.+*(),SUM -]+", expression), value
    return eval(expression, {"__builtins__": {}}, {"SUM": lambda *xs: sum(xs)})


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
    expected = _subtree_sums(plan, scenario)

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


def test_pacing_sheet_equals_usage_and_plan_week_by_week(sample):
    scenario, plan, book, _ = sample
    wb = openpyxl.load_workbook(book)
    ws = wb[PACING]
    weeks = _weeks(plan)
    assert len(weeks) == 14  # 2026 Q4: 13 full weeks and Dec 31
    sheet = _pacing_frame(ws, plan, scenario)
    want = _expected_pacing(plan, scenario)
    row = _pacing_cells(ws, plan, scenario)
    assert set(want.columns) <= set(row)
    assert [ws.cell(1, 1 + w).value for w in range(1, len(weeks) + 1)] == [
        f"W{w} {lo:%m-%d}" for w, (lo, _) in enumerate(weeks, start=1)]
    for name in want.columns:
        for w in sheet.index:
            cell = f"{get_column_letter(1 + w)}{row[name]}"
            got = _evaluate(wb, PACING, cell)  # stored value, or the formula evaluated
            assert got == pytest.approx(want.at[w, name], rel=1e-9, abs=1e-6), (name, w)
    as_of = pd.Timestamp(plan["as_of"])
    for w, (lo, hi) in enumerate(weeks, start=1):
        assert sheet.at[w, "start"] == lo.tz_localize(None)
        assert sheet.at[w, "end"] == hi.tz_localize(None)
        basis = "actual" if hi <= as_of else "planned" if lo >= as_of else "actual, then planned"
        assert sheet.at[w, "basis"] == basis
    assert list(sheet["basis"]).count("actual, then planned") == 1  # as_of 11-16 is in W7

    # weeks add up to each project's used + planned (its forecast), opportunistic apart
    weekly = _weekly(plan, scenario)
    charged = weekly[weekly["source"] != "opportunistic"].groupby("project")["ngh"].sum()
    actual = weekly[weekly["source"] == "actual"].groupby("project")["ngh"].sum()
    opportunistic = weekly[weekly["source"] == "opportunistic"].groupby("project")["ngh"].sum()
    for b in plan["budgets"]:
        p = b["project"]
        assert charged.get(p, 0.0) == pytest.approx(b["used"] + b["planned"], rel=1e-9, abs=1e-6)
        assert actual.get(p, 0.0) == pytest.approx(b["used"], rel=1e-9, abs=1e-6)
        assert opportunistic.get(p, 0.0) == pytest.approx(b["planned_opportunistic"],
                                                          rel=1e-9, abs=1e-6)
    # the last cumulative figure is each area's forecast on the Summary sheet
    sums = _subtree_sums(plan, scenario)
    areas = [n for n, up in zip(scenario.org["id"], scenario.org["parent"], strict=True) if not up]
    last = get_column_letter(1 + len(weeks))
    for a in areas:
        assert _evaluate(wb, PACING, f"{last}{row[f'{a} cumulative NGH']}") == pytest.approx(
            sums[a][1] + sums[a][2], rel=1e-9)
    # the even-pace line reads the area's live subtotal on Budget tree
    pace = ws.cell(row[f"{areas[0]} even pace NGH"], 2).value
    assert pace.startswith(f"='{BUDGETS}'!$C$")

    (chart,) = ws._charts
    assert isinstance(chart, LineChart)
    assert len(chart.series) == 2 * len(areas)  # cumulative and even pace per area
    referenced = [s.val.numRef.f for s in chart.series]
    titles = [s.tx.v for s in chart.series]
    for a in areas:
        for name in ("cumulative NGH", "even pace NGH"):
            r = row[f"{a} {name}"]
            assert f"'{PACING}'!$B${r}:${last}${r}" in referenced
            assert f"{a} {name}" in titles
    assert ws.freeze_panes == "B2"
    assert ws.print_title_rows == "$1:$1" and ws.page_setup.orientation == "landscape"
    assert ws.cell(row[f"{areas[0]} spend NGH"], 2).number_format == "#,##0"


def test_cluster_use_heat_map_is_busy_over_capacity(sample):
    scenario, plan, book, _ = sample
    wb = openpyxl.load_workbook(book)
    ws = wb[CLUSTER_USE]
    weeks = _weeks(plan)
    weekly = _weekly(plan, scenario)
    busy = weekly.pivot_table(index="cluster", columns="week", values="gpu_h", aggfunc="sum")
    gpus = {c["cluster"]: c["nodes"] * c["gpus_per_node"] for c in plan["clusters"]}
    hours = [(hi - lo).total_seconds() / 3600 for lo, hi in weeks]
    names = [c["cluster"] for c in plan["clusters"]]
    heat = _sheet_frame(ws, len(names))
    assert list(heat["cluster"]) == names
    assert list(heat.columns[3:]) == [f"W{w} {lo:%m-%d}" for w, (lo, _) in
                                      enumerate(weeks, start=1)]
    for i, cluster in enumerate(names, start=1):
        for w, h in enumerate(hours, start=1):
            share = heat.iat[i - 1, 2 + w]
            assert share == pytest.approx(busy.at[cluster, w] / (gpus[cluster] * h), abs=1e-12)
            assert 0 <= share <= 1 + 1e-9
    rules = [(str(cf.sqref), rule.type) for cf in ws.conditional_formatting for rule in cf.rules]
    assert rules == [(f"D2:{get_column_letter(3 + len(weeks))}{len(names) + 1}", "colorScale")]

    rows = cluster_use_rows(build_report(plan, scenario))
    for i, cluster in enumerate(names, start=rows["busy"] + 1):
        assert ws.cell(i, 1).value == cluster
        for w in range(1, len(weeks) + 1):
            assert ws.cell(i, 3 + w).value == pytest.approx(busy.at[cluster, w], rel=1e-9)

    # grants from as_of by kind, straight from the plan's lists
    elastic = (pd.DataFrame(plan["allocations"])
               .pivot_table(index="cluster", columns="kind", values="gpu_hours", aggfunc="sum")
               .reindex(index=names, columns=["guaranteed", "opportunistic"]).fillna(0.0))
    as_of = pd.Timestamp(plan["as_of"])
    gpn = {c["cluster"]: c["gpus_per_node"] for c in plan["clusters"]}
    reserved: dict[str, float] = {}
    for r in plan["reservations"]:
        span = pd.Timestamp(r["end"]) - max(pd.Timestamp(r["start"]), as_of)
        reserved[r["cluster"]] = (reserved.get(r["cluster"], 0.0)
                                  + r["nodes"] * gpn[r["cluster"]] * span.total_seconds() / 3600)
    horizon = sum((pd.Timestamp(p["end"]) - pd.Timestamp(p["start"])).total_seconds() / 3600
                  for p in plan["periods"])
    assert [ws.cell(rows["kinds"], j).value for j in range(1, 8)][:4] == \
        ["cluster", "guaranteed GPU-h", "opportunistic GPU-h", "reserved GPU-h"]
    for i, cluster in enumerate(names, start=rows["kinds"] + 1):
        assert ws.cell(i, 1).value == cluster
        want = [float(elastic.at[cluster, k]) for k in ("guaranteed", "opportunistic")]
        want.append(reserved.get(cluster, 0.0))
        for j, value in enumerate(want, start=2):
            assert ws.cell(i, j).value == pytest.approx(value, rel=1e-9, abs=1e-6)
        assert _evaluate(wb, CLUSTER_USE, f"E{i}") == pytest.approx(sum(want), rel=1e-9)
        assert ws.cell(i, 6).value == pytest.approx(gpus[cluster] * horizon)
    assert len(ws._charts) == 1 and len(ws._charts[0].series) == 3
    assert ws.freeze_panes == "B2"
    assert ws.auto_filter.ref == f"A1:{get_column_letter(3 + len(weeks))}{len(names) + 1}"
    assert ws.print_title_rows == "$1:$1" and ws.page_setup.orientation == "landscape"


def test_report_sheets_come_first_are_skipped_on_input_and_never_clash(sample):
    _, _, book, _ = sample
    wb = openpyxl.load_workbook(book, read_only=True)
    assert wb.sheetnames[:len(REPORT_SHEETS)] == list(REPORT_SHEETS)
    inputs = {name.casefold() for name in (*TABLES, CONFIG_SHEET)}
    assert not {name.casefold() for name in REPORT_SHEETS} & inputs
    assert {PACING, CLUSTER_USE} <= set(REPORT_SHEETS)
    assert wb.sheetnames[len(REPORT_SHEETS):] == [CONFIG_SHEET, *TABLES]


def test_used_per_cluster_adds_up_to_the_plans_used_budget(sample):
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


def test_libreoffice_recalculates_the_same_totals_and_converts_to_pdf(sample, tmp_path):
    need("soffice", "pdftoppm",
         why="LibreOffice recalculation, PDF conversion and the docs' workbook picture")
    from planner.reports.screenshots import png_size, soffice_convert

    scenario, plan, book, _ = sample
    started = time.perf_counter()
    calc = soffice_convert(book, tmp_path / "calc", "xlsx")  # every formula recalculated
    print(f"LibreOffice recalculated the sample workbook in {time.perf_counter() - started:.1f} s")
    wb = openpyxl.load_workbook(calc, data_only=True)
    # Budget tree: each area and team subtotal as LibreOffice computed it
    tree = wb[BUDGETS]
    expected = _subtree_sums(plan, scenario)
    checked = 0
    for r in range(2, tree.max_row + 1):
        node = tree.cell(r, 1).value
        if tree.cell(r, 2).value == "project":
            continue
        budget, used, planned = expected[node]
        for col, want in ((3, budget), (4, used), (5, planned), (6, used + planned)):
            assert tree.cell(r, col).value == pytest.approx(want, abs=1e-3), (node, col)
        checked += 1
    assert checked == 16
    # Pacing: cumulative spend, even pace and institute columns, recalculated
    sheet = _pacing_frame(wb[PACING], plan, scenario)
    want = _expected_pacing(plan, scenario)
    for column in want.columns:
        assert sheet[column].to_numpy() == pytest.approx(want[column].to_numpy(), abs=1e-3), \
            column
    started = time.perf_counter()
    png = _render_workbook_picture(book, tmp_path)
    print(f"LibreOffice PDF + first page PNG in {time.perf_counter() - started:.1f} s")
    width, height = png_size(png)
    assert width > height > 300  # a landscape page at 60 dpi
    assert png.stat().st_size < 400_000


def test_libreoffice_prints_the_report_sheets_only_in_few_pages(sample, tmp_path):
    need("soffice", "pdfinfo", "pdftotext", why="printing the workbook with LibreOffice")
    import subprocess

    from planner.reports.screenshots import soffice_convert

    _, plan, book, _ = sample
    pdf = soffice_convert(book, tmp_path, "pdf")
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True)
    pages = int(re.search(r"^Pages:\s+(\d+)", info.stdout, re.M).group(1))
    print(f"LibreOffice prints the sample workbook in {pages} pages")
    assert 7 <= pages <= 25  # one at least per report sheet; was 411 with the inputs
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True,
                          check=True).stdout
    assert "job_id" not in text and "earliest_start" not in text  # inputs are not printed
    assert "Next quarter: edit, then re-plan" in text
    assert "1899" not in text  # no number printed as a date
    for u in plan["unplaced"]:
        assert u["request_id"] in text


def _word_heights(pdf, page: int) -> list[tuple[str, float]]:
    """(word, height in pt) of each word pdftotext finds on a page of ``pdf``."""
    import subprocess

    html = subprocess.run(["pdftotext", "-f", str(page), "-l", str(page), "-bbox", str(pdf),
                           "-"], capture_output=True, text=True, check=True).stdout
    return [(w, float(y1) - float(y0)) for y0, y1, w in re.findall(
        r'yMin="([0-9.]+)" xMax="[0-9.]+" yMax="([0-9.]+)">([^<]*)</word>', html)]


def test_libreoffice_prints_the_pacing_sheet_one_page_wide_at_8_pt_or_more(sample, tmp_path):
    # Letter landscape (LibreOffice's default paper here), fit to one page wide. The
    # printed size of a word is its box height over the box height of an 11 pt word
    # printed at 100 % (measured here, the same font): at least 8 pt for every word. In
    # the workbook's font, Calibri, as Excel prints it: LibreOffice needs Carlito (its
    # metric twin) for that, and with a wider stand-in (DejaVu Sans) prints at 7.1 pt.
    need("soffice", "pdftotext", "pdfinfo", why="printing the Pacing sheet with LibreOffice")
    need_font("Carlito", why="Calibri's metrics, so LibreOffice prints as Excel does")
    import subprocess

    from planner.reports.screenshots import soffice_convert

    _, plan, book, _ = sample
    reference = openpyxl.Workbook()
    reference.active["A1"] = "W1 10-01 1,234,567"
    reference.active.page_setup.scale = 100
    reference.save(tmp_path / "ref.xlsx")
    ref = soffice_convert(tmp_path / "ref.xlsx", tmp_path / "ref", "pdf")
    eleven = max(h for _, h in _word_heights(ref, 1))
    pdf = soffice_convert(book, tmp_path / "book", "pdf")
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True)
    pages = int(re.search(r"^Pages:\s+(\d+)", info.stdout, re.M).group(1))
    weeks = [f"W{w}" for w in range(1, 15)]
    found = []
    for page in range(1, pages + 1):
        words = _word_heights(pdf, page)
        texts = [w for w, _ in words]
        if "cumulative" in texts and "pace" in texts and "W1" in texts:
            found.append(page)
            assert all(w in texts for w in weeks), page  # all 14 weeks: one page wide
            smallest = min(h for w, h in words if w in weeks or re.fullmatch(r"[\d,]+", w))
            size = 11 * smallest / eleven
            print(f"Pacing page {page}: figures printed at {size:.1f} pt")
            assert size >= 8.0, size
    assert found, "no page of the Pacing sheet"


def _render_workbook_picture(book, out_dir):
    from planner.reports.screenshots import WORKBOOK_PNG, pdf_page_png, soffice_convert

    pdf = soffice_convert(book, out_dir / "pdf", "pdf")
    assert pdf.read_bytes().startswith(b"%PDF")
    return pdf_page_png(pdf, out_dir / WORKBOOK_PNG)


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
    assert "http://" not in re.sub(r'xmlns(:\w+)?="[^"]*"', "", html)  # namespaces only


def test_weekly_sheets_of_a_small_scenario_with_hostile_area_names(tmp_path):
    """Two areas named like markup and a formula; usage, demand and reservations."""
    from planner.reports.html import render_html

    script, formula = "<script>alert(1)</script>", "=1+1"
    org = (f"id,parent,weight\n{script},,1\n{formula},,1\nvision,{script},2\n"
           f"language,{formula},1\np1,vision,1\np2,vision,1\np3,language,1\np4,language,0.5\n")
    folder = write_scenario(tmp_path / "sc", org=org)
    scenario = load_scenario(folder)
    plan = plan_scenario(scenario, load_model("default")).plan.body
    assert plan["reservations"] and len(scenario.usage) == 3
    book = write_workbook(plan, scenario, tmp_path / "r.xlsx")
    wb = openpyxl.load_workbook(book)
    ws = wb[PACING]
    weeks = _weeks(plan)
    want = _expected_pacing(plan, scenario)
    row = _pacing_cells(ws, plan, scenario)
    title = ws.cell(row[f"{formula} spend NGH"] - 1, 1)  # the area's title row: text
    assert title.value == formula and title.data_type == "s"
    for name in want.columns:
        for w in range(1, len(weeks) + 1):
            got = _evaluate(wb, PACING, f"{get_column_letter(1 + w)}{row[name]}")
            assert got == pytest.approx(want.at[w, name], rel=1e-9, abs=1e-6), (name, w)
    sums = _subtree_sums(plan, scenario)
    for a in (script, formula):
        assert want[f"{a} cumulative NGH"].iat[-1] == pytest.approx(sums[a][1] + sums[a][2])
    assert list(want["of which actual NGH"] > 0).count(True) == 3  # weeks of j1, j2, j3
    heat = wb[CLUSTER_USE]
    weekly = _weekly(plan, scenario)
    busy = weekly.pivot_table(index="cluster", columns="week", values="gpu_h", aggfunc="sum")
    for i, c in enumerate(plan["clusters"], start=2):
        gpus = c["nodes"] * c["gpus_per_node"]
        for w, (lo, hi) in enumerate(weeks, start=1):
            assert heat.cell(i, 3 + w).value == pytest.approx(
                busy.at[c["cluster"], w] / (gpus * (hi - lo).total_seconds() / 3600), abs=1e-12)
    html = render_html(plan, scenario)
    assert "<script" not in html
    # the pacing chart's legend, as matplotlib's SVG writer escaped it
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt; cumulative spend</text>") == 1


def test_html_report_of_the_sample(sample):
    from planner.reports.html import render_html

    scenario, plan, _, _ = sample
    started = time.perf_counter()
    html = render_html(plan, scenario)
    print(f"sample HTML rendered in {time.perf_counter() - started:.3f} s")
    # the headline risks come first, before any chart or table of figures
    risks = re.search(r'<table id="risks">.*?</table>', html, re.S)
    assert risks.start() < html.index('<svg id="area-chart"') < html.index('id="pacing-chart"')
    report = build_report(plan, scenario)
    assert risks.group(0).count("<tr class=") == len(report.risks) > 0
    # the area chart (matplotlib): an x label per area and a legend entry per series
    chart = re.search(r'<svg id="area-chart".*?</svg>', html, re.S).group(0)
    texts = re.findall(r"<text [^>]*>([^<]*)</text>", chart)
    assert [a.node for a in report.areas] == [t for t in texts if t in
                                              {a.node for a in report.areas}]
    assert {"budget", "used", "planned", "NGH"} <= set(texts)
    assert render_html(plan, scenario) == html  # same plan, same bytes
    for b in plan["budgets"]:
        assert f">{b['project']}</td>" in html
    for u in plan["unplaced"]:
        assert u["request_id"] in html
    assert "<link" not in html and "src=" not in html  # self-contained


def test_html_has_the_pacing_chart_and_the_heat_map(sample):
    from planner.reports.html import pacing_series, render_html

    scenario, plan, _, _ = sample
    html = render_html(plan, scenario)
    areas = [n for n, up in zip(scenario.org["id"], scenario.org["parent"], strict=True) if not up]
    weeks = _weeks(plan)
    svg = re.search(r'<svg id="pacing-chart".*?</svg>', html, re.S).group(0)
    labels = [f"{a} {what}" for a in areas for what in ("cumulative spend", "even pace")]
    texts = re.findall(r"<text [^>]*>([^<]*)</text>", svg)
    assert [t for t in texts if t in labels] == labels  # the legend, in order
    # the lines matplotlib drew: 0 at quarter start, then each week's end
    want = _expected_pacing(plan, scenario)
    series = pacing_series(build_report(plan, scenario))
    assert [s.label for s in series] == labels
    for line in series:
        area, what = line.label.rsplit(" ", 2)[0], line.label.split(" ", 1)[1]
        column = f"{area} {'cumulative' if what == 'cumulative spend' else 'even pace'} NGH"
        assert line.values[0] == 0 and len(line.values) == len(weeks) + 1
        assert line.values[1:] == pytest.approx(want[column].to_numpy(), abs=1e-6), column
        assert line.times[1:] == tuple(hi for _, hi in weeks)
    # the pacing table: cumulative spend and even pace per area, as the workbook has them
    want = _expected_pacing(plan, scenario)
    table = re.search(r'<table id="pacing".*?</table>', html, re.S).group(0)
    rows = re.findall(r"<tr><td>(W\d+) .*?</tr>", table, re.S)
    assert rows == [f"W{w}" for w in range(1, len(weeks) + 1)]
    for w, body in enumerate(re.findall(r"<tr><td>W\d+ .*?</tr>", table, re.S), start=1):
        cells = re.findall(r'<td class="n">([^<]*)</td>', body)
        # one rounding mode, the spreadsheet's (half away from zero): W5's 57,234.5 NGH
        # reads 57,235 here as in the workbook, where Python's format gives 57,234
        expected = [percent(want.at[w, "quarter elapsed"])]
        for a in areas:
            expected += [number(want.at[w, f"{a} cumulative NGH"]),
                         number(want.at[w, f"{a} even pace NGH"])]
        expected.append(number(want.at[w, "opportunistic NGH (beyond budget)"]))
        assert cells == expected, w
    # the heat map: busy ÷ capacity per cluster and week, coloured
    weekly = _weekly(plan, scenario)
    busy = weekly.pivot_table(index="cluster", columns="week", values="gpu_h", aggfunc="sum")
    heat = re.search(r'<table class="heat compact" id="heat-map">.*?</table>', html, re.S).group(0)
    for c in plan["clusters"]:
        gpus = c["nodes"] * c["gpus_per_node"]
        row = re.search(rf"<tr><td>{re.escape(c['cluster'])}</td>.*?</tr>", heat, re.S).group(0)
        cells = re.findall(r'<td class="u" style="background: (#[0-9a-f]{6})">([^<]+)</td>', row)
        assert [text for _, text in cells] == [
            f"{100 * busy.at[c['cluster'], w] / (gpus * (hi - lo).total_seconds() / 3600):.0f} %"
            for w, (lo, hi) in enumerate(weeks, start=1)]
    assert heat.count('class="u" style="background: #') == len(plan["clusters"]) * len(weeks)


def test_heat_colours_follow_the_workbooks_colour_scale():
    from planner.reports.html import heat_color

    # stops as the workbook's ColorScaleRule: 0 red F8696B, 0.8 yellow FFEB84, 1 green 63BE7B
    assert [heat_color(x) for x in (-0.1, 0.0, 0.8, 1.0, 1.2)] == \
        ["#f8696b", "#f8696b", "#ffeb84", "#63be7b", "#63be7b"]
    # halfway from yellow to green: (ff+63)/2 = 177 = b1, (eb+be)/2 = 212.5 → 212 = d4,
    # (84+7b)/2 = 127.5 → 128 = 80 (round half to even)
    assert heat_color(0.9) == "#b1d480"


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


def test_cli_report_reads_the_scenario_folder_once_with_its_unbudgeted_csv(tmp_path, capsys,
                                                                            monkeypatch):
    # as planner explain: the scenario and its unbudgeted.csv from one read of the folder
    # (two before: the Why pages read the file, and the folder again to check it), and the
    # HTML's Why lines say p2's 4,224 NGH on no budget (16 GPUs x 264 h x rate 1) beside its
    # used 48 (tests.test_explain's hand-worked instance); the workbook the same one read
    from planner.cli import main
    from tests.test_explain import OVERDRAWN_USAGE, counted_reads, unbudgeted_scenario

    folder = unbudgeted_scenario(tmp_path / "sc")
    assert main(["run", str(folder), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    plan = str(tmp_path / "out" / "plan.json")
    reads = counted_reads(monkeypatch)
    assert main(["report", str(folder), "--plan", plan, "--out",
                 str(tmp_path / "r.html")]) == 0
    assert reads == [folder]
    page = (tmp_path / "r.html").read_text()
    assert "used 48.0 and 4,224.0 NGH run on no budget" in page
    assert page.count("run on no budget") == 1  # p2's only: p1 and p3 ran none
    reads.clear()
    assert main(["report", str(folder), "--plan", plan, "--out",
                 str(tmp_path / "r.xlsx")]) == 0
    assert reads == [folder]
    # a broken unbudgeted.csv: exit 2 naming the file and the column, no report written
    (folder / "unbudgeted.csv").write_text(OVERDRAWN_USAGE.splitlines(keepends=True)[0]
                                           + "hog,p2,h100-a,many,2026-10-20,2026-10-31\n")
    capsys.readouterr()
    assert main(["report", str(folder), "--plan", plan, "--out",
                 str(tmp_path / "bad.html")]) == 2
    err = capsys.readouterr().err
    assert "unbudgeted.csv" in err and "gpus" in err
    assert not (tmp_path / "bad.html").exists()


def test_chromium_renders_a_screenshot(sample, tmp_path):
    need("chromium", why="the HTML report's screenshot in headless Chromium")
    from planner.reports.html import write_html
    from planner.reports.screenshots import HTML_PNG, html_screenshot, png_size

    scenario, plan, _, _ = sample
    page = write_html(plan, scenario, tmp_path / "report.html")
    started = time.perf_counter()
    shot = html_screenshot(page, tmp_path / HTML_PNG)
    print(f"Chromium screenshot in {time.perf_counter() - started:.1f} s")
    assert png_size(shot) == (900, 1950)  # 1200 × 2600 CSS pixels at scale 0.75
    assert 20_000 < shot.stat().st_size < 400_000  # a page drawn, small enough to commit


# ------------------------------------------------------------- Next quarter, print setup


def _next_quarter_cells(ws) -> dict[str, int]:
    """Project → row of the *Next quarter* table, found by its header as a person would."""
    rows = {}
    inside = False
    for row in ws.iter_rows(min_col=1, max_col=3):
        values = tuple(c.value for c in row)
        if inside and values[0]:
            rows[values[0]] = row[0].row
        inside = inside or values == NEXT_QUARTER_COLUMNS
    return rows


def test_editing_next_quarter_changes_the_plan(sample, tmp_path, capsys):
    from planner.cli import main

    scenario, plan, book, _ = sample
    # the project whose budget binds hardest: halving it must move GPU-hours away
    binding = max(plan["budgets"], key=lambda b: (b["marginal_value"], b["project"]))
    assert binding["marginal_value"] > 0
    wb = openpyxl.load_workbook(book)
    sheet = wb[NEXT_QUARTER_SHEET]
    at = _next_quarter_cells(sheet)
    assert set(at) == set(scenario.budgets["project"])
    row = at[binding["project"]]
    assert sheet.cell(row, 2).value == pytest.approx(binding["budget"])
    new_budget = round(binding["budget"] / 2)
    sheet.cell(row, 2).value = new_budget  # a person types a number over the yellow cell
    edited = tmp_path / "edited.xlsx"
    wb.save(edited)
    assert main(["run", str(edited), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    replanned = json.loads((tmp_path / "out" / "plan.json").read_text())
    after = {b["project"]: b for b in replanned["budgets"]}
    assert after[binding["project"]]["budget"] == new_budget
    assert after[binding["project"]]["planned"] <= new_budget - binding["used"] + 1e-6 or \
        after[binding["project"]]["planned"] == 0
    assert after[binding["project"]]["planned"] < binding["planned"]
    others = {b["project"]: b["budget"] for b in plan["budgets"]}
    others.pop(binding["project"])
    assert all(after[p]["budget"] == v for p, v in others.items())  # nothing else moved
    # a weight edited on Next quarter reaches the org tree the planner reads
    wb = openpyxl.load_workbook(edited)
    wb[NEXT_QUARTER_SHEET].cell(row, 3).value = 7.5
    wb.save(edited)
    again = load_scenario(edited)
    weight = dict(zip(again.org["id"], again.org["weight"], strict=True))
    assert weight[binding["project"]] == 7.5


def test_an_input_cell_that_disagrees_with_next_quarter_is_refused(sample, tmp_path, capsys):
    from planner.cli import main

    _, plan, book, _ = sample
    project = plan["budgets"][3]["project"]
    wb = openpyxl.load_workbook(book)
    at = _next_quarter_cells(wb[NEXT_QUARTER_SHEET])
    budgets = wb["budgets"]
    row = next(c.row for c in budgets["A"] if c.value == project)
    assert budgets.cell(row, 2).value == f"='{NEXT_QUARTER_SHEET}'!B{at[project]}"
    budgets.cell(row, 2).value = 123.0  # typed over the input sheet instead of Next quarter
    org = wb["org"]
    org_row = next(c.row for c in org["A"] if c.value == project)
    org.cell(org_row, 3).value = 9
    bad = tmp_path / "bad.xlsx"
    wb.save(bad)
    assert main(["run", str(bad), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = " ".join(capsys.readouterr().err.split())  # rich wraps at the terminal's width
    assert (f"bad.xlsx[budgets], row {row}, column gpu_hours: 123 differs from "
            f"'{NEXT_QUARTER_SHEET}'!B{at[project]}") in err
    assert f"bad.xlsx[org], row {org_row}, column weight: 9 differs from " \
           f"'{NEXT_QUARTER_SHEET}'!C{at[project]}" in err
    assert not (tmp_path / "out").exists()


def test_reference_resolution_reads_only_formula_cells(tmp_path):
    from planner.inputs.read import resolve_reference

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "It's"
    ws["B2"] = 42.0
    ws["C3"] = "=SUM(B2)"
    other = wb.create_sheet("o")
    cases = {"A1": ("='It''s'!B2", "f", 42.0),  # a reference: the cell's value
             "A2": ("='It''s'!$B$2", "f", 42.0),
             "A3": ("='It''s'!B2", "s", "='It''s'!B2"),  # text stays text
             "A4": ("='It''s'!C3", "f", "='It''s'!C3"),  # one step only
             "A5": ("=Nope!B2", "f", "=Nope!B2"),  # no such sheet
             "A6": ("='It''s'!B2+1", "f", "='It''s'!B2+1")}  # not a plain reference
    for coordinate, (text, kind, _) in cases.items():
        other[coordinate] = text
        other[coordinate].data_type = kind
    for coordinate, (_, _, want) in cases.items():
        assert resolve_reference(wb, other[coordinate]) == want, coordinate


def test_about_and_summary_print_numbers_as_numbers_and_headers_fit(sample):
    _, plan, book, _ = sample
    wb = openpyxl.load_workbook(book)
    about = {ws_row[0].value: ws_row[1] for ws_row in wb["About"].iter_rows(max_col=2)}
    assert about["plan schema version"].value == plan["schema_version"]
    assert about["plan schema version"].number_format == "General"
    assert about["as of"].number_format == "yyyy-mm-dd hh:mm"
    use = wb[CLUSTER_USE]
    kinds = cluster_use_rows(build_report(plan, load_scenario(SAMPLE)))["kinds"]
    # "capacity GPU-h (as of → end)" wraps to three lines in a 10-wide column
    assert use.row_dimensions[kinds].height >= 45
    assert use.cell(kinds - 1, 1).value.startswith("Grants")
    for ws in wb.worksheets:
        report_sheet = ws.title in REPORT_SHEETS
        # About and Why are hidden (not printed); the scenario's sheets too
        shown = report_sheet and ws.title not in ("About", "Why")
        assert (ws.sheet_state == "visible") == shown, ws.title
        if report_sheet:
            assert ws.page_setup.orientation == "landscape"
            assert ws.page_setup.fitToWidth == 1 and ws.sheet_properties.pageSetUpPr.fitToPage


def test_report_refuses_a_plan_of_another_scenario(tmp_path, capsys):
    from planner.cli import main

    folder = write_scenario(tmp_path / "sc")
    assert main(["run", str(folder), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    plan = tmp_path / "out" / "plan.json"
    # the same scenario with one budget changed: the plan does not describe it
    budgets = (folder / "budgets.csv").read_text()
    other = write_scenario(tmp_path / "other", budgets=budgets.replace("p1,", "p1,1", 1))
    capsys.readouterr()
    assert main(["report", str(other), "--plan", str(plan), "--out",
                 str(tmp_path / "r.xlsx")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"plan.json, column input_digest: planned from other inputs than {other}" in err
    assert not (tmp_path / "r.xlsx").exists()
    # the scenario it was planned from is accepted
    assert main(["report", str(folder), "--plan", str(plan), "--out",
                 str(tmp_path / "ok.html")]) == 0


def _tiny_report(tmp_path):
    folder = write_scenario(tmp_path / "sc")
    scenario = load_scenario(folder)
    plan = plan_scenario(scenario, load_model("default")).plan.body
    return write_workbook(plan, scenario, tmp_path / "tiny.xlsx")


def test_a_next_quarter_row_for_a_project_not_in_budgets_is_refused(tmp_path, capsys):
    from planner.cli import main

    book = _tiny_report(tmp_path)
    wb = openpyxl.load_workbook(book)
    sheet = wb[NEXT_QUARTER_SHEET]
    last = max(_next_quarter_cells(sheet).values())
    sheet.cell(last + 1, 1).value = "p-new"  # a person adds a project here only
    sheet.cell(last + 1, 2).value = 500
    sheet.cell(last + 1, 3).value = 1
    wb.save(book)
    assert main(["validate", str(book)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert (f"tiny.xlsx[{NEXT_QUARTER_SHEET}], row {last + 1}, column project: p-new is not "
            "in the budgets sheet") in err


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_budgets_and_weights_typed_on_next_quarter_are_what_is_read(tmp_path, data):
    book = tmp_path / "tiny.xlsx"
    if not book.exists():
        _tiny_report(tmp_path)
    wb = openpyxl.load_workbook(book)
    sheet = wb[NEXT_QUARTER_SHEET]
    at = _next_quarter_cells(sheet)
    typed = {}
    for project, row in at.items():
        budget = data.draw(st.one_of(st.integers(0, 10**7),
                                     st.floats(0, 1e7, allow_nan=False).map(lambda x: round(x, 3))))
        weight = data.draw(st.floats(0.01, 100).map(lambda x: round(x, 4)))
        sheet.cell(row, 2).value, sheet.cell(row, 3).value = budget, weight
        typed[project] = (float(budget), weight)
    edited = tmp_path / "edited.xlsx"
    wb.save(edited)
    scenario = load_scenario(edited)
    budgets = dict(zip(scenario.budgets["project"], scenario.budgets["gpu_hours"], strict=True))
    weights = dict(zip(scenario.org["id"], scenario.org["weight"], strict=True))
    assert {p: (budgets[p], weights[p]) for p in typed} == typed
