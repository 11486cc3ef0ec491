"""`backlog setup` (SPEC §5) and the shared layout across worktrees (SPEC §4)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import git


def tree(path: Path) -> dict[str, object]:
    """Every path under `path` (outside .git) with its bytes or link target."""
    found: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in dirnames + filenames:
            full = Path(dirpath, name)
            rel = full.relative_to(path).as_posix()
            if full.is_symlink():
                found[rel] = ("link", os.readlink(full))
            elif full.is_dir():
                found[rel] = "dir"
            else:
                found[rel] = full.read_bytes()
    return found


def state(repo, locks: bool = True) -> tuple:
    """Worktree, HEAD, index and shared root; `locks=False` ignores per-task lock files
    (bookkeeping a refused verb on a *valid* slug may leave behind)."""
    shared = repo / ".git/backlog"
    return (
        tree(repo.path),
        git(repo.path, "rev-parse", "HEAD"),
        git(repo.path, "ls-files", "--stage"),
        sorted(
            (str(p), p.read_bytes() if p.is_file() else None) for p in shared.rglob("*") if locks or p.suffix != ".lock"
        )
        if shared.exists()
        else None,
    )


def failing_hook(repo) -> None:
    hook = repo / ".git/hooks/pre-commit"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text("#!/bin/sh\necho 'hook refuses' >&2\nexit 1\n")
    hook.chmod(0o755)


# -- the shared layout across worktrees ----------------------------------------------------
def test_shared_layout_in_main_and_linked_worktree(repo):
    repo.ok("setup", "--backend=maildir-shared")
    wt = repo.worktree("feature")
    # `git worktree add` checks out tracked files only; the post-checkout hook that setup
    # installed makes the gitignored symlink at once
    assert os.path.islink(wt / "backlog/doing")
    os.unlink(wt / "backlog/doing")  # without it (a hook removed), the first verb's self-heal creates it
    proc = wt.run("status")
    assert proc.returncode == 0 and "symlink missing" in proc.stderr
    for w in (repo, wt):
        assert os.readlink(w / "backlog/doing") == str(repo / ".git/backlog/doing")
        assert os.listdir(w / "backlog/doing") == []  # `ls backlog/doing/` works
        assert git(w.path, "status", "--porcelain", "--untracked-files=all") == ""
    assert os.path.realpath(repo / "backlog/doing") == os.path.realpath(wt / "backlog/doing")
    (repo / "backlog/doing/seen.md").write_text("# seen\n")
    assert (wt / "backlog/doing/seen.md").read_text() == "# seen\n"
    (wt / "backlog/doing/back.md").write_text("# back\n")
    assert sorted(os.listdir(repo / "backlog/doing")) == ["back.md", "seen.md"]
    assert "doing: 2" in wt.ok("status") and "doing: 2" in repo.ok("status")


def test_scaffold(repo):
    out = repo.ok("setup", "--backend=maildir-shared")
    assert "maildir-shared" in out
    b = repo / "backlog"
    assert "## Backend\n\nmaildir-shared\n" in (b / "AGENTS.md").read_text()
    assert "## Pipeline\n\n`todo` → `doing` → `done`\n" in (b / "AGENTS.md").read_text()
    assert "## Defaults" in (b / "AGENTS.md").read_text()
    assert os.readlink(b / "CLAUDE.md") == "AGENTS.md"
    assert (b / "ROADMAP.md").read_text().startswith("# Roadmap")
    assert repo.head_message() == "chore(backlog): set up maildir-shared backlog"
    assert sorted(git(repo.path, "show", "--name-only", "--format=", "HEAD").split()) == [
        ".gitignore",
        "backlog/.gitattributes",
        "backlog/AGENTS.md",
        "backlog/CLAUDE.md",
        "backlog/ROADMAP.md",
        "backlog/done/.gitkeep",
        "backlog/failed/.gitkeep",
        "backlog/todo/.gitkeep",
    ]
    assert git(repo.path, "status", "--porcelain", "--untracked-files=all") == ""


def test_scaffold_maildir_git_in_an_unborn_repo(tmp_path):
    from conftest import Repo

    path = tmp_path / "fresh"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    repo = Repo(path)
    data = json.loads(repo.ok("--json", "setup", "--backend=maildir-git"))
    assert data["backend"] == "maildir-git" and data["pipeline"] == ["todo", "doing", "done"]
    assert "backlog/doing/.gitkeep" in git(path, "ls-files")
    assert not (path / ".gitignore").exists()
    assert git(path, "status", "--porcelain", "--untracked-files=all") == ""
    repo.ok("add", "first")
    assert repo.head_message() == "add(first-plan)"


def test_pipeline_option(repo):
    repo.ok("setup", "--backend=maildir-shared", "--pipeline", "inbox todo doing reviewing done")
    assert "`inbox` → `todo` → `doing` → `reviewing` → `done`" in (repo / "backlog/AGENTS.md").read_text()
    for pile in ("inbox", "todo", "done", "failed"):
        assert (repo / f"backlog/{pile}/.gitkeep").exists()
    for pile in ("doing", "reviewing"):
        assert os.readlink(repo / f"backlog/{pile}") == str(repo / f".git/backlog/{pile}")
    assert (repo / ".gitignore").read_text() == "backlog/doing\nbacklog/reviewing\n"
    assert repo.ok("add", "x").strip() == "backlog/inbox/x-plan.md"
    assert repo.ok("status").splitlines()[:6] == [
        "inbox: 1",
        "todo: 0",
        "doing: 0",
        "reviewing: 0",
        "done: 0",
        "failed: 0",
    ]


# -- refusals ------------------------------------------------------------------------------
@pytest.mark.parametrize("worktrees", [0, 1])
def test_setup_without_backend_explains_both_and_recommends_shared(repo, worktrees):
    """A new project is about to have several worktrees: maildir-shared is recommended even before the first."""
    hint = "maildir-shared"
    if worktrees:
        repo.worktree("other")
    before = state(repo)
    proc = repo.run("setup")
    assert proc.returncode == 2
    assert f"--backend={hint} (recommended" in proc.stderr and "--backend=maildir-git" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    proc = repo.run("--json", "setup")
    assert json.loads(proc.stdout)["code"] == 2 and f"--backend={hint}" in json.loads(proc.stdout)["error"]
    assert state(repo) == before


@pytest.mark.parametrize(
    "args, code",
    [
        (["--backend=jira"], 2),
        (["--backend=maildir-shared", "--pipeline", "todo doing"], 2),
        (["--backend=maildir-shared", "--pipeline", "inbox doing done"], 2),
        (["--backend=maildir-shared", "--pipeline", "todo failed done"], 2),
    ],
)
def test_setup_invalid_input_writes_nothing(repo, args, code):
    before = state(repo)
    proc = repo.run("setup", *args)
    assert proc.returncode == code and "Traceback" not in proc.stderr
    assert state(repo) == before


@pytest.mark.parametrize("backend", ["maildir-shared", "maildir-git"])
def test_second_setup_refuses_and_changes_nothing(repo, backend):
    repo.ok("setup", "--backend=maildir-shared")
    (repo / "backlog/AGENTS.md").write_text("# hand edited\n")
    before = state(repo)
    proc = repo.run("setup", f"--backend={backend}", "--pipeline", "inbox todo done")
    assert proc.returncode == 1 and "already exists" in proc.stderr
    assert state(repo) == before


def test_setup_commits_only_its_paths(repo):
    (repo / "user.txt").write_text("mine\n")
    (repo / "README.md").write_text("edited\n")
    git(repo.path, "add", "user.txt", "README.md")
    repo.ok("setup", "--backend=maildir-shared")
    committed = git(repo.path, "show", "--name-only", "--format=", "HEAD").split()
    assert "user.txt" not in committed and "README.md" not in committed
    assert git(repo.path, "status", "--porcelain") == "M  README.md\nA  user.txt\n"


def test_setup_keeps_an_existing_gitignore(repo):
    (repo / ".gitignore").write_text("build/\n")
    git(repo.path, "add", ".gitignore")
    git(repo.path, "commit", "-q", "-m", "ignore")
    repo.ok("setup", "--backend=maildir-shared")
    assert git(repo.path, "show", "HEAD:.gitignore") == "build/\nbacklog/doing\n"
    assert git(repo.path, "status", "--porcelain", "--untracked-files=all") == ""


def test_setup_never_reads_a_committed_gitignore_through_a_symlink(repo):
    """Session 29: `setup` read `.gitignore` before its heal refused a symlink, through it: a
    committed `.gitignore -> /dev/zero` read until memory ran out. It is refused first, in the
    heal's words, and nothing is written."""
    (repo / ".gitignore").symlink_to("/dev/zero")
    git(repo.path, "add", ".gitignore")
    git(repo.path, "commit", "-q", "-m", "a pull request's link")
    before = state(repo)
    proc = repo.run("setup", "--backend=maildir-shared")
    assert proc.returncode == 1 and ".gitignore: is a symlink" in proc.stderr, proc.stderr
    assert state(repo) == before and not (repo / "backlog").exists()


def test_setup_leaves_a_root_guide_past_the_config_limit_alone(repo):
    """A committed root AGENTS.md of any size was read and rewritten whole to append one line;
    past `limits.CONFIG_BYTES` (as `setup --agent` bounds it) it is left as it is, with a note."""
    from maildir_backlog import limits

    big = b"# guide\n" + b"x" * limits.CONFIG_BYTES + b"\n"
    (repo / "AGENTS.md").write_bytes(big)
    git(repo.path, "add", "AGENTS.md")
    git(repo.path, "commit", "-q", "-m", "a long guide")
    proc = repo.run("setup", "--backend=maildir-shared")
    assert proc.returncode == 0, proc.stderr
    assert (repo / "AGENTS.md").read_bytes() == big
    assert "AGENTS.md is over" in proc.stdout + proc.stderr and "yourself" in proc.stdout + proc.stderr


@pytest.mark.parametrize("backend", ["maildir-shared", "maildir-git"])
def test_setup_with_failing_hook_leaves_no_trace(repo, backend):
    (repo / ".gitignore").write_text("build/\n")  # uncommitted: must come back byte for byte
    (repo / "user.txt").write_text("mine\n")
    git(repo.path, "add", "user.txt")
    failing_hook(repo)
    before = state(repo)
    proc = repo.run("setup", f"--backend={backend}")
    assert proc.returncode == 1 and "hook refuses" in proc.stderr
    assert state(repo) == before
    (repo / ".git/hooks/pre-commit").unlink()
    repo.ok("setup", f"--backend={backend}")  # and a retry then works


def test_setup_without_a_git_identity_says_how_to_set_one(repo, monkeypatch):
    for key in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(key, raising=False)
    # git must not guess an identity from the host name (it would on a machine with a domain)
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "user.useConfigOnly")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "true")
    # nor take one from this machine's own configuration
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    proc = repo.run("setup", "--backend=maildir-shared")
    assert proc.returncode == 1
    assert "git config --global user.email" in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not (repo / "backlog" / "AGENTS.md").exists()


# -- SPEC §7.11: a checkout of an older commit (the hook's self-heal) -----------------------------
def checkout(wt, *args: str) -> None:
    """A real `git checkout`/`switch`, running the post-checkout hook with this tree's code."""
    import subprocess

    from conftest import ROOT

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(["git", *args], cwd=wt.path, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("how", [("checkout", "-q"), ("switch", "-q", "--detach"), ("checkout", "-q", "-b", "again")])
def test_checking_out_an_old_commit_never_puts_a_settled_task_back_in_flight(gitbk, how):
    gitbk.ok("add", "y")
    b = gitbk.worktree("b")
    b.ok("take", "y-plan")  # maildir-git: b's branch tracks backlog/doing/y-plan.md
    gitbk.ok("migrate", "--to", "maildir-shared")
    git(b.path, "merge", "-q", "--no-edit", "main")
    old = git(b.path, "rev-parse", "HEAD").strip()  # declares maildir-shared and still tracks doing/y-plan.md
    b.ok("setup", "--hooks")
    b.ok("status")  # the self-heal moves it into the shared root and commits its removal
    b.ok("advance", "y-plan")  # done: the ledger knows it
    shared_doing = gitbk.path / ".git/backlog/doing"
    checkout(b, *how, old)
    assert not list(shared_doing.glob("*.md"))  # y-plan stays settled, not back in flight
    assert git(b.path, "rev-parse", "HEAD").strip() == old  # nothing committed on the detached HEAD
    proc = b.run("status")
    assert proc.returncode == 0 and not list(shared_doing.glob("*.md"))
    assert git(b.path, "rev-parse", "HEAD").strip() == old
    checkout(b, "checkout", "-q", "b")  # back on the branch: the layout heals as usual
    assert (b / "backlog/doing").is_symlink() and not list(shared_doing.glob("*.md"))
    assert gitbk.run("take", "y-plan").returncode == 1
