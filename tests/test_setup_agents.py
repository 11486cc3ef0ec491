"""`backlog setup --agent NAME` (SPEC §9, docs/agents.md): each harness's files in its own format,
merged into what is there, refused when unparsable, idempotent, `--check`, `--remove`; the
claimer a harness-started server derives; and the harnesses' own CLIs reading what was written
(`claude mcp list`, `codex mcp list`, installed with npm into a cache when node is present)."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, git, snapshot
from jsonschema import Draft202012Validator

from maildir_backlog import harness, limits, schemagen, verbs

ALL = ("--agent", "claude", "--agent", "codex", "--agent", "cursor")
FILES = (".mcp.json", ".claude/settings.json", ".codex/config.toml", ".cursor/mcp.json", ".cursor/rules/backlog.mdc")
WRITTEN = (*FILES, "AGENTS.md")
SERVER = {"command": "backlog", "args": ["mcp"]}


def setup(repo, *args: str, code: int = 0) -> dict:
    proc = repo.run("--json", "setup", *args)
    assert proc.returncode == code, (args, proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    data = json.loads(proc.stdout)
    Draft202012Validator(schemagen.schema("setup")).validate(data)
    return data


def commit_files(repo, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(data)
    git(repo.path, "add", *files)
    git(repo.path, "commit", "-q", "-m", "the user's own configuration")


def head_files(repo) -> list[str]:
    return sorted(git(repo.path, "show", "--name-only", "--format=", "HEAD").split())


def frontmatter(text: str) -> dict:
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def test_the_table_names_the_harnesses():
    assert verbs.AGENTS == harness.HARNESSES
    row = verbs.BY_NAME["setup"]
    agent = next(p for p in row.params if p.name == "agent")
    assert agent.kind == "list" and agent.enum == harness.HARNESSES
    assert agent.json_schema()["items"] == {"type": "string", "enum": list(harness.HARNESSES)}


# -- each harness in its own format ----------------------------------------------------------------
def test_every_harness_in_its_documented_format(repo):
    data = setup(repo, *ALL)
    assert data["mode"] == "install" and data["agents"] == ["claude", "codex", "cursor"]
    assert {item["state"] for item in data["items"]} == {"missing"}
    assert sorted(data["paths"]) == sorted(data["committed"]) == sorted(WRITTEN)
    assert head_files(repo) == sorted(WRITTEN)
    assert repo.head_message() == "chore(backlog): connect agent harnesses (claude, codex, cursor)"
    assert git(repo.path, "status", "--porcelain", "--untracked-files=all") == ""

    claude = json.loads((repo / ".mcp.json").read_text())
    assert claude == {"mcpServers": {"backlog": {**SERVER, "env": {"BACKLOG_HARNESS": "claude"}}}}
    settings = json.loads((repo / ".claude/settings.json").read_text())
    assert settings == {
        "hooks": {
            "SessionStart": [
                {
                    "matcher": "startup|resume|clear|compact",
                    "hooks": [{"type": "command", "command": "backlog prime --hook"}],
                }
            ]
        },
        "enabledMcpjsonServers": ["backlog"],
    }
    codex = tomllib.loads((repo / ".codex/config.toml").read_text())
    assert codex == {"mcp_servers": {"backlog": {**SERVER, "env": {"BACKLOG_HARNESS": "codex"}}}}
    cursor = json.loads((repo / ".cursor/mcp.json").read_text())
    entry = cursor["mcpServers"]["backlog"]
    assert entry == {
        "command": "backlog",
        "args": ["-C", "${workspaceFolder}", "mcp"],
        "env": {"BACKLOG_HARNESS": "cursor"},
    }
    rule = (repo / ".cursor/rules/backlog.mdc").read_text()
    head = frontmatter(rule)
    assert head["alwaysApply"] is True and "backlog" in head["description"]
    assert "backlog prime" in rule and "`prime` tool" in rule
    guide = (repo / "AGENTS.md").read_text()
    assert guide.startswith("<!-- backlog:begin -->\n") and guide.endswith("<!-- backlog:end -->\n")
    assert "`backlog prime`" in guide


def test_no_absolute_path_and_no_claimer_in_any_written_file(repo):
    setup(repo, *ALL)
    for rel in WRITTEN:
        text = (repo / rel).read_text()
        assert str(repo.path) not in text and os.path.expanduser("~") not in text, rel
        assert "BACKLOG_CLAIMER" not in text and "tester" not in text, rel
        strings = re.findall(r'"([^"]*)"', text)
        assert not [s for s in strings if s.startswith(("/", "~"))], (rel, strings)


def test_a_second_run_changes_nothing_and_commits_nothing(repo):
    setup(repo, *ALL)
    before = snapshot(repo)
    data = setup(repo, *ALL)
    assert {item["state"] for item in data["items"]} == {"installed"}
    assert data["paths"] == [] and data["committed"] == []
    assert snapshot(repo) == before
    assert "already connected: claude, codex, cursor (nothing changed)" in repo.ok("setup", *ALL)


def test_without_a_backlog_it_says_what_the_server_needs(repo):
    assert any("no backlog here yet" in note for note in setup(repo, "--agent", "codex")["notes"])


def test_on_a_backlog_it_commits_only_the_harness_files(shared):
    assert setup(shared, "--agent", "codex")["notes"] == []
    assert head_files(shared) == [".codex/config.toml", "AGENTS.md"]


# -- merged with what is there -------------------------------------------------------------------------
def users_files() -> dict[str, bytes]:
    mcp = {"mcpServers": {"db": {"command": "db-mcp", "args": ["--ro"]}}, "other": [1, 2]}
    settings = {
        "permissions": {"allow": ["Bash(npm test)"]},
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "check.sh"}]}],
            "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "hello.sh"}]}],
        },
        "enabledMcpjsonServers": ["db"],
        "model": "opus",
    }
    toml = (
        b'# my codex\nmodel = "o3"\n\n[mcp_servers.db]\ncommand = "db-mcp"  # the database\n'
        b'args = ["--ro"]\n\n[mcp_servers.db.env]\nTOKEN_FILE = "secret"\n\n[profiles.fast]\nmodel = "mini"'
    )
    cursor = {"mcpServers": {"web": {"url": "http://localhost:9/mcp"}}}
    return {
        ".mcp.json": json.dumps(mcp, indent=4).encode() + b"\n",
        ".claude/settings.json": json.dumps(settings, indent="\t").encode() + b"\n",
        ".codex/config.toml": toml,
        ".cursor/mcp.json": json.dumps(cursor, indent=2).encode(),  # no line ending at the end
        "AGENTS.md": b"# Agents\n\nRun the tests before you push.",
    }


def test_merged_into_existing_files_and_removed_to_the_byte(repo):
    mine = users_files()
    commit_files(repo, mine)
    start = git(repo.path, "rev-parse", "HEAD")
    data = setup(repo, *ALL)
    assert sorted(data["committed"]) == sorted(WRITTEN)

    mcp = json.loads((repo / ".mcp.json").read_bytes())
    assert list(mcp) == ["mcpServers", "other"] and list(mcp["mcpServers"]) == ["db", "backlog"]
    assert mcp["mcpServers"]["db"] == {"command": "db-mcp", "args": ["--ro"]} and mcp["other"] == [1, 2]
    assert (repo / ".mcp.json").read_text().startswith('{\n    "mcpServers"')  # the file's own indentation
    settings = json.loads((repo / ".claude/settings.json").read_bytes())
    assert list(settings) == ["permissions", "hooks", "enabledMcpjsonServers", "model"]
    assert settings["hooks"]["PreToolUse"] == json.loads(mine[".claude/settings.json"])["hooks"]["PreToolUse"]
    starts = settings["hooks"]["SessionStart"]
    assert starts[0]["hooks"][0]["command"] == "hello.sh" and starts[1]["hooks"][0]["command"] == "backlog prime --hook"
    assert settings["enabledMcpjsonServers"] == ["db", "backlog"]
    toml = (repo / ".codex/config.toml").read_bytes()
    assert toml.startswith(mine[".codex/config.toml"])  # every byte of the user's kept
    codex = tomllib.loads(toml.decode())
    assert codex["mcp_servers"]["db"] == {"command": "db-mcp", "args": ["--ro"], "env": {"TOKEN_FILE": "secret"}}
    assert codex["profiles"] == {"fast": {"model": "mini"}} and codex["model"] == "o3"
    assert codex["mcp_servers"]["backlog"]["env"] == {"BACKLOG_HARNESS": "codex"}
    cursor = json.loads((repo / ".cursor/mcp.json").read_bytes())
    assert list(cursor["mcpServers"]) == ["web", "backlog"]
    assert not (repo / ".cursor/mcp.json").read_bytes().endswith(b"\n")
    assert (repo / "AGENTS.md").read_bytes().startswith(mine["AGENTS.md"] + b"\n<!-- backlog:begin -->\n")

    data = setup(repo, *ALL, "--remove")
    assert {item["state"] for item in data["items"]} == {"installed"}
    assert repo.head_message() == "chore(backlog): disconnect agent harnesses (claude, codex, cursor)"
    for rel, content in mine.items():
        assert (repo / rel).read_bytes() == content, rel
    assert not (repo / ".cursor/rules").exists()  # the rule went, and the directory setup made for it
    assert git(repo.path, "diff", start.strip(), "HEAD") == ""
    assert git(repo.path, "status", "--porcelain", "--untracked-files=all") == ""


def test_remove_takes_away_exactly_what_setup_added(repo):
    before = snapshot(repo)["files"]
    setup(repo, *ALL)
    data = setup(repo, "--agent", "claude", "--remove")
    assert sorted(data["committed"]) == [".claude/settings.json", ".mcp.json"]
    assert any("AGENTS.md's section kept" in note for note in data["notes"])
    assert not (repo / ".mcp.json").exists() and not (repo / ".claude").exists()
    assert setup(repo, "--agent", "codex", "--check")["items"][-1]["state"] == "installed"
    setup(repo, "--agent", "codex", "--agent", "cursor", "--remove")
    assert snapshot(repo)["files"] == before
    assert git(repo.path, "status", "--porcelain", "--untracked-files=all") == ""
    nothing = setup(repo, *ALL, "--remove")
    assert nothing["paths"] == [] and {item["state"] for item in nothing["items"]} == {"missing"}


def test_an_outdated_entry_is_brought_up_to_date_keeping_the_users_keys(repo):
    old = {"mcpServers": {"backlog": {"command": "uvx", "args": ["backlog", "mcp"], "env": {"EXTRA": "1"}}}}
    commit_files(repo, {".mcp.json": json.dumps(old, indent=2).encode() + b"\n"})
    check = setup(repo, "--agent", "claude", "--check", code=1)
    assert [item["state"] for item in check["items"]] == ["outdated", "missing", "missing", "missing"]
    setup(repo, "--agent", "claude")
    entry = json.loads((repo / ".mcp.json").read_text())["mcpServers"]["backlog"]
    assert entry == {**SERVER, "env": {"EXTRA": "1", "BACKLOG_HARNESS": "claude"}}
    setup(repo, "--agent", "claude", "--check")


def test_check_lists_what_is_missing_or_outdated(repo):
    proc = repo.run("setup", "--agent", "codex", "--check")
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [
        "missing: .codex/config.toml: [mcp_servers.backlog] (codex)",
        "missing: AGENTS.md: section backlog:begin…end (every harness)",
        "2 missing or outdated",
    ]
    before = snapshot(repo)
    setup(repo, "--agent", "codex", "--check", code=1)
    assert snapshot(repo) == before  # --check changes nothing
    setup(repo, "--agent", "codex")
    assert repo.ok("setup", "--agent", "codex", "--check").splitlines()[-1] == "connected: codex"
    path = repo / ".codex/config.toml"
    path.write_text(path.read_text().replace('args = ["mcp"]', 'args = ["serve"]'))
    out = repo.run("setup", "--agent", "codex", "--check")
    assert out.returncode == 1 and "outdated: .codex/config.toml: [mcp_servers.backlog] (codex)" in out.stdout
    guide = repo / "AGENTS.md"
    guide.write_text(guide.read_text().replace("Task queue", "Tasks"))
    assert "outdated: AGENTS.md" in repo.run("setup", "--agent", "cursor", "--check").stdout


# -- refusals: nothing changes ----------------------------------------------------------------------
BROKEN = [
    (".mcp.json", b'{"mcpServers": {', "not valid JSON"),
    (".mcp.json", b"[1, 2]\n", "not a JSON object"),
    (".mcp.json", b'{"mcpServers": []}\n', "`mcpServers` is not an object"),
    (".claude/settings.json", b'{"hooks": {"SessionStart": {"x": 1}}}\n', "`SessionStart` is not an array"),
    (".claude/settings.json", b'{"hooks": {"SessionStart": ["x"]}}\n', "group is not"),
    (".codex/config.toml", b"[mcp_servers\nx = 1\n", "not valid TOML"),
    (".codex/config.toml", b'[mcp_servers]\nbacklog = { command = "x" }\n', "in a form setup does not edit"),
    (".codex/config.toml", b'mcp_servers = "none"\n', "`mcp_servers` is not a table"),
    (".cursor/mcp.json", b"{ // a comment\n}\n", "not valid JSON"),
    (".cursor/rules/backlog.mdc", b"---\ndescription: mine\n---\nMy own rule.\n", "not written by backlog setup"),
    ("AGENTS.md", b"# Agents\n<!-- backlog:begin -->\nhalf a section\n", "markers are not one pair"),
    ("AGENTS.md", b"\xff\xfe binary", None),  # not text: bytes are bytes, nothing to refuse
]


@pytest.mark.parametrize("rel, content, said", BROKEN, ids=[f"{r}:{s}" for r, _c, s in BROKEN])
def test_an_unparsable_file_is_refused_naming_it_and_nothing_changes(repo, rel, content, said):
    commit_files(repo, {"README.md": b"# test repo\n", rel: content})
    if said is None:
        setup(repo, *ALL)
        assert (repo / rel).read_bytes().startswith(content)
        return
    before = snapshot(repo)
    for extra in ((), ("--check",), ("--remove",)):
        proc = repo.run("setup", *ALL, *extra)
        assert proc.returncode == 2, (extra, proc.stdout, proc.stderr)
        assert (
            proc.stderr.startswith(f"backlog: {rel}: ") and said in proc.stderr and "nothing was changed" in proc.stderr
        )
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
        assert snapshot(repo) == before


def test_a_symlink_out_of_the_repository_is_refused_one_inside_is_followed(repo, tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_text("{}\n")
    os.symlink(outside, repo / ".mcp.json")
    before = snapshot(repo)
    proc = repo.run("setup", "--agent", "claude")
    assert proc.returncode == 2 and ".mcp.json: a symlink leading outside the work tree" in proc.stderr
    assert snapshot(repo) == before and outside.read_text() == "{}\n"
    os.unlink(repo / ".mcp.json")
    (repo / ".cursor").mkdir()
    os.symlink("../.git/config", repo / ".cursor/mcp.json")
    assert "leading outside the work tree" in repo.run("setup", "--agent", "cursor").stderr
    os.unlink(repo / ".cursor/mcp.json")
    commit_files(repo, {"docs/GUIDE.md": b"# Guide\n"})
    os.symlink("docs/GUIDE.md", repo / "AGENTS.md")
    git(repo.path, "add", "AGENTS.md")
    git(repo.path, "commit", "-q", "-m", "link")
    data = setup(repo, "--agent", "codex")
    assert sorted(data["committed"]) == [".codex/config.toml", "docs/GUIDE.md"]
    assert os.readlink(repo / "AGENTS.md") == "docs/GUIDE.md"
    assert (repo / "docs/GUIDE.md").read_text().startswith("# Guide\n\n<!-- backlog:begin -->")


def test_a_file_too_large_is_refused(repo):
    commit_files(repo, {"AGENTS.md": b"x" * (limits.CONFIG_BYTES + 1)})
    proc = repo.run("setup", "--agent", "codex")
    assert proc.returncode == 2 and "AGENTS.md: too large" in proc.stderr
    assert not (repo / ".codex").exists()


def test_a_failing_commit_leaves_no_trace(repo):
    commit_files(repo, users_files())
    hook = repo / ".git/hooks/pre-commit"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text("#!/bin/sh\necho 'hook refuses' >&2\nexit 1\n")
    hook.chmod(0o755)
    before = snapshot(repo)
    proc = repo.run("setup", *ALL)
    assert proc.returncode == 1 and "hook refuses" in proc.stderr
    assert snapshot(repo) == before and not (repo / ".cursor/rules").exists()


def test_the_users_uncommitted_changes_are_written_but_not_committed(repo):
    commit_files(repo, {".mcp.json": b"{}\n", ".gitignore": b".codex/\n"})
    (repo / ".mcp.json").write_text('{"mine": true}\n')  # an edit of the user's, not committed
    (repo / "staged.txt").write_text("staged\n")
    git(repo.path, "add", "staged.txt")
    data = setup(repo, "--agent", "claude", "--agent", "codex")
    assert sorted(data["committed"]) == [".claude/settings.json", "AGENTS.md"]
    assert any(".mcp.json" in note and ".codex/config.toml" in note for note in data["notes"])
    assert json.loads((repo / ".mcp.json").read_text())["mine"] is True
    assert "BACKLOG_HARNESS" in (repo / ".codex/config.toml").read_text()
    assert git(repo.path, "status", "--porcelain") == " M .mcp.json\nA  staged.txt\n"


@pytest.mark.parametrize(
    "args, said",
    [
        (("--agent", "claude", "--backend=maildir-shared"), "a run of its own"),
        (("--agent", "claude", "--hooks"), "a run of its own"),
        (("--check",), "go with --agent"),
        (("--remove", "--backend=maildir-git"), "go with --agent"),
        (("--agent", "vim"), "not a harness this tool knows"),
        (("--agent", "claude", "--check", "--remove"), "not both"),
    ],
)
def test_usage(repo, args, said):
    before = snapshot(repo)
    proc = repo.run("setup", *args)
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr
    assert snapshot(repo) == before


# -- the claimer of a harness-started server -----------------------------------------------------------
def identity(repo, **env: str) -> tuple[str, str]:
    data = json.loads(repo.ok("--json", "prime", env=env))
    return data["claimer"], data["claimer_from"]


def test_the_claimer_follows_the_harness_and_its_session(shared, monkeypatch):
    monkeypatch.delenv("BACKLOG_CLAIMER")
    for var in ("CLAUDE_CODE_SESSION_ID", "CODEX_THREAD_ID"):
        monkeypatch.delenv(var, raising=False)
    assert identity(shared, BACKLOG_HARNESS="claude", CLAUDE_CODE_SESSION_ID="s-1") == ("claude:s-1", "BACKLOG_HARNESS")
    assert identity(shared, BACKLOG_HARNESS="codex", CODEX_THREAD_ID="t-9")[0] == "codex:t-9"
    assert identity(shared, BACKLOG_HARNESS="claude", BACKLOG_CLAIMER="me")[0] == "me"  # the variable still wins
    monkeypatch.setenv("CONDUCTOR_WORKSPACE_NAME", "ws")
    cursor, source = identity(shared, BACKLOG_HARNESS="cursor")
    assert re.fullmatch(r"cursor:[0-9a-f]{12}", cursor) and source == "BACKLOG_HARNESS"
    assert identity(shared, BACKLOG_HARNESS="cursor")[0] == cursor  # made once per process
    assert identity(shared)[0] == "conductor:ws"


@pytest.mark.subprocess
def test_two_servers_of_one_harness_in_one_worktree_never_share_a_claimer(shared):
    pytest.importorskip("mcp")
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    shared.ok("add", "first")
    env = {k: v for k, v in os.environ.items() if k not in ("BACKLOG_CLAIMER", "CLAUDE_CODE_SESSION_ID")}
    env.update(PYTHONPATH=str(ROOT), BACKLOG_HARNESS="cursor")
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "maildir_backlog", "mcp"], cwd=str(shared.path), env=env
    )

    async def tool(client, name: str, **arguments) -> dict:
        result = await client.call_tool(name, arguments)
        return json.loads(result.content[0].text)

    async def scenario() -> list[str]:
        seen = []
        for _ in range(2):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
                await client.initialize()
                first = (await tool(client, "prime"))["claimer"]
                assert (await tool(client, "prime"))["claimer"] == first  # one server, one claimer
                seen.append(first)
                if len(seen) == 1:
                    took = await tool(client, "take")
                    assert took["slug"] == "first-plan" and took["claimer"] == first
                    assert (await tool(client, "progress", slug="first-plan", note="mine"))["note"] == "mine"
        return seen

    one, two = anyio.run(scenario)
    assert one != two and one.startswith("cursor:") and two.startswith("cursor:")


# -- the harnesses' own CLIs read what was written ---------------------------------------------------
USER_HOME = os.environ.get("HOME", "")  # (read at import: the fixtures give each test a fresh HOME)
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "maildir-backlog-tests" / "npm"
CLAUDE_CODE = ("@anthropic-ai/claude-code", "2.1.332", "claude")
CODEX = ("@openai/codex", "0.171.0", "codex")


def npm_tool(package: str, version: str, binary: str) -> Path:
    """The harness's CLI, installed with npm once per version into CACHE (shared by the test runs of
    every worktree; an flock keeps two runs from installing it at once). Skips without node/npm."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("node and npm are needed to run the harness's own CLI")
    place = CACHE / f"{package.replace('/', '+')}@{version}"
    tool = place / "node_modules" / ".bin" / binary
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not tool.exists():
            partial = CACHE / f".partial-{os.getpid()}"
            shutil.rmtree(partial, ignore_errors=True)
            proc = subprocess.run(
                ["npm", "install", "--prefix", str(partial), "--no-audit", "--no-fund", f"{package}@{version}"],
                capture_output=True,
                text=True,
                timeout=600,
                env=dict(os.environ, HOME=USER_HOME),  # the user's npm configuration and cache
            )
            assert proc.returncode == 0, f"npm install {package}@{version}: {proc.stderr[-2000:]}"
            os.rename(partial, place)
    return tool


def harness_env(tmp_path) -> dict[str, str]:
    """HOME a fresh directory (the fixtures' own), `backlog` on PATH running this checkout."""
    shims = tmp_path / "shims"
    shims.mkdir(exist_ok=True)
    shim = shims / "backlog"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m maildir_backlog "$@"\n')
    shim.chmod(0o755)
    env = dict(os.environ, PATH=f"{shims}{os.pathsep}{os.environ['PATH']}", PYTHONPATH=str(ROOT))
    env.update(DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", NO_COLOR="1")
    return env


def listed(tool: Path, repo, env: dict[str, str]) -> str:
    proc = subprocess.run(
        [str(tool), "mcp", "list"], cwd=repo.path, capture_output=True, text=True, env=env, timeout=180
    )
    assert proc.returncode == 0, proc.stderr
    print(f"$ {tool.name} mcp list\n{proc.stdout}")  # (shown with pytest -s)
    return proc.stdout


def test_claude_code_lists_the_server_connected(shared, tmp_path):
    claude = npm_tool(*CLAUDE_CODE)
    env = harness_env(tmp_path)
    commit_files(shared, users_files())  # merged into the user's own servers and settings
    setup(shared, "--agent", "claude")
    # before the project is trusted, Claude Code lists the server but waits for a person
    assert re.search(r"^backlog: backlog mcp - .*Pending approval", listed(claude, shared, env), re.M)
    # trusted (a person's once-per-project decision, made here for the scratch repository), the
    # approval setup wrote (enabledMcpjsonServers) starts it, and `backlog mcp` answers
    state = Path(os.environ["HOME"]) / ".claude.json"
    known = json.loads(state.read_text()) if state.exists() else {}
    known.setdefault("projects", {})[os.path.realpath(shared.path)] = {"hasTrustDialogAccepted": True}
    state.write_text(json.dumps(known))
    said = listed(claude, shared, env)
    assert re.search(r"^backlog: backlog mcp - ✔ Connected$", said, re.M)
    assert re.search(r"^db: db-mcp --ro - ", said, re.M)  # the user's server is still there (and not ours to start)
    # and the SessionStart hook is valid to Claude Code (`claude doctor` reads the settings and names
    # what it would ignore; shown it can, with a hook group of the wrong shape)
    assert "Invalid settings" not in doctor(claude, shared, env)
    settings = shared / ".claude/settings.json"
    settings.write_text(settings.read_text().replace('"hooks": [', '"hooks": "x", "no": ['))
    assert "SessionStart" in doctor(claude, shared, env).split("Invalid settings")[1]


def doctor(claude: Path, repo, env: dict[str, str]) -> str:
    proc = subprocess.run(
        [str(claude), "doctor"],
        cwd=repo.path,
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    return proc.stdout + proc.stderr


def test_codex_lists_the_server(shared, tmp_path):
    codex = npm_tool(*CODEX)
    env = harness_env(tmp_path)
    commit_files(shared, {".codex/config.toml": users_files()[".codex/config.toml"]})
    setup(shared, "--agent", "codex")
    assert "backlog" not in listed(codex, shared, env)  # an untrusted project's .codex/ is not read
    config = Path(os.environ["HOME"]) / ".codex/config.toml"
    config.parent.mkdir(exist_ok=True)
    config.write_text(f'[projects."{os.path.realpath(shared.path)}"]\ntrust_level = "trusted"\n')
    rows = [line.split() for line in listed(codex, shared, env).splitlines()]
    assert rows[0][:4] == ["Name", "Command", "Args", "Env"]
    row = next(row for row in rows if row[0] == "backlog")
    assert row[1:4] == ["backlog", "mcp", "BACKLOG_HARNESS=*****"] and "enabled" in row
    proc = subprocess.run(
        [str(codex), "mcp", "list", "--json"], cwd=shared.path, capture_output=True, env=env, timeout=180
    )
    servers = {server["name"]: server["transport"] for server in json.loads(proc.stdout)}
    assert servers["backlog"]["env"] == {"BACKLOG_HARNESS": "codex"} and servers["backlog"]["args"] == ["mcp"]
    assert servers["db"]["env"] == {"TOKEN_FILE": "secret"}  # the user's server, as it was


if __name__ == "__main__":  # `.ci/run`: install the harnesses' CLIs into their cache before the suite
    if sys.argv[1:] != ["--install"]:
        sys.exit(f"usage: {sys.argv[0]} --install")
    for harness in (CLAUDE_CODE, CODEX):
        print(npm_tool(*harness))
