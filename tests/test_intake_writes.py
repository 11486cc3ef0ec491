"""The queue is written where it is read (SPEC §4): `add` and `retry` land on the intake branch
wherever they are run — committed in the worktree that has it checked out, or by a plumbing
commit that moves the branch by compare-and-swap — and `add --here` keeps a task on this branch."""

from __future__ import annotations

import json
import os
from pathlib import Path

from conftest import spawn


def declare_intake(repo, branch: str = "main") -> None:
    """Name the intake branch in `## Backend` (committed, so worktrees made after read it too)."""
    agents = repo / "backlog/AGENTS.md"
    text = agents.read_text()
    agents.write_text(text.replace("maildir-shared\n", f"maildir-shared\n\n- `intake: {branch}`\n", 1))
    repo.git("commit", "-q", "-m", "declare the intake branch", "--", "backlog/AGENTS.md")


def test_add_in_a_worktree_commits_on_main_where_it_is_checked_out(shared):
    agent = shared.worktree("a1")
    (shared / "scratch.txt").write_text("the user's work\n")
    shared.git("add", "scratch.txt")  # staged on main: must stay staged and out of the commit
    out = json.loads(agent.ok("--json", "add", "followup-x", "followup"))
    assert out == {
        "slug": "followup-x-followup",
        "pile": "todo",
        "path": "backlog/todo/followup-x-followup.md",
        "branch": "main",
        "where": "intake:main",
    }
    assert (shared / "backlog/todo/followup-x-followup.md").exists()
    assert not (agent / "backlog/todo/followup-x-followup.md").exists()
    assert shared.head_message() == "add(followup-x-followup)"
    assert shared.git("show", "--name-only", "--format=", "HEAD").split() == ["backlog/todo/followup-x-followup.md"]
    assert shared.git("diff", "--cached", "--name-only").split() == ["scratch.txt"]
    assert agent.git("status", "--porcelain") == ""  # nothing changed in the agent's worktree
    for where in (shared, agent, shared.worktree("a2")):  # every worktree sees it at once
        assert "followup-x-followup" in [t["slug"] for t in json.loads(where.ok("--json", "ready"))["tasks"]]
    assert agent.run("add", "followup-x", "followup").returncode == 1  # exists: refused


def test_add_when_the_intake_branch_is_checked_out_nowhere_moves_it_by_plumbing(shared):
    declare_intake(shared)
    agent = shared.worktree("a1")
    shared.git("checkout", "-q", "--detach")  # main is checked out nowhere now
    before = shared.git("rev-parse", "main").strip()
    out = json.loads(agent.ok("--json", "add", "remote-followup", "followup", "--priority", "3"))
    assert out["where"] == "intake:main" and out["branch"] == "main"
    after = shared.git("rev-parse", "main").strip()
    assert shared.git("rev-parse", "main^").strip() == before
    assert shared.git("log", "-1", "--format=%s", "main").strip() == "add(remote-followup-followup)"
    names = shared.git("show", "--name-only", "--format=", "main").split()
    assert names == ["backlog/todo/remote-followup-followup.md"]
    assert "priority: 3" in shared.git("show", "main:backlog/todo/remote-followup-followup.md")
    assert agent.git("status", "--porcelain") == ""
    ready = json.loads(agent.ok("--json", "ready"))["tasks"]
    assert {
        "slug": "remote-followup-followup",
        "title": "remote followup",
        "priority": 3,
        "where": "intake:main",
    } in ready
    assert after != before
    assert agent.run("add", "remote-followup", "followup").returncode == 1  # on the branch: refused


def test_concurrent_plumbing_adds_all_land(shared):
    declare_intake(shared)
    agents = [shared.worktree(f"a{i}") for i in range(3)]
    shared.git("checkout", "-q", "--detach")
    procs = [spawn(a.path, "add", f"t{n}-{i}") for i, a in enumerate(agents) for n in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    names = shared.git("ls-tree", "--name-only", "main:backlog/todo/").split()
    assert {f"t{n}-{i}-plan.md" for i in range(3) for n in range(2)} <= set(names)


def test_add_here_keeps_the_task_on_this_branch(shared):
    agent = shared.worktree("a1")
    out = json.loads(agent.ok("--json", "add", "mine", "--here"))
    assert out["where"] == "here" and out["branch"] == "a1"
    assert (agent / "backlog/todo/mine-plan.md").exists()
    assert agent.head_message() == "add(mine-plan)"
    assert not (shared / "backlog/todo/mine-plan.md").exists()


def failed_on(agent, slug: str) -> None:
    agent.ok("take", slug)
    agent.ok("fail", slug, "prelude broke")
    assert (agent / f"backlog/failed/{slug}.md").exists()


def test_a_task_failed_on_an_agents_branch_is_retried_from_main(shared):
    shared.ok("add", "flaky")
    agent = shared.worktree("a4")
    failed_on(agent, "flaky-plan")
    assert json.loads(shared.ok("--json", "list"))["tasks"][0]["state"] == "settled elsewhere"
    out = json.loads(shared.ok("--json", "retry", "flaky-plan", "fixed the prelude", "--set", "priority=2"))
    assert out == {
        "slug": "flaky-plan",
        "pile": "todo",
        "path": "backlog/todo/flaky-plan.md",
        "branch": "main",
        "where": "here",
    }
    text = (shared / "backlog/todo/flaky-plan.md").read_text()
    assert "failed" in text and "retried" in text and "priority: 2" in text  # the failed copy's log, continued
    assert shared.head_message().startswith("retry(flaky-plan)")
    for where in (shared, agent):
        assert [t["slug"] for t in json.loads(where.ok("--json", "ready"))["tasks"]] == ["flaky-plan"]
    agent.ok("take", "flaky-plan")  # claimable again, once


def test_retry_in_an_agents_worktree_lands_on_main_and_drops_the_local_failed_copy(shared):
    shared.ok("add", "flaky")
    agent = shared.worktree("a4")
    failed_on(agent, "flaky-plan")
    out = json.loads(agent.ok("--json", "retry", "flaky-plan", "again"))
    assert out["where"] == "intake:main" and out["branch"] == "main"
    assert "retried" in (shared / "backlog/todo/flaky-plan.md").read_text()
    assert shared.head_message().startswith("retry(flaky-plan)")
    assert not (agent / "backlog/failed/flaky-plan.md").exists()  # removed on a4, committed
    assert agent.git("status", "--porcelain") == ""
    other = shared.worktree("a5")
    assert [t["slug"] for t in json.loads(other.ok("--json", "ready"))["tasks"]] == ["flaky-plan"]
    assert agent.run("retry", "flaky-plan", "twice").returncode == 1  # in todo/ now, not failed/
    other.ok("take", "flaky-plan")


def test_a_task_failed_on_an_agents_branch_that_then_merged_main_is_shown_and_retried_there(shared):
    """The agent claims an intake task, fails it, then merges main, whose todo/ still lists it: its
    worktree holds the stale todo/ copy beside the failed/ one. Found by the clones model's long
    search (session 17, `[show]`): `show` refused ("in several piles: run `backlog maintain`") and
    `retry` refused ("in todo/, failed/, not failed/"). The stale todo/ copy (the same generation) gives way."""
    agent = shared.worktree("a4")  # made before the task is added: its branch never held the todo/ copy
    shared.ok("add", "flaky")
    failed_on(agent, "flaky-plan")  # claimed from the intake branch: main's todo/ copy stays
    agent.git("merge", "-q", "--no-edit", "main")
    assert (agent / "backlog/todo/flaky-plan.md").exists() and (agent / "backlog/failed/flaky-plan.md").exists()
    shown = json.loads(agent.ok("--json", "show", "flaky-plan"))
    assert (shown["pile"], shown["path"]) == ("failed", "backlog/failed/flaky-plan.md")
    assert json.loads(agent.ok("--json", "status"))["counts"] == {"todo": 0, "doing": 0, "done": 0, "failed": 1}
    assert agent.run("take", "flaky-plan").returncode == 1  # failed: not claimable until retried
    out = json.loads(agent.ok("--json", "retry", "flaky-plan", "again"))
    assert (out["where"], out["branch"]) == ("intake:main", "main")
    assert "retried" in (shared / "backlog/todo/flaky-plan.md").read_text()
    assert [t["slug"] for t in json.loads(agent.ok("--json", "ready"))["tasks"]] == ["flaky-plan"]
    agent.ok("take", "flaky-plan")  # the retried copy, once


def test_retry_with_the_intake_branch_checked_out_nowhere(shared):
    declare_intake(shared)
    shared.ok("add", "flaky")
    agent, other = shared.worktree("a4"), shared.worktree("a5")
    failed_on(agent, "flaky-plan")
    shared.git("checkout", "-q", "--detach")
    out = json.loads(other.ok("--json", "retry", "flaky-plan", "again"))  # from a third worktree
    assert out["where"] == "intake:main"
    assert "retried" in shared.git("show", "main:backlog/todo/flaky-plan.md")
    assert shared.git("log", "-1", "--format=%s", "main").startswith("retry(flaky-plan)")
    assert [t["slug"] for t in json.loads(agent.ok("--json", "ready"))["tasks"]] == ["flaky-plan"]
    assert "flaky-plan" in (agent / "backlog/failed/flaky-plan.md").name  # a4's copy stays: a5 cannot touch it
    agent.ok("take", "flaky-plan")


def test_a_dependency_done_on_an_agents_branch_unblocks_its_dependents_everywhere(shared):
    shared.ok("add", "base")
    shared.ok("add", "next", "--depends", "base-plan")
    agent, other = shared.worktree("a1"), shared.worktree("a2")
    assert [t["slug"] for t in json.loads(other.ok("--json", "ready"))["tasks"]] == ["base-plan"]
    agent.ok("take", "base-plan")
    agent.ok("advance", "base-plan")  # done on a1 only: neither main nor a2 has merged it
    assert not (shared / "backlog/done/base-plan.md").exists()
    for where in (shared, other):
        assert [t["slug"] for t in json.loads(where.ok("--json", "ready"))["tasks"]] == ["next-plan"]
        item = json.loads(where.ok("--json", "list"))["tasks"]
        assert [(t["slug"], t["state"], t["blocked_by"]) for t in item if t["slug"] == "next-plan"] == [
            ("next-plan", "ready", [])
        ]
    taken = other.run("--json", "take", "next-plan")
    assert taken.returncode == 0 and "warning" not in taken.stderr


# -- orders identical in every worktree ---------------------------------------------------------
def test_ties_follow_the_time_git_recorded_the_task_not_the_files_times(shared):
    for n, slug in enumerate(("older", "middle", "newer")):
        shared.ok("add", slug, "--priority", "5", env={"GIT_COMMITTER_DATE": f"2026-01-0{n + 1}T00:00:00Z"})
    shared.git("commit", "-q", "--allow-empty", "-m", "later")
    one, two = shared.worktree("w1"), shared.worktree("w2")
    for wt, order in ((one, ("older", "middle", "newer")), (two, ("newer", "middle", "older"))):
        for n, slug in enumerate(order):  # file times reversed between the two worktrees
            os.utime(wt / f"backlog/todo/{slug}-plan.md", (1_000_000 + n * 1000, 1_000_000 + n * 1000))
    shared.ok("add", "intake-only", "--priority", "5", env={"GIT_COMMITTER_DATE": "2026-01-02T12:00:00Z"})
    expected = ["newer-plan", "intake-only-plan", "middle-plan", "older-plan"]
    for wt in (shared, one, two):
        assert [t["slug"] for t in json.loads(wt.ok("--json", "ready"))["tasks"]] == expected
        assert [t["slug"] for t in json.loads(wt.ok("--json", "ready"))["tasks"]] == expected  # from the cache
    (one / "backlog/todo/local-plan.md").write_text("---\npriority: 5\n---\n# local\n\n---\n")
    assert [t["slug"] for t in json.loads(one.ok("--json", "ready"))["tasks"]][
        0
    ] == "local-plan"  # not committed: newest


def test_a_released_task_ranks_as_newest(shared):
    """`release` adds the task's file to todo/ again, and git records that addition: among its
    priority it is the newest, offered first (docs/design.md, *A task that comes back ranks as new*)."""
    for n, slug in enumerate(("first", "second")):
        shared.ok("add", slug, "--priority", "5", env={"GIT_COMMITTER_DATE": f"2026-01-0{n + 1}T00:00:00Z"})
    assert [t["slug"] for t in json.loads(shared.ok("--json", "ready"))["tasks"]] == ["second-plan", "first-plan"]
    shared.ok("take", "first-plan")
    shared.ok("release", "first-plan", "out of time", env={"GIT_COMMITTER_DATE": "2026-01-03T00:00:00Z"})
    assert [t["slug"] for t in json.loads(shared.ok("--json", "ready"))["tasks"]] == ["first-plan", "second-plan"]
    assert json.loads(shared.ok("--json", "take"))["slug"] == "first-plan"


def test_a_damaged_cache_of_added_times_is_read_again(shared):
    """The times are kept as columns; columns that do not agree, values that are not whole
    numbers, the oldest form or no JSON at all: git's history is read again, the order unchanged.
    The form before session 20 (a `seq` column beside the times) is read as it is."""
    for n, slug in enumerate(("older", "newer")):
        shared.ok("add", slug, "--priority", "5", env={"GIT_COMMITTER_DATE": f"2026-01-0{n + 1}T00:00:00Z"})
    expected = ["newer-plan", "older-plan"]
    assert [t["slug"] for t in json.loads(shared.ok("--json", "ready"))["tasks"]] == expected
    cache = Path(shared.git("rev-parse", "--absolute-git-dir").strip()) / "backlog-added-times.json"
    tips = json.loads(cache.read_text())["tips"]
    wrong = {"slugs": "older-plan\nnewer-plan"}  # older would win, were these read
    for bad in (
        {**wrong, "when": [1767398400], "seq": [1, 2]},
        {**wrong, "when": [1767398400, True], "seq": [2, 1]},
        {**wrong, "when": [1767398400, "1"]},
        {"times": {"older-plan": [1767398400, 2], "newer-plan": [1, 1]}},
    ):
        cache.write_text(json.dumps({"tips": tips, **bad}))
        assert [t["slug"] for t in json.loads(shared.ok("--json", "ready"))["tasks"]] == expected, bad
    cache.write_text("{")
    assert [t["slug"] for t in json.loads(shared.ok("--json", "ready"))["tasks"]] == expected
    older_form = {"slugs": "older-plan\nnewer-plan", "when": [1767225600, 1767312000], "seq": [1, 2]}
    cache.write_text(json.dumps({"tips": tips, **older_form}))
    assert [t["slug"] for t in json.loads(shared.ok("--json", "ready"))["tasks"]] == expected
    assert json.loads(cache.read_text()) == {"tips": tips, **older_form}  # read, so not written again
