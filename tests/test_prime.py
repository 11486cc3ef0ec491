"""`backlog prime` (SPEC §5), `prime --skill`, the workflow in the generated backlog/AGENTS.md,
and setup linking the guide from the repository's own AGENTS.md / CLAUDE.md."""

from __future__ import annotations

import json
import os

import frontmatter
import pytest
from conftest import git
from test_setup import failing_hook, state

REVIEW = "todo doing reviewing done"


def loop_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line[:1].isdigit() and ". `backlog" in line]


def test_prime_tells_the_workflow_of_this_project(repo):
    repo.ok("setup", "--backend=maildir-shared", "--pipeline", REVIEW)
    out = repo.ok("prime")
    assert "Backend: maildir-shared" in out and "todo → doing → reviewing → done" in out
    assert "`tester` (from $BACKLOG_CLAIMER)" in out and "export BACKLOG_CLAIMER=" in out
    assert "branch: `main`" in out
    steps = loop_lines(out)
    assert [s.split("`")[1] for s in steps] == [
        "backlog ready --json",
        "backlog take --json",
        'backlog progress "note"',
        "backlog advance SLUG",
        "backlog advance SLUG [--pr URL]",
    ]
    assert "doing → reviewing" in steps[3] and "reviewing → done" in steps[4]
    for code in ("- 0:", "- 1:", "- 2:", "- 3:", "- 4:"):
        assert code in out
    assert "## Reading --json" in out and "budget_seconds" in out and '{"error"' in out


def test_prime_on_the_default_pipeline_and_another_identity(gitbk):
    out = gitbk.ok("prime", env={"BACKLOG_CLAIMER": "", "CONDUCTOR_WORKSPACE_NAME": "austin-v3"})
    steps = loop_lines(out)
    assert len(steps) == 4 and "doing → done" in steps[3]
    assert "`conductor:austin-v3` (from $CONDUCTOR_WORKSPACE_NAME)" in out
    data = json.loads(gitbk.ok("--json", "prime", env={"BACKLOG_CLAIMER": "", "CONDUCTOR_WORKSPACE_NAME": "x"}))
    assert data["claimer"] == "conductor:x" and data["claimer_from"] == "CONDUCTOR_WORKSPACE_NAME"
    assert data["loop"] == [s.split(". ", 1)[1] for s in steps]


def test_prime_explains_exit_codes_0_to_4(gitbk):
    """SPEC §7: 0 success (no tasks too), 1 refused (repeating will not help), 2 usage or invalid,
    3 lost a race (retry now), 4 unavailable (retry later); and the error object's keys."""
    data = json.loads(gitbk.ok("--json", "prime"))
    codes = data["exit_codes"]
    assert list(codes) == ["0", "1", "2", "3", "4"]
    assert "no available tasks" in codes["0"] and "will not help" in codes["1"] and "fix the call" in codes["2"]
    assert "retry now" in codes["3"] and "retry the same call later" in codes["4"]
    assert "remote" in codes["4"] and "lock" in codes["4"] and "nothing changed" in codes["4"]
    assert "- 4: unavailable" in data["text"] and '"kind"' in data["text"] and '"retryable"' in data["text"]


def test_prime_with_an_intake_pile_says_how_tasks_reach_todo(repo):
    repo.ok("setup", "--backend=maildir-git", "--pipeline", "inbox todo doing done")
    assert "land in `inbox/`, before `todo`" in repo.ok("prime")


def test_prime_outside_a_backlog_is_one_clear_error(repo):
    proc = repo.run("prime")
    assert proc.returncode == 1 and "no backlog here" in proc.stderr and "Traceback" not in proc.stderr


def test_prime_skill_writes_skill_md(shared, tmp_path):
    target = tmp_path / "skills" / "backlog"
    out = shared.ok("prime", "--skill", str(target))
    assert out.strip() == f"wrote {target / 'SKILL.md'}"
    post = frontmatter.loads((target / "SKILL.md").read_text())
    assert post["name"] == "backlog" and "backlog" in post["description"]
    assert post.content.strip() == shared.ok("prime").strip()
    shared.ok("prime", "--skill", str(target))  # again: overwritten, not refused
    assert git(shared.path, "status", "--porcelain") == ""


@pytest.mark.parametrize("piles", ["todo doing done", REVIEW, "inbox todo doing qa reviewing done", "todo done"])
def test_generated_agents_md_says_the_loop_for_any_pipeline(repo, piles):
    repo.ok("setup", "--backend=maildir-git", "--pipeline", piles)
    text = (repo / "backlog/AGENTS.md").read_text()
    names = piles.split()
    in_flight = names[names.index("todo") + 1 : -1]
    advances = [line for line in loop_lines(text) if "backlog advance SLUG" in line]
    assert len(advances) == len(in_flight)
    for line, pile, nxt in zip(advances, in_flight, (in_flight + ["done"])[1:], strict=True):
        assert f"{pile} → {nxt}" in line
    assert "backlog prime" in text
    assert loop_lines(text) == loop_lines(repo.ok("prime"))  # one workflow, said alike


# -- setup links the guide from the repository's own agent files ---------------------------
LINE = "Task queue: see [backlog/AGENTS.md](backlog/AGENTS.md); `backlog prime` prints the workflow for agents.\n"


def commit_files(repo, **files: str) -> None:
    for name, text in files.items():
        (repo / name).write_text(text)
    git(repo.path, "add", *files)
    git(repo.path, "commit", "-q", "-m", "agent files")


def head_files(repo) -> list[str]:
    return git(repo.path, "show", "--name-only", "--format=", "HEAD").split()


def test_setup_appends_one_line_to_agents_and_claude_md(repo):
    commit_files(repo, **{"AGENTS.md": "# Agents\n\nBe kind.\n", "CLAUDE.md": "No trailing newline"})
    data = json.loads(repo.ok("--json", "setup", "--backend=maildir-shared"))
    assert data["linked"] == ["AGENTS.md", "CLAUDE.md"]
    assert (repo / "AGENTS.md").read_text() == "# Agents\n\nBe kind.\n\n" + LINE
    assert (repo / "CLAUDE.md").read_text() == "No trailing newline\n\n" + LINE
    assert {"AGENTS.md", "CLAUDE.md"} <= set(head_files(repo))
    assert git(repo.path, "status", "--porcelain") == ""


def test_setup_links_a_symlinked_claude_md_once_and_keeps_crlf(repo):
    (repo / "AGENTS.md").write_bytes(b"# Agents\r\n")
    os.symlink("AGENTS.md", repo / "CLAUDE.md")
    git(repo.path, "add", "AGENTS.md", "CLAUDE.md")
    git(repo.path, "commit", "-q", "-m", "agent files")
    out = repo.ok("setup", "--backend=maildir-git")
    assert "linked the backlog guide from AGENTS.md" in out
    assert (repo / "AGENTS.md").read_bytes() == b"# Agents\r\n\r\n" + LINE.rstrip("\n").encode() + b"\r\n"
    assert os.readlink(repo / "CLAUDE.md") == "AGENTS.md"


def test_setup_leaves_alone_a_linked_or_dirty_agents_md(repo):
    commit_files(repo, **{"AGENTS.md": "see backlog/AGENTS.md\n", "CLAUDE.md": "# Claude\n"})
    (repo / "CLAUDE.md").write_text("# Claude\n\nmy unsaved edit\n")
    out = repo.ok("setup", "--backend=maildir-git")
    assert "CLAUDE.md has uncommitted changes" in out
    assert (repo / "AGENTS.md").read_text() == "see backlog/AGENTS.md\n"
    assert (repo / "CLAUDE.md").read_text() == "# Claude\n\nmy unsaved edit\n"
    assert "CLAUDE.md" not in head_files(repo) and "AGENTS.md" not in head_files(repo)


def test_setup_without_agent_files_links_nothing(repo):
    assert json.loads(repo.ok("--json", "setup", "--backend=maildir-git"))["linked"] == []
    assert not (repo / "AGENTS.md").exists() and not (repo / "CLAUDE.md").exists()


def test_setup_rollback_restores_agents_md(repo):
    commit_files(repo, **{"AGENTS.md": "# Agents\n"})
    failing_hook(repo)
    before = state(repo)
    proc = repo.run("setup", "--backend=maildir-shared")
    assert proc.returncode == 1 and "hook refuses" in proc.stderr
    assert state(repo) == before
    assert (repo / "AGENTS.md").read_text() == "# Agents\n"


def test_prime_for_tools_speaks_of_tool_calls_on_any_pipeline(repo):
    """`prime(tools=True)` (what the MCP server's `prime` tool returns): the same guide told in
    tool calls, one `advance` per stage, the intake pile included; the command's text unchanged."""
    from maildir_backlog import Backlog

    repo.ok("setup", "--backend=maildir-git", "--pipeline", "inbox todo doing reviewing done")
    guide = Backlog(repo.path).prime(tools=True)
    assert "`backlog " not in guide.text and "--json" not in guide.text
    assert [step.split("`")[1] for step in guide.loop] == ["ready", "take", "progress", "advance", "advance"]
    assert "doing → reviewing" in guide.loop[3] and "reviewing → done" in guide.loop[4]
    assert "New tasks (the `add` tool) land in `inbox/`" in guide.text
    assert Backlog(repo.path).prime().text == repo.ok("prime")


# -- the whole loop, and the short form a session-start hook injects (issue 30) ------------------


def test_prime_tells_the_verbs_around_the_loop_and_how_tasks_travel(shared):
    """Beyond take/progress/advance: a follow-up with --depends, show, release, fail/retry, edit,
    and how tasks and claims reach other clones, in commands and in tool calls alike."""
    out = shared.ok("prime")
    for said in (
        "backlog add SLUG followup --depends",
        "backlog show SLUG",
        "backlog release SLUG",
        "backlog fail SLUG",
        "backlog retry SLUG",
        "backlog edit SLUG --set",
        "## Between clones",
        "git push",
        "remote: <name>",
    ):
        assert said in out, said
    from maildir_backlog import Backlog

    told = Backlog(shared.path).prime(tools=True).text
    for tool in ("the `add` tool", "the `show` tool", "the `release` tool", "the `retry` tool", "the `edit` tool"):
        assert tool in told, tool
    assert "`backlog " not in told


def test_prime_says_how_claims_travel_when_a_remote_is_declared(repo, tmp_path):
    git(tmp_path, "init", "-q", "--bare", "remote.git")
    repo.git("remote", "add", "origin", (tmp_path / "remote.git").as_uri())
    repo.ok("setup", "--backend=maildir-shared")
    agents = repo / "backlog" / "AGENTS.md"
    agents.write_text(agents.read_text().replace("maildir-shared\n", "maildir-shared\n\n- `remote: origin`\n", 1))
    out = repo.ok("prime")
    assert "through the git remote `origin`" in out and "remote: <name>" not in out


def hook_context(out: str) -> str:
    said = json.loads(out)
    assert set(said) == {"hookSpecificOutput"}
    assert said["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    return said["hookSpecificOutput"]["additionalContext"]


HOOK_INPUT = json.dumps({"session_id": "9f2c-41aa_b", "hook_event_name": "SessionStart", "source": "compact"})


def test_prime_hook_prints_the_short_guide_as_session_start_hook_json(shared, tmp_path):
    """What Claude Code's SessionStart hook documents: one JSON object, the guide as
    `hookSpecificOutput.additionalContext`. The short form stays a few hundred tokens (at most
    1,200 characters, about 300 tokens at four characters a token) and points to `prime --full`;
    the session's claimer is exported for its shell through $CLAUDE_ENV_FILE."""
    env_file = tmp_path / "claude-env"
    out = shared.ok("prime", "--hook", input=HOOK_INPUT, env={"BACKLOG_CLAIMER": "", "CLAUDE_ENV_FILE": str(env_file)})
    text = hook_context(out)
    assert len(text) <= 1200, len(text)
    assert "`claude:9f2c-41aa_b`" in text and "backlog prime --full" in text
    for verb in ("take --json", "progress", "advance SLUG", "add SLUG followup", "release SLUG", "fail SLUG"):
        assert verb in text, verb
    assert env_file.read_text() == "export BACKLOG_CLAIMER=claude:9f2c-41aa_b\n"
    whole = hook_context(shared.ok("prime", "--hook", "--full", input=HOOK_INPUT, env={"BACKLOG_CLAIMER": ""}))
    assert "## Beyond the loop" in whole and len(whole) > len(text)
    assert shared.ok("prime", "--full") == shared.ok("prime")


@pytest.mark.parametrize(
    "given",
    ["", "not json", "[]", '{"session_id": 7}', '{"session_id": "a b; rm -rf ~"}', '{"session_id": "$(id)"}'],
)
def test_prime_hook_exports_no_claimer_it_cannot_trust(shared, tmp_path, given):
    """The session id is written into a shell file: anything but a plain token is not exported
    (the guide still comes, told as the identity in effect); a claimer already set is kept."""
    env_file = tmp_path / "claude-env"
    out = shared.ok("prime", "--hook", input=given, env={"BACKLOG_CLAIMER": "", "CLAUDE_ENV_FILE": str(env_file)})
    assert "You are `claude:" not in hook_context(out)
    assert not env_file.exists()
    kept = shared.ok("prime", "--hook", input=HOOK_INPUT, env={"CLAUDE_ENV_FILE": str(env_file)})
    assert "You are `tester`" in hook_context(kept) and not env_file.exists()
