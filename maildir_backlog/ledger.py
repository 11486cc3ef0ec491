"""The ledger of settled tasks, kept in the shared root (SPEC §7.2, §7.10).

One file per slug, `<shared root>/.ledger/<slug>`, holding one line:

    <YYYY-MM-DDTHH:MM:SSZ> <done|cancelled|failed|retried> gen=<n> branch=<branch> claimer=<id>

`gen` is the task's *generation*: how many `retried` lines its log holds. Every retry starts a
new generation; the ledger orders events by generation, never by wall-clock time, so two events
in the same second or a clock that steps back cannot reopen a settled task.

An entry is written (atomically) *before* a task leaves flight for `done/` or `failed/`, after
the task's own log already records the terminal event; a crash therefore leaves a task either
settled (maybe still in flight with a terminal log line, which `maintain` finishes moving) or
still in flight, never lost and forgotten.

`retry` does not forget the entry: after its commit it rewrites it as `retried` with the new
generation. A todo copy of generation c is claimable only when the entry is `retried` with
gen <= c (the retried copy, on the branch that retried it and on every branch that merges it);
an entry `done`/`cancelled`/`failed` of generation g blocks every copy of generation <= g. A
crash between the retry commit and the rewrite is harmless: the retried copy's own log already
has the generation that the old entry does not block.

`rename` leaves a tombstone under the old name: `renamed … to=<new>` blocks every copy of the old
name, whatever its generation (other branches still hold it until they merge the rename; SPEC
§7.11). It is written before the new name appears, so a crash leaves the task blocked under its
old name, never claimable under both.

Entries written before generations existed have no `gen=`; they fall back to the older rule
(claimable when the copy's log has a `retried` line at or after the entry's time).
"""

import os
from collections.abc import Callable, Container
from datetime import UTC, datetime
from pathlib import Path

from . import limits, storage
from .clock import format_ts, parse_ts
from .errors import InvalidInput
from .logline import LogEntry, generation
from .task import Task
from .typed import NamedTuple

SETTLED = ("done", "cancelled", "failed")
RENAMED = "renamed"


class Settled(NamedTuple):
    slug: str
    ts: datetime
    outcome: str  # done, cancelled, failed, retried, or renamed
    branch: str
    claimer: str
    gen: int | None = None  # None: an entry written before generations existed
    to: str | None = None  # the new name (renamed only)

    def render(self) -> str:
        gen = "" if self.gen is None else f" gen={self.gen}"
        to = "" if self.to is None else f" to={self.to}"
        return f"{format_ts(self.ts)} {self.outcome}{gen} branch={self.branch} claimer={self.claimer}{to}\n"

    def blocks(self, task: Task | None) -> bool:
        """Does this entry make `task` (a todo copy) a stale, unclaimable copy?"""
        return True if task is None else self.blocks_log(task.log)

    def blocks_log(self, log: list[LogEntry]) -> bool:
        """Does this entry make a todo copy with this log a stale, unclaimable copy?"""
        if self.outcome == RENAMED:
            return True  # the task lives on under its new name: no copy of the old one is claimable
        if self.gen is None:
            return not any(e.kind == "retried" and e.ts >= self.ts for e in log)
        if self.outcome == "retried":
            return generation(log) < self.gen
        return generation(log) <= self.gen

    def allows_retry_of(self, log: list[LogEntry]) -> bool:
        """May a failed/ copy with this log be retried? Only the copy whose failure is the latest event."""
        if self.gen is None:
            return self.outcome == "failed"
        return self.outcome == "failed" and self.gen == generation(log)


def _parse(slug: str, text: str) -> Settled | None:
    parts = text.split()
    if len(parts) < 2:
        return None
    fields = dict(p.split("=", 1) for p in parts[2:] if "=" in p)
    try:
        ts = parse_ts(parts[0])
    except InvalidInput:
        return None
    gen = limits.number(fields["gen"], limits.NUMBER_MAX) if "gen" in fields else None
    if "gen" in fields and gen is None:
        return None
    return Settled(slug, ts, parts[1], fields.get("branch", "?"), fields.get("claimer", "?"), gen, fields.get("to"))


def lookup(directory: Path, slug: str) -> Settled | None:
    try:
        text = (directory / slug).read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, NotADirectoryError):
        return None
    # an unreadable entry still blocks: a settled task is never claimed again by accident
    return _parse(slug, text) or Settled(slug, datetime.max.replace(tzinfo=UTC), "done", "?", "?")


def renamed_to(
    lookup: Callable[[str], Settled | None], name: str, stop: Container[str] = ()
) -> tuple[str, Settled | None]:
    """The name the task called `name` has now, following the rename tombstones (`renamed …
    to=<new>`) from it, and the ledger's word on that name (`lookup`: a slug's entry). It stops
    at a name in `stop` (known done elsewhere: its entry is not read), after `RENAME_HOPS`, and
    before going round a loop (a hand-edited ledger): then the last name, with its tombstone."""
    seen = {name}
    entry = lookup(name)
    while entry is not None and entry.outcome == RENAMED and entry.to and entry.to not in seen:
        if len(seen) > limits.RENAME_HOPS:
            break
        name = entry.to
        seen.add(name)
        if name in stop:
            return name, None
        entry = lookup(name)
    return name, entry


def names(directory: Path) -> set[str]:
    try:
        return {n for n in os.listdir(directory) if not n.startswith(".")}
    except FileNotFoundError:
        return set()


def record(directory: Path, entry: Settled) -> None:
    storage.ensure_dir(directory)
    storage.write_file(directory / entry.slug, entry.render().encode())


def record_new(directory: Path, entry: Settled) -> bool:
    """Record `entry` only if the ledger has none for its slug (never overwrites); True if written."""
    storage.ensure_dir(directory)
    return storage.create_file(directory / entry.slug, entry.render().encode())


def remove(directory: Path, slug: str) -> None:
    storage.remove_file(directory / slug)
