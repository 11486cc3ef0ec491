"""`backlog rename OLD NEW`: give a task a new slug everywhere it lives, and in every dependency
that names it, in one backlog-only commit.

The road in from the older bash tool: it allowed names this tool refuses (`Fix_Login-plan.md`,
`auth flow-plan.md`). OLD is therefore any existing task file name (no `/`, no `..`), NEW must be
a valid slug that no pile holds yet. A task in flight is renamed in the shared root too, under the
locks of both names. Dependencies are rewritten only inside each task's frontmatter block.

Every door keeps the guarantees (SPEC §7.11). Other branches still hold the task under its old
name until they merge the rename, so on maildir-shared the rename leaves a tombstone in the
ledger (`renamed … to=<new>`, written before the new name appears): no copy of the old name is
claimable again, whether the task was queued or in flight. A stale copy (the ledger says the task
settled elsewhere) is refused, not given a fresh, claimable name; an in-flight task is renamed
by its holder only (the claim's branch); with a remote declared, a valid old name is refused, as
other clones could still claim it under that name.
"""

from __future__ import annotations

from ..clock import now_utc
from ..context import Context, Result, branch_of, claimer_id
from ..errors import BacklogError, Held, InvalidInput
from ..layout import TASK_SUFFIX, parse_task_rel
from ..ledger import RENAMED, Settled
from ..lifecycle import claim_in, holder, holder_of, is_holder, stale_copy
from ..logline import LogEntry, generation, read_log
from ..renaming import Unfinished, finish, read_or_none, rename_task, unfinished
from ..state import Located, Model
from ..task import validate_slug


def _old_name(name: str) -> str:
    if not name or "/" in name or "\0" in name or name in (".", "..") or ".." in name or name.startswith("."):
        raise InvalidInput(f"invalid task name {name!r}: a file name in a pile, without '/' or '..'")
    return name.removesuffix(TASK_SUFFIX)


def _is_slug(name: str) -> bool:
    try:
        validate_slug(name)
    except InvalidInput:
        return False
    return True


def _log_or_none(ctx: Context, loc: Located) -> list[LogEntry] | None:
    data = read_or_none(ctx.backend, loc)
    try:
        return read_log(data) if data is not None else None
    except BacklogError:
        return None


def _refuse_what_cannot_keep(ctx: Context, old: str, new: str, places: list[Located], entry: Settled | None) -> int:
    """Refuse a rename that would reopen or duplicate a task (SPEC §7.11); returns the generation
    of the task renamed (for its tombstone). `entry`: the ledger's word on `old`. Caller holds
    both names' locks."""
    if ctx.backend.remote is not None and _is_slug(old):
        raise BacklogError(
            f"{old} cannot be renamed while remote {ctx.backend.remote.name} is declared: other clones could"
            f" still claim it under its old name (add {new} as a new task naming {old}, and cancel {old} once taken)"
        )
    flying = [loc for loc in places if ctx.pipeline.is_in_flight(loc.pile)]
    for loc in flying:
        log = _log_or_none(ctx, loc)
        claim = claim_in(log) if log is not None else None
        if claim is not None and not is_holder(claim, claimer_id(), ctx.repo.branch):  # claimer and branch
            raise Held(
                f"{old} is claimed by {holder(claim)}: only its holder renames it (run this as"
                f" {claim.get('claimer', '?')} on branch {claim.get('branch', '?')}); nothing renamed",
                holder=holder_of(claim),
            )
    queued = [loc for loc in places if loc.pile == "todo" or loc.pile in ctx.pipeline.intake]
    resumed = entry is not None and entry.outcome == RENAMED and entry.to == new and entry.branch == ctx.repo.branch
    if entry is not None and not flying and not resumed:  # (resumed: this very rename, killed midway)
        for loc in queued:
            log = _log_or_none(ctx, loc)
            if log is None or entry.blocks_log(log):
                raise BacklogError(f"{stale_copy(entry)}; nothing renamed")
    logs = [log for log in (_log_or_none(ctx, loc) for loc in flying or places) if log is not None]
    return max((generation(log) for log in logs), default=0)


def rename(ctx: Context, old: str, new: str) -> Result:
    old = _old_name(old)
    validate_slug(new)
    if old == new:
        raise InvalidInput(f"{new} is already its name")
    branch = branch_of(ctx)
    ctx.backend.refuse_if_migrated()  # before any work (renaming.rename_task checks it again)
    model = Model(ctx)
    model.known()  # history counts: a copy settled elsewhere is known first
    first, second = sorted((old, new))
    with ctx.backend.lock(first), ctx.backend.lock(second):
        found, copies = model.named(old)
        places = [loc for loc, _data in copies]
        if not places:
            pending = [p for p in unfinished(ctx.backend) if (p.old, p.new) == (old, new)]
            if pending:  # this very rename, killed before its commit: finish it
                finish(ctx.backend, pending[0])
                return _finished(ctx, pending[0])
            raise model.not_found(old, f"no task {old} in any pile")
        model.refuse_taken_name(new)
        gen = _refuse_what_cannot_keep(ctx, old, new, places, found.settled)
        # the tombstone (a name that is no slug, from the bash tool, is never claimable: it needs none)
        tombstone = None
        if _is_slug(old):
            tombstone = Settled(old, now_utc(), RENAMED, branch, claimer_id(), gen, to=new)
        rewritten = rename_task(ctx.backend, old, new, copies, tombstone)
    shown = [ctx.backend.display(loc.pile, new) for loc in places]
    lines = [f"renamed {ctx.backend.display(loc.pile, old)} → {ctx.backend.display(loc.pile, new)}" for loc in places]
    lines += [f"dependency rewritten in {path}" for path in rewritten]
    return Result({"old": old, "new": new, "paths": shown, "dependents": rewritten}, lines)


def _finished(ctx: Context, pending: Unfinished) -> Result:
    named = [
        ctx.backend.display(*where) for where in map(parse_task_rel, pending.paths) if where and where[1] == pending.new
    ]
    others = [rel for rel in pending.paths if (parse_task_rel(rel) or ("", ""))[1] not in (pending.old, pending.new)]
    lines = [f"finished the rename {pending.old} → {pending.new} (killed before its commit): committed"]
    return Result({"old": pending.old, "new": pending.new, "paths": named, "dependents": others}, lines)
