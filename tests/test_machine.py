"""Cores busy beside the planning process: others' CPU time now, not the load average."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from planner.model import machine

LINUX = Path("/proc/stat").exists()


def test_busy_elsewhere_is_the_machines_ticks_less_this_process_tree_by_hand(monkeypatch):
    # 100 ticks a second; over 0.25 s the machine used 60 ticks of which this process
    # and its children 10: 50 ticks ÷ 100 ÷ 0.25 = 2.0 cores busy elsewhere
    machine_reads = iter([1_000, 1_060])
    own_reads = iter([500, 510])
    monkeypatch.setattr(machine, "machine_ticks", lambda: next(machine_reads))
    monkeypatch.setattr(machine, "own_ticks", lambda: next(own_reads))
    monkeypatch.setattr(machine.os, "sysconf", lambda name: 100)
    monkeypatch.setattr(machine.time, "sleep", lambda seconds: None)
    assert machine.busy_elsewhere(0.25) == pytest.approx(2.0)


def test_busy_elsewhere_is_never_negative_and_none_where_proc_cannot_be_read(monkeypatch):
    machine_reads = iter([1_000, 1_001])
    own_reads = iter([500, 530])  # a child's ticks counted, the machine's read a tick late
    monkeypatch.setattr(machine, "machine_ticks", lambda: next(machine_reads))
    monkeypatch.setattr(machine, "own_ticks", lambda: next(own_reads))
    monkeypatch.setattr(machine.time, "sleep", lambda seconds: None)
    assert machine.busy_elsewhere() == 0.0

    def unreadable():
        raise FileNotFoundError("/proc/stat")

    monkeypatch.setattr(machine, "machine_ticks", unreadable)
    assert machine.busy_elsewhere() is None


@pytest.mark.skipif(not LINUX, reason="/proc is Linux's")
def test_the_tick_readers_read_this_machine():
    before_machine, before_own = machine.machine_ticks(), machine.own_ticks()
    spent = time.process_time()
    while time.process_time() - spent < 0.3:  # burn 0.3 s of this process's CPU
        pass
    after_machine, after_own = machine.machine_ticks(), machine.own_ticks()
    hertz = os.sysconf("SC_CLK_TCK")
    # this process's 0.3 s shows in its own ticks and in the machine's
    assert after_own - before_own >= 0.2 * hertz
    assert after_machine - before_machine >= after_own - before_own - 2


@pytest.mark.skipif(not LINUX, reason="/proc is Linux's")
def test_a_childs_ticks_count_as_this_processs_own():
    # a spinning child is this process's own work (an LP helper, a part worker): its
    # ticks are taken off the machine's, so it adds (next to) nothing
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        with_child = machine.own_ticks()
        # on a loaded machine the child may get little CPU: wait (up to 20 s) for its
        # 0.1 s of ticks rather than assume it ran a third of the time it was given
        wanted = 0.1 * os.sysconf("SC_CLK_TCK")
        deadline = time.monotonic() + 20
        while machine.own_ticks() - with_child < wanted and time.monotonic() < deadline:
            time.sleep(0.1)
        assert machine.own_ticks() - with_child >= wanted
    finally:
        child.kill()
        child.wait()
