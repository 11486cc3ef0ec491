"""What the claim verbs (`take`, `advance`) ask of git and the forge, so that they never import
either: whether a failed claim would fail the same way for every other candidate, and the pull
request of the current branch for `advance --pr auto`."""

from __future__ import annotations

from .context import Context
from .errors import BacklogError, Unavailable
from .forge import pull_request_url
from .git import GitError


def fails_every_candidate(exc: BacklogError) -> bool:
    """The commit failed (a refusing hook, a broken repository), or a lock or the remote stayed
    busy: claiming the next candidate would fail the same way. Any other refusal (a race lost,
    a task settled meanwhile or vanished) concerns this task only."""
    return isinstance(exc, GitError | Unavailable)


def pull_request(ctx: Context) -> str:
    """The URL of the current branch's pull request, through the GitHub CLI."""
    return pull_request_url(ctx.repo.toplevel)
