"""`backlog maintain` (SPEC §6): one test per bucket, all eight at once, dry run, strict,
idempotence, crash repair at every crash point, and janitors racing workers."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import forkrun
import pytest
from conftest import BACKENDS, ROOT, Repo, backdate, copy_repo, git, snapshot, task_lock
from freezegun import freeze_time

from maildir_backlog import context
from maildir_backlog.commands import claim
from maildir_backlog.commands import maintain as janitor
from maildir_backlog.commands.maintain import BUCKETS, find_cycles

T0 = datetime(2026, 5, 16, 14, 22, 0, tzinfo=timezone.utc)
# A `timeout: 1s` task claimed by a real `backlog take` is made to time out by backdating its claim
# line (conftest.backdate), never by sleeping past the budget: the tests do not depend on the clock.
TS = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")  # recent: hand-written lines are not timed out


# -- helpers -------------------------------------------------------------------------------
def common(repo: Repo) -> Path:
    return Path(git(repo.path, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())


def shared_root(repo: Repo) -> Path:
    return common(repo) / "backlog"


def is_shared(repo: Repo) -> bool:
    return "maildir-shared" in (repo / "backlog/AGENTS.md").read_text()


def report(repo: Repo, *args: str) -> dict:
    """`backlog --json maintain ARGS` → the JSON object (exit code under "code")."""
    proc = repo.run("--json", "maintain", *args)
    assert "Traceback" not in proc.stderr, proc.stderr
    data = json.loads(proc.stdout)
    data["code"] = proc.returncode
    return data


def lines(repo: Repo, *args: str) -> list[str]:
    proc = repo.run("maintain", *args)
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout.splitlines()


def found(data: dict, bucket: str) -> list[str]:
    return [f"{f['path']} ({f['detail']})" for f in data["buckets"][bucket]]


def quiet(repo: Repo) -> None:
    """Nothing to report: only the OK line."""
    out = lines(repo)
    assert len(out) == 1 and out[0].startswith("OK: "), out


def write_task(repo: Repo, pile: str, slug: str, text: str, commit: bool = True) -> Path:
    path = repo / f"backlog/{pile}/{slug}.md"
    path.write_text(text)
    if commit and not path.parent.is_symlink():
        git(repo.path, "add", str(path))
        git(repo.path, "commit", "-qm", f"task {slug}")
    return path


def task_text(slug: str, deps: list[str] | None = None, **meta: str) -> str:
    head = "".join(f"{k}: {v}\n" for k, v in meta.items())
    if deps:
        head += "dependencies:\n" + "".join(f"  {d}: needed\n" for d in deps)
    front = f"---\n{head}---\n\n" if head else ""
    return f"{front}# {slug}\n\n---\n"


def append(path: Path, line: str) -> None:
    with open(path, "a") as handle:
        handle.write(line + "\n")


def log_kinds(path: Path) -> list[str]:
    return [l.split()[2] for l in path.read_text().splitlines() if l.startswith("- 20")]


# -- a clean backlog -----------------------------------------------------------------------
def test_clean_backlog_prints_only_ok(anybk):
    anybk.ok("add", "a")
    anybk.ok("add", "b", "--depends", "a-plan")
    anybk.ok("take", "a-plan")
    proc = anybk.run("maintain", "--strict")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "OK: 1 todo, 1 in flight\n"
    assert proc.stderr == ""


def test_json_shape(shared):
    shared.ok("add", "a")
    data = report(shared)
    assert list(data["buckets"]) == list(BUCKETS)
    assert all(v == [] for v in data["buckets"].values())
    assert data["ok"] == {"todo": 1, "in_flight": 0}
    assert data["fixed"] == 0 and data["dry_run"] is False and data["code"] == 0


# -- 1. advanced but not moved -------------------------------------------------------------
@pytest.mark.parametrize(
    "line, pile, outcome, message",
    [
        (
            f"- {TS} advanced to=done | PR=https://example.invalid/pull/7",
            "done",
            "done",
            "advance(x-plan) → done PR=https://example.invalid/pull/7",
        ),
        (f"- {TS} cancelled | superseded by y", "done", "cancelled", "cancel(x-plan) superseded by y"),
        (f"- {TS} failed | cannot be done", "failed", "failed", "fail(x-plan) cannot be done"),
    ],
    ids=["done", "cancelled", "failed"],  # not the lines: they hold the time of collection
)
@pytest.mark.parametrize("backend", BACKENDS)
def test_advanced_but_not_moved(tmp_path, repo_templates, backend, line, pile, outcome, message):
    anybk = copy_repo(repo_templates(backend, ("add", "x"), ("take", "x-plan")), tmp_path / "repo")
    doing = anybk / "backlog/doing/x-plan.md"
    append(doing, line)
    append(doing, f"- {TS} progress | a note after the end is ignored")
    content = doing.read_bytes()
    data = report(anybk)
    assert found(data, "ADVANCED BUT NOT MOVED") == [
        f"backlog/doing/x-plan.md (log says {'advanced to=done' if outcome == 'done' else outcome} at {TS}:"
        f" moved to {pile}/)"
    ]
    assert data["fixed"] == 1 and data["code"] == 0
    assert not doing.exists()
    assert (anybk / f"backlog/{pile}/x-plan.md").read_bytes() == content  # data unchanged
    assert anybk.head_message() == message
    assert git(anybk.path, "status", "--porcelain") == ""
    if is_shared(anybk):
        entry = (shared_root(anybk) / ".ledger/x-plan").read_text()
        assert f" {outcome} gen=0 branch=main claimer=tester" in entry
    quiet(anybk)


def test_a_rescue_after_the_terminal_line_keeps_it_in_flight(shared):
    shared.ok("add", "x")
    shared.ok("take", "x-plan")
    doing = shared / "backlog/doing/x-plan.md"
    append(doing, f"- {TS} failed | oops")
    append(doing, f"- {TS} rescued claimer=other branch=main")
    quiet(shared)
    assert doing.exists()


# -- 2. timed out --------------------------------------------------------------------------
def claim_at(repo: Repo, slug: str, when: datetime = T0, **meta: str) -> None:
    write_task(repo, "todo", slug, task_text(slug, **meta))
    with freeze_time(when):
        claim.take(repo.context(), slug)


def test_timed_out(anybk):
    claim_at(anybk, "old", timeout="1h")
    claim_at(anybk, "lazy")  # default budget 7d
    claim_at(anybk, "fresh", timeout="1d")
    with freeze_time(T0 + timedelta(days=7, seconds=1)):
        dry = janitor.maintain(context.open_context(anybk.path, heal=False), dry_run=True)
        assert [l for l in dry.lines if l.startswith("TIMED OUT")] == [
            "TIMED OUT: backlog/doing/fresh.md (would fail: timeout: budget=1d, claimed=2026-05-16T14:22:00Z,"
            " claimer=tester, age=7d)",
            "TIMED OUT: backlog/doing/lazy.md (would fail: timeout: budget=7d (default),"
            " claimed=2026-05-16T14:22:00Z, claimer=tester, age=7d)",
            "TIMED OUT: backlog/doing/old.md (would fail: timeout: budget=1h, claimed=2026-05-16T14:22:00Z,"
            " claimer=tester, age=7d)",
        ]  # the dry run says how old each is: what the first take would fail
        assert (anybk / "backlog/doing/old.md").exists()
    with freeze_time(T0 + timedelta(hours=1, seconds=1)):
        result = janitor.maintain(anybk.context())
    assert list(result.lines) == [
        "TIMED OUT: backlog/doing/old.md (failed: timeout: budget=1h, claimed=2026-05-16T14:22:00Z, claimer=tester)",
        "OK: 0 todo, 2 in flight",
    ]
    assert result.code == 0 and result.data["fixed"] == 1
    failed = anybk / "backlog/failed/old.md"
    assert log_kinds(failed) == ["advanced", "failed"]
    assert "failed by=tester | timeout: budget=1h, claimed=2026-05-16T14:22:00Z, claimer=tester" in failed.read_text()
    assert anybk.head_message().startswith("fail(old) timeout: budget=1h")
    assert git(anybk.path, "status", "--porcelain") == ""
    with freeze_time(T0 + timedelta(hours=1, seconds=2)):
        assert list(janitor.maintain(anybk.context()).lines) == ["OK: 0 todo, 2 in flight"]


def test_timed_out_task_with_a_stale_copy_on_this_branch(shared):
    """The janitor of a branch that still holds its committed todo/ copy fails the task all the same."""
    write_task(shared, "todo", "x", task_text("x", timeout="1h"))
    other = shared.worktree("wa")  # wa's todo/ holds x too
    other.ok("where")  # the new worktree's layout self-heal
    with freeze_time(T0):
        claim.take(shared.context(), "x")
    with freeze_time(T0 + timedelta(minutes=30)):
        assert list(janitor.maintain(other.context()).lines) == [
            "OK: 1 todo, 1 in flight"
        ]  # a stale copy is no duplicate
    with freeze_time(T0 + timedelta(hours=2)):
        result = janitor.maintain(other.context())
    # the stale todo/ copy beside this branch's new failed/ copy is removed with it: one copy per branch
    assert [l.split(" (")[0] for l in result.lines[:-1]] == [
        "TIMED OUT: backlog/doing/x.md",
        "DUPLICATE: backlog/todo/x.md",
    ]
    assert log_kinds(other / "backlog/failed/x.md") == ["advanced", "failed"]
    assert not (other / "backlog/todo/x.md").exists()
    assert git(other.path, "status", "--porcelain") == ""
    with freeze_time(T0 + timedelta(hours=2)):
        assert list(janitor.maintain(other.context()).lines) == ["OK: 0 todo, 0 in flight"]


# -- 3. duplicates -------------------------------------------------------------------------
def test_duplicate_contained_copy_is_removed(anybk):
    """A crash mid-claim: todo/ still holds the original while doing/ holds it plus the claim."""
    anybk.ok("add", "x")
    original = (anybk / "backlog/todo/x-plan.md").read_bytes()
    anybk.ok("take", "x-plan")
    claimed = (anybk / "backlog/doing/x-plan.md").read_bytes()
    write_task(anybk, "todo", "x-plan", original.decode())
    data = report(anybk)
    assert found(data, "DUPLICATE") == ["backlog/todo/x-plan.md (an older copy of backlog/doing/x-plan.md: removed)"]
    assert not (anybk / "backlog/todo/x-plan.md").exists()
    assert (anybk / "backlog/doing/x-plan.md").read_bytes() == claimed
    assert anybk.head_message() == "maintain(x-plan) remove duplicate todo/ copy"
    assert git(anybk.path, "status", "--porcelain") == ""
    quiet(anybk)


def test_a_duplicate_whose_task_a_worker_holds_is_left_to_it(shared):
    """--dry-run takes no wait on the task's lock: a worker holding it is busy with the task, not
    crashed; the janitor leaves it alone instead of reporting a failed repair."""
    shared.ok("add", "x")
    original = (shared / "backlog/todo/x-plan.md").read_text()
    shared.ok("take", "x-plan")
    write_task(shared, "todo", "x-plan", original)
    with task_lock(shared.path, "x-plan"):
        data = report(shared, "--dry-run")
    assert data["code"] == 0 and not any(f["error"] for f in data["buckets"]["DUPLICATE"]), data


def test_duplicate_between_two_in_flight_piles(repo):
    """A crash mid-hop between shared piles: the later copy holds the earlier one plus the hop."""
    repo.ok("setup", "--backend=maildir-shared", "--pipeline", "todo doing reviewing done")
    repo.ok("add", "x")
    repo.ok("take", "x-plan")
    doing = repo / "backlog/doing/x-plan.md"
    hop = doing.read_text() + f"- {TS} advanced to=reviewing\n"
    (repo / "backlog/reviewing/x-plan.md").write_text(hop)
    head = git(repo.path, "rev-parse", "HEAD")
    assert (
        lines(repo)[0] == "DUPLICATE: backlog/doing/x-plan.md (an older copy of backlog/reviewing/x-plan.md: removed)"
    )
    assert not doing.exists() and (repo / "backlog/reviewing/x-plan.md").read_text() == hop
    assert git(repo.path, "rev-parse", "HEAD") == head  # shared piles only: nothing to commit
    quiet(repo)


def test_duplicate_kept_copy_with_a_terminal_log_is_moved_on(shared):
    shared.ok("add", "x")
    original = (shared / "backlog/todo/x-plan.md").read_text()
    shared.ok("take", "x-plan")
    append(shared / "backlog/doing/x-plan.md", f"- {TS} advanced to=done")
    write_task(shared, "todo", "x-plan", original)
    out = lines(shared)
    assert (
        out[0] == f"ADVANCED BUT NOT MOVED: backlog/doing/x-plan.md (log says advanced to=done at {TS}: moved to done/)"
    )
    assert out[1].startswith("DUPLICATE: backlog/todo/x-plan.md (an older copy")
    assert [p.name for p in (shared / "backlog/done").glob("*.md")] == ["x-plan.md"]
    assert not (shared / "backlog/todo/x-plan.md").exists()
    assert git(shared.path, "status", "--porcelain") == ""
    quiet(shared)


def test_duplicate_not_provable_is_only_reported(anybk):
    anybk.ok("add", "x")
    anybk.ok("take", "x-plan")
    write_task(anybk, "done", "x-plan", "# x, another story\n\n---\n")
    before = snapshot(anybk)
    data = report(anybk, "--strict")
    assert found(data, "DUPLICATE") == [
        "backlog/doing/x-plan.md (in doing/, done/ and no copy contains the others: keep one by hand)"
    ]
    assert data["code"] == 0, "bucket 3 is not advisory"
    assert data["fixed"] == 0
    assert snapshot(anybk) == before


def test_retry_set_edit_is_not_a_provable_duplicate(gitbk):
    gitbk.ok("add", "x")
    gitbk.ok("take", "x-plan")
    gitbk.ok("fail", "x-plan", "nope")
    failed = (gitbk / "backlog/failed/x-plan.md").read_text()
    gitbk.ok("retry", "x-plan", "again", "--set", "priority=1")
    write_task(gitbk, "failed", "x-plan", failed)  # the failed copy came back (a merge)
    out = lines(gitbk)
    assert out[0].startswith("DUPLICATE: backlog/todo/x-plan.md (in todo/, failed/ and no copy contains")


def test_uncommitted_deletion_of_a_claimed_todo_file_is_committed(shared):
    """The crash window of a claim in maildir-shared: the todo file is gone from the work tree,
    its deletion never committed, the task in flight."""
    shared.ok("add", "x")
    original = (shared / "backlog/todo/x-plan.md").read_bytes()
    shared.ok("take", "x-plan")
    write_task(shared, "todo", "x-plan", original.decode())
    (shared / "backlog/todo/x-plan.md").unlink()
    assert "backlog/todo/x-plan.md" in git(shared.path, "ls-files", "backlog/todo")
    out = lines(shared)
    assert out[0] == (
        "DUPLICATE: backlog/todo/x-plan.md (deleted but never committed while"
        " backlog/doing/x-plan.md holds the task: deletion committed)"
    )
    assert "backlog/todo/x-plan.md" not in git(shared.path, "ls-files", "backlog/todo")
    assert git(shared.path, "status", "--porcelain") == ""
    quiet(shared)


def test_uncommitted_deletion_of_another_file_is_left_alone(shared):
    shared.ok("add", "x")
    shared.ok("take", "x-plan")
    write_task(shared, "todo", "x-plan", "# quite different\n")
    (shared / "backlog/todo/x-plan.md").unlink()
    out = lines(shared)
    assert out[0].startswith(
        "DUPLICATE: backlog/todo/x-plan.md (deleted but not committed, and it is not an older copy"
    )
    assert " D backlog/todo/x-plan.md" in git(shared.path, "status", "--porcelain")


def test_stale_branch_copies_are_not_duplicates(shared):
    shared.ok("add", "x")
    other = shared.worktree("wa")
    other.ok("where")  # the new worktree's layout self-heal
    shared.ok("take", "x-plan")
    assert lines(other) == ["OK: 1 todo, 1 in flight"]
    (other / "backlog/todo/x-plan.md").unlink()  # the user's own business on that branch
    assert lines(other) == ["OK: 0 todo, 1 in flight"]
    assert " D backlog/todo/x-plan.md" in git(other.path, "status", "--porcelain")


# -- crash at every crash point, then the janitor ------------------------------------------
CLAIM_POINTS = ["apply:written", "apply:source-removed", "git:staged", "apply:committed"]


def where_is(repo: Repo, slug: str) -> list[str]:
    found = [p for p in ("todo", "doing", "done", "failed") if (repo / f"backlog/{p}/{slug}.md").exists()]
    return found


@pytest.mark.parametrize("point", CLAIM_POINTS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_janitor_repairs_a_crashed_claim(tmp_path, repo_templates, backend, point):
    anybk = copy_repo(repo_templates(backend, ("add", "x")), tmp_path / "repo")  # `add x` runs once per backend
    proc = anybk.run("take", "x-plan", env={"BACKLOG_CRASH_AT": point})
    assert proc.returncode == -9
    first = report(anybk)
    assert first["code"] == 0
    assert where_is(anybk, "x-plan") == ["doing"]
    assert git(anybk.path, "status", "--porcelain") == ""
    assert "advanced to=doing claimer=tester" in (anybk / "backlog/doing/x-plan.md").read_text()
    quiet(anybk)
    anybk.ok("advance", "x-plan")  # and the task goes on as usual
    assert where_is(anybk, "x-plan") == ["done"]


# the completion path: shared → tracked (maildir-shared) or tracked → tracked (maildir-git)
DONE_PATHS = {
    "maildir-shared": [
        "apply:terminal-line",
        "apply:settled",
        "apply:written",
        "git:staged",
        "apply:committed",
        "apply:shared-removed",
    ],
    "maildir-git": ["apply:written", "apply:source-removed", "git:staged", "apply:committed"],
}
DONE_CASES = [
    (backend, point, verb)
    for backend, points in DONE_PATHS.items()
    for point in points
    for verb in ("advance", "cancel", "fail")
]


@pytest.mark.parametrize("backend, point, verb", DONE_CASES)
def test_janitor_repairs_a_crashed_completion(tmp_path, repo_templates, backend, point, verb):
    # `setup`, `add x`, `take x-plan` and `progress work` run once per backend; each case gets a copy
    working = repo_templates(backend, ("add", "x"), ("take", "x-plan"), ("progress", "work"))
    anybk = copy_repo(working, tmp_path / "repo")
    args = {"advance": ["advance", "x-plan"], "cancel": ["cancel", "x-plan", "why"], "fail": ["fail", "x-plan", "why"]}
    proc = anybk.run(*args[verb], env={"BACKLOG_CRASH_AT": point})
    assert proc.returncode == -9, f"{point} is not on the {verb} path of {backend}"
    pile = "failed" if verb == "fail" else "done"
    first = report(anybk)
    assert first["code"] == 0, first
    assert where_is(anybk, "x-plan") == [pile], first
    text = (anybk / f"backlog/{pile}/x-plan.md").read_text()
    assert log_kinds(anybk / f"backlog/{pile}/x-plan.md") == [
        "advanced",
        "progress",
        {"advance": "advanced", "cancel": "cancelled", "fail": "failed"}[verb],
    ], text
    assert git(anybk.path, "status", "--porcelain") == ""
    assert f"backlog/{pile}/x-plan.md" in git(anybk.path, "ls-files", "backlog")
    if is_shared(anybk):
        assert (shared_root(anybk) / ".ledger/x-plan").exists()
    quiet(anybk)


# -- 4. unresolvable dependencies ----------------------------------------------------------
def test_unresolvable_deps(shared):
    shared.ok("add", "base")
    shared.ok("add", "gone", "--depends", "base-plan")
    shared.ok("take", "gone-plan", "--force")
    shared.ok("fail", "gone-plan", "no")
    shared.ok("add", "flying")
    shared.ok("take", "flying-plan")
    shared.ok("add", "done")
    shared.ok("take", "done-plan")
    shared.ok("advance", "done-plan")
    deps = ["base-plan", "gone-plan", "flying-plan", "done-plan", "nowhere", "base"]
    write_task(shared, "todo", "needs-plan", task_text("needs-plan", deps=deps))  # `add` refuses the last two
    write_task(shared, "done", "old", task_text("old", deps=["long-forgotten"]))  # finished: not checked
    data = report(shared)
    assert found(data, "UNRESOLVABLE DEPS") == [
        "backlog/todo/needs-plan.md (depends on nowhere, which is in no pile)",
        "backlog/todo/needs-plan.md (depends on base, which is in no pile; did you mean base-plan?)",
    ]
    assert data["code"] == 0
    assert report(shared, "--strict")["code"] == 1


def test_dependency_known_only_to_the_ledger_resolves(shared):
    shared.ok("add", "x")
    other = shared.worktree("wa")
    shared.ok("take", "x-plan")
    shared.ok("advance", "x-plan")  # done on main; wa has not merged it
    write_task(other, "todo", "y", task_text("y", deps=["x-plan"]))
    data = report(other)
    assert data["buckets"]["UNRESOLVABLE DEPS"] == []


# -- 5. cycles -----------------------------------------------------------------------------
def test_find_cycles_canonical_and_once():
    graph = {"c": {"a"}, "a": {"b"}, "b": {"c", "a"}, "d": {"d"}, "e": {"a"}, "f": set()}
    cycles, complete = find_cycles(graph)
    assert complete
    assert cycles == [["a", "b", "a"], ["a", "b", "c", "a"], ["d", "d"]]


def test_find_cycles_is_bounded():
    nodes = [f"n{i:02d}" for i in range(14)]
    graph = {n: set(nodes) - {n} for n in nodes}  # complete graph: far too many cycles to list
    cycles, complete = find_cycles(graph)
    assert not complete and 0 < len(cycles) <= janitor.MAX_CYCLES


def test_cycles(anybk):
    write_task(anybk, "todo", "b", task_text("b", deps=["c"]))
    write_task(anybk, "todo", "c", task_text("c", deps=["a"]))
    write_task(anybk, "todo", "a", task_text("a", deps=["b"]))
    write_task(anybk, "todo", "s", task_text("s", deps=["s"]))
    write_task(anybk, "done", "d1", task_text("d1", deps=["d2"]))  # finished tasks block nothing
    write_task(anybk, "done", "d2", task_text("d2", deps=["d1"]))
    data = report(anybk)
    assert found(data, "CYCLES") == ["backlog/todo/a.md (a → b → c → a)", "backlog/todo/s.md (s → s)"]
    assert report(anybk, "--strict")["code"] == 1


# -- 6. orphaned shared in-flight ----------------------------------------------------------
def test_orphaned_shared_in_flight(shared):
    shared.ok("add", "x")
    shared.ok("add", "y")
    feat = shared.worktree("feat")
    feat.ok("take", "x-plan")
    feat.ok("take", "y-plan")
    git(shared.path, "worktree", "remove", "--force", str(feat.path))
    git(shared.path, "branch", "-D", "feat")
    git(shared.path, "update-ref", "refs/remotes/origin/feat", "HEAD")
    quiet(shared)  # a remote-tracking branch still holds the claim
    git(shared.path, "update-ref", "-d", "refs/remotes/origin/feat")
    data = report(shared, "--strict")
    assert found(data, "ORPHANED SHARED IN-FLIGHT") == [
        f"backlog/doing/{s}-plan.md (claimed by tester on branch feat, which exists neither locally nor as a"
        " remote-tracking branch: rescue it once past its budget, or fail it)"
        for s in ("x", "y")
    ]
    assert data["code"] == 1
    assert (shared / "backlog/doing/x-plan.md").exists()  # advisory: nothing moved


def test_no_orphans_on_maildir_git(gitbk):
    gitbk.ok("add", "x")
    feat = gitbk.worktree("feat")
    feat.ok("take", "x-plan")
    assert report(feat)["buckets"]["ORPHANED SHARED IN-FLIGHT"] == []


# -- 7. settled elsewhere ------------------------------------------------------------------
@pytest.mark.parametrize("verb, advice", [("advance", "merge it"), ("fail", "merge it, or retry it there")])
def test_settled_elsewhere(shared, verb, advice):
    shared.ok("add", "x")
    other = shared.worktree("wa")
    shared.ok("take", "x-plan")
    shared.ok(*([verb, "x-plan"] + (["broken"] if verb == "fail" else [])))
    outcome = "done" if verb == "advance" else "failed"
    data = report(other, "--strict")
    [line] = found(data, "SETTLED ELSEWHERE")
    assert line.startswith(f"backlog/todo/x-plan.md (settled ({outcome}) on branch main at ")
    assert line.endswith(f": {advice})")
    assert data["code"] == 1
    assert (other / "backlog/todo/x-plan.md").exists()
    assert report(shared)["buckets"]["SETTLED ELSEWHERE"] == []


def test_a_retried_copy_is_not_settled_elsewhere(shared):
    shared.ok("add", "x")
    shared.ok("take", "x-plan")
    shared.ok("fail", "x-plan", "broken")
    shared.ok("retry", "x-plan", "again")
    quiet(shared)


# -- 8. layout -----------------------------------------------------------------------------
def test_layout_repairs_and_strays(shared):
    root = shared_root(shared)
    (shared / "backlog/doing").unlink()  # the self-heal puts it back; maintain reports it
    (root / "notes.txt").write_text("mine")
    (root / "doing/README").write_text("hello")
    (root / ".ledger").mkdir(exist_ok=True)
    (root / ".ledger/Not A Slug").write_text("?")
    old_tmp = root / "doing/.tmp-x.md.123.1"  # no writer holds either: both are dead writers' leftovers
    old_tmp.write_text("half")
    os.utime(old_tmp, (time.time() - 7200, time.time() - 7200))
    young_tmp = shared / "backlog/todo/.tmp-y.md.456.1"
    young_tmp.write_text("just written")
    write_task(shared, "todo", "bad", "---\npriority: high\n---\n# bad\n")
    (root / "doing/soon.md").write_text("---\ntimeout: soon\n---\n# soon\n\n---\n")
    (root / "doing/link.md").symlink_to(shared / "README.md")
    dry = report(shared, "--dry-run")
    assert "backlog/doing (dry run, nothing changed: symlink missing: created)" in found(dry, "LAYOUT")
    assert old_tmp.exists()
    data = report(shared, "--strict")
    layout = found(data, "LAYOUT")
    assert layout[0] == "backlog/doing (symlink missing: created)"
    assert "backlog/todo/bad.md (invalid task file: invalid priority: 'high' (expected a whole number >= 1))" in layout
    assert (
        "backlog/doing/soon.md (invalid task file: invalid timeout: 'soon' (expected a positive whole number"
        " followed by s, m, h, d or w, e.g. 45m, 24h, 7d; at most 520w))" in layout
    )
    assert "backlog/doing/link.md (invalid task file: is a symlink; task files must be regular files)" in layout
    assert (
        f"{root / 'notes.txt'} (stray entry in the shared root (only the in-flight piles, .locks and .ledger"
        " belong there): left in place)" in layout
    )
    assert "backlog/doing/README (stray entry in a shared pile (not a <slug>.md task file): left in place)" in layout
    assert f"{root / '.ledger/Not A Slug'} (stray entry in the ledger: left in place)" in layout
    assert "backlog/doing/.tmp-x.md.123.1 (temporary file of a crashed write: removed)" in layout
    assert "backlog/todo/.tmp-y.md.456.1 (temporary file of a crashed write: removed)" in layout
    assert data["code"] == 1
    assert not old_tmp.exists() and not young_tmp.exists()
    assert (root / "notes.txt").exists() and (shared / "backlog/doing").is_symlink()
    again = report(shared)
    assert len(found(again, "LAYOUT")) == len(layout) - 3  # the symlink and the two tmp files are fixed


KILLED_WRITER = """
import os, sys
from pathlib import Path
from maildir_backlog import storage
os.rename = lambda *a: os.kill(os.getpid(), 9)  # killed after its fsynced temporary file, before the rename
storage.write_file(Path(sys.argv[1]), b"half a task\\n")
"""
LIVE_WRITER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)  # as storage holds it while the temporary file exists
print("locked", flush=True)
time.sleep(600)
"""


def test_temporary_files_dead_writers_at_once_live_writers_never(anybk):
    todo = anybk / "backlog/todo"
    proc = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(todo / "x-plan.md")], capture_output=True)
    assert proc.returncode == -9, proc.stderr
    [dead] = [p for p in todo.iterdir() if p.name.startswith(".tmp-x-plan.md.")]  # just now: no age rule
    held = (anybk / "backlog/doing").resolve() / ".tmp-y-plan.md.1.2.3"
    writer = subprocess.Popen([sys.executable, "-c", LIVE_WRITER, str(held)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline() == "locked\n"
        dry = report(anybk, "--dry-run")
        would = f"backlog/todo/{dead.name} (temporary file of a crashed write: would remove it)"
        assert found(dry, "LAYOUT") == [would]
        assert dead.exists()
        data = report(anybk)
        assert found(data, "LAYOUT") == [f"backlog/todo/{dead.name} (temporary file of a crashed write: removed)"]
        assert data["code"] == 0 and data["fixed"] == 1
        assert not dead.exists() and held.exists()  # a write in progress is never touched
        assert git(anybk.path, "status", "--porcelain", "--untracked-files=all", "--", "backlog/todo") == ""
    finally:
        writer.kill()
        writer.wait()
    data = report(anybk)  # its writer is gone now: removed on the next run
    assert found(data, "LAYOUT") == [f"backlog/doing/{held.name} (temporary file of a crashed write: removed)"]
    assert not held.exists()
    quiet(anybk)


def test_a_stale_git_index_lock_is_reported_with_its_age_and_never_removed(anybk):
    """git killed mid-command leaves `.git/index.lock`: every later commit fails. maintain says
    so (age, and how to remove it) once it is older than any git command takes, and never
    removes it (a slow git command may still hold it); a fresh one is not reported."""
    lock = anybk / ".git/index.lock"
    lock.write_bytes(b"")
    assert found(report(anybk), "LAYOUT") == []  # just taken: a git command at work
    old = time.time() - 3600 - 150
    os.utime(lock, (old, old))
    data = report(anybk, "--strict")
    [line] = found(data, "LAYOUT")
    assert line.startswith(f"{lock} (git's index lock, 1h 2m old:") and f"`rm {lock}`" in line, line
    assert data["code"] == 1 and data["fixed"] == 0
    assert lock.exists()
    lock.unlink()
    quiet(anybk)


# -- all eight at once ---------------------------------------------------------------------
def all_eight(shared: Repo) -> None:
    """One maildir-shared backlog with a finding in every bucket, seen from the main worktree."""
    shared.ok("add", "base")
    other = shared.worktree("wa")  # settles base-plan on its branch; main still holds todo/base-plan
    other.ok("take", "base-plan")
    other.ok("advance", "base-plan")
    # 1: an in-flight task whose log already says done
    shared.ok("add", "fin")
    shared.ok("take", "fin-plan")
    append(shared / "backlog/doing/fin-plan.md", f"- {TS} advanced to=done")
    # 3: a crash mid-claim left the todo copy
    shared.ok("add", "dup")
    original = (shared / "backlog/todo/dup-plan.md").read_text()
    shared.ok("take", "dup-plan")
    write_task(shared, "todo", "dup-plan", original)
    # 4 + 5
    write_task(shared, "todo", "lost-plan", task_text("lost-plan", deps=["nowhere-plan"]))  # `add` refuses it
    write_task(shared, "todo", "ca", task_text("ca", deps=["cb"]))
    write_task(shared, "todo", "cb", task_text("cb", deps=["ca"]))
    # 6: claimed on a branch that is gone
    shared.ok("add", "orphan")
    feat = shared.worktree("feat")
    feat.ok("take", "orphan-plan")
    git(shared.path, "worktree", "remove", "--force", str(feat.path))
    git(shared.path, "branch", "-D", "feat")
    # 8: a stray file in the shared root
    (shared_root(shared) / "stray.txt").write_text("?")
    # 2: timed out (1s budget, claimed an hour ago); last, or the prelude of a later take would fail it
    shared.ok("add", "slow", "--timeout", "1s")
    shared.ok("take", "slow-plan")
    backdate(shared.path, "slow-plan")


def test_all_eight_buckets_at_once(shared):
    all_eight(shared)
    proc = shared.run("maintain", "--strict")
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout.splitlines()
    buckets = [l.split(":")[0] for l in out[:-1]]
    assert buckets == sorted(buckets, key=BUCKETS.index), out
    assert set(buckets) == set(BUCKETS), out
    assert out[-1] == "OK: 5 todo, 2 in flight"  # todo: base, lost, ca, cb and (stale) orphan; flying: dup, orphan
    for expected in (
        f"ADVANCED BUT NOT MOVED: backlog/doing/fin-plan.md (log says advanced to=done at {TS}: moved to done/)",
        "TIMED OUT: backlog/doing/slow-plan.md (failed: timeout: budget=1s, claimed=",
        "DUPLICATE: backlog/todo/dup-plan.md (an older copy of backlog/doing/dup-plan.md: removed)",
        "UNRESOLVABLE DEPS: backlog/todo/lost-plan.md (depends on nowhere-plan, which is in no pile)",
        "CYCLES: backlog/todo/ca.md (ca → cb → ca)",
        "ORPHANED SHARED IN-FLIGHT: backlog/doing/orphan-plan.md (claimed by tester on branch feat,",
        "SETTLED ELSEWHERE: backlog/todo/base-plan.md (settled (done) on branch wa at ",
        f"LAYOUT: {shared_root(shared) / 'stray.txt'} (stray entry in the shared root",
    ):
        assert expected in proc.stdout, (expected, out)
    assert (shared / "backlog/done/fin-plan.md").exists() and (shared / "backlog/failed/slow-plan.md").exists()
    assert git(shared.path, "status", "--porcelain") == ""
    second = report(shared, "--strict")
    for bucket in BUCKETS[:3]:
        assert second["buckets"][bucket] == [], second
    assert [len(second["buckets"][b]) for b in BUCKETS[3:]] == [1, 1, 1, 1, 1]
    assert second["code"] == 1 and second["fixed"] == 0


def test_dry_run_moves_nothing(shared):
    all_eight(shared)
    old = shared_root(shared) / "doing/.tmp-z.md.1.1"
    old.write_text("x")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    (shared / "backlog/doing").unlink()
    before = snapshot(shared)
    data = report(shared, "--dry-run")
    assert snapshot(shared) == before
    assert data["dry_run"] is True and data["fixed"] == 0
    assert found(data, "ADVANCED BUT NOT MOVED") == [
        f"backlog/doing/fin-plan.md (log says advanced to=done at {TS}: would move to done/)"
    ]
    assert len(found(data, "TIMED OUT")) == 1, data
    [timed] = found(data, "TIMED OUT")
    assert timed.startswith("backlog/doing/slow-plan.md (would fail: timeout: budget=1s, claimed=")
    assert found(data, "DUPLICATE") == [
        "backlog/todo/dup-plan.md (an older copy of backlog/doing/dup-plan.md: would remove it)"
    ]
    assert "backlog/doing/.tmp-z.md.1.1 (temporary file of a crashed write: would remove it)" in found(data, "LAYOUT")
    assert "backlog/doing (dry run, nothing changed: symlink missing: created)" in found(data, "LAYOUT")
    # what the dry run announced is what the real run does
    real = report(shared)
    for bucket in BUCKETS[:3]:
        assert [f["path"] for f in real["buckets"][bucket]] == [f["path"] for f in data["buckets"][bucket]]


def test_strict_exit_codes(shared):
    shared.ok("add", "x", "--timeout", "1s")
    shared.ok("take", "x-plan")
    backdate(shared.path, "x-plan")  # past its 1 s budget
    assert report(shared, "--strict")["code"] == 0, "fixes alone are not advisory findings"
    write_task(shared, "todo", "y-plan", task_text("y-plan", deps=["nowhere"]))  # `add` refuses it
    assert report(shared)["code"] == 0
    assert report(shared, "--strict")["code"] == 1
    assert shared.run("maintain", "--strict", "--dry-run").returncode == 1


def test_a_failed_repair_is_reported_and_undone(anybk):
    anybk.ok("add", "x")
    anybk.ok("take", "x-plan")
    doing = anybk / "backlog/doing/x-plan.md"
    append(doing, f"- {TS} advanced to=done")
    hook = anybk / ".git/hooks/pre-commit"
    hook.write_text("#!/bin/sh\necho 'no commits today' >&2\nexit 1\n")
    hook.chmod(0o755)
    data = report(anybk)
    [line] = found(data, "ADVANCED BUT NOT MOVED")
    assert "could not move it" in line and "no commits today" in line
    assert data["code"] == 1
    assert doing.exists() and not (anybk / "backlog/done/x-plan.md").exists()
    if is_shared(anybk):
        assert not (shared_root(anybk) / ".ledger/x-plan").exists()
    hook.unlink()
    assert found(report(anybk), "ADVANCED BUT NOT MOVED")[0].endswith("moved to done/)")


# -- concurrency ---------------------------------------------------------------------------
def spawn(cwd: Path, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-m", "maildir_backlog", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


WORKER = [
    ("take", "live{i}-plan"),
    ("progress", "step one"),
    ("progress", "step two", "--slug", "live{i}-plan"),
    ("advance", "live{i}-plan"),
]


def late_still_held(done, live: str) -> bool:
    """Did `progress` (no --slug) refuse because a timed-out `late` claim of this branch is still
    in flight besides `live` (a janitor failing it at that moment)?"""
    said = re.search(r"several in-flight tasks are claimed by .*: (.*); use --slug", done.stderr)
    if done.returncode != 1 or said is None:
        return False
    others = set(said[1].split(", ")) - {live}
    return live in said[1] and bool(others) and all(slug.startswith("late") for slug in others)


@pytest.mark.stress  # three janitors racing a worker: real processes, the longest janitor tests
@pytest.mark.parametrize("backend", ["maildir-shared", "maildir-git"])
def test_two_janitors_and_a_worker(repo, backend):
    repo.ok("setup", f"--backend={backend}")
    other = repo.worktree("wa") if backend == "maildir-shared" else repo
    for i in range(6):
        repo.ok("add", f"late{i}", "--timeout", "1s")
        repo.ok("take", f"late{i}-plan")
    for i in range(1, 4):
        repo.ok("add", f"live{i}")
    for i in range(6):  # past their 1 s budgets: claimed an hour ago (unless a later take's prelude failed one)
        backdate(repo.path, f"late{i}-plan", commit=False, missing_ok=True)
    if git(repo.path, "status", "--porcelain", "--", "backlog/doing"):  # maildir-git: tracked, committed
        git(repo.path, "commit", "-q", "-m", "backdate the claims", "--", "backlog/doing")
    # the worker's commands and the janitors: each a real process of its own (forked from a
    # server that imported the package once: tests/forkrun.py), the janitors started with the
    # worker's first command; the worker stops at its first failure (as `set -e`)
    failed: list = []

    def work() -> None:
        for i in (1, 2, 3):
            for step in WORKER:
                done = forkrun.run(repo.path, *(a.format(i=i) for a in step))
                if step[0] == "progress" and late_still_held(done, f"live{i}-plan"):
                    # a janitor held a late task's lock when the take's prelude came to it, and has
                    # not failed it yet: two claims of record on this branch, which `progress`
                    # names (SPEC §5); the worker says which
                    done = forkrun.run(repo.path, *(a.format(i=i) for a in step), "--slug", f"live{i}-plan")
                if done.returncode != 0 or "Traceback" in done.stderr:
                    failed.append((step, i, done.returncode, done.stdout, done.stderr))
                    return

    forkrun.ready()
    worker = threading.Thread(target=work)
    worker.start()
    janitors = [forkrun.start(p, "maintain") for p in (repo.path, other.path, repo.path)]
    for proc in janitors:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, (out, err)
        assert "Traceback" not in err
    worker.join(300)
    assert not worker.is_alive() and failed == [], failed
    places = {}
    for tree in {repo.path, other.path}:
        for pile in ("todo", "doing", "done", "failed"):
            for path in (tree / "backlog" / pile).glob("*.md"):
                places.setdefault(path.stem, set()).add((pile, path.read_text()))
    for i in range(6):
        copies = places[f"late{i}-plan"]
        assert len(copies) == 1, copies
        [(pile, text)] = copies
        assert pile == "failed" and text.count(" failed by=tester | ") == 1, text
    for i in range(1, 4):
        [(pile, text)] = places[f"live{i}-plan"]
        assert pile == "done" and " failed " not in text and text.count("progress |") == 2, text
    for tree in {repo.path, other.path}:
        assert git(tree, "status", "--porcelain") == ""
    quiet(repo)
    quiet(Repo(other.path))


# -- scale ---------------------------------------------------------------------------------
def test_two_thousand_tasks_with_a_dependency_chain(gitbk):
    """Correctness at size (the summary cache, a 2,000-long dependency chain); its speed at
    10,000 tasks is measured by `bench/bench.py` (maintain --dry-run), not by a timed test."""
    todo = gitbk / "backlog/todo"
    for i in range(2_000):
        deps = f"---\npriority: {i % 5 + 1}\ndependencies: [t{i - 1:05d}]\n---\n" if i else ""
        (todo / f"t{i:05d}.md").write_text(f"{deps}# task {i}\n\n---\n")
    git(gitbk.path, "add", "backlog")
    git(gitbk.path, "commit", "-qm", "many")
    assert gitbk.ok("maintain") == "OK: 2000 todo, 0 in flight\n"  # the first run fills the summary cache
    assert gitbk.ok("maintain") == "OK: 2000 todo, 0 in flight\n"
    assert gitbk.ok("--json", "ready", "--limit", "3").count('"slug"') == 1  # only the chain's head is ready
