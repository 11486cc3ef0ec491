"""History counts (SPEC §7.10): tasks settled before this tool (or this clone) knew of them.

A backlog written by the older bash tool, or settled on a branch that was fetched into this
clone, holds tasks in `done/` and `failed/` that the ledger has never heard of; another branch's
`todo/` copy of such a task must still never be claimed. So before a claim (and in `maintain` and
`migrate --to maildir-shared`) every local and remote-tracking branch's `done/` and `failed/` is
read through git objects, and each task found there that the ledger does not know yet is
recorded: its outcome and time from its own log (its last terminal line; the commit's file
alone when the log has none), its generation, and the branch where it was found.

Every layout the tool reads counts (SPEC §7.11): the folders below `done/` and `failed/` (the
older flat layout's `done/<year>/<slug>.md`) are read too, and a settled copy that cannot be read
(not UTF-8, a NUL byte, a blob git does not hand over) still counts as settled: it is recorded
without a generation, at the time it was found, so it blocks every stale copy a retry did not
follow (a readable copy of the same task on another branch, when there is one, wins).

Cheap on repeat runs: the root tree id of every branch scanned is remembered in the shared root,
so a run where no branch moved costs one `git for-each-ref`. Entries are only ever created, never
overwritten (an exclusive create), so a backfill can never undo what a live verb recorded.
"""

from __future__ import annotations

import contextlib
import json
from datetime import datetime

from . import git, ledger, storage, ticker
from .change import Change, Record, Step, run
from .clock import now_utc
from .errors import BacklogError, InvalidInput
from .intake import cat_blobs
from .layout import BACKLOG, TASK_SUFFIX, Layout, parse_settled_rel
from .ledger import Settled
from .logline import generation, read_log
from .project import FAILED, Project
from .task import is_slug

PILES = ("done", FAILED)
_PILE_OUTCOME = {"done": "done", FAILED: "failed"}
UNREAD = -1  # the generation of a settled copy that cannot be read: any readable copy outranks it


def backfill(repo: git.Repo, project: Project, first_only: bool = False) -> list[str]:
    """Record every settled task of every branch the ledger lacks; one line per task recorded.

    `first_only` (a claim): only when this clone was never read yet, so a claim costs a `stat`
    once the history is known; `maintain` and `migrate` read what changed since."""
    if not project.shares_flight:
        return []
    layout = Layout.of(repo)
    if first_only and layout.history.exists():
        return []
    trees = _branch_trees(repo)
    if trees is None:
        return []
    seen = _scanned(layout)
    todo = [t for t in trees if t not in seen]
    if not todo:
        return []
    known = ledger.names(layout.ledger)
    # a task in flight right now is live: its own settlement will be recorded, not an old copy's
    known |= {
        e.name[: -len(TASK_SUFFIX)] for p in project.pipeline.flying for e in storage.entries(layout.shared_pile(p))
    }
    found: dict[str, tuple[int, int, str, str, str]] = {}  # slug -> (gen, rank, outcome, ts, branch) best
    blobs: dict[tuple[str, str], tuple[str, str]] = {}  # (blob, slug) -> (pile, branch): one blob may be two tasks
    with ticker.over("reading the history of every branch", len(todo)) as tick:
        for tree in todo:
            tick()
            _scan(repo, tree, _short(trees[tree]), known, blobs)
    _best_copies(repo, blobs, found)
    written: list[str] = []
    steps: list[Step] = []
    for slug, (gen, _rank, outcome, ts, branch) in sorted(found.items()):
        when = datetime.fromisoformat(ts) if ts else now_utc().replace(microsecond=0)
        steps.append(
            Record(layout.ledger, Settled(slug, when, outcome, branch, "?", None if gen == UNREAD else gen), written)
        )
    run(Change(tuple(steps)), repo)  # each entry only where the ledger has none (an exclusive create)
    _remember(layout, set(trees))
    return [f"{slug}: {found[slug][2]} on branch {found[slug][4]} (from its history)" for slug in written]


def _branch_trees(repo: git.Repo) -> dict[str, str] | None:
    """tree → the first ref (a branch, local or remote) whose tip has it; None when git fails."""
    code, out, _err = git.call(
        repo.toplevel, "for-each-ref", "--format=%(refname)%00%(tree)", "refs/heads", "refs/remotes"
    )
    if code != 0:
        return None
    trees: dict[str, str] = {}
    for line in out.decode("utf-8", "replace").splitlines():
        ref, _, tree = line.partition("\0")
        if tree and not ref.endswith("/HEAD"):
            trees.setdefault(tree, ref)
    return trees


def _best_copies(
    repo: git.Repo, blobs: dict[tuple[str, str], tuple[str, str]], found: dict[str, tuple[int, int, str, str, str]]
) -> None:
    """Each slug's best settled copy among `blobs` ((blob, slug) → pile, branch) into `found`
    (slug → gen, rank, outcome, ts, branch): the highest generation and rank wins. Two tasks of the
    same bytes are two entries (keyed by the blob alone, one of them went unrecorded)."""
    fetched = cat_blobs(repo, sorted({blob for blob, _slug in blobs}))
    for (blob, slug), (pile, branch) in blobs.items():
        data = fetched.get(blob)
        data = data if isinstance(data, bytes) else None  # over the size bound: never read, still counts
        candidate = _outcome(data) if data is not None else None
        # a settled copy that cannot be read still counts as settled; a readable copy elsewhere wins
        gen, rank, outcome, ts = candidate if candidate is not None else (UNREAD, 0, _PILE_OUTCOME[pile], "")
        best = found.get(slug)
        if best is None or (gen, rank) > best[:2]:
            found[slug] = (gen, rank, outcome, ts, branch)


def _scan(
    repo: git.Repo, tree: str, branch: str, known: set[str], blobs: dict[tuple[str, str], tuple[str, str]]
) -> None:
    """The settled copies one branch's tree holds that the ledger lacks, into `blobs`."""
    code, out, _err = git.call(
        repo.toplevel, "ls-tree", "-r", "-z", "--end-of-options", tree, "--", *(f"{BACKLOG}/{p}/" for p in PILES)
    )
    if code != 0:
        return
    for record in out.split(b"\0"):
        meta, _, raw = record.partition(b"\t")
        parts = meta.split()
        name = raw.decode("utf-8", "replace")
        hit = parse_settled_rel(name)
        if len(parts) != 3 or parts[1] != b"blob" or hit is None or hit[0] not in PILES:
            continue
        if hit[1] in known or not is_slug(hit[1]):
            continue
        blobs[parts[2].decode(), hit[1]] = (hit[0], branch)


def _outcome(data: bytes) -> tuple[int, int, str, str] | None:
    """(generation, rank, outcome, ISO time or "") from a settled copy's log; rank orders the
    outcomes of one generation (a completion outranks a failure)."""
    try:
        log = read_log(data)
    except InvalidInput:
        return None
    for entry in reversed(log):
        if entry.kind == "advanced" and entry.get("to") == "done":
            return generation(log), 2, "done", entry.ts.isoformat()
        if entry.kind == "cancelled":
            return generation(log), 2, "cancelled", entry.ts.isoformat()
        if entry.kind == "failed":
            return generation(log), 1, "failed", entry.ts.isoformat()
    return generation(log), 0, "done", ""  # in done/ or failed/ without a terminal line: settled all the same


def _short(ref: str) -> str:
    return ref.removeprefix("refs/heads/").removeprefix("refs/remotes/")


def _scanned(layout: Layout) -> set[str]:
    try:
        value = json.loads(layout.history.read_text())
    except (OSError, ValueError):
        return set()
    return {t for t in value if isinstance(t, str)} if isinstance(value, list) else set()


def _remember(layout: Layout, trees: set[str]) -> None:
    with contextlib.suppress(OSError, BacklogError):
        storage.ensure_dir(layout.history.parent)
        storage.write_file(layout.history, json.dumps(sorted(trees)).encode())
