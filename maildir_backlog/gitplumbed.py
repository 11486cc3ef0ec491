"""A verb's commit at scale without `git commit` (docs/design.md, *A claim's commit at 100,000
tasks*): the paths of one move (a claim's removal, a completion's new done/ copy, a new task)
staged into a copy of the index, committed from plumbing, and the copy swapped in under git's
own index lock for the moment HEAD moves.

`git commit --only -- P` refreshes the whole index first (an `lstat` per tracked file: about
0.3 s of its 0.42 s at 100,000 tasks), and a new file must be staged in the user's index first
(`git add`), where a user's plain `git commit` may take it before the verb's own. Here, from
`PLUMBED_FROM` index entries on:

1. the index is copied aside (`<git dir>/backlog-commit/index.<unique>`), its stamp noted; its
   tree must be HEAD's (`write-tree`, the cached trees reused: anything staged would ride along,
   and the full way leaves it out); the paths are staged into the copy as the work tree has them
   (`git add -A`, as the full way stages them; removals alone: `update-index --remove`, which
   matches no pathspec over the whole index), and its tree written again: so it differs from
   HEAD's within the paths alone, and must differ (nothing at all: the full way says so);
2. the commit is written (`commit-tree`) and the copy renamed after it (`index.<commit id>`);
3. git's `index.lock` is taken by hard-linking the copy to it (a git command that holds it: the
   full way, which waits); the index must still be the one copied (a user's `git commit`, `git
   reset` or `git add` since: the full way); HEAD is moved only if it is still the commit read
   (`update-ref` with the old value); the lock is renamed over the index.

The user's index is never written before the lock is held and checked, and no git process of
this worktree can write it from then until the rename. So a user's `git commit` never carries the
move, and a `git reset` never puts an entry back behind it (tests/test_claim_interleave.py). A
verb killed while it holds the lock leaves it behind, but hard-linked to a copy whose name is its
commit: the next command that commits in this worktree (under `gitcommit`'s lock, so the killed
one is gone) and the janitor find it (`settle`) and finish the swap when HEAD is that commit, or
drop the lock when it is not. Nothing else of the user's is touched: a lock that is not linked to
one of these copies is git's, and left alone.

Taken only when nothing `git commit` would do besides applies: no commit hook, no
`core.hooksPath` nor `commit.gpgSign` nor any `hook.*` set, no GIT_INDEX_FILE of the caller's, a
message git would not clean up, a born branch, no merge, cherry-pick, revert or rebase in
progress. Anything refused leaves the
index and HEAD as they were (nothing committed): the caller commits the full way.
"""

from __future__ import annotations

import contextlib
import os
from operator import attrgetter
from pathlib import Path

from . import git, gitwrite, storage
from .argv import END_OF_OPTIONS
from .errors import BacklogError
from .git import PICKING, REBASING, GitError, Repo
from .layout import Layout, every_pile_pathspec, parse_task_rel

PLUMBED_FROM = git.LARGE_INDEX  # index entries from which a verb commits this way
FROM_VARIABLE = "BACKLOG_PLUMBED_FROM"  # another threshold, for the tests (0: every commit of a verb)
WORK = "backlog-commit"  # in the git dir: the index copies of the commits in the making
PREFIX = "index."
COMMIT_HOOKS = ("pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "post-index-change")
_STAMP = attrgetter("st_ino", "st_size", "st_mtime_ns", "st_ctime_ns")  # a version of the index (git renames one in)
SETTINGS = r"^(core\.hookspath|commit\.gpgsign|hook\..*)$"  # any set at all: `git commit` decides (hook.*: by config)


def threshold() -> int:
    said = os.environ.get(FROM_VARIABLE, "")
    return int(said) if said.isdigit() else PLUMBED_FROM


def commit(
    repo: Repo, paths: list[str], message: str, also: tuple[str, ...], ignored: bool = False, made: tuple[str, ...] = ()
) -> bool:
    """Commit exactly `paths` as the work tree has them (written, changed or removed) this way, in
    a worktree whose index holds at least `threshold()` entries; False when it did not (nothing
    committed, the index and HEAD as they were): the caller commits the full way. `also`: none,
    or the task's file in every pile, which `git commit --only` takes from the work tree: then no
    tracked copy but `paths` may differ there from the index (nor, by the first tree's check, the index
    from HEAD), so that commit would hold `paths` alone too. `ignored`: as `gitcommit.commit_paths`
    (staged even where .gitignore ignores them). `made`: those of `paths` the caller found in the work
    tree just before (none: every path is a removal).
    Called with `gitcommit`'s lock held."""
    if not paths or git.index_entries(repo) < threshold():
        return False
    found = parse_task_rel(paths[0])
    if also and (found is None or also != (every_pile_pathspec(found[1]),)):
        return False
    if not repo.has_commits or message != message.strip() or "\n" in message or "GIT_INDEX_FILE" in os.environ:
        return False
    if _busy(repo) or _hooked(repo):
        return False
    work = repo.git_dir / WORK
    copy = work / f"{PREFIX}{os.getpid()}-{os.urandom(4).hex()}"
    try:
        storage.ensure_dir(work)  # (something else in its place: the full way)
        found = _head(repo, paths, also)
        if found is None:
            return False
        head, head_tree = found
        stamp = _copied(repo.git_dir / "index", copy)
        if gitwrite.index_tree(repo.toplevel, copy) != head_tree:
            return False  # something is staged: `--only` sorts it out
        gitwrite.index_update(repo.toplevel, copy, paths, ignored, removals=not made)
        tree = gitwrite.index_tree(repo.toplevel, copy)
        if tree == head_tree:
            return False  # nothing to commit: `--only` says so
        commit = gitwrite.commit_tree(repo.toplevel, tree, [head], [message])
        named = work / f"{PREFIX}{commit}"
        os.rename(copy, named)
        copy = named
        storage.crash_point("git:plumbed-written")
        done = _swap(repo, named, stamp, head, commit, message)
    except (GitError, OSError, BacklogError):
        return False  # (after HEAD moved, the full way finds nothing left to commit)
    finally:
        _settle(repo, copy)  # the copy removed; the lock, if it is still the copy, let go or renamed
    if done:
        _note(repo, head, commit, paths, made)
        gitwrite.auto_maintenance(repo.toplevel)
    return done


NOTED_BYTES = 64 * 1024  # past this the notes keep their last quarter (a note lost costs a `git log`, never an answer)


def _note(repo: Repo, parent: str, commit: str, paths: list[str], made: tuple[str, ...]) -> None:
    """Append `parent commit path…` (tab-separated) to `Layout.own_commits`: the commit's only
    parent is `parent`, and its tree differs from the parent's within `paths` alone (checked
    before it was made), so it added no file but those of `paths` the work tree held when they
    were staged: the caller's `made`, and any there now (one written meanwhile is listed too: a
    note may say too much, never too little). `intake.added_times` reads it instead of `git log`
    over such a commit. Nothing is noted for a path that holds a tab or a line break; a note that
    cannot be written is none."""
    present = [p for p in paths if p in made or os.path.lexists(repo.toplevel / p)]
    if any("\t" in p or "\n" in p or "\r" in p for p in present):
        return
    where = Layout.of(repo).own_commits
    with contextlib.suppress(OSError):
        if where.stat().st_size > NOTED_BYTES:  # the last quarter kept (under the commit lock: no other writer)
            kept = where.read_bytes()[-NOTED_BYTES // 4 :]
            storage.write_file(where, kept[kept.find(b"\n") + 1 :])
    line = "\t".join([parent, commit, *present]) + "\n"
    with contextlib.suppress(OSError):
        storage.append_to(where, line.encode("utf-8", "surrogateescape"), create=True)


def _head(repo: Repo, paths: list[str], also: tuple[str, ...]) -> tuple[str, str] | None:
    """HEAD's commit and tree; None when another tracked copy of `also` changed in the work tree
    (`--only` would commit it)."""
    found = git.run(repo.toplevel, "rev-parse", "--revs-only", END_OF_OPTIONS, "HEAD^{commit}", "HEAD^{tree}").split()
    # (`--revs-only`: with two revisions and no `--verify`, rev-parse would echo `--end-of-options`)
    changed = git.run(repo.toplevel, "diff-files", "--name-only", "-z", "--", *also) if also else ""
    if len(found) != 2 or {p for p in changed.split("\0") if p} - set(paths):
        return None
    return found[0], found[1]


def _swap(repo: Repo, named: Path, stamp: tuple[int, ...], head: str, commit: str, message: str) -> bool:
    """Take git's index lock as the copy `named`, move HEAD from `head` to `commit`, and rename the
    lock over the index; False, with the lock let go and HEAD unmoved, when another git command
    holds the lock, wrote the index since it was copied, or moved HEAD. Whatever it raises, the
    caller's `_settle` finishes or undoes from where it stopped."""
    lock = Layout.of(repo).git_index_lock
    try:
        os.link(named, lock)
    except FileExistsError:
        return False  # a git command runs: the full way waits for it
    if _stamp(repo.git_dir / "index") != stamp:
        os.unlink(lock)
        return False
    storage.crash_point("git:plumbed-locked")
    code, _out, _err = gitwrite.update_ref(repo.toplevel, "HEAD", commit, head, f"commit: {message}")
    if code:
        os.unlink(lock)
        return False
    storage.crash_point("git:plumbed-moved")
    os.rename(lock, repo.git_dir / "index")
    return True


def settle(repo: Repo) -> list[str]:
    """Finish or undo the swap of a verb killed while it held git's index lock (`_swap`), and
    remove the copies such verbs left; what was done to a lock, one line each. Called with
    `gitcommit`'s lock held (so no verb of this worktree is making one); one `listdir` when
    there is nothing."""
    work = repo.git_dir / WORK
    try:
        names = os.listdir(work)
    except OSError:
        return []
    return [said for name in names if (said := _settle(repo, work / name))]


def held(repo: Repo) -> bool:
    """Is git's index lock here one a killed verb left (linked to one of its copies)?"""
    lock = Layout.of(repo).git_index_lock
    try:
        return any(_linked(copy, lock) for copy in (repo.git_dir / WORK).iterdir())
    except OSError:
        return False


def _settle(repo: Repo, copy: Path) -> str | None:
    """`copy` removed; if git's index lock is that copy, the swap finished (HEAD moved to its
    commit) or let go (it did not) first: said in a line. A lock that stays the copy (its rename
    or removal failed) keeps the copy too, for the next command to try again."""
    lock = Layout.of(repo).git_index_lock
    said = None
    if _linked(copy, lock):  # the lock is this copy: HEAD moved to its commit or not, nothing else since
        commit = copy.name.removeprefix(PREFIX)
        head = git.run(repo.toplevel, "rev-parse", "-q", "--verify", END_OF_OPTIONS, "HEAD", check=False).strip()
        with contextlib.suppress(OSError):
            if head == commit:
                os.rename(lock, repo.git_dir / "index")
                said = f"a commit {commit[:12]} of the tool's was killed before its index was written: written"
            else:
                os.unlink(lock)
                said = "a commit of the tool's was killed holding git's index lock before HEAD moved: the lock let go"
        if _linked(copy, lock):
            return None
    with contextlib.suppress(OSError):
        os.unlink(copy)
    return said


def _linked(copy: Path, lock: Path) -> bool:
    """Is git's index lock `lock` the file `copy` (a hard link of it)?"""
    try:
        return os.path.samestat(os.lstat(copy), os.lstat(lock))
    except OSError:
        return False


def _copied(index: Path, copy: Path) -> tuple[int, ...]:
    """Copy the index file to `copy`, with its times; the stamp of the file copied (git replaces
    the index by a rename, so the open file is one version whole). The modification time is the
    index's own: git judges an entry changed within it "racily clean" by it (and checks its bytes)."""
    fd = os.open(index, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        info = os.fstat(fd)
        out = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)  # (less the umask, as git)
        try:
            _copy_bytes(fd, out, info.st_size)
            os.utime(out, ns=(info.st_atime_ns, info.st_mtime_ns))
        finally:
            os.close(out)
    finally:
        os.close(fd)
    return _STAMP(info)


def _copy_bytes(fd: int, out: int, size: int) -> None:
    """The bytes of `fd` into the empty `out`: in the kernel (`copy_file_range`: 4 ms for a 10 MB
    index, against 20 ms through Python's buffers), or where the system or the file system cannot,
    read and written from the start."""
    done, in_kernel = 0, getattr(os, "copy_file_range", None)  # (Linux only)
    try:
        while in_kernel is not None and done < size and (step := in_kernel(fd, out, size - done)):
            done += step
        if done >= size:
            return
    except OSError:
        pass
    os.lseek(fd, 0, os.SEEK_SET)
    os.lseek(out, 0, os.SEEK_SET)
    os.ftruncate(out, 0)
    for data in iter(lambda: os.read(fd, 1 << 20), b""):
        view = memoryview(data)
        while view:
            view = view[os.write(out, view) :]


def _stamp(path: Path) -> tuple[int, ...] | None:
    try:
        return _STAMP(os.lstat(path))
    except OSError:
        return None


def _busy(repo: Repo) -> bool:
    """Is a merge, cherry-pick, revert or rebase in progress here (`git commit` has its rules then)?"""
    names = [key for key, _name in PICKING] + list(REBASING) + ["sequencer"]
    return any(os.path.lexists(repo.git_dir / name) for name in names)


def _hooked(repo: Repo) -> bool:
    """Does `git commit` here run a hook or sign (or may it: a hooks path of its own)?"""
    if git.run(repo.toplevel, "config", "-z", "--get-regexp", SETTINGS, check=False):
        return True
    hooks = repo.common_dir / "hooks"
    return any(os.access(hooks / name, os.X_OK) and (hooks / name).is_file() for name in COMMIT_HOOKS)
