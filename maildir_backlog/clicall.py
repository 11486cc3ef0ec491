"""One call of a verb from the command line, whichever door parsed it (`cli.quick` for a
well-formed call of a hot verb, plumbum's application in `cliapp` for everything else): open the
backlog printing its warnings, run the verb, print its answer. Both doors end here, so a call
answers the same whichever parsed it.

Imports neither plumbum nor the kernel at module level: the verb's kernel function is imported
when it runs, plumbum's progress bar only when long work is drawn on a terminal.
"""

from __future__ import annotations

import contextlib
import os
import sys

from . import ticker
from .errors import InvalidInput, json_safe, terminal_safe
from .typed import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .context import Context, Result
    from .verbspec import Param, Verb


class Call:
    """A verb, the directory it runs in and whether it answers in JSON: `run(values)` runs it."""

    __slots__ = ("cwd", "skipped", "verb", "want_json")

    def __init__(self, verb: Verb, cwd: str, want_json: bool) -> None:
        self.verb, self.cwd, self.want_json = verb, cwd, want_json
        self.skipped: tuple[list[str], ...] = ()  # the backend's skipped files and refs, once opened

    def run(self, values: dict[str, Any]) -> int:
        """Run the verb with `values` (by parameter name, as `option` made them); its exit code."""
        with ticker.telling(progress_bar) if sys.stderr.isatty() else contextlib.nullcontext():
            result = self.verb.call(self.cwd, values, self.context)
        return result if isinstance(result, int) else self.emit(result)

    def context(self, heal: bool = True) -> Context:
        from .context import open_context

        ctx = open_context(self.cwd, heal=heal)
        self.skipped = (ctx.backend.skipped,)  # filled while the verb runs; printed by emit
        for warning in ctx.project.warnings:
            print(terminal_safe(f"backlog: warning: {warning}"), file=sys.stderr)
        if not self.verb.reports_layout:  # maintain reports layout repairs in its own LAYOUT bucket
            for finding in ctx.heal_findings:  # self-heal repairs and clashes (SPEC §4) are never silent
                print(terminal_safe(f"backlog: layout: {finding}"), file=sys.stderr)
        return ctx

    def emit(self, result: Result) -> int:
        skipped = [f"backlog: warning: {line}" for lines in self.skipped for line in lines]
        for line in [*result.warnings, *result.stderr, *skipped]:
            print(terminal_safe(line), file=sys.stderr)
        if self.want_json:
            import json  # (imported by the calls that print it)

            # (no check for cycles: a result is built fresh, a tree; the check costs 40% of the time of
            # the encoding, 50 ms for `ready` at 100,000 tasks; a cycle would still fail, by recursion)
            print(json_safe(json.dumps(result.json(), default=str, ensure_ascii=False, check_circular=False)))
        else:
            for line in result.lines:
                print(terminal_safe(line))
        return result.code


def option(param: Param, given: Any) -> Any:
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


def progress_bar(label: str, total: int) -> ticker.Display:
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


def logical_cwd() -> str:
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
