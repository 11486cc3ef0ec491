"""Connecting agent harnesses (`setup --agent`, SPEC §9, docs/agents.md): the kernel step.

Each harness is a few *entries*, each one thing in one file, written in the harness's own
configuration format (`confedit` edits the bytes):

| harness | file | entry |
|---|---|---|
| claude | `.mcp.json` | `mcpServers.backlog` |
| claude | `.claude/settings.json` | `hooks.SessionStart`: `backlog prime --hook`; `enabledMcpjsonServers`: backlog |
| codex | `.codex/config.toml` | `[mcp_servers.backlog]` |
| cursor | `.cursor/mcp.json` | `mcpServers.backlog` |
| cursor | `.cursor/rules/backlog.mdc` | the whole file (an always-applied rule) |
| every one | `AGENTS.md` (the worktree's root) | the section between the backlog markers |

An entry is found `installed`, `missing` or `outdated`. `connect` reads and parses every file
first (an unparsable one refuses the run, naming it, before anything is written), then writes
the changed files in one `change.Change` whose commit holds only them (a file with changes of
the user's, or ignored by git, is written but left out of the commit). The same files serve every
worktree and every agent: no absolute path, no claimer; the server's entry names its harness
(`BACKLOG_HARNESS`), and the claimer follows from the harness's session (context.claimer_source).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

from . import confedit, git, limits
from .change import Change, Dirs, Rmdir, Step, Write, run
from .context import HARNESS
from .errors import BacklogError, InvalidInput
from .layout import Layout

HARNESSES = ("claude", "codex", "cursor")
SERVER = "backlog"  # the server's name in every harness's configuration
HOOK_COMMAND = "backlog prime --hook"
HOOK_MATCHER = "startup|resume|clear|compact"
INSTALLED, MISSING, OUTDATED = "installed", "missing", "outdated"
GUIDE = "AGENTS.md"

GUIDE_BODY = """\
## Task queue

This repository's tasks are kept in `backlog/` and moved with the `backlog` command. Before you
start work, and again after your context was compacted or cleared, read the workflow: call the
`prime` tool of the `backlog` MCP server, or run `backlog prime`. It tells you how to take a task,
report progress and finish it, who you are as a claimer, and what each exit code means.
"""

RULE_HEAD = """\
---
description: The task queue of this repository (backlog) and how to take and finish tasks
alwaysApply: true
---

"""


class Entry(NamedTuple):
    """One thing setup puts in one file: how to tell whether it is there, put it, take it away
    (None: nothing else is left in the file, which goes)."""

    agent: str | None  # None: every harness's (the root AGENTS.md's section)
    path: str  # relative to the worktree's root
    what: str
    state: Callable[[bytes | None, str], str]
    put: Callable[[bytes | None, str], bytes]
    take: Callable[[bytes | None, str], bytes | None]


class Connected(NamedTuple):
    """What `connect` found and did."""

    items: list[dict[str, Any]]  # {agent, path, what, state}: as found, before any change
    paths: list[str]  # the files written (or removed)
    committed: list[str]  # those the commit holds
    notes: list[str]


# -- the entries ---------------------------------------------------------------------------------
def _server(harness: str) -> dict[str, Any]:
    """The MCP server's entry: the command on PATH, the harness named (no path, no claimer)."""
    args = ["-C", "${workspaceFolder}", "mcp"] if harness == "cursor" else ["mcp"]  # Cursor starts it in /
    return {"command": "backlog", "args": args, "env": {HARNESS: harness}}


def _merged(old: Any, ours: dict[str, Any]) -> dict[str, Any]:
    """`old` (an entry of the user's making, maybe) with our keys set, its other keys kept."""
    entry = dict(old) if isinstance(old, dict) else {}
    for key, value in ours.items():
        if isinstance(value, dict):
            inner = entry.get(key)
            entry[key] = {**(inner if isinstance(inner, dict) else {}), **value}
        else:
            entry[key] = value
    return entry


def _server_state(entry: Any, ours: dict[str, Any]) -> str:
    if entry is None:
        return MISSING
    return INSTALLED if _merged(entry, ours) == entry else OUTDATED


def _json_server(agent: str, path: str) -> Entry:
    ours = _server(agent)

    def servers(data: bytes | None, label: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
        doc = confedit.load_json(data, label)
        return doc, confedit.table_of(doc, "mcpServers", label)

    def state(data: bytes | None, label: str) -> str:
        _doc, table = servers(data, label)
        return _server_state((table or {}).get(SERVER), ours)

    def put(data: bytes | None, label: str) -> bytes:
        doc, table = servers(data, label)
        table = doc.setdefault("mcpServers", {})
        table[SERVER] = _merged(table.get(SERVER), ours)
        return confedit.dump_json(doc, data)

    def take(data: bytes | None, label: str) -> bytes | None:
        doc, table = servers(data, label)
        if table is None or SERVER not in table:
            return data
        del table[SERVER]
        if not table:
            del doc["mcpServers"]
        return confedit.dump_json(doc, data) if doc else None

    return Entry(agent, path, f"mcpServers.{SERVER}", state, put, take)


def _codex_server() -> Entry:
    ours, where = _server("codex"), ("mcp_servers", SERVER)

    def found(data: bytes | None, label: str) -> Any:
        doc = confedit.load_toml(data, label)
        outer = doc.get(where[0])
        if outer is not None and not isinstance(outer, dict):
            raise InvalidInput(f"{label}: `{where[0]}` is not a table; fix it or move it aside: nothing was changed")
        return (outer or {}).get(SERVER)

    def state(data: bytes | None, label: str) -> str:
        entry = found(data, label)
        if entry is not None:
            confedit.toml_with_table(data, where, None, label)  # refused now when setup could not edit it
        return _server_state(entry, ours)

    def put(data: bytes | None, label: str) -> bytes:
        return confedit.toml_with_table(data, where, _merged(found(data, label), ours), label)

    def take(data: bytes | None, label: str) -> bytes | None:
        if found(data, label) is None:
            return data
        new = confedit.toml_with_table(data, where, None, label)
        return new if new.strip() else None

    return Entry("codex", ".codex/config.toml", f"[mcp_servers.{SERVER}]", state, put, take)


def _ours(hook: Any) -> bool:
    return isinstance(hook, dict) and hook.get("command") == HOOK_COMMAND


def _session_start(doc: dict[str, Any], label: str) -> list[Any] | None:
    hooks = confedit.table_of(doc, "hooks", label)
    groups = confedit.list_of(hooks, "SessionStart", label) if hooks is not None else None
    for group in groups or ():
        if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
            shape = "{matcher, hooks: [...]}"
            raise InvalidInput(f"{label}: a hooks.SessionStart group is not {shape}: nothing was changed")
    return groups


def _without_hook(doc: dict[str, Any], label: str) -> None:
    """Every hook running our command taken out (a group left empty goes, then empty containers)."""
    groups = _session_start(doc, label)
    if groups is None:
        return
    for group in groups:
        group["hooks"] = [hook for hook in group["hooks"] if not _ours(hook)]
    groups[:] = [group for group in groups if group["hooks"]]
    if not groups:
        del doc["hooks"]["SessionStart"]
        if not doc["hooks"]:
            del doc["hooks"]


def _claude_hook() -> Entry:
    group = {"matcher": HOOK_MATCHER, "hooks": [{"type": "command", "command": HOOK_COMMAND}]}

    def state(data: bytes | None, label: str) -> str:
        groups = _session_start(confedit.load_json(data, label), label) or []
        places = [(g.get("matcher"), h) for g in groups for h in g["hooks"] if _ours(h)]
        if not places:
            return MISSING
        fine = len(places) == 1 and places[0][0] == HOOK_MATCHER and places[0][1].get("type") == "command"
        return INSTALLED if fine else OUTDATED

    def put(data: bytes | None, label: str) -> bytes:
        doc = confedit.load_json(data, label)
        _without_hook(doc, label)
        hooks = doc.setdefault("hooks", {})
        hooks.setdefault("SessionStart", []).append(group)
        return confedit.dump_json(doc, data)

    def take(data: bytes | None, label: str) -> bytes | None:
        doc = confedit.load_json(data, label)
        _without_hook(doc, label)
        return confedit.dump_json(doc, data) if doc else None

    return Entry("claude", ".claude/settings.json", "hooks.SessionStart", state, put, take)


def _claude_approval() -> Entry:
    """The project's server approved (else Claude Code waits for a person to approve it, and an
    unattended session never starts it)."""
    key = "enabledMcpjsonServers"

    def state(data: bytes | None, label: str) -> str:
        listed = confedit.list_of(confedit.load_json(data, label), key, label)
        return INSTALLED if listed is not None and SERVER in listed else MISSING

    def put(data: bytes | None, label: str) -> bytes:
        doc = confedit.load_json(data, label)
        confedit.list_of(doc, key, label)
        doc.setdefault(key, []).append(SERVER)
        return confedit.dump_json(doc, data)

    def take(data: bytes | None, label: str) -> bytes | None:
        doc = confedit.load_json(data, label)
        listed = confedit.list_of(doc, key, label)
        if listed is None or SERVER not in listed:
            return data
        doc[key] = [name for name in listed if name != SERVER]
        if not doc[key]:
            del doc[key]
        return confedit.dump_json(doc, data) if doc else None

    return Entry("claude", ".claude/settings.json", f"{key}: {SERVER}", state, put, take)


def _marked(agent: str | None, path: str, what: str, whole: bytes | None) -> Entry:
    """The section between the markers; `whole`: the file is all ours (these exact bytes), and a
    file of the same name without our markers is somebody else's: refused."""

    def mine(data: bytes | None, label: str) -> None:
        if whole is not None and data is not None and confedit.section_span(data, label) is None:
            raise InvalidInput(f"{label}: not written by backlog setup; move it aside: nothing was changed")

    def state(data: bytes | None, label: str) -> str:
        mine(data, label)
        span = confedit.section_span(data, label)
        if data is None or span is None:
            return MISSING
        if whole is not None:
            return INSTALLED if data == whole else OUTDATED
        ours = confedit.render_section(GUIDE_BODY, confedit.newline(data))
        return INSTALLED if data[span[0] : span[1]] == ours else OUTDATED

    def put(data: bytes | None, label: str) -> bytes:
        mine(data, label)
        return whole if whole is not None else confedit.with_section(data, GUIDE_BODY, label)

    def take(data: bytes | None, label: str) -> bytes | None:
        mine(data, label)
        if whole is not None:
            return None
        return confedit.without_section(data, label)

    return Entry(agent, path, what, state, put, take)


def rule_file() -> bytes:
    """`.cursor/rules/backlog.mdc`: frontmatter, then the guide's section (markers included)."""
    return RULE_HEAD.encode() + confedit.render_section(GUIDE_BODY)


def entries(agent: str) -> list[Entry]:
    """A harness's own entries (the root AGENTS.md's section is `guide()`)."""
    if agent == "claude":
        return [_json_server("claude", ".mcp.json"), _claude_hook(), _claude_approval()]
    if agent == "codex":
        return [_codex_server()]
    return [
        _json_server("cursor", ".cursor/mcp.json"),
        _marked("cursor", ".cursor/rules/backlog.mdc", "rule", rule_file()),
    ]


def guide() -> Entry:
    return _marked(None, GUIDE, "section backlog:begin…end", None)


# -- reading and writing -----------------------------------------------------------------------
class _File(NamedTuple):
    real: Path
    rel: str  # the real file's path in the worktree (a symlink inside it followed)
    data: bytes | None


def _open(top: Path, rel: str) -> _File:
    real = Path(os.path.realpath(top / rel))
    if not real.is_relative_to(top) or real == top or real.relative_to(top).parts[0] == ".git":
        raise InvalidInput(f"{rel}: a symlink leading outside the work tree; not following it: nothing was changed")
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return _File(real, real.relative_to(top).as_posix(), None)
    except OSError as exc:
        what = "is a directory" if exc.errno == errno.EISDIR else f"cannot be read: {exc.strerror}"
        raise BacklogError(f"{rel}: {what}: nothing was changed") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InvalidInput(f"{rel}: not a regular file: nothing was changed")
        if info.st_size > limits.CONFIG_BYTES:
            size = f"{info.st_size:,} bytes > {limits.CONFIG_BYTES:,}"
            raise InvalidInput(f"{rel}: too large ({size}): nothing was changed")
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return _File(real, real.relative_to(top).as_posix(), b"".join(chunks))
    finally:
        os.close(fd)


def _states(chosen: Iterable[Entry], files: dict[str, _File]) -> list[tuple[Entry, str]]:
    return [(entry, entry.state(files[entry.path].data, entry.path)) for entry in chosen]


def _others_present(top: Path, agents: list[str], files: dict[str, _File]) -> bool:
    """Is any harness not being removed still connected here (even in part, or unreadably)?"""
    for other in HARNESSES:
        if other in agents:
            continue
        for entry in entries(other):
            try:
                found = files.get(entry.path) or _open(top, entry.path)
                if entry.state(found.data, entry.path) != MISSING:
                    return True
            except BacklogError:
                return True
    return False


def connect(repo: git.Repo, agents: list[str], mode: str) -> Connected:
    """Install (`mode` "install"), look (`check`) or take away (`remove`) the harnesses' entries."""
    top = Path(os.path.realpath(repo.toplevel))
    chosen = [entry for agent in agents for entry in entries(agent)] + [guide()]
    opened: dict[str, _File] = {}
    for entry in chosen:
        if entry.path not in opened:
            opened[entry.path] = _open(top, entry.path)
    found = _states(chosen, opened)  # every file parsed before anything is written
    notes: list[str] = []
    if mode == "remove" and _others_present(top, agents, opened):
        found = [(entry, state) for entry, state in found if entry.agent is not None]
        notes.append(f"{GUIDE}'s section kept: another harness is still connected")
    items = [{"agent": e.agent, "path": e.path, "what": e.what, "state": state} for e, state in found]
    if mode == "install" and not Layout.of(repo).agents.exists():
        notes.append("no backlog here yet: the MCP server and `backlog prime` need one (`backlog setup --backend=...`)")
    if mode == "check":
        return Connected(items, [], [], notes)
    files = {f.rel: f for f in opened.values()}  # by the real file: two names for one are one file
    new = {rel: f.data for rel, f in files.items()}
    for entry, state in found:
        rel = opened[entry.path].rel
        if mode == "install" and state != INSTALLED:
            new[rel] = entry.put(new[rel], entry.path)
        elif mode == "remove" and state != MISSING:
            new[rel] = entry.take(new[rel], entry.path)
    changes = [(f, new[rel]) for rel, f in files.items() if new[rel] != f.data]
    written, committed = _write(repo, top, changes, mode, agents)
    left = [path for path in written if path not in committed]
    if left:
        notes.append(f"not committed (changes of yours not committed yet, or ignored by git): {', '.join(left)}")
    return Connected(items, written, committed, notes)


def _write(
    repo: git.Repo, top: Path, changes: list[tuple[_File, bytes | None]], mode: str, agents: list[str]
) -> tuple[list[str], list[str]]:
    """Write the changed files in one change; commit those that hold nothing of the user's
    uncommitted (nor ignored). Returns (written, committed); the notes say why one was left out."""
    if not changes:
        return [], []
    rels = [f.rel for f, _new in changes]
    aside = set(git.dirty(repo, *rels)) | set(git.ignored(repo, *rels))
    steps: list[Step] = []
    for f, data in changes:
        if data is not None and not f.real.parent.is_dir():
            steps.append(Dirs(f.real.parent))
        steps.append(Write(f.real, f.data, data, None if f.rel in aside else f.rel))
    steps += [Rmdir(d) for d in _emptied(top, [f.real for f, data in changes if data is None])]
    verb = "connect" if mode == "install" else "disconnect"
    committed = [rel for rel in rels if rel not in aside]
    change = Change(tuple(steps), f"chore(backlog): {verb} agent harnesses ({', '.join(agents)})")
    run(change, repo)
    return rels, committed


def _emptied(top: Path, removed: list[Path]) -> list[Path]:
    """The directories (deepest first) that removing these files leaves empty, up to the top."""
    gone = set(removed)
    emptied: list[Path] = []
    for directory in sorted({p.parent for p in removed}, key=lambda p: -len(p.parts)):
        while directory != top and directory.is_relative_to(top):
            try:
                left = {directory / name for name in os.listdir(directory)}
            except OSError:
                break
            if not left <= gone:
                break
            gone.add(directory)
            if directory not in emptied:
                emptied.append(directory)
            directory = directory.parent
    return sorted(emptied, key=lambda p: -len(p.parts))
