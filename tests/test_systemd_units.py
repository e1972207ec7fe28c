"""deploy/systemd: the cycle (daily) and tick (every minute) units, as systemd reads them."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from planner.ingest.sacct import WITH_QOS
from planner.ingest.squeue import COMMAND as SQUEUE
from tests.system import need

UNITS = Path(__file__).resolve().parents[1] / "deploy" / "systemd"
FILES = ("gpu-planner-cycle.service", "gpu-planner-cycle.timer", "gpu-planner-tick.service",
         "gpu-planner-tick.timer")


def test_systemd_analyze_verifies_every_unit_without_a_word():
    need("systemd-analyze", why="systemd's own check of the unit files")
    done = subprocess.run(["systemd-analyze", "verify", *(str(UNITS / f) for f in FILES)],
                          capture_output=True, text=True, timeout=120, check=False)
    # an unknown key or a bad value is only a warning (exit 0): the output must be empty too
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


def exec_start(unit: str) -> str:
    """The ``sh -c`` script of a service's ExecStart, as systemd hands it to sh."""
    text = (UNITS / unit).read_text()
    joined = re.sub(r"\\\n", " ", text)  # systemd joins a line ending in a backslash
    (line,) = [x for x in joined.splitlines() if x.startswith("ExecStart=")]
    argv = shlex.split(line[len("ExecStart="):])
    assert argv[:2] == ["/bin/sh", "-c"] and len(argv) == 3
    return argv[2].replace("$$", "$")  # systemd's "$$" is one "$" for sh


@pytest.mark.parametrize("unit", ["gpu-planner-cycle.service", "gpu-planner-tick.service"])
def test_each_service_runs_a_script_sh_can_read(unit):
    need("sh", why="sh -n")
    script = exec_start(unit)
    assert subprocess.run(["sh", "-n", "-c", script], check=False).returncode == 0


def test_the_cycle_reads_the_executor_with_the_commands_the_ingest_reads():
    script = exec_start("gpu-planner-cycle.service")
    fmt = SQUEUE.split("--Format=", 1)[1]
    assert f'--Format="{fmt}"' in script and SQUEUE.split(" --Format=")[0] in script
    assert f"--format={','.join(WITH_QOS)}" in script
    assert "--sacct" in script and "--squeue" in script and "--kueue" in script
    timer = (UNITS / "gpu-planner-cycle.timer").read_text()
    assert "OnCalendar=*-*-* 00:05:00 UTC" in timer
    assert "OnCalendar=minutely" in (UNITS / "gpu-planner-tick.timer").read_text()


def test_the_environment_file_names_every_variable_the_services_use():
    used = set()
    for unit in ("gpu-planner-cycle.service", "gpu-planner-tick.service"):
        used |= set(re.findall(r"\$\{(\w+)\}", exec_start(unit)))
    given = {line.split("=", 1)[0] for line in (UNITS / "gpu-planner.env").read_text()
             .splitlines() if line and not line.startswith("#")}
    assert used <= given and used >= {"PLANNER", "STATE"}
    assert shutil.which("sh") is not None
