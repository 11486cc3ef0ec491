"""The `--json` objects of rename, where, maintain, migrate, check-deps and prime, and the error
object any verb may answer with: `shapes`."""

from typing import Annotated, Literal, NotRequired, TypedDict

from . import Json, Schema, Slug, Unconfigured, shape


class Renamed(TypedDict):
    old: str
    new: Slug
    paths: list[str]
    dependents: list[str]


class Where(TypedDict):
    backend: str
    shared_root: str
    piles: dict[str, str]
    remote: NotRequired[Unconfigured]


class Finding(TypedDict):
    path: str
    detail: str
    slug: str | None
    fixed: bool
    error: bool


Buckets = TypedDict(
    "Buckets",
    {
        "ADVANCED BUT NOT MOVED": list[Finding],
        "TIMED OUT": list[Finding],
        "DUPLICATE": list[Finding],
        "UNRESOLVABLE DEPS": list[Finding],
        "CYCLES": list[Finding],
        "ORPHANED SHARED IN-FLIGHT": list[Finding],
        "SETTLED ELSEWHERE": list[Finding],
        "LAYOUT": list[Finding],
        "REMOTE": NotRequired[list[Finding]],
    },
)


class Checked(TypedDict):
    todo: int
    in_flight: int


class Report(TypedDict):
    buckets: Buckets
    ok: Checked
    fixed: Annotated[int, Json(minimum=0)]
    dry_run: bool


MigrateMove = TypedDict("MigrateMove", {"from": str, "to": str})


class Migrated(TypedDict):
    migration: str
    backend: str
    pipeline: list[str]
    dry_run: bool
    moves: list[MigrateMove]
    created: list[str]
    edited: list[str]
    removed: list[str]
    commit: str
    plan: list[str]
    notes: list[str]
    layout: NotRequired[list[str]]
    recovered: NotRequired[list[str]]


class Unresolved(TypedDict):
    file: str
    slug: str
    hint: str


class InvalidFile(TypedDict):
    file: str
    error: str


class DepsChecked(TypedDict):
    checked: list[str]
    unresolved: list[Unresolved]
    invalid: list[InvalidFile]
    ok: bool


ExitCodes = TypedDict("ExitCodes", {"0": str, "1": str, "2": str, "3": str, "4": str})


class Guide(TypedDict):
    backend: str
    pipeline: list[str]
    claimer: str
    claimer_from: str
    loop: list[str]
    exit_codes: ExitCodes
    text: str
    skill: NotRequired[str]
    remote: NotRequired[Unconfigured]


class Holder(TypedDict):
    claimer: str | None
    branch: str | None
    since: Annotated[str | None, Json(pattern="^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ$")]


class Settled(TypedDict):
    state: Literal["done", "cancelled", "failed", "retried", "renamed"]
    branch: str | None
    at: Annotated[str | None, Json(pattern="^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ$")]


@shape(
    allOf=[
        {
            "if": {"properties": {"code": {"enum": [3, 4]}}},
            "then": {"properties": {"retryable": {"const": True}}},
            "else": {"properties": {"retryable": {"const": False}}},
        },
        {
            "if": {"properties": {"code": {"const": 2}}},
            "then": {"properties": {"kind": {"enum": ["usage", "invalid"]}}},
        },
        {"if": {"properties": {"code": {"const": 3}}}, "then": {"properties": {"kind": {"const": "conflict"}}}},
        {"if": {"properties": {"code": {"const": 4}}}, "then": {"properties": {"kind": {"const": "unavailable"}}}},
    ]
)
class ErrorObject(TypedDict):
    error: Annotated[str, Json(minLength=1)]
    code: Literal[1, 2, 3, 4, 130]
    kind: Annotated[
        Literal[
            "usage",
            "invalid",
            "not-found",
            "held",
            "blocked",
            "settled",
            "refused",
            "failed",
            "conflict",
            "unavailable",
            "interrupted",
            "internal",
        ],
        Json(description="what went wrong, from a closed set (docs/json.md)"),
    ]
    retryable: Annotated[bool, Json(description="true for codes 3 and 4: the same call may succeed later")]
    holder: NotRequired[Holder]
    settled: NotRequired[Settled]


RENAME = Schema(("backlog rename OLD NEW (OLD may be a slug the grammar refuses: that is why it is renamed)"), Renamed)
WHERE = Schema("backlog where", Where)
MAINTAIN = Schema("backlog maintain", Report)
MIGRATE = Schema("backlog migrate (layout and recovered only after a real run)", Migrated)
CHECK_DEPS = Schema("backlog check-deps", DepsChecked)
PRIME = Schema("backlog prime (skill: the SKILL.md written with --skill)", Guide)
ERROR = Schema(
    ("Any verb's failure (exit 1 refused, 2 usage or invalid input, 3 lost a race, 4 unavailable, 130 interrupted)"),
    ErrorObject,
)
