"""The command's plumbum application: every verb's subcommand made from its row of the table,
help pages, usage errors and `--version`. `cli.main` hands it every call the fast door does not
take (`cli.quick`: a well-formed call of a hot verb); both end in `clicall.Call`.
"""

from __future__ import annotations

import contextlib
import io
import re
from typing import Any

from .startup import defer_network_imports

defer_network_imports()  # before plumbum: its path module would import urllib.request, http, email, ssl

from plumbum import cli  # noqa: E402 (after the deferral above, on purpose)
from plumbum.cli.application import ShowHelp, ShowHelpAll, ShowVersion  # noqa: E402

from . import __version__  # noqa: E402
from .clicall import Call, logical_cwd, option  # noqa: E402
from .errors import Usage  # noqa: E402
from .verbs import VERBS  # noqa: E402
from .verbspec import Verb  # noqa: E402


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
    attrs: dict[str, Any] = {
        "__doc__": verb.summary,
        "DESCRIPTION_MORE": _examples(*verb.examples),
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
        values.update({p.name: option(p, getattr(self, p.name)) for p in options})
        root = self.root
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
