"""A verb's commit at scale through plumbing (`maildir_backlog/gitplumbed.py`, docs/design.md,
*A claim's commit at 100,000 tasks*, the bullet *A verb's commit at scale*): the same commit as
`git commit --only`, taken only when nothing else of `git commit`'s applies, the index's racy
entries kept racy, and a verb killed while it holds git's index lock settled by the next command. (A user's git command between any
two of its git processes: tests/test_claim_interleave.py; killed at each point, then the
janitor: tests/test_faults.py.)"""

from __future__ import annotations

import os
import threading
import time

import pytest
from conftest import copy_repo, git

from maildir_backlog import git as gitmod
from maildir_backlog import gitplumbed

SLUG = "x-plan"
TODO = f"backlog/todo/{SLUG}.md"
PLUMBED = {gitplumbed.FROM_VARIABLE: "0"}


def git_processes(monkeypatch) -> list[str]:
    """The subcommands of the git processes this process starts from now on."""
    seen: list[str] = []
    real_text, real_call = gitmod._text, gitmod.call

    def subcommand(args) -> str:  # past git's own options (`-c core.safecrlf=false`)
        i = 0
        while i < len(args) - 1 and args[i].startswith("-"):
            i += 2 if args[i] == "-c" else 1
        return args[i]

    def text(cwd, args, *rest, **kw):
        seen.append(subcommand(args))
        return real_text(cwd, args, *rest, **kw)

    def call(cwd, *args, **kw):
        seen.append(subcommand(args))
        return real_call(cwd, *args, **kw)

    monkeypatch.setattr(gitmod, "_text", text)
    monkeypatch.setattr(gitmod, "call", call)
    return seen


@pytest.fixture
def claimable(shared, monkeypatch):
    shared.ok("add", "x")
    monkeypatch.setenv(gitplumbed.FROM_VARIABLE, "0")
    return shared


def test_the_plumbed_commit_is_the_commit_git_commit_makes(claimable, tmp_path):
    repo = claimable
    other = tmp_path / "other"
    repo.git("clone", "-q", str(repo.path), str(other))
    base = repo.git("rev-parse", "HEAD").strip()
    with pytest.MonkeyPatch.context() as patch:
        seen = git_processes(patch)
        repo.ok("take", SLUG)
    assert "commit-tree" in seen and "commit" not in seen, seen
    # the same claim committed by `git commit --only` in a clone: the same tree, message and parent
    os.unlink(other / TODO)
    git(other, "commit", "-q", "-m", repo.head_message(), "--only", "--", TODO)
    assert repo.git("rev-parse", "HEAD^{tree}") == git(other, "rev-parse", "HEAD^{tree}")
    assert repo.git("log", "-1", "--format=%B%n%P") == git(other, "log", "-1", "--format=%B%n%P")
    assert repo.git("rev-parse", "HEAD~1").strip() == base
    assert repo.git("reflog", "-1", "--format=%gs").strip() == f"commit: {repo.head_message()}"
    assert repo.git("status", "--porcelain", "--untracked-files=no") == ""
    assert not (repo.path / ".git" / "index.lock").exists()
    assert os.listdir(repo.path / ".git" / gitplumbed.WORK) == []


def test_below_the_threshold_git_commit_commits(shared, monkeypatch):
    monkeypatch.delenv(gitplumbed.FROM_VARIABLE, raising=False)
    shared.ok("add", "x")
    with pytest.MonkeyPatch.context() as patch:
        seen = git_processes(patch)
        shared.ok("take", SLUG)
    assert "commit" in seen and "commit-tree" not in seen, seen


def _staged(repo):
    (repo.path / "user.txt").write_text("mine\n")
    repo.git("add", "user.txt")


def _hook(repo):
    hook = repo.path / ".git" / "hooks" / "pre-commit"
    hook.write_text('#!/bin/sh\necho ran >> "$(git rev-parse --git-dir)/hook-ran"\n')
    hook.chmod(0o755)


def _signing_named(repo):
    repo.git("config", "commit.gpgSign", "false")  # set at all: `git commit` decides


def _hook_by_config(repo):
    repo.git("config", "hook.lint.command", "true")  # (git's hooks by config, in the versions that have them)


@pytest.mark.parametrize("why", [_staged, _hook, _signing_named, _hook_by_config], ids=lambda f: f.__name__.strip("_"))
def test_anything_else_of_git_commits_goes_the_full_way(claimable, why):
    """The user's staged work stays staged and out of the claim's commit; a hook runs."""
    repo = claimable
    why(repo)
    with pytest.MonkeyPatch.context() as patch:
        seen = git_processes(patch)
        repo.ok("take", SLUG)
    assert "commit" in seen and "commit-tree" not in seen, seen
    assert repo.git("show", "--name-only", "--format=", "HEAD").split() == [TODO]
    if why is _staged:
        assert repo.git("status", "--porcelain", "--untracked-files=no") == "A  user.txt\n"
    if why is _hook:
        assert (repo.path / ".git" / "hook-ran").read_text() == "ran\n"


def test_a_git_command_holding_the_index_lock_is_waited_for(claimable):
    """The lock is git's: the plumbed way never takes it from another command (nor removes it);
    the full way waits until that command is done."""
    repo = claimable
    lock = repo.path / ".git" / "index.lock"
    lock.write_bytes(b"")
    released = threading.Timer(0.5, lock.unlink)
    released.start()
    try:
        repo.ok("take", SLUG)
    finally:
        released.join()
    assert repo.git("show", "--name-only", "--format=", "HEAD").split() == [TODO]
    assert repo.git("status", "--porcelain", "--untracked-files=no") == ""


def test_a_racily_clean_entry_stays_racy(claimable):
    """The index copy keeps the index's modification time: git judges an entry "racily clean" by
    it. A tracked file changed within the index's own time tick, its stat as recorded, is still
    seen as changed after the claim (with the copy's own time it was taken for clean for good)."""
    repo = claimable
    repo.git("config", "core.trustCtime", "false")  # (else the ctime, which no one can set back, tells)
    path = repo.path / "notes.txt"
    path.write_text("before\n")
    repo.git("add", "notes.txt")
    repo.git("commit", "-q", "-m", "user: notes")
    past = time.time_ns() - 10**10
    os.utime(path, ns=(past, past))
    repo.git("update-index", "--refresh")  # its stat recorded, its size too: not racy yet
    os.utime(repo.path / ".git" / "index", ns=(past, past))  # as if the index was written in the file's tick
    path.write_text("after!\n")  # the same size
    os.utime(path, ns=(past, past))  # and the same time: only its bytes tell
    repo.ok("take", SLUG)
    assert repo.git("status", "--porcelain", "--untracked-files=no") == " M notes.txt\n"


@pytest.mark.parametrize("in_kernel", [True, False])
def test_the_index_copy_is_the_index_byte_for_byte_and_keeps_its_time(tmp_path, monkeypatch, in_kernel):
    """The copy is made in the kernel where the system can (`copy_file_range`), else read and
    written (a system without it, as macOS): the same bytes either way, past the 1 MiB step
    of the second, and the index's own modification time."""
    if not in_kernel:
        monkeypatch.delattr(os, "copy_file_range", raising=False)
    index, copy = tmp_path / "index", tmp_path / "copy"
    data = os.urandom(3 * (1 << 20) + 12345)
    index.write_bytes(data)
    past = time.time_ns() - 10**10
    os.utime(index, ns=(past, past))
    stamp = gitplumbed._copied(index, copy)
    assert copy.read_bytes() == data and os.lstat(copy).st_mtime_ns == past
    assert stamp == gitplumbed._stamp(index)


@pytest.mark.parametrize("point", ["git:plumbed-locked", "git:plumbed-moved"])
def test_a_claim_killed_holding_the_lock_is_settled_by_the_next_command(claimable, point):
    """Killed before HEAD moved: the lock is let go (the removal left in the work tree is the
    janitor's, as after a kill before any commit). Killed after: the swap is finished. Either way
    the next claim commits, the user's git works again, and the task is never re-added."""
    repo = claimable
    repo.ok("add", "y")
    lock = repo.path / ".git" / "index.lock"
    assert repo.run("take", SLUG, env={**PLUMBED, "BACKLOG_CRASH_AT": point}).returncode == -9
    assert lock.exists()  # every git command of the user's that writes the index fails meanwhile
    dry = repo.ok("--json", "maintain", "--dry-run")
    assert "killed while it held git's index lock" in dry and lock.exists()
    repo.ok("take", "y-plan")
    assert not lock.exists()
    assert os.listdir(repo.path / ".git" / gitplumbed.WORK) == []
    assert repo.git("show", "--name-only", "--format=", "HEAD").split() == ["backlog/todo/y-plan.md"]
    assert (TODO in repo.git("log", "--format=", "--name-only", "-2").split()) == (point == "git:plumbed-moved")
    repo.ok("maintain")
    assert repo.git("status", "--porcelain", "--untracked-files=no") == ""
    repo.git("commit", "-q", "--allow-empty", "-m", "user: later")
    assert repo.git("ls-tree", "--name-only", "HEAD", "--", TODO) == ""


def test_the_janitor_settles_it_and_leaves_gits_own_lock_alone(claimable):
    repo = claimable
    lock = repo.path / ".git" / "index.lock"
    assert repo.run("take", SLUG, env={**PLUMBED, "BACKLOG_CRASH_AT": "git:plumbed-moved"}).returncode == -9
    said = repo.ok("maintain")
    assert "was killed before its index was written: written" in said, said
    assert not lock.exists() and repo.git("status", "--porcelain", "--untracked-files=no") == ""
    lock.write_bytes(b"")  # a git command's own: never touched
    repo.ok("maintain")
    assert lock.exists()


def test_in_a_linked_worktree_with_gits_settings_for_many_files(claimable):
    """What `setup` turns on at 10,000 entries (a split index, index version 4, the untracked
    cache), in a linked worktree, whose index and lock are in its own git dir."""
    repo = claimable
    repo.git("config", "feature.manyFiles", "true")
    repo.git("config", "core.splitIndex", "true")
    wt = repo.worktree("b1")
    wt.git("update-index", "--split-index", "--index-version", "4")
    with pytest.MonkeyPatch.context() as patch:
        seen = git_processes(patch)
        wt.ok("take", SLUG)
    assert "commit-tree" in seen and "commit" not in seen, seen
    git_dir = repo.path / ".git" / "worktrees" / "b1"
    assert wt.git("show", "--name-only", "--format=", "HEAD").split() == [TODO]
    assert wt.git("status", "--porcelain", "--untracked-files=no") == ""
    assert not (git_dir / "index.lock").exists() and os.listdir(git_dir / gitplumbed.WORK) == []
    assert repo.git("rev-parse", "main") != wt.git("rev-parse", "HEAD")  # main's branch untouched
    wt.git("fsck", "--no-progress")


def test_a_split_index_is_counted_whole(shared):
    """`setup` turns on git's split index for many files: the index file then holds a handful of
    entries and the shared part the rest, and the threshold must count them all."""
    past = time.time() - 10
    for n in range(30):
        (shared.path / f"f{n}.txt").write_text(f"{n}\n")
        os.utime(shared.path / f"f{n}.txt", (past, past))  # (racily clean entries stay in the index file)
    shared.git("add", ".")
    shared.git("commit", "-q", "-m", "user: files")
    before = gitmod.index_entries(shared.context().repo)
    shared.git("update-index", "--split-index")
    repo = shared.context().repo
    with open(repo.git_dir / "index", "rb") as f:
        assert int.from_bytes(f.read(12)[8:12], "big") < 30  # the index file's own count
    assert gitmod.index_entries(repo) == before >= 30


def test_a_file_in_the_way_of_its_copies_sends_it_the_full_way(claimable):
    repo = claimable
    (repo.path / ".git" / gitplumbed.WORK).write_text("not a directory\n")
    with pytest.MonkeyPatch.context() as patch:
        seen = git_processes(patch)
        repo.ok("take", SLUG)
    assert "commit" in seen and "commit-tree" not in seen, seen
    assert repo.git("show", "--name-only", "--format=", "HEAD").split() == [TODO]
    repo.ok("maintain")  # (its settling reads no copies there: nothing to say)


@pytest.mark.parametrize("backend", ["maildir-shared", "maildir-git"])
def test_verbs_that_write_a_tracked_file_commit_the_same_way(repo_templates, tmp_path, monkeypatch, backend):
    """A completion and an `add --here` write a new tracked file: staged into the copy only, so
    the user's index never holds it staged before the commit (the window in which a user's plain
    `git commit` took the move, tests/test_claim_interleave.py's OPEN, is closed this way)."""
    repo = copy_repo(repo_templates(backend, ("add", "x"), ("take", SLUG)), tmp_path / "r")
    monkeypatch.setenv(gitplumbed.FROM_VARIABLE, "0")
    moves = {
        ("advance", SLUG): {f"backlog/done/{SLUG}.md"}
        | ({f"backlog/doing/{SLUG}.md"} if backend == "maildir-git" else set()),
        ("add", "z", "--here"): {"backlog/todo/z-plan.md"},
    }
    for call, paths in moves.items():
        with pytest.MonkeyPatch.context() as patch:
            seen = git_processes(patch)
            repo.ok(*call)
        assert "commit-tree" in seen and "commit" not in seen, seen
        assert set(repo.git("show", "--name-only", "--no-renames", "--format=", "HEAD").split()) == paths
        assert repo.git("status", "--porcelain", "--untracked-files=no") == ""


def test_an_ignored_path_is_refused_as_the_full_way_refuses_it(shared, monkeypatch):
    """Staged into the copy as the full way stages (`git add -A`, ignore rules and all): a user's
    .gitignore over todo/ gets the same answer either way."""
    (shared.path / ".gitignore").write_text((shared.path / ".gitignore").read_text() + "backlog/todo/*-plan.md\n")
    shared.git("commit", "-q", "-am", "user: ignore new plans")
    answers = []
    for name, threshold in (("p", "0"), ("q", "999999999")):
        monkeypatch.setenv(gitplumbed.FROM_VARIABLE, threshold)
        done = shared.run("add", name, "--here")
        answers.append((done.returncode, done.stderr.replace(f"{name}-plan", "NAME")))
    assert answers[0] == answers[1] and answers[0][0] != 0, answers
    assert shared.git("status", "--porcelain", "--untracked-files=no") == ""


def test_the_added_times_skip_git_log_over_the_tools_own_claims(claimable):
    """A plumbed commit is noted with its parent and the paths it left present
    (`Layout.own_commits`): a claim after a claim reads no `git log` for the added times (at
    100,000 tasks, ~50 ms diffing todo/'s tree for a commit that only removed a file), and the
    answer is the one read from git's history. A commit that left a todo/ path present (an
    `add`) is read from the history as before."""
    import json

    from conftest import set_aside

    from maildir_backlog import intake
    from maildir_backlog.context import open_context
    from maildir_backlog.intake import added_times
    from maildir_backlog.layout import Layout

    repo = claimable
    for name in ("y", "z"):
        repo.ok("add", name)
    repo.ok("ready")  # the times read at this HEAD
    repo.ok("take", SLUG)
    with pytest.MonkeyPatch.context() as patch:
        seen = git_processes(patch)
        repo.ok("take")
    assert "commit-tree" in seen and "log" not in seen, seen
    ctx = open_context(repo.path)
    cache = Layout.of(ctx.repo).added_cache
    first = cache.read_bytes()
    for n in range(intake.RESTATED_AFTER + 1):  # the cache is written under the new tips now and then
        repo.ok("add", f"r{n}")
    repo.ok("ready")
    for n in range(intake.RESTATED_AFTER):
        repo.ok("take", f"r{n}-plan")
        repo.ok("ready")
    assert (
        json.loads(cache.read_bytes())["tips"] == [repo.git("rev-parse", "HEAD").strip()] != json.loads(first)["tips"]
    )
    cached = added_times(ctx.repo, ctx.project)
    with set_aside(Layout.of(ctx.repo).added_cache):
        assert added_times(ctx.repo, ctx.project) == cached
    repo.ok("add", "w")
    with pytest.MonkeyPatch.context() as patch:
        seen = git_processes(patch)
        repo.ok("take")
    assert "log" in seen, seen
    assert "w-plan" in added_times(ctx.repo, ctx.project)


def test_a_note_names_every_path_the_commit_may_have_added(tmp_path):
    """A path the work tree held when it was staged (`made`) is named in the note even when it is
    gone by the time the note is written (a claim from another worktree took the new task away):
    the added times then read that commit from git, never skip an addition."""
    from maildir_backlog.git import discover
    from maildir_backlog.intake import _own_since
    from maildir_backlog.layout import Layout

    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "commit", "-q", "--allow-empty", "-m", "init")
    repo = discover(root)
    added, taken = "backlog/todo/new-plan.md", "backlog/todo/old-plan.md"
    gitplumbed._note(repo, "a" * 40, "b" * 40, [added], made=(added,))  # written, then gone
    gitplumbed._note(repo, "b" * 40, "c" * 40, [taken], made=())  # a removal
    notes = Layout.of(repo).own_commits
    assert notes.read_text().splitlines() == [f"{'a' * 40}\t{'b' * 40}\t{added}", f"{'b' * 40}\t{'c' * 40}"]
    todo = "backlog/todo/"
    assert _own_since(notes, ["b" * 40], ["c" * 40], todo) == 1  # a claim after the cached tip: no log
    assert _own_since(notes, ["a" * 40], ["c" * 40], todo) is None  # through the addition: the log
    assert _own_since(notes, ["a" * 40], ["a" * 40, "c" * 40], todo) is None  # one tip reaches no covered one
    for n in range(gitplumbed.NOTED_BYTES // 80):  # past the bound: the last quarter kept, whole lines
        gitplumbed._note(repo, f"{n:040x}", f"{n + 1:040x}", [], made=())
    lines = notes.read_text().splitlines()
    assert notes.stat().st_size <= gitplumbed.NOTED_BYTES and all(len(line) == 81 for line in lines)
    last = gitplumbed.NOTED_BYTES // 80 - 1
    assert lines[-1] == f"{last:040x}\t{last + 1:040x}"
    assert _own_since(notes, [f"{last - 5:040x}"], [f"{last + 1:040x}"], todo) == 6
