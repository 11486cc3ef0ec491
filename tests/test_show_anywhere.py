"""`show` finds a task wherever the clone knows it (SPEC §5): an intake task this worktree has not
merged, and a task settled on another branch (its state, branch, time and that copy's log)."""

from __future__ import annotations

import json

from conftest import git
from jsonschema import Draft202012Validator


def _schema():
    from maildir_backlog.schemagen import schema

    return Draft202012Validator(schema("show"))


def test_show_an_intake_task_this_worktree_has_not_merged(shared):
    b = shared.worktree("b")
    shared.ok("add", "fresh")  # on main, the intake branch, after b was made
    proc = b.run("--json", "show", "fresh-plan")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    _schema().validate(data)
    assert data["pile"] == "todo" and data["path"] == "main:backlog/todo/fresh-plan.md" and data["log"] == []
    assert "intake branch" in b.run("show", "fresh-plan").stdout


def test_show_a_task_settled_on_another_branch_with_that_copys_log(shared):
    shared.ok("add", "x")
    b = shared.worktree("b")  # holds x in its todo/: a stale copy once main finishes it
    shared.ok("take", "x-plan")
    shared.ok("advance", "x-plan")
    proc = b.run("--json", "show", "x-plan")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    _schema().validate(data)
    assert data["pile"] == "done" and data["settled"]["state"] == "done" and data["settled"]["branch"] == "main"
    assert [e["kind"] for e in data["log"]] == ["advanced", "advanced"]
    text = b.run("show", "x-plan").stdout
    assert "settled: done on branch main" in text
    assert git(b.path, "status", "--porcelain") == ""


def test_an_agent_whose_claim_the_janitor_failed_is_told_what_became_of_it(shared):
    """Not "no task in any pile": the ledger knows it failed on another branch, and when."""
    shared.ok("add", "x", "--timeout", "1h")
    b = shared.worktree("b")
    b.ok("take", "x-plan")
    from datetime import datetime, timedelta, timezone

    from freezegun import freeze_time

    with freeze_time(datetime.now(timezone.utc) + timedelta(hours=2)):
        shared.ok("maintain")  # TIMED OUT: failed into main's failed/
    for verb in (("advance", "x-plan"), ("cancel", "x-plan", "r"), ("fail", "x-plan", "r")):
        proc = b.run("--json", *verb)
        assert proc.returncode == 1, proc.stderr
        error = json.loads(proc.stdout)
        assert error["kind"] == "settled" and error["settled"]["state"] == "failed", error
        assert error["settled"]["branch"] == "main" and "retry" in error["error"]
