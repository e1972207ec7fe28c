"""plan.json's writer: the same text as ``json.dumps(indent=1)``, faster.

:func:`planner.plan.write.dumps_indented` joins each container at once instead of the
standard library's token-by-token pure-Python encoder; the bytes must not change, and
whatever it leaves to ``json`` (NaN, non-text keys, unknown types) must behave as before.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.plan.write import dumps_indented


def reference(value: object) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False, allow_nan=False)


def test_a_small_plan_by_hand() -> None:
    body = {"scenario": "s\u00e9\"1\n", "allocations": [
        {"project": "p1", "gpu_hours": 48.0, "gpus": 2.0, "kept": True, "n": 3},
        {"project": "p2", "gpu_hours": 1e-06, "gpus": -0.0, "kept": False, "n": None}],
        "empty": [], "none": {}, "pair": (1, "a")}
    expected = (
        '{\n "scenario": "s\u00e9\\"1\\n",\n "allocations": [\n  {\n   "project": "p1",\n'
        '   "gpu_hours": 48.0,\n   "gpus": 2.0,\n   "kept": true,\n   "n": 3\n  },\n  {\n'
        '   "project": "p2",\n   "gpu_hours": 1e-06,\n   "gpus": -0.0,\n   "kept": false,\n'
        '   "n": null\n  }\n ],\n "empty": [],\n "none": {},\n "pair": [\n  1,\n  "a"\n ]\n}')
    assert dumps_indented(body) == expected == reference(body)


def test_what_json_refuses_is_still_refused() -> None:
    for bad in ({"x": math.nan}, [math.inf], {"x": {"y": -math.inf}}, {"x": {1, 2}},
                {"x": np.int64(3)}):
        with pytest.raises((ValueError, TypeError)) as ours:
            dumps_indented(bad)
        with pytest.raises(type(ours.value)) as theirs:
            reference(bad)
        assert str(ours.value) == str(theirs.value)
    # non-text keys and float subclasses are written as json writes them
    odd_keys = {2: "a", None: 2.5, False: [], 0.5: {}}
    assert dumps_indented(odd_keys) == reference(odd_keys)
    assert dumps_indented({"x": np.float64(0.1)}) == reference({"x": np.float64(0.1)})


leaves = st.one_of(st.none(), st.booleans(), st.integers(),
                   st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6))
json_values = st.recursive(
    leaves,
    lambda inner: st.one_of(st.lists(inner, max_size=5),
                            st.lists(inner, max_size=3).map(tuple),
                            st.dictionaries(st.text(max_size=4), inner, max_size=5)),
    max_leaves=40)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_dumps_indented_is_json_dumps(value: object) -> None:
    assert dumps_indented(value) == reference(value)
