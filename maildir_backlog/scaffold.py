"""Setting up a backlog: the kernel step behind `backlog setup` (and `setup --hooks`, and the
skill file `prime --skill` writes).

Scaffolds `backlog/` for a backend (AGENTS.md, the CLAUDE.md link, ROADMAP.md, .gitattributes,
the piles, the shared root and its symlinks, the post-checkout hook), links the repository's agent
guides, and commits only those paths. Everything is one `change.Change`: if anything fails (a
pre-commit hook refuses the commit) setup leaves no trace (SPEC §7.3). Setup creates no task,
so it writes nothing to the ledger or the remote; it refuses a backlog that already exists.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from . import git, hooks, limits, storage
from .attributes import ATTRIBUTES
from .backend import open_backend
from .change import Change, Dirs, Keep, Link, Nested, Step, Write, run
from .errors import BacklogError, NotFound
from .guide import ROADMAP, render_declaration
from .heal import read_gitignore
from .layout import CLAUDE, GITKEEP, Layout
from .project import Pipeline, Project

GUIDES = ("AGENTS.md", "CLAUDE.md")  # the repository root's agent instructions, linked when present
GUIDE_TARGET = "backlog/AGENTS.md"
GUIDE_LINE = f"Task queue: see [{GUIDE_TARGET}]({GUIDE_TARGET}); `backlog prime` prints the workflow for agents."


@dataclass(frozen=True)
class SetUp:
    """What `set_up` made and committed."""

    paths: list[str]  # committed, relative to the worktree
    findings: list[str]  # the layout self-heal's
    linked: list[str]  # the agent guides that now name backlog/AGENTS.md
    notes: list[str]  # the guides that could not be linked, and why
    hook: str  # what the hook installation did


def repository(cwd: Path | str) -> git.Repo:
    """The repository at `cwd` (a one-line error outside one)."""
    return git.discover(cwd)


def install_hooks(cwd: Path | str) -> str:
    """`setup --hooks`: install only the post-checkout hook, on an existing backlog."""
    repo = git.discover(cwd)
    if not Layout.of(repo).agents.exists():
        raise NotFound("no backlog here: backlog/AGENTS.md is missing (run `backlog setup --backend=...`)")
    steps, said = hooks.install(repo)
    run(Change(tuple(steps)), repo)
    return said


def write_skill(directory: Path, data: bytes) -> Path:
    """`prime --skill DIR`: write the guide as `DIR/SKILL.md` (crash-safe), making DIR if needed."""
    storage.ensure_dir(directory)
    path = directory / "SKILL.md"
    storage.write_file(path, data)
    return path


def set_up(repo: git.Repo, backend: str, pipeline: Pipeline) -> SetUp:
    """Scaffold a `backend` backlog with `pipeline` and commit it (nothing is left if that fails)."""
    layout = Layout.of(repo)
    root, agents = layout.root, layout.agents
    if os.path.lexists(agents):
        raise BacklogError("backlog/AGENTS.md already exists: this backlog is set up; not overwriting it")
    be = open_backend(repo, Project(backend, pipeline))
    rel = layout.rel
    gitignore = layout.gitignore
    gitignore_before = read_gitignore(gitignore)
    # Everything setup creates is undone if anything fails (say a pre-commit hook refuses the
    # commit), so setup leaves no trace (SPEC §7.3).
    steps: list[Step] = [Dirs(root), Write(agents, None, render_declaration(backend, pipeline).encode(), rel(agents))]
    claude = root / CLAUDE
    if not os.path.lexists(claude):
        steps.append(Link(claude, agents.name, rel(claude)))
    if not os.path.lexists(layout.gitattributes):
        steps.append(Write(layout.gitattributes, None, ATTRIBUTES, rel(layout.gitattributes)))
    roadmap = root / "ROADMAP.md"
    if not os.path.lexists(roadmap):
        steps.append(Write(roadmap, None, ROADMAP.encode(), rel(roadmap)))
    for pile in pipeline.all_piles:
        if be.is_shared(pile):
            steps.append(Dirs(layout.shared_pile(pile)))
            continue
        keep = layout.tracked_pile(pile) / GITKEEP
        steps.append(Dirs(keep.parent))
        if not keep.exists():
            steps.append(Write(keep, None, b"", rel(keep)))
    steps.append(Dirs(layout.locks))
    # what the self-heal below makes by its own changes goes back too: the in-flight symlinks,
    # its lock file, .gitignore
    steps += [Keep(layout.tracked_pile(p)) for p in pipeline.in_flight if be.is_shared(p)]
    steps += [Keep(layout.layout_lock), Keep(gitignore)]
    guides, linked, notes = _link_guides(repo)
    steps += guides
    findings: list[str] = []
    healed: list[str] = []

    def heal() -> list[str]:
        findings.extend(be.heal())
        if (now := read_gitignore(gitignore)) is not None and now != gitignore_before:
            healed.append(rel(gitignore))
        return healed

    hook, said = hooks.install(repo)
    steps += [Nested(heal), *hook]
    change = Change(tuple(steps), f"chore(backlog): set up {backend} backlog")
    run(change, repo)
    paths = change.tracked() + healed
    return SetUp(paths, findings, linked, notes, said)


def _link_guides(repo: git.Repo) -> tuple[list[Step], list[str], list[str]]:
    """Append one line pointing at backlog/AGENTS.md to the repository root's AGENTS.md and
    CLAUDE.md, those that exist (a symlink is followed inside the worktree; one file is linked
    once). Nothing is rewritten: a file that already names backlog/AGENTS.md is left as it is,
    and one with uncommitted changes (or untracked) is only noted, since setup's commit would
    take the user's edits with it. Returns (the edits, paths linked, notes)."""
    top = Path(os.path.realpath(repo.toplevel))
    seen: set[Path] = set()
    edits: list[Step] = []
    linked: list[str] = []
    notes: list[str] = []
    for name in GUIDES:
        real = Path(os.path.realpath(top / name))
        if real in seen or not real.is_file():
            continue
        seen.add(real)
        if not real.is_relative_to(top):
            notes.append(f"{name} points outside the repository: add a link to backlog/AGENTS.md yourself")
            continue
        rel = real.relative_to(top).as_posix()
        if real.stat().st_size > limits.CONFIG_BYTES:  # (committed: it may be of any size)
            notes.append(f"{rel} is over {limits.CONFIG_BYTES:,} bytes: add a link to backlog/AGENTS.md yourself")
            continue
        old = real.read_bytes()
        if GUIDE_TARGET.encode() in old:
            continue
        if not git.tracked(repo, rel) or git.dirty(repo, rel):
            notes.append(f"{rel} has uncommitted changes: add a link to backlog/AGENTS.md yourself")
            continue
        first = old.find(b"\n")
        nl = b"\r\n" if first > 0 and old[first - 1 : first] == b"\r" else b"\n"
        gap = b"" if not old or old.endswith(nl + nl) else nl if old.endswith(b"\n") else nl + nl
        edits.append(Write(real, old, old + gap + GUIDE_LINE.encode() + nl, rel))
        linked.append(rel)
    return edits, linked, notes
