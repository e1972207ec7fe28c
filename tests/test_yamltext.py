"""The exporters' YAML writer: the bytes of ``yaml.safe_dump_all``, from libyaml or Python.

:mod:`planner.exporters.yamltext` replaces PyYAML's representer and resolver lookup with
leaner code of the same result, and uses libyaml's emitter where PyYAML has it. Whatever
the documents hold (hostile strings, numbers that look like strings and back, shared
dicts), the text must be what ``safe_dump_all`` writes with the same options, from both
emitters.
"""

from __future__ import annotations

import math

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.exporters import yamltext


def reference(documents: list) -> str:
    """What the exporters wrote before: PyYAML's pure-Python ``safe_dump_all``."""
    return yaml.safe_dump_all(documents, explicit_start=True, **yamltext.OPTIONS)


def both(documents: list) -> tuple[str, str]:
    """The default (libyaml where it agrees) and the fallback (Python emitter) texts."""
    return yamltext.dump_all(documents), yamltext.dump_all(documents, yamltext.PyDumper)


def test_libyaml_is_used_here():
    # CI and make install PyYAML's wheel, which has libyaml: the fast path is the one run
    assert yamltext.LIBYAML and yamltext.CDumper is not None


def test_a_hand_written_document():
    # scalars a YAML 1.1 loader would read as other types are quoted ('007', 'yes' as key
    # and value, the timestamp; 1e3 is no float without a point, so it stays plain), keys
    # keep their order, a float keeps its point, nan and inf their YAML spelling
    doc = {"name": "p1", "zero": "007", "yes": "yes", "exp": "1e3",
           "when": "2026-11-16T00:00:00Z", "n": 3, "x": 2.0, "big": 1e20, "nan": math.nan,
           "inf": -math.inf, "t": True, "none": None, "empty": "", "list": [1, "a", []],
           "map": {}}
    text = yamltext.dump_all([doc, {"second": 1}])
    assert text == reference([doc, {"second": 1}])
    assert text.startswith("---\nname: p1\nzero: '007'\n'yes': 'yes'\nexp: 1e3\n"
                           "when: '2026-11-16T00:00:00Z'\nn: 3\nx: 2.0\nbig: 1.0e+20\n")
    assert "\n---\nsecond: 1\n" in text
    loaded = list(yaml.safe_load_all(text))
    assert loaded[0]["zero"] == "007" and loaded[0]["when"] == "2026-11-16T00:00:00Z"


def test_a_dict_met_twice_is_an_alias_as_in_safe_dump():
    shared = {"a": 1}
    doc = {"x": shared, "y": shared, "l": [shared]}
    assert both([doc]) == (reference([doc]),) * 2
    assert "&id001" in reference([doc])


def test_what_safe_dump_cannot_write_is_refused_alike():
    with pytest.raises(yaml.representer.RepresenterError):
        yamltext.dump_all([{"x": object()}])


HOSTILE = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40) | \
    st.sampled_from(["$(touch x)", "a\nb", "it's \"q\"", "'; touch x", "- x", "? y", "#c",
                     "null", "~", "True", "0x1F", "0o17", "1_000", ".5", "-.inf", "2026-11-16",
                     "a: b", "{x}", "[y]", "*alias", "&anchor", "!tag", "%x", "@x", "`x`",
                     "x\u2028y", "\x85", "\ufeff", " lead", "trail ", "x" * 130, "\t"])
SCALARS = HOSTILE | st.integers() | st.floats() | st.booleans() | st.none()
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(HOSTILE, inner, max_size=4), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(HOSTILE, VALUES, max_size=5), min_size=1, max_size=3))
def test_any_documents_give_the_bytes_of_safe_dump_all(documents):
    expected = reference(documents)
    default, fallback = both(documents)
    assert fallback == expected
    assert default == expected


def test_the_emitters_disagree_outside_the_checked_documents():
    # why libyaml_agrees exists: libyaml escapes what lies beyond the BMP and writes the
    # empty key plainly, where the Python emitter does neither; such documents go to the
    # Python emitter, so the bytes stay its own
    for doc in ({"id": "gpu \U0001F600"}, {"": 1}):
        assert yamltext.dump_all([doc], yamltext.CDumper) != reference([doc])
        assert not yamltext.libyaml_agrees([doc])
        assert yamltext.dump_all([doc]) == reference([doc])


#: what libyaml_agrees passes: printable ASCII without quotes and backslashes, keys short
ASCII = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E,
                              blacklist_characters='"\\'), max_size=300) | \
    st.sampled_from(["", " ", "-", "? x", ": x", "#", "x #y", "---", "...", "null", "~", "yes",
                     "0x1f", "1:20", "2026-01-01", ".inf", "0o7", "+1", "<<", "!x", "&a",
                     "*a", "|", ">", "'", "@", "`", "%", "x: y", "[a]", "{a: b}", " lead",
                     "trail ", "a  b", "x " * 80])
KEYS = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E,
                             blacklist_characters='"\\'), min_size=1,
               max_size=yamltext.SHORT_KEY)
PLAIN = st.recursive(ASCII | st.integers() | st.floats() | st.booleans() | st.none(),
                     lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(KEYS, inner, max_size=4), max_leaves=30)


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.dictionaries(KEYS, PLAIN, min_size=1, max_size=5), min_size=1, max_size=3))
def test_on_the_documents_it_passes_libyaml_writes_what_python_writes(documents):
    # the kind of documents libyaml_agrees passes (it may refuse some of them too: it
    # reads their JSON conservatively), written by libyaml itself
    assert yamltext.dump_all(documents, yamltext.CDumper) == reference(documents)


def test_what_it_passes():
    assert yamltext.libyaml_agrees([{"a": "b c", "n": [1, 2.5, None, True]}, {"k" * 40: "x" * 500}])
    for doc in ({"a": "é"}, {"a": "x\ny"}, {"a": 'say "x"'}, {"k" * 41: 1}, {"": 1},
                {"a": object()}):
        assert not yamltext.libyaml_agrees([doc])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.dictionaries(HOSTILE, VALUES, max_size=5), min_size=1, max_size=4))
def test_documents_written_one_by_one_join_to_the_documents_written_together(documents):
    # what the Kueue export's set writer relies on, where no text ends open ("...")
    parts = [yamltext.dump_all([d]) for d in documents]
    if not any(p.endswith("...\n") for p in parts):
        assert "".join(parts) == yamltext.dump_all(documents)
