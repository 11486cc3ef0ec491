"""Progress of long work (`maintain`, `migrate`, the history backfill), told by the face that
asked for it.

The kernel counts (`with over("reading history", n) as tick: … tick()`) and never prints. A face
that wants progress shown installs a display for the duration of a call (`telling(make)`); the
command does so only when stderr is a terminal (`clicall.py`, with plumbum's progress bar), so pipes,
`--json`, the API and the MCP server see nothing. A display appears only once the work has run
for `SHOW_AFTER` seconds (`BACKLOG_PROGRESS_AFTER` overrides it): quick calls stay silent. Counting
costs a clock read per tick; nothing at all when no display is installed.
"""

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from time import monotonic

from .typed import Protocol

SHOW_AFTER = 2.0  # seconds of work before a display appears
REDRAW = 0.1  # seconds between two redraws


class Display(Protocol):
    """What a face shows: `update(done)` of the total it was made with, then `close()`."""

    def update(self, done: int) -> None: ...

    def close(self) -> None: ...


Make = Callable[[str, int], Display]
_make: ContextVar[Make | None] = ContextVar("ticker", default=None)


@contextmanager
def telling(make: Make) -> Iterator[None]:
    """Within the block, long work is shown through `make(label, total)`."""
    token = _make.set(make)
    try:
        yield
    finally:
        _make.reset(token)


def _show_after() -> float:
    try:
        return max(0.0, float(os.environ.get("BACKLOG_PROGRESS_AFTER", SHOW_AFTER)))
    except ValueError:
        return SHOW_AFTER


class Ticker:
    """Counts one piece of work; shows it through the installed display once it runs long."""

    __slots__ = ("_drawn", "_start", "_wait", "display", "done", "label", "make", "total")

    def __init__(self, label: str, total: int, make: Make | None) -> None:
        self.label, self.total, self.make, self.done = label, total, make, 0
        self.display: Display | None = None
        self._start = self._drawn = monotonic() if make is not None else 0.0
        self._wait = _show_after() if make is not None else 0.0

    def __call__(self, step: int = 1) -> None:
        self.done += step
        if self.make is None:
            return
        now = monotonic()
        if self.display is None:
            if now - self._start < self._wait:
                return
            self.display = self.make(self.label, self.total)
        elif now - self._drawn < REDRAW and self.done < self.total:
            return
        self._drawn = now
        self.display.update(min(self.done, self.total))

    def close(self) -> None:
        if self.display is not None:
            self.display.close()


@contextmanager
def over(label: str, total: int) -> Iterator[Ticker]:
    """Count `total` steps of the work named `label` (shown as `label: 42% complete …`)."""
    tick = Ticker(label, total, _make.get() if total > 0 else None)
    try:
        yield tick
    finally:
        tick.close()
