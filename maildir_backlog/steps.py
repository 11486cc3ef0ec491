"""The steps of the one move protocol (docs/design.md, *One move protocol*): what each step
declares (its precondition, effect and undo, in its docstring) and the small function that carries
it out, one per step type, found through `EXECUTORS`. `change.run` is their only caller: it opens
the transaction each executor registers its undo with, and it carries out the two steps that need
the protocol itself (`change.Then`, another change run to its commit, and `change.Unstage`, the
index half of the commit). `change.Step` is the union of them all.
"""

import contextlib
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from . import git, gitwrite, storage
from . import ledger as ledger_file
from .errors import BacklogError
from .git import Repo
from .ledger import Settled
from .typed import Any, NamedTuple, Protocol


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
    changes: dict[str, bytes | None]
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


class Crash(NamedTuple):
    """A crash point (fault injection; `storage.crash_point`)."""

    name: str


# One executor per step type: `(step, tx, repo, ledger)`, returning the tracked paths a `Nested`
# step left for the commit (None for every other). Each registers its undo with `tx`.
Executor = Callable[[Any, storage.Transaction, Repo, Ledger | None], Iterable[str] | None]


def _publish(step: Publish, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> None:
    step.push(tx)


def _settle(step: Settle, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> None:
    if ledger is None:
        raise AssertionError("a ledger entry without a ledger")
    entry = step.entry
    prior = ledger.settled(entry.slug)
    ledger.settle(entry)

    def undo() -> None:
        if prior is not None:
            ledger.settle(prior)
        else:
            ledger.unsettle(entry.slug)

    tx.on_undo(undo)


def _create(step: Create, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> None:
    path = step.path
    storage.ensure_dir(path.parent)  # a pile's directory stays: others may be writing into it
    if not tx.create(path, step.data):
        if step.taken is None:
            raise BacklogError(f"{path.name} appeared meanwhile; not overwriting it")
        step.taken()


def _write(step: Write, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> None:
    tx.write(step.path, step.old, step.new)


def _remove(step: Remove, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> None:
    if step.old is None:
        storage.remove_file(step.path)
    else:
        tx.remove(step.path, step.old)


def _dirs(step: Dirs, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> None:
    with contextlib.suppress(OSError):  # made meanwhile, or something else in the way:
        tx.mkdirs(step.path)
    storage.ensure_dir(step.path)  # ... which this names in one line


def _link(step: Link, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> None:
    if step.replace:
        storage.replace_symlink(step.path, step.target)
    else:
        tx.symlink(step.path, step.target)


def _unlink(step: Unlink, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> None:
    tx.unlink_symlink(step.path)


def _rmdir(step: Rmdir, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> None:
    try:
        tx.rmdir(step.path)
    except OSError:
        if step.refuse is None:
            raise
        raise step.refuse(step.path) from None


def _keep(step: Keep, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> None:
    tx.on_undo(_as_now(step.path))


def _nothing(step: Track, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> None:
    """`Track` does nothing when it runs: the commit reads its paths (`change.Change.tracked`)."""


def _branch_commit(step: BranchCommit, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> None:
    branch, message = step.branch, step.message
    tip, made = gitwrite.commit_on_branch(repo.toplevel, branch, step.changes, message, step.check)
    tx.on_undo(lambda: _undo_ref(repo, f"refs/heads/{branch}", tip, made, message))


def _travel(step: Travel, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> None:
    there, branch, expect, action = step.remote, step.branch, step.expect, step.action
    pushed = gitwrite.commit_on(repo.toplevel, expect, step.changes, step.message, step.reuse)
    there.push_branch(branch, pushed, expect, action)
    tx.on_undo(lambda: there.push_branch(branch, expect, pushed, f"undoing {action}"))


def _memory(step: Memory, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> None:
    remote, kind, slug = step.remote, step.kind, step.slug
    prior = remote.mine(kind, slug)
    remote.remember(kind, slug, step.sha)
    tx.on_undo(lambda: remote.remember(kind, slug, prior))


def _record(step: Record, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> None:
    directory, entry = step.directory, step.entry
    if ledger_file.record_new(directory, entry):
        step.written.append(entry.slug)
        tx.on_undo(lambda: ledger_file.remove(directory, entry.slug))


def _restore(step: Restore, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> None:
    for back in [_as_now(repo.toplevel / p) for p in step.paths]:
        tx.on_undo(back)
    gitwrite.checkout_head(repo.toplevel, list(step.paths))


def _config(step: Config, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> None:
    top, key = repo.toplevel, step.key
    if git.call(top, "config", key)[0] != 0:  # set meanwhile: the user's, kept
        gitwrite.config_set(top, key, step.value)
        tx.on_undo(lambda: gitwrite.config_set(top, key, None))


def _rename(step: Rename, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> None:
    src, dst = step.src, step.dst
    if os.path.lexists(dst):
        raise BacklogError(f"{dst} appeared meanwhile; not overwriting it")
    os.rename(src, dst)
    tx.on_undo(lambda: os.rename(dst, src))


def _executable(step: Executable, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> None:
    path = step.path
    mode = path.stat().st_mode
    path.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    tx.on_undo(lambda: path.chmod(mode) if path.exists() else None)


def _nested(step: Nested, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> Iterable[str]:
    return step.do()


def _crash(step: Crash, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> None:
    storage.crash_point(step.name)


EXECUTORS: dict[type[Any], Executor] = {
    Publish: _publish,
    Settle: _settle,
    Create: _create,
    Write: _write,
    Remove: _remove,
    Dirs: _dirs,
    Link: _link,
    Unlink: _unlink,
    Rmdir: _rmdir,
    Keep: _keep,
    Track: _nothing,
    BranchCommit: _branch_commit,
    Travel: _travel,
    Memory: _memory,
    Record: _record,
    Restore: _restore,
    Config: _config,
    Rename: _rename,
    Executable: _executable,
    Nested: _nested,
    Crash: _crash,
}


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
