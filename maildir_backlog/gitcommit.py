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

from . import gitwrite, storage
from .argv import END_OF_OPTIONS
from .errors import Conflict, Unavailable
from .git import GitError, Repo, discover_has_head, run, status_codes, tracked
from .layout import BACKLOG, Layout, every_pile_pathspec, parse_task_rel

INDEX_RETRY_SECONDS = 20.0
MERGE_WAIT_SECONDS = 2.0
# what git says when a commit meets a merge in progress (MERGE_HEAD): a conflict the user has not
# concluded, or the moment `git merge` takes to write its own merge commit
MERGING = ("partial commit during a merge", "MERGE_HEAD exists", "not concluded your merge", "you have unmerged")


class IndexBusy(GitError, Unavailable):
    """The git index or a ref stayed locked by another git command past INDEX_RETRY_SECONDS:
    nothing was committed; retry later (exit 4)."""

    code = Unavailable.code
    kind = Unavailable.kind


class MergeInProgress(GitError):
    """A user's `git merge` stopped at a conflict, or did not commit within MERGE_WAIT_SECONDS:
    nothing was committed; the user concludes or aborts it (exit 1)."""


def _index_lock(repo: Repo) -> contextlib.AbstractContextManager[None]:
    return storage.file_lock(Layout.of(repo).index_lock, timeout=120.0, what="the git index")


def _retrying(repo: Repo, *args: str) -> str:
    """Run a git command that writes the index or a ref, retrying while another git command
    holds them; a user's merge in progress is waited for briefly (the moment `git merge` takes to
    write its own commit), then refused in one line; at once when it stopped at a conflict."""
    start = time.monotonic()
    merging_seen = False
    while True:
        try:
            return gitwrite.run(repo.toplevel, *args)
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
        force = ["--force"] if ignored else []
        made = [p for p in paths if os.path.lexists(repo.toplevel / p)]  # what this writer wrote: must be committed
        if not made and _removals_committed(repo, paths, message, also):
            return
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


def _removals_committed(repo: Repo, paths: list[str], message: str, also: tuple[str, ...]) -> bool:
    """Only removals (a claim's todo/ copy): `git commit --only` takes them from the work tree, so
    nothing is staged first, one git process fewer. False, with nothing changed, when git refuses
    (a path it knows in neither HEAD nor the index; one staged but never committed): the caller
    then stages and commits the full way, which sorts those out."""
    storage.crash_point("git:staged")  # nothing is staged: a crash here leaves the removal in the work tree
    if _plumbed_removal(repo, paths, message, also):
        return True
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


# -- a claim's commit without `git commit` (docs/design.md, *A claim's commit at 100,000 tasks*) --
# A claim commits one removal (its todo/ copy). `git commit --only` refreshes the whole index
# first (a `lstat` per tracked file: 0.5 s at 100,000 tasks) and builds a temporary index. The same
# commit is made here from the index as it is: the entry removed (`update-index`), the tree written
# from the index's cached trees (`write-tree`), the commit made on HEAD (`commit-tree`), and HEAD
# moved only if it is still the commit read (`update-ref` with the old value). Taken only when
# nothing `git commit` would do besides applies: no commit hook (an executable `pre-commit`,
# `prepare-commit-msg`, `commit-msg` or `post-commit`), no `core.hooksPath` nor `commit.gpgSign`
# set at all, nothing else staged (the tree would hold it: `--only` leaves it out), no other copy
# of the task in the work tree nor changed there (`also`), a message git would not clean up, a
# born branch, no merge, cherry-pick, revert or rebase in progress. Every check comes before the
# ref moves; a refusal after the entry was removed leaves the removal staged, which the full way
# then commits (as after a crash at `git:staged`).

COMMIT_HOOKS = ("pre-commit", "prepare-commit-msg", "commit-msg", "post-commit")
OPERATIONS = ("MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "rebase-merge", "rebase-apply", "sequencer")
SETTINGS = r"^(core\.hookspath|commit\.gpgsign)$"  # either set at all: `git commit` decides


def _plumbed_removal(repo: Repo, paths: list[str], message: str, also: tuple[str, ...]) -> bool:
    """Commit the removal of the one path in `paths` (gone from the work tree) the cheap way;
    False when it did not (nothing committed): the caller commits the full way."""
    found = parse_task_rel(paths[0]) if len(paths) == 1 else None
    if found is None or not repo.has_commits or message != message.strip() or "\n" in message:
        return False
    slug, path = found[1], paths[0]
    if also not in ((), (every_pile_pathspec(slug),)) or _busy(repo) or _hooked(repo) or _copies(repo, slug):
        return False
    try:
        head = run(repo.toplevel, "rev-parse", "-q", "--verify", END_OF_OPTIONS, "HEAD^{commit}").strip()
        changed = run(repo.toplevel, "diff-files", "--name-only", "-z", "--", *also) if also else ""
        if {p for p in changed.split("\0") if p} - {path}:
            return False  # a tracked copy elsewhere changed in the work tree: `--only` would commit it
        # (the index locked by another git command: the full way waits for it)
        gitwrite.run(repo.toplevel, "update-index", "--force-remove", "--", path)
        tree = gitwrite.run(repo.toplevel, "write-tree").strip()
        changed = run(repo.toplevel, "diff-tree", "-r", "--no-renames", "--name-only", "-z", head, tree)
        if [p for p in changed.split("\0") if p] != [path]:
            return False  # something else is staged (or nothing changed): `--only` sorts it out
        commit = gitwrite.commit_tree(repo.toplevel, tree, [head], [message])
        code, _out, _err = gitwrite.update_ref(repo.toplevel, "HEAD", commit, head, f"commit: {message}")
    except GitError:
        return False
    return code == 0


def _busy(repo: Repo) -> bool:
    """Is a merge, cherry-pick, revert or rebase in progress here (`git commit` has its rules then)?"""
    return any(os.path.lexists(repo.git_dir / name) for name in OPERATIONS)


def _hooked(repo: Repo) -> bool:
    """Does `git commit` here run a hook or sign (or may it: a hooks path of its own)?"""
    if run(repo.toplevel, "config", "-z", "--get-regexp", SETTINGS, check=False):
        return True
    hooks = repo.common_dir / "hooks"
    return any(os.access(hooks / name, os.X_OK) and (hooks / name).is_file() for name in COMMIT_HOOKS)


def _copies(repo: Repo, slug: str) -> bool:
    """Is `<slug>.md` in any directory of the work tree's backlog/ (another pile's copy)?"""
    try:
        with os.scandir(repo.toplevel / BACKLOG) as entries:
            dirs = [e.path for e in entries if e.is_dir(follow_symlinks=False)]
    except OSError:
        return True
    return any(os.path.lexists(os.path.join(d, f"{slug}.md")) for d in dirs)
