"""The few kernel functions the verb table names that are not a command's own: a verb whose
switch chooses between commands (`setup --hooks`, `setup --agent`, `status --remote`), `migrate`'s checks of
its switches, and what `maintain` does before the backlog is opened (its row's `before`)."""

from __future__ import annotations

from pathlib import Path

from .errors import InvalidInput, Usage
from .project import BACKENDS
from .typed import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .context import Context, Result


def setup(
    path: str | Path,
    backend: str | None = None,
    pipeline: str | None = None,
    hooks: bool = False,
    agent: list[str] | None = None,
    check: bool = False,
    remove: bool = False,
) -> Result:
    from .commands.setup import setup, setup_agents, setup_hooks

    if agent:
        if backend or pipeline or hooks:
            raise Usage(
                "setup --agent is a run of its own: set up the backlog with `backlog setup --backend=...`,"
                " then connect harnesses with `backlog setup --agent NAME`"
            )
        return setup_agents(path, agent, check=check, remove=remove)
    if check or remove:
        raise Usage("--check and --remove go with --agent NAME (e.g. backlog setup --agent claude --check)")
    return setup_hooks(path) if hooks else setup(path, backend, pipeline)


def status(ctx: Context, remote: bool = False) -> Result:
    if remote:
        from .commands.remote_status import remote_status

        return remote_status(ctx)
    from .commands.read import status

    return status(ctx)


def migrate(path: str | Path, to: str | None = None, from_flat: bool = False, dry_run: bool = False) -> Result:
    from .commands.migrate import migrate

    if bool(to) == bool(from_flat):
        raise Usage("migrate needs exactly one of --to BACKEND or --from-flat")
    if to is not None and to not in BACKENDS:
        raise InvalidInput(f"migrate --to {to!r}: not supported by this tool (maildir-shared or maildir-git)")
    return migrate(path, to=to, from_flat=from_flat, dry_run=dry_run)


def recovered(path: str | Path, dry_run: bool = False, **_: Any) -> dict[str, Any]:
    """maintain, before the backlog is opened (and self-healed): an interrupted migration undone
    or finished first."""
    from . import git
    from .commands.migrate import recover

    return {"recovered": recover(git.discover(path), dry_run=dry_run)}
