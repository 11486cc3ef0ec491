"""The real command in a real process, without an interpreter's start for each one.

`python -m maildir_backlog` spends most of a short run starting the interpreter and importing
(~0.3 s of a ~0.4 s `take` here). The harnesses that race or kill many real processes (the fault
harness, the load harness, the drains) start them from a fork server instead (multiprocessing's
"forkserver"): one interpreter per pytest process, started once, that imported the package and
then runs nothing; each command is a fresh `fork()` of it that takes its own session and process
group (as `start_new_session`), sets its working directory, environment, argv and output files,
and calls the command's `main`, as `python -m maildir_backlog` does after its imports. So each
command is a process of its own: its own pid, open files and flocks, racing the others for real,
killed by a real SIGKILL (a crash point's, or the harness's), its git children orphaned as any
killed command's. The server has never run a command, so no state of an earlier run is inherited
(unlike the in-process runs of conftest's `backlog`).

`BACKLOG_TEST_EXEC=1` starts each one as `python -m maildir_backlog` instead (the same object).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from multiprocessing import forkserver
from multiprocessing.connection import wait
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXEC = os.environ.get("BACKLOG_TEST_EXEC") == "1"
_lock = threading.Lock()
_started: list[bool] = []


def _server() -> None:
    """Start this process's fork server once (it imports the package and this module)."""
    with _lock:
        if _started:
            return
        forkserver.set_forkserver_preload(["forkrun", "maildir_backlog.cli", "maildir_backlog.cliapp"])
        # the server imports from PYTHONPATH (Python 3.11 does not hand it the caller's sys.path):
        # this worktree's package first, then this directory (for this module)
        saved = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(Path(__file__).parent)] + ([saved] if saved else []))
        try:
            forkserver.ensure_running()
        finally:
            if saved is None:
                del os.environ["PYTHONPATH"]
            else:
                os.environ["PYTHONPATH"] = saved
        _started.append(True)


@dataclass
class _Command:
    """What the forked process becomes (multiprocessing's fork server calls `_bootstrap`)."""

    cwd: str
    argv: list[str]
    env: dict
    out: str
    err: str

    def _bootstrap(self, parent_sentinel: int) -> int:
        code = 1
        try:
            os.setsid()
            for fd, path, flags in (
                (0, os.devnull, os.O_RDONLY),
                (1, self.out, os.O_WRONLY),
                (2, self.err, os.O_WRONLY),
            ):
                opened = os.open(path, flags)
                os.dup2(opened, fd)
                os.close(opened)
            sys.stdin = open(0, encoding="utf-8", closefd=False)
            sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
            sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
            os.environ.clear()
            os.environ.update(self.env)
            os.chdir(self.cwd)
            sys.argv = list(self.argv)
            from maildir_backlog import cli

            assert cli.__file__.startswith(str(ROOT) + os.sep), cli.__file__  # this worktree's package
            code = cli.main(list(self.argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(code & 0xFF)


class Proc:
    """The face of `subprocess.Popen` the harnesses use: pid, poll, wait, kill, communicate, returncode."""

    def __init__(self, cwd: Path, args: tuple[str, ...], env: dict) -> None:
        self.args = [sys.executable, "-m", "maildir_backlog", *args]
        self.returncode: int | None = None
        self._dir = Path(tempfile.mkdtemp(prefix="forkrun-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
        self._out, self._err = self._dir / "out", self._dir / "err"
        self._out.touch()
        self._err.touch()
        _server()
        command = _Command(str(cwd), ["backlog", *args], dict(env), str(self._out), str(self._err))
        self._sentinel, w = forkserver.connect_to_new_process([])
        with open(w, "wb", closefd=True) as f:
            pickle.dump({}, f)  # the preparation data: nothing of this process (its __main__, sys.path) is wanted
            pickle.dump(command, f)
        self.pid = forkserver.read_signed(self._sentinel)

    def poll(self) -> int | None:
        if self.returncode is None and wait([self._sentinel], 0):
            try:
                self.returncode = forkserver.read_signed(self._sentinel)
            except (OSError, EOFError):  # the server itself died
                self.returncode = 255
            os.close(self._sentinel)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            wait([self._sentinel], timeout)
        if self.poll() is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode  # type: ignore[return-value]

    def kill(self) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        out = self._out.read_bytes().decode("utf-8", "replace")
        err = self._err.read_bytes().decode("utf-8", "replace")
        shutil.rmtree(self._dir, ignore_errors=True)
        return out, err


def ready() -> None:
    """Start the fork server now (before threads that run in-process commands, which swap
    os.environ while they run, and the server takes its environment from it)."""
    if not EXEC:
        _server()


def start(cwd: Path, *args: str, env: dict | None = None):
    """`backlog ARGS...` in `cwd`, as a new process in its own session; `env` is its whole environment."""
    env = dict(os.environ if env is None else env)
    if EXEC:
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        return subprocess.Popen(
            [sys.executable, "-m", "maildir_backlog", *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
    return Proc(cwd, args, env)


def run(cwd: Path, *args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """`backlog ARGS...` to its end (see `start`); a CompletedProcess (text)."""
    proc = start(cwd, *args, env=env)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
