"""What the command does before it imports anything heavy: defer the modules it never uses.

plumbum's local-path module imports `urllib.request` at its top for one URL helper
(`LocalPath.as_uri`), and with it `http.client`, `email`, `ssl` and `hashlib`: about half of
plumbum's import time, for code this tool never calls. `pathlib`, which every call imports,
imports `urllib.parse` for `Path.as_uri`, and that imports `ipaddress` (~1.5 ms, a fortieth of an
`add`) for one check of a bracketed host in `urlsplit`, which this tool never calls either.
`defer_network_imports` (plumbum's door, `cliapp`, before plumbum is imported) and
`defer_unused_imports` (`cli.main`, the process's own call, before anything else is imported) put a
stand-in module under such a name; the real module is imported on the stand-in's first attribute
access, which in this tool never comes. The Python API leaves the interpreter's imports alone.
`importlib.util.LazyLoader` cannot stand in for this on Python 3.11: the import statement reads
the module's `__spec__`, and any attribute read makes a lazy module load (tried, session 11).
"""

from __future__ import annotations

import importlib
import sys
import types

DEFERRED = ("urllib.request",)  # by plumbum's door
UNUSED = ("ipaddress",)  # by every call the command runs


class _Deferred(types.ModuleType):
    """A module that stands in for a real one until an attribute is asked for."""

    def __getattr__(self, attr: str) -> object:
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attr)


def defer_network_imports() -> None:
    _defer(DEFERRED)


def defer_unused_imports() -> None:
    _defer(UNUSED)


def _defer(names: tuple[str, ...]) -> None:
    for name in names:
        if name not in sys.modules:
            sys.modules[name] = _Deferred(name)
