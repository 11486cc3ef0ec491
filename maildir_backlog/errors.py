"""Errors users see, each with its exit code (SPEC §7: 1 refused, 2 invalid input, 3 lost a race)."""

from __future__ import annotations


class BacklogError(Exception):
    """A refusal or failure: one line for the user, exit code 1."""

    code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = " ".join(str(message).split())  # always one line


class InvalidInput(BacklogError):
    """Usage errors and invalid input (bad slug, bad frontmatter, bad pipeline): exit 2."""

    code = 2


class Conflict(BacklogError):
    """Lost a race with another process; retrying may succeed: exit 3."""

    code = 3


class Busy(Conflict):
    """A lock another process holds did not come free in time: exit 3, but not a lost race on
    one task (auto-pick stops instead of trying every other candidate against the same wait)."""
