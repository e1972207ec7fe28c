"""One vocabulary: the rounding, the risk flags, the verdict; and every output agreeing.

``planner status``, ``planner explain``, the workbook (as LibreOffice displays it), the
HTML report and the dashboard (``planner serve``) show the same figure as the same digits
and the same project under the same flags, for the sample planned by a cycle.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
from urllib.parse import quote

import openpyxl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.cli import main
from planner.words import (
    OPPORTUNISTIC,
    OVERRUN,
    PROJECT_RISKS,
    UNUSED,
    number,
    percent,
    risk_flags,
    verdict,
)
from tests.served import get, get_json, sample_state, served
from tests.system import need

# --------------------------------------------------------------------------- rounding


@pytest.mark.parametrize(("value", "decimals", "text"), [
    (2.5, 0, "3"), (3.5, 0, "4"), (-2.5, 0, "-3"),  # half away from zero, not to even
    (57234.5, 0, "57,235"),  # the sample's W5 infrastructure spend: Python's format says 57,234
    (2.675, 2, "2.68"),  # binary 2.67499999…: read to 15 digits, as a spreadsheet does
    (0.125, 2, "0.13"), (1234567.449, 1, "1,234,567.4"), (-0.4, 0, "0"), (-0.04, 1, "0.0"),
    (0.0, 1, "0.0"), (999.5, 0, "1,000"),
])
def test_numbers_round_half_away_from_zero_as_spreadsheets_show_them(value, decimals, text):
    assert number(value, decimals) == text


def test_percent_rounds_the_same_way():
    assert percent(0.9345) == "93.5 %"  # 93.45 → 93.5 (Python's "%.1f" gives 93.4)
    assert percent(0.93449999) == "93.4 %"
    assert percent(1.0) == "100.0 %" and percent(0.5, 0) == "50 %"


@given(st.integers(min_value=-10**9, max_value=10**9))
def test_whole_numbers_and_halves_by_hand(n):
    assert number(n) == f"{n:,}"
    half = n + 0.5  # exact in binary: rounds away from zero
    assert number(half) == f"{n + 1 if n >= 0 else n:,}"


# --------------------------------------------------------------------------- flags


@pytest.mark.parametrize(("budget", "forecast", "opportunistic", "flags"), [
    (100, 100, 0, ()),  # on budget exactly
    (100, 100.5, 0, (OVERRUN,)),
    (100, 79.9, 0, (UNUSED,)), (100, 80, 0, ()),  # 80 % is not below 80 %
    (100, 100, 25, ()), (100, 100, 26, (OPPORTUNISTIC,)),  # 25 % is not above 25 %
    (100, 70, 30, (UNUSED, OPPORTUNISTIC)),
    (0, 0, 0, ()), (0, 5, 0, (OVERRUN,)),  # no budget: anything spent overruns
])
def test_risk_flags_by_hand(budget, forecast, opportunistic, flags):
    assert risk_flags(budget, forecast, opportunistic) == flags


def test_the_verdict_sentence():
    text = verdict("2026 Q4", "2026-11-16T00:00:00Z", 4_723_973.0, 4_181_899.4,
                   {OVERRUN: 1, UNUSED: 10}, 54, 1)
    assert text == ("2026 Q4 as of 2026-11-16: the institute is forecast to spend 4,181,899 "
                    "NGH, 88.5 % of its 4,723,973 NGH budget; of its 54 projects 1 overrun, "
                    "10 unused budget, 0 opportunistic-heavy; 1 reservation unplaced.")


# --------------------------------------------------------------------------- agreement


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """The sample after one cycle: its state, the plan, the inputs the plan was made from."""
    root = tmp_path_factory.mktemp("words")
    _, state = sample_state(root, days=("2026-11-16",), targets=())
    folder = state / "current"
    return state, folder / "plan.json", folder / "inputs"


def _status(capsys, plan, inputs) -> tuple[dict, str]:
    assert main(["status", str(inputs), "--plan", str(plan), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert main(["status", str(inputs), "--plan", str(plan)]) == 0
    return body, capsys.readouterr().out


def _row_cells(html: str, attr: str, key: str) -> list[str]:
    """The text of each cell of the table row whose ``attr`` is ``key`` (escaped HTML)."""
    from markupsafe import escape

    match = re.search(rf'<tr[^>]*{attr}="{re.escape(str(escape(key)))}"[^>]*>(.*?)</tr>', html,
                      re.S)
    assert match, key
    return [" ".join(re.sub(r"<[^>]+>", " ", c).split())
            for c in re.findall(r"<td[^>]*>(.*?)</td>", match.group(1), re.S)]


def test_status_explain_workbook_html_and_dashboard_agree(planned, capsys, tmp_path):
    state, plan_path, inputs = planned
    plan = json.loads(plan_path.read_text())
    body, text = _status(capsys, plan_path, inputs)
    rows = {r["project"]: r for r in body["rows"]}
    assert len(rows) == len(plan["budgets"]) == 54
    flagged = {p: tuple(r["flags"]) for p, r in rows.items()}
    assert any(flagged.values())

    # the HTML report: its org table shows the same digits, its risks the same flags
    html_path = tmp_path / "r.html"
    assert main(["report", str(inputs), "--plan", str(plan_path), "--out", str(html_path)]) == 0
    report = html_path.read_text()
    risks = re.search(r'<table id="risks">(.*?)</table>', report, re.S).group(1)
    report_flags: dict[str, list[str]] = {}
    for kind, subject in re.findall(r"<tr class=\"[^\"]*\">\s*<td>([^<]*)</td><td>([^<]*)</td>",
                                    risks):
        if kind in PROJECT_RISKS:
            report_flags.setdefault(subject, []).append(kind)
    assert {p: tuple(report_flags.get(p, ())) for p in rows} == flagged

    # the workbook: values as stored, and as LibreOffice displays them (one rounding)
    book = tmp_path / "r.xlsx"
    assert main(["report", str(inputs), "--plan", str(plan_path), "--out", str(book)]) == 0
    wb = openpyxl.load_workbook(book)
    tree = {r[0].value: r for r in wb["Budget tree"].iter_rows(min_row=2) if r[1].value ==
            "project"}
    summary_flags: dict[str, list[str]] = {}
    for r in wb["Summary"].iter_rows(values_only=True):
        if r[0] in PROJECT_RISKS and r[1] in rows:
            summary_flags.setdefault(r[1], []).append(r[0])
    assert {p: tuple(summary_flags.get(p, ())) for p in rows} == flagged
    verdict_text = wb["Summary"]["A2"].value

    with served(state) as url:
        org = get_json(url, "/api/org")
        assert org["verdict"] == verdict_text  # the same sentence opens both
        assert verdict_text in " ".join(re.sub(r"<[^>]+>", " ", report).split())
        lines = {n["node"]: n for n in org["nodes"] if n["kind"] == "project"}
        _, page = get(url, "/")
        for p, r in rows.items():
            # raw figures: status, workbook and dashboard hold the plan's numbers
            for field, column in (("budget", 2), ("used", 3), ("planned", 4), ("forecast", 5)):
                assert tree[p][column].value == pytest.approx(r[field], abs=1e-9), (p, field)
                assert lines[p][field] == pytest.approx(r[field], abs=1e-9), (p, field)
            assert tuple(lines[p]["flags"]) == flagged[p]
            shown = [number(r["budget"]), number(r["used"]), number(r["planned"]),
                     number(r["forecast"]), percent(r["forecast_share"])]
            # the terminal: one line a project, the same digits, its flags
            line = next(x for x in text.splitlines() if x.startswith(p + " "))
            tokens = line.split()  # project, 4 GPU columns, budget … forecast, "100.0 %", flags
            assert tokens[5:9] == shown[:4] and " ".join(tokens[9:11]) == shown[4], line
            assert " ".join(tokens[11:]) == ", ".join(flagged[p]), line
            # the dashboard's org row and the HTML report's org tree row
            cells = _row_cells(page, "data-node", p)
            assert [cells[2], cells[3], cells[5], cells[6], cells[7]] == shown, p
            assert cells[8] == " ".join(flagged[p])
            report_row = re.search(rf"<td[^>]*>{re.escape(_esc(p))}</td>\s*<td>project</td>"
                                   r"(.*?)</tr>", report, re.S)
            figures = re.findall(r'<td class="n">([^<]*)</td>', report_row.group(1))
            assert figures[:5] == shown, p
            # explain: its budget line, one decimal, rounded the same way
            _, page_p = get(url, f"/project/{quote(p, safe='')}")
            assert f"forecast {number(r['forecast'])}" in " ".join(
                re.sub(r"<[^>]+>", " ", page_p).split())
        for p in list(rows)[:6]:
            assert main(["explain", p, "--scenario", str(inputs), "--plan",
                         str(plan_path)]) == 0
            said = capsys.readouterr().out
            r = rows[p]
            assert (f"budget {number(r['budget'], 1)} NGH; used {number(r['used'], 1)}"
                    in " ".join(said.split())), p
            share = f" ({percent(r['forecast_share'])} of budget)" if r["budget"] else ""
            assert f"forecast {number(r['forecast'], 1)}{share}" in " ".join(said.split())
            assert "NGH (normalized GPU-hours) = GPU-hours × the GPU type's rate" in said

    # LibreOffice shows the workbook's cells with the digits the others print
    need("soffice", why="the workbook's cells as LibreOffice displays them")
    subprocess.run(["soffice", "--headless", "--convert-to",
                    "csv:Text - txt - csv (StarCalc):44,34,UTF8,1,,0,false,true,true,false,"
                    "false,-1", "--outdir", str(tmp_path / "csv"), str(book)],
                   check=True, capture_output=True, timeout=300)
    with open(tmp_path / "csv" / "r-Budget tree.csv", encoding="utf-8") as f:
        shown_tree = {r[0]: r for r in csv.reader(f) if len(r) > 1 and r[1] == "project"}
    for p, r in rows.items():
        assert shown_tree[p][2:7] == [number(r["budget"]), number(r["used"]),
                                      number(r["planned"]), number(r["forecast"]),
                                      percent(r["forecast_share"]).replace(" ", "")], p


def _esc(text: str) -> str:
    from markupsafe import escape

    return str(escape(text))
