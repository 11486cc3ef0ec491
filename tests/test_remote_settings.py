"""Claims across clones under the git settings a remote's owner or a clone's user really set
(SPEC §8; docs/reliability.md, *Users' git settings*).

Generated: hypothesis draws up to three settings for the bare remote (fsck on receive, refused
deletions and non-fast-forwards, the protocol version, gc on receive, ...) and up to three for both
clones (the protocol version, pruning on fetch, tag following, negotiation, fsck, push defaults,
line endings, ...), then runs a claim's life across the two clones: a claim, the other clone refused and
auto-picking another task, progress, advance, fail, retry, a claim and its release, a settled task
refused, the janitor on both. After it: every call answered as it must, no claim is left on the
remote, and a second janitor run on each clone finds nothing to fix.

Two settings refuse every claim, whatever is retried: a server that does not advertise atomic
pushes, and a clone that has the remote as a mirror. Each is answered in one line naming the
setting, exit 1 (not 4, "retry later"), with nothing changed.

`BACKLOG_REMOTE_SETTINGS_EXAMPLES=100` searches longer; each shrunk failure stays as an @example.
"""

from __future__ import annotations

import json
import os

import pytest
from conftest import git
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_remote import in_flight, make_world, run

EXAMPLES = int(os.environ.get("BACKLOG_REMOTE_SETTINGS_EXAMPLES", "1"))

SERVER = (
    ("receive.denyDeletes", "true"),
    ("receive.fsckObjects", "true"),
    ("receive.denyNonFastForwards", "true"),
    ("core.logAllRefUpdates", "always"),
    ("uploadpack.allowFilter", "false"),
    ("receive.advertisePushOptions", "false"),
    ("receive.autogc", "true"),
    ("gc.auto", "1"),
    ("transfer.fsckObjects", "true"),
    ("protocol.version", "0"),
    ("uploadpack.allowRefInWant", "false"),
)
CLIENT = (
    ("protocol.version", "0"),
    ("protocol.version", "1"),
    ("push.default", "nothing"),
    ("fetch.prune", "true"),
    ("fetch.pruneTags", "true"),
    ("remote.origin.tagOpt", "--no-tags"),
    ("transfer.fsckObjects", "true"),
    ("fetch.negotiationAlgorithm", "skipping"),
    ("fetch.writeCommitGraph", "true"),
    ("push.followTags", "true"),
    ("fetch.parallel", "4"),
    ("core.compression", "0"),
    ("push.autoSetupRemote", "true"),
    ("remote.pushDefault", "origin"),
    ("push.negotiate", "true"),
    ("fetch.output", "compact"),
    ("push.recurseSubmodules", "check"),
    ("fetch.fsckObjects", "true"),
    ("remote.origin.fetch", "+refs/heads/main:refs/remotes/origin/main"),
    ("core.autocrlf", "true"),
    ("core.safecrlf", "true"),
)


def _ok(repo, *args: str, claimer: str):
    done = run(repo.path, *args, claimer=claimer)
    assert done.returncode == 0 and "Traceback" not in done.stderr, f"{args}: {done.returncode} {done.stderr}"
    return done.stdout


def _pick(pool):
    return st.lists(st.sampled_from(pool), max_size=3, unique_by=lambda kv: kv[0])


@pytest.mark.stress
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(server=_pick(SERVER), client=_pick(CLIENT))
@example(server=[], client=[("core.autocrlf", "true"), ("core.safecrlf", "true")])
def test_a_claim_s_life_across_clones_under_users_settings(tmp_path_factory, server, client):
    world = make_world(tmp_path_factory.mktemp("remote-settings"), ["alpha", "beta", "gamma"])
    for key, value in server:
        git(world.server, "config", key, value)
    a, b = world.clone("a"), world.clone("b")
    for key, value in client:
        git(a.path, "config", key, value)
        git(b.path, "config", key, value)
    _ok(a, "take", "alpha", claimer="alice")
    assert set(world.claims()) == {"alpha"}
    refused = run(b.path, "take", "alpha", claimer="bob")
    assert refused.returncode == 1 and "alice" in refused.stderr, refused.stderr
    other = json.loads(_ok(b, "--json", "take", claimer="bob"))["slug"]
    assert other in ("beta", "gamma")
    _ok(a, "progress", "half way", claimer="alice")
    _ok(b, "--json", "status", "--remote", claimer="bob")
    _ok(a, "advance", "alpha", claimer="alice")
    _ok(b, "fail", other, "blocked", claimer="bob")
    _ok(b, "retry", other, "unblocked", claimer="bob")
    _ok(a, "take", other, claimer="alice")
    _ok(a, "release", other, claimer="alice")
    settled = run(b.path, "take", "alpha", claimer="bob")
    assert settled.returncode == 1 and "settled" in settled.stderr, settled.stderr
    for clone, who in ((a, "alice"), (b, "bob")):
        _ok(clone, "maintain", claimer=who)
    for clone, who in ((a, "alice"), (b, "bob")):
        report = json.loads(_ok(clone, "--json", "maintain", claimer=who))
        assert not [f for found in report["buckets"].values() for f in found if f["fixed"]], report
    assert world.claims() == {} and "alpha" in world.settled()


@pytest.mark.parametrize(
    "side, key, said",
    [
        ("server", "receive.advertiseAtomic", "does not accept atomic pushes (`receive.advertiseAtomic` is off"),
        ("client", "remote.origin.mirror", "has it as a mirror (`remote.origin.mirror`)"),
    ],
)
def test_a_setting_that_refuses_every_claim_is_named_in_one_line_with_exit_1(tmp_path, side, key, said):
    world = make_world(tmp_path / "w", ["alpha"])
    a = world.clone("a")
    git(world.server if side == "server" else a.path, "config", key, "false" if side == "server" else "true")
    done = run(a.path, "--json", "take", "alpha", claimer="alice")
    error = json.loads(done.stdout)
    assert done.returncode == 1 and error["code"] == 1 and error["retryable"] is False, done
    assert said in error["error"] and "nothing was changed" in error["error"], error
    assert done.stderr.count("\n") == 1 + done.stderr.count("backlog: layout:"), done.stderr
    assert world.claims() == {} and in_flight(a) == [] and (a / "backlog/todo/alpha.md").exists()
