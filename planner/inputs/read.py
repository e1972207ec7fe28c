"""Reading a scenario's files into raw text tables, before any type is checked.

A folder gives ``scenario.toml`` and ``<table>.csv`` files; a workbook gives a sheet per
table plus a ``scenario`` sheet of ``key, value`` rows. Either way the result is a
:class:`RawScenario`: per table its header and its rows of *text* cells, each row
numbered as a spreadsheet shows it (header = row 1), and the config as key/value
entries with the line or row they came from. Problems found while reading (missing,
unreadable or non-UTF-8 files, TOML syntax) are collected, never raised.

CSV is split with the standard :mod:`csv` module: every cell stays the exact text of
the file (``007``, ``+1``, ``NA`` and ``=SUM(A1)`` included; nothing is read as a
number or a missing value), rows are counted as records (a quoted newline does not
shift the numbering) and a row with too many values is reported, not fatal. Workbooks
are read with ``openpyxl`` and ``data_only=False``, so a formula cell gives its text,
except a formula that is a plain reference to one cell (``='Next quarter'!B12``), which
gives that cell's value, as a spreadsheet shows it. The report's *Next quarter* sheet is
where next quarter's budgets and project weights are edited: the ``budgets`` and ``org``
sheets it writes refer to it, matched by project id (:func:`linked_by_id`: a row inserted
on either sheet shifts nothing; a row with a budget but no project is refused), and a
workbook whose input cells disagree with its table is refused, naming both cells
(:func:`next_quarter_problems`). A text cell is never read as a formula, so an id such
as ``=SUM(A1)`` stays verbatim.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import os
import re
import stat
import tomllib
from dataclasses import dataclass, field
from itertools import compress
from pathlib import Path
from typing import Any

from planner.errors import InputProblem
from planner.inputs.bounded import load_toml
from planner.inputs.schema import (
    CONFIG_FIELDS,
    CONFIG_FILE,
    CONFIG_SHEET,
    DECLARED_DEMAND_FILE,
    NEXT_QUARTER_COLUMNS,
    NEXT_QUARTER_LINKS,
    NEXT_QUARTER_SHEET,
    REPORT_SHEETS,
    SCENARIO_SHEET_COLUMNS,
    TABLES,
    UNBUDGETED_FILE,
    TableSchema,
)

BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class RawTable:
    """One table as text: its header and its non-blank rows with their row numbers."""

    label: str  # "budgets.csv" or "book.xlsx[budgets]"
    header: tuple[str, ...]  # column names, stripped of surrounding whitespace
    rows: tuple[tuple[int, tuple[str, ...]], ...]  # (row number, cells); blank rows dropped


@dataclass(frozen=True)
class ConfigEntry:
    """One ``scenario.toml`` key (``gpu_rates.H100`` for a rate) and where it is."""

    key: str
    value: object
    row: int | None  # TOML line or sheet row, when known


@dataclass(frozen=True)
class RawConfig:
    """The scenario keys as read, not yet checked."""

    label: str  # "scenario.toml" or "book.xlsx[scenario]"
    entries: tuple[ConfigEntry, ...]
    from_sheet: bool  # a sheet cell may hold a number or date as text


@dataclass
class RawScenario:
    """Everything read from a folder or workbook, and what went wrong reading it.

    ``tables[name]`` is ``None`` when the table could not be read (a problem says why);
    an absent optional file reads as an empty table with the schema's header.
    """

    tables: dict[str, RawTable | None] = field(default_factory=dict)
    config: RawConfig | None = None
    files: dict[str, bytes] = field(default_factory=dict)  # name → bytes, for the digest
    problems: list[InputProblem] = field(default_factory=list)


def read_scenario(path: Path) -> RawScenario:
    """Read a scenario folder or ``.xlsx`` workbook."""
    what = probe_file(path)
    if path.is_dir():
        return read_folder(path)
    if path.suffix.lower() == ".xlsx" and what is None:
        return read_workbook(path)
    raw = RawScenario()
    if what == MISSING:
        message = ("no such scenario folder or workbook; pass a folder holding scenario.toml "
                   "and the CSV files, or an .xlsx workbook")
    elif what is not None and path.suffix.lower() == ".xlsx":
        message = f"is {what}, not a workbook; pass an .xlsx file or a scenario folder"
    else:
        message = ("not a scenario: pass a folder holding scenario.toml and the CSV files, "
                   "or an .xlsx workbook")
    raw.problems.append(InputProblem(str(path), None, None, message))
    return raw


def _expected_header(table: TableSchema) -> str:
    return ",".join(table.columns)


def _empty(table: TableSchema, label: str) -> RawTable:
    return RawTable(label, table.columns, ())


# --------------------------------------------------------------------------- files

MISSING = "missing"  # what :func:`probe_file` says when nothing at all is at the path

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
          (stat.S_ISCHR, "a character device (like /dev/null)"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def probe_file(path: Path) -> str | None:
    """What is at ``path`` when it is not a regular file (or a link to one).

    ``None`` for a regular file, :data:`MISSING` when nothing is there, else what it is
    instead: a folder, a FIFO, a device, a dangling link, …
    Only ``stat`` is called: a FIFO is never opened (opening one blocks until a writer
    comes), ``/dev/null`` never read as an empty file.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if os.path.lexists(path):
            return f"a symbolic link to {os.readlink(path)!r}, which does not exist"
        return MISSING
    except OSError as err:
        return f"not readable ({err.strerror})"
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def _not_regular(path: Path, label: str, what: str) -> InputProblem:
    return InputProblem(label, None, None,
                        f"is {what} ({path}), not a regular file; pass a file "
                        "(or remove it where the file is optional)")


def read_input(path: Path, label: str) -> tuple[bytes | None, InputProblem | None]:
    """The bytes of an input file, or the problem: missing, not a regular file, unreadable.

    Every file a user names is read through here (the stat-before-open rule): ``stat``
    first (:func:`probe_file`), so that a FIFO, a device or a folder is refused by name
    without being opened; then the file is opened without blocking and checked again on
    the open descriptor (``fstat``), so that a FIFO swapped in between the two is refused
    too, never waited on (a FIFO) or read without end (``/dev/zero``).
    """
    what = probe_file(path)
    if what == MISSING:
        return None, InputProblem(label, None, None, f"no such file ({path})")
    if what is not None:
        return None, _not_regular(path, label, what)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as err:
        return None, InputProblem(label, None, None,
                                  f"cannot be read ({err.strerror}); check its permissions")
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((w for test, w in _KINDS if test(mode)), "not a regular file")
            return None, _not_regular(path, label, kind)
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read(), None
    except OSError as err:
        return None, InputProblem(label, None, None,
                                  f"cannot be read ({err.strerror}); check its permissions")
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- text


def decode(label: str, data: bytes) -> tuple[str | None, list[InputProblem]]:
    """UTF-8 text of a file (a leading BOM dropped), or the row of its first bad byte."""
    if data.startswith(BOM):
        data = data[len(BOM):]
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError as err:
        row = data.count(b"\n", 0, err.start) + 1
        bad = data[err.start:err.start + 1].hex()
        return None, [InputProblem(label, row, None,
                                   f"not UTF-8 text (byte 0x{bad} cannot be decoded); save the "
                                   "file with UTF-8 encoding")]


def read_text_file(path: Path, label: str) -> tuple[str | None, list[InputProblem]]:
    """The UTF-8 text of a file a user names (:func:`read_input`, then :func:`decode`)."""
    data, problem = read_input(path, label)
    if problem is not None:
        return None, [problem]
    assert data is not None
    return decode(label, data)


def split_csv(label: str, table: TableSchema,
              text: str) -> tuple[RawTable | None, list[InputProblem]]:
    """Split CSV text into a :class:`RawTable`; header = row 1."""
    records: list[list[str]] = []
    try:
        records.extend(csv.reader(io.StringIO(text, newline=""), strict=False))
    except csv.Error as err:
        return None, [InputProblem(label, len(records) + 1, None,
                                   f"cannot split the row into values ({err}); check its quotes")]
    return table_from_rows(label, table, list(enumerate(records, start=1)))


def table_from_rows(
    label: str, table: TableSchema, rows: list[tuple[int, list[str]]],
) -> tuple[RawTable | None, list[InputProblem]]:
    """A :class:`RawTable` from numbered rows of text cells (the first is the header)."""
    if all(not "".join(cells).strip() for _, cells in rows):
        return None, [InputProblem(label, None, None,
                                   f"empty; the first row must be the header "
                                   f"{_expected_header(table)}")]
    number, header_cells = rows[0]
    if number != 1 or not "".join(header_cells).strip():
        return None, [InputProblem(label, 1, None,
                                   f"no header: row 1 is empty; put the header "
                                   f"{_expected_header(table)} in row 1")]
    header = tuple(h.strip() for h in header_cells)
    if len(rows) == 1:
        return RawTable(label, header, ()), []
    numbers, records = zip(*rows[1:], strict=True)
    # the rows with a value, picked without a Python step per row (55,000 usage rows)
    filled = map(str.strip, map("".join, records))
    body = tuple(compress(zip(numbers, map(tuple, records), strict=True), filled))
    return RawTable(label, header, body), []


# --------------------------------------------------------------------------- folder


_BARE_OR_QUOTED = r"""(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')"""
_KEY_LINE = re.compile(rf"\s*({_BARE_OR_QUOTED}(?:\s*\.\s*{_BARE_OR_QUOTED})*)\s*=")
_TABLE_LINE = re.compile(r"\s*\[\s*([^\[\]]+?)\s*\]")


def _dotted(key: str) -> str:
    return ".".join(part.strip().strip("\"'") for part in key.split("."))


def toml_key_lines(text: str) -> dict[str, int]:
    """The line each (dotted) key is defined on: ``{"as_of": 4, "gpu_rates.H100": 8}``."""
    lines: dict[str, int] = {}
    table = ""
    for number, line in enumerate(text.splitlines(), start=1):
        header = _TABLE_LINE.match(line)
        if header and not _KEY_LINE.match(line):
            table = _dotted(header.group(1))
            lines.setdefault(table, number)
            continue
        key = _KEY_LINE.match(line)
        if key:
            name = _dotted(key.group(1))
            lines.setdefault(f"{table}.{name}" if table else name, number)
    return lines


def toml_error_line(err: tomllib.TOMLDecodeError) -> int | None:
    """The line of a TOML syntax error (Python 3.11 gives it only in the message)."""
    found = re.search(r"at line (\d+)", str(err))
    return int(found.group(1)) if found else None


def parse_toml(label: str, text: str) -> tuple[RawConfig | None, list[InputProblem]]:
    """The entries of ``scenario.toml``; rates flattened to ``gpu_rates.<type>``."""
    data, problems = load_toml(label, text, toml_error_line)  # syntax, nesting too deep
    if data is None:
        return None, problems
    lines = toml_key_lines(text)
    entries = []
    for key, value in data.items():
        if key == "gpu_rates" and isinstance(value, dict):
            for gpu_type, rate in value.items():
                dotted = f"gpu_rates.{gpu_type}"
                entries.append(ConfigEntry(dotted, rate, lines.get(dotted, lines.get(key))))
        else:
            entries.append(ConfigEntry(key, value, lines.get(key)))
    return RawConfig(label, tuple(entries), from_sheet=False), []


def read_folder(path: Path) -> RawScenario:
    """Read ``scenario.toml`` and the CSV files of a scenario folder."""
    raw = RawScenario()
    known = {t.filename for t in TABLES.values()}
    for extra in sorted(p.name for p in path.glob("*.csv")
                        if probe_file(p) != MISSING and p.name not in known
                        and p.name not in (DECLARED_DEMAND_FILE, UNBUDGETED_FILE)):
        raw.problems.append(InputProblem(
            extra, None, None,
            f"unknown file; the tables are {', '.join(sorted(known))}: rename it or move it "
            "out of the scenario folder"))
    config = path / CONFIG_FILE
    if probe_file(config) == MISSING:
        raw.problems.append(InputProblem(
            CONFIG_FILE, None, None,
            f"missing; a scenario folder needs {CONFIG_FILE} with the keys "
            f"{', '.join(k for k, f in CONFIG_FIELDS.items() if f.required)}"))
    else:
        data, problem = read_input(config, CONFIG_FILE)
        if problem is not None:
            raw.problems.append(problem)
        else:
            assert data is not None
            raw.files[CONFIG_FILE] = data
            text, problems = decode(CONFIG_FILE, data)
            raw.problems += problems
            if text is not None:
                raw.config, problems = parse_toml(CONFIG_FILE, text)
                raw.problems += problems
    for table in TABLES.values():
        file = path / table.filename
        if probe_file(file) == MISSING:  # only a truly absent file is "none"
            if table.required:
                raw.tables[table.name] = None
                raw.problems.append(InputProblem(
                    table.filename, None, None,
                    f"missing; a scenario folder needs {table.filename} with the header "
                    f"{_expected_header(table)}"))
            else:
                raw.tables[table.name] = _empty(table, table.filename)
            continue
        data, problem = read_input(file, table.filename)
        if problem is not None:
            raw.tables[table.name] = None
            raw.problems.append(problem)
            continue
        assert data is not None
        raw.files[table.filename] = data
        text, problems = decode(table.filename, data)
        raw.problems += problems
        if text is None:
            raw.tables[table.name] = None
            continue
        raw.tables[table.name], problems = split_csv(table.filename, table, text)
        raw.problems += problems
    return raw


# --------------------------------------------------------------------------- workbook


def cell_text(value: object) -> str:
    """The text of a workbook cell as a CSV would hold it (``4.0`` → ``"4"``)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    text = getattr(value, "text", None)  # openpyxl ArrayFormula
    return text if isinstance(text, str) else str(value)


def read_workbook(path: Path) -> RawScenario:
    """Read a scenario workbook: a sheet per table and a ``scenario`` sheet of key, value."""
    import openpyxl  # a heavy import, needed only for workbooks

    raw = RawScenario()
    data, problem = read_input(path, path.name)
    if problem is not None:
        raw.problems.append(problem)
        return raw
    assert data is not None
    raw.files[path.name] = data
    try:
        book = openpyxl.load_workbook(io.BytesIO(data), data_only=False)
    except Exception as err:  # openpyxl raises many kinds for a corrupt file
        raw.problems.append(InputProblem(
            path.name, None, None,
            f"cannot read the workbook ({type(err).__name__}: {err}); save it as .xlsx"))
        return raw
    names = set(TABLES) | {CONFIG_SHEET}
    for sheet in book.sheetnames:
        if sheet not in names and sheet not in REPORT_SHEETS:
            raw.problems.append(InputProblem(
                f"{path.name}[{sheet}]", None, None,
                f"unknown sheet; the sheets are {', '.join(sorted(names))}: rename it or "
                "delete it"))
    if CONFIG_SHEET in book.sheetnames:
        raw.config, problems = _config_sheet(f"{path.name}[{CONFIG_SHEET}]",
                                             book[CONFIG_SHEET])
        raw.problems += problems
    else:
        raw.problems.append(InputProblem(
            f"{path.name}[{CONFIG_SHEET}]", None, None,
            f"missing sheet; add a sheet {CONFIG_SHEET!r} with the header key,value and a row "
            f"per key ({', '.join(k for k, f in CONFIG_FIELDS.items() if f.required)}, …)"))
    planned = None  # the Next quarter table, read first: the linked cells are read from it
    if NEXT_QUARTER_SHEET in book.sheetnames:
        planned, problems = next_quarter_table(book[NEXT_QUARTER_SHEET],
                                               f"{path.name}[{NEXT_QUARTER_SHEET}]")
        raw.problems += problems
    for table in TABLES.values():
        label = f"{path.name}[{table.name}]"
        if table.name not in book.sheetnames:
            if table.required:
                raw.tables[table.name] = None
                raw.problems.append(InputProblem(
                    label, None, None,
                    f"missing sheet; add a sheet {table.name!r} with the header "
                    f"{_expected_header(table)}"))
            else:
                raw.tables[table.name] = _empty(table, label)
            continue
        cells = list(book[table.name].iter_rows(min_row=1))
        rows = [(number, [cell_text(resolve_reference(book, cell)) for cell in row])
                for number, row in enumerate(cells, start=1)]
        if planned is not None and table.name in NEXT_QUARTER_LINKS:
            raw.problems += linked_by_id(label, table.name, cells, rows, planned)
        if not rows:
            rows = [(1, [])]
        raw.tables[table.name], problems = table_from_rows(label, table, rows)
        raw.problems += problems
    if planned is not None:
        raw.problems += next_quarter_problems(path.name, planned, raw.tables)
    return raw


_REFERENCE = re.compile(r"=\s*(?:'((?:[^']|'')+)'|([A-Za-z_][A-Za-z0-9_.]*))!"
                        r"\$?([A-Za-z]{1,3})\$?([0-9]+)\s*")


def resolve_reference(book: Any, cell: Any) -> object:
    """A cell's value, or the value of the one cell a formula such as ``='Next quarter'!B12`` names.

    Any other formula gives its text. Only formula cells are followed (a text cell
    ``=A1`` stays text), and only one step: a reference to another formula gives the
    referring formula's text, which validation then reports as not a number.
    """
    value = cell.value
    if cell.data_type != "f" or not isinstance(value, str):
        return value
    found = _REFERENCE.fullmatch(value)
    if not found:
        return value
    sheet = found.group(1).replace("''", "'") if found.group(1) else found.group(2)
    if sheet not in book.sheetnames:
        return value
    target = book[sheet][f"{found.group(3).upper()}{found.group(4)}"]
    if target.data_type == "f":
        return value
    return target.value


def _same(a: str, b: str) -> bool:
    try:
        return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(b)))
    except ValueError:
        return a.strip() == b.strip()


def next_quarter_table(sheet: Any, label: str
                       ) -> tuple[dict[str, tuple[int, str, str]], list[InputProblem]]:
    """The *Next quarter* table: project → (row, budget text, weight text); its problems.

    The table starts below the header :data:`NEXT_QUARTER_COLUMNS` in columns A to C and
    runs to the sheet's last row; blank rows are skipped. A row with a budget or a weight
    but no project is refused naming its cell (a row inserted into the table: which
    project it is for cannot be told), and so is a project given twice. No header: no
    table (``{}``).
    """
    table: dict[str, tuple[int, str, str]] = {}
    problems: list[InputProblem] = []
    inside = False
    for number, values in enumerate(sheet.iter_rows(min_row=1, max_col=3, values_only=True),
                                    start=1):
        cells = tuple(cell_text(v) for v in values) + ("",) * (3 - len(values))
        if not inside:
            inside = tuple(c.strip() for c in cells) == NEXT_QUARTER_COLUMNS
            continue
        if not cells[0].strip():
            if any(c.strip() for c in cells[1:]):
                problems.append(InputProblem(
                    label, number, NEXT_QUARTER_COLUMNS[0],
                    f"'{NEXT_QUARTER_SHEET}'!A{number} is empty, but the row holds a budget or "
                    "weight: rows are matched to projects by their id, never by position; "
                    "write the project id in column A, or delete the row"))
            continue
        if cells[0] in table:
            problems.append(InputProblem(
                label, number, NEXT_QUARTER_COLUMNS[0],
                f"{cells[0]} is also in row {table[cells[0]][0]}; give each project one row"))
            continue
        table[cells[0]] = (number, cells[1], cells[2])
    return table, problems


_LINK = re.compile(r"=\s*(?:'((?:[^']|'')+)'|([A-Za-z_][A-Za-z0-9_.]*))!")


def _refers_to_next_quarter(cell: Any) -> bool:
    """Whether a cell is a formula whose first reference is to the *Next quarter* sheet."""
    if cell.data_type != "f" or not isinstance(cell.value, str):
        return False
    found = _LINK.match(cell.value)
    sheet = found and ((found.group(1) or "").replace("''", "'") or found.group(2))
    return sheet == NEXT_QUARTER_SHEET


def linked_by_id(label: str, name: str, cells: list[Any], rows: list[tuple[int, list[str]]],
                 planned: dict[str, tuple[int, str, str]]) -> list[InputProblem]:
    """Give the cells of table ``name`` that refer to *Next quarter* its row's value, by id.

    A ``budgets`` ``gpu_hours`` (``org`` ``weight``) cell that is a formula on *Next
    quarter* reads the budget (weight) of *its own row's* project there, whatever cell the
    formula names: a row inserted or a table re-sorted on either sheet moves no budget to
    another project. Such a cell of a project without a *Next quarter* row is refused.
    Changes ``rows`` (text cells) in place; returns the problems.
    """
    if not rows:
        return []
    key, column, source, what = NEXT_QUARTER_LINKS[name]
    header = [h.strip() for h in rows[0][1]]
    if key not in header or column not in header:
        return []
    k, c = header.index(key), header.index(column)
    at = 1 if source == "B" else 2
    problems = []
    for (number, text), row in zip(rows[1:], cells[1:], strict=True):
        if c >= len(row) or not _refers_to_next_quarter(row[c]):
            continue
        project = text[k].strip() if k < len(text) else ""
        if project in planned:
            text[c] = planned[project][at]
        else:
            problems.append(InputProblem(
                label, number, column,
                f"{row[c].value} reads next quarter's {what} of {project or 'no project'}, but "
                f"{NEXT_QUARTER_SHEET} has no row for it; add one there, or type the {what} "
                "here"))
    return problems


def next_quarter_problems(book_name: str, planned: dict[str, tuple[int, str, str]],
                          tables: dict[str, RawTable | None]) -> list[InputProblem]:
    """Input cells that disagree with the *Next quarter* table, naming both cells.

    The cells compared are ``budgets`` ``gpu_hours`` and a project's ``weight`` in ``org``.
    Unedited, or edited on *Next quarter* only, they agree (the report writes them as
    references to it, read by id: :func:`linked_by_id`). A cell overwritten on an input
    sheet disagrees: which one was meant cannot be known, so it is refused.
    """
    if not planned:
        return []
    problems = []
    budgets = tables.get("budgets")
    if budgets is not None and "project" in budgets.header:
        k = budgets.header.index("project")
        known = {cells[k] for _, cells in budgets.rows if k < len(cells)}
        for project, (row, *_) in planned.items():
            if project not in known:
                problems.append(InputProblem(
                    f"{book_name}[{NEXT_QUARTER_SHEET}]", row, "project",
                    f"{project} is not in the budgets sheet, so this row would not be "
                    "planned; add the project to the sheets org and budgets (unhide them), "
                    "or delete the row"))
    for name, (key, column, letter, what) in NEXT_QUARTER_LINKS.items():
        raw = tables.get(name)
        if raw is None or key not in raw.header or column not in raw.header:
            continue
        at = 1 if letter == "B" else 2
        k, c = raw.header.index(key), raw.header.index(column)
        for number, cells in raw.rows:
            project = cells[k] if k < len(cells) else ""
            if project not in planned:
                continue
            value = cells[c] if c < len(cells) else ""
            row, *wanted = planned[project]
            if value.strip() and not _same(value, wanted[at - 1]):
                cell = f"'{NEXT_QUARTER_SHEET}'!{letter}{row}"
                problems.append(InputProblem(
                    f"{book_name}[{name}]", number, column,
                    f"{value} differs from {cell} ({wanted[at - 1] or 'empty'}), next "
                    f"quarter's {what} of {project}: the {NEXT_QUARTER_SHEET} sheet is what is "
                    f"planned; edit the {what} there (and let this cell read ={cell}), or "
                    "make the two equal"))
    return problems


def _config_sheet(label: str, sheet: Any) -> tuple[RawConfig | None, list[InputProblem]]:
    rows = list(enumerate(sheet.iter_rows(min_row=1, values_only=True), start=1))
    header = tuple(cell_text(v).strip() for v in rows[0][1]) if rows else ()
    if header[:2] != SCENARIO_SHEET_COLUMNS:
        return None, [InputProblem(label, 1, None,
                                   "row 1 must be the header key,value; put it there and a row "
                                   "per key below it")]
    entries = []
    problems = []
    for number, values in rows[1:]:
        key = cell_text(values[0]).strip() if values else ""
        value = values[1] if len(values) > 1 else None
        if not key:
            if value is not None and cell_text(value).strip():
                problems.append(InputProblem(label, number, "key",
                                             "a value without a key; fill in the key or delete "
                                             "the row"))
            continue
        entries.append(ConfigEntry(key, value, number))
    return RawConfig(label, tuple(entries), from_sheet=True), problems
