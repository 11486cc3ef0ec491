"""Only the holder acts (SPEC §5 Ownership, §7.9): other branches are refused unless --force, which is recorded."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from conftest import git

T0 = datetime(2026, 5, 16, 14, 22, tzinfo=timezone.utc)


def backdate(path, hours: int) -> None:
    """Make an in-flight task's clock start `hours` ago (no sleeping past a deadline)."""
    old = (datetime.now(timezone.utc) - timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = path.read_text().splitlines(keepends=True)
    for i, line in enumerate(lines):
        if " advanced to=doing " in line or " rescued " in line:
            lines[i] = f"- {old}" + line[line.index(" ", 2) :]
    path.write_text("".join(lines))


def test_another_branch_is_refused_naming_the_holder(shared):
    shared.ok("add", "x")
    b = shared.worktree("b1")
    shared.ok("take", "x-plan")
    for args in (
        ("advance", "x-plan"),
        ("progress", "--slug", "x-plan", "mine now"),
        ("cancel", "x-plan", "no"),
        ("fail", "x-plan", "no"),
    ):
        proc = b.run(*args)
        assert proc.returncode == 1, (args, proc.stderr)
        assert "claimed by tester @ main since" in proc.stderr and "--force" in proc.stderr
    assert "doing/x-plan" in shared.ok("status")


def test_force_is_recorded_as_by(shared):
    shared.ok("add", "x")
    b = shared.worktree("b1")
    shared.ok("take", "x-plan")
    b.ok("progress", "--slug", "x-plan", "helping out", "--force", env={"BACKLOG_CLAIMER": "helper"})
    b.ok("cancel", "x-plan", "superseded", "--force", env={"BACKLOG_CLAIMER": "helper"})
    text = (b / "backlog/done/x-plan.md").read_text()
    assert " progress by=helper | helping out" in text and " cancelled by=helper | superseded" in text


def test_the_displaced_claimer_is_refused_and_the_rescuers_pr_lands(repo):
    repo.ok("setup", "--backend=maildir-shared", "--pipeline", "todo doing reviewing done")
    repo.ok("add", "x", "--timeout", "1h")
    b = repo.worktree("b1")
    repo.ok("take", "x-plan")
    backdate(repo / "backlog/doing/x-plan.md", hours=2)
    git(repo.path, "status")  # nothing tracked changed: the in-flight copy lives in the shared root
    assert b.ok("take", "x-plan", env={"BACKLOG_CLAIMER": "rescuer"}).strip() == "backlog/doing/x-plan.md"
    proc = repo.run("advance", "x-plan")  # the displaced claimer, on main
    assert proc.returncode == 1 and "claimed by rescuer @ b1" in proc.stderr
    b.ok("advance", "x-plan", env={"BACKLOG_CLAIMER": "rescuer"})  # → reviewing
    b.ok("advance", "x-plan", "--pr", "https://example.invalid/pull/7", env={"BACKLOG_CLAIMER": "rescuer"})
    done = (b / "backlog/done/x-plan.md").read_text()
    assert done.rstrip().endswith("advanced to=done | PR=https://example.invalid/pull/7")
    assert done.count("advanced to=reviewing") == 1


def test_pr_auto_asks_gh_and_says_so_when_it_is_missing(shared, tmp_path):
    import os

    shared.ok("add", "x")
    shared.ok("take", "x-plan")
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    git_dir = os.path.dirname(__import__("shutil").which("git"))
    proc = shared.run("advance", "x-plan", "--pr", "auto", env={"PATH": f"{empty}{os.pathsep}{git_dir}"})
    assert proc.returncode == 1 and "GitHub CLI (gh)" in proc.stderr and "not installed" in proc.stderr
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "gh").write_text("#!/bin/sh\necho https://example.invalid/pull/42\n")
    (fake / "gh").chmod(0o755)
    shared.ok("advance", "x-plan", "--pr", "auto", env={"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"})
    assert (shared / "backlog/done/x-plan.md").read_text().rstrip().endswith("PR=https://example.invalid/pull/42")
