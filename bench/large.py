#!/usr/bin/env python3
"""The 100,000-task profile (opt-in; heavy): auto-pick, `status` and memory against git's own floor.

    python bench/large.py                              # 100,000 todo tasks, 5 rounds (~10 min with the build)
    python bench/large.py --fixture /tmp/big --keep    # build the backlog once into /tmp/big and keep it
    python bench/large.py --fixture /tmp/big           # reuse it (built only when missing)
    python bench/large.py --compare /tmp/old-checkout  # the same rounds with another checkout's package too
    python bench/large.py --tasks 10000 --rounds 3     # a smaller run

One maildir-shared clone with N todo tasks (priorities 1-5, ~10% with a dependency, as in
bench.py), N/20 done and 20 in flight, committed with one `git add` + one commit. Every round
runs, interleaved (so the machine's noise hits both sides of each ratio alike):

* the git commit floor: `git rm --cached P` + `git commit -m m -- P` of one todo file (a claim's
  commit, and nothing else), then undone;
* auto-pick `backlog take`, cached (the parse cache warm), then undone (the claim removed,
  `git reset --hard` to the fixture's commit: one todo file's stamp changes, as after any claim);
* auto-pick `backlog take` with no parse cache (deleted first), then undone;
* `backlog status` against `git status`.

Peak RSS (wait4's rusage) of one uncached take and one status per code. Then the same rounds once
more after `git config` of git's large-repository settings (`feature.manyFiles`, split index,
untracked cache: what `backlog setup` turns on for a large backlog), to measure their effect.

With --reference DIR, DIR holding the older bash tool's scripts (`backlog.sh`, as in bench.py;
not shipped here), its `status` joins the rounds as a reference row (it must exit 0). Without it
that row is left out.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench as B

ROOT = B.ROOT
LARGE_GIT = (("feature.manyFiles", "true"), ("core.splitIndex", "true"), ("core.untrackedCache", "true"))


def build(path: Path, env: B.Env, n: int) -> float:
    """The fixture (once): n todo tasks, n/20 done, 20 in flight in the shared doing/."""
    t0 = time.perf_counter()
    path.parent.mkdir(parents=True, exist_ok=True)
    repo = B.new_repo(path.parent, env, path.name, n, seed=7)
    doing = repo / ".git" / "backlog" / "doing"
    doing.mkdir(parents=True, exist_ok=True)
    rng = random.Random(8)
    for i in range(20):
        slug = f"f{i:05d}-task"
        log = [f"- 2026-11-30T0{i % 10}:00:00Z advanced to=doing claimer=w{i} branch=main"]
        (doing / f"{slug}.md").write_text(B.task_text(rng, slug, [], log=log))
    B.git(repo, env, "tag", "bench-base")
    return time.perf_counter() - t0


def drop_caches(repo: Path) -> None:
    B.drop_cache(repo)


def undo_claim(repo: Path, env: B.Env, out: str) -> None:
    slug = Path(out.strip().splitlines()[-1]).stem if out.strip() else ""
    assert slug, "take claimed nothing"
    (repo / ".git" / "backlog" / "doing" / f"{slug}.md").unlink(missing_ok=True)
    B.git(repo, env, "reset", "-q", "--hard", "bench-base")


def floor_once(repo: Path, env: B.Env, rel: str) -> float:
    (repo / rel).unlink()
    t0 = time.perf_counter()
    B.git(repo, env, "rm", "-q", "--cached", "--", rel)
    B.git(repo, env, "commit", "-q", "-m", "m", "--", rel)
    dt = time.perf_counter() - t0
    B.git(repo, env, "reset", "-q", "--hard", "bench-base")
    return dt


def reference_cmd(ref: Path | None) -> list[str] | None:
    """The bash tool's entry point, as bench.py calls it (it reads the fixture's `## Backend`
    section, maildir-shared, and hands the verb to its backlog-maildir-shared.sh)."""
    return B.reference_script(ref)


def rounds(repo: Path, env: B.Env, codes: dict[str, str], reps: int, ref: list[str] | None) -> dict[str, list[float]]:
    fig: dict[str, list[float]] = {}

    def add(key: str, value: float) -> None:
        fig.setdefault(key, []).append(value)

    rel = sorted((repo / "backlog" / "todo").iterdir())[len(list((repo / "backlog" / "todo").iterdir())) // 2]
    rel_s = str(rel.relative_to(repo))
    for name, path in codes.items():  # warm every code's cache once (not timed)
        B.run(B.BACKLOG + ["take"], repo, env.with_(PYTHONPATH=path))
        B.git(repo, env, "reset", "-q", "--hard", "bench-base")
        for p in (repo / ".git" / "backlog" / "doing").iterdir():
            if not p.name.startswith("f"):
                p.unlink()
    for _ in range(reps):
        add("floor", floor_once(repo, env, rel_s))
        add("git status", B.timed(["git", "status", "--porcelain"], repo, env.vars)[0])
        for name, path in codes.items():
            e = env.with_(PYTHONPATH=path)
            dt, proc = B.timed(B.BACKLOG + ["take"], repo, e)
            add(f"{name} take cached", dt)
            undo_claim(repo, env, proc.stdout)
            dt, _ = B.timed(B.BACKLOG + ["status"], repo, e)
            add(f"{name} status", dt)
        for name, path in codes.items():
            e = env.with_(PYTHONPATH=path)
            drop_caches(repo)
            dt, proc = B.timed(B.BACKLOG + ["take"], repo, e)
            add(f"{name} take no cache", dt)
            undo_claim(repo, env, proc.stdout)
        if ref is not None:
            add("reference status", B.timed([*ref, "status"], repo, env.vars)[0])
    for name, path in codes.items():
        e = env.with_(PYTHONPATH=path)
        drop_caches(repo)
        rss, _ = B.peak_rss_kib(B.BACKLOG + ["take"], repo, e)
        add(f"{name} take no cache RSS MiB", rss / 1024)
        B.git(repo, env, "reset", "-q", "--hard", "bench-base")
        for p in (repo / ".git" / "backlog" / "doing").iterdir():
            if not p.name.startswith("f"):
                p.unlink()
        rss, _ = B.peak_rss_kib(B.BACKLOG + ["take"], repo, e)
        add(f"{name} take cached RSS MiB", rss / 1024)
        B.git(repo, env, "reset", "-q", "--hard", "bench-base")
        for p in (repo / ".git" / "backlog" / "doing").iterdir():
            if not p.name.startswith("f"):
                p.unlink()
        rss, _ = B.peak_rss_kib(B.BACKLOG + ["status"], repo, e)
        add(f"{name} status RSS MiB", rss / 1024)
    return fig


def report(title: str, fig: dict[str, list[float]], codes: dict[str, str]) -> None:
    m = {k: statistics.median(v) for k, v in fig.items()}
    print(f"\n{title}")
    print(f"  git commit floor (rm --cached + commit)  {B.ms(m['floor'])}")
    print(f"  git status --porcelain                   {B.ms(m['git status'])}")
    if "reference status" in m:
        print(f"  reference (bash tool) status             {B.ms(m['reference status'])}")
    print(
        "  | code | take cached / floor | take, no cache | status / git status | peak RSS (take no cache, take, status) |"
    )
    print("  |---|---|---|---|---|")
    for name in codes:
        tc, tn, st = m[f"{name} take cached"], m[f"{name} take no cache"], m[f"{name} status"]
        rss = [m.get(f"{name} {k} RSS MiB", 0.0) for k in ("take no cache", "take cached", "status")]
        print(
            f"  | {name} | {B.ms(tc)} = {tc / m['floor']:.2f}x | {B.ms(tn)} | {B.ms(st)} = {st / m['git status']:.2f}x"
            f" | {rss[0]:.0f} / {rss[1]:.0f} / {rss[2]:.0f} MiB |"
        )
    print("  goals: take cached <= 1.5x floor; no cache <= 2 s; status <= 2x git status; RSS <= 100 MiB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--fixture", type=Path, help="where the backlog is built (reused when it exists)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--compare", type=Path, help="another checkout whose package runs the same rounds")
    parser.add_argument("--reference", type=Path, help="a directory with the older bash tool's scripts")
    parser.add_argument("--no-git-settings", action="store_true", help="skip the second pass with manyFiles etc.")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="backlog-large-"))
    env = B.Env(scratch)
    repo = args.fixture or scratch / "big"
    codes = {"this": str(ROOT)}
    if args.compare:
        # "this" first in every round: its first write of a fresh cache removes the old JSON cache,
        # which the compared checkout (an older version) then writes again before it is timed
        codes = {"this": str(ROOT), "compare": str(args.compare.resolve())}
    for path in codes.values():
        B.run([B.PY, "-m", "compileall", "-q", str(Path(path) / "maildir_backlog")], ROOT, env.vars, check=False)
    started = time.perf_counter()
    print(f"machine: {B.machine_note()}; load average {os.getloadavg()[0]:.1f} at the start")
    try:
        if not (repo / ".git").exists():
            print(f"building {args.tasks:,} tasks into {repo} ...", flush=True)
            print(f"  built in {build(repo, env, args.tasks):.0f} s", flush=True)
        for key, _ in LARGE_GIT:
            B.run(["git", "config", "--unset", key], repo, env.vars, check=False)
        B.git(repo, env, "update-index", "--no-split-index", "--no-untracked-cache")
        ref = reference_cmd(args.reference)
        fig = rounds(repo, env, codes, args.rounds, ref)
        report(f"{args.tasks:,} tasks, git defaults (median of {args.rounds}, interleaved)", fig, codes)
        if not args.no_git_settings:
            for key, value in LARGE_GIT:
                B.git(repo, env, "config", key, value)
            B.git(repo, env, "update-index", "--split-index", "--untracked-cache")
            fig = rounds(repo, env, codes, args.rounds, ref)
            report(f"{args.tasks:,} tasks, {', '.join(k for k, _ in LARGE_GIT)} on", fig, codes)
    finally:
        if not args.keep and args.fixture is None:
            shutil.rmtree(scratch, ignore_errors=True)
    print(f"\n({time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.1f} at the end)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
