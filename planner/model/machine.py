"""How busy the machine is beside this planning process: cores others use right now.

The 1-minute load average lags: a planning run started just after another reads the
first run's worker processes in it for a minute after they ended, and would then solve
the reservation parts in turn instead of in two workers. :func:`busy_elsewhere` instead counts
the CPU time every process spent over a short window (``/proc/stat``) less what this
process and its children spent (``/proc/<pid>/stat``): its own HiGHS threads and its LP
helper are not "others". Linux only; elsewhere it returns ``None`` and the caller falls
back on the load average.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

#: How long :func:`busy_elsewhere` watches (seconds): long enough for the clock ticks
#: (100 a second a core) to count, short beside a planning run.
WINDOW = 0.25


def _stat(pid: int | str) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after "pid (comm) " ([0] state, [1] parent pid)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2:].split()  # a comm may hold spaces and parentheses


def _ticks(fields: list[str]) -> int:
    """User and system clock ticks of a process, all its threads (utime, stime)."""
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of the whole line


def own_ticks() -> int:
    """Clock ticks used by this process and its running children."""
    me = os.getpid()
    total = _ticks(_stat(me))
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or entry.name == str(me):
            continue
        try:
            fields = _stat(entry.name)
            if int(fields[1]) == me:
                total += _ticks(fields)
        except (OSError, ValueError, IndexError):
            continue  # ended meanwhile, or not readable
    return total


def machine_ticks() -> int:
    """Busy clock ticks of every core since boot (``/proc/stat``: all but idle and iowait)."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = values
    return user + nice + system + irq + softirq + steal


def busy_elsewhere(window: float = WINDOW) -> float | None:
    """Cores busy with other processes over the next ``window`` seconds; ``None``: unknown.

    (machine's busy ticks − this process's and its children's) ÷ ticks a second ÷ window,
    at least 0. ``None`` where ``/proc`` cannot be read (not Linux).
    """
    try:
        hertz = os.sysconf("SC_CLK_TCK")
        machine, own = machine_ticks(), own_ticks()
        time.sleep(window)
        machine, own = machine_ticks() - machine, own_ticks() - own
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return max(0.0, (machine - own) / hertz / window)
