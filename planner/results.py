"""Result files: every figure the docs quote comes from one of these, with its provenance.

A benchmark or a replay writes ``benchmarks/results/<name>.json``::

    {
      "name": "cycle",                       # the file's stem
      "title": "Daily planning cycles at 10×",
      "what": "one or two sentences: what was measured and how",
      "command": "python benchmarks/cycle_chain.py --scale 10 --cycles 30",
      "commit": "1a2b3c4",                   # git describe --always --dirty of the checkout
      "date": "2026-12-07T10:00:00Z",        # when the measurement ended (UTC)
      "machine": {"cores": 2, "load_before": 0.4, "load_after": 1.9, "python": "3.11.7",
                  "platform": "Linux-…", "highspy": "1.16.0"},
      "columns": [{"key": "case", "label": "case"},
                  {"key": "cpu_s", "label": "CPU s (median of 3)", "unit": "s",
                   "better": "lower"}],   # better: "lower" | "higher" | absent (neither)
      "rows": [{"case": "10× daily", "cpu_s": 12.3}],
      "notes": ["free text lines, each a fact about this measurement"]
    }

The docs site renders these files into its *Results* pages (``docs/results/``); nothing in
the docs types a measured figure by hand. Provenance (``commit``, ``date``, ``machine``,
``command``) is filled in by :func:`write_result`, never by the caller, so it cannot be
made up. Wall-clock stamps belong here, never in a plan.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import platform
import subprocess
import sys
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
BETTER = ("lower", "higher")


def _commit(cwd: Path) -> str:
    try:
        done = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=7"],
                              cwd=cwd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() or "unknown"


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def machine(load_before: float | None = None) -> dict[str, Any]:
    """What the measurement ran on: cores, load averages, Python, platform, HiGHS."""
    out: dict[str, Any] = {"cores": os.cpu_count(), "python": platform.python_version(),
                           "platform": platform.platform()}
    if load_before is not None:
        out["load_before"] = round(load_before, 2)
    with contextlib.suppress(OSError):
        out["load_after"] = round(os.getloadavg()[0], 2)
    if (highs := _version("highspy")) is not None:
        out["highspy"] = highs
    return out


def load_now() -> float | None:
    """The 1-minute load average now (call before measuring, pass to :func:`write_result`)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def write_result(name: str, *, title: str, what: str, columns: Sequence[Mapping[str, str]],
                 rows: Sequence[Mapping[str, Any]], notes: Sequence[str] = (),
                 command: str | None = None, load_before: float | None = None,
                 folder: Path | None = None) -> Path:
    """Write ``<folder>/<name>.json`` (default ``benchmarks/results``) with its provenance.

    ``command`` defaults to this process's command line. Every column has ``key`` and
    ``label``; ``better`` (if given) is ``lower`` or ``higher``. Every row holds only
    declared keys. Written atomically.
    """
    keys = [c["key"] for c in columns]
    for c in columns:
        if "key" not in c or "label" not in c:
            raise ValueError(f"a column needs key and label: {c!r}")
        if c.get("better") not in (None, *BETTER):
            raise ValueError(f"better must be lower or higher: {c!r}")
    for row in rows:
        if unknown := set(row) - set(keys):
            raise ValueError(f"row keys not among the columns: {sorted(unknown)}")
    folder = RESULTS_DIR if folder is None else folder
    folder.mkdir(parents=True, exist_ok=True)
    body = {
        "name": name, "title": title, "what": what,
        "command": command if command is not None else " ".join(
            [Path(sys.argv[0]).name if sys.argv[0].endswith("planner") else sys.argv[0],
             *sys.argv[1:]]),
        "commit": _commit(Path(__file__).resolve().parents[1]),
        "date": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace(
            "+00:00", "Z"),
        "machine": machine(load_before),
        "columns": [dict(c) for c in columns],
        "rows": [dict(r) for r in rows],
        "notes": list(notes),
    }
    path = folder / f"{name}.json"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(body, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_result(path: Path) -> dict[str, Any]:
    """A result file, checked for the keys the docs need (``ValueError`` names the file)."""
    body = json.loads(path.read_text(encoding="utf-8"))
    missing = [k for k in ("name", "title", "what", "command", "commit", "date", "machine",
                           "columns", "rows") if k not in body]
    if missing:
        raise ValueError(f"{path}: missing {', '.join(missing)}")
    return body


#: How a column's direction shows in a rendered table's header.
ARROWS = {"lower": "↓", "higher": "↑"}


def cell_text(value: Any) -> str:
    """One value as a table cell: thousands separated, ``–`` for none, ``|`` escaped."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return f"{value:,}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def table_markdown(columns: Sequence[Mapping[str, str]],
                   rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows as a Markdown table; a column that has a better direction shows its arrow."""
    def head(column: Mapping[str, str]) -> str:
        arrow = ARROWS.get(column.get("better", ""), "")
        return cell_text(column["label"]) + (f" {arrow}" if arrow else "")

    lines = ["| " + " | ".join(head(c) for c in columns) + " |",
             "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell_text(r.get(c["key"])) for c in columns) + " |"
              for r in rows]
    return "\n".join(lines) + "\n"


def transposed_markdown(columns: Sequence[Mapping[str, str]],
                        rows: Sequence[Mapping[str, Any]]) -> str:
    """A wide table turned: one line per column (its arrow beside it), one column per row.

    The first column's values (e.g. the policies) become the header, so a table of many
    figures for a few cases reads down the page instead of off its edge.
    """
    first, rest = columns[0], columns[1:]
    lines = ["| " + " | ".join([cell_text(first["label"])]
                               + [cell_text(r.get(first["key"])) for r in rows]) + " |",
             "|" + "---|" * (len(rows) + 1)]
    for c in rest:
        arrow = ARROWS.get(c.get("better", ""), "")
        label = cell_text(c["label"]) + (f" {arrow}" if arrow else "")
        lines.append("| " + " | ".join([label] + [cell_text(r.get(c["key"])) for r in rows])
                     + " |")
    return "\n".join(lines) + "\n"


#: A table with more columns than this is rendered turned (:func:`transposed_markdown`).
WIDE = 10


def provenance_markdown(body: Mapping[str, Any]) -> str:
    """Where a result file's figures come from: date, machine, commit and command."""
    machine = body["machine"]
    load = [f"{machine[k]:g}" for k in ("load_before", "load_after") if k in machine]
    parts = [f"{machine.get('cores', '?')} cores",
             *(["load average " + " → ".join(load)] if load else []),
             f"Python {machine.get('python', '?')}",
             *([f"HiGHS {machine['highspy']}"] if "highspy" in machine else []),
             machine.get("platform", "")]
    return (f"- **date**: {body['date']}\n"
            f"- **machine**: {', '.join(p for p in parts if p)}\n"
            f"- **commit**: `{body['commit']}`\n"
            f"- **command**: `{body['command']}`\n")


def result_markdown(body: Mapping[str, Any]) -> str:
    """A whole result file as a Markdown page: title, what, the table, notes, provenance."""
    directions = sorted({c["better"] for c in body["columns"] if c.get("better")})
    legend = ", ".join(f"{ARROWS[d]} {d} is better" for d in directions)
    out = [f"# {body['title']}", "", str(body["what"]), ""]
    wide = len(body["columns"]) > WIDE and body["rows"]
    out += [(transposed_markdown if wide else table_markdown)(body["columns"], body["rows"])]
    if legend:
        out += [f"*{legend}.*", ""]
    if body.get("notes"):
        out += ["**Notes**", ""] + [f"- {note}" for note in body["notes"]] + [""]
    out += ["**Provenance** (written by `planner.results.write_result`; re-run the command "
            "to measure again)", "", provenance_markdown(body),
            f"Source: `benchmarks/results/{body['name']}.json`.", ""]
    return "\n".join(out)


def read_results(folder: Path | None = None) -> list[dict[str, Any]]:
    """Every result file of ``folder`` (default ``benchmarks/results``), by name."""
    folder = RESULTS_DIR if folder is None else folder
    return [read_result(path) for path in sorted(folder.glob("*.json"))]


def results_index_markdown(bodies: Sequence[Mapping[str, Any]]) -> str:
    """The Results section's front page: every result file, newest measurement first."""
    out = ["# Results", "",
           "Every measured figure in these docs comes from a result file, "
           "`benchmarks/results/<name>.json`, written by the script that measured it "
           "(`planner.results.write_result`, which records the date, the machine, the commit "
           "and the command itself). The pages below are rendered from those files when the "
           "site is built; nothing here is typed by hand. Re-run a page's command to measure "
           "again: it rewrites the file. Arrows in a column's header say which direction is "
           "better. The history of earlier measurements is in `CHANGELOG.md`.", "",
           "| result | date | commit | command |", "|---|---|---|---|"]
    for body in sorted(bodies, key=lambda b: b["date"], reverse=True):
        out.append(f"| [{cell_text(body['title'])}]({body['name']}.md) | "
                   f"{cell_text(body['date'][:10])} | `{cell_text(body['commit'])}` | "
                   f"`{cell_text(body['command'])}` |")
    if not bodies:
        out.append("| (no result files yet) | | | |")
    return "\n".join(out) + "\n"
