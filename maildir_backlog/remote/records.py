"""What the remote holds and says (SPEC §8): the ref names under `refs/backlog/`, the records
(one commit each: the event's log line and the task file as of it), the updates a push makes, and
the failures a push can end in (`Lost`: exit 3; `RemoteError`: exit 1; `Unreachable`: exit 4). The protocol that
reads and writes them is `protocol.Remote`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import BacklogError, Conflict, Ended, Holder, Unavailable
from ..git import GitError
from ..logline import LogEntry, claim_of_record, generation, parse_log_line, read_log

NAMESPACE = "refs/backlog/"
MINE = "refs/backlog-mine/"
CLAIMS = "claims"
SETTLED = "settled"
KINDS = (CLAIMS, SETTLED)


def ref(kind: str, slug: str) -> str:
    """The remote's ref for `slug` (`refs/backlog/claims/<slug>`, `refs/backlog/settled/<slug>`)."""
    return f"{NAMESPACE}{kind}/{slug}"


def mine_ref(kind: str, slug: str) -> str:
    """This clone's memory of what it last wrote to `ref(kind, slug)`."""
    return f"{MINE}{kind}/{slug}"


class RemoteError(GitError):
    """The remote refused authentication or refuses `refs/backlog/`: exit 1. A `GitError`, so
    auto-pick stops at once instead of trying every candidate against it."""

    kind = "refused"


class Unreachable(RemoteError, Unavailable):
    """The remote could not be reached or did not answer in time: nothing changed; retry later
    (exit 4). A `RemoteError`, so every caller that reports the remote's failures reports it."""

    code = Unavailable.code
    kind = Unavailable.kind


class _LostCode:
    """A Lost's exit code: 3 (retry now), or 1 once its explanation found that the ref in the way
    is unreadable (not a record at all: it is reported, not retried). 3 when read off the class."""

    def __get__(self, lost: Lost | None, owner: type) -> int:
        if lost is None:
            return Conflict.code
        lost._explained()
        return 1 if lost._unreadable else Conflict.code


class _LostKind:
    """A Lost's kind, as its code: `conflict`, or `refused` for an unreadable ref in the way."""

    def __get__(self, lost: Lost | None, owner: type) -> str:
        if lost is None:
            return Conflict.kind
        lost._explained()
        return "refused" if lost._unreadable else Conflict.kind


class Lost(Conflict):
    """The remote refused an update because its ref moved: another clone acted (exit 3).
    `claim` is the remote's claim record now, `settled` its settlement record (either may be None).

    Naming the holder costs a listing and a fetch, which auto-pick (which drops the error and tries
    the next candidate) never needs: with `explain`, they are looked up when first asked for."""

    def __init__(
        self,
        message: str,
        claim: Record | None = None,
        settled: Record | None = None,
        explain: Callable[[], Lost] | None = None,
        unreadable: bool = False,
    ) -> None:
        super().__init__(message)
        self._claim, self._settled, self._explain = claim, settled, explain
        self._unreadable = unreadable  # the ref in the way is not a record at all: retrying cannot help

    def _explained(self) -> None:
        if self._explain is not None:
            explain, self._explain = self._explain, None
            found = explain()
            self._message, self._claim, self._settled = found.message, found.claim, found.settled
            self._unreadable = found._unreadable

    code = _LostCode()
    kind = _LostKind()

    @property
    def message(self) -> str:
        self._explained()
        return self._message

    @message.setter
    def message(self, value: str) -> None:
        self._message = value

    @property
    def claim(self) -> Record | None:
        self._explained()
        return self._claim

    @property
    def settled(self) -> Record | None:
        self._explained()
        return self._settled

    @property
    def holder(self) -> Holder | None:  # the error object's `holder`: the remote's claim now
        return self.claim.claim_holder() if self.claim is not None else None

    @property
    def ended(self) -> Ended | None:  # the error object's `settled`: the remote's settlement now
        return self.settled.ended() if self.settled is not None else None

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Listing:
    """The remote's `refs/backlog/*`: slug → commit id, one `git ls-remote`."""

    claims: dict[str, str] = field(default_factory=dict)
    settled: dict[str, str] = field(default_factory=dict)
    # the tips of the remote's default branch (`HEAD`) and intake branch (`refs/heads/<b>`) that the
    # same `git ls-remote` carries (SPEC §8 *One queue across clones*): ref → commit id
    heads: dict[str, str] = field(default_factory=dict)
    # tombstones: `claims/<slug>` left pointing at the settlement's own commit (`settled/<slug>`)
    # when the task left flight, so that every later claim, retry or prune leases on it (SPEC §8:
    # the confirmation a create-only push cannot give). Not claims: `claims` holds live ones only.
    tombs: dict[str, str] = field(default_factory=dict)

    def holds(self, slug: str) -> bool:
        return slug in self.claims or slug in self.settled


@dataclass(frozen=True)
class Record:
    """One commit of the remote's record: the event's log line and the task file as of it."""

    slug: str
    sha: str
    parent: str | None
    line: str
    data: bytes
    time: int  # committer time, seconds since the epoch

    @property
    def entry(self) -> LogEntry | None:
        return parse_log_line(self.line)

    @property
    def kind(self) -> str:
        entry = self.entry
        return entry.kind if entry is not None else "?"

    @property
    def log(self) -> list[LogEntry]:
        try:
            return read_log(self.data, f"{self.slug}.md")
        except BacklogError:
            return []

    @property
    def generation(self) -> int:
        return generation(self.log)

    def claim_entry(self) -> LogEntry | None:
        """The claim of record in the file's log (`logline.claim_of_record`)."""
        return claim_of_record(self.log)

    def claim_holder(self) -> Holder | None:
        """The claim of record as the error object's `holder` (None: the file records no claim)."""
        claim = self.claim_entry()
        return None if claim is None else Holder(claim.get("claimer"), claim.get("branch"), claim.ts)

    def ended(self) -> Ended | None:
        """A settlement record as the error object's `settled`: its outcome, the branch of the
        claim it ended, when (None: not a settlement this tool reads)."""
        outcome, entry, holder = self.outcome(), self.entry, self.claim_holder()
        if outcome not in ("done", "cancelled", "failed", "retried") or entry is None:
            return None
        return Ended(outcome, holder.branch if holder is not None else None, entry.ts)

    def holder(self) -> str:
        claim = self.claim_entry()
        if claim is None:
            return "an unknown claimer"
        return f"{claim.get('claimer', '?')} @ {claim.get('branch', '?')}"

    def pile(self) -> str | None:
        """The pile the file's log puts the task in (its latest `advanced to=`)."""
        for entry in reversed(self.log):
            if entry.kind == "advanced" and entry.get("to"):
                return entry.get("to")
        return None

    def outcome(self) -> str:
        """How a settlement record ended: done, cancelled, failed or retried."""
        entry = self.entry
        if entry is None:
            return "?"
        return "done" if entry.kind == "advanced" else entry.kind


@dataclass(frozen=True)
class Update:
    """One ref update of a push: `new` None deletes; `expect` is the value the ref must have
    ("" = must not exist), None = no lease (only next to a leased update in an atomic push)."""

    ref: str
    new: str | None
    expect: str | None


def blob_id(data: bytes, hex_len: int = 40) -> str:
    """The id git gives `data` as a blob (sha1, or sha256 in a repository of 64-hex ids)."""
    import hashlib  # here, not at the top: OpenSSL's bindings cost ~3 ms at every command's start

    algo = hashlib.sha256 if hex_len == 64 else hashlib.sha1
    return algo(b"blob %d\0" % len(data) + data).hexdigest()


def lines_of(raw: bytes) -> list[str]:
    return [line for line in raw.decode("utf-8", "replace").splitlines() if line.strip()]
