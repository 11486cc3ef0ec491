"""`migrate --to maildir-git`: the shared in-flight piles come back as tracked directories."""

from __future__ import annotations

import os
from pathlib import Path

from .. import git, storage
from ..errors import BacklogError
from ..layout import GITKEEP, display, pile_rel
from .plan import Move, Plan, Switch, read


def plan_to_git(repo: git.Repo) -> Plan:
    switch = Switch(repo, "maildir-git")
    plan = switch.plan
    for pile in switch.in_flight:
        _fill_pile(switch, pile)
    switch.finish(ignored=False)
    if plan.moves:
        plan.notes.append(
            f"the shared in-flight tasks of the whole clone are now tracked on branch {repo.branch};"
            f" other worktrees see them only after merging {repo.branch}"
        )
    plan.notes.append(f"the ledger and locks stay in {switch.layout.shared_root} (unused by maildir-git)")
    return plan


def _fill_pile(switch: Switch, pile: str) -> None:
    """`backlog/<pile>` becomes a real directory with a `.gitkeep`, and every task of the shared
    pile a tracked file in it."""
    layout, plan = switch.layout, switch.plan
    here = layout.tracked_pile(pile)
    if here.is_symlink():
        plan.real_dirs.append(here)
        plan.lines.append(f"replace the symlink {pile_rel(pile)} by a directory")
    elif here.is_dir():
        if any(True for _ in os.scandir(here)):
            raise BacklogError(
                f"{pile_rel(pile)} is a real directory holding files, not the symlink to the shared pile:"
                " run `backlog status` to heal the layout first; nothing migrated"
            )
    elif os.path.lexists(here):
        raise BacklogError(f"{pile_rel(pile)} is a file, not the symlink to the shared pile; nothing migrated")
    else:
        plan.real_dirs.append(here)
        plan.lines.append(f"create the directory {pile_rel(pile)}")
    keep = here / GITKEEP
    plan.creates.append((keep, b""))
    plan.lines.append(f"create {layout.rel(keep)}")
    for entry in sorted(storage.entries(layout.shared_pile(pile)), key=lambda e: e.name):
        path = Path(entry.path)
        slug, data = switch.task(path, pile, "shared in-flight")
        _drop_stale_copy(switch, pile, slug, data)
        dst = here / entry.name
        plan.moves.append(Move(path, dst, data, src_tracked=False, dst_tracked=True))
        plan.lines.append(f"move {path} → {layout.rel(dst)}")


def _drop_stale_copy(switch: Switch, pile: str, slug: str, data: bytes) -> None:
    """A tracked copy of an in-flight task: the stale `todo/` copy its claim left on this branch
    (the in-flight file starts with its bytes) is removed, as the claim did on the claimer's
    branch; any other copy is a clash."""
    layout, plan = switch.layout, switch.plan
    pipeline = switch.before.pipeline
    for other in pipeline.all_piles:
        if other in switch.in_flight:
            continue
        copy = layout.tracked_pile(other) / f"{slug}.md"
        if not os.path.lexists(copy):
            continue
        old = read(layout, copy)
        if other == "todo" and data.startswith(old):
            plan.removes.append((copy, old))
            plan.lines.append(
                f"remove {display(other, slug)} (stale copy of the in-flight task, claimed on another branch)"
            )
            continue
        raise BacklogError(
            f"name clash: {slug} is in flight in the shared root ({pile}/) and also in {pile_rel(other)}/ of this"
            " worktree: finish it or merge the branch holding its claim first; nothing migrated"
        )
