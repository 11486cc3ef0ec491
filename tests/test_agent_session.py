"""One agent's session across three worktrees and two clones (issue 20's acceptance): it files a
follow-up, finishes a dependency, is displaced, and reads every answer from `--json` alone.

Clone A has the main worktree (the intake branch) and the agent's worktree `w1`; clone B, on
another machine as far as the tool knows, shares only the remote. Run with
`BACKLOG_TRANSCRIPT=1 python -m pytest -s tests/test_agent_session.py` to print the session as a
transcript: each call, where and as whom it ran, and the JSON it answered."""

from __future__ import annotations

import json
import os
from pathlib import Path

from conftest import Repo, git
from test_remote import backdated, make_world, run

from maildir_backlog import change
from maildir_backlog import git as bgit
from maildir_backlog.remote import Remote

TRANSCRIPT = bool(os.environ.get("BACKLOG_TRANSCRIPT"))


class Session:
    def __init__(self, places: dict[str, Path]) -> None:
        self.places = places

    def say(self, text: str) -> None:
        if TRANSCRIPT:
            print(f"\n# {text}")

    def json(self, place: str, who: str, *args: str, code: int = 0) -> dict:
        proc = run(self.places[place], "--json", *args, claimer=who)
        if TRANSCRIPT:
            shown = " ".join(a if " " not in a else repr(a) for a in args)
            print(f"[{place}] {who}$ backlog --json {shown}   (exit {proc.returncode})")
            print(f"  {proc.stdout.strip()}")
        assert proc.returncode == code, (args, proc.returncode, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr
        return json.loads(proc.stdout)


def slugs(reply: dict) -> list[str]:
    return [t["slug"] for t in reply["tasks"]]


def test_one_agent_session_across_three_worktrees_and_two_clones(tmp_path):
    world = make_world(tmp_path / "w", [])
    a = world.clone("a")
    for args in (("schema", "--priority", "1"), ("api", "--priority", "2", "--depends", "schema-plan"), ("docs",)):
        assert run(a.path, "add", *args).returncode == 0
    git(a.path, "push", "-q", "origin", "main")
    git(a.path, "worktree", "add", "-q", "-b", "w1", str(tmp_path / "w1"))
    b = world.clone("b")
    s = Session({"A:main": a.path, "A:w1": tmp_path / "w1", "B:main": b.path})

    s.say("ada starts in her worktree w1 of clone A: what is there to do?")
    assert slugs(s.json("A:w1", "ada", "ready")) == ["schema-plan", "docs-plan"]  # api waits for schema
    claim = s.json("A:w1", "ada", "take")
    assert claim["slug"] == "schema-plan" and claim["branch"] == "w1" and claim["budget_seconds"] == 7 * 86400

    s.say("she finds more work and files a follow-up; it lands on the intake branch, not on w1")
    filed = s.json("A:w1", "ada", "add", "parser-fix", "followup", "--priority", "3", "--depends", "schema-plan")
    assert filed["where"] == "intake:main" and filed["branch"] == "main"

    s.say("the lead, in the main worktree, sees the follow-up at once, blocked by ada's claim")
    rows = {t["slug"]: t for t in s.json("A:main", "lead", "list")["tasks"]}
    assert rows["parser-fix-followup"]["blocked_by"] == ["schema-plan"]
    assert rows["schema-plan"]["state"] == "in flight" and "ada @ w1" in rows["schema-plan"]["detail"]

    s.say("cy, on clone B, is never offered what ada holds")
    seen = s.json("B:main", "cy", "ready")
    assert seen["remote"] == "reached" and slugs(seen) == ["docs-plan"]

    s.say("ada finishes the dependency on w1 (not merged anywhere)")
    assert s.json("A:w1", "ada", "advance", "schema-plan")["pile"] == "done"
    after = s.json("A:main", "lead", "ready")
    assert slugs(after) == ["api-plan", "parser-fix-followup", "docs-plan"]  # both dependents are free

    s.say("ada takes the next task; then eight days pass with no word from her (budget 7d)")
    assert s.json("A:w1", "ada", "take")["slug"] == "api-plan"
    age_claim(tmp_path / "w1", "api-plan", a)

    s.say("cy, on clone B, takes the timed-out task over")
    taken = s.json("B:main", "cy", "take", "api-plan")
    assert taken["rescued"] is True and taken["claimer"] == "cy" and taken["branch"] == "main"

    s.say("ada comes back: her note is refused, and the error says who holds the task now")
    refused = s.json("A:w1", "ada", "progress", "still on it", "--slug", "api-plan", code=1)
    assert refused["kind"] == "held" and refused["retryable"] is False
    assert (refused["holder"]["claimer"], refused["holder"]["branch"]) == ("cy", "main")

    s.say("so she moves on to her own follow-up, which auto-pick now offers her")
    nxt = s.json("A:w1", "ada", "take")
    assert nxt["slug"] == "parser-fix-followup" and nxt["frontmatter"]["dependencies"] == {"schema-plan": ""}
    status = s.json("A:main", "lead", "status")
    assert status["remote"] == "reached" and status["counts"]["todo"] == 1  # docs-plan
    flying = {t["slug"]: t for t in status["in_flight"]}
    assert flying["parser-fix-followup"]["claimer"] == "ada" and "elsewhere" not in flying["parser-fix-followup"]
    assert "cy @ main" in flying["api-plan"]["elsewhere"]  # ada's old copy is not shown as the claim of record


def age_claim(worktree: Path, slug: str, repo: Repo) -> None:
    """Make the claim of `slug` eight days old, here and on the remote (as eight days would)."""
    pile = Path(git(worktree, "rev-parse", "--path-format=absolute", "--git-common-dir").strip()) / "backlog/doing"
    old = backdated((pile / f"{slug}.md").read_bytes(), 8 * 86400)
    (pile / f"{slug}.md").write_bytes(old)
    remote = Remote(bgit.discover(worktree), "origin")
    change.run(change.Change((change.Publish(lambda tx: remote.update(slug, old, tx)),)), remote.repo)
