"""A task file's summary (what auto-pick, `list`, `status` and `ready` need: priority,
dependencies, title, or why the file is invalid), read without YAML when the file is in the
common form; `cache` keeps what this reads.

* the common frontmatter (`key: value` lines, a `dependencies:` map of slugs to quoted or
  plain reasons) is read here without YAML (`quick`), since YAML (even libyaml) costs ~10x
  the rest of a file's parse; anything outside that narrow form goes to the full parser
  (`task.parse_task`), and `tests/test_cache.py` and `tests/test_header_differential.py` check
  both agree.
* backlogs repeat their headers (a priority, a label, the same dependencies): a call that reads
  every file reads each distinct frontmatter once (`_HEADS`).
"""

import functools
import os
import re
import stat
from codecs import BOM_UTF8 as BOM
from collections.abc import Collection

from . import limits
from .logline import is_divider
from .task import SLUG_PATTERN, SLUG_RE, is_slug, quick_meta
from .typed import NamedTuple, pattern


class Summary(NamedTuple):
    """What auto-pick, `list` and `status` need from a task file."""

    priority: int
    dependencies: tuple[str, ...]
    error: str | None


Titles = dict[str, str | None]  # slug → title (None: the task has none)


class Parsed(NamedTuple):
    """A file's summary and its title (`parse_task`'s: None when it has none, or is invalid)."""

    summary: Summary
    title: str | None


_SIMPLE = r"---\npriority: ([1-9][0-9]{0,9})\n---[ \t]*(?:\n|\Z)"  # all the general reader would read
# `_SIMPLE` and, right after it (past one empty line at most), the title's line: what `parsed` reads
# of most files at once (`title_after`'s common form)
_SIMPLE_TITLED = r"---\npriority: ([1-9][0-9]{0,9})\n---[ \t]*\n\n?# ([^\n]*)"
_FENCE_LINE = r"^-{3,}[ \t]*$"  # (multi-line)
_PLAIN: dict[str, Summary] = {}  # a priority as written → its summary (a few, shared by the files; bounded)


@functools.cache
def _forms() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """`_SIMPLE_TITLED`, `_SIMPLE` and `_FENCE_LINE` compiled, when a call first reads a header: not
    by every call that imports this module (most read no task's header: ~0.3 ms of a `progress`)."""
    return re.compile(_SIMPLE_TITLED), re.compile(_SIMPLE), re.compile(_FENCE_LINE, re.MULTILINE)


def quick(slug: str, data: bytes, default_priority: int) -> Summary | None:
    """The summary of a valid task file in the common form, without YAML (`task.quick_meta`);
    None when the file is not in that form (or is invalid): the full parser then decides, errors
    included."""
    found = _quick(slug, data, default_priority)
    return found[0] if found is not None else None


def parsed(slug: str, data: bytes, default_priority: int) -> Parsed | None:
    """`quick`, and the title (`title_after`); None where either cannot be sure. The commonest
    file (a priority, then its title) is read by one match (`_SIMPLE_TITLED`), its summary shared."""
    text = _text(slug, data)
    if text is None:
        return None
    simple = _forms()[0].match(text)
    if simple is not None and (title := simple[2].strip()):
        summary = _PLAIN.get(simple[1])
        if summary is None and int(simple[1]) <= limits.PRIORITY_MAX:
            summary = Summary(int(simple[1]), (), None)
            if len(_PLAIN) < HEADS_KEPT:
                _PLAIN[simple[1]] = summary
        if summary is not None:
            return Parsed(summary, title)
    found = _quick_text(text, default_priority)
    if found is None:
        return None
    try:
        return Parsed(found[0], title_after(found[1], found[2]))
    except LookupError:
        return None


def _quick(slug: str, data: bytes, default_priority: int) -> tuple[Summary, str, int] | None:
    """`quick`'s summary, the file's text and where its body starts (after the frontmatter)."""
    text = _text(slug, data)
    return None if text is None else _quick_text(text, default_priority)


def _text(slug: str, data: bytes) -> str | None:
    """A file's text when its slug and bytes may be read the quick way; None: the full parser."""
    if not SLUG_RE.fullmatch(slug) or ".." in slug or b"\x00" in data or b"\r" in data or data.startswith(BOM):
        return None  # (a BOM: the full parser reads past it)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _quick_text(text: str, default_priority: int) -> tuple[Summary, str, int] | None:
    """`_quick` of a text `_text` let through."""
    _titled, common, fence_line = _forms()
    simple = common.match(text)  # the commonest of the common forms, in one match
    if simple is not None and int(simple[1]) <= limits.PRIORITY_MAX:
        return Summary(int(simple[1]), (), None), text, simple.end()
    first, _nl, rest = text.partition("\n")
    if first.rstrip(" \t") != "---":
        return Summary(default_priority, (), None), text, 0  # no frontmatter: no field, no error (`task._layout`)
    fence = fence_line.search(rest)  # the first line of three or more dashes (the body is not split)
    if fence is None:
        return None  # no closing line: the full parser says so
    block = rest[: fence.start()]
    try:
        head = _HEADS[block]
    except KeyError:
        head = _head(block)
        if len(_HEADS) < HEADS_KEPT:
            _HEADS[block] = head
    if head is None:
        return None
    priority, deps = head
    summary = Summary(default_priority if priority is None else priority, deps, None)
    return summary, text, len(first) + 1 + fence.end() + 1  # (past the closing line's newline, or the end)


# A frontmatter's text (between its fences) → what `_head` made of it. Backlogs repeat their
# headers (a priority, a label, the same dependencies), so a call that reads every file parses
# each distinct header once; bounded, for a long-lived process (the MCP server).
_HEADS: dict[str, tuple[int | None, tuple[str, ...]] | None] = {}
HEADS_KEPT = 20_000


def _head(block: str) -> tuple[int | None, tuple[str, ...]] | None:
    """A frontmatter's priority (None: not given) and dependencies, for the common form only
    (`task.quick_meta`), else None: the full parser decides."""
    meta = quick_meta(block.split("\n"))
    if meta is None or any(key.startswith("timeout") for key in meta):
        return None  # not the common form, or a timeout (the full parser checks its value)
    priority = meta.pop("priority", None)
    deps = meta.pop("dependencies", None) or {}
    if not isinstance(deps, dict):
        return None  # `dependencies: text`: the full parser says what is wrong
    if priority is not None and (type(priority) is not int or priority > limits.PRIORITY_MAX):
        return None  # the full parser says what is wrong
    if any(value is not None and not isinstance(value, str) for value in meta.values()):
        return None  # a number where the task format may want a text: the full parser decides
    return priority, tuple(deps)


# -- reading a task file ---------------------------------------------------------------------
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK  # (a FIFO put in a pile does not block the call)


def read(path: str) -> bytes | None:
    """The bytes of the regular file `path` in one `read` (not following a symlink), or None
    when it is anything else, too large, or gone: `storage.read_task_bytes` then says why (or
    raises FileNotFoundError). Avoids building a `Path` and a second `read` per file."""
    try:
        got = read_stamped(path)
    except FileNotFoundError:
        return None
    return None if got is None else got[1]


def read_stamped(name: str, dir_fd: int | None = None) -> tuple[os.stat_result, bytes] | None:
    """`read`'s bytes with the open file's stat (its stamp, taken before the bytes are read), `name`
    relative to `dir_fd` when given. None: not a regular file of a sane size, or it grew while read
    (the careful reader says what it is); FileNotFoundError: gone."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limits.TASK_BYTES:
            return None
        data = os.read(fd, info.st_size + 1)
    finally:
        os.close(fd)
    return (info, data) if len(data) <= info.st_size else None


_TITLE_OR_DIVIDER = pattern(r"(?m)^(?:# |---[ \t\r]*$)")  # a title's start, or `is_divider` (compiled when first used)


def title_after(text: str, start: int) -> str | None:
    """`parse_task`'s title, read without parsing the task: in `text` from `start` (the line after
    the frontmatter) on, the first line that starts with `# ` and has text after it, stripped.
    LookupError when a divider comes first (a log starts only at a divider, so nothing before the
    first one is log; after one, the full parser decides)."""
    at = start + text.startswith("\n", start)  # (an empty line is neither a title nor a divider)
    if text.startswith("# ", at):  # the common form: the title right after the frontmatter
        end = text.find("\n", at)
        if title := text[at + 2 : end if end >= 0 else len(text)].strip():
            return title
    at = start
    while (found := _TITLE_OR_DIVIDER.search(text, at)) is not None:
        end = text.find("\n", found.start())
        line = text[found.start() : end if end >= 0 else len(text)]
        if is_divider(line):
            raise LookupError("a divider before the title")
        if line[2:].strip():
            return line[2:].strip()
        if end < 0:
            break
        at = end + 1
    return None


def not_slugs(names: Collection[str]) -> set[str]:
    """The names of a listing that are not slugs (`task.is_slug`): one match over their joined
    text (~12 ms for 100,000 names), a name at a time only when that fails."""
    text = "\n".join(names)
    whole = re.fullmatch(f"(?:{SLUG_PATTERN}\n)*", f"{text}\n") and text.count("\n") == len(names) - 1
    if not names or (whole and ".." not in text):
        return set()
    return {name for name in names if not is_slug(name)}
