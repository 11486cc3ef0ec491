"""The guarantees under pressure (marker `stress`; part of the CI run).

Four worktree workers drain and complete tasks, a janitor runs `maintain` every second, some
tasks have 2 s budgets and their workers stall so they time out and are failed (by the janitor or
by another worker's prelude) and then retried, and tasks are added concurrently. A stall does not
sleep through the budget: the stalled worker backdates its claim line by an hour (under the task's
lock, as `conftest.backdate`) and waits until someone else has failed the task (at most `STALL`
seconds, then it goes on with its advance as before). At the end every
task is settled exactly once, no progress line is lost, `git fsck` is clean and every non-zero exit
is explained. The figures are printed (run with `-s` to see them) and written to
`bench/results/load.json`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import ROOT, backdate, git

pytestmark = pytest.mark.stress

INITIAL = 48
SLOW = 6
ADDED = 12
DEADLINE = 240.0
STALL = 3.0  # the longest a stalled worker waits for the janitor or a prelude to fail its task


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.ops = Counter()
        self.conflicts = 0
        self.explained = Counter()
        self.errors: list = []
        self.progress: list[tuple[str, str]] = []
        self.completions: list[str] = []

    def bump(self, what, n=1):
        with self.lock:
            self.ops[what] += n


def run(stats: Stats, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "maildir_backlog", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=180,
    )
    stats.bump(args[0] if args[0] != "--json" else args[1])
    if "Traceback" in proc.stderr:
        with stats.lock:
            stats.errors.append((str(cwd.name), args, proc.returncode, proc.stderr))
    if proc.returncode == 3:
        with stats.lock:
            stats.conflicts += 1
    return proc


def unexplained(stats: Stats, cwd: Path, args, proc):
    with stats.lock:
        stats.errors.append((cwd.name, args, proc.returncode, proc.stderr.strip()))


def retry_failed(stats: Stats, cwd: Path):
    for path in sorted((cwd / "backlog/failed").glob("*.md")):
        proc = run(stats, cwd, "retry", path.stem, "stalled worker timed out")
        if proc.returncode not in (0, 3):
            unexplained(stats, cwd, ("retry", path.stem), proc)


def wait_gone(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def worker(stats: Stats, cwd: Path, stop: threading.Event, pause: float = 0.5):
    """Take, progress and advance until three takes in a row find nothing (`pause` s apart)."""
    idle = 0
    while not stop.is_set() and idle < 3:
        retry_failed(stats, cwd)
        proc = run(stats, cwd, "--json", "take")
        if proc.returncode == 3:
            continue
        if proc.returncode != 0:
            unexplained(stats, cwd, ("take",), proc)
            return
        slug = json.loads(proc.stdout)["slug"]
        if slug is None:
            idle += 1
            time.sleep(pause)
            continue
        idle = 0
        text = (cwd / f"backlog/doing/{slug}.md").read_text()
        if slug.startswith("slow") and "retried" not in text:
            # stall past the 2 s budget (claimed an hour ago now): the janitor or a prelude fails it
            if backdate(cwd, slug, missing_ok=True) is not None:
                wait_gone(cwd / f"backlog/doing/{slug}.md", STALL)
            proc = run(stats, cwd, "advance", slug)
            if proc.returncode == 0:
                with stats.lock:
                    stats.completions.append(slug)
            elif proc.returncode in (1, 3) and re.search(r"failed/|not in flight|now in|no task|rescue", proc.stderr):
                with stats.lock:
                    stats.explained["stalled advance refused"] += 1
            else:
                unexplained(stats, cwd, ("advance", slug), proc)
            continue
        note = f"{cwd.name} worked on {slug}"
        proc = run(stats, cwd, "progress", note, "--slug", slug)
        if proc.returncode == 0:
            with stats.lock:
                stats.progress.append((slug, note))
        elif proc.returncode in (1, 3):
            with stats.lock:
                stats.explained["progress after a prelude failed the task"] += 1
            continue
        else:
            unexplained(stats, cwd, ("progress", slug), proc)
        proc = run(stats, cwd, "advance", slug)
        if proc.returncode == 0:
            with stats.lock:
                stats.completions.append(slug)
        elif proc.returncode in (1, 3):
            with stats.lock:
                stats.explained["advance after a prelude failed the task"] += 1
        else:
            unexplained(stats, cwd, ("advance", slug), proc)


def janitor(stats: Stats, cwd: Path, stop: threading.Event):
    while not stop.is_set():
        proc = run(stats, cwd, "maintain")
        if proc.returncode != 0:
            unexplained(stats, cwd, ("maintain",), proc)
        stop.wait(1.0)


def adder(stats: Stats, cwd: Path):
    for i in range(ADDED):
        proc = run(stats, cwd, "add", f"late{i:02d}", "--priority", "1")
        if proc.returncode != 0:
            unexplained(stats, cwd, ("add",), proc)
        time.sleep(0.3)


def test_load(shared):
    for i in range(INITIAL):
        slow = i < SLOW
        name = f"slow{i:02d}" if slow else f"task{i:02d}"
        meta = "---\ntimeout: 2s\n---\n\n" if slow else f"---\npriority: {1 + i % 4}\n---\n\n"
        (shared / f"backlog/todo/{name}.md").write_text(f"{meta}# {name}\n\n---\n")
    git(shared.path, "add", "backlog/todo")
    git(shared.path, "commit", "-qm", "load tasks")
    trees = [shared.path] + [shared.worktree(f"w{i}").path for i in range(1, 4)]
    stats = Stats()
    stop = threading.Event()
    started = time.monotonic()
    workers = [threading.Thread(target=worker, args=(stats, t, stop)) for t in trees]
    helpers = [
        threading.Thread(target=janitor, args=(stats, shared.path, stop)),
        threading.Thread(target=adder, args=(stats, trees[1])),
    ]
    for t in workers + helpers:
        t.start()
    helpers[1].join()
    for t in workers:
        t.join(timeout=DEADLINE)
    stop.set()
    helpers[0].join()
    # settle what is left: one more janitor sweep, retries, and a final drain per worktree (nothing
    # runs beside it any more: no pause between its idle takes)
    run(stats, shared.path, "maintain")
    for t in trees:
        worker(stats, t, threading.Event(), pause=0)
    elapsed = time.monotonic() - started

    expected = {f"slow{i:02d}" if i < SLOW else f"task{i:02d}" for i in range(INITIAL)}
    expected |= {f"late{i:02d}-plan" for i in range(ADDED)}
    done = Counter(p.stem for t in trees for p in (t / "backlog/done").glob("*.md"))
    figures = {
        "operations": sum(stats.ops.values()),
        "by_verb": dict(stats.ops),
        "conflicts_exit_3": stats.conflicts,
        "explained_refusals": dict(stats.explained),
        "errors": len(stats.errors),
        "tasks": len(expected),
        "completions": len(stats.completions),
        "seconds": round(elapsed, 1),
    }
    Path(ROOT / "bench/results").mkdir(parents=True, exist_ok=True)
    (ROOT / "bench/results/load.json").write_text(json.dumps(figures, indent=2) + "\n")
    print("\nLOAD", json.dumps(figures))

    assert stats.errors == []
    assert set(done) == expected, (expected - set(done), set(done) - expected)
    assert max(done.values()) == 1, [s for s, n in done.items() if n > 1]
    assert sorted(stats.completions) == sorted(expected)
    assert list((shared / "backlog/doing").glob("*.md")) == []
    for slug, note in stats.progress:
        copies = [t / f"backlog/done/{slug}.md" for t in trees if (t / f"backlog/done/{slug}.md").exists()]
        assert len(copies) == 1 and f"progress | {note}" in copies[0].read_text(), (slug, note)
    git(shared.path, "fsck", "--no-progress", "--strict")
    for t in trees:
        assert git(t, "status", "--porcelain") == "", t
    final = subprocess.run(
        [sys.executable, "-m", "maildir_backlog", "maintain"],
        cwd=shared.path,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert final.returncode == 0
    assert not re.search(r"^(ADVANCED BUT NOT MOVED|TIMED OUT|DUPLICATE):", final.stdout, re.M), final.stdout
