"""What both backends share: where task files live, how they are found, read and locked, and
how they move (`BaseBackend.move` declares a move as a `Change`, `BaseBackend.apply` runs it):

* a new copy is always written first (temporary file, fsync, rename or link), the old copy
  removed last, so a crash leaves a task in two places, never in none (SPEC §7.7);
* entering an in-flight pile is an exclusive create, so two claimers can never both win;
* tracked changes are committed with only their own paths; if the commit fails every file is
  put back as it was (SPEC §7.3).

What differs is said by the two subclasses in `kinds` (which piles are shared, the ledger, the
layout's self-heal, stale copies), never by comparing a backend's name.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from .. import cache, git, header, limits, mark, storage, worktrees
from ..change import Change, Crash, Create, Publish, Remove, Settle, Step, Then, Write, run
from ..errors import BacklogError, Conflict, InvalidInput
from ..header import Summary
from ..layout import Layout, display, every_pile_pathspec
from ..ledger import Settled
from ..logline import later
from ..project import FAILED, Project
from ..task import Slug, Task, parse_task, validate_slug
from ..typed import TYPE_CHECKING, ClassVar, NamedTuple, TypedDict, TypeVar, Unpack

if TYPE_CHECKING:
    from ..remote import Remote


class Located(NamedTuple):
    slug: str
    pile: str
    path: Path
    shared: bool

    @property
    def on_intake(self) -> bool:
        """A todo copy that lives on the intake branch only (its path is `<branch>:backlog/todo/…`)."""
        return not self.path.is_absolute()


T = TypeVar("T")
RELISTS = 3  # looks at a task that keeps moving on while a verb reads it, before the verb gives up


def relisted(slug: str, look: Callable[[bool], T]) -> T:
    """`look(first)`: a lookup of `slug` and a read of the file it found, looked up again (`first`
    False) when that file is gone by the time it is read. The task moved on meanwhile (a racing
    verb won), and the next lookup says so in the verb's own words, not as a missing file."""
    for n in range(RELISTS):
        try:
            return look(n == 0)
        except FileNotFoundError:
            continue
    raise BacklogError(f"{slug} moved on each time it was read ({RELISTS} times): try again")


def live_given(locs: list[Located], entry: Settled | None) -> list[Located]:
    """`locs` less a failed/ copy that a later `retry` superseded, given the ledger's latest record
    of the slug (`entry`, already read): a `retried` record means the task lives on in todo/ of the
    intake branch, which that copy must not hide."""
    if entry is None or entry.outcome != "retried":
        return locs
    return [loc for loc in locs if loc.pile != FAILED]


class MoveOptions(TypedDict, total=False):
    """A move's optional parts (`BaseBackend.move`): the ledger entries, the old bytes, the lease."""

    settle: Settled | None
    record: Settled | None
    old: bytes | None
    lease: str | None


class BaseBackend:
    """The code both backends share; `kinds.GitBackend` and `kinds.SharedBackend` are the backends."""

    name: ClassVar[str]  # as AGENTS.md, the JSON replies and the migration mark spell it (data, never branched on)
    shares_flight: ClassVar[bool]  # in-flight piles are the clone's (the shared root, the ledger, the intake branch)

    def __init__(self, repo: git.Repo, project: Project) -> None:
        self.repo = repo
        self.project = project
        self.pipeline = project.pipeline
        self.layout = Layout.of(repo)
        self.root = self.layout.root
        self.shared_root = self.layout.shared_root
        # SPEC §8: with `remote:` declared (maildir-shared), the remote is the authority for claims
        self.own_links: set[str] = set()  # tracked piles that are this tool's link into the shared root
        self.skipped: list[str] = []  # files and refs over a bound or of the wrong kind: one line each (SPEC §3)
        self._remote: Remote | None = None
        # SPEC §3: a well-formed `remote:` this clone has not configured (a fresh clone whose remote
        # has another name). Read-only verbs answer from local state with these words as a warning;
        # every verb that needs the remote is refused with them (`remote`: exit 2)
        self.unconfigured: str | None = None
        if project.remote and self.shares_flight:
            if git.has_remote(repo, project.remote):
                from ..remote import Remote  # only a backlog with a remote loads the remote's modules

                self._remote = Remote(
                    repo, project.remote, project.remote_where, self.skipped, worktrees.intake_branch(repo, project)
                )
            else:
                self.unconfigured = (
                    f"{project.remote_where}: `remote: {project.remote}` names no remote configured in this clone:"
                    f" run `git remote add {project.remote} <url>` with the URL every clone shares"
                    " (`git remote -v` lists this clone's)"
                )

    @property
    def remote(self) -> Remote | None:
        """The git remote declared by `remote:` (SPEC §8), None when none is declared; a declared
        one this clone has not configured is refused (exit 2, `unconfigured` says why), so a verb
        that needs the remote can never act without it."""
        if self.unconfigured is not None:
            raise InvalidInput(self.unconfigured)
        return self._remote

    @property
    def configured_remote(self) -> Remote | None:
        """The declared remote when this clone has it configured, else None, never a refusal: what
        reads the remote's queue and what pushes an intake commit use (they go on without it)."""
        return self._remote

    @property
    def declares_remote(self) -> bool:
        """Is a remote declared (configured in this clone or not)?"""
        return self._remote is not None or self.unconfigured is not None

    # -- where things live ------------------------------------------------------------------
    def is_shared(self, pile: str) -> bool:
        return False

    def pile_dir(self, pile: str) -> Path:
        if self.is_shared(pile) or pile in self.own_links:
            return self.layout.shared_pile(pile)
        return self.layout.tracked_pile(pile)

    def in_shared_root(self, pile: str) -> list[str]:
        """The task files in the clone's shared `pile`, listed at its own path (never through a
        worktree's link; none when it does not exist)."""
        return storage.md_names(self.layout.shared_pile(pile))

    def located(self, slug: str, pile: str) -> Located:
        """Where `slug` is (or would be) in `pile`."""
        return Located(slug, pile, self.task_path(pile, slug), self.is_shared(pile))

    def task_path(self, pile: str, slug: str) -> Path:
        return self.pile_dir(pile) / f"{slug}.md"

    def display(self, pile: str, slug: str) -> str:
        """The path a user sees (through the symlink for shared piles)."""
        return display(pile, slug)

    def rel(self, path: Path) -> str:
        return self.layout.rel(path)

    def where(self) -> dict[str, str]:
        return {pile: str(self.pile_dir(pile)) for pile in self.pipeline.all_piles}

    # -- finding tasks ----------------------------------------------------------------------
    def slugs(self, pile: str) -> dict[str, os.DirEntry[str]]:
        return {e.name[:-3]: e for e in storage.entries(self.pile_dir(pile))}

    def names(self, pile: str) -> set[str]:
        """`slugs`' names alone, from one listing (no entry object per file)."""
        return storage.names(self.pile_dir(pile))

    def locate(self, slug: str) -> list[Located]:
        if not isinstance(slug, Slug):  # a Slug was validated at the verb's door: trusted
            slug = validate_slug(slug)
        found = []
        for pile in self.pipeline.all_piles:
            path = self.task_path(pile, slug)
            if os.path.lexists(path):
                found.append(Located(slug, pile, path, self.is_shared(pile)))
        return found

    def in_flight(self) -> dict[str, list[Located]]:
        flying: dict[str, list[Located]] = {}
        for pile in self.pipeline.flying:  # the clone's, whatever this pipeline says (SPEC §4)
            for slug, entry in self.slugs(pile).items():
                flying.setdefault(slug, []).append(Located(slug, pile, Path(entry.path), self.is_shared(pile)))
        return flying

    def read(self, loc: Located) -> bytes:
        """A task's bytes; one in flight up to `limits.LEAVING_BYTES`, so that a task past the size
        limit can still leave flight (SPEC §7.12), any other up to `limits.TASK_BYTES`."""
        bound = limits.LEAVING_BYTES if self.pipeline.is_in_flight(loc.pile) else limits.TASK_BYTES
        return storage.read_task_bytes(loc.path, self.display(loc.pile, loc.slug), bound)

    def load(self, loc: Located, data: bytes | None = None) -> Task:
        data = self.read(loc) if data is None else data
        return parse_task(loc.slug, self.display(loc.pile, loc.slug), data, self.project.defaults)

    def summaries(self, pile: str, titles: header.Titles | None = None) -> dict[str, Summary]:
        """Priority and dependencies of every task in a pile (and, into `titles` when given, its
        title): parsed once, then kept by stamp in the pile's parse cache (`cache.py`)."""
        defaults = self.project.defaults

        def parse(slug: str, path: str) -> header.Parsed:
            shown = self.display(pile, slug)
            try:
                data = header.read(path)
                if data is None:
                    data = storage.read_task_bytes(Path(path), shown)
                quick = header.parsed(slug, data, defaults.priority)
                if quick is not None:
                    return quick
                task = parse_task(slug, shown, data, defaults)
                return header.Parsed(self._summary(task), task.title)
            except BacklogError as exc:
                return header.Parsed(Summary(0, (), exc.message), None)

        where = self.layout.parse_cache(pile)
        directory = self.pile_dir(pile)
        names = storage.md_names(directory)
        return cache.summaries(
            where, directory, names, parse, self.layout.old_parse_caches(pile), defaults.priority, titles
        )

    @staticmethod
    def _summary(task: Task) -> Summary:
        return Summary(task.priority, tuple(task.dependencies), None)

    # -- locks and the ledger ---------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self, slug: str, timeout: float = 30.0) -> Iterator[None]:
        with storage.file_lock(self.layout.task_lock(slug), timeout, what=f"task {slug}"):
            yield

    def settled(self, slug: str) -> Settled | None:
        return None

    def settled_names(self) -> set[str]:
        return set()

    def settle(self, entry: Settled) -> None:
        pass

    def unsettle(self, slug: str) -> None:
        pass

    # -- layout -----------------------------------------------------------------------------
    def heal(self, dry_run: bool = False) -> list[str]:
        return []

    def refuse_symlinks(self) -> None:
        """A tracked pile that is a symlink is refused, never followed (SPEC §3): a committed
        `backlog/todo -> /somewhere` must not make any verb read, move or write there. One
        `lstat` per pile; the in-flight symlinks of maildir-shared are the backend's own."""
        for pile in self.pipeline.all_piles:
            path = self.layout.tracked_pile(pile)
            if self.is_shared(pile) or not os.path.islink(path):
                continue
            if os.readlink(path) == str(self.layout.shared_pile(pile)):
                self.own_links.add(
                    pile
                )  # this tool's own link into the shared root (the other backend's branch left it)
                continue
            raise BacklogError(f"backlog/{pile}: is a symlink; a pile must be a directory (refusing to follow it)")

    def ensure_piles(self) -> None:
        for pile in self.pipeline.all_piles:
            storage.ensure_dir(self.pile_dir(pile))

    # -- stale copies -----------------------------------------------------------------------
    def stale_copies(self, slug: str, data: bytes) -> Change | None:
        """This branch's stale copies of a task settling here (`SharedBackend.stale_copies`);
        none where every pile is tracked."""
        return None

    # -- the move protocol ------------------------------------------------------------------
    def commit(self, change: Change) -> None:
        """Carry out a change through the one move protocol (`change.run`), with this backend's ledger."""
        run(change, self.repo, self)

    def refuse_if_migrated(self) -> None:
        """Refuse to move a task when the clone migrated to another backend than the one this
        worktree declares (its branch has not merged the migration yet)."""
        found = mark.read(self.layout)
        if found is not None and found[0] != self.name:
            backend, branch = found
            raise BacklogError(
                f"this clone migrated to the {backend} backend on branch {branch}, but this worktree's"
                f" backlog/AGENTS.md still declares {self.name}: merge {branch} here first (nothing changed)"
            )

    @staticmethod
    def _read_or_none(path: Path) -> bytes | None:
        try:
            return storage.read_task_bytes(path)
        except (OSError, BacklogError):
            return None

    def apply(
        self, slug: str, src: Located | None, pile: str, data: bytes, message: str | None, **opts: Unpack[MoveOptions]
    ) -> Located:
        """Put `data` as `slug` into `pile`, removing the copy at `src` (if another place):
        the change `move` declares, carried out by `commit`. Returns where the task now is."""
        self.commit(self.move(slug, src, pile, data, message, **opts))
        return self.located(slug, pile)

    def move(
        self, slug: str, src: Located | None, pile: str, data: bytes, message: str | None, **opts: Unpack[MoveOptions]
    ) -> Change:
        """The change that moves a task (claim, hop, progress, completion, retry, release).

        Callers hold the task's lock and have re-checked their precondition. `old` is the
        current content of `src` (for rollback). `settle`: the ledger entry recorded before the
        task leaves flight; `record`: one recorded once the move landed (a retry). A move that
        leaves flight, or reopens a failed task, without its entry is refused here, so no verb
        can forget the ledger, and so is any move on a clone that migrated away. A release (in
        flight back to todo/) settles nothing: it is refused *with* an entry. With a remote
        declared, the remote's record is updated first (`_publish`); `lease` is the remote claim
        a rescue of another clone's claim swaps from.
        """
        self.refuse_if_migrated()
        dst = self.located(slug, pile)
        settle, record, old = opts.get("settle"), opts.get("record"), opts.get("old")
        released = src is not None and self.pipeline.is_in_flight(src.pile) and dst.pile == "todo"
        self._refuse_unrecorded(slug, src, dst, released, opts)
        in_place = src is not None and src.path == dst.path
        if in_place and old is None:
            old = self._read_or_none(dst.path)
        steps: list[Step] = []
        publish = self._publish(slug, src, dst, data, opts.get("lease"))
        if publish is not None:
            steps.append(publish)
        if src is not None and src.shared and not dst.shared and not in_place and not released:
            steps += self._leave_shared(slug, src, data, old, settle)
        before = old if in_place else self._replaced(src, dst, data, old, released)
        steps.append(self._arrive(dst, data, in_place, before))
        steps.append(Crash("apply:written"))
        after: list[Step] = [Crash("apply:committed")]
        if src is not None and not in_place:
            if src.shared:
                after += [Remove(src.path, None), Crash("apply:shared-removed")]
            else:
                steps += [Remove(src.path, old, self.rel(src.path)), Crash("apply:source-removed")]
        if record is not None:
            after.append(Settle(record))
        return Change(tuple(steps), message, (every_pile_pathspec(slug),), after=tuple(after))

    def _refuse_unrecorded(
        self, slug: str, src: Located | None, dst: Located, released: bool, opts: MoveOptions
    ) -> None:
        """A move that leaves flight (or completes from todo/) without its ledger entry, a reopening
        without its record, a release with either: a verb's bug, refused before anything moves."""
        settle, record = opts.get("settle"), opts.get("record")
        flying = self.pipeline.is_in_flight
        leaves = src is not None and not flying(dst.pile) and not released and (flying(src.pile) or dst.pile == "done")
        if leaves and settle is None:
            raise AssertionError(f"{slug} leaves flight for {dst.pile}/ without its ledger entry")
        if src is not None and src.pile == FAILED and dst.pile == "todo" and record is None:
            raise AssertionError(f"{slug} is reopened without its ledger entry")
        if released and (settle is not None or record is not None):
            raise AssertionError(f"{slug} is released with a ledger entry: a release settles nothing")

    def _replaced(
        self, src: Located | None, dst: Located, data: bytes, old: bytes | None, released: bool
    ) -> bytes | None:
        """The copy a release or a retry replaces in todo/. A release's: this branch's pre-claim copy
        (one the claim's copy grew from), or the copy of a release killed before its commit (the
        claim's copy and more). A retry's: a stale copy of no later generation than the failed one
        (`old`), which a merge brought beside it (the intake branch's, from before the claim).
        None for any other move, or any other copy there (which refuses: `_taken`)."""
        if src is not None and src.pile == FAILED and dst.pile == "todo" and old is not None:  # a retry
            before = self._read_or_none(dst.path)
            try:
                return before if before is not None and not later(before, old) else None
            except InvalidInput:
                return None
        before = self._read_or_none(dst.path) if released else None
        ours = before is not None and (data.startswith(before) or (old is not None and before.startswith(old)))
        return before if ours else None

    def _leave_shared(
        self, slug: str, src: Located, data: bytes, old: bytes | None, settle: Settled | None
    ) -> list[Step]:
        """Leaving the shared root: the shared copy records the terminal event first, then the
        ledger, then the tracked copy appears (SPEC §7.2 ordering)."""
        steps: list[Step] = []
        if old is not None and data != old:
            steps += [Write(src.path, old, data), Crash("apply:terminal-line")]
        # this branch's pre-claim copy must not stay beside the settled one; dropped only
        # now, so a crash from here on leaves a terminal in-flight copy (janitor bucket 1)
        stale = self.stale_copies(slug, data)
        if stale is not None:
            steps.append(Then(stale))
        if settle is not None:
            steps += [Settle(settle), Crash("apply:settled")]
        return steps

    def _arrive(self, dst: Located, data: bytes, in_place: bool, before: bytes | None) -> Step:
        """The destination's copy: rewritten in place (from `before`, the old bytes), or over the
        copy a release replaces (`before`), else created (exclusively: a name taken is `_taken`)."""
        tracked = None if dst.shared else self.rel(dst.path)
        if in_place or before is not None:
            return Write(dst.path, before, data, tracked)
        return Create(dst.path, data, tracked, lambda: self._taken(dst, data))

    def _taken(self, dst: Located, data: bytes) -> None:
        """The destination's name is taken: a claim lost its race; an interrupted earlier move
        that already wrote exactly this copy resumes; anything else is refused."""
        if self.pipeline.is_in_flight(dst.pile):
            raise Conflict(f"claim conflict: {dst.slug} already in flight")
        if dst.shared or self._read_or_none(dst.path) != data:
            raise BacklogError(f"{self.display(dst.pile, dst.slug)} already exists; not overwriting it")

    def _publish(self, slug: str, src: Located | None, dst: Located, data: bytes, lease: str | None) -> Publish | None:
        """SPEC §8: publish the move on the remote before it happens here (the `remote` package
        says how); a local failure afterwards rolls the remote back through the transaction."""
        flying = self.pipeline.is_in_flight
        from_flight = src is not None and flying(src.pile)
        if not (flying(dst.pile) or from_flight or (src is not None and src.pile in (FAILED, "todo"))):
            return None  # no remote step (`add`): an unconfigured remote is not in the way
        remote = self.remote
        if remote is None:
            return None
        if from_flight and dst.pile == "todo":
            return Publish(lambda tx: remote.release(slug, data, tx))  # claims/<slug> deleted, nothing settled
        if flying(dst.pile):
            if from_flight or lease is not None:
                return Publish(lambda tx: remote.update(slug, data, tx, lease))  # progress, a hop, a rescue
            return Publish(lambda tx: remote.claim(slug, data, tx))
        if from_flight or (src is not None and src.pile == "todo" and dst.pile == "done"):
            return Publish(lambda tx: remote.settle(slug, data, tx))
        if src is not None and src.pile == FAILED and dst.pile == "todo":
            return Publish(lambda tx: remote.retry(slug, data, tx))
        return None
