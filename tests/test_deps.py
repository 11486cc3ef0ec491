"""`backlog check-deps FILE…`, the pre-commit hook (SPEC §5), and `.pre-commit-hooks.yaml`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, Repo, git

from maildir_backlog.commands.check_deps import check_deps, hint


def task(repo: Repo, pile: str, slug: str, deps: list[str] | None = None, stage: bool = False) -> str:
    rel = f"backlog/{pile}/{slug}.md"
    body = ""
    if deps:
        body = "---\ndependencies:\n" + "".join(f"  {d}: because\n" for d in deps) + "---\n\n"
    (repo / rel).write_text(body + f"# {slug}\n\n---\n")
    if stage:
        git(repo.path, "add", rel)
    return rel


def check(repo: Repo, *files: str, cwd: Path | None = None):
    proc = subprocess.run(
        [sys.executable, "-m", "maildir_backlog", "check-deps", *files],
        cwd=cwd or repo.path,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_resolved_in_every_pile(shared):
    shared.ok("add", "queued")
    shared.ok("add", "flying")
    shared.ok("take", "flying-plan")  # a shared pile
    shared.ok("add", "finished")
    shared.ok("take", "finished-plan")
    shared.ok("advance", "finished-plan")
    shared.ok("add", "broken")
    shared.ok("take", "broken-plan")
    shared.ok("fail", "broken-plan", "no")
    rel = task(shared, "todo", "x", ["queued-plan", "flying-plan", "finished-plan", "broken-plan"])
    proc = check(shared, rel)
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == ""


def test_unresolved_fails_with_file_slug_and_hint(gitbk):
    gitbk.ok("add", "near")
    rel = task(gitbk, "todo", "x", ["nowhere-plan", "near", "bare"])
    proc = check(gitbk, rel)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        "backlog: unresolved dep in backlog/todo/x.md: nowhere-plan",
        "  author it with: backlog add nowhere plan",
        "backlog: unresolved dep in backlog/todo/x.md: near",
        "  did you mean near-plan? (`backlog add` appends -<category> to the slug)",
        "backlog: unresolved dep in backlog/todo/x.md: bare",
        "  author it with: backlog add bare (that creates bare-plan, since add appends -<category>:"
        " name the dependency bare-plan)",
    ]


def test_hint_for_each_category():
    assert hint("a-task-list", set()) == "author it with: backlog add a task-list"
    assert hint("a-followup", set()) == "author it with: backlog add a followup"
    assert hint("x", {"x-ideas"}).startswith("did you mean x-ideas?")


def test_dependency_staged_in_the_same_commit_resolves(gitbk):
    dep = task(gitbk, "todo", "schema", stage=True)
    (gitbk / dep).unlink()  # present only in the index
    rel = task(gitbk, "todo", "x", ["schema"], stage=True)
    assert check(gitbk, rel).returncode == 0
    git(gitbk.path, "rm", "-q", "--cached", dep)
    assert check(gitbk, rel).returncode == 1


def test_files_outside_backlog_and_docs_are_ignored(gitbk):
    (gitbk / "src").mkdir()
    (gitbk / "src/notes.md").write_text("---\ndependencies: [nowhere]\n---\n")
    (gitbk / "backlog/todo/sub").mkdir()
    (gitbk / "backlog/todo/sub/deep.md").write_text("---\ndependencies: [nowhere]\n---\n")
    (gitbk / "backlog/ROADMAP.md").write_text("---\ndependencies: [nowhere]\n---\n")
    proc = check(
        gitbk,
        "src/notes.md",
        "README.md",
        "backlog/AGENTS.md",
        "backlog/CLAUDE.md",
        "backlog/ROADMAP.md",
        "backlog/todo/sub/deep.md",
        "backlog/todo/deleted-in-this-commit.md",
        "../elsewhere.md",
    )
    assert proc.returncode == 0 and proc.stderr == ""


def test_invalid_frontmatter_is_one_line(gitbk):
    (gitbk / "backlog/todo/bad.md").write_text("---\npriority: [unclosed\n---\n# bad\n")
    (gitbk / "backlog/todo/worse.md").write_text("---\ndependencies: 42\n---\n# worse\n")
    proc = check(gitbk, "backlog/todo/bad.md", "backlog/todo/worse.md")
    assert proc.returncode == 1
    errors = proc.stderr.splitlines()
    assert len(errors) == 2
    assert errors[0].startswith("backlog: backlog/todo/bad.md: invalid frontmatter:")
    assert errors[1].startswith("backlog: backlog/todo/worse.md: invalid dependencies:")


def test_works_without_a_declaration_and_from_a_subdirectory(repo):
    (repo / "backlog/todo").mkdir(parents=True)
    (repo / "backlog/done").mkdir(parents=True)
    task(repo, "done", "a")
    rel = task(repo, "todo", "b", ["a"])
    bad = task(repo, "todo", "c", ["zzz"])
    (repo / "src").mkdir()
    assert check(repo, "../" + rel, cwd=repo / "src").returncode == 0
    proc = check(repo, "../" + bad, cwd=repo / "src")
    assert proc.returncode == 1 and "unresolved dep in backlog/todo/c.md: zzz" in proc.stderr
    assert not (repo / "backlog/doing").exists(), "the hook never runs the layout heal"


def test_json(gitbk):
    rel = task(gitbk, "todo", "x", ["nowhere-plan"])
    proc = subprocess.run(
        [sys.executable, "-m", "maildir_backlog", "--json", "check-deps", rel],
        cwd=gitbk.path,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    data = json.loads(proc.stdout)
    assert proc.returncode == 1
    assert data["checked"] == [rel] and data["ok"] is False
    assert data["unresolved"] == [
        {"file": rel, "slug": "nowhere-plan", "hint": "author it with: backlog add nowhere plan"}
    ]


def test_in_process_result(gitbk):
    rel = task(gitbk, "todo", "x", ["y"])
    result = check_deps(gitbk.path, [rel])
    assert result.code == 1 and result.data["unresolved"][0]["slug"] == "y"
    task(gitbk, "todo", "y")
    assert check_deps(gitbk.path, [rel]).code == 0


def test_outside_a_repository(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "maildir_backlog", "check-deps", "backlog/todo/x.md"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert proc.returncode == 1 and proc.stderr.strip() == "backlog: not inside a git repository"


# -- the hook as pre-commit runs it ------------------------------------------------------------
def hook_entry(hook_id: str = "backlog-check-deps") -> dict:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    [hook] = [h for h in hooks if h["id"] == hook_id]
    return hook


def test_the_post_checkout_hook_is_offered_to_pre_commit():
    hook = hook_entry("backlog-post-checkout")
    assert hook["stages"] == ["post-checkout"] and hook["always_run"] and not hook["pass_filenames"]


def test_pre_commit_hooks_yaml():
    hook = hook_entry()
    assert hook["id"] == "backlog-check-deps"
    assert hook["entry"] == "backlog check-deps"
    assert hook["language"] == "python"
    files = re.compile(hook["files"])
    assert files.search("backlog/todo/x.md") and files.search("backlog/done/y.md")
    assert not files.search("src/backlog/x.md") and not files.search("backlog/todo/x.txt")


@pytest.fixture
def hooked(gitbk) -> Repo:
    """A git pre-commit hook that calls the hook entry with the staged files its `files` pattern
    matches, the way pre-commit does."""
    hook = hook_entry()
    bindir = Path(sys.executable).parent
    script = f"""#!/bin/sh
export PATH="{bindir}:$PATH"
export PYTHONPATH="{ROOT}"
files=$(git diff --cached --name-only --diff-filter=ACMR | grep -E '{hook["files"]}')
[ -z "$files" ] && exit 0
exec {hook["entry"]} $files
"""
    path = gitbk / ".git/hooks/pre-commit"
    path.write_text(script)
    path.chmod(0o755)
    return gitbk


def commit(repo: Repo, message: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "commit", "-qm", message], cwd=repo.path, capture_output=True, text=True)


def test_git_hook_rejects_an_unresolved_dependency(hooked):
    task(hooked, "todo", "x", ["nowhere-plan"], stage=True)
    proc = commit(hooked, "x")
    assert proc.returncode != 0
    assert "backlog: unresolved dep in backlog/todo/x.md: nowhere-plan" in proc.stderr
    assert "author it with: backlog add nowhere plan" in proc.stderr
    assert "backlog/todo/x.md" not in git(hooked.path, "ls-tree", "-r", "--name-only", "HEAD")


def test_git_hook_accepts_a_dependency_staged_with_it(hooked):
    task(hooked, "todo", "x", ["schema-plan"], stage=True)
    task(hooked, "todo", "schema-plan", stage=True)
    proc = commit(hooked, "both")
    assert proc.returncode == 0, proc.stderr
    # and the tool's own commits pass the hook too
    hooked.ok("add", "y", "--depends", "x")
    hooked.ok("take", "x", "--force")  # x waits for schema-plan: claimed anyway


def test_check_deps_sees_the_intake_branchs_tasks(shared):
    """SPEC §5 check-deps: a dependency on a task that only the intake branch holds (added there
    after this worktree branched) resolves, as it does for `add --depends` and `take`."""
    feature = shared.worktree("feature")
    shared.ok("add", "schema")  # on main, the intake branch: the feature worktree has no copy
    assert not (feature / "backlog/todo/schema-plan.md").exists()
    task(feature, "todo", "x", ["schema-plan"])
    proc = feature.run("check-deps", "backlog/todo/x.md")
    assert proc.returncode == 0, proc.stderr
    task(feature, "todo", "y", ["nowhere-plan"])
    assert feature.run("check-deps", "backlog/todo/y.md").returncode == 1
