"""One task file (SPEC §2): slug grammar, frontmatter, the log and its line grammar, durations.

Everything here is pure: bytes in, values (or bytes) out. Every bad input raises
`InvalidInput`; nothing from yaml, the codec or `datetime` escapes the public functions.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from . import limits
from .errors import InvalidInput

# python-frontmatter and yaml are imported on the first frontmatter parse (`_handler`), not here:
# they cost ~15-25 ms per command, and many commands parse no frontmatter at all.

# --------------------------------------------------------------------------- slugs

SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$")


def _show(value: object, limit: int = 60) -> str:
    """A value for an error message: repr-ish (control characters escaped), one line, bounded."""
    shown = repr(value)[1:-1] if isinstance(value, str) else repr(value)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


class Slug(str):
    """A slug already validated: what `validate_slug` returns. A verb validates its slug once, at
    the door; every later check on the way (`Backend.locate`, …) sees the type and skips it."""

    __slots__ = ()


def validate_slug(slug: str) -> Slug:
    if isinstance(slug, Slug):
        return slug
    if not isinstance(slug, str) or not SLUG_RE.fullmatch(slug) or ".." in slug:
        raise InvalidInput(
            f"invalid slug '{_show(slug)}': use lower-case letters, digits, '.', '_', '-' (max 128, no '..')"
        )
    return Slug(slug)


# --------------------------------------------------------------------------- time


def now_utc() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _utc(dt: datetime) -> datetime:
    """Aware UTC, whole seconds; a naive datetime is taken to be UTC already."""
    dt = dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
    return dt.replace(microsecond=0)


def format_ts(dt: datetime) -> str:
    d = _utc(dt)
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}:{d.second:02d}Z"


_TS = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z"
_TS_RE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})Z")


def parse_ts(s: str) -> datetime:
    m = _TS_RE.fullmatch(s) if isinstance(s, str) else None
    if m:
        try:
            year, month, day, hour, minute, second = (int(g) for g in m.groups())
            return datetime(year, month, day, hour, minute, second, tzinfo=UTC)
        except ValueError:
            pass
    raise InvalidInput(f"invalid timestamp '{_show(s)}' (expected YYYY-MM-DDTHH:MM:SSZ, UTC)")


# --------------------------------------------------------------------------- durations

_DURATION_RE = re.compile(r"([0-9]+)([smhdw])")
_UNIT = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_DURATION_HINT = "expected a positive whole number followed by s, m, h, d or w, e.g. 45m, 24h, 7d; at most 520w"


MAX_DURATION = timedelta(weeks=520)  # ten years: any budget past that is a typo, and would overflow dates
NO_BUDGET = "none"


def parse_duration(text: str) -> timedelta:
    m = _DURATION_RE.fullmatch(text.strip()) if isinstance(text, str) else None
    if m and int(m.group(1)) > 0:
        try:
            value = timedelta(**{_UNIT[m.group(2)]: int(m.group(1))})
        except OverflowError:
            value = MAX_DURATION * 2
        if value <= MAX_DURATION:
            return value
        raise InvalidInput(f"invalid duration '{_show(text)}': too long (at most 520w, ten years)")
    raise InvalidInput(f"invalid duration '{_show(text)}' ({_DURATION_HINT})")


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


# --------------------------------------------------------------------------- log lines

LOG_KINDS = ("advanced", "progress", "cancelled", "failed", "rescued", "retried")
TEXT_REQUIRED = {"progress", "cancelled", "failed", "retried"}

_KEY_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_FIELD_RE = re.compile(r"([A-Za-z][A-Za-z0-9_-]*)=(\S*)")
_LINE_RE = re.compile(r"- +(" + _TS + r") +([a-z]+)(.*)")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class LogEntry:
    ts: datetime
    kind: str
    fields: tuple[tuple[str, str], ...] = ()
    text: str | None = None

    def get(self, key: str, default: str | None = None) -> str | None:
        for k, v in self.fields:
            if k == key:
                return v
        return default


def _clean(value: str) -> str:
    """Control characters become spaces, and the result must be encodable (no lone surrogates)."""
    value = _CONTROL_RE.sub(" ", value)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"not valid text (cannot be written as UTF-8): '{_show(value)}'") from None
    return value


def field_value(value: str) -> str:
    """A value as a log line writes it: control characters and whitespace runs become one `-`."""
    return "-".join(_clean(str(value)).split())


def make_entry(
    kind: str,
    fields: dict[str, str | None] | None = None,
    text: str | None = None,
    now: datetime | None = None,
) -> LogEntry:
    if kind not in LOG_KINDS:
        raise ValueError(f"unknown log kind {kind!r}")
    pairs = []
    for key, value in (fields or {}).items():
        if not isinstance(key, str) or not _KEY_RE.fullmatch(key):
            raise ValueError(f"bad log field name {key!r}")
        if value is None:
            continue
        value = field_value(value)
        if value:
            pairs.append((key, value))
    prose = " ".join(_clean(str(text)).split()) if text is not None else ""
    if not prose and kind in TEXT_REQUIRED:
        what = "note" if kind == "progress" else "reason"
        raise InvalidInput(f"empty {what}: a {kind} line needs a {what} (some text)")
    return LogEntry(_utc(now) if now is not None else now_utc(), kind, tuple(pairs), prose or None)


def render_log_line(entry: LogEntry) -> str:
    out = [f"- {format_ts(entry.ts)} {entry.kind}"]
    out += [f" {k}={v}" for k, v in entry.fields]
    if entry.text:
        out.append(f" | {entry.text}")
    return "".join(out)


def _fields(head: str) -> list[tuple[str, str]] | None:
    """`key=value` tokens separated by whitespace; None when any token is not one."""
    pairs = []
    for token in head.split():
        fm = _FIELD_RE.fullmatch(token)
        if not fm:
            return None
        pairs.append((fm.group(1), fm.group(2)))
    return pairs


def _spaced_claimer(head: str) -> list[tuple[str, str]] | None:
    """The fields of a line whose claimer value has spaces (the older bash tool wrote
    `claimer=conductor:austin v3 branch=main`): the value runs from `claimer=` up to the
    last ` branch=` after it, and is read as this tool writes it (whitespace runs become `-`)."""
    start = head.find(" claimer=")
    end = head.rfind(" branch=")
    if start < 0 or end <= start:
        return None
    before, after = _fields(head[:start]), _fields(head[end:])
    value = "-".join(head[start + len(" claimer=") : end].split())
    if before is None or after is None or not value:
        return None
    return [*before, ("claimer", value), *after]


def parse_log_line(line: str) -> LogEntry | None:
    """One log line, or None. Lenient where the older bash tool differs (SPEC §2, *Reading what
    others wrote*): a claimer value with spaces runs up to ` branch=`."""
    line = line.rstrip()
    m = _LINE_RE.fullmatch(line) if "\n" not in line else None
    if not m or m.group(2) not in LOG_KINDS:
        return None
    rest = m.group(3)
    if rest and not rest.startswith(" "):
        return None
    head, sep, text = rest.partition(" | ")
    if not sep and rest.endswith(" |"):  # a bare trailing "|": no prose
        head, text = rest[:-2], ""
    pairs = _fields(head)
    if pairs is None:
        pairs = _spaced_claimer(head)
        if pairs is None:
            return None
    try:
        ts = parse_ts(m.group(1))
    except InvalidInput:
        return None
    return LogEntry(ts, m.group(2), tuple(pairs), text.strip() or None)


# --------------------------------------------------------------------------- file layout

_FM_CLOSE_RE = re.compile(r"-{3,}")


@dataclass(frozen=True)
class _Layout:
    lines: list[str]  # text (after any BOM) split on "\n"
    fm_close: int  # index of the frontmatter's closing line, -1 without frontmatter
    divider: int  # index of the log's first divider line, -1 without a log
    log_start: int  # offset in text where the log begins (after that divider), len(text) without a log
    log: list[LogEntry]
    unreadable: list[str] = field(default_factory=list)  # raw lines of the log that are not entries


def _is_divider(line: str) -> bool:
    return line.rstrip(" \t\r") == "---"


_FENCE_RE = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)")


def _fenced(lines: list[str], start: int) -> list[bool]:
    """Which lines (from `start` on) lie in a fenced code block, its fence lines included.

    A fence opens at a line of three or more backticks or tildes (after any indentation; a
    backtick fence's info string holds no backtick) and closes at the next line of at least as
    many of the same character with nothing else on it; lines in between are code, openers
    included (CommonMark). A fence that never closes is no fence here: the tool's own appends
    come after it, and a log must never be lost. Linear in the lines (times a log for the
    search): for each character, the closers ahead are kept nearest first, each longer than the
    ones before it (a nearer closer at least as long hides a farther one).
    """
    marks: list[tuple[str, int, bool] | None] = [None] * len(lines)  # (char, length, may close)
    for k in range(start, len(lines)):
        if not lines[k].lstrip(" \t").startswith(("```", "~~~")):
            continue
        m = _FENCE_RE.fullmatch(lines[k].rstrip("\r"))
        if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            marks[k] = (m.group(1)[0], len(m.group(1)), not m.group(2).strip())
    closer: list[int] = [-1] * len(lines)  # the line that closes a fence opened at k, -1: none
    ahead: dict[str, list[tuple[int, int]]] = {"`": [], "~": []}  # (-length, line), farthest first
    for k in range(len(lines) - 1, start - 1, -1):
        mark = marks[k]
        if mark is None:
            continue
        char, length, closes = mark
        stack = ahead[char]  # -length ascends toward the top (the nearest)
        if stack and -stack[-1][0] >= length:
            closer[k] = stack[-1][1]  # the nearest closer is long enough (the common case)
        else:
            at = bisect.bisect_right(stack, -length, key=lambda e: e[0]) - 1  # the nearest at least this long
            closer[k] = stack[at][1] if at >= 0 else -1
        if closes:
            while stack and -stack[-1][0] <= length:
                stack.pop()
            stack.append((-length, k))
    inside = [False] * len(lines)
    k = start
    while k < len(lines):
        if closer[k] >= 0:
            for j in range(k, closer[k] + 1):
                inside[j] = True
            k = closer[k]
        k += 1
    return inside


def _layout(text: str) -> _Layout:
    """Find the frontmatter and the log, reading leniently what the older bash tool wrote.

    The log is the trailing run of the file that starts at a divider line `---` (outside the
    frontmatter) whose first line that is neither blank nor a divider is a log line (or that
    has no such line: an empty log, as in a fresh task ending in `---`). Once it has started,
    the log runs to the end of the file, whatever follows: a divider with prose after it (a
    markdown rule in the description, then more description) never starts one, so a file with
    prose after its last divider has no log yet. Of the candidates, the first wins, so the
    bash tool's one divider per advance is read as one log.

    Inside the log, every line is one of:

    - blank, or a divider (the bash tool wrote one before each advance after the claim);
    - a log line (`parse_log_line`): an entry;
    - a continuation line: not blank, not a divider, not a log line, not beginning with `-`
      (after any indentation), whose nearest non-blank line above is an entry of a kind that
      carries a note or reason (progress, cancelled, failed, retried) or a continuation of
      one. The bash tool wrote a multi-line note or reason as a first line then plain lines;
      each continuation is joined to that entry's text with one space (its own whitespace
      runs folded to one space, as this tool folds a note). Blank lines between them are
      paragraph breaks of the same note; a divider ends the note.
    - unreadable: anything else (a line beginning with `-` that is no log line, such as
      `- garbage` or a bad timestamp; plain text after a divider, after an `advanced` or
      `rescued` entry, or after another unreadable line). Kept in `unreadable`, raw (without
      the line ending's `\r`), in file order; the entries around it are read as usual.

    A fenced code block (``` or ~~~, `_fenced`) before the log is description, whatever it
    holds: an example of the log format in it never starts the log, with prose after it or as
    the last thing in the file (the first append then writes a divider).

    Lines before the log are description, log-looking or not. The price of never losing a log:
    text someone adds below a log is read as part of it (joined to a note, or unreadable), and
    a description whose markdown rule `---` is directly followed by a log line starts its log there.
    """
    base = 1 if text.startswith("\ufeff") else 0
    lines = text[base:].split("\n")
    fm_close = -1
    if lines[0].rstrip(" \t\r") == "---":
        for j in range(1, len(lines)):
            if _FM_CLOSE_RE.fullmatch(lines[j].rstrip(" \t\r")):
                fm_close = j
                break
        else:
            # Refused rather than read as "no frontmatter": appending a divider would close it.
            raise InvalidInput("invalid frontmatter: no closing '---' line")
    divider = -1  # the candidate log's first divider
    started = False  # the candidate has its first entry
    found: list[LogEntry] = []
    unreadable: list[str] = []
    note: int | None = None  # index in `found` of the entry a continuation line joins
    fenced = _fenced(lines, fm_close + 1)
    for k in range(fm_close + 1, len(lines)):
        line = lines[k]
        if fenced[k] and not started:
            divider = -1  # a fenced code block is description: an example of the log in it is no log
            continue
        if _is_divider(line):
            if divider < 0:
                divider = k
            note = None
            continue
        if divider < 0 or not line.strip():
            continue
        entry = parse_log_line(line)
        if entry is not None:
            found.append(entry)
            started = True
            note = len(found) - 1 if entry.kind in TEXT_REQUIRED else None
        elif not started:
            divider = -1  # prose after this divider: not a log (a later divider may start one)
        elif note is not None and not line.lstrip().startswith("-"):
            joined = " ".join(line.split())
            prior = found[note]
            found[note] = replace(prior, text=f"{prior.text} {joined}" if prior.text else joined)
        else:
            unreadable.append(line.removesuffix("\r"))
            note = None
    if divider < 0:
        return _Layout(lines, fm_close, -1, len(text), [])
    log_start = base + sum(len(ln) + 1 for ln in lines[: divider + 1])
    return _Layout(lines, fm_close, divider, min(log_start, len(text)), found, unreadable)


def split_log(text: str) -> tuple[int, bool]:
    layout = _layout(text)
    return layout.log_start, layout.divider >= 0


def description(data: bytes, path: str = "task file") -> str:
    """The markdown between the frontmatter and the log (title line included), without the
    blank lines around it and with `\\n` line endings: what an agent reads to start work.

    >>> description(b"---\\na: 1\\n---\\n\\n# Fix it\\n\\nWhy.\\n\\n---\\n\\n- 2026-05-16T14:22:00Z progress | x\\n")
    '# Fix it\\n\\nWhy.'
    """
    try:
        layout = _layout(_decode(data, path))
    except InvalidInput as exc:
        raise InvalidInput(f"{path}: {exc.message}") from None
    end = layout.divider if layout.divider >= 0 else len(layout.lines)
    body = [line.rstrip("\r") for line in layout.lines[layout.fm_close + 1 : end]]
    return "\n".join(body).strip("\n")


def _decode(data: bytes, path: str) -> str:
    if b"\x00" in data:
        raise InvalidInput(f"{path}: binary file, not a task")
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{path}: not valid UTF-8 text") from None


def read_log(data: bytes, path: str = "task file") -> list[LogEntry]:
    """Only the log of a task file (no frontmatter parsing: works on a task whose fields are invalid)."""
    try:
        return _layout(_decode(data, path)).log
    except InvalidInput as exc:
        raise InvalidInput(f"{path}: {exc.message}") from None


def generation(log: list[LogEntry]) -> int:
    """How often the task was retried: each retry starts a new generation (SPEC §7.10)."""
    return sum(1 for entry in log if entry.kind == "retried")


def append_line(data: bytes, entry: LogEntry, path: str = "task file") -> bytes:
    """`data` plus one log line (and the divider first, when the file has none). Existing bytes are kept as they are.

    `path` names the file in errors (a binary file, an unclosed frontmatter)."""
    text = _decode(data, path)
    try:
        has_divider = _layout(text).divider >= 0
    except InvalidInput as exc:
        raise InvalidInput(f"{path}: {exc.message}") from None
    line = render_log_line(entry)
    if parse_log_line(line) is None:
        raise ValueError(f"log entry does not render to a log line: {line!r}")
    # The file's style is its first line ending; a lone trailing "\r" is completed to "\r\n" (and then is that ending).
    first_nl = data.find(b"\n")
    crlf = data[first_nl - 1 : first_nl] == b"\r" if first_nl > 0 else data.endswith(b"\r")
    nl = "\r\n" if crlf else "\n"
    add = "" if not data or data.endswith(b"\n") else "\n" if data.endswith(b"\r") else nl
    if not has_divider:
        add += nl + "---" + nl + nl
    return bytes(data) + (add + line + nl).encode("utf-8")


# --------------------------------------------------------------------------- frontmatter

_HANDLER: Any = None


def _handler() -> Any:
    """The frontmatter handler, built (and python-frontmatter and yaml imported) on first use."""
    global _HANDLER
    if _HANDLER is None:
        import yaml
        from frontmatter.default_handlers import YAMLHandler

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

        class _Handler(YAMLHandler):
            """Split exactly where `_layout` did (given only the frontmatter block); load with the fast safe loader."""

            def split(self, text: str) -> tuple[str, str]:
                return "\n".join(text.split("\n")[1:-1]), ""

            def load(self, fm: str, **kwargs: object) -> dict[str, Any]:
                data = yaml.load(fm, Loader=loader)  # noqa: S506 (loader is CSafeLoader or SafeLoader: no objects)
                if data is None:
                    return {}
                if not isinstance(data, dict):
                    raise InvalidInput(f"invalid frontmatter: expected key: value lines, got a {type(data).__name__}")
                return data

        _HANDLER = _Handler()
    return _HANDLER


def _yaml_problem(exc: Exception) -> str:
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None)
    if not problem:
        return " ".join(str(exc).split()) or type(exc).__name__
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None:  # the frontmatter's first line is line 2 of the file
        return f"{problem} (line {mark.line + 2}, column {mark.column + 1})"
    return str(problem)


def _expands_too_much(value: object, budget: int) -> bool:
    """Does `value` hold more than `budget` nodes and characters, counted as printed? YAML
    aliases can make a few bytes expand to gigabytes (or to a cycle, which never ends)."""
    stack = [value]
    while stack:
        item = stack.pop()
        budget -= 1 + (len(item) if isinstance(item, str) else 0)
        if budget < 0:
            return True
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set):
            stack.extend(item)
    return False


def _load_meta(block: str, path: str) -> dict[str, Any]:
    import frontmatter

    handler = _handler()
    try:
        meta: dict[str, Any]
        meta, _ = frontmatter.parse(block, handler=handler)
    except InvalidInput as exc:
        raise InvalidInput(f"{path}: {exc.message}") from None
    except Exception as exc:  # yaml errors, bad dates (ValueError), absurd nesting (RecursionError)
        raise InvalidInput(f"{path}: invalid frontmatter: {_yaml_problem(exc)}") from None
    if _expands_too_much(meta, limits.YAML_EXPANSION * len(block) + 1024):
        raise InvalidInput(f"{path}: invalid frontmatter: it expands far beyond its size (YAML aliases)")
    return meta


# --------------------------------------------------------------------------- tasks


@dataclass(frozen=True)
class Defaults:
    priority: int = 999
    timeout: timedelta = timedelta(days=7)
    timeout_text: str = "7d"
    pile_timeouts: tuple[tuple[str, str], ...] = ()  # the project's `timeout.<pile>` lines, validated


@dataclass(frozen=True)
class Budget:
    """How long a task may stay in one in-flight pile: `limit` None means no limit (`none`)."""

    limit: timedelta | None
    text: str
    default: bool = False  # from the project or the house default, not the task's own frontmatter

    def __str__(self) -> str:
        return f"{self.text}{' (default)' if self.default else ''}"

    @property
    def seconds(self) -> int | None:
        return None if self.limit is None else int(self.limit.total_seconds())


@dataclass
class Task:
    slug: str
    path: str
    data: bytes
    meta: dict[str, Any]
    priority: int
    timeout: timedelta
    timeout_text: str
    timeout_is_default: bool
    dependencies: dict[str, str]
    log: list[LogEntry]
    has_log_divider: bool
    title: str | None
    pile_timeouts: dict[str, str] = field(default_factory=dict)  # frontmatter `timeout.<pile>`, validated
    defaults: Defaults = field(default_factory=Defaults)
    unreadable: list[str] = field(default_factory=list)  # log lines that are no entry (`_layout`), raw, in order

    @property
    def generation(self) -> int:
        return generation(self.log)

    def clock_entry(self) -> LogEntry | None:
        """The line that started the timeout clock: the latest `advanced` or `rescued`."""
        for entry in reversed(self.log):
            if entry.kind in ("advanced", "rescued"):
                return entry
        return None

    def budget_in(self, pile: str) -> Budget:
        """The budget rule (SPEC §2): the task's `timeout.<pile>`, the project's `timeout.<pile>`,
        the task's `timeout`, the project's `timeout`, 7d."""
        if pile in self.pile_timeouts:
            text = self.pile_timeouts[pile]
            return Budget(parse_budget(text), text, False)
        project = dict(self.defaults.pile_timeouts)
        if pile in project:
            return Budget(parse_budget(project[pile]), project[pile], True)
        return Budget(self.timeout, self.timeout_text, self.timeout_is_default)

    def claim_of_record(self) -> LogEntry | None:
        for entry in reversed(self.log):
            if entry.kind == "rescued" or (entry.kind == "advanced" and entry.get("claimer")):
                return entry
        return None

    def clock_start(self) -> datetime | None:
        entry = self.clock_entry()
        return None if entry is None else entry.ts

    def last_event(self) -> LogEntry | None:
        return self.log[-1] if self.log else None


def _dependencies(value: object, path: str) -> dict[str, str]:
    def bad(why: str) -> InvalidInput:
        return InvalidInput(f"{path}: invalid dependencies: {why}")

    def slug(key: object) -> str:
        if not isinstance(key, str):
            raise bad(f"{_show(key)} is not a slug (quote it)")
        try:
            return validate_slug(key)
        except InvalidInput as exc:
            raise bad(exc.message) from None

    if value is None:
        return {}
    if isinstance(value, list):
        return {slug(item): "" for item in value}
    if isinstance(value, dict):
        deps = {}
        for key, reason in value.items():
            if reason is not None and not isinstance(reason, str):
                raise bad(f"the reason for '{_show(key)}' must be text, got {_show(reason)}")
            deps[slug(key)] = reason or ""
        return deps
    raise bad(f"{_show(value)} (expected a map slug: reason, or a list of slugs)")


def parse_task(slug: str, path: str, data: bytes, defaults: Defaults = Defaults()) -> Task:
    path = str(path)
    try:
        validate_slug(slug)
    except InvalidInput as exc:
        raise InvalidInput(f"{path}: {exc.message}") from None
    text = _decode(data, path)
    try:
        layout = _layout(text)
    except InvalidInput as exc:
        raise InvalidInput(f"{path}: {exc.message}") from None
    lines, fm_close = layout.lines, layout.fm_close

    meta = _load_meta("\n".join(lines[: fm_close + 1]), path) if fm_close > 0 else {}

    priority = meta.get("priority")
    if priority is None:
        priority = defaults.priority
    elif type(priority) is not int or priority < 1:
        raise InvalidInput(f"{path}: invalid priority: {_quoted(priority)} (expected a whole number >= 1)")
    elif priority > limits.PRIORITY_MAX:
        raise InvalidInput(f"{path}: invalid priority: {priority} (expected a whole number <= {limits.PRIORITY_MAX})")

    raw_timeout = meta.get("timeout")
    if raw_timeout is None:
        timeout, timeout_text = defaults.timeout, defaults.timeout_text
    else:
        try:
            if not isinstance(raw_timeout, str):
                raise InvalidInput("not text")
            timeout, timeout_text = parse_duration(raw_timeout), raw_timeout.strip()
        except InvalidInput:
            raise InvalidInput(f"{path}: invalid timeout: {_quoted(raw_timeout)} ({_DURATION_HINT})") from None

    pile_timeouts: dict[str, str] = {}
    for key, value in meta.items():
        if isinstance(key, str) and key.startswith("timeout."):
            try:
                if not isinstance(value, str):
                    raise InvalidInput("not text")
                parse_budget(value)
            except InvalidInput:
                raise InvalidInput(f"{path}: invalid {key}: {_quoted(value)} ({_DURATION_HINT}, or none)") from None
            pile_timeouts[key.removeprefix("timeout.")] = value.strip()

    end = layout.divider if layout.divider >= 0 else len(lines)
    title = None
    for line in lines[fm_close + 1 : end]:
        if line.startswith("# ") and line[2:].strip():
            title = line[2:].strip()
            break

    return Task(
        slug=slug,
        path=path,
        data=data,
        meta=meta,
        priority=priority,
        timeout=timeout,
        timeout_text=timeout_text,
        timeout_is_default=raw_timeout is None,
        dependencies=_dependencies(meta.get("dependencies"), path),
        log=layout.log,
        has_log_divider=layout.divider >= 0,
        title=title,
        pile_timeouts=pile_timeouts,
        defaults=defaults,
        unreadable=layout.unreadable,
    )


# --------------------------------------------------------------------------- frontmatter writing
# One writer for every frontmatter value the tool writes (`add`, `retry --set`): each value is
# written as what it means, a string as a string whatever YAML would make of it unquoted.

FieldValue = int | str | dict[str, str]
SET_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*|timeout\.[a-z][a-z0-9-]*")  # keys `retry --set` writes
_PLAIN_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._/-]*")  # may be plain: no `:`, `#`, quote, flow or escape


def _yaml_char(c: str) -> str:
    """One character inside a double-quoted YAML scalar: as is when YAML may hold it, else escaped."""
    code = ord(c)
    if c in '"\\':
        return "\\" + c
    if c == "\t" or 0x20 <= code <= 0x7E or code == 0x85 or 0xA0 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD:
        return c
    if code >= 0x10000:
        return c
    if 0xD800 <= code <= 0xDFFF:
        raise InvalidInput("not valid text (a lone surrogate cannot be written as UTF-8)")
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def yaml_scalar(value: str) -> str:
    """`value` as a YAML scalar that the reader loads back as exactly this string: plain when it
    does (`2h`, `none`, `needs the new column`), else double-quoted (`"yes"`, `"123"`, `"a: b"`).

    >>> [yaml_scalar(v) for v in ("2h", "yes", "123", "a: b", "")]
    ['2h', '"yes"', '"123"', '"a: b"', '""']
    """
    if _PLAIN_RE.fullmatch(value) and value == value.strip():
        try:
            if _handler().load(f"k: {value}") == {"k": value}:
                return value
        except Exception:  # noqa: S110 (anything the loader refuses is quoted below: the refusal is the answer)
            pass
    return '"' + "".join(_yaml_char(c) for c in value) + '"'


def field_lines(key: str, value: FieldValue) -> list[str]:
    """The frontmatter lines of one top-level field: `priority: 2`, `timeout.doing: none`, or a
    block map of dependencies (`dependencies:` then `  slug: "reason"`)."""
    if isinstance(value, dict):
        if not value:
            return [f"{key}: {{}}"]
        return [f"{key}:"] + [f"  {yaml_scalar(name)}: {yaml_scalar(reason)}" for name, reason in value.items()]
    if isinstance(value, int):
        return [f"{key}: {value}"]
    return [f"{key}: {yaml_scalar(value)}"]


def frontmatter_block(fields: list[tuple[str, FieldValue]]) -> str:
    """A frontmatter block (`---`, the fields, `---`) for a new task file; "" without fields."""
    if not fields:
        return ""
    return "---\n" + "".join(line + "\n" for key, value in fields for line in field_lines(key, value)) + "---\n"


def typed_field(key: str, text: str) -> FieldValue:
    """A field's value from its text (`retry --set KEY=TEXT`): `priority` a whole number (else the
    text, which the parser then refuses naming the field), `dependencies` `SLUG[:REASON]` items
    separated by commas (`none`: no dependencies), anything else (`timeout`, `timeout.<pile>`,
    unknown keys) the text itself, a string."""
    text = text.strip()
    if key == "priority" and text.isascii() and text.isdigit():
        return int(text)
    if key == "dependencies":
        deps: dict[str, str] = {}
        for item in [] if text == "none" else text.split(","):
            name, _, reason = item.partition(":")
            try:
                deps[validate_slug(name.strip())] = " ".join(reason.split())
            except InvalidInput as exc:
                raise InvalidInput(f"invalid dependencies {text!r}: {exc.message}") from None
        return deps
    return text


def set_frontmatter_field(data: bytes, key: str, value: FieldValue, path: str = "task file") -> bytes:
    """`data` with one top-level frontmatter field set to `value` (`field_lines`); no other byte changes.

    The frontmatter is found by the same grammar every reader uses (`_layout`), so a block
    closed by `----` or `-----` is edited in place, never mistaken for the body. Without
    frontmatter, a block holding just this field is put in front of the file.
    """
    text = _decode(data, path)
    try:
        layout = _layout(text)
    except InvalidInput as exc:
        raise InvalidInput(f"{path}: {exc.message}") from None
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    first = layout.lines[0]
    nl = "\r\n" if first.endswith("\r") else "\n"
    line = "".join(part + nl for part in field_lines(key, value))
    lines = text[len(bom) :].splitlines(keepends=True)
    end = layout.fm_close
    if end < 0:
        return (bom + "---" + nl + line + "---" + nl + nl + "".join(lines)).encode("utf-8")
    key_re = re.compile(rf"{re.escape(key)}\s*:")
    for i in range(1, end):
        if key_re.match(lines[i]):
            j = i + 1  # the value's continuation lines (indented, or a block list) go with it
            while j < end and lines[j].startswith((" ", "\t", "- ", "-\t")):
                j += 1
            lines[i:j] = [line]
            return (bom + "".join(lines)).encode("utf-8")
    lines.insert(end, line)
    return (bom + "".join(lines)).encode("utf-8")


def _quoted(value: object) -> str:
    """'high' for text, 2.5 / True / [1, 2] for anything else."""
    return f"'{_show(value)}'" if isinstance(value, str) else _show(value)


def frontmatter_end(data: bytes) -> int:
    """The byte offset just past the frontmatter's closing line (0 without frontmatter)."""
    text = _decode(data, "task file")
    layout = _layout(text)
    if layout.fm_close < 0:
        return 0
    base = 1 if text.startswith("\ufeff") else 0
    chars = base + sum(len(line) + 1 for line in layout.lines[: layout.fm_close + 1])
    return len(text[:chars].encode("utf-8"))
