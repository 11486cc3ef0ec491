"""What every command works with: the opened backlog (`Context`), what it returns (`Result`),
and who is acting (claimer identity, branch)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import git, project
from .backend import Backend, open_backend
from .errors import BacklogError, InvalidInput
from .layout import Layout
from .project import Pipeline, Project
from .task import field_value


@dataclass
class Result:
    """What a command returns: data for --json, lines for people, warnings for stderr."""

    data: dict[str, Any]
    lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    code: int = 0


@dataclass
class Context:
    repo: git.Repo
    project: Project
    backend: Backend
    heal_findings: list[str] = field(default_factory=list)

    @property
    def pipeline(self) -> Pipeline:
        return self.project.pipeline

    @property
    def layout(self) -> Layout:
        return self.backend.layout


def open_context(cwd: Path | str, heal: bool = True) -> Context:
    repo = git.discover(cwd)
    proj = project.load(Layout.of(repo).agents)
    backend = open_backend(repo, proj)
    findings = backend.heal() if heal else []
    return Context(repo, proj, backend, findings)


def claimer_id() -> str:
    """Who acts (SPEC §2): BACKLOG_CLAIMER, a conductor or cmux workspace, else user@host."""
    env = os.environ
    if env.get("BACKLOG_CLAIMER", "").strip():
        value = env["BACKLOG_CLAIMER"]
    elif env.get("CONDUCTOR_WORKSPACE_NAME", "").strip():
        value = f"conductor:{env['CONDUCTOR_WORKSPACE_NAME']}"
    elif env.get("CMUX_WORKSPACE_ID", "").strip():
        value = f"cmux:{env['CMUX_WORKSPACE_ID']}"
    else:
        user = env.get("USER") or env.get("LOGNAME") or "user"
        value = f"{user}@{socket.gethostname().split('.')[0]}"
    claimer = field_value(value)
    if not claimer:
        raise InvalidInput(f"the claimer identity {value!r} has no printable characters: set BACKLOG_CLAIMER")
    return claimer


def branch_of(ctx: Context) -> str:
    if ctx.repo.branch is None:
        raise BacklogError("HEAD is detached: check out a branch first (claims record the branch)")
    return ctx.repo.branch
