"""The REMOTE bucket (SPEC §8, with `remote:` declared): the janitor's work on the remote's record.

Run first, before the local buckets, because the remote is the authority: a verb killed between
its remote update and its local move is finished from the remote's record (remote_reconcile),
then another clone's claims past their budget are failed on the remote by compare-and-swap
(`fail_expired`), then settled refs of tasks done on the remote's default branch are pruned
(`prune`). Its lines come first in the output, `REMOTE: <ref or path> (detail)`, and `--json`
carries them as `buckets["REMOTE"]` (present only when a remote is declared; the verb merges
them in: `commands/maintain/findings.py`). A repair that failed makes the exit code 1; a remote
that could not be reached or did not answer in time, when nothing else failed, 4.
"""

from __future__ import annotations

import functools

from .. import crossclone
from ..change import Change, Dirs, Publish, Write
from ..context import Context, claimer_id
from ..errors import Unavailable
from ..lifecycle import terminal_event, timeout_reason
from ..logline import append_line, make_entry
from ..remote import CLAIMS, SETTLED, Lost, Remote, RemoteError, ref
from .remote_reconcile import Repair, reconcile
from .sweep import Sweep

REMOTE = "REMOTE"


def sweep(sw: Sweep) -> list[Repair]:
    """Reconcile, fail expired claims of other clones, prune; an unreachable remote stops the rest."""
    if sw.ctx.backend.remote is None:
        return []
    found = reconcile(sw.ctx, sw.dry_run)
    if any(r.error and r.slug is None for r in found):
        return found  # the remote did not answer: nothing more to ask it
    found += fail_expired(sw.ctx, sw.dry_run)
    found += prune(sw.ctx, sw.dry_run)
    for repair in found:
        if repair.fixed and repair.slug:
            sw.handled.add(repair.slug)
    return found


def fail_expired(ctx: Context, dry_run: bool = False) -> list[Repair]:
    """Fail, by compare-and-swap, every claim of another clone that is past its budget: one
    atomic push creates `settled/<slug>` with the `failed` line and deletes `claims/<slug>` if it
    still is the value read. The owning clone's next verb or `maintain` follows the record."""
    remote = ctx.backend.remote
    if remote is None:
        return []
    try:
        items, _held = crossclone.claims(ctx, remote)
    except RemoteError as exc:
        return [Repair(f"remote {remote.name}", exc.message, error=True, unavailable=isinstance(exc, Unavailable))]
    out: list[Repair] = []
    for item in items:
        if "error" in item:  # a claim ref this clone cannot read or parse: one line each, then on
            out += _unreadable(remote.name, item)
        elif item.get("stale") and not item.get("this_clone"):  # this clone's own: failed locally (TIMED OUT)
            out += _fail_one(ctx, remote, str(item["slug"]), str(item["commit"]), dry_run)
    return out


def _fail_one(ctx: Context, remote: Remote, slug: str, sha: str, dry_run: bool) -> list[Repair]:
    """Fail another clone's claim `sha` of `slug`, past its budget, unless its log already ended."""
    rec = remote.records({slug: sha}).get(slug)
    if rec is None:
        return []
    task, loc = crossclone.task_of(ctx, rec, crossclone.pile_of(ctx, rec))
    if terminal_event(task) is not None:
        return []
    reason = timeout_reason(task, loc)
    shown = ref(CLAIMS, slug)
    if dry_run:
        return [Repair(shown, f"would fail on the remote: {reason}", slug, True)]
    new = append_line(rec.data, make_entry("failed", {"by": claimer_id()}, reason), f"{slug}.md")
    try:
        ctx.backend.commit(Change((Publish(functools.partial(remote.fail_claim, slug, new, sha)),)))
    except Lost:
        return []  # its holder or another janitor acted first
    except RemoteError as exc:
        busy = isinstance(exc, Unavailable)
        return [Repair(shown, f"{reason}: could not fail it: {exc.message}", slug, error=True, unavailable=busy)]
    return [Repair(shown, f"failed on remote {remote.name}: {reason} (its clone follows)", slug, True)]


def _unreadable(name: str, item: dict[str, object]) -> list[Repair]:
    """The line for a claim ref `crossclone.claims` could not read (not a commit, no task file,
    over the size bound) or whose task does not parse; none for one that moved while listed (no
    verdict: the next run reads it). Reported, never repaired here (SPEC §3: skipped, named)."""
    error, slug = str(item["error"]), str(item["slug"])
    if error == crossclone.MOVED_WHILE_LISTING:
        return []
    shown = ref(CLAIMS, slug)
    detail = error.removeprefix(f"{shown} on remote {name} ")  # (`unreadable` names the ref first)
    return [Repair(shown, detail if detail != error else f"cannot be read: {error}", slug)]


def prune(ctx: Context, dry_run: bool = False) -> list[Repair]:
    """Delete (leased on the value read) every `settled/<slug>` of a done or cancelled task that the
    remote's default branch, read and fetched in this run, holds in `done/`, with its tombstone
    under `claims/` in the same atomic push. From then on no clone can claim the task again from
    a stale copy, fetched or not: a claim leases on the tombstone its listing showed (refused once
    it is gone), and a listing made after the prune carries a tip that holds the task in done/
    (`Remote.claim`). So no clock is consulted, neither this clone's nor the settling clone's.
    Failed tasks keep their ref (a retry reads it).

    A listing is not a snapshot: git reads the default branch's tip before the refs. A claim whose
    listing read the tip before a prune and the refs after it would see neither the ref nor the
    task in done/. So a ref is pruned only by the run after the one that found it ripe (the same
    commit, recorded in the shared root): a listing would have to stay open across two runs."""
    remote = ctx.backend.remote
    if remote is None:
        return []
    try:
        tip = remote.default_tip("reading the remote's default branch to prune", keep=False)
        if tip is None:
            return []
        done = crossclone.done_on(ctx, tip)
        held = remote.listing("listing settled tasks to prune")
        ripe = {slug: sha for slug, sha in held.settled.items() if slug in done}
        remote.fetch([ref(SETTLED, slug) for slug in ripe])
    except RemoteError as exc:
        return [Repair(f"remote {remote.name}", exc.message, error=True, unavailable=isinstance(exc, Unavailable))]
    found = remote.records(ripe)
    ripe = {
        slug: sha for slug, sha in ripe.items() if (rec := found.get(slug)) and rec.outcome() in ("done", "cancelled")
    }
    where = f"done on the default branch of remote {remote.name} ({tip[:12]})"
    before = _ripe_before(ctx)
    out: list[Repair] = []
    for slug, sha in sorted(ripe.items()):
        shown = ref(SETTLED, slug)
        if before.get(slug) != sha:
            out.append(
                Repair(
                    shown, f"{'would mark' if dry_run else 'marked'} ripe: {where}; the next run prunes it", slug, True
                )
            )
            continue
        if dry_run:
            out.append(Repair(shown, f"would prune: {where}", slug, True))
            continue
        try:
            tomb = held.tombs.get(slug) == sha
            ctx.backend.commit(Change((Publish(functools.partial(remote.prune, slug, sha, tomb, f"pruning {shown}")),)))
        except Lost:
            continue
        except RemoteError as exc:
            busy = isinstance(exc, Unavailable)
            out.append(Repair(shown, f"could not prune it: {exc.message}", slug, error=True, unavailable=busy))
            continue
        del ripe[slug]
        out.append(Repair(shown, f"pruned: {where}", slug, True))
    if not dry_run:
        _record_ripe(ctx, ripe)
    return out


def _ripe_before(ctx: Context) -> dict[str, str]:
    """What the last run recorded as ripe (slug → commit); nothing when unreadable."""
    try:
        text = ctx.layout.ripe.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    pairs = (line.split(" ") for line in text.splitlines())
    return {pair[0]: pair[1] for pair in pairs if len(pair) == 2}


def _record_ripe(ctx: Context, ripe: dict[str, str]) -> None:
    path = ctx.layout.ripe
    new = "".join(f"{slug} {sha}\n" for slug, sha in sorted(ripe.items())).encode()
    old = path.read_bytes() if path.is_file() else None
    if new != (old or b""):
        ctx.backend.commit(Change((Dirs(path.parent), Write(path, old, new or None))))
