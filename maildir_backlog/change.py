"""The one move protocol (docs/design.md, *One move protocol*): every writer of the backlog
declares what it does as a `Change`, and `run` is the only code that carries one out.

A `Change` is data: an ordered list of steps (every write the tool makes: the remote's refs,
the ledger, files and symlinks, the intake branch's plumbing commit, a hook, the clone's config,
a migration's checkout; each says its precondition, effect and undo), the commit that ends it,
and what follows the commit (the shared copies removed, a settlement recorded). `run` performs
the steps in order inside one `storage.Transaction`, so every step is undone, newest first, when
a later one or the commit fails (SPEC §7.3). Only then, with the commit landed, do the `after`
steps run, which are never undone.

What a writer cannot forget, because `run` does it and nothing else can (`gitwrite` refuses a
git write outside `run`; AST tests keep `gitcommit` and `storage.Transaction` here):
* the commit holds exactly the tracked paths the steps name, with the user's other staged work
  untouched, and a failing commit undoes everything before it;
* an exclusive create never overwrites: a taken name refuses, or resumes an interrupted
  identical move when the writer says so;
* a ledger entry is undone with the move that made it, and a remote record with it too.
Which ledger entry and which remote record a move needs is the backend's knowledge
(`Backend.move`); a verb names only the slug, the pile and the bytes.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Protocol

from . import git, gitcommit, gitwrite, storage, ticker
from . import ledger as ledger_file
from .errors import BacklogError
from .git import Repo
from .ledger import Settled


class Ledger(Protocol):
    """Where settlements are recorded (the shared ledger; nothing on maildir-git)."""

    def settled(self, slug: str) -> Settled | None: ...

    def settle(self, entry: Settled) -> None: ...

    def unsettle(self, slug: str) -> None: ...


class Memo(Protocol):
    """This clone's memory of the remote (`remote.Remote`)."""

    def mine(self, kind: str, slug: str) -> str | None: ...

    def remember(self, kind: str, slug: str, sha: str | None) -> None: ...


class Branches(Protocol):
    """The remote's branches (`remote.Remote`): a compare-and-swap push of one."""

    def push_branch(self, branch: str, new: str, expect: str, action: str) -> None: ...


class Publish(NamedTuple):
    """The remote's record, before anything here (SPEC §8): `push(tx)` pushes and registers its
    own compensating push with `tx`."""

    push: Callable[[storage.Transaction], None]


class Settle(NamedTuple):
    """A ledger entry; undone to whatever the ledger held for the slug before."""

    entry: Settled


class Create(NamedTuple):
    """An exclusive create of `path` (its missing directories too). `taken` is called when the name
    is taken: it raises to refuse, or returns to accept the copy there (an interrupted move that
    already wrote exactly these bytes). `tracked`: the path the commit holds (None: untracked)."""

    path: Path
    data: bytes
    tracked: str | None = None
    taken: Callable[[], None] | None = None


class Write(NamedTuple):
    """Replace `path`, whose content is `old` (None: it did not exist), with `new` (None: remove it)."""

    path: Path
    old: bytes | None
    new: bytes | None
    tracked: str | None = None


class Remove(NamedTuple):
    """Remove `path`, whose content is `old` (put back on undo; None: nothing to put back)."""

    path: Path
    old: bytes | None
    tracked: str | None = None


class Dirs(NamedTuple):
    """`mkdir -p path`; the directories made are removed again (when empty) on undo."""

    path: Path


class Link(NamedTuple):
    """A new symlink `path` → `target`; `replace`: an existing symlink there is swapped (not undone)."""

    path: Path
    target: str
    tracked: str | None = None
    replace: bool = False


class Unlink(NamedTuple):
    """Remove the symlink `path` (made again on undo)."""

    path: Path


class Rmdir(NamedTuple):
    """Remove the empty directory `path`; `refuse(path)` says why when it is not empty."""

    path: Path
    refuse: Callable[[Path], BacklogError] | None = None


class Keep(NamedTuple):
    """On undo, `path` goes back to what it is now (absent, a symlink, or these bytes): for a file
    a later step changes by its own means (the layout's self-heal inside setup)."""

    path: Path


class Track(NamedTuple):
    """Tracked paths the commit holds that no file step here changed (a deletion left uncommitted
    by a killed writer, a file rewritten by a nested step)."""

    paths: tuple[str, ...]


class Unstage(NamedTuple):
    """Put these index entries back as in HEAD before the commit (`git add -A` refuses a path
    already gone from the index)."""

    paths: tuple[str, ...]


class BranchCommit(NamedTuple):
    """A commit on `branch`, checked out nowhere, through git's objects (the intake branch's
    plumbing commit, `gitwrite.commit_on_branch`). Precondition: `check(tip)`, asked again on every
    compare-and-swap attempt (it raises to refuse; it names the paths to remove too). Effect: the
    branch moves from the tip read to a commit of `changes` (path → bytes, None: removed) on it.
    Undo: the branch back to that tip by compare-and-swap, when it still is the commit made."""

    branch: str
    changes: dict[str, bytes | None]
    message: str
    check: Callable[[str], dict[str, None]] = lambda _tip: {}


class Travel(NamedTuple):
    """The remote's intake branch moved on (SPEC §8 *One queue across clones*): a commit of
    `changes` on `expect` (this clone's own commit `reuse` when it is the same) pushed as its new
    tip. Precondition: the remote's branch still is `expect` (the push's lease). Effect: the push;
    the remote-tracking ref follows. Undo: the branch pushed back to `expect`, leased on the new tip."""

    remote: Branches
    branch: str
    expect: str
    changes: dict[str, bytes]
    message: str
    reuse: str | None
    action: str


class Memory(NamedTuple):
    """This clone's memory of what it last wrote to the remote (`refs/backlog-mine/<kind>/<slug>`)
    set to `sha` (None: forgotten). No precondition. Undo: the memory back to what it held."""

    remote: Memo
    kind: str
    slug: str
    sha: str | None


class Record(NamedTuple):
    """A ledger entry only where the ledger has none for the slug (the history's backfill).
    Precondition: no entry (the exclusive create decides, so a settlement written meanwhile wins).
    Effect: the entry; its slug appended to `written`. Undo: the entry removed."""

    directory: Path
    entry: Settled
    written: list[str]


class Restore(NamedTuple):
    """`git checkout HEAD -- paths` (a migration undone before its commit). Precondition: none (the
    caller chose the paths still as the migration left them). Undo: each file as it was."""

    paths: tuple[str, ...]


class Config(NamedTuple):
    """`git config key value` in this clone. Precondition: the key is unset (asked again: a value
    set meanwhile is the user's and stays). Undo: the key unset."""

    key: str
    value: str


class Rename(NamedTuple):
    """`src` renamed to `dst` (a hook kept as the chained one). Precondition: `dst` does not exist.
    Undo: renamed back."""

    src: Path
    dst: Path


class Executable(NamedTuple):
    """`chmod +x path` (a hook). Undo: its mode back, if it is still there."""

    path: Path


class Nested(NamedTuple):
    """Changes of their own, each through `run` (setup's layout self-heal): `do()` writes nothing by
    other means, and returns the tracked paths they left for this commit (a `.gitignore` it
    completed). Undo: the `Keep` steps declared before it put those paths back."""

    do: Callable[[], Iterable[str]]


class Then(NamedTuple):
    """Another change, run to its own commit: here, or in another worktree (`repo`, with its
    `ledger`: the intake worktree's landing). Not undone when a later step of this one fails (this
    branch's stale copies of a task dropped before it settles)."""

    change: Change
    repo: Repo | None = None
    ledger: Ledger | None = None


class Crash(NamedTuple):
    """A crash point (fault injection; `storage.crash_point`)."""

    name: str


Step = (
    Publish
    | Settle
    | Create
    | Write
    | Remove
    | Dirs
    | Link
    | Unlink
    | Rmdir
    | Keep
    | Track
    | Unstage
    | BranchCommit
    | Travel
    | Memory
    | Record
    | Restore
    | Config
    | Rename
    | Executable
    | Nested
    | Then
    | Crash
)


@dataclass(frozen=True)
class Change:
    """Everything one writer does, in order; see the module's docstring. (The steps are named
    tuples, not dataclasses: two dozen of them, made at every command's start, cost a tenth as much.)"""

    steps: tuple[Step, ...]
    message: str | None = None  # the commit of the tracked paths (None: nothing tracked may change)
    also: tuple[str, ...] = ()  # pathspecs committed as the work tree has them (`gitcommit.commit_paths`)
    ignored: bool = False  # the tracked paths may be ignored by .gitignore
    after: tuple[Step, ...] = field(default=())  # once the commit landed: never undone
    restore_index: bool = False  # on undo, the tracked paths' index entries go back as in HEAD too

    def tracked(self) -> list[str]:
        """The paths the commit holds, in the order the steps name them (each once)."""
        seen: dict[str, None] = {}
        for step in self.steps:
            if isinstance(step, Track):
                seen.update(dict.fromkeys(step.paths))
            elif isinstance(step, Create | Write | Remove | Link) and step.tracked is not None:
                seen[step.tracked] = None
        return list(seen)


def run(change: Change, repo: Repo, ledger: Ledger | None = None) -> None:
    """Carry out `change`: its steps in one transaction, its commit, then its `after` steps. Only
    here may git be written (`gitwrite.protocol`)."""
    with gitwrite.protocol():
        _run(change, repo, ledger)


def _run(change: Change, repo: Repo, ledger: Ledger | None) -> None:
    with storage.Transaction() as tx:
        if change.restore_index:
            tx.on_undo(lambda: gitcommit.unstage(repo, change.tracked()))
        made: dict[str, None] = {}
        with ticker.over("writing", len(change.steps)) as tick:  # a migration's thousands of steps
            for step in change.steps:
                made.update(dict.fromkeys(_step(step, tx, repo, ledger) or ()))
                tick()
        tracked = list(dict.fromkeys(change.tracked() + list(made)))
        if tracked:
            if change.message is None:
                raise AssertionError("tracked change without a commit message")
            gitcommit.commit_paths(repo, tracked, change.message, ignored=change.ignored, also=change.also)
    for step in change.after:
        _step(step, storage.Transaction(), repo, ledger)  # nothing to undo any more: the commit landed


def _step(step: Step, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> Iterable[str] | None:
    """Carry out one step; returns the tracked paths a `Nested` step left for the commit."""
    match step:
        case Publish(push):
            push(tx)
        case Settle(entry):
            if ledger is None:
                raise AssertionError("a ledger entry without a ledger")
            _settle(ledger, entry, tx)
        case Create(path, data, _, taken):
            storage.ensure_dir(path.parent)  # a pile's directory stays: others may be writing into it
            if not tx.create(path, data):
                if taken is None:
                    raise BacklogError(f"{path.name} appeared meanwhile; not overwriting it")
                taken()
        case Write(path, old, new):
            tx.write(path, old, new)
        case Remove(path, old):
            if old is None:
                storage.remove_file(path)
            else:
                tx.remove(path, old)
        case Dirs(path):
            with contextlib.suppress(OSError):  # made meanwhile, or something else in the way:
                tx.mkdirs(path)
            storage.ensure_dir(path)  # ... which this names in one line
        case Link(path, target, _, replace):
            if replace:
                storage.replace_symlink(path, target)
            else:
                tx.symlink(path, target)
        case Unlink(path):
            tx.unlink_symlink(path)
        case Rmdir(path, refuse):
            try:
                tx.rmdir(path)
            except OSError:
                if refuse is None:
                    raise
                raise refuse(path) from None
        case Keep(path):
            tx.on_undo(_as_now(path))
        case Unstage(paths):
            gitcommit.unstage(repo, list(paths))
        case Nested(do):
            return do()
        case Then(inner, there, book):
            run(inner, repo, ledger) if there is None else run(inner, there, book)
        case BranchCommit(branch, changes, message, check):
            tip, made = gitwrite.commit_on_branch(repo.toplevel, branch, changes, message, check)
            tx.on_undo(lambda: _undo_ref(repo, f"refs/heads/{branch}", tip, made, message))
        case Travel(there, branch, expect, changes, message, reuse, action):
            pushed = gitwrite.commit_on(repo.toplevel, expect, changes, message, reuse)
            there.push_branch(branch, pushed, expect, action)
            tx.on_undo(lambda: there.push_branch(branch, expect, pushed, f"undoing {action}"))
        case Memory(remote, kind, slug, sha):
            prior = remote.mine(kind, slug)
            remote.remember(kind, slug, sha)
            tx.on_undo(lambda: remote.remember(kind, slug, prior))
        case Record(directory, entry, written):
            if ledger_file.record_new(directory, entry):
                written.append(entry.slug)
                tx.on_undo(lambda: ledger_file.remove(directory, entry.slug))
        case Restore(paths):
            for back in [_as_now(repo.toplevel / p) for p in paths]:
                tx.on_undo(back)
            gitwrite.checkout_head(repo.toplevel, list(paths))
        case Config(key, value):
            if git.call(repo.toplevel, "config", key)[0] != 0:  # set meanwhile: the user's, kept
                gitwrite.config_set(repo.toplevel, key, value)
                tx.on_undo(lambda: gitwrite.config_set(repo.toplevel, key, None))
        case Rename(src, dst):
            if os.path.lexists(dst):
                raise BacklogError(f"{dst} appeared meanwhile; not overwriting it")
            os.rename(src, dst)
            tx.on_undo(lambda: os.rename(dst, src))
        case Executable(path):
            mode = path.stat().st_mode
            path.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
            tx.on_undo(lambda: path.chmod(mode) if path.exists() else None)
        case Crash(name):
            storage.crash_point(name)
        case Track():
            pass
    return None


def _undo_ref(repo: Repo, name: str, back: str, made: str, message: str) -> None:
    """`name` back to `back`, when it still is `made` (compare-and-swap: else left as it is)."""
    gitwrite.update_ref(repo.toplevel, name, back, made, f"undo: {message}")


def _as_now(path: Path) -> Callable[[], None]:
    """A step that puts `path` back as it is now (a file, a symlink, or nothing)."""
    target = os.readlink(path) if os.path.islink(path) else None
    data = path.read_bytes() if target is None and path.is_file() else None

    def back() -> None:
        if os.path.islink(path) or path.is_file():
            storage.remove_file(path)
        if target is not None:
            os.symlink(target, path)
        elif data is not None:
            storage.write_file(path, data)

    return back


def _settle(ledger: Ledger, entry: Settled, tx: storage.Transaction) -> None:
    prior = ledger.settled(entry.slug)
    ledger.settle(entry)

    def undo() -> None:
        if prior is not None:
            ledger.settle(prior)
        else:
            ledger.unsettle(entry.slug)

    tx.on_undo(undo)
