"""The quarterly report as an Excel workbook (openpyxl).

Sheets: *Summary* (capacity, utilization, budget vs. used vs. planned per area, a bar
chart, headline risks), *Budget tree* (the org tree with outline levels and live
``SUM`` subtotals), *Pacing* (cumulative spend per area by week against the even-pace
budget line, live formulas and a line chart), *Cluster use* (utilization per cluster and
week as a colour-scale heat map; guaranteed, opportunistic and reserved GPU-hours),
*Reservation plan* (placed and unplaced), *Next quarter* (how to
edit and re-plan), *About* (provenance), *Why* (per project and cluster, the rule that
binds it in the first period, its fair-share target against its grant, λ and the budget's
marginal value, from :mod:`planner.explain`), and then the scenario itself in the workbook
form ``planner run`` reads (sheets ``scenario``, ``clusters``, ``org``, ``budgets``,
``demand``, ``reservations``, ``usage``), pre-filled from this quarter.

The report's sheets are named so that none equals an input sheet ignoring case
(Excel refuses two sheets ``Budgets`` and ``budgets``); the loader skips them
(:data:`planner.inputs.schema.REPORT_SHEETS`).

Every user-provided string is written as a text cell (:func:`put_text`): an id such as
``=HYPERLINK("x")`` stays inert. The file's bytes depend only on the plan and the
scenario: document dates and zip entry times are the plan's ``as_of``.
"""

from __future__ import annotations

import datetime as dt
import io
import os
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from openpyxl import Workbook
from openpyxl.cell.cell import Cell
from openpyxl.chart import BarChart, LineChart, Reference, Series
from openpyxl.chart.series import SeriesLabel
from openpyxl.formatting.rule import ColorScaleRule
from openpyxl.styles import Alignment, Font, PatternFill
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet
from openpyxl.writer.excel import ExcelWriter

from planner.config import ModelConfig
from planner.explain import Explanation, Level, ProjectWhy, explain_all
from planner.inputs import Scenario
from planner.inputs.labels import format_labels
from planner.inputs.schema import (
    CONFIG_SHEET,
    LIST_SEPARATOR,
    NEXT_QUARTER_COLUMNS,
    NEXT_QUARTER_LINKS,
    REPORT_SHEETS,
    SCENARIO_SHEET_COLUMNS,
    TABLES,
    printable,
)
from planner.plan.write import write_files
from planner.reports.content import Report, build_report, report_verdict
from planner.summary import describe_periods, period_tiers
from planner.times import iso
from planner.words import RISKS, ngh_definition, plan_rates

SUMMARY, BUDGETS, PACING, CLUSTER_USE, RESERVATIONS, NEXT, ABOUT, WHY = REPORT_SHEETS

NGH = "#,##0"
PCT = "0.0%"
DATE = "yyyy-mm-dd hh:mm"
FONT = "Calibri"  # the workbook's font, named: a bold font without a name prints as a serif
BOLD = Font(name=FONT, bold=True)
MAX_INDENT = 250  # Excel's cell indent stops at 255
HEADER_FILL = PatternFill("solid", fgColor="DDE4EE")
HEADER_ALIGN = Alignment(wrap_text=True, vertical="bottom")
TITLE = Font(name=FONT, bold=True, size=14)
BASIS_FILL = {"actual": None, "actual, then planned": PatternFill("solid", fgColor="FFF2CC"),
              "planned": PatternFill("solid", fgColor="E2EFDA")}
AREA_COLORS = ("1F77B4", "FF7F0E", "2CA02C", "D62728", "9467BD", "8C564B", "E377C2",
               "7F7F7F", "BCBD22", "17BECF")  # one per area, cycled; pace line dashed


# --------------------------------------------------------------------------- cells


def put_text(cell: Cell, text: str) -> Cell:
    """Write ``text`` as a string cell, never a formula (``=…`` stays text).

    Control characters are escaped (:func:`printable`).
    """
    cell.value = printable(text)
    cell.data_type = "s"
    return cell


def put(ws: Worksheet, row: int, col: int, value: Any, fmt: str | None = None) -> Cell:
    """Write a value; strings always as text, timestamps as naive UTC datetimes."""
    cell = ws.cell(row=row, column=col)
    if isinstance(value, str):
        return put_text(cell, value)
    if isinstance(value, pd.Timestamp):
        value = value.tz_convert("UTC").tz_localize(None).to_pydatetime()
    cell.value = value
    if fmt:
        cell.number_format = fmt
    return cell


def put_formula(ws: Worksheet, row: int, col: int, formula: str, fmt: str | None = None) -> Cell:
    """Write a formula the report made itself (never one built from user text)."""
    cell = ws.cell(row=row, column=col)
    cell.value = formula
    if fmt:
        cell.number_format = fmt
    return cell


def header(ws: Worksheet, row: int, names: Sequence[str], col: int = 1) -> None:
    """A bold, shaded header row; long names wrap inside their column, never overflow."""
    for j, name in enumerate(names):
        cell = put(ws, row, col + j, name)
        cell.font = BOLD
        cell.fill = HEADER_FILL
        cell.alignment = HEADER_ALIGN


def widths(ws: Worksheet, values: Sequence[float]) -> None:
    """Column widths in characters, from column A."""
    for j, w in enumerate(values, start=1):
        ws.column_dimensions[get_column_letter(j)].width = w


def _date_format(value: Any) -> str | None:
    """The date format for a timestamp; none for anything else (a 1 stays 1, not 1899)."""
    return DATE if isinstance(value, pd.Timestamp | dt.datetime) else None


def fit_header_rows(ws: Worksheet) -> None:
    """Make each shaded header row tall enough for its wrapped names.

    Spreadsheets do not grow a row for wrapped text written by a library, and a wrapped
    name drawn in a row too short spills over the row above it (a title).
    """
    for row in ws.iter_rows():
        names = [c for c in row if c.fill == HEADER_FILL and isinstance(c.value, str)]
        if not names:
            continue
        lines = 1
        for cell in names:
            width = ws.column_dimensions[cell.column_letter].width or 8.43
            per_line = max(int(width) - 1, 1)
            words, count, used = cell.value.split(), 1, 0
            for word in words:  # greedy word wrap, as the spreadsheet does it
                if used and used + 1 + len(word) > per_line:
                    count, used = count + 1, len(word)
                else:
                    used += (1 if used else 0) + len(word)
            lines = max(lines, count)
        at = row[0].row
        ws.row_dimensions[at].height = max(ws.row_dimensions[at].height or 0, 15.0 * lines)


def _stamp(text: str) -> pd.Timestamp:
    return pd.Timestamp(text)


def _ref_runs(col: str, rows: Iterable[int]) -> str:
    """``C5:C7,C9`` for rows 5, 6, 7, 9: contiguous runs as ranges."""
    rows = sorted(rows)
    parts = []
    i = 0
    while i < len(rows):
        j = i
        while j + 1 < len(rows) and rows[j + 1] == rows[j] + 1:
            j += 1
        parts.append(f"{col}{rows[i]}" if i == j else f"{col}{rows[i]}:{col}{rows[j]}")
        i = j + 1
    return ",".join(parts)


# --------------------------------------------------------------------------- sheets


def _periods_text(plan: dict[str, Any]) -> str:
    """``46 × 24 h``, or a mixed grid's runs: ``48 × 1 h, 44 × 24 h``."""
    tiers = period_tiers(plan)
    if describe_periods(plan).endswith(" h"):  # uniform (a cut last period aside)
        return f"{len(plan['periods'])} × {plan['period_hours']:g} h"
    return ", ".join(f"{n} × {h:g} h" for n, h in tiers)


def _summary(ws: Worksheet, report: Report) -> None:
    plan = report.plan
    put(ws, 1, 1, f"Quarterly GPU report: {report.quarter}").font = TITLE
    for row, text, font in ((2, report_verdict(report), Font(name=FONT, bold=True, size=12)),
                            (3, ngh_definition(plan_rates(plan)) + ".", None)):
        cell = put(ws, row, 1, text)
        cell.alignment = Alignment(wrap_text=True, vertical="top")
        if font:
            cell.font = font
        ws.merge_cells(start_row=row, start_column=1, end_row=row, end_column=12)
        ws.row_dimensions[row].height = 33 if font else 18
    facts = [("Quarter", report.quarter),
             ("Quarter start", _stamp(plan["quarter_start"])),
             ("Quarter end", _stamp(plan["quarter_end"])),
             ("As of", _stamp(plan["as_of"])),
             ("Scenario", plan["scenario"]),
             ("Planning periods", _periods_text(plan))]
    for i, (key, value) in enumerate(facts, start=SUMMARY_FACTS):
        put(ws, i, 1, key).font = BOLD
        put(ws, i, 2, value, _date_format(value))

    row = len(facts) + SUMMARY_FACTS + 1
    put(ws, row, 1, "Capacity and utilization").font = BOLD
    row += 1
    cols = ["cluster", "GPU type", "GPUs", "NGH rate",
            "capacity GPU-h (as of → end)", "planned GPU-h", "planned %",
            "capacity NGH", "planned NGH",
            "capacity GPU-h (start → as of)", "used GPU-h", "used %"]
    header(ws, row, cols)
    first = row + 1
    for i, c in enumerate(report.clusters, start=first):
        values = [c.cluster, c.gpu_type, c.gpus, c.rate, c.capacity_gpu_h, c.planned_gpu_h,
                  c.planned_share, c.capacity_gpu_h * c.rate, c.planned_gpu_h * c.rate,
                  c.elapsed_capacity_gpu_h, c.used_gpu_h, c.used_share]
        fmts = [None, None, "#,##0", "0.00", NGH, NGH, PCT, NGH, NGH, NGH, NGH, PCT]
        for j, (v, f) in enumerate(zip(values, fmts, strict=True), start=1):
            put(ws, i, j, v, f)
    last = first + len(report.clusters) - 1
    total = last + 1
    put(ws, total, 1, "all clusters").font = BOLD
    for j in (3, 5, 6, 8, 9, 10, 11):
        letter = get_column_letter(j)
        put_formula(ws, total, j, f"=SUM({letter}{first}:{letter}{last})", NGH).font = BOLD
    put_formula(ws, total, 7, f"=IF(E{total}>0,F{total}/E{total},0)", PCT).font = BOLD
    put_formula(ws, total, 12, f"=IF(J{total}>0,K{total}/J{total},0)", PCT).font = BOLD

    row = total + 2
    put(ws, row, 1, "Budget vs. used vs. planned per area (NGH)").font = BOLD
    row += 1
    header(ws, row, ["area", "budget", "used", "planned", "forecast (used + planned)",
                     "forecast % of budget"])
    area_first = row + 1
    for i, a in enumerate(report.areas, start=area_first):
        put(ws, i, 1, a.node)
        for j, v in enumerate((a.budget, a.used, a.planned, a.forecast), start=2):
            put(ws, i, j, v, NGH)
        put(ws, i, 6, a.share if a.share is not None else 0.0, PCT)
    area_last = area_first + len(report.areas) - 1
    area_total = area_last + 1
    put(ws, area_total, 1, "institute").font = BOLD
    for j in range(2, 6):
        letter = get_column_letter(j)
        put_formula(ws, area_total, j, f"=SUM({letter}{area_first}:{letter}{area_last})",
                    NGH).font = BOLD
    put_formula(ws, area_total, 6, f"=IF(B{area_total}>0,E{area_total}/B{area_total},0)",
                PCT).font = BOLD

    chart = BarChart()
    chart.type = "col"
    chart.title = "Budget, used and planned per area (NGH)"
    chart.y_axis.title = "NGH"
    chart.y_axis.numFmt = "#,##0"
    data = Reference(ws, min_col=2, max_col=4, min_row=area_first - 1, max_row=area_last)
    chart.add_data(data, titles_from_data=True)
    chart.set_categories(Reference(ws, min_col=1, min_row=area_first, max_row=area_last))
    chart.height, chart.width = 8, 18
    ws.add_chart(chart, f"H{area_first - 1}")

    row = area_total + 2
    put(ws, row, 1, "Headline risks").font = BOLD
    for term in RISKS:  # the legend: one vocabulary, as planner status prints it
        row += 1
        flag = put(ws, row, 1, term.name)
        flag.font, flag.alignment = BOLD, Alignment(vertical="top")
        put(ws, row, 2, term.meaning).alignment = Alignment(wrap_text=True, vertical="top")
        ws.merge_cells(start_row=row, start_column=2, end_row=row, end_column=7)
        ws.row_dimensions[row].height = 15 * (1 + len(term.meaning) // 95)
    row += 2
    header(ws, row, ["risk", "project / request", "detail"])
    for i, risk in enumerate(report.risks, start=row + 1):
        put(ws, i, 1, risk.kind)
        put(ws, i, 2, risk.subject)
        put(ws, i, 3, risk.detail)
    if not report.risks:
        put(ws, row + 1, 1, "none")
    put(ws, row + max(len(report.risks), 1) + 2, 1,
        f"The sheets {ABOUT} (provenance) and {WHY} (the rule that binds each project) are "
        "hidden so that they do not print: right-click a sheet tab → Unhide to read them.")
    widths(ws, [28, 28, 10, 10, 16, 14, 11, 14, 14, 16, 14, 10])
    ws.freeze_panes = "A2"
    _landscape(ws)


SUMMARY_FACTS = 4  # the row of the first fact (Quarter), under the verdict and NGH


BUDGET_COLUMNS = ("node", "level", "budget NGH", "used NGH", "planned NGH",
                  "forecast NGH", "forecast % of budget", "weight")
LEVELS = ("area", "team")


def budget_tree_rows(report: Report) -> dict[str, int]:
    """The sheet row of each org node on the *Budget tree* sheet (header = row 1)."""
    return {r.node: i for i, r in enumerate(report.budget_rows, start=2)}


def _budgets(ws: Worksheet, report: Report) -> None:
    header(ws, 1, BUDGET_COLUMNS)
    at = budget_tree_rows(report)
    for r in report.budget_rows:
        i = at[r.node]
        put(ws, i, 1, r.node).alignment = Alignment(indent=min(2 * r.depth, MAX_INDENT))
        put(ws, i, 2, "project" if r.is_project else LEVELS[min(r.depth, 1)])
        if r.is_project:
            for j, v in enumerate((r.budget, r.used, r.planned, r.forecast), start=3):
                put(ws, i, j, v, NGH)
        else:
            kids = [at[k] for k in r.children]
            for j in range(3, 7):
                letter = get_column_letter(j)
                put_formula(ws, i, j, f"=SUM({_ref_runs(letter, kids)})", NGH).font = BOLD
            ws.cell(row=i, column=1).font = BOLD
        put_formula(ws, i, 7, f'=IF(C{i}>0,F{i}/C{i},"")', PCT)
        put(ws, i, 8, r.weight, "0.00")
        if r.depth:
            ws.row_dimensions[i].outline_level = min(r.depth, 7)
    ws.sheet_properties.outlinePr.summaryBelow = False
    last = len(report.budget_rows) + 1
    ws.freeze_panes = "B2"
    ws.auto_filter.ref = f"A1:H{last}"
    widths(ws, [36, 9, 14, 14, 14, 14, 12, 8])
    ws.print_title_rows = "1:1"
    _landscape(ws)


PACING_WEEK_ROWS = ("start", "end", "basis", "quarter elapsed")
PACING_PER_AREA = ("spend NGH", "cumulative NGH", "even pace NGH")
PACING_TOTAL = ("institute spend NGH", "institute cumulative NGH", "institute even pace NGH",
                "of which actual NGH", "opportunistic NGH (beyond budget)")
#: what column A says for a figure, under its area's (or the institute's) title row
PACING_LABEL = {"institute spend NGH": "spend NGH", "institute cumulative NGH": "cumulative NGH",
                "institute even pace NGH": "even pace NGH", "of which actual NGH": "actual NGH",
                "opportunistic NGH (beyond budget)": "opportunistic NGH"}
INSTITUTE = "institute"
PACING_LABEL_WIDTH = 16  # column A: the figures' short names ("cumulative NGH")
PACING_WEEK_WIDTH = 7.5  # at least; wider when a figure needs it (see _pacing)
PACING_MARGIN = 0.25  # left and right page margins, inches


def pacing_rows(report: Report) -> dict[tuple[str, str], int]:
    """Row of each (area, figure) on the *Pacing* sheet; area "" for weeks and institute.

    ``(area, "")`` is an area's title row, ``(INSTITUTE, "")`` the institute's. Weeks run
    across (column B is week 1) and the figures' names are short, so the sheet is as wide
    for 40 areas as for 4 and prints one page wide, landscape, at 8 pt or more.
    """
    at = {}
    row = 2
    for name in PACING_WEEK_ROWS:
        at[("", name)] = row
        row += 1
    for a in report.pacing:
        row += 1  # a blank row before each area
        at[(a.area, "")] = row
        row += 1
        for name in PACING_PER_AREA:
            at[(a.area, name)] = row
            row += 1
    row += 1
    at[(INSTITUTE, "")] = row
    row += 1
    for name in PACING_TOTAL:
        at[("", name)] = row
        row += 1
    return at


def _pacing(ws: Worksheet, report: Report) -> None:
    """Spend, cumulative spend and the even-pace line per area by week, and a line chart.

    One row a figure, one column a week; cumulative and pace cells are live formulas, the
    pace reading the area's budget subtotal on *Budget tree*.
    """
    at = pacing_rows(report)
    weeks = report.weeks
    header(ws, 1, ["week"] + [w.label for w in weeks])
    tree = budget_tree_rows(report)
    col = {w.number: get_column_letter(1 + w.number) for w in weeks}
    for (area, name), r in at.items():
        if name:
            put(ws, r, 1, PACING_LABEL.get(name, name)).alignment = Alignment(vertical="top")
        else:  # a title row: the area's name runs on over the empty week cells
            put(ws, r, 1, area).font = BOLD
    elapsed = at[("", "quarter elapsed")]
    for w in weeks:
        j, c = 1 + w.number, col[w.number]
        put(ws, at[("", "start")], j, w.start, "mm-dd")
        put(ws, at[("", "end")], j, w.end, "mm-dd")
        basis = put(ws, at[("", "basis")], j, w.basis)
        basis.alignment = Alignment(wrap_text=True, vertical="top")
        if BASIS_FILL[w.basis]:
            basis.fill = BASIS_FILL[w.basis]
        put(ws, elapsed, j, w.elapsed, PCT)
        for a in report.pacing:
            spend, cum = at[(a.area, "spend NGH")], at[(a.area, "cumulative NGH")]
            put(ws, spend, j, a.spend[w.number - 1], NGH)
            put_formula(ws, cum, j, f"={c}{spend}" if w.number == 1
                        else f"={col[w.number - 1]}{cum}+{c}{spend}", NGH)
            put_formula(ws, at[(a.area, "even pace NGH")], j,
                        f"='{BUDGETS}'!$C${tree[a.area]}*{c}${elapsed}", NGH)
        total, cum = at[("", PACING_TOTAL[0])], at[("", PACING_TOTAL[1])]
        spends = ",".join(f"{c}{at[(a.area, 'spend NGH')]}" for a in report.pacing)
        paces = ",".join(f"{c}{at[(a.area, 'even pace NGH')]}" for a in report.pacing)
        put_formula(ws, total, j, f"=SUM({spends})", NGH)
        put_formula(ws, cum, j, f"={c}{total}" if w.number == 1
                    else f"={col[w.number - 1]}{cum}+{c}{total}", NGH)
        put_formula(ws, at[("", PACING_TOTAL[2])], j, f"=SUM({paces})", NGH)
        put(ws, at[("", PACING_TOTAL[3])], j,
            sum(a.actual[w.number - 1] for a in report.pacing), NGH)
        put(ws, at[("", PACING_TOTAL[4])], j,
            sum(a.opportunistic[w.number - 1] for a in report.pacing), NGH)
    ws.row_dimensions[at[("", "basis")]].height = 45  # "actual, then planned": 3 lines
    last = max(at.values())
    as_of = _stamp(report.plan["as_of"]).strftime("%Y-%m-%d")
    notes = [
        f"Spend charged to budgets: usage up to {as_of} (basis actual), guaranteed and "
        "reserved grants of the plan after it (basis planned). The last cumulative figure "
        "is the area's forecast on Summary.",
        "Even pace: the area's budget (Budget tree) × the share of the quarter elapsed at "
        "the week's end. Opportunistic grants are beyond budget and not in spend.",
        ngh_definition(plan_rates(report.plan)) + ".",
    ]
    for k, line in enumerate(notes, start=last + 2):
        cell = put(ws, k, 1, line)
        cell.alignment = Alignment(wrap_text=True, vertical="top")
        ws.merge_cells(start_row=k, start_column=1, end_row=k, end_column=1 + len(weeks))
        ws.row_dimensions[k].height = 30

    chart = LineChart()
    chart.title = f"Cumulative spend vs. even pace per area (NGH; planned after {as_of})"
    chart.y_axis.title = "NGH"
    chart.y_axis.numFmt = "#,##0"
    chart.x_axis.title = "week of the quarter"
    for k, a in enumerate(report.pacing):
        color = AREA_COLORS[k % len(AREA_COLORS)]
        for name, dash in (("cumulative NGH", None), ("even pace NGH", "dash")):
            r = at[(a.area, name)]
            series = Series(Reference(ws, min_col=2, max_col=1 + len(weeks), min_row=r,
                                      max_row=r),
                            title=None)
            series.tx = SeriesLabel(v=f"{a.area} {name}")
            series.graphicalProperties.line.solidFill = color
            series.graphicalProperties.line.width = 22000 if dash is None else 15000
            if dash:
                series.graphicalProperties.line.dashStyle = dash
            series.marker.symbol = "none"
            series.smooth = False
            chart.series.append(series)
    chart.set_categories(Reference(ws, min_col=2, max_col=1 + len(weeks), min_row=1,
                                   max_row=1))
    chart.height, chart.width = 10, 24
    ws.add_chart(chart, f"A{last + len(notes) + 3}")

    ws.freeze_panes = "B2"
    # wide enough for the largest figure (the institute's budget), no wider: in the
    # workbook's font (Calibri 11), 14 weeks of "4,723,973" and the labels print one
    # landscape page wide at about 10 pt
    largest = max([1.0, sum(a.budget for a in report.pacing),
                   sum(a.cumulative[-1] for a in report.pacing if a.cumulative)])
    week_width = max(PACING_WEEK_WIDTH, len(f"{largest:,.0f}") + 0.5)
    widths(ws, [PACING_LABEL_WIDTH] + [week_width] * len(weeks))
    ws.print_title_rows = "1:1"
    ws.print_title_cols = "A:A"
    _landscape(ws)
    ws.page_margins.left = ws.page_margins.right = PACING_MARGIN


def _landscape(ws: Worksheet) -> None:
    """Print landscape, one page wide."""
    ws.page_setup.orientation = "landscape"
    ws.page_setup.fitToWidth = 1
    ws.page_setup.fitToHeight = 0
    ws.sheet_properties.pageSetUpPr.fitToPage = True


HEAT_COLUMNS = ("cluster", "GPU type", "GPUs")
KIND_COLUMNS = ("cluster", "guaranteed GPU-h", "opportunistic GPU-h", "reserved GPU-h",
                "granted GPU-h", "capacity GPU-h (as of → end)", "granted %")


def cluster_use_rows(report: Report) -> dict[str, int]:
    """Header rows of the *Cluster use* sheet's blocks: ``heat``, ``busy``, ``kinds``."""
    n = len(report.cluster_weeks)
    busy = n + 7  # heat map, blank, basis and week-hours rows, blank, title
    return {"heat": 1, "busy": busy, "kinds": busy + n + 4}


def _cluster_use(ws: Worksheet, report: Report) -> None:
    """Utilization per cluster and week as a colour-scale heat map, and grants by kind.

    Below the heat map: the busy GPU-hours behind it, then the grants from as_of by kind
    (guaranteed, opportunistic, reserved) with a stacked bar chart.
    """
    rows = cluster_use_rows(report)
    weeks = report.weeks
    first_week = len(HEAT_COLUMNS) + 1
    last_col = get_column_letter(len(HEAT_COLUMNS) + len(weeks))
    header(ws, 1, list(HEAT_COLUMNS) + [w.label for w in weeks])
    n = len(report.cluster_weeks)
    for i, c in enumerate(report.cluster_weeks, start=2):
        put(ws, i, 1, c.cluster)
        put(ws, i, 3, c.gpus, "#,##0")
        for j, share in enumerate(c.utilization, start=first_week):
            put(ws, i, j, share, "0%")
    for i, row in zip(range(2, n + 2), report.clusters, strict=True):
        put(ws, i, 2, row.gpu_type)
    if n:
        ws.conditional_formatting.add(
            f"{get_column_letter(first_week)}2:{last_col}{n + 1}",
            ColorScaleRule(start_type="num", start_value=0, start_color="F8696B",
                           mid_type="num", mid_value=0.8, mid_color="FFEB84",
                           end_type="num", end_value=1, end_color="63BE7B"))
    put(ws, n + 3, 1, "basis").font = BOLD
    put(ws, n + 4, 1, "week hours").font = BOLD
    for j, w in enumerate(weeks, start=first_week):
        cell = put(ws, n + 3, j, w.basis)
        if BASIS_FILL[w.basis]:
            cell.fill = BASIS_FILL[w.basis]
        put(ws, n + 4, j, (w.end - w.start).total_seconds() / 3600, "0")

    busy = rows["busy"]
    put(ws, busy - 1, 1, "Busy GPU-hours: usage before as of, all grants (guaranteed, "
                         "opportunistic, reserved) after it; utilization = busy ÷ (GPUs × "
                         "week hours)").font = BOLD
    header(ws, busy, ["cluster", "", ""] + [w.label for w in weeks])
    for i, c in enumerate(report.cluster_weeks, start=busy + 1):
        put(ws, i, 1, c.cluster)
        for j, value in enumerate(c.busy, start=first_week):
            put(ws, i, j, value, NGH)

    kinds = rows["kinds"]
    put(ws, kinds - 1, 1, "Grants as of → quarter end per cluster (GPU-hours)").font = BOLD
    header(ws, kinds, KIND_COLUMNS)
    for i, (c, row) in enumerate(zip(report.cluster_weeks, report.clusters, strict=True),
                                 start=kinds + 1):
        put(ws, i, 1, c.cluster)
        for j, value in enumerate((c.guaranteed, c.opportunistic, c.reserved), start=2):
            put(ws, i, j, value, NGH)
        put_formula(ws, i, 5, f"=SUM(B{i}:D{i})", NGH)
        put(ws, i, 6, row.capacity_gpu_h, NGH)
        put_formula(ws, i, 7, f"=IF(F{i}>0,E{i}/F{i},0)", PCT)
    last = kinds + n
    chart = BarChart()
    chart.type = "bar"
    chart.grouping = "stacked"
    chart.overlap = 100
    chart.title = "Guaranteed, opportunistic and reserved GPU-hours per cluster"
    chart.x_axis.numFmt = "#,##0"
    chart.add_data(Reference(ws, min_col=2, max_col=4, min_row=kinds, max_row=last),
                   titles_from_data=True)
    chart.set_categories(Reference(ws, min_col=1, min_row=kinds + 1, max_row=last))
    chart.height, chart.width = 8, 18
    ws.add_chart(chart, f"I{kinds - 1}")

    ws.freeze_panes = "B2"
    ws.auto_filter.ref = f"A1:{last_col}{n + 1}"
    widths(ws, [14, 12, 9] + [10] * len(weeks))
    ws.print_title_rows = "1:1"
    _landscape(ws)


def _reservations(ws: Worksheet, report: Report) -> None:
    plan = report.plan
    gpn = {c["cluster"]: c["gpus_per_node"] for c in plan["clusters"]}
    rate = {c["cluster"]: c["rate"] for c in plan["clusters"]}
    cols = ["request", "project", "cluster", "nodes", "start", "end", "hours", "GPU-hours",
            "NGH", "kept from previous plan"]
    header(ws, 1, cols)
    for i, r in enumerate(plan["reservations"], start=2):
        start, end = _stamp(r["start"]), _stamp(r["end"])
        hours = (end - start).total_seconds() / 3600
        gpu_h = r["nodes"] * gpn[r["cluster"]] * hours
        values = [r["request_id"], r["project"], r["cluster"], r["nodes"], start, end, hours,
                  gpu_h, gpu_h * rate[r["cluster"]], "yes" if r["kept"] else "no"]
        fmts = [None, None, None, "0", DATE, DATE, "0.#", NGH, NGH, None]
        for j, (v, f) in enumerate(zip(values, fmts, strict=True), start=1):
            put(ws, i, j, v, f)
    last = len(plan["reservations"]) + 1
    ws.auto_filter.ref = f"A1:J{max(last, 1)}"
    row = last + 2
    put(ws, row, 1, f"Unplaced requests ({len(plan['unplaced'])})").font = BOLD
    header(ws, row + 1, ["request", "project", "reason"])
    for i, u in enumerate(plan["unplaced"], start=row + 2):
        put(ws, i, 1, u["request_id"])
        put(ws, i, 2, u["project"])
        put(ws, i, 3, u["reason"])
    ws.freeze_panes = "A2"
    widths(ws, [12, 30, 12, 7, 17, 17, 8, 12, 12, 10])
    ws.print_title_rows = "1:1"
    _landscape(ws)


NEXT_COLUMNS = (*NEXT_QUARTER_COLUMNS, "budget NGH this quarter", "forecast NGH this quarter",
                "forecast % of budget")
EDIT_FILL = PatternFill("solid", fgColor="FFF2CC")
NEXT_LINES = (
    "This workbook is also a scenario that `planner run` reads. Next quarter's budget "
    "(NGH) and weight of each project are the yellow cells below: edit them here.",
    "The sheets budgets (gpu_hours) and org (a project's weight) read these cells "
    "(='Next quarter'!B12); a workbook whose budgets or org cells differ from this table "
    "is refused, naming both cells.",
    "The scenario sheets (scenario, clusters, org, budgets, demand, reservations, usage) "
    "are hidden so that they do not print: unhide them (right-click a sheet tab → Unhide) "
    "to change areas' and teams' weights, add projects or allowed clusters.",
    "In the sheet `scenario`, set quarter_start, quarter_end and as_of to the new quarter; "
    "infra replaces demand, reservations and usage.",
    "Re-plan: planner run THIS-FILE.xlsx (planner validate THIS-FILE.xlsx lists every "
    "problem at once). The other report sheets are ignored on input.",
)


def next_quarter_rows(report: Report) -> dict[str, int]:
    """The *Next quarter* row of each project (its budget in column B, weight in C)."""
    header_row = len(NEXT_LINES) + 3
    return {r.node: i for i, r in enumerate(report.projects, start=header_row + 1)}


def _next_quarter(ws: Worksheet, report: Report) -> None:
    put(ws, 1, 1, "Next quarter: edit, then re-plan").font = TITLE
    for i, line in enumerate(NEXT_LINES, start=2):
        put(ws, i, 1, line).alignment = Alignment(wrap_text=True, vertical="top")
        ws.merge_cells(start_row=i, start_column=1, end_row=i, end_column=len(NEXT_COLUMNS))
        ws.row_dimensions[i].height = 30
    at = next_quarter_rows(report)
    row = len(NEXT_LINES) + 3
    header(ws, row, NEXT_COLUMNS)
    for r in report.projects:
        i = at[r.node]
        put(ws, i, 1, r.node)
        put(ws, i, 2, r.budget, NGH).fill = EDIT_FILL
        put(ws, i, 3, r.weight, "0.00").fill = EDIT_FILL
        put(ws, i, 4, r.budget, NGH)
        put(ws, i, 5, r.forecast, NGH)
        put(ws, i, 6, r.share if r.share is not None else 0.0, PCT)
    ws.freeze_panes = f"B{row + 1}"
    ws.auto_filter.ref = f"A{row}:F{row + len(at)}"
    widths(ws, [36, 14, 11, 14, 14, 12])
    ws.row_dimensions[row].height = 30
    ws.print_title_rows = f"{row}:{row}"
    _landscape(ws)


def _about(ws: Worksheet, report: Report) -> None:
    plan = report.plan
    solver = plan["solver"]
    rows = [("scenario", plan["scenario"]), ("model", plan["model"]),
            ("solver", solver["name"]), ("solver status", solver["status"]),
            ("MIP gap", solver["mip_gap"]), ("input digest (sha256)", plan["input_digest"]),
            ("planner version", plan["planner_version"]), ("as of", _stamp(plan["as_of"])),
            ("plan schema version", plan["schema_version"])]
    header(ws, 1, ["field", "value"])
    for i, (key, value) in enumerate(rows, start=2):
        put(ws, i, 1, key).font = BOLD
        put(ws, i, 2, value, PCT if key == "MIP gap" else _date_format(value))
    row = len(rows) + 3
    header(ws, row, ["stage", "status", "objective", "bound", "gap"])
    for i, s in enumerate(solver["stages"], start=row + 1):
        for j, v in enumerate((s["name"], s["status"], s["objective"], s["bound"], s["gap"]),
                              start=1):
            put(ws, i, j, v, PCT if j == 5 else None)
    widths(ws, [24, 70, 14, 14, 10])
    _landscape(ws)


WHY_COLUMNS = ("project", "cluster", "binds", "demand GPU-h", "fair-share target GPU-h",
               "granted GPU-h", "of which opportunistic",
               "water level λ at the project's level (NGH per unit of weight)",
               "lookback usage NGH", "budget left NGH", "budget marginal value", "why")


def why_level(level: Level) -> float | str:
    """The Why sheet's water-level cell: λ where demand waits, else why there is none."""
    if not level.contended:
        return "not contended"
    if level.capacity <= 1e-6:
        return "demand waits: nothing to share"
    if level.lam is None:
        return "demand waits beyond budget"
    return level.lam


def _why(ws: Worksheet, whys: tuple[Explanation, ...] | None, model: str) -> None:
    """One row per project and cluster it wants in the first period; then unplaced requests."""
    header(ws, 1, WHY_COLUMNS)
    if whys is None:
        put(ws, 2, 1, f"The plan's model {model!r} is not a known planning model: "
                      "planner report --plan PLAN --model FILE.toml explains it.")
        return
    row = 2
    for ex in whys:
        s = ex.subject
        assert isinstance(s, ProjectWhy)
        common = [s.usage, s.budget_left, s.marginal_value]
        if not s.bindings:
            for j, v in enumerate([s.project, "", "no demand in this period", 0.0, 0.0, 0.0, 0.0,
                                   None, *common, ""], start=1):
                put(ws, row, j, v, NGH if isinstance(v, float) else None)
            row += 1
        for b in s.bindings:
            values = [s.project, b.cluster, b.kind, b.demand, b.target,
                      b.guaranteed + b.opportunistic, b.opportunistic,
                      why_level(b.levels[-1]) if b.levels else "", *common, b.detail]
            for j, v in enumerate(values, start=1):
                put(ws, row, j, v, ("0.000" if j in (8, 11) else NGH)
                    if isinstance(v, float) else None)
            row += 1
    last = row - 1
    ws.auto_filter.ref = f"A1:L{max(last, 1)}"
    row += 1
    period = f"{whys[0].period_start} → {whys[0].period_end}" if whys else ""
    put(ws, row, 1, f"The first period ({period}); planner explain PROJECT says more. Water "
                    "level λ, where demand waits among the project and its siblings: each "
                    "gets its weight × λ, less its recent (lookback) usage, never more than "
                    "it asks. " + ngh_definition() + ".")
    row += 2
    unplaced = [(ex.subject, u) for ex in whys for u in ex.subject.unplaced]
    put(ws, row, 1, f"Unplaced reservations ({len(unplaced)})").font = BOLD
    header(ws, row + 1, ["request", "project", "cluster", "nodes", "periods",
                         "earliest start that fits (window ignored)", "reason"])
    for i, (s, u) in enumerate(unplaced, start=row + 2):
        for j, v in enumerate([u.request_id, s.project, u.cluster, u.nodes, u.periods,
                               u.earliest_start or "none this quarter", u.reason], start=1):
            put(ws, i, j, v)
    ws.freeze_panes = "B2"
    widths(ws, [30, 12, 14, 12, 12, 12, 12, 12, 12, 12, 10, 90])
    _landscape(ws)


# --------------------------------------------------------------------------- scenario


def _input_value(kind: str, value: Any) -> Any:
    if kind == "list":
        return LIST_SEPARATOR.join(value)
    if kind == "labels":
        return format_labels(value)
    if kind == "datetime":
        return iso(value)
    if kind in ("id", "str"):
        return str(value)
    if kind == "int":
        return int(value)
    return float(value)


#: Input cells written as references to *Next quarter*: table → (key, column, its column).
LINKED = {name: link[:3] for name, link in NEXT_QUARTER_LINKS.items()}


def _scenario_sheets(book: Workbook, scenario: Scenario, links: dict[str, int]) -> None:
    """The scenario in the workbook form: ``scenario`` key/value rows and a sheet a table.

    ``links``: the *Next quarter* row of each project; its ``budgets`` ``gpu_hours`` and
    ``org`` ``weight`` are written as references to that row's cells (B and C).
    """
    cfg = scenario.config
    ws = book.create_sheet(CONFIG_SHEET)
    header(ws, 1, SCENARIO_SHEET_COLUMNS)
    entries: list[tuple[str, Any]] = [
        ("name", cfg.name), ("quarter_start", iso(cfg.quarter_start)),
        ("quarter_end", iso(cfg.quarter_end)), ("as_of", iso(cfg.as_of)),
        ("period_hours", cfg.period_hours), ("lookback_days", cfg.lookback_days)]
    entries += [(f"gpu_rates.{k}", float(v)) for k, v in cfg.gpu_rates.items()]
    for i, (key, value) in enumerate(entries, start=2):
        put(ws, i, 1, key)
        put(ws, i, 2, value)
    widths(ws, [22, 24])
    ws.freeze_panes = "A2"
    ws.sheet_state = "hidden"  # read by planner run, not printed (see Next quarter)
    for name, table in TABLES.items():
        ws = book.create_sheet(name)
        header(ws, 1, table.columns)
        frame = getattr(scenario, name)
        kinds = [f.kind for f in table.fields]
        # an optional column a scenario built in code may lack: its default
        columns = [frame[f.name].tolist() if f.name in frame else [f.default] * len(frame)
                   for f in table.fields]
        linked = LINKED.get(name)
        for i, values in enumerate(zip(*columns, strict=True), start=2):
            for j, (kind, value) in enumerate(zip(kinds, values, strict=True), start=1):
                if linked and table.columns[j - 1] == linked[1] and values[0] in links:
                    put_formula(ws, i, j, f"='{NEXT}'!{linked[2]}{links[values[0]]}")
                else:
                    put(ws, i, j, _input_value(kind, value))
        ws.freeze_panes = "A2"
        ws.auto_filter.ref = f"A1:{get_column_letter(len(table.columns))}{len(frame) + 1}"
        widths(ws, [24 if k in ("id", "str") else 21 if k == "datetime" else 12
                    for k in kinds])
        ws.sheet_state = "hidden"


# --------------------------------------------------------------------------- writing


def build_workbook(report: Report, scenario: Scenario, model: ModelConfig | None = None,
                   unbudgeted: Mapping[str, float] | None = None) -> Workbook:
    """The workbook in memory (``model``: the plan's lookback; default its ``model``).

    ``unbudgeted``: project -> NGH run on no budget, as
    :func:`~planner.explain.build_context` takes it (default: read from the scenario folder).
    """
    book = Workbook()
    book.remove(book.active)
    for name, fill in ((SUMMARY, _summary), (BUDGETS, _budgets), (PACING, _pacing),
                       (CLUSTER_USE, _cluster_use), (RESERVATIONS, _reservations),
                       (NEXT, _next_quarter), (ABOUT, _about)):
        fill(book.create_sheet(name), report)
    _why(book.create_sheet(WHY), explain_all(report.plan, scenario, model, unbudgeted),
         report.plan["model"])
    for ws in book.worksheets:
        fit_header_rows(ws)
    for name in (ABOUT, WHY):  # on screen after Unhide; not printed (Summary says so)
        book[name].sheet_state = "hidden"
    _scenario_sheets(book, scenario, next_quarter_rows(report))
    stamp = _stamp(report.plan["as_of"]).tz_convert("UTC").tz_localize(None).to_pydatetime()
    book.properties.created = stamp
    book.properties.modified = stamp
    book.properties.creator = "gpu-planner"
    book.properties.title = f"GPU report {report.quarter}"
    return book


def workbook_bytes(book: Workbook, stamp: dt.datetime) -> bytes:
    """The .xlsx bytes with fixed document and zip entry times (same inputs, same bytes)."""
    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as archive:
        ExcelWriter(book, archive).save()  # openpyxl's save() would stamp the clock time
    out = io.BytesIO()
    when = (max(stamp.year, 1980), stamp.month, stamp.day, stamp.hour, stamp.minute,
            stamp.second)
    with zipfile.ZipFile(raw) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            entry = zipfile.ZipInfo(info.filename, date_time=when)
            entry.compress_type = zipfile.ZIP_DEFLATED
            dst.writestr(entry, src.read(info.filename))
    return out.getvalue()


def write_workbook(plan: dict[str, Any], scenario: Scenario,
                   path: str | os.PathLike[str], model: ModelConfig | None = None,
                   unbudgeted: Mapping[str, float] | None = None) -> Path:
    """Write the report workbook of ``plan`` (planned from ``scenario``) to ``path``."""
    report = build_report(plan, scenario)
    book = build_workbook(report, scenario, model, unbudgeted)
    data = workbook_bytes(book, book.properties.created)
    target = Path(path)
    return write_files(target.parent, {target.name: data})[0]
