"""What agents read: the loop of calls for one task, the house rules, and the AGENTS.md and
ROADMAP.md that `backlog setup` writes (`prime` prints the same loop)."""

from __future__ import annotations

from .project import Pipeline
from .task import Defaults

ROADMAP = """# Roadmap

The strategic counterpart of the task piles: where the project is going and why.
Tasks in `todo/` should trace back to something here. `backlog` does not read this file.

## Now

## Next

## Later
"""


# How each step of the loop is called: on the command line, or as an MCP tool (`prime` over MCP)
_CALLS = {
    False: (
        "`backlog ready --json`",
        "`backlog take --json`",
        "the reply",
        '`backlog progress "note"` as you go',
        "`backlog advance SLUG [--pr URL]`",
        "`backlog advance SLUG`",
    ),
    True: (
        "call the `ready` tool",
        "call the `take` tool",
        "the result",
        "call the `progress` tool with a `note` as you go",
        "call the `advance` tool with the `slug` (and `pr`, a pull request URL)",
        "call the `advance` tool with the `slug`",
    ),
}


def agent_loop(pipeline: Pipeline, tools: bool = False) -> list[str]:
    """The calls an agent makes for one task, in order, for this pipeline: one `advance` per
    stage after the claim. `backlog prime` and the AGENTS.md that setup writes both say this;
    with `tools`, told in MCP tool calls (the MCP server's guide)."""
    ready, take, reply, progress, finish, hop = _CALLS[tools]
    claimed = pipeline.next_pile("todo") or "done"
    steps = [
        f"{ready}: the tasks `take` would pick, best first (an empty list: nothing to do)",
        f"{take}: claim the best one (todo → {claimed}); {reply} holds all you need to start,"
        " and its `slug` names the task in the calls below",
    ]
    if claimed == "done":
        return steps + ["(this pipeline has no in-flight pile: the claim itself completes the task)"]
    steps.append(f"{progress} (notes do not reset the clock: finish before `deadline`)")
    for pile in pipeline.in_flight:
        target = pipeline.next_pile(pile)
        if target == "done":
            steps.append(f"{finish}: {pile} → done, the task is finished")
        else:
            steps.append(f"{hop}: {pile} → {target}")
    return steps


def house_rules(backend: str) -> list[str]:
    """What every agent of this backlog should know besides the loop (the generated AGENTS.md)."""
    rules = [
        "Only the holder acts on a claim (its claimer identity on its branch; two agents on one branch are two"
        " holders): `advance`, `progress`, `cancel` and `fail` by anyone else are refused, naming the holder"
        " (add `--force` to act anyway; the log records `by=<you>`).",
        "Budgets: a task may stay in a pile for its budget (`timeout.<pile>` or `timeout` in its frontmatter,"
        " else the Defaults section, else 7d; `none`: no limit); it is fixed when the clock starts and written on that"
        " line. Past it, anyone's next `take` fails it, or `take SLUG` rescues it.",
    ]
    if backend == "maildir-shared":
        rules += [
            "One queue per clone: tasks added on the intake branch (the main worktree's branch, or the one an"
            " `intake:` line of the Backend section names) are claimable from every worktree at once, unmerged.",
            "What to merge when: nothing, for claims to be exclusive. Merge a branch that completed tasks into"
            " the intake branch to keep `done/` in one place; then `backlog maintain` removes the stale copies.",
            "Across clones: without a `remote: <name>` line in the Backend section, tasks travel with the intake branch"
            " (`git push`, `git pull`) and claims are this clone's only. With one, claims are shared through that"
            " git remote, `add`, `retry` and `edit` push their commit to the remote's intake branch, and every"
            " clone's `take` and `ready` read it, no pull needed; where the remote refuses that push (a protected"
            " branch), the task stays committed here with one warning and travels with the branch.",
        ]
    return rules


def render_declaration(backend: str, pipeline: Pipeline, defaults: Defaults = Defaults()) -> str:
    """The AGENTS.md that `backlog setup` writes."""
    arrow = " → ".join(f"`{p}`" for p in pipeline.piles)
    loop = "\n".join(f"{n}. {step}" for n, step in enumerate(agent_loop(pipeline), 1))
    rules = "\n".join(f"- {rule}" for rule in house_rules(backend))
    return f"""# Backlog

This directory is a task queue managed by `backlog` (maildir-backlog). One markdown file is one
task; the directory holding it is its state. Tasks only move forward through the pipeline.
`backlog prime` prints the whole guide for an agent (identity, exit codes, `--json`).

{loop}

- Give up: `backlog cancel SLUG "reason"` (no longer wanted) or `backlog fail SLUG "reason"` (could not be done).
- See: `backlog status`, `ls backlog/<pile>/`. Never move task files by hand.
{rules}

## Backend

{backend}

## Defaults

- `timeout: {defaults.timeout_text}`
- `priority: {defaults.priority}`

## Pipeline

{arrow}
"""
