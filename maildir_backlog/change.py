"""The one move protocol (docs/design.md, *One move protocol*): every writer of the backlog
declares what it does as a `Change`, and `run` is the only code that carries one out.

A `Change` is data: an ordered list of steps (publish on the remote, record in the ledger,
create, rewrite or remove a file, make a directory or a symlink, a crash point), the commit that
ends it, and what follows the commit (the shared copies removed, a settlement recorded). `run`
performs the steps in order inside one `storage.Transaction`, so every step is undone, newest
first, when a later one or the commit fails (SPEC §7.3): the remote's record is compensated, the
ledger put back to what it held, files put back, index entries restored. Only then, with the
commit landed, do the `after` steps run, which are never undone.

What a writer cannot forget, because `run` does it and nothing else can (an import contract
keeps `gitcommit` here and an AST test keeps `storage.Transaction` here):
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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Protocol

from . import gitcommit, storage, ticker
from .errors import BacklogError
from .git import Repo
from .ledger import Settled


class Ledger(Protocol):
    """Where settlements are recorded (the shared ledger; nothing on maildir-git)."""

    def settled(self, slug: str) -> Settled | None: ...

    def settle(self, entry: Settled) -> None: ...

    def unsettle(self, slug: str) -> None: ...


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


class Aside(NamedTuple):
    """Bookkeeping beside the piles, not a task (the clone's backend mark, a migration's journal,
    the git hook, the layout's self-heal inside setup, a commit on the intake branch through git's
    objects): `do(tx)` makes it and registers its own undo with `tx`; it may return tracked paths
    it changed, which the commit then holds (the `.gitignore` a self-heal completed)."""

    do: Callable[[storage.Transaction], Iterable[str] | None]


class Then(NamedTuple):
    """Another change, run here to its own commit: not undone when a later step of this one fails
    (this branch's stale copies of a task dropped before it settles)."""

    change: Change


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
    | Aside
    | Then
    | Crash
)


@dataclass(frozen=True)
class Change:
    """Everything one writer does, in order; see the module's docstring. (The steps are named
    tuples, not dataclasses: fifteen of them, made at every command's start, cost a tenth as much.)"""

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
    """Carry out `change`: its steps in one transaction, its commit, then its `after` steps."""
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
    """Carry out one step; returns the tracked paths an `Aside` changed."""
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
        case Aside(do):
            return do(tx)
        case Then(inner):
            run(inner, repo, ledger)
        case Crash(name):
            storage.crash_point(name)
        case Track():
            pass
    return None


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
