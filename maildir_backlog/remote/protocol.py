"""The protocol (SPEC §8): how one clone reads the remote's record and changes it, every change
a compare-and-swap push. The package's docstring (`remote/__init__.py`) says why it is safe."""

from __future__ import annotations

import functools
import os
import re
import time
from collections.abc import Iterable

from .. import argv, git, layout, limits, storage
from ..argv import END_OF_OPTIONS
from ..errors import BacklogError, InvalidInput
from ..git import GitError
from ..logline import generation, read_log, render_log_line
from ..task import SLUG_RE
from .records import (
    CLAIMS,
    KINDS,
    MINE,
    NAMESPACE,
    SETTLED,
    Listing,
    Lost,
    Record,
    RemoteError,
    Unreachable,
    Update,
    blob_id,
    lines_of,
    mine_ref,
    ref,
)

NONCE = "Backlog-Nonce"
_OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
TIP = "refs/backlog-tip"  # the remote's default branch as this clone last read it (a cache for auto-pick)
IDENTITY = ("-c", "user.name=maildir-backlog", "-c", "user.email=backlog@localhost.invalid")
QUIET_FETCH = ("fetch", "-q", "--no-write-fetch-head", "--no-auto-maintenance", "--no-tags")
# how long one exchange with the remote (a listing, a fetch, a push) may take before the verb gives
# up on it as unreachable: a server that accepted the connection and never answers would otherwise
# hold every agent's `take` for as long as its transport waits (for ssh: forever)
TIMEOUT_ENV = "BACKLOG_REMOTE_TIMEOUT"
TIMEOUT_SECONDS = 60.0


def exchange_timeout() -> float:
    """BACKLOG_REMOTE_TIMEOUT (seconds, > 0), else TIMEOUT_SECONDS."""
    given = os.environ.get(TIMEOUT_ENV, "").strip()
    try:
        value = float(given) if given else TIMEOUT_SECONDS
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise InvalidInput(f"invalid {TIMEOUT_ENV}={given!r}: expected a number of seconds above 0")
    return value


# why a ref update was refused, as `git push --porcelain` says it: a lost compare-and-swap
_LOST = (
    "stale info",
    "non-fast-forward",
    "fetch first",
    "already exists",
    "failed to update ref",
    "failed to lock",
    "cannot lock ref",
    "incorrect old value",
    "expected",
)
_AUTH = ("authentication failed", "permission denied", "could not read username", "403", "401", "access denied")


class Remote:
    """The remote named by `remote:` in AGENTS.md, as seen from one clone."""

    def __init__(
        self, repo: git.Repo, name: str, where: str = "backlog/AGENTS.md", skipped: list[str] | None = None
    ) -> None:
        self.repo = repo
        # a committed `remote:` value reaches git: it must be a remote configured in this clone
        # (exit 2 naming the line otherwise, for every verb alike: SPEC §3)
        self.name = git.configured_remote(repo, name, where)
        self.cwd = repo.toplevel
        self.timeout = exchange_timeout()
        self.skipped = skipped if skipped is not None else []  # refs not read (SPEC §3), one line each

    # -- running git ---------------------------------------------------------------------------
    def _git(self, *args: str, stdin: bytes = b"") -> str:
        code, out, err = git.call(self.cwd, *args, stdin=stdin)
        if code:
            said = lines_of(err or out) or [f"git {args[0]} failed"]
            raise GitError(said[-1], stderr=err.decode("utf-8", "replace"))
        return out.decode("utf-8", "replace")

    def _unreachable(self, err: bytes, action: str) -> RemoteError:
        said = lines_of(err)
        fatal = [line.removeprefix("fatal: ").strip() for line in said if line.startswith(("fatal:", "error:"))]
        detail = "; ".join(dict.fromkeys(fatal or said[-1:] or ["no answer"]))
        errno = [line.split("errno=", 1)[1] for line in said if "errno=" in line]
        if errno:
            detail += f" ({errno[-1]})"
        if any(word in detail.lower() for word in _AUTH):
            return RemoteError(
                f"remote {self.name} refused authentication while {action}: {detail}; fix the credentials"
                f" for `git remote get-url {self.name}` and retry",
                stderr=err.decode("utf-8", "replace"),
            )
        return Unreachable(
            f"remote {self.name} unreachable while {action}: {detail}; nothing was changed: check the network"
            f" and `git remote get-url {self.name}`, then retry",
            stderr=err.decode("utf-8", "replace"),
        )

    # -- reading the remote --------------------------------------------------------------------
    def listing(self, action: str = "listing refs/backlog/") -> Listing:
        """The remote's claims and settlements: one `git ls-remote`."""
        code, out, err = git.call(
            self.cwd,
            "ls-remote",
            END_OF_OPTIONS,
            self.name,
            f"{NAMESPACE}*",
            timeout=self.timeout,
            max_output=limits.REMOTE_LISTING_BYTES,
        )
        if code:
            raise self._unreachable(err or out, action)
        claims: dict[str, str] = {}
        settled: dict[str, str] = {}
        odd = 0
        for n, line in enumerate(lines_of(out)):
            if n >= limits.REMOTE_REFS:
                self._skip(
                    f"remote {self.name}: more than {limits.REMOTE_REFS:,} refs under {NAMESPACE}; the rest not read"
                )
                break
            sha, _, name = line.partition("\t")
            kind, _, slug = name.removeprefix(NAMESPACE).partition("/")
            if not (name.startswith(NAMESPACE) and kind in (CLAIMS, SETTLED)):
                continue  # not ours
            if SLUG_RE.fullmatch(slug) and ".." not in slug and _OBJECT_ID.fullmatch(sha):
                (claims if kind == CLAIMS else settled)[slug] = sha
            elif odd < 5:
                odd += 1
                self._skip(f"remote {self.name}: ref {argv.shown(name, 80)} is not a task's ref; skipped")
        return Listing(claims, settled)

    def _skip(self, line: str) -> None:
        if line not in self.skipped:
            self.skipped.append(line)

    def fetch(self, refs: Iterable[str], action: str = "fetching refs/backlog/") -> None:
        """Bring the commits of `refs` into this clone's object store (no ref, no FETCH_HEAD is
        written). A ref that vanished since it was listed is skipped: its record reads as missing."""
        wanted = list(dict.fromkeys(refs))
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            code, out, err = git.call(self.cwd, *QUIET_FETCH, END_OF_OPTIONS, self.name, *chunk, timeout=self.timeout)
            if code == 0:
                continue
            if b"couldn't find remote ref" not in err:
                raise self._unreachable(err or out, action)
            for one in chunk:  # one vanished (settled, rescued) meanwhile: fetch the others one by one
                code, out, err = git.call(self.cwd, *QUIET_FETCH, END_OF_OPTIONS, self.name, one, timeout=self.timeout)
                if code and b"couldn't find remote ref" not in err:
                    raise self._unreachable(err or out, action)

    def records(self, shas: dict[str, str]) -> dict[str, Record]:
        """slug → Record for each slug → commit id whose objects this clone has (one `cat-file --batch`)."""
        if not shas:
            return {}
        order = list(shas.items())
        got = git.objects(
            self.cwd, [spec for slug, sha in order for spec in (sha, f"{sha}:{slug}.md")], limits.TASK_BYTES
        )
        objects: list[bytes | None] = []
        for slug, sha in order:
            for spec in (sha, f"{sha}:{slug}.md"):
                value = got.get(spec)
                if isinstance(value, git.Oversize):
                    self._skip(f"remote {self.name}: the record of {slug} ({sha[:12]}): {limits.too_large(value.size)}")
                    value = None
                objects.append(value)
        result: dict[str, Record] = {}
        for i, (slug, sha) in enumerate(order):
            commit, data = (objects[2 * i : 2 * i + 2] + [None, None])[:2]
            if commit is None or data is None:
                continue
            head, _, message = commit.decode("utf-8", "replace").partition("\n\n")
            parent = None
            when = 0
            for line in head.splitlines():
                if line.startswith("parent ") and parent is None:
                    parent = line[7:].strip()
                elif line.startswith("committer "):
                    fields = line.rsplit(" ", 2)
                    when = int(fields[1]) if len(fields) == 3 and fields[1].isdigit() and len(fields[1]) <= 12 else 0
            line = (message.strip().splitlines() or [""])[0]  # the subject; the nonce trailer follows
            result[slug] = Record(slug, sha, parent, line, data, when)
        return result

    def unreadable(self, kind: str, slug: str, sha: str) -> str | None:
        """Why the record `sha` of `slug`, which this clone has, can never be read (no task file in
        its tree, a symlink, over the size bound, not a commit); None when it can or is not here.
        Such a ref was not written by this tool: it is reported, never retried (SPEC §3)."""
        got = git.objects(self.cwd, [sha, f"{sha}:{slug}.md"], limits.TASK_BYTES)
        if sha not in got:
            return None  # not fetched (it moved meanwhile): not a verdict
        _code, out, _err = git.call(self.cwd, "cat-file", "-t", END_OF_OPTIONS, sha)
        if out.strip() != b"commit":
            why = "it is not a commit"
        elif isinstance(got.get(f"{sha}:{slug}.md"), git.Oversize):
            why = f"its {slug}.md is {limits.too_large(got[f'{sha}:{slug}.md'].size)}"  # type: ignore[union-attr]
        elif f"{sha}:{slug}.md" not in got:
            why = f"its commit holds no file {slug}.md"
        else:
            return None
        return (
            f"{ref(kind, slug)} on remote {self.name} cannot be read: {why} ({sha[:12]}); this tool did not"
            f" write it. If no clone holds the task, delete it: git push {self.name} :{ref(kind, slug)}"
        )

    def default_tip(self, action: str = "reading the remote's default branch") -> str | None:
        """The remote's default branch at its current tip (asked now: one `ls-remote`), its objects
        fetched when this clone lacks them; None when the remote has no default branch. The tip is
        also kept in `refs/backlog-tip`, so that auto-pick skips what it holds as done without
        asking the remote again (`crossclone.merged_done`)."""
        for _attempt in range(3):
            code, out, err = git.call(self.cwd, "ls-remote", END_OF_OPTIONS, self.name, "HEAD", timeout=self.timeout)
            if code:
                raise self._unreachable(err or out, action)
            heads = [line.split("\t")[0] for line in lines_of(out) if line.endswith("\tHEAD")]
            sha = heads[0].strip() if heads else ""
            if not _OBJECT_ID.fullmatch(sha):
                return None
            if not self._has_commit(sha):
                self.fetch(["HEAD"], action)
            if self._has_commit(sha):  # else it moved (force-pushed) between the two exchanges: ask again
                git.call(self.cwd, "update-ref", END_OF_OPTIONS, TIP, sha)  # a cache: a concurrent writer may win
                return sha
        raise RemoteError(f"remote {self.name}: its default branch kept moving while {action}; retry")

    def _has_commit(self, sha: str) -> bool:
        return git.call(self.cwd, "cat-file", "-e", END_OF_OPTIONS, f"{sha}^{{commit}}")[0] == 0

    def settled_on(self, tip: str, slug: str, data: bytes) -> str | None:
        """Does commit `tip` hold `slug` settled, so that a copy with content `data` is stale? "done"
        for a copy in `done/` (terminal), "failed" for one in `failed/` of this copy's generation or
        later (a retried copy is of the next generation); None otherwise. A failed copy that cannot
        be read (too big, not a task) still counts (SPEC §7.11)."""
        specs = [f"{tip}:{layout.display(pile, slug)}" for pile in ("done", "failed")]
        code, out, _err = git.call(self.cwd, "cat-file", "--batch-check", stdin=("\n".join(specs) + "\n").encode())
        found = [line.split() for line in out.decode("utf-8", "replace").splitlines()]
        if code or len(found) != 2:
            raise GitError(f"cannot read the remote's default branch ({tip[:12]})")
        done, failed = (len(f) == 3 and f[1] == "blob" for f in found)
        if done:
            return "done"
        if not failed:
            return None
        try:
            mine = generation(read_log(data))
        except BacklogError:
            mine = 0
        if mine == 0 or not found[1][2].isdigit() or int(found[1][2]) > limits.TASK_BYTES:
            return "failed"
        blob = git.call(self.cwd, "cat-file", "blob", END_OF_OPTIONS, found[1][0])[1]
        try:
            theirs = generation(read_log(blob))
        except BacklogError:
            return "failed"
        return "failed" if mine <= theirs else None

    def record(self, slug: str, sha: str, kind: str | None = None) -> Record | None:
        """The record `sha` of `slug`, fetching `ref(kind, slug)` first when this clone lacks it."""
        found = self.records({slug: sha}).get(slug)
        if found is None and kind is not None:
            self.fetch([ref(kind, slug)])
            found = self.records({slug: sha}).get(slug)
        return found

    def lost(self, slug: str, action: str) -> Lost:
        """The Conflict for a refused update of `slug`, naming who holds it now (one listing, one fetch)."""
        try:
            now = self.listing(action)
            claim = settled = None
            if slug in now.claims:
                claim = self.record(slug, now.claims[slug], CLAIMS)
                broken = None if claim is not None else self.unreadable(CLAIMS, slug, now.claims[slug])
                if broken is not None:
                    return Lost(f"{slug} is held by an unreadable claim: {broken}", unreadable=True)
            elif slug in now.settled:
                settled = self.record(slug, now.settled[slug], SETTLED)
        except BacklogError:
            return Lost(f"claim conflict: {slug} changed on remote {self.name} while {action}")
        if claim is not None:
            message = (
                f"claim conflict: {slug} already in flight on another clone: {claim.holder()} (remote {self.name})"
            )
        elif settled is not None:
            message = (
                f"claim conflict: {slug} was already settled ({settled.outcome()}) on remote {self.name}"
                f" by {settled.holder()}"
            )
        else:
            message = f"claim conflict: {slug} changed on remote {self.name} while {action}"
        return Lost(message, claim, settled)

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
        args = ("update-ref", "-d", mine_ref(kind, slug)) if sha is None else ("update-ref", mine_ref(kind, slug), sha)
        deadline = time.monotonic() + 10
        while True:
            try:
                self._git(*args)
                return
            except GitError as exc:  # `packed-refs.lock` held by a concurrent delete or `git gc`: retry
                if ".lock" not in f"{exc.message} {exc.stderr}" or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def holds(self, sha: str | None, slug: str, data: bytes) -> bool:
        """Is `data` exactly the file of commit `sha` (an update already published)?"""
        if sha is None:
            return False
        code, out, _err = git.call(self.cwd, "rev-parse", "-q", "--verify", END_OF_OPTIONS, f"{sha}:{slug}.md")
        return code == 0 and out.decode().strip() == blob_id(data, len(sha))

    # -- writing -------------------------------------------------------------------------------
    def commit(self, slug: str, data: bytes, parent: str | None) -> str:
        """A commit whose tree is `<slug>.md` = `data` and whose message is its last log line."""
        blob = self._git("hash-object", "-w", "--stdin", stdin=data).strip()
        tree = self._git("mktree", stdin=f"100644 blob {blob}\t{slug}.md\n".encode()).strip()
        try:
            log = read_log(data, f"{slug}.md")
        except BacklogError:
            log = []
        message = render_log_line(log[-1]) if log else f"backlog {slug}"
        parents = ["-p", parent] if parent else []
        # The nonce makes every commit unique: two clones writing the same line in the same second
        # would otherwise make the same commit, and a push of the value a ref already has
        # "succeeds" (up to date): both would believe they won the create.
        nonce = f"{NONCE}: {os.urandom(8).hex()}"
        return self._git(*IDENTITY, "commit-tree", tree, *parents, "-m", message, "-m", nonce).strip()

    def push(self, updates: list[Update], slug: str, action: str) -> None:
        """One `git push --atomic` of `updates`, each with its lease. Raises Lost or RemoteError."""
        args = ["push", "--porcelain", "--atomic", "--no-verify", "--no-recurse-submodules"]
        args += [f"--force-with-lease={u.ref}:{u.expect}" for u in updates if u.expect is not None]
        args += [END_OF_OPTIONS, self.name]
        for u in updates:
            spec = f":{u.ref}" if u.new is None else f"{u.new}:{u.ref}"
            args.append(f"+{spec}" if u.expect is None else spec)
        code, out, err = git.call(self.cwd, *args, timeout=self.timeout)
        if code == 0:
            return
        refused = [line.split("\t") for line in lines_of(out) if line.startswith("!") and line.count("\t") >= 2]
        if not refused:
            raise self._unreachable(err or out, action)
        reasons = [fields[2] for fields in refused]
        said = [line.removeprefix("remote: ").strip() for line in lines_of(err) if line.startswith("remote:")]
        # "(atomic ...)" is said of every update that fell with the one refused; when the server's
        # ref transaction itself failed, only its own message (on stderr) says why
        own = [r for r in reasons if "atomic" not in r] or said or reasons
        if any(word in reason for reason in own for word in _LOST):
            raise Lost(f"claim conflict: {slug} changed on remote {self.name}", explain=lambda: self.lost(slug, action))
        why = f"{own[0]}{': ' + said[-1] if said else ''}"
        raise RemoteError(
            f"remote {self.name} refuses {refused[0][1].rpartition(':')[2]} while {action}: {why}; allow"
            f" {NAMESPACE}* on the server, or remove `remote: {self.name}` from backlog/AGENTS.md",
            stderr=err.decode("utf-8", "replace"),
        )

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
        values = {ref(CLAIMS, s): sha for s, sha in now.claims.items()}
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
        """Create `claims/<slug>` (expected: none)."""
        if self._published(CLAIMS, slug, data):
            return  # an interrupted claim resumed, or a record adopted
        new = self.commit(slug, data, None)
        claim = ref(CLAIMS, slug)
        action = f"claiming {slug}"
        self._publish(
            tx, slug, {CLAIMS: new}, [Update(claim, new, "")], [Update(claim, None, new)], action, "remote:claimed"
        )
        self._not_settled_since(slug, data, action)

    def _not_settled_since(self, slug: str, data: bytes, action: str) -> None:
        """The claim landed: was the task settled meanwhile? A create-only push cannot tell: another
        clone may have claimed *and settled* the slug between the listing this claim was chosen
        from and the push (its settle deletes `claims/<slug>`, so the create succeeds). Settlements
        are only ever rewritten by a retry, so one listing after the push sees any that happened
        before it. Raising here undoes the claim (the push registered its compensation)."""
        now = self.listing(f"checking {slug} after claiming it")
        sha = now.settled.get(slug)
        if sha is not None:  # claimable only as a retried task's retried copy (or newer)
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
        self._not_settled_on_tip(slug, data, action)

    def _not_settled_on_tip(self, slug: str, data: bytes, action: str) -> None:
        """The claim landed and no `settled/<slug>` was there after it: does the remote's default
        branch, at its current tip, hold the task in done/ or failed/? Its `settled/` ref may have
        been pruned (`maintain` prunes only what that tip holds as done), or the task was settled
        before the remote was declared. Asked after the listing, so a prune that the listing
        missed had already seen the tip hold the task. Raising here undoes the claim: exit 1, a
        stale copy (no race was lost)."""
        tip = self.default_tip(f"checking {slug} against the remote's default branch")
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
                self._publish(
                    tx, slug, memory, [Update(settled, new, "")], [Update(settled, None, new)], action, "remote:settled"
                )
                self._not_settled_on_tip(slug, data, action)  # todo → done in one step is a claim too
                return
            try:
                self._publish(
                    tx,
                    slug,
                    {SETTLED: new},
                    [Update(settled, new, None), Update(claim, None, old)],
                    [Update(claim, old, ""), Update(settled, None, new)],
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

    def retry(self, slug: str, data: bytes, tx: storage.Transaction) -> None:
        """Rewrite `settled/<slug>` as the `retried` record, leased on the value read. Refused
        when the remote's record is not the failure this copy records (retried or claimed elsewhere)."""
        if self._published(SETTLED, slug, data):
            return  # an interrupted retry resumed
        action = f"retrying {slug}"
        now = self.listing(action)
        if slug in now.claims:
            raise self.lost(slug, action)
        current = now.settled.get(slug)
        if current is not None and current != self.mine(SETTLED, slug):
            found = self.record(slug, current, SETTLED)
            if found is None or found.outcome() != "failed" or found.generation != generation(read_log(data)) - 1:
                what = f"{found.outcome()} by {found.holder()}" if found is not None else "changed"
                raise Lost(
                    f"{slug} was {what} on remote {self.name} since this copy failed: retry refused", None, found
                )
        elif current is not None and self.records({slug: current}).get(slug) is None:
            self.fetch([ref(SETTLED, slug)])
        parent = current if current is not None and self.records({slug: current}) else None
        new = self.commit(slug, data, parent)
        settled = ref(SETTLED, slug)
        self._publish(
            tx,
            slug,
            {SETTLED: new},
            [Update(settled, new, current or "")],
            [Update(settled, current, new)],
            action,
            "remote:retried",
        )

    def delete(self, kind: str, slug: str, expect: str, action: str) -> None:
        """Delete `ref(kind, slug)` if it still is `expect` (pruning, undoing an unfinished claim)."""
        self.push([Update(ref(kind, slug), None, expect)], slug, action)
