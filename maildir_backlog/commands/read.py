"""The read-only verbs: `status`, `show`, `list` and `where`."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ..context import Context, Result
from ..errors import BacklogError, InvalidInput
from ..lifecycle import budget, clock_start, find_one, time_left
from ..task import LogEntry, format_duration, format_ts, now_utc, render_log_line, validate_slug


def status(ctx: Context) -> Result:
    counts = {pile: len(ctx.backend.slugs(pile)) for pile in ctx.pipeline.all_piles}
    lines = [f"{pile}: {n}" for pile, n in counts.items()]
    flying: list[dict[str, Any]] = []
    now = now_utc()
    for slug, locs in sorted(ctx.backend.in_flight().items()):
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
            flying.append(item)
            mark = "  STALE" if item["stale"] else ""
            lines.append(
                f"  {loc.pile}/{slug}  {item['claimer'] or '?'} @ {item['branch'] or '?'}"
                f"  age {item['age']} of {item['budget']}{mark}"
            )
    return Result({"counts": counts, "in_flight": flying, "backend": ctx.backend.name}, lines)


def _entry_dict(e: LogEntry) -> dict[str, Any]:
    return {"ts": format_ts(e.ts), "kind": e.kind, **dict(e.fields), **({"text": e.text} if e.text else {})}


def _jsonable(value: object) -> object:
    return value if isinstance(value, (str, int, float, bool, list, dict, type(None))) else str(value)


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
        "frontmatter": {k: _jsonable(v) for k, v in meta.items()},
        "claim": _entry_dict(claim) if claim else None,
        "log": [_entry_dict(e) for e in task.log],
    }
    lines = [f"{data['path']}  ({loc.pile})"]
    if task.title:
        lines.append(f"title: {task.title}")
    lines.append(f"priority: {task.priority}")
    lines.append(f"timeout: {budget(task, loc) if ctx.pipeline.is_in_flight(loc.pile) else task.budget_in('')}")
    if task.dependencies:
        lines.append("dependencies: " + ", ".join(task.dependencies))
    if claim:
        lines.append(f"claim: {claim.get('claimer')} @ {claim.get('branch')} since {format_ts(claim.ts)}")
    if task.log:
        lines.append("log:")
        lines += [f"  {render_log_line(e)}" for e in task.log]
    return Result(data, lines)


def list_pile(ctx: Context, pile: str | None = None) -> Result:
    pile = pile or "todo"
    if pile not in ctx.pipeline.all_piles:
        raise InvalidInput(f"unknown pile {pile!r}: piles are {', '.join(ctx.pipeline.all_piles)}")
    done = ctx.backend.slugs("done")
    items: list[dict[str, Any]] = []
    lines = []
    summaries = ctx.backend.summaries(pile)
    for slug, (_entry, summary) in sorted(summaries.items(), key=lambda kv: (kv[1][1].priority, kv[0])):
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
