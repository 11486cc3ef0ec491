"""Bucket 3, a rename killed before its commit: the files moved, the commit never made.

`renaming.rename_task` writes the tombstone, moves the copies, rewrites the dependents, then
commits; killed between the last two, the worktree holds the renamed task uncommitted (the old
name deleted, the new one untracked or staged). The rename was decided and its tombstone is in
the ledger, so the repair finishes it: one commit of exactly those paths, under both names'
locks, re-checked there."""

from __future__ import annotations

from ..errors import BacklogError, Busy, Conflict
from ..renaming import finish, unfinished
from .findings import DUPLICATE
from .sweep import Sweep


def renames(sw: Sweep) -> None:
    for pending in unfinished(sw.backend):
        first, second = sorted((pending.old, pending.new))
        try:
            with sw.backend.lock(first, timeout=0 if sw.dry_run else 30.0), sw.backend.lock(second):
                if pending not in unfinished(sw.backend):
                    continue  # finished (or undone) meanwhile
                if not sw.dry_run:
                    finish(sw.backend, pending)
        except (Conflict, Busy):
            continue  # the rename is running right now: not a crash
        except BacklogError as exc:
            sw.add(
                DUPLICATE,
                pending.paths[0],
                f"renamed but never committed: could not commit: {exc.message}",
                pending.old,
                error=True,
            )
            continue
        detail = (
            f"renamed to {pending.new} but never committed (a rename killed before its commit):"
            f" {sw.would('committed', 'commit it')}"
        )
        sw.add(DUPLICATE, pending.paths[0], detail, pending.old, fixed=True)
