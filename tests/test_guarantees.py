"""SPEC §7: each guarantee with a test that fails without it. Real processes, real races."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import threading
import time
import uuid
from pathlib import Path

import forkrun
import pytest
from conftest import BACKENDS, Repo, add_worktree, backdate, copy_repo, git, snapshot, spawn

from maildir_backlog import storage

# -- helpers -------------------------------------------------------------------------------


def finish(procs):
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        assert "Traceback" not in stderr, stderr
        out.append((p.returncode, stdout, stderr))
    return out


def lock_path(repo: Repo, slug: str) -> Path:
    common = Path(git(repo.path, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())
    return common / "backlog" / ".locks" / f"{slug}.lock"


def waiting_on(proc: subprocess.Popen, path: Path) -> bool:
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        for fd in os.listdir(f"/proc/{proc.pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{proc.pid}/fd/{fd}") == str(path):
                    return True
    return False


@contextlib.contextmanager
def gate(repo: Repo, slug: str):
    """Hold the task's lock so racers pile up behind it having passed their pre-checks."""
    path = lock_path(repo, slug)
    with storage.file_lock(path):
        yield path


def release_together(repo: Repo, slug: str, commands) -> list:
    """Start every (cwd, args) command while holding the lock; release once all wait on it."""
    with gate(repo, slug) as path:
        procs = [spawn(cwd, *args) for cwd, args in commands]
        deadline = time.monotonic() + 60
        while not all(waiting_on(p, path) for p in procs):
            assert time.monotonic() < deadline, "racers never reached the lock"
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
            time.sleep(0.02)
    return finish(procs)


def done_slugs(path: Path) -> list[str]:
    return sorted(p.stem for p in (path / "backlog/done").glob("*.md"))


# -- 1. one claimer ------------------------------------------------------------------------
def test_one_claimer_free_race_across_worktrees(shared):
    for i in range(4):
        shared.ok("add", f"race{i}")
    a = shared.worktree("wa")
    b = shared.worktree("wb")
    for i in range(4):
        slug = f"race{i}-plan"
        procs = [spawn(wt.path, "take", slug) for wt in (a, b, a, b)]
        results = finish(procs)
        winners = [r for r in results if r[0] == 0]
        losers = [r for r in results if r[0] != 0]
        assert len(winners) == 1, results
        for code, _, err in losers:
            # exit 3 for a race lost in the act; exit 1 (naming the holder) when the claim existed before it looked
            assert code in (1, 3), (code, err)
            assert err.strip().splitlines()[-1].startswith(f"backlog: claim conflict: {slug} already in flight")
            if code == 1:
                assert "claimed by tester @ w" in err


def test_regression_a_claim_reading_a_copy_gone_since_its_listing_is_a_lost_race(shared):
    """Found by a CI run of the race above: two racers in one worktree; the loser had listed the
    task's todo copy, the winner moved it, and the loser's read of the file said `No such file or
    directory` where a lost race says `claim conflict`. A claim now looks the task up again."""
    from maildir_backlog.context import open_context
    from maildir_backlog.errors import Held
    from maildir_backlog.state import Model

    shared.ok("add", "gone")
    model = Model(open_context(shared.path))
    truth = model.task("gone-plan")  # its copy listed in todo/
    shared.ok("take", "gone-plan")  # another process wins it meanwhile
    with pytest.raises(Held, match="claim conflict: gone-plan already in flight"):
        model.claimable("gone-plan", truth)


def test_regression_a_retry_reading_a_failed_copy_gone_since_its_lookup_looks_again(shared, monkeypatch):
    """Found by CI's run of tests/test_load.py (session 23): a `retry` looked the task's failed/
    copy up, another command (a racing retry, a user's merge) moved it, and its read said
    `failed/slow02.md: No such file or directory`. The retry now looks the task up again and
    says where it is. (The other retry runs between this one's lookup and its read.)"""
    from maildir_backlog.context import open_context
    from maildir_backlog.errors import BacklogError
    from maildir_backlog.state import Model

    shared.ok("add", "gone")
    shared.ok("take", "gone-plan")
    shared.ok("fail", "gone-plan", "broken")
    model = Model(open_context(shared.path))
    backend, raced = model.ctx.backend, []
    real = backend.read

    def read_after_a_racing_retry(loc):  # type: ignore[no-untyped-def]
        if not raced:
            raced.append(shared.ok("retry", "gone-plan", "again"))
        return real(loc)

    monkeypatch.setattr(backend, "read", read_after_a_racing_retry)
    with pytest.raises(BacklogError) as refused:
        model.retryable("gone-plan")
    assert raced and "No such file" not in refused.value.message
    assert "gone-plan is in todo/, not failed/" in refused.value.message, refused.value.message


def test_one_claimer_gated_race(shared):
    shared.ok("add", "x")
    a, b = shared.worktree("wa"), shared.worktree("wb")
    results = release_together(shared, "x-plan", [(a.path, ["take", "x-plan"]), (b.path, ["take", "x-plan"])])
    assert sorted(r[0] for r in results) == [0, 3], results
    assert "claim conflict: x-plan already in flight" in [r for r in results if r[0] == 3][0][2]
    assert len(list((shared / "backlog/doing").glob("*.md"))) == 1


def test_in_any_in_flight_pile_blocks_a_stale_todo_copy(repo):
    repo.ok("setup", "--backend=maildir-shared", "--pipeline", "todo doing reviewing done")
    repo.ok("add", "x")
    b = repo.worktree("wb")  # b's branch still has todo/x-plan.md
    repo.ok("take", "x-plan")
    repo.ok("advance", "x-plan")  # now in reviewing/, shared
    assert (b / "backlog/todo/x-plan.md").exists()
    proc = b.run("take", "x-plan")  # held before it looked: refused naming the holder, not a lost race
    assert proc.returncode == 1 and "claim conflict: x-plan already in flight (reviewing/" in proc.stderr
    assert "claimed by tester @ main since" in proc.stderr
    proc = b.run("take")
    assert proc.returncode == 0 and proc.stderr.strip() == "no available tasks"
    assert not (repo / "backlog/doing/x-plan.md").exists()


# -- 2. exactly once across worktrees ------------------------------------------------------
def test_settled_task_is_not_claimed_from_a_stale_branch(shared):
    shared.ok("add", "x")
    shared.ok("add", "z")
    b = shared.worktree("wb")  # made before main claims anything
    shared.ok("take", "x-plan")
    shared.ok("advance", "x-plan")
    proc = b.run("take", "x-plan")
    assert proc.returncode == 1 and "settled (done) on branch main" in proc.stderr
    shared.ok("take", "z-plan")
    shared.ok("fail", "z-plan", "broken")
    proc = b.run("take", "z-plan")
    assert proc.returncode == 1 and "settled (failed (broken)) on branch main" in proc.stderr
    proc = b.run("take")
    assert proc.returncode == 0 and proc.stderr.strip() == "no available tasks"
    assert "SETTLED" not in b.ok("status")  # status is unaffected
    shared.ok("retry", "z-plan", "fixed upstream")
    assert shared.ok("take", "z-plan").strip() == "backlog/doing/z-plan.md"  # the retried copy is claimable
    shared.ok("advance", "z-plan", "--pr", "https://example.invalid/9")
    # b's stale copy never is, not even after the retry
    proc = b.run("take", "z-plan")
    assert proc.returncode == 1 and "settled (done) on branch main" in proc.stderr
    # add refuses a slug the ledger records as settled, even where the tree does not know it
    git(b.path, "rm", "-q", "backlog/todo/x-plan.md")
    git(b.path, "commit", "-qm", "drop the stale copy")
    proc = b.run("add", "x")
    assert proc.returncode == 1 and "settled" in proc.stderr


def test_a_retried_task_is_claimable_from_a_worktree_holding_the_stale_copy(shared):
    """SPEC v4 §4: a worktree's own todo/ copy that the ledger blocks gives way to the live copy on
    the intake branch (reopened there by a `retry` after the settlement): listed, offered and
    claimed from there, with the retry's log, and claimed once."""
    shared.ok("add", "z")
    b = shared.worktree("wb")
    shared.ok("take", "z-plan")
    shared.ok("fail", "z-plan", "broken")
    shared.ok("retry", "z-plan", "fixed upstream")
    listed = json.loads(b.ok("--json", "list"))["tasks"]
    assert [(t["slug"], t.get("where")) for t in listed if t["slug"] == "z-plan"] == [("z-plan", "intake:main")], listed
    assert [t["slug"] for t in json.loads(b.ok("--json", "ready"))["tasks"]] == ["z-plan"]
    assert json.loads(b.ok("--json", "status"))["counts"]["todo"] == 1
    claimed = json.loads(b.ok("--json", "take"))
    assert claimed["slug"] == "z-plan" and "fixed upstream" in (b / "backlog/doing/z-plan.md").read_text()
    assert shared.run("take", "z-plan").returncode == 1  # in flight now: one claimer
    b.ok("advance", "z-plan")
    assert b.run("take").stderr.strip().endswith("no available tasks")
    assert shared.run("take").stderr.strip().endswith("no available tasks")


def test_a_named_take_of_a_stale_copy_claims_the_live_intake_copy(shared):
    shared.ok("add", "z")
    b = shared.worktree("wb")
    shared.ok("take", "z-plan")
    shared.ok("fail", "z-plan", "broken")
    shared.ok("retry", "z-plan", "fixed upstream")
    assert b.ok("take", "z-plan").strip() == "backlog/doing/z-plan.md"
    log = (b / "backlog/doing/z-plan.md").read_text()
    assert "retried | fixed upstream" in log and log.count("advanced to=doing") == 2


def _worker(path: Path, log: list, errors: list, env: dict):
    """Take and advance until nothing is left; each command a real process of its own (forked from
    a server that imported the package once: tests/forkrun.py)."""
    while True:
        proc = forkrun.run(path, "--json", "take", env=env)
        if proc.returncode == 3:
            continue  # lost every race this round: explained, retry
        if proc.returncode != 0:
            errors.append(("take", proc.returncode, proc.stderr))
            return
        import json

        slug = json.loads(proc.stdout)["slug"]
        if slug is None:
            return
        proc = forkrun.run(path, "advance", slug, env=env)
        if proc.returncode != 0:
            errors.append(("advance", slug, proc.returncode, proc.stderr))
            return
        log.append(slug)


@pytest.mark.stress  # forty tasks drained by four racing worktrees: the longest test of the file
def test_drain_four_worktrees_exactly_once(shared):
    for i in range(40):
        (shared / f"backlog/todo/t{i:02d}.md").write_text(f"---\npriority: {1 + i % 3}\n---\n\n# Task {i}\n\n---\n")
    git(shared.path, "add", "backlog/todo")
    git(shared.path, "commit", "-qm", "forty tasks")
    trees = [shared.worktree(f"w{i}") for i in range(4)]
    logs = [[] for _ in trees]
    errors: list = []
    env = dict(os.environ)
    threads = [threading.Thread(target=_worker, args=(t.path, logs[i], errors, env)) for i, t in enumerate(trees)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert errors == []
    completed = [s for log in logs for s in log]
    assert len(completed) == 40 and len(set(completed)) == 40
    done = [s for t in trees for s in done_slugs(t.path)]
    assert sorted(done) == sorted(f"t{i:02d}" for i in range(40))
    assert list((shared / "backlog/doing").glob("*.md")) == []
    for t in trees:
        assert git(t.path, "status", "--porcelain") == ""


# -- 4. serialized per task ----------------------------------------------------------------
def test_two_rescues_exactly_one(shared):
    shared.ok("add", "x", "--timeout", "1s")
    a, b = shared.worktree("wa"), shared.worktree("wb")
    shared.ok("take", "x-plan")
    backdate(shared.path, "x-plan")  # claimed an hour ago: the 1 s budget is past, no waiting for the clock
    results = release_together(shared, "x-plan", [(a.path, ["rescue", "x-plan"]), (b.path, ["rescue", "x-plan"])])
    assert sorted(r[0] for r in results) == [0, 3], results
    assert (shared / "backlog/doing/x-plan.md").read_text().count(" rescued ") == 1


def test_janitor_fail_races_owner_advance(shared):
    shared.ok("add", "x")
    shared.ok("take", "x-plan")
    other = shared.worktree("wa")
    results = release_together(
        shared, "x-plan", [(shared.path, ["advance", "x-plan"]), (other.path, ["fail", "x-plan", "janitor", "--force"])]
    )
    assert sorted(r[0] for r in results) == [0, 3], results
    in_done = (shared / "backlog/done/x-plan.md").exists()
    in_failed = (other / "backlog/failed/x-plan.md").exists()
    assert in_done != in_failed
    text = ((shared / "backlog/done/x-plan.md") if in_done else (other / "backlog/failed/x-plan.md")).read_text()
    assert text.count("advanced to=done") + text.count(" failed by=tester | ") == 1
    assert not (shared / "backlog/doing/x-plan.md").exists()


# -- 5. parallel in one worktree -----------------------------------------------------------
def test_ten_parallel_takes_in_one_worktree(anybk):
    for i in range(10):
        (anybk / f"backlog/todo/p{i}.md").write_text(f"# p{i}\n")
    git(anybk.path, "add", "backlog/todo")
    git(anybk.path, "commit", "-qm", "ten")
    results = finish([spawn(anybk.path, "take", f"p{i}") for i in range(10)])
    assert [r[0] for r in results] == [0] * 10, results
    assert sorted(p.stem for p in (anybk / "backlog/doing").glob("*.md")) == [f"p{i}" for i in range(10)]
    assert list((anybk / "backlog/todo").glob("*.md")) == []
    assert git(anybk.path, "status", "--porcelain") == ""
    subjects = git(anybk.path, "log", "-10", "--format=%s").splitlines()
    assert sorted(subjects) == sorted(f"advance(p{i}) → doing (tester @ main)" for i in range(10))
    git(anybk.path, "fsck", "--no-progress")


# -- 3. atomic verbs -----------------------------------------------------------------------
HOOK = (
    "#!/bin/sh\nif [ -e \"$(git rev-parse --git-common-dir)/fail-hook\" ]; then echo 'hook says no' >&2; exit 1; fi\n"
)


def arm_hook(repo: Repo) -> Path:
    common = Path(git(repo.path, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())
    hook = common / "hooks" / "pre-commit"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(HOOK)
    hook.chmod(0o755)
    return common / "fail-hook"


SCENARIOS = {
    "take": ([], ["take", "x-plan"]),
    "advance": ([["take", "x-plan"]], ["advance", "x-plan", "--pr", "https://example.invalid/1"]),
    "cancel": ([["take", "x-plan"]], ["cancel", "x-plan", "no longer needed"]),
    "fail": ([["take", "x-plan"]], ["fail", "x-plan", "broken"]),
    "retry": ([["take", "x-plan"], ["fail", "x-plan", "broken"]], ["retry", "x-plan", "again", "--set", "priority=1"]),
}


@pytest.mark.parametrize("verb", SCENARIOS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_failing_hook_leaves_no_trace(tmp_path, repo_templates, backend, verb):
    setup, command = SCENARIOS[verb]
    # `add x` and the scenario's steps run once per backend and scenario; each case gets a copy
    anybk = copy_repo(repo_templates(backend, ("add", "x"), *map(tuple, setup)), tmp_path / "repo")
    (anybk / "user.txt").write_text("mine\n")
    git(anybk.path, "add", "user.txt")
    marker = arm_hook(anybk)
    marker.write_text("")
    before = snapshot(anybk)
    proc = anybk.run(*command)
    assert proc.returncode == 1, proc
    assert "hook says no" in proc.stderr or "pre-commit" in proc.stderr or proc.stderr.startswith("backlog:")
    assert "\n" not in proc.stderr.strip()
    assert snapshot(anybk) == before
    marker.unlink()
    anybk.ok(*command)  # and the same verb then works


# -- 6. staged work stays yours ------------------------------------------------------------
def test_staged_work_is_never_committed(anybk):
    (anybk / "user.txt").write_text("mine\n")
    git(anybk.path, "add", "user.txt")
    steps = [
        ["add", "x"],
        ["add", "y"],
        ["take", "x-plan"],
        ["progress", "p"],
        ["advance", "x-plan"],
        ["take", "y-plan"],
        ["fail", "y-plan", "r"],
        ["retry", "y-plan", "r2"],
        ["take", "y-plan"],
        ["cancel", "y-plan", "c"],
    ]
    for step in steps:
        anybk.ok(*step)
        assert git(anybk.path, "diff", "--cached", "--name-only").split() == ["user.txt"], step
        assert "user.txt" not in git(anybk.path, "show", "--name-only", "--format=", "HEAD")
    assert "user.txt" not in git(anybk.path, "log", "--name-only", "--format=")


# -- 7. crash-safe moves -------------------------------------------------------------------
@pytest.fixture
def shm_worktree(shared):
    if not Path("/dev/shm").is_dir():
        pytest.skip("no /dev/shm")
    path = Path("/dev/shm") / f"backlog-test-{uuid.uuid4().hex[:8]}"
    try:
        yield Repo(add_worktree(shared.path, path, "shm"))
    finally:
        with contextlib.suppress(Exception):
            git(shared.path, "worktree", "remove", "--force", str(path))
        shutil.rmtree(path, ignore_errors=True)


def test_moves_across_filesystems(shared, shm_worktree):
    shared.ok("add", "x")
    shared.ok("add", "y")
    wt = shm_worktree
    git(wt.path, "merge", "-q", "main")
    common = Path(git(shared.path, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())
    wt.ok("status")
    assert os.stat(wt.path).st_dev != os.stat(common).st_dev, "worktree and shared root on one filesystem"
    wt.ok("take", "x-plan")
    assert (common / "backlog/doing/x-plan.md").exists()
    wt.ok("progress", "tmpfs")
    wt.ok("advance", "x-plan")
    assert "progress | tmpfs" in (wt / "backlog/done/x-plan.md").read_text()
    wt.ok("take", "y-plan")
    wt.ok("fail", "y-plan", "r")
    wt.ok("retry", "y-plan", "r")  # lands on the intake branch (main's worktree, another filesystem)
    assert (shared / "backlog/todo/y-plan.md").exists() and not (wt / "backlog/failed/y-plan.md").exists()
    assert git(wt.path, "status", "--porcelain") == ""


CLAIM_POINTS = ["apply:written", "apply:source-removed", "apply:committed"]
DONE_POINTS = ["apply:terminal-line", "apply:settled", "apply:written", "apply:committed", "apply:shared-removed"]


def _places(repo: Repo, slug: str) -> list[str]:
    common = Path(git(repo.path, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())
    found = []
    for pile in ("todo", "done", "failed"):
        if (repo / f"backlog/{pile}/{slug}.md").exists():
            found.append(pile)
        elif f"backlog/{pile}/{slug}.md" in git(repo.path, "ls-tree", "-r", "--name-only", "HEAD", "backlog"):
            found.append(f"{pile}(HEAD)")
    if (common / f"backlog/doing/{slug}.md").exists():
        found.append("doing")
    return found


@pytest.mark.parametrize("point", CLAIM_POINTS)
def test_crash_during_claim_never_loses_the_task(tmp_path, repo_templates, point):
    shared = copy_repo(repo_templates("maildir-shared", ("add", "x")), tmp_path / "repo")
    original = (shared / "backlog/todo/x-plan.md").read_bytes()
    proc = shared.run("take", "x-plan", env={"BACKLOG_CRASH_AT": point})
    assert proc.returncode == -9
    places = _places(shared, "x-plan")
    assert places, "task exists nowhere"
    if "doing" in places:
        assert (
            (
                Path(git(shared.path, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())
                / "backlog/doing/x-plan.md"
            )
            .read_bytes()
            .startswith(original)
        )


@pytest.mark.parametrize("point", DONE_POINTS)
def test_crash_during_completion_never_loses_the_task(tmp_path, repo_templates, point):
    # `add x`, `take x-plan` and `progress work` run once; each crash point gets a copy
    working = repo_templates("maildir-shared", ("add", "x"), ("take", "x-plan"), ("progress", "work"))
    shared = copy_repo(working, tmp_path / "repo")
    proc = shared.run("advance", "x-plan", env={"BACKLOG_CRASH_AT": point})
    assert proc.returncode == -9
    places = _places(shared, "x-plan")
    assert places and set(places) <= {"doing", "done", "done(HEAD)"}
    common = Path(git(shared.path, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())
    settled = (common / "backlog/.ledger/x-plan").exists()
    if settled:  # settled is only ever recorded after the task's own log says so
        copies = [p for p in (common / "backlog/doing/x-plan.md", shared / "backlog/done/x-plan.md") if p.exists()]
        assert all("advanced to=done" in p.read_text() for p in copies)


# -- 8. no path escapes --------------------------------------------------------------------
def test_shared_task_symlink_is_not_followed(shared, tmp_path):
    shared.ok("add", "x")
    shared.ok("take", "x-plan")
    outside = tmp_path / "outside.md"
    outside.write_text("# not a task\n\n---\n")
    doing = shared / "backlog/doing/x-plan.md"
    doing.unlink()
    doing.symlink_to(outside)
    for args in (["progress", "sneaky", "--slug", "x-plan"], ["advance", "x-plan"], ["show", "x-plan"]):
        proc = shared.run(*args)
        assert proc.returncode == 1 and "symlink" in proc.stderr, (args, proc.stderr)
    assert outside.read_text() == "# not a task\n\n---\n"
    assert doing.is_symlink()
