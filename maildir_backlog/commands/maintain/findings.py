"""What the janitor reports: the eight buckets in their printed order, one `Finding` per line,
and the result assembled from them (lines for people, buckets for --json, the exit code)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...context import Result

ADVANCED = "ADVANCED BUT NOT MOVED"
TIMED_OUT = "TIMED OUT"
DUPLICATE = "DUPLICATE"
UNRESOLVABLE = "UNRESOLVABLE DEPS"
CYCLES = "CYCLES"
ORPHANED = "ORPHANED SHARED IN-FLIGHT"
SETTLED_ELSEWHERE = "SETTLED ELSEWHERE"
LAYOUT = "LAYOUT"
BUCKETS = (ADVANCED, TIMED_OUT, DUPLICATE, UNRESOLVABLE, CYCLES, ORPHANED, SETTLED_ELSEWHERE, LAYOUT)
ADVISORY = BUCKETS[3:]


@dataclass
class Finding:
    bucket: str
    path: str
    detail: str
    slug: str | None = None
    fixed: bool = False  # a repair was made (in a dry run: would be made)
    error: bool = False  # a repair was attempted and failed

    def line(self) -> str:
        return f"{self.bucket}: {self.path} ({self.detail})"

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "detail": self.detail, "slug": self.slug, "fixed": self.fixed, "error": self.error}


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
