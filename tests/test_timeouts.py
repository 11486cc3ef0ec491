"""Time-dependent logic, with the clock frozen in-process (freezegun): budgets, rescue, prelude."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from conftest import git
from freezegun import freeze_time

from maildir_backlog import lifecycle
from maildir_backlog.commands import claim as verbs
from maildir_backlog.commands import progress as progress_cmd
from maildir_backlog.commands import read
from maildir_backlog.errors import BacklogError

T0 = datetime(2026, 5, 16, 14, 22, 0, tzinfo=timezone.utc)


def claim(repo, slug="x", **frontmatter):
    meta = "".join(f"{k}: {v}\n" for k, v in frontmatter.items())
    body = (f"---\n{meta}---\n\n" if meta else "") + f"# {slug}\n\n---\n"
    (repo / f"backlog/todo/{slug}.md").write_text(body)
    git(repo.path, "add", "backlog/todo")
    git(repo.path, "commit", "-qm", f"task {slug}")
    with freeze_time(T0):
        verbs.take(repo.context(), slug)


@pytest.mark.parametrize(
    "timeout, budget",
    [
        ("30s", timedelta(seconds=30)),
        ("45m", timedelta(minutes=45)),
        ("6h", timedelta(hours=6)),
        ("3d", timedelta(days=3)),
        ("2w", timedelta(weeks=2)),
        (None, timedelta(days=7)),
    ],
)
def test_rescue_refused_before_budget_allowed_after(anybk, timeout, budget):
    claim(anybk, **({"timeout": timeout} if timeout else {}))
    with freeze_time(T0 + budget - timedelta(seconds=1)):
        with pytest.raises(BacklogError) as refused:
            verbs.rescue(anybk.context(), "x")
        assert "1s left" in refused.value.message and refused.value.code == 1
    with freeze_time(T0 + budget + timedelta(seconds=1)):
        result = verbs.rescue(anybk.context(), "x")
    assert result.data["rescued"]
    text = (anybk / "backlog/doing/x.md").read_text()
    stamp = (T0 + budget + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert f"- {stamp} rescued claimer=tester branch=main" in text


def test_progress_does_not_reset_the_clock(anybk):
    claim(anybk, timeout="1h")
    with freeze_time(T0 + timedelta(minutes=59)):
        progress_cmd.progress(anybk.context(), "still going", "x")
    with freeze_time(T0 + timedelta(minutes=61)):
        status = read.status(anybk.context())
        assert status.data["in_flight"][0]["stale"] is True
        assert "STALE" in "\n".join(status.lines)
        verbs.rescue(anybk.context(), "x")  # allowed: progress did not restart the budget


def test_rescue_restarts_the_clock(anybk):
    claim(anybk, timeout="1h")
    with freeze_time(T0 + timedelta(hours=2)):
        verbs.rescue(anybk.context(), "x")
    with freeze_time(T0 + timedelta(hours=2, minutes=30)):
        with pytest.raises(BacklogError, match="30m left"):
            verbs.rescue(anybk.context(), "x")


def test_project_default_timeout(repo):
    repo.ok("setup", "--backend=maildir-shared")
    agents = repo / "backlog/AGENTS.md"
    agents.write_text(agents.read_text().replace("`timeout: 7d`", "`timeout: 24h`"))
    git(repo.path, "commit", "-qam", "one day")
    claim(repo)
    with freeze_time(T0 + timedelta(hours=23, minutes=59, seconds=59)):
        with pytest.raises(BacklogError, match="within its budget \\(24h \\(default\\)\\)"):
            verbs.rescue(repo.context(), "x")
    with freeze_time(T0 + timedelta(hours=24, seconds=1)):
        verbs.rescue(repo.context(), "x")


def test_take_prelude_fails_other_timed_out_tasks(anybk):
    claim(anybk, "old", timeout="1h")
    claim(anybk, "fresh", timeout="1d")
    (anybk / "backlog/todo/next.md").write_text("# next\n")
    git(anybk.path, "add", "backlog/todo")
    git(anybk.path, "commit", "-qm", "next")
    with freeze_time(T0 + timedelta(hours=2)):
        result = verbs.take(anybk.context())
    assert result.data["slug"] == "next"
    assert any("failed old" in line for line in result.stderr)
    failed = (anybk / "backlog/failed/old.md").read_text()
    assert "failed by=tester | timeout: budget=1h, claimed=2026-05-16T14:22:00Z, claimer=tester" in failed
    assert (anybk / "backlog/doing/fresh.md").exists()


def test_take_of_a_timed_out_in_flight_task_rescues_it(anybk):
    claim(anybk, "x", timeout="1h")
    claim(anybk, "y", timeout="1h")
    with freeze_time(T0 + timedelta(hours=3)):
        result = verbs.take(anybk.context(), "x")
    assert result.data.get("rescued")
    assert " rescued claimer=tester" in (anybk / "backlog/doing/x.md").read_text()
    assert (anybk / "backlog/failed/y.md").exists()  # the prelude still failed the other one


def test_default_reason_marks_default_budget(anybk):
    claim(anybk, "x")
    with freeze_time(T0 + timedelta(days=8)):
        lifecycle.fail_if_timed_out(anybk.context(), "x")
    assert (
        "timeout: budget=7d (default), claimed=2026-05-16T14:22:00Z, claimer=tester"
        in (anybk / "backlog/failed/x.md").read_text()
    )


def test_prelude_leaves_an_ended_task_to_the_janitor(anybk):
    """A crash after `advanced to=done` was written, before the move: the prelude must not turn
    that completed task into a failed one when its budget runs out."""
    claim(anybk, "x", timeout="1h")
    from maildir_backlog.logline import append_line, make_entry

    ctx = anybk.context()
    loc = ctx.backend.locate("x")[0]
    with freeze_time(T0 + timedelta(minutes=30)):
        ended = append_line(loc.path.read_bytes(), make_entry("advanced", {"to": "done"}))
    loc.path.write_bytes(ended)
    if not loc.shared:
        git(anybk.path, "commit", "-qam", "crash left the terminal line")
    (anybk / "backlog/todo/y.md").write_text("# y\n")
    git(anybk.path, "add", "backlog/todo/y.md")
    git(anybk.path, "commit", "-qm", "y")
    with freeze_time(T0 + timedelta(hours=3)):
        result = verbs.take(anybk.context())
    assert result.data["slug"] == "y" and not result.stderr
    assert " failed " not in loc.path.read_text()


def test_an_agent_whose_claim_the_janitor_timed_out_is_told_its_budget_ran_out(shared):
    """SPEC §5 Ownership: a verb on a task that left flight elsewhere says what became of it as
    its log records it: "failed by timeout on branch main at T", not just "failed"."""
    agent = shared.worktree("agent")
    shared.ok("add", "slow", "--timeout", "1h")
    with freeze_time(T0):
        agent.ok("take", "slow-plan")
    with freeze_time(T0 + timedelta(hours=2)):
        assert "TIMED OUT" in shared.ok("maintain")  # the janitor, in the main worktree
        for argv in (("advance", "slow-plan"), ("progress", "--slug", "slow-plan", "note"), ("fail", "slow-plan", "x")):
            proc = agent.run(*argv)
            assert proc.returncode == 1
            assert (
                "failed by timeout (budget=1h, claimed=2026-05-16T14:22:00Z, claimer=tester) on branch main"
                in proc.stderr
            )
        here = shared.run("advance", "slow-plan")  # the janitor's own worktree holds the failed copy
        assert here.returncode == 1 and "is in failed/ (failed by timeout (budget=1h" in here.stderr


def test_a_refusal_names_the_reason_a_task_was_failed_or_cancelled(shared):
    agent = shared.worktree("agent")
    shared.ok("add", "a")
    shared.ok("add", "b")
    agent.ok("take", "a-plan")
    agent.ok("take", "b-plan")
    agent.ok("fail", "a-plan", "upstream API gone")
    agent.ok("cancel", "b-plan", "superseded by sso")
    assert "is in failed/ (failed (upstream API gone))" in agent.run("advance", "a-plan").stderr
    assert "is in done/ (cancelled (superseded by sso))" in agent.run("advance", "b-plan").stderr
    proc = shared.run("progress", "--slug", "a-plan", "x")  # another branch: the ledger and that copy
    assert "already settled (failed (upstream API gone)) on branch agent" in proc.stderr
    assert "already settled (cancelled (superseded by sso)) on branch agent" in shared.run("take", "b-plan").stderr
