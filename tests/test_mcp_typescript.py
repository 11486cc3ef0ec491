"""`backlog mcp` (SPEC §5, *JSON*) driven by a client nobody here wrote: the official TypeScript SDK
(`@modelcontextprotocol/sdk`, the client of Claude Code and the MCP Inspector).

Its `Client.callTool` checks a result's structured content against the tool's output schema, and
refuses a reply that does not match with McpError -32602, an error result included: the server
must never send one. tests/fixtures/mcp_ts_client.mjs starts `python -m maildir_backlog -C REPO
mcp` (this checkout's code) with the SDK's `StdioClientTransport`, lists the tools and runs
test_mcp's PLAN (every tool with valid input and with invalid input) on a clone of a remote; this
test asserts every call came back as a result (`isError` as the plan says), never as a protocol
error.

The SDK (pinned: SDK_VERSION) is installed with npm once into a cache directory keyed by its
version (`$XDG_CACHE_HOME` or `~/.cache`, `maildir-backlog/mcp-ts-sdk-<version>`; or
`$BACKLOG_TS_SDK_DIR`), and reused by every later run. `.ci/run` installs it there before the
suite (`python3 tests/test_mcp_typescript.py --install`); without that, the first test to need it
does. The test is skipped only when `node` or `npm` is missing.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import GIT_IDENTITY, ROOT

SDK = "@modelcontextprotocol/sdk"
SDK_VERSION = "1.32.2"
CLIENT = Path(__file__).resolve().parent / "fixtures" / "mcp_ts_client.mjs"
_HOME = os.environ.get("HOME", "")  # the real home: the fixtures give each test a home of its own

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None, reason="needs node and npm (Node.js)"
)


def sdk_dir() -> Path:
    """Where the SDK lives: `$BACKLOG_TS_SDK_DIR`, else the cache keyed by the SDK's version."""
    if os.environ.get("BACKLOG_TS_SDK_DIR"):
        return Path(os.environ["BACKLOG_TS_SDK_DIR"])
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(_HOME, ".cache")
    return Path(cache) / "maildir-backlog" / f"mcp-ts-sdk-{SDK_VERSION}"


def install(target: Path) -> Path:
    """`target/node_modules` holding the SDK (and its own dependencies, nothing else), installed by
    npm the first time: into a staging directory, then renamed into place, under a lock, so that
    two workers (or two runs) never see half an install."""
    modules = target / "node_modules"
    if (modules / SDK / "package.json").is_file():
        return modules
    target.mkdir(parents=True, exist_ok=True)
    with open(target / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (modules / SDK / "package.json").is_file():
            return modules  # another process installed it while this one waited
        staging = Path(tempfile.mkdtemp(prefix="staging-", dir=target))
        try:
            (staging / "package.json").write_text(
                json.dumps({"private": True, "dependencies": {SDK: SDK_VERSION}}), encoding="utf-8"
            )
            env = dict(os.environ, HOME=_HOME or os.environ.get("HOME", ""))  # npm's own config and cache
            proc = subprocess.run(
                ["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", "--omit=dev", "--loglevel=error"],
                cwd=staging,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            if proc.returncode:
                raise RuntimeError(f"npm install {SDK}@{SDK_VERSION} failed:\n{proc.stdout}{proc.stderr}")
            shutil.rmtree(modules, ignore_errors=True)  # a leftover without the SDK's package.json
            os.replace(staging / "node_modules", modules)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return modules


def run_client(tmp_path: Path, repo: Path, calls: list[dict]) -> dict:
    """Run the fixture client beside the installed SDK (ESM resolves `@modelcontextprotocol/sdk`
    from the script's own directory); its JSON summary."""
    modules = install(sdk_dir())
    work = tmp_path / "ts-client"
    work.mkdir()
    shutil.copy(CLIENT, work / CLIENT.name)
    (work / "node_modules").symlink_to(modules, target_is_directory=True)
    env = {key: os.environ[key] for key in GIT_IDENTITY if key in os.environ}
    env.update(PYTHONPATH=str(ROOT), HOME=os.environ["HOME"])  # this checkout's code; the test's home
    server = {
        "command": sys.executable,
        "args": ["-m", "maildir_backlog", "-C", str(repo), "mcp"],
        "cwd": str(tmp_path),
        "env": env,
    }
    plan = work / "plan.json"
    plan.write_text(json.dumps({"server": server, "repo": str(repo), "calls": calls}), encoding="utf-8")
    proc = subprocess.run(
        ["node", str(work / CLIENT.name), str(plan)], cwd=work, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr  # the server's stderr (inherited)
    summary: dict = json.loads(proc.stdout)
    return summary


def test_the_typescript_sdk_gets_a_result_for_every_call(tmp_path):
    from test_mcp import NO_CALL, PILES, PLAN, ROWS, TOOLS, WRITTEN_TOOLS, remote_clone, schema

    clone = remote_clone(tmp_path)
    summary = run_client(tmp_path, clone.path, [{"tool": t, "arguments": a} for t, a, _ in PLAN])
    tools = {tool["name"]: tool for tool in summary["tools"]}
    assert set(tools) == TOOLS
    assert set(summary["validated"]) == TOOLS  # the client checks every tool's structured content
    assert tools["list"]["inputSchema"]["properties"]["pile"]["enum"] == PILES
    assert tools["add"]["annotations"]["idempotentHint"] is False
    for name, tool in tools.items():
        if name not in WRITTEN_TOOLS:  # a tool test_mcp's plan has no written step for: as its row says
            spec = ROWS[name].tool
            assert tool["annotations"]["openWorldHint"] is (spec.reaches != "clone"), name
            assert tool["annotations"]["readOnlyHint"] is spec.read_only, name
            continue
        assert tool["annotations"]["openWorldHint"] is (name not in {"where", "prime"}), name
        assert tool["annotations"]["readOnlyHint"] is (name in {"where", "prime", "status", "show", "list", "ready"})

    expected = [(tool, arguments, kind) for tool, arguments, kind in PLAN if tool not in NO_CALL]
    assert len(summary["calls"]) == len(expected)
    thrown = [(call["tool"], call["arguments"], call["thrown"]) for call in summary["calls"] if "thrown" in call]
    assert thrown == [], thrown  # never a protocol error (-32602: structured content against the schema)
    for call, (tool, arguments, kind) in zip(summary["calls"], expected, strict=True):
        assert (call["tool"], call["arguments"]) == (tool, arguments)
        result = call["result"]
        assert [block["type"] for block in result["content"]] == ["text"], call
        payload = json.loads(result["content"][0]["text"])
        if kind is None:
            assert result.get("isError", False) is False, (tool, arguments, payload)
            assert result["structuredContent"] == payload, (tool, arguments)
        else:
            assert result["isError"] is True, (tool, arguments, payload)
            assert "structuredContent" not in result, (tool, arguments)
            assert schema("error").is_valid(payload) and payload["kind"] == kind, (tool, arguments, payload)
    assert payload == {"slug": None, "message": "no available tasks"}  # the last call: the queue drained


if __name__ == "__main__":  # `.ci/run`: install the SDK into its cache before the suite
    if sys.argv[1:] != ["--install"]:
        sys.exit(f"usage: {sys.argv[0]} --install")
    print(install(sdk_dir()))
