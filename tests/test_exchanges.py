"""How many exchanges each verb has with the remote (SPEC §8: a claim, named or auto-picked, costs
at most two: one listing and one atomic push whose expected old values are the confirmation).

The remote is a bare repository over file://. Each clone's `remote.origin.uploadpack` and
`remote.origin.receivepack` name a wrapper that appends one line to a log, then runs git's own
program: every listing and fetch runs upload-pack once, every push receive-pack once. The counts
are pinned for every verb that talks to the remote (`test_every_verb_pinned`), in the steady state (the clone has the remote's default and intake branches
as they are, and no settled record it has not seen).
"""

from __future__ import annotations

import shlex
import stat
from collections import Counter
from pathlib import Path

import pytest
from conftest import Repo, git
from test_remote import World, make_world, run

WRAPPER = """#!/bin/sh
echo {program} >> {log}
exec git {program} "$@"
"""


def counted(world: World, name: str, tmp: Path) -> tuple[Repo, Path]:
    clone = world.clone(name)
    log = tmp / f"{name}-exchanges.log"
    for program, key in (("upload-pack", "uploadpack"), ("receive-pack", "receivepack")):
        script = tmp / f"{name}-{program}"
        script.write_text(WRAPPER.format(program=program, log=shlex.quote(str(log))))
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        git(clone.path, "config", f"remote.origin.{key}", shlex.quote(str(script)))  # (a shell command)
    return clone, log


def exchanges(log: Path) -> Counter[str]:
    seen = Counter(log.read_text().split()) if log.exists() else Counter()
    log.unlink(missing_ok=True)
    return seen


@pytest.fixture
def world(tmp_path) -> World:
    return make_world(tmp_path / "w", ["alpha", "beta", "gamma"])


def test_a_claim_is_two_exchanges(world, tmp_path):
    """take SLUG, auto-pick, progress and advance each pinned; a claim is one listing and one push."""
    b, log = counted(world, "b", tmp_path)
    steps = [
        (("take", "alpha"), {"upload-pack": 1, "receive-pack": 1}),
        (("progress", "--slug", "alpha", "half way"), {"receive-pack": 1}),
        (("advance", "alpha"), {"receive-pack": 1}),
        (("take",), {"upload-pack": 1, "receive-pack": 1}),
    ]
    for args, want in steps:
        proc = run(b.path, *args, claimer="bob")
        assert proc.returncode == 0, proc.stderr
        assert exchanges(log) == Counter(want), (args, proc.stderr)


def test_a_claim_after_another_clone_settled_is_two_exchanges(world, tmp_path):
    """A slug another clone settled (its tombstone under claims/) is refused from the listing alone:
    one exchange, no push; the next auto-pick still costs two."""
    a = world.clone("a")
    for verb in (("take", "alpha"), ("advance", "alpha")):
        assert run(a.path, *verb, claimer="alice").returncode == 0
    b, log = counted(world, "b", tmp_path)
    proc = run(b.path, "take", "alpha", claimer="bob")
    assert proc.returncode in (1, 3), proc.stderr
    assert exchanges(log)["receive-pack"] == 0, proc.stderr
    proc = run(b.path, "take", claimer="bob")
    assert proc.returncode == 0, proc.stderr
    assert exchanges(log) == Counter({"upload-pack": 1, "receive-pack": 1}), proc.stderr


def test_every_verb_pinned(world, tmp_path):
    """Each verb's exchanges with the remote, pinned (SPEC §8): what a verb asks the remote is a
    cost every agent pays, so a new listing or fetch must show up here as a changed number."""
    b, log = counted(world, "b", tmp_path)
    lists, pushes = "upload-pack", "receive-pack"
    steps = [
        (("status",), {lists: 1}),  # the listing that counts other clones' claims
        (("ready",), {lists: 1}),
        (("add", "delta"), {lists: 1, pushes: 1}),  # the intake commit goes on to the remote's branch
        (("take", "alpha"), {lists: 1, pushes: 1}),
        (("show", "alpha"), {lists: 1}),
        (("fail", "alpha", "broken"), {pushes: 1}),  # settled/ and the tombstone, one atomic push
        (("retry", "alpha", "fixed"), {lists: 1, pushes: 2}),  # the record rewritten; the intake commit
        (("take", "beta"), {lists: 1, pushes: 1}),
        (("release", "beta"), {pushes: 1}),
        (("take", "gamma"), {lists: 1, pushes: 1}),
        (("cancel", "gamma", "not needed"), {pushes: 1}),
        # the janitor: reconcile's listing, the claims past budget, the default tip, the prune's listing
        (("maintain",), {lists: 4}),
    ]
    for args, want in steps:
        proc = run(b.path, *args, claimer="bob")
        assert proc.returncode == 0, (args, proc.stderr)
        assert exchanges(log) == Counter(want), (args, proc.stderr)
