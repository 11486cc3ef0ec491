"""The verb table (maildir_backlog/verbs/): each verb declared once, and the command, the API and
the MCP tools made from it. A row and its kernel function agree; a new row (or a new parameter,
one line) is a new verb (or option) on every face, with nothing else to edit."""

from __future__ import annotations

import ast
import importlib
import inspect
import re

import pytest
from conftest import ROOT

from maildir_backlog import api, cliapp, clicall, mcp_server, project, schemagen, verbs
from maildir_backlog.context import Result
from maildir_backlog.errors import InvalidInput
from maildir_backlog.verbspec import Param, Tool, Verb

ROWS = {verb.name: verb for verb in verbs.VERBS}


def test_names_are_unique_and_the_closed_values_are_the_projects():
    assert len(ROWS) == len(verbs.VERBS)
    assert verbs.CATEGORIES == project.CATEGORIES and verbs.BACKENDS == project.BACKENDS


@pytest.mark.parametrize("name", sorted(ROWS))
def test_a_row_agrees_with_its_kernel_function(name):
    """Every parameter reaches the kernel function by keyword; what `before` adds too."""
    verb = ROWS[name]
    accepted = inspect.signature(verb.kernel()).parameters
    keys = [p.key or p.name for p in verb.params] + (["recovered"] if verb.before is not None else [])
    assert all(key in accepted for key in keys), (name, keys, list(accepted))
    assert verb.summary.endswith(".") and "\n" not in verb.summary
    assert verb.examples and all(line.startswith(("backlog ", "echo ")) for line in verb.examples)
    assert all(len(p.help) > 15 for p in verb.params), name
    if verb.schema:  # its --json object's schema, made from the row (no file to write)
        assert schemagen.schema_for(verb)["type"] == "object"


@pytest.mark.parametrize("name", sorted(ROWS))
def test_every_face_is_made_from_the_row(name):
    verb = ROWS[name]
    door = cliapp.Backlog("backlog")._subcommands[name].get()(f"backlog {name}")
    switches = {p.flag.lstrip("-") for p in verb.params_of("cli") if not p.positional}
    assert switches <= set(door._switches_by_name) and ("json" in door._switches_by_name) is verb.schema
    if verb.api:
        method = getattr(api.Backlog, verb.method)
        assert list(inspect.signature(method).parameters)[1:] == [p.name for p in verb.params_of("api")]
        assert method.__doc__ == verb.summary
    if verb.tool is not None:
        assert verb in mcp_server.TOOLS
        properties = verb.input_schema()["properties"]
        assert set(properties) == {p.name for p in verb.params_of("mcp")} - set(verb.tool.preset)
        assert all(prop["description"] for prop in properties.values())


def test_the_tools_that_end_or_take_away_a_claim_are_destructive():
    destructive = {verb.name for verb in verbs.VERBS if verb.tool is not None and verb.tool.destructive}
    assert destructive == {"cancel", "fail", "release", "rescue"}
    assert ROWS["add"].input_schema()["properties"]["category"]["enum"] == list(project.CATEGORIES)


README = (ROOT / "README.md").read_text(encoding="utf-8")
JSON_MD = (ROOT / "docs/json.md").read_text(encoding="utf-8")
LOOP = ("ready", "take", "progress", "advance")  # the agent's loop (guide.agent_loop): the README's main verbs


def named(readme: str, json_md: str) -> dict[str, set[str]]:
    """The verbs the docs name, by file: README's command list (each `backlog VERB` line of the sh
    block under `## The verbs`) and its `backlog VERB` in inline code; docs/json.md's section
    titles (each `### ` title's names in backquotes)."""
    block = readme.split("\n## The verbs\n", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    listed = set(re.findall(r"^backlog ([a-z][a-z-]*)", block, re.M))
    quoted = set(re.findall(r"`backlog (?:--json )?([a-z][a-z-]*)", readme))
    titles = {name for line in re.findall(r"^### (.*)$", json_md, re.M) for name in re.findall(r"`([^`]+)`", line)}
    return {"README.md": listed | quoted, "docs/json.md": titles}


def stale_docs(rows, readme: str = README, json_md: str = JSON_MD) -> list[str]:
    """The docs check: every verb the README and docs/json.md name is a verb of `rows` (a renamed or
    dropped verb leaves no line behind), each item saying how to fix it. It asks nothing of a new
    verb: `backlog --help`, `backlog VERB --help` and its schema (`schemagen`) are made from its row
    (docs/design.md, *One verb table*)."""
    known = {verb.name for verb in rows}
    said = []
    for where, names in named(readme, json_md).items():
        for name in sorted(names - known):
            said.append(
                f"{where} names `{name}`, which is no verb of the table (verbs/): rename it or drop its"
                f" {'line' if where == 'README.md' else 'section'}"
            )
    return said


def test_the_docs_name_only_verbs_of_the_table():
    assert stale_docs(verbs.VERBS) == []


def test_the_readme_opens_with_the_quick_start_and_lists_the_main_verbs():
    opening = README.split("\n## ", 1)[0]
    assert "```sh\npip install . && backlog status" in opening
    assert set(LOOP) <= named(README, JSON_MD)["README.md"]


def test_the_docs_check_finds_a_verb_that_is_gone():
    without_list = [verb for verb in verbs.VERBS if verb.name != "list"]
    said = stale_docs(without_list)
    assert len(said) == 2 and all("`list`" in line for line in said), said
    assert said[0].startswith("README.md names `list`") and said[1].startswith("docs/json.md names `list`")


def echo(path, loud=None, times=None, tags=()):
    """The kernel function of the row below: what it was given."""
    return Result({"path": path, "loud": loud, "times": times, "tags": tags})


def as_json(result):
    """The API's value of the row below: its --json object."""
    return result.json()


ECHO = Verb(
    "echo",
    "Say what it was given.",
    ("backlog echo --times 2",),
    lambda: echo,
    (
        Param("loud", "say it loudly, for everyone to hear", "bool"),
        Param("times", "how many times, a whole number >= 1", "int", minimum=1, argname="N"),
        Param("tags", "a tag to say; repeat for several", "list", argname="TAG"),  # a new parameter: this line
    ),
    lambda: as_json,
    Tool("Echo", "Say what it was given.", read_only=True),
    opens="path",
    schema=False,
)


def test_a_new_row_is_a_verb_on_every_face(tmp_path):
    door = cliapp._door(ECHO)
    assert {"loud", "times", "tags"} <= set(door("backlog echo")._switches_by_name)
    assert door.__doc__ == "Say what it was given." and "backlog echo --times 2" in door.DESCRIPTION_MORE
    said = api._method(ECHO)(api.Backlog(tmp_path), times=2, tags=["a"])
    assert said == {"path": str(tmp_path), "loud": False, "times": 2, "tags": ["a"]}
    assert ECHO.input_schema() == {
        "type": "object",
        "properties": {
            "loud": {"type": "boolean", "description": "say it loudly, for everyone to hear", "default": False},
            "times": {"type": "integer", "description": "how many times, a whole number >= 1", "minimum": 1},
            "tags": {"type": "array", "items": {"type": "string"}, "description": "a tag to say; repeat for several"},
        },
        "additionalProperties": False,
    }
    assert mcp_server.check(ECHO, {"times": 3, "loud": None}) == {"times": 3}
    with pytest.raises(mcp_server.BadArguments, match="unknown argument time"):
        mcp_server.check(ECHO, {"time": 3})


def test_a_whole_number_switch_says_what_it_expects():
    times = ECHO.params[1]
    assert clicall.option(times, "7") == 7
    with pytest.raises(InvalidInput, match=r"invalid --times 'x': expected a whole number >= 1"):
        clicall.option(times, "x")


@pytest.mark.parametrize("module", [verbs, verbs.care], ids=["verbs", "verbs.care"])
def test_the_lazy_modules_are_the_ones_mypy_checks(module):
    """A table module's `if TYPE_CHECKING:` imports (what mypy checks the rows' references against)
    and its `else:` lazy modules (what runs) name the same modules under the same names."""
    tree = ast.parse(inspect.getsource(module))
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    typed = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom)
        package = "maildir_backlog" + ("" if node.module is None else f".{node.module}")
        typed.update({alias.asname or alias.name: f"{package}.{alias.name}" for alias in node.names})
    lazy = {name: repr(vars(module)[name]) for name in typed}
    assert lazy == {name: f"Lazy({path!r})" for name, path in typed.items()}
    for name, path in typed.items():
        assert importlib.import_module(path)  # each exists
