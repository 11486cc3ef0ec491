"""Every bound the tool puts on what it reads (SPEC §3, *Committed files are untrusted input*).

One limit for one thing, named here and nowhere else: a task file is refused above
`TASK_BYTES` wherever it comes from (the work tree, the intake branch, history, a remote record,
`add --body-file`, `retry`), so whatever `add` accepts, `take` accepts too. docs/security.md
lists them with the reasons; tests/test_security.py checks each one.
"""

from __future__ import annotations

TASK_BYTES = 1024 * 1024
"""A task file (spec and log) of any origin. The bash tool's largest seen is a few KiB."""

CLAIM_ROOM = 4 * 1024
"""What `add` keeps free of TASK_BYTES, so the claim's log line fits: a task add accepts, take accepts."""

LEAVING_BYTES = 16 * TASK_BYTES
"""A task in flight is read up to this, past TASK_BYTES (an older file, or one its leaving line took
past it), so that it can still leave flight (`logline.append_line`); past this it is refused too."""

DECLARATION_BYTES = 256 * 1024
"""`backlog/AGENTS.md`: read whole on every verb."""

CONFIG_BYTES = 1024 * 1024
"""A harness's configuration file `setup --agent` merges into (`.mcp.json`, `.codex/config.toml`,
the root `AGENTS.md`, ...): read whole, parsed, written back."""

PRIORITY_MAX = 1_000_000_000
"""`priority:` above this is refused as invalid (it is a typo, and keeps numbers printable)."""

DURATION_SECONDS = 520 * 7 * 24 * 3600
"""A duration (`timeout:`, `timeout.<pile>:`, a log line's `budget=`) of at most 520 weeks, ten
years: any budget past that is a typo, and would overflow dates."""

NUMBER_MAX = 10**18 - 1
"""Any other whole number read from a file or a ref (a ledger generation, a commit time, a size)."""

YAML_EXPANSION = 4
"""Frontmatter may expand (YAML aliases) to at most this many times its size plus 1 KiB."""

REMOTE_REFS = 200_000
"""Refs under `refs/backlog/` read from one listing; past it the rest are skipped, with a line."""

REMOTE_LISTING_BYTES = 64 * 1024 * 1024
"""Bytes of one `git ls-remote` answer: a remote that says more is cut off as broken."""

GIT_OUTPUT_BYTES = 256 * 1024 * 1024
"""Bytes any one git command may print before it is stopped (memory stays bounded)."""

RENAME_HOPS = 64
"""Renames a dependency follows (the ledger's tombstones) to the name its task has now."""


def number(text: str, bound: int) -> int | None:
    """The whole number `text` writes in ASCII digits, when it is at most `bound`; else None. The
    one parser of numbers read from files and refs (SPEC §3: numbers are bounded): the digits are
    counted before anything converts them, so a 10,000-digit number costs nothing and never
    reaches `int()` (quadratic time; refused past 4,300 digits)."""
    if not text or len(text) > len(str(bound)) or not text.isascii() or not text.isdigit():
        return None
    value = int(text)
    return value if value <= bound else None


def too_large(size: int, bound: int = TASK_BYTES) -> str:
    """The reason a task of `size` bytes is refused, in one phrase."""
    return f"too large for a task file ({size:,} bytes > {bound:,})"
