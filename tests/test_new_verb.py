"""A verb is its row, its function and its tests (issue 32, 1): a throwaway verb, `count`, made of
those alone (tests/fixtures/newverb/countverb.py: the row and the kernel function; this file: its
test), registered at run time, is a verb on every face with no other file touched: the command
(its subcommand, help, --json), the API (a method made from the row, and `Backlog.call`, which
mypy checks against the kernel function), the MCP server (a tool, its output schema made from the
row's result class, run by the steps test_mcp's plan makes from the row), the JSON contract (its
example run and checked against the schema made from the row, as test_json_contract's scenario
does for a verb it has no step for) and the docs check (which asks nothing of a new verb, and
finds a doc naming it once it is gone). A broken row fails its own verb, naming its row, and no
other."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import GIT_IDENTITY, ROOT
from test_json_contract import Contract
from test_verbs import JSON_MD, README, stale_docs

from maildir_backlog import schemagen, verbs

FIXTURE = ROOT / "tests" / "fixtures" / "newverb"
SCRIPT = str(FIXTURE / "countverb.py")


def env(**extra: str) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join((str(FIXTURE), str(ROOT))), **extra)


def command(repo, *args: str, **extra: str) -> subprocess.CompletedProcess:
    """The command with the throwaway row registered (a process of its own: the faces are made
    from the table as they are imported)."""
    return subprocess.run(
        [sys.executable, SCRIPT, *args], cwd=repo.path, env=env(**extra), capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def counted(shared):
    shared.ok("add", "alpha")
    shared.ok("add", "beta")
    return shared


def test_a_new_row_is_a_verb_of_the_command_and_the_api(counted):
    proc = command(counted, "--json", "count")
    assert (proc.returncode, json.loads(proc.stdout)) == (0, {"pile": "todo", "tasks": 2}), proc.stderr
    assert command(counted, "count", "done").stdout == "done: 0\n"
    assert "How many tasks a pile holds (default todo)." in command(counted, "--help").stdout
    assert "backlog count failed" in command(counted, "count", "--help").stdout
    made = api(counted, "got = Backlog('.').count()", "Backlog.count.__doc__")  # the method made from the row
    assert made.stdout == "Counted todo 2 How many tasks a pile holds (default todo).\n", made.stderr
    typed = api(counted, "got = Backlog('.').call(countverb.count, pile='done')")  # the typed door: no line in api.py
    assert typed.stdout == "Counted done 0\n", typed.stderr


def api(repo, line: str, *more: str) -> subprocess.CompletedProcess:
    """One API call (`line`, which sets `got`) with the throwaway row registered; prints the result."""
    code = "\n".join(
        (
            "import countverb; countverb.register()",
            "from maildir_backlog import Backlog",
            line,
            f"print(type(got).__name__, got.pile, got.tasks{''.join(', ' + m for m in more)})",
        )
    )
    return subprocess.run([sys.executable, "-c", code], cwd=repo.path, env=env(), capture_output=True, text=True)


def test_mypy_checks_a_call_of_the_new_verb(tmp_path, monkeypatch):
    """`Backlog.call(countverb.count, ...)` is checked by mypy --strict against the kernel function:
    a misspelt keyword and a wrong type are errors, the right call none."""
    mypy_api = pytest.importorskip("mypy.api")
    head = "from countverb import count\nfrom maildir_backlog import Backlog\n\n"
    (tmp_path / "count_right.py").write_text(head + "Backlog('.').call(count, pile='done')\n", encoding="utf-8")
    (tmp_path / "count_wrong.py").write_text(
        head + "Backlog('.').call(count, pil='done')\nBacklog('.').call(count, pile=3)\n", encoding="utf-8"
    )
    monkeypatch.setenv("MYPYPATH", os.pathsep.join((str(ROOT), str(FIXTURE))))
    config, cache = str(ROOT / "pyproject.toml"), str(ROOT / ".mypy_cache")
    files = [str(tmp_path / "count_right.py"), str(tmp_path / "count_wrong.py")]
    out, err, code = mypy_api.run(["--config-file", config, "--cache-dir", cache, "--no-error-summary", *files])
    errors = [line for line in out.splitlines() if ": error:" in line and "count_" in line.split(":", 1)[0]]
    assert code == 1 and not err, out + err
    assert all("count_wrong.py" in line for line in errors) and len(errors) == 2, out
    assert any('"pil"' in line for line in errors) and any('"pile"' in line for line in errors), out


def test_the_json_contract_checks_a_new_row_by_its_example(counted, monkeypatch):
    """test_json_contract's scenario runs a verb it has no step for by its row's first example, and
    checks the object against the schema made from the row (nothing written for it)."""
    monkeypatch.syspath_prepend(str(FIXTURE))
    from countverb import ROW

    run = Contract(counted, lambda *args: command(counted, *args), {"count": ROW})
    assert run.example(ROW) == {"pile": "todo", "tasks": 2}
    assert schemagen.schema_for(ROW)["title"] == "backlog count"


def test_the_docs_check_asks_nothing_of_a_new_row_and_finds_it_once_gone(monkeypatch):
    monkeypatch.syspath_prepend(str(FIXTURE))
    from countverb import ROW

    table = [row for row in verbs.VERBS if row.name != ROW.name]
    assert stale_docs([*table, ROW]) == []  # no README line, no docs/json.md section asked of it
    readme = README.replace(
        "backlog where  ", "backlog count                           # a pile's size\nbacklog where  "
    )
    json_md = JSON_MD + "\n### `count`\n\n`{pile, tasks}`.\n"
    assert stale_docs([*table, ROW], readme, json_md) == []  # documented while it lives
    said = stale_docs(table, readme, json_md)  # dropped, its doc lines left behind
    assert len(said) == 2 and all("`count`" in line for line in said), said


def test_a_new_row_is_a_tool_and_a_broken_row_breaks_its_own_tool_only(counted, monkeypatch):
    """Over MCP (the official Python SDK's client, as tests/test_mcp.py): `count` is listed with the
    output schema made from its result class and answers in it; `tally`, whose kernel function is
    gone, is listed saying so and every call of it is the error naming its row; the other tools
    (`count`, `ready`) still work."""
    pytest.importorskip("mcp")
    import anyio
    from jsonschema import Draft202012Validator
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    variables = {key: os.environ[key] for key in GIT_IDENTITY if key in os.environ}
    variables.update(HOME=os.environ["HOME"], BACKLOG_TEST_BROKEN="1")
    variables["PYTHONPATH"] = env()["PYTHONPATH"]
    params = StdioServerParameters(command=sys.executable, args=[SCRIPT, "mcp"], cwd=str(counted.path), env=variables)
    monkeypatch.syspath_prepend(str(FIXTURE))
    from countverb import ROW
    from test_mcp import steps_of

    planned = steps_of(ROW)  # what test_mcp's plan runs for a tool it has no step for

    async def scenario():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            tools = {t.name: t for t in (await client.list_tools()).tools}
            count, tally = tools["count"], tools["tally"]
            assert count.output_schema["properties"] == {"pile": {"type": "string"}, "tasks": {"type": "integer"}}
            assert count.input_schema["properties"]["pile"]["enum"] == ["todo", "doing", "done", "failed"]
            assert "the row of `tally` is broken" in tally.description
            broken = await client.call_tool("tally", {})
            got = await client.call_tool("count", {"pile": "todo"})
            ready = await client.call_tool("ready", {})
            for name, arguments, kind in planned:
                result = await client.call_tool(name, arguments)
                payload = json.loads(result.content[0].text)
                assert bool(result.is_error) is (kind is not None) and payload.get("kind") == kind, payload
            return got, broken, ready, count.output_schema

    got, broken, ready, schema = anyio.run(scenario)
    assert schema == schemagen.schema_for(ROW)
    assert not got.is_error and got.structured_content == {"pile": "todo", "tasks": 2}
    Draft202012Validator(schema).validate(got.structured_content)
    error = json.loads(broken.content[0].text)
    assert broken.is_error and error["kind"] == "internal" and error["code"] == 1
    assert error["error"].startswith("verb table: the row of `tally` is broken (run:"), error
    # (the order is newest first, then slug: the two adds may fall in one second of git's clock or in two)
    assert not ready.is_error and sorted(t["slug"] for t in ready.structured_content["tasks"]) == [
        "alpha-plan",
        "beta-plan",
    ]


def test_a_broken_row_fails_its_own_verb_on_the_command_naming_the_row(counted):
    proc = command(counted, "--json", "tally", BACKLOG_TEST_BROKEN="1")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert json.loads(proc.stdout)["error"].startswith("verb table: the row of `tally` is broken (run:")
    assert command(counted, "count", BACKLOG_TEST_BROKEN="1").stdout == "todo: 2\n"
