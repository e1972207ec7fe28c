"""The input schema, written down once: every file, column and ``scenario.toml`` key.

Loading (:mod:`planner.inputs.load`), validation (:mod:`planner.inputs.validate`) and
the docs (:func:`schema_markdown`) all read the tables below; nothing else names a
column. A column or key is a :class:`Field`: its type, unit, whether it is required
(and its default when not), its bound and, for ids, what it must refer to. A file is
a :class:`TableSchema`: its fields in order plus the table-wide rules (unique key,
time intervals).

Types (``Field.kind``) and how a cell is read:

- ``id``: a non-empty name, kept verbatim (``007``, ``+1``, ``NA``, ``=SUM(A1)`` are
  ids like any other) but without control characters (:func:`bad_characters`): ids are
  printed into shell scripts, YAML, terminals and spreadsheets, where a newline, an
  escape or a NUL is at best a broken line and at worst a command.
- ``str``: free text, kept verbatim, without control characters either; may be empty only
  where the default is ``""``.
- ``int`` / ``float``: a decimal number (``4``, ``4.0``, ``1e3``; no ``nan``/``inf``),
  inside its field's range: every number has an upper bound (:data:`LIMITS`), so that a
  typo such as ``1e300`` is an input error, not a traceback or a run of minutes.
- ``datetime``: ISO 8601, ``2026-11-02`` or ``2026-11-02T06:00:00``, optional ``Z`` or
  ``+02:00``; naive times are UTC, offsets are converted to UTC.
- ``list``: ids separated by ``;`` (empty = the default).
- ``labels``: Kubernetes labels, ``key=value;key=value`` (empty = the default); keys and
  values in Kubernetes' label syntax (:mod:`planner.inputs.labels`).
- ``map`` (``scenario.toml`` only): a table of name = number.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Literal

Kind = Literal["id", "str", "int", "float", "datetime", "list", "labels", "map"]

#: The pandas dtype each kind has in a loaded :class:`~planner.inputs.Scenario` table.
DTYPES: Mapping[str, str] = MappingProxyType({
    "id": "str",
    "str": "str",
    "int": "int64",
    "float": "float64",
    "datetime": "datetime64[us, UTC]",
    "list": "object",  # tuple[str, ...]
    "labels": "object",  # tuple[tuple[str, str], ...], sorted by key
})

LIST_SEPARATOR = ";"

#: The bounds of the inputs, each a sane limit well above any real institute: the
#: generated 28× sample (1,659 projects, 224 clusters) stays far inside every one.
LIMITS: Mapping[str, float] = MappingProxyType({
    "nodes": 100_000,  # nodes in a cluster, or in one reservation
    "gpus_per_node": 256,
    "weight_min": 1e-6,  # org weights, relative among siblings
    "weight_max": 1e6,
    "budget_ngh": 1e9,  # a project's quarter budget (≈ 114,000 GPU-years)
    # GPUs of one demand row or one job: above any cluster these limits admit (100,000
    # nodes × 256 GPUs), so only a number no cluster could hold is refused. A demand row
    # may ask for more than its cluster has: a backlog larger than a cluster is the
    # normal, contended case, and the plan caps it by capacity.
    "gpus": 1e9,
    "reservation_hours": 366 * 24,  # a year
    # the shortest reservation: below it a length is a typo (1e-300 h), not a gang job
    "reservation_hours_min": 0.01,
    # characters of an id or a name: above any executor's (a Kubernetes name is at most
    # 253, a Slurm name far less) and far below a spreadsheet cell's 32,767
    "id_length": 1024,
    "period_hours_min": 1,
    "period_hours_max": 168,  # a week
    "lookback_days": 366,
    "quarter_days": 366,  # quarter_end − quarter_start
    "rate_min": 0.001,  # NGH per GPU-hour
    "rate_max": 100,
    "org_depth": 64,  # levels below the top (a real org is < 10 deep)
})


def bad_characters(text: str) -> str:
    """The characters an id or text must not hold, each shown escaped, or ``""``.

    Refused: control characters (Unicode category Cc: NUL … US, DEL, C1, tab and line
    breaks included), the line and paragraph separators U+2028 / U+2029, lone surrogates
    and the XML non-characters U+FFFE / U+FFFF (a workbook cannot hold them).
    """
    return " ".join(ascii(ch)[1:-1] for ch in dict.fromkeys(_BAD_CHARACTERS.findall(text)))


def printable(text: str) -> str:
    r"""``text`` with each character :func:`bad_characters` refuses escaped (ESC: ``\x1b``).

    For text from outside that is printed or written whatever it holds: a hand-edited
    plan's ids in a workbook (openpyxl raises on them), an accounting file's fields in a
    report on the terminal (an escape sequence there would be obeyed).
    """
    if not has_bad_characters(text):
        return text
    return _BAD_CHARACTERS.sub(lambda found: ascii(found.group())[1:-1], text)


def has_bad_characters(text: str) -> bool:
    """Whether ``text`` holds a character :func:`bad_characters` refuses.

    One regex search: a whole column joined into one text is checked at once.
    """
    return _BAD_CHARACTERS.search(text) is not None


# exactly the categories above: Cc is U+0000-001F and U+007F-009F, Cs the surrogates,
# Zl U+2028, Zp U+2029 (tests/test_inputs.py checks it against unicodedata)
_BAD_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\ufffe\uffff]")


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
    minimum: float | None = None  # inclusive, besides ``bound``
    maximum: float | None = None  # inclusive

    @property
    def empty_allowed(self) -> bool:
        """Whether an empty cell is valid (it then takes the default)."""
        return self.default is not None

    @property
    def rule(self) -> str:
        """The range as the docs and messages show it: ``> 0, ≤ 168``, ``≥ 1, ≤ 168``."""
        parts = [f"≥ {self.minimum:g}"] if self.minimum is not None else (
            [self.bound.value] if self.bound is not Bound.ANY else [])
        if self.maximum is not None:
            parts.append(f"≤ {self.maximum:,g}")
        return ", ".join(parts)

    def range_problem(self, value: float) -> str | None:
        """What is wrong with a number of this field, or ``None`` when it is in range."""
        if (self.bound.admits(value) and (self.minimum is None or value >= self.minimum)
                and (self.maximum is None or value <= self.maximum)):
            return None
        return f"must be {self.rule}, got {value:g}; correct the number"


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
    within_capacity: bool = False  # the row's gpus are at most its cluster's (what ran)
    order: tuple[str, ...] = ()  # the loaded table is sorted by these columns: row order
    # in the file never matters (shuffled rows plan to the same bytes)

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
        Field("cluster", "id", "", True,
              "Cluster id, unique; without `;` (it separates the clusters of budgets.csv)."),
        Field("gpu_type", "str", "", True,
              "GPU type (`H100`, `A100`, …); its NGH rate comes from `gpu_rates`."),
        Field("nodes", "int", "nodes", True, "Nodes in the cluster.", bound=Bound.POSITIVE,
              maximum=LIMITS["nodes"]),
        Field("gpus_per_node", "int", "GPUs", True, "GPUs a node.", bound=Bound.POSITIVE,
              maximum=LIMITS["gpus_per_node"]),
        Field("node_labels", "labels", "", False,
              "Kubernetes labels the cluster's nodes carry, `key=value;key=value` "
              "(`nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3`): the Kueue flavor's node "
              "selector. Empty: `gpu-planner.io/cluster=<cluster>`, plus "
              "`nvidia.com/gpu.product=<gpu_type>` where the type is written as GPU feature "
              "discovery labels nodes (`NVIDIA-…`). No two clusters' selectors may be equal "
              "or one inside the other.", default=()),
    ),
    unique="cluster", min_rows=1, order=("cluster",),
)

ORG = TableSchema(
    "org", True, "The org tree: institute → areas → teams → projects, any depth up to "
    f"{LIMITS['org_depth']:g} levels below the top; the leaves are the projects.",
    (
        Field("id", "id", "", True, "Node id, unique across the tree."),
        Field("parent", "id", "", True,
              "Parent node id; empty for a top-level node. The tree has no cycles.",
              default="", ref=Ref.ORG_NODE),
        Field("weight", "float", "", False,
              "Strategic share among its siblings (who goes first when GPUs are contended).",
              default=1.0, bound=Bound.POSITIVE, minimum=LIMITS["weight_min"],
              maximum=LIMITS["weight_max"]),
    ),
    unique="id", min_rows=1, order=("id",),
)

BUDGETS = TableSchema(
    "budgets", True, "Quarter budgets. A project without a row has budget 0.",
    (
        Field("project", "id", "", True, "Project id.", ref=Ref.PROJECT),
        Field("gpu_hours", "float", "NGH", True,
              "Quarter budget in normalized GPU-hours (GPU-hours × the GPU type's rate).",
              bound=Bound.NON_NEGATIVE, maximum=LIMITS["budget_ngh"]),
        Field("clusters", "list", "", False,
              "Clusters the project may use, `;`-separated; empty = all.",
              default=(), ref=Ref.CLUSTER),
    ),
    unique="project", order=("project",),
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
        Field("gpus", "float", "GPUs", True,
              "GPUs wanted at most. May exceed the cluster's GPUs (a backlog larger than "
              "the cluster is the normal, contended case): the plan caps it by capacity.",
              bound=Bound.POSITIVE, maximum=LIMITS["gpus"]),
    ),
    intervals=(Interval("start", "end"),), allowed_cluster=True,
    order=("project", "cluster", "start", "end", "gpus"),
)

RESERVATIONS = TableSchema(
    "reservations", False, "Gang jobs: whole nodes for `hours` contiguous hours, starting at "
    "or after `earliest_start`, ending by `deadline`; hours round up to whole periods.",
    (
        Field("request_id", "id", "", True, "Request id, unique."),
        Field("project", "id", "", True, "Project id.", ref=Ref.PROJECT),
        Field("cluster", "id", "", True,
              "Cluster id; one the project may use.", ref=Ref.CLUSTER),
        Field("nodes", "int", "nodes", True, "Whole nodes needed.", bound=Bound.POSITIVE,
              maximum=LIMITS["nodes"]),
        Field("hours", "float", "h", True, "Contiguous run time.", bound=Bound.POSITIVE,
              minimum=LIMITS["reservation_hours_min"], maximum=LIMITS["reservation_hours"]),
        Field("earliest_start", "datetime", "UTC", True, "Earliest start."),
        Field("deadline", "datetime", "UTC", True,
              "Latest end; after `earliest_start`."),
    ),
    unique="request_id",
    intervals=(Interval("earliest_start", "deadline"),), allowed_cluster=True,
    order=("request_id",),
)

USAGE = TableSchema(
    "usage", False, "What ran, per job, from the executor's accounting. A `job_id` counts "
    "once: identical repeated rows collapse to one.",
    (
        Field("job_id", "id", "", True, "Job id from the executor."),
        Field("project", "id", "", True, "Project id.", ref=Ref.PROJECT),
        Field("cluster", "id", "", True, "Cluster id.", ref=Ref.CLUSTER),
        Field("gpus", "float", "GPUs", True,
              "GPUs the job held; at most its cluster's (nodes × gpus_per_node).",
              bound=Bound.POSITIVE, maximum=LIMITS["gpus"]),
        Field("start", "datetime", "UTC", True, "Start of the job."),
        Field("end", "datetime", "UTC", True, "End of the job; after `start`."),
        Field("state", "str", "", False,
              "`running` when the job was still running at `planner ingest` time (its `end` "
              "is then the ingest time, and a later ingest updates the row); empty for a "
              "finished job.", default=""),
    ),
    intervals=(Interval("start", "end"),), order=("job_id",), within_capacity=True,
)

#: Every input table, in loading order.
TABLES: Mapping[str, TableSchema] = MappingProxyType(
    {t.name: t for t in (CLUSTERS, ORG, BUDGETS, DEMAND, RESERVATIONS, USAGE)})

CONFIG_FILE = "scenario.toml"
#: rows a project lead writes, the columns of demand.csv: kept by ``planner ingest
#: squeue|kueue --demand`` for the periods the queue asks nothing for (planner.demand);
#: not a table of the plan, but a file a scenario folder may hold
DECLARED_DEMAND_FILE = "declared_demand.csv"
#: what ran charged to no budget, in the columns of usage.csv: Slurm's gp-opportunistic and
#: gp-overdrawn jobs, written by ``planner ingest sacct`` beside usage.csv (which charges
#: budgets) and read for the executor contract's rule 8 (what a project ran); not a table
#: of the plan, but a file a scenario folder may hold
UNBUDGETED_FILE = "unbudgeted.csv"
CONFIG_SHEET = "scenario"  # in a workbook: rows of key, value

#: ``scenario.toml`` keys (in a workbook's ``scenario`` sheet, ``gpu_rates.H100`` etc.).
CONFIG: tuple[Field, ...] = (
    Field("name", "str", "", True, "Scenario name, copied into the plan.", example='"sample"'),
    Field("quarter_start", "datetime", "UTC", True, "First instant of the quarter, inclusive.",
          example="2026-10-01"),
    Field("quarter_end", "datetime", "UTC", True,
          "End of the quarter, exclusive; after `quarter_start`, at most "
          f"{LIMITS['quarter_days']:g} days after it.", example="2027-01-01"),
    Field("as_of", "datetime", "UTC", True,
          "Plan from here (in [quarter_start, quarter_end), at least an hour before its "
          "end); `--as-of` overrides.",
          example="2026-11-02"),
    Field("period_hours", "float", "h", False,
          "Length of a planning period, a whole number of minutes; at most the quarter.",
          default=24.0, bound=Bound.POSITIVE, minimum=LIMITS["period_hours_min"],
          maximum=LIMITS["period_hours_max"]),
    Field("lookback_days", "float", "days", False,
          "Sliding window of the fair share's usage history.", default=28.0,
          bound=Bound.NON_NEGATIVE, maximum=LIMITS["lookback_days"]),
    Field("gpu_rates", "map", "NGH per GPU-hour", False,
          "Rate per GPU type (`H100 = 1.0`); types not listed: 1.0.", default=MappingProxyType({}),
          bound=Bound.POSITIVE, minimum=LIMITS["rate_min"], maximum=LIMITS["rate_max"]),
)

CONFIG_FIELDS: Mapping[str, Field] = MappingProxyType({f.name: f for f in CONFIG})

SCENARIO_SHEET_COLUMNS = ("key", "value")

#: Sheets of the quarterly report (``planner report``) that a workbook scenario may also
#: hold; reading skips them. None equals an input sheet ignoring case (Excel refuses two
#: sheets that differ only in case: hence "Budget tree", not "Budgets", and "Cluster use",
#: not "Clusters").
REPORT_SHEETS = ("Summary", "Budget tree", "Pacing", "Cluster use", "Reservation plan",
                 "Next quarter", "About", "Why")

#: The report's *Next quarter* sheet is the one place a person edits next quarter's
#: budgets and project weights: its table (found by this header, in columns A to C) is
#: what the ``budgets`` sheet's ``gpu_hours`` and the ``org`` sheet's ``weight`` cells
#: refer to (formulas ``='Next quarter'!B12``), and a workbook whose input cells disagree
#: with it is refused, naming both cells.
NEXT_QUARTER_SHEET = "Next quarter"
NEXT_QUARTER_COLUMNS = ("project", "budget NGH next quarter", "weight next quarter")
#: The input cells *Next quarter* feeds: table → (its key column, the column, the *Next
#: quarter* column it is read from, what it is). Matched by the key (the project id) on
#: both sheets, never by position: a row inserted in either sheet moves nothing.
NEXT_QUARTER_LINKS: Mapping[str, tuple[str, str, str, str]] = MappingProxyType({
    "budgets": ("project", "gpu_hours", "B", "budget"),
    "org": ("id", "weight", "C", "weight")})


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
        rule = f.rule
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
           f"({', '.join(REPORT_SHEETS)}) are skipped, so that report is a scenario too, "
           "with one exception: a cell of an input sheet that is a formula referring to one "
           "cell reads that cell's value; the report writes `budgets` `gpu_hours` and project "
           f"`weight` in `org` as `='{NEXT_QUARTER_SHEET}'!B12`, and those read the row of "
           f"their own project on *{NEXT_QUARTER_SHEET}* (matched by id, never by position: "
           "a row inserted or sorted moves no budget), so next quarter's budgets and weights "
           f"are edited on *{NEXT_QUARTER_SHEET}*; a row there with a budget but no project, "
           f"or a workbook whose `budgets` or `org` cells differ from its "
           f"*{NEXT_QUARTER_SHEET}* table, is refused, naming the cells. Ids and names are at "
           f"most {LIMITS['id_length']:,g} characters, without control characters.",
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
        if table.order:
            rules.append("Row order does not matter: the table is read sorted by "
                         + ", ".join(f"`{c}`" for c in table.order) + ".")
        if rules:
            out += ["", " ".join(rules)]
    return "\n".join(out) + "\n"
