"""One queue per clone (SPEC §4, §5 *Truthful views*): fresh worktrees see the claims at once,
tasks added on the intake branch reach every agent, and the views agree with what take does."""

from __future__ import annotations

import json
import os
import subprocess
import threading

import forkrun
from conftest import git, spawn


# -- fresh worktrees -----------------------------------------------------------------------------
def test_git_worktree_add_leaves_the_symlinks_and_runs_the_users_hook(repo):
    hook = repo / ".git/hooks/post-checkout"
    hook.write_text('#!/bin/sh\necho "$3" >> "$(git rev-parse --git-common-dir)/user-hook-ran"\nexit 0\n')
    hook.chmod(0o755)
    repo.ok("setup", "--backend=maildir-shared")
    repo.ok("add", "x")
    repo.ok("take", "x-plan")
    (repo / ".git/user-hook-ran").unlink(missing_ok=True)
    proc = subprocess.run(
        ["git", "worktree", "add", "-q", "-b", "w", str(repo.path.parent / "w")],
        cwd=repo.path,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr  # quiet
    assert sorted(os.listdir(repo.path.parent / "w/backlog/doing")) == ["x-plan.md"]
    assert (repo / ".git/user-hook-ran").read_text() == "1\n"  # the user's hook still ran, once
    repo.ok("setup", "--hooks")  # idempotent
    assert (repo / ".git/hooks/post-checkout.pre-backlog").exists()


def test_the_hook_honours_core_hookspath(repo):
    git(repo.path, "config", "core.hooksPath", ".githooks")
    out = repo.ok("setup", "--backend=maildir-shared")
    assert (repo / ".githooks/post-checkout").exists() and ".githooks" in out
    git(repo.path, "worktree", "add", "-q", "-b", "w", str(repo.path.parent / "w"))
    assert os.path.islink(repo.path.parent / "w/backlog/doing")


def test_a_committed_hook_is_never_read_through(repo, tmp_path):
    """With `core.hooksPath` in the work tree the hook may be a committed file (untrusted input).
    A symlink to `/dev/zero` made `setup` read until memory ran out (session 29: `internal error:
    MemoryError` under a limit, the machine's memory without one); a symlink out of the repository
    was read through. Such a hook is kept as the chained one, unread, and the file it leads to is
    left as it was; a FIFO does not block the setup either."""
    victim = tmp_path / "victim.sh"
    victim.write_text("#!/bin/sh\nexit 0\n")
    victim.chmod(0o644)
    git(repo.path, "config", "core.hooksPath", ".githooks")
    hooks = repo / ".githooks"
    hooks.mkdir()
    (hooks / "post-checkout").symlink_to("/dev/zero")
    proc = repo.run("setup", "--backend=maildir-shared")
    assert proc.returncode == 0, proc.stderr
    assert os.readlink(hooks / "post-checkout.pre-backlog") == "/dev/zero"  # kept, chained, unread
    assert "maildir-backlog" in (hooks / "post-checkout").read_text()
    for name in ("post-checkout", "post-checkout.pre-backlog"):
        os.unlink(hooks / name)
    (hooks / "post-checkout").symlink_to(victim)
    repo.ok("setup", "--hooks")
    assert os.readlink(hooks / "post-checkout.pre-backlog") == str(victim)
    assert victim.read_text() == "#!/bin/sh\nexit 0\n" and victim.stat().st_mode & 0o777 == 0o644
    for name in ("post-checkout", "post-checkout.pre-backlog"):
        os.unlink(hooks / name)
    os.mkfifo(hooks / "post-checkout")
    proc = repo.run("setup", "--hooks", timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_a_committed_hooks_directory_leading_out_is_refused(repo, tmp_path):
    """Session 29: with `core.hooksPath=.githooks` and `.githooks` a committed symlink to a
    directory outside, `setup` wrote its hook out there. It refuses in one line, writes nothing
    outside, and leaves no backlog (SPEC §7.3)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / ".githooks").symlink_to(outside)
    git(repo.path, "add", ".githooks")
    git(repo.path, "commit", "-q", "-m", "a pull request's link")
    git(repo.path, "config", "core.hooksPath", ".githooks")
    proc = repo.run("setup", "--backend=maildir-shared")
    assert proc.returncode == 1 and "leads out of the work tree" in proc.stderr, proc.stderr
    assert list(outside.iterdir()) == [] and not (repo / "backlog").exists()


def test_a_failing_user_hook_keeps_its_status_and_our_part_never_fails(repo):
    hook = repo / ".git/hooks/post-checkout"
    hook.write_text("#!/bin/sh\nexit 7\n")
    hook.chmod(0o755)
    repo.ok("setup", "--backend=maildir-shared")
    proc = subprocess.run(
        ["git", "worktree", "add", "-q", "-b", "w", str(repo.path.parent / "w")],
        cwd=repo.path,
        capture_output=True,
        text=True,
    )
    assert os.path.islink(repo.path.parent / "w/backlog/doing")  # the checkout and the symlinks are there
    assert proc.returncode == 7  # git reports the user's own hook status, as without us


# -- the intake branch ---------------------------------------------------------------------------
def test_a_task_added_on_main_reaches_every_worktree_and_is_claimed_once(shared):
    shared.ok("add", "slow", "--priority", "999")
    agents = [shared.worktree(f"a{i}") for i in range(3)]
    shared.ok("add", "hotfix", "--priority", "1")  # after the worktrees branched
    for agent in agents:
        assert json.loads(agent.ok("--json", "ready"))["tasks"][0] == {
            "slug": "hotfix-plan",
            "title": "hotfix",
            "priority": 1,
            "where": "intake:main",
        }
    procs = [spawn(a.path, "--json", "take", "hotfix-plan") for a in agents]
    results = [(p.wait(60), *p.communicate()) for p in procs]
    assert sorted(code for code, _, _ in results) in ([0, 1, 1], [0, 1, 3], [0, 3, 3]), results
    winner = agents[[code for code, _, _ in results].index(0)]
    winner.ok("advance", "hotfix-plan")
    assert (winner / "backlog/done/hotfix-plan.md").exists()
    for agent in agents:  # nobody can take it again
        assert "hotfix-plan" not in agent.ok("ready")
        assert agent.run("take", "hotfix-plan").returncode == 1
    for agent in agents:
        git(shared.path, "merge", "-q", "--no-edit", agent.path.name)
    shared.ok("maintain")
    assert [p.name for p in (shared.path / "backlog").glob("*/hotfix-plan.md")] == ["hotfix-plan.md"]
    assert (shared / "backlog/done/hotfix-plan.md").exists()
    assert shared.ok("maintain").strip().splitlines()[-1].startswith("OK:")


def test_views_agree_with_what_take_does(shared):
    shared.ok("add", "a", "--priority", "2")
    shared.ok("add", "b", "--priority", "3")
    w = shared.worktree("w")
    shared.ok("add", "c", "--priority", "1")
    shared.ok("take", "a-plan")  # in flight, claimed on main: w's todo copy is stale
    listing = {t["slug"]: t for t in json.loads(w.ok("--json", "list"))["tasks"]}
    assert listing["a-plan"]["state"] == "in flight" and "tester @ main" in listing["a-plan"]["detail"]
    assert listing["c-plan"]["where"] == "intake:main" and listing["c-plan"]["state"] == "ready"
    status = json.loads(w.ok("--json", "status"))
    assert status["counts"]["todo"] == 2 and status["counts"]["doing"] == 1  # 3 tasks, each counted once
    order = [t["slug"] for t in json.loads(w.ok("--json", "ready"))["tasks"]]
    assert order == ["c-plan", "b-plan"]
    for expected in order:
        assert json.loads(w.ok("--json", "take"))["slug"] == expected
    assert w.run("take").stderr.strip() == "no available tasks"


def test_take_with_tasks_only_in_an_intake_pile_says_how_to_promote(repo):
    repo.ok("setup", "--backend=maildir-shared", "--pipeline", "inbox todo doing done")
    repo.ok("add", "idea")
    proc = repo.run("take")
    assert proc.returncode == 0 and "no available tasks" in proc.stderr
    assert "1 task wait in inbox/" in proc.stderr and "backlog advance idea-plan" in proc.stderr
    assert repo.ok("advance", "idea-plan").strip() == "backlog/todo/idea-plan.md"
    assert repo.ok("take").strip() == "backlog/doing/idea-plan.md"


def test_drain_while_main_adds_tasks(shared):
    """4 worktrees drain while main adds tasks (nobody merges): each task completed exactly once,
    and no worker gives up while main still has ready work."""
    workers = [shared.worktree(f"w{i}") for i in range(4)]
    total = 24
    added = threading.Event()
    completions: list[str] = []
    errors: list[tuple] = []
    lock = threading.Lock()

    def producer() -> None:
        for i in range(total):
            shared.ok("add", f"t{i:02d}")
        added.set()

    # taken before the producer starts: its in-process `add`s swap os.environ while they run
    env = dict(os.environ)
    forkrun.ready()

    def worker(w) -> None:
        """Take and advance; each command a real process of its own (forked from a server that
        imported the package once: tests/forkrun.py), racing the others and the producer."""
        idle = 0
        while idle < 3:
            proc = forkrun.run(w.path, "--json", "take", env=env)
            if proc.returncode == 3:
                continue
            if proc.returncode != 0:
                errors.append(("take", proc.stderr))
                return
            slug = json.loads(proc.stdout)["slug"]
            if slug is None:
                idle = idle + 1 if added.is_set() else 0
                continue
            proc = forkrun.run(w.path, "advance", slug, env=env)
            if proc.returncode != 0:
                errors.append(("advance", slug, proc.stderr))
                return
            with lock:
                completions.append(slug)

    threads = [threading.Thread(target=producer)] + [threading.Thread(target=worker, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors, errors
    assert sorted(completions) == [f"t{i:02d}-plan" for i in range(total)]  # each once, none missing
    done = [p.name for w in workers for p in (w.path / "backlog/done").glob("*.md")]
    assert sorted(done) == sorted(f"{s}.md" for s in completions)
    assert not list((shared / "backlog/doing").glob("*.md"))


def test_ties_of_one_second_rank_alike_in_every_worktree(shared):
    """SPEC §5: priority, then newest (the second git recorded), then slug; the same order in
    every worktree and clone. Tasks added in the same second on two branches rank by slug
    everywhere, whichever worktree read the history first."""
    when = {"GIT_COMMITTER_DATE": "2026-05-16T14:22:00Z", "GIT_AUTHOR_DATE": "2026-05-16T14:22:00Z"}
    side = shared.worktree("side")
    shared.ok("add", "zeta", env=when)
    warm = [t["slug"] for t in json.loads(shared.ok("--json", "ready"))["tasks"]]  # this worktree reads now
    side.ok("add", "alpha", "--here", env=when)
    shared.git("merge", "-q", "--no-edit", "side")
    fresh = shared.worktree("fresh")  # reads the whole history at once
    orders = {json.dumps([t["slug"] for t in json.loads(w.ok("--json", "ready"))["tasks"]]) for w in (shared, fresh)}
    assert warm == ["zeta-plan"] and orders == {json.dumps(["alpha-plan", "zeta-plan"])}


# -- the intake branch's tasks as each worktree reads them (`intake.briefs`, parsed once per copy) ----
# Found in session 20 reading the intake cache: it was keyed by the blob alone, so two tasks of the
# same bytes were one (the worktree offered one of them, and counted one), and a default priority
# changed in AGENTS.md never reached a cached task that gives none.


def test_two_intake_tasks_of_the_same_bytes_are_both_offered_everywhere(shared):
    w1 = shared.worktree("w1")
    body = "---\npriority: 3\n---\n\n# Same words\n"
    for slug in ("a-plan", "b-plan"):
        (shared / f"backlog/todo/{slug}.md").write_text(body)
    shared.git("add", "-A", "backlog")
    shared.git("commit", "-q", "-m", "two tasks, one text")
    for wt in (shared, w1):
        assert [t["slug"] for t in json.loads(wt.ok("--json", "ready"))["tasks"]] == ["a-plan", "b-plan"]
        assert json.loads(wt.ok("--json", "status"))["counts"]["todo"] == 2
    assert {json.loads(w1.ok("--json", "take"))["slug"] for _ in range(2)} == {"a-plan", "b-plan"}


def test_a_default_priority_changed_in_agents_md_reaches_the_intake_tasks_already_read(shared):
    w1 = shared.worktree("w1")
    (shared / "backlog/todo/plain-plan.md").write_text("# No priority given\n")
    (shared / "backlog/todo/three-plan.md").write_text("---\npriority: 3\n---\n\n# Three\n")
    shared.git("add", "-A", "backlog")
    shared.git("commit", "-q", "-m", "two tasks")
    assert [t["slug"] for t in json.loads(w1.ok("--json", "ready"))["tasks"]] == ["three-plan", "plain-plan"]
    agents = w1 / "backlog/AGENTS.md"
    text = agents.read_text()
    assert "`priority: 999`" in text
    agents.write_text(text.replace("`priority: 999`", "`priority: 1`"))
    tasks = json.loads(w1.ok("--json", "ready"))["tasks"]
    assert [(t["slug"], t["priority"]) for t in tasks] == [("plain-plan", 1), ("three-plan", 3)]
