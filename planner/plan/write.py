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
    return (json.dumps(plan.body, indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode()


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
        try:
            folder.rmdir()
        except OSError:
            break


def write_files(out_dir: Path, files: dict[str, bytes]) -> list[Path]:
    """Write each file to a temporary sibling first, then rename all into place.

    The temporary file is private (``mkstemp``); once complete it gets the mode an
    ordinary write would have given, so a plan is readable by the executor's user and
    ``slurm-apply.sh`` runs as ``./slurm-apply.sh``.

    When the system refuses (disk full, read-only file system, no permission, ``out_dir``
    a file), every temporary file and every folder this call created is removed and an
    :class:`~planner.errors.InputError` names the path and the system's reason, so the
    CLI prints one line and exits 2 (bad input: the ``--out`` given cannot take the
    files). Files already in ``out_dir`` from an earlier run are left as they were.
    """
    created = _missing_dirs(out_dir)
    staged: list[Path] = []
    target = out_dir
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            target = out_dir / name
            fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=f".{name}.", suffix=".tmp")
            staged.append(Path(tmp))
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, _mode(name))
        written = []
        for name, tmp in zip(files, list(staged), strict=True):
            target = out_dir / name
            os.replace(tmp, target)
            staged.remove(tmp)
            written.append(target)
    except OSError as err:
        _cleanup(staged, created)
        reason = err.strerror or type(err).__name__
        if isinstance(err, (FileExistsError, NotADirectoryError)):
            reason = f"{reason}: a file stands where a folder is needed"
        raise InputError([InputProblem(
            str(target), None, None,
            f"cannot write ({reason}); nothing was written: free some space, fix the "
            "permissions or choose another --out")]) from None
    except BaseException:
        _cleanup(staged, created)
        raise
    return written
