"""The `backlog` command: parse, call a verb, print, map errors to exit codes. Nothing else."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
from typing import TYPE_CHECKING, Any

from .startup import defer_network_imports

defer_network_imports()  # before plumbum: its path module would import urllib.request, http, email, ssl

from plumbum import cli  # noqa: E402 (after the deferral above, on purpose)
from plumbum.cli.application import ShowHelp, ShowHelpAll, ShowVersion  # noqa: E402

from . import __version__  # noqa: E402
from .errors import BacklogError, InvalidInput, Usage, error_object  # noqa: E402

if TYPE_CHECKING:
    from .context import Context, Result


def _examples(*lines: str) -> str:
    """A verb's examples for its --help page (plumbum keeps `/`-led lines as they are)."""
    return "Examples:\n" + "\n".join(f"    /{line}" for line in lines) + "\n"


class _Verb(cli.Application):
    """Usage errors become `Usage` (one line, exit 2, kind usage) instead of plumbum's help dump."""

    SUBCOMMAND_HELPMSG = False  # no "; see 'backlog X --help' for more info" after each summary

    @cli.switch(["-h", "--help"], overridable=True, group="Meta-switches", help="Prints this help message and quits")
    def help(self) -> None:  # plumbum's own help page, without the library's own notation
        page = io.StringIO()
        with contextlib.redirect_stdout(page):
            super().help()
        print(tidy_help(page.getvalue()), end="")

    def _usage(self, exc: Exception) -> str:
        verb = str(self.PROGNAME or "").removeprefix("backlog").strip()
        return f"{verb}: {exc}" if verb else str(exc)

    def _parse_args(self, argv: list[str]) -> Any:  # plumbum hook
        try:
            return super()._parse_args(argv)
        except cli.SwitchError as exc:
            raise Usage(self._usage(exc)) from None

    def _validate_args(self, swfuncs: Any, tailargs: Any) -> Any:
        try:
            return super()._validate_args(swfuncs, tailargs)
        except (ShowHelp, ShowHelpAll, ShowVersion):
            raise  # --help / --version: plumbum prints them (they subclass SwitchError)
        except cli.SwitchError as exc:
            raise Usage(self._usage(exc)) from None

    @property
    def root(self) -> Backlog:
        app: Any = self
        while getattr(app, "parent", None) is not None:
            app = app.parent
        assert isinstance(app, Backlog)  # noqa: S101 (narrows a type for mypy; established just above, never input-dependent)
        return app

    layout_on_stderr = True  # maintain reports layout repairs in its own LAYOUT bucket
    json = cli.Flag(
        ["--json"],
        help="print one JSON object instead of text (its shape: `backlog prime`); also accepted after the verb",
    )

    def context(self, heal: bool = True) -> Context:
        from .context import open_context

        ctx = open_context(self.root.cwd(), heal=heal)
        self._skipped = (ctx.backend.skipped,)  # filled while the verb runs; printed by emit
        for warning in ctx.project.warnings:
            print(terminal_safe(f"backlog: warning: {warning}"), file=sys.stderr)
        if self.layout_on_stderr:
            for finding in ctx.heal_findings:  # self-heal repairs and clashes (SPEC §4) are never silent
                print(terminal_safe(f"backlog: layout: {finding}"), file=sys.stderr)
        return ctx

    _skipped: tuple[list[str], ...] = ()  # the backend's list of skipped files and refs, once context() opened it

    def emit(self, result: Result) -> int:
        root = self.root
        skipped = [f"backlog: warning: {line}" for lines in self._skipped for line in lines]
        for line in [*result.warnings, *result.stderr, *skipped]:
            print(terminal_safe(line), file=sys.stderr)
        if root.json or self.json:
            print(json.dumps(result.json(), default=str, ensure_ascii=False))
        else:
            for line in result.lines:
                print(terminal_safe(line))
        return result.code


# plumbum 2 offers `--completions SHELL` (bash, fish) on every page; it fails behind this CLI's
# usage-error handling and has no zsh, so it is not offered (plumbum 1.x has no such switch).
_Verb.unbind_switches("--completions")


class Backlog(_Verb):
    """A task queue of markdown files inside a git repository, for many agents at once."""

    PROGNAME = "backlog"
    VERSION = __version__
    directory = cli.SwitchAttr(
        ["-C"], str, default=None, argname="DIR", help="run as if started in DIR (any directory of a worktree)"
    )
    DESCRIPTION_MORE = _examples(
        "backlog prime                  # the workflow of this project, for an agent",
        "backlog ready --json           # what take would pick, in order",
        "backlog take --json            # claim the best task",
        'backlog progress "tests pass"  # a note on your task',
        "backlog advance SLUG           # one step along the pipeline, until done",
    )

    def cwd(self) -> str:
        return self.directory or _logical_cwd()

    def main(self, *args: str) -> None:
        if args:
            raise Usage(f"unknown verb {args[0]!r}: see `backlog --help`")
        if not self.nested_command:
            raise Usage("missing verb: see `backlog --help`")


@Backlog.subcommand("setup")
class Setup(_Verb):
    """Scaffold backlog/ for a backend and commit it."""

    DESCRIPTION_MORE = _examples(
        "backlog setup --backend=maildir-shared",
        'backlog setup --backend=maildir-git --pipeline "todo doing reviewing done"',
    )
    backend = cli.SwitchAttr(
        ["--backend"],
        str,
        default=None,
        argname="BACKEND",
        help="required: maildir-shared (in-flight tasks shared by every worktree of the clone)"
        " or maildir-git (every pile tracked, every move a commit)",
    )
    pipeline = cli.SwitchAttr(
        ["--pipeline"],
        str,
        default=None,
        argname="PILES",
        help='pile names in order, containing todo and ending with done (default "todo doing done")',
    )
    hooks = cli.Flag(
        ["--hooks"],
        help="on an existing backlog, only install the post-checkout hook (fresh worktrees get their symlinks)",
    )

    def main(self) -> int:
        from .commands.setup import setup, setup_hooks

        if self.hooks:
            return self.emit(setup_hooks(self.root.cwd()))
        return self.emit(setup(self.root.cwd(), self.backend, self.pipeline))


@Backlog.subcommand("add")
class Add(_Verb):
    """Create a task in the first pile and commit it (CATEGORY: plan, followup, task-list or ideas)."""

    DESCRIPTION_MORE = _examples(
        "backlog add login-form          # creates backlog/todo/login-form-plan.md",
        "backlog add flaky-test followup --priority 1 --timeout 4h",
        'backlog add api --depends login-form-plan:"needs the form"',
        'echo "Why and how." | backlog add cache --title "Cache it" --body-file -',
    )
    priority = cli.SwitchAttr(
        ["--priority"], str, default=None, argname="N", help="a whole number >= 1, 1 most urgent (default 999)"
    )
    timeout = cli.SwitchAttr(
        ["--timeout"],
        str,
        default=None,
        argname="T",
        help="budget in each in-flight pile: a whole number and s, m, h, d or w, e.g. 45m, 24h, 7d (default 7d)",
    )
    depends = cli.SwitchAttr(
        ["--depends"],
        str,
        list=True,
        argname="SLUG[:REASON]",
        help="a task that must be in done/ before this one is picked; repeat for several",
    )
    title = cli.SwitchAttr(
        ["--title"], str, default=None, argname="T", help="the task's # heading (default: SLUG with spaces)"
    )
    body_file = cli.SwitchAttr(
        ["--body-file"],
        str,
        default=None,
        argname="FILE|-",
        help="read the description (markdown) from FILE, or from standard input with -",
    )
    here = cli.Flag(["--here"], help="commit on this branch instead of the intake branch (work of this branch)")

    def main(self, slug: str, category: str = None) -> int:
        from .commands.add import add

        body = _body(self.body_file) if self.body_file else None
        priority = None
        if self.priority is not None:
            try:
                priority = int(self.priority)
            except ValueError:
                raise InvalidInput(f"invalid --priority {self.priority!r}: expected a whole number >= 1") from None
        ctx = self.context()
        return self.emit(
            add(ctx, slug, category, priority, self.timeout, list(self.depends), self.title, body, here=self.here)
        )


@Backlog.subcommand("take")
class Take(_Verb):
    """Claim SLUG, or the best available todo task."""

    DESCRIPTION_MORE = _examples(
        "backlog take --json     # the best task, all an agent needs to start",
        "backlog take login-form-plan",
    )

    def main(self, slug: str = None) -> int:
        from .commands.claim import take

        return self.emit(take(self.context(), slug))


@Backlog.subcommand("advance")
class Advance(_Verb):
    """Move SLUG one step along the pipeline."""

    DESCRIPTION_MORE = _examples(
        "backlog advance login-form-plan       # e.g. doing -> reviewing",
        "backlog advance login-form-plan --pr https://example.invalid/pull/7",
    )
    pr = cli.SwitchAttr(
        ["--pr"],
        str,
        default=None,
        argname="URL|auto",
        help="the pull request's URL, recorded on the line that moves the task into done/;"
        " `auto` asks the GitHub CLI (gh) for the current branch's pull request",
    )
    force = cli.Flag(["--force"], help="act on a claim held by another branch; the log line records by=<you>")

    def main(self, slug: str) -> int:
        from .commands.claim import advance

        return self.emit(advance(self.context(), slug, self.pr, self.force))


@Backlog.subcommand("progress")
class Progress(_Verb):
    """Append a progress note to your in-flight task."""

    DESCRIPTION_MORE = _examples(
        'backlog progress "parser rewritten, tests next"',
        'backlog progress --slug login-form-plan "blocked on the API key"',
    )
    slug = cli.SwitchAttr(
        ["--slug"],
        str,
        default=None,
        argname="SLUG",
        help="the in-flight task to note on (default: the one claimed on this branch)",
    )
    force = cli.Flag(["--force"], help="act on a claim held by another branch; the log line records by=<you>")

    def main(self, note: str) -> int:
        from .commands.progress import progress

        return self.emit(progress(self.context(), note, self.slug, self.force))


@Backlog.subcommand("cancel")
class Cancel(_Verb):
    """Move an in-flight task to done/ as cancelled."""

    DESCRIPTION_MORE = _examples('backlog cancel login-form-plan "superseded by the SSO work"')

    force = cli.Flag(["--force"], help="act on a claim held by another branch; the log line records by=<you>")

    def main(self, slug: str, reason: str) -> int:
        from .commands.settle import cancel

        return self.emit(cancel(self.context(), slug, reason, self.force))


@Backlog.subcommand("fail")
class Fail(_Verb):
    """Move an in-flight task to failed/."""

    DESCRIPTION_MORE = _examples('backlog fail login-form-plan "the API it needs was removed"')

    force = cli.Flag(["--force"], help="act on a claim held by another branch; the log line records by=<you>")

    def main(self, slug: str, reason: str) -> int:
        from .commands.settle import fail

        return self.emit(fail(self.context(), slug, reason, self.force))


@Backlog.subcommand("rescue")
class Rescue(_Verb):
    """Take over an in-flight task that is past its budget."""

    DESCRIPTION_MORE = _examples("backlog rescue login-form-plan    # refused while the task is within its budget")

    def main(self, slug: str) -> int:
        from .commands.claim import rescue

        return self.emit(rescue(self.context(), slug))


@Backlog.subcommand("retry")
class Retry(_Verb):
    """Move a failed task back to todo/."""

    DESCRIPTION_MORE = _examples(
        'backlog retry login-form-plan "API restored"',
        'backlog retry login-form-plan "more time" --set timeout=3d',
    )
    sets = cli.SwitchAttr(
        ["--set"],
        str,
        list=True,
        argname="KEY=VALUE",
        help=(
            "set one frontmatter field as the task reopens (e.g. timeout=3d, priority=1, timeout.reviewing=none,"
            " dependencies=a-plan:why,b-plan); repeat for several"
        ),
    )

    def main(self, slug: str, reason: str) -> int:
        from .commands.settle import retry

        return self.emit(retry(self.context(), slug, reason, list(self.sets)))


@Backlog.subcommand("status")
class Status(_Verb):
    """Pile counts and every in-flight task."""

    DESCRIPTION_MORE = _examples("backlog status", "backlog status --json   # in_flight[].age_seconds, budget_seconds")

    remote = cli.Flag(
        ["--remote"], help="every clone's claims as the git remote holds them (the `remote:` of AGENTS.md)"
    )

    def main(self) -> int:
        from .commands.read import status

        if self.remote:
            from .commands.remote_status import remote_status

            return self.emit(remote_status(self.context()))
        return self.emit(status(self.context()))


@Backlog.subcommand("show")
class Show(_Verb):
    """One task: pile, frontmatter, claim, log."""

    DESCRIPTION_MORE = _examples("backlog show login-form-plan", "backlog show login-form-plan --json")

    def main(self, slug: str) -> int:
        from .commands.read import show

        return self.emit(show(self.context(), slug))


@Backlog.subcommand("list")
class List(_Verb):
    """Tasks of a pile (default todo) with priority and readiness."""

    DESCRIPTION_MORE = _examples("backlog list", "backlog list failed")

    def main(self, pile: str = None) -> int:
        from .commands.read import list_pile

        return self.emit(list_pile(self.context(), pile))


@Backlog.subcommand("ready")
class Ready(_Verb):
    """What `take` would claim, in its order, without claiming: this branch's todo/ and the intake branch's."""

    DESCRIPTION_MORE = _examples("backlog ready", "backlog --json ready --limit 3")
    limit = cli.SwitchAttr(["--limit"], int, default=None, argname="N", help="show at most N tasks (N >= 1)")

    def main(self) -> int:
        from .commands.read import ready

        return self.emit(ready(self.context(), self.limit))


@Backlog.subcommand("rename")
class Rename(_Verb):
    """Give task OLD the slug NEW in every pile where it lives, and in every dependency naming it (one commit)."""

    DESCRIPTION_MORE = _examples('backlog rename "Fix_Login-plan" fix-login-plan')

    def main(self, old: str, new: str) -> int:
        from .commands.rename import rename

        return self.emit(rename(self.context(), old, new))


@Backlog.subcommand("where")
class Where(_Verb):
    """The shared root and where every pile lives."""

    DESCRIPTION_MORE = _examples("backlog where")

    def main(self) -> int:
        from .commands.read import where

        return self.emit(where(self.context()))


@Backlog.subcommand("maintain")
class Maintain(_Verb):
    """The janitor: report problems, and repair the safe ones (moves, timeouts, duplicates)."""

    DESCRIPTION_MORE = _examples("backlog maintain --dry-run", "backlog maintain --strict   # in CI or cron")
    dry_run = cli.Flag(["--dry-run"], help="move nothing; print what would be done")
    strict = cli.Flag(["--strict"], help="exit 1 when an advisory bucket (4-8: deps, cycles, ...) is non-empty")
    layout_on_stderr = False

    def main(self) -> int:
        from . import git
        from .commands.maintain import maintain
        from .commands.migrate import recover

        recovered = recover(git.discover(self.root.cwd()), dry_run=self.dry_run)  # before the self-heal
        ctx = self.context(heal=not self.dry_run)
        return self.emit(maintain(ctx, dry_run=self.dry_run, strict=self.strict, recovered=recovered))


@Backlog.subcommand("migrate")
class Migrate(_Verb):
    """Switch backend, or convert the older flat layout."""

    DESCRIPTION_MORE = _examples("backlog migrate --to maildir-shared --dry-run", "backlog migrate --from-flat")
    to = cli.SwitchAttr(
        ["--to"], str, default=None, argname="BACKEND", help="the backend to switch to: maildir-shared or maildir-git"
    )
    from_flat = cli.Flag(["--from-flat"], help="convert the older flat layout (backlog/*.md, done/<year>/) into piles")
    dry_run = cli.Flag(["--dry-run"], help="print the plan; change nothing")

    def main(self) -> int:
        from .commands.migrate import migrate

        if bool(self.to) == bool(self.from_flat):
            raise Usage("migrate needs exactly one of --to BACKEND or --from-flat")
        if self.to is not None and self.to not in ("maildir-shared", "maildir-git"):
            raise InvalidInput(f"migrate --to {self.to!r}: not supported by this tool (maildir-shared or maildir-git)")
        return self.emit(migrate(self.root.cwd(), to=self.to, from_flat=self.from_flat, dry_run=self.dry_run))


@Backlog.subcommand("check-deps")
class CheckDeps(_Verb):
    """Pre-commit hook: every dependency of the given backlog files resolves."""

    DESCRIPTION_MORE = _examples("backlog check-deps backlog/todo/*.md")

    def main(self, *files: str) -> int:
        from .commands.check_deps import check_deps

        return self.emit(check_deps(self.root.cwd(), list(files)))


@Backlog.subcommand("prime")
class Prime(_Verb):
    """Print this project's workflow for an agent starting work."""

    DESCRIPTION_MORE = _examples(
        "backlog prime                          # read it at the start of a session",
        "backlog prime --skill .claude/skills/backlog   # writes SKILL.md there",
    )
    skill = cli.SwitchAttr(
        ["--skill"],
        str,
        default=None,
        argname="DIR",
        help="write DIR/SKILL.md (frontmatter name and description, then the same text) for harnesses that load skills",
    )

    def main(self) -> int:
        from .commands.prime import prime

        return self.emit(prime(self.context(), self.skill))


@Backlog.subcommand("mcp")
class Mcp(_Verb):
    """Serve the verbs over the Model Context Protocol on stdio (needs the [mcp] extra)."""

    DESCRIPTION_MORE = _examples(
        "backlog mcp            # started by the agent harness (its MCP server configuration)",
        "backlog -C ~/src/app mcp",
    )

    def main(self) -> int:
        from .mcp_server import serve

        return serve(self.root.cwd())


Mcp.unbind_switches("--json")  # the server speaks JSON-RPC on stdio; the flag would mean nothing


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    argv[0] = "backlog"
    want_json = "--json" in argv[1:]
    for stream in (sys.stdout, sys.stderr):  # a file name with odd bytes prints escaped, never crashes
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    try:
        _, code = Backlog.run(argv, exit=False)
        return int(code or 0)
    except BacklogError as exc:
        return _fail(exc.payload(), want_json)
    except KeyboardInterrupt:
        return _fail(error_object("interrupted", 130, "interrupted"), want_json)
    except BrokenPipeError:
        return 1
    except OSError as exc:  # the file system refused (read-only, full, not a directory): say where
        if os.environ.get("BACKLOG_DEBUG"):
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(error_object(f"{where}{exc.strerror or exc}", 1, "failed"), want_json)
    except Exception as exc:  # a bug: still one line, never a traceback
        if os.environ.get("BACKLOG_DEBUG"):
            raise
        return _fail(error_object(f"internal error: {type(exc).__name__}: {exc}", 1, "internal"), want_json)


def _logical_cwd() -> str:
    """The directory the user is in. Inside `backlog/doing` (a symlink into the git dir) the
    process's cwd is the shared pile; the shell's $PWD still says where the user stands, and
    its nearest real ancestor is inside the worktree."""
    here = os.getcwd()
    logical = os.environ.get("PWD", "")
    try:
        if not logical or not os.path.samefile(logical, here) or os.path.realpath(logical) == logical:
            return here
    except OSError:
        return here
    while os.path.realpath(logical) != logical and os.path.dirname(logical) != logical:
        logical = os.path.dirname(logical)
    return logical


def tidy_help(page: str) -> str:
    """A help page as plumbum prints it, in the notation of this tool's docs: `-C DIR`, not
    `-C DIR:str`; `take [SLUG]`, not `take [slug=None]`; positionals in capitals."""
    # `-C DIR:str` → `-C DIR`, padded so the help column stays aligned
    page = re.sub(
        r"(\s-{1,2}[\w-]+ [A-Z][^\s]*?)(:(?:str|int|float))(?=\s)", lambda m: m.group(1) + " " * len(m.group(2)), page
    )
    # the help switch is redefined here (to tidy the page): plumbum lists the original once more, unnamed
    lines = [line for line in page.split("\n") if line.strip() != "Prints this help message and quits" or "-h" in line]
    for i, line in enumerate(lines[:-1]):
        if line.strip() == "Usage:":
            head, mark, tail = lines[i + 1].partition("[SWITCHES]")
            tail = re.sub(r"\[(\w+)=[^\]]*\]", lambda m: f"[{m.group(1).upper()}]", tail)
            tail = re.sub(r"(?<= )([a-z_]+)(?=( |\.\.\.|$))", lambda m: m.group(1).upper(), tail)
            usage = head + mark + tail
            lines[i + 1] = usage.replace("[SWITCHES] [SUBCOMMAND [SWITCHES]] ARGS...", "[SWITCHES] VERB ...")
    return "\n".join(lines)


def _body(source: str) -> str:
    """The text of `--body-file` (`-`: stdin): UTF-8, at most a task file's size (more could never
    be taken: limits.TASK_BYTES), else exit 2 in one line."""
    from . import limits

    shown = "stdin" if source == "-" else source
    try:
        if source == "-":
            stream = getattr(sys.stdin, "buffer", None)
            raw = stream.read(limits.TASK_BYTES + 1) if stream is not None else sys.stdin.read().encode()
        else:
            with open(source, "rb") as handle:
                raw = handle.read(limits.TASK_BYTES + 1)
    except OSError as exc:
        raise InvalidInput(f"cannot read --body-file {shown}: {exc.strerror or exc}") from None
    if len(raw) > limits.TASK_BYTES:
        raise InvalidInput(f"--body-file {shown}: {limits.too_large(len(raw))}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"--body-file {shown}: not valid utf-8 text (byte {exc.start})") from None


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """`text` with every control character but tab and newline escaped (`\\x1b`): what a task
    file says (a title, a note, a reason) is printed, never obeyed by the terminal (SPEC §3)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _fail(error: dict[str, Any], want_json: bool) -> int:
    """Print the error object (--json) and the one line on stderr; return the exit code."""
    if want_json:
        print(json.dumps(error))
    print(terminal_safe(f"backlog: {error['error']}"), file=sys.stderr)
    return int(error["code"])
