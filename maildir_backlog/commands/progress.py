"""`backlog progress`: a note on the in-flight task claimed on this branch (or `--slug`)."""

from __future__ import annotations

from ..context import Context, Result, branch_of, claimer_id, remote_needed
from ..errors import BacklogError, NotFound
from ..lifecycle import actor_fields, locked_change, msg_progress, same_pile
from ..logline import append_line, make_entry, read_log
from ..state import Located, Model
from ..task import validate_slug


def _mine(model: Model) -> Located:
    """The one in-flight task this caller holds: its claim of record names this claimer and branch
    (two agents on one branch are two holders, SPEC §5 Ownership)."""
    branch = branch_of(model.ctx)
    me = claimer_id()
    mine = model.held_by_me(branch)
    if not mine:
        raise NotFound(f"no in-flight task is claimed by {me} on branch {branch}: use --slug SLUG")
    if len(mine) > 1:
        raise BacklogError(
            f"several in-flight tasks are claimed by {me} on branch {branch}: "
            f"{', '.join(loc.slug for loc in mine)}; use --slug SLUG"
        )
    return mine[0]


def progress(ctx: Context, note: str, slug: str | None = None, force: bool = False) -> Result:
    remote_needed(ctx)
    make_entry("progress", text=note)  # refuses an empty note before anything is looked up
    model = Model(ctx)
    if slug is not None:
        validate_slug(slug)  # (here, after the note: `--slug` is checked by the command, not the table)
        start = model.in_flight(slug, "given progress")
    else:
        start = _mine(model)
    name = start.slug

    def body(loc: Located, data: bytes) -> Result:
        log = read_log(data, ctx.backend.display(loc.pile, name))
        entry = make_entry("progress", actor_fields(ctx, name, log, force), note)
        message = None if loc.shared else msg_progress(name, entry.text or "")
        new = append_line(data, entry, ctx.backend.display(loc.pile, name))
        ctx.backend.apply(name, loc, loc.pile, new, message, old=data)
        shown = ctx.backend.display(loc.pile, name)
        return Result({"slug": name, "pile": loc.pile, "path": shown, "note": entry.text}, [shown])

    find = lambda: model.in_flight(name, "given progress")  # noqa: E731
    return locked_change(ctx, name, same_pile(ctx, name, start.pile, find), body)
