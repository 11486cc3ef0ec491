"""The verbs' `--json` objects as types: each verb's shape (a row's `reply`: a `Schema`, its title
and its type) in TypedDicts, from which `schemagen` makes the verb's JSON Schema (`schemagen.schema(verb)`,
which tests/test_json_contract.py checks each verb's output against). A field's type is its
JSON type; `Annotated[T, Json(...)]` adds keywords (a pattern, a minimum, a description); `NotRequired`
a key an object may lack; `shape(...)` an object's description, whether it is closed, and more
keywords. `datetime` is ISO 8601 UTC text (`schemagen.ISO`).

Split by verb family to keep each module short: `work` (setup, add, the claim and its moves),
`views` (status, show, list, ready), `care` (rename, where, maintain, migrate, check-deps, prime,
and the error object every verb may answer with). Imported by `schemagen` only (the MCP server,
the tests): never on a command's start-up.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Annotated, Any, Literal, NamedTuple, TypeVar


class Json:
    """JSON Schema keywords a type adds: `Annotated[str, Json(pattern=...)]` (hashable, so that
    such a type may be a member of a union)."""

    __slots__ = ("keywords",)

    def __init__(self, **keywords: Any) -> None:
        self.keywords: Mapping[str, Any] = MappingProxyType(keywords)

    def __hash__(self) -> int:
        return hash(json.dumps(dict(self.keywords), sort_keys=True))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Json) and dict(self.keywords) == dict(other.keywords)

    def __repr__(self) -> str:
        return f"Json(**{dict(self.keywords)!r})"


class Schema(NamedTuple):
    """A verb's `--json` object as a type (a row's `reply`): the schema's title and the type (a
    TypedDict or dataclass, or a union of them: one of several shapes)."""

    title: str
    type: Any


class Options(NamedTuple):
    description: str = ""
    closed: bool = True
    extra: Mapping[str, Any] = MappingProxyType({})


OPTIONS: dict[type, Options] = {}
C = TypeVar("C", bound=type)


def shape(description: str = "", *, closed: bool = True, **extra: Any) -> Callable[[C], C]:
    """A TypedDict's object as its schema says more: its description, `closed=False` when it may hold
    keys it does not name (`additionalProperties` left out), more keywords (`allOf`)."""

    def mark(cls: C) -> C:
        OPTIONS[cls] = Options(description, closed, MappingProxyType(extra))
        return cls

    return mark


Slug = Annotated[str, Json(pattern="^[a-z0-9][a-z0-9._-]{0,127}$")]  # a task's slug (task.SLUG_RE's form)
# the slug of a file reported as unreadable: a slug, or the name of a file in a pile that is not one
FileSlug = Annotated[
    str,
    Json(
        description=(
            "the file's name without `.md`: a slug, or the name of a file that is not a task (each byte "
            "of it that is not UTF-8 written as the text `\\xff`)"
        )
    ),
]

# a view's `remote`: whether the declared remote answered (status, list, ready)
RemoteAnswer = Annotated[
    Literal["reached", "unreachable", "unconfigured", None],
    Json(
        description=(
            "with a remote declared (SPEC §8): whether it answered (unreachable: what other "
            "clones hold or settled is not known to this view; unconfigured: the declared "
            "remote is not configured in this clone, SPEC §3, and the view shows this "
            "clone's state only); null without a remote"
        )
    ),
]
# `remote` of an answer from local state only (where, prime): present when the remote is not configured
Unconfigured = Annotated[
    Literal["unconfigured"],
    Json(
        description=(
            "present when the declared remote (`remote:` in `## Backend`) is not configured "
            "in this clone (SPEC §3): the answer is this clone's state only, and one warning "
            "line on stderr says so"
        )
    ),
]
