"""A retry where a merge left two copies of the failed task (SPEC §4 *One queue per clone*, §8
*One queue across clones*; docs/design.md, *Two copies of one task*).

Clone b claims a task clone a added (b's main lacks it: the claim copies the remote's intake
copy) and fails it; an ordinary `git pull` then brings main's todo/ copy, the one from before
the claim, beside b's failed/ copy, and b pushes both. The remote's main and b's main now hold
two copies of one task, and a retry of it, from either clone, must land:

* from b (its main is the intake branch): the failed copy moves over the stale todo/ copy;
* from a: the retry's push to the remote's main replaces both copies there (it used to refuse the
  push, "appeared meanwhile", leaving the reopened task in clone a alone, while b counted it failed).

Found by the clones model (tests/test_clones_model.py) in session 17, shrunk in session 18. The
world is tests/test_remote.py's; every command is the real `backlog` in a process of its own.
"""

from __future__ import annotations

import json

from conftest import git
from test_remote import make_world, run


def tree_of(path, rev: str = "HEAD") -> set[str]:
    return {p for p in git(path, "ls-tree", "-r", "--name-only", rev, "backlog").splitlines() if "beta" in p}


def two_copies(tmp_path):
    """The world after b failed beta and merged the remote's main (both copies in b and pushed)."""
    world = make_world(tmp_path / "w", ["alpha"])
    a, b = world.clone("a"), world.clone("b")
    assert run(a.path, "add", "beta", claimer="alice").returncode == 0
    for args in (("take", "beta-plan"), ("fail", "beta-plan", "flaky")):
        proc = run(b.path, *args, claimer="bob")
        assert proc.returncode == 0, (args, proc.stderr)
    git(b.path, "fetch", "-q", "origin")
    git(b.path, "merge", "--no-edit", "-q", "origin/main")
    git(b.path, "push", "-q", "origin", "main")
    both = {"backlog/todo/beta-plan.md", "backlog/failed/beta-plan.md"}
    assert tree_of(b.path) == both and tree_of(world.server, "main") == both
    return world, a, b


def test_the_clone_that_failed_a_task_retries_it_after_a_pull_brought_the_stale_copy(tmp_path):
    world, _a, b = two_copies(tmp_path)
    proc = run(b.path, "--json", "retry", "beta-plan", "fixed", claimer="bob")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["pile"] == "todo" and "warning" not in proc.stderr, proc.stderr
    assert tree_of(b.path) == {"backlog/todo/beta-plan.md"} == tree_of(world.server, "main")
    assert (b.path / "backlog/todo/beta-plan.md").read_text().endswith("retried | fixed\n")
    proc = run(b.path, "--json", "take", "beta-plan", claimer="bob")
    assert proc.returncode == 0 and json.loads(proc.stdout)["slug"] == "beta-plan", proc.stderr


def test_another_clone_retries_it_and_the_remote_main_keeps_one_copy(tmp_path):
    world, a, b = two_copies(tmp_path)
    proc = run(a.path, "retry", "beta-plan", "fixed", claimer="alice")
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    assert tree_of(world.server, "main") == {"backlog/todo/beta-plan.md"}
    retried = git(world.server, "show", "main:backlog/todo/beta-plan.md")
    assert retried.endswith("retried | fixed\n")
    status = json.loads(run(b.path, "--json", "status", claimer="bob").stdout)
    assert (status["counts"]["todo"], status["counts"]["failed"]) == (2, 0), status  # alpha and beta-plan
    ready = json.loads(run(b.path, "--json", "ready", claimer="bob").stdout)
    assert sorted(t["slug"] for t in ready["tasks"]) == ["alpha", "beta-plan"]
    git(b.path, "pull", "--no-rebase", "--no-edit", "-q", "origin", "main")  # the pull leaves one copy in b too
    assert tree_of(b.path) == {"backlog/todo/beta-plan.md"}
    proc = run(b.path, "--json", "take", "beta-plan", claimer="bob")
    assert proc.returncode == 0 and json.loads(proc.stdout)["slug"] == "beta-plan", proc.stderr


def test_a_linked_worktree_retries_it_into_the_main_worktree_that_holds_both_copies(tmp_path):
    """The intake branch is checked out in b's main worktree: the retry, run in b's linked
    worktree, lands there (`moves.landing`, the intake worktree's own change) over both copies."""
    world, _a, b = two_copies(tmp_path)
    side = b.worktree("side").path
    proc = run(side, "retry", "beta-plan", "fixed", claimer="bob")
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    assert tree_of(b.path) == {"backlog/todo/beta-plan.md"} == tree_of(world.server, "main")
    assert git(b.path, "status", "--porcelain", "backlog").strip() == ""


def test_a_retry_from_another_clone_takes_the_failed_copy_off_the_remote_main(tmp_path):
    """One copy there, failed/ (b had merged main before it claimed): the retry's push removes it,
    so the remote's main never holds a reopened task beside its failed copy."""
    world = make_world(tmp_path / "w", ["alpha"])
    a, b = world.clone("a"), world.clone("b")
    assert run(a.path, "add", "beta", claimer="alice").returncode == 0
    git(b.path, "pull", "--no-rebase", "--no-edit", "-q", "origin", "main")
    for args in (("take", "beta-plan"), ("fail", "beta-plan", "flaky")):
        assert run(b.path, *args, claimer="bob").returncode == 0, args
    git(b.path, "push", "-q", "origin", "main")
    assert tree_of(world.server, "main") == {"backlog/failed/beta-plan.md"}
    proc = run(a.path, "retry", "beta-plan", "fixed", claimer="alice")
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    assert tree_of(world.server, "main") == {"backlog/todo/beta-plan.md"}


# -- a retry killed between its landing and the removal of this branch's failed copy ----------
# Found by the long model run of session 19 (tests/test_model.py, maildir-shared, [one-answer]),
# shrunk to four steps: main claims a task; b2 (branched before the task was added) fails it by
# timeout, which commits failed/ on b2; b2's `retry` lands the reopened copy on the intake branch
# and is killed before its second commit, which removes b2's failed copy. `list` in b2 then said
# the task was ready (the intake branch's copy is of a later generation), and `take` refused it:
# "is in failed/, not in todo/". SPEC §7: what `ready` and `list` offer, `take` claims.


def test_a_claim_in_a_branch_whose_retry_was_killed_takes_the_reopened_copy_and_drops_the_failed_one(shared):
    b2 = shared.worktree("b2")
    shared.ok("add", "x", env={"BACKLOG_CLAIMER": "alice"})
    shared.ok("take", "x-plan", env={"BACKLOG_CLAIMER": "alice"})
    b2.ok("fail", "x-plan", "flaky", "--force", env={"BACKLOG_CLAIMER": "bob"})  # as a timeout does
    killed = b2.run("retry", "x-plan", "again", env={"BACKLOG_CRASH_AT": "apply:committed"})
    assert killed.returncode != 0
    assert "backlog/todo/x-plan.md" in git(shared.path, "ls-tree", "-r", "--name-only", "main", "backlog")
    assert (b2 / "backlog/failed/x-plan.md").exists()  # the retry's removal of it never ran
    assert "ready" in b2.ok("list", env={"BACKLOG_CLAIMER": "bob"})
    assert "x-plan" in b2.ok("ready")
    taken = b2.run("take", "x-plan", env={"BACKLOG_CLAIMER": "bob"})
    assert taken.returncode == 0, taken.stderr
    assert not (b2 / "backlog/failed/x-plan.md").exists()
    assert "backlog/failed/x-plan.md" not in git(b2.path, "ls-tree", "-r", "--name-only", "HEAD", "backlog")
    b2.ok("advance", "x-plan", env={"BACKLOG_CLAIMER": "bob"})
    assert sorted(p.parent.name for p in b2.path.glob("backlog/*/x-plan.md")) == ["done"]
    again = b2.run("maintain")
    assert again.returncode == 0 and "DUPLICATE" not in again.stdout, again.stdout + again.stderr


# -- a failed copy here, of an earlier failure than the remote records ---------------------------
# Found by the clones model's `[verbs]` in session 19: b failed a task; a retried it, claimed it
# and failed it again. b's failed/ copy is of generation 0, the remote's failure of generation 1,
# and `retry` in b refused ("was failed by alice … since this copy failed"): SPEC §8 says a task
# failed on any clone is retried from any clone.


def test_a_clone_whose_failed_copy_is_stale_retries_the_later_failure_and_drops_its_copy(tmp_path):
    world = make_world(tmp_path / "w", ["alpha"])
    a, b = world.clone("a"), world.clone("b")
    for args in (("take", "alpha"), ("fail", "alpha", "flaky")):
        assert run(b.path, *args, claimer="bob").returncode == 0, args
    for args in (("retry", "alpha", "again"), ("take", "alpha"), ("fail", "alpha", "flaky again")):
        proc = run(a.path, *args, claimer="alice")
        assert proc.returncode == 0, (args, proc.stderr)
    assert (b.path / "backlog/failed/alpha.md").exists()  # generation 0, stale now
    proc = run(b.path, "--json", "retry", "alpha", "third time", claimer="bob")
    assert proc.returncode == 0, proc.stderr
    assert not (b.path / "backlog/failed/alpha.md").exists()
    text = (b.path / "backlog/todo/alpha.md").read_text()
    assert text.count("retried") == 2 and "flaky again" in text and text.endswith("retried | third time\n"), text
    proc = run(a.path, "--json", "take", "alpha", claimer="alice")
    assert proc.returncode == 0 and json.loads(proc.stdout)["slug"] == "alpha", proc.stderr


# -- maintain on a branch whose retry was killed or refused before removing its failed copy ------
# The retry's warning ("stays on this branch: `maintain` repairs it") is kept by the janitor: the
# failed/ copy the intake branch's later generation superseded is removed in the branch's own commit.


def _killed_retry(shared):  # type: ignore[no-untyped-def]
    """Worktree b2, whose `retry x-plan` was killed after its commit on the intake branch: its
    failed/ copy stays, superseded by the intake branch's todo/ copy."""
    b2 = shared.worktree("b2")
    shared.ok("add", "x", env={"BACKLOG_CLAIMER": "alice"})
    shared.ok("take", "x-plan", env={"BACKLOG_CLAIMER": "alice"})
    b2.ok("fail", "x-plan", "flaky", "--force", env={"BACKLOG_CLAIMER": "bob"})
    killed = b2.run("retry", "x-plan", "again", env={"BACKLOG_CRASH_AT": "apply:committed"})
    assert killed.returncode != 0 and (b2 / "backlog/failed/x-plan.md").exists()
    return b2


def test_maintain_removes_the_failed_copy_a_killed_retry_left_behind(shared):
    b2 = _killed_retry(shared)
    dry = b2.run("maintain", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "DUPLICATE: backlog/failed/x-plan.md" in dry.stdout and "would remove it" in dry.stdout, dry.stdout
    assert (b2 / "backlog/failed/x-plan.md").exists()
    fixed = b2.run("maintain")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "retried since" in fixed.stdout and "removed" in fixed.stdout, fixed.stdout
    assert not (b2 / "backlog/failed/x-plan.md").exists()
    assert git(b2.path, "log", "-1", "--format=%s").strip() == "maintain(x-plan) remove failed/ copy a retry reopened"
    assert git(b2.path, "status", "--porcelain", "backlog").strip() == ""
    again = b2.run("maintain")
    assert again.returncode == 0 and "x-plan" not in again.stdout, again.stdout
    assert "x-plan" in b2.ok("ready")
    taken = b2.run("take", "x-plan", env={"BACKLOG_CLAIMER": "bob"})
    assert taken.returncode == 0, taken.stderr


def test_a_superseded_failed_copy_gone_before_it_is_read_is_nothing_to_remove(shared, monkeypatch):
    """`Model.superseded_here` (the janitor's first look, without the task's lock, and a claim's
    body) finds this branch's failed/ copy that a retry on the intake branch superseded, then
    reads it. A racing retry or a user's git in this worktree can remove it between the two:
    looked up again, there is nothing here to remove, not a missing file (docs/reliability.md,
    session 24; the load loop met it, seed 3107611274)."""
    from maildir_backlog.context import open_context
    from maildir_backlog.state import Model

    b2 = _killed_retry(shared)
    model = Model(open_context(b2.path))
    assert model.superseded_here("x-plan")[0] is not None  # (found, before anything moves it)
    backend, real, reads = model.ctx.backend, model.ctx.backend.read, []

    def read_after_a_removal(loc):  # type: ignore[no-untyped-def]
        reads.append(loc.pile)
        if reads.count("failed") == 2:  # (the first tells it superseded, the second is the copy's read)
            (b2 / "backlog/failed/x-plan.md").unlink()
        return real(loc)

    monkeypatch.setattr(backend, "read", read_after_a_removal)
    assert model.superseded_here("x-plan") == (None, None)
    assert reads.count("failed") == 2


def test_maintain_keeps_a_failed_copy_the_intake_branch_still_queues_at_the_same_generation(shared):
    """b2 claimed the task from its own todo/ copy and failed it: main still lists the copy from
    before the claim (stale, the ledger blocks it), of the same generation as b2's failed copy.
    That is the failure of record, not one a retry superseded."""
    shared.ok("add", "x", env={"BACKLOG_CLAIMER": "alice"})
    b2 = shared.worktree("b2")
    b2.ok("take", "x-plan", env={"BACKLOG_CLAIMER": "bob"})
    b2.ok("fail", "x-plan", "flaky", env={"BACKLOG_CLAIMER": "bob"})
    assert "backlog/todo/x-plan.md" in git(shared.path, "ls-tree", "-r", "--name-only", "main", "backlog")
    proc = b2.run("maintain")
    assert proc.returncode == 0 and "x-plan" not in proc.stdout, proc.stdout + proc.stderr
    assert (b2 / "backlog/failed/x-plan.md").exists()
    assert "x-plan" not in b2.ok("ready")
    b2.ok("retry", "x-plan", "fixed", env={"BACKLOG_CLAIMER": "bob"})
