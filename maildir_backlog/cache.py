"""The parse cache: what auto-pick, `list` and `status` need from each task file of a pile
(priority, dependencies, or why the file is invalid), read once and kept by the file's stamp.

Its cost follows what changed, not the size of the backlog (docs/performance.md, *100,000 tasks*):

* one file per pile, `<git dir>/backlog-cache/<pile>.tsv`: a header line, then one line per
  parsed file, `name ino size mtime_ns priority deps error` (tab-separated; `deps` joined by
  commas, `error` as a JSON string or empty). A call appends the lines of the files it had to
  parse, in one `write` (O_APPEND), and writes nothing when nothing changed. Lines of files
  that changed or left are dead weight until the file holds twice as many lines as live
  entries (plus a margin): then it is rewritten whole, atomically (`storage.write_file`), so
  rewriting stays amortised over as many changes as the pile holds tasks.
* a line counts only when it is whole and well formed, and the stamp `(ino, size, mtime_ns)`
  is part of the key: a torn append (a crash mid-write) or a line of another file is never
  taken for a hit, only parsed again. An append starts on a new line when the file does not
  end in one. The cache is advisory: any doubt is a miss.
* one `lstat` per file (its mtime is returned, for auto-pick's order: no second stat).
* the common frontmatter (`key: value` lines, a `dependencies:` map of slugs to quoted or
  plain reasons) is read here without YAML (`quick`), since YAML (even libyaml) costs ~10x
  the rest of a file's parse; anything outside that narrow form goes to the full parser
  (`task.parse_task`), and `tests/test_cache.py` checks both agree.

Nothing else writes these files, and nothing reads them but this module.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from . import limits, storage
from .errors import BacklogError
from .task import SLUG_RE, quick_meta

VERSION = "backlog-cache 1"
TAB = "\t"
SLACK = 256  # dead lines tolerated beyond the live ones before a rewrite


class Summary(NamedTuple):
    """What auto-pick needs from a task file; `mtime_ns` from the same `lstat` as the stamp."""

    priority: int
    dependencies: tuple[str, ...]
    error: str | None
    mtime_ns: int = 0


_FENCE_CLOSE = re.compile(r"-{3,}")


def quick(slug: str, data: bytes, default_priority: int) -> Summary | None:
    """The summary of a valid task file in the common form, without YAML (`task.quick_meta`);
    None when the file is not in that form (or is invalid): the full parser then decides, errors
    included."""
    if not SLUG_RE.fullmatch(slug) or ".." in slug or b"\x00" in data or b"\r" in data:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if text.startswith("\ufeff"):
        return None
    first, _nl, rest = text.partition("\n")
    if first.rstrip(" \t") != "---":
        return Summary(default_priority, (), None)  # no frontmatter: no field, no error (`task._layout`)
    lines: list[str] = []
    for line in rest.split("\n"):
        if _FENCE_CLOSE.fullmatch(line.rstrip(" \t")):
            break
        lines.append(line)
    else:
        return None  # no closing line: the full parser says so
    meta = quick_meta(lines)
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
    return Summary(default_priority if priority is None else priority, tuple(deps), None)


# -- reading a task file ---------------------------------------------------------------------
def read(path: str) -> bytes | None:
    """The bytes of the regular file `path` in one `read` (not following a symlink), or None
    when it is anything else, too large, or gone: `storage.read_task_bytes` then says why (or
    raises FileNotFoundError). Avoids building a `Path` and a second `read` per file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limits.TASK_BYTES:
            return None
        data = os.read(fd, info.st_size + 1)
        return data if len(data) <= info.st_size else None  # grew meanwhile: the careful reader
    finally:
        os.close(fd)


# -- the cache file --------------------------------------------------------------------------
Lines = dict[str, str]  # stamp key → "priority<TAB>deps<TAB>error" as written


def _load(path: Path, header: str) -> tuple[Lines, int, bool]:
    """Stamp key → the rest of its line (priority, deps, error), the number of lines, and whether
    the file ends in a newline. Empty when the file is missing or of another version or
    directory. Read a line at a time: no copy of the whole file is held."""
    found: Lines = {}
    count = 0
    last = "\n"
    try:
        with open(path, encoding="utf-8", errors="surrogateescape", newline="\n") as f:
            if f.readline() != header + "\n":
                return {}, 0, True
            for line in f:
                count += 1
                last = line
                if not line.endswith("\n"):
                    break  # a torn last line
                c = line.rfind("\t")
                b = line.rfind("\t", 0, c)
                a = line.rfind("\t", 0, b)
                if a > 0:
                    found[line[:a]] = line[a + 1 : -1]
    except OSError:
        return {}, 0, True
    return found, count, last.endswith("\n")


def _entry(fields: str, mtime_ns: int) -> Summary | None:
    parts = fields.split(TAB)
    if len(parts) != 3:
        return None
    priority, deps, error = parts
    try:
        value = int(priority)
        err = json.loads(error) if error else None
    except ValueError:
        return None
    if not isinstance(err, str | None):
        return None
    return Summary(value, tuple(deps.split(",")) if deps else (), err, mtime_ns)


def _line(key: str, s: Summary) -> str:
    return f"{key}\t{s.priority}\t{','.join(s.dependencies)}\t{json.dumps(s.error) if s.error is not None else ''}\n"


def summaries(
    path: Path,
    directory: Path,
    entries: Iterable[os.DirEntry[str]],
    parse: Callable[[str, str], Summary],
    legacy: Path | None = None,
) -> dict[str, Summary]:
    """slug → Summary for every `entries` file (one pile's), from the cache at `path` where the
    stamp matches, else `parse(slug, file path)` (which may raise FileNotFoundError: the file left
    since the listing, and is skipped). Appends what was parsed; rewrites the file only when it
    holds too many dead lines. `legacy`: an older cache file, removed when this one is first written."""
    header = f"{VERSION}\t{directory}"
    cached, count, whole = _load(path, header)
    result: dict[str, Summary] = {}
    fresh: list[str] = []
    live: list[str] = []
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        slug = entry.name[:-3]
        key = f"{entry.name}\t{st.st_ino}\t{st.st_size}\t{st.st_mtime_ns}"
        fields = cached.get(key)
        summary = None
        if fields is not None:
            priority, _, deps = fields.partition(TAB)
            if fields.endswith(TAB) and priority.isascii() and priority.isdigit():  # a hit without an error
                deps = deps[:-1]
                summary = Summary(int(priority), tuple(deps.split(",")) if deps else (), None, st.st_mtime_ns)
            else:
                summary = _entry(fields, st.st_mtime_ns)
        if summary is None:
            try:
                summary = parse(slug, entry.path)._replace(mtime_ns=st.st_mtime_ns)
            except FileNotFoundError:
                continue
            fresh.append(_line(key, summary))
        live.append(key)
        result[slug] = summary
    if fresh or count > 2 * len(live) + SLACK:
        _store(path, header, cached, live, fresh, count, whole)
        if legacy is not None and not count:
            with contextlib.suppress(OSError):
                legacy.unlink()
    return result


def _store(path: Path, header: str, cached: Lines, live: list[str], fresh: list[str], count: int, whole: bool) -> None:
    """Append `fresh`, or rewrite the file with only the live lines when the dead ones pile up
    (or there is no usable file yet). A cache that cannot be written is no error."""
    with contextlib.suppress(OSError):
        if count and count + len(fresh) <= 2 * len(live) + SLACK:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
            try:
                os.write(fd, _bytes(("" if whole else "\n") + "".join(fresh)))
            finally:
                os.close(fd)
            return
        storage.ensure_dir(path.parent)
        keep = [f"{key}\t{cached[key]}\n" for key in live if key in cached]
        storage.write_file(path, _bytes(header + "\n" + "".join(keep) + "".join(fresh)))


def _bytes(text: str) -> bytes:
    """A file name that is not UTF-8 (its odd bytes as surrogates) is written back as its bytes."""
    return text.encode("utf-8", "surrogateescape")


def parse_error(exc: BacklogError) -> Summary:
    return Summary(0, (), exc.message)
