"""Exactly once under other interleavings, clocks and failures (SPEC §7.2, §7.10; issue holes 1–8).

Each test is one hole an adversarial review found; each fails without its fix. The clock is
frozen in-process (freezegun) so "the same second" and "a clock stepping back" are exact.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest
from freezegun import freeze_time

from maildir_backlog import storage
from maildir_backlog.commands import add, claim, read, settle
from maildir_backlog.commands.maintain import maintain
from maildir_backlog.errors import BacklogError

T0 = datetime(2026, 5, 16, 14, 22, tzinfo=timezone.utc)


def code_of(call, *args, **kwargs) -> int:
    try:
        call(*args, **kwargs)
    except BacklogError as exc:
        return exc.code
    return 0


@pytest.fixture
def two(shared):
    """main and a worktree b1 of one maildir-shared clone, with task x-plan added on main and merged into b1."""
    with freeze_time(T0):
        add.add(shared.context(), "x")
    b1 = shared.worktree("b1")
    return shared, b1


def test_same_second_retry_then_completion_does_not_reopen_a_stale_copy(two):
    main, b1 = two
    with freeze_time(T0):
        claim.take(main.context(), "x-plan")
        settle.fail(main.context(), "x-plan", "flaky")
        settle.retry(main.context(), "x-plan", "again")
        b1.git("merge", "-q", "--no-edit", "main")  # b1 holds the retried copy (retried @T0)
        claim.take(main.context(), "x-plan")
        claim.advance(main.context(), "x-plan")  # done @T0, the same second
        assert code_of(claim.take, b1.context(), "x-plan") == 1  # b1's copy is stale: done elsewhere
        assert claim.take(b1.context()).data["slug"] is None  # auto-pick skips it too


def test_a_clock_stepping_back_does_not_reopen_a_finished_task(two):
    main, b1 = two
    with freeze_time(T0):
        claim.take(main.context(), "x-plan")
        settle.fail(main.context(), "x-plan", "flaky")
        settle.retry(main.context(), "x-plan", "again")
    b1.git("merge", "-q", "--no-edit", "main")
    with freeze_time(T0 - timedelta(hours=1)):  # the clock stepped back
        claim.take(main.context(), "x-plan")
        claim.advance(main.context(), "x-plan")
        assert code_of(claim.take, b1.context(), "x-plan") == 1


def test_a_stale_failed_copy_cannot_be_retried(two):
    main, b1 = two
    with freeze_time(T0):
        claim.take(main.context(), "x-plan")
        settle.fail(main.context(), "x-plan", "flaky")
    b1.git("merge", "-q", "--no-edit", "main")  # b1 holds failed/x-plan too
    with freeze_time(T0 + timedelta(minutes=1)):
        settle.retry(main.context(), "x-plan", "again")
        claim.take(main.context(), "x-plan")
        claim.advance(main.context(), "x-plan")
        with pytest.raises(BacklogError, match="stale") as exc:
            settle.retry(b1.context(), "x-plan", "mine too")
        assert exc.value.code == 1
    assert (b1 / "backlog/failed/x-plan.md").exists() and not (b1 / "backlog/todo/x-plan.md").exists()


def test_a_task_whose_log_ended_is_never_rescued(two):
    main, b1 = two
    with freeze_time(T0):
        claim.take(main.context(), "x-plan")
        storage.simulate_crash_at("apply:terminal-line")
        try:
            with pytest.raises(storage.SimulatedCrash):
                claim.advance(main.context(), "x-plan")
        finally:
            storage.simulate_crash_at()
    with freeze_time(T0 + timedelta(days=8)):  # long past its budget
        with pytest.raises(BacklogError, match="already ended") as exc:
            claim.take(b1.context(), "x-plan")
        assert exc.value.code == 1
        assert "rescued" not in (main.path / "backlog/doing/x-plan.md").read_text()
        result = maintain(main.context())
        assert result.data["buckets"]["ADVANCED BUT NOT MOVED"], result.lines
        assert not result.data["buckets"]["TIMED OUT"]
    assert (main / "backlog/done/x-plan.md").exists()


def test_the_budget_is_fixed_at_claim_time(two):
    """b1 lowers the default budget to 1h; main's claim (made under 7d) is not failed by b1's janitor."""
    main, b1 = two
    agents = b1 / "backlog/AGENTS.md"
    agents.write_text(agents.read_text().replace("- `timeout: 7d`", "- `timeout: 1h`"))
    b1.git("commit", "-qam", "lower the default")
    with freeze_time(T0):
        claim.take(main.context(), "x-plan")
    assert "budget=7d" in (main / "backlog/doing/x-plan.md").read_text()
    with freeze_time(T0 + timedelta(hours=2)):
        result = maintain(b1.context())
        assert not result.data["buckets"]["TIMED OUT"], result.lines
        status = read.status(b1.context()).data["in_flight"][0]
        assert status["stale"] is False and status["budget"] == "7d"
    with freeze_time(T0 + timedelta(days=7, seconds=1)):
        assert maintain(b1.context()).data["buckets"]["TIMED OUT"]


def test_a_pile_without_budget_never_times_out(repo):
    repo.ok("setup", "--backend=maildir-shared", "--pipeline", "todo doing reviewing done")
    agents = repo / "backlog/AGENTS.md"
    agents.write_text(agents.read_text().replace("- `timeout: 7d`", "- `timeout: 7d`\n- `timeout.reviewing: none`"))
    repo.git("commit", "-qam", "people review without a deadline")
    with freeze_time(T0):
        add.add(repo.context(), "x")
        claim.take(repo.context(), "x-plan")
        claim.advance(repo.context(), "x-plan")  # → reviewing, budget=none
    assert "advanced to=reviewing budget=none" in (repo / "backlog/reviewing/x-plan.md").read_text()
    with freeze_time(T0 + timedelta(days=400)):
        assert not maintain(repo.context()).data["buckets"]["TIMED OUT"]
        with pytest.raises(BacklogError, match="no budget"):
            claim.rescue(repo.context(), "x-plan")


# -- failures are reported, never an empty queue -------------------------------------------------
def test_a_refusing_hook_is_an_error_not_an_empty_queue(shared):
    shared.ok("add", "a")
    shared.ok("add", "b")
    hook = shared / ".git/hooks/pre-commit"
    hook.write_text("#!/bin/sh\necho 'policy: no commits today' >&2\nexit 1\n")
    hook.chmod(0o755)
    proc = shared.run("take")
    assert proc.returncode == 1, proc.stderr
    assert "no available tasks" not in proc.stderr and "policy" in proc.stderr
    assert not list((shared / "backlog/doing").iterdir())  # nothing left claimed


@contextlib.contextmanager
def removed_after(path, seconds: float):
    """`path` (a git lock or state file someone else holds) is removed `seconds` into the block."""

    def remove() -> None:
        time.sleep(seconds)
        path.unlink()

    thread = threading.Thread(target=remove)
    thread.start()
    try:
        yield
    finally:
        thread.join()


def test_a_busy_index_lock_is_waited_for(shared):
    lock = shared / ".git/index.lock"
    lock.write_text("")
    with removed_after(lock, 1.0):
        shared.ok("add", "x")
    assert shared.head_message() == "add(x-plan)"


def test_a_merge_being_committed_is_waited_for(anybk):
    """`git merge` holds MERGE_HEAD for the moment it takes to write its own commit: a verb
    committing then is refused by git ("cannot do a partial commit during a merge"); it waits."""
    anybk.ok("add", "x")
    head = anybk.git("rev-parse", "HEAD").strip()
    merge_head = anybk / ".git/MERGE_HEAD"
    merge_head.write_text(head + "\n")
    with removed_after(merge_head, 0.5):  # the merge concludes
        anybk.ok("take", "x-plan")
    assert (anybk / "backlog/doing/x-plan.md").exists()


def test_a_merge_left_in_conflict_is_refused_in_one_line_and_nothing_moves(anybk):
    anybk.ok("add", "x")
    anybk.git("checkout", "-q", "-b", "side")
    (anybk / "README.md").write_text("side\n")
    anybk.git("commit", "-qam", "side")
    anybk.git("checkout", "-q", "main")
    (anybk / "README.md").write_text("main\n")
    anybk.git("commit", "-qam", "main")
    anybk.git("merge", "-q", "side", check=False)  # conflict in README.md, left for the user
    proc = anybk.run("take", "x-plan")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "git merge` stopped at a conflict" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert (anybk / "backlog/todo/x-plan.md").exists() and not list((anybk / "backlog/doing").glob("*.md"))
    assert "x-plan" not in anybk.git("diff", "--cached", "--name-only")  # nothing of ours left staged


def test_retry_of_a_failed_copy_whose_task_is_in_flight_says_the_copy_is_stale(two):
    main, b1 = two
    with freeze_time(T0):
        claim.take(main.context(), "x-plan")
        settle.fail(main.context(), "x-plan", "flaky")
        b1.git("merge", "-q", "--no-edit", "main")  # b1 holds the failed copy
        settle.retry(main.context(), "x-plan", "again")
        claim.take(main.context(), "x-plan")
        with pytest.raises(BacklogError, match=r"in flight \(doing/\): this failed/ copy is stale"):
            settle.retry(b1.context(), "x-plan", "again")


def test_an_absurd_budget_is_refused_naming_the_file_and_stops_nothing_else(shared):
    shared.ok("add", "huge", "--priority", "1")
    shared.ok("add", "fine")
    path = shared / "backlog/todo/huge-plan.md"
    path.write_text("---\ntimeout: 500000w\n---\n" + path.read_text())
    shared.git("commit", "-qam", "absurd")
    proc = shared.run("take")
    assert proc.returncode == 0 and "fine-plan" in proc.stdout
    assert "huge-plan.md" in proc.stderr and "520w" in proc.stderr
    for verb in (("status",), ("maintain",), ("list",)):
        assert "internal error" not in shared.run(*verb).stderr
    proc = shared.run("take", "huge-plan")
    assert proc.returncode == 2 and "backlog/todo/huge-plan.md" in proc.stderr


def test_a_todo_file_not_yet_committed_is_claimed_cleanly(anybk):
    (anybk / "backlog/todo/fresh.md").write_text("# fresh, not committed yet\n")
    assert "fresh" in anybk.ok("ready")
    proc = anybk.run("take", "fresh")
    assert proc.returncode == 0, proc.stderr
    assert "pathspec" not in proc.stderr


def test_a_tag_named_like_the_branch_does_not_change_the_recorded_branch(shared):
    shared.git("tag", "main")
    shared.ok("add", "x")
    shared.ok("take", "x-plan")
    assert "branch=main " in (shared / "backlog/doing/x-plan.md").read_text()
    assert "ORPHANED" not in shared.ok("maintain", "--strict")


def test_a_claimer_of_control_characters_is_refused(shared):
    shared.ok("add", "x")
    proc = shared.run("take", "x-plan", env={"BACKLOG_CLAIMER": "\x01\x02"})
    assert proc.returncode == 2 and "BACKLOG_CLAIMER" in proc.stderr
    assert (shared / "backlog/todo/x-plan.md").exists()


def test_every_verb_works_from_inside_the_in_flight_symlink(shared):
    shared.ok("add", "x")
    shared.ok("add", "y")
    shared.ok("take", "x-plan")
    inside = shared / "backlog/doing"
    import os
    import subprocess
    import sys

    from conftest import ROOT

    env = dict(os.environ, PYTHONPATH=str(ROOT), PWD=str(inside))
    for args in (("status",), ("progress", "from inside"), ("take", "y-plan"), ("advance", "x-plan")):
        proc = subprocess.run(
            [sys.executable, "-m", "maildir_backlog", *args], cwd=inside, env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0, (args, proc.stderr)


def test_a_crash_leftover_in_another_worktree_is_repaired(two):
    """fail killed after writing failed/x in A, before its commit; a janitor in B finishes the move
    into B's failed/. A's untracked copy used to stay forever, unreported."""
    main, b1 = two
    with freeze_time(T0):
        claim.take(main.context(), "x-plan")
        storage.simulate_crash_at("apply:written")
        try:
            with pytest.raises(storage.SimulatedCrash):
                settle.fail(main.context(), "x-plan", "broken")
        finally:
            storage.simulate_crash_at()
        assert (main / "backlog/failed/x-plan.md").exists()  # untracked, in main's worktree
        maintain(b1.context())  # finishes the move into b1's failed/
        assert (b1 / "backlog/failed/x-plan.md").exists()
        result = maintain(main.context())
        assert any("uncommitted copy" in f["detail"] for f in result.data["buckets"]["DUPLICATE"]), result.lines
    assert not (main / "backlog/failed/x-plan.md").exists()
    assert main.git("status", "--porcelain", "--", "backlog").strip() == ""
    assert maintain(main.context()).data["fixed"] == 0


# -- a move killed between `git add` and `git commit` (found by the model checker, maildir-git) --
def head_copies(repo, slug: str) -> list[str]:
    return [p for p in repo.git("ls-tree", "-r", "--name-only", "HEAD", "backlog").split() if p.endswith(f"/{slug}.md")]


def test_take_of_a_task_whose_add_was_killed_after_staging(anybk):
    """`add` killed after staging the new file: `take` used to fail with git's `pathspec … did
    not match any file(s) known to git` every time, and `maintain` did not help."""
    crashed = anybk.run("add", "y", env={"BACKLOG_CRASH_AT": "git:staged"})
    assert crashed.returncode == -9
    proc = anybk.run("take", "y-plan")
    assert proc.returncode == 0, proc.stderr
    assert anybk.run("advance", "y-plan").returncode == 0
    assert head_copies(anybk, "y-plan") == ["backlog/done/y-plan.md"]
    assert anybk.git("status", "--porcelain") == ""


@pytest.mark.parametrize("verbs", [["advance"], ["progress", "advance"], ["fail"]], ids="+".join)
def test_verbs_after_a_claim_killed_after_staging(anybk, verbs):
    """`take` killed after staging (the todo/ removal, and on maildir-git the doing/ copy): the
    holder's next committing verb commits the rest of that move with its own (`progress` commits
    nothing on maildir-shared, where in-flight copies are untracked). They used to fail with a
    raw git error (`advance`, `fail`), or (`progress`) leave the todo/ removal staged while HEAD
    kept the todo/ copy beside the new one, until a `maintain`."""
    anybk.ok("add", "y")
    assert anybk.run("take", "y-plan", env={"BACKLOG_CRASH_AT": "git:staged"}).returncode == -9
    for verb in verbs:
        args = (
            ["progress", "--slug", "y-plan", "a note"]
            if verb == "progress"
            else [verb, "y-plan"] + (["why"] if verb == "fail" else [])
        )
        proc = anybk.run(*args)
        assert proc.returncode == 0, proc.stderr
        commits = verb != "progress" or anybk.path.joinpath("backlog", "doing").is_symlink() is False
        assert not commits or "backlog/todo/y-plan.md" not in head_copies(anybk, "y-plan"), verb
    assert head_copies(anybk, "y-plan") == [f"backlog/{'failed' if verbs == ['fail'] else 'done'}/y-plan.md"]
    assert anybk.git("status", "--porcelain") == ""


# -- a git command of the user's running in the same worktree (found by the load harness) --------
@pytest.mark.parametrize("marker", ["index.lock", "MERGE_HEAD"])
def test_a_file_a_merge_is_bringing_in_is_not_a_crash_leftover(two, marker):
    """A merge writes the work tree first and the index last, holding git's `index.lock`: a
    settled copy it brings in looks, meanwhile, exactly like the crash leftover above. The
    janitor used to remove it; the merge then committed it, and the work tree lost the file.
    MERGE_HEAD: a user's merge that raced a verb's commit stops with its files in the work tree
    while the verb's commit wrote back an index without them (found by the load harness: the
    user's undo of the merge then left the todo/ copy the merge had deleted missing). Nothing is
    removed while either stands; once it is gone, the leftover is one after all."""
    main, b1 = two
    with freeze_time(T0):
        claim.take(main.context(), "x-plan")
        storage.simulate_crash_at("apply:written")
        try:
            with pytest.raises(storage.SimulatedCrash):
                settle.fail(main.context(), "x-plan", "broken")
        finally:
            storage.simulate_crash_at()
        maintain(b1.context())  # b1's failed/ copy is committed, as a merge's would be
        held = main.path / ".git" / marker
        held.write_text(b1.git("rev-parse", "HEAD") if marker == "MERGE_HEAD" else "")  # a git command, a merge
        try:
            result = maintain(main.context())
            assert (main / "backlog/failed/x-plan.md").exists(), result.lines
        finally:
            held.unlink()
        maintain(main.context())  # the lock or the merge gone and the file still untracked: a leftover after all
    assert not (main / "backlog/failed/x-plan.md").exists()


def test_a_move_an_aborted_merge_left_in_the_work_tree_is_not_half_removed(two, monkeypatch):
    """A user's merge of b1 (where x-plan was claimed and failed) into main, and a verb's commit
    on main that wrote back the index meanwhile: the abort (`git reset --merge`) keeps what the
    index no longer shows, so main's work tree holds the merge's move alone: todo/x-plan.md
    deleted, failed/x-plan.md untracked (b1's bytes). The janitor's repair of that pair is
    refused while the merge stands; when the abort ends before the janitor's next step, it used
    to remove the failed/ copy as a crash's leftover and leave the todo/ deletion uncommitted
    (found by the load harness: a later `migrate` refused the dirty tree). The pair is one move:
    left whole, and the next run commits it."""
    from maildir_backlog.repair import duplicates

    main, b1 = two
    merge_head = main.path / ".git" / "MERGE_HEAD"
    real = duplicates.duplicates

    def during_the_merge(sw):  # the duplicates pass meets the merge; it is aborted right after
        merge_head.write_text(b1.git("rev-parse", "HEAD"))
        try:
            real(sw)
        finally:
            merge_head.unlink()

    with freeze_time(T0):
        claim.take(b1.context(), "x-plan")
        settle.fail(b1.context(), "x-plan", "broken")
        theirs = (b1 / "backlog/failed/x-plan.md").read_bytes()
        (main / "backlog/todo/x-plan.md").unlink()
        (main / "backlog/failed").mkdir(exist_ok=True)
        (main / "backlog/failed/x-plan.md").write_bytes(theirs)
    monkeypatch.setattr(duplicates, "duplicates", during_the_merge)  # (the real clock: git's merge wait is timed)
    result = maintain(main.context())
    assert (main / "backlog/failed/x-plan.md").read_bytes() == theirs, result.lines
    monkeypatch.setattr(duplicates, "duplicates", real)
    maintain(main.context())
    assert main.git("status", "--porcelain", "--", "backlog") == ""
    committed = main.git("ls-tree", "-r", "--name-only", "HEAD", "backlog").split()
    assert "backlog/failed/x-plan.md" in committed and "backlog/todo/x-plan.md" not in committed


def test_an_index_written_back_by_a_concurrent_git_command_is_not_a_completion(shared, monkeypatch):
    """A `git merge` in the worktree read the index before `advance` staged its move and wrote it
    back before the commit: the commit found nothing staged, and `advance` used to take that for
    "already committed" and say done with done/x untracked (or, after a merge that reset the
    tree, the task gone). Now it loses the race (exit 3: retry now, SPEC §7), rolled back, with one
    line that says what happened, and the next `advance` completes."""
    shared.ok("add", "x")
    shared.ok("take", "x-plan")
    index = shared.path / ".git" / "index"
    before_add = index.read_bytes()
    real = storage.crash_point

    def stale_write_back(name: str) -> None:
        if name == "git:staged":
            index.write_bytes(before_add)
        real(name)

    monkeypatch.setattr(storage, "crash_point", stale_write_back)
    with pytest.raises(BacklogError) as refused:
        claim.advance(shared.context(), "x-plan")
    assert refused.value.code == 3 and "wrote back the index" in refused.value.message
    assert "\n" not in refused.value.message
    monkeypatch.setattr(storage, "crash_point", real)  # (not undo(): that drops the test's BACKLOG_CLAIMER too)
    assert (shared / "backlog/doing/x-plan.md").exists() and not (shared / "backlog/done/x-plan.md").exists()
    assert shared.git("status", "--porcelain", "--", "backlog") == ""
    claim.advance(shared.context(), "x-plan")
    assert shared.git("status", "--porcelain") == ""
    assert "backlog/done/x-plan.md" in shared.git("ls-tree", "-r", "--name-only", "HEAD", "backlog")


def test_a_merge_aborted_between_staging_and_committing_is_not_a_completion(shared, monkeypatch):
    """A user's `git merge` found the index locked by nothing yet when it started, and locked when
    it went to write it ("Unable to write index."): it stops with MERGE_HEAD written and the index
    and work tree untouched. The user aborts it (`git merge --abort`, i.e. `git reset --merge`)
    while `advance` has staged done/x and not yet committed: git resets the staged file away, from
    the index and the work tree. `advance` must not say done then (it did: exit 0 with the task in
    no pile and no commit, found by the load harness); it loses the race (exit 3), rolled back to
    doing/, and says so in one line. (The merge starts after `advance` looked for one standing,
    `gitcommit.unconcluded`: one that stood already is refused before anything is staged, below.)"""
    shared.ok("add", "x")
    shared.ok("take", "x-plan")
    for branch, name in (("other", "theirs.txt"), ("main", "ours.txt")):  # two branches that really merge
        if branch == "other":
            shared.git("branch", "other")
        shared.git("checkout", "-q", branch)
        (shared / name).write_text(f"{branch}\n")
        shared.git("add", name)
        shared.git("commit", "-qm", name)
    real = storage.crash_point

    def the_users_merge(name: str) -> None:
        if name == "git:looked":  # past the check for a merge standing, nothing staged yet: the merge starts
            lock = shared.path / ".git" / "index.lock"
            lock.write_bytes(b"")  # held by a git command of someone else's the moment the merge writes
            merge = subprocess.run(
                ["git", "merge", "--no-edit", "other"], cwd=shared.path, capture_output=True, text=True
            )
            lock.unlink()
            assert merge.returncode == 1 and "Unable to write index" in merge.stderr, merge.stderr
            assert (shared.path / ".git/MERGE_HEAD").exists()
        if name == "git:staged":  # done/x staged, not committed: the user aborts the stopped merge
            shared.git("merge", "--abort")
        real(name)

    monkeypatch.setattr(storage, "crash_point", the_users_merge)
    code = code_of(claim.advance, shared.context(), "x-plan")
    monkeypatch.setattr(storage, "crash_point", real)  # (not undo(): that drops the test's BACKLOG_CLAIMER too)
    committed = "backlog/done/x-plan.md" in shared.git("ls-tree", "-r", "--name-only", "HEAD", "backlog")
    in_a_pile = sorted(p.parent.name for p in shared.path.glob("backlog/*/x-plan.md"))
    assert (code, committed, in_a_pile) in ((0, True, ["done"]), (3, False, ["doing"])), (code, committed, in_a_pile)


def test_a_users_merge_abort_during_a_claim_keeps_the_claim_whole(shared, monkeypatch):
    """A user's `git merge --abort` (`git reset --merge`) at the moment a claim is about to commit:
    the claim's removal of the todo/ copy is not staged (`git commit --only` takes it from the
    work tree), so the reset keeps it and the commit records it. When the removal was staged
    first, the reset brought the todo/ copy back and `take` left it here beside the claim."""
    from maildir_backlog.context import open_context

    shared.ok("add", "a")
    real = storage.crash_point

    def the_user(name: str) -> None:
        if name == "git:staged":
            shared.git("reset", "-q", "--merge")
        real(name)

    monkeypatch.setattr(storage, "crash_point", the_user)
    monkeypatch.setenv("BACKLOG_CLAIMER", "me")
    assert claim.take(open_context(shared.path), "a-plan").data["pile"] == "doing"
    assert head_copies(shared, "a-plan") == []
    assert not (shared.path / "backlog" / "todo" / "a-plan.md").exists()
    assert shared.git("status", "--porcelain") == ""
