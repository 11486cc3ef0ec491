"""The post-checkout hook (SPEC §4, *Fresh worktrees*): `git worktree add` leaves every in-flight
symlink in place at once, instead of at the first backlog command there.

The hook lives where git looks for hooks (`git rev-parse --git-path hooks`, which honours
`core.hooksPath`). A hook that was already there is kept: it is renamed to
`post-checkout.pre-backlog` and our hook runs it first, passing its exit status on. Our own part
is quiet (it runs `backlog where`, which heals the layout like every verb, with its output
discarded) and never fails a checkout. Installing twice changes nothing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from . import git, limits, storage
from .change import Dirs, Executable, Rename, Step, Write
from .errors import BacklogError

NAME = "post-checkout"
CHAINED = "post-checkout.pre-backlog"
MARKER = "# maildir-backlog post-checkout hook"


def script(python: str) -> str:
    return f"""#!/bin/sh
{MARKER}: puts the backlog's in-flight symlinks in place in a new worktree.
# Installed by `backlog setup`; runs the hook that was here before ({CHAINED}) first.
hookdir=$(dirname "$0")
status=0
if [ -x "$hookdir/{CHAINED}" ]; then
    "$hookdir/{CHAINED}" "$@" || status=$?
fi
if [ -f backlog/AGENTS.md ]; then
    if [ -x '{python}' ]; then
        '{python}' -m maildir_backlog where >/dev/null 2>&1
    elif command -v backlog >/dev/null 2>&1; then
        backlog where >/dev/null 2>&1
    fi
fi
exit $status
"""


def hooks_dir(repo: git.Repo) -> Path:
    """Where git looks for hooks. One in the work tree (`core.hooksPath` naming a directory there,
    as husky does) may be a committed symlink: one leading out of the work tree is refused, as
    writing there would write outside the repository (`.git/` and an absolute path outside the
    work tree are the user's own configuration)."""
    where = Path(git.run(repo.toplevel, "rev-parse", "--git-path", "hooks").strip())
    directory = where if where.is_absolute() else repo.toplevel / where
    top = repo.toplevel
    in_tree = directory.is_relative_to(top) and directory.relative_to(top).parts[:1] != (".git",)
    if in_tree and not Path(os.path.realpath(directory)).is_relative_to(os.path.realpath(top)):
        raise BacklogError(
            f"{directory.relative_to(top).as_posix()}: the hooks directory (core.hooksPath) leads out of"
            " the work tree through a symlink; not writing the post-checkout hook there (make it a directory)"
        )
    return directory


def install(repo: git.Repo) -> tuple[list[Step], str]:
    """The hook's installation (or keeping) as steps of the one move protocol, each undone if
    the writer it belongs to fails, and one line saying what they do."""
    directory = hooks_dir(repo)
    path = directory / NAME
    python = sys.executable if "'" not in sys.executable else "python3"
    wanted = script(python).encode()
    current = _hook_bytes(path)
    if current == wanted:
        return [], f"post-checkout hook already installed in {directory}"
    steps: list[Step] = [Dirs(directory)]
    chained = ""
    if current is not None and MARKER.encode() not in current:
        if os.path.lexists(directory / CHAINED):
            raise BacklogError(
                f"{path} and {directory / CHAINED} both exist: merge them by hand, then run `backlog setup --hooks`"
            )
        steps.append(Rename(path, directory / CHAINED))
        current = None
        chained = f" (the existing hook runs first, as {CHAINED})"
    steps += [Write(path, current, wanted), Executable(path)]
    return steps, f"post-checkout hook installed in {directory}{chained}"


def _hook_bytes(path: Path) -> bytes | None:
    """The hook file's bytes; None when there is none. With `core.hooksPath` in the work tree the
    hook may be a committed file: a symlink (to `/dev/zero`, to a FIFO, out of the repository),
    anything but a regular file, or a file past `limits.CONFIG_BYTES` is someone else's hook,
    never read through (b"": it is kept, renamed, and run first like any other)."""
    try:
        return storage.read_task_bytes(path, str(path), limits.CONFIG_BYTES)
    except FileNotFoundError:
        return None
    except BacklogError:
        return b""
