"""The worktrees of a clone and what each is in the middle of, read from their git dirs (no
process): which branch each has checked out, counting the one a rebase or a bisect detached HEAD
from, and whether a rebase, merge, cherry-pick, revert, am or bisect is in progress there. A write
into a branch that lives elsewhere asks this first (SPEC §4)."""

import contextlib
import os
from pathlib import Path

from . import argv
from .git import APPLYING, BISECTING, PICKING, REBASING, Repo, main_worktree
from .project import Project
from .typed import NamedTuple


class Operation(NamedTuple):
    worktree: Path
    branch: str
    name: str  # rebase, merge, cherry-pick, revert, am, bisect


def _branch_in(path: Path, prefix: str) -> str | None:
    """The branch that a small file of git's own names on its first line after `prefix`, if valid."""
    try:
        with open(path, "rb") as handle:
            line = handle.read(4096).decode("utf-8", "replace").partition("\n")[0].strip()
    except OSError:
        return None
    name = line[len(prefix) :] if line.startswith(prefix) else ""
    return name if argv.branch_name_problem(name) is None else None


def checked_out(git_dir: Path) -> tuple[str | None, str | None]:
    """(branch, operation) of the worktree whose git dir is `git_dir`. The branch it has checked
    out: HEAD's, else the one a rebase (`head-name`) or a bisect (BISECT_START) detached HEAD from
    and gives back when it ends (None: detached). The operation: the rebase, merge, cherry-pick,
    revert, am or bisect it is in the middle of (None: none)."""
    head = _branch_in(git_dir / "HEAD", "ref: refs/heads/")
    if os.path.lexists(git_dir / APPLYING):
        return head, "am"
    for state in REBASING:
        if os.path.lexists(git_dir / state):
            return _branch_in(git_dir / state / "head-name", "refs/heads/"), "rebase"
    for name, what in PICKING:
        if os.path.lexists(git_dir / name):
            return head, what
    if any(os.path.lexists(git_dir / name) for name in BISECTING):
        return head or _branch_in(git_dir / BISECTING[0], ""), "bisect"
    return head, None


def operations(repo: Repo) -> list[Operation]:
    """Every operation in progress on a branch, in any worktree of the clone (no process): the
    main worktree's git dir is the common dir, a linked one's `worktrees/<id>` names it (`gitdir`)."""
    dirs: list[tuple[Path | None, Path]] = [(None, repo.common_dir)]  # the main worktree's path: asked if needed
    for gitdir in sorted((repo.common_dir / "worktrees").glob("*/gitdir")):  # (none: no linked worktree)
        with contextlib.suppress(OSError):  # one worktree's unreadable `gitdir` hides no other's
            named = gitdir.read_text(errors="replace").strip()
            dirs += [(Path(named).parent, gitdir.parent)] if named else []
    found = [(path, *checked_out(git_dir)) for path, git_dir in dirs]
    return [Operation(path or main_worktree(repo), branch, name) for path, branch, name in found if branch and name]


def intake_to_read(repo: Repo, project: Project, remote: str | None) -> str | None:
    """The intake branch whose copies this worktree reads as its queue's (`intake.read_intake`),
    or None when there are none to read: the backlog is not maildir-shared, the main worktree is
    detached, or this worktree is on that branch and no remote's copy of it counts (`remote`: the
    configured remote's name)."""
    branch = intake_branch(repo, project) if project.shares_flight else None
    if branch is None or (branch == repo.branch and remote is None):
        return None
    return branch


def intake_branch(repo: Repo, project: Project) -> str | None:
    """The `intake:` option, else the branch checked out in the main worktree (its git dir is the
    common dir): a branch it is rebasing or bisecting still counts (SPEC §4); None when detached."""
    if project.intake:
        return project.intake
    return checked_out(repo.common_dir)[0]
