"""The janitor's result assembled from its findings (lines for people, buckets for --json, the
exit code); the buckets and `Finding` live with the repairs (`repair/findings.py`)."""

from __future__ import annotations

from ...context import Result
from ...repair.findings import ADVISORY, BUCKETS, Finding
from ...repair.remote_bucket import REMOTE
from ...repair.remote_reconcile import Repair
from ...repair.sweep import Sweep

__all__ = ["ADVISORY", "BUCKETS", "Finding", "assemble", "merged"]


def assemble(findings: list[Finding], todo: int, in_flight: int, dry_run: bool, strict: bool) -> Result:
    """The findings bucket by bucket, then `OK: N todo, N in flight`. Exit 1 when a repair
    failed, or (with `strict`) when any advisory bucket is non-empty."""
    buckets = {name: [f for f in findings if f.bucket == name] for name in BUCKETS}
    lines = [f.line() for name in BUCKETS for f in buckets[name]]
    lines.append(f"OK: {todo} todo, {in_flight} in flight")
    fixed = 0 if dry_run else sum(1 for f in findings if f.fixed)
    code = 1 if any(f.error for f in findings) else 0
    if strict and any(buckets[name] for name in ADVISORY):
        code = 1
    data = {
        "buckets": {name: [f.as_dict() for f in buckets[name]] for name in BUCKETS},
        "ok": {"todo": todo, "in_flight": in_flight},
        "fixed": fixed,
        "dry_run": dry_run,
    }
    return Result(data, lines, code=code)


def merged(result: Result, sw: Sweep, found: list[Repair]) -> Result:
    """`result` (the local buckets) with the REMOTE bucket in front."""
    if sw.ctx.backend.remote is None:
        return result
    lines = [f"{REMOTE}: {r.path} ({r.detail})" for r in found]
    items = [{"path": r.path, "detail": r.detail, "slug": r.slug, "fixed": r.fixed, "error": r.error} for r in found]
    data = {"buckets": {REMOTE: items, **result.data["buckets"]}}
    if not sw.dry_run:
        data["fixed"] = result.data["fixed"] + sum(1 for r in found if r.fixed)
    code = result.code
    failed = [r for r in found if r.error]
    if failed:  # exit 4 when the remote's silence was all that failed: retry later (SPEC §7 exit codes)
        code = 4 if result.code == 0 and all(r.unavailable for r in failed) else 1
    return Result(
        data | {k: v for k, v in result.data.items() if k not in data},
        [*lines, *result.lines],
        result.warnings,
        result.stderr,
        code,
    )
