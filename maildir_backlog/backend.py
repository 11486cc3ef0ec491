"""Where task files live, and how they move: the two backends behind one interface.

The verb layer speaks in slugs and piles; only this module knows paths. `Backend.apply` is
the one place that owns the move protocol (claim, hop, completion, retry) for both backends:

* a new copy is always written first (temporary file, fsync, rename or link), the old copy
  removed last, so a crash leaves a task in two places, never in none (SPEC §7.7);
* entering an in-flight pile is an exclusive create, so two claimers can never both win;
* tracked changes are committed with only their own paths; if the commit fails every file is
  put back as it was (SPEC §7.3).
"""
from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from . import git, ledger, storage
from .errors import BacklogError, Conflict
from .ledger import Settled
from .project import Project
from .task import Task, parse_task, validate_slug

LOCKS = ".locks"
LEDGER = ".ledger"
BOOKKEEPING = (LOCKS, LEDGER)


@dataclass(frozen=True)
class Located:
    slug: str
    pile: str
    path: Path
    shared: bool


@dataclass(frozen=True)
class Summary:
    """What auto-pick needs from a todo file, cached by (inode, size, mtime)."""

    priority: int
    dependencies: tuple[str, ...]
    error: str | None


class Backend:
    name = "maildir-git"

    def __init__(self, repo: git.Repo, project: Project) -> None:
        self.repo = repo
        self.project = project
        self.pipeline = project.pipeline
        self.root = repo.toplevel / "backlog"
        self.shared_root = repo.common_dir / "backlog"

    # -- where things live ------------------------------------------------------------------
    def is_shared(self, pile: str) -> bool:
        return False

    def pile_dir(self, pile: str) -> Path:
        return (self.shared_root if self.is_shared(pile) else self.root) / pile

    def task_path(self, pile: str, slug: str) -> Path:
        return self.pile_dir(pile) / f"{slug}.md"

    def display(self, pile: str, slug: str) -> str:
        """The path a user sees (through the symlink for shared piles)."""
        return f"backlog/{pile}/{slug}.md"

    def rel(self, path: Path) -> str:
        return path.relative_to(self.repo.toplevel).as_posix()

    def where(self) -> dict[str, str]:
        return {pile: str(self.pile_dir(pile)) for pile in self.pipeline.all_piles}

    # -- finding tasks ----------------------------------------------------------------------
    def slugs(self, pile: str) -> dict[str, os.DirEntry]:
        return {e.name[:-3]: e for e in storage.entries(self.pile_dir(pile))}

    def locate(self, slug: str) -> list[Located]:
        validate_slug(slug)
        found = []
        for pile in self.pipeline.all_piles:
            path = self.task_path(pile, slug)
            if os.path.lexists(path):
                found.append(Located(slug, pile, path, self.is_shared(pile)))
        return found

    def in_flight(self) -> dict[str, list[Located]]:
        flying: dict[str, list[Located]] = {}
        for pile in self.pipeline.in_flight:
            for slug, entry in self.slugs(pile).items():
                flying.setdefault(slug, []).append(Located(slug, pile, Path(entry.path), self.is_shared(pile)))
        return flying

    def read(self, loc: Located) -> bytes:
        return storage.read_task_bytes(loc.path, self.display(loc.pile, loc.slug))

    def load(self, loc: Located, data: bytes | None = None) -> Task:
        data = self.read(loc) if data is None else data
        return parse_task(loc.slug, self.display(loc.pile, loc.slug), data, self.project.defaults)

    def summaries(self, pile: str) -> dict[str, tuple[os.DirEntry, Summary]]:
        """Priority and dependencies of every task in a pile, parsed once and cached."""
        cache_path = self.repo.git_dir / "backlog-cache.json"
        try:
            cache = json.loads(cache_path.read_text())
        except (OSError, ValueError):
            cache = {}
        changed = False
        result = {}
        for slug, entry in self.slugs(pile).items():
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            key = entry.path
            stamp = [st.st_ino, st.st_size, st.st_mtime_ns]
            hit = cache.get(key)
            if hit and hit[0] == stamp:
                summary = Summary(hit[1], tuple(hit[2]), hit[3])
            else:
                loc = Located(slug, pile, Path(entry.path), self.is_shared(pile))
                try:
                    task = self.load(loc)
                    summary = Summary(task.priority, tuple(task.dependencies), None)
                except FileNotFoundError:
                    continue  # moved on (claimed, advanced) since the listing
                except BacklogError as exc:
                    summary = Summary(0, (), exc.message)
                cache[key] = [stamp, summary.priority, list(summary.dependencies), summary.error]
                changed = True
            result[slug] = (entry, summary)
        if changed:
            live = {e.path for e, _ in result.values()}
            stale = [k for k in cache if k.startswith(str(self.pile_dir(pile))) and k not in live]
            for k in stale:
                del cache[k]
            with contextlib.suppress(OSError):
                storage.write_file(cache_path, json.dumps(cache).encode())
        return result

    # -- locks and the ledger ---------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self, slug: str, timeout: float = 30.0) -> Iterator[None]:
        with storage.file_lock(self.shared_root / LOCKS / f"{slug}.lock", timeout, what=f"task {slug}"):
            yield

    def settled(self, slug: str) -> Settled | None:
        return None

    def settled_names(self) -> set[str]:
        return set()

    def settle(self, entry: Settled) -> None:
        pass

    def unsettle(self, slug: str) -> None:
        pass

    # -- layout -----------------------------------------------------------------------------
    def heal(self, dry_run: bool = False) -> list[str]:
        return []

    def ensure_piles(self) -> None:
        for pile in self.pipeline.all_piles:
            storage.ensure_dir(self.pile_dir(pile))

    # -- stale copies -----------------------------------------------------------------------
    def drop_stale_copies(self, slug: str, data: bytes) -> list[Located]:
        """Before an in-flight task (content `data`) settles into this worktree, remove this
        branch's stale copies of it: committed here before another branch claimed it, they would
        otherwise sit beside the settled copy (and `retry` would see the task in two piles).

        maildir-shared only; the caller holds the task's lock. Only clean tracked copies outside
        `done/` whose bytes are a prefix of `data` go, in one commit (put back if it fails).
        """
        if self.name != "maildir-shared":
            return []
        locs = [loc for loc in self.locate(slug) if not loc.shared and loc.pile != "done"]
        if not locs:
            return []
        changed = git.status_codes(self.repo, *(self.rel(loc.path) for loc in locs))
        removed: list[tuple[Located, bytes]] = []
        try:
            for loc in locs:
                if self.rel(loc.path) in changed:
                    continue  # uncommitted changes: not ours to drop
                old = self._read_or_none(loc.path)
                if old is not None and data.startswith(old):
                    storage.remove_file(loc.path)
                    removed.append((loc, old))
            if removed:
                storage.crash_point("stale:removed")
                piles = ", ".join(f"{loc.pile}/" for loc, _old in removed)
                git.commit_paths(
                    self.repo, [self.rel(loc.path) for loc, _old in removed],
                    f"settle({slug}) drop the stale {piles} cop{'ies' if len(removed) > 1 else 'y'} of this branch",
                )
                storage.crash_point("stale:committed")
        except BaseException:
            for loc, old in removed:
                storage.write_file(loc.path, old)
            raise
        return [loc for loc, _old in removed]

    # -- the move protocol ------------------------------------------------------------------
    @staticmethod
    def _read_or_none(path: Path) -> bytes | None:
        try:
            return storage.read_task_bytes(path)
        except (OSError, BacklogError):
            return None

    def apply(
        self,
        slug: str,
        src: Located | None,
        dst_pile: str,
        data: bytes,
        message: str | None,
        settle: Settled | None = None,
        record: Settled | None = None,
        old: bytes | None = None,
    ) -> Located:
        """Put `data` as `slug` into `dst_pile`, removing the copy at `src` (if another place).

        Callers hold the task's lock and have re-checked their precondition. `old` is the
        current content of `src` (for rollback). Returns where the task now is.
        """
        dst = Located(slug, dst_pile, self.task_path(dst_pile, slug), self.is_shared(dst_pile))
        in_place = src is not None and src.path == dst.path
        undo: list[Callable[[], None]] = []
        tracked: list[str] = []
        try:
            if src is not None and src.shared and not dst.shared and not in_place:
                # Leaving the shared root: the shared copy records the terminal event first,
                # then the ledger, then the tracked copy appears (SPEC §7.2 ordering).
                if old is not None and data != old:
                    storage.write_file(src.path, data)
                    undo.append(lambda: storage.write_file(src.path, old))
                    storage.crash_point("apply:terminal-line")
                # this branch's pre-claim copy must not stay beside the settled one; dropped only
                # now, so a crash from here on leaves a terminal in-flight copy (janitor bucket 1)
                self.drop_stale_copies(slug, data)
                if settle is not None:
                    self.settle(settle)
                    undo.append(lambda: self.unsettle(slug))
                    storage.crash_point("apply:settled")
            if in_place:
                storage.write_file(dst.path, data)
                if old is not None:
                    undo.append(lambda: storage.write_file(dst.path, old))
            else:
                storage.ensure_dir(dst.path.parent)
                if storage.create_file(dst.path, data):
                    undo.append(lambda: storage.remove_file(dst.path))
                elif self.pipeline.is_in_flight(dst_pile):
                    raise Conflict(f"claim conflict: {slug} already in flight")
                elif dst.shared or self._read_or_none(dst.path) != data:
                    raise BacklogError(f"{self.display(dst_pile, slug)} already exists; not overwriting it")
                # else: an interrupted earlier move already wrote exactly this copy: resume it
            storage.crash_point("apply:written")
            if not dst.shared:
                tracked.append(self.rel(dst.path))
            if src is not None and not in_place and not src.shared:
                storage.remove_file(src.path)
                if old is not None:
                    undo.append(lambda: storage.write_file(src.path, old))
                tracked.append(self.rel(src.path))
                storage.crash_point("apply:source-removed")
            if tracked:
                if message is None:
                    raise AssertionError("tracked change without a commit message")
                git.commit_paths(self.repo, tracked, message)
                storage.crash_point("apply:committed")
        except BaseException:
            for step in reversed(undo):
                with contextlib.suppress(Exception):
                    step()
            raise
        if src is not None and not in_place and src.shared:
            storage.remove_file(src.path)
            storage.crash_point("apply:shared-removed")
        if record is not None:
            self.settle(record)
        return dst


class SharedBackend(Backend):
    """maildir-shared: in-flight piles live in `<common dir>/backlog/`, symlinked from each worktree."""

    name = "maildir-shared"

    def is_shared(self, pile: str) -> bool:
        return self.pipeline.is_in_flight(pile)

    def settled(self, slug: str) -> Settled | None:
        return ledger.lookup(self.shared_root / LEDGER, slug)

    def settled_names(self) -> set[str]:
        return ledger.names(self.shared_root / LEDGER)

    def settle(self, entry: Settled) -> None:
        ledger.record(self.shared_root / LEDGER, entry)

    def unsettle(self, slug: str) -> None:
        ledger.remove(self.shared_root / LEDGER, slug)

    def where(self) -> dict[str, str]:
        result = super().where()
        result["ledger"] = str(self.shared_root / LEDGER)
        result["locks"] = str(self.shared_root / LOCKS)
        return result

    def heal(self, dry_run: bool = False) -> list[str]:
        """Make every in-flight symlink right, never destroying data (SPEC §4).

        Returns one line per repair made (or, with dry_run, needed) or problem left.
        """
        if not (self.root / "AGENTS.md").exists():
            return []
        findings: list[str] = []
        if not dry_run and not self._layout_ok():
            with storage.file_lock(self.shared_root / LOCKS / ".layout.lock", what="the backlog layout"):
                findings = self._heal(dry_run=False)
        elif dry_run:
            findings = self._heal(dry_run=True)
        return findings

    def _gitignore_missing(self) -> list[str]:
        path = self.repo.toplevel / ".gitignore"
        try:
            # `backlog/doing/` (trailing slash) matches directories only, never the symlink
            lines = {line.strip().lstrip("/") for line in path.read_text().splitlines()}
        except FileNotFoundError:
            lines = set()
        return [f"backlog/{p}" for p in self.pipeline.in_flight if f"backlog/{p}" not in lines]

    def _layout_ok(self) -> bool:
        for pile in self.pipeline.in_flight:
            link = self.root / pile
            try:
                if os.readlink(link) != str(self.shared_root / pile):
                    return False
            except OSError:
                return False
            if not (self.shared_root / pile).is_dir():
                return False
        return not self._gitignore_missing()

    def _heal(self, dry_run: bool) -> list[str]:
        findings: list[str] = []
        for pile in self.pipeline.in_flight:
            target = self.shared_root / pile
            link = self.root / pile
            shown = f"backlog/{pile}"
            if not target.is_dir():
                findings.append(f"{target} (shared pile missing: created)")
                if not dry_run:
                    storage.ensure_dir(target)
            if link.is_symlink():
                current = os.readlink(link)
                if current == str(target):
                    continue
                findings.append(f"{shown} (symlink points to {current}: re-pointed to {target})")
            elif link.is_dir():
                clashes = []
                for entry in sorted(os.listdir(link)):
                    src = link / entry
                    if dry_run:
                        findings.append(f"{shown}/{entry} (in a real directory: moved to the shared pile)")
                        continue
                    if src.is_file() and not src.is_symlink() and entry.endswith(".md"):
                        data = src.read_bytes()
                        dst = target / entry
                        if storage.create_file(dst, data) or dst.read_bytes() == data:
                            storage.remove_file(src)
                            findings.append(f"{shown}/{entry} (was in a real directory: moved to {target})")
                            continue
                    clashes.append(entry)
                if clashes:
                    findings.append(
                        f"{shown} (a real directory holds {', '.join(clashes)} which clash with or are not"
                        f" tasks of the shared pile; left in place, nothing overwritten)"
                    )
                    continue
                if dry_run:
                    findings.append(f"{shown} (a real directory in the symlink's place: replaced)")
                    continue
                os.rmdir(link)
                findings.append(f"{shown} (was a real directory: replaced by a symlink to {target})")
            elif os.path.lexists(link):
                findings.append(f"{shown} (a file is in the symlink's place; left in place)")
                continue
            else:
                findings.append(f"{shown} (symlink missing: created)")
            if not dry_run:
                storage.ensure_dir(link.parent)
                tmp = link.parent / f"{storage.TMP_PREFIX}{pile}.{os.getpid()}"
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                os.symlink(str(target), tmp)
                os.replace(tmp, link)
        missing = self._gitignore_missing()
        if missing:
            findings.append(f".gitignore (missing {', '.join(missing)}: added)")
            if not dry_run:
                path = self.repo.toplevel / ".gitignore"
                text = path.read_text() if path.exists() else ""
                if text and not text.endswith("\n"):
                    text += "\n"
                storage.write_file(path, (text + "".join(f"{m}\n" for m in missing)).encode())
        return findings


def open_backend(repo: git.Repo, project: Project) -> Backend:
    return SharedBackend(repo, project) if project.backend == "maildir-shared" else Backend(repo, project)
