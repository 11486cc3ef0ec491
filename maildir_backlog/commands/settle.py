"""`backlog cancel`, `fail`, `release` and `retry`: ending a claim (settling it, or giving it
back), and reopening a failed task."""

from __future__ import annotations

from .. import fields
from ..context import Context, Result, branch_of, remote_needed
from ..lifecycle import actor_fields, locked_change, msg_end, refuse_if_ended, same_pile, settle, settled_record
from ..logline import append_line, generation, make_entry, read_log
from ..moves import give_back, intake_target, reopen
from ..project import FAILED
from ..state import Located, Model
from ..task import Slug, parse_task, set_field


def _end(ctx: Context, slug: Slug, reason: str, kind: str, pile: str, verb: str, force: bool) -> Result:
    remote_needed(ctx)
    make_entry(kind, text=reason)  # refuses an empty reason before anything is looked up
    model = Model(ctx)
    start = model.in_flight(slug, verb).pile

    def body(loc: Located, data: bytes) -> Result:
        log = read_log(data, ctx.backend.display(loc.pile, slug))
        refuse_if_ended(slug, log)
        by = actor_fields(ctx, slug, log, force)
        entry = make_entry(kind, by, reason)  # folds newlines
        return settle(ctx, slug, loc, data, pile, entry, msg_end(slug, kind, entry.text or ""))

    return locked_change(ctx, slug, same_pile(ctx, slug, start, lambda: model.in_flight(slug, verb)), body)


def cancel(ctx: Context, slug: Slug, reason: str, force: bool = False) -> Result:
    return _end(ctx, slug, reason, "cancelled", "done", "cancelled", force)


def fail(ctx: Context, slug: Slug, reason: str, force: bool = False) -> Result:
    return _end(ctx, slug, reason, "failed", FAILED, "failed", force)


def retry(ctx: Context, slug: Slug, reason: str, sets: list[str] | None = None) -> Result:
    remote_needed(ctx)
    entry = make_entry("retried", text=reason)
    branch_of(ctx)
    edits = fields.sets(ctx, sets or [])  # malformed, or a dependency naming nothing: exit 2

    target = intake_target(ctx, "retry")

    def body(loc: Located, data: bytes) -> Result:
        new = data
        shown = ctx.backend.display("todo", slug)
        for key, value in edits:
            new = set_field(new, key, value, ctx.backend.display(loc.pile, slug))
        parse_task(slug, shown, new, ctx.project.defaults)  # refuse bad values
        new = append_line(new, entry, ctx.backend.display(loc.pile, slug))
        record = settled_record(ctx, slug, "retried", generation(read_log(data)) + 1, entry.ts)
        warnings = reopen(ctx, target, loc, data, new, msg_end(slug, "retried", entry.text or ""), record)
        found = {"slug": slug, "pile": "todo", "path": shown}
        if target is None:
            return Result({**found, "branch": ctx.repo.branch, "where": "here"}, [shown], warnings)
        note = f"reopened on the intake branch {target.branch}"
        return Result({**found, "branch": target.branch, "where": f"intake:{target.branch}"}, [shown], warnings, [note])

    model = Model(ctx)
    return locked_change(ctx, slug, lambda: model.retryable(slug), body)


def release(ctx: Context, slug: Slug, reason: str | None = None, force: bool = False) -> Result:
    """The holder (or `--force`) gives an in-flight task back: to todo/ with a `released` line,
    where `retry` lands a task (SPEC §5). Not a failure: no ledger entry, no `settled/` record,
    so the task is claimable again by anyone, and the next claim starts a new clock."""
    remote_needed(ctx)
    make_entry("released", text=reason)  # refuses an empty reason (when given) before anything is looked up
    target = intake_target(ctx)
    model = Model(ctx)
    start = model.in_flight(slug, "released").pile  # (with a remote: another clone's claim is `held`)

    def body(loc: Located, data: bytes) -> Result:
        shown = ctx.backend.display(loc.pile, slug)
        log = read_log(data, shown)
        refuse_if_ended(slug, log)
        entry = make_entry("released", actor_fields(ctx, slug, log, force), reason)  # folds newlines
        new = append_line(data, entry, shown)
        give_back(ctx, target, loc, data, new, msg_end(slug, "released", entry.text or ""))
        path = ctx.backend.display("todo", slug)
        found = {"slug": slug, "pile": "todo", "path": path}
        if target is None:
            return Result({**found, "branch": ctx.repo.branch, "where": "here"}, [path])
        note = f"released to todo/ of the intake branch {target.branch}"
        return Result({**found, "branch": target.branch, "where": f"intake:{target.branch}"}, [path], stderr=[note])

    return locked_change(ctx, slug, same_pile(ctx, slug, start, lambda: model.in_flight(slug, "released")), body)
