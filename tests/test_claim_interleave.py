"""A user's git command between any two git processes of a claim (and of a completion). A claim runs several git
processes (it opens the repository, reads, commits); none of them is atomic with the others, and a
user works in the same worktree meanwhile. Each case runs one user command before the k-th git
process of `take SLUG` (every git process the command starts: `git._text` and `git.call` are the
only two places that start one) and checks what a claim promises whatever came between:

- the user's command either runs or is refused by git (an index lock held by a running git
  command; the user then runs it again);
- the verb ends with an exit code of the contract (never an internal error);
- a claim that succeeded is in flight and its todo/ copy is gone from HEAD, in a commit of its own
  (a user's `git commit -a` may carry the removal first: it always could, the work tree lost the
  file before the commit);
- a backlog commit holds only backlog paths, and a user's plain commit never holds one; what the
  user staged and did not commit is still staged;
- a claim that failed loses nothing: the task can be claimed again, and then is;
- the index does not re-add the claimed task behind it.

It found two holes in a claim committed through plumbing (session 12, docs/design.md, *A claim
still commits with `git commit --only`*): it fails on that code.
"""

from __future__ import annotations

import pytest
from conftest import copy_repo, git

from maildir_backlog import git as gitmod

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


# Open holes (backlog/todo/claim-staging-window-followup.md), each a strict xfail: a verb that
# writes a new tracked file stages it (`git add -A`), then commits (`git commit --only`), two git
# processes; a user's plain `git commit` between them (before the third git process here) takes
# the staged move into the user's commit, and the verb's own commit never comes. A maildir-shared
# claim writes no tracked file (its removal is taken from the work tree by `--only`): not open.
OPEN = {("claim", "maildir-git", "commit", 2), ("completion", "maildir-shared", "commit", 2)}
OPEN |= {("completion", "maildir-git", "commit", 2)}


def open_hole(request, verb: str, backend: str, action: str, at: int) -> None:
    if (verb, backend, action, at) in OPEN:
        reason = "a user's git commit between a verb's staging and its commit takes the move"
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))


def commits_since(repo, base: str) -> list[tuple[str, list[str]]]:
    out = git(repo.path, "log", "--format=%x00%s", "--name-only", f"{base}..HEAD")
    found = []
    for chunk in out.split("\0")[1:]:
        lines = [line for line in chunk.splitlines() if line.strip()]
        found.append((lines[0], lines[1:]))
    return found


@pytest.mark.parametrize("action", sorted(ACTIONS))
@pytest.mark.parametrize("at", range(8))
@pytest.mark.parametrize("backend", ["maildir-shared", "maildir-git"])
def test_a_user_command_between_any_two_git_processes_of_a_claim(
    tmp_path, repo_templates, monkeypatch, request, backend, action, at
):
    open_hole(request, "claim", backend, action, at)
    repo = copy_repo(repo_templates(backend, ("add", "x")), tmp_path / "repo")
    base = git(repo.path, "rev-parse", "HEAD").strip()
    with pytest.MonkeyPatch.context() as patch:
        seen = interleaved(patch, repo, ACTIONS[action], at)
        proc = repo.run("take", SLUG)
    assert proc.returncode in (0, 1, 3, 4) and "internal error" not in proc.stderr, proc.stderr
    if at == 0:  # the claim ran git more than once: there are points between
        assert len(seen) >= 2, seen
    if at >= len(seen) or REFUSED:  # never ran, or git refused it meanwhile: the user runs it again now
        ACTIONS[action](repo)
    if proc.returncode:  # nothing lost: the task is still there to claim, and the claim now works
        repo.ok("take", SLUG)
    doing = repo / "backlog" / "doing" / f"{SLUG}.md"
    assert doing.is_file()
    assert git(repo.path, "ls-tree", "--name-only", "HEAD", "--", TODO) == ""
    commits = commits_since(repo, base)
    for subject, paths in commits:
        if not subject.startswith("user:"):
            assert paths and all(p.startswith("backlog/") for p in paths), (subject, paths)
        elif action != "commit-all":  # a user's plain commit takes what is staged: never the claim's removal
            assert not any(p.startswith("backlog/") for p in paths), (subject, paths)
    if action != "commit-all":  # the claim has its own commit (`git commit -a` takes the deletion first)
        assert any(s.startswith(f"advance({SLUG}) → doing") and TODO in p for s, p in commits), commits
    status = git(repo.path, "status", "--porcelain", "--untracked-files=no")
    if action == "stage":  # staged and never committed by anyone: still staged, in no backlog commit
        assert "A  user.txt" in status, status
    assert TODO not in status, status  # the claim's removal is not left staged or pending


@pytest.mark.parametrize("action", sorted(ACTIONS))
@pytest.mark.parametrize("at", range(6))
@pytest.mark.parametrize("backend", ["maildir-shared", "maildir-git"])
def test_a_user_command_between_any_two_git_processes_of_a_completion(
    tmp_path, repo_templates, monkeypatch, request, backend, action, at
):
    """The same for `advance` into done/: the completion is committed in a commit of its own,
    holding only backlog paths, and nothing of the user's."""
    open_hole(request, "completion", backend, action, at)
    repo = copy_repo(repo_templates(backend, ("add", "x"), ("take", SLUG)), tmp_path / "repo")
    base = git(repo.path, "rev-parse", "HEAD").strip()
    with pytest.MonkeyPatch.context() as patch:
        seen = interleaved(patch, repo, ACTIONS[action], at)
        proc = repo.run("advance", SLUG)
    assert proc.returncode in (0, 1, 3, 4) and "internal error" not in proc.stderr, proc.stderr
    if at >= len(seen) or REFUSED:
        ACTIONS[action](repo)
    if proc.returncode:
        repo.ok("advance", SLUG)
    done = f"backlog/done/{SLUG}.md"
    assert git(repo.path, "ls-tree", "--name-only", "HEAD", "--", done).strip() == done
    commits = commits_since(repo, base)
    for subject, paths in commits:
        if not subject.startswith("user:"):
            assert paths and all(p.startswith("backlog/") for p in paths), (subject, paths)
        elif action != "commit-all":
            assert not any(p.startswith("backlog/") for p in paths), (subject, paths)
    if action != "commit-all":
        assert any(s.startswith(f"advance({SLUG}) → done") and done in p for s, p in commits), commits
    status = git(repo.path, "status", "--porcelain", "--untracked-files=no")
    if action == "stage":
        assert "A  user.txt" in status, status
    assert "backlog/" not in status, status
