"""The configuration files of agent harnesses, edited in place (`setup --agent`, docs/agents.md).

Pure bytes in, bytes out, every other byte of a file kept where the format lets us:
* JSON (`.mcp.json`, `.claude/settings.json`, `.cursor/mcp.json`): parsed and written back in the
  file's own indentation, key order kept; rewritten only when something of ours changes.
* TOML (`.codex/config.toml`): Python reads TOML but writes none, so one table is edited as text:
  its header's section is replaced (or appended, or cut), then the document is parsed again and
  must equal the old one but for that table; anything else (the table written inline or as
  dotted keys) is refused rather than guessed at.
* A marked section of a markdown file (the root `AGENTS.md`, the Cursor rule): the lines from
  `<!-- backlog:begin -->` to `<!-- backlog:end -->`.
A file that does not parse is refused (InvalidInput, naming it) before anything is written.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .errors import InvalidInput

BEGIN = b"<!-- backlog:begin -->"
END = b"<!-- backlog:end -->"


def newline(data: bytes | None) -> bytes:
    """The file's line ending: CRLF when its first line ends so, else LF."""
    first = (data or b"").find(b"\n")
    return b"\r\n" if first > 0 and data is not None and data[first - 1 : first] == b"\r" else b"\n"


def _appended(data: bytes, block: bytes, nl: bytes) -> bytes:
    """`block` after `data`, one line ending between (a blank line when `data` ends a line), so
    that `_cut_tail` takes exactly that back."""
    return block if not data else data + nl + block


def _cut_tail(before: bytes, nl: bytes) -> bytes:
    """`before` less the one line ending `_appended` put before a block that ended the file."""
    return before[: -len(nl)] if before.endswith(nl) else before


# -- JSON ----------------------------------------------------------------------------------------
def load_json(data: bytes | None, label: str) -> dict[str, Any]:
    """The file's object ({} when it does not exist); anything else refused, naming the file."""
    if data is None or not data.strip():
        return {}
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{label}: not valid JSON ({exc}); fix it or move it aside: nothing was changed") from None
    if not isinstance(doc, dict):
        raise InvalidInput(f"{label}: not a JSON object; fix it or move it aside: nothing was changed")
    return doc


def dump_json(doc: dict[str, Any], like: bytes | None) -> bytes:
    """`doc` as JSON in the indentation of `like` (the file's old bytes; two spaces by default),
    ending with a line ending unless `like` did not."""
    indent: str | int = 2
    text = (like or b"").decode("utf-8", "replace")
    found = re.search(r"\n([ \t]+)\S", text)
    if found:
        indent = found.group(1)
    nl = newline(like)
    out = json.dumps(doc, indent=indent, ensure_ascii=False).replace("\n", nl.decode())
    ends = like is None or not like.strip() or like.rstrip(b" \t").endswith(b"\n")
    return out.encode("utf-8") + (nl if ends else b"")


def table_of(doc: dict[str, Any], key: str, label: str) -> dict[str, Any] | None:
    """`doc[key]` when it is an object (None when absent); another type is refused."""
    value = doc.get(key)
    if value is not None and not isinstance(value, dict):
        raise InvalidInput(f"{label}: `{key}` is not an object; fix it or move it aside: nothing was changed")
    return value


def list_of(doc: dict[str, Any], key: str, label: str) -> list[Any] | None:
    """`doc[key]` when it is an array (None when absent); another type is refused."""
    value = doc.get(key)
    if value is not None and not isinstance(value, list):
        raise InvalidInput(f"{label}: `{key}` is not an array; fix it or move it aside: nothing was changed")
    return value


# -- TOML: one table, edited as text ------------------------------------------------------------
_HEADER = re.compile(rb"^[ \t]*(\[\[?)(.*?)(\]\]?)[ \t]*(?:#.*)?$")
_BARE = re.compile(r"[A-Za-z0-9_-]+")
_KEY_PART = re.compile(r'\s*(?:([A-Za-z0-9_-]+)|"((?:[^"\\]|\\.)*)"|\'([^\']*)\')\s*')


def load_toml(data: bytes | None, label: str) -> dict[str, Any]:
    import tomllib

    if data is None:
        return {}
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{label}: not valid TOML ({exc}); fix it or move it aside: nothing was changed") from None


def _key_path(text: str) -> tuple[str, ...] | None:
    """A header's dotted key (`mcp_servers."backlog"`) as its parts; None when it is not one."""
    parts: list[str] = []
    pos = 0
    while True:
        match = _KEY_PART.match(text, pos)
        if match is None:
            return None
        bare, basic, literal = match.groups()
        parts.append(bare if bare is not None else literal if literal is not None else json.loads(f'"{basic}"'))
        pos = match.end()
        if pos == len(text):
            return tuple(parts)
        if text[pos] != ".":
            return None
        pos += 1


def _sections(lines: list[bytes]) -> list[tuple[int, int, tuple[str, ...] | None]]:
    """Each table section of the document: (its header's line, the line after its last line that
    is neither blank nor a comment, its key path). Lines inside multi-line strings are skipped
    (roughly: the parse afterwards is what vouches for the edit)."""
    starts: list[tuple[int, tuple[str, ...] | None]] = []
    open_quote: bytes | None = None
    for i, line in enumerate(lines):
        body = line.rstrip(b"\r\n")
        if open_quote is None:
            match = _HEADER.match(body)
            if match and len(match.group(1)) == len(match.group(3)):
                starts.append((i, _key_path(match.group(2).decode("utf-8", "replace"))))
                continue
        for quote in (b'"""', b"'''"):
            if (open_quote is None or open_quote == quote) and body.count(quote) % 2:
                open_quote = None if open_quote else quote
    found = []
    for n, (start, path) in enumerate(starts):
        stop = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
        last = start + 1
        for i in range(start + 1, stop):
            text = lines[i].strip()
            if text and not text.startswith(b"#"):
                last = i + 1
        found.append((start, last, path))
    return found


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return {"inf": "inf", "-inf": "-inf", "nan": "nan"}.get(repr(value), repr(value))
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        items = ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items())
        return "{ " + items + " }" if items else "{}"
    return str(value.isoformat())  # a date, time or date-time


def _toml_key(key: str) -> str:
    return key if _BARE.fullmatch(key) else json.dumps(key, ensure_ascii=False)


def render_table(path: tuple[str, ...], table: dict[str, Any], nl: bytes = b"\n") -> bytes:
    """`[a.b]` and one `key = value` line per entry (tables within it inline)."""
    lines = ["[" + ".".join(_toml_key(p) for p in path) + "]"]
    lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in table.items()]
    return "".join(line + nl.decode() for line in lines).encode("utf-8")


def _without(doc: dict[str, Any], path: tuple[str, str]) -> dict[str, Any]:
    """`doc` less the table at `path` (its parent dropped when that leaves it empty)."""
    outer, name = path
    rest = dict(doc)
    parent = rest.get(outer)
    if isinstance(parent, dict):
        parent = {k: v for k, v in parent.items() if k != name}
        if parent:
            rest[outer] = parent
        else:
            del rest[outer]
    return rest


def toml_with_table(data: bytes | None, path: tuple[str, str], table: dict[str, Any] | None, label: str) -> bytes:
    """The document with the table at `path` written as `table` (None: cut out), every other
    byte kept; refused when the result would not be the old document with only that changed."""
    old = data or b""
    before = load_toml(old, label)
    nl = newline(old)
    lines = old.splitlines(keepends=True)
    ours = [(start, stop) for start, stop, key in _sections(lines) if key is not None and key[:2] == path]
    block = render_table(path, table, nl) if table is not None else b""
    if ours:
        first, rest = ours[0], ours[1:]
        cut = {i for start, stop in rest for i in range(start, stop)}
        head = b"".join(lines[: first[0]])
        tail = b"".join(line for i, line in enumerate(lines[first[1] :], first[1]) if i not in cut)
        if table is None and not tail.strip():
            new = _cut_tail(head, nl) + tail
        else:
            middle = block
            if table is not None and not lines[first[1] - 1].endswith(b"\n") and not tail:
                middle = block[: -len(nl)]  # the file ended without a line ending: so it still does
            new = head + middle + tail
    elif table is None:
        new = old  # nothing to cut: fine unless the table is there in another form (checked below)
    else:
        new = _appended(old, block, nl)
    try:
        after = load_toml(new, label)
    except InvalidInput:  # e.g. the table was also written inline: two definitions now
        after = None
    fits = after is not None and _without(after, path) == _without(before, path)
    if after is not None:
        outer = after.get(path[0])
        now = outer.get(path[1]) if isinstance(outer, dict) else None
        fits = fits and now == table
    if not fits:
        raise InvalidInput(
            f"{label}: its [{'.'.join(path)}] table is written in a form setup does not edit (inline, or as"
            " dotted keys): edit it by hand or move it aside: nothing was changed"
        )
    return new


# -- a marked section of a markdown file --------------------------------------------------------
def section_span(data: bytes | None, label: str) -> tuple[int, int] | None:
    """Where the marked section is (from its first marker line to after its last), None when
    absent; markers out of pairs are refused."""
    if not data:
        return None
    begins, ends, offset = [], [], 0
    for line in data.splitlines(keepends=True):
        text = line.strip()
        if text == BEGIN:
            begins.append(offset)
        elif text == END:
            ends.append(offset + len(line))
        offset += len(line)
    if not begins and not ends:
        return None
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise InvalidInput(
            f"{label}: its `{BEGIN.decode()}` / `{END.decode()}` markers are not one pair in order:"
            " fix them by hand: nothing was changed"
        )
    return begins[0], ends[0]


def render_section(body: str, nl: bytes = b"\n") -> bytes:
    """The markers around `body` (lines), in the file's line ending."""
    text = BEGIN + b"\n" + body.rstrip("\n").encode("utf-8") + b"\n" + END + b"\n"
    return text.replace(b"\n", nl)


def with_section(data: bytes | None, body: str, label: str) -> bytes:
    """The file with its marked section holding `body` (replaced in place, or appended)."""
    old = data or b""
    nl = newline(data)
    block = render_section(body, nl)
    span = section_span(old, label)
    if span is None:
        return _appended(old, block, nl)
    return old[: span[0]] + block + old[span[1] :]


def without_section(data: bytes | None, label: str) -> bytes | None:
    """The file less its marked section (None: nothing else was in it)."""
    old = data or b""
    span = section_span(old, label)
    if span is None:
        return data
    head, tail = old[: span[0]], old[span[1] :]
    new = _cut_tail(head, newline(old)) + tail if not tail.strip() else head + tail
    return new if new.strip() else None
