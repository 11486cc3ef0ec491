"""The read-only verbs: `status`, `show`, `list`, `ready` and `where`. They describe the clone,
not just this branch (SPEC §5 *Truthful views*): a todo copy in flight elsewhere says by whom,
one settled on another branch says where, the intake branch's tasks are shown, and a task is
counted once."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

from .. import views
from ..clock import format_duration, format_ts, now_utc
from ..context import Context, Lines, Result, remote_note
from ..errors import BacklogError, InvalidInput
from ..lifecycle import budget, clock_start, time_left, unmet
from ..logline import LogEntry, render_log_line
from ..state import Located, Model
from ..task import Slug, Task, description
from ..typed import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..state import RemoteMarks


def status(ctx: Context) -> Result:
    seen = Model(ctx).clone()
    counts, stale, marks = seen.counts, seen.stale, seen.marks
    lines = [f"{pile}: {n}" for pile, n in counts.items()]
    if stale:
        lines.append(
            f"  (not counted: {len(stale)} stale todo cop{'ies' if len(stale) > 1 else 'y'} on this branch,"
            " in flight or settled elsewhere; see `backlog list`)"
        )
    if seen.not_tasks:
        files = sum(seen.not_tasks.values())
        where = ", ".join(f"{pile}/ {n}" for pile, n in seen.not_tasks.items())
        lines.append(
            f"  (not counted: {files} file{'s' if files > 1 else ''} whose name is not a task's, in {where};"
            " `backlog maintain` names them)"
        )
    incoming = seen.incoming
    if incoming:
        lines.append(
            f"  (todo includes {incoming} task{'s' if incoming > 1 else ''} of the intake branch not merged here)"
        )
    flying: list[dict[str, Any]] = []
    now = now_utc()
    for slug, locs in sorted(seen.in_flight.items()):
        for loc in locs:
            item: dict[str, Any] = {"slug": slug, "pile": loc.pile}
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
            left = time_left(task, loc, now)
            item.update(
                claimer=claim.get("claimer") if claim else None,
                branch=claim.get("branch") if claim else None,
                since=format_ts(start),
                age=format_duration(now - start),
                budget=budget(task, loc),
                stale=left is not None and left < timedelta(0),
            )
            times = views.clock(ctx, task, loc, now)  # the machine's view: seconds and ISO times
            item.update({key: times[key] for key in ("budget_seconds", "age_seconds", "deadline")})
            if marks is not None and slug in marks.displaced:  # another clone took it over or ended it
                item["elsewhere"] = marks.displaced[slug]
            flying.append(item)
            mark = "  STALE" if item["stale"] else ""
            mark += f"  ELSEWHERE: {item['elsewhere']}" if "elsewhere" in item else ""
            lines.append(
                f"  {loc.pile}/{slug}  {item['claimer'] or '?'} @ {item['branch'] or '?'}"
                f"  age {item['age']} of {item['budget']}{mark}"
            )
    data = {
        "counts": counts,
        "in_flight": flying,
        "backend": ctx.backend.name,
        "stale": stale,
        "not_tasks": seen.not_tasks,
    }
    return _with_remote(Result(data, lines), marks)


def _with_remote(result: Result, marks: RemoteMarks | None) -> Result:
    """A view's result with the remote's state: `"remote"` is `"reached"`, `"unreachable"` (and
    one stderr line says so) or None (no remote declared)."""
    if marks is None:
        return result.plus(data={"remote": None})
    return result.plus(data={"remote": marks.status}, stderr=marks.note())


def show(ctx: Context, slug: Slug) -> Result:
    """One task, wherever the clone knows it: this worktree's piles and the shared ones, else the
    intake branch's todo/ (a task not merged here yet), else the copy on the branch where the
    ledger says it settled (its state, branch and time, and that copy's log)."""
    found = Model(ctx).shown(slug)
    loc, data_bytes, settled = found.loc, found.data, found.settled
    task = ctx.backend.load(loc, found.text)
    claim = task.claim_of_record()
    times = views.clock(ctx, task, loc)
    data = {
        "slug": slug,
        "pile": loc.pile,
        "path": ctx.backend.display(loc.pile, slug) if data_bytes is None else str(loc.path),
        "title": task.title,
        "description": description(task.data, task.path),
        "frontmatter": views.frontmatter(task),
        "claim": views.entry(claim) if claim else None,
        "log": [views.entry(e) for e in task.log],
        **{key: times[key] for key in ("budget", "budget_seconds", "deadline", "since")},
    }
    if settled is not None:
        data["settled"] = {"state": settled.outcome, "branch": settled.branch, "at": format_ts(settled.ts)}
    seen = found.remote  # SPEC §8: what the remote holds of it (another clone's claim or settlement)
    data["remote"] = seen.status
    if seen.status == "reached":
        data["remote_record"] = seen.record
    lines = [f"{data['path']}  ({loc.pile})"]
    if settled is not None:
        lines.append(f"settled: {settled.outcome} on branch {settled.branch} at {format_ts(settled.ts)}")
    elif seen.copy is not None and loc == seen.copy[0]:
        lines.append("on the remote only (this clone has no copy of it)")
    elif found.superseded is not None:
        shown = ctx.backend.display(found.superseded.pile, slug)
        lines.append(f"retried since: {shown} here is the earlier attempt; the task is todo again")
    elif data_bytes is not None:
        lines.append(f"on the intake branch only (not merged into {ctx.repo.branch or 'this worktree'} yet)")
    lines += seen.lines
    return Result(data, lines + _task_lines(ctx, task, loc, claim), stderr=seen.note)


def _task_lines(ctx: Context, task: Task, loc: Located, claim: LogEntry | None) -> list[str]:
    """`show`'s text of the task itself: its fields, its claim of record, its log."""
    lines = [f"title: {task.title}"] if task.title else []
    lines.append(f"priority: {task.priority}")
    lines.append(f"timeout: {budget(task, loc) if ctx.pipeline.is_in_flight(loc.pile) else task.budget_in('')}")
    if task.dependencies:
        lines.append("dependencies: " + ", ".join(task.dependencies))
    if claim:
        lines.append(f"claim: {claim.get('claimer')} @ {claim.get('branch')} since {format_ts(claim.ts)}")
    if task.log:
        lines.append("log:")
        lines += [f"  {render_log_line(e)}" for e in task.log]
    if task.unreadable:  # never hides the rest of the log; `maintain` reports them under LAYOUT
        lines.append("log lines this tool cannot read (as written):")
        lines += [f"  {line}" for line in task.unreadable]
    return lines


def _todo_list(ctx: Context) -> Result:
    items: list[dict[str, Any]] = []
    lines = []
    states, marks = Model(ctx).todo()
    for t in states:
        item: dict[str, Any] = {"slug": t.slug, "priority": t.priority, "state": t.state, "where": t.where}
        item.update(ready=t.state == "ready", blocked_by=list(t.blocked_by))
        if t.state == "invalid":
            item["error"] = t.detail
        elif t.detail:
            item["detail"] = t.detail
        items.append(item)
        place = "" if t.where == "here" else f"  ({t.where})"
        if t.state == "invalid":
            lines.append(f"{t.slug}  INVALID: {t.detail}{place}")
            continue
        shown = {
            "blocked": f"blocked by {t.detail}",
            "in flight": f"in flight elsewhere: {t.detail}",
            "settled elsewhere": f"settled elsewhere: {t.detail}",
        }.get(t.state, t.state)
        lines.append(f"{t.slug}  priority {t.priority}  {shown}{place}")
    return _with_remote(Result({"pile": "todo", "tasks": items}, lines), marks)


def ready(ctx: Context, limit: int | None = None) -> Result:
    """What auto-pick would choose, in its order, without claiming. The text is made only when it
    is printed (`Lines`): `--json` at 100,000 tasks does not pay for it."""
    if limit is not None and limit < 1:
        raise InvalidInput(f"invalid --limit {limit}: expected a whole number >= 1")
    skipped: list[str] = []
    model = Model(ctx)
    known: dict[str, str | None] = {}
    offer, marks = model.offered(skipped, known, limit)
    offer = offer.head(limit)
    titles = model.titles(offer.slugs(), offer.places, known)
    places = offer.places
    tasks = [
        {"slug": slug, "title": titles[slug], "priority": priority, "where": places.get(slug, "here")}
        for priority, slugs in offer.groups
        for slug in slugs
        if slug in titles  # (not: moved on since the listing)
    ]
    lines = Lines(lambda: _ready_lines(tasks))
    result = Result({"tasks": tasks}, lines, warnings=skipped, stderr=[] if tasks else ["no available tasks"])
    return _with_remote(result, marks)


def _ready_lines(tasks: list[dict[str, Any]]) -> Iterator[str]:
    """`ready`'s text: a line per task."""
    for t in tasks:
        place = "" if t["where"] == "here" else f"  ({t['where']})"
        yield f"{t['slug']}  priority {t['priority']}  {t['title'] or ''}".rstrip() + place


def list_pile(ctx: Context, pile: str | None = None) -> Result:
    pile = pile or "todo"
    if pile not in ctx.pipeline.all_piles:
        raise InvalidInput(f"unknown pile {pile!r}: piles are {', '.join(ctx.pipeline.all_piles)}")
    if pile == "todo":
        return _todo_list(ctx)
    summaries, done = Model(ctx).pile(pile)
    before_claim = pile in ctx.pipeline.intake  # readiness only means something before the claim point
    items: list[dict[str, Any]] = []
    lines = []
    for slug, summary in sorted(summaries.items(), key=lambda kv: (kv[1].priority, kv[0])):
        if summary.error:
            items.append({"slug": slug, "error": summary.error})
            lines.append(f"{slug}  INVALID: {summary.error}")
            continue
        if not before_claim:  # claimed, finished or failed: neither ready nor blocked
            items.append({"slug": slug, "priority": summary.priority, "ready": None, "blocked_by": []})
            lines.append(f"{slug}  priority {summary.priority}")
            continue
        blocked = unmet(ctx, summary.dependencies, done)
        items.append({"slug": slug, "priority": summary.priority, "ready": not blocked, "blocked_by": blocked})
        readiness = "ready" if not blocked else f"blocked by {', '.join(blocked)}"
        lines.append(f"{slug}  priority {summary.priority}  {readiness}")
    from .. import crossclone  # the remote's word: imported by the verbs that read it, not by `status`

    return _with_remote(Result({"pile": pile, "tasks": items}, lines), crossclone.remote_marks(ctx, []))


def where(ctx: Context) -> Result:
    name, shared, piles = Model(ctx).layout()
    lines = [f"backend: {name}", f"shared root: {shared}"]
    lines += [f"{pile}: {path}" for pile, path in piles.items()]
    result = Result({"backend": name, "shared_root": shared, "piles": piles}, lines)
    note = remote_note(ctx)  # SPEC §3: answered from local state, and said so
    return result.plus(data={"remote": "unconfigured"}, stderr=note) if note else result
