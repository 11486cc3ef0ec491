"""Claims across clones (SPEC §8), the verbs' side: what `take`, `rescue`, `status --remote` and
`maintain` read from the remote's record and do with it.

The protocol (refs, commits, leases, this clone's memory) is the `remote` package; every move of
a task still goes through `Backend.apply`, which publishes it on the remote before making it here.
This module adds what needs the kernel (budgets, the settling helpers, the lock):

* `available`: auto-pick's candidates less every slug the remote holds (one listing);
* `take_named`: `take SLUG` of a task claimed on another clone: refused naming the holder, or
  rescued when it is past its budget (a verb on a claim asks `crosstask.refusal`);
* `rescue`: swaps `claims/<slug>` from the value it read to this clone's own, taking the task's
  content from the claim's commit (of two rescuers on two machines exactly one wins);
* `claims`: every clone's claims, for `status --remote` and the janitor;
* `merged_done`, `default_branch`, `done_on`: what the remote's default branch holds in `done/`.

The janitor's side (reconcile, fail expired claims, prune) is `repair/remote_bucket.py` and
`repair/remote_reconcile.py`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from . import git, layout, views
from .argv import END_OF_OPTIONS
from .backend import Located
from .clock import format_duration, format_ts, now_utc
from .context import Context, Result, branch_of, claimer_id, unconfigured_note
from .errors import BacklogError, Conflict, Ended, Held, Holder, LeftFlight
from .lifecycle import (
    budget,
    cause,
    clock_start,
    single_in_flight,
    terminal_event,
    time_left,
)
from .logline import append_line, make_entry
from .queue import TodoState
from .remote import CLAIMS, SETTLED, TIP, Listing, Record, Remote, RemoteError, ref
from .task import Task, parse_task


def task_of(ctx: Context, rec: Record, pile: str) -> tuple[Task, Located]:
    """The remote record's task file, parsed as if it lay in `pile` of this clone."""
    loc = Located(rec.slug, pile, ctx.backend.task_path(pile, rec.slug), ctx.backend.is_shared(pile))
    return parse_task(rec.slug, ctx.backend.display(pile, rec.slug), rec.data, ctx.project.defaults), loc


def pile_of(ctx: Context, rec: Record) -> str:
    pile = rec.pile()
    if pile is None or not ctx.pipeline.is_in_flight(pile):
        raise BacklogError(
            f"{rec.slug}: the remote's claim puts it in {pile or 'no pile'}/, which is not an in-flight pile of"
            " this clone's pipeline (backlog/AGENTS.md)"
        )
    return pile


# -- take ---------------------------------------------------------------------------------------
def reopened(remote: Remote, slug: str, sha: str) -> bool:
    """May `slug` be claimed by name although the remote holds `settled/<slug>` = `sha`? Only when
    the record is a `retried` one: a retry on any clone reopens the task for every clone (SPEC
    §8), and the claim takes the retried copy (this clone's when it is of that generation or
    newer, else the record's own: `crosstask.reopened_copy`). Fetches the record if need be."""
    rec = remote.record(slug, sha, SETTLED)
    return rec is not None and rec.outcome() == "retried"


def available(ctx: Context, slugs: list[str], flying: Mapping[str, object] | None = None) -> tuple[list[str], bool]:
    """Auto-pick's candidates less every slug the remote holds under claims/ or settled/ (one
    listing), and whether another clone holds a claim there (its agents take too: no herd).
    `flying`: this clone's in-flight tasks, when the caller has just listed them."""
    remote = ctx.backend.remote
    if remote is None or not slugs:
        return slugs, False
    held = remote.listing("listing the remote's claims")
    ctx.cache["remote-listing"] = held  # the claim reads it again (a retried record's copy), no exchange
    taken = _taken(ctx, remote, held, slugs)
    here = ctx.backend.in_flight() if flying is None else flying
    elsewhere = not held.claims.keys() <= here.keys()  # a claim not in flight in this clone
    return [slug for slug in slugs if slug not in taken], elsewhere


def _taken(ctx: Context, remote: Remote, held: Listing, slugs: list[str]) -> dict[str, str]:
    """slug → the ref kind (claims, settled) or `merged` for each of `slugs` that another clone
    holds or that left flight on the remote: what auto-pick never offers. A `retried` record does
    not count (the task is open again for every clone), when this clone has it: the records it
    lacks are not fetched here (the claim's cost) but kept for `reopened_late`."""
    merged = merged_done(ctx, remote)
    taken: dict[str, str] = {}
    settled = {s: held.settled[s] for s in slugs if s in held.settled and s not in held.claims and s not in merged}
    known = remote.records(settled)  # the objects this clone has (one `cat-file --batch`)
    for slug in slugs:
        if slug in held.claims:
            taken[slug] = CLAIMS
        elif slug in merged:
            taken[slug] = "merged"
        elif slug in settled and (slug not in known or known[slug].outcome() != "retried"):
            taken[slug] = SETTLED
    before = ctx.cache.get("remote-unknown")  # kept across the re-listings after a lost race
    earlier = before if isinstance(before, list) else []
    ctx.cache["remote-unknown"] = list(dict.fromkeys([*earlier, *(slug for slug in settled if slug not in known)]))
    return taken


def reopened_late(ctx: Context) -> list[str]:
    """Auto-pick's last resort, once no other candidate could be claimed: the candidates it
    skipped as settled on the remote whose records this clone lacked, that a fetch shows retried
    on another clone (SPEC §8: open again for every clone). One fetch, made only then, so a
    claim costs no more; none when every record was known."""
    remote, held = ctx.backend.remote, ctx.cache.get("remote-listing")
    unknown = ctx.cache.pop("remote-unknown", [])
    if remote is None or not isinstance(held, Listing) or not isinstance(unknown, list) or not unknown:
        return []
    shas = {slug: held.settled[slug] for slug in unknown if slug in held.settled}
    try:
        remote.fetch([ref(SETTLED, slug) for slug in shas])
    except RemoteError:
        return []
    found = remote.records(shas)
    return [slug for slug in shas if slug in found and found[slug].outcome() == "retried"]


def refuse_unexpired(task: Task, loc: Located, pile: str, where: str, holder: Holder | None) -> None:
    """A rescue's budget rule, for a claim here or on another clone (`where` says which): a claim
    with no budget never times out, one within its budget stays its holder's."""
    left = time_left(task, loc)
    if left is None:
        raise BacklogError(f"{task.slug} has no budget in {pile}/ (none): it never times out; rescue refused")
    if left >= timedelta(0):
        raise Held(
            f"{task.slug} is still within its budget ({budget(task, loc)}){where}: {format_duration(left)} left;"
            " rescue refused",
            holder=holder,
        )


# -- the views (SPEC §5 *Truthful views*) --------------------------------------------------------
@dataclass(frozen=True)
class RemoteMarks:
    """What the remote says of the todo tasks a view shows: `held` (slug → who, on another
    clone) and `settled` (slug → how and where it left flight); when it could not be reached,
    `problem` says why and the view says so instead of showing stale state as fact."""

    name: str
    problem: str | None = None
    held: dict[str, str] = field(default_factory=dict)
    settled: dict[str, str] = field(default_factory=dict)
    displaced: dict[str, str] = field(default_factory=dict)  # this clone's claims another clone took over or ended
    others: bool = False  # another clone holds a claim: its agents take too (no herd, `queue.spread`)
    outcomes: dict[str, str] = field(default_factory=dict)  # settled's slugs → done, cancelled, failed… (counts)
    piles: dict[str, str] = field(default_factory=dict)  # held's slugs → the in-flight pile of the claim (counts)
    unconfigured: str | None = None  # declared, not configured in this clone (SPEC §3): the words saying so

    @property
    def status(self) -> str:
        if self.unconfigured is not None:
            return "unconfigured"
        return "unreachable" if self.problem is not None else "reached"

    def note(self) -> list[str]:
        """The view's one stderr line when the remote could not be reached or is not configured."""
        if self.unconfigured is not None:
            return [unconfigured_note(self.unconfigured)]
        if self.problem is None:
            return []
        return [
            f"remote {self.name} unreachable: what other clones hold or settled is not known, so tasks may show as"
            f" available that are not ({self.problem})"
        ]


def remote_marks(ctx: Context, slugs: list[str], flying: Iterable[str] = ()) -> RemoteMarks | None:
    """The remote's word on the todo tasks `slugs` and on this clone's in-flight tasks `flying`
    (one listing; one fetch when one of them is marked), read once per command; None when no
    remote is declared. This clone's own claims of todo tasks are left to the local view."""
    if ctx.backend.unconfigured is not None:  # SPEC §3: local state only, and the view says so
        return RemoteMarks(ctx.project.remote or "", unconfigured=ctx.backend.unconfigured)
    remote = ctx.backend.remote
    if remote is None:
        return None
    flying = set(flying)
    cached = ctx.cache.get("remote-marks")
    if isinstance(cached, RemoteMarks):
        return cached
    try:
        held = remote.listing("listing the remote's claims")
        taken = _taken(ctx, remote, held, slugs)
    except RemoteError as exc:
        marks = RemoteMarks(remote.name, exc.message)
        ctx.cache["remote-marks"] = marks
        return marks
    ours = remote.mine_all()
    mine = ours[CLAIMS]
    claimed = {s: held.claims[s] for s, kind in taken.items() if kind == CLAIMS and mine.get(s) != held.claims[s]}
    ended = {s: held.settled[s] for s, kind in taken.items() if kind == SETTLED}
    for slug in flying:  # this clone's claim, taken over (a rescue) or ended (a janitor) on another clone
        if slug in held.claims and mine.get(slug) not in (None, held.claims[slug]):
            claimed[slug] = held.claims[slug]
        elif slug not in held.claims and slug in held.settled and ours[SETTLED].get(slug) != held.settled[slug]:
            ended[slug] = held.settled[slug]
    records: dict[str, Record] = {}
    with contextlib.suppress(RemoteError):
        remote.fetch([ref(CLAIMS, s) for s in claimed] + [ref(SETTLED, s) for s in ended])
        records = {**remote.records(claimed), **{f"settled:{s}": r for s, r in remote.records(ended).items()}}
    for slug in set(ended) - flying:  # a retry on another clone reopened it for every clone (SPEC §8)
        rec = records.get(f"settled:{slug}")
        if rec is not None and rec.outcome() == "retried":
            del ended[slug]
    where = f"another clone, remote {remote.name}"
    marks = RemoteMarks(
        remote.name,
        held={s: f"by {records[s].holder()} ({where})" if s in records else f"on {where}" for s in claimed},
        settled={
            s: f"{told(rec)} by {rec.holder()} ({where})" if (rec := records.get(f"settled:{s}")) else f"on {where}"
            for s in ended
        }
        | {s: f"done on the remote's default branch ({remote.name})" for s, kind in taken.items() if kind == "merged"},
    )
    moved = {s: f"now held {d}" for s, d in marks.held.items() if s in flying}
    moved |= {s: f"settled: {d}" for s, d in marks.settled.items() if s in flying}
    others = not held.claims.keys() <= ctx.backend.in_flight().keys()  # a claim not in flight in this clone
    outcomes = {s: rec.outcome() for s in ended if (rec := records.get(f"settled:{s}")) is not None}
    outcomes |= {s: "done" for s, kind in taken.items() if kind == "merged"}
    piles = {s: (records[s].pile() if s in records else None) or "" for s in claimed}
    marks = dataclasses.replace(marks, displaced=moved, others=others, outcomes=outcomes, piles=piles)
    ctx.cache["remote-marks"] = marks
    return marks


def told(rec: Record) -> str:
    """How a settlement record says the task left flight, as its log records it (SPEC §5
    *Ownership*: failed by timeout (…), failed (reason), cancelled (reason), done), else its outcome."""
    return cause(rec.log) or rec.outcome()


def marked(
    ctx: Context, states: list[TodoState], flying: Iterable[str] = ()
) -> tuple[list[TodoState], RemoteMarks | None]:
    """The clone's todo states with the remote's word applied: a task another clone holds is in
    flight (by whom), one that left flight there is settled elsewhere (how, where). `flying`:
    this clone's in-flight slugs, checked too (`RemoteMarks.displaced`)."""
    marks = remote_marks(ctx, [t.slug for t in states if t.counts], flying)
    if marks is None:
        return states, None
    result = []
    for t in states:
        if t.counts and t.slug in marks.held:
            t = t._replace(state="in flight", detail=marks.held[t.slug], blocked_by=())
        elif t.counts and t.slug in marks.settled:
            t = t._replace(state="settled elsewhere", detail=marks.settled[t.slug], blocked_by=())
        result.append(t)
    return result, marks


def merged_done(ctx: Context, remote: Remote) -> set[str]:
    """Slugs in `done/` on the remote's default branch as this clone last saw it (its remote-tracking
    branch, and the tip the last claim read, `refs/backlog-tip`): settled for good, even once
    `prune` has removed their `settled/` ref (local `git ls-tree`s). A cheap early refusal only: a
    claim is confirmed against the tip as it is then (`Remote.claim`)."""
    seen = [default_branch(ctx, remote), TIP]
    return set().union(*(done_on(ctx, ref) for ref in seen if ref is not None))


def done_on_remote(ctx: Context) -> set[str]:
    """`merged_done` when a remote is declared, else nothing."""
    remote = ctx.backend.remote
    return merged_done(ctx, remote) if remote is not None else set()


def take_named(ctx: Context, slug: str, rescue_expired: bool = True) -> Result | None:
    """`take SLUG` with a remote: a claim of another clone is refused (exit 1, naming it) or, past
    its budget, rescued (`rescue_expired`; else refused too: every other verb on a claim); a
    settlement the remote knows is refused, saying what became of the task as its record's log
    tells (SPEC §5 *Ownership*). None: the local rules apply. One listing, kept for the claim."""
    remote = ctx.backend.remote
    if remote is None:
        return None
    held = remote.listing(f"claiming {slug}" if rescue_expired else f"reading {slug} on the remote")
    ctx.cache["remote-listing"] = held
    sha = held.claims.get(slug)
    if sha is not None:
        if sha == remote.mine(CLAIMS, slug):
            return None  # this clone's own claim: refused as in flight, or rescued, locally
        rec = remote.record(slug, sha, CLAIMS)
        if rec is None:
            broken = remote.unreadable(CLAIMS, slug, sha)
            if broken is not None:  # not a record: reported, never retried (exit 1)
                raise BacklogError(f"{slug} is held by an unreadable claim: {broken}")
            raise Conflict(f"claim conflict: {slug} changed on remote {remote.name} while claiming it")
        task, loc = task_of(ctx, rec, pile_of(ctx, rec))
        left = time_left(task, loc)
        expired = left is not None and left < timedelta(0) and terminal_event(task) is None
        if expired and rescue_expired:
            return rescue(ctx, slug)
        raise Held(
            f"{slug} is in flight on another clone: claimed by {rec.holder()} since"
            f" {format_ts(clock_start(task, loc))} (remote {remote.name})"
            + (f"; past its budget: `backlog rescue {slug}` takes it over" if expired else ""),
            holder=rec.claim_holder(),
        )
    if slug in merged_done(ctx, remote) and slug not in held.settled:
        raise LeftFlight(
            f"{slug} is done on the remote's default branch: this copy is stale (merge it)",
            ended=Ended("done", default_branch(ctx, remote)),
        )
    if slug in held.settled and not reopened(remote, slug, held.settled[slug]):
        rec = remote.record(slug, held.settled[slug], SETTLED)
        what = f"{told(rec)} by {rec.holder()}" if rec is not None else "settled"
        ended = rec.ended() if rec is not None else None
        stale = f"{slug} was already settled on remote {remote.name} ({what}): this copy is stale"
        raise LeftFlight(stale, ended=ended)
    return None


# -- rescue -------------------------------------------------------------------------------------
def rescue(ctx: Context, slug: str) -> Result | None:
    """Rescue the remote's claim on `slug` when it is another clone's (or a claim of this clone
    that another clone displaced). None: the claim is this clone's own, or the remote has none:
    the local rescue applies (and `Backend.apply` swaps the claim from this clone's value)."""
    remote = ctx.backend.remote
    if remote is None:
        return None
    branch = branch_of(ctx)
    with ctx.backend.lock(slug):
        held = remote.listing(f"rescuing {slug}")
        sha = held.claims.get(slug)
        if sha is None:
            if slug in held.settled:
                rec = remote.record(slug, held.settled[slug], SETTLED)
                what = f"{told(rec)} by {rec.holder()}" if rec is not None else "settled"
                gone = f"{slug} already left flight on remote {remote.name} ({what}): rescue refused"
                raise LeftFlight(gone, ended=rec.ended() if rec is not None else None)
            return None
        if sha == remote.mine(CLAIMS, slug):
            return None
        rec = remote.record(slug, sha, CLAIMS)
        if rec is None:
            broken = remote.unreadable(CLAIMS, slug, sha)
            if broken is not None:
                raise BacklogError(f"{slug} is held by an unreadable claim: {broken}")
            raise Conflict(f"claim conflict: {slug} changed on remote {remote.name} while rescuing it")
        pile = pile_of(ctx, rec)
        task, loc = task_of(ctx, rec, pile)
        ended = terminal_event(task)
        if ended is not None:
            raise LeftFlight(
                f"{slug} already ended on remote {remote.name} ({ended[0]}): rescue refused",
                ended=Ended(ended[0], (rec.claim_holder() or Holder(None, None)).branch, ended[2].ts),
            )
        where = f" on another clone ({rec.holder()}, remote {remote.name})"
        refuse_unexpired(task, loc, pile, where, rec.claim_holder())
        fields: dict[str, str | None] = {"claimer": claimer_id(), "branch": branch, "budget": task.budget_in(pile).text}
        new = append_line(rec.data, make_entry("rescued", fields), ctx.backend.display(pile, slug))
        local = single_in_flight(ctx, slug)  # this clone's displaced copy, if any: replaced
        old = ctx.backend.read(local) if local is not None else None
        dst = ctx.backend.apply(slug, local, pile, new, None, old=old, lease=sha)
        shown = [ctx.backend.display(dst.pile, slug)]
        note = f"rescued {slug} from {rec.holder()} (another clone, remote {remote.name})"
        return Result(views.claimed(ctx, dst, new, rescued=True), shown, stderr=[note])


# -- status --remote ----------------------------------------------------------------------------
MOVED_WHILE_LISTING = "changed while listing"  # a claim's `error` that is no verdict on the ref


def claims(ctx: Context, remote: Remote) -> tuple[list[dict[str, Any]], Listing]:
    """Every clone's claims on the remote (one listing, one fetch, one `cat-file --batch`)."""
    held = remote.listing("listing the remote's claims")
    remote.fetch([ref(CLAIMS, slug) for slug in held.claims])
    found = remote.records(held.claims)
    mine = remote.mine_all()[CLAIMS]
    now = now_utc()
    items: list[dict[str, Any]] = []
    for slug, sha in sorted(held.claims.items()):
        rec = found.get(slug)
        item: dict[str, Any] = {"slug": slug, "commit": sha, "this_clone": mine.get(slug) == sha}
        if rec is None:
            item["error"] = remote.unreadable(CLAIMS, slug, sha) or MOVED_WHILE_LISTING
            items.append(item)
            continue
        claim = rec.claim_entry()
        item.update(pile=rec.pile(), claimer=claim.get("claimer") if claim else None)
        item.update(branch=claim.get("branch") if claim else None, last=rec.line)
        try:
            task, loc = task_of(ctx, rec, pile_of(ctx, rec))
        except BacklogError as exc:
            item["error"] = exc.message
            items.append(item)
            continue
        start = clock_start(task, loc)
        left = time_left(task, loc, now)
        item.update(views.clock(ctx, task, loc, now), stale=left is not None and left < timedelta(0))
        item["since"] = format_ts(start)
        items.append(item)
    return items, held


def default_branch(ctx: Context, remote: Remote) -> str | None:
    """The remote's default branch as this clone last fetched it (`<remote>/HEAD`, else main or master)."""
    head = git.run(
        ctx.repo.toplevel, "symbolic-ref", "-q", END_OF_OPTIONS, f"refs/remotes/{remote.name}/HEAD", check=False
    ).strip()
    if head:
        return head
    for name in ("main", "master"):
        candidate = f"refs/remotes/{remote.name}/{name}"
        if git.run(ctx.repo.toplevel, "rev-parse", "-q", "--verify", END_OF_OPTIONS, candidate, check=False).strip():
            return candidate
    return None


def done_on(ctx: Context, branch: str) -> set[str]:
    out = git.run(
        ctx.repo.toplevel, "ls-tree", "--name-only", END_OF_OPTIONS, f"{branch}:{layout.pile_rel('done')}/", check=False
    )
    return {name[:-3] for name in out.split() if name.endswith(".md")}
