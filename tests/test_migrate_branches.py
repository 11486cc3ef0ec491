"""Branches that still track in-flight piles after `migrate --to maildir-shared` (issue: the road in)."""

from __future__ import annotations

from conftest import git


def test_a_branch_tracking_an_in_flight_file_has_it_taken_out_of_the_index(gitbk):
    gitbk.ok("add", "x")
    gitbk.ok("add", "y")
    b = gitbk.worktree("b")
    b.ok("take", "y-plan")  # maildir-git: b tracks backlog/doing/y-plan.md
    out = gitbk.ok("migrate", "--to", "maildir-shared")
    assert "branches that still track in-flight files: b" in out
    git(b.path, "merge", "-q", "--no-edit", "main")  # b is maildir-shared now, and still tracks doing/y-plan.md
    proc = b.run("status")
    assert proc.returncode == 0
    assert "removed from the index in a backlog-only commit" in proc.stderr
    assert git(b.path, "status", "--porcelain", "--", "backlog").strip() == ""  # nothing left unstaged
    assert b.head_message() == "chore(backlog): in-flight files leave the index (shared root)"
    b.ok("advance", "y-plan")  # completes from the shared root; the branch holds it in done/ only
    assert [p.parent.name for p in (b.path / "backlog").glob("*/y-plan.md")] == ["done"]
    assert git(b.path, "ls-files", "backlog/doing").strip() == ""
    git(gitbk.path, "merge", "-q", "--no-edit", "b")  # merging b brings nothing back into flight
    assert not list((gitbk.path / "backlog/doing").glob("*.md"))


# -- SPEC §7.11: a backend switch while other worktrees still run the old backend ----------------
def test_after_migrate_to_shared_a_worktree_still_on_maildir_git_claims_nothing(gitbk):
    gitbk.ok("add", "x")
    gitbk.ok("add", "y")
    b = gitbk.worktree("b")  # b's todo/ holds x-plan and y-plan; b still declares maildir-git
    gitbk.ok("take", "x-plan")
    gitbk.ok("migrate", "--to", "maildir-shared")  # x-plan now in flight in the shared root
    head = git(b.path, "rev-parse", "HEAD")
    for args in (("take", "x-plan"), ("take",), ("advance", "y-plan")):
        proc = b.run(*args)
        assert proc.returncode == 1 and "merge main" in proc.stderr, (args, proc.stderr)
    assert git(b.path, "rev-parse", "HEAD") == head and (b / "backlog/todo/x-plan.md").exists()
    assert git(b.path, "status", "--porcelain").strip() == ""  # nothing moved
    git(b.path, "merge", "-q", "--no-edit", "main")  # now b runs maildir-shared too
    assert b.run("take", "x-plan").returncode == 1  # in flight: the one claim stands
    assert b.ok("take").strip() == "backlog/doing/y-plan.md"


def test_after_migrate_to_git_a_worktree_still_on_maildir_shared_claims_nothing(shared):
    shared.ok("add", "x")
    b = shared.worktree("b")
    shared.ok("take", "x-plan")
    shared.ok("migrate", "--to", "maildir-git")  # x-plan is tracked on main now, the shared pile empty
    proc = b.run("take", "x-plan")
    assert proc.returncode == 1 and "merge main" in proc.stderr
    assert not list((shared.path / ".git/backlog/doing").glob("*.md")) and (b / "backlog/todo/x-plan.md").exists()
    assert b.run("take").returncode == 1
    git(b.path, "merge", "-q", "--no-edit", "main")
    assert b.run("take", "x-plan").returncode == 1  # b's branch holds it in doing/ now: not in todo/
