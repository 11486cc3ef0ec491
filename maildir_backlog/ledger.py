"""The ledger of settled tasks, kept in the shared root (SPEC §7.2).

One file per slug, `<shared root>/.ledger/<slug>`, holding one line:

    <YYYY-MM-DDTHH:MM:SSZ> <done|cancelled|failed|retried> branch=<branch> claimer=<id>

An entry is written (atomically) *before* a task leaves flight for `done/` or `failed/`, after
the task's own log already records the terminal event; a crash therefore leaves a task either
settled (maybe still in flight with a terminal log line, which `maintain` finishes moving) or
still in flight, never lost and forgotten.

`retry` does not forget the entry: after its commit it rewrites it as `retried` with the retry's
own timestamp. A todo copy is claimable only if its own log has a `retried` line at or after the
entry's time, so the retried copy (on the branch that retried it, and on every branch that merges
it) is claimable while stale copies elsewhere stay blocked. A crash between the retry commit and
the rewrite is harmless: the retried copy already carries the line that unblocks it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from . import storage
from .task import Task, format_ts, parse_ts


@dataclass(frozen=True)
class Settled:
    slug: str
    ts: datetime
    outcome: str
    branch: str
    claimer: str

    def render(self) -> str:
        return f"{format_ts(self.ts)} {self.outcome} branch={self.branch} claimer={self.claimer}\n"

    def blocks(self, task: Task | None) -> bool:
        """Does this entry make `task` (a todo copy) a stale, unclaimable copy?"""
        if task is None:
            return True
        return not any(e.kind == "retried" and e.ts >= self.ts for e in task.log)


def _parse(slug: str, text: str) -> Settled | None:
    parts = text.split()
    if len(parts) < 2:
        return None
    fields = dict(p.split("=", 1) for p in parts[2:] if "=" in p)
    try:
        ts = parse_ts(parts[0])
    except Exception:
        return None
    return Settled(slug, ts, parts[1], fields.get("branch", "?"), fields.get("claimer", "?"))


def lookup(directory: Path, slug: str) -> Settled | None:
    try:
        text = (directory / slug).read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, NotADirectoryError):
        return None
    return _parse(slug, text) or Settled(slug, datetime.min.replace(tzinfo=UTC), "done", "?", "?")


def names(directory: Path) -> set[str]:
    try:
        return {n for n in os.listdir(directory) if not n.startswith(".")}
    except FileNotFoundError:
        return set()


def record(directory: Path, entry: Settled) -> None:
    storage.ensure_dir(directory)
    storage.write_file(directory / entry.slug, entry.render().encode())


def remove(directory: Path, slug: str) -> None:
    storage.remove_file(directory / slug)
