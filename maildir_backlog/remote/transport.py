"""Talking to the remote (SPEC §8): running git against it within a time bound, listing and
fetching `refs/backlog/`, pushing compare-and-swap updates, and sorting what git says when it fails
into a lost race (`Lost`, exit 3), a refusal (`RemoteError`, exit 1) or no answer (`Unreachable`,
exit 4). The records' objects are `objects.py`; the steps of the protocol are `protocol.py`."""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterable

from .. import argv, git, gitwrite, limits
from ..argv import END_OF_OPTIONS
from ..errors import InvalidInput
from ..git import GitError
from ..task import is_slug
from .records import CLAIMS, NAMESPACE, SETTLED, Listing, Lost, RemoteError, Unreachable, Update, lines_of

OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
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
# what a remote or this clone's setting refuses every time (retrying cannot help): git's words, and
# what to change ({name}: the remote's name)
_SETUP = (
    (
        "does not support --atomic push",
        "it does not accept atomic pushes (`receive.advertiseAtomic` is off on the server), and every claim"
        " is one (SPEC §8): turn it on there, or take `remote:` out of backlog/AGENTS.md",
    ),
    (
        "--mirror can't be combined with refspecs",
        "this clone has it as a mirror (`remote.{name}.mirror`), and a claim pushes only its own refs:"
        " name another remote in backlog/AGENTS.md, or `git config --unset remote.{name}.mirror`",
    ),
)


class Transport:
    """The remote named by `remote:` in AGENTS.md, as seen from one clone: the exchanges."""

    def __init__(
        self,
        repo: git.Repo,
        name: str,
        where: str = "backlog/AGENTS.md",
        skipped: list[str] | None = None,
        intake: str | None = None,
    ) -> None:
        self.repo = repo
        # a committed `remote:` value reaches git: it must be a remote configured in this clone
        # (exit 2 naming the line otherwise, for every verb alike: SPEC §3)
        self.name = git.configured_remote(repo, name, where)
        self.cwd = repo.toplevel
        self.timeout = exchange_timeout()
        self.skipped = skipped if skipped is not None else []  # refs not read (SPEC §3), one line each
        # the intake branch (SPEC §8 *One queue across clones*: the remote's is the queue), whose tip
        # every listing carries; None: no intake branch (or a name that is not valid)
        self.intake = intake if intake is not None and not argv.branch_name_problem(intake) else None
        self._followed = False  # this command's first listing brought the intake branch up to date
        self._early: Listing | RemoteError | None = None  # that listing (or its failure), for the next ask
        self.last: Listing | None = None  # this command's latest listing: a claim leases on what it showed

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
        for sign, advice in _SETUP:
            if sign in detail:
                return RemoteError(
                    f"remote {self.name} refused while {action}: {advice.format(name=self.name)} (nothing was changed)",
                    stderr=err.decode("utf-8", "replace"),
                )
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
        """The remote's claims and settlements, and the tips of its default and intake branches:
        one `git ls-remote`. The first listing of a command also brings the intake branch's
        remote-tracking ref up to date, with one fetch when the tip moved (`follow`). The queue
        asks for a listing before the verb does (`follow`): the verb's first one is that one,
        unless a push of this command came between."""
        early, self._early = self._early, None
        if isinstance(early, RemoteError):
            raise early
        if early is not None:
            self.last = early
            return early
        heads = ["HEAD"] + ([f"refs/heads/{self.intake}"] if self.intake else [])
        code, out, err = git.call(
            self.cwd,
            "ls-remote",
            END_OF_OPTIONS,
            self.name,
            f"{NAMESPACE}*",
            *heads,
            timeout=self.timeout,
            max_output=limits.REMOTE_LISTING_BYTES,
        )
        if code:
            raise self._unreachable(err or out, action)
        found = self._parsed(out, heads)
        self.last = found
        if not self._followed:
            self._followed = True
            self._catch_up(found.heads.get(f"refs/heads/{self.intake}"))
        return found

    def follow(self) -> None:
        """Bring the intake branch's remote-tracking ref up to date before the queue is read (SPEC
        §8: the queue is the remote's intake branch as last fetched; fetched only when the listing
        shows that it moved). The listing is kept for the verb's own first ask (no second
        exchange); a failure too, raised there (a view says the remote is unreachable)."""
        if self._followed:
            return
        try:
            self._early = self.listing("listing the remote's refs")
        except RemoteError as exc:
            self._followed = True
            self._early = exc

    def _catch_up(self, tip: str | None) -> None:
        """Fetch the intake branch when the remote's tip (`tip`, from a listing) is not its
        remote-tracking ref's: one exchange, only when it moved. A failure leaves the ref as it
        was: the queue is then the branch as last fetched, and the claim's push still decides."""
        if self.intake is None or tip is None or tip == self.tracked(self.intake):
            return
        with contextlib.suppress(RemoteError):
            self.fetch_branch(self.intake)

    def _parsed(self, out: bytes, heads: list[str]) -> Listing:
        claims: dict[str, str] = {}
        settled: dict[str, str] = {}
        tips: dict[str, str] = {}
        odd = 0
        for n, line in enumerate(lines_of(out)):
            sha, _, name = line.partition("\t")
            if name in heads:
                if OBJECT_ID.fullmatch(sha):
                    tips[name] = sha
                continue
            if n >= limits.REMOTE_REFS:
                self._skip(
                    f"remote {self.name}: more than {limits.REMOTE_REFS:,} refs under {NAMESPACE}; the rest not read"
                )
                break
            kind, _, slug = name.removeprefix(NAMESPACE).partition("/")
            if not (name.startswith(NAMESPACE) and kind in (CLAIMS, SETTLED)):
                continue  # not ours
            if is_slug(slug) and OBJECT_ID.fullmatch(sha):
                (claims if kind == CLAIMS else settled)[slug] = sha
            elif odd < 5:
                odd += 1
                self._skip(f"remote {self.name}: ref {argv.shown(name, 80)} is not a task's ref; skipped")
        tombs = {slug: sha for slug, sha in claims.items() if settled.get(slug) == sha}
        for slug in tombs:
            del claims[slug]
        return Listing(claims, settled, tips, tombs)

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

    def lost(self, slug: str, action: str) -> Lost:
        """The Conflict for a refused update of `slug` (`objects.Objects.lost` names who holds it)."""
        return Lost(f"claim conflict: {slug} changed on remote {self.name} while {action}")

    # -- writing -------------------------------------------------------------------------------
    def push(self, updates: list[Update], slug: str, action: str) -> None:
        """One `git push --atomic` of `updates`, each with its lease. Raises Lost or RemoteError."""
        self._early = None  # a listing read before this push says nothing of what follows it
        args = ["--porcelain", "--atomic", "--no-verify", "--no-recurse-submodules"]
        args += [f"--force-with-lease={u.ref}:{u.expect}" for u in updates if u.expect is not None]
        args += [END_OF_OPTIONS, self.name]
        for u in updates:
            spec = f":{u.ref}" if u.new is None else f"{u.new}:{u.ref}"
            args.append(f"+{spec}" if u.expect is None else spec)
        code, out, err = gitwrite.push(self.cwd, args, self.timeout)
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

    # -- the intake branch (SPEC §8 *One queue across clones*) -----------------------------------
    def tracking(self, branch: str) -> str:
        """The remote-tracking ref of the remote's `branch`: the queue as last fetched."""
        return f"refs/remotes/{self.name}/{branch}"

    def tracked(self, branch: str) -> str | None:
        """The remote's `branch` as last fetched (its remote-tracking ref), None when never fetched."""
        out = git.run(self.cwd, "for-each-ref", "--format=%(objectname)", END_OF_OPTIONS, self.tracking(branch))
        return out.strip() or None

    def fetch_branch(self, branch: str, action: str = "fetching the intake branch") -> str | None:
        """Fetch the remote's `branch` into its remote-tracking ref (forced: the remote's word is
        the queue, even after a rewrite); returns its tip, None when the remote has no such branch."""
        spec = f"+refs/heads/{branch}:{self.tracking(branch)}"
        for attempt in range(3):
            code, out, err = git.call(self.cwd, *QUIET_FETCH, END_OF_OPTIONS, self.name, spec, timeout=self.timeout)
            if code == 0:
                break
            if b"couldn't find remote ref" in err:
                return None
            if b"cannot lock ref" not in err or attempt == 2:  # (locked: another verb of this clone fetches it too)
                raise self._unreachable(err or out, action)
            time.sleep(0.05)
        return self.tracked(branch)

    def push_branch(self, branch: str, new: str, expect: str, action: str) -> None:
        """Move the remote's `branch` from `expect` to `new` by compare-and-swap (one `git push
        --atomic` with an explicit lease); the remote-tracking ref follows. Raises Lost when the
        branch moved meanwhile (fetch, rebuild, again), RemoteError when the remote refuses the
        update itself (a protected branch, a hook, permissions), Unreachable without an answer."""
        self._early = None
        target = f"refs/heads/{branch}"
        for value in (new, expect):
            if not OBJECT_ID.fullmatch(value):
                raise GitError(f"not a commit id: {argv.shown(value, 80)}")
        args = ["--porcelain", "--atomic", "--no-verify", "--no-recurse-submodules"]
        args += [f"--force-with-lease={target}:{expect}", END_OF_OPTIONS, self.name, f"{new}:{target}"]
        code, out, err = gitwrite.push(self.cwd, args, self.timeout)
        if code == 0:
            gitwrite.update_ref(self.cwd, self.tracking(branch), new, reason=action)
            return
        refused = [line.split("\t") for line in lines_of(out) if line.startswith("!") and line.count("\t") >= 2]
        if not refused:
            raise self._unreachable(err or out, action)
        reason = refused[0][2]
        if any(word in reason for word in ("stale info", "non-fast-forward", "fetch first", "failed to lock")):
            raise Lost(f"the remote's {branch} moved while {action}")
        said = [line.removeprefix("remote: ").strip() for line in lines_of(err) if line.startswith("remote:")]
        why = f"{reason}{': ' + said[-1] if said and said[-1] else ''}"
        raise RemoteError(
            f"remote {self.name} refuses the push to {branch} ({why})", stderr=err.decode("utf-8", "replace")
        )
