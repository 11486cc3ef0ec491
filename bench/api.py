#!/usr/bin/env python3
"""The Python API's cost: in-process `Backlog.take(SLUG)` + `Backlog.advance(SLUG)` (a claim and
its completion, two commits) against the git floor, measured in the same run.

    python bench/api.py              # 15 rounds per figure (about 30 s)
    python bench/api.py --rounds 5   # a smoke run

The floor is the git work such a claim needs and nothing else, done the cheapest way: in a
repository of the same shape, the task file is moved out of todo/, `git rm --cached P` +
`git commit -m m -- P` (the claim), then `git add Q` + `git commit -m m -- Q` (into done/).
One plain `git add` + `git commit` of one file is shown too. Floor and API rounds alternate, so
the machine's noise hits both alike; every figure is a median. Goal: API <= 1.5 x the floor.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
GOAL = 1.5  # issue 21: in-process take + advance <= 1.5 x the git floor (it was 3 x)


def private_env(base: Path) -> None:
    """A private HOME and git identity for this process and its git children."""
    for key in [k for k in os.environ if k.startswith(("GIT_", "BACKLOG_", "CONDUCTOR_", "CMUX_"))]:
        del os.environ[key]
    (base / "home").mkdir()
    os.environ.update(
        HOME=str(base / "home"),
        GIT_AUTHOR_NAME="Backlog Bench",
        GIT_AUTHOR_EMAIL="bench@example.invalid",
        GIT_COMMITTER_NAME="Backlog Bench",
        GIT_COMMITTER_EMAIL="bench@example.invalid",
        GIT_CONFIG_NOSYSTEM="1",
        BACKLOG_CLAIMER="bench",
    )


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def repository(path: Path, backend: str | None, tasks: int) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("# bench\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "init")
    if backend:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        subprocess.run(
            [sys.executable, "-m", "maildir_backlog", "setup", f"--backend={backend}"],
            cwd=path,
            env=env,
            check=True,
            capture_output=True,
        )
    todo = path / "backlog" / "todo"
    todo.mkdir(parents=True, exist_ok=True)
    for n in range(tasks):
        (todo / f"task{n:03d}-plan.md").write_text(f"# task {n}\n\nSomething to do.\n\n---\n\n")
    if tasks:
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", "tasks")
    return path


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    rounds = parser.parse_args().rounds
    from maildir_backlog import Backlog

    with tempfile.TemporaryDirectory(prefix="backlog-bench-api-") as tmp:
        base = Path(tmp)
        private_env(base)
        floor_repo = repository(base / "floor", None, rounds + 1)
        one_repo = repository(base / "one", None, 0)
        apis = {be: Backlog(repository(base / be, be, rounds + 1)) for be in ("maildir-shared", "maildir-git")}
        for bl in apis.values():  # warm up: imports, the parse cache, git's own caches
            bl.take("task000-plan")
            bl.advance("task000-plan")
        cli_repo = repository(base / "cli", "maildir-shared", rounds + 1)
        cli_env = dict(os.environ, PYTHONPATH=str(ROOT))
        cli_env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: bytecode compiled

        def cli(*args: str) -> None:
            command = [sys.executable, "-m", "maildir_backlog", *args]
            subprocess.run(command, cwd=cli_repo, env=cli_env, check=True, capture_output=True)

        times: dict[str, list[float]] = {k: [] for k in ["one", "floor", *apis, "cli"]}
        done = floor_repo / "backlog" / "done"
        done.mkdir(parents=True)
        for n in range(1, rounds + 1):
            slug = f"task{n:03d}-plan"
            (one_repo / f"f{n}.txt").write_text(f"{n}\n")
            times["one"].append(
                timed(
                    lambda n=n: (
                        git(one_repo, "add", f"f{n}.txt"),
                        git(one_repo, "commit", "-q", "-m", "m", "--", f"f{n}.txt"),
                    )
                )
            )

            def floor(slug: str = slug) -> None:
                rel = f"backlog/todo/{slug}.md"
                os.replace(floor_repo / rel, done / f"{slug}.md")  # out of todo/ (into the shared root, say)
                git(floor_repo, "rm", "-q", "--cached", rel)
                git(floor_repo, "commit", "-q", "-m", f"advance({slug})", "--", rel)
                git(floor_repo, "add", f"backlog/done/{slug}.md")
                git(floor_repo, "commit", "-q", "-m", f"advance({slug}) done", "--", f"backlog/done/{slug}.md")

            times["floor"].append(timed(floor))
            for be, bl in apis.items():
                times[be].append(timed(lambda bl=bl, slug=slug: (bl.take(slug), bl.advance(slug))))
            times["cli"].append(timed(lambda slug=slug: (cli("take", slug), cli("advance", slug))))
        report(times, rounds)


def report(times: dict[str, list[float]], rounds: int) -> None:
    med = {k: statistics.median(v) for k, v in times.items()}
    floor = med["floor"]
    print(f"=== Python API: take SLUG + advance, in process (median of {rounds}, interleaved) ===")
    print(
        f"machine: {os.cpu_count()} cores, Python {platform.python_version()},",
        subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip(),
        platform.system(),
    )
    print(f"  {'figure':<64}{'value':>10}{'ratio':>10}{'goal':>10}   verdict")
    print("  " + "-" * 100)
    print(f"  {'git: one add + commit of one file':<64}{med['one']:>8.1f}ms{med['one'] / floor:>9.2f}x")
    print(f"  {'git floor: rm --cached + commit, add + commit':<64}{floor:>8.1f}ms{1:>9.2f}x")
    for be in ("maildir-shared", "maildir-git"):
        ratio = med[be] / floor
        verdict = "MET" if ratio <= GOAL else "NOT MET"
        print(
            f"  {'API take SLUG + advance to done (' + be + ')':<64}{med[be]:>8.1f}ms{ratio:>9.2f}x"
            f"{f'<= {GOAL}x':>10}   {verdict}"
        )
    label = "CLI backlog take SLUG + backlog advance SLUG (maildir-shared)"
    print(f"  {label:<64}{med['cli']:>8.1f}ms{med['cli'] / floor:>9.2f}x{'':>10}   (reference: two processes)")


if __name__ == "__main__":
    main()
