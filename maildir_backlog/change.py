"""The one move protocol (docs/design.md, *One move protocol*): every writer of the backlog
declares what it does as a `Change`, and `run` is the only code that carries one out.

A `Change` is data: an ordered list of steps (every write the tool makes: the remote's refs,
the ledger, files and symlinks, the intake branch's plumbing commit, a hook, the clone's config,
a migration's checkout; each says its precondition, effect and undo), the commit that ends it,
and what follows the commit (the shared copies removed, a settlement recorded). `run` performs
the steps in order inside one `storage.Transaction`, so every step is undone, newest first, when
a later one or the commit fails (SPEC §7.3). Only then, with the commit landed, do the `after`
steps run, which are never undone. Each step type, with the small function that carries it out,
is in `steps`, and `_step` finds the function by the step's type; `Then` and `Unstage` are here.

What a writer cannot forget, because `run` does it and nothing else can (`gitwrite` refuses a
git write outside `run`; AST tests keep `gitcommit` and `storage.Transaction` here):
* the commit holds exactly the tracked paths the steps name, with the user's other staged work
  untouched, and a failing commit undoes everything before it;
* an exclusive create never overwrites: a taken name refuses, or resumes an interrupted
  identical move when the writer says so;
* a ledger entry is undone with the move that made it, and a remote record with it too.
Which ledger entry and which remote record a move needs is the backend's knowledge
(`Backend.move`); a verb names only the slug, the pile and the bytes.
"""

from collections.abc import Iterable

from . import gitcommit, gitwrite, storage, ticker
from .git import Repo
from .steps import EXECUTORS, Executor
from .steps import BranchCommit as BranchCommit
from .steps import Branches as Branches
from .steps import Config as Config
from .steps import Crash as Crash
from .steps import Create as Create
from .steps import Dirs as Dirs
from .steps import Executable as Executable
from .steps import Keep as Keep
from .steps import Ledger as Ledger
from .steps import Link as Link
from .steps import Memo as Memo
from .steps import Memory as Memory
from .steps import Nested as Nested
from .steps import Publish as Publish
from .steps import Record as Record
from .steps import Remove as Remove
from .steps import Rename as Rename
from .steps import Restore as Restore
from .steps import Rmdir as Rmdir
from .steps import Settle as Settle
from .steps import Track as Track
from .steps import Travel as Travel
from .steps import Unlink as Unlink
from .steps import Write as Write
from .typed import Any, NamedTuple


class Unstage(NamedTuple):
    """Put these index entries back as in HEAD before the commit (`git add -A` refuses a path
    already gone from the index)."""

    paths: tuple[str, ...]


class Then(NamedTuple):
    """Another change, run to its own commit: here, or in another worktree (`repo`, with its
    `ledger`: the intake worktree's landing). Not undone when a later step of this one fails (this
    branch's stale copies of a task dropped before it settles)."""

    change: "Change"
    repo: Repo | None = None
    ledger: Ledger | None = None


Step = (
    Publish
    | Settle
    | Create
    | Write
    | Remove
    | Dirs
    | Link
    | Unlink
    | Rmdir
    | Keep
    | Track
    | Unstage
    | BranchCommit
    | Travel
    | Memory
    | Record
    | Restore
    | Config
    | Rename
    | Executable
    | Nested
    | Then
    | Crash
)


class Change(NamedTuple):
    """Everything one writer does, in order; see the module's docstring. (The steps are named
    tuples, not dataclasses: two dozen of them, made at every command's start, cost a tenth as much.)"""

    steps: tuple[Step, ...]
    message: str | None = None  # the commit of the tracked paths (None: nothing tracked may change)
    also: tuple[str, ...] = ()  # pathspecs committed as the work tree has them (`gitcommit.commit_paths`)
    ignored: bool = False  # the tracked paths may be ignored by .gitignore
    after: tuple[Step, ...] = ()  # once the commit landed: never undone
    restore_index: bool = False  # on undo, the tracked paths' index entries go back as in HEAD too

    def tracked(self) -> list[str]:
        """The paths the commit holds, in the order the steps name them (each once)."""
        seen: dict[str, None] = {}
        for step in self.steps:
            if isinstance(step, Track):
                seen.update(dict.fromkeys(step.paths))
            elif isinstance(step, Create | Write | Remove | Link) and step.tracked is not None:
                seen[step.tracked] = None
        return list(seen)


def run(change: Change, repo: Repo, ledger: Ledger | None = None) -> None:
    """Carry out `change`: its steps in one transaction, its commit, then its `after` steps. Only
    here may git be written (`gitwrite.protocol`)."""
    with gitwrite.protocol():
        _run(change, repo, ledger)


def _run(change: Change, repo: Repo, ledger: Ledger | None) -> None:
    with storage.Transaction() as tx:
        if change.restore_index:
            tx.on_undo(lambda: gitcommit.unstage(repo, change.tracked()))
        made: dict[str, None] = {}
        with ticker.over("writing", len(change.steps)) as tick:  # a migration's thousands of steps
            for step in change.steps:
                made.update(dict.fromkeys(_step(step, tx, repo, ledger) or ()))
                tick()
        tracked = list(dict.fromkeys(change.tracked() + list(made)))
        if tracked:
            if change.message is None:
                raise AssertionError("tracked change without a commit message")
            gitcommit.commit_paths(repo, tracked, change.message, ignored=change.ignored, also=change.also)
    for step in change.after:
        _step(step, storage.Transaction(), repo, ledger)  # nothing to undo any more: the commit landed


def killed_commits(repo: Repo, dry_run: bool = False) -> list[str]:
    """A commit of the tool's killed while it held git's index lock, finished or let go (before
    anything reads this worktree's index; `gitcommit.settle`): what was done, one line each."""
    return gitcommit.settle(repo, dry_run)


def _step(step: Step, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> Iterable[str] | None:
    """Carry out one step (its executor, by its type); returns the tracked paths a `Nested` step
    left for the commit."""
    return _EXECUTORS[type(step)](step, tx, repo, ledger)


def _unstage(step: Unstage, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> None:
    gitcommit.unstage(repo, list(step.paths))


def _then(step: Then, tx: storage.Transaction, repo: Repo, ledger: Ledger | None) -> None:
    if step.repo is None:
        run(step.change, repo, ledger)
    else:
        run(step.change, step.repo, step.ledger)


_EXECUTORS: dict[type[Any], Executor] = {**EXECUTORS, Unstage: _unstage, Then: _then}
