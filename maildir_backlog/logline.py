"""The log of a task file (SPEC §2): the line grammar (lenient reading, strict writing), where
the log starts (the layout and fence walk), reading it and appending to it byte-exactly; the
edits in place (a frontmatter field's lines, the title line) that keep every other byte.

Everything here is pure: bytes in, values (or bytes) out. Every bad input raises `InvalidInput`;
nothing from the codec or `datetime` escapes the public functions.
"""

import bisect
import re
from datetime import datetime

from . import limits
from .clock import TS_PATTERN, as_utc, format_ts, now_utc, parse_ts, show
from .errors import InvalidInput
from .typed import NamedTuple, pattern

# --------------------------------------------------------------------------- log lines

LOG_KINDS = ("advanced", "progress", "cancelled", "failed", "rescued", "retried", "released")
TEXT_REQUIRED = {"progress", "cancelled", "failed", "retried"}
TEXT_IF_GIVEN = {"released"}  # the reason is optional; one that is given must hold some text

_KEY_RE = pattern(r"[A-Za-z][A-Za-z0-9_-]*")  # (compiled on first use: not every call writes a field)
_FIELD_RE = pattern(r"([A-Za-z][A-Za-z0-9_-]*)=(\S*)")
_LINE_RE = pattern(r"- +(" + TS_PATTERN + r") +([a-z]+)(.*)")
_CONTROL_RE = pattern(r"[\x00-\x1f\x7f]")


class LogEntry(NamedTuple):
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
        raise InvalidInput(f"not valid text (cannot be written as UTF-8): '{show(value)}'") from None
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
    if not prose and text is not None and kind in TEXT_IF_GIVEN:
        raise InvalidInput(f"empty reason: a {kind} line's reason, when given, needs some text (or leave it out)")
    return LogEntry(as_utc(now) if now is not None else now_utc(), kind, tuple(pairs), prose or None)


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

FM_CLOSE_RE = pattern(r"-{3,}")


class FileLayout(NamedTuple):
    lines: list[str]  # text (after any BOM) split on "\n"
    fm_close: int  # index of the frontmatter's closing line, -1 without frontmatter
    divider: int  # index of the log's first divider line, -1 without a log
    log_start: int  # offset in text where the log begins (after that divider), len(text) without a log
    log: list[LogEntry]
    unreadable: list[str]  # raw lines of the log that are not entries


def is_divider(line: str) -> bool:
    return line.rstrip(" \t\r") == "---"


_FENCE_RE = pattern(r"[ \t]*(`{3,}|~{3,})(.*)")  # (compiled on first use: few logs hold a fence)


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
    marks = _fence_marks(lines, start)
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


def _fence_marks(lines: list[str], start: int) -> list[tuple[str, int, bool] | None]:
    """Each fence line's (character, length, whether it may close a fence); None for other lines."""
    marks: list[tuple[str, int, bool] | None] = [None] * len(lines)
    for k in range(start, len(lines)):
        if not lines[k].lstrip(" \t").startswith(("```", "~~~")):
            continue
        m = _FENCE_RE.fullmatch(lines[k].rstrip("\r"))
        if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            marks[k] = (m.group(1)[0], len(m.group(1)), not m.group(2).strip())
    return marks


def _frontmatter_close(lines: list[str]) -> int:
    """The index of the frontmatter's closing line, -1 without frontmatter."""
    if lines[0].rstrip(" \t\r") != "---":
        return -1
    for j in range(1, len(lines)):
        if FM_CLOSE_RE.fullmatch(lines[j].rstrip(" \t\r")):
            return j
    # Refused rather than read as "no frontmatter": appending a divider would close it.
    raise InvalidInput("invalid frontmatter: no closing '---' line")


def file_layout(text: str) -> FileLayout:
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
    fm_close = _frontmatter_close(lines)
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
        if is_divider(line):
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
            found[note] = prior._replace(text=f"{prior.text} {joined}" if prior.text else joined)
        else:
            unreadable.append(line.removesuffix("\r"))
            note = None
    if divider < 0:
        return FileLayout(lines, fm_close, -1, len(text), [], [])
    log_start = base + sum(len(ln) + 1 for ln in lines[: divider + 1])
    return FileLayout(lines, fm_close, divider, min(log_start, len(text)), found, unreadable)


def split_log(text: str) -> tuple[int, bool]:
    layout = file_layout(text)
    return layout.log_start, layout.divider >= 0


def decode(data: bytes, path: str) -> str:
    if b"\x00" in data:
        raise InvalidInput(f"{path}: binary file, not a task")
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{path}: not valid UTF-8 text") from None


def read_log(data: bytes, path: str = "task file") -> list[LogEntry]:
    """Only the log of a task file (no frontmatter parsing: works on a task whose fields are invalid)."""
    try:
        return file_layout(decode(data, path)).log
    except InvalidInput as exc:
        raise InvalidInput(f"{path}: {exc.message}") from None


def generation(log: list[LogEntry]) -> int:
    """How often the task was retried: each retry starts a new generation (SPEC §7.10)."""
    return sum(1 for entry in log if entry.kind == "retried")


def later(a: bytes, b: bytes) -> bool:
    """Is the task copy `a` of a later generation than the copy `b` (retried since)? The one rule for
    two copies of a task (docs/design.md, *Two copies of one task*); InvalidInput when one cannot be read."""
    return generation(read_log(b)) < generation(read_log(a))


def claim_of_record(log: list[LogEntry]) -> LogEntry | None:
    """The claim of record in a task's log: its latest `rescued`, or `advanced` with a claimer."""
    claims = (e for e in reversed(log) if e.kind == "rescued" or (e.kind == "advanced" and e.get("claimer")))
    return next(claims, None)


def leaves_flight(entry: LogEntry) -> bool:
    """Does `entry` take a task on toward leaving flight (a hop, completion, cancel, failure,
    the janitor's timeout) rather than add to it (a claim, progress, a rescue, a retry)?"""
    return entry.kind in ("cancelled", "failed") or (entry.kind == "advanced" and entry.get("claimer") is None)


def append_line(data: bytes, entry: LogEntry, path: str = "task file") -> bytes:
    """`data` plus one log line (and the divider first, when the file has none). Existing bytes are kept as they are.

    The one append path, so the size limit holds on write as on read (SPEC §7.12): an append
    that would take the file past `limits.TASK_BYTES` is refused (InvalidInput, exit 2), unless
    the line takes the task on toward leaving flight (`leaves_flight`): a task past the limit
    can always still be advanced, cancelled, failed and timed out, its log kept whole.

    `path` names the file in errors (a binary file, an unclosed frontmatter)."""
    text = decode(data, path)
    try:
        has_divider = file_layout(text).divider >= 0
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
    new = bytes(data) + (add + line + nl).encode("utf-8")
    if len(new) > limits.TASK_BYTES and not leaves_flight(entry):
        raise InvalidInput(
            f"{path}: a {entry.kind} line would make the task {limits.too_large(len(new))}: nothing written"
            " (the task can still be advanced, cancelled or failed)"
        )
    return new


# --------------------------------------------------------------------------- edits in place
# The editors cut a file where `file_layout` cuts it (at `\n` only: a form feed or U+2028 in a
# value is no line break) and change only the lines they name; every other byte stays.


def opened(data: bytes, path: str) -> tuple[FileLayout, str, list[str]]:
    """A task file as the editors cut it: its layout, its byte-order mark, and its lines as that
    grammar numbers them (each line's `\r` kept)."""
    text = decode(data, path)
    try:
        layout = file_layout(text)
    except InvalidInput as exc:
        raise InvalidInput(f"{path}: {exc.message}") from None
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    return layout, bom, text[len(bom) :].split("\n")


def replace_field(data: bytes, key: str, new: list[str], path: str = "task file") -> bytes:
    """`data` with the lines of the top-level frontmatter field `key` (its line and its
    continuation lines: indented, or a block list) replaced by `new` (without line endings; a
    CRLF file gets CRLF), or `new` added at the block's end; without frontmatter, a block holding
    just `new` is put in front of the file. No other byte changes."""
    layout, bom, lines = opened(data, path)
    cr = "\r" if layout.lines[0].endswith("\r") else ""
    new = [part + cr for part in new]
    end = layout.fm_close
    if end < 0:
        return (bom + "\n".join(["---" + cr, *new, "---" + cr, cr, *lines])).encode("utf-8")
    name = re.escape(key)
    key_re = re.compile(rf"(?:{name}|'{name}'|\"{name}\")\s*:")  # as written plain or quoted
    for i in range(1, end):
        if key_re.match(lines[i]):
            j = i + 1
            while j < end and lines[j].startswith((" ", "\t", "- ", "-\t")):
                j += 1
            lines[i:j] = new
            return (bom + "\n".join(lines)).encode("utf-8")
    lines[end:end] = new
    return (bom + "\n".join(lines)).encode("utf-8")


def set_title(data: bytes, title: str, path: str = "task file") -> bytes:
    """`data` with its title set to `title` (`edit --set title=…`); no other byte changes.

    The title is the description's first `# ` heading line, as `task.parse_task` finds it (after
    the frontmatter, before the log): only the text after `# ` is replaced, the line's ending
    kept. A task without one gets `# <title>` and a blank line where its description starts (its
    first non-blank line after the frontmatter, or the log's divider)."""
    layout, bom, lines = opened(data, path)
    end = layout.divider if layout.divider >= 0 else len(lines)
    for i in range(layout.fm_close + 1, end):
        if lines[i].startswith("# ") and lines[i][2:].strip():
            lines[i] = "# " + title + ("\r" if lines[i].endswith("\r") else "")
            return (bom + "\n".join(lines)).encode("utf-8")
    cr = "\r" if lines[0].endswith("\r") else ""
    blank = layout.divider if layout.divider >= 0 else layout.fm_close + 1  # no description at all
    start = next((i for i in range(layout.fm_close + 1, end) if lines[i].strip()), blank)
    lines[start:start] = ["# " + title + cr, cr]
    return (bom + "\n".join(lines)).encode("utf-8")


def frontmatter_end(data: bytes) -> int:
    """The byte offset just past the frontmatter's closing line (0 without frontmatter)."""
    text = decode(data, "task file")
    layout = file_layout(text)
    if layout.fm_close < 0:
        return 0
    base = 1 if text.startswith("\ufeff") else 0
    chars = base + sum(len(line) + 1 for line in layout.lines[: layout.fm_close + 1])
    return len(text[:chars].encode("utf-8"))
