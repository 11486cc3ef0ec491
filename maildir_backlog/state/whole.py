"""The read model's questions about the whole clone (SPEC §4 *One queue per clone*, §5 *Truthful
views*, §8): the queue as `status`, `list`, `ready` and auto-pick see it, with the remote's word
applied. Part of `state.Model` (the class commands ask).

`status`, `list` (todo/), `ready` and auto-pick share one ranking (`queue`) and one set of remote
marks (`crossclone.remote_marks`, one listing per call). `crossclone` (and with it the remote's
modules) is imported by the methods that ask the remote, and by `clone` only when a remote is
declared: a `status` without one never loads them."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from operator import itemgetter

from ..backend import Located
from ..context import Context, claimer_id
from ..header import Summary, Titles, not_slugs
from ..project import FAILED
from ..typed import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from ..crossclone import RemoteMarks
    from ..queue import TodoState


class Clone(NamedTuple):
    """The clone's queue as `status` shows it: each pile's count (todo/ counted as `list` shows
    it: a task once, a stale copy not at all), this branch's stale todo copies (by priority, then
    slug), how many counted tasks only the intake branch holds, this clone's in-flight copies,
    and what the remote said (None: no remote)."""

    counts: dict[str, int]
    stale: list[str]
    incoming: int
    in_flight: dict[str, list[Located]]
    marks: RemoteMarks | None
    not_tasks: dict[str, int]  # pile → how many of its files' names are not slugs (not counted)


class Offer(NamedTuple):
    """What auto-pick would try, as `ready` lists it: each priority that has candidates, with their
    slugs in order (lists, not an object per task: `ready` lists 100,000 tasks as they are)."""

    groups: list[tuple[int, list[str]]]
    places: dict[str, str]  # slug → "intake:<branch>" for the intake branch's (the rest are "here")

    def head(self, limit: int | None) -> Offer:
        """The first `limit` candidates (None: all)."""
        if limit is None:
            return self
        groups: list[tuple[int, list[str]]] = []
        for priority, slugs in self.groups:
            if limit <= 0:
                break
            groups.append((priority, slugs[:limit]))
            limit -= len(slugs)
        return Offer(groups, self.places)

    def slugs(self) -> list[str]:
        """Every candidate, in order."""
        return list(itertools.chain.from_iterable(map(itemgetter(1), self.groups)))

    def keeping(self, keep: Callable[[str], bool]) -> Offer:
        """The candidates `keep` keeps, in order; a priority left with none is dropped."""
        groups = [(priority, kept) for priority, slugs in self.groups if (kept := list(filter(keep, slugs)))]
        return Offer(groups, self.places)


class WholeClone:
    """The questions a view or auto-pick asks of the whole clone."""

    ctx: Context

    def clone(self) -> Clone:
        """From the directory listings: no task that plainly counts is parsed (`queue.todo_tally`),
        and the remote's word (held or settled on another clone) is applied as `crossclone.marked`
        applies it to `todo`'s states; done and failed are the clone's (`_settled_tally`)."""
        from .. import queue

        ctx = self.ctx
        flying = ctx.backend.in_flight()
        tally = queue.todo_tally(ctx)
        here, incoming = tally.here, tally.incoming
        marks = None  # no remote declared: `crossclone.remote_marks` would say None
        if ctx.backend.declares_remote:
            from .. import crossclone

            marks = crossclone.remote_marks(ctx, [*here, *incoming], flying)
        stale = [(t.priority, t.slug) for t in tally.uncounted if t.where == "here"]
        if marks is not None and (marks.held or marks.settled):
            gone = marks.held.keys() | marks.settled.keys()
            for slug in here & gone:
                found = queue.summary_here(ctx, slug)
                stale.append((found.priority if found is not None and not found.error else 0, slug))
            here = here - gone
            incoming = [slug for slug in incoming if slug not in gone]
            stale.sort()
        listed = {pile: ctx.backend.names(pile) for pile in ctx.pipeline.all_piles if pile != "todo"}
        listed["todo"] = here
        tasks = {pile: names - not_slugs(names) for pile, names in listed.items()}  # a file named otherwise is none
        here = tasks["todo"]
        counts = {pile: 0 if pile == "todo" else len(tasks[pile]) for pile in ctx.pipeline.all_piles}
        counts["todo"] = len(here) + len(incoming)
        counted = here | set(incoming) | flying.keys()
        done, failed = self._settled_tally(counted, tasks["done"], tasks[FAILED])  # the clone's, each once
        for slug, outcome in (marks.outcomes if marks is not None else {}).items():  # and every clone's
            if slug not in counted:
                (done if outcome in ("done", "cancelled") else failed if outcome == FAILED else set()).add(slug)
        counts["done"], counts[FAILED] = len(done), len(failed - done)
        first = ctx.pipeline.next_pile("todo") or "done"
        for slug, pile in (marks.piles if marks is not None else {}).items():  # another clone's claims, in flight
            if slug not in counted:
                held = pile if pile in counts and ctx.pipeline.is_in_flight(pile) else first
                counts[held] = counts.get(held, 0) + 1
        not_tasks = {pile: n for pile in ctx.pipeline.all_piles if (n := len(listed[pile]) - len(tasks[pile]))}
        return Clone(counts, [slug for _, slug in stale], len(incoming), flying, marks, not_tasks)

    def _settled_tally(self, counted: set[str], done: set[str], failed: set[str]) -> tuple[set[str], set[str]]:
        """The clone's done and failed tasks (SPEC §5 *Truthful views*: counts are the clone's, each
        task once): this worktree's done/ and failed/, the intake branch's done/, and what the ledger
        says left flight on another branch; less `counted` (in flight or queued now: a retried task)."""
        from .. import queue

        ctx = self.ctx
        done, failed = set(done), set(failed)  # (this worktree's tasks in them, as listed)
        intake = queue.intake_of(ctx)
        if intake is not None:
            done |= intake.done
        for slug in ctx.backend.settled_names() - done - failed - counted:
            entry = ctx.backend.settled(slug)  # read only for what settled where this worktree cannot see it
            if entry is not None and entry.outcome in ("done", "cancelled"):
                done.add(slug)
            elif entry is not None and entry.outcome == FAILED:
                failed.add(slug)
        return done - counted, failed - counted - done

    def tasks_in(self, pile: str) -> set[str]:
        """The names in this worktree's `pile` that are tasks: a file whose name is not a slug is
        not one (`maintain` names it under LAYOUT), so no count includes it."""
        names = self.ctx.backend.names(pile)
        return names - not_slugs(names)

    def todo(self) -> tuple[list[TodoState], RemoteMarks | None]:
        """Every todo task the clone can see, once each, with its state (and the remote's word)."""
        from .. import crossclone, queue

        return crossclone.marked(self.ctx, queue.todo_states(self.ctx))

    def pile(self, name: str) -> tuple[dict[str, Summary], set[str]]:
        """One pile's tasks (a summary each) and the slugs done anywhere in the clone for readiness."""
        from .. import queue

        done, _intake = queue.done_and_intake(self.ctx)
        return self.ctx.backend.summaries(name), set(done)

    def waiting(self) -> dict[str, list[str]]:
        """The tasks of each pile before todo/ (not yet promoted), by pile."""
        return {name: sorted(self.ctx.backend.slugs(name)) for name in self.ctx.pipeline.intake}

    def offered(
        self, skipped: list[str], titles: Titles | None = None, limit: int | None = None
    ) -> tuple[Offer, RemoteMarks | None]:
        """What this claimer's auto-pick would try, in its order (`picks`' spread over the best), less
        what another clone holds or settled: `ready --limit 1` is what `take` claims, races aside.
        `titles` receives this worktree's todo/ titles, read with the ranking (for `titles`). With
        `limit` and no remote, only the priorities that hold the first `limit` are sorted (with a
        remote every candidate is asked of its listing first): cut them with `Offer.head`."""
        from .. import crossclone, queue

        ctx = self.ctx
        ranking = queue.ranking(ctx, skipped, titles)
        offer = Offer(ranking.groups(limit if ctx.backend.configured_remote is None else None), ranking.places)
        marks = crossclone.remote_marks(ctx, offer.slugs())
        if marks is not None:  # SPEC §5: never offer what another clone holds or settled
            gone = marks.held.keys() | marks.settled.keys()
            offer = offer.keeping(lambda slug: slug not in gone)
        if offer.groups:
            priority, best = offer.groups[0]
            others = marks is not None and marks.others
            offer.groups[0] = priority, queue.spread(ctx, claimer_id(), best, len(best), others=others)
        return offer, marks

    def picks(self, skipped: list[str]) -> Iterator[str]:
        """Auto-pick's candidates for this claimer, in order: ranked, spread over the equally ranked
        best when other claimers take too (no herd, docs/design.md), less what the remote holds
        (SPEC §8). Read lazily without a remote: past the best, each priority is sorted only when a
        claim gets that far. With one, every candidate is asked of the remote's listing first, and a
        claim another clone holds there counts as another claimer taking too."""
        from .. import queue

        ctx = self.ctx
        ranking = queue.ranking(ctx, skipped)
        if ctx.backend.remote is None:
            first = ranking.first()
            return itertools.chain(queue.spread(ctx, claimer_id(), first, len(first)), ranking.after())
        from .. import crossclone

        offer = Offer(ranking.groups(), ranking.places)
        free, elsewhere = crossclone.available(ctx, offer.slugs())
        left = offer.keeping(set(free).__contains__)
        best = len(left.groups[0][1]) if left.groups else 0
        return iter(queue.spread(ctx, claimer_id(), left.slugs(), best, others=elsewhere))

    def still_free(self, slugs: Iterator[str]) -> Iterator[str]:
        """`slugs` less what was claimed since they were ranked: what the in-flight piles hold now (a
        listing of each), and with a remote what it holds now (one listing)."""
        flying = self.ctx.backend.in_flight()
        left = (slug for slug in slugs if slug not in flying)
        if self.ctx.backend.remote is None:
            return left
        from .. import crossclone

        return iter(crossclone.available(self.ctx, list(left), flying)[0])

    def reopened_late(self) -> list[str]:
        """Auto-pick's last resort: candidates skipped as settled on the remote, whose records this
        clone lacked, that one fetch shows retried on another clone (none without a remote)."""
        if not self.ctx.backend.declares_remote:
            return []
        from .. import crossclone

        return crossclone.reopened_late(self.ctx)

    def remote_claims(self) -> tuple[str, list[dict[str, object]], int, int] | None:
        """Every clone's claims as the remote holds them: its name, the claims, how many are claimed
        and settled (None: no remote declared)."""
        remote = self.ctx.backend.remote
        if remote is None:
            return None
        from .. import crossclone

        items, held = crossclone.claims(self.ctx, remote)
        return remote.name, items, len(held.claims), len(held.settled)

    def layout(self) -> tuple[str, str, dict[str, str]]:
        """The backend's name, its shared root, and where each pile is."""
        backend = self.ctx.backend
        return backend.name, str(backend.shared_root), backend.where()
