"""`backlog edit`: change the fields of a task not yet claimed (SPEC §5 `edit`): its priority,
dependencies, timeout, `timeout.<pile>` and title, where `add` lands it (SPEC §4: on the intake
branch wherever it runs, `--here` on this branch), and this worktree's own copy with it.

Only the lines of the fields that change are rewritten (`task.set_field`, as `retry --set` does), and of
the title only its `# ` line: every other byte of the task, its log included, stays as it was."""

from __future__ import annotations

from pathlib import Path

from .. import fields, limits
from ..context import Context, Result, open_context
from ..errors import BacklogError, Held, InvalidInput, LeftFlight
from ..lifecycle import ended_in, holder, holder_of, locked_change, msg_edit, stale_copy
from ..logline import read_log, set_title
from ..moves import Parcel, intake_target, land, land_here
from ..project import FAILED
from ..state import Located, Model
from ..task import FieldValue, Slug, Task, parse_task, set_field

KEYS = ("priority", "timeout", fields.PILE_KEY, "dependencies", "title")
Copy = tuple[Located, bytes]
Wanted = dict[str, FieldValue]


def edit(ctx: Context, slug: Slug, sets: list[str] | None = None, *, here: bool = False) -> Result:
    """Set the fields `sets` names (`KEY=VALUE` items) on `slug`, a task in todo/ or an intake
    pile: the intake branch's todo/ copy (committed there, as `add` commits), and this worktree's
    copy (committed here). A field that already has the value is left as it is written; an edit
    that changes nothing commits nothing. Refused: a task in flight (exit 1, naming its holder),
    settled or a stale copy (exit 1, saying where), an invalid value (exit 2, nothing changed)."""
    if not sets:
        raise InvalidInput(f"edit {slug}: nothing to set: give --set KEY=VALUE (the keys are {', '.join(KEYS)})")
    wanted = _wanted(ctx, slug, sets)
    texts = {key.strip(): value.strip() for key, _, value in (item.partition("=") for item in sets)}
    texts["title"] = str(wanted.get("title", ""))  # as written: its whitespace folded
    target = None if here else intake_target(ctx)
    model = Model(ctx)
    latest: list[list[Copy]] = []

    def check() -> Copy:
        latest[:] = [_copies(model, slug, here, target is not None)]
        return latest[0][0]

    def body(_loc: Located, _data: bytes) -> Result:
        plan = [(loc, data, *_edited(ctx, slug, loc, data, wanted)) for loc, data in latest[0]]  # all valid first
        changed = [key for key in wanted if any(key in keys for *_, keys in plan)]
        committed: list[str] = []
        warnings: list[str] = []
        for loc, data, new, keys in plan:
            if new == data:
                continue
            message = msg_edit(slug, [f"{key}={texts[key]}" for key in keys])
            if loc.on_intake:
                assert target is not None  # noqa: S101 (an intake copy is read only when there is a target)
                _refuse_uncommitted(slug, loc, data, target.branch, target.worktree)
                land(ctx, Parcel(target, slug, loc.pile, new, message, replace=True), told=warnings)
                committed.append(f"intake:{target.branch}")
                continue
            try:
                if here:
                    ctx.backend.apply(slug, loc, loc.pile, new, message, old=data)
                else:  # on the intake branch itself, with a remote: on to the remote's (SPEC §8)
                    warnings += land_here(ctx, slug, loc, loc.pile, new, message, old=data)
            except (BacklogError, OSError) as exc:
                if not committed:
                    raise
                why = exc.message if isinstance(exc, BacklogError) else str(exc)
                shown = ctx.backend.display(loc.pile, slug)
                warnings.append(
                    f"warning: this branch's copy {shown} keeps its old fields ({why}); a merge brings them"
                )
                continue
            committed.append("here")
        said = [f"{key}={texts[key]}" for key in wanted]
        intake = (target.branch, target.worktree) if target is not None else None
        return _result(ctx, slug, plan[0][0], intake, said, changed, committed, warnings)

    return locked_change(ctx, slug, check, body)


def _wanted(ctx: Context, slug: Slug, sets: list[str]) -> Wanted:
    """The fields `sets` gives, checked (malformed, an unknown key, a dependency naming nothing or
    the task itself), in the order of their last `--set` (which wins); a title's whitespace folded."""
    wanted: Wanted = {}
    for key, value in fields.sets(ctx, sets, KEYS):
        if key == "dependencies" and isinstance(value, dict) and slug in value:
            raise InvalidInput(f"--set dependencies {slug}: a task cannot depend on itself")
        wanted.pop(key, None)  # the last --set of a key wins
        wanted[key] = " ".join(str(value).split()) if key == "title" else value
    return wanted


def _copies(model: Model, slug: str, here: bool, queue: bool) -> list[Copy]:
    """The copies `edit` changes, the queue's first: the intake branch's todo/ copy (`queue`: edit
    lands there), then this worktree's copy in todo/ or an intake pile. Refused: in flight anywhere
    in the clone, settled (done/, failed/, the ledger), a stale copy, nowhere."""
    ctx = model.ctx
    truth = model.task(slug)
    flying = truth.flying(ctx)
    if flying:
        claim = model.claim_of(flying[0])
        by = f", claimed by {holder(claim)}" if claim is not None else ""
        raise Held(
            f"{slug} is in flight ({flying[0].pile}/{by}): only a task not yet claimed can be edited",
            holder=holder_of(claim),
        )
    queued = model.intake_copy(slug) if queue else None
    found = [queued] if queued is not None else []
    if here and not truth.here and model.intake_copy(slug) is not None:
        raise BacklogError(
            f"{slug} is not on this branch: it is in todo/ of the intake branch (edit it without --here)"
        )
    if truth.here or not found:
        loc = model.one(slug, truth)  # nowhere here: what became of it (the ledger says), else not found
        if loc.pile in ("done", FAILED):
            raise LeftFlight(
                f"{slug} is in {loc.pile}/: a settled task is not edited (add a new task that names it)",
                ended=ended_in(ctx, loc),
            )
        found.append((loc, ctx.backend.read(loc)))
    entry = truth.settled
    for loc, data in found:
        if entry is not None and entry.blocks_log(read_log(data, ctx.backend.display(loc.pile, slug))):
            raise stale_copy(entry)
    return found


def _edited(ctx: Context, slug: str, loc: Located, data: bytes, wanted: Wanted) -> tuple[bytes, list[str]]:
    """`data` with the fields whose value differs set (and which those are), validated as every
    reader reads a task (`parse_task`: exit 2 naming the file and the field) and as `add` bounds it."""
    shown = ctx.backend.display(loc.pile, slug)
    try:
        task: Task | None = parse_task(slug, shown, data, ctx.project.defaults)
    except InvalidInput:
        task = None  # an invalid field now: every key is set, and the result must read
    keys = [key for key, value in wanted.items() if task is None or _current(task, key) != value]
    new = data
    for key in keys:
        value = wanted[key]
        new = set_title(new, str(value), shown) if key == "title" else set_field(new, key, value, shown)
    if new != data:
        parse_task(slug, shown, new, ctx.project.defaults)
        if len(new) > limits.TASK_BYTES:
            raise InvalidInput(f"edit {slug}: the task would be {limits.too_large(len(new))}")
    return new, keys


def _current(task: Task, key: str) -> object:
    """What `key` says now: the title, the dependencies as read, or the field as written."""
    if key == "title":
        return task.title
    if key == "dependencies":
        return task.dependencies
    return task.meta.get(key)


def _refuse_uncommitted(slug: str, loc: Located, data: bytes, branch: str, worktree: Path | None) -> None:
    """The intake branch's copy is replaced in the worktree that has it checked out: refused when
    that worktree's file is not what the branch holds (someone's uncommitted change: never lost)."""
    if worktree is None:
        return
    other = open_context(worktree, heal=False)
    there = [copy for copy in Model(other).task(slug).copies if copy.pile == loc.pile]
    try:
        same = bool(there) and other.backend.read(there[0]) == data
    except FileNotFoundError:  # removed there since it was found: an uncommitted change too
        same = False
    if not same:
        raise BacklogError(
            f"{other.backend.display(loc.pile, slug)} in {worktree} is not what the intake branch {branch} holds"
            " (uncommitted changes there?): commit or discard them, then edit again (nothing changed)"
        )


def _result(
    ctx: Context,
    slug: str,
    loc: Located,
    intake: tuple[str, Path | None] | None,
    said: list[str],
    changed: list[str],
    committed: list[str],
    warnings: list[str],
) -> Result:
    """The edit's JSON object (schema `edit`) and what it says on stderr. `intake`: the
    intake branch edit lands on and the worktree that has it checked out (None: this branch)."""
    shown = ctx.backend.display(loc.pile, slug)
    queued = intake is not None and loc.on_intake
    branch = intake[0] if intake is not None and queued else ctx.repo.branch
    found = {
        "slug": slug,
        "pile": loc.pile,
        "path": shown,
        "branch": branch,
        "where": f"intake:{branch}" if queued else "here",
        "changed": changed,
        "committed": committed,
    }
    if not committed:
        return Result(found, [shown], warnings, [f"nothing changed: {slug} already has {', '.join(said)}; no commit"])
    if intake is None or committed[0] == "here":
        return Result(found, [shown], warnings)
    where = f"checked out in {intake[1]}" if intake[1] is not None else "checked out nowhere"
    also = ", and this branch's own copy" if "here" in committed else ""
    return Result(found, [shown], warnings, [f"committed on the intake branch {intake[0]} ({where}){also}"])
