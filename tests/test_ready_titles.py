"""`ready` lists thousands of tasks with their titles: each is read once, where the ranking listed
it, and its title taken without parsing the task (`cache.quick_title`). The quick reader must
agree with `parse_task` wherever it answers; where it cannot be sure it says so, and the task is
parsed as before.
"""

from __future__ import annotations

import json

import pytest
from conftest import backlog, init_repo
from hypothesis import given, settings
from hypothesis import strategies as st

from maildir_backlog import backend as backend_mod
from maildir_backlog.cache import quick_title
from maildir_backlog.errors import BacklogError
from maildir_backlog.task import parse_task

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
def test_quick_title_agrees_with_parse_task(data: bytes) -> None:
    try:
        quick = quick_title(data)
    except LookupError:
        return  # not sure: the caller parses the task
    try:
        full = parse_task("a-plan", "backlog/todo/a-plan.md", data).title
    except BacklogError:
        return  # not a candidate: the ranking offers only tasks that parse (read again, a racing edit aside)
    assert quick == full, data


def test_quick_title_defers_where_a_divider_comes_first() -> None:
    with pytest.raises(LookupError):
        quick_title(b"---\npriority: 1\n---\n\n---\n# Title after a rule\n")
    with pytest.raises(LookupError):
        quick_title(b"---\npriority: 1\n")  # no closing line: parse_task's error decides
    assert quick_title(b"---\npriority: 1\n---\n\n# The title\n\n---\n\n- 2026-01-01T00:00:00Z x\n") == "The title"


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
    assert calls == [], calls
