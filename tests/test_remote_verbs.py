"""A declared remote this clone has not configured (SPEC §3): a fresh clone whose remote has
another name. The read-only verbs answer from local state with one warning, the verbs that need
the remote exit 2 with the same words.

The world of tests/test_remote.py: a bare repository seeded with a maildir-shared backlog that
declares `remote: origin`, served over `file://`, and clones of it standing for machines. The
commands are the real `backlog` in processes of their own.
"""

from __future__ import annotations

import json
import subprocess

from conftest import Repo, git
from test_json_contract import validator
from test_remote import make_world, run


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


READ_ONLY = (("status",), ("ready",), ("list",), ("where",), ("prime",))
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
