"""Errors a user can cause. The CLI prints them as one line and exits non-zero."""

from __future__ import annotations


class UserError(Exception):
    """Something the user can fix: a bad manifest, a missing file, a rejected key.

    ``exit_code`` follows the CLI's convention: 2 for bad input (nothing was written),
    1 for a run that could not finish (what it wrote is resumable).
    """

    exit_code = 1


class ManifestError(UserError):
    """A manifest field is wrong. ``path`` names it the way a user would write it."""

    exit_code = 2

    def __init__(self, path: str, problem: str, source: str | None = None):
        self.path = path
        self.problem = problem
        self.source = source
        where = f"{source}: " if source else ""
        field = f"{path}: " if path else ""
        super().__init__(f"{where}{field}{problem}")


class UsageError(UserError):
    """A command-line argument is wrong (nothing was run or written)."""

    exit_code = 2
