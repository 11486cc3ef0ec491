"""What a migration will do, decided in full before anything is touched.

A `Plan` lists every step in the order `execute` runs them (directories, new files, new copies,
symlinks, edits, removals, emptied directories) plus one human line per step; plans are values,
so the re-plan under the locks is compared with `==`. `Switch` is the shape both backend
switches share; the helpers below read what a plan needs and refuse what it cannot move.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .. import git, gitignore, project, storage
from ..errors import BacklogError, InvalidInput
from ..heal import read_gitignore
from ..layout import Layout, pile_rel
from ..project import Project, parse_declaration, set_backend_line
from ..task import validate_slug

MESSAGES = {
    "maildir-shared": "chore(backlog): migrate to maildir-shared backend",
    "maildir-git": "chore(backlog): migrate to maildir-git backend",
    "flat": "chore(backlog): migrate from the flat layout",
}


@dataclass(frozen=True)
class Move:
    src: Path
    dst: Path
    data: bytes
    src_tracked: bool  # the source is in the tree: its removal is part of the commit
    dst_tracked: bool  # the destination is in the tree: its creation is part of the commit
    dst_present: bool = False  # an identical copy is already there (left by an interrupted migration)


@dataclass(frozen=True)
class Edit:
    path: Path
    old: bytes | None  # None: the file does not exist yet
    new: bytes | None  # None: delete the file


@dataclass
class Plan:
    kind: str  # "maildir-shared", "maildir-git" or "flat"
    project: Project  # the project after the migration
    lines: list[str] = field(default_factory=list)
    real_dirs: list[Path] = field(default_factory=list)  # make these real directories first (unlinking a symlink)
    creates: list[tuple[Path, bytes]] = field(default_factory=list)
    links: list[tuple[Path, str]] = field(default_factory=list)
    moves: list[Move] = field(default_factory=list)
    edits: list[Edit] = field(default_factory=list)
    removes: list[tuple[Path, bytes]] = field(default_factory=list)  # tracked files dropped
    drop_dirs: list[Path] = field(default_factory=list)  # emptied directories removed before the commit
    notes: list[str] = field(default_factory=list)

    @property
    def message(self) -> str:
        return MESSAGES[self.kind]

    @property
    def slugs(self) -> list[str]:
        return sorted({m.dst.name[:-3] for m in self.moves})

    def empty(self) -> bool:
        return not (
            self.real_dirs or self.creates or self.links or self.moves or self.edits or self.removes or self.drop_dirs
        )


# -- reading what a plan needs ---------------------------------------------------------------
def show(layout: Layout, path: Path) -> str:
    """`path` as the user sees it: relative to the worktree, or absolute (the shared root)."""
    try:
        return layout.rel(path)
    except ValueError:
        return str(path)


def task_name(layout: Layout, path: Path) -> str:
    """The slug of a task file name, or a refusal naming the file."""
    name = path.name
    if not name.endswith(".md") or name.startswith("."):
        raise BacklogError(
            f"{show(layout, path)}: not a task file (expected <slug>.md); move it out first; nothing migrated"
        )
    try:
        return validate_slug(name[:-3])
    except InvalidInput as exc:
        raise BacklogError(f"cannot migrate {show(layout, path)}: {exc.message}; rename it first") from None


def read(layout: Layout, path: Path) -> bytes:
    return storage.read_task_bytes(path, show(layout, path))


def listdir(path: Path) -> list[os.DirEntry[str]]:
    """Every entry of a directory, by name; [] when it does not exist."""
    try:
        with os.scandir(path) as it:
            return sorted(it, key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []


def same_file(path: Path, data: bytes) -> bool:
    try:
        return storage.read_task_bytes(path) == data
    except (OSError, BacklogError):
        return False


# -- the shape of a backend switch -----------------------------------------------------------
class Switch:
    """What `--to maildir-shared` and `--to maildir-git` share: read the declaration and refuse
    a switch to the backend in use; walk the in-flight piles, each slug taken once (`task`);
    then `finish`: one `backlog/<pile>` line per in-flight pile added to or removed from
    `.gitignore`, and the `## Backend` line of AGENTS.md naming the target."""

    def __init__(self, repo: git.Repo, to: str) -> None:
        self.repo = repo
        self.layout = Layout.of(repo)
        self.before = project.load(self.layout.agents)
        if self.before.backend == to:
            raise BacklogError(f"already on the {to} backend: nothing to migrate")
        self.plan = Plan(to, self.before._replace(backend=to))
        self.in_flight = self.before.pipeline.in_flight
        self._seen: dict[str, str] = {}  # slug → the in-flight pile it was found in

    def task(self, path: Path, pile: str, where: str) -> tuple[str, bytes]:
        """The slug and bytes of the task file at `path` in `pile`; a slug met twice refuses."""
        slug = task_name(self.layout, path)
        if slug in self._seen:
            raise BacklogError(
                f"{slug} is in two {where} piles ({self._seen[slug]}/, {pile}/): run `backlog maintain` first;"
                " nothing migrated"
            )
        self._seen[slug] = pile
        return slug, read(self.layout, path)

    def finish(self, ignored: bool) -> Plan:
        """`ignored`: the in-flight piles become gitignored symlinks (else tracked directories)."""
        entries = [pile_rel(p) for p in self.in_flight]
        path = self.layout.gitignore
        old = read_gitignore(path)  # (never through a symlink)
        if ignored:
            add = gitignore.missing(old, entries)
            if add:
                self._edit(path, old, gitignore.with_entries(old, entries), f"edit .gitignore: add {', '.join(add)}")
        elif old is not None:
            new, dropped = gitignore.without_entries(old, entries)
            if new != old and new.strip():
                self._edit(path, old, new, f"edit .gitignore: remove {', '.join(dropped)}")
            elif new != old:
                self._edit(path, old, None, f"remove .gitignore (it held only {', '.join(dropped)})")
        self._backend_line()
        return self.plan

    def _backend_line(self) -> None:
        after = self.plan.project
        agents = self.layout.agents
        shown = self.layout.rel(agents)
        old = read(self.layout, agents)
        new = set_backend_line(old, after.backend)
        try:
            check: Project | None = parse_declaration(new.decode("utf-8-sig"))
        except (BacklogError, UnicodeDecodeError):
            check = None
        if check is None or check.backend != after.backend or check.pipeline != after.pipeline:
            raise BacklogError(f"could not rewrite the Backend line of {shown}; edit it by hand")
        self._edit(agents, old, new, f"edit {shown}: Backend {self.before.backend} → {after.backend}")

    def _edit(self, path: Path, old: bytes | None, new: bytes | None, line: str) -> None:
        self.plan.edits.append(Edit(path, old, new))
        self.plan.lines.append(line)
