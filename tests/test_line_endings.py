"""Line endings (docs/reliability.md, *Users' git settings*): git converts no file under backlog/,
whatever `core.autocrlf` says, because `backlog setup` commits `backlog/.gitattributes`; and
`maintain` brings a backlog set up before that file existed up to date, giving back their
committed bytes to the files git had already checked out with CRLF.

Each test sets `core.autocrlf=true` in the repository's own config, so git's checkouts in every
worktree convert (as on a machine whose user set it globally); the tool's git calls read the same
config."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from conftest import BACKENDS, Repo, add_worktree, backlog, copy_repo

from maildir_backlog.attributes import ATTRIBUTES, MESSAGE, RULE

CRLF_TASK = b"---\r\npriority: 2\r\n---\r\n\r\n# written on Windows\r\n\r\nbody\r\n\r\n---\r\n\r\n"


def _converting(tmp_path, repo_templates, backend: str, old_layout: bool = False) -> Repo:
    """A set-up backlog (without .gitattributes when `old_layout`: a backlog set up before it
    existed) with one task the tool added and one CRLF task committed by hand, in a repository
    whose git converts line endings."""
    repo = copy_repo(repo_templates(backend), tmp_path / "repo")
    if old_layout:
        repo.git("rm", "-q", "backlog/.gitattributes")
        repo.git("commit", "-q", "-m", "a backlog set up before .gitattributes")
    repo.git("config", "core.autocrlf", "true")
    repo.ok("add", "alpha")
    (repo / "backlog/todo/crlf-plan.md").write_bytes(CRLF_TASK)
    repo.git("add", "backlog/todo/crlf-plan.md")
    repo.git("commit", "-q", "-m", "a task written on Windows")
    return repo


def _committed(repo: Repo, rel: str) -> bytes:
    return git_bytes(repo.path, "cat-file", "blob", f"HEAD:{rel}")


def git_bytes(cwd, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=True).stdout


@pytest.mark.parametrize("backend", BACKENDS)
def test_setup_keeps_every_file_byte_for_byte_under_autocrlf(tmp_path, repo_templates, backend):
    """A worktree checked out under `core.autocrlf=true` holds exactly the committed bytes, and a
    CRLF task file is stored as written; the task moves through the pipeline byte for byte."""
    repo = _converting(tmp_path, repo_templates, backend)
    assert (repo / "backlog/.gitattributes").read_bytes() == ATTRIBUTES
    assert _committed(repo, "backlog/todo/crlf-plan.md") == CRLF_TASK  # stored as written, CRLF and all
    w = Repo(add_worktree(repo.path, tmp_path / "w", "w"))
    for rel in ("backlog/todo/alpha-plan.md", "backlog/todo/crlf-plan.md", "backlog/AGENTS.md"):
        assert (w / rel).read_bytes() == _committed(repo, rel) == (repo / rel).read_bytes(), rel
    w.ok("take", "crlf-plan")
    w.ok("progress", "--slug", "crlf-plan", "half way")
    w.ok("advance", "crlf-plan")
    done = (w / "backlog/done/crlf-plan.md").read_bytes()
    assert done.startswith(CRLF_TASK) and _committed(w, "backlog/done/crlf-plan.md") == done
    assert w.git("status", "--porcelain", "--untracked-files=all") == ""


def test_a_take_killed_before_its_commit_is_finished_under_autocrlf(tmp_path, repo_templates):
    """maildir-git, a worktree checked out under `core.autocrlf=true`: a claim killed after it
    removed the todo/ copy and before its commit is finished by the janitor (it compares the
    deleted blob with the copy in doing/: with a converted checkout the two differed)."""
    repo = _converting(tmp_path, repo_templates, "maildir-git")
    w = Repo(add_worktree(repo.path, tmp_path / "w", "w"))
    killed = backlog(w.path, "take", "alpha-plan", env={"BACKLOG_CRASH_AT": "apply:source-removed"})
    assert killed.returncode == -9, killed.stderr
    w.ok("maintain")
    assert w.git("status", "--porcelain", "--untracked-files=all") == ""
    assert not (w / "backlog/todo/alpha-plan.md").exists()
    assert _committed(w, "backlog/doing/alpha-plan.md") == (w / "backlog/doing/alpha-plan.md").read_bytes()
    again = json.loads(w.ok("--json", "maintain"))["buckets"]
    assert not any(f["fixed"] for found in again.values() for f in found), again


@pytest.mark.parametrize("backend", BACKENDS)
def test_maintain_adds_the_rule_and_gives_converted_copies_their_bytes_back(tmp_path, repo_templates, backend):
    """A backlog set up before .gitattributes existed, checked out converted: a dry run says what
    it would do and changes nothing; the janitor commits the file and rewrites each converted copy
    to its committed bytes (the task committed with CRLF too: git stored it with LF before the
    rule); a second run finds nothing."""
    repo = _converting(tmp_path, repo_templates, backend, old_layout=True)
    w = Repo(add_worktree(repo.path, tmp_path / "w", "w"))
    alpha, agents = w / "backlog/todo/alpha-plan.md", w / "backlog/AGENTS.md"
    assert b"\r\n" in alpha.read_bytes() and b"\r\n" in agents.read_bytes()  # git converted them
    crlf = w / "backlog/todo/crlf-plan.md"
    assert _committed(w, "backlog/todo/crlf-plan.md") == CRLF_TASK.replace(b"\r\n", b"\n")
    before = {p: p.read_bytes() for p in (alpha, agents, crlf)}
    head = w.git("rev-parse", "HEAD")

    dry = json.loads(w.ok("--json", "maintain", "--dry-run"))
    said = {f["path"]: f["detail"] for f in dry["buckets"]["LAYOUT"]}
    assert "would be written and committed" in said["backlog/.gitattributes"]
    assert "would give it its committed bytes back" in said["backlog/todo/alpha-plan.md"]
    assert "would give it its committed bytes back" in said["backlog/todo/crlf-plan.md"]
    assert {p: p.read_bytes() for p in before} == before and w.git("rev-parse", "HEAD") == head
    assert not (w / "backlog/.gitattributes").exists()
    marker = w.context().layout.line_endings_checked
    assert not marker.exists()  # a dry run looks, and remembers nothing

    out = w.ok("maintain")
    assert "LAYOUT: backlog/.gitattributes (missing: written and committed" in out
    assert "LAYOUT: backlog/todo/alpha-plan.md (checked out with CRLF line endings by git: given" in out
    assert w.head_message() == MESSAGE and _committed(w, "backlog/.gitattributes") == ATTRIBUTES
    for path in (alpha, agents, crlf):
        assert path.read_bytes() == _committed(w, os.path.relpath(path, w.path)), path
    assert w.git("status", "--porcelain", "--untracked-files=all") == ""
    again = json.loads(w.ok("--json", "maintain"))
    assert again["buckets"]["LAYOUT"] == [] and w.head_message() == MESSAGE
    assert marker.exists()  # looked over once: every checkout since honours the rule


def test_with_a_rule_of_the_users_that_asks_for_crlf_nothing_is_rewritten(tmp_path, repo_templates):
    """The user's own backlog/.gitattributes asks for CRLF in the work tree: it is named (it lacks
    the rule), and the CRLF copies are what the user asked for, never rewritten."""
    repo = _converting(tmp_path, repo_templates, "maildir-shared", old_layout=True)
    (repo / "backlog/.gitattributes").write_bytes(b"*.md text eol=crlf\n")
    repo.git("add", "backlog/.gitattributes")
    repo.git("commit", "-q", "-m", "the user's rule")
    w = Repo(add_worktree(repo.path, tmp_path / "w", "w"))
    alpha = w / "backlog/todo/alpha-plan.md"
    converted = alpha.read_bytes()
    assert b"\r\n" in converted
    out = w.ok("maintain")
    assert "LAYOUT: backlog/.gitattributes (does not hold the line" in out and "alpha-plan" not in out, out
    assert alpha.read_bytes() == converted and not w.context().layout.line_endings_checked.exists()


def test_a_copy_the_user_changed_is_left_alone(tmp_path, repo_templates):
    """A converted copy with an edit of the user's on top is not a conversion: never rewritten."""
    repo = _converting(tmp_path, repo_templates, "maildir-shared", old_layout=True)
    w = Repo(add_worktree(repo.path, tmp_path / "w", "w"))
    alpha = w / "backlog/todo/alpha-plan.md"
    alpha.write_bytes(alpha.read_bytes() + b"a note of mine\r\n")
    mine = alpha.read_bytes()
    out = w.ok("maintain")
    assert "alpha-plan.md" not in out and alpha.read_bytes() == mine


@pytest.mark.parametrize(
    "content, left",
    [
        (b"*.md text eol=crlf\n", True),  # the user's own rule, without ours: named, left
        (b"# ours among others\n*.png binary\n" + RULE + b"\n", False),
        (None, True),  # a symlink: never followed
    ],
)
def test_a_gitattributes_of_the_users_is_never_rewritten(tmp_path, repo_templates, content, left):
    repo = copy_repo(repo_templates("maildir-shared"), tmp_path / "repo")
    path = repo / "backlog/.gitattributes"
    path.unlink()
    if content is None:
        (tmp_path / "elsewhere").write_bytes(ATTRIBUTES)
        path.symlink_to(tmp_path / "elsewhere")
    else:
        path.write_bytes(content)
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "the user's attributes")
    head = repo.git("rev-parse", "HEAD")
    out = repo.ok("maintain")
    assert ("backlog/.gitattributes" in out) == left, out
    if left:
        assert "left in place" in out
    assert repo.git("rev-parse", "HEAD") == head
    if content is not None:
        assert path.read_bytes() == content
    else:
        assert path.is_symlink() and (tmp_path / "elsewhere").read_bytes() == ATTRIBUTES
