"""The clock and the durations of a task file (SPEC §2): timestamps as the log writes them, budgets.

Everything here but `now_utc` is pure; every bad input raises `InvalidInput`, nothing from
`datetime` escapes. `now_utc` is the one in-process read of the clock (freezegun drives it in tests).
"""

import re
from datetime import UTC, datetime, timedelta

from . import limits
from .errors import InvalidInput, bytes_shown
from .typed import NamedTuple, pattern


def show(value: object, limit: int = 60) -> str:
    """A value for an error message: repr-ish (control characters escaped), one line, bounded."""
    shown = bytes_shown(repr(value)[1:-1] if isinstance(value, str) else repr(value))
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


# --------------------------------------------------------------------------- time


def now_utc() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def as_utc(dt: datetime) -> datetime:
    """Aware UTC, whole seconds; a naive datetime is taken to be UTC already."""
    dt = dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
    return dt.replace(microsecond=0)


def format_ts(dt: datetime) -> str:
    d = as_utc(dt)
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}:{d.second:02d}Z"


TS_PATTERN = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z"
_TS_RE = pattern(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})Z")


def parse_ts(s: str) -> datetime:
    m = _TS_RE.fullmatch(s) if isinstance(s, str) else None
    if m:
        try:
            year, month, day, hour, minute, second = (int(g) for g in m.groups())
            return datetime(year, month, day, hour, minute, second, tzinfo=UTC)
        except ValueError:
            pass
    raise InvalidInput(f"invalid timestamp '{show(s)}' (expected YYYY-MM-DDTHH:MM:SSZ, UTC)")


# --------------------------------------------------------------------------- durations

_DURATION_RE = re.compile(r"([0-9]+)([smhdw])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}  # seconds
DURATION_HINT = "expected a positive whole number followed by s, m, h, d or w, e.g. 45m, 24h, 7d; at most 520w"


MAX_DURATION = timedelta(seconds=limits.DURATION_SECONDS)  # ten years (limits.py owns the bound)
NO_BUDGET = "none"


def parse_duration(text: str) -> timedelta:
    m = _DURATION_RE.fullmatch(text.strip()) if isinstance(text, str) else None
    if m and m.group(1).strip("0"):
        count = limits.number(m.group(1), limits.DURATION_SECONDS)  # bounded before any conversion
        if count is not None and count * _UNIT[m.group(2)] <= limits.DURATION_SECONDS:
            return timedelta(seconds=count * _UNIT[m.group(2)])
        raise InvalidInput(f"invalid duration '{show(text)}': too long (at most 520w, ten years)")
    raise InvalidInput(f"invalid duration '{show(text)}' ({DURATION_HINT})")


def parse_budget(text: str) -> timedelta | None:
    """A duration, or None for `none` (a pile where tasks wait without a budget)."""
    if isinstance(text, str) and text.strip() == NO_BUDGET:
        return None
    return parse_duration(text)


def format_duration(td: timedelta) -> str:
    total = int(td.total_seconds())  # truncates toward zero
    if total < 0:
        return "-" + format_duration(timedelta(seconds=-total))
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        parts.append((total // size, unit))
        total %= size
    for i, (n, _unit) in enumerate(parts):
        if n:
            shown = [f"{k}{u}" for k, u in parts[i : i + 2] if k]
            return " ".join(shown)
    return "0s"


class Budget(NamedTuple):
    """How long a task may stay in one in-flight pile: `limit` None means no limit (`none`)."""

    limit: timedelta | None
    text: str
    default: bool = False  # from the project or the house default, not the task's own frontmatter

    def __str__(self) -> str:
        return f"{self.text}{' (default)' if self.default else ''}"

    @property
    def seconds(self) -> int | None:
        return None if self.limit is None else int(self.limit.total_seconds())
