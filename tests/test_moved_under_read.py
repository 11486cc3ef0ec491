"""A copy that moves between a verb's lookup and its read never reaches the user as a missing file
(SPEC §6: a refusal in the verb's words, or the verb done; docs/reliability.md, *Reads of a copy
that moves*).

Generated: a verb run in this process, and another command run as its own process at the k-th
time the verb reads a task file (between the verb's lookup and that read): another verb of this
tool, from this worktree or another one, or a user's git moving the piles under it (a reset, a
switch, a removal) in either worktree. The verb runs in the intake worktree, in a worktree on a
branch of its own, or in that worktree after a retry on the intake branch superseded its failed/
copy (the janitor's and a claim's `Model.superseded_here`). The other command runs only where
this process holds none of the tool's locks, as the tool's own verbs would wait for them; git
takes none of them and runs anywhere.
The verb must end done or refused with a `BacklogError` whose message is not an OS error's: a
`FileNotFoundError` or "No such file" out of it is the hole this test looks for.

A second test runs the same search where a remote is declared (SPEC §8): two clones of one bare
repository, the other command in either clone.

`BACKLOG_MOVED_EXAMPLES=400` searches longer (a few minutes).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import forkrun
import pytest
from conftest import ROOT, copy_repo, git
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from maildir_backlog import Backlog, storage
from maildir_backlog.errors import BacklogError

EXAMPLES = int(os.environ.get("BACKLOG_MOVED_EXAMPLES", "16"))

# the state every example starts from: q-plan in todo/, f-plan in flight (claimed here), x-plan in
# failed/, d-plan in done/, and a branch `before` where only q-plan and f-plan were added
STEPS = (
    ("add", "q"),
    ("add", "f"),
    ("take", "f-plan"),
    ("add", "x"),
    ("take", "x-plan"),
    ("fail", "x-plan", "broken"),
    ("add", "d"),
    ("take", "d-plan"),
    ("advance", "d-plan"),
)

VERBS: dict[str, Callable[[Backlog], object]] = {
    "take q": lambda b: b.take("q-plan"),
    "take": lambda b: b.take(),
    "take f": lambda b: b.take("f-plan"),
    "take x": lambda b: b.take("x-plan"),
    "advance f": lambda b: b.advance("f-plan"),
    "progress f": lambda b: b.progress("a note", slug="f-plan"),
    "progress": lambda b: b.progress("a note"),
    "fail f": lambda b: b.fail("f-plan", "a reason"),
    "cancel f": lambda b: b.cancel("f-plan", "a reason"),
    "release f": lambda b: b.release("f-plan"),
    "rescue f": lambda b: b.rescue("f-plan"),
    "retry x": lambda b: b.retry("x-plan", "again"),
    "edit q": lambda b: b.edit("q-plan", {"priority": "2"}),
    "edit f": lambda b: b.edit("f-plan", {"priority": "2"}),
    "edit x": lambda b: b.edit("x-plan", {"priority": "2"}),
    "show q": lambda b: b.show("q-plan"),
    "show f": lambda b: b.show("f-plan"),
    "show x": lambda b: b.show("x-plan"),
    "show d": lambda b: b.show("d-plan"),
    "status": lambda b: b.status(),
    "list": lambda b: b.list(),
    "list failed": lambda b: b.list("failed"),
    "ready": lambda b: b.ready(),
    "rename q": lambda b: b.rename("q-plan", "q3-plan"),
    "rename x": lambda b: b.rename("x-plan", "x3-plan"),
    "maintain": lambda b: b.maintain(),
    "maintain dry": lambda b: b.maintain(dry_run=True),
}

# (where, argv): "main" and "w" run `backlog`; "git" runs git in main, "rm" removes a file there,
# and "git@w", "rm@w" do the same in worktree w
OTHERS: list[tuple[str, tuple[str, ...]]] = [
    ("main", ("take", "q-plan")),
    ("main", ("take",)),
    ("main", ("advance", "f-plan")),
    ("main", ("fail", "f-plan", "boom")),
    ("main", ("release", "f-plan")),
    ("main", ("retry", "x-plan", "again")),
    ("main", ("rename", "q-plan", "q2-plan")),
    ("main", ("rename", "x-plan", "x2-plan")),
    ("main", ("maintain",)),
    ("w", ("take", "q-plan")),
    ("w", ("take",)),
    ("w", ("retry", "x-plan", "again")),
    ("w", ("advance", "f-plan", "--force")),
    ("w", ("fail", "f-plan", "boom", "--force")),
    ("git", ("reset", "-q", "--hard", "HEAD~1")),
    ("git", ("checkout", "-q", "before")),
    ("git", ("checkout", "-q", "HEAD~2", "--", "backlog")),
    ("rm", ("backlog/todo/q-plan.md",)),
    ("rm", ("backlog/failed/x-plan.md",)),
    ("rm", ("backlog/doing/f-plan.md",)),
    # in worktree w (session 25): its own git, a removal there, and its janitor
    ("git@w", ("reset", "-q", "--hard", "HEAD~4")),
    ("git@w", ("checkout", "-q", "before")),
    ("rm@w", ("backlog/failed/x-plan.md",)),
    ("w", ("maintain",)),
    ("main", ("take", "x-plan")),
    # the in-flight copy in the shared root, gone by hand (session 29: what a heal compares a real
    # doing/ directory's older copy with)
    ("rm", (".git/backlog/doing/f-plan.md",)),
    ("rm", ("backlog/doing/n-plan.md",)),
    # a file that appears in the real doing/ directory while the heal empties it (session 29)
    ("touch", ("backlog/doing/late-plan.md",)),
]


def tool(cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    """`backlog ARGV` in `cwd` as its own process (forked from tests/forkrun.py's server), this
    checkout's package on its path."""
    return forkrun.run(cwd, *argv, env=dict(os.environ, PYTHONPATH=str(ROOT)))


class Racer:
    """Runs the other command once, at the k-th read of a task file by this process, when this
    process holds none of the tool's locks (or the command is git's, which takes none of them).
    A tool's command runs in `places[where]`; git and a removal by hand act in `home`, or in
    `places[P]` when written `git@P` or `rm@P`."""

    def __init__(self, places: dict[str, Path], home: Path, other: tuple[str, tuple[str, ...]], at: int) -> None:
        self.places, self.home, self.other, self.at = places, home, other, at
        self.reads = 0
        self.held = 0
        self.answer: subprocess.CompletedProcess | None = None

    def before_read(self) -> None:
        if self.answer is not None:
            return
        where, argv = self.other
        if self.held and where in self.places:
            return  # (it would wait for a lock this process holds)
        self.reads += 1
        if self.reads <= self.at:
            return
        kind, _, there = where.partition("@")
        cwd = self.places[there] if there else self.home
        if kind == "git":
            self.answer = subprocess.run(["git", *argv], cwd=cwd, capture_output=True, text=True)
        elif kind == "rm":
            with contextlib.suppress(FileNotFoundError):
                (cwd / argv[0]).unlink()
            self.answer = subprocess.CompletedProcess(argv, 0, "", "")
        elif kind == "touch":  # a new task file by hand (a user's copy, a checkout writing one)
            (cwd / argv[0]).write_bytes(b"---\npriority: 4\n---\n\n# late\n")
            self.answer = subprocess.CompletedProcess(argv, 0, "", "")
        else:
            self.answer = tool(self.places[where], *argv)


@contextlib.contextmanager
def racing(monkeypatch: pytest.MonkeyPatch, racer: Racer) -> Iterator[None]:
    """The racer waits at every read of a task file: through `storage.read_task_bytes`, and
    through `Path.read_bytes` of a `.md` file in a backlog (session 29: the heal read a real
    doing/ directory's files that way, and a file gone meanwhile was an OS error)."""
    real_read, real_lock, real_bytes = storage.read_task_bytes, storage.file_lock, Path.read_bytes

    def read(*args, **kwargs):  # type: ignore[no-untyped-def]
        racer.before_read()
        return real_read(*args, **kwargs)

    def read_bytes(self: Path) -> bytes:
        if self.suffix == ".md" and "backlog" in self.parts:
            racer.before_read()
        return real_bytes(self)

    @contextlib.contextmanager
    def file_lock(*args, **kwargs):  # type: ignore[no-untyped-def]
        with real_lock(*args, **kwargs):
            racer.held += 1
            try:
                yield
            finally:
                racer.held -= 1

    with monkeypatch.context() as mp:
        mp.setattr(storage, "read_task_bytes", read)
        mp.setattr(Path, "read_bytes", read_bytes)
        mp.setattr(storage, "file_lock", file_lock)
        yield


@pytest.fixture(scope="module")
def template(repo_templates) -> Path:
    return repo_templates("maildir-shared", *STEPS)


def _fresh(base: Path, template: Path, n: int, needs_w: bool, stale: bool, real: bool = False) -> Path:
    main = copy_repo(template, base / f"r{n}" / "main").path
    git(main, "branch", "before", "HEAD~7")  # (q-plan and f-plan added, f-plan not yet claimed)
    if needs_w:
        git(main, "worktree", "add", "-q", "-b", "w", str(main.parent / "w"))
    if stale:  # x-plan retried on the intake branch: w's failed/ copy is superseded (SPEC §5 `retry`)
        done = tool(main, "retry", "x-plan", "again")
        assert done.returncode == 0, done.stderr
    if real:  # main's doing/ a real directory (a checkout of an older layout): the heal reads it first
        live = (main / "backlog" / "doing" / "f-plan.md").read_bytes()
        (main / "backlog" / "doing").unlink()
        (main / "backlog" / "doing").mkdir()
        (main / "backlog" / "doing" / "f-plan.md").write_bytes(live[: live.rindex(b"\n- ") + 1])  # an older copy
        (main / "backlog" / "doing" / "n-plan.md").write_bytes(b"---\npriority: 3\n---\n\n# n\n")
    return main


COUNTER = [0]


def check(
    base: Path, template: Path, monkeypatch: pytest.MonkeyPatch, verb: str, other: int, at: int, place: str = "main"
) -> None:
    """`verb` run in worktree `place` ("main"; "w": a worktree on a branch of its own; "w-stale":
    w after the intake branch retried x-plan, so that w's failed/ copy is a superseded one;
    "main-real": main with a real doing/ directory, holding an older copy of f-plan and a task
    n-plan, where its symlink belongs, which the verb's heal empties first), with `OTHERS[other]`
    run at its `at`-th read of a task file."""
    COUNTER[0] += 1
    needs_w = place.startswith("w") or OTHERS[other][0].endswith("w")
    main = _fresh(base, template, COUNTER[0], needs_w, place == "w-stale", place == "main-real")
    places = {"main": main, "main-real": main, "w": main.parent / "w", "w-stale": main.parent / "w"}
    racer = Racer(places, main, OTHERS[other], at)
    verb_racing(monkeypatch, racer, verb, places[place], f"{verb} in {place} with {OTHERS[other]} at read {at}")


def verb_racing(monkeypatch: pytest.MonkeyPatch, racer: Racer, verb: str, cwd: Path, case: str) -> None:
    """`verb` run in `cwd` while `racer` waits for its read: done, or refused in the verb's words."""
    with racing(monkeypatch, racer):
        try:
            VERBS[verb](Backlog(cwd))
        except BacklogError as exc:
            assert "No such file" not in exc.message and "Errno" not in exc.message, (case, exc.message)
        except OSError as exc:  # the hole: a copy gone between the lookup and the read
            raise AssertionError(f"{case}: {exc!r}") from exc


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
# each hole this test found (session 24), kept: the read it failed at, and where it now looks again
@example(verb="edit q", other=0, at=0, place="main")  # `edit`'s check (`lifecycle.locked_change`)
@example(verb="rescue f", other=2, at=0, place="main")  # `rescue`'s check (`lifecycle.locked_change`)
@example(verb="show f", other=3, at=0, place="main")  # `show` (`Model.shown`)
@example(verb="show x", other=5, at=0, place="main")  # `show` of a failed/ copy retried meanwhile
@example(verb="take f", other=19, at=0, place="main")  # `take SLUG`'s budget check (`Model.timed_out_claim`)
@example(verb="rename x", other=15, at=0, place="main")  # `rename` (`Model.named`), a user's switch
@example(verb="edit q", other=17, at=2, place="w")  # `edit`'s look at the intake worktree's copy
@example(verb="edit q", other=17, at=4, place="w")  # a landing's read in the intake worktree (`moves.landing`)
# reached since session 25 (found by the load loop and by reading in session 24): a failed/ copy a
# retry superseded, gone before the janitor or a claim reads it (`Model.superseded_here`)
# the heal of a real doing/ directory (session 29): its older copy of f-plan, or the in-flight
# copy it is compared with, gone before it is read
@example(verb="status", other=19, at=0, place="main-real")
@example(verb="take q", other=25, at=1, place="main-real")
# ... and a file that came into that directory before its removal: "Directory not empty"
@example(verb="list failed", other=27, at=1, place="main-real")
@example(verb="maintain", other=22, at=3, place="w-stale")
@example(verb="take", other=20, at=3, place="w-stale")
@given(
    verb=st.sampled_from(sorted(VERBS)),
    other=st.integers(0, len(OTHERS) - 1),
    at=st.integers(0, 3),
    place=st.sampled_from(("main", "w", "w-stale", "main-real")),
)
def test_a_copy_moved_between_lookup_and_read_is_never_a_missing_file(
    tmp_path, template, monkeypatch, verb, other, at, place
) -> None:
    check(tmp_path, template, monkeypatch, verb, other, at, place)


# -- claims across clones (SPEC §8): the same search where a remote is declared ------------------
# Clone `a` claimed f-plan and failed x-plan (both published to the remote); q-plan is queued.
# The verb runs in `a`; the other command in `a`, or in clone `b` (cloned after those steps).
REMOTE_VERBS = (
    "take q",
    "take",
    "take f",
    "advance f",
    "progress f",
    "fail f",
    "release f",
    "retry x",
    "edit q",
    "show q",
    "show f",
    "show x",
    "status",
    "ready",
    "maintain",
)
REMOTE_OTHERS: list[tuple[str, tuple[str, ...]]] = [
    ("a", ("take", "q-plan")),
    ("a", ("advance", "f-plan")),
    ("a", ("fail", "f-plan", "boom")),
    ("a", ("retry", "x-plan", "again")),
    ("b", ("take", "q-plan")),
    ("b", ("retry", "x-plan", "again")),
    ("b", ("take", "f-plan")),
    ("b", ("maintain",)),
    ("rm", ("backlog/todo/q-plan.md",)),
    ("rm", ("backlog/doing/f-plan.md",)),
    ("rm", ("backlog/failed/x-plan.md",)),
]


def _world(base: Path, n: int) -> tuple[Path, Path]:
    from test_remote import make_world

    world = make_world(base / f"c{n}", ["q-plan", "f-plan", "x-plan"])
    a = world.clone("a").path
    for argv in (("take", "f-plan"), ("take", "x-plan"), ("fail", "x-plan", "broken")):
        done = tool(a, *argv)
        assert done.returncode == 0, (argv, done.stderr)
    return a, world.clone("b").path


@settings(max_examples=max(2, EXAMPLES // 4), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    verb=st.sampled_from(REMOTE_VERBS),
    other=st.integers(0, len(REMOTE_OTHERS) - 1),
    at=st.integers(0, 3),
)
def test_across_clones_a_copy_moved_between_lookup_and_read_is_never_a_missing_file(
    tmp_path, monkeypatch, verb, other, at
) -> None:
    check_remote(tmp_path, monkeypatch, verb, other, at)


def check_remote(base: Path, monkeypatch: pytest.MonkeyPatch, verb: str, other: int, at: int) -> None:
    COUNTER[0] += 1
    a, b = _world(base, COUNTER[0])
    racer = Racer({"a": a, "b": b}, a, REMOTE_OTHERS[other], at)
    verb_racing(monkeypatch, racer, verb, a, f"{verb} with {REMOTE_OTHERS[other]} at read {at} (a remote)")
