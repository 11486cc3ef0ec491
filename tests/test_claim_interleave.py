"""A user's git command between any two git processes of a verb that commits: a claim, a
completion, a cancel, an `add --here`. Each runs several git processes (it opens the repository,
reads, commits); none of them is atomic with the others, and a user works in the same worktree
meanwhile. For each verb, backend and user command (stage a file, commit, `commit -a`, reset), the
test counts the git processes of an undisturbed run (`git._text` and `git.call` are the only two
places that start one), then runs the command before each of them in turn, and after the last,
and checks what the verb promises whatever came between:

- the user's command either runs or is refused by git (an index lock held by a running git
  command; the user then runs it again);
- the verb ends with an exit code of the contract (never an internal error), and one that failed
  loses nothing: run again, it does its work;
- its move is in HEAD, in a commit of its own (a user's `git commit -a` may carry the move first:
  it always could, the work tree held it before the commit);
- a backlog commit holds only backlog paths, and a user's plain commit never holds one; what the
  user staged and did not commit is still staged; nothing of the verb's is left staged or pending
  (the index does not re-add a claimed task behind it).

The positions where it fails must be exactly those of `OPEN` (an open hole, with its follow-up);
its `plumbed` rows (the way a verb commits at scale, `gitplumbed`) must have none.
It found two holes in a claim committed through plumbing (session 12, docs/design.md, *A claim
still commits with `git commit --only`*), at positions 7 to 10: it fails on that code.
"""

from __future__ import annotations

from typing import NamedTuple

import pytest
from conftest import copy_repo, git

from maildir_backlog import git as gitmod
from maildir_backlog import gitplumbed

SLUG = "x-plan"
TODO = f"backlog/todo/{SLUG}.md"


def user_stage(repo) -> None:
    (repo / "user.txt").write_text("mine\n")
    git(repo.path, "add", "user.txt")


def user_commit(repo) -> None:
    (repo / "user2.txt").write_text("mine too\n")
    git(repo.path, "add", "user2.txt")
    git(repo.path, "commit", "-q", "-m", "user: work")


def user_commit_all(repo) -> None:
    git(repo.path, "commit", "-q", "-a", "--allow-empty", "-m", "user: everything")


def user_reset(repo) -> None:
    git(repo.path, "reset", "-q")


REFUSED: list[int] = []  # the case's user command was refused by git (the index locked), so it runs after
ACTIONS = {"stage": user_stage, "commit": user_commit, "commit-all": user_commit_all, "reset": user_reset}


def interleaved(monkeypatch, repo, action, at: int) -> list[str]:
    """Run `action` before the `at`-th git process the verb starts (`monkeypatch`: a MonkeyPatch
    of its own, undone when the verb returned); the processes seen."""
    seen: list[str] = []
    REFUSED.clear()

    def before(name: str) -> None:
        if len(seen) == at:
            try:
                action(repo)
            except AssertionError as exc:  # refused: a git command of the claim holds a lock
                assert "index.lock" in str(exc), exc
                REFUSED.append(at)
        seen.append(name)

    real_text, real_call = gitmod._text, gitmod.call

    def text(cwd, args, *rest, **kw):
        before(args[0])
        return real_text(cwd, args, *rest, **kw)

    def call(cwd, *args, **kw):
        before(args[0])
        return real_call(cwd, *args, **kw)

    monkeypatch.setattr(gitmod, "_text", text)
    monkeypatch.setattr(gitmod, "call", call)
    return seen


def commits_since(repo, base: str) -> list[tuple[str, list[str]]]:
    out = git(repo.path, "log", "--format=%x00%s", "--name-only", f"{base}..HEAD")
    found = []
    for chunk in out.split("\0")[1:]:
        lines = [line for line in chunk.splitlines() if line.strip()]
        found.append((lines[0], lines[1:]))
    return found


class Verb(NamedTuple):
    """A verb that commits, from its prepared state: the template's steps, the call, its commit's
    subject, the path its commit holds, whether HEAD keeps that path (False: the commit removes
    it), and the file the verb leaves in the work tree."""

    steps: tuple[tuple[str, ...], ...]
    call: tuple[str, ...]
    subject: str
    path: str
    kept: bool
    leaves: str


DONE = f"backlog/done/{SLUG}.md"
VERBS = {
    "claim": Verb((), ("take", SLUG), f"advance({SLUG}) → doing", TODO, False, f"backlog/doing/{SLUG}.md"),
    "completion": Verb((("take", SLUG),), ("advance", SLUG), f"advance({SLUG}) → done", DONE, True, DONE),
    "cancel": Verb((("take", SLUG),), ("cancel", SLUG, "not needed"), f"cancel({SLUG})", DONE, True, DONE),
    "add": Verb((), ("add", "y", "--here"), "add(y-plan)", "backlog/todo/y-plan.md", True, "backlog/todo/y-plan.md"),
}


# Open holes (backlog/todo/claim-staging-window-followup.md): a verb that writes a new tracked file
# (a maildir-git claim, a completion, a cancel, an `add --here`) stages it (`git add -A`), then
# commits (`git commit --only`), two git processes; a user's plain `git commit` between them
# (before the third git process here) takes the staged move into the user's commit, and the verb's
# own commit never comes. A maildir-shared claim writes no tracked file (its removal is taken from
# the work tree by `--only`): not open. The test asserts exactly these positions fail, so a hole
# closed (or a new one) fails it until this table says so.
OPEN = {("claim", "maildir-git", "commit"): {2}} | {
    (verb, backend, "commit"): {2}
    for verb in ("completion", "cancel", "add")
    for backend in ("maildir-shared", "maildir-git")
}


# At scale (`gitplumbed.PLUMBED_FROM` index entries) a verb commits through plumbing: its paths
# staged into a copy of the index, never the user's, and git's index lock held from the index's
# check to the rename. The threshold is set to 0 for the `plumbed` rows, so that every position of
# that way is tried too; they have no open position (the staging window is closed there).
CASES = [
    (verb, backend, plumbed)
    for verb in sorted(VERBS)
    for backend in ("maildir-shared", "maildir-git")
    for plumbed in (False, True)
]


@pytest.mark.parametrize("action", sorted(ACTIONS))
@pytest.mark.parametrize(("verb", "backend", "plumbed"), CASES)
def test_a_user_command_between_any_two_git_processes_of_a_verb(
    tmp_path, repo_templates, monkeypatch, verb, backend, plumbed, action
):
    """Every position: before each git process the verb runs (counted on an undisturbed run
    first), and after the last."""
    if plumbed:
        monkeypatch.setenv(gitplumbed.FROM_VARIABLE, "0")
    template = repo_templates(backend, ("add", "x"), *VERBS[verb].steps)
    counted = copy_repo(template, tmp_path / "count")
    with pytest.MonkeyPatch.context() as patch:  # (the user's command never runs: no such position)
        seen = interleaved(patch, counted, ACTIONS[action], 10**6)
        counted.run(*VERBS[verb].call)
    assert len(seen) >= 2, seen  # the verb runs git more than once: there are points between
    assert ("commit-tree" in seen and "commit" not in seen) == plumbed, seen
    broken = {}
    for at in range(len(seen) + 1):
        try:
            one_case(copy_repo(template, tmp_path / f"at{at}"), VERBS[verb], ACTIONS[action], action, at)
        except AssertionError as exc:
            broken[at] = str(exc)[:400]
    assert set(broken) == (set() if plumbed else OPEN.get((verb, backend, action), set())), broken


def one_case(repo, verb: Verb, act, action: str, at: int) -> None:
    """The verb with the user's command before its `at`-th git process, and what must hold after."""
    _steps, call, subject, path, kept, leaves = verb
    base = git(repo.path, "rev-parse", "HEAD").strip()
    with pytest.MonkeyPatch.context() as patch:
        seen = interleaved(patch, repo, act, at)
        proc = repo.run(*call)
    assert proc.returncode in (0, 1, 3, 4) and "internal error" not in proc.stderr, proc.stderr
    if at >= len(seen) or REFUSED:  # never ran, or git refused it meanwhile: the user runs it again now
        act(repo)
    if proc.returncode:  # nothing lost: the verb can be run again, and then does its work
        repo.ok(*call)
    assert (repo / leaves).is_file()
    assert git(repo.path, "ls-tree", "--name-only", "HEAD", "--", path).strip() == (path if kept else "")
    commits = commits_since(repo, base)
    for message, paths in commits:
        if not message.startswith("user:"):
            assert paths and all(p.startswith("backlog/") for p in paths), (message, paths)
        elif action != "commit-all":  # a user's plain commit takes what is staged: never the verb's move
            assert not any(p.startswith("backlog/") for p in paths), (message, paths)
    if action != "commit-all":  # the verb has its own commit (`git commit -a` takes the move first)
        assert any(m.startswith(subject) and path in p for m, p in commits), commits
    status = git(repo.path, "status", "--porcelain", "--untracked-files=no")
    if action == "stage":  # staged and never committed by anyone: still staged, in no backlog commit
        assert "A  user.txt" in status, status
    assert "backlog/" not in status, status  # nothing of the verb's left staged or pending
