"""What the janitor's repairs report: the eight buckets in their printed order, one `Finding`
per line (the verb assembles them into its result: `commands/maintain/findings.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
