#!/usr/bin/env python3
"""Benchmarks for maildir-backlog: one command, one table.

    python bench/bench.py            # default settings (4-9 minutes on a 2-core shared machine)
    python bench/bench.py --quick    # small sizes and repeats: a smoke run (1-2 minutes)
    python bench/bench.py --only take,calls,drain,janitor

Everything runs against real git repositories in a temporary directory and the real command
(`python -m maildir_backlog`) as a subprocess, with a private HOME and git identity. Every
figure is a median over repeated runs; every comparison is a ratio of two figures measured in
the same run (interleaved where the state allows, so machine noise hits both sides alike).

1. take@N      auto-pick `backlog take` with N todo tasks (maildir-shared); cold = first take
               with no parse cache, warm = the figure.   goals: @1k <= 2x @10, @10k <= 5x @10
2. per call    `add --here`, `take SLUG`, `progress`, `status`, `advance` (to done) on a 10-task backlog,
               each / git floor (`git rm --cached P` + `git commit -m m -- P`, same run).
               goals: committing <= 20x, non-committing <= 15x.  Plus the split of each call:
               interpreter start, imports (top 3 by name), git subprocesses (count, time), own work,
               interpreter exit.
3. drain       200 tasks drained by W = 1, 2, 4 worktree workers (`--json take` + `advance`),
               tasks/s and the exactly-once check across every branch's done/.
4. janitor     `maintain --dry-run` on 10,000 tasks (9,000 todo, 1,000 in flight, 100 timed out)
               / I/O floor (`find ... -exec cat {} +`).  goals: <= 20x, peak RSS <= 100 MiB.

Benchmarks are scripts, not tests: nothing here runs under pytest.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
BACKLOG = [PY, "-m", "maildir_backlog"]
REFERENCE_SHELL_MS_PER_TASK = 12.0
# The standard library a hot call imports, found by running one (`status`, read-only) in the
# installed command's interpreter: the top-level modules it loads, less this package's. Imported
# alone, they are the floor of any Python command that does the same with the same modules.
STDLIB_OF_A_CALL = (
    "import sys\nbefore = set(sys.modules)\nfrom maildir_backlog.cli import run\nrun(['backlog', 'status'])\n"
    "print(' '.join(sorted(m for m in set(sys.modules) - before if '.' not in m and m[0] != '_'"
    " and m != 'maildir_backlog')))"
)


def stdlib_floor(python: str, repo: Path, env: dict) -> str:
    """`python -c` code importing what a hot call imports from the standard library (see above)."""
    names = run([python, "-c", STDLIB_OF_A_CALL], repo, env).stdout.splitlines()[-1].split()
    return "import " + ", ".join(names)


# ------------------------------------------------------------------------------------ helpers


class Env:
    """A private HOME and git identity; nothing from the machine's git config leaks in."""

    def __init__(self, base: Path) -> None:
        home = base / "home"
        home.mkdir(parents=True, exist_ok=True)
        drop = ("GIT_", "BACKLOG_", "CONDUCTOR_", "CMUX_")
        env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        # An installed package has its bytecode compiled; this machine's environment sets
        # PYTHONDONTWRITEBYTECODE, which would make every call recompile the package.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.update(
            HOME=str(home),
            GIT_AUTHOR_NAME="Backlog Bench",
            GIT_AUTHOR_EMAIL="bench@example.invalid",
            GIT_COMMITTER_NAME="Backlog Bench",
            GIT_COMMITTER_EMAIL="bench@example.invalid",
            GIT_CONFIG_NOSYSTEM="1",
            BACKLOG_CLAIMER="bench",
            PYTHONPATH=str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""),
        )
        self.vars = env

    def with_(self, **extra: str) -> dict[str, str]:
        env = dict(self.vars)
        env.update(extra)
        return env


def run(cmd: list[str], cwd: Path, env: dict, check: bool = True, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, **kw)
    if check and proc.returncode:
        raise RuntimeError(
            f"{' '.join(map(str, cmd))} -> {proc.returncode}: {proc.stderr.strip()}{proc.stdout.strip()}"
        )
    return proc


def timed(cmd: list[str], cwd: Path, env: dict, check: bool = True) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = run(cmd, cwd, env, check=check)
    return time.perf_counter() - start, proc


def children_cpu() -> float:
    """user + sys seconds of every waited-for child so far (only meaningful between sequential runs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def git(cwd: Path, env: Env, *args: str) -> str:
    return run(["git", *args], cwd, env.vars).stdout


def backlog(cwd: Path, env: Env, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return run(BACKLOG + list(args), cwd, env.vars, check=check)


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


class Table:
    """Rows of (figure, value, goal, verdict); printed as they come and once more at the end."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str]] = []
        self.notes: list[str] = []

    def add(self, figure: str, value: str, goal: str = "", verdict: str = "") -> None:
        self.rows.append((figure, value, goal, verdict))
        print(f"  {figure:<48} {value:<30} {goal:<16} {verdict}".rstrip(), flush=True)

    def check(self, figure: str, value: str, ok: bool, goal: str) -> None:
        self.add(figure, value, goal, "MET" if ok else "MISSED")

    def section(self, title: str) -> None:
        self.rows.append((f"## {title}", "", "", ""))
        print(f"\n{title}", flush=True)

    def note(self, text: str) -> None:
        self.rows.append((f"   {text}", "", "", ""))
        print(f"   {text}", flush=True)

    def render(self) -> str:
        out = [f"  {'figure':<48} {'value':<30} {'goal':<16} verdict", "-" * 110]
        for figure, value, goal, verdict in self.rows:
            if figure.startswith("## "):
                out += ["", figure[3:]]
            elif not value and not goal:
                out.append(figure)
            else:
                out.append(f"  {figure:<48} {value:<30} {goal:<16} {verdict}".rstrip())
        return "\n".join(out)


# ------------------------------------------------------------------------------- repositories

LOREM = (
    "Problem: the thing is slow when many agents use it at once, and the log says why.\n"
    "Decision: keep the file format, change the code path. Phases: measure, fix, verify.\n"
)


def task_text(rng: random.Random, slug: str, deps: list[str], extra_meta: list[str] = (), log: list[str] = ()) -> str:
    meta = [f"priority: {rng.randint(1, 5)}", *extra_meta]
    if deps:
        meta.append("dependencies:")
        meta += [f'  {d}: "needs {d} first"' for d in deps]
    if rng.random() < 0.3:
        meta.append("arc: storage")
    text = "---\n" + "\n".join(meta) + "\n---\n\n"
    text += f"# {slug.replace('-', ' ')}\n\n{LOREM}\n## Acceptance\n\n- it works\n- it is measured\n\n---\n\n"
    text += "".join(line + "\n" for line in log)
    return text


def write_tasks(
    directory: Path, n: int, rng: random.Random, prefix: str, done_slugs: list[str], dep_rate: float = 0.10
) -> list[str]:
    """n todo tasks, priorities 1-5; ~10% have dependencies: half on a done task (ready),
    half on another todo task (blocked)."""
    directory.mkdir(parents=True, exist_ok=True)
    slugs = [f"{prefix}{i:05d}-task" for i in range(n)]
    for i, slug in enumerate(slugs):
        deps: list[str] = []
        if rng.random() < dep_rate:
            if done_slugs and rng.random() < 0.5:
                deps = [rng.choice(done_slugs)]
            elif n > 1:
                other = rng.randrange(n - 1)
                deps = [slugs[other if other < i else other + 1]]
        (directory / f"{slug}.md").write_text(task_text(rng, slug, deps))
    return slugs


def new_repo(base: Path, env: Env, name: str, n_todo: int, seed: int = 1, n_done: int | None = None) -> Path:
    """A maildir-shared backlog with n_todo todo tasks, built with one `git add` + one commit."""
    path = base / name
    path.mkdir(parents=True)
    git(path, env, "init", "-q", "-b", "main")
    (path / "README.md").write_text("# bench repo\n")
    git(path, env, "add", "README.md")
    git(path, env, "commit", "-q", "-m", "init")
    backlog(path, env, "setup", "--backend=maildir-shared")
    rng = random.Random(seed)
    n_done = max(2, n_todo // 20) if n_done is None else n_done
    done_slugs = [f"d{i:05d}-task" for i in range(n_done)]
    for slug in done_slugs:
        (path / "backlog" / "done" / f"{slug}.md").write_text(
            task_text(rng, slug, [], log=["- 2026-01-01T00:00:00Z advanced to=done"])
        )
    write_tasks(path / "backlog" / "todo", n_todo, rng, "t", done_slugs)
    git(path, env, "add", "backlog")
    git(path, env, "commit", "-q", "-m", f"{n_todo} tasks")
    return path


def cache_file(repo: Path) -> Path:
    return repo / ".git" / "backlog-cache.json"


def drop_cache(repo: Path) -> None:
    """No parse cache: the directory of per-pile files (`layout.parse_cache`), and the one JSON
    file of earlier versions (`cache_file`), for `--compare` against one."""
    cache_file(repo).unlink(missing_ok=True)
    shutil.rmtree(repo / ".git" / "backlog-cache", ignore_errors=True)


# ---------------------------------------------------------------------- 1. auto-pick scaling


def bench_take(base: Path, env: Env, table: Table, sizes: list[int], cold_reps: int, warm_reps: int) -> None:
    table.section(
        f"1. auto-pick `backlog take` (maildir-shared; cold = median of {cold_reps}, warm = median of {warm_reps};"
        " sizes interleaved)"
    )
    repos: dict[int, Path] = {}
    heads: dict[int, str] = {}
    built: dict[int, float] = {}
    for n in sizes:
        t0 = time.perf_counter()
        repos[n] = new_repo(base, env, f"take{n}", n, seed=n)
        built[n] = time.perf_counter() - t0
        heads[n] = git(repos[n], env, "rev-parse", "HEAD").strip()
    cold: dict[int, list[float]] = {n: [] for n in sizes}
    warm: dict[int, list[float]] = {n: [] for n in sizes}
    for _ in range(cold_reps):
        for n, repo in repos.items():
            drop_cache(repo)
            dt, proc = timed(BACKLOG + ["take"], repo, env.vars)
            slug = Path(proc.stdout.strip()).stem
            assert slug, f"take@{n} claimed nothing: {proc.stderr}"
            cold[n].append(dt)
            # undo the claim, so every cold sample sees the same N
            (repo / ".git" / "backlog" / "doing" / f"{slug}.md").unlink()
            git(repo, env, "reset", "-q", "--hard", heads[n])
    for repo in repos.values():
        backlog(repo, env, "take")  # re-fills the one cache entry the last reset invalidated
    for _ in range(warm_reps):
        for n, repo in repos.items():
            dt, proc = timed(BACKLOG + ["take"], repo, env.vars)
            assert proc.stdout.strip(), f"take@{n} claimed nothing: {proc.stderr}"
            warm[n].append(dt)
    for n in sizes:
        table.add(f"take@{n:,} cold (fills the parse cache)", ms(med(cold[n])), "", f"(repo built in {built[n]:.1f} s)")
        table.add(
            f"take@{n:,} warm",
            ms(med(warm[n])),
            "",
            f"(reference shell impl.: ~{ms(n * REFERENCE_SHELL_MS_PER_TASK / 1000)})",
        )
    for n, limit in ((1000, 2.0), (10000, 5.0)):
        if 10 in warm and n in warm:
            ratio = med(warm[n]) / med(warm[10])
            table.check(f"take@{n:,} / take@10", f"{ratio:.2f}x", ratio <= limit, f"<= {limit:g}x")


# ------------------------------------------------------------------------- 2. per-call cost

# Runs the real CLI in-process, after recording when the script started (after interpreter
# start-up and site), and how long every git took from its spawn to its reaping.
SPLIT_WRAPPER = r"""
import os, sys, time, json
_t0 = time.perf_counter()
_procs = []
_started = {}
_spawn, _waitpid = os.posix_spawnp, os.waitpid  # how `spawn.exchange` starts and reaps git
def __spawn(path, args, *a, **k):
    t = time.perf_counter()
    pid = _spawn(path, args, *a, **k)
    _started[pid] = [os.path.basename(str(path)), t]
    return pid
def __waitpid(pid, options):
    r = _waitpid(pid, options)
    if pid in _started and r[0] == pid:
        name, t = _started.pop(pid)
        _procs.append([name, time.perf_counter() - t])
    return r
os.posix_spawnp, os.waitpid = __spawn, __waitpid
from maildir_backlog.cli import run  # (`main` would end the process: `run` is the call without that end)
sys.argv[0] = "backlog"
code = run(None)
_t1 = time.perf_counter()
with open(os.environ["BENCH_SPLIT_OUT"], "w") as f:
    json.dump({"t0": _t0, "t1": _t1, "procs": _procs, "code": code}, f)
sys.exit(code)
"""

DEPS_ONLY = "import plumbum.cli, frontmatter"

IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)\s*$")


def parse_importtime(stderr: str) -> tuple[float, list[tuple[str, float]]]:
    """Total self time of every import after `site` (site is part of interpreter start), and the
    direct imports of our code (or of the wrapper) ranked by their cumulative time."""
    rows = []
    for line in stderr.splitlines():
        m = IMPORT_LINE.match(line)
        if m:
            rows.append((int(m.group(1)), int(m.group(2)), len(m.group(3)) // 2, m.group(4)))
    site = max((i for i, r in enumerate(rows) if r[3] == "site" and r[2] == 0), default=-1)
    rows = rows[site + 1 :]
    total = sum(r[0] for r in rows) / 1e6
    # Lines come in post-order (children before their parent): walk backwards to know parents.
    stack: list[tuple[int, str]] = []
    groups: dict[str, float] = {}
    for self_us, _cum, depth, name in reversed(rows):
        while stack and stack[-1][0] >= depth:
            stack.pop()
        chain = [n for _, n in stack] + [name]
        owner = next((n for n in chain if not n.startswith("maildir_backlog")), None)
        key = owner.split(".")[0] if owner else "maildir_backlog (own modules)"
        groups[key] = groups.get(key, 0.0) + self_us / 1e6
        stack.append((depth, name))
    return total, sorted(groups.items(), key=lambda kv: -kv[1])


def git_trace(path: Path) -> list[str]:
    """The git subcommand of every git process in a GIT_TRACE file."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return []
    found = []
    for line in text.splitlines():
        m = re.search(r"trace: (?:built-in: git|exec: git-?)\s*(\S+)", line)
        if m:
            found.append(m.group(1))
    return found


def reference_script(ref: Path | None) -> list[str] | None:
    """The older bash tool's entry point in `ref` (its scripts are not shipped here), else None.

    Its entry point `backlog.sh VERB ...` reads the backend from the `## Backend` section of
    backlog/AGENTS.md and hands the verb to `backlog-<backend>.sh`. The backlog `new_repo` builds
    (our `setup --backend=maildir-shared`) declares `maildir-shared` there, and its pipeline line
    (todo, doing, done) reads the same, so the bash tool needs no config of its own: its doing/
    is `$(git rev-parse --git-common-dir)/backlog/doing`, as ours. Its verbs for the cycle:
    `take SLUG` (claim: copy into doing/, `git rm` from todo/, commit), `progress NOTE` (no slug:
    the in-flight task whose last `branch=` is this branch; appends, no commit), `status` (counts
    per pile), `advance SLUG` (doing/ -> done/, commit; it asks `gh pr view` first when gh is on
    PATH). The same arguments as ours, so the cycle is one list for both tools."""
    if ref is not None and (ref / "backlog.sh").is_file():
        return ["bash", str(ref / "backlog.sh")]
    return None


def user_install(base: Path, env: Env, where: Path | None) -> list[str] | None:
    """The command as a user installs it: this checkout installed (not editable) into a virtual
    environment of its own (`where`, reused when it already holds one; else under `base`), its
    `backlog` script the command. A call then pays what a user's call pays: none of this machine's
    site-wide `.pth` files (an editable install's finder, a sandbox's certificate set), which add
    ~30-45 ms to every `python` started from the shared interpreter here. None when the install
    fails (no package index reachable): the rows say so."""
    venv = where or base / "venv"
    script = venv / "bin" / "backlog"
    vars_ = {k: v for k, v in env.vars.items() if k != "PYTHONPATH"}
    if not script.exists():
        made = run([PY, "-m", "venv", str(venv)], base, vars_, check=False)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        if made.returncode or run([*pip, str(ROOT)], base, vars_, check=False).returncode:
            return None
    else:  # a reused environment gets this checkout's code
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        if run([*pip, "--no-deps", "--force-reinstall", str(ROOT)], base, vars_, check=False).returncode:
            return None
    return [str(script)]


def reference_did(repo: Path, env: Env, verb: str, slug: str, proc: subprocess.CompletedProcess) -> str:
    """Why the bash tool's `verb` on `slug` did not do the work ours does ("" when it did), so a
    reference that fails, or exits 0 having done nothing, is never timed as one."""
    doing = repo / ".git" / "backlog" / "doing" / f"{slug}.md"
    if proc.returncode:
        return f"{verb} exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[:120]}"
    tracked = set(git(repo, env, "ls-tree", "-r", "--name-only", "HEAD", "--", "backlog").split())
    ok = {
        "add": f"backlog/todo/{slug}.md" in tracked,
        "take SLUG": doing.is_file() and f"backlog/todo/{slug}.md" not in tracked,
        "progress": doing.is_file() and "benchmark note" in doing.read_text(),
        "status": "doing: 1" in proc.stdout,
        "advance": not doing.exists() and f"backlog/done/{slug}.md" in tracked,
    }[verb]
    return "" if ok else f"{verb} exited 0 but did not do its work"


def ratio_row(table: Table, label: str, mine: float, theirs: float) -> None:
    """A row of the command as a user installs it against the bash tool (goal: at most twice)."""
    note = "(this checkout pip-installed in a virtual environment, as a user has it)"
    table.add(f"  {label}", f"{mine / theirs:.2f}x ({ms(mine)})", "<= 2x", note)


def bench_calls(
    base: Path,
    env: Env,
    table: Table,
    reps: int,
    ref: Path | None = None,
    compare: Path | None = None,
    user: list[str] | None = None,
) -> None:
    table.section(f"2. per-call cost on a 10-task backlog / git floor (median of {reps}, interleaved)")
    repo = new_repo(base, env, "calls", 10, seed=7, n_done=2)
    bash = reference_script(ref)
    ref_repo = new_repo(base, env, "reference", 10, seed=7, n_done=2) if bash else None
    # --compare DIR: the same cycle through another checkout's package (DIR/maildir_backlog), in a
    # repository of its own, interleaved: before against after in one run
    old_repo = new_repo(base, env, "compare", 10, seed=7, n_done=2) if compare else None
    old_env = env.with_(PYTHONPATH=str(compare)) if compare else {}
    floor_repo = new_repo(base, env, "floor", 10, seed=7, n_done=2)
    # the command as a user installs it (`user_install`), in a repository of its own, interleaved
    user_repo = new_repo(base, env, "user", 10, seed=7, n_done=2) if user else None
    user_env = {k: v for k, v in env.vars.items() if k != "PYTHONPATH"}
    rng = random.Random(99)
    counter = [0]

    def refill(path: Path) -> str:
        """One more todo task, committed (untimed): keeps the backlog at 10 tasks."""
        counter[0] += 1
        slug = f"x{counter[0]:04d}-task"
        (path / "backlog" / "todo" / f"{slug}.md").write_text(task_text(rng, slug, []))
        git(path, env, "add", "backlog/todo")
        git(path, env, "commit", "-q", "-m", f"add {slug}")
        return slug

    def cycle(slug: str, bash: bool = False) -> list[tuple[str, list[str]]]:
        """One task's life: `add` makes it here (the bash tool's `add` commits on this branch, as our
        `add --here` does), then it is claimed, noted, looked at and completed."""
        name = slug.removesuffix("-plan")
        return [
            ("add", ["add", name] if bash else ["add", name, "--here"]),
            ("take SLUG", ["take", slug]),
            ("progress", ["progress", "benchmark note"]),
            ("status", ["status"]),
            ("advance", ["advance", slug]),
        ]

    verbs = ("add", "take SLUG", "progress", "status", "advance")
    made = [0]

    def fresh() -> str:
        """A new task's slug, for `add` to create (the backlog stays at 10 tasks: each cycle's
        `advance` completes the task its `add` made)."""
        made[0] += 1
        return f"y{made[0]:04d}-plan"

    samples: dict[str, list[float]] = {
        v: [] for v in verbs + ("floor", "add floor", "python -c pass", "installed status", "deps only")
    }
    ref_samples: dict[str, list[float]] = {v: [] for v in verbs}
    old_samples: dict[str, list[float]] = {v: [] for v in verbs}
    user_samples: dict[str, list[float]] = {v: [] for v in verbs + ("python -c pass", "stdlib")}
    floor_code = ""  # (found on the first round: `stdlib_floor`)
    old_cpu: dict[str, list[float]] = {v: [] for v in verbs}  # user + sys of the call and its git processes
    ref_codes: set[int] = set()
    ref_faults: set[str] = set()
    cpu: dict[str, list[float]] = {v: [] for v in verbs + ("floor",)}
    installed = shutil.which("backlog", path=env.vars.get("PATH"))
    # The split: every split run goes through SPLIT_WRAPPER under -X importtime (imports) and
    # GIT_TRACE (git processes, by name); the wrapper times each git from its spawn to its reaping
    # and stamps the monotonic clock when its code starts and ends (start-up, exit).
    keys = ("total", "cpu", "start", "imports", "git", "own", "exit")
    split: dict[str, dict[str, list[float]]] = {v: {k: [] for k in keys} for v in verbs}
    git_cmds: dict[str, list[str]] = {}
    other_procs: set[str] = set()
    groups: dict[str, dict[str, list[float]]] = {v: {} for v in verbs}
    out, trace = base / "split.json", base / "trace.txt"
    for _ in range(reps):
        # git floor: what a claim must do in git at least (delete one tracked file, commit it)
        slug = refill(floor_repo)
        rel = f"backlog/todo/{slug}.md"
        start, cpu0 = time.perf_counter(), children_cpu()
        (floor_repo / rel).unlink()
        run(["git", "rm", "-q", "--cached", "--", rel], floor_repo, env.vars)
        run(["git", "commit", "-q", "-m", "m", "--", rel], floor_repo, env.vars)
        samples["floor"].append(time.perf_counter() - start)
        cpu["floor"].append(children_cpu() - cpu0)
        # and what an `add` must do in git at least (one new file added, committed), as the bash tool does
        added = f"backlog/todo/{slug}-again.md"
        (floor_repo / added).write_text(task_text(rng, f"{slug}-again", []))
        start = time.perf_counter()
        run(["git", "add", "--", added], floor_repo, env.vars)
        run(["git", "commit", "-q", "-m", "m", "--", added], floor_repo, env.vars)
        samples["add floor"].append(time.perf_counter() - start)
        samples["deps only"].append(timed([PY, "-c", DEPS_ONLY], repo, env.vars)[0])
        samples["python -c pass"].append(timed([PY, "-c", "pass"], repo, env.vars)[0])
        if installed:
            samples["installed status"].append(timed([installed, "status"], repo, env.vars)[0])
        for verb, args in cycle(fresh()):
            cpu0 = children_cpu()
            samples[verb].append(timed(BACKLOG + args, repo, env.vars)[0])
            cpu[verb].append(children_cpu() - cpu0)
        if bash and ref_repo:  # the same cycle through the bash tool, in a repository of its own
            ref_slug = fresh()
            for verb, args in cycle(ref_slug, bash=True):
                dt, proc = timed(bash + args, ref_repo, env.vars, check=False)
                ref_samples[verb].append(dt)
                ref_codes.add(proc.returncode)
                fault = reference_did(ref_repo, env, verb, ref_slug, proc)  # untimed
                if fault:
                    ref_faults.add(fault)
        if user and user_repo:
            python = str(Path(user[0]).parent / "python")
            user_samples["python -c pass"].append(timed([python, "-c", "pass"], user_repo, user_env)[0])
            floor_code = floor_code or stdlib_floor(python, user_repo, user_env)
            user_samples["stdlib"].append(timed([python, "-c", floor_code], user_repo, user_env)[0])
            for verb, args in cycle(fresh()):
                user_samples[verb].append(timed(user + args, user_repo, user_env)[0])
        if old_repo:
            for verb, args in cycle(fresh()):
                cpu0 = children_cpu()
                old_samples[verb].append(timed(BACKLOG + args, old_repo, old_env)[0])
                old_cpu[verb].append(children_cpu() - cpu0)
        for verb, args in cycle(fresh()):
            trace.unlink(missing_ok=True)
            cmd = [PY, "-X", "importtime", "-c", SPLIT_WRAPPER, *args]
            cpu0 = children_cpu()
            spawned = time.perf_counter()
            proc = run(cmd, repo, env.with_(BENCH_SPLIT_OUT=str(out), GIT_TRACE=str(trace)))
            reaped = time.perf_counter()
            data = json.loads(out.read_text())
            imports, ranked = parse_importtime(proc.stderr)
            git_s = sum(t for name, t in data["procs"] if name == "git")
            other_procs.update(name for name, _ in data["procs"] if name != "git")
            git_cmds[verb] = git_trace(trace)
            m = split[verb]
            m["total"].append(reaped - spawned)
            m["cpu"].append(children_cpu() - cpu0)
            m["start"].append(data["t0"] - spawned)
            m["exit"].append(reaped - data["t1"])
            m["imports"].append(imports)
            m["git"].append(git_s)
            m["own"].append(data["t1"] - data["t0"] - imports - git_s)
            for name, secs in ranked:
                groups[verb].setdefault(name, []).append(secs)
    floor = med(samples["floor"])
    table.add("git floor (git rm --cached + git commit)", f"{ms(floor)} (cpu {ms(med(cpu['floor']))})")
    for verb in verbs:
        ratio = med(samples[verb]) / floor
        committing = verb in ("add", "take SLUG", "advance")
        limit = 20 if committing else 15
        table.check(
            f"{verb} ({'commits' if committing else 'no commit'})",
            f"{ms(med(samples[verb]))} = {ratio:.1f}x (cpu {med(cpu[verb]) / med(cpu['floor']):.1f}x)",
            ratio <= limit,
            f"<= {limit}x floor",
        )
    if bash and ref_faults:
        table.note("(no bash tool reference: its cycle did not do the work ours does)")
        for fault in sorted(ref_faults):
            table.note(f"  {fault}")
    elif bash:
        for verb in verbs:
            r = med(ref_samples[verb])
            table.add(
                f"  {verb} / the bash tool's",
                f"{med(samples[verb]) / r:.2f}x (bash tool {ms(r)})",
                "",
                f"(exit codes seen: {sorted(ref_codes)}; work checked)",
            )
        for verb in verbs if user else ():
            ratio_row(table, f"{verb}, installed / the bash tool's", med(user_samples[verb]), med(ref_samples[verb]))
    else:
        table.note("(no bash tool reference: pass --bash-tool DIR, DIR holding its backlog.sh)")
    if user:  # the floor of a Python command, as a user installs it
        start, floor_py = med(user_samples["python -c pass"]), med(user_samples["stdlib"])
        shared = f"vs {ms(med(samples['python -c pass']))} from the shared interpreter"
        versus = f"= {floor_py / med(ref_samples['progress']):.2f}x the bash tool's progress" if bash else ""
        add_floor = floor_py + med(samples["add floor"])
        add_versus = f"= {add_floor / med(ref_samples['add']):.2f}x the bash tool's add" if bash else ""
        for label, value, note in (
            ("python -c pass, in that virtual environment", start, shared),
            ("the standard library a hot call imports, there", floor_py, versus),
            ("that, and git add + git commit of a new file", add_floor, add_versus),
        ):
            table.add(f"  {label}", ms(value), "", note)
        table.note(f"    ({floor_code})")
    elif user is None and ref:
        table.note("(no installed command: the virtual environment could not be made)")
    for verb in verbs if compare else ():
        before, cpu_before = med(old_samples[verb]), med(old_cpu[verb])
        table.add(
            f"  {verb} / the same in {compare}",
            f"{med(samples[verb]) / before:.2f}x (there {ms(before)})",
            "",
            f"cpu {med(cpu[verb]) / cpu_before:.2f}x (here {ms(med(cpu[verb]))}, there {ms(cpu_before)})",
        )
    deps = med(samples["deps only"])
    table.add(
        "  python -c 'import plumbum.cli, frontmatter'",
        f"{ms(deps)} = {deps / floor:.1f}x floor",
        "",
        "(the floor of any CLI built on these)",
    )
    table.add(
        "  python -c pass (interpreter start and exit)",
        f"{ms(med(samples['python -c pass']))} = {med(samples['python -c pass']) / floor:.1f}x floor",
    )
    if installed:
        table.add(
            "  the installed `backlog status` (from PATH)",
            ms(med(samples["installed status"])),
            "",
            f"vs {ms(med(samples['status']))} via python -m",
        )

    table.note(
        f"split of one call (median of {reps}, each run under -X importtime and GIT_TRACE, interleaved with the above):"
    )
    table.note(
        f"{'call':<9} {'total':>7} {'(cpu)':>7} {'start':>7} {'imports':>8} {'git':>13} {'own work':>9} {'exit':>7}  biggest"
    )
    for verb in verbs:
        m = {k: med(v) for k, v in split[verb].items()}
        parts = {
            "interpreter start": m["start"],
            "imports": m["imports"],
            "git subprocesses": m["git"],
            "own work": m["own"],
            "interpreter exit": m["exit"],
        }
        biggest = max(parts, key=parts.get)
        table.note(
            f"{verb.split()[0]:<9} {ms(m['total']):>7} {ms(m['cpu']):>7} {ms(m['start']):>7} {ms(m['imports']):>8} "
            f"{ms(m['git']):>7} ({len(git_cmds[verb])}x) {ms(m['own']):>9} {ms(m['exit']):>7}  {biggest}"
        )
    table.note(
        "(own work = total - the rest; near 0 or below means within the error of -X importtime; git counts"
        " each git from spawn to reaping, and the rev-parse that finds the repository starts before the"
        " verb's imports and runs alongside them: its time is in both columns)"
    )
    if other_procs:
        table.note(f"non-git subprocesses (counted under imports): {', '.join(sorted(other_procs))}")
    for verb in verbs:
        top = sorted(((n, med(v)) for n, v in groups[verb].items()), key=lambda kv: -kv[1])[:3]
        table.note(
            f"{verb.split()[0]:<9} top imports: "
            + ", ".join(f"{n} {ms(t)}" for n, t in top)
            + " | git: "
            + ", ".join(git_cmds[verb])
        )


# -------------------------------------------------------------------------- 3. drain throughput


def bench_drain(base: Path, env: Env, table: Table, n_tasks: int, workers: list[int], reps: int) -> None:
    table.section(
        f"3. drain {n_tasks} tasks with W worktree workers (`--json take` + `advance`; {reps} run(s) per W,"
        f" take+advance = median over all tasks)"
    )
    per_w: dict[int, float] = {}
    for w in workers:
        rates, checks, cycles = [], [], []
        for rep in range(reps):
            repo = base / f"drain-w{w}-r{rep}"
            repo.mkdir()
            git(repo, env, "init", "-q", "-b", "main")
            (repo / "README.md").write_text("# drain\n")
            git(repo, env, "add", "README.md")
            git(repo, env, "commit", "-q", "-m", "init")
            backlog(repo, env, "setup", "--backend=maildir-shared")
            # no dependencies here: a dependency done on another branch is not in this branch's done/
            write_tasks(repo / "backlog" / "todo", n_tasks, random.Random(rep), "t", [], dep_rate=0.0)
            git(repo, env, "add", "backlog")
            git(repo, env, "commit", "-q", "-m", "tasks")
            trees = []
            for k in range(w):
                tree = base / f"drain-w{w}-r{rep}-wt{k}"
                git(repo, env, "worktree", "add", "-q", "-b", f"w{k}", str(tree))
                trees.append(tree)
            completed: list[list[str]] = [[] for _ in range(w)]
            errors: list[str] = []
            cycle: list[float] = []  # take + advance of one task, per task

            def worker(k: int) -> None:
                tree = trees[k]
                lost = 0
                while True:
                    t0 = time.perf_counter()
                    proc = run(BACKLOG + ["--json", "take"], tree, env.vars, check=False)
                    if proc.returncode == 3:
                        lost += 1
                        if lost > 100:
                            errors.append(f"w{k}: lost 100 races in a row")
                            return
                        continue
                    if proc.returncode:
                        errors.append(f"w{k} take: {proc.returncode} {proc.stderr.strip()}")
                        return
                    lost = 0
                    slug = json.loads(proc.stdout.strip().splitlines()[-1]).get("slug")
                    if not slug:
                        return
                    proc = run(BACKLOG + ["advance", slug], tree, env.vars, check=False)
                    if proc.returncode:
                        errors.append(f"w{k} advance {slug}: {proc.returncode} {proc.stderr.strip()}")
                        continue
                    completed[k].append(slug)
                    cycle.append(time.perf_counter() - t0)

            threads = [threading.Thread(target=worker, args=(k,)) for k in range(w)]
            start = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - start
            # exactly once: what every branch committed in done/
            done_files = []
            for k in range(w):
                out = git(repo, env, "ls-tree", "-r", "--name-only", f"w{k}", "--", "backlog/done/")
                done_files += [Path(p).stem for p in out.split() if p.endswith(".md")]
            reported = sum(len(c) for c in completed)
            ok = len(done_files) == n_tasks and len(set(done_files)) == n_tasks and reported == n_tasks and not errors
            checks.append((ok, len(done_files), len(set(done_files)), errors[:3]))
            rates.append(reported / wall)
            cycles.extend(cycle)
        table.add(
            f"drain W={w}",
            f"{med(rates):.2f} tasks/s",
            "",
            f"({ms(n_tasks / med(rates))} for {n_tasks}; take+advance median {ms(med(cycles))})",
        )
        per_w[w] = med(rates)
        bad = [c for c in checks if not c[0]]
        detail = (
            f"{checks[0][1]} done, {checks[0][2]} distinct" if not bad else f"{bad[0][1]} done, {bad[0][2]} distinct"
        )
        table.check(f"drain W={w} exactly once (every run)", detail, not bad, f"{n_tasks}/{n_tasks}")
        for c in bad:
            for error in c[3]:
                table.note(f"  {error}")
    if 1 in per_w:
        table.add(
            "drain speed-up over W=1",
            ", ".join(f"W={w}: {per_w[w] / per_w[1]:.2f}x" for w in workers if w != 1),
            "",
            f"({os.cpu_count()} cores)",
        )


# ----------------------------------------------------------------------------- 4. the janitor


def peak_rss_kib(cmd: list[str], cwd: Path, env: dict) -> tuple[int, int]:
    """Peak RSS of one run of cmd (the largest process of the tree), via wait4's rusage."""
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=null, stderr=null)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss, proc.returncode


def bench_janitor(
    base: Path, env: Env, table: Table, n_todo: int, n_flight: int, n_timed_out: int, reps: int, cold_reps: int
) -> None:
    total = n_todo + n_flight
    table.section(
        f"4. `maintain --dry-run` on {total:,} tasks ({n_todo:,} todo, {n_flight:,} in flight, "
        f"{n_timed_out} timed out; cold = median of {cold_reps}, warm = median of {reps})"
    )
    if not (ROOT / "maildir_backlog" / "commands" / "maintain").exists():
        table.note("skipped: maildir_backlog/commands/maintain does not exist yet")
        return
    repo = new_repo(base, env, "janitor", n_todo, seed=4)
    doing = repo / ".git" / "backlog" / "doing"
    doing.mkdir(parents=True, exist_ok=True)
    rng = random.Random(5)
    now = datetime.now(timezone.utc)
    for i in range(n_flight):
        slug = f"f{i:05d}-task"
        late = i < n_timed_out
        when = now - (timedelta(days=2) if late else timedelta(minutes=rng.randint(1, 600)))
        ts = when.strftime("%Y-%m-%dT%H:%M:%SZ")
        (doing / f"{slug}.md").write_text(
            task_text(
                rng,
                slug,
                [],
                extra_meta=["timeout: 1h"] if late else [],
                log=[f"- {ts} advanced to=doing claimer=w branch=main"],
            )
        )
    cmd = BACKLOG + ["maintain", "--dry-run"]
    before = sorted(p.name for p in doing.iterdir())
    colds = []
    for _ in range(cold_reps):
        drop_cache(repo)
        dt, proc = timed(cmd, repo, env.vars, check=False)
        colds.append(dt)
    cold = med(colds)
    timed_out_lines = sum(1 for line in proc.stdout.splitlines() if line.startswith("TIMED OUT"))
    floor_cmd = [
        "sh",
        "-c",
        'find "$1" "$2" -name "*.md" -exec cat {} + >/dev/null',
        "sh",
        str(repo / "backlog" / "todo"),
        str(doing),
    ]
    runs, floors = [], []
    for _ in range(reps):
        floors.append(timed(floor_cmd, repo, env.vars)[0])
        dt, proc = timed(cmd, repo, env.vars, check=False)
        runs.append(dt)
    rss, code = peak_rss_kib(cmd, repo, env.vars)
    after = sorted(p.name for p in doing.iterdir())
    table.add("maintain --dry-run cold (no parse cache)", ms(cold), "", f"exit {proc.returncode}")
    table.add("maintain --dry-run warm", ms(med(runs)))
    table.add("I/O floor (find ... -exec cat {} +)", ms(med(floors)))
    ratio = med(runs) / med(floors)
    table.check("maintain --dry-run / I/O floor", f"{ratio:.1f}x", ratio <= 20, "<= 20x")
    table.check("maintain --dry-run peak RSS", f"{rss / 1024:.1f} MiB", rss / 1024 <= 100, "<= 100 MiB")
    table.check(
        "dry run: TIMED OUT reported, nothing moved",
        f"{timed_out_lines} timed out, {len(before) - len(after)} moved",
        timed_out_lines == n_timed_out and before == after,
        f"{n_timed_out}, 0 moved",
    )


# ------------------------------------------------------------------------------------ main


def machine_note() -> str:
    cpus = os.cpu_count()
    try:
        model = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor() or "?"
    gitv = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    return (
        f"{cpus} cores ({model}), Python {platform.python_version()}, {gitv}, {platform.system()} {platform.release()}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and repeats (a smoke run)")
    parser.add_argument("--only", default="take,calls,drain,janitor", help="comma-separated parts to run")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument(
        "--bash-tool",
        "--reference",
        dest="reference",
        type=Path,
        help="the older bash tool's scripts (a directory with backlog.sh; never shipped here): calls compared with it",
    )
    parser.add_argument("--compare", type=Path, help="another checkout (DIR/maildir_backlog): calls before/after")
    parser.add_argument(
        "--user-install",
        nargs="?",
        const=Path(""),
        type=Path,
        help="also time the command pip-installed into a virtual environment (DIR: reuse or make it there)",
    )
    parser.add_argument("--large", action="store_true", help="also the 100,000-task profile (bench/large.py; heavy)")
    parser.add_argument("--large-fixture", type=Path, help="where the 100,000-task backlog is built once and reused")
    parser.add_argument("--herd", action="store_true", help="also the many-worker profile (bench/herd.py, 8 and 32)")
    parser.add_argument(
        "--call-reps", type=int, help="rounds of the per-call cycle (default 7, --quick 3): more make steadier medians"
    )
    args = parser.parse_args()
    parts = set(args.only.split(","))
    q = args.quick
    base = Path(tempfile.mkdtemp(prefix="backlog-bench-"))
    env = Env(base)
    table = Table()
    started = time.perf_counter()
    print(f"maildir-backlog benchmarks ({'quick' if q else 'default'}) in {base}")
    print(f"machine: {machine_note()}")
    # compile the package once (an installed package ships its bytecode)
    run([PY, "-m", "compileall", "-q", str(ROOT / "maildir_backlog")], ROOT, env.vars, check=False)
    try:
        if "take" in parts:
            bench_take(
                base,
                env,
                table,
                [10, 100, 1000] if q else [10, 100, 1000, 10000],
                cold_reps=1 if q else 3,
                warm_reps=3 if q else 7,
            )
        if "calls" in parts:
            if args.compare:
                run([PY, "-m", "compileall", "-q", str(args.compare / "maildir_backlog")], ROOT, env.vars, check=False)
            user = None
            if args.user_install is not None:
                user = user_install(base, env, args.user_install if str(args.user_install) not in ("", ".") else None)
            bench_calls(
                base,
                env,
                table,
                reps=args.call_reps or (3 if q else 7),
                ref=args.reference,
                compare=args.compare,
                user=user,
            )
        if "drain" in parts:
            bench_drain(base, env, table, 40 if q else 200, [1, 2] if q else [1, 2, 4], reps=1)
        if "janitor" in parts:
            bench_janitor(
                base,
                env,
                table,
                *((900, 100, 10) if q else (9000, 1000, 100)),
                reps=3 if q else 5,
                cold_reps=1 if q else 3,
            )
        # the opt-in profiles: their own scripts, their own tables (printed as they run)
        if args.large:
            large = [PY, str(ROOT / "bench" / "large.py"), "--rounds", "2" if q else "5"]
            large += ["--fixture", str(args.large_fixture)] if args.large_fixture else []
            large += ["--reference", str(args.reference)] if args.reference else []
            subprocess.run(large, check=False)
        if args.herd:
            subprocess.run([PY, str(ROOT / "bench" / "herd.py"), "--tasks", "32" if q else "96"], check=False)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    print(
        f"\n=== results ({datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}, "
        f"{time.perf_counter() - started:.0f} s, {'--quick' if q else 'default'}) ==="
    )
    print(f"machine: {machine_note()}")
    print(table.render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
