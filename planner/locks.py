"""Advisory locks on the files and folders that several ``planner`` runs may share.

One lock file per thing guarded (a scenario's ``usage.csv``, a cycle's state folder),
held with ``flock(2)`` for as long as the read-modify-write takes:

- the kernel releases a ``flock`` when its holder exits, however it exits (``kill -9``
  included), so a crashed holder never blocks the next run: no stale-lock clean-up;
- the lock file also records who holds it (pid, command, host, since when), rewritten by
  each new holder, so a refused run names the holder;
- ``wait`` chooses between queueing (``planner ingest``: two ingests of one ledger both
  land, one after the other) and refusing (``planner cycle`` or ``tick`` while another
  runs on the same state: exit 2 naming the holder).

The lock file is never deleted (deleting it while another process waits on it would let
a third take a different inode); it is a small hidden file beside what it guards.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from planner.errors import InputError, InputProblem

POLL_SECONDS = 0.05


def _holder_text(fd: int) -> str:
    """Who holds the lock, as its file says, or a plain phrase when it says nothing."""
    try:
        raw = os.pread(fd, 4096, 0)
        info = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    except (OSError, UnicodeDecodeError, ValueError):
        info = {}
    if not isinstance(info, dict) or "pid" not in info:
        return "another planner run"
    command = str(info.get("command", "planner"))[:200]
    return (f"pid {info.get('pid')} on {info.get('host', '?')} ({command!r}, "
            f"since {info.get('since', '?')})")


def _record(fd: int, what: str) -> None:
    """Write this process as the holder (best effort: a full disk never fails the lock)."""
    info = {"pid": os.getpid(), "host": socket.gethostname(),
            "command": " ".join(["planner", *sys.argv[1:]])[:500],
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "what": what}
    data = (json.dumps(info, sort_keys=True) + "\n").encode("utf-8")
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
    except OSError:
        pass


def lock_path(guarded: Path) -> Path:
    """The lock file of ``guarded``: ``.<name>.lock`` beside a file, ``.lock`` in a folder."""
    if guarded.is_dir():
        return guarded / ".lock"
    return guarded.parent / f".{guarded.name}.lock"


@contextmanager
def hold(guarded: Path, what: str, *, wait: float | None = None) -> Iterator[None]:
    """Hold the exclusive lock of ``guarded`` for the ``with`` block.

    ``wait``: seconds to wait for a holder to finish (``None``: refuse at once). A lock
    that cannot be had raises :class:`~planner.errors.InputError` (exit 2) naming the
    lock file and its holder; nothing has been read or written by then.
    """
    path = lock_path(guarded)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except OSError as error:
        raise InputError([InputProblem(str(path), None, None,
                                       f"cannot open the lock file for {what}: "
                                       f"{error.strerror or error}")]) from None
    try:
        deadline = None if wait is None else time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as error:
                if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise InputError([InputProblem(str(path), None, None,
                                                   f"cannot lock for {what}: "
                                                   f"{error.strerror or error}")]) from None
                if deadline is None or time.monotonic() >= deadline:
                    waited = "" if wait is None else f" after waiting {wait:g} s"
                    raise InputError([InputProblem(
                        str(path), None, None,
                        f"{what} is in progress by {_holder_text(fd)}{waited}; run again "
                        "once it has finished (a holder that crashed has released it)")]
                    ) from None
                time.sleep(POLL_SECONDS)
        _record(fd, what)
        yield
    finally:
        os.close(fd)  # releases the flock
