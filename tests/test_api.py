"""The Python API (`from maildir_backlog import Backlog`): one method per verb, typed results whose
fields are the --json keys, and the documented exceptions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta

import pytest
from conftest import ROOT, backdate

from maildir_backlog import Backlog
from maildir_backlog.api import Claim, Listing, Moved, ReadyTask, Report, Status, TaskView
from maildir_backlog.errors import BacklogError, Conflict, InvalidInput


def test_import_stays_cheap():
    """`import maildir_backlog` (what the command does first) loads no API, plumbum or git code."""
    code = (
        "import sys, maildir_backlog;"
        " print(sorted(m for m in sys.modules if m.startswith(('maildir_backlog', 'plumbum'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert json.loads(out.replace("'", '"')) == ["maildir_backlog"]
    assert Backlog.__module__ == "maildir_backlog.api"


@pytest.fixture
def review(repo):
    repo.ok("setup", "--backend=maildir-shared", "--pipeline", "todo doing reviewing done")
    return repo


def test_a_task_through_the_api(review):
    bl = Backlog(review.path)
    added = bl.add("parser", priority=1, timeout="4h", title="Fix the parser", body="CRLF breaks it.")
    assert isinstance(added, Moved) and added.slug == "parser-plan" and added.pile == "todo"
    bl.add("docs", "followup", depends=["parser-plan:documents it"])
    ready = bl.ready()
    assert [t.slug for t in ready] == ["parser-plan"] and isinstance(ready[0], ReadyTask)
    assert ready[0].title == "Fix the parser" and ready[0].priority == 1
    assert ready.remote is None and ready.warnings == ()  # no remote declared

    task = bl.take()
    assert isinstance(task, Claim)
    assert (task.slug, task.pile, task.claimer, task.branch) == ("parser-plan", "doing", "tester", "main")
    assert task.description == "# Fix the parser\n\nCRLF breaks it." and task.budget_seconds == 4 * 3600
    assert task.frontmatter == {"priority": 1, "timeout": "4h", "dependencies": {}}
    assert isinstance(task.deadline, datetime) and task.deadline.tzinfo == UTC
    assert task.data["deadline"] == task.deadline.strftime("%Y-%m-%dT%H:%M:%SZ") and task.rescued is False
    assert task.deadline - task.since == timedelta(hours=4)

    note = bl.progress("test written")
    assert note.note == "test written" and note.slug == "parser-plan"
    view = bl.show("parser-plan")
    assert isinstance(view, TaskView) and [e["kind"] for e in view.log] == ["advanced", "progress"]
    status = bl.status()
    assert isinstance(status, Status) and status.counts["doing"] == 1
    assert status.in_flight[0]["budget_seconds"] == 4 * 3600

    hop = bl.advance("parser-plan")
    assert isinstance(hop, Moved) and hop.pile == "reviewing" and hop.budget_seconds == 4 * 3600
    done = bl.advance("parser-plan", pr="https://example.invalid/pull/1")
    assert done.pile == "done" and done.deadline is None
    listing = bl.list("done")
    assert isinstance(listing, Listing) and [t["slug"] for t in listing.tasks] == ["parser-plan"]

    claim = bl.advance("docs-followup")  # out of todo: a claim
    assert isinstance(claim, Claim) and claim.pile == "doing"
    assert bl.fail("docs-followup", "API moved").pile == "failed"
    assert bl.retry("docs-followup", "API back", {"timeout": "2d"}).pile == "todo"
    assert bl.take("docs-followup").budget_seconds == 2 * 86400
    assert bl.cancel("docs-followup", "not needed").pile == "done"
    assert bl.take() is None

    guide = bl.prime()
    assert guide.pipeline == ["todo", "doing", "reviewing", "done"] and guide.claimer == "tester"
    assert guide.text.startswith("# Working from this repository's backlog")

    report = bl.maintain(dry_run=True)
    assert isinstance(report, Report) and report.code == 0 and report.ok == {"todo": 0, "in_flight": 0}


def test_rescue_through_the_api(review):
    bl = Backlog(review.path)
    bl.add("slow", timeout="1h")
    bl.take()
    with pytest.raises(BacklogError, match="still within its budget") as info:
        bl.rescue("slow-plan")
    assert info.value.code == 1
    backdate(review.path, "slow-plan", seconds=7200)
    rescued = bl.rescue("slow-plan")
    assert isinstance(rescued, Claim) and rescued.rescued and rescued.budget_seconds == 3600


def test_the_documented_exceptions(review, tmp_path):
    bl = Backlog(review.path)
    with pytest.raises(InvalidInput) as bad:
        bl.show("../etc")
    assert bad.value.code == 2
    with pytest.raises(BacklogError, match="no task nope in any pile") as missing:
        bl.take("nope")
    assert missing.value.code == 1 and not isinstance(missing.value, (InvalidInput, Conflict))
    with pytest.raises(BacklogError, match="not inside a git repository"):
        Backlog(tmp_path).status()
    with pytest.raises(InvalidInput):
        bl.add("x", timeout="soon")


def test_results_compare_by_fields_and_keep_the_json(review):
    bl = Backlog(review.path)
    added = bl.add("x")
    assert added.data == {
        "slug": "x-plan",
        "pile": "todo",
        "path": "backlog/todo/x-plan.md",
        "branch": "main",
        "where": "here",
    }
    assert added == Moved(data={}, slug="x-plan", pile="todo", path="backlog/todo/x-plan.md")
    assert repr(bl) == f"Backlog({str(review.path)!r})"


def test_api_results_equal_the_cli_json(review):
    """The API and `--json` say the same: `data` is the verb's JSON object."""
    bl = Backlog(review.path)
    bl.add("x")
    assert bl.show("x-plan").data == json.loads(review.ok("--json", "show", "x-plan"))
    assert bl.list().data == json.loads(review.ok("--json", "list"))


def test_the_result_types_are_exported_from_the_package():
    import maildir_backlog
    from maildir_backlog import api

    names = {"Backlog", "Reply", "Claim", "Moved", "TaskView", "Status", "RemoteStatus", "ReadyTask", "Listing"}
    names |= {"Guide", "Report", "Where"}
    assert names <= set(maildir_backlog.__all__)
    for name in names:
        assert getattr(maildir_backlog, name) is getattr(api, name)
    assert maildir_backlog.__all__ == [*api.__all__, "__version__"]  # one list: the API's, and the version


def test_importing_the_package_and_its_submodules_leaves_the_api_unloaded():
    """The package's `__all__` and the API's names come from `api` (PEP 562) at their first use:
    the command's start-up (a submodule imported, its name looked up on the package) never loads it."""
    probe = "import sys, maildir_backlog; from maildir_backlog import limits, errors; print('maildir_backlog.api' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


def test_times_are_aware_datetimes_and_the_json_keeps_the_text(review):
    bl = Backlog(review.path)
    bl.add("x", timeout="2h")
    claim = bl.take()
    view = bl.show("x-plan")
    assert view.deadline == claim.deadline and view.since == claim.since and view.since.tzinfo == UTC
    hop = bl.advance("x-plan")
    assert hop.deadline is not None and hop.deadline.tzinfo == UTC and isinstance(hop.data["deadline"], str)
    assert bl.advance("x-plan").deadline is None


def test_the_claimer_is_a_parameter_and_leaks_nowhere(review):
    """`Backlog(path, claimer=...)`: that identity for this object's calls only; os.environ is not
    touched, another Backlog keeps the environment's identity, and threads do not see each other's."""
    before = dict(os.environ)
    for n in range(4):
        Backlog(review.path).add(f"t{n}")
    agent = Backlog(review.path, claimer="agent-7")
    assert agent.take("t0-plan").claimer == "agent-7" and agent.prime().claimer == "agent-7"
    assert agent.prime().claimer_from == "Backlog(claimer=...)"
    assert dict(os.environ) == before
    assert Backlog(review.path).take("t1-plan").claimer == "tester"  # the environment's, as before
    with pytest.raises(InvalidInput):
        Backlog(review.path, claimer="\x00")

    seen: dict[str, str | None] = {}

    def worker(name: str, slug: str) -> None:
        seen[slug] = Backlog(review.path, claimer=name).take(slug).claimer

    threads = [threading.Thread(target=worker, args=(f"w{n}", f"t{n}-plan")) for n in (2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"t2-plan": "w2", "t3-plan": "w3"}
    assert Backlog(review.path).show("t0-plan").claim["claimer"] == "agent-7"
    assert repr(agent) == f"Backlog({str(review.path)!r}, claimer='agent-7')"


def test_where_and_status_remote(review, tmp_path):
    from maildir_backlog import RemoteStatus, Where

    bl = Backlog(review.path)
    where = bl.where()
    assert isinstance(where, Where) and where.backend == "maildir-shared" and "doing" in where.piles
    assert where.data == json.loads(review.ok("--json", "where"))
    assert bl.status(remote=False).stale == []
    with pytest.raises(BacklogError, match="no remote declared"):
        bl.status(remote=True)

    from test_remote import make_world

    world = make_world(tmp_path / "w", ["alpha", "beta"])
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", world.url, str(clone)], check=True, capture_output=True)
    other = Backlog(clone, claimer="far-away")
    other.take("alpha")
    remote = other.status(remote=True)
    assert isinstance(remote, RemoteStatus) and remote.remote == "origin" and remote.claimed == 1
    assert remote.claims[0]["claimer"] == "far-away" and remote.claims[0]["this_clone"] is True


def test_one_object_follows_the_checkout_between_calls(review):
    """A Backlog reuses the repository its last call found (no `git rev-parse` per call) only while
    the worktree's HEAD names the same branch: a checkout between calls is seen by the next one."""
    bl = Backlog(review.path)
    bl.add("first")
    bl.add("second")
    bl.add("third")
    assert bl.take("first-plan").branch == "main"
    review.git("checkout", "-q", "-b", "feature")
    assert bl.take("second-plan").branch == "feature"
    assert "branch=feature" in (review.path / "backlog" / "doing" / "second-plan.md").read_text()
    review.git("checkout", "-q", "--detach")
    with pytest.raises(BacklogError, match="HEAD is detached"):
        bl.take("third-plan")
