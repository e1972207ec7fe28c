"""A tiny valid scenario on disk, any file of which a test can override or remove.

``write_scenario(tmp_path)`` writes the folder described by :data:`FILES`: two clusters,
an org of 1 area / 2 teams / 4 projects (p4 has no budget row, so budget 0), budgets,
demand, two reservations and three usage rows, ``as_of`` inside the quarter.
Override a file by its table name with new text (``budgets="project,gpu_hours\\n"``),
bytes (for encodings), or ``None`` to leave it out; ``scenario=`` is ``scenario.toml``.
``write_workbook(path, folder)`` turns a folder into the one-workbook form.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import tomllib
from pathlib import Path

import openpyxl

from planner.inputs.schema import CONFIG_FILE, CONFIG_SHEET, TABLES

SCENARIO_TOML = """\
name = "tiny"
quarter_start = 2026-10-01
quarter_end = 2027-01-01
as_of = 2026-11-02
period_hours = 24
lookback_days = 28

[gpu_rates]
H100 = 1.0
A100 = 0.55
"""

CLUSTERS_CSV = """\
cluster,gpu_type,nodes,gpus_per_node
h100-a,H100,4,8
a100-b,A100,2,8
"""

ORG_CSV = """\
id,parent,weight
research,,1
vision,research,2
language,research,1
p1,vision,1
p2,vision,1
p3,language,1
p4,language,0.5
"""

BUDGETS_CSV = """\
project,gpu_hours,clusters
p1,5000,
p2,3000,h100-a
p3,2000,a100-b;h100-a
"""

DEMAND_CSV = """\
project,cluster,start,end,gpus
p1,h100-a,2026-11-02,2026-11-09,16
p2,h100-a,2026-11-02T06:00:00,2026-11-05,8
p3,a100-b,2026-11-03,2026-11-10,8
p4,h100-a,2026-11-02,2026-11-04,4
"""

RESERVATIONS_CSV = """\
request_id,project,cluster,nodes,hours,earliest_start,deadline
r1,p1,h100-a,2,48,2026-11-03,2026-11-10
r2,p3,a100-b,1,30,2026-11-04,2026-11-08T12:00:00
"""

USAGE_CSV = """\
job_id,project,cluster,gpus,start,end
j1,p1,h100-a,8,2026-10-20,2026-10-22
j2,p2,h100-a,4,2026-10-25T12:00:00Z,2026-10-26T02:00:00+02:00
j3,p3,a100-b,8,2026-10-28,2026-10-30
"""

#: Table name (``scenario`` for scenario.toml) → text of the valid tiny scenario.
FILES: dict[str, str] = {
    "scenario": SCENARIO_TOML,
    "clusters": CLUSTERS_CSV,
    "org": ORG_CSV,
    "budgets": BUDGETS_CSV,
    "demand": DEMAND_CSV,
    "reservations": RESERVATIONS_CSV,
    "usage": USAGE_CSV,
}


def filename(name: str) -> str:
    """``scenario`` → ``scenario.toml``, ``budgets`` → ``budgets.csv``."""
    return CONFIG_FILE if name == "scenario" else f"{name}.csv"


def write_scenario(folder: Path, **overrides: str | bytes | None) -> Path:
    """Write the tiny scenario into ``folder`` (created) and return it.

    ``overrides``: table name → text or bytes replacing that file, or ``None`` to omit
    it. Unknown names are a ``KeyError`` (a typo in a test should fail loudly).
    """
    unknown = set(overrides) - set(FILES)
    if unknown:
        raise KeyError(f"no such scenario file: {sorted(unknown)}")
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in {**FILES, **overrides}.items():
        if text is None:
            continue
        data = text if isinstance(text, bytes) else text.encode("utf-8")
        (folder / filename(name)).write_bytes(data)
    return folder


def _cell(kind: str, text: str) -> object:
    """A CSV cell as a spreadsheet would hold it: numbers and naive dates typed, else text."""
    try:
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
        if kind == "datetime":
            stamp = dt.datetime.fromisoformat(text)
            return stamp if stamp.tzinfo is None else text
    except ValueError:
        pass
    return text


def write_workbook(path: Path, folder: Path) -> Path:
    """Convert the scenario ``folder`` into one workbook at ``path`` and return ``path``.

    A sheet per CSV (numbers and naive dates as typed cells, ids as text) and a
    ``scenario`` sheet of key, value rows (``gpu_rates.H100`` for rates).
    """
    book = openpyxl.Workbook()
    book.remove(book.active)
    sheet = book.create_sheet(CONFIG_SHEET)
    sheet.append(["key", "value"])
    config = tomllib.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    for key, value in config.items():
        if isinstance(value, dict):
            for sub, rate in value.items():
                sheet.append([f"{key}.{sub}", rate])
        else:
            sheet.append([key, value])
    for table in TABLES.values():
        file = folder / table.filename
        if not file.exists():
            continue
        rows = list(csv.reader(io.StringIO(file.read_text(encoding="utf-8-sig"), newline="")))
        sheet = book.create_sheet(table.name)
        kinds = [table.field(h).kind if h in table.columns else "str" for h in rows[0]]
        sheet.append(rows[0])
        for row in rows[1:]:
            sheet.append([_cell(k, v) if v else None for k, v in zip(kinds, row, strict=False)])
    book.save(path)
    return path
