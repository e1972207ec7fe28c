"""planner cycle's state: one cycle at a time, current never backwards, damage is bad input.

Races are made deterministic by pausing one cycle (a thread) at a chosen step while
another runs to its end: without the state's lock the second finishes and the first then
moves ``current`` back (or writes a duplicate ``-2`` folder); with it, the second is
refused at once, naming the one running.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from planner import cycle as cycle_module
from planner.cli import main
from planner.config import load_model
from planner.cycle import run_cycle
from planner.errors import InputError, InputProblem
from planner.locks import hold
from tests.scenario_factory import write_scenario

SACCT_LINE = "9001|p1|h100-a|gres/gpu=8|2026-11-01T00:00:00|2026-11-01T12:00:00|COMPLETED\n"


def flat(text: str) -> str:
    return " ".join(text.split())


def cycle(folder: Path, state: Path, as_of: str, *extra: str) -> int:
    return main(["cycle", str(folder), "--state", str(state), "--as-of", as_of, *extra])


@pytest.fixture()
def started(tmp_path: Path) -> tuple[Path, Path]:
    """The tiny scenario after one cycle as of 2026-11-02."""
    folder = write_scenario(tmp_path / "sc")
    state = tmp_path / "state"
    assert cycle(folder, state, "2026-11-02") == 0
    return folder, state


def current(state: Path) -> str:
    return os.readlink(state / "current")


class Paused:
    """Run a cycle in a thread that stops at ``cycle_module.<name>`` until released."""

    def __init__(self, monkeypatch, name: str):
        self.reached, self.release = threading.Event(), threading.Event()
        real = getattr(cycle_module, name)

        def wait_then(*args, **kwargs):
            if threading.current_thread().name == "paused":
                self.reached.set()
                assert self.release.wait(60)
            return real(*args, **kwargs)

        monkeypatch.setattr(cycle_module, name, wait_then)
        self.outcome: list[object] = []

    def start(self, folder: Path, state: Path, as_of: str) -> threading.Thread:
        def body():
            try:
                self.outcome.append(run_cycle(folder, state, load_model(), as_of=as_of))
            except Exception as error:  # noqa: BLE001 (asserted by the test)
                self.outcome.append(error)

        thread = threading.Thread(target=body, name="paused")
        thread.start()
        assert self.reached.wait(60)
        return thread

    def finish(self, thread: threading.Thread) -> object:
        self.release.set()
        thread.join(60)
        return self.outcome[0]


# --- M4: one cycle at a time; current never backwards ---------------------------------------


def test_a_second_cycle_is_refused_while_one_runs(started, monkeypatch, capsys):
    folder, state = started
    paused = Paused(monkeypatch, "plan_scenario")
    thread = paused.start(folder, state, "2026-11-03")
    capsys.readouterr()
    assert cycle(folder, state, "2026-11-04") == 2  # would move current to 11-04 ...
    err = flat(capsys.readouterr().err)
    assert "a planning cycle is in progress by pid" in err
    assert str(state / ".lock") in err
    result = paused.finish(thread)  # ... and the paused one then back to 11-03
    assert not isinstance(result, Exception), result
    assert current(state) == "plans/2026-11-03T00-00-00Z"
    assert cycle(folder, state, "2026-11-04") == 0  # the lock was released
    assert current(state) == "plans/2026-11-04T00-00-00Z"


def test_current_never_moves_to_an_earlier_as_of(started):
    folder, state = started
    assert cycle(folder, state, "2026-11-04") == 0
    early = state / "plans" / "2026-11-02T00-00-00Z"
    with pytest.raises(InputError) as caught:
        cycle_module.make_current(state, early, cycle_module.as_of_of(early))
    assert "current never moves back" in str(caught.value)
    assert current(state) == "plans/2026-11-04T00-00-00Z"


def test_two_cycles_of_one_as_of_at_once_leave_one_folder(started, monkeypatch, capsys):
    """Paused after looking for an identical folder, before renaming its own into place."""
    folder, state = started
    paused = Paused(monkeypatch, "write_files")
    thread = paused.start(folder, state, "2026-11-03")
    assert cycle(folder, state, "2026-11-03") == 2
    result = paused.finish(thread)
    assert not isinstance(result, Exception), result
    assert sorted(p.name for p in (state / "plans").iterdir()) == [
        "2026-11-02T00-00-00Z", "2026-11-03T00-00-00Z"]  # no "-2" twin


def test_a_killed_cycles_lock_and_staging_folder_do_not_stay(started):
    folder, state = started
    stale = state / "plans" / ".2026-11-03T00-00-00Z.99999.tmp"
    (stale / "slurm").mkdir(parents=True)
    (stale / "plan.json").write_text("{")
    os.symlink("plans/nowhere", state / ".current.99999.tmp")
    with hold(state, "a planning cycle"):
        pass  # a holder that is gone: its lock is free
    assert cycle(folder, state, "2026-11-03") == 0
    assert not stale.exists() and not os.path.lexists(state / ".current.99999.tmp")


# --- M7: a damaged state is bad input -------------------------------------------------------


def _loop(state: Path) -> None:
    (state / "current").unlink()
    os.symlink("current", state / "current")


def _dangling(state: Path) -> None:
    (state / "current").unlink()
    os.symlink("plans/gone", state / "current")


def _garbage(state: Path) -> None:
    (state / "current" / "cycle.json").write_text("garbage")


def _not_an_object(state: Path) -> None:
    (state / "current" / "cycle.json").write_text("[1, 2]")


def _bad_as_of(state: Path) -> None:
    (state / "current" / "cycle.json").write_text('{"as_of": "yesterday", "previous": null}')


def _escaping_previous(state: Path) -> None:
    (state / "current" / "cycle.json").write_text(
        '{"as_of": "2026-11-02T00:00:00Z", "previous": "../../etc"}')


def _deep(state: Path) -> None:
    (state / "current" / "cycle.json").write_text("[" * 100_000 + "]" * 100_000)


@pytest.mark.parametrize(("damage", "says"), [
    (_loop, "cannot be followed (a loop of symbolic links)"),
    (_dangling, "cannot be followed (No such file or directory)"),
    (_garbage, "not JSON"),
    (_not_an_object, "not a JSON object"),
    (_bad_as_of, "column as_of: 'yesterday' is not an ISO 8601 time"),
    (_escaping_previous, "column previous: '../../etc' is not the name of a folder in plans/"),
    (_deep, "nested deeper than 64 levels"),
])
def test_a_damaged_state_exits_2_naming_it(started, capsys, damage, says):
    folder, state = started
    damage(state)
    capsys.readouterr()
    assert cycle(folder, state, "2026-11-02") == 2  # a re-run reads cycle.json's previous
    err = flat(capsys.readouterr().err)
    assert says in err, err
    assert "Traceback" not in err


def test_state_a_file_exits_2(tmp_path: Path, capsys):
    folder = write_scenario(tmp_path / "sc")
    (tmp_path / "afile").write_text("x")
    assert cycle(folder, tmp_path / "afile", "2026-11-02") == 2
    err = flat(capsys.readouterr().err)
    assert "afile: is not a folder; --state names the folder of the plan history" in err


# --- Low: what a failed cycle says it wrote --------------------------------------------------


def test_a_state_that_cannot_be_written_is_refused_before_the_ingest(started, monkeypatch,
                                                                    capsys):
    folder, state = started
    before = (folder / "usage.csv").read_bytes()
    sacct = folder.parent / "sacct.txt"
    sacct.write_text(SACCT_LINE)
    real = os.access
    monkeypatch.setattr(cycle_module.os, "access",
                        lambda path, mode: False if Path(path) == state / "plans"
                        else real(path, mode))
    assert cycle(folder, state, "2026-11-03", "--sacct", str(sacct)) == 2
    err = flat(capsys.readouterr().err)
    assert "plans: cannot be written; fix the permissions of the state folder (--state)" in err
    assert (folder / "usage.csv").read_bytes() == before


def test_a_cycle_failing_after_its_ingest_says_the_ingest_was_kept(started, monkeypatch,
                                                                   capsys):
    folder, state = started
    sacct = folder.parent / "sacct.txt"
    sacct.write_text(SACCT_LINE)

    def refuse(*_args, **_kwargs):
        raise InputError([InputProblem("plan.json", None, None, "refused for the test")])

    monkeypatch.setattr(cycle_module, "plan_scenario", refuse)
    assert cycle(folder, state, "2026-11-03", "--sacct", str(sacct)) == 2
    err = flat(capsys.readouterr().err)
    assert "nothing written" not in err
    assert f"{folder / 'usage.csv'} took the ingest and keeps it" in err
    assert f"nothing else written (written before it: {folder / 'usage.csv'})" in err
    assert "slurm:h100-a:9001" in (folder / "usage.csv").read_text()


def test_a_refused_write_of_the_state_names_state_not_out(started, monkeypatch, capsys):
    folder, state = started

    def refuse(src, dst):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(cycle_module.os, "rename", refuse)
    assert cycle(folder, state, "2026-11-03") == 2
    err = flat(capsys.readouterr().err)
    assert "cannot write (Read-only file system)" in err
    assert "--out" not in err and "--state" in err
    assert "Traceback" not in err
    assert current(state) == "plans/2026-11-02T00-00-00Z"
