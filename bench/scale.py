#!/usr/bin/env python3
"""Time against the number of tasks: auto-pick `take`, `ready --json`, `status` and git's floor.

    python bench/scale.py                          # 1,000 / 3,000 / 10,000 / 30,000 tasks, 3 rounds
    python bench/scale.py --sizes 1000,10000,100000 --rounds 2 --fixtures /tmp/scale   # built once, kept
    python bench/scale.py --png docs/scale-time.png   # also the plot (needs matplotlib; skipped without)
    python bench/scale.py --compare /tmp/old-checkout  # the same rounds with another checkout's package too
    python bench/scale.py --command VENV/bin/backlog    # the command as a user installs it (bench.py --user-install)

With --compare, that package runs the same calls in the same rounds on a fixture of its own
(built alike: the parse cache's file is each version's own), rows marked `compare`.

One maildir-shared clone per size, built as bench.py builds its repositories (priorities 1-5,
~10% with a dependency, N/20 done). Every round visits every size and, inside a size, runs each
call once, interleaved, so the machine's noise hits all alike:

* the git floor: `git rm --cached P` + `git commit -m m -- P` of one todo file, then undone;
* auto-pick `take` with the parse cache warm, then undone (`git reset --hard`, the claim removed);
* auto-pick `take` with no parse cache (`take0`: the cache deleted first), then undone;
* `ready --json` (every candidate, with its title);
* `status`, and `git status --porcelain` (`gitst`), its own floor;
* the floors below any design that checks each task file on each call, each the leanest loop the
  command's own interpreter can run (a listing, then one call per file through the directory's
  descriptor; `find -printf` and `cat` were slower here): `stat`, one `lstat` of every todo file
  (what a cached call must do to know no file changed); `read`, every todo file opened, read once
  and closed (what a call with no cache must read); `py`, the interpreter started and stopped
  (`python -c pass`). `stat` and `read` include `py`.

The table gives the median of each call per size, its ratio to the floor, and the growth from
the smallest size at or above 10,000 to the largest (the issue's goal: at most 11 × from 10k to
100k). A second table sets each call against the sum of the floors it cannot avoid: a cached
`take` against git's floor + `stat`, `take0` against git's floor + `read`, `ready` against `stat`,
`status` against `git status` + `py`. Nothing here is a test: the figures
go into docs/performance.md with the command.
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

CALLS = ("floor", "take", "take0", "ready", "status", "gitst")
FLOORS = ("stat", "read", "py")
_EACH = (
    "import os\nd = os.open('backlog/todo', os.O_RDONLY | os.O_DIRECTORY)\n"
    "for n in os.listdir(d):\n    if n.endswith('.md'):\n        {}\n"
)
STAT = _EACH.format("os.stat(n, dir_fd=d, follow_symlinks=False)")
READ = _EACH.format("f = os.open(n, os.O_RDONLY, dir_fd=d); os.read(f, 65536); os.close(f)")
# each call's unavoidable part: git's floor (or `git status`) and the C floors it cannot skip
BELOW = {
    "take": ("floor", "stat"),
    "take0": ("floor", "read"),
    "ready": ("stat",),
    "status": ("gitst", "py"),
}


def fixture(root: Path, env: B.Env, n: int, suffix: str = "") -> Path:
    path = root / f"n{n}{suffix}"
    if not (path / ".git").exists():
        if path.exists():
            shutil.rmtree(path)
        B.new_repo(root, env, path.name, n, seed=11)
        B.backlog(path, env, "status")  # the parse cache filled once: every round reads it warm
    return path


def undo(repo: Path, env: B.Env, head: str) -> None:
    B.git(repo, env, "reset", "-q", "--hard", head)
    shared = repo / ".git" / "backlog"
    for pile in ("doing", "reviewing"):
        for claimed in (shared / pile).glob("*.md") if (shared / pile).is_dir() else ():
            claimed.unlink()


def interpreter(cmd: list[str]) -> str:
    """The Python that `cmd` starts: its script's `#!` line, or (python -m) the first word."""
    first = Path(cmd[0])
    if first.name.startswith("python"):
        return cmd[0]
    with open(first, encoding="utf-8", errors="replace") as f:
        return f.readline()[2:].strip() or sys.executable


def one_round(repo: Path, env: B.Env, cmd: list[str] | None = None) -> dict[str, float]:
    cmd = cmd or B.BACKLOG
    head = B.git(repo, env, "rev-parse", "HEAD").strip()
    victim = sorted((repo / "backlog" / "todo").glob("*.md"))[0].relative_to(repo).as_posix()
    took: dict[str, float] = {}
    (repo / victim).unlink()  # as a claim leaves it: the file gone from todo/, then committed
    t, _ = B.timed(["git", "rm", "-q", "--cached", victim], repo, env.vars)
    t2, _ = B.timed(["git", "commit", "-q", "-m", "floor", "--", victim], repo, env.vars)
    took["floor"] = t + t2
    B.git(repo, env, "reset", "-q", "--hard", head)
    took["take"], proc = B.timed(cmd + ["--json", "take"], repo, env.vars)
    undo(repo, env, head)
    shutil.rmtree(repo / ".git" / "backlog-cache", ignore_errors=True)
    took["take0"], proc = B.timed(cmd + ["--json", "take"], repo, env.vars)  # fills the cache again
    undo(repo, env, head)
    took["ready"], _ = B.timed(cmd + ["--json", "ready"], repo, env.vars)
    took["status"], _ = B.timed(cmd + ["status"], repo, env.vars)
    took["gitst"], _ = B.timed(["git", "status", "--porcelain"], repo, env.vars)
    python = interpreter(cmd)
    took["stat"], _ = B.timed([python, "-c", STAT], repo, env.vars)
    took["read"], _ = B.timed([python, "-c", READ], repo, env.vars)
    took["py"], _ = B.timed([python, "-c", "pass"], repo, env.vars)
    return took


def plot(path: Path, sizes: list[int], medians: dict[int, dict[str, float]]) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no plot"
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    names = {"floor": "git floor (commit)", "stat": "lstat of every task (floor)"}
    for call in ("floor", "stat", "take", "ready", "status"):
        style = "--" if call in names else "-"
        ax.plot(sizes, [medians[n][call] for n in sizes], style, marker="o", label=names.get(call, call))
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


def table(label: str, sizes: list[int], medians: dict[int, dict[str, float]]) -> None:
    """Each call's median, as a ratio to the floor (`status` to `git status`), and the growth."""
    print(f"{label}\n{'tasks':>8} " + " ".join(f"{c:>16}" for c in CALLS))
    for n in sizes:
        m = medians[n]
        cells = [B.ms(m["floor"])] + [
            f"{B.ms(m[c])} {m[c] / m['gitst' if c == 'status' else 'floor']:.1f}x" for c in CALLS[1:-1]
        ]
        print(f"{n:>8} " + " ".join(f"{cell:>16}" for cell in [*cells, B.ms(m["gitst"])]))
    big = [n for n in sizes if n >= 10_000]
    if len(big) > 1:
        low, high = big[0], big[-1]
        growth = ", ".join(f"{c} {medians[high][c] / medians[low][c]:.1f}x" for c in CALLS)
        print(f"growth {low:,} -> {high:,} tasks ({high / low:.0f}x the tasks): {growth}")
    print("(ratios: to the floor; status to `git status --porcelain`, gitst)")
    print(
        "\nagainst the floors each call cannot skip (stat, read: the leanest loop over every todo file; py: python -c pass)"
    )
    print(f"{'tasks':>8} " + " ".join(f"{c:>9}" for c in FLOORS) + " " + " ".join(f"{c:>22}" for c in BELOW))
    for n in sizes:
        m = medians[n]
        cells = [f"{B.ms(m[c]):>9}" for c in FLOORS]
        for call, parts in BELOW.items():
            under = sum(m[p] for p in parts)
            cells.append(f"{B.ms(m[call])} / {B.ms(under)} = {m[call] / under:.1f}x".rjust(22))
        print(f"{n:>8} " + " ".join(cells))
    print("(" + "; ".join(f"{c} against {' + '.join(p)}" for c, p in BELOW.items()) + ")")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,3000,10000,30000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fixtures", help="where the repositories are built once and kept (default: a temporary dir)")
    parser.add_argument("--png", help="also plot time against N into this file (needs matplotlib)")
    parser.add_argument("--compare", type=Path, help="another checkout whose package runs the same rounds")
    parser.add_argument(
        "--command",
        help="the `backlog` to time, e.g. VENV/bin/backlog of `bench.py --user-install VENV` (as a user installs"
        " it: none of the shared interpreter's site hooks); default: python -m maildir_backlog from this checkout",
    )
    args = parser.parse_args()
    cmd = [args.command] if args.command else None
    sizes = sorted(int(x) for x in args.sizes.split(","))
    keep = args.fixtures is not None
    root = Path(args.fixtures) if keep else Path(tempfile.mkdtemp(prefix="backlog-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    env = B.Env(root)
    if cmd:
        env.vars.pop("PYTHONPATH", None)
    codes = {"this": (env, "")}
    if args.compare:
        codes["compare"] = (B.Env(root), "-compare")
        codes["compare"][0].vars["PYTHONPATH"] = str(args.compare.resolve())
    try:
        repos = {(c, n): fixture(root, e, n, suffix) for c, (e, suffix) in codes.items() for n in sizes}
        for (c, _n), repo in repos.items():  # one round unmeasured: a first claim reads the branches' history
            one_round(repo, codes[c][0], cmd if c == "this" else None)
        seen = {key: {c: [] for c in CALLS + FLOORS} for key in repos}
        for _ in range(args.rounds):
            for key, repo in repos.items():
                for call, t in one_round(repo, codes[key[0]][0], cmd if key[0] == "this" else None).items():
                    seen[key][call].append(t)
        for code in codes:
            medians = {n: {c: statistics.median(v) for c, v in seen[(code, n)].items()} for n in sizes}
            table(code if args.compare else "", sizes, medians)
            if args.png and code == "this":
                print(plot(Path(args.png), sizes, medians))
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
