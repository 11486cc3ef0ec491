"""The one `.gitignore` matcher: which `backlog/<pile>` lines a file holds, adding and removing them.

Pure bytes in, bytes out. A line covers an entry when, stripped of blanks and a leading `/`, it
is exactly the entry: `backlog/doing/` (trailing slash) matches directories only and so never
hides the in-flight symlink; it does not count as covering it, but is removed with it.
"""

from __future__ import annotations


def _key(line: bytes) -> str:
    return line.decode("utf-8", "replace").strip().lstrip("/")


def missing(data: bytes | None, entries: list[str]) -> list[str]:
    """The entries no line of `data` covers, in the given order."""
    have = {_key(line) for line in (data or b"").splitlines()}
    return [e for e in entries if e not in have]


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
