"""Running a plan: every step in one `storage.Transaction`, one commit, the shared copies last.

The journal is written before the first step and removed after the last; between the two, a
SIGKILL leaves it for `journal.recover`. Any other failure before the commit lands (a failing
pre-commit hook, a name that appeared meanwhile) rolls every step back, newest first, puts the
index entries of the migration's paths back as in HEAD and removes the journal.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from .. import git, gitcommit, mark, storage
from ..backend import SharedBackend
from ..errors import BacklogError, Conflict
from ..layout import Layout
from . import journal
from .plan import Plan, same_file, show


def execute(repo: git.Repo, plan: Plan) -> list[str]:
    """Run the plan: new copies, edits, removals, one commit; undo everything if that fails.

    Returns the layout findings of the self-heal that follows a switch to maildir-shared.
    """
    layout = Layout.of(repo)
    paths: list[str] = []  # what the commit holds, relative to the worktree
    journal.write(repo, plan)
    with storage.Transaction() as tx:
        tx.on_undo(lambda: storage.remove_file(layout.journal))  # undone last: nothing is left to recover
        tx.on_undo(lambda: gitcommit.unstage(repo, paths))  # the index entries back as in HEAD
        _steps(tx, layout, plan, paths)
        if plan.kind != "flat" and repo.branch is not None:
            # the clone's backend, before the commit: from here on a worktree that still declares
            # the old one moves nothing until it merges this branch (SPEC §7.11)
            prior = mark.raw(layout)
            mark.write(layout, mark.render(plan.project.backend, repo.branch))
            tx.on_undo(lambda: mark.write(layout, prior))
        storage.crash_point("migrate-before-commit")
        gitcommit.commit_paths(repo, paths, plan.message)
        storage.crash_point("migrate-committed")
    for move in plan.moves:
        if not move.src_tracked:
            storage.remove_file(move.src)  # the shared copy goes last, after the tracked one is committed
    storage.crash_point("migrate-shared-removed")
    storage.remove_file(layout.journal)
    if plan.project.backend == "maildir-shared":
        try:
            return SharedBackend(repo, plan.project).heal()
        except BacklogError as exc:
            return [f"could not finish the symlinks ({exc.message}): any backlog verb here will retry"]
    return []


def _steps(tx: storage.Transaction, layout: Layout, plan: Plan, paths: list[str]) -> None:
    """Every file step of the plan, in order: new copies first, old copies last (SPEC §7.7)."""
    rel = functools.partial(show, layout)
    for d in plan.real_dirs:
        if d.is_symlink():
            tx.unlink_symlink(d)
        tx.mkdirs(d)
    storage.crash_point("migrate-dirs")
    for path, data in plan.creates:
        _create(tx, path, data, rel(path))
        paths.append(rel(path))
    for move in plan.moves:
        if not move.dst_present:
            _create(tx, move.dst, move.data, rel(move.dst))
        elif not same_file(move.dst, move.data):
            raise Conflict(f"{rel(move.dst)} changed meanwhile; nothing migrated")
        if move.dst_tracked:
            paths.append(rel(move.dst))
    storage.crash_point("migrate-after-copy")
    for path, target in plan.links:
        tx.symlink(path, target)
        paths.append(rel(path))
    for edit in plan.edits:
        tx.write(edit.path, edit.old, edit.new)
        paths.append(rel(edit.path))
    storage.crash_point("migrate-edited")
    for path, data in plan.removes:
        tx.remove(path, data)
        paths.append(rel(path))
    for move in plan.moves:
        if move.src_tracked:
            tx.remove(move.src, move.data)
            paths.append(rel(move.src))
    for d in plan.drop_dirs:
        try:
            tx.rmdir(d)
        except OSError:
            left = ", ".join(sorted(os.listdir(d))[:3]) if d.is_dir() else "?"
            raise BacklogError(
                f"{rel(d)} still holds files the migration does not move ({left}); nothing migrated"
            ) from None


def _create(tx: storage.Transaction, path: Path, data: bytes, shown: str) -> None:
    """Exclusive create (its missing directories too): a name taken meanwhile refuses."""
    tx.mkdirs(path.parent)
    if not tx.create(path, data):
        raise BacklogError(f"name clash: {shown} appeared meanwhile; nothing migrated")
