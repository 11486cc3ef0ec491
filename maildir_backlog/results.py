"""The API's typed results: one frozen dataclass per shape of a verb's `--json` object, whose
fields are that object's keys (times as aware UTC datetimes), and the functions that make them
from a kernel Result (the verb table's `result` column: `verbs/`)."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from .context import Result


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
    remote: str | None = None  # with `remote:` declared: reached, unreachable or unconfigured (SPEC §3, §8)
    remote_record: dict[str, Any] | None = None  # the remote's claim or settlement of the task, with its log


@dataclass(frozen=True, kw_only=True)
class Status(Reply):
    backend: str
    counts: dict[str, int]
    in_flight: builtins.list[dict[str, Any]]
    stale: builtins.list[str] = field(default_factory=builtins.list)  # todo copies in flight or settled elsewhere
    not_tasks: dict[str, int] = field(default_factory=dict)  # pile → files whose name is not a slug (not counted)
    remote: str | None = None  # with `remote:` declared: reached, unreachable or unconfigured (SPEC §3, §8)


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
    remote: str | None = None  # "unconfigured": the declared remote is not configured in this clone (SPEC §3)


@dataclass(frozen=True, kw_only=True)
class ReadyTask(Reply):
    slug: str
    title: str | None
    priority: int
    where: str


class ReadyTasks(builtins.list[ReadyTask]):
    """`ready`: a list of ReadyTask in take's order, as before, that also carries what the
    command says beside them: `remote` (None without a declared remote; else reached,
    unreachable or unconfigured, SPEC §8) and `warnings` (its stderr lines: an unreachable
    remote's)."""

    def __init__(self, tasks: Iterable[ReadyTask], remote: str | None, warnings: tuple[str, ...]) -> None:
        super().__init__(tasks)
        self.remote = remote
        self.warnings = warnings


@dataclass(frozen=True, kw_only=True)
class Listing(Reply):
    pile: str
    tasks: builtins.list[dict[str, Any]]
    remote: str | None = None  # with `remote:` declared: reached, unreachable or unconfigured (SPEC §3, §8)


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
    remote: str | None = None  # "unconfigured": the declared remote is not configured in this clone (SPEC §3)


R = TypeVar("R", bound=Reply)
TIMES = ("deadline", "since")  # ISO text in .data, aware datetimes on the results


def _field(name: str, value: Any) -> Any:
    from .clock import parse_ts  # here, not at the top: the command imports this table at start-up

    return parse_ts(value) if name in TIMES and isinstance(value, str) else value


def _reply(cls: type[R], data: dict[str, Any], warnings: Iterable[str] = (), **extra: Any) -> R:
    names = [f.name for f in fields(cls) if f.name not in ("data", "warnings") and f.name not in extra]
    values = {name: _field(name, data[name]) for name in names if name in data}
    return cls(data=data, warnings=tuple(warnings), **values, **extra)


def _said(result: Result) -> tuple[str, ...]:
    """What the command prints on stderr beside its answer: a result's `warnings`."""
    return (*result.warnings, *result.stderr)


def _of(cls: type[R], result: Result) -> R:
    extra = {"code": result.code} if "code" in {f.name for f in fields(cls)} else {}
    return _reply(cls, result.json(), _said(result), **extra)


def shaped(cls: type[R]) -> Callable[[Result], R]:
    """The `result` column of a verb with one shape."""
    return lambda result: _of(cls, result)


def claim_or_none(result: Result) -> Claim | None:
    """`take`: the Claim, or None when nothing is available."""
    return None if result.data.get("slug") is None else _of(Claim, result)


def claim_or_moved(result: Result) -> Claim | Moved:
    """`advance`: a Claim when it claims out of todo, else Moved."""
    return _of(Claim, result) if "description" in result.data else _of(Moved, result)


def status_or_remote(result: Result) -> Status | RemoteStatus:
    """`status`: this clone's view, or (remote) every clone's claims as the remote holds them."""
    return _of(RemoteStatus, result) if "claims" in result.data else _of(Status, result)


def ready_tasks(result: Result) -> ReadyTasks:
    """`ready`: one ReadyTask per task, in take's order, with the remote's state and the warnings."""
    data = result.json()
    tasks = (_reply(ReadyTask, item) for item in data["tasks"])
    return ReadyTasks(tasks, data.get("remote"), _said(result))
