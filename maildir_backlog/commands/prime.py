"""`backlog prime`: this project's workflow, told to an agent that is about to start work.

The text is built from the project itself (its backend and pipeline, the identity in effect),
so it is right for any pipeline: one `advance` per stage after the claim. `prime --skill DIR`
writes the same text as `DIR/SKILL.md` for agent harnesses that load skills. The MCP server's
`prime` tool asks for the same guide told in tool calls (`tools=True`).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from ..context import GIVEN_CLAIMER, Context, Result, acting_as, claimer_id, claimer_source, remote_note
from ..guide import agent_loop
from ..scaffold import write_skill

SKILL_NAME = "backlog"
SKILL_DESCRIPTION = (
    "Take, work on and finish tasks from this repository's backlog/ task queue with the `backlog`"
    " command: what to call, in which order, what the exit codes mean."
)
EXIT_CODES = {
    "0": "success; also `no available tasks` (take's JSON has slug null): nothing to do, stop",
    "1": "refused or failed (e.g. the task is claimed by someone else, or not in flight): read the"
    " one-line message on stderr; repeating the same call will not help, do something else",
    "2": "usage or invalid input: fix the call (`backlog VERB --help` shows every option with an example)",
    "3": "lost a race (another agent acted on the same task at the same moment): retry now, the same call;"
    " `take` then picks another task",
    "4": "unavailable (the git remote could not be reached or answered too late, or a lock or the git index"
    " stayed busy): nothing changed; retry the same call later",
}


TOOL_EXIT_CODES = {  # the same codes, as the `code` of a tool's result (`tools=True`: the MCP server)
    "0": "success: the result is the tool's object; `take` with slug null: nothing available, stop",
    "1": "refused or failed (e.g. the task is claimed by someone else, or not in flight): read `error`;"
    " repeating the same call will not help",
    "2": "invalid arguments or input: fix the call (each tool's input schema describes its arguments)",
    "3": "lost a race (another agent acted on the same task at the same moment): call again;"
    " `take` then picks another task",
    "4": "unavailable (the git remote could not be reached or answered too late, or a lock or the git index"
    " stayed busy): nothing changed; call again later",
}


def more_verbs(ctx: Context, tools: bool) -> list[str]:
    """The verbs an agent needs besides the loop: a follow-up, a look, giving a claim back, giving
    up, reopening, changing a queued task. Told in tool calls when `tools`."""
    first = ctx.pipeline.first
    lands = f"`{first}/` on the intake branch" if ctx.backend.shares_flight else f"`{first}/` on this branch"
    if tools:
        return [
            f"File a follow-up: the `add` tool (`slug`, `category` `followup`, `depends` naming the tasks it"
            f" waits for, `title`, `body`); it lands in {lands}.",
            "Look at one task wherever it is: the `show` tool (`slug`).",
            "Give a claim back without failing it (someone else may take it): the `release` tool (`slug`, `reason`).",
            "Could not do it: the `fail` tool (`slug`, `reason`); a failed task is reopened with the `retry`"
            " tool (`slug`, `reason`, `set` to change its priority, timeout or dependencies).",
            "Change a queued task's priority, dependencies, timeout or title: the `edit` tool (`slug`, `set`).",
        ]
    return [
        f'File a follow-up: `backlog add SLUG followup --depends OTHER-SLUG --title "…"` (lands in'
        f" {lands}; the task's slug is `SLUG-followup`).",
        "Look at one task wherever it is: `backlog show SLUG`.",
        'Give a claim back without failing it (someone else may take it): `backlog release SLUG "reason"`.',
        'Could not do it: `backlog fail SLUG "reason"`; a failed task is reopened with'
        ' `backlog retry SLUG "reason" [--set priority=1]`.',
        "Change a queued task: `backlog edit SLUG --set priority=1` (also `dependencies`, `timeout`, `title`).",
    ]


def travel(ctx: Context, tools: bool) -> str:
    """How tasks and claims reach other clones of this repository, as this project is set up."""
    if not ctx.backend.shares_flight:
        return (
            "Every pile is tracked on each branch: tasks, claims and settlements travel with your commits."
            " Push your branch and merge it; two branches' claims of one task meet at the merge, where"
            " the janitor (`maintain`) reports them."
        )
    said = (
        "Every worktree of this clone shares one set of claims and one queue (the intake branch), with no"
        " push or merge. New tasks (`add`, `retry`, `edit`) are commits on the intake branch"
    )
    if ctx.project.remote:
        name = ctx.project.remote
        said += (
            f", pushed at once to that branch on the git remote `{name}`: every clone's `take` and `ready` read"
            f" the remote's intake branch (fetched when it moved), no pull needed. Where `{name}` refuses the push"
            " (a protected branch), the task stays committed here with one warning and travels with the branch"
            " (push it, or merge it through a pull request). Completed tasks reach the intake branch when your"
            " branch is merged. Claims and settlements are shared with every clone at once through the git"
            f" remote `{name}` (refs under refs/backlog/): a task another clone holds is refused, naming it."
        )
    else:
        said += (
            ": they reach other clones when that branch is pushed (`git push`) and pulled there (`git pull`);"
            " completed tasks reach the intake branch when your branch is merged. Claims are this clone's only:"
            " agents on other machines need `remote: <name>` under `## Backend` in backlog/AGENTS.md to share"
            " them (and the queue)."
        )
    return said


def _describe_identity(ctx: Context) -> tuple[str, str, str]:
    claimer = claimer_id()
    _raw, source = claimer_source()
    if source == GIVEN_CLAIMER:
        where = "given to the Python API"
    else:
        where = "user@host: no variable set" if source == "user@host" else f"from ${source}"
    branch = ctx.repo.branch or "(detached HEAD: check out a branch before you take a task)"
    return claimer, where, branch


def render(ctx: Context, tools: bool = False) -> tuple[str, dict[str, Any]]:
    """The guide as markdown, and the same facts as data (for --json). `tools`: told in calls of
    the MCP server's tools (`take`) instead of commands (`backlog take --json`)."""
    pipeline = ctx.pipeline
    claimer, where, branch = _describe_identity(ctx)
    loop = agent_loop(pipeline, tools)
    codes = TOOL_EXIT_CODES if tools else EXIT_CODES
    arrow = " → ".join(pipeline.piles)
    if tools:
        choose = (
            "The identity is the MCP server's: to choose it, set `BACKLOG_CLAIMER` in the server's environment"
            " (the `env` of its entry in your MCP configuration) and restart the server (otherwise"
            " `<harness>:<session id>` when `setup --agent` wrote the entry, else CONDUCTOR_WORKSPACE_NAME,"
            " CMUX_WORKSPACE_ID or user@host is used)."
        )
        give_up = "To give up on a task: call the `cancel` tool (no longer wanted) or the `fail` tool (could not be"
        give_up += " done), each with the `slug` and a `reason`."
    else:
        choose = (
            "To choose the identity, set it before your first call: `export BACKLOG_CLAIMER=<your-agent-name>`"
            " (otherwise `<harness>:<session id>` under a harness that `setup --agent` connected, else"
            " CONDUCTOR_WORKSPACE_NAME, CMUX_WORKSPACE_ID or user@host is used)."
        )
        give_up = 'To give up on a task: `backlog cancel SLUG "reason"` (no longer wanted) or'
        give_up += ' `backlog fail SLUG "reason"` (could not be done).'
    lines = [
        "# Working from this repository's backlog",
        "",
        f"Tasks live in `backlog/` as markdown files, one per task; the directory holding a file is its state."
        f" Backend: {ctx.backend.name}. Pipeline: {arrow} (plus `failed`, for tasks given up)."
        f" Never move or edit task files by hand: {'call the tools' if tools else 'call `backlog`'}.",
        "",
        "## Who you are",
        "",
        f"Claimer identity: `{claimer}` ({where}); branch: `{branch}`. A claim records both, and only that"
        " identity on that branch may act on the task (two agents on one branch are two holders)."
        f" {choose}",
        "",
        "## The loop",
        "",
        *(f"{n}. {step}" for n, step in enumerate(loop, 1)),
        "",
        f"Then start again at 1. {give_up} A task whose deadline passed may be failed by"
        " the janitor or rescued by another agent.",
    ]
    if pipeline.intake:
        how = "the `add` tool" if tools else "`backlog add`"
        move = "by calling the `advance` tool with its `slug`" if tools else "with `backlog advance SLUG`"
        lines += [
            "",
            f"New tasks ({how}) land in `{pipeline.first}/`, before `todo`: they are not claimable"
            f" until someone moves them on {move}.",
        ]
    lines += ["", "## Beyond the loop", "", *(f"- {line}" for line in more_verbs(ctx, tools))]
    lines += ["", "## Between clones", "", travel(ctx, tools)]
    lines += ["", "## Errors" if tools else "## Exit codes", ""]
    if tools:
        lines += [
            'A failed call is an error result holding `{"error": "<one line>", "code": <code>, "kind": …,'
            ' "retryable": …}` (`holder` names whose claim is in the way, `settled` what became of a task that'
            " left flight). What each `code` means (0: a result, not an error):",
            "",
        ]
    lines += [f"- {code}: {meaning}" for code, meaning in codes.items()]
    lines += ["", "## Reading results" if tools else "## Reading --json", ""]
    if tools:
        lines.append(
            "Each tool returns one JSON object, as structured content (its output schema describes it) and as"
            " JSON text."
        )
    else:
        lines.append(
            "`--json` (before or after the verb) prints exactly one JSON object on stdout; warnings and notes go"
            ' to stderr. A failure prints `{"error": "<one line>", "code": <exit code>, "kind": …, "retryable": …}`'
            " instead (`holder` names whose claim is in the way, `settled` what became of a task that left"
            " flight)."
        )
    lines[-1] += (
        " Durations are whole seconds (`budget_seconds`, `age_seconds`; null means no limit), times are"
        " ISO 8601 UTC (`deadline`, `since`, e.g. 2026-05-16T14:22:00Z)."
        f" {'The `take` tool' if tools else '`take --json`'} returns slug, path, pile, title,"
        " description, frontmatter, claimer, branch, budget_seconds and deadline: all you need to start."
        " A JSON Schema per verb: `python -m maildir_backlog.schemagen VERB` prints it."
    )
    text = "\n".join(lines) + "\n"
    data: dict[str, Any] = {
        "backend": ctx.backend.name,
        "pipeline": list(pipeline.piles),
        "claimer": claimer,
        "claimer_from": claimer_source()[1],
        "loop": loop,
        "exit_codes": dict(codes),
        "text": text,
    }
    return text, data


def skill_file(text: str) -> str:
    """SKILL.md: the frontmatter skill loaders read (`name`, `description`), then the guide."""
    quoted = json.dumps(SKILL_DESCRIPTION, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar
    return f"---\nname: {SKILL_NAME}\ndescription: {quoted}\n---\n\n{text}"


def brief(ctx: Context) -> str:
    """The short guide a session-start hook puts in an agent's context (a few hundred tokens,
    `tests/test_prime.py` keeps it so): who you are, the loop, the verbs around it, the exit
    codes, and where the whole guide is."""
    claimer, _where, branch = _describe_identity(ctx)
    pipeline = ctx.pipeline
    stages = " → ".join(pipeline.piles[pipeline.piles.index("todo") + 1 :])
    return "\n".join(
        [
            "# backlog: this repository's task queue",
            f"You are `{claimer}` on branch `{branch}`; pipeline {' → '.join(pipeline.piles)}."
            " Never move or edit files under backlog/ by hand.",
            f"Loop: `backlog take --json` claims the best task (its reply holds slug, description and"
            f' deadline; slug null: nothing to do, stop) → work, with `backlog progress "note"` as you go →'
            f" `backlog advance SLUG` once per stage ({stages}).",
            "Also: `backlog add SLUG followup --depends OTHER` files a follow-up; `backlog show SLUG`;"
            ' `backlog release SLUG "why"` gives a claim back; `backlog fail SLUG "why"`.',
            "Exit codes: 0 done, 1 refused (do not repeat), 2 fix the call, 3 lost a race (retry now),"
            " 4 busy (retry later).",
            "The `backlog` MCP server's tools are the same verbs. The whole guide, how tasks travel between"
            " clones included: `backlog prime --full`.",
        ]
    )


def prime(
    ctx: Context, skill_dir: str | None = None, tools: bool = False, hook: bool = False, full: bool = False
) -> Result:
    """The guide; `tools`: told in MCP tool calls (what the MCP server's `prime` returns); `hook`:
    the hook JSON of a Claude Code `SessionStart` hook holding the short guide (`full`: the whole
    one), the session's claimer exported for its shell (docs/agents.md)."""
    note = remote_note(ctx)  # SPEC §3: a declared remote this clone lacks: said once, on stderr
    if hook:
        return _hook(ctx, full).plus(stderr=note)
    text, data = render(ctx, tools)
    if note:
        data["remote"] = "unconfigured"
    if skill_dir is None:
        return Result(data, text.rstrip("\n").split("\n"), stderr=note)
    path = write_skill(Path(skill_dir), skill_file(text).encode())
    data["skill"] = str(path)
    return Result(data, [f"wrote {path}"], stderr=note)


HOOK_INPUT_BYTES = 64 * 1024  # a SessionStart hook's input is a small JSON object
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


def session_claimer(stdin: str) -> str | None:
    """`claude:<session_id>` from a hook's input JSON, or None (no id, or one that is not a plain
    token: it is written into a shell file, so nothing else passes)."""
    try:
        given = json.loads(stdin) if stdin.strip() else {}
    except ValueError:
        return None
    sid = given.get("session_id") if isinstance(given, dict) else None
    return f"claude:{sid}" if isinstance(sid, str) and _SESSION_ID.fullmatch(sid) else None


def _hook(ctx: Context, full: bool) -> Result:
    """Claude Code's SessionStart hook: the guide as `additionalContext`. Unless BACKLOG_CLAIMER is
    set already, the session's own claimer (`claude:<session_id>`) is exported for the session's
    shell commands through `$CLAUDE_ENV_FILE`, and the guide is told as that claimer."""
    stdin = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read(HOOK_INPUT_BYTES)
    claimer = None if os.environ.get("BACKLOG_CLAIMER", "").strip() else session_claimer(stdin)
    env_file = os.environ.get("CLAUDE_ENV_FILE", "")
    if claimer and env_file:
        with open(env_file, "a", encoding="utf-8") as handle:  # the harness's own file for this session
            handle.write(f"export BACKLOG_CLAIMER={claimer}\n")
    with acting_as(claimer):
        whole, data = render(ctx)
        text = whole if full else brief(ctx)
    said = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}
    data["text"] = text
    return Result(data, [json.dumps(said, ensure_ascii=False)])
