#!/usr/bin/env python3
"""What claims across clones cost (SPEC §8): `take` and `advance` against a remote with injected
round-trip latency, next to the same run's floor of one `git ls-remote` + one `git push`.

    python bench/remote.py            # latencies 0, 50, 200 ms, refs scaling, contention (~5-10 min, 2 cores)
    python bench/remote.py --quick    # fewer repeats, smaller sizes (~2-4 min)
    python bench/remote.py --latencies 0,100 --reps 9

The latency transport: at 0 ms the clones' `origin` is the bare repository over `file://`; at
L > 0 it is `ext::python3 -S bench/relay.py <L> %S <bare repository>` (git's `ext::` remote
helper; `protocol.ext.allow=always` comes through GIT_CONFIG_COUNT/KEY/VALUE, never a config
file). The relay sleeps one round trip before it starts the service (connection set-up), then
forwards every chunk of both directions half a round trip late (a pipe with a one-way delay,
order and throughput kept): an ls-remote then costs about 2 round trips, a push about 2.5, as
over a real link. The floor goes through the same transport, so the ratio compares like with like.

Figures: medians over interleaved repeats (floor, take, floor, advance, ...). Results go to
bench/results/remote.json and are printed; docs/performance.md and docs/scale.md quote them.
These are scripts, not tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "remote.json"
RELAY = ROOT / "bench" / "relay.py"


# ---------------------------------------------------------------------------------- helpers
class Env(dict):
    def __init__(self, home: Path) -> None:
        super().__init__(os.environ)
        for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "BACKLOG_CRASH_AT", "PYTHONDONTWRITEBYTECODE"):
            self.pop(var, None)
        self.update(
            HOME=str(home),
            GIT_CONFIG_NOSYSTEM="1",
            GIT_AUTHOR_NAME="bench",
            GIT_AUTHOR_EMAIL="bench@example.invalid",
            GIT_COMMITTER_NAME="bench",
            GIT_COMMITTER_EMAIL="bench@example.invalid",
            BACKLOG_CLAIMER="bench",
            GIT_CONFIG_COUNT="1",
            GIT_CONFIG_KEY_0="protocol.ext.allow",
            GIT_CONFIG_VALUE_0="always",
            PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        )


def sh(cwd: Path, env: Env, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if check and proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr}{proc.stdout}")
    return proc


def timed(cwd: Path, env: Env, *cmd: str) -> float:
    t0 = time.perf_counter()
    sh(cwd, env, *cmd)
    return time.perf_counter() - t0


def backlog(cwd: Path, env: Env, *args: str) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "maildir_backlog", *args], cwd=cwd, env=env, capture_output=True, text=True
    )
    return time.perf_counter() - t0, proc


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def ms(s: float) -> str:
    return f"{s * 1000:.0f} ms"


def task_text(slug: str) -> str:
    return f"---\npriority: 5\n---\n\n# {slug}\n\n---\n\n"


def make_server(base: Path, env: Env, n_tasks: int, remote: bool = True) -> Path:
    """A bare repository with a maildir-shared backlog of `n_tasks` todo tasks (`remote: origin`)."""
    seed = base / "seed"
    seed.mkdir(parents=True)
    sh(seed, env, "git", "init", "-q", "-b", "main")
    (seed / "README.md").write_text("bench\n")
    sh(seed, env, "git", "add", "README.md")
    sh(seed, env, "git", "commit", "-q", "-m", "init")
    _, proc = backlog(seed, env, "setup", "--backend=maildir-shared")
    assert proc.returncode == 0, proc.stderr
    if remote:
        agents = seed / "backlog" / "AGENTS.md"
        agents.write_text(agents.read_text().replace("\nmaildir-shared\n", "\nmaildir-shared\nremote: origin\n", 1))
    for i in range(n_tasks):
        (seed / "backlog" / "todo" / f"t{i:04d}.md").write_text(task_text(f"t{i:04d}"))
    sh(seed, env, "git", "add", "-A", "backlog")
    sh(seed, env, "git", "commit", "-q", "-m", "tasks")
    server = base / "server.git"
    sh(base, env, "git", "init", "-q", "--bare", "-b", "main", str(server))
    sh(seed, env, "git", "push", "-q", str(server), "main")
    return server


def url_for(server: Path, delay: float | None) -> str:
    """0 (or None): plain file://; else the relay (python -S: no site, about 15 ms to start)."""
    if not delay:
        return server.as_uri()
    return f"ext::{sys.executable} -S {RELAY} {delay} %S {server}"


def clone(base: Path, env: Env, server: Path, name: str, delay: float | None) -> Path:
    path = base / name
    sh(base, env, "git", "clone", "-q", server.as_uri(), str(path))
    sh(path, env, "git", "remote", "set-url", "origin", url_for(server, delay))
    return path


def floor_once(path: Path, env: Env, i: int) -> float:
    """One `git ls-remote origin 'refs/backlog/*'` + one create-only leased `git push`."""
    commit = sh(path, env, "git", "commit-tree", "4b825dc642cb6eb9a060e54bf8d69288fbee4904", "-m", f"floor {i}").stdout
    ref = f"refs/bench/floor-{os.getpid()}-{i}-{time.time_ns()}"
    t = timed(path, env, "git", "ls-remote", "origin", "refs/backlog/*")
    t += timed(
        path, env, "git", "push", "-q", "--porcelain", f"--force-with-lease={ref}:", "origin", f"{commit.strip()}:{ref}"
    )
    return t


# ------------------------------------------------------------------------- 1. cost per latency
def bench_latency(base: Path, env: Env, delay: float, reps: int) -> dict:
    server = make_server(base, env, 4 * reps + 4)
    path = clone(base, env, server, "a", delay)
    floors, takes, advances, progresses = [], [], [], []
    for i in range(reps):
        floors.append(floor_once(path, env, 3 * i))
        t, proc = backlog(path, env, "--json", "take")
        assert proc.returncode == 0, proc.stderr
        slug = json.loads(proc.stdout)["slug"]
        takes.append(t)
        floors.append(floor_once(path, env, 3 * i + 1))
        t, proc = backlog(path, env, "progress", "bench note", "--slug", slug)
        assert proc.returncode == 0, proc.stderr
        progresses.append(t)
        floors.append(floor_once(path, env, 3 * i + 2))
        t, proc = backlog(path, env, "advance", slug)
        assert proc.returncode == 0, proc.stderr
        advances.append(t)
    f = med(floors)
    return {
        "latency_ms": round(delay * 1000),
        "floor_s": f,
        "take_s": med(takes),
        "progress_s": med(progresses),
        "advance_s": med(advances),
        "take_ratio": med(takes) / f,
        "progress_ratio": med(progresses) / f,
        "advance_ratio": med(advances) / f,
        "reps": reps,
    }


def bench_local(base: Path, env: Env, reps: int) -> dict:
    """The same verbs without `remote:` (one clone): what the remote adds."""
    server = make_server(base, env, 2 * reps + 2, remote=False)
    path = clone(base, env, server, "a", None)
    takes, advances = [], []
    for _ in range(reps):
        t, proc = backlog(path, env, "--json", "take")
        slug = json.loads(proc.stdout)["slug"]
        takes.append(t)
        t, proc = backlog(path, env, "advance", slug)
        advances.append(t)
    return {"take_s": med(takes), "advance_s": med(advances)}


# -------------------------------------------------------------------- 2. refs on the remote
def bench_refs(base: Path, env: Env, counts: list[int], reps: int) -> list[dict]:
    out = []
    for n in counts:
        where = base / f"refs-{n}"
        server = make_server(where, env, reps + 2)
        commit = sh(server, env, "git", "rev-parse", "main").stdout.strip()
        lines = "".join(f"create refs/backlog/settled/old-task-{i:06d} {commit}\n" for i in range(n))
        subprocess.run(["git", "update-ref", "--stdin"], cwd=server, env=env, input=lines, text=True, check=True)
        sh(server, env, "git", "pack-refs", "--all")
        push_adv = subprocess.run(["git-receive-pack", "--advertise-refs", str(server)], env=env, capture_output=True)
        listing = sh(where, env, "git", "ls-remote", server.as_uri(), "refs/backlog/*").stdout
        path = clone(where, env, server, "a", None)
        floors, takes = [], []
        for i in range(reps):
            floors.append(floor_once(path, env, i))
            t, proc = backlog(path, env, "--json", "take")
            assert proc.returncode == 0, proc.stderr
            takes.append(t)
        out.append(
            {
                "refs": n,
                "push_advertisement_bytes": len(push_adv.stdout),
                "listing_bytes": len(listing.encode()),
                "floor_s": med(floors),
                "take_s": med(takes),
            }
        )
    return out


# ---------------------------------------------------------------------------- 3. contention
def bench_contention(base: Path, env: Env, delay: float, workers: int) -> dict:
    """`workers` clones take at once: all the same slug (`take t0000`: one wins, the others lose
    the race), auto-pick (everyone's first candidate is the same; a loser moves on to the next),
    and each its own slug (`take t000<k>`: no contention)."""
    result = {}
    for mode in ("same-slug", "auto-pick", "distinct"):
        where = base / f"contention-{mode}-{delay}"
        server = make_server(where, env, workers)
        paths = [clone(where, env, server, f"c{k}", delay) for k in range(workers)]
        argv = [
            {"same-slug": ("take", "t0000"), "auto-pick": ("take",), "distinct": ("take", f"t{k:04d}")}[mode]
            for k in range(workers)
        ]
        runs = race(env, list(zip(paths, argv, strict=True)))
        claims = sh(server, env, "git", "for-each-ref", "refs/backlog/claims/").stdout.splitlines()
        times = [t for t, _code in runs]
        result[mode] = {
            "median_s": med(times),
            "max_s": max(times),
            "exit_codes": sorted(code for _t, code in runs),
            "claims": len(claims),
        }
    return result


def race(env: Env, jobs: list[tuple[Path, tuple[str, ...]]]) -> list[tuple[float, int]]:
    """Run every `backlog ARGS` in its clone at once (released together); (seconds, exit code) each."""
    out: list[tuple[float, int]] = []
    lock = threading.Lock()
    start = threading.Barrier(len(jobs))

    def one(path: Path, args: tuple[str, ...]) -> None:
        start.wait()
        t, proc = backlog(path, env, *args)
        with lock:
            out.append((t, proc.returncode))

    threads = [threading.Thread(target=one, args=job) for job in jobs]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return out


# ----------------------------------------------------------------------------------- main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--latencies", default="0,50,200", help="round trips in ms (comma-separated)")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    reps = args.reps or (3 if args.quick else 7)
    base = Path(tempfile.mkdtemp(prefix="backlog-remote-bench-"))
    env = Env(base / "home")
    (base / "home").mkdir()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "maildir_backlog")], check=False)
    started = time.time()
    report: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}, "
        + sh(base, env, "git", "--version").stdout.strip(),
        "load_average": os.getloadavg()[0],
    }
    try:
        lat = []
        for value in (float(x) / 1000 for x in args.latencies.split(",")):
            row = bench_latency(base / f"lat-{value}", env, value, reps)
            lat.append(row)
            print(
                f"latency {row['latency_ms']:>4} ms: floor (ls-remote + push) {ms(row['floor_s'])}; "
                f"take {ms(row['take_s'])} = {row['take_ratio']:.2f}x; progress {ms(row['progress_s'])} = "
                f"{row['progress_ratio']:.2f}x; advance {ms(row['advance_s'])} = {row['advance_ratio']:.2f}x",
                flush=True,
            )
        report["latency"] = lat
        report["local"] = bench_local(base / "local", env, reps)
        print(f"without remote: take {ms(report['local']['take_s'])}, advance {ms(report['local']['advance_s'])}")
        counts = [0, 1000] if args.quick else [0, 1000, 10000]
        report["refs"] = bench_refs(base, env, counts, max(3, reps // 2))
        for row in report["refs"]:
            print(
                f"{row['refs']:>6} settled refs: push advertisement {row['push_advertisement_bytes']:,} B, "
                f"listing {row['listing_bytes']:,} B, floor {ms(row['floor_s'])}, take {ms(row['take_s'])}"
            )
        workers = 4 if args.quick else 6
        report["contention"] = {}
        for value in (0.0, 0.05):
            report["contention"][str(round(value * 1000))] = row = bench_contention(base, env, value, workers)
            for mode, r in row.items():
                print(
                    f"contention {workers} clones, {round(value * 1000)} ms, {mode}: median {ms(r['median_s'])}, "
                    f"max {ms(r['max_s'])}, exits {r['exit_codes']}, claims {r['claims']}"
                )
        report["seconds"] = round(time.time() - started)
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(report, indent=2) + "\n")
        print(f"({report['seconds']} s; results in {RESULTS.relative_to(ROOT)})")
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"kept {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
