"""File-level primitives: crash-safe writes, no-follow reads, per-task locks.

Writes follow the Maildir discipline: write a temporary file in the destination directory,
fsync it, then rename (replace) or link (exclusive create) it into place, and fsync the
directory. A move is "write the new copy, then delete the old one", so a move across
filesystems (shared root on disk, worktree on tmpfs) never passes through a state where the
file exists nowhere (SPEC §7.7).
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from pathlib import Path
from typing import Iterator

from .errors import BacklogError, Conflict

MAX_TASK_BYTES = 1024 * 1024
TMP_PREFIX = ".tmp-"
_counter = 0


def crash_point(name: str) -> None:
    """Fault injection: die by SIGKILL here when BACKLOG_CRASH_AT names this point.

    Used by the fault-injection harness (bench/faults.py) and the crash tests; costs one
    environment lookup otherwise.
    """
    if os.environ.get("BACKLOG_CRASH_AT") == name:
        os.kill(os.getpid(), 9)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _tmp_name(directory: Path, name: str) -> Path:
    global _counter
    _counter += 1
    return directory / f"{TMP_PREFIX}{name}.{os.getpid()}.{_counter}"


def _write_tmp(directory: Path, name: str, data: bytes) -> Path:
    tmp = _tmp_name(directory, name)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return tmp


def write_file(path: Path, data: bytes) -> None:
    """Atomically create or replace `path` with `data`."""
    tmp = _write_tmp(path.parent, path.name, data)
    try:
        os.rename(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def create_file(path: Path, data: bytes) -> bool:
    """Atomically create `path` only if nothing is there (O_EXCL semantics via link()).

    Returns False when the name is taken; the file is then untouched.
    """
    tmp = _write_tmp(path.parent, path.name, data)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_dir(path.parent)
    return True


def remove_file(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
        _fsync_dir(path.parent)


def read_task_bytes(path: Path, label: str | None = None) -> bytes:
    """Read a task file without following a symlink; refuse anything but a regular file."""
    label = label or str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BacklogError(f"{label}: is a symlink; task files must be regular files") from None
        if exc.errno == errno.EISDIR:
            raise BacklogError(f"{label}: is a directory, not a task file") from None
        raise BacklogError(f"{label}: cannot read: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise BacklogError(f"{label}: is a directory, not a task file")
        if not stat.S_ISREG(info.st_mode):
            raise BacklogError(f"{label}: is not a regular file")
        if info.st_size > MAX_TASK_BYTES:
            raise BacklogError(
                f"{label}: too large for a task file ({info.st_size / 1048576:.1f} MiB > 1 MiB)"
            )
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def ensure_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # one clear line, naming the path in the way (root ignores permission bits, not this)
        blocker = next((p for p in (path, *path.parents) if os.path.lexists(p) and not p.is_dir()), None)
        if blocker is not None:
            needed = "" if blocker == path else f" (needed for {path})"
            raise BacklogError(
                f"{blocker} is not a directory{needed}: a file or a dangling symlink is in its place; move it aside"
            ) from None
        raise BacklogError(f"cannot create directory {path}: {exc.strerror}") from None


@contextlib.contextmanager
def file_lock(path: Path, timeout: float = 30.0, what: str | None = None) -> Iterator[None]:
    """An exclusive flock on `path`, waited for up to `timeout` seconds (then Conflict, exit 3).

    flock locks die with their process, so a crashed holder never leaves a stale lock.
    """
    ensure_dir(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        deadline = time.monotonic() + timeout
        delay = 0.002
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise Conflict(f"{what or path.name} is busy: another backlog command holds its lock") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
        yield
    finally:
        os.close(fd)


def entries(directory: Path) -> list[os.DirEntry]:
    """The `*.md` entries of a pile directory (no dotfiles); [] when it does not exist."""
    try:
        with os.scandir(directory) as it:
            return [e for e in it if e.name.endswith(".md") and not e.name.startswith(".")]
    except (FileNotFoundError, NotADirectoryError):
        return []
