"""The layout self-heal of maildir-shared (SPEC §4): every in-flight pile of a worktree is a symlink
into the shared root, and `.gitignore` keeps them out of git.

A verb's first step makes that so (`SharedBackend.heal`), never destroying data: a real directory
in a symlink's place has its task files moved into the shared pile (unless the ledger says the task
already left flight, or a file clashes) and their removal committed; anything it cannot move is
left in place and named.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import git, gitignore, ledger, limits, storage
from .change import Change, Create, Dirs, Link, Remove, Rmdir, Track, Write, run
from .errors import BacklogError
from .layout import GITIGNORE, GITKEEP, TASK_SUFFIX, Layout, pile_rel
from .ledger import Settled
from .logline import read_log
from .project import Pipeline


class Healer:
    """The self-heal of one worktree's layout: `heal` repairs (or, with dry_run, lists) what is wrong."""

    def __init__(self, repo: git.Repo, layout: Layout, pipeline: Pipeline) -> None:
        self.repo = repo
        self.layout = layout
        self.pipeline = pipeline

    def heal(self, dry_run: bool = False) -> list[str]:
        """Make every in-flight symlink right, never destroying data (SPEC §4).

        Returns one line per repair made (or, with dry_run, needed) or problem left.
        """
        if not self.layout.agents.exists():
            return []
        findings: list[str] = []
        if not dry_run and not self._layout_ok():
            with storage.file_lock(self.layout.layout_lock, what="the backlog layout"):
                findings = self._heal(dry_run=False)
        elif dry_run:
            findings = self._heal(dry_run=True)
        return findings

    def _untrack(self, paths: list[str]) -> str:
        """Commit the removal of in-flight files this branch still tracked (a branch made before
        `migrate --to maildir-shared`): otherwise their deletion stays unstaged forever, and a
        merge of this branch would bring the task back into flight."""
        shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
        what = "tracked in-flight files moved to the shared root"
        except_note = ""
        if self.repo.branch is None:
            return f"{shown} ({what}: their removal not committed: HEAD is detached)"
        try:
            message = "chore(backlog): in-flight files leave the index (shared root)"
            run(Change((Track(tuple(paths)),), message, ignored=True), self.repo)
        except BacklogError as exc:
            except_note = f"their removal not committed: {exc.message}"
        return f"{shown} ({what}: {except_note or 'removed from the index in a backlog-only commit'})"

    def _gitignore_missing(self) -> list[str]:
        data = read_gitignore(self.layout.gitignore)
        return gitignore.missing(data, [pile_rel(p) for p in self.pipeline.in_flight])

    def _layout_ok(self) -> bool:
        for pile in self.pipeline.in_flight:
            link = self.layout.tracked_pile(pile)
            try:
                if os.readlink(link) != str(self.layout.shared_pile(pile)):
                    return False
            except OSError:
                return False
            if not self.layout.shared_pile(pile).is_dir():
                return False
        return not self._gitignore_missing()

    def _settled_copy(self, src: Path, name: str) -> Settled | None:
        """The ledger entry that makes the task file `src` (in a real directory where an in-flight
        symlink belongs) a stale copy of a task that already left flight, else None. A copy that
        cannot be read counts as stale when the ledger knows its name."""
        if not name.endswith(TASK_SUFFIX) or name.startswith("."):
            return None
        entry = ledger.lookup(self.layout.ledger, name[: -len(TASK_SUFFIX)])
        if entry is None:
            return None
        try:
            log = read_log(storage.read_task_bytes(src))
        except (OSError, BacklogError):
            return entry
        return entry if entry.blocks_log(log) else None

    def _move(self, src: Path, dst: Path, data: bytes) -> bool:
        """Move the task file `src` (content `data`) to `dst` in the shared root, one change: the
        new copy first (exclusive), the old one removed. False when `dst` holds something else."""
        try:
            run(Change((Create(dst, data, taken=lambda: _same(dst, data)), Remove(src, data))), self.repo)
        except _Clash:
            return False
        return True

    def _in_flight(self, name: str) -> Path | None:
        """The shared in-flight copy named `name`, in whichever in-flight pile holds it."""
        for pile in self.pipeline.in_flight:
            path = self.layout.shared_pile(pile) / name
            if os.path.lexists(path):
                return path
        return None

    def _heal(self, dry_run: bool) -> list[str]:
        findings: list[str] = []
        untracked: list[str] = []  # tracked in-flight files moved into the shared root: leave the index too
        for pile in self.pipeline.in_flight:
            findings += self._heal_pile(pile, dry_run, untracked)
        if untracked:  # a directory left in place (a clash): commit what did move
            findings.append(self._untrack(untracked))
        missing = self._gitignore_missing()
        if missing:
            done = ""
            if not dry_run:
                path = self.layout.gitignore
                old = read_gitignore(path)
                # committed when it was tracked and clean: an uncommitted change to a tracked file
                # would stop the user's `git rebase` and `git pull --rebase` ("unstaged changes")
                commit = old is not None and self.repo.branch is not None and not git.status_codes(self.repo, GITIGNORE)
                run(Change((Write(path, old, gitignore.with_entries(old, missing)),)), self.repo)
                done = self._commit_gitignore() if commit else ""
            findings.append(f".gitignore (missing {', '.join(missing)}: added{done})")
        return findings

    def _commit_gitignore(self) -> str:
        """Commit `.gitignore` alone (its new lines); what became of it, for the finding."""
        try:
            run(Change((Track((GITIGNORE,)),), "chore(backlog): .gitignore lines for the in-flight piles"), self.repo)
        except BacklogError as exc:
            return f"; not committed: {exc.message}"
        return " and committed"

    def _heal_pile(self, pile: str, dry_run: bool, untracked: list[str]) -> list[str]:
        """Make the in-flight pile `pile` a symlink to its shared pile (created if missing); the
        findings. The paths of tracked files moved out of a real directory go to `untracked`."""
        findings: list[str] = []
        target = self.layout.shared_pile(pile)
        link = self.layout.tracked_pile(pile)
        shown = pile_rel(pile)
        if not target.is_dir():
            findings.append(f"{target} (shared pile missing: created)")
            if not dry_run:
                run(Change((Dirs(target),)), self.repo)
        if link.is_symlink():
            current = os.readlink(link)
            if current == str(target):
                return findings
            findings.append(f"{shown} (symlink points to {current}: re-pointed to {target})")
        elif link.is_dir():
            if not self._empty_dir(link, target, shown, dry_run, untracked, findings):
                return findings
        elif os.path.lexists(link):
            findings.append(f"{shown} (a file is in the symlink's place; left in place)")
            return findings
        else:
            findings.append(f"{shown} (symlink missing: created)")
        if not dry_run:
            run(Change((Dirs(link.parent), Link(link, str(target), replace=True))), self.repo)
        return findings

    def _empty_dir(
        self, link: Path, target: Path, shown: str, dry_run: bool, untracked: list[str], findings: list[str]
    ) -> bool:
        """Move the task files of the real directory `link` (where the pile's symlink belongs) into
        the shared pile `target` and remove it: True when it is gone (the symlink may take its place),
        False when it stays (or, with dry_run, would go). Each finding is added to `findings`."""
        if self.repo.branch is None:
            # a checkout of an older commit that tracked in-flight files: moving them into
            # the shared root could put finished work back in flight, and their removal
            # could only be committed on the detached HEAD (SPEC §7.11)
            findings.append(
                f"{shown} (a real directory, and HEAD is detached: left in place, nothing moved into"
                " flight; check out a branch)"
            )
            return False
        clashes = []
        tracked = set(git.tracked(self.repo, shown)) if not dry_run else set()
        for entry in sorted(os.listdir(link)):
            left = self._move_entry(link / entry, target, shown, dry_run, findings)
            if left is None:
                clashes.append(entry)
            elif left and f"{shown}/{entry}" in tracked:
                untracked.append(f"{shown}/{entry}")
        if clashes:
            findings.append(
                f"{shown} (a real directory holds {', '.join(clashes)} which clash with or are not"
                f" tasks of the shared pile; left in place, nothing overwritten)"
            )
            return False
        if dry_run:
            findings.append(f"{shown} (a real directory in the symlink's place: replaced)")
            return False
        if untracked:  # while the directory is still there: git refuses paths beyond a symlink
            findings.append(self._untrack(untracked))
            untracked.clear()
        try:
            run(Change((Rmdir(link, refuse=_Arrived),)), self.repo)
        except _Arrived:  # a file came in while its tasks moved (a user's copy, a checkout)
            findings.append(
                f"{shown} (a file came into the real directory meanwhile: left in place; the next verb moves it)"
            )
            return False
        findings.append(f"{shown} (was a real directory: replaced by a symlink to {target})")
        return True

    def _move_entry(self, src: Path, target: Path, shown: str, dry_run: bool, findings: list[str]) -> bool | None:
        """One entry `src` of a real in-flight directory, into the shared pile `target` or away: True
        when it left (so it leaves the index too), False when nothing was done (dry_run), None when
        it stays (a clash, a stale copy, not a task file). Its finding, if any, goes to `findings`."""
        entry = src.name
        settled = self._settled_copy(src, entry)
        if settled is not None:  # never back in flight (SPEC §7.11): the ledger knows it ended
            findings.append(
                f"{shown}/{entry} (a copy of a task already {settled.outcome} on branch {settled.branch}:"
                " left in place, not put back in flight)"
            )
            return None
        if dry_run:
            findings.append(f"{shown}/{entry} (in a real directory: moved to the shared pile)")
            return False
        if entry == GITKEEP and src.is_file() and not src.is_symlink() and src.stat().st_size == 0:
            run(Change((Remove(src, None),)), self.repo)  # the maildir-git placeholder: not a task
            return True
        if not (src.is_file() and not src.is_symlink() and entry.endswith(".md")):
            return None
        try:  # (bounded, not through a symlink; a copy that left since the listing is not here to move)
            data = storage.read_task_bytes(src, f"{shown}/{entry}", limits.LEAVING_BYTES)
        except FileNotFoundError:
            return False
        except BacklogError:  # too large, or no regular file any more: not a task to move
            return None
        live = self._in_flight(entry)
        if live is None:
            if not self._move(src, target / entry, data):
                return None
            findings.append(f"{shown}/{entry} (was in a real directory: moved to {target})")
            return True
        if not _older_copy(live, data):  # the task is in flight in the shared root already
            return None  # not an older copy of it: the user's to sort out
        # an older copy (every line of it is in the live one), say of a branch made
        # at a commit from before the task moved on: never a second claim (SPEC §7.11)
        run(Change((Remove(src, None),)), self.repo)
        findings.append(f"{shown}/{entry} (an older copy of the task in flight: removed)")
        return True


def read_gitignore(path: Path) -> bytes | None:
    """The work tree's `.gitignore` (None: there is none), which a pull request may have made a
    symlink: never read (or written) through one, as it may lead anywhere (`/dev/zero` included)."""
    if path.is_symlink():
        raise BacklogError(".gitignore: is a symlink; refusing to follow it (make it a regular file)")
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


class _Clash(Exception):
    """The shared pile holds another file of the same name."""


class _Arrived(BacklogError):
    """A real in-flight directory was not empty when its removal came: a file arrived meanwhile."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path}: a file came into it meanwhile")


def _older_copy(live: Path, data: bytes) -> bool:
    """Whether `data` is an older copy of the in-flight task file `live` (every line of it is in
    the live one). False when `live` left flight since it was found: the next heal asks the ledger."""
    try:
        return storage.read_task_bytes(live, bound=limits.LEAVING_BYTES).startswith(data)
    except (FileNotFoundError, BacklogError):
        return False


def _same(dst: Path, data: bytes) -> None:
    """A copy already at `dst` is accepted when it holds exactly `data` (an interrupted move)."""
    try:
        if dst.read_bytes() == data:
            return
    except OSError:
        pass
    raise _Clash(dst.name)
