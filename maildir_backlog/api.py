"""The Python API: `Backlog(path)`, one method per verb, typed results, documented exceptions.

    from maildir_backlog import Backlog
    from maildir_backlog.errors import BacklogError, Conflict

    backlog = Backlog("/src/app", claimer="agent-7")   # any directory inside a worktree
    task = backlog.take()                  # a Claim, or None: nothing available
    if task is not None:
        print(task.title, task.budget_seconds, task.deadline)   # deadline: an aware datetime (UTC)
        backlog.progress("parser rewritten", slug=task.slug)
        backlog.advance(task.slug)         # once per stage, until task.pile is done

Each call opens the backlog afresh (branch, layout self-heal, project declaration), exactly as
one `backlog` command does, in this process: the worktree at `path` now (after a `git worktree
move`, another worktree there is the one used; a path that leads nowhere any more raises
`BacklogError` saying where the worktree moved). The claimer identity is `claimer` when given (for
this object's calls only: the environment is neither read for it nor changed), else the
environment's, as for the command (BACKLOG_CLAIMER, ...). The results are frozen dataclasses whose
fields are the keys of the verb's `--json` object (docs/json.md), times (`deadline`, `since`) as
timezone-aware UTC datetimes; `.data` is that object itself (times as ISO text) and `.warnings`
what the command would print on stderr: `Claim` (take, rescue, advance out of todo), `Moved` (add,
advance, progress, cancel, fail, retry), `TaskView` (show), `Status` (status), `RemoteStatus`
(status(remote=True)), `ReadyTask` (ready returns `ReadyTasks`, a list of them that also carries
`.remote` and `.warnings`), `Listing` (list), `Where`
(where), `Guide` (prime), `Report` (maintain), a plain `Reply` (setup, rename, migrate, check_deps).
All are exported from `maildir_backlog`. The methods are the verb table's (`verbs/`), written out
so that a type checker checks every call: one per verb, its parameters in the table's order and
types (tests/test_api.py holds each method to its row), its docstring the verb's summary; a row
without a written method (a new verb) gets one made from the row, untyped, and
`Backlog.call(kernel, **keywords)` calls any verb by its kernel function, typed by that
function's own signature (`bl.call(read.list_pile, pile="done")`: mypy checks the keywords);
`Backlog.run(verb, arguments)` is the one call under them all.

Exceptions (maildir_backlog.errors), as the command's exit codes:
`InvalidInput` (2: a bad slug, option or task file), `Conflict` (3: lost a race: retry now),
`Unavailable` (4: the remote did not answer, or a lock (`Busy`) or the git index stayed busy: retry
later), `BacklogError` (1: refused or failed; its subclass `git.GitError` when git refused).
`.message` is the one line the command prints, `.code` the exit code, `.kind` and `.retryable`
as in the JSON error object (`.payload()` is that object, with `holder` and `settled` when known).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from . import git
from .context import Context, Result, acting_as, claimer_id, open_context
from .errors import BacklogError
from .results import (
    Claim,
    Guide,
    Listing,
    Moved,
    ReadyTask,
    ReadyTasks,
    RemoteStatus,
    Reply,
    Report,
    Status,
    TaskView,
    Where,
    claim_or_moved,
    claim_or_none,
    ready_tasks,
    shaped,
    status_or_remote,
)
from .verbs import BY_NAME, VERBS
from .verbspec import Verb

__all__ = [
    "Backlog",
    "Claim",
    "Guide",
    "Listing",
    "Moved",
    "ReadyTask",
    "ReadyTasks",
    "RemoteStatus",
    "Reply",
    "Report",
    "Status",
    "TaskView",
    "Where",
]

T = TypeVar("T")
P = ParamSpec("P")


class Backlog:
    """The backlog of the git worktree around `path` (default: the current directory), acting as
    `claimer` when given (else as the environment says: BACKLOG_CLAIMER, ..., user@host)."""

    def __init__(self, path: str | Path = ".", claimer: str | None = None) -> None:
        self.path = Path(path).expanduser()
        self.claimer = claimer
        self._found: git.Found | None = None  # the repository, as the last call found it
        if claimer is not None:
            with acting_as(claimer):
                claimer_id()  # InvalidInput now, not at the first claim, for an identity with nothing printable

    def __repr__(self) -> str:
        extra = "" if self.claimer is None else f", claimer={self.claimer!r}"
        return f"Backlog({str(self.path)!r}{extra})"

    def context(self) -> Context:
        """The opened backlog, as one command sees it (for the `commands` functions directly)."""
        return open_context(self.path)

    def run(self, verb: str | Verb, arguments: Mapping[str, Any] | None = None) -> Result:
        """Run one verb of the table (`verbs/`) by name, `arguments` by parameter name, on a
        freshly opened backlog: the kernel's Result, the self-heal's repairs and the declaration's
        warnings among its warnings (the command prints them on stderr). The methods below, one
        per verb, are this call shaped into the verb's result type."""
        row = BY_NAME[verb] if isinstance(verb, str) else verb
        seen: list[Context] = []

        def opener(heal: bool) -> Context:
            try:
                seen.append(open_context(self.path, heal=heal, known=self._found))
            except BacklogError:
                self._moved()
                raise
            self._found = git.located(seen[-1].repo)
            return seen[-1]

        with acting_as(self.claimer):
            result = row.call(str(self.path), arguments or {}, opener)
        if not isinstance(result, Result):
            return result  # type: ignore[no-any-return]  # (a verb without a --json object: mcp)
        notes = [f"warning: {w}" for ctx in seen for w in ctx.project.warnings]
        notes += [f"layout: {f}" for ctx in seen for f in ctx.heal_findings]
        return Result(result.data, result.lines, [*notes, *result.warnings], result.stderr, result.code)

    def call(self, kernel: Callable[Concatenate[Any, P], Result], /, *args: P.args, **kwargs: P.kwargs) -> Any:
        """Run the verb whose kernel function is `kernel` (`maildir_backlog.commands....`), with
        that function's own parameters after its first (the backlog, or its directory: given here),
        so a type checker checks the call against the function, for any verb, written method or
        not. The value is the verb's API result, as its row's `result` shapes it (`Counted`,
        `Claim | None`, ...; typed `Any` here: the written methods are typed exactly)."""
        row = _row_of(kernel)
        given = inspect.signature(kernel).bind(None, *args, **kwargs).arguments
        given.pop(next(iter(given)))  # the backlog: opened by `run`
        by_key = {p.key or p.name: p.name for p in row.params}
        unknown = sorted(set(given) - set(by_key))
        if unknown:  # a keyword of the function the row does not pass (the kernel's own default)
            raise TypeError(f"{row.name}: {', '.join(unknown)} is not a parameter of the verb's row")
        named = row.shape()
        shape = shaped(named) if isinstance(named, type) else named
        return shape(self.run(row, {by_key[key]: value for key, value in given.items()}))

    def _moved(self) -> None:
        """`path` leads to no worktree now, though it led to one at an earlier call: the worktree
        moved (`git worktree move`, the directory renamed) or is gone. Say so, and where it is."""
        if self._found is None or self.path.is_dir():
            return
        repo, self._found = self._found[0], None
        there = git.moved_to(repo)
        where = f"moved to {there}: use Backlog({str(there)!r})" if there else "moved or was removed"
        raise BacklogError(f"the worktree of {self.path} (branch {repo.branch}) {where}")

    def _verb(self, name: str, shape: Callable[[Result], T], *values: Any, **arguments: Any) -> T:
        """One method's call: the verb's row by name, run (`run`), its Result shaped. `values`: the
        method's first parameters, in the row's order (the method's signature is the row's)."""
        row = BY_NAME[name]
        arguments.update(zip((p.name for p in row.params_of("api")), values, strict=False))
        return shape(self.run(row, arguments))

    # -- one method per verb of the table, in its order: the row's API parameters (`Param.annotation`), its
    # result's type (`result`); tests/test_api.py holds each to its row and prints a missing one to paste here

    def setup(
        self,
        backend: str | None = None,
        pipeline: str | None = None,
        hooks: bool = False,
        agent: Iterable[str] = (),
        check: bool = False,
        remove: bool = False,
    ) -> Reply:
        return self._verb("setup", shaped(Reply), backend, pipeline, hooks, agent, check, remove)

    def add(
        self,
        slug: str,
        category: str | None = None,
        priority: int | None = None,
        timeout: str | None = None,
        depends: Iterable[str] = (),
        title: str | None = None,
        body: str | None = None,
        here: bool = False,
    ) -> Moved:
        return self._verb("add", shaped(Moved), slug, category, priority, timeout, depends, title, body, here)

    def take(self, slug: str | None = None, force: bool = False) -> Claim | None:
        return self._verb("take", claim_or_none, slug=slug, force=force)

    def advance(self, slug: str, pr: str | None = None, force: bool = False) -> Claim | Moved:
        return self._verb("advance", claim_or_moved, slug=slug, pr=pr, force=force)

    def progress(self, note: str, slug: str | None = None, force: bool = False) -> Moved:
        return self._verb("progress", shaped(Moved), note=note, slug=slug, force=force)

    def cancel(self, slug: str, reason: str, force: bool = False) -> Moved:
        return self._verb("cancel", shaped(Moved), slug=slug, reason=reason, force=force)

    def fail(self, slug: str, reason: str, force: bool = False) -> Moved:
        return self._verb("fail", shaped(Moved), slug=slug, reason=reason, force=force)

    def release(self, slug: str, reason: str | None = None, force: bool = False) -> Moved:
        return self._verb("release", shaped(Moved), slug=slug, reason=reason, force=force)

    def rescue(self, slug: str) -> Claim:
        return self._verb("rescue", shaped(Claim), slug=slug)

    def retry(self, slug: str, reason: str, sets: Mapping[str, str] | None = None) -> Moved:
        return self._verb("retry", shaped(Moved), slug=slug, reason=reason, sets=sets)

    def edit(self, slug: str, sets: Mapping[str, str], here: bool = False) -> Moved:
        return self._verb("edit", shaped(Moved), slug=slug, sets=sets, here=here)

    def status(self, remote: bool = False) -> Status | RemoteStatus:
        return self._verb("status", status_or_remote, remote=remote)

    def show(self, slug: str) -> TaskView:
        return self._verb("show", shaped(TaskView), slug=slug)

    def list(self, pile: str | None = None) -> Listing:
        return self._verb("list", shaped(Listing), pile=pile)

    def ready(self, limit: int | None = None) -> ReadyTasks:
        return self._verb("ready", ready_tasks, limit=limit)

    def rename(self, old: str, new: str) -> Reply:
        return self._verb("rename", shaped(Reply), old=old, new=new)

    def where(self) -> Where:
        return self._verb("where", shaped(Where))

    def maintain(self, dry_run: bool = False, strict: bool = False) -> Report:
        return self._verb("maintain", shaped(Report), dry_run=dry_run, strict=strict)

    def migrate(self, to: str | None = None, from_flat: bool = False, dry_run: bool = False) -> Reply:
        return self._verb("migrate", shaped(Reply), to=to, from_flat=from_flat, dry_run=dry_run)

    def check_deps(self, *files: str) -> Reply:
        return self._verb("check-deps", shaped(Reply), files=files)

    def prime(self, tools: bool = False, skill: str | None = None) -> Guide:
        return self._verb("prime", shaped(Guide), tools=tools, skill=skill)


def _row_of(kernel: Callable[..., Any]) -> Verb:
    """The row of the table (`verbs/`) whose kernel function is `kernel`; only the rows whose
    reference names a function of that name are followed (imported)."""
    for row in VERBS:
        code = getattr(row.run, "__code__", None)
        names = code.co_names if code is not None else ()
        if row.api and (not names or names[-1] == getattr(kernel, "__name__", "")) and row.kernel() is kernel:
            return row
    raise TypeError(f"{getattr(kernel, '__qualname__', kernel)!r} is the kernel function of no verb with an API")


def _method(verb: Verb) -> Callable[..., Any]:
    """`Backlog.<verb>(...)` made from the row alone (for a row without a written method: a verb
    added at run time), its parameters in the table's order, shaped by `result`."""
    signature = verb.signature("api")
    named = verb.shape()
    shape = shaped(named) if isinstance(named, type) else named

    def method(self: Backlog, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        arguments = {name: value for name, value in bound.arguments.items() if name != "self"}
        return shape(self.run(verb, arguments))

    method.__name__, method.__qualname__ = verb.method, f"Backlog.{verb.method}"
    method.__doc__ = verb.summary
    method.__signature__ = signature  # type: ignore[attr-defined]  # (help() and inspect show the verb's own)
    return method


for _verb in VERBS:
    if _verb.api:
        if _verb.method in vars(Backlog):
            vars(Backlog)[_verb.method].__doc__ = _verb.summary  # help() says the row's summary
        else:
            setattr(Backlog, _verb.method, _method(_verb))
