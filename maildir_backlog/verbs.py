"""The verbs of SPEC §5, as plain functions over a Context.

Each verb speaks in slugs and piles; the backend moves files. Verbs that change a task follow
one discipline: check the precondition, take the task's lock, re-check it on fresh state
(a change in between means another process won: Conflict, exit 3), then apply.
"""
from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Callable

from . import git
from .backend import Backend, Located, open_backend
from .errors import BacklogError, Conflict, InvalidInput
from .ledger import Settled
from .project import CATEGORIES, FAILED, Project, parse_declaration
from .task import (
    LogEntry,
    Task,
    append_line,
    format_duration,
    format_ts,
    make_entry,
    now_utc,
    parse_task,
    validate_slug,
)


@dataclass
class Result:
    """What a verb returns: data for --json, lines for people, warnings for stderr."""

    data: dict
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
    def pipeline(self):
        return self.project.pipeline


def read_project(repo: git.Repo) -> Project:
    path = repo.toplevel / "backlog" / "AGENTS.md"
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise BacklogError("no backlog here: backlog/AGENTS.md is missing (run `backlog setup --backend=...`)") from None
    except UnicodeDecodeError:
        raise InvalidInput("backlog/AGENTS.md: not valid UTF-8 text") from None
    return parse_declaration(text)


def open_context(cwd: Path | str, heal: bool = True) -> Context:
    repo = git.discover(cwd)
    project = read_project(repo)
    backend = open_backend(repo, project)
    findings = backend.heal() if heal else []
    return Context(repo, project, backend, findings)


# -- identity ------------------------------------------------------------------------------
def claimer_id() -> str:
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
    return "-".join(value.split())


def branch_of(ctx: Context) -> str:
    if ctx.repo.branch is None:
        raise BacklogError("HEAD is detached: check out a branch first (claims record the branch)")
    return ctx.repo.branch


# -- helpers -------------------------------------------------------------------------------
def _where(locs: list[Located]) -> str:
    return ", ".join(f"{loc.pile}/" for loc in locs)


def find_one(ctx: Context, slug: str) -> Located:
    """The one place of `slug`. An in-flight copy wins over tracked ones: in maildir-shared a
    branch made before the claim still holds the task in its todo/, which is expected."""
    locs = ctx.backend.locate(slug)
    if not locs:
        raise BacklogError(f"no task {slug} in any pile")
    flying = [loc for loc in locs if ctx.pipeline.is_in_flight(loc.pile)]
    if len(flying) == 1 and ctx.backend.name == "maildir-shared":
        return flying[0]
    if len(locs) > 1:
        raise BacklogError(f"{slug} is in several piles ({_where(locs)}): run `backlog maintain` to repair")
    return locs[0]


def find_in_flight(ctx: Context, slug: str, verb: str) -> Located:
    loc = find_one(ctx, slug)
    if not ctx.pipeline.is_in_flight(loc.pile):
        raise BacklogError(f"{slug} is in {loc.pile}/, not in flight: only in-flight tasks can be {verb}")
    return loc


def budget(task: Task) -> str:
    return f"{task.timeout_text}{' (default)' if task.timeout_is_default else ''}"


def clock_start(task: Task, loc: Located) -> datetime:
    start = task.clock_start()
    if start is None:
        start = datetime.fromtimestamp(os.lstat(loc.path).st_mtime, tz=now_utc().tzinfo)
    return start


def time_left(task: Task, loc: Located, now: datetime | None = None) -> timedelta:
    now = now or now_utc()
    return clock_start(task, loc) + task.timeout - now


def is_timed_out(task: Task, loc: Located, now: datetime | None = None) -> bool:
    return time_left(task, loc, now) < timedelta(0)


def locked_change(
    ctx: Context,
    slug: str,
    check: Callable[[], tuple[Located, bytes]],
) -> Callable[[Callable[[Located, bytes], Result]], Result]:
    """Run `check` unlocked (failures are refusals), then under the task's lock again
    (failures there mean another process changed the task meanwhile: Conflict)."""

    def run(body: Callable[[Located, bytes], Result]) -> Result:
        check()
        with ctx.backend.lock(slug):
            try:
                loc, data = check()
            except Conflict:
                raise
            except BacklogError as exc:
                raise Conflict(f"{slug} changed while waiting for its lock: {exc.message}") from None
            return body(loc, data)

    return run


def _commit_label(ctx: Context) -> str:
    return f"({claimer_id()} @ {ctx.repo.branch or 'HEAD'})"


def _settled(ctx: Context, slug: str, outcome: str) -> Settled:
    return Settled(slug, now_utc(), outcome, ctx.repo.branch or "HEAD", claimer_id())


# -- setup ---------------------------------------------------------------------------------
ROADMAP = """# Roadmap

The strategic counterpart of the task piles: where the project is going and why.
Tasks in `todo/` should trace back to something here. `backlog` does not read this file.

## Now

## Next

## Later
"""


def setup(cwd: Path | str, backend: str | None, pipeline_text: str | None) -> Result:
    from .project import BACKENDS, Pipeline, parse_pipeline, render_declaration
    from . import storage

    repo = git.discover(cwd)
    if backend is None:
        hint = "maildir-shared" if len(git.worktrees(repo)) > 1 else "maildir-git"
        raise InvalidInput(f"choose a backend: backlog setup --backend={hint} (maildir-shared or maildir-git)")
    if backend not in BACKENDS:
        raise InvalidInput(f"backend {backend!r} is not supported by this tool (maildir-shared or maildir-git)")
    pipeline = parse_pipeline(pipeline_text, "--pipeline") if pipeline_text else Pipeline()
    root = repo.toplevel / "backlog"
    agents = root / "AGENTS.md"
    if os.path.lexists(agents):
        raise BacklogError("backlog/AGENTS.md already exists: this backlog is set up; not overwriting it")
    project = Project(backend, pipeline)
    be = open_backend(repo, project)
    # Everything setup may create, in creation order: on failure (say a pre-commit hook refuses
    # the commit) whatever did not exist before is removed again, so setup leaves no trace (§7.3).
    candidates = [root, agents, root / "CLAUDE.md", root / "ROADMAP.md"]
    for pile in pipeline.all_piles:
        if not be.is_shared(pile):
            candidates += [root / pile, root / pile / ".gitkeep"]
    candidates += [be.shared_root] + [be.pile_dir(p) for p in pipeline.all_piles if be.is_shared(p)]
    candidates += [be.shared_root / ".locks", be.shared_root / ".locks" / ".layout.lock"]
    candidates += [root / p for p in pipeline.all_piles if be.is_shared(p)]
    new_paths = [c for c in candidates if not os.path.lexists(c)]
    gitignore = repo.toplevel / ".gitignore"
    gitignore_before = gitignore.read_bytes() if gitignore.exists() else None
    try:
        storage.ensure_dir(root)
        paths = []
        storage.write_file(agents, render_declaration(backend, pipeline).encode())
        paths.append("backlog/AGENTS.md")
        claude = root / "CLAUDE.md"
        if not os.path.lexists(claude):
            os.symlink("AGENTS.md", claude)
            paths.append("backlog/CLAUDE.md")
        roadmap = root / "ROADMAP.md"
        if not os.path.lexists(roadmap):
            storage.write_file(roadmap, ROADMAP.encode())
            paths.append("backlog/ROADMAP.md")
        for pile in pipeline.all_piles:
            if be.is_shared(pile):
                continue
            keep = root / pile / ".gitkeep"
            storage.ensure_dir(keep.parent)
            if not keep.exists():
                storage.write_file(keep, b"")
                paths.append(be.rel(keep))
        be.ensure_piles()
        findings = be.heal()
        if gitignore.exists() and gitignore.read_bytes() != gitignore_before:
            paths.append(".gitignore")
        git.commit_paths(repo, paths, f"chore(backlog): set up {backend} backlog")
    except BaseException:
        for path in reversed(new_paths):
            try:
                if path.is_dir() and not path.is_symlink():
                    path.rmdir()  # only when empty: never removes anything setup did not create
                else:
                    path.unlink()
            except OSError:
                pass
        if gitignore_before is None:
            gitignore.unlink(missing_ok=True)
        elif gitignore.exists() and gitignore.read_bytes() != gitignore_before:
            storage.write_file(gitignore, gitignore_before)
        raise
    lines = [f"set up {backend} backlog in backlog/ (pipeline: {' → '.join(pipeline.piles)})"]
    return Result({"backend": backend, "pipeline": list(pipeline.piles), "paths": paths, "layout": findings}, lines)


# -- add -----------------------------------------------------------------------------------
EMPTY = '""'


def _yaml_scalar(value: str) -> str:
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9 ._/:-]*", value) and ": " not in value and value.strip() == value:
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def add(
    ctx: Context,
    slug: str,
    category: str | None = None,
    priority: int | None = None,
    timeout: str | None = None,
    depends: list[str] | None = None,
    title: str | None = None,
    body: str | None = None,
) -> Result:
    from .task import parse_duration

    validate_slug(slug)
    category = category or "plan"
    if category not in CATEGORIES:
        raise InvalidInput(f"unknown category {category!r}: use one of {', '.join(CATEGORIES)}")
    full = validate_slug(f"{slug}-{category}")
    if priority is not None and priority < 1:
        raise InvalidInput(f"invalid priority {priority}: expected a whole number >= 1")
    if timeout is not None:
        try:
            parse_duration(timeout)
        except InvalidInput as exc:
            raise InvalidInput(f"--timeout: {exc.message}") from None
    deps: list[tuple[str, str]] = []
    for spec in depends or []:
        name, _, reason = spec.partition(":")
        deps.append((validate_slug(name.strip()), " ".join(reason.split())))
    meta = []
    if priority is not None:
        meta.append(f"priority: {priority}")
    if timeout is not None:
        meta.append(f"timeout: {timeout}")
    if deps:
        meta.append("dependencies:")
        meta += [f"  {name}: {_yaml_scalar(reason) if reason else EMPTY}" for name, reason in deps]
    heading = " ".join((title or slug.replace("-", " ").replace("_", " ")).split())
    text = ""
    if meta:
        text += "---\n" + "\n".join(meta) + "\n---\n\n"
    text += f"# {heading}\n"
    if body and body.strip():
        text += "\n" + body.strip("\n") + "\n"
    text += "\n---\n\n"
    data = text.encode()
    pile = ctx.pipeline.first
    parse_task(full, ctx.backend.display(pile, full), data, ctx.project.defaults)  # validate before writing
    with ctx.backend.lock(full):
        existing = ctx.backend.locate(full)
        if existing:
            raise BacklogError(f"{full} already exists in {_where(existing)}")
        entry = ctx.backend.settled(full)
        if entry is not None:
            raise BacklogError(
                f"{full} was already settled ({entry.outcome}) on branch {entry.branch}:"
                " a revisit is a new task that names the old slug"
            )
        ctx.backend.apply(full, None, pile, data, f"add({full})")
    shown = ctx.backend.display(pile, full)
    return Result({"slug": full, "pile": pile, "path": shown}, [shown])


# -- claims and moves ----------------------------------------------------------------------
def _claim_check(ctx: Context, slug: str) -> Callable[[], tuple[Located, bytes]]:
    def check() -> tuple[Located, bytes]:
        locs = ctx.backend.locate(slug)
        flying = [l for l in locs if ctx.pipeline.is_in_flight(l.pile)]
        if flying:
            raise Conflict(f"claim conflict: {slug} already in flight")
        todo = [l for l in locs if l.pile == "todo"]
        if not todo:
            if not locs:
                raise BacklogError(f"no task {slug} in any pile")
            raise BacklogError(f"{slug} is in {_where(locs)}, not in todo/")
        data = ctx.backend.read(todo[0])
        task = ctx.backend.load(todo[0], data)  # a malformed task is refused before it is claimed
        entry = ctx.backend.settled(slug)
        if entry is not None and entry.blocks(task):
            raise BacklogError(stale_copy(entry))
        return todo[0], data

    return check


def stale_copy(entry: Settled) -> str:
    """Why a todo copy may not be claimed: the ledger knows a newer state on another branch."""
    if entry.outcome == "retried":
        return (f"{entry.slug} was retried on branch {entry.branch}: this todo copy is stale"
                f" (merge {entry.branch} to get the retried task)")
    return (f"{entry.slug} was already settled ({entry.outcome}) on branch {entry.branch}:"
            f" this todo copy is stale (merge {entry.branch}, or retry it there)")


def _claim(ctx: Context, slug: str) -> Result:
    branch = branch_of(ctx)
    target = ctx.pipeline.next_pile("todo")

    def body(loc: Located, data: bytes) -> Result:
        claimer = claimer_id()
        entry = make_entry("advanced", {"to": target, "claimer": claimer, "branch": branch})
        new = append_line(data, entry)
        settle = _settled(ctx, slug, "done") if target == "done" else None
        dst = ctx.backend.apply(
            slug, loc, target, new, f"advance({slug}) → {target} ({claimer} @ {branch})", settle=settle, old=data
        )
        shown = ctx.backend.display(dst.pile, slug)
        result = Result({"slug": slug, "pile": dst.pile, "path": shown, "claimer": claimer, "branch": branch}, [shown])
        unmet = _unmet(ctx, ctx.backend.load(loc, data).dependencies)
        if unmet:  # only a named take gets here: auto-pick never picks a blocked task
            result.warnings.append(f"warning: {slug} depends on {', '.join(unmet)}, not done yet")
        return result

    return locked_change(ctx, slug, _claim_check(ctx, slug))(body)


def timeout_reason(task: Task, loc: Located) -> str:
    claim = task.claim_of_record()
    claimer = claim.get("claimer", "?") if claim else "?"
    return f"timeout: budget={budget(task)}, claimed={format_ts(clock_start(task, loc))}, claimer={claimer}"


def terminal_event(task: Task) -> tuple[str, str, LogEntry] | None:
    """(outcome, destination pile, entry) when the log's last transition is terminal."""
    for entry in reversed(task.log):
        if entry.kind == "progress":
            continue
        if entry.kind == "advanced" and entry.get("to") == "done":
            return "done", "done", entry
        if entry.kind == "cancelled":
            return "cancelled", "done", entry
        if entry.kind == "failed":
            return "failed", FAILED, entry
        return None
    return None


def fail_timed_out(ctx: Context, slug: str) -> Result:
    """Fail an in-flight task that is past its budget (the prelude's and the janitor's fix)."""

    def check() -> tuple[Located, bytes]:
        loc = find_in_flight(ctx, slug, "failed")
        data = ctx.backend.read(loc)
        task = ctx.backend.load(loc, data)
        if terminal_event(task) is not None:  # it already ended: `maintain` finishes that move
            raise BacklogError(f"{slug} already ended; `backlog maintain` finishes moving it")
        if not is_timed_out(task, loc):
            raise BacklogError(f"{slug} is within its budget")
        return loc, data

    def body(loc: Located, data: bytes) -> Result:
        task = ctx.backend.load(loc, data)
        reason = timeout_reason(task, loc)
        return _terminal(ctx, slug, loc, data, FAILED, make_entry("failed", text=reason), f"fail({slug}) {reason}")

    return locked_change(ctx, slug, check)(body)


def prelude(ctx: Context, skip: str | None = None) -> list[str]:
    """Fail every timed-out in-flight task other than `skip`. Returns one line per task failed."""
    failed = []
    now = now_utc()
    for slug, locs in sorted(ctx.backend.in_flight().items()):
        if slug == skip or len(locs) != 1:
            continue
        try:
            task = ctx.backend.load(locs[0])
            if not is_timed_out(task, locs[0], now):
                continue
            fail_timed_out(ctx, slug)
            failed.append(f"failed {slug}: {timeout_reason(task, locs[0])}")
        except (BacklogError, FileNotFoundError):
            continue  # another process got there first, or the file is unreadable: the janitor reports it
    return failed


def _rescue(ctx: Context, slug: str) -> Result:
    branch = branch_of(ctx)

    def check() -> tuple[Located, bytes]:
        loc = find_in_flight(ctx, slug, "rescued")
        data = ctx.backend.read(loc)
        task = ctx.backend.load(loc, data)
        left = time_left(task, loc)
        if left >= timedelta(0):
            raise BacklogError(
                f"{slug} is still within its budget ({budget(task)}): {format_duration(left)} left; rescue refused"
            )
        return loc, data

    def body(loc: Located, data: bytes) -> Result:
        claimer = claimer_id()
        new = append_line(data, make_entry("rescued", {"claimer": claimer, "branch": branch}))
        message = None if loc.shared else f"rescue({slug}) {claimer} @ {branch}"
        ctx.backend.apply(slug, loc, loc.pile, new, message, old=data)
        shown = ctx.backend.display(loc.pile, slug)
        return Result({"slug": slug, "pile": loc.pile, "path": shown, "rescued": True, "claimer": claimer}, [shown])

    return locked_change(ctx, slug, check)(body)


def rescue(ctx: Context, slug: str) -> Result:
    validate_slug(slug)
    return _rescue(ctx, slug)


def take(ctx: Context, slug: str | None = None) -> Result:
    if slug is not None:
        validate_slug(slug)
    branch_of(ctx)
    failed = prelude(ctx, skip=slug)
    if slug is not None:
        locs = ctx.backend.locate(slug)
        flying = [l for l in locs if ctx.pipeline.is_in_flight(l.pile)]
        if len(flying) == 1:
            task = ctx.backend.load(flying[0])
            if is_timed_out(task, flying[0]):
                result = _rescue(ctx, slug)
                result.stderr = failed
                return result
        result = _claim(ctx, slug)
        result.stderr = failed
        return result
    skipped: list[str] = []
    for candidate in candidates(ctx, skipped):
        try:
            result = _claim(ctx, candidate)
        except Conflict:
            continue
        except BacklogError:
            continue  # settled meanwhile, or vanished: try the next one
        result.warnings += skipped
        result.stderr = failed
        return result
    return Result({"slug": None, "message": "no available tasks"}, [], skipped, stderr=failed + ["no available tasks"])


def _unmet(ctx: Context, deps) -> list[str]:
    done = ctx.backend.slugs("done")
    return [d for d in deps if d not in done]


def candidates(ctx: Context, skipped: list[str] | None = None) -> list[str]:
    """Auto-pick order: todo tasks not in flight anywhere, not settled elsewhere, every
    dependency in done/; priority ascending, then newest mtime, then slug. Unreadable or
    malformed todo files are left out, with one warning line each appended to `skipped`."""
    flying = ctx.backend.in_flight()
    settled = ctx.backend.settled_names()
    done = ctx.backend.slugs("done")
    ranked = []
    for slug, (entry, summary) in ctx.backend.summaries("todo").items():
        if summary.error:
            if skipped is not None:
                skipped.append(f"warning: skipped {summary.error}")
            continue
        if slug in flying:
            continue
        if any(dep not in done for dep in summary.dependencies):
            continue
        if slug in settled:
            loc = Located(slug, "todo", Path(entry.path), False)
            stale = ctx.backend.settled(slug)
            try:
                if stale is not None and stale.blocks(ctx.backend.load(loc)):
                    continue
            except (BacklogError, FileNotFoundError):
                continue
        mtime = entry.stat(follow_symlinks=False).st_mtime_ns
        ranked.append((summary.priority, -mtime, slug))
    ranked.sort()
    return [slug for _, _, slug in ranked]


def _terminal(ctx: Context, slug: str, loc: Located, data: bytes, pile: str, entry, message: str) -> Result:
    new = append_line(data, entry, ctx.backend.display(loc.pile, slug))
    outcome = {"advanced": "done"}.get(entry.kind, entry.kind)
    dst = ctx.backend.apply(slug, loc, pile, new, message, settle=_settled(ctx, slug, outcome), old=data)
    shown = ctx.backend.display(dst.pile, slug)
    return Result({"slug": slug, "pile": dst.pile, "path": shown}, [shown])


def advance(ctx: Context, slug: str, pr: str | None = None) -> Result:
    validate_slug(slug)
    if pr is not None and (not pr.strip() or any(c.isspace() for c in pr.strip())):
        raise InvalidInput(f"invalid --pr {pr!r}: expected a URL without spaces")
    branch_of(ctx)
    failed = prelude(ctx, skip=slug)
    loc = find_one(ctx, slug)
    if loc.pile == "todo":
        result = _claim(ctx, slug)
        result.stderr = failed
        return result
    if loc.pile in ("done", FAILED):
        hint = "it is finished" if loc.pile == "done" else "use `backlog retry` to reopen it"
        raise BacklogError(f"{slug} is in {loc.pile}/: {hint}")
    start = loc.pile

    def check() -> tuple[Located, bytes]:
        now = find_one(ctx, slug)
        if now.pile != start:
            raise BacklogError(f"{slug} is now in {now.pile}/")
        return now, ctx.backend.read(now)

    def body(loc: Located, data: bytes) -> Result:
        target = ctx.pipeline.next_pile(loc.pile)
        if target == "done":
            entry = make_entry("advanced", {"to": "done"}, f"PR={pr.strip()}" if pr else None)
            message = f"advance({slug}) → done" + (f" PR={pr.strip()}" if pr else "")
            return _terminal(ctx, slug, loc, data, "done", entry, message)
        new = append_line(data, make_entry("advanced", {"to": target}), ctx.backend.display(loc.pile, slug))
        both_shared = loc.shared and ctx.backend.is_shared(target)
        message = None if both_shared else f"advance({slug}) → {target} {_commit_label(ctx)}"
        dst = ctx.backend.apply(slug, loc, target, new, message, old=data)
        shown = ctx.backend.display(dst.pile, slug)
        return Result({"slug": slug, "pile": dst.pile, "path": shown}, [shown])

    result = locked_change(ctx, slug, check)(body)
    result.stderr = failed
    return result


def _end(ctx: Context, slug: str, reason: str, kind: str, pile: str, verb: str) -> Result:
    validate_slug(slug)
    entry = make_entry(kind, text=reason)  # refuses an empty reason, folds newlines
    start = find_in_flight(ctx, slug, verb).pile

    def check() -> tuple[Located, bytes]:
        now = find_in_flight(ctx, slug, verb)
        if now.pile != start:
            raise BacklogError(f"{slug} is now in {now.pile}/")
        return now, ctx.backend.read(now)

    def body(loc: Located, data: bytes) -> Result:
        name = "cancel" if kind == "cancelled" else "fail"
        return _terminal(ctx, slug, loc, data, pile, entry, f"{name}({slug}) {entry.text}")

    return locked_change(ctx, slug, check)(body)


def cancel(ctx: Context, slug: str, reason: str) -> Result:
    return _end(ctx, slug, reason, "cancelled", "done", "cancelled")


def fail(ctx: Context, slug: str, reason: str) -> Result:
    return _end(ctx, slug, reason, "failed", FAILED, "failed")


def progress(ctx: Context, note: str, slug: str | None = None) -> Result:
    entry = make_entry("progress", text=note)
    if slug is not None:
        validate_slug(slug)
        start = find_in_flight(ctx, slug, "given progress").pile
    else:
        branch = branch_of(ctx)
        mine = []
        for name, locs in sorted(ctx.backend.in_flight().items()):
            try:
                claim = ctx.backend.load(locs[0]).claim_of_record()
            except (BacklogError, FileNotFoundError):  # unreadable, or left flight since the listing
                continue
            if claim is not None and claim.get("branch") == branch:
                mine.append(locs[0])
        if not mine:
            raise BacklogError(f"no in-flight task is claimed on branch {branch}: use --slug SLUG")
        if len(mine) > 1:
            raise BacklogError(
                f"several in-flight tasks are claimed on branch {branch}: "
                f"{', '.join(l.slug for l in mine)}; use --slug SLUG"
            )
        slug, start = mine[0].slug, mine[0].pile

    def check() -> tuple[Located, bytes]:
        now = find_in_flight(ctx, slug, "given progress")
        if now.pile != start:
            raise BacklogError(f"{slug} is now in {now.pile}/")
        return now, ctx.backend.read(now)

    def body(loc: Located, data: bytes) -> Result:
        message = None if loc.shared else f"progress({slug}) {entry.text}"
        new = append_line(data, entry, ctx.backend.display(loc.pile, slug))
        ctx.backend.apply(slug, loc, loc.pile, new, message, old=data)
        shown = ctx.backend.display(loc.pile, slug)
        return Result({"slug": slug, "pile": loc.pile, "path": shown, "note": entry.text}, [shown])

    return locked_change(ctx, slug, check)(body)


def edit_frontmatter(data: bytes, key: str, value: str) -> bytes:
    """Set one top-level frontmatter field, touching no other byte of the spec."""
    text = data.decode("utf-8")
    newline = "\r\n" if "\r\n" in text.split("\n", 1)[0] + "\n" else "\n"
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    body = text[len(bom):]
    line = f"{key}: {value}{newline}"
    lines = body.splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        return (bom + "---" + newline + line + "---" + newline + newline + body).encode()
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if end is None:
        raise InvalidInput("frontmatter is not closed by a `---` line")
    for i in range(1, end):
        if re.match(rf"^{re.escape(key)}\s*:", lines[i]):
            j = i + 1
            while j < end and (lines[j].startswith((" ", "\t", "-")) and not re.match(r"^-{3}\s*$", lines[j])):
                j += 1
            lines[i:j] = [line]
            return (bom + "".join(lines)).encode()
    lines.insert(end, line)
    return (bom + "".join(lines)).encode()


def retry(ctx: Context, slug: str, reason: str, sets: list[str] | None = None) -> Result:
    validate_slug(slug)
    entry = make_entry("retried", text=reason)
    branch_of(ctx)
    edits = []
    for item in sets or []:
        key, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", key.strip()) or not value.strip() or "\n" in value:
            raise InvalidInput(f"invalid --set {item!r}: expected KEY=VALUE")
        edits.append((key.strip(), value.strip()))

    def check() -> tuple[Located, bytes]:
        locs = ctx.backend.locate(slug)
        if not locs:
            settled = ctx.backend.settled(slug)
            where = f" (it failed on branch {settled.branch}: retry it there)" if settled else ""
            raise BacklogError(f"no task {slug} in failed/{where}")
        loc = locs[0]
        if len(locs) > 1 or loc.pile != FAILED:
            if any(l.pile == "done" for l in locs):
                raise BacklogError(f"{slug} is in done/, which is terminal: add a new task that names it")
            raise BacklogError(f"{slug} is in {_where(locs)}, not failed/: only failed tasks can be retried")
        return loc, ctx.backend.read(loc)

    def body(loc: Located, data: bytes) -> Result:
        new = data
        for key, value in edits:
            new = edit_frontmatter(new, key, value)
        parse_task(slug, ctx.backend.display("todo", slug), new, ctx.project.defaults)  # refuse bad values
        new = append_line(new, entry)
        record = Settled(slug, entry.ts, "retried", ctx.repo.branch or "HEAD", claimer_id())
        ctx.backend.apply(slug, loc, "todo", new, f"retry({slug}) {entry.text}", record=record, old=data)
        shown = ctx.backend.display("todo", slug)
        return Result({"slug": slug, "pile": "todo", "path": shown}, [shown])

    return locked_change(ctx, slug, check)(body)


# -- reading -------------------------------------------------------------------------------
def status(ctx: Context) -> Result:
    counts = {pile: len(ctx.backend.slugs(pile)) for pile in ctx.pipeline.all_piles}
    lines = [f"{pile}: {n}" for pile, n in counts.items()]
    flying = []
    now = now_utc()
    for slug, locs in sorted(ctx.backend.in_flight().items()):
        for loc in locs:
            item = {"slug": slug, "pile": loc.pile}
            try:
                task = ctx.backend.load(loc)
            except FileNotFoundError:
                continue  # left flight since the listing
            except BacklogError as exc:
                item["error"] = exc.message
                flying.append(item)
                lines.append(f"  {loc.pile}/{slug}  UNREADABLE: {exc.message}")
                continue
            claim = task.claim_of_record()
            start = clock_start(task, loc)
            left = start + task.timeout - now
            item.update(
                claimer=claim.get("claimer") if claim else None,
                branch=claim.get("branch") if claim else None,
                since=format_ts(start),
                age=format_duration(now - start),
                budget=budget(task),
                stale=left < timedelta(0),
            )
            flying.append(item)
            mark = "  STALE" if item["stale"] else ""
            lines.append(
                f"  {loc.pile}/{slug}  {item['claimer'] or '?'} @ {item['branch'] or '?'}"
                f"  age {item['age']} of {item['budget']}{mark}"
            )
    return Result({"counts": counts, "in_flight": flying, "backend": ctx.backend.name}, lines)


def _entry_dict(e) -> dict:
    return {"ts": format_ts(e.ts), "kind": e.kind, **dict(e.fields), **({"text": e.text} if e.text else {})}


def show(ctx: Context, slug: str) -> Result:
    validate_slug(slug)
    loc = find_one(ctx, slug)
    task = ctx.backend.load(loc)
    claim = task.claim_of_record()
    meta = dict(task.meta)
    meta.update(priority=task.priority, timeout=task.timeout_text, dependencies=task.dependencies)
    data = {
        "slug": slug,
        "pile": loc.pile,
        "path": ctx.backend.display(loc.pile, slug),
        "title": task.title,
        "frontmatter": {k: (v if isinstance(v, (str, int, float, bool, list, dict, type(None))) else str(v)) for k, v in meta.items()},
        "claim": _entry_dict(claim) if claim else None,
        "log": [_entry_dict(e) for e in task.log],
    }
    lines = [f"{data['path']}  ({loc.pile})"]
    if task.title:
        lines.append(f"title: {task.title}")
    lines.append(f"priority: {task.priority}")
    lines.append(f"timeout: {budget(task)}")
    if task.dependencies:
        lines.append("dependencies: " + ", ".join(task.dependencies))
    if claim:
        lines.append(f"claim: {claim.get('claimer')} @ {claim.get('branch')} since {format_ts(claim.ts)}")
    from .task import render_log_line

    if task.log:
        lines.append("log:")
        lines += [f"  {render_log_line(e)}" for e in task.log]
    return Result(data, lines)


def list_pile(ctx: Context, pile: str | None = None) -> Result:
    pile = pile or "todo"
    if pile not in ctx.pipeline.all_piles:
        raise InvalidInput(f"unknown pile {pile!r}: piles are {', '.join(ctx.pipeline.all_piles)}")
    done = ctx.backend.slugs("done")
    items = []
    lines = []
    for slug, (entry, summary) in sorted(ctx.backend.summaries(pile).items(), key=lambda kv: (kv[1][1].priority, kv[0])):
        if summary.error:
            items.append({"slug": slug, "error": summary.error})
            lines.append(f"{slug}  INVALID: {summary.error}")
            continue
        blocked = [d for d in summary.dependencies if d not in done]
        items.append({"slug": slug, "priority": summary.priority, "ready": not blocked, "blocked_by": blocked})
        state = "ready" if not blocked else f"blocked by {', '.join(blocked)}"
        lines.append(f"{slug}  priority {summary.priority}  {state}")
    return Result({"pile": pile, "tasks": items}, lines)


def where(ctx: Context) -> Result:
    piles = ctx.backend.where()
    shared = str(ctx.backend.shared_root)
    lines = [f"backend: {ctx.backend.name}", f"shared root: {shared}"]
    lines += [f"{name}: {path}" for name, path in piles.items()]
    return Result({"backend": ctx.backend.name, "shared_root": shared, "piles": piles}, lines)
