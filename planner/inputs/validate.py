"""Validation: raw text tables and config entries → typed values, one check per rule.

Every check is a function returning a list of :class:`~planner.errors.InputProblem`
(never raising), so ``planner validate`` reports all problems at once. The rules come
from :mod:`planner.inputs.schema` where they are data (columns, types, bounds, unique
keys, references, intervals) and from the functions below where they need code (the
org tree, the config's dates, repeated usage).

Order: column checks decide whether a table can be read at all; a table whose columns
are wrong is left out (``None``) and checks that need it are skipped, so one mistake
does not cascade into hundreds of messages. Within a readable table a bad cell becomes
``None`` and is skipped by later checks on that row.
"""

from __future__ import annotations

import datetime as dt
import difflib
import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from planner.errors import InputProblem
from planner.inputs.labels import node_selector, parse_labels, selector_overlaps
from planner.inputs.read import ConfigEntry, RawConfig, RawTable
from planner.inputs.scenario import ScenarioConfig
from planner.inputs.schema import (
    CONFIG_FIELDS,
    LIMITS,
    LIST_SEPARATOR,
    TABLES,
    Bound,
    Field,
    Ref,
    TableSchema,
    bad_characters,
    has_bad_characters,
)
from planner.inputs.targets import partition_problem

UTC = dt.UTC

# --------------------------------------------------------------------------- cells

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}"
              r"(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|[+-]\d{2}:?\d{2})?)?")
DATE_HINT = "write 2026-11-02 or 2026-11-02T06:00:00 (UTC; Z or +02:00 allowed)"


def parse_number(text: str) -> float | None:
    """A finite decimal number, or ``None`` (``nan``, ``inf``, ``1_000`` are not numbers)."""
    text = text.strip()
    if not _NUMBER.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def parse_datetime(text: str) -> dt.datetime | None:
    """An ISO 8601 date or date-time as an aware UTC datetime (naive = UTC), or ``None``."""
    text = text.strip()
    if not ISO_DATE.fullmatch(text):
        return None
    try:
        stamp = dt.datetime.fromisoformat(text)
    except ValueError:  # 2026-13-45 and the like
        return None
    return stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp.astimezone(UTC)


def iso(stamp: dt.datetime) -> str:
    """A UTC datetime as ISO 8601 text with ``Z``."""
    return stamp.astimezone(UTC).isoformat().replace("+00:00", "Z")


ID_LENGTH = int(LIMITS["id_length"])


def length_problem(text: str) -> str | None:
    """What is wrong with an id or name longer than ``LIMITS["id_length"]``, or ``None``."""
    if len(text) <= ID_LENGTH:
        return None
    return (f"is {len(text):,} characters long; ids and names are at most {ID_LENGTH:,} "
            "(a spreadsheet cell would cut it): shorten it")


def parse_cell(f: Field, text: str) -> tuple[object, str | None]:
    """The value of one cell of column ``f`` and ``None``, or ``None`` and what is wrong."""
    if not text.strip():
        if f.empty_allowed:
            return f.default, None
        return None, f"{f.name} is empty; every row needs one"
    if f.kind in ("id", "str", "list") and (bad := bad_characters(text)):
        return None, (f"holds control characters ({bad}); ids and names are printed into "
                      "shell scripts, YAML and spreadsheets: delete them")
    if f.kind in ("id", "str"):
        return (text, None) if (error := length_problem(text)) is None else (None, error)
    if f.kind == "list":
        items = tuple(dict.fromkeys(i for i in map(str.strip, text.split(LIST_SEPARATOR)) if i))
        long = next((error for item in items if (error := length_problem(item))), None)
        return (items, None) if long is None else (None, long)
    if f.kind == "labels":
        return parse_labels(text)
    if f.kind == "datetime":
        stamp = parse_datetime(text)
        if stamp is None:
            return None, f"{text!r} is not an ISO 8601 date; {DATE_HINT}"
        return stamp, None
    number = parse_number(text)
    if number is None:
        return None, f"{text!r} is not a number; write a decimal number such as 12 or 0.5"
    if f.kind == "int":
        if not number.is_integer() or abs(number) >= 2**63:
            return None, f"{text!r} is not a whole number; write a whole number such as 4"
        return int(number), None
    return number, None


def parse_column(f: Field, texts: Sequence[str]) -> tuple[list[object], list[tuple[int, str]]]:
    """The values of a column's cells and ``(position, what is wrong)`` per wrong cell.

    The same as :func:`parse_cell` on every cell, in row order, but each distinct text is
    parsed once (``pd.factorize``: a usage file of 55,000 jobs has about 2,000 distinct
    start times and a handful of GPU counts), and an id or text column whose distinct
    values are neither empty nor hold a control character (one regex over them all) is
    taken as it is. A wrong cell's value is ``None``.
    """
    if not texts:
        return [], []
    codes, uniques = pd.factorize(np.asarray(texts, dtype=object))
    distinct: list[str] = uniques.tolist()
    if (f.kind in ("id", "str") and all(map(str.strip, distinct))
            and max(map(len, distinct)) <= ID_LENGTH
            and not has_bad_characters("\x20".join(distinct))):
        return list(texts), []
    parsed = [parse_cell(f, text) for text in distinct]
    positions = codes.tolist()
    values = [parsed[c][0] for c in positions]
    messages = {c: error for c, (_, error) in enumerate(parsed) if error is not None}
    if not messages:
        return values, []
    at = np.flatnonzero(np.isin(codes, list(messages))).tolist()
    return values, [(i, messages[positions[i]]) for i in at]


# --------------------------------------------------------------------------- tables


@dataclass
class Parsed:
    """A table with typed values; ``None`` where a cell was wrong."""

    schema: TableSchema
    label: str
    rows: list[int]  # spreadsheet row numbers
    values: dict[str, list[object]]  # column → value per row, in schema order
    bad: set[int] = field(default_factory=set)  # positions of rows with a wrong cell

    def records(self) -> Iterator[tuple[int, dict[str, object]]]:
        """``(row number, {column: value})`` for every row."""
        names = list(self.values)
        for i, row in enumerate(self.rows):
            yield row, {name: self.values[name][i] for name in names}

    def first_rows(self, column: str) -> dict[object, int]:
        """Each value of ``column`` and the row it first appears in."""
        first: dict[object, int] = {}
        for row, value in zip(self.rows, self.values[column], strict=True):
            if value is not None:
                first.setdefault(value, row)
        return first


def _suggest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_columns(schema: TableSchema, raw: RawTable) -> list[InputProblem]:
    """Every required column present, none unknown, none twice, none unnamed."""
    problems = []
    expected = list(schema.columns)
    seen: set[str] = set()
    for position, name in enumerate(raw.header):
        if not name:
            if any(position < len(cells) and cells[position].strip() for _, cells in raw.rows):
                problems.append(InputProblem(
                    raw.label, 1, None,
                    f"column {position + 1} has values but no name; name it "
                    f"({', '.join(expected)}) or delete it"))
        elif name in seen:
            problems.append(InputProblem(raw.label, 1, name,
                                         "column appears twice; delete one of them"))
        elif name not in expected:
            problems.append(InputProblem(
                raw.label, 1, name,
                f"unknown column{_suggest(name, expected)}; the columns are "
                f"{', '.join(expected)}: rename or delete it"))
        seen.add(name)
    for f in schema.fields:
        if f.required and f.name not in seen:
            problems.append(InputProblem(
                raw.label, 1, f.name,
                f"missing column; add a column {f.name} ({f.meaning.rstrip('.')})"))
    return problems


def check_row_width(raw: RawTable) -> list[InputProblem]:
    """No row holds more values than the header has columns."""
    width = len(raw.header)
    return [InputProblem(raw.label, row, None,
                         f"{len(cells)} values but the header has {width} columns; delete "
                         "the extra values or quote a value that holds a comma")
            for row, cells in raw.rows
            if len(cells) > width and any(c.strip() for c in cells[width:])]


def parse_table(schema: TableSchema, raw: RawTable) -> tuple[Parsed | None, list[InputProblem]]:
    """Type every cell (a wrong cell is a problem and ``None``); ``None`` if columns are wrong."""
    problems = check_columns(schema, raw)
    named = [h for h in raw.header if h in schema.columns]
    if len(named) != len(set(named)) or not set(schema.required_columns) <= set(named):
        return None, problems  # which cell is which is unclear: leave the table out
    problems += check_row_width(raw)
    position = {name: raw.header.index(name) for name in schema.columns if name in raw.header}
    parsed = Parsed(schema, raw.label, [row for row, _ in raw.rows], {})
    rows = [cells for _, cells in raw.rows]
    # the columns every row reaches, transposed at once
    columns = list(zip(*rows, strict=False)) if rows else []  # to the shortest
    for f in schema.fields:
        where = position.get(f.name)
        if where is None:  # an optional column left out
            parsed.values[f.name] = [f.default] * len(raw.rows)
            continue
        texts = (columns[where] if where < len(columns) else
                 [cells[where] if where < len(cells) else "" for cells in rows])
        parsed.values[f.name], errors = parse_column(f, texts)
        for i, error in errors:
            problems.append(InputProblem(raw.label, parsed.rows[i], f.name, error))
            parsed.bad.add(i)
    return parsed, problems


def check_min_rows(table: Parsed) -> list[InputProblem]:
    """Tables that must not be empty (clusters, org) have rows."""
    if len(table.rows) >= table.schema.min_rows:
        return []
    return [InputProblem(table.label, None, None,
                         f"no rows; add at least {table.schema.min_rows} below the header")]


def check_bounds(table: Parsed) -> list[InputProblem]:
    """Numbers lie in their column's range (``> 0``, ``≥ 0``, and below its upper bound)."""
    problems = []
    for f in table.schema.fields:
        if f.kind not in ("int", "float") or (
                f.bound is Bound.ANY and f.minimum is None and f.maximum is None):
            continue
        values = table.values[f.name]
        # whole column at once (a wrong cell, None, is NaN and passes); the rows it flags
        # get their message from range_problem, which decides
        number = np.array(values, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            fine = np.isnan(number) | (_admitted(f.bound, number)
                                       & (number >= (-np.inf if f.minimum is None else f.minimum))
                                       & (number <= (np.inf if f.maximum is None else f.maximum)))
        for i in np.flatnonzero(~fine).tolist():
            value = values[i]
            if isinstance(value, (int, float)) and (error := f.range_problem(value)):
                problems.append(InputProblem(table.label, table.rows[i], f.name, error))
    return problems


def _admitted(bound: Bound, number: np.ndarray) -> np.ndarray:
    """:meth:`Bound.admits` on a column."""
    if bound is Bound.POSITIVE:
        return number > 0
    if bound is Bound.NON_NEGATIVE:
        return number >= 0
    return np.ones(len(number), dtype=bool)


def check_unique(table: Parsed) -> list[InputProblem]:
    """The table's key column holds no value twice (the later rows are reported)."""
    key = table.schema.unique
    if key is None:
        return []
    first: dict[object, int] = {}
    problems = []
    for row, value in zip(table.rows, table.values[key], strict=True):
        if value is None:
            continue
        if value in first:
            problems.append(InputProblem(table.label, row, key,
                                         f"duplicate {key} {value!r} (first in row "
                                         f"{first[value]}); each {key} must be unique: rename "
                                         "or merge the rows"))
        else:
            first[value] = row
    return problems


def check_intervals(table: Parsed) -> list[InputProblem]:
    """Each interval's first date is strictly before its second (``start < end``)."""
    problems = []
    for interval in table.schema.intervals:
        firsts, seconds = table.values[interval.first], table.values[interval.second]
        for row, a, b in zip(table.rows, firsts, seconds, strict=True):
            if isinstance(a, dt.datetime) and isinstance(b, dt.datetime) and not a < b:
                problems.append(InputProblem(
                    table.label, row, interval.second,
                    f"{interval.second} {iso(b)} is not after {interval.first} "
                    f"{iso(a)}; make {interval.second} later"))
    return problems


@dataclass(frozen=True)
class OrgIndex:
    """What references need to know of the org tree."""

    label: str
    ids: frozenset[str]
    leaves: frozenset[str]


def org_index(org: Parsed) -> OrgIndex:
    """Ids and leaves (ids that are nobody's parent) of a parsed org table."""
    ids = frozenset(str(v) for v in org.values["id"] if v is not None)
    parents = {v for v in org.values["parent"] if v}
    return OrgIndex(org.label, ids, ids - parents)


def check_org_self_parent(org: Parsed) -> list[InputProblem]:
    """No node is its own parent."""
    return [InputProblem(org.label, row, "parent",
                         f"{node!r} is its own parent; give it another parent, or leave "
                         "parent empty for a top-level node")
            for row, node, parent in zip(org.rows, org.values["id"], org.values["parent"],
                                         strict=True)
            if node is not None and node == parent]


def check_org_cycles(org: Parsed) -> list[InputProblem]:
    """The tree has no cycles; every node on one is reported (self-parents excepted).

    Walks the raw parent map, not :class:`planner.inputs.org.OrgTree`: it runs before a
    valid tree can be built (duplicate ids, unknown parents and cycles are still possible).
    """
    row_of = org.first_rows("id")
    parent: dict[str, str] = {}
    for node, up in zip(org.values["id"], org.values["parent"], strict=True):
        if node is not None and up and up in row_of and up != node:
            parent.setdefault(str(node), str(up))
    done: set[str] = set()
    problems = []
    for start in map(str, row_of):
        path: list[str] = []
        on_path: dict[str, int] = {}
        node: str | None = start
        while node is not None and node not in done and node not in on_path:
            on_path[node] = len(path)
            path.append(node)
            node = parent.get(node)
        if node is not None and node in on_path:
            cycle = path[on_path[node]:]
            shown = " → ".join([*cycle, cycle[0]])
            problems += [InputProblem(org.label, row_of[member], "parent",
                                      f"{member!r} is on a cycle (child → parent: {shown}); "
                                      "the org tree has no cycles: give one of these nodes a "
                                      "parent outside the cycle, or none")
                         for member in cycle]
        done.update(path)
    return problems


def check_org_depth(org: Parsed) -> list[InputProblem]:
    """No node lies deeper than ``LIMITS["org_depth"]`` levels below the top.

    Run on a tree without cycles. Each node one level too deep is reported at its row
    (a branch far too deep gives one message, not one per node below). Like
    :func:`check_org_cycles`, it walks the raw parent map (duplicates and unknown parents
    may remain): the tree is built only from validated input.
    """
    limit = int(LIMITS["org_depth"])
    parent: dict[str, str] = {}
    for node, up in zip(org.values["id"], org.values["parent"], strict=True):
        if node is not None and up is not None and up != node:
            parent.setdefault(str(node), str(up))
    depth: dict[str, int] = {}
    for start in parent:
        path = []
        node = start
        while node in parent and node not in depth and len(path) <= len(parent):
            path.append(node)
            node = parent[node]
        base = depth.get(node, -1)
        for i, member in enumerate(reversed(path)):
            depth[member] = base + 1 + i
    row_of = org.first_rows("id")
    return [InputProblem(org.label, row_of[node], "parent",
                         f"{node!r} lies {d} levels below the top; the org tree may be at "
                         f"most {limit} deep: attach it higher up")
            for node, d in depth.items()
            if d == limit + 1 and node in row_of]


def check_references(table: Parsed, clusters: frozenset[str] | None,
                     org: OrgIndex | None, clusters_label: str) -> list[InputProblem]:
    """Ids name what they refer to: a cluster, an org node (parents), a project (a leaf)."""
    problems = []
    for f in table.schema.fields:
        if f.ref is Ref.NONE:
            continue
        values = table.values[f.name]
        fine = {v for v in set(values)
                if v is None or v == "" or v == () or _refers(f.ref, v, clusters, org)}
        for row, value in zip(table.rows, values, strict=True):
            if value in fine:
                continue
            if f.ref is Ref.CLUSTER and clusters is not None:
                names = value if isinstance(value, tuple) else (value,)
                problems += [InputProblem(
                    table.label, row, f.name,
                    f"unknown cluster {name!r}{_suggest(str(name), sorted(clusters))}; use a "
                    f"cluster of {clusters_label} or add it there")
                    for name in names if name not in clusters]
            elif f.ref is Ref.ORG_NODE and org is not None and value not in org.ids:
                problems.append(InputProblem(
                    table.label, row, f.name,
                    f"unknown parent {value!r}{_suggest(str(value), sorted(org.ids))}; use an "
                    "id of this file, or leave parent empty for a top-level node"))
            elif f.ref is Ref.PROJECT and org is not None:
                if value not in org.ids:
                    problems.append(InputProblem(
                        table.label, row, f.name,
                        f"unknown project {value!r}{_suggest(str(value), sorted(org.leaves))}; "
                        f"use a project of {org.label} or add it there"))
                elif value not in org.leaves:
                    problems.append(InputProblem(
                        table.label, row, f.name,
                        f"{value!r} is not a project but an inner node of {org.label} (it has "
                        "children); only leaves hold budgets, demand, reservations and usage: "
                        "use one of its projects"))
    return problems


def _refers(ref: Ref, value: object, clusters: frozenset[str] | None,
            org: OrgIndex | None) -> bool:
    """Whether ``value`` names what ``ref`` asks for (or there is nothing to check against)."""
    if ref is Ref.CLUSTER:
        names = value if isinstance(value, tuple) else (value,)
        return clusters is None or all(name in clusters for name in names)
    if ref is Ref.ORG_NODE:
        return org is None or value in org.ids
    if ref is Ref.PROJECT:
        return org is None or value in org.leaves
    return True


def check_node_selectors(clusters: Parsed) -> list[InputProblem]:
    """No two clusters select the same nodes: selectors neither equal nor one inside another.

    A cluster's selector is its ``node_labels`` or the default
    (:func:`planner.inputs.labels.node_selector`); the later row of a pair is reported.
    """
    selectors, rows = {}, {}
    for i, (row, record) in enumerate(clusters.records()):
        name, gpu_type = record["cluster"], record["gpu_type"]
        if i in clusters.bad or name is None or gpu_type is None or name in selectors:
            continue
        selectors[name] = node_selector(str(name), str(gpu_type), record["node_labels"] or None)
        rows[name] = row
    problems = []
    for a, b in selector_overlaps(selectors):
        shown = ", ".join(f"{k}={v}" for k, v in selectors[b])
        same = "the same node labels as" if selectors[a] == selectors[b] else \
            "node labels overlapping those of"
        problems.append(InputProblem(
            clusters.label, rows[b], "node_labels",
            f"cluster {b!r} selects nodes by {same} cluster {a!r} (row {rows[a]}): {shown}; "
            "give each cluster node_labels no other cluster's nodes carry (one cluster's "
            "labels must not all be another's)"))
    return problems


def check_target_ids(clusters: Parsed, targets: tuple[str, ...]) -> list[InputProblem]:
    """Ids the scenario's executors cannot carry.

    For ``slurm``: clusters that are not partition names
    (:func:`planner.inputs.targets.partition_problem`).
    """
    if "slurm" not in targets:
        return []
    return [InputProblem(clusters.label, row, "cluster", f"for Slurm: {problem}")
            for row, name in zip(clusters.rows, clusters.values["cluster"], strict=True)
            if name is not None and (problem := partition_problem(str(name))) is not None]


def allowed_clusters(budgets: Parsed) -> dict[str, tuple[str, ...]]:
    """Each budgeted project's allowed clusters (``()`` = all), from its first row."""
    allowed: dict[str, tuple[str, ...]] = {}
    for project, subset in zip(budgets.values["project"], budgets.values["clusters"],
                               strict=True):
        if project is not None and isinstance(subset, tuple):
            allowed.setdefault(str(project), subset)
    return allowed


def check_allowed_clusters(table: Parsed, allowed: Mapping[str, tuple[str, ...]],
                           clusters: frozenset[str] | None,
                           budgets_label: str) -> list[InputProblem]:
    """A row's cluster is one its project may use (budgets' ``clusters``)."""
    if not table.schema.allowed_cluster:
        return []
    problems = []
    for row, project, cluster in zip(table.rows, table.values["project"],
                                     table.values["cluster"], strict=True):
        subset = allowed.get(str(project), ())
        if (cluster is None or not subset or cluster in subset
                or (clusters is not None and cluster not in clusters)):
            continue
        problems.append(InputProblem(
            table.label, row, "cluster",
            f"project {project!r} may not use cluster {cluster!r} ({budgets_label} allows "
            f"{', '.join(subset)}); add the cluster to the project's clusters or use an "
            "allowed one"))
    return problems


def cluster_gpus(clusters: Parsed) -> dict[str, tuple[int, int]]:
    """Each cluster's (nodes, GPUs a node), from its first row; none whose size is wrong."""
    out: dict[str, tuple[int, int]] = {}
    fields = [clusters.schema.field(n) for n in ("nodes", "gpus_per_node")]
    for i, (_, record) in enumerate(clusters.records()):
        name, nodes, gpn = record["cluster"], record["nodes"], record["gpus_per_node"]
        if (i not in clusters.bad and isinstance(nodes, int) and isinstance(gpn, int)
                and not any(f.range_problem(v) for f, v in zip(fields, (nodes, gpn),
                                                                strict=True))):
            out.setdefault(str(name), (nodes, gpn))
    return out


def check_capacity(table: Parsed, sizes: Mapping[str, tuple[int, int]],
                   clusters_label: str) -> list[InputProblem]:
    """What ran held at most its cluster's GPUs (``within_capacity`` tables: usage).

    A job on more GPUs than its cluster has did not run as recorded (a typo, or another
    cluster's job): charged, it would spend a budget many times over and drop its
    project's plan to nothing. Demand is not checked: a backlog may exceed a cluster.
    """
    if not table.schema.within_capacity:
        return []
    problems = []
    field = table.schema.field("gpus")
    for row, cluster, gpus in zip(table.rows, table.values["cluster"], table.values["gpus"],
                                  strict=True):
        if (cluster not in sizes or not isinstance(gpus, (int, float))
                or field.range_problem(gpus) is not None):  # out of range: said already
            continue
        nodes, gpn = sizes[str(cluster)]
        if gpus > nodes * gpn:
            problems.append(InputProblem(
                table.label, row, "gpus",
                f"{gpus:,g} GPUs, but cluster {cluster!r} has {nodes * gpn:,} ({nodes:,} nodes "
                f"× {gpn}): no job holds more GPUs than its cluster; correct the job's GPUs, "
                f"or the cluster's nodes in {clusters_label}"))
    return problems


def check_separator(clusters: Parsed, budgets_label: str) -> list[InputProblem]:
    """No cluster id holds ``;``, which separates the clusters of budgets' ``clusters``."""
    return [InputProblem(clusters.label, row, "cluster",
                         f"{name!r} holds {LIST_SEPARATOR!r}, which separates the clusters a "
                         f"project may use in {budgets_label}: no list could name it; rename "
                         "the cluster")
            for row, name in zip(clusters.rows, clusters.values["cluster"], strict=True)
            if isinstance(name, str) and LIST_SEPARATOR in name]


def check_usage_repeats(usage: Parsed) -> list[InputProblem]:
    """A repeated ``job_id`` must repeat the same job; the later, different row is reported.

    Identical repeats are fine (a job counts once however often it is ingested) and are
    collapsed by :func:`collapse_usage`.
    """
    jobs = usage.values["job_id"]
    repeated = {job for job, count in Counter(jobs).items() if count > 1}
    names = list(usage.values)
    first: dict[object, tuple[int, dict[str, object]]] = {}
    problems = []
    for i, job in enumerate(jobs):
        if job is None or job not in repeated or i in usage.bad:
            continue
        row, record = usage.rows[i], {name: usage.values[name][i] for name in names}
        if job not in first:
            first[job] = (row, record)
            continue
        first_row, first_record = first[job]
        differ = [c for c in record if record[c] != first_record[c]]
        if differ:
            problems.append(InputProblem(
                usage.label, row, "job_id",
                f"job_id {job!r} repeats row {first_row} with a different "
                f"{', '.join(differ)}; a job counts once: give this job its own job_id or "
                "delete the stale row"))
    return problems


def collapse_usage(usage: Parsed) -> Parsed:
    """Usage with one row per ``job_id``; run after the checks passed.

    The checks leave only identical repeats (the same typed values, if not the same
    text: ``8`` and ``8.0``), so which of them is kept cannot change anything.
    """
    first: dict[object, int] = {}
    for i, job in enumerate(usage.values["job_id"]):
        first.setdefault(job, i)
    positions = sorted(first.values())
    return Parsed(usage.schema, usage.label, [usage.rows[i] for i in positions],
                  {c: [v[i] for i in positions] for c, v in usage.values.items()})


def canonical(table: Parsed) -> Parsed:
    """The table sorted by its schema's ``order`` columns, then by every other column.

    The order of rows in a file never reaches the model: shuffled files plan the same.
    Sorted as :func:`_sort_key` orders the cells, ties kept in file order, but by
    ``np.lexsort`` over each column's ranks: each distinct value is ranked once.
    """
    keys = [*table.schema.order, *(c for c in table.values if c not in table.schema.order)]
    if not table.rows:
        return table
    first = _ranks(table.values[keys[0]])
    if len(np.unique(first)) == len(first):  # a unique key: the other columns never decide
        keys = keys[:1]
    order = np.lexsort([first if c == keys[0] else _ranks(table.values[c])
                        for c in reversed(keys)])  # stable
    positions = order.tolist()
    return Parsed(table.schema, table.label, list(map(table.rows.__getitem__, positions)),
                  {c: list(map(v.__getitem__, positions)) for c, v in table.values.items()})


def _ranks(values: list[object]) -> np.ndarray:
    """Each value's rank among the column's distinct values in :func:`_sort_key` order."""
    index: dict[object, int] = {}
    codes = [index.setdefault(v, len(index)) for v in values]
    distinct = list(index)
    rank = np.empty(len(distinct), dtype=np.int64)
    if all(type(v) is str for v in distinct):  # _sort_key is (0, text): code point order
        order = sorted(range(len(distinct)), key=distinct.__getitem__)
    else:
        order = sorted(range(len(distinct)), key=lambda j: _sort_key(distinct[j]))
    rank[order] = np.arange(len(distinct))
    return rank[np.asarray(codes, dtype=np.int64)]


def _sort_key(value: object) -> tuple:
    """A total order over cell values: strings by code point, numbers, dates, lists."""
    if isinstance(value, tuple):
        return (3, value)
    if isinstance(value, dt.datetime):
        return (2, value)
    if isinstance(value, (int, float)):
        return (1, value)
    return (0, str(value))


@dataclass
class CheckedTables:
    """Typed tables (``None`` where unreadable) and every problem found in them."""

    tables: dict[str, Parsed | None]
    problems: list[InputProblem]


def check_tables(raw: Mapping[str, RawTable | None],
                 targets: tuple[str, ...] = ()) -> CheckedTables:
    """Parse every table and run every table check (and, for ``targets``, theirs)."""
    problems: list[InputProblem] = []
    tables: dict[str, Parsed | None] = {}
    for name, schema in TABLES.items():
        table = raw.get(name)
        if table is None:
            tables[name] = None
            continue
        tables[name], found = parse_table(schema, table)
        problems += found
    readable = [t for t in tables.values() if t is not None]
    for table in readable:
        problems += check_min_rows(table)
        problems += check_bounds(table)
        problems += check_unique(table)
        problems += check_intervals(table)
    clusters_table, org, budgets = tables["clusters"], tables["org"], tables["budgets"]
    clusters = (frozenset(str(c) for c in clusters_table.values["cluster"] if c is not None)
                if clusters_table is not None else None)
    clusters_label = clusters_table.label if clusters_table is not None else "clusters.csv"
    index = org_index(org) if org is not None else None
    budgets_label = budgets.label if budgets is not None else "budgets.csv"
    sizes = cluster_gpus(clusters_table) if clusters_table is not None else {}
    if clusters_table is not None:
        problems += check_node_selectors(clusters_table)
        problems += check_target_ids(clusters_table, targets)
        problems += check_separator(clusters_table, budgets_label)
    if org is not None:
        problems += check_org_self_parent(org)
        cycles = check_org_cycles(org)
        problems += cycles
        if not cycles:
            problems += check_org_depth(org)
    allowed = allowed_clusters(budgets) if budgets is not None else {}
    for table in readable:
        problems += check_references(table, clusters, index, clusters_label)
        problems += check_capacity(table, sizes, clusters_label)
        if budgets is not None:
            problems += check_allowed_clusters(table, allowed, clusters, budgets.label)
    if tables["usage"] is not None:
        problems += check_usage_repeats(tables["usage"])
    return CheckedTables(tables, problems)


# --------------------------------------------------------------------------- config


def _config_value(f: Field, entry: ConfigEntry, from_sheet: bool) -> tuple[object, str | None]:
    """The typed value of one config entry, or what is wrong with it."""
    value = entry.value
    if f.kind == "str":
        if isinstance(value, str) or (from_sheet and value is not None):
            text = value if isinstance(value, str) else str(value)
            if bad := bad_characters(text):
                return None, f"holds control characters ({bad}); delete them"
            if long := length_problem(text):
                return None, long
            return (text, None) if text.strip() else (None, "is empty; give the scenario a name")
        return None, f"must be text, got {value!r}; write it in quotes"
    if f.kind == "datetime":
        if isinstance(value, dt.datetime):
            aware = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
            return aware, None
        if isinstance(value, dt.date):
            return dt.datetime(value.year, value.month, value.day, tzinfo=UTC), None
        if isinstance(value, str) and (stamp := parse_datetime(value)) is not None:
            return stamp, None
        return None, f"{value!r} is not an ISO 8601 date; {DATE_HINT}"
    # float (including each gpu_rates entry)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if math.isfinite(value):
            return float(value), None
    elif from_sheet and isinstance(value, str) and (number := parse_number(value)) is not None:
        return number, None
    return None, f"must be a number, got {value!r}; write a number such as 24"


_RATE = CONFIG_FIELDS["gpu_rates"]


def check_config_keys(raw: RawConfig) -> list[InputProblem]:
    """Every required key present, none unknown, none twice (a sheet may repeat a row)."""
    problems = []
    seen: dict[str, int | None] = {}
    known = list(CONFIG_FIELDS)
    for entry in raw.entries:
        if entry.key in seen:
            problems.append(InputProblem(raw.label, entry.row, entry.key,
                                         f"key given twice (first in row {seen[entry.key]}); "
                                         "delete one"))
            continue
        seen[entry.key] = entry.row
        top = entry.key.split(".", 1)[0] if entry.key.startswith("gpu_rates.") else entry.key
        if top not in CONFIG_FIELDS:
            problems.append(InputProblem(
                raw.label, entry.row, entry.key,
                f"unknown key{_suggest(entry.key, known)}; the keys are {', '.join(known)}: "
                "rename or delete it"))
    for name, f in CONFIG_FIELDS.items():
        if f.required and name not in seen:
            how = (f"add a row {name} | {f.example}" if raw.from_sheet
                   else f"add a line {name} = {f.example}")
            problems.append(InputProblem(raw.label, None, name, f"missing key; {how}"))
    return problems


def config_values(raw: RawConfig) -> tuple[dict[str, object], dict[str, float],
                                           list[InputProblem]]:
    """Typed values of the known keys and the rates; wrong types and bounds are problems."""
    values: dict[str, object] = {}
    rates: dict[str, float] = {}
    problems = []
    for entry in raw.entries:
        rate = entry.key.startswith("gpu_rates.")
        if entry.key == "gpu_rates":
            problems.append(InputProblem(
                raw.label, entry.row, entry.key,
                "needs a rate per GPU type; give each rate its own row, keyed "
                "gpu_rates.<GPU type> (gpu_rates.H100)" if raw.from_sheet else
                "must be a table of GPU type = rate (NGH per GPU-hour); write [gpu_rates] "
                "and H100 = 1.0 below it"))
            continue
        if not rate and entry.key not in CONFIG_FIELDS:
            continue  # unknown: check_config_keys reports it
        name = entry.key.split(".", 1)[1] if rate else entry.key
        if name in (rates if rate else values):
            continue  # given twice: check_config_keys reports it
        f = _RATE if rate else CONFIG_FIELDS[name]
        value, error = _config_value(f, entry, raw.from_sheet)
        if error is None and isinstance(value, float):
            error = f.range_problem(value)
        if error is not None:
            problems.append(InputProblem(raw.label, entry.row, entry.key, error))
        elif rate:
            assert isinstance(value, float)
            rates[name] = value
        else:
            values[name] = value
    return values, rates, problems


def _row(raw: RawConfig, key: str) -> int | None:
    return next((e.row for e in raw.entries if e.key == key), None)


def check_quarter(raw: RawConfig, values: Mapping[str, object]) -> list[InputProblem]:
    """``quarter_start < quarter_end``, at most ``LIMITS["quarter_days"]`` apart."""
    start, end = values.get("quarter_start"), values.get("quarter_end")
    if not (isinstance(start, dt.datetime) and isinstance(end, dt.datetime)):
        return []
    if not start < end:
        return [InputProblem(raw.label, _row(raw, "quarter_end"), "quarter_end",
                             f"quarter_end {iso(end)} is not after quarter_start "
                             f"{iso(start)}; make quarter_end later")]
    days = (end - start) / dt.timedelta(days=1)
    if days > LIMITS["quarter_days"]:
        return [InputProblem(raw.label, _row(raw, "quarter_end"), "quarter_end",
                             f"the quarter is {days:,.6g} days long, at most "
                             f"{LIMITS['quarter_days']:g} are planned at once; make "
                             "quarter_end earlier")]
    return []


def as_of_problem(as_of: dt.datetime, start: dt.datetime, end: dt.datetime) -> str | None:
    """What is wrong with ``as_of``, or ``None`` when it is fine.

    It must lie inside ``[quarter_start, quarter_end)`` and at least the shortest period
    (an hour) before ``quarter_end``.
    """
    if not start <= as_of < end:
        return (f"as_of {iso(as_of)} is outside the quarter [{iso(start)}, {iso(end)}); "
                "pick a date inside it")
    if end - as_of < dt.timedelta(hours=LIMITS["period_hours_min"]):
        return (f"as_of {iso(as_of)} leaves less than {LIMITS['period_hours_min']:g} h of the "
                f"quarter (it ends {iso(end)}), shorter than any period; pick an earlier date "
                "or plan the next quarter")
    return None


def check_as_of(raw: RawConfig, values: Mapping[str, object]) -> list[InputProblem]:
    """``as_of`` lies in ``[quarter_start, quarter_end − 1 h]``."""
    start, end, as_of = (values.get(k) for k in ("quarter_start", "quarter_end", "as_of"))
    if not (isinstance(start, dt.datetime) and isinstance(end, dt.datetime)
            and isinstance(as_of, dt.datetime)) or not start < end:
        return []
    problem = as_of_problem(as_of, start, end)
    return [InputProblem(raw.label, _row(raw, "as_of"), "as_of", problem)] if problem else []


def check_period_fits(raw: RawConfig, values: Mapping[str, object]) -> list[InputProblem]:
    """``period_hours`` is at most the quarter's length."""
    start, end = values.get("quarter_start"), values.get("quarter_end")
    hours = values.get("period_hours")
    if not (isinstance(start, dt.datetime) and isinstance(end, dt.datetime)
            and isinstance(hours, float) and start < end):
        return []
    quarter = (end - start) / dt.timedelta(hours=1)
    if hours > quarter:
        return [InputProblem(raw.label, _row(raw, "period_hours"), "period_hours",
                             f"{hours:g} h is longer than the quarter ({quarter:g} h); use a "
                             "shorter period such as 24")]
    if abs(hours * 60 - round(hours * 60)) > 1e-9:
        return [InputProblem(raw.label, _row(raw, "period_hours"), "period_hours",
                             f"{hours:g} h is not a whole number of minutes; use a period "
                             "such as 24, 6 or 1.5")]
    return []


def to_timestamp(stamp: dt.datetime) -> pd.Timestamp:
    """An aware UTC datetime as a tz-aware UTC ``pd.Timestamp`` (microseconds)."""
    return pd.Timestamp(stamp).tz_convert("UTC").as_unit("us")


def check_config(raw: RawConfig) -> tuple[ScenarioConfig | None, list[InputProblem]]:
    """Check every config rule; the config when it is valid."""
    problems = check_config_keys(raw)
    values, rates, found = config_values(raw)
    problems += found
    problems += check_quarter(raw, values)
    problems += check_as_of(raw, values)
    problems += check_period_fits(raw, values)
    if problems:
        return None, problems
    def stamp(key: str) -> pd.Timestamp:
        value = values[key]
        assert isinstance(value, dt.datetime)
        return to_timestamp(value)

    def number(key: str) -> float:
        value = values.get(key, CONFIG_FIELDS[key].default)
        assert isinstance(value, float)
        return value

    config = ScenarioConfig(
        name=str(values["name"]),
        quarter_start=stamp("quarter_start"),
        quarter_end=stamp("quarter_end"),
        as_of=stamp("as_of"),
        period_hours=number("period_hours"),
        lookback_days=number("lookback_days"),
        gpu_rates=dict(sorted(rates.items())),
    )
    return config, []
