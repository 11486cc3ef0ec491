"""The error contract (SPEC §5 JSON and Ownership, the exit codes after §7): every failure is one
line on stderr and, with --json, `{"error", "code", "kind", "retryable"}` (plus `holder` when a
claim is in the way, `settled` when the task left flight), valid against the schema `error` (schemagen); exit 4
(unavailable) when the remote, a lock or the git index does not answer in time, with nothing
changed; only the holder (claimer *and* branch of record) acts on a claim."""

from __future__ import annotations

import fcntl
import json
import os
import re

import pytest
from conftest import ROOT, Repo, snapshot
from jsonschema import Draft202012Validator, FormatChecker
from test_remote import free_port, in_flight, make_world, mine

from maildir_backlog import gitcommit, schemagen, storage
from maildir_backlog.errors import KINDS, Busy, Unavailable

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
SCHEMA = schemagen.schema("error")


def error_of(proc, code: int, kind: str) -> dict:
    """The --json error object of a failed call: its exit code, kind, schema and one stderr line."""
    assert proc.returncode == code, (proc.returncode, proc.stderr, proc.stdout)
    assert "Traceback" not in proc.stderr
    data = json.loads(proc.stdout)
    problems = [e.message for e in Draft202012Validator(SCHEMA, format_checker=FormatChecker()).iter_errors(data)]
    assert not problems, (problems, data)
    assert data["code"] == code and data["kind"] == kind, data
    assert data["retryable"] is (code in (3, 4))
    assert proc.stderr.strip().splitlines()[-1] == f"backlog: {data['error']}"
    return data


# -- the closed set of kinds ------------------------------------------------------------------
def test_the_kinds_are_one_closed_set_in_code_schema_and_docs():
    assert SCHEMA["properties"]["kind"]["enum"] == list(KINDS)
    assert SCHEMA["properties"]["code"]["enum"] == [1, 2, 3, 4, 130]
    docs = (ROOT / "docs/json.md").read_text(encoding="utf-8")
    for kind in KINDS:
        assert f"| `{kind}` |" in docs, kind
    assert "| 4 | unavailable" in docs


def test_usage_invalid_and_not_found(shared, tmp_path):
    error_of(shared.run("--json", "frobnicate"), 2, "usage")
    error_of(shared.run("--json", "take", "--nope"), 2, "usage")
    error_of(shared.run("--json", "show", "../x"), 2, "invalid")
    error_of(shared.run("--json", "take", "nope-plan"), 1, "not-found")
    error_of(shared.run("--json", "advance", "nope-plan"), 1, "not-found")
    error_of(Repo(tmp_path).run("--json", "status"), 1, "refused")  # not inside a git repository


# -- held: a claim in the way names its holder --------------------------------------------------
def test_held_names_the_holder_in_json(shared):
    shared.ok("add", "x")
    b = shared.worktree("b1")
    shared.ok("take", "x-plan")
    for args in (("advance", "x-plan"), ("progress", "--slug", "x-plan", "n"), ("cancel", "x-plan", "r")):
        data = error_of(b.run("--json", *args), 1, "held")
        holder = data["holder"]
        assert (holder["claimer"], holder["branch"]) == ("tester", "main") and ISO.match(holder["since"])
        assert "tester @ main" in data["error"]
    data = error_of(b.run("--json", "take", "x-plan"), 1, "held")  # a named take of a held task
    assert data["holder"]["claimer"] == "tester" and data["holder"]["branch"] == "main"
    data = error_of(b.run("--json", "rescue", "x-plan"), 1, "held")  # within budget
    assert data["holder"]["branch"] == "main"


# -- Ownership: the holder is the claimer identity and the branch of record ---------------------
@pytest.mark.parametrize("backend", ["shared", "gitbk"])
def test_two_agents_on_one_branch_are_two_holders(backend, request):
    repo: Repo = request.getfixturevalue(backend)
    repo.ok("add", "x")
    repo.ok("take", "x-plan", env={"BACKLOG_CLAIMER": "alice"})
    bob = {"BACKLOG_CLAIMER": "bob"}
    before = snapshot(repo)
    for args in (
        ("advance", "x-plan"),
        ("progress", "--slug", "x-plan", "mine now"),
        ("cancel", "x-plan", "no"),
        ("fail", "x-plan", "no"),
    ):
        data = error_of(repo.run("--json", *args, env=bob), 1, "held")
        assert data["holder"]["claimer"] == "alice" and data["holder"]["branch"] == "main", data
        assert "alice @ main" in data["error"] and "--force" in data["error"]
    assert snapshot(repo) == before
    proc = repo.run("progress", "not mine", env=bob)  # without --slug: bob holds nothing on main
    assert proc.returncode == 1 and "no in-flight task is claimed by bob on branch main" in proc.stderr
    repo.ok("progress", "--slug", "x-plan", "helping", "--force", env=bob)
    repo.ok("progress", "still mine", env={"BACKLOG_CLAIMER": "alice"})
    repo.ok("advance", "x-plan", "--force", env=bob)
    text = (repo / "backlog/done/x-plan.md").read_text()
    assert " progress by=bob | helping" in text and " progress | still mine" in text
    assert re.search(r" advanced to=done by=bob\n", text), text


# -- settled: a task that left flight says what became of it -------------------------------------
def test_settled_says_how_where_and_when(shared):
    shared.ok("add", "x")
    b = shared.worktree("b1")  # holds x-plan in its todo/: a stale copy once main settles it
    shared.ok("take", "x-plan")
    shared.ok("advance", "x-plan")
    data = error_of(b.run("--json", "take", "x-plan"), 1, "settled")
    settled = data["settled"]
    assert (settled["state"], settled["branch"]) == ("done", "main") and ISO.match(settled["at"]), data
    data = error_of(shared.run("--json", "advance", "x-plan"), 1, "settled")  # in done/ here
    assert data["settled"]["state"] == "done" and data["settled"]["branch"] == "main"
    data = error_of(shared.run("--json", "cancel", "x-plan", "why"), 1, "settled")
    assert data["settled"]["state"] == "done"


def test_a_verb_on_a_copy_settled_elsewhere_says_what_became_of_it(shared):
    """SPEC §5 Ownership: main's todo copy of a task failed on branch b1 is stale; cancel, fail
    and progress there say so (failed on b1, when), not merely "not in flight"."""
    shared.ok("add", "x")
    b = shared.worktree("b1")
    bee = {"BACKLOG_CLAIMER": "bee"}
    b.ok("take", "x-plan", env=bee)
    b.ok("fail", "x-plan", "it broke", env=bee)
    for args in (("cancel", "x-plan", "r"), ("fail", "x-plan", "r"), ("progress", "--slug", "x-plan", "n")):
        data = error_of(shared.run("--json", *args), 1, "settled")
        assert (data["settled"]["state"], data["settled"]["branch"]) == ("failed", "b1"), data
        assert ISO.match(data["settled"]["at"]) and "settled (failed (it broke)) on branch b1" in data["error"]


# -- exit 4: unavailable ---------------------------------------------------------------------------
def test_a_lock_that_stays_busy_is_unavailable(tmp_path):
    path = tmp_path / "x.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(Busy) as info, storage.file_lock(path, timeout=0.1, what="task x"):
            pass
    finally:
        os.close(fd)
    err = info.value
    assert isinstance(err, Unavailable) and err.code == 4 and err.kind == "unavailable" and err.retryable
    assert err.payload() == {"error": err.message, "code": 4, "kind": "unavailable", "retryable": True}


def test_a_git_index_that_stays_locked_is_exit_4_and_nothing_changes(anybk, monkeypatch):
    """A user's git command holds `index.lock` past the retries (shortened here, in-process):
    the verb gives up with exit 4, and its files are put back."""
    monkeypatch.setattr(gitcommit, "INDEX_RETRY_SECONDS", 0.3)
    anybk.ok("add", "x")
    before = snapshot(anybk)
    (anybk / ".git/index.lock").write_text("")
    try:
        for args in (("add", "y"), ("take", "x-plan")):
            data = error_of(anybk.run("--json", *args), 4, "unavailable")
            assert "index.lock" in data["error"] and "retry later" in data["error"]
    finally:
        (anybk / ".git/index.lock").unlink()
    assert snapshot(anybk) == before


def test_an_unreachable_remote_is_exit_4_and_nothing_changes(tmp_path):
    """The remote's file:// path removed: `take`, `progress` and `advance` exit 4 (kind
    unavailable, retryable), no local claim is made and the task in flight stays as it was; with
    the remote back, the same `advance` succeeds."""
    world = make_world(tmp_path / "w", ["alpha", "beta"])
    a = world.clone("a")
    a.ok("take", "alpha")
    away = world.server.with_name("away.git")
    world.server.rename(away)
    before = snapshot(a)  # (this clone's memory of a push it could not finish stays pending: see remote/)
    for args in (("take", "beta"), ("take",), ("progress", "--slug", "alpha", "note"), ("advance", "alpha")):
        data = error_of(a.run("--json", *args), 4, "unavailable")
        assert "remote origin unreachable" in data["error"] and "retry" in data["error"]
        assert snapshot(a) == before and in_flight(a) == ["alpha"]
    away.rename(world.server)
    a.ok("advance", "alpha")
    assert in_flight(a) == [] and set(world.settled()) == {"alpha"}


def test_maintain_with_the_remote_unreachable_exits_4_after_the_local_sweep(tmp_path):
    world = make_world(tmp_path / "w", ["alpha"])
    a = world.clone("a")
    a.ok("take", "alpha")
    world.server.rename(world.server.with_name("away.git"))
    proc = a.run("--json", "maintain")
    assert proc.returncode == 4, proc.stderr
    data = json.loads(proc.stdout)
    [remote] = data["buckets"]["REMOTE"]
    assert remote["error"] is True and "remote origin unreachable" in remote["detail"]
    assert data["ok"] == {"todo": 0, "in_flight": 1} and "LAYOUT" in data["buckets"]


def test_a_port_nothing_listens_on_is_exit_4(tmp_path):
    world = make_world(tmp_path / "w", ["alpha"])
    a = world.clone("a")
    a.git("remote", "set-url", "origin", f"git://127.0.0.1:{free_port()}/backlog.git")
    a.ok("where")  # a fresh clone's first verb heals the layout (symlinks, .gitignore)
    before = snapshot(a)
    data = error_of(a.run("--json", "take", "alpha"), 4, "unavailable")
    assert "remote origin unreachable" in data["error"]
    assert snapshot(a) == before and in_flight(a) == [] and mine(a) == {}


def test_a_byte_that_is_not_utf8_has_one_spelling_in_text_json_and_messages():
    """A file name holding the byte 0xff (read with surrogateescape: U+DCFF) prints as `\\xff`
    in a line, in `--json` (as that text: a lone surrogate is JSON strict parsers refuse) and in
    an error message; a name that merely spells `\\udcff` keeps its backslash."""
    from maildir_backlog.argv import shown
    from maildir_backlog.clock import show
    from maildir_backlog.errors import json_safe, terminal_safe

    name = "bad\udcff\x1b.md"
    assert terminal_safe(name) == "bad\\xff\\x1b.md"
    assert show(name) == "bad\\xff\\x1b.md"
    assert shown(name) == "'bad\\xff\\x1b.md'"
    text = json_safe(json.dumps({"name": name, "note": "é\x85"}, ensure_ascii=False))
    assert json.loads(text) == {"name": "bad\\xff\x1b.md", "note": "é\x85"}
    text.encode("utf-8")  # no lone surrogate left
    assert show("a\\udcff") == "a\\\\udcff"  # the text, not a byte
    assert terminal_safe("\ud800") == "\\ufffd"
