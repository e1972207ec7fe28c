"""The project's error types and the CLI's exit codes."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ExitCode(IntEnum):
    """Exit statuses of the ``planner`` command."""

    OK = 0
    FAILURE = 1  # the planner could not produce a valid plan (e.g. solver failure)
    BAD_INPUT = 2  # an input file is wrong; nothing was written


@dataclass(frozen=True, order=True)
class InputProblem:
    """One defect in the inputs, located as precisely as the input allows.

    ``file`` is the file name (``budgets.csv``) or ``book.xlsx[sheet]``; ``row`` is the
    1-based line (header = row 1, first data row = row 2) or ``None`` for a whole-file
    problem; ``column`` is the column name or ``None``.
    """

    file: str
    row: int | None
    column: str | None
    message: str

    def __str__(self) -> str:
        where = self.file
        if self.row is not None:
            where += f", row {self.row}"
        if self.column is not None:
            where += f", column {self.column}"
        return f"{where}: {self.message}"


class InputError(Exception):
    """Raised when inputs are invalid; carries every problem found.

    ``written``: files a command changed before it failed (a cycle's ingest into
    ``usage.csv``), so that the CLI does not say "nothing written" of them.
    """

    written: tuple[str, ...] = ()

    def __init__(self, problems: list[InputProblem]):
        self.problems = sorted(
            problems, key=lambda p: (p.file, p.row or 0, p.column or "", p.message))
        super().__init__("\n".join(str(p) for p in self.problems))


class SolverError(Exception):
    """Raised when no valid plan can be produced (never patched up)."""

    written: tuple[str, ...] = ()  # as InputError's
