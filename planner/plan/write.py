"""Write outputs atomically: every file complete or absent, same inputs → same bytes."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

from planner.errors import InputError, InputProblem
from planner.plan.build import Plan


def plan_bytes(plan: Plan) -> bytes:
    """The canonical serialisation of a plan."""
    return (dumps_indented(plan.body) + "\n").encode()


def dumps_indented(value: object) -> str:
    """``json.dumps(value, indent=1, ensure_ascii=False, allow_nan=False)``, the same text.

    The standard library writes indented JSON with its pure-Python encoder, one generator
    step per token (a quarter of a second for the 10x plan's 21,000 allocations); this
    joins each container's items at once, each string and number written by the functions
    ``json`` itself uses. Anything it does not handle (a non-text key, a NaN, a type JSON
    has no name for, a cycle) goes to ``json.dumps``, which writes it or raises as before.
    """
    try:
        return _indented(value, 0)
    except (_Unusual, RecursionError):
        return json.dumps(value, indent=1, ensure_ascii=False, allow_nan=False)


class _Unusual(Exception):
    """A value :func:`dumps_indented` leaves to ``json.dumps``."""


_TEXT = json.encoder.encode_basestring  # what json uses with ensure_ascii=False
_INFINITY = float("inf")


def _indented(value: object, level: int) -> str:
    """One value at nesting ``level``, as ``json``'s encoder checks types, in its order."""
    if isinstance(value, str):
        return _TEXT(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if value != value or value in (_INFINITY, -_INFINITY):
            raise _Unusual
        return float.__repr__(value)
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        inner = "\n" + " " * (level + 1)
        return ("[" + inner + ("," + inner).join(_indented(v, level + 1) for v in value)
                + "\n" + " " * level + "]")
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = "\n" + " " * (level + 1)
        items = []
        for key, v in value.items():
            if type(key) is not str:
                raise _Unusual
            kind = type(v)  # the common leaves inline, exactly as _indented writes them
            if kind is str:
                text = _TEXT(v)
            elif kind is float and -_INFINITY < v < _INFINITY:
                text = float.__repr__(v)
            elif kind is int:
                text = int.__repr__(v)
            else:
                text = _indented(v, level + 1)
            items.append(_TEXT(key) + ": " + text)
        return "{" + inner + ("," + inner).join(items) + "\n" + " " * level + "}"
    raise _Unusual


def _mode(name: str) -> int:
    """What ``open()`` would give: rw for all (rwx for a ``.sh`` script), less the umask."""
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if name.endswith(".sh") else 0o666) & ~umask


def _missing_dirs(out_dir: Path) -> list[Path]:
    """The folders ``mkdir(parents=True)`` would create for ``out_dir``, deepest first."""
    missing = []
    at = out_dir
    while not os.path.lexists(at) and at != at.parent:
        missing.append(at)
        at = at.parent
    return missing


def _cleanup(staged: list[Path], created: list[Path]) -> None:
    """Remove temporary files, then the folders this call created (if left empty)."""
    for tmp in staged:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
    for folder in created:  # deepest first
        with contextlib.suppress(OSError):
            folder.rmdir()


#: What a refused write tells the user to do, where the folder is an ``--out``.
OUT_REMEDY = "free some space, fix the permissions or choose another --out"


def write_files(out_dir: Path, files: dict[str, bytes], remedy: str = OUT_REMEDY) -> list[Path]:
    """Write each file to a temporary sibling first, then rename all into place.

    A name may hold one folder level (``kueue/index.yaml``): the folder is made inside
    ``out_dir``, so one call can write a plan and its exports together. The temporary
    file is private (``mkstemp``); once complete it gets the mode an ordinary write
    would have given, so a plan is readable by the executor's user and
    ``slurm-apply.sh`` runs as ``./slurm-apply.sh``.

    When the system refuses (disk full, read-only file system, no permission, a file
    where a folder must be), every temporary file and every folder this call created is
    removed and an :class:`~planner.errors.InputError` names the path and the system's
    reason, so the CLI prints one line and exits 2 (the ``--out`` given cannot take the
    files). Every file is complete on disk before the first rename, so a full disk or a
    read-only mount leaves ``out_dir`` as it was; should a rename itself fail, the
    message lists the files already replaced. ``remedy`` ends the message: what to do,
    where the folder is not an ``--out`` (a scenario's ``usage.csv``, a cycle's state).
    """
    targets = {name: out_dir / name for name in files}
    created: list[Path] = []
    for folder in sorted({t.parent for t in targets.values()}, key=lambda f: -len(f.parts)):
        created += [f for f in _missing_dirs(folder) if f not in created]
    created.sort(key=lambda f: -len(f.parts))  # deepest first, for the cleanup
    staged: list[Path] = []
    written: list[Path] = []
    target = out_dir
    try:
        for folder in sorted({t.parent for t in targets.values()} | {out_dir}):
            target = folder
            folder.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            target = targets[name]
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                       suffix=".tmp")
            staged.append(Path(tmp))
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, _mode(name))
        for name, tmp in zip(files, list(staged), strict=True):
            target = targets[name]
            os.replace(tmp, target)
            staged.remove(tmp)
            written.append(target)
    except OSError as err:
        _cleanup(staged, created if not written else [])
        reason = err.strerror or type(err).__name__
        if isinstance(err, (FileExistsError, NotADirectoryError)):
            reason = f"{reason}: a file stands where a folder is needed"
        done = ("nothing was written" if not written else
                f"already replaced: {', '.join(str(w) for w in written)}")
        raise InputError([InputProblem(
            str(target), None, None,
            f"cannot write ({reason}); {done}: {remedy}")]) from None
    except BaseException:
        _cleanup(staged, created if not written else [])
        raise
    return written
