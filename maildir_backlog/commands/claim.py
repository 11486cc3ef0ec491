"""`backlog take`, `advance` and `rescue`: claiming a task and moving it along the pipeline."""

from __future__ import annotations

from datetime import timedelta

from ..backend import Located
from ..context import Context, Result, branch_of, claimer_id
from ..errors import BacklogError, Busy, Conflict, InvalidInput
from ..git import GitError
from ..lifecycle import (
    Check,
    actor_label,
    budget,
    candidates,
    find_in_flight,
    find_one,
    is_timed_out,
    locked_change,
    msg_advance,
    msg_done,
    msg_rescue,
    prelude,
    same_pile,
    settle,
    settled_record,
    stale_copy,
    terminal_event,
    time_left,
    unmet,
    where,
)
from ..project import FAILED
from ..task import append_line, format_duration, format_ts, make_entry, validate_slug


def _claim_check(ctx: Context, slug: str) -> Check:
    def check() -> tuple[Located, bytes]:
        locs = ctx.backend.locate(slug)
        if any(ctx.pipeline.is_in_flight(loc.pile) for loc in locs):
            raise Conflict(f"claim conflict: {slug} already in flight")
        todo = [loc for loc in locs if loc.pile == "todo"]
        if not todo:
            if not locs:
                raise BacklogError(f"no task {slug} in any pile")
            raise BacklogError(f"{slug} is in {where(locs)}, not in todo/")
        data = ctx.backend.read(todo[0])
        task = ctx.backend.load(todo[0], data)  # a malformed task is refused before it is claimed
        entry = ctx.backend.settled(slug)
        if entry is not None and entry.blocks(task):
            raise BacklogError(stale_copy(entry))
        return todo[0], data

    return check


def _claim(ctx: Context, slug: str) -> Result:
    branch = branch_of(ctx)
    target = ctx.pipeline.next_pile("todo")
    assert target is not None

    def body(loc: Located, data: bytes) -> Result:
        claimer = claimer_id()
        task = ctx.backend.load(loc, data)
        fields: dict[str, str | None] = {"to": target, "claimer": claimer, "branch": branch}
        if ctx.pipeline.is_in_flight(target):
            fields["budget"] = task.budget_in(target).text
        new = append_line(data, make_entry("advanced", fields))
        record = settled_record(ctx, slug, "done", task.generation) if target == "done" else None
        message = msg_advance(slug, target, f"{claimer} @ {branch}")
        dst = ctx.backend.apply(slug, loc, target, new, message, settle=record, old=data)
        shown = ctx.backend.display(dst.pile, slug)
        result = Result({"slug": slug, "pile": dst.pile, "path": shown, "claimer": claimer, "branch": branch}, [shown])
        blocked = unmet(ctx, task.dependencies)
        if blocked:  # only a named take gets here: auto-pick never picks a blocked task
            result.warnings.append(f"warning: {slug} depends on {', '.join(blocked)}, not done yet")
        return result

    return locked_change(ctx, slug, _claim_check(ctx, slug), body)


def _rescue(ctx: Context, slug: str) -> Result:
    branch = branch_of(ctx)

    def check() -> tuple[Located, bytes]:
        loc = find_in_flight(ctx, slug, "rescued")
        data = ctx.backend.read(loc)
        task = ctx.backend.load(loc, data)
        ended = terminal_event(task)
        if ended is not None:
            raise BacklogError(
                f"{slug} already ended ({ended[0]} at {format_ts(ended[2].ts)}): `backlog maintain` finishes"
                " moving it; rescue refused"
            )
        left = time_left(task, loc)
        if left is None:
            raise BacklogError(f"{slug} has no budget in {loc.pile}/ (none): it never times out; rescue refused")
        if left >= timedelta(0):
            raise BacklogError(
                f"{slug} is still within its budget ({budget(task, loc)}): {format_duration(left)} left; rescue refused"
            )
        return loc, data

    def body(loc: Located, data: bytes) -> Result:
        claimer = claimer_id()
        limit = ctx.backend.load(loc, data).budget_in(loc.pile).text
        new = append_line(data, make_entry("rescued", {"claimer": claimer, "branch": branch, "budget": limit}))
        message = None if loc.shared else msg_rescue(slug, f"{claimer} @ {branch}")
        ctx.backend.apply(slug, loc, loc.pile, new, message, old=data)
        shown = ctx.backend.display(loc.pile, slug)
        return Result({"slug": slug, "pile": loc.pile, "path": shown, "rescued": True, "claimer": claimer}, [shown])

    return locked_change(ctx, slug, check, body)


def rescue(ctx: Context, slug: str) -> Result:
    validate_slug(slug)
    return _rescue(ctx, slug)


def take(ctx: Context, slug: str | None = None) -> Result:
    if slug is not None:
        validate_slug(slug)
    branch_of(ctx)
    failed = prelude(ctx, skip=slug)
    if slug is not None:
        flying = [loc for loc in ctx.backend.locate(slug) if ctx.pipeline.is_in_flight(loc.pile)]
        if len(flying) == 1 and is_timed_out(ctx.backend.load(flying[0]), flying[0]):
            result = _rescue(ctx, slug)
        else:
            result = _claim(ctx, slug)
        result.stderr = failed
        return result
    skipped: list[str] = []
    for candidate in candidates(ctx, skipped):
        try:
            result = _claim(ctx, candidate)
        except (GitError, Busy):
            raise  # the commit failed, or a lock stayed busy: every candidate would fail the same way
        except BacklogError:
            continue  # lost a race, settled meanwhile, or vanished: try the next one
        result.warnings += skipped
        result.stderr = failed
        return result
    return Result({"slug": None, "message": "no available tasks"}, [], skipped, stderr=failed + ["no available tasks"])


def advance(ctx: Context, slug: str, pr: str | None = None) -> Result:
    validate_slug(slug)
    if pr is not None and (not pr.strip() or any(c.isspace() for c in pr.strip())):
        raise InvalidInput(f"invalid --pr {pr!r}: expected a URL without spaces")
    branch_of(ctx)
    failed = prelude(ctx, skip=slug)
    loc = find_one(ctx, slug)
    if loc.pile == "todo":
        result = _claim(ctx, slug)
        result.stderr = failed
        return result
    if loc.pile in ("done", FAILED):
        hint = "it is finished" if loc.pile == "done" else "use `backlog retry` to reopen it"
        raise BacklogError(f"{slug} is in {loc.pile}/: {hint}")

    def body(loc: Located, data: bytes) -> Result:
        target = ctx.pipeline.next_pile(loc.pile)
        assert target is not None
        if target == "done":
            url = pr.strip() if pr else None
            entry = make_entry("advanced", {"to": "done"}, f"PR={url}" if url else None)
            return settle(ctx, slug, loc, data, "done", entry, msg_done(slug, url))
        fields: dict[str, str | None] = {"to": target, "budget": ctx.backend.load(loc, data).budget_in(target).text}
        new = append_line(data, make_entry("advanced", fields), ctx.backend.display(loc.pile, slug))
        both_shared = loc.shared and ctx.backend.is_shared(target)
        message = None if both_shared else msg_advance(slug, target, actor_label(ctx))
        dst = ctx.backend.apply(slug, loc, target, new, message, old=data)
        shown = ctx.backend.display(dst.pile, slug)
        return Result({"slug": slug, "pile": dst.pile, "path": shown}, [shown])

    result = locked_change(ctx, slug, same_pile(ctx, slug, loc.pile, lambda: find_one(ctx, slug)), body)
    result.stderr = failed
    return result
