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
4. UNRESOLVABLE DEPS: a dependency of a task outside `done/` that names no task in any pile
   (shared piles and `failed/` included) and, on maildir-shared, no task the ledger knows. The
   dependencies of finished tasks no longer matter and are not checked.
5. CYCLES: each elementary cycle among tasks outside `done/` once, from its smallest slug.
6. ORPHANED SHARED IN-FLIGHT (maildir-shared): the claim of record names a branch that exists
   neither locally nor as a remote-tracking branch (or there is no claim of record).
7. SETTLED ELSEWHERE (maildir-shared): a `todo/` copy the ledger blocks (`Settled.blocks`).
8. LAYOUT: the self-heal's findings (repairs the command made on start, or in a dry run the
   repairs it would make), invalid task files, stray entries in the shared root and its piles,
   and temporary files (`.tmp-*`) left by a crashed write: removed once older than an hour.
   First of all, a `migrate` killed midway (its journal is still in the git dir) is undone, or
   finished when its commit landed (`migrate.recover`), before the self-heal looks at the layout.

Every repair takes the task's lock and re-checks on fresh state; a change in between means a
worker or another janitor acted, and the task is skipped silently. So two janitors and any number
of workers can run together, and a second run right after a first finds nothing to fix. A repair
that fails (a refusing commit hook) is reported in its bucket and makes the exit code 1.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ... import git, storage
from ...backend import Located
from ...context import Context, Result
from ...errors import BacklogError, Conflict
from ...layout import BOOKKEEPING, LEDGER, LOCKS
from ...lifecycle import fail_if_timed_out, finish_move, is_timed_out, terminal_event, timeout_reason
from ...project import CATEGORIES, FAILED
from ...task import SLUG_RE, LogEntry, Task, format_ts, now_utc, parse_log_line

ADVANCED = "ADVANCED BUT NOT MOVED"
TIMED_OUT = "TIMED OUT"
DUPLICATE = "DUPLICATE"
UNRESOLVABLE = "UNRESOLVABLE DEPS"
CYCLES = "CYCLES"
ORPHANED = "ORPHANED SHARED IN-FLIGHT"
SETTLED_ELSEWHERE = "SETTLED ELSEWHERE"
LAYOUT = "LAYOUT"
BUCKETS = (ADVANCED, TIMED_OUT, DUPLICATE, UNRESOLVABLE, CYCLES, ORPHANED, SETTLED_ELSEWHERE, LAYOUT)
ADVISORY = BUCKETS[3:]

STALE_TMP_SECONDS = 3600
MAX_CYCLES = 100
CYCLE_SEARCH_STEPS = 200_000


@dataclass
class Finding:
    bucket: str
    path: str
    detail: str
    slug: str | None = None
    fixed: bool = False  # a repair was made (in a dry run: would be made)
    error: bool = False  # a repair was attempted and failed

    def line(self) -> str:
        return f"{self.bucket}: {self.path} ({self.detail})"

    def as_dict(self) -> dict:
        return {"path": self.path, "detail": self.detail, "slug": self.slug, "fixed": self.fixed, "error": self.error}


def is_slug(name: str) -> bool:
    return bool(SLUG_RE.fullmatch(name)) and ".." not in name


# --------------------------------------------------------------------------- log helpers

def _describe(outcome: str, entry: LogEntry) -> str:
    what = "advanced to=done" if outcome == "done" else outcome
    return f"log says {what} at {format_ts(entry.ts)}"


# --------------------------------------------------------------------------- git helpers

def _deleted(code: str | None) -> bool:
    """Deleted from the work tree or the index, but still in HEAD (so not `AD`: never committed)."""
    return code is not None and "D" in code and code[0] != "A"


# --------------------------------------------------------------------------- cycles

def _components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    result: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                result.append(sorted(component))
    return result


def find_cycles(graph: dict[str, set[str]]) -> tuple[list[list[str]], bool]:
    """Every elementary cycle once, rotated to start at its smallest slug, e.g. [a, b, c, a].

    Returns (cycles, complete): the search stops after MAX_CYCLES cycles or a step budget.
    """
    graph = {node: {d for d in deps if d in graph} for node, deps in graph.items()}
    cycles: list[list[str]] = []
    steps = 0
    for component in _components(graph):
        if len(component) == 1:
            node = component[0]
            if node in graph[node]:
                cycles.append([node, node])
            continue
        members = set(component)
        for i, start in enumerate(component):
            allowed = members.difference(component[:i])
            path = [start]
            on_path = {start}
            work = [iter(sorted(graph[start] & allowed))]
            while work:
                steps += 1
                if steps > CYCLE_SEARCH_STEPS or len(cycles) >= MAX_CYCLES:
                    return sorted(cycles), False
                nxt = next(work[-1], None)
                if nxt is None:
                    work.pop()
                    on_path.discard(path.pop())
                elif nxt == start:
                    cycles.append(path + [start])
                elif nxt not in on_path:
                    path.append(nxt)
                    on_path.add(nxt)
                    work.append(iter(sorted(graph[nxt] & allowed)))
    return sorted(cycles), True


# --------------------------------------------------------------------------- stale copies

# --------------------------------------------------------------------------- the sweep

@dataclass
class _Copy:
    loc: Located
    data: bytes
    rel: str | None  # worktree-relative path of a tracked copy
    dirty: bool      # a tracked copy with uncommitted changes (untracked, added, modified)


@dataclass
class _Plan:
    keep: _Copy | None
    remove: list[_Copy] = field(default_factory=list)
    deleted: list[tuple[str, str]] = field(default_factory=list)  # (rel, pile) deletions to commit
    problem: str | None = None  # report only
    path: str = ""


class Sweep:
    def __init__(self, ctx: Context, dry_run: bool) -> None:
        self.ctx = ctx
        self.backend = ctx.backend
        self.pipeline = ctx.pipeline
        self.dry_run = dry_run
        self.findings: list[Finding] = []
        self.handled: set[str] = set()           # slugs a fix moved (or would move) this run
        self.gone: set[tuple[str, str]] = set()  # (slug, pile) copies removed (or that would be)
        self.shared_backend = self.backend.name == "maildir-shared"
        self.recovered: list[str] = []
        self.modified: list[tuple[str, str, str]] = []  # (slug, pile, rel) of modified tracked task files
        self.order = {pile: i for i, pile in enumerate(self.pipeline.all_piles)}
        self.tracked_piles = [p for p in self.pipeline.all_piles if not self.backend.is_shared(p)]

    # -- reporting ----------------------------------------------------------------------------
    def add(self, bucket: str, path: str, detail: str, slug: str | None = None, fixed: bool = False,
            error: bool = False) -> None:
        self.findings.append(Finding(bucket, path, detail, slug, fixed, error))

    def show(self, pile: str, slug: str) -> str:
        return self.backend.display(pile, slug)

    def would(self, done: str, planned: str) -> str:
        return f"would {planned}" if self.dry_run else done

    # -- where a task is, minus other branches' stale copies ------------------------------------
    def removed(self, slug: str, pile: str) -> bool:
        """Would a dry run's repairs have removed this copy?"""
        return self.dry_run and (slug, pile) in self.gone

    def listing(self) -> dict[str, list[str]]:
        where: dict[str, list[str]] = {}
        for pile in self.pipeline.all_piles:
            for slug in self.backend.slugs(pile):
                if is_slug(slug) and not self.removed(slug, pile):
                    where.setdefault(slug, []).append(pile)
        return where

    def _claim_branch(self, loc: Located, data: bytes | None = None) -> str | None:
        try:
            claim = self.backend.load(loc, data).claim_of_record()
        except (BacklogError, OSError):
            return None
        return claim.get("branch") if claim else None

    def stale(self, locs: list[Located], flying_data: bytes | None = None) -> set[str]:
        """Piles holding a stale branch copy (maildir-shared, claimed on another branch)."""
        if not self.shared_backend:
            return set()
        flying = [loc for loc in locs if loc.shared]
        if not flying or len(locs) < 2:
            return set()
        if self._claim_branch(flying[0], flying_data if len(flying) == 1 else None) == self.ctx.repo.branch:
            return set()
        return {loc.pile for loc in locs if not loc.shared and loc.pile != "done"}

    def live(self, slug: str) -> list[Located]:
        locs = [loc for loc in self.backend.locate(slug) if not self.removed(slug, loc.pile)]
        drop = self.stale(locs)
        return [loc for loc in locs if loc.pile not in drop]

    # -- 3. duplicates ------------------------------------------------------------------------
    def duplicates(self) -> None:
        where = self.listing()
        status = git.status_codes(self.ctx.repo, *(f"backlog/{p}" for p in self.tracked_piles))
        deleted: dict[str, list[str]] = {}
        for rel, code in status.items():
            parts = rel.split("/")
            if _deleted(code) and len(parts) == 3 and parts[0] == "backlog" and parts[2].endswith(".md"):
                slug = parts[2][:-3]
                if parts[1] in self.tracked_piles and is_slug(slug):
                    deleted.setdefault(slug, []).append(parts[1])
        candidates = {s for s, piles in where.items() if len(piles) > 1}
        candidates |= {s for s in deleted if s in where and set(where[s]) - set(deleted[s])}
        for slug in sorted(candidates):
            # other branches' stale copies of tasks in flight are the common case: drop them
            # here, with one file read and no git call per task
            places = where[slug] + deleted.get(slug, [])
            drop = self.stale([Located(slug, p, self.backend.task_path(p, slug), self.backend.is_shared(p))
                               for p in places])
            if len([p for p in places if p not in drop]) < 2:
                continue
            self._duplicate_safely(slug, self.show(where[slug][0], slug))
        for rel, code in sorted(status.items()):
            parts = rel.split("/")
            if "M" in code and len(parts) == 3 and parts[1] in self.tracked_piles \
                    and self.pipeline.is_in_flight(parts[1]) and parts[2].endswith(".md") \
                    and is_slug(parts[2][:-3]) and parts[2][:-3] not in candidates:
                self.modified.append((parts[2][:-3], parts[1], rel))

    def unsaved_logs(self) -> None:
        """After buckets 1 and 2 (whose moves commit such a file with everything else)."""
        for slug, pile, rel in self.modified:
            if slug not in self.handled:
                self._unsaved_log(slug, pile, rel)

    def _unsaved_log(self, slug: str, pile: str, rel: str) -> None:
        """A verb that appends to a tracked task in place (maildir-git's progress and rescue) and
        was killed before its commit leaves the file modified: when the committed copy is a prefix
        of it and all that follows is whole log lines, the lines are committed. Any other
        uncommitted edit is the user's own business and left alone."""
        loc = Located(slug, pile, self.backend.task_path(pile, slug), self.backend.is_shared(pile))
        try:
            with self.backend.lock(slug, timeout=0 if self.dry_run else 30.0):
                data = self.backend.read(loc)
                head = git.blob(self.ctx.repo, f"HEAD:{rel}")
                if head is None or not data.startswith(head) or data == head:
                    return
                added = data[len(head):].decode("utf-8", "replace")
                if not added.endswith("\n") or any(
                        line.strip() and parse_log_line(line) is None for line in added.split("\n")):
                    return
                if not self.dry_run:
                    git.commit_paths(self.ctx.repo, [rel], f"maintain({slug}) commit the log of an interrupted verb")
        except (Conflict, FileNotFoundError):
            return
        except BacklogError as exc:
            self.add(DUPLICATE, self.show(pile, slug), f"log lines never committed: could not commit them: {exc.message}",
                     slug, error=True)
            return
        self.add(DUPLICATE, self.show(pile, slug), "log lines written but never committed (a verb killed before its"
                 f" commit): {self.would('committed', 'commit them')}", slug, fixed=True)

    def _duplicate_safely(self, slug: str, shown: str) -> None:
        try:
            self._duplicate(slug)
        except Conflict:
            pass  # a worker holds the task: it is busy with it, not crashed
        except BacklogError as exc:
            self.add(DUPLICATE, shown, f"could not repair: {exc.message}", slug, error=True)

    def settled_copies(self) -> None:
        """A task just moved out of flight may have left an older copy here (a stale todo/ copy of
        another branch's claim now sits next to this branch's done/ or failed/ copy)."""
        if self.dry_run:
            return
        for slug in sorted(self.handled):
            self._duplicate_safely(slug, f"backlog/todo/{slug}.md")

    def _plan(self, slug: str) -> _Plan | None:
        locs = self.backend.locate(slug)
        status = git.status_codes(self.ctx.repo, *(f"backlog/{p}/{slug}.md" for p in self.tracked_piles))
        copies: list[_Copy] = []
        for loc in locs:
            try:
                data = self.backend.read(loc)
            except FileNotFoundError:
                continue
            except BacklogError as exc:
                return _Plan(None, problem=f"a copy cannot be read ({exc.message}): repair by hand",
                             path=self.show(loc.pile, slug))
            rel = None if loc.shared else self.backend.rel(loc.path)
            copies.append(_Copy(loc, data, rel, rel is not None and rel in status))
        flying = [c for c in copies if c.loc.shared]
        drop = self.stale([c.loc for c in copies] + self._deleted_locs(slug, status),
                          flying[0].data if len(flying) == 1 else None)
        copies = [c for c in copies if c.loc.pile not in drop]
        present = {c.loc.pile for c in copies}
        deleted = [
            (rel, pile) for pile in self.tracked_piles
            if _deleted(status.get(rel := f"backlog/{pile}/{slug}.md")) and pile not in present and pile not in drop
        ]
        if not copies or len(copies) + len(deleted) < 2:
            return None
        piles = ", ".join(f"{c.loc.pile}/" for c in copies)
        keep = max(copies, key=lambda c: (len(c.data), self.order[c.loc.pile]))
        others = [c for c in copies if c is not keep]
        first = self.show(copies[0].loc.pile, slug)
        if not all(keep.data.startswith(c.data) for c in others):
            return _Plan(None, problem=f"in {piles} and no copy contains the others: keep one by hand", path=first)
        if keep.loc.pile != "done" and any(c.loc.pile == "done" for c in others):
            return _Plan(None, problem=f"in {piles}; the done/ copy is older than the"
                         f" {keep.loc.pile}/ one: repair by hand", path=first)
        for rel, pile in deleted:
            old = git.blob(self.ctx.repo, f"HEAD:{rel}") or git.blob(self.ctx.repo, f":{rel}")
            if old is None or not keep.data.startswith(old):
                return _Plan(None, path=rel, problem=f"deleted but not committed, and it is not an older copy of"
                             f" {self.show(keep.loc.pile, slug)}: commit or restore it by hand")
        return _Plan(keep, others, deleted)

    def _deleted_locs(self, slug: str, status: dict[str, str]) -> list[Located]:
        return [
            Located(slug, pile, self.backend.task_path(pile, slug), False)
            for pile in self.tracked_piles if _deleted(status.get(f"backlog/{pile}/{slug}.md"))
        ]

    def _duplicate(self, slug: str) -> None:
        plan = self._plan(slug)
        if plan is None:
            return
        if plan.problem is None and not self.dry_run:
            with self.backend.lock(slug):
                plan = self._plan(slug)  # re-check on fresh state
                if plan is None:
                    return
                if plan.problem is None:
                    self._repair(slug, plan)
        if plan.problem is not None:
            self.add(DUPLICATE, plan.path, plan.problem, slug)
            return
        assert plan.keep is not None
        kept = self.show(plan.keep.loc.pile, slug)
        for copy in plan.remove:
            self.gone.add((slug, copy.loc.pile))
            self.add(DUPLICATE, self.show(copy.loc.pile, slug),
                     f"an older copy of {kept}: {self.would('removed', 'remove it')}", slug, fixed=True)
        for rel, pile in plan.deleted:
            self.add(DUPLICATE, rel, f"deleted but never committed while {kept} holds the task:"
                     f" {self.would('deletion committed', 'commit the deletion')}", slug, fixed=True)

    def _repair(self, slug: str, plan: _Plan) -> None:
        assert plan.keep is not None
        repo = self.ctx.repo
        removed: list[_Copy] = []
        paths: list[str] = []
        try:
            for copy in plan.remove:
                if not copy.loc.shared:
                    storage.remove_file(copy.loc.path)
                    removed.append(copy)
                    paths.append(copy.rel)  # type: ignore[arg-type]
            staged = [rel for rel, _pile in plan.deleted if git.blob(repo, f":{rel}") is None]
            if staged:  # `git add -A` refuses a path already gone from the index: put it back first
                git.unstage(repo, staged)
            paths += [rel for rel, _pile in plan.deleted]
            if plan.keep.dirty and plan.keep.rel:  # a copy that never got committed (crash before the commit)
                paths.append(plan.keep.rel)
            storage.crash_point("maintain:dup-removed")
            if paths:
                piles = sorted({c.loc.pile for c in plan.remove} | {p for _r, p in plan.deleted}, key=self.order.get)
                what = ", ".join(f"{p}/" for p in piles)
                git.commit_paths(repo, paths, f"maintain({slug}) remove duplicate {what} cop{'ies' if len(piles) > 1 else 'y'}")
                storage.crash_point("maintain:dup-committed")
        except BaseException:
            for copy in removed:
                storage.write_file(copy.loc.path, copy.data)
            raise
        for copy in plan.remove:
            if copy.loc.shared:  # shared copies go last: a failed commit above leaves them in place
                storage.remove_file(copy.loc.path)

    # -- 1. advanced but not moved ------------------------------------------------------------
    def _single_in_flight(self, slug: str) -> Located | None:
        locs = self.live(slug)
        if len(locs) == 1 and self.pipeline.is_in_flight(locs[0].pile):
            return locs[0]
        return None

    def advanced(self) -> None:
        for slug in sorted(self.backend.in_flight()):
            if not is_slug(slug) or slug in self.handled:
                continue
            try:
                loc = self._single_in_flight(slug)
                if loc is None:
                    continue
                term = terminal_event(self.backend.load(loc))
            except (BacklogError, FileNotFoundError):
                continue  # unreadable: LAYOUT reports it
            if term is None:
                continue
            outcome, dest, entry = term
            shown = self.show(loc.pile, slug)
            if self.dry_run:
                self.add(ADVANCED, shown, f"{_describe(outcome, entry)}: would move to {dest}/", slug, fixed=True)
                self.handled.add(slug)
                continue
            try:
                done = self._finish_move(slug)
            except Conflict:
                continue
            except BacklogError as exc:
                self.add(ADVANCED, shown, f"{_describe(outcome, entry)}: could not move it: {exc.message}", slug,
                         error=True)
                self.handled.add(slug)
                continue
            if done is not None:
                self.add(ADVANCED, shown, f"{_describe(outcome, entry)}: moved to {done}/", slug, fixed=True)
                self.handled.add(slug)

    def _finish_move(self, slug: str) -> str | None:
        with self.backend.lock(slug):
            loc = self._single_in_flight(slug)
            if loc is None:
                return None
            data = self.backend.read(loc)
            term = terminal_event(self.backend.load(loc, data))
            if term is None:
                return None
            stale = self._stale_copies(slug)
            dest = finish_move(self.ctx, slug, loc, data, term)
            self._report_dropped(slug, loc, stale)
            return dest

    def _stale_copies(self, slug: str) -> list[Located]:
        """This branch's tracked copies that `Backend.apply` may drop as the task settles here."""
        if not self.shared_backend:
            return []
        return [loc for loc in self.backend.locate(slug) if not loc.shared and loc.pile != "done"]

    def _report_dropped(self, slug: str, flying: Located, stale: list[Located]) -> None:
        for loc in stale:
            if not os.path.lexists(loc.path):
                self.add(DUPLICATE, self.show(loc.pile, slug), f"an older copy of {self.show(flying.pile, slug)}"
                         " (a stale branch copy, dropped as the task settles here): removed", slug, fixed=True)

    # -- 2. timed out -------------------------------------------------------------------------
    def timed_out(self) -> None:
        now = now_utc()
        for slug in sorted(self.backend.in_flight()):
            if not is_slug(slug) or slug in self.handled:
                continue
            try:
                loc = self._single_in_flight(slug)
                if loc is None:
                    continue
                task = self.backend.load(loc)
                if terminal_event(task) is not None or not is_timed_out(task, loc, now):
                    continue
                reason = timeout_reason(task, loc)
            except (BacklogError, FileNotFoundError):
                continue
            shown = self.show(loc.pile, slug)
            if self.dry_run:
                self.add(TIMED_OUT, shown, f"would fail: {reason}", slug, fixed=True)
                self.handled.add(slug)
                continue
            try:
                reason = self._fail_timed_out(slug)
            except git.GitError as exc:
                self.add(TIMED_OUT, shown, f"{reason}: could not fail it: {exc.message}", slug, error=True)
                self.handled.add(slug)
                continue
            except BacklogError:
                continue  # another worker or janitor acted first
            if reason is not None:
                self.add(TIMED_OUT, shown, f"failed: {reason}", slug, fixed=True)
                self.handled.add(slug)

    def _fail_timed_out(self, slug: str) -> str | None:
        """Fail it (lifecycle.fail_if_timed_out) and report this branch's stale copies dropped meanwhile."""
        loc = self._single_in_flight(slug)
        if loc is None:
            return None
        stale = self._stale_copies(slug)
        reason = fail_if_timed_out(self.ctx, slug)
        if reason is not None:
            self._report_dropped(slug, loc, stale)
        return reason

    # -- 4–8. the advisory buckets ------------------------------------------------------------
    def advisory(self) -> None:
        tasks: dict[str, tuple[str, tuple[str, ...]]] = {}  # slug -> (pile, deps) for tasks outside done/
        flying: list[tuple[Located, Task]] = []
        known: set[str] = set()
        invalid: list[tuple[str, str]] = []
        for pile in self.pipeline.all_piles:
            if self.pipeline.is_in_flight(pile):
                for slug, entry in sorted(self.backend.slugs(pile).items()):
                    if self.removed(slug, pile):
                        continue
                    loc = Located(slug, pile, Path(entry.path), self.backend.is_shared(pile))
                    try:
                        task = self.backend.load(loc)
                    except FileNotFoundError:
                        continue
                    except BacklogError as exc:
                        invalid.append((self.show(pile, slug), exc.message))
                        continue
                    known.add(slug)
                    flying.append((loc, task))
                    tasks.setdefault(slug, (pile, tuple(task.dependencies)))
                continue
            for slug, (_entry, summary) in sorted(self.backend.summaries(pile).items()):
                if self.removed(slug, pile):
                    continue
                if summary.error:
                    invalid.append((self.show(pile, slug), summary.error))
                    continue
                known.add(slug)
                if pile != "done":
                    tasks.setdefault(slug, (pile, summary.dependencies))
        if self.shared_backend:
            known |= {name for name in self.backend.settled_names() if is_slug(name)}
        self._deps(tasks, known)
        self._cycles(tasks)
        if self.shared_backend:
            self._orphans(flying)
            self._settled_elsewhere()
        self._layout(invalid)

    def _deps(self, tasks: dict[str, tuple[str, tuple[str, ...]]], known: set[str]) -> None:
        for slug, (pile, deps) in sorted(tasks.items(), key=lambda kv: (self.order[kv[1][0]], kv[0])):
            for dep in deps:
                if dep in known:
                    continue
                near = [f"{dep}-{c}" for c in CATEGORIES if f"{dep}-{c}" in known]
                hint = f"; did you mean {' or '.join(near)}?" if near else ""
                self.add(UNRESOLVABLE, self.show(pile, slug), f"depends on {dep}, which is in no pile{hint}", slug)

    def _cycles(self, tasks: dict[str, tuple[str, tuple[str, ...]]]) -> None:
        graph = {slug: set(deps) for slug, (_pile, deps) in tasks.items()}
        cycles, complete = find_cycles(graph)
        for cycle in cycles:
            self.add(CYCLES, self.show(tasks[cycle[0]][0], cycle[0]), " → ".join(cycle), cycle[0])
        if not complete:
            self.add(CYCLES, "backlog/", f"more cycles not listed (stopped after {len(cycles)})")

    def _orphans(self, flying: list[tuple[Located, Task]]) -> None:
        live = [(loc, task) for loc, task in flying if loc.slug not in self.handled]
        if not live:
            return
        branches = git.branches(self.ctx.repo)
        for loc, task in live:
            claim = task.claim_of_record()
            shown = self.show(loc.pile, loc.slug)
            if claim is None:
                self.add(ORPHANED, shown, "no claim of record names a claimer or branch:"
                         " fail it, or rescue it once past its budget", loc.slug)
                continue
            branch = claim.get("branch")
            if branch and branch in branches:
                continue
            self.add(ORPHANED, shown, f"claimed by {claim.get('claimer', '?')} on branch {branch or '?'}, which exists"
                     " neither locally nor as a remote-tracking branch: rescue it once past its budget, or fail it",
                     loc.slug)

    def _settled_elsewhere(self) -> None:
        names = self.backend.settled_names()
        if not names:
            return
        todo = self.backend.slugs("todo")
        for slug in sorted(names & set(todo)):
            if not is_slug(slug):
                continue
            entry = self.backend.settled(slug)
            if entry is None:
                continue
            loc = Located(slug, "todo", Path(todo[slug].path), False)
            try:
                task = self.backend.load(loc)
            except (BacklogError, FileNotFoundError):
                task = None
            if not entry.blocks(task):
                continue
            when = format_ts(entry.ts)
            if entry.branch == self.ctx.repo.branch:
                detail = (f"the ledger says it was settled ({entry.outcome}) on this branch at {when}, yet it is still"
                          " in todo/: it cannot be claimed; retry it or remove it")
            else:
                then = "merge it, or retry it there" if entry.outcome == FAILED else "merge it"
                detail = f"settled ({entry.outcome}) on branch {entry.branch} at {when}: {then}"
            self.add(SETTLED_ELSEWHERE, self.show("todo", slug), detail, slug)

    # -- 8. layout ------------------------------------------------------------------------------
    def _layout(self, invalid: list[tuple[str, str]]) -> None:
        heal = self.backend.heal(dry_run=True) if self.dry_run else list(self.ctx.heal_findings)
        heal = self.recovered + heal  # a migration killed midway, undone or finished (migrate.recover)
        for line in heal:
            path, sep, detail = line.partition(" (")
            detail = detail[:-1] if sep and detail.endswith(")") else "layout problem"
            left = "left in place" in detail or "nothing overwritten" in detail
            if self.dry_run:
                detail = f"dry run, nothing changed: {detail}"
            self.add(LAYOUT, path, detail, fixed=not left)
        for path, error in invalid:
            self.add(LAYOUT, path, f"invalid task file: {error.removeprefix(path + ': ')}")
        if self.shared_backend:
            self._strays()
        self._temporaries()

    def _strays(self) -> None:
        root = self.backend.shared_root
        allowed = set(self.pipeline.in_flight) | set(BOOKKEEPING)
        try:
            names = sorted(os.listdir(root))
        except (FileNotFoundError, NotADirectoryError):
            return
        for name in names:
            path = root / name
            if name.startswith(storage.TMP_PREFIX):
                continue  # _temporaries
            if name not in allowed or not (path.is_dir() and not path.is_symlink()):
                self.add(LAYOUT, str(path), "stray entry in the shared root (only the in-flight piles,"
                         f" {LOCKS} and {LEDGER} belong there): left in place")
        for pile in self.pipeline.in_flight:
            for name in self._names(root / pile):
                if name.startswith(storage.TMP_PREFIX):
                    continue
                if name.endswith(".md") and not name.startswith("."):
                    continue  # a task file (or an invalid one: reported as such)
                self.add(LAYOUT, f"backlog/{pile}/{name}", "stray entry in a shared pile (not a <slug>.md task"
                         " file): left in place")
        for name in self._names(root / LEDGER):
            if not name.startswith(storage.TMP_PREFIX) and not is_slug(name):
                self.add(LAYOUT, str(root / LEDGER / name), "stray entry in the ledger: left in place")

    @staticmethod
    def _names(directory: Path) -> list[str]:
        try:
            return sorted(os.listdir(directory))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def _temporaries(self) -> None:
        """`.tmp-*` files of crashed writes: removed once older than an hour (younger: a write in progress)."""
        root = self.backend.shared_root
        places: list[tuple[Path, str]] = [(root, str(root)), (root / LEDGER, str(root / LEDGER)),
                                          (self.backend.root, "backlog")]
        for pile in self.pipeline.all_piles:
            places.append((self.backend.pile_dir(pile), f"backlog/{pile}"))
        now = time.time()
        seen: set[Path] = set()
        for directory, shown in places:
            if directory in seen:
                continue
            seen.add(directory)
            for name in self._names(directory):
                if not name.startswith(storage.TMP_PREFIX):
                    continue
                path = directory / name
                try:
                    age = now - os.lstat(path).st_mtime
                except FileNotFoundError:
                    continue
                if age < STALE_TMP_SECONDS or path.is_dir() and not path.is_symlink():
                    continue
                hours = f"{age / 3600:.0f}h old" if age < 172800 else f"{age / 86400:.0f}d old"
                if not self.dry_run:
                    storage.remove_file(path)
                self.add(LAYOUT, f"{shown}/{name}", f"temporary file of a crashed write, {hours}:"
                         f" {self.would('removed', 'remove it')}", fixed=True)

    # -- the result -----------------------------------------------------------------------------
    def result(self, strict: bool) -> Result:
        buckets = {name: [f for f in self.findings if f.bucket == name] for name in BUCKETS}
        lines = [f.line() for name in BUCKETS for f in buckets[name]]
        flying = {slug for pile in self.pipeline.in_flight for slug in self.backend.slugs(pile)}
        todo = len(self.backend.slugs("todo"))
        lines.append(f"OK: {todo} todo, {len(flying)} in flight")
        fixed = 0 if self.dry_run else sum(1 for f in self.findings if f.fixed)
        code = 1 if any(f.error for f in self.findings) else 0
        if strict and any(buckets[name] for name in ADVISORY):
            code = 1
        data = {
            "buckets": {name: [f.as_dict() for f in buckets[name]] for name in BUCKETS},
            "ok": {"todo": todo, "in_flight": len(flying)},
            "fixed": fixed,
            "dry_run": self.dry_run,
        }
        return Result(data, lines, code=code)


def maintain(ctx: Context, dry_run: bool = False, strict: bool = False, recovered: list[str] | None = None) -> Result:
    """One sweep: repairs first (duplicates, so that a kept in-flight copy whose log is already
    terminal is moved on the same run; then terminal in-flight files; then timeouts), then the
    advisory buckets on the repaired state."""
    sweep = Sweep(ctx, dry_run)
    sweep.recovered = list(recovered or [])
    sweep.duplicates()
    sweep.advanced()
    sweep.timed_out()
    sweep.unsaved_logs()
    sweep.settled_copies()
    sweep.advisory()
    return sweep.result(strict)
