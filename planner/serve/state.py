"""The state folder of ``planner cycle``, read only.

Every path the dashboard opens is built from names this module listed itself
(``DIR/plans/<name>`` for a name found in ``os.listdir(DIR/plans)``, and the fixed file
names of a cycle folder); no text from a URL is ever joined to a path. ``current`` is
followed only when it resolves to a folder directly inside ``DIR/plans``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planner.cycle import CURRENT, MANIFEST, PLANS, read_log


@dataclass(frozen=True)
class Kept:
    """One kept cycle folder: its name, its ``cycle.json``, and the folder."""

    name: str
    folder: Path
    manifest: dict[str, Any]

    @property
    def as_of(self) -> str:
        """The plan's ``as_of`` (ISO UTC)."""
        return str(self.manifest.get("as_of", ""))


def _manifest(folder: Path) -> dict[str, Any] | None:
    try:
        body = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return body if isinstance(body, dict) else None


def kept_cycles(state: Path) -> tuple[Kept, ...]:
    """The finished cycle folders of ``DIR/plans`` (plan.json and cycle.json), by as_of.

    Hidden (staging) folders, stray files and folders without a manifest are skipped.
    """
    plans = state / PLANS
    try:
        names = os.listdir(plans)
    except OSError:
        return ()
    out = []
    for name in names:
        folder = plans / name
        if name.startswith(".") or not folder.is_dir() or folder.is_symlink():
            continue
        if not (folder / "plan.json").is_file():
            continue
        record = _manifest(folder)
        if record is not None:
            out.append(Kept(name, folder, record))
    return tuple(sorted(out, key=lambda k: (k.as_of, _suffix(k.name))))


def _suffix(name: str) -> int:
    """The re-run number of a folder name (``…Z-2`` → 2; none → 1)."""
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if name.endswith(tail) and tail.isdigit() and "Z-" in name else 1


def current_name(state: Path) -> str | None:
    """The name of the folder ``DIR/current`` points at, when it is a kept folder."""
    link = state / CURRENT
    try:
        target = os.readlink(link)
    except OSError:
        return None
    resolved = (state / target).resolve()
    plans = (state / PLANS).resolve()
    if resolved.parent != plans or not (resolved / "plan.json").is_file():
        return None
    return resolved.name


def link_stamp(state: Path) -> tuple[str | None, float | None]:
    """Where ``current`` points (the link's text) and when it last moved (its mtime).

    Cheap enough to ask on every request: one ``readlink`` and one ``lstat``.
    """
    link = state / CURRENT
    try:
        return os.readlink(link), os.lstat(link).st_mtime
    except OSError:
        return None, None


def log_stamp(state: Path) -> tuple[int, float] | None:
    """Size and mtime of the run log (changes when a cycle ran)."""
    from planner.cycle import LOG

    try:
        st = os.stat(state / LOG)
    except OSError:
        return None
    return st.st_size, st.st_mtime


def runs(state: Path) -> list[dict[str, Any]]:
    """The run log's records, oldest first (:func:`planner.cycle.read_log`)."""
    return read_log(state)


def read_plan(folder: Path) -> dict[str, Any]:
    """A kept folder's ``plan.json``."""
    return json.loads((folder / "plan.json").read_text(encoding="utf-8"))
