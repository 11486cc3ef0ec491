"""The REMOTE bucket's first step (SPEC §8): make this clone agree with the remote's record,
which is the authority. See `reconcile` for the states an interrupted verb leaves and how each
is repaired; the `remote` package for the protocol (the memory written before each push, the remote
updated before each local move)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from .. import crossclone, storage
from ..backend import Located
from ..change import Change, Memory, Publish, Remove
from ..context import Context
from ..errors import BacklogError, Busy, Conflict, Unavailable
from ..lifecycle import finish_move, msg_end, settled_record, single_in_flight, terminal_event
from ..project import FAILED
from ..remote import CLAIMS, SETTLED, Lost, Record, Remote, RemoteError, ref


@dataclass
class Repair:
    """One line of the janitor's REMOTE bucket."""

    path: str
    detail: str
    slug: str | None = None
    fixed: bool = False
    error: bool = False
    unavailable: bool = False  # the error was the remote not answering (exit 4 when nothing else failed)


def reconcile(ctx: Context, dry_run: bool = False) -> list[Repair]:
    """Make this clone agree with the remote's record, which is the authority (SPEC §8).

    Every remote update is pushed before its local change, and this clone's memory (what it last
    wrote) is written before the push; so an interrupted verb leaves one of the states below,
    each repaired under the task's lock from a fresh listing (`_reconcile_one`):

    * the memory is ahead of the remote (killed before the push landed): it is put back;
    * the remote holds this clone's value and the local copy lags (killed after the push): the
      local copy is brought to the record (created, extended, moved to its pile);
    * the remote settled the task (this clone, interrupted; or another clone's janitor, past its
      budget): the local copy moves to `done/` or `failed/` with the remote's line;
    * the remote retried it (this clone, interrupted): the `failed/` copy moves to `todo/`;
    * another clone rescued it: the local copy is dropped, its lines all being in the remote's record;
    * a local claim the remote never saw (made before `remote:` was declared) is published.
    """
    remote = ctx.backend.remote
    if remote is None:
        return []
    try:
        held = remote.listing("checking the remote's claims")
    except RemoteError as exc:
        return [Repair(f"remote {remote.name}", exc.message, error=True, unavailable=isinstance(exc, Unavailable))]
    mine = remote.mine_all()
    flying = ctx.backend.in_flight()
    failed = set(ctx.backend.slugs(FAILED))
    suspects = {s for s, sha in mine[CLAIMS].items() if held.claims.get(s) != sha or s not in flying}
    suspects |= {s for s, sha in mine[SETTLED].items() if held.settled.get(s) != sha or s in flying or s in failed}
    suspects |= {s for s in flying if s not in mine[CLAIMS]}
    suspects |= {s for s in flying if s in mine[CLAIMS] and not _current(remote, s, mine[CLAIMS][s], flying[s])}
    repairs: list[Repair] = []
    for slug in sorted(suspects):
        try:
            with ctx.backend.lock(slug):
                repairs += _reconcile_one(ctx, remote, slug, dry_run)
        except (Conflict, Busy):
            continue  # a worker acted on it meanwhile: not this run's to judge
        except BacklogError as exc:
            repairs.append(Repair(ref(CLAIMS, slug), f"could not reconcile: {exc.message}", slug, error=True))
    return repairs


def _current(remote: Remote, slug: str, sha: str, locs: list[Located]) -> bool:
    """Does this clone's only in-flight copy hold exactly what it last published?"""
    if len(locs) != 1:
        return False
    try:
        return remote.holds(sha, slug, storage.read_task_bytes(locs[0].path))
    except (OSError, BacklogError):
        return False


@dataclass
class _State:
    """One slug as the remote and this clone's memory see it (commit ids, and their records)."""

    claim: str | None
    settled: str | None
    mine_claim: str | None
    mine_settled: str | None
    records: dict[str, Record]

    def rec(self, sha: str | None) -> Record | None:
        return self.records.get(sha) if sha is not None else None

    def parent(self, sha: str | None) -> str | None:
        rec = self.rec(sha)
        return rec.parent if rec is not None else None


def _state(remote: Remote, slug: str) -> _State:
    now = remote.listing(f"reconciling {slug}")
    st = _State(now.claims.get(slug), now.settled.get(slug), remote.mine(CLAIMS, slug), remote.mine(SETTLED, slug), {})
    shas = [sha for sha in (st.claim, st.settled, st.mine_claim, st.mine_settled) if sha is not None]
    for sha in shas:
        found = remote.records({slug: sha}).get(slug)
        if found is not None:
            st.records[sha] = found
    missing = [
        (kind, sha) for kind, sha in ((CLAIMS, st.claim), (SETTLED, st.settled)) if sha and sha not in st.records
    ]
    if missing:
        remote.fetch([ref(kind, slug) for kind, _sha in missing])
        for _kind, sha in missing:
            found = remote.records({slug: sha}).get(slug)
            if found is not None:
                st.records[sha] = found
    return st


def _reconcile_one(ctx: Context, remote: Remote, slug: str, dry_run: bool) -> list[Repair]:
    st = _state(remote, slug)
    loc = single_in_flight(ctx, slug)
    data = ctx.backend.read(loc) if loc is not None else None
    return _One(ctx, remote, slug, dry_run, st, loc, data).decide()


@dataclass
class _One:
    """The janitor's decision table for one slug, under its lock (the cases of `reconcile`'s
    docstring, in the order they are asked): `decide` asks each case's question, and each case's
    method repairs it. `out` collects the lines; `st` follows what `remember` writes."""

    ctx: Context
    remote: Remote
    slug: str
    dry_run: bool
    st: _State
    loc: Located | None
    data: bytes | None
    out: list[Repair] = field(default_factory=list)

    def note(self, detail: str, fixed: bool = True, where: str | None = None) -> None:
        """One line of the bucket: `would …` on a dry run for a repair; a problem left as it is."""
        loc, slug = self.loc, self.slug
        shown = where or (self.ctx.backend.display(loc.pile, slug) if loc is not None else ref(CLAIMS, slug))
        self.out.append(Repair(shown, f"would {detail}" if self.dry_run and fixed else detail, slug, fixed, not fixed))

    def remember(self, kind: str, sha: str | None) -> None:
        """This clone's memory of `kind` set to `sha` (not on a dry run: only in `st`)."""
        if not self.dry_run:
            self.ctx.backend.commit(Change((Memory(self.remote, kind, self.slug, sha),)))
        if kind == CLAIMS:
            self.st.mine_claim = sha
        else:
            self.st.mine_settled = sha

    def decide(self) -> list[Repair]:
        self.settlement_memory_ahead()
        self.claim_memory_ahead()
        st, loc, data = self.st, self.loc, self.data
        claim, settled = st.rec(st.claim), st.rec(st.settled)
        if claim is not None and st.claim == st.mine_claim:
            return self.follow_own_claim(claim)
        if settled is not None and st.settled == st.mine_settled and settled.outcome() == "retried" and loc is None:
            return self.out + _finish_retry(self.ctx, self.slug, settled, self.dry_run)
        if loc is None or data is None:
            if st.mine_claim is not None and claim is None and settled is None:
                self.remember(CLAIMS, None)
            return self.out
        if st.claim is None and settled is not None and self.follow_settlement(settled, loc, data):
            return self.out
        if claim is not None:
            self.claimed_elsewhere(claim, loc, data)
        else:
            self.unknown_to_remote(settled, data)
        return self.out

    def settlement_memory_ahead(self) -> None:
        """1. The memory of a settlement ran ahead of the remote (its push never landed): put back."""
        st, slug = self.st, self.slug
        ms = st.rec(st.mine_settled)
        if ms is None or st.mine_settled == st.settled:
            return
        if ms.outcome() != "retried" and ms.parent is not None and ms.parent == st.claim:
            self.note("put this clone's memory back: its settlement never reached the remote", where=ref(SETTLED, slug))
            self.remember(SETTLED, None)
        elif ms.outcome() == "retried" and ms.parent == st.settled:
            self.note("put this clone's memory back: its retry never reached the remote", where=ref(SETTLED, slug))
            self.remember(SETTLED, st.settled)
        else:
            self.remember(SETTLED, None)  # pruned, or retried elsewhere: not this clone's to remember

    def claim_memory_ahead(self) -> None:
        """1. The memory of a claim ran ahead of the remote (an update that never landed): put back;
        forgotten when this clone's settlement landed and only the claim's memory was left."""
        st = self.st
        if st.mine_claim is None or st.mine_claim == st.claim:
            return
        if st.settled is not None and st.settled == st.mine_settled and st.parent(st.settled) == st.mine_claim:
            self.remember(CLAIMS, None)  # this clone's settlement landed; only the claim's memory was left
        elif st.parent(st.mine_claim) == st.claim and (st.claim is not None or st.settled is None):
            self.note("put this clone's memory back: its update never reached the remote", where=ref(CLAIMS, self.slug))
            self.remember(CLAIMS, st.claim)

    def follow_own_claim(self, claim: Record) -> list[Repair]:
        """2. The remote holds this clone's claim: the local copy follows it (released when there is
        none; its extra lines published when it is ahead; left for a person when they differ)."""
        data = self.data
        if data == claim.data:
            return self.out
        if data is None:
            return self.out + _release(self.ctx, self.remote, self.slug, claim, self.dry_run)
        if not claim.data.startswith(data):
            self.publish_lines_ahead(claim, data)
            return self.out
        pile = crossclone.pile_of(self.ctx, claim)
        self.note(f"bring this clone's copy to its claim on the remote (an interrupted verb): {pile}/")
        if not self.dry_run:
            self.ctx.backend.apply(self.slug, self.loc, pile, claim.data, None, old=data)
        return self.out

    def publish_lines_ahead(self, claim: Record, data: bytes) -> None:
        """2, the local copy is not a prefix of the claim: published when it extends it."""
        if not data.startswith(claim.data):
            self.note("this clone's copy and its claim on the remote differ: left for a person", fixed=False)
            return
        self.note("publish the lines of this clone's copy that the remote lacks")
        if not self.dry_run:
            remote, slug = self.remote, self.slug
            self.ctx.backend.commit(Change((Publish(lambda tx: remote.update(slug, data, tx)),)))

    def follow_settlement(self, settled: Record, loc: Located, data: bytes) -> bool:
        """4. The remote settled it (this clone, interrupted; or another clone's janitor): the local
        copy moves to its end pile with the remote's line. False when the record ends in no
        terminal line, or when the local copy holds lines the record lacks (the later cases decide)."""
        st = self.st
        if not settled.data.startswith(data):
            return False
        term = terminal_event(self.ctx.backend.load(loc, settled.data))
        if term is None:
            return False
        whose = "this clone's settlement" if st.settled == st.mine_settled else f"settled by {settled.holder()}"
        self.note(f"move this clone's copy to {term[1]}/ with the remote's line ({whose}: {term[0]})")
        if not self.dry_run:
            self.remember(SETTLED, st.settled)
            self.remember(CLAIMS, None)
            finish_move(self.ctx, self.slug, loc, settled.data, term)
        return True

    def claimed_elsewhere(self, claim: Record, loc: Located, data: bytes) -> None:
        """5. Another clone holds the claim now: this clone's copy is dropped when it rescued it
        (its lines all in the record); two claims otherwise, left for a person."""
        if self.st.mine_claim is not None and claim.data.startswith(data):
            self.note(
                f"drop this clone's copy: rescued on another clone by {claim.holder()} (its lines are in the record)"
            )
            if not self.dry_run:
                self.remember(CLAIMS, None)
                self.ctx.backend.commit(Change((Remove(loc.path, None),)))  # the shared copy: nothing to commit
        else:
            self.note(f"also claimed on the remote by {claim.holder()}: two claims, cancel or fail one", fixed=False)

    def unknown_to_remote(self, settled: Record | None, data: bytes) -> None:
        """6. No claim on the remote: a claim made before `remote:` was declared is published; one
        the remote settled is left for a person."""
        if settled is not None:
            self.note(
                f"settled on the remote ({settled.outcome()} by {settled.holder()}) but in flight here", fixed=False
            )
            return
        self.note("publish this clone's claim, which the remote did not know")
        if not self.dry_run:
            remote, slug = self.remote, self.slug
            self.ctx.backend.commit(Change((Publish(lambda tx: remote.claim(slug, data, tx)),)))


def _release(ctx: Context, remote: Remote, slug: str, claim: Record, dry_run: bool) -> list[Repair]:
    """The remote holds this clone's claim but no copy of it is in flight here: the verb that
    made it (a `take`, a `rescue`) was killed after its push, or lost its connection after the
    push landed, and never told anyone. Nobody works on it, so it is released: a claim is
    deleted (the task is available again), a rescue gives the claim back to the one it took it
    from (whose budget is spent: the next rescuer takes it)."""
    if any(ctx.pipeline.is_in_flight(loc.pile) for loc in ctx.backend.locate(slug)):
        return []  # copies in several piles: DUPLICATE first
    back = remote.records({slug: claim.parent}).get(slug) if claim.parent is not None else None
    if claim.parent is not None and back is None:
        return []
    what = "delete it" if back is None else f"give it back to {back.holder()}"
    detail = f"release this clone's claim, which no verb finished (nobody holds it): {what}"
    if dry_run:
        return [Repair(ref(CLAIMS, slug), f"would {detail}", slug, True)]
    try:
        ctx.backend.commit(Change((Publish(functools.partial(remote.drop_claim, slug, claim.sha, claim.parent)),)))
    except Lost:
        return []
    return [Repair(ref(CLAIMS, slug), detail, slug, True)]


def _finish_retry(ctx: Context, slug: str, rec: Record, dry_run: bool) -> list[Repair]:
    """The remote holds this clone's retry and the failed/ copy is still here: move it on."""
    here = [loc for loc in ctx.backend.locate(slug) if loc.pile == FAILED]
    if len(here) != 1:
        return []
    data = ctx.backend.read(here[0])
    entry = rec.entry
    if data == rec.data or not rec.data.startswith(data) or entry is None:
        return []
    shown = ctx.backend.display(FAILED, slug)
    if dry_run:
        return [Repair(shown, "would move it to todo/: this clone's retry reached the remote", slug, True)]
    record = settled_record(ctx, slug, "retried", rec.generation, entry.ts)
    text = entry.text or "retried"
    ctx.backend.apply(slug, here[0], "todo", rec.data, msg_end(slug, "retried", text), record=record, old=data)
    return [Repair(shown, "moved to todo/: this clone's retry had reached the remote", slug, True)]
