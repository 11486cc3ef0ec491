"""Writing a task file's frontmatter: new blocks (`add`), one field set in place (`retry --set`,
`edit --set`), and the title line (`edit --set title=…`).

Named so it does not shadow python-frontmatter (`frontmatter`), which the tool only reads with.
"""

from __future__ import annotations

import re

from . import limits
from .errors import InvalidInput
from .logline import FileLayout, decode, file_layout
from .task import validate_slug, yaml_handler

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
            if yaml_handler().load(f"k: {value}") == {"k": value}:
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
    if key == "priority" and limits.number(text, limits.NUMBER_MAX) is not None:
        return int(text)  # (bounded: `parse_task` then checks it against PRIORITY_MAX)
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

    The frontmatter is found by the same grammar every reader uses (`file_layout`), so a block
    closed by `----` or `-----` is edited in place, never mistaken for the body; the file is cut
    into lines where that grammar cuts it (at `\n` only: a form feed or U+2028 in a comment is no
    line break). Without frontmatter, a block holding just this field is put in front of the file.
    """
    layout, bom, lines = _opened(data, path)
    cr = "\r" if layout.lines[0].endswith("\r") else ""  # a CRLF file gets CRLF lines
    new = [part + cr for part in field_lines(key, value)]
    end = layout.fm_close
    if end < 0:
        return (bom + "\n".join(["---" + cr, *new, "---" + cr, cr, *lines])).encode("utf-8")
    key_re = re.compile(rf"{re.escape(key)}\s*:")
    for i in range(1, end):
        if key_re.match(lines[i]):
            j = i + 1  # the value's continuation lines (indented, or a block list) go with it
            while j < end and lines[j].startswith((" ", "\t", "- ", "-\t")):
                j += 1
            lines[i:j] = new
            return (bom + "\n".join(lines)).encode("utf-8")
    lines[end:end] = new
    return (bom + "\n".join(lines)).encode("utf-8")


def _opened(data: bytes, path: str) -> tuple[FileLayout, str, list[str]]:
    """A task file as the editors here cut it: its layout (`file_layout`), its byte-order mark, and
    its lines as that grammar numbers them (at `\n` only, each line's `\r` kept)."""
    text = decode(data, path)
    try:
        layout = file_layout(text)
    except InvalidInput as exc:
        raise InvalidInput(f"{path}: {exc.message}") from None
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    return layout, bom, text[len(bom) :].split("\n")


def set_title(data: bytes, title: str, path: str = "task file") -> bytes:
    """`data` with its title set to `title` (`edit --set title=…`); no other byte changes.

    The title is the description's first `# ` heading line, as `task.parse_task` finds it (after
    the frontmatter, before the log): only the text after `# ` is replaced, the line's ending
    (CRLF or LF) kept. A task without one gets `# <title>` and a blank line where its description
    starts (its first non-blank line after the frontmatter, or the log's divider)."""
    layout, bom, lines = _opened(data, path)
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
