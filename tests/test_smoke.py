"""The whole cycle through the real command, `python -m maildir_backlog` in its own process (most
tests call the CLI in-process: tests/conftest.py)."""

import pytest
from conftest import git

pytestmark = pytest.mark.subprocess


def test_full_cycle(anybk):
    anybk.ok("add", "foo")
    assert (anybk / "backlog/todo/foo-plan.md").exists()
    assert anybk.ok("take").strip() == "backlog/doing/foo-plan.md"
    anybk.ok("progress", "half way")
    anybk.ok("advance", "foo-plan", "--pr", "https://example.invalid/pull/1")
    text = (anybk / "backlog/done/foo-plan.md").read_text()
    assert "advanced to=doing claimer=tester branch=main" in text
    assert "progress | half way" in text
    assert "advanced to=done | PR=https://example.invalid/pull/1" in text
    assert git(anybk.path, "status", "--porcelain") == ""
