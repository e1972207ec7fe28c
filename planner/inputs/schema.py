"""The input schema, written down once: every file, column and ``scenario.toml`` key.

Loading (:mod:`planner.inputs.load`), validation (:mod:`planner.inputs.validate`) and
the docs (:func:`schema_markdown`) all read the tables below; nothing else names a
column. A column or key is a :class:`Field`: its type, unit, whether it is required
(and its default when not), its bound and, for ids, what it must refer to. A file is
a :class:`TableSchema`: its fields in order plus the table-wide rules (unique key,
time intervals).

Types (``Field.kind``) and how a cell is read:

- ``id``: a non-empty name, kept verbatim (``007``, ``+1``, ``NA``, ``=SUM(A1)`` are
  ids like any other).
- ``str``: free text, kept verbatim; may be empty only where the default is ``""``.
- ``int`` / ``float``: a decimal number (``4``, ``4.0``, ``1e3``; no ``nan``/``inf``).
- ``datetime``: ISO 8601, ``2026-11-02`` or ``2026-11-02T06:00:00``, optional ``Z`` or
  ``+02:00``; naive times are UTC, offsets are converted to UTC.
- ``list``: ids separated by ``;`` (empty = the default).
- ``map`` (``scenario.toml`` only): a table of name = number.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Literal

Kind = Literal["id", "str", "int", "float", "datetime", "list", "map"]

#: The pandas dtype each kind has in a loaded :class:`~planner.inputs.Scenario` table.
DTYPES: Mapping[str, str] = MappingProxyType({
    "id": "str",
    "str": "str",
    "int": "int64",
    "float": "float64",
    "datetime": "datetime64[us, UTC]",
    "list": "object",  # tuple[str, ...]
})

LIST_SEPARATOR = ";"


class Bound(Enum):
    """The range a number must lie in."""

    ANY = ""
    POSITIVE = "> 0"
    NON_NEGATIVE = "≥ 0"

    def admits(self, value: float) -> bool:
        """Whether ``value`` lies in the range."""
        if self is Bound.POSITIVE:
            return value > 0
        if self is Bound.NON_NEGATIVE:
            return value >= 0
        return True


class Ref(Enum):
    """What an id column must name."""

    NONE = ""
    CLUSTER = "a cluster of clusters.csv"
    ORG_NODE = "an id of org.csv"
    PROJECT = "a project (a leaf of org.csv)"


@dataclass(frozen=True)
class Field:
    """One column of a file, or one key of ``scenario.toml``.

    ``required``: the column (key) must be present. A field that is not required takes
    ``default`` when the column is absent or the cell is empty; a required field whose
    ``default`` is not ``None`` also takes it for an empty cell (``org.parent``).
    """

    name: str
    kind: Kind
    unit: str
    required: bool
    meaning: str
    default: object = None
    bound: Bound = Bound.ANY
    ref: Ref = Ref.NONE
    example: str = ""  # a valid value, as written in the file

    @property
    def empty_allowed(self) -> bool:
        """Whether an empty cell is valid (it then takes the default)."""
        return self.default is not None


@dataclass(frozen=True)
class Interval:
    """Two datetime columns where ``first`` must come strictly before ``second``."""

    first: str
    second: str


@dataclass(frozen=True)
class TableSchema:
    """One input table: ``<name>.csv`` in a folder, sheet ``<name>`` in a workbook."""

    name: str
    required: bool  # the file must exist (optional files absent = empty table)
    meaning: str
    fields: tuple[Field, ...]
    unique: str | None = None  # a column whose values must be unique
    intervals: tuple[Interval, ...] = ()
    min_rows: int = 0  # rows a valid file needs
    allowed_cluster: bool = False  # the row's cluster must be one its project may use

    @property
    def filename(self) -> str:
        """The file name in a scenario folder."""
        return f"{self.name}.csv"

    @property
    def columns(self) -> tuple[str, ...]:
        """Column names, in the order of the loaded table."""
        return tuple(f.name for f in self.fields)

    @property
    def required_columns(self) -> tuple[str, ...]:
        """Columns the file must have."""
        return tuple(f.name for f in self.fields if f.required)

    def field(self, name: str) -> Field:
        """The field called ``name``."""
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)


CLUSTERS = TableSchema(
    "clusters", True, "Pools of identical nodes: one GPU type, N nodes, G GPUs a node.",
    (
        Field("cluster", "id", "", True, "Cluster id, unique."),
        Field("gpu_type", "str", "", True,
              "GPU type (`H100`, `A100`, …); its NGH rate comes from `gpu_rates`."),
        Field("nodes", "int", "nodes", True, "Nodes in the cluster.", bound=Bound.POSITIVE),
        Field("gpus_per_node", "int", "GPUs", True, "GPUs a node.", bound=Bound.POSITIVE),
    ),
    unique="cluster", min_rows=1,
)

ORG = TableSchema(
    "org", True, "The org tree: institute → areas → teams → projects, any depth; the "
    "leaves are the projects.",
    (
        Field("id", "id", "", True, "Node id, unique across the tree."),
        Field("parent", "id", "", True,
              "Parent node id; empty for a top-level node. The tree has no cycles.",
              default="", ref=Ref.ORG_NODE),
        Field("weight", "float", "", False,
              "Strategic share among its siblings (who goes first when GPUs are contended).",
              default=1.0, bound=Bound.POSITIVE),
    ),
    unique="id", min_rows=1,
)

BUDGETS = TableSchema(
    "budgets", True, "Quarter budgets. A project without a row has budget 0.",
    (
        Field("project", "id", "", True, "Project id.", ref=Ref.PROJECT),
        Field("gpu_hours", "float", "NGH", True,
              "Quarter budget in normalized GPU-hours (GPU-hours × the GPU type's rate).",
              bound=Bound.NON_NEGATIVE),
        Field("clusters", "list", "", False,
              "Clusters the project may use, `;`-separated; empty = all.",
              default=(), ref=Ref.CLUSTER),
    ),
    unique="project",
)

DEMAND = TableSchema(
    "demand", False, "Elastic demand: up to `gpus` GPUs wanted on `cluster` from `start` to "
    "`end`, preemptible.",
    (
        Field("project", "id", "", True, "Project id.", ref=Ref.PROJECT),
        Field("cluster", "id", "", True,
              "Cluster id; one the project may use.", ref=Ref.CLUSTER),
        Field("start", "datetime", "UTC", True, "Start of the demand, inclusive."),
        Field("end", "datetime", "UTC", True, "End of the demand, exclusive; after `start`."),
        Field("gpus", "float", "GPUs", True, "GPUs wanted at most.", bound=Bound.POSITIVE),
    ),
    intervals=(Interval("start", "end"),), allowed_cluster=True,
)

RESERVATIONS = TableSchema(
    "reservations", False, "Gang jobs: whole nodes for `hours` contiguous hours, starting at "
    "or after `earliest_start`, ending by `deadline`; hours round up to whole periods.",
    (
        Field("request_id", "id", "", True, "Request id, unique."),
        Field("project", "id", "", True, "Project id.", ref=Ref.PROJECT),
        Field("cluster", "id", "", True,
              "Cluster id; one the project may use.", ref=Ref.CLUSTER),
        Field("nodes", "int", "nodes", True, "Whole nodes needed.", bound=Bound.POSITIVE),
        Field("hours", "float", "h", True, "Contiguous run time.", bound=Bound.POSITIVE),
        Field("earliest_start", "datetime", "UTC", True, "Earliest start."),
        Field("deadline", "datetime", "UTC", True,
              "Latest end; after `earliest_start`."),
    ),
    unique="request_id",
    intervals=(Interval("earliest_start", "deadline"),), allowed_cluster=True,
)

USAGE = TableSchema(
    "usage", False, "What ran, per job, from the executor's accounting. A `job_id` counts "
    "once: identical repeated rows collapse to one.",
    (
        Field("job_id", "id", "", True, "Job id from the executor."),
        Field("project", "id", "", True, "Project id.", ref=Ref.PROJECT),
        Field("cluster", "id", "", True, "Cluster id.", ref=Ref.CLUSTER),
        Field("gpus", "float", "GPUs", True, "GPUs the job held.", bound=Bound.POSITIVE),
        Field("start", "datetime", "UTC", True, "Start of the job."),
        Field("end", "datetime", "UTC", True, "End of the job; after `start`."),
        Field("state", "str", "", False,
              "`running` when the job was still running at `planner ingest` time (its `end` "
              "is then the ingest time, and a later ingest updates the row); empty for a "
              "finished job.", default=""),
    ),
    intervals=(Interval("start", "end"),),
)

#: Every input table, in loading order.
TABLES: Mapping[str, TableSchema] = MappingProxyType(
    {t.name: t for t in (CLUSTERS, ORG, BUDGETS, DEMAND, RESERVATIONS, USAGE)})

CONFIG_FILE = "scenario.toml"
CONFIG_SHEET = "scenario"  # in a workbook: rows of key, value

#: ``scenario.toml`` keys (in a workbook's ``scenario`` sheet, ``gpu_rates.H100`` etc.).
CONFIG: tuple[Field, ...] = (
    Field("name", "str", "", True, "Scenario name, copied into the plan.", example='"sample"'),
    Field("quarter_start", "datetime", "UTC", True, "First instant of the quarter, inclusive.",
          example="2026-10-01"),
    Field("quarter_end", "datetime", "UTC", True,
          "End of the quarter, exclusive; after `quarter_start`.", example="2027-01-01"),
    Field("as_of", "datetime", "UTC", True,
          "Plan from here (in [quarter_start, quarter_end)); `--as-of` overrides.",
          example="2026-11-02"),
    Field("period_hours", "float", "h", False,
          "Length of a planning period; at most the quarter.", default=24.0,
          bound=Bound.POSITIVE),
    Field("lookback_days", "float", "days", False,
          "Sliding window of the fair share's usage history.", default=28.0,
          bound=Bound.NON_NEGATIVE),
    Field("gpu_rates", "map", "NGH per GPU-hour", False,
          "Rate per GPU type (`H100 = 1.0`); types not listed: 1.0.", default=MappingProxyType({}),
          bound=Bound.POSITIVE),
)

CONFIG_FIELDS: Mapping[str, Field] = MappingProxyType({f.name: f for f in CONFIG})

SCENARIO_SHEET_COLUMNS = ("key", "value")

#: Sheets of the quarterly report (``planner report``) that a workbook scenario may also
#: hold; reading skips them. None equals an input sheet ignoring case (Excel refuses two
#: sheets that differ only in case: hence "Budget tree", not "Budgets", and "Cluster use",
#: not "Clusters").
REPORT_SHEETS = ("Summary", "Budget tree", "Pacing", "Cluster use", "Reservation plan",
                 "Next quarter", "About")


def _default_text(f: Field) -> str:
    if f.required:
        return "required, may be empty" if f.empty_allowed else "required"
    if f.default == "" or f.default == ():
        return "empty"
    if f.kind == "map":
        return "{}"
    return f"{f.default!r}" if isinstance(f.default, str) else f"{f.default:g}"


def _table_markdown(fields: tuple[Field, ...], what: str) -> list[str]:
    lines = [f"| {what} | type | unit | required / default | rule | meaning |",
             "|---|---|---|---|---|---|"]
    for f in fields:
        rule = f.bound.value
        if f.ref is not Ref.NONE:
            rule = f"names {f.ref.value}"
        lines.append(f"| `{f.name}` | {f.kind} | {f.unit} | {_default_text(f)} | {rule} "
                     f"| {f.meaning} |")
    return lines


def schema_markdown() -> str:
    """The schema as Markdown: one table per file and one for ``scenario.toml``."""
    out = ["# Scenario inputs", "",
           "A scenario is a folder of `scenario.toml` and CSV files, or one `.xlsx` "
           "workbook with a sheet per CSV name (same columns) and a `scenario` sheet of "
           "`key`, `value` rows (rates as `gpu_rates.H100`). Dates are ISO 8601, UTC. "
           "The sheets of a `planner report` workbook "
           f"({', '.join(REPORT_SHEETS)}) are skipped, so that report is a scenario too.",
           "", f"## `{CONFIG_FILE}`", ""]
    out += _table_markdown(CONFIG, "key")
    for table in TABLES.values():
        out += ["", f"## `{table.filename}`" + ("" if table.required else " (optional)"), "",
                table.meaning, ""]
        out += _table_markdown(table.fields, "column")
        rules = []
        if table.unique:
            rules.append(f"`{table.unique}` is unique.")
        rules += [f"`{i.first}` < `{i.second}`." for i in table.intervals]
        if rules:
            out += ["", " ".join(rules)]
    return "\n".join(out) + "\n"
