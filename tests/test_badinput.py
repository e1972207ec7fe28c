"""Bad input that used to pass, past the validation: the period grid, deep org trees and
hostile text in the summary and the report."""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from pathlib import Path

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.inputs.load import load_scenario
from planner.model.problem import period_grid
from planner.run import SAMPLE


@cache
def sample():
    """The bundled sample, loaded once for this module."""
    return load_scenario(SAMPLE)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 91 * 86400 - 3600), st.sampled_from([1.0, 1.5, 6.0, 24.0, 168.0]))
def test_period_grid_tiles_the_horizon_with_no_period_under_an_hour(seconds: int,
                                                                    hours: float):
    scenario = sample()
    cfg = scenario.config
    as_of = cfg.quarter_start + pd.Timedelta(seconds=seconds)
    scenario = replace(scenario, config=replace(cfg, as_of=as_of, period_hours=hours))
    starts, ends = period_grid(scenario)
    assert starts[0] == as_of and ends[-1] == cfg.quarter_end
    assert all(e == s for s, e in zip(starts[1:], ends[:-1], strict=True))
    lengths = [(e - s) / pd.Timedelta(hours=1) for s, e in zip(starts, ends, strict=True)]
    assert all(length == hours for length in lengths[:-1])
    assert 1.0 <= lengths[-1] < hours + 1.0


def deep_org(org: pd.DataFrame, depth: int) -> pd.DataFrame:
    """``org`` hung below a chain of ``depth`` nodes (validation refuses > 64 levels: this
    goes around it, to show the summary and the report no longer recurse)."""
    chain = pd.DataFrame({"id": [f"c{i}" for i in range(depth)],
                          "parent": [""] + [f"c{i}" for i in range(depth - 1)],
                          "weight": 1.0})
    org = org.copy()
    org.loc[org["parent"] == "", "parent"] = f"c{depth - 1}"
    return pd.concat([chain, org], ignore_index=True).astype({"id": "str", "parent": "str"})


def test_summary_and_report_of_a_1000_deep_org(sample_plan, tmp_path: Path):
    from planner.reports.content import budget_rows
    from planner.reports.workbook import write_workbook
    from planner.summary import summary_text

    plan, org = sample_plan
    org = deep_org(org, 1000)
    lines = summary_text(plan, org, {}).splitlines()
    # every chain node and every area and team, depth first, indented two spaces a level
    assert lines[4].startswith("c0 ") and lines[1003].startswith("  " * 999 + "c999 ")
    scenario = replace(load_scenario(SAMPLE), org=org)
    rows = budget_rows(plan, scenario)
    assert [r.node for r in rows[:1000]] == [f"c{i}" for i in range(1000)]
    assert [r.depth for r in rows[:1000]] == list(range(1000))
    total = sum(b["budget"] for b in plan["budgets"])
    assert rows[0].budget == rows[999].budget == total
    assert write_workbook(plan, scenario, tmp_path / "deep.xlsx").stat().st_size > 0


def test_the_workbook_carries_control_characters_inert(sample_plan, tmp_path: Path):
    import openpyxl

    from planner.reports.workbook import printable, write_workbook

    plan, _ = sample_plan
    plan = {**plan, "scenario": "evil\x1b[2J\x07",
            "unplaced": [{**u, "reason": "line\nbreak\x00nul"} for u in plan["unplaced"]]}
    scenario = load_scenario(SAMPLE)
    book = openpyxl.load_workbook(write_workbook(plan, scenario, tmp_path / "r.xlsx"))
    cells = {c.value for ws in book.worksheets for row in ws.iter_rows() for c in row
             if isinstance(c.value, str)}
    assert any("evil\\x1b[2J\\x07" in v for v in cells)
    assert any("line\\nbreak\\x00nul" in v for v in cells)
    assert not any("\x1b" in v or "\x00" in v for v in cells)
    assert printable("=SUM(A1)") == "=SUM(A1)" and printable("a\tb") == "a\\tb"


@settings(max_examples=4, deadline=None)
@given(st.randoms(use_true_random=False))
def test_shuffled_rows_of_the_tiny_scenario_plan_to_the_same_bytes(rng):
    import tempfile

    from planner.config import load_model
    from planner.plan.write import plan_bytes
    from planner.run import plan_scenario
    from tests.scenario_factory import FILES, write_scenario

    def shuffled(text: str) -> str:
        head, *rows = text.splitlines(keepends=True)
        rng.shuffle(rows)
        return head + "".join(rows)

    # a repeated usage row spelled differently: which copy is kept must not matter
    usage = FILES["usage"] + "j2,p2,h100-a,4.0,2026-10-25T12:00:00,2026-10-26T00:00:00Z\n"
    model = load_model("default")
    with tempfile.TemporaryDirectory() as tmp:
        plans = [plan_bytes(plan_scenario(load_scenario(write_scenario(
            Path(tmp) / name, usage=edit(usage),
            **{t: edit(FILES[t]) for t in ("clusters", "org", "budgets", "demand",
                                            "reservations")})), model).plan)
            for name, edit in (("a", lambda text: text), ("b", shuffled))]
    assert plans[0] == plans[1]
