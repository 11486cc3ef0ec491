"""`backlog setup`: scaffold backlog/ for a backend and commit only those paths."""

from __future__ import annotations

from pathlib import Path

from .. import manyfiles
from ..context import Result
from ..errors import InvalidInput
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
