"""Agents drain a backlog while git's own housekeeping runs beside them (SPEC §7: exactly once,
nothing lost; §7.13: the user's git is the user's).

`git gc` (repacking, pruning loose objects already packed, packing refs) and `git pack-refs`
run in a loop in the intake worktree while three agents `take` and `advance` every task as real
processes: from three worktrees with maildir-shared (one clone, one queue), from one worktree
with maildir-git (whose piles are each branch's own). git's own race may fail a verb's write
(maildir-git: `fatal: adding files failed`, where `git add` writes a loose object into a
directory gc's prune just removed): the verb must then fail cleanly, in one line, leaving the
task where it was, so that the agent's next call goes on. After the drain: every task done exactly once, none in flight, every work
tree clean (backlog/todo/concurrent-gc-followup.md: whether such a failure should say "retry").
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import forkrun
import pytest
from conftest import BACKENDS, copy_repo, git
from test_guarantees import done_slugs

TASKS = 15
TRIES = 5  # calls an agent makes of one verb before it gives up (a clean failure each time)


def _housekeeping(cwd: Path, stop: threading.Event, runs: list[int]) -> None:
    while not stop.is_set():
        for argv in (("gc", "-q"), ("pack-refs", "--all"), ("gc", "-q", "--auto")):
            subprocess.run(["git", *argv], cwd=cwd, capture_output=True, check=False)
        runs[0] += 1


def _call(path: Path, env: dict, failures: list, *argv: str) -> subprocess.CompletedProcess:
    """One verb as an agent calls it: again after a clean failure (one line, exit 1), up to TRIES."""
    for _ in range(TRIES):
        proc = forkrun.run(path, *argv, env=env)
        said = proc.stdout + proc.stderr
        assert "Traceback" not in said and "internal error" not in said, said
        if proc.returncode in (0, 3):
            return proc
        assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, (argv, proc.stderr)
        failures.append((argv, proc.stderr.strip()))
    raise AssertionError(f"{argv} failed {TRIES} times: {failures[-TRIES:]}")


def _agent(path: Path, env: dict, log: list, failures: list, errors: list) -> None:
    try:
        while True:
            proc = _call(path, env, failures, "--json", "take")
            if proc.returncode == 3:
                continue  # lost a race: retry now
            slug = json.loads(proc.stdout)["slug"]
            if slug is None:
                return
            assert _call(path, env, failures, "advance", slug).returncode == 0
            log.append(slug)
    except AssertionError as exc:
        errors.append(exc)


@pytest.mark.stress
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_drain_beside_git_gc_completes_every_task_exactly_once(tmp_path, repo_templates, backend):
    main = copy_repo(repo_templates(backend), tmp_path / "repo")
    for i in range(TASKS):
        (main / f"backlog/todo/t{i:02d}.md").write_text(f"---\npriority: {1 + i % 3}\n---\n\n# Task {i}\n")
    git(main.path, "add", "backlog/todo")
    git(main.path, "commit", "-qm", "tasks")
    trees = [main.worktree(f"w{i}") for i in range(3 if backend == "maildir-shared" else 1)]
    places = [trees[n % len(trees)] for n in range(3)]
    env = dict(os.environ)
    logs: list[list[str]] = [[] for _ in places]
    failures: list = []
    errors: list = []
    stop, runs = threading.Event(), [0]
    keeper = threading.Thread(target=_housekeeping, args=(main.path, stop, runs))
    keeper.start()
    agents = [
        threading.Thread(target=_agent, args=(t.path, env, logs[n], failures, errors)) for n, t in enumerate(places)
    ]
    try:
        for agent in agents:
            agent.start()
        for agent in agents:
            agent.join(timeout=300)
    finally:
        stop.set()
        keeper.join(timeout=120)
    assert errors == [], (errors, failures)
    assert runs[0] > 0
    completed = [slug for log in logs for slug in log]
    assert sorted(completed) == [f"t{i:02d}" for i in range(TASKS)], (sorted(completed), failures)
    assert sorted(slug for t in trees for slug in done_slugs(t.path)) == sorted(completed)
    for t in [main, *trees]:
        assert not list((t / "backlog/doing").glob("*.md")), t
        assert git(t.path, "status", "--porcelain") == "", t
