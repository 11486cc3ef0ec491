"""Commits (SPEC §7.5, §7.6): the one way the tool writes the git index and commits (through
`gitwrite`, inside `change.run`: the move protocol's index-and-commit half).

Commits never sweep up the user's staged work: `commit_paths` stages only the given paths and
commits them with `git commit --only`, which leaves every other staged change staged (SPEC §7.6).
Commits from concurrent verbs in one worktree are serialized by a lock file in that worktree's
git dir, and a busy `index.lock` (a user's git command) is retried (SPEC §7.5).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator

from . import gitplumbed, gitwrite, storage
from .argv import END_OF_OPTIONS
from .errors import Conflict, Unavailable
from .git import PICKING, REBASING, GitError, Repo, discover_has_head, run, status_codes, tracked
from .layout import Layout

INDEX_RETRY_SECONDS = 20.0
MERGE_WAIT_SECONDS = 2.0
# what git says when a commit meets a merge in progress (MERGE_HEAD): a conflict the user has not
# concluded, or the moment `git merge` takes to write its own merge commit
MERGING = ("partial commit during a merge", "MERGE_HEAD exists", "not concluded your merge", "you have unmerged")


# Given to every command `_retrying` runs: the tool stages only its own writes (backlog files,
# its `.gitignore` lines, setup's link in the agent guides). `core.safecrlf=true` refuses a file
# whose line endings would not survive git's conversion (with `core.autocrlf=true`, any file
# holding an LF line); for these, git's conversion is harmless (and under backlog/ there is none:
# attributes.py).
OWN_FILES = ("-c", "core.safecrlf=false")


class IndexBusy(GitError, Unavailable):
    """The git index or a ref stayed locked by another git command past INDEX_RETRY_SECONDS:
    nothing was committed; retry later (exit 4)."""

    code = Unavailable.code
    kind = Unavailable.kind


class MergeInProgress(GitError):
    """A user's `git merge` stopped at a conflict, or did not commit within MERGE_WAIT_SECONDS:
    nothing was committed; the user concludes or aborts it (exit 1)."""


def _commit_lock(repo: Repo) -> contextlib.AbstractContextManager[None]:
    return storage.file_lock(Layout.of(repo).index_lock, timeout=120.0, what="the git index")


@contextlib.contextmanager
def _index_lock(repo: Repo) -> Iterator[None]:
    """This worktree's commits one at a time; first, a commit of the tool's killed midway is settled
    (`gitplumbed.settle`: git's index lock it may have left behind)."""
    with _commit_lock(repo):
        gitplumbed.settle(repo)
        yield


def _retrying(repo: Repo, *args: str) -> str:
    """Run a git command that writes the index or a ref, retrying while another git command
    holds them; a user's merge in progress is waited for briefly (the moment `git merge` takes to
    write its own commit), then refused in one line; at once when it stopped at a conflict."""
    start = time.monotonic()
    merging_seen = False
    while True:
        try:
            return gitwrite.run(repo.toplevel, *OWN_FILES, *args)
        except GitError as exc:
            said = f"{exc.message}\n{exc.stderr}"  # the whole of git's message, not just its last line
            waited = time.monotonic() - start
            if any(sign in said for sign in MERGING):
                # a conflict (unmerged index entries) is there from the merge's first refusal on, and
                # only the user resolves it: looked for once; else wait out an automatic merge's commit
                conflict = not merging_seen and bool(run(repo.toplevel, "ls-files", "-u", check=False).strip())
                merging_seen = True
                if conflict or waited > MERGE_WAIT_SECONDS:
                    raise MergeInProgress(
                        f"a `git merge` is in progress in {repo.toplevel}: conclude it (`git commit`) or abort it"
                        " (`git merge --abort`), then run this again",
                        exc.stderr,
                    ) from None
            elif not ("index.lock" in said or "cannot lock ref" in said):
                raise
            elif waited > INDEX_RETRY_SECONDS:
                held = next(line for line in said.splitlines() if "index.lock" in line or "cannot lock ref" in line)
                raise IndexBusy(
                    f"another git command kept the git index or a ref locked for {waited:.0f} s"
                    f" ({held.removeprefix('fatal: ').strip()}): nothing was committed; retry later",
                    exc.stderr,
                ) from None
            time.sleep(0.05)


def settle(repo: Repo, dry_run: bool = False) -> list[str]:
    """A commit of the tool's killed while it held git's index lock, finished or let go now
    (`gitplumbed.settle`, under this worktree's commit lock): what was done, one line each (a dry
    run: what would be)."""
    if dry_run:
        said = "would finish or let go a commit of the tool's killed while it held git's index lock"
        return [said] if gitplumbed.held(repo) else []
    with _commit_lock(repo):
        return gitplumbed.settle(repo)


def unconcluded(repo: Repo) -> None:
    """Refuse, before the index is touched, a commit this worktree's own git operation stands in
    the way of. A merge, cherry-pick or revert in progress refuses every `git commit --only`, and
    a commit that stages its paths and then fails must not unstage them: that would undo the
    user's staged resolution (a file the merge added, left untracked; a conflict marked resolved
    with this branch's side). One stopped at a conflict is refused at once; a merge that is
    writing its own commit is waited for (MERGE_WAIT_SECONDS). A rebase stopped at a conflict is
    refused too (unmerged files refuse any commit). Only a state file stands: a stat or three,
    and one `ls-files -u` when one is there."""
    start = time.monotonic()
    while True:
        standing = next((name for key, name in PICKING if os.path.lexists(repo.git_dir / key)), None)
        rebasing = standing is None and any(os.path.isdir(repo.git_dir / d) for d in REBASING)
        if standing is None and not rebasing:
            return
        conflict = bool(run(repo.toplevel, "ls-files", "-u", check=False).strip())
        if rebasing and not conflict:
            return  # between two picks: a commit there is the user's to make
        if conflict or time.monotonic() - start > MERGE_WAIT_SECONDS:
            what = standing or "rebase"
            how = "`git rebase --continue`" if rebasing else "`git commit`"
            stop = "stopped at a conflict" if conflict else "is in progress"
            then = "resolve the conflict and conclude it" if conflict else "conclude it"
            raise MergeInProgress(
                f"a `git {what}` {stop} in {repo.toplevel}: {then} ({how}) or abort it"
                f" (`git {what} --abort`), then run this again (nothing was committed)"
            )
        time.sleep(0.05)


def _stage(repo: Repo, paths: list[str], force: list[str]) -> list[str]:
    """`git add -A` of `paths`; the paths staged (a task file removed before it was ever committed
    is no pathspec git knows: left out, and none left means nothing to commit)."""
    try:
        _retrying(repo, "add", "-A", *force, "--", *paths)
    except GitError as exc:
        if "pathspec" not in f"{exc.message}\n{exc.stderr}":
            raise
        paths = _known(repo, paths)
        if paths:
            _retrying(repo, "add", "-A", *force, "--", *paths)
    return paths


def commit_paths(repo: Repo, paths: list[str], message: str, ignored: bool = False, also: tuple[str, ...] = ()) -> None:
    """Stage exactly `paths` (additions and deletions) and commit only them.

    The user's other staged changes stay staged and out of the commit. Raises GitError
    (e.g. a failing pre-commit hook); the caller puts its files back. `ignored`: the paths may
    be ignored by .gitignore (the removal of tracked in-flight files, whose piles are ignored).
    `also`: pathspecs committed as the work tree has them without being staged first (the
    task's file in every pile: the other half of a move killed between staging and committing,
    which would otherwise stay staged while HEAD keeps a copy the work tree no longer has;
    `git commit --only` never adds an untracked file).
    """
    with _index_lock(repo):
        unconcluded(repo)
        storage.crash_point("git:looked")  # a user's merge may start from here on: it is not ours to lock
        force = ["--force"] if ignored else []
        made = [p for p in paths if os.path.lexists(repo.toplevel / p)]  # what this writer wrote: must be committed
        # at scale: nothing staged in the user's index before the commit, no refresh of it all
        plumbed = gitplumbed.commit(repo, paths, message, also, ignored, made=tuple(made))
        if plumbed or (not made and _removals_committed(repo, paths, message, also)):
            return
        wrote = {p: _stamp(repo, p) for p in made}  # (an lstat each: git's checkout writes a new file)
        paths = _stage(repo, paths, force)
        if not paths:
            return
        storage.crash_point("git:staged")
        try:
            try:
                _retrying(repo, "commit", "-q", "--no-edit", "-m", message, "--only", "--", *paths, *also)
            except GitError as exc:
                if "pathspec" not in f"{exc.message}\n{exc.stderr}":
                    raise
                # a removed path git knows in neither HEAD nor the index: without it, with `also`,
                # and then (`also` matching nothing either) without `also`
                paths = _resumed(repo, paths, made)
                _commit_known(repo, message, paths, also)
        except GitError as exc:
            gone = [p for p in made if not os.path.lexists(repo.toplevel / p)]
            if gone:  # removed by another git command since it was staged: never "nothing to commit"
                unstage(repo, paths, locked=True)
                raise Conflict(
                    f"another git command removed {gone[0]} between this command's staging and its commit"
                    " (a `git merge --abort` or `git reset`?): nothing was committed; run this again"
                ) from None
            put_back = [p for p, stamp in wrote.items() if _stamp(repo, p) != stamp]
            if put_back:  # a `git reset --merge` reverts a staged change in place: never "nothing to commit"
                unstage(repo, paths, locked=True)
                raise Conflict(
                    f"another git command put back {put_back[0]} between this command's staging and its commit"
                    " (a `git merge --abort` or `git reset --merge`?): nothing was committed; run this again"
                ) from None
            if discover_has_head(repo) and not status_codes(repo, *paths):
                # nothing to commit: HEAD holds exactly what the work tree has (a resumed move). The
                # work tree, not the index: a concurrent `git merge` may write back an index it read
                # before our `git add`, and the new file would be left untracked while we said done.
                return
            # git knows none of a file this writer staged: the index was written back over our staging
            lost = "pathspec" in f"{exc.message}\n{exc.stderr}" and any(not tracked(repo, p) for p in made)
            unstage(repo, paths, locked=True)
            if lost:
                raise Conflict(
                    "another git command wrote back the index between this command's staging and its commit"
                    " (a `git merge` running alongside?): nothing was committed; run this again"
                ) from None
            raise


def _stamp(repo: Repo, path: str) -> tuple[int, int, int] | None:
    """The file as this writer left it (inode, size, mtime): a file git wrote back since differs."""
    try:
        info = os.lstat(repo.toplevel / path)
    except OSError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


def _removals_committed(repo: Repo, paths: list[str], message: str, also: tuple[str, ...]) -> bool:
    """Only removals (a claim's todo/ copy): `git commit --only` takes them from the work tree, so
    nothing is staged first, one git process fewer. False, with nothing changed, when git refuses
    (a path it knows in neither HEAD nor the index; one staged but never committed): the caller
    then stages and commits the full way, which sorts those out."""
    storage.crash_point("git:staged")  # nothing is staged: a crash here leaves the removal in the work tree
    try:
        _retrying(repo, "commit", "-q", "--no-edit", "-m", message, "--only", "--", *paths, *also)
    except (IndexBusy, MergeInProgress):
        raise  # waited for already: the full way would wait as long again, and fail alike
    except GitError:
        return False
    return True


def _commit_known(repo: Repo, message: str, paths: list[str], also: tuple[str, ...]) -> None:
    attempts = [spec for spec in ([*paths, *also], paths) if spec]
    for n, spec in enumerate(attempts):
        try:
            _retrying(repo, "commit", "-q", "--no-edit", "-m", message, "--only", "--", *spec)
            return
        except GitError as exc:
            if "pathspec" not in f"{exc.message}\n{exc.stderr}" or n == len(attempts) - 1:
                raise


def _resumed(repo: Repo, paths: list[str], made: list[str]) -> list[str]:
    """`paths` less the removed ones git knows in neither HEAD nor the index: a file an earlier
    move staged and was killed before committing, removed again by this one (`git commit --only`
    refuses such a pathspec, and there is nothing to record about it). A path that exists stays:
    if git lost its staging (an index written back by a concurrent command), the commit fails. So
    does one in `made` (it existed when staged): another git command removed it since (a
    `git merge --abort` resets a staged new file away), and the writer must not call that done."""
    if not discover_has_head(repo):
        return paths
    known = set(tracked(repo, *paths))
    in_head = run(repo.toplevel, "ls-tree", "-r", "-z", "--name-only", END_OF_OPTIONS, "HEAD", "--", *paths)
    known |= {p for p in in_head.split("\0") if p}
    return [p for p in paths if p in known or p in made or os.path.lexists(repo.toplevel / p)]


def _known(repo: Repo, paths: list[str]) -> list[str]:
    """`paths` less those that neither exist nor are tracked (a task file removed before it was
    ever committed: git refuses such a pathspec, and there is nothing to record about it)."""
    missing = [p for p in paths if not os.path.lexists(repo.toplevel / p)]
    if not missing:
        return paths
    known = set(tracked(repo, *missing))
    return [p for p in paths if p not in missing or p in known]


def unstage(repo: Repo, paths: list[str], locked: bool = False) -> None:
    """Put the index entries of `paths` back as they are in HEAD (or drop them on an unborn branch)."""
    if not paths:
        return
    if not locked:
        with _index_lock(repo):
            return unstage(repo, paths, locked=True)
    if discover_has_head(repo):
        _retrying(repo, "reset", "-q", "HEAD", "--", *paths)
    else:
        _retrying(repo, "rm", "-q", "--cached", "--ignore-unmatch", "--", *paths)
