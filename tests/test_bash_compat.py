"""Backlogs written by the older bash tool keep working (SPEC §2, *Reading what others wrote*).

The task files of `tests/fixtures/bash/` (the bash tool's exact shapes: no frontmatter, one divider
per advance, spaced claimers, multi-line notes) are put into a real repository's piles as that
tool left them (committed where the backend tracks the pile), then the real command reads and
extends them: the claim is the bash tool's, and every byte it wrote stays as it was.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from conftest import Repo, common_dir

from maildir_backlog.clock import format_ts, now_utc, parse_ts

BASH = Path(__file__).parent / "fixtures" / "bash"
TS_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")
DIVIDER_RE = re.compile(rb"^---\r?$", re.MULTILINE)


ROOT_VM = {"BACKLOG_CLAIMER": "root@vm"}  # the claimer of record of most fixtures, on branch main
AUSTIN = {"BACKLOG_CLAIMER": "conductor:austin v3"}  # spaced-claimer-plan's, as the bash tool wrote it


def recent(data: bytes) -> bytes:
    """The fixture with its timestamps moved so that the latest is an hour ago (no claim times out);
    an invalid timestamp (an unreadable line's) is left as it is."""
    text = data.decode()
    stamps = []
    for found in TS_RE.findall(text):
        try:
            stamps.append(parse_ts(found))
        except Exception:
            continue
    shift = now_utc() - timedelta(hours=1) - max(stamps) if stamps else timedelta(0)

    def moved(m: re.Match[str]) -> str:
        try:
            return format_ts(parse_ts(m.group(0)) + shift)
        except Exception:
            return m.group(0)

    return TS_RE.sub(moved, text).encode()


def pile_dir(repo: Repo, pile: str) -> Path:
    """Where the bash tool kept a pile: maildir-shared's in-flight piles live in the common dir."""
    shared = common_dir(repo.path) / "backlog" / pile
    return shared if shared.is_dir() else repo.path / "backlog" / pile


def place(repo: Repo, pile: str, name: str) -> bytes:
    """Put a fixture into a pile as the bash tool left it (committed when the pile is tracked)."""
    data = recent(BASH.joinpath(name).read_bytes())
    where = pile_dir(repo, pile)
    where.mkdir(parents=True, exist_ok=True)
    (where / name).write_bytes(data)
    if where.is_relative_to(repo.path / "backlog"):
        repo.git("add", str(where / name))
        repo.git("commit", "-q", "-m", f"bash tool: {name} in {pile}")
    return data


def file_in(repo: Repo, pile: str, name: str) -> bytes:
    return pile_dir(repo, pile).joinpath(name).read_bytes()


def dividers(data: bytes) -> int:
    return len(DIVIDER_RE.findall(data))


def added_lines(old: bytes, new: bytes) -> list[str]:
    """What a verb appended: `new` must keep every byte of `old`."""
    assert new.startswith(old), "a byte the bash tool wrote was changed"
    return new[len(old) :].decode().splitlines()


@pytest.fixture(params=["shared", "gitbk"])
def bashbk(request) -> Repo:
    """Each backend's repository, with the bash tool's files in its piles."""
    repo: Repo = request.getfixturevalue(request.param)
    return repo


def test_bash_files_read_and_extended(bashbk: Repo):
    repo = bashbk
    old = {
        name: place(repo, pile, name)
        for pile, name in [
            ("doing", "spaced-claimer-plan.md"),
            ("doing", "retaken-plan.md"),
            ("doing", "unreadable-plan.md"),
            ("doing", "multiline-note-plan.md"),
            ("done", "completed-plan.md"),
            ("done", "cancelled-plan.md"),
            ("todo", "fresh-plan.md"),
        ]
    }

    status = repo.ok("status")
    assert "doing/spaced-claimer-plan  conductor:austin-v3 @ main" in status
    assert "doing/retaken-plan  root@vm @ main" in status
    assert "doing/unreadable-plan  root@vm @ main" in status
    assert "doing/multiline-note-plan  root@vm @ main" in status
    assert "? @ ?" not in status and "STALE" not in status and "UNREADABLE" not in status
    flying = {item["slug"]: item for item in json.loads(repo.ok("status", "--json"))["in_flight"]}
    assert (flying["spaced-claimer-plan"]["claimer"], flying["spaced-claimer-plan"]["branch"]) == (
        "conductor:austin-v3",
        "main",
    )

    show = repo.ok("show", "spaced-claimer-plan")
    assert "claim: conductor:austin-v3 @ main since " in show
    shown = json.loads(repo.ok("show", "multiline-note-plan", "--json"))
    assert [e.get("text") for e in shown["log"]] == [
        None,
        "parser done; next: the writer (indented detail) second paragraph of the same note",
        "one-liner",
    ]
    shown = json.loads(repo.ok("show", "retaken-plan", "--json"))
    assert shown["claim"]["claimer"] == "root@vm" and len(shown["log"]) == 8
    shown = json.loads(repo.ok("show", "unreadable-plan", "--json"))
    assert [e["kind"] for e in shown["log"]] == ["advanced", "progress"]

    # progress: one line after the bash tool's log, no divider; only the holder (claimer and branch
    # of record) acts, so the notes are written as the bash tool's claimers
    repo.ok("progress", "--slug", "unreadable-plan", "new tool note", env=ROOT_VM)
    lines = added_lines(old["unreadable-plan.md"], file_in(repo, "doing", "unreadable-plan.md"))
    assert len(lines) == 1 and lines[0].endswith(" progress | new tool note")
    repo.ok("progress", "--slug", "spaced-claimer-plan", "still going", env=AUSTIN)  # its spaces read as `-`
    assert len(added_lines(old["spaced-claimer-plan.md"], file_in(repo, "doing", "spaced-claimer-plan.md"))) == 1

    # advance to done from the bash claim's branch: its holder acts, no `by=`, no divider
    repo.ok("advance", "multiline-note-plan", env=ROOT_VM)
    new = file_in(repo, "done", "multiline-note-plan.md")
    lines = added_lines(old["multiline-note-plan.md"], new)
    assert len(lines) == 1 and lines[0].endswith(" advanced to=done") and "by=" not in lines[0]
    assert dividers(new) == dividers(old["multiline-note-plan.md"])
    repo.ok("advance", "retaken-plan", env=ROOT_VM)
    lines = added_lines(old["retaken-plan.md"], file_in(repo, "done", "retaken-plan.md"))
    assert len(lines) == 1 and " advanced to=done" in lines[0]

    # claiming the bash tool's fresh task (a log that is just its divider) writes the claim right after it
    repo.ok("advance", "fresh-plan")
    new = file_in(repo, "doing", "fresh-plan.md")
    lines = added_lines(old["fresh-plan.md"], new)
    assert len(lines) == 1 and " advanced to=doing " in lines[0] and " claimer=tester branch=main" in lines[0]
    assert dividers(new) == dividers(old["fresh-plan.md"]) == 1

    # the finished ones, untouched, still read as the bash tool wrote them
    done = json.loads(repo.ok("show", "completed-plan", "--json"))
    assert done["claim"]["claimer"] == "alice@laptop" and done["log"][-1]["to"] == "done"
    assert file_in(repo, "done", "completed-plan.md") == old["completed-plan.md"]


PIPELINE_RE = re.compile(r"(## Pipeline\n\n)[^\n]*\n")


def test_bash_review_pile_one_log(bashbk: Repo):
    """The SPEC's shape: a claim, then a divider before the advance to `reviewing`, then a note."""
    repo = bashbk
    agents = repo / "backlog" / "AGENTS.md"
    text = agents.read_text()
    assert PIPELINE_RE.search(text)
    agents.write_text(PIPELINE_RE.sub(r"\g<1>`todo` → `doing` → `reviewing` → `done`\n", text, count=1))
    repo.git("add", "backlog/AGENTS.md")
    repo.git("commit", "-q", "-m", "pipeline with reviewing")
    repo.ok("status")  # lays out the new pile (maildir-shared: in the common dir)
    old = place(repo, "reviewing", "review-me-plan.md")

    status = repo.ok("status")
    assert "reviewing/review-me-plan  root@vm @ main" in status and "? @ ?" not in status
    assert "claim: root@vm @ main since " in repo.ok("show", "review-me-plan")

    repo.ok("progress", "a note from the new tool", env=ROOT_VM)  # found by the bash claim's claimer and branch
    mid = file_in(repo, "reviewing", "review-me-plan.md")
    assert len(added_lines(old, mid)) == 1 and dividers(mid) == dividers(old) == 2

    repo.ok("advance", "review-me-plan", env=ROOT_VM)
    new = file_in(repo, "done", "review-me-plan.md")
    lines = added_lines(old, new)
    assert len(lines) == 2 and lines[1].endswith(" advanced to=done") and dividers(new) == 2
    shown = json.loads(repo.ok("show", "review-me-plan", "--json"))
    assert [e["kind"] for e in shown["log"]] == ["advanced", "advanced", "progress", "progress", "advanced"]
    assert shown["claim"]["claimer"] == "root@vm"


def test_bash_crlf_file_extended_byte_exact(bashbk: Repo):
    repo = bashbk
    data = recent(BASH.joinpath("spaced-claimer-plan.md").read_bytes()).replace(b"\n", b"\r\n")
    where = pile_dir(repo, "doing")
    (where / "crlf-plan.md").write_bytes(data)
    if where.is_relative_to(repo.path / "backlog"):
        repo.git("add", str(where / "crlf-plan.md"))
        repo.git("commit", "-q", "-m", "bash tool: a CRLF file")
    assert "doing/crlf-plan  conductor:austin-v3 @ main" in repo.ok("status")
    repo.ok("progress", "--slug", "crlf-plan", "crlf note", env=AUSTIN)
    new = file_in(repo, "doing", "crlf-plan.md")
    assert new.startswith(data) and new[len(data) :].endswith(b" progress | crlf note\r\n")
    assert new.count(b"\n") == new.count(b"\r\n") and dividers(new) == dividers(data)
