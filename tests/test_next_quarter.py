"""The report workbook's *Next quarter* sheet is read by project id, never by position.

The ``budgets`` and ``org`` sheets refer to it by cell (``='Next quarter'!B12``). A row
inserted into the sheet by a tool that does not rewrite references (openpyxl; a script)
used to move every budget below it to the next project: a 75,661 NGH budget became 5,
silently. Now each linked cell reads its own project's row, and a row with a budget but
no project is refused naming its cell.
"""

from __future__ import annotations

from pathlib import Path

import openpyxl
import pytest

from planner.cli import main
from planner.config import load_model
from planner.inputs.load import load_scenario
from planner.inputs.schema import NEXT_QUARTER_COLUMNS, NEXT_QUARTER_SHEET
from planner.reports.workbook import write_workbook
from planner.run import plan_scenario
from tests.scenario_factory import write_scenario


@pytest.fixture(scope="module")
def book(tmp_path_factory) -> Path:
    """The tiny scenario's report workbook (a scenario too)."""
    tmp = tmp_path_factory.mktemp("nq")
    scenario = load_scenario(write_scenario(tmp / "sc"))
    plan = plan_scenario(scenario, load_model("default")).plan.body
    return write_workbook(plan, scenario, tmp / "tiny.xlsx")


def table_rows(sheet) -> dict[str, int]:
    """Project → its row of the *Next quarter* table."""
    rows, inside = {}, False
    for row in sheet.iter_rows(min_col=1, max_col=3):
        values = tuple(c.value for c in row)
        if inside and values[0]:
            rows[values[0]] = row[0].row
        inside = inside or values == NEXT_QUARTER_COLUMNS
    return rows


def budgets_and_weights(path: Path) -> tuple[dict, dict]:
    scenario = load_scenario(path)
    return (dict(zip(scenario.budgets["project"], scenario.budgets["gpu_hours"], strict=True)),
            dict(zip(scenario.org["id"], scenario.org["weight"], strict=True)))


def edited(book: Path, tmp_path: Path, edit) -> Path:
    wb = openpyxl.load_workbook(book)
    edit(wb[NEXT_QUARTER_SHEET])
    out = tmp_path / "edited.xlsx"
    wb.save(out)
    return out


def test_a_row_with_a_budget_and_no_project_is_refused_naming_its_cell(book, tmp_path, capsys):
    second = sorted(table_rows(openpyxl.load_workbook(book)[NEXT_QUARTER_SHEET]).values())[1]

    def insert(sheet):
        sheet.insert_rows(second)  # openpyxl moves the cells, not the references to them
        sheet.cell(second, 2).value = 5

    path = edited(book, tmp_path, insert)
    assert main(["validate", str(path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert (f"edited.xlsx[{NEXT_QUARTER_SHEET}], row {second}, column project: "
            f"'{NEXT_QUARTER_SHEET}'!A{second} is empty, but the row holds a budget") in err
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    assert not (tmp_path / "out").exists()


def test_an_empty_row_inserted_moves_no_budget(book, tmp_path):
    second = sorted(table_rows(openpyxl.load_workbook(book)[NEXT_QUARTER_SHEET]).values())[1]
    path = edited(book, tmp_path, lambda sheet: sheet.insert_rows(second))
    assert budgets_and_weights(path) == budgets_and_weights(book)
    assert load_scenario(path).digest == load_scenario(book).digest


def test_the_table_sorted_another_way_moves_no_budget(book, tmp_path):
    """Rows swapped under the input sheets' references: each project keeps its own."""
    def swap(sheet):
        rows = sorted(table_rows(sheet).values())
        a, b = rows[0], rows[-1]
        for col in range(1, 7):
            first, last = sheet.cell(a, col), sheet.cell(b, col)
            first.value, last.value = last.value, first.value

    path = edited(book, tmp_path, swap)
    assert load_scenario(path).digest == load_scenario(book).digest


def test_an_edit_after_an_insert_reaches_its_own_project(book, tmp_path):
    def insert_and_edit(sheet):
        at = table_rows(sheet)
        sheet.insert_rows(min(at.values()))  # blank row at the top of the table
        sheet.cell(at["p3"] + 1, 2).value = 1234  # p3's budget, one row lower now
        sheet.cell(at["p3"] + 1, 3).value = 2.5

    budgets, weights = budgets_and_weights(edited(book, tmp_path, insert_and_edit))
    before, weights_before = budgets_and_weights(book)
    assert budgets == {**before, "p3": 1234.0}
    assert weights == {**weights_before, "p3": 2.5}


def test_a_project_given_twice_is_refused(book, tmp_path, capsys):
    def twice(sheet):
        at = table_rows(sheet)
        last = max(at.values())
        sheet.cell(last + 1, 1).value = "p1"
        sheet.cell(last + 1, 2).value = 1

    assert main(["validate", str(edited(book, tmp_path, twice))]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "column project: p1 is also in row" in err


def test_a_linked_cell_of_a_project_without_a_row_is_refused(book, tmp_path, capsys):
    def drop(sheet):
        row = table_rows(sheet)["p2"]
        for col in range(1, 7):
            sheet.cell(row, col).value = None

    assert main(["validate", str(edited(book, tmp_path, drop))]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "edited.xlsx[budgets]" in err and "reads next quarter's budget of p2" in err
