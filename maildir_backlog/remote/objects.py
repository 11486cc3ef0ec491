"""The remote's records as git objects (SPEC §8): reading them (`records`, `record`, why one is
unreadable, what the default branch's tip holds) and building them (`commit`: a one-file tree, the
event's log line as its subject, a nonce). Every record is a commit made with plumbing: no branch,
work tree or index is touched."""

from __future__ import annotations

import os

from .. import git, gitwrite, layout, limits
from ..argv import END_OF_OPTIONS
from ..errors import BacklogError
from ..git import GitError
from ..logline import generation, read_log, render_log_line
from .records import CLAIMS, SETTLED, Lost, Record, RemoteError, blob_id, lines_of, ref
from .transport import OBJECT_ID, Transport

NONCE = "Backlog-Nonce"
TIP = "refs/backlog-tip"  # the remote's default branch as this clone last read it (a cache for auto-pick)
IDENTITY = ("-c", "user.name=maildir-backlog", "-c", "user.email=backlog@localhost.invalid")


class Objects(Transport):
    """The remote's records, read from and written to this clone's object store."""

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
                    when = (limits.number(fields[1], limits.NUMBER_MAX) if len(fields) == 3 else None) or 0
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

    def default_tip(self, action: str = "reading the remote's default branch", keep: bool = True) -> str | None:
        """The remote's default branch at its current tip (asked now: one `ls-remote`), its objects
        fetched when this clone lacks them; None when the remote has no default branch. With
        `keep` (a claim's check, inside the move protocol) the tip is also kept in
        `refs/backlog-tip`, so that auto-pick skips what it holds as done without asking the
        remote again (`crossclone.merged_done`); the janitor's prune reads it without keeping it."""
        for _attempt in range(3):
            code, out, err = git.call(self.cwd, "ls-remote", END_OF_OPTIONS, self.name, "HEAD", timeout=self.timeout)
            if code:
                raise self._unreachable(err or out, action)
            heads = [line.split("\t")[0] for line in lines_of(out) if line.endswith("\tHEAD")]
            sha = heads[0].strip() if heads else ""
            if not OBJECT_ID.fullmatch(sha):
                return None
            if self._fetched(sha, action, keep):  # else it moved (force-pushed) between the two exchanges: ask again
                return sha
        raise RemoteError(f"remote {self.name}: its default branch kept moving while {action}; retry")

    def tip_of(self, sha: str | None, action: str) -> str | None:
        """The default branch's tip `sha` as a listing carried it (None: the remote has none), its
        objects fetched only when this clone lacks them; when it moved before that fetch, the tip
        asked anew (`default_tip`)."""
        if sha is None or not OBJECT_ID.fullmatch(sha):
            return None
        return sha if self._fetched(sha, action) else self.default_tip(action)

    def _fetched(self, sha: str, action: str, keep: bool = True) -> bool:
        """Does this clone have commit `sha` (the remote's default tip), fetching HEAD if not? Kept
        in `refs/backlog-tip` too, so that auto-pick skips what it holds as done without asking the
        remote again (`crossclone.merged_done`)."""
        if not self._has_commit(sha):
            self.fetch(["HEAD"], action)
        if not self._has_commit(sha):
            return False
        if keep:  # (inside the move protocol: a claim's check)
            gitwrite.update_ref(self.cwd, TIP, sha)  # a cache: a concurrent writer may win
        return True

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
        if mine == 0 or limits.number(found[1][2], limits.TASK_BYTES) is None:
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

    def holds(self, sha: str | None, slug: str, data: bytes) -> bool:
        """Is `data` exactly the file of commit `sha` (an update already published)?"""
        if sha is None:
            return False
        code, out, _err = git.call(self.cwd, "rev-parse", "-q", "--verify", END_OF_OPTIONS, f"{sha}:{slug}.md")
        return code == 0 and out.decode().strip() == blob_id(data, len(sha))

    def commit(self, slug: str, data: bytes, parent: str | None) -> str:
        """A commit whose tree is `<slug>.md` = `data` and whose message is its last log line."""
        blob = gitwrite.blob(self.cwd, data)
        tree = gitwrite.tree(self.cwd, f"100644 blob {blob}\t{slug}.md\n".encode())
        try:
            log = read_log(data, f"{slug}.md")
        except BacklogError:
            log = []
        message = render_log_line(log[-1]) if log else f"backlog {slug}"
        # The nonce makes every commit unique: two clones writing the same line in the same second
        # would otherwise make the same commit, and a push of the value a ref already has
        # "succeeds" (up to date): both would believe they won the create.
        nonce = f"{NONCE}: {os.urandom(8).hex()}"
        return gitwrite.commit_tree(self.cwd, tree, [parent] if parent else [], [message, nonce], IDENTITY)
