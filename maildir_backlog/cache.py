"""The parse cache: what auto-pick, `list` and `status` need from each task file of a pile
(priority, dependencies, or why the file is invalid: `header`), and its title, read once and kept
by the file's stamp.

Its cost follows what changed, not the size of the backlog (docs/performance.md, *100,000 tasks*):

* one file per pile, `<git dir>/backlog-cache/<pile>.cache`, in three parts:
  - a header line: the version, the pile's directory and the default priority (which a file that
    gives none has: a change of any of them makes every entry a miss), then the length and the
    CRC-32 of each of the two snapshots that follow;
  - the snapshot of the pile as a call saw it, written whole (`marshal`): the file names in
    listing order, each one's stamp (`ino size mtime_ns ctime_ns`, packed in 32 bytes), the index
    of its summary, and the distinct summaries (a few priorities and dependency lists serve
    100,000 files); then the titles, apart, for `ready` (auto-pick never loads them);
  - a log of the entries parsed since: one text line per file, `name ino size mtime_ns ctime_ns
    priority deps error title crc` (tab-separated; `deps` joined by commas, `error` as a JSON
    string or empty, `title` as written when it is printable and does not start with `"`, else as
    a JSON string, empty for none; `crc` the CRC-32 of the line before it, in hex), appended in
    one `write` (O_APPEND) by a call that parsed files. A later line of a name stands for it.
* the snapshot is written anew, atomically (`storage.write_file`), when there is none, when the
  log holds more than `SLACK` lines plus a 32nd of the live files, or when the snapshot's entries
  of files that left outnumber a quarter of the live ones (plus `SLACK`). So a claim writes
  nothing, a call after an edit appends a line, and rewriting stays amortised over a 32nd of the
  pile's changes. A call writes nothing when nothing changed.
* an entry counts only when its stamp is the file's now (one `lstat` each, through the
  directory's descriptor), and a log line only when it is whole, well formed and its CRC is its
  text's: a torn append (a crash mid-write) or a changed byte is never taken for a hit, only
  parsed again, and a snapshot that fails its CRC is no snapshot. An edit that keeps the size and
  sets the mtime back still changes the ctime (in place) or the inode (through a rename). A file
  of another version (another header) is all misses, then rewritten. An append starts on a new
  line when the file does not end in one. The cache is advisory: any doubt is a miss. A file
  changed in the last `RACY_NS` is parsed but not written down: a coarse file-system clock can
  leave a second write's stamp as the first's (git's "racily clean" entries).
* no Python frame per file when nothing changed: the stamps, their comparison with the kept ones
  and the result are built by C-level maps, and one `Summary` serves every file whose summary is
  alike.

Nothing else writes these files, and nothing reads them but this module.
"""

import contextlib
import marshal
import os
import re
import struct
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from itertools import compress, repeat, starmap
from operator import attrgetter, eq, itemgetter
from pathlib import Path

from . import header, storage
from .header import Parsed, Summary, Titles
from .typed import Any, NamedTuple

VERSION = "backlog-cache 4"  # 2: the ctime; 3: the title; 4: a snapshot and a log (an older file is all misses)
TAB = "\t"
SLACK = 256  # log lines, and entries of files gone, tolerated before the snapshot is written anew
RACY_NS = 3_000_000_000  # a file changed this recently is not cached yet (coarse file-system clocks)

_STAMP = attrgetter("st_ino", "st_size", "st_mtime_ns", "st_ctime_ns")
_PACK = struct.Struct("<Qqqq").pack  # a stamp as 32 bytes: compared, and kept, as one object
_SLUG = itemgetter(slice(None, -3))  # "x.md" → "x"
_F = r"[^\t\n]*"
# a log line: name and stamp, then priority, deps, error, title (a name holding a tab matches no line)
_LOG = rf"(?m)^(({_F})\t([0-9]+)\t([0-9]+)\t(-?[0-9]+)\t(-?[0-9]+)\t({_F})\t({_F})\t({_F})\t({_F}))\t([0-9a-f]{{8}})$"
# (the whole line before its last field, then the fields, then the CRC-32 of the former)
Rest = tuple[int, tuple[str, ...], str | None]  # a Summary as marshal keeps it
_NOT_KEPT = b""  # the stamp of a name the cache does not hold: equal to no file's (nor to a gone one's None)
_NO_SUMMARY = Summary(0, (), None)  # (its summary: a miss, read before the answer is given)


class Kept(NamedTuple):
    """A pile's cache as read: name → position, and by position the stamp, the summary's index
    in `rests`, and (when asked) the title; with the snapshot's size and the log's lines."""

    at: dict[str, int]
    stamps: list[bytes]  # and one more, `_NOT_KEPT`: the place of a name not kept
    rest_of: list[int]  # and one more: the place of `_NO_SUMMARY`
    rests: list[Rest]
    titles: list[str | None] | None
    snapshot: int  # entries in the snapshot
    lines: int  # lines in the log (a torn last one counted)
    whole: bool  # the file ends in a newline


def _load(path: Path, head: str, titled: bool) -> Kept | None:
    """The cache at `path`; None when it is missing, of another version or directory, or its
    snapshot is not whole. The log's lines are read with one regular expression; a torn last
    line is counted, never read."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        start = data.index(b"\n") + 1
        first = data[: start - 1].decode("utf-8", "surrogateescape").rsplit(TAB, 4)
        if first[0] != head:
            return None
        size_a, crc_a, size_b, crc_b = map(int, first[1:])
        end_a, end_b = start + size_a, start + size_a + size_b
        names, stamps, rest_of, rests = _part(data, start, end_a, crc_a)
        titles = _part(data, end_a, end_b, crc_b) if titled else None
        if not len(names) == len(stamps) == len(rest_of) == (len(names) if titles is None else len(titles)):
            return None
        log = data[end_b:].decode("utf-8", "surrogateescape")
    except (OSError, ValueError, EOFError, TypeError):  # (marshal's refusals among them)
        return None
    snapshot, whole = len(names), log.endswith("\n") or not log
    for row in re.compile(_LOG).findall(log, 0, log.rfind("\n") + 1):
        entry = _logged(row)
        if entry is not None:
            names.append(row[1])
            stamps.append(entry[0])
            rest_of.append(len(rests))
            rests.append(entry[1])
            if titles is not None:
                titles.append(entry[2])
    stamps.append(_NOT_KEPT)
    rest_of.append(len(rests))  # (`_NO_SUMMARY`)
    if titles is not None:
        titles.append(None)
    at = dict(zip(names, range(len(names)), strict=True))  # (a later line of a name stands for it)
    return Kept(at, stamps, rest_of, rests, titles, snapshot, log.count("\n") + (not whole), whole)


def _part(data: bytes, start: int, end: int, crc: int) -> Any:
    """One of the snapshot's parts, when it is whole (ValueError: it is not). The file is this
    module's alone, in the git dir, and written whole by a rename: nothing committed, fetched
    or typed reaches it but as the strings and numbers `_snapshot` put there."""
    view = memoryview(data)[start:end]
    if end > len(data) or zlib.crc32(view) != crc:
        raise ValueError("a part of the parse cache is not whole")
    return marshal.loads(view)  # noqa: S302 (see the docstring)


def _logged(row: tuple[str, ...]) -> tuple[bytes, Rest, str | None] | None:
    """A log line's stamp, summary and title; None when it cannot be read back, or its CRC is not
    its text's (a byte changed)."""
    body, _name, ino, size, mtime, ctime, priority, deps, error, title, crc = row
    if f"{zlib.crc32(body.encode('utf-8', 'surrogateescape')):08x}" != crc:
        return None
    try:
        stamp = _PACK(int(ino), int(size), int(mtime), int(ctime))
        err = _unquoted(error) if error else None
        if not isinstance(err, str | None):
            return None
        return stamp, (int(priority), tuple(deps.split(",")) if deps else (), err), _title(title)
    except (ValueError, struct.error):
        return None


def _line(name: str, info: os.stat_result, p: Parsed) -> str:
    s, title = p
    error = _quoted(s.error) if s.error is not None else ""
    field = "" if title is None else title if title.isprintable() and title[:1] != '"' else _quoted(title)
    ino, size, mtime, ctime = _STAMP(info)
    body = f"{name}\t{ino}\t{size}\t{mtime}\t{ctime}\t{s.priority}\t{','.join(s.dependencies)}\t{error}\t{field}"
    return f"{body}\t{zlib.crc32(body.encode('utf-8', 'surrogateescape')):08x}\n"


def _title(field: str) -> str | None:
    """A title's field as written by `_line` (None: none, or a field that cannot be read)."""
    if not field:
        return None
    if field[0] != '"':
        return field
    try:
        found = _unquoted(field)
    except ValueError:
        return None
    return found if isinstance(found, str) else None


def _quoted(text: str) -> str:
    """A text as one JSON string (an error, a title that is not printable as it is): rare, so the
    `json` module is imported here, not by every call that loads this module."""
    import json

    return json.dumps(text)


def _unquoted(field: str) -> object:
    """What `_quoted` wrote, read back (ValueError: not JSON)."""
    import json

    return json.loads(field)


# -- a call ----------------------------------------------------------------------------------
class _Fresh(NamedTuple):
    """A miss, read: its name, stamp, what it says, and whether it may be written down (not racy)."""

    name: str
    info: os.stat_result
    parsed: Parsed
    keep: bool


def summaries(
    path: Path,
    directory: Path,
    names: Iterable[str],
    parse: Callable[[str, str], Parsed],
    legacy: Iterable[Path] = (),
    default_priority: int | None = None,
    titles: Titles | None = None,
) -> dict[str, Summary]:
    """slug → Summary for every file of `names` (one pile's `*.md` names, best in listing order),
    from the cache at `path` where the stamp matches, else parsed: read here and given to
    `parsed` (with `default_priority`), or, for anything else, `parse(slug, file path)` (which
    may raise FileNotFoundError: the file left since the listing, and is skipped). Appends what
    was parsed, or writes the snapshot anew (see the module). `legacy`: older cache files, removed
    when a snapshot is first written. `titles`, when given, receives slug → title of every file
    in the result.

    At 100,000 files the per-file work is the `lstat` (relative to the directory's descriptor)
    and C-level maps. With no cache at all, each file is opened once and its stamp is the open
    file's (no `lstat` first)."""
    head = f"{VERSION}\t{directory}\t{default_priority}"  # (a file with no priority has the default)
    kept = _load(path, head, titles is not None)
    listed = list(names)
    slugs = list(map(_SLUG, listed))
    now: list[bytes | None] | None = None
    at: list[int] = []
    fd = _open_dir(directory)
    try:
        if kept is not None:
            at = list(map(kept.at.get, listed, repeat(len(kept.stamps) - 1)))  # (not kept: the last place)
            now = _stamps(fd, directory, listed)
            hits = list(map(eq, map(kept.stamps.__getitem__, at), now))
            table = [*starmap(Summary, kept.rests), _NO_SUMMARY]
            result = dict(zip(slugs, map(table.__getitem__, map(kept.rest_of.__getitem__, at)), strict=True))
            if titles is not None and kept.titles is not None:
                titles.update(zip(slugs, map(kept.titles.__getitem__, at), strict=True))
        else:  # nothing cached: every file is a miss
            hits, result = [False] * len(listed), {}
        misses = range(len(listed)) if kept is None else _misses_in(hits)  # (a parser's error goes on up)
        fresh = _misses(fd, directory, listed, misses, parse, default_priority)
    finally:
        if fd is not None:
            os.close(fd)
    for i, got in fresh.items():
        if got is None:
            result.pop(slugs[i], None)
            if titles is not None:
                titles.pop(slugs[i], None)
        else:
            result[slugs[i]] = got.parsed.summary
            if titles is not None:
                titles[slugs[i]] = got.parsed.title
    _keep(path, head, kept, listed, at, now, hits, fresh, legacy)
    return result


def _stamps(fd: int | None, directory: Path, names: list[str]) -> list[bytes | None]:
    """The stamp of each file (None: gone), one `lstat` each through the directory's descriptor
    with no Python frame per file; one file gone sends it the careful way."""
    if fd is not None:
        with contextlib.suppress(FileNotFoundError):  # (no `partial`: its keywords cost 18 ms at 100k)
            return [_PACK(*_STAMP(os.stat(name, dir_fd=fd, follow_symlinks=False))) for name in names]
    found: list[bytes | None] = []
    for name in names:
        try:
            found.append(_PACK(*_STAMP(os.lstat(os.path.join(directory, name)))))
        except FileNotFoundError:
            found.append(None)
    return found


def _misses(
    fd: int | None,
    directory: Path,
    names: list[str],
    misses: Iterable[int],
    parse: Callable[[str, str], Parsed],
    default_priority: int | None,
) -> dict[int, _Fresh | None]:
    """Each miss (`misses`: positions in `names`), read: by its position, None when it left since
    the listing. A file changed in the last `RACY_NS` (by its mtime or its ctime: a copy that kept
    an old mtime is new by its ctime) is not to be written down (its stamp may not
    change at its next write, within the file system's clock tick): it is read again until then."""
    fresh: dict[int, _Fresh | None] = {}
    recent = time.time_ns() - RACY_NS
    for i in misses:
        read = _read(fd, directory, names[i], parse, default_priority)
        if read is None:
            fresh[i] = None
        else:
            info = read[0]
            fresh[i] = _Fresh(names[i], info, read[1], max(info.st_mtime_ns, info.st_ctime_ns) < recent)
    return fresh


def _misses_in(hits: list[bool]) -> Iterator[int]:
    """The indexes of the misses (False) in `hits`, each found by `list.index` (C), so that a call
    after one change costs one file, not a loop. Only the search is guarded: whatever the
    caller's loop raises (a parser's error) goes on up."""
    at = -1
    while True:
        try:
            at = hits.index(False, at + 1)
        except ValueError:  # no miss left
            return
        yield at


def _read(
    fd: int | None, directory: Path, name: str, parse: Callable[[str, str], Parsed], default_priority: int | None
) -> tuple[os.stat_result, Parsed] | None:
    """One file's stat and what it says, its stamp taken before its bytes are read (a change after
    that changes the stamp the next call sees). A regular file of a sane size in the common form:
    one open through the directory's descriptor; anything else: `parse`."""
    slug = _SLUG(name)
    if fd is not None and default_priority is not None:
        try:
            read = header.read_stamped(name, fd)
        except FileNotFoundError:
            return None
        got = None if read is None else header.parsed(slug, read[1], default_priority)
        if read is not None and got is not None:
            return read[0], got
    try:
        info = os.stat(name, dir_fd=fd, follow_symlinks=False) if fd is not None else os.lstat(directory / name)
        return info, parse(slug, os.path.join(directory, name))
    except FileNotFoundError:
        return None


def _open_dir(directory: Path) -> int | None:
    """A descriptor of the pile's directory (not through a symlink); None: the careful way."""
    try:
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None


# -- writing it down -------------------------------------------------------------------------
def _keep(
    path: Path,
    head: str,
    kept: Kept | None,
    names: list[str],
    at: list[int],
    now: list[bytes | None] | None,
    hits: list[bool],
    fresh: dict[int, _Fresh | None],
    legacy: Iterable[Path],
) -> None:
    """Append the misses that may be written down, or write the snapshot anew when the module's
    thresholds say so (and there is something to keep). A cache that cannot be written is no
    error."""
    new = [got for got in fresh.values() if got is not None and got.keep]
    if kept is None:
        if not new:
            return
    else:
        live = len(names) - list(fresh.values()).count(None)
        kept_live = sum(map(kept.snapshot.__gt__, compress(at, hits)))  # (the snapshot's entries still live)
        if kept.lines + len(new) <= SLACK + live // 32 and kept.snapshot - kept_live <= SLACK + live // 4:
            if new:
                with contextlib.suppress(OSError):
                    text = ("" if kept.whole else "\n") + "".join(map(_logged_line, new))
                    storage.append_to(path, text.encode("utf-8", "surrogateescape"))
            return
        if kept.titles is None:  # (auto-pick's load left the titles out: read them for the snapshot)
            kept = _load(path, head, True)
    with contextlib.suppress(OSError):
        storage.ensure_dir(path.parent)
        storage.write_file(path, _snapshot(head, kept, names, now, new))
        if kept is None:
            for old in legacy:
                with contextlib.suppress(OSError):
                    old.unlink()


def _plain(rest: Rest | Summary) -> Rest:
    """A summary as marshal keeps it: a plain tuple of exact types. marshal refuses a subclass (a
    named tuple, or `task.Slug`, the str the full parser gives a dependency), and a refusal here
    would fail the verb (`ValueError: unmarshallable object`). Once per distinct summary."""
    priority, deps, error = rest
    return int(priority), tuple(map(str, deps)), None if error is None else str(error)


def _logged_line(got: _Fresh) -> str:
    """A miss's log line; none for a name that holds a tab or a line break (the next snapshot
    keeps it)."""
    name = got.name
    return "" if TAB in name or "\n" in name or "\r" in name else _line(name, got.info, got.parsed)


_INFO, _SUMMARY, _TITLE = attrgetter("info"), attrgetter("parsed.summary"), attrgetter("parsed.title")


def _snapshot(
    head: str, kept: Kept | None, names: list[str], now: list[bytes | None] | None, new: list[_Fresh]
) -> bytes:
    """The whole file anew: every file `kept` holds whose stamp now (`now`) is the one kept, in
    listing order, then `new` (the files read now that may be written down). Built by C-level
    maps: a snapshot of 100,000 files is written after a 32nd of them changed, and by a call that
    found no cache."""
    held: list[int] = []
    if kept is not None and kept.titles is not None and now is not None:
        at = list(map(kept.at.get, names, repeat(len(kept.stamps) - 1)))
        same = list(map(eq, map(kept.stamps.__getitem__, at), now))
        held, names = list(compress(at, same)), list(compress(names, same))
        stamps: list[bytes] = list(map(kept.stamps.__getitem__, held))
        rests: list[Rest | Summary] = list(map(kept.rests.__getitem__, map(kept.rest_of.__getitem__, held)))
        titles: list[str | None] = list(map(kept.titles.__getitem__, held))
    else:
        names, stamps, rests, titles = [], [], [], []
    names += map(attrgetter("name"), new)
    stamps += starmap(_PACK, map(_STAMP, map(_INFO, new)))
    rests += map(_SUMMARY, new)  # (Summary objects: made plain tuples once each, below)
    titles += map(_TITLE, new)
    distinct = {rest: n for n, rest in enumerate(dict.fromkeys(rests))}
    plain = list(map(_plain, distinct))
    # marshal's format 2, without back-references: format 4 looks up every object held elsewhere
    # too (every fresh name, stamp and title) in a table, ~50 ms of a 100,000-file snapshot's
    # ~180; the file is 9 % larger and loads as fast (`marshal.loads` reads every format)
    part_a = marshal.dumps((names, stamps, list(map(distinct.__getitem__, rests)), plain), 2)
    part_b = marshal.dumps(titles, 2)  # (every title is an exact str: a match's group, or `task._title`'s)
    first = f"{head}\t{len(part_a)}\t{zlib.crc32(part_a)}\t{len(part_b)}\t{zlib.crc32(part_b)}\n"
    return first.encode("utf-8", "surrogateescape") + part_a + part_b
