"""One queue across clones (SPEC §8): with `remote: origin` declared, the queue is the remote's
intake branch. `add` pushes its intake commit there (a fast-forward by compare-and-swap); `ready`
and `take` in another clone read it as last fetched, fetching only when the listing shows that it
moved; a remote that refuses the push (a protected branch) leaves the task committed here with one
warning line. Real clones of a bare remote over file://, real processes where they race."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import Repo, git
from test_remote import make_world, run


def two_clones(tmp_path: Path) -> tuple[Repo, Repo, Path]:
    world = make_world(tmp_path / "w", ["alpha"])
    a, b = world.clone("a"), world.clone("b")
    for clone in (a, b):  # the layout's self-heal says its lines once: not part of what is checked
        assert run(clone.path, "status").returncode == 0
    return a, b, world.server


def ready(clone: Repo) -> list[str]:
    out = run(clone.path, "--json", "ready")
    assert out.returncode == 0, out.stderr
    return [t["slug"] for t in json.loads(out.stdout)["tasks"]]


def remote_main(server: Path) -> str:
    return git(server, "rev-parse", "refs/heads/main").strip()


def todo_on(server: Path, rev: str = "main") -> list[str]:
    out = git(server, "ls-tree", "--name-only", f"{rev}:backlog/todo/")
    return sorted(name.removesuffix(".md") for name in out.split())


def test_add_in_one_clone_is_ready_and_taken_in_another(tmp_path):
    a, b, server = two_clones(tmp_path)
    assert ready(b) == ["alpha"]  # b has fetched the remote's main as it was
    added = run(a.path, "add", "fresh", "plan", "--priority", "1")
    assert added.returncode == 0, added.stderr
    assert "warning" not in added.stderr
    assert "fresh-plan" in todo_on(server)  # a fast-forward of the remote's main
    assert git(a.path, "rev-parse", "main").strip() == remote_main(server)  # the same commit: no parting
    # b: no pull, no merge; its `ready` sees the remote's main, fetched because the listing says it moved
    assert ready(b) == ["fresh-plan", "alpha"]
    assert not (b / "backlog/todo/fresh-plan.md").exists()
    taken = run(b.path, "--json", "take", claimer="bee")
    assert taken.returncode == 0, taken.stderr
    claimed = json.loads(taken.stdout)
    assert claimed["slug"] == "fresh-plan"
    common = Path(git(b.path, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())
    content = (common / "backlog/doing/fresh-plan.md").read_text()
    assert content.startswith("---\npriority: 1\n")  # copied from the remote's intake commit
    assert "claimer=bee" in content
    assert "fresh-plan" not in ready(a)  # a sees b's claim (the remote's claims/)


def test_take_by_name_of_a_task_only_the_remote_holds(tmp_path):
    a, b, server = two_clones(tmp_path)
    assert run(a.path, "add", "named", "plan").returncode == 0
    taken = run(b.path, "take", "named-plan", claimer="bee")
    assert taken.returncode == 0, taken.stderr


def test_two_clones_add_at_once_both_land(tmp_path):
    a, b, server = two_clones(tmp_path)
    # b's view of the remote's main is old when it adds: its push loses the compare-and-swap,
    # fetches, rebuilds on the new tip and lands
    start = int(git(server, "rev-list", "--count", "main"))
    assert run(a.path, "add", "from-a", "plan").returncode == 0
    second = run(b.path, "add", "from-b", "plan")
    assert second.returncode == 0, second.stderr
    assert "warning" not in second.stderr
    assert {"from-a-plan", "from-b-plan"} <= set(todo_on(server))
    assert int(git(server, "rev-list", "--count", "main")) == start + 2  # a's add, b's add rebuilt on it
    # at the same time, in real processes: both land, in some order
    procs = [run_async(clone, f"race-{n}") for n, clone in enumerate((a, b, a, b))]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert "warning" not in err, err
    assert {f"race-{n}-plan" for n in range(4)} <= set(todo_on(server))
    assert sorted(ready(a)) == sorted(ready(b))


def run_async(clone: Repo, slug: str):
    from conftest import spawn

    return spawn(clone.path, "add", slug, "plan")


def test_slug_that_appeared_on_the_remote_is_refused_as_taken(tmp_path):
    a, b, server = two_clones(tmp_path)
    assert run(a.path, "add", "same", "plan").returncode == 0
    second = run(b.path, "add", "same", "plan")
    assert second.returncode == 1
    assert "already exists" in second.stderr
    assert not (b / "backlog/todo/same-plan.md").exists()
    assert git(b.path, "log", "-1", "--format=%s", "main").strip() != "add(same-plan)"


def protect_main(server: Path) -> None:
    hook = server / "hooks" / "update"
    hook.write_text(
        '#!/bin/sh\ncase "$1" in refs/heads/main) echo "main is protected: open a pull request" >&2; exit 1;; esac\nexit 0\n'
    )
    hook.chmod(0o755)


def test_protected_branch_keeps_the_task_here_with_one_warning(tmp_path):
    a, b, server = two_clones(tmp_path)
    protect_main(server)
    before = remote_main(server)
    added = run(a.path, "add", "kept", "plan")
    assert added.returncode == 0, added.stderr
    lines = [line for line in added.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert "warning" in lines[0] and "main" in lines[0] and "kept-plan" in lines[0]
    assert "pull request" in lines[0]
    assert remote_main(server) == before
    assert (a / "backlog/todo/kept-plan.md").exists()
    assert git(a.path, "log", "-1", "--format=%s", "main").strip() == "add(kept-plan)"
    # the claims namespace still works: b takes alpha through the remote
    assert run(b.path, "take", "alpha", claimer="bee").returncode == 0


def test_protected_branch_from_a_linked_worktree(tmp_path):
    a, _b, server = two_clones(tmp_path)
    protect_main(server)
    wt = a.worktree("feature")
    added = run(wt.path, "add", "side", "plan")
    assert added.returncode == 0, added.stderr
    warnings = [line for line in added.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1, added.stderr
    assert "side-plan" in todo_on(a.path, "main")  # committed on the intake branch here


def test_unreachable_remote_commits_locally_and_warns(tmp_path):
    a, _b, server = two_clones(tmp_path)
    git(a.path, "remote", "set-url", "origin", (tmp_path / "gone.git").as_uri())
    added = run(a.path, "add", "offline", "plan")
    assert added.returncode == 0, added.stderr
    warnings = [line for line in added.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1, added.stderr
    assert "could not be reached" in warnings[0]
    assert git(a.path, "log", "-1", "--format=%s", "main").strip() == "add(offline-plan)"


def test_retry_pushes_the_reopened_task(tmp_path):
    a, b, server = two_clones(tmp_path)
    assert run(a.path, "take", "alpha", claimer="ay").returncode == 0
    assert run(a.path, "fail", "alpha", "broken", claimer="ay").returncode == 0
    retried = run(a.path, "retry", "alpha", "try again")
    assert retried.returncode == 0, retried.stderr
    assert "warning" not in retried.stderr
    assert "retried" in git(server, "show", "main:backlog/todo/alpha.md")
    # b's own copy predates the failure; the remote's intake branch holds the one reopened since,
    # and that live copy is the task (SPEC v4 §4): offered at once, no merge needed
    assert ready(b) == ["alpha"]
    assert "retried" in git(b.path, "show", "origin/main:backlog/todo/alpha.md")  # fetched: it moved


def test_edit_pushes_the_edited_task(tmp_path):
    a, b, server = two_clones(tmp_path)
    edited = run(a.path, "edit", "alpha", "--set", "priority=3")
    assert edited.returncode == 0, edited.stderr
    assert "priority: 3" in git(server, "show", "main:backlog/todo/alpha.md")


EXCHANGE = re.compile(r"trace: (?:built-in: )?git (ls-remote|fetch|push)\b")


def exchanges(stderr: str) -> list[str]:
    """The remote exchanges a command made, from GIT_TRACE's lines (a fetch's own sub-processes,
    and the ref updates that follow a push, are not exchanges)."""
    return EXCHANGE.findall(stderr)


def traced_take(clone: Repo, slug: str, trace: Path) -> list[str]:
    trace.unlink(missing_ok=True)
    proc = run(clone.path, "take", slug, claimer="bee", env={"GIT_TRACE": str(trace)})
    assert proc.returncode == 0, proc.stderr
    return exchanges(trace.read_text())


def test_a_claim_fetches_the_intake_branch_only_when_it_moved(tmp_path):
    a, b, server = two_clones(tmp_path)
    for slug in ("one", "two"):
        assert run(a.path, "add", slug, "plan").returncode == 0
    assert ready(b)  # b is up to date
    still = traced_take(b, "one-plan", tmp_path / "trace")
    assert still.count("fetch") == 0, still
    assert still.count("push") == 1, still
    assert run(a.path, "add", "three", "plan").returncode == 0  # the remote's main moves
    moved = traced_take(b, "three-plan", tmp_path / "trace")
    assert moved.count("fetch") == 1, moved
    assert moved.count("push") == 1, moved
    assert moved.count("ls-remote") == still.count("ls-remote"), (still, moved)
    # the queue's listing is the claim's own: one listing, then the push (then the claim's checks
    # after the push: the listing for a settlement since, the default branch's tip; SPEC §8's two
    # exchanges need the tombstone record of docs/design.md, not made yet)
    assert still[:2] == ["ls-remote", "push"], still
    assert moved[:3] == ["ls-remote", "fetch", "push"], moved


def counts(clone: Repo) -> dict:
    out = run(clone.path, "--json", "status")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["counts"]


def test_status_counts_every_clones_tasks_once(tmp_path):
    """SPEC §5 Truthful views: with a remote, counts are every clone's, each task once: a task added
    here and failed or finished on another clone counts as failed or done here, not as todo."""
    a, b, _server = two_clones(tmp_path)
    for slug in ("beta", "gamma"):
        assert run(a.path, "add", slug).returncode == 0
    assert run(b.path, "take", "beta-plan", claimer="bee").returncode == 0
    assert run(b.path, "fail", "beta-plan", "broken", claimer="bee").returncode == 0
    assert run(b.path, "take", "gamma-plan", claimer="bee").returncode == 0
    assert run(b.path, "advance", "gamma-plan", claimer="bee").returncode == 0
    for clone in (a, b):
        seen = counts(clone)
        assert (seen["todo"], seen["doing"], seen["done"], seen["failed"]) == (1, 0, 1, 1), (clone.path.name, seen)
