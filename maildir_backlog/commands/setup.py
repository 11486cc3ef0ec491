"""`backlog setup`: scaffold backlog/ for a backend and commit only those paths."""

from __future__ import annotations

import os
from pathlib import Path

from .. import git, hooks, storage
from ..backend import open_backend
from ..context import Result
from ..errors import BacklogError, InvalidInput, NotFound
from ..layout import CLAUDE, GITKEEP, Layout
from ..project import BACKENDS, ROADMAP, Pipeline, Project, parse_pipeline, render_declaration

GUIDES = ("AGENTS.md", "CLAUDE.md")  # the repository root's agent instructions, linked when present
GUIDE_TARGET = "backlog/AGENTS.md"
GUIDE_LINE = f"Task queue: see [{GUIDE_TARGET}]({GUIDE_TARGET}); `backlog prime` prints the workflow for agents."


def setup_hooks(cwd: Path | str) -> Result:
    """`setup --hooks`: install only the post-checkout hook, on an existing backlog."""
    repo = git.discover(cwd)
    if not Layout.of(repo).agents.exists():
        raise NotFound("no backlog here: backlog/AGENTS.md is missing (run `backlog setup --backend=...`)")
    line = hooks.install(repo)
    return Result({"hook": line}, [line])


def setup(cwd: Path | str, backend: str | None, pipeline_text: str | None) -> Result:
    repo = git.discover(cwd)
    if backend is None:
        raise InvalidInput(
            "choose a backend: --backend=maildir-shared (recommended for any project that will use worktrees or"
            " several agents: one set of claims for every worktree of the clone) or --backend=maildir-git (every"
            " pile tracked on each branch; claims meet only at merge), e.g. backlog setup --backend=maildir-shared"
        )
    if backend not in BACKENDS:
        raise InvalidInput(f"backend {backend!r} is not supported by this tool (maildir-shared or maildir-git)")
    pipeline = parse_pipeline(pipeline_text, "--pipeline") if pipeline_text else Pipeline()
    layout = Layout.of(repo)
    root, agents = layout.root, layout.agents
    if os.path.lexists(agents):
        raise BacklogError("backlog/AGENTS.md already exists: this backlog is set up; not overwriting it")
    be = open_backend(repo, Project(backend, pipeline))
    gitignore = layout.gitignore
    gitignore_before = gitignore.read_bytes() if gitignore.exists() else None
    paths: list[str] = []
    # Everything setup creates is undone if anything fails (say a pre-commit hook refuses the
    # commit), so setup leaves no trace (SPEC §7.3).
    with storage.Transaction() as tx:
        tx.mkdirs(root)
        tx.write(agents, None, render_declaration(backend, pipeline).encode())
        paths.append(layout.rel(agents))
        claude = root / CLAUDE
        if not os.path.lexists(claude):
            tx.symlink(claude, agents.name)
            paths.append(layout.rel(claude))
        roadmap = root / "ROADMAP.md"
        if not os.path.lexists(roadmap):
            tx.write(roadmap, None, ROADMAP.encode())
            paths.append(layout.rel(roadmap))
        for pile in pipeline.all_piles:
            if be.is_shared(pile):
                tx.mkdirs(layout.shared_pile(pile))
                continue
            keep = layout.tracked_pile(pile) / GITKEEP
            tx.mkdirs(keep.parent)
            if not keep.exists():
                tx.write(keep, None, b"")
                paths.append(layout.rel(keep))
        tx.mkdirs(layout.locks)
        links = [layout.tracked_pile(p) for p in pipeline.in_flight if be.is_shared(p)]
        tx.on_undo(lambda: _remove_symlinks(links))
        tx.on_undo(lambda: storage.remove_file(layout.layout_lock))
        tx.on_undo(lambda: _restore(gitignore, gitignore_before))
        linked, notes = _link_guides(repo, tx)
        paths += linked
        findings = be.heal()
        if gitignore.exists() and gitignore.read_bytes() != gitignore_before:
            paths.append(layout.rel(gitignore))
        hook = hooks.install(repo, tx)
        git.commit_paths(repo, paths, f"chore(backlog): set up {backend} backlog")
    lines = [f"set up {backend} backlog in backlog/ (pipeline: {' → '.join(pipeline.piles)})", hook]
    lines += [f"linked the backlog guide from {rel}" for rel in linked] + notes
    lines += large_repository(repo)
    data = {
        "backend": backend,
        "pipeline": list(pipeline.piles),
        "paths": paths,
        "layout": findings,
        "linked": linked,
        "hook": hook,
    }
    return Result(data, lines)


def large_repository(repo: git.Repo) -> list[str]:
    """A large index makes every commit slow (each claim is one): turn on git's settings for many
    files, those not configured yet, and say so (docs/performance.md has the measured effect)."""
    entries, missing = git.large_settings_missing(repo)
    if not missing:
        return []
    git.set_large_settings(repo, missing)
    return [
        f"large repository ({entries:,} files in the index): turned on {' and '.join(missing)} for this clone,"
        " which makes each commit cheaper (see docs/performance.md); `git config --unset KEY` undoes one"
    ]


def _link_guides(repo: git.Repo, tx: storage.Transaction) -> tuple[list[str], list[str]]:
    """Append one line pointing at backlog/AGENTS.md to the repository root's AGENTS.md and
    CLAUDE.md, those that exist (a symlink is followed inside the worktree; one file is linked
    once). Nothing is rewritten: a file that already names backlog/AGENTS.md is left as it is,
    and one with uncommitted changes (or untracked) is only noted, since setup's commit would
    take the user's edits with it. Returns (paths linked, notes)."""
    top = Path(os.path.realpath(repo.toplevel))
    seen: set[Path] = set()
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
        old = real.read_bytes()
        if GUIDE_TARGET.encode() in old:
            continue
        if not git.tracked(repo, rel) or git.dirty(repo, rel):
            notes.append(f"{rel} has uncommitted changes: add a link to backlog/AGENTS.md yourself")
            continue
        first = old.find(b"\n")
        nl = b"\r\n" if first > 0 and old[first - 1 : first] == b"\r" else b"\n"
        gap = b"" if not old or old.endswith(nl + nl) else nl if old.endswith(b"\n") else nl + nl
        tx.write(real, old, old + gap + GUIDE_LINE.encode() + nl)
        linked.append(rel)
    return linked, notes


def _remove_symlinks(links: list[Path]) -> None:
    for link in links:
        if link.is_symlink():
            storage.remove_file(link)


def _restore(path: Path, before: bytes | None) -> None:
    if before is None:
        storage.remove_file(path)
    elif not path.exists() or path.read_bytes() != before:
        storage.write_file(path, before)
