"""The queue is written where it is read (SPEC §4 *One queue per clone*): the write side's doors
beyond this worktree. `add`, `retry` and `release` land a task on the intake branch (`land`,
`reopen`, `give_back`), wherever they run. Each ends in the one move protocol: `Backend.apply`
(this worktree's, or the intake worktree's), or the intake branch's compare-and-swap commit
followed by the ledger's record, so no door here can forget the ledger or the remote
(docs/design.md, *One move protocol*)."""

from . import git, limits
from .backend import Located
from .backend.base import relisted
from .change import BranchCommit, Change, Crash, Publish, Remove, Settle, Step, Then, Travel
from .context import Context, open_context
from .errors import BacklogError, Conflict, InvalidInput, Unavailable
from .intake import (
    Target,
    on_branch,
    refuse_busy,
    tip_of,
    write_target,
)
from .ledger import Settled
from .logline import later
from .project import FAILED
from .typed import NamedTuple
from .worktrees import intake_branch


class Parcel(NamedTuple):
    """A task to land on the intake branch (`target`): as `slug` into `pile`, its bytes and commit
    message, the ledger's record after the commit (a retry's), and whether a copy the branch holds
    is replaced (`replace`: retry, edit, release)."""

    target: Target
    slug: str
    pile: str
    data: bytes
    message: str
    record: Settled | None = None
    replace: bool = False


def land(ctx: Context, parcel: Parcel, told: list[str] | None = None) -> str:
    """Put `data` as `<pile>/<slug>` (the `parcel`'s) on the intake branch and commit it there: in
    the worktree that has the branch checked out (its backlog paths only, its staged work
    untouched), else by a plumbing commit that moves the branch by compare-and-swap. `pile` must
    be a tracked pile of the intake branch's own pipeline (`target.pipeline`; the intake
    worktree's, when it has one): any other is refused (exit 1), never written where no view of
    that branch would look. A copy the branch already holds in a tracked pile is refused, or with
    `replace` (retry) replaced, except in done/. The caller holds the task's lock. Returns where
    it landed (`<branch>:backlog/<pile>/<slug>.md`).

    Nothing is written while a worktree has the branch in a rebase, merge, cherry-pick, revert,
    am or bisect (exit 4, `intake.refuse_busy`), asked again just before the branch moves.

    With a remote declared, the commit then goes on to the remote's intake branch (`travel`); a
    push that does not land is one warning line appended to `told`."""
    move = landing(ctx, parcel)
    ctx.backend.commit(Change(move.steps, after=move.after))
    return landed(ctx, parcel, move, told)


class Landing(NamedTuple):
    """A landing on the intake branch, declared: its steps, the steps after its commit, and where
    the slug may lie on the branch (its tracked piles, for `travel`)."""

    steps: tuple[Step, ...]
    after: tuple[Step, ...]
    paths: list[str]


def landing(ctx: Context, parcel: Parcel) -> Landing:
    """`land`'s move as steps of the one protocol, and the steps after its commit: the intake
    worktree's own change (`Then` there), or the branch's plumbing commit (`BranchCommit`, whose
    precondition is asked again on every compare-and-swap attempt) with the ledger's record after."""
    target, slug, pile, data, message, record, replace = parcel
    verb = message.partition("(")[0]  # add(slug), retry(slug) reason, edit(slug) …: the verb landing
    refuse_busy(ctx.repo, target.branch, verb)
    shown = ctx.backend.display(pile, slug)
    other = open_context(target.worktree, heal=False) if target.worktree is not None else None
    pipeline = other.pipeline if other is not None else target.pipeline
    tracked = [p for p in pipeline.all_piles if not pipeline.is_in_flight(p)]
    paths = [ctx.backend.display(p, slug) for p in tracked]
    if pile not in tracked:
        raise BacklogError(
            f"{slug}: the intake branch {target.branch} has no pile {pile}/ in its pipeline"
            f" ({' → '.join(pipeline.piles)}): nothing written (merge the pipeline's change into {target.branch} first)"
        )

    def refuse(held: dict[str, bytes | None]) -> None:
        path = in_the_way(held, data, replace)
        if path is not None:
            raise BacklogError(f"{slug} already exists on the intake branch {target.branch} ({path})")

    if other is not None:
        intake_worktree = other

        def in_worktree(_first: bool) -> Landing:  # (a copy there gone before it is read: looked up again)
            found = [loc for loc in intake_worktree.backend.locate(slug) if not pipeline.is_in_flight(loc.pile)]
            refuse({intake_worktree.backend.display(loc.pile, slug): _read(intake_worktree, loc) for loc in found})
            # a retry moves the failed copy, over a stale todo/ copy beside it (`Backend.move`); else the one copy
            src = next((loc for loc in found if loc.pile == FAILED), None) if record is not None else None
            src = src or (found[0] if found else None)
            if any(loc != src and loc.pile != pile for loc in found):
                where = f"in several piles on the intake branch {target.branch}"
                raise BacklogError(f"{slug} is {where}: run `backlog maintain` in {target.worktree}")
            old = intake_worktree.backend.read(src) if src is not None else None
            there = intake_worktree.backend.move(slug, src, pile, data, message, record=record, old=old)
            return Landing((Then(there, intake_worktree.repo, intake_worktree.backend),), (), paths)

        return relisted(slug, in_worktree)

    def check(tip: str) -> dict[str, None]:
        refuse_busy(ctx.repo, target.branch, verb)
        held = holding(ctx, tip, paths, replace)
        refuse(held)
        return {path: None for path in held if path != shown}

    after: tuple[Step, ...] = (Settle(record),) if record is not None else ()
    return Landing((BranchCommit(target.branch, {shown: data}, message, check),), after, paths)


def landed(ctx: Context, parcel: Parcel, move: Landing, told: list[str] | None = None) -> str:
    """After a `landing`'s commit: the intake cache dropped, the commit on to the remote (`travel`)."""
    ctx.cache.pop("intake", None)
    branch, shown = parcel.target.branch, ctx.backend.display(parcel.pile, parcel.slug)
    said = travel(ctx, branch, parcel.slug, {shown: parcel.data}, parcel.message, move.paths, parcel.replace)
    if told is not None:
        told += said
    return f"{branch}:{shown}"


def in_the_way(held: dict[str, bytes | None], data: bytes, replace: bool) -> str | None:
    """The first copy a branch holds of a slug (`held`: its path → bytes, None when unreadable) that
    stands in the way of landing `data` there. Any does, unless `replace` (retry, edit, release):
    then only one in done/ (terminal), one that cannot be read, one of a later generation than
    `data`, or one outside todo/ of `data`'s generation (the task failed there since it was read).
    Every other copy is an earlier state of this task (a stale todo/ copy a merge brought beside a
    failed one: docs/design.md, *Two copies of one task*), replaced."""
    for path, blob in held.items():
        if not replace or "/done/" in path or blob is None:
            return path
        try:
            if later(blob, data) or ("/todo/" not in path and not later(data, blob)):
                return path
        except InvalidInput:
            return path
    return None


def holding(ctx: Context, tip: str, paths: list[str], replace: bool) -> dict[str, bytes | None]:
    """Which of `paths` the commit `tip` holds, each with its bytes when `replace` needs them
    (`in_the_way`; one `cat-file`, sizes first), None otherwise or when it cannot be read."""
    held = on_branch(ctx.repo, tip, paths)
    if not replace or not held:
        return dict.fromkeys(held)
    blobs = git.objects(ctx.repo.toplevel, [f"{tip}:{path}" for path in held], limits.TASK_BYTES)
    return {path: blob if isinstance(blob := blobs.get(f"{tip}:{path}"), bytes) else None for path in held}


def _read(ctx: Context, loc: Located) -> bytes | None:
    try:
        return ctx.backend.read(loc)
    except (BacklogError, OSError):
        return None


PUSH_ATTEMPTS = 8  # a push to the remote's intake branch lost to another clone's is rebuilt this often


def travel(
    ctx: Context, branch: str, slug: str, changes: dict[str, bytes], message: str, paths: list[str], replace: bool
) -> list[str]:
    """SPEC §8 *One queue across clones*: with a remote declared, the intake commit just made on
    `branch` here goes on to the remote's `branch`, a fast-forward by compare-and-swap. The
    commit pushed holds this change only, on the remote's tip as last fetched: this clone's own
    commit when that is its parent (the branches do not part), else one built there, so that no
    other unpushed work of this clone is published. A lost compare-and-swap fetches the branch and
    builds again (PUSH_ATTEMPTS). Returns the warnings: one line, when the push did not land
    (the remote refuses it: a protected branch, a hook, permissions; it cannot be reached; the
    slug appeared there meanwhile): the task stays committed here and travels with the branch.
    `paths`: where the slug may lie on the branch (its tracked piles); `replace`: a copy in
    todo/ there is this task's (retry, edit)."""
    remote = ctx.backend.configured_remote
    stays = f"{slug} stays committed on {branch} in this clone"
    travels = f"it travels with {branch} (push it, or merge it through a pull request)"
    if remote is None:  # none declared; or declared, not configured here (SPEC §3): say so, once
        unset = ctx.backend.unconfigured
        return [f"warning: {unset}; {stays}; {travels}"] if unset else []
    local = tip_of(ctx.repo, branch) or None
    try:
        expect = remote.tracked(branch) or remote.fetch_branch(branch)
        for _ in range(PUSH_ATTEMPTS):
            if expect is None:
                return [f"warning: remote {remote.name} has no branch {branch}: {stays}; {travels}"]
            held = holding(ctx, expect, paths, replace)
            clash = in_the_way(held, next(iter(changes.values())), replace)
            if clash is not None:
                return [
                    f"warning: {slug} appeared on remote {remote.name}'s {branch} meanwhile ({clash}): {stays},"
                    " not pushed; rename one of the two (`backlog rename`)"
                ]
            changed = {**changes, **{path: None for path in held if path not in changes}}  # (earlier states gone)
            try:
                step = Travel(remote, branch, expect, changed, message, local, f"pushing {slug} to {branch}")
                ctx.backend.commit(Change((step,)))
                return []
            except Unavailable:
                raise
            except BacklogError as exc:  # lost to another clone's push (build on its tip), or refused
                moved = remote.fetch_branch(branch)
                if moved == expect:  # the branch did not move: not a race, a refusal
                    refused = exc.message if not isinstance(exc, Conflict) else f"remote {remote.name} refuses it"
                    return [f"warning: {refused}: {stays}; {travels}"]
                expect = moved
        return [f"warning: remote {remote.name}'s {branch} kept moving: {stays}; {travels}"]
    except Unavailable:
        return [f"warning: remote {remote.name} could not be reached: {stays}; {travels}"]
    except BacklogError as exc:  # authentication refused while fetching
        return [f"warning: {exc.message}: {stays}; {travels}"]


def land_here(
    ctx: Context,
    slug: str,
    loc: Located | None,
    pile: str,
    data: bytes,
    message: str,
    record: Settled | None = None,
    old: bytes | None = None,
) -> list[str]:
    """`Backend.apply` of a task into this worktree's `pile` (from `loc`, whose bytes are `old`),
    then, when this branch is the intake branch, on to the remote's (`travel_here`). Returns the
    warnings."""
    ctx.backend.apply(slug, loc, pile, data, message, record=record, old=old)
    return travel_here(ctx, slug, pile, data, message, replace=loc is not None)


def travel_here(ctx: Context, slug: str, pile: str, data: bytes, message: str, replace: bool) -> list[str]:
    """`travel` of the intake commit just made in this worktree, when its branch is the intake
    branch (else nothing to do: the task travels with this branch)."""
    branch = ctx.repo.branch
    if not ctx.backend.declares_remote or not branch or intake_branch(ctx.repo, ctx.project) != branch:
        return []
    paths = [ctx.backend.display(p, slug) for p in ctx.pipeline.all_piles if not ctx.pipeline.is_in_flight(p)]
    return travel(ctx, branch, slug, {ctx.backend.display(pile, slug): data}, message, paths, replace)


def intake_target(ctx: Context, verb: str | None = None) -> Target | None:
    """Where `add` and `retry` land (None: this worktree). This worktree's branch, when it is the
    intake branch, is refused as `land` refuses another's while it is in a merge or the like."""
    target = write_target(ctx.repo, ctx.project)
    mine = ctx.repo.branch if ctx.backend.shares_flight else None
    if target is None and mine and intake_branch(ctx.repo, ctx.project) == mine:
        refuse_busy(ctx.repo, mine, verb)
    return target


def reopen(
    ctx: Context, target: Target | None, loc: Located, data: bytes, new: bytes, message: str, record: Settled
) -> list[str]:
    """`retry`'s move: the failed copy at `loc` (this worktree's, or another branch's read through
    git objects) becomes `new` in todo/ of the intake branch (`target`; None: this worktree). With
    a remote, `settled/<slug>` is rewritten first. This worktree's own failed copy is then removed
    (committed), so a merge of this branch brings no second copy. Returns warnings."""
    slug = loc.slug
    local = loc.path.is_absolute()
    remote = ctx.backend.remote
    if target is None and local:
        return land_here(ctx, slug, loc, "todo", new, message, record=record, old=data)  # the remote step is apply's
    steps: list[Step] = [] if remote is None else [Publish(lambda tx: remote.retry(slug, new, tx))]
    if target is None:  # (a failed/ copy here is stale: `loc` is a later failure, read elsewhere)
        here = ctx.backend.locate(slug)
        stale = [h for h in here if h.pile == "todo"] or [h for h in here if h.pile == FAILED]
        old = ctx.backend.read(stale[0]) if stale else None
        steps.append(
            Then(ctx.backend.move(slug, stale[0] if stale else None, "todo", new, message, record=record, old=old))
        )
        ctx.backend.commit(Change(tuple(steps)))
        return travel_here(ctx, slug, "todo", new, message, replace=True)
    parcel = Parcel(target, slug, "todo", new, message, record._replace(branch=target.branch), replace=True)
    move = landing(ctx, parcel)
    ctx.backend.commit(Change((*steps, *move.steps), after=move.after))
    told: list[str] = []
    landed(ctx, parcel, move, told)
    mine = loc if local else next((h for h in ctx.backend.locate(slug) if h.pile == FAILED), None)
    if mine is None:
        return told
    try:
        mine_data = data if local else ctx.backend.read(mine)
        ctx.backend.commit(Change((Remove(mine.path, mine_data, ctx.backend.rel(mine.path)),), message))
    except (BacklogError, OSError) as exc:
        text = exc.message if isinstance(exc, BacklogError) else str(exc)
        return [
            *told,
            f"warning: {ctx.backend.display(FAILED, slug)} stays on this branch ({text}): `maintain` repairs it",
        ]
    return told


def give_back(ctx: Context, target: Target | None, loc: Located, data: bytes, new: bytes, message: str) -> None:
    """`release`'s move: the in-flight copy at `loc` (content `data`) goes back to todo/ as `new`
    (its log kept, the `released` line appended), settling nothing (no ledger entry, no
    `settled/` record). Into this worktree (`target` None, or a tracked in-flight pile on
    maildir-git): one `Backend.apply`, which deletes the remote's claim first. Into the intake
    branch elsewhere, one protocol run: the remote's claim deleted, the landing (replacing the
    branch's pre-claim copy, as a retry does), then the shared copy removed. The caller holds the
    task's lock and has re-checked it."""
    slug = loc.slug
    if target is None or not loc.shared:
        ctx.backend.apply(slug, loc, "todo", new, message, old=data)
        return
    ctx.backend.refuse_if_migrated()
    remote = ctx.backend.remote
    steps: list[Step] = [] if remote is None else [Publish(lambda tx: remote.release(slug, new, tx))]
    parcel = Parcel(target, slug, "todo", new, message, replace=True)
    move = landing(ctx, parcel)
    after = (*move.after, Crash("release:landed"), Remove(loc.path, None), Crash("release:shared-removed"))
    ctx.backend.commit(Change((*steps, *move.steps), after=after))
    landed(ctx, parcel, move)
