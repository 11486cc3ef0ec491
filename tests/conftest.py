"""Fixtures: throwaway git repositories, worktrees, and the real `backlog` command.

Tests never rely on the machine's git config: identity and HOME are set here.
"""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Backlog Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Backlog Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "BACKLOG_CLAIMER": "tester",
}


@pytest.fixture(autouse=True)
def git_env(monkeypatch, tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("GIT_DIR", raising=False)
    monkeypatch.delenv("GIT_WORK_TREE", raising=False)
    monkeypatch.delenv("GIT_INDEX_FILE", raising=False)
    for var in ("CONDUCTOR_WORKSPACE_NAME", "CMUX_WORKSPACE_ID"):
        monkeypatch.delenv(var, raising=False)
    for key, value in GIT_IDENTITY.items():
        monkeypatch.setenv(key, value)


def git(cwd: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if check and proc.returncode:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout


def backlog(cwd: Path, *args: str, env: dict | None = None, input: str | None = None, timeout: float = 120):
    """Run the real command as a subprocess; returns CompletedProcess (text)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env["PYTHONPATH"] = str(ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "maildir_backlog", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=full_env,
        input=input,
        timeout=timeout,
    )


def ok(cwd: Path, *args: str, env: dict | None = None, input: str | None = None) -> str:
    """Run backlog and insist on exit 0; returns stdout."""
    proc = backlog(cwd, *args, env=env, input=input)
    assert proc.returncode == 0, f"backlog {' '.join(args)} -> {proc.returncode}: {proc.stderr}{proc.stdout}"
    assert "Traceback" not in proc.stderr
    return proc.stdout


def common_dir(path: Path) -> Path:
    return Path(git(path, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())


def snapshot(repo: "Repo") -> dict:
    """The worktree (without .git) and the shared root (without locks), symlinks as their
    targets, plus HEAD, the index and `git status`: equal snapshots mean nothing changed."""
    files: dict[str, object] = {}
    for base in (repo.path, common_dir(repo.path) / "backlog"):
        for path in sorted(base.rglob("*")) if base.exists() else []:
            if ".git" in path.relative_to(base).parts or ".locks" in path.parts:
                continue
            if path.is_symlink():
                files[str(path)] = ("link", os.readlink(path))
            elif path.is_file():
                files[str(path)] = path.read_bytes()
    return {
        "files": files,
        "head": git(repo.path, "rev-parse", "HEAD"),
        "index": git(repo.path, "ls-files", "-s"),
        "status": git(repo.path, "status", "--porcelain"),
    }


def init_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("# test repo\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "init")
    return path


def add_worktree(repo: Path, path: Path, branch: str) -> Path:
    git(repo, "worktree", "add", "-q", "-b", branch, str(path))
    return path


@dataclass
class Repo:
    path: Path

    def __truediv__(self, other: str) -> Path:
        return self.path / other

    def run(self, *args, **kwargs):
        return backlog(self.path, *args, **kwargs)

    def ok(self, *args, **kwargs) -> str:
        return ok(self.path, *args, **kwargs)

    def git(self, *args, **kwargs) -> str:
        return git(self.path, *args, **kwargs)

    def head_message(self) -> str:
        return git(self.path, "log", "-1", "--format=%s").strip()

    def worktree(self, name: str) -> "Repo":
        return Repo(add_worktree(self.path, self.path.parent / name, name))

    def context(self):
        from maildir_backlog.context import open_context

        return open_context(self.path)


@pytest.fixture
def repo(tmp_path) -> Repo:
    """A git repository with one commit and no backlog."""
    return Repo(init_repo(tmp_path / "repo"))


@pytest.fixture
def shared(repo) -> Repo:
    """A repository with a maildir-shared backlog."""
    repo.ok("setup", "--backend=maildir-shared")
    return repo


@pytest.fixture
def gitbk(repo) -> Repo:
    """A repository with a maildir-git backlog."""
    repo.ok("setup", "--backend=maildir-git")
    return repo


@pytest.fixture(params=["maildir-shared", "maildir-git"])
def anybk(request, repo) -> Repo:
    """A repository with each backend in turn."""
    repo.ok("setup", f"--backend={request.param}")
    return repo
