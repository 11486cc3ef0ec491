"""The `backlog` command: parse, call a verb, print, map errors to exit codes. Nothing else."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

from plumbum import cli
from plumbum.cli.application import ShowHelp, ShowHelpAll, ShowVersion

from . import __version__
from .errors import BacklogError, InvalidInput

if TYPE_CHECKING:
    from .context import Context, Result


class _Verb(cli.Application):
    """Usage errors become InvalidInput (one line, exit 2) instead of plumbum's help dump."""

    def _usage(self, exc: Exception) -> str:
        verb = str(self.PROGNAME or "").removeprefix("backlog").strip()
        return f"{verb}: {exc}" if verb else str(exc)

    def _parse_args(self, argv: list[str]) -> Any:  # plumbum hook
        try:
            return super()._parse_args(argv)
        except cli.SwitchError as exc:
            raise InvalidInput(self._usage(exc)) from None

    def _validate_args(self, swfuncs: Any, tailargs: Any) -> Any:
        try:
            return super()._validate_args(swfuncs, tailargs)
        except (ShowHelp, ShowHelpAll, ShowVersion):
            raise  # --help / --version: plumbum prints them (they subclass SwitchError)
        except cli.SwitchError as exc:
            raise InvalidInput(self._usage(exc)) from None

    @property
    def root(self) -> Backlog:
        app: Any = self
        while getattr(app, "parent", None) is not None:
            app = app.parent
        assert isinstance(app, Backlog)
        return app

    layout_on_stderr = True  # maintain reports layout repairs in its own LAYOUT bucket
    json = cli.Flag(["--json"], help="print one JSON object (also accepted after the verb)")

    def context(self, heal: bool = True) -> Context:
        from .context import open_context

        ctx = open_context(self.root.cwd(), heal=heal)
        for warning in ctx.project.warnings:
            print(f"backlog: warning: {warning}", file=sys.stderr)
        if self.layout_on_stderr:
            for finding in ctx.heal_findings:  # self-heal repairs and clashes (SPEC §4) are never silent
                print(f"backlog: layout: {finding}", file=sys.stderr)
        return ctx

    def emit(self, result: Result) -> int:
        root = self.root
        for line in result.warnings + result.stderr:
            print(line, file=sys.stderr)
        if root.json or self.json:
            print(json.dumps(result.data, default=str, ensure_ascii=False))
        else:
            for line in result.lines:
                print(line)
        return result.code


class Backlog(_Verb):
    """A task queue of markdown files inside a git repository, for many agents at once."""

    PROGNAME = "backlog"
    VERSION = __version__
    directory = cli.SwitchAttr(["-C"], str, default=None, argname="DIR", help="run as if started in DIR")

    def cwd(self) -> str:
        return self.directory or _logical_cwd()

    def main(self, *args: str) -> None:
        if args:
            raise InvalidInput(f"unknown verb {args[0]!r}: see `backlog --help`")
        if not self.nested_command:
            raise InvalidInput("missing verb: see `backlog --help`")


@Backlog.subcommand("setup")
class Setup(_Verb):
    """Scaffold backlog/ for a backend and commit it."""

    backend = cli.SwitchAttr(["--backend"], str, default=None, argname="BACKEND")
    pipeline = cli.SwitchAttr(["--pipeline"], str, default=None, argname="PILES")

    def main(self) -> int:
        from .commands.setup import setup

        return self.emit(setup(self.root.cwd(), self.backend, self.pipeline))


@Backlog.subcommand("add")
class Add(_Verb):
    """Create a task in the first pile and commit it."""

    priority = cli.SwitchAttr(["--priority"], str, default=None, argname="N")
    timeout = cli.SwitchAttr(["--timeout"], str, default=None, argname="T")
    depends = cli.SwitchAttr(["--depends"], str, list=True, argname="SLUG[:REASON]")
    title = cli.SwitchAttr(["--title"], str, default=None, argname="T")
    body_file = cli.SwitchAttr(["--body-file"], str, default=None, argname="FILE|-")

    def main(self, slug: str, category: str = None) -> int:
        from .commands.add import add

        body = None
        if self.body_file == "-":
            body = sys.stdin.read()
        elif self.body_file:
            try:
                with open(self.body_file, encoding="utf-8") as handle:
                    body = handle.read()
            except (OSError, UnicodeDecodeError) as exc:
                raise InvalidInput(
                    f"cannot read --body-file {self.body_file}: {getattr(exc, 'strerror', None) or exc}"
                ) from None
        priority = None
        if self.priority is not None:
            try:
                priority = int(self.priority)
            except ValueError:
                raise InvalidInput(f"invalid --priority {self.priority!r}: expected a whole number >= 1") from None
        ctx = self.context()
        return self.emit(add(ctx, slug, category, priority, self.timeout, list(self.depends), self.title, body))


@Backlog.subcommand("take")
class Take(_Verb):
    """Claim SLUG, or the best available todo task."""

    def main(self, slug: str = None) -> int:
        from .commands.claim import take

        return self.emit(take(self.context(), slug))


@Backlog.subcommand("advance")
class Advance(_Verb):
    """Move SLUG one step along the pipeline."""

    pr = cli.SwitchAttr(["--pr"], str, default=None, argname="URL")

    def main(self, slug: str) -> int:
        from .commands.claim import advance

        return self.emit(advance(self.context(), slug, self.pr))


@Backlog.subcommand("progress")
class Progress(_Verb):
    """Append a progress note to your in-flight task."""

    slug = cli.SwitchAttr(["--slug"], str, default=None, argname="SLUG")

    def main(self, note: str) -> int:
        from .commands.progress import progress

        return self.emit(progress(self.context(), note, self.slug))


@Backlog.subcommand("cancel")
class Cancel(_Verb):
    """Move an in-flight task to done/ as cancelled."""

    def main(self, slug: str, reason: str) -> int:
        from .commands.settle import cancel

        return self.emit(cancel(self.context(), slug, reason))


@Backlog.subcommand("fail")
class Fail(_Verb):
    """Move an in-flight task to failed/."""

    def main(self, slug: str, reason: str) -> int:
        from .commands.settle import fail

        return self.emit(fail(self.context(), slug, reason))


@Backlog.subcommand("rescue")
class Rescue(_Verb):
    """Take over an in-flight task that is past its budget."""

    def main(self, slug: str) -> int:
        from .commands.claim import rescue

        return self.emit(rescue(self.context(), slug))


@Backlog.subcommand("retry")
class Retry(_Verb):
    """Move a failed task back to todo/."""

    sets = cli.SwitchAttr(["--set"], str, list=True, argname="KEY=VALUE")

    def main(self, slug: str, reason: str) -> int:
        from .commands.settle import retry

        return self.emit(retry(self.context(), slug, reason, list(self.sets)))


@Backlog.subcommand("status")
class Status(_Verb):
    """Pile counts and every in-flight task."""

    def main(self) -> int:
        from .commands.read import status

        return self.emit(status(self.context()))


@Backlog.subcommand("show")
class Show(_Verb):
    """One task: pile, frontmatter, claim, log."""

    def main(self, slug: str) -> int:
        from .commands.read import show

        return self.emit(show(self.context(), slug))


@Backlog.subcommand("list")
class List(_Verb):
    """Tasks of a pile (default todo) with priority and readiness."""

    def main(self, pile: str = None) -> int:
        from .commands.read import list_pile

        return self.emit(list_pile(self.context(), pile))


@Backlog.subcommand("where")
class Where(_Verb):
    """The shared root and where every pile lives."""

    def main(self) -> int:
        from .commands.read import where

        return self.emit(where(self.context()))


@Backlog.subcommand("maintain")
class Maintain(_Verb):
    """The janitor: report and repair (see README)."""

    dry_run = cli.Flag(["--dry-run"], help="move nothing; print what would be done")
    strict = cli.Flag(["--strict"], help="exit 1 when an advisory bucket is non-empty")
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

    to = cli.SwitchAttr(["--to"], str, default=None, argname="BACKEND")
    from_flat = cli.Flag(["--from-flat"])
    dry_run = cli.Flag(["--dry-run"])

    def main(self) -> int:
        from .commands.migrate import migrate

        if bool(self.to) == bool(self.from_flat):
            raise InvalidInput("migrate needs exactly one of --to BACKEND or --from-flat")
        if self.to is not None and self.to not in ("maildir-shared", "maildir-git"):
            raise InvalidInput(f"migrate --to {self.to!r}: not supported by this tool (maildir-shared or maildir-git)")
        return self.emit(migrate(self.root.cwd(), to=self.to, from_flat=self.from_flat, dry_run=self.dry_run))


@Backlog.subcommand("check-deps")
class CheckDeps(_Verb):
    """Pre-commit hook: every dependency of the given backlog files resolves."""

    def main(self, *files: str) -> int:
        from .commands.check_deps import check_deps

        return self.emit(check_deps(self.root.cwd(), list(files)))


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
        return _fail(exc.message, exc.code, want_json)
    except KeyboardInterrupt:
        return _fail("interrupted", 130, want_json)
    except BrokenPipeError:
        return 1
    except OSError as exc:  # the file system refused (read-only, full, not a directory): say where
        if os.environ.get("BACKLOG_DEBUG"):
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(f"{where}{exc.strerror or exc}", 1, want_json)
    except Exception as exc:  # a bug: still one line, never a traceback
        if os.environ.get("BACKLOG_DEBUG"):
            raise
        return _fail(f"internal error: {type(exc).__name__}: {exc}", 1, want_json)


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


def _fail(message: str, code: int, want_json: bool) -> int:
    message = " ".join(message.split())
    if want_json:
        print(json.dumps({"error": message, "code": code}))
    print(f"backlog: {message}", file=sys.stderr)
    return code
