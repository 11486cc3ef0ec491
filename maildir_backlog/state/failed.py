"""The read model's questions about a failed/ copy (SPEC §5 `retry`): which one `retry` reopens,
and which one a later `retry` superseded. Part of `state.Model` (the class commands ask).

Each lookup and the read of the copy it found go together through `relisted`: a copy moved
between the two (a racing retry, a user's git, another worktree's janitor) is looked up again,
and the answer says where the task is now, never that a file is missing.
"""

from __future__ import annotations

from ..backend import Located
from ..backend.base import relisted
from ..errors import BacklogError, Ended, LeftFlight
from ..lifecycle import ended_in, stale_copy, where
from ..logline import read_log
from ..project import FAILED
from .one import OneTask, Truth


class FailedCopies(OneTask):
    """`OneTask`'s questions about failed/ copies: `retryable`, `superseded_here`."""

    def superseded_here(self, slug: str) -> tuple[Located | None, bytes | None]:
        """This branch's failed/ copy of `slug` (and its bytes) when it is the only copy here and
        the intake branch's todo/ copy reopened it since (`_reopened`); (None, None) otherwise. A
        copy gone before it is read (a user's git, a racing worktree) is looked up again, and
        found gone: (None, None)."""
        return relisted(slug, lambda _first: self._superseded_here(slug))

    def _superseded_here(self, slug: str) -> tuple[Located | None, bytes | None]:
        here = self.ctx.backend.locate(slug)
        if len(here) != 1 or here[0].pile != FAILED or self._reopened(here[0]) is None:
            return None, None
        return here[0], self.ctx.backend.read(here[0])

    def retryable(self, slug: str) -> tuple[Located, bytes]:
        """The failed copy `retry` reopens: this worktree's, or (none here, or only a stale todo copy)
        the one on the branch where the ledger says it failed; a refusal saying why otherwise. A copy
        gone before it is read (a racing retry, a merge) is looked up again (`relisted`)."""
        return relisted(slug, lambda _first: self._retryable(slug))

    def _retryable(self, slug: str) -> tuple[Located, bytes]:
        ctx = self.ctx
        truth = self.task(slug)
        locs = self._unstale(list(truth.copies))  # (a failed/ copy the ledger says retried too: its retry is refused)
        elsewhere = self._failed_elsewhere(truth, slug, locs)
        if elsewhere is not None:
            return elsewhere
        if not locs:
            settled = truth.settled
            if settled is not None:
                raise LeftFlight(
                    f"no task {slug} in failed/ ({settled.outcome} on branch {settled.branch})",
                    ended=Ended(settled.outcome, settled.branch, settled.ts),
                )
            raise self.not_found(slug, f"no task {slug} in failed/")
        loc = locs[0]
        if len(locs) > 1 or loc.pile != FAILED:
            if any(other.pile == "done" for other in locs):
                done = next(other for other in locs if other.pile == "done")
                raise LeftFlight(
                    f"{slug} is in done/, which is terminal: add a new task that names it", ended=ended_in(ctx, done)
                )
            flying = truth.flying(ctx)
            if flying and any(other.pile == FAILED for other in locs):
                raise BacklogError(f"{slug} is in flight ({where(flying)}): this failed/ copy is stale; retry refused")
            raise BacklogError(f"{slug} is in {where(locs)}, not failed/: only failed tasks can be retried")
        data = ctx.backend.read(loc)
        known_entry = truth.settled
        if known_entry is not None and not known_entry.allows_retry_of(
            read_log(data, ctx.backend.display(loc.pile, slug))
        ):
            raise stale_copy(known_entry)
        return loc, data

    def _failed_elsewhere(self, truth: Truth, slug: str, locs: list[Located]) -> tuple[Located, bytes] | None:
        """`retryable`'s copy from elsewhere: the branch where the ledger says it failed (no copy here,
        or only a stale todo copy), else another clone (none here in flight or done/; a failed/ copy
        here gives way to a later failure the remote records: retried and failed again since)."""
        from .. import queue

        ctx = self.ctx
        if not locs or (all(other.pile == "todo" for other in locs) and queue.stale_here(ctx, slug)):
            found = queue.settled_copy(ctx, slug)  # failed on another branch: its copy there
            if found is not None and found[1] and found[0].pile == FAILED:
                if not found[2].allows_retry_of(read_log(found[1], str(found[0].path))):
                    raise stale_copy(found[2])
                return found[0], found[1]
        if truth.flying(ctx) or any(other.pile == "done" for other in locs):
            return None
        from .. import crosstask

        if not (failed := [other for other in locs if other.pile == FAILED]):
            return crosstask.failed_copy(ctx, slug)  # failed on another clone (SPEC §8)
        return crosstask.later_failure(ctx, slug, ctx.backend.read(failed[0])) if len(locs) == 1 else None
