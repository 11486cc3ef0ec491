"""The protocol (SPEC §8): how one clone changes the remote's record, every change a
compare-and-swap push, with this clone's memory of what it last wrote. The package's docstring
(`remote/__init__.py`) says why it is safe; `transport.py` talks to the remote, `objects.py` reads
and builds the records."""

from __future__ import annotations

import functools
import time

from .. import gitwrite, storage
from ..argv import END_OF_OPTIONS
from ..errors import BacklogError, Held, LeftFlight
from ..git import GitError
from ..logline import generation, read_log
from .objects import Objects
from .records import CLAIMS, KINDS, MINE, SETTLED, Listing, Lost, RemoteError, Update, lines_of, mine_ref, ref


class Remote(Objects):
    """The remote named by `remote:` in AGENTS.md, as seen from one clone."""

    # -- this clone's memory -------------------------------------------------------------------

    def mine(self, kind: str, slug: str) -> str | None:
        out = self._git("for-each-ref", "--format=%(objectname)", END_OF_OPTIONS, mine_ref(kind, slug)).strip()
        return out or None

    def mine_all(self) -> dict[str, dict[str, str]]:
        """kind → slug → commit id: everything this clone remembers writing."""
        found: dict[str, dict[str, str]] = {kind: {} for kind in KINDS}
        for line in self._git("for-each-ref", "--format=%(objectname) %(refname)", MINE).splitlines():
            sha, _, name = line.partition(" ")
            kind, _, slug = name.removeprefix(MINE).partition("/")
            if kind in found and slug:
                found[kind][slug] = sha
        return found

    def remember(self, kind: str, slug: str, sha: str | None) -> None:
        """Remember `sha` as what this clone last wrote to `ref(kind, slug)` (None: forget it)."""
        deadline = time.monotonic() + 10
        while True:
            code, out, err = gitwrite.update_ref(self.cwd, mine_ref(kind, slug), sha)
            if not code:
                return
            said = lines_of(err or out) or ["git update-ref failed"]
            # `packed-refs.lock` held by a concurrent delete or `git gc`: retry
            if ".lock" not in " ".join(said) or time.monotonic() > deadline:
                raise GitError(said[-1], stderr=err.decode("utf-8", "replace"))
            time.sleep(0.02)

    # -- writing -------------------------------------------------------------------------------

    def _publish(
        self,
        tx: storage.Transaction,
        slug: str,
        memory: dict[str, str | None],
        updates: list[Update],
        undo: list[Update],
        action: str,
        point: str,
    ) -> None:
        """Write the memory (pending), push, and register the compensating push with `tx`.

        A refused push (Lost) puts the memory back. A push that failed on the way (the remote
        went away) may or may not have landed: one listing tells; when even that fails, the
        memory stays pending and `maintain` (or the next verb, `_unlanded`) settles it later."""
        before = {kind: self.mine(kind, slug) for kind in memory}
        for kind, sha in memory.items():
            self.remember(kind, slug, sha)
        storage.crash_point("remote:pending")
        try:
            self.push(updates, slug, action)
        except Lost:
            self._restore(slug, before)
            raise
        except RemoteError:
            landed = self._landed(updates)
            if landed is False:
                self._restore(slug, before)
            if not landed:
                raise

        def compensate() -> None:  # the local step failed after the push: take the update back
            self.push(undo, slug, f"undoing {action}")
            self._restore(slug, before)

        tx.on_undo(compensate)
        storage.crash_point(point)

    def _restore(self, slug: str, memory: dict[str, str | None]) -> None:
        for kind, sha in memory.items():
            self.remember(kind, slug, sha)

    def _landed(self, updates: list[Update]) -> bool | None:
        """After a push failed on the way: did it land (True), not land (False), or is the remote
        still out of reach (None)?"""
        try:
            now = self.listing("checking whether a push landed")
        except RemoteError:
            return None
        values = {ref(CLAIMS, s): sha for s, sha in {**now.claims, **now.tombs}.items()}
        values.update({ref(SETTLED, s): sha for s, sha in now.settled.items()})
        return all(values.get(u.ref) == u.new for u in updates)

    def _unlanded(self, slug: str, mine: str) -> bool:
        """Was this clone's remembered claim `mine` a push that never landed (the remote still
        holds its parent)? If so the memory is put back to the parent: True (one listing)."""
        rec = self.records({slug: mine}).get(slug)
        if rec is None:
            return False
        if self.listing(f"checking the claim on {slug}").claims.get(slug) != rec.parent:
            return False
        self.remember(CLAIMS, slug, rec.parent)
        return True

    def _published(self, kind: str, slug: str, data: bytes, gone: str | None = None) -> bool:
        """Is `data` already on the remote as what this clone last wrote (and `ref(gone, slug)`
        gone)? The memory alone cannot say: after a push that failed on the way it is pending,
        maybe unlanded. So a match is confirmed with one listing (only then: rare)."""
        mine = self.mine(kind, slug)
        if not self.holds(mine, slug, data):
            return False
        now = self.listing(f"checking the {kind} record of {slug}")
        values = now.claims if kind == CLAIMS else now.settled
        return values.get(slug) == mine and (
            gone is None or slug not in (now.claims if gone == CLAIMS else now.settled)
        )

    # -- the steps of the move protocol (called by Backend.apply, before the local change) -----

    def claim(self, slug: str, data: bytes, tx: storage.Transaction) -> None:
        """Create `claims/<slug>`, leased on what this command's listing showed there: nothing, or
        the tombstone its last settlement left (SPEC §8: two exchanges, that listing and this push).
        Every settlement, retry and prune moves `claims/<slug>` too, so a push leased on the listing
        fails when any of them came between: the lease is the confirmation. What the listing showed
        settled, and what the remote's default branch held at the tip it carried, are checked here
        first, from objects this clone has (fetched only when it lacks them)."""
        action = f"claiming {slug}"
        now = self.last if self.last is not None else self.listing(action)
        mine = self.mine(CLAIMS, slug)
        if mine is not None and now.claims.get(slug) == mine and self.holds(mine, slug, data):
            return  # an interrupted claim resumed, or a record adopted
        self._not_settled(now, slug, data)
        self._not_settled_on_tip(now, slug, data, action)
        new = self.commit(slug, data, None)
        claim = ref(CLAIMS, slug)
        expect = now.tombs.get(slug, "")
        self._publish(
            tx,
            slug,
            {CLAIMS: new},
            [Update(claim, new, expect)],
            [Update(claim, expect or None, new)],
            action,
            "remote:claimed",
        )

    def _not_settled(self, now: Listing, slug: str, data: bytes) -> None:
        """Refuse a claim of a task the listing shows settled, unless the record is a retry of this
        copy's generation or older (the reopened task). Settlements are rewritten only together
        with the tombstone the claim leases on, so one seen here is still the remote's at the push,
        or the push is refused."""
        sha = now.settled.get(slug)
        if sha is None:
            return
        rec = self.record(slug, sha, SETTLED)
        try:
            copy = generation(read_log(data, f"{slug}.md"))
        except BacklogError:
            copy = 0
        if rec is None or rec.outcome() != "retried" or rec.generation > copy:
            what = f"{rec.outcome()} by {rec.holder()}" if rec is not None else "settled"
            raise Lost(
                f"claim conflict: {slug} was already settled on remote {self.name} ({what}): this copy is stale",
                None,
                rec,
            )

    def _not_settled_on_tip(self, now: Listing, slug: str, data: bytes, action: str) -> None:
        """Does the remote's default branch, at the tip the listing carried, hold the task in done/
        or failed/? Its `settled/` ref may have been pruned (`maintain` prunes only what that tip
        holds as done, and deletes the tombstone with it, which the claim's lease then sees), or
        the task was settled before the remote was declared. Refused: exit 1, a stale copy (no race
        was lost)."""
        tip = self.tip_of(now.heads.get("HEAD"), action)
        outcome = None if tip is None else self.settled_on(tip, slug, data)
        if tip is not None and outcome is not None:
            raise BacklogError(
                f"{slug} is {outcome} on the remote's default branch (remote {self.name}, at {tip[:12]}):"
                " this copy is stale (merge or pull that branch)"
            )

    def update(self, slug: str, data: bytes, tx: storage.Transaction, lease: str | None = None) -> None:
        """Move `claims/<slug>` to `data` (a progress line, a hop, a rescue). Expected: `lease`
        (a rescue: the value it read), else what this clone last wrote. A claim this clone made
        before `remote:` was declared is published here, create-only."""
        for first in (True, False):
            old = lease if lease is not None else self.mine(CLAIMS, slug)
            if old is None:
                return self.claim(slug, data, tx)
            if lease is None and self._published(CLAIMS, slug, data):
                return None
            new = self.commit(slug, data, old)
            claim = ref(CLAIMS, slug)
            action = f"updating the claim on {slug}"
            try:
                return self._publish(
                    tx,
                    slug,
                    {CLAIMS: new},
                    [Update(claim, new, old)],
                    [Update(claim, old, new)],
                    action,
                    "remote:updated",
                )
            except Lost:
                if not first or lease is not None or not self._unlanded(slug, old):
                    raise
        return None

    def settle(self, slug: str, data: bytes, tx: storage.Transaction) -> None:
        """Create `settled/<slug>` and delete `claims/<slug>` in one atomic push; the claim's lease
        (what this clone last wrote) guards both, so only the holder settles. The claim's memory
        goes only once the push landed."""
        for first in (True, False):
            old = self.mine(CLAIMS, slug)
            if old is None and self.holds(self.mine(SETTLED, slug), slug, data):
                return  # settled with exactly this (the claim's memory goes only once that landed)
            if old is not None and self._published(SETTLED, slug, data, gone=CLAIMS):
                self.remember(CLAIMS, slug, None)
                return  # a resumed move, or the remote's record adopted
            new = self.commit(slug, data, old)
            claim, settled = ref(CLAIMS, slug), ref(SETTLED, slug)
            action = f"settling {slug}"
            if old is None:  # never claimed through the remote (a pipeline without in-flight piles)
                memory: dict[str, str | None] = {SETTLED: new}
                self._not_settled_on_tip(self.last or self.listing(action), slug, data, action)  # todo → done: a claim
                self._publish(
                    tx,
                    slug,
                    memory,
                    [Update(settled, new, ""), Update(claim, new, "")],  # the tombstone, create-only
                    [Update(settled, None, new), Update(claim, None, new)],
                    action,
                    "remote:settled",
                )
                return
            try:
                self._publish(
                    tx,
                    slug,
                    {SETTLED: new},
                    [Update(settled, new, None), Update(claim, new, old)],  # the claim becomes the tombstone
                    [Update(claim, old, new), Update(settled, None, new)],
                    action,
                    "remote:settled",
                )
            except Lost:
                if not first or not self._unlanded(slug, old):
                    raise
                continue
            self.remember(CLAIMS, slug, None)
            tx.on_undo(functools.partial(self.remember, CLAIMS, slug, old))
            return

    def release(self, slug: str, data: bytes, tx: storage.Transaction) -> None:
        """Delete `claims/<slug>` (a release: the task is claimable again by any clone), leased on
        what this clone last wrote; no `settled/` record is written. The claim's memory goes only
        once the push landed. A claim already gone (a release interrupted after its push) is
        gone: nothing to do. `data` (the released copy) is not published: the remote keeps no
        record of a task in todo/."""
        for first in (True, False):
            old = self.mine(CLAIMS, slug)
            if old is None:
                return  # no claim of this clone's on the remote (made before `remote:` was declared)
            claim = ref(CLAIMS, slug)
            action = f"releasing {slug}"
            try:
                self._publish(
                    tx, slug, {}, [Update(claim, None, old)], [Update(claim, old, "")], action, "remote:released"
                )
            except Lost:
                now = self.listing(f"checking the claim on {slug}")
                if slug in now.claims or slug in now.settled:
                    if first and self._unlanded(slug, old):
                        continue  # this clone's last update never landed: release what the remote holds
                    raise  # another clone took the claim over, or settled it
            self.remember(CLAIMS, slug, None)
            tx.on_undo(functools.partial(self.remember, CLAIMS, slug, old))
            return

    def retry(self, slug: str, data: bytes, tx: storage.Transaction) -> None:
        """Rewrite `settled/<slug>` as the `retried` record, leased on the value read. Refused
        when the remote's record is not the failure this copy records (retried or claimed elsewhere)."""
        if self._published(SETTLED, slug, data):
            return  # an interrupted retry resumed
        action = f"retrying {slug}"
        now = self.last if self.last is not None else self.listing(action)  # (the push is leased on it)
        if slug in now.claims:  # reopened and claimed meanwhile: a refusal naming the holder (SPEC §5)
            claim = self.record(slug, now.claims[slug], CLAIMS)
            if claim is None:
                raise self.lost(slug, action)
            raise Held(
                f"{slug} is in flight on another clone: claimed by {claim.holder()} (remote {self.name}),"
                " not failed: retry refused",
                holder=claim.claim_holder(),
            )
        current = now.settled.get(slug)
        if current is not None and current != self.mine(SETTLED, slug):
            found = self.record(slug, current, SETTLED)
            if found is None or found.outcome() != "failed" or found.generation != generation(read_log(data)) - 1:
                what = f"{found.outcome()} by {found.holder()}" if found is not None else "changed"
                said = f"{slug} was {what} on remote {self.name} since this copy failed: retry refused"
                if found is not None:  # what became of it, said (exit 1): no race was lost in the act
                    raise LeftFlight(said, ended=found.ended())
                raise Lost(said, None, found)
        elif current is not None and self.records({slug: current}).get(slug) is None:
            self.fetch([ref(SETTLED, slug)])
        parent = current if current is not None and self.records({slug: current}) else None
        new = self.commit(slug, data, parent)
        settled, tombstone, tomb = ref(SETTLED, slug), ref(CLAIMS, slug), now.tombs.get(slug)
        self._publish(
            tx,
            slug,
            {SETTLED: new},
            [Update(settled, new, current or "")] + ([Update(tombstone, new, tomb)] if tomb else []),
            [Update(settled, current, new)] + ([Update(tombstone, tomb, new)] if tomb else []),
            action,
            "remote:retried",
        )

    # -- the janitor's steps (`repair/remote_bucket.py`, `repair/remote_reconcile.py`) -----------

    def fail_claim(self, slug: str, data: bytes, sha: str, tx: storage.Transaction) -> None:
        """Fail another clone's claim `sha`, past its budget: `settled/<slug>` made with `data` and
        `claims/<slug>` moved to the same commit (its tombstone) in one push, leased on the claim
        read. Undo: the claim put back."""
        new = self.commit(slug, data, sha)
        settled, claim = ref(SETTLED, slug), ref(CLAIMS, slug)
        self.push([Update(settled, new, None), Update(claim, new, sha)], slug, f"failing {slug} past its budget")
        tx.on_undo(lambda: self.push([Update(claim, sha, new), Update(settled, None, new)], slug, "undoing a fail"))

    def prune(self, slug: str, sha: str, tomb: bool, action: str, tx: storage.Transaction) -> None:
        """Delete `settled/<slug>` if it still is `sha`, with its tombstone (`tomb`) in the same atomic
        push (a claim leased on the listing that showed them is then refused), and this clone's
        memory of it. Undo: all back."""
        gone = [ref(SETTLED, slug)] + ([ref(CLAIMS, slug)] if tomb else [])
        self.push([Update(name, None, sha) for name in gone], slug, action)
        tx.on_undo(lambda: self.push([Update(name, sha, "") for name in gone], slug, f"undoing {action}"))
        if self.mine(SETTLED, slug) == sha:
            self.remember(SETTLED, slug, None)
            tx.on_undo(functools.partial(self.remember, SETTLED, slug, sha))

    def drop_claim(self, slug: str, claim: str, parent: str | None, tx: storage.Transaction) -> None:
        """Release this clone's claim `claim` that no verb finished: `claims/<slug>` back to `parent`
        (None: deleted), leased on `claim`, and the memory of it forgotten. Undo: both back."""
        name = ref(CLAIMS, slug)
        self.push([Update(name, parent, claim)], slug, f"releasing the claim on {slug}")
        tx.on_undo(lambda: self.push([Update(name, claim, parent or "")], slug, "undoing a release"))
        prior = self.mine(CLAIMS, slug)
        self.remember(CLAIMS, slug, None)
        tx.on_undo(functools.partial(self.remember, CLAIMS, slug, prior))
