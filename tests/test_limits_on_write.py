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


# -- numbers are bounded: one bad task is skipped, every other stays claimable ---------------------
HUGE = "9" * 10_000
BAD = {
    "long-digits": f"---\ntimeout: {HUGE}d\n---\n# t\n",
    "long-timeout": "---\ntimeout: 99999999999999999999999d\n---\n# t\n",
    "float-priority": "---\npriority: 1e400\n---\n# t\n",
    "inf-priority": "---\npriority: 1.0e+400\n---\n# t\n",
    "long-priority": f"---\npriority: {HUGE}\n---\n# t\n",
    "pile-timeout": f"---\ntimeout.doing: {HUGE}h\n---\n# t\n",
}


def commit_tasks(repo, tasks: dict[str, str]) -> None:
    for slug, text in tasks.items():
        (repo / f"backlog/todo/{slug}.md").write_text(text)
    repo.git("add", "backlog/todo")
    repo.git("commit", "-q", "-m", "tasks")


@pytest.mark.parametrize("where", ["here", "intake"])
def test_huge_numbers_in_one_task_skip_that_task_only(shared, where):
    view = shared.worktree("a1") if where == "intake" else shared
    commit_tasks(shared, {**BAD, "good-plan": "---\npriority: 5\n---\n# good\n"})
    for _ in range(2):  # the second time from the parse caches
        proc = view.run("--json", "ready")
        assert proc.returncode == 0, proc.stderr
        assert [t["slug"] for t in json.loads(proc.stdout)["tasks"]] == ["good-plan"]
        for slug in BAD:
            assert f"{slug}.md" in proc.stderr, (slug, proc.stderr)
        assert "Traceback" not in proc.stderr and len(proc.stderr) < 20_000  # one short line each
    states = {t["slug"]: t["state"] for t in json.loads(view.ok("--json", "list"))["tasks"]}
    assert states == {**dict.fromkeys(BAD, "invalid"), "good-plan": "ready"}
    assert json.loads(view.ok("--json", "status"))["counts"]["todo"] == len(BAD) + 1
    assert json.loads(view.ok("--json", "take"))["slug"] == "good-plan"
    for slug in BAD:
        proc = view.run("take", slug)
        assert proc.returncode == 2 and slug in proc.stderr and len(proc.stderr) < 1000, proc.stderr


def test_huge_numbers_in_the_defaults_are_a_warning_naming_the_line(shared):
    agents = shared / "backlog/AGENTS.md"
    text = agents.read_text()
    text = text.replace("- `timeout: 7d`", f"- `timeout: {HUGE}d`").replace(
        "- `priority: 999`", f"- `priority: {HUGE}`"
    )
    agents.write_text(text)
    shared.ok("add", "a")
    proc = shared.run("--json", "ready")
    assert proc.returncode == 0 and [t["slug"] for t in json.loads(proc.stdout)["tasks"]] == ["a-plan"]
    lines = [n for n, line in enumerate(text.splitlines(), 1) if HUGE in line]
    for n in lines:
        assert f"backlog/AGENTS.md:{n}" in proc.stderr, proc.stderr
    assert json.loads(shared.ok("--json", "take"))["budget_seconds"] == 7 * 86400  # the house default


def test_a_huge_budget_on_a_log_line_falls_back_to_the_rule(shared):
    shared.ok("add", "a")
    shared.ok("take", "a-plan")
    path = path_of(shared, "a-plan")
    path.write_bytes(path.read_bytes().replace(b"budget=7d", f"budget={HUGE}d".encode()))
    status = json.loads(shared.ok("--json", "status"))
    assert [(t["slug"], t["budget"]) for t in status["in_flight"]] == [("a-plan", "7d (default)")]
    shared.ok("progress", "still going", "--slug", "a-plan")


def test_retry_set_a_huge_priority_is_exit_2(shared):
    shared.ok("add", "a")
    shared.ok("take", "a-plan")
    shared.ok("fail", "a-plan", "broke")
    proc = shared.run("retry", "a-plan", "again", "--set", f"priority={HUGE}")
    assert proc.returncode == 2 and "priority" in proc.stderr and len(proc.stderr) < 1000, proc.stderr
    proc = shared.run("retry", "a-plan", "again", "--set", f"timeout={HUGE}d")
    assert proc.returncode == 2 and "timeout" in proc.stderr and len(proc.stderr) < 1000, proc.stderr


def test_the_parse_cache_never_turns_a_parsers_error_into_a_summary(tmp_path):
    """The cache looked for its misses under `suppress(ValueError)`, so a parser's ValueError
    (a 10,000-digit number given to `int()`) ended the loop and left a None summary, which
    crashed the ranking. Only the search for misses is guarded now: an error goes on up."""
    from maildir_backlog import cache, header

    pile = tmp_path / "todo"
    pile.mkdir()
    for slug in ("a", "b"):
        (pile / f"{slug}.md").write_text(f"# {slug}\n")

    def parse(slug: str, path: str) -> header.Parsed:
        if slug == "a":
            raise ValueError("a parser's error")
        return header.Parsed(header.Summary(5, (), None), None)

    with pytest.raises(ValueError, match="a parser's error"):
        cache.summaries(tmp_path / "todo.cache", pile, ["a.md", "b.md"], parse)
    assert cache.summaries(tmp_path / "todo.cache", pile, ["b.md"], parse) == {"b": header.Summary(5, (), None)}
