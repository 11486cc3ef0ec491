"""`backlog/.gitattributes`: git keeps every file under `backlog/` byte for byte.

With `core.autocrlf=true` (or `core.eol=crlf`, or a parent `.gitattributes` with `text`), git
checks a task file out with CRLF line endings and stores it with LF. The tool compares a
work-tree copy's bytes with git's blob of it (a killed move or rename is finished only when the
two are the same task), and the spec is frozen byte for byte (SPEC §2), so such a conversion
left killed moves unfinished and rewrote CRLF task files. The rule below turns every conversion
off for the backlog's own directory, whatever the user's settings say, for every git command
(the user's own checkouts and merges included).

`backlog setup` writes the file into the commit that sets the backlog up; `maintain` adds it to
a backlog set up before it existed (one commit), and rewrites each tracked task file that git had
already checked out converted (its work-tree bytes are exactly its committed bytes with CRLF
line endings) back to its committed bytes. That look reads every tracked file of the backlog
(`ls-files --eol`: about a second at 100,000 tasks), so it is made once per worktree, the first
time the rule is in place (`Layout.line_endings_checked`); a checkout made after it converts
nothing. Where the user's own `.gitattributes` has no rule, nothing is rewritten (the user may
want CRLF). Nothing else is touched: a file the user changed is theirs, and a `.gitattributes`
the user wrote is left as it is (it is named when it lacks the rule).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from . import git, limits, storage
from .change import Change, Create, Write, run
from .errors import BacklogError
from .layout import Layout, parse_task_rel
from .task import is_slug
from .typed import NamedTuple

RULE = b"* -text -filter -ident -working-tree-encoding"
ATTRIBUTES = b"# backlog: git keeps these files byte for byte (written by `backlog setup`)\n" + RULE + b"\n"
MESSAGE = "chore(backlog): .gitattributes keeps task files byte for byte"


class Kept(NamedTuple):
    """What `ensure` found: a finding's detail (None: the file is right), whether it is a repair
    made (or, in a dry run, to be made), and whether the rule is in place (or would be)."""

    detail: str | None
    fixed: bool
    ruled: bool


def ensure(repo: git.Repo, layout: Layout, dry_run: bool) -> Kept:
    """Write and commit `backlog/.gitattributes` when it is missing (a dry run: say so)."""
    said = _check(layout.gitattributes)
    if said is None:
        return Kept(None, False, True)
    if said != "missing":
        return Kept(f"{said}: left in place; git may convert line endings", False, False)
    if dry_run:
        return Kept("missing: would be written and committed, so git keeps task files byte for byte", True, True)
    if repo.branch is None:
        return Kept("missing: left out, HEAD is detached; run `backlog maintain` on a branch", False, False)
    with storage.file_lock(layout.layout_lock, what="the backlog layout"):
        said = _check(layout.gitattributes)
        if said != "missing":
            return Kept(None, False, said is None)  # another janitor wrote it meanwhile
        try:
            run(Change((Create(layout.gitattributes, ATTRIBUTES, layout.rel(layout.gitattributes)),), MESSAGE), repo)
        except BacklogError as exc:
            return Kept(f"missing: not written, the commit failed: {exc.message}", False, False)
    return Kept("missing: written and committed, so git keeps task files byte for byte", True, True)


def _check(path: Path) -> str | None:
    """None when `path` holds the rule, "missing" when there is no such file, else what is wrong."""
    if os.path.islink(path):
        return "a symlink, never read"
    try:
        data = storage.read_task_bytes(path)
    except FileNotFoundError:
        return "missing"
    except (OSError, BacklogError):
        return "cannot be read"
    if RULE in (line.strip() for line in data.splitlines()):
        return None
    return f"does not hold the line `{RULE.decode()}`"


def checked(layout: Layout) -> bool:
    """Was this worktree's checkout looked over already, with the rule in place? (Then no file
    of it is converted: every checkout since honoured the rule.)"""
    return os.path.lexists(layout.line_endings_checked)


def mark_checked(repo: git.Repo, layout: Layout) -> None:
    run(Change((Write(layout.line_endings_checked, None, RULE + b"\n"),)), repo)


def converted(repo: git.Repo, layout: Layout) -> Iterator[tuple[str | None, str, bytes, bytes]]:
    """(slug or None, worktree-relative path, work-tree bytes, committed bytes) of each tracked file
    under backlog/ whose work-tree copy is exactly its index copy with every LF made CRLF (git's
    checkout conversion, from before the rule above existed); the slug for a task file of a pile.
    One `ls-files`, one `cat-file --batch`."""
    code, out, _err = git.call(repo.toplevel, "ls-files", "--eol", "-z", "--", layout.rel(layout.root))
    if code:
        return
    candidates = dict(_checked_out_crlf(out))
    if not candidates:
        return
    committed = git.objects(repo.toplevel, [f":{rel}" for rel in candidates], limits.TASK_BYTES)
    for rel, slug in candidates.items():
        blob = committed.get(f":{rel}")
        if not isinstance(blob, bytes) or b"\r" in blob:
            continue
        try:
            here = storage.read_task_bytes(repo.toplevel / rel)
        except (OSError, BacklogError):
            continue
        if here == blob.replace(b"\n", b"\r\n"):
            yield slug, rel, here, blob


def _checked_out_crlf(listing: bytes) -> Iterator[tuple[str, str | None]]:
    """(path, slug or None) of each file `ls-files --eol -z` lists as LF in the index, CRLF at hand."""
    for record in listing.split(b"\0"):
        info, tab, name = record.partition(b"\t")
        fields = info.split()
        if not tab or len(fields) < 2 or fields[0] != b"i/lf" or fields[1] not in (b"w/crlf", b"w/mixed"):
            continue
        rel = name.decode("utf-8", "surrogateescape")
        if "\n" in rel:
            continue  # never a name this tool wrote; `cat-file --batch` reads a spec per line
        parsed = parse_task_rel(rel)
        yield rel, parsed[1] if parsed is not None and is_slug(parsed[1]) else None


def restore(repo: git.Repo, layout: Layout, slug: str | None, rel: str, here: bytes, blob: bytes) -> bool:
    """Put the committed bytes back in place of the converted copy `here`, under the task's lock (the
    layout's for any other file) and only when the file still holds `here` (a verb may have moved
    or changed it meanwhile)."""
    path = repo.toplevel / rel
    lock = layout.task_lock(slug) if slug else layout.layout_lock
    with storage.file_lock(lock, what=f"task {slug}" if slug else "the backlog layout"):
        try:
            if storage.read_task_bytes(path) != here:
                return False
        except (OSError, BacklogError):
            return False
        run(Change((Write(path, here, blob),)), repo)
    return True
