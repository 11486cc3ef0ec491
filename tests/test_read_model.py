"""One read model (issue 18): every verb and view answers from `state`, so the clone answers the
same wherever it is asked. Each situation below is built for real (worktrees, the intake branch,
a task settled on another branch, a retried one, a rename); then, from every worktree, the views
and the verbs are checked against each other:

- a slug `ready` offers is `ready` in `list`, and `show` finds it in todo/;
- a slug `list` marks in flight or settled elsewhere is never offered, and `take SLUG` refuses it
  (exit 1) without changing anything;
- `status` counts todo/ as `list` does (each task once, stale copies not at all);
- `show` of a slug settled elsewhere names the branch the ledger names.
"""

from __future__ import annotations

import json

import pytest


def views_agree(where) -> dict[str, str]:
    """The checks above, from one worktree; returns the state of each todo/ row it lists (a
    worktree's stale copies are rows of their own, not counted: they differ between worktrees)."""
    listed = {t["slug"]: t for t in json.loads(where.ok("--json", "list"))["tasks"]}
    offered = [t["slug"] for t in json.loads(where.ok("--json", "ready"))["tasks"]]
    status = json.loads(where.ok("--json", "status"))
    assert status["counts"]["todo"] == sum(1 for t in listed.values() if t["state"] in ("ready", "blocked", "invalid"))
    uncounted = [
        s for s, t in listed.items() if t["state"] in ("in flight", "settled elsewhere") and t["where"] == "here"
    ]
    assert status["stale"] == uncounted  # in list's order: priority, then slug
    for slug in offered:
        assert listed[slug]["state"] == "ready", (slug, listed[slug])
        assert json.loads(where.ok("--json", "show", slug))["pile"] == "todo"
    for slug, item in listed.items():
        if item["state"] in ("in flight", "settled elsewhere"):
            assert slug not in offered
            before = where.git("status", "--porcelain"), where.git("rev-parse", "HEAD")
            refused = where.run("take", slug)
            assert refused.returncode == 1, (slug, refused.stdout, refused.stderr)
            assert (where.git("status", "--porcelain"), where.git("rev-parse", "HEAD")) == before
        if item["state"] == "settled elsewhere":
            shown = json.loads(where.ok("--json", "show", slug))
            assert shown.get("settled", {}).get("branch") or shown["pile"] in ("done", "failed"), shown
    return {slug: item["state"] for slug, item in listed.items()}


def test_one_clone_one_answer(shared):
    shared.ok("add", "plain")
    shared.ok("add", "later", "--depends", "plain-plan")
    a1, a2 = shared.worktree("a1"), shared.worktree("a2")
    a1.ok("add", "from-a1")  # lands on main, the intake branch: a2 has no copy of it yet
    a1.ok("take", "plain-plan")
    a1.ok("advance", "plain-plan")  # done on a1: main and a2 hold a stale todo/ copy
    shared.ok("add", "flaky")
    a3 = shared.worktree("a3")  # made after: its todo/ holds flaky-plan too
    a2.ok("take", "flaky-plan")
    a2.ok("fail", "flaky-plan", "broke")
    shared.ok("retry", "flaky-plan", "fixed")  # live again in main's todo/
    a2.ok("add", "held")
    a2.ok("take", "held-plan")
    states = {name: views_agree(where) for name, where in (("main", shared), ("a1", a1), ("a2", a2), ("a3", a3))}
    queued = {slug: st for slug, st in states["main"].items() if st in ("ready", "blocked")}
    assert queued == {"flaky-plan": "ready", "later-plan": "ready", "from-a1-plan": "ready"}
    for name in ("a1", "a2"):  # the same queue from every worktree without a stale copy of its own
        assert {slug: st for slug, st in states[name].items() if st in ("ready", "blocked")} == queued, name
    assert states["main"]["plain-plan"] == "settled elsewhere"
    assert states["main"]["held-plan"] == "in flight"
    # a3's own copy of flaky-plan predates the failure and the retry. SPEC v4 §4: a worktree's own
    # todo/ copy that the ledger blocks gives way to the live copy on the intake branch (reopened
    # there after the settlement): a3 offers and claims main's copy, like a1 and a2.
    assert states["a3"]["flaky-plan"] == "ready"
    shown = json.loads(a3.ok("--json", "show", "flaky-plan"))
    assert shown["path"] == "main:backlog/todo/flaky-plan.md" and shown["settled"]["state"] == "retried"
    a3.ok("take", "flaky-plan")  # the intake branch's live copy, claimed from a worktree holding a stale one
    assert "fixed" in (a3 / "backlog/doing/flaky-plan.md").read_text()
    assert views_agree(shared)["flaky-plan"] == "in flight"  # main: its copy, held elsewhere
    assert "flaky-plan" not in views_agree(a1)  # a1 has no copy: not a todo task any more
    assert a1.run("take", "flaky-plan").returncode == 1  # one claimer


def test_status_counts_invalid_and_stale_copies_as_list_does(shared):
    """`status` counts todo/ from the listing, parsing only the copies in flight or in the ledger:
    an invalid copy counts wherever else its task is (list shows it invalid), a valid one there is
    a stale copy, not counted; the rest count unparsed, an invalid one included."""
    for name in ("held", "ended", "finished", "plain"):
        shared.ok("add", name)
    a1 = shared.worktree("a1")  # its todo/ holds a copy of each
    shared.ok("take", "held-plan")  # in flight: a1's copy is stale
    for slug in ("ended-plan", "finished-plan"):  # settled on main: a1's copies are stale
        shared.ok("take", slug)
        shared.ok("advance", slug)
    for slug in ("held-plan", "ended-plan", "junk"):  # now invalid: listed (and counted) as invalid
        (a1 / f"backlog/todo/{slug}.md").write_text("---\npriority: [\n---\n")
    states = views_agree(a1)
    assert states == {
        "ended-plan": "invalid",
        "held-plan": "invalid",
        "junk": "invalid",
        "finished-plan": "settled elsewhere",
        "plain-plan": "ready",
    }
    status = json.loads(a1.ok("--json", "status"))
    assert status["counts"]["todo"] == 4 and status["stale"] == ["finished-plan"]
    assert "not counted: 1 stale todo copy on this branch" in a1.ok("status")


def test_rename_onto_a_name_only_the_intake_branch_holds_is_refused(shared):
    """A door that names a task: `rename` must not make a second task of a name the clone already
    knows, wherever it lives (here: only main's todo/, the intake branch, not merged into a1)."""
    a1 = shared.worktree("a1")
    a1.ok("add", "mine", "--here")
    shared.ok("add", "theirs")
    done = a1.run("rename", "mine-plan", "theirs-plan")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "intake branch" in done.stderr and "choose another name" in done.stderr
    assert (a1 / "backlog/todo/mine-plan.md").exists()
    assert not (a1 / "backlog/todo/theirs-plan.md").exists()


@pytest.mark.parametrize("verb", [["advance"], ["progress", "note", "--slug"], ["show"]])
def test_the_old_name_of_a_renamed_task_says_its_new_name(shared, verb):
    shared.ok("add", "old")
    a1 = shared.worktree("a1")
    shared.ok("rename", "old-plan", "new-plan")
    asked = a1.run(*verb, "old-plan") if verb != ["show"] else shared.run("show", "old-plan")
    assert asked.returncode == 1, asked.stdout + asked.stderr
    if verb != ["show"]:  # a1 still holds its copy under the old name: blocked by the tombstone
        assert "new-plan" in asked.stderr or "renamed" in asked.stderr, asked.stderr


def test_status_counts_the_clones_failed_and_done_tasks_once(shared):
    """SPEC §5 Truthful views: counts are the clone's, each task once. A task failed or finished on
    an agent's branch counts on main (`failed: 1`, not 0); its stale todo/ copy on main does not
    count again; a retried one counts where it lives now."""
    agent = shared.worktree("agent")
    for name in ("a", "b", "c"):
        shared.ok("add", name)
    agent.ok("take", "a-plan")
    agent.ok("fail", "a-plan", "broken")
    agent.ok("take", "b-plan")
    agent.ok("advance", "b-plan")
    for worktree in (shared, agent):
        seen = json.loads(worktree.ok("--json", "status"))["counts"]
        assert (seen["todo"], seen["doing"], seen["done"], seen["failed"]) == (1, 0, 1, 1), seen
    shared.ok("retry", "a-plan", "again")  # from main: back in todo/ on the intake branch
    seen = json.loads(shared.ok("--json", "status"))["counts"]
    assert (seen["todo"], seen["done"], seen["failed"]) == (2, 1, 0), seen
