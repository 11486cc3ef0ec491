"""The verb table: every verb of `backlog`, declared once (`verbspec.Verb`).

The command (`cli.py` and `cliapp.py`), the Python API (`api.py`) and the MCP tools
(`mcp_server.py`) are made from these rows, and so are the JSON Schemas (`schemagen`), the test
suites' verb lists and plans, and the check that the docs name only verbs that exist. A row refers
to its functions by typed references (`lambda: claim.take`; the module a `verbspec.Lazy` until the
verb runs). Adding a verb: a row here, its kernel function, its tests (AGENTS.md, *Adding a verb*).
Adding a parameter: one `Param` line in its row (`flag` for an on/off one; and the kernel function's
keyword). A family of rows alike but for their words is made by one builder (`_settles`; `on_path`
in `care`), a tool's hints by their kind (`reads`, `_idempotent`, `_ends_claim`).
"""

from __future__ import annotations

from collections.abc import Callable

from .. import limits
from ..typed import TYPE_CHECKING, Any
from ..verbspec import Param, Ref, Tool, Verb, modules, read_body_file
from .care import BACKENDS, CARE, flag, on_path, reads

if TYPE_CHECKING:  # to mypy, the modules the rows refer to; at run time, each imported when its verb runs
    from .. import dispatch, results
    from ..commands import add, claim, edit, progress, read, settle
    from ..shapes import views as views_shapes
    from ..shapes import work as work_shapes
else:
    dispatch, results = modules("maildir_backlog", "dispatch", "results")
    views_shapes, work_shapes = modules("maildir_backlog.shapes", "views", "work")
    add, claim, edit, progress, read, settle = modules(
        "maildir_backlog.commands", "add", "claim", "edit", "progress", "read", "settle"
    )

CATEGORIES = ("plan", "followup", "task-list", "ideas")  # project.CATEGORIES (tested equal)
AGENTS = ("claude", "codex", "cursor")  # harness.HARNESSES (tested equal)

_SLUG = "the task's slug, as `take`, `ready`, `list` or `show` name it (e.g. fix-parser-plan)"
_FORCE = "act on a claim held by another branch; the log line records by=<you>"
_REASON = "why, in one line (recorded in the task's log)"


def _slug(help: str = _SLUG, required: bool = True) -> Param:
    return Param("slug", help, positional=True, required=required, slug=True)


def _force() -> Param:
    return flag("force", _FORCE)


def _reason() -> Param:
    return Param("reason", _REASON, positional=True, required=True)


def _idempotent(title: str, description: str) -> Tool:
    """The MCP tool of a verb whose repeat changes nothing more (retry, edit)."""
    return Tool(title, description, idempotent=True)


def _ends_claim(title: str, description: str) -> Tool:
    """The MCP tool of a verb that ends or hands on a claim (cancel, fail, release, rescue):
    destructive, and idempotent."""
    return Tool(title, description, destructive=True, idempotent=True)


def _settles(name: str, summary: str, example: str, run: Ref[Callable[..., Any]], tool: Tool, reply: Ref[Any]) -> Verb:
    """The row of a verb that takes an in-flight task out of flight, saying why (cancel, fail)."""
    return Verb(
        name, summary, (example,), run, (_slug(), _reason(), _force()), lambda: results.Moved, tool, reply=reply
    )


VERBS: tuple[Verb, ...] = (
    on_path(
        "setup",
        "Scaffold backlog/ for a backend and commit it, or connect agent harnesses to it (--agent).",
        (
            "backlog setup --backend=maildir-shared",
            'backlog setup --backend=maildir-git --pipeline "todo doing reviewing done"',
            "backlog setup --agent claude --agent codex",
            "backlog setup --agent cursor --check",
        ),
        lambda: dispatch.setup,
        (
            Param(
                "backend",
                "required to set up a backlog: maildir-shared (in-flight tasks shared by every worktree of the clone)"
                " or maildir-git (every pile tracked, every move a commit)",
                enum=BACKENDS,
                argname="BACKEND",
            ),
            Param(
                "pipeline",
                'pile names in order, containing todo and ending with done (default "todo doing done")',
                argname="PILES",
            ),
            flag(
                "hooks",
                "on an existing backlog, only install the post-checkout hook (fresh worktrees get their symlinks)",
            ),
            Param(
                "agent",
                "connect an agent harness: claude, codex or cursor (its MCP server, hook or rule, and a section of"
                " the root AGENTS.md)",
                "list",
                enum=AGENTS,
                argname="NAME",
            ),
            flag("check", "with --agent: change nothing; exit 1 listing what is missing or outdated"),
            flag("remove", "with --agent: take away what setup --agent added"),
        ),
        lambda: work_shapes.SETUP,
    ),
    Verb(
        "add",
        "Create a task in the first pile and commit it (CATEGORY: plan, followup, task-list or ideas).",
        (
            "backlog add login-form          # creates backlog/todo/login-form-plan.md",
            "backlog add flaky-test followup --priority 1 --timeout 4h",
            'backlog add api --depends login-form-plan:"needs the form"',
            'echo "Why and how." | backlog add cache --title "Cache it" --body-file -',
        ),
        lambda: add.add,
        (
            _slug("the new task's name; the task's slug becomes <slug>-<category>"),
            Param("category", "what kind of task (default plan)", positional=True, enum=CATEGORIES),
            Param(
                "priority",
                "a whole number >= 1, 1 most urgent (default 999)",
                "int",
                minimum=1,
                maximum=limits.PRIORITY_MAX,
                argname="N",
            ),
            Param(
                "timeout",
                "budget in each in-flight pile: a whole number and s, m, h, d or w, e.g. 45m, 24h, 7d (default 7d)",
                argname="T",
            ),
            Param(
                "depends",
                "a task that must be in done/ before this one is picked; repeat for several",
                "list",
                argname="SLUG[:REASON]",
                tool_help="tasks that must be done first: items SLUG or SLUG:REASON",
            ),
            Param("title", "the task's # heading (default: SLUG with spaces)", argname="T"),
            Param(
                "body",
                "read the description (markdown) from FILE, or from standard input with -",
                argname="FILE|-",
                switch="--body-file",
                read=read_body_file,
                tool_help="the task's description, markdown",
            ),
            flag("here", "commit on this branch instead of the intake branch (work of this branch)"),
        ),
        lambda: results.Moved,
        Tool(
            "Add a task",
            "Create task `<slug>-<category>` in the first pile (committed on the intake branch).",
        ),  # not idempotent (SPEC §5): a repeat does not answer the same, it is refused (the slug exists)
        reply=lambda: work_shapes.ADD,
    ),
    Verb(
        "take",
        "Claim SLUG, or the best available todo task.",
        (
            "backlog take --json     # the best task, all an agent needs to start",
            "backlog take login-form-plan",
            "backlog take api-plan --force   # even though a dependency is not done yet",
        ),
        lambda: claim.take,
        (
            _slug(f"claim this task instead of the best available one: {_SLUG}", required=False),
            flag(
                "force",
                "claim SLUG even though its dependencies are not done yet (the claim line names them)",
            ),
        ),
        lambda: results.claim_or_none,
        Tool(
            "Claim a task",
            "Claim the best available todo task (or `slug`): slug, path, pile, title, description, frontmatter,"
            " claimer, branch, budget_seconds, deadline. `{slug: null, ...}` when nothing is available.",
        ),
        reply=lambda: work_shapes.TAKE,
    ),
    Verb(
        "advance",
        "Move SLUG one step along the pipeline.",
        (
            "backlog advance login-form-plan       # e.g. doing -> reviewing",
            "backlog advance login-form-plan --pr https://github.com/acme/webapp/pull/7",
        ),
        lambda: claim.advance,
        (
            _slug(),
            Param(
                "pr",
                "the pull request's URL, recorded on the line that moves the task into done/;"
                " `auto` asks the GitHub CLI (gh) for the current branch's pull request",
                argname="URL|auto",
            ),
            _force(),
        ),
        lambda: results.claim_or_moved,
        Tool(
            "Advance a task",
            "Move the task one step along the pipeline (call once per stage until its pile is done).",
            reaches="forge",  # `pr: auto` asks GitHub (gh) for the branch's pull request
        ),
        reply=lambda: work_shapes.ADVANCE,
    ),
    Verb(
        "progress",
        "Append a progress note to your in-flight task.",
        (
            'backlog progress "parser rewritten, tests next"',
            'backlog progress --slug login-form-plan "blocked on the API key"',
        ),
        lambda: progress.progress,
        (
            Param("note", "what you did, in one line", positional=True, required=True),
            Param("slug", "the in-flight task to note on (default: the one claimed on this branch)", argname="SLUG"),
            _force(),
        ),
        lambda: results.Moved,
        Tool(
            "Note progress",
            "Append a progress note to your in-flight task (the one claimed on this branch, or `slug`).",
        ),
        reply=lambda: work_shapes.PROGRESS,
    ),
    _settles(
        "cancel",
        "Move an in-flight task to done/ as cancelled.",
        'backlog cancel login-form-plan "superseded by the SSO work"',
        lambda: settle.cancel,
        _ends_claim("Cancel a task", "Move an in-flight task to done/ as cancelled (no longer wanted; terminal)."),
        lambda: work_shapes.CANCEL,
    ),
    _settles(
        "fail",
        "Move an in-flight task to failed/.",
        'backlog fail login-form-plan "the API it needs was removed"',
        lambda: settle.fail,
        _ends_claim("Give a task up", "Move an in-flight task to failed/ (could not be done; `retry` reopens it)."),
        lambda: work_shapes.FAIL,
    ),
    Verb(
        "release",
        "Put an in-flight task back in todo/ (not a failure), claimable again by anyone.",
        ("backlog release login-form-plan", 'backlog release login-form-plan "out of time today, someone else can"'),
        lambda: settle.release,
        (
            _slug(),
            Param("reason", "why, in one line (optional; recorded in the task's log)", positional=True),
            _force(),
        ),
        lambda: results.Moved,
        _ends_claim(
            "Give a task back",
            "Put your in-flight task back in todo/ with a `released` line: not a failure, claimable again by anyone"
            " (another agent, or you later).",
        ),
        reply=lambda: work_shapes.RELEASE,
    ),
    Verb(
        "rescue",
        "Take over an in-flight task that is past its budget.",
        ("backlog rescue login-form-plan    # refused while the task is within its budget",),
        lambda: claim.rescue,
        (_slug(),),
        lambda: results.Claim,
        _ends_claim(
            "Take over a timed-out task",
            "Take over an in-flight task that is past its budget (refused while within it); its holder is displaced.",
        ),
        reply=lambda: work_shapes.RESCUE,
    ),
    Verb(
        "retry",
        "Move a failed task back to todo/.",
        ('backlog retry login-form-plan "API restored"', 'backlog retry login-form-plan "more time" --set timeout=3d'),
        lambda: settle.retry,
        (
            _slug(),
            _reason(),
            Param(
                "sets",
                "set one frontmatter field as the task reopens (e.g. timeout=3d, priority=1, timeout.reviewing=none,"
                " dependencies=a-plan:why,b-plan); repeat for several",
                "pairs",
                argname="KEY=VALUE",
                switch="--set",
                tool_help='frontmatter fields to set, e.g. {"timeout": "3d", "priority": "2"}',
            ),
        ),
        lambda: results.Moved,
        _idempotent(
            "Reopen a failed task",
            "Move a failed task back to todo/, optionally editing frontmatter fields on the way.",
        ),
        reply=lambda: work_shapes.RETRY,
    ),
    Verb(
        "edit",
        "Change a task not yet claimed: priority, dependencies, timeout, timeout.<pile> or title.",
        (
            "backlog edit login-form-plan --set priority=1",
            'backlog edit login-form-plan --set timeout=2d --set "title=Login form, second pass"',
            "backlog edit api-plan --set 'dependencies=login-form-plan:needs the form,schema-plan'",
        ),
        lambda: edit.edit,
        (
            _slug("the task to change, in todo/ (or a pile before it): e.g. fix-parser-plan"),
            Param(
                "sets",
                "a field to change: priority=N, timeout=T, timeout.<pile>=T|none, dependencies=SLUG[:REASON],…"
                " (none: no dependencies) or title=TEXT; repeat for several",
                "pairs",
                required=True,
                argname="KEY=VALUE",
                switch="--set",
                tool_help='the fields to change, e.g. {"priority": "1", "timeout": "2d", "title": "Login form"}'
                " (keys: priority, timeout, timeout.<pile>, dependencies, title)",
            ),
            flag("here", "change this branch's copy only, committed here (not the intake branch's)"),
        ),
        lambda: results.Moved,
        _idempotent(
            "Edit a task",
            "Change a todo task's priority, dependencies, timeout, timeout.<pile> or title where `add` put it"
            " (the intake branch); refused once it is claimed. A value it already has changes nothing.",
        ),
        reply=lambda: work_shapes.EDIT,
    ),
    Verb(
        "status",
        "Pile counts and every in-flight task.",
        ("backlog status", "backlog status --json   # in_flight[].age_seconds, budget_seconds"),
        lambda: dispatch.status,
        (flag("remote", "every clone's claims as the git remote holds them (the `remote:` of AGENTS.md)"),),
        lambda: results.status_or_remote,
        reads(
            "Pile counts and claims",
            "Pile counts and every in-flight task (claimer, branch, age_seconds, budget_seconds, deadline, stale);"
            " with remote: every clone's claims as the git remote holds them.",
        ),
        reply=lambda: views_shapes.STATUS,
    ),
    Verb(
        "show",
        "One task: pile, frontmatter, claim, log.",
        ("backlog show login-form-plan", "backlog show login-form-plan --json"),
        lambda: read.show,
        (_slug(),),
        lambda: results.TaskView,
        reads(
            "One task",
            "One task wherever the clone knows it: pile, description, frontmatter with defaults, claim of record,"
            " parsed log, clock (budget_seconds, deadline).",
        ),
        reply=lambda: views_shapes.SHOW,
    ),
    Verb(
        "list",
        "Tasks of a pile (default todo) with priority and readiness.",
        ("backlog list", "backlog list failed"),
        lambda: read.list_pile,
        (
            Param(
                "pile",
                "a pile of this project's pipeline (see `where`), or failed; default todo",
                positional=True,
                enum_of="piles",
            ),
        ),
        lambda: results.Listing,
        reads(
            "The tasks of a pile",
            "The tasks of a pile with priority and readiness:"
            " {pile, tasks: [{slug, priority, ready, blocked_by, ...}]}.",
        ),
        reply=lambda: views_shapes.LIST,
    ),
    Verb(
        "ready",
        "What `take` would claim, in its order, without claiming: this branch's todo/ and the intake branch's.",
        ("backlog ready", "backlog --json ready --limit 3"),
        lambda: read.ready,
        (Param("limit", "show at most N tasks (N >= 1)", "int", minimum=1, argname="N"),),
        lambda: results.ready_tasks,
        reads(
            "What take would pick",
            "The tasks `take` would pick, in its order, without claiming: {tasks: [{slug, title, priority, where}]}.",
        ),
        reply=lambda: views_shapes.READY,
    ),
    *CARE,
)

BY_NAME = {verb.name: verb for verb in VERBS}
