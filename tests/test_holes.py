"""The holes of issue 28, each closed as a class (docs/design.md, *Holes closed (issue 28)*)."""

from __future__ import annotations

import json
import re

from conftest import Repo

PIPELINE_RE = re.compile(r"(## Pipeline\n\n)[^\n]*\n")


def _with_pipeline(wt: Repo, piles: str) -> None:
    agents = wt / "backlog/AGENTS.md"
    text = agents.read_text()
    assert PIPELINE_RE.search(text)
    agents.write_text(PIPELINE_RE.sub(lambda m: m.group(1) + piles + "\n", text, count=1))
    wt.git("commit", "-qam", f"pipeline: {piles}")


# -- 1. two holders: in-flight piles are clone-wide whatever a branch's pipeline says ------------
def test_a_task_in_a_pile_another_pipeline_lacks_is_in_flight_for_every_branch(shared):
    shared.ok("add", "x")
    a = shared.worktree("a")
    _with_pipeline(a, "`todo` → `doing` → `reviewing` → `done`")
    a.ok("take", "x-plan")
    a.ok("advance", "x-plan")  # → reviewing, a pile main's pipeline lacks
    assert (a / "backlog/reviewing/x-plan.md").exists()
    assert (shared / "backlog/todo/x-plan.md").exists()  # main's copy from before the claim

    # auto-pick on main skips it; a named take is refused naming the holder
    proc = shared.run("take")
    assert proc.returncode == 0 and "no available tasks" in proc.stderr, proc.stdout + proc.stderr
    proc = shared.run("take", "x-plan")
    assert proc.returncode == 1 and "already in flight" in proc.stderr and "reviewing/" in proc.stderr, proc.stderr
    assert not list((shared / "backlog/doing").iterdir())

    # the views show it in flight, in its pile
    status = json.loads(shared.ok("--json", "status"))
    assert [(t["slug"], t["pile"]) for t in status["in_flight"]] == [("x-plan", "reviewing")]
    assert status["counts"]["reviewing"] == 1 and status["counts"]["todo"] == 0, status["counts"]
    listed = json.loads(shared.ok("--json", "list"))
    assert [(t["slug"], t["state"]) for t in listed["tasks"]] == [("x-plan", "in flight")]
    assert "reviewing/" in shared.ok("list")
    assert "x-plan" in shared.ok("list", "reviewing")

    # main's verbs on it: advance is refused naming the pile its pipeline lacks; nothing lost
    proc = shared.run("advance", "x-plan")
    assert proc.returncode == 1 and "reviewing" in proc.stderr and "pipeline" in proc.stderr, proc.stderr
    assert (a / "backlog/reviewing/x-plan.md").exists()

    # the janitor of main sees it in flight (no stray pile, no todo task to offer)
    swept = json.loads(shared.ok("--json", "maintain", "--dry-run"))
    assert not any("reviewing" in f["path"] for f in swept["buckets"]["LAYOUT"]), swept["buckets"]

    # the branch whose pipeline has it finishes it
    a.ok("advance", "x-plan")
    assert (a / "backlog/done/x-plan.md").exists()
    assert shared.run("take", "x-plan").returncode == 1
