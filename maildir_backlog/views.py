"""The JSON shapes a task appears in (docs/json.md; one schema per verb, `schemagen`).

One home for the fields several verbs share, so `take`, `rescue`, `advance`, `show` and
`status` spell them alike: durations are whole seconds (`*_seconds`), times ISO 8601 UTC
strings (`2026-05-16T14:22:00Z`), and a human form of a duration keeps its plain name
(`budget: "7d (default)"`, `age: "2h 5m"`).
"""

from __future__ import annotations

import math
from datetime import datetime

from .backend import Located
from .clock import format_duration, format_ts, now_utc
from .context import Context
from .lifecycle import budget_of, clock_start, deadline
from .logline import LogEntry
from .task import Task, description
from .typed import Any


def _key(key: object) -> str:
    """A mapping's key as text: a YAML null or boolean key as YAML spells it, any other as str."""
    return {None: "null", True: "true", False: "false"}[key] if key is None or isinstance(key, bool) else str(key)


def jsonable(value: object) -> object:
    """A frontmatter value as JSON: YAML dates and other scalars become their text. What JSON has
    no value for is given as YAML wrote it: `.inf`, `-.inf` and `.nan` (json.dumps would print
    `Infinity` and `NaN`, which are not JSON: a strict parser, JavaScript's included, refuses the
    whole answer), a `!!binary` value as its base64 text, a `!!set` as its sorted members."""
    if isinstance(value, dict):
        return {_key(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else ".inf" if value > 0 else "-.inf"
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    if isinstance(value, bytes):
        import base64

        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (set, frozenset)):
        return sorted((jsonable(v) for v in value), key=str)
    return str(value)


def frontmatter(task: Task) -> dict[str, Any]:
    """The frontmatter with defaults applied: `priority` (int), `timeout` (its text, e.g. `7d`),
    `dependencies` (slug → reason, `""` when none given); unknown keys kept as written."""
    meta: dict[str, Any] = {_key(k): jsonable(v) for k, v in task.meta.items()}
    meta.update(priority=task.priority, timeout=task.timeout_text, dependencies=dict(task.dependencies))
    return meta


def entry(e: LogEntry) -> dict[str, Any]:
    """One log line: `ts`, `kind`, its `key=value` fields as written, and `text` (the prose after `|`)."""
    return {"ts": format_ts(e.ts), "kind": e.kind, **dict(e.fields), **({"text": e.text} if e.text else {})}


def clock(ctx: Context, task: Task, loc: Located, now: datetime | None = None) -> dict[str, Any]:
    """The running clock of a task in `loc`: all None outside the in-flight piles.

    `budget` (human text), `budget_seconds` (None: the pile has no budget), `deadline` (ISO or
    None), `since` (ISO: when the clock started), `age_seconds`, `age` (human text)."""
    if not ctx.pipeline.is_in_flight(loc.pile):
        keys = ("budget", "budget_seconds", "deadline", "since", "age_seconds", "age")
        return dict.fromkeys(keys)
    now = now or now_utc()
    start = clock_start(task, loc)
    limit = budget_of(task, loc)
    end = deadline(task, loc)
    age = now - start
    return {
        "budget": str(limit),
        "budget_seconds": limit.seconds,
        "deadline": format_ts(end) if end is not None else None,
        "since": format_ts(start),
        "age_seconds": max(0, int(age.total_seconds())),
        "age": format_duration(age),
    }


def claimed(ctx: Context, loc: Located, data: bytes, rescued: bool = False) -> dict[str, Any]:
    """What `take` (and `rescue`, and `advance` out of todo) returns: everything an agent needs
    to start work without another call."""
    task = ctx.backend.load(loc, data)
    claim = task.claim_of_record()
    times = clock(ctx, task, loc)
    shown = ctx.backend.display(loc.pile, loc.slug)
    return {
        "slug": loc.slug,
        "path": shown,
        "pile": loc.pile,
        "title": task.title,
        "description": description(data, shown),
        "frontmatter": frontmatter(task),
        "claimer": claim.get("claimer") if claim else None,
        "branch": claim.get("branch") if claim else None,
        "budget": times["budget"],
        "budget_seconds": times["budget_seconds"],
        "deadline": times["deadline"],
        "since": times["since"],
        "rescued": rescued,
        "blocked_by": [],
    }


def moved(ctx: Context, loc: Located, data: bytes) -> dict[str, Any]:
    """What `advance` returns after a hop between piles: where the task is now and its new clock."""
    task = ctx.backend.load(loc, data)
    times = clock(ctx, task, loc)
    return {
        "slug": loc.slug,
        "pile": loc.pile,
        "path": ctx.backend.display(loc.pile, loc.slug),
        "budget": times["budget"],
        "budget_seconds": times["budget_seconds"],
        "deadline": times["deadline"],
    }
