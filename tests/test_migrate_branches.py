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
