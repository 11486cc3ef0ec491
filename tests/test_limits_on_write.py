"""Limits hold on write as on read (SPEC §7.12, issue 28): an append that would take a task past
the size limit (`limits.TASK_BYTES`) is refused with exit 2, nothing written (`progress`, a
claim, `rescue`, `retry`); a task already past it can still leave flight (advanced, cancelled,
failed, timed out by the janitor), its log kept whole."""

from __future__ import annotations

import json
import os

import pytest
from conftest import backdate, git, task_lock

from maildir_backlog import limits

TS = "2026-01-01T00:00:00Z"


def path_of(repo, slug: str, pile: str = "doing"):
    return (repo / f"backlog/{pile}/{slug}.md").resolve()


def swell(repo, slug: str, size: int, pile: str = "doing") -> bytes:
    """Grow the in-flight task `slug` to at least `size` bytes with progress lines, as an older
    tool (which had no limit) would have left it; under the task's lock, by an atomic rename;
    committed where the pile is tracked. Returns the new bytes."""
    path = path_of(repo, slug, pile)
    with task_lock(repo.path, slug):
        data = path.read_bytes()
        line = f"- {TS} progress | {'n' * 1000}\n".encode()
        data += line * ((size - len(data)) // len(line) + 1)
        tmp = path.parent.parent / f".swell-{os.getpid()}"
        tmp.write_bytes(data)
        os.replace(tmp, path)
    if not (repo / f"backlog/{pile}").is_symlink():
        git(repo.path, "commit", "-q", "-m", f"swell {slug}", "--", f"backlog/{pile}/{slug}.md")
    return data


def body(size: int) -> str:
    return "b" * size


ROOM = limits.TASK_BYTES - limits.CLAIM_ROOM


# -- an append that would pass the limit is refused, nothing written --------------------------------
def test_progress_that_would_pass_the_limit_is_refused(anybk):
    anybk.ok("add", "big", "--body-file", "-", input=body(ROOM - 500))
    anybk.ok("take", "big-plan")
    path = path_of(anybk, "big-plan")
    before, head = path.read_bytes(), anybk.git("rev-parse", "HEAD")
    note = "x" * (limits.TASK_BYTES - len(before))  # the line's own words take it past
    proc = anybk.run("--json", "progress", note, "--slug", "big-plan")
    assert proc.returncode == 2, proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert "too large for a task file" in error and f"{limits.TASK_BYTES:,}" in error, error
    assert "big-plan" in error
    assert path.read_bytes() == before and anybk.git("rev-parse", "HEAD") == head
    anybk.ok("progress", "a short note", "--slug", "big-plan")  # within the limit: written
    assert path.read_bytes().endswith(b"progress | a short note\n")


def test_a_claim_whose_line_would_pass_the_limit_is_refused(shared):
    """A todo file (committed by hand, not through add) one line short of the limit: take SLUG is
    exit 2 and claims nothing; auto-pick passes over it to the next task."""
    todo = shared / "backlog/todo/full-plan.md"
    text = "# full\n\n" + "f" * (limits.TASK_BYTES - 60) + "\n\n---\n\n"
    todo.write_text(text)
    shared.git("add", str(todo))
    shared.git("commit", "-q", "-m", "a full task")
    shared.ok("add", "small", "--priority", "5000")
    head = shared.git("rev-parse", "HEAD")
    proc = shared.run("take", "full-plan")
    assert proc.returncode == 2 and "too large for a task file" in proc.stderr, proc.stderr
    assert shared.git("rev-parse", "HEAD") == head and todo.read_text() == text
    assert not list((shared / "backlog/doing").glob("*.md"))
    assert json.loads(shared.ok("--json", "take"))["slug"] == "small-plan"  # not stuck behind it


def test_retry_whose_line_would_pass_the_limit_is_refused(anybk):
    anybk.ok("add", "big", "--body-file", "-", input=body(ROOM - 500))
    anybk.ok("take", "big-plan")
    size = len(path_of(anybk, "big-plan").read_bytes())
    reason = "r" * (limits.TASK_BYTES - 60 - size - len(f"- {TS} failed | \n"))
    anybk.ok("fail", "big-plan", reason)
    failed = anybk / "backlog/failed/big-plan.md"
    before, head = failed.read_bytes(), anybk.git("rev-parse", "HEAD")
    assert limits.TASK_BYTES - 100 < len(before) <= limits.TASK_BYTES
    proc = anybk.run("retry", "big-plan", "one more go at this, with a reason long enough to pass the limit")
    assert proc.returncode == 2 and "too large for a task file" in proc.stderr, proc.stderr
    assert failed.read_bytes() == before and anybk.git("rev-parse", "HEAD") == head
    assert not (anybk / "backlog/todo/big-plan.md").exists()


def test_add_keeps_room_for_the_claim(shared):
    """What add accepts, take accepts: add keeps CLAIM_ROOM of the limit free."""
    proc = shared.run("add", "huge", "--body-file", "-", input=body(limits.TASK_BYTES - 100))
    assert proc.returncode == 2 and "too large for a task file" in proc.stderr, proc.stderr
    shared.ok("add", "big", "--body-file", "-", input=body(ROOM - 100))
    assert json.loads(shared.ok("--json", "take"))["slug"] == "big-plan"


# -- a task already past the limit still leaves flight, its log kept ------------------------------
LEAVE = {
    "advance": (("advance", "old-plan"), "done", b" advanced to=done\n"),
    "cancel": (("cancel", "old-plan", "not wanted"), "done", b" cancelled | not wanted\n"),
    "fail": (("fail", "old-plan", "too big to finish"), "failed", b" failed | too big to finish\n"),
}


@pytest.mark.parametrize("how", sorted(LEAVE))
def test_a_task_past_the_limit_still_leaves_flight(anybk, how):
    anybk.ok("add", "old")
    anybk.ok("take", "old-plan")
    data = swell(anybk, "old-plan", limits.TASK_BYTES + 200_000)
    proc = anybk.run("progress", "more", "--slug", "old-plan")  # adding to it: refused
    assert proc.returncode == 2 and "too large for a task file" in proc.stderr, proc.stderr
    assert path_of(anybk, "old-plan").read_bytes() == data
    assert json.loads(anybk.ok("--json", "status"))["counts"]["doing"] == 1  # still read, still shown
    args, pile, line = LEAVE[how]
    anybk.ok(*args)
    out = (anybk / f"backlog/{pile}/old-plan.md").read_bytes()
    assert out.startswith(data) and out.endswith(line), out[len(data) :]  # every byte of the log kept
    assert not (anybk / "backlog/doing/old-plan.md").exists()


@pytest.mark.parametrize("janitor", ["maintain", "take"])
def test_a_task_past_the_limit_times_out(anybk, janitor):
    anybk.ok("add", "old", "--timeout", "1h")
    anybk.ok("take", "old-plan")
    backdate(anybk.path, "old-plan", seconds=7200)
    data = swell(anybk, "old-plan", limits.TASK_BYTES + 200_000)
    proc = anybk.run(janitor)
    assert proc.returncode == 0, proc.stderr
    out = (anybk / "backlog/failed/old-plan.md").read_bytes()
    assert out.startswith(data) and b" failed by=tester | timeout: budget=1h" in out[len(data) :]


def test_a_task_far_past_the_limit_is_refused_even_in_flight(shared):
    """The bound that lets a task leave flight is a bound too (limits.LEAVING_BYTES)."""
    shared.ok("add", "huge")
    shared.ok("take", "huge-plan")
    swell(shared, "huge-plan", limits.LEAVING_BYTES + 1000)
    proc = shared.run("advance", "huge-plan")
    assert proc.returncode == 1 and "too large for a task file" in proc.stderr, proc.stderr
