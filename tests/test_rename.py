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
    assert shared.ok("take").strip() in ("backlog/doing/fix-login-plan.md", "backlog/doing/auth-flow-plan.md")


def test_rename_refuses_a_taken_name_and_paths(shared):
    shared.ok("add", "a")
    shared.ok("add", "b")
    proc = shared.run("rename", "a-plan", "b-plan")
    assert proc.returncode == 1 and "already exists" in proc.stderr
    assert shared.run("rename", "../x", "y").returncode == 2
    assert shared.run("rename", "a-plan", "Bad Name").returncode == 2
    assert (shared / "backlog/todo/a-plan.md").exists()
