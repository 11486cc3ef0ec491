"""Buckets 1 and 2, the repairs that settle an in-flight task: finishing a move whose terminal
line is already written (lifecycle.finish_move) and failing a task past its budget
(lifecycle.fail_if_timed_out). Both re-check under the task's lock; a task that changed in
between was acted on by someone else and is skipped silently.

On maildir-shared the settled copy lands in this worktree, so `Backend.apply` drops this
branch's stale copy of the task as it settles; such a drop is reported in DUPLICATE."""

from __future__ import annotations

import os
from collections.abc import Iterator

from .. import git
from ..backend import Located
from ..clock import format_duration, format_ts, now_utc
from ..errors import BacklogError, Busy, Conflict
from ..lifecycle import (
    clock_start,
    fail_if_timed_out,
    finish_move,
    is_timed_out,
    terminal_event,
    timeout_reason,
)
from ..logline import LogEntry
from ..task import Task, is_slug
from .findings import ADVANCED, DUPLICATE, TIMED_OUT
from .sweep import Sweep


def _describe(outcome: str, entry: LogEntry) -> str:
    what = "advanced to=done" if outcome == "done" else outcome
    return f"log says {what} at {format_ts(entry.ts)}"


def _stale_copies(sw: Sweep, slug: str) -> list[Located]:
    """This branch's tracked copies that `Backend.apply` may drop as the task settles here."""
    if not sw.shared_backend:
        return []
    return [loc for loc in sw.backend.locate(slug) if not loc.shared and loc.pile != "done"]


def _report_dropped(sw: Sweep, slug: str, flying: Located, stale: list[Located]) -> None:
    for loc in stale:
        if not os.path.lexists(loc.path):
            sw.add(
                DUPLICATE,
                sw.show(loc.pile, slug),
                f"an older copy of {sw.show(flying.pile, slug)}"
                " (a stale branch copy, dropped as the task settles here): removed",
                slug,
                fixed=True,
            )


# -- 1. advanced but not moved ----------------------------------------------------------------
def _in_flight(sw: Sweep) -> Iterator[tuple[str, Located, Task]]:
    """Each in-flight task not handled yet (asked as it comes), with its one live copy, read; an
    unreadable one is skipped (LAYOUT reports it), as is one with duplicates (DUPLICATE first)."""
    for slug in sorted(sw.backend.in_flight()):
        if not is_slug(slug) or slug in sw.handled:
            continue
        try:
            loc = sw.single_in_flight(slug)
            if loc is not None:
                yield slug, loc, sw.backend.load(loc)
        except (BacklogError, FileNotFoundError):
            continue


def advanced(sw: Sweep) -> None:
    for slug, loc, task in _in_flight(sw):
        term = terminal_event(task)
        if term is None:
            continue
        outcome, dest, entry = term
        shown = sw.show(loc.pile, slug)
        if sw.dry_run:
            sw.add(ADVANCED, shown, f"{_describe(outcome, entry)}: would move to {dest}/", slug, fixed=True)
            sw.handled.add(slug)
            continue
        try:
            done = _finish_move(sw, slug)
        except (Conflict, Busy):
            continue
        except BacklogError as exc:
            sw.add(ADVANCED, shown, f"{_describe(outcome, entry)}: could not move it: {exc.message}", slug, error=True)
            sw.handled.add(slug)
            continue
        if done is not None:
            sw.add(ADVANCED, shown, f"{_describe(outcome, entry)}: moved to {done}/", slug, fixed=True)
            sw.handled.add(slug)


def _finish_move(sw: Sweep, slug: str) -> str | None:
    """Re-check under the lock, then lifecycle.finish_move. The destination pile, or None."""
    with sw.backend.lock(slug):
        loc = sw.single_in_flight(slug)
        if loc is None:
            return None
        data = sw.backend.read(loc)
        term = terminal_event(sw.backend.load(loc, data))
        if term is None:
            return None
        stale = _stale_copies(sw, slug)
        dest = finish_move(sw.ctx, slug, loc, data, term)
        _report_dropped(sw, slug, loc, stale)
        return dest


# -- 2. timed out -----------------------------------------------------------------------------
def timed_out(sw: Sweep) -> None:
    now = now_utc()
    for slug, loc, task in _in_flight(sw):
        try:
            if terminal_event(task) is not None or not is_timed_out(task, loc, now):
                continue
            reason = timeout_reason(task, loc)
        except (BacklogError, FileNotFoundError):
            continue
        shown = sw.show(loc.pile, slug)
        if sw.dry_run:  # what the first take or advance anywhere would fail: say how old it is
            age = format_duration(now - clock_start(task, loc))
            sw.add(TIMED_OUT, shown, f"would fail: {reason}, age={age}", slug, fixed=True)
            sw.handled.add(slug)
            continue
        try:
            written = _fail_timed_out(sw, slug)
        except git.GitError as exc:
            sw.add(TIMED_OUT, shown, f"{reason}: could not fail it: {exc.message}", slug, error=True)
            sw.handled.add(slug)
            continue
        except BacklogError:
            continue  # another worker or janitor acted first
        if written is not None:
            sw.add(TIMED_OUT, shown, f"failed: {written}", slug, fixed=True)
            sw.handled.add(slug)


def _fail_timed_out(sw: Sweep, slug: str) -> str | None:
    """Fail it (lifecycle.fail_if_timed_out) and report this branch's stale copies dropped meanwhile."""
    loc = sw.single_in_flight(slug)
    if loc is None:
        return None
    stale = _stale_copies(sw, slug)
    reason = fail_if_timed_out(sw.ctx, slug)
    if reason is not None:
        _report_dropped(sw, slug, loc, stale)
    return reason
