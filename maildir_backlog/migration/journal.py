"""The journal of a running migration, and the recovery of one that was killed.

`write` records, before the first step, what the migration leaves where (`Layout.journal`, in
this worktree's git dir); `execute` removes it after the last step. A running migration holds
`Layout.journal_lock` (a flock: it dies with the process), so a journal whose lock is free was
left by a killed run: `recover` (run by `maintain` and at the start of the next `migrate`)
undoes it when its commit had not landed, or finishes it (the shared copies removed) when it
had. Only what the migration itself wrote is touched; a path changed since is left in place.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from .. import git, mark, storage
from ..change import Change, Dirs, Link, Remove, Restore, Rmdir, Step, Unstage, Write, run
from ..errors import Busy
from ..layout import Layout
from .plan import Plan, show


def _digest(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def _state(path: Path) -> str | None:
    """What is at `path` now: a digest of a file's bytes, `symlink:<target>`, or None."""
    if os.path.islink(path):
        return f"symlink:{os.readlink(path)}"
    try:
        return _digest(path.read_bytes())
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def record(repo: git.Repo, plan: Plan) -> dict[str, Any]:
    """What `plan` leaves where: worktree paths with what ends up there (None: removed), the shared
    copies it makes and removes, the symlinks it replaces, and the HEAD it starts from."""
    layout = Layout.of(repo)
    files: dict[str, str | None] = {}  # work-tree path -> what the migration leaves there (None: removed)
    for path, data in plan.creates:
        files[show(layout, path)] = _digest(data)
    for path, target in plan.links:
        files[show(layout, path)] = f"symlink:{target}"
    for edit in plan.edits:
        files[show(layout, edit.path)] = _digest(edit.new)
    for path, _data in plan.removes:
        files[show(layout, path)] = None
    for move in plan.moves:
        if move.dst_tracked:
            files[show(layout, move.dst)] = _digest(move.data)
        if move.src_tracked:
            files[show(layout, move.src)] = None
    head = git.run(repo.toplevel, "rev-parse", "-q", "--verify", "--end-of-options", "HEAD", check=False).strip()
    prior = mark.raw(layout)
    result: dict[str, Any] = {
        "head": head or None,
        "message": plan.message,
        "backend": plan.project.backend,
        "files": files,
        "shared_new": {str(m.dst): _digest(m.data) for m in plan.moves if not m.dst_tracked and not m.dst_present},
        "shared_old": {str(m.src): _digest(m.data) for m in plan.moves if not m.src_tracked},
        "links": {str(d): os.readlink(d) for d in plan.real_dirs if d.is_symlink()},
    }
    if plan.kind != "flat":  # a backend switch: the clone's backend as it was before
        result["mark"] = None if prior is None else prior.decode("utf-8", "replace")
    return result


def render(repo: git.Repo, plan: Plan) -> bytes:
    """The journal of `plan`, written by the migration's first step (`execute.migration`)."""
    return json.dumps(record(repo, plan)).encode()


def recover(repo: git.Repo, dry_run: bool = False) -> list[str]:
    """Undo a migration killed before its commit, or finish one killed after it.

    Returns one line per recovery, in the self-heal's `path (detail)` form. Only what the
    migration itself left is touched: a path changed since is reported and left in place.
    """
    layout = Layout.of(repo)
    if not layout.journal.exists():
        return []
    try:
        with storage.file_lock(layout.journal_lock, timeout=0, what="a migration"):
            return _recover(repo, layout, dry_run)
    except Busy:  # not killed: running right now
        return [f"{layout.rel(layout.agents)} (a migration is running right now: left in place)"]


def _recover(repo: git.Repo, layout: Layout, dry_run: bool) -> list[str]:
    path, shown = layout.journal, layout.rel(layout.agents)
    try:
        journal = json.loads(path.read_text())
        files: dict[str, str | None] = journal["files"]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError):
        return [f"{path} (the record of an interrupted migration cannot be read: left in place)"]
    what = f"a migration to {journal.get('backend')} was killed"
    landed = False
    if journal.get("head"):
        subjects = git.run(
            repo.toplevel, "log", "--format=%s", "--end-of-options", f"{journal['head']}..HEAD", check=False
        ).splitlines()
        landed = journal.get("message") in subjects
    if dry_run:
        return [
            f"{shown} ({what} {'after' if landed else 'before'} its commit:"
            f" dry run, would {'finish' if landed else 'undo'} it)"
        ]
    left: list[str] = []
    if landed:
        _finish(repo, journal)
        detail = f"{what} after its commit: finished"
    else:
        left = _undo(repo, journal, files)
        detail = f"{what} before its commit: undone, run it again"
    run(Change((Remove(path, None),)), repo)
    if left:
        detail += f"; changed since, left in place: {', '.join(left)}"
    return [f"{shown} ({detail})"]


def _finish(repo: git.Repo, journal: dict[str, Any]) -> None:
    """The commit landed: remove the shared copies it replaced (when still as the migration left them)."""
    shared = journal.get("shared_old", {}).items()
    run(Change(tuple(Remove(Path(src), None) for src, digest in shared if _state(Path(src)) == digest)), repo)


def _undo(repo: git.Repo, journal: dict[str, Any], files: dict[str, str | None]) -> list[str]:
    """No commit: worktree paths back as in HEAD, the copies the migration made removed, the
    symlinks put back. Returns the paths changed since, which are left alone."""
    restore, remove, left = _sorted_out(repo, journal, files)
    steps: list[Step] = [Unstage(tuple(files))]
    steps += [Remove(repo.toplevel / name, None) for name in remove]
    if restore:
        steps.append(Restore(tuple(restore)))  # the tracked files back as in HEAD
    steps += [
        Remove(Path(dst), None) for dst, digest in journal.get("shared_new", {}).items() if _state(Path(dst)) == digest
    ]
    if "mark" in journal:  # the clone's backend as it was before
        before = journal["mark"]
        steps += mark_steps(Layout.of(repo), before.encode() if isinstance(before, str) else None)
    for link, target in journal.get("links", {}).items():
        here = Path(link)
        if here.is_dir() and not here.is_symlink() and not os.listdir(here):
            steps += [Rmdir(here), Link(here, target)]
    run(Change(tuple(steps)), repo)  # nothing tracked changes: the index goes back as in HEAD
    return left


def _sorted_out(
    repo: git.Repo, journal: dict[str, Any], files: dict[str, str | None]
) -> tuple[list[str], list[str], list[str]]:
    """The migration's worktree paths sorted by what undoing it does to each: restored as in HEAD
    (untouched since, or gone), removed (a copy it made, untouched since), or left (changed since)."""
    in_head: set[str] = set()
    if files and journal.get("head"):
        listed = git.run(repo.toplevel, "ls-tree", "-r", "-z", "--name-only", "HEAD", "--", *files)
        in_head = set(listed.split("\0"))
    restore: list[str] = []
    remove: list[str] = []
    left: list[str] = []
    for name, digest in sorted(files.items()):
        now = _state(repo.toplevel / name)
        if name in in_head:
            head = _digest(git.blob(repo, f"HEAD:{name}"))
            if now is None or now == digest:
                restore.append(name)
            elif now != head:
                left.append(name)
        elif now is not None:
            (remove if now == digest else left).append(name)
    return restore, remove, left


def mark_steps(layout: Layout, data: bytes | None) -> list[Step]:
    """The clone's backend mark set to `data` (None: removed, and its directory when that empties
    it, as if the clone had never migrated); undone with the change."""
    path, prior = layout.backend_mark, mark.raw(layout)
    if data is not None:
        return [Dirs(path.parent), Write(path, prior, data)]
    if prior is None:
        return []
    alone = path.parent.is_dir() and os.listdir(path.parent) == [path.name]
    return [Write(path, prior, None), *([Rmdir(path.parent)] if alone else [])]
