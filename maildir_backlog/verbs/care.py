"""The verb table's second half (`verbs.VERBS` is both halves, in this order): the verbs that look
after the backlog rather than work a task (rename, where, maintain, migrate, check-deps, prime,
mcp), and the builders rows of both halves share: `flag` (an on/off parameter), `reads` (a
read-only verb's tool), `on_path` (a verb run on the directory, answering a plain Reply). Split
only to keep each module short; a row reads the same in either half."""

from __future__ import annotations

from collections.abc import Callable

from ..typed import TYPE_CHECKING, Any
from ..verbspec import Param, Ref, Tool, Verb, modules

if TYPE_CHECKING:  # as in verbs/__init__.py: the real modules to mypy, lazy ones at run time
    from .. import dispatch, mcp_server, results
    from ..commands import check_deps, maintain, prime, read, rename
    from ..shapes import care as care_shapes
else:
    (care_shapes,) = modules("maildir_backlog.shapes", "care")
    dispatch, mcp_server, results = modules("maildir_backlog", "dispatch", "mcp_server", "results")
    check_deps, maintain, prime, read, rename = modules(
        "maildir_backlog.commands", "check_deps", "maintain", "prime", "read", "rename"
    )

BACKENDS = ("maildir-shared", "maildir-git")  # project.BACKENDS (tested equal)


def flag(name: str, help: str, **more: Any) -> Param:
    """A parameter that is on or off (kind bool: the command's `--name` switch)."""
    return Param(name, help, "bool", **more)


def reads(title: str, description: str, **more: Any) -> Tool:
    """The MCP tool of a verb that only reads (status, show, list, ready; where, prime)."""
    return Tool(title, description, read_only=True, **more)


def on_path(
    name: str,
    summary: str,
    examples: tuple[str, ...],
    run: Ref[Callable[..., Any]],
    params: tuple[Param, ...],
    reply: Ref[Any],
) -> Verb:
    """The row of a verb run on the directory, no backlog opened, answering a plain `Reply`
    (setup, migrate, check-deps)."""
    return Verb(name, summary, examples, run, params, lambda: results.Reply, opens="path", reply=reply)


CARE: tuple[Verb, ...] = (
    Verb(
        "rename",
        "Give task OLD the slug NEW in every pile where it lives, and in every dependency naming it (one commit).",
        ('backlog rename "Fix_Login-plan" fix-login-plan',),
        lambda: rename.rename,
        (
            Param("old", "the task's present name (as its file is named)", positional=True, required=True),
            Param("new", "the slug it gets", positional=True, required=True),
        ),
        lambda: results.Reply,
        reply=lambda: care_shapes.RENAME,
    ),
    Verb(
        "where",
        "The shared root and where every pile lives.",
        ("backlog where",),
        lambda: read.where,
        (),
        lambda: results.Where,
        reads(
            "Where the piles live",
            "The backend, the shared root and every pile's resolved path.",
            reaches="clone",
        ),
        reply=lambda: care_shapes.WHERE,
    ),
    Verb(
        "maintain",
        "The janitor: report problems, and repair the safe ones (moves, timeouts, duplicates).",
        ("backlog maintain --dry-run", "backlog maintain --strict   # in CI or cron"),
        lambda: maintain.maintain,
        (
            flag("dry_run", "move nothing; print what would be done"),
            flag("strict", "exit 1 when an advisory bucket (4-8: deps, cycles, ...) is non-empty"),
        ),
        lambda: results.Report,
        before=lambda: dispatch.recovered,
        heal_unless="dry_run",
        reports_layout=True,
        reply=lambda: care_shapes.MAINTAIN,
    ),
    on_path(
        "migrate",
        "Switch backend, or convert the older flat layout.",
        ("backlog migrate --to maildir-shared --dry-run", "backlog migrate --from-flat"),
        lambda: dispatch.migrate,
        (
            Param("to", "the backend to switch to: maildir-shared or maildir-git", enum=BACKENDS, argname="BACKEND"),
            flag("from_flat", "convert the older flat layout (backlog/*.md, done/<year>/) into piles"),
            flag("dry_run", "print the plan; change nothing"),
        ),
        lambda: care_shapes.MIGRATE,
    ),
    on_path(
        "check-deps",
        "Pre-commit hook: every dependency of the given backlog files resolves.",
        ("backlog check-deps backlog/todo/*.md",),
        lambda: check_deps.check_deps,
        (Param("files", "the task files to check", "files", positional=True),),
        lambda: care_shapes.CHECK_DEPS,
    ),
    Verb(
        "prime",
        "Print this project's workflow for an agent starting work.",
        (
            "backlog prime                          # read it at the start of a session",
            "backlog prime --skill .claude/skills/backlog   # writes SKILL.md there",
            "backlog prime --hook                   # a SessionStart hook's output (setup --agent claude)",
        ),
        lambda: prime.prime,
        (
            flag(
                "tools",
                "tell the loop in calls of the MCP server's tools (`take`) rather than commands",
                faces=frozenset(("api", "mcp")),
            ),
            Param(
                "skill",
                "write DIR/SKILL.md (frontmatter name and description, then the same text) for harnesses that load"
                " skills",
                argname="DIR",
                faces=frozenset(("cli", "api")),
                key="skill_dir",
            ),
            flag(
                "hook",
                "print a Claude Code SessionStart hook's JSON holding the short guide (reads the hook's input on"
                " stdin and exports the session's claimer through $CLAUDE_ENV_FILE; setup --agent claude installs it)",
                faces=frozenset(("cli",)),
            ),
            flag(
                "full",
                "the whole guide (the default; with --hook, the whole guide rather than the short one)",
                faces=frozenset(("cli",)),
            ),
        ),
        lambda: results.Guide,
        reads(
            "Read the workflow first",
            "This project's workflow for an agent starting work: backend, pipeline, your claimer identity, the loop"
            " of tool calls, error codes; `text` is the whole guide (markdown). Read it first.",
            preset={"tools": True},
            reaches="clone",
        ),
        reply=lambda: care_shapes.PRIME,
    ),
    Verb(
        "mcp",
        "Serve the verbs over the Model Context Protocol on stdio (needs the [mcp] extra).",
        (
            "backlog mcp            # started by the agent harness (its MCP server configuration)",
            "backlog -C ~/src/app mcp",
        ),
        lambda: mcp_server.serve,
        opens="path",
        schema=False,  # the server speaks JSON-RPC on stdio: no --json object, no --json switch
    ),
)
