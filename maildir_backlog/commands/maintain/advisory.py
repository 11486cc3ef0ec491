"""Buckets 4–7, reported on the repaired state and never acted on: unresolvable dependencies,
dependency cycles, orphaned shared claims and todo copies settled on another branch.

One pass over every pile (`census`) reads what they need; the files it cannot parse are
handed on to bucket 8 (LAYOUT)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ...clock import format_ts
from ...errors import BacklogError
from ...layout import BACKLOG
from ...ledger import RENAMED, Settled
from ...project import CATEGORIES, FAILED
from ...repair.findings import CYCLES, ORPHANED, SETTLED_ELSEWHERE, UNRESOLVABLE
from ...repair.sweep import Sweep
from ...state import Located
from ...task import Task, is_slug
from .cycles import find_cycles


@dataclass
class Census:
    tasks: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)  # slug -> (pile, deps), not done/
    flying: list[tuple[Located, Task]] = field(default_factory=list)
    known: set[str] = field(default_factory=set)  # every slug a dependency may name
    invalid: list[tuple[str, str]] = field(default_factory=list)  # (shown path, error) of unparsable task files
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (shown path, line) of log lines not understood


def census(sw: Sweep) -> Census:
    found = Census()
    for pile in sw.pipeline.all_piles:
        if sw.pipeline.is_in_flight(pile):
            _count_flying(sw, pile, found)
        else:
            _count_summaries(sw, pile, found)
    if sw.shared_backend:
        found.known |= {name for name in sw.backend.settled_names() if is_slug(name)}
    return found


def _count_flying(sw: Sweep, pile: str, found: Census) -> None:
    """The tasks of the in-flight pile `pile`, each parsed (bucket 6 reads their claims)."""
    for slug, entry in sorted(sw.backend.slugs(pile).items()):
        if sw.removed(slug, pile):
            continue
        loc = Located(slug, pile, Path(entry.path), sw.backend.is_shared(pile))
        try:
            task = sw.backend.load(loc)
        except FileNotFoundError:
            continue
        except BacklogError as exc:
            found.invalid.append((sw.show(pile, slug), exc.message))
            continue
        found.known.add(slug)
        found.flying.append((loc, task))
        found.unreadable += [(sw.show(pile, slug), line) for line in task.unreadable]
        found.tasks.setdefault(slug, (pile, tuple(task.dependencies)))


def _count_summaries(sw: Sweep, pile: str, found: Census) -> None:
    """The tasks of the pile `pile` (not in flight), from their summaries."""
    for slug, summary in sorted(sw.backend.summaries(pile).items()):
        if sw.removed(slug, pile):
            continue
        if summary.error:
            found.invalid.append((sw.show(pile, slug), summary.error))
            continue
        found.known.add(slug)
        if pile != "done":
            found.tasks.setdefault(slug, (pile, summary.dependencies))


def report(sw: Sweep, found: Census) -> None:
    """Buckets 4 to 7, in order."""
    _deps(sw, found.tasks, found.known)
    _cycles(sw, found.tasks)
    if sw.shared_backend:
        _orphans(sw, found.flying)
        _settled_elsewhere(sw)


# -- 4. unresolvable deps ---------------------------------------------------------------------
def _deps(sw: Sweep, tasks: dict[str, tuple[str, tuple[str, ...]]], known: set[str]) -> None:
    for slug, (pile, deps) in sorted(tasks.items(), key=lambda kv: (sw.order[kv[1][0]], kv[0])):
        for dep in deps:
            if dep in known:
                continue
            near = [f"{dep}-{c}" for c in CATEGORIES if f"{dep}-{c}" in known]
            hint = f"; did you mean {' or '.join(near)}?" if near else ""
            sw.add(UNRESOLVABLE, sw.show(pile, slug), f"depends on {dep}, which is in no pile{hint}", slug)


# -- 5. cycles --------------------------------------------------------------------------------
def _cycles(sw: Sweep, tasks: dict[str, tuple[str, tuple[str, ...]]]) -> None:
    graph = {slug: set(deps) for slug, (_pile, deps) in tasks.items()}
    cycles, complete = find_cycles(graph)
    for cycle in cycles:
        sw.add(CYCLES, sw.show(tasks[cycle[0]][0], cycle[0]), " → ".join(cycle), cycle[0])
    if not complete:
        sw.add(CYCLES, f"{BACKLOG}/", f"more cycles not listed (stopped after {len(cycles)})")


# -- 6. orphaned shared in-flight -------------------------------------------------------------
def _orphans(sw: Sweep, flying: list[tuple[Located, Task]]) -> None:
    live = [(loc, task) for loc, task in flying if loc.slug not in sw.handled]
    if not live:
        return
    branches = sw.branches()
    for loc, task in live:
        claim = task.claim_of_record()
        shown = sw.show(loc.pile, loc.slug)
        if claim is None:
            detail = "no claim of record names a claimer or branch: fail it, or rescue it once past its budget"
            sw.add(ORPHANED, shown, detail, loc.slug)
            continue
        branch = claim.get("branch")
        if branch and branch in branches:
            continue
        detail = (
            f"claimed by {claim.get('claimer', '?')} on branch {branch or '?'}, which exists"
            " neither locally nor as a remote-tracking branch: rescue it once past its budget, or fail it"
        )
        sw.add(ORPHANED, shown, detail, loc.slug)


# -- 7. settled elsewhere ---------------------------------------------------------------------
def _settled_elsewhere(sw: Sweep) -> None:
    names = sw.backend.settled_names()
    if not names:
        return
    todo = sw.backend.slugs("todo")
    for slug in sorted(names & set(todo)):
        if not is_slug(slug):
            continue
        entry = sw.backend.settled(slug)
        if entry is None:
            continue
        loc = Located(slug, "todo", Path(todo[slug].path), False)
        task: Task | None
        try:
            task = sw.backend.load(loc)
        except (BacklogError, FileNotFoundError):
            task = None
        if not entry.blocks(task):
            continue
        sw.add(SETTLED_ELSEWHERE, sw.show("todo", slug), _settled_detail(sw, slug, entry), slug)
    _renamed_in_flight(sw, names)


def _settled_detail(sw: Sweep, slug: str, entry: Settled) -> str:
    """What bucket 7 says of a todo/ copy of `slug`, which the ledger's `entry` says was settled."""
    when = format_ts(entry.ts)
    if entry.outcome == RENAMED:
        return (
            f"renamed to {entry.to} on this branch at {when}, yet still in todo/ (a rename killed midway):"
            f" run `backlog rename {slug} {entry.to}` again"
            if entry.branch == sw.ctx.repo.branch
            else f"renamed to {entry.to} on branch {entry.branch} at {when}: merge it"
        )
    if entry.branch == sw.ctx.repo.branch:
        return (
            f"the ledger says it was settled ({entry.outcome}) on this branch at {when}, yet it is still"
            " in todo/: it cannot be claimed; retry it or remove it"
        )
    then = "merge it, or retry it there" if entry.outcome == FAILED else "merge it"
    return f"settled ({entry.outcome}) on branch {entry.branch} at {when}: {then}"


def _renamed_in_flight(sw: Sweep, names: set[str]) -> None:
    """Bucket 7's in-flight tasks: a rename of one killed after its tombstone was written."""
    for pile in sw.ctx.pipeline.flying:
        for slug in sorted(names & set(sw.backend.slugs(pile))):
            entry = sw.backend.settled(slug)
            if entry is None or entry.outcome != RENAMED or entry.to is None or sw.backend.locate(entry.to):
                continue
            again = (
                f"run `backlog rename {slug} {entry.to}` again" if entry.branch == sw.ctx.repo.branch else "merge it"
            )
            detail = (
                f"renamed to {entry.to} on branch {entry.branch} at {format_ts(entry.ts)}, yet still in flight"
                f" under its old name (a rename killed midway): {again}"
            )
            sw.add(SETTLED_ELSEWHERE, sw.show(pile, slug), detail, slug)
