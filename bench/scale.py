#!/usr/bin/env python3
"""Time against the number of tasks: auto-pick `take`, `ready --json`, `status` and git's floor.

    python bench/scale.py                          # 1,000 / 3,000 / 10,000 / 30,000 tasks, 3 rounds
    python bench/scale.py --sizes 1000,10000,100000 --rounds 2 --fixtures /tmp/scale   # built once, kept
    python bench/scale.py --png docs/scale-time.png   # also the plot (needs matplotlib; skipped without)

One maildir-shared clone per size, built as bench.py builds its repositories (priorities 1-5,
~10% with a dependency, N/20 done). Every round visits every size and, inside a size, runs each
call once, interleaved, so the machine's noise hits all alike:

* the git floor: `git rm --cached P` + `git commit -m m -- P` of one todo file, then undone;
* auto-pick `take` with the parse cache warm, then undone (`git reset --hard`, the claim removed);
* `ready --json` (every candidate, with its title);
* `status`.

The table gives the median of each call per size, its ratio to the floor, and the growth from
the smallest size at or above 10,000 to the largest (the issue's goal: at most 11 × from 10k to
100k). Nothing here is a test: the figures go into docs/performance.md with the command.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench as B

CALLS = ("floor", "take", "ready", "status")


def fixture(root: Path, env: B.Env, n: int) -> Path:
    path = root / f"n{n}"
    if not (path / ".git").exists():
        if path.exists():
            shutil.rmtree(path)
        B.new_repo(root, env, path.name, n, seed=11)
        B.backlog(path, env, "status")  # the parse cache filled once: every round reads it warm
    return path


def one_round(repo: Path, env: B.Env) -> dict[str, float]:
    head = B.git(repo, env, "rev-parse", "HEAD").strip()
    victim = sorted((repo / "backlog" / "todo").glob("*.md"))[0].relative_to(repo).as_posix()
    took: dict[str, float] = {}
    (repo / victim).unlink()  # as a claim leaves it: the file gone from todo/, then committed
    t, _ = B.timed(["git", "rm", "-q", "--cached", victim], repo, env.vars)
    t2, _ = B.timed(["git", "commit", "-q", "-m", "floor", "--", victim], repo, env.vars)
    took["floor"] = t + t2
    B.git(repo, env, "reset", "-q", "--hard", head)
    took["take"], proc = B.timed(B.BACKLOG + ["--json", "take"], repo, env.vars)
    B.git(repo, env, "reset", "-q", "--hard", head)
    shared = repo / ".git" / "backlog"
    for pile in ("doing", "reviewing"):
        for claimed in (shared / pile).glob("*.md") if (shared / pile).is_dir() else ():
            claimed.unlink()
    took["ready"], _ = B.timed(B.BACKLOG + ["--json", "ready"], repo, env.vars)
    took["status"], _ = B.timed(B.BACKLOG + ["status"], repo, env.vars)
    return took


def plot(path: Path, sizes: list[int], medians: dict[int, dict[str, float]]) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no plot"
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for call in CALLS:
        ax.plot(sizes, [medians[n][call] for n in sizes], marker="o", label=call if call != "floor" else "git floor")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tasks")
    ax.set_ylabel("seconds (median)")
    ax.set_title("time against the number of tasks")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return f"plot written: {path}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,3000,10000,30000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fixtures", help="where the repositories are built once and kept (default: a temporary dir)")
    parser.add_argument("--png", help="also plot time against N into this file (needs matplotlib)")
    args = parser.parse_args()
    sizes = sorted(int(x) for x in args.sizes.split(","))
    keep = args.fixtures is not None
    root = Path(args.fixtures) if keep else Path(tempfile.mkdtemp(prefix="backlog-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    env = B.Env(root)
    try:
        repos = {n: fixture(root, env, n) for n in sizes}
        for n in sizes:  # one round unmeasured: a clone's first claim also reads the branches' history once
            one_round(repos[n], env)
        seen: dict[int, dict[str, list[float]]] = {n: {c: [] for c in CALLS} for n in sizes}
        for _ in range(args.rounds):
            for n in sizes:
                for call, t in one_round(repos[n], env).items():
                    seen[n][call].append(t)
        medians = {n: {c: statistics.median(v) for c, v in seen[n].items()} for n in sizes}
        print(f"{'tasks':>8} " + " ".join(f"{c:>16}" for c in CALLS))
        for n in sizes:
            floor = medians[n]["floor"]
            cells = [B.ms(medians[n]["floor"])] + [
                f"{B.ms(medians[n][c])} {medians[n][c] / floor:.1f}x" for c in CALLS[1:]
            ]
            print(f"{n:>8} " + " ".join(f"{cell:>16}" for cell in cells))
        big = [n for n in sizes if n >= 10_000]
        if len(big) > 1:
            low, high = big[0], big[-1]
            growth = ", ".join(f"{c} {medians[high][c] / medians[low][c]:.1f}x" for c in CALLS)
            print(f"growth {low:,} -> {high:,} tasks ({high / low:.0f}x the tasks): {growth}")
        if args.png:
            print(plot(Path(args.png), sizes, medians))
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
