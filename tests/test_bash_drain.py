"""The road in: two worktrees settle tasks the way the older bash tool does (files moved and
committed directly, a divider per advance, spaced claimer values, no ledger); then this tool's
workers drain the rest. Every task is completed exactly once; what the bash tool settled is never
claimed again."""

from __future__ import annotations

import json
import os
import threading

import forkrun
from conftest import ROOT, git


def bash_settle(wt, slug: str, outcome: str) -> None:
    src = wt.path / f"backlog/todo/{slug}.md"
    pile = "done" if outcome == "done" else "failed"
    text = src.read_text()
    text += f"- 2026-11-30T22:58:34Z advanced to=doing claimer=conductor:austin v3 branch={wt.path.name}\n"
    text += "- 2026-11-30T22:59:00Z progress | first line of a note\ncontinued on a second line\n"
    text += "\n---\n"
    text += (
        "- 2026-11-30T23:10:00Z advanced to=done\n"
        if outcome == "done"
        else "- 2026-11-30T23:10:00Z failed | gave up\n"
    )
    (wt.path / f"backlog/{pile}/{slug}.md").write_text(text)
    src.unlink()
    git(wt.path, "add", "-A", "backlog")
    git(wt.path, "commit", "-qm", f"{slug}: {outcome} (bash tool)")


def test_drain_after_the_bash_tool_settled_tasks_on_two_branches(shared):
    total = 16
    for i in range(total):
        shared.ok("add", f"t{i:02d}")
    w1, w2 = shared.worktree("w1"), shared.worktree("w2")
    for i in range(0, 4):
        bash_settle(w1, f"t{i:02d}-plan", "done")
    for i in range(4, 6):
        bash_settle(w2, f"t{i:02d}-plan", "done")
    bash_settle(w2, "t06-plan", "failed")
    settled_by_bash = {f"t{i:02d}-plan" for i in range(7)}
    completions: list[str] = []
    errors: list[tuple] = []
    lock = threading.Lock()

    def worker(wt) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        while True:
            proc = forkrun.run(wt.path, "--json", "take", env=env)
            if proc.returncode == 3:
                continue
            if proc.returncode != 0:
                errors.append(("take", wt.path.name, proc.stderr))
                return
            slug = json.loads(proc.stdout)["slug"]
            if slug is None:
                return
            proc = forkrun.run(wt.path, "advance", slug, env=env)
            if proc.returncode != 0:
                errors.append(("advance", slug, proc.stderr))
                return
            with lock:
                completions.append(slug)

    forkrun.ready()  # each command forked from the fork server (tests/forkrun.py): a real process
    threads = [threading.Thread(target=worker, args=(wt,)) for wt in (shared, w1, w2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors, errors
    assert sorted(completions) == sorted({f"t{i:02d}-plan" for i in range(total)} - settled_by_bash)
    assert not settled_by_bash & set(completions)
    for wt in (shared, w1, w2):
        out = wt.ok("maintain")
        assert "TIMED OUT" not in out and "ADVANCED BUT NOT MOVED" not in out
