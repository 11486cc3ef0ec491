"""Truthful views with a remote declared (SPEC §5, §8): `ready`, `list` and `status` mark what
other clones hold or settled, `ready` never offers it, and an unreachable remote is said (one
stderr line, `"remote": "unreachable"` in JSON) instead of stale state shown as fact."""

from __future__ import annotations

import json

from test_json_contract import validator
from test_remote import make_world, run


def slugs(proc) -> list[str]:
    assert proc.returncode == 0, proc.stderr
    return [t["slug"] for t in json.loads(proc.stdout)["tasks"]]


def check(verb: str, proc) -> dict:
    data = json.loads(proc.stdout)
    assert not [e.message for e in validator(verb).iter_errors(data)], data
    return data


def test_views_mark_what_another_clone_holds_or_settled(tmp_path):
    world = make_world(tmp_path / "w", ["alpha", "beta", "gamma"])
    a, b = world.clone("a"), world.clone("b")
    assert run(a.path, "take", "alpha", claimer="alice").returncode == 0
    assert run(a.path, "take", "beta", claimer="alice").returncode == 0
    assert run(a.path, "advance", "beta", claimer="alice").returncode == 0  # done on clone a, not pushed
    ready = run(b.path, "--json", "ready", claimer="bob")
    assert slugs(ready) == ["gamma"]  # never offers what another clone holds or settled
    assert check("ready", ready)["remote"] == "reached"
    listed = run(b.path, "--json", "list", claimer="bob")
    rows = {t["slug"]: t for t in check("list", listed)["tasks"]}
    assert rows["alpha"]["state"] == "in flight" and "alice @ main" in rows["alpha"]["detail"]
    assert "another clone" in rows["alpha"]["detail"] and rows["alpha"]["ready"] is False
    assert rows["beta"]["state"] == "settled elsewhere" and "done by alice" in rows["beta"]["detail"]
    assert rows["gamma"]["state"] == "ready"
    status = check("status", run(b.path, "--json", "status", claimer="bob"))
    assert status["counts"]["todo"] == 1 and sorted(status["stale"]) == ["alpha", "beta"]
    assert status["remote"] == "reached"
    human = run(b.path, "list", claimer="bob").stdout
    assert "alpha  priority 5  in flight elsewhere: by alice @ main (another clone, remote origin)" in human
    taken = run(b.path, "--json", "take", claimer="bob")
    assert json.loads(taken.stdout)["slug"] == "gamma"  # auto-pick agrees with ready


def test_an_unreachable_remote_is_said_never_hidden(tmp_path):
    world = make_world(tmp_path / "w", ["alpha", "beta"])
    a, b = world.clone("a"), world.clone("b")
    assert run(a.path, "take", "alpha", claimer="alice").returncode == 0
    b.git("remote", "set-url", "origin", str(world.root / "nowhere.git"))
    for verb in ("ready", "list", "status"):
        proc = run(b.path, "--json", verb, claimer="bob")
        assert proc.returncode == 0, proc.stderr
        assert check(verb, proc)["remote"] == "unreachable"
        note = [line for line in proc.stderr.splitlines() if "remote origin unreachable" in line]
        assert len(note) == 1 and "not known" in note[0], proc.stderr
        human = run(b.path, verb, claimer="bob")
        assert "remote origin unreachable" in human.stderr and "Traceback" not in human.stderr
    assert run(b.path, "take", claimer="bob").returncode == 4  # and take says the same: retry later


def test_the_api_says_the_remote_as_the_command_does(tmp_path):
    """`Backlog.ready()` is a list of ReadyTask that also carries `remote` and the warning lines;
    `list()` carries `remote`: an unreachable remote is said through the API too."""
    from maildir_backlog import Backlog, ReadyTask, ReadyTasks

    world = make_world(tmp_path / "w", ["alpha", "beta"])
    a, b = world.clone("a"), world.clone("b")
    assert run(a.path, "take", "alpha", claimer="alice").returncode == 0
    bl = Backlog(b.path, claimer="bob")
    bl.status()  # (the first call in a clone makes its shared piles, and says so)
    ready = bl.ready()
    assert isinstance(ready, ReadyTasks) and all(isinstance(t, ReadyTask) for t in ready)
    assert [t.slug for t in ready] == ["beta"] and ready.remote == "reached" and ready.warnings == ()
    assert bl.list().remote == "reached"
    b.git("remote", "set-url", "origin", str(world.root / "nowhere.git"))
    ready = bl.ready()
    assert ready.remote == "unreachable" and bl.list().remote == "unreachable"
    assert len(ready.warnings) == 1 and "remote origin unreachable" in ready.warnings[0], ready.warnings
    assert ready == [t for t in ready]  # still a list: compared, indexed and iterated as before
