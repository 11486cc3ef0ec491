"""git's settings for large repositories (issue 21): `setup` turns them on in a clone whose index
is large, `maintain` advises them; a value the user set is never touched."""

from __future__ import annotations

import subprocess

from conftest import git

from maildir_backlog import git as g

EMPTY_BLOB = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"


def large_index(repo, n: int = g.LARGE_INDEX) -> None:
    """n entries in the index (and committed), without writing n files: `update-index --index-info`."""
    subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo.path, input="", text=True, check=True)
    lines = "".join(f"100644 {EMPTY_BLOB}\tbig/f{i:05d}\n" for i in range(n))
    subprocess.run(["git", "update-index", "--index-info"], cwd=repo.path, input=lines, text=True, check=True)
    git(repo.path, "commit", "-qm", "many files")
    git(repo.path, "checkout", "--", "big")


def config(repo, key: str) -> str:
    return git(repo.path, "config", key, check=False).strip()


def test_setup_turns_the_settings_on_for_a_large_index(repo):
    large_index(repo)
    git(repo.path, "config", "core.splitIndex", "false")  # the user's own choice
    out = repo.ok("setup", "--backend=maildir-shared")
    assert "large repository" in out and "feature.manyFiles" in out and "core.splitIndex" not in out
    assert config(repo, "feature.manyFiles") == "true" and config(repo, "core.splitIndex") == "false"
    repo.ok("add", "x")  # the backlog works as before
    proc = repo.run("maintain")
    assert proc.returncode == 0 and "large repository" not in proc.stderr  # nothing left to advise


def test_small_repositories_are_left_alone(repo):
    out = repo.ok("setup", "--backend=maildir-git")
    assert "large repository" not in out and config(repo, "feature.manyFiles") == ""
    assert "large repository" not in repo.run("maintain").stderr


def test_maintain_advises_them_and_changes_nothing(gitbk):
    large_index(gitbk)
    proc = gitbk.run("maintain")
    assert proc.returncode == 0
    assert "git config feature.manyFiles true && git config core.splitIndex true" in proc.stderr
    assert config(gitbk, "feature.manyFiles") == ""
