"""The `--json` objects of setup, add, and the claim and its moves (take, advance, progress,
cancel, fail, release, rescue, retry, edit): `shapes`."""

from datetime import datetime
from typing import Annotated, Any, Literal, TypedDict

from . import Json, Schema, Slug, shape

QUEUED = "^(here|intake:.+)$"  # where a task was committed: here (this worktree's branch) or intake:<branch>


def _where(description: str) -> Json:
    """A `where` field's keywords: the `QUEUED` pattern and what `description` says of it."""
    return Json(pattern=QUEUED, description=description)


class Scaffolded(TypedDict):
    backend: Literal["maildir-shared", "maildir-git"]
    pipeline: list[str]
    paths: list[str]
    layout: list[str]
    linked: list[str]
    hook: str


class HookInstalled(TypedDict):
    hook: str


class HarnessEntry(TypedDict):
    agent: Literal["claude", "codex", "cursor", None]
    path: str
    what: str
    state: Literal["installed", "missing", "outdated"]


class Harnesses(TypedDict):
    agents: list[Literal["claude", "codex", "cursor"]]
    mode: Literal["install", "check", "remove"]
    items: list[HarnessEntry]
    paths: list[str]
    committed: list[str]
    notes: list[str]


class Placed(TypedDict):
    slug: Slug
    pile: str
    path: str
    branch: Annotated[str | None, Json(description="the branch the task was committed on (null: a detached HEAD)")]
    where: Annotated[
        str, _where("here: committed on this worktree's branch; intake:<branch>: on the clone's intake branch")
    ]


@shape("The task's frontmatter with defaults applied; unknown keys are kept as written.", closed=False)
class ClaimedFrontmatter(TypedDict):
    priority: Annotated[int, Json(minimum=1)]
    timeout: str
    dependencies: dict[str, str]


@shape("A claimed task: everything needed to start work.")
class Claimed(TypedDict):
    slug: Slug
    path: str
    pile: str
    title: str | None
    description: str
    frontmatter: ClaimedFrontmatter
    claimer: str | None
    branch: str | None
    budget: str | None
    budget_seconds: Annotated[int | None, Json(minimum=0)]
    deadline: datetime | None
    since: datetime | None
    rescued: bool
    blocked_by: list[Slug]


class NothingAvailable(TypedDict):
    slug: None
    message: Annotated[Any, Json(const="no available tasks")]


@shape("A hop along the pipeline: where the task is now and its new clock (null in done/ or a pile without budget).")
class Hop(TypedDict):
    slug: Slug
    pile: str
    path: str
    budget: str | None
    budget_seconds: Annotated[int | None, Json(minimum=0)]
    deadline: datetime | None


class Noted(TypedDict):
    slug: Slug
    pile: str
    path: str
    note: str


class Moved(TypedDict):
    slug: Slug
    pile: str
    path: str


class Released(TypedDict):
    slug: Slug
    pile: str
    path: str
    branch: Annotated[
        str | None, Json(description="the branch the released task was committed on (null: a detached HEAD)")
    ]
    where: Annotated[
        str,
        _where("here: back in todo/ on this worktree's branch; intake:<branch>: in todo/ of the clone's intake branch"),
    ]


class Edited(TypedDict):
    slug: Slug
    pile: str
    path: str
    branch: Annotated[str | None, Json(description="the branch of `where` (null: a detached HEAD)")]
    where: Annotated[
        str,
        _where(
            "where the task is queued: here (this worktree's branch) or intake:<branch> (the clone's intake branch)"
        ),
    ]
    changed: Annotated[
        list[str],
        Json(
            description=("the keys whose value changed, in the order given (empty: every field already had its value)")
        ),
    ]
    committed: Annotated[
        list[Annotated[str, Json(pattern=QUEUED)]],
        Json(
            description=(
                "the commits made: intake:<branch> for the intake branch's copy, here for this "
                "branch's own copy (empty: no commit)"
            )
        ),
    ]


SETUP = Schema(
    ("backlog setup (setup --hooks: only the hook line; setup --agent: the harnesses' entries)"),
    Scaffolded | HookInstalled | Harnesses,
)
ADD = Schema("backlog add", Placed)
TAKE = Schema("backlog take: the claimed task, or nothing available", Claimed | NothingAvailable)
ADVANCE = Schema("backlog advance: a claim out of todo (the take shape) or a hop", Claimed | Hop)
PROGRESS = Schema("backlog progress", Noted)
CANCEL = Schema("backlog cancel", Moved)
FAIL = Schema("backlog fail", Moved)
RELEASE = Schema("backlog release", Released)
RESCUE = Schema("backlog rescue: the take shape with rescued=true", Claimed)
RETRY = Schema("backlog retry", Placed)
EDIT = Schema("backlog edit", Edited)
