"""The queue a worktree sees (SPEC §4 *One queue per clone*, §5 *Truthful views*): auto-pick's
candidates in order, this worktree's todo/ and the intake branch's, and each todo task's state
(ready, blocked, in flight elsewhere, settled elsewhere) for `list`, `status` and `ready`."""

from collections.abc import Container, Iterable, Iterator
from functools import partial
from itertools import chain, compress, repeat
from pathlib import Path

from . import argv, git, limits
from .backend import Located
from .backend.base import live_given
from .context import Context
from .errors import BacklogError
from .header import Summary, Titles
from .intake import Brief, Intake, added_times, briefs, read_intake
from .ledger import Settled
from .lifecycle import cause, claim_in, holder, unmet
from .logline import read_log
from .project import FAILED
from .storage import names
from .typed import NamedTuple


# -- auto-pick ------------------------------------------------------------------------------
def intake_of(ctx: Context) -> Intake | None:
    """The intake branch's listing, read once per command (None: nothing to read)."""
    if "intake" not in ctx.cache:
        remote = ctx.backend.configured_remote  # SPEC §8: the remote's intake branch is the queue, as fetched
        if remote is not None:
            remote.follow()  # one listing, kept for the verb's own; one fetch only when the branch moved
        read = read_intake(ctx.repo, ctx.project, remote.name if remote is not None else None)
        ctx.cache["intake"] = read
        if read is not None:
            ctx.backend.skipped.extend(line for line in read.skipped if line not in ctx.backend.skipped)
    found = ctx.cache["intake"]
    return found if isinstance(found, Intake) else None


def intake_copy(ctx: Context, slug: str) -> tuple[Located, bytes] | None:
    """The intake branch's todo copy of `slug` when this worktree has none in any pile."""
    intake = intake_of(ctx)
    if intake is None or slug not in intake.todo:
        return None
    data = intake.read(ctx.repo, slug)
    return Located(slug, "todo", Path(f"{intake.todo[slug].branch}:{ctx.backend.display('todo', slug)}"), False), data


def settled_copy(ctx: Context, slug: str) -> tuple[Located, bytes, Settled] | None:
    """Where the clone knows `slug` settled on another branch (the ledger), with that branch's
    copy of it (`done/` or `failed/` in the branch's current commit, read through git objects,
    size asked first); None when the ledger knows nothing of it or the copy is not there."""
    entry = ctx.backend.settled(slug)
    if entry is None or argv.branch_name_problem(entry.branch):
        return None
    for pile in ("todo",) if entry.outcome == "retried" else ("done", "failed"):
        spec = f"refs/heads/{entry.branch}:{ctx.backend.display(pile, slug)}"
        data = git.objects(ctx.repo.toplevel, [spec], limits.TASK_BYTES).get(spec)
        if isinstance(data, bytes):
            return Located(slug, pile, Path(f"{entry.branch}:{ctx.backend.display(pile, slug)}"), False), data, entry
    return None


def cause_elsewhere(ctx: Context, slug: str, entry: Settled) -> str:
    """How the task left flight where it settled, as that copy's log says (a timeout, a reason),
    else the ledger's outcome."""
    found = settled_copy(ctx, slug)
    try:
        told = cause(read_log(found[1])) if found is not None and found[0].pile != "todo" else None
    except BacklogError:  # a copy that cannot be read still counts as settled: the ledger's word then
        told = None
    return told or entry.outcome


def live(ctx: Context, locs: list[Located], intake: Intake) -> list[Located]:
    """`locs` less a failed/ copy that a later `retry` superseded (the ledger's latest record of the
    slug is `retried`, or the intake branch holds a later generation: `Intake.reopens`): the task
    lives on in todo/ of the intake branch, which this copy must not hide."""
    kept = live_given(locs, ctx.backend.settled(locs[0].slug) if locs else None)
    return [c for c in kept if c.pile != FAILED or not intake.reopens(ctx.repo, c.slug, partial(ctx.backend.read, c))]


def _lacked(ctx: Context, intake: Intake, local: Container[str], skip: Container[str] = ()) -> dict[str, Brief]:
    """The intake branch's todo tasks this worktree lacks (`local`: its todo/ slugs; `skip`: more
    not to read), less those with a live copy in another pile here, briefed; and those whose copy
    here is stale while the intake branch's is live (`gave_way`)."""
    over = gave_way(ctx, intake, [s for s in intake.todo if s in local and s not in skip])
    lacked = [
        s for s in intake.todo if s not in local and s not in skip and not live(ctx, ctx.backend.locate(s), intake)
    ]
    return briefs(ctx.repo, ctx.project, intake, lacked + sorted(over))


def gave_way(ctx: Context, intake: Intake, slugs: list[str]) -> set[str]:
    """Those of `slugs` whose copy here the ledger blocks while the intake branch holds one reopened
    since (SPEC §4: the live copy is the task, offered and claimed instead)."""
    settled = ctx.backend.settled_names()
    return {
        s
        for s in slugs
        if s in settled
        and s in intake.todo
        and _blocked_copy(ctx, s, "here", intake)
        and not _blocked_copy(ctx, s, "intake", intake)
    }


def live_intake_copy(ctx: Context, slug: str) -> tuple[Located, bytes] | None:
    intake = intake_of(ctx)  # the intake branch's copy, when this worktree's stale one gave way to it
    return intake_copy(ctx, slug) if intake is not None and gave_way(ctx, intake, [slug]) else None


def stale_here(ctx: Context, slug: str) -> bool:
    """Is this worktree's todo/ copy of `slug` a stale copy of a task settled elsewhere?"""
    return ctx.backend.settled(slug) is not None and _blocked_copy(ctx, slug, "here", intake_of(ctx))


NEWEST = 1 << 62  # when git recorded a todo task it has not recorded yet: newer than every committed one


SPREAD_MAX = 64  # at most this many in-flight tasks are read to find another claimer


def spread(ctx: Context, claimer: str, order: list[str], best: int, others: bool = False) -> list[str]:
    """Auto-pick's order for this claimer: no herd when many agents take at once.

    A lone worker (no claim of another claimer in flight) gets the documented order unchanged.
    Otherwise agents that take at the same moment would all race for the same best task, and
    after a loss all race for the next one: so this claimer goes round the `best` equally ranked
    first candidates (same priority) starting at a place of its own, a hash of its identity, and
    then on in the documented order. `others`: the caller knows of other claimers already (another
    clone's claim on the remote). See docs/design.md, *No herd*."""
    if best <= 1 or not (others or _others_in_flight(ctx, claimer)):
        return order
    import zlib  # (here: only a pick among other claimers' claims hashes; no other call loads it)

    start = zlib.crc32(claimer.encode()) % best
    return order[start:best] + order[:start] + order[best:]


def _others_in_flight(ctx: Context, claimer: str) -> bool:
    """Does another claimer hold a task in flight in this clone?"""
    for locs in list(ctx.backend.in_flight().values())[:SPREAD_MAX]:
        try:
            claim = claim_in(read_log(ctx.backend.read(locs[0])))
        except (BacklogError, OSError):
            continue
        if claim is not None and claim.get("claimer") != claimer:
            return True
    return False


def done_and_intake(ctx: Context) -> tuple[set[str], Intake | None]:
    """Every slug in done/ here or on the intake branch (what a dependency needs), and the intake listing."""
    done = set(ctx.backend.slugs("done"))
    intake = intake_of(ctx)
    if intake is not None:
        done |= intake.done
    return done, intake


class Ranking:
    """Auto-pick order (`ranking`), sorted as it is read: a priority's tasks are picked out
    (C-level passes over the summaries: a file's own summary is one of few distinct ones) and
    sorted (newest first, then slug) only when they are reached. A claim needs the best few of
    100,000 candidates, not all of them in order; `ready` reads every priority (`groups`)."""

    def __init__(
        self,
        local: dict[str, Summary],
        ok: dict[int, set[Summary]],
        excluded: set[str],
        extra: dict[int, list[str]],
        places: dict[str, str],
        added: dict[str, int],
    ) -> None:
        self._local = local  # this worktree's todo/: slug → summary
        self._ok = ok  # priority → the summaries that may be offered (valid, dependencies met)
        self._excluded = excluded  # this worktree's slugs never offered (in flight, stale copies)
        self._extra = extra  # priority → the intake branch's candidates
        self.places = places  # slug → "intake:<branch>" for the intake branch's (the rest are "here")
        self._added = added
        self._order = sorted(ok.keys() | extra.keys())
        self._best = 0  # index in `_order` of the first priority with a candidate

    def first(self) -> list[str]:
        """The equally ranked best (the lowest priority's tasks), in order; [] when none."""
        for n, priority in enumerate(self._order):
            found = self._sorted(priority)
            if found:
                self._best = n
                return found
        self._best = len(self._order)
        return []

    def after(self) -> Iterator[str]:
        """The rest, in order (each priority sorted when reached); after `first`."""
        return chain.from_iterable(map(self._sorted, self._order[self._best + 1 :]))

    def groups(self, limit: int | None = None) -> list[tuple[int, list[str]]]:
        """Every priority that has candidates, with its slugs in order: todo/ is split by priority in
        one pass. With `limit`, those that hold the first `limit`, each picked out when reached."""
        if limit is not None:
            head: list[tuple[int, list[str]]] = []
            for at in self._order:
                if sum(len(slugs) for _, slugs in head) >= limit:
                    break
                if slugs := self._sorted(at):
                    head.append((at, slugs))
            return head
        of = {summary: priority for priority, summaries in self._ok.items() for summary in summaries}
        split: dict[int, list[str]] = {priority: [] for priority in self._order}
        for slug, priority in zip(self._local.keys(), map(of.get, self._local.values()), strict=True):
            if priority is not None:
                split[priority].append(slug)
        return [(priority, found) for priority in self._order if (found := self._in_order(priority, split[priority]))]

    def _sorted(self, priority: int) -> list[str]:
        local, ok = self._local, self._ok.get(priority)
        return self._in_order(priority, compress(local.keys(), map(ok.__contains__, local.values())) if ok else ())

    def _in_order(self, priority: int, here: Iterable[str]) -> list[str]:
        """`here` (this worktree's of `priority`) less those never offered, and the intake branch's:
        by slug, then (stable) newest first by the second git recorded (never committed: newest);
        ties of one second fall back to the slug, the same in every worktree and clone."""
        slugs = set(here) - self._excluded
        slugs.update(self._extra.get(priority, ()))
        order = sorted(slugs)
        when = dict(zip(order, map(self._added.get, order, repeat(NEWEST)), strict=True))  # (no frame a slug)
        order.sort(key=when.__getitem__, reverse=True)
        return order


def ranking(ctx: Context, skipped: list[str] | None = None, titles: Titles | None = None) -> Ranking:
    """Auto-pick order, to be read as `Ranking` reads it: todo tasks (this worktree's, and the
    intake branch's that this worktree lacks) not in flight anywhere, not settled elsewhere, every
    dependency done anywhere in the clone; priority ascending, then newest (the time git recorded
    the task's addition, the same in every worktree; one never committed counts as newest), then
    slug. Unreadable or malformed todo files are left out, with one warning line each appended to
    `skipped`; `titles` gets todo/'s titles. Each rule is asked once per
    distinct answer: a summary once (valid, its dependencies met: the ledger read only for a slug
    it names), the ledger's stale copies from the set of settled slugs, a task in flight from
    the set of them."""
    flying = ctx.backend.in_flight()
    settled = ctx.backend.settled_names()
    done, intake = done_and_intake(ctx)
    local = ctx.backend.summaries("todo", titles)
    remote = ctx.backend.configured_remote.name if ctx.backend.configured_remote is not None else None
    added = added_times(
        ctx.repo, ctx.project, remote
    )  # (after the summaries: their peak of memory is not on top of it)
    stale = {s for s in local.keys() & settled if s not in flying and _blocked_copy(ctx, s, "here", intake)}
    memo: dict[tuple[str, ...], tuple[str, ...]] = {}
    ok = _ready_summaries(ctx, local, done, settled, memo, skipped)
    extra: dict[int, list[str]] = {}
    places: dict[str, str] = {}
    if intake is not None:
        for slug, brief in _lacked(ctx, intake, local, flying).items():
            if brief.error:
                if skipped is not None:
                    skipped.append(f"warning: skipped {brief.error}")
                continue
            if _unmet(ctx, brief.dependencies, done, settled, memo):
                continue
            if slug in settled and _blocked_copy(ctx, slug, "intake", intake):
                continue
            extra.setdefault(brief.priority, []).append(slug)
            places[slug] = f"intake:{intake.todo[slug].branch}"
    return Ranking(local, ok, flying.keys() | stale, extra, places, added)


def _ready_summaries(
    ctx: Context,
    local: dict[str, Summary],
    done: set[str],
    settled: set[str],
    memo: dict[tuple[str, ...], tuple[str, ...]],
    skipped: list[str] | None,
) -> dict[int, set[Summary]]:
    """`ranking`'s summaries of todo/ that are valid with their dependencies met, by priority,
    each distinct summary asked once; a warning in `skipped` for each invalid file."""
    ok: dict[int, set[Summary]] = {}
    errors: set[Summary] = set()
    for summary in set(local.values()):
        if summary.error:
            errors.add(summary)
        elif not _unmet(ctx, summary.dependencies, done, settled, memo):
            ok.setdefault(summary.priority, set()).add(summary)
    if errors and skipped is not None:  # one line per file, sorted (a set's order is no order)
        skipped += sorted(
            f"warning: skipped {s.error}" for s in compress(local.values(), map(errors.__contains__, local.values()))
        )
    return ok


def _unmet(
    ctx: Context, deps: tuple[str, ...], done: set[str], settled: set[str], memo: dict[tuple[str, ...], tuple[str, ...]]
) -> tuple[str, ...]:
    """`lifecycle.unmet`, asked once per dependency list, and of the ledger only for a slug it
    holds (`settled`: its names): one not in it is not settled, so not done."""
    if not deps:
        return ()
    found = memo.get(deps)
    if found is None:
        found = memo[deps] = tuple(d for d in deps if d not in done and (d not in settled or unmet(ctx, (d,), done)))
    return found


# -- the clone's view of todo/ (SPEC §5 *Truthful views*) -------------------------------------
class TodoState(NamedTuple):
    slug: str
    where: str  # "here", or "intake:<branch>"
    state: str  # ready, blocked, in flight, settled elsewhere, invalid
    priority: int = 0
    detail: str = ""  # who holds it, where it settled, what blocks it, what is wrong
    blocked_by: tuple[str, ...] = ()

    @property
    def counts(self) -> bool:
        """Is this copy the task's place in the queue? (Not when it is only a stale copy.)"""
        return self.state in ("ready", "blocked", "invalid")


def todo_states(ctx: Context) -> list[TodoState]:
    """Every todo task this worktree can see, each once: its own todo/ copies and the intake
    branch's tasks it lacks, each marked in flight elsewhere (by whom), settled elsewhere
    (where), blocked (by what), or ready. Sorted by priority, then slug."""
    flying = ctx.backend.in_flight()
    settled = ctx.backend.settled_names()
    done, intake = done_and_intake(ctx)
    rows: list[tuple[str, str, int, tuple[str, ...], str | None]] = []
    local = ctx.backend.summaries("todo")
    for slug, summary in local.items():
        rows.append((slug, "here", summary.priority, summary.dependencies, summary.error))
    if intake is not None:
        lacked = _lacked(ctx, intake, local)
        rows = [row for row in rows if row[0] not in lacked]  # a stale copy here gave way to the intake's
        for slug, brief in lacked.items():
            rows.append((slug, f"intake:{intake.todo[slug].branch}", brief.priority, brief.dependencies, brief.error))
    memo: dict[tuple[str, ...], tuple[str, ...]] = {}
    states = [_state(ctx, row, flying, settled, done, intake, memo) for row in rows]
    return sorted(states, key=lambda s: (s.priority, s.slug))


def _state(
    ctx: Context,
    row: tuple[str, str, int, tuple[str, ...], str | None],
    flying: dict[str, list[Located]],
    settled: set[str],
    done: set[str],
    intake: Intake | None,
    memo: dict[tuple[str, ...], tuple[str, ...]] | None = None,
) -> TodoState:
    """The state of one todo copy (`row`: slug, place, priority, dependencies, error)."""
    slug, place, priority, deps, error = row
    if error:
        return TodoState(slug, place, "invalid", priority, error)
    if slug in flying:
        loc = flying[slug][0]
        try:
            claim = claim_in(read_log(ctx.backend.read(loc)))
        except (BacklogError, OSError):
            claim = None
        who = f" by {holder(claim)}" if claim is not None else ""
        return TodoState(slug, place, "in flight", priority, f"in {loc.pile}/{who}")
    if slug in settled and _blocked_copy(ctx, slug, place, intake):
        entry = ctx.backend.settled(slug)
        there = f"{entry.outcome} on branch {entry.branch}" if entry is not None else "settled"
        there += f" (now {entry.to})" if entry is not None and entry.to else ""
        return TodoState(slug, place, "settled elsewhere", priority, there)
    blocked = _unmet(ctx, deps, done, settled, memo if memo is not None else {})
    if blocked:
        return TodoState(slug, place, "blocked", priority, ", ".join(blocked), blocked)
    return TodoState(slug, place, "ready", priority)


class Tally(NamedTuple):
    """todo/ as `status` counts it: what `todo_states` would say of each task's place in the
    queue, without parsing the tasks that plainly count (neither in flight nor in the ledger)."""

    here: set[str]  # this worktree's todo tasks that count (ready, blocked or invalid)
    incoming: list[str]  # the intake branch's tasks this worktree lacks that count
    uncounted: list[TodoState]  # the stale copies (in flight or settled elsewhere), by priority and slug


def todo_tally(ctx: Context) -> Tally:
    """`todo_states`, reduced to what counts, from one listing of todo/: a copy is parsed only
    when it is in flight or its slug is in the ledger (an invalid one counts; a valid one is a
    stale copy, or counts after all), so the cost is a listing and two set differences, not a
    parse (or a stat) per task. The intake branch's tasks are read as `todo_states` reads them."""
    flying = ctx.backend.in_flight()
    settled = ctx.backend.settled_names()
    done, intake = done_and_intake(ctx)
    local = names(ctx.backend.pile_dir("todo"))
    here = local - flying.keys() - settled
    uncounted: list[TodoState] = []
    for slug in sorted(local - here):  # in flight, or in the ledger: decided as todo_states decides
        found = summary_here(ctx, slug)
        if found is None:
            local.discard(slug)  # gone since the listing
            continue
        t = _state(ctx, (slug, "here", found.priority, found.dependencies, found.error), flying, settled, done, intake)
        if t.counts:
            here.add(slug)
        else:
            uncounted.append(t)
    incoming: list[str] = []
    if intake is not None:
        lacked = _lacked(ctx, intake, local)
        uncounted = [t for t in uncounted if t.slug not in lacked]  # a stale copy here gave way to the intake's
        for slug, brief in lacked.items():
            place = f"intake:{intake.todo[slug].branch}"
            t = _state(ctx, (slug, place, brief.priority, (), brief.error), flying, settled, done, intake)
            if t.counts:
                incoming.append(slug)
            else:
                uncounted.append(t)
    uncounted.sort(key=lambda s: (s.priority, s.slug))
    return Tally(here, incoming, uncounted)


def summary_here(ctx: Context, slug: str) -> Summary | None:
    """The summary of this worktree's todo/ copy of `slug` as `Backend.summaries` gives it (an
    invalid file's error in it); None when the file is gone."""
    loc = Located(slug, "todo", ctx.backend.task_path("todo", slug), False)
    try:
        task = ctx.backend.load(loc)
    except FileNotFoundError:
        return None
    except BacklogError as exc:
        return Summary(0, (), exc.message)
    return Summary(task.priority, tuple(task.dependencies), None)


def _blocked_copy(ctx: Context, slug: str, place: str, intake: Intake | None) -> bool:
    """Is the todo copy of `slug` (place "here": this worktree's; else the intake branch's) a stale
    copy of a task the ledger has settled? One unreadable counts as stale (it is not offered)."""
    entry = ctx.backend.settled(slug)
    if entry is None:
        return False
    try:
        if place == "here":
            log = read_log(ctx.backend.read(Located(slug, "todo", ctx.backend.task_path("todo", slug), False)))
        else:
            assert intake is not None  # noqa: S101 (narrows a type for mypy; established just above, never input-dependent)
            log = read_log(intake.read(ctx.repo, slug))
    except (BacklogError, OSError):
        return True
    return entry.blocks_log(log)
