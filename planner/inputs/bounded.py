"""JSON, YAML and TOML read with bounds, so that a hostile file is a problem, never a traceback.

The standard parsers accept what no file of ours holds and then fail far from the file:
JSON's ``NaN`` and ``Infinity`` (and ``1e400``, read as infinity) pass a JSON Schema's
``"type": "number"``; nesting a few thousand levels deep raises ``RecursionError`` in the
parser or in whatever walks the result later; a YAML alias (``*name``) can expand a small
file into billions of nodes. The loaders here refuse each of these as an
:class:`~planner.errors.InputProblem` naming the file, the line where known and the path
of the value (``column``: ``items[3].spec.podSets``):

- nesting deeper than :data:`MAX_DEPTH` (a Kubernetes object is about 15 levels deep);
- a number that is not finite (``NaN``, ``Infinity``, ``1e400``), or an integer longer
  than Python converts (4,300 digits);
- in YAML, aliases (our exporters never write one).

Every caller that reads a file a user names (``planner ingest kueue``, ``cycle --kueue``,
``export --workloads`` and ``--late``, ``run --previous``, a cycle's ``cycle.json``, the
TOML of a scenario, a model or a sweep) goes through :func:`load_json`,
:func:`load_yaml_all` or :func:`load_toml`.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Callable
from typing import Any

import yaml

from planner.errors import InputProblem

#: The deepest nesting a file may hold (levels of objects and arrays).
MAX_DEPTH = 64


class _NotFinite:
    """What JSON's ``NaN`` / ``Infinity`` / ``-Infinity`` parse to, found by :func:`_walk`."""

    def __init__(self, name: str):
        self.name = name


def json_path(parts: tuple[object, ...]) -> str:
    """``items[3].spec.podSets`` for the keys and indexes leading to a value.

    A path deeper than a dozen levels is cut in the middle (``a.b.c…[0][0] (80 levels)``).
    """
    def step(part: object, first: bool) -> str:
        return f"[{part}]" if isinstance(part, int) else (str(part) if first else f".{part}")

    if not parts:
        return "(top)"
    if len(parts) > 12:
        head = "".join(step(p, i == 0) for i, p in enumerate(parts[:6]))
        tail = "".join(step(p, False) for p in parts[-3:])
        return f"{head}…{tail} ({len(parts)} levels)"
    return "".join(step(p, i == 0) for i, p in enumerate(parts))


def _scalar_problem(value: Any) -> str | None:
    if isinstance(value, _NotFinite):
        return f"{value.name} is not a number; write a finite number"
    if isinstance(value, float) and math.isnan(value):
        return "nan is not a number; write a finite number"
    if isinstance(value, float) and math.isinf(value):
        return "a number too large to hold (it reads as infinity); write a finite number"
    return None


def _fine(value: Any, finite: bool) -> bool:
    """Whether a parsed document is within bounds: one pass, no paths kept (the fast path)."""
    if not isinstance(value, (dict, list)):
        return not finite or _scalar_problem(value) is None
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        for child in (node.values() if isinstance(node, dict) else node):
            kind = type(child)
            if kind is dict or kind is list:
                if depth + 1 > MAX_DEPTH:
                    return False
                stack.append((child, depth + 1))
            elif finite and (kind is float or kind is _NotFinite) and \
                    _scalar_problem(child) is not None:
                return False
    return True


def _walk(value: Any, finite: bool = True) -> tuple[str, tuple[object, ...]] | None:
    """The first thing wrong in a parsed document, and where: too deep, or not finite.

    Iterative (a deep document must not exhaust the stack here either); a document within
    bounds is passed by :func:`_fine` alone, and only a wrong one walked again for the path.
    ``finite=False``: numbers are left to the caller (TOML's ``nan``, which a model file's
    checks name by key).
    """
    if _fine(value, finite):
        return None
    if not isinstance(value, (dict, list)):
        problem = _scalar_problem(value)
        return (problem, ()) if problem else None
    stack: list[tuple[Any, tuple[object, ...]]] = [(value, ())]
    while stack:
        node, path = stack.pop()
        for key, child in (node.items() if isinstance(node, dict) else enumerate(node)):
            if isinstance(child, (dict, list)):
                if len(path) + 1 >= MAX_DEPTH:
                    return f"nested deeper than {MAX_DEPTH} levels", (*path, key)
                stack.append((child, (*path, key)))
            elif finite and (problem := _scalar_problem(child)) is not None:
                return problem, (*path, key)
    return None


def load_json(label: str, text: str, hint: str = "") -> tuple[Any, list[InputProblem]]:
    """The value of JSON ``text``, or ``None`` and the problem (see the module docstring).

    ``hint`` ends the message of a file that is not JSON (how to make a good one).
    """
    tail = f"; {hint}" if hint else ""
    try:
        value = json.loads(text, parse_constant=_NotFinite)
    except json.JSONDecodeError as err:
        return None, [InputProblem(label, err.lineno, None,
                                   f"not JSON ({err.msg} at character {err.colno}){tail}")]
    except RecursionError:
        return None, [InputProblem(label, None, None,
                                   f"nested deeper than {MAX_DEPTH} levels{tail}")]
    except ValueError as err:  # an integer of more than 4,300 digits
        return None, [InputProblem(label, None, None, f"not JSON a planner reads ({err})")]
    wrong = _walk(value)
    if wrong is not None:
        return None, [InputProblem(label, None, json_path(wrong[1]), wrong[0])]
    return value, []


class _Refused(yaml.YAMLError):
    """A YAML document this loader does not read (an alias, too deep)."""

    def __init__(self, message: str, line: int | None):
        super().__init__(message)
        self.message, self.line = message, line


class _Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` without aliases and with a bounded depth."""

    depth = 0

    def compose_node(self, parent, index):  # noqa: ANN001, ANN201 (PyYAML's signature)
        """Compose one node, refusing an alias and nesting deeper than :data:`MAX_DEPTH`."""
        event = self.peek_event()
        line = event.start_mark.line + 1 if event.start_mark is not None else None
        if isinstance(event, yaml.AliasEvent):
            raise _Refused("holds an alias (*name); a manifest set of ours never does", line)
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise _Refused(f"nested deeper than {MAX_DEPTH} levels", line)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def load_yaml_all(label: str, text: str) -> tuple[list[Any] | None, list[InputProblem]]:
    """The documents of YAML ``text`` (blank ones dropped), or ``None`` and the problem."""
    try:
        docs = [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]  # noqa: S506
    except _Refused as err:
        return None, [InputProblem(label, err.line, None, err.message)]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        return None, [InputProblem(label, line, None, f"not YAML: {_reason(err)}")]
    except (RecursionError, ValueError) as err:
        return None, [InputProblem(label, None, None, f"not YAML a planner reads ({err})")]
    for n, doc in enumerate(docs, start=1):
        wrong = _walk(doc)
        if wrong is not None:
            return None, [InputProblem(label, None, f"document {n}: {json_path(wrong[1])}",
                                       wrong[0])]
    return docs, []


def _reason(err: yaml.YAMLError) -> str:
    """What PyYAML says is wrong (its problem, and what it was reading), without the source."""
    problem, context = getattr(err, "problem", None), getattr(err, "context", None)
    if problem:
        return f"{problem} ({context})" if context else str(problem)
    return str(err).split("\n")[0]


def load_toml(label: str, text: str,
              line_of: Callable[[tomllib.TOMLDecodeError], int | None] | None = None
              ) -> tuple[dict[str, Any] | None, list[InputProblem]]:
    """The table of TOML ``text``, or ``None`` and the problem (syntax, too deep).

    ``line_of`` finds the line of a syntax error (Python 3.11 gives it only in the text).
    """
    try:
        value = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        reason = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(err))
        line = line_of(err) if line_of is not None else None
        return None, [InputProblem(label, line, None, f"not valid TOML: {reason}; fix the syntax")]
    except RecursionError:
        return None, [InputProblem(label, None, None, f"nested deeper than {MAX_DEPTH} levels")]
    wrong = _walk(value, finite=False)
    if wrong is not None:
        return None, [InputProblem(label, None, json_path(wrong[1]), wrong[0])]
    return value, []
