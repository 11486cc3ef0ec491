"""Users' git settings, generated (docs/reliability.md, *Users' git settings*).

The tests set `HOME` and `GIT_CONFIG_NOSYSTEM`, so no user's settings reach them by accident. Here
hypothesis draws up to six settings users really set (line endings, the index's format, status and
log output, encodings, renames, fsync, gc), and sometimes a top-level `.gitattributes`, writes them
into a fresh repository's own config (so every git process reads them, the tool's and the user's),
sets a backlog up under them and runs a task's whole life across two worktrees: add, a task
committed by hand with CRLF line endings, take, progress, advance, fail, retry, release, rename,
an add and an edit from the linked worktree (maildir-shared: written into the intake branch,
checked out in the main worktree), cancel, the janitor. After it: every call answered 0 without a traceback, both work trees are clean, the
CRLF task kept its bytes, and a second janitor run in each worktree finds nothing to fix.

`BACKLOG_SETTINGS_EXAMPLES=200` searches longer; each shrunk failure stays below as an @example.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from conftest import BACKENDS, Repo, add_worktree, init_repo
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("BACKLOG_SETTINGS_EXAMPLES", "3"))

POOL = (
    ("core.autocrlf", "true"),
    ("core.autocrlf", "input"),
    ("core.eol", "crlf"),
    ("core.safecrlf", "true"),
    ("core.ignoreCase", "true"),
    ("core.quotePath", "false"),
    ("status.showUntrackedFiles", "no"),
    ("core.untrackedCache", "true"),
    ("feature.manyFiles", "true"),
    ("index.version", "4"),
    ("core.splitIndex", "true"),
    ("core.checkStat", "minimal"),
    ("core.trustctime", "false"),
    ("core.filemode", "false"),
    ("core.symlinks", "false"),
    ("core.precomposeUnicode", "true"),
    ("core.preloadIndex", "false"),
    ("core.fsync", "all"),
    ("core.logAllRefUpdates", "always"),
    ("core.bigFileThreshold", "1"),
    ("core.abbrev", "40"),
    ("core.commentChar", ";"),
    ("log.showSignature", "true"),
    ("format.pretty", "fuller"),
    ("log.decorate", "full"),
    ("status.short", "true"),
    ("status.branch", "true"),
    ("status.renames", "copies"),
    ("diff.renames", "copies"),
    ("diff.noprefix", "true"),
    ("color.ui", "always"),
    ("column.ui", "always"),
    ("i18n.logOutputEncoding", "latin1"),
    ("i18n.commitEncoding", "latin1"),
    ("commit.verbose", "true"),
    ("commit.cleanup", "verbatim"),
    ("submodule.recurse", "true"),
    ("merge.ff", "false"),
    ("gc.auto", "1"),
    ("extensions.worktreeConfig", "true"),
)
ROOT_ATTRIBUTES = (None, "* text=auto eol=crlf\n", "* text eol=crlf\n", "*.md ident\n")
CRLF_TASK = b"---\r\npriority: 3\r\n---\r\n\r\n# written on Windows\r\n\r\nbody\r\n\r\n---\r\n\r\n"
GUIDE = b"# Agents\r\n\r\nRead the code first.\r\n"


def _git(cwd, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout


def _ok(where: Repo, *args: str) -> str:
    done = where.run(*args)
    assert done.returncode == 0 and "Traceback" not in done.stderr, f"backlog {' '.join(args)}: {done.stderr}"
    return done.stdout


def _nothing_to_fix(where: Repo) -> None:
    report = json.loads(_ok(where, "--json", "maintain"))
    fixed = [f for found in report["buckets"].values() for f in found if f["fixed"]]
    assert not fixed, fixed


def _clean(where: Repo) -> None:
    assert _git(where.path, "status", "--porcelain", "--untracked-files=all") == ""


@pytest.mark.stress
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    chosen=st.lists(st.sampled_from(POOL), max_size=6, unique_by=lambda kv: kv[0]),
    attributes=st.sampled_from(ROOT_ATTRIBUTES),
    backend=st.sampled_from(BACKENDS),
)
@example(chosen=[("core.autocrlf", "true"), ("core.safecrlf", "true")], attributes=None, backend="maildir-shared")
@example(chosen=[("core.autocrlf", "true")], attributes="* text eol=crlf\n", backend="maildir-git")
def test_a_task_s_life_under_users_git_settings(tmp_path_factory, chosen, attributes, backend):
    base = tmp_path_factory.mktemp("settings")
    repo = Repo(init_repo(base / "repo"))
    (repo / "AGENTS.md").write_bytes(GUIDE)  # setup links the repository's guide to the backlog's
    if attributes:
        (repo / ".gitattributes").write_text(attributes)
    _git(repo.path, "add", "-A")
    _git(repo.path, "commit", "-q", "-m", "the user's files")
    for key, value in chosen:
        _git(repo.path, "config", key, value)
    _ok(repo, "setup", f"--backend={backend}")
    for name in ("alpha", "beta", "gamma"):
        _ok(repo, "add", name)
    (repo / "backlog/todo/crlf-plan.md").write_bytes(CRLF_TASK)
    _git(repo.path, "add", "backlog/todo/crlf-plan.md")
    _git(repo.path, "commit", "-q", "-m", "a task written on Windows")
    w = Repo(add_worktree(repo.path, base / "w", "w"))
    intake = repo if backend == "maildir-shared" else w  # maildir-git: each branch's piles are its own
    for where, *args in (
        (w, "take", "alpha-plan"),
        (w, "progress", "--slug", "alpha-plan", "half way"),
        (w, "advance", "alpha-plan"),
        (repo, "take", "beta-plan"),
        (repo, "fail", "beta-plan", "blocked"),
        (repo, "retry", "beta-plan", "unblocked"),
        (w, "take", "beta-plan"),
        (w, "release", "beta-plan"),
        (w, "take", "crlf-plan"),
        (w, "advance", "crlf-plan"),
        (repo, "rename", "gamma-plan", "delta-plan"),
        (w, "add", "late"),  # maildir-shared: onto the intake branch, checked out in the main worktree
        (w, "edit", "late-plan", "--set", "priority=1", "--set", "title=Late, second pass"),
        (intake, "take", "late-plan"),
        (intake, "cancel", "late-plan", "not needed"),
        (repo, "maintain"),
        (w, "maintain"),
        (repo, "status"),
        (w, "ready"),
    ):
        _ok(where, *args)
    assert (w / "backlog/done/crlf-plan.md").read_bytes().startswith(CRLF_TASK)
    assert "delta-plan" in _ok(repo, "show", "delta-plan")
    for where in (repo, w):
        _nothing_to_fix(where)
        _clean(where)
