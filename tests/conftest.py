"""Fixtures: throwaway git repositories, worktrees, and the real `backlog` command.

Tests never rely on the machine's git config: identity and HOME are set here.
"""

from __future__ import annotations

import compileall
import contextlib
import fcntl
import io
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import forkrun
import pytest

ROOT = Path(__file__).resolve().parent.parent


def bare_path() -> str:
    """PYTHONPATH for an interpreter started without `site` (-S): this checkout and the site's
    packages, found by path. Without `site` nothing is imported before the command's own code
    (an editable install's finder, which a `.pth` file starts, imports `typing` and `pathlib`
    into every interpreter), as in a virtual environment a user installs the command into."""
    import site

    return os.pathsep.join([str(ROOT), *site.getsitepackages(), site.getusersitepackages()])


BACKENDS = ("maildir-shared", "maildir-git")
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Backlog Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Backlog Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "BACKLOG_CLAIMER": "tester",
}


def pytest_sessionstart(session):
    """Compile the package's bytecode once, as an installed package ships it. This machine sets
    PYTHONDONTWRITEBYTECODE, so in a fresh clone every `backlog` process a test starts would
    compile the whole package again (~0.1 s each: a whole suite in a fresh clone took 268–318 s
    against 210–230 s in a checkout that had its bytecode). Once, by the controller, not by each
    xdist worker."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        compileall.compile_dir(str(ROOT / "maildir_backlog"), quiet=1)


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (`-n 3 --dist loadgroup`), hand out the longest runs first (the fault
    harness and the `stress` runs, each in file order) and the fault harness's summary last:
    started last, a long run would leave one worker busy long after the other ran out of tests.
    A run without xdist keeps the plain file order."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return

    def order(item: pytest.Item) -> int:
        if item.name == "test_figures":
            return 2
        return 0 if item.get_closest_marker("faults") or item.get_closest_marker("stress") else 1

    items.sort(key=order)


@pytest.fixture(autouse=True)
def how_backlog_runs(request):
    """`@pytest.mark.subprocess` (or a module's pytestmark) runs `backlog()` as a real process."""
    IN_PROCESS[0] = request.node.get_closest_marker("subprocess") is None
    yield
    IN_PROCESS[0] = True


@pytest.fixture(autouse=True)
def git_env(monkeypatch, tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("GIT_DIR", raising=False)
    monkeypatch.delenv("GIT_WORK_TREE", raising=False)
    monkeypatch.delenv("GIT_INDEX_FILE", raising=False)
    for var in ("CONDUCTOR_WORKSPACE_NAME", "CMUX_WORKSPACE_ID", "BACKLOG_HARNESS"):
        monkeypatch.delenv(var, raising=False)
    for key, value in GIT_IDENTITY.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def settled_clock(monkeypatch):
    """The parse cache writes down every file it reads, however lately changed (`cache.RACY_NS`
    set to 0): a file changed in the last 3 s, by its mtime or its ctime, is otherwise read again
    at every call, and no test can set a ctime back. Sound on this machine's file systems, whose
    clocks are fine-grained (two writes never share a stamp); a test of that window itself keeps
    it."""
    from maildir_backlog import cache

    monkeypatch.setattr(cache, "RACY_NS", 0)


@contextlib.contextmanager
def set_aside(path: Path) -> Iterator[None]:
    """`path` absent for the block (a cache, to read an answer without it), then back as it was
    (absent, if it was): whatever the block wrote there is dropped."""
    kept = path.read_bytes() if path.exists() else None
    path.unlink(missing_ok=True)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
        if kept is not None:
            path.write_bytes(kept)


def holds_open(pid: int, path: Path) -> bool:
    """Does process `pid` have `path` open now (Linux's /proc)? A descriptor closed while this
    looks is not held: the listing and each link are read once, and one gone meanwhile is skipped."""
    target = os.path.realpath(path)
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                return True
        except OSError:
            continue
    return False


def git(cwd: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if check and proc.returncode:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout


# How `backlog()` runs the command. In-process (the default) calls the CLI's own `main` with this
# test's environment, working directory, stdin and output streams: the code path of
# `python -m maildir_backlog` minus the interpreter's start-up, which is most of a call's cost.
# A real process is used for a crash point (SIGKILL) and by `spawn` (several processes at once):
# each forked from the fork server (tests/forkrun.py: a process of its own, without the
# interpreter's start-up), and `python -m maildir_backlog` under `@pytest.mark.subprocess` (a new
# interpreter: the entry point itself, or a module path only a new process sees). Races and
# crashes always use real processes.
IN_PROCESS = [True]


def _run_in_process(cwd: Path, args: tuple[str, ...], env: dict, input: str | None) -> subprocess.CompletedProcess:
    from maildir_backlog import cli

    saved_env, saved_cwd, saved_streams = dict(os.environ), os.getcwd(), (sys.stdin, sys.stdout, sys.stderr)
    out, err = io.BytesIO(), io.BytesIO()
    streams = [io.TextIOWrapper(out, encoding="utf-8", write_through=True) for out in (out, err)]
    try:
        os.environ.clear()
        os.environ.update(env, PWD=str(cwd))
        os.chdir(cwd)
        sys.stdin = io.StringIO(input or "")
        sys.stdout, sys.stderr = streams
        code = cli.main(["backlog", *args])
    finally:
        for stream in streams:
            stream.flush()
            stream.detach()  # the buffers stay open to be read
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(
        ["backlog", *args], code, out.getvalue().decode("utf-8"), err.getvalue().decode("utf-8")
    )


def backlog(cwd: Path, *args: str, env: dict | None = None, input: str | None = None, timeout: float = 120):
    """Run the command (in-process or as a subprocess, see IN_PROCESS); returns CompletedProcess (text)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    if IN_PROCESS[0] and "BACKLOG_CRASH_AT" not in full_env:
        return _run_in_process(Path(cwd), args, full_env, input)
    if IN_PROCESS[0] and input is None:  # a crash point: a real process, forked (tests/forkrun.py)
        return forkrun.run(Path(cwd), *args, env=dict(full_env, PYTHONPATH=str(ROOT)), timeout=timeout)
    full_env["PYTHONPATH"] = str(ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "maildir_backlog", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=full_env,
        input=input,
        timeout=timeout,
    )


def spawn(cwd: Path, *args: str, env: dict | None = None):
    """Start the real command as a process of its own (for races: several at once), forked from
    the fork server (tests/forkrun.py); finish with communicate() (text)."""
    return forkrun.start(Path(cwd), *args, env=dict(os.environ, PYTHONPATH=str(ROOT), **(env or {})))


def ok(cwd: Path, *args: str, env: dict | None = None, input: str | None = None) -> str:
    """Run backlog and insist on exit 0; returns stdout."""
    proc = backlog(cwd, *args, env=env, input=input)
    assert proc.returncode == 0, f"backlog {' '.join(args)} -> {proc.returncode}: {proc.stderr}{proc.stdout}"
    assert "Traceback" not in proc.stderr
    return proc.stdout


def common_dir(path: Path) -> Path:
    return Path(git(path, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())


LOG_STAMP = re.compile(rb"^- (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) ", re.M)


@contextlib.contextmanager
def task_lock(worktree: Path, slug: str):
    """The task's flock (`<common dir>/backlog/.locks/<slug>.lock`), as the verbs take it."""
    path = common_dir(worktree) / "backlog" / ".locks" / f"{slug}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield path
    finally:
        os.close(fd)


def backdate(
    worktree: Path, slug: str, seconds: float = 3600, pile: str = "doing", commit: bool = True, missing_ok: bool = False
) -> Path | None:
    """Move every log-line stamp of an in-flight task `seconds` into the past, as if it had been
    claimed (and everything logged since had happened) that long ago: how a test with real
    `backlog` processes makes a claim outlive its budget without sleeping through it (the command
    reads the claim time from the log line, and the budget from the task or the line).

    Done under the task's lock with an atomic rename, so concurrent commands never see a torn
    file; in a tracked pile (maildir-git) the edit is committed (`commit=False` leaves that to the
    caller). Returns the task file, or None when it is gone and `missing_ok`."""
    path = worktree / "backlog" / pile / f"{slug}.md"

    def earlier(match: re.Match) -> bytes:
        when = datetime.strptime(match.group(1).decode(), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        return b"- " + (when - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ").encode() + b" "

    with task_lock(worktree, slug):
        try:
            real = path.resolve(strict=True)
            data = real.read_bytes()
        except FileNotFoundError:
            if missing_ok:
                return None
            raise
        new, count = LOG_STAMP.subn(earlier, data)
        assert count, f"{path} has no log line to backdate"
        tmp = real.parents[2] / f".backdate-{os.getpid()}-{real.name}"  # outside every pile
        tmp.write_bytes(new)
        os.replace(tmp, real)
    if commit and not path.parent.is_symlink():
        git(worktree, "commit", "-q", "-m", f"backdate {slug}", "--", str(path))
    return path


def snapshot(repo: "Repo") -> dict:
    """The worktree (without .git) and the shared root (without locks), symlinks as their
    targets, plus HEAD, the index and `git status`: equal snapshots mean nothing changed."""
    files: dict[str, object] = {}
    for base in (repo.path, common_dir(repo.path) / "backlog"):
        for path in sorted(base.rglob("*")) if base.exists() else []:
            if ".git" in path.relative_to(base).parts or ".locks" in path.parts or ".history" in path.parts:
                continue
            if path.is_symlink():
                files[str(path)] = ("link", os.readlink(path))
            elif path.is_file():
                files[str(path)] = path.read_bytes()
    return {
        "files": files,
        "head": git(repo.path, "rev-parse", "HEAD"),
        "index": git(repo.path, "ls-files", "-s"),
        "status": git(repo.path, "status", "--porcelain"),
    }


def init_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("# test repo\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "init")
    return path


def add_worktree(repo: Path, path: Path, branch: str) -> Path:
    git(repo, "worktree", "add", "-q", "-b", branch, str(path))
    return path


@dataclass
class Repo:
    path: Path

    def __truediv__(self, other: str) -> Path:
        return self.path / other

    def run(self, *args, **kwargs):
        return backlog(self.path, *args, **kwargs)

    def ok(self, *args, **kwargs) -> str:
        return ok(self.path, *args, **kwargs)

    def git(self, *args, **kwargs) -> str:
        return git(self.path, *args, **kwargs)

    def head_message(self) -> str:
        return git(self.path, "log", "-1", "--format=%s").strip()

    def worktree(self, name: str) -> "Repo":
        return Repo(add_worktree(self.path, self.path.parent / name, name))

    def context(self):
        from maildir_backlog.context import open_context

        return open_context(self.path)


def copy_repo(template: Path, dst: Path) -> Repo:
    """A copy of a prepared repository (no linked worktrees). The only absolute paths in one are
    the in-flight pile symlinks of maildir-shared (into `.git/backlog/`): re-pointed at the copy."""
    shutil.copytree(template, dst, symlinks=True)
    backlog_dir = dst / "backlog"
    for entry in backlog_dir.iterdir() if backlog_dir.is_dir() else ():
        if entry.is_symlink() and os.readlink(entry).startswith(str(template) + os.sep):
            target = str(dst) + os.readlink(entry)[len(str(template)) :]
            entry.unlink()
            entry.symlink_to(target)
    return Repo(dst)


@pytest.fixture(scope="session")
def repo_templates(tmp_path_factory):
    """Prepared repositories, each built once per session with the real commands; the fixtures
    below (and tests that need a prepared state) work on copies of them (`copy_repo`).

    `repo_templates(None)` is the plain repository (`git init`, one commit);
    `repo_templates("maildir-shared")` the same right after `backlog setup --backend=maildir-shared`;
    `repo_templates("maildir-git", ("add", "x"), ("take", "x-plan"))` that one after these
    `backlog` commands (each must exit 0). Templates have no linked worktrees.
    """
    built: dict = {}

    def get(backend: str | None, *steps: tuple[str, ...]) -> Path:
        key = (backend, steps)
        if key not in built:
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("HOME", str(tmp_path_factory.mktemp("home")))
                for var in (
                    "GIT_DIR",
                    "GIT_WORK_TREE",
                    "GIT_INDEX_FILE",
                    "CONDUCTOR_WORKSPACE_NAME",
                    "CMUX_WORKSPACE_ID",
                    "BACKLOG_HARNESS",
                ):
                    mp.delenv(var, raising=False)
                for name, value in GIT_IDENTITY.items():
                    mp.setenv(name, value)
                dst = tmp_path_factory.mktemp(f"template-{backend or 'plain'}") / "repo"
                if steps:
                    path = copy_repo(get(backend), dst).path
                    for step in steps:
                        ok(path, *step)
                else:
                    path = init_repo(dst)
                    if backend:
                        ok(path, "setup", f"--backend={backend}")
                assert git(path, "status", "--porcelain", "--untracked-files=all") == ""
            built[key] = path
        return built[key]

    return get


@pytest.fixture
def repo(tmp_path, repo_templates) -> Repo:
    """A git repository with one commit and no backlog."""
    return copy_repo(repo_templates(None), tmp_path / "repo")


@pytest.fixture
def shared(tmp_path, repo_templates) -> Repo:
    """A repository with a maildir-shared backlog (what `backlog setup --backend=maildir-shared`
    makes in `repo`)."""
    return copy_repo(repo_templates("maildir-shared"), tmp_path / "repo")


@pytest.fixture
def gitbk(tmp_path, repo_templates) -> Repo:
    """A repository with a maildir-git backlog."""
    return copy_repo(repo_templates("maildir-git"), tmp_path / "repo")


@pytest.fixture(params=BACKENDS)
def anybk(request, tmp_path, repo_templates) -> Repo:
    """A repository with each backend in turn."""
    return copy_repo(repo_templates(request.param), tmp_path / "repo")
