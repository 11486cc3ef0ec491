"""What every command works with: the opened backlog (`Context`), what it returns (`Result`),
and who is acting (claimer identity, branch)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from types import MappingProxyType

from . import git, project
from .backend import Backend, open_backend
from .errors import BacklogError, InvalidInput
from .layout import Layout
from .logline import field_value
from .project import Pipeline, Project
from .typed import Any, NamedTuple, overload


class Lines(Sequence[str]):
    """A result's text lines, made when first read: a verb whose text is a pass over many tasks
    (`ready` at 100,000) pays for it only when the text is printed, not for `--json`."""

    __slots__ = ("_made", "_make")

    def __init__(self, make: Callable[[], Iterable[str]]) -> None:
        self._make: Callable[[], Iterable[str]] | None = make
        self._made: tuple[str, ...] = ()

    def _lines(self) -> tuple[str, ...]:
        if self._make is not None:
            self._made, self._make = tuple(self._make()), None
        return self._made

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...
    def __getitem__(self, index: int | slice) -> str | tuple[str, ...]:
        return self._lines()[index]

    def __len__(self) -> int:
        return len(self._lines())

    def __iter__(self) -> Iterator[str]:
        return iter(self._lines())

    def __eq__(self, other: object) -> bool:
        return self._lines() == (tuple(other) if isinstance(other, Lines) else other)

    def __hash__(self) -> int:
        return hash(self._lines())


class _Said(NamedTuple):
    data: Mapping[str, Any]
    lines: Sequence[str] = ()
    warnings: Sequence[str] = ()
    stderr: Sequence[str] = ()
    code: int = 0


class Result(_Said):
    """What a command returns: data for --json, lines for people (kept as they are when `Lines`,
    made when first read), warnings for stderr.

    Immutable: a caller that has more to say makes a new one with `plus`, which only ever adds,
    so nothing a callee said (a rescue's note, a warning) can be overwritten on the way up. Made
    with `data` a read-only copy and the other lines tuples. (A named tuple, as every record a
    call imports: a dataclass here would import `dataclasses`, and with it `inspect`, ~11 ms a
    call.)"""

    __slots__ = ()

    def __new__(
        cls,
        data: Mapping[str, Any],
        lines: Sequence[str] = (),
        warnings: Sequence[str] = (),
        stderr: Sequence[str] = (),
        code: int = 0,
    ) -> Result:
        return super().__new__(
            cls,
            MappingProxyType(dict(data)),
            lines if isinstance(lines, Lines) else tuple(lines),
            tuple(warnings),
            tuple(stderr),
            code,
        )

    def plus(
        self,
        *,
        data: Mapping[str, Any] | None = None,
        lines: Sequence[str] = (),
        warnings: Sequence[str] = (),
        stderr: Sequence[str] = (),
        before: Sequence[str] = (),
        code: int | None = None,
    ) -> Result:
        """This result with more said: `data` keys added (or replaced), lines, warnings and stderr
        lines appended (`before`: stderr lines that come first, e.g. the prelude's)."""
        return Result(
            {**self.data, **(data or {})},
            (*self.lines, *lines) if lines else self.lines,
            (*self.warnings, *warnings),
            (*before, *self.stderr, *stderr),
            self.code if code is None else code,
        )

    def json(self) -> dict[str, Any]:
        """`data` as a plain dict (for json.dumps)."""
        return dict(self.data)


class Context:
    """The opened backlog one command works with: the repository, its project, its backend, what
    the layout's self-heal found, and what the command read once (`cache`: the intake listing)."""

    def __init__(
        self,
        repo: git.Repo,
        project: Project,
        backend: Backend,
        heal_findings: list[str] | None = None,
        cache: dict[str, object] | None = None,
    ) -> None:
        self.repo, self.project, self.backend = repo, project, backend
        self.heal_findings: list[str] = [] if heal_findings is None else heal_findings
        self.cache: dict[str, object] = {} if cache is None else cache

    @property
    def pipeline(self) -> Pipeline:
        return self.project.pipeline

    @property
    def layout(self) -> Layout:
        return self.backend.layout


def open_context(cwd: Path | str, heal: bool = True, known: git.Found | None = None) -> Context:
    """The backlog around `cwd`, opened (and, with `heal`, its layout repaired). `known`: the
    repository an earlier call found there (`git.discover`)."""
    repo = git.discover(cwd, known)
    layout = Layout.of(repo)
    proj = project.load(layout.agents)
    backend = open_backend(repo, proj)
    backend.refuse_symlinks()
    # a migration's journal: it is running, or was killed midway and `maintain` (or the next
    # migrate) undoes or finishes it first; repairing the layout meanwhile would change the very
    # files the journal describes
    findings = backend.heal() if heal and not os.path.lexists(layout.journal) else []
    return Context(repo, backend.project, backend, findings)  # (its pipeline knows the clone's piles)


# the identity a caller gave in-process (`Backlog(path, claimer=...)`): set for one call only, and
# per thread or task (a ContextVar), so it never leaks into another call or into os.environ
GIVEN_CLAIMER = "Backlog(claimer=...)"
_given: ContextVar[str | None] = ContextVar("claimer", default=None)


@contextmanager
def acting_as(claimer: str | None) -> Iterator[None]:
    """Within the block, `claimer` (when given) is who acts, before any environment variable."""
    token = _given.set(claimer)
    try:
        yield
    finally:
        _given.reset(token)


# A harness-started MCP server (`setup --agent`, docs/agents.md): its configuration's entry sets
# BACKLOG_HARNESS to the harness's name, and the claimer is `<harness>:<session id>`, the session
# id the harness gives its server in this variable, else one made once per process (one server
# per agent session), so two agents in one worktree never share a claimer.
HARNESS = "BACKLOG_HARNESS"
HARNESS_SESSION = {"claude": "CLAUDE_CODE_SESSION_ID", "codex": "CODEX_THREAD_ID"}
_process_session: list[tuple[int, str]] = []  # (pid, id): a forked child makes its own


def session_id(harness: str) -> str:
    """The agent session's id for a harness-started process: the harness's own (HARNESS_SESSION),
    else a random one made once per process."""
    given = os.environ.get(HARNESS_SESSION.get(harness, ""), "").strip()
    if given:
        return given
    pid = os.getpid()
    if not _process_session or _process_session[0][0] != pid:
        _process_session[:] = [(pid, os.urandom(6).hex())]
    return _process_session[0][1]


def claimer_source() -> tuple[str, str]:
    """(the raw identity, where it came from): the identity given in-process (`acting_as`), else
    the first set of BACKLOG_CLAIMER, BACKLOG_HARNESS (`<harness>:<session id>`),
    CONDUCTOR_WORKSPACE_NAME, CMUX_WORKSPACE_ID, else USER@host."""
    given = _given.get()
    if given is not None:
        return given, GIVEN_CLAIMER
    env = os.environ
    if env.get("BACKLOG_CLAIMER", "").strip():
        return env["BACKLOG_CLAIMER"], "BACKLOG_CLAIMER"
    harness = env.get(HARNESS, "").strip()
    if harness:
        return f"{harness}:{session_id(harness)}", HARNESS
    if env.get("CONDUCTOR_WORKSPACE_NAME", "").strip():
        return f"conductor:{env['CONDUCTOR_WORKSPACE_NAME']}", "CONDUCTOR_WORKSPACE_NAME"
    if env.get("CMUX_WORKSPACE_ID", "").strip():
        return f"cmux:{env['CMUX_WORKSPACE_ID']}", "CMUX_WORKSPACE_ID"
    user = env.get("USER") or env.get("LOGNAME") or "user"
    return f"{user}@{hostname().split('.')[0]}", "user@host"


def hostname() -> str:
    """This machine's name: `uname`'s node name, which is what gethostname(2) answers on Linux and
    macOS, without importing `socket` (~4 ms a call); `socket` only where there is no `uname`."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket

    return socket.gethostname()


def claimer_id() -> str:
    """Who acts (SPEC §2): BACKLOG_CLAIMER, a harness's session, a conductor or cmux workspace,
    else user@host."""
    value, _source = claimer_source()
    claimer = field_value(value)
    if not claimer:
        raise InvalidInput(f"the claimer identity {value!r} has no printable characters: set BACKLOG_CLAIMER")
    return claimer


def unconfigured_note(words: str) -> str:
    """A read-only verb's one warning line for a declared remote this clone has not configured
    (SPEC §3; `words`: `Backend.unconfigured`): it answers from this clone's state and says so."""
    return f"warning: {words}; answered from this clone's state only"


def remote_note(ctx: Context) -> list[str]:
    """`unconfigured_note` when the declared remote is not configured in this clone, else nothing."""
    words = ctx.backend.unconfigured
    return [] if words is None else [unconfigured_note(words)]


def remote_needed(ctx: Context) -> None:
    """A verb that claims, settles or writes a remote record is refused (exit 2) when the declared
    remote is not configured in this clone, naming the AGENTS.md line and the `git remote add`
    to run (SPEC §3). Read-only verbs answer from local state instead (`remote_note`)."""
    if ctx.backend.unconfigured is not None:
        raise InvalidInput(ctx.backend.unconfigured)


def branch_of(ctx: Context) -> str:
    if ctx.repo.branch is None:
        raise BacklogError("HEAD is detached: check out a branch first (claims record the branch)")
    return ctx.repo.branch
