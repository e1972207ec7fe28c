"""The planner's speed shortcuts give the numbers of the plain code they replace.

Each shortcut (cells with demand instead of (P, K, T) arrays, sums in chunks, the
elastic LP's groups solved on two threads) is compared bit for bit with the code it
replaced, kept here as the reference, on small hand cases and on random arrays.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.config import load_model
from planner.inputs.load import load_scenario
from planner.model.elastic import elastic_triples, split_triples
from planner.model.problem import build_problem
from planner.model.reservations import build_reservation_model, solve_reservation_model
from planner.model.result import CellValues
from planner.model.solve import _clean, _solve_groups, budget_headroom, elastic_inputs
from planner.paths import SAMPLE
from planner.plan.build import _ngh_by_project

PROPERTY = settings(deadline=None, max_examples=100,
                    suppress_health_check=[HealthCheck.too_slow])


def reference_clean(values: np.ndarray) -> np.ndarray:
    """The dense rounding ``_clean`` replaced."""
    out = np.round(values, 6)
    out[np.abs(out) < 1e-6] = 0.0
    return out


def as_cells(dense: np.ndarray) -> CellValues:
    """The non-zero cells of ``dense``."""
    cells = np.nonzero(dense)
    return CellValues.at(dense.shape, cells, dense[cells])


@st.composite
def sparse_arrays(draw, max_side: int = 9):
    shape = tuple(draw(st.integers(1, max_side)) for _ in range(3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = draw(st.sampled_from([1e-7, 1.0, 1e4]))
    values = rng.normal(0.0, scale, shape)
    values[rng.random(shape) < draw(st.sampled_from([0.0, 0.5, 0.99]))] = 0.0
    return values


# ------------------------------------------------------------------------------ CellValues

def test_cell_values_read_like_the_dense_array():
    # shape (2, 2, 3); kept cells (0, 1, 2) = 5 and (1, 0, 0) = -2: flat codes 5 and 6
    cells = (np.array([0, 1]), np.array([1, 0]), np.array([2, 0]))
    values = CellValues.at((2, 2, 3), cells, np.array([5.0, -2.0]))
    assert values.codes.tolist() == [5, 6]
    assert values[0, 1, 2] == 5.0 and values[1, 0, 0] == -2.0
    assert values[0, 0, 0] == 0.0 and values[1, 1, 2] == 0.0  # not kept: 0
    got = values[np.array([1, 0, 1]), np.array([0, 1, 1]), np.array([0, 2, 2])]
    np.testing.assert_array_equal(got, [-2.0, 5.0, 0.0])
    dense = np.asarray(values)
    assert dense.shape == (2, 2, 3) and dense.sum() == 3.0 and dense[0, 1, 2] == 5.0
    with pytest.raises(ValueError):  # cells out of (p, k, t) order
        CellValues.at((2, 2, 3), tuple(index[::-1] for index in cells), np.array([-2.0, 5.0]))


def test_cell_values_with_no_cells_read_zero():
    empty = CellValues.at((2, 3, 4), (np.array([], dtype=int),) * 3, np.array([]))
    assert empty[1, 2, 3] == 0.0
    np.testing.assert_array_equal(empty[np.array([0, 1]), np.array([0, 2]), np.array([0, 3])],
                                  [0.0, 0.0])
    assert not np.asarray(empty).any()


@PROPERTY
@given(sparse_arrays(), st.integers(0, 2**32 - 1))
def test_cell_values_match_the_dense_array(dense, seed):
    cells = np.nonzero(dense)
    values = CellValues.at(dense.shape, cells, dense[cells])
    np.testing.assert_array_equal(np.asarray(values), dense)
    rng = np.random.default_rng(seed)
    probe = tuple(rng.integers(0, side, 20) for side in dense.shape)
    np.testing.assert_array_equal(values[probe], dense[probe])


# ------------------------------------------------------------------------------ _clean

def test_clean_by_hand():
    # 1.2345674 → 1.234567; 4e-7 → 0 (noise); -3e-7 → 0 (noise, folded to +0);
    # 2.0000005 rounds half to even at the 6th decimal → 2.0 (as np.round does)
    values = np.array([[[1.2345674, 4e-7], [-3e-7, 2.0000005]]])
    got = _clean(values.copy())
    np.testing.assert_array_equal(got, reference_clean(values))
    assert not np.signbit(got[0, 1, 0])


@PROPERTY
@given(sparse_arrays())
def test_clean_is_the_dense_rounding(values):
    values.reshape(-1)[:3] = -0.0  # negative zeros come out as +0, as before
    expected = reference_clean(values)
    got = _clean(values.copy())
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


# ------------------------------------------------------------------------------ budget sums

def test_ngh_by_project_by_hand():
    # p0: 2 GPU-h on c0 (rate 1) + 4 on c1 (rate 0.5) = 4 NGH; p1: 10 on c1 = 5 NGH
    values = np.zeros((2, 2, 3))
    values[0, 0, 1], values[0, 1, 2], values[1, 1, 0] = 2.0, 4.0, 10.0
    np.testing.assert_array_equal(
        _ngh_by_project(as_cells(values), np.array([1.0, 0.5]), chunk=1), [4.0, 5.0])


@PROPERTY
@given(sparse_arrays(max_side=40), st.integers(1, 70))
def test_ngh_by_project_is_the_dense_sum_bit_for_bit(values, chunk):
    rate = np.linspace(0.3, 1.7, values.shape[1])
    expected = (values * rate[None, :, None]).sum(axis=(1, 2))
    np.testing.assert_array_equal(_ngh_by_project(as_cells(values), rate, chunk), expected)


# ------------------------------------------------------------------------------ LP groups

def test_groups_solved_in_turn_give_the_same_grants_every_time():
    # the groups' LPs are solved one after another (two at once on two threads gave
    # different grants from run to run): three runs give the very same grants, duals and
    # outcome. The sample's clusters form one group, so its triples are cut per cluster
    # here: each block is still an LP of its own (its rows restricted to the block)
    problem = build_problem(load_scenario(SAMPLE), load_model("default"))
    placed, _ = solve_reservation_model(build_reservation_model(problem,
                                                                budget_headroom(problem)),
                                        30, 0.005, problem.model.solver.threads, 0)
    available, headroom, targets = elastic_inputs(problem, placed)
    e = elastic_triples(problem)
    assert len(split_triples(problem, e)) == 1
    groups = [tuple(index[e[1] == k] for index in e) for k in np.unique(e[1])]
    assert len(groups) > 2
    one = _solve_groups(problem, groups, available, headroom, targets, 1e18)
    for _ in range(2):
        again = _solve_groups(problem, groups, available, headroom, targets, 1e18)
        for got, expected in zip(again[0], one[0], strict=True):
            np.testing.assert_array_equal(got, expected)
        for got, expected in zip(again[1:4], one[1:4], strict=True):
            np.testing.assert_array_equal(got, expected)
        assert (again[4].status, again[4].objective, again[4].bound) == (
            one[4].status, one[4].objective, one[4].bound)
    assert one[1].any()  # something was granted
