"""What the command does before it imports anything heavy: defer the network modules.

plumbum's local-path module imports `urllib.request` at its top for one URL helper
(`LocalPath.as_uri`), and with it `http.client`, `email`, `ssl` and `hashlib`: about half of
plumbum's import time, for code this tool never calls. `defer_network_imports` puts a stand-in
module under the name `urllib.request`; the real module is imported on the stand-in's first
attribute access — never, in this tool.
Only the command's plumbum door does this (`cliapp`), before plumbum is imported; the fast door
(`cli.quick`) imports no plumbum at all, and the Python API leaves the interpreter's imports alone.
`importlib.util.LazyLoader` cannot stand in for this on Python 3.11: the import statement reads
the module's `__spec__`, and any attribute read makes a lazy module load (tried, session 11).
"""

from __future__ import annotations

import importlib
import sys
import types

DEFERRED = ("urllib.request",)


class _Deferred(types.ModuleType):
    """A module that stands in for a real one until an attribute is asked for."""

    def __getattr__(self, attr: str) -> object:
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attr)


def defer_network_imports() -> None:
    for name in DEFERRED:
        if name not in sys.modules:
            sys.modules[name] = _Deferred(name)
