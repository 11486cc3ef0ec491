"""Bucket 3, DUPLICATE: the same slug in two piles, and tracked deletions never committed.

A plan is made on the state as found, then made again under the task's lock and carried out
only if it still holds: the containing copy is kept, the others removed. Tracked copies go
first, in one commit (`maintain(slug) remove duplicate <pile>/ copy`); a failed commit puts
them back. Shared copies go last, once that commit landed, so a crash in between leaves a
duplicate that the next run repairs the same way."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .. import git, queue, storage
from ..backend import Located
from ..change import Change, Crash, Remove, Step, Track, Unstage
from ..errors import BacklogError, Busy, Conflict
from ..layout import parse_task_rel, pile_rel
from ..logline import parse_log_line
from ..project import FAILED
from ..task import is_slug
from ..worktrees import checked_out
from .findings import DUPLICATE
from .sweep import Sweep


def msg_remove_duplicate(slug: str, piles: list[str]) -> str:
    """The janitor's commit of a repaired duplicate: `maintain(slug) remove duplicate todo/ copy`."""
    what = ", ".join(f"{p}/" for p in piles)
    return f"maintain({slug}) remove duplicate {what} cop{'ies' if len(piles) > 1 else 'y'}"


def msg_commit_log(slug: str) -> str:
    """The janitor's commit of log lines an interrupted verb wrote in place."""
    return f"maintain({slug}) commit the log of an interrupted verb"


def deleted(code: str | None) -> bool:
    """Deleted from the work tree or the index, but still in HEAD (so not `AD`: never committed)."""
    return code is not None and "D" in code and code[0] != "A"


@dataclass
class _Copy:
    loc: Located
    data: bytes
    rel: str | None  # worktree-relative path of a tracked copy
    dirty: bool  # a tracked copy with uncommitted changes (untracked, added, modified)


@dataclass
class _Plan:
    keep: _Copy | None
    remove: list[_Copy] = field(default_factory=list)
    deleted: list[tuple[str, str]] = field(default_factory=list)  # (rel, pile) deletions to commit
    problem: str | None = None  # report only
    path: str = ""


def duplicates(sw: Sweep) -> None:
    """Repair (or report) every slug in two piles, one with a tracked deletion next to another
    copy included; note the in-flight tracked files modified in place for `unsaved_logs`."""
    where = sw.listing()
    status = git.status_codes(sw.ctx.repo, *(pile_rel(p) for p in sw.tracked_piles))
    changed: list[tuple[str, str, str, str]] = []  # (rel, code, pile, slug) of tracked task files
    for rel, code in sorted(status.items()):
        parsed = parse_task_rel(rel)
        if parsed is not None and parsed[0] in sw.tracked_piles and is_slug(parsed[1]):
            changed.append((rel, code, *parsed))
    gone: dict[str, list[str]] = {}
    for _rel, code, pile, slug in changed:
        if deleted(code):
            gone.setdefault(slug, []).append(pile)
    candidates = {s for s, piles in where.items() if len(piles) > 1}
    candidates |= {s for s in gone if s in where and set(where[s]) - set(gone[s])}
    for slug in sorted(candidates):
        # other branches' stale copies of tasks in flight are the common case: drop them
        # here, with one file read and no git call per task
        places = where[slug] + gone.get(slug, [])
        drop = sw.stale([sw.located(slug, p) for p in places])
        if len([p for p in places if p not in drop]) < 2:
            continue
        safely(sw, slug, sw.show(where[slug][0], slug))
    for rel, code, pile, slug in changed:
        if "M" in code and sw.pipeline.is_in_flight(pile) and slug not in candidates:
            sw.modified.append((slug, pile, rel))


def settled_copies(sw: Sweep) -> None:
    """A task just moved out of flight may have left an older copy here (a stale todo/ copy of
    another branch's claim now sits next to this branch's done/ or failed/ copy)."""
    if sw.dry_run:
        return
    for slug in sorted(sw.handled):
        safely(sw, slug, sw.show("todo", slug))


def leftovers(sw: Sweep) -> None:
    """An untracked copy in done/ or failed/ of a task the ledger says settled on another branch:
    what a verb killed after writing its settled copy here, but before committing it, leaves when
    a janitor elsewhere then finished the move into its own branch. When the copy is exactly what
    that branch committed (or an older state of it), it is removed; otherwise it is reported."""
    if not sw.shared_backend:
        return
    piles = [p for p in ("done", "failed") if p in sw.tracked_piles]
    status = git.status_codes(sw.ctx.repo, *(pile_rel(p) for p in piles))
    for rel, code in sorted(status.items()):
        parsed = parse_task_rel(rel)
        if code != "??" or parsed is None or not is_slug(parsed[1]):
            continue
        pile, slug = parsed
        entry = sw.backend.settled(slug)
        if entry is None or entry.branch in ("?", sw.ctx.repo.branch):
            continue
        shown = sw.show(pile, slug)
        theirs = git.blob(sw.ctx.repo, f"refs/heads/{entry.branch}:{rel}")
        try:
            with sw.backend.lock(slug, timeout=0 if sw.dry_run else 30.0):
                ours = storage.read_task_bytes(sw.layout.toplevel / rel, shown)
                if theirs is None or not theirs.startswith(ours):
                    sw.add(
                        DUPLICATE,
                        shown,
                        f"an uncommitted copy of a task settled ({entry.outcome}) on branch"
                        f" {entry.branch}, which holds another version: left in place (commit or remove it)",
                        slug,
                    )
                    continue
                if not sw.dry_run:
                    # A merge writes the work tree before the index, holding git's index.lock:
                    # a file it is bringing in looks untracked meanwhile. Never remove that, nor
                    # a file HEAD holds (only the index lacks it), nor anything while a merge (or
                    # a cherry-pick, a rebase) stopped here, nor a copy whose task has another,
                    # tracked copy deleted here and not committed: that pair is a move a merge
                    # made (a concurrent commit wrote back an index without it, an abort kept
                    # it), never what a killed verb leaves, and `_duplicate` commits the pair
                    # whole (docs/reliability.md, *Load*).
                    if (
                        sw.layout.git_index_lock.exists()
                        or checked_out(sw.ctx.repo.git_dir)[1] is not None
                        or git.tracked(sw.ctx.repo, rel)
                        or git.blob(sw.ctx.repo, f"HEAD:{rel}") is not None
                        or _moved_here(sw, slug)
                    ):
                        continue
                    sw.backend.commit(Change((Remove(sw.layout.toplevel / rel, None),)))  # untracked: no commit
        except (Conflict, Busy):
            continue
        except (OSError, BacklogError):
            continue
        detail = f"an uncommitted copy of a task settled ({entry.outcome}) on branch {entry.branch}"
        sw.add(
            DUPLICATE,
            shown,
            f"{detail} (a verb killed before its commit): {sw.would('removed', 'remove it')}",
            slug,
            fixed=True,
        )


Superseded = Callable[[str], tuple[Located | None, bytes | None]]  # `Model.superseded_here`


def superseded(sw: Sweep, superseded_here: Superseded) -> None:
    """A failed/ copy here that a later `retry` superseded: the task's one copy here, which the
    intake branch's todo/ copy (a later generation) reopens, as the read model answers it for a
    claim (`superseded_here`, given by the verb: `Model.superseded_here`). A retry run on this
    branch lands the reopened copy there, then removes this copy in a second commit; killed or
    refused in between, it leaves the copy (the views already count the task where it lives).
    Removed in this branch's own commit, when committed and unchanged; a copy of the same
    generation as the intake branch's (failed here, still queued there) is never one."""
    intake = queue.intake_of(sw.ctx) if sw.shared_backend and FAILED in sw.tracked_piles else None
    if intake is None:
        return
    for slug in sorted(set(sw.backend.slugs(FAILED)) & intake.todo.keys()):
        if not is_slug(slug) or _superseded_copy(sw, slug, superseded_here) is None:
            continue
        shown = sw.show(FAILED, slug)
        try:
            with sw.backend.lock(slug, timeout=0 if sw.dry_run else 30.0):
                found = _superseded_copy(sw, slug, superseded_here)  # re-checked under the lock
                if found is None:
                    continue
                if not sw.dry_run:
                    loc, data = found
                    message = f"maintain({slug}) remove failed/ copy a retry reopened"
                    sw.backend.commit(Change((Remove(loc.path, data, sw.backend.rel(loc.path)),), message))
        except (Conflict, Busy):
            continue
        except BacklogError as exc:
            detail = f"a failed copy a retry reopened since: could not remove it: {exc.message}"
            sw.add(DUPLICATE, shown, detail, slug, error=True)
            continue
        sw.gone.add((slug, FAILED))
        where = f"todo/ of the intake branch {intake.todo[slug].branch}"
        detail = f"an earlier failure of a task retried since (it lives in {where}): {sw.would('removed', 'remove it')}"
        sw.add(DUPLICATE, shown, detail, slug, fixed=True)


def _superseded_copy(sw: Sweep, slug: str, superseded_here: Superseded) -> tuple[Located, bytes] | None:
    """The read model's superseded failed/ copy of `slug` and its bytes, when this run has not
    removed a copy of the task (a dry run's) and its tracked copies are committed and unchanged."""
    if any(sw.removed(slug, pile) for pile in sw.tracked_piles) or _tracked_status(sw, slug):
        return None
    loc, data = superseded_here(slug)
    return None if loc is None or data is None or loc.shared else (loc, data)


def _moved_here(sw: Sweep, slug: str) -> bool:
    """Is a tracked copy of the task deleted in this worktree and the deletion not committed?"""
    return any(deleted(code) for code in _tracked_status(sw, slug).values())


def _tracked_status(sw: Sweep, slug: str) -> dict[str, str]:
    """`git status` codes of the task's copies in the tracked piles (changed ones only)."""
    return git.status_codes(sw.ctx.repo, *(sw.tracked_rel(p, slug) for p in sw.tracked_piles))


def unsaved_logs(sw: Sweep) -> None:
    """After buckets 1 and 2 (whose moves commit such a file with everything else)."""
    for slug, pile, rel in sw.modified:
        if slug not in sw.handled:
            _unsaved_log(sw, slug, pile, rel)


def _unsaved_log(sw: Sweep, slug: str, pile: str, rel: str) -> None:
    """A verb that appends to a tracked task in place (maildir-git's progress and rescue) and
    was killed before its commit leaves the file modified: when the committed copy is a prefix
    of it and all that follows is whole log lines, the lines are committed. Any other
    uncommitted edit is the user's own business and left alone."""
    shown = sw.show(pile, slug)
    try:
        with sw.backend.lock(slug, timeout=0 if sw.dry_run else 30.0):
            data = sw.backend.read(sw.located(slug, pile))
            head = git.blob(sw.ctx.repo, f"HEAD:{rel}")
            if head is None or not data.startswith(head) or data == head:
                return
            added = data[len(head) :].decode("utf-8", "replace")
            if not added.endswith("\n") or any(
                line.strip() and parse_log_line(line) is None for line in added.split("\n")
            ):
                return
            if not sw.dry_run:
                sw.backend.commit(Change((Track((rel,)),), msg_commit_log(slug)))
    except (Conflict, Busy, FileNotFoundError):
        return
    except BacklogError as exc:
        sw.add(DUPLICATE, shown, f"log lines never committed: could not commit them: {exc.message}", slug, error=True)
        return
    done = sw.would("committed", "commit them")
    detail = f"log lines written but never committed (a verb killed before its commit): {done}"
    sw.add(DUPLICATE, shown, detail, slug, fixed=True)


def safely(sw: Sweep, slug: str, shown: str) -> None:
    try:
        _duplicate(sw, slug)
    except (Conflict, Busy):
        pass  # a worker holds the task: it is busy with it, not crashed
    except BacklogError as exc:
        sw.add(DUPLICATE, shown, f"could not repair: {exc.message}", slug, error=True)


def _plan(sw: Sweep, slug: str) -> _Plan | None:
    locs = sw.backend.locate(slug)
    status = _tracked_status(sw, slug)
    copies: list[_Copy] = []
    for loc in locs:
        try:
            data = sw.backend.read(loc)
        except FileNotFoundError:
            continue
        except BacklogError as exc:
            return _Plan(
                None, problem=f"a copy cannot be read ({exc.message}): repair by hand", path=sw.show(loc.pile, slug)
            )
        rel = None if loc.shared else sw.backend.rel(loc.path)
        copies.append(_Copy(loc, data, rel, rel is not None and rel in status))
    flying = [c for c in copies if c.loc.shared]
    gone = [sw.located(slug, p) for p in sw.tracked_piles if deleted(status.get(sw.tracked_rel(p, slug)))]
    drop = sw.stale([c.loc for c in copies] + gone, flying[0].data if len(flying) == 1 else None)
    copies = [c for c in copies if c.loc.pile not in drop]
    present = {c.loc.pile for c in copies}
    deletions = [
        (sw.tracked_rel(loc.pile, slug), loc.pile) for loc in gone if loc.pile not in present and loc.pile not in drop
    ]
    if not copies or len(copies) + len(deletions) < 2:
        return None
    piles = ", ".join(f"{c.loc.pile}/" for c in copies)
    keep = max(copies, key=lambda c: (len(c.data), sw.order[c.loc.pile]))
    others = [c for c in copies if c is not keep]
    first = sw.show(copies[0].loc.pile, slug)
    if not all(keep.data.startswith(c.data) for c in others):
        return _Plan(None, problem=f"in {piles} and no copy contains the others: keep one by hand", path=first)
    if keep.loc.pile != "done" and any(c.loc.pile == "done" for c in others):
        problem = f"in {piles}; the done/ copy is older than the {keep.loc.pile}/ one: repair by hand"
        return _Plan(None, problem=problem, path=first)
    for rel, _pile in deletions:
        old = git.blob(sw.ctx.repo, f"HEAD:{rel}") or git.blob(sw.ctx.repo, f":{rel}")
        if old is None or not keep.data.startswith(old):
            problem = (
                "deleted but not committed, and it is not an older copy of"
                f" {sw.show(keep.loc.pile, slug)}: commit or restore it by hand"
            )
            return _Plan(None, path=rel, problem=problem)
    return _Plan(keep, others, deletions)


def _duplicate(sw: Sweep, slug: str) -> None:
    plan = _plan(sw, slug)
    if plan is None:
        return
    # re-check on fresh state under the task's lock, a report too: a worker in the middle of a
    # claim (its lock held) shows two copies for a moment, which is no duplicate (a dry run does
    # not wait for the lock: a held lock means the task is busy, and it is skipped)
    with sw.backend.lock(slug, timeout=0 if sw.dry_run else 30.0):
        plan = _plan(sw, slug)
        if plan is None:
            return
        if plan.problem is None and not sw.dry_run:
            unmerged = _unmerged(sw, plan)
            if unmerged is not None:
                sw.add(DUPLICATE, unmerged, _resolve_by_hand(sw, slug, plan, unmerged), slug, error=True)
                return
            _repair(sw, slug, plan)
    if plan.problem is not None:
        sw.add(DUPLICATE, plan.path, plan.problem, slug)
        return
    assert plan.keep is not None  # noqa: S101 (narrows a type for mypy; established just above, never input-dependent)
    kept = sw.show(plan.keep.loc.pile, slug)
    for copy in plan.remove:
        sw.gone.add((slug, copy.loc.pile))
        detail = f"an older copy of {kept}: {sw.would('removed', 'remove it')}"
        sw.add(DUPLICATE, sw.show(copy.loc.pile, slug), detail, slug, fixed=True)
    for rel, _pile in plan.deleted:
        detail = (
            f"deleted but never committed while {kept} holds the task:"
            f" {sw.would('deletion committed', 'commit the deletion')}"
        )
        sw.add(DUPLICATE, rel, detail, slug, fixed=True)


def _unmerged(sw: Sweep, plan: _Plan) -> str | None:
    """The first copy the plan removes that a merge in progress left in conflict (one side
    changed it, the other deleted it: a retry's rewrite on one branch, a completion's removal of
    the stale copy on another), None when there is none."""
    rels = [c.rel for c in plan.remove if c.rel is not None]
    if not rels:
        return None
    out = git.run(sw.ctx.repo.toplevel, "ls-files", "-u", "-z", "--", *rels)
    return next((rec.split("\t", 1)[1] for rec in out.split("\0") if "\t" in rec), None)


def _resolve_by_hand(sw: Sweep, slug: str, plan: _Plan, rel: str) -> str:
    """What to do with a copy left in conflict: the janitor never writes into a merge in progress
    (docs/design.md, *A merge that conflicts on a stale copy*), so it says the one command."""
    assert plan.keep is not None  # noqa: S101 (narrows a type for mypy: a plan without a problem keeps a copy)
    kept = sw.show(plan.keep.loc.pile, slug)
    return (
        f"left in conflict by the merge in progress; an older copy of {kept}: resolve it with"
        f" `git rm -- {rel}`, then conclude the merge (`git commit`)"
    )


def _repair(sw: Sweep, slug: str, plan: _Plan) -> None:
    """Carry out a plan (under the task's lock, re-checked): tracked copies and deletions in one
    commit (a failure puts the removed copies back), shared copies after it."""
    assert plan.keep is not None  # noqa: S101 (narrows a type for mypy; established just above, never input-dependent)
    repo = sw.ctx.repo
    steps: list[Step] = [Remove(c.loc.path, c.data, c.rel) for c in plan.remove if c.rel is not None]  # tracked copies
    staged = tuple(rel for rel, _pile in plan.deleted if git.blob(repo, f":{rel}") is None)
    if staged:  # `git add -A` refuses a path already gone from the index: put it back first
        steps.append(Unstage(staged))
    steps.append(Track(tuple(rel for rel, _pile in plan.deleted)))
    if plan.keep.dirty and plan.keep.rel:  # a copy that never got committed (crash before the commit)
        steps.append(Track((plan.keep.rel,)))
    steps.append(Crash("maintain:dup-removed"))
    piles = {c.loc.pile for c in plan.remove} | {p for _r, p in plan.deleted}
    message = msg_remove_duplicate(slug, sorted(piles, key=lambda p: sw.order[p]))
    # shared copies go last: a failed commit above leaves them in place
    after: list[Step] = [Crash("maintain:dup-committed")]
    after += [Remove(c.loc.path, None) for c in plan.remove if c.loc.shared]
    sw.backend.commit(Change(tuple(steps), message, after=tuple(after)))
