"""The read model: one answer, for one slug or for the whole clone, to where a task is and what
has become of it (SPEC §4 *One queue per clone*, §5 *Truthful views*, §8).

It joins this worktree's piles and the shared ones, the intake branch, the settled history of
every branch (the ledger, filled from the branches' history before a claim), and the remote's
refs. Every verb and every view asks here, and nothing else: no command reads a pile, the
ledger, the intake branch, the history or the remote itself (tests/test_layers.py fails one
that does). So two places never answer differently: `show`, `take`, `advance`, `retry`,
`rename` and `add` see one slug the same way, and `status`, `list`, `ready` and auto-pick see
one queue. The janitor (`maintain`), the one reader of raw piles, repairs what this model hides.

A command makes one `Model(ctx)` and asks it questions: of one slug (`one.OneTask`: `task`,
`one`, `in_flight`, `claimable`, `shown`, …; of a failed/ copy, `failed.FailedCopies`: `retryable`,
`superseded_here`) or of the whole clone
(`whole.WholeClone`: `clone`, `todo`, `offered`, `picks`, …). Each method answers itself from the
lower modules; none only passes a call on. What a command may ask a lower module itself (the
lifecycle's rules, the remote's marks in `crossclone`, the context's notes) it asks there.
"""

from __future__ import annotations

from ..backend import Located
from ..context import Context
from ..header import Summary
from ..typed import TYPE_CHECKING, Any
from .failed import FailedCopies
from .one import Shown, Truth
from .whole import Clone, WholeClone

if TYPE_CHECKING:
    from ..crossclone import RemoteMarks
    from ..queue import TodoState

__all__ = ["Clone", "Located", "Model", "RemoteMarks", "Shown", "Summary", "TodoState", "Truth"]


class Model(FailedCopies, WholeClone):
    """The read model of one opened backlog: made once per command, asked its questions."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx


def __getattr__(name: str) -> Any:
    """`RemoteMarks`, imported from `crossclone` when first asked for: the remote's modules load
    only in a call that reads the remote (`maildir_backlog/__init__.py` defers its API the same way);
    `TodoState` from `queue` likewise, which only the verbs that rank or read the intake branch load."""
    if name == "RemoteMarks":
        from ..crossclone import RemoteMarks

        return RemoteMarks
    if name == "TodoState":
        from ..queue import TodoState

        return TodoState
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
