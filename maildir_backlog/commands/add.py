"""`backlog add`: write a new task into the first pile and commit it."""

from __future__ import annotations

from .. import fields, limits
from ..clock import parse_duration
from ..context import Context, Result
from ..errors import InvalidInput
from ..lifecycle import msg_add
from ..project import CATEGORIES
from ..state import Model
from ..task import FieldValue, Slug, header, parse_task, validate_slug


def add(
    ctx: Context,
    slug: Slug,
    category: str | None = None,
    priority: int | None = None,
    timeout: str | None = None,
    depends: list[str] | None = None,
    title: str | None = None,
    body: str | None = None,
    *,
    here: bool = False,
) -> Result:
    """Create `<slug>-<category>` in the first pile, committed on the intake branch (SPEC §4: in
    the worktree that has it checked out, else by a plumbing commit), or on this branch with `here`."""
    category = category or "plan"
    if category not in CATEGORIES:
        raise InvalidInput(f"unknown category {category!r}: use one of {', '.join(CATEGORIES)}")
    full = validate_slug(f"{slug}-{category}")
    meta = _fields(ctx, priority, timeout, depends)
    heading = " ".join((title or slug.replace("-", " ").replace("_", " ")).split())
    data = _task_file(meta, heading, body)
    if len(data) > limits.TASK_BYTES - limits.CLAIM_ROOM:  # what add accepts, take accepts (its claim line fits)
        raise InvalidInput(
            f"add {full}: the task would be {limits.too_large(len(data), limits.TASK_BYTES - limits.CLAIM_ROOM)}"
            f" (the size limit, less {limits.CLAIM_ROOM:,} bytes kept for its log)"
        )
    if not here:
        from .. import moves  # (here: `add --here` lands by the backend alone, and loads no intake branch)

        target = moves.intake_target(ctx, "add")
    else:
        target = None
    pile = (ctx.pipeline if target is None else target.pipeline).first  # the intake branch's own first pile
    made = parse_task(full, ctx.backend.display(pile, full), data, ctx.project.defaults)  # validate before writing
    if made.log or made.unreadable:  # the file would not say what was given (SPEC §2: the log is the trailing run)
        raise InvalidInput(
            f"add {full}: the body has a `---` line followed by log lines, which a task file reads as its log,"
            " not its description: put that part in a fenced code block (```), or drop the `---`"
        )
    told: list[str] = []  # SPEC §8: with a remote, a push of the intake commit that did not land
    with ctx.backend.lock(full):
        Model(ctx).refuse_taken_name(full)
        if target is None and here:
            ctx.backend.apply(full, None, pile, data, msg_add(full))
        elif target is None:
            told = moves.land_here(ctx, full, None, pile, data, msg_add(full))
        else:
            moves.land(ctx, moves.Parcel(target, full, pile, data, msg_add(full)), told=told)
    shown = ctx.backend.display(pile, full)
    branch = target.branch if target is not None else ctx.repo.branch
    found = {"slug": full, "pile": pile, "path": shown, "branch": branch, "where": "here"}
    if target is None:
        return Result(found, [shown], told)
    found["where"] = f"intake:{target.branch}"
    note = f"committed on the intake branch {target.branch}" + (
        f" (checked out in {target.worktree})" if target.worktree is not None else " (checked out nowhere)"
    )
    return Result(found, [shown], told, [note])


def _fields(
    ctx: Context, priority: int | None, timeout: str | None, depends: list[str] | None
) -> list[tuple[str, FieldValue]]:
    """The new task's frontmatter fields from `add`'s options, each checked (in this order)."""
    if priority is not None and not 1 <= priority <= limits.PRIORITY_MAX:
        raise InvalidInput(f"invalid priority {priority}: expected a whole number from 1 to {limits.PRIORITY_MAX:,}")
    if timeout is not None:
        try:
            parse_duration(timeout)
        except InvalidInput as exc:
            raise InvalidInput(f"--timeout: {exc.message}") from None
    deps: dict[str, str] = {}
    for spec in depends or []:
        name, _, reason = spec.partition(":")
        deps[validate_slug(name.strip())] = " ".join(reason.split())
    fields.refuse_unknown(ctx, deps, "--depends")
    meta: list[tuple[str, FieldValue]] = []
    if priority is not None:
        meta.append(("priority", priority))
    if timeout is not None:
        meta.append(("timeout", timeout))
    if deps:
        meta.append(("dependencies", deps))
    return meta


def _task_file(meta: list[tuple[str, FieldValue]], heading: str, body: str | None) -> bytes:
    """A new task file: its frontmatter (if any), the title, the body (if any), an empty log."""
    text = header(meta)
    if text:
        text += "\n"
    text += f"# {heading}\n"
    if body and body.strip():
        text += "\n" + body.strip("\n") + "\n"
    text += "\n---\n\n"
    return text.encode()
