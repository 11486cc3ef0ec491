"""maildir_backlog.gitcommit: a claim's commit without `git commit` (its index refresh costs 0.5 s
at 100,000 tasks), taken only where `git commit` would do nothing more (docs/design.md, *A
claim's commit at 100,000 tasks*): a hook, a hooks path, signing, anything else staged, or a
merge in progress send the claim the full way, and the commit is the same either way."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Repo, copy_repo, git

TRACE = "GIT_TRACE"


def claimed(tmp_path: Path, repo_templates, monkeypatch) -> tuple[Repo, Path]:
    """A maildir-shared backlog with one task, traced: (the repository, the trace file)."""
    repo = copy_repo(repo_templates("maildir-shared", ("add", "x")), tmp_path / "repo")
    trace = tmp_path / "trace"
    monkeypatch.setenv(TRACE, str(trace))
    return repo, trace


def commands(trace: Path) -> list[str]:
    """The git subcommands run, in order (from GIT_TRACE's `built-in: git ...` lines)."""
    found = []
    for line in trace.read_text(errors="replace").splitlines() if trace.exists() else ():
        if "built-in: git " in line:
            found.append(line.split("built-in: git ", 1)[1].split()[0])
    return found


def the_claim_is_committed(repo: Repo, before: str) -> None:
    assert repo.head_message().startswith("advance(x-plan) → doing")
    assert git(repo.path, "rev-parse", "HEAD^").strip() == before
    assert git(repo.path, "show", "--name-status", "--format=", "HEAD").split() == ["D", "backlog/todo/x-plan.md"]
    assert git(repo.path, "ls-files", "--", "backlog/todo/x-plan.md") == ""


def test_a_claim_without_hooks_commits_through_plumbing(tmp_path, repo_templates, monkeypatch) -> None:
    repo, trace = claimed(tmp_path, repo_templates, monkeypatch)
    before = git(repo.path, "rev-parse", "HEAD").strip()
    repo.ok("take", "x-plan")
    the_claim_is_committed(repo, before)
    ran = commands(trace)
    assert "commit" not in ran and {"update-index", "write-tree", "commit-tree", "update-ref"} <= set(ran), ran
    assert git(repo.path, "status", "--porcelain", "--untracked-files=all") == ""
    assert "commit: advance(x-plan)" in git(repo.path, "reflog", "-1", "--format=%gs", "HEAD")


def hook(repo: Repo, name: str) -> Path:
    """An executable hook that leaves a mark when it runs; the mark's path."""
    common = Path(git(repo.path, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())
    path, mark = common / "hooks" / name, repo.path.parent / f"ran-{name}"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"#!/bin/sh\ntouch '{mark}'\n")
    path.chmod(0o755)
    return mark


@pytest.mark.parametrize("name", ["pre-commit", "commit-msg", "post-commit"])
def test_a_commit_hook_still_runs(tmp_path, repo_templates, monkeypatch, name) -> None:
    repo, trace = claimed(tmp_path, repo_templates, monkeypatch)
    before = git(repo.path, "rev-parse", "HEAD").strip()
    mark = hook(repo, name)
    repo.ok("take", "x-plan")
    assert mark.exists()
    assert "commit" in commands(trace)
    the_claim_is_committed(repo, before)


def test_a_hooks_path_or_signing_takes_the_full_way(tmp_path, repo_templates, monkeypatch) -> None:
    repo, trace = claimed(tmp_path, repo_templates, monkeypatch)
    git(repo.path, "config", "core.hooksPath", str(tmp_path / "nowhere"))
    repo.ok("take", "x-plan")
    assert "commit" in commands(trace)


def test_other_staged_work_stays_staged_and_out_of_the_claim(tmp_path, repo_templates, monkeypatch) -> None:
    repo, trace = claimed(tmp_path, repo_templates, monkeypatch)
    before = git(repo.path, "rev-parse", "HEAD").strip()
    (repo / "user.txt").write_text("mine\n")
    git(repo.path, "add", "user.txt")
    repo.ok("take", "x-plan")
    the_claim_is_committed(repo, before)
    assert "commit" in commands(trace)  # the tree of the index would hold user.txt: `--only` leaves it out
    assert git(repo.path, "status", "--porcelain") == "A  user.txt\n"
