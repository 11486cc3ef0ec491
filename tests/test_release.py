"""`backlog release SLUG [REASON] [--force]` (SPEC §5): the holder puts an in-flight task back in
todo/ with a `released` line. Not a failure: no ledger entry and no `settled/` record, so the task
is claimable again by anyone (auto-pick included), `status` counts no failure, and the next claim
starts a new clock. On maildir-shared it lands where `retry` lands (the intake branch), on
maildir-git on this branch; with a remote, the clone's `claims/<slug>` goes, leased."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import BACKENDS, LOG_STAMP, Repo, backdate, common_dir, git, holds_open, snapshot, spawn, task_lock
from test_remote import in_flight, make_world, mine, run

T_CLAIM = b"advanced to=doing claimer=tester branch=main"


def claimed(repo: Repo, slug: str = "x") -> Path:
    """`slug`-plan added and taken by `tester` on main: its in-flight file."""
    repo.ok("add", slug)
    repo.ok("take", f"{slug}-plan")
    return repo / f"backlog/doing/{slug}-plan.md"


def log_kinds(path: Path) -> list[str]:
    return [line.split()[2] for line in path.read_text().splitlines() if LOG_STAMP.match(line.encode())]


def status(repo: Repo) -> dict:
    return json.loads(repo.ok("--json", "status"))


# -- the holder ------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_holder_puts_the_task_back_in_todo_with_its_log_kept(repo, backend):
    repo.ok("setup", f"--backend={backend}")
    doing = claimed(repo)
    claim = doing.read_bytes()
    (repo / "scratch.txt").write_text("the user's work\n")
    repo.git("add", "scratch.txt")  # staged: must stay staged and out of the commit (SPEC §7.6)
    out = json.loads(repo.ok("--json", "release", "x-plan", "out of time\ntoday"))
    assert out == {
        "slug": "x-plan",
        "pile": "todo",
        "path": "backlog/todo/x-plan.md",
        "branch": "main",
        "where": "here",
    }
    todo = repo / "backlog/todo/x-plan.md"
    assert not doing.exists() and todo.read_bytes().startswith(claim)  # the claim's lines kept, byte for byte
    last = todo.read_text().splitlines()[-1]
    assert last.endswith(" released | out of time today") and " by=" not in last
    assert log_kinds(todo) == ["advanced", "released"]
    assert repo.head_message() == "release(x-plan) out of time today"
    changed = repo.git("show", "--name-only", "--format=", "HEAD").split()
    assert changed and all(path.startswith("backlog/") for path in changed), changed
    assert repo.git("diff", "--cached", "--name-only").split() == ["scratch.txt"]
    assert repo.git("status", "--porcelain", "--", "backlog") == ""
    # no reason: the line has none, nor the commit message
    repo.ok("take", "x-plan")
    assert repo.ok("release", "x-plan").strip() == "backlog/todo/x-plan.md"
    assert todo.read_text().splitlines()[-1].split()[2:] == ["released"]
    assert repo.head_message() == "release(x-plan)"
    assert log_kinds(todo) == ["advanced", "released", "advanced", "released"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_release_is_no_failure_and_the_next_claim_starts_a_new_clock(repo, backend):
    """Not counted as failed (status, list failed), no ledger entry that would block the task:
    auto-pick takes it again, and the claim's clock starts then, not at the released claim."""
    repo.ok("setup", f"--backend={backend}")
    repo.ok("add", "x", "--timeout", "1h")
    repo.ok("take")
    backdate(repo.path, "x-plan", seconds=2 * 3600)  # past its budget: still its holder's to give back
    repo.ok("release", "x-plan", "stuck")
    first = LOG_STAMP.search((repo / "backlog/todo/x-plan.md").read_bytes()).group(1).decode()
    counts = status(repo)["counts"]
    assert counts["failed"] == 0 and counts["todo"] == 1 and counts["doing"] == 0
    assert json.loads(repo.ok("--json", "list", "failed"))["tasks"] == []
    ledger = common_dir(repo.path) / "backlog" / ".ledger" / "x-plan"
    assert not ledger.exists()
    took = json.loads(repo.ok("--json", "take"))  # auto-pick: the ledger does not block it
    assert took["slug"] == "x-plan" and took["blocked_by"] == []
    flying = status(repo)["in_flight"]
    assert [t["slug"] for t in flying] == ["x-plan"] and flying[0]["stale"] is False
    assert flying[0]["age_seconds"] < 600 and took["since"] > first  # a new clock, not the released claim's
    repo.ok("advance", "x-plan")  # and it completes as any task does
    assert status(repo)["counts"]["done"] == 1


def test_a_retried_task_released_stays_claimable(shared):
    """The ledger's `retried` entry does not block the released copy (same generation)."""
    claimed(shared)
    shared.ok("fail", "x-plan", "broke")
    shared.ok("retry", "x-plan", "fixed")
    shared.ok("take")
    shared.ok("release", "x-plan")
    assert json.loads(shared.ok("--json", "take"))["slug"] == "x-plan"
    assert log_kinds(shared / "backlog/doing/x-plan.md")[-3:] == ["advanced", "released", "advanced"]


# -- ownership -------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_only_the_holder_releases_unless_forced(repo, backend):
    """Another claimer (two agents on one branch are two holders) is refused naming the holder,
    and nothing changes; with --force the line records by=<actor>."""
    repo.ok("setup", f"--backend={backend}")
    claimed(repo)
    before = snapshot(repo)
    proc = repo.run("--json", "release", "x-plan", "mine now", env={"BACKLOG_CLAIMER": "other"})
    assert proc.returncode == 1
    err = json.loads(proc.stdout)
    assert err["kind"] == "held" and err["holder"]["claimer"] == "tester" and err["holder"]["branch"] == "main"
    assert "--force" in err["error"]
    assert snapshot(repo) == before
    repo.ok("release", "x-plan", "helping out", "--force", env={"BACKLOG_CLAIMER": "other"})
    assert (repo / "backlog/todo/x-plan.md").read_text().splitlines()[-1].split()[2:] == [
        "released",
        "by=other",
        "|",
        "helping",
        "out",
    ]


def test_another_branch_is_refused_and_force_lands_on_the_intake_branch(shared):
    claimed(shared)
    agent = shared.worktree("a1")
    proc = agent.run("release", "x-plan")
    assert proc.returncode == 1 and "claimed by tester @ main" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    out = json.loads(agent.ok("--json", "release", "x-plan", "--force", env={"BACKLOG_CLAIMER": "lead"}))
    assert out["where"] == "intake:main"
    assert "released by=lead" in (shared / "backlog/todo/x-plan.md").read_text()
    assert shared.git("status", "--porcelain") == "" and agent.git("status", "--porcelain") == ""


# -- maildir-shared: back where `retry` lands -------------------------------------------------
def test_an_agents_release_lands_on_the_intake_branch_and_anyone_takes_it(shared):
    """A worktree on its own branch releases: the task lands in todo/ of main (checked out in the
    main worktree, replacing main's pre-claim copy), the shared copy goes, and another worktree's
    auto-pick (a process of its own) claims it."""
    shared.ok("add", "x")
    agent = shared.worktree("a1")
    agent.ok("take", "x-plan")
    claim = (agent / "backlog/doing/x-plan.md").read_bytes()
    out = agent.run("--json", "release", "x-plan", "handing over")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {
        "slug": "x-plan",
        "pile": "todo",
        "path": "backlog/todo/x-plan.md",
        "branch": "main",
        "where": "intake:main",
    }
    assert "released to todo/ of the intake branch main" in out.stderr
    todo = shared / "backlog/todo/x-plan.md"
    assert todo.read_bytes().startswith(claim) and log_kinds(todo) == ["advanced", "released"]
    assert shared.head_message() == "release(x-plan) handing over"
    assert not (common_dir(shared.path) / "backlog/doing/x-plan.md").exists()
    assert shared.git("status", "--porcelain") == "" and agent.git("status", "--porcelain") == ""
    other = shared.worktree("a2")
    proc = spawn(other.path, "--json", "take", env={"BACKLOG_CLAIMER": "bob"})
    took, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(took)["slug"] == "x-plan" and json.loads(took)["claimer"] == "bob"
    text = (other / "backlog/doing/x-plan.md").read_text()
    assert "released | handing over" in text and "claimer=bob branch=a2" in text.splitlines()[-1]


def test_release_with_the_intake_branch_checked_out_nowhere(shared):
    agents = shared / "backlog/AGENTS.md"
    agents.write_text(agents.read_text().replace("maildir-shared\n", "maildir-shared\n\n- `intake: main`\n", 1))
    shared.git("commit", "-q", "-m", "declare the intake branch", "--", "backlog/AGENTS.md")
    shared.ok("add", "x")
    agent = shared.worktree("a1")
    agent.ok("take", "x-plan")
    shared.git("checkout", "-q", "--detach")
    out = json.loads(agent.ok("--json", "release", "x-plan", "later"))
    assert out["where"] == "intake:main"
    assert shared.git("show", "main:backlog/todo/x-plan.md").rstrip().endswith("released | later")
    assert shared.git("log", "-1", "--format=%s", "main").strip() == "release(x-plan) later"
    assert in_flight(agent) == []
    assert json.loads(agent.ok("--json", "take"))["slug"] == "x-plan"


# -- atomic ----------------------------------------------------------------------------------
def refusing_hook(repo: Repo) -> Path:
    hook = common_dir(repo.path) / "hooks" / "pre-commit"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text("#!/bin/sh\necho 'hook says no' >&2\nexit 1\n")
    hook.chmod(0o755)
    return hook


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_failing_commit_leaves_everything_as_it_was(repo, backend):
    repo.ok("setup", f"--backend={backend}")
    claimed(repo)
    before = snapshot(repo)
    refusing_hook(repo)
    proc = repo.run("release", "x-plan", "nope")
    assert proc.returncode == 1 and "hook says no" in proc.stderr and "Traceback" not in proc.stderr
    assert snapshot(repo) == before


def test_a_failing_commit_on_the_intake_branch_leaves_both_worktrees_as_they_were(shared):
    shared.ok("add", "x")
    agent = shared.worktree("a1")
    agent.ok("take", "x-plan")
    before = (snapshot(shared), snapshot(agent))
    hook = refusing_hook(shared)
    proc = agent.run("release", "x-plan", "nope")
    assert proc.returncode == 1 and "hook says no" in proc.stderr
    assert (snapshot(shared), snapshot(agent)) == before
    hook.unlink()
    agent.ok("release", "x-plan", "now")
    assert in_flight(agent) == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_killed_after_writing_the_todo_copy_the_janitor_finishes_the_release(repo, backend):
    """SIGKILL with the todo copy written but not committed: the task is in two places, never in
    none (SPEC §7.7), and `maintain` keeps the copy that holds the other (the released one)."""
    repo.ok("setup", f"--backend={backend}")
    claimed(repo)
    proc = repo.run("release", "x-plan", "crash", env={"BACKLOG_CRASH_AT": "apply:written"})
    assert proc.returncode != 0
    assert (repo / "backlog/doing/x-plan.md").exists() and (repo / "backlog/todo/x-plan.md").exists()
    repo.ok("maintain")
    assert not (repo / "backlog/doing/x-plan.md").exists()
    assert log_kinds(repo / "backlog/todo/x-plan.md") == ["advanced", "released"]
    assert repo.git("status", "--porcelain") == ""
    assert json.loads(repo.ok("--json", "take"))["slug"] == "x-plan"


def test_a_release_killed_before_its_commit_can_be_run_again(shared):
    """A forced release from main of a1's claim, killed with main's todo/ copy rewritten but not
    committed (the janitor leaves main's copy alone: a1 holds the task): run again, it replaces
    that copy (the claim's copy and more) instead of refusing it."""
    shared.ok("add", "x")
    agent = shared.worktree("a1")
    agent.ok("take", "x-plan")
    proc = shared.run("release", "x-plan", "first", "--force", env={"BACKLOG_CRASH_AT": "apply:written"})
    assert proc.returncode != 0 and in_flight(shared) == ["x-plan"]
    assert "released" in (shared / "backlog/todo/x-plan.md").read_text()
    shared.ok("release", "x-plan", "--force")
    assert in_flight(shared) == [] and log_kinds(shared / "backlog/todo/x-plan.md") == ["advanced", "released"]
    assert shared.git("status", "--porcelain") == "" and shared.head_message() == "release(x-plan)"


def test_killed_after_landing_on_the_intake_branch_the_task_is_still_held_and_released_again(shared):
    """SIGKILL after the landing's commit, before the shared copy goes: the task is still in
    flight (its holder's), never in none; the release run again replaces the landed copy."""
    shared.ok("add", "x")
    agent = shared.worktree("a1")
    agent.ok("take", "x-plan")
    proc = agent.run("release", "x-plan", "crash", env={"BACKLOG_CRASH_AT": "release:landed"})
    assert proc.returncode != 0
    assert in_flight(agent) == ["x-plan"] and "released" in (shared / "backlog/todo/x-plan.md").read_text()
    assert json.loads(agent.ok("--json", "show", "x-plan"))["pile"] == "doing"
    agent.ok("maintain")
    assert in_flight(agent) == ["x-plan"]
    agent.ok("release", "x-plan", "again")
    assert in_flight(agent) == [] and log_kinds(shared / "backlog/todo/x-plan.md") == ["advanced", "released"]
    assert shared.git("status", "--porcelain") == "" and agent.git("status", "--porcelain") == ""


def test_the_lock_is_taken_and_the_task_checked_again_under_it(shared):
    """The release passes its first look, waits for the task's lock, and meanwhile the task is
    finished elsewhere: the re-check under the lock says so (exit 3) and nothing moves back."""
    doing = claimed(shared)
    lock = common_dir(shared.path) / "backlog" / ".locks" / "x-plan.lock"
    with task_lock(shared.path, "x-plan"):
        proc = spawn(shared.path, "--json", "release", "x-plan")
        deadline = time.monotonic() + 60
        while not holds_open(proc.pid, lock):
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        done = shared / "backlog/done/x-plan.md"
        done.write_bytes(doing.read_bytes() + b"- 2026-05-16T14:22:00Z advanced to=done\n")
        doing.unlink()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert json.loads(out)["kind"] == "conflict"
    assert not (shared / "backlog/todo/x-plan.md").exists() and done.exists()


# -- refusals --------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_task_not_in_flight_is_refused_saying_where_it_is(repo, backend):
    repo.ok("setup", f"--backend={backend}")
    repo.ok("add", "x")
    proc = repo.run("--json", "release", "x-plan")
    assert proc.returncode == 1 and "x-plan is in todo/, not in flight" in json.loads(proc.stdout)["error"]
    repo.ok("take", "x-plan")
    repo.ok("advance", "x-plan")
    proc = repo.run("--json", "release", "x-plan")
    err = json.loads(proc.stdout)
    assert proc.returncode == 1 and err["kind"] == "settled" and err["settled"]["state"] == "done"
    assert "done/" in err["error"]
    proc = repo.run("--json", "release", "nope-plan")
    assert proc.returncode == 1 and json.loads(proc.stdout)["kind"] == "not-found"


def test_a_task_that_left_flight_on_another_branch_says_what_became_of_it(shared):
    shared.ok("add", "x")
    agent = shared.worktree("a1")
    agent.ok("take", "x-plan")
    agent.ok("fail", "x-plan", "gave up")
    proc = shared.run("--json", "release", "x-plan")
    err = json.loads(proc.stdout)
    assert proc.returncode == 1 and err["kind"] == "settled", err
    assert err["settled"]["state"] == "failed" and err["settled"]["branch"] == "a1"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("args", [("../x",), ("X-plan",), ("-x",), ("x-plan", ""), ("x-plan", " \n\t ")])
def test_bad_input_exits_2_with_one_line_and_changes_nothing(repo, backend, args):
    repo.ok("setup", f"--backend={backend}")
    claimed(repo)
    before = snapshot(repo)
    proc = repo.run("release", *args)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert snapshot(repo) == before


# -- across clones (SPEC §8) ------------------------------------------------------------------
def test_a_release_in_one_clone_frees_the_task_for_another(tmp_path):
    """Clone a releases: `claims/alpha` goes from the remote (leased; no `settled/` record), so
    clone b's named take and auto-pick claim it. While a holds it, b's release is refused naming
    a's claimer and branch (exit 1, held), and nothing changes on the remote."""
    world = make_world(tmp_path / "w", ["alpha", "beta", "gamma"])
    a, b = world.clone("a"), world.clone("b")
    assert run(a.path, "take", "alpha", claimer="alice").returncode == 0
    held = world.claims()
    proc = run(b.path, "--json", "release", "alpha", claimer="bob")
    err = json.loads(proc.stdout)
    assert proc.returncode == 1 and err["kind"] == "held", err
    assert err["holder"]["claimer"] == "alice" and err["holder"]["branch"] == "main"
    assert world.claims() == held and world.settled() == {}
    proc = run(a.path, "release", "alpha", "not mine after all", claimer="alice")
    assert proc.returncode == 0, proc.stderr
    assert world.claims() == {} and world.settled() == {} and mine(a) == {}
    assert in_flight(a) == [] and "released | not mine" in (a.path / "backlog/todo/alpha.md").read_text()
    for slug in ("beta", "gamma"):  # b's auto-pick reaches alpha once the others are taken
        assert run(b.path, "take", slug, claimer="bob").returncode == 0
    proc = run(b.path, "--json", "take", claimer="bob")
    assert proc.returncode == 0 and json.loads(proc.stdout)["slug"] == "alpha", proc.stderr
    assert set(world.claims()) == {"alpha", "beta", "gamma"}


def test_a_failing_commit_puts_the_remote_claim_back(tmp_path):
    world = make_world(tmp_path / "w", ["alpha"])
    a = world.clone("a")
    assert run(a.path, "take", "alpha").returncode == 0
    held, memory = world.claims(), mine(a)
    refusing_hook(a)
    proc = run(a.path, "release", "alpha")
    assert proc.returncode == 1 and "hook says no" in proc.stderr
    assert world.claims() == held and mine(a) == memory and in_flight(a) == ["alpha"]
    b = world.clone("b")
    assert run(b.path, "take", "alpha").returncode == 1  # still held


def test_killed_after_the_remote_let_go_the_janitor_keeps_the_claim_whole(tmp_path):
    """SIGKILL right after `claims/alpha` was deleted, before anything moved here: `maintain`
    publishes the claim again (the task is still in flight here, never lost, never held by no one
    while a copy is in flight), and the release run again frees it for every clone."""
    world = make_world(tmp_path / "w", ["alpha"])
    a = world.clone("a")
    assert run(a.path, "take", "alpha").returncode == 0
    proc = run(a.path, "release", "alpha", env={"BACKLOG_CRASH_AT": "remote:released"})
    assert proc.returncode != 0 and world.claims() == {} and in_flight(a) == ["alpha"]
    assert run(a.path, "maintain").returncode == 0
    assert set(world.claims()) == {"alpha"} and mine(a) == {"claims/alpha": world.claims()["alpha"]}
    assert run(a.path, "release", "alpha").returncode == 0
    assert world.claims() == {} and mine(a) == {} and in_flight(a) == []
    b = world.clone("b")
    assert run(b.path, "take", "alpha").returncode == 0


def test_the_released_line_reads_back(shared):
    """`show` parses the `released` line (the log grammar knows the kind)."""
    claimed(shared)
    shared.ok("release", "x-plan", "later")
    shown = json.loads(shared.ok("--json", "show", "x-plan"))
    assert [e["kind"] for e in shown["log"]] == ["advanced", "released"]
    assert shown["log"][-1]["text"] == "later" and shown["pile"] == "todo"
    assert git(shared.path, "log", "-1", "--format=%s").strip() == "release(x-plan) later"
    assert T_CLAIM in (shared / "backlog/todo/x-plan.md").read_bytes()
