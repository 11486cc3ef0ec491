"""The fault-injection harness: crashes lose nothing (SPEC §7.3, §7.7, §6).

Every moving verb is killed with SIGKILL inside its critical section, then `backlog maintain`
runs and one checker (`check`) verifies the invariants:

* every task ever created is in exactly one place: one pile of this worktree's tree, or one
  shared in-flight pile (maildir-shared); none lost, none duplicated, nothing unknown;
* everything is committed: `git status --porcelain -- backlog .gitignore` is empty, but for the
  `.tmp-*` file of a write killed midway, which maintain must have removed already (a dead
  writer's flock is gone, so its temporary file is swept at once) and is counted as a violation;
* every task file starts with the exact bytes it was created with, every line after them is a
  log line (`logline.parse_log_line`) and the file ends with a newline (nothing truncated);
* the pile agrees with the task's own log (its last transition), and on maildir-shared the
  ledger agrees with the piles (done/ ↔ done or cancelled, failed/ ↔ failed, a todo/ or in-flight
  copy with a ledger entry is not blocked by it: `Settled.blocks` is False);
* the layout is right (the in-flight symlinks, no task file left in an unused shared pile);
* a second `maintain` right after the first finds nothing to fix.

Part A (`test_crash_points`, `test_migrate_crash_points`) is deterministic: each verb × each named
crash point on its path (`BACKLOG_CRASH_AT`, see `storage.crash_point`) × each backend; the case
tables list only the points a verb reaches, and every run must really die by SIGKILL.
Part B (`test_random_kills`) kills the real command at a random moment (seeded RNG, the seed is
printed) in one long-lived repository per backend, over many iterations.

Preconditions of Part A are planted by writing task files in exactly the format the verbs write
(and one commit), which keeps a case at three real commands: the crashing verb and two `maintain`s.
The figures go to `bench/results/faults.json` and are printed (`pytest -s` shows them).
"""

from __future__ import annotations

import functools
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import forkrun
import pytest
from conftest import ROOT, backlog, git, init_repo

from maildir_backlog import gitplumbed
from maildir_backlog.logline import parse_log_line

# The tests of this file may run in several pytest-xdist workers: each process keeps its own
# FIGURES and writes them as one part file of this run; RESULTS holds the sum of the parts.
pytestmark = [pytest.mark.faults]

PIPELINE = ["todo", "doing", "reviewing", "done"]
IN_FLIGHT = ["doing", "reviewing"]
ALL_PILES = PIPELINE + ["failed"]
REPAIR_BUCKETS = ("ADVANCED BUT NOT MOVED", "TIMED OUT", "DUPLICATE")
BRANCH = "main"
RESULTS = ROOT / "bench" / "results" / "faults.json"
SEED = int(os.environ.get("BACKLOG_FAULTS_SEED", "0")) or random.SystemRandom().randrange(1, 10**6)
# Part B kills per backend: 20 in the suite's run, 60 for the figures in docs/reliability.md
RANDOM_KILLS = int(os.environ.get("BACKLOG_FAULTS_RANDOM", "20"))

T0 = time.monotonic()
TMP_SEEN: set[Path] = set()
PART = ["part_a"]  # which part the kills and repairs being counted belong to
FIGURES: dict = {
    "seed": SEED,
    "part_a": {"kills": 0, "cases": {}},
    "part_b": {
        "kills": 0,
        "iterations": 0,
        "finished_before_kill": 0,
        "timing_runs": 0,
        "kills_by_verb": {},
        "kill_effect": {},
    },
    "repairs": {},
    "layout_repairs": 0,
    "tasks_lost": 0,
    "invariant_violations": 0,
    "tmp_files_seen_after_maintain": 0,
    "index_locks_left_by_kills": 0,  # a plumbed claim killed holding git's index lock (settled after)
    "seconds": {},
}


# -- processes -------------------------------------------------------------------------------
def _env(extra: dict | None = None) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("BACKLOG_CRASH_AT", None)
    env.update(extra or {})
    return env


def spawn(cwd: Path, *args: str, env: dict | None = None):
    """The real command in a process of its own, in its own process group (so its git children
    can be waited for). It is forked from a fork server that imported the package once
    (tests/forkrun.py): the interpreter's start-up is not what a crash or a kill is about."""
    return forkrun.start(cwd, *args, env=_env(env))


def _group_alive(pgid: int) -> bool:
    """Is any (non-zombie) process of this process group still running? Orphaned `git` children
    of a killed command finish on their own; nothing may be checked before they do."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in "ZX":
            return True
    return False


def settle_group(proc: subprocess.Popen, git_dir: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while _group_alive(proc.pid):
        assert time.monotonic() < deadline, "the killed command's git children never finished"
        time.sleep(0.01)
    while (git_dir / "index.lock").exists():
        if _killed_claims_lock(git_dir):  # it stays until the next command settles it
            FIGURES["index_locks_left_by_kills"] += 1
            break
        assert time.monotonic() < deadline, f"{git_dir / 'index.lock'} never went away"
        time.sleep(0.01)


def _killed_claims_lock(git_dir: Path) -> bool:
    """Is `index.lock` one a claim's commit killed midway holds (`gitplumbed`: a hard link of one
    of its copies)? It stays until the next command settles it."""
    try:
        lock = os.lstat(git_dir / "index.lock")
        return any(os.path.samestat(lock, os.lstat(p)) for p in (git_dir / gitplumbed.WORK).iterdir())
    except OSError:
        return False


def run(cwd: Path, *args: str, env: dict | None = None) -> tuple[int, str, str]:
    proc = spawn(cwd, *args, env=env)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def quiet(cwd: Path, *args: str) -> tuple[int, str, str]:
    """A command that races nothing (setting up, planting, finishing what a kill left): in this
    process, as conftest's `backlog` runs it (the same `main`, without a process's start)."""
    done = backlog(cwd, *args)
    return done.returncode, done.stdout, done.stderr


def crash(world: "World", *args: str, point: str, cwd: Path | None = None, env: dict | None = None) -> None:
    """Run a verb that must die by SIGKILL at `point`; wait for its git children."""
    proc = spawn(cwd or world.path, *args, env={"BACKLOG_CRASH_AT": point, **(env or {})})
    out, err = proc.communicate(timeout=120)
    settle_group(proc, world.git_dir_of(cwd or world.path))
    assert proc.returncode == -signal.SIGKILL, (
        f"`backlog {' '.join(args)}` with BACKLOG_CRASH_AT={point} did not crash "
        f"(exit {proc.returncode}): the point is not on its path\n{out}{err}"
    )
    assert "Traceback" not in err, err


# -- the janitor -----------------------------------------------------------------------------
def maintain(cwd: Path) -> dict:
    """The janitor after a kill. It runs in this process (the same `main` as the command, without
    an interpreter's start each time): what crosses processes here is the killed run and its
    orphaned git children, which are waited for before it starts."""
    done = backlog(cwd, "--json", "maintain")
    code, out, err = done.returncode, done.stdout, done.stderr
    assert "Traceback" not in err, err
    assert code == 0, f"maintain exit {code}: {out}{err}"
    return json.loads(out)


def fixes(report: dict) -> dict[str, int]:
    return {
        name: sum(1 for f in found if f["fixed"])
        for name, found in report["buckets"].items()
        if any(f["fixed"] for f in found)
    }


def repair_and_check(world: "World", label: str, cwd: Path | None = None, expect=None) -> dict[str, int]:
    """The first maintain after a kill (its fixes are counted), the invariants, then a second
    maintain that must find nothing to fix. Returns the first run's fixes by bucket."""
    cwd = cwd or world.path
    first = maintain(cwd)
    made = fixes(first)
    for bucket, n in made.items():
        if bucket == "LAYOUT":
            FIGURES["layout_repairs"] += n
        else:
            FIGURES["repairs"][bucket] = FIGURES["repairs"].get(bucket, 0) + n
            part = FIGURES[PART[0]].setdefault("repairs", {})
            part[bucket] = part.get(bucket, 0) + n
    problems = world.check(expect)
    git_dir = world.git_dir_of(cwd)
    if (git_dir / "index.lock").exists():  # every commit of the user's would fail
        problems.append("LOCK: git's index.lock is still there after maintain")
    if any((git_dir / gitplumbed.WORK).glob("*")):
        problems.append(f"LEFT: a claim's index copy is still in {git_dir / gitplumbed.WORK}")
    if problems:
        FIGURES["invariant_violations"] += len(problems)
        FIGURES["tasks_lost"] += sum(1 for p in problems if p.startswith("LOST"))
        write_figures()
        raise AssertionError(
            f"{label}: invariants broken after maintain:\n  "
            + "\n  ".join(problems)
            + f"\nfirst maintain: {json.dumps(first['buckets'])}"
        )
    second = maintain(cwd)
    again = {b: [f for f in second["buckets"][b]] for b in REPAIR_BUCKETS if second["buckets"][b]}
    assert not again and not fixes(second), f"{label}: a second maintain still found work: {second['buckets']}"
    return made


# -- task files --------------------------------------------------------------------------------
def ts(offset: float = 0) -> str:
    return (datetime.now(timezone.utc) + timedelta(seconds=offset)).strftime("%Y-%m-%dT%H:%M:%SZ")


def spec(slug: str, n: int, timeout: str | None = None) -> bytes:
    """A task as `backlog add` writes it (varied: frontmatter or not, a body, CRLF line ends)."""
    nl = "\r\n" if n % 5 == 4 else "\n"
    meta = []
    if timeout:
        meta.append(f"timeout: {timeout}")
    if n % 3 == 1:
        meta.append(f"priority: {n % 7 + 1}")
    text = ("---" + nl + nl.join(meta) + nl + "---" + nl + nl) if meta else ""
    text += f"# {slug.replace('-', ' ')}{nl}"
    if n % 2:
        text += f"{nl}Problem, decisions, acceptance: case {n}.  {nl}"
    text += f"{nl}---{nl}{nl}"
    return text.encode()


def nl_of(data: bytes) -> str:
    return "\r\n" if b"\r\n" in data.split(b"\n", 1)[0] + b"\n" else "\n"


def claim_line(offset: float = 0, branch: str = BRANCH) -> str:
    return f"- {ts(offset)} advanced to=doing claimer=tester branch={branch}"


def last_transition(lines: list[str]):
    for line in reversed(lines):
        entry = parse_log_line(line)
        if entry is not None and entry.kind != "progress":
            return entry
    return None


# -- a worktree and its invariants -------------------------------------------------------------
@functools.lru_cache(maxsize=64)
def _git_dir(cwd: Path) -> Path:
    """A worktree's git dir (it never moves: asked once per worktree)."""
    return Path(git(cwd, "rev-parse", "--path-format=absolute", "--git-dir").strip())


@dataclass
class World:
    path: Path
    originals: dict[str, bytes] = field(default_factory=dict)  # every task ever created here
    others: set[str] = field(default_factory=set)  # tasks another worktree of the clone owns
    # every settlement happened on maildir-shared, so each done/ and failed/ task has its ledger
    # entry; after a migration from maildir-git the tasks settled before it have none
    ledger_complete: bool = True

    @functools.cached_property
    def common(self) -> Path:
        return Path(git(self.path, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())

    def git_dir_of(self, cwd: Path) -> Path:
        return _git_dir(cwd)

    @property
    def backend(self) -> str:
        text = (self.path / "backlog/AGENTS.md").read_text()
        return (
            "maildir-shared" if "maildir-shared" in text.split("## Backend", 1)[1].split("##", 1)[0] else "maildir-git"
        )

    def pile_dir(self, pile: str, backend: str | None = None) -> Path:
        shared = (backend or self.backend) == "maildir-shared" and pile in IN_FLIGHT
        return (self.common / "backlog" / pile) if shared else (self.path / "backlog" / pile)

    def scan(self) -> tuple[dict[str, list[tuple[str, bytes]]], list[str], set[Path]]:
        """slug -> [(pile, bytes)], layout problems, temporary files seen."""
        backend = self.backend
        common = self.common
        found: dict[str, list[tuple[str, bytes]]] = {}
        problems: list[str] = []
        tmp: set[Path] = set()
        for pile in ALL_PILES:
            directory = (
                (common / "backlog" / pile)
                if backend == "maildir-shared" and pile in IN_FLIGHT
                else self.path / "backlog" / pile
            )
            try:
                names = sorted(os.listdir(directory))
            except FileNotFoundError:
                problems.append(f"LAYOUT: {directory} missing")
                continue
            for name in names:
                path = directory / name
                if name.startswith(".tmp-"):
                    tmp.add(path)
                    continue
                if name == ".gitkeep":
                    continue
                if not name.endswith(".md") or not path.is_file() or path.is_symlink():
                    problems.append(f"STRAY: {path}")
                    continue
                found.setdefault(name[:-3], []).append((pile, path.read_bytes()))
        for pile in IN_FLIGHT:
            link = self.path / "backlog" / pile
            if backend == "maildir-shared":
                if not link.is_symlink() or os.readlink(link) != str(common / "backlog" / pile):
                    problems.append(f"LAYOUT: {link} is not the symlink to the shared pile")
            else:
                if link.is_symlink() or not link.is_dir():
                    problems.append(f"LAYOUT: {link} is not a directory (maildir-git)")
                leftover = sorted((common / "backlog" / pile).glob("*.md"))
                if leftover:
                    problems.append(f"LEFTOVER: maildir-git, yet the shared root still holds {leftover}")
        return found, problems, tmp

    def check(self, expect=None) -> list[str]:
        """Every invariant; returns one line per violation (LOST… lines count as tasks lost)."""
        found, problems, tmp = self.scan()
        TMP_SEEN.update(tmp)
        FIGURES["tmp_files_seen_after_maintain"] = len(TMP_SEEN)
        # a killed writer's `.tmp-*` file is removed by maintain at once (its flock died with it)
        problems += [f"TEMPORARY: {path} left by a dead writer survived maintain" for path in sorted(tmp)]
        backend = self.backend
        ledger_dir = self.common / "backlog" / ".ledger"
        for slug, original in sorted(self.originals.items()):
            places = found.get(slug, [])
            if not places:
                problems.append(f"LOST: {slug} is in no pile")
                continue
            if len(places) > 1:
                problems.append(f"DUPLICATED: {slug} is in {[p for p, _ in places]}")
            for pile, data in places:
                problems += self._check_file(slug, pile, data, original, backend, ledger_dir)
        for slug in sorted(set(found) - set(self.originals) - self.others):
            problems.append(f"UNKNOWN: {slug} in {[p for p, _ in found[slug]]} was never created")
        status = git(self.path, "status", "--porcelain", "--untracked-files=all", "--", "backlog", ".gitignore")
        # (a temporary file is reported above, not twice)
        status = [
            line for line in status.splitlines() if not (line.startswith("?? ") and (self.path / line[3:]) in tmp)
        ]
        if status:
            problems.append(f"UNCOMMITTED: {status!r}")
        if expect is not None:
            problems += expect(found)
        return problems

    def _check_file(self, slug, pile, data, original, backend, ledger_dir) -> list[str]:
        where = f"{pile}/{slug}"
        if not data.startswith(original):
            return [f"SPEC: {where} no longer starts with the bytes it was created with"]
        rest = data[len(original) :].decode("utf-8", "replace")
        if rest and not rest.endswith("\n"):
            return [f"TRUNCATED: {where} does not end with a newline: {rest[-40:]!r}"]
        lines = [line for line in rest.split("\n") if line.strip()]
        bad = [line for line in lines if parse_log_line(line) is None]
        if bad:
            return [f"LOG: {where} has lines that are not log lines: {bad}"]
        problems = []
        last = last_transition(lines)
        if last is None:
            ok = pile == "todo"
        elif last.kind == "advanced":
            ok = pile == last.get("to")
        elif last.kind == "rescued":
            ok = pile in IN_FLIGHT
        else:
            ok = pile == {"cancelled": "done", "failed": "failed", "retried": "todo"}[last.kind]
        if not ok:
            problems.append(f"PILE: {where}, yet its log ends with {last.kind if last else 'nothing'}")
        if backend == "maildir-shared":
            try:
                entry = (ledger_dir / slug).read_text().split()
            except FileNotFoundError:
                entry = None
            outcome = entry[1] if entry else None
            missing_ok = entry is None and not self.ledger_complete
            if pile == "done" and not missing_ok:
                want = "cancelled" if last is not None and last.kind == "cancelled" else "done"
                if outcome != want:
                    problems.append(f"LEDGER: {where}, ledger says {outcome}, not {want}")
            elif pile == "failed" and outcome != "failed" and not missing_ok:
                problems.append(f"LEDGER: {where}, ledger says {outcome}")
            elif pile in ("todo", *IN_FLIGHT) and entry is not None:
                # the entry must not block this copy (Settled.blocks): a retried line at or after it.
                # (A retry killed between its commit and the ledger's rewrite leaves `failed`
                # there, harmlessly: the copy's own retried line is newer; ledger.py.)
                when = entry[0]
                if not any(
                    (e := parse_log_line(line)) and e.kind == "retried" and ts_text(e.ts) >= when for line in lines
                ):
                    problems.append(f"LEDGER: {where} is blocked by its ledger entry {' '.join(entry)}")
        return problems


def ts_text(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def commit_all(path: Path, message: str) -> None:
    git(path, "add", "-A", "--", "backlog")
    # (one git call fewer than asking `status` first: a plant into the shared root commits nothing)
    done = subprocess.run(
        ["git", "commit", "-q", "-m", message, "--", "backlog"], cwd=path, capture_output=True, text=True
    )
    if done.returncode and "nothing" not in done.stdout + done.stderr:
        raise AssertionError(f"git commit failed: {done.stdout}{done.stderr}")


def make_repo(path: Path, backend: str) -> World:
    init_repo(path)
    code, out, err = quiet(path, "setup", f"--backend={backend}", "--pipeline", " ".join(PIPELINE))
    assert code == 0, err
    return World(path)


def fig_case(kind: str) -> None:
    FIGURES["part_a"]["kills"] += 1
    FIGURES["part_a"]["cases"][kind] = FIGURES["part_a"]["cases"].get(kind, 0) + 1


PARTS = RESULTS.parent / "faults.parts"
RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"solo-{os.getpid()}"  # one id for all workers of a run


def _summed(a, b):
    """Two processes' figures added up (numbers summed, dicts merged key by key)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: _summed(a[k], b[k]) if k in a and k in b else a.get(k, b.get(k)) for k in {*a, *b}}
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return a + b
    return a


def write_figures() -> dict:
    """Write this process's part, and RESULTS as the sum of every part of this run (so far)."""
    PARTS.mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    _replace(PARTS / f"{RUN}.{worker}.json", json.dumps(FIGURES))
    total: dict = {}
    for part in sorted(PARTS.glob("[!.]*.json")):
        if not part.name.startswith(f"{RUN}."):
            part.unlink(missing_ok=True)  # an earlier run's
            continue
        try:
            total = _summed(total, json.loads(part.read_text())) if total else json.loads(part.read_text())
        except (OSError, ValueError):
            continue  # another worker is writing it
    total["seed"] = SEED
    total["kills_total"] = total["part_a"]["kills"] + total["part_b"]["kills"]
    _replace(RESULTS, json.dumps(total, indent=2, sort_keys=True) + "\n")
    return total


def _replace(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


# == Part A: every crash point of every verb, on each backend ==================================
class Planter:
    """Writes tasks straight into piles, byte for byte as the verbs write them."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.n = 0

    def task(
        self,
        slug: str,
        pile: str,
        log: list[str],
        timeout: str | None = None,
        ledger: tuple[str, str] | None = None,
        world: World | None = None,
    ) -> bytes:
        world = world or self.world
        self.n += 1
        original = spec(slug, self.n, timeout)
        nl = nl_of(original)
        data = original + "".join(line + nl for line in log).encode()
        directory = world.pile_dir(pile)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"{slug}.md").write_bytes(data)
        world.originals[slug] = original
        if ledger:
            outcome, when = ledger
            led = world.common / "backlog" / ".ledger"
            led.mkdir(parents=True, exist_ok=True)
            (led / slug).write_text(f"{when} {outcome} branch={BRANCH} claimer=tester\n")
        return data


@dataclass
class Case:
    """A verb on one planted task: `setup(planter, slug)` returns (args, piles before, pile after)."""

    name: str
    setup: object
    points: dict  # backend -> crash points the verb reaches there
    cwd: str | None = None  # run in this worktree of the clone (the stale-copy cases)
    env: dict | None = None  # the verb's environment (the plumbed claim's threshold)


def _claim(p, s):
    p.task(s, "todo", [])
    return ["take", s], {"todo"}, "doing"


def _hop(p, s):
    p.task(s, "doing", [claim_line(-5)])
    return ["advance", s], {"doing"}, "reviewing"


def _complete(p, s):
    p.task(s, "reviewing", [claim_line(-9), f"- {ts(-5)} progress | halfway", f"- {ts(-4)} advanced to=reviewing"])
    return ["advance", s, "--pr", "https://example.invalid/pull/7"], {"reviewing"}, "done"


def _cancel(p, s):
    p.task(s, "doing", [claim_line(-5)])
    return ["cancel", s, "not needed\nany more"], {"doing"}, "done"


def _fail(p, s):
    p.task(s, "reviewing", [claim_line(-9), f"- {ts(-4)} advanced to=reviewing"])
    return ["fail", s, "broke the build"], {"reviewing"}, "failed"


def _retry(p, s):
    when = ts(-30)
    p.task(s, "failed", [claim_line(-60), f"- {when} failed | broke"], ledger=("failed", when))
    return ["retry", s, "try again"], {"failed"}, "todo"


def _rescue(p, s):
    p.task(s, "doing", [claim_line(-7200)], timeout="1h")
    return ["rescue", s], {"doing"}, "doing"


def _progress(p, s):
    p.task(s, "doing", [claim_line(-5)])
    return ["progress", "step one", "--slug", s], {"doing"}, "doing"


def _janitor_moves(p, s):  # bucket 1: the log says done, the file is still in flight
    p.task(s, "reviewing", [claim_line(-60), f"- {ts(-50)} advanced to=reviewing", f"- {ts(-30)} advanced to=done"])
    return ["maintain"], {"reviewing"}, "done"


def _janitor_times_out(p, s):  # bucket 2
    p.task(s, "doing", [claim_line(-7200)], timeout="1h")
    return ["maintain"], {"doing"}, "failed"


def _janitor_duplicate(p, s):  # bucket 3: a claim that crashed after writing its new copy
    original = p.task(s, "todo", [])
    nl = nl_of(original)
    claimed = original + (claim_line(-5) + nl).encode()

    def later():  # after the commit: in flight (shared root), or written but uncommitted (maildir-git)
        (p.world.pile_dir("doing") / f"{s}.md").write_bytes(claimed)

    return ["maintain"], {"todo", "doing"}, "doing", later


def _janitor_duplicate_hop(p, s):  # bucket 3 between two shared piles: a hop that crashed midway
    data = p.task(s, "doing", [claim_line(-9)])
    nl = nl_of(data)
    (p.world.pile_dir("reviewing") / f"{s}.md").write_bytes(data + f"- {ts(-5)} advanced to=reviewing{nl}".encode())
    return ["maintain"], {"doing", "reviewing"}, "reviewing"


SHARED_DONE = [
    "apply:terminal-line",
    "apply:settled",
    "apply:written",
    "git:staged",
    "apply:committed",
    "apply:shared-removed",
]
GIT_MOVE = ["apply:written", "apply:source-removed", "git:staged", "apply:committed"]
GIT_IN_PLACE = ["apply:written", "git:staged", "apply:committed"]
SHARED, GITBK = "maildir-shared", "maildir-git"

PLUMBED = ["git:plumbed-written", "git:plumbed-locked", "git:plumbed-moved"]  # (gitplumbed: at scale)
CASES = [
    Case("take", _claim, {SHARED: GIT_MOVE, GITBK: GIT_MOVE}),
    Case("take-plumbed", _claim, {SHARED: PLUMBED, GITBK: PLUMBED}, env={gitplumbed.FROM_VARIABLE: "0"}),
    Case("advance-done-plumbed", _complete, {SHARED: PLUMBED, GITBK: PLUMBED}, env={gitplumbed.FROM_VARIABLE: "0"}),
    Case("advance-hop", _hop, {SHARED: ["apply:written", "apply:shared-removed"], GITBK: GIT_MOVE}),
    Case("advance-done", _complete, {SHARED: SHARED_DONE, GITBK: GIT_MOVE}),
    Case("cancel", _cancel, {SHARED: SHARED_DONE, GITBK: GIT_MOVE}),
    Case("fail", _fail, {SHARED: SHARED_DONE, GITBK: GIT_MOVE}),
    Case("retry", _retry, {SHARED: GIT_MOVE, GITBK: GIT_MOVE}),
    Case("rescue", _rescue, {SHARED: ["apply:written"], GITBK: GIT_IN_PLACE}),
    Case("progress", _progress, {SHARED: ["apply:written"], GITBK: GIT_IN_PLACE}),
    Case("maintain-advanced", _janitor_moves, {SHARED: SHARED_DONE[1:], GITBK: GIT_MOVE}),
    Case("maintain-timed-out", _janitor_times_out, {SHARED: SHARED_DONE, GITBK: GIT_MOVE}),
    Case(
        "maintain-duplicate",
        _janitor_duplicate,
        {
            SHARED: ["maintain:dup-removed", "git:staged", "maintain:dup-committed"],
            GITBK: ["maintain:dup-removed", "git:staged", "maintain:dup-committed"],
        },
    ),
    Case("maintain-duplicate-hop", _janitor_duplicate_hop, {SHARED: ["maintain:dup-removed"]}),
]


# The stale-copy cases (maildir-shared): a task claimed on main, whose worktree `wb` (branched
# before the claim) still holds it in todo/, settles in `wb`: wb's stale copy is dropped first.
def _stale_setup(kind):
    def setup(p, s, wb: World):
        original = p.task(s, "todo", [], world=wb)
        nl = nl_of(original)
        timeout = kind == "maintain"
        if timeout:  # the janitor fails it: it must be past its budget (spec with timeout: 1h, claimed 2 h ago)
            original = spec(s, p.n, "1h")
            (wb.pile_dir("todo") / f"{s}.md").write_bytes(original)
            wb.originals[s] = original
        commit_all(wb.path, f"plant {s}")
        claim = claim_line(-7200 if timeout else -5)
        (p.world.pile_dir("doing") / f"{s}.md").write_bytes(original + (claim + nl).encode())
        args = {"cancel": ["cancel", s, "dropped", "--force"], "maintain": ["maintain"]}[kind]
        return args, {"doing"}, {"cancel": "done", "maintain": "failed"}[kind]

    return setup


STALE_CASES = [
    Case(
        "cancel-with-stale-copy",
        _stale_setup("cancel"),
        {
            SHARED: [
                "apply:terminal-line",
                "stale:removed",
                "git:staged",
                "stale:committed",
                "apply:settled",
                "apply:written",
                "apply:committed",
                "apply:shared-removed",
            ]
        },
        cwd="wb",
    ),
    Case(
        "maintain-timed-out-with-stale-copy",
        _stale_setup("maintain"),
        {
            SHARED: [
                "apply:terminal-line",
                "stale:removed",
                "git:staged",
                "stale:committed",
                "apply:settled",
                "apply:written",
                "apply:committed",
                "apply:shared-removed",
            ]
        },
        cwd="wb",
    ),
]


def expect_one(slug: str, before: set[str], after: str, before_bytes: bytes):
    """The verb either happened or did not: the task is in its old or new pile, and its
    content still starts with what it held before (a log only grows)."""

    def check(found):
        places = found.get(slug, [])
        problems = []
        for pile, data in places:
            if pile not in before | {after}:
                problems.append(f"EXPECT: {slug} ended in {pile}/, neither {sorted(before)} nor {after}")
            if not data.startswith(before_bytes):
                problems.append(f"EXPECT: {slug} lost bytes it held before the crash")
        return problems

    return check


@pytest.mark.parametrize("backend", [SHARED, GITBK])
def test_crash_points(tmp_path, backend):
    start = time.monotonic()
    PART[0] = "part_a"
    world = make_repo(tmp_path / "repo", backend)
    planter = Planter(world)
    runs = [(case, point) for case in CASES for point in case.points.get(backend, [])]
    wb = None
    if backend == SHARED:
        git(world.path, "worktree", "add", "-q", "-b", "wb", str(tmp_path / "wb"))
        wb = World(tmp_path / "wb")
        code, _out, err = quiet(wb.path, "where")  # its layout self-heal makes the symlinks
        assert code == 0, err
        runs += [(case, point) for case in STALE_CASES for point in case.points[backend]]
    for i, (case, point) in enumerate(runs):
        slug = f"{case.name}-{i}"
        here = world
        if case.cwd == "wb":
            args, before, after = case.setup(planter, slug, wb)
            world.others.add(slug)
            here = wb
        else:
            made = case.setup(planter, slug)
            args, before, after = made[:3]
            commit_all(world.path, f"plant {slug}")
            if len(made) > 3:
                made[3]()
            if wb is not None:
                wb.others.add(slug)
        found, _problems, _tmp = here.scan()
        before_bytes = min((d for _p, d in found[slug]), key=len)
        crash(here, *args, point=point, env=case.env)
        fig_case(f"{case.name}@{backend}")
        repair_and_check(
            here, f"{case.name} killed at {point} ({backend})", expect=expect_one(slug, before, after, before_bytes)
        )
        if here is not world:  # the other worktree of the clone must be fine too
            repair_and_check(world, f"{case.name} killed at {point} ({backend}), seen from main")
    FIGURES["seconds"][f"part_a_{backend}"] = round(time.monotonic() - start, 1)
    write_figures()


# -- rename: every crash point, a queued and an in-flight task ---------------------------------------
RENAME_POINTS = ["rename:tombstone", "git:staged"]


@pytest.mark.parametrize("backend", [SHARED, GITBK])
def test_rename_crash_points(tmp_path, backend):
    """`rename` killed at each of its points, on a task in todo/ and one in flight: after the
    janitor the task is under exactly one of its names, with every byte: the janitor finishes the
    rename, or (the task still under its old name, blocked: SPEC §7.11, never claimable under both)
    names the `backlog rename` that finishes it, and running it does."""
    start = time.monotonic()
    PART[0] = "part_a"
    world = make_repo(tmp_path / "repo", backend)
    planter = Planter(world)
    runs = [(pile, point) for pile in ("todo", "doing") for point in RENAME_POINTS]
    for i, (pile, point) in enumerate(runs):
        slug, new = f"rename-{pile}-{i}", f"renamed-{pile}-{i}"
        planter.task(slug, pile, [] if pile == "todo" else [claim_line(-5)])
        commit_all(world.path, f"plant {slug}")
        if pile == "doing" and backend == SHARED and point == "git:staged":
            continue  # an in-flight task lives in the shared root: its rename commits nothing
        crash(world, "rename", slug, new, point=point)
        fig_case(f"rename-{pile}@{backend}")
        first = maintain(world.path)
        found, _problems, _tmp = world.scan()
        assert not (slug in found and new in found), f"{slug} under both names after {point}"
        if slug in found:  # not renamed yet, or (its tombstone written) blocked under the old name
            said = json.dumps(first["buckets"])
            if backend == SHARED:  # the ledger holds the tombstone: the janitor says how to finish
                assert f"backlog rename {slug} {new}" in said, f"maintain after rename killed at {point}: {said}"
            code, out, err = quiet(world.path, "rename", slug, new)
            assert code == 0, f"rename again after {point}: exit {code}\n{out}{err}"
        world.originals[new] = world.originals.pop(slug)
        repair_and_check(world, f"rename of a {pile} task killed at {point} ({backend})")
        found, _problems, _tmp = world.scan()
        assert new in found and slug not in found, f"after rename killed at {point}: {sorted(found)}"
    FIGURES["seconds"][f"part_a_rename_{backend}"] = round(time.monotonic() - start, 1)
    write_figures()


# -- migrate: both directions, every phase ---------------------------------------------------------
MIGRATE_POINTS = [
    "migrate-dirs",
    "migrate-after-copy",
    "migrate-edited",
    "migrate-before-commit",
    "git:staged",
    "migrate-committed",
    "migrate-shared-removed",
]


def migrate_template(path: Path, backend: str) -> World:
    world = make_repo(path, backend)
    p = Planter(world)
    p.task("queued-plan", "todo", [])
    p.task("claimed-plan", "doing", [claim_line(-30), f"- {ts(-20)} progress | started"])
    p.task("reviewed-plan", "reviewing", [claim_line(-30), f"- {ts(-10)} advanced to=reviewing"])
    p.task(
        "finished-plan",
        "done",
        [claim_line(-30), f"- {ts(-10)} advanced to=done"],
        ledger=("done", ts(-10)) if backend == SHARED else None,
    )
    p.task(
        "broken-plan",
        "failed",
        [claim_line(-30), f"- {ts(-10)} failed | no"],
        ledger=("failed", ts(-10)) if backend == SHARED else None,
    )
    commit_all(world.path, "plant the tasks")
    return world


def copy_world(template: World, dst: Path) -> World:
    shutil.copytree(template.path, dst, symlinks=True)
    world = World(dst, dict(template.originals), ledger_complete=template.backend == SHARED)
    for pile in IN_FLIGHT:  # the symlinks are absolute: point them at this copy's shared root
        link = dst / "backlog" / pile
        if link.is_symlink():
            link.unlink()
            link.symlink_to(world.common / "backlog" / pile)
    return world


def expect_unchanged(world: World):
    before = {slug: piles for slug, piles in world.scan()[0].items()}

    def check(found):
        return [
            f"EXPECT: {slug} was {[p for p, _ in before[slug]]}, is {[p for p, _ in found.get(slug, [])]}"
            for slug in before
            if found.get(slug) != before[slug]
        ]

    return check


@pytest.mark.parametrize("source,target", [(GITBK, SHARED), (SHARED, GITBK)])
def test_migrate_crash_points(tmp_path, source, target):
    start = time.monotonic()
    PART[0] = "part_a"
    template = migrate_template(tmp_path / "template", source)
    backends = {}
    for i, point in enumerate(MIGRATE_POINTS):
        world = copy_world(template, tmp_path / f"case-{i}")
        expect = expect_unchanged(world)
        crash(world, "migrate", "--to", target, point=point)
        fig_case(f"migrate-to-{target}")
        repair_and_check(world, f"migrate --to {target} killed at {point}", expect=expect)
        backends[point] = world.backend
    # a crash before the commit leaves the old backend, after it the new one
    assert backends == {
        p: source if i < MIGRATE_POINTS.index("migrate-committed") else target for i, p in enumerate(MIGRATE_POINTS)
    }, backends
    FIGURES["seconds"][f"part_a_migrate_to_{target}"] = round(time.monotonic() - start, 1)
    write_figures()


# == Part B: random kill timing, many iterations, one long-lived repository per backend ========
def pick(rng: random.Random, found: dict, counter: list[int]) -> tuple[list[str], str | None, set[str]]:
    """A verb applicable to a task's current pile: (args, slug, piles the task may end in)."""
    live = sorted(slug for slug, places in found.items() if places[0][0] != "done")
    slug = rng.choice(live)
    pile = found[slug][0][0]
    counter[0] += 1
    if pile == "todo":
        if rng.random() < 0.25:
            return ["take"], None, set()  # auto-pick: which task is the command's choice
        return ["take", slug], slug, {"todo", "doing"}
    if pile == "failed":
        return ["retry", slug, f"retry number {counter[0]}"], slug, {"failed", "todo"}
    nxt = PIPELINE[PIPELINE.index(pile) + 1]
    return rng.choices(
        [
            (
                ["advance", slug] + (["--pr", f"https://example.invalid/pull/{counter[0]}"] if nxt == "done" else []),
                slug,
                {pile, nxt},
            ),
            (["progress", f"note {counter[0]}", "--slug", slug], slug, {pile}),
            (["cancel", slug, f"cancelled in round {counter[0]}"], slug, {pile, "done"}),
            (["fail", slug, f"failed in round {counter[0]}"], slug, {pile, "failed"}),
        ],
        weights=[5, 2, 1, 2],
    )[0]


def expect_growth(before: dict, slug: str | None, allowed: set[str]):
    """Nothing a kill and a repair do removes a byte: every task's content after starts with its
    content before; the task the verb named ends in its old pile or the verb's target."""

    def check(found):
        problems = []
        for name, places in before.items():
            old = places[0][1]
            for pile, data in found.get(name, []):
                if not data.startswith(old):
                    problems.append(f"EXPECT: {name} ({places[0][0]}/ → {pile}/) lost bytes it held before the kill")
        if slug is not None and found.get(slug) and found[slug][0][0] not in allowed:
            problems.append(f"EXPECT: {slug} ended in {found[slug][0][0]}/, not in {sorted(allowed)}")
        return problems

    return check


def snapshot(world: World) -> tuple:
    found, _problems, _tmp = world.scan()
    head = git(world.path, "rev-parse", "HEAD").strip()
    status = git(world.path, "status", "--porcelain", "--untracked-files=all", "--", "backlog")
    return {s: [(p, d) for p, d in v] for s, v in found.items()}, head, status


def timed(world: World, *args: str) -> float:
    start = time.monotonic()
    code, out, err = run(world.path, *args)
    assert code == 0 and "Traceback" not in err, (args, out, err)
    return time.monotonic() - start


@pytest.mark.parametrize("backend", [SHARED, GITBK])
def test_random_kills(tmp_path, backend):
    start = time.monotonic()
    PART[0] = "part_b"
    rng = random.Random(f"{SEED}-{backend}")
    print(f"\nfaults: seed {SEED} (BACKLOG_FAULTS_SEED={SEED} repeats this run), {backend}")
    world = make_repo(tmp_path / "repo", backend)
    git_dir = world.git_dir_of(world.path)
    planter = Planter(world)
    made = [0]

    def add_task() -> None:
        made[0] += 1
        slug = f"job-{made[0]}"
        code, out, err = quiet(world.path, "add", slug, "followup", "--priority", str(rng.randint(1, 5)))
        assert code == 0, err
        world.originals[f"{slug}-followup"] = (world.path / f"backlog/todo/{slug}-followup.md").read_bytes()

    for i in range(8):
        planter.task(f"seed-{i}", "todo", [])
    commit_all(world.path, "plant the pool")
    # how long each verb typically runs: the median of its last runs that nobody killed (these
    # first ones, then every sixth iteration runs to its end); killed runs or runs that ended
    # before their kill would bias it
    runs: dict[str, list[float]] = {}

    def typical(verb: str) -> float:
        return statistics.median(runs[verb][-7:])

    counter = [0]
    for args in (
        ["take", "seed-0"],
        ["progress", "p", "--slug", "seed-0"],
        ["advance", "seed-0"],
        ["advance", "seed-0"],
        ["take", "seed-1"],
        ["fail", "seed-1", "f"],
        ["retry", "seed-1", "r"],
        ["take", "seed-2"],
        ["cancel", "seed-2", "c"],
        ["maintain"],
    ):
        runs.setdefault(args[0], []).append(timed(world, *args))
    effects = FIGURES["part_b"]["kill_effect"]
    by_verb = FIGURES["part_b"]["kills_by_verb"]
    kills = iterations = 0
    scale = [1.0]
    while kills < RANDOM_KILLS:
        iterations += 1
        assert iterations < RANDOM_KILLS * 4, "too few commands lived long enough to be killed"
        found = world.scan()[0]
        if sum(1 for places in found.values() if places[0][0] == "todo") < 3:
            add_task()
            found = world.scan()[0]
        args, slug, allowed = pick(rng, found, counter)
        before = snapshot(world)
        verb = args[0]
        # Most of a command's life is start-up (reading the repository; the interpreter and the
        # imports too when it runs as `python -m`): measured here, forked or not, a claim's first
        # write comes at ~85-90% of its run time and its commit is done at ~98%. So most delays are drawn from the last 15% of its typical run time, one
        # in five from all of it; the run-to-run jitter spreads them over the critical section.
        # The machine's load changes under the run: a run that ended before its kill shrinks the
        # window a little, a kill widens it back, so the share of runs killed stays near half
        # whatever the load (a fixed window once left too few kills on a quieter machine).
        high = scale[0] * typical(verb)
        low = 0 if rng.random() < 0.2 else 0.85 * high
        delay = rng.uniform(low, high) if iterations % 6 else 3600.0
        # half the commands commit through plumbing (as from 10,000 tasks on)
        plumbed = rng.random() < 0.5
        started = time.monotonic()
        proc = spawn(world.path, *args, env={gitplumbed.FROM_VARIABLE: "0"} if plumbed else None)
        alive = wait_until(proc, started + delay)
        if alive:
            proc.kill()  # the python process only: its git children run on and are waited for
        elif delay == 3600.0:  # not to be killed: how long it really takes (the machine's load changes)
            runs[verb].append(time.monotonic() - started)
        out, err = proc.communicate(timeout=120)
        settle_group(proc, git_dir)
        assert "Traceback" not in err, err
        if proc.returncode != -signal.SIGKILL:
            if delay != 3600.0:
                scale[0] = max(0.3, scale[0] * 0.9)
            assert proc.returncode in (0, 1, 3), (args, proc.returncode, out, err)
            FIGURES["part_b"]["timing_runs" if delay == 3600.0 else "finished_before_kill"] += 1
            problems = world.check(expect_growth(before[0], slug, allowed))
            assert not problems, f"{args} (not killed): {problems}"
            continue
        kills += 1
        scale[0] = min(1.0, scale[0] * 1.05)
        by_verb[verb] = by_verb.get(verb, 0) + 1
        label = f"`backlog {' '.join(args)}` killed after {delay * 1000:.0f} ms ({backend}, seed {SEED})"
        changed = snapshot(world) != before
        if changed and rng.random() < 0.3:  # the janitor itself killed mid-repair, then run again
            mid = maintain_killed(world, git_dir, rng.uniform(0.75 * typical("maintain"), typical("maintain")))
            if mid:
                kills += 1
                by_verb["maintain"] = by_verb.get("maintain", 0) + 1
        repaired = repair_and_check(world, label, expect=expect_growth(before[0], slug, allowed))
        kind = (
            "no change"
            if not changed
            else "changed, repaired by maintain"
            if any(b != "LAYOUT" for b in repaired)
            else "changed, nothing to repair"
        )
        effects[kind] = effects.get(kind, 0) + 1
    FIGURES["part_b"]["kills"] += kills
    FIGURES["part_b"]["iterations"] += iterations
    FIGURES["seconds"][f"part_b_{backend}"] = round(time.monotonic() - start, 1)
    write_figures()


def wait_until(proc: subprocess.Popen, deadline: float) -> bool:
    """Sleep until `deadline` or until the process ends; is it still running?"""
    while proc.poll() is None:
        left = deadline - time.monotonic()
        if left <= 0:
            return True
        time.sleep(min(left, 0.004))
    return False


def maintain_killed(world: World, git_dir: Path, delay: float) -> bool:
    proc = spawn(world.path, "maintain")
    alive = wait_until(proc, time.monotonic() + delay)
    if alive:
        proc.kill()
    _out, err = proc.communicate(timeout=120)
    settle_group(proc, git_dir)
    assert "Traceback" not in err, err
    return proc.returncode == -signal.SIGKILL


def test_maintain_leaves_a_running_migration_alone(tmp_path):
    """The journal of a migration that is still running (its lock held) is not recovered."""
    from maildir_backlog import storage

    template = migrate_template(tmp_path / "template", GITBK)
    world = copy_world(template, tmp_path / "case")
    expect = expect_unchanged(world)
    PART[0] = "part_a"
    crash(world, "migrate", "--to", SHARED, point="migrate-edited")
    fig_case("migrate-to-maildir-shared (left alone while locked)")
    dirty = git(world.path, "status", "--porcelain", "--", "backlog", ".gitignore")
    assert dirty.strip()
    with storage.file_lock(world.git_dir_of(world.path) / "backlog-migration.lock"):  # as a live migration
        report = maintain(world.path)
        assert [f["detail"] for f in report["buckets"]["LAYOUT"]][:1] == [
            "a migration is running right now: left in place"
        ]
        assert (world.git_dir_of(world.path) / "backlog-migration.json").exists()  # not recovered
        assert world.backend == SHARED  # the killed run's edit, still there
    repair_and_check(world, "after the migration's lock is released", expect=expect)


def test_figures():
    """Totals over the file's parts so far (every part, when the others are done: the last test of
    the file here; other workers may still be running theirs under xdist): nothing lost."""
    FIGURES["seconds"]["file"] = round(time.monotonic() - T0, 1)
    total = write_figures()
    a, b = total["part_a"]["kills"], total["part_b"]["kills"]
    print(
        f"\nfaults: {a} kills at named crash points + {b} at random moments = {a + b};"
        f" repairs {total['repairs']} (+{total['layout_repairs']} layout);"
        f" tasks lost {total['tasks_lost']}; invariant violations {total['invariant_violations']};"
        f" seed {SEED}; written to {RESULTS}"
    )
    assert total["tasks_lost"] == 0 and total["invariant_violations"] == 0
    full = len([k for k in total["seconds"] if k.startswith("part_")]) == 6
    if full and RANDOM_KILLS >= 60:
        assert a + b >= 200, f"only {a + b} kills"
