"""The kernel of `backlog migrate` (the verb and what it promises: `commands/migrate`).

One migration is planned in full (`plan`, `to_shared`, `to_git`, `flat`), re-planned under the
migration's flock and the moved slugs' locks, then run as one transaction ending in one commit
(`execute`), with a journal that `recover` uses to undo or finish a run that was killed
(`journal`). The verb only parses its options and shapes the result; everything that touches
git, files and locks is here, so no command can move tasks around the backend by another road.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import git, project, storage
from ..backend import open_backend
from ..errors import BacklogError, Conflict
from ..layout import Layout, pile_rel
from ..project import Project
from .execute import execute
from .flat import plan_flat
from .journal import recover
from .plan import Plan
from .to_git import plan_to_git
from .to_shared import plan_to_shared

__all__ = ["Migrated", "Plan", "recover", "run"]

PLANNERS: dict[str, Callable[[git.Repo], Plan]] = {
    "maildir-shared": plan_to_shared,
    "maildir-git": plan_to_git,
    "flat": plan_flat,
}


@dataclass(frozen=True)
class Migrated:
    """What one run of `migrate` did (or, in a dry run, would do)."""

    plan: Plan
    dry_run: bool
    healed: list[str] = field(default_factory=list)  # the self-heal's findings after a switch to maildir-shared
    recovered: list[str] = field(default_factory=list)  # an earlier run killed midway, undone or finished


def run(cwd: Path | str, to: str | None, dry_run: bool) -> Migrated:
    """Migrate the worktree at `cwd` to backend `to`, or from the flat layout (`to` None)."""
    repo = git.discover(cwd)
    if repo.branch is None:
        raise BacklogError("HEAD is detached: check out a branch before migrating (the migration commits)")
    recovered = [] if dry_run else recover(repo)  # an earlier run killed midway is undone or finished first
    layout = Layout.of(repo)
    declared = os.path.lexists(layout.agents)
    if to is None:
        proj = project.load(layout.agents) if declared else Project()
    else:
        if not declared and layout.root.is_dir():
            raise BacklogError(
                "no backlog here: backlog/AGENTS.md is missing"
                " (an older flat layout? run `backlog migrate --from-flat`)"
            )
        proj = project.load(layout.agents)  # "no backlog here" comes first
        if proj.backend == to:
            raise BacklogError(f"already on the {to} backend: nothing to migrate")
    _refuse_dirty(repo, layout, proj)
    make = _planner(PLANNERS[to or "flat"])
    plan = make(repo)
    if plan.empty():
        raise BacklogError("nothing to migrate")
    if dry_run:
        return Migrated(plan, dry_run=True)
    be = open_backend(repo, plan.project)
    with contextlib.ExitStack() as stack:
        stack.enter_context(storage.file_lock(layout.journal_lock, what="another migration"))
        for slug in plan.slugs:
            stack.enter_context(be.lock(slug))
        if make(repo) != plan:
            raise Conflict("the backlog changed while the migration was being prepared: run it again")
        healed = execute(repo, plan)
    return Migrated(plan, dry_run=False, healed=healed, recovered=recovered)


def _planner(make: Callable[[git.Repo], Plan]) -> Callable[[git.Repo], Plan]:
    """`make`, where a task file that left its pile while the plan was read (a worker moved it on)
    is a lost race, exit 3, as a change between the plan and its run is: nothing changed."""

    def planned(repo: git.Repo) -> Plan:
        try:
            return make(repo)
        except FileNotFoundError as exc:
            raise Conflict(
                f"the backlog changed while the migration was being planned ({exc.filename} moved on): run it again"
            ) from None

    return planned


def _refuse_dirty(repo: git.Repo, layout: Layout, proj: Project) -> None:
    links = {pile_rel(p): layout.tracked_pile(p) for p in proj.pipeline.in_flight}
    dirty = [
        p
        for p in git.dirty(repo, layout.rel(layout.root), layout.rel(layout.gitignore))
        if not (p in links and links[p].is_symlink())  # an un-ignored in-flight symlink is layout, not work
    ]
    if dirty:
        shown = ", ".join(dirty[:3]) + (f" and {len(dirty) - 3} more" if len(dirty) > 3 else "")
        raise BacklogError(
            f"uncommitted changes in backlog paths ({shown}): commit or stash them first; nothing migrated"
        )
