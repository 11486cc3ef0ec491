"""`backlog mcp` (SPEC §5): the verbs over the Model Context Protocol on stdio, driven by the
official SDK's own client (`stdio_client` + `ClientSession`) against a real repository. The plan
runs every tool of the table: the steps written here, then, for a tool they do not call (a new
verb), steps made from its row (`steps_of`)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from conftest import GIT_IDENTITY, ROOT, Repo, backdate, backlog, bare_path

mcp = pytest.importorskip("mcp")
anyio = pytest.importorskip("anyio")
from jsonschema import Draft202012Validator  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from maildir_backlog import schemagen  # noqa: E402
from maildir_backlog.verbs import VERBS as TABLE  # noqa: E402
from maildir_backlog.verbspec import Verb  # noqa: E402

TOOLS = {verb.name for verb in TABLE if verb.tool is not None}  # the table's rows with a tool column
READ_ONLY = {verb.name for verb in TABLE if verb.tool is not None and verb.tool.read_only}


def server_env(**extra: str) -> dict[str, str]:
    env = {key: os.environ[key] for key in GIT_IDENTITY if key in os.environ}
    env.update(PYTHONPATH=str(ROOT), HOME=os.environ["HOME"])
    env.update(extra)
    return env


@asynccontextmanager
async def session(repo, bare: bool = False, **env: str):
    """A client of `backlog mcp` in `repo`. `bare`: the server's interpreter starts without `site`
    (-S), so that nothing imports `pathlib` or `ipaddress` before the command does, as in a
    virtual environment with no editable install (the command defers `ipaddress`: startup.py)."""
    args = ["-m", "maildir_backlog", "mcp"]
    if bare:
        args = ["-S", *args]
        env["PYTHONPATH"] = bare_path()
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(repo.path), env=server_env(**env))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        yield client


async def call(client, tool: str, **arguments) -> tuple[dict, bool]:
    """One call: the JSON object, and whether it is an error result. A result's object is both the
    text content and the structured content (the SDK's client checks the latter against the tool's
    output schema on success); an error's is the text alone (SPEC §5: no structured content that
    the tool's output schema would refuse)."""
    result = await client.call_tool(tool, arguments)
    assert len(result.content) == 1 and result.content[0].type == "text"
    payload = json.loads(result.content[0].text)
    if result.is_error:
        assert result.structured_content is None, (tool, arguments)
        assert "structured_content" not in result.model_fields_set, (tool, arguments)  # absent, not null
    else:
        assert result.structured_content == payload, (tool, arguments)
    return payload, bool(result.is_error)


# -- every tool, valid and invalid input, on a project that declares a remote ---------------------
# The plan both clients run (this file's Python SDK client, and the official TypeScript SDK's in
# test_mcp_typescript.py): every tool with valid input, and with invalid input (an unknown slug,
# wrong types, a missing or unknown argument, a value outside an enum), in order, on a clone of
# a remote (`remote: origin`, SPEC §8) whose pipeline has a `reviewing` pile. Each step is
# (tool, arguments, None for a result or the error's kind); `("backdate", {"path", "seconds"}, None)`
# is no call: the client moves that task's log an hour into the past (conftest.backdate), so the
# `1s` budget of delta-followup has run out before the rescue, with no sleep. `("plant", {"path",
# "text"}, None)` is no call either: the client writes that file (a pull request's files in a pile:
# names that are no slug, a C1 control), and the views after it must still answer in their schemas.
PIPELINE = "todo doing reviewing done"
PILES = ["todo", "doing", "reviewing", "done", "failed"]
NOWHERE = "nope-plan"
WRITTEN: list[tuple[str, dict, str | None]] = [
    ("prime", {}, None),
    ("prime", {"tools": False}, "usage"),  # a preset, not an argument
    ("where", {}, None),
    ("where", {"verbose": True}, "usage"),
    ("status", {}, None),
    ("status", {"remote": True}, None),
    ("status", {"remote": "yes"}, "invalid"),
    ("ready", {"limit": 2}, None),
    ("ready", {"limit": "three"}, "invalid"),
    ("ready", {"limit": 0}, "invalid"),
    ("list", {}, None),
    ("list", {"pile": "reviewing"}, None),
    ("list", {"pile": "failed"}, None),
    ("list", {"pile": "nope"}, "invalid"),  # not one of this project's piles
    ("list", {"pile": 3}, "invalid"),
    ("plant", {"path": "backlog/todo/Fix Login.md", "text": "# not a task's name\n"}, None),
    ("plant", {"path": "backlog/todo/ctl\x85.md", "text": "# nor this\n"}, None),
    ("list", {}, None),  # each an INVALID row whose `slug` is the file's name
    ("status", {}, None),  # not counted: `not_tasks`
    ("add", {"slug": "delta", "category": "followup", "timeout": "1s", "depends": ["alpha"], "body": "Why."}, None),
    ("add", {"slug": "delta", "category": "followup"}, "refused"),  # a repeat: not idempotent
    ("add", {}, "usage"),
    ("add", {"slug": "x", "priority": "high"}, "invalid"),
    ("add", {"slug": "x", "category": "nope"}, "invalid"),
    ("show", {"slug": "alpha"}, None),
    ("show", {"slug": NOWHERE}, "not-found"),
    ("show", {}, "usage"),
    ("show", {"slug": 7}, "invalid"),
    ("take", {"slug": NOWHERE}, "not-found"),
    ("take", {"slg": "alpha"}, "usage"),  # misspelt: never the best task instead
    ("take", {"slug": "alpha"}, None),
    ("progress", {"note": "halfway", "slug": "alpha"}, None),
    ("progress", {"note": "n", "slug": NOWHERE}, "not-found"),
    ("progress", {}, "usage"),
    ("progress", {"note": "n", "force": "yes"}, "invalid"),
    ("advance", {"slug": "alpha"}, None),  # doing -> reviewing
    ("advance", {"slug": "alpha", "pr": "https://example.invalid/pull/1"}, None),  # -> done
    ("advance", {"slug": NOWHERE}, "not-found"),
    ("advance", {"slug": ["alpha"]}, "invalid"),
    ("advance", {}, "usage"),
    ("take", {"slug": "beta"}, None),
    ("fail", {"slug": "beta", "reason": "no time"}, None),
    ("fail", {"slug": NOWHERE, "reason": "x"}, "not-found"),
    ("fail", {"slug": "beta"}, "usage"),
    ("retry", {"slug": "beta", "reason": "more time", "sets": {"priority": "2"}}, None),
    ("retry", {"slug": NOWHERE, "reason": "x"}, "not-found"),
    ("retry", {"slug": "beta", "reason": "r", "sets": ["priority=2"]}, "invalid"),
    ("retry", {"slug": "beta"}, "usage"),
    ("take", {"slug": "beta"}, None),
    ("cancel", {"slug": "beta", "reason": "dropped"}, None),
    ("cancel", {"slug": "beta", "reason": "again"}, "settled"),  # it left flight
    ("cancel", {"slug": NOWHERE, "reason": "x"}, "not-found"),
    ("cancel", {"slug": "beta", "reason": 5}, "invalid"),
    ("cancel", {"reason": "x"}, "usage"),
    ("take", {"slug": "delta-followup"}, None),  # its dependency alpha is done
    ("backdate", {"path": "backlog/doing/delta-followup.md", "seconds": 3600}, None),
    ("rescue", {"slug": "delta-followup"}, None),  # past its 1s budget
    ("rescue", {"slug": "gamma"}, "refused"),  # not in flight
    ("rescue", {"slug": NOWHERE}, "not-found"),
    ("rescue", {"slug": "delta-followup", "force": True}, "usage"),
    ("rescue", {}, "usage"),
    ("edit", {"slug": "gamma", "sets": {"priority": "3", "title": "Gamma, edited"}}, None),
    ("edit", {"slug": "gamma", "sets": {"colour": "red"}}, "invalid"),  # not a key edit sets
    ("edit", {"slug": NOWHERE, "sets": {"priority": "1"}}, "not-found"),
    ("edit", {"slug": "gamma"}, "usage"),
    ("take", {"slug": "gamma"}, None),
    ("edit", {"slug": "gamma", "sets": {"priority": "1"}}, "held"),  # in flight: refused
    ("release", {"slug": "gamma", "reason": "not today"}, None),  # back in todo/, claimable again
    ("release", {"slug": "gamma"}, "refused"),  # not in flight any more
    ("release", {"slug": NOWHERE}, "not-found"),
    ("release", {"slug": 3}, "invalid"),
    ("take", {}, None),  # gamma, the last one
    ("take", {}, None),  # {slug: null, message}: nothing available
]


def plain(row: Verb) -> list[list[str]]:
    """The row's examples that are one plain `backlog VERB …` call (no pipe, glob or redirection),
    as the words after the verb (`--json` dropped)."""
    out = []
    for line in row.examples:
        words = [word for word in shlex.split(line, comments=True) if word != "--json"]
        if words[:2] == ["backlog", row.name] and not set("|<>*$;&").intersection(line.split("#")[0]):
            out.append(words[2:])
    return out


def arguments_of(row: Verb, words: list[str] | None = None) -> dict:
    """The tool's arguments of an example (default: the row's first plain one): the positionals
    and switches mapped to the row's parameters (a flag: true; a repeated switch: a list; `--set
    K=V`: an object; a whole number: an int). A row without a plain example fails, saying so."""
    if words is None:
        examples = plain(row)
        assert examples, f"`{row.name}`: no example of its row is one plain `backlog {row.name} …` call: give it one"
        words = examples[0]
    return _mapped(row, list(words))


def _mapped(row: Verb, words: list[str]) -> dict:
    positionals = [p for p in row.params if p.positional]
    out: dict = {}
    while words:
        word = words.pop(0)
        flag, _, inline = word.partition("=")
        switch = next((p for p in row.params if not p.positional and word.startswith("--") and p.flag == flag), None)
        if switch is None:
            param, value = positionals.pop(0), word
        elif switch.kind == "bool":
            param, value = switch, True
        else:
            param, value = switch, inline if inline else words.pop(0)
        if "mcp" not in param.faces:  # the command's only (prime's --skill)
            continue
        if param.kind == "list":
            out.setdefault(param.name, []).append(value)
        elif param.kind == "pairs":
            key, _, item = value.partition("=")
            out.setdefault(param.name, {})[key] = item
        else:
            out[param.name] = int(value) if param.kind == "int" and not isinstance(value, bool) else value
    return {key: value for key, value in out.items() if not row.tool or key not in row.tool.preset}


def steps_of(row: Verb) -> list[tuple[str, dict, str | None]]:
    """A tool the written steps do not call: its row's example (a result, in its output schema) and
    an argument it does not have (the usage error)."""
    return [(row.name, arguments_of(row), None), (row.name, {"no_such_argument": True}, "usage")]


# the plan: the written steps, then the steps of every other tool of the table, before the last two takes
NO_CALL = {"backdate", "plant"}  # steps the client carries out itself
WRITTEN_TOOLS = {tool for tool, _, _ in WRITTEN} - NO_CALL
ROWS = {row.name: row for row in TABLE}
PLAN = (
    WRITTEN[:-2]
    + [step for row in TABLE if row.tool is not None and row.name not in WRITTEN_TOOLS for step in steps_of(row)]
    + WRITTEN[-2:]
)


@pytest.mark.parametrize("row", [row for row in TABLE if row.tool is not None], ids=lambda row: row.name)
def test_every_plain_example_is_a_valid_tool_call(row):
    """What the plan makes of a row's examples fits the tool's input schema (so a new verb's step
    calls its tool as its example calls the command). (Not `edit`'s third: its `--set` value is
    unquoted, three words to a shell.)"""
    from maildir_backlog.mcp_server import check

    for words in plain(row)[: 2 if row.name == "edit" else None]:
        check(row, arguments_of(row, words))


def remote_clone(tmp_path) -> Repo:
    """A clone of a bare repository (over file://) whose maildir-shared backlog declares
    `remote: origin`, pipeline PIPELINE, alpha, beta and gamma in todo/ (test_remote's world)."""
    from test_remote import make_world

    return make_world(tmp_path / "w", ["alpha", "beta", "gamma"], pipeline=PIPELINE).clone("a")


def test_every_tool_answers_in_its_schema_with_a_remote_declared(tmp_path):
    """Every tool's result validates against the output schema it lists (jsonschema, beside the
    SDK client's own check); every error is the error object as text, with no structured content;
    the project's piles are `list`'s enum; every tool that may reach the remote says open-world."""
    clone = remote_clone(tmp_path)
    seen: dict[str, set[bool]] = {}

    async def scenario():
        async with session(clone) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == TOOLS == {tool for tool, _, _ in PLAN if tool not in NO_CALL}
            assert tools["list"].input_schema["properties"]["pile"]["enum"] == PILES
            for name, tool in tools.items():  # a tool of a written step, as written; another, as its row says
                world = name not in {"where", "prime"} if name in WRITTEN_TOOLS else ROWS[name].tool.reaches != "clone"
                assert tool.annotations.open_world_hint is world, name
            for tool, arguments, kind in PLAN:
                if tool == "backdate":  # the claim made an hour ago: no test sleeps past a budget
                    backdate(clone.path, Path(arguments["path"]).stem, arguments["seconds"])
                    continue
                if tool == "plant":
                    (clone.path / arguments["path"]).write_text(arguments["text"])
                    continue
                result = await client.call_tool(tool, arguments)
                payload = json.loads(result.content[0].text)
                if kind is None:
                    assert not result.is_error, (tool, arguments, payload)
                    Draft202012Validator(tools[tool].output_schema).validate(result.structured_content)
                    assert result.structured_content == payload
                else:
                    assert result.is_error and result.structured_content is None, (tool, arguments, payload)
                    assert schema("error").is_valid(payload) and payload["kind"] == kind, (tool, arguments, payload)
                seen.setdefault(tool, set()).add(bool(result.is_error))
            return payload

    last = anyio.run(scenario)
    assert last == {"slug": None, "message": "no available tasks"}
    assert all(outcomes == {True, False} for outcomes in seen.values()), seen  # each tool: a result and an error
    assert "backlog/done/alpha.md" in clone.git("ls-tree", "-r", "--name-only", "HEAD", "backlog/done")


def schema(name: str) -> Draft202012Validator:
    return Draft202012Validator(schemagen.schema(name))


def test_the_server_answers_with_ipaddress_deferred(repo):
    """`backlog mcp` as a process's own call defers `ipaddress` before anything is imported
    (session 29); the SDK and pydantic, which import it, still start, and the tools answer."""
    repo.ok("setup", "--backend=maildir-shared")
    repo.ok("add", "parser", "--here")

    async def scenario():
        with anyio.fail_after(60):
            async with session(repo, bare=True) as client:
                status, err = await call(client, "status")
                assert not err and status["counts"]["todo"] == 1, status
                took, err = await call(client, "take")
                assert not err and took["slug"] == "parser-plan", took

    anyio.run(scenario)


def test_tools_take_progress_advance_to_done(repo):
    repo.ok("setup", "--backend=maildir-shared", "--pipeline", "todo doing reviewing done")
    repo.ok("add", "parser", "--priority", "1", "--timeout", "4h")

    async def scenario():
        async with session(repo) as client:
            tools = await client.list_tools()
            assert {t.name for t in tools.tools} == TOOLS
            assert all(t.description for t in tools.tools)
            added, err = await call(client, "add", slug="docs", category="followup", depends=["parser-plan:why"])
            assert not err and added["slug"] == "docs-followup"
            ready, _ = await call(client, "ready")
            assert [t["slug"] for t in ready["tasks"]] == ["parser-plan"]
            took, err = await call(client, "take")
            assert not err and took["slug"] == "parser-plan" and took["budget_seconds"] == 14400
            schema("take").validate(took)
            note, _ = await call(client, "progress", note="halfway")
            assert note["note"] == "halfway"
            hop, _ = await call(client, "advance", slug="parser-plan")
            assert hop["pile"] == "reviewing"
            schema("advance").validate(hop)
            done, _ = await call(client, "advance", slug="parser-plan", pr="https://example.invalid/pull/1")
            assert done["pile"] == "done"
            shown, _ = await call(client, "show", slug="parser-plan")
            schema("show").validate(shown)
            assert shown["log"][-1]["text"] == "PR=https://example.invalid/pull/1"
            status, _ = await call(client, "status")
            schema("status").validate(status)
            listed, _ = await call(client, "list", pile="done")
            assert [t["slug"] for t in listed["tasks"]] == ["parser-plan"]
            bad, err = await call(client, "show", slug="../x")
            assert err and bad["code"] == 2 and schema("error").is_valid(bad)
            refused, err = await call(client, "rescue", slug="parser-plan")
            assert err and refused["code"] == 1
            nothing, err = await call(client, "take", slug="docs-followup")
            assert not err and nothing["slug"] == "docs-followup"  # its dependency is done now
            failed, _ = await call(client, "fail", slug="docs-followup", reason="no time")
            retried, _ = await call(client, "retry", slug="docs-followup", reason="again", sets={"priority": "2"})
            assert (failed["pile"], retried["pile"]) == ("failed", "todo")
            await call(client, "take")
            bad, err = await call(client, "release", slug="docs-followup", reason=" ")
            assert err and bad["code"] == 2 and schema("error").is_valid(bad)
            released, err = await call(client, "release", slug="docs-followup")
            assert not err and released["pile"] == "todo"
            schema("release").validate(released)
            await call(client, "take")
            cancelled, _ = await call(client, "cancel", slug="docs-followup", reason="dropped")
            assert cancelled["pile"] == "done"
            empty, err = await call(client, "take")
            assert not err and empty == {"slug": None, "message": "no available tasks"}

    anyio.run(scenario)
    assert "backlog/done/parser-plan.md" in repo.git("ls-files", "backlog/done")


def test_the_tools_carry_the_contract(repo):
    """SPEC §5: every argument described, closed values as enums, each tool's output schema (the
    verb's schema, `schemagen`) with structured content, read-only tools annotated, and invalid arguments
    answered in the error shape, not the SDK's plain text."""
    repo.ok("setup", "--backend=maildir-shared")
    repo.ok("add", "parser")

    async def scenario():
        async with session(repo) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == TOOLS
            for name, tool in tools.items():
                assert tool.output_schema == schemagen.schema(name), name
                assert tool.input_schema["type"] == "object" and tool.input_schema["additionalProperties"] is False
                for arg, spec in tool.input_schema.get("properties", {}).items():
                    assert spec.get("description"), (name, arg)
                hints = tool.annotations
                assert hints is not None and hints.read_only_hint is (name in READ_ONLY), name
                if name not in READ_ONLY:
                    assert hints.destructive_hint is (name in {"cancel", "fail", "release", "rescue"}), name
                    assert hints.idempotent_hint is not None, name
                # no remote declared: only advance reaches beyond the clone (`pr: auto` asks gh)
                assert hints.open_world_hint is (name == "advance"), name
            assert tools["add"].annotations.idempotent_hint is False  # a repeat is refused (SPEC §5)
            pile = tools["list"].input_schema["properties"]["pile"]
            assert pile["enum"] == ["todo", "doing", "done", "failed"] and pile["description"]  # the project's piles
            category = tools["add"].input_schema["properties"]["category"]
            assert category["enum"] == ["plan", "followup", "task-list", "ideas"]
            assert tools["progress"].input_schema["properties"]["force"]["type"] == "boolean"
            assert tools["take"].annotations.idempotent_hint is False
            assert tools["status"].input_schema["properties"]["remote"]["type"] == "boolean"

            where, err = await call(client, "where")
            assert not err and schema("where").is_valid(where) and "todo" in where["piles"]
            bad_calls = [
                ("show", {}, "usage", "slug"),  # a required argument missing
                ("take", {"slg": "parser-plan"}, "usage", "slg"),  # a misspelt argument: never the best task instead
                ("add", {"slug": "x", "category": "nope"}, "invalid", "category"),  # not one of the enum
                ("ready", {"limit": "three"}, "invalid", "limit"),  # the wrong type
                ("ready", {"limit": 0}, "invalid", "limit"),  # out of range
                ("progress", {"note": "n", "force": "yes"}, "invalid", "force"),
            ]
            for tool, arguments, kind, named in bad_calls:
                body, err = await call(client, tool, **arguments)
                assert err and body["code"] == 2 and body["kind"] == kind, (tool, body)
                assert body["retryable"] is False and schema("error").is_valid(body), body
                assert named in body["error"] and "\n" not in body["error"], body
            listed, _ = await call(client, "list")
            assert [t["state"] for t in listed["tasks"]] == ["ready"]  # no bad call claimed anything
            took, err = await call(client, "take", slug=None)  # null: as if the argument were absent
            assert not err and took["slug"] == "parser-plan"

            guide, err = await call(client, "prime")  # speaks of tools, not of shell commands
            assert not err and schema("prime").is_valid(guide)
            text = guide["text"]
            assert "`backlog " not in text and "--json" not in text and "export " not in text, text
            assert "call the `take` tool" in text and "BACKLOG_CLAIMER" in text
            assert [step.split("`")[1] for step in guide["loop"]] == ["ready", "take", "progress", "advance"]
            assert all("backlog" not in meaning for meaning in guide["exit_codes"].values())

    anyio.run(scenario)


def test_an_mcp_take_racing_a_cli_take_exactly_one_wins(repo):
    repo.ok("setup", "--backend=maildir-shared")
    rounds = 4
    for n in range(rounds):
        repo.ok("add", f"race{n}")

    async def scenario():
        outcomes = []
        async with session(repo, BACKLOG_CLAIMER="mcp-agent") as client:
            for n in range(rounds):
                slug = f"race{n}-plan"
                env = dict(os.environ, PYTHONPATH=str(ROOT), BACKLOG_CLAIMER="cli-agent")
                cli = subprocess.Popen(
                    [sys.executable, "-m", "maildir_backlog", "--json", "take", slug],
                    cwd=repo.path,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                mine, err = await call(client, "take", slug=slug)
                out, _ = await anyio.to_thread.run_sync(cli.communicate)
                outcomes.append((slug, mine, err, cli.returncode, json.loads(out)))
        return outcomes

    for slug, mine, mcp_failed, cli_code, theirs in anyio.run(scenario):
        winners = [w for w, lost in (("mcp-agent", mcp_failed), ("cli-agent", cli_code != 0)) if not lost]
        assert len(winners) == 1, (slug, mine, theirs)
        loser = theirs if not mcp_failed else mine
        assert loser["code"] in (1, 3) and "already in flight" in loser["error"]
        shown = json.loads(repo.ok("--json", "show", slug))
        assert shown["claim"]["claimer"] == winners[0] and shown["pile"] == "doing"
        assert [e["kind"] for e in shown["log"]] == ["advanced"]


def test_a_pull_requests_file_names_never_end_the_server(repo):
    """Files a pull request put in todo/ whose names hold a byte that is not UTF-8, a C1 control
    or a line break: every reading tool answers in its schema, with the names escaped as the
    CLI's --json escapes them, and the server goes on (session 28: the byte ended it)."""
    repo.ok("setup", "--backend=maildir-shared")
    repo.ok("add", "parser", "--here")
    for name in ("bad\udcff.md", "ctl\x85.md", "two\nlines.md"):
        (repo.path / "backlog" / "todo" / name).write_bytes(b"x")

    async def scenario():
        with anyio.fail_after(60):  # (a server that died would leave the client waiting)
            await answers()

    async def answers():
        async with session(repo) as client:
            for tool, arguments in (("list", {}), ("ready", {}), ("status", {}), ("show", {"slug": "parser-plan"})):
                answer = await client.call_tool(tool, arguments)
                text = answer.content[0].text  # as sent: no lone surrogate, no raw C1 control
                text.encode("utf-8")
                assert not any("\x7f" <= c <= "\x9f" for c in text), (tool, text)
                payload, err = await call(client, tool, **arguments)
                assert not err, (tool, payload)
                schema(tool).validate(payload)
            listed, _ = await call(client, "list")
            assert "bad\\xff" in [t["slug"] for t in listed["tasks"]]
            for value in (".nan", "[1, -.inf]", "!!binary aGk=", "!!set {a, b}", '"\\ud800\\x85"', "1" * 400):
                evil = repo.path / "backlog" / "todo" / "evil-plan.md"  # frontmatter JSON has no value for
                evil.write_text(f"---\nextra: {value}\n---\n\n# evil\n")
                for tool, arguments in (("show", {"slug": "evil-plan"}), ("ready", {})):
                    answer = await client.call_tool(tool, arguments)
                    json.loads(answer.content[0].text, parse_constant=lambda c: pytest.fail(f"{c} in {tool}"))
                    payload, err = await call(client, tool, **arguments)
                    assert not err or payload["kind"] == "invalid", (value, payload)  # (YAML refuses a lone \ud800)
                    schema("error" if err else tool).validate(payload)
                evil.unlink()
            took, err = await call(client, "take")
            assert not err and took["slug"] == "parser-plan"

    anyio.run(scenario)


@pytest.mark.subprocess  # a stand-in `mcp` package on PYTHONPATH: only a new process sees it
def test_mcp_without_the_sdk_is_one_clear_line(shared, tmp_path):
    fake = tmp_path / "nosdk" / "mcp"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no mcp here')\n")
    proc = backlog(shared.path, "mcp", env={"PYTHONPATH": f"{fake.parent}{os.pathsep}{ROOT}"})
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "backlog: `backlog mcp` needs the MCP SDK: pip install 'maildir-backlog[mcp]' (or pip install 'mcp>=2')"
    ]


def test_mcp_outside_a_backlog_fails_fast(repo):
    proc = repo.run("mcp")
    assert proc.returncode == 1 and "no backlog here" in proc.stderr


def test_every_error_payload_comes_from_one_function():
    """`error_payload` builds every error object the server sends: a refusal, a lost race
    (retryable), a file-system failure and a bug (kind internal), each valid against error.json."""
    from maildir_backlog.errors import BacklogError, Conflict, InvalidInput
    from maildir_backlog.mcp_server import BadArguments, error_payload

    cases = [
        (BacklogError("no task x in any pile"), 1, "refused", False),
        (InvalidInput("invalid slug"), 2, "invalid", False),
        (BadArguments("show: missing argument slug", "usage"), 2, "usage", False),
        (Conflict("x is already in flight"), 3, "conflict", True),
        (PermissionError(13, "Permission denied", "/x"), 1, "failed", False),
        (KeyError("boom"), 1, "internal", False),
    ]
    for exc, code, kind, retryable in cases:
        body = error_payload(exc)
        assert (body["code"], body["kind"], body["retryable"]) == (code, kind, retryable), body
        assert schema("error").is_valid(body), body
    assert error_payload(PermissionError(13, "Permission denied", "/x"))["error"] == "/x: Permission denied"
