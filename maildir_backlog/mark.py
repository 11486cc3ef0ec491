"""The clone's backend, kept in the shared root (`Layout.backend_mark`; SPEC §7.11).

A backend switch is a clone-wide event, but `migrate --to` commits on one branch: the other
worktrees still declare the old backend until they merge it, and under the old rules they would
claim what the switch moved (maildir-git does not look at the shared root; maildir-shared no
longer sees the tasks moved into a branch). So the migration records here the backend it switched
to and its branch, one line `<backend> branch=<branch>`, before its commit, and the move protocol
(`Backend.refuse_if_migrated`) moves nothing in a worktree that declares another backend. A clone
that never migrated has no mark, and no check.
"""

from __future__ import annotations

import contextlib
import os

from . import storage
from .layout import Layout


def raw(layout: Layout) -> bytes | None:
    """The mark as it is (to put it back), None when there is none."""
    try:
        return layout.backend_mark.read_bytes()[:4096]
    except OSError:
        return None


def read(layout: Layout) -> tuple[str, str] | None:
    """(backend, branch) the clone last migrated to; None when it never migrated (or the mark is empty)."""
    parts = (raw(layout) or b"").decode("utf-8", "replace").split()
    if not parts:
        return None
    branch = next((p.removeprefix("branch=") for p in parts[1:] if p.startswith("branch=")), "?")
    return parts[0], branch


def render(backend: str, branch: str) -> bytes:
    return f"{backend} branch={branch}\n".encode()


def write(layout: Layout, data: bytes | None) -> None:
    """Set the mark to `data` (from `render`, or as `raw` read it), or remove it (None)."""
    if data is None:
        storage.remove_file(layout.backend_mark)
        with contextlib.suppress(OSError):
            os.rmdir(layout.backend_mark.parent)  # only when empty: as if the clone had never migrated
    else:
        storage.ensure_dir(layout.backend_mark.parent)
        storage.write_file(layout.backend_mark, data)
