"""storage.py: temporary names that never collide, the one Transaction, dead writers' leftovers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from maildir_backlog import storage


def test_a_dead_writers_temp_file_with_this_pid_does_not_block_a_write(tmp_path):
    """A killed writer with the same pid (containers reuse low pids) left `<name>.<pid>.<n>`:
    the old names (pid and a counter from 1) collided with it and the write failed."""
    for n in range(1, 200):
        (tmp_path / f"{storage.TMP_PREFIX}x.md.{os.getpid()}.{n}").write_bytes(b"left by a dead writer")
    storage.write_file(tmp_path / "x.md", b"new")
    assert storage.create_file(tmp_path / "y.md", b"other")
    assert (tmp_path / "x.md").read_bytes() == b"new" and (tmp_path / "y.md").read_bytes() == b"other"


def test_temporary_names_are_unique_across_processes(tmp_path):
    names = {storage._tmp_name(tmp_path, "x.md").name for _ in range(1000)}
    assert len(names) == 1000


HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


def test_dead_temporary_tells_a_live_writer_from_a_dead_one(tmp_path):
    dead = tmp_path / f"{storage.TMP_PREFIX}a.md.1.1.1.ab"
    live = tmp_path / f"{storage.TMP_PREFIX}b.md.2.2.2.cd"
    dead.write_bytes(b"x")
    live.write_bytes(b"y")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(live)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        assert storage.dead_temporary(dead) and not storage.dead_temporary(live)
        assert storage.remove_dead_temporary(dead) and not dead.exists()
        assert not storage.remove_dead_temporary(live) and live.exists()
    finally:
        holder.communicate(b"")
    assert storage.remove_dead_temporary(live) and not live.exists()  # its writer is gone now


def test_transaction_rolls_back_every_step_newest_first(tmp_path):
    keep = tmp_path / "keep.md"
    keep.write_bytes(b"old")
    gone = tmp_path / "gone.md"
    gone.write_bytes(b"was here")
    with pytest.raises(RuntimeError), storage.Transaction() as tx:
        tx.mkdirs(tmp_path / "a" / "b")
        assert tx.create(tmp_path / "a" / "b" / "new.md", b"new")
        tx.write(keep, b"old", b"changed")
        tx.remove(gone, b"was here")
        tx.symlink(tmp_path / "link", "keep.md")
        raise RuntimeError("the commit failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gone.md", "keep.md"]
    assert keep.read_bytes() == b"old" and gone.read_bytes() == b"was here"


def test_transaction_keeps_its_work_on_success(tmp_path):
    with storage.Transaction() as tx:
        tx.write(tmp_path / "x.md", None, b"x")
    assert (tmp_path / "x.md").read_bytes() == b"x"
    assert not [p for p in Path(tmp_path).iterdir() if storage.is_temporary(p.name)]
