"""A slip gets a suggestion (issue 30): an unknown verb names the nearest verb, and every verb
that takes a slug names the task a missing `-plan` suffix or a typo most likely meant; the error
stays one line, exit 1 (`not-found`) or 2 (usage), and nothing changes."""

from __future__ import annotations

import json

import pytest
from conftest import git


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (("shwo", "x"), "unknown verb 'shwo': did you mean `backlog show`?"),
        (("advanec", "x"), "did you mean `backlog advance`?"),
        (("tkae",), "did you mean `backlog take`?"),
    ],
)
def test_an_unknown_verb_names_the_nearest(shared, argv, said):
    proc = shared.run(*argv)
    assert proc.returncode == 2 and said in proc.stderr and proc.stderr.count("\n") == 1


def test_an_unknown_verb_with_nothing_near_says_where_to_look(shared):
    proc = shared.run("zzzzzz")
    assert proc.returncode == 2 and "did you mean" not in proc.stderr and "backlog --help" in proc.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ("show", "login-form"),
        ("advance", "login-form"),
        ("take", "login-form"),
        ("fail", "login-form", "why"),
        ("cancel", "login-form", "why"),
        ("rescue", "login-form"),
        ("progress", "--slug", "login-form", "note"),
        ("retry", "login-form", "why"),
        ("rename", "login-form", "other-name"),
        ("show", "login-from-plan"),
    ],
)
def test_every_verb_on_a_slug_suggests_the_task_meant(shared, argv):
    shared.ok("add", "login-form")
    before = git(shared.path, "rev-parse", "HEAD")
    proc = shared.run(*argv)
    assert proc.returncode == 1, proc.stderr
    assert "(did you mean login-form-plan?)" in proc.stderr and proc.stderr.count("\n") == 1
    assert git(shared.path, "rev-parse", "HEAD") == before
    data = json.loads(shared.run("--json", *argv).stdout)
    assert data["kind"] == "not-found" and "did you mean login-form-plan?" in data["error"]


def test_no_suggestion_when_nothing_is_near(shared):
    shared.ok("add", "login-form")
    proc = shared.run("show", "zzzz")
    assert proc.returncode == 1 and "did you mean" not in proc.stderr
