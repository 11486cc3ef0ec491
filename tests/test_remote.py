"""Claims across clones (SPEC §8) against real git servers on loopback.

Every test here builds a *world*: a bare repository (the remote) seeded with a maildir-shared
backlog that declares `remote: origin`, and clones of it, each standing for one machine. The
servers are real: the bare repository over `file://` (git's own upload-pack/receive-pack),
`git daemon --enable=receive-pack` on a free loopback port (the outage test starts and stops
it), and smart HTTP (`git http-backend` behind a CGI handler on `http.server`, standard library
only). The commands are the real `backlog` run as subprocesses, several at once.

* the protocol itself: create-only, leased swap, atomic settle; how git says "must not exist";
  failures classified (a lost race → exit 3 naming the holder; refused → exit 1; unreachable → exit 4);
* three clones × two worktrees drain one backlog in parallel: each task completed exactly once,
  nothing left in flight, every conflict exit 3 and retried (`stress`: 200 tasks, see below);
* the daemon stopped: `take` exits 4 naming the remote and leaves no claim; restarted, the
  drain completes exactly once;
* two clones rescue one timed-out claim at once: exactly one `rescued`;
* another clone's janitor fails a claim past its budget; the owner's next verb follows;
* SIGKILL at every crash point between a remote update and its local move: `maintain` repairs
  from the remote's record: 0 lost, 0 double claims, and a second `maintain` finds nothing.

Claims are made "old" by writing a backdated claim line (never by sleeping past a deadline).
The 200-task drain runs with `pytest -m stress tests/test_remote.py` (or BACKLOG_STRESS=1).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import forkrun
import pytest
from conftest import ROOT, Repo, backlog, git, init_repo, ok
from freezegun import freeze_time

from maildir_backlog import change, gitwrite, storage
from maildir_backlog import git as bgit
from maildir_backlog.errors import Conflict
from maildir_backlog.remote import (
    CLAIMS,
    SETTLED,
    Lost,
    Remote,
    RemoteError,
    Unreachable,
    Update,
    blob_id,
    mine_ref,
    ref,
)

PIPELINE = "todo doing done"
STAMP = re.compile(r"^- (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) ", re.M)


# -- the world: one remote, several clones -----------------------------------------------------
def _env(claimer: str, extra: dict | None = None) -> dict:
    env = dict(os.environ, BACKLOG_CLAIMER=claimer)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


def run(cwd: Path, *args: str, claimer: str = "tester", env: dict | None = None, timeout: float = 120):
    """The real command in a process of its own, forked from a server that imported the package
    once (tests/forkrun.py): several at once race for real, a crash point kills a real process."""
    return forkrun.run(cwd, *args, env=_env(claimer, env), timeout=timeout)


def task_text(slug: str, extra: str = "") -> str:
    return f"---\npriority: 5\n{extra}---\n\n# {slug}\n\n---\n\n"


@dataclass
class World:
    root: Path
    url: str
    server: Path
    clones: dict[str, Repo] = field(default_factory=dict)

    def clone(self, name: str) -> Repo:
        path = self.root / name
        git(self.root, "clone", "-q", self.url, str(path))
        self.clones[name] = Repo(path)
        return self.clones[name]

    def refs(self) -> dict[str, str]:
        out = git(self.server, "for-each-ref", "--format=%(objectname) %(refname)", "refs/backlog/")
        return {name: sha for sha, name in (line.split(" ", 1) for line in out.splitlines())}

    def claims(self) -> dict[str, str]:
        """The live claims: a claim ref equal to the task's settled ref is its tombstone (SPEC §8)."""
        settled = self.settled()
        every = {k.removeprefix("refs/backlog/claims/"): v for k, v in self.refs().items() if "/claims/" in k}
        return {slug: sha for slug, sha in every.items() if settled.get(slug) != sha}

    def tombs(self) -> dict[str, str]:
        settled = self.settled()
        every = {k.removeprefix("refs/backlog/claims/"): v for k, v in self.refs().items() if "/claims/" in k}
        return {slug: sha for slug, sha in every.items() if settled.get(slug) == sha}

    def settled(self) -> dict[str, str]:
        return {k.removeprefix("refs/backlog/settled/"): v for k, v in self.refs().items() if "/settled/" in k}

    def file(self, sha: str, slug: str) -> bytes:
        return subprocess.run(
            ["git", "cat-file", "blob", f"{sha}:{slug}.md"], cwd=self.server, capture_output=True, check=True
        ).stdout


_SERVERS: dict[tuple, Path] = {}  # (slugs, pipeline) -> a bare repository built once per test process


def make_world(root: Path, slugs: list[str], url: str | None = None, pipeline: str = PIPELINE) -> World:
    """A bare repository holding a maildir-shared backlog with `remote: origin` and `slugs` in todo/:
    a copy of one built once per test process for these slugs and pipeline (`_seeded_server`)."""
    key = (tuple(slugs), pipeline)
    if key not in _SERVERS:
        base = Path(tempfile.mkdtemp(prefix="backlog-remote-template-"))
        atexit.register(shutil.rmtree, base, ignore_errors=True)
        _SERVERS[key] = _seeded_server(base, slugs, pipeline)
    server = root / "srv" / "backlog.git"
    shutil.copytree(_SERVERS[key], server, symlinks=True)
    return World(root, url or server.as_uri(), server)


def _seeded_server(root: Path, slugs: list[str], pipeline: str) -> Path:
    """`backlog setup` in a new repository, `remote: origin` declared, `slugs` in todo/, committed
    and pushed to a new bare repository (returned)."""
    seed = init_repo(root / "seed")
    ok(seed, "setup", "--backend=maildir-shared", "--pipeline", pipeline)
    agents = seed / "backlog" / "AGENTS.md"
    agents.write_text(agents.read_text().replace("\nmaildir-shared\n", "\nmaildir-shared\nremote: origin\n", 1))
    for slug in slugs:
        (seed / "backlog" / "todo" / f"{slug}.md").write_text(task_text(slug))
    git(seed, "add", "-A", "backlog")
    git(seed, "commit", "-q", "-m", "seed the backlog")
    server = root / "srv" / "backlog.git"
    server.parent.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "--bare", "-b", "main", str(server))
    git(seed, "push", "-q", str(server), "main")
    return server


@pytest.fixture
def world(tmp_path) -> World:
    return make_world(tmp_path / "w", ["alpha", "beta", "gamma"])


def in_flight(repo: Repo) -> list[str]:
    shared = Path(git(repo.path, "rev-parse", "--path-format=absolute", "--git-common-dir").strip()) / "backlog"
    return sorted(p.stem for pile in ("doing", "reviewing") for p in (shared / pile).glob("*.md"))


def mine(repo: Repo) -> dict[str, str]:
    out = git(repo.path, "for-each-ref", "--format=%(objectname) %(refname)", "refs/backlog-mine/")
    return {name.removeprefix("refs/backlog-mine/"): sha for sha, name in (ln.split(" ", 1) for ln in out.splitlines())}


def backdated(data: bytes, seconds: int) -> bytes:
    def earlier(m: re.Match) -> str:
        when = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        return "- " + (when - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ") + " "

    return STAMP.sub(earlier, data.decode()).encode()


def stamp(seconds_ago: int) -> str:
    return (datetime.now(timezone.utc) - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def ghost_claim(repo: Repo, slug: str, hours_ago: int = 2, budget: str = "1h") -> str:
    """Claim `slug` on the remote as a clone that vanished `hours_ago` (a backdated claim line,
    pushed create-only with the plumbing the tool uses): the claim is past its budget."""
    data = (
        task_text(slug).encode()
        + (f"- {stamp(hours_ago * 3600)} advanced to=doing claimer=ghost branch=gone budget={budget}\n").encode()
    )
    remote = Remote(bgit.discover(repo.path), "origin")
    with gitwrite.protocol():  # the remote's own plumbing, as the protocol's steps run it
        sha = remote.commit(slug, data, None)
        remote.push([Update(ref(CLAIMS, slug), sha, "")], slug, "planting a ghost claim")
    return sha


# -- the protocol against a real server --------------------------------------------------------
def test_create_only_lease_means_must_not_exist(world):
    """`--force-with-lease=<ref>:` (empty expected value) is git's "must not exist": the second
    create of one ref is refused, by the lease or by the server's ref lock, whatever came first."""
    with gitwrite.protocol():  # the remote's exchanges, called as the protocol's steps call them
        a = world.clone("a")
        remote = Remote(bgit.discover(a.path), "origin")
        first = remote.commit("alpha", task_text("alpha").encode(), None)
        second = remote.commit("alpha", task_text("alpha").encode() + b"- 2026-01-01T00:00:00Z progress | x\n", None)
        remote.push([Update(ref(CLAIMS, "alpha"), first, "")], "alpha", "claiming alpha")
        with pytest.raises(Lost):
            remote.push([Update(ref(CLAIMS, "alpha"), second, "")], "alpha", "claiming alpha")
        assert world.claims() == {"alpha": first}
        # a fast-forward is refused too: a lease, not the fast-forward rule, decides
        child = remote.commit("alpha", task_text("alpha").encode() + b"- 2026-01-01T00:00:00Z progress | y\n", first)
        with pytest.raises(Lost):
            remote.push([Update(ref(CLAIMS, "alpha"), child, "")], "alpha", "claiming alpha")
        # a leased swap from the right value succeeds, from a stale one is refused
        remote.push([Update(ref(CLAIMS, "alpha"), child, first)], "alpha", "updating alpha")
        with pytest.raises(Lost):
            remote.push([Update(ref(CLAIMS, "alpha"), second, first)], "alpha", "updating alpha")
        # the atomic settle: both or neither
        done = remote.commit("alpha", task_text("alpha").encode() + b"- 2026-01-01T00:00:00Z cancelled | z\n", child)
        with pytest.raises(Lost):
            remote.push(
                [Update(ref(SETTLED, "alpha"), done, None), Update(ref(CLAIMS, "alpha"), None, first)], "alpha", "x"
            )
        assert world.claims() == {"alpha": child} and world.settled() == {}
        remote.push(
            [Update(ref(SETTLED, "alpha"), done, None), Update(ref(CLAIMS, "alpha"), None, child)], "alpha", "x"
        )
        assert world.claims() == {} and world.settled() == {"alpha": done}
        # the record: the message is the log line, the tree the task file, the parent the value replaced
        log = git(world.server, "log", "--format=%s", ref(SETTLED, "alpha")).splitlines()
        assert log == ["- 2026-01-01T00:00:00Z cancelled | z", "- 2026-01-01T00:00:00Z progress | y", "backlog alpha"]
        assert git(world.server, "ls-tree", "--name-only", done).split() == ["alpha.md"]


def test_server_side_race_is_a_lost_race(world):
    """Two creates racing past the advertisement: the server's ref lock refuses one ("failed to
    update ref" / "reference already exists"); that is a lost race too, exit 3."""
    hook = world.server / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\nsleep 1\n")
    hook.chmod(0o755)
    a, b = world.clone("a"), world.clone("b")
    results: dict[str, object] = {}

    def claim(repo: Repo, name: str) -> None:
        with gitwrite.protocol():  # (a thread starts outside the protocol: its own span)
            claim_in(repo, name)

    def claim_in(repo: Repo, name: str) -> None:
        remote = Remote(bgit.discover(repo.path), "origin")
        sha = remote.commit("beta", task_text("beta").encode() + f"- {stamp(0)} progress | {name}\n".encode(), None)
        try:
            remote.push([Update(ref(CLAIMS, "beta"), sha, "")], "beta", "claiming beta")
            results[name] = "won"
        except Conflict as exc:
            results[name] = exc

    threads = [threading.Thread(target=claim, args=(r, n)) for r, n in ((a, "a"), (b, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(str(type(v).__name__) if v != "won" else "won" for v in results.values()) == ["Lost", "won"]
    assert len(world.claims()) == 1


def test_refused_namespace_is_exit_1_and_unreachable_exit_4(world):
    a = world.clone("a")
    hook = world.server / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'refs/backlog is not allowed here' >&2\nexit 1\n")
    hook.chmod(0o755)
    proc = run(a.path, "take", "alpha")
    assert proc.returncode == 1, proc.stderr
    assert "remote origin refuses refs/backlog/claims/alpha" in proc.stderr
    assert "not allowed here" in proc.stderr and "Traceback" not in proc.stderr
    assert in_flight(a) == [] and (a.path / "backlog/todo/alpha.md").exists() and mine(a) == {}
    assert git(a.path, "status", "--porcelain") == ""
    hook.unlink()
    git(a.path, "remote", "set-url", "origin", str(world.root / "nowhere.git"))
    proc = run(a.path, "take")
    assert proc.returncode == 4 and "remote origin unreachable" in proc.stderr, proc.stderr
    assert "git remote get-url origin" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert in_flight(a) == [] and mine(a) == {}


# -- the verbs across clones -------------------------------------------------------------------
def test_lifecycle_across_two_clones(world):
    a, b = world.clone("a"), world.clone("b")
    assert run(a.path, "take", "alpha", claimer="alice").returncode == 0
    assert set(world.claims()) == {"alpha"}
    # another clone: a named take is refused naming the holder (exit 1), auto-pick skips it
    proc = run(b.path, "take", "alpha", claimer="bob")
    assert proc.returncode == 1 and "alice @ main" in proc.stderr and "another clone" in proc.stderr
    proc = run(b.path, "--json", "take", claimer="bob")
    assert proc.returncode == 0 and json.loads(proc.stdout)["slug"] in ("beta", "gamma")
    taken_by_b = json.loads(proc.stdout)["slug"]
    # progress fast-forwards the claim; every machine sees it
    before = world.claims()["alpha"]
    assert run(a.path, "progress", "half way", claimer="alice").returncode == 0
    after = world.claims()["alpha"]
    assert git(world.server, "rev-parse", f"{after}^").strip() == before
    assert world.file(after, "alpha").endswith(b"progress | half way\n")
    status = run(b.path, "--json", "status", "--remote", claimer="bob")
    assert status.returncode == 0, status.stderr
    seen = {c["slug"]: c for c in json.loads(status.stdout)["claims"]}
    assert seen["alpha"]["claimer"] == "alice" and seen["alpha"]["this_clone"] is False
    assert seen[taken_by_b]["this_clone"] is True and seen["alpha"]["budget_seconds"] == 7 * 86400
    text = run(b.path, "status", "--remote").stdout
    assert "doing/alpha  alice @ main  age" in text and "(this clone)" in text
    # leaving flight: one atomic push, then the local move
    assert run(a.path, "advance", "alpha", "--pr", "https://example.invalid/1", claimer="alice").returncode == 0
    assert "alpha" not in world.claims() and world.file(world.settled()["alpha"], "alpha").endswith(
        b"advanced to=done | PR=https://example.invalid/1\n"
    )
    assert run(b.path, "cancel", taken_by_b, "not needed", claimer="bob").returncode == 0
    assert set(world.settled()) == {"alpha", taken_by_b} and world.claims() == {}
    # a stale todo copy of a settled task is never claimed again, on any clone
    proc = run(b.path, "take", "alpha", claimer="bob")
    assert proc.returncode == 1 and "already settled on remote origin (done by alice @ main)" in proc.stderr
    left = {"beta", "gamma"} - {taken_by_b}
    proc = run(b.path, "--json", "take", claimer="bob")
    assert json.loads(proc.stdout)["slug"] in left
    assert mine(a) == {"settled/alpha": world.settled()["alpha"]}


def test_fail_retry_and_a_stale_copy_elsewhere(world):
    a, b = world.clone("a"), world.clone("b")
    assert run(a.path, "take", "beta").returncode == 0
    assert run(a.path, "fail", "beta", "blocked upstream").returncode == 0
    git(a.path, "push", "-q", "origin", "main")  # the default branch holds beta in failed/ (generation 0)
    failed = world.settled()["beta"]
    assert world.file(failed, "beta").endswith(b"failed | blocked upstream\n")
    assert run(a.path, "retry", "beta", "unblocked").returncode == 0
    retried = world.settled()["beta"]
    assert git(world.server, "rev-parse", f"{retried}^").strip() == failed
    assert git(world.server, "log", "-1", "--format=%s", retried).strip().endswith("retried | unblocked")
    # the retry reopened it for every clone (SPEC §8): clone b's copy is of generation 0, older than
    # the retried record, so b's claim takes the record's copy (generation 1, not stale on the tip)
    proc = run(b.path, "take", "beta")
    assert proc.returncode == 0, proc.stderr
    assert world.file(world.claims()["beta"], "beta").decode().count("retried | unblocked") == 1
    proc = run(a.path, "--json", "take", "beta")  # now another clone's claim: refused naming it (exit 1)
    assert proc.returncode == 1 and json.loads(proc.stdout)["kind"] == "held", proc.stdout


def test_no_claim_without_the_remote_and_rollback_of_a_failed_commit(world):
    """A local step failing after the push (a refusing pre-commit hook) takes the remote claim back."""
    a = world.clone("a")
    hooks = a.path / ".git" / "hooks"
    (hooks / "pre-commit").write_text("#!/bin/sh\nexit 1\n")
    (hooks / "pre-commit").chmod(0o755)
    proc = run(a.path, "take", "alpha")
    assert proc.returncode == 1, proc.stderr
    assert world.claims() == {} and in_flight(a) == [] and mine(a) == {}
    (hooks / "pre-commit").unlink()
    assert run(a.path, "take", "alpha").returncode == 0 and set(world.claims()) == {"alpha"}


def test_same_claimer_on_four_clones_claims_once(world):
    """One identity on several machines (the same BACKLOG_CLAIMER, branch and second): their claim
    commits must still differ, or a second push of the very same commit would "succeed"."""
    clones = [world.clone(f"c{k}") for k in range(4)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "maildir_backlog", "take", "alpha"],
            cwd=c.path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env("same-agent"),
        )
        for c in clones
    ]
    codes = sorted(p.wait(60) for p in procs)
    assert codes[0] == 0 and all(code in (1, 3) for code in codes[1:]), codes
    assert sum(in_flight(c) == ["alpha"] for c in clones) == 1 and set(world.claims()) == {"alpha"}


def test_prune_settled_refs_merged_on_the_default_branch(world):
    a, b = world.clone("a"), world.clone("b")
    for step in (("take", "alpha"), ("advance", "alpha"), ("take", "beta"), ("fail", "beta", "no")):
        ok(a.path, *step)
    proc = run(a.path, "maintain")
    assert proc.returncode == 0 and "prune" not in proc.stdout  # not on the remote's default branch yet
    git(a.path, "push", "-q", "origin", "main")  # the done/ copy reaches the default branch
    tip = git(world.server, "rev-parse", "main").strip()[:12]
    where = f"done on the default branch of remote origin ({tip})"
    proc = run(a.path, "maintain", "--dry-run")
    assert f"REMOTE: refs/backlog/settled/alpha (would mark ripe: {where}; the next run prunes it)" in proc.stdout
    proc = run(a.path, "maintain")  # a ref is pruned by the run after the one that found it ripe
    assert f"REMOTE: refs/backlog/settled/alpha (marked ripe: {where}; the next run prunes it)" in proc.stdout
    assert "stray" not in proc.stdout  # what the janitor keeps for its next run is its own bookkeeping
    proc = run(a.path, "maintain", "--dry-run")
    assert f"REMOTE: refs/backlog/settled/alpha (would prune: {where})" in proc.stdout
    assert "stray" not in proc.stdout
    assert set(world.settled()) == {"alpha", "beta"} and world.tombs()["alpha"] == world.settled()["alpha"]
    proc = run(a.path, "maintain")
    assert f"REMOTE: refs/backlog/settled/alpha (pruned: done on the default branch of remote origin ({tip}))" in (
        proc.stdout
    )
    assert set(world.settled()) == {"beta"} and "settled/alpha" not in mine(a)  # failed tasks keep theirs
    assert "alpha" not in world.tombs() and "alpha" not in world.claims()  # its tombstone pruned with it
    # a clone that fetched the default branch still never claims its stale copy of alpha
    git(b.path, "fetch", "-q", "origin")
    proc = run(b.path, "take", "alpha")
    assert proc.returncode == 1 and "done on the remote's default branch" in proc.stderr
    assert json.loads(run(b.path, "--json", "take").stdout)["slug"] == "gamma"


def test_a_prune_on_a_clock_days_ahead_never_reopens_a_task_for_a_clone_that_has_not_fetched(world):
    """SPEC §8: a settled ref is pruned only when no clone can claim the task again from a stale
    copy, judged by no clock but the pruner's own. The pruner here runs three days ahead (frozen
    in-process; git and the settling clone keep the real clock), so the settlement looks old to
    it; clone b cloned before the task was done and never fetched since: its todo copy is stale,
    and neither a named take nor auto-pick may claim it (the remote's default branch, at its
    current tip, holds the task in done/)."""
    a, b = world.clone("a"), world.clone("b")
    ok(a.path, "take", "alpha")
    ok(a.path, "advance", "alpha")
    git(a.path, "push", "-q", "origin", "main")  # the done/ copy reaches the default branch
    with freeze_time(datetime.now(timezone.utc) + timedelta(days=3)):
        for _run in range(2):  # the second run prunes what the first found ripe
            proc = backlog(a.path, "maintain")
            assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "alpha" not in world.settled() and "alpha" not in world.tombs()
    proc = run(b.path, "take", "alpha", claimer="bob")
    assert proc.returncode == 1 and "alpha is done on the remote's default branch" in proc.stderr, proc.stderr
    assert world.claims() == {} and in_flight(b) == [] and mine(b) == {}
    proc = run(b.path, "--json", "take", claimer="bob")
    assert proc.returncode == 0 and json.loads(proc.stdout)["slug"] in ("beta", "gamma"), proc.stdout + proc.stderr
    assert "alpha" not in world.claims() and "alpha" not in in_flight(b)


def test_prune_judges_the_default_branch_as_fetched_in_the_same_run(world):
    """The pruner's remote-tracking branch says alpha is done, but the remote's default branch was
    moved back since (a force-push): its tip holds alpha in todo/ again. Pruning on the stale view
    would let a clone that never fetched claim alpha a second time; the settled ref must stay."""
    a, b = world.clone("a"), world.clone("b")
    seed = git(a.path, "rev-parse", "HEAD").strip()
    ok(a.path, "take", "alpha")
    ok(a.path, "advance", "alpha")
    git(a.path, "push", "-q", "origin", "main")
    git(a.path, "fetch", "-q", "origin")  # a's view: alpha done on origin/main
    git(world.root, "--git-dir", str(world.server), "update-ref", "refs/heads/main", seed)  # moved back
    proc = run(a.path, "maintain")
    assert proc.returncode == 0 and "pruned" not in proc.stdout, proc.stdout + proc.stderr
    assert set(world.settled()) == {"alpha"}
    proc = run(b.path, "take", "alpha", claimer="bob")
    assert proc.returncode == 1 and "already settled on remote origin" in proc.stderr, proc.stderr
    assert world.claims() == {} and in_flight(b) == []


def test_connection_lost_after_the_push_landed(world):
    """The server updates the ref, then the connection drops before it reports: one listing tells
    the push landed, and the verb goes on as if the report had arrived."""
    a = world.clone("a")
    hook = world.server / "hooks" / "post-receive"
    hook.write_text("#!/bin/sh\nkill -9 $PPID\n")  # receive-pack dies after the update, before its report
    hook.chmod(0o755)
    proc = run(a.path, "take", "alpha")
    assert proc.returncode == 0, proc.stderr
    assert set(world.claims()) == {"alpha"} and in_flight(a) == ["alpha"]
    assert mine(a) == {"claims/alpha": world.claims()["alpha"]}
    proc = run(a.path, "advance", "alpha")
    assert proc.returncode == 0, proc.stderr
    assert (
        world.claims() == {}
        and set(world.settled()) == {"alpha"}
        and mine(a) == {"settled/alpha": world.settled()["alpha"]}
    )


# -- rescue: two machines, one timed-out claim ---------------------------------------------------
# A hook on the server that, the first time it sees a claim pushed, has another clone (CLONE, as
# "alice") take and complete that slug before letting the push through: the interleaving "listed
# free → another clone claims *and settles* → this push creates the claim" made exact.
SETTLE_FIRST_HOOK = """#!{python}
import os, subprocess, sys
refs = sys.stdin.read().split()[2::3]
marker = os.path.join(os.getcwd(), "settled-first")
claims = [r.rpartition("/")[2] for r in refs if r.startswith("refs/backlog/claims/")]
if claims and not os.path.exists(marker):
    with open(marker, "w") as out:
        out.write(claims[0])
    keep = ("GIT_AUTHOR_", "GIT_COMMITTER_")  # the receive-pack's GIT_DIR, quarantine etc. must go
    env = {{k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k.startswith(keep)}}
    env["BACKLOG_CLAIMER"] = "alice"
    for verb in (["take", claims[0]], ["advance", claims[0]]):
        done = subprocess.run(
            [sys.executable, "-m", "maildir_backlog", *verb], cwd="{clone}", env=env, capture_output=True
        )
        if done.returncode:
            sys.exit(f"hook: {{verb}} exited {{done.returncode}}: " + done.stderr.decode().replace(chr(10), " "))
"""


def settle_first(w: World, clone: Repo) -> None:
    hook = w.server / "hooks" / "pre-receive"
    hook.write_text(SETTLE_FIRST_HOOK.format(python=sys.executable, clone=clone.path))
    hook.chmod(0o755)


@pytest.mark.parametrize("named", [True, False], ids=["take-slug", "auto-pick"])
def test_claimed_and_settled_between_listing_and_push(world, named):
    """The hole behind the drain's one double completion: a create-only claim would succeed because
    the other clone's settle deleted `claims/<slug>`. The settle leaves a tombstone there instead,
    so the claim's push, leased on the listing, is refused (exit 3, naming the settlement;
    auto-pick moves on): never a task handed out that was completed elsewhere."""
    a, b = world.clone("a"), world.clone("b")
    settle_first(world, a)
    proc = run(b.path, *(("take", "alpha") if named else ("--json", "take")), claimer="bob")
    first = (world.server / "settled-first").read_text()  # the slug alice completed meanwhile
    assert first in world.settled(), proc.stderr
    record = world.file(world.settled()[first], first).decode()
    assert record.splitlines()[-1].split()[2:] == ["advanced", "to=done"] and "claimer=alice" in record, record
    if named:
        assert proc.returncode == 3, proc.stdout + proc.stderr
        assert f"{first} was already settled (done) on remote origin by alice" in proc.stderr, proc.stderr
        assert world.tombs() == {first: world.settled()[first]}
        assert world.claims() == {} and in_flight(b) == [] and mine(b) == {}
    else:
        assert proc.returncode == 0, proc.stderr
        taken = json.loads(proc.stdout)["slug"]
        assert taken != first  # the settled one given up, the next one taken
        assert set(world.claims()) == {taken} and in_flight(b) == [taken]
        assert mine(b) == {f"claims/{taken}": world.claims()[taken]}
    assert (b.path / "backlog" / "todo" / f"{first}.md").exists()  # the stale copy, back where it was
    assert git(b.path, "status", "--porcelain") == ""


def test_two_clones_rescue_one_timed_out_claim(world):
    ghost, a, b = world.clone("ghost"), world.clone("a"), world.clone("b")
    old = ghost_claim(ghost, "gamma")
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "maildir_backlog", "--json", "rescue", "gamma"],
            cwd=repo.path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(name),
        )
        for name, repo in (("a", a), ("b", b))
    }
    done = {name: (p.wait(60), p.stdout.read(), p.stderr.read()) for name, p in procs.items()}
    winners = [name for name, (code, _out, _err) in done.items() if code == 0]
    assert len(winners) == 1, done
    loser = "b" if winners == ["a"] else "a"
    assert done[loser][0] in (1, 3), done[loser]
    won = json.loads(done[winners[0]][1])
    assert won["rescued"] is True and "rescued gamma from ghost @ gone (another clone" in done[winners[0]][2]
    claim = world.claims()["gamma"]
    assert git(world.server, "rev-parse", f"{claim}^").strip() == old
    assert world.file(claim, "gamma").decode().splitlines()[-1].split()[2:4] == ["rescued", f"claimer={winners[0]}"]
    winner, other = world.clones[winners[0]], world.clones[loser]
    assert in_flight(winner) == ["gamma"] and in_flight(other) == []
    # the winner carries on as the holder; the ghost's clone follows the remote's record
    assert run(winner.path, "advance", "gamma", claimer=winners[0]).returncode == 0
    proc = run(ghost.path, "maintain")
    assert proc.returncode == 0, proc.stderr


def test_janitor_fails_a_claim_past_budget_and_the_owner_follows(world):
    a, b = aged_claim(world)  # alice's claim, eight days old (its budget is 7d), published
    proc = run(b.path, "maintain", "--dry-run", claimer="bob")
    assert "REMOTE: refs/backlog/claims/alpha (would fail on the remote: timeout" in proc.stdout, proc.stdout
    assert "alpha" in world.claims()
    proc = run(b.path, "maintain", claimer="bob")
    assert proc.returncode == 0 and "failed on remote origin: timeout" in proc.stdout, proc.stdout + proc.stderr
    assert world.claims() == {} and world.file(world.settled()["alpha"], "alpha").decode().splitlines()[-1].split()[
        2:4
    ] == ["failed", "by=bob"]
    # alice's next verb moves her copy to failed/ with the remote's line, and says what became of
    # it, as the record's log tells (SPEC §5: exit 1, kind settled; no race was lost in the act)
    proc = run(a.path, "--json", "progress", "still here", claimer="alice")
    error = json.loads(proc.stdout)
    assert proc.returncode == 1 and error["kind"] == "settled" and "moved to failed/" in error["error"], proc.stdout
    assert "failed by timeout (budget=7d" in error["error"] and error["settled"]["state"] == "failed"
    assert in_flight(a) == [] and (a.path / "backlog/failed/alpha.md").read_bytes() == world.file(
        world.settled()["alpha"], "alpha"
    )
    assert git(a.path, "status", "--porcelain") == ""
    second = run(a.path, "maintain", claimer="alice")
    assert second.returncode == 0 and "REMOTE" not in second.stdout, second.stdout


def aged_claim(world):
    """Clones a and b; alice's claim of alpha, made in a, eight days old (budget 7d), here and on the remote."""
    a, b = world.clone("a"), world.clone("b")
    assert run(a.path, "take", "alpha", claimer="alice").returncode == 0
    ra = Remote(bgit.discover(a.path), "origin")
    shared = Path(git(a.path, "rev-parse", "--path-format=absolute", "--git-common-dir").strip()) / "backlog/doing"
    old = backdated((shared / "alpha.md").read_bytes(), 8 * 86400)
    (shared / "alpha.md").write_bytes(old)
    change.run(change.Change((change.Publish(lambda tx: ra.update("alpha", old, tx)),)), ra.repo)
    return a, b


def test_a_claimer_displaced_by_a_rescue_on_another_clone_is_refused_naming_the_new_holder(world):
    """SPEC §5 *Ownership*: after a rescue the displaced claimer is refused like anyone else, on
    every clone: exit 1 naming the claimer and branch of record (no race is lost in the act: the
    rescue happened before the verb looked), and nothing changes on the remote."""
    a, b = aged_claim(world)
    git(b.path, "checkout", "-q", "-b", "rescuer")
    proc = run(b.path, "rescue", "alpha", claimer="bob")
    assert proc.returncode == 0 and "rescued alpha from alice @ main" in proc.stderr, proc.stderr
    held = world.claims()["alpha"]
    for verb in (("progress", "still here"), ("advance", "alpha"), ("cancel", "alpha", "no"), ("fail", "alpha", "x")):
        proc = run(a.path, *verb, claimer="alice")
        assert proc.returncode == 1, (verb, proc.returncode, proc.stderr)
        assert "bob @ rescuer" in proc.stderr and "Traceback" not in proc.stderr, (verb, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, (verb, proc.stderr)
        assert world.claims() == {"alpha": held} and world.settled() == {}, verb


# -- the drain: N clones × M worktrees as parallel processes -----------------------------------
@dataclass
class Tally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: Counter = field(default_factory=Counter)
    conflicts: int = 0
    retried_after_conflict: int = 0
    other: list = field(default_factory=list)
    seconds: list = field(default_factory=list)


def worker(path: Path, name: str, tally: Tally, env: dict | None = None, deadline: float = 300) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        t0 = time.monotonic()
        proc = run(path, "--json", "take", claimer=name, env=env)
        if proc.returncode == 3:
            with tally.lock:
                tally.conflicts += 1
            continue
        if proc.returncode != 0:
            with tally.lock:
                tally.other.append(("take", name, proc.returncode, proc.stderr))
            return
        slug = json.loads(proc.stdout)["slug"]
        if slug is None:
            return
        while True:
            done = run(path, "advance", slug, claimer=name, env=env)
            if done.returncode != 3:
                break
            with tally.lock:
                tally.conflicts += 1
                tally.retried_after_conflict += 1
        with tally.lock:
            if done.returncode == 0:
                tally.done[slug] += 1
                tally.seconds.append(time.monotonic() - t0)
            else:
                tally.other.append(("advance", name, slug, done.returncode, done.stderr))


def drain(w: World, clones: int, worktrees: int, env: dict | None = None) -> Tally:
    paths: list[tuple[Path, str]] = []
    for c in range(clones):
        repo = w.clones.get(f"c{c}") or w.clone(f"c{c}")
        paths.append((repo.path, f"c{c}-main"))
        for k in range(1, worktrees):
            wt = repo.path.parent / f"c{c}-wt{k}"
            if not wt.exists():
                git(repo.path, "worktree", "add", "-q", "-b", f"c{c}-wt{k}", str(wt))
            paths.append((wt, f"c{c}-wt{k}"))
    tally = Tally()
    threads = [threading.Thread(target=worker, args=(p, n, tally, env)) for p, n in paths]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return tally


def check_drained(w: World, slugs: list[str], tally: Tally) -> None:
    assert not tally.other, tally.other[:3]
    assert sorted(tally.done) == sorted(slugs) and set(tally.done.values()) == {1}, tally.done
    assert w.claims() == {} and sorted(w.settled()) == sorted(slugs)
    completions: Counter = Counter()  # `advance(<slug>) → done` commits on every branch of every clone
    for repo in w.clones.values():
        for wt, _branch in bgit.worktrees(bgit.discover(repo.path)):
            assert git(wt, "status", "--porcelain", "--", "backlog") == ""
        assert in_flight(repo) == []
        for line in set(git(repo.path, "log", "--all", "--format=%H %s").splitlines()):
            m = re.fullmatch(r"\S+ advance\((\S+)\) → done.*", line)
            if m:
                completions[m.group(1)] += 1
    assert sorted(completions) == sorted(slugs) and set(completions.values()) == {1}, completions


def test_three_clones_two_worktrees_drain_exactly_once(tmp_path):
    slugs = [f"t{i:03d}" for i in range(30)]
    w = make_world(tmp_path / "w", slugs)
    tally = drain(w, clones=3, worktrees=2)
    check_drained(w, slugs, tally)


# -- the outage: git daemon stopped and restarted ----------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Daemon:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [
                "git",
                "daemon",
                "--enable=receive-pack",
                "--export-all",
                "--reuseaddr",
                f"--base-path={self.base}",
                f"--port={self.port}",
                "--listen=127.0.0.1",
                str(self.base),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        end = time.monotonic() + 10
        while time.monotonic() < end:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise AssertionError("git daemon did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(10)
        self.proc = None


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path / "w" / "srv")
    yield d
    d.stop()


def stress_enabled(config) -> bool:
    return "stress" in (config.getoption("-m") or "") or os.environ.get("BACKLOG_STRESS") == "1"


def test_stress_200_tasks(tmp_path, request, daemon):
    """The 200-task drain against `git daemon`: `pytest -m stress tests/test_remote.py` (minutes on two cores)."""
    if not stress_enabled(request.config):
        pytest.skip("the 200-task drain runs with -m stress (or BACKLOG_STRESS=1)")
    slugs = [f"s{i:03d}" for i in range(200)]
    daemon.start()
    w = make_world(tmp_path / "w", slugs, url=f"git://127.0.0.1:{daemon.port}/backlog.git")
    tally = drain(w, clones=3, worktrees=2)
    check_drained(w, slugs, tally)
    print(
        f"\n200 tasks: {tally.conflicts} conflicts (exit 3, retried), median take+advance "
        f"{sorted(tally.seconds)[len(tally.seconds) // 2]:.2f} s"
    )


test_stress_200_tasks = pytest.mark.stress(test_stress_200_tasks)


def test_daemon_down_take_exits_4_then_the_drain_completes(tmp_path, daemon):
    slugs = [f"d{i:02d}" for i in range(8)]
    daemon.start()
    w = make_world(tmp_path / "w", slugs, url=f"git://127.0.0.1:{daemon.port}/backlog.git")
    a = w.clone("c0")
    assert run(a.path, "take", "d00").returncode == 0 and set(w.claims()) == {"d00"}
    daemon.stop()
    for args in (("take",), ("take", "d01")):
        proc = run(a.path, *args)
        assert proc.returncode == 4, proc.stderr
        assert "remote origin unreachable" in proc.stderr and "Traceback" not in proc.stderr
        assert in_flight(a) == ["d00"] and list(mine(a)) == ["claims/d00"]
    proc = run(a.path, "advance", "d00")
    assert proc.returncode == 4 and "remote origin unreachable" in proc.stderr
    assert in_flight(a) == ["d00"] and git(a.path, "status", "--porcelain") == ""
    daemon.start()
    assert run(a.path, "advance", "d00").returncode == 0
    tally = drain(w, clones=2, worktrees=2)
    tally.done["d00"] += 1
    check_drained(w, slugs, tally)


# -- smart HTTP: `git http-backend` behind a tiny CGI server (standard library only) ----------
class HttpBackend(BaseHTTPRequestHandler):
    """Runs `git http-backend` as a CGI script for every request (receive-pack enabled by a
    REMOTE_USER, as a web server's authentication would set it)."""

    root: Path

    def do_GET(self) -> None:
        self._cgi()

    def do_POST(self) -> None:
        self._cgi()

    def log_message(self, *args) -> None:
        pass

    def _cgi(self) -> None:
        path, _, query = self.path.partition("?")
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        env = {
            "PATH": os.environ["PATH"],
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            "REMOTE_USER": "tester",
            "REMOTE_ADDR": "127.0.0.1",
        }
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
        sep = b"\r\n\r\n" if b"\r\n\r\n" in out else b"\n\n"
        head, _, payload = out.partition(sep)
        status, headers = 200, []
        for line in head.decode().splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class Silent:
    """A server that accepts every connection and never answers (a hung remote)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.05)
        self.port = int(self.sock.getsockname()[1])
        self.held: list[socket.socket] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(TimeoutError):
                self.held.append(self.sock.accept()[0])

    def close(self) -> None:
        # the accepting thread stops before the socket closes: a thread still blocked in accept()
        # on a closed descriptor would take the connections of the next socket given that number
        self.stop.set()
        self.thread.join()
        self.sock.close()
        for conn in self.held:
            conn.close()


def test_a_hung_remote_is_unreachable_after_the_timeout(world):
    """A server that takes the connection and never answers: the verb gives up after
    BACKLOG_REMOTE_TIMEOUT (exit 4, one line, no local claim) instead of waiting for ever."""
    a = world.clone("a")
    silent = Silent()
    try:
        git(a.path, "remote", "set-url", "origin", f"git://127.0.0.1:{silent.port}/backlog.git")
        start = time.monotonic()
        proc = run(a.path, "take", "alpha", env={"BACKLOG_REMOTE_TIMEOUT": "1"}, timeout=60)
        assert time.monotonic() - start < 30
        assert proc.returncode == 4, proc.stderr
        assert "remote origin unreachable" in proc.stderr and "no answer within 1 s" in proc.stderr, proc.stderr
        assert proc.stderr.strip().splitlines()[-1].startswith("backlog: remote origin unreachable"), proc.stderr
        assert "Traceback" not in proc.stderr  # (the lines before it: the first verb's layout heal)
        assert in_flight(a) == [] and (a.path / "backlog/todo/alpha.md").exists() and mine(a) == {}
        proc = run(a.path, "take", "alpha", env={"BACKLOG_REMOTE_TIMEOUT": "soon"})
        assert proc.returncode == 2 and "invalid BACKLOG_REMOTE_TIMEOUT='soon'" in proc.stderr, proc.stderr
    finally:
        silent.close()
    git(a.path, "remote", "set-url", "origin", world.url)
    assert run(a.path, "take", "alpha", env={"BACKLOG_REMOTE_TIMEOUT": "30"}).returncode == 0
    assert set(world.claims()) == {"alpha"}


def test_smart_http_race_and_lifecycle(tmp_path):
    root = tmp_path / "w" / "srv"
    root.mkdir(parents=True)
    handler = type("Handler", (HttpBackend,), {"root": root})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        w = make_world(
            tmp_path / "w", ["alpha", "beta"], url=f"http://127.0.0.1:{server.server_address[1]}/backlog.git"
        )
        a, b = w.clone("a"), w.clone("b")
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "maildir_backlog", "take", "alpha"],
                cwd=c.path,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=_env(name),
            )
            for name, c in (("a", a), ("b", b))
        ]
        codes = [p.wait(60) for p in procs]
        assert sorted(codes)[0] == 0 and sorted(codes)[1] in (1, 3), [p.stderr.read() for p in procs]
        winner, name = (a, "a") if codes[0] == 0 else (b, "b")
        assert set(w.claims()) == {"alpha"} and in_flight(winner) == ["alpha"]
        assert run(winner.path, "progress", "over http", claimer=name).returncode == 0  # only the holder acts
        assert run(winner.path, "advance", "alpha", claimer=name).returncode == 0
        assert w.claims() == {} and set(w.settled()) == {"alpha"}
        other = b if winner is a else a
        assert json.loads(run(other.path, "--json", "take").stdout)["slug"] == "beta"
        assert "doing/beta" in run(winner.path, "status", "--remote").stdout
    finally:
        server.shutdown()
        server.server_close()


# -- fault injection: SIGKILL between the remote update and the local move ---------------------
FAULT_PIPELINE = "todo doing reviewing done"


def kill_at(repo: Repo, point: str, *args: str, claimer: str = "tester") -> None:
    proc = run(repo.path, *args, claimer=claimer, env={"BACKLOG_CRASH_AT": point})
    assert proc.returncode == -signal.SIGKILL, f"{args} did not die at {point}: {proc.returncode} {proc.stderr}"


def where(repo: Repo, slug: str) -> list[str]:
    found = [p for p in ("todo", "done", "failed") if (repo.path / "backlog" / p / f"{slug}.md").exists()]
    shared = Path(git(repo.path, "rev-parse", "--path-format=absolute", "--git-common-dir").strip()) / "backlog"
    return found + [p for p in ("doing", "reviewing") if (shared / p / f"{slug}.md").exists()]


def agree(w: World, repo: Repo, slug: str, pile: str) -> None:
    """After `maintain`: the task is in `pile` only, committed, and the remote's record agrees."""
    assert where(repo, slug) == [pile], (slug, where(repo, slug))
    assert git(repo.path, "status", "--porcelain", "--", "backlog") == ""
    memory = mine(repo)
    if pile in ("doing", "reviewing"):
        shared = Path(git(repo.path, "rev-parse", "--path-format=absolute", "--git-common-dir").strip()) / "backlog"
        data = (shared / pile / f"{slug}.md").read_bytes()
        assert w.claims().get(slug) == memory.get(f"claims/{slug}"), (slug, w.claims(), memory)
        assert w.file(w.claims()[slug], slug) == data
        assert slug not in w.settled() or pile == "doing"
    else:
        assert slug not in w.claims() and f"claims/{slug}" not in memory
        data = (repo.path / "backlog" / pile / f"{slug}.md").read_bytes()
        if pile != "todo" or slug in w.settled():
            assert w.file(w.settled()[slug], slug) == data
    for line in data.decode().split("\n---\n", 2)[-1].splitlines():
        assert not line or line.startswith("- "), (slug, line)


CASES = [  # (verb and its arguments, crash point, the pile maintain leaves the task in)
    (("take", "{s}"), "remote:pending", "todo"),
    (("take", "{s}"), "remote:claimed", "todo"),  # nobody holds a claim no verb finished: released
    (("take", "{s}"), "apply:source-removed", "doing"),
    (("progress", "note", "--slug", "{s}"), "remote:pending", "doing"),
    (("progress", "note", "--slug", "{s}"), "remote:updated", "doing"),
    (("advance", "{s}"), "remote:updated", "reviewing"),
    (("advance", "{s}"), "remote:settled", "done"),
    (("advance", "{s}"), "apply:terminal-line", "done"),
    (("advance", "{s}"), "remote:pending", "doing"),
    (("fail", "{s}", "broken"), "remote:settled", "failed"),
    (("fail", "{s}", "broken"), "apply:written", "failed"),
    (("retry", "{s}", "again"), "remote:pending", "failed"),
    (("retry", "{s}", "again"), "remote:retried", "todo"),
]
PREPARE = {  # what each case needs done first, with the real verbs
    "take": [],
    "progress": [("take", "{s}")],
    "fail": [("take", "{s}")],
    "retry": [("take", "{s}"), ("fail", "{s}", "broken")],
}


def test_crash_points_between_remote_and_local(tmp_path):
    slugs = [f"f{i:02d}" for i in range(len(CASES))]
    w = make_world(tmp_path / "w", slugs, pipeline=FAULT_PIPELINE)
    a = w.clone("a")
    for i, (verb, point, pile) in enumerate(CASES):
        s = slugs[i]
        steps = list(PREPARE.get(verb[0], []))
        if verb[0] == "advance":
            steps = [("take", s)] + ([("advance", s)] if point in ("remote:settled", "apply:terminal-line") else [])
        for step in steps:
            ok(a.path, *(x.format(s=s) for x in step))
        kill_at(a, point, *(x.format(s=s) for x in verb))
        first = run(a.path, "maintain")
        assert first.returncode == 0, (verb, point, first.stdout, first.stderr)
        agree(w, a, s, pile)
        second = run(a.path, "maintain")
        assert second.returncode == 0 and "fixed" not in second.stdout and "REMOTE" not in second.stdout, (
            verb,
            point,
            second.stdout,
        )
    # nothing lost, nothing claimed twice
    assert sum(len(where(a, s)) for s in slugs) == len(slugs)
    assert set(w.claims()) <= set(slugs) and all(where(a, s)[0] in ("doing", "reviewing") for s in w.claims())


def test_crash_in_a_cross_clone_rescue(world):
    """Killed after the rescue's push, before the local copy: nobody holds the rescued claim, so
    `maintain` gives it back to the clone it was taken from, whose budget is spent: the same
    sweep then fails it on the remote (a retry, or a fresh rescue elsewhere, picks it up)."""
    ghost, a = world.clone("ghost"), world.clone("a")
    old = ghost_claim(ghost, "beta")
    kill_at(a, "remote:updated", "rescue", "beta")
    assert in_flight(a) == [] and world.claims()["beta"] != old  # the push landed, nothing local yet
    proc = run(a.path, "maintain")
    assert proc.returncode == 0 and "give it back to ghost @ gone" in proc.stdout, proc.stdout
    assert "REMOTE: refs/backlog/claims/beta (failed on remote origin: timeout" in proc.stdout
    assert world.claims() == {} and mine(a) == {} and in_flight(a) == []
    failed = world.file(world.settled()["beta"], "beta").decode().splitlines()
    assert failed[-1].split()[2:4] == ["failed", "by=tester"] and "rescued" not in failed[-2]
    assert "REMOTE" not in run(a.path, "maintain").stdout


def test_blob_id_matches_git(tmp_path):
    data = b"# x\r\n\n---\n\n- 2026-01-01T00:00:00Z progress | \xc3\xa9\n"
    path = tmp_path / "f"
    path.write_bytes(data)
    assert (
        blob_id(data)
        == subprocess.run(
            ["git", "hash-object", "--no-filters", str(path)], capture_output=True, text=True
        ).stdout.strip()
    )
    assert mine_ref(CLAIMS, "x") == "refs/backlog-mine/claims/x" and RemoteError.code == 1 and Lost.code == 3
    assert Unreachable.code == 4 and issubclass(Unreachable, RemoteError)


def test_json_with_a_remote_keeps_its_schemas(world):
    """maintain gains a REMOTE bucket and status --remote its own shape: both are in the contract."""
    from jsonschema import Draft202012Validator

    from maildir_backlog.schemagen import schema as made

    def schema(name: str) -> Draft202012Validator:
        return Draft202012Validator(made(name))

    a = world.clone("a")
    assert run(a.path, "take", "alpha").returncode == 0
    for args, name in ((("maintain",), "maintain"), (("status", "--remote"), "status"), (("status",), "status")):
        proc = run(a.path, "--json", *args)
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        errors = [e.message for e in schema(name).iter_errors(data)]
        assert not errors, (args, errors, data)
    assert "REMOTE" in json.loads(run(a.path, "--json", "maintain").stdout)["buckets"]


def test_rename_is_refused_while_a_remote_is_declared(world):
    """SPEC §7.11: other clones hold the task under its old name and the remote's records are not
    renamed, so a rename would let them claim it twice: refused, nothing changed."""
    a = world.clone("a")
    head = git(a.path, "rev-parse", "HEAD")
    proc = run(a.path, "rename", "alpha", "alpha-two")
    assert proc.returncode == 1 and "remote origin" in proc.stderr
    assert git(a.path, "rev-parse", "HEAD") == head and (a / "backlog/todo/alpha.md").exists()


def test_take_slug_keeps_the_note_of_a_rescue_from_another_clone(world):
    """`take SLUG` of a task another clone holds past its budget rescues it; the rescue's note
    ("rescued alpha from …") reaches the user (it was overwritten by the prelude's lines once)."""
    a, b = aged_claim(world)
    proc = run(b.path, "take", "alpha", claimer="bob")
    assert proc.returncode == 0 and "rescued alpha from alice @ main" in proc.stderr, proc.stderr


def test_clones_spread_over_the_best_when_another_clone_holds_a_claim(tmp_path, monkeypatch):
    """No herd across machines: another clone's claim on the remote makes this clone's claimers
    start at places of their own among the equally ranked best; with no claim anywhere, every
    claimer gets the documented order (a lone worker)."""
    from maildir_backlog import state
    from maildir_backlog.context import open_context

    world = make_world(tmp_path / "w", [f"t{n}" for n in range(8)])
    a, b = world.clone("a"), world.clone("b")

    def firsts() -> set[str]:
        seen = set()
        for name in ("ann", "bob", "cy", "dee", "eve", "fay"):
            monkeypatch.setenv("BACKLOG_CLAIMER", name)
            seen.add(next(iter(state.Model(open_context(b.path)).picks([]))))
        return seen

    assert len(firsts()) == 1  # nobody else takes: the documented order for everyone
    assert run(a.path, "take", claimer="alice").returncode == 0
    assert len(firsts()) >= 2


def test_a_lost_race_relists_instead_of_pushing_for_each_task_taken_meanwhile(tmp_path, monkeypatch):
    """Auto-pick lost its first candidate to another clone, which took three more meanwhile: one
    fresh listing drops those three, so the next push claims a free task (one lost race, not four)."""
    from maildir_backlog.commands import claim
    from maildir_backlog.context import open_context

    world = make_world(tmp_path / "w", [f"t{n}" for n in range(8)])
    a, b = world.clone("a"), world.clone("b")
    monkeypatch.setenv("BACKLOG_CLAIMER", "bob")
    monkeypatch.setenv("BACKLOG_DEBUG", "1")
    real = storage.crash_point

    def meanwhile(name: str) -> None:
        if name == "remote:pending" and not world.claims():
            for slug in ("t0", "t1", "t2", "t3"):  # bob's first four candidates, in take's order
                assert run(a.path, "take", slug, claimer="alice").returncode == 0
        real(name)

    monkeypatch.setattr(storage, "crash_point", meanwhile)
    result = claim.take(open_context(b.path), None)
    assert result.data["slug"] == "t4"
    assert [line.split(": ")[1] for line in result.stderr] == ["lost t0"]
