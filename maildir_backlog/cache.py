"""The parse cache: what auto-pick, `list` and `status` need from each task file of a pile
(priority, dependencies, or why the file is invalid: `header`), read once and kept by the
file's stamp.

Its cost follows what changed, not the size of the backlog (docs/performance.md, *100,000 tasks*):

* one file per pile, `<git dir>/backlog-cache/<pile>.tsv`: a header line (the version, the pile's
  directory and the default priority, which a file that gives none has: a change of any of
  them makes every line a miss), then one line per
  parsed file, `name ino size mtime_ns ctime_ns priority deps error title` (tab-separated; `deps`
  joined by commas, `error` as a JSON string or empty, `title` as written when it is printable
  and does not start with `"`, else as a JSON string, empty for none). A call appends the lines of the files it had to
  parse, in one `write` (O_APPEND), and writes nothing when nothing changed. Lines of files
  that changed or left are dead weight until the file holds twice as many lines as live
  entries (plus a margin): then it is rewritten whole, atomically (`storage.write_file`), so
  rewriting stays amortised over as many changes as the pile holds tasks.
* a line counts only when it is whole and well formed, and the stamp `(ino, size, mtime_ns,
  ctime_ns)` is part of the key: a torn append (a crash mid-write) or a line of another file is
  never taken for a hit, only parsed again. An edit that keeps the size and sets the mtime back
  still changes the ctime (in place) or the inode (through a rename). A file of an older
  version (another header) is all misses, then rewritten. An append starts on a new line when the file does not
  end in one. The cache is advisory: any doubt is a miss. A file changed in the last `RACY_NS`
  is parsed but not written down: a coarse file-system clock can leave a second write's stamp
  as the first's (git's "racily clean" entries).
* one `lstat` per file, through the directory's descriptor, and no Python frame per file when
  nothing changed: the stamps, the lookups and the result are built by C-level maps, and one
  `Summary` serves every file whose line ends alike (a few priorities and dependency lists).
* the title (`parse_task`'s) is kept with the summary, for `ready`, which lists every candidate
  with its title: read from the cache, no task file is opened. It is read only when asked
  (`titles`): auto-pick's summaries are shared by the files whose line ends alike, and the title
  stays out of that part of the line.

Nothing else writes these files, and nothing reads them but this module.
"""

import contextlib
import functools
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from operator import attrgetter, itemgetter
from pathlib import Path

from . import header, storage
from .header import Parsed, Summary, Titles
from .typed import cast

VERSION = "backlog-cache 3"  # 2: the stamp holds the ctime; 3: the title (an older file is all misses)
TAB = "\t"
SLACK = 256  # dead lines tolerated beyond the live ones before a rewrite
RACY_NS = 3_000_000_000  # a file changed this recently is not cached yet (coarse file-system clocks)


# -- the cache file --------------------------------------------------------------------------
Lines = dict[str, str]  # stamp key → "priority<TAB>deps<TAB>error" as written
_F = r"[^\t\n]*"
_KEY = rf"({_F}\t{_F}\t{_F}\t{_F}\t{_F})"  # name and stamp: five fields, no backtracking over a line
# (a name holding a tab matches no line: that file is parsed at every call, never taken for a hit)
_LINE = rf"(?m)^{_KEY}\t({_F}\t{_F}\t{_F})\t{_F}$"  # key, then the three fields of a summary
_TITLED = rf"(?m)^{_KEY}\t({_F}\t{_F}\t{_F})\t({_F})$"  # the same, and the title's field
_WHOLE = rf"(?m)^{_KEY}\t({_F}\t{_F}\t{_F}\t{_F})$"  # key, then the rest of its line
# (the three are compiled by the call that reads the file, through re's cache, not by every import)
_STAMP = attrgetter("st_ino", "st_size", "st_mtime_ns", "st_ctime_ns")
_STAMP_KEY = "{0}.md\t{1[0]}\t{1[1]}\t{1[2]}\t{1[3]}".format  # slug, (ino, size, mtime_ns, ctime_ns) → its key
_FILE = "{0}.md".format
_KEY_REST, _KEY_TITLE = itemgetter(0, 1), itemgetter(0, 2)  # of a `_TITLED` row


def _load(path: Path, header: str, titled: bool = False) -> tuple[Lines, int, bool, Lines | None]:
    """Stamp key → the rest of its line's summary (priority, deps, error), the number of lines,
    whether the file ends in a newline, and (`titled`) stamp key → its title's field. Empty when
    the file is missing or of another version or directory. One read and one pass of a regular
    expression over the whole lines (no Python per line); a torn last line (a crash mid-append)
    is counted, never read."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape", newline="\n") as f:
            if f.readline() != header + "\n":
                return {}, 0, True, {} if titled else None
            text = f.read()
    except OSError:
        return {}, 0, True, {} if titled else None
    whole = text.endswith("\n") or not text
    count = text.count("\n") + (not whole)
    end = text.rfind("\n") + 1
    if not titled:  # (auto-pick's: a list of pairs, ~0.6 MB per 10,000 lines while the dict is built)
        return dict(re.compile(_LINE).findall(text, 0, end)), count, whole, None
    rows = re.compile(_TITLED).findall(text, 0, end)  # one pass: (key, summary's fields, title's field) per line
    return dict(map(_KEY_REST, rows)), count, whole, dict(map(_KEY_TITLE, rows))


def _entry(fields: str) -> Summary | None:
    parts = fields.split(TAB)
    if len(parts) != 3:
        return None
    priority, deps, error = parts
    try:
        value = int(priority)
        err = _unquoted(error) if error else None
    except ValueError:
        return None
    if not isinstance(err, str | None):
        return None
    return Summary(value, tuple(deps.split(",")) if deps else (), err)


def _line(key: str, p: Parsed) -> str:
    s, title = p
    error = _quoted(s.error) if s.error is not None else ""
    field = "" if title is None else title if title.isprintable() and title[:1] != '"' else _quoted(title)
    return f"{key}\t{s.priority}\t{','.join(s.dependencies)}\t{error}\t{field}\n"


def _title(field: str | None) -> str | None:
    """A title's field as written by `_line` (None: none, or a line that cannot be read)."""
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


def summaries(
    path: Path,
    directory: Path,
    slugs: Iterable[str],
    parse: Callable[[str, str], Parsed],
    legacy: Path | None = None,
    default_priority: int | None = None,
    titles: Titles | None = None,
) -> dict[str, Summary]:
    """slug → Summary for every `slugs` file (one pile's listing, less `.md`), from the cache at `path`
    where the stamp matches, else parsed: read here and given to `parsed` (with `default_priority`),
    or, for anything else, `parse(slug, file path)` (which may raise FileNotFoundError: the file
    left since the listing, and is skipped). Appends what was parsed; rewrites the file only when
    it holds too many dead lines. `legacy`: an older cache file, removed when this one is first
    written. `titles`, when given, receives slug → title of every file in the result.

    At 100,000 files the per-file work is the `lstat` (relative to the directory's descriptor)
    and C-level maps: stamp keys, dict lookups, and one `Summary` per distinct line rest (a few
    priorities and dependency lists), shared by the files that have it. With no cache at all,
    each file is opened once and its stamp is the open file's (no `lstat` first)."""
    header = f"{VERSION}\t{directory}\t{default_priority}"  # (a file with no priority has the default)
    cached, count, whole, titled = _load(path, header, titles is not None)
    listed = list(slugs)
    fd = _open_dir(directory)
    keys: list[str | None]
    found: list[Summary | None]
    try:
        if count or fd is None:
            keys = _stamp_keys(fd, directory, listed)
            rests: list[str | None] = list(map(cast("Callable[[str | None], str | None]", cached.get), keys))
            shared = {rest: _entry(rest) for rest in set(rests) if rest is not None}
            found = list(map(cast("Callable[[str | None], Summary | None]", shared.get), rests))
        else:  # nothing cached: every file is a miss
            keys, found = [None] * len(listed), [None] * len(listed)
        if titles is not None and titled is not None:
            fields = map(cast("Callable[[str | None], str | None]", titled.get), keys)
            titles.update(zip(listed, map(_title, fields), strict=True))
        if None not in found:  # every file a hit (so none gone): nothing written but a compaction
            result = dict(zip(listed, cast("list[Summary]", found), strict=True))
            live = cast("list[str]", keys)
            fresh: list[str] = []
        else:
            result, live, fresh = _misses(fd, directory, listed, keys, found, parse, default_priority, titles)
    finally:
        if fd is not None:
            os.close(fd)
    if fresh or count > 2 * len(live) + SLACK:
        _store(path, header, live, fresh, count, whole)
        if legacy is not None and not count:
            with contextlib.suppress(OSError):
                legacy.unlink()
    return result


def _misses(
    fd: int | None,
    directory: Path,
    slugs: list[str],
    keys: list[str | None],
    found: list[Summary | None],
    parse: Callable[[str, str], Parsed],
    default_priority: int | None,
    titles: Titles | None,
) -> tuple[dict[str, Summary], list[str], list[str]]:
    """The summaries with every miss (None in `found`) read, the live stamp keys, and the cache
    lines to append: not for a file changed in the last `RACY_NS` (its stamp may not change at
    its next write, within the file system's clock tick), which is read again until then. The
    misses are found by `list.index` (C), so a call after one claim costs one file, not a loop.
    A miss's title goes into `titles` (when given); a gone file's leaves it."""
    result = dict(zip(slugs, found, strict=True))
    live = list(keys)
    fresh: list[str] = []
    gone = False
    recent = time.time_ns() - RACY_NS
    for at in _misses_in(found):  # (a parser's error is never taken for "no miss left")
        read = _read(fd, directory, slugs[at], parse, default_priority)
        if read is None:  # gone since the listing
            del result[slugs[at]]
            if titles is not None:
                titles.pop(slugs[at], None)
            live[at], gone = None, True
            continue
        key, got, mtime_ns = read
        result[slugs[at]], live[at] = got.summary, key
        if titles is not None:
            titles[slugs[at]] = got.title
        if mtime_ns < recent:
            fresh.append(_line(key, got))
    return (
        cast("dict[str, Summary]", result),
        [k for k in live if k is not None] if gone else cast("list[str]", live),
        fresh,
    )


def _misses_in(found: list[Summary | None]) -> Iterator[int]:
    """The indexes of the misses (None) in `found`, each found by `list.index` (C). Only the
    search is guarded: whatever the caller's loop raises (a parser's error) goes on up."""
    at = -1
    while True:
        try:
            at = found.index(None, at + 1)
        except ValueError:  # no None left
            return
        yield at


def _read(
    fd: int | None, directory: Path, slug: str, parse: Callable[[str, str], Parsed], default_priority: int | None
) -> tuple[str, Parsed, int] | None:
    """One file's stamp key, summary and title, and mtime, its stamp taken before its bytes are
    read (a change after that changes the stamp the next call sees). A regular file of a sane size
    in the common form: one open through the directory's descriptor; anything else: `parse`."""
    name = _FILE(slug)
    if fd is not None and default_priority is not None:
        got = _common(fd, name, slug, default_priority)
        if got is not _CAREFUL:
            return got  # (None: gone)
    try:
        info = os.stat(name, dir_fd=fd, follow_symlinks=False) if fd is not None else os.lstat(directory / name)
        return _STAMP_KEY(slug, _STAMP(info)), parse(slug, os.path.join(directory, name)), info.st_mtime_ns
    except FileNotFoundError:
        return None


_CAREFUL = ("", Parsed(Summary(0, (), None), None), 0)  # `_common`'s "not in the common form: the careful way"


def _common(fd: int, name: str, slug: str, default_priority: int) -> tuple[str, Parsed, int] | None:
    """`_read` of a regular file of a sane size in the common form (`header.parsed`): one
    open through the directory's descriptor. None: gone; `_CAREFUL`: anything else (a symlink, a
    file too large or growing, another form), which the careful way reads and says what it is."""
    try:
        read = header.read_stamped(name, fd)
    except FileNotFoundError:
        return None
    got = None if read is None else header.parsed(slug, read[1], default_priority)
    if read is None or got is None:
        return _CAREFUL
    return _STAMP_KEY(slug, _STAMP(read[0])), got, read[0].st_mtime_ns


def _open_dir(directory: Path) -> int | None:
    """A descriptor of the pile's directory (not through a symlink); None: the careful way."""
    try:
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None


def _stamp_keys(fd: int | None, directory: Path, slugs: list[str]) -> list[str | None]:
    """The stamp key of each file (None: gone), one `lstat` each through the directory's
    descriptor with no Python frame per file; one file gone sends it the careful way."""
    if fd is not None:
        lstat = functools.partial(os.stat, dir_fd=fd, follow_symlinks=False)
        with contextlib.suppress(FileNotFoundError):
            return list(map(_STAMP_KEY, slugs, map(_STAMP, map(lstat, map(_FILE, slugs)))))
    keys: list[str | None] = []
    for slug in slugs:
        try:
            keys.append(_STAMP_KEY(slug, _STAMP(os.lstat(os.path.join(directory, _FILE(slug))))))
        except FileNotFoundError:
            keys.append(None)
    return keys


def _store(path: Path, header: str, live: list[str], fresh: list[str], count: int, whole: bool) -> None:
    """Append `fresh`, or rewrite the file with only the live lines (read again whole: rare) when
    the dead ones pile up (or there is no usable file yet). A cache that cannot be written is no
    error."""
    with contextlib.suppress(OSError):
        if count and count + len(fresh) <= 2 * len(live) + SLACK:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
            try:
                os.write(fd, _bytes(("" if whole else "\n") + "".join(fresh)))
            finally:
                os.close(fd)
            return
        lines: Lines = {}
        if count:
            with open(path, encoding="utf-8", errors="surrogateescape", newline="\n") as f:
                text = f.read() if f.readline() == header + "\n" else ""
            lines = dict(re.compile(_WHOLE).findall(text, 0, text.rfind("\n") + 1))
        storage.ensure_dir(path.parent)
        keep = [f"{key}\t{lines[key]}\n" for key in live if key in lines]
        storage.write_file(path, _bytes("".join([header, "\n", *keep, *fresh])))  # one text, then its bytes


def _bytes(text: str) -> bytes:
    """A file name that is not UTF-8 (its odd bytes as surrogates) is written back as its bytes."""
    return text.encode("utf-8", "surrogateescape")
