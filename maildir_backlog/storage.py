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
import functools
import os
import stat
import time
from collections.abc import Callable, Iterator
from operator import itemgetter
from pathlib import Path

from . import limits
from .errors import BacklogError, Busy

TMP_PREFIX = ".tmp-"
_counter = 0


class SimulatedCrash(BaseException):
    """Raised at a crash point by an in-process test (`simulate_crash_at`): the process "dies"
    there. Nothing rolls back (a `Transaction` lets it through untouched); only `finally`
    blocks run, which close file descriptors and so release flocks, as the kernel would."""


_simulated: set[str] = set()


def simulate_crash_at(*names: str) -> None:
    """Make the named crash points raise `SimulatedCrash` in this process (none: stop)."""
    _simulated.clear()
    _simulated.update(names)


def crash_point(name: str) -> None:
    """Fault injection: die by SIGKILL here when BACKLOG_CRASH_AT names this point.

    Used by the fault-injection harness (tests/test_faults.py) and the crash tests; costs one
    environment lookup otherwise. In-process tests use `simulate_crash_at` instead.
    """
    if os.environ.get("BACKLOG_CRASH_AT") == name:
        os.kill(os.getpid(), 9)
    if name in _simulated:
        raise SimulatedCrash(name)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _tmp_name(directory: Path, name: str) -> Path:
    """A name no other write can pick: time, pid, a counter and random bytes (as Maildir does).

    A pid alone is not enough: a file left by a killed writer and a later process that reuses
    its pid (containers reuse low pids) would otherwise collide."""
    global _counter
    _counter += 1
    unique = f"{time.time_ns():x}.{os.getpid()}.{_counter}.{os.urandom(4).hex()}"
    return directory / f"{TMP_PREFIX}{name}.{unique}"


def _open_tmp(directory: Path, name: str) -> tuple[Path, int]:
    """Create a fresh temporary file and hold an flock on it for as long as the fd is open.

    The lock is how `remove_dead_temporary` tells a write in progress from a dead writer's leftover
    (flocks die with their process). If a sweeper removed the name between our create and our
    lock, the file has no link any more: start again with a new name."""
    while True:
        tmp = _tmp_name(directory, name)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fstat(fd).st_nlink > 0:
            return tmp, fd
        os.close(fd)


def _write_tmp(directory: Path, name: str, data: bytes) -> tuple[Path, int]:
    """A fsynced temporary copy of `data`; the caller closes the returned (locked) fd once the
    temporary name is gone (renamed, or unlinked after a link)."""
    tmp, fd = _open_tmp(directory, name)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        tmp.unlink(missing_ok=True)
        os.close(fd)
        raise
    return tmp, fd


def write_file(path: Path, data: bytes) -> None:
    """Atomically create or replace `path` with `data`."""
    tmp, fd = _write_tmp(path.parent, path.name, data)
    try:
        os.rename(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        os.close(fd)
    _fsync_dir(path.parent)


def append_to(path: Path, data: bytes, create: bool = False) -> None:
    """Append `data` to `path` in one `write` (O_APPEND: whole against other appenders), never
    through a symlink; `create`: the file is made when missing (else FileNotFoundError). For a
    bookkeeping file whose readers take only whole lines (the parse cache's log, the notes of the
    plumbed commits), not for a task."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | (os.O_CREAT if create else 0)
    fd = os.open(path, flags, 0o666)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def create_file(path: Path, data: bytes) -> bool:
    """Atomically create `path` only if nothing is there (O_EXCL semantics via link()).

    Returns False when the name is taken; the file is then untouched.
    """
    tmp, fd = _write_tmp(path.parent, path.name, data)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
        os.close(fd)
    _fsync_dir(path.parent)
    return True


def replace_symlink(link: Path, target: str) -> None:
    """Atomically make `link` a symlink to `target` (create a temporary symlink, rename it over)."""
    tmp = _tmp_name(link.parent, link.name)
    os.symlink(target, tmp)
    try:
        os.replace(tmp, link)
    except BaseException:
        remove_file(tmp)
        raise


def is_temporary(name: str) -> bool:
    return name.startswith(TMP_PREFIX)


def dead_temporary(path: Path) -> bool:
    """Is `path` a temporary file whose writer is gone? True for a regular file nobody holds
    the flock of; a temporary symlink (the layout heal's) counts as dead once a minute old."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(info.st_mode):
        return time.time() - info.st_mtime > 60
    if not stat.S_ISREG(info.st_mode):
        return False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False  # a live writer holds it
    finally:
        os.close(fd)
    return True


def remove_dead_temporary(path: Path) -> bool:
    """Remove `path` if its writer is gone, under the flock (so a writer that just created it
    and is about to lock it sees the name gone and starts again). True when removed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        if dead_temporary(path):  # a symlink
            remove_file(path)
            return True
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return False  # a directory, a FIFO: no writer of ours made it
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        if os.fstat(fd).st_nlink == 0:
            return False
        remove_file(path)
        return True
    finally:
        os.close(fd)


def remove_file(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
        _fsync_dir(path.parent)


def read_task_bytes(path: Path, label: str | None = None, bound: int = limits.TASK_BYTES) -> bytes:
    """Read a task file without following a symlink; refuse anything but a regular file, and a
    file over `bound` bytes."""
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
        if info.st_size > bound:
            raise BacklogError(f"{label}: {limits.too_large(info.st_size, bound)}")
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
    """An exclusive flock on `path`, waited for up to `timeout` seconds (then Busy: Unavailable, exit 4).

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
                    raise Busy(f"{what or path.name} is busy: another backlog command holds its lock") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
        yield
    finally:
        os.close(fd)


class Transaction:
    """The one rollback mechanism of every mover: each step that changed something registers
    how to undo it; on failure the undos run newest first (each one best effort), so a verb
    that fails leaves no trace (SPEC §7.3).

        with storage.Transaction() as tx:
            tx.write(path, old, new)      # replace (or create, old=None) and remember the old bytes
            ...                           # an exception here puts `path` back
    """

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        if exc is not None and not isinstance(exc, SimulatedCrash):
            self.rollback()

    def on_undo(self, step: Callable[[], None]) -> None:
        self._undo.append(step)

    def rollback(self) -> None:
        while self._undo:
            step = self._undo.pop()
            with contextlib.suppress(Exception):
                step()

    # -- recorded steps -------------------------------------------------------------------------
    def write(self, path: Path, old: bytes | None, new: bytes | None) -> None:
        """Replace `path` (whose content was `old`, None when absent) with `new` (None: remove it)."""
        if new is None:
            remove_file(path)
        else:
            write_file(path, new)
        self.on_undo(lambda: write_file(path, old) if old is not None else remove_file(path))

    def create(self, path: Path, data: bytes) -> bool:
        """Exclusive create; False (nothing to undo) when the name is taken."""
        if not create_file(path, data):
            return False
        self.on_undo(lambda: remove_file(path))
        return True

    def remove(self, path: Path, old: bytes) -> None:
        remove_file(path)

        def put_back() -> None:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_file(path, old)

        self.on_undo(put_back)

    def symlink(self, path: Path, target: str) -> None:
        os.symlink(target, path)
        self.on_undo(lambda: remove_file(path))

    def unlink_symlink(self, path: Path) -> None:
        target = os.readlink(path)
        os.unlink(path)
        self.on_undo(lambda: os.symlink(target, path))

    def mkdirs(self, path: Path) -> None:
        """`mkdir -p`; the directories it made are removed again (when empty) on rollback."""
        missing: list[Path] = []
        while not os.path.lexists(path):
            missing.append(path)
            path = path.parent
        for made in reversed(missing):  # outermost first, so the deepest is undone first
            os.mkdir(made)
            self.on_undo(functools.partial(os.rmdir, made))

    def rmdir(self, path: Path) -> None:
        os.rmdir(path)
        self.on_undo(lambda: os.mkdir(path))


def entries(directory: Path) -> list[os.DirEntry[str]]:
    """The `*.md` entries of a pile directory (no dotfiles); [] when it does not exist.

    A pile that is a symlink is refused, never followed (SPEC §3): a committed `backlog/todo`
    leading to `/etc` must not make the tool list, read or move anything there. (The in-flight
    symlinks of a worktree are never listed: their shared piles are, by their real path.)"""
    return list(scan(directory))


def scan(directory: Path) -> Iterator[os.DirEntry[str]]:
    """`entries` one at a time (memory flat in the size of the pile)."""
    try:
        if stat.S_ISLNK(os.lstat(directory).st_mode):
            raise BacklogError(f"{directory}: a pile may not be a symlink; refusing to follow it")
        with os.scandir(directory) as it:
            yield from (e for e in it if e.name.endswith(".md") and not e.name.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return


def names(directory: Path) -> set[str]:
    """The names of `entries`, less `.md`, from one listing: no object per file (a count of a
    pile of 100,000 tasks takes a listing, not a loop over directory entries)."""
    return set(map(itemgetter(slice(None, -3)), md_names(directory)))  # C-level passes, no Python frame per name


def md_names(directory: Path) -> list[str]:
    """The names of `entries` (`.md` kept), in the directory's own order, from one listing."""
    try:
        if stat.S_ISLNK(os.lstat(directory).st_mode):
            raise BacklogError(f"{directory}: a pile may not be a symlink; refusing to follow it")
        listed = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [name for name in listed if name[-3:] == ".md" and name[0] != "."]  # (a name is never empty)
