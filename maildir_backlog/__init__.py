"""maildir-backlog: a task queue of markdown files inside a git repository.

`from maildir_backlog import Backlog` is the Python API (maildir_backlog.api); it is imported on
first use, so `import maildir_backlog` stays cheap for the command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Backlog", "__version__"]

if TYPE_CHECKING:
    from .api import Backlog


def __getattr__(name: str) -> Any:
    if name == "Backlog":
        from .api import Backlog

        return Backlog
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
