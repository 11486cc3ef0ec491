"""Long work says how far it got, on a terminal only (issue 30): `maintain`, `migrate` and the
history backfill draw plumbum's progress bar on stderr once they have run `SHOW_AFTER` seconds;
piped, `--json`, the API and quick calls stay silent, and the answer on stdout is the same."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from datetime import timedelta

from conftest import ROOT
from freezegun import freeze_time

from maildir_backlog import ticker


def run_on_a_terminal(cwd, *args, after="0"):
    """The real command in a real process whose stderr is a pseudo-terminal: (exit code, stdout,
    what the terminal showed)."""
    master, slave = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(ROOT), BACKLOG_PROGRESS_AFTER=after)
    proc = subprocess.run(
        [sys.executable, "-m", "maildir_backlog", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=slave, env=env
    )
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the other end closed: all of it was read
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    return proc.returncode, proc.stdout.decode(), shown.decode(errors="replace")


def test_maintain_on_a_terminal_shows_its_progress_on_stderr(shared):
    for n in range(5):
        shared.ok("add", f"task-{n}")
    code, out, shown = run_on_a_terminal(shared.path, "maintain")
    assert code == 0 and out == shared.ok("maintain")
    assert "maintain: " in shown and "100% complete" in shown
    assert "complete" not in out


def test_migrate_on_a_terminal_shows_its_writing(gitbk):
    for n in range(5):
        gitbk.ok("add", f"task-{n}")
    code, out, shown = run_on_a_terminal(gitbk.path, "migrate", "--to", "maildir-shared")
    assert code == 0, shown
    assert "writing: " in shown and "100% complete" in shown and "complete" not in out


def test_a_quick_call_on_a_terminal_shows_nothing(shared):
    """The default: nothing is drawn before two seconds of work."""
    shared.ok("add", "task")
    code, _out, shown = run_on_a_terminal(shared.path, "maintain", after="2")
    assert code == 0 and "complete" not in shown


def test_piped_stderr_never_shows_progress(shared):
    shared.ok("add", "task")
    env = dict(os.environ, PYTHONPATH=str(ROOT), BACKLOG_PROGRESS_AFTER="0")
    proc = subprocess.run(
        [sys.executable, "-m", "maildir_backlog", "maintain"], cwd=shared.path, capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0 and "complete" not in proc.stderr and "\x1b" not in proc.stderr


class Shown:
    """A display that keeps what it was asked to show (the face's side of `ticker`)."""

    def __init__(self, label, total):
        self.label, self.total, self.updates, self.closed = label, total, [], False

    def update(self, done):
        self.updates.append(done)

    def close(self):
        self.closed = True


def test_a_ticker_appears_only_after_two_seconds_of_work(monkeypatch):
    monkeypatch.delenv("BACKLOG_PROGRESS_AFTER", raising=False)
    made: list[Shown] = []

    def make(label, total):
        made.append(Shown(label, total))
        return made[-1]

    with freeze_time("2026-12-03 10:00:00") as frozen, ticker.telling(make):
        with ticker.over("counting", 10) as tick:
            for _ in range(3):
                tick()
                frozen.tick(timedelta(seconds=0.5))
            assert made == []  # 1.5 s: still quiet
            frozen.tick(timedelta(seconds=1))
            tick()
            assert [(m.label, m.total, m.updates) for m in made] == [("counting", 10, [4])]
            tick()  # within the redraw interval: not drawn again
            frozen.tick(timedelta(seconds=1))
            tick(5)
        assert made[0].updates == [4, 10] and made[0].closed
    with ticker.over("nobody asked", 10) as tick:  # no display installed: counting only
        tick()
    assert len(made) == 1
