"""The claim lifecycle on both backends: full cycles, log lines, commits (SPEC §2, §5)."""

from __future__ import annotations

import json
import re
import socket
from datetime import datetime, timedelta, timezone

from conftest import git, snapshot

TS = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


def log_lines(path):
    return [line for line in path.read_text().splitlines() if re.match(rf"^- {TS} ", line)]


def subjects(repo, n):
    return git(repo.path, "log", f"-{n}", "--format=%s").splitlines()[::-1]


def test_add_take_progress_advance_done(anybk):
    anybk.ok("add", "foo")
    assert anybk.ok("take").strip() == "backlog/doing/foo-plan.md"
    assert anybk.ok("progress", "auth prototype\npassing locally").strip() == "backlog/doing/foo-plan.md"
    assert (
        anybk.ok("advance", "foo-plan", "--pr", "https://example.invalid/pull/123").strip()
        == "backlog/done/foo-plan.md"
    )
    done = anybk / "backlog/done/foo-plan.md"
    lines = log_lines(done)
    assert [l.split(" ", 3)[2] for l in lines] == ["advanced", "progress", "advanced"]
    assert lines[0].endswith("advanced to=doing claimer=tester branch=main budget=7d")  # the budget is fixed at claim
    assert lines[1].endswith("progress | auth prototype passing locally")
    assert lines[2].endswith("advanced to=done | PR=https://example.invalid/pull/123")
    assert not (anybk / "backlog/doing/foo-plan.md").exists()
    assert not (anybk / "backlog/todo/foo-plan.md").exists()
    expected = ["add(foo-plan)", "advance(foo-plan) → doing (tester @ main)"]
    if anybk.ok("where").startswith("backend: maildir-git"):
        expected.append("progress(foo-plan) auth prototype passing locally")
    expected.append("advance(foo-plan) → done PR=https://example.invalid/pull/123")
    assert subjects(anybk, len(expected)) == expected
    assert git(anybk.path, "status", "--porcelain") == ""
    assert "foo-plan.md" in git(anybk.path, "ls-files", "backlog/done")


def test_longer_pipeline_with_intake(repo):
    repo.ok("setup", "--backend=maildir-shared", "--pipeline", "inbox → todo → doing → reviewing → done")
    repo.ok("add", "feat")
    assert (repo / "backlog/inbox/feat-plan.md").exists()
    assert repo.ok("advance", "feat-plan").strip() == "backlog/todo/feat-plan.md"
    assert "backlog/todo/feat-plan.md" in git(repo.path, "ls-files", "backlog")
    assert repo.ok("take").strip() == "backlog/doing/feat-plan.md"
    head = git(repo.path, "rev-parse", "HEAD")
    assert repo.ok("advance", "feat-plan").strip() == "backlog/reviewing/feat-plan.md"
    assert git(repo.path, "rev-parse", "HEAD") == head, "a hop between shared piles does not commit"
    assert (repo / "backlog/reviewing/feat-plan.md").exists()
    status = repo.ok("status")
    assert "reviewing/feat-plan" in status and "inbox: 0" in status
    repo.ok("advance", "feat-plan")
    lines = log_lines(repo / "backlog/done/feat-plan.md")
    assert [l.split(" ")[3] for l in lines] == ["to=todo", "to=doing", "to=reviewing", "to=done"]


def test_longer_pipeline_git_backend_commits_every_hop(repo):
    repo.ok("setup", "--backend=maildir-git", "--pipeline", "todo doing reviewing done")
    repo.ok("add", "feat")
    repo.ok("take", "feat-plan")
    repo.ok("advance", "feat-plan")
    assert subjects(repo, 1) == ["advance(feat-plan) → reviewing (tester @ main)"]
    assert "backlog/reviewing/feat-plan.md" in git(repo.path, "ls-files", "backlog")


def test_cancel(anybk):
    anybk.ok("add", "foo")
    anybk.ok("take")
    assert anybk.ok("cancel", "foo-plan", "superseded by\nbar").strip() == "backlog/done/foo-plan.md"
    assert log_lines(anybk / "backlog/done/foo-plan.md")[-1].endswith("cancelled | superseded by bar")
    assert subjects(anybk, 1) == ["cancel(foo-plan) superseded by bar"]


def test_fail_retry_take(anybk):
    anybk.ok("add", "foo")
    anybk.ok("take")
    anybk.ok("progress", "tried")
    assert anybk.ok("fail", "foo-plan", "flaky upstream").strip() == "backlog/failed/foo-plan.md"
    assert subjects(anybk, 1) == ["fail(foo-plan) flaky upstream"]
    # a failed task is not claimable until retried
    assert anybk.run("take").stderr.strip() == "no available tasks"
    assert (
        anybk.ok("retry", "foo-plan", "upstream fixed", "--set", "priority=1", "--set", "timeout=2h").strip()
        == "backlog/todo/foo-plan.md"
    )
    assert subjects(anybk, 1) == ["retry(foo-plan) upstream fixed"]
    text = (anybk / "backlog/todo/foo-plan.md").read_text()
    assert text.startswith("---\npriority: 1\ntimeout: 2h\n---\n")
    assert anybk.ok("take").strip() == "backlog/doing/foo-plan.md"
    kinds = [l.split(" ")[2] for l in log_lines(anybk / "backlog/doing/foo-plan.md")]
    assert kinds == ["advanced", "progress", "failed", "retried", "advanced"]


def test_retry_set_edits_only_that_field(anybk):
    anybk.ok("add", "foo", "--priority", "5", "--timeout", "3d")
    anybk.ok("take")
    anybk.ok("fail", "foo-plan", "x")
    before = (anybk / "backlog/failed/foo-plan.md").read_bytes()
    anybk.ok("retry", "foo-plan", "again", "--set", "priority=2")
    after = (anybk / "backlog/todo/foo-plan.md").read_bytes()
    assert after.replace(b"priority: 2", b"priority: 5").startswith(before)


def test_retry_set_on_a_frontmatter_closed_by_five_dashes(anybk):
    """A `-----` closing line is valid for the parser: `--set` must edit that block, not the body."""
    anybk.ok("add", "foo")
    anybk.ok("take")
    anybk.ok("fail", "foo-plan", "x")
    failed = anybk / "backlog/failed/foo-plan.md"
    failed.write_bytes(b"---\ntimeout: 1h\n-----\n\n" + failed.read_bytes())
    git(anybk.path, "commit", "-qam", "hand edit")
    anybk.ok("retry", "foo-plan", "again", "--set", "timeout=1d")
    assert "timeout: 1d (default)" not in anybk.ok("show", "foo-plan")
    assert "timeout: 1d" in anybk.ok("show", "foo-plan")
    body = (anybk / "backlog/todo/foo-plan.md").read_text()
    assert body.startswith("---\ntimeout: 1d\n-----\n") and body.count("timeout") == 1


def test_retry_set_takes_every_key_the_spec_defines(anybk):
    """SPEC §5: `--set` takes every frontmatter key the spec defines, `timeout.<pile>` included;
    every value is written as what it means (a YAML string stays a string, whatever it looks like)."""
    anybk.ok("add", "dep")
    anybk.ok("add", "dep2")
    anybk.ok("add", "foo", "--priority", "5")
    anybk.ok("take", "foo-plan")
    anybk.ok("fail", "foo-plan", "x")
    sets = ["timeout.doing=2h", "timeout.reviewing=none", "priority=3", "timeout=1d"]
    sets += ["dependencies=dep-plan:yes: it must land first,dep2-plan", "owner=yes", "note=a: b # c"]
    anybk.ok("retry", "foo-plan", "again", *[arg for item in sets for arg in ("--set", item)])
    shown = json.loads(anybk.ok("--json", "show", "foo-plan"))
    fm = shown["frontmatter"]
    assert (fm["timeout.doing"], fm["timeout.reviewing"], fm["priority"], fm["timeout"]) == ("2h", "none", 3, "1d")
    assert fm["dependencies"] == {"dep-plan": "yes: it must land first", "dep2-plan": ""}
    assert (fm["owner"], fm["note"]) == ("yes", "a: b # c")
    claimed = json.loads(anybk.ok("--json", "take", "foo-plan", "--force"))  # dep-plan is not done
    assert claimed["budget"] == "2h" and claimed["budget_seconds"] == 7200, claimed


def test_add_depends_reason_that_yaml_would_read_as_another_type_stays_text(anybk):
    """`--depends x:yes` (or `:123`, `:null`, `:2026-01-01`) is a reason: written as a string."""
    anybk.ok("add", "dep")
    reasons = ["yes", "no", "123", "null", "2026-01-01", "on", "~", "a: b", "#tag", "'quoted'"]
    for k, reason in enumerate(reasons):
        anybk.ok("add", f"t{k}", "--depends", f"dep-plan:{reason}")
        fm = json.loads(anybk.ok("--json", "show", f"t{k}-plan"))["frontmatter"]
        assert fm["dependencies"] == {"dep-plan": reason}, (reason, fm)


def test_retry_refuses_done_and_bad_set(anybk):
    anybk.ok("add", "foo")
    anybk.ok("take")
    anybk.ok("advance", "foo-plan")
    proc = anybk.run("retry", "foo-plan", "again")
    assert proc.returncode == 1 and "terminal" in proc.stderr
    anybk.ok("add", "bar")
    anybk.ok("take")
    anybk.ok("fail", "bar-plan", "x")
    proc = anybk.run("retry", "bar-plan", "again", "--set", "priority=high")
    assert proc.returncode == 2 and "priority" in proc.stderr
    assert (anybk / "backlog/failed/bar-plan.md").exists()


def test_progress_finds_the_branch_claim(anybk):
    anybk.ok("add", "a")
    anybk.ok("add", "b")
    proc = anybk.run("progress", "nothing yet")
    assert proc.returncode == 1 and "no in-flight task" in proc.stderr
    anybk.ok("take", "a-plan")
    anybk.ok("progress", "on a")
    anybk.ok("take", "b-plan")
    proc = anybk.run("progress", "which one?")
    assert proc.returncode == 1 and "a-plan" in proc.stderr and "b-plan" in proc.stderr
    anybk.ok("progress", "on b", "--slug", "b-plan")
    assert log_lines(anybk / "backlog/doing/b-plan.md")[-1].endswith("progress | on b")
    proc = anybk.run("progress", "   ")
    assert proc.returncode == 2 and "empty" in proc.stderr


def test_advance_refusals(anybk):
    anybk.ok("add", "foo")
    assert anybk.run("advance", "nope-plan").returncode == 1
    anybk.ok("take")
    anybk.ok("advance", "foo-plan")
    proc = anybk.run("advance", "foo-plan")
    assert proc.returncode == 1 and "done/" in proc.stderr
    assert anybk.run("cancel", "foo-plan", "late").returncode == 1


def test_auto_pick_order_and_dependencies(anybk):
    anybk.ok("add", "low", "--priority", "5")
    anybk.ok("add", "base", "--priority", "3")  # first: a dependency must name a task (SPEC §5 add)
    anybk.ok("add", "high", "--priority", "1", "--depends", "base-plan:needs base")
    later = (datetime.now(timezone.utc) + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    anybk.ok("add", "newer", "--priority", "5", env={"GIT_COMMITTER_DATE": later})  # a second of its own
    # high is blocked on base; base has the best priority among the ready ones
    assert anybk.ok("take").strip() == "backlog/doing/base-plan.md"
    assert anybk.ok("take").strip() == "backlog/doing/newer-plan.md"  # same priority: newest first
    anybk.ok("advance", "base-plan")
    assert anybk.ok("take").strip() == "backlog/doing/high-plan.md"
    assert anybk.ok("take").strip() == "backlog/doing/low-plan.md"
    proc = anybk.run("take")
    assert proc.returncode == 0 and proc.stderr.strip() == "no available tasks" and proc.stdout == ""


def test_take_json(anybk):
    anybk.ok("add", "foo")
    import json

    data = json.loads(anybk.ok("--json", "take"))
    assert data["slug"] == "foo-plan" and data["pile"] == "doing" and data["claimer"] == "tester"
    data = json.loads(anybk.ok("--json", "take"))
    assert data["slug"] is None


def test_claimer_identity_precedence(anybk):
    for i in range(3):
        anybk.ok("add", f"t{i}")
    env = {"BACKLOG_CLAIMER": "", "CONDUCTOR_WORKSPACE_NAME": "austin v3", "CMUX_WORKSPACE_ID": "w9"}
    anybk.ok("take", "t0-plan", env=env)
    assert "claimer=conductor:austin-v3 " in (anybk / "backlog/doing/t0-plan.md").read_text()
    anybk.ok("take", "t1-plan", env={**env, "CONDUCTOR_WORKSPACE_NAME": ""})
    assert "claimer=cmux:w9 " in (anybk / "backlog/doing/t1-plan.md").read_text()
    anybk.ok("take", "t2-plan", env={"BACKLOG_CLAIMER": "", "USER": "ann"})
    host = socket.gethostname().split(".")[0]  # the name the command reads from uname, without socket
    assert f"claimer=ann@{host} branch=main" in (anybk / "backlog/doing/t2-plan.md").read_text()


def test_worklog_survives_moves_byte_exact(anybk):
    spec = "---\r\npriority: 2\r\nodd:   [1,2,  3]   \r\n---\r\n\r\n# CRLF task  \r\n\r\nBody.\r\n"
    (anybk / "backlog/todo/crlf.md").write_bytes(spec.encode())
    git(anybk.path, "add", "backlog/todo/crlf.md")
    git(anybk.path, "commit", "-qm", "hand-made task")
    anybk.ok("take", "crlf")
    anybk.ok("progress", "one")
    anybk.ok("advance", "crlf")
    data = (anybk / "backlog/done/crlf.md").read_bytes()
    assert data.startswith(spec.encode())
    assert data.count(b"\r\n---\r\n") == 2  # the frontmatter's closing line and the one log divider


def test_a_task_that_shows_the_log_format_in_a_fence_is_taken_with_a_log_of_its_own(anybk):
    """SPEC §2: an example of the log in a fenced code block is description. The task is shown
    with no log, the claim writes the first divider after the spec, and the spec stays byte for byte."""
    example = "- 2026-05-16T14:22:00Z advanced to=doing claimer=someone-else branch=elsewhere budget=1h"
    spec = f"# Document the log\n\nA log looks like this:\n\n```\n---\n\n{example}\n```\n\nSay so in the README.\n"
    (anybk / "backlog/todo/fenced.md").write_text(spec)
    git(anybk.path, "add", "backlog/todo/fenced.md")
    git(anybk.path, "commit", "-qm", "hand-made task")
    shown = json.loads(anybk.ok("--json", "show", "fenced"))
    assert shown["log"] == [] and shown["claim"] is None, shown
    anybk.ok("take", "fenced")
    anybk.ok("advance", "fenced")
    data = (anybk / "backlog/done/fenced.md").read_text()
    assert data.startswith(spec) and data[len(spec) :].startswith("\n---\n\n- ")
    assert [line.split()[2] for line in log_lines(anybk / "backlog/done/fenced.md")][1:] == ["advanced", "advanced"]
    done = json.loads(anybk.ok("--json", "show", "fenced"))
    assert [e["kind"] for e in done["log"]] == ["advanced", "advanced"] and done["claim"]["claimer"] == "tester"


def test_named_take_of_a_blocked_task_is_refused_unless_forced(anybk):
    """SPEC §5: `take SLUG` of a task whose dependencies are not done is refused (exit 1, kind
    `blocked`, naming them) and changes nothing; `--force` claims it, the claim line says so."""
    anybk.ok("add", "base")
    anybk.ok("add", "top", "--depends", "base-plan")
    before = snapshot(anybk)
    proc = anybk.run("take", "top-plan")
    assert proc.returncode == 1 and proc.stdout == ""
    assert "top-plan is blocked: it depends on base-plan, not done yet" in proc.stderr
    assert json.loads(anybk.run("--json", "take", "top-plan").stdout)["kind"] == "blocked"
    assert json.loads(anybk.run("--json", "advance", "top-plan").stdout)["kind"] == "blocked"
    assert snapshot(anybk) == before
    proc = anybk.run("take", "top-plan", "--force")
    assert proc.returncode == 0 and proc.stdout.strip() == "backlog/doing/top-plan.md"
    assert proc.stderr.strip() == "warning: top-plan claimed with --force: it depends on base-plan, not done yet"
    claim = [line for line in (anybk / "backlog/doing/top-plan.md").read_text().splitlines() if " advanced " in line]
    assert claim[-1].endswith(" unmet=base-plan")
    assert anybk.run("take", "--force").returncode == 2  # auto-pick never claims a blocked task
