"""`backlog mcp`: the verbs as Model Context Protocol tools on stdio, over the Python API.

Built on the official SDK (`pip install 'maildir-backlog[mcp]'`), imported only here, only when
the verb runs. Each tool returns the verb's `--json` object as JSON text (docs/json.md); a
failure returns the error object (`{"error", "code", "kind", "retryable"}`, docs/json.md) as an
error result, so an agent reads the same shapes whether it calls the command or the server. Every call opens the
backlog afresh in the directory the server was started in (`backlog -C DIR mcp`).
"""

# No `from __future__ import annotations` here: the SDK reads the tools' signatures, and their
# annotations must be real objects (CallToolResult is imported inside `build`, lazily).
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .api import Backlog, Reply
from .errors import BacklogError, error_object

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp.types import CallToolResult

NOTHING = {"slug": None, "message": "no available tasks"}
INSTRUCTIONS = (
    "A task queue in this git repository; `prime` tells its workflow. The loop: `ready` (what is available),"
    " `take` (claim the best task; the result holds its description, budget_seconds and deadline),"
    " `progress` (a note as you go),"
    " then `advance` once per pipeline stage until the task's pile is `done`. Give up with `cancel` or"
    " `fail`. Errors come back as {error, code, kind, retryable}: 1 refused (do not repeat), 2 invalid input"
    " (fix the call), 3 lost a race (try again now), 4 unavailable (try again later)."
)


def _text(payload: object, error: bool = False) -> "CallToolResult":
    from mcp.types import CallToolResult, TextContent

    text = json.dumps(payload, default=str, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=error)


def _answer(call: Callable[[], object]) -> "CallToolResult":
    """Run one API call: its --json object, or the error object (never a traceback)."""
    try:
        value = call()
    except BacklogError as exc:
        return _text(exc.payload(), error=True)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        return _text(error_object(f"{where}{exc.strerror or exc}", 1, "failed"), error=True)
    except Exception as exc:  # a bug: still the error object, as the command says it (never a traceback)
        return _text(error_object(f"internal error: {type(exc).__name__}: {exc}", 1, "internal"), error=True)
    if value is None:
        return _text(NOTHING)
    if isinstance(value, list):
        return _text({"tasks": [item.data for item in value]})
    assert isinstance(value, Reply)
    return _text(value.data)


def build(path: str | Path) -> "MCPServer":
    """The server, its tools registered (one per verb); `serve` runs it on stdio."""
    from mcp.server.mcpserver import MCPServer
    from mcp.types import CallToolResult

    from . import __version__

    bl = Backlog(path)
    server: MCPServer = MCPServer("backlog", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    def tool(fn: Callable[..., CallToolResult]) -> None:
        server.add_tool(fn, name=fn.__name__.rstrip("_"), description=fn.__doc__, structured_output=False)

    def take(slug: str | None = None) -> CallToolResult:
        """Claim the best available todo task (or `slug`): slug, path, pile, title, description, frontmatter,
        claimer, branch, budget_seconds, deadline. `{"slug": null, ...}` when nothing is available."""
        return _answer(lambda: bl.take(slug))

    def ready(limit: int | None = None) -> CallToolResult:
        """The tasks `take` would pick, in its order, without claiming: {tasks: [{slug, title, priority, where}]}."""
        return _answer(lambda: bl.ready(limit))

    def show(slug: str) -> CallToolResult:
        """One task: pile, description, frontmatter with defaults, claim of record, parsed log, clock."""
        return _answer(lambda: bl.show(slug))

    def status() -> CallToolResult:
        """Pile counts and every in-flight task (claimer, branch, age_seconds, budget_seconds, deadline, stale)."""
        return _answer(bl.status)

    def list_(pile: str | None = None) -> CallToolResult:
        """The tasks of a pile (default todo) with priority and readiness."""
        return _answer(lambda: bl.list(pile))

    def add(
        slug: str,
        category: str | None = None,
        priority: int | None = None,
        timeout: str | None = None,
        depends: list[str] | None = None,
        title: str | None = None,
        body: str | None = None,
    ) -> CallToolResult:
        """Create task `<slug>-<category>` (category: plan, followup, task-list, ideas; default plan).
        depends: items `SLUG` or `SLUG:REASON`; timeout e.g. 45m, 24h, 7d; body: markdown description."""
        opts: dict[str, Any] = dict(priority=priority, timeout=timeout, depends=depends or (), title=title, body=body)
        return _answer(lambda: bl.add(slug, category, **opts))

    def progress(note: str, slug: str | None = None, force: bool = False) -> CallToolResult:
        """Append a progress note to your in-flight task (the one claimed on this branch, or `slug`)."""
        return _answer(lambda: bl.progress(note, slug, force))

    def advance(slug: str, pr: str | None = None, force: bool = False) -> CallToolResult:
        """Move the task one step along the pipeline (call once per stage until its pile is done);
        pr: the pull request URL, recorded on the step into done."""
        return _answer(lambda: bl.advance(slug, pr, force))

    def cancel(slug: str, reason: str, force: bool = False) -> CallToolResult:
        """Move an in-flight task to done/ as cancelled (no longer wanted)."""
        return _answer(lambda: bl.cancel(slug, reason, force))

    def fail(slug: str, reason: str, force: bool = False) -> CallToolResult:
        """Move an in-flight task to failed/ (could not be done)."""
        return _answer(lambda: bl.fail(slug, reason, force))

    def retry(slug: str, reason: str, sets: dict[str, str] | None = None) -> CallToolResult:
        """Move a failed task back to todo/; sets edits frontmatter fields on the way, e.g. {"timeout": "3d"}."""
        return _answer(lambda: bl.retry(slug, reason, sets))

    def rescue(slug: str) -> CallToolResult:
        """Take over an in-flight task that is past its budget (refused while within it)."""
        return _answer(lambda: bl.rescue(slug))

    def prime() -> CallToolResult:
        """This project's workflow for an agent starting work: backend, pipeline, your claimer identity,
        the loop of calls, exit codes; `text` is the whole guide (markdown). Read it first."""
        return _answer(bl.prime)

    for fn in (prime, take, ready, show, status, list_, add, progress, advance, cancel, fail, retry, rescue):
        tool(fn)
    return server


def serve(path: str | Path) -> int:
    """Run the server on stdio until the client closes it."""
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError:
        raise BacklogError(
            "`backlog mcp` needs the MCP SDK: pip install 'maildir-backlog[mcp]' (or pip install 'mcp>=2')"
        ) from None
    Backlog(path).context()  # fail fast, with the one-line error, when there is no backlog here
    build(path).run("stdio")
    return 0
