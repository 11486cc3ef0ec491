"""Running a plan: every step in one `storage.Transaction`, one commit, the shared copies last.

The journal is written before the first step and removed after the last; between the two, a
SIGKILL leaves it for `journal.recover`. Any other failure before the commit lands (a failing
pre-commit hook, a name that appeared meanwhile) rolls every step back, newest first, puts the
index entries of the migration's paths back as in HEAD and removes the journal.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path

from .. import git, mark
from ..backend import open_backend
from ..change import Change, Crash, Create, Dirs, Link, Remove, Rmdir, Step, Unlink, Write, run
from ..errors import BacklogError, Conflict
from ..layout import Layout
from . import journal
from .plan import Plan, same_file, show


def execute(repo: git.Repo, plan: Plan) -> list[str]:
    """Run the plan: new copies, edits, removals, one commit; undo everything if that fails.

    Returns the layout findings of the self-heal that follows a switch to maildir-shared.
    """
    run(migration(repo, Layout.of(repo), plan), repo)
    try:
        return open_backend(repo, plan.project).heal()  # maildir-git has no layout to heal: []
    except BacklogError as exc:
        return [f"could not finish the symlinks ({exc.message}): any backlog verb here will retry"]


def migration(repo: git.Repo, layout: Layout, plan: Plan) -> Change:
    """The plan as one change: every file step in order (new copies first, old copies last: SPEC
    §7.7), the clone's backend mark, one commit; after it the shared copies and the journal go."""
    rel = functools.partial(show, layout)
    steps: list[Step] = [Write(layout.journal, None, journal.render(repo, plan))]  # first made, last undone
    for d in plan.real_dirs:
        if d.is_symlink():
            steps.append(Unlink(d))
        steps.append(Dirs(d))
    steps.append(Crash("migrate-dirs"))
    for path, data in plan.creates:
        steps += _create(path, data, rel(path), rel(path))
    for move in plan.moves:
        tracked = rel(move.dst) if move.dst_tracked else None
        if not move.dst_present:
            steps += _create(move.dst, move.data, rel(move.dst), tracked)
        else:
            steps.append(Create(move.dst, move.data, tracked, functools.partial(_same, move.dst, move.data, rel)))
    steps.append(Crash("migrate-after-copy"))
    steps += [Link(path, target, rel(path)) for path, target in plan.links]
    steps += [Write(edit.path, edit.old, edit.new, rel(edit.path)) for edit in plan.edits]
    steps.append(Crash("migrate-edited"))
    steps += [Remove(path, data, rel(path)) for path, data in plan.removes]
    steps += [Remove(move.src, move.data, rel(move.src)) for move in plan.moves if move.src_tracked]
    steps += [Rmdir(d, functools.partial(_not_empty, rel)) for d in plan.drop_dirs]
    if plan.kind != "flat" and repo.branch is not None:
        # the clone's backend, before the commit: from here on a worktree that still declares
        # the old one moves nothing until it merges this branch (SPEC §7.11)
        steps += journal.mark_steps(layout, mark.render(plan.project.backend, repo.branch))
    steps.append(Crash("migrate-before-commit"))
    # the shared copies go last, after the tracked ones are committed; the journal after them
    after: list[Step] = [Crash("migrate-committed")]
    after += [Remove(move.src, None) for move in plan.moves if not move.src_tracked]
    after += [Crash("migrate-shared-removed"), Remove(layout.journal, None)]
    return Change(tuple(steps), plan.message, after=tuple(after), restore_index=True)


def _create(path: Path, data: bytes, shown: str, tracked: str | None) -> list[Step]:
    """Exclusive create (its missing directories too): a name taken meanwhile refuses."""

    def clash() -> None:
        raise BacklogError(f"name clash: {shown} appeared meanwhile; nothing migrated")

    return [Dirs(path.parent), Create(path, data, tracked, clash)]


def _same(path: Path, data: bytes, rel: Callable[[Path], str]) -> None:
    """A destination the plan found present must still hold exactly the plan's bytes."""
    if not same_file(path, data):
        raise Conflict(f"{rel(path)} changed meanwhile; nothing migrated")


def _not_empty(rel: Callable[[Path], str], d: Path) -> BacklogError:
    left = ", ".join(sorted(os.listdir(d))[:3]) if d.is_dir() else "?"
    return BacklogError(f"{rel(d)} still holds files the migration does not move ({left}); nothing migrated")
