"""How a git process is started and talked to: `exchange`, or `start` and later `answer` (the one
caller is `git`, which checks the arguments first; nothing else here knows git's commands).

`os.posix_spawnp` with three pipes, not `subprocess`, whose import (with `signal`'s enums,
`threading`, `locale` and `selectors`) cost every call ~3 ms, a tenth of the bash tool's whole
`progress`. What `subprocess` did for this tool is done here:
- git's three standard streams are pipes, each above the standard descriptors of this process
  (`_above_standard`: this process may have been started with one of its own closed);
- the child gets SIGPIPE (and SIGXFSZ) back at their default: Python ignores them, and an exec
  would pass that on;
- every descriptor this process opens is close-on-exec (PEP 446), so git inherits nothing else
  of ours (a lock's descriptor, say); one it was given inheritable by whoever started it is
  closed in the child (`_inherited`), as `subprocess` closes all: a `gc --detach` git leaves
  running must not hold a caller's pipe open;
- a working directory that is missing raises FileNotFoundError, as `subprocess` would; git starts
  there through `git -C DIR` (the spawn call has no working directory to give), which git defines
  as starting there;
- both outputs are read as they come, so no pipe fills and stalls git, and git is killed and
  reaped when a bound stops it or this process is interrupted.
"""

import contextlib
import errno
import os
import select
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

TIMED_OUT = 124  # the exit code of a git stopped at its timeout (as timeout(1) says)
TOO_MUCH = 125  # the exit code of a git stopped for printing more than its bound

_DEFAULT_SIGNALS = tuple(getattr(signal, name) for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(signal, name))
_CHUNK = 1 << 16


Started = tuple[int, list[int]]  # a git started: its pid, and this side of its stdin, stdout and stderr


def exchange(
    cwd: Path | str,
    args: Sequence[str],
    env: Mapping[str, str],
    stdin: bytes = b"",
    timeout: float | None = None,
    max_output: int | None = None,
) -> tuple[int, bytes, bytes]:
    """Run `git ARGS` (checked) in `cwd` with `env`, feed it `stdin`, read both its outputs as they
    come, and wait for it: (exit code, stdout, stderr), a negative code a signal's, as `subprocess`
    says. At `timeout` (seconds) or once stdout passes `max_output` bytes (stderr: 1 MiB), git is
    killed and the result is TIMED_OUT or TOO_MUCH with a `fatal:` line saying so."""
    return answer(start(cwd, args, env), args[0], stdin, timeout, max_output)


def start(cwd: Path | str, args: Sequence[str], env: Mapping[str, str]) -> Started:
    """Start `git ARGS` (checked) in `cwd` with `env`; `answer` reads what it says. A git started
    and never answered is left to finish on its own (what it prints is small, or it would block)."""
    where = os.fspath(cwd)
    if not os.path.isdir(where):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), where)
    return _spawn(where, args, env)


def answer(
    started: Started, name: str, stdin: bytes = b"", timeout: float | None = None, max_output: int | None = None
) -> tuple[int, bytes, bytes]:
    """Feed the git `started` (`start`; `name` its command) its `stdin`, read its outputs and wait
    for it, as `exchange` says."""
    deadline = None if timeout is None else time.monotonic() + timeout
    pid, fds = started
    out, err = bytearray(), bytearray()
    try:
        stopped = _pump(fds, stdin, {fds[1]: out, fds[2]: err}, deadline, max_output)
        if stopped == TIMED_OUT:
            return TIMED_OUT, b"", f"fatal: no answer within {timeout:g} s (git {name} stopped)\n".encode()
        if stopped == TOO_MUCH:
            return TOO_MUCH, b"", f"fatal: git {name} said more than {max_output:,} bytes (stopped)\n".encode()
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        pid = 0
        return code, bytes(out), bytes(err)
    finally:
        for fd in fds:
            if fd >= 0:
                os.close(fd)
        if pid:  # stopped at a bound, or this process was interrupted: git goes too
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


def _pump(
    fds: list[int], stdin: bytes, outputs: dict[int, bytearray], deadline: float | None, max_output: int | None
) -> int | None:
    """Feed `stdin` to git's (`fds[0]`, closed and set to -1 once all is sent) and read its two
    outputs into `outputs` until both end: None, or TIMED_OUT or TOO_MUCH when a bound stopped it."""
    poller = select.poll()
    for fd in outputs:
        poller.register(fd, select.POLLIN)
    if stdin:
        os.set_blocking(fds[0], False)
        poller.register(fds[0], select.POLLOUT)
    else:
        os.close(fds[0])
        fds[0] = -1
    waiting, sent, view = len(outputs) + bool(stdin), 0, memoryview(stdin)
    out, err = outputs[fds[1]], outputs[fds[2]]
    while waiting:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return TIMED_OUT
        for fd, _event in poller.poll(None if left is None else max(1, int(left * 1000))):
            if fd not in outputs:  # git's stdin, ready for more
                sent = _feed(fd, view, sent)
                if sent >= len(view):
                    poller.unregister(fd)
                    os.close(fd)
                    fds[0], waiting = -1, waiting - 1
            elif chunk := os.read(fd, _CHUNK):
                outputs[fd] += chunk
                if max_output is not None and (len(out) > max_output or len(err) > _CHUNK * 16):
                    return TOO_MUCH
            else:
                poller.unregister(fd)
                waiting -= 1
    return None


def _feed(fd: int, view: memoryview, sent: int) -> int:
    """Write what git's stdin can take of `view` from `sent` on: how much is sent now (all of it
    when git stopped reading: its answer says why)."""
    try:
        return sent + os.write(fd, view[sent : sent + _CHUNK])
    except BrokenPipeError:
        return len(view)


def _spawn(where: str, args: Sequence[str], env: Mapping[str, str]) -> Started:
    """Start `git -C WHERE ARGS`: its pid, and this side of its three pipes (stdin's write end,
    stdout's and stderr's read ends)."""
    pipes = [tuple(_above_standard(fd) for fd in os.pipe()) for _ in range(3)]
    theirs = (pipes[0][0], pipes[1][1], pipes[2][1])
    ours = [pipes[0][1], pipes[1][0], pipes[2][0]]
    try:
        pid = os.posix_spawnp(
            "git",
            ["git", "-C", where, *args],
            env,
            file_actions=[
                *((os.POSIX_SPAWN_DUP2, fd, n) for n, fd in enumerate(theirs)),
                *((os.POSIX_SPAWN_CLOSE, fd) for fd in _inherited()),
            ],
            setsigdef=_DEFAULT_SIGNALS,
        )
    except BaseException:
        for fd in ours:
            os.close(fd)
        raise
    finally:
        for fd in theirs:
            os.close(fd)
    return pid, ours


def _inherited() -> list[int]:
    """The descriptors above 2 a child would inherit: none, unless this process was started with
    some (its own are close-on-exec). Listed from /proc/self/fd (Linux) or /dev/fd (macOS)."""
    for listing in ("/proc/self/fd", "/dev/fd"):
        try:
            names = os.listdir(listing)
        except OSError:
            continue
        found = []
        for name in names:
            fd = int(name)
            with contextlib.suppress(OSError):  # (the listing's own descriptor, closed by now)
                if fd > 2 and os.get_inheritable(fd):
                    found.append(fd)
        return found
    return []


def _above_standard(fd: int) -> int:
    """`fd`, or a copy of it above 2 when it is 0, 1 or 2 (this process was started with one of its
    standard streams closed): a pipe given to git as a standard stream is then never one git loses."""
    low = []
    while fd <= 2:
        low.append(fd)
        fd = os.dup(fd)
    for each in low:
        os.close(each)
    return fd
