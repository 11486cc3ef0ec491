"""The `--json` objects of the views (status, show, list, ready): `shapes`."""

from datetime import datetime
from typing import Annotated, Literal, NotRequired, TypedDict

from . import FileSlug, Json, RemoteAnswer, Schema, Slug, shape


@shape(closed=False)
class InFlight(TypedDict):
    slug: Slug
    pile: str
    claimer: str | None
    branch: str | None
    since: datetime
    age: str
    age_seconds: Annotated[int, Json(minimum=0)]
    budget: str
    budget_seconds: Annotated[int | None, Json(minimum=0)]
    deadline: datetime | None
    stale: bool
    elsewhere: NotRequired[
        Annotated[
            str,
            Json(
                description=(
                    "with a remote declared: this clone's claim was taken over (rescued) or ended on "
                    "another clone, and by whom; the local copy is no longer the claim of record"
                )
            ),
        ]
    ]


@shape(closed=False)
class InFlightUnreadable(TypedDict):
    slug: FileSlug
    pile: str
    error: str


class ClonesStatus(TypedDict):
    counts: dict[str, Annotated[int, Json(minimum=0)]]
    in_flight: list[InFlight | InFlightUnreadable]
    backend: str
    stale: Annotated[
        list[Slug],
        Json(description="todo copies on this branch not counted: in flight or settled elsewhere"),
    ]
    not_tasks: Annotated[
        dict[str, Annotated[int, Json(minimum=1)]],
        Json(
            description=(
                "pile → how many of its files have a name that is not a slug: not tasks, so not "
                "counted (`maintain` names each); empty when there are none"
            )
        ),
    ]
    remote: RemoteAnswer


@shape(closed=False)
class RemoteClaim(TypedDict):
    slug: Slug
    commit: str
    this_clone: bool
    pile: NotRequired[Annotated[str | None, Json(description="null when the record names no pile (with `error`)")]]
    claimer: NotRequired[str | None]
    branch: NotRequired[str | None]
    last: NotRequired[str]
    budget: NotRequired[str | None]
    budget_seconds: NotRequired[Annotated[int | None, Json(minimum=0)]]
    deadline: NotRequired[datetime | None]
    since: NotRequired[datetime | None]
    age_seconds: NotRequired[Annotated[int | None, Json(minimum=0)]]
    age: NotRequired[str | None]
    stale: NotRequired[bool]
    error: NotRequired[str]


class RemoteStatus(TypedDict):
    remote: str
    claims: list[RemoteClaim]
    claimed: Annotated[int, Json(minimum=0)]
    settled: Annotated[int, Json(minimum=0)]


@shape("The task's frontmatter with defaults applied; unknown keys are kept as written.", closed=False)
class Frontmatter(TypedDict):
    priority: Annotated[int, Json(minimum=1)]
    timeout: str
    dependencies: dict[str, str]


@shape(
    ("One log line: ts, kind, its key=value fields as written (to, claimer, branch, budget, by, ...), text after `|`."),
    closed=False,
)
class ShowClaim(TypedDict):
    ts: datetime
    kind: Literal["advanced", "progress", "cancelled", "failed", "rescued", "retried", "released"]
    text: NotRequired[str]


@shape(
    "present when the task is shown from the branch where it settled (the ledger's "
    "record): its state, that branch, and when"
)
class ShowSettled(TypedDict):
    state: Literal["done", "cancelled", "failed", "retried", "renamed"]
    branch: str
    at: Annotated[str, Json(pattern="^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$")]


class RemoteHolder(TypedDict):
    claimer: str | None
    branch: str | None
    since: Annotated[str, Json(pattern="^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$")] | None


class RemoteSettled(TypedDict):
    state: str
    branch: str | None
    at: Annotated[str, Json(pattern="^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$")] | None


@shape(
    ("One log line: ts, kind, its key=value fields as written (to, claimer, branch, budget, by, ...), text after `|`."),
    closed=False,
)
class RemoteLogLine(TypedDict):
    ts: datetime
    kind: Literal["advanced", "progress", "cancelled", "failed", "rescued", "retried"]
    text: NotRequired[str]


@shape(
    "the remote's ref of this task (`refs/backlog/claims/<slug>` while it is in "
    "flight on some clone, `settled/<slug>` once it left flight or was retried): its "
    "commit's task file and log line"
)
class RemoteRecord(TypedDict):
    ref: Literal["claims", "settled"]
    commit: Annotated[str, Json(pattern="^([0-9a-f]{40}|[0-9a-f]{64})$")]
    this_clone: Annotated[bool, Json(description="this clone wrote it (its own claim or settlement)")]
    state: NotRequired[Literal["in flight", "done", "cancelled", "failed", "retried", "?"]]
    cause: NotRequired[
        Annotated[
            str | None,
            Json(
                description=(
                    "a settlement: how the task left flight as the record's log tells (failed by "
                    "timeout (…), failed (reason), cancelled (reason), done)"
                )
            ),
        ]
    ]
    pile: NotRequired[Annotated[str | None, Json(description="a claim: the in-flight pile its log puts the task in")]]
    holder: NotRequired[
        Annotated[
            RemoteHolder | None,
            Json(description="the claim of record in the record's log: claimer, branch, since"),
        ]
    ]
    settled: NotRequired[
        Annotated[
            RemoteSettled | None,
            Json(description="a settlement: its outcome, the branch of the claim it ended, when"),
        ]
    ]
    line: NotRequired[Annotated[str, Json(description="the record's log line (its commit's subject)")]]
    log: NotRequired[Annotated[list[RemoteLogLine], Json(description="the record's task file's log")]]
    error: NotRequired[
        Annotated[str, Json(description="instead of the rest: why the ref cannot be read (this tool did not write it)")]
    ]


class TaskView(TypedDict):
    slug: Slug
    pile: str
    path: str
    title: str | None
    description: str
    frontmatter: Frontmatter
    claim: ShowClaim | None
    log: list[ShowClaim]
    budget: str | None
    budget_seconds: Annotated[int | None, Json(minimum=0)]
    deadline: datetime | None
    since: datetime | None
    settled: NotRequired[ShowSettled]
    remote: Annotated[
        Literal["reached", "unreachable", "unconfigured", None],
        Json(
            description=(
                "with a remote declared (SPEC §8): whether it answered (unreachable: what other "
                "clones hold or settled is not known; unconfigured: the declared remote is not "
                "configured in this clone, SPEC §3); null without a remote. What it holds of the "
                "task is `remote_record`"
            )
        ),
    ]
    remote_record: NotRequired[
        Annotated[
            RemoteRecord | None,
            Json(
                description=(
                    "present when the remote was reached: what it holds of this task, or null when "
                    "it holds no ref of it"
                )
            ),
        ]
    ]


@shape(closed=False)
class ListedTask(TypedDict):
    slug: Slug
    priority: int
    ready: bool | None
    blocked_by: list[Slug]
    state: NotRequired[str]
    where: NotRequired[str]
    detail: NotRequired[str]


@shape(closed=False)
class UnreadableTask(TypedDict):
    slug: FileSlug
    error: str


class Listing(TypedDict):
    pile: str
    tasks: list[ListedTask | UnreadableTask]
    remote: RemoteAnswer


@shape(closed=False)
class ReadyTask(TypedDict):
    slug: Slug
    title: str | None
    priority: int
    where: str


class Ready(TypedDict):
    tasks: list[ReadyTask]
    remote: NotRequired[RemoteAnswer]


STATUS = Schema(
    ("backlog status (or status --remote: every clone's claims as the remote holds them)"), ClonesStatus | RemoteStatus
)
SHOW = Schema("backlog show", TaskView)
LIST = Schema("backlog list", Listing)
READY = Schema("backlog ready: what auto-pick would choose, in its order", Ready)
