"""`backlog prime`: this project's workflow, told to an agent that is about to start work.

The text is built from the project itself (its backend and pipeline, the identity in effect),
so it is right for any pipeline: one `advance` per stage after the claim. `prime --skill DIR`
writes the same text as `DIR/SKILL.md` for agent harnesses that load skills.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .. import storage
from ..context import Context, Result, claimer_id, claimer_source
from ..project import agent_loop

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


def _describe_identity(ctx: Context) -> tuple[str, str, str]:
    claimer = claimer_id()
    _raw, source = claimer_source()
    where = "user@host: no variable set" if source == "user@host" else f"from ${source}"
    branch = ctx.repo.branch or "(detached HEAD: check out a branch before you take a task)"
    return claimer, where, branch


def render(ctx: Context) -> tuple[str, dict[str, Any]]:
    """The guide as markdown, and the same facts as data (for --json)."""
    pipeline = ctx.pipeline
    claimer, where, branch = _describe_identity(ctx)
    loop = agent_loop(pipeline)
    arrow = " → ".join(pipeline.piles)
    lines = [
        "# Working from this repository's backlog",
        "",
        f"Tasks live in `backlog/` as markdown files, one per task; the directory holding a file is its state."
        f" Backend: {ctx.backend.name}. Pipeline: {arrow} (plus `failed`, for tasks given up)."
        " Never move or edit task files by hand: call `backlog`.",
        "",
        "## Who you are",
        "",
        f"Claimer identity: `{claimer}` ({where}); branch: `{branch}`. A claim records both, and only that"
        " identity on that branch may act on the task (two agents on one branch are two holders). To choose"
        " the identity, set it before your first call:"
        " `export BACKLOG_CLAIMER=<your-agent-name>` (otherwise CONDUCTOR_WORKSPACE_NAME, CMUX_WORKSPACE_ID"
        " or user@host is used).",
        "",
        "## The loop",
        "",
        *(f"{n}. {step}" for n, step in enumerate(loop, 1)),
        "",
        'Then start again at 1. To give up on a task: `backlog cancel SLUG "reason"` (no longer wanted) or'
        ' `backlog fail SLUG "reason"` (could not be done). A task whose deadline passed may be failed by'
        " the janitor or rescued by another agent.",
    ]
    if pipeline.intake:
        lines += [
            "",
            f"New tasks (`backlog add`) land in `{pipeline.first}/`, before `todo`: they are not claimable"
            " until someone moves them on with `backlog advance SLUG`.",
        ]
    lines += ["", "## Exit codes", ""]
    lines += [f"- {code}: {meaning}" for code, meaning in EXIT_CODES.items()]
    lines += [
        "",
        "## Reading --json",
        "",
        "`--json` (before or after the verb) prints exactly one JSON object on stdout; warnings and notes go"
        ' to stderr. A failure prints `{"error": "<one line>", "code": <exit code>, "kind": …, "retryable": …}`'
        " instead (`holder` names whose claim is in the way, `settled` what became of a task that left flight)."
        " Durations are whole seconds (`budget_seconds`, `age_seconds`; null means no limit), times are ISO 8601 UTC"
        " (`deadline`, `since`, e.g. 2026-05-16T14:22:00Z). `take --json` returns slug, path, pile, title,"
        " description, frontmatter, claimer, branch, budget_seconds and deadline: all you need to start."
        " The shapes are documented in docs/json.md; a JSON Schema per verb ships in the package"
        " (maildir_backlog/schemas/<verb>.json).",
    ]
    text = "\n".join(lines) + "\n"
    data: dict[str, Any] = {
        "backend": ctx.backend.name,
        "pipeline": list(pipeline.piles),
        "claimer": claimer,
        "claimer_from": claimer_source()[1],
        "loop": loop,
        "exit_codes": dict(EXIT_CODES),
        "text": text,
    }
    return text, data


def skill_file(text: str) -> str:
    """SKILL.md: the frontmatter skill loaders read (`name`, `description`), then the guide."""
    quoted = json.dumps(SKILL_DESCRIPTION, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar
    return f"---\nname: {SKILL_NAME}\ndescription: {quoted}\n---\n\n{text}"


def prime(ctx: Context, skill_dir: str | None = None) -> Result:
    text, data = render(ctx)
    if skill_dir is None:
        return Result(data, text.rstrip("\n").split("\n"))
    target = Path(skill_dir)
    storage.ensure_dir(target)
    path = target / "SKILL.md"
    storage.write_file(path, skill_file(text).encode())
    data["skill"] = str(path)
    return Result(data, [f"wrote {path}"])
