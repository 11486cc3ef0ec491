"""`backlog maintain`, the janitor (SPEC §6): find what a crash, a timeout or a hand edit left
behind, repair what can be repaired without judgement, report the rest.

Buckets, printed in this order, one line each: `BUCKET: path (detail)`, then
`OK: N todo, N in flight`. Only the first three ever move files; `--dry-run` moves none and
says what it would do. The other five are advisory (`--strict` exits 1 when any is non-empty).

1. ADVANCED BUT NOT MOVED: an in-flight file whose last transition in its own log is terminal
   but which is still in flight. Besides `advanced to=done` (the spec's example), a trailing
   `cancelled` or `failed` line counts too: the verbs write the terminal line into the in-flight
   copy before the copy leaves flight, so a crash in between leaves exactly this. The move is
   finished with the data unchanged (the log already tells the story): `advanced to=done` and
   `cancelled` go to `done/`, `failed` to `failed/`; the ledger records the settlement on this
   worktree's branch (where the terminal copy is committed). Progress lines after the terminal
   line are ignored; any other transition after it (a rescue, a retry) means it is live.
2. TIMED OUT: an in-flight task past its budget is failed with
   `timeout: budget=…, claimed=…, claimer=…`, exactly as the advance prelude does.
3. DUPLICATE: the same slug in two piles. Repaired only when one copy provably contains every
   other one (their bytes are a prefix of it: the spec never changes and logs only grow): the
   containing copy is kept (the longest; on equal bytes the later pile), the others removed
   (tracked copies with a commit `maintain(slug) remove duplicate <pile>/ copy`, shared ones
   after that commit). A `done/` copy is never removed in favour of a copy outside `done/`.
   A tracked deletion that never got committed (a claim that crashed between removing the todo
   file and committing that) is committed the same way, once the deleted content is shown to be
   a prefix of the surviving copy; a surviving copy that was never committed is committed with it.
   Likewise a tracked task modified in place but never committed (maildir-git's `progress` or
   `rescue` killed before its commit) is committed when HEAD's copy is a prefix of it and all
   that follows is whole log lines; any other uncommitted edit is the user's and left alone.
   On maildir-shared, other branches legitimately keep their committed copy of a task that is
   in flight (SPEC §7.2): a tracked copy outside `done/` next to a shared in-flight copy whose
   claim of record is on *another* branch is such a stale branch copy, not a duplicate; it is
   neither reported nor touched here (bucket 7 reports it once the task is settled). When the
   janitor itself settles such a task (buckets 1 and 2), the settled copy lands in this worktree,
   so this branch's stale copy is removed first, under the same lock, in its own commit: the
   branch never shows the task in two piles (which `retry` would refuse).
   A failed/ copy that a later `retry` superseded (the intake branch's todo/ copy is of a later
   generation: a retry from this branch killed or refused between its landing there and its
   removal of this copy) is removed in this branch's own commit, when it is the task's one copy
   here, committed and unchanged (`maintain(slug) remove failed/ copy a retry reopened`).
4. UNRESOLVABLE DEPS: a dependency of a task outside `done/` that names no task in any pile
   (shared piles and `failed/` included) and, on maildir-shared, no task the ledger knows. The
   dependencies of finished tasks no longer matter and are not checked.
5. CYCLES: each elementary cycle among tasks outside `done/` once, from its smallest slug.
6. ORPHANED SHARED IN-FLIGHT (maildir-shared): the claim of record names a branch that exists
   neither locally nor as a remote-tracking branch (or there is no claim of record).
7. SETTLED ELSEWHERE (maildir-shared): a `todo/` copy the ledger blocks (`Settled.blocks`).
8. LAYOUT: the self-heal's findings (repairs the command made on start, or in a dry run the
   repairs it would make), invalid task files, stray entries in the shared root and its piles,
   and temporary files (`.tmp-*`) left by a crashed write: removed at once, unless a live writer
   still holds its flock on it (a write in progress, however old).
   Also `backlog/.gitattributes` (no line-ending conversion under backlog/), added and committed
   when missing, and (once per worktree, with the rule in place) each tracked file under backlog/
   git had checked out with CRLF given its committed bytes back, before any repair compares a
   copy with git's blob.
   First of all, a `migrate` killed midway (its journal is still in the git dir) is undone, or
   finished when its commit landed (`migrate.recover`), before the self-heal looks at the layout.

Every repair takes the task's lock and re-checks on fresh state; a change in between means a
worker or another janitor acted, and the task is skipped silently. So two janitors and any number
of workers can run together, and a second run right after a first finds nothing to fix. A repair
that fails (a refusing commit hook) is reported in its bucket and makes the exit code 1.
"""

from __future__ import annotations

from ... import manyfiles, ticker
from ...context import Context, Result
from ...repair import duplicates, layout_bucket, moves, remote_bucket, renames
from ...repair.sweep import Sweep
from ...state import Model
from . import advisory
from .cycles import MAX_CYCLES, find_cycles
from .findings import ADVISORY, BUCKETS, Finding, assemble, merged

__all__ = ["ADVISORY", "BUCKETS", "MAX_CYCLES", "Finding", "find_cycles", "maintain"]

# The verb (this package) reports; the repairs that move, commit or delete live in the kernel
# (`maildir_backlog/repair/`), so that no command touches git, files or the remote itself:
#   findings.py       (here) the result assembled from the findings, the REMOTE bucket in front
#   advisory.py       (here) buckets 4-7: deps, cycles, orphans, settled elsewhere
#   cycles.py         (here) the cycle search
#   repair/findings.py   the buckets and a finding
#   repair/sweep.py      the state one run shares: findings, tasks handled, copies gone, live copies
#   repair/duplicates.py bucket 3: duplicates, uncommitted deletions and uncommitted log lines
#   repair/renames.py    bucket 3: a rename killed before its commit, finished
#   repair/moves.py      buckets 1-2: finishing a move, failing a timeout (the lifecycle's fixes)
#   repair/layout_bucket.py  bucket 8: self-heal findings, invalid files, strays, temporary files
#   repair/remote_bucket.py  REMOTE (SPEC §8, with `remote:`): the remote's record, swept first
#   repair/remote_reconcile.py  REMOTE's first step: this clone brought to the remote's record


def maintain(ctx: Context, dry_run: bool = False, strict: bool = False, recovered: list[str] | None = None) -> Result:
    """One sweep: repairs first (duplicates, so that a kept in-flight copy whose log is already
    terminal is moved on the same run; then terminal in-flight files; then timeouts), then the
    advisory buckets on the repaired state."""
    sw = Sweep(ctx, dry_run, recovered=list(recovered or []))
    layout_bucket.killed_commits(sw)  # before anything reads the index
    layout_bucket.line_endings(sw)  # before any repair compares a copy with git's blob of it
    model = Model(ctx)
    model.known(whole=True)  # history counts: what other branches settled is known first
    with ticker.over("maintain", 4) as tick:  # on a terminal, long sweeps say how far they got
        remote = remote_bucket.sweep(sw)  # SPEC §8: the remote's record first, it is the authority
        renames.renames(sw)  # a rename killed before its commit: finished first
        duplicates.duplicates(sw)
        tick()
        moves.advanced(sw)
        moves.timed_out(sw)
        tick()
        duplicates.unsaved_logs(sw)
        duplicates.settled_copies(sw)
        duplicates.leftovers(sw)
        duplicates.superseded(sw, model.superseded_here)
        tick()
        found = advisory.census(sw)
        advisory.report(sw, found)
        layout_bucket.report(sw, found.invalid, found.unreadable)
        tick()
    flying = set().union(*(model.tasks_in(pile) for pile in ctx.pipeline.flying))
    result = assemble(sw.findings, len(model.tasks_in("todo")), len(flying), dry_run, strict)
    return merged(result, sw, remote).plus(stderr=manyfiles.advice(ctx.repo))
