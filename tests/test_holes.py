"""The holes of issue 28, each closed as a class (docs/design.md, *Holes closed (issue 28)*)."""

from __future__ import annotations

import json
import re

from conftest import Repo

PIPELINE_RE = re.compile(r"(## Pipeline\n\n)[^\n]*\n")


def _with_pipeline(wt: Repo, piles: str) -> None:
    agents = wt / "backlog/AGENTS.md"
    text = agents.read_text()
    assert PIPELINE_RE.search(text)
    agents.write_text(PIPELINE_RE.sub(lambda m: m.group(1) + piles + "\n", text, count=1))
    wt.git("commit", "-qam", f"pipeline: {piles}")


# -- 1. two holders: in-flight piles are clone-wide whatever a branch's pipeline says ------------
def test_a_task_in_a_pile_another_pipeline_lacks_is_in_flight_for_every_branch(shared):
    shared.ok("add", "x")
    a = shared.worktree("a")
    _with_pipeline(a, "`todo` → `doing` → `reviewing` → `done`")
    a.ok("take", "x-plan")
    a.ok("advance", "x-plan")  # → reviewing, a pile main's pipeline lacks
    assert (a / "backlog/reviewing/x-plan.md").exists()
    assert (shared / "backlog/todo/x-plan.md").exists()  # main's copy from before the claim

    # auto-pick on main skips it; a named take is refused naming the holder
    proc = shared.run("take")
    assert proc.returncode == 0 and "no available tasks" in proc.stderr, proc.stdout + proc.stderr
    proc = shared.run("take", "x-plan")
    assert proc.returncode == 1 and "already in flight" in proc.stderr and "reviewing/" in proc.stderr, proc.stderr
    assert not list((shared / "backlog/doing").iterdir())

    # the views show it in flight, in its pile
    status = json.loads(shared.ok("--json", "status"))
    assert [(t["slug"], t["pile"]) for t in status["in_flight"]] == [("x-plan", "reviewing")]
    assert status["counts"]["reviewing"] == 1 and status["counts"]["todo"] == 0, status["counts"]
    listed = json.loads(shared.ok("--json", "list"))
    assert [(t["slug"], t["state"]) for t in listed["tasks"]] == [("x-plan", "in flight")]
    assert "reviewing/" in shared.ok("list")
    assert "x-plan" in shared.ok("list", "reviewing")

    # main's verbs on it: advance is refused naming the pile its pipeline lacks; nothing lost
    proc = shared.run("advance", "x-plan")
    assert proc.returncode == 1 and "reviewing" in proc.stderr and "pipeline" in proc.stderr, proc.stderr
    assert (a / "backlog/reviewing/x-plan.md").exists()

    # the janitor of main sees it in flight (no stray pile, no todo task to offer)
    swept = json.loads(shared.ok("--json", "maintain", "--dry-run"))
    assert not any("reviewing" in f["path"] for f in swept["buckets"]["LAYOUT"]), swept["buckets"]

    # the branch whose pipeline has it finishes it
    a.ok("advance", "x-plan")
    assert (a / "backlog/done/x-plan.md").exists()
    assert shared.run("take", "x-plan").returncode == 1


# -- 2. dependencies follow rename tombstones ---------------------------------------------------
def test_a_dependency_on_a_renamed_task_is_met_when_the_new_name_is_done(shared):
    shared.ok("add", "x")
    shared.ok("add", "y", "--depends", "x-plan")
    b = shared.worktree("b")  # holds y-plan depending on x-plan until it merges the rename
    shared.ok("rename", "x-plan", "z-plan")  # main's dependents are rewritten; b's are not
    assert "z-plan" in (shared / "backlog/todo/y-plan.md").read_text()
    assert "x-plan" in (b / "backlog/todo/y-plan.md").read_text()

    blocked = json.loads(b.ok("--json", "list"))
    assert {t["slug"]: t["state"] for t in blocked["tasks"]}["y-plan"] == "blocked"
    shared.ok("take", "z-plan")
    shared.ok("advance", "z-plan")  # done under its new name

    # b: the dependency on the old name is met (readiness, ready, auto-pick, take SLUG)
    listed = json.loads(b.ok("--json", "list"))
    assert {t["slug"]: t["state"] for t in listed["tasks"]}["y-plan"] == "ready", listed
    assert [t["slug"] for t in json.loads(b.ok("--json", "ready"))["tasks"]] == ["y-plan"]
    assert b.ok("take").strip() == "backlog/doing/y-plan.md"
    # the old name still resolves for check-deps and add --depends (through the tombstone)
    b.ok("check-deps", "backlog/todo/x-plan.md")
    shared.ok("add", "w", "--depends", "x-plan")
    shared.ok("take", "w-plan")  # met: x-plan is z-plan, done


def test_a_dependency_follows_a_chain_of_renames_and_stops_at_a_loop(shared):
    from maildir_backlog import ledger, lifecycle
    from maildir_backlog.clock import now_utc

    ctx = shared.context()
    when = now_utc().replace(microsecond=0)
    for old, new in (("a-plan", "b-plan"), ("b-plan", "c-plan"), ("p-plan", "q-plan"), ("q-plan", "p-plan")):
        ctx.backend.settle(ledger.Settled(old, when, ledger.RENAMED, "main", "tester", 0, new))
    ctx.backend.settle(ledger.Settled("c-plan", when, "done", "main", "tester", 0))
    assert lifecycle.unmet(ctx, ["a-plan", "p-plan", "c-plan"]) == ["p-plan"]
    assert lifecycle.unmet(ctx, ["a-plan"], {"b-plan"}) == []


# -- 3. the parse cache keys on ctime and inode too ----------------------------------------------
def _summaries_backend(repo: Repo):
    from maildir_backlog import git as g
    from maildir_backlog import project
    from maildir_backlog.backend import open_backend
    from maildir_backlog.layout import Layout

    found = g.discover(repo.path)
    return open_backend(found, project.load(Layout.of(found).agents)), Layout.of(found)


def test_the_parse_cache_sees_an_edit_that_keeps_size_and_mtime(repo, settled_clock):
    import os
    import time

    repo.ok("setup", "--backend=maildir-git")
    a, b = repo / "backlog/todo/a.md", repo / "backlog/todo/b.md"
    old = 10**18
    for path in (a, b):
        path.write_text("---\npriority: 3\n---\n")
        os.utime(path, ns=(old, old))  # long ago: cached (a file changed within RACY_NS is not)
    backend, layout = _summaries_backend(repo)
    assert {s: v.priority for s, v in backend.summaries("todo").items()} == {"a": 3, "b": 3}
    from test_cache import kept

    assert kept(layout.parse_cache("todo")).at.keys() == {"a.md", "b.md"}
    time.sleep(0.05)  # past the file system's clock tick
    with open(a, "r+") as f:  # in place: same size, same inode, the mtime set back
        f.write("---\npriority: 4\n---\n")
    os.utime(a, ns=(old, old))
    fresh = b.with_name(".new")  # through a rename: a new inode, same size and mtime
    fresh.write_text("---\npriority: 5\n---\n")
    os.utime(fresh, ns=(old, old))
    os.replace(fresh, b)
    assert {s: v.priority for s, v in backend.summaries("todo").items()} == {"a": 4, "b": 5}
    assert {s: v.priority for s, v in backend.summaries("todo").items()} == {"a": 4, "b": 5}  # cached so


def test_a_parse_cache_file_of_the_older_format_is_all_misses(repo, settled_clock):
    import os

    from maildir_backlog.cache import VERSION

    repo.ok("setup", "--backend=maildir-git")
    a = repo / "backlog/todo/a.md"
    a.write_text("---\npriority: 3\n---\n")
    os.utime(a, ns=(10**18, 10**18))
    backend, layout = _summaries_backend(repo)
    info = os.lstat(a)
    path = layout.parse_cache("todo")
    path.parent.mkdir(parents=True, exist_ok=True)
    header = f"backlog-cache 1\t{repo / 'backlog/todo'}\n"  # version 1: the stamp without the ctime
    path.write_text(f"{header}a.md\t{info.st_ino}\t{info.st_size}\t{info.st_mtime_ns}\t7\t\t\n")
    assert backend.summaries("todo")["a"].priority == 3  # not the old line's 7
    assert path.read_bytes().startswith(f"{VERSION}\t".encode())  # rewritten in the new format
    assert backend.summaries("todo")["a"].priority == 3


# -- 4. the Python API follows its worktree -----------------------------------------------------
def test_the_api_finds_its_repository_again_when_another_worktree_takes_the_path(shared):
    import pytest

    from maildir_backlog import Backlog
    from maildir_backlog.errors import BacklogError

    shared.ok("add", "x")
    shared.ok("add", "y")
    a = shared.worktree("a")
    api = Backlog(a.path)
    assert api.status().counts["todo"] == 2  # found (and remembered) the worktree of branch a
    moved = a.path.parent / "a-moved"
    shared.git("worktree", "move", str(a.path), str(moved))
    shared.git("worktree", "add", "-q", "-b", "other", str(a.path))  # another worktree at the old path
    claim = api.take("x-plan")
    assert claim.branch == "other"  # the worktree that is at `path` now, not the one remembered
    assert "branch=other" in (a / "backlog/doing/x-plan.md").read_text()

    # the path leads nowhere now: a clear error saying where the worktree went
    gone = Backlog(moved)
    gone.status()
    shared.git("worktree", "move", str(moved), str(a.path.parent / "a-again"))
    with pytest.raises(BacklogError, match=r"moved to .*a-again"):
        gone.status()


# -- 5. maintain reports every claim ref it cannot read -----------------------------------------
def test_maintain_reports_each_unreadable_claim_ref_and_sweeps_on(tmp_path):
    import subprocess

    from test_remote import make_world, run

    world = make_world(tmp_path / "w", ["alpha", "beta"])
    mine, other = world.clone("mine"), world.clone("other")
    assert run(other.path, "take", "alpha", claimer="other").returncode == 0

    def in_server(*args: str, stdin: bytes = b"") -> str:
        done = subprocess.run(["git", *args], cwd=world.server, input=stdin, capture_output=True, check=True)
        return done.stdout.decode().strip()

    def commit_of(files: dict[str, bytes]) -> str:
        entries = "".join(
            f"100644 blob {in_server('hash-object', '-w', '--stdin', stdin=data)}\t{name}\n"
            for name, data in files.items()
        )
        tree = in_server("mktree", stdin=entries.encode())
        return in_server("-c", "user.name=x", "-c", "user.email=x@example.invalid", "commit-tree", tree, "-m", "x")

    bad = {
        "a-blob": in_server("hash-object", "-w", "--stdin", stdin=b"not a commit\n"),
        "no-file": commit_of({"other.md": b"# other\n"}),
        "too-big": commit_of({"too-big.md": b"x" * (1024 * 1024 + 1)}),
    }
    for slug, sha in bad.items():
        in_server("update-ref", f"refs/backlog/claims/{slug}", sha)

    proc = run(mine.path, "--json", "maintain", claimer="mine")
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)["buckets"]["REMOTE"]
    said = {f["path"]: f["detail"] for f in found}
    for slug in bad:
        assert f"refs/backlog/claims/{slug}" in said, found
        assert "cannot be read" in said[f"refs/backlog/claims/{slug}"]
    assert "refs/backlog/claims/alpha" not in said  # another clone's readable claim, in budget
    lines = run(mine.path, "maintain", claimer="mine").stdout.splitlines()
    assert sum(line.startswith("REMOTE: refs/backlog/claims/") for line in lines) == 3, lines
    assert lines[-1].startswith("OK:")  # and the rest of the sweep went on
