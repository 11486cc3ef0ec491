"""change.py, the one move protocol, checked by generated changes on a real repository.

Every writer of the backlog declares a `Change` and `change.run` carries it out, so one property
covers them all: a change that fails at any step, or whose commit a pre-commit hook refuses,
leaves no trace (SPEC §7.3: the files, the ledger, the index and HEAD as before); one that
succeeds commits exactly the tracked paths its steps name, once, and leaves the user's other
staged work staged and out of the commit.
"""

from __future__ import annotations

import itertools
import os
import typing
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import copy_repo, git
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from maildir_backlog import change
from maildir_backlog.change import Change, Create, Dirs, Remove, Settle, Step, Write
from maildir_backlog.context import open_context
from maildir_backlog.ledger import Settled

NAMES = ("a", "b", "c")
PLACES = ("todo", "done", "doing")  # two tracked piles and one in the shared root
_count = itertools.count()


class Injected(Exception):
    """The failure a generated change meets at its chosen step."""


def _boom() -> None:
    raise Injected("injected")


def boom(path: Path) -> Step:
    """A step that fails: an exclusive create of a name that is always taken (the clone's HEAD)."""
    return Create(path / ".git" / "HEAD", b"", taken=_boom)


def snapshot(path: Path) -> dict:
    """Everything a change may touch: every file under the backlog and the shared root (bytes
    or link target), the ledger, the index and HEAD, and git's view of the work tree."""
    files: dict[str, object] = {}
    common = path / ".git" / "backlog"
    for root in (path / "backlog", common):
        for here, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d not in (".locks", ".ledger")]  # the ledger: compared as entries
            for name in [*names, *dirs]:
                full = Path(here) / name
                if full.is_symlink():
                    files[str(full)] = ("link", os.readlink(full))
                elif full.is_file():
                    files[str(full)] = full.read_bytes()
                else:
                    files[str(full)] = "dir"
    return {
        "files": files,
        "index": git(path, "ls-files", "-s"),
        "head": git(path, "rev-parse", "HEAD"),
        "status": git(path, "status", "--porcelain", "--untracked-files=all"),
    }


@st.composite
def changes(draw: st.DrawFn) -> dict:
    """A starting state (which copies exist, committed) and a change consistent with it."""
    present = draw(st.sets(st.tuples(st.sampled_from(PLACES), st.sampled_from(NAMES)), max_size=4))
    ops = draw(
        st.lists(
            st.tuples(
                st.sampled_from(("create", "write", "remove", "settle", "dirs")),
                st.sampled_from(PLACES),
                st.sampled_from(NAMES),
            ),
            min_size=1,
            max_size=6,
        )
    )
    fail = draw(st.one_of(st.none(), st.integers(0, len(ops)), st.just("commit")))
    return {"present": present, "ops": ops, "fail": fail}


@pytest.fixture
def clone(tmp_path, repo_templates):
    def make() -> Path:
        return copy_repo(repo_templates("maildir-shared"), tmp_path / f"r{next(_count)}").path

    return make


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=changes())
def test_a_change_commits_exactly_its_paths_or_leaves_no_trace(clone, case):
    path = clone()
    ctx = open_context(path)
    backend = ctx.backend
    content: dict[tuple[str, str], bytes] = {}
    for pile, name in sorted(case["present"]):
        data = f"# {name} in {pile}\n".encode()
        target = backend.task_path(pile, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        content[(pile, name)] = data
    (path / "notes.txt").write_text("the user's own staged work\n")
    git(path, "add", "-A", "--", "backlog", "notes.txt")
    if any(pile != "doing" for pile, _name in content):  # (doing/ is in the shared root: untracked)
        git(path, "commit", "-q", "-m", "start", "--", "backlog")  # notes.txt stays staged, uncommitted
    assert "A  notes.txt" in git(path, "status", "--porcelain")

    steps: list[Step] = []
    start = dict(content)
    tracked_of: dict[tuple[str, str], str] = {}
    for n, (op, pile, name) in enumerate(case["ops"]):
        if case["fail"] == n:
            steps.append(boom(path))
        loc = backend.located(name, pile)
        tracked = None if loc.shared else backend.rel(loc.path)
        old = content.get((pile, name))
        if op == "create" and old is None:
            new = f"# {name} created by step {n}\n".encode()
            steps.append(Create(loc.path, new, tracked))
        elif op == "write" and old is not None:
            new = old + f"- step {n}\n".encode()
            steps.append(Write(loc.path, old, new, tracked))
        elif op == "remove" and old is not None:
            new = None
            steps.append(Remove(loc.path, old, tracked))
        elif op == "settle":
            steps.append(Settle(Settled(name, datetime(2026, 1, 1, tzinfo=UTC), "done", "main", "t", n)))
            continue
        elif op == "dirs":
            steps.append(Dirs(path / "backlog" / pile / f"sub{n}"))
            continue
        else:
            continue
        if new is None:
            content.pop((pile, name))
        else:
            content[(pile, name)] = new
        if tracked is not None:
            tracked_of[(pile, name)] = tracked
    # what the commit must hold: the tracked copies whose bytes the change alters in the end
    touched = {rel for key, rel in tracked_of.items() if start.get(key) != content.get(key)}
    if case["fail"] == len(case["ops"]):
        steps.append(boom(path))
    hook = path / ".git" / "hooks" / "pre-commit"
    if case["fail"] == "commit":
        hook.write_text("#!/bin/sh\necho refused by the test >&2\nexit 1\n")
        hook.chmod(0o755)
    ledger_before = {name: backend.settled(name) for name in NAMES}
    before = snapshot(path)
    failing = case["fail"] is not None and (case["fail"] != "commit" or touched)
    work = Change(tuple(steps), "the generated change")

    if failing:
        with pytest.raises(Exception):
            change.run(work, ctx.repo, backend)
        assert snapshot(path) == before
        assert {name: backend.settled(name) for name in NAMES} == ledger_before
        return
    change.run(work, ctx.repo, backend)
    after = snapshot(path)
    for (pile, name), data in content.items():
        assert backend.task_path(pile, name).read_bytes() == data
    if touched:
        assert git(path, "rev-list", "--count", f"{before['head'].strip()}..HEAD").strip() == "1"
        assert set(git(path, "show", "--name-only", "--format=", "HEAD").split()) == touched
    else:
        assert after["head"] == before["head"]
    status = git(path, "status", "--porcelain", "--untracked-files=all")
    assert status.strip() == "A  notes.txt", status  # the user's staged work: still staged, not committed


def test_every_step_type_has_one_executor():
    """`change._step` finds a step's executor by its type: every member of `Step` has one, and
    nothing else does."""
    assert set(typing.get_args(change.Step)) == set(change._EXECUTORS)
