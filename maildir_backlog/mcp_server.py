"""`backlog mcp`: the verbs as Model Context Protocol tools on stdio, over the Python API.

Built on the official SDK's low-level server (`pip install 'maildir-backlog[mcp]'`), imported only
here, only when the verb runs; this module owns every tool's contract (SPEC §5, *JSON*):

- every argument is described, and a closed value is an enum (`category`) or a boolean; an
  argument given as `null` counts as absent; an unknown argument is refused (a misspelt `slug`
  must never make `take` claim the best task instead);
- each tool's output schema is the verb's shipped schema (`schemas/<verb>.json`), and a result is
  the verb's `--json` object twice: as structured content and as JSON text (docs/json.md);
- read-only tools say so (`readOnlyHint`); the others say whether they are destructive (they end
  or take away a claim) and idempotent (a repeat with the same arguments changes nothing more);
- a failure, invalid arguments included, is an error result holding the error object
  (`{"error", "code", "kind", "retryable"}`, schemas/error.json), built in one place
  (`error_payload`), so an agent reads the same shapes whether it calls the command or the server.

Every call opens the backlog afresh in the directory the server was started in (`backlog -C DIR mcp`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import limits
from .api import Backlog, Reply
from .errors import BacklogError, InvalidInput, error_object
from .project import CATEGORIES

if TYPE_CHECKING:
    from mcp import types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server

NOTHING = {"slug": None, "message": "no available tasks"}
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
    """The error object for any failure of a tool call (schemas/error.json): every MCP error
    payload is built here, from the error's own `payload` (kind, retryable, holder, settled), as
    the command prints it; a file-system failure is `failed`, a bug `internal`."""
    if isinstance(exc, BacklogError):
        return exc.payload()
    if isinstance(exc, OSError):
        return error_object(f"{f'{exc.filename}: ' if exc.filename else ''}{exc.strerror or exc}", 1, "failed")
    return error_object(f"internal error: {type(exc).__name__}: {exc}", 1, "internal")


# -- the tools -------------------------------------------------------------------------------
def _arg(kind: str, description: str, **more: Any) -> dict[str, Any]:
    return {"type": kind, "description": description, **more}


SLUG = "the task's slug, as `take`, `ready`, `list` or `show` name it (e.g. fix-parser-plan)"
FORCE = _arg(
    "boolean",
    "act on a claim that is not yours (made on another branch or by another claimer); the log records by=<you>",
    default=False,
)
REASON = _arg("string", "why, in one line (recorded in the task's log)")


@dataclass(frozen=True)
class Spec:
    """One tool: its name, what it does, its arguments (JSON Schema properties), the API call."""

    name: str
    title: str
    description: str
    run: Callable[..., object]  # (Backlog, **arguments) -> the API's result
    args: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False

    @property
    def input_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "object", "properties": dict(self.args), "additionalProperties": False}
        if self.required:
            schema["required"] = list(self.required)
        return schema

    def tool(self) -> types.Tool:
        from mcp import types

        if self.read_only:
            hints = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
        else:
            hints = types.ToolAnnotations(
                read_only_hint=False,
                destructive_hint=self.destructive,
                idempotent_hint=self.idempotent,
                open_world_hint=False,  # this repository and its declared git remote, nothing else
            )
        return types.Tool(
            name=self.name,
            title=self.title,
            description=self.description,
            input_schema=self.input_schema,
            output_schema=output_schema(self.name),
            annotations=hints,
        )

    def check(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments to call with, or BadArguments saying what is wrong (one line)."""
        from jsonschema import Draft202012Validator  # type: ignore[import-untyped]  # (no type hints shipped)

        given = {key: value for key, value in arguments.items() if value is not None}  # null: absent
        errors = sorted(
            Draft202012Validator(self.input_schema).iter_errors(given), key=lambda e: [str(p) for p in e.path]
        )
        if errors:
            usage = any(e.validator in ("required", "additionalProperties") for e in errors)
            said = "; ".join(dict.fromkeys(self._explain(e, given) for e in errors))
            raise BadArguments(f"{self.name}: {said}", "usage" if usage else "invalid")
        return {k: int(v) if self.args[k]["type"] == "integer" else v for k, v in given.items()}

    def _explain(self, error: Any, given: Mapping[str, Any]) -> str:  # error: a jsonschema ValidationError
        if error.validator == "required":
            missing = [name for name in self.required if name not in given]
            return f"missing argument {', '.join(missing)}"
        if error.validator == "additionalProperties":
            unknown = _short(", ".join(sorted(set(given) - set(self.args))))
            return f"unknown argument {unknown} (arguments: {', '.join(self.args) or 'none'})"
        where = _short(".".join(str(part) for part in error.path) or "arguments")
        return f"argument {where}: {_short(error.message)}"


def _short(text: str, most: int = 200) -> str:
    """A caller's text quoted in an error: bounded (an argument may be a megabyte)."""
    return text if len(text) <= most else text[:most] + "…"


def _add(bl: Backlog, slug: str, category: str | None = None, **opts: Any) -> object:
    return bl.add(slug, category, **opts)


TOOLS = (
    Spec(
        "prime",
        "Read the workflow first",
        "This project's workflow for an agent starting work: backend, pipeline, your claimer identity, the loop"
        " of tool calls, error codes; `text` is the whole guide (markdown). Read it first.",
        lambda bl: bl.prime(tools=True),
        read_only=True,
    ),
    Spec(
        "take",
        "Claim a task",
        "Claim the best available todo task (or `slug`): slug, path, pile, title, description, frontmatter,"
        " claimer, branch, budget_seconds, deadline. `{slug: null, ...}` when nothing is available.",
        lambda bl, slug=None: bl.take(slug),
        {"slug": _arg("string", f"claim this task instead of the best available one: {SLUG}")},
    ),
    Spec(
        "ready",
        "What take would pick",
        "The tasks `take` would pick, in its order, without claiming: {tasks: [{slug, title, priority, where}]}.",
        lambda bl, limit=None: bl.ready(limit),
        {"limit": _arg("integer", "at most this many tasks (the best first); default: all", minimum=1)},
        read_only=True,
    ),
    Spec(
        "show",
        "One task",
        "One task wherever the clone knows it: pile, description, frontmatter with defaults, claim of record,"
        " parsed log, clock (budget_seconds, deadline).",
        lambda bl, slug: bl.show(slug),
        {"slug": _arg("string", SLUG)},
        ("slug",),
        read_only=True,
    ),
    Spec(
        "status",
        "Pile counts and claims",
        "Pile counts and every in-flight task (claimer, branch, age_seconds, budget_seconds, deadline, stale);"
        " with remote: every clone's claims as the git remote holds them.",
        lambda bl, remote=False: bl.status(remote=remote),
        {
            "remote": _arg(
                "boolean",
                "every clone's claims as the declared git remote holds them, instead of this clone's view",
                default=False,
            )
        },
        read_only=True,
    ),
    Spec(
        "list",
        "The tasks of a pile",
        "The tasks of a pile with priority and readiness: {pile, tasks: [{slug, priority, ready, blocked_by, ...}]}.",
        lambda bl, pile=None: bl.list(pile),
        {"pile": _arg("string", "a pile of this project's pipeline (see `where`), or failed; default todo")},
        read_only=True,
    ),
    Spec(
        "where",
        "Where the piles live",
        "The backend, the shared root and every pile's resolved path.",
        lambda bl: bl.where(),
        read_only=True,
    ),
    Spec(
        "add",
        "Add a task",
        "Create task `<slug>-<category>` in the first pile (committed on the intake branch).",
        _add,
        {
            "slug": _arg("string", "the new task's name; the task's slug becomes <slug>-<category>"),
            "category": _arg("string", "what kind of task (default plan)", enum=list(CATEGORIES)),
            "priority": _arg("integer", "lower is picked first (default 999)", minimum=1, maximum=limits.PRIORITY_MAX),
            "timeout": _arg("string", "the budget in each in-flight pile, e.g. 45m, 24h, 7d, or none"),
            "depends": {
                "type": "array",
                "items": {"type": "string"},
                "description": "tasks that must be done first: items SLUG or SLUG:REASON",
            },
            "title": _arg("string", "the task's title (the first heading of its description)"),
            "body": _arg("string", "the task's description, markdown"),
        },
        ("slug",),
        idempotent=True,  # a second add of the same slug is refused
    ),
    Spec(
        "progress",
        "Note progress",
        "Append a progress note to your in-flight task (the one claimed on this branch, or `slug`).",
        lambda bl, note, slug=None, force=False: bl.progress(note, slug, force),
        {
            "note": _arg("string", "what you did, in one line"),
            "slug": _arg("string", f"the task, when more than one is claimed on this branch: {SLUG}"),
            "force": FORCE,
        },
        ("note",),
    ),
    Spec(
        "advance",
        "Advance a task",
        "Move the task one step along the pipeline (call once per stage until its pile is done).",
        lambda bl, slug, pr=None, force=False: bl.advance(slug, pr, force),
        {
            "slug": _arg("string", SLUG),
            "pr": _arg("string", "the pull request URL, recorded on the step into done"),
            "force": FORCE,
        },
        ("slug",),
    ),
    Spec(
        "cancel",
        "Cancel a task",
        "Move an in-flight task to done/ as cancelled (no longer wanted; terminal).",
        lambda bl, slug, reason, force=False: bl.cancel(slug, reason, force),
        {"slug": _arg("string", SLUG), "reason": REASON, "force": FORCE},
        ("slug", "reason"),
        destructive=True,
        idempotent=True,
    ),
    Spec(
        "fail",
        "Give a task up",
        "Move an in-flight task to failed/ (could not be done; `retry` reopens it).",
        lambda bl, slug, reason, force=False: bl.fail(slug, reason, force),
        {"slug": _arg("string", SLUG), "reason": REASON, "force": FORCE},
        ("slug", "reason"),
        destructive=True,
        idempotent=True,
    ),
    Spec(
        "retry",
        "Reopen a failed task",
        "Move a failed task back to todo/, optionally editing frontmatter fields on the way.",
        lambda bl, slug, reason, sets=None: bl.retry(slug, reason, sets),
        {
            "slug": _arg("string", SLUG),
            "reason": REASON,
            "sets": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": 'frontmatter fields to set, e.g. {"timeout": "3d", "priority": "2"}',
            },
        },
        ("slug", "reason"),
        idempotent=True,
    ),
    Spec(
        "rescue",
        "Take over a timed-out task",
        "Take over an in-flight task that is past its budget (refused while within it); its holder is displaced.",
        lambda bl, slug: bl.rescue(slug),
        {"slug": _arg("string", SLUG)},
        ("slug",),
        destructive=True,
        idempotent=True,
    ),
)


@cache
def output_schema(verb: str) -> dict[str, Any]:
    """The verb's shipped schema (docs/json.md): its object at the root, as MCP requires."""
    text = (resources.files("maildir_backlog") / "schemas" / f"{verb}.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def answer(bl: Backlog, spec: Spec | None, name: str, arguments: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """One tool call: (its --json object, False) or (the error object, True); never a traceback."""
    try:
        if spec is None:
            raise BadArguments(f"unknown tool {name!r} (tools: {', '.join(t.name for t in TOOLS)})", "usage")
        value = spec.run(bl, **spec.check(arguments))
    except Exception as exc:  # every failure, a bug included, is answered in the error shape
        return error_payload(exc), True
    if value is None:
        return dict(NOTHING), False
    if isinstance(value, list):
        return {"tasks": [item.data for item in value]}, False
    assert isinstance(value, Reply)  # noqa: S101 (narrows a type for mypy; every Spec.run returns a Reply)
    return value.data, False


def build(path: str | Path) -> Server[Any]:
    """The server, its tools listed (one per verb); `serve` runs it on stdio."""
    import anyio
    from mcp import types
    from mcp.server.lowlevel import Server

    from . import __version__

    bl = Backlog(path)
    specs = {spec.name: spec for spec in TOOLS}
    listed = types.ListToolsResult(tools=[spec.tool() for spec in TOOLS])

    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
        return listed

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
        spec, arguments = specs.get(params.name), params.arguments or {}
        payload, failed = await anyio.to_thread.run_sync(answer, bl, spec, params.name, arguments)
        text = json.dumps(payload, default=str, ensure_ascii=False)
        content: list[types.ContentBlock] = [types.TextContent(type="text", text=text)]
        return types.CallToolResult(content=content, structured_content=json.loads(text), is_error=failed)

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

    Backlog(path).context()  # fail fast, with the one-line error, when there is no backlog here
    server = build(path)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)
    return 0
