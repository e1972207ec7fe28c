"""Multi-document YAML for the exporters: the bytes of ``yaml.safe_dump_all``, faster.

PyYAML's ``safe_dump_all`` is pure Python; the Kueue export of a 10× institute (80
clusters, a manifest set per cluster) was 68 MB of it, about 50 CPU-s. Here:

- the documents go through PyYAML's libyaml emitter (``yaml.CSafeDumper``) when PyYAML was
  built with it and the documents are ones on which libyaml writes what PyYAML's Python
  emitter writes (:func:`libyaml_agrees`); otherwise, or without libyaml, through the
  Python emitter (``yaml.SafeDumper``). The two emitters differ on some text: libyaml
  escapes characters beyond the BMP where Python writes them, folds long double-quoted
  strings elsewhere, and writes keys over 128 characters and the empty key as simple keys
  where Python writes ``? key``. So the bytes are the Python emitter's, the same with or
  without libyaml (the tests compare both, hostile ids included);
- two things PyYAML does in Python for every value are done leaner, with the same result:
  the representer (:meth:`_Dumper.represent_data` builds the nodes ``SafeRepresenter``
  would: the same tags, styles and aliases) and the resolver's lookup of a scalar's
  implicit tag (remembered per value: with no path resolvers it depends on the value
  alone).

The YAML is still written by the library: nothing here decides how a scalar is quoted
or folded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode
from yaml.representer import SafeRepresenter

#: Whether libyaml's emitter is used (PyYAML built with it).
LIBYAML = bool(getattr(yaml, "__with_libyaml__", False)) and hasattr(yaml, "CSafeDumper")

STR, INT, FLOAT, BOOL, NULL, MAP, SEQ = (f"tag:yaml.org,2002:{t}" for t in
                                         ("str", "int", "float", "bool", "null", "map", "seq"))

#: The options every exported YAML file is written with.
OPTIONS = {"sort_keys": False, "default_flow_style": False, "allow_unicode": True, "width": 100}


def _fast(base: type) -> type:
    """``base`` (a safe dumper class) with the lean representer and a remembered resolver."""

    class _Dumper(base):  # type: ignore[misc,valid-type]
        _tags: dict[str, str] = {}  # a scalar's implicit tag, by value

        def represent_data(self, data: Any) -> Any:
            """The node ``SafeRepresenter.represent_data`` makes for ``data``.

            str, int, float, bool and None scalars, and dicts and lists (block style, keys
            in insertion order), as SafeRepresenter writes them; a dict or list met twice in
            one document becomes the same node (an alias), as there. Anything else goes to
            SafeRepresenter itself (which refuses what it cannot represent).
            """
            kind = type(data)
            if kind is str:
                return ScalarNode(STR, data)
            if kind is dict:
                seen = self.represented_objects
                if id(data) in seen:
                    return seen[id(data)]
                node = MappingNode(MAP, [], flow_style=False)
                seen[id(data)] = node
                self.object_keeper.append(data)
                node.value = [(self.represent_data(k), self.represent_data(v))
                              for k, v in data.items()]
                return node
            if kind is list:
                seen = self.represented_objects
                if id(data) in seen:
                    return seen[id(data)]
                node = SequenceNode(SEQ, [], flow_style=False)
                seen[id(data)] = node
                self.object_keeper.append(data)
                node.value = [self.represent_data(v) for v in data]
                return node
            if kind is int:
                return ScalarNode(INT, str(data))
            if kind is bool:
                return ScalarNode(BOOL, "true" if data else "false")
            if data is None:
                return ScalarNode(NULL, "null")
            if kind is float:
                return SafeRepresenter.represent_float(self, data)
            return SafeRepresenter.represent_data(self, data)

        def resolve(self, kind: type, value: Any, implicit: Any) -> str:
            """``Resolver.resolve`` without path resolvers: a scalar's tag remembered per value.

            A scalar's implicit tag is the first implicit resolver matching its value
            (``implicit[0]``), else ``str``; a collection's is ``map`` or ``seq``.
            """
            if kind is ScalarNode:
                if not implicit[0]:
                    return STR
                tag = self._tags.get(value)
                if tag is None:
                    tag = self._tags[value] = super().resolve(kind, value, implicit)
                    if len(self._tags) > 1_000_000:  # a bound on what it keeps
                        self._tags.clear()
                return tag
            return MAP if kind is MappingNode else SEQ

        def descend_resolver(self, current_node: Any, current_index: Any) -> None:
            """Nothing to do: no path resolvers."""

        def ascend_resolver(self) -> None:
            """Nothing to do: no path resolvers."""

    if base.yaml_path_resolvers:  # what the shortcuts above rely on
        raise TypeError(f"{base.__name__} has path resolvers")

    _Dumper.__name__ = f"Fast{base.__name__}"
    return _Dumper


PyDumper = _fast(yaml.SafeDumper)
CDumper = _fast(yaml.CSafeDumper) if LIBYAML else None

#: In the documents' JSON (``ensure_ascii=False``): a character outside printable ASCII, a
#: backslash (JSON's escape of a control character, quote or backslash), the empty key or
#: a key over :data:`SHORT_KEY` characters. Any of these sends the documents to the Python
#: emitter.
SHORT_KEY = 40
_DISAGREES = re.compile(r'[^\x20-\x7e]|\\|"": |"[^"]{' + str(SHORT_KEY + 1) + r',}": ')


def libyaml_agrees(documents: list[Any]) -> bool:
    """Whether libyaml's emitter writes ``documents`` as PyYAML's Python emitter does.

    True when every string in them, key or value, is printable ASCII without a double
    quote or a backslash, every key has 1 to :data:`SHORT_KEY` characters, and they hold
    only what JSON can write: on such documents the two emitters agree
    (tests/test_yamltext.py tries them on random documents of that kind, any length of
    value and any nesting).
    Conservative: it may send documents the emitters would agree on to the Python one.
    """
    try:
        text = json.dumps(documents, ensure_ascii=False)
    except (TypeError, ValueError):
        return False
    return _DISAGREES.search(text) is None


def dump_all(documents: Iterable[Any], dumper: type | None = None) -> str:
    """``documents`` as multi-document YAML, each after a ``---`` line (:data:`OPTIONS`).

    ``dumper``: the dumper class to use (``PyDumper``, ``CDumper``); by default libyaml's
    where :func:`libyaml_agrees`, else the Python emitter's: the same bytes either way.
    """
    documents = list(documents)
    if dumper is None:
        dumper = CDumper if CDumper is not None and libyaml_agrees(documents) else PyDumper
    return yaml.dump_all(documents, Dumper=dumper, explicit_start=True, **OPTIONS)
