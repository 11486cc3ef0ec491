"""End to end: a scripted agent that knows nothing about this project but what `prime` tells it,
and reads nothing but the answers of `prime`, `ready --json`, `take --json`, `progress` and
`advance`, drains a three-stage pipeline (todo → doing → reviewing → done). The same agent
again through the MCP client (its `prime` tool first)."""

from __future__ import annotations

import json
import re

import anyio
import pytest
from conftest import Repo

PIPELINE = "todo doing reviewing done"
TASKS = [
    ("schema", ["--priority", "1"]),
    ("docs", ["--depends", "schema-plan:documents it"]),
    ("lint", ["--priority", "5"]),
]


def project(repo: Repo) -> Repo:
    repo.ok("setup", "--backend=maildir-shared", "--pipeline", PIPELINE)
    for slug, opts in TASKS:
        repo.ok("add", slug, *opts)
    return repo


def stages_from(loop: list[str], step_says: str = "`backlog advance SLUG") -> int:
    """How many `advance` calls one task needs, read off prime's loop (the MCP server's prime
    speaks of tools: "call the `advance` tool")."""
    return sum(1 for step in loop if step.startswith(step_says))


def check_outcome(repo: Repo, order: list[str]) -> None:
    """The harness (not the agent) looks at the result: every task done, each once, in order."""
    assert order == ["schema-plan", "lint-plan", "docs-plan"]  # by priority; docs only once schema is done
    status = json.loads(repo.ok("--json", "status"))
    assert status["counts"]["done"] == 3 and status["in_flight"] == [] and status["counts"]["todo"] == 0
    for slug in order:
        log = json.loads(repo.ok("--json", "show", slug))["log"]
        kinds = [(e["kind"], e.get("to")) for e in log]
        assert kinds == [("advanced", "doing"), ("progress", None), ("advanced", "reviewing"), ("advanced", "done")]


def test_a_scripted_agent_drains_a_three_stage_pipeline(repo):
    project(repo)
    guide = repo.ok("prime")  # the agent reads the guide as text, like a model would
    steps = re.findall(r"^\d+\. (.*)$", guide, re.M)
    stages = stages_from(steps)
    assert stages == 2
    order = []
    while True:
        ready = json.loads(repo.ok("--json", "ready"))
        if not ready["tasks"]:
            break
        task = json.loads(repo.ok("--json", "take"))
        assert task["slug"] == ready["tasks"][0]["slug"] and task["description"]
        repo.ok("progress", f"working on {task['title']}")
        for _ in range(stages):
            moved = json.loads(repo.ok("--json", "advance", task["slug"]))
        assert moved["pile"] == "done"
        order.append(task["slug"])
    check_outcome(repo, order)


def test_the_same_agent_through_the_mcp_client(repo):
    pytest.importorskip("mcp")
    from test_mcp import call, session

    project(repo)

    async def agent() -> list[str]:
        order = []
        async with session(repo) as client:
            guide, _ = await call(client, "prime")
            stages = stages_from(guide["loop"], "call the `advance` tool")
            assert stages == 2 and guide["pipeline"] == PIPELINE.split()
            while True:
                ready, _ = await call(client, "ready")
                if not ready["tasks"]:
                    break
                task, failed = await call(client, "take")
                assert not failed and task["slug"] == ready["tasks"][0]["slug"]
                await call(client, "progress", note=f"working on {task['title']}")
                for _ in range(stages):
                    moved, failed = await call(client, "advance", slug=task["slug"])
                    assert not failed
                assert moved["pile"] == "done"
                order.append(task["slug"])
        return order

    check_outcome(repo, anyio.run(agent))
