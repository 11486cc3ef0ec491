"""`backlog migrate`: backend switch both ways, the flat layout, refusals, rollback, round trip."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import Repo

from maildir_backlog.project import set_backend_line

MSG_SHARED = "chore(backlog): migrate to maildir-shared backend"
MSG_GIT = "chore(backlog): migrate to maildir-git backend"
MSG_FLAT = "chore(backlog): migrate from the flat layout"


# -- helpers -------------------------------------------------------------------------------
def shared_root(r: Repo) -> Path:
    return Path(r.git("rev-parse", "--path-format=absolute", "--git-common-dir").strip()) / "backlog"


def tree(root: Path, skip=(".git", ".locks")) -> dict[str, object]:
    """Every file and symlink under root: bytes, or ('link', target)."""
    found: dict[str, object] = {}
    if not root.exists():
        return found
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in skip]
        here = Path(dirpath)
        for name in dirnames + filenames:
            path = here / name
            key = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[key] = ("link", os.readlink(path))
            elif path.is_file():
                found[key] = path.read_bytes()
            elif not any(path.iterdir()):
                found[key] = "empty dir"
    return found


def snapshot(r: Repo) -> dict:
    return {
        "tree": tree(r.path),
        "shared": tree(shared_root(r)),
        "head": r.git("rev-parse", "HEAD"),
        "status": r.git("status", "--porcelain", "--untracked-files=all"),
        "index": r.git("ls-files", "-s"),
    }


def refused(r: Repo, *args: str, match: str) -> str:
    before = snapshot(r)
    proc = r.run("migrate", *args)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert match in lines[0], lines[0]
    assert snapshot(r) == before
    return lines[0]


def in_flight(r: Repo, slug: str, hops: int = 0) -> None:
    r.ok("add", slug)
    r.ok("take", f"{slug}-plan")
    for _ in range(hops):
        r.ok("advance", f"{slug}-plan")


def committed_paths(r: Repo) -> list[str]:
    return sorted(r.git("show", "--name-only", "--format=", "HEAD").split())


def failing_hook(r: Repo) -> Path:
    hook = Path(r.git("rev-parse", "--path-format=absolute", "--git-common-dir").strip()) / "hooks" / "pre-commit"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text("#!/bin/sh\necho 'hook says no' >&2\nexit 1\n")
    hook.chmod(0o755)
    return hook


# -- maildir-git → maildir-shared ----------------------------------------------------------
def test_to_shared_moves_in_flight_tasks(gitbk):
    in_flight(gitbk, "x")
    gitbk.ok("add", "y")
    data = (gitbk / "backlog/doing/x-plan.md").read_bytes()
    agents = (gitbk / "backlog/AGENTS.md").read_bytes()
    out = gitbk.ok("migrate", "--to", "maildir-shared")
    root = shared_root(gitbk)
    assert f"move backlog/doing/x-plan.md → {root}/doing/x-plan.md" in out
    assert (root / "doing/x-plan.md").read_bytes() == data
    link = gitbk / "backlog/doing"
    assert link.is_symlink() and os.readlink(link) == str(root / "doing")
    assert os.listdir(link) == ["x-plan.md"]
    assert "backlog/doing" in (gitbk / ".gitignore").read_text().splitlines()
    assert (gitbk / "backlog/AGENTS.md").read_bytes() == agents.replace(b"\nmaildir-git\n", b"\nmaildir-shared\n")
    assert gitbk.head_message() == MSG_SHARED
    assert committed_paths(gitbk) == sorted(
        [".gitignore", "backlog/AGENTS.md", "backlog/doing/.gitkeep", "backlog/doing/x-plan.md"]
    )
    assert gitbk.git("status", "--porcelain") == ""
    assert gitbk.git("ls-files", "backlog/doing") == ""
    status = json.loads(gitbk.ok("--json", "status"))
    assert status["backend"] == "maildir-shared"
    assert [t["slug"] for t in status["in_flight"]] == ["x-plan"]
    # the task carries on under the new backend
    gitbk.ok("advance", "x-plan")
    assert (gitbk / "backlog/done/x-plan.md").read_bytes().startswith(data)


def test_to_shared_other_worktrees_heal_on_next_verb(gitbk):
    in_flight(gitbk, "x")
    early = gitbk.worktree("early")  # exists before the migration: gets it by merging
    gitbk.ok("migrate", "--to", "maildir-shared")
    late = gitbk.worktree("late")  # created after: the post-checkout hook (setup installed it) links it at once
    assert os.listdir(late / "backlog/doing") == ["x-plan.md"]
    late.ok("status")
    assert (early / "backlog/doing").is_dir() and not (early / "backlog/doing").is_symlink()
    early.git("merge", "-q", "main")
    early.ok("status")
    assert (early / "backlog/doing").is_symlink()
    assert os.listdir(early / "backlog/doing") == ["x-plan.md"]
    assert early.git("status", "--porcelain") == ""
    # one set of claims across the clone
    late.ok("add", "z")
    late.ok("take", "z-plan")
    assert sorted(os.listdir(gitbk / "backlog/doing")) == ["x-plan.md", "z-plan.md"]


def test_to_shared_dry_run_changes_nothing(gitbk):
    in_flight(gitbk, "x")
    before = snapshot(gitbk)
    out = gitbk.ok("migrate", "--to", "maildir-shared", "--dry-run")
    assert f"move backlog/doing/x-plan.md → {shared_root(gitbk)}/doing/x-plan.md" in out
    assert "dry run: nothing changed" in out
    assert snapshot(gitbk) == before
    data = json.loads(gitbk.ok("--json", "migrate", "--to", "maildir-shared", "--dry-run"))
    assert data["dry_run"] is True and data["backend"] == "maildir-shared"
    assert data["moves"] == [
        {"from": str(gitbk / "backlog/doing/x-plan.md"), "to": str(shared_root(gitbk) / "doing/x-plan.md")}
    ]
    assert snapshot(gitbk) == before


def test_failing_hook_puts_everything_back(gitbk):
    in_flight(gitbk, "x")
    gitbk.ok("add", "y")
    failing_hook(gitbk)
    before = snapshot(gitbk)
    proc = gitbk.run("migrate", "--to", "maildir-shared")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert snapshot(gitbk) == before
    assert not (gitbk / "backlog/doing").is_symlink()


def test_failing_hook_reverse_puts_everything_back(shared):
    in_flight(shared, "x")
    failing_hook(shared)
    before = snapshot(shared)
    proc = shared.run("migrate", "--to", "maildir-git")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert snapshot(shared) == before
    assert (shared / "backlog/doing").is_symlink()


def test_crash_before_commit_loses_nothing_and_reruns(gitbk):
    in_flight(gitbk, "x")
    data = (gitbk / "backlog/doing/x-plan.md").read_bytes()
    proc = gitbk.run("migrate", "--to", "maildir-shared", env={"BACKLOG_CRASH_AT": "migrate-before-commit"})
    assert proc.returncode != 0
    assert (shared_root(gitbk) / "doing/x-plan.md").read_bytes() == data  # the new copy is there
    out = gitbk.ok("migrate", "--to", "maildir-shared")  # the killed run is undone first (migrate.recover)
    assert "recovered: backlog/AGENTS.md (a migration to maildir-shared was killed before its commit: undone" in out
    assert os.listdir(gitbk / "backlog/doing") == ["x-plan.md"]
    assert (gitbk / "backlog/doing/x-plan.md").read_bytes() == data
    assert gitbk.git("status", "--porcelain") == ""


def test_rerun_reuses_an_identical_leftover_copy(gitbk):
    in_flight(gitbk, "x")
    data = (gitbk / "backlog/doing/x-plan.md").read_bytes()
    (shared_root(gitbk) / "doing").mkdir(parents=True, exist_ok=True)
    (shared_root(gitbk) / "doing/x-plan.md").write_bytes(data)  # left by a run of an older version
    out = gitbk.ok("migrate", "--to", "maildir-shared")
    assert "identical copy already there" in out
    assert os.listdir(gitbk / "backlog/doing") == ["x-plan.md"]
    assert gitbk.git("status", "--porcelain") == ""


def test_staged_user_work_stays_staged(gitbk):
    in_flight(gitbk, "x")
    (gitbk / "notes.txt").write_text("mine\n")
    gitbk.git("add", "notes.txt")
    gitbk.ok("migrate", "--to", "maildir-shared")
    assert "notes.txt" not in committed_paths(gitbk)
    assert gitbk.git("diff", "--cached", "--name-only").split() == ["notes.txt"]
    gitbk.ok("migrate", "--to", "maildir-git")
    assert "notes.txt" not in committed_paths(gitbk)
    assert gitbk.git("diff", "--cached", "--name-only").split() == ["notes.txt"]


# -- refusals ------------------------------------------------------------------------------
def test_refuses_dirty_backlog(gitbk):
    in_flight(gitbk, "x")
    (gitbk / "backlog/doing/x-plan.md").write_text("edited\n")
    refused(gitbk, "--to", "maildir-shared", match="uncommitted changes")
    gitbk.git("checkout", "--", "backlog")
    (gitbk / "backlog/todo/new.md").write_text("# untracked\n")
    refused(gitbk, "--to", "maildir-shared", match="backlog/todo/new.md")
    os.unlink(gitbk / "backlog/todo/new.md")
    (gitbk / ".gitignore").write_text("*.pyc\n")
    refused(gitbk, "--to", "maildir-shared", match=".gitignore")


def test_refuses_already_on_shared(shared):
    refused(shared, "--to", "maildir-shared", match="already on the maildir-shared backend")


def test_refuses_already_on_git(gitbk):
    refused(gitbk, "--to", "maildir-git", match="already on the maildir-git backend")


def test_refuses_without_backlog(repo):
    refused(repo, "--to", "maildir-shared", match="no backlog here")


def test_refuses_detached_head(gitbk):
    in_flight(gitbk, "x")
    gitbk.git("checkout", "-q", "--detach")
    refused(gitbk, "--to", "maildir-shared", match="HEAD is detached")


def test_refuses_clash_in_shared_root(gitbk):
    in_flight(gitbk, "x")
    (shared_root(gitbk) / "doing").mkdir(parents=True)
    (shared_root(gitbk) / "doing/x-plan.md").write_text("someone else's\n")
    refused(gitbk, "--to", "maildir-shared", match="name clash")


def test_refuses_stray_file_in_in_flight_pile(gitbk):
    (gitbk / "backlog/doing/notes.txt").write_text("hi\n")
    gitbk.git("add", "backlog/doing/notes.txt")
    gitbk.git("commit", "-q", "-m", "notes")
    refused(gitbk, "--to", "maildir-shared", match="backlog/doing/notes.txt: not a task file")


def test_usage_needs_exactly_one_mode(gitbk):
    assert gitbk.run("migrate").returncode == 2
    assert gitbk.run("migrate", "--to", "maildir-shared", "--from-flat").returncode == 2
    assert gitbk.run("migrate", "--to", "jira").returncode == 2


# -- maildir-shared → maildir-git ----------------------------------------------------------
def test_to_git_brings_clone_wide_claims_home(shared):
    in_flight(shared, "x")
    shared.ok("add", "y")
    other = shared.worktree("other")
    other.ok("take", "y-plan")  # the claim's `git rm` of todo/y-plan.md is on branch other
    assert (shared / "backlog/todo/y-plan.md").exists()
    root = shared_root(shared)
    xdata = (root / "doing/x-plan.md").read_bytes()
    ydata = (root / "doing/y-plan.md").read_bytes()
    out = shared.ok("migrate", "--to", "maildir-git")
    assert "other worktrees see them only after merging main" in out
    assert "remove backlog/todo/y-plan.md" in out
    assert (shared / "backlog/doing/x-plan.md").read_bytes() == xdata
    assert (shared / "backlog/doing/y-plan.md").read_bytes() == ydata
    assert not (shared / "backlog/doing").is_symlink()
    assert not (shared / "backlog/todo/y-plan.md").exists()
    assert sorted(os.listdir(root / "doing")) == []
    assert not (shared / ".gitignore").exists()
    assert shared.head_message() == MSG_GIT
    assert shared.git("status", "--porcelain") == ""
    assert sorted(shared.git("ls-files", "backlog/doing").split()) == [
        "backlog/doing/.gitkeep",
        "backlog/doing/x-plan.md",
        "backlog/doing/y-plan.md",
    ]
    assert json.loads(shared.ok("--json", "status"))["backend"] == "maildir-git"
    shared.ok("advance", "x-plan")
    assert (shared / "backlog/done/x-plan.md").exists()


def test_to_git_keeps_other_gitignore_lines(shared):
    gi = shared / ".gitignore"
    gi.write_bytes(b"*.pyc\n" + gi.read_bytes() + b"build/\n")
    shared.git("commit", "-q", "-am", "ignore more")
    shared.ok("migrate", "--to", "maildir-git")
    assert gi.read_bytes() == b"*.pyc\nbuild/\n"


def test_to_git_refuses_clash_with_tracked_copy(shared):
    shared.ok("add", "z")
    (shared_root(shared) / "doing/z-plan.md").write_text("# z from elsewhere, not an extension\n")
    refused(shared, "--to", "maildir-git", match="name clash")


# -- round trip ----------------------------------------------------------------------------
@pytest.mark.parametrize("pipeline", [None, "todo doing reviewing done"])
def test_round_trip_two_worktrees(repo, pipeline):
    setup = ["setup", "--backend=maildir-git"] + (["--pipeline", pipeline] if pipeline else [])
    repo.ok(*setup)
    repo.ok("add", "a", "--priority", "1")
    in_flight(repo, "b")
    in_flight(repo, "c")
    in_flight(repo, "d", hops=2 if pipeline else 1)  # d into done
    in_flight(repo, "e")
    repo.ok("fail", "e-plan", "broken")
    if pipeline:
        repo.ok("advance", "c-plan")  # c into reviewing
    in_flight_piles = ["doing", "reviewing"] if pipeline else ["doing"]
    crlf = "---\r\npriority: 3\r\n---\r\n\r\n# odd  \r\n\r\n---\r\n"
    path = repo / "backlog/todo/f-plan.md"
    path.write_bytes(crlf.encode())
    repo.git("add", str(path))
    repo.git("commit", "-q", "-m", "crlf task")
    repo.ok("take", "f-plan")
    assert (repo / "backlog/done/d-plan.md").exists() and (repo / "backlog/failed/e-plan.md").exists()

    before_tree = tree(repo / "backlog")
    before_files = repo.git("ls-files", "backlog")
    second = repo.worktree("second")
    expected = {p: sorted(set(os.listdir(repo / "backlog" / p)) - {".gitkeep"}) for p in in_flight_piles}
    assert all(expected.values())

    repo.ok("migrate", "--to", "maildir-shared")
    for pile in in_flight_piles:
        assert sorted(os.listdir(repo / "backlog" / pile)) == expected[pile]
    second.git("merge", "-q", "main")
    second.ok("status")
    for pile in in_flight_piles:
        assert (second / "backlog" / pile).is_symlink()
        assert sorted(os.listdir(second / "backlog" / pile)) == expected[pile]
    ls = second.git("ls-files", "backlog")
    assert all(not line.startswith(tuple(f"backlog/{p}/" for p in in_flight_piles)) for line in ls.splitlines())

    repo.ok("migrate", "--to", "maildir-git")
    assert tree(repo / "backlog") == before_tree
    assert repo.git("ls-files", "backlog") == before_files
    assert repo.git("status", "--porcelain") == ""
    assert repo.git("diff", "HEAD~2", "--stat") == ""
    # the second worktree gets the tasks back as tracked files by merging
    second.git("merge", "-q", "main")
    for pile in in_flight_piles:
        assert not (second / "backlog" / pile).is_symlink()
        assert sorted(os.listdir(second / "backlog" / pile)) == sorted(expected[pile] + [".gitkeep"])
    assert tree(second / "backlog") == before_tree


# -- the flat layout -----------------------------------------------------------------------
def flat_repo(repo: Repo, files: dict[str, bytes]) -> Repo:
    for name, data in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "old layout")
    return repo


def test_from_flat(repo):
    files = {
        "backlog/alpha.md": b"# alpha\n",
        "backlog/beta-task.md": b"---\r\npriority: 2\r\n---\r\n# beta\r\n",
        "backlog/ROADMAP.md": b"# my roadmap\n",
        "backlog/notes.txt": b"not a task\n",
        "backlog/done/2025/gamma.md": b"# gamma\n\n---\n\n",
        "backlog/done/2024/q1/delta.md": b"# delta\n",
        "backlog/done/2024/.gitkeep": b"",
        "backlog/done/eps.md": b"# eps\n",
    }
    flat_repo(repo, files)
    out = repo.ok("migrate", "--from-flat")
    assert "move backlog/alpha.md → backlog/todo/alpha.md" in out
    assert "move backlog/done/2024/q1/delta.md → backlog/done/delta.md" in out
    b = repo / "backlog"
    assert (b / "todo/alpha.md").read_bytes() == files["backlog/alpha.md"]
    assert (b / "todo/beta-task.md").read_bytes() == files["backlog/beta-task.md"]
    assert (b / "done/gamma.md").read_bytes() == files["backlog/done/2025/gamma.md"]
    assert (b / "done/delta.md").read_bytes() == files["backlog/done/2024/q1/delta.md"]
    assert (b / "done/eps.md").read_bytes() == files["backlog/done/eps.md"]
    assert (b / "ROADMAP.md").read_bytes() == b"# my roadmap\n"
    assert (b / "notes.txt").exists()
    assert not (b / "done/2025").exists() and not (b / "done/2024").exists()
    assert os.readlink(b / "CLAUDE.md") == "AGENTS.md"
    assert "maildir-git" in (b / "AGENTS.md").read_text()
    for pile in ("todo", "doing", "failed"):
        assert (b / pile / ".gitkeep").exists()
    assert repo.head_message() == MSG_FLAT
    assert repo.git("status", "--porcelain") == ""
    assert all(p.startswith("backlog/") for p in committed_paths(repo))
    listed = json.loads(repo.ok("--json", "list"))
    assert sorted(t["slug"] for t in listed["tasks"]) == ["alpha", "beta-task"]
    assert json.loads(repo.ok("--json", "status"))["counts"]["done"] == 3
    refused(repo, "--from-flat", match="nothing to migrate")


def test_from_flat_keeps_existing_declaration(repo):
    repo.ok("setup", "--backend=maildir-shared", "--pipeline", "inbox todo doing done")
    agents = (repo / "backlog/AGENTS.md").read_bytes()
    flat_repo(repo, {"backlog/old-one.md": b"# old\n", "backlog/done/2023/older.md": b"# older\n"})
    repo.ok("migrate", "--from-flat")
    assert (repo / "backlog/AGENTS.md").read_bytes() == agents
    assert (repo / "backlog/todo/old-one.md").exists() and (repo / "backlog/done/older.md").exists()
    assert (repo / "backlog/doing").is_symlink()
    assert repo.git("status", "--porcelain") == ""


def test_from_flat_dry_run(repo):
    flat_repo(repo, {"backlog/alpha.md": b"# a\n", "backlog/done/2025/b.md": b"# b\n"})
    before = snapshot(repo)
    out = repo.ok("migrate", "--from-flat", "--dry-run")
    assert "move backlog/alpha.md → backlog/todo/alpha.md" in out
    assert "move backlog/done/2025/b.md → backlog/done/b.md" in out
    assert "create backlog/AGENTS.md" in out
    assert snapshot(repo) == before


def test_from_flat_refuses_bad_name(repo):
    flat_repo(repo, {"backlog/good.md": b"# ok\n", "backlog/Bad Name.md": b"# no\n"})
    line = refused(repo, "--from-flat", match="backlog/Bad Name.md")
    assert "invalid slug" in line


def test_from_flat_refuses_bad_name_in_done(repo):
    flat_repo(repo, {"backlog/done/2025/UPPER.md": b"# no\n"})
    refused(repo, "--from-flat", match="backlog/done/2025/UPPER.md")


def test_from_flat_refuses_flattening_clash(repo):
    flat_repo(repo, {"backlog/done/2024/x.md": b"# 1\n", "backlog/done/2025/x.md": b"# 2\n"})
    refused(repo, "--from-flat", match="name clash")


def test_from_flat_refuses_clash_with_existing_pile(repo):
    flat_repo(repo, {"backlog/x.md": b"# 1\n", "backlog/done/x.md": b"# 2\n"})
    refused(repo, "--from-flat", match="name clash")


def test_migrate_never_reads_a_committed_link_to_dev_zero(repo):
    """Session 29: `migrate` read a tracked `.gitkeep` under done/<year>/, and a backend switch read
    `.gitignore` (below), through a symlink (`/dev/zero`: until memory ran out). Each is refused
    in one line, nothing changed."""
    flat_repo(repo, {"backlog/done/2025/x.md": b"# x\n"})
    (repo / "backlog/done/2025/.gitkeep").symlink_to("/dev/zero")
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "a pull request's link")
    refused(repo, "--from-flat", match="symlink")


def test_a_backend_switch_never_reads_gitignore_through_a_symlink(gitbk):
    (gitbk / ".gitignore").symlink_to("/dev/zero")
    gitbk.git("add", "-A")
    gitbk.git("commit", "-q", "-m", "a pull request's link")
    refused(gitbk, "--to", "maildir-shared", match=".gitignore: is a symlink")


def test_from_flat_refuses_dirty_and_rolls_back(repo):
    flat_repo(repo, {"backlog/alpha.md": b"# a\n"})
    (repo / "backlog/alpha.md").write_bytes(b"# changed\n")
    refused(repo, "--from-flat", match="uncommitted changes")
    repo.git("checkout", "--", "backlog")
    failing_hook(repo)
    before = snapshot(repo)
    assert repo.run("migrate", "--from-flat").returncode == 1
    assert snapshot(repo) == before


def test_from_flat_without_backlog(repo):
    refused(repo, "--from-flat", match="no backlog/ directory")


# -- the AGENTS.md edit --------------------------------------------------------------------
@pytest.mark.parametrize(
    "before, after",
    [
        (
            b"# B\n\n## Backend\n\nmaildir-git\n\n## Pipeline\n\ntodo doing done\n",
            b"# B\n\n## Backend\n\nmaildir-shared\n\n## Pipeline\n\ntodo doing done\n",
        ),
        (
            b"# B\r\n\r\n## Backend\r\n\r\n- `maildir-git`  (tracked)  \r\n\r\n## Other\r\nmaildir-git\r\n",
            b"# B\r\n\r\n## Backend\r\n\r\n- `maildir-shared` \xe2\x80\x94 in-flight piles live in the clone's shared root"
            b" (`backlog where`); the others are tracked\r\n\r\n## Other\r\nmaildir-git\r\n",
        ),
        (
            b"# B\n\n## Backend\n\n## Pipeline\n\ntodo done\n",
            b"# B\n\n## Backend\n\nmaildir-shared\n\n## Pipeline\n\ntodo done\n",
        ),
        (b"# B\n\nno sections", b"# B\n\nno sections\n\n## Backend\n\nmaildir-shared\n"),
        (b"\xef\xbb\xbf## Backend\nmaildir-git\n", b"\xef\xbb\xbf## Backend\nmaildir-shared\n"),
    ],
)
def test_set_backend_line(before, after):
    assert set_backend_line(before, "maildir-shared") == after


def test_missing_backend_section_is_added(gitbk):
    path = gitbk / "backlog/AGENTS.md"
    text = path.read_text()
    start = text.index("## Backend")
    path.write_text(text[:start] + text[text.index("## Defaults") :])
    gitbk.git("commit", "-q", "-am", "no backend section")
    gitbk.ok("migrate", "--to", "maildir-shared")
    assert json.loads(gitbk.ok("--json", "where"))["backend"] == "maildir-shared"


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_task_moved_on_while_the_plan_is_read_is_a_lost_race(shared, monkeypatch, dry_run):
    """Found by the load harness: a worker advanced a shared in-flight task between the plan's
    listing of the pile and its read of the file. The plan is stale, nothing was changed: exit 3
    (run it again), one line, like a change between the plan and its run."""
    from maildir_backlog.migration import to_git

    shared.ok("add", "x")
    shared.ok("take", "x-plan")
    real = to_git.storage.entries

    def listing_then_the_worker_moves(path):
        found = list(real(path))
        for entry in found:
            os.rename(entry.path, entry.path + ".moved")  # gone from the pile, as a worker's advance does
        return found

    monkeypatch.setattr(to_git.storage, "entries", listing_then_the_worker_moves)
    head = shared.git("rev-parse", "HEAD")
    args = ["migrate", "--to", "maildir-git"] + (["--dry-run"] if dry_run else [])
    done = shared.run(*args)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "changed while the migration was being planned" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert shared.git("rev-parse", "HEAD") == head
    assert (shared / "backlog/doing").is_symlink()  # still maildir-shared


def test_the_holders_advance_after_another_worktree_migrated_says_to_merge(shared):
    """SPEC §7.11: after main migrates to maildir-git, a worktree that has not merged it holds a
    claim whose copy went with the migration: its `advance` names the merge to make, exit 1
    (found by the load harness: it said "no task … in any pile")."""
    shared.ok("add", "x")
    w1 = shared.worktree("w1")
    w1.ok("take", "x-plan")
    shared.ok("migrate", "--to", "maildir-git")
    done = w1.run("advance", "x-plan")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "merge main here first" in done.stderr, done.stderr
    assert (shared / "backlog/doing/x-plan.md").exists()  # nothing moved
