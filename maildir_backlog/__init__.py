"""maildir-backlog: a task queue of markdown files inside a git repository.

`from maildir_backlog import Backlog` is the Python API (maildir_backlog.api), with its result
types; they are imported on first use, so `import maildir_backlog` stays cheap for the command line.
"""

from __future__ import annotations

__version__ = "0.1.0"

TYPE_CHECKING = False  # (`typing` is not imported at run time: `maildir_backlog.typed`)
if TYPE_CHECKING:
    from typing import Any

    from .api import *  # noqa: F403  (`api.__all__`: Backlog and its result types)


def __getattr__(name: str) -> Any:
    """The API's names (`api.__all__`), and `__all__` itself (they and `__version__`), read from the
    API's module, imported then. Only `__all__` or a capitalised name (the API's are its classes)
    imports it: the lower-case name of a submodule, looked up as it is imported, never does."""
    if name == "__all__" or name[:1].isupper():
        from . import api

        if name == "__all__":
            return [*api.__all__, "__version__"]
        if name in api.__all__:
            return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
