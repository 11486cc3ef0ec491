"""git.py and gitcommit.py against real repositories: discovery, worktrees, branches, path-limited commits."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import git

from maildir_backlog import git as g
from maildir_backlog import gitcommit, gitwrite
from maildir_backlog.errors import BacklogError


def staged(path: Path) -> list[str]:
    return git(path, "diff", "--cached", "--name-only").split()


def head_files(path: Path) -> list[str]:
    return git(path, "show", "--name-only", "--format=", "HEAD").split()


def failing_hook(path: Path) -> None:
    hook = Path(git(path, "rev-parse", "--path-format=absolute", "--git-common-dir").strip()) / "hooks/pre-commit"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text("#!/bin/sh\necho 'hook refuses' >&2\nexit 1\n")
    hook.chmod(0o755)


# -- discover ------------------------------------------------------------------------------
def test_discover_main_worktree_and_subdirectory(repo):
    (repo / "a/b").mkdir(parents=True)
    for where in (repo.path, repo / "a/b"):
        r = g.discover(where)
        assert r.toplevel == repo.path
        assert r.common_dir == repo / ".git" and r.common_dir.is_absolute()
        assert r.git_dir == repo / ".git"
        assert (r.branch, r.has_commits) == ("main", True)


def test_discover_linked_worktree(repo):
    wt = repo.worktree("wt")
    (wt / "sub").mkdir()
    for where in (wt.path, wt / "sub"):
        r = g.discover(where)
        assert r.toplevel == wt.path
        assert r.common_dir == g.discover(repo.path).common_dir == repo / ".git"
        assert r.git_dir == repo / ".git/worktrees/wt"
        assert r.branch == "wt"


def test_discover_detached_and_unborn(repo, tmp_path):
    git(repo.path, "checkout", "-q", "--detach")
    assert g.discover(repo.path).branch is None
    unborn = tmp_path / "unborn"
    unborn.mkdir()
    git(unborn, "init", "-q", "-b", "trunk")
    r = g.discover(unborn)
    assert (r.toplevel, r.branch, r.has_commits) == (unborn, "trunk", False)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: p, "not inside a git repository"),
        (lambda p: (git(p, "init", "-q", "--bare", "bare.git"), p / "bare.git")[1], "bare repository"),
        (lambda p: (git(p, "init", "-q", "r"), p / "r/.git")[1], "not inside a work tree"),
        (lambda p: p / "missing", "no such directory"),
    ],
    ids=["outside", "bare", "inside-git-dir", "missing-dir"],
)
def test_discover_refusals(tmp_path, make, message):
    where = tmp_path / "x"
    where.mkdir()
    with pytest.raises(BacklogError, match=message) as info:
        g.discover(make(where))
    assert info.value.code == 1


# -- worktrees and branches ----------------------------------------------------------------
def test_worktrees(repo):
    repo.worktree("feat")
    git(repo.path, "worktree", "add", "-q", "--detach", str(repo.path.parent / "det"))
    found = g.worktrees(g.discover(repo.path))
    assert found[0] == (repo.path, "main")  # the main worktree comes first
    assert sorted(found[1:]) == [(repo.path.parent / "det", None), (repo.path.parent / "feat", "feat")]


def test_branches_local_and_remote_tracking(repo, tmp_path):
    git(repo.path, "branch", "feat/local")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo.path), str(clone))
    git(clone, "update-ref", "refs/remotes/origin/feat/remote-only", "HEAD")
    names = g.branches(g.discover(clone))
    assert {
        "main",
        "origin/main",
        "origin/feat/local",
        "feat/local",
        "origin/feat/remote-only",
        "feat/remote-only",
    } <= names
    assert "HEAD" not in names and "origin/HEAD" not in names
    assert g.branches(g.discover(repo.path)) == {"main", "feat/local"}


# -- commit_paths --------------------------------------------------------------------------
def commit_paths(*args, **kwargs) -> None:
    """The protocol's own commit primitive, tested beneath `change.run` (whose span allows git writes)."""
    with gitwrite.protocol():
        gitcommit.commit_paths(*args, **kwargs)


def test_commit_paths_commits_only_its_paths(repo):
    (repo / "user.txt").write_text("mine\n")
    (repo / "README.md").write_text("edited and staged\n")
    git(repo.path, "add", "user.txt", "README.md")
    (repo / "backlog").mkdir()
    (repo / "backlog/t.md").write_text("# t\n")
    commit_paths(g.discover(repo.path), ["backlog/t.md"], "add(t)")
    assert repo.head_message() == "add(t)"
    assert head_files(repo.path) == ["backlog/t.md"]
    assert sorted(staged(repo.path)) == ["README.md", "user.txt"]
    assert git(repo.path, "show", ":README.md") == "edited and staged\n"


def test_commit_paths_with_a_deletion(repo):
    (repo / "old.md").write_text("old\n")
    (repo / "new.md").write_text("new\n")
    git(repo.path, "add", "old.md")
    git(repo.path, "commit", "-q", "-m", "old")
    (repo / "user.txt").write_text("mine\n")
    git(repo.path, "add", "user.txt")
    os.unlink(repo / "old.md")
    commit_paths(g.discover(repo.path), ["new.md", "old.md"], "move")
    assert sorted(git(repo.path, "show", "--name-status", "--format=", "HEAD").splitlines()) == [
        "A\tnew.md",
        "D\told.md",
    ]
    assert staged(repo.path) == ["user.txt"]
    assert git(repo.path, "status", "--porcelain") == "A  user.txt\n"


def test_commit_paths_on_an_unborn_branch(tmp_path):
    path = tmp_path / "unborn"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "t.md").write_text("t\n")
    (path / "user.txt").write_text("u\n")
    git(path, "add", "user.txt")
    commit_paths(g.discover(path), ["t.md"], "first")
    assert head_files(path) == ["t.md"] and staged(path) == ["user.txt"]


def test_failing_hook_raises_and_restores_the_index(repo):
    (repo / "tracked.md").write_text("v1\n")
    git(repo.path, "add", "tracked.md")
    git(repo.path, "commit", "-q", "-m", "v1")
    (repo / "user.txt").write_text("mine\n")
    git(repo.path, "add", "user.txt")
    (repo / "tracked.md").write_text("v2\n")
    (repo / "new.md").write_text("new\n")
    head = git(repo.path, "rev-parse", "HEAD")
    failing_hook(repo.path)
    with pytest.raises(g.GitError) as info:
        commit_paths(g.discover(repo.path), ["tracked.md", "new.md"], "nope")
    assert isinstance(info.value, BacklogError) and "\n" not in info.value.message
    assert git(repo.path, "rev-parse", "HEAD") == head
    assert git(repo.path, "show", ":tracked.md") == "v1\n"  # index entry back as in HEAD
    assert git(repo.path, "ls-files", "new.md") == ""  # not in HEAD: not in the index either
    assert staged(repo.path) == ["user.txt"]  # the user's staged work is untouched
    assert (repo / "tracked.md").read_text() == "v2\n"  # the worktree is the caller's business


# -- through the command (SPEC §7.6) -------------------------------------------------------
def test_add_leaves_user_staged_work_staged(anybk):
    (anybk / "user.txt").write_text("mine\n")
    (anybk / "README.md").write_text("edited\n")
    git(anybk.path, "add", "user.txt", "README.md")
    anybk.ok("add", "x")
    assert head_files(anybk.path) == ["backlog/todo/x-plan.md"]
    stat = git(anybk.path, "show", "--stat", "--format=", "HEAD")
    assert "backlog/todo/x-plan.md" in stat and "user.txt" not in stat and "README.md" not in stat
    assert sorted(staged(anybk.path)) == ["README.md", "user.txt"]


def test_add_with_failing_hook_leaves_no_trace(anybk):
    (anybk / "user.txt").write_text("mine\n")
    git(anybk.path, "add", "user.txt")
    head = git(anybk.path, "rev-parse", "HEAD")
    failing_hook(anybk.path)
    proc = anybk.run("add", "x")
    assert proc.returncode == 1 and "hook refuses" in proc.stderr
    assert not (anybk / "backlog/todo/x-plan.md").exists()
    assert git(anybk.path, "rev-parse", "HEAD") == head
    assert git(anybk.path, "status", "--porcelain") == "A  user.txt\n"


def test_ignored_pile_is_a_clear_refusal(gitbk):
    (gitbk / ".git/info/exclude").write_text("backlog/todo/\n")
    head = git(gitbk.path, "rev-parse", "HEAD")
    proc = gitbk.run("add", "x")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "ignored" in proc.stderr and "hint:" not in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert not (gitbk / "backlog/todo/x-plan.md").exists()
    assert git(gitbk.path, "rev-parse", "HEAD") == head


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to hand the repository to another user")
def test_dubious_ownership_reports_gits_fatal_line(repo):
    os.chown(repo / ".git", 65534, 65534)
    with pytest.raises(g.GitError, match="dubious ownership"):
        g.discover(repo.path)


def test_a_sparse_checkout_without_the_backlog_is_named(shared):
    from conftest import git as run_git

    shared.ok("add", "x")
    run_git(shared.path, "sparse-checkout", "set", "--no-cone", "/*", "!/backlog/todo/")
    proc = shared.run("add", "y")
    assert proc.returncode == 1 and "outside this worktree's sparse-checkout" in proc.stderr
    assert "git sparse-checkout add backlog" in proc.stderr


def test_a_variable_removed_since_import_never_reaches_git(repo, tmp_path):
    """plumbum runs a command with its import-time copy of the environment updated by the one
    passed: a variable removed from os.environ since (GIT_DIR, an identity, a config) must not
    come back for git. A stale GIT_DIR stands in for it here (the fixtures removed the real one)."""
    from plumbum import local

    assert "GIT_DIR" not in os.environ
    saved = dict(local.env.items())
    try:
        local.env["GIT_DIR"] = str(tmp_path / "elsewhere")  # in plumbum's copy only: as if set at import
        assert g.discover(repo.path).toplevel == repo.path.resolve()
    finally:
        local.env.clear()
        local.env.update(saved)


# -- how git is started (spawn.py) ---------------------------------------------------------------
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="lists a child's descriptors through /proc")
def test_git_inherits_no_descriptor_but_its_three_streams(repo):
    """`spawn.exchange` gives git its three pipes and nothing else: not one of this process's own
    (close-on-exec), nor one it was given inheritable (closed in the child, as `subprocess` closes
    all): a detached git left running must not hold a caller's pipe open."""
    from maildir_backlog import spawn

    given_r, given_w = os.pipe()
    os.set_inheritable(given_w, True)
    try:
        args = ["-c", "alias.fds=!ls /proc/$$/fd", "fds"]  # (a test's own alias: the tool never passes one)
        code, out, err = spawn.exchange(repo.path, args, dict(os.environ))
    finally:
        os.close(given_r)
        os.close(given_w)
    assert code == 0, err
    held = {int(name) for name in out.decode().split()}
    assert given_w not in held
    assert held <= {0, 1, 2, 255}, held  # (255: the shell's own copy of its script's descriptor, if any)


def test_git_started_where_its_directory_is_missing_raises_as_subprocess_did(tmp_path):
    from maildir_backlog import spawn

    with pytest.raises(FileNotFoundError):
        spawn.exchange(tmp_path / "gone", ["--version"], dict(os.environ))
