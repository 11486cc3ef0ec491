#!/usr/bin/env python3
"""Where an auto-pick goes, phase by phase, against each phase's floor.

    python bench/phases.py --fixtures /tmp/big-scale --size 100000 --rounds 5 [--cached]

The fixture is scale.py's (`--fixtures DIR`: `DIR/n<size>`, built there when missing). Each round,
in this one process and interleaved, so the machine's noise hits both sides alike:

* `take` (auto-pick, `--json`) through the package's own entry (`cli.run`, the fast door, without
  the cyclic collector, as `cli.main` runs it), the
  parse cache deleted first (`--cached`: kept, as a claim after another finds it), its phases timed by wrapping the functions that do them: the listing
  (`storage.md_names`), reading, parsing and keeping every todo file (`cache.summaries`, of which
  the cache file's write, `cache._keep`), the times git recorded the additions (`queue.added_times`),
  the claim's commit (`gitcommit.commit_paths`), and the rest (the ledger, the ranking, the
  answer). The claim is undone after each round (`git reset --hard`, the claimed copy removed).
* the floors: `os.listdir` of todo/; the leanest loop that opens, `fstat`s, reads and closes every
  todo file through the directory's descriptor, keeping the bytes (what a call with no cache must
  read); this package's header reader (`header.parsed`) over those bytes in memory (the parse, with
  nothing read); and git's floor, `git rm --cached P` + `git commit -- P` of one todo file (two
  processes, undone). With `--cached`, the cache's own phases (loading its file, `cache._load`;
  one stamp per task, `cache._stamps`) against theirs: reading the cache file's bytes, and
  one `lstat` per todo file through the directory's descriptor.

The interpreter's start and the imports (`python bench/bench.py --only calls` splits them) are not
in these figures: scale.py times the whole process. Nothing here is a test: the table goes into
docs/performance.md with the command.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale as S

import bench as B


def timed_phases(acc: dict[str, float]) -> None:
    """Wrap the functions that do each phase so that each call adds its time to `acc`."""
    from maildir_backlog import cache, gitcommit, queue, storage

    for module, name, label in (
        (storage, "md_names", "listing"),
        (cache, "summaries", "summaries"),
        (cache, "_keep", "cache write"),
        (cache, "_load", "cache load"),
        (cache, "_stamps", "stamps"),
        (queue, "added_times", "added times"),
        (gitcommit, "commit_paths", "commit"),
    ):
        setattr(module, name, _adding(getattr(module, name), label, acc))


def _adding(fn: Callable, label: str, acc: dict[str, float]) -> Callable:
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            acc[label] = acc.get(label, 0.0) + time.perf_counter() - start

    return wrapped


def one_take(repo: Path, head: str, env: B.Env, acc: dict[str, float], cached: bool = False) -> dict[str, float]:
    from maildir_backlog import cli

    acc.clear()
    if not cached:
        shutil.rmtree(repo / ".git" / "backlog-cache", ignore_errors=True)
    out = io.StringIO()
    gc.collect()
    gc.disable()  # (as `cli.main` runs a call: without the cyclic collector)
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out):
            code = cli.run(["backlog", "--json", "take"])
    finally:
        total = time.perf_counter() - start
        gc.enable()
    if code or '"slug": null' in out.getvalue():
        raise RuntimeError(f"take claimed nothing (exit {code}): {out.getvalue()[:200]}")
    S.undo(repo, env, head)
    got = dict(acc)
    got["total"] = total
    inside = ("cache write", "cache load", "stamps")  # (parts of summaries)
    got["rest"] = total - sum(v for k, v in acc.items() if k not in inside)
    return got


def floors(repo: Path, head: str, env: B.Env) -> dict[str, float]:
    from maildir_backlog import header

    todo = repo / "backlog" / "todo"
    got: dict[str, float] = {}
    start = time.perf_counter()
    names = [n for n in os.listdir(todo) if n.endswith(".md")]
    got["listing"] = time.perf_counter() - start
    fd = os.open(todo, os.O_RDONLY | os.O_DIRECTORY)
    start = time.perf_counter()
    kept = []
    for name in names:
        f = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        info = os.fstat(f)
        kept.append((info, os.read(f, info.st_size + 1)))
        os.close(f)
    got["read"] = time.perf_counter() - start
    start = time.perf_counter()
    for name in names:
        os.stat(name, dir_fd=fd, follow_symlinks=False)
    got["stat"] = time.perf_counter() - start
    os.close(fd)
    start = time.perf_counter()
    with contextlib.suppress(OSError), open(repo / ".git" / "backlog-cache" / "todo.cache", "rb") as f:
        f.read()
    got["cache read"] = time.perf_counter() - start
    header._HEADS.clear()  # (a call starts with none: each distinct header is read once a call)
    start = time.perf_counter()
    for name, (_info, data) in zip(names, kept, strict=True):
        header.parsed(name[:-3], data, 999)
    got["parse"] = time.perf_counter() - start
    victim = f"backlog/todo/{sorted(names)[0]}"
    (repo / victim).unlink()
    t1, _ = B.timed(["git", "rm", "-q", "--cached", victim], repo, env.vars)
    t2, _ = B.timed(["git", "commit", "-q", "-m", "floor", "--", victim], repo, env.vars)
    got["git floor"] = t1 + t2
    B.git(repo, env, "reset", "-q", "--hard", head)
    return got


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fixtures", type=Path, help="where scale.py's repositories are (built there when missing)")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cached", action="store_true", help="the parse cache kept: a claim after another")
    args = parser.parse_args()
    root = args.fixtures or Path(tempfile.mkdtemp(prefix="backlog-phases-"))
    env = B.Env(root)
    repo = S.fixture(root, env, args.size)
    os.environ.update(env.vars)  # the verb runs in this process: its git sees this identity
    os.chdir(repo)
    head = B.git(repo, env, "rev-parse", "HEAD").strip()
    S.undo(repo, env, head)
    acc: dict[str, float] = {}
    timed_phases(acc)
    takes: dict[str, list[float]] = {}
    floor: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for key, value in one_take(repo, head, env, acc, args.cached).items():
            takes.setdefault(key, []).append(value)
        for key, value in floors(repo, head, env).items():
            floor.setdefault(key, []).append(value)
    m = {k: statistics.median(v) for k, v in takes.items()}
    f = {k: statistics.median(v) for k, v in floor.items()}
    kind = "with the parse cache kept" if args.cached else "with no parse cache"
    print(f"auto-pick {kind} at {args.size:,} tasks, in process (median of {args.rounds}, interleaved)")
    if args.cached:
        inner: tuple[tuple[str, float, str, float], ...] = (
            ("read, check and keep", m["summaries"], "cache file + lstat of every file", f["cache read"] + f["stat"]),
            ("  of which loading the cache", m.get("cache load", 0.0), "reading its bytes", f["cache read"]),
            ("  of which the stamps", m.get("stamps", 0.0), "lstat of every file", f["stat"]),
        )
        sum_floor = f["listing"] + f["cache read"] + f["stat"] + f["git floor"]
    else:
        inner = (
            ("read, parse, keep", m["summaries"], "read every file + parse them", f["read"] + f["parse"]),
            ("  of which the cache write", m.get("cache write", 0.0), "", 0.0),
        )
        sum_floor = f["listing"] + f["read"] + f["parse"] + f["git floor"]
    rows = (
        ("listing", m["listing"], "os.listdir", f["listing"]),
        *inner,
        ("added times", m.get("added times", 0.0), "", 0.0),
        ("the claim's commit", m["commit"], "git rm --cached + commit", f["git floor"]),
        ("the rest", m["rest"], "", 0.0),
        ("total", m["total"], "the floors' sum", sum_floor),
    )
    print(f"  {'phase':<28}{'time':>9}   {'floor':<30}{'time':>9}{'ratio':>8}")
    for label, value, what, low in rows:
        ratio = f"{value / low:.2f}x" if low else ""
        shown = B.ms(low) if low else ""
        print(f"  {label:<28}{B.ms(value):>9}   {what:<30}{shown:>9}{ratio:>8}")
    print(f"  (read every file {B.ms(f['read'])}, parse them in memory {B.ms(f['parse'])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
