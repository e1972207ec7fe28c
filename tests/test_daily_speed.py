"""The daily run's speed shortcuts (issue 11, part 1) give the numbers of the code they replace.

Each shortcut is compared, bit for bit, with the plain code it replaced, kept here as
the reference: on hand cases first, then on random ones.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from dataclasses import fields
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import planner.model.solve as solve_module
from planner.config import load_model
from planner.inputs import load
from planner.inputs.load import _cell_text, _rows_text, _table_json, digest, load_scenario
from planner.inputs.schema import TABLES
from planner.inputs.validate import canonical
from planner.model.elastic import elastic_triples, split_triples
from planner.model.problem import (
    _stamps_to_np,
    _to_datetime64,
    build_problem,
    overlap_hours,
    period_grid,
)
from planner.model.reservations import build_reservation_model, solve_reservation_model
from planner.model.result import CellValues
from planner.model.solve import (
    LpHelper,
    _solve_groups,
    budget_headroom,
    elastic_inputs,
    share_groups,
    wants_helper,
)
from planner.paths import SAMPLE
from planner.plan.build import _allocations, num
from planner.times import iso
from tests.test_inputs_columns import good_tables
from tests.tiny import scenario

PROPERTY = settings(deadline=None, max_examples=60,
                    suppress_health_check=[HealthCheck.too_slow])
MODEL = load_model("default")
ORG = [("root", "", 1.0), ("a", "root", 1.0), ("b", "root", 2.0), ("c", "root", 1.0)]
CLUSTERS = [("c1", "H100", 2, 8), ("c2", "A100", 1, 4)]


def reference_demand(sc, problem) -> np.ndarray:
    """The dense demand array as ``build_problem`` made it before (np.bincount, then × allowed)."""
    shape = problem.shape
    starts, ends = period_grid(sc, MODEL.solver.period_grid)
    demand = sc.demand
    hours = overlap_hours(_stamps_to_np(demand["start"]), _stamps_to_np(demand["end"]),
                          _to_datetime64(starts), _to_datetime64(ends))
    p_idx = demand["project"].map(sc.arrays.project_index).to_numpy(dtype=np.int64)
    k_idx = demand["cluster"].map(sc.arrays.cluster_index).to_numpy(dtype=np.int64)
    cell = ((p_idx * shape[1] + k_idx)[:, None] * shape[2]
            + np.arange(shape[2], dtype=np.int64)[None, :])
    gpu_hours = hours * demand["gpus"].to_numpy(dtype=float)[:, None]
    dense = np.bincount(cell.reshape(-1), gpu_hours.reshape(-1),
                        minlength=shape[0] * shape[1] * shape[2]).reshape(shape)
    dense *= sc.arrays.allowed[:, :, None]
    return dense


def assert_same_demand(sc) -> None:
    """dem and E of ``build_problem`` equal the dense reference's, bit for bit."""
    problem = build_problem(sc, MODEL)
    dense = reference_demand(sc, problem)
    assert np.asarray(problem.dem).tobytes() == dense.tobytes()
    # what the consumers read of it: per (k, t) over projects (the reservations'
    # displacement, the summary), a period's (P, K) block (explain), any cell
    assert problem.dem.sum(axis=0).tobytes() == dense.sum(axis=0).tobytes()
    for t in range(problem.shape[2]):
        assert problem.dem.period(t).tobytes() == np.ascontiguousarray(dense[:, :, t]).tobytes()
    p, k, t = (np.arange(n) for n in problem.shape)
    grid = np.meshgrid(p, k, t, indexing="ij")
    assert problem.dem[tuple(grid)].tobytes() == dense.tobytes()
    assert problem.dem.sum() == pytest.approx(dense.sum())
    assert problem.dem.any() == bool(dense.any())
    triples = elastic_triples(problem)
    reference = np.nonzero(dense > 0)
    for got, want in zip(triples, reference, strict=True):
        assert got.tolist() == want.tolist()


def test_demand_cells_by_hand():
    # daily periods 2026-11-02 (as_of) to 11-03: one period of 24 h.
    # a on c1: two rows, 8 GPUs × 12 h + 4 GPUs × 24 h = 96 + 96 = 192 GPU-hours;
    # b may use c2 only, so its row on c1 counts nothing; c wants 2 GPUs × 24 h on c2 = 48
    sc = scenario(clusters=CLUSTERS, org=ORG,
                  budgets=[("a", 1000.0), ("b", 1000.0, ("c2",)), ("c", 1000.0)],
                  demand=[("a", "c1", "2026-11-02T00:00", "2026-11-02T12:00", 8),
                          ("a", "c1", "2026-11-01T00:00", "2026-11-04T00:00", 4),
                          ("b", "c1", "2026-11-02T00:00", "2026-11-03T00:00", 8),
                          ("c", "c2", "2026-11-02T00:00", "2026-11-03T00:00", 2)])
    problem = build_problem(sc, MODEL)
    assert problem.projects == ("a", "b", "c")
    assert problem.dem[0, 0, 0] == 192.0
    assert problem.dem[1, 0, 0] == 0.0  # not an allowed cluster
    assert problem.dem[2, 1, 0] == 48.0
    assert problem.dem.sum() == 240.0
    assert problem.demand_cells.tolist() == [0, 5]  # (a, c1, 0) and (c, c2, 0): 2·2·1 + 1
    assert [x.tolist() for x in elastic_triples(problem)] == [[0, 2], [0, 1], [0, 0]]
    assert_same_demand(sc)


def test_demand_cells_of_the_sample():
    assert_same_demand(load_scenario(SAMPLE))


def test_no_demand_gives_no_cells():
    sc = scenario(clusters=CLUSTERS, org=ORG, budgets=[("a", 10.0)])
    problem = build_problem(sc, MODEL)
    assert not problem.dem.any() and len(problem.demand_cells) == 0
    assert all(len(x) == 0 for x in elastic_triples(problem))


@st.composite
def demand_rows(draw):
    days = [f"2026-10-{d:02d}T{h:02d}:00" for d in range(20, 31) for h in (0, 7, 13)]
    rows = []
    for _ in range(draw(st.integers(0, 12))):
        first, last = sorted(draw(st.lists(st.integers(0, len(days) - 1), min_size=2,
                                           max_size=2, unique=True)))
        rows.append((draw(st.sampled_from(["a", "b", "c"])),
                     draw(st.sampled_from(["c1", "c2"])), days[first], days[last],
                     draw(st.sampled_from([1, 3, 0.1, 7.25]))))
    return rows


@PROPERTY
@given(rows=demand_rows(), restricted=st.booleans())
def test_demand_cells_match_the_dense_sum(rows, restricted):
    # overlapping rows on the same cells (summed in file order), cells with no row, and a
    # project restricted to another cluster: the same array and triples as the dense code
    budgets = [("a", 1e5), ("b", 1e5, ("c2",) if restricted else ()), ("c", 1e5)]
    sc = scenario(clusters=CLUSTERS, org=ORG, budgets=budgets, demand=rows,
                  as_of="2026-10-22", quarter_end="2026-11-01", period_hours=6.0)
    assert_same_demand(sc)


# ------------------------------------------------------------------ the input digest


def reference_digest(config, tables) -> str:
    """The digest as it was computed before: one ``json.dumps`` of the whole body."""
    body = {"config": {f.name: _cell_text(getattr(config, f.name)) for f in fields(config)
                       if f.name != "gpu_rates"},
            "gpu_rates": {k: repr(float(v)) for k, v in sorted(config.gpu_rates.items())},
            "tables": {name: [tuple(frame.columns), *_rows_text(frame)]
                       for name, frame in sorted(tables.items())}}
    text = json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def reference_table(frame: pd.DataFrame) -> str:
    return json.dumps([tuple(frame.columns), *_rows_text(frame)], ensure_ascii=False,
                      sort_keys=True, separators=(",", ":"))


def test_digest_of_the_sample_is_unchanged():
    sc = load_scenario(SAMPLE)
    tables = {name: getattr(sc, name) for name in TABLES}
    assert sc.digest == reference_digest(sc.config, tables)
    assert sc.digest.startswith("44438569")  # as before this branch


def test_table_json_by_hand():
    # text with a quote, a backslash, a non-ASCII letter and U+2028 (JSON escapes the
    # first two only, as ensure_ascii=False writes); -0.0 keeps its sign; an object
    # column of tuples is written as arrays; a missing text cell is null
    frame = pd.DataFrame({
        "id": pd.Series(['a"b', "c\\d", "é\u2028"], dtype="str"),
        "x": pd.Series([-0.0, 1.5, 1e-7]),
        "n": pd.Series([1, 2, 3], dtype="int64"),
        "t": pd.Series([("a", "b"), (), ("c",)], dtype=object),
        "s": pd.Series(["x", None, "z"], dtype="str"),
    })
    assert _table_json(frame) == reference_table(frame)
    assert _table_json(frame).startswith('[["id","x","n","t","s"],["a\\"b","-0.0",1,["a","b"],"x"]')
    empty = frame.iloc[:0]
    assert _table_json(empty) == reference_table(empty) == '[["id","x","n","t","s"]]'


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(good_tables())
def test_table_json_is_the_json_of_the_rows(parsed):
    frame = load._frame(parsed.schema, canonical(parsed))
    assert _table_json(frame) == reference_table(frame)


@PROPERTY
@given(st.lists(st.text(max_size=6), max_size=8), st.lists(st.floats(allow_nan=True), max_size=8))
def test_table_json_of_hostile_text_and_odd_floats(texts, numbers):
    n = min(len(texts), len(numbers))
    frame = pd.DataFrame({"id": pd.Series(texts[:n], dtype="str"),
                          "x": pd.Series(numbers[:n], dtype="float64")})
    assert _table_json(frame) == reference_table(frame)


def test_digest_of_a_tiny_scenario_matches():
    sc = scenario(clusters=CLUSTERS, org=ORG, budgets=[("a", 10.0, ("c1", "c2"))],
                  demand=[("a", "c1", "2026-11-02T00:00", "2026-11-02T12:00", 8)])
    tables = {name: getattr(sc, name) for name in TABLES}
    assert digest(sc.config, tables) == reference_digest(sc.config, tables)


# --------------------------------------------------------- LP groups in a second process


def sample_groups():
    """The sample's elastic LP inputs, its triples cut per cluster into groups.

    The sample's clusters form one group; each per-cluster block is still an LP of its
    own (its rows restricted to the block), which is all the comparison needs.
    """
    problem = build_problem(load_scenario(SAMPLE), MODEL)
    placed, _ = solve_reservation_model(build_reservation_model(problem,
                                                                budget_headroom(problem)),
                                        30, 0.005, problem.model.solver.threads, 0)
    available, headroom, targets = elastic_inputs(problem, placed)
    e = elastic_triples(problem)
    groups = [tuple(index[e[1] == k] for index in e) for k in np.unique(e[1])]
    return problem, groups, available, headroom, targets


def assert_same_solve(got, expected) -> None:
    for a, b in zip(got[0], expected[0], strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(got[1:4], expected[1:4], strict=True):
        assert a.tobytes() == b.tobytes()
    assert (got[4].status, got[4].objective, got[4].bound, got[4].gap) == (
        expected[4].status, expected[4].objective, expected[4].bound, expected[4].gap)


def test_share_groups_by_hand():
    # sizes 5, 9, 2, 4: largest first — 9 here (load 9, 0), 5 helper (9, 5), 4 helper
    # (9, 9), 2 here on the tie (11, 9); the helper takes groups 0 and 3
    groups = [(np.zeros(n),) for n in (5, 9, 2, 4)]
    assert share_groups(groups) == [0, 3]
    assert share_groups(groups[:1]) == []  # one group: solved here


def test_groups_shared_with_a_helper_give_the_same_bytes():
    # the helper process solves half the groups with its own HiGHS: the grants, duals
    # and the stage's objective, bound and gap are those of solving all of them here
    problem, groups, available, headroom, targets = sample_groups()
    assert len(groups) == 8 and share_groups(groups)
    alone = _solve_groups(problem, groups, available, headroom, targets, 1e18)
    helper = LpHelper.start()
    try:
        shared = _solve_groups(problem, groups, available, headroom, targets, 1e18, helper)
    finally:
        helper.close()
    assert helper.process is not None and helper.process.returncode == 0
    assert_same_solve(shared, alone)
    assert alone[1].any()


def test_a_helper_that_fails_leaves_its_groups_to_this_process():
    # a worker that exits at once (as a crash would), and one that could not start: the
    # groups it was given are solved here, the plan is the same
    problem, groups, available, headroom, targets = sample_groups()
    alone = _solve_groups(problem, groups, available, headroom, targets, 1e18)
    broken = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL)
    for helper in (LpHelper(broken), LpHelper(None)):
        try:
            got = _solve_groups(problem, groups, available, headroom, targets, 1e18, helper)
        finally:
            helper.close()
        assert_same_solve(got, alone)


def test_small_or_single_group_lps_are_solved_here_alone(monkeypatch):
    problem = build_problem(load_scenario(SAMPLE), MODEL)
    groups = split_triples(problem, elastic_triples(problem))
    monkeypatch.setenv("PLANNER_LP_HELPER", "1")
    assert not wants_helper(problem, groups)  # one group, 3,588 triples


def test_the_helper_is_on_when_asked_or_while_a_core_is_free(monkeypatch):
    # a large LP of several groups (stood in for by 30,000 triples in 3 groups)
    problem = build_problem(load_scenario(SAMPLE), MODEL)
    groups = [(np.zeros(10_000),)] * 3
    monkeypatch.setattr(solve_module.os, "cpu_count", lambda: 2)
    monkeypatch.delenv("PLANNER_LP_HELPER", raising=False)
    monkeypatch.setattr(solve_module.os, "getloadavg", lambda: (1.6, 1.0, 1.0))
    assert not wants_helper(problem, groups)  # both cores busy
    monkeypatch.setattr(solve_module.os, "getloadavg", lambda: (1.2, 1.0, 1.0))
    assert wants_helper(problem, groups)  # about a core free
    monkeypatch.setenv("PLANNER_LP_HELPER", "0")
    assert not wants_helper(problem, groups)
    monkeypatch.setenv("PLANNER_LP_HELPER", "1")
    monkeypatch.setattr(solve_module.os, "getloadavg", lambda: (9.0, 9.0, 9.0))
    assert wants_helper(problem, groups)
    monkeypatch.delenv("PLANNER_LP_HELPER")
    monkeypatch.setattr(solve_module.os, "cpu_count", lambda: 1)
    monkeypatch.setattr(solve_module.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert not wants_helper(problem, groups)  # one core: nothing to share


# ------------------------------------------------------------------ the plan's allocations


def reference_allocations(problem, solution) -> list[dict]:
    """``_allocations`` as it was: records made per kind, then one ``sort`` by their text."""
    starts = [iso(stamp) for stamp in problem.period_start]
    out = []
    for kind, values in (("guaranteed", solution.guaranteed),
                         ("opportunistic", solution.opportunistic)):
        positive = values.values > 0
        ps, ks, ts = np.unravel_index(values.codes[positive], values.shape)
        gpu_hours = values.values[positive]
        gpus = gpu_hours / np.asarray(problem.hours, dtype=np.float64)[ts]
        for p, k, t, h, g in zip(ps.tolist(), ks.tolist(), ts.tolist(), gpu_hours.tolist(),
                                 gpus.tolist(), strict=True):
            out.append({"project": problem.projects[p], "cluster": problem.clusters[k],
                        "period_start": starts[t], "gpu_hours": num(h), "kind": kind,
                        "gpus": num(g)})
    out.sort(key=lambda a: (a["period_start"], a["cluster"], a["project"], a["kind"]))
    return out


def stand_in(projects, clusters, starts, guaranteed, opportunistic):
    """The fields ``_allocations`` reads of a problem and a solution."""
    period_start = tuple(pd.Timestamp(s) for s in starts)
    problem = SimpleNamespace(projects=tuple(projects), clusters=tuple(clusters),
                              period_start=period_start, hours=np.full(len(starts), 24.0))
    shape = (len(projects), len(clusters), len(starts))

    def cells(dense: np.ndarray) -> CellValues:
        return CellValues.at(shape, np.nonzero(dense), dense[np.nonzero(dense)])

    return problem, SimpleNamespace(guaranteed=cells(guaranteed),
                                    opportunistic=cells(opportunistic))


def test_allocations_by_hand():
    # projects listed out of string order ("b" before "A"), two clusters, two days:
    # sorted by day, then cluster, then project text ("A" < "b"), then kind
    g = np.zeros((2, 2, 2))
    o = np.zeros((2, 2, 2))
    g[0, 1, 0] = 48.0  # b on c2, day 1
    g[1, 1, 0] = 24.0  # A on c2, day 1
    o[0, 1, 0] = 12.0  # b on c2, day 1, opportunistic
    g[0, 0, 1] = 0.0000004  # rounds to 0.0 as written, still a record (its value > 0)
    problem, solution = stand_in(["b", "A"], ["c1", "c2"],
                                 ["2026-11-16T00:00Z", "2026-11-17T00:00Z"], g, o)
    got = _allocations(problem, solution)
    assert [(a["period_start"][:10], a["cluster"], a["project"], a["kind"], a["gpu_hours"])
            for a in got] == [("2026-11-16", "c2", "A", "guaranteed", 24.0),
                              ("2026-11-16", "c2", "b", "guaranteed", 48.0),
                              ("2026-11-16", "c2", "b", "opportunistic", 12.0),
                              ("2026-11-17", "c1", "b", "guaranteed", 0.0)]
    assert got == reference_allocations(problem, solution)


@PROPERTY
@given(names=st.lists(st.text(min_size=1, max_size=3), min_size=2, max_size=6, unique=True),
       seed=st.integers(0, 2**32 - 1))
def test_allocations_match_the_sorted_records(names, seed):
    rng = np.random.default_rng(seed)
    half = len(names) // 2
    projects, clusters = names[:half] or ["p"], names[half:]
    starts = ["2026-11-16T00:00Z", "2026-11-16T12:00Z", "2026-11-17T00:00Z"]
    shape = (len(projects), len(clusters), len(starts))
    g = np.where(rng.random(shape) < 0.4, rng.exponential(10.0, shape), 0.0)
    o = np.where(rng.random(shape) < 0.3, rng.exponential(10.0, shape), 0.0)
    problem, solution = stand_in(projects, clusters, starts, g, o)
    assert _allocations(problem, solution) == reference_allocations(problem, solution)
