"""`migrate --from-flat`: `backlog/*.md` into `todo/`, `done/<subdir>/…` flattened, the scaffold made."""

from __future__ import annotations

import os
from pathlib import Path

from .. import git, project
from ..attributes import ATTRIBUTES
from ..backend import Backend, open_backend
from ..errors import BacklogError
from ..guide import ROADMAP, render_declaration
from ..layout import CLAUDE, DOCS, GITKEEP, Layout, pile_rel
from ..layout import ROADMAP as ROADMAP_FILE
from ..project import Project
from .plan import Move, Plan, listdir, read, show, task_name


def plan_flat(repo: git.Repo) -> Plan:
    layout = Layout.of(repo)
    root, agents = layout.root, layout.agents
    if not root.is_dir() or root.is_symlink():
        raise BacklogError("no backlog/ directory here: nothing to migrate from the flat layout")
    declared = os.path.lexists(agents)
    proj = project.load(agents) if declared else Project()  # the default: maildir-git, todo → doing → done
    flat = _Flat(repo, Plan("flat", proj))
    missing = _missing_piles(layout, proj, flat.backend)
    for entry in listdir(root):
        if entry.name in DOCS or not entry.name.endswith(".md") or entry.name.startswith("."):
            continue
        flat.move(Path(entry.path), "todo")
    for entry in listdir(layout.tracked_pile("done")):
        if entry.is_dir(follow_symlinks=False):
            flat.flatten(Path(entry.path))
    plan = flat.plan
    _scaffold(plan, layout, missing, declared)
    if not (plan.moves or plan.removes or plan.drop_dirs or missing) and declared:
        raise BacklogError("nothing to migrate: backlog/ is not in the flat layout")
    return plan


def _missing_piles(layout: Layout, proj: Project, backend: Backend) -> list[str]:
    """The piles of this worktree (not shared) that do not exist yet; refused: one that is not a directory."""
    missing = []
    for pile in proj.pipeline.all_piles:
        if backend.is_shared(pile):
            continue
        here = layout.tracked_pile(pile)
        if here.is_symlink() or (os.path.lexists(here) and not here.is_dir()):
            raise BacklogError(f"{pile_rel(pile)} is not a directory; nothing migrated")
        if not here.exists():
            missing.append(pile)
    return missing


def _scaffold(plan: Plan, layout: Layout, missing: list[str], declared: bool) -> None:
    """What the plan creates besides the moves: the missing piles, the declaration (unless
    `declared`), CLAUDE.md's link to it, the roadmap and .gitattributes, each only where nothing is."""
    proj, root, agents = plan.project, layout.root, layout.agents
    for pile in missing:
        keep = layout.tracked_pile(pile) / GITKEEP
        plan.creates.append((keep, b""))
        plan.lines.append(f"create {layout.rel(keep)}")
    if not declared:
        plan.creates.append((agents, render_declaration(proj.backend, proj.pipeline).encode()))
        plan.lines.append(
            f"create {layout.rel(agents)} (Backend {proj.backend}, Pipeline {' → '.join(proj.pipeline.piles)})"
        )
    claude = root / CLAUDE
    if not os.path.lexists(claude):
        plan.links.append((claude, agents.name))
        plan.lines.append(f"link {layout.rel(claude)} → {agents.name}")
    roadmap = root / ROADMAP_FILE
    if not os.path.lexists(roadmap):
        plan.creates.append((roadmap, ROADMAP.encode()))
        plan.lines.append(f"create {layout.rel(roadmap)}")
    if not os.path.lexists(layout.gitattributes):
        plan.creates.append((layout.gitattributes, ATTRIBUTES))
        plan.lines.append(f"create {layout.rel(layout.gitattributes)} (task files kept byte for byte)")


class _Flat:
    """The moves of one flat migration: each slug once, none onto a task that exists."""

    def __init__(self, repo: git.Repo, plan: Plan) -> None:
        self.layout = Layout.of(repo)
        self.plan = plan
        self.backend: Backend = open_backend(repo, plan.project)
        self.tracked = set(git.tracked(repo, self.layout.rel(self.layout.root)))
        self.targets: dict[str, tuple[str, Path]] = {}  # slug → (pile, source) for every planned move

    def move(self, src: Path, pile: str) -> None:
        layout, be = self.layout, self.backend
        slug = task_name(layout, src)
        dst = be.task_path(pile, slug)
        if slug in self.targets:
            other_pile, other = self.targets[slug]
            raise BacklogError(
                f"name clash: {show(layout, other)} and {show(layout, src)} would both become {slug}"
                f" (in {other_pile}/ and {pile}/); rename one first; nothing migrated"
            )
        found = be.locate(slug)
        if found:
            where = ", ".join(be.display(loc.pile, slug) for loc in found)
            raise BacklogError(
                f"name clash: {show(layout, src)} would become {be.display(pile, slug)}, but {where} exists;"
                " nothing migrated"
            )
        self.targets[slug] = (pile, src)
        self.plan.moves.append(Move(src, dst, read(layout, src), src_tracked=True, dst_tracked=True))
        self.plan.lines.append(f"move {show(layout, src)} → {show(layout, dst)}")

    def flatten(self, subdir: Path) -> None:
        """Every task under `done/<subdir>/` moves to `done/`; a tracked `.gitkeep` goes, anything
        else (an untracked one, a symlink) refuses; the emptied directories go, deepest first."""
        layout, plan = self.layout, self.plan
        for dirpath, dirnames, filenames in os.walk(subdir, topdown=False):
            here = Path(dirpath)
            for name in sorted(filenames):
                path = here / name
                if name != GITKEEP:
                    self.move(path, "done")
                elif layout.rel(path) in self.tracked:  # (a tracked symlink is refused by `read`)
                    plan.removes.append((path, read(layout, path)))
                    plan.lines.append(f"remove {layout.rel(path)}")
                else:
                    raise BacklogError(f"{layout.rel(path)}: not a tracked file; remove it first; nothing migrated")
            for name in sorted(dirnames):
                if (here / name).is_symlink():
                    raise BacklogError(
                        f"{layout.rel(here / name)}: a symlink inside done/; remove it first; nothing migrated"
                    )
            plan.drop_dirs.append(here)
