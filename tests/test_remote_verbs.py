"""Every verb knows the remote (SPEC §5 *Ownership*, §8 *Every verb knows the remote*) and a
declared remote this clone has not configured (SPEC §3).

The world of tests/test_remote.py: a bare repository seeded with a maildir-shared backlog that
declares `remote: origin`, served over `file://` (and once through `git daemon` on loopback), and
two clones of it standing for two machines; clone a has a second worktree on branch `side`. The
commands are the real `backlog` in processes of their own.

* a task another clone holds: `advance`, `progress`, `fail`, `cancel`, `rescue` and `retry` are
  exit 1, kind `held`, naming its holder (never exit 3, never "not in flight");
* a task settled on another clone: exit 1, kind `settled`, naming the cause its record's log
  tells (failed by timeout, failed (reason), cancelled (reason), done);
* a task retried on one clone (or worktree) is claimed on another; `retry` on one clone of a task
  that failed on another reopens it for every clone;
* `show` reports the remote's claim or settlement with its log;
* a declared but unconfigured remote: the read-only verbs answer from local state with one
  warning, the verbs that need the remote exit 2 with the same words.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import GIT_IDENTITY, Repo, git
from test_json_contract import validator
from test_remote import Daemon, World, ghost_claim, make_world, run

SLUGS = ["alpha", "beta", "gamma", "delta", "eps", "zeta"]
# each verb on a slug (`{}`), as the command line says it
VERBS = {
    "advance": ("advance", "{}"),
    "progress": ("progress", "a note", "--slug", "{}"),
    "fail": ("fail", "{}", "giving up"),
    "cancel": ("cancel", "{}", "not needed any more"),
    "rescue": ("rescue", "{}"),
    "retry": ("retry", "{}", "once more"),
}
# the tasks the scene settled on clone a (or its remote claim, on clone b's janitor), and the cause
# each refusal must name, as the record's log tells it
SETTLED = {
    "beta": ("failed", "failed (broken build)"),
    "gamma": ("cancelled", "cancelled (not needed)"),
    "delta": ("done", "done"),
    "eps": ("failed", "failed by timeout (budget=1h"),
}


def args_of(verb: str, slug: str) -> list[str]:
    return [part.format(slug) for part in VERBS[verb]]


def error_of(proc: subprocess.CompletedProcess) -> dict:
    assert "Traceback" not in proc.stderr, proc.stderr
    data = json.loads(proc.stdout)
    assert not [e.message for e in validator("error").iter_errors(data)], data
    return data


def checked(verb: str, proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert not [e.message for e in validator(verb).iter_errors(data)], data
    return data


class Scene:
    """Clones a and b of one remote, and clone a's worktree `side` (branch side). On clone a,
    alice holds alpha, failed beta (broken build), cancelled gamma (not needed) and finished
    delta; a claim of eps by a clone that vanished was failed by timeout by bob's janitor on clone
    b; bob holds zeta on clone b."""

    def __init__(self, root: Path) -> None:
        self.world: World = make_world(root, SLUGS)
        self.a, self.b = self.world.clone("a"), self.world.clone("b")
        self.side = Path(self.a.worktree("side").path)
        for args in (
            ("take", "alpha"),
            ("take", "beta"),
            ("fail", "beta", "broken build"),
            ("take", "gamma"),
            ("cancel", "gamma", "not needed"),
            ("take", "delta"),
            ("advance", "delta"),
        ):
            proc = run(self.a.path, *args, claimer="alice")
            assert proc.returncode == 0, (args, proc.stderr)
        ghost_claim(self.a, "eps", hours_ago=2, budget="1h")
        proc = run(self.b.path, "maintain", claimer="bob")
        assert proc.returncode == 0 and "eps" in proc.stdout, proc.stdout + proc.stderr
        proc = run(self.b.path, "take", "zeta", claimer="bob")
        assert proc.returncode == 0, proc.stderr
        assert set(self.world.claims()) == {"alpha", "zeta"}
        assert set(self.world.settled()) == {"beta", "gamma", "delta", "eps"}


@pytest.fixture(scope="module")
def scene(tmp_path_factory) -> Scene:
    """Built once for the module (every verb it is asked about is refused, and each test checks
    that the remote's refs did not move): with the test identity, as conftest's fixtures set it."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(tmp_path_factory.mktemp("home")))
        for key, value in GIT_IDENTITY.items():
            mp.setenv(key, value)
        return Scene(tmp_path_factory.mktemp("scene"))


@pytest.mark.parametrize("verb", list(VERBS))
def test_a_verb_on_a_task_another_clone_holds_or_settled_says_so(scene, verb):
    """SPEC §5 *Ownership*: exit 1 naming the holder (kind held), or what became of the task and
    why (kind settled), from either clone and from the other worktree; nothing moves."""
    before = scene.world.refs()
    for cwd, claimer, slug, holder in (
        (scene.b.path, "bob", "alpha", ("alice", "main")),
        (scene.side, "carol", "zeta", ("bob", "main")),
    ):
        proc = run(cwd, "--json", *args_of(verb, slug), claimer=claimer)
        error = error_of(proc)
        assert proc.returncode == 1 and error["kind"] == "held" and error["retryable"] is False, (verb, error)
        assert (error["holder"]["claimer"], error["holder"]["branch"]) == holder, (verb, error)
        assert error["holder"]["since"], error
        assert f"{holder[0]} @ {holder[1]}" in error["error"], error
        human = run(cwd, *args_of(verb, slug), claimer=claimer)
        assert human.returncode == 1 and len(human.stderr.strip().splitlines()) == 1, human.stderr
    for slug, (outcome, cause) in SETTLED.items():
        if verb == "retry" and outcome == "failed":
            continue  # a failed task is retried from any clone (test_retry_on_another_clone_…)
        proc = run(scene.b.path, "--json", *args_of(verb, slug), claimer="bob")
        error = error_of(proc)
        assert proc.returncode == 1 and error["kind"] == "settled" and error["retryable"] is False, (verb, slug, error)
        assert error["settled"]["state"] == outcome, (verb, slug, error)
        assert cause in error["error"], (verb, slug, error["error"])
    assert scene.world.refs() == before


def test_a_task_retried_on_one_clone_is_claimed_in_another_worktree_and_another_clone(tmp_path):
    """SPEC §8: `retry` rewrites the remote's record so that every clone can claim the reopened
    task: a worktree of the same clone whose branch still holds the old copy, and another clone
    whose todo/ copy predates the failure, claim the retried copy (its log, its retry)."""
    world = make_world(tmp_path / "w", ["alpha", "beta", "gamma"])
    a, b = world.clone("a"), world.clone("b")
    side = Path(a.worktree("side").path)
    for args in (("take", "alpha"), ("fail", "alpha", "flaky"), ("retry", "alpha", "fixed")):
        assert run(a.path, *args, claimer="alice").returncode == 0, args
    assert world.file(world.settled()["alpha"], "alpha").endswith(b"retried | fixed\n")
    proc = run(side, "--json", "take", "alpha", claimer="carol")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["slug"] == "alpha" and "alpha" in world.claims()
    claimed = world.file(world.claims()["alpha"], "alpha").decode()
    assert "failed | flaky" in claimed and "retried | fixed" in claimed and "claimer=carol branch=side" in claimed
    proc = run(b.path, "--json", "take", "alpha", claimer="bob")  # now held by carol: refused, naming her
    error = error_of(proc)
    assert proc.returncode == 1 and error["kind"] == "held" and error["holder"]["claimer"] == "carol"
    # another task retried on clone a: clone b's `ready` offers it and `take` claims it
    for args in (("take", "beta"), ("fail", "beta", "flaky"), ("retry", "beta", "fixed")):
        assert run(a.path, *args, claimer="alice").returncode == 0, args
    for args in (("take", "gamma"), ("fail", "gamma", "flaky")):
        assert run(a.path, *args, claimer="alice").returncode == 0, args
    ready = checked("ready", run(b.path, "--json", "ready", claimer="bob"))
    assert [t["slug"] for t in ready["tasks"]] == ["beta"] and ready["remote"] == "reached"
    proc = run(b.path, "--json", "take", "beta", claimer="bob")
    assert proc.returncode == 0, proc.stderr
    claimed = world.file(world.claims()["beta"], "beta").decode()
    assert "retried | fixed" in claimed and "claimer=bob branch=main" in claimed
    assert run(b.path, "advance", "beta", claimer="bob").returncode == 0
    assert "beta" in world.settled() and "beta" not in world.claims()
    # auto-pick with no view before it (clone b has never fetched gamma's record): its last resort
    assert run(a.path, "retry", "gamma", "fixed", claimer="alice").returncode == 0
    proc = run(b.path, "--json", "take", claimer="bob")
    assert proc.returncode == 0 and json.loads(proc.stdout)["slug"] == "gamma", proc.stdout + proc.stderr


def test_retry_on_another_clone_reopens_a_failed_task_for_every_clone(tmp_path):
    """SPEC §5 retry: a task failed on any clone is retried from any clone; the retry rewrites the
    remote's record (leased on the failure), and the clone where it failed claims it again."""
    world = make_world(tmp_path / "w", ["alpha"])
    a, b = world.clone("a"), world.clone("b")
    for args in (("take", "alpha"), ("fail", "alpha", "flaky")):
        assert run(a.path, *args, claimer="alice").returncode == 0, args
    failed = world.settled()["alpha"]
    proc = run(b.path, "--json", "retry", "alpha", "try again", claimer="bob")
    assert checked("retry", proc)["pile"] == "todo"
    retried = world.settled()["alpha"]
    assert git(world.server, "rev-parse", f"{retried}^").strip() == failed
    assert world.file(retried, "alpha").endswith(b"retried | try again\n")
    again = run(b.path, "--json", "retry", "alpha", "twice", claimer="bob")
    assert again.returncode == 1 and error_of(again)["kind"] == "settled"
    proc = run(a.path, "--json", "take", "alpha", claimer="alice")  # its failed/ copy is older: the record's
    assert proc.returncode == 0, proc.stderr
    assert "retried | try again" in world.file(world.claims()["alpha"], "alpha").decode()


def test_show_reports_another_clones_claim_and_settlement_with_their_logs(tmp_path):
    """SPEC §5 *Truthful views*: `show` on clone b says what clone a's claim and settlement are,
    with the record's log, in text and in JSON; a task only the remote knows is shown from it."""
    world = make_world(tmp_path / "w", ["alpha", "beta"])
    a, b = world.clone("a"), world.clone("b")
    for args in (("take", "alpha"), ("progress", "half way"), ("take", "beta"), ("fail", "beta", "broken build")):
        assert run(a.path, *args, claimer="alice").returncode == 0, args
    shown = checked("show", run(b.path, "--json", "show", "alpha", claimer="bob"))
    record = shown["remote_record"]
    assert shown["remote"] == "reached" and shown["pile"] == "doing"  # the remote's record, not the queued copy
    assert record["ref"] == "claims" and record["state"] == "in flight" and record["pile"] == "doing"
    assert record["this_clone"] is False and record["holder"]["claimer"] == "alice"
    assert [e["kind"] for e in record["log"]] == ["advanced", "progress"] and record["log"][1]["text"] == "half way"
    text = run(b.path, "show", "alpha", claimer="bob").stdout
    assert "another clone's claim: alice @ main" in text and "progress | half way" in text, text
    shown = checked("show", run(b.path, "--json", "show", "beta", claimer="bob"))
    assert shown["remote_record"]["state"] == "failed" and shown["remote_record"]["cause"] == "failed (broken build)"
    assert shown["remote_record"]["settled"]["state"] == "failed"
    assert "failed (broken build) by alice @ main" in run(b.path, "show", "beta", claimer="bob").stdout
    # a task clone b has never seen (added and claimed on clone a, not pushed): shown from the record
    assert run(a.path, "add", "omega", claimer="alice").returncode == 0
    assert run(a.path, "take", "omega-plan", claimer="alice").returncode == 0
    shown = checked("show", run(b.path, "--json", "show", "omega-plan", claimer="bob"))
    assert shown["path"] == "origin:refs/backlog/claims/omega-plan" and shown["pile"] == "doing"
    assert shown["claim"]["claimer"] == "alice" and shown["remote_record"]["holder"]["claimer"] == "alice"
    # this clone's own claim: the record is this clone's
    mine = checked("show", run(a.path, "--json", "show", "alpha", claimer="alice"))["remote_record"]
    assert mine["this_clone"] is True and mine["ref"] == "claims"


READ_ONLY = (("status",), ("ready",), ("list",), ("show", "alpha"), ("where",), ("prime",))
NEEDS_REMOTE = (
    ("take",),
    ("take", "alpha"),
    ("advance", "alpha"),
    ("progress", "a note", "--slug", "alpha"),
    ("fail", "alpha", "r"),
    ("cancel", "alpha", "r"),
    ("rescue", "alpha"),
    ("retry", "alpha", "r"),
    ("status", "--remote"),
)


def test_a_declared_remote_this_clone_has_not_configured(tmp_path):
    """SPEC §3: a fresh clone whose remote has another name. Read-only verbs answer from local
    state with one warning line naming the AGENTS.md line and the `git remote add` to run, and
    `"remote": "unconfigured"`; verbs that need the remote exit 2 with the same words."""
    world = make_world(tmp_path / "w", ["alpha", "beta"])
    a = world.clone("a")
    assert run(a.path, "take", "alpha", claimer="alice").returncode == 0
    c = Repo(tmp_path / "w" / "c")
    git(world.root, "clone", "-q", "-o", "upstream", world.url, str(c.path))
    words = "`remote: origin` names no remote configured in this clone: run `git remote add origin <url>`"
    for args in READ_ONLY:
        proc = run(c.path, "--json", *args, claimer="carol")
        data = checked(args[0], proc)
        assert data["remote"] == "unconfigured", (args, data)
        warned = [line for line in proc.stderr.splitlines() if "warning:" in line]
        assert len(warned) == 1 and "backlog/AGENTS.md:" in warned[0] and words in warned[0], (args, proc.stderr)
        human = run(c.path, *args, claimer="carol")
        assert human.returncode == 0 and human.stderr.count(words) == 1, (args, human.stderr)
    assert [t["slug"] for t in checked("ready", run(c.path, "--json", "ready"))["tasks"]] == ["alpha", "beta"]
    refs, before = world.refs(), git(c.path, "rev-parse", "HEAD")
    for args in NEEDS_REMOTE:
        proc = run(c.path, "--json", *args, claimer="carol")
        error = error_of(proc)
        assert proc.returncode == 2 and error["kind"] == "invalid", (args, error)
        assert "backlog/AGENTS.md:" in error["error"] and words in error["error"], (args, error)
        assert proc.stderr.count(words) == 1, (args, proc.stderr)
    assert world.refs() == refs and git(c.path, "rev-parse", "HEAD") == before
    git(c.path, "remote", "add", "origin", world.url)  # the words' advice: then the remote is known
    proc = run(c.path, "--json", "take", "alpha", claimer="carol")
    assert proc.returncode == 1 and error_of(proc)["holder"]["claimer"] == "alice"
    assert json.loads(run(c.path, "--json", "take", claimer="carol").stdout)["slug"] == "beta"


def _has_git_daemon() -> bool:
    exec_path = subprocess.run(["git", "--exec-path"], capture_output=True, text=True).stdout.strip()
    return bool(exec_path) and (Path(exec_path) / "git-daemon").exists()


@pytest.fixture
def daemon(tmp_path):
    if not _has_git_daemon():
        pytest.skip("git daemon is not installed")
    served = Daemon(tmp_path / "w" / "srv")
    served.start()
    yield served
    served.stop()


def test_every_verb_knows_the_remote_through_git_daemon(tmp_path, daemon):
    """The same answers through `git daemon` (git://, receive-pack enabled) on loopback."""
    world = make_world(tmp_path / "w", ["alpha", "beta", "gamma"], url=f"git://127.0.0.1:{daemon.port}/backlog.git")
    a, b = world.clone("a"), world.clone("b")
    for args in (("take", "alpha"), ("take", "beta"), ("fail", "beta", "flaky"), ("retry", "beta", "fixed")):
        assert run(a.path, *args, claimer="alice").returncode == 0, args
    for args in (("advance", "alpha"), ("fail", "alpha", "x"), ("progress", "n", "--slug", "alpha")):
        proc = run(b.path, "--json", *args, claimer="bob")
        assert proc.returncode == 1 and error_of(proc)["holder"]["claimer"] == "alice", (args, proc.stdout)
    shown = checked("show", run(b.path, "--json", "show", "alpha", claimer="bob"))
    assert shown["remote_record"]["holder"]["claimer"] == "alice"
    proc = run(b.path, "--json", "take", "beta", claimer="bob")
    assert proc.returncode == 0, proc.stderr
    assert "retried | fixed" in world.file(world.claims()["beta"], "beta").decode()
    assert run(a.path, "cancel", "alpha", "not needed", claimer="alice").returncode == 0
    proc = run(b.path, "--json", "advance", "alpha", claimer="bob")
    error = error_of(proc)
    assert proc.returncode == 1 and error["kind"] == "settled" and "cancelled (not needed)" in error["error"]
