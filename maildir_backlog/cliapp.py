"""The command's plumbum application: every verb's subcommand made from its row of the table,
help pages, usage errors and `--version`. `cli.main` hands it every call the fast door does not
take (`cli.quick`: a well-formed call of a hot verb), through `run`; both end in `clicall.Call`.

plumbum is used through its public API only (docs/design.md, *plumbum, public API only*): the
usage lines are `USAGE`, the examples `DESCRIPTION_MORE`; what plumbum prints itself is held until
`Application.run` returns, so that a usage error it reports becomes one line (`Usage`, exit 2)
and its report (the error and a help page) never reaches stdout.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import sys
from typing import Any, TextIO

from .startup import defer_network_imports

defer_network_imports()  # before plumbum: its path module would import urllib.request, http, email, ssl

from plumbum import cli  # noqa: E402 (after the deferral above, on purpose)
from plumbum.cli.application import ShowHelp, ShowHelpAll, ShowVersion  # noqa: E402

from . import __version__  # noqa: E402
from .clicall import Call, logical_cwd, option  # noqa: E402
from .errors import Usage  # noqa: E402
from .verbs import VERBS  # noqa: E402
from .verbspec import Verb  # noqa: E402

_PAGES = (ShowHelp, ShowHelpAll, ShowVersion)  # the SwitchErrors that ask for a page, not a mistake
_STDOUT: list[TextIO] = []  # the process's stdout while `run` holds what plumbum prints


class _Held(io.StringIO):
    """What plumbum prints while `run` holds stdout. plumbum reports a usage error by printing it
    (and its help page) while it handles the `SwitchError`: the first such error is kept here."""

    def __init__(self) -> None:
        super().__init__()
        self.failed: Exception | None = None

    def write(self, text: str) -> int:
        handling = sys.exc_info()[1]
        if self.failed is None and isinstance(handling, cli.SwitchError) and not isinstance(handling, _PAGES):
            self.failed = handling
        return super().write(text)


def run(argv: list[str]) -> int:
    """The application on `argv`; its exit code. What plumbum prints itself (a help page, a
    version) is held and written once it returned; a usage error it reported is raised instead,
    as one `Usage` line (exit 2), and its report is dropped. A verb prints straight to stdout."""
    held = _Held()
    _STDOUT.append(sys.stdout)
    try:
        with contextlib.redirect_stdout(held):
            app, code = Backlog.run(argv, exit=False)
    finally:
        out = _STDOUT.pop()
    if held.failed is not None:
        verb = str(app.PROGNAME or "").removeprefix("backlog").strip()  # the app that refused the call
        raise Usage(f"{verb}: {held.failed}" if verb else str(held.failed))
    out.write(held.getvalue())
    return int(code or 0)


def _examples(*lines: str) -> str:
    """A verb's examples for its --help page (plumbum keeps `/`-led lines as they are)."""
    return "Examples:\n" + "\n".join(f"    /{line}" for line in lines) + "\n"


class _Verb(cli.Application):
    """What the root and every verb share: `--json`, the root application, no "see --help" hints."""

    SUBCOMMAND_HELPMSG = False  # no "; see 'backlog X --help' for more info" after each summary

    @property
    def root(self) -> Backlog:
        app: Any = self
        while getattr(app, "parent", None) is not None:
            app = app.parent
        assert isinstance(app, Backlog)  # noqa: S101 (narrows a type for mypy; established just above, never input-dependent)
        return app

    json = cli.Flag(
        ["--json"],
        help="print one JSON object instead of text (its shape: `backlog prime`); also accepted after the verb",
    )


# plumbum 2 offers `--completions SHELL` (bash, fish) on every page; it fails behind this CLI's
# usage-error handling and has no zsh, so it is not offered (plumbum 1.x has no such switch).
_Verb.unbind_switches("--completions")


class Backlog(_Verb):
    """A task queue of markdown files inside a git repository, for many agents at once."""

    PROGNAME = "backlog"
    VERSION = __version__
    USAGE = "    {progname} [SWITCHES] VERB ...\n"
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
        return self.directory or logical_cwd()

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
    signature = verb.signature("cli")
    attrs: dict[str, Any] = {
        "__doc__": verb.summary,
        "DESCRIPTION_MORE": _examples(*verb.examples),
        "USAGE": f"    {{progname}} [SWITCHES] {_positionals(signature)}\n",
    }
    options = [p for p in verb.params_of("cli") if not p.positional]
    for p in options:
        if p.kind == "bool":
            attrs[p.name] = cli.Flag([p.flag], help=p.help)
        elif p.kind in ("list", "pairs"):
            attrs[p.name] = cli.SwitchAttr([p.flag], str, list=True, argname=p.argname, help=p.help)
        else:
            attrs[p.name] = cli.SwitchAttr([p.flag], str, default=None, argname=p.argname, help=p.help)

    def main(self: _Verb, *args: str) -> int:
        values = dict(signature.bind(self, *args).arguments)
        del values["self"]
        values.update({p.name: option(p, getattr(self, p.name)) for p in options})
        root = self.root
        with contextlib.redirect_stdout(_STDOUT[-1] if _STDOUT else sys.stdout):  # the verb's answer: not held
            return Call(verb, root.cwd(), bool(root.json or self.json)).run(values)

    main.__signature__ = signature  # type: ignore[attr-defined]  # (plumbum reads it: inspect honours it)
    attrs["main"] = main
    door: type[_Verb] = type(verb.name.title().replace("-", ""), (_Verb,), attrs)
    if not verb.schema:
        door.unbind_switches("--json")  # e.g. mcp: the server speaks JSON-RPC on stdio; the flag would mean nothing
    return door


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


def _positionals(signature: inspect.Signature) -> str:
    """The usage line's positionals, in the notation of this tool's docs: `SLUG`, `[SLUG]`, `FILES...`."""
    shown = []
    for param in list(signature.parameters.values())[1:]:
        name = param.name.upper()
        if param.kind is param.VAR_POSITIONAL:
            shown.append(f"{name}...")
        else:
            shown.append(name if param.default is param.empty else f"[{name}]")
    return " ".join(shown)
