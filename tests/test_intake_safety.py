"""Writing into a branch that lives elsewhere loses nothing (SPEC §4, *The queue is written where
it is read*; issue 28): no write while a worktree has the intake branch in a rebase or the like,
the intake branch's own pipeline, a plumbing commit that keeps every other tree entry byte for
byte, a ref update refused by the repository, a declared intake branch that does not exist, and
`add` right after `setup` on a branch."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import git, ok
from test_intake_writes import declare_intake, failed_on


def diverge(repo) -> None:
    """A branch `side` and main, each changing README.md's one line: any operation that brings
    one onto the other stops at a conflict."""
    repo.git("checkout", "-q", "-b", "side")
    (repo / "README.md").write_text("side\n")
    repo.git("commit", "-q", "-am", "side")
    repo.git("checkout", "-q", "main")
    (repo / "README.md").write_text("main\n")
    repo.git("commit", "-q", "-am", "main")


def stop_in(repo, operation: str) -> None:
    """Start `operation` in the worktree `repo` (on main) so that it stops half way."""
    diverge(repo)
    if operation == "rebase":
        repo.git("rebase", "side", check=False)
    elif operation == "merge":
        repo.git("merge", "side", check=False)
    elif operation == "cherry-pick":
        repo.git("cherry-pick", "side", check=False)
    elif operation == "revert":
        (repo / "README.md").write_text("main again\n")
        repo.git("commit", "-q", "-am", "main again")
        repo.git("revert", "--no-edit", "HEAD~1", check=False)
    elif operation == "am":
        patch = repo.git("format-patch", "-1", "--stdout", "side")
        subprocess.run(["git", "am"], cwd=repo.path, input=patch, text=True, capture_output=True)
    elif operation == "bisect":
        repo.git("bisect", "start")
        repo.git("bisect", "bad")
        repo.git("bisect", "good", "HEAD~2")  # checks out a commit between: HEAD detached
    else:
        raise AssertionError(operation)
    gitdir = Path(repo.git("rev-parse", "--absolute-git-dir").strip())
    assert (gitdir / STATE[operation]).exists(), f"the {operation} did not stop half way"


def finish(repo, operation: str) -> None:
    if operation == "bisect":
        repo.git("bisect", "reset")
    elif operation == "am":
        repo.git("am", "--abort")
    else:
        repo.git(operation, "--abort")


OPERATIONS = ("rebase", "merge", "cherry-pick", "revert", "am", "bisect")
STATE = {  # what git leaves in the worktree's git dir meanwhile
    "rebase": "rebase-merge/head-name",
    "merge": "MERGE_HEAD",
    "cherry-pick": "CHERRY_PICK_HEAD",
    "revert": "REVERT_HEAD",
    "am": "rebase-apply/applying",
    "bisect": "BISECT_START",
}


# -- 1. no write while the intake branch is in a rebase (or the like) ------------------------------
@pytest.mark.parametrize("declared", [True, False], ids=["intake-declared", "intake-by-default"])
def test_a_task_added_while_main_is_being_rebased_is_not_lost(shared, declared):
    """The issue's case: main's rebase stopped at a conflict (HEAD detached), so main is checked
    out nowhere to `git worktree list`; a plumbing commit would move main (`intake: main`), and
    the rebase's abort (or its end) would drop the task; without `intake:` the task went to this
    branch, as if there were no intake branch. The add is refused instead (exit 4), and lands on
    main once the rebase ends."""
    if declared:
        declare_intake(shared)
    agent = shared.worktree("a1")
    stop_in(shared, "rebase")
    assert shared.git("rev-parse", "--abbrev-ref", "HEAD").strip() == "HEAD"  # detached
    before = shared.git("rev-parse", "main").strip()
    proc = agent.run("--json", "add", "hotfix")
    assert proc.returncode == 4, proc.stderr
    error = json.loads(proc.stdout)
    assert error["kind"] == "unavailable" and error["retryable"] is True
    assert "rebase" in error["error"] and str(shared.path) in error["error"] and "--here" in error["error"]
    assert shared.git("rev-parse", "main").strip() == before  # nothing written
    finish(shared, "rebase")
    agent.ok("add", "hotfix")  # the rebase is over: it lands, and stays
    assert "backlog/todo/hotfix-plan.md" in shared.git("ls-tree", "-r", "--name-only", "main")


@pytest.mark.parametrize("operation", OPERATIONS)
def test_no_write_into_the_intake_branch_in_the_middle_of_an_operation(shared, operation):
    agent = shared.worktree("a1")
    stop_in(shared, operation)
    before = shared.git("rev-parse", "main").strip()
    proc = agent.run("add", "hotfix")
    assert proc.returncode == 4, proc.stderr
    assert f"git {operation} in progress" in proc.stderr and str(shared.path) in proc.stderr
    assert "--here" in proc.stderr
    assert shared.git("rev-parse", "main").strip() == before
    assert "hotfix" not in shared.git("ls-tree", "-r", "--name-only", "main")
    out = json.loads(agent.ok("--json", "add", "mine", "--here"))  # the way out
    assert out["where"] == "here" and agent.head_message() == "add(mine-plan)"
    finish(shared, operation)
    agent.ok("add", "hotfix")
    assert "backlog/todo/hotfix-plan.md" in shared.git("ls-tree", "-r", "--name-only", "main")


def test_an_operation_in_a_linked_worktree_that_holds_the_intake_branch(shared):
    """The intake branch checked out in a linked worktree (its git dir under worktrees/<id>)."""
    declare_intake(shared)
    agent = shared.worktree("a1")
    shared.git("checkout", "-q", "--detach")
    holder = shared.path.parent / "holder"
    shared.git("worktree", "add", "-q", str(holder), "main")
    git(holder, "checkout", "-q", "-b", "side")
    (holder / "README.md").write_text("side\n")
    git(holder, "commit", "-q", "-am", "side")
    git(holder, "checkout", "-q", "main")
    (holder / "README.md").write_text("main\n")
    git(holder, "commit", "-q", "-am", "main")
    git(holder, "rebase", "side", check=False)
    proc = agent.run("add", "hotfix")
    assert proc.returncode == 4 and f"in the worktree {holder}" in proc.stderr, proc.stderr
    git(holder, "rebase", "--abort")
    agent.ok("add", "hotfix")
    assert (holder / "backlog/todo/hotfix-plan.md").exists()  # committed where main is checked out


def test_retry_waits_for_the_rebase_too(shared):
    shared.ok("add", "flaky")
    agent = shared.worktree("a4")
    failed_on(agent, "flaky-plan")
    stop_in(shared, "rebase")
    before = shared.git("rev-parse", "main").strip()
    proc = agent.run("retry", "flaky-plan", "again")
    assert proc.returncode == 4 and "git rebase in progress" in proc.stderr, proc.stderr
    assert "--here" not in proc.stderr  # retry has none
    assert shared.git("rev-parse", "main").strip() == before
    assert (agent / "backlog/failed/flaky-plan.md").exists()  # nothing moved here either
    finish(shared, "rebase")
    agent.ok("retry", "flaky-plan", "again")
    assert "retried" in shared.git("show", "main:backlog/todo/flaky-plan.md")


def test_add_in_the_worktree_that_merges_the_intake_branch(shared):
    """This worktree is on the intake branch and in a merge: no commit on it but with --here."""
    stop_in(shared, "merge")
    proc = shared.run("add", "hotfix")
    assert proc.returncode == 4 and "git merge in progress" in proc.stderr, proc.stderr


def test_the_views_keep_reading_the_intake_branch_while_it_is_rebased(shared):
    """SPEC §4: a branch being rebased still counts as checked out there; the other worktrees
    keep seeing its tasks (refs/heads/main), not an empty queue."""
    agent = shared.worktree("a1")
    shared.ok("add", "hotfix", "--priority", "1")  # on main, after a1 branched
    stop_in(shared, "rebase")
    ready = json.loads(agent.ok("--json", "ready"))["tasks"]
    assert [(t["slug"], t["where"]) for t in ready] == [("hotfix-plan", "intake:main")]
    assert json.loads(agent.ok("--json", "status"))["counts"]["todo"] == 1
    assert json.loads(agent.ok("--json", "take"))["slug"] == "hotfix-plan"


# -- 2. the intake branch's own pipeline ---------------------------------------------------------
def set_pipeline(repo, line: str) -> None:
    agents = repo / "backlog/AGENTS.md"
    text = agents.read_text()
    agents.write_text(text.replace("`todo` → `doing` → `done`", line))
    repo.git("commit", "-q", "-m", "pipeline", "--", "backlog/AGENTS.md")


def test_add_files_into_the_intake_branchs_first_pile_not_this_worktrees(shared):
    """a1's pipeline starts with `inbox`, main's with `todo`: the task goes to main's todo/, where
    every worktree looks (it used to go to main:backlog/inbox/, a pile main does not know, where
    nobody looks)."""
    declare_intake(shared)
    agent = shared.worktree("a1")
    set_pipeline(agent, "inbox todo doing done")
    shared.git("checkout", "-q", "--detach")  # the plumbing commit
    declare = shared.worktree("a2")
    out = json.loads(agent.ok("--json", "add", "hotfix"))
    assert out["pile"] == "todo" and out["path"] == "backlog/todo/hotfix-plan.md" and out["where"] == "intake:main"
    assert (
        shared.git("ls-tree", "-r", "--name-only", "main", "--", "backlog/")
        .split()
        .count("backlog/todo/hotfix-plan.md")
    )
    assert "inbox" not in shared.git("ls-tree", "-r", "--name-only", "main")
    shared.git("checkout", "-q", "main")
    for where in (shared, declare):
        assert [t["slug"] for t in json.loads(where.ok("--json", "ready"))["tasks"]] == ["hotfix-plan"]


def test_add_files_into_the_intake_worktrees_inbox(shared):
    """The other way round: main (checked out) starts with `inbox`, a1 with `todo`."""
    agent = shared.worktree("a1")
    set_pipeline(shared, "inbox todo doing done")
    out = json.loads(agent.ok("--json", "add", "idea"))
    assert out["pile"] == "inbox" and (shared / "backlog/inbox/idea-plan.md").exists()
    assert [t["slug"] for t in json.loads(shared.ok("--json", "list", "inbox"))["tasks"]] == ["idea-plan"]


@pytest.mark.parametrize("checked_out", [True, False], ids=["worktree", "plumbing"])
def test_a_pile_the_intake_branch_does_not_know_is_refused(shared, checked_out):
    from maildir_backlog import moves
    from maildir_backlog.errors import BacklogError

    declare_intake(shared)
    agent = shared.worktree("a1")
    set_pipeline(agent, "inbox todo doing done")
    if not checked_out:
        shared.git("checkout", "-q", "--detach")
    before = shared.git("rev-parse", "main").strip()
    ctx = agent.context()
    target = moves.intake_target(ctx)
    assert target is not None and target.pipeline.piles == ("todo", "doing", "done")
    with pytest.raises(BacklogError) as refused:
        moves.land(ctx, moves.Parcel(target, "idea-plan", "inbox", b"# idea\n\n---\n", "add(idea-plan)"))
    assert refused.value.code == 1 and "no pile inbox/" in refused.value.message
    assert shared.git("rev-parse", "main").strip() == before
    assert not (shared / "backlog/inbox").exists()


# -- 6. `add` right after `setup` on a branch ------------------------------------------------------
def test_add_right_after_setup_on_a_branch_whose_main_has_no_backlog(repo):
    """setup ran in a linked worktree on `feat`; the main worktree's branch (main, the intake
    branch by default) holds no backlog yet: the task is committed here, not refused with "no
    backlog here" (main's worktree has no backlog/AGENTS.md)."""
    feat = repo.path.parent / "feat"
    repo.git("worktree", "add", "-q", "-b", "feat", str(feat))
    ok(feat, "setup", "--backend=maildir-shared")
    out = json.loads(ok(feat, "--json", "add", "first"))
    assert out["where"] == "here" and out["branch"] == "feat"
    assert git(feat, "log", "-1", "--format=%s").strip() == "add(first-plan)"
    assert [t["slug"] for t in json.loads(ok(feat, "--json", "ready"))["tasks"]] == ["first-plan"]
    repo.git("checkout", "-q", "--detach")  # main checked out nowhere: still here
    assert json.loads(ok(feat, "--json", "add", "second"))["where"] == "here"


def test_a_declared_intake_branch_without_a_backlog_is_refused(repo):
    feat = repo.path.parent / "feat"
    repo.git("worktree", "add", "-q", "-b", "feat", str(feat))
    ok(feat, "setup", "--backend=maildir-shared")
    declare_intake(type(repo)(feat))
    before = repo.git("rev-parse", "main").strip()
    proc = type(repo)(feat).run("add", "first")
    assert proc.returncode == 1 and "holds no backlog" in proc.stderr and "--here" in proc.stderr, proc.stderr
    assert repo.git("rev-parse", "main").strip() == before


# -- 3. a plumbing commit keeps every other tree entry byte for byte --------------------------------
EMPTY = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"  # the empty blob


def plumb(repo, branch: str, entries: list[bytes]) -> None:
    """Commit `entries` (`mode SP sha TAB path`, bytes) onto `branch` with a temporary index: names
    that are not UTF-8, modes and gitlinks that no checkout needs to hold."""
    env = {**os.environ, "GIT_INDEX_FILE": str(repo.path.parent / "plumb.index")}

    def run(*args: str, data: bytes = b"") -> bytes:
        proc = subprocess.run(["git", *args], cwd=repo.path, input=data, capture_output=True, env=env)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    run("hash-object", "-w", "--stdin")  # the empty blob
    link = run("hash-object", "-w", "--stdin", data=b"README.md").strip().decode()
    run("read-tree", branch)
    run(
        "update-index",
        "--add",
        "-z",
        "--index-info",
        data=b"".join(e.replace(b"LINK", link.encode()) + b"\0" for e in entries),
    )
    tree = run("write-tree").strip().decode()
    commit = run("commit-tree", "-p", branch, "-m", "odd entries", tree).strip().decode()
    run("update-ref", f"refs/heads/{branch}", commit)


ODD = [
    b"100644 " + EMPTY.encode() + b"\tcaf\xe9.txt",  # Latin-1, not UTF-8
    b"100644 " + EMPTY.encode() + b"\tbacklog/notes-\xff\xfe.txt",  # beside the piles, in the tree that changes
    b"100644 " + EMPTY.encode() + b"\tbacklog/todo/\xe9t\xe9.txt",  # in the very tree the task goes into
    b"100755 " + EMPTY.encode() + b"\ttool.sh",
    b"100755 " + EMPTY.encode() + b"\tbacklog/hook.sh",
    b"120000 LINK\tlink",
    b"120000 LINK\tbacklog/todo/link",
    b"160000 " + b"1" * 40 + b"\tvendor/lib",  # a submodule: a commit this repository does not have
    b"160000 " + b"2" * 40 + b"\tbacklog/sub",
]


def full_tree(repo, rev: str) -> list[bytes]:
    out = subprocess.run(["git", "ls-tree", "-r", "-t", "-z", rev], cwd=repo.path, capture_output=True, check=True)
    return sorted(out.stdout.split(b"\0"))


def test_a_plumbing_commit_keeps_every_other_entry_byte_for_byte(shared):
    declare_intake(shared)
    agent = shared.worktree("a1")
    shared.git("checkout", "-q", "--detach")
    plumb(shared, "main", ODD)
    before = full_tree(shared, "main")
    agent.ok("add", "hotfix")
    after = full_tree(shared, "main")
    added = [e for e in after if e not in before]
    gone = [e for e in before if e not in after]
    task = [e for e in added if e.endswith(b"\tbacklog/todo/hotfix-plan.md")]
    assert len(task) == 1 and task[0].startswith(b"100644 blob ")
    # only the task, and the trees on its way (backlog/, backlog/todo/), changed
    assert sorted(e.split(b"\t")[1] for e in gone) == [b"backlog", b"backlog/todo"]
    assert sorted(e.split(b"\t")[1] for e in added if e not in task) == [b"backlog", b"backlog/todo"]
    for entry in ODD:
        mode, _, path = entry.partition(b" ")
        assert any(e.startswith(mode) and e.endswith(b"\t" + path.split(b"\t")[1]) for e in after), entry


def test_a_retry_by_plumbing_keeps_them_too(shared):
    declare_intake(shared)
    shared.ok("add", "flaky")
    agent, other = shared.worktree("a4"), shared.worktree("a5")
    failed_on(agent, "flaky-plan")
    shared.git("checkout", "-q", "--detach")
    plumb(shared, "main", ODD)
    before = full_tree(shared, "main")
    other.ok("retry", "flaky-plan", "again")
    after = full_tree(shared, "main")
    changed = {e.split(b"\t")[1] for e in set(before) ^ set(after)}
    assert changed == {b"backlog", b"backlog/todo", b"backlog/todo/flaky-plan.md"}


# -- 4. a ref update the repository refuses --------------------------------------------------------
FREEZE = """#!/bin/sh
# refuse every update of refs/heads/main (a reference-transaction hook, as a server-side policy would)
[ "$1" = prepared ] || exit 0
while read -r old new ref; do
    if [ "$ref" = refs/heads/main ]; then echo "main is frozen" >&2; exit 1; fi
done
exit 0
"""

# refuse, and move main meanwhile (once the locks are released: "aborted"), so every attempt finds
# the branch moved since it read it: a compare-and-swap that keeps losing
CHURN = """#!/bin/sh
[ -n "$CHURNING" ] && exit 0
case "$1" in
prepared)
    while read -r old new ref; do [ "$ref" = refs/heads/main ] && exit 1; done
    exit 0;;
aborted)
    commit=$(git commit-tree -p refs/heads/main -m churn "refs/heads/main^{tree}")
    CHURNING=1 git update-ref refs/heads/main "$commit"
    echo x >> "$(git rev-parse --git-common-dir)/churned";;
esac
exit 0
"""


def hook(repo, script: str) -> None:
    path = repo / ".git/hooks/reference-transaction"
    path.write_text(script)
    path.chmod(0o755)


@pytest.mark.parametrize("checked_out", [False, True], ids=["plumbing", "worktree"])
def test_a_ref_update_the_repository_refuses_is_exit_1_naming_it(shared, checked_out):
    declare_intake(shared)
    agent = shared.worktree("a1")
    if not checked_out:
        shared.git("checkout", "-q", "--detach")
    before = shared.git("rev-parse", "main").strip()
    hook(shared, FREEZE)
    proc = agent.run("--json", "add", "hotfix")
    assert proc.returncode == 1, proc.stderr  # it was exit 4, "retry later", forever
    error = json.loads(proc.stdout)
    assert error["retryable"] is False and "aborted by hook" in error["error"]
    if not checked_out:  # the plumbing commit's own words (a commit in the worktree: git's)
        assert "refused to move the intake branch main (main is frozen" in error["error"]
    assert shared.git("rev-parse", "main").strip() == before
    assert agent.git("status", "--porcelain") == "" and shared.git("status", "--porcelain") == ""


def test_a_compare_and_swap_that_keeps_losing_is_exit_4(shared):
    from maildir_backlog.gitwrite import CAS_ATTEMPTS

    declare_intake(shared)
    agent = shared.worktree("a1")
    shared.git("checkout", "-q", "--detach")
    hook(shared, CHURN)
    proc = agent.run("add", "hotfix")
    assert proc.returncode == 4 and "kept moving" in proc.stderr, proc.stderr
    assert (shared / ".git/churned").read_text().count("x") == CAS_ATTEMPTS  # rebuilt each time
    assert "hotfix" not in shared.git("ls-tree", "-r", "--name-only", "main")


def test_a_lost_compare_and_swap_is_rebuilt_on_the_new_tip(shared):
    """Once: the branch moved since it was read (the hook moves it and refuses once); the add is
    rebuilt on the new tip and lands, keeping what the other update brought."""
    declare_intake(shared)
    agent = shared.worktree("a1")
    shared.git("checkout", "-q", "--detach")
    hook(
        shared,
        CHURN.replace(
            '[ -n "$CHURNING" ] && exit 0',
            '[ -n "$CHURNING" ] && exit 0\n[ -e "$(git rev-parse --git-common-dir)/churned" ] && exit 0',
        ),
    )
    agent.ok("add", "hotfix")
    assert shared.git("log", "-2", "--format=%s", "main").split("\n")[:2] == ["add(hotfix-plan)", "churn"]


# -- 5. a declared intake branch that does not exist -----------------------------------------------
def test_a_declared_intake_branch_that_does_not_exist_is_an_error_not_an_empty_queue(shared):
    shared.ok("add", "local")
    agent = shared.worktree("a1")
    declare_intake(agent, "nosuch")
    line = [n for n, text in enumerate((agent / "backlog/AGENTS.md").read_text().splitlines(), 1) if "nosuch" in text]
    for args in (("status",), ("ready",), ("list",), ("take",), ("add", "more")):
        proc = agent.run("--json", *args)
        assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
        error = json.loads(proc.stdout)["error"]
        assert "intake branch nosuch" in error and f"backlog/AGENTS.md:{line[0]}" in error, (args, error)
        assert "does not exist" in error
    assert agent.head_message() == "declare the intake branch"  # nothing written
    assert not list((agent / "backlog/doing").glob("*.md"))
    agent.git("branch", "nosuch", "main")
    assert [t["slug"] for t in json.loads(agent.ok("--json", "ready"))["tasks"]] == ["local-plan"]
