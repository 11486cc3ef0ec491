"""`migrate --to maildir-shared`: the tracked in-flight piles move into the shared root."""

from __future__ import annotations

import os
from pathlib import Path

from .. import git
from ..errors import BacklogError
from ..layout import GITKEEP, pile_rel
from .plan import Move, Plan, Switch, listdir, read, same_file


def plan_to_shared(repo: git.Repo) -> Plan:
    switch = Switch(repo, "maildir-shared")
    layout, plan = switch.layout, switch.plan
    tracked = set(git.tracked(repo, layout.rel(layout.root)))
    for pile in switch.in_flight:
        _empty_pile(switch, pile, tracked)
    for pile in switch.in_flight:
        plan.lines.append(f"link {pile_rel(pile)} → {layout.shared_pile(pile)} (after the commit)")
    switch.finish(ignored=True)
    plan.notes.append(
        "other worktrees: once they have this commit (merge it), the next backlog verb there links"
        f" backlog/<pile> to {layout.shared_root}"
    )
    others = _branches_tracking(repo, [pile_rel(p) for p in switch.in_flight])
    if others:
        plan.notes.append(
            f"branches that still track in-flight files: {', '.join(others)}; the first backlog verb in a"
            " worktree of each moves them into the shared root and commits their removal (or merge this commit)"
        )
    return plan


def _branches_tracking(repo: git.Repo, piles: list[str]) -> list[str]:
    """Other local branches whose tip tracks files in an in-flight pile."""
    out = git.run(repo.toplevel, "for-each-ref", "--format=%(refname:short)", "refs/heads")
    found = []
    for branch in out.split():
        if branch == repo.branch:
            continue
        listed = git.run(
            repo.toplevel, "ls-tree", "-r", "--name-only", "--end-of-options", f"refs/heads/{branch}", "--", *piles
        )
        if any(name.rsplit("/", 1)[-1] != GITKEEP for name in listed.split()):
            found.append(branch)
    return found


def _empty_pile(switch: Switch, pile: str, tracked: set[str]) -> None:
    """Every task of the tracked directory `backlog/<pile>` moves to the shared pile; its
    tracked `.gitkeep` and then the directory itself go."""
    layout, plan = switch.layout, switch.plan
    here = layout.tracked_pile(pile)
    if here.is_symlink():
        raise BacklogError(
            f"{pile_rel(pile)} is a symlink, but a maildir-git backlog keeps a directory there; nothing migrated"
        )
    if not here.exists():
        return
    if not here.is_dir():
        raise BacklogError(f"{pile_rel(pile)} is not a directory; nothing migrated")
    for entry in listdir(here):
        path = Path(entry.path)
        if entry.name == GITKEEP and entry.is_file(follow_symlinks=False) and layout.rel(path) in tracked:
            plan.removes.append((path, read(layout, path)))
            plan.lines.append(f"remove {layout.rel(path)}")
            continue
        slug, data = switch.task(path, pile, "in-flight")
        dst = layout.shared_pile(pile) / entry.name
        present = same_file(dst, data)  # a copy left by an interrupted migration is reused
        for other in switch.in_flight:
            there = layout.shared_pile(other) / entry.name
            if os.path.lexists(there) and not (there == dst and present):
                raise BacklogError(
                    f"name clash: {there} already exists in the shared root ({slug} is in flight there);"
                    " nothing migrated"
                )
        plan.moves.append(Move(path, dst, data, src_tracked=True, dst_tracked=False, dst_present=present))
        plan.lines.append(f"move {layout.rel(path)} → {dst}" + (" (identical copy already there)" if present else ""))
    plan.drop_dirs.append(here)
