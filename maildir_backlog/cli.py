"""The `backlog` command: parse, call a verb, print, map errors to exit codes. Nothing else."""

from __future__ import annotations

import contextlib
import gc
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

from . import __version__, ticker  # noqa: E402
from .errors import BacklogError, InvalidInput, Usage, error_object  # noqa: E402
from .verbs import VERBS  # noqa: E402
from .verbspec import Param, Verb  # noqa: E402

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
            import difflib

            near = difflib.get_close_matches(args[0], [verb.name for verb in VERBS], n=1)
            hint = f"did you mean `backlog {near[0]}`? " if near else ""
            raise Usage(f"unknown verb {args[0]!r}: {hint}see `backlog --help`")
        if not self.nested_command:
            raise Usage("missing verb: see `backlog --help`")


def _door(verb: Verb) -> type[_Verb]:
    """The verb's subcommand, made from its row of the table: a switch per option, `main`'s
    positionals from its signature (plumbum reads them for the usage line and the arity check)."""
    attrs: dict[str, Any] = {
        "__doc__": verb.summary,
        "DESCRIPTION_MORE": _examples(*verb.examples),
        "layout_on_stderr": not verb.reports_layout,
    }
    options = [p for p in verb.params_of("cli") if not p.positional]
    for p in options:
        if p.kind == "bool":
            attrs[p.name] = cli.Flag([p.flag], help=p.help)
        elif p.kind in ("list", "pairs"):
            attrs[p.name] = cli.SwitchAttr([p.flag], str, list=True, argname=p.argname, help=p.help)
        else:
            attrs[p.name] = cli.SwitchAttr([p.flag], str, default=None, argname=p.argname, help=p.help)
    signature = verb.signature("cli")

    def main(self: _Verb, *args: str) -> int:
        values = dict(signature.bind(self, *args).arguments)
        del values["self"]
        values.update({p.name: _option(p, getattr(self, p.name)) for p in options})
        with ticker.telling(_bar) if sys.stderr.isatty() else contextlib.nullcontext():
            result = verb.call(self.root.cwd(), values, self.context)
        return result if isinstance(result, int) else self.emit(result)

    main.__signature__ = signature  # type: ignore[attr-defined]  # (plumbum reads it: inspect honours it)
    attrs["main"] = main
    door: type[_Verb] = type(verb.name.title().replace("-", ""), (_Verb,), attrs)
    if not verb.schema:
        door.unbind_switches("--json")  # e.g. mcp: the server speaks JSON-RPC on stdio; the flag would mean nothing
    return door


def _bar(label: str, total: int) -> ticker.Display:
    """Long work on a terminal (`ticker`): plumbum's progress bar, drawn on stderr (its own
    `display` writes to stdout, which holds the verb's answer), cleared when the work ends."""
    from plumbum.cli.progress import Progress

    class OnStderr(Progress):  # type: ignore[misc,unused-ignore]  # (plumbum is untyped here)
        def display(self) -> None:
            sys.stderr.write(f"\r\x1b[K{label}: {self}")
            sys.stderr.flush()

        def update(self, done: int) -> None:
            self.value = done
            self.display()

        def close(self) -> None:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()

    bar = OnStderr(length=total, has_output=True)
    bar.start()
    return bar  # type: ignore[no-any-return,unused-ignore]


def _option(param: Param, given: Any) -> Any:
    """A switch's text as the kernel takes it: a whole number, a file's text (`read`), a list."""
    if param.kind in ("list", "pairs"):
        return list(given)
    if given is None or isinstance(given, bool):
        return given
    if param.read is not None:
        return param.read(given)
    if param.kind == "int":
        try:
            return int(given)
        except ValueError:
            raise InvalidInput(f"invalid {param.flag} {given!r}: expected a whole number >= 1") from None
    return given


_DOORS = {f"door_{row.name}": row for row in VERBS}


def __getattr__(name: str) -> type[_Verb]:
    """A verb's subcommand, made when plumbum first asks for it (`door_<verb>`): a call builds
    only its own verb's class, not all of them (~10 ms at every start)."""
    if name not in _DOORS:
        raise AttributeError(name)
    door = globals()[name] = _door(_DOORS[name])
    return door


for _name, _row in _DOORS.items():
    Backlog.subcommand(_row.name, f"{__name__}.{_name}")


def main(argv: list[str] | None = None) -> int:
    """The command: run the verb `argv` names (default: this process's arguments), return its exit
    code. Run as the process's command (no `argv`), it ends with `gc.freeze()`: the interpreter's
    final collection would walk every object the imports made (~30 ms, a tenth of a call) to free
    memory the process is about to give back anyway; objects dropped by reference count still go."""
    try:
        return _main(argv)
    finally:
        if argv is None:
            gc.freeze()


def _main(argv: list[str] | None) -> int:
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
