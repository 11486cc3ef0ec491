"""`backlog mcp`: the verbs as Model Context Protocol tools on stdio, over the Python API.

Built on the official SDK's low-level server (`pip install 'maildir-backlog[mcp]'`), imported only
here, only when the verb runs. The tools are the verb table's rows with a `tool` column
(`verbs/`): their arguments are the rows' parameters, so this module names no verb. It keeps
every tool's contract (SPEC §5, *JSON*):

- every argument is described, and a closed value is an enum (`category`) or a boolean; a closed
  set the project declares (`list`'s `pile`: its pipeline, then failed; `Param.enum_of`) is an
  enum built when the server starts; an argument given as `null` counts as absent; an unknown
  argument is refused (a misspelt `slug` must never make `take` claim the best task instead);
- a row that is broken (its kernel function, result or schema not found) breaks its own tool
  only: the tool is listed saying so, and every call of it is the error naming the row;
- each tool's output schema is the verb's schema, made from its row's reply type (`schemagen`,
  which every reader of the contract asks), and a successful
  result is the verb's `--json` object twice: as structured content (valid against that schema)
  and as JSON text (docs/json.md);
- read-only tools say so (`readOnlyHint`); the others say whether they are destructive (they end
  or take away a claim) and idempotent (a repeat with the same arguments changes nothing more and
  answers the same: not `add`, whose repeat is refused); a tool is open-world (`openWorldHint`)
  when it may talk to something beyond this clone: the project's git remote when `## Backend`
  declares one (every tool but `where` and `prime`: the moves push there, the views read it), and
  GitHub for `advance` (`pr: auto` asks `gh`) whatever the project (`Tool.reaches`);
- a failure, invalid arguments included, is an error result (`isError: true`) whose one text
  content is the error object (`{"error", "code", "kind", "retryable"}`, schema `error`), built
  in one place (`error_payload`), so an agent reads the same shapes whether it calls the command or
  the server. An error result carries **no structured content**: the error object is not the
  tool's output shape, and a client that checks structured content against the output schema
  (the official TypeScript SDK does, even on an error result) would refuse the whole reply
  (-32602) instead of showing the error.

Every call opens the backlog afresh in the directory the server was started in (`backlog -C DIR
mcp`); the project's declaration (its piles for the enums, whether it declares a remote for the
hints) is read once, when the server starts: a changed pipeline needs a restarted server.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from .api import Backlog
from .errors import BacklogError, InvalidInput, error_object, json_safe
from .verbs import VERBS
from .verbspec import BrokenRow, Verb

if TYPE_CHECKING:
    from mcp import types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server

INSTRUCTIONS = (
    "A task queue in this git repository; `prime` tells its workflow. The loop: `ready` (what is available),"
    " `take` (claim the best task; the result holds its description, budget_seconds and deadline),"
    " `progress` (a note as you go),"
    " then `advance` once per pipeline stage until the task's pile is `done`. Give up with `cancel` or"
    " `fail`. Errors come back as {error, code, kind, retryable}: 1 refused (do not repeat), 2 invalid input"
    " (fix the call), 3 lost a race (try again now), 4 unavailable (try again later)."
)


# -- the error object ----------------------------------------------------------------------
class BadArguments(InvalidInput):
    """The arguments do not fit the tool's input schema: exit code 2, kind `usage` (missing or
    unknown arguments) or `invalid` (a value of the wrong type, out of range, not in the enum)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def error_payload(exc: BaseException) -> dict[str, Any]:
    """The error object for any failure of a tool call (`schemagen.schema("error")`): every MCP error
    payload is built here, from the error's own `payload` (kind, retryable, holder, settled), as
    the command prints it; a file-system failure is `failed`, a bug `internal`."""
    if isinstance(exc, BacklogError):
        return exc.payload()
    if isinstance(exc, OSError):
        return error_object(f"{f'{exc.filename}: ' if exc.filename else ''}{exc.strerror or exc}", 1, "failed")
    return error_object(f"internal error: {type(exc).__name__}: {exc}", 1, "internal")


# -- the tools: the verb table's rows that have a `tool` column (verbs/) ----------------------
TOOLS = tuple(verb for verb in VERBS if verb.tool is not None)


class Declared(NamedTuple):
    """What the tools' listing takes from the project, read once when the server starts: its closed
    sets by name (`Param.enum_of`; `piles`: the pipeline, then failed) and whether it declares a
    git remote the backend uses (SPEC §8)."""

    closed: Mapping[str, Sequence[str]]
    remote: bool


def declared(bl: Backlog) -> Declared:
    """The project's declaration, as the backlog opens (the one-line error when there is none)."""
    ctx = bl.context()
    return Declared({"piles": ctx.project.pipeline.all_piles}, ctx.backend.declares_remote)


def open_world(verb: Verb, remote: bool) -> bool:
    """Whether the tool may talk to something beyond this clone (`Tool.reaches`)."""
    assert verb.tool is not None  # noqa: S101 (narrows a type for mypy; TOOLS holds only rows with a tool)
    return verb.tool.reaches == "forge" or (verb.tool.reaches == "remote" and remote)


def tool(verb: Verb, project: Declared) -> types.Tool:
    """The verb as the server lists it: input schema from its parameters (the project's closed sets
    as enums), output schema its `--json` object's (made from the row), hints from its `tool` column."""
    from mcp import types

    spec = verb.tool
    assert spec is not None  # noqa: S101 (narrows a type for mypy; TOOLS holds only rows with a tool)
    world = open_world(verb, project.remote)
    if spec.read_only:
        hints = types.ToolAnnotations(read_only_hint=True, open_world_hint=world)
    else:
        hints = types.ToolAnnotations(
            read_only_hint=False,
            destructive_hint=spec.destructive,
            idempotent_hint=spec.idempotent,
            open_world_hint=world,
        )
    return types.Tool(
        name=verb.name,
        title=spec.title,
        description=spec.description,
        input_schema=verb.input_schema(project.closed),
        output_schema=output_schema(verb),
        annotations=hints,
    )


def checked_tool(verb: Verb, project: Declared) -> tuple[types.Tool, str]:
    """The tool as listed, and "" when its row holds; for a broken row (its kernel function, result
    or schema not found), a tool that says so and the one-line error its every call answers with:
    that tool fails, naming its row, and no other does."""
    from mcp import types

    try:
        verb.kernel()
        verb.shape()
        return tool(verb, project), ""
    except Exception as exc:  # a broken row: any failure of building its tool, told by the tool itself
        said = (
            exc.message if isinstance(exc, BacklogError) else f"verb table: the row of `{verb.name}` is broken ({exc})"
        )
        schema = {"type": "object", "properties": {}, "additionalProperties": False}
        return types.Tool(name=verb.name, description=f"Unavailable: {said}", input_schema=schema), said


def check(verb: Verb, arguments: Mapping[str, Any], schema: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The arguments to call with (the tool's presets added), or BadArguments saying what is wrong
    (one line). `schema`: the tool's input schema as listed (default: the row's, without the
    project's enums)."""
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]  # (no type hints shipped)

    schema = schema or verb.input_schema()
    given = {key: value for key, value in arguments.items() if value is not None}  # null: absent
    errors = sorted(Draft202012Validator(schema).iter_errors(given), key=lambda e: [str(p) for p in e.path])
    if errors:
        usage = any(e.validator in ("required", "additionalProperties") for e in errors)
        said = "; ".join(dict.fromkeys(_explain(schema, e, given) for e in errors))
        raise BadArguments(f"{verb.name}: {said}", "usage" if usage else "invalid")
    properties = schema["properties"]
    checked = {k: int(v) if properties[k]["type"] == "integer" else v for k, v in given.items()}
    return {**checked, **(verb.tool.preset if verb.tool else {})}


def _explain(schema: Mapping[str, Any], error: Any, given: Mapping[str, Any]) -> str:  # a ValidationError
    if error.validator == "required":
        missing = [name for name in schema.get("required", ()) if name not in given]
        return f"missing argument {', '.join(missing)}"
    if error.validator == "additionalProperties":
        unknown = _short(", ".join(sorted(set(given) - set(schema["properties"]))))
        return f"unknown argument {unknown} (arguments: {', '.join(schema['properties']) or 'none'})"
    where = _short(".".join(str(part) for part in error.path) or "arguments")
    return f"argument {where}: {_short(error.message)}"


def _short(text: str, most: int = 200) -> str:
    """A caller's text quoted in an error: bounded (an argument may be a megabyte)."""
    return text if len(text) <= most else text[:most] + "…"


def output_schema(verb: Verb) -> dict[str, Any]:
    """The verb's schema, its object at the root as MCP requires: made from its row's reply type
    (`schemagen.schema_for`, as every reader of the contract gets it, made once per process);
    `BrokenRow` naming the row when it cannot be made."""
    from .schemagen import schema_for

    return schema_for(verb)


def answer(
    bl: Backlog,
    verb: Verb | None,
    name: str,
    arguments: Mapping[str, Any],
    schema: Mapping[str, Any] | None = None,
    broken: str = "",
) -> tuple[dict[str, Any], bool]:
    """One tool call: (its --json object, False) or (the error object, True); never a traceback.
    `schema`: the tool's input schema as listed; `broken`: why the tool's row is broken, if it is."""
    try:
        if verb is None:
            raise BadArguments(f"unknown tool {name!r} (tools: {', '.join(t.name for t in TOOLS)})", "usage")
        if broken:
            raise BrokenRow(broken)
        return bl.run(verb, check(verb, arguments, schema)).json(), False
    except Exception as exc:  # every failure, a bug included, is answered in the error shape
        return error_payload(exc), True


def build(path: str | Path) -> Server[Any]:
    """The server, its tools listed (one per verb, from the project as it is now: `declared`);
    `serve` runs it on stdio. No backlog here: the one-line error, before anything is served."""
    import anyio
    from mcp import types
    from mcp.server.lowlevel import Server

    from . import __version__

    bl = Backlog(path)
    project = declared(bl)
    specs = {verb.name: verb for verb in TOOLS}
    made = [checked_tool(verb, project) for verb in TOOLS]  # a broken row breaks its own tool only
    listed = types.ListToolsResult(tools=[made_tool for made_tool, _ in made])
    schemas = {t.name: t.input_schema for t in listed.tools}
    broken = {t.name: said for t, said in made if said}

    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
        return listed

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
        name, arguments = params.name, params.arguments or {}
        verb, schema = specs.get(name), schemas.get(name)
        payload, failed = await anyio.to_thread.run_sync(
            answer, bl, verb, name, arguments, schema, broken.get(name, "")
        )
        # (escaped as the CLI's --json is: a name that is not UTF-8 would otherwise end the server)
        text = json_safe(json.dumps(payload, default=str, ensure_ascii=False))
        content: list[types.ContentBlock] = [types.TextContent(type="text", text=text)]
        if failed:  # the error object as text only: it is not the tool's output shape (module docstring)
            return types.CallToolResult(content=content, is_error=True)
        return types.CallToolResult(content=content, structured_content=json.loads(text), is_error=False)

    return Server(
        "backlog",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def serve(path: str | Path) -> int:
    """Run the server on stdio until the client closes it."""
    try:
        import mcp.server.lowlevel  # noqa: F401
    except ImportError:
        raise BacklogError(
            "`backlog mcp` needs the MCP SDK: pip install 'maildir-backlog[mcp]' (or pip install 'mcp>=2')"
        ) from None
    import anyio
    from mcp.server.stdio import stdio_server

    server = build(path)  # fails fast, with the one-line error, when there is no backlog here

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)
    return 0
