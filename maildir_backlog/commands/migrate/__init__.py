"""`backlog migrate`: switch backend in either direction, or convert the older flat layout (SPEC §5).

Three migrations, each planned in full before anything is touched, then run as one transaction
ending in ONE commit that holds only backlog paths and `.gitignore` (`git.commit_paths`, so the
user's staged work stays staged and out of it):

* `--to maildir-shared` (from maildir-git): the tracked files of the in-flight piles (pipeline
  piles strictly between `todo` and `done`) move into `<common dir>/backlog/<pile>/`, bytes
  intact; their `.gitkeep` files and directories leave the tree; `.gitignore` gains a
  `backlog/<pile>` line per in-flight pile; the `## Backend` line of `backlog/AGENTS.md` becomes
  `maildir-shared`. After the commit the per-worktree symlinks are made by the backend's own
  self-heal. Other worktrees get their symlinks from the self-heal of the next verb they run,
  once they have the migration commit (merge it); a real `backlog/<pile>` directory that their
  branch still holds is emptied into the shared pile by that same self-heal.
* `--to maildir-git` (from maildir-shared): every task of the shared in-flight piles comes back
  as a tracked file `backlog/<pile>/<slug>.md` of THIS worktree's branch (the shared piles are
  clone-wide, so other worktrees see those tasks only after merging this branch); the symlinks
  become real directories with a `.gitkeep` (as `setup --backend=maildir-git` makes them);
  the `backlog/<pile>` lines leave `.gitignore` (deleted when nothing else is left in it); the
  Backend line becomes `maildir-git`. A task claimed on another branch usually still has its
  stale `todo/` copy on this branch (the claim's `git rm` lives on the claimer's branch): when
  the in-flight file provably extends that copy (starts with its bytes), the copy is removed in
  the same commit, exactly as the claim did on the claimer's branch; any other same-slug copy in
  a tracked pile is a clash and refuses the migration.
  Decision: the ledger and the locks stay in the shared root. maildir-git never reads the
  ledger, worktrees that have not merged the migration yet still run maildir-shared and rely on
  it for exactly-once, and a later migration back to maildir-shared finds it still right (a
  task retried meanwhile carries a newer `retried` line, which outranks its old entry). The
  emptied shared pile directories are left in place for the same reason.
* `--from-flat`: pending `backlog/*.md` (other than AGENTS.md, CLAUDE.md, ROADMAP.md) move to
  `backlog/todo/`; `backlog/done/<subdir>/…/*.md` (e.g. `done/2025/x.md`) are flattened into
  `backlog/done/` (a `.gitkeep` in such a subdirectory is dropped, anything else refuses);
  pipeline piles that are missing get a `.gitkeep`. Decision: when `backlog/AGENTS.md` is
  missing the migration scaffolds what `setup` would — AGENTS.md declaring `maildir-git` and the
  default pipeline `todo → doing → done`, the CLAUDE.md symlink, a ROADMAP.md skeleton — each
  only when absent; switch backend afterwards with `--to maildir-shared` if wanted.
  Every moved name must be `<valid slug>.md`; a bad one refuses the whole migration, naming it.

Refusals (exit 1, one line, nothing changed): detached HEAD; uncommitted changes under
`backlog/` or in `.gitignore`; no backlog set up (`--to` only); already on the target backend;
nothing to migrate; a name clash (the slug already at the destination or in flight in another
pile, two flat files flattening to one name); a file that is not a task where tasks must be.

Crash and failure safety: new copies are written first (exclusive create, temporary file,
fsync, link), edited files are replaced atomically, old copies are removed last; if anything
fails before the commit lands (e.g. a failing pre-commit hook) every step is undone in reverse
and the index entries of the migration's paths are put back as in HEAD. A crash leaves a task
in two places, never in none, and a journal (`<git dir>/backlog-migration.json`, written before
the first step, removed after the last) says what the migration leaves where: `recover`, run by
`backlog maintain` and at the start of the next `migrate`, undoes a migration killed before its
commit (paths back as in HEAD, the copies it made removed, symlinks put back) or finishes one
killed after it (the shared copies removed); only what the migration itself wrote is touched.
A byte-identical copy already at a destination (left by a run without a journal) is reused.
The moved slugs' locks are held during
the migration and the plan is re-made under them: a change in between is a Conflict (exit 3).
Still, migrate while no worker is running: a backend switch is a clone-wide event.

`--dry-run` prints the same plan, one line per step (`move backlog/doing/x.md → <shared>/doing/x.md`),
and changes nothing.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ... import git, project, storage
from ...backend import SharedBackend, open_backend
from ...context import Result
from ...errors import BacklogError, Conflict, InvalidInput
from ...layout import Layout
from ...project import BACKENDS, ROADMAP, Pipeline, Project, parse_declaration, render_declaration, set_backend_line
from ...task import validate_slug


def read_project(repo: git.Repo) -> Project:
    return project.load(Layout.of(repo).agents)

SPECIAL = ("AGENTS.md", "CLAUDE.md", "ROADMAP.md")
GITKEEP = ".gitkeep"
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
        return not (self.real_dirs or self.creates or self.links or self.moves or self.edits or self.removes
                    or self.drop_dirs)


# -- entry point ---------------------------------------------------------------------------
def migrate(cwd: Path | str, to: str | None = None, from_flat: bool = False, dry_run: bool = False) -> Result:
    if bool(to) == bool(from_flat):
        raise InvalidInput("migrate needs exactly one of --to BACKEND or --from-flat")
    if to is not None and to not in BACKENDS:
        raise InvalidInput(f"cannot migrate to {to!r}: use maildir-shared or maildir-git")
    repo = git.discover(cwd)
    if repo.branch is None:
        raise BacklogError("HEAD is detached: check out a branch before migrating (the migration commits)")
    recovered = [] if dry_run else recover(repo)  # an earlier run killed midway is undone or finished first

    def make() -> Plan:
        if from_flat:
            return plan_flat(repo)
        return plan_to_shared(repo) if to == "maildir-shared" else plan_to_git(repo)

    if from_flat:
        agents = repo.toplevel / "backlog" / "AGENTS.md"
        project = read_project(repo) if os.path.lexists(agents) else Project()
    else:
        agents = repo.toplevel / "backlog" / "AGENTS.md"
        if not os.path.lexists(agents) and (repo.toplevel / "backlog").is_dir():
            raise BacklogError(
                "no backlog here: backlog/AGENTS.md is missing (an older flat layout? run `backlog migrate --from-flat`)"
            )
        project = read_project(repo)  # "no backlog here" comes first
        if project.backend == to:
            raise BacklogError(f"already on the {to} backend: nothing to migrate")
    _refuse_dirty(repo, project)
    plan = make()
    if plan.empty():
        raise BacklogError("nothing to migrate")
    if dry_run:
        lines = plan.lines + [f'commit "{plan.message}"', "dry run: nothing changed"]
        return Result(_data(plan, dry_run=True), lines)
    be = open_backend(repo, plan.project)
    with contextlib.ExitStack() as stack:
        stack.enter_context(storage.file_lock(repo.git_dir / JOURNAL_LOCK, what="another migration"))
        for slug in plan.slugs:
            stack.enter_context(be.lock(slug))
        if make() != plan:
            raise Conflict("the backlog changed while the migration was being prepared: run it again")
        layout = execute(repo, plan)
    lines = plan.lines + [f'committed "{plan.message}"'] + [f"layout: {f}" for f in layout] + plan.notes
    lines = [f"recovered: {f}" for f in recovered] + lines
    data = _data(plan, dry_run=False)
    data["layout"] = layout
    data["recovered"] = recovered
    return Result(data, lines)


def _data(plan: Plan, dry_run: bool) -> dict:
    return {
        "migration": plan.kind,
        "backend": plan.project.backend,
        "pipeline": list(plan.project.pipeline.piles),
        "dry_run": dry_run,
        "moves": [{"from": str(m.src), "to": str(m.dst)} for m in plan.moves],
        "created": [str(p) for p, _ in plan.creates] + [str(p) for p, _ in plan.links],
        "edited": [str(e.path) for e in plan.edits if e.new is not None],
        "removed": [str(p) for p, _ in plan.removes] + [str(e.path) for e in plan.edits if e.new is None],
        "commit": plan.message,
        "plan": plan.lines,
        "notes": plan.notes,
    }


def _refuse_dirty(repo: git.Repo, project: Project) -> None:
    links = {f"backlog/{p}" for p in project.pipeline.in_flight}
    dirty = [
        p for p in git.dirty(repo, "backlog", ".gitignore")
        if not (p in links and (repo.toplevel / p).is_symlink())  # an un-ignored in-flight symlink is layout, not work
    ]
    if dirty:
        shown = ", ".join(dirty[:3]) + (f" and {len(dirty) - 3} more" if len(dirty) > 3 else "")
        raise BacklogError(f"uncommitted changes in backlog paths ({shown}): commit or stash them first; nothing migrated")


# -- helpers for planning ------------------------------------------------------------------
def _show(repo: git.Repo, path: Path) -> str:
    try:
        return path.relative_to(repo.toplevel).as_posix()
    except ValueError:
        return str(path)


def _task_name(repo: git.Repo, path: Path) -> str:
    """The slug of a task file name, or a refusal naming the file."""
    name = path.name
    if not name.endswith(".md") or name.startswith("."):
        raise BacklogError(f"{_show(repo, path)}: not a task file (expected <slug>.md); move it out first; nothing migrated")
    try:
        return validate_slug(name[:-3])
    except InvalidInput as exc:
        raise BacklogError(f"cannot migrate {_show(repo, path)}: {exc.message}; rename it first") from None


def _read(repo: git.Repo, path: Path) -> bytes:
    return storage.read_task_bytes(path, _show(repo, path))


def _read_optional(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _listdir(path: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(path) as it:
            return sorted(it, key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _same_file(path: Path, data: bytes) -> bool:
    try:
        return storage.read_task_bytes(path) == data
    except (OSError, BacklogError):
        return False


def _agents_edit(repo: git.Repo, plan: Plan, old_backend: str) -> None:
    path = repo.toplevel / "backlog" / "AGENTS.md"
    old = _read(repo, path)
    new = set_backend_line(old, plan.project.backend)
    try:
        check = parse_declaration(new.decode("utf-8-sig"))
    except (BacklogError, UnicodeDecodeError):
        check = None
    if check is None or check.backend != plan.project.backend or check.pipeline != plan.project.pipeline:
        raise BacklogError("could not rewrite the Backend line of backlog/AGENTS.md; edit it by hand")
    plan.edits.append(Edit(path, old, new))
    plan.lines.append(f"edit backlog/AGENTS.md: Backend {old_backend} → {plan.project.backend}")


def _gitignore_key(line: bytes) -> str:
    return line.decode("utf-8", "replace").strip().strip("/")


def _gitignore_add(repo: git.Repo, plan: Plan, entries: list[str]) -> None:
    path = repo.toplevel / ".gitignore"
    old = _read_optional(path)
    have = {_gitignore_key(line) for line in (old or b"").splitlines()}
    missing = [e for e in entries if e not in have]
    if not missing:
        return
    text = old or b""
    if text and not text.endswith((b"\n", b"\r")):
        text += b"\n"
    plan.edits.append(Edit(path, old, text + b"".join(f"{m}\n".encode() for m in missing)))
    plan.lines.append(f"edit .gitignore: add {', '.join(missing)}")


def _gitignore_remove(repo: git.Repo, plan: Plan, entries: list[str]) -> None:
    path = repo.toplevel / ".gitignore"
    old = _read_optional(path)
    if old is None:
        return
    kept = [line for line in old.splitlines(keepends=True) if _gitignore_key(line) not in entries]
    new = b"".join(kept)
    if new == old:
        return
    dropped = [e for e in entries if any(_gitignore_key(line) == e for line in old.splitlines())]
    if new.strip():
        plan.edits.append(Edit(path, old, new))
        plan.lines.append(f"edit .gitignore: remove {', '.join(dropped)}")
    else:
        plan.edits.append(Edit(path, old, None))
        plan.lines.append(f"remove .gitignore (it held only {', '.join(dropped)})")


# -- maildir-git → maildir-shared ------------------------------------------------------------
def plan_to_shared(repo: git.Repo) -> Plan:
    project = read_project(repo)
    if project.backend == "maildir-shared":
        raise BacklogError("already on the maildir-shared backend: nothing to migrate")
    plan = Plan("maildir-shared", dataclasses.replace(project, backend="maildir-shared"))
    root = repo.toplevel / "backlog"
    shared_root = repo.common_dir / "backlog"
    in_flight = project.pipeline.in_flight
    tracked = set(git.tracked(repo, "backlog"))
    seen: dict[str, str] = {}
    for pile in in_flight:
        here = root / pile
        if here.is_symlink():
            raise BacklogError(f"backlog/{pile} is a symlink, but a maildir-git backlog keeps a directory there; nothing migrated")
        if not here.exists():
            continue
        if not here.is_dir():
            raise BacklogError(f"backlog/{pile} is not a directory; nothing migrated")
        for entry in _listdir(here):
            path = Path(entry.path)
            if entry.name == GITKEEP and entry.is_file(follow_symlinks=False):
                if _show(repo, path) in tracked:
                    plan.removes.append((path, path.read_bytes()))
                    plan.lines.append(f"remove {_show(repo, path)}")
                    continue
            slug = _task_name(repo, path)
            if slug in seen:
                raise BacklogError(
                    f"{slug} is in two in-flight piles ({seen[slug]}/, {pile}/): run `backlog maintain` first; nothing migrated"
                )
            seen[slug] = pile
            data = _read(repo, path)
            dst = shared_root / pile / entry.name
            present = _same_file(dst, data)  # a copy left by an interrupted migration is reused
            for other in in_flight:
                there = shared_root / other / entry.name
                if os.path.lexists(there) and not (there == dst and present):
                    raise BacklogError(
                        f"name clash: {there} already exists in the shared root ({slug} is in flight there);"
                        " nothing migrated"
                    )
            plan.moves.append(Move(path, dst, data, True, False, present))
            plan.lines.append(f"move {_show(repo, path)} → {dst}" + (" (identical copy already there)" if present else ""))
        plan.drop_dirs.append(here)
    for pile in in_flight:
        plan.lines.append(f"link backlog/{pile} → {shared_root / pile} (after the commit)")
    _gitignore_add(repo, plan, [f"backlog/{p}" for p in in_flight])
    _agents_edit(repo, plan, project.backend)
    plan.notes.append(
        "other worktrees: once they have this commit (merge it), the next backlog verb there links"
        f" backlog/<pile> to {shared_root}"
    )
    return plan


# -- maildir-shared → maildir-git ------------------------------------------------------------
def plan_to_git(repo: git.Repo) -> Plan:
    project = read_project(repo)
    if project.backend == "maildir-git":
        raise BacklogError("already on the maildir-git backend: nothing to migrate")
    plan = Plan("maildir-git", dataclasses.replace(project, backend="maildir-git"))
    root = repo.toplevel / "backlog"
    shared_root = repo.common_dir / "backlog"
    pipeline = project.pipeline
    in_flight = pipeline.in_flight
    tracked_piles = [p for p in pipeline.all_piles if p not in in_flight]
    seen: dict[str, str] = {}
    for pile in in_flight:
        here = root / pile
        if here.is_symlink():
            plan.real_dirs.append(here)
            plan.lines.append(f"replace the symlink backlog/{pile} by a directory")
        elif here.is_dir():
            if any(True for _ in os.scandir(here)):
                raise BacklogError(
                    f"backlog/{pile} is a real directory holding files, not the symlink to the shared pile:"
                    " run `backlog status` to heal the layout first; nothing migrated"
                )
        elif os.path.lexists(here):
            raise BacklogError(f"backlog/{pile} is a file, not the symlink to the shared pile; nothing migrated")
        else:
            plan.real_dirs.append(here)
            plan.lines.append(f"create the directory backlog/{pile}")
        keep = here / GITKEEP
        plan.creates.append((keep, b""))
        plan.lines.append(f"create backlog/{pile}/{GITKEEP}")
        for entry in storage.entries(shared_root / pile):
            path = Path(entry.path)
            slug = _task_name(repo, path)
            if slug in seen:
                raise BacklogError(
                    f"{slug} is in two shared in-flight piles ({seen[slug]}/, {pile}/): run `backlog maintain` first;"
                    " nothing migrated"
                )
            seen[slug] = pile
            data = _read(repo, path)
            for other in tracked_piles:
                copy = root / other / entry.name
                if not os.path.lexists(copy):
                    continue
                old = _read(repo, copy)
                if other == "todo" and data.startswith(old):
                    plan.removes.append((copy, old))
                    plan.lines.append(f"remove backlog/todo/{entry.name} (stale copy of the in-flight task, claimed on another branch)")
                    continue
                raise BacklogError(
                    f"name clash: {slug} is in flight in the shared root ({pile}/) and also in backlog/{other}/ of this"
                    " worktree: finish it or merge the branch holding its claim first; nothing migrated"
                )
            dst = here / entry.name
            plan.moves.append(Move(path, dst, data, False, True))
            plan.lines.append(f"move {path} → {_show(repo, dst)}")
    _gitignore_remove(repo, plan, [f"backlog/{p}" for p in in_flight])
    _agents_edit(repo, plan, project.backend)
    if plan.moves:
        plan.notes.append(
            f"the shared in-flight tasks of the whole clone are now tracked on branch {repo.branch};"
            f" other worktrees see them only after merging {repo.branch}"
        )
    plan.notes.append(f"the ledger and locks stay in {shared_root} (unused by maildir-git)")
    return plan


# -- the flat layout -------------------------------------------------------------------------
def plan_flat(repo: git.Repo) -> Plan:
    root = repo.toplevel / "backlog"
    if not root.is_dir() or root.is_symlink():
        raise BacklogError("no backlog/ directory here: nothing to migrate from the flat layout")
    agents = root / "AGENTS.md"
    project = read_project(repo) if os.path.lexists(agents) else Project("maildir-git", Pipeline())
    plan = Plan("flat", project)
    be = open_backend(repo, project)
    pipeline = project.pipeline
    tracked = set(git.tracked(repo, "backlog"))
    targets: dict[str, tuple[str, Path]] = {}  # slug → (pile, source) for every planned move

    def plan_move(src: Path, pile: str) -> None:
        slug = _task_name(repo, src)
        dst = be.task_path(pile, slug)
        if slug in targets:
            other_pile, other = targets[slug]
            raise BacklogError(
                f"name clash: {_show(repo, other)} and {_show(repo, src)} would both become {slug}"
                f" (in {other_pile}/ and {pile}/); rename one first; nothing migrated"
            )
        found = [loc for loc in be.locate(slug)]
        if found:
            where = ", ".join(be.display(loc.pile, slug) for loc in found)
            raise BacklogError(f"name clash: {_show(repo, src)} would become {be.display(pile, slug)}, but {where} exists; nothing migrated")
        targets[slug] = (pile, src)
        plan.moves.append(Move(src, dst, _read(repo, src), True, True))
        plan.lines.append(f"move {_show(repo, src)} → {_show(repo, dst)}")

    missing = []
    for pile in pipeline.all_piles:
        if be.is_shared(pile):
            continue
        here = root / pile
        if here.is_symlink() or (os.path.lexists(here) and not here.is_dir()):
            raise BacklogError(f"backlog/{pile} is not a directory; nothing migrated")
        if not here.exists():
            missing.append(pile)
    for entry in _listdir(root):
        if entry.name in SPECIAL or not entry.name.endswith(".md") or entry.name.startswith("."):
            continue
        plan_move(Path(entry.path), "todo")
    done = root / "done"
    for entry in _listdir(done):
        if not entry.is_dir(follow_symlinks=False):
            continue
        for dirpath, dirnames, filenames in os.walk(entry.path, topdown=False):
            here = Path(dirpath)
            for name in sorted(filenames):
                path = here / name
                if name == GITKEEP:
                    if _show(repo, path) in tracked:
                        plan.removes.append((path, path.read_bytes()))
                        plan.lines.append(f"remove {_show(repo, path)}")
                    else:
                        raise BacklogError(f"{_show(repo, path)}: not a tracked file; remove it first; nothing migrated")
                    continue
                plan_move(path, "done")
            for name in sorted(dirnames):
                if (here / name).is_symlink():
                    raise BacklogError(f"{_show(repo, here / name)}: a symlink inside done/; remove it first; nothing migrated")
            plan.drop_dirs.append(here)
    for pile in missing:
        keep = root / pile / GITKEEP
        plan.creates.append((keep, b""))
        plan.lines.append(f"create {_show(repo, keep)}")
    if not os.path.lexists(agents):
        plan.creates.append((agents, render_declaration(project.backend, pipeline).encode()))
        plan.lines.append(f"create backlog/AGENTS.md (Backend {project.backend}, Pipeline {' → '.join(pipeline.piles)})")
    claude = root / "CLAUDE.md"
    if not os.path.lexists(claude):
        plan.links.append((claude, "AGENTS.md"))
        plan.lines.append("link backlog/CLAUDE.md → AGENTS.md")
    roadmap = root / "ROADMAP.md"
    if not os.path.lexists(roadmap):
        plan.creates.append((roadmap, ROADMAP.encode()))
        plan.lines.append("create backlog/ROADMAP.md")
    if not (plan.moves or plan.removes or plan.drop_dirs or missing) and os.path.lexists(agents):
        raise BacklogError("nothing to migrate: backlog/ is not in the flat layout")
    return plan


# -- running a plan --------------------------------------------------------------------------
class Undo:
    """Each step done, with how to undo it; `rollback` undoes them in reverse."""

    def __init__(self) -> None:
        self.steps: list[Callable[[], None]] = []

    def mkdirs(self, path: Path) -> None:
        todo = []
        while not os.path.lexists(path):
            todo.append(path)
            path = path.parent
        for d in reversed(todo):
            os.mkdir(d)
            self.steps.append(lambda d=d: os.rmdir(d))

    def create(self, path: Path, data: bytes, shown: str) -> None:
        self.mkdirs(path.parent)
        if not storage.create_file(path, data):
            raise BacklogError(f"name clash: {shown} appeared meanwhile; nothing migrated")
        self.steps.append(lambda: storage.remove_file(path))

    def symlink(self, path: Path, target: str) -> None:
        os.symlink(target, path)
        self.steps.append(lambda: os.unlink(path))

    def write(self, path: Path, old: bytes | None, new: bytes | None) -> None:
        if new is None:
            storage.remove_file(path)
        else:
            storage.write_file(path, new)
        self.steps.append(lambda: storage.write_file(path, old) if old is not None else storage.remove_file(path))

    def remove(self, path: Path, old: bytes) -> None:
        storage.remove_file(path)
        self.steps.append(lambda: (self._mkdirs_quiet(path.parent), storage.write_file(path, old)))

    def unlink_symlink(self, path: Path) -> None:
        target = os.readlink(path)
        os.unlink(path)
        self.steps.append(lambda: os.symlink(target, path))

    def rmdir(self, path: Path, shown: str) -> None:
        try:
            os.rmdir(path)
        except OSError:
            left = ", ".join(sorted(os.listdir(path))[:3]) if path.is_dir() else "?"
            raise BacklogError(f"{shown} still holds files the migration does not move ({left}); nothing migrated") from None
        self.steps.append(lambda: os.mkdir(path))

    @staticmethod
    def _mkdirs_quiet(path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)

    def rollback(self) -> None:
        for step in reversed(self.steps):
            with contextlib.suppress(Exception):
                step()
        self.steps.clear()


def execute(repo: git.Repo, plan: Plan) -> list[str]:
    """Run the plan: new copies, edits, removals, one commit; undo everything if that fails.

    Returns the layout findings of the self-heal that follows a switch to maildir-shared.
    """
    undo = Undo()
    paths: list[str] = []
    rel = lambda p: _show(repo, p)  # noqa: E731
    journal = repo.git_dir / JOURNAL
    storage.write_file(journal, json.dumps(_journal(repo, plan)).encode())
    try:
        for d in plan.real_dirs:
            if d.is_symlink():
                undo.unlink_symlink(d)
            undo.mkdirs(d)
        storage.crash_point("migrate-dirs")
        for path, data in plan.creates:
            undo.create(path, data, rel(path))
            paths.append(rel(path))
        for move in plan.moves:
            if move.dst_present:
                if not _same_file(move.dst, move.data):
                    raise Conflict(f"{rel(move.dst)} changed meanwhile; nothing migrated")
            else:
                undo.create(move.dst, move.data, rel(move.dst))
            if move.dst_tracked:
                paths.append(rel(move.dst))
        storage.crash_point("migrate-after-copy")
        for path, target in plan.links:
            undo.symlink(path, target)
            paths.append(rel(path))
        for edit in plan.edits:
            undo.write(edit.path, edit.old, edit.new)
            paths.append(rel(edit.path))
        storage.crash_point("migrate-edited")
        for path, data in plan.removes:
            undo.remove(path, data)
            paths.append(rel(path))
        for move in plan.moves:
            if move.src_tracked:
                undo.remove(move.src, move.data)
                paths.append(rel(move.src))
        for d in plan.drop_dirs:
            undo.rmdir(d, rel(d))
        storage.crash_point("migrate-before-commit")
        git.commit_paths(repo, paths, plan.message)
        storage.crash_point("migrate-committed")
    except BaseException:
        with contextlib.suppress(Exception):
            git.unstage(repo, paths)
        undo.rollback()
        storage.remove_file(journal)
        raise
    for move in plan.moves:
        if not move.src_tracked:
            storage.remove_file(move.src)  # the shared copy goes last, after the tracked one is committed
    storage.crash_point("migrate-shared-removed")
    storage.remove_file(journal)
    if plan.project.backend == "maildir-shared":
        try:
            return SharedBackend(repo, plan.project).heal()
        except BacklogError as exc:
            return [f"could not finish the symlinks ({exc.message}): any backlog verb here will retry"]
    return []


# -- a migration killed midway ---------------------------------------------------------------
JOURNAL = "backlog-migration.json"  # in the worktree's git dir while a migration runs
JOURNAL_LOCK = "backlog-migration.lock"  # held by a running migration (a flock: it dies with it)


def _digest(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def _state(path: Path) -> str | None:
    """What is at `path` now: a digest of a file's bytes, `symlink:<target>`, or None."""
    if os.path.islink(path):
        return f"symlink:{os.readlink(path)}"
    try:
        return _digest(path.read_bytes())
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def _journal(repo: git.Repo, plan: Plan) -> dict:
    """What a migration leaves where, written before its first step and removed after its last:
    if the process is killed in between, `recover` (run by `maintain` and by `migrate`) knows
    what to undo (no commit yet) or to finish (the commit landed)."""
    rel = lambda p: _show(repo, p)  # noqa: E731
    files: dict[str, str | None] = {}  # work-tree path -> what the migration leaves there (None: removed)
    for path, data in plan.creates:
        files[rel(path)] = _digest(data)
    for path, target in plan.links:
        files[rel(path)] = f"symlink:{target}"
    for edit in plan.edits:
        files[rel(edit.path)] = _digest(edit.new)
    for path, _data in plan.removes:
        files[rel(path)] = None
    for move in plan.moves:
        if move.dst_tracked:
            files[rel(move.dst)] = _digest(move.data)
        if move.src_tracked:
            files[rel(move.src)] = None
    head = git.run(repo.toplevel, "rev-parse", "-q", "--verify", "HEAD", check=False).strip()
    return {
        "head": head or None,
        "message": plan.message,
        "backend": plan.project.backend,
        "files": files,
        "shared_new": {str(m.dst): _digest(m.data) for m in plan.moves if not m.dst_tracked and not m.dst_present},
        "shared_old": {str(m.src): _digest(m.data) for m in plan.moves if not m.src_tracked},
        "links": {str(d): os.readlink(d) for d in plan.real_dirs if d.is_symlink()},
    }


def recover(repo: git.Repo, dry_run: bool = False) -> list[str]:
    """Undo a migration killed before its commit, or finish one killed after it.

    Returns one line per recovery, in the self-heal's `path (detail)` form. Only what the
    migration itself left is touched: a path changed since is reported and left in place.
    """
    path = repo.git_dir / JOURNAL
    if not path.exists():
        return []
    try:
        with storage.file_lock(repo.git_dir / JOURNAL_LOCK, timeout=0, what="a migration"):
            return _recover(repo, path, dry_run)
    except Conflict:  # not killed: running right now
        return ["backlog/AGENTS.md (a migration is running right now: left in place)"]


def _recover(repo: git.Repo, path: Path, dry_run: bool) -> list[str]:
    try:
        journal = json.loads(path.read_text())
        files: dict[str, str | None] = journal["files"]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError):
        return [f"{path} (the record of an interrupted migration cannot be read: left in place)"]
    what = f"a migration to {journal.get('backend')} was killed"
    landed = False
    if journal.get("head"):
        subjects = git.run(repo.toplevel, "log", "--format=%s", f"{journal['head']}..HEAD", check=False).splitlines()
        landed = journal.get("message") in subjects
    if dry_run:
        return [f"backlog/AGENTS.md ({what} {'after' if landed else 'before'} its commit:"
                f" dry run, would {'finish' if landed else 'undo'} it)"]
    left: list[str] = []
    if landed:
        for src, digest in journal.get("shared_old", {}).items():
            if _state(Path(src)) == digest:
                storage.remove_file(Path(src))
        detail = f"{what} after its commit: finished"
    else:
        in_head = set(git.run(repo.toplevel, "ls-tree", "-r", "-z", "--name-only", "HEAD", "--", *files).split("\0")) \
            if files and journal.get("head") else set()
        restore, remove = [], []
        for name, digest in sorted(files.items()):
            now = _state(repo.toplevel / name)
            if name in in_head:
                head = _digest(git.blob(repo, f"HEAD:{name}"))
                if now is None or now == digest:
                    restore.append(name)
                elif now != head:
                    left.append(name)
            elif now is not None:
                (remove if now == digest else left).append(name)
        git.unstage(repo, list(files))
        for name in remove:
            storage.remove_file(repo.toplevel / name)
        if restore:
            git.run(repo.toplevel, "checkout", "HEAD", "--", *restore)
        for dst, digest in journal.get("shared_new", {}).items():
            if _state(Path(dst)) == digest:
                storage.remove_file(Path(dst))
        for link, target in journal.get("links", {}).items():
            here = Path(link)
            if here.is_dir() and not here.is_symlink() and not os.listdir(here):
                os.rmdir(here)
                os.symlink(target, here)
        detail = f"{what} before its commit: undone, run it again"
    storage.remove_file(path)
    if left:
        detail += f"; changed since, left in place: {', '.join(left)}"
    return [f"backlog/AGENTS.md ({detail})"]

