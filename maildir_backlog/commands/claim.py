"""`backlog take`, `advance` and `rescue`: claiming a task and moving it along the pipeline."""

from __future__ import annotations

import os

from .. import views
from ..claiming import fails_every_candidate, pull_request
from ..clock import format_ts
from ..context import Context, Result, branch_of, claimer_id, remote_needed
from ..errors import BacklogError, Blocked, InvalidInput
from ..lifecycle import (
    actor_fields,
    actor_label,
    ended_here,
    holder_of,
    locked_change,
    msg_advance,
    msg_done,
    msg_rescue,
    prelude,
    refuse_if_ended,
    same_pile,
    settle,
    settled_record,
    terminal_event,
)
from ..logline import append_line, make_entry, read_log
from ..project import FAILED
from ..state import Located, Model, Truth
from ..task import Slug


def _claim(model: Model, slug: str, truth: Truth | None = None, force: bool | None = None) -> Result:
    """Claim `slug` from todo/ (`truth`: what the caller just read of it, so the unlocked check
    reads nothing again; under the lock it is read afresh). A claim by name (`force` not None) of
    a task whose dependencies are not done is refused (SPEC §5: kind `blocked`), unless `force`:
    then the claim line names them (`unmet=`). Auto-pick (`force` None) only offers ready tasks."""
    ctx = model.ctx
    branch = branch_of(ctx)
    target = ctx.pipeline.next_pile("todo")
    assert target is not None  # noqa: S101 (narrows a type for mypy; established just above, never input-dependent)

    def body(loc: Located, data: bytes) -> Result:
        claimer = claimer_id()
        task = ctx.backend.load(loc, data)
        blocked = model.unmet(task.dependencies)
        if blocked and force is False:
            raise Blocked(
                f"{slug} is blocked: it depends on {', '.join(blocked)}, not done yet"
                f" (`backlog take {slug} --force` claims it anyway)"
            )
        fields: dict[str, str | None] = {"to": target, "claimer": claimer, "branch": branch}
        if ctx.pipeline.is_in_flight(target):
            fields["budget"] = task.budget_in(target).text
        if blocked:
            fields["unmet"] = ",".join(blocked)
        new = append_line(data, make_entry("advanced", fields), ctx.backend.display(loc.pile, slug))
        record = settled_record(ctx, slug, "done", task.generation) if target == "done" else None
        message = msg_advance(slug, target, f"{claimer} @ {branch}")
        # a task only the intake branch holds is created in the shared pile: nothing here to remove,
        # but the failed/ copy here that a retry since superseded (`Model.claimable`): the retry's
        # own removal of it did not happen (killed, or refused), and this commit makes it
        src, old = (loc, data) if not loc.on_intake else model.superseded_here(slug)
        dst = ctx.backend.apply(slug, src, target, new, message, settle=record, old=old)
        shown = ctx.backend.display(dst.pile, slug)
        warn = [f"warning: {slug} claimed with --force: it depends on {', '.join(blocked)}, not done yet"] * bool(
            blocked
        )
        return Result({**views.claimed(ctx, dst, new), "blocked_by": blocked}, [shown], warn)

    if truth is not None:
        model.claimable(slug, truth)
    return locked_change(ctx, slug, lambda: model.claimable(slug), body, checked=truth is not None)


def _rescue(model: Model, slug: str) -> Result:
    ctx = model.ctx
    branch = branch_of(ctx)

    def check() -> tuple[Located, bytes]:
        loc = model.in_flight(slug, "rescued")
        data = ctx.backend.read(loc)
        task = ctx.backend.load(loc, data)
        ended = terminal_event(task)
        if ended is not None:
            raise BacklogError(
                f"{slug} already ended ({ended[0]} at {format_ts(ended[2].ts)}): `backlog maintain` finishes"
                " moving it; rescue refused"
            )
        from .. import crossclone  # (each use imports it: without a remote, a claim never loads its modules)

        crossclone.refuse_unexpired(task, loc, loc.pile, "", holder_of(task.claim_of_record()))
        return loc, data

    def body(loc: Located, data: bytes) -> Result:
        claimer = claimer_id()
        limit = ctx.backend.load(loc, data).budget_in(loc.pile).text
        fields: dict[str, str | None] = {"claimer": claimer, "branch": branch, "budget": limit}
        new = append_line(data, make_entry("rescued", fields), ctx.backend.display(loc.pile, slug))
        message = None if loc.shared else msg_rescue(slug, f"{claimer} @ {branch}")
        dst = ctx.backend.apply(slug, loc, loc.pile, new, message, old=data)
        return Result(views.claimed(ctx, dst, new, rescued=True), [ctx.backend.display(dst.pile, slug)])

    return locked_change(ctx, slug, check, body)


def rescue(ctx: Context, slug: Slug) -> Result:
    remote_needed(ctx)
    from .. import crossclone

    # SPEC §8: the remote's claim, when another clone's
    return crossclone.rescue(ctx, slug) or _rescue(Model(ctx), slug)


def take(ctx: Context, slug: Slug | None = None, force: bool = False) -> Result:
    """`backlog take [SLUG] [--force]`, top-down: the slug comes validated from the verb table
    (`task.Slug`); the clone is made ready for a claim; then a named take (`force`: even a blocked
    one) or an auto-pick. One read model (`state.Model`) answers every question on the way."""
    remote_needed(ctx)
    if force and slug is None:
        raise InvalidInput("take --force needs a SLUG: auto-pick only ever claims a task whose dependencies are done")
    model = Model(ctx)
    failed = _ready_to_claim(model, skip=slug)
    if slug is None:
        return _auto_pick(model, failed)
    return _take_named(model, slug, force).plus(before=failed)  # a rescue's own note (another clone's claim) stays


def _ready_to_claim(model: Model, skip: str | None) -> list[str]:
    """What every claim needs first: a branch, no pending migration, the history of settled
    tasks known, and every other timed-out claim failed (one line each)."""
    ctx = model.ctx
    branch_of(ctx)
    ctx.backend.refuse_if_migrated()  # auto-pick would take each refusal for a lost race
    model.known()  # history counts: settled tasks of every branch are known first
    return prelude(ctx, skip=skip)


def _take_named(model: Model, slug: Slug, force: bool) -> Result:
    """Another clone's claim first (SPEC §8: refused, or rescued past its budget); then where
    the task is, read once: in flight past its budget, rescued; else claimed from todo/."""
    if model.ctx.backend.remote is not None:  # (`crossclone.take_named` says None without one)
        from .. import crossclone

        held = crossclone.take_named(model.ctx, slug)
        if held is not None:
            return held
    truth, timed_out = model.timed_out_claim(slug)
    if timed_out:
        from .. import crossclone

        return crossclone.rescue(model.ctx, slug) or _rescue(model, slug)
    return _claim(model, slug, truth, force)


def _auto_pick(model: Model, failed: list[str]) -> Result:
    """The best ready task this claimer can get: the ranked candidates, spread over the equally
    ranked best (no herd), less what the remote holds; a lost race moves on to the next one."""
    ctx = model.ctx
    skipped: list[str] = []
    lost: list[str] = []  # the candidates lost to another claimer first (`BACKLOG_DEBUG` prints them)
    merged: set[str] = set()
    candidates = model.picks(skipped)  # no herd (docs/design.md); less the remote's (SPEC §8)
    late = False  # the last resort taken: tasks retried on another clone whose records this clone lacked
    while True:
        candidate = next(candidates, None)
        if candidate is None and not late:
            late, candidates = True, iter(model.reopened_late())  # one fetch, only now (SPEC §8)
            continue
        if candidate is None:
            break
        if candidate in merged:
            continue
        try:
            result = _claim(model, candidate)
        except BacklogError as exc:
            if fails_every_candidate(exc):
                raise  # the commit failed, or a lock or the remote stayed busy: every candidate fails so
            lost.append(f"debug: lost {candidate}: {exc.message}")
            from .. import crossclone

            # lost a race, settled meanwhile, or vanished: try the next one; a claim refused as done
            # on the remote's default branch has just read its tip: skip every other task done there
            merged = crossclone.done_on_remote(ctx)
            # and what others took since the ranking (here, and with a remote on other clones):
            # one look now instead of a lost race for each of them (many agents at once)
            candidates = model.still_free(candidates)
            continue
        return result.plus(warnings=skipped, before=failed, stderr=lost if os.environ.get("BACKLOG_DEBUG") else ())
    hints = []
    for pile, waiting in model.waiting().items():
        if waiting:
            hints.append(
                f"hint: {len(waiting)} task{'s' if len(waiting) > 1 else ''} wait in {pile}/ (not yet in todo/):"
                f" promote one with `backlog advance {waiting[0]}`"
            )
    stderr = failed + ["no available tasks"] + hints
    return Result({"slug": None, "message": "no available tasks"}, [], skipped, stderr=stderr)


def advance(ctx: Context, slug: Slug, pr: str | None = None, force: bool = False) -> Result:
    remote_needed(ctx)
    if pr is not None and pr.strip() == "auto":
        pr = pull_request(ctx)
    if pr is not None and (not pr.strip() or any(c.isspace() for c in pr.strip())):
        raise InvalidInput(f"invalid --pr {pr!r}: expected a URL without spaces")
    branch_of(ctx)
    failed = prelude(ctx, skip=slug)
    model = Model(ctx)
    loc = model.located(slug)  # with a remote: another clone may hold it or have settled it (SPEC §5)
    if loc.pile == "todo":
        model.known()
        # the claim out of todo/ is `take SLUG`'s: another clone's claim or settlement is a
        # refusal naming it (exit 1), never a race lost in the act (exit 3); no rescue here
        if ctx.backend.remote is not None:  # (`crossclone.take_named` does nothing without one)
            from .. import crossclone

            crossclone.take_named(ctx, slug, rescue_expired=False)
        result = _claim(model, slug, force=force).plus(before=failed)
        return result
    if loc.pile in ("done", FAILED):
        hint = "it is finished" if loc.pile == "done" else "use `backlog retry` to reopen it"
        raise ended_here(ctx, loc, f": {hint}")
    if loc.pile in ctx.pipeline.elsewhere:  # in flight in a pile of another branch's pipeline (SPEC §4)
        raise BacklogError(
            f"{slug} is in flight in {loc.pile}/, a pile this branch's pipeline lacks"
            f" ({' → '.join(ctx.pipeline.piles)}): advance it from a branch whose pipeline has {loc.pile}"
            " (fail, cancel and release work from here)"
        )

    def body(loc: Located, data: bytes) -> Result:
        target = ctx.pipeline.next_pile(loc.pile)
        assert target is not None  # noqa: S101 (narrows a type for mypy; established just above, never input-dependent)
        shown = ctx.backend.display(loc.pile, slug)
        log = read_log(data, shown)
        if ctx.pipeline.is_in_flight(loc.pile):
            refuse_if_ended(slug, log)
        by = actor_fields(ctx, slug, log, force) if ctx.pipeline.is_in_flight(loc.pile) else {}
        if target == "done":
            url = pr.strip() if pr else None
            entry = make_entry("advanced", {"to": "done", **by}, f"PR={url}" if url else None)
            done = settle(ctx, slug, loc, data, "done", entry, msg_done(slug, url))
            return done.plus(data={"budget": None, "budget_seconds": None, "deadline": None})
        budget_text = ctx.backend.load(loc, data).budget_in(target).text if ctx.pipeline.is_in_flight(target) else None
        fields: dict[str, str | None] = {"to": target, "budget": budget_text, **by}
        new = append_line(data, make_entry("advanced", fields), ctx.backend.display(loc.pile, slug))
        both_shared = loc.shared and ctx.backend.is_shared(target)
        message = None if both_shared else msg_advance(slug, target, actor_label(ctx))
        dst = ctx.backend.apply(slug, loc, target, new, message, old=data)
        return Result(views.moved(ctx, dst, new), [ctx.backend.display(dst.pile, slug)])

    result = locked_change(ctx, slug, same_pile(ctx, slug, loc.pile, lambda: model.one(slug)), body)
    result = result.plus(before=failed)
    return result
