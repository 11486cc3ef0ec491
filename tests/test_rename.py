"""`backlog rename`: names the bash tool allowed, fixed in every pile and every dependency at once."""

from __future__ import annotations

from conftest import git


def test_rename_an_invalid_slug_and_its_dependents(shared):
    todo = shared / "backlog/todo"
    (todo / "Fix_Login-plan.md").write_text("# Fix login\n")
    (todo / "auth flow-plan.md").write_text("# Auth\n")
    (todo / "later-plan.md").write_text(
        '---\ndependencies:\n  Fix_Login-plan: first\n  auth flow-plan: "then"\n---\n\n# Later\n'
    )
    git(shared.path, "add", "backlog")
    git(shared.path, "commit", "-qm", "bash tool names")
    before = (todo / "later-plan.md").read_bytes()
    out = shared.ok("rename", "Fix_Login-plan", "fix-login-plan")
    assert "renamed backlog/todo/Fix_Login-plan.md → backlog/todo/fix-login-plan.md" in out
    shared.ok("rename", "auth flow-plan.md", "auth-flow-plan")
    after = (todo / "later-plan.md").read_bytes()
    assert after == before.replace(b"Fix_Login-plan", b"fix-login-plan").replace(b"auth flow-plan", b"auth-flow-plan")
    assert shared.head_message() == "rename(auth flow-plan → auth-flow-plan)"
    assert git(shared.path, "status", "--porcelain").strip() == ""
    shared.ok("check-deps", "backlog/todo/later-plan.md")
    assert not (shared.path / ".git/backlog/.ledger").exists()  # a bash name is never claimable: no tombstone
    assert shared.ok("take").strip() in ("backlog/doing/fix-login-plan.md", "backlog/doing/auth-flow-plan.md")


def test_rename_refuses_a_taken_name_and_paths(shared):
    shared.ok("add", "a")
    shared.ok("add", "b")
    proc = shared.run("rename", "a-plan", "b-plan")
    assert proc.returncode == 1 and "already exists" in proc.stderr
    assert shared.run("rename", "../x", "y").returncode == 2
    assert shared.run("rename", "a-plan", "Bad Name").returncode == 2
    assert (shared / "backlog/todo/a-plan.md").exists()


# -- SPEC §7.11: a rename keeps one claimer and exactly once (maildir-shared) -------------------
def test_renaming_a_todo_task_leaves_no_claimable_copy_under_the_old_name(shared):
    shared.ok("add", "x")
    b = shared.worktree("b")  # b's todo/ holds x-plan, branched before the rename
    shared.ok("rename", "x-plan", "y-plan")
    proc = b.run("take", "x-plan")
    assert proc.returncode == 1 and "renamed to y-plan" in proc.stderr
    assert not list((shared / "backlog/doing").glob("*.md"))
    assert b.ok("take").strip() == "backlog/doing/y-plan.md"  # the task itself, under its new name
    proc = shared.run("add", "x")
    assert proc.returncode == 1 and "old name of y-plan" in proc.stderr


def test_renaming_an_in_flight_task_leaves_no_claimable_copy_under_the_old_name(shared):
    shared.ok("add", "x")
    b = shared.worktree("b")
    shared.ok("take", "x-plan")
    shared.ok("rename", "x-plan", "y-plan")
    assert (shared / "backlog/doing/y-plan.md").exists()
    proc = b.run("take", "x-plan")
    assert proc.returncode == 1 and "renamed to y-plan" in proc.stderr
    assert b.run("--json", "take").returncode == 0 and not (shared / "backlog/doing/x-plan.md").exists()
    shared.ok("advance", "y-plan")  # the holder goes on under the new name
    assert (shared / "backlog/done/y-plan.md").exists()


def test_renaming_a_task_another_branch_holds_in_flight_is_refused(shared):
    shared.ok("add", "x")
    b = shared.worktree("b")
    shared.ok("take", "x-plan")
    proc = b.run("rename", "x-plan", "y-plan")
    assert proc.returncode == 1 and "only its holder" in proc.stderr
    assert (shared / "backlog/doing/x-plan.md").exists() and (b / "backlog/todo/x-plan.md").exists()


def test_renaming_a_stale_copy_of_a_settled_task_is_refused(shared):
    shared.ok("add", "x")
    b = shared.worktree("b")
    shared.ok("take", "x-plan")
    shared.ok("advance", "x-plan")  # done on main; b still holds its todo/ copy
    before = git(b.path, "rev-parse", "HEAD")
    proc = b.run("rename", "x-plan", "z-plan")
    assert proc.returncode == 1 and "already settled (done) on branch main" in proc.stderr
    assert git(b.path, "rev-parse", "HEAD") == before and (b / "backlog/todo/x-plan.md").exists()
    assert not (b / "backlog/todo/z-plan.md").exists()


def test_a_rename_killed_after_its_tombstone_is_reported_and_can_be_run_again(shared):
    shared.ok("add", "x")
    proc = shared.run("rename", "x-plan", "y-plan", env={"BACKLOG_CRASH_AT": "rename:tombstone"})
    assert proc.returncode != 0
    assert shared.run("take", "x-plan").returncode == 1  # blocked under its old name: never claimable twice
    out = shared.ok("maintain")
    assert "SETTLED ELSEWHERE: backlog/todo/x-plan.md (renamed to y-plan on this branch" in out
    shared.ok("rename", "x-plan", "y-plan")
    assert shared.ok("take").strip() == "backlog/doing/y-plan.md"
