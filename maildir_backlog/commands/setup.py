"""`backlog setup`: scaffold backlog/ for a backend and commit only those paths; `setup --agent`:
connect agent harnesses (SPEC §9, docs/agents.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import manyfiles
from ..context import Result
from ..errors import InvalidInput, Usage
from ..harness import HARNESSES, INSTALLED, connect
from ..project import BACKENDS, Pipeline, parse_pipeline
from ..scaffold import install_hooks, repository, set_up


def setup_hooks(cwd: Path | str) -> Result:
    """`setup --hooks`: install only the post-checkout hook, on an existing backlog."""
    line = install_hooks(cwd)
    return Result({"hook": line}, [line])


def setup(cwd: Path | str, backend: str | None, pipeline_text: str | None) -> Result:
    repo = repository(cwd)
    if backend is None:
        raise InvalidInput(
            "choose a backend: --backend=maildir-shared (recommended for any project that will use worktrees or"
            " several agents: one set of claims for every worktree of the clone) or --backend=maildir-git (every"
            " pile tracked on each branch; claims meet only at merge), e.g. backlog setup --backend=maildir-shared"
        )
    if backend not in BACKENDS:
        raise InvalidInput(f"backend {backend!r} is not supported by this tool (maildir-shared or maildir-git)")
    pipeline = parse_pipeline(pipeline_text, "--pipeline") if pipeline_text else Pipeline()
    made = set_up(repo, backend, pipeline)
    hook, linked = made.hook, made.linked
    lines = [f"set up {backend} backlog in backlog/ (pipeline: {' → '.join(pipeline.piles)})", hook]
    lines += [f"linked the backlog guide from {rel}" for rel in linked] + made.notes
    lines += manyfiles.turn_on(repo)
    data = {
        "backend": backend,
        "pipeline": list(pipeline.piles),
        "paths": made.paths,
        "layout": made.findings,
        "linked": linked,
        "hook": hook,
    }
    return Result(data, lines)


def setup_agents(cwd: Path | str, agents: list[str], check: bool = False, remove: bool = False) -> Result:
    """`setup --agent NAME…` (`--check`: exit 1 when anything is missing or outdated; `--remove`)."""
    if check and remove:
        raise Usage("setup --agent takes --check or --remove, not both")
    unknown = [name for name in agents if name not in HARNESSES]
    if unknown:
        raise InvalidInput(f"--agent {unknown[0]!r}: not a harness this tool knows ({', '.join(HARNESSES)})")
    agents = list(dict.fromkeys(agents))
    mode = "check" if check else "remove" if remove else "install"
    done = connect(repository(cwd), agents, mode)
    lines = _item_lines(mode, done.items)
    missing = [item for item in done.items if item["state"] != INSTALLED]
    if mode == "install" and not missing:
        lines.append(f"already connected: {', '.join(agents)} (nothing changed)")
    elif mode == "remove" and not done.paths:
        lines.append(f"nothing to remove for {', '.join(agents)}")
    elif mode == "check":
        lines.append(f"{len(missing)} missing or outdated" if missing else f"connected: {', '.join(agents)}")
    if done.committed:
        lines.append(f"committed: {', '.join(done.committed)}")
    data = {
        "agents": agents,
        "mode": mode,
        "items": done.items,
        "paths": done.paths,
        "committed": done.committed,
        "notes": done.notes,
    }
    return Result(data, lines, stderr=done.notes, code=1 if mode == "check" and missing else 0)


def _item_lines(mode: str, items: list[dict[str, Any]]) -> list[str]:
    """One line per harness file `mode` found (check) or changed (install, remove)."""
    lines: list[str] = []
    for item in items:
        where = f"{item['path']}: {item['what']} ({item['agent'] or 'every harness'})"
        state = item["state"]
        if mode == "check":
            lines.append(f"{'ok' if state == INSTALLED else state}: {where}")
        elif mode == "install" and state != INSTALLED:
            lines.append(f"{'added' if state == 'missing' else 'updated'}: {where}")
        elif mode == "remove" and state != "missing":
            lines.append(f"removed: {where}")
    return lines
