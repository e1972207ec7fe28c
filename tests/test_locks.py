"""The advisory locks: refuse naming the holder, queue when asked, released by a crash."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from planner.errors import InputError
from planner.locks import hold, lock_path

HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from planner.locks import hold
    with hold(Path(sys.argv[1]), "a test holder"):
        print("held", flush=True)
        time.sleep(float(sys.argv[2]))
""")


def _holder(guarded: Path, seconds: float) -> subprocess.Popen:
    """A process holding ``guarded``'s lock for ``seconds`` (once it said so)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(guarded), str(seconds)],
                            stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[1])
    line = proc.stdout.readline().strip()
    proc.stdout.close()
    assert line == "held"
    return proc


def test_lock_path_sits_beside_a_file_and_inside_a_folder(tmp_path):
    (tmp_path / "usage.csv").write_text("x")
    assert lock_path(tmp_path / "usage.csv") == tmp_path / ".usage.csv.lock"
    assert lock_path(tmp_path) == tmp_path / ".lock"


def test_a_held_lock_is_refused_naming_the_holder(tmp_path):
    proc = _holder(tmp_path, 30)
    try:
        with pytest.raises(InputError) as caught, hold(tmp_path, "a planning cycle"):
            pass
        message = str(caught.value)
        assert f"pid {proc.pid}" in message
        assert "a planning cycle is in progress" in message
        assert str(tmp_path / ".lock") in message
    finally:
        proc.kill()
        proc.wait()


def test_waiting_queues_behind_the_holder(tmp_path):
    proc = _holder(tmp_path, 0.5)
    start = time.monotonic()
    with hold(tmp_path, "an ingest", wait=30):
        waited = time.monotonic() - start
    proc.wait()
    assert waited > 0.1  # it did wait for the holder to finish


def test_a_killed_holder_never_blocks_the_next_run(tmp_path):
    proc = _holder(tmp_path, 60)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with hold(tmp_path, "a planning cycle"):  # no wait: the kernel released it
        pass


def test_the_lock_is_exclusive_within_one_process_too(tmp_path):
    with hold(tmp_path, "the first"), pytest.raises(InputError), hold(tmp_path, "the second"):
        pass
