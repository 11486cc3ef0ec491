"""The claim lifecycle every command shares: finding a task, its budget, how its log ends, the
lock-and-recheck discipline, settling a task out of flight, and the commit messages. Commands call
these; they never reach into each other. The remote's modules are imported where a remote acts."""

from __future__ import annotations

import os
from collections.abc import Callable, Container, Iterable
from datetime import datetime, timedelta

from .backend import Located
from .backend.base import relisted
from .change import Change, Memory
from .clock import Budget, format_ts, now_utc, parse_budget
from .context import Context, Result, claimer_id
from .errors import BacklogError, Conflict, Ended, Held, Holder, InvalidInput, LeftFlight, Unavailable
from .ledger import RENAMED, Settled, renamed_to
from .logline import LogEntry, append_line, field_value, generation, make_entry, read_log, render_log_line
from .project import FAILED
from .task import Task
from .typed import TYPE_CHECKING

if TYPE_CHECKING:
    from .remote import Lost

Check = Callable[[], tuple[Located, bytes]]
Body = Callable[[Located, bytes], Result]


# -- lookup ---------------------------------------------------------------------------------
def where(locs: Iterable[Located]) -> str:
    return ", ".join(f"{loc.pile}/" for loc in locs)


def ended_in(ctx: Context, loc: Located) -> Ended:
    """What became of a task found in done/ or failed/ of this worktree (its last terminal line)."""
    try:
        term = terminal_event(ctx.backend.load(loc))
    except (BacklogError, OSError):
        term = None
    state = term[0] if term is not None else "done" if loc.pile == "done" else FAILED
    return Ended(state, ctx.repo.branch, term[2].ts if term is not None else None)


def ended_here(ctx: Context, loc: Located, then: str) -> LeftFlight:
    """The refusal for a task in this worktree's done/ or failed/: `<slug> is in failed/ (how it
    got there, as its log says)` + `then`."""
    try:
        how = cause(ctx.backend.load(loc).log)
    except (BacklogError, OSError):
        how = None
    said = f" ({how})" if how else ""
    return LeftFlight(f"{loc.slug} is in {loc.pile}/{said}{then}", ended=ended_in(ctx, loc))


def single_in_flight(ctx: Context, slug: str) -> Located | None:
    """The in-flight copy of `slug` when it is its only in-flight copy (else None)."""
    flying = [loc for loc in ctx.backend.locate(slug) if ctx.pipeline.is_in_flight(loc.pile)]
    return flying[0] if len(flying) == 1 else None


def unmet(ctx: Context, deps: Iterable[str], done: Container[str] | None = None) -> list[str]:
    """The dependencies done nowhere in the clone (SPEC §4): neither in `done` (default: this
    branch's done/; callers add the intake branch's) nor settled done or cancelled by the ledger."""
    done = ctx.backend.slugs("done") if done is None else done
    missing = []
    for dep in deps:  # a renamed task's dependency is met when it is done under its new name
        name, entry = (dep, None) if dep in done else renamed_to(ctx.backend.settled, dep, done)
        if name not in done and (entry is None or entry.outcome not in ("done", "cancelled")):
            missing.append(dep)
    return missing


# -- budgets --------------------------------------------------------------------------------
def budget_of(task: Task, loc: Located) -> Budget:
    """The budget of the running clock. It is fixed on the line that started the clock
    (`budget=3d`), so every worktree reads the same one whatever its AGENTS.md says; a line
    without it (older files) gets the rule of SPEC §2 for the pile the task is in."""
    rule = task.budget_in(loc.pile)
    entry = task.clock_entry()
    recorded = entry.get("budget") if entry is not None else None
    if recorded:
        try:
            limit = parse_budget(recorded)
        except InvalidInput:
            return rule
        return Budget(limit, recorded, rule.default and rule.text == recorded)
    return rule


def budget(task: Task, loc: Located) -> str:
    return str(budget_of(task, loc))


def clock_start(task: Task, loc: Located) -> datetime:
    start = task.clock_start()
    if start is None:
        start = datetime.fromtimestamp(os.lstat(loc.path).st_mtime, tz=now_utc().tzinfo)
    return start


def deadline(task: Task, loc: Located) -> datetime | None:
    """When the task times out; None when its pile has no budget (or past the calendar's end)."""
    limit = budget_of(task, loc).limit
    if limit is None:
        return None
    try:
        return clock_start(task, loc) + limit
    except OverflowError:
        return None


def time_left(task: Task, loc: Located, now: datetime | None = None) -> timedelta | None:
    end = deadline(task, loc)
    return None if end is None else end - (now or now_utc())


def is_timed_out(task: Task, loc: Located, now: datetime | None = None) -> bool:
    left = time_left(task, loc, now)
    return left is not None and left < timedelta(0)


def timeout_reason(task: Task, loc: Located) -> str:
    claim = task.claim_of_record()
    claimer = claim.get("claimer", "?") if claim else "?"
    return f"timeout: budget={budget(task, loc)}, claimed={format_ts(clock_start(task, loc))}, claimer={claimer}"


# -- how a log ends -------------------------------------------------------------------------
def terminal_event(task: Task) -> tuple[str, str, LogEntry] | None:
    """(outcome, destination pile, entry) when the log's last transition is terminal."""
    return terminal_in(task.log)


def refuse_if_ended(slug: str, log: list[LogEntry]) -> None:
    """An in-flight copy whose log already ended (a verb killed before its move) takes no
    further transition: `maintain` finishes that move. Otherwise a generation would end twice."""
    ended = terminal_in(log)
    if ended is not None:
        claim = claim_in(log)
        raise LeftFlight(
            f"{slug} already ended ({ended[0]} at {format_ts(ended[2].ts)}): `backlog maintain` finishes moving it",
            ended=Ended(ended[0], claim.get("branch") if claim else None, ended[2].ts),
        )


def terminal_in(log: list[LogEntry]) -> tuple[str, str, LogEntry] | None:
    for entry in reversed(log):
        if entry.kind == "progress":
            continue
        if entry.kind == "advanced" and entry.get("to") == "done":
            return "done", "done", entry
        if entry.kind == "cancelled":
            return "cancelled", "done", entry
        if entry.kind == "failed":
            return "failed", FAILED, entry
        return None
    return None


def cause(log: list[LogEntry]) -> str | None:
    """How a settled copy's log says the task left flight, for a refusal (SPEC §5 *Ownership*):
    `failed by timeout (budget=…)`, `failed (reason)`, `cancelled (reason)`, `done`; None when the
    log does not end in flight's end."""
    ended = terminal_in(log)
    if ended is None:
        return None
    outcome, _pile, entry = ended
    reason = " ".join((entry.text or "").split())
    if outcome == FAILED and reason.startswith("timeout:"):
        return f"failed by timeout ({reason.removeprefix('timeout:').strip()})"
    if outcome == "done":
        return "done"
    return f"{outcome} ({reason})" if reason else outcome


def stale_copy(entry: Settled, how: str | None = None) -> LeftFlight:
    """Why a copy may not be claimed (or retried): the ledger knows a newer state on another branch
    (`how`: what that branch's copy says of it, `cause`)."""
    ended = Ended(entry.outcome, entry.branch, entry.ts)
    if entry.outcome == RENAMED:
        return LeftFlight(
            f"{entry.slug} was renamed to {entry.to or '?'} on branch {entry.branch}: this copy is stale"
            f" (merge {entry.branch}; the task is {entry.to or '?'} now)",
            ended=ended,
        )
    if entry.outcome == "retried":
        return LeftFlight(
            f"{entry.slug} was retried on branch {entry.branch}: this copy is stale"
            f" (merge {entry.branch} to get the retried task)",
            ended=ended,
        )
    return LeftFlight(
        f"{entry.slug} was already settled ({how or entry.outcome}) on branch {entry.branch}:"
        f" this copy is stale (merge {entry.branch}, or retry it there)",
        ended=ended,
    )


# -- ownership (SPEC §5, §7.9) ---------------------------------------------------------------
def claim_in(log: list[LogEntry]) -> LogEntry | None:
    """The claim of record: the latest `advanced` line carrying `claimer=`, or the latest `rescued`."""
    for entry in reversed(log):
        if entry.kind == "rescued" or (entry.kind == "advanced" and entry.get("claimer")):
            return entry
    return None


def holder(claim: LogEntry) -> str:
    since = f" since {format_ts(claim.ts)}"
    return f"{claim.get('claimer', '?')} @ {claim.get('branch', '?')}{since}"


def holder_of(claim: LogEntry | None) -> Holder | None:
    """The claim of record as the error object's `holder`."""
    return None if claim is None else Holder(claim.get("claimer"), claim.get("branch"), claim.ts)


def is_holder(claim: LogEntry, claimer: str, branch: str | None) -> bool:
    """The holder is the claimer identity *and* the branch of record (SPEC §5 Ownership): two
    agents on one branch are two holders. A claimer written with spaces (the older tool) is
    compared as this tool writes it."""
    return claim.get("branch") == branch and field_value(claim.get("claimer") or "") == claimer


def actor_fields(ctx: Context, slug: str, log: list[LogEntry], force: bool) -> dict[str, str | None]:
    """Only the holder acts: {} for the claimer of record on its branch; `by=<actor>` for a
    forced verb by anyone else; otherwise refused (exit 1) naming the claimer and branch of record."""
    claim = claim_in(log)
    me = claimer_id()
    if claim is None or is_holder(claim, me, ctx.repo.branch):
        return {}
    if force:
        return {"by": me}
    raise Held(
        f"{slug} is claimed by {holder(claim)}: only its holder acts on it (run this as"
        f" {claim.get('claimer', '?')} on branch {claim.get('branch', '?')}, or add --force to act as {me})",
        holder=holder_of(claim),
    )


# -- lock and re-check ----------------------------------------------------------------------
def locked_change(ctx: Context, slug: str, check: Check, body: Body, checked: bool = False) -> Result:
    """Run `check` unlocked (failures are refusals; `checked`: the caller just did), then under
    the task's lock again (failures there mean another process changed the task meanwhile:
    Conflict), then `body`. A copy `check` found, then could not read, is looked up again (`relisted`)."""
    if not checked:
        relisted(slug, lambda _first: check())
    with ctx.backend.lock(slug):
        try:
            loc, data = relisted(slug, lambda _first: check())
        except (Conflict, Unavailable):
            raise
        except Held as exc:  # claimed while the caller waited: a lost race, naming the holder
            raise Conflict(exc.message, holder=exc.holder) from None
        except BacklogError as exc:
            raise Conflict(
                f"{slug} changed while waiting for its lock: {exc.message}", holder=exc.holder, ended=exc.ended
            ) from None
        try:
            return body(loc, data)
        except Conflict as exc:  # SPEC §8: a remote's `Lost` (another clone settled this claim): the copy follows
            from .remote import Lost  # (here, not at the top: a call without a remote never loads its modules)

            if isinstance(exc, Lost):
                raise follow_remote(ctx, slug, exc) from None
            raise


def same_pile(ctx: Context, slug: str, start: str, find: Callable[[], Located]) -> Check:
    """A re-check: the task is still where the verb first found it (`find` locates it)."""

    def check() -> tuple[Located, bytes]:
        now = find()
        if now.pile != start:
            raise BacklogError(f"{slug} is now in {now.pile}/")
        return now, ctx.backend.read(now)

    return check


# -- commit messages ------------------------------------------------------------------------
def actor_label(ctx: Context) -> str:
    return f"{claimer_id()} @ {ctx.repo.branch or 'HEAD'}"


def msg_add(slug: str) -> str:
    return f"add({slug})"


def msg_edit(slug: str, pairs: list[str]) -> str:
    """edit(slug) key=value,key=value: the fields an edit changed, as given."""
    return f"edit({slug}) {','.join(pairs)}"


def msg_advance(slug: str, pile: str, label: str) -> str:
    return f"advance({slug}) → {pile} ({label})"


def msg_done(slug: str, pr: str | None) -> str:
    return f"advance({slug}) → done" + (f" PR={pr}" if pr else "")


def msg_end(slug: str, kind: str, text: str) -> str:
    """cancel(slug) reason / fail(slug) reason / retry(slug) reason / release(slug)[ reason]."""
    verb = {"cancelled": "cancel", "failed": "fail", "retried": "retry", "released": "release"}[kind]
    return f"{verb}({slug}) {text}".rstrip()


def msg_progress(slug: str, note: str) -> str:
    return f"progress({slug}) {note}"


def msg_rescue(slug: str, label: str) -> str:
    return f"rescue({slug}) {label}"


def msg_terminal(slug: str, outcome: str, entry: LogEntry) -> str:
    """The commit message of a settlement, rebuilt from its terminal log line (the janitor's)."""
    if outcome == "done":
        return msg_done(slug, entry.text.removeprefix("PR=") if entry.text and entry.text.startswith("PR=") else None)
    return msg_end(slug, outcome, entry.text or outcome)


# -- settling -------------------------------------------------------------------------------
def settled_record(ctx: Context, slug: str, outcome: str, gen: int, ts: datetime | None = None) -> Settled:
    """The ledger entry for `slug` leaving flight (or being retried) in generation `gen`."""
    return Settled(slug, ts or now_utc(), outcome, ctx.repo.branch or "HEAD", claimer_id(), gen)


def settle(ctx: Context, slug: str, loc: Located, data: bytes, pile: str, entry: LogEntry, message: str) -> Result:
    """Leave flight with `entry` as the terminal line (caller holds the lock, has re-checked)."""
    new = append_line(data, entry, ctx.backend.display(loc.pile, slug))
    outcome = {"advanced": "done"}.get(entry.kind, entry.kind)
    record = settled_record(ctx, slug, outcome, generation(read_log(data)))
    dst = ctx.backend.apply(slug, loc, pile, new, message, settle=record, old=data)
    shown = ctx.backend.display(dst.pile, slug)
    return Result({"slug": slug, "pile": dst.pile, "path": shown}, [shown])


def finish_move(ctx: Context, slug: str, loc: Located, data: bytes, term: tuple[str, str, LogEntry]) -> str:
    """Move an in-flight copy whose log already ended to where its terminal line says (caller
    holds the lock). Returns the destination pile."""
    outcome, dest, entry = term
    message = msg_terminal(slug, outcome, entry)
    record = settled_record(ctx, slug, outcome, generation(read_log(data)))
    ctx.backend.apply(slug, loc, dest, data, message, settle=record, old=data)
    return dest


# -- timeouts -------------------------------------------------------------------------------
def fail_if_timed_out(ctx: Context, slug: str) -> str | None:
    """Fail `slug` if it is (still, under its lock) in flight, unfinished and past its budget.

    The prelude's and the janitor's fix. Returns the reason written, or None when there was
    nothing to do (it moved on meanwhile)."""
    with ctx.backend.lock(slug):
        loc = single_in_flight(ctx, slug)
        if loc is None:
            return None
        data = ctx.backend.read(loc)
        task = ctx.backend.load(loc, data)
        if terminal_event(task) is not None or not is_timed_out(task, loc):
            return None  # it ended (`maintain` finishes that move), or it is within budget
        reason = timeout_reason(task, loc)
        entry = make_entry("failed", {"by": claimer_id()}, reason)
        settle(ctx, slug, loc, data, FAILED, entry, msg_end(slug, "failed", reason))
        return reason


def prelude(ctx: Context, skip: str | None = None) -> list[str]:
    """Fail every timed-out in-flight task other than `skip`. Returns one line per task failed."""
    failed = []
    now = now_utc()
    for slug, locs in sorted(ctx.backend.in_flight().items()):
        if slug == skip or len(locs) != 1:
            continue
        try:
            task = ctx.backend.load(locs[0])
            if terminal_event(task) is not None or not is_timed_out(task, locs[0], now):
                continue
            reason = fail_if_timed_out(ctx, slug)
        except (BacklogError, FileNotFoundError):
            continue  # another process got there first, or the file is unreadable: the janitor reports it
        if reason is not None:
            failed.append(f"failed {slug}: {reason}")
    return failed


# -- the remote's record (SPEC §8) ------------------------------------------------------------
def follow_remote(ctx: Context, slug: str, lost: Lost) -> BacklogError:
    """A verb's update of this clone's claim was refused by the remote; return the error to raise.

    * Another clone holds the claim now (it rescued this clone's claim past its budget): the caller is a
      displaced claimer, refused like anyone else (exit 1) naming the holder of record. Nothing moves:
      `maintain` drops this clone's copy (its lines are in the record).
    * The remote settled the claim elsewhere (another clone's janitor failed it past its budget): the
      local copy moves where the remote's record says, with the remote's line, and the error says so.

    Caller holds the task's lock."""
    from .remote import CLAIMS, SETTLED  # (loaded already: the remote refused)

    remote, rec = ctx.backend.remote, lost.settled
    loc = single_in_flight(ctx, slug)
    if remote is None or loc is None:
        return lost
    data = ctx.backend.read(loc)
    if lost.claim is not None:
        return _displaced(slug, data, lost, remote.name)
    if rec is None:
        return lost
    term = terminal_event(ctx.backend.load(loc, rec.data)) if rec.data.startswith(data) else None
    if term is None:
        return lost
    ctx.backend.commit(Change((Memory(remote, SETTLED, slug, rec.sha), Memory(remote, CLAIMS, slug, None))))
    dest = finish_move(ctx, slug, loc, rec.data, term)
    how = cause(read_log(rec.data)) or term[0]
    return LeftFlight(  # what became of it, as the record's log says (SPEC §5): exit 1, nothing to retry
        f"{slug} left flight on another clone: {how} by {by_of(rec.data)} (remote {remote.name}); this clone's"
        f" copy moved to {dest}/ with the remote's line",
        ended=rec.ended(),
    )


def by_of(data: bytes) -> str:
    """Who wrote the last line of a task file: its `by=`, else the claimer of record."""
    try:
        log = read_log(data)
    except BacklogError:
        return "an unknown claimer"
    last = log[-1].get("by") if log else None
    claim = claim_in(log)
    return last or (holder(claim) if claim is not None else "an unknown claimer")


def _displaced(slug: str, data: bytes, lost: Lost, remote: str) -> BacklogError:
    """The refusal for a verb on a claim another clone took over (SPEC §5 *Ownership*: exit 1, naming the
    claimer and branch of record); `lost` itself when the remote's claim of record is this copy's (another cause)."""
    claim = lost.claim.claim_entry() if lost.claim is not None else None
    try:
        ours = claim_in(read_log(data))
    except BacklogError:
        ours = None
    if claim is None or (ours is not None and render_log_line(ours) == render_log_line(claim)):
        return lost
    return Held(
        f"{slug} is claimed by {holder(claim)} on another clone (remote {remote}), which took it over from"
        " this clone's claim: only its holder acts on it (`backlog maintain` drops this clone's copy)",
        holder=lost.holder,
    )
