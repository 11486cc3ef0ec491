"""`backlog rename OLD NEW`: give a task a new slug everywhere it lives, and in every dependency
that names it, in one backlog-only commit.

The road in from the older bash tool: it allowed names this tool refuses (`Fix_Login-plan.md`,
`auth flow-plan.md`). OLD is therefore any existing task file name (no `/`, no `..`), NEW must be
a valid slug that no pile holds yet. A task in flight is renamed in the shared root too, under the
locks of both names. Dependencies are rewritten only inside each task's frontmatter block.
"""

from __future__ import annotations

import os
import re

from .. import git, storage
from ..backend import Located
from ..context import Context, Result
from ..errors import BacklogError, InvalidInput, NotFound
from ..layout import TASK_SUFFIX
from ..lifecycle import where
from ..task import frontmatter_end, validate_slug


def _old_name(name: str) -> str:
    if not name or "/" in name or "\0" in name or name in (".", "..") or ".." in name or name.startswith("."):
        raise InvalidInput(f"invalid task name {name!r}: a file name in a pile, without '/' or '..'")
    return name.removesuffix(TASK_SUFFIX)


def _find(ctx: Context, name: str) -> list[Located]:
    found = []
    for pile in ctx.pipeline.all_piles:
        path = ctx.backend.pile_dir(pile) / f"{name}{TASK_SUFFIX}"
        if os.path.lexists(path):
            found.append(Located(name, pile, path, ctx.backend.is_shared(pile)))
    return found


def rewrite_dependency(data: bytes, old: str, new: str) -> bytes:
    """`data` with `old` replaced by `new` as a whole name inside the frontmatter block only."""
    end = frontmatter_end(data)
    if end <= 0:
        return data
    pattern = re.compile(rb"(?<![A-Za-z0-9._-])" + re.escape(old.encode()) + rb"(?![A-Za-z0-9._-])")
    return pattern.sub(new.encode(), data[:end]) + data[end:]


def rename(ctx: Context, old: str, new: str) -> Result:
    old = _old_name(old)
    validate_slug(new)
    if old == new:
        raise InvalidInput(f"{new} is already its name")
    first, second = sorted((old, new))
    with ctx.backend.lock(first), ctx.backend.lock(second):
        places = _find(ctx, old)
        if not places:
            raise NotFound(f"no task {old} in any pile")
        taken = ctx.backend.locate(new)
        if taken or ctx.backend.settled(new) is not None:
            raise BacklogError(f"{new} already exists ({where(taken) or 'in the ledger'}): choose another name")
        tracked: list[str] = []
        rewritten: list[str] = []
        with storage.Transaction() as tx:
            for loc in places:
                data = storage.read_task_bytes(loc.path, ctx.backend.display(loc.pile, old))
                dst = ctx.backend.task_path(loc.pile, new)
                if not tx.create(dst, data):
                    raise BacklogError(f"{ctx.backend.display(loc.pile, new)} appeared meanwhile; nothing renamed")
                tx.remove(loc.path, data)
                if not loc.shared:
                    tracked += [ctx.backend.rel(loc.path), ctx.backend.rel(dst)]
            for pile in ctx.pipeline.all_piles:
                for slug in ctx.backend.slugs(pile):
                    path = ctx.backend.task_path(pile, slug)
                    try:
                        data = storage.read_task_bytes(path)
                    except (OSError, BacklogError):
                        continue
                    edited = rewrite_dependency(data, old, new)
                    if edited != data:
                        tx.write(path, data, edited)
                        rewritten.append(ctx.backend.display(pile, slug))
                        if not ctx.backend.is_shared(pile):
                            tracked.append(ctx.backend.rel(path))
            if tracked:
                git.commit_paths(ctx.repo, sorted(set(tracked)), f"rename({old} → {new})")
    shown = [ctx.backend.display(loc.pile, new) for loc in places]
    lines = [f"renamed {ctx.backend.display(loc.pile, old)} → {ctx.backend.display(loc.pile, new)}" for loc in places]
    lines += [f"dependency rewritten in {path}" for path in rewritten]
    return Result({"old": old, "new": new, "paths": shown, "dependents": rewritten}, lines)
