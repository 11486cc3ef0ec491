"""Renaming a task: the one kernel step behind `backlog rename` (SPEC §7.11).

A rename moves a task under a new name in every pile that holds it and rewrites every
dependency naming it, which no single `Backend.apply` move expresses. So this step does what
`apply` does for a move, in the same order, and nothing else may rename a task: the ledger first
(the tombstone `renamed … to=<new>`: from then on no copy of the old name is claimable, and a
crash leaves the task blocked under its old name, never claimable under both), then the new
copies (exclusive create), the old ones removed, the dependents rewritten, one commit of the
tracked paths; any failure before the commit lands undoes every step, the tombstone last.
The remote is kept in step by refusal: a claimable name cannot be renamed while a remote is
declared, since other clones could still claim it under the old one.

Callers hold both names' locks and have refused what cannot keep the guarantees (a stale copy,
another holder's claim).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from . import git, storage
from .backend import Backend, Located
from .change import Change, Crash, Create, Remove, Settle, Step, Track, Unstage, Write
from .errors import BacklogError
from .layout import parse_task_rel, pile_rel
from .ledger import Settled
from .logline import frontmatter_end

Copy = tuple[Located, bytes]  # a copy of a task, with the bytes read there


def rewrite_dependency(data: bytes, old: str, new: str) -> bytes:
    """`data` with `old` replaced by `new` as a whole name inside the frontmatter block only."""
    end = frontmatter_end(data)
    if end <= 0:
        return data
    pattern = re.compile(rb"(?<![A-Za-z0-9._-])" + re.escape(old.encode()) + rb"(?![A-Za-z0-9._-])")
    return pattern.sub(new.encode(), data[:end]) + data[end:]


def read_or_none(backend: Backend, loc: Located) -> bytes | None:
    """The bytes of a copy, or None when it cannot be read (gone, too large, not a file)."""
    try:
        return backend.read(loc)
    except (OSError, BacklogError):
        return None


def rename_task(backend: Backend, old: str, new: str, copies: list[Copy], tombstone: Settled | None) -> list[str]:
    """Give the task `old` (its `copies`: where, and the bytes read there) the name `new`; returns
    the dependents rewritten (as displayed). `tombstone`: the ledger entry for the old name, None
    for a name that is no slug (from the older bash tool: never claimable, so it needs none)."""
    backend.refuse_if_migrated()
    if backend.remote is not None and tombstone is not None:
        raise BacklogError(f"{old} cannot be renamed while remote {backend.remote.name} is declared")
    change, rewritten = renaming(backend, old, new, copies, tombstone)
    backend.commit(change)
    return rewritten


def renaming(
    backend: Backend, old: str, new: str, copies: list[Copy], tombstone: Settled | None
) -> tuple[Change, list[str]]:
    """The change a rename makes (the tombstone, the new copies, the old ones removed, the
    dependents rewritten) and the dependents it rewrites, as displayed."""
    steps: list[Step] = []
    rewritten: list[str] = []
    if tombstone is not None:
        steps += [Settle(tombstone), Crash("rename:tombstone")]

    def clash(pile: str) -> Callable[[], None]:
        def refuse() -> None:
            raise BacklogError(f"{backend.display(pile, new)} appeared meanwhile; nothing renamed")

        return refuse

    for loc, data in copies:
        dst = backend.task_path(loc.pile, new)
        tracked = (None, None) if loc.shared else (backend.rel(dst), backend.rel(loc.path))
        steps.append(Create(dst, data, tracked[0], clash(loc.pile)))
        steps.append(Remove(loc.path, data, tracked[1]))
        edited = rewrite_dependency(data, old, new)
        if edited != data:  # the task's own frontmatter names it
            steps.append(Write(dst, data, edited, tracked[0]))
            rewritten.append(backend.display(loc.pile, new))
    _rewrite_dependents(backend, old, new, steps, rewritten)
    return Change(tuple(steps), f"rename({old} → {new})"), rewritten


def _rewrite_dependents(backend: Backend, old: str, new: str, steps: list[Step], rewritten: list[str]) -> None:
    """The writes of every other task whose dependencies name `old` (to name `new`), added to
    `steps`; each such task, as displayed, to `rewritten`. A file that cannot be read is skipped."""
    for pile in backend.pipeline.all_piles:
        for slug in backend.slugs(pile):
            if slug == old:
                continue  # moved by the rename itself
            path = backend.task_path(pile, slug)
            try:
                data = storage.read_task_bytes(path)
            except (OSError, BacklogError):
                continue
            edited = rewrite_dependency(data, old, new)
            if edited != data:
                steps.append(Write(path, data, edited, None if backend.is_shared(pile) else backend.rel(path)))
                rewritten.append(backend.display(pile, slug))


@dataclass(frozen=True)
class Unfinished:
    """A rename killed after its files moved and before its commit (crash point `git:staged`):
    `paths` are the tracked paths the commit would have held."""

    old: str
    new: str
    paths: tuple[str, ...]


def unfinished(backend: Backend) -> list[Unfinished]:
    """Every rename of this worktree's tracked piles left uncommitted: in one pile, a task file
    deleted since HEAD while a file of another name, absent from HEAD, holds exactly the deleted
    one's committed bytes; with the dependents whose only uncommitted change is that rewrite.
    One `git status` when nothing is pending."""
    tracked = [pile_rel(p) for p in backend.pipeline.all_piles if not backend.is_shared(p)]
    codes = git.status_codes(backend.repo, *tracked)
    gone = [rel for rel, code in codes.items() if "D" in code]
    if not gone:
        return []
    fresh = [rel for rel, code in codes.items() if code == "??" or code.startswith("A")]
    found: list[Unfinished] = []
    for rel in gone:
        was = parse_task_rel(rel)
        committed = git.blob(backend.repo, f"HEAD:{rel}")
        if was is None or committed is None:
            continue
        for other in fresh:
            now = parse_task_rel(other)
            if now is None or now[0] != was[0] or _bytes(backend, other) != committed:
                continue
            paths = [rel, other] + [
                dep for dep, code in codes.items() if "M" in code and _rewritten_only(backend, dep, was[1], now[1])
            ]
            found.append(Unfinished(was[1], now[1], tuple(sorted(set(paths)))))
            break
    return found


def finish(backend: Backend, pending: Unfinished) -> None:
    """Commit what a killed rename left on disk (its tombstone, if any, is already in the ledger)."""
    gone = tuple(rel for rel in pending.paths if git.blob(backend.repo, f":{rel}") is None)
    steps: tuple[Step, ...] = (Unstage(gone),) if gone else ()  # `git add -A` refuses a path gone from the index
    backend.commit(Change((*steps, Track(pending.paths)), f"rename({pending.old} → {pending.new})"))


def _bytes(backend: Backend, rel: str) -> bytes | None:
    try:
        return storage.read_task_bytes(backend.repo.toplevel / rel)
    except (OSError, BacklogError):
        return None


def _rewritten_only(backend: Backend, rel: str, old: str, new: str) -> bool:
    committed = git.blob(backend.repo, f"HEAD:{rel}")
    return committed is not None and rewrite_dependency(committed, old, new) == _bytes(backend, rel) != committed
