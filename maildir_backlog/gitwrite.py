"""The writing half of git: the only module that spells a git subcommand which writes (a ref, an
object, the index, the work tree, the config, the remote). `gitcommit` stages and commits through
`run` here; every other write is one of the named functions below.

Each of them refuses to run outside the one move protocol: `change.run` opens `protocol()` for
the time it carries out a change, and a write without it is an AssertionError naming the
command. So the suite proves, whenever it runs, that no git write happens outside a declared
step (docs/design.md, *One move protocol*). `git fetch`, which updates remote-tracking refs, is a
read here: those refs are a cache of the remote, never a record of this clone's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path

from . import git
from .argv import END_OF_OPTIONS, END_OF_PATHS
from .errors import BacklogError, Unavailable

_DEPTH: ContextVar[int] = ContextVar("backlog_protocol", default=0)

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's id of the empty tree (sha1)
CAS_ATTEMPTS = 20  # a plumbing commit lost to a concurrent update of the branch is rebuilt this often


@contextlib.contextmanager
def protocol() -> Iterator[None]:
    """The span of one `change.run` (nested runs nest): git writes are allowed inside it."""
    token = _DEPTH.set(_DEPTH.get() + 1)
    try:
        yield
    finally:
        _DEPTH.reset(token)


def inside() -> bool:
    return _DEPTH.get() > 0


def _guard(args: tuple[str, ...]) -> None:
    if not inside():
        said = " ".join(a for a in args if not a.startswith("user."))[:80]
        raise AssertionError(
            f"a git write outside the move protocol: git {said} (declare it as a step of a change.Change)"
        )


def run(cwd: Path | str, *args: str) -> str:
    """`git.run` of a writing command (gitcommit's staging and commits)."""
    _guard(args)
    return git.run(cwd, *args)


def call(
    cwd: Path | str, *args: str, stdin: bytes = b"", timeout: float | None = None, index: Path | None = None
) -> tuple[int, bytes, bytes]:
    """`git.call` of a writing command: (exit code, stdout, stderr)."""
    _guard(args)
    return git.call(cwd, *args, stdin=stdin, timeout=timeout, index=index)


def _fed(cwd: Path | str, data: bytes, *args: str, index: Path | None = None) -> str:
    """The one line a plumbing command prints after reading `data` on its stdin."""
    code, out, err = call(cwd, *args, stdin=data, index=index)
    if code:
        said = err.decode("utf-8", "replace").strip().splitlines()
        raise git.GitError(said[-1] if said else f"git {args[0]} failed", err.decode("utf-8", "replace"))
    return out.decode().strip()


# -- objects -------------------------------------------------------------------------------------
def blob(cwd: Path | str, data: bytes) -> str:
    """Write `data` as a blob; its id."""
    return _fed(cwd, data, "hash-object", "-w", "--stdin")


def tree(cwd: Path | str, listing: bytes, nul: bool = False) -> str:
    """Write a tree from `mktree`'s input (`-z`: NUL-terminated entries); its id."""
    return _fed(cwd, listing, "mktree", *(["-z"] if nul else []))


def commit_tree(
    cwd: Path | str, tree_id: str, parents: list[str], messages: list[str], identity: tuple[str, ...] = ()
) -> str:
    """Write a commit of `tree_id` on `parents`, one `-m` per message; its id."""
    args = [*identity, "commit-tree", tree_id]
    for parent in parents:
        args += ["-p", parent]
    for message in messages:
        args += ["-m", message]
    code, out, err = call(cwd, *args)
    if code:
        said = err.decode("utf-8", "replace").strip().splitlines()
        raise git.GitError(said[-1] if said else "git commit-tree failed", err.decode("utf-8", "replace"))
    return out.decode().strip()


def index_update(cwd: Path | str, index: Path, paths: list[str], force: bool, removals: bool) -> None:
    """Stage `paths` as the work tree has them into the index file `index` (a copy, not the
    worktree's own). `removals` (every path is gone from the work tree): `update-index --remove`
    of exact paths, no pathspec matching over the index; else `add -A` (`force`: ignored paths
    too), which stages as the full way does, ignore rules and all."""
    if removals:
        _fed(cwd, b"", "update-index", "--remove", END_OF_PATHS, *paths, index=index)
    else:
        _fed(cwd, b"", "add", "-A", *(["--force"] if force else []), END_OF_PATHS, *paths, index=index)


def index_tree(cwd: Path | str, index: Path) -> str:
    """Write the tree the index file `index` holds (its cached trees reused); its id."""
    return _fed(cwd, b"", "write-tree", index=index)


def auto_maintenance(cwd: Path | str) -> None:
    """What `git commit` runs after a commit: git's housekeeping, when git judges it due."""
    call(cwd, "maintenance", "run", "--auto", "--quiet")


# -- refs ----------------------------------------------------------------------------------------
def update_ref(
    cwd: Path | str, name: str, new: str | None, old: str | None = None, reason: str | None = None
) -> tuple[int, bytes, bytes]:
    """Move `name` to `new` (None: delete it), when it still is `old` (None: whatever it is);
    (exit code, stdout, stderr) as git said them."""
    why = ["-m", reason] if reason is not None else []
    if new is None:
        return call(cwd, "update-ref", *why, "-d", END_OF_OPTIONS, name, *([old] if old else []))
    return call(cwd, "update-ref", *why, END_OF_OPTIONS, name, new, *([old] if old is not None else []))


def push(cwd: Path | str, args: list[str], timeout: float | None) -> tuple[int, bytes, bytes]:
    """`git push ARGS` (the remote's leases and refspecs, `remote/transport.py` builds them)."""
    return call(cwd, "push", *args, timeout=timeout)


# -- the work tree and the config ----------------------------------------------------------------
def checkout_head(cwd: Path | str, paths: list[str]) -> None:
    """The tracked `paths` back as HEAD has them (a migration undone before its commit)."""
    run(cwd, "checkout", "HEAD", "--", *paths)


def config_set(cwd: Path | str, key: str, value: str | None) -> None:
    """Set `key` in this clone's config (None: unset it)."""
    if value is None:
        call(cwd, "config", "--unset", key)
    else:
        run(cwd, "config", key, value)


# -- commits on a branch that is not checked out (SPEC §4 *One queue per clone*) ----------------
def _rev(cwd: Path | str, rev: str) -> str:
    return git.run(cwd, "rev-parse", "-q", "--verify", END_OF_OPTIONS, f"{rev}^{{commit}}", check=False).strip()


def commit_on_branch(
    cwd: Path | str,
    branch: str,
    changes: dict[str, bytes | None],
    message: str,
    check: Callable[[str], dict[str, None]] = lambda _tip: {},
) -> tuple[str, str]:
    """Commit `changes` (path → new content, None to remove) on `branch` without a checkout:
    `hash-object`, `mktree` for each tree on the way, `commit-tree`, then `update-ref` with the
    tip it was built on as the expected old value. Lost to another update of the branch, it is
    rebuilt on the new tip (`check(tip)` re-asks the caller's precondition each time, and names
    the paths to remove as well). Returns (the tip it was built on, the new commit). No commit
    hooks run (nothing is checked out); a `reference-transaction` hook does, and the repository
    may refuse the update (the hook, permissions): that is exit 1 naming the refusal, at once.
    Only a lost compare-and-swap (the branch moved since it was read) or another process's lock
    on the ref is tried again; still losing after CAS_ATTEMPTS, exit 4."""
    blobs = {path: (None if data is None else blob(cwd, data)) for path, data in changes.items()}
    for _ in range(CAS_ATTEMPTS):
        tip = _rev(cwd, f"refs/heads/{branch}")
        if not tip:
            raise BacklogError(f"the intake branch {branch} does not exist (any more)")
        removed = check(tip)
        made = tree_with(cwd, tip, {**removed, **blobs}) or EMPTY_TREE
        commit = commit_tree(cwd, made, [tip], [message])
        code, _out, err = update_ref(cwd, f"refs/heads/{branch}", commit, tip, message)
        if code == 0:
            return tip, commit
        if _rev(cwd, f"refs/heads/{branch}") == tip and b".lock': File exists" not in err:  # not a race: a refusal
            text = err.decode("utf-8", "replace")
            said = "; ".join([line.strip() for line in text.splitlines() if line.strip()][-3:]) or "no reason given"
            raise git.GitError(
                f"the repository refused to move the intake branch {branch} ({said}): nothing changed", text
            )
    raise Unavailable(
        f"the intake branch {branch} kept moving (or its ref stayed locked) while committing to it:"
        " nothing changed; retry later"
    )


def commit_on(
    cwd: Path | str, tip: str, changes: dict[str, bytes | None], message: str, reuse: str | None = None
) -> str:
    """A commit of `changes` (path → content, None to remove) on `tip`, no ref moved (SPEC §8: the
    remote's intake branch's next tip); `reuse`, this clone's own commit, when its parent is `tip`
    and its tree the same."""
    blobs = {path: None if data is None else blob(cwd, data) for path, data in changes.items()}
    made = tree_with(cwd, tip, blobs) or EMPTY_TREE
    if (
        reuse
        and _rev(cwd, f"{reuse}^") == tip
        and git.run(cwd, "rev-parse", "-q", "--verify", END_OF_OPTIONS, f"{reuse}^{{tree}}", check=False).strip()
        == made
    ):
        return reuse
    return commit_tree(cwd, made, [tip], [message])


def _entries(cwd: Path | str, base: str) -> dict[bytes, bytes]:
    """The tree `base`'s entries: name → "mode type id", as `ls-tree -z` printed it."""
    code, out, err = git.call(cwd, "ls-tree", "-z", END_OF_OPTIONS, base)
    if code:
        raise git.GitError(f"cannot read the tree {base}", err.decode("utf-8", "replace"))
    entries: dict[bytes, bytes] = {}
    for record in out.split(b"\0"):
        meta, tab, name = record.partition(b"\t")
        if tab and name:
            entries[name] = meta
    return entries


def tree_with(cwd: Path | str, base: str | None, changes: dict[str, str | None]) -> str | None:
    """The tree `base` (a tree or commit id; None: empty) with `changes` (path → blob id, None to
    remove) applied; None when empty. Read and written as bytes (`ls-tree -z`, `mktree -z`): every
    entry not on a changed path is kept byte for byte (a name that is not UTF-8, a mode, a
    symlink, a submodule's commit), and only the trees on the changed paths are written anew."""
    entries = _entries(cwd, base) if base is not None else {}
    deeper: dict[bytes, dict[str, str | None]] = {}
    for path, blob_id in changes.items():
        head, sep, rest = path.partition("/")
        if sep:
            deeper.setdefault(head.encode(), {})[rest] = blob_id
        elif blob_id is None:
            entries.pop(head.encode(), None)
        else:
            entries[head.encode()] = f"100644 blob {blob_id}".encode()
    for name, sub in deeper.items():
        current = entries.get(name, b"").split()
        inner = tree_with(cwd, current[2].decode() if current[1:2] == [b"tree"] else None, sub)
        if inner is None:
            entries.pop(name, None)
        else:
            entries[name] = f"040000 tree {inner}".encode()
    if not entries and base is not None:
        return None
    return tree(cwd, b"".join(meta + b"\t" + name + b"\0" for name, meta in entries.items()), nul=True)
