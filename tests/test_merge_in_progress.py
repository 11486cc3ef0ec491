"""A user's merge (or cherry-pick) stopped at a conflict on a backlog file, and the tool's commits
(SPEC §6 *maintain*, §7.6: the user's staged work is never swept up or lost; docs/design.md, *A
merge that conflicts on a stale copy*).

The shape (backlog/todo/retried-merge-conflict-followup.md): main fails a task and retries it,
rewriting main's todo/ copy; b2, branched before, claims the reopened task and completes it,
which drops b2's stale todo/ copy. Merging b2 into main is then a modify/delete conflict on
backlog/todo/<slug>.md, beside done/<slug>.md, which the merge staged.

`maintain` sees a duplicate there (the todo/ copy is an older copy of the done/ one) and used to
try its repair commit: that staged its paths, failed ("partial commit during a merge"), and
unstaged them, which took the merge's done/ copy out of the index (left untracked) and marked
the conflict resolved with main's side, so the user's `git commit` would have concluded the merge
without the completion. Now no commit touches the index while this worktree's merge, cherry-pick
or revert stands (`gitcommit.unconcluded`), and `maintain` names the one command that resolves
the conflict. Every command is the real `backlog` (tests/conftest.py).
"""

from __future__ import annotations

import pytest
from conftest import git


def conflicted(shared, how: str):
    """main after `git merge b2` (or a cherry-pick of b2's completion) stopped at the conflict."""
    shared.ok("add", "x")
    b2 = shared.worktree("b2")
    shared.ok("take", "x-plan", env={"BACKLOG_CLAIMER": "alice"})
    shared.ok("fail", "x-plan", "flaky", env={"BACKLOG_CLAIMER": "alice"})
    shared.ok("retry", "x-plan", "again", env={"BACKLOG_CLAIMER": "alice"})
    b2.ok("take", "x-plan", env={"BACKLOG_CLAIMER": "bob"})
    b2.ok("advance", "x-plan", env={"BACKLOG_CLAIMER": "bob"})
    args = ["merge", "--no-edit", "b2"] if how == "merge" else ["cherry-pick", "main..b2"]
    git(shared.path, *args, check=False)
    index = git(shared.path, "ls-files", "-s", "backlog")
    assert git(shared.path, "ls-files", "-u", "backlog").strip(), index
    assert how != "merge" or "backlog/done/x-plan.md" in index, index
    return index


def test_maintain_during_a_conflicted_merge_leaves_its_index_and_names_the_resolution(shared):
    index = conflicted(shared, "merge")
    proc = shared.run("maintain")
    assert git(shared.path, "ls-files", "-s", "backlog") == index  # the merge's staging, conflict included
    assert (shared.path / "backlog/todo/x-plan.md").exists() and (shared.path / "backlog/done/x-plan.md").exists()
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    line = next(line for line in proc.stdout.splitlines() if line.startswith("DUPLICATE:"))
    assert "`git rm -- backlog/todo/x-plan.md`" in line, proc.stdout
    git(shared.path, "rm", "-q", "--", "backlog/todo/x-plan.md")  # as it says; the merge then concludes
    git(shared.path, "commit", "-q", "--no-edit")
    tree = git(shared.path, "ls-tree", "-r", "--name-only", "HEAD", "backlog").split()
    assert "backlog/done/x-plan.md" in tree and "backlog/todo/x-plan.md" not in tree
    again = shared.run("maintain")
    assert again.returncode == 0 and "DUPLICATE" not in again.stdout, again.stdout + again.stderr


@pytest.mark.parametrize("how", ["merge", "cherry-pick"])
def test_a_verb_that_commits_during_a_conflicted_merge_is_refused_before_the_index_is_touched(shared, how):
    """`add --here` commits in this worktree: refused at once, exit 1, naming the operation and
    its conflict; its index and the work tree as they were."""
    index = conflicted(shared, how)
    proc = shared.run("add", "y", "--here")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"a `git {how}` stopped at a conflict" in proc.stderr and f"git {how} --abort" in proc.stderr
    assert git(shared.path, "ls-files", "-s", "backlog") == index
    assert not (shared.path / "backlog/todo/y-plan.md").exists()


def test_a_merge_standing_without_a_conflict_is_waited_for_then_refused_and_nothing_moves(shared, monkeypatch):
    """A `git merge` that stopped before writing anything (another git command held the index):
    MERGE_HEAD stands, no conflict. `advance` waits the moment a merge takes to commit itself,
    then refuses in one line (exit 1), before anything is staged; the task stays in doing/."""
    from maildir_backlog import gitcommit
    from maildir_backlog.commands import claim
    from maildir_backlog.errors import BacklogError

    shared.ok("add", "x")
    shared.ok("take", "x-plan")
    shared.git("checkout", "-q", "-b", "other")
    (shared.path / "theirs.txt").write_text("other\n")
    shared.git("add", "theirs.txt")
    shared.git("commit", "-qm", "theirs")
    shared.git("checkout", "-q", "main")
    (shared.path / "ours.txt").write_text("main\n")  # two branches that really merge
    shared.git("add", "ours.txt")
    shared.git("commit", "-qm", "ours")
    lock = shared.path / ".git" / "index.lock"
    lock.write_bytes(b"")
    git(shared.path, "merge", "--no-edit", "other", check=False)
    lock.unlink()
    assert (shared.path / ".git/MERGE_HEAD").exists()
    index = git(shared.path, "ls-files", "-s")
    monkeypatch.setattr(gitcommit, "MERGE_WAIT_SECONDS", 0.2)
    with pytest.raises(BacklogError, match=r"^a `git merge` is in progress in .*: conclude it") as caught:
        claim.advance(shared.context(), "x-plan")
    assert caught.value.code == 1
    assert git(shared.path, "ls-files", "-s") == index
    assert sorted(p.parent.name for p in shared.path.glob("backlog/*/x-plan.md")) == ["doing"]
