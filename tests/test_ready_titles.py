"""`ready` lists thousands of tasks with their titles: each title is kept in the parse cache with
the task's summary (`header.parsed`, read without parsing the task), so a warm `ready` opens no
task file. The quick reader must agree with `parse_task` wherever it answers; where it cannot be
sure it says so, and the task is parsed as before.
"""

from __future__ import annotations

import json
import os

import pytest
from conftest import backlog, init_repo
from hypothesis import given, settings
from hypothesis import strategies as st

from maildir_backlog import backend as backend_mod
from maildir_backlog import header
from maildir_backlog.errors import BacklogError
from maildir_backlog.task import Defaults, parse_task

LINES = st.sampled_from(
    [
        "---",
        "--- ",
        "----",
        "# Title",
        "# ",
        "#  spaced title  ",
        "## not a title",
        "#no space",
        "priority: 3",
        "dependencies: [a-plan]",
        "```",
        "~~~",
        "- 2026-01-01T00:00:00Z advanced to=doing claimer=x branch=main",
        "- 2026-01-01T00:00:00Z progress half way",
        "- garbage",
        "plain prose",
        "",
        "   ",
        "# Zoë's tâche",
    ]
)


@st.composite
def task_files(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(LINES, max_size=14))
    if draw(st.booleans()):
        lines = [
            "---",
            *draw(st.lists(st.sampled_from(["priority: 2", "timeout: 1h", "x: '# y'"]), max_size=2)),
            "---",
            *lines,
        ]
    ending = draw(st.sampled_from(["\n", "\r\n"]))
    text = ending.join(lines) + draw(st.sampled_from(["", ending]))
    if draw(st.booleans()):
        text = "\ufeff" + text
    return text.encode()


@settings(max_examples=400, deadline=None)
@given(task_files())
def test_the_cached_title_agrees_with_parse_task(data: bytes) -> None:
    quick = header.parsed("a-plan", data, Defaults().priority)
    try:
        task = parse_task("a-plan", "backlog/todo/a-plan.md", data)
    except BacklogError:
        assert quick is None  # invalid: the full parser says why
        return
    if quick is None:
        return  # not sure: the task is parsed
    assert quick == header.Parsed(header.Summary(task.priority, tuple(task.dependencies), None), task.title), data


@settings(max_examples=200, deadline=None)
@given(task_files())
def test_the_title_reader_agrees_with_parse_task_after_any_frontmatter(data: bytes) -> None:
    """`title_after` alone (what `parsed` uses), from the line after the frontmatter, line endings
    and a byte-order mark included."""
    try:
        task = parse_task("a-plan", "backlog/todo/a-plan.md", data)
    except BacklogError:
        return  # not a candidate
    text = data.decode().removeprefix("\ufeff")
    lines = text.split("\n")
    start = 0
    if lines[0].rstrip(" \t\r") == "---":
        close = next(
            j
            for j in range(1, len(lines))
            if set(lines[j].rstrip(" \t\r")) == {"-"} and len(lines[j].rstrip(" \t\r")) >= 3
        )
        start = sum(len(line) + 1 for line in lines[: close + 1])
    try:
        assert header.title_after(text, start) == task.title, data
    except LookupError:
        pass  # a divider first: the full parser decides


def test_the_title_reader_defers_where_a_divider_comes_first() -> None:
    assert header.parsed("a", b"---\npriority: 1\n---\n\n---\n# Title after a rule\n", 5) is None
    assert header.parsed("a", b"---\npriority: 1\n", 5) is None  # no closing line: parse_task's error decides
    got = header.parsed("a", b"---\npriority: 1\n---\n\n# The title\n\n---\n\n- 2026-01-01T00:00:00Z x\n", 5)
    assert got is not None and got.title == "The title"
    assert header.title_after("#  \n# \n#  x \n", 0) == "x"
    with pytest.raises(LookupError):
        header.title_after("prose\n---  \n# late\n", 0)


def test_a_warm_ready_opens_no_task_file_and_keeps_odd_titles(tmp_path, monkeypatch, settled_clock) -> None:
    """Titles come from the parse cache: after one call has cached every task, `ready` parses none
    (before, it read one file per candidate: 5 s at 100,000 tasks), and a title of any text comes
    back as written."""
    repo = init_repo(tmp_path / "r")
    assert backlog(repo, "setup", "--backend=maildir-shared").returncode == 0
    titles = ['He said "hi"', '"quoted first"', "tab\there", "Zoë's tâche", "back\\slash", "plain"]
    todo = repo / "backlog" / "todo"
    for n, title in enumerate(titles):
        (todo / f"task-{n}.md").write_text(f"---\npriority: {1 + n % 3}\n---\n\n# {title}\n", encoding="utf-8")
    (todo / "no-title.md").write_text("---\npriority: 2\ntimeout: 2h\n---\n\nno heading\n")
    for path in todo.iterdir():
        os.utime(path, ns=(10**18, 10**18))  # long unchanged (and, by `settled_clock`, its ctime too): cached
    first = json.loads(backlog(repo, "--json", "ready").stdout)
    assert {t["title"] for t in first["tasks"]} == {*titles, None}
    parsed: list[str] = []
    real_parsed, real_load = header.parsed, backend_mod.BaseBackend.load

    def counted_parsed(slug, data, default):  # type: ignore[no-untyped-def]
        parsed.append(slug)
        return real_parsed(slug, data, default)

    def counted_load(self, loc, data=None):  # type: ignore[no-untyped-def]
        parsed.append(loc.slug)
        return real_load(self, loc, data)

    monkeypatch.setattr(header, "parsed", counted_parsed)
    monkeypatch.setattr(backend_mod.BaseBackend, "load", counted_load)
    assert json.loads(backlog(repo, "--json", "ready").stdout) == first
    assert json.loads(backlog(repo, "--json", "ready", "--limit", "2").stdout)["tasks"] == first["tasks"][:2]
    assert parsed == [], parsed


def test_ready_locates_no_task_it_listed(tmp_path, monkeypatch) -> None:
    """Every candidate of `ready` is read once, where the ranking listed it: no task is located
    again (before, `titles` located each one through every pile: 16 s at 100,000 tasks)."""
    repo = init_repo(tmp_path / "r")
    assert backlog(repo, "setup", "--backend=maildir-shared").returncode == 0
    for n in range(12):
        assert backlog(repo, "add", f"task-{n}", "--priority", str(1 + n % 3)).returncode == 0
    expected = json.loads(backlog(repo, "--json", "ready").stdout)
    calls: list[str] = []
    real = backend_mod.BaseBackend.locate

    def counted(self, slug):  # type: ignore[no-untyped-def]
        calls.append(slug)
        return real(self, slug)

    monkeypatch.setattr(backend_mod.BaseBackend, "locate", counted)
    again = json.loads(backlog(repo, "--json", "ready").stdout)
    assert again == expected and len(again["tasks"]) == 12
    for limit in (1, 4, 5, 9, 12, 13):  # `--limit` sorts only the priorities it reaches: the same head
        assert (
            json.loads(backlog(repo, "--json", "ready", "--limit", str(limit)).stdout)["tasks"]
            == (expected["tasks"][:limit])
        )
    assert calls == [], calls
