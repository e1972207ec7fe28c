"""Write outputs atomically: every file complete or absent, same inputs → same bytes."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from planner.plan.build import Plan


def plan_bytes(plan: Plan) -> bytes:
    """The canonical serialisation of a plan."""
    return (json.dumps(plan.body, indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode()


def _mode(name: str) -> int:
    """What ``open()`` would give: rw for all (rwx for a ``.sh`` script), less the umask."""
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if name.endswith(".sh") else 0o666) & ~umask


def write_files(out_dir: Path, files: dict[str, bytes]) -> list[Path]:
    """Write each file to a temporary sibling first, then rename all into place.

    The temporary file is private (``mkstemp``); once complete it gets the mode an
    ordinary write would have given, so a plan is readable by the executor's user and
    ``slurm-apply.sh`` runs as ``./slurm-apply.sh``.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    staged: list[tuple[str, Path]] = []
    try:
        for name, data in files.items():
            fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=f".{name}.", suffix=".tmp")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, _mode(name))
            staged.append((name, Path(tmp)))
    except BaseException:
        for _, tmp in staged:
            tmp.unlink(missing_ok=True)
        raise
    written = []
    for name, tmp in staged:
        os.replace(tmp, out_dir / name)
        written.append(out_dir / name)
    return written
