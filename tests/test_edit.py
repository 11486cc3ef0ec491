"""`backlog edit SLUG --set KEY=VALUE…` (SPEC §5): a task not yet claimed gets new fields where `add`
lands it (SPEC §4: the intake branch, wherever it runs), validated as `add` and `retry --set`
validate; only the lines that change are rewritten; in flight or settled, it is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, common_dir, holds_open, snapshot, task_lock
from test_intake_writes import declare_intake


def head(repo, rev: str = "HEAD") -> str:
    return repo.git("rev-parse", rev).strip()


def subject(repo, rev: str = "HEAD") -> str:
    return repo.git("log", "-1", "--format=%s", rev).strip()


def edit_json(where, *args: str) -> dict:
    return json.loads(where.ok("--json", "edit", *args))


# -- both backends ---------------------------------------------------------------------------------
def test_edit_sets_the_fields_and_commits_only_the_task(anybk):
    anybk.ok("add", "base")
    anybk.ok("add", "foo", "--priority", "5", "--timeout", "3d", "--title", "Old title")
    (anybk / "notes.txt").write_text("the user's work\n")
    anybk.git("add", "notes.txt")  # staged: must stay staged, out of the commit
    before = head(anybk)
    out = edit_json(
        anybk,
        "foo-plan",
        "--set",
        "priority=1",
        "--set",
        "timeout=2h",
        "--set",
        "timeout.doing=45m",
        "--set",
        "dependencies=base-plan:needs the base",
        "--set",
        "title=  A   new title ",
    )
    assert out == {
        "slug": "foo-plan",
        "pile": "todo",
        "path": "backlog/todo/foo-plan.md",
        "branch": "main",
        "where": "here",
        "changed": ["priority", "timeout", "timeout.doing", "dependencies", "title"],
        "committed": ["here"],
    }
    assert head(anybk, "HEAD^") == before
    assert subject(anybk) == (
        "edit(foo-plan) priority=1,timeout=2h,timeout.doing=45m,dependencies=base-plan:needs the base,title=A new title"
    )
    assert anybk.git("show", "--name-only", "--format=", "HEAD").split() == ["backlog/todo/foo-plan.md"]
    assert anybk.git("diff", "--cached", "--name-only").split() == ["notes.txt"]
    assert anybk.git("status", "--porcelain", "backlog") == ""
    shown = json.loads(anybk.ok("--json", "show", "foo-plan"))
    fm = shown["frontmatter"]
    assert (fm["priority"], fm["timeout"], fm["timeout.doing"]) == (1, "2h", "45m")
    assert fm["dependencies"] == {"base-plan": "needs the base"}
    assert shown["title"] == "A new title"
    anybk.ok("take", "base-plan")
    anybk.ok("advance", "base-plan")
    claimed = json.loads(anybk.ok("--json", "take"))  # what take returns is the edited task
    assert claimed["slug"] == "foo-plan" and claimed["title"] == "A new title"
    assert claimed["frontmatter"]["priority"] == 1 and claimed["budget_seconds"] == 45 * 60


def test_an_edit_that_changes_nothing_makes_no_commit(anybk):
    anybk.ok("add", "foo", "--priority", "5", "--title", "Foo")
    task = anybk / "backlog/todo/foo-plan.md"
    task.write_bytes(task.read_bytes().replace(b"priority: 5", b"priority:    5   # as written"))
    anybk.git("commit", "-qam", "hand edit")
    before, data = snapshot(anybk), task.read_bytes()
    proc = anybk.run("--json", "edit", "foo-plan", "--set", "priority=5", "--set", "title=Foo")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["changed"] == [] and out["committed"] == []
    assert "nothing changed" in proc.stderr and "no commit" in proc.stderr
    assert snapshot(anybk) == before and task.read_bytes() == data  # the odd spelling stays too
    edit_json(anybk, "foo-plan", "--set", "priority=5", "--set", "timeout=1d")  # one of two changes
    assert subject(anybk) == "edit(foo-plan) timeout=1d"  # only what changed is committed and said
    assert b"priority:    5   # as written" in task.read_bytes()


ODD = (
    b"---\r\n"
    b"# a comment the writer keeps\r\n"
    b"priority:   7   # seven\r\n"
    b"owner: {team: storage, on-call: [ada, bob]}\r\n"
    b"base: &anchor\r\n"
    b"  x: 1\r\n"
    b"copy: *anchor\r\n"
    b'"quoted key": yes\r\n'
    b"timeout.reviewing: none\r\n"
    b"---\r\n"
    b"\r\n"
    b"# Odd   title  \r\n"
    b"\r\n"
    b"Trailing spaces stay.   \r\n"
    b"A second # heading is prose:\r\n"
    b"# Not the title\r\n"
    b"\r\n"
    b"---\r\n"
    b"\r\n"
    b"- 2026-05-16T14:22:00Z advanced to=doing claimer=old branch=gone\r\n"
    b"- 2026-05-16T15:00:00Z failed | gave up\r\n"
    b"- 2026-05-16T16:00:00Z retried | once more\r\n"
)


def test_only_the_changed_lines_are_rewritten_the_rest_kept_byte_for_byte(anybk):
    """A CRLF file with odd YAML (comments, flow maps, anchors, quoted and unknown keys), a title
    with odd spacing, a second `# ` line in the prose and a log: `edit` rewrites the priority line,
    adds the timeout line and rewrites the title line; every other byte is the same."""
    anybk.ok("add", "odd")
    task = anybk / "backlog/todo/odd-plan.md"
    task.write_bytes(ODD)
    anybk.git("commit", "-qam", "an odd task")
    edit_json(anybk, "odd-plan", "--set", "priority=2", "--set", "timeout=4h", "--set", "title=Even title")
    expected = (
        ODD.replace(b"priority:   7   # seven\r\n", b"priority: 2\r\n")
        .replace(b"timeout.reviewing: none\r\n---", b"timeout.reviewing: none\r\ntimeout: 4h\r\n---")
        .replace(b"# Odd   title  \r\n", b"# Even title\r\n")
    )
    assert task.read_bytes() == expected
    shown = json.loads(anybk.ok("--json", "show", "odd-plan"))
    assert shown["frontmatter"]["owner"] == {"team": "storage", "on-call": ["ada", "bob"]}
    assert shown["frontmatter"]["copy"] == {"x": 1} and shown["frontmatter"]["quoted key"] is True
    assert [e["kind"] for e in shown["log"]] == ["advanced", "failed", "retried"]
    assert shown["title"] == "Even title"


def test_a_line_break_only_some_readers_see_does_not_misplace_the_field(anybk):
    """The writer cuts lines where the reader does (at `\\n`): a U+2028 inside a quoted value must
    not shift the field's line, or the old value would stay below the new one and win."""
    anybk.ok("add", "sep", "--priority", "3")
    task = anybk / "backlog/todo/sep-plan.md"
    odd = 'note: "one\u2028two"\n'.encode()
    task.write_bytes(task.read_bytes().replace(b"priority: 3\n", odd + b"priority: 3\n"))
    anybk.git("commit", "-qam", "a line separator")
    edit_json(anybk, "sep-plan", "--set", "priority=1")
    shown = json.loads(anybk.ok("--json", "show", "sep-plan"))["frontmatter"]
    assert shown["priority"] == 1 and shown["note"] == "one\u2028two"
    assert task.read_bytes().count(b"priority") == 1 and odd + b"priority: 1\n" in task.read_bytes()


def test_a_task_without_a_title_gets_one_where_its_description_starts(anybk):
    anybk.ok("add", "bare", "--body-file", "-", input="Just prose.\n")
    task = anybk / "backlog/todo/bare-plan.md"
    task.write_bytes(task.read_bytes().replace(b"# bare\n\n", b""))
    anybk.git("commit", "-qam", "no title")
    before = task.read_bytes()
    edit_json(anybk, "bare-plan", "--set", "title=Bare at last")
    assert task.read_bytes() == before.replace(b"Just prose.\n", b"# Bare at last\n\nJust prose.\n")
    assert json.loads(anybk.ok("--json", "show", "bare-plan"))["title"] == "Bare at last"


def test_a_task_in_an_intake_pile_is_edited_in_its_pile(repo):
    repo.ok("setup", "--backend=maildir-git", "--pipeline", "inbox todo doing done")
    repo.ok("add", "idea")
    assert (repo / "backlog/inbox/idea-plan.md").exists()
    out = edit_json(repo, "idea-plan", "--set", "priority=3")
    assert out["pile"] == "inbox" and out["path"] == "backlog/inbox/idea-plan.md"
    assert "priority: 3" in (repo / "backlog/inbox/idea-plan.md").read_text()


# -- refusals: nothing changes -------------------------------------------------------------------
def refused(repo, code: int, *args: str, kind: str | None = None) -> str:
    """`backlog edit ARGS` exits `code` with one line and changes nothing; returns the line."""
    before = snapshot(repo)
    proc = repo.run("--json", "edit", *args)
    assert proc.returncode == code, (args, proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    error = json.loads(proc.stdout)
    assert error["code"] == code and (kind is None or error["kind"] == kind), error
    assert snapshot(repo) == before
    return error["error"]


def test_in_flight_done_failed_and_unknown_tasks_are_refused(anybk):
    for name in ("flying", "finished", "broken", "dep"):
        anybk.ok("add", name)
    anybk.ok("take", "flying-plan")
    said = refused(anybk, 1, "flying-plan", "--set", "priority=1", kind="held")
    assert "in flight (doing/" in said and "tester @ main" in said
    anybk.ok("take", "finished-plan")
    anybk.ok("advance", "finished-plan")
    assert "done/" in refused(anybk, 1, "finished-plan", "--set", "priority=1", kind="settled")
    anybk.ok("take", "broken-plan")
    anybk.ok("fail", "broken-plan", "no luck")
    assert "failed/" in refused(anybk, 1, "broken-plan", "--set", "priority=1", kind="settled")
    assert "no task nope-plan" in refused(anybk, 1, "nope-plan", "--set", "priority=1", kind="not-found")
    refused(anybk, 2, "../evil", "--set", "priority=1", kind="invalid")


def test_invalid_values_are_exit_2_and_change_nothing(anybk):
    anybk.ok("add", "login-form")
    anybk.ok("add", "foo", "--priority", "5")
    assert "invalid priority: 'high'" in refused(anybk, 2, "foo-plan", "--set", "priority=high")
    assert "invalid priority: 0" in refused(anybk, 2, "foo-plan", "--set", "priority=0")
    assert "invalid timeout: 'soon'" in refused(anybk, 2, "foo-plan", "--set", "timeout=soon")
    assert "invalid timeout.doing: 'later'" in refused(anybk, 2, "foo-plan", "--set", "timeout.doing=later")
    said = refused(anybk, 2, "foo-plan", "--set", "dependencies=login-form")  # add's rule, add's words
    assert said == (
        "--set dependencies login-form: no task login-form anywhere in this clone (did you mean login-form-plan?)"
    )
    assert "cannot depend on itself" in refused(anybk, 2, "foo-plan", "--set", "dependencies=foo-plan")
    said = refused(anybk, 2, "foo-plan", "--set", "owner=me", kind="invalid")
    assert "unknown key 'owner'" in said and "priority, timeout, timeout.<pile>, dependencies, title" in said
    assert "expected KEY=VALUE" in refused(anybk, 2, "foo-plan", "--set", "priority")
    assert "title must be one line with some text" in refused(anybk, 2, "foo-plan", "--set", "title=a\nb")
    assert "title must be one line with some text" in refused(anybk, 2, "foo-plan", "--set", "title= ")
    assert "nothing to set" in refused(anybk, 2, "foo-plan")
    # a valid change beside an invalid one: nothing is written
    refused(anybk, 2, "foo-plan", "--set", "title=Fine", "--set", "timeout=soon")


def test_retry_set_refuses_a_dependency_naming_nothing_by_the_same_rule(anybk):
    """One place owns the rule (SPEC §5 retry): `retry --set dependencies=…` naming no task is exit 2."""
    anybk.ok("add", "base")
    anybk.ok("take", "base-plan")
    anybk.ok("fail", "base-plan", "x")
    before = snapshot(anybk)
    proc = anybk.run("retry", "base-plan", "again", "--set", "dependencies=bse-plan")
    assert proc.returncode == 2 and "no task bse-plan anywhere in this clone (did you mean base-plan?)" in proc.stderr
    assert snapshot(anybk) == before


# -- maildir-shared: where add lands -------------------------------------------------------------
def test_from_another_worktree_the_edit_lands_on_the_intake_branch(shared):
    """The agent's worktree was made before the task: the edit is committed on main, in the
    worktree that has it checked out (its staged work untouched), and every worktree's `take`
    claims the edited task."""
    agent = shared.worktree("a1")
    shared.ok("add", "queued", "--priority", "5")
    (shared / "scratch.txt").write_text("the user's work\n")
    shared.git("add", "scratch.txt")
    agent_head = head(agent)
    out = edit_json(agent, "queued-plan", "--set", "priority=1", "--set", "timeout=90m", "--set", "title=Queued")
    assert out["where"] == "intake:main" and out["branch"] == "main" and out["committed"] == ["intake:main"]
    assert subject(shared) == "edit(queued-plan) priority=1,timeout=90m,title=Queued"
    assert shared.git("show", "--name-only", "--format=", "HEAD").split() == ["backlog/todo/queued-plan.md"]
    assert shared.git("diff", "--cached", "--name-only").split() == ["scratch.txt"]
    assert head(agent) == agent_head and agent.git("status", "--porcelain") == ""
    claimed = json.loads(shared.worktree("a2").ok("--json", "take"))
    assert claimed["slug"] == "queued-plan" and claimed["title"] == "Queued"
    assert claimed["frontmatter"]["priority"] == 1 and claimed["budget_seconds"] == 90 * 60


def test_with_the_intake_branch_checked_out_nowhere_a_plumbing_commit_moves_it(shared):
    declare_intake(shared)
    agent = shared.worktree("a1")
    shared.ok("add", "queued")
    shared.git("checkout", "-q", "--detach")
    tip = head(shared, "main")
    out = edit_json(agent, "queued-plan", "--set", "priority=2")
    assert out["where"] == "intake:main" and out["committed"] == ["intake:main"]
    assert head(shared, "main^") == tip and subject(shared, "main") == "edit(queued-plan) priority=2"
    assert shared.git("show", "--name-only", "--format=", "main").split() == ["backlog/todo/queued-plan.md"]
    assert "priority: 2" in shared.git("show", "main:backlog/todo/queued-plan.md")
    claimed = json.loads(agent.ok("--json", "take", "queued-plan"))
    assert claimed["frontmatter"]["priority"] == 2


def test_a_worktree_holding_its_own_copy_gets_the_edit_too(shared):
    """Made after the add, the agent's branch holds its own todo/ copy, which its `take` would
    prefer: both copies get the edit (one commit each), and the branches still merge cleanly."""
    shared.ok("add", "queued", "--priority", "5")
    agent = shared.worktree("a1")
    proc = agent.run("--json", "edit", "queued-plan", "--set", "priority=1")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["committed"] == ["intake:main", "here"]
    assert "and this branch's own copy" in proc.stderr
    assert subject(shared) == subject(agent) == "edit(queued-plan) priority=1"
    assert (shared / "backlog/todo/queued-plan.md").read_bytes() == (agent / "backlog/todo/queued-plan.md").read_bytes()
    shared.git("merge", "-q", "--no-edit", "a1")  # the same change on both sides: no conflict
    assert json.loads(agent.ok("--json", "take"))["frontmatter"]["priority"] == 1


def test_here_edits_this_branchs_own_task_and_nothing_else(shared):
    agent = shared.worktree("a1")
    agent.ok("add", "mine", "--here")
    main_head = head(shared)
    out = edit_json(agent, "mine-plan", "--set", "priority=4")  # on this branch only: edited here
    assert out["where"] == "here" and out["branch"] == "a1" and out["committed"] == ["here"]
    assert head(shared) == main_head and subject(agent) == "edit(mine-plan) priority=4"
    edit_json(agent, "mine-plan", "--here", "--set", "priority=3")
    assert head(shared) == main_head and "priority: 3" in (agent / "backlog/todo/mine-plan.md").read_text()
    shared.ok("add", "theirs")
    said = refused(agent, 1, "theirs-plan", "--here", "--set", "priority=1")
    assert "intake branch" in said and "without --here" in said


def test_uncommitted_changes_to_the_intake_copy_are_never_overwritten(shared):
    agent = shared.worktree("a1")
    shared.ok("add", "queued")
    task = shared / "backlog/todo/queued-plan.md"
    task.write_text(task.read_text() + "A note the user has not committed.\n")
    before, main_head = task.read_bytes(), head(shared)
    said = refused(agent, 1, "queued-plan", "--set", "priority=1")
    assert "uncommitted changes" in said and f"in {shared.path} is not what the intake branch main holds" in said
    assert task.read_bytes() == before and head(shared) == main_head


def test_a_stale_copy_of_a_task_settled_elsewhere_is_refused_naming_the_branch(shared):
    shared.ok("add", "gone")
    agent = shared.worktree("a1")
    agent.ok("take", "gone-plan")
    agent.ok("advance", "gone-plan")  # done on a1; main's todo/ copy is a stale copy
    said = refused(shared, 1, "gone-plan", "--set", "priority=1", kind="settled")
    assert "a1" in said and "stale" in said
    assert "done/" in refused(agent, 1, "gone-plan", "--set", "priority=1", kind="settled")


def test_in_flight_from_any_worktree_is_refused(shared):
    shared.ok("add", "busy")
    agent = shared.worktree("a1")
    agent.ok("take", "busy-plan")
    said = refused(shared, 1, "busy-plan", "--set", "priority=1", kind="held")
    assert "tester @ a1" in said


# -- the task's lock: re-checked under it ----------------------------------------------------------


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc to see the lock being waited for")
def test_a_claim_made_while_edit_waited_for_the_lock_is_a_lost_race(shared):
    """`edit` passes its first look, waits for the task's lock, and meanwhile the task is claimed:
    the re-check under the lock says so (exit 3) and the task is not written."""
    shared.ok("add", "race")
    todo = shared / "backlog/todo/race-plan.md"
    lock = common_dir(shared.path) / "backlog" / ".locks" / "race-plan.lock"
    with task_lock(shared.path, "race-plan"):
        proc = subprocess.Popen(
            [sys.executable, "-m", "maildir_backlog", "--json", "edit", "race-plan", "--set", "priority=1"],
            cwd=shared.path,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not holds_open(proc.pid, lock):
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        data = todo.read_bytes() + b"- 2026-05-16T14:22:00Z advanced to=doing claimer=other branch=other\n"
        (shared / "backlog/doing/race-plan.md").write_bytes(data)
        todo.unlink()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert json.loads(out)["kind"] == "conflict" and "in flight" in err
    assert (shared / "backlog/doing/race-plan.md").read_bytes() == data
    assert subject(shared) == "add(race-plan)"
