"""The one `.gitignore` matcher: which `backlog/<pile>` lines a file holds, adding and removing them.

Pure bytes in, bytes out. A line covers an entry when, stripped of blanks and a leading `/`, it
is exactly the entry: `backlog/doing/` (trailing slash) matches directories only and so never
hides the in-flight symlink; it does not count as covering it, but is removed with it.
"""

from __future__ import annotations


def _key(line: bytes) -> str:
    return line.decode("utf-8", "replace").strip().lstrip("/")


def missing(data: bytes | None, entries: list[str]) -> list[str]:
    """The entries no line of `data` covers, in the given order. Only the lines that hold an
    entry's text are looked at (a byte search per entry): every verb asks, and a pull request may
    commit a `.gitignore` of any size."""
    return [e for e in entries if not _covers(data or b"", e)]


def _covers(data: bytes, entry: str) -> bool:
    """Whether a line of `data` covers `entry` (`_key`): each line holding its text, tried in turn."""
    needle, at = entry.encode(), 0
    while (at := data.find(needle, at)) >= 0:
        start = max(data.rfind(b"\n", 0, at), data.rfind(b"\r", 0, at)) + 1
        ends = [end for end in (data.find(b"\n", at), data.find(b"\r", at)) if end >= 0]
        end = min(ends) if ends else len(data)
        if _key(data[start:end]) == entry:
            return True
        at = end
    return False


def with_entries(data: bytes | None, entries: list[str]) -> bytes:
    """`data` plus one line for each entry it does not cover yet (every other byte kept)."""
    text = data or b""
    add = missing(data, entries)
    if not add:
        return text
    if text and not text.endswith((b"\n", b"\r")):
        text += b"\n"
    return text + b"".join(f"{e}\n".encode() for e in add)


def without_entries(data: bytes, entries: list[str]) -> tuple[bytes, list[str]]:
    """`data` less every line naming one of the entries (with or without slashes), and which went."""
    kept, dropped = [], []
    for line in data.splitlines(keepends=True):
        key = _key(line).rstrip("/")
        if key in entries:
            if key not in dropped:
                dropped.append(key)
        else:
            kept.append(line)
    return b"".join(kept), [e for e in entries if e in dropped]
