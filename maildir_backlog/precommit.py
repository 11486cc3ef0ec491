"""What a pre-commit hook sees of the backlog (`backlog check-deps`, SPEC §5): the task files among
the paths it is given, their bytes as the work tree holds them, and every slug this worktree
knows (its piles, the shared ones included; the index; on maildir-shared, the ledger and the
intake branch).

The layout self-heal does not run here: a hook must not change the tree it checks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from . import git, project, storage
from .backend import open_backend
from .intake import read_intake
from .layout import DOCS, Layout, parse_task_rel
from .project import Project


@dataclass(frozen=True)
class Commit:
    """The worktree a commit is being made in, with its declared (or default) project."""

    repo: git.Repo
    project: Project

    def targets(self, cwd: Path, files: list[str]) -> list[tuple[str, str]]:
        """(worktree-relative path, slug) of each given file that is a task file of a known pile
        (and still exists: a deletion being committed is not checked)."""
        piles = set(self.project.pipeline.all_piles)
        found: list[tuple[str, str]] = []
        for name in files:
            rel = self._relative(cwd, name)
            if rel is None:
                continue
            parsed = parse_task_rel(rel)
            if parsed is None or parsed[0] not in piles:
                continue
            base = rel.rsplit("/", 1)[1]
            if base in DOCS or base.startswith("."):
                continue
            if not os.path.lexists(self.repo.toplevel / rel):
                continue  # deleted in this commit
            found.append((rel, parsed[1]))
        return found

    def read(self, rel: str) -> bytes:
        """The bytes of a task file as the work tree holds them (bounded, a regular file)."""
        return storage.read_task_bytes(self.repo.toplevel / rel, rel)

    def known_slugs(self) -> set[str]:
        """Every slug in some pile, in the index, or (maildir-shared) in the ledger or on the intake
        branch (its todo/ and done/, read through git objects)."""
        backend = open_backend(self.repo, self.project)
        piles = set(backend.pipeline.all_piles)  # (with the clone's in-flight piles this pipeline lacks)
        known: set[str] = set()
        for pile in piles:
            known.update(backend.slugs(pile))
        for path in git.tracked(self.repo, Layout.of(self.repo).root.name):
            found = parse_task_rel(path)
            if found is not None and found[0] in piles:
                known.add(found[1])
        known |= backend.settled_names()
        intake = read_intake(self.repo, self.project)  # maildir-shared: the queue other worktrees read
        if intake is not None:
            known |= set(intake.todo) | intake.done
        return known

    def _relative(self, cwd: Path, name: str) -> str | None:
        """`name` as a path relative to the toplevel (no symlinks resolved), or None when outside."""
        path = Path(name)
        candidates = [path] if path.is_absolute() else [cwd / path, Path(os.path.realpath(cwd)) / path]
        for candidate in candidates:
            try:
                return Path(os.path.normpath(candidate)).relative_to(self.repo.toplevel).as_posix()
            except ValueError:
                continue
        return None


def commit_at(cwd: Path | str) -> Commit:
    repo = git.discover(cwd)
    return Commit(repo, project.load(Layout.of(repo).agents, missing_ok=True))
