"""A backlog inside a git submodule (docs/design.md, *A backlog in a submodule*).

A submodule's git dir is `<superproject>/.git/modules/<name>`, and `git worktree list` names its
main worktree by that git dir, not by where its files are (its `core.worktree` says that). A
write into the intake branch from a linked worktree of the submodule lands in the main
worktree's files, and what the tool says names that checkout, not the git dir."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import Repo, add_worktree, git, init_repo


def _submodule(tmp_path: Path) -> tuple[Repo, Repo, Path]:
    """(the submodule's checkout with a maildir-shared backlog, a linked worktree of it, its git dir)."""
    inner = init_repo(tmp_path / "inner")
    outer = init_repo(tmp_path / "outer")
    subprocess.run(
        ["git", "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(inner), "sub"],
        cwd=outer,
        check=True,
        capture_output=True,
    )
    git(outer, "commit", "-q", "-m", "the submodule")
    sub = Repo(outer / "sub")
    sub.ok("setup", "--backend=maildir-shared")
    linked = Repo(add_worktree(sub.path, tmp_path / "linked", "linked"))
    return sub, linked, outer / ".git" / "modules" / "sub"


def test_an_add_from_a_linked_worktree_lands_in_the_submodule_s_checkout_and_says_where(tmp_path):
    sub, linked, git_dir = _submodule(tmp_path)
    done = linked.run("add", "hotfix")
    assert done.returncode == 0 and done.stdout.strip() == "backlog/todo/hotfix-plan.md", done
    said = done.stderr  # where the task was committed: on stderr, stdout is the path alone
    assert f"committed on the intake branch main (checked out in {sub.path})" in said and str(git_dir) not in said
    assert (sub / "backlog/todo/hotfix-plan.md").is_file()
    assert not (git_dir / "backlog/todo").exists()  # nothing written into the git dir
    assert sub.git("status", "--porcelain", "--untracked-files=all") == ""
    assert linked.ok("take").strip() == "backlog/doing/hotfix-plan.md"
    linked.ok("advance", "hotfix-plan")
    assert "done: 1" in sub.ok("status")


def test_a_merge_stopped_in_the_submodule_s_checkout_is_named_by_its_checkout(tmp_path):
    sub, linked, git_dir = _submodule(tmp_path)
    (sub / "notes.txt").write_text("ours\n")
    sub.git("add", "notes.txt")
    sub.git("commit", "-q", "-m", "ours")
    sub.git("checkout", "-q", "-b", "theirs", "HEAD~1")
    (sub / "notes.txt").write_text("theirs\n")
    sub.git("add", "notes.txt")
    sub.git("commit", "-q", "-m", "theirs")
    sub.git("checkout", "-q", "main")
    sub.git("merge", "-q", "theirs", check=False)  # stops at the conflict in notes.txt
    assert (git_dir / "MERGE_HEAD").exists()
    done = linked.run("add", "hotfix")
    assert done.returncode == 4, done  # wait for the merge to end
    assert f"in progress in the worktree {sub.path}" in done.stderr and str(git_dir) not in done.stderr, done.stderr
