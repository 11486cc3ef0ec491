#!/usr/bin/env python3
"""Lost races per completion when W agents drain one backlog at once (no herd, queue.spread).

    python bench/herd.py                          # W = 8 and 32, 96 tasks
    python bench/herd.py --workers 8 --tasks 48   # a smaller run
    python bench/herd.py --remote                 # W clones sharing a bare remote (SPEC §8) instead

W worktrees of one maildir-shared clone, one thread per worktree, each looping `backlog take
--json` + `backlog advance SLUG` as real processes until nothing is left. Every task has the same
priority, the worst case for a herd. A lost race is a candidate `take` tried and lost to another
claimer (`BACKLOG_DEBUG=1` makes take name each on stderr: `debug: lost SLUG`), or a take that
exited 3. The table shows lost races per completion and tasks per second, and checks exactly once
(every task in some branch's done/, once).

Two rows per W, run one after the other in the same invocation: *spread* (each worker its own
claimer identity, as agents have) and *herd* (every worker the same identity: `queue.spread` then
sees no other claimer in flight and keeps the documented order for everyone, which is the herd
this tool had before the spread). The ratio of the two is the figure.

With --remote, each worker is a clone of its own (one machine each) of a bare repository over
`file://`, whose backlog declares `remote: origin`: claims go through the remote's refs, and a lost
race is a refused push. Exactly once is then checked on the remote (one settlement ref per task)
and across the clones' done/ (each task completed in one clone only).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def env_for(base: Path, code: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "BACKLOG_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: the package's bytecode (compiled in main)
    (base / "home").mkdir(exist_ok=True)
    env.update(
        HOME=str(base / "home"),
        GIT_AUTHOR_NAME="Bench",
        GIT_AUTHOR_EMAIL="bench@example.invalid",
        GIT_COMMITTER_NAME="Bench",
        GIT_COMMITTER_EMAIL="bench@example.invalid",
        GIT_CONFIG_NOSYSTEM="1",
        PYTHONPATH=str(code),
        BACKLOG_DEBUG="1",
    )
    return env


def git(cwd: Path, env: dict[str, str], *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def backlog(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "maildir_backlog", *args], cwd=cwd, env=env, capture_output=True, text=True
    )


def drain(base: Path, code: Path, workers: int, tasks: int, same: bool, remote: bool = False) -> dict[str, float]:
    env = env_for(base, code)
    repo = base / "repo"
    repo.mkdir()
    git(repo, env, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("# herd\n")
    git(repo, env, "add", "README.md")
    git(repo, env, "commit", "-q", "-m", "init")
    backlog(repo, env, "setup", "--backend=maildir-shared")
    if remote:  # the remote is the authority for claims (SPEC §8)
        agents = repo / "backlog" / "AGENTS.md"
        agents.write_text(agents.read_text().replace("\nmaildir-shared\n", "\nmaildir-shared\nremote: origin\n", 1))
    for n in range(tasks):
        (repo / "backlog" / "todo" / f"t{n:04d}-plan.md").write_text(f"# task {n}\n\n---\n\n")
    git(repo, env, "add", "backlog")
    git(repo, env, "commit", "-q", "-m", "tasks")
    server = base / "server.git"
    trees = []
    if remote:
        git(base, env, "init", "-q", "--bare", "-b", "main", str(server))
        git(repo, env, "push", "-q", str(server), "main")
        for k in range(workers):
            tree = base / f"clone{k}"
            git(base, env, "clone", "-q", server.as_uri(), str(tree))
            trees.append(tree)
    for k in range(workers if not remote else 0):
        tree = base / f"wt{k}"
        git(repo, env, "worktree", "add", "-q", "-b", f"w{k}", str(tree))
        trees.append(tree)
    lost = [0] * workers
    why: Counter[str] = Counter()
    done: list[list[str]] = [[] for _ in range(workers)]
    errors: list[str] = []

    def worker(k: int) -> None:
        wenv = dict(env, BACKLOG_CLAIMER="agent" if same else f"agent-{k}")
        while True:
            proc = backlog(trees[k], wenv, "--json", "take")
            lost[k] += proc.stderr.count("debug: lost ")
            for line in proc.stderr.splitlines():  # why each race was lost, slugs and names blanked
                if line.startswith("debug: lost "):
                    why[re.sub(r"\bt\d{4}-plan\b|agent(-\d+)?|clone\d+|\d{4}-\S+Z", "_", line.split(": ", 2)[-1])] += 1
            if proc.returncode == 3:
                lost[k] += 1
                continue
            if proc.returncode:
                errors.append(proc.stderr.strip())
                return
            slug = json.loads(proc.stdout.strip().splitlines()[-1]).get("slug")
            if not slug:
                return
            proc = backlog(trees[k], wenv, "advance", slug)
            if proc.returncode:
                errors.append(proc.stderr.strip())
                return
            done[k].append(slug)

    start = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    settled = []
    for k in range(workers):
        where, branch = (trees[k], "main") if remote else (repo, f"w{k}")
        out = git(where, env, "ls-tree", "-r", "--name-only", branch, "--", "backlog/done/")
        settled += [Path(p).stem for p in out.split() if p.endswith(".md")]
    completed = sum(len(d) for d in done)
    once = completed == tasks and len(settled) == tasks and len(set(settled)) == tasks and not errors
    if remote:  # and the remote holds one settlement per task
        refs = git(base, env, "ls-remote", server.as_uri(), "refs/backlog/settled/*").split("\n")
        once = once and len([line for line in refs if line.strip()]) == tasks
    for reason, n in why.most_common(3):
        print(f"  ({n} lost: {reason[:150]})", file=sys.stderr)
    for line in errors[:3]:
        print(f"  (a worker stopped: {line})", file=sys.stderr)
    return {"lost": sum(lost) / max(completed, 1), "rate": completed / wall, "once": float(once)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="8,32")
    parser.add_argument("--tasks", type=int, default=96)
    parser.add_argument("--remote", action="store_true", help="one clone per worker, claims through a bare remote")
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "maildir_backlog")], check=False)
    scratch = Path(tempfile.mkdtemp(prefix="herd-"))
    try:
        where = "clones of one remote" if args.remote else "worktrees of one clone"
        print(f"{where}\n| W | mode | lost races / completion | tasks/s | exactly once |\n|---|---|---|---|---|")
        for w in [int(x) for x in args.workers.split(",")]:
            for mode in ("spread", "herd"):
                base = scratch / f"{mode}-{w}"
                base.mkdir()
                r = drain(base, ROOT, w, args.tasks, same=mode == "herd", remote=args.remote)
                print(
                    f"| {w} | {mode} | {r['lost']:.2f} | {r['rate']:.2f} | {'yes' if r['once'] else 'NO'} |", flush=True
                )
                shutil.rmtree(base, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
