"""The read model's questions about one task (SPEC §4, §5 *Ownership*, §8): where a slug is, which
copy a verb acts on, and what became of it. Part of `state.Model` (the class commands ask).

What a task *is* here (`Truth`): its live copies (a failed/ copy that a later `retry`
superseded is not one: the task lives on in todo/ of the intake branch), and the ledger's latest
word on it. Everything a verb asks of one slug is a function of that and of the context.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from .. import lifecycle
from ..backend import Located
from ..backend.base import live_given, relisted
from ..clock import format_ts
from ..context import Context, claimer_id
from ..errors import BacklogError, Ended, Held, LeftFlight, NotFound
from ..header import Titles
from ..layout import TASK_SUFFIX
from ..ledger import RENAMED, Settled
from ..lifecycle import claim_in, ended_in, holder, holder_of, is_holder, stale_copy, where
from ..logline import LogEntry, later, read_log
from ..project import FAILED, nearest_slug
from ..task import Task
from ..typed import TYPE_CHECKING, NamedTuple
from ..worktrees import intake_to_read

if TYPE_CHECKING:
    from ..crosstask import Seen
    from ..intake import Brief


class Truth(NamedTuple):
    """What the clone knows of one slug (or, for `rename`, of one file name), gathered once."""

    slug: str
    copies: tuple[Located, ...]  # every copy in this worktree's piles and the shared ones
    settled: Settled | None  # the ledger's latest word on it, from any branch of the clone

    @property
    def here(self) -> tuple[Located, ...]:
        """The live copies: less a failed/ copy a later `retry` superseded (it lives on in todo/)."""
        return tuple(live_given(list(self.copies), self.settled))

    def flying(self, ctx: Context) -> list[Located]:
        return [loc for loc in self.here if ctx.pipeline.is_in_flight(loc.pile)]


class Shown(NamedTuple):
    """The copy `show` describes: this worktree's, the intake branch's (read from git), or where it settled."""

    loc: Located
    data: bytes | None
    settled: Settled | None
    remote: Seen  # what the remote holds of it (SPEC §8)
    superseded: Located | None = None  # this worktree's failed/ copy, when a later `retry` reopened the task
    text: bytes = b""  # the copy's bytes, as read with it (`data`, or this worktree's file)


class OneTask:
    """The questions a verb asks of one slug, each answered from `Truth` and the context."""

    ctx: Context

    def task(self, slug: str) -> Truth:
        """The truth of `slug`: located once, read from the ledger once."""
        return Truth(slug, tuple(self.ctx.backend.locate(slug)), self.ctx.backend.settled(slug))

    def named(self, name: str) -> tuple[Truth, list[tuple[Located, bytes]]]:
        """Every pile's file called `name` (a slug, or a name only the bash tool allowed), each with
        its bytes: `rename`'s. A copy gone before it is read is looked up again (`relisted`)."""
        return relisted(name, lambda _first: self._named(name))

    def _named(self, name: str) -> tuple[Truth, list[tuple[Located, bytes]]]:
        ctx, found = self.ctx, []
        for pile_name in ctx.pipeline.all_piles:
            path = ctx.backend.pile_dir(pile_name) / f"{name}{TASK_SUFFIX}"
            if os.path.lexists(path):
                found.append(Located(name, pile_name, path, ctx.backend.is_shared(pile_name)))
        return Truth(name, tuple(found), ctx.backend.settled(name)), [(loc, ctx.backend.read(loc)) for loc in found]

    def known(self, whole: bool = False) -> None:
        """Before a claim or a rename: every branch's settled tasks are in the ledger (SPEC §4); read
        once per clone, then what changed (`whole`: the janitor's pass reads every branch again)."""
        from .. import history  # a claim's or a rename's: not every call's

        history.backfill(self.ctx.repo, self.ctx.project, first_only=not whole)

    def one(self, slug: str, truth: Truth | None = None) -> Located:
        """The one place of `slug`. An in-flight copy wins over tracked ones: in maildir-shared a
        branch made before the claim still holds the task in its todo/, which is expected. Nowhere
        here: where it settled (LeftFlight), else NotFound."""
        ctx = self.ctx
        truth = truth or self.task(slug)
        locs = self._unstale(list(truth.here))
        if not locs:
            ctx.backend.refuse_if_migrated()  # its in-flight copy went with the clone's migration: say so
            entry = truth.settled
            if entry is not None:  # it left flight elsewhere (the janitor failed a claim, another branch finished it)
                if entry.outcome == RENAMED and entry.to:
                    raise LeftFlight(
                        f"{slug} was renamed to {entry.to} on branch {entry.branch} at {format_ts(entry.ts)}",
                        ended=Ended(entry.outcome, entry.branch, entry.ts),
                    )
                from .. import queue

                again = f" (`backlog retry` on {entry.branch} reopens it)" if entry.outcome == FAILED else ""
                raise LeftFlight(
                    f"{slug} is no longer in flight: {queue.cause_elsewhere(ctx, slug, entry)} on branch {entry.branch}"
                    f" at {format_ts(entry.ts)}; merge {entry.branch} to see it here{again}",
                    ended=Ended(entry.outcome, entry.branch, entry.ts),
                )
            raise self.not_found(slug, f"no task {slug} in any pile")
        flying = truth.flying(ctx)
        if len(flying) == 1 and ctx.backend.shares_flight:
            return flying[0]
        if len(locs) > 1:
            raise BacklogError(f"{slug} is in several piles ({where(locs)}): run `backlog maintain` to repair")
        return locs[0]

    def located(self, slug: str, truth: Truth | None = None) -> Located:
        """`one`; when this clone has no copy, the remote's word if it knows more: another clone's
        claim (held) or settlement (settled), SPEC §5 *Ownership*."""
        try:
            return self.one(slug, truth)
        except NotFound as exc:
            from .. import crosstask

            raise crosstask.refusal(self.ctx, slug) or exc from None

    def in_flight(self, slug: str, verb: str) -> Located:
        """The in-flight copy of `slug`, for a verb on a claim (`verb`: "failed", "given progress"…);
        a refusal saying what became of it otherwise (with a remote: as `located`)."""
        ctx = self.ctx
        truth = self.task(slug)
        loc = self.located(slug, truth)
        if not ctx.pipeline.is_in_flight(loc.pile):
            then = f", not in flight: only in-flight tasks can be {verb}"
            if loc.pile in ("done", FAILED):
                raise lifecycle.ended_here(ctx, loc, then)
            entry = truth.settled  # a stale copy: say what became of the task elsewhere
            if entry is not None and entry.blocks(self._task_or_none(loc)):
                from .. import queue

                raise stale_copy(entry, queue.cause_elsewhere(ctx, slug, entry))
            from .. import crosstask

            raise crosstask.refusal(ctx, slug) or BacklogError(f"{slug} is in {loc.pile}/{then}")
        return loc

    def _task_or_none(self, loc: Located) -> Task | None:
        try:
            return self.ctx.backend.load(loc)
        except (BacklogError, OSError):
            return None

    def claim_of(self, loc: Located) -> LogEntry | None:
        """The claim of record of an in-flight copy (None: none, or unreadable)."""
        try:
            return claim_in(read_log(self.ctx.backend.read(loc)))
        except (BacklogError, OSError):
            return None

    def claimable(self, slug: str, truth: Truth | None = None) -> tuple[Located, bytes]:
        """The todo copy of `slug` a claim takes (this worktree's, else the intake branch's), with its
        bytes; a refusal when the task is in flight, left flight, or the copy is a stale one (a copy
        gone since `truth` listed it: looked up again, `relisted`)."""
        return relisted(slug, lambda first: self._claimable(slug, truth if first else None))

    def _claimable(self, slug: str, truth: Truth | None) -> tuple[Located, bytes]:
        from .. import queue

        ctx = self.ctx
        truth = truth or self.task(slug)
        locs = list(truth.here)
        flying = truth.flying(ctx)
        if flying:
            claim = self.claim_of(flying[0])
            by = f", claimed by {holder(claim)}" if claim is not None else ""
            raise Held(f"claim conflict: {slug} already in flight ({flying[0].pile}/{by})", holder=holder_of(claim))
        todo = [loc for loc in locs if loc.pile == "todo"]
        if todo:
            found: tuple[Located, bytes] | None = (todo[0], ctx.backend.read(todo[0]))
        elif not locs:
            found = queue.intake_copy(ctx, slug)
        else:  # this branch's failed/ copy, reopened on the intake branch since: that copy is the task
            found = self._reopened(locs[0]) if len(locs) == 1 and locs[0].pile == FAILED else None
        if ctx.backend.declares_remote:
            from .. import crosstask

            found = crosstask.reopened_copy(ctx, slug, found[1] if found else None) or found  # retried on another clone
        if found is None:
            if not locs:
                raise self.not_found(slug, f"no task {slug} in any pile (nor in the intake branch's todo/)")
            ended = [loc for loc in locs if loc.pile in ("done", FAILED)]
            if len(locs) == 1 and ended:
                raise LeftFlight(f"{slug} is in {where(locs)}, not in todo/", ended=ended_in(ctx, ended[0]))
            raise BacklogError(f"{slug} is in {where(locs)}, not in todo/")
        loc, data = found
        parsed = ctx.backend.load(loc, data)  # a malformed task is refused before it is claimed
        if truth.settled is not None and truth.settled.blocks(parsed):
            live = queue.live_intake_copy(ctx, slug)  # SPEC §4: the intake branch's reopened copy is the task
            if live is None:
                raise stale_copy(truth.settled, queue.cause_elsewhere(ctx, slug, truth.settled))
            return live
        return loc, data

    def timed_out_claim(self, slug: str) -> tuple[Truth, bool]:
        """The truth of `slug`, and whether its one in-flight copy is past its budget (so `take
        SLUG` rescues it); a copy gone before it is read is looked up again (`relisted`)."""
        return relisted(slug, lambda _first: self._timed_out_claim(self.task(slug)))

    def _timed_out_claim(self, truth: Truth) -> tuple[Truth, bool]:
        flying = truth.flying(self.ctx)
        return truth, len(flying) == 1 and lifecycle.is_timed_out(self.ctx.backend.load(flying[0]), flying[0])

    def shown(self, slug: str) -> Shown:
        """The copy of `slug` that tells the truth: this worktree's unless stale (then that of the branch
        where it settled), else the intake branch's, else where it settled, else the remote's record;
        with what the remote holds, and its bytes (a copy gone before it is read: looked up again)."""
        from .. import crosstask

        seen = crosstask.seen(self.ctx, slug)

        def look(_first: bool) -> Shown:
            got = self._shown(slug, seen)
            return got._replace(text=got.data if got.data is not None else self.ctx.backend.read(got.loc))

        return relisted(slug, look)

    def _shown(self, slug: str, seen: Seen) -> Shown:
        try:
            found = self._shown_here(slug)
            moved_on = seen.copy is not None and not (seen.record or {}).get("this_clone")  # on another clone
            if moved_on and seen.copy is not None and found[0].pile == "todo":
                return Shown(seen.copy[0], seen.copy[1], None, seen)  # a queued copy: the record tells more
            if found[0].pile == FAILED and (again := self._reopened(found[0])) is not None:
                return Shown(again[0], again[1], None, seen, found[0])
            return Shown(*found, seen)
        except (NotFound, LeftFlight):
            if seen.copy is not None:
                return Shown(seen.copy[0], seen.copy[1], None, seen)
            raise

    def _shown_here(self, slug: str) -> tuple[Located, bytes | None, Settled | None]:
        """`Shown` but the remote's word: the copy, its text when read from elsewhere, the settlement."""
        from .. import queue

        ctx = self.ctx
        try:
            loc = self.one(slug)
            if loc.pile == "todo" and queue.stale_here(ctx, slug) and (elsewhere := queue.settled_copy(ctx, slug)):
                return elsewhere
            return loc, None, None
        except (NotFound, LeftFlight):
            found = queue.intake_copy(ctx, slug)
            if found is not None:
                return found[0], found[1], None
            elsewhere = queue.settled_copy(ctx, slug)
            if elsewhere is not None:
                return elsewhere
            raise

    def _reopened(self, failed: Located) -> tuple[Located, bytes] | None:
        """The intake branch's todo/ copy of a task whose `failed` copy here a later `retry` superseded,
        perhaps on another clone whose ledger this clone never read (`Intake.reopens`): the task
        lives on there, as the views count it (`queue.live`)."""
        from .. import queue

        intake = queue.intake_of(self.ctx)
        slug = failed.slug
        if intake is None or slug not in intake.todo:
            return None
        if not intake.reopens(self.ctx.repo, slug, lambda: self.ctx.backend.read(failed)):
            return None
        return queue.intake_copy(self.ctx, slug)

    def _unstale(self, locs: list[Located]) -> list[Located]:
        """`locs` less the stale one of a todo/ copy and a settled (done/, failed/) copy of the slug,
        both here, told by their generations (the retries in each log): a todo/ copy of the same
        generation or an earlier one is stale (the intake branch's copy, a merge brought beside the
        copy that settled the task here); a failed/ copy of an earlier generation was retried since,
        perhaps on another clone. When either cannot be read, both stay: the verb says what is wrong."""
        todo = [loc for loc in locs if loc.pile == "todo"]
        ended = [loc for loc in locs if loc.pile in ("done", FAILED)]
        if not todo or not ended:
            return locs
        try:
            data = {loc: self.ctx.backend.read(loc) for loc in todo + ended}
            stale = set()
            for queued in todo:
                for settled in ended:
                    if not later(data[queued], data[settled]):
                        stale.add(queued)  # the state the settled copy left behind
                    elif settled.pile == FAILED:
                        stale.add(settled)  # retried since
        except (BacklogError, OSError):
            return locs
        return [loc for loc in locs if loc not in stale]

    def refuse_taken_name(self, slug: str) -> None:
        """Refuse `slug` as a new name (`add`, `rename`) when the clone knows it anywhere: a pile, the
        intake branch's todo/, the ledger (settled, or the old name of a renamed task)."""
        ctx = self.ctx
        here = ctx.backend.locate(slug)
        if here:
            raise BacklogError(f"{slug} already exists in {where(here)}: choose another name")
        remote = ctx.backend.configured_remote
        if intake_to_read(ctx.repo, ctx.project, None if remote is None else remote.name) is None:
            intake = None  # (none to read: `queue`, which reads it, is not imported for nothing)
        else:
            from .. import queue

            intake = queue.intake_of(ctx)
        if intake is not None and slug in intake.todo:
            raise BacklogError(
                f"{slug} already exists in todo/ of the intake branch {intake.branch}: choose another name"
            )
        entry = ctx.backend.settled(slug)
        if entry is not None and entry.outcome == RENAMED:
            raise BacklogError(
                f"{slug} is the old name of {entry.to} (renamed on branch {entry.branch}): choose another name"
            )
        if entry is not None:
            raise BacklogError(
                f"{slug} was already settled ({entry.outcome}) on branch {entry.branch}:"
                " a revisit is a new task that names the old slug"
            )

    def not_found(self, slug: str, message: str) -> NotFound:
        """`message`, with a did-you-mean when the clone knows a slug `slug` likely meant (a missing
        `-plan` suffix is the usual slip)."""
        near = nearest_slug(slug, self.known_slugs() - {slug})
        return NotFound(f"{message} (did you mean {near}?)" if near else message)

    def intake_copy(self, slug: str) -> tuple[Located, bytes] | None:
        """The intake branch's todo/ copy of `slug` at its tip now (read again), whatever this worktree holds."""
        from .. import queue

        self.ctx.cache.pop("intake", None)
        return queue.intake_copy(self.ctx, slug)

    def known_slugs(self) -> set[str]:
        """Every slug the clone knows: any pile (shared piles included), the intake branch's todo/ and
        done/, and the ledger of settled tasks (SPEC §5 add: a dependency must name one of them)."""
        from .. import queue

        ctx = self.ctx
        found: set[str] = set()
        for pile in ctx.pipeline.all_piles:
            found.update(ctx.backend.slugs(pile))
        intake = queue.intake_of(ctx)
        if intake is not None:
            found.update(intake.todo.keys() | intake.done)
        return found | ctx.backend.settled_names()

    def held_by_me(self, branch: str) -> list[Located]:
        """The in-flight tasks whose claim of record names this claimer on `branch` (two agents on
        one branch are two holders, SPEC §5 Ownership)."""
        me = claimer_id()
        mine = []
        for _name, locs in sorted(self.ctx.backend.in_flight().items()):
            try:
                claim = self.ctx.backend.load(locs[0]).claim_of_record()
            except (BacklogError, FileNotFoundError):  # unreadable, or left flight since the listing
                continue
            if claim is not None and is_holder(claim, me, branch):
                mine.append(locs[0])
        return mine

    def unmet(self, deps: Iterable[str]) -> list[str]:
        """The dependencies done nowhere in the clone: this branch, the intake branch, the ledger."""
        from .. import queue

        done, _intake = queue.done_and_intake(self.ctx)
        return lifecycle.unmet(self.ctx, deps, done)

    def titles(self, every: list[str], places: dict[str, str], known: Titles) -> Titles:
        """`known` (todo/'s titles, read with the ranking from the parse cache: no file opened,
        `offered`) made to hold the title of each candidate of `every` (None: it has none); one
        left out of it moved on since the listing. Only a candidate here missing from `known` is
        located and parsed; the intake branch's (`places`) are read from its listing."""
        from .. import queue
        from ..intake import briefs

        ctx = self.ctx
        elsewhere = [slug for slug in every if slug in places] if places else []
        intake = queue.intake_of(ctx)
        found: dict[str, Brief] = briefs(ctx.repo, ctx.project, intake, elsewhere) if intake and elsewhere else {}
        known.update((slug, found[slug].title if slug in found else None) for slug in elsewhere)
        for slug in [slug for slug in every if slug not in known]:
            try:
                known[slug] = ctx.backend.load(self.one(slug)).title
            except (BacklogError, OSError):
                continue  # moved on since the listing
        return known
