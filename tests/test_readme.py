"""The README's harness sections, followed step by step (issue 30): each `sh` block under
"Connect a harness" is run line by line in a scratch repository with a backlog, `backlog` being
this checkout, and the harness's own CLI where it has one (installed with npm into a cache by
tests/test_setup_agents.py; those steps skip without node/npm). A line's comment after `# ` that
quotes what a command prints is checked against what it printed.

One step is a person's: `claude` alone opens Claude Code's trust dialog. The test gives the
answer the dialog records (the project trusted in `~/.claude.json`), then goes on."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from pathlib import Path

import yaml
from conftest import ROOT
from test_setup_agents import CLAUDE_CODE, CODEX, harness_env, npm_tool

README = (ROOT / "README.md").read_text(encoding="utf-8")
SECTION = README.split("### Connect a harness: `backlog setup --agent`", 1)[1].split("\n## ", 1)[0]


def steps(harness: str) -> list[tuple[str, str]]:
    """(command, comment) of each line of the `sh` block under `#### <harness>`."""
    part = SECTION.split(f"#### {harness}\n", 1)[1].split("\n#### ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", part, re.S)
    assert block is not None, f"no sh block under {harness}"
    found = []
    for line in block.group(1).splitlines():
        command, _, comment = line.partition("   # ")
        found.append((command.strip(), comment.strip()))
    return found


def run(command: str, repo, env: dict[str, str], tools: dict[str, Path]) -> str:
    """One line, as a shell runs it in the repository; `claude`/`codex` are the installed CLIs."""
    first = command.split()[0]
    if first in tools:
        command = f'"{tools[first]}"' + command[len(first) :]
    proc = subprocess.run(
        ["sh", "-c", command],
        cwd=repo.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, f"{command}: {proc.stderr}{proc.stdout}"
    return proc.stdout


def words(text: str) -> list[str]:
    return text.split()


def test_the_readme_names_the_three_harnesses():
    assert [h for h in ("Claude Code", "Codex", "Cursor") if f"#### {h}\n" in SECTION] == [
        "Claude Code",
        "Codex",
        "Cursor",
    ]
    for harness in ("Claude Code", "Codex", "Cursor"):
        assert steps(harness)[0][0].startswith("backlog setup --agent ")


def test_claude_code_as_the_readme_says(shared, tmp_path):
    tools = {"claude": npm_tool(*CLAUDE_CODE)}
    env = harness_env(tmp_path)
    for command, comment in steps("Claude Code"):
        if command == "claude":  # the trust dialog, answered yes: what Claude Code records
            state = Path(os.environ["HOME"]) / ".claude.json"
            known = json.loads(state.read_text()) if state.exists() else {}
            known.setdefault("projects", {})[os.path.realpath(shared.path)] = {"hasTrustDialogAccepted": True}
            state.write_text(json.dumps(known))
            continue
        out = run(command, shared, env, tools)
        if command.startswith("claude "):
            assert comment in out.splitlines(), out
    settings = json.loads((shared / ".claude/settings.json").read_text())
    hook = settings["hooks"]["SessionStart"][0]
    assert set(hook["matcher"].split("|")) == {"startup", "resume", "clear", "compact"}
    # the hook's command, run as Claude Code runs it (a shell in the project, the hook input on stdin)
    env_file = tmp_path / "claude-env"
    proc = subprocess.run(
        ["sh", "-c", hook["hooks"][0]["command"]],
        cwd=shared.path,
        env=dict(env, CLAUDE_ENV_FILE=str(env_file), BACKLOG_CLAIMER=""),
        input=json.dumps({"session_id": "abc123", "hook_event_name": "SessionStart", "source": "compact"}),
        capture_output=True,
        text=True,
    )
    said = json.loads(proc.stdout)
    assert said["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert "backlog take --json" in said["hookSpecificOutput"]["additionalContext"]
    assert env_file.read_text() == "export BACKLOG_CLAIMER=claude:abc123\n"


def test_codex_as_the_readme_says(shared, tmp_path):
    tools = {"codex": npm_tool(*CODEX)}
    env = harness_env(tmp_path)
    (Path(os.environ["HOME"]) / ".codex").mkdir(exist_ok=True)
    for command, comment in steps("Codex"):
        out = run(command, shared, env, tools)
        if command.startswith("codex "):
            want = words(comment)  # the row as the README quotes it (its first columns)
            assert any(words(line)[: len(want)] == want for line in out.splitlines()), out
    assert tomllib.loads((shared / ".codex/config.toml").read_text())["mcp_servers"]["backlog"]["args"] == ["mcp"]


def test_cursor_as_the_readme_says(shared, tmp_path):
    env = harness_env(tmp_path)
    for command, _comment in steps("Cursor"):
        run(command, shared, env, {})
    server = json.loads((shared / ".cursor/mcp.json").read_text())["mcpServers"]["backlog"]
    assert server["command"] == "backlog" and server["args"][-1] == "mcp"
    rule = (shared / ".cursor/rules/backlog.mdc").read_text()
    meta = yaml.safe_load(rule.split("---\n")[1])
    assert meta["alwaysApply"] is True and "backlog prime" in rule
    assert "<!-- backlog:begin -->" in (shared / "AGENTS.md").read_text()
    assert "chore(backlog)" in shared.git("log", "-1", "--format=%s")
