"""Claims across clones, one task at a time (SPEC §5 *Ownership*, §8 *Every verb knows the
remote*): what the remote knows of one slug that this clone does not, for the verbs that act on
one task and for `show`. `crossclone` is the rest of the verbs' side (auto-pick, `take SLUG`,
`rescue`, the views' marks, `status --remote`).

* `refusal`: a verb on a claim (`advance`, `progress`, `fail`, `cancel`) of a task this clone does
  not hold in flight: another clone's claim is refused naming its holder (`held`), a settlement
  saying what became of the task as the record's log tells (`settled`). One listing, made only
  on that path: a verb on this clone's own claim pays nothing more.
* `reopened_copy`: the copy a claim takes of a task retried on another clone (the remote's
  `retried` record, when it is newer than this clone's copy), from the listing the claim made.
* `failed_copy`: the copy `retry` reopens of a task that failed on another clone (the remote's
  `failed` record), or why it may not.
* `seen`: what `show` says of the remote's claim or settlement, with the record's log (the
  record's commit holds the task file).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from . import crossclone, views
from .backend import Located
from .clock import format_ts
from .context import Context, unconfigured_note
from .crossclone import told
from .errors import BacklogError, Held, LeftFlight
from .logline import generation, read_log, render_log_line
from .project import FAILED
from .remote import CLAIMS, SETTLED, Listing, Record, Remote, RemoteError, ref


def refusal(ctx: Context, slug: str) -> BacklogError | None:
    """Why a verb on `slug`, which this clone does not hold in flight, is refused by what the
    remote knows: another clone's claim (Held, naming it) or a settlement (LeftFlight, its cause).
    None: no remote, the remote knows nothing more, or it cannot be reached (the caller's own
    refusal stands: it is true of this clone)."""
    if not ctx.backend.declares_remote:
        return None
    try:
        crossclone.take_named(ctx, slug, rescue_expired=False)
    except (Held, LeftFlight) as exc:
        return exc
    except RemoteError:
        return None
    return None


def _record_copy(remote: Remote, slug: str, pile: str, rec: Record, kind: str = SETTLED) -> tuple[Located, bytes]:
    """The record's task file as a copy that lives on the remote only (its path is the ref's,
    like an intake copy's: nothing of this clone's is removed when it moves)."""
    return Located(slug, pile, Path(f"{remote.name}:{ref(kind, slug)}"), False), rec.data


def reopened_copy(ctx: Context, slug: str, data: bytes | None) -> tuple[Located, bytes] | None:
    """The copy a claim takes when another clone retried `slug`: the remote's `retried` record,
    when this clone's copy (`data`; None: none in todo/) is of an older generation. Read from the
    listing this command made (`crossclone.take_named`, `available`) and the objects this clone
    has: no exchange of its own. None otherwise."""
    remote = ctx.backend.remote
    held = ctx.cache.get("remote-listing")
    if remote is None or not isinstance(held, Listing) or slug not in held.settled:
        return None
    rec = remote.record(slug, held.settled[slug])
    if rec is None or rec.outcome() != "retried":
        return None
    if data is not None:
        try:
            if generation(read_log(data, f"{slug}.md")) >= rec.generation:
                return None  # this clone's copy is the retried one, or newer
        except BacklogError:
            pass
    return _record_copy(remote, slug, "todo", rec)


def failed_copy(ctx: Context, slug: str) -> tuple[Located, bytes] | None:
    """The failed copy `retry` reopens when this clone has none: the remote's `failed` record of
    `slug` (SPEC §8: a task failed on any clone is retried from any clone). Another clone's claim
    is refused naming its holder; a task done or cancelled there is terminal; one retried there
    already is in todo/ for every clone. None: the remote knows nothing of it (one listing)."""
    remote = ctx.backend.remote
    held = None if remote is None else _listed(ctx, remote, slug)
    if remote is None or held is None:
        return None  # the local refusal stands; a retry needs the remote anyway
    where = f"remote {remote.name}"
    sha = held.claims.get(slug)
    if sha is not None and sha != remote.mine(CLAIMS, slug):
        rec = remote.record(slug, sha, CLAIMS)
        if rec is not None:
            raise Held(
                f"{slug} is in flight on another clone: claimed by {rec.holder()} ({where}), not failed; retry refused",
                holder=rec.claim_holder(),
            )
    sha = held.settled.get(slug)
    rec = None if sha is None else remote.record(slug, sha, SETTLED)
    if rec is None:
        return None
    outcome = rec.outcome()
    if outcome == FAILED:
        return _record_copy(remote, slug, FAILED, rec)
    if outcome == "retried":
        raise LeftFlight(
            f"{slug} was already retried, after the claim of {rec.holder()} ({where}): it is in todo/ for every clone"
            f" (`backlog take {slug}` claims it); retry refused",
            ended=rec.ended(),
        )
    raise LeftFlight(
        f"{slug} is {told(rec)} by {rec.holder()} ({where}), which is terminal: add a new task that names it",
        ended=rec.ended(),
    )


def later_failure(ctx: Context, slug: str, data: bytes) -> tuple[Located, bytes] | None:
    """The copy `retry` reopens when this clone's failed/ copy (`data`) is of an earlier generation
    than the failure the remote records: the task was retried since, perhaps by another clone, and
    failed again there (SPEC §8: a task failed on any clone is retried from any clone). None for
    anything else (the remote records this copy's own failure, a retry, a claim, an end): the copy
    here stands, and the retry's push says what became of the task, or resumes its own retry."""
    remote = ctx.backend.remote
    held = None if remote is None else _listed(ctx, remote, slug)
    if remote is None or held is None or slug not in held.settled:
        return None
    rec = remote.record(slug, held.settled[slug], SETTLED)
    try:
        if rec is None or rec.outcome() != FAILED or rec.generation <= generation(read_log(data, f"{slug}.md")):
            return None
    except BacklogError:
        return None
    return _record_copy(remote, slug, FAILED, rec)


def _listed(ctx: Context, remote: Remote, slug: str) -> Listing | None:
    """This command's listing of the remote (made once: the re-check under the lock reads it
    again, and the push is leased); None when the remote cannot be reached."""
    held = ctx.cache.get("remote-listing")
    if not isinstance(held, Listing):
        try:
            held = remote.listing(f"reading {slug} on the remote")
        except RemoteError:
            return None
        ctx.cache["remote-listing"] = held
    return held


class Seen(NamedTuple):
    """What `show` says of the remote: `status` (reached, unreachable, unconfigured; None: no
    remote declared), the record object of its JSON (None: the remote holds no ref of the slug),
    the lines it prints, its stderr lines, and the record's copy (shown when this clone has none)."""

    status: str | None
    record: dict[str, Any] | None = None
    lines: tuple[str, ...] = ()
    note: tuple[str, ...] = ()
    copy: tuple[Located, bytes] | None = None


def seen(ctx: Context, slug: str) -> Seen:
    """The remote's claim or settlement of `slug`, for `show` (one listing; one fetch when this
    clone lacks the record)."""
    if ctx.backend.unconfigured is not None:
        return Seen("unconfigured", note=(unconfigured_note(ctx.backend.unconfigured),))
    remote = ctx.backend.remote
    if remote is None:
        return Seen(None)
    try:
        held = remote.listing(f"reading {slug} on the remote")
        kind = CLAIMS if slug in held.claims else SETTLED if slug in held.settled else None
        sha = (held.claims if kind == CLAIMS else held.settled).get(slug, "") if kind else ""
        rec = remote.record(slug, sha, kind) if kind else None
    except RemoteError as exc:
        return Seen("unreachable", note=(crossclone.RemoteMarks(remote.name, exc.message).note()[0],))
    if kind is None:
        return Seen("reached")
    mine = sha == remote.mine(kind, slug)
    if rec is None:
        broken = remote.unreadable(kind, slug, sha) or "changed while reading it"
        item = {"ref": kind, "commit": sha, "this_clone": mine, "error": broken}
        return Seen("reached", item, (f"remote {remote.name}: {ref(kind, slug)} UNREADABLE: {broken}",))
    holder, ended = rec.claim_holder(), rec.ended()
    state = "in flight" if kind == CLAIMS else rec.outcome()
    item = {
        "ref": kind,
        "commit": sha,
        "this_clone": mine,
        "state": state,
        "cause": told(rec) if kind == SETTLED else None,
        "pile": rec.pile() if kind == CLAIMS else None,
        "holder": holder.data() if holder is not None else None,
        "settled": ended.data() if kind == SETTLED and ended is not None else None,
        "line": rec.line,
        "log": [views.entry(e) for e in rec.log],
    }
    whose = "this clone's" if mine else "another clone's"
    if kind == CLAIMS:
        since = f" since {format_ts(holder.since)}" if holder is not None and holder.since else ""
        said = f"in flight ({rec.pile() or '?'}/), {whose} claim: {rec.holder()}{since}"
        pile = rec.pile() or "todo"
    else:
        entry = rec.entry
        when = f" at {format_ts(entry.ts)}" if entry is not None else ""
        by = "after the claim of" if state == "retried" else "by"  # (the log names no one for a retry)
        said = f"{told(rec)} {by} {rec.holder()}{when} ({whose} record)"
        pile = {"done": "done", "cancelled": "done", "retried": "todo"}.get(state, FAILED)
    lines = [f"remote {remote.name}: {said}"]
    if not mine:
        lines.append(f"remote log ({ref(kind, slug)}):")
        lines += [f"  {render_log_line(e)}" for e in rec.log]
    return Seen("reached", item, tuple(lines), (), _record_copy(remote, slug, pile, rec, kind))
