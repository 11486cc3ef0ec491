"""The REMOTE bucket (SPEC §8, with `remote:` declared): the janitor's work on the remote's record.

Run first, before the local buckets, because the remote is the authority: a verb killed between
its remote update and its local move is finished from the remote's record (crossclone.reconcile),
then another clone's claims past their budget are failed on the remote by compare-and-swap
(crossclone.fail_expired), then settled refs of tasks merged long enough ago are pruned
(crossclone.prune). Its lines come first in the output, `REMOTE: <ref or path> (detail)`, and
`--json` carries them as `buckets["REMOTE"]` (present only when a remote is declared). A repair
that failed (an unreachable remote included) makes the exit code 1.
"""

from __future__ import annotations

from ... import crossclone
from ...context import Result
from .sweep import Sweep

REMOTE = "REMOTE"


def sweep(sw: Sweep) -> list[crossclone.Repair]:
    """Reconcile, fail expired claims of other clones, prune; an unreachable remote stops the rest."""
    if sw.ctx.backend.remote is None:
        return []
    found = crossclone.reconcile(sw.ctx, sw.dry_run)
    if any(r.error and r.slug is None for r in found):
        return found  # the remote did not answer: nothing more to ask it
    found += crossclone.fail_expired(sw.ctx, sw.dry_run)
    found += crossclone.prune(sw.ctx, sw.dry_run)
    for repair in found:
        if repair.fixed and repair.slug:
            sw.handled.add(repair.slug)
    return found


def merged(result: Result, sw: Sweep, found: list[crossclone.Repair]) -> Result:
    """`result` (the local buckets) with the REMOTE bucket in front."""
    if sw.ctx.backend.remote is None:
        return result
    result.lines[:0] = [f"{REMOTE}: {r.path} ({r.detail})" for r in found]
    items = [{"path": r.path, "detail": r.detail, "slug": r.slug, "fixed": r.fixed, "error": r.error} for r in found]
    result.data["buckets"] = {REMOTE: items, **result.data["buckets"]}
    if not sw.dry_run:
        result.data["fixed"] += sum(1 for r in found if r.fixed)
    if any(r.error for r in found):
        result.code = 1
    return result
