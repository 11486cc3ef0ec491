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
one `backlog` command does, in this process. The claimer identity is `claimer` when given (for
this object's calls only: the environment is neither read for it nor changed), else the
environment's, as for the command (BACKLOG_CLAIMER, ...). The results are frozen dataclasses whose
fields are the keys of the verb's `--json` object (docs/json.md), times (`deadline`, `since`) as
timezone-aware UTC datetimes; `.data` is that object itself (times as ISO text) and `.warnings`
what the command would print on stderr: `Claim` (take, rescue, advance out of todo), `Moved` (add,
advance, progress, cancel, fail, retry), `TaskView` (show), `Status` (status), `RemoteStatus`
(status(remote=True)), `ReadyTask` (ready returns a list of them), `Listing` (list), `Where`
(where), `Guide` (prime), `Report` (maintain). All are exported from `maildir_backlog`.

Exceptions (maildir_backlog.errors), as the command's exit codes:
`InvalidInput` (2: a bad slug, option or task file), `Conflict` (3: lost a race: retry now),
`Unavailable` (4: the remote did not answer, or a lock (`Busy`) or the git index stayed busy: retry
later), `BacklogError` (1: refused or failed; its subclass `git.GitError` when git refused).
`.message` is the one line the command prints, `.code` the exit code, `.kind` and `.retryable`
as in the JSON error object (`.payload()` is that object, with `holder` and `settled` when known).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

from .context import Context, Result, acting_as, claimer_id, open_context
from .task import parse_ts


@dataclass(frozen=True, kw_only=True)
class Reply:
    """What every verb returns: its --json object (`data`) and its stderr lines (`warnings`)."""

    data: dict[str, Any] = field(repr=False, compare=False)
    warnings: tuple[str, ...] = field(default=(), repr=False, compare=False)


@dataclass(frozen=True, kw_only=True)
class Claim(Reply):
    """A claimed task (`take`, `rescue`, `advance` out of todo): everything needed to start work."""

    slug: str
    path: str
    pile: str
    title: str | None
    description: str
    frontmatter: dict[str, Any]
    claimer: str | None
    branch: str | None
    budget: str | None
    budget_seconds: int | None
    deadline: datetime | None
    since: datetime | None
    rescued: bool
    blocked_by: builtins.list[str]


@dataclass(frozen=True, kw_only=True)
class Moved(Reply):
    """Where a task is after `add`, `advance`, `progress`, `cancel`, `fail` or `retry`."""

    slug: str
    pile: str
    path: str
    budget_seconds: int | None = None  # advance: the new pile's clock (None in done/ or without budget)
    deadline: datetime | None = None
    note: str | None = None  # progress: the note as written


@dataclass(frozen=True, kw_only=True)
class TaskView(Reply):
    slug: str
    pile: str
    path: str
    title: str | None
    description: str
    frontmatter: dict[str, Any]
    claim: dict[str, Any] | None
    log: builtins.list[dict[str, Any]]
    budget: str | None
    budget_seconds: int | None
    deadline: datetime | None
    since: datetime | None


@dataclass(frozen=True, kw_only=True)
class Status(Reply):
    backend: str
    counts: dict[str, int]
    in_flight: builtins.list[dict[str, Any]]
    stale: builtins.list[str] = field(default_factory=builtins.list)  # todo copies in flight or settled elsewhere


@dataclass(frozen=True, kw_only=True)
class RemoteStatus(Reply):
    """`status(remote=True)`: every clone's claims as the remote holds them (SPEC §8)."""

    remote: str
    claims: builtins.list[dict[str, Any]]
    claimed: int
    settled: int


@dataclass(frozen=True, kw_only=True)
class Where(Reply):
    """`where`: the backend, the shared root and every pile's resolved path."""

    backend: str
    shared_root: str
    piles: dict[str, str]


@dataclass(frozen=True, kw_only=True)
class ReadyTask(Reply):
    slug: str
    title: str | None
    priority: int
    where: str


@dataclass(frozen=True, kw_only=True)
class Listing(Reply):
    pile: str
    tasks: builtins.list[dict[str, Any]]


@dataclass(frozen=True, kw_only=True)
class Report(Reply):
    """The janitor's sweep; `code` is the exit code the command would give (1: a repair failed,
    or `strict` and an advisory bucket is non-empty)."""

    buckets: dict[str, builtins.list[dict[str, Any]]]
    ok: dict[str, int]
    fixed: int
    dry_run: bool
    code: int = 0


@dataclass(frozen=True, kw_only=True)
class Guide(Reply):
    """`prime`: this project's workflow for an agent (`text` is what the command prints)."""

    backend: str
    pipeline: builtins.list[str]
    claimer: str
    claimer_from: str
    loop: builtins.list[str]
    exit_codes: dict[str, str]
    text: str


R = TypeVar("R", bound=Reply)
TIMES = ("deadline", "since")  # ISO text in .data, aware datetimes on the results


def _field(name: str, value: Any) -> Any:
    return parse_ts(value) if name in TIMES and isinstance(value, str) else value


def _reply(cls: type[R], data: dict[str, Any], warnings: Iterable[str] = (), **extra: Any) -> R:
    names = [f.name for f in fields(cls) if f.name not in ("data", "warnings") and f.name not in extra]
    values = {name: _field(name, data[name]) for name in names if name in data}
    return cls(data=data, warnings=tuple(warnings), **values, **extra)


def _of(cls: type[R], result: Result, **extra: Any) -> R:
    return _reply(cls, result.json(), [*result.warnings, *result.stderr], **extra)


class Backlog:
    """The backlog of the git worktree around `path` (default: the current directory), acting as
    `claimer` when given (else as the environment says: BACKLOG_CLAIMER, ..., user@host)."""

    def __init__(self, path: str | Path = ".", claimer: str | None = None) -> None:
        self.path = Path(path).expanduser()
        self.claimer = claimer
        if claimer is not None:
            with acting_as(claimer):
                claimer_id()  # InvalidInput now, not at the first claim, for an identity with nothing printable

    def __repr__(self) -> str:
        extra = "" if self.claimer is None else f", claimer={self.claimer!r}"
        return f"Backlog({str(self.path)!r}{extra})"

    def context(self) -> Context:
        """The opened backlog, as one command sees it (for the `commands` functions directly)."""
        return open_context(self.path)

    def _call(self, verb: Callable[..., Result], *args: Any) -> Result:
        """Run one command function on a freshly opened backlog; the self-heal's repairs and the
        declaration's warnings join the result's warnings (the command prints them on stderr)."""
        with acting_as(self.claimer):
            ctx = self.context()
            result = verb(ctx, *args)
        notes = [f"warning: {w}" for w in ctx.project.warnings] + [f"layout: {f}" for f in ctx.heal_findings]
        return Result(result.data, result.lines, [*notes, *result.warnings], result.stderr, result.code)

    # -- claiming and moving ---------------------------------------------------------------
    def take(self, slug: str | None = None) -> Claim | None:
        """Claim `slug`, or the best available todo task; None when nothing is available."""
        from .commands.claim import take

        result = self._call(take, slug)
        return None if result.data.get("slug") is None else _of(Claim, result)

    def advance(self, slug: str, pr: str | None = None, force: bool = False) -> Claim | Moved:
        """One step along the pipeline: a Claim when it claims out of todo, else Moved."""
        from .commands.claim import advance

        result = self._call(advance, slug, pr, force)
        return _of(Claim, result) if "description" in result.data else _of(Moved, result)

    def rescue(self, slug: str) -> Claim:
        from .commands.claim import rescue

        return _of(Claim, self._call(rescue, slug))

    def progress(self, note: str, slug: str | None = None, force: bool = False) -> Moved:
        from .commands.progress import progress

        return _of(Moved, self._call(progress, note, slug, force))

    def cancel(self, slug: str, reason: str, force: bool = False) -> Moved:
        from .commands.settle import cancel

        return _of(Moved, self._call(cancel, slug, reason, force))

    def fail(self, slug: str, reason: str, force: bool = False) -> Moved:
        from .commands.settle import fail

        return _of(Moved, self._call(fail, slug, reason, force))

    def retry(self, slug: str, reason: str, sets: Mapping[str, str] | None = None) -> Moved:
        """Reopen a failed task; `sets` edits frontmatter fields on the way (e.g. {"timeout": "3d"})."""
        from .commands.settle import retry

        pairs = [f"{key}={value}" for key, value in (sets or {}).items()]
        return _of(Moved, self._call(retry, slug, reason, pairs))

    def add(
        self,
        slug: str,
        category: str | None = None,
        *,
        priority: int | None = None,
        timeout: str | None = None,
        depends: Iterable[str] = (),
        title: str | None = None,
        body: str | None = None,
        here: bool = False,
    ) -> Moved:
        """Create `<slug>-<category>` in the first pile (on the intake branch unless `here`);
        `depends` holds `SLUG` or `SLUG:REASON` items."""
        from .commands.add import add

        deps = builtins.list(depends)
        return _of(Moved, self._call(partial(add, here=here), slug, category, priority, timeout, deps, title, body))

    # -- reading -----------------------------------------------------------------------------
    def ready(self, limit: int | None = None) -> builtins.list[ReadyTask]:
        """What `take` would pick, in its order, without claiming."""
        from .commands.read import ready

        result = self._call(ready, limit) if limit is not None else self._call(ready)
        return [_reply(ReadyTask, item) for item in result.data["tasks"]]

    def show(self, slug: str) -> TaskView:
        from .commands.read import show

        return _of(TaskView, self._call(show, slug))

    @overload
    def status(self, remote: Literal[False] = False) -> Status: ...
    @overload
    def status(self, remote: Literal[True]) -> RemoteStatus: ...
    @overload
    def status(self, remote: bool) -> Status | RemoteStatus: ...

    def status(self, remote: bool = False) -> Status | RemoteStatus:
        """Pile counts and in-flight tasks; `remote=True`: every clone's claims as the remote holds
        them (BacklogError when no remote is declared)."""
        if remote:
            from .commands.remote_status import remote_status

            return _of(RemoteStatus, self._call(remote_status))
        from .commands.read import status

        return _of(Status, self._call(status))

    def where(self) -> Where:
        """The backend, the shared root and where every pile lives."""
        from .commands.read import where

        return _of(Where, self._call(where))

    def list(self, pile: str | None = None) -> Listing:
        from .commands.read import list_pile

        return _of(Listing, self._call(list_pile, pile))

    def prime(self, tools: bool = False) -> Guide:
        """The workflow of this project, for an agent starting work; `tools`: told in calls of the
        MCP server's tools (`take`) rather than commands (`backlog take --json`)."""
        from .commands.prime import prime

        return _of(Guide, self._call(prime, None, tools))

    def maintain(self, dry_run: bool = False, strict: bool = False) -> Report:
        """The janitor, as `backlog maintain` runs it (an interrupted migration is recovered first)."""
        from . import git
        from .commands.maintain import maintain
        from .commands.migrate import recover

        with acting_as(self.claimer):
            recovered = recover(git.discover(self.path), dry_run=dry_run)
            ctx = open_context(self.path, heal=not dry_run)
            result = maintain(ctx, dry_run=dry_run, strict=strict, recovered=recovered)
        return _of(Report, result, code=result.code)
