"""Bucket 8, LAYOUT: the self-heal's findings (and a killed migration's recovery), invalid task
files, stray entries in the shared root, temporary files of crashed writes, and a stale git
`index.lock` (reported, never removed: see `_stale_git_lock`; but one a commit of the tool's killed
midway left is finished or let go first: `killed_commits`).

Temporary files (`.tmp-*`, see `storage`) are held under an flock by their writer for as long
as they exist, and flocks die with their process: a temporary file nobody holds is a dead
writer's and is removed at once (`storage.remove_dead_temporary` takes the flock first, so a
write in progress is never touched, whatever its age). Only regular files and the layout
heal's temporary symlinks are considered; anything else by that name is left alone."""

from __future__ import annotations

import os
import stat
from datetime import timedelta
from pathlib import Path

from .. import attributes, change, storage
from ..clock import format_duration, now_utc
from ..layout import BOOKKEEPING, LEDGER, LOCKS, pile_rel
from ..task import is_slug
from .findings import LAYOUT
from .sweep import Sweep


def report(sw: Sweep, invalid: list[tuple[str, str]], unreadable: list[tuple[str, str]]) -> None:
    heal = sw.backend.heal(dry_run=True) if sw.dry_run else list(sw.ctx.heal_findings)
    heal = sw.recovered + heal  # a migration killed midway, undone or finished (migration.recover)
    for line in heal:
        path, sep, detail = line.partition(" (")
        detail = detail[:-1] if sep and detail.endswith(")") else "layout problem"
        left = "left in place" in detail or "nothing overwritten" in detail
        if sw.dry_run:
            detail = f"dry run, nothing changed: {detail}"
        sw.add(LAYOUT, path, detail, fixed=not left)
    for path, error in invalid:
        sw.add(LAYOUT, path, f"invalid task file: {error.removeprefix(path + ': ')}")
    for path, line in unreadable:  # shown as-is; the rest of the log is read around it
        sw.add(LAYOUT, path, f"a log line this tool cannot read, shown as-is: {line.strip()!r}")
    if sw.shared_backend:
        _strays(sw)
    _temporaries(sw)
    _stale_git_lock(sw)


def killed_commits(sw: Sweep) -> None:
    """A commit of the tool's killed while it held git's index lock (`gitplumbed`): finished or let go
    before anything reads the index, said as a fixed finding (a dry run: what it would do)."""
    for said in change.killed_commits(sw.ctx.repo, sw.dry_run):
        sw.add(LAYOUT, str(sw.layout.git_index_lock), said, fixed=not sw.dry_run)


def line_endings(sw: Sweep) -> None:
    """`backlog/.gitattributes` in place (and committed); then, once per worktree, each tracked file
    under backlog/ git had checked out with CRLF before the rule given its committed bytes back
    (`attributes`): before any repair compares a work-tree copy with git's blob of it."""
    repo, layout = sw.ctx.repo, sw.layout
    kept = attributes.ensure(repo, layout, sw.dry_run)
    if kept.detail is not None:
        sw.add(LAYOUT, layout.rel(layout.gitattributes), kept.detail, fixed=kept.fixed)
    if not kept.ruled or attributes.checked(layout):
        return  # no rule: conversions are the user's wish; checked: none since
    for slug, rel, here, blob in attributes.converted(repo, layout):
        if sw.dry_run or attributes.restore(repo, layout, slug, rel, here, blob):
            done = sw.would("given its committed bytes back", "give it its committed bytes back")
            detail = f"checked out with CRLF line endings by git: {done}"
            sw.add(LAYOUT, rel, detail, slug=slug, fixed=True)
    if not sw.dry_run:
        attributes.mark_checked(repo, layout)


# git holds `index.lock` for the length of one command; one older than this was most likely left
# by a git process that was killed (every later commit then fails)
STALE_GIT_LOCK = timedelta(minutes=10)


def _stale_git_lock(sw: Sweep) -> None:
    """git's `index.lock` of this worktree, left for longer than any git command takes: reported
    with its age and how to remove it, never removed here (git takes it with O_EXCL and no
    flock, so nothing shows whether a slow git command still holds it)."""
    path = sw.layout.git_index_lock
    try:
        mtime = os.lstat(path).st_mtime
    except FileNotFoundError:
        return
    if sw.dry_run and change.killed_commits(sw.ctx.repo, dry_run=True):
        return  # a killed commit's: said by `killed_commits`
    age = now_utc().timestamp() - mtime
    if age < STALE_GIT_LOCK.total_seconds():
        return
    detail = (
        f"git's index lock, {format_duration(timedelta(seconds=int(age)))} old: every commit in this worktree fails"
        f" while it exists; if no git command is running here, remove it (`rm {path}`)"
    )
    sw.add(LAYOUT, str(path), detail)


def _names(directory: Path) -> list[str]:
    try:
        return sorted(os.listdir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return []


def _strays(sw: Sweep) -> None:
    layout = sw.layout
    allowed = set(sw.pipeline.flying) | set(BOOKKEEPING)
    for name in _names(layout.shared_root):
        path = layout.shared_root / name
        if storage.is_temporary(name):
            continue  # _temporaries
        if name not in allowed or not (path.is_dir() and not path.is_symlink()):
            detail = f"stray entry in the shared root (only the in-flight piles, {LOCKS} and {LEDGER} belong there)"
            sw.add(LAYOUT, str(path), f"{detail}: left in place")
    for pile in sw.pipeline.flying:
        for name in _names(layout.shared_pile(pile)):
            if storage.is_temporary(name):
                continue
            if name.endswith(".md") and not name.startswith("."):
                continue  # a task file (or an invalid one: reported as such)
            detail = "stray entry in a shared pile (not a <slug>.md task file): left in place"
            sw.add(LAYOUT, f"{pile_rel(pile)}/{name}", detail)
    for name in _names(layout.ledger):
        if not storage.is_temporary(name) and not is_slug(name):
            sw.add(LAYOUT, str(layout.ledger / name), "stray entry in the ledger: left in place")


def _temporaries(sw: Sweep) -> None:
    """`.tmp-*` files of crashed writes: removed at once (a write in progress holds its flock)."""
    layout = sw.layout
    places: list[tuple[Path, str]] = [
        (layout.shared_root, str(layout.shared_root)),
        (layout.ledger, str(layout.ledger)),
        (layout.root, layout.rel(layout.root)),
    ]
    places += [(sw.backend.pile_dir(pile), pile_rel(pile)) for pile in sw.pipeline.all_piles]
    seen: set[Path] = set()
    for directory, shown in places:
        if directory in seen:
            continue
        seen.add(directory)
        for name in _names(directory):
            if not storage.is_temporary(name):
                continue
            path = directory / name
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:
                continue
            if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
                continue
            dead = storage.dead_temporary(path) if sw.dry_run else storage.remove_dead_temporary(path)
            if dead:
                detail = f"temporary file of a crashed write: {sw.would('removed', 'remove it')}"
                sw.add(LAYOUT, f"{shown}/{name}", detail, fixed=True)
