"""The queue a worktree sees (SPEC §4 *One queue per clone*, §5 *Truthful views*): auto-pick's
candidates in order, this worktree's todo/ and the intake branch's, and each todo task's state
(ready, blocked, in flight elsewhere, settled elsewhere) for `list`, `status` and `ready`."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import NamedTuple

from . import argv, git, limits
from .backend import Located
from .context import Context
from .errors import BacklogError
from .intake import Intake, added_times, briefs, read_intake
from .ledger import Settled
from .lifecycle import claim_in, holder, unmet
from .logline import read_log
from .project import FAILED


# -- auto-pick ------------------------------------------------------------------------------
class Candidate(NamedTuple):  # a tuple: a ranking of 100,000 tasks builds one per task
    slug: str
    priority: int
    where: str  # "here", or "intake:<branch>" for a task only the intake branch holds yet


def intake_of(ctx: Context) -> Intake | None:
    """The intake branch's listing, read once per command (None: nothing to read)."""
    if "intake" not in ctx.cache:
        read = read_intake(ctx.repo, ctx.project)
        ctx.cache["intake"] = read
        if read is not None:
            ctx.backend.skipped.extend(line for line in read.skipped if line not in ctx.backend.skipped)
    found = ctx.cache["intake"]
    return found if isinstance(found, Intake) else None


def is_intake(loc: Located) -> bool:
    """A todo copy that lives on the intake branch only (its path is `<branch>:backlog/todo/…`)."""
    return not loc.path.is_absolute()


def intake_copy(ctx: Context, slug: str) -> tuple[Located, bytes] | None:
    """The intake branch's todo copy of `slug` when this worktree has none in any pile."""
    intake = intake_of(ctx)
    if intake is None or slug not in intake.todo:
        return None
    data = intake.read(ctx.repo, slug)
    return Located(slug, "todo", Path(f"{intake.branch}:{ctx.backend.display('todo', slug)}"), False), data


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


def live(ctx: Context, locs: list[Located]) -> list[Located]:
    """`locs` less a failed/ copy that a later `retry` superseded (the ledger's latest record of the
    slug is `retried`): the task lives on in todo/ of the intake branch, which this copy must not hide."""
    return live_given(locs, ctx.backend.settled(locs[0].slug) if locs else None)


def live_given(locs: list[Located], entry: Settled | None) -> list[Located]:
    """`live`, given the ledger's latest record of the slug (`entry`, already read)."""
    if entry is None or entry.outcome != "retried":
        return locs
    return [loc for loc in locs if loc.pile != FAILED]


def stale_here(ctx: Context, slug: str) -> bool:
    """Is this worktree's todo/ copy of `slug` a stale copy of a task settled elsewhere?"""
    return ctx.backend.settled(slug) is not None and _blocked_copy(ctx, slug, "here", intake_of(ctx))


def candidates(ctx: Context, skipped: list[str] | None = None) -> list[str]:
    return [c.slug for c in ranked(ctx, skipped)]


NEWEST = (1 << 62, 0)  # when git recorded a todo task it has not recorded yet: newer than every committed one


def _newest_first(added: dict[str, tuple[int, int]], slug: str) -> tuple[int, int]:
    when, seq = added.get(slug, NEWEST)
    return -when, -seq


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


def ranked(ctx: Context, skipped: list[str] | None = None) -> list[Candidate]:
    """Auto-pick order: todo tasks (this worktree's, and the intake branch's that this worktree
    lacks) not in flight anywhere, not settled elsewhere, every dependency done anywhere in the
    clone; priority ascending, then newest (the time git recorded the task's addition, the same
    in every worktree; one never committed counts as newest), then slug. Unreadable or malformed
    todo files are left out, with one warning line each appended to `skipped`."""
    flying = ctx.backend.in_flight()
    settled = ctx.backend.settled_names()
    done, intake = done_and_intake(ctx)
    ranked: list[tuple[int, tuple[int, int], str, str]] = []
    added = added_times(ctx.repo, ctx.project)
    local = ctx.backend.summaries("todo")
    for slug, summary in local.items():
        if summary.error:
            if skipped is not None:
                skipped.append(f"warning: skipped {summary.error}")
            continue
        if slug in flying:
            continue
        if unmet(ctx, summary.dependencies, done):
            continue
        if slug in settled and _blocked_copy(ctx, slug, "here", intake):
            continue
        ranked.append((summary.priority, _newest_first(added, slug), slug, "here"))
    if intake is not None:
        elsewhere = [
            s for s in intake.todo if s not in local and s not in flying and not live(ctx, ctx.backend.locate(s))
        ]
        for slug, brief in briefs(ctx.repo, ctx.project, intake, elsewhere).items():
            if brief.error:
                if skipped is not None:
                    skipped.append(f"warning: skipped {brief.error}")
                continue
            if unmet(ctx, brief.dependencies, done):
                continue
            if slug in settled and _blocked_copy(ctx, slug, "intake", intake):
                continue
            ranked.append((brief.priority, _newest_first(added, slug), slug, f"intake:{intake.branch}"))
    ranked.sort()
    return [Candidate(slug, priority, where) for priority, _, slug, where in ranked]


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
    rows: list[tuple[str, str, int, tuple[str, ...], str | None, bytes | None]] = []
    local = ctx.backend.summaries("todo")
    for slug, summary in local.items():
        rows.append((slug, "here", summary.priority, summary.dependencies, summary.error, None))
    if intake is not None:
        elsewhere = [s for s in intake.todo if s not in local and not live(ctx, ctx.backend.locate(s))]
        for slug, brief in briefs(ctx.repo, ctx.project, intake, elsewhere).items():
            rows.append((slug, f"intake:{intake.branch}", brief.priority, brief.dependencies, brief.error, None))
    states = []
    for slug, place, priority, deps, error, _ in rows:
        if error:
            states.append(TodoState(slug, place, "invalid", priority, error))
        elif slug in flying:
            loc = flying[slug][0]
            try:
                claim = claim_in(read_log(ctx.backend.read(loc)))
            except (BacklogError, OSError):
                claim = None
            who = f" by {holder(claim)}" if claim is not None else ""
            states.append(TodoState(slug, place, "in flight", priority, f"in {loc.pile}/{who}"))
        elif slug in settled and _blocked_copy(ctx, slug, place, intake):
            entry = ctx.backend.settled(slug)
            there = f"{entry.outcome} on branch {entry.branch}" if entry is not None else "settled"
            there += f" (now {entry.to})" if entry is not None and entry.to else ""
            states.append(TodoState(slug, place, "settled elsewhere", priority, there))
        else:
            blocked = tuple(unmet(ctx, deps, done))
            if blocked:
                states.append(TodoState(slug, place, "blocked", priority, ", ".join(blocked), blocked))
            else:
                states.append(TodoState(slug, place, "ready", priority))
    return sorted(states, key=lambda s: (s.priority, s.slug))


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
