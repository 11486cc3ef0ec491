"""maildir-backlog: a task queue of markdown files inside a git repository.

`from maildir_backlog import Backlog` is the Python API (maildir_backlog.api), with its result
types; they are imported on first use, so `import maildir_backlog` stays cheap for the command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = [
    "Backlog",
    "Claim",
    "Guide",
    "Listing",
    "Moved",
    "ReadyTask",
    "RemoteStatus",
    "Reply",
    "Report",
    "Status",
    "TaskView",
    "Where",
    "__version__",
]

if TYPE_CHECKING:
    from .api import (
        Backlog,
        Claim,
        Guide,
        Listing,
        Moved,
        ReadyTask,
        RemoteStatus,
        Reply,
        Report,
        Status,
        TaskView,
        Where,
    )


def __getattr__(name: str) -> Any:
    if name in __all__ and name != "__version__":
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
