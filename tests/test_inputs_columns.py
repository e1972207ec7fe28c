"""Column-at-a-time loading against the cell-by-cell oracle (tests/reference_inputs.py).

Parsing, the bound, reference and usage-repeat checks, the canonical sort and the digest's
cell text now work a column at a time; on random good and bad columns they must give the
same values (same types), the same problems message for message, the same row order and
the same JSON as the code they replaced.
"""

from __future__ import annotations

import json

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.inputs import load
from planner.inputs.read import RawTable
from planner.inputs.schema import TABLES, TableSchema
from planner.inputs.validate import (
    OrgIndex,
    Parsed,
    canonical,
    check_bounds,
    check_references,
    check_usage_repeats,
    parse_cell,
    parse_column,
    parse_table,
)
from tests import reference_inputs as ref

FIELDS = [f for schema in TABLES.values() for f in schema.fields]

#: Texts that sit on the edges of each kind's rules, plus ordinary ones (repeated often).
EDGES = ["4", "4.0", " 4 ", "-3", "0", "-0", "-0.0", "0.5", "1e3", ".5", "1e999", "nan", "inf",
         "1_000", "", "  ", "\t", "x", "12", "8", "9223372036854775807", "9223372036854775808",
         "1e20", "200000", "2026-11-02", "2026-11-02T06:00:00", "2026-11-02T06:00:00Z",
         "2026-11-02 06:00+02:00", "2026-11-02T06:00:00.5", "2026-11-02T06:00:00.000001+01:00",
         "2026-13-45", "2026-11-02T24:00:00", "2026-02-30", "a\x01b", "p1", "p2", "team",
         "h100-a", "a100-a", "h100-a;a100-a", "a100-a; h100-a;;a100-a", "zz-unknown",
         "k=v;a=b", "k=v;k=w", "gpu-planner.io/cluster=x", "bad key=v", "=SUM(A1)", "é",
         "\u2028x", "007", "+1", "NA"]

texts = st.one_of(st.sampled_from(EDGES), st.text(max_size=8))
columns = st.lists(texts, max_size=40)


def typed(values: list[object]) -> list[tuple[str, str]]:
    """Values compared strictly: type and ``repr`` (``-0.0`` is not ``0.0``, 4 not 4.0)."""
    return [(type(v).__name__, repr(v)) for v in values]


# --------------------------------------------------------------------------- by hand


def test_parse_column_by_hand() -> None:
    # clusters.nodes, an int > 0: " 4" is 4 like "4"; "x", "" and "4.5" are each wrong,
    # with the messages parse_cell gives one cell at a time
    nodes = TABLES["clusters"].field("nodes")
    values, errors = parse_column(nodes, ["4", " 4", "x", "4", "", "4.5"])
    assert values == [4, 4, None, 4, None, None]
    assert all(type(v) is int for v in values if v is not None)
    assert errors == [
        (2, "'x' is not a number; write a decimal number such as 12 or 0.5"),
        (4, "nodes is empty; every row needs one"),
        (5, "'4.5' is not a whole number; write a whole number such as 4"),
    ]
    # an id column without control characters is kept verbatim, spaces and all
    cluster = TABLES["clusters"].field("cluster")
    assert parse_column(cluster, ["a", " a", "=SUM(A1)"]) == (["a", " a", "=SUM(A1)"], [])
    values, errors = parse_column(cluster, ["a", "b\x01", "b\x01"])
    assert values == ["a", None, None] and [i for i, _ in errors] == [1, 2]
    assert "control characters (\\x01)" in errors[0][1]


def test_datetime_text_by_hand() -> None:
    # the digest writes each time as Timestamp.isoformat does: microseconds only when set
    column = pd.Series(pd.to_datetime(
        ["2026-11-02T06:00:00Z", "2026-11-02T06:00:00.5Z", "2026-11-02T06:00:00Z",
         "2027-01-01T00:00:00.000001+01:00"], format="ISO8601", utc=True)
    ).astype("datetime64[us, UTC]")
    assert load._datetimes_text(column) == [
        "2026-11-02T06:00:00+00:00", "2026-11-02T06:00:00.500000+00:00",
        "2026-11-02T06:00:00+00:00", "2026-12-31T23:00:00.000001+00:00"]
    assert load._datetimes_text(column) == [t.isoformat() for t in column]


# --------------------------------------------------------------------------- properties


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(FIELDS), columns)
def test_parse_column_is_parse_cell_on_every_cell(f, cells: list[str]) -> None:
    values, errors = parse_column(f, cells)
    expected = [parse_cell(f, text) for text in cells]
    assert typed(values) == typed([v for v, _ in expected])
    assert errors == [(i, e) for i, (_, e) in enumerate(expected) if e is not None]


@st.composite
def raw_tables(draw: st.DrawFn) -> tuple[TableSchema, RawTable]:
    """A table of a schema: its columns shuffled, some optional ones or extra ones, rows
    short or long, cells from :data:`EDGES` and random text."""
    schema = draw(st.sampled_from(list(TABLES.values())))
    names = [f.name for f in schema.fields if f.required or draw(st.booleans())]
    if draw(st.integers(0, 9)) == 0:
        names.append(draw(st.sampled_from(["extra", schema.fields[0].name, ""])))
    header = tuple(draw(st.permutations(names)))
    width = len(header)
    rows = []
    for number in range(2, 2 + draw(st.integers(0, 25))):
        size = width if draw(st.integers(0, 7)) else draw(st.integers(0, width + 2))
        rows.append((number, tuple(draw(texts) for _ in range(size))))
    return schema, RawTable(f"{schema.name}.csv", header, tuple(rows))


def same_parsed(a: Parsed | None, b: Parsed | None) -> None:
    assert (a is None) == (b is None)
    if a is None or b is None:
        return
    assert (a.label, a.rows, a.bad, list(a.values)) == (b.label, b.rows, b.bad, list(b.values))
    for name in a.values:
        assert typed(a.values[name]) == typed(b.values[name]), name


CLUSTERS = [None, frozenset({"h100-a", "a100-a"})]
ORGS = [None, OrgIndex("org.csv", frozenset({"p1", "p2", "team"}), frozenset({"p1", "p2"}))]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw_tables(), st.sampled_from(CLUSTERS), st.sampled_from(ORGS))
def test_parse_table_and_checks_match_the_cell_by_cell_oracle(
        table: tuple[TableSchema, RawTable], clusters: frozenset[str] | None,
        org: OrgIndex | None) -> None:
    schema, raw = table
    parsed, problems = parse_table(schema, raw)
    expected, expected_problems = ref.parse_table(schema, raw)
    assert problems == expected_problems
    same_parsed(parsed, expected)
    if parsed is None:
        return
    assert check_bounds(parsed) == ref.check_bounds(parsed)
    assert (check_references(parsed, clusters, org, "clusters.csv")
            == ref.check_references(parsed, clusters, org, "clusters.csv"))
    if schema.name == "usage":
        assert check_usage_repeats(parsed) == ref.check_usage_repeats(parsed)


#: Valid cells per kind, few enough that rows tie on the leading sort columns.
GOOD = {"id": ["p1", "p2", "h100-a", "a", "B", "é", " p1"],
        "str": ["", "running", "H100"],
        "int": ["1", "2", "8", "100"],
        "float": ["0.5", "1", "2.0", "-0", "12", "1e3"],
        "datetime": ["2026-11-02", "2026-11-02T06:00:00.5", "2026-11-01T23:00:00-01:00",
                     "2026-12-01T00:00:00.000001Z"],
        "list": ["", "h100-a", "a100-a;h100-a", "h100-a;a100-a"],
        "labels": ["", "k=v", "a=b;k=v", "k=w"]}


@st.composite
def good_tables(draw: st.DrawFn) -> Parsed:
    """A table of valid cells, every column present, rows in a random order."""
    schema = draw(st.sampled_from(list(TABLES.values())))
    n = draw(st.integers(0, 30))
    good = [[t for t in GOOD[f.kind] if t or f.empty_allowed] for f in schema.fields]
    rows = tuple((i + 2, tuple(draw(st.sampled_from(cells)) for cells in good))
                 for i in range(n))
    parsed, problems = parse_table(schema, RawTable("t.csv", schema.columns, rows))
    assert parsed is not None and not parsed.bad, problems
    return parsed


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(good_tables())
def test_canonical_order_and_digest_text_match_the_oracle(parsed: Parsed) -> None:
    ordered, expected = canonical(parsed), ref.canonical(parsed)
    same_parsed(ordered, expected)
    frame = load._frame(parsed.schema, ordered)
    assert (json.dumps(load._rows_text(frame), ensure_ascii=False)
            == json.dumps(ref._rows_text(frame), ensure_ascii=False))
