"""`backlog setup`: scaffold backlog/ for a backend and commit only those paths."""

from __future__ import annotations

import os
from pathlib import Path

from .. import git, storage
from ..backend import open_backend
from ..context import Result
from ..errors import BacklogError, InvalidInput
from ..layout import CLAUDE, GITKEEP, Layout
from ..project import BACKENDS, ROADMAP, Pipeline, Project, parse_pipeline, render_declaration


def setup(cwd: Path | str, backend: str | None, pipeline_text: str | None) -> Result:
    repo = git.discover(cwd)
    if backend is None:
        hint = "maildir-shared" if len(git.worktrees(repo)) > 1 else "maildir-git"
        raise InvalidInput(f"choose a backend: backlog setup --backend={hint} (maildir-shared or maildir-git)")
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
        findings = be.heal()
        if gitignore.exists() and gitignore.read_bytes() != gitignore_before:
            paths.append(layout.rel(gitignore))
        git.commit_paths(repo, paths, f"chore(backlog): set up {backend} backlog")
    lines = [f"set up {backend} backlog in backlog/ (pipeline: {' → '.join(pipeline.piles)})"]
    return Result({"backend": backend, "pipeline": list(pipeline.piles), "paths": paths, "layout": findings}, lines)


def _remove_symlinks(links: list[Path]) -> None:
    for link in links:
        if link.is_symlink():
            storage.remove_file(link)


def _restore(path: Path, before: bytes | None) -> None:
    if before is None:
        storage.remove_file(path)
    elif not path.exists() or path.read_bytes() != before:
        storage.write_file(path, before)
